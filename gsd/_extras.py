"""The optional dependencies: torch is an extra (``pip install 'grpo-gsd[torch]'``).

The math core, ``gsd plan``, ``gsd diagnose``, the paper's reproduction and the simulator's numpy
engine never import torch.  The torch engine, the MLP policy, the budget planner inside a run and
:mod:`gsd.losses` do; each asks :func:`require_torch` first, so that without torch the user reads
one line naming the feature and the extra, not a traceback ending in ``import torch``.
"""

from __future__ import annotations

from ._errors import MissingExtra

__all__ = ["TORCH_EXTRA", "CPU_TORCH_INDEX", "require_torch"]

#: The extra that installs torch, as a user types it.
TORCH_EXTRA = "grpo-gsd[torch]"
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
        raise MissingExtra(f"{feature} needs torch, which is not installed here: pip install '{TORCH_EXTRA}' "
                           f"(the CPU build: pip install torch --index-url {CPU_TORCH_INDEX} first)",
                           name="torch") from None
    return torch
