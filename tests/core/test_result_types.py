"""One rule for every function that broadcasts over p and G: scalars in give a numpy scalar out,
arrays in give an array of the broadcast shape out, whichever method or path computes it."""

import numpy as np
import pytest

import gsd

CASES = {
    **{f"expected_update[{m}]": (lambda p, G, m=m: gsd.expected_update(p, G, m)) for m in gsd.UPDATE_METHODS},
    "expected_update[grpo, ddof 1, eps]": lambda p, G: gsd.expected_update(p, G, ddof=1, eps=1e-4),
    "expected_update[dapo, max_draws]": lambda p, G: gsd.expected_update(p, G, "dapo", max_draws=4),
    "expected_update[verifier noise]": lambda p, G: gsd.expected_update(p, G, verifier_noise=0.1),
    "fidelity": gsd.fidelity,
    "fidelity_law": gsd.fidelity_law,
    "silent_rate": gsd.silent_rate,
    "nonsilent_rate": gsd.nonsilent_rate,
    "dapo_generation_cost": gsd.dapo_generation_cost,
    "silent_rate_subsampled": lambda p, G: gsd.silent_rate_subsampled(k=np.round(np.asarray(p) * 64), n=64, G=G),
    "difficulty_weight": lambda p, G: gsd.difficulty_weight(p),
    "large_group_weight": lambda p, G: gsd.large_group_weight(p, "grpo"),
    "arcsin_objective": lambda p, G: gsd.arcsin_objective(p),
    "required_group_size": lambda p, G: gsd.required_group_size(p, 0.05),
    "required_group_size[law]": lambda p, G: gsd.required_group_size(p, 0.05, rule="law"),
    "group_size_law": lambda p, G: gsd.group_size_law(p, 0.05),
    "group_size_for_silent_rate": lambda p, G: gsd.group_size_for_silent_rate(p, 0.01),
}

#: Functions of p alone (G is not an argument).
P_ONLY = {
    "difficulty_weight",
    "large_group_weight",
    "arcsin_objective",
    "required_group_size",
    "required_group_size[law]",
    "group_size_law",
    "group_size_for_silent_rate",
}


@pytest.mark.parametrize("name", list(CASES))
def test_scalars_in_numpy_scalar_out_arrays_in_arrays_out(name):
    f = CASES[name]
    for p, G in [(0.05, 8), (np.float64(0.3), np.int64(16)), (np.array(0.05), np.array(8))]:
        out = f(p, G)
        assert isinstance(out, np.generic) and not isinstance(out, np.ndarray), (p, G, type(out))
    one = f([0.05], [8])
    assert isinstance(one, np.ndarray) and one.shape == (1,)
    grid = f(np.array([[0.05], [0.3]]), np.array([8, 16, 64]))
    assert isinstance(grid, np.ndarray) and grid.shape == ((2, 1) if name in P_ONLY else (2, 3))
    # The scalar is the array's element: the same number by either road.
    assert f(0.3, 16) == f(np.array([0.3]), np.array([16]))[0]
