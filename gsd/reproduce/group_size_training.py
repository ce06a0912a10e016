r"""Which group size, and which prompts, learn fastest per generation and per second: TRL 1.16.0's own
``GRPOTrainer`` trained on tiny tasks whose solve rates are exact, every arm at an equal cost.

What is held fixed decides the answer.  With TRL's token-normalised loss and one-token answers the
expected update of a step is the mean over its groups of

.. math::  \varphi(G, p_x)\,\nabla\, 2\arcsin\sqrt{p_x}  \quad\text{(GRPO, population std)},\qquad
           (1 - 1/G)\,\nabla p_x \quad\text{(Dr.GRPO)},

with :math:`\varphi(G,p) = \mathbb{E}[\hat\sigma]/\sqrt{p(1-p)}` (:func:`gsd.core.update.fidelity`).  Two
protocols spend the same generations:

``"prompts"``
    a fixed number of groups per step (``prompts_per_step``), so a step holds ``n·G`` generations
    and G = 2 takes 8× the steps of G = 16 at equal generations;
``"generations"``
    a fixed number of generations per step (``generations_per_step`` = B), ``B/G`` groups, the same
    number of steps for every G.

Under plain SGD the first favours G = 2 by about :math:`(\varphi(2)/2)/(\varphi(8)/8)` per generation,
the second favours a large G (more of the update survives per group); under Adam (TRL's default
AdamW) a step moves the weights by about the learning rate whatever the gradient's scale, so the
number of optimizer steps dominates.  Every result names its protocol.

Tasks (:func:`gsd.reproduce.transformer.build_task`): ``"first_token"``, each prompt its own token
(learning one prompt moves no other in expectation), teacher's rates spread over [0, 1]; and
``"shared"``, prompts ``u_i v_j`` whose right answer is a rule of the feature ``u_i`` (learning one
moves the others: something the tabular simulator cannot represent).

Arms: uniform G (TRL's own sampler); Dr.GRPO at the best uniform G; GRESO's pre-rollout rule
(:class:`GresoChooser`); an exact-p oracle (:class:`OracleChooser`); gsd's live policy
(:func:`gsd_live_trainer`).  Every training records the truth inside the run: the exact p of every
prompt before every step, every reward the reward function returned (so every generation is
counted), TRL's ``step_time`` and ``time.perf_counter``.

torch, transformers and trl are imported inside the functions: ``import gsd`` stays light.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError

#: The tasks: keyword arguments of :func:`~gsd.reproduce.transformer.build_task`.
TASKS: dict[str, dict[str, Any]] = {
    "first_token": {"structure": "own", "p_range": (0.0, 1.0)},
    "shared": {"structure": "shared"},
}
PROTOCOLS = ("prompts", "generations")
#: Hardest-quarter targets (mean exact p of the prompts with the lowest quarter of initial p).
TARGETS = (0.5, 0.8, 0.9)
#: Arms beyond the uniform G, each run at the best uniform G of its (task, lr, protocol).
ARMS = ("dr_grpo", "greso", "oracle", "gsd", "cgrpo")
ARM_COLORS = {
    "dr_grpo": "tab:red",
    "greso": "tab:orange",
    "oracle": "black",
    "gsd": "tab:purple",
    "cgrpo": "tab:green",
}
#: trl-cgrpo's arm: its default budget grid cut at 8 slots per prompt (a step of the smallest per-step
#: budget here, 64 rows, then holds 8 prompts, not 2), its own token-level loss type.
CGRPO_GRID = (2, 4, 8)


@dataclass(frozen=True)
class Config:
    """Every size of a run (:data:`FULL`, :data:`FAST`)."""

    n_prompts: int = 128
    tasks: tuple = ("first_token", "shared")
    lrs: tuple = (3e-4, 1e-3)
    seeds: tuple = (0, 1, 2)
    group_sizes: tuple = (2, 4, 8, 16)
    arms: tuple = ARMS
    protocols: tuple = PROTOCOLS
    prompts_per_step: int = 32  # protocol "prompts": groups per step
    generations_per_step: int = 128  # protocol "generations": B
    budget: int = 8192  # generations of every training
    max_len: int = 4  # TRL's max_completion_length
    pretrain_steps: int = 150
    variant: str = "correlated"

    def check(self) -> Config:
        bad = (
            [t for t in self.tasks if t not in TASKS]
            + [a for a in self.arms if a not in ARMS]
            + [p for p in self.protocols if p not in PROTOCOLS]
        )
        if bad or not (self.tasks and self.lrs and self.seeds and self.group_sizes and self.protocols):
            raise InputError(f"unknown or empty tasks/arms/protocols/lrs/seeds/group sizes: {bad or self!r}")
        for G in self.group_sizes:
            if not (isinstance(G, (int, np.integer)) and 2 <= G <= 64):
                raise InputError(f"group_sizes must be integers in [2, 64], got {G!r}")
            if "prompts" in self.protocols and self.budget % (self.prompts_per_step * G):
                raise InputError(
                    f"budget {self.budget} is not a multiple of prompts_per_step × G = "
                    f"{self.prompts_per_step * G}: the arms would not spend equal generations"
                )
            if "generations" in self.protocols and (
                self.generations_per_step % G or self.budget % self.generations_per_step
            ):
                raise InputError(
                    f"generations_per_step {self.generations_per_step} must be a multiple of G = {G} "
                    f"and divide budget {self.budget}"
                )
        most = max(self.prompts_per_step, self.generations_per_step // min(self.group_sizes))
        if most > self.n_prompts:
            raise InputError(f"more groups per step than the {self.n_prompts} prompts")
        for lr in self.lrs:
            if not (np.isfinite(lr) and 0 < lr < 1):
                raise InputError(f"lrs must be numbers in (0, 1), got {lr!r}")
        return self


FULL = Config()
#: The suite's and ``gsd reproduce``'s size: both tasks and protocols, every arm, one seed, seconds.
FAST = Config(
    n_prompts=32,
    lrs=(1e-2,),
    seeds=(0,),
    group_sizes=(2, 4),
    prompts_per_step=4,
    generations_per_step=16,
    budget=64,
    pretrain_steps=30,
    arms=("dr_grpo", "greso", "oracle", "gsd"),  # trl-cgrpo: the full run only (optional install)
)


# ----------------------------------------------------------------------------------------------
# Arms


class OracleChooser:
    r"""Before each generation, the ``n`` prompts of largest :math:`\varphi(G, p_x)` at the model's
    exact p (ties in random order): the prompts whose group moves :math:`2\arcsin\sqrt{p}` most per
    rollout in expectation.  A greedy bound on skipping by value with the truth known, not an
    optimum over a run: it never spends rollouts on a prompt near p = 0 or 1 while others are
    worth more."""

    def __init__(self, task, G: int, seed: int):
        self.task, self.G = task, int(G)
        self.prompts = list(task.prompts)
        self.rng = np.random.default_rng(seed)
        self.skipped = 0

    def choose(self, n: int) -> np.ndarray:
        from ..core.update import fidelity

        value = fidelity(self.task.solve_rates(), self.G)
        order = np.lexsort((self.rng.random(value.size), -value))
        return order[:n]

    def observe(self, rows, rewards) -> None:
        pass


class GresoChooser:
    r"""GRESO's pre-rollout filter (Zheng et al., "Act Only When It Pays: Efficient Reinforcement
    Learning for LLM Reasoning via Selective Rollouts", arXiv:2506.02177), as the paper states it.

    Each prompt keeps its reward trace.  At its turn (shuffled passes through the prompts) a prompt
    whose last ``z`` groups in a row were all right (easy) or all wrong (hard) is skipped before
    rollout with probability :math:`1 - \max(p_e^{\,z}, 0.01)`, :math:`p_e` the exploration
    probability of its kind (``p_easy``/``p_hard``); the batch is filled with the next prompts.
    After each step (from the second pass on) each :math:`p_e` moves by 0.01 within [0.05, 0.95]:
    down when that kind's share of the step's groups is at or above its target (α/3 easy, 2α/3
    hard, α = 0.25: more exploration of hard prompts), up otherwise; both start at 0.5.  The
    constants are those of the authors' released scripts (``target_zero_variance=0.25``,
    ``p_easy = p_hard = 0.5``).  Their post-rollout dynamic sampling (dropping silent groups and
    sampling more) is not applied: every arm here spends exactly the same generations per step.
    """

    def __init__(
        self,
        prompts,
        G: int,
        seed: int,
        *,
        alpha: float = 0.25,
        start: float = 0.5,
        delta: float = 0.01,
        bounds=(0.05, 0.95),
        floor: float = 0.01,
    ):
        self.prompts = list(prompts)
        self.G = int(G)
        self.rng = np.random.default_rng(seed)
        P = len(self.prompts)
        self.z_easy, self.z_hard = np.zeros(P, np.int64), np.zeros(P, np.int64)
        self.p_easy = self.p_hard = float(start)
        self.target_easy, self.target_hard = alpha / 3, 2 * alpha / 3
        self.delta, self.bounds, self.floor = float(delta), tuple(bounds), float(floor)
        self._queue = np.zeros(0, np.int64)
        self.passes = 0
        self.skipped = 0
        self.index = {p: i for i, p in enumerate(self.prompts)}

    def _turns(self, count: int) -> np.ndarray:
        out = []
        while count:
            if self._queue.size == 0:
                self._queue = self.rng.permutation(len(self.prompts))
                self.passes += 1
            take, self._queue = self._queue[:count], self._queue[count:]
            out.append(take)
            count -= take.size
        return np.concatenate(out)

    def keep_probability(self, rows) -> np.ndarray:
        """:math:`\\max(p_e^z, 0.01)` for prompts with a streak of z ≥ 1 silent groups, else 1."""
        ze, zh = self.z_easy[rows], self.z_hard[rows]
        keep_e = np.maximum(self.p_easy**ze, self.floor)
        keep_h = np.maximum(self.p_hard**zh, self.floor)
        return np.where(ze > 0, keep_e, np.where(zh > 0, keep_h, 1.0))

    def choose(self, n: int) -> np.ndarray:
        chosen = []
        need = n
        while need:
            rows = self._turns(need)
            skip = self.rng.random(rows.size) >= self.keep_probability(rows)
            chosen.append(rows[~skip])
            self.skipped += int(skip.sum())
            need -= int((~skip).sum())
        return np.concatenate(chosen)

    def observe(self, prompts, rewards) -> None:
        r = np.asarray(rewards, float).reshape(-1, self.G)
        rows = np.array([self.index[p] for p in prompts[:: self.G]])
        easy, hard = r.min(1) == 1.0, r.max(1) == 0.0
        self.z_easy[rows] = np.where(easy, self.z_easy[rows] + 1, 0)
        self.z_hard[rows] = np.where(hard, self.z_hard[rows] + 1, 0)
        if self.passes > 1:
            lo, hi = self.bounds
            step_e = -self.delta if easy.mean() >= self.target_easy else self.delta
            step_h = -self.delta if hard.mean() >= self.target_hard else self.delta
            self.p_easy = float(np.clip(self.p_easy + step_e, lo, hi))
            self.p_hard = float(np.clip(self.p_hard + step_h, lo, hi))


_SELECTIVE = None


def selective_trainer_class():
    """A ``GRPOTrainer`` subclass whose generation batches hold the prompts a ``chooser`` picks just
    before generation (so the oracle reads the exact p of the model about to generate, not one step
    stale as a prefetched sampler would), and which shows the chooser every group's rewards."""
    global _SELECTIVE
    if _SELECTIVE is not None:
        return _SELECTIVE
    from trl import GRPOTrainer

    class SelectiveGRPOTrainer(GRPOTrainer):
        def __init__(self, *args, chooser, **kwargs):
            super().__init__(*args, **kwargs)
            self.chooser = chooser
            inner = self.reward_funcs[0]

            def observed(prompts, completions, completion_ids, **kw):
                r = inner(prompts=prompts, completions=completions, completion_ids=completion_ids, **kw)
                chooser.observe(prompts, r)
                return r

            observed.__name__ = getattr(inner, "__name__", "reward")
            self.reward_funcs = [observed] + list(self.reward_funcs[1:])

        def _generate_and_score_completions(self, inputs):
            if self.model.training:
                G = self.num_generations
                rows = self.chooser.choose(len(inputs) // G)
                inputs = [{"prompt": self.chooser.prompts[i]} for i in rows for _ in range(G)]
            return super()._generate_and_score_completions(inputs)

    _SELECTIVE = SelectiveGRPOTrainer
    return _SELECTIVE


def gsd_live_trainer(G: int):
    """gsd's live policy: ``GSDGRPOTrainer(gsd_tracker=GroupTracker(G, half_life="auto"),
    skip_policy="value")`` where this gsd has it, else the skip sampler at its documented
    ``skip_above=0.95, max_skips=4``.  Returns (class, keyword arguments, the API used)."""
    import inspect

    from ..integrations.trl_live import GroupTracker, GSDGRPOTrainer
    from .transformer import SKIP

    try:
        tracker = GroupTracker(G, half_life="auto")
        if "skip_policy" not in inspect.signature(GSDGRPOTrainer.__init__).parameters:
            raise TypeError("no skip_policy")
        return GSDGRPOTrainer, {"gsd_tracker": tracker, "skip_policy": "value"}, "half_life='auto', skip_policy='value'"
    except TypeError:
        return GSDGRPOTrainer, {"gsd_tracker": GroupTracker(G), **SKIP}, "skip_above=0.95, max_skips=4 (fallback)"


def cgrpo_trainer(task, rows: int, budget: int, record: dict):
    r"""trl-cgrpo 0.2.0's ``CGRPOTrainer`` (conformal per-prompt budgets along :data:`CGRPO_GRID`,
    ``score="pass_rate"`` with a verifier that is the reward's own rule, ``loss_type="dapo"``, its
    other settings at their defaults), ``rows`` rows per step (``rows / max(grid)`` prompts), stopped
    after the step at which the generations reach ``budget``.

    Counted as generation: every row it sampled (``_padded_rows`` false: the rows it pads a stopped
    prompt's block with are not generated) and its calibration rollouts (``num_calibration_samples``
    prompts × ``max(grid)``, one training call's size, at the start and every ``recalibrate_every``
    steps).  ``record`` receives, per training step, ``padded`` (padding rows) and ``real`` (sampled
    rows), and ``calibration`` (calibration rollouts spent just before the step).

    Returns (trainer class, its keyword arguments, ``CGRPOConfig``, its fields)."""
    from transformers import TrainerCallback
    from trl_cgrpo import CGRPOConfig, CGRPOTrainer

    k_max = max(CGRPO_GRID)
    if rows % k_max:
        raise InputError(f"rows per step must be a multiple of max(budget_grid) = {k_max}, got {rows}")
    right = {p: set(r) for p, r in zip(task.prompts, task.right)}
    tok = task.tokenizer
    for key in ("padded", "real", "calibration"):
        record[key] = []
    pending = [0]

    def spent():
        return sum(record["real"]) + sum(record["calibration"]) + pending[0]

    class Stop(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            if spent() >= budget:
                control.should_training_stop = True

    class Counted(CGRPOTrainer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.add_callback(Stop())

        def _outcomes(self, texts, example):
            # The reward's rule (first token in the prompt's right set) on the decoded completions.
            ok = right[example["prompt"]]
            first = [t.split()[0] if t.split() else None for t in texts]
            return [w is not None and tok.convert_tokens_to_ids(w) in ok for w in first]

        def calibrate(self):
            n = len(self.calibration_dataset)
            if self.args.num_calibration_samples is not None:
                n = min(n, self.args.num_calibration_samples)
            pending[0] += n * k_max
            return super().calibrate()

        def _calculate_rewards(self, inputs, prompts, completions, ids):
            rewards = super()._calculate_rewards(inputs, prompts, completions, ids)
            if self.model.training:
                pad = np.zeros(len(prompts), bool) if self._padded_rows is None else np.array(self._padded_rows)
                record["padded"].append(int(pad.sum()))
                record["real"].append(int((~pad).sum()))
                record["calibration"].append(pending[0])
                pending[0] = 0
            return rewards

    from datasets import Dataset

    kwargs = {"calibration_dataset": Dataset.from_dict({"prompt": list(task.prompts)}), "verifier": lambda **kw: []}
    fields = {
        "budget_grid": list(CGRPO_GRID),
        "num_generations": k_max,
        "score": "pass_rate",
        "loss_type": "dapo",
        "num_calibration_samples": rows // k_max,
        "max_steps": -(-budget // (rows // k_max * min(CGRPO_GRID))),
    }
    return Counted, kwargs, CGRPOConfig, fields


# ----------------------------------------------------------------------------------------------
# One training


def hardest_quarter(p0) -> np.ndarray:
    """Indices of the lowest quarter of the initial exact p (at least one prompt; stable order)."""
    p0 = np.asarray(p0, float)
    return np.argsort(p0, kind="stable")[: max(1, p0.size // 4)]


def train_arm(task, cfg: Config, *, protocol: str, arm: str, G: int, lr: float, seed: int) -> dict:
    """One training of ``arm`` (``"uniform"`` or one of :data:`ARMS`) at group size ``G`` under
    ``protocol`` for ``cfg.budget`` generations, from a copy of ``task`` (left untouched).

    Returns the per-step record: ``generations`` (rewards returned per step), ``step_time`` (TRL's),
    ``wall`` (perf_counter since the start), ``hardest`` and ``arcsin`` (mean exact p of the hardest
    quarter and mean :math:`2\\arcsin\\sqrt{p}` over every prompt, before the first step and after
    each), ``k`` and ``groups`` per step (the rewards' sums per group, the prompt of each group),
    ``trl_reward`` (TRL's logged mean reward per step), and for choosing arms ``skipped``.
    """
    from .transformer import train_silent

    n = cfg.prompts_per_step if protocol == "prompts" else cfg.generations_per_step // G
    steps = cfg.budget // (n * G)
    run = copy.deepcopy(task)  # the copy the trainer holds: the oracle reads this model's p
    p0 = run.solve_rates()
    hard = hardest_quarter(p0)
    kind = kwargs = None
    api = None
    if arm == "oracle":
        chooser = OracleChooser(run, G, seed)
    elif arm == "greso":
        chooser = GresoChooser(run.prompts, G, seed)
    if arm in ("oracle", "greso"):
        kind, kwargs = selective_trainer_class(), {"chooser": chooser}
    elif arm == "gsd":
        kind, kwargs, api = gsd_live_trainer(G)
    args_class = fields = None
    record = {}
    if arm == "cgrpo":
        kind, kwargs, args_class, fields = cgrpo_trainer(run, n * G, cfg.budget, record)
        n, G, steps = n * G // max(CGRPO_GRID), max(CGRPO_GRID), fields["max_steps"]
        api = f"trl_cgrpo budget_grid={list(CGRPO_GRID)}, score='pass_rate', loss_type='dapo'"
    t = train_silent(
        run,
        "dr_grpo" if arm == "dr_grpo" else "grpo",
        G=G,
        steps=steps,
        lr=lr,
        seed=seed,
        prompts_per_step=n,
        trainer_class=kind,
        trainer_kwargs=kwargs,
        args_class=args_class,
        args_kwargs=fields,
    )
    if arm == "cgrpo":
        # Rows the reward function saw include the padding: count what was sampled, calibration included.
        for s, real, cal in zip(t["steps"], record["real"], record["calibration"]):
            s["generations"] = real + cal
    P = np.array([s["p"] for s in t["steps"]] + [t["p_final"]])
    out = {
        "protocol": protocol,
        "arm": arm,
        "G": G,
        "lr": lr,
        "seed": seed,
        "prompts_per_step": n,
        "steps": steps,
        "p0": p0.tolist(),
        "p_final": t["p_final"],
        "hardest_prompts": hard.tolist(),
        "hardest": P[:, hard].mean(1).tolist(),
        "arcsin": (2 * np.arcsin(np.sqrt(np.clip(P, 0, 1)))).mean(1).tolist(),
        "generations": [s["generations"] for s in t["steps"]],
        "step_time": [s["step_time"] for s in t["steps"]],
        "wall": [s["wall"] for s in t["steps"]],
        "k": [s["k"] for s in t["steps"]],
        "groups": [s["groups"] for s in t["steps"]],
        "trl_reward": t.get("trl_reward", []),
    }
    if arm in ("oracle", "greso"):
        out["skipped"] = int(chooser.skipped)
    if arm == "cgrpo":
        out["api"] = api
        out["steps"] = len(t["steps"])
        out.update({f"cgrpo_{k}": record[k][: len(t["steps"])] for k in ("real", "padded", "calibration")})
        out["overshoot"] = int(sum(out["generations"]) - cfg.budget)
    if arm == "gsd":
        out["api"] = api
        out["skipped"] = int(sum(t.get("skipped", [])))
    return out


# ----------------------------------------------------------------------------------------------
# Statistics


def first_reach(cost, trajectory, targets=TARGETS) -> np.ndarray:
    """Per target, the first ``cost`` at which ``trajectory`` is at or above it; NaN where it never
    is (not reached: never replaced by the budget).  ``cost`` and ``trajectory`` are aligned."""
    cost, y = np.asarray(cost, float), np.asarray(trajectory, float)
    hit = y[:, None] >= np.asarray(targets, float)[None, :]
    first = hit.argmax(0)
    return np.where(hit.any(0), cost[first], np.nan)


def paired_interval(diff, level: float = 0.95) -> tuple:
    r"""Mean of paired differences (one per seed) and its Student-t interval,
    :math:`\bar d \pm t_{n-1,(1+level)/2}\, s_d/\sqrt n` (s with ddof 1); NaN bounds under two
    finite differences; NaN throughout when any difference is NaN (a target one arm did not reach
    in some seed: no number stands in for it).  Returns (mean, lo, hi, n)."""
    from scipy import stats

    d = np.asarray(diff, float)
    n = d.size
    if n == 0 or np.isnan(d).any():
        return (np.nan, np.nan, np.nan, n)
    m = float(d.mean())
    if n < 2:
        return (m, np.nan, np.nan, n)
    half = float(stats.t.ppf((1 + level) / 2, n - 1) * d.std(ddof=1) / np.sqrt(n))
    return (m, m - half, m + half, n)


def curves(r: dict) -> dict:
    """Cumulative generations, TRL seconds and wall seconds aligned with ``hardest``/``arcsin``.

    A training whose last step passed the budget (trl-cgrpo's: its steps hold a varying number of
    generations; ``overshoot`` > 0) ends at the budget, every curve linear between the last two
    steps there: every arm is compared at equal generations."""
    z = [0.0]
    c = {
        "gens": np.cumsum(z + r["generations"]).astype(float),
        "secs": np.cumsum(z + r["step_time"]),
        "wall": np.array(z + r["wall"]),
        "hardest": np.array(r["hardest"]),
        "arcsin": np.array(r["arcsin"]),
    }
    over = int(r.get("overshoot", 0))
    if over > 0:
        budget = c["gens"][-1] - over
        keep = c["gens"] < budget
        for k in ("secs", "wall", "hardest", "arcsin"):
            c[k] = np.append(c[k][keep], np.interp(budget, c["gens"], c[k]))
        c["gens"] = np.append(c["gens"][keep], budget)
    return c


def _cell_stats(r: dict) -> dict:
    c = curves(r)
    g, s = first_reach(c["gens"], c["hardest"]), first_reach(c["secs"], c["hardest"])
    out = {f"gens_to_{t}": g[i] for i, t in enumerate(TARGETS)}
    out.update({f"secs_to_{t}": s[i] for i, t in enumerate(TARGETS)})
    out.update(
        {
            "final_arcsin": c["arcsin"][-1],
            "final_hardest": c["hardest"][-1],
            "total_secs": c["secs"][-1],
            "total_wall": c["wall"][-1],
            "generations": c["gens"][-1],
        }
    )
    return out


def best_uniform(results, group_sizes) -> int | None:
    """The uniform G that reached the hardest-quarter 0.8 in the most seeds, then in the fewest
    generations on average over them, then with the highest final hardest quarter; None without
    uniform results."""
    keys = []
    for G in group_sizes:
        rows = [_cell_stats(r) for r in results if r["arm"] == "uniform" and r["G"] == G]
        if not rows:
            continue
        g = np.array([x["gens_to_0.8"] for x in rows])
        reached = int(np.isfinite(g).sum())
        keys.append((-reached, np.nanmean(g) if reached else np.inf, -np.mean([x["final_hardest"] for x in rows]), G))
    return min(keys)[-1] if keys else None


def summary(results: list, level: float = 0.95):
    """One row per (task, lr, protocol, arm, G): means over seeds of the generations and TRL seconds
    to each hardest-quarter target (NaN unless every seed reached it; ``reached_<t>`` counts the
    seeds), the final mean :math:`2\\arcsin\\sqrt p` and hardest quarter, and paired differences
    against the best uniform G of the same (task, lr, protocol), seed by seed, with Student-t
    intervals (:func:`paired_interval`): ``d_gens_0.8`` and ``d_final_arcsin``; ``hardest_at_T``:
    the hardest quarter each arm had reached at T, the shortest mean TRL time of any arm in its
    group (equal wall time)."""
    import pandas as pd

    rows = []
    groups = {}
    for r in results:
        groups.setdefault((r["task"], r["lr"], r["protocol"]), []).append(r)
    for (task, lr, protocol), rs in groups.items():
        Gs = sorted({r["G"] for r in rs if r["arm"] == "uniform"})
        best = best_uniform(rs, Gs)
        base = {r["seed"]: _cell_stats(r) for r in rs if r["arm"] == "uniform" and r["G"] == best}
        arms = sorted({(r["arm"], r["G"]) for r in rs}, key=lambda a: (a[0] != "uniform", a[0], a[1]))
        per_arm = {a: [r for r in rs if (r["arm"], r["G"]) == a] for a in arms}
        T = min(np.mean([curves(r)["secs"][-1] for r in v]) for v in per_arm.values())
        for a, v in per_arm.items():
            st = [_cell_stats(r) for r in v]
            row = {
                "task": task,
                "lr": lr,
                "protocol": protocol,
                "arm": a[0],
                "G": a[1],
                "best_uniform_G": best,
                "seeds": len(v),
            }
            for t in TARGETS:
                for what in ("gens", "secs"):
                    x = np.array([s[f"{what}_to_{t}"] for s in st])
                    row[f"{what}_to_{t}"] = float(x.mean()) if np.isfinite(x).all() else np.nan
                row[f"reached_{t}"] = int(np.isfinite([s[f"gens_to_{t}"] for s in st]).sum())
            for k in ("final_arcsin", "final_hardest", "total_secs", "total_wall"):
                row[k] = float(np.mean([s[k] for s in st]))
            row["generations"] = int(st[0]["generations"]) if len({s["generations"] for s in st}) == 1 else -1
            at_T = []
            for r in v:
                c = curves(r)
                at_T.append(c["hardest"][np.searchsorted(c["secs"], T, side="right") - 1])
            row["hardest_at_T"] = float(np.mean(at_T))
            for key, name in (("gens_to_0.8", "d_gens_0.8"), ("final_arcsin", "d_final_arcsin")):
                d = [s[key] - base[r["seed"]][key] if r["seed"] in base else np.nan for s, r in zip(st, v)]
                m, lo, hi, _ = paired_interval(d, level)
                row.update({name: m, f"{name}_lo": lo, f"{name}_hi": hi})
            if "api" in v[0]:
                row["api"] = v[0]["api"]
            if "skipped" in v[0]:
                row["skipped"] = float(np.mean([r["skipped"] for r in v]))
            rows.append(row)
    return pd.DataFrame(rows)


def step_cost(results) -> dict:
    r"""Least-squares fit of TRL's ``step_time`` over every step of every training, one generation
    call per step (trl-cgrpo's steps, up to ``len(budget_grid)`` calls and calibration, are left
    out): seconds per step :math:`= a + b \cdot` (generations in the step).  Returns ``a``, ``b``
    and ``r2`` (of the fit on its own steps)."""
    from ..simulator.ledger import r_squared

    rs = [r for r in results if r["arm"] != "cgrpo"]
    x = np.concatenate([np.asarray(r["generations"], float) for r in rs])
    y = np.concatenate([np.asarray(r["step_time"], float) for r in rs])
    (a, b), *_ = np.linalg.lstsq(np.column_stack([np.ones_like(x), x]), y, rcond=None)
    return {"a": float(a), "b": float(b), "r2": float(r_squared(y, a + b * x))}


def page_tables(results: list, level: float = 0.95) -> str:
    """The docs page's tables (markdown): per (task, lr, protocol), every arm's generations to each
    hardest-quarter target ("k/n seeds" where only k seeds reached it), the paired difference to 0.8
    against the best uniform G, the cost model's (:func:`step_cost`) and TRL's seconds to 0.8, the
    final mean 2·arcsin√p with its paired difference, and the hardest quarter at equal TRL time."""
    df = summary(results, level)
    cost = step_cost(results)
    head = (
        "| arm | G | to 0.5 | to 0.8 | to 0.9 | Δ to 0.8 vs best G [95 %] | model s to 0.8 | TRL s to 0.8 "
        "| final 2·arcsin√p | Δ final [95 %] | hardest at equal TRL time |\n" + "|---" * 11 + "|"
    )

    def model_s(task, lr, protocol, arm, G):
        out = []
        for r in results:
            if (r["task"], r["lr"], r["protocol"], r["arm"], r["G"]) != (task, lr, protocol, arm, G):
                continue
            c = curves(r)
            hit = np.flatnonzero(c["hardest"] >= 0.8)
            if arm == "cgrpo" or not hit.size:
                return np.nan
            out.append(cost["a"] * hit[0] + cost["b"] * c["gens"][hit[0]])
        return float(np.mean(out))

    def num(x, fmt):
        return "—" if not np.isfinite(x) else format(x, fmt)

    L = []
    for (task, lr, protocol), g in df.groupby(["task", "lr", "protocol"], sort=True):
        best = int(g["best_uniform_G"].iloc[0])
        L.append(f"**{task}, lr {lr:g}, hold {protocol} per step** (best uniform G = {best}):\n\n{head}")
        for _, row in g.iterrows():
            n = int(row["seeds"])
            ref = row["arm"] == "uniform" and row["G"] == best
            cells = [row["arm"], str(int(row["G"]))]
            for t in TARGETS:
                k = int(row[f"reached_{t}"])
                x = row[f"gens_to_{t}"]
                cells.append(f"{x:.0f}" if k == n else (f"{k}/{n} seeds" if k else f"not reached (0/{n})"))
            d = (row["d_gens_0.8"], row["d_gens_0.8_lo"], row["d_gens_0.8_hi"])
            cells.append("(reference)" if ref else ("—" if np.isnan(d[0]) else "{:.0f} [{:.0f}, {:.0f}]".format(*d)))
            cells.append(num(model_s(task, lr, protocol, row["arm"], row["G"]), ".1f"))
            cells.append(num(row["secs_to_0.8"], ".1f"))
            cells.append(f"{row['final_arcsin']:.3f}")
            d = (row["d_final_arcsin"], row["d_final_arcsin_lo"], row["d_final_arcsin_hi"])
            cells.append("(reference)" if ref else ("—" if np.isnan(d[0]) else "{:.3f} [{:.3f}, {:.3f}]".format(*d)))
            cells.append(f"{row['hardest_at_T']:.3f}")
            L[-1] += "\n| " + " | ".join(cells) + " |"
    return "\n\n".join(L) + "\n"


# ----------------------------------------------------------------------------------------------
# The run folder


def cell_name(task: str, lr: float, seed: int, protocol: str, arm: str, G: int) -> str:
    return f"{task}__lr{lr:g}__seed{seed}__{protocol}__{arm}_G{G}.json"


def run(out, cfg: Config = FULL, *, resume: bool = False, progress: bool = True, log=None) -> list:
    """Every cell of ``cfg`` into the folder ``out`` (locked while in use, one JSON per (task, lr,
    seed, protocol, arm), each written whole); with ``resume`` the cells already there are read, not
    run again.  Per (task, lr, protocol) the uniform arms run first, every seed; the other arms then
    run at the best uniform G (:func:`best_uniform`).  Returns every cell's result."""
    from tqdm.auto import tqdm

    from ..io.atomic import make_folder, read_json, write_json
    from ..io.lock import hold_folder
    from .transformer import build_task, import_stack

    cfg.check()
    folder = make_folder(out)
    results = []
    n_cells = (
        len(cfg.tasks) * len(cfg.lrs) * len(cfg.protocols) * len(cfg.seeds) * (len(cfg.group_sizes) + len(cfg.arms))
    )
    with hold_folder(folder), tqdm(total=n_cells, disable=not progress, desc="group-size training") as bar:
        write_json(folder / "config.json", asdict(cfg))
        import_stack()
        tasks = {}

        def task_of(name, seed):
            if (name, seed) not in tasks:
                tasks[(name, seed)] = build_task(
                    cfg.n_prompts,
                    variant=cfg.variant,
                    max_len=cfg.max_len,
                    seed=seed,
                    pretrain_steps=cfg.pretrain_steps,
                    **TASKS[name],
                )
            return tasks[(name, seed)]

        def cell(name, lr, seed, protocol, arm, G):
            path = folder / cell_name(name, lr, seed, protocol, arm, G)
            if resume and path.exists():
                r = read_json(path)
            else:
                r = {
                    "task": name,
                    **train_arm(task_of(name, seed), cfg, protocol=protocol, arm=arm, G=G, lr=lr, seed=seed),
                }
                write_json(path, r)
            bar.update(1)
            if log:
                st = _cell_stats(r)
                log(
                    f"{name} lr={lr:g} seed={seed} {protocol} {arm} G={G}: hardest quarter "
                    f"{r['hardest'][0]:.3f} → {r['hardest'][-1]:.3f}, to 0.8 in {st['gens_to_0.8']:.0f} generations"
                )
            results.append(r)
            return r

        for name in cfg.tasks:
            for lr in cfg.lrs:
                for protocol in cfg.protocols:
                    uni = [cell(name, lr, seed, protocol, "uniform", G) for seed in cfg.seeds for G in cfg.group_sizes]
                    best = best_uniform(uni, cfg.group_sizes)
                    for arm in cfg.arms:
                        for seed in cfg.seeds:
                            cell(name, lr, seed, protocol, arm, best)
    return results


def load(out) -> list:
    """Every cell result in the run folder ``out``."""
    from ..io.atomic import read_json

    return [read_json(p) for p in sorted(Path(out).glob("*__lr*__seed*__*.json"))]


# ----------------------------------------------------------------------------------------------
# Figure


def figure(results: list):
    """Hardest-quarter mean exact p against generations, one panel per (task, lr, protocol), one line
    per arm (mean over seeds; the band: min–max)."""
    from ..plotstyle import new_figure, styled

    keys = sorted({(r["task"], r["lr"], r["protocol"]) for r in results}, key=lambda k: (k[0], k[1], k[2]))
    rows = sorted({(k[0], k[1]) for k in keys})
    cols = [p for p in PROTOCOLS if any(k[2] == p for k in keys)]

    @styled
    def make():
        import matplotlib.pyplot as plt

        fig, axes = new_figure(len(cols), len(rows), width=5.0 * len(cols), height=3.2)
        axes = np.asarray(axes).reshape(len(rows), len(cols))
        cmap = plt.get_cmap("viridis")
        for i, (task, lr) in enumerate(rows):
            for j, protocol in enumerate(cols):
                ax = axes[i, j]
                rs = [r for r in results if (r["task"], r["lr"], r["protocol"]) == (task, lr, protocol)]
                arms = sorted({(r["arm"], r["G"]) for r in rs}, key=lambda a: (a[0] != "uniform", a[0], a[1]))
                Gs = sorted({a[1] for a in arms if a[0] == "uniform"})
                for a in arms:
                    v = [curves(r) for r in rs if (r["arm"], r["G"]) == a]
                    # seeds of trl-cgrpo step at different generations: each seed on every seed's points
                    x = np.unique(np.concatenate([c["gens"] for c in v]))
                    y = np.array([np.interp(x, c["gens"], c["hardest"]) for c in v])
                    if a[0] == "uniform":
                        color, ls, label = cmap(Gs.index(a[1]) / max(1, len(Gs) - 1) * 0.85), "-", f"G = {a[1]}"
                    else:
                        color = ARM_COLORS[a[0]]
                        ls, label = "--", f"{a[0]} (G = {a[1]})"
                    ax.plot(x, y.mean(0), color=color, ls=ls, lw=1.2, label=label)
                    if len(y) > 1:
                        ax.fill_between(x, y.min(0), y.max(0), color=color, alpha=0.12)
                for t in TARGETS:
                    ax.axhline(t, color="0.7", lw=0.6, ls=":")
                ax.set_title(f"{task}, lr {lr:g}, hold {protocol} per step", fontsize=9)
                ax.set_xlabel("generations")
                ax.set_ylabel("hardest quarter: mean exact p")
                ax.set_ylim(0, 1)
        axes[0, 0].legend(loc="lower right", fontsize=7)
        fig.suptitle("TRL 1.16.0 GRPOTrainer on a tiny Qwen2 with exact p: every arm at equal generations")
        return fig

    return make()


def config_from(fast: bool = False, **overrides) -> Config:
    """:data:`FAST` or :data:`FULL` with the given fields replaced (None: kept)."""
    base = FAST if fast else FULL
    return replace(base, **{k: v for k, v in overrides.items() if v is not None}).check()
