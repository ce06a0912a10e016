"""The Makefile's two commands as a newcomer runs them: `make reproduce` installs the package
alone and writes no tracked file; `make test` installs the rest with no pip resolver warning
(every package installed without its dependencies comes after every install that resolves them).
Read from the Makefile's recipes, not run (they build a virtual environment: minutes, a network)."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from gsd.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]


def recipe(target: str) -> list[str]:
    """The command lines of ``target``'s rule (its prerequisites on the rule's own line)."""
    text = (ROOT / "Makefile").read_text()
    match = re.search(rf"^{re.escape(target)}:.*\n((?:\t.*\n)+)", text, flags=re.M)
    assert match, f"no rule for {target}"
    return [line.strip() for line in match.group(1).splitlines()]


def prerequisites(target: str) -> list[str]:
    text = (ROOT / "Makefile").read_text()
    return re.search(rf"^{re.escape(target)}:(.*)$", text, flags=re.M).group(1).split()


def test_main_job_installs_the_package_alone():
    assert prerequisites("reproduce") == ["$(VENV)/.installed-core"]
    installs = [line for line in recipe("$(VENV)/.installed-core") if "pip install" in line]
    assert installs[-1].endswith("pip install -q -e .")  # no extra: no torch, TRL, verl, AReaL, Ray, sphinx
    assert not any("TORCH" in line or "[" in line for line in installs)


def test_test_job_installs_cpu_torch_then_the_rest_without_a_resolver_warning():
    assert prerequisites("test") == ["$(VENV)/.installed-test"]
    assert prerequisites("$(VENV)/.installed-test") == ["$(VENV)/.installed-core"]
    lines = [line for line in recipe("$(VENV)/.installed-test") if "pip install" in line]
    assert "$(TORCH)" in lines[0] and "--index-url $(TORCH_INDEX)" in lines[0]
    text = (ROOT / "Makefile").read_text()
    assert re.search(r"^TORCH_INDEX \?= https://download\.pytorch\.org/whl/cpu$", text, flags=re.M)
    # pip checks the requirements of the packages an install touches (and of those depending on
    # them) unless --no-deps: verl and AReaL, installed without theirs, come after every such install.
    first_no_deps = next(i for i, line in enumerate(lines) if "$(VERL)" in line or "$(AREAL)" in line)
    assert all("--no-deps" in line for line in lines[first_no_deps:]), lines


def test_reproduce_writes_only_ignored_paths():
    """`make reproduce`'s report and figures go into its --out folder, which git ignores; no
    figure of the checkout's figures/ (tracked) is written (`make figures` does that, on purpose)."""
    (line,) = [ln for ln in recipe("reproduce") if " reproduce " in ln]
    argv = shlex.split(line.split("bin/gsd ", 1)[1])
    args = build_parser().parse_args(argv)
    assert args.figures is None  # the figures in OUT/figures
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    for path in (
        Path(args.out) / "report.md",
        Path(args.out) / "figures" / "identity_gk.png",
        Path(args.out) / "campaign" / "campaign_summary.json",
    ):
        ignored = subprocess.run(["git", "check-ignore", "-q", str(path)], cwd=ROOT)
        assert ignored.returncode == 0, f"{path} is not ignored by git"
    tracked = subprocess.run(["git", "ls-files", args.out], cwd=ROOT, capture_output=True, text=True).stdout
    assert tracked == ""
    (figures_line,) = [ln for ln in recipe("figures") if " reproduce " in ln]
    assert "--figures figures" in figures_line


def test_documented_jupyter_commands_are_installed():
    """Every `jupyter <command>` the README and the docs tell a user to run is installed by the
    set-up (`make test`: nbclient's `jupyter execute`), unless the same line says to install it."""
    import sys

    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    commands = {
        (page.name, m.group(1))
        for page in pages
        for line in page.read_text().splitlines()
        if "pip install" not in line
        for m in re.finditer(r"\bjupyter[ -]([a-z]+)\b", line)
    }
    assert ("notebooks.md", "execute") in commands
    bindir = Path(sys.executable).parent
    for page, command in sorted(commands):
        assert (bindir / f"jupyter-{command}").is_file(), f"{page}: `jupyter {command}` is not installed"
