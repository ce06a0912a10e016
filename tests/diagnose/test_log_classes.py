"""Classes of log faults the reader must undo or say: mixed formats, mixed types, huge steps,
weighted rewards, group columns, doubtful priors (fast, synthetic files)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gsd.cli import main
from gsd.diagnose import diagnose, read_rollouts
from gsd.diagnose.readers import parse_reward
from gsd.integrations import trl, verl


def _verl_rows(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_a_folder_with_both_formats_is_refused(tmp_path):
    verl.write_step(tmp_path / "rollout_data", 1, ["a"] * 4, [0, 1, 1, 0])
    trl.write_step(tmp_path / "out", 1, ["a"] * 4, {"r": [0, 1, 1, 0]})
    with pytest.raises(ValueError, match="holds TRL.* and verl"):
        read_rollouts(tmp_path)
    assert read_rollouts(tmp_path, fmt="verl").fmt == "verl"  # naming the format is enough


def test_one_trainer_in_two_run_folders_is_refused(tmp_path):
    for run in ("run1", "run2"):
        verl.write_step(tmp_path / run / "rollout_data", 1, ["a"] * 4, [0, 1, 1, 0])
    with pytest.raises(ValueError, match="in 2 folders .* never mixed"):
        read_rollouts(tmp_path)
    with pytest.raises(ValueError, match="step 1 is in two files"):
        read_rollouts([tmp_path / "run1" / "rollout_data", tmp_path / "run2" / "rollout_data"])


def test_booleans_and_numbers_mixed_in_a_score(tmp_path):
    rows = [{"input": "a", "score": s, "step": 1} for s in (True, False, 1, 0)]
    rows += [{"input": "b", "score": s, "step": 1} for s in ("True", "False", 0.0, 1.0)]
    _verl_rows(tmp_path / "1.jsonl", rows)
    log = read_rollouts(tmp_path)
    assert log.bad_count == 0 and log.rows == 8
    assert sorted(log.reward.tolist()) == [0.0] * 4 + [1.0] * 4


def test_huge_steps_stay_exact(tmp_path):
    big = 2**53
    df = pd.DataFrame({"prompt": ["a"] * 4 + ["b"] * 4, "reward": [1, 0] * 4, "step": [big + 1] * 4 + [big + 2] * 4})
    df.to_parquet(tmp_path / "log.parquet")
    log = read_rollouts(tmp_path / "log.parquet", reward="reward")
    assert sorted(set(log.step.tolist())) == [big + 1, big + 2]  # float64 would merge them
    df.astype({"step": str}).to_csv(tmp_path / "log.csv", index=False)
    assert sorted(set(read_rollouts(tmp_path / "log.csv", reward="reward").step.tolist())) == [big + 1, big + 2]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([-2.0, -0.5, 0.25, 1.0, 3.0]), st.sampled_from(["a", "b-c", "d_2"])),
        min_size=1,
        max_size=3,
        unique_by=lambda t: t[1],
    )
)
def test_reward_expressions_round_trip(terms):
    text = ""
    for i, (c, name) in enumerate(terms):
        sign = "-" if c < 0 else ("+" if i else "")
        text += f"{sign}{abs(c):g}*{name}" if abs(c) != 1 else f"{sign}{name}"
    assert parse_reward(text, ["a", "b-c", "d_2", "b"]) == [(float(c), n) for c, n in terms]


@pytest.mark.parametrize(
    "spec, match", [("a+", "cannot read|not found"), ("a+zz", "'zz' not found"), ("", "empty"), ("a*b", "not found")]
)
def test_bad_reward_expressions(spec, match):
    with pytest.raises(ValueError, match=match):
        parse_reward(spec, ["a", "b"])


def test_weighted_sum_against_direct(tmp_path):
    rng = np.random.default_rng(3)
    n = 64
    df = pd.DataFrame(
        {
            "prompt": np.repeat([f"p{i}" for i in range(8)], 8),
            "x": rng.integers(0, 2, n),
            "y": rng.integers(0, 2, n),
            "step": 1,
        }
    )
    df.to_csv(tmp_path / "t.csv", index=False)
    dx = diagnose(tmp_path / "t.csv", reward="x-0.5*y", threshold=0.5, progress=False)
    total = (df["x"] - 0.5 * df["y"]).to_numpy().reshape(8, 8)
    silent = total.max(axis=1) == total.min(axis=1)
    assert dx.steps["silent_groups"].tolist() == [int(silent.sum())]
    assert dx.steps["wasted_rollouts"].tolist() == [int(8 * silent.sum())]


def test_table_group_column_splits_a_prompt(tmp_path):
    df = pd.DataFrame({"prompt": ["a"] * 8, "gid": [1] * 4 + [2] * 4, "r": [1, 1, 1, 1, 1, 0, 1, 0], "step": 1})
    df.to_csv(tmp_path / "t.csv", index=False)
    merged = diagnose(tmp_path / "t.csv", reward="r", progress=False)
    split = diagnose(tmp_path / "t.csv", reward="r", group_col="gid", progress=False)
    assert merged.summary["groups"] == 1 and merged.summary["silent_frac"] == 0.0
    assert (
        split.summary["groups"] == 2 and split.summary["silent_frac"] == 0.5 and split.summary["wasted_rollouts"] == 4
    )


def test_trl_group_size_given_and_checked(tmp_path):
    prompts = ["a"] * 4 + ["b"] * 4
    trl.write_step(tmp_path, 1, prompts, {"r": [1, 0, 1, 1, 0, 0, 0, 0]})
    assert read_rollouts(tmp_path).group_size == 4
    assert np.bincount(read_rollouts(tmp_path, group_size=2).group).tolist() == [2, 2, 2, 2]
    with pytest.raises(ValueError, match="do not hold one prompt.*--group-size"):
        read_rollouts(tmp_path, group_size=8)
    with pytest.raises(ValueError, match="group_size must be at least 2"):
        read_rollouts(tmp_path, group_size=1)


def test_trainer_state_in_a_checkpoint_folder(tmp_path):
    for step in (1, 2):
        trl.write_step(tmp_path, step, ["a"] * 4 + ["b"] * 4, {"r": [step % 2, 0, 1, 1, 0, 0, 0, 0]})
    (tmp_path / "checkpoint-2").mkdir()
    state = {
        "global_step": 2,
        "log_history": [
            {"step": 1, "frac_reward_zero_std": 0.5},
            {"step": 2, "frac_reward_zero_std": 0.5, "eval_loss": 0.1},
        ],
    }
    (tmp_path / "checkpoint-2" / "trainer_state.json").write_text(json.dumps(state))
    dx = diagnose(tmp_path, progress=False)
    assert dx.summary["eval_steps"] == [2] and dx.steps["step"].tolist() == [1]
    assert dx.steps["trainer_silent_frac"].tolist() == [0.5]


def test_a_prior_at_its_bound_is_a_printed_warning(tmp_path, capsys):
    # Every prompt all right or all wrong, each seen once: the concentration runs to its bound.
    rows = [{"input": f"q{i}", "score": float(i % 2), "step": 1} for i in range(20) for _ in range(4)]
    _verl_rows(tmp_path / "1.jsonl", rows)
    dx = diagnose(tmp_path, progress=False)
    assert any("empirical-Bayes prior" in w for w in dx.summary["warnings"])
    assert main(["diagnose", "--no-progress", str(tmp_path)]) == 0
    assert "WARNING: the empirical-Bayes prior" in capsys.readouterr().out


def test_a_miscalibrated_run_suggests_a_half_life(tmp_path):
    # Prompts that flip from always wrong to always right: the posterior lags far behind.
    for step in range(1, 9):
        rows = [{"input": f"q{i}", "score": float(step > 4), "step": step} for i in range(30) for _ in range(8)]
        _verl_rows(tmp_path / f"{step}.jsonl", rows)
    dx = diagnose(tmp_path, prior="uniform", progress=False)
    assert any("--half-life" in w for w in dx.summary["warnings"]), dx.summary["warnings"]


def _direct_update(k, G, ddof, eps):
    """σ²/(σ_c + eps) from the rewards' own std, written out (not the package's term)."""
    k, G = np.asarray(k, float), np.asarray(G, float)
    var = k * (G - k) / G**2
    std_c = np.sqrt(var * G / (G - ddof))
    return np.where(var > 0, var / (std_c + eps), 0.0)


@pytest.mark.parametrize("fmt, want", [("verl", (1, 1e-6)), ("table", (0, 0.0))])
def test_update_follows_the_trainers_std_convention(tmp_path, fmt, want):
    from scipy.stats import betabinom

    rng = np.random.default_rng(5)
    rows = [
        {"input": f"q{i}", "score": float(rng.random() < 0.3 + 0.05 * i), "step": s}
        for s in (1, 2, 3)
        for i in range(10)
        for _ in range(6)
    ]
    name = "1.jsonl" if fmt == "verl" else "log.jsonl"
    _verl_rows(tmp_path / name, rows)
    kw = {} if fmt == "verl" else {"prompt_col": "input", "reward": "score"}
    dx = diagnose(tmp_path / name, progress=False, **kw)
    conv = dx.summary["update_convention"]
    assert (conv["ddof"], conv["eps"]) == want
    g = dx.groups
    np.testing.assert_allclose(g["sigma"], _direct_update(g["k"], g["G"], *want), rtol=1e-13, atol=0)
    ks = np.arange(7)
    pmf = betabinom.pmf(ks[None, :], g["G"].to_numpy()[:, None], g["a"].to_numpy()[:, None], g["b"].to_numpy()[:, None])
    direct = (pmf * _direct_update(ks[None, :], g["G"].to_numpy()[:, None], *want)).sum(axis=1)
    np.testing.assert_allclose(g["sigma_pred"], direct, rtol=1e-12)
    paper = diagnose(tmp_path / name, progress=False, ddof=0, eps=0.0, **kw)
    assert paper.summary["update_convention"] == {"ddof": 0, "eps": 0.0, "scale": "group", "from": "given"}
    np.testing.assert_allclose(paper.groups["sigma"], np.sqrt(g["k"] * (g["G"] - g["k"])) / g["G"], rtol=1e-15)
    with pytest.raises(ValueError, match="ddof must be 0 or 1"):
        diagnose(tmp_path / name, progress=False, ddof=2, **kw)
    # No division (verl's norm_adv_by_std_in_grpo=False, TRL's scale_rewards="none"): σ², and its
    # expectation E[k(G−k)]/G² under the posterior, summed directly.
    dr = diagnose(tmp_path / name, progress=False, scale="none", **kw)
    assert (
        dr.summary["update_convention"]["scale"] == "none" and "'none' given" in dr.summary["update_convention"]["from"]
    )
    Gs = g["G"].to_numpy()[:, None]
    np.testing.assert_allclose(dr.groups["sigma"], g["k"] * (g["G"] - g["k"]) / g["G"] ** 2, rtol=1e-13)
    np.testing.assert_allclose(
        dr.groups["sigma_pred"], (pmf * ks[None, :] * (Gs - ks[None, :]) / Gs**2).sum(axis=1), rtol=1e-12
    )
