"""A checkpoint is verified whole before any step: a damaged or foreign one is one line naming the
file and what is wrong with it, for either engine, and nothing of the run folder changes."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import gsd
from gsd.simulator import SimConfig, is_complete, run_simulation

BASE = dict(n_prompts=40, steps=4, checkpoint_every=2, device="cpu")
CONFIGS = {
    "numpy-adam": SimConfig(**BASE, engine="numpy", optimizer="adam", lr=0.05),
    "numpy-momentum": SimConfig(**BASE, engine="numpy", momentum=0.9),
    "torch-adam": SimConfig(**BASE, engine="torch", optimizer="adam", lr=0.05),
    "torch-momentum": SimConfig(**BASE, engine="torch", momentum=0.9),
}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished run folder per config and seed 0 / 1 (made once; each test copies one)."""
    root = tmp_path_factory.mktemp("finished")
    out = {}
    for name, cfg in CONFIGS.items():
        for seed in (0, 1):
            folder = root / f"{name}-{seed}"
            run_simulation(cfg.with_overrides({"seed": seed}), folder, progress=False)
            out[name, seed] = folder
    return out


def _unfinished(finished, tmp_path, name, seed=0):
    run = tmp_path / "run"
    shutil.copytree(finished[name, seed], run)
    (run / "summary.json").unlink()
    return run


def _edit_npz(path, change):
    with np.load(path, allow_pickle=False) as f:
        ckpt = {k: f[k] for k in f.files}
    change(ckpt)
    np.savez(path, **ckpt)


def _edit_pt(path, change):
    import torch

    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    change(ckpt)
    torch.save(ckpt, path)


def _set(key, value):
    def change(ckpt):
        ckpt[key] = value(ckpt[key]) if callable(value) else value

    return change


def _poke(key, index, value):
    def change(ckpt):
        a = ckpt[key].copy()
        a[index] = value
        ckpt[key] = a

    return change


NUMPY_CASES = {
    "z as float32": ("numpy-adam", _set("z", lambda z: z.astype(np.float32)), "'z' is float32"),
    "z_ref as int64": ("numpy-adam", _set("z_ref", lambda z: z.astype(np.int64)), "'z_ref' is int64"),
    "ledger as float16": ("numpy-adam", _set("ledger", lambda a: a.astype(np.float16)), "'ledger' is float16"),
    "z holding +inf": ("numpy-adam", _poke("z", 3, np.inf), "'z' holds inf"),
    "z holding -inf": ("numpy-adam", _poke("z", 0, -np.inf), "'z' holds -inf"),
    "z holding NaN": ("numpy-adam", _poke("z", 5, np.nan), "'z' holds nan"),
    "z_ref of another population": ("numpy-adam", _poke("z_ref", 1, 0.25), "initial logits"),
    "negative Adam step": ("numpy-adam", _set("opt_steps", np.int64(-1)), "Adam step count -1"),
    "Adam step count off": ("numpy-adam", _set("opt_steps", np.int64(3)), "Adam step count 3"),
    "negative second moment": ("numpy-adam", _poke("opt_exp_avg_sq", 2, -1e-3), "negative"),
    "first moment of another shape": ("numpy-adam", _set("opt_exp_avg", lambda a: a[:-1]), "'opt_exp_avg' has shape"),
    "momentum buffer of another shape": (
        "numpy-momentum",
        _set("opt_buffer", lambda a: np.zeros((2, a.size))),
        "'opt_buffer' has shape",
    ),
    "no momentum buffer": ("numpy-momentum", lambda c: c.pop("opt_buffer"), "no momentum buffer"),
    "no run identity (an older gsd)": ("numpy-adam", lambda c: c.pop("run"), "does not name the run"),
    "identity of another config": (
        "numpy-adam",
        _set("run", lambda r: np.str_(json.dumps({**json.loads(str(r)), "config": "x"}))),
        "config fingerprint",
    ),
    "ledger steps reordered": ("numpy-adam", _set("ledger", lambda a: a[::-1].copy()), "ledger's steps"),
    "step beyond the run": ("numpy-adam", _set("step", np.int64(99)), "step 99"),
}


