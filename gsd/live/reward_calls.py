"""What TRL hands a reward function, and how the tracker takes it in: rewards, weights, prompt keys, the
calling trainer, and one generation gathered over every process.

TRL calls each reward function with ``prompts``, ``completions``, ``completion_ids``, ``trainer_state``,
``log_extra``, ``log_metric`` and ``environments`` beside the dataset's columns (:data:`TRL_KWARGS`);
its rewards become one float32 tensor (None as NaN), so a reward must be a real number, a
one-element tensor or None (:func:`as_rewards`).  With several processes the tracker gathers each
generation in process order, as TRL gathers its rewards (:func:`gathered`).
"""

from __future__ import annotations

import json
import numbers

import numpy as np

from ..errors import InputError
from ..validation import real_or_none

__all__ = [
    "TRL_KWARGS",
    "Unscorable",
    "as_half_lives",
    "as_prior",
    "as_rewards",
    "as_weights",
    "callable_name",
    "distinct_names",
    "gathered",
    "is_async",
    "is_reward_value",
    "is_training",
    "kind_and_reason",
    "open_unit_number",
    "prompt_key",
    "trainer_of",
    "world_size",
]

#: Keyword arguments TRL passes to a reward function that are not dataset columns.
TRL_KWARGS = ("prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric", "environments")


def callable_name(func) -> str:
    """The name TRL gives a reward function (its metrics and log columns are named after it)."""
    import functools

    while isinstance(func, functools.partial):
        func = func.func
    return getattr(func, "__name__", type(func).__name__)


def distinct_names(names) -> list:
    """The reward functions' names made distinct for the tracker's columns: TRL accepts two
    functions of one name (two lambdas) and logs both under it; the second becomes ``name#2``
    (warned once, since TRL's own per-function metrics mix them)."""
    import warnings

    seen: dict = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    twice = [n for n, c in seen.items() if c > 1]
    if twice:
        warnings.warn(
            f"gsd: {seen[twice[0]]} reward functions are named {twice[0]!r}; TRL logs their rewards under one "
            f"name, gsd keeps them apart as {', '.join(n for n in out if n.split('#')[0] == twice[0])}",
            UserWarning,
            stacklevel=3,
        )
    return out


def is_async(func) -> bool:
    import functools
    import inspect

    while isinstance(func, functools.partial):
        func = func.func
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(getattr(func, "__call__", None))


def trainer_of(kwargs):
    """The trainer that called the reward function: the bound ``log_extra`` TRL passes leads back
    to it (None when called outside a trainer)."""
    return getattr(kwargs.get("log_extra"), "__self__", None)


def is_training(kwargs) -> bool:
    """TRL calls the reward functions in evaluation too; the trainer's model says which (called
    outside a trainer: training)."""
    model = getattr(trainer_of(kwargs), "model", None)
    return True if model is None else bool(model.training)


def prompt_key(value) -> str:
    """The text that identifies a prompt: the text itself, or a conversation's JSON (sorted keys),
    as the log reader hashes it."""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    return str(value)


def open_unit_number(x, name: str) -> float:
    """``x`` as a float in the open interval (0, 1), or an InputError naming ``name``."""
    v = real_or_none(x)
    if v is None or not 0.0 < v < 1.0:
        raise InputError(f"{name} must be one number in (0, 1), got {x!r}")
    return v


def is_reward_value(x) -> bool:
    """What TRL's ``torch.tensor(rewards, dtype=float32)`` takes: None (NaN), a real number, or a
    one-element tensor; not a complex number, a string or an array."""
    if x is None or isinstance(x, numbers.Real) or isinstance(x, np.bool_):
        return True
    return type(x).__name__ == "Tensor" and getattr(x, "ndim", None) == 0 and not x.is_complex()


