"""The training loop: a Bernoulli-logit policy trained by GRPO, Dr.GRPO, DAPO or RLOO.

:func:`run_simulation` reads top to bottom like a cleanrl script: open the run folder, build
the run's state (:func:`setup`), then for each step :func:`train_step` runs the stages

1. :func:`plan_batch` — the batch and each prompt's group size G; with a budget allocation,
   :class:`~.budget.BudgetPlanner` replaces the constant G by its plan (0 = skipped);
2. :func:`sample_groups` — draw the groups (DAPO: up to ``max_draws`` each) as cell counts
   (the planner adds them to its per-prompt counts);
3. :func:`record_rollouts` — hand them to the rollout log, when one is configured;
4. :func:`train_on_groups` — advantages from the core's table, the loss of
   :func:`~.loss.policy_loss` (PPO epochs, clip, k3), backward, optimizer step;
5. :func:`fill_ledger_row` — what the step did beside what the closed forms predict, one
   device→host copy per step (:mod:`.ledger`);
6. a checkpoint every ``checkpoint_every`` steps (:func:`checkpoint`).

A prompt's group size is a per-prompt integer tensor from step 1 on (constant unless a budget
plan replaces it, see :mod:`.budget`), so an allocator's own sizes change nothing downstream: the
advantage table covers every size it may return, the loss averages each group over its own G,
and the ledger counts Σ groups drawn × G as the step's generations.  Small CPU steps run on one
torch thread (:func:`cpu_threads`); the optimizers are :mod:`.optim`'s.

A run is a folder: ``config.json`` (the resolved config), ``ledger.parquet``, ``checkpoint.pt``
(policy, optimizer, every random state, the ledger so far, the step), with ``rollout_log`` set
a ``rollouts/`` folder in verl's or TRL's log format (:mod:`.rollout_log`) and, once finished,
``summary.json`` — the mark a sweep engine looks for (:func:`is_complete`).  Every file is
replaced atomically.  ``resume=True`` continues from the checkpoint; on CPU the ledger is then
identical to an uninterrupted run's, wall-time columns aside.  Results depend on the number of
torch threads (a reduction split across threads rounds differently): compare runs made with
the same thread count.  Random streams: see :mod:`.sampling`.
"""

from __future__ import annotations

import math
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .._errors import InputError
from ..atomic import atomic_path, make_folder, read_json, remove_temps, write_json
from ..methods import method_spec
from ..weighting import decile_index
from .config import SimConfig, config_diff, repeat_settings, resolve_device
from .ledger import COLUMNS, LEDGER_FILE, N_DECILES, N_QUARTILES, Ledger, large_group_update
from .ledger import predicted_silent, predicted_update, summarise, write_ledger
from .budget import BudgetPlanner
from .loss import AdvantageTable, log_pi, policy_loss
from .optim import SGD, Adam, make_optimizer
from .policy import make_policy
from .population import STREAM_INIT, STREAM_ROLLOUTS, initial_solve_rates, sub_seed
from .sampling import Batch, Groups, plan_batch, sample_groups

__all__ = ["run_simulation", "is_complete", "setup", "RunState", "cpu_threads", "RunInterrupted"]

CONFIG_FILE, CHECKPOINT_FILE, SUMMARY_FILE = "config.json", "checkpoint.pt", "summary.json"
ROLLOUTS_DIR = "rollouts"  # the rollout log's folder in a run folder (config key rollout_log)


#: Answers per step below which a CPU run uses one torch thread (see :func:`cpu_threads`).
SMALL_STEP = 1 << 18


@contextmanager
def cpu_threads(device: torch.device, answers_per_step: int):
    """Run a small CPU workload on one torch thread, then restore the thread count.

    Below :data:`SMALL_STEP` answers per step every tensor is too small for torch to split, so
    extra threads only add hand-offs — and on a loaded machine each hand-off waits for a core
    (10–100× slower steps measured on 2 busy cores).  The numbers are the same: a tensor this
    small is reduced by one thread either way (the paper campaign's ledgers are bit-identical at
    1 and 2 threads).  Larger runs keep torch's setting (``gsd simulate --threads``).
    """
    before = torch.get_num_threads()
    small = device.type == "cpu" and answers_per_step < SMALL_STEP
    if small and before > 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


