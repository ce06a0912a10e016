"""Sweep grids: a TOML file that names a base config and the values to vary.

A grid file has three tables, all optional except ``[grid]``::

    [sweep]
    description = "method × group size"
    config = "campaign.toml"     # base simulator config, relative to this file (optional)
    num_cpus = 1                 # resources each run asks for (Ray); default 1
    # num_gpus = 1               # default: 1 if the run's device is cuda, else 0

    [base]                       # overrides applied to every run
    steps = 150
    policy = "tabular"

    [grid]                       # key -> list of values; the runs are the cartesian product
    method = ["grpo", "dr_grpo", "dapo"]
    G = [4, 8, 16]
    seed = [0, 1]

A grid value may also be a table: a *bundle* of overrides applied together, named by its
``label`` (for instance a difficulty mix that sets several simulator fields at once)::

    mix = [
        {label = "hard", init_p_low = 0.02, init_p_high = 0.15},
        {label = "easy", init_p_low = 0.85, init_p_high = 0.98},
    ]

Each point of the product becomes a :class:`RunSpec`: its overrides (base, then the grid values
in file order), the simulator config they resolve to, and a deterministic name made of the
varying values plus a short hash of the resolved config (its fields that differ from the
simulator's defaults), e.g. ``method=grpo__G=8__seed=0__3f9a1c2e``.  The hash keeps names unique
(two grids that differ only in ``[base]`` never share a run folder) and the readable part is cut
to stay short.
"""

from __future__ import annotations

import hashlib
import importlib
import itertools
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from ..resources import config_file
from ..validation import InputError

try:  # Python >= 3.11
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef,import-not-found]

__all__ = ["Grid", "RunSpec", "load_grid", "parse_grid", "expand", "run_name", "config_hash"]

#: Tables a grid file may contain.
_TABLES = ("sweep", "base", "grid")
#: Keys of the ``[sweep]`` table.
_SWEEP_KEYS = ("description", "config", "num_cpus", "num_gpus")
#: Longest readable part of a run name (the hash is appended after it).
MAX_NAME_CHARS = 96
#: Largest sweep (points of the product): each is a run folder, and expanding a point builds and
#: checks its config (~0.1 ms), so the limit keeps even ``--dry-run`` to about a second.
MAX_GRID_POINTS = 10_000
_UNSAFE = re.compile(r"[^A-Za-z0-9._=+-]+")


@dataclass(frozen=True)
class Grid:
    """A parsed grid file (see the module docstring)."""

    axes: tuple[tuple[str, tuple[Any, ...]], ...]
    base: dict = field(default_factory=dict)
    base_config: Path | None = None
    description: str = ""
    num_cpus: float = 1.0
    num_gpus: float | None = None
    source: Path | None = None
    text: str | None = None

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(k for k, _ in self.axes)

    @property
    def size(self) -> int:
        return math.prod(len(v) for _, v in self.axes)


@dataclass
class RunSpec:
    """One run of a sweep: what it varies, how it is configured, where it lives."""

    name: str
    params: dict  # grid key -> the value shown in the results table (a bundle's label)
    overrides: dict  # everything applied on top of the base config
    config: Any  # the simulator's config object
    config_dict: dict
    num_cpus: float = 1.0
    num_gpus: float = 0.0
    run_dir: Path | None = None


# ----------------------------------------------------------------------------------- parsing
def load_grid(path) -> Grid:
    """Read and check a grid TOML file, given by path or as the name of a shipped grid
    (:func:`gsd.resources.config_file`, e.g. ``"law_in_training"``)."""
    from ..io.userinput import reading

    path = config_file(path, what="grid file")
    try:
        with reading(path, "grid file"):
            text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"grid file {str(path)!r} is not valid TOML: {exc}") from None
    return parse_grid(data, source=path, text=text)


