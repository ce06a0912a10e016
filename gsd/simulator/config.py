"""Every knob of a simulation, in one dataclass (:ref:`theory-paper` gives the paper's values).

A run is fully described by a :class:`SimConfig`: the engine reads nothing else, so two runs
with equal configs produce equal ledgers (on CPU), and a run folder can refuse a config that
differs from the one it was started with.

Configs come from code (``SimConfig(method="dapo")``), from a flat TOML file
(:meth:`SimConfig.from_toml`) or from ``key=value`` strings (``gsd simulate --set lr=0.1``).
All three paths go through the same checks: an unknown key, a value of the wrong type or out
of range raises one ``InputError`` that names the key and the value, before any work is done.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import typing
from dataclasses import dataclass, field

from ..core.methods import UPDATE_METHODS
from ..errors import InputError
from ..resources import config_file

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser as the tomli package
    import tomli as tomllib  # type: ignore[no-redef,import-not-found]

__all__ = ["SimConfig", "parse_assignment", "resolve_device", "resolve_engine", "numpy_blockers", "config_diff"]

METHODS = UPDATE_METHODS  # every method of gsd.core.methods
POLICIES = ("tabular", "mlp")
DIFFICULTIES = ("bigmath", "beta", "file")
OPTIMIZERS = ("sgd", "adam")
DTYPES = ("float32", "float64")
MLP_OFFSETS = ("frozen", "learned")
ROLLOUTS = ("answers", "counts")
ROLLOUT_LOGS = ("none", "verl", "trl")
ENGINES = ("auto", "numpy", "torch")
ALLOCATION_SOURCES = ("logged", "oracle")
ALLOCATION_EXPLORE = ("none", "thompson")
#: rollouts = "answers" draws every answer of a step at once: (prompts per step) × group_size is
#: at most this (2^31, the largest tensor the step indexes; 17 GB in float64).
MAX_ANSWERS_PER_STEP = 2**31
#: The advantage table holds (G + 1)² pairs of entries for the largest G a run draws (group_size,
#: or the allocator's g_max): 1 GiB in float64 at this G.
MAX_SIM_GROUP_SIZE = 8191
_INT_LIMIT = 2**53  # integers a float64 (a ledger cell, a JSON reader) holds exactly

#: The schema of every numeric key: (lowest, highest, why the highest), ends included; a float
#: key may exclude an end with ``open=("lo",)`` etc.  Checked with the keys' types (the dataclass
#: annotations) before any folder or memory is touched; relations between keys (batch_size ≤
#: n_prompts, g_min ≤ g_max, the answers per step, ...) are checked after it.
BOUNDS: dict[str, tuple] = {
    "seed": (0, _INT_LIMIT, "a float64 holds it exactly"),
    "steps": (1, 10**6, "the ledger keeps every step in memory (~0.6 GB at 10^6 steps)"),
    "checkpoint_every": (1, _INT_LIMIT, "a float64 holds it exactly"),
    "closed_form_every": (0, _INT_LIMIT, "a float64 holds it exactly"),
    "n_prompts": (1, 10**8, "each prompt keeps a logit, its optimizer state and its counts in memory"),
    "batch_size": (0, 10**8, "at most n_prompts"),
    "mlp_embed_dim": (1, 4096, "n_prompts × mlp_embed_dim embeddings are kept in memory"),
    "mlp_hidden": (1, 4096, "the network's weights grow with it"),
    "group_size": (2, MAX_SIM_GROUP_SIZE, "the advantage table holds (G + 1)² entries, 1 GiB at this G"),
    "ddof": (0, 1, "0 = population std, 1 = sample std"),
    "max_draws": (1, 10**6, "DAPO draws up to max_draws groups per prompt in one step"),
    "ppo_epochs": (1, 10**4, "every epoch is a full forward and backward pass"),
    "budget": (0, _INT_LIMIT, "a float64 holds it exactly"),
    "replan_every": (1, _INT_LIMIT, "a float64 holds it exactly"),
    "logged_window": (0, 10**6, "at most the steps of a run"),
    "g_min": (1, MAX_SIM_GROUP_SIZE, "the advantage table holds (G + 1)² entries, 1 GiB at this G"),
    "g_max": (1, MAX_SIM_GROUP_SIZE, "the advantage table holds (G + 1)² entries, 1 GiB at this G"),
    "g_step": (1, MAX_SIM_GROUP_SIZE, "at most g_max"),
    "lr": (0.0, 1e6, "a larger step sends every logit to ±inf at once", ("lo",)),
    "momentum": (0.0, 1.0, "a momentum of 1 or more never forgets a step", ("hi",)),
    "eps": (0.0, 1e6, "a larger eps swamps any std of 0/1 rewards"),
    "kl_coef": (0.0, 1e6, "a larger coefficient swamps the policy gradient"),
    "verifier_noise": (0.0, 0.5, "at 0.5 the reward carries no information", ("hi",)),
    "clip_low": (0.0, 1.0, "the ratio floor 1 − clip_low must stay positive", ("lo", "hi")),
    "clip_high": (0.0, 10.0, "a ratio ceiling beyond 11 clips nothing", ("lo", "hi")),
    "p_min": (0.0, 1.0, "a probability strictly inside (0, 1)", ("lo", "hi")),
    "p_max": (0.0, 1.0, "a probability strictly inside (0, 1)", ("lo", "hi")),
}


def _default_beta_mixture():
    # A U-shaped population: half hard (mean 0.2), half easy (mean 0.8), like Big-Math's bulk.
    return [[0.5, 1.0, 4.0], [0.5, 4.0, 1.0]]


@dataclass(frozen=True)
class SimConfig:
    """One simulation run.  Defaults are the GRPO arm of the paper's campaign (:ref:`theory-paper`)."""

    # --- run --------------------------------------------------------------------------------
    name: str = "run"  # a label, copied into the summary; changes no number
    seed: int = 0  # seeds the initial population, the network's init and the rollout generator
    steps: int = 150  # optimizer steps; each draws one batch of groups
    device: str = "auto"  # auto (cuda if available) | cpu | cuda | cuda:N
    dtype: str = "float64"  # float32 | float64, for logits, log-probs and advantages
    engine: str = "auto"  # auto (numpy when nothing needs torch, see numpy_blockers) | numpy (tabular policy, exact logit gradient, no torch) | torch (autograd)
    checkpoint_every: int = 25  # steps between checkpoints (the last step is always saved)
    closed_form_every: int = 1  # evaluate the closed-form m_method columns every k steps (0: never); on numpy at one G ≤ 89 from a Chebyshev table (docs: simulator), else the exact sum

    # --- initial population (which p each prompt starts at) ----------------------------------
    n_prompts: int = 6000  # prompts, each with its own success probability p = sigmoid(z)
    difficulty: str = "bigmath"  # bigmath (shipped solve rates) | beta (mixture below) | file
    difficulty_path: str = ""  # file source: a parquet/CSV/JSONL of per-problem solve rates
    difficulty_column: str = "llama8b_solve_rate"  # file source: the solve-rate column
    beta_mixture: list = field(default_factory=_default_beta_mixture)  # beta source: [weight, a, b] per component
    interior_only: bool = True  # keep only 0 < p̂ < 1: a prompt never or always solved has no signal to start from
    p_min: float = 0.02  # clip the initial p to [p_min, p_max] so every logit is finite (paper: 0.02)
    p_max: float = 0.98  # (paper: 0.98)
    replace: bool = False  # draw prompts from the source with replacement (needed when n_prompts exceeds it)

    # --- policy -----------------------------------------------------------------------------
    policy: str = "tabular"  # tabular (one logit per prompt, the paper's) | mlp (shared network)
    mlp_embed_dim: int = 16  # mlp: size of each prompt's fixed random embedding
    mlp_hidden: int = 64  # mlp: hidden units of the one-hidden-layer tanh network
    mlp_offset: str = "frozen"  # mlp: per-prompt logit offset that makes the initial p exact; frozen = all learning goes through the shared net

    # --- rollouts ---------------------------------------------------------------------------
    group_size: int = 8  # G, answers per prompt per draw
    batch_size: int = 0  # prompts per step, sampled without replacement; 0 = every prompt every step
    verifier_noise: float = 0.0  # ν: the verifier flips each reward with this probability
    rollouts: str = "answers"  # answers: G Bernoulli answers per group, loss per answer | counts: k ~ Binom(G, p) per group, the same loss summed per (answer, reward) cell — same distribution, O(B) not O(B·G)
    rollout_log: str = "none"  # none | verl ({step}.jsonl) | trl (completions/completions_{step:05d}.parquet): log every step's rollouts into the run folder's rollouts/, for gsd diagnose

    # --- method -----------------------------------------------------------------------------
    method: str = "grpo"  # grpo | dr_grpo | dapo (GRPO advantages + redraw of silent groups) | rloo
    ddof: int = 0  # std convention GRPO/DAPO divide by: 0 = population (paper), 1 = sample (TRL, verl)
    eps: float = 0.0  # added to the std before dividing (paper: 0)
    max_draws: int = 4  # dapo: groups drawn per prompt at most, all counted as generation cost

    # --- loss and optimizer -----------------------------------------------------------------
    optimizer: str = "sgd"  # sgd (the paper's: each tabular logit moves by lr·g) | adam
    lr: float = 0.5  # learning rate (paper: 0.5)
    momentum: float = 0.0  # sgd momentum (paper: 0)
    ppo_epochs: int = 1  # optimizer steps on each batch of rollouts (ratio 1 on the first)
    clip: bool = False  # PPO clipped ratio against the sampling policy
    clip_low: float = 0.2  # ε_low: ratio floor 1 − ε_low
    clip_high: float = 0.2  # ε_high: ratio ceiling 1 + ε_high (DAPO's clip-higher sets it above ε_low)
    kl_coef: float = 0.0  # β of the k3 penalty to the frozen initial policy (0: none)
    # --- budget allocation (per-prompt group sizes; see docs/theory.md, section Spending a rollout budget) ---
    allocation: str = "fixed"  # fixed (every prompt gets group_size) | greso (skip prompts silent in recent visits) | a value of gsd.ALLOCATION_VALUES
    budget: int = 0  # rollouts per step shared by the allocator; 0 = batch prompts × group_size
    replan_every: int = 1  # steps between two plans (the plan in between is kept)
    allocation_source: str = (
        "logged"  # logged: the run's own counts so far, through the posterior | oracle: the true p (an upper bound)
    )
    logged_window: int = 0  # logged source: count only the last W steps' answers (0: every step so far)
    g_min: int = 2  # smallest group size the allocator gives a prompt it serves
    g_max: int = 64  # largest group size
    g_step: int = 1  # group sizes g_min, g_min + g_step, …, g_max
    horizon: int = 0  # horizon / dr_horizon values: steps looked ahead (0: every step left in the run)
    allocation_lr: float = 0.0  # the per-step logit rate the horizon values and the forecast assume (0: lr, exact for a tabular SGD policy)
    allocation_explore: str = "none"  # none | thompson: plan on one draw of p from each prompt's posterior
    logged_half_life: float = (
        0.0  # logged source: an answer a steps old weighs 2^(−(a−1)/h) (0: no discount; needs logged_window = 0)
    )
    allocation_forecast: bool = (
        False  # move each prompt's estimate along its expected updates to the steps the plan serves
    )
    greso_visits: int = 2  # greso: skip a prompt silent in each of its last V visits ...
    greso_explore: float = 0.25  # ... except with this probability (it is drawn again)

    # ------------------------------------------------------------------------------------------
    def __post_init__(self):
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, _coerce(f.name, getattr(self, f.name), hints[f.name]))
        self._check_values()

    def _check_values(self) -> None:
        def bad(key, why):
            raise InputError(f"config key {key!r} = {getattr(self, key)!r}: {why}")

        for key, choices in (
            ("method", METHODS),
            ("policy", POLICIES),
            ("difficulty", DIFFICULTIES),
            ("optimizer", OPTIMIZERS),
            ("dtype", DTYPES),
            ("mlp_offset", MLP_OFFSETS),
            ("rollouts", ROLLOUTS),
            ("rollout_log", ROLLOUT_LOGS),
            ("engine", ENGINES),
        ):
            if getattr(self, key) not in choices:
                bad(key, f"must be one of {choices}")
        dev = self.device
        if not (dev in ("auto", "cpu", "cuda") or (dev.startswith("cuda:") and dev[5:].isdigit())):
            bad("device", "must be auto, cpu, cuda or cuda:N")
        _check_bounds(self)
        if self.engine == "numpy" and numpy_blockers(self):
            bad(
                "engine",
                f"the numpy engine trains a tabular policy with plain SGD/Adam steps; {numpy_blockers(self)[0]} "
                "needs torch (engine = 'torch', or 'auto' to choose)",
            )
        if self.batch_size > self.n_prompts:
            bad("batch_size", f"cannot exceed n_prompts = {self.n_prompts} (0 means all)")
        answers = (self.batch_size or self.n_prompts) * self.group_size
        if self.rollouts == "answers" and answers > MAX_ANSWERS_PER_STEP:
            bad(
                "group_size",
                f"with {self.batch_size or self.n_prompts} prompts per step (n_prompts, or batch_size "
                f"if set) that is {answers:,} answers "
                f"per draw, above the limit of {MAX_ANSWERS_PER_STEP:,} for rollouts = 'answers' (use rollouts = "
                "'counts', or fewer prompts per step)",
            )
        if not self.p_min < self.p_max:
            bad("p_min", f"need 0 < p_min < p_max < 1, got p_min={self.p_min}, p_max={self.p_max}")
        self._check_allocation(bad)
        if self.difficulty == "file" and not self.difficulty_path:
            bad("difficulty_path", "the file difficulty source needs a path")
        if self.difficulty == "beta":
            mix = self.beta_mixture
            ok = len(mix) > 0 and all(
                isinstance(c, (list, tuple)) and len(c) == 3 and all(_is_number(v) and v > 0 for v in c) for c in mix
            )
            if not ok:
                bad("beta_mixture", "must be a non-empty list of [weight, a, b] with every entry > 0")

    def _check_allocation(self, bad) -> None:
        """The allocation keys, in three steps: the names and the logged counts' ageing here, then
        the options of the allocators and the group-size grid, then a budget plan's own limits."""
        from ..allocation import ALLOCATION_VALUES

        if self.allocation not in ("fixed", "greso", *ALLOCATION_VALUES):
            bad("allocation", f"must be one of {('fixed', 'greso', *ALLOCATION_VALUES)}")
        if self.allocation_explore not in ALLOCATION_EXPLORE:
            bad("allocation_explore", f"must be one of {ALLOCATION_EXPLORE}")
        if self.logged_half_life:  # 0: no discount; any other value is a half-life
            from ..core.forgetting import as_half_life

            try:
                as_half_life(self.logged_half_life, name="logged_half_life")
            except InputError:
                bad("logged_half_life", "must be a finite number >= 0 (0 = no discount)")
        if not (0 <= self.allocation_lr <= 100 and math.isfinite(self.allocation_lr)):
            bad("allocation_lr", "must be a finite number in [0, 100] (0 = lr)")
        if not 0 <= self.horizon <= 100_000:
            bad("horizon", "must lie in [0, 100000] (0 = every step left)")
        if self.logged_half_life and self.logged_window:
            bad("logged_half_life", "discounts every answer so far: set logged_window = 0 (one of the two)")
        self._check_allocation_options(bad)
        if self.allocation != "fixed":
            self._check_plan(bad)

    def _check_allocation_options(self, bad) -> None:
        """The allocators' options and the group-size grid g_min, g_min + g_step, …, g_max."""
        if self.allocation_explore == "thompson" and self.allocation_source != "logged":
            bad(
                "allocation_explore",
                "Thompson draws come from the logged posterior: needs allocation_source = 'logged'",
            )
        if self.allocation_forecast and self.method not in ("grpo", "dr_grpo"):
            bad("allocation_forecast", "forecasts the GRPO or Dr.GRPO update: needs method grpo or dr_grpo")
        if self.greso_visits < 1:
            bad("greso_visits", "must be >= 1")
        if not 0 <= self.greso_explore <= 1:
            bad("greso_explore", "must lie in [0, 1]")
        if self.allocation_source not in ALLOCATION_SOURCES:
            bad("allocation_source", f"must be one of {ALLOCATION_SOURCES}")
        if self.g_max < self.g_min:
            bad("g_max", f"must be >= g_min = {self.g_min}")
        if (self.g_max - self.g_min) % self.g_step:
            bad("g_step", f"must divide g_max - g_min = {self.g_max - self.g_min}")

    def _check_plan(self, bad) -> None:
        """A budget plan's limits, before the run folder exists: what it models, and the cost of
        every plan of the run (the allocator's table and sums, the logged window's counts)."""
        if self.method == "dapo":
            bad("allocation", "a budget plan with DAPO's redraws is not modelled; use method grpo, dr_grpo or rloo")
        if self.replan_every > 1 and self.batch_size not in (0, self.n_prompts):
            bad("replan_every", "a plan kept over several steps needs every prompt in every batch (batch_size = 0)")
        if self.ddof >= self.g_min:
            bad("ddof", f"needs g_min > ddof, got g_min={self.g_min}")
        budget = self.budget or (self.batch_size or self.n_prompts) * self.group_size
        if budget < self.g_min:
            bad("budget", f"must be >= g_min = {self.g_min} to serve any prompt")
        from ..allocation import VALUE_FORMS, check_table_cost

        # Every plan of the run, before the folder exists: the allocator's table and sums.
        kind = "point" if self.allocation_source == "oracle" else "beta"
        try:
            if self.allocation in VALUE_FORMS:  # greso skips without a value table
                check_table_cost(
                    kind,
                    self.batch_size or self.n_prompts,
                    self.g_min,
                    self.g_max,
                    self.g_step,
                    VALUE_FORMS[self.allocation][2],
                )
        except InputError as exc:
            bad("g_max", f"{str(exc).split(': ', 1)[1]} (the allocator plans the prompts of a batch)")
        if self.logged_window * (self.batch_size or self.n_prompts) > 2**27:
            bad(
                "logged_window",
                f"keeps logged_window × n_prompts = "
                f"{self.logged_window * self.n_prompts:,} counts pairs in memory, above 2^27 (2 GiB)",
            )

    # ------------------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """Plain JSON/TOML-able dict of every field."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def with_overrides(self, overrides: dict | None) -> "SimConfig":
        """A copy with some keys replaced; unknown keys and bad values raise ``InputError``."""
        if not overrides:
            return self
        _check_keys(overrides, "override")
        return SimConfig(**{**self.to_dict(), **dict(overrides)})

    @classmethod
    def from_dict(cls, data: dict) -> "SimConfig":
        _check_keys(data, "config")
        return cls(**data)

    @classmethod
    def from_toml(cls, path) -> "SimConfig":
        """Read a flat TOML (or JSON, e.g. a run folder's ``config.json``) file of keys."""
        data = read_config_file(path)
        if "arms" in data or "base" in data:
            raise InputError(f"config file {str(path)!r} is a campaign (it has [base]/[arms]); use --campaign")
        return cls.from_dict(data)

    def key(self) -> str:
        """A canonical JSON text of the config (what a run folder compares)."""
        return json.dumps(self.to_dict(), sort_keys=True)


