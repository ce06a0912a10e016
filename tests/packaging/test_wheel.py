"""The built wheel, installed non-editable into a fresh virtual environment, works on its own.

The wheel is built from a copy of the sources (so the checkout gets no ``build/`` folder) and
installed with ``--no-deps``; the new environment sees this environment's packages (numpy,
torch, …) through a ``.pth`` line, so nothing is downloaded or reinstalled.  A second environment
gets the same wheel with ``import torch`` blocked at start-up (torch is the ``[torch]`` extra):
there the core commands run and a torch-only feature says, in one line, which extra it needs.  A ``.pth`` line
adds a folder without running the ``.pth`` files inside it, so the editable install of the
checkout is not active there — and the test asserts that ``gsd`` is imported from the wheel.
Every command runs with its working folder outside the checkout.  The shipped files live in the
checkout's top-level ``data/`` and ``simulations/``; the wheel carries them as ``gsd/_data`` and
``gsd/_simulations``, and the shipped names work from the wheel and from the editable install.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import numpy as np
import pytest

from gsd.extras import TORCH_EXTRA

ROOT = Path(__file__).resolve().parents[2]
#: The distribution's name on the registry (the import name is ``gsd``).
DISTRIBUTION = "grpo-gsd"
SOURCES = ("pyproject.toml", "README.md", "gsd", "data", "simulations")
#: A campaign run small enough for a test: the shipped campaign's arms, 2 steps of 200 prompts.
TINY_CAMPAIGN = [
    "--set",
    "steps=2",
    "--set",
    "n_prompts=200",
    "--set",
    "decile_draws=2",
    "--device",
    "cpu",
    "--no-progress",
    "--json",
]


def _run(cmd, *, cwd, env, timeout=300, status=0):
    res = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert res.returncode == status, f"{cmd} exited {res.returncode}\nstdout:\n{res.stdout}\nstderr:\n{res.stderr}"
    return res.stdout if status == 0 else res.stderr


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory):
    pytest.importorskip("setuptools")
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / name, src / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GSD_", "PYTHON", "VIRTUAL_ENV"))}
    env["MPLBACKEND"] = "Agg"
    dist = tmp / "dist"
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "-w",
            dist,
            src,
        ],
        cwd=tmp,
        env=env,
    )
    (wheel,) = dist.glob(f"{DISTRIBUTION.replace('-', '_')}-*.whl")
    work = tmp / "work"
    work.mkdir()
    prefix = _venv_with_wheel(tmp / "venv", wheel, cwd=tmp, env=env)
    return {
        "python": prefix / "bin" / "python",
        "gsd": prefix / "bin" / "gsd",
        "prefix": prefix,
        "cwd": work,
        "env": env,
        "wheel": wheel,
        "tmp": tmp,
    }


#: Started by a ``.pth`` line in the torch-less environment: ``import torch`` fails as it does
#: where torch is not installed (the shared environment keeps its torch for the other tests).
BLOCK_TORCH = """import sys


class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NoTorch())
"""


def _venv_with_wheel(prefix: Path, wheel: Path, *, cwd, env, block_torch: bool = False) -> Path:
    """A fresh environment at ``prefix`` with ``wheel`` installed (``--no-deps``) over this one's packages."""
    venv.EnvBuilder(with_pip=False).create(prefix)
    python = prefix / "bin" / "python"
    inner_site = Path(
        _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=cwd, env=env).strip()
    )
    # This environment's dependencies, appended after the new environment's own site-packages.
    outer = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (inner_site / "_outer_dependencies.pth").write_text("".join(f"{p}\n" for p in sorted(outer)))
    if block_torch:  # "_" sorts first: the blocker is in place before any other .pth line runs
        (inner_site / "_gsd_test_no_torch.py").write_text(BLOCK_TORCH)
        (inner_site / "__gsd_test_no_torch.pth").write_text("import _gsd_test_no_torch\n")
    _run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "-q", wheel],
        cwd=cwd,
        env=env,
    )
    return prefix


