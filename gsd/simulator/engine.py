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
5. :func:`fill_ledger_row` — what the step did beside what the closed forms predict (on a
   GPU evaluated on the device), one device→host copy per step (:mod:`.ledger`);
6. a checkpoint every ``checkpoint_every`` steps (:func:`checkpoint`).

A prompt's group size is a per-prompt integer tensor from step 1 on (constant unless a budget
plan replaces it, see :mod:`.budget`), so an allocator's own sizes change nothing downstream: the
advantage table covers every size it may return, the loss averages each group over its own G,
and the ledger counts Σ groups drawn × G as the step's generations.  A CPU run picks its torch
thread count for speed (:func:`choose_threads`: one, unless a large step and a probe say more
pay off); the optimizers are :mod:`.optim`'s.  Several runs that differ only in seed, method or
group size can run as one program (:mod:`.batched`).

A run is a folder: ``config.json`` (the resolved config), ``ledger.parquet``, ``checkpoint.pt``
(policy, optimizer, every random state, the ledger so far, the step), with ``rollout_log`` set
a ``rollouts/`` folder in verl's or TRL's log format (:mod:`.rollout_log`) and, once finished,
``summary.json`` — the mark a sweep engine looks for (:func:`is_complete`).  Every file is
replaced atomically, and one process at a time writes the folder (:func:`gsd.io.lock.hold_folder`).
``resume=True`` clears what a killed process left half-written, verifies the checkpoint whole (a
damaged or foreign one is named; :func:`read_checkpoint`), rewrites the ledger from it, and reads
the ledger back before ``summary.json`` — the run-folder layer of :mod:`.runfolder`; on
CPU the ledger is then identical to an uninterrupted run's, wall-time columns aside.  Results depend on the number of
torch threads (a reduction split across threads rounds differently): compare runs made with
the same thread count — the summary records it (``threads``) and a resume keeps the
checkpoint's.  Random streams: see :mod:`.sampling`.
"""

from __future__ import annotations

import io
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..extras import require_torch

torch = require_torch("the torch engine (gsd.simulator.engine)")

from ..core.methods import method_spec
from ..core.weighting import decile_index
from ..errors import InputError
from .budget import BudgetPlanner
from .config import SimConfig, resolve_device
from .ledger import COLUMNS, N_QUARTILES, Ledger, closed_form_columns, per_decile
from .loss import AdvantageTable, log_pi, policy_loss
from .optim import SGD, Adam, make_optimizer
from .policy import make_policy
from .population import STREAM_INIT, STREAM_ROLLOUTS, initial_quartiles, initial_solve_rates, sub_seed
from .population import population_state as runs_population_state
from .runfolder import (  # noqa: F401  (re-exported: the run-folder names, as before they moved)
    CHECKPOINT_FILE,
    CONFIG_FILE,
    ROLLOUTS_DIR,
    SUMMARY_FILE,
    RunInterrupted,
    answers_per_step,
    check_array,
    check_identity,
    check_ledger_rows,
    check_step,
    damaged,
    drive,
    finish,
    is_complete,
    ledger_row,
    logged_rows_per_step,
    open_run_folder,
    open_runs,
    run_identity,
    save_checkpoint,
    verify_ledger,
)
from .sampling import Batch, Groups, plan_batch, sample_groups

__all__ = ["run_simulation", "is_complete", "setup", "RunState", "cpu_threads", "RunInterrupted"]


#: Answers per step below which a CPU run uses one torch thread (see :func:`cpu_threads`).
SMALL_STEP = 1 << 18
#: Elements of the thread probe's tensor (see :func:`threads_pay_off`): large enough for torch
#: to split every op, a few ms per round.
PROBE_ELEMENTS = 1 << 20
#: More threads are kept only when the probe runs at most this fraction of one thread's time.
PROBE_GAIN = 0.8


def threads_pay_off(threads: int, elements: int = PROBE_ELEMENTS, rounds: int = 3) -> bool:
    """Whether ``threads`` torch threads run a step-like workload clearly faster than one, now.

    The workload is what a large step does to its tensors: uniforms, an elementwise map, a
    comparison and two sums, over ``elements`` entries, from a private generator (the run's
    random streams are untouched).  Rounds alternate one thread and ``threads``; the medians
    decide.  On a machine where another process holds a core, every hand-off between threads
    waits for that core's time slice and the multi-threaded rounds come out several times
    slower: one thread wins.  Leaves torch's thread count as it found it.
    """
    before = torch.get_num_threads()
    gen = torch.Generator().manual_seed(0)
    buf = torch.empty(elements, dtype=torch.float32)
    times = {1: [], threads: []}
    try:
        for _ in range(rounds):
            for n in (1, threads):
                torch.set_num_threads(n)
                t0 = time.perf_counter()
                torch.rand(elements, generator=gen, out=buf)
                (torch.sigmoid(buf) < 0.5).sum()
                buf.log1p().sum()
                times[n].append(time.perf_counter() - t0)
    finally:
        torch.set_num_threads(before)
    return float(np.median(times[threads])) <= PROBE_GAIN * float(np.median(times[1]))


def choose_threads(device: torch.device, answers_per_step: int, threads: int | None = None) -> int:
    """The torch CPU thread count a run uses: ``threads`` when given (``--threads``), else one
    thread unless the step is large (≥ :data:`SMALL_STEP` answers) and a short probe shows more
    threads pay off on this machine now (:func:`threads_pay_off`).  A GPU run keeps torch's
    count (the host threads only launch kernels)."""
    before = torch.get_num_threads()
    if threads is not None:
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise InputError(f"threads must be an integer >= 1, got {threads!r}")
        return threads
    if device.type != "cpu":
        return before
    if before == 1 or answers_per_step < SMALL_STEP:
        return 1
    return before if threads_pay_off(before) else 1


@contextmanager
def cpu_threads(device: torch.device, answers_per_step: int, threads: int | None = None):
    """Run a workload on the thread count :func:`choose_threads` picks (yielded), then restore
    torch's count.

    Why not torch's default: below :data:`SMALL_STEP` answers per step every tensor is too
    small for torch to split, so extra threads only add hand-offs — and on a loaded machine
    each hand-off waits for a core (10–100× slower steps measured on 2 busy cores); above it,
    two threads on a 2-core machine with one other CPU-bound process took 15× one thread's time
    per step.  The numbers depend on the count (a reduction split across threads rounds
    differently): the run summary records it, and a resumed run keeps its checkpoint's.
    """
    before = torch.get_num_threads()
    chosen = choose_threads(device, answers_per_step, threads)
    if chosen != before:
        torch.set_num_threads(chosen)
    try:
        yield chosen
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


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
    decile: torch.Tensor  # decile of each prompt's initial p (ledger columns)
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
    quartile = initial_quartiles(p0)
    planner = None if cfg.allocation == "fixed" else BudgetPlanner(cfg, p0.size, device)
    sizes = [cfg.group_size] if planner is None else list(planner.sizes)
    return RunState(
        cfg=cfg,
        device=device,
        dtype=dtype,
        policy=policy,
        opt=opt,
        gen=torch.Generator(device=device).manual_seed(sub_seed(cfg.seed, STREAM_ROLLOUTS)),
        z_ref=z_ref,
        adv=AdvantageTable(sizes, spec.advantage, ddof=cfg.ddof, eps=cfg.eps, dtype=dtype, device=device),
        decile=torch.as_tensor(decile_index(p0), device=device),
        quartile=torch.as_tensor(quartile, device=device),
        ledger=Ledger(cfg.steps),
        draws=cfg.max_draws if spec.redraws_silent else 1,
        planner=planner,
    )


def population_state(run: RunState, p: torch.Tensor) -> dict:
    """mean p, mean 2·arcsin√p (0-d) and the mean p per initial quartile (4,), as device tensors
    (:func:`~.population.population_state` of a program of one)."""
    state = runs_population_state(p, run.quartile, run.quartile_n, 1)
    return {"mean_p": state["mean_p"][0], "mean_arcsin": state["mean_arcsin"][0], "mean_p_q": state["mean_p_q"][0]}


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
    run.rollout_writer(step, batch, groups, run.adv.lookup(groups.G, groups.k))


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
        terms = policy_loss(
            z, groups.n, adv, G=groups.G, logp_old=logp_old, z_ref=z_ref, kl_coef=cfg.kl_coef, clip=clip
        )
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

    The closed forms of the core are evaluated in float64 from the batch's p and G
    (:func:`.ledger.closed_form_columns`): on a GPU as torch ops on the device (:mod:`.binomial`),
    so the step never waits for the host; one device→host copy brings them to the host with
    the step's measurements.  On a CPU they run in the numpy core.
    """
    cfg, dev = run.cfg, run.device
    dec_b = run.decile if batch.idx is None else run.decile[batch.idx]
    sampled = groups.G > 0
    named = {
        "n_batch": sampled.sum(),
        "silent": groups.silent_first.sum(),
        "zero_update": groups.zero_update.sum(),
        "groups": groups.drawn.sum(),
        "generations": (groups.drawn * groups.G).sum(),
        "loss": trained["loss"],
        "kl": trained["kl"],
        "clip_frac": trained.get("clip_frac", torch.zeros((), device=dev)),
        "grad_mass_d": per_decile(trained["dz"], dec_b),
        **state,
    }
    p, G, keep = batch.p.to(torch.float64), batch.g_max, None
    if not batch.uniform:
        keep = batch.G > 0
    update = bool(cfg.closed_form_every) and step % cfg.closed_form_every == 0
    if dev.type == "cpu":
        # The host is the device: the core's blocked numpy sums are ~3x faster than torch ops here.
        p, dec = p.numpy(), dec_b.numpy()
        if keep is not None:
            keep = keep.numpy()
            p, G, dec, keep = p[keep], batch.G.numpy()[keep], dec[keep], None
        closed = closed_form_columns(p, G, dec, cfg, update=update)
    else:
        if keep is not None:  # a skipped prompt (G = 0) counts nowhere: its G is any valid one
            G = torch.where(keep, batch.G, batch.g_max)
        named.update(closed_form_columns(p, G, dec_b, cfg, keep=keep, update=update, g_max=batch.g_max))
        closed = {}
    host = {**to_host(named), **closed}
    run.generations_cum += int(host["generations"])
    row = ledger_row(step, host, run.generations_cum, run.planner)
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


