"""The Ray backend: through its interface with a stand-in ``ray`` module, and on a real local
Ray instance when Ray is installed (``pytest -m ray``)."""

from __future__ import annotations

import builtins
import json
import os
import sys
import types

import pandas as pd
import pytest
from sweep_helpers import FAKE, HERE, completions, write_grid

from gsd.cli import main
from gsd.sweep import RAY_INSTALL_HINT, run_sweep

GRID = """
[base]
steps = 2
[grid]
device = ["cpu", "cuda"]
seed = [0, 1]
"""


class _Ref:
    def __init__(self, value=None, error=None):
        self.value, self.error = value, error


class FakeRay(types.ModuleType):
    """Just enough of Ray's API: tasks run at once, in this process."""

    def __init__(self, resources=None):
        super().__init__("ray")
        self.resources = resources or {"CPU": 4.0, "GPU": 1.0}
        self.initialized = False
        self.init_calls, self.options_seen, self.shutdowns = [], [], 0

    def is_initialized(self):
        return self.initialized

    def init(self, **kwargs):
        self.init_calls.append(kwargs)
        self.initialized = True

    def shutdown(self):
        self.shutdowns += 1
        self.initialized = False

    def cluster_resources(self):
        return dict(self.resources)

    def remote(self, fn):
        fake = self

        class Remote:
            def options(self, **opts):
                fake.options_seen.append(opts)

                class Bound:
                    @staticmethod
                    def remote(*args):
                        try:
                            return _Ref(value=fn(*args))
                        except Exception as exc:  # noqa: BLE001
                            return _Ref(error=exc)

                return Bound()

        return Remote()

    def wait(self, refs, num_returns=1):
        return list(refs[:num_returns]), list(refs[num_returns:])

    def get(self, ref):
        if ref.error is not None:
            raise RuntimeError(f"task failed: {ref.error}")
        return ref.value


@pytest.fixture
def fake_ray(monkeypatch):
    fake = FakeRay()
    monkeypatch.setitem(sys.modules, "ray", fake)
    return fake


def test_ray_tasks_declare_cpus_and_gpus(tmp_path, fake_ray, fakesim_log):
    grid = write_grid(tmp_path / "g.toml", GRID)
    res = run_sweep(grid, tmp_path / "sw", backend="ray", workers=3, simulator=FAKE, progress=False)
    assert res.ok and len(res.ran) == 4 and res.backend == "ray"
    assert fake_ray.init_calls[0]["num_cpus"] == 3 and "address" not in fake_ray.init_calls[0]
    assert fake_ray.shutdowns == 1
    gpus = sorted(o["num_gpus"] for o in fake_ray.options_seen)
    assert gpus == [0, 0, 1, 1] and all(o["num_cpus"] == 1 and o["max_retries"] == 0 for o in fake_ray.options_seen)
    assert all(o["name"].startswith("gsd-sweep:") for o in fake_ray.options_seen)
    assert len(completions(fakesim_log)) == 4


def test_ray_joins_a_cluster_by_address_and_leaves_it_up(tmp_path, fake_ray, fakesim_log):
    grid = write_grid(tmp_path / "g.toml", GRID)
    run_sweep(grid, tmp_path / "sw", backend="ray", address="ray://head:10001", simulator=FAKE, progress=False)
    assert fake_ray.init_calls[0]["address"] == "ray://head:10001" and "num_cpus" not in fake_ray.init_calls[0]
    fake_ray.initialized = True  # an instance the caller started is used and left running
    fake_ray.init_calls.clear()
    run_sweep(grid, tmp_path / "sw2", backend="ray", simulator=FAKE, progress=False)
    assert fake_ray.init_calls == [] and fake_ray.shutdowns == 1


def test_ray_refuses_runs_the_cluster_cannot_place(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", FakeRay({"CPU": 2.0}))
    grid = write_grid(tmp_path / "g.toml", GRID)
    with pytest.raises(ValueError, match="GPU"):
        run_sweep(grid, tmp_path / "sw", backend="ray", simulator=FAKE, progress=False)


def test_ray_task_errors_are_retried(tmp_path, fake_ray, fakesim_log):
    grid = write_grid(tmp_path / "g.toml", "[base]\nsteps = 3\nfail_at_step = 2\n[grid]\nfail_attempts = [1, 9]\n")
    res = run_sweep(grid, tmp_path / "sw", backend="ray", max_retries=1, simulator=FAKE, progress=False)
    table = res.table.set_index("fail_attempts")
    assert table["status"].to_dict() == {1: "complete", 9: "failed"}
    assert "injected failure" in next(iter(res.failed.values()))


def test_missing_ray_says_how_to_install(tmp_path, monkeypatch, capsys):
    real_import = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "ray", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_ray)
    grid = write_grid(tmp_path / "g.toml", GRID)
    with pytest.raises(ValueError, match=r"pip install ray"):
        run_sweep(grid, tmp_path / "sw", backend="ray", simulator=FAKE)
    assert (
        main(["sweep", "--grid", str(grid), "--out", str(tmp_path / "o"), "--backend", "ray", "--simulator", FAKE]) == 2
    )
    assert RAY_INSTALL_HINT in capsys.readouterr().err


@pytest.mark.ray
def test_real_ray_sweep_matches_the_local_backend(tmp_path, fakesim_log):
    ray = pytest.importorskip("ray")
    grid = write_grid(tmp_path / "g.toml", '[base]\nsteps = 3\n[grid]\nmethod = ["grpo", "dapo"]\nseed = [0, 1]\n')
    assert not ray.is_initialized()
    # Ray workers do not inherit the driver's sys.path: ship the stand-in simulator's folder.
    env = {"env_vars": {"PYTHONPATH": str(HERE), "FAKESIM_LOG": str(fakesim_log)}}
    res = run_sweep(
        grid,
        tmp_path / "ray",
        backend="ray",
        workers=2,
        simulator=FAKE,
        progress=False,
        backend_options={"runtime_env": env, "init_kwargs": {"object_store_memory": 80 * 1024**2}},
    )
    assert not ray.is_initialized()  # the instance the sweep started is shut down
    assert res.ok and len(res.ran) == 4 and res.workers == 2
    assert sorted(completions(fakesim_log)) == sorted(res.table["run"])
    events = [json.loads(line) for line in (tmp_path / "ray" / "events.jsonl").read_text().splitlines()]
    assert {e["pid"] for e in events} and os.getpid() not in {e["pid"] for e in events}
    local = run_sweep(grid, tmp_path / "local", backend="serial", simulator=FAKE, progress=False)
    pd.testing.assert_frame_equal(res.table, local.table)
