r"""TRL's own expected update on a task against the closed forms: the gradient of TRL 1.16.0's
``GRPOTrainer._compute_loss`` on inputs built by its own ``_generate_and_score_completions``,
averaged over many sampled groups and projected on each prompt's :math:`\nabla p_x`.

Completions go on after the first token (1 to ``max_len`` tokens in all), so TRL's token-level
loss aggregation sees lengths; the ratio of the measured update to the closed form
(:ref:`theory-any-policy`) is then the length bias of each ``loss_type``.  The probe
(:func:`probe_trainer`, :func:`prompt_gradients`) serves :mod:`.sigma` too.
"""

from __future__ import annotations

import numpy as np

from ...errors import InputError
from .task import Task, torch_threads

LOSS_TYPES = ("grpo", "bnpo", "dapo", "dr_grpo")
SCALE_REWARDS = ("group", "batch", "none")
#: TRL 1.16.0's advantage: ``(r - mean) / (std + 1e-4)`` with torch's std (ddof 1).
TRL_DDOF, TRL_EPS = 1, 1e-4


def closed_form_factor(p, G, method: str):
    r"""c(p, G) with :math:`\mathbb{E}[g] = c\,\nabla p` for a sequence-level group-mean update.

    ``"grpo"``: TRL's std (ddof 1, eps 1e-4), :math:`\mathbb{E}[\sigma^2/(\sigma_1+\epsilon)]/(p(1-p))`;
    ``"grpo_paper"``: the population std, eps 0, :math:`\varphi(G,p)/\sqrt{p(1-p)}`
    (so that :math:`c\nabla p = \varphi\,\nabla(2\arcsin\sqrt p)`); ``"dr_grpo"``: :math:`1 - 1/G`.
    """
    from ...core.update import expected_update, fidelity

    p = np.asarray(p, float)
    if method == "dr_grpo":
        return np.full_like(p, 1.0 - 1.0 / G)
    q = p * (1.0 - p)
    if method == "grpo":
        return expected_update(p, G, "grpo", ddof=TRL_DDOF, eps=TRL_EPS) / q
    if method == "grpo_paper":
        return fidelity(p, G) / np.sqrt(q)
    raise InputError(f"method must be 'grpo', 'grpo_paper' or 'dr_grpo', got {method!r}")


def reference(scale_rewards: str) -> str:
    """The closed form a setting is compared with: GRPO's (TRL's std) for ``"group"`` and
    ``"batch"`` (batch scaling has no per-prompt closed form: its ratio is what a user switching
    from group scaling gets), Dr.GRPO's for ``"none"``."""
    return "dr_grpo" if scale_rewards == "none" else "grpo"