TORCH_CASES = {
    "z as float32": ("torch-adam", lambda c: c["policy"].update(z=c["policy"]["z"].float()), "'policy.z' is float32"),
    "z holding NaN": ("torch-adam", lambda c: c["policy"]["z"].__setitem__(2, float("nan")), "'policy.z' holds nan"),
    "z holding +inf": ("torch-adam", lambda c: c["policy"]["z"].__setitem__(0, float("inf")), "'policy.z' holds inf"),
    "a policy of another size": (
        "torch-adam",
        lambda c: c["policy"].update(z=c["policy"]["z"][:-3].clone()),
        "'policy.z' has shape (37,)",
    ),
    "a 10-byte generator state": ("torch-adam", _set("rng_rollouts", lambda s: s[:10].clone()), "random state"),
    "a 10-byte cpu generator state": ("torch-adam", _set("rng_torch_cpu", lambda s: s[:10].clone()), "random state"),
    "negative Adam step": ("torch-adam", lambda c: c["optimizer"].update(steps=[-1]), "Adam step count -1"),
    "negative second moment": (
        "torch-adam",
        lambda c: c["optimizer"]["exp_avg_sq"][0].__setitem__(1, -1.0),
        "negative",
    ),
    "momentum buffer of another shape": (
        "torch-momentum",
        lambda c: c["optimizer"].update(buffers=[c["optimizer"]["buffers"][0][:5]]),
        "'optimizer.buffers[0]' has shape",
    ),
    "ledger as float32": ("torch-adam", _set("ledger", lambda t: t.float()), "'ledger' is float32"),
    "no run identity (an older gsd)": ("torch-adam", lambda c: c.pop("run"), "does not name the run"),
    "z_ref of another population": ("torch-adam", lambda c: c["z_ref"].__setitem__(0, 0.125), "initial logits"),
    "a thread count of -5": ("torch-adam", _set("threads", -5), "thread count -5"),
}


CASES = {**{("numpy", k): v for k, v in NUMPY_CASES.items()}, **{("torch", k): v for k, v in TORCH_CASES.items()}}


@pytest.mark.parametrize("engine, case", list(CASES), ids=[f"{e}: {c}" for e, c in CASES])
def test_a_damaged_checkpoint_is_one_line_before_any_step(finished, tmp_path, engine, case):
    name, change, words = CASES[engine, case]
    file = "checkpoint.npz" if engine == "numpy" else "checkpoint.pt"
    run = _unfinished(finished, tmp_path, name)
    (_edit_npz if engine == "numpy" else _edit_pt)(run / file, change)
    before = (run / "ledger.parquet").read_bytes()
    with pytest.raises(gsd.InputError) as err:
        run_simulation(CONFIGS[name], run, resume=True, progress=False)
    message = str(err.value)
    assert file in message and words in message and "\n" not in message, message
    assert not is_complete(run) and (run / "ledger.parquet").read_bytes() == before


@pytest.mark.parametrize("name", ["numpy-adam", "torch-adam"])
def test_a_checkpoint_copied_from_another_seeds_run_is_refused(finished, tmp_path, name):
    run = _unfinished(finished, tmp_path, name, seed=0)
    file = "checkpoint.npz" if name.startswith("numpy") else "checkpoint.pt"
    shutil.copy(finished[name, 1] / file, run / file)  # same shapes, same dtypes: only its identity tells
    with pytest.raises(gsd.InputError, match=rf"{file}' belongs to another run \(its seed is 1, this run's 0\)"):
        run_simulation(CONFIGS[name], run, resume=True, progress=False)


def test_the_advice_to_resume_on_the_other_engine_works(finished, tmp_path):
    """A folder whose config says engine = auto holds the torch engine's checkpoint (it ran where auto
    meant torch): resuming where auto means numpy names the engine, and --set engine=torch continues it."""
    run = _unfinished(finished, tmp_path, "torch-adam")
    saved = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**saved, "engine": "auto"}))
    auto = CONFIGS["torch-adam"].with_overrides({"engine": "auto"})
    with pytest.raises(gsd.InputError, match="resume with --set engine=torch"):
        run_simulation(auto, run, resume=True, progress=False)
    summary = run_simulation(CONFIGS["torch-adam"], run, resume=True, progress=False)
    assert is_complete(run) and summary["steps"] == BASE["steps"]
