"""Many runs as one program: runs that differ only in seed, method, group size or std convention
share every tensor op of a step, each keeping its own random stream, files and ledger.

A campaign's arms and a sweep's seeds are runs of one config but for a few keys; run apart,
each pays the engine's per-step dispatch (~1 ms of torch overhead whatever the size) and its
own process set-up.  :func:`run_many` runs them side by side instead: the runs' prompts are
laid end to end along the prompt axis (run r holds entries r·N … (r+1)·N − 1 of one logit
vector), so the engine's stages run once per step on all of them:

* each run draws its batch and its groups from its own generator, exactly as alone
  (:func:`~.sampling.plan_batch`, :func:`~.sampling.draw_counts`), then the runs' draws are
  reduced together by :func:`~.sampling.groups_from_draws` (one pass per number of draws: DAPO's
  runs and the others);
* advantages come from one table per (method, ddof, eps), the loss sums per run
  (:func:`~.loss.policy_loss` with ``runs``), one backward and one optimizer step serve all;
* the ledger's measurements are per-run sums of the same tensors; the closed forms are each
  run's own (:func:`~.ledger.closed_form_columns`).

Every operation is elementwise across prompts or a sum within one run's block, which torch
reduces as it would reduce that run's tensor alone: on CPU, on one thread, each run's ledger,
checkpoint and summary equal the run made alone bit for bit (wall times aside; the tests check
it), provided its blocks are whole vector steps (:func:`~.config.batch_key`).  On more threads torch
splits a long tensor at other places than a short one: the numbers then differ in the last
bits, as those of one run do between thread counts (the summary records the count).  On CUDA a run
differs from itself in the last bits (float64 scatter-adds land in any order); batched runs differ from
their runs apart by as much (≤ 5e-15 relatively, measured on an H200), no more.  Each run keeps its own folder in the single-run format (:mod:`.engine`), so a
killed batch resumes — batched again, or run by run — to the same ledgers.

What can share a program (:func:`~.config.batch_key`): tabular policies with the same config but for
:data:`FREE_KEYS`, a fixed group size per run (no budget allocation) and no rollout log.  The
others run one by one through :func:`~.engine.run_simulation`.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ..extras import require_torch

torch = require_torch("the torch engine (gsd.simulator.batched)")

from ..core.methods import method_spec
from ..core.weighting import decile_index
from .config import SimConfig, batch_key, resolve_device
from .engine import (
    ENGINE,
    answers_per_step,
    checkpoint_reader,
    cpu_threads,
    run_member,
    run_simulation,
    to_host,
    write_checkpoint,
)
from .ledger import N_DECILES, N_QUARTILES, Ledger, closed_form_columns
from .loss import AdvantageTable, log_pi, policy_loss, sum_per_run
from .optim import make_optimizer
from .policy import TabularPolicy
from .population import STREAM_ROLLOUTS, initial_quartiles, initial_solve_rates, sub_seed
from .population import population_state as runs_population_state
from .runfolder import drive, finish, ledger_row, open_runs, run_identity
from .sampling import Batch, Groups, draw_counts, groups_from_draws, plan_batch

__all__ = ["run_many"]


def run_many(
    runs,
    *,
    resume: bool = False,
    progress: bool = True,
    threads: int | None = None,
    max_runs: int | None = None,
    on_step=None,
    notify=None,
) -> list[dict]:
    """Run every ``(config, out_dir)`` of ``runs``; return their summaries, in order.

    Runs with the same :func:`batch_key` (and, resuming, the same next step) form one program;
    the rest run one by one (:func:`~.engine.run_simulation`), as does a program of one.
    ``max_runs``: at most this many runs per program (memory).  ``resume``, ``progress`` and
    ``threads`` as for :func:`~.engine.run_simulation`; a program's thread count is chosen for
    its whole step and recorded in each run's summary.  ``on_step(step)``: called after each
    step of a program (and its checkpoint, if any).  ``notify(message)``: told, in one line, when
    a run is found finished or resumes (as :func:`~.engine.run_simulation` tells it).
    """
    items = [(c if isinstance(c, SimConfig) else SimConfig.from_dict(c), Path(o)) for c, o in runs]
    summaries: list[dict | None] = [None] * len(items)
    groups: dict = {}
    for i, (cfg, out) in enumerate(items):
        key = batch_key(cfg)
        if key is None:
            summaries[i] = run_simulation(cfg, out, resume=resume, progress=progress, threads=threads, notify=notify)
        else:
            groups.setdefault(key, []).append(i)
    for members in groups.values():
        _run_compatible(
            [items[i] for i in members],
            members,
            summaries,
            resume=resume,
            progress=progress,
            threads=threads,
            max_runs=max_runs,
            on_step=on_step,
            notify=notify,
        )
    return summaries


def _run_compatible(items, positions, summaries, *, resume, progress, threads, max_runs, on_step, notify):
    """Open the folders of compatible runs (the run-folder layer: locked, verified), then run them in
    programs of runs at the same step (and thread count); a program of one is the engine's run."""
    from contextlib import ExitStack

    if len(items) == 1:
        (cfg, out), pos = items[0], positions[0]
        summaries[pos] = run_simulation(cfg, out, resume=resume, progress=progress, threads=threads, notify=notify)
        return
    device = torch.device(resolve_device(items[0][0].device))  # before the folders: bad device = no folder
    p0s = [initial_solve_rates(cfg) for cfg, _ in items]  # before the folders: a bad source = no folder
    with ExitStack() as held:
        found, members = open_runs(
            items,
            p0s,
            resume=resume,
            engine=ENGINE,
            read_checkpoint=checkpoint_reader(device),
            held=held,
            notify=notify,
        )
        for i, summary in enumerate(found):
            if summary is not None:
                summaries[positions[i]] = summary
        pending: dict = {}
        for m in members:
            run_threads = (
                threads if threads is not None or m.ckpt is None or device.type != "cpu" else m.ckpt.get("threads")
            )
            pending.setdefault((m.start, run_threads), []).append(m)
        for (_, run_threads), group in pending.items():
            size = max_runs or len(group)
            for s in range(0, len(group), size):
                chunk = group[s : s + size]
                if len(chunk) == 1:  # a program of one is the engine's own run (its folder is open and held)
                    summaries[positions[chunk[0].pos]] = run_member(
                        chunk[0], device, progress=progress, on_step=on_step, threads=run_threads
                    )
                    continue
                for m, summary in zip(
                    chunk, run_program(chunk, device=device, progress=progress, threads=run_threads, on_step=on_step)
                ):
                    summaries[positions[m.pos]] = summary


