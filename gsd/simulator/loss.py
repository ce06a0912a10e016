"""Advantages and the policy loss of one step, on the cell counts of :class:`~.sampling.Groups`.

* :class:`AdvantageTable`: binary rewards make a group's advantages a function of (G, k, r_i)
  only, so the math core's :func:`gsd.core.groups.advantages` is evaluated once on every possible
  group of every group size the run may use, and a step gathers from that table — the same
  numbers, without per-step reductions over groups.
* :func:`policy_loss`: L = −Σ_prompts (1/G_j) Σ_answers C_i + β·Σ_prompts (1/G_j) Σ_answers k3_i,
  with C_i = A_i·log π(y_i) on a single on-policy epoch (its gradient is the score-function
  estimate) and the clipped surrogate of :func:`gsd.losses.clipped_surrogate` otherwise; k3 is
  :func:`gsd.losses.k3` against the frozen initial policy.  Equal answers are summed once,
  weighted by their count.  On the first epoch ∂L/∂z_j = −g_j, the per-prompt update of
  :ref:`theory-identity`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..extras import require_torch

torch = require_torch("the torch engine (gsd.simulator.loss)")
import torch.nn.functional as F

from ..core.groups import advantages
from ..losses.kl import k3_of_log_ratio
from ..losses.surrogate import clipped_surrogate_unchecked

__all__ = ["AdvantageTable", "LossTerms", "log_pi", "policy_loss"]


class AdvantageTable:
    """A[G, k, r]: the advantage of a reward r (0 = marked right, 1 = marked wrong) in a group
    of G answers of which k are marked right, for every G in ``sizes`` (zeros elsewhere,
    including G = 0, a skipped prompt).

    Row k of the canonical group of size G is k ones then G − k zeros; its first entry is a
    right reward's advantage (k ≥ 1), its last a wrong one's (k < G).  Entries that no group
    can use (a right reward at k = 0) hold that row's wrong-reward value, which every count
    weights by 0.
    """

    def __init__(self, sizes, method: str, *, ddof: int, eps: float, dtype, device):
        sizes = sorted({int(g) for g in sizes})
        self.g_max = sizes[-1]
        width = self.g_max + 1
        table = torch.zeros(width, width, 2, dtype=dtype, device=device)
        for g in sizes:
            canon = (torch.arange(g, device=device)[None, :] < torch.arange(g + 1, device=device)[:, None]).to(dtype)
            a = advantages(canon, method, ddof=ddof, eps=eps)  # (g + 1, g), the core
            table[g, : g + 1, 0], table[g, : g + 1, 1] = a[:, 0], a[:, -1]
        self.flat = table.reshape(width * width, 2)

    def lookup(self, G: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """(B, 2) advantages of a right and a wrong reward in each prompt's kept group."""
        return self.flat.index_select(0, G * (self.g_max + 1) + k)


@dataclass
class LossTerms:
    """The loss of one epoch and what the ledger reads from it (all tensors, on the device)."""

    loss: torch.Tensor  # the total, to backpropagate
    pg_loss: torch.Tensor  # its policy-gradient part
    kl_sum: torch.Tensor | None  # Σ_answers k3 (None without a KL penalty)
    ratio: torch.Tensor | None  # (B, 2) ratio of a right and a wrong answer (None on the plain path)


def log_pi(z: torch.Tensor) -> torch.Tensor:
    """(B, 2): log π(right), log π(wrong) = log sigmoid(±z) of a Bernoulli-logit policy."""
    return torch.stack([F.logsigmoid(z), F.logsigmoid(-z)], dim=-1)


def sum_per_run(x: torch.Tensor, runs: int) -> torch.Tensor:
    """Σ of every entry, or per run (runs > 1: the first axis holds ``runs`` equal blocks of
    prompts); a run's block is summed as its own tensor would be (same bits on CPU)."""
    return x.sum() if runs == 1 else x.reshape(runs, -1).sum(1)


_sum = sum_per_run  # the name other branches import


def policy_loss(z, n, adv, *, G, logp_old=None, z_ref=None, kl_coef=0.0, clip=None, runs: int = 1) -> LossTerms:
    """The loss of one epoch from the logits ``z`` (B,) of the batch's prompts.

    ``n``: (B, 2, 2) answer counts per (answer, reward) cell; ``adv``: (B, 2) advantage of a
    right / wrong reward; ``G``: (B,) group sizes (0 = skipped; its counts are all 0);
    ``logp_old``: (B, 2) log π(right), log π(wrong) of the sampling policy — given, the
    surrogate uses the ratio π/π_old (PPO epochs); None, the plain score-function term;
    ``clip``: (ε_low, ε_high) to clip the ratio, or None; ``z_ref``: logits of the frozen
    reference policy when ``kl_coef`` > 0.  ``runs``: the batch holds that many runs' prompts,
    one block each (:mod:`.batched`): the sums are per run, (runs,) tensors.
    """
    logp = log_pi(z)
    # Per cell (answer y, reward r) the weight n[y, r]/G of its answers in the group mean.  The
    # cells are handled as two (B, 2) views, one per reward, never summed along their size-2
    # axis: torch reduces a trailing axis of 2 ~20× slower than it adds two views.
    g = G.clamp(min=1).to(n.dtype)[:, None]
    w_r, w_w = n[..., 0] / g, n[..., 1] / g  # (B, 2) by answer: rewards marked right / wrong
    a_r, a_w = adv[:, 0:1], adv[:, 1:2]
    if logp_old is None:
        # Σ_cells w·A·log π(y) = Σ_y log π(y)·(Σ_r w[y, r]·A[r]): the constant factor first,
        # so autograd sees one (B, 2) product.
        ratio, pg_loss = None, -sum_per_run(logp * (w_r * a_r + w_w * a_w), runs)
    else:
        ratio = torch.exp(logp - logp_old)  # (B, 2), exactly 1 on the first epoch
        if clip is None:
            surrogate_r, surrogate_w = ratio * a_r, ratio * a_w
        else:
            surrogate_r = clipped_surrogate_unchecked(ratio, a_r, clip[0], clip[1])
            surrogate_w = clipped_surrogate_unchecked(ratio, a_w, clip[0], clip[1])
        pg_loss = -sum_per_run(w_r * surrogate_r + w_w * surrogate_w, runs)
    if not kl_coef:
        return LossTerms(loss=pg_loss, pg_loss=pg_loss, kl_sum=None, ratio=ratio)
    k3 = k3_of_log_ratio(log_pi(z_ref) - logp)  # (B, 2), per answer
    kl_sum = sum_per_run((n[..., 0] + n[..., 1]) * k3, runs)
    loss = pg_loss + kl_coef * sum_per_run((w_r + w_w) * k3, runs)
    return LossTerms(loss=loss, pg_loss=pg_loss, kl_sum=kl_sum, ratio=ratio)