def run_simulation(
    config,
    out_dir,
    *,
    resume: bool = False,
    progress: bool = True,
    on_step=None,
    notify=None,
    threads: int | None = None,
) -> dict:
    """Train one arm and return its summary (see :func:`gsd.simulator.ledger.summarise`).

    ``config``: a :class:`SimConfig` or a dict of its keys.  ``out_dir``: the run folder (new,
    empty, or holding this very config).  A finished run is not redone: its summary is
    returned.  ``on_step(step)``: called after each step (and its checkpoint, if any).
    ``notify(message)``: told, in one line, when the run is found finished or resumes at a
    checkpoint (the CLI prints it).  A KeyboardInterrupt during training is raised again as
    :class:`RunInterrupted`, which says at which step the run stopped and where it resumes.
    ``threads``: torch CPU threads (default: chosen for speed, :func:`choose_threads`; a resumed
    run keeps its checkpoint's); the summary's ``threads`` records the count used.  The folder
    is opened, locked, verified and finished by the run-folder layer (:mod:`.runfolder`).
    """
    from contextlib import ExitStack

    cfg = config if isinstance(config, SimConfig) else SimConfig.from_dict(config)
    device = torch.device(resolve_device(cfg.device))  # before touching the disk: bad device = no folder
    p0 = initial_solve_rates(cfg)  # before touching the disk too: a bad source = no folder
    with ExitStack() as held:
        summaries, members = open_runs(
            [(cfg, Path(out_dir))],
            [p0],
            resume=resume,
            engine=ENGINE,
            read_checkpoint=checkpoint_reader(device),
            held=held,
            notify=notify,
        )
        if not members:
            return summaries[0]
        return run_member(members[0], device, progress=progress, on_step=on_step, threads=threads)