class _Program:
    """The state of R runs laid end to end: one logit vector, one optimizer, R generators."""

    def __init__(self, members, device):
        # DAPO's runs (several draws) after the others: each number of draws is one block.
        members = sorted(members, key=lambda m: _draws(m.cfg))
        self.members = members
        self.cfgs = [m.cfg for m in members]
        self.outs = [m.out for m in members]
        base = self.base = self.cfgs[0]
        self.R, self.N = len(members), base.n_prompts
        self.B = base.batch_size or self.N
        self.device, self.dtype = device, getattr(torch, base.dtype)
        p0 = [m.p0 for m in members]
        self.policy = TabularPolicy(np.concatenate(p0), dtype=self.dtype, device=device)
        self.opt = make_optimizer(base, self.policy.parameters())
        with torch.no_grad():
            self.z_ref = self.policy().detach().clone()
        self.gens = [torch.Generator(device=device).manual_seed(sub_seed(c.seed, STREAM_ROLLOUTS)) for c in self.cfgs]
        self.draws = [_draws(c) for c in self.cfgs]
        # Per-prompt decile and quartile of each run's initial p; "_at" adds the run's block of
        # bins, so one index_add fills every run's bins with that run's prompts, in order.
        dec = [decile_index(p) for p in p0]
        quart = [initial_quartiles(p) for p in p0]
        run_of = np.repeat(np.arange(self.R), self.N)
        self.decile = torch.as_tensor(np.concatenate(dec), device=device)
        self.decile_at = self.decile + torch.as_tensor(run_of * N_DECILES, device=device)
        quart_flat = np.concatenate(quart)
        self.quartile_at = torch.as_tensor(quart_flat + run_of * N_QUARTILES, device=device)
        self.quartile_n = torch.as_tensor(
            np.stack([np.bincount(q, minlength=N_QUARTILES) for q in quart]), device=device
        ).to(self.dtype)
        # One advantage table per (method, ddof, eps) over every run's G; a run's rows are those
        # of its own table (each G's rows do not depend on the other sizes).
        sizes = sorted({c.group_size for c in self.cfgs})
        kinds = sorted({(method_spec(c.method).advantage, c.ddof, c.eps) for c in self.cfgs})
        tables = [AdvantageTable(sizes, m, ddof=d, eps=e, dtype=self.dtype, device=device) for m, d, e in kinds]
        self.width = sizes[-1] + 1
        self.adv_flat = torch.cat([t.flat for t in tables])
        kind_of = [kinds.index((method_spec(c.method).advantage, c.ddof, c.eps)) for c in self.cfgs]
        self.adv_offset = torch.as_tensor(np.repeat([k * self.width**2 for k in kind_of], self.B), device=device)
        self.G = torch.as_tensor(np.repeat([c.group_size for c in self.cfgs], self.B), device=device)
        self.G_runs = self.G.reshape(self.R, self.B)
        self.ledgers = [Ledger(c.steps) for c in self.cfgs]
        self.generations_cum = [0] * self.R
        self.start = 0

    # ----------------------------------------------------------------------- per-run views
    def block(self, x: torch.Tensor, r: int, n: int) -> torch.Tensor:
        return x[r * n : (r + 1) * n]

    def population_state(self, p: torch.Tensor) -> dict:
        """The engine's population_state of each run: (R,) means and (R·4,) quartile means."""
        state = runs_population_state(p, self.quartile_at, self.quartile_n, self.R)
        return {**state, "mean_p_q": state["mean_p_q"].reshape(-1)}

    def population_summaries(self, z: torch.Tensor) -> list[dict]:
        host = to_host(self.population_state(torch.sigmoid(z)))
        return [
            {
                "mean_p": float(host["mean_p"][r]),
                "mean_arcsin": float(host["mean_arcsin"][r]),
                "quartile_mean_p": host["mean_p_q"][r * N_QUARTILES : (r + 1) * N_QUARTILES].tolist(),
            }
            for r in range(self.R)
        ]

    # ----------------------------------------------------------------------- checkpoints
    def save(self, next_step: int) -> None:
        opt = self.opt.state_dict()
        for r, out in enumerate(self.outs):
            write_checkpoint(
                out,
                next_step,
                policy={"z": self.block(self.policy.z.detach(), r, self.N).clone()},
                optimizer=_opt_block(opt, lambda t, r=r: self.block(t, r, self.N).clone()),
                gen=self.gens[r],
                z_ref=self.block(self.z_ref, r, self.N).clone(),
                device=self.device,
                table=self.ledgers[r].table,
                identity=run_identity(self.cfgs[r], ENGINE),
            )

    def load(self, ckpts) -> None:
        with torch.no_grad():
            self.policy.z.copy_(torch.cat([c["policy"]["z"] for c in ckpts]).to(self.device))
        self.opt.load_state_dict(_opt_join([c["optimizer"] for c in ckpts]))
        for gen, c in zip(self.gens, ckpts):
            gen.set_state(c["rng_rollouts"])
        torch.set_rng_state(ckpts[0]["rng_torch_cpu"])
        self.z_ref = torch.cat([c["z_ref"] for c in ckpts]).to(self.device)
        self.start = int(ckpts[0]["step"])
        for r, c in enumerate(ckpts):
            self.ledgers[r].table[: self.start] = c["ledger"].numpy()
            self.generations_cum[r] = int(self.ledgers[r].get(self.start - 1, "generations_cum")) if self.start else 0

    # ----------------------------------------------------------------------- one step
    def step(self, step: int) -> None:
        t0 = time.perf_counter()
        N, base = self.N, self.base
        with torch.no_grad():
            p_all = torch.sigmoid(self.policy())
            state = self.population_state(p_all)
        batches = [
            plan_batch(self.block(p_all, r, N), group_size=c.group_size, batch_size=base.batch_size, gen=self.gens[r])
            for r, c in enumerate(self.cfgs)
        ]
        idx = None if batches[0].idx is None else torch.cat([b.idx + r * N for r, b in enumerate(batches)])
        p_b = p_all if idx is None else torch.cat([b.p for b in batches])
        groups = self.sample(batches)
        trained = self.train(idx, groups)
        with torch.no_grad():
            self.fill_ledger(step, idx, p_b, groups, trained, state)
        wall = time.perf_counter() - t0
        for ledger in self.ledgers:
            ledger.put(step, wall_s=wall)

    def sample(self, batches) -> Groups:
        """Each run's draws from its own stream, reduced per number of draws (a block of runs)."""
        draws = [
            draw_counts(b, self.draws[r], self.base.verifier_noise, self.base.rollouts, self.gens[r])
            for r, b in enumerate(batches)
        ]
        parts, r = [], 0
        while r < self.R:
            end = r
            while end < self.R and self.draws[end] == self.draws[r]:
                end += 1
            cols = [
                torch.cat([draws[i][j] for i in range(r, end)], dim=1) if draws[r][j] is not None else None
                for j in range(3)
            ]
            G = self.G[r * self.B : end * self.B]
            batch = Batch(
                idx=None,
                p=torch.cat([b.p for b in batches[r:end]]),
                G=G,
                g_max=int(max(self.cfgs[i].group_size for i in range(r, end))),
                uniform=True,
            )  # every prompt sampled: the skipped-prompt mask would change nothing
            parts.append(groups_from_draws(batch, *cols))
            r = end
        if len(parts) == 1:
            return parts[0]
        return Groups(
            **{
                f: torch.cat([getattr(g, f) for g in parts])
                for f in ("n", "k", "G", "silent_first", "zero_update", "drawn")
            }
        )

    def train(self, idx, groups: Groups) -> dict:
        """The engine's train_on_groups for every run at once (sums per run)."""
        cfg, R = self.base, self.R
        adv = self.adv_flat.index_select(0, self.adv_offset + groups.G * self.width + groups.k)
        use_ratio = cfg.clip or cfg.ppo_epochs > 1
        clip = (cfg.clip_low, cfg.clip_high) if cfg.clip else None
        z_ref = None if not cfg.kl_coef else (self.z_ref if idx is None else self.z_ref[idx])
        G_sum = groups.G.reshape(R, -1).sum(1)
        logp_old, out = None, {}
        if use_ratio:
            with torch.no_grad():
                logp_old = log_pi(self.policy(idx))
        for epoch in range(cfg.ppo_epochs):
            z = self.policy(idx)
            if epoch == 0 and z.requires_grad and not z.is_leaf:
                z.retain_grad()
            terms = policy_loss(
                z, groups.n, adv, G=groups.G, logp_old=logp_old, z_ref=z_ref, kl_coef=cfg.kl_coef, clip=clip, runs=R
            )
            if epoch == 0 and cfg.kl_coef:
                out["dz"] = -torch.autograd.grad(terms.pg_loss.sum(), z, retain_graph=True)[0].detach()
            self.opt.zero_grad()
            terms.loss.sum().backward()
            if epoch == 0:
                if not cfg.kl_coef:
                    out["dz"] = -z.grad.detach()
                out["loss"] = terms.loss.detach()
                out["kl"] = terms.kl_sum.detach() / G_sum if cfg.kl_coef else torch.zeros(R, device=self.device)
            self.opt.step()
        if cfg.clip:
            outside = ((terms.ratio < 1 - cfg.clip_low) | (terms.ratio > 1 + cfg.clip_high)).to(self.dtype)
            out["clip_frac"] = sum_per_run((groups.n[..., 0] + groups.n[..., 1]) * outside, R) / G_sum
        return out

    def fill_ledger(self, step, idx, p_b, groups: Groups, trained: dict, state: dict) -> None:
        R, B, dev = self.R, self.B, self.device
        per_run = lambda x: x.reshape(R, -1).sum(1)  # noqa: E731
        dec_b = self.decile if idx is None else self.decile[idx]
        dec_at = self.decile_at if idx is None else self.decile_at[idx]
        named = {
            "n_batch": per_run(groups.G > 0),
            "silent": per_run(groups.silent_first),
            "zero_update": per_run(groups.zero_update),
            "groups": per_run(groups.drawn),
            "generations": per_run(groups.drawn * groups.G),
            "loss": trained["loss"],
            "kl": trained["kl"],
            "clip_frac": trained.get("clip_frac", torch.zeros(R, device=dev)),
            "grad_mass_d": torch.zeros(R * N_DECILES, device=dev, dtype=trained["dz"].dtype).index_add_(
                0, dec_at, trained["dz"]
            ),
            **state,
        }
        p64 = p_b.to(torch.float64)
        closed = []
        for r, cfg in enumerate(self.cfgs):
            update = bool(cfg.closed_form_every) and step % cfg.closed_form_every == 0
            p_r, dec_r = self.block(p64, r, B), self.block(dec_b, r, B)
            if dev.type == "cpu":  # as the engine: the core's numpy sums on a CPU run
                p_r, dec_r = p_r.numpy(), dec_r.numpy()
            closed.append(closed_form_columns(p_r, cfg.group_size, dec_r, cfg, update=update, g_max=cfg.group_size))
        if dev.type != "cpu":  # one device→host copy for every run's closed forms too
            keys = [k for k in closed[0] if all(k in c for c in closed)]
            for k in keys:
                named[f"closed_{k}"] = torch.cat([c[k].reshape(-1) for c in closed])
        host = to_host(named)
        for r in range(R):
            h = {k: _run_value(v, r, R) for k, v in host.items() if not k.startswith("closed_")}
            if dev.type == "cpu":
                h.update(closed[r])
            else:
                h.update({k[len("closed_") :]: _run_value(v, r, R) for k, v in host.items() if k.startswith("closed_")})
            self.generations_cum[r] += int(h["generations"])
            self.ledgers[r].put(step, **ledger_row(step, h, self.generations_cum[r]))