def parse_grid(data: dict, *, source: Path | None = None, text: str | None = None) -> Grid:
    """Check a grid given as a dict (the parsed TOML) and return a :class:`Grid`."""
    where = f"grid file {str(source)!r}" if source else "grid"
    if not isinstance(data, dict):
        raise InputError(f"{where} must be a table, got {type(data).__name__}")
    unknown = sorted(set(data) - set(_TABLES))
    if unknown:
        raise InputError(f"{where}: unknown table(s) {unknown}; expected [sweep], [base] and [grid]")
    sweep = data.get("sweep", {})
    base = data.get("base", {})
    grid = data.get("grid")
    for name, table in (("sweep", sweep), ("base", base)):
        if not isinstance(table, dict):
            raise InputError(f"{where}: [{name}] must be a table")
    if not isinstance(grid, dict) or not grid:
        raise InputError(f"{where}: needs a non-empty [grid] table of key = [values]")
    bad = sorted(set(sweep) - set(_SWEEP_KEYS))
    if bad:
        raise InputError(f"{where}: unknown key(s) {bad} in [sweep]; allowed: {list(_SWEEP_KEYS)}")

    base_config = None
    if "config" in sweep:
        cfg = sweep["config"]
        if not isinstance(cfg, str) or not cfg:
            raise InputError(f"{where}: [sweep] config must be a path string, got {cfg!r}")
        base_config = Path(cfg)
        if not base_config.is_absolute() and source is not None:
            base_config = Path(source).parent / base_config
        if not base_config.is_file():
            raise InputError(f"{where}: base config not found: {str(base_config)!r}")
    num_cpus = _resource(sweep.get("num_cpus", 1), "num_cpus", where)
    num_gpus = sweep.get("num_gpus")
    if num_gpus is not None:
        num_gpus = _resource(num_gpus, "num_gpus", where, allow_zero=True)

    axes = []
    for key, values in grid.items():
        if not isinstance(values, list):
            raise InputError(f"{where}: grid.{key} must be a list of values, got {values!r}")
        if not values:
            raise InputError(f"{where}: grid.{key} is an empty list")
        for v in values:
            if isinstance(v, dict):
                _check_bundle(v, key, where, grid_keys=set(grid) - {key})
            elif isinstance(v, list):
                raise InputError(f"{where}: grid.{key} holds a list {v!r}; use a table to set several keys")
        labels = [_display(v) for v in values]
        if len(set(map(repr, labels))) != len(labels):
            raise InputError(f"{where}: grid.{key} repeats a value: {labels}")
        axes.append((str(key), tuple(values)))
    points = math.prod(len(values) for _, values in axes)
    if points > MAX_GRID_POINTS:
        sizes = " × ".join(f"{key} ({len(values)})" for key, values in axes)
        raise InputError(
            f"{where}: {sizes} = {points:,} runs, above the limit of {MAX_GRID_POINTS:,} runs per "
            "sweep; split it into several sweeps"
        )
    description = sweep.get("description", "")
    return Grid(
        axes=tuple(axes),
        base=dict(base),
        base_config=base_config,
        description=str(description),
        num_cpus=num_cpus,
        num_gpus=num_gpus,
        source=Path(source) if source else None,
        text=text,
    )


def _resource(value, name, where, allow_zero=False) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (value == 0 and not allow_zero):
        kind = "non-negative" if allow_zero else "positive"
        raise InputError(f"{where}: [sweep] {name} must be a {kind} number, got {value!r}")
    return float(value)


def _check_bundle(bundle: dict, key: str, where: str, grid_keys: set) -> None:
    if "label" in bundle and not isinstance(bundle["label"], (str, int, float)):
        raise InputError(f"{where}: grid.{key} label must be a string, got {bundle['label']!r}")
    settings = {k for k in bundle if k != "label"}
    if not settings:
        raise InputError(f"{where}: grid.{key} has a table with no settings: {bundle!r}")
    clash = sorted(settings & grid_keys)
    if clash:
        raise InputError(f"{where}: grid.{key} sets {clash}, which another grid key varies")


def _display(value):
    """The value shown for a grid point: a bundle's label, else the value itself."""
    if isinstance(value, dict):
        if "label" in value:
            return str(value["label"])
        return ",".join(f"{k}={_fmt(v)}" for k, v in value.items())
    return value


