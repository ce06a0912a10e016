"""gsd inside a live TRL 1.16.0 run (tiny Qwen2, CPU): the tracker's groups equal what an
independent reward function recorded, gsd's figures reach TRL's log_history, the saved table reads
back through `gsd diagnose` to the same numbers, and skipping predicted-silent prompts lowers the
silent fraction without changing the batch."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

pytest.importorskip("trl", reason="the tests against the real TRL need trl==1.16.0 (make install)")

from gsd import InputError  # noqa: E402
from gsd.cli import main  # noqa: E402
from gsd.diagnose.report import diagnosis_json  # noqa: E402
from gsd.live import LIVE_METRICS, GroupTracker  # noqa: E402

from .real_trainers import trl_run  # noqa: E402

PROMPTS = [f"q{i} w1 w2" for i in range(8)]
P = [0.0, 1.0, 0.5, 0.2, 0.8, 0.0, 1.0, 0.5]


def _trainer():
    from gsd.live import GSDGRPOTrainer

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
    out["plain"] = (
        plain,
        trl_run(
            root / "plain",
            prompts=PROMPTS,
            p=P,
            wrap=plain.wrap,
            eval_strategy="steps",
            eval_steps=2,
            per_device_eval_batch_size=16,
        ),
    )
    setups = {
        # One prompt text twice in the dataset, and each generation used by two optimizer steps.
        "duplicates": dict(prompts=dup, num_iterations=2, batch=32),
        "weights": dict(prompts=PROMPTS, second_reward=True, weights=(1.0, 0.5), logging_steps=2),
    }
    for name, kw in setups.items():
        # Graded totals (correct + 0.5*fmt): a threshold makes them right/wrong for the predictions.
        tracker = GroupTracker(4, threshold=1.0 if name == "weights" else None)
        out[name] = (
            tracker,
            trl_run(root / name, p=P, trainer_cls=_trainer(), trainer_kwargs={"gsd_tracker": tracker}, **kw),
        )
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

    pd.testing.assert_frame_equal(
        pd.read_parquet(tmp_path / "dx" / "prompts.parquet"), tracker.diagnosis().prompts, check_exact=True
    )


@pytest.mark.parametrize("setup", ["plain", "duplicates", "weights"])
def test_saved_table_streamed_equals_the_whole_log(runs, tmp_path, setup):
    """A table saved by the tracker (its own verdict column, group column and threshold) is
    counted piece by piece, never whole: field by field the whole-log reader's answer."""
    from diagnose.test_counts import assert_same

    from gsd.diagnose.counts import count_partial

    tracker, _ = runs[setup]
    path = tracker.save(tmp_path / "run.parquet")
    assert count_partial(path, progress=False)[0].meta["declared"]  # streamed, not read whole
    assert_same(path)


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
        f(
            prompts=[chats[j] for j in rows],
            completions=rng.integers(0, 2, len(rows)).tolist(),
            qid=[qid[j] for j in rows],
        )
    path = tracker.save(tmp_path / "chat.parquet")
    assert (
        main(["diagnose", "--no-progress", "--json", "--prior", "uniform", "--out", str(tmp_path / "dx"), str(path)])
        == 0
    )
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
        out[name] = (
            tracker,
            trl_run(
                root / name,
                prompts=prompts,
                p=p,
                batch=128,
                max_steps=8,
                trainer_cls=_trainer(),
                trainer_kwargs={"gsd_tracker": tracker, **kw},
            ),
        )
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
    print(
        f"\nsilent fraction after the first visits: {frac_off:.3f} ({n_off} groups) without skipping, "
        f"{frac_on:.3f} ({n_on} groups) with skip_above=0.9, max_skips=4; {counts}; "
        f"{t_off.generations} and {t_on.generations} generations; wasted rollouts {s_off['wasted_rollouts']} and "
        f"{s_on['wasted_rollouts']} of {s_off['rollouts']} and {s_on['rollouts']}"
    )
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
    assert len(drawn) >= len(seen) and drawn[: len(seen)] == seen
    # No prompt is skipped at more than max_skips of its turns in a row.
    turns = np.concatenate([rows for rows, _ in sampler.decisions])
    skipped = np.concatenate([skip for _, skip in sampler.decisions])
    for i in range(32):
        mine = skipped[turns == i].astype(int)
        runs_of_skips = np.diff(np.flatnonzero(np.r_[1, 1 - mine, 1])) - 1
        assert runs_of_skips.max() <= 4
    # gsd/skipped per generation sums to the prompts skipped for the batches generated.
    logged = [m["skipped"] for m in tracker.metrics]
    assert logged == [int(s.sum()) for _, s in sampler.decisions[: len(logged)]]
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
    with pytest.raises(InputError, match="half_life"):
        GroupTracker(4, half_life=0.0)
    with pytest.raises(InputError, match="half_life"):
        GroupTracker(4, half_life="fast")
    # On the per-generation path nothing is raised: the generation is listed, warned about once.
    t3 = GroupTracker(3)
    [f] = t3.wrap([lambda prompts, completions, **kw: [0.0] * len(prompts)])
    with pytest.warns(RuntimeWarning, match="not a multiple of num_generations=3"):
        assert f(prompts=["a"] * 4, completions=[""] * 4) == [0.0] * 4
    assert not t3.metrics and "not a multiple of num_generations=3" in t3.unscorable[0]["reason"]
    t2 = GroupTracker(2, prompt_id="idx")
    [g] = t2.wrap([lambda prompts, completions, **kw: [0.0] * len(prompts)])
    with pytest.warns(RuntimeWarning, match="prompt_id='idx' is not a dataset column"):
        g(prompts=["a"] * 2, completions=[""] * 2, p=[0.1, 0.1])
    assert not t2.metrics and len(t2.unscorable) == 1
    with pytest.raises(InputError, match="no training generation"):
        GroupTracker(2).diagnosis()
    t4 = GroupTracker(2)
    [h] = t4.wrap([lambda prompts, completions, **kw: [0.0, 1.0]])
    h(prompts=["a", "a"], completions=["", ""])
    with pytest.raises(InputError, match=r"\.parquet"):
        t4.save("run.csv")
    from gsd.live import GSDGRPOTrainer

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
    """TRL's torch.tensor(rewards, dtype=float32) fails on these too (TRL raises, not gsd); the
    tracker hands them on unchanged, records which row, and warns once."""
    import warnings

    tracker = GroupTracker(2)
    [f] = tracker.wrap([_named([0.0, bad])])
    with pytest.warns(RuntimeWarning, match=r"reward function 'graded' returned .* at row 1"):
        assert f(prompts=["a", "a"], completions=["", ""]) == [0.0, bad]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once: the second time only listed
        f(prompts=["a", "a"], completions=["", ""])
    assert not tracker.metrics and [u["step"] for u in tracker.unscorable] == [1, 1]
    assert len(tracker.warnings) == 1
    [g] = GroupTracker(2).wrap([_named(None)])
    with pytest.warns(RuntimeWarning, match=r"reward function 'graded' returned None, not one reward per completion"):
        assert g(prompts=["a", "a"], completions=["", ""]) is None


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