def measured_update(
    task: Task,
    *,
    G: int = 8,
    draws: int = 100,
    copies: int = 4,
    scale_rewards=SCALE_REWARDS,
    loss_types=LOSS_TYPES,
    seed: int = 0,
    threads: int = 1,
) -> dict:
    r"""Monte Carlo of the expected per-prompt update of TRL's own loss against the closed form.

    Parameters
    ----------
    task : Task
        From :func:`build_task`; its parameters are not changed.
    G : int, optional
        TRL's ``num_generations`` (default 8).
    draws : int, optional
        Calls of ``_generate_and_score_completions`` per ``scale_rewards`` (default 100).
    copies : int, optional
        Groups of every prompt in one call (default 4): one batch holds ``copies × prompts × G``
        completions.  ``draws × copies`` groups per prompt in all.
    scale_rewards, loss_types : sequence of str, optional
        The settings (default all three, all four).
    seed : int, optional
        torch's seed before each call (the same for every ``scale_rewards``: common random numbers).
    threads : int, optional
        torch threads during the run (default 1, restored after).

    Returns
    -------
    dict
        ``p`` (per prompt, exact), ``mean_length`` and ``harmonic_length`` (completion tokens,
        over every draw), and ``rows``: per
        (``scale_rewards``, ``loss_type``) ``ratio`` with ``lo``/``hi`` (Monte Carlo 95 %,
        normal over the draws), the same over the hard prompts (p < 1/2: ``ratio_hard``,
        ``lo_hard``, ``hi_hard``) and the easy ones (``_easy``), per prompt ``ratio_per_prompt``
        and ``half_width_per_prompt``, and ``reference``.

    Notes
    -----
    Per call every prompt gets ``copies`` groups; the gradient of TRL's ``_compute_loss`` is
    taken with respect to the input embedding row of each prompt's own token, which only that
    prompt's rows reach, and projected on :math:`\nabla p_x` there.  The update is minus the
    gradient rescaled to a group mean of sequence scores: ``× B Λ / G`` per group, with B the rows
    of the batch and Λ TRL's per-token normalizer's length — ``max_completion_length`` for
    ``dr_grpo`` (a constant: the sequence-level sum, exactly), and for the token means the length
    that makes an answer's mean weight 1: the run's harmonic mean length for ``grpo`` (weight
    1/L per answer), its mean length (1/E[B/ΣL]) for ``bnpo`` and ``dapo`` (1/ΣL per batch).  A
    ratio other than 1 is then the length bias: weights that go with correctness (or with the
    score: 1/L has a gradient of its own).  The ratio is
    :math:`\sum_x \langle \bar g_x, \nabla p_x\rangle / \sum_x c_x \lVert\nabla p_x\rVert^2`
    with c from :func:`closed_form_factor`.  With one process and no gradient accumulation
    TRL's ``dapo`` normalizer (tokens of the generation batch) equals ``bnpo``'s.
    """
    import tempfile

    import torch

    bad = [s for s in scale_rewards if s not in SCALE_REWARDS] + [lt for lt in loss_types if lt not in LOSS_TYPES]
    if bad:
        raise InputError(f"unknown scale_rewards/loss_type {bad[0]!r}: use {SCALE_REWARDS} and {LOSS_TYPES}")
    for name, v, hi in (("G", G, 64), ("draws", draws, 10**6), ("copies", copies, 64)):
        if not (isinstance(v, (int, np.integer)) and (2 if name == "G" else 1) <= v <= hi):
            raise InputError(f"{name} must be an integer in [{2 if name == 'G' else 1}, {hi}], got {v!r}")
    with torch_threads(threads):
        p, emb, rows, dp = prompt_gradients(task)
        P = len(rows)
        prompts = [q for _ in range(copies) for q in task.prompts]
        batch = [{"prompt": q} for q in prompts for _ in range(G)]
        B = len(batch)
        proj = {(s, lt): np.empty((draws, P)) for s in scale_rewards for lt in loss_types}
        inv_len = batch_w = 0.0  # sums over the draws: mean 1/L of the rows, B/ΣL of the batch
        with tempfile.TemporaryDirectory() as tmp:
            tr = probe_trainer(task, G, B, tmp)
            for d in range(draws):
                for s in scale_rewards:
                    tr.scale_rewards = s
                    torch.manual_seed(seed * 1_000_003 + d)
                    inputs = tr._generate_and_score_completions(batch)
                    if s == scale_rewards[0]:  # the same completions for every s
                        L = inputs["completion_mask"].sum(-1).double().clamp(min=1.0)
                        inv_len += float((1.0 / L).mean())
                        batch_w += B / float(L.sum())
                    for lt in loss_types:
                        tr.loss_type = lt
                        tr.model.zero_grad(set_to_none=True)
                        tr._compute_loss(tr.model, inputs).backward()
                        g = -emb.grad[rows].double() * (B / G) / copies  # mean over a prompt's groups
                        proj[(s, lt)][d] = (g * dp).sum(-1).numpy()
        task.model.zero_grad(set_to_none=True)
        task.model.eval()
    # the length Λ that makes an answer's mean weight 1: 1/E[1/L] for a mean per answer, 1/E[B/ΣL]
    # for a mean per batch's tokens, max_completion_length for TRL's dr_grpo
    scale = {"grpo": draws / inv_len, "bnpo": draws / batch_w, "dapo": draws / batch_w, "dr_grpo": task.max_len}
    dp2 = (dp * dp).sum(-1).numpy()
    out = {
        "p": p.tolist(),
        "G": G,
        "groups_per_prompt": draws * copies,
        "variant": task.variant,
        "max_completion_length": task.max_len,
        "harmonic_length": scale["grpo"],
        "mean_length": scale["bnpo"],
        "rows": [],
    }
    hard = p < 0.5
    for (s, lt), v in proj.items():
        ref = reference(s)
        v = v * scale[lt]
        denom = closed_form_factor(p, G, ref) * dp2
        row = {"scale_rewards": s, "loss_type": lt, "reference": ref}
        for name, keep in (("", np.ones_like(hard)), ("_hard", hard), ("_easy", ~hard)):
            row.update(_pooled(v[:, keep], denom[keep], name))
        per = v / denom
        row["ratio_per_prompt"] = per.mean(0).tolist()
        row["half_width_per_prompt"] = (1.96 * per.std(0, ddof=1) / np.sqrt(draws)).tolist()
        out["rows"].append(row)
    return out


