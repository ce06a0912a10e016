"""A stand-in simulator with the API the sweep engine drives (SimConfig, run_simulation,
is_complete), cheap and controllable: each step sleeps ``step_s``, a checkpoint is written after
every step, and faults can be injected (raise at a step for the first N attempts, or kill the
process).  $FAKESIM_STEP_S adds a sleep per step without changing the config (or the run
names).  Every completion is appended to the file named by $FAKESIM_LOG, so tests can count
how many times each run finished, across processes."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SimConfig:
    name: str = "run"
    seed: int = 0
    steps: int = 3
    method: str = "grpo"
    group_size: int = 8
    lr: float = 0.5
    device: str = "cpu"
    step_s: float = 0.0
    fail_attempts: int = 0  # raise at fail_at_step on the first N attempts
    fail_at_step: int = 1
    crash: bool = False  # os._exit at fail_at_step on the first attempt (a dying worker)

    def __post_init__(self):
        if self.method not in ("grpo", "dr_grpo", "dapo"):
            raise ValueError(f"config key 'method' = {self.method!r}: must be grpo, dr_grpo or dapo")
        if self.group_size < 2:
            raise ValueError(f"config key 'group_size' = {self.group_size!r}: must be >= 2")

    def to_dict(self):
        return dataclasses.asdict(self)

    def with_overrides(self, overrides):
        known = {f.name for f in dataclasses.fields(self)}
        bad = sorted(set(overrides) - known)
        if bad:
            raise ValueError(f"unknown override key {bad[0]!r}")
        return SimConfig(**{**self.to_dict(), **overrides})

    @classmethod
    def from_toml(cls, path):
        import tomllib

        with open(path, "rb") as fh:
            return cls(**tomllib.load(fh))


def is_complete(out_dir) -> bool:
    return (Path(out_dir) / "summary.json").is_file()


def _write(path: Path, obj) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj))
    os.replace(tmp, path)


def run_simulation(config, out_dir, *, resume=False, progress=True):
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ckpt = out / "checkpoint.json"
    attempts_file = out / "attempts.txt"
    attempt = int(attempts_file.read_text()) + 1 if attempts_file.exists() else 1
    attempts_file.write_text(str(attempt))
    if (out / "config.json").exists() and not resume:
        raise ValueError(f"{out} already holds a run; pass resume=True")
    if (out / "config.json").exists():
        if json.loads((out / "config.json").read_text()) != config.to_dict():
            raise ValueError("config differs from the folder's")
    _write(out / "config.json", config.to_dict())
    state = json.loads(ckpt.read_text()) if (resume and ckpt.exists()) else {"step": 0, "value": float(config.seed)}
    rate = {"grpo": 1.0, "dr_grpo": 0.5, "dapo": 2.0}[config.method]
    while state["step"] < config.steps:
        step = state["step"] + 1
        if step == config.fail_at_step and attempt <= config.fail_attempts:
            raise RuntimeError(f"injected failure at step {step} (attempt {attempt})")
        if step == config.fail_at_step and config.crash and attempt == 1:
            os._exit(17)
        time.sleep(config.step_s + float(os.environ.get("FAKESIM_STEP_S", 0)))
        state = {"step": step, "value": state["value"] + rate * config.lr / config.group_size}
        _write(ckpt, state)
    summary = {
        "name": config.name,
        "final_value": state["value"],
        "steps": state["step"],
        "extra": {"rate": rate, "tags": [1, 2]},
    }
    _write(out / "summary.json", summary)
    log = os.environ.get("FAKESIM_LOG")
    if log:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(fd, (out.name + "\n").encode())
        os.close(fd)
    return summary
