"""Helpers for the simulator tests: an independent replay of a run's rollouts."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gsd.simulator.population import STREAM_ROLLOUTS, initial_solve_rates, sub_seed


@pytest.fixture(autouse=True)
def _one_thread(one_torch_thread):
    """Every simulator test runs on one torch thread (the root conftest's fixture)."""


def replay_first_step(cfg):
    """Redraw a CPU run's first-step groups from its documented random stream.

    The engine draws, from a torch.Generator seeded with sub_seed(seed, STREAM_ROLLOUTS): the
    batch (randperm, only when batch_size < n_prompts), then for D = max_draws (DAPO) or 1
    draws per prompt either (rollouts = "answers") U ~ (D, B, G) uniforms, answer right iff
    U < p, or (rollouts = "counts") right ~ Binomial(G, p) of shape (D, B).  Verifier noise is
    not replayed here.  Returns (idx, p0, k) with k the (D, B) numpy array of right answers.
    Nothing here calls the engine.
    """
    assert cfg.verifier_noise == 0
    p0 = initial_solve_rates(cfg)
    dtype = getattr(torch, cfg.dtype)
    # The engine's p: sigmoid(logit(p0)) in the run's dtype (equal to p0 up to rounding).
    p = torch.sigmoid(torch.logit(torch.as_tensor(p0, dtype=torch.float64)).to(dtype))
    gen = torch.Generator().manual_seed(sub_seed(cfg.seed, STREAM_ROLLOUTS))
    N = cfg.n_prompts
    B = cfg.batch_size or N
    idx = np.arange(N) if B == N else torch.randperm(N, generator=gen)[:B].numpy()
    D = cfg.max_draws if cfg.method == "dapo" else 1
    p_b = p[torch.as_tensor(idx)]
    if cfg.rollouts == "answers":
        u = torch.rand((D, B, cfg.group_size), generator=gen, dtype=dtype)
        k = (u < p_b[:, None]).sum(-1)
    else:
        k = torch.binomial(torch.full((D, B), float(cfg.group_size), dtype=dtype), p_b.expand(D, B).contiguous(), generator=gen)
    return idx, p0, k.numpy().astype(np.int64)


def expected_update_of_k(k, G, method, ddof=0, eps=0.0):
    """g for a binary group with k right (the identity of docs/theory.md with s̄₊ − s̄₋ = 1): σ²/(σ_c + eps) or σ²."""
    k = np.asarray(k, dtype=np.float64)
    sigma = np.sqrt(k * (G - k)) / G
    if method == "dr_grpo":
        return sigma**2
    sigma_c = sigma * np.sqrt(G / (G - ddof))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(sigma > 0, sigma**2 / (sigma_c + eps), 0.0)
