"""How a run's rollout logs are read — format, reward and the prompt, step and group columns —
declared and checked once for every reader (:func:`gsd.diagnose.read_rollouts`, the counts of
:mod:`gsd.diagnose.counts`, their shards and the streamed diagnosis)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from ..validation import InputError

__all__ = ["LogOptions"]


@dataclass(frozen=True)
class LogOptions:
    """How to read a run's rollout logs (every reader's keyword arguments of these names).

    ``fmt``: ``"auto"``, a trainer of :data:`gsd.integrations.TRAINERS` or ``"table"``;
    ``reward``: the reward column or a weighted sum (``"correct+0.5*fmt"``); ``prompt_col``,
    ``step_col``, ``group_col``: a table's prompt-id, step and group columns.  A format that is
    not one of these, or a column named by something other than text, is an InputError naming
    the argument.
    """

    fmt: str = "auto"
    reward: str | None = None
    prompt_col: str | None = None
    step_col: str | None = None
    group_col: str | None = None

    def __post_init__(self):
        from .discover import FORMATS

        if self.fmt not in FORMATS:
            raise InputError(f"format must be one of {', '.join(FORMATS)}, got {self.fmt!r}")
        for name in ("reward", "prompt_col", "step_col", "group_col"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise InputError(f"{name} must be a column name (text), got {value!r}")

    @classmethod
    def take(cls, options: dict, caller: str) -> LogOptions:
        """The options of ``options`` (a function's keyword arguments), checked; any other name is
        a TypeError naming ``caller``, as Python's own for an unknown keyword."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - names)
        if unknown:
            raise TypeError(f"{caller}() got unexpected keyword argument(s) {', '.join(map(repr, unknown))}")
        return cls(**options)

    def kwargs(self) -> dict[str, Any]:
        """The options as keyword arguments."""
        return asdict(self)
