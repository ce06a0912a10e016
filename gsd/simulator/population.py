"""Where the prompts start: the initial success probability of each prompt (:ref:`theory-paper`).

Three sources, all giving a float64 numpy array of ``n_prompts`` values in [p_min, p_max]:

* ``bigmath``: the shipped Big-Math solve rates p̂ = k/64 (:func:`gsd.io.data.load_bigmath`);
* ``file``: a user's per-problem solve rates (:func:`gsd.io.data.load_solve_rates`);
* ``beta``: a mixture of Beta(a, b) components with the given weights.

The paper's campaign keeps the interior rates (0 < p̂ < 1), draws 6,000 of them without
replacement and clips them to [0.02, 0.98] so that every logit is finite.

Random streams: each run derives independent seeds for the population, the network's init and
the rollouts from its one ``seed`` (numpy ``SeedSequence``), so that e.g. the MLP embeddings
and the first rollouts are not drawn from the same stream.
"""

from __future__ import annotations

import numpy as np

from ..core.arrays import is_tensor
from ..errors import InputError
from ..io.data import load_bigmath, load_solve_rates
from .ledger import N_QUARTILES, work_array

__all__ = ["initial_solve_rates", "sub_seed", "initial_quartiles", "population_state"]

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
        # Scaled by the largest first: weights near 1.8e308 would sum to inf (and tiny ones to 0).
        weights = mix[:, 0] / mix[:, 0].max()
        weights = weights / weights.sum()
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


def initial_quartiles(p0: np.ndarray) -> np.ndarray:
    """Each prompt's quartile of initial p by rank, hardest first (int64; ties by position)."""
    quart = np.empty(p0.size, dtype=np.int64)
    quart[np.argsort(p0, kind="stable")] = np.arange(p0.size) * N_QUARTILES // p0.size
    return quart


def population_state(p, quartile_at, quartile_n, runs: int) -> dict:
    """Per run of ``runs`` laid end to end in ``p`` (numpy, or torch on the run's device): mean p
    and mean 2·arcsin√p, (runs,), and the mean p per initial quartile, (runs, 4), in p's library.

    ``quartile_at``: each entry's :func:`initial_quartiles` plus 4 × its run (one sum fills every
    run's bins); ``quartile_n``: prompts per (run, quartile).  Every engine's state columns
    (``mean_p``, ``mean_arcsin``, ``mean_p_q1`` …) come from here: the numpy engine's programs, the
    torch engine's runs and its programs.
    """
    if is_tensor(p):
        import torch

        q_sum = torch.zeros(runs * N_QUARTILES, device=p.device, dtype=p.dtype).index_add_(
            0, quartile_at.reshape(-1), p.reshape(-1)
        )
        mean_arcsin = (2 * torch.asin(p.sqrt())).reshape(runs, -1).mean(1)
    else:
        q_sum = np.bincount(quartile_at.reshape(-1), weights=p.reshape(-1), minlength=runs * N_QUARTILES)
        # arcsin√p in a kept array of p's dtype, doubled after the mean: doubling is exact, so
        # these are the bits of the mean of 2·arcsin√p, one pass and one fresh array fewer
        work = work_array("arcsin", p, p.dtype)
        mean_arcsin = 2 * np.arcsin(np.sqrt(p, out=work), out=work).reshape(runs, -1).mean(1)
    return {
        "mean_p": p.reshape(runs, -1).mean(1),
        "mean_arcsin": mean_arcsin,
        "mean_p_q": q_sum.reshape(runs, N_QUARTILES) / quartile_n.reshape(runs, N_QUARTILES),
    }