def prompt_gradients(task: Task):
    r"""The exact p, the input-embedding matrix, each prompt's own row of it
    (:meth:`Task.prompt_rows`) and :math:`\nabla p_x` on that row (float64, prompts × hidden)."""
    import torch

    p = task.solve_rates()
    pt = task.solve_rates(with_grad=True)
    emb = task.model.get_input_embeddings().weight
    rows = task.prompt_rows()
    dp = torch.stack([torch.autograd.grad(pt[i], emb, retain_graph=True)[0][rows[i]] for i in range(len(rows))])
    return p, emb, rows, dp.double()


def _pooled(v, denom, suffix: str) -> dict:
    """The ratio Σ_x mean_d v[d, x] / Σ_x denom[x] and its normal 95 % interval over the draws d
    (the denominator is exact); NaN over no prompt."""
    if v.shape[1] == 0:
        return {f"ratio{suffix}": np.nan, f"lo{suffix}": np.nan, f"hi{suffix}": np.nan}
    total = v.sum(1) / denom.sum()
    half = 1.96 * total.std(ddof=1) / np.sqrt(len(total)) if len(total) > 1 else np.nan
    r = float(total.mean())
    return {f"ratio{suffix}": r, f"lo{suffix}": r - half, f"hi{suffix}": r + half}


def probe_trainer(task: Task, G: int, batch_size: int, out_dir):
    """A GRPOTrainer (TRL 1.16.0) on the task's model whose one reward reads the first token."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    right = {p: set(r) for p, r in zip(task.prompts, task.right)}

    def first_token(prompts, completions, completion_ids, **kw):
        return [float(len(c) > 0 and c[0] in right[p]) for p, c in zip(prompts, completion_ids)]

    args = GRPOConfig(
        output_dir=str(out_dir),
        use_cpu=True,
        use_vllm=False,
        report_to=[],
        max_completion_length=task.max_len,
        num_generations=G,
        per_device_train_batch_size=batch_size,
        gradient_accumulation_steps=1,
        steps_per_generation=1,
        beta=0.0,
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        save_strategy="no",
        logging_steps=1,
        seed=0,
    )
    tr = GRPOTrainer(
        model=task.model,
        reward_funcs=[first_token],
        args=args,
        train_dataset=Dataset.from_dict({"prompt": list(task.prompts)}),
        processing_class=task.tokenizer,
    )
    # set by Trainer's training loop; the loss divides by it
    tr.current_gradient_accumulation_steps = 1
    tr.model.train()
    return tr
