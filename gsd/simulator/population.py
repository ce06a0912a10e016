"""Where the prompts start: the initial success probability of each prompt (:ref:`theory-paper`).

Three sources, all giving a float64 numpy array of ``n_prompts`` values in [p_min, p_max]:

* ``bigmath``: the shipped Big-Math solve rates p̂ = k/64 (:func:`gsd.data.load_bigmath`);
* ``file``: a user's per-problem solve rates (:func:`gsd.data.load_solve_rates`);
* ``beta``: a mixture of Beta(a, b) components with the given weights.

The paper's campaign keeps the interior rates (0 < p̂ < 1), draws 6,000 of them without
replacement and clips them to [0.02, 0.98] so that every logit is finite.

Random streams: each run derives independent seeds for the population, the network's init and
the rollouts from its one ``seed`` (numpy ``SeedSequence``), so that e.g. the MLP embeddings
and the first rollouts are not drawn from the same stream.
"""

from __future__ import annotations

import numpy as np

from .._errors import InputError
from ..data import load_bigmath, load_solve_rates

__all__ = ["initial_solve_rates", "sub_seed"]

# Sub-stream labels of a run's seed.
STREAM_POPULATION, STREAM_INIT, STREAM_ROLLOUTS = 0, 1, 2


def sub_seed(seed: int, stream: int) -> int:
    """An independent 63-bit seed for one of a run's random streams."""
    return int(np.random.SeedSequence([int(seed), int(stream)]).generate_state(2, np.uint64)[0] >> np.uint64(1))


def _source_pool(cfg) -> np.ndarray:
    if cfg.difficulty == "bigmath":
        return load_bigmath()
    if cfg.difficulty == "file":
        return load_solve_rates(cfg.difficulty_path, cfg.difficulty_column)
    return None  # beta: sampled directly


def initial_solve_rates(cfg) -> np.ndarray:
    """The initial p of each of ``cfg.n_prompts`` prompts (deterministic given ``cfg.seed``)."""
    rng = np.random.default_rng(sub_seed(cfg.seed, STREAM_POPULATION))
    pool = _source_pool(cfg)
    if pool is None:
        mix = np.asarray(cfg.beta_mixture, dtype=np.float64)
        weights = mix[:, 0] / mix[:, 0].sum()
        comp = rng.choice(len(mix), size=cfg.n_prompts, p=weights)
        # Beta draws are interior (up to float underflow, which the clip below absorbs).
        p = rng.beta(mix[comp, 1], mix[comp, 2])
    else:
        if cfg.interior_only:
            pool = pool[(pool > 0) & (pool < 1)]
        if pool.size == 0:
            raise InputError(f"config key 'difficulty' = {cfg.difficulty!r}: the source has no usable solve rates")
        if not cfg.replace and cfg.n_prompts > pool.size:
            raise InputError(
                f"config key 'n_prompts' = {cfg.n_prompts}: the {cfg.difficulty} source has only {pool.size} "
                "usable solve rates; set replace = true to draw with replacement"
            )
        p = rng.choice(pool, size=cfg.n_prompts, replace=cfg.replace)
    return np.clip(p, cfg.p_min, cfg.p_max)
