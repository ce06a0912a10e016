"""gsd inside a live TRL 1.16.0 run (tiny Qwen2, CPU): the tracker's groups equal what an
independent reward function recorded, gsd's figures reach TRL's log_history, the saved table reads
back through `gsd diagnose` to the same numbers, and skipping predicted-silent prompts lowers the
silent fraction without changing the batch."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("trl", reason="the tests against the real TRL need trl==1.16.0 (make install)")

from gsd import InputError  # noqa: E402
from gsd.cli import main  # noqa: E402
from gsd.diagnose.report import diagnosis_json  # noqa: E402
from gsd.integrations.trl_live import LIVE_METRICS, GroupTracker  # noqa: E402

from .real_trainers import trl_run  # noqa: E402

PROMPTS = [f"q{i} w1 w2" for i in range(8)]
P = [0.0, 1.0, 0.5, 0.2, 0.8, 0.0, 1.0, 0.5]


def _trainer():
    from gsd.integrations.trl_live import GSDGRPOTrainer

    return GSDGRPOTrainer


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each set-up trained once (a few seconds each)."""
    root = tmp_path_factory.mktemp("live")
    dup = list(PROMPTS)
    dup[3] = dup[2]
    out = {}
    # GRPOTrainer itself with wrapped reward functions, evaluating every other step.
    plain = GroupTracker(4)
    out["plain"] = (plain, trl_run(root / "plain", prompts=PROMPTS, p=P, wrap=plain.wrap, eval_strategy="steps",
                                   eval_steps=2, per_device_eval_batch_size=16))
    setups = {
        # One prompt text twice in the dataset, and each generation used by two optimizer steps.
        "duplicates": dict(prompts=dup, num_iterations=2, batch=32),
        "weights": dict(prompts=PROMPTS, second_reward=True, weights=(1.0, 0.5), logging_steps=2),
    }
    for name, kw in setups.items():
        # Graded totals (correct + 0.5*fmt): a threshold makes them right/wrong for the predictions.
        tracker = GroupTracker(4, threshold=1.0 if name == "weights" else None)
        out[name] = (tracker, trl_run(root / name, p=P, trainer_cls=_trainer(), trainer_kwargs={"gsd_tracker": tracker},
                                      **kw))
    return out


def steps_of(dx):
    return {int(r.step): (int(r.groups), float(r.silent_frac), int(r.wasted_rollouts)) for r in dx.steps.itertuples()}


@pytest.mark.parametrize("setup", ["plain", "duplicates", "weights"])
def test_every_group_once_and_exact(runs, setup):
    tracker, truth = runs[setup]
    want = truth.per_step()
    assert steps_of(tracker.diagnosis()) == want
    assert {m["step"]: m["silent_frac"] for m in tracker.metrics} == {s: v[1] for s, v in want.items()}
    if setup == "plain":
        assert sorted(want) == [1, 2, 3, 4]  # the evaluation calls at steps 2 and 4 are not groups
    if setup == "duplicates":
        assert sorted(want) == [1, 3]  # one generation per two optimizer steps, counted once
        # every generation holds the whole dataset: the repeated text is one prompt with two groups
        assert tracker.diagnosis().summary["prompts"] == 7 and tracker.diagnosis().summary["groups"] == 16
    if setup == "weights":
        assert tracker.weights == [1.0, 0.5] and tracker.diagnosis().summary["reward"] == "correct + 0.5*fmt"


@pytest.mark.parametrize("setup", ["duplicates", "weights"])
def test_metrics_in_log_history(runs, setup):
    tracker, truth = runs[setup]
    history = [e for e in truth.trainer.state.log_history if "train_runtime" not in e]
    with_reward = [e for e in history if "reward" in e]
    assert with_reward and all(("gsd/" + m in e) == ("reward" in e) for e in history for m in LIVE_METRICS)
    L = truth.trainer.args.logging_steps
    by_step = {m["step"]: m for m in tracker.metrics}
    for e in with_reward:
        window = [by_step[s] for s in range(e["step"] - L + 1, e["step"] + 1) if s in by_step]
        for name in LIVE_METRICS:  # TRL averages a metric over the generations of the logging window
            values = [m[name] for m in window if not np.isnan(m[name])]
            want = np.mean(values) if values else None  # TRL logs None when every value is NaN
            assert e["gsd/" + name] == (pytest.approx(want, rel=1e-12, abs=1e-12) if values else None)
        assert e["gsd/silent_pred"] is not None and e["gsd/fidelity"] is not None
        # TRL's own zero-std fraction is the measured silence.
        assert e["gsd/silent_frac"] == pytest.approx(e["frac_reward_zero_std"], abs=1e-7)
        assert e["gsd/skipped"] == 0


