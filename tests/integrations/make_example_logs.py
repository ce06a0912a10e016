"""Write the example rollout logs shipped in ``data/example_logs/`` with each trainer's own code.

    PYTHONPATH=. python tests/integrations/make_example_logs.py            # from the checkout's root

Every log is written by the trainer's own writer, on the CPU, with the set-up of the project's
tests against the real trainers (``tests/integrations``): TRL's ``GRPOTrainer`` with
``log_completions=True`` (a tiny Qwen2 built in code, nothing downloaded), verl's default (V1)
trainer dumping through its real TransferQueue, and AReaL's ``WorkflowExecutor`` dumping with
``rollout.dump_to_file``.  Each reward is right with a probability fixed per prompt (``P``), drawn
by the reward function itself, so the solve rates are known.  ``PROVENANCE.md`` says what was
run, with which versions, and what each folder holds; this script rewrites the folders and the
table of solve rates in it.
"""

from __future__ import annotations

import datetime as _dt
import json
import shutil
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "data" / "example_logs"  # where the logs are written
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # gsd, and the tests' drivers of the real trainers

#: Eight prompts, two never solved, two always, four in between: silent and live groups every step.
PROMPTS = [f"q{i} w1 w2" for i in range(8)]
P = [0.0, 1.0, 0.5, 0.2, 0.8, 0.05, 0.95, 0.5]
STEPS = 4
G = 4


def trl(dest: Path) -> None:
    """TRL 1.16.0: 8 prompts × G = 4 per step, 4 steps; keeps completions/ and trainer_state.json."""
    import tempfile

    from integrations.real_trainers import trl_run

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "trl"
        truth = trl_run(out, prompts=PROMPTS, p=P, G=G, batch=len(PROMPTS) * G, max_steps=STEPS)
        shutil.copytree(out / "completions", dest / "completions")
        shutil.copy2(out / "trainer_state.json", dest / "trainer_state.json")
    # The same rollouts as a plain table: step, prompt id and reward, as the reward function returned them.
    rows = ["it,qid,r"]
    for step, prompts, rewards in truth.calls["correct"]:
        rows += [f"{step + 1},{PROMPTS.index(p)},{r:g}" for p, r in zip(prompts, rewards)]
    (dest.parent / "rollouts.csv").write_text("\n".join(rows) + "\n")


def verl_v1(dest: Path) -> None:
    """verl 0.9.1's default (V1) trainer: its TransferQueue and ``_log_rollout_data``, 8 prompts × n = 4, 4 steps."""
    from integrations.verl_v1 import VerlV1Run, start_transfer_queue

    stop = start_transfer_queue()
    try:
        run = VerlV1Run(dest / "rollout_data", n=G)
        for step in range(1, STEPS + 1):
            run.step(step, PROMPTS, P)
        run.close()
    finally:
        stop()


def areal(dest: Path) -> None:
    """AReaL 1.0.4's WorkflowExecutor with dump_to_file: 8 tasks × n_samples = 4 per version, versions 0-3."""
    import tempfile

    from integrations.other_trainers import ArealRun

    with tempfile.TemporaryDirectory() as tmp:
        run = ArealRun(Path(tmp), G=G)
        for version in range(STEPS):
            run.step(version, PROMPTS, P)
        run.close()
        shutil.copytree(run.log_dir / "rollout", dest / "rollout")


MAKERS = {"trl": trl, "verl": verl_v1, "areal": areal}
VERSIONS = ("trl", "transformers", "torch", "verl", "transferqueue", "ray", "areal")


def main(names=None) -> None:
    names = list(names or MAKERS)
    for name in names:
        dest = HERE / name
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir()
        MAKERS[name](dest)
    versions = {}
    for pkg in VERSIONS:
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = None
    record = {
        "date": _dt.date.today().isoformat(),
        "python": sys.version.split()[0],
        "versions": versions,
        "prompts": PROMPTS,
        "p": P,
        "steps": STEPS,
        "group_size": G,
        "made": names,
    }
    (HERE / "made.json").write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
