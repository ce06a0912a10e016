"""The optional dependencies: torch is an extra (``pip install '.[torch]'`` in the checkout).

The math core, ``gsd plan``, ``gsd diagnose``, the paper's reproduction and the simulator's numpy
engine never import torch.  The torch engine, the MLP policy, the budget planner inside a run and
:mod:`gsd.losses` do; each asks :func:`require_torch` first, so that without torch the user reads
one line naming the feature and the extra, not a traceback ending in ``import torch``.
"""

from __future__ import annotations

import importlib

from .errors import MissingExtra

__all__ = ["TORCH_EXTRA", "TRL_EXTRA", "TRL_STACK", "CPU_TORCH_INDEX", "require_torch", "require_trl"]

#: The extra that installs torch, as a user types it today: in the checkout's folder (the distribution,
#: grpo-gsd, is not on the registry yet; once it is, ``grpo-gsd[torch]`` anywhere).
TORCH_EXTRA = ".[torch]"
#: The extras that install TRL and the versions it was checked with (``[trl]``), and torch.
TRL_EXTRA = ".[trl,torch]"
#: Where :data:`TORCH_EXTRA` and :data:`TRL_EXTRA` are typed.
WHERE = "in the gsd checkout"
#: What TRL's own code needs here, as imported: torch and the ``[trl]`` extra's packages.
TRL_STACK = ("torch", "transformers", "accelerate", "datasets", "trl")
#: PyTorch's index of CPU-only wheels: without it the registry's torch is the multi-GB CUDA build.
CPU_TORCH_INDEX = "https://download.pytorch.org/whl/cpu"


def require_torch(feature: str):
    """The ``torch`` module, or :class:`gsd.MissingExtra` naming ``feature`` and the extra.

    Parameters
    ----------
    feature : str
        What needs torch, as the message names it (e.g. ``"gsd.losses"``).

    Returns
    -------
    module
        ``torch``.

    Raises
    ------
    gsd.MissingExtra
        torch cannot be imported; the message is one line with the install command.
    """
    try:
        import torch
    except ModuleNotFoundError as exc:
        if not (exc.name == "torch" or (exc.name or "").startswith("torch.")):
            raise  # torch is there and something inside it is missing: its own error is the useful one
        raise MissingExtra(
            f"{feature} needs torch, which is not installed here: pip install '{TORCH_EXTRA}' {WHERE} "
            f"(the CPU build: pip install torch --index-url {CPU_TORCH_INDEX} first)",
            name="torch",
        ) from None
    return torch


def require_trl(feature: str) -> None:
    """Import :data:`TRL_STACK`, or raise :class:`gsd.MissingExtra` naming ``feature``, every
    package of it that is missing here, and the extras that install them, in one line.

    Raises
    ------
    gsd.MissingExtra
        A package of :data:`TRL_STACK` cannot be imported (directly, or as the dependency one of
        them imports); any other missing module keeps its own error.
    """
    import warnings

    missing = []
    for module in TRL_STACK:
        try:
            with warnings.catch_warnings():  # their import-time notices (tqdm's "IProgress not found" in a
                warnings.simplefilter("ignore")  # notebook without ipywidgets): nothing for the user to act on
                importlib.import_module(module)
        except ModuleNotFoundError as exc:
            name = (exc.name or "").split(".")[0]
            if name not in TRL_STACK:
                raise  # a package of the stack is there and something inside it is missing: its own error
            missing += [name] if name not in missing else []
    if missing:
        raise MissingExtra(
            f"{feature} needs {', '.join(TRL_STACK)}; not installed here: {', '.join(missing)}: "
            f"pip install '{TRL_EXTRA}' {WHERE} (the CPU build of torch: pip install torch --index-url "
            f"{CPU_TORCH_INDEX} first)",
            name=missing[0],
        )
