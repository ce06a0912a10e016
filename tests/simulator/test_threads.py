"""The torch thread count of a CPU run: chosen for speed (one thread unless a large step and a
probe say more pay off), forced by ``threads``, recorded in the summary, kept on resume; the
ledger is identical for a given count."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

import gsd.simulator.engine as engine
from gsd import InputError
from gsd.simulator import SimConfig, read_ledger, run_simulation
from gsd.simulator.engine import SMALL_STEP, choose_threads, cpu_threads, threads_pay_off
from gsd.simulator.ledger import WALL_COLUMNS

CPU, META = torch.device("cpu"), torch.device("meta")


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_small_step_one_thread_without_probe(two_threads, monkeypatch):
    monkeypatch.setattr(engine, "threads_pay_off", lambda n: pytest.fail("a small step needs no probe"))
    assert choose_threads(CPU, SMALL_STEP - 1) == 1


@pytest.mark.parametrize("pays", [True, False])
def test_large_step_follows_the_probe(two_threads, monkeypatch, pays):
    asked = []
    monkeypatch.setattr(engine, "threads_pay_off", lambda n: asked.append(n) or pays)
    assert choose_threads(CPU, SMALL_STEP) == (2 if pays else 1)
    assert asked == [2]


def test_forced_and_device_counts(two_threads, monkeypatch):
    monkeypatch.setattr(engine, "threads_pay_off", lambda n: pytest.fail("a forced count needs no probe"))
    assert choose_threads(CPU, 10, threads=3) == 3
    assert choose_threads(CPU, 10**9, threads=1) == 1
    assert choose_threads(META, 10**9) == 2  # not a CPU run: torch's own count
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(InputError, match="threads"):
            choose_threads(CPU, 10, threads=bad)


def test_cpu_threads_sets_and_restores(two_threads):
    with cpu_threads(CPU, 10) as n:
        assert n == torch.get_num_threads() == 1
    with cpu_threads(CPU, 10, threads=2) as n:
        assert n == torch.get_num_threads() == 2
    assert torch.get_num_threads() == 2


def test_probe_leaves_the_random_state_and_thread_count(two_threads):
    rng = torch.get_rng_state()
    assert threads_pay_off(2, elements=1 << 12, rounds=1) in (True, False)
    assert torch.get_num_threads() == 2
    assert torch.equal(torch.get_rng_state(), rng)


_CFG = SimConfig(
    n_prompts=3000, steps=6, checkpoint_every=2, device="cpu", seed=4, rollouts="answers", group_size=32, engine="torch"
)  # threads are the torch engine's


def _killed_at(cfg, folder, step, threads):
    class Killed(Exception):
        pass

    def die(s):
        if s == step:
            raise Killed

    with pytest.raises(Killed):
        run_simulation(cfg, folder, progress=False, on_step=die, threads=threads)


def test_summary_records_threads_and_resume_keeps_them(tmp_path):
    """Two threads forced: the summary says 2, a resume without --threads goes on with the
    checkpoint's 2, and the ledger equals the uninterrupted two-thread run's."""
    whole = run_simulation(_CFG, tmp_path / "whole", progress=False, threads=2)
    assert whole["threads"] == 2
    _killed_at(_CFG, tmp_path / "cut", 2, threads=2)
    resumed = run_simulation(_CFG, tmp_path / "cut", resume=True, progress=False)
    assert resumed["threads"] == 2
    a = read_ledger(tmp_path / "whole").drop(columns=list(WALL_COLUMNS))
    b = read_ledger(tmp_path / "cut").drop(columns=list(WALL_COLUMNS))
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    one = run_simulation(_CFG, tmp_path / "one", progress=False)  # the default here: one thread
    assert one["threads"] == 1