def test_saved_table_reads_back_to_the_diagnosis(runs, tmp_path, capsys):
    tracker, _ = runs["weights"]
    path = tracker.save(tmp_path / "run.parquet")
    assert main(["diagnose", "--no-progress", "--json", "--out", str(tmp_path / "dx"), str(path)]) == 0
    got = json.loads(capsys.readouterr().out)
    want = json.loads(json.dumps(diagnosis_json(tracker.diagnosis())))
    assert got["steps"] == want["steps"]
    got_s, want_s = dict(got["summary"]), dict(want["summary"])
    assert (got_s.pop("files"), want_s.pop("files")) == (1, 0)
    assert got_s == want_s and got_s["group_size"] == 4 and got_s["reward"] == "correct + 0.5*fmt"
    import pandas as pd

    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "dx" / "prompts.parquet"), tracker.diagnosis().prompts,
                                  check_exact=True)


def test_threshold_is_carried_by_the_saved_table(tmp_path, capsys):
    tracker = GroupTracker(2, threshold=0.5)
    [f] = tracker.wrap([lambda prompts, completions, **kw: [float(c) for c in completions]])
    for step in range(3):
        f(prompts=["a", "a", "b", "b"], completions=[0.9, 0.2 + step / 10, 0.7, 0.7])
    assert main(["diagnose", "--no-progress", "--json", str(tracker.save(tmp_path / "t.parquet"))]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["steps"] == json.loads(json.dumps(diagnosis_json(tracker.diagnosis())))["steps"]
    assert got["summary"]["rewards_as"] == "reward >= 0.5 counts as right"


@pytest.mark.parametrize("prompt_id", [None, "qid"])
def test_conversations_and_prompt_ids_read_back(tmp_path, capsys, prompt_id):
    """Chat prompts (the label is the last user message) or a dataset id column, with two
    conversations that share their last user message and one id given to two texts."""
    import pandas as pd

    chats = [[{"role": "system", "content": s}, {"role": "user", "content": "q1 w1"}] for s in ("w8", "w9")]
    chats.append([{"role": "user", "content": "q2 w2"}])
    qid = ["a", "a", "b"]
    tracker = GroupTracker(2, prompt_id=prompt_id, prior="uniform")
    [f] = tracker.wrap([lambda prompts, completions, **kw: [float(c) for c in completions]])
    rng = np.random.default_rng(0)
    for _ in range(4):
        rows = [j for j in rng.permutation(3) for _ in range(2)]
        f(prompts=[chats[j] for j in rows], completions=rng.integers(0, 2, len(rows)).tolist(),
          qid=[qid[j] for j in rows])
    path = tracker.save(tmp_path / "chat.parquet")
    assert main(["diagnose", "--no-progress", "--json", "--prior", "uniform", "--out", str(tmp_path / "dx"),
                 str(path)]) == 0
    got = json.loads(capsys.readouterr().out)
    dx = tracker.diagnosis()
    assert got["steps"] == json.loads(json.dumps(diagnosis_json(dx)))["steps"]
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "dx" / "prompts.parquet"), dx.prompts)
    want = ["a", "b"] if prompt_id else ["q1 w1", "q1 w1", "q2 w2"]
    assert sorted(dx.prompts["prompt"]) == want and dx.summary["groups"] == 12


@pytest.fixture(scope="module")
def skip_runs(tmp_path_factory):
    """Half the prompts never or always right, half right with probability 1/2; the same run with
    and without skipping."""
    root = tmp_path_factory.mktemp("skip")
    prompts = [f"q{i % 16} w{i // 16}" for i in range(32)]
    p = [0.0] * 8 + [1.0] * 8 + [0.5] * 16
    out = {}
    for name, kw in (("off", {}), ("on", {"skip_above": 0.9, "max_skips": 4})):
        tracker = GroupTracker(4)
        out[name] = (tracker, trl_run(root / name, prompts=prompts, p=p, batch=128, max_steps=8,
                                      trainer_cls=_trainer(), trainer_kwargs={"gsd_tracker": tracker, **kw}))
    return out


def _silent_after_first_visit(tracker):
    g = tracker.diagnosis().groups
    seen = g[g["n_before"] > 0]
    return float(seen["silent"].mean()), len(seen)


