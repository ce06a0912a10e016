"""The tracker counts silence as TRL 1.16.0 counts frac_reward_zero_std, on graded rewards where
float64 equality and TRL disagree: one real run (tiny Qwen2, CPU, G = 8) whose reward function
returns, per prompt, a designed group (0.1+0.2 beside 0.3, 0 beside 1e-8, one scorable row, no
scorable row, an infinite reward, rewards beyond float32), and does so as a generator."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

pytest.importorskip("trl", reason="the tests against the real TRL need trl==1.16.0 (make install)")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st

from gsd.live import GroupTracker, trl_total, trl_zero_std  # noqa: E402

from .real_trainers import trl_run  # noqa: E402

G = 8
#: Per prompt, the rewards of its group's 8 rows (None: the function cannot score the row).
PATTERNS = [
    [0.1 + 0.2, 0.3] * 4,  # equal in float32; TRL's float32 sum of eight 0.3 leaves std 3e-8
    [0.0, 1e-8] * 4,  # std 5e-9 <= 1e-8: TRL counts it zero-std
    [0.5] + [None] * 7,  # one scorable row: std NaN
    [None] * 8,  # no scorable row
    [math.inf] + [1.0] * 7,
    [1e39] * 8,  # beyond float32: inf in TRL
    [0.25] * 8,  # exact in float32
    [0.7] * 8,
]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tracker = GroupTracker(G, threshold=0.5)
    seen = []

    def graded(prompts, completions, p, trainer_state, **kw):
        if kw["log_extra"].__self__.model.training:
            seen.append((trainer_state.global_step, [PATTERNS[int(q)][j % G] for j, q in enumerate(p)]))
        return (PATTERNS[int(q)][j % G] for j, q in enumerate(p))  # a generator: TRL lists it

    from gsd.live import GSDGRPOTrainer

    prompts = [f"q{i} w1 w2" for i in range(len(PATTERNS))]
    truth = trl_run(
        tmp_path_factory.mktemp("graded"),
        prompts=prompts,
        p=list(range(len(PATTERNS))),
        G=G,
        batch=G * len(PATTERNS),
        max_steps=2,
        wrap=lambda funcs: tracker.wrap([graded]),
        trainer_cls=GSDGRPOTrainer,
        trainer_kwargs={"gsd_tracker": tracker},
    )
    return tracker, truth.trainer, seen


def _trl_zero_std_of(rewards):
    """TRL's own nanstd and isclose on the rewards the function returned (None → NaN, float32)."""
    import torch
    from trl.trainer.utils import nanstd

    x = torch.tensor([math.nan if r is None else r for r in rewards], dtype=torch.float32).view(-1, G)
    std = nanstd(x, dim=1)
    return torch.isclose(std, torch.zeros_like(std)).numpy()


def test_silent_fraction_is_trls_frac_reward_zero_std(run):
    tracker, trainer, seen = run
    logged = [e for e in trainer.state.log_history if "frac_reward_zero_std" in e]
    assert [e["step"] for e in logged] == [m["step"] for m in tracker.metrics] == [s + 1 for s, _ in seen] == [1, 2]
    for e, m, (_, rewards) in zip(logged, tracker.metrics, seen):
        want = _trl_zero_std_of(rewards).mean()
        assert np.float32(m["silent_frac"]) == np.float32(e["frac_reward_zero_std"]) == np.float32(want)
        assert np.float32(e["gsd/silent_frac"]) == np.float32(e["frac_reward_zero_std"])
        # Neither float64 equality nor equality after the float32 cast is TRL's count here.
        groups = np.array([np.nan if r is None else r for r in rewards]).reshape(-1, G)
        with np.errstate(over="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the group without a scorable row
            for values in (groups, groups.astype(np.float32)):
                equal = np.nanmax(values, axis=1) == np.nanmin(values, axis=1)
                assert equal.mean() != want


def test_generator_rewards_reach_trl_whole(run):
    _, trainer, seen = run
    means = [e["rewards/graded/mean"] for e in trainer.state.log_history if "rewards/graded/mean" in e]
    assert means and all(m == math.inf for m in means)  # TRL got every row (the inf among them), not an empty list


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 4).flatmap(
        lambda f: st.tuples(
            st.lists(
                st.lists(
                    st.one_of(
                        st.none(),
                        st.sampled_from([0.0, 1e-8, 0.1, 0.2, 0.3, 0.1 + 0.2, 0.7, 1.0, 1e39, math.inf, -math.inf]),
                    ),
                    min_size=f,
                    max_size=f,
                ),
                min_size=1,
                max_size=48,
            ),
            st.lists(st.sampled_from([1.0, 0.5, 0.1, 2.0, 0.0]), min_size=f, max_size=f),
            st.sampled_from([2, 3, 4, 8, 16]),
        )
    )
)
def test_total_and_zero_std_are_trls_own_operations(case):
    """Against TRL's own expressions (GRPOTrainer's nansum of the float32 products, its nanstd,
    torch.isclose), on rows padded to whole groups."""
    import torch
    from trl.trainer.utils import nanstd

    rows, weights, g = case
    rows = (rows * g)[: (len(rows) // g + 1) * g]
    per_func = torch.tensor([[math.nan if v is None else v for v in r] for r in rows], dtype=torch.float32)
    want = (per_func * torch.tensor(weights, dtype=torch.float32).unsqueeze(0)).nansum(dim=1)
    want[torch.isnan(per_func).all(dim=1)] = torch.nan
    std = nanstd(want.view(-1, g), dim=1)
    parts = np.array([[np.nan if v is None else v for v in r] for r in rows], float).T
    total = trl_total(parts, weights)
    np.testing.assert_array_equal(total, want.numpy().astype(np.float64))
    got_std, zero = trl_zero_std(total, g)
    np.testing.assert_array_equal(got_std, std.numpy().astype(np.float64))
    np.testing.assert_array_equal(zero, torch.isclose(std, torch.zeros_like(std)).numpy())


def test_diagnosis_and_saved_table_carry_trls_verdict(run, tmp_path):
    """The rows left out of the diagnosis (no finite total) do not change a group's verdict: the
    group with an infinite reward keeps TRL's "not zero-std" though its finite rows are equal."""
    import pandas as pd

    tracker, _, _ = run
    verdict = {f"q{i} w1 w2": bool(_trl_zero_std_of(rows)[0]) for i, rows in enumerate(PATTERNS)}
    g = tracker.diagnosis().groups
    labels = tracker.diagnosis().prompts["prompt"].to_numpy()[g["prompt"].to_numpy()]
    multi = (g["G"] >= 2).to_numpy()
    assert sorted(set(labels[multi])) == ["q0 w1 w2", "q1 w1 w2", "q4 w1 w2", "q6 w1 w2", "q7 w1 w2"]
    assert g["silent"].to_numpy()[multi].tolist() == [verdict[x] for x in labels[multi]]
    table = pd.read_parquet(tracker.save(tmp_path / "run.parquet"))
    assert table.groupby("prompt")["zero_std"].all().to_dict() == {x: verdict[x] for x in table["prompt"].unique()}


def test_saved_verdict_streamed_equals_the_whole_log(run, tmp_path):
    """TRL's verdict saved beside the rows (the group with an infinite reward is not silent though
    its finite rows are equal) survives the counts: field by field the whole-log reader's answer."""
    from diagnose.test_counts import assert_same

    tracker, _, _ = run
    assert_same(tracker.save(tmp_path / "run.parquet"))
