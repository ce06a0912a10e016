"""The array library of an input: numpy, or torch for a tensor — so one formula serves both.

The closed forms of :mod:`gsd.core.silent` and :mod:`gsd.core.update` are written once, with the
functions both libraries name alike (``exp``, ``log1p``, ``expm1``, ``sqrt``, ``minimum``,
``where``) and Python's operators; the simulator evaluates them on torch tensors on the run's
device, the public API on numpy arrays.  Deciding by the type's module keeps ``import gsd``
free of torch.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

#: An argument of the closed forms written once for numpy and torch (:func:`namespace`): a float,
#: a numpy array or a torch tensor.  Any to mypy: each library's operators type their own results.
FloatOrTensor = Any


def is_tensor(x: object) -> bool:
    """True for a torch tensor (checked without importing torch)."""
    return type(x).__module__.startswith("torch")


def namespace(x: object) -> ModuleType:
    """``torch`` for a tensor, else ``numpy``."""
    if is_tensor(x):
        import torch

        return torch
    return np


def as_float64(x: Any) -> Any:
    """``x`` as float64 in its own library (an int64 tensor times a float would be float32)."""
    if is_tensor(x):
        import torch

        return x.to(torch.float64)
    return np.asarray(x).astype(np.float64)