def is_complete(out_dir) -> bool:
    """True when ``out_dir`` holds a finished run (its ``summary.json`` exists)."""
    return (Path(out_dir) / SUMMARY_FILE).is_file()


@dataclass
class RunState:
    """Everything a step reads or changes.  Built by :func:`setup`; saved by :func:`checkpoint`."""

    cfg: SimConfig
    device: torch.device
    dtype: torch.dtype
    policy: torch.nn.Module
    opt: SGD | Adam
    gen: torch.Generator  # the rollout stream
    z_ref: torch.Tensor  # logits of the frozen initial policy (the KL penalty's reference)
    adv: AdvantageTable
    decile_np: np.ndarray  # decile of each prompt's initial p (ledger columns)
    decile: torch.Tensor
    quartile: torch.Tensor  # initial-p quartile by rank, hardest first
    ledger: Ledger
    draws: int  # groups drawn per prompt at most (DAPO: max_draws)
    generations_cum: int = 0
    start: int = 0
    rollout_writer: object = None  # the rollout log's writer (None: no log); see record_rollouts
    planner: object = None  # the budget allocator's planner (None: every prompt gets group_size); see .budget
    quartile_n: torch.Tensor = field(init=False)

    def __post_init__(self):
        self.quartile_n = torch.bincount(self.quartile, minlength=N_QUARTILES).to(self.dtype)


# --------------------------------------------------------------------------- set-up
def setup(cfg: SimConfig, p0: np.ndarray, device: torch.device) -> RunState:
    """The run's state at step 0: policy at p0, optimizer, generator, tables, empty ledger."""
    dtype = getattr(torch, cfg.dtype)
    spec = method_spec(cfg.method)
    policy = make_policy(cfg, p0, seed=sub_seed(cfg.seed, STREAM_INIT), dtype=dtype, device=device)
    opt = make_optimizer(cfg, policy.parameters())
    with torch.no_grad():
        z_ref = policy().detach().clone()
    decile_np = decile_index(p0)
    quartile = np.empty(p0.size, dtype=np.int64)
    quartile[np.argsort(p0, kind="stable")] = np.arange(p0.size) * N_QUARTILES // p0.size
    planner = None if cfg.allocation == "fixed" else BudgetPlanner(cfg, p0.size, device)
    sizes = [cfg.group_size] if planner is None else list(planner.sizes)
    return RunState(
        cfg=cfg, device=device, dtype=dtype, policy=policy, opt=opt,
        gen=torch.Generator(device=device).manual_seed(sub_seed(cfg.seed, STREAM_ROLLOUTS)),
        z_ref=z_ref,
        adv=AdvantageTable(sizes, spec.advantage, ddof=cfg.ddof, eps=cfg.eps, dtype=dtype, device=device),
        decile_np=decile_np, decile=torch.as_tensor(decile_np, device=device),
        quartile=torch.as_tensor(quartile, device=device),
        ledger=Ledger(cfg.steps), draws=cfg.max_draws if spec.redraws_silent else 1, planner=planner,
    )


def population_state(run: RunState, p: torch.Tensor) -> dict:
    """mean p, mean 2·arcsin√p and the mean p per initial quartile, as device tensors."""
    q_sum = torch.zeros(N_QUARTILES, device=run.device, dtype=run.dtype).index_add_(0, run.quartile, p)
    return {"mean_p": p.mean(), "mean_arcsin": (2 * torch.asin(p.sqrt())).mean(), "mean_p_q": q_sum / run.quartile_n}


