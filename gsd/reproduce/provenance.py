"""Which earlier results in a report folder ``gsd reproduce`` may reuse: those made by the same code
and the same config.

The simulator's campaigns are the slow part of a reproduction, and a run folder holding a
finished run is not rerun.  That is right for a rerun of the same code; after a code change it
would report old numbers as new.  So each campaign folder of a report is recorded with a
fingerprint of the code and the config that made it (``fingerprints.json`` beside the folders):
a folder whose fingerprint matches is reused (or resumed, if unfinished), any other is cleared
and computed again.  The code is every file of the installed package (its modules and shipped
data) with the versions of Python and of the numerical libraries the numbers depend on.
"""

from __future__ import annotations

import hashlib
import json
import platform
import shutil
from importlib import metadata, resources
from pathlib import Path

from ..errors import InputError
from ..io.atomic import read_json, write_json

__all__ = ["code_fingerprint", "fingerprint", "prepare_folder", "FINGERPRINTS"]

#: The record of fingerprints, one per campaign folder, in the report folder.
FINGERPRINTS = "fingerprints.json"
#: The packages whose files are "the code" (the data and configs are shipped as packages too).
_PACKAGES = ("gsd", "gsd._data", "gsd._simulations")
#: Libraries whose version can change a simulated number.
_LIBRARIES = ("numpy", "scipy", "pandas", "torch")


def _walk(node, prefix: str):
    for entry in sorted(node.iterdir(), key=lambda e: e.name):
        if entry.name == "__pycache__":
            continue
        name = f"{prefix}/{entry.name}"
        if entry.is_dir():
            yield from _walk(entry, name)
        elif not entry.name.endswith((".pyc", ".pyo")):
            yield name, entry


def code_fingerprint() -> str:
    """SHA-256 (hex) of the package's files, names and contents, and the versions that matter."""
    h = hashlib.sha256()
    for package in _PACKAGES:
        for name, entry in _walk(resources.files(package), package):
            h.update(name.encode() + b"\0" + entry.read_bytes() + b"\0")
    versions = {"python": platform.python_version()}
    for lib in _LIBRARIES:
        try:
            versions[lib] = metadata.version(lib)
        except metadata.PackageNotFoundError:
            versions[lib] = None
    h.update(json.dumps(versions, sort_keys=True).encode())
    return h.hexdigest()


def fingerprint(config, code: str | None = None) -> str:
    """SHA-256 (hex) of the code (:func:`code_fingerprint`) and a JSON-able config."""
    code = code_fingerprint() if code is None else code
    return hashlib.sha256((code + json.dumps(config, sort_keys=True, default=str)).encode()).hexdigest()


def prepare_folder(folder, config, *, marker: str) -> dict:
    """Make ``folder`` (a campaign folder of a report) fit to reuse or resume for ``config``.

    Returns ``{"fingerprint": hex, "earlier": how}`` with ``how`` one of ``"none"`` (no earlier
    results), ``"same"`` (made by this code and config: reuse or resume them) or ``"other"``
    (made by other code or config, or of unknown origin: cleared, to be computed again).  The
    fingerprint is recorded before any work, so an interrupted run resumes under the same code.

    ``marker``: a file every such folder holds (``campaign.json``, ``runs``); a folder without it
    is not one that ``gsd reproduce`` wrote and is left alone (:class:`gsd.InputError`).
    """
    folder = Path(folder)
    record_path = folder.parent / FINGERPRINTS
    record = read_json(record_path) if record_path.is_file() else {}
    fp = fingerprint(config)
    earlier = "none"
    if folder.is_symlink():  # what it names lies elsewhere: never cleared from here
        raise InputError(
            f"out: {str(folder)!r} is a symbolic link; gsd reproduce clears only folders it wrote "
            "inside --out: remove the link or choose another --out"
        )
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        if not (folder / marker).exists():
            raise InputError(
                f"out: {str(folder)!r} holds files that gsd reproduce did not write (no {marker}); "
                "move them or choose another --out"
            )
        if record.get(folder.name) == fp:
            earlier = "same"
        else:
            shutil.rmtree(folder)
            earlier = "other"
    record[folder.name] = fp
    write_json(record_path, record)
    return {"fingerprint": fp, "earlier": earlier}
