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


def chat_label(messages) -> str:
    """The label of a conversational prompt: its last user message (else its last message)."""
    if not isinstance(messages, (list, tuple)) or not messages:
        return str(messages)
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    last = (users or [m for m in messages if isinstance(m, dict)] or [{"content": str(messages[-1])}])[-1]
    content = last.get("content", "")
    if isinstance(content, list):  # multimodal content: its text parts
        content = " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)