def as_rewards(rewards, name: str, n: int) -> np.ndarray:
    """A reward function's output as float64 (NaN for None), or one InputError naming the function,
    the row and the value TRL could not take."""
    types = set(map(type, rewards))
    if not types <= {float, int, bool, type(None), np.float64, np.float32}:
        bad = next((i for i, x in enumerate(rewards) if not is_reward_value(x)), None)
        if bad is not None:
            raise InputError(
                f"reward function {name!r} returned {rewards[bad]!r} at row {bad}: a reward must be "
                "a real number or None"
            )
        return np.fromiter((np.nan if x is None else float(x) for x in rewards), np.float64, n)
    try:
        return np.array(rewards, dtype=np.float64)
    except OverflowError:  # an integer beyond float64 (TRL's cast to float32 fails on it too)
        bad = next(i for i, x in enumerate(rewards) if isinstance(x, int) and real_or_none(x) is None)
        raise InputError(
            f"reward function {name!r} returned {rewards[bad]!r} at row {bad}: beyond what a float holds "
            "(TRL casts rewards to float32)"
        ) from None


def world_size() -> int:
    """Processes of the run (``torch.distributed``); 1 without torch or a process group."""
    try:
        import torch.distributed as dist
    except ImportError:
        return 1
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def gathered(pend):
    """One generation as every process's reward functions saw it: with several processes
    (``torch.distributed``), the rows of each, concatenated in process order as TRL gathers its
    rewards; else ``pend`` itself.  One collective per generation, called by every process once
    its own functions have all returned (so async functions finishing in another order on another
    process cannot pair the wrong pieces).  A process that could not record the generation joins
    with ``{"failed": (kind, reason)}``: then every process raises the same :class:`Unscorable`,
    naming each failed process and its reason."""
    if world_size() < 2:
        return pend
    import torch.distributed as dist

    pieces = [None] * dist.get_world_size()
    mine = {"failed": pend["failed"]} if "failed" in pend else (pend["prompts"], pend["ids"], pend["parts"])
    dist.all_gather_object(pieces, mine)
    failed = [(rank, piece["failed"]) for rank, piece in enumerate(pieces) if isinstance(piece, dict)]
    if failed:
        reasons = "; ".join(f"process {rank}: {reason}" for rank, (_, reason) in failed)
        raise Unscorable(failed[0][1][0], f"{reasons} (every process leaves the generation out)")
    return {
        **pend,
        "prompts": [p for piece in pieces for p in piece[0]],
        "ids": None if pend["ids"] is None else [i for piece in pieces for i in piece[1]],
        "parts": [np.concatenate([piece[2][f] for piece in pieces]) for f in range(len(pend["parts"]))],
    }


def kind_and_reason(exc) -> tuple[str, str]:
    """The warn-once kind and the words of a failure in the tracking."""
    if isinstance(exc, Unscorable):
        return exc.kind, str(exc)
    return type(exc).__name__, f"{type(exc).__name__}: {exc}"


def as_weights(weights) -> list:
    from ..validation import real_or_none

    try:
        w = [real_or_none(x) for x in weights]
    except TypeError:
        raise InputError(f"weights must be a sequence of finite numbers, got {weights!r}") from None
    if not w or any(x is None for x in w):
        raise InputError(f"weights must be a non-empty sequence of finite numbers, got {weights!r}")
    return w


class Unscorable(Exception):
    """A generation the tracker cannot record (``kind`` names the problem for the warn-once)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def as_half_lives(half_life) -> tuple:
    """The candidate half-lives the tracker keeps: (None,), (h,), or diagnose's HALF_LIVES."""
    from ..diagnose.tables import HALF_LIVES

    if half_life is None:
        return (None,)
    if isinstance(half_life, str) and half_life == "auto":
        return tuple(HALF_LIVES)
    h = real_or_none(half_life)
    if h is None or h <= 0 or isinstance(half_life, str):
        raise InputError(f"half_life must be None, 'auto' or a finite number of steps > 0, got {half_life!r}")
    return (h,)


def as_prior(prior):
    from ..core.posterior import PRIORS, posterior_from_counts

    if isinstance(prior, str):
        if prior != "empirical-bayes" and prior not in PRIORS:
            raise InputError(
                f"prior must be 'empirical-bayes', {', '.join(map(repr, PRIORS))} or (a, b), got {prior!r}"
            )
        return prior
    return tuple(posterior_from_counts(0, 0, prior=prior).prior)