@pytest.fixture(scope="module")
def no_torch_env(wheel_env, tmp_path_factory):
    """The same wheel in an environment where ``import torch`` fails, and a small table log."""
    tmp = wheel_env["tmp"]
    prefix = _venv_with_wheel(
        tmp / "venv_no_torch", wheel_env["wheel"], cwd=tmp, env=wheel_env["env"], block_torch=True
    )
    work = tmp_path_factory.mktemp("no_torch_work")
    rng = np.random.default_rng(0)
    p = rng.beta(0.6, 0.6, 40)
    rows = [f"{step},q{j},{float(rng.random() < p[j])}" for step in (1, 2, 3) for j in range(40) for _ in range(8)]
    (work / "log.csv").write_text("step,prompt,reward\n" + "\n".join(rows) + "\n")
    return {
        **wheel_env,
        "python": prefix / "bin" / "python",
        "gsd": prefix / "bin" / "gsd",
        "prefix": prefix,
        "cwd": work,
    }


def test_wheel_ships_data_and_configs(wheel_env):
    import zipfile

    names = set(zipfile.ZipFile(wheel_env["wheel"]).namelist())
    assert "gsd/_data/bigmath_solve_rate_histogram.csv" in names
    assert "gsd/_data/README.md" in names
    shipped = {f"gsd/_simulations/{p.name}" for p in (ROOT / "simulations").glob("*.toml")}
    assert shipped and shipped <= names
    assert not any(n.startswith(("data/", "simulations/")) for n in names)  # inside the package only
    # Every example log (and its provenance) travels; the script that wrote them stays in the checkout.
    logs = ROOT / "data" / "example_logs"
    wanted = {
        f"gsd/_data/example_logs/{f.relative_to(logs).as_posix()}"
        for f in logs.rglob("*")
        if f.is_file() and f.name != "made.json" and "__pycache__" not in f.parts
    }
    assert len(wanted) > 40 and wanted <= names, sorted(wanted - names)[:5]


def test_package_imports_from_the_wheel_and_loads_bigmath(wheel_env):
    code = (
        "import json, gsd, gsd.resources; from gsd.simulator.campaign import load_campaign; "
        "p = gsd.load_bigmath(); c = load_campaign(); "
        "print(json.dumps({'file': gsd.__file__, 'n': int(p.size), 'mean': float(p.mean()), "
        "'configs': sorted(gsd.resources.shipped_configs()), 'arms': sorted(c['arms'])}))"
    )
    out = json.loads(_run([wheel_env["python"], "-c", code], cwd=wheel_env["cwd"], env=wheel_env["env"]))
    assert Path(out["file"]).resolve().is_relative_to(wheel_env["prefix"].resolve())
    assert not Path(out["file"]).resolve().is_relative_to(ROOT)
    assert out["n"] == 215_608
    assert 0.0 < out["mean"] < 1.0
    assert {"law_in_training", "paper_campaign"} <= set(out["configs"])
    assert out["arms"] == ["dapo", "dr_grpo", "grpo"]  # the paper's campaign, from package data


def test_cli_plan(wheel_env):
    out = json.loads(
        _run(
            [wheel_env["gsd"], "plan", "--p", "0.5,0.05", "--epsilon", "0.05", "--json"],
            cwd=wheel_env["cwd"],
            env=wheel_env["env"],
        )
    )
    import gsd

    assert [int(r["group_size"]) for r in out] == list(gsd.required_group_size([0.5, 0.05], 0.05))


def test_cli_bigmath(wheel_env):
    out = _run([wheel_env["gsd"], "bigmath"], cwd=wheel_env["cwd"], env=wheel_env["env"])
    assert "215608" in out.replace(",", "")


def test_cli_simulate_five_steps(wheel_env):
    run = wheel_env["cwd"] / "run"
    _run(
        [
            wheel_env["gsd"],
            "simulate",
            "--out",
            run,
            "--set",
            "steps=5",
            "--set",
            "n_prompts=200",
            "--device",
            "cpu",
            "--no-progress",
            "--json",
        ],
        cwd=wheel_env["cwd"],
        env=wheel_env["env"],
    )
    assert (run / "summary.json").is_file() and (run / "ledger.parquet").is_file()


def test_cli_shipped_grid_by_name(wheel_env):
    out = _run(
        [
            wheel_env["gsd"],
            "sweep",
            "--grid",
            "law_in_training",
            "--out",
            wheel_env["cwd"] / "sweep",
            "--dry-run",
            "--json",
        ],
        cwd=wheel_env["cwd"],
        env=wheel_env["env"],
    )
    assert len(json.loads(out)) > 0


