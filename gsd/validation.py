"""Input checks shared by every public function.

Each check raises :class:`InputError` (a ``ValueError``) with a message that names the
argument and shows the bad value, so that a caller (or the CLI, which prints the message on
one line) knows what to fix.  Nothing in the package returns a number computed from invalid
input; ±inf is refused wherever NaN is.
"""

from __future__ import annotations

import functools
import numbers
import typing

import numpy as np

from .errors import InputError

__all__ = [
    "InputError",
    "MAX_GROUP_SIZE",
    "MAX_EXACT_GROUP_SIZE",
    "as_probability",
    "as_group_size",
    "as_scalar_group_size",
    "broadcast",
    "as_open_unit",
    "as_positive",
    "as_ddof",
    "as_eps",
    "is_torch",
    "numpy_result",
]


def numpy_result(fn):
    """Decorator for the functions that broadcast over p and G: scalars in give a numpy scalar
    out, arrays in give an array out (a 0-d array result becomes its scalar, as numpy's own
    functions do), whichever path inside computed it."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        out = fn(*args, **kwargs)
        return out[()] if isinstance(out, np.ndarray) and out.ndim == 0 else out

    return wrapper


def shown(value, limit: int = 6) -> str:
    """A short repr of the offending value(s) for error messages."""
    arr = np.asarray(value)
    if arr.ndim == 0:
        return repr(arr.item())
    flat = arr.ravel()
    text = ", ".join(repr(x.item() if hasattr(x, "item") else x) for x in flat[:limit])
    more = f", ... ({flat.size} values)" if flat.size > limit else ""
    return f"[{text}{more}]"


def is_torch(x) -> bool:
    """True for a torch tensor, without importing torch when the caller did not."""
    return type(x).__module__.startswith("torch")


def as_probability(p, name: str = "p") -> np.ndarray:
    """p as a float64 array, every entry in [0, 1] and not NaN."""
    try:
        arr = np.asarray(p, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a number or an array of numbers in [0, 1], got {p!r}") from None
    if arr.size == 0:
        raise InputError(f"{name} is empty")
    bad = ~((arr >= 0.0) & (arr <= 1.0))  # NaN fails both comparisons
    if bad.any():
        raise InputError(f"{name} must lie in [0, 1] (no NaN), got {shown(arr[bad])}")
    return arr


#: Largest group size any function accepts: every integer up to 2^53 is exact in float64,
#: where the closed forms (p^G, G·p(1−p), ...) compute.
MAX_GROUP_SIZE = 2**53
#: Largest group size of the exact binomial sums (fidelity, expected updates): their window of
#: k holds ~24·sqrt(G·p(1−p)) + 80 terms, at most ~0.4 million (a few MB, well under a second).
MAX_EXACT_GROUP_SIZE = 10**9


def as_group_size(G, name: str = "G", minimum: int = 1, maximum: int = MAX_GROUP_SIZE) -> np.ndarray:
    """G as an int64 array of integers in [minimum, maximum] (floats equal to integers are accepted).

    ``maximum`` is the function's documented limit (:data:`MAX_GROUP_SIZE` by default, or
    :data:`MAX_EXACT_GROUP_SIZE` for the exact sums): a larger G is refused by name rather
    than overflowing, hanging or exhausting memory.
    """
    if isinstance(G, bool):
        raise InputError(f"{name} must be an integer >= {minimum}, got {G!r}")
    try:
        raw = np.asarray(G)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"{name} must be an integer >= {minimum}, got {G!r}") from None
    if raw.dtype == object and raw.size and all(isinstance(x, numbers.Integral) for x in raw.ravel()):
        # Python integers beyond int64
        beyond = [int(x) for x in raw.ravel() if int(x) > maximum]
        if beyond:
            raise InputError(
                f"{name} must be <= {maximum:,} (this function's limit), got {shown(beyond if raw.ndim else beyond[0])}"
            )
    if raw.size == 0:
        raise InputError(f"{name} is empty")
    if raw.dtype.kind not in "iuf" or raw.dtype == np.bool_:
        raise InputError(f"{name} must be an integer >= {minimum}, got {shown(raw)}")
    if raw.dtype.kind == "f":
        bad = ~np.isfinite(raw) | (raw != np.round(raw))
        if bad.any():
            raise InputError(f"{name} must be an integer >= {minimum}, got {shown(raw[bad])}")
    # both bounds before the cast: a float or uint64 beyond int64 would wrap around
    small = raw < minimum
    if small.any():
        raise InputError(f"{name} must be an integer >= {minimum}, got {shown(raw[small] if raw.ndim else raw)}")
    big = raw > maximum
    if big.any():
        raise InputError(
            f"{name} must be <= {maximum:,} (this function's limit), got {shown(raw[big] if raw.ndim else raw)}"
        )
    return raw.astype(np.int64)


def broadcast(**named) -> list[np.ndarray]:
    """The named arrays broadcast together (``np.broadcast_arrays``), or an InputError naming them
    and their shapes."""
    try:
        return list(np.broadcast_arrays(*named.values()))
    except ValueError:
        listing = ", ".join(f"{k} {np.shape(v)}" for k, v in named.items())
        raise InputError(f"shapes do not broadcast together: {listing}") from None


def as_scalar_group_size(G, name: str, minimum: int = 1, maximum: int = MAX_GROUP_SIZE) -> int:
    """One group size (a limit such as ``max_group_size``) as a Python int; see :func:`as_group_size`."""
    arr = as_group_size(G, name, minimum, maximum)
    if arr.ndim:
        raise InputError(f"{name} must be one integer, got {shown(arr)}")
    return int(arr)


def as_open_unit(x, name: str) -> np.ndarray:
    """x as a float64 array strictly inside (0, 1) (targets such as epsilon or delta)."""
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a number in (0, 1), got {x!r}") from None
    if arr.size == 0:
        raise InputError(f"{name} is empty")
    bad = ~((arr > 0.0) & (arr < 1.0))
    if bad.any():
        raise InputError(f"{name} must lie in the open interval (0, 1), got {shown(arr[bad])}")
    return arr


def real_or_none(x) -> float | None:
    """x as a float if it is a real number (not a bool) that float64 holds finitely, else None."""
    if not isinstance(x, numbers.Real) or isinstance(x, bool):
        return None
    try:
        v = float(x)
    except OverflowError:  # an integer beyond float range
        return None
    return v if np.isfinite(v) else None


def as_positive(x, name: str) -> float:
    """A finite scalar > 0."""
    v = real_or_none(x)
    if v is None or v <= 0:
        raise InputError(f"{name} must be a finite number > 0, got {x!r}")
    return v


def as_ddof(ddof) -> int:
    """The delta degrees of freedom of a std: 0 (population, the paper) or 1 (torch.std default)."""
    if isinstance(ddof, bool) or not isinstance(ddof, numbers.Integral) or ddof not in (0, 1):
        raise InputError(f"ddof must be 0 (population std, the paper) or 1 (sample std), got {ddof!r}")
    return int(ddof)


def as_eps(eps) -> float:
    """The constant added to the std before dividing: finite and >= 0."""
    v = real_or_none(eps)
    if v is None or v < 0:
        raise InputError(f"eps must be a finite number >= 0, got {eps!r}")
    return v


# --------------------------------------------------------------------------- torch inputs
# Checks for the loss-geometry functions (gsd.losses), which work on torch tensors: they look
# at the values without detaching the caller's tensor from its autograd graph.
__all__ += [
    "as_unit_interval",
    "as_float_tensor",
    "check_distribution",
    "broadcast_shapes",
]


def as_unit_interval(x, name: str) -> float:
    """A scalar in the closed interval [0, 1] (a mixing weight such as λ)."""
    if not isinstance(x, numbers.Real) or isinstance(x, bool) or not (0.0 <= typing.cast(float, x) <= 1.0):
        raise InputError(f"{name} must be a number in [0, 1], got {x!r}")
    return float(x)


def as_float_tensor(x, name: str, *, allow: str | None = None):
    """x as a floating torch tensor (array-likes become float64); empty or non-finite input is refused.

    A floating tensor is returned as is (same dtype, device and autograd graph).  ``allow``
    loosens the finiteness rule where a non-finite value means something: ``"-inf"`` for
    log-probabilities and logits (the log of a zero probability, a masked token), ``"any"`` when
    the caller checks only some entries itself (padding positions may hold anything).
    """
    import torch

    if is_torch(x):
        t = x if x.is_floating_point() else x.to(torch.float64)
    else:
        try:
            t = torch.as_tensor(np.asarray(x, dtype=np.float64))
        except (TypeError, ValueError, OverflowError):
            raise InputError(f"{name} must be a tensor or an array of numbers, got {x!r}") from None
    if t.numel() == 0:
        raise InputError(f"{name} is empty (shape {tuple(t.shape)})")
    if allow == "any":
        return t
    d = t.detach()
    if bool(torch.isnan(d).any()):
        raise InputError(f"{name} contains NaN")
    bad = torch.isinf(d) if allow is None else (d == float("inf"))
    if bool(bad.any()):
        raise InputError(f"{name} contains {float(d[bad][0])!r} (must be finite{'' if allow is None else ' or -inf'})")
    return t


def check_distribution(p, name: str, atol: float | None = None) -> None:
    """p (a float tensor, last axis = outcomes) holds probability distributions.

    Entries must be >= 0 and each distribution must sum to 1 within ``atol`` (default 1e-6, or
    more for low-precision dtypes and large vocabularies, where rounding alone exceeds 1e-6).
    """
    import torch

    d = p.detach()
    if d.ndim == 0:
        raise InputError(f"{name} must have an outcome axis (shape (..., V)), got a scalar")
    if atol is None:
        atol = max(1e-6, d.shape[-1] * torch.finfo(d.dtype).eps)
    neg = d < 0
    if bool(neg.any()):
        raise InputError(f"{name} has negative probabilities: {shown(d[neg].cpu().numpy())}")
    if not bool(torch.isfinite(d).all()):
        raise InputError(f"{name} has non-finite probabilities")
    err = (d.sum(dim=-1) - 1.0).abs()
    bad = err > atol
    if bool(bad.any()):
        sums = d.sum(dim=-1)[bad].cpu().numpy()
        raise InputError(f"{name} must sum to 1 over its last axis (tolerance {atol:g}), got sums {shown(sums)}")


def broadcast_shapes(**named):
    """The common broadcast shape of the named tensors, or InputError naming them and their shapes."""
    import torch

    shapes = {k: tuple(v.shape) for k, v in named.items()}
    try:
        return torch.broadcast_shapes(*shapes.values())
    except RuntimeError:
        listing = ", ".join(f"{k} {s}" for k, s in shapes.items())
        raise InputError(f"shapes do not broadcast together: {listing}") from None