def test_two_lambdas_are_taken_as_trl_takes_them():
    """Issue 44: two reward functions of one name (two lambdas) were refused though TRL accepts
    them.  TRL names both '<lambda>' (its own get_callable_name on the wrapped functions); the
    tracker keeps their rewards apart as '<lambda>' and '<lambda>#2', and says so once."""
    from trl.trainer.utils import get_callable_name

    tracker = GroupTracker(2)
    with pytest.warns(UserWarning, match=r"2 reward functions are named '<lambda>'.*'?<lambda>, <lambda>#2"):
        f, g = tracker.wrap(
            [lambda prompts, completions, **kw: [1.0, 0.0], lambda prompts, completions, **kw: [0.0, 0.0]]
        )
    assert [get_callable_name(h) for h in (f, g)] == ["<lambda>", "<lambda>"]
    assert f(prompts=["a", "a"], completions=["x", "y"]) == [1.0, 0.0] and g(prompts=["a", "a"], completions=["x", "y"])
    assert tracker._description()["functions"] == ["<lambda>", "<lambda>#2"]
    assert tracker.metrics[-1]["silent_frac"] == 0.0  # totals 1, 0: not silent


def test_silent_fraction_is_trls_for_groups_with_one_scorable_row():
    """Issue 44 (older catalogue): the tracker's silent fraction against TRL's own arithmetic
    (trl.trainer.utils.nanstd and isclose, as GRPOTrainer computes frac_reward_zero_std), for
    groups with no, one and two scorable rows."""
    import torch
    from trl.trainer.utils import nanstd

    rows = [None, 1.0, 0.0, 0.0, None, None, 0.5, 0.25, 1.0, None]
    tracker = GroupTracker(2)
    [f] = tracker.wrap([lambda prompts, completions, **kw: list(completions)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f(prompts=[f"q{i // 2}" for i in range(len(rows))], completions=rows)
    x = torch.tensor([float("nan") if r is None else r for r in rows], dtype=torch.float32).view(-1, 2)
    std = nanstd(x, dim=1)
    zero = torch.isclose(std, torch.zeros_like(std))
    assert zero.tolist() == [False, True, False, False, False]  # only the group (0, 0)
    # TRL averages in float32 (0.2 → 0.20000000298); the tracker in float64: the same count
    assert tracker.metrics[-1]["silent_frac"] == zero.sum().item() / zero.numel()
    assert np.float32(tracker.metrics[-1]["silent_frac"]) == zero.float().mean().item()


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


# ------------------------------------------------------------------------- forgetting (half_life)


def _feed(tracker, schedule, G):
    """Feed (step, prompts, right counts) generations through a wrapped function, as TRL would
    (its trainer_state gives the step).  Returns the wrapped function."""
    from types import SimpleNamespace

    [f] = tracker.wrap([lambda prompts, completions, **kw: list(completions)])
    for step, prompts, k in schedule:
        rows = [x for x in prompts for _ in range(G)]
        rewards = [float(j < kk) for kk in k for j in range(G)]
        f(prompts=rows, completions=rewards, trainer_state=SimpleNamespace(global_step=step - 1))
    return f


def _schedule(rng, steps, n_prompts=6, per=4, G=4, start=1):
    """Generations at increasing (gapped) steps, each a random subset of prompts (one drawn twice sometimes)."""
    out, step = [], start
    for _ in range(steps):
        step += int(rng.integers(1, 4))
        prompts = [f"x{j}" for j in rng.choice(n_prompts, per, replace=True)]
        out.append((step, prompts, rng.integers(0, G + 1, per).tolist()))
    return out


def _betabinom_logpmf(k, n, a, b):
    from math import lgamma

    def lbeta(x, y):
        return lgamma(x) + lgamma(y) - lgamma(x + y)

    return lgamma(n + 1) - lgamma(k + 1) - lgamma(n - k + 1) + lbeta(k + a, n - k + b) - lbeta(a, b)


@pytest.mark.parametrize("start", [0, 2**62])
def test_forgetting_equals_a_double_loop(start):
    """The discounted counts of every prompt before every generation, and each candidate's summed
    one-step-ahead log score, against a direct loop over prompts and earlier generations (Python
    integers for the step gaps: steps near 2^62 stay apart)."""
    from gsd.core.forgetting import HALF_LIVES

    G, a0, b0 = 4, 0.7, 1.3
    sched = _schedule(np.random.default_rng(3), 14, start=start)
    tracker = GroupTracker(G, half_life="auto", prior=(a0, b0))
    fixed = GroupTracker(G, half_life=2.0, prior=(a0, b0))
    [f] = tracker.wrap([lambda prompts, completions, **kw: list(completions)])
    [g] = fixed.wrap([lambda prompts, completions, **kw: list(completions)])
    from types import SimpleNamespace

    scores = [0.0] * len(HALF_LIVES)
    for j, (t, prompts, k) in enumerate(sched):
        for x in set(prompts):  # the posterior the generation at step t is predicted from
            earlier = [(s, kk) for s, ps, ks in sched[:j] for p, kk in zip(ps, ks) if p == x]
            n_eff = sum(G * 2.0 ** (-(t - s) / 2.0) for s, _ in earlier)
            k_eff = sum(kk * 2.0 ** (-(t - s) / 2.0) for s, kk in earlier)
            post = fixed.posterior([x], step=t)
            assert post.a[0] - a0 == pytest.approx(k_eff, rel=1e-10, abs=1e-300)
            assert post.b[0] - b0 == pytest.approx(n_eff - k_eff, rel=1e-10, abs=1e-12)
        for p, kk in zip(prompts, k):
            earlier = [(s, e) for s, ps, ks in sched[:j] for q, e in zip(ps, ks) if q == p]
            if not earlier:
                continue
            for i, h in enumerate(HALF_LIVES):
                w = [1.0 if h is None else 2.0 ** (-(t - s) / h) for s, _ in earlier]
                n_eff = sum(G * wi for wi in w)
                k_eff = sum(e * wi for wi, (_, e) in zip(w, earlier))
                scores[i] += _betabinom_logpmf(kk, G, a0 + k_eff, b0 + n_eff - k_eff)
        rows = [x for x in prompts for _ in range(G)]
        rewards = [float(i < kk) for kk in k for i in range(G)]
        for fn in (f, g):
            fn(prompts=rows, completions=rewards, trainer_state=SimpleNamespace(global_step=t - 1))
    choice = tracker.half_life_choice
    assert choice["log_score"] == pytest.approx(scores, rel=1e-10)
    assert choice["half_life"] == HALF_LIVES[int(np.argmax(scores))] and tracker.half_life_now == choice["half_life"]
    assert [m["step"] for m in tracker.metrics] == [t for t, _, _ in sched] and not tracker.unscorable


def test_forgetting_equals_diagnose_half_life():
    """With a fixed prior the tracker's posteriors are gsd diagnose's --half-life table on the same
    groups (its n_eff, k_eff), and "auto" scores and chooses as diagnose does (steps near 2^62)."""
    from gsd.diagnose.tables import binarise, choose_half_life, group_table

    G = 4
    sched = _schedule(np.random.default_rng(5), 12, start=2**62)
    auto = GroupTracker(G, half_life="auto", prior="uniform")
    _feed(auto, sched, G)
    log = auto.rollout_log()
    right = binarise(log.reward)[0]
    chosen, info = choose_half_life(log, right, (1.0, 1.0))
    assert auto.half_life_choice["log_score"] == pytest.approx(info["log_score"], rel=1e-10)
    assert (auto.half_life_now, auto.half_life_choice["groups_scored"]) == (chosen, info["groups_scored"])
    for h in (0.5, 3.0):
        tracker = GroupTracker(G, half_life=h, prior="uniform")
        [f] = tracker.wrap([lambda prompts, completions, **kw: list(completions)])
        from types import SimpleNamespace

        got = []
        for t, prompts, k in sched:
            post = tracker.posterior(sorted(set(prompts)), step=t)
            got += [(t, x, a - 1.0, a + b - 2.0) for x, a, b in zip(sorted(set(prompts)), post.a, post.b)]
            f(
                prompts=[x for x in prompts for _ in range(G)],
                completions=[float(i < kk) for kk in k for i in range(G)],
                trainer_state=SimpleNamespace(global_step=t - 1),
            )
        table = group_table(log, right, half_life=h)
        names = dict(zip(range(len(log.labels)), log.labels))
        want = {(int(r.step), names[r.prompt]): (r.k_eff, r.n_eff) for r in table.itertuples()}
        assert len(want) == len(got)
        for t, x, k_eff, n_eff in got:
            assert (k_eff, n_eff) == pytest.approx(want[(t, x)], rel=1e-10, abs=1e-300)


def test_auto_half_life_follows_a_learning_policy():
    """Simulated groups: a policy whose p climbs 0.05 → 0.95 over the run makes old counts stale
    (auto picks a short half-life); a fixed p is best predicted by counting everything."""
    rng = np.random.default_rng(0)
    G, P, T = 8, 16, 60
    offsets = rng.normal(0.0, 0.5, P)
    chosen = {}
    for kind in ("learning", "fixed"):
        tracker = GroupTracker(G, half_life="auto")
        p_fixed = rng.beta(1.0, 1.0, P)
        sched = []
        for t in range(1, T + 1):
            if kind == "learning":
                p = 1.0 / (1.0 + np.exp(-(-3.0 + 6.0 * t / T + offsets)))
            else:
                p = p_fixed
            sched.append((t, [f"x{j}" for j in range(P)], rng.binomial(G, p).tolist()))
        _feed(tracker, sched, G)
        chosen[kind] = tracker.half_life_now
    print(f"\nhalf-life chosen: {chosen}")
    assert chosen["learning"] is not None and chosen["learning"] <= 16
    assert chosen["fixed"] is None or chosen["fixed"] >= 32


def test_no_finite_reward_is_recorded_not_raised():
    """Every reward None or NaN: the generation is recorded (TRL counts no zero-std group: its std
    is NaN), listed as unscorable, warned about once; predictions go on afterwards."""
    import warnings

    tracker = GroupTracker(2, half_life="auto")
    [f] = tracker.wrap([lambda prompts, completions, **kw: list(completions)])
    with pytest.warns(RuntimeWarning, match="no reward function returned a finite reward"):
        assert (
            f(prompts=["a"] * 4, completions=[None, float("nan"), None, None]) == [None, float("nan"), None, None]
            or True
        )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f(prompts=["a"] * 2, completions=[None, None])
        f(prompts=["a", "a", "b", "b"], completions=[1.0, 0.0, 1.0, 1.0])
    assert [u["step"] for u in tracker.unscorable] == [1, 2] and len(tracker.warnings) == 1
    assert [m["silent_frac"] for m in tracker.metrics] == [0.0, 0.0, 0.5]
    assert np.isnan(tracker.metrics[0]["fidelity_group_size"]) and np.isnan(tracker.metrics[0]["advised_group_size"])
    assert tracker.metrics[-1]["silent_pred"] >= 0


# ------------------------------------------------------------------------------ the value policy


def _policy_sampler(policy, n_each=8, G=4, batch=16, generations=6, seed=0):
    """A tracker that has seen 8 never-right, 8 always-right and 16 coin-flip prompts, and a value
    sampler over them."""
    from gsd.live import SkipSampler

    rng = np.random.default_rng(seed)
    keys = [f"q{i}" for i in range(4 * n_each)]
    p = np.array([0.0] * n_each + [1.0] * n_each + [0.5] * (2 * n_each))
    tracker = GroupTracker(G, half_life="auto")
    _feed(tracker, [(t, keys, rng.binomial(G, p).tolist()) for t in range(1, generations + 1)], G)
    sampler = SkipSampler(keys, tracker, batch_size=batch, repeat_count=1, shuffle=True, seed=seed, policy=policy)
    return sampler, p


def test_value_policy_skips_the_silent_and_starves_none():
    from gsd.live import SkipPolicy

    sampler, p = _policy_sampler(SkipPolicy(max_skips=2, thompson=False))
    batches = [sampler.next_batch() for _ in range(40)]
    assert all(b.size == 16 for b in batches)  # the batch TRL expects
    turns = np.concatenate([rows for rows, _ in sampler.decisions])
    skipped = np.concatenate([skip for _, skip in sampler.decisions])
    for i in range(32):  # never skipped at more than max_skips turns in a row
        mine = skipped[turns == i].astype(int)
        assert (np.diff(np.flatnonzero(np.r_[1, 1 - mine, 1])) - 1).max() <= 2
        assert (~skipped[turns == i]).sum() >= 40 * 32 // (2 * 32 * 3)  # drawn at least once per 3 turns
    silent = np.isin(p[turns], (0.0, 1.0))
    share = skipped[silent].mean(), skipped[~silent].mean()
    print(f"\nskip share: never/always right {share[0]:.3f}, coin flips {share[1]:.3f}")
    assert share[0] > 0.5 > share[1]  # half the turns are skipped; the silent take most of it
    # Without Thompson draws the batch is the top of the window by posterior value (cap first).
    sampler2, _ = _policy_sampler(SkipPolicy(max_skips=10**6, thompson=False))
    for _ in range(5):
        sampler2.next_batch()
        rows, skip = sampler2.decisions[-1]
        v = sampler2._values(*sampler2.tracker._posterior_of_codes(sampler2._codes(rows), 7)[:2])
        assert v[~skip].min() >= v[skip].max()


def test_value_policy_explores_with_thompson_draws():
    """Thompson draws: the coin-flip prompts fill the batches; a never-right prompt comes back no
    later than its cap."""
    from gsd.live import SkipPolicy

    sampler, p = _policy_sampler(SkipPolicy(max_skips=3), seed=1)
    for _ in range(40):
        assert sampler.next_batch().size == 16
    turns = np.concatenate([rows for rows, _ in sampler.decisions])
    skipped = np.concatenate([skip for _, skip in sampler.decisions])
    for i in range(32):
        mine = skipped[turns == i].astype(int)
        assert (np.diff(np.flatnonzero(np.r_[1, 1 - mine, 1])) - 1).max() <= 3
    assert skipped[np.isin(p[turns], (0.0, 1.0))].mean() > skipped[p[turns] == 0.5].mean()


def test_skip_policy_refused_where_it_cannot_act():
    from gsd.live import SkipPolicy

    for bad in ({"candidates": 0.5}, {"value": "horizon"}, {"max_skips": -1}, {"thompson": "yes"}):
        with pytest.raises(InputError, match=next(iter(bad))):
            SkipPolicy(**bad)
    with pytest.raises(InputError, match="skip_policy must be"):
        _trainer()(model=None, skip_policy="greedy")
    with pytest.raises(InputError, match="not both"):
        _trainer()(model=None, skip_policy="value", skip_above=0.9)
    with pytest.raises(InputError, match="give it in the SkipPolicy"):
        _trainer()(model=None, skip_policy=SkipPolicy(), max_skips=2)


@pytest.mark.parametrize("rule", [{"skip_above": 0.9}, {"skip_policy": "value"}])
def test_skipping_refuses_an_iterable_dataset(tmp_path, rule):
    """A datasets.IterableDataset has no sampler in TRL: skipping is refused at construction
    (tracking alone is not)."""
    from datasets import Dataset
    from trl import GRPOConfig

    from .real_trainers import tiny_model, tokenizer

    ds = Dataset.from_dict({"prompt": PROMPTS}).to_iterable_dataset()
    args = GRPOConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        report_to=[],
        num_generations=4,
        max_steps=1,
        per_device_train_batch_size=8,
        max_completion_length=3,
    )
    with pytest.raises(InputError, match=f"^{next(iter(rule))} needs a map-style train_dataset"):
        _trainer()(
            model=tiny_model(0),
            reward_funcs=[_named([])],
            args=args,
            train_dataset=ds,
            processing_class=tokenizer(),
            **rule,
        )


def test_no_finite_reward_trains_on_in_trl(tmp_path):
    """A reward function returning None for every row of every generation in a real TRL run: TRL
    trains on (zero advantages), gsd warns once and lists each generation."""
    tracker = GroupTracker(4, half_life="auto")
    with pytest.warns(RuntimeWarning, match="no reward function returned a finite reward"):
        truth = trl_run(
            tmp_path,
            prompts=PROMPTS,
            p=P,
            none_rows=range(16),
            max_steps=3,
            trainer_cls=_trainer(),
            trainer_kwargs={"gsd_tracker": tracker},
        )
    assert truth.trainer.state.global_step == 3
    assert [u["step"] for u in tracker.unscorable] == [1, 2, 3] and len(tracker.warnings) == 1
    history = [e for e in truth.trainer.state.log_history if "frac_reward_zero_std" in e]
    assert [e["gsd/silent_frac"] for e in history] == [e["frac_reward_zero_std"] for e in history] == [0.0] * 3


@pytest.fixture(scope="module")
def value_run(tmp_path_factory):
    """The value policy in a real run (the API the experiments call), 16 of 32 prompts per batch;
    inside the reward function, the tracker's posterior before each generation."""
    from gsd.live import GroupTracker as Tracker

    prompts = [f"q{i % 16} w{i // 16}" for i in range(32)]
    p = [0.0] * 8 + [1.0] * 8 + [0.5] * 16
    tracker = Tracker(4, half_life="auto", prior="uniform")
    before = []

    def peek(prompts, completions, trainer_state, **kw):
        if kw["log_extra"].__self__.model.training:
            firsts = list(prompts[::4])
            post = tracker.posterior(firsts, step=trainer_state.global_step + 1)
            before.append(
                (trainer_state.global_step + 1, tracker.half_life_now, firsts, post.a - 1.0, post.a + post.b - 2.0)
            )
        return [0.0] * len(prompts)

    truth = trl_run(
        tmp_path_factory.mktemp("value"),
        prompts=prompts,
        p=p,
        batch=64,
        max_steps=8,
        second_reward=True,
        weights=(1.0, 0.0),
        trainer_cls=_trainer(),
        trainer_kwargs={"gsd_tracker": tracker, "skip_policy": "value"},
        wrap=lambda funcs: [funcs[0], peek],
    )
    return tracker, truth, prompts, p, before


def test_value_policy_in_trl_skips_the_silent_keeps_the_batch(value_run):
    tracker, truth, prompts, p, _ = value_run
    sampler = truth.trainer.gsd_sampler
    gens = truth.generations()
    assert len(gens) == 8 and all(groups.shape == (16, 4) for _, groups in gens)  # TRL's batch, unchanged
    seen = [calls[1][::4] for calls in truth.calls["correct"]]
    drawn = [[prompts[i] for i in rows[~skip]] for rows, skip in sampler.decisions]
    assert [sorted(d) for d in drawn[: len(seen)]] == [sorted(s) for s in seen]
    turns = np.concatenate([rows for rows, _ in sampler.decisions])
    skipped = np.concatenate([skip for _, skip in sampler.decisions])
    for i in range(32):
        mine = skipped[turns == i].astype(int)
        assert (np.diff(np.flatnonzero(np.r_[1, 1 - mine, 1])) - 1).max() <= 4
    # Skipping starts once prompts have rollouts; from then on the silent ones take the skips.
    p = np.asarray(p)
    late = np.concatenate([np.full(rows.size, j >= 2) for j, (rows, _) in enumerate(sampler.decisions)])
    silent = np.isin(p[turns], (0.0, 1.0))
    shares = skipped[late & silent].mean(), skipped[late & ~silent].mean()
    g = tracker.diagnosis().groups
    frac = float(g.loc[g["n_before"] > 0, "silent"].mean())
    print(
        f"\nvalue policy: skip share never/always right {shares[0]:.3f}, coin flips {shares[1]:.3f}; silent "
        f"fraction of groups after the first visits {frac:.3f} (without skipping 0.5625 expected); "
        f"{truth.trainer.gsd_skip_counts}; half-life {tracker.half_life_choice}"
    )
    assert shares[0] > shares[1]
    assert sum(m["skipped"] for m in tracker.metrics) == truth.trainer.gsd_skip_counts["skipped_prompts"] > 0


def test_value_run_posteriors_are_diagnose_tables(value_run):
    """The posterior the tracker held before each generation of the run (read inside the reward
    function) is diagnose's --half-life table of that generation's groups, at the half-life auto
    was using."""
    from gsd.diagnose.tables import binarise, group_table

    tracker, _, _, _, before = value_run
    log = tracker.rollout_log()
    right = binarise(log.reward)[0]
    names = dict(enumerate(log.labels))
    tables = {}
    for step, h, firsts, k_eff, n_eff in before:
        if h not in tables:
            t = group_table(log, right, half_life=h)
            tables[h] = {(int(r.step), names[r.prompt]): (r.k_eff, r.n_eff) for r in t.itertuples()}
        for x, k, n in zip(firsts, k_eff, n_eff):
            assert (k, n) == pytest.approx(tables[h][(step, x)], rel=1e-10, abs=1e-300)
    assert len(before) == 8 and len(tables) >= 1


def test_a_failed_generation_is_not_mixed_into_the_next():
    """Two reward functions; the first returns too few rewards at one generation: that generation
    is listed, the second function's rewards of it are not paired with the next generation's."""
    calls = {"n": 0}

    def first(prompts, completions, **kw):
        calls["n"] += 1
        return [1.0] * (len(prompts) - (calls["n"] == 1))

    def second(prompts, completions, **kw):
        return [float(c) for c in completions]

    tracker = GroupTracker(2, prior="uniform")
    f, g = tracker.wrap([first, second])
    with pytest.warns(RuntimeWarning, match="returned 3 rewards for 4 completions"):
        f(prompts=["a"] * 4, completions=[0, 0, 0, 0])
    g(prompts=["a"] * 4, completions=[0, 0, 0, 0])
    for fn in (f, g):
        fn(prompts=["a", "a", "b", "b"], completions=[0, 1, 1, 1])
    assert len(tracker.metrics) == 1 and tracker.metrics[0]["silent_frac"] == 0.5
    assert tracker._totals[0].tolist() == [1.0, 2.0, 2.0, 2.0] and len(tracker.unscorable) == 1


def test_noise_scale_and_batch_advice_in_the_log(tmp_path):
    """gradient_accumulation_steps 2, each micro-batch its own generation: GSDGRPOTrainer records the
    gradient norms (its gsd_noise callback), the step's squared norm is TRL's own grad_norm², and from the
    second step the log holds gsd/b_noise and the advised (B, G, lr)."""
    truth = trl_run(
        tmp_path / "noise",
        prompts=PROMPTS,
        p=P,
        batch=8,
        max_steps=4,
        trainer_cls=_trainer(),
        gradient_accumulation_steps=2,
        steps_per_generation=1,
        max_grad_norm=0.0,
    )
    tr = truth.trainer
    rec = tr.gsd_noise.record
    assert (rec.micro, rec.accumulation, len(rec.big_sq)) == (8, 2, 4)
    logged = [h["grad_norm"] for h in tr.state.log_history if "grad_norm" in h]
    np.testing.assert_allclose(rec.big_sq, np.square(logged), rtol=1e-4)  # float32 sums: ≲ 3e-6 relative
    hist = [h for h in tr.state.log_history if "gsd/b_noise" in h]
    assert hist, "gsd/b_noise never logged"
    if np.isfinite(hist[-1]["gsd/b_noise"]) and hist[-1]["gsd/b_noise"] > 0:
        assert hist[-1]["gsd/advised_generations_per_step"] >= 2
        assert hist[-1]["gsd/advised_lr"] == pytest.approx(tr.args.learning_rate)  # the run's lr at every B


def test_step_gain_knee_and_its_advice_in_the_log(tmp_path):
    """With gsd_objective (a smooth scalar of the model: one token's log-probability after a fixed input)
    GSDGRPOTrainer measures each step's gains at B and B/2 and logs gsd/knee, the knee of the steps
    recorded before that generation (:func:`knee_from_step_gains` on them, recomputed here), and advises B
    from it: the logged advised B is batch_advice's from that knee."""
    import torch

    from gsd.core.advice import batch_advice
    from gsd.core.noise_scale import knee_from_step_gains

    def objective(model):
        return model(input_ids=torch.tensor([[1, 2, 3]])).logits[0, -1].float().log_softmax(-1)[5]

    truth = trl_run(
        tmp_path / "knee",
        prompts=PROMPTS,
        p=P,
        batch=8,
        max_steps=4,
        trainer_cls=_trainer(),
        trainer_kwargs={"gsd_objective": objective},
        gradient_accumulation_steps=2,
        steps_per_generation=1,
        max_grad_norm=0.0,
    )
    tr = truth.trainer
    rec = tr.gsd_noise.record
    assert rec.steps_gain == [1, 2, 3, 4] and len(rec.phi_after) == 4
    hist = [h for h in tr.state.log_history if "gsd/knee" in h]
    assert hist, "gsd/knee never logged"
    # a generation's metrics are logged with the step that follows: the last holds steps 1..k, k in {2, 3}
    knees = {k: knee_from_step_gains(rec.gain_small[:k], rec.gain_big[:k], 8, 16) for k in (2, 3)}
    k = next(
        k
        for k, v in knees.items()
        if v.knee == hist[-1]["gsd/knee"] or (np.isinf(v.knee) and np.isinf(hist[-1]["gsd/knee"]))
    )
    knee = knees[k]
    if np.isfinite(knee.knee) and knee.knee > 0:
        post = tr.gsd_tracker.last_posterior
        adv = batch_advice(post.mean, knee, generations_per_step=16, group_size=tr.num_generations, lr=tr.args.learning_rate,
                           g_grid=(2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64))  # fmt: skip
        assert adv.run["source"] == "step gains" and "step gains" in adv.convention()
        assert hist[-1]["gsd/advised_generations_per_step"] >= 2
    # the gains reach trainer_state.json (transformers' own writer), one step per entry (logging_steps 1),
    # and the knee read back from it is the recorder's over the same steps
    from gsd.cli import main
    from gsd.core.noise_scale import knee_from_log

    tr.save_state()
    logged = [h for h in tr.state.log_history if "gsd/gain_big" in h]
    n = len(logged)
    assert n >= 2 and [h["gsd/gain_big"] for h in logged] == rec.gain_big[:n]
    assert [h["gsd/gain_small"] for h in logged] == rec.gain_small[:n]
    want = knee_from_step_gains(rec.gain_small[:n], rec.gain_big[:n], 8, 16)
    got = knee_from_log(tmp_path / "knee")
    assert got.knee == want.knee or (np.isinf(got.knee) and np.isinf(want.knee))
    assert main(["scalars", str(tmp_path / "knee"), "--knee-from-log", "--group-size", "4", "--groups", "4"]) == 0


def test_noise_scale_recorder_never_stops_training(tmp_path):
    """Issue 44, in TRL's real loop (gradient_accumulation_steps 2): a callback ahead of gsd's clips step 2's
    gradient (1e6 added after its first micro-batch, clipped by max_grad_norm), hides a parameter's gradient
    after step 3's first micro-batch (it reappears in the second: the flattened gradient changed length, a
    RuntimeError that ended training) and makes step 4's gradient NaN.  Training completes; steps 1 and 3 are
    recorded, 2 is counted clipped and 4 not finite, each kind warned about once."""
    from transformers import TrainerCallback

    class Corrupt(TrainerCallback):
        def on_substep_end(self, args, state, control, model=None, **kw):
            params = [p for p in model.parameters() if p.grad is not None]
            if state.global_step == 1:
                params[0].grad.add_(1e6)  # a step's gradient may be 0 (every group silent): added, not scaled
            elif state.global_step == 2:
                params[0].grad = None

        def on_pre_optimizer_step(self, args, state, control, model=None, **kw):
            if state.global_step == 3:  # the last step: no generation after it reads NaN weights
                next(p for p in model.parameters() if p.grad is not None).grad.fill_(float("nan"))

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        truth = trl_run(
            tmp_path / "corrupt",
            prompts=PROMPTS,
            p=P,
            batch=8,
            max_steps=4,
            trainer_cls=_trainer(),
            trainer_kwargs={"callbacks": [Corrupt()]},
            gradient_accumulation_steps=2,
            steps_per_generation=1,
            max_grad_norm=1e3,
        )
    tr = truth.trainer
    assert tr.state.global_step == 4
    norms = [h["grad_norm"] for h in tr.state.log_history if "grad_norm" in h]
    assert norms[0] < 1e3 and norms[2] < 1e3  # steps 1 and 3 unclipped, as TRL logged them
    rec = tr.gsd_noise.record
    assert rec.steps == [1, 3] and (rec.clipped, rec.nonfinite) == (1, 1)
    assert [(p["step"], p["kind"]) for p in rec.problems] == [(2, "clipped"), (4, "not-finite")]
    said = [str(w.message) for w in seen if "noise-scale recorder" in str(w.message)]
    assert len(said) == 2 and "clipped" in said[0] and "NaN" in said[1]
    np.testing.assert_allclose(rec.big_sq, np.square([norms[0], norms[2]]), rtol=1e-4)  # float32 sums


def test_a_table_with_its_verdict_in_some_files_only(tmp_path):
    """Two saved tables of one run, the verdict column dropped from one: the whole-log reader then
    uses no verdict (the generic rule); the counts, streamed or in two Ray tasks, do the same."""
    import importlib.util

    import pyarrow.parquet as pq
    from diagnose.test_counts import assert_same

    from gsd.diagnose.counts import count_partial, count_rollouts
    from gsd.diagnose.shards import count_sharded
    from gsd.integrations.tracker_table import SILENT_COL

    tracker = GroupTracker(2)
    [f] = tracker.wrap([lambda prompts, completions, **kw: [float(c) for c in completions]])
    for step in range(4):
        f(prompts=["a", "a", "b", "b"], completions=[1, step % 2, 0, 0])
    table = pq.read_table(tracker.save(tmp_path / "whole.parquet"))
    half = table.num_rows // 2
    (tmp_path / "run").mkdir()
    pq.write_table(table.slice(0, half), tmp_path / "run" / "part-0.parquet")
    pq.write_table(table.slice(half).drop_columns([SILENT_COL]), tmp_path / "run" / "part-1.parquet")
    assert count_partial(tmp_path / "run", progress=False)[0].meta["said"] == {True, False}
    assert_same(tmp_path / "run")
    if importlib.util.find_spec("ray") is not None:  # one part file per Ray task: the shards' verdicts too
        got = count_sharded(tmp_path / "run", shards=2, num_cpus=2)
        want = count_rollouts(tmp_path / "run", progress=False)
        assert all(np.array_equal(got.groups[c], want.groups[c]) for c in want.groups)
