"""Files shipped with the package: the Big-Math histogram and the simulation configs.

In the source tree they are the top-level folders a user reads and copies:

* ``data/`` — ``bigmath_solve_rate_histogram.csv``, the Big-Math solve-rate counts, with their
  provenance (``data/README.md``);
* ``simulations/NAME.toml`` — the campaign and grid definitions, addressed by ``NAME`` on the
  command line (``gsd sweep --grid law_in_training``) or by a path to a file of one's own
  (``gsd simulate --campaign simulations/paper_campaign.toml``).

The build installs them as the packages ``gsd._data`` and ``gsd._simulations`` (package-dir
mapping in ``pyproject.toml``, which an editable install follows too), read here through
:mod:`importlib.resources`: an installed wheel finds them wherever it lives.
"""

from __future__ import annotations

import atexit
import contextlib
from importlib import resources
from pathlib import Path

from ..validation import InputError

__all__ = ["shipped_file", "shipped_configs", "config_file", "example_logs", "EXAMPLE_LOGS"]

#: What ``data/example_logs/`` ships, copied by ``gsd example-logs``: each trainer's own dump and a
#: plain table of the same TRL rollouts (``PROVENANCE.md`` says how each was written).
EXAMPLE_LOGS = ("trl", "verl", "areal", "rollouts.csv", "PROVENANCE.md")

#: The packages holding the data files and the configs (``data/`` and ``simulations/`` of the source tree).
_DATA_PACKAGE = "gsd._data"
_CONFIGS_PACKAGE = "gsd._simulations"
# Keeps files extracted from a zipped install alive for the life of the process.
_EXTRACTED = contextlib.ExitStack()
atexit.register(_EXTRACTED.close)


def _as_path(entry) -> Path:
    """A real file-system path for a resource (extracted once if the package is zipped)."""
    if isinstance(entry, Path):
        return entry
    return _EXTRACTED.enter_context(resources.as_file(entry))


def shipped_file(name: str) -> Path:
    """Path of a data file the package ships (``data/`` of the source tree), e.g.
    ``"bigmath_solve_rate_histogram.csv"``.

    Raises
    ------
    gsd.InputError
        If the package ships no file of that name.
    """
    entry = resources.files(_DATA_PACKAGE).joinpath(name)
    if name == "__init__.py" or not entry.is_file():
        raise InputError(f"name: the package ships no file {name!r}")
    return _as_path(entry)


def shipped_configs() -> dict[str, Path]:
    """The shipped configs, name (file stem) → path, sorted by name.

    Examples
    --------
    >>> from gsd.resources import shipped_configs
    >>> "law_in_training" in shipped_configs()
    True
    """
    folder = resources.files(_CONFIGS_PACKAGE)
    entries = sorted((e for e in folder.iterdir() if e.name.endswith(".toml")), key=lambda e: e.name)
    return {e.name[: -len(".toml")]: _as_path(e) for e in entries}


def config_file(spec, *, what: str = "config") -> Path:
    """A config file given as a path or as the name of a shipped config.

    Parameters
    ----------
    spec : str or path-like
        An existing file (used as it is), or the name of a shipped config with or without
        ``.toml`` (see :func:`shipped_configs`).  A file of that name in the working folder
        takes precedence over the shipped one.
    what : str
        What the file is (``"config"``, ``"grid file"``), used in the error message.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    gsd.InputError
        If ``spec`` is neither a file nor a shipped name; the message lists the shipped names.

    Examples
    --------
    >>> from gsd.resources import config_file
    >>> config_file("law_in_training").name
    'law_in_training.toml'
    """
    path = Path(spec)
    if path.is_file():
        return path
    name = path.name[: -len(".toml")] if path.name.endswith(".toml") else path.name
    shipped = shipped_configs()
    if str(path.parent) == "." and name in shipped:
        return shipped[name]
    raise InputError(
        f"{what} {str(spec)!r} not found: it does not exist and is not the name of a shipped "
        f"config ({', '.join(shipped)})"
    )


def example_logs() -> Path:
    """The folder of the shipped example rollout logs (``data/example_logs/`` of the source tree):
    ``trl/`` (a TRL ``output_dir``), ``verl/rollout_data/`` (verl's V1 dump), ``areal/`` (AReaL's
    ``rollout/{version}/{task_id}.jsonl``), ``rollouts.csv`` and ``PROVENANCE.md``.

    Examples
    --------
    >>> from gsd.resources import example_logs
    >>> sorted(p.name for p in (example_logs() / "trl" / "completions").iterdir())[0]
    'completions_00001.parquet'
    """
    # In a checkout, the folder beside this gsd/ (the same version as the code that reads it,
    # whichever checkout an editable install's mapping of gsd._data points to); else the package's.
    beside = Path(__file__).resolve().parents[2] / "data" / "example_logs"
    if (beside / "PROVENANCE.md").is_file():
        return beside
    entry = resources.files(_DATA_PACKAGE).joinpath("example_logs")
    if not entry.is_dir():  # pragma: no cover - a broken install
        raise InputError("the package ships no example_logs folder (reinstall grpo-gsd)")
    return _as_path(entry)