def to_host(named: dict) -> dict:
    """Device tensors → float64 numpy, in one copy: {name: float (0-d) or 1-d array}.

    One ``cat`` does the casts: an empty float64 head makes it promote every int, bool and
    float32 entry to float64 (a float32 result would round counts above 2^24).
    """
    tensors = list(named.values())
    head = torch.empty(0, dtype=torch.float64, device=tensors[0].device)
    host = torch.cat([head] + [t.detach().reshape(-1) for t in tensors]).cpu().numpy()
    out, j = {}, 0
    for name, t in zip(named, tensors):
        v = host[j : j + t.numel()]
        out[name] = float(v[0]) if t.dim() == 0 else v
        j += t.numel()
    return out


@torch.no_grad()
def population_summary(run: RunState, z: torch.Tensor) -> dict:
    """The summary's ``initial`` / ``final`` entry for logits ``z``: mean p, mean arcsin, quartiles."""
    host = to_host(population_state(run, torch.sigmoid(z)))
    return {"mean_p": host["mean_p"], "mean_arcsin": host["mean_arcsin"], "quartile_mean_p": host["mean_p_q"].tolist()}


# --------------------------------------------------------------------------- step stages
def record_rollouts(run: RunState, step: int, batch: Batch, groups: Groups) -> None:
    """Hand the step's groups to the rollout log (prompt ids, G, k; per-answer rewards by
    :meth:`Groups.rewards`).  Without a log this returns at once: no device→host copy."""
    if run.rollout_writer is None:
        return
    run.rollout_writer(step, batch, groups)


def train_on_groups(run: RunState, batch: Batch, groups: Groups) -> dict:
    """Advantages, then ``ppo_epochs`` × (loss, backward, optimizer step) on one batch of groups.

    Returns device tensors for the ledger: ``dz`` (B,), −∂(policy loss)/∂z of the first epoch
    (the per-prompt update g_j); ``loss`` and ``kl`` (mean k3 per answer) of the first epoch;
    ``clip_frac`` of the last epoch (with clipping).
    """
    cfg = run.cfg
    adv = run.adv.lookup(groups.G, groups.k)  # (B, 2)
    use_ratio = cfg.clip or cfg.ppo_epochs > 1
    clip = (cfg.clip_low, cfg.clip_high) if cfg.clip else None
    z_ref = None if not cfg.kl_coef else (run.z_ref if batch.idx is None else run.z_ref[batch.idx])
    logp_old, out = None, {}
    if use_ratio:
        with torch.no_grad():
            logp_old = log_pi(run.policy(batch.idx))  # the sampling policy: ratio exactly 1 on the first epoch
    for epoch in range(cfg.ppo_epochs):
        z = run.policy(batch.idx)
        if epoch == 0 and z.requires_grad and not z.is_leaf:
            z.retain_grad()
        terms = policy_loss(z, groups.n, adv, G=groups.G, logp_old=logp_old, z_ref=z_ref, kl_coef=cfg.kl_coef, clip=clip)
        if epoch == 0 and cfg.kl_coef:
            # The ledger compares the policy-gradient part alone with the closed forms.
            out["dz"] = -torch.autograd.grad(terms.pg_loss, z, retain_graph=True)[0].detach()
        run.opt.zero_grad()
        terms.loss.backward()
        if epoch == 0:
            if not cfg.kl_coef:
                out["dz"] = -z.grad.detach()
            out["loss"] = terms.loss.detach()
            out["kl"] = terms.kl_sum.detach() / groups.G.sum() if cfg.kl_coef else torch.zeros((), device=run.device)
        run.opt.step()
    if cfg.clip:
        outside = ((terms.ratio < 1 - cfg.clip_low) | (terms.ratio > 1 + cfg.clip_high)).to(run.dtype)  # (B, 2)
        out["clip_frac"] = ((groups.n[..., 0] + groups.n[..., 1]) * outside).sum() / groups.G.sum()
    return out