class _OneRun:
    """A run of this engine as the run-folder layer drives it (:func:`~.runfolder.drive`)."""

    def __init__(self, run: RunState, out: Path):
        self.run, self.out = run, out

    @property
    def start(self) -> int:
        return self.run.start

    def step(self, step: int) -> dict:
        row = train_step(self.run, step)
        return dict(silent=f"{row['silent_frac']:.3f}", pred=f"{row['silent_pred']:.3f}", mean_p=f"{row['mean_p']:.3f}")

    def save(self, next_step: int) -> None:
        checkpoint(self.run, self.out, next_step)


def run_member(m, device: torch.device, *, progress: bool, on_step=None, threads: int | None = None) -> dict:
    """Run one opened run folder (a :class:`~.runfolder.Member`) to its end; its summary."""
    cfg, out = m.cfg, m.out
    if m.ckpt is not None and threads is None and device.type == "cpu":
        threads = m.ckpt.get("threads")  # the same count: the resumed ledger continues the run's
    with cpu_threads(device, answers_per_step(cfg), threads) as used:
        run = setup(cfg, m.p0, device)
        if cfg.rollout_log != "none":
            from .rollout_log import RolloutLogWriter

            run.rollout_writer = RolloutLogWriter(
                cfg.rollout_log, out / ROLLOUTS_DIR, rows=logged_rows_per_step(cfg) * cfg.steps
            )
        if m.ckpt is not None:
            _load_checkpoint(run, m.ckpt)
        initial = population_summary(run, run.z_ref)
        drive(_OneRun(run, out), [m], progress=progress, on_step=on_step)
        final = population_summary(run, run.policy())
    return finish([m], [run.ledger], [initial], [final], device=str(device), threads=used)[0]


