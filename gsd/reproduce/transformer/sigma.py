r"""Per group, TRL's own update against the group's σ-term: the identity
:math:`\mathbb{E}[g\mid k] = \hat\sigma_0^2/(\hat\sigma_1+\epsilon)\,\nabla p/(p(1-p))` checked
one group at a time, through TRL 1.16.0's ``_compute_loss`` on a task whose p is exact.
"""

from __future__ import annotations

import numpy as np

from ...errors import InputError
from .task import Task, torch_threads
from .update import LOSS_TYPES, TRL_DDOF, TRL_EPS, probe_trainer, prompt_gradients


def sigma_update(
    task: Task, *, G: int = 8, draws: int = 50, loss_types=("dr_grpo", "grpo"), seed: int = 0, threads: int = 1
) -> dict:
    r"""Per group, TRL's own update (``scale_rewards="group"``) projected on :math:`\nabla p_x`
    against the group's σ-term :math:`\hat\sigma_0^2/(\hat\sigma_1+10^{-4})` (σ̂ of its 0/1
    rewards, ddof 0 and TRL's ddof 1): the identity :math:`\mathbb{E}[g\mid k] =
    \hat\sigma_0^2/(\hat\sigma_1+\epsilon)\,\nabla p/(p(1-p))` for a sequence-level update.

    One group of every prompt per call of ``_generate_and_score_completions`` (``draws`` calls), so
    each prompt's input-embedding row (:meth:`Task.prompt_rows`) carries that one group's
    gradient.  y = (projection, rescaled as in :func:`measured_update`) · p(1−p)/‖∇p‖².

    Returns
    -------
    dict
        Per loss type: ``slope`` (least squares through 0 of y on the σ-term over every group, 1
        for the identity) with ``slope_lo``/``slope_hi`` (normal 95 %), ``r2_k`` (R² of the line
        slope·x as a prediction of the mean y per k, each k weighted by its groups),
        ``r2_cells`` (the same over (prompt, k) cells of ≥ 5 groups), ``by_k`` (mean y and groups
        per k), ``slope_hard``/``slope_easy`` (prompts with p < 1/2, ≥ 1/2).
    """
    import tempfile

    import torch

    bad = [lt for lt in loss_types if lt not in LOSS_TYPES]
    if bad:
        raise InputError(f"unknown loss_type {bad[0]!r}: use {LOSS_TYPES}")
    if not (isinstance(draws, (int, np.integer)) and 2 <= draws <= 10**6):
        raise InputError(f"draws must be an integer in [2, 1000000], got {draws!r}")
    with torch_threads(threads):
        p, emb, rows, dp = prompt_gradients(task)
        P = len(rows)
        batch = [{"prompt": q} for q in task.prompts for _ in range(G)]
        B = len(batch)
        proj = {lt: np.empty((draws, P)) for lt in loss_types}
        k = np.empty((draws, P), np.int64)
        inv_len = 0.0
        right = task.right_mask(task.model.config.vocab_size)
        with tempfile.TemporaryDirectory() as tmp:
            tr = probe_trainer(task, G, B, tmp)
            tr.scale_rewards = "group"
            for d in range(draws):
                torch.manual_seed(seed * 1_000_003 + d)
                inputs = tr._generate_and_score_completions(batch)
                # the right answers of each group, from the completions themselves (the reward's rule)
                first = inputs["completion_ids"][:, 0].numpy().reshape(P, G)
                k[d] = right[np.arange(P)[:, None], first].sum(1)
                inv_len += float((1.0 / inputs["completion_mask"].sum(-1).double().clamp(min=1.0)).mean())
                for lt in loss_types:
                    tr.loss_type = lt
                    tr.model.zero_grad(set_to_none=True)
                    tr._compute_loss(tr.model, inputs).backward()
                    proj[lt][d] = (-emb.grad[rows].double() * (B / G) * dp).sum(-1).numpy()
        task.model.zero_grad(set_to_none=True)
        task.model.eval()
    scale = {"grpo": draws / inv_len, "dr_grpo": task.max_len}
    var = k * (G - k) / G**2
    xs = var / (np.sqrt(k * (G - k) / (G * (G - TRL_DDOF))) + TRL_EPS)
    norm = p * (1 - p) / (dp * dp).sum(-1).numpy()
    out = {"G": G, "draws": draws, "p": p.tolist(), "groups": int(k.size)}
    for lt in loss_types:
        y = proj[lt] * scale.get(lt, np.nan) * norm
        res = {}
        for name, keep in (("", np.ones(P, bool)), ("_hard", p < 0.5), ("_easy", p >= 0.5)):
            xx, yy = xs[:, keep].ravel(), y[:, keep].ravel()
            b = float((xx * yy).sum() / (xx * xx).sum())
            se = float(np.sqrt(((yy - b * xx) ** 2).sum() / (xx.size - 1) / (xx * xx).sum()))
            res[f"slope{name}"], res[f"slope{name}_lo"], res[f"slope{name}_hi"] = b, b - 1.96 * se, b + 1.96 * se
        by_k = []
        for j in range(G + 1):
            m = k == j
            by_k.append(
                {
                    "k": j,
                    "x": float(xs[m][0]) if m.any() else np.nan,
                    "y": float(y[m].mean()) if m.any() else np.nan,
                    "n": int(m.sum()),
                }
            )
        cells = [
            (xs[:, i][k[:, i] == j][0], y[:, i][k[:, i] == j].mean(), (k[:, i] == j).sum())
            for i in range(P)
            for j in range(G + 1)
            if (k[:, i] == j).sum() >= 5
        ]
        res["r2_k"] = _weighted_r2([(c["x"], c["y"], c["n"]) for c in by_k if c["n"] > 0], res["slope"])
        res["r2_cells"] = _weighted_r2(cells, res["slope"])
        res["by_k"] = by_k
        out[lt] = res
    return out


def _weighted_r2(cells, slope) -> float:
    """R² of ``slope·x`` as a prediction of the cells' mean y, each cell weighted by its count (NaN
    without two cells)."""
    if len(cells) < 2:
        return float("nan")
    x, y, n = (np.array([c[i] for c in cells], float) for i in range(3))
    ybar = (n * y).sum() / n.sum()
    return float(1 - (n * (y - slope * x) ** 2).sum() / (n * (y - ybar) ** 2).sum())