def fill_ledger_row(run: RunState, step: int, batch: Batch, groups: Groups, trained: dict, state: dict) -> dict:
    """Write ledger row ``step`` by column name; returns the row's host values.

    One device→host copy brings the step's measurements, the batch's p and G (and its prompt
    indices) to the host, where the closed forms of the core are evaluated.
    """
    cfg, dev = run.cfg, run.device
    dec_b = run.decile if batch.idx is None else run.decile[batch.idx]
    sampled = groups.G > 0
    named = {
        "n_batch": sampled.sum(), "silent": groups.silent_first.sum(), "zero_update": groups.zero_update.sum(),
        "groups": groups.drawn.sum(), "generations": (groups.drawn * groups.G).sum(),
        "loss": trained["loss"], "kl": trained["kl"], "clip_frac": trained.get("clip_frac", torch.zeros((), device=dev)),
        "grad_mass_d": torch.zeros(N_DECILES, device=dev, dtype=run.dtype).index_add_(0, dec_b, trained["dz"]),
        **state, "p": batch.p,
    }
    if not batch.uniform:  # one group size needs no copy: the closed forms take it as a number
        named["G"] = batch.G
    if batch.idx is not None:
        named["idx"] = batch.idx
    host = to_host(named)
    n_batch = host["n_batch"]
    run.generations_cum += int(host["generations"])
    dec = run.decile_np if batch.idx is None else run.decile_np[host["idx"].astype(np.int64)]
    p, G = host["p"], batch.g_max
    if not batch.uniform:
        keep = host["G"] > 0
        p, G, dec = p[keep], host["G"][keep].astype(np.int64), dec[keep]
    grad_limit, grad_law, grad_limit_d = large_group_update(p, G, dec)
    row = dict(
        step=step, n_batch=n_batch, silent_frac=host["silent"] / n_batch, zero_update_frac=host["zero_update"] / n_batch,
        groups=host["groups"], generations=host["generations"], generations_cum=run.generations_cum,
        loss=host["loss"], kl=host["kl"], clip_frac=host["clip_frac"],
        grad_mass=float(host["grad_mass_d"].sum()), grad_mass_d=host["grad_mass_d"],
        grad_limit=grad_limit, grad_law=grad_law, grad_limit_d=grad_limit_d,
        mean_p=host["mean_p"], mean_arcsin=host["mean_arcsin"], mean_p_q=host["mean_p_q"],
        effective_ratio=(n_batch - host["zero_update"]) / host["groups"] if host["groups"] else math.nan,
        value_planned=run.planner.value_planned if run.planner else math.nan,
        grad_planned=run.planner.grad_planned if run.planner else math.nan,
        **predicted_silent(p, cfg, G),
    )
    if cfg.closed_form_every and step % cfg.closed_form_every == 0:
        m = predicted_update(p, cfg, G)
        row.update(grad_pred=float(m.sum()), grad_pred_d=np.bincount(dec, weights=m, minlength=N_DECILES))
    run.ledger.put(step, **row)
    return row


