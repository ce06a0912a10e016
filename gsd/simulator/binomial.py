"""Exact binomial expectations E[f(k, G)], k ~ Binom(G, p), as torch ops on the run's device.

The ledger's exact update m_GRPO(p, G) = Σ_k C(G, k)·p^k(1−p)^(G−k)·f(k, G) has no closed form;
the numpy core sums it (:mod:`gsd.core.binomial`), and so does this module, on the device, so that
a GPU step never waits for the host.  It sums every k (the core's dense path), at a = min(p, 1−p)
(f is symmetric): row k of a (G+1, prompts) block is a^k·(1−a)^(G−k), the powers built by
``cumprod`` — the repeated products of the core's dense sum, in the same order — then weighted
by C(G, k)·f(k, G) (the core's binomial rows and f, :func:`gsd.core.update._grpo_term`) and summed.
The relative error is ~2G ulp, as in the core.

Each prompt may have its own G (a budget plan): the (1−a) power of row k is then gathered at
G_j − k and the weight at (k, G_j); rows k > G_j weigh 0.  Up to :data:`DEVICE_MAX_G` every
term stays a normal float; a larger G (exact sums over a window of k, with a pmf from scipy in
the core) is summed by the core on the host.
"""

from __future__ import annotations

import numpy as np

from ..extras import require_torch

torch = require_torch("the torch engine (gsd.simulator.binomial)")

from ..core.binomial import binomial_row, symmetric_expectation

__all__ = ["DEVICE_MAX_G", "device_expectation"]

#: Largest G summed on the device: C(512, 256) ≈ 4.7e152 and a^k(1−a)^(G−k) ≥ 2^−512 near the
#: mode stay normal floats (at G ≈ 1030 C(G, G/2) overflows).
DEVICE_MAX_G = 512
# Entries of one (G+1, prompts) block: bounds the temporaries (a few 32 MB float64 arrays).
_BLOCK_ENTRIES = 1 << 22

_tables: dict = {}


def _binomial_table(g_max: int, device: torch.device) -> torch.Tensor:
    """C(g, k) at [k, g] for k, g ≤ g_max (0 above the diagonal), float64 on ``device``."""
    key = (g_max, str(device))
    if key not in _tables:
        table = np.zeros((g_max + 1, g_max + 1))
        for g in range(g_max + 1):
            table[: g + 1, g] = binomial_row(g)
        _tables[key] = torch.from_numpy(table).to(device)
    return _tables[key]


def device_expectation(p: torch.Tensor, G, f, *, g_max: int) -> torch.Tensor:
    """E[f(k, G)] for k ~ Binom(G, p), f symmetric (f(k, G) = f(G − k, G)), in float64.

    ``p``: a 1-d float tensor of probabilities; ``G``: an int (every prompt) or an int64 tensor
    of p's shape, each in [1, ``g_max``]; ``f(k, G)`` takes and returns tensors
    (:func:`gsd.core.update._grpo_term`).  Above :data:`DEVICE_MAX_G` the core sums on the host.
    """
    p = p.to(torch.float64)
    if g_max > DEVICE_MAX_G:
        G_host = G if isinstance(G, int) else G.cpu().numpy()
        m = symmetric_expectation(p.cpu().numpy(), G_host, f)
        return torch.as_tensor(m, device=p.device)
    dev = p.device
    a = torch.minimum(p, 1.0 - p)
    if isinstance(G, int):
        g_max = G
    k = torch.arange(g_max + 1, device=dev)
    C = _binomial_table(g_max, dev)
    if isinstance(G, int):
        weights = C[:, G] * f(k, torch.full_like(k, G))  # (G+1,)
    else:
        G = G.to(torch.int64)
        grid_g = k[None, :].expand(g_max + 1, g_max + 1)
        grid_k = k[:, None].expand(g_max + 1, g_max + 1)
        inside = grid_k <= grid_g
        weights = torch.where(inside, C * f(torch.where(inside, grid_k, 0), grid_g), 0.0)  # [k, g]
    rows = g_max + 1
    out = torch.empty_like(a)
    cols = max(1, _BLOCK_ENTRIES // rows)
    for s in range(0, a.numel(), cols):
        x = a[s : s + cols]
        ones = torch.ones((1, x.numel()), dtype=x.dtype, device=dev)
        up = torch.cat([ones, x.expand(rows - 1, -1).cumprod(0)])  # a^k
        down = torch.cat([ones, (1.0 - x).expand(rows - 1, -1).cumprod(0)])  # (1−a)^k
        if isinstance(G, int):
            out[s : s + cols] = weights @ (up * down.flip(0))
        else:
            g = G[s : s + cols]
            index = (g[None, :] - k[:, None]).clamp(min=0)  # G_j − k, 0 where k > G_j
            pmf = up * down.gather(0, index)
            out[s : s + cols] = (weights[:, g] * pmf).sum(0)
    return out
