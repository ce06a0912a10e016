"""The interface a trainer module offers the log reader: every hook, its type and its default, checked.

A trainer module of :mod:`gsd.integrations` (``trl``, ``verl``, ``areal``) is a plain module
whose module-level names are its *hooks*. :class:`TrainerHooks` names every hook the reader
(:mod:`gsd.diagnose.readers`), the convention table (:mod:`gsd.core.trainers`) and the simulator's
log writer use: the required ones (no default) and the optional ones with the default the
reader takes when a module leaves them out. Those defaults are exactly how a plain table
(``--format table``) is read: :data:`TABLE` holds them.

:func:`resolve` is the one place a module's hooks are read: it refuses a module that lacks a
required hook, gives a hook of the wrong kind (a constant of the wrong type, a function that
cannot take the reader's arguments), gives ``find_state`` without ``read_state``, or defines
a name that looks like a misspelt hook (``fingerprnt``, ``GROUPSIZE``), which would otherwise
silently take its default.

:class:`RunContext` is what the reader knows of the run and what a module's ``arrange`` adds
(its typed replacement of a dict of string keys).
"""

from __future__ import annotations

import difflib
import inspect
import types
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

__all__ = ["TrainerHooks", "TableHooks", "RunContext", "TABLE", "ContractError", "resolve", "hook_specs"]


class ContractError(TypeError):
    """A trainer module that does not keep the contract (a programming error, not bad input)."""


def _hook(doc: str, *, args: tuple[str, ...] | None = None, default: Any = MISSING):
    """A field of the contract: its meaning, and for a function the arguments the reader passes."""
    meta = {"doc": doc, "args": args}
    if default is MISSING:
        return field(metadata=meta)
    return field(default=default, metadata=meta)


def _parent(path: Path) -> Path:
    return path.parent


def _none(*args: Any) -> None:
    return None


@dataclass
class RunContext:
    """What the reader knows of a run when a module's ``arrange`` runs, and what ``arrange`` adds.

    The reader sets the first six fields; ``arrange`` may append to ``warnings`` and set the
    rest; the reader sets ``keyed`` before ``describe_groups``.
    """

    group_size: int | None  # given with --group-size, or set by arrange (TRL: inferred; AReaL: the usual size)
    group_size_given: bool
    warnings: list[str]
    state_path: Path | None = None  # the run-state file found by find_state
    state: dict | None = None  # read_state(state_path)
    state_is_final: bool = False  # the state is the run's own, written at the end, not a checkpoint's
    repeated_steps: list[int] = field(default_factory=list)  # files that repeat the previous generation
    eval_steps: list[int] = field(default_factory=list)  # steps left out as evaluation
    excluded_steps: list[int] = field(default_factory=list)  # left-overs of an earlier attempt
    trainer_silent: dict[int, float] = field(default_factory=dict)  # the trainer's own silent fraction per step
    short_groups: int = 0  # groups arrange left out as incomplete
    short_rollouts: int = 0  # their usable rollouts
    keyed: bool = False  # the trainer's own group keys were used (group_keys)