# --------------------------------------------------------------------------- the loop
def train_step(run: RunState, step: int) -> dict:
    """One training step, stage by stage; returns the ledger row it wrote."""
    cfg, t0 = run.cfg, time.perf_counter()
    with torch.no_grad():
        p_all = torch.sigmoid(run.policy())  # the policy this step samples from
        state = population_state(run, p_all)
    batch = plan_batch(p_all, group_size=cfg.group_size, batch_size=cfg.batch_size, gen=run.gen)
    if run.planner is not None:
        batch = run.planner.plan(step, batch)
    groups = sample_groups(batch, draws=run.draws, noise=cfg.verifier_noise, rollouts=cfg.rollouts, gen=run.gen)
    if run.planner is not None:
        run.planner.observe(step, batch, groups)
    record_rollouts(run, step, batch, groups)
    trained = train_on_groups(run, batch, groups)
    with torch.no_grad():
        row = fill_ledger_row(run, step, batch, groups, trained, state)
    run.ledger.put(step, wall_s=time.perf_counter() - t0)
    return row


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C (or any KeyboardInterrupt) during a run: where it stopped and where it resumes.

    Steps are counted as the progress bar counts them, by steps done: ``step`` of ``steps`` were
    done when it stopped, and ``resume_step`` is the run folder's last checkpoint, where a resume
    continues (0: no checkpoint yet, a resume starts over).
    """

    def __init__(self, out: Path, name: str, step: int, steps: int, resume_step: int):
        self.out, self.name, self.step, self.steps, self.resume_step = out, name, step, steps, resume_step
        super().__init__(f"{name}: stopped at step {step} of {steps} in {str(out)!r}; "
                         + (f"its last checkpoint is at step {resume_step}, where a resume continues"
                            if resume_step else "no checkpoint yet, a resume starts at step 0"))


def run_simulation(config, out_dir, *, resume: bool = False, progress: bool = True, on_step=None,
                   notify=None) -> dict:
    """Train one arm and return its summary (see :func:`gsd.simulator.ledger.summarise`).

    ``config``: a :class:`SimConfig` or a dict of its keys.  ``out_dir``: the run folder (new,
    empty, or holding this very config).  A finished run is not redone: its summary is
    returned.  ``on_step(step)``: called after each step (and its checkpoint, if any).
    ``notify(message)``: told, in one line, when the run is found finished or resumes at a
    checkpoint (the CLI prints it).  A KeyboardInterrupt during training is raised again as
    :class:`RunInterrupted`, which says at which step the run stopped and where it resumes.
    """
    cfg = config if isinstance(config, SimConfig) else SimConfig.from_dict(config)
    device = torch.device(resolve_device(cfg.device))  # before touching the disk: bad device = no folder
    out = Path(out_dir)
    p0 = initial_solve_rates(cfg)  # before touching the disk too: a bad source = no folder
    mode, found = _open_run_folder(out, cfg, resume)
    say = notify or (lambda message: None)
    if mode == "done":
        say(f"{cfg.name}: finished earlier ({cfg.steps} steps in {str(out)!r}); its summary is read back, nothing reruns")
        return found
    from ..progress import progress_bar

    with cpu_threads(device, answers_per_step(cfg)):
        run = setup(cfg, p0, device)
        if cfg.rollout_log != "none":
            from .rollout_log import RolloutLogWriter

            run.rollout_writer = RolloutLogWriter(cfg.rollout_log, out / ROLLOUTS_DIR)
        if mode == "resume":
            _load_checkpoint(run, found, out)
            say(f"{cfg.name}: resuming at step {run.start} of {cfg.steps} (the checkpoint in {str(out)!r})")
        elif mode == "restart":
            say(f"{cfg.name}: no checkpoint in {str(out)!r} yet; starting at step 0 of {cfg.steps}")
        initial = population_summary(run, run.z_ref)
        bar = progress_bar(total=cfg.steps, initial=run.start, disable=not progress, desc=f"{cfg.name} [{cfg.method}]", unit="step")
        saved = done = run.start
        try:
            for step in range(run.start, cfg.steps):
                row = train_step(run, step)
                done = step + 1
                if (step + 1) % cfg.checkpoint_every == 0 or step + 1 == cfg.steps:
                    checkpoint(run, out, step + 1)
                    saved = step + 1
                bar.update(1)
                if progress and (step % 10 == 0 or step + 1 == cfg.steps):
                    bar.set_postfix(silent=f"{row['silent_frac']:.3f}", pred=f"{row['silent_pred']:.3f}", mean_p=f"{row['mean_p']:.3f}")
                if on_step is not None:
                    on_step(step)
        except KeyboardInterrupt:
            bar.close()
            raise RunInterrupted(out, cfg.name, done, cfg.steps, saved) from None
        bar.close()
        final = population_summary(run, run.policy())
    summary = summarise(run.ledger.columns(), cfg, initial=initial, final=final, device=str(device))
    write_json(out / SUMMARY_FILE, summary)  # written last: it marks the run complete
    return read_json(out / SUMMARY_FILE)


def answers_per_step(cfg: SimConfig) -> int:
    """Answers a step draws at most: batch × G × (DAPO: max_draws)."""
    if cfg.allocation != "fixed" and cfg.budget:
        return cfg.budget  # a budget plan draws at most its budget (no redraws with a plan)
    return (cfg.batch_size or cfg.n_prompts) * cfg.group_size * (cfg.max_draws if method_spec(cfg.method).redraws_silent else 1)


# --------------------------------------------------------------------------- run folder
def _open_run_folder(out: Path, cfg: SimConfig, resume: bool):
    """Create the folder, or check that the one there belongs to this config.

    Returns ``("done", summary)`` for a finished run of the same config, ``("resume", path)``
    when a checkpoint should be loaded, ``("restart", None)`` for an unfinished run that has none
    yet, ``("fresh", None)`` otherwise.
    """
    saved_path = out / CONFIG_FILE
    if saved_path.is_file():
        saved = read_json(saved_path)
        if saved != cfg.to_dict():
            diff = "; ".join(config_diff(saved, cfg.to_dict()))
            raise InputError(f"out_dir {str(out)!r} holds a run with a different config ({diff}); to continue that "
                             f"run, give it the same config (gsd simulate: {repeat_settings(saved, cfg.to_dict())}), "
                             "or use another folder")
        if is_complete(out):
            return "done", read_json(out / SUMMARY_FILE)
        if not resume:
            raise InputError(f"out_dir {str(out)!r} holds an unfinished run of this config; pass resume (--resume) to continue it")
        remove_temps(out)  # half-written files of the killed process
        ckpt = out / CHECKPOINT_FILE
        return ("resume", ckpt) if ckpt.is_file() else ("restart", None)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(f"out_dir {str(out)!r} exists and is not a run folder (no {CONFIG_FILE}); use an empty or new folder")
    make_folder(out)
    write_json(saved_path, cfg.to_dict())
    return "fresh", None


def checkpoint(run: RunState, out: Path, next_step: int) -> None:
    """Save everything needed to continue at ``next_step``, then the ledger so far."""
    done_rows = run.ledger.table[:next_step]
    state = {
        "step": next_step,
        "policy": run.policy.state_dict(),
        "optimizer": run.opt.state_dict(),
        "rng_rollouts": run.gen.get_state(),
        "rng_torch_cpu": torch.get_rng_state(),
        "z_ref": run.z_ref.cpu(),
        "device_type": run.device.type,
        "ledger_columns": list(COLUMNS),
        "ledger": torch.from_numpy(done_rows.copy()),
    }
    if run.planner is not None:
        state["planner"] = run.planner.state_dict()
    with atomic_path(out / CHECKPOINT_FILE) as tmp:
        torch.save(state, tmp)
    write_ledger(out / LEDGER_FILE, done_rows)


def _load_checkpoint(run: RunState, path: Path, out: Path) -> None:
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    if ckpt["device_type"] != run.device.type:
        raise InputError(
            f"config key 'device' = {run.cfg.device!r}: the checkpoint was written on {ckpt['device_type']}, "
            f"this process would run on {run.device.type}; the random streams differ, resume on {ckpt['device_type']}"
        )
    if ckpt["ledger_columns"] != list(COLUMNS):
        raise InputError(f"out_dir {str(out)!r}: the checkpoint's ledger has other columns (written by another version)")
    run.policy.load_state_dict(ckpt["policy"])
    run.opt.load_state_dict(ckpt["optimizer"])
    run.gen.set_state(ckpt["rng_rollouts"])
    torch.set_rng_state(ckpt["rng_torch_cpu"])
    run.z_ref = ckpt["z_ref"].to(run.device)
    if run.planner is not None:
        run.planner.load_state_dict(ckpt["planner"])
    run.start = int(ckpt["step"])
    run.ledger.table[: run.start] = ckpt["ledger"].numpy()
    run.generations_cum = int(run.ledger.get(run.start - 1, "generations_cum")) if run.start else 0