def test_skipping_lowers_the_silent_fraction(skip_runs):
    (t_off, _), (t_on, on) = skip_runs["off"], skip_runs["on"]
    frac_off, n_off = _silent_after_first_visit(t_off)
    frac_on, n_on = _silent_after_first_visit(t_on)
    counts = on.trainer.gsd_skip_counts
    s_off, s_on = t_off.diagnosis().summary, t_on.diagnosis().summary
    print(f"\nsilent fraction after the first visits: {frac_off:.3f} ({n_off} groups) without skipping, "
          f"{frac_on:.3f} ({n_on} groups) with skip_above=0.9, max_skips=4; {counts}; "
          f"{t_off.generations} and {t_on.generations} generations; wasted rollouts {s_off['wasted_rollouts']} and "
          f"{s_on['wasted_rollouts']} of {s_off['rollouts']} and {s_on['rollouts']}")
    assert frac_off - frac_on >= 0.15
    assert counts["generations"] == 8 and counts["skipped_prompts"] > 0
    assert counts["skipped_prompts"] == sum(m["skipped"] for m in t_on.metrics)
    assert counts["rollouts_saved"] == 4 * counts["skipped_prompts"]


def test_skipping_keeps_the_batch_and_every_prompt(skip_runs):
    tracker, truth = skip_runs["on"]
    sampler = truth.trainer.gsd_sampler
    gens = truth.generations()
    assert len(gens) == 8 and all(groups.shape == (32, 4) for _, groups in gens)  # the batch shape never changes
    prompts = [f"q{i % 16} w{i // 16}" for i in range(32)]
    # The prompts drawn for each batch are the ones the reward function saw at that generation
    # (the data loader draws one batch ahead: one more decision than generations).
    seen = [calls[1][::4] for calls in truth.calls["correct"]]
    drawn = [[prompts[i] for i in rows[~skip]] for rows, skip in sampler.decisions]
    assert len(drawn) >= len(seen) and drawn[:len(seen)] == seen
    # No prompt is skipped at more than max_skips of its turns in a row.
    turns = np.concatenate([rows for rows, _ in sampler.decisions])
    skipped = np.concatenate([skip for _, skip in sampler.decisions])
    for i in range(32):
        mine = skipped[turns == i].astype(int)
        runs_of_skips = np.diff(np.flatnonzero(np.r_[1, 1 - mine, 1])) - 1
        assert runs_of_skips.max() <= 4
    # gsd/skipped per generation sums to the prompts skipped for the batches generated.
    logged = [m["skipped"] for m in tracker.metrics]
    assert logged == [int(s.sum()) for _, s in sampler.decisions[:len(logged)]]
    assert sum(e.get("gsd/skipped", 0) for e in truth.trainer.state.log_history) == sum(logged)


def test_bad_arguments():
    with pytest.raises(InputError, match="num_generations"):
        GroupTracker(1)
    with pytest.raises(InputError, match="threshold"):
        GroupTracker(4, threshold=float("inf"))
    with pytest.raises(InputError, match="prior"):
        GroupTracker(4, prior="flat")
    with pytest.raises(InputError, match="weights"):
        GroupTracker(4, weights=[1.0, float("nan")])
    tracker = GroupTracker(4, weights=[1.0, 2.0])
    with pytest.raises(InputError, match="2 entries for 1 reward"):
        tracker.wrap([lambda **kw: []])
    with pytest.raises(InputError, match="reward model"):
        GroupTracker(4).wrap(["some/reward-model"])
    t3 = GroupTracker(3)
    [f] = t3.wrap([lambda prompts, completions, **kw: [0.0] * len(prompts)])
    with pytest.raises(InputError, match="not a multiple of num_generations=3"):
        f(prompts=["a"] * 4, completions=[""] * 4)
    t2 = GroupTracker(2, prompt_id="idx")
    [g] = t2.wrap([lambda prompts, completions, **kw: [0.0] * len(prompts)])
    with pytest.raises(InputError, match="prompt_id='idx' is not a dataset column"):
        g(prompts=["a"] * 2, completions=[""] * 2, p=[0.1, 0.1])
    with pytest.raises(InputError, match="no training generation"):
        GroupTracker(2).diagnosis()
    t4 = GroupTracker(2)
    [h] = t4.wrap([lambda prompts, completions, **kw: [0.0, 1.0]])
    h(prompts=["a", "a"], completions=["", ""])
    with pytest.raises(InputError, match=r"\.parquet"):
        t4.save("run.csv")
    from gsd.integrations.trl_live import GSDGRPOTrainer

    with pytest.raises(InputError, match="skip_above"):
        GSDGRPOTrainer(model=None, skip_above=1.5)