def test_cli_shipped_campaign_by_name(wheel_env):
    out = _run(
        [
            wheel_env["gsd"],
            "simulate",
            "--campaign",
            "paper_campaign",
            "--out",
            wheel_env["cwd"] / "camp",
            *TINY_CAMPAIGN,
        ],
        cwd=wheel_env["cwd"],
        env=wheel_env["env"],
    )
    assert sorted(json.loads(out)["arms"]) == ["dapo", "dr_grpo", "grpo"]


def test_editable_install_finds_the_shipped_files(tmp_path):
    """The development install (pip install -e) maps the same names onto data/ and simulations/."""
    import gsd
    from gsd.resources import shipped_configs, shipped_file

    if not Path(gsd.__file__).resolve().is_relative_to(ROOT):
        pytest.skip("gsd is not imported from this checkout")
    assert shipped_file("README.md").resolve() == (ROOT / "data" / "README.md").resolve()
    assert shipped_configs()["paper_campaign"].resolve() == (ROOT / "simulations" / "paper_campaign.toml").resolve()
    exe = Path(sys.executable).parent / "gsd"
    if not exe.is_file():
        pytest.skip("no gsd script beside this interpreter")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GSD_", "PYTHON"))}
    env["MPLBACKEND"] = "Agg"
    # By name from a folder outside the checkout, and by the path a user copies from, in the checkout.
    by_name = _run(
        [exe, "simulate", "--campaign", "paper_campaign", "--out", tmp_path / "a", *TINY_CAMPAIGN],
        cwd=tmp_path,
        env=env,
    )
    by_path = _run(
        [exe, "simulate", "--campaign", "simulations/paper_campaign.toml", "--out", tmp_path / "b", *TINY_CAMPAIGN],
        cwd=ROOT,
        env=env,
    )
    a, b = json.loads(by_name)["arms"], json.loads(by_path)["arms"]
    assert sorted(a) == ["dapo", "dr_grpo", "grpo"]
    assert {n: (r["silent_frac_mean"], r["final"]) for n, r in a.items()} == {
        n: (r["silent_frac_mean"], r["final"]) for n, r in b.items()
    }  # the same campaign, run twice


