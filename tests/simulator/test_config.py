"""Bad configs fail fast with one ValueError naming the key and value; run folders guard themselves."""

from __future__ import annotations

import json
import os

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import gsd
from gsd.simulator import SimConfig, is_complete, read_ledger, run_simulation
from gsd.simulator.config import BOUNDS

BAD = [
    ({"foo": 1}, "'foo'"),
    ({"steps": 1.5}, "'steps' = 1.5"),
    ({"steps": "10"}, "'steps'"),
    ({"steps": 0}, "'steps' = 0"),
    ({"group_size": 1}, "'group_size' = 1"),
    ({"group_size": True}, "'group_size'"),
    ({"lr": 0}, "'lr' = 0"),
    ({"lr": -0.1}, "'lr' = -0.1"),
    ({"lr": float("inf")}, "'lr'"),
    ({"method": "ppo"}, "'method' = 'ppo'"),
    ({"device": "tpu"}, "'device' = 'tpu'"),
    ({"policy": "transformer"}, "'policy'"),
    ({"dtype": "float16"}, "'dtype'"),
    ({"optimizer": "rmsprop"}, "'optimizer'"),
    ({"ddof": 2}, "'ddof' = 2"),
    ({"eps": -1e-6}, "'eps'"),
    ({"max_draws": 0}, "'max_draws' = 0"),
    ({"verifier_noise": 0.5}, "'verifier_noise' = 0.5"),
    ({"p_min": 0.9, "p_max": 0.1}, "'p_min'"),
    ({"batch_size": 7000}, "'batch_size' = 7000"),
    ({"batch_size": -1}, "'batch_size'"),
    ({"difficulty": "file"}, "'difficulty_path'"),
    ({"difficulty": "beta", "beta_mixture": [[1, 0, 1]]}, "'beta_mixture'"),
    ({"clip": "yes"}, "'clip'"),
    ({"clip_low": 1.5}, "'clip_low'"),
    ({"ppo_epochs": 0}, "'ppo_epochs'"),
    ({"kl_coef": -1}, "'kl_coef'"),
]


@pytest.mark.parametrize("overrides, text", BAD, ids=[next(iter(o)) + str(i) for i, (o, _) in enumerate(BAD)])
def test_bad_config_is_one_clear_error(overrides, text):
    with pytest.raises(ValueError) as err:
        SimConfig().with_overrides(overrides)
    assert text in str(err.value)
    with pytest.raises(ValueError):
        SimConfig.from_dict({**SimConfig().to_dict(), **overrides})


def test_round_trips(tmp_path):
    cfg = SimConfig(method="dapo", lr=1, beta_mixture=[[1, 2, 3]])
    assert isinstance(cfg.lr, float) and cfg.lr == 1.0  # TOML ints are accepted for floats
    assert SimConfig.from_dict(cfg.to_dict()) == cfg
    assert cfg.with_overrides({"seed": 3}).seed == 3 and cfg.seed == 0
    toml = tmp_path / "c.toml"
    toml.write_text('method = "dr_grpo"\ngroup_size = 16\n')
    assert SimConfig.from_toml(toml) == SimConfig(method="dr_grpo", group_size=16)
    (tmp_path / "c.json").write_text(json.dumps(cfg.to_dict()))
    assert SimConfig.from_toml(tmp_path / "c.json") == cfg


def test_bad_files(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        SimConfig.from_toml(tmp_path / "nope.toml")
    (tmp_path / "bad.toml").write_text("lr = = 1\n")
    with pytest.raises(ValueError, match="not valid TOML"):
        SimConfig.from_toml(tmp_path / "bad.toml")
    (tmp_path / "unknown.toml").write_text("learning_rate = 0.1\n")
    with pytest.raises(ValueError, match="'learning_rate'"):
        SimConfig.from_toml(tmp_path / "unknown.toml")
    with pytest.raises(ValueError, match="campaign"):
        SimConfig.from_toml("paper_campaign")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_cuda_fails_before_any_work(tmp_path):
    with pytest.raises(ValueError, match="'device' = 'cuda'"):
        run_simulation(SimConfig(device="cuda", steps=1, n_prompts=10), tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


def test_population_errors_before_any_work(tmp_path):
    with pytest.raises(ValueError, match="'n_prompts' = 300000"):
        run_simulation(SimConfig(n_prompts=300_000, steps=1), tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


def test_run_folder_guards(tmp_path):
    cfg = SimConfig(n_prompts=200, steps=3, device="cpu")
    run = tmp_path / "run"
    summary = run_simulation(cfg, run, progress=False)
    assert is_complete(run) and summary["complete"] and summary["steps"] == 3
    assert set(os.listdir(run)) == {
        "config.json",
        "ledger.parquet",
        "checkpoint.npz",
        "summary.json",
    }  # the numpy engine's
    stamp = (run / "ledger.parquet").stat().st_mtime_ns
    assert run_simulation(cfg, run, progress=False) == summary  # finished: read back
    assert (run / "ledger.parquet").stat().st_mtime_ns == stamp
    with pytest.raises(ValueError, match=r"different config \(lr: 0.5 → 0.1\)"):
        run_simulation(cfg.with_overrides({"lr": 0.1}), run, progress=False)
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not a run folder"):
        run_simulation(cfg, other, progress=False)
    assert len(read_ledger(run)) == 3


# --------------------------------------------------------------------------- the schema's bounds
HUGE = [
    ({"g_max": 10**30, "allocation": "update"}, "'g_max' = 1000000000000000000000000000000: must lie in [1, 8,191]"),
    ({"max_draws": 10**21, "method": "dapo"}, "'max_draws' = 1000000000000000000000: must lie in [1, 1,000,000]"),
    ({"group_size": 100_000, "rollouts": "counts"}, "'group_size' = 100000: must lie in [2, 8,191]"),
    ({"steps": 2**62}, "'steps' = 4611686018427387904"),
    ({"ppo_epochs": 10**9}, "'ppo_epochs' = 1000000000"),
    ({"lr": 1e300}, "'lr' = 1e+300"),
    ({"g_max": 8000, "allocation": "update"}, "'g_max' = 8000: 6000 distinct prompts"),  # the allocator's table
]


@pytest.mark.parametrize("overrides, text", HUGE, ids=[next(iter(o)) for o, _ in HUGE])
def test_a_value_beyond_its_bound_names_key_value_and_bound_before_any_folder(tmp_path, overrides, text):
    with pytest.raises(ValueError) as err:
        run_simulation(SimConfig().with_overrides(overrides), tmp_path / "run", progress=False)
    assert text in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "run").exists()


def _values():
    ints = st.one_of(
        st.integers(-3, 10), st.integers(-(2**70), 2**70), st.sampled_from([2**53, 2**53 + 1, 2**63, 8191, 8192])
    )
    floats = st.floats(allow_nan=True, allow_infinity=True)
    return st.one_of(ints, floats, st.booleans(), st.text(max_size=4), st.none(), st.lists(st.integers(), max_size=2))


@given(key=st.sampled_from(sorted(BOUNDS)), value=_values())
@settings(max_examples=300, deadline=None)
def test_every_key_of_the_schema_accepts_within_bounds_and_names_itself_outside(key, value):
    try:
        cfg = SimConfig().with_overrides({key: value})
    except ValueError as exc:
        # the key itself, or (a relation between keys broken by this value) a message naming it beside the other
        assert isinstance(exc, gsd.InputError) and key in str(exc) and "\n" not in str(exc), str(exc)
        return
    lo, hi, _, *opened = BOUNDS[key]
    got = getattr(cfg, key)
    assert lo <= got <= hi and got == value and not isinstance(value, bool)