def test_docs_script_runs(tmp_path, monkeypatch, capsys):
    """The docs page's script, as written (in this process: TRL is imported once)."""
    import runpy
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "docs" / "examples" / "trl_live.py"
    monkeypatch.setattr("sys.argv", [str(script), str(tmp_path)])
    runpy.run_path(str(script), run_name="__main__")
    out = capsys.readouterr().out
    rows = [ln.split() for ln in out.splitlines() if ln[:4].strip().isdigit()]
    assert [int(r[0]) for r in rows] == list(range(1, 9))
    assert sum(int(r[-1]) for r in rows) > 0  # it skipped some of the never/always-right prompts
    assert main(["diagnose", "--no-progress", "--json", str(tmp_path / "run.parquet")]) == 0
    got = json.loads(capsys.readouterr().out)["summary"]
    assert f"silent fraction {got['silent_frac']:.3f}" in out and got["groups"] == 8 * 16


def _named(rewards):
    def graded(prompts, completions, **kw):
        return rewards
    return graded


@pytest.mark.parametrize("bad", [1 + 2j, 10**400, "0.5", [0.5]])
def test_rewards_trl_cannot_take_are_named(bad):
    """TRL's torch.tensor(rewards, dtype=float32) fails on these too; the tracker says which."""
    tracker = GroupTracker(2)
    [f] = tracker.wrap([_named([0.0, bad])])
    with pytest.raises(InputError, match=r"^reward function 'graded' returned .* at row 1"):
        f(prompts=["a", "a"], completions=["", ""])
    assert not tracker.metrics
    [g] = GroupTracker(2).wrap([_named(None)])
    with pytest.raises(InputError, match=r"^reward function 'graded' returned None, not one reward per completion"):
        g(prompts=["a", "a"], completions=["", ""])


def test_rewards_as_generator_none_and_beyond_float32():
    tracker = GroupTracker(2)
    [f] = tracker.wrap([lambda prompts, completions, **kw: (c for c in completions)])
    assert f(prompts=["a"] * 2, completions=[0.0, 1.0]) == [0.0, 1.0]  # the values, not an exhausted generator
    assert tracker.metrics[-1]["silent_frac"] == 0.0
    # a group with one scorable row and a group beyond float32 (inf in TRL): groups, not zero-std
    assert f(prompts=["a", "a", "b", "b"], completions=[None, 1.0, 1e39, 1e39]) == [None, 1.0, 1e39, 1e39]
    assert tracker.metrics[-1]["silent_frac"] == 0.0 and tracker.metrics[-1]["effective_ratio"] == 0.0
    f(prompts=["a", "a"], completions=[0.1 + 0.2, 0.3])  # equal once cast to float32, as TRL casts
    assert tracker.metrics[-1]["silent_frac"] == 1.0


def test_arguments_refused_before_training():
    with pytest.raises(InputError, match=r"^reward_funcs: 'org/reward-model' is a reward model"):
        GroupTracker(4).wrap("org/reward-model")
    with pytest.raises(InputError, match=r"^reward_funcs\[1\]: 'org/rm' is a reward model"):
        _trainer()(model=None, reward_funcs=[_named([]), "org/rm"])
    with pytest.raises(InputError, match=r"^epsilon must be one number in \(0, 1\), got \[0\.1, 0\.2\]"):
        GroupTracker(4, epsilon=[0.1, 0.2])
    with pytest.raises(InputError, match=r"^skip_above must be one number in \(0, 1\), got \[0\.5, 0\.9\]"):
        _trainer()(model=None, skip_above=[0.5, 0.9])
    with pytest.raises(InputError, match=r"^reward_funcs: two functions named '<lambda>'"):
        GroupTracker(4).wrap([lambda **kw: [], lambda **kw: []])


def test_recommended_group_size_is_the_diagnosis_median():
    """One definition (gsd.median_group_size over every prompt recorded so far): with a fixed
    prior the live figure after the last generation is gsd diagnose's median."""
    tracker = GroupTracker(4, prior="uniform")
    [f] = tracker.wrap([lambda prompts, completions, **kw: [float(c) for c in completions]])
    rng = np.random.default_rng(1)
    p = rng.beta(0.3, 0.3, 24)
    for step in range(6):  # each generation a different subset of the prompts, as with skipping
        rows = np.repeat(rng.permutation(24)[: 8 if step else 24], 4)
        f(prompts=[f"q{j}" for j in rows], completions=(rng.random(rows.size) < p[rows]).astype(int).tolist())
    live = tracker.metrics[-1]["recommended_group_size"]
    dx = tracker.diagnosis()
    assert np.isfinite(live) and live == dx.summary["median_group_size_recommended"]
    sizes = np.sort(np.where(dx.prompts["group_size"] > 0, dx.prompts["group_size"], np.inf))
    assert live == sizes[(sizes.size + 1) // 2 - 1]  # the lower median of the per-prompt table