def test_metadata_name_version_and_torch_as_an_extra(wheel_env):
    """The wheel is ``grpo-gsd``, its version is ``gsd.__version__``, and torch is required only by
    the ``torch`` extra (``pip install grpo-gsd`` on a CPU machine pulls no CUDA build)."""
    import email
    import zipfile

    import gsd

    with zipfile.ZipFile(wheel_env["wheel"]) as zf:
        (meta,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        msg = email.message_from_bytes(zf.read(meta))
    assert msg["Name"] == DISTRIBUTION and msg["Version"] == gsd.__version__
    requires = msg.get_all("Requires-Dist")
    torch_lines = [r for r in requires if r.split(";")[0].strip().lower().startswith("torch")]
    assert torch_lines and all('extra == "torch"' in r for r in torch_lines), torch_lines
    assert "torch" in msg.get_all("Provides-Extra")
    out = _run([wheel_env["gsd"], "--version"], cwd=wheel_env["cwd"], env=wheel_env["env"])
    installed = _run(
        [wheel_env["python"], "-c", f"import importlib.metadata as m; print(m.version({DISTRIBUTION!r}))"],
        cwd=wheel_env["cwd"],
        env=wheel_env["env"],
    ).strip()
    assert out.split() == ["gsd", installed, "(distribution", f"{DISTRIBUTION})"]


def test_no_torch_environment_blocks_torch(no_torch_env):
    err = _run(
        [no_torch_env["python"], "-c", "import torch"], cwd=no_torch_env["cwd"], env=no_torch_env["env"], status=1
    )
    assert "No module named 'torch'" in err


def test_core_commands_run_without_torch(no_torch_env):
    """plan, diagnose, the numpy engine and the paper's reproduction need no torch."""
    g, cwd, env = no_torch_env["gsd"], no_torch_env["cwd"], no_torch_env["env"]
    plan = json.loads(_run([g, "plan", "--p", "0.5,0.05", "--epsilon", "0.05", "--json"], cwd=cwd, env=env))
    assert [int(r["group_size"]) for r in plan] == [11, 69]
    diag = json.loads(_run([g, "diagnose", "log.csv", "--reward", "reward", "--json"], cwd=cwd, env=env))
    assert (diag["summary"]["rollouts"], diag["summary"]["steps"], diag["summary"]["prompts"]) == (960, 3, 40)
    run = _run(
        [g, "simulate", "--out", cwd / "run", "--set", "steps=3", "--set", "n_prompts=100", "--no-progress", "--json"],
        cwd=cwd,
        env=env,
    )
    assert json.loads(run)["engine"] == "numpy" and json.loads(run)["complete"]
    assert "--fast" in _run([g, "reproduce", "--help"], cwd=cwd, env=env)
    _run([g, "reproduce", "--fast", "--quiet", "--out", cwd / "report"], cwd=cwd, env=env)
    report = json.loads((cwd / "report" / "report.json").read_text())
    assert report["comparisons"] and all(row["agrees_at_printed_precision"] for row in report["comparisons"])
    assert report["campaign"]["status"] == "ok"
    assert report["allocation"]["status"] == "not available" and f"'{TORCH_EXTRA}'" in report["allocation"]["reason"]


def test_example_logs_come_out_of_the_wheel_and_diagnose_without_torch(no_torch_env):
    """README's first lines, from the installed wheel where torch cannot be imported: the shipped
    TRL log is read with TRL's float32 arithmetic done in numpy."""
    g, cwd, env = no_torch_env["gsd"], no_torch_env["cwd"], no_torch_env["env"]
    _run([g, "example-logs", "examples"], cwd=cwd, env=env)
    for log, fmt in (("examples/trl", "trl"), ("examples/verl/rollout_data", "verl"), ("examples/areal", "areal")):
        diag = json.loads(_run([g, "diagnose", log, "--json"], cwd=cwd, env=env))
        s = diag["summary"]
        assert (s["format"], s["rollouts"], s["prompts"], s["steps"]) == (fmt, 128, 8, 4)
        assert s["rewards_as"] == "binary rewards (0/1)"
    _run([g, "example-logs", "examples"], cwd=cwd, env=env, status=2)  # never over a folder that exists


@pytest.mark.parametrize(
    "command",
    [
        ["losses"],
        ["simulate", "--config", "mlp_interference", "--out", "mlp", "--set", "steps=2"],
        ["simulate", "--out", "torch_engine", "--set", "steps=2", "--set", "engine=torch"],
    ],
    ids=["losses", "mlp-policy", "torch-engine"],
)
def test_torch_only_commands_say_which_extra(no_torch_env, command):
    err = _run([no_torch_env["gsd"], *command], cwd=no_torch_env["cwd"], env=no_torch_env["env"], status=2)
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "pip install '.[torch]' in the gsd checkout" in err and "download.pytorch.org/whl/cpu" in err


@pytest.mark.parametrize("module", ["gsd.losses.kl", "gsd.simulator.engine", "gsd.simulator.policy"])
def test_torch_only_modules_raise_missing_extra(no_torch_env, module):
    code = (
        f"import gsd\ntry:\n    import {module}\nexcept gsd.MissingExtra as exc:\n"
        f"    print(exc.name, '|', exc)\nelse:\n    raise SystemExit('imported without torch')"
    )
    out = _run([no_torch_env["python"], "-c", code], cwd=no_torch_env["cwd"], env=no_torch_env["env"])
    name, message = out.strip().split(" | ")
    assert name == "torch" and f"pip install '{TORCH_EXTRA}'" in message and "\n" not in message


def test_build_prints_no_setuptools_warning(tmp_path):
    """Building the wheel (what `pip install .` and `make reproduce` do) prints no setuptools warning:
    a folder of shipped data that Python could import, left out of the package list, made setuptools
    print a screenful of "Package would be ignored" per folder (five of them) before the install."""
    pytest.importorskip("setuptools")
    src = tmp_path / "src"
    src.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / name, src / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GSD_", "PYTHON", "VIRTUAL_ENV"))}
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-v"]
    res = subprocess.run(
        [*cmd, "-w", str(tmp_path / "dist"), str(src)], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr[-2000:]
    text = res.stdout + res.stderr
    assert "would be ignored" not in text and "BuildBackendWarning" not in text, text[-3000:]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    import zipfile

    shipped = {n for n in zipfile.ZipFile(wheel).namelist() if n.startswith("gsd/_data/example_logs/")}
    from gsd.resources import EXAMPLE_LOGS

    for name in EXAMPLE_LOGS:  # every example log `gsd example-logs` copies is in the wheel
        on_disk = ROOT / "data" / "example_logs" / name
        files = [on_disk] if on_disk.is_file() else [p for p in on_disk.rglob("*") if p.is_file()]
        assert files and all(f"gsd/_data/{p.relative_to(ROOT / 'data').as_posix()}" in shipped for p in files), name
