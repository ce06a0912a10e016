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
import pandas as pd
import torch
import torch.nn.functional as F

from ..atomic import atomic_path, read_json, remove_temps, write_json, write_table
from ..groups import advantages
from ..weighting import decile_index
from .config import SimConfig, config_diff, resolve_device
from .ledger import (
    COLUMNS,
    INT_COLUMNS,
    LEDGER_FILE,
    N_DECILES,
    N_QUARTILES,
    predicted_silent,
    predicted_update,
    summarise,
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


def _rows_from_table(table: torch.Tensor) -> list[dict]:
    """Ledger rows back from the checkpoint's float64 table (integers are exact below 2^53)."""
    rows = []
    for values in table.tolist():
        row = dict(zip(COLUMNS, values))
        for c in INT_COLUMNS:
            row[c] = int(row[c])
        rows.append(row)
    return rows


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
    policy = make_policy(cfg, p0, seed=sub_seed(cfg.seed, STREAM_INIT), dtype=dtype, device=device)
    params = [q for q in policy.parameters() if q.requires_grad]
    if cfg.optimizer == "sgd":
        opt = torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum)
    else:
        opt = torch.optim.Adam(params, lr=cfg.lr)
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
    zeros_b = torch.zeros(B, dtype=torch.int64, device=device)
    zero = torch.zeros((), device=device, dtype=dtype)
    full_g = torch.full((D, B), float(G), device=device, dtype=dtype)  # counts path: G answers per group
    nu = torch.tensor(cfg.verifier_noise, device=device, dtype=dtype)
    # Counts path: the four (answer, reward) cells — right & marked right, right & marked wrong,
    # wrong & marked right, wrong & marked wrong.
    CELL_ANSWER = torch.tensor([True, True, False, False], device=device)
    CELL_REWARD = torch.tensor([True, False, True, False], device=device)
    use_ratio = cfg.clip or cfg.ppo_epochs > 1
    # Binary rewards: a group's advantages depend only on (r_i, k), so the core's advantages()
    # is evaluated once on the G + 1 possible groups (row k: k right, then G − k wrong) and
    # gathered each step — the same numbers, without per-step reductions over every group.
    canon = (torch.arange(G, device=device)[None, :] < torch.arange(G + 1, device=device)[:, None]).to(dtype)
    table = advantages(canon, adv_method, ddof=cfg.ddof, eps=cfg.eps)  # (G + 1, G)
    adv_right = table[:, 0].clone()  # A of a right answer in a group with k right (unused at k = 0)
    adv_wrong = table[:, -1].clone()  # A of a wrong answer (unused at k = G)
    rows: list[dict] = []
    generations_cum = 0
    start = 0

    if mode == "resume":
        ckpt = torch.load(found, map_location="cpu", weights_only=True)
        if ckpt["device_type"] != device.type:
            raise ValueError(
                f"config key 'device' = {cfg.device!r}: the checkpoint was written on {ckpt['device_type']}, "
                f"this process would run on {device.type}; the random streams differ, resume on {ckpt['device_type']}"
            )
        policy.load_state_dict(ckpt["policy"])
        opt.load_state_dict(ckpt["optimizer"])
        gen.set_state(ckpt["rng_rollouts"])
        torch.set_rng_state(ckpt["rng_torch_cpu"])
        z_ref = ckpt["z_ref"].to(device)
        if ckpt["ledger_columns"] != list(COLUMNS):
            raise ValueError(f"out_dir {str(out)!r}: the checkpoint's ledger has other columns (written by another version)")
        rows = _rows_from_table(ckpt["ledger"])
        start = int(ckpt["step"])
        generations_cum = int(rows[-1]["generations_cum"]) if rows else 0

    def state_of_all(p):
        """mean p, mean 2·arcsin√p, and mean p per initial quartile (as one tensor)."""
        q_means = torch.zeros(N_QUARTILES, device=device, dtype=dtype).index_add_(0, quartile, p) / quartile_n
        return torch.cat([torch.stack([p.mean(), (2 * torch.asin(p.sqrt())).mean()]), q_means])

    def state_dict_of(vec):
        v = vec.tolist()
        return {"mean_p": v[0], "mean_arcsin": v[1], "quartile_mean_p": v[2:]}

    def checkpoint(next_step):
        cols = list(COLUMNS)
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
                "ledger_columns": cols,
                "ledger": torch.tensor([[r[c] for c in cols] for r in rows], dtype=torch.float64).reshape(len(rows), len(cols)),
            },
        )
        write_table(out / LEDGER_FILE, pd.DataFrame(rows, columns=cols))

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
            state_vec = state_of_all(p_all)

        # --- 2. batch and rollouts -----------------------------------------------------------
        idx = None if B == N else torch.randperm(N, generator=gen, device=device)[:B]
        p_b = p_all if idx is None else p_all[idx]
        if cfg.rollouts == "answers":
            # G Bernoulli answers per prompt and per draw; rewards = the verifier's marks.
            answers = torch.rand((D, B, G), generator=gen, device=device, dtype=dtype) < p_b[:, None]  # True = right
            rewards = answers
            if cfg.verifier_noise > 0:  # drawn only when used, so ν = 0 runs share one stream
                rewards = answers ^ (torch.rand((D, B, G), generator=gen, device=device, dtype=dtype) < cfg.verifier_noise)
            k = rewards.sum(dim=-1)  # (D, B): answers the verifier marked right
        else:
            # The same groups as counts per (answer, reward) cell, in CELL_ANSWER/CELL_REWARD order.
            right = torch.binomial(full_g, p_b.expand(D, B).contiguous(), generator=gen)  # (D, B)
            if cfg.verifier_noise > 0:
                flip_r = torch.binomial(right, nu.expand(D, B), generator=gen)  # right answers marked wrong
                flip_w = torch.binomial(full_g - right, nu.expand(D, B), generator=gen)  # wrong answers marked right
            else:
                flip_r = flip_w = torch.zeros_like(right)
            cells = torch.stack([right - flip_r, flip_r, flip_w, full_g - right - flip_w], dim=-1)  # (D, B, 4)
            k = (cells[..., 0] + cells[..., 2]).long()
        silent = (k == 0) | (k == G)  # what the *verifier* sees decides silence
        if D > 1:
            # DAPO dynamic sampling, all draws at once: keep the first non-silent group.  A prompt
            # silent in all D draws keeps its last draw, whose advantages are 0 (no update).
            lead = silent.to(torch.int64).cumprod(dim=0).sum(dim=0)  # silent draws before the first kept one
            zero_update = lead == D
            draws_used = torch.clamp(lead + 1, max=D)
            pick = draws_used - 1
        else:
            zero_update, draws_used, pick = silent[0], None, zeros_b
        k_b = k[pick, arange_b]
        if cfg.rollouts == "answers":
            y, r, w = answers[pick, arange_b], rewards[pick, arange_b], None  # (B, G) each
        else:
            y, r, w = CELL_ANSWER, CELL_REWARD, cells[pick, arange_b]  # (4,), (4,), (B, 4) counts

        # --- 3. advantages (math core, via its table over the G + 1 possible groups) ---------
        A = torch.where(r, adv_right[k_b][:, None], adv_wrong[k_b][:, None])  # (B, G) or (B, 4)

        # --- 4. loss, backward, optimizer ----------------------------------------------------
        # Loss = −Σ_prompts (1/G) Σ_answers A_i·log π(y_i); with counts, equal answers are summed
        # once and weighted by how many there are (w).
        logp_old = None
        for epoch in range(cfg.ppo_epochs):
            z = policy(idx)
            if epoch == 0 and z.requires_grad and not z.is_leaf:
                z.retain_grad()
            logp = torch.where(y, F.logsigmoid(z)[:, None], F.logsigmoid(-z)[:, None])  # log π(y_i)
            if use_ratio:
                if logp_old is None:
                    logp_old = logp.detach()
                ratio = torch.exp(logp - logp_old)  # exactly 1 on the first epoch
                surrogate = ratio * A
                if cfg.clip:
                    surrogate = torch.minimum(surrogate, ratio.clamp(1 - cfg.clip_low, 1 + cfg.clip_high) * A)
            else:
                surrogate = A * logp  # one epoch, no clip: the ratio is 1 and its gradient the score
            pg_loss = -(surrogate if w is None else w * surrogate).sum() / G
            loss = pg_loss
            if cfg.kl_coef > 0:
                zr = z_ref if idx is None else z_ref[idx]
                logp_ref = torch.where(y, F.logsigmoid(zr)[:, None], F.logsigmoid(-zr)[:, None])
                log_rho = logp_ref - logp
                k3 = torch.exp(log_rho) - 1.0 - log_rho  # ≥ 0, unbiased for KL(π‖π_ref)
                k3_sum = (k3 if w is None else w * k3).sum()
                loss = pg_loss + cfg.kl_coef * k3_sum / G
            if epoch == 0 and cfg.kl_coef > 0:
                # The ledger compares the policy-gradient part with the closed forms.
                dz = torch.autograd.grad(pg_loss, z, retain_graph=True)[0].detach()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if epoch == 0:
                if cfg.kl_coef == 0:
                    dz = z.grad.detach().clone()
                first_loss = loss.detach()
                kl_mean = k3_sum.detach() / (B * G) if cfg.kl_coef > 0 else zero
            opt.step()
        with torch.no_grad():
            if cfg.clip:
                outside = ((ratio < 1 - cfg.clip_low) | (ratio > 1 + cfg.clip_high)).to(dtype)
                clip_frac = (outside if w is None else w * outside).sum() / (B * G)
            else:
                clip_frac = zero

            # --- 5. ledger row -----------------------------------------------------------------
            dec_b = decile if idx is None else decile[idx]
            mass_d = torch.zeros(N_DECILES, device=device, dtype=dtype).index_add_(0, dec_b, -dz)  # g_j = −∂L/∂z_j
            groups = draws_used.sum().to(dtype) if draws_used is not None else zero + B
            scalars = torch.cat(
                [
                    torch.stack(
                        [
                            silent[0].to(dtype).mean(),
                            zero_update.to(dtype).mean(),
                            groups,
                            first_loss.to(dtype),
                            kl_mean.to(dtype),
                            clip_frac,
                        ]
                    ),
                    mass_d,
                    state_vec,
                ]
            ).cpu()  # one device→host copy per step
        v = scalars.tolist()
        p_host = p_b.detach().to("cpu", torch.float64).numpy()
        groups_n = int(round(v[2]))
        generations_cum += groups_n * G
        row = {
            "step": step,
            "n_batch": B,
            "silent_frac": v[0],
            "zero_update_frac": v[1],
            "groups": groups_n,
            "generations": groups_n * G,
            "generations_cum": generations_cum,
            "loss": v[3],
            "kl": v[4],
            "clip_frac": v[5],
            "grad_mass": float(sum(v[6 : 6 + N_DECILES])),
        }
        row.update({f"grad_mass_d{d}": v[6 + d] for d in range(N_DECILES)})
        row.update(predicted_silent(p_host, cfg))
        if cfg.closed_form_every and step % cfg.closed_form_every == 0:
            m = predicted_update(p_host, cfg)
            dec_host = decile_np if idx is None else decile_np[idx.cpu().numpy()]
            m_d = np.bincount(dec_host, weights=m, minlength=N_DECILES)
            row["grad_pred"] = float(m.sum())
            row.update({f"grad_pred_d{d}": float(m_d[d]) for d in range(N_DECILES)})
        else:
            row["grad_pred"] = float("nan")
            row.update({f"grad_pred_d{d}": float("nan") for d in range(N_DECILES)})
        sv = v[6 + N_DECILES :]
        row.update({"mean_p": sv[0], "mean_arcsin": sv[1]})
        row.update({f"mean_p_q{q + 1}": sv[2 + q] for q in range(N_QUARTILES)})
        row["wall_s"] = time.perf_counter() - t0
        rows.append({c: row[c] for c in COLUMNS})

        done = step + 1
        if done % cfg.checkpoint_every == 0 or done == cfg.steps:
            checkpoint(done)
        bar.update(1)
        if progress and (step % 10 == 0 or done == cfg.steps):
            bar.set_postfix(silent=f"{v[0]:.3f}", pred=f"{row['silent_pred']:.3f}", mean_p=f"{sv[0]:.3f}")
        if kill_after is not None and step == kill_after:
            bar.close()
            print(f"{KILL_ENV}={kill_after}: dying after step {step}", file=sys.stderr, flush=True)
            os._exit(86)
    bar.close()

    # --- summary: written last, it marks the run complete ------------------------------------
    with torch.no_grad():
        final = state_dict_of(state_of_all(torch.sigmoid(policy())))
    ledger = pd.DataFrame(rows, columns=list(COLUMNS))
    summary = summarise(ledger, cfg, initial=initial, final=final, device=str(device))
    write_json(out / SUMMARY_FILE, summary)
    return read_json(out / SUMMARY_FILE)
