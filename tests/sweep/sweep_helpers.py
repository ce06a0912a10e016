"""Helpers shared by the sweep tests (imported by name: this folder is on sys.path)."""

from __future__ import annotations

import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
#: The stand-in simulator module (sweep_fakesim.py beside this file).
FAKE = "sweep_fakesim"


def completions(log: Path) -> list[str]:
    """Names of the runs the stand-in simulator finished, one per completion, in order."""
    return log.read_text().split() if log.exists() else []


def write_grid(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def subprocess_env(**extra) -> dict:
    """The environment of a child `python -m gsd.cli ...` that must import sweep_fakesim."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update({k: str(v) for k, v in extra.items()})
    return env