# ------------------------------------------------------------------------------------------
def read_config_file(path) -> dict:
    """The keys of a TOML or JSON file, given by path or as the name of a shipped config
    (:func:`gsd.resources.config_file`)."""
    from ..io.userinput import reading

    path = config_file(path, what="config file")
    where = f"config file {str(path)!r}"
    real = functools.partial(_config_real, where=where)
    try:
        with reading(path, "config file"):
            if path.suffix.lower() == ".json":
                data = json.loads(path.read_text(encoding="utf-8"), parse_float=real, parse_constant=real)
            else:
                with open(path, "rb") as fh:
                    data = tomllib.load(fh, parse_float=real)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{where} is not valid TOML/JSON: {exc}") from None
    if not isinstance(data, dict):  # a JSON list or number: no key to read
        raise InputError(f"{where} must hold a table of keys (a JSON object), got a JSON {_json_kind(data)}")
    return data


def _config_real(text: str, where: str) -> float:
    """A real number of a config file as written: 1e400 is refused as typed, not read as inf."""
    from ..io.userinput import parse_real

    return parse_real(text, f"{where}: a number")


def _json_kind(value) -> str:
    return {list: "list", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")


def _check_keys(data: dict, what: str) -> None:
    known = {f.name for f in dataclasses.fields(SimConfig)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise InputError(
            f"unknown {what} key {unknown[0]!r} = {data[unknown[0]]!r} (known keys: {', '.join(sorted(known))})"
        )


def _check_bounds(cfg: "SimConfig") -> None:
    """Every key of :data:`BOUNDS` within its range: one error naming the key, the value and the bound."""
    for key, (lo, hi, why, *opened) in BOUNDS.items():
        value = getattr(cfg, key)
        open_ends = opened[0] if opened else ()
        low_ok = value > lo if "lo" in open_ends else value >= lo
        high_ok = value < hi if "hi" in open_ends else value <= hi
        if not (low_ok and high_ok):
            span = f"{'(' if 'lo' in open_ends else '['}{lo:,}, {hi:,}{')' if 'hi' in open_ends else ']'}"
            raise InputError(f"config key {key!r} = {value!r}: must lie in {span} ({why})")


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _coerce(key, value, kind):
    """Check a value against the field's annotation; ints are accepted where floats are."""

    def wrong():
        raise InputError(f"config key {key!r} = {value!r}: must be of type {getattr(kind, '__name__', kind)}")

    if kind is bool:
        if not isinstance(value, bool):
            wrong()
        return value
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer() and abs(value) <= 2**53:
                return int(value)
            wrong()
        return int(value)
    if kind is float:
        if not _is_number(value):
            wrong()
        try:
            value = float(value)
        except OverflowError:  # an integer beyond float range
            wrong()
        if not math.isfinite(value):
            raise InputError(f"config key {key!r} = {value!r}: must be a finite number")
        return value
    if kind is str:
        if not isinstance(value, str):
            wrong()
        return value
    if kind is list:
        if not isinstance(value, (list, tuple)):
            wrong()
        return [list(v) if isinstance(v, (list, tuple)) else v for v in value]
    raise TypeError(f"unhandled annotation {kind!r} for {key}")  # pragma: no cover


def _plain(value):
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def parse_assignment(text: str) -> tuple[str, object]:
    """'lr=0.1' → ('lr', 0.1); the value is read as a TOML value, else kept as a bare string."""
    if "=" not in text:
        raise InputError(f"--set expects key=value, got {text!r}")
    key, raw = (s.strip() for s in text.split("=", 1))
    if not key:
        raise InputError(f"--set expects key=value, got {text!r}")
    try:
        value = tomllib.loads(f"v = {raw}", parse_float=functools.partial(_config_real, where=f"--set {key}"))["v"]
    except tomllib.TOMLDecodeError:
        value = raw  # e.g. method=dapo without quotes
    return key, value


#: Device files a GPU driver creates (NVIDIA's, AMD's ROCm): without any, torch sees no GPU.
GPU_DEVICE_FILES = ("/dev/nvidiactl", "/dev/nvidia0", "/proc/driver/nvidia/version", "/dev/kfd")


def gpu_present() -> bool:
    """Whether torch sees a GPU — asked only when a driver's device file exists, so that a
    machine without one never imports torch (1.5 s) to learn it has none."""
    import os

    if not any(os.path.exists(f) for f in GPU_DEVICE_FILES):
        return False
    try:
        import torch
    except ModuleNotFoundError:  # a GPU but no torch (the [torch] extra): the numpy engine runs on the CPU
        return False
    return bool(torch.cuda.is_available())


def numpy_blockers(cfg: "SimConfig") -> list[str]:
    """The settings of ``cfg`` that need the torch engine (empty: the numpy engine can run it).

    The numpy engine (:mod:`gsd.simulator.tabular`) writes the tabular policy's logit gradient
    in closed form and applies SGD or Adam to it, on the CPU; autograd is needed for a network
    policy, PPO epochs, clipping and the KL penalty; a budget plan draws each prompt's count at
    its own G on the numpy engine (``rollouts = "counts"``), its answers one by one only on the
    torch engine; the rollout log and a CUDA device are the torch engine's.
    """
    checks = (
        (cfg.policy != "tabular", f"policy = {cfg.policy!r}"),
        (cfg.ppo_epochs != 1, f"ppo_epochs = {cfg.ppo_epochs}"),
        (cfg.clip, "clip = true"),
        (cfg.kl_coef != 0, f"kl_coef = {cfg.kl_coef!r}"),
        (
            cfg.allocation != "fixed" and cfg.rollouts != "counts",
            f"allocation = {cfg.allocation!r} with rollouts = {cfg.rollouts!r}",
        ),
        (cfg.rollout_log != "none", f"rollout_log = {cfg.rollout_log!r}"),
        (cfg.device.startswith("cuda"), f"device = {cfg.device!r}"),
    )
    return [what for hit, what in checks if hit]


def resolve_engine(cfg: "SimConfig") -> str:
    """The engine a run uses: ``cfg.engine``, or for ``auto`` numpy when no setting needs torch
    (:func:`numpy_blockers`) and no GPU is there for ``device = 'auto'`` to take, else torch."""
    if cfg.engine != "auto":
        return cfg.engine
    if numpy_blockers(cfg) or (cfg.device == "auto" and gpu_present()):
        return "torch"
    return "numpy"


def resolve_device(device: str) -> str:
    """'auto' → 'cuda' when torch sees a GPU, else 'cpu'; asking for CUDA without one is an error."""
    if device == "auto":
        return "cuda" if gpu_present() else "cpu"
    if device == "cpu":
        return device
    import torch

    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise InputError(f"config key 'device' = {device!r}: CUDA was requested but torch sees no CUDA device")
        if ":" in device and int(device.split(":")[1]) >= torch.cuda.device_count():
            raise InputError(f"config key 'device' = {device!r}: only {torch.cuda.device_count()} CUDA device(s)")
    elif device != "cpu":
        raise InputError(f"config key 'device' = {device!r}: must be auto, cpu, cuda or cuda:N")
    return device


def config_diff(a: dict, b: dict) -> list[str]:
    """Keys whose values differ, as 'key: a → b' lines."""
    keys = sorted(set(a) | set(b))
    return [f"{k}: {a.get(k)!r} → {b.get(k)!r}" for k in keys if a.get(k) != b.get(k)]


def repeat_settings(saved: dict, asked: dict) -> str:
    """The ``--set key=value`` options that turn the config ``asked`` back into ``saved``.

    A run folder refuses a different config; this is what its message suggests to continue the
    run it holds (the ``--set``s the first command had, or their equivalent).  Values are written
    as TOML, the way :func:`parse_assignment` reads them back.

    >>> repeat_settings({"group_size": 16, "method": "grpo"}, {"group_size": 8, "method": "grpo"})
    '--set group_size=16'
    """
    import shlex

    return " ".join(
        f"--set {shlex.quote(f'{k}={_toml_value(saved[k])}')}"
        for k in sorted(saved)
        if k in asked and saved[k] != asked[k]
    )


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return value if value.isidentifier() and value not in ("true", "false", "inf", "nan") else json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no TOML form for {value!r}")


#: Config keys in which the runs of one program may differ.
FREE_KEYS = ("name", "seed", "method", "group_size", "max_draws", "ddof", "eps")


#: On CPU torch computes an elementwise op in vector registers, and the last (length mod 2
#: vectors) entries one by one — with other roundings for sigmoid, log, exp.  A run's entries
#: take the same path alone and in a program only when its block is a whole number of those
#: steps: 128 bytes covers AVX-512 (the widest build; 16 float64 or 32 float32 entries).
VECTOR_STEP_BYTES = 128


def batch_key(cfg: SimConfig) -> str | None:
    """Equal for runs that can share one program; None for a run that cannot join any."""
    rest = {k: v for k, v in cfg.to_dict().items() if k not in FREE_KEYS}
    if resolve_engine(cfg) == "numpy":  # elementwise numpy: a run's entries do not depend on where they sit
        return "numpy:" + json.dumps(rest, sort_keys=True)
    if cfg.policy != "tabular" or cfg.allocation != "fixed" or cfg.rollout_log != "none":
        return None
    if not cfg.device.startswith("cuda"):  # cpu, or auto (decided without importing torch)
        step = VECTOR_STEP_BYTES // {"float64": 8, "float32": 4}[cfg.dtype]
        if cfg.n_prompts % step or (cfg.batch_size or cfg.n_prompts) % step:
            return None
    return "torch:" + json.dumps(rest, sort_keys=True)