# --------------------------------------------------------------------------- run folder
def checkpoint(run: RunState, out: Path, next_step: int) -> None:
    """Save everything needed to continue at ``next_step``, then the ledger so far."""
    write_checkpoint(
        out,
        next_step,
        policy=run.policy.state_dict(),
        optimizer=run.opt.state_dict(),
        gen=run.gen,
        z_ref=run.z_ref,
        device=run.device,
        table=run.ledger.table,
        identity=run_identity(run.cfg, ENGINE),
        planner=None if run.planner is None else run.planner.state_dict(),
    )


def write_checkpoint(
    out: Path,
    next_step: int,
    *,
    policy: dict,
    optimizer: dict,
    gen: torch.Generator,
    z_ref: torch.Tensor,
    device: torch.device,
    table: np.ndarray,
    identity: dict,
    planner: dict | None = None,
) -> None:
    """A run folder's ``checkpoint.pt`` and ledger at ``next_step`` (also a batched run's, :mod:`.batched`);
    ``identity``: the run it belongs to (:func:`~.runfolder.run_identity`)."""
    done_rows = table[:next_step]
    state = {
        "run": dict(identity),
        "step": next_step,
        "policy": policy,
        "optimizer": optimizer,
        "rng_rollouts": gen.get_state(),
        "rng_torch_cpu": torch.get_rng_state(),
        "z_ref": z_ref.cpu(),
        "device_type": device.type,
        "threads": torch.get_num_threads(),
        "ledger_columns": list(COLUMNS),
        "ledger": torch.from_numpy(done_rows.copy()),
    }
    if planner is not None:
        state["planner"] = planner
    # Serialised in memory, then written as bytes: torch's own file writer reports a full disk
    # as a RuntimeError without its errno; a plain write names it (one line, see gsd.io.atomic).
    buf = io.BytesIO()
    torch.save(state, buf)
    save_checkpoint(out, ENGINE, buf.getbuffer(), done_rows)


_CHECKPOINT_KEYS = (
    "run",
    "step",
    "policy",
    "optimizer",
    "rng_rollouts",
    "rng_torch_cpu",
    "z_ref",
    "device_type",
    "ledger_columns",
    "ledger",
)
ENGINE = "torch"


def checkpoint_reader(device: torch.device):
    """``read_checkpoint(path, cfg, p0)`` for :func:`~.runfolder.open_runs`: :func:`read_checkpoint` on ``device``."""
    return lambda path, cfg, p0: read_checkpoint(path, cfg, device, p0)