def _run_value(v, r: int, R: int):
    """Run r's entry of a host array of R values or of R equal blocks."""
    if isinstance(v, float):
        return v
    width = v.size // R
    return float(v[r]) if width == 1 else v[r * width : (r + 1) * width]


def _draws(cfg: SimConfig) -> int:
    return cfg.max_draws if method_spec(cfg.method).redraws_silent else 1


def _opt_block(state: dict, cut) -> dict:
    """A run's part of the optimizer's state_dict (tensors cut to its block; counters kept)."""
    return {k: [cut(t) if isinstance(t, torch.Tensor) else t for t in v] for k, v in state.items()}


def _opt_join(states) -> dict:
    """The program's optimizer state_dict from its runs' (tensors end to end)."""
    out = {}
    for k in states[0]:
        out[k] = [
            torch.cat([s[k][i] for s in states]) if isinstance(states[0][k][i], torch.Tensor) else states[0][k][i]
            for i in range(len(states[0][k]))
        ]
    return out


def run_program(members, *, device, progress: bool, threads: int | None, on_step=None) -> list[dict]:
    """Run compatible runs (at the same next step) as one program; their summaries, in the members' order."""
    # The count its largest run would use alone (its numbers are then those of the runs alone).
    answers = max(answers_per_step(m.cfg) for m in members)
    with cpu_threads(device, answers, threads) as used:
        prog = _Program(members, device)
        if prog.members[0].ckpt is not None:
            prog.load([m.ckpt for m in prog.members])
        initial = prog.population_summaries(prog.z_ref)
        drive(prog, prog.members, progress=progress, on_step=on_step, desc=f"{prog.R} runs")
        final = prog.population_summaries(prog.policy())
    done = finish(prog.members, prog.ledgers, initial, final, device=str(device), threads=used)
    by_pos = {m.pos: summary for m, summary in zip(prog.members, done)}
    return [by_pos[m.pos] for m in members]
