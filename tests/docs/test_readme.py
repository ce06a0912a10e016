"""Every code block of README.md runs as pasted, and so does every block of the docs pages that
carry what README used to (the tour, the allocation comparison).

README's shell lines run in order in an empty temporary folder, as from a fresh clone: what a
line reads, an earlier line wrote (``gsd example-logs examples`` first). The docs pages' lines run
in order in a second folder (a later line may use what an earlier one wrote, as the resume line
does), with the small input files they name made first by :data:`MAKERS`.
Not run here, each with its reason in :data:`NOT_RUN`: the two ``make`` lines (``make test`` is
this suite, ``make reproduce`` is ``gsd reproduce``, tests/reproduce; the test checks that the
Makefile has both targets) and the install lines (they reach the registry;
tests/packaging/test_wheel.py builds the checkout's wheel and installs it, with and without
torch).  Each Python block runs alone, saved as a file, in a fresh interpreter, so it defines
every name it uses; README's blocks must print something.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
#: The pages whose code blocks run: README and the docs pages that took its tour and its verdict.
PAGES = (README, ROOT / "docs" / "tour.md", ROOT / "docs" / "allocation_comparison.md")

pytestmark = pytest.mark.slow

_INSTALL = "reaches the registry; tests/packaging/test_wheel.py installs the checkout's wheel"
#: Lines not run, with the reason.
NOT_RUN = {
    "make reproduce": "gsd reproduce, tested in tests/reproduce",
    "make test": "this test suite",
    "pip install .": _INSTALL,
    "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu": _INSTALL,
    "pip install '.[torch]'": _INSTALL,
}
#: Lines run at a smaller size, the only change to what is typed: the paper-scale allocation
#: comparison takes over an hour; its shipped small campaign (what gsd reproduce runs) the same code.
#: The default checks run one variant of the small check (the summary waits for the others): the
#: first prefix that matches applies.
SCALED_DOWN = {
    "gsd allocation-comparison --config allocation_default_check_large ": " --config allocation_default_check --variant narrow",
    "gsd allocation-comparison --config allocation_default_check ": " --variant u_shaped",
    "gsd allocation-comparison ": " --config allocation_comparison_small",
}


def readme_shell_lines(text: str) -> list[str]:
    """The commands of the ```bash blocks, in order (blank and comment-only lines left out)."""
    lines = []
    for block in re.findall(r"^```(?:bash|sh|console|shell)\n(.*?)^```", text, flags=re.S | re.M):
        lines += [ln.strip() for ln in block.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    return lines


def _command(line: str) -> str:
    return line.split(" #", 1)[0].strip()


def pages_text() -> str:
    return "\n".join(page.read_text() for page in PAGES)


def python_blocks(text: str) -> list[str]:
    """The ```python blocks, as written."""
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


# --------------------------------------------------------------------------- input files
def _rates(path: Path, rng) -> None:
    import pandas as pd

    pd.DataFrame({"llama8b_solve_rate": rng.beta(0.6, 0.6, 300)}).to_parquet(path)


def _counts(path: Path, rng) -> None:
    import pandas as pd

    n = np.full(200, 8)
    pd.DataFrame(
        {"prompt": [f"q{i}" for i in range(200)], "right": rng.binomial(n, rng.beta(0.6, 0.6, 200)), "rollouts": n}
    ).to_csv(path, index=False)


def _rollouts_jsonl(path: Path, rng) -> None:
    import pandas as pd

    p = rng.beta(0.6, 0.6, 100)
    frame = pd.DataFrame(
        {"prompt_id": np.repeat(np.arange(100), 8), "reward": (rng.random(800) < np.repeat(p, 8)).astype(float)}
    )
    frame.to_json(path, orient="records", lines=True)


def _groups(rng, steps=3, prompts=40, G=8):
    """(step, prompt index, right/wrong) of a small run whose prompts get easier."""
    p = rng.beta(0.6, 0.6, prompts)
    for step in range(1, steps + 1):
        p = np.clip(p + 0.05, 0.0, 1.0)
        yield step, np.repeat(np.arange(prompts), G), (rng.random(prompts * G) < np.repeat(p, G)).astype(float)


def _verl_dumps(folder: Path, rng) -> None:
    from gsd.integrations.verl import write_step

    for step, prompt, right in _groups(rng):
        write_step(folder, step, [f"question {j}" for j in prompt], right, extra={"acc": right, "index": prompt})
    for step, prompt, right in _groups(rng, steps=2):  # a validation dump beside the training one
        write_step(folder.parent / "validation_data", step, [f"question {j}" for j in prompt], right)


def _trl_completions(folder: Path, rng) -> None:
    from gsd.integrations.trl import write_step

    for step, prompt, right in _groups(rng):
        fmt = (rng.random(right.size) < 0.9).astype(float)
        write_step(folder, step, [f"question {j}" for j in prompt], {"accuracy_reward": right, "format_reward": fmt})


def _table_log(path: Path, rng) -> None:
    import pandas as pd

    rows = [pd.DataFrame({"qid": prompt, "r": right, "it": step}) for step, prompt, right in _groups(rng)]
    pd.concat(rows).to_csv(path, index=False)


def _curve(path: Path, rng) -> None:
    from gsd.reproduce import dapo_fit

    dapo_fit.synthetic_curve()[["step", "fraction"]].to_csv(path, index=False)


def _simulations(folder: Path, rng) -> None:
    shutil.copytree(
        ROOT / "simulations", folder, ignore=shutil.ignore_patterns("__pycache__", "__init__.py"), dirs_exist_ok=True
    )


#: The input files README's lines name, relative to the folder the lines run in → maker.
MAKERS = {
    "rates.parquet": _rates,
    "counts.csv": _counts,
    "rollouts.jsonl": _rollouts_jsonl,
    "runs/my_verl/rollout_data": _verl_dumps,
    "out/completions": lambda folder, rng: _trl_completions(folder.parent, rng),
    "log.csv": _table_log,
    "curve.csv": _curve,
    "simulations/paper_campaign.toml": lambda path, rng: _simulations(path.parent, rng),
}


def test_readme_lines_are_found():
    lines = readme_shell_lines(pages_text())
    commands = [_command(ln) for ln in lines]
    assert set(NOT_RUN) <= set(commands)
    readme = [_command(ln) for ln in readme_shell_lines(README.read_text())]
    assert readme[readme.index("make reproduce") :][:2] == ["make reproduce", "make test"]  # README's two commands
    makefile = (ROOT / "Makefile").read_text()
    assert all(re.search(rf"^{cmd.split()[1]}:", makefile, flags=re.M) for cmd in NOT_RUN)
    assert sum(c.startswith("gsd ") for c in commands) >= 20
    for name in MAKERS:  # every input made here is one a line names (no stale makers)
        assert any(name in c for c in commands), f"no README line names {name}"
    assert readme[0].startswith("gsd example-logs "), "README's first line makes the files the others read"
    assert not [c for c in commands if re.search(r"\[--|\.\.\.|\bFILE\b|\bDIR\b", c)], "placeholders are not runnable"


#: Lines that run in a folder of their own, beside the others (two processes at once): the
#: allocation comparison's lines need no input file and share nothing with the rest, and they are
#: a third of the time; in order among themselves (the --variant lines continue the first).
OWN_FOLDER = "gsd allocation-comparison "


def test_every_readme_line_runs_as_typed(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(0)
    main, own, fresh = tmp_path / "main", tmp_path / "allocation", tmp_path / "readme"
    own.mkdir()
    fresh.mkdir()
    for name, make in MAKERS.items():
        path = main / name
        path.parent.mkdir(parents=True, exist_ok=True)
        make(path, rng)
    bin_dir = Path(sys.executable).parent
    if not (bin_dir / "gsd").is_file():
        pytest.skip("no gsd script beside this interpreter")
    env = _env(bin_dir)
    lanes: dict[Path, list[str]] = {main: [], own: [], fresh: []}
    readme = set(readme_shell_lines(README.read_text()))
    for line in readme_shell_lines(README.read_text()) + readme_shell_lines(pages_text()[len(README.read_text()) :]):
        if _command(line) in NOT_RUN:
            continue
        for start, extra in SCALED_DOWN.items():
            if line.startswith(start):
                line = _command(line) + extra
                break
        lane = own if line.startswith(OWN_FOLDER) else fresh if line in readme else main
        if line not in lanes[lane]:
            lanes[lane].append(line)
    assert len(lanes[own]) >= 3 and len(lanes[main]) >= 20 and len(lanes[fresh]) >= 10

    def run_lane(folder: Path) -> list[str]:
        failures = []
        for line in lanes[folder]:
            res = subprocess.run(["bash", "-c", line], cwd=folder, env=env, capture_output=True, text=True, timeout=600)
            if res.returncode != 0:
                failures.append(f"$ {line}\n  exit {res.returncode}: {(res.stderr or res.stdout).strip()[-600:]}")
        return failures

    with ThreadPoolExecutor(max_workers=3) as pool:
        failures = [f for lane in pool.map(run_lane, lanes) for f in lane]
    assert not failures, "README lines that fail as typed:\n" + "\n".join(failures)


def _env(bin_dir: Path) -> dict:
    """No GSD_ settings of this process; gsd imported from this checkout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GSD_", "PYTHON"))}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", MPLBACKEND="Agg", PYTHONPATH=str(ROOT))
    return env


def test_python_blocks_are_found():
    readme = python_blocks(README.read_text())
    assert len(readme) >= 2 and len(python_blocks(pages_text())) > len(readme)


@pytest.mark.parametrize("page", PAGES[:2], ids=[p.name for p in PAGES[:2]])
def test_every_python_block_runs_alone(tmp_path, page):
    failures = []
    for i, block in enumerate(python_blocks(page.read_text())):
        script = tmp_path / f"block_{i + 1}.py"
        script.write_text(block)
        res = subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path,
            env=_env(Path(sys.executable).parent),
            capture_output=True,
            text=True,
            timeout=300,
        )
        if res.returncode != 0:
            failures.append(f"block {i + 1}:\n{block}\n  exit {res.returncode}: {res.stderr.strip()[-800:]}")
        elif page == README and not res.stdout.strip():
            failures.append(f"block {i + 1}:\n{block}\n  printed nothing, run as a file")
    assert not failures, f"{page.name}: Python blocks that fail as pasted:\n" + "\n".join(failures)
