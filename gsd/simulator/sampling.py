"""Which prompts a step trains on, with how many answers each, and the groups they draw.

Two stages of the training step (:mod:`gsd.simulator.engine`):

* :func:`plan_batch` picks the batch and the group size of every prompt in it — a
  :class:`Batch`.  Today every prompt gets the config's ``group_size``; a budget allocator
  (see :ref:`theory-allocation`) returns its own per-prompt sizes here, 0 meaning "skipped
  this step", and every later stage follows them without another code path.
* :func:`sample_groups` draws the groups of a batch — as G Bernoulli answers per prompt
  (``rollouts = "answers"``) or as binomial counts (``"counts"``, the same groups in
  distribution) — and reduces them to one representation, :class:`Groups`: per prompt, how
  many answers fall in each (answer right/wrong) × (reward right/wrong) cell of the kept group.
  For a Bernoulli-logit policy log π(y) depends on y only, so these counts carry everything the
  loss needs; the per-answer rewards a rollout log wants are derived from them
  (:meth:`Groups.rewards`).

Random streams (fixed, so a test can replay them): per step, from the run's generator, in this
order: the batch (``randperm``, only when ``batch_size < n_prompts``); the (D, B, G_max)
uniforms of the answers or the (D, B) binomial counts; then, only with a noisy verifier, the
flips ((D, B, G_max) uniforms, or two binomials: right answers marked wrong, then wrong answers
marked right).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..extras import require_torch

torch = require_torch("the torch engine (gsd.simulator.sampling)")

__all__ = ["Batch", "Groups", "plan_batch", "sample_groups", "draw_counts", "groups_from_draws"]


@dataclass
class Batch:
    """The prompts of one step and their group sizes.

    ``idx``: indices of the batch's prompts (None = every prompt, in order); ``p``: their
    success probability (B,); ``G``: their group size (B,) int64, 0 = not sampled this step;
    ``g_max``: an upper bound of ``G`` (the last axis of per-answer tensors); ``uniform``: True
    when every entry of ``G`` equals ``g_max`` (lets the answers path skip its padding mask).
    """

    idx: torch.Tensor | None
    p: torch.Tensor
    G: torch.Tensor
    g_max: int
    uniform: bool


@dataclass
class Groups:
    """One step's groups, per prompt of the batch (B prompts; D = draws per prompt at most).

    ``n``: (B, 2, 2) answers of the kept group per cell, n[:, answer, reward] (0 = right, 1 =
    wrong), in the run's float dtype; ``k``: (B,) int64 answers the verifier marked right in
    the kept group; ``G``: (B,) int64 group sizes; ``silent_first``: (B,) bool, the first draw
    was silent (k ∈ {0, G}, a sampled prompt only); ``zero_update``: (B,) bool, the kept group
    is silent too (no update; without redraws the same as ``silent_first``); ``drawn``: (B,)
    int64 groups drawn (DAPO counts every redraw; 0 for a skipped prompt).
    """

    n: torch.Tensor
    k: torch.Tensor
    G: torch.Tensor
    silent_first: torch.Tensor
    zero_update: torch.Tensor
    drawn: torch.Tensor

    def rewards(self, g_max: int | None = None) -> torch.Tensor:
        """Per-answer rewards (B, g_max) as 0/1 in the kept groups: k ones, then G − k zeros,
        then padding (−1) beyond G.  The order of a group's answers carries no information
        (they are exchangeable), so this is the group as a trainer would log it."""
        g_max = int(self.G.max()) if g_max is None else g_max
        pos = torch.arange(g_max, device=self.k.device)
        r = (pos < self.k[:, None]).to(torch.int8)
        return r.masked_fill(pos >= self.G[:, None], -1)


def plan_batch(p_all: torch.Tensor, *, group_size: int, batch_size: int, gen: torch.Generator) -> Batch:
    """The batch of one step and the group size of each of its prompts.

    The batch is every prompt, or ``batch_size`` of them drawn without replacement (one
    ``randperm`` from the run's generator).  Every prompt in it gets ``group_size`` answers.
    A per-prompt allocation replaces the constant ``G`` tensor built here (see the module
    docstring); nothing downstream assumes it is constant.
    """
    N = p_all.shape[0]
    idx = None if batch_size in (0, N) else torch.randperm(N, generator=gen, device=p_all.device)[:batch_size]
    p = p_all if idx is None else p_all[idx]
    G = torch.full(p.shape, group_size, dtype=torch.int64, device=p.device)
    return Batch(idx=idx, p=p, G=G, g_max=group_size, uniform=True)


def draw_counts(batch: Batch, draws: int, noise: float, rollouts: str, gen: torch.Generator):
    """(right, flip_r, flip_w), each (D, B): answers right, right ones marked wrong, wrong ones
    marked right, per draw and prompt (flips None for an exact verifier)."""
    D, B, dtype, device = draws, batch.p.shape[0], batch.p.dtype, batch.p.device
    if rollouts == "counts":
        total = batch.G.to(dtype).expand(D, B)
        right = torch.binomial(total.contiguous(), batch.p.expand(D, B).contiguous(), generator=gen)
        if not noise:
            return right, None, None
        nu = torch.full((D, B), noise, device=device, dtype=dtype)
        flip_r = torch.binomial(right, nu, generator=gen)
        flip_w = torch.binomial(total - right, nu, generator=gen)
        return right, flip_r, flip_w
    shape = (D, B, batch.g_max)
    right = torch.rand(shape, generator=gen, device=device, dtype=dtype) < batch.p[:, None]
    valid = None if batch.uniform else torch.arange(batch.g_max, device=device) < batch.G[:, None]
    if valid is not None:
        right &= valid
    if not noise:
        return right.sum(-1, dtype=dtype), None, None
    flip = torch.rand(shape, generator=gen, device=device, dtype=dtype) < noise  # drawn only when used
    wrong = ~right if valid is None else valid & ~right
    return right.sum(-1, dtype=dtype), (right & flip).sum(-1, dtype=dtype), (wrong & flip).sum(-1, dtype=dtype)


def sample_groups(batch: Batch, *, draws: int, noise: float, rollouts: str, gen: torch.Generator) -> Groups:
    """Draw up to ``draws`` groups per prompt and keep the first that is not silent.

    ``draws`` > 1 is DAPO's dynamic sampling, all draws at once: a prompt whose group is silent
    (the verifier marked all its answers alike) is redrawn, up to ``draws`` groups in all;
    every drawn group counts as generation cost, and a prompt silent in every draw keeps its
    last draw, whose advantages are 0.  ``noise``: the verifier flips each reward with this
    probability; silence is what the verifier sees.
    """
    return groups_from_draws(batch, *draw_counts(batch, draws, noise, rollouts, gen))


def groups_from_draws(batch: Batch, right, flip_r=None, flip_w=None) -> Groups:
    """The kept groups from the (D, B) counts of :func:`draw_counts` (no randomness here).

    Every operation is elementwise over prompts or along the draws: a batch that concatenates
    several runs' prompts (:mod:`.batched`) gets each run's groups bit for bit.
    """
    draws = right.shape[0]
    k = right if flip_r is None else right - flip_r + flip_w  # answers the verifier marked right
    G = batch.G.to(right.dtype)
    silent = (k == 0) | (k == G)
    sampled = batch.G > 0
    if not batch.uniform:
        silent &= sampled  # a skipped prompt (G = 0) is not a silent group
    if draws == 1:
        first, zero_update, drawn, kept = silent[0], silent[0], sampled.long(), (lambda t: t[0])
    else:
        D, B = silent.shape
        lead = silent.long().cumprod(dim=0).sum(dim=0)  # silent draws before the first kept one
        drawn = torch.clamp(lead + 1, max=D) * sampled
        take = torch.clamp(lead, max=D - 1) * B + torch.arange(
            B, device=k.device
        )  # the kept draw, as an entry of (D·B,)
        first, zero_update, kept = silent[0], lead == D, (lambda t: t.reshape(D * B).index_select(0, take))
    # The cells of the kept group only, (B, 2, 2): [right & marked right, right & marked wrong],
    # [wrong & marked right, wrong & marked wrong].
    r = kept(right)
    if flip_r is None:
        zero = torch.zeros_like(r)
        n = torch.stack([r, zero, zero, G - r], dim=-1)
    else:
        fr, fw = kept(flip_r), kept(flip_w)
        n = torch.stack([r - fr, fr, fw, G - r - fw], dim=-1)
    return Groups(
        n=n.unflatten(-1, (2, 2)), k=kept(k).long(), G=batch.G, silent_first=first, zero_update=zero_update, drawn=drawn
    )
