"""A per-rollout column for the log writers: a scalar broadcast, or an array of the right length."""

import numpy as np

from .._errors import InputError


def column(values, n: int, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim == 0:
        arr = np.full(n, arr.item())
    if arr.shape != (n,):
        raise InputError(f"{name} must have one entry per rollout ({n}), got shape {arr.shape}")
    return arr