@dataclass(frozen=True, kw_only=True)
class TableHooks:
    """The optional hooks, each with its default: a plain table's behaviour."""

    # Files
    is_validation_folder: Callable[[Path], bool] | None = _hook(
        "a dump folder that holds validation, not training, rollouts", args=("folder",), default=None
    )
    dump_folder: Callable[[Path], Path] = _hook(
        "the folder of one run's dump that holds the file (AReaL: rollout/ above its version folders)",
        args=("path",),
        default=_parent,
    )
    RUN_HISTORY: bool = _hook(
        "files are one per step, written in step order, so a left-over of an earlier attempt shows in their times",
        default=True,
    )
    find_state: Callable[[list[Path]], Path | None] | None = _hook(
        "a run-state file beside the dumps (TRL's trainer_state.json), or None", args=("roots",), default=None
    )
    read_state: Callable[[Path], dict] | None = _hook(
        "the run-state file read (required with find_state)", args=("path",), default=None
    )
    # Rows
    READ_ALL_COLUMNS: bool = _hook("read every parquet column, not only those used", default=False)
    KEY_COLUMNS: tuple[str, ...] = _hook(
        "parquet columns group_keys or members read, kept when only the columns used are read", default=()
    )
    prepare: Callable[[Any, Any], tuple[Any, Any]] | None = _hook(
        "(table, lines) without the rows the trainer did not train on", args=("table", "lines"), default=None
    )
    padding_rows: Callable[[Any, Any], Any] | None = _hook(
        "mask of rows a padding trainer (trl-cgrpo) would have padded in: no reward, empty completion; "
        "None: no such rows",
        args=("table", "parts"),
        default=None,
    )
    total_reward: Callable[[Any, Any], Any] | None = _hook(
        "the weighted total of the reward columns in the trainer's arithmetic; None: the float64 sum",
        args=("parts", "coefs"),
        default=None,
    )
    UNSCORABLE_IN_GROUP: bool = _hook("a row with no finite reward stays in its group (TRL)", default=False)
    REWARD_WEIGHTS_UNLOGGED: bool = _hook(
        "the trainer weights its reward columns without logging the weights (TRL): warn when several are summed",
        default=False,
    )
    fingerprint: Callable[[Any], str | None] = _hook(
        "a digest of a file's generation, equal for two files that hold the same one; None: not compared",
        args=("table",),
        default=_none,
    )
    # Groups
    group_keys: Callable[[Any], tuple[Any, Any] | None] = _hook(
        "per row the int64 key of its group within its step and a mask of rows that have one; None: the prompt text",
        args=("table",),
        default=_none,
    )
    members: Callable[[Any], Any] = _hook(
        "mask of the rows that enter their group's statistics (verl V1: a session's final output); None: all",
        args=("table",),
        default=_none,
    )
    row_keys: Callable[[Any], Any] = _hook(
        "per row an int64 code of the trainer's own key of one output (-1 where malformed), so that a key written "
        "twice is counted once when its rewards agree and named a contradiction when not; None: no such key",
        args=("table",),
        default=_none,
    )
    BAD_KEY: str = _hook(
        "why a row whose group key is missing or malformed is unusable, in words", default="its group is cut short"
    )
    CONFLICT: str = _hook(
        "why rows whose key is written twice with different rewards are unusable, in words",
        default="its key is written twice with different rewards",
    )
    GROUP_COL: bool = _hook("--group-col applies", default=True)
    group_column: Callable[[Any, str], tuple[Any, Any] | None] = _hook(
        "a --group-col naming the trainer's own key, read the trainer's way; None: hashed as it is",
        args=("table", "column"),
        default=_none,
    )
    GROUP_SIZE: bool = _hook("--group-size applies: groups are blocks of consecutive rows", default=False)
    arrange: Callable[[list, RunContext], list] | None = _hook(
        "whole-run rules over the chunks read (repeated generations, blocks, evaluation steps, short groups); "
        "returns the chunks kept and fills the RunContext",
        args=("chunks", "context"),
        default=None,
    )
    stream_arrange: Callable[[RunContext], Any] | None = _hook(
        "arrange's rules one file at a time, for a reader that never holds the whole run: a class taking the "
        "context whose objects give fate(step) (a file left out before it is read, or None), a first pass "
        "(survey_prompts(hashes): one file's prompt hashes; or survey_rows(chunk): each parsed chunk), "
        "take(chunk) (kept? keyed or cut in place) and close() (the warnings, the context's fields); "
        "None: a format with arrange is read whole",
        args=("context",),
        default=None,
    )
    zero_std: Callable[[Any, Any, int], Any] | None = _hook(
        "per group, the trainer's own verdict 'every reward equal' (its dtype, summation, tolerance); "
        "None: the generic rule",
        args=("values", "group", "n_groups"),
        default=None,
    )
    describe_groups: Callable[[RunContext], str | None] = _hook(
        "how groups were formed, in words; None: the generic sentence", args=("context",), default=_none
    )
    FILTER: str | None = _hook(
        "the trainer's filter that evicts silent groups before the dump, in words; None: it has none", default=None
    )
    # Advantages
    check_advantages: Callable[..., dict] | None = _hook(
        "the scaling the logged advantages show ({'scale': ...}) and warnings",
        args=("reward", "advantage", "group", "n_groups", "batch"),
        default=None,
    )
    trainer_silent_note: Callable[[dict | None], str | None] = _hook(
        "a warning about the trainer's own silent fraction given the advantage check; None: none",
        args=("check",),
        default=_none,
    )
    # Writing
    write_step: Callable[..., Path] | None = _hook(
        "write one step as the trainer writes it (the simulator's logs)",
        args=("folder", "step", "prompts", "rewards"),
        default=None,
    )


