"""Inputs of the trainer arithmetic and the simulator's population that name what is wrong."""

from __future__ import annotations

import numpy as np
import pytest

from gsd import InputError


@pytest.mark.parametrize("weights", [[1.0], [1.0, 0.5, 2.0], [[1.0, 1.0]]])
def test_trl_weights_of_the_wrong_length(weights):
    from gsd.integrations.trl import total_reward

    parts = np.array([[0.0, 1.0, 1.0], [0.5, 0.5, 0.0]])  # two reward functions, three rows
    with pytest.raises(InputError, match=r"weights: \d+ weight\(s\) for 2 reward function\(s\)"):
        total_reward(parts, weights)


@pytest.mark.parametrize("scale", [1e308, 1e-320, 1.0])
def test_beta_mixture_weights_at_the_ends_of_float64(scale):
    """Weights are relative: [w, w] at 1e308 (whose sum overflows) or 1e-320 draw as [1, 1] do."""
    from gsd.simulator.config import SimConfig
    from gsd.simulator.population import initial_solve_rates

    base = SimConfig(difficulty="beta", n_prompts=50, beta_mixture=[[1.0, 0.5, 0.5], [1.0, 2.0, 2.0]])
    scaled = SimConfig(difficulty="beta", n_prompts=50, beta_mixture=[[scale, 0.5, 0.5], [scale, 2.0, 2.0]])
    np.testing.assert_array_equal(initial_solve_rates(scaled), initial_solve_rates(base))
