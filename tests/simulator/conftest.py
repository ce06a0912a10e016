"""Helpers for the simulator tests: an independent replay of a run's rollouts."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gsd.simulator.config import resolve_engine
from gsd.simulator.population import STREAM_ROLLOUTS, initial_solve_rates, sub_seed


@pytest.fixture(autouse=True)
def _one_thread(one_torch_thread):
    """Every simulator test runs on one torch thread (the root conftest's fixture)."""


def final_state(run_dir) -> dict:
    """A finished or stopped run's checkpoint, whichever engine wrote it: ``step``, ``z`` (the
    tabular logits, numpy) and ``ledger`` (the table so far, numpy)."""
    if (run_dir / "checkpoint.npz").is_file():
        with np.load(run_dir / "checkpoint.npz", allow_pickle=False) as f:
            return {"step": int(f["step"]), "z": f["z"], "ledger": f["ledger"]}
    ckpt = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    z = ckpt["policy"]["z"].numpy() if "z" in ckpt["policy"] else None  # None: a network policy
    return {"step": ckpt["step"], "z": z, "ledger": ckpt["ledger"].numpy()}


def replay_first_step(cfg):
    """Redraw a CPU run's first-step groups from its documented random stream (that of the
    engine the config resolves to).  Returns (idx, p0, k) with k the (D, B) numpy array of right
    answers of each draw.  Nothing here calls an engine."""
    assert cfg.verifier_noise == 0
    return _replay_numpy(cfg) if resolve_engine(cfg) == "numpy" else _replay_torch(cfg)


def _replay_numpy(cfg):
    """The numpy engine draws, from numpy's PCG64 seeded with sub_seed(seed, STREAM_ROLLOUTS):
    the batch (permutation(N)[:B], only when batch_size < n_prompts), then one group per prompt
    of the batch — (G, B) uniforms, answer right iff U < p (answer-major), or right ~
    Binomial(G, p) — and, for DAPO, again for the prompts whose group was silent, in prompt
    order, up to max_draws groups.  A draw a prompt never made holds 1 (not silent)."""
    p0 = initial_solve_rates(cfg)
    dtype = np.dtype(cfg.dtype)
    z = np.log(p0 / (1.0 - p0)).astype(dtype)
    p = 1.0 / (1.0 + np.exp(-z))
    rng = np.random.Generator(np.random.PCG64(sub_seed(cfg.seed, STREAM_ROLLOUTS)))
    N, G = cfg.n_prompts, cfg.group_size
    B = cfg.batch_size or N
    idx = np.arange(N) if B == N else rng.permutation(N)[:B]
    D = cfg.max_draws if cfg.method == "dapo" else 1
    k = np.ones((D, B), dtype=np.int64)
    at = np.arange(B)
    for d in range(D):
        if cfg.rollouts == "answers":
            kd = (rng.random((G, at.size), dtype=dtype) < p[idx[at]]).sum(0)
        else:
            kd = rng.binomial(G, p[idx[at]])
        k[d, at] = kd
        at = at[(kd == 0) | (kd == G)]
        if at.size == 0:
            break
    return idx, p0, k


def _replay_torch(cfg):
    """The torch engine draws, from a torch.Generator seeded with sub_seed(seed, STREAM_ROLLOUTS): the
    batch (randperm, only when batch_size < n_prompts), then for D = max_draws (DAPO) or 1
    draws per prompt either (rollouts = "answers") U ~ (D, B, G) uniforms, answer right iff
    U < p, or (rollouts = "counts") right ~ Binomial(G, p) of shape (D, B).  Verifier noise is
    not replayed here.  Returns (idx, p0, k) with k the (D, B) numpy array of right answers.
    """
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
        k = torch.binomial(
            torch.full((D, B), float(cfg.group_size), dtype=dtype), p_b.expand(D, B).contiguous(), generator=gen
        )
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