@dataclass(frozen=True, kw_only=True)
class TrainerHooks(TableHooks):
    """Every hook of a trainer module: the required ones below, the optional ones of :class:`TableHooks`."""

    # Identity and convention
    NAME: str = _hook("the --format value (the module's name)")
    FILE_DESCRIPTION: str = _hook("the trainer's files, for messages")
    DDOF: int = _hook("the delta degrees of freedom of the trainer's group std")
    EPS: float = _hook("the eps added to the std")
    SCALES: tuple[str, ...] = _hook("the accepted scale values; the first is the default")
    SOURCE: str = _hook("the release, file and function the convention was read in")
    # The docs' table of trainers (gsd.integrations.docs_table): Markdown on one line ('|' is escaped there)
    TITLE: str = _hook("the trainer as the docs name it, e.g. TRL `GRPOTrainer`")
    PACKAGE: str = _hook("the PyPI distribution whose own writer the tests run")
    VERSION: str = _hook("its pinned release: the rules were read in it and the tests run it (Makefile, pyproject)")
    FILES: str = _hook("the files the reader reads, as the trainer names them")
    GROUP_RULE: str = _hook("what a group is in those files")
    SILENCE: str = _hook("when a group is silent, in the trainer's own arithmetic")
    # Files
    SUFFIXES: tuple[str, ...] = _hook("the file suffixes the format reads")
    is_log_file: Callable[[Path], bool] = _hook(
        "a file named as the trainer names its dumps (--format auto)", args=("path",)
    )
    step_of: Callable[[Path], int | None] = _hook(
        "the step a file name carries, or None when the rows carry it", args=("path",)
    )
    # Rows
    PROMPT_COL: str = _hook("the prompt column")
    STEP_COL: str | None = _hook("the step column; None: the file's step")
    NOT_REWARD: tuple[str, ...] = _hook("columns that are never a reward")
    default_reward: Callable[[list[str], set[str]], list[tuple[float, str]]] = _hook(
        "[(coef, column)]: the reward the trainer normalises", args=("columns", "numeric")
    )


#: A plain table's hooks: every optional hook at its default.
TABLE = TableHooks()

# The runtime type of each constant hook (bool is checked before int: True is an int).
_CONSTANT_TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "str | None": (str, type(None)),
    "int": (int,),
    "float": (float,),
    "bool": (bool,),
    "tuple[str, ...]": (tuple,),
}


def hook_specs() -> list[dict]:
    """Every hook of the contract: ``{"name", "type", "required", "default", "doc", "args"}``."""
    specs = []
    for f in fields(TrainerHooks):
        required = f.default is MISSING
        specs.append(
            {
                "name": f.name,
                "type": str(f.type),
                "required": required,
                "default": None if required else f.default,
                "doc": f.metadata["doc"],
                "args": f.metadata["args"],
            }
        )
    return specs


def _check(name: str, spec: dict, value: Any, where: str) -> None:
    args = spec["args"]
    if args is not None:
        if value is None and not spec["required"] and spec["default"] is None:
            return
        if not callable(value):
            raise ContractError(
                f"{where}: hook {name} must be a function of ({', '.join(args)}), got {type(value).__name__}"
            )
        try:
            inspect.signature(value).bind(*args)
        except TypeError:
            raise ContractError(
                f"{where}: hook {name}{inspect.signature(value)} cannot be called as {name}({', '.join(args)})"
            ) from None
        except ValueError:  # a builtin without a signature: accepted as callable
            pass
        return
    kinds = _CONSTANT_TYPES[spec["type"]]
    if isinstance(value, bool) and bool not in kinds:
        raise ContractError(f"{where}: hook {name} must be {spec['type']}, got bool {value!r}")
    if spec["type"] == "float" and isinstance(value, int) and not isinstance(value, bool):
        return
    if not isinstance(value, kinds):
        raise ContractError(f"{where}: hook {name} must be {spec['type']}, got {type(value).__name__} {value!r}")
    if isinstance(value, tuple) and not all(isinstance(v, str) for v in value):
        raise ContractError(f"{where}: hook {name} must be a tuple of str, got {value!r}")


def resolve(module: types.ModuleType) -> TrainerHooks:
    """The hooks of a trainer module, each optional one at its default where the module leaves it out.

    Raises :class:`ContractError` naming the module and the hook when a required hook is missing,
    a hook has the wrong kind, ``find_state`` comes without ``read_state``, or a module-level name
    is within a letter or two of a hook's name (a misspelt hook would otherwise take its default).
    """
    where = f"trainer module {getattr(module, '__name__', module)!r}"
    specs = {s["name"]: s for s in hook_specs()}
    namespace = vars(module)
    missing = [n for n, s in specs.items() if s["required"] and n not in namespace]
    if missing:
        raise ContractError(f"{where} lacks the required hook(s) {', '.join(missing)} (see gsd.integrations.contract)")
    for name in namespace:
        if name in specs or name.startswith("_") or isinstance(namespace[name], types.ModuleType):
            continue
        near = difflib.get_close_matches(name, specs, n=1, cutoff=0.8)
        if near:
            raise ContractError(
                f"{where} defines {name!r}, not a hook: a misspelt {near[0]!r}? "
                "(rename it, or prefix a private helper with _)"
            )
    given = {n: namespace[n] for n in specs if n in namespace}
    for name, value in given.items():
        _check(name, specs[name], value, where)
    if given.get("find_state") is not None and given.get("read_state") is None:
        raise ContractError(f"{where} gives find_state without read_state")
    return TrainerHooks(**given)
