"""The training loop: a Bernoulli-logit policy trained by GRPO, Dr.GRPO or DAPO (DESIGN §1.5).

One function, :func:`run_simulation`, reads top to bottom like a cleanrl script: set up the
run folder, the population, the policy and the optimizer, then for each step

1. read p = sigmoid(z) of every prompt (the policy the step samples from);
2. pick the batch and draw G answers per prompt — as G Bernoulli answers (``rollouts =
   "answers"``) or as the binomial count of right ones (``"counts"``, the same groups in
   distribution).  DAPO draws ``max_draws`` groups at once and keeps the first that is not
   silent; every draw it would have made counts as generation cost;
3. turn rewards into advantages with the math core (:func:`gsd.groups.advantages`);
4. loss = −Σ_prompts mean_group(A·log π) (with PPO: ratio·A, clipped; + β·k3), backward,
   optimizer step.  On the first epoch ∂L/∂z_j = −g_j, the paper's per-prompt update
   (DESIGN §1, §1.3), so plain SGD moves a tabular logit by exactly lr·g_j;
5. append a ledger row: the autograd gradient mass per decile of initial p beside the closed
   forms of :mod:`gsd.update` and :mod:`gsd.silent` at the same p (see :mod:`.ledger`).

A run is a folder: ``config.json`` (the resolved config), ``ledger.parquet``, ``checkpoint.pt``
(policy, optimizer, every random state, the ledger so far, the step) and, once finished,
``summary.json`` — the mark a sweep engine looks for (:func:`is_complete`).  Every file is
replaced atomically.  ``resume=True`` continues from the checkpoint; on CPU the ledger is then
identical to an uninterrupted run's, wall-time columns aside.

Speed without other numbers.  The per-step cost at the paper's size (6,000 prompts, G = 8) is
mostly fixed cost per torch call, so the loop keeps calls few and tensors contiguous, and every
change below leaves every ledger value and every parameter bit-identical (the tests replay the
identity; a seeded run's ledger is compared with the previous implementation's):

* with counts, the loss is built per (answer, reward) cell on (B,) vectors and laid out as the
  same (B, 4) tensor only for the sums; an exact verifier's two empty cells are not computed;
* one draw (GRPO, Dr.GRPO) takes its groups as a view, DAPO's kept draws by one flat
  ``index_select``; advantages come from the core's table by ``index_select``;
* plain SGD on CPU applies torch.optim.SGD's own update (``p.add_(grad, alpha=−lr)``) without the
  optimizer's per-call bookkeeping; gradients are cleared by setting them to None, as
  ``zero_grad(set_to_none=True)`` does;
* the ledger is a preallocated float64 table filled in place: one device→host copy per step,
  and a checkpoint writes it straight to parquet through pyarrow (no DataFrame).

Results depend on the number of torch threads (a reduction split across threads rounds
differently), as they always have: compare runs made with the same thread count.

Random streams (fixed, so a test can replay them): one ``torch.Generator`` on the run's device,
seeded from ``sub_seed(seed, STREAM_ROLLOUTS)``, draws per step, in this order: the batch
(``randperm``, only when ``batch_size < n_prompts``); the (D, B, G) uniforms of the answers or
the (D, B) binomial counts; then, only with a noisy verifier, the flips.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ..atomic import atomic_path, read_json, remove_temps, write_json
from ..groups import advantages
from ..weighting import decile_index
from .config import SimConfig, config_diff, resolve_device
from .ledger import (
    COLUMNS,
    LEDGER_FILE,
    N_DECILES,
    N_QUARTILES,
    large_group_update,
    ledger_frame,
    predicted_silent,
    predicted_update,
    summarise,
    write_ledger,
)
from .policy import make_policy
from .population import STREAM_INIT, STREAM_ROLLOUTS, initial_solve_rates, sub_seed

__all__ = ["run_simulation", "is_complete", "KILL_ENV"]

CONFIG_FILE, CHECKPOINT_FILE, SUMMARY_FILE = "config.json", "checkpoint.pt", "summary.json"

#: Test hook: with this environment variable set to k, the process dies (``os._exit``, no
#: clean-up, like SIGKILL) right after step k is done — used to test ``resume``.
KILL_ENV = "GSD_SIM_KILL_AFTER_STEP"


def is_complete(out_dir) -> bool:
    """True when ``out_dir`` holds a finished run (its ``summary.json`` exists)."""
    return (Path(out_dir) / SUMMARY_FILE).is_file()


def _open_run_folder(out: Path, cfg: SimConfig, resume: bool):
    """Create the folder, or check that the one there belongs to this config.

    Returns ``("done", summary)`` for a finished run of the same config, ``("resume", path)``
    when a checkpoint should be loaded, ``("fresh", None)`` otherwise.
    """
    saved_path = out / CONFIG_FILE
    if saved_path.is_file():
        saved = read_json(saved_path)
        if saved != cfg.to_dict():
            diff = "; ".join(config_diff(saved, cfg.to_dict()))
            raise ValueError(f"out_dir {str(out)!r} holds a run with a different config ({diff}); use another folder")
        if is_complete(out):
            return "done", read_json(out / SUMMARY_FILE)
        if not resume:
            raise ValueError(f"out_dir {str(out)!r} holds an unfinished run of this config; pass resume (--resume) to continue it")
        remove_temps(out)  # half-written files of the killed process
        ckpt = out / CHECKPOINT_FILE
        return ("resume", ckpt) if ckpt.is_file() else ("fresh", None)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"out_dir {str(out)!r} exists and is not a run folder (no {CONFIG_FILE}); use an empty or new folder")
    out.mkdir(parents=True, exist_ok=True)
    write_json(saved_path, cfg.to_dict())
    return "fresh", None


def _save_checkpoint(path: Path, obj: dict) -> None:
    with atomic_path(path) as tmp:
        torch.save(obj, tmp)


def run_simulation(config, out_dir, *, resume: bool = False, progress: bool = True) -> dict:
    """Train one arm and return its summary (see :func:`gsd.simulator.ledger.summarise`).

    ``config``: a :class:`SimConfig` or a dict of its keys.  ``out_dir``: the run folder (new,
    empty, or holding this very config).  A finished run is not redone: its summary is returned.
    """
    cfg = config if isinstance(config, SimConfig) else SimConfig.from_dict(config)
    device = torch.device(resolve_device(cfg.device))  # before touching the disk: bad device = no folder
    out = Path(out_dir)
    p0 = initial_solve_rates(cfg)  # before touching the disk too: a bad source = no folder
    mode, found = _open_run_folder(out, cfg, resume)
    if mode == "done":
        return found

    # --- set-up ------------------------------------------------------------------------------
    dtype = getattr(torch, cfg.dtype)
    N, G, B = cfg.n_prompts, cfg.group_size, cfg.batch_size or cfg.n_prompts
    D = cfg.max_draws if cfg.method == "dapo" else 1  # groups drawn per prompt per step, at most
    adv_method = "grpo" if cfg.method == "dapo" else cfg.method  # DAPO = GRPO advantages + redraws
    counts = cfg.rollouts == "counts"
    policy = make_policy(cfg, p0, seed=sub_seed(cfg.seed, STREAM_INIT), dtype=dtype, device=device)
    params = [q for q in policy.parameters() if q.requires_grad]
    if cfg.optimizer == "sgd":
        opt = torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum)
    else:
        opt = torch.optim.Adam(params, lr=cfg.lr)
    # Plain SGD on CPU: torch.optim.SGD's own update (its single-tensor path, p −= lr·grad for every
    # parameter with a gradient) applied directly, which skips the ~40 µs of Python bookkeeping
    # its step() costs per call; same numbers, and the optimizer's state (empty) is unchanged.
    plain_sgd = cfg.optimizer == "sgd" and cfg.momentum == 0 and device.type == "cpu"
    gen = torch.Generator(device=device).manual_seed(sub_seed(cfg.seed, STREAM_ROLLOUTS))
    with torch.no_grad():
        z_ref = policy().detach().clone()  # the frozen initial policy of the KL penalty
    # Static bookkeeping: decile of initial p (ledger columns) and quartile by rank (hardest first).
    decile_np = decile_index(p0)
    decile = torch.as_tensor(decile_np, device=device)
    order = np.argsort(p0, kind="stable")
    quartile_np = np.empty(N, dtype=np.int64)
    quartile_np[order] = np.arange(N) * N_QUARTILES // N
    quartile = torch.as_tensor(quartile_np, device=device)
    quartile_n = torch.bincount(quartile, minlength=N_QUARTILES).to(dtype)
    arange_b = torch.arange(B, device=device)
    zero = torch.zeros((), device=device, dtype=dtype)
    full_g = torch.full((D, B), float(G), device=device, dtype=dtype)  # counts path: G answers per group
    nu = torch.tensor(cfg.verifier_noise, device=device, dtype=dtype)
    use_ratio = cfg.clip or cfg.ppo_epochs > 1
    # Binary rewards: a group's advantages depend only on (r_i, k), so the core's advantages()
    # is evaluated once on the G + 1 possible groups (row k: k right, then G − k wrong) and
    # gathered each step — the same numbers, without per-step reductions over every group.
    canon = (torch.arange(G, device=device)[None, :] < torch.arange(G + 1, device=device)[:, None]).to(dtype)
    table = advantages(canon, adv_method, ddof=cfg.ddof, eps=cfg.eps)  # (G + 1, G)
    adv_right = table[:, 0].clone()  # A of a right answer in a group with k right (unused at k = 0)
    adv_wrong = table[:, -1].clone()  # A of a wrong answer (unused at k = G)

    # Per-answer quantities travel as lists of "cells": with answers, one (B, G) tensor; with
    # counts, the (answer, reward) cells of a group — 0: right & marked right, 1: right & marked
    # wrong, 2: wrong & marked right, 3: wrong & marked wrong — as (B,) tensors, each weighted by
    # how many answers it holds (w).  An exact verifier leaves cells 1 and 2 empty: only the
    # live cells are computed.  Every sum over answers first lays the four cells out as one
    # (B, 4) tensor, the empty ones as zeros (:func:`total`), so it sums the same numbers in the
    # same order as a (B, 4) loss would, while the element-wise work (and its backward) stays
    # on contiguous (B,) vectors.
    live = (0, 1, 2, 3) if cfg.verifier_noise > 0 else (0, 3)
    zeros_b = torch.zeros(B, device=device, dtype=dtype)

    def log_pi(z, y):
        """log π(y_i) of every answer: [(B, G)] (y: True = right), or of each live cell."""
        pos, neg = F.logsigmoid(z), F.logsigmoid(-z)
        if not counts:
            return [torch.where(y, pos[:, None], neg[:, None])]
        if cfg.kl_coef > 0 and len(live) == 4:
            # Two cells share pos (and neg): one view each, so that each cell's gradients (policy
            # and KL terms) add up before the two cells' do, as they did on a (B, 4) tensor.
            pos, neg = (pos.view_as(pos), pos.view_as(pos)), (neg.view_as(neg), neg.view_as(neg))
        else:
            pos, neg = (pos, pos), (neg, neg)
        return [(pos[0], pos[1], neg[0], neg[1])[c] for c in live]

    def total(cells, w):
        """Σ over every answer of a per-answer quantity given per cell (w: the cells' counts)."""
        if w is None:
            return cells[0].sum()
        layout = [zeros_b] * 4
        for c, n, x in zip(live, w, cells):
            layout[c] = n * x
        return torch.stack(layout, dim=1).sum()

    # The ledger: one float64 row per step in COLUMNS order (integers are exact below 2^53).
    col = {c: j for j, c in enumerate(COLUMNS)}
    ledger = np.full((cfg.steps, len(COLUMNS)), np.nan)
    MASS, PRED, LIMIT = (col[f"grad_{what}_d0"] for what in ("mass", "pred", "limit"))
    QUART = col["mean_p_q1"]
    generations_cum = 0
    start = 0

    if mode == "resume":
        ckpt = torch.load(found, map_location="cpu", weights_only=True)
        if ckpt["device_type"] != device.type:
            raise ValueError(
                f"config key 'device' = {cfg.device!r}: the checkpoint was written on {ckpt['device_type']}, "
                f"this process would run on {device.type}; the random streams differ, resume on {ckpt['device_type']}"
            )
        if ckpt["ledger_columns"] != list(COLUMNS):
            raise ValueError(f"out_dir {str(out)!r}: the checkpoint's ledger has other columns (written by another version)")
        policy.load_state_dict(ckpt["policy"])
        opt.load_state_dict(ckpt["optimizer"])
        gen.set_state(ckpt["rng_rollouts"])
        torch.set_rng_state(ckpt["rng_torch_cpu"])
        z_ref = ckpt["z_ref"].to(device)
        start = int(ckpt["step"])
        ledger[:start] = ckpt["ledger"].numpy()
        generations_cum = int(ledger[start - 1, col["generations_cum"]]) if start else 0

    def state_of_all(p):
        """[mean p, mean 2·arcsin√p] (0-d tensors) and the mean p per initial quartile (4,)."""
        q_means = torch.zeros(N_QUARTILES, device=device, dtype=dtype).index_add_(0, quartile, p) / quartile_n
        return [p.mean(), (2 * torch.asin(p.sqrt())).mean()], q_means

    def state_dict_of(state):
        v = torch.cat([torch.stack(state[0]), state[1]]).tolist()
        return {"mean_p": v[0], "mean_arcsin": v[1], "quartile_mean_p": v[2:]}

    def checkpoint(next_step):
        done_rows = ledger[:next_step]
        _save_checkpoint(
            out / CHECKPOINT_FILE,
            {
                "step": next_step,
                "policy": policy.state_dict(),
                "optimizer": opt.state_dict(),
                "rng_rollouts": gen.get_state(),
                "rng_torch_cpu": torch.get_rng_state(),
                "z_ref": z_ref.cpu(),
                "device_type": device.type,
                "ledger_columns": list(COLUMNS),
                "ledger": torch.from_numpy(done_rows.copy()),
            },
        )
        write_ledger(out / LEDGER_FILE, done_rows)

    kill_after = int(os.environ[KILL_ENV]) if os.environ.get(KILL_ENV) else None
    with torch.no_grad():
        initial = state_dict_of(state_of_all(torch.sigmoid(z_ref)))

    from tqdm.auto import tqdm

    bar = tqdm(total=cfg.steps, initial=start, disable=not progress, desc=f"{cfg.name} [{cfg.method}]", unit="step")
    for step in range(start, cfg.steps):
        t0 = time.perf_counter()

        # --- 1. the policy the step samples from ---------------------------------------------
        with torch.no_grad():
            p_all = torch.sigmoid(policy())
            state_means, state_quartiles = state_of_all(p_all)

        # --- 2. batch and rollouts -----------------------------------------------------------
        idx = None if B == N else torch.randperm(N, generator=gen, device=device)[:B]
        p_b = p_all if idx is None else p_all[idx]
        if not counts:
            # G Bernoulli answers per prompt and per draw; rewards = the verifier's marks.
            answers = torch.rand((D, B, G), generator=gen, device=device, dtype=dtype) < p_b[:, None]  # True = right
            rewards = answers
            if cfg.verifier_noise > 0:  # drawn only when used, so ν = 0 runs share one stream
                rewards = answers ^ (torch.rand((D, B, G), generator=gen, device=device, dtype=dtype) < cfg.verifier_noise)
            k = rewards.sum(dim=-1)  # (D, B): answers the verifier marked right
        else:
            # The same groups as answers counted per (answer, reward) cell, in log_pi's order.
            right = torch.binomial(full_g, p_b.expand(D, B).contiguous(), generator=gen)  # (D, B)
            if cfg.verifier_noise > 0:
                flip_r = torch.binomial(right, nu.expand(D, B), generator=gen)  # right answers marked wrong
                flip_w = torch.binomial(full_g - right, nu.expand(D, B), generator=gen)  # wrong answers marked right
                cells = [right - flip_r, flip_r, flip_w, full_g - right - flip_w]  # (D, B) each
                k = (cells[0] + cells[2]).long()
            else:  # cells 1 and 2 are empty (not live)
                cells = [right, None, None, full_g - right]
                k = right.long()
        silent = (k == 0) | (k == G)  # what the *verifier* sees decides silence
        if D > 1:
            # DAPO dynamic sampling, all draws at once: keep the first non-silent group.  A prompt
            # silent in all D draws keeps its last draw, whose advantages are 0 (no update).
            lead = silent.to(torch.int64).cumprod(dim=0).sum(dim=0)  # silent draws before the first kept one
            zero_update = lead == D
            draws_used = torch.clamp(lead + 1, max=D)
            take = (draws_used - 1) * B + arange_b  # the kept draw of each prompt, as a row of the (D·B, …) tensors
            k_b = k.reshape(D * B).index_select(0, take)
            if counts:
                y, w = None, [cells[c].reshape(D * B).index_select(0, take) for c in live]  # the live cells' counts, (B,) each
            else:
                y = answers.reshape(D * B, G).index_select(0, take)  # (B, G)
                r = y if rewards is answers else rewards.reshape(D * B, G).index_select(0, take)
                w = None
        else:  # one draw: the (only) draw is the kept one
            zero_update, draws_used = silent[0], None
            k_b = k[0]
            if counts:
                y, w = None, [cells[c][0] for c in live]
            else:
                y, r, w = answers[0], rewards[0], None

        # --- 3. advantages (math core, via its table over the G + 1 possible groups) ---------
        a_right, a_wrong = adv_right.index_select(0, k_b), adv_wrong.index_select(0, k_b)  # (B,)
        if counts:
            A = [(a_right, a_wrong, a_right, a_wrong)[c] for c in live]  # by the cells' rewards
        else:
            A = [torch.where(r, a_right[:, None], a_wrong[:, None])]  # (B, G)

        # --- 4. loss, backward, optimizer ----------------------------------------------------
        # Loss = −Σ_prompts (1/G) Σ_answers A_i·log π(y_i); with counts, equal answers are summed
        # once and weighted by how many there are (w).
        logp_old = None
        for epoch in range(cfg.ppo_epochs):
            z = policy(idx)
            if epoch == 0 and z.requires_grad and not z.is_leaf:
                z.retain_grad()
            logp = log_pi(z, y)  # log π(y_i), per cell
            if use_ratio:
                if logp_old is None:
                    logp_old = [x.detach() for x in logp]
                ratio = [torch.exp(x - x_old) for x, x_old in zip(logp, logp_old)]  # exactly 1 on the first epoch
                surrogate = [rt * a for rt, a in zip(ratio, A)]
                if cfg.clip:
                    surrogate = [torch.minimum(s, rt.clamp(1 - cfg.clip_low, 1 + cfg.clip_high) * a)
                                 for s, rt, a in zip(surrogate, ratio, A)]
            else:
                surrogate = [a * x for a, x in zip(A, logp)]  # one epoch, no clip: the ratio is 1 and its gradient the score
            pg_loss = -total(surrogate, w) / G
            loss = pg_loss
            if cfg.kl_coef > 0:
                zr = z_ref if idx is None else z_ref[idx]
                log_rho = [x_ref - x for x_ref, x in zip(log_pi(zr, y), logp)]
                k3 = [torch.exp(x) - 1.0 - x for x in log_rho]  # ≥ 0, unbiased for KL(π‖π_ref)
                k3_sum = total(k3, w)
                loss = pg_loss + cfg.kl_coef * k3_sum / G
            if epoch == 0 and cfg.kl_coef > 0:
                # The ledger compares the policy-gradient part with the closed forms.
                dz = torch.autograd.grad(pg_loss, z, retain_graph=True)[0].detach()
            for q in params:  # = opt.zero_grad(set_to_none=True), without its per-call overhead
                q.grad = None
            loss.backward()
            if epoch == 0:
                if cfg.kl_coef == 0:
                    dz = z.grad.detach().clone()
                first_loss = loss.detach()
                kl_mean = k3_sum.detach() / (B * G) if cfg.kl_coef > 0 else zero
            if plain_sgd:
                with torch.no_grad():
                    for q in params:
                        if q.grad is not None:
                            q.add_(q.grad, alpha=-cfg.lr)
            else:
                opt.step()

        # --- 5. ledger row -------------------------------------------------------------------
        with torch.no_grad():
            # Everything the row needs from the device, in one float64 vector and one copy.
            f64 = torch.float64
            parts = [silent[0].to(dtype).mean().to(f64), first_loss.to(f64)]
            if D > 1:
                parts += [zero_update.to(dtype).mean().to(f64), draws_used.sum().to(f64)]
            if cfg.kl_coef > 0:
                parts.append(kl_mean.to(f64))
            if cfg.clip:
                outside = [((rt < 1 - cfg.clip_low) | (rt > 1 + cfg.clip_high)).to(dtype) for rt in ratio]
                parts.append((total(outside, w) / (B * G)).to(f64))
            dec_b = decile if idx is None else decile[idx]
            mass_d = torch.zeros(N_DECILES, device=device, dtype=dtype).index_add_(0, dec_b, dz, alpha=-1)  # g_j = −∂L/∂z_j
            j = len(parts)
            parts += [m.to(f64) for m in state_means]
            v = torch.cat([torch.stack(parts), mass_d.to(f64), state_quartiles.to(f64)]).cpu().tolist()
        silent_frac, loss_v = v[0], v[1]
        zero_frac, groups_n = (v[2], int(round(v[3]))) if D > 1 else (silent_frac, B)
        kl_v = v[2 * (D > 1) + 2] if cfg.kl_coef > 0 else 0.0
        clip_v = v[j - 1] if cfg.clip else 0.0
        state_v = v[j : j + 2] + v[j + 2 + N_DECILES :]  # mean p, mean arcsin, the quartile means
        mass_v = v[j + 2 : j + 2 + N_DECILES]
        generations_cum += groups_n * G

        p_host = p_b.detach().to("cpu", torch.float64).numpy()
        dec_host = decile_np if idx is None else decile_np[idx.cpu().numpy()]
        row = ledger[step]
        row[col["step"]], row[col["n_batch"]] = step, B
        row[col["silent_frac"]], row[col["zero_update_frac"]] = silent_frac, zero_frac
        row[col["groups"]], row[col["generations"]], row[col["generations_cum"]] = groups_n, groups_n * G, generations_cum
        row[col["loss"]], row[col["kl"]], row[col["clip_frac"]] = loss_v, kl_v, clip_v
        row[col["grad_mass"]] = float(sum(mass_v))
        row[MASS : MASS + N_DECILES] = mass_v
        pred = predicted_silent(p_host, cfg)
        row[col["silent_pred"]], row[col["zero_update_pred"]], row[col["groups_pred"]] = (
            pred["silent_pred"], pred["zero_update_pred"], pred["groups_pred"])
        if cfg.closed_form_every and step % cfg.closed_form_every == 0:
            m = predicted_update(p_host, cfg)
            row[col["grad_pred"]] = float(m.sum())
            row[PRED : PRED + N_DECILES] = np.bincount(dec_host, weights=m, minlength=N_DECILES)
        row[col["grad_limit"]], row[col["grad_law"]], row[LIMIT : LIMIT + N_DECILES] = large_group_update(p_host, G, dec_host)
        row[col["mean_p"]], row[col["mean_arcsin"]] = state_v[0], state_v[1]
        row[QUART : QUART + N_QUARTILES] = state_v[2:]
        row[col["wall_s"]] = time.perf_counter() - t0

        done = step + 1
        if done % cfg.checkpoint_every == 0 or done == cfg.steps:
            checkpoint(done)
        bar.update(1)
        if progress and (step % 10 == 0 or done == cfg.steps):
            bar.set_postfix(silent=f"{silent_frac:.3f}", pred=f"{pred['silent_pred']:.3f}", mean_p=f"{state_v[0]:.3f}")
        if kill_after is not None and step == kill_after:
            bar.close()
            print(f"{KILL_ENV}={kill_after}: dying after step {step}", file=sys.stderr, flush=True)
            os._exit(86)
    bar.close()

    # --- summary: written last, it marks the run complete ------------------------------------
    with torch.no_grad():
        final = state_dict_of(state_of_all(torch.sigmoid(policy())))
    summary = summarise(ledger_frame(ledger), cfg, initial=initial, final=final, device=str(device))
    write_json(out / SUMMARY_FILE, summary)
    return read_json(out / SUMMARY_FILE)