def read_checkpoint(path: Path, cfg: SimConfig, device: torch.device, p0: np.ndarray) -> dict:
    """The checkpoint of a run folder, verified whole before any step (a damaged or foreign one
    is named in one line): readable; naming this run (:func:`~.runfolder.check_identity`); its
    step and ledger; written on this device type; the policy's and the optimizer's tensors of this
    run's names, shapes and dtype, finite, Adam's step counts >= 0 and its second moments >= 0; the
    reference logits exactly this run's initial ones; both random states of their generator's size
    and loadable; a budget planner's state loadable."""
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a cut or overwritten file fails in pickle, zipfile or torch itself
        raise damaged(path, f"{type(exc).__name__}: {str(exc).splitlines()[0][:80] if str(exc) else ''}") from None
    missing = [k for k in _CHECKPOINT_KEYS if not isinstance(ckpt, dict) or k not in ckpt]
    if missing:
        if missing[0] == "run":
            check_identity(path, None, cfg, ENGINE)
        raise damaged(path, f"no {missing[0]!r} entry")
    if cfg.allocation != "fixed" and "planner" not in ckpt:
        raise damaged(path, "no 'planner' entry")
    if ckpt["ledger_columns"] != list(COLUMNS):
        raise InputError(f"{str(path)!r}: the checkpoint's ledger has other columns (written by another version)")
    check_identity(path, ckpt["run"], cfg, ENGINE)
    start = check_step(path, ckpt["step"], cfg)
    check_ledger_rows(path, ckpt["ledger"], start)
    if ckpt["device_type"] != device.type:
        raise InputError(
            f"config key 'device' = {cfg.device!r}: the checkpoint {str(path)!r} was written on {ckpt['device_type']!r}, "
            f"this process would run on {device.type}; the random streams differ, resume on {ckpt['device_type']}"
        )
    threads = ckpt.get("threads")
    if threads is not None and (
        isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= 1 << 16
    ):
        raise damaged(path, f"its thread count {threads!r} is not an integer in [1, 65536]")
    # This run's fresh state on the CPU: the names, shapes and dtypes the checkpoint must have.
    fresh = setup(cfg, p0, torch.device("cpu"))
    _check_tensors(path, "policy", ckpt["policy"], fresh.policy.state_dict())
    _check_optimizer(path, ckpt["optimizer"], fresh.opt, start * cfg.ppo_epochs)
    check_array(path, "z_ref", ckpt["z_ref"], tuple(fresh.z_ref.shape), fresh.z_ref.dtype)
    same = (
        torch.equal(ckpt["z_ref"], fresh.z_ref) if device.type == "cpu" else torch.allclose(ckpt["z_ref"], fresh.z_ref)
    )
    if not same:
        raise InputError(
            f"{str(path)!r} belongs to another run (its initial logits are not this run's population); "
            "delete it, or the run folder, and run again"
        )
    for name, gen in (("rng_rollouts", torch.Generator(device=device)), ("rng_torch_cpu", torch.Generator())):
        state = ckpt[name]
        want = gen.get_state()
        if not isinstance(state, torch.Tensor) or state.dtype != want.dtype or state.shape != want.shape:
            raise damaged(
                path,
                f"its random state {name!r} is not a {device.type if name == 'rng_rollouts' else 'cpu'} "
                f"generator's ({tuple(getattr(state, 'shape', ()))} {getattr(state, 'dtype', type(state).__name__)}, "
                f"one is {tuple(want.shape)} {want.dtype})",
            )
        try:
            gen.set_state(state)
        except (RuntimeError, ValueError) as exc:
            raise damaged(path, f"its random state {name!r} does not load ({str(exc).splitlines()[0][:60]})") from None
    if fresh.planner is not None:
        try:
            fresh.planner.load_state_dict(ckpt["planner"])
        except Exception as exc:  # a planner state of another shape fails in numpy or torch
            raise damaged(path, f"its budget planner's state does not load ({type(exc).__name__})") from None
    return ckpt


def _check_tensors(path: Path, what: str, found, want: dict) -> None:
    """Tensors named as ``want``'s, of their shapes and dtypes, finite."""
    if not isinstance(found, dict) or sorted(found) != sorted(want):
        raise damaged(
            path,
            f"its {what} holds {sorted(found) if isinstance(found, dict) else type(found).__name__}, "
            f"this run's {sorted(want)}",
        )
    for key, ref in want.items():
        check_array(path, f"{what}.{key}", found[key], tuple(ref.shape), ref.dtype)


def _check_optimizer(path: Path, found, fresh, steps: int) -> None:
    """An optimizer state_dict against this run's fresh optimizer (:mod:`.optim`) after ``steps`` steps."""
    params = fresh.params
    if isinstance(fresh, Adam):
        if not isinstance(found, dict) or any(
            not isinstance(found.get(k), list) or len(found[k]) != len(params)
            for k in ("steps", "exp_avg", "exp_avg_sq")
        ):
            raise damaged(path, "its Adam state is not this run's (steps, exp_avg, exp_avg_sq per parameter)")
        for i, q in enumerate(params):
            count = found["steps"][i]
            if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= steps:
                raise damaged(path, f"its Adam step count {count!r} is not in [0, {steps}]")
            check_array(path, f"optimizer.exp_avg[{i}]", found["exp_avg"][i], tuple(q.shape), q.dtype)
            check_array(
                path, f"optimizer.exp_avg_sq[{i}]", found["exp_avg_sq"][i], tuple(q.shape), q.dtype, nonnegative=True
            )
        return
    buffers = found.get("buffers") if isinstance(found, dict) else None
    if not isinstance(buffers, list) or len(buffers) != len(params):
        raise damaged(path, "its SGD state is not this run's (one momentum buffer per parameter)")
    for i, (b, q) in enumerate(zip(buffers, params)):
        if b is not None:
            check_array(path, f"optimizer.buffers[{i}]", b, tuple(q.shape), q.dtype)


def _load_checkpoint(run: RunState, ckpt: dict) -> None:
    """Restore the run from its verified checkpoint (the layer has rewritten the ledger file)."""
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