# ----------------------------------------------------------------------------------- naming
def _fmt(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return format(value, "g")
    return str(value)


def _identity(config_dict: dict, defaults: dict) -> dict:
    """What names a run: the config's fields that differ from the simulator's defaults.

    The free-text ``name`` is left out (it changes no number; it is set to the run's name).
    Leaving out default values keeps run names (and so finished runs) valid when the simulator
    gains a new field whose default keeps the old behaviour; a changed default does change them.
    """
    return {k: v for k, v in config_dict.items() if k != "name" and (k not in defaults or defaults[k] != v)}


def config_hash(config_dict: dict, length: int = 8) -> str:
    """Short, stable hash of a resolved config (keys sorted, JSON-encoded)."""
    blob = json.dumps(config_dict, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:length]


#: Short forms of config keys, used in run names only.
SHORT_KEYS = {"group_size": "G"}


def run_name(params: dict, digest: str) -> str:
    """``key=value__key=value__<digest>``, file-system safe and at most ~105 characters.

    ``group_size`` is written ``G``; every other key as it is.
    """
    parts = [f"{SHORT_KEYS.get(k, k)}={_fmt(v)}" for k, v in params.items()]
    readable = _UNSAFE.sub("-", "__".join(parts)).strip("-")
    if len(readable) > MAX_NAME_CHARS:
        readable = readable[:MAX_NAME_CHARS].rstrip("-_")
    return f"{readable}__{digest}" if readable else f"run__{digest}"


# ----------------------------------------------------------------------------------- expansion
def _simulator(simulator) -> ModuleType:
    if isinstance(simulator, ModuleType):
        return simulator
    try:
        return importlib.import_module(simulator)
    except ModuleNotFoundError as exc:
        raise InputError(f"simulator module {simulator!r} cannot be imported: {exc}") from None


def build_config(sim: ModuleType, base_config: Path | None, overrides: dict):
    """The simulator config for a base file plus overrides (errors become ValueError)."""
    try:
        cfg = sim.SimConfig.from_toml(base_config) if base_config else sim.SimConfig()
        return cfg.with_overrides(overrides) if overrides else cfg
    except (TypeError, KeyError, AttributeError) as exc:
        raise InputError(str(exc)) from None


def expand(grid: Grid, simulator="gsd.simulator") -> list[RunSpec]:
    """Every point of the grid as a :class:`RunSpec`, in file order (last key varies fastest).

    Each config is built (and so validated by the simulator) here, before anything runs.
    """
    sim = _simulator(simulator)
    try:
        defaults = sim.SimConfig().to_dict()
    except Exception:  # noqa: BLE001 - a simulator without a default config: hash every field
        defaults = {}
    specs: list[RunSpec] = []
    seen: dict[str, str] = {}  # run name -> the grid point that gave it
    for combo in itertools.product(*(values for _, values in grid.axes)):
        overrides = dict(grid.base)
        params = {}
        for (key, _), value in zip(grid.axes, combo):
            params[key] = _display(value)
            if isinstance(value, dict):
                overrides.update({k: v for k, v in value.items() if k != "label"})
            else:
                overrides[key] = value
        shown = ", ".join(f"{k}={_fmt(v)}" for k, v in params.items())
        try:
            config = build_config(sim, grid.base_config, overrides)
            config_dict = config.to_dict()
        except ValueError as exc:
            raise InputError(f"grid point ({shown}): {exc}") from None
        name = run_name(params, config_hash(_identity(config_dict, defaults)))
        if name in seen:
            raise InputError(f"grid points ({seen[name]}) and ({shown}) give the same run {name!r}")
        seen[name] = shown
        if "name" in config_dict and "name" not in overrides:
            config = config.with_overrides({"name": name})
            config_dict = config.to_dict()
        device = str(config_dict.get("device", "cpu"))
        num_gpus = grid.num_gpus if grid.num_gpus is not None else (1.0 if device.startswith("cuda") else 0.0)
        specs.append(
            RunSpec(
                name=name,
                params=params,
                overrides=overrides,
                config=config,
                config_dict=config_dict,
                num_cpus=grid.num_cpus,
                num_gpus=num_gpus,
            )
        )
    return specs
