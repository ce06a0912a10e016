"""TRL's float32 arithmetic done in numpy, so that reading a log needs no torch: the weighted total
and the zero-std verdict, bit for bit against TRL 1.16.0's own expressions (its ``nansum`` of the
float32 products, its ``nanstd``, ``torch.isclose`` with torch's default rtol 1e-5 and atol 1e-8)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the check against TRL's own arithmetic needs torch and trl")
pytest.importorskip("trl", reason="the check against TRL's own arithmetic needs trl==1.16.0")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st

from gsd.integrations import trl  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
#: Values whose float32 sums round (0.7, 0.1 + 0.2), sit at torch's tolerance (1e-8, 5e-9), or are
#: not finite, beside the exact ones of right/wrong rewards.
VALUES = [
    0.0,
    1.0,
    0.5,
    0.25,
    2.0,
    -1.0,
    0.7,
    0.1,
    0.2,
    0.1 + 0.2,
    0.3,
    1e-8,
    5e-9,
    1.5e-8,
    3.0,
    1e20,
    1e39,
    math.inf,
    -math.inf,
    math.nan,
]


def _trl_verdict(total, G):
    from trl.trainer.utils import nanstd

    x = torch.tensor(total, dtype=torch.float32).view(-1, G)
    std = nanstd(x, dim=1)
    return torch.isclose(std, torch.zeros_like(std)).numpy()  # torch's default rtol 1e-5, atol 1e-8


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from([2, 3, 4, 8, 16, 32, 64]).flatmap(
        lambda G: st.tuples(
            st.just(G),
            st.lists(
                st.one_of(
                    st.lists(st.sampled_from(VALUES), min_size=G, max_size=G),  # any mix
                    st.sampled_from(VALUES).map(lambda v: [v] * G),  # one value G times
                    st.tuples(st.sampled_from(VALUES), st.integers(0, G - 1)).map(
                        lambda t: [t[0]] * (G - t[1]) + [math.nan] * t[1]
                    ),
                ),  # and unscored rows
                min_size=1,
                max_size=12,
            ),
        )
    )
)
def test_zero_std_is_trls_verdict_and_settled_groups_need_no_torch(case):
    G, groups = case
    total = np.array([v for g in groups for v in g], np.float64)
    want = _trl_verdict(total, G)
    code = np.repeat(np.arange(len(groups)), G)
    np.testing.assert_array_equal(trl.zero_std(total, code, len(groups)), want)
    verdict, settled = trl.settled_zero_std(total.reshape(-1, G))
    np.testing.assert_array_equal(verdict[settled], want[settled])  # what numpy settles alone is TRL's verdict


def test_right_wrong_groups_are_settled_at_every_group_size():
    rng = np.random.default_rng(0)
    for G in (2, 3, 8, 64, 1024, 2**14):
        x = (rng.random((50, G)) < rng.random((50, 1)) ** 3).astype(np.float64)
        x[:5] = 0.0
        x[5:10] = 1.0
        x[10, : G // 2] = np.nan  # unscored rows
        verdict, settled = trl.settled_zero_std(x)
        assert settled.all()
        np.testing.assert_array_equal(verdict, _trl_verdict(x.ravel(), G))


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, trl.NUMPY_FUNCTIONS).flatmap(
        lambda f: st.tuples(
            st.lists(st.lists(st.sampled_from(VALUES + [None]), min_size=f, max_size=f), min_size=1, max_size=40),
            st.lists(st.sampled_from([1.0, 0.5, 0.1, 2.0, 0.0, 0.3]), min_size=f, max_size=f),
        )
    )
)
def test_total_in_numpy_is_trls_nansum(case):
    rows, weights = case
    per_func = torch.tensor([[math.nan if v is None else v for v in r] for r in rows], dtype=torch.float32)
    want = (per_func * torch.tensor(weights, dtype=torch.float32).unsqueeze(0)).nansum(dim=1)
    want[torch.isnan(per_func).all(dim=1)] = torch.nan
    parts = np.array([[np.nan if v is None else v for v in r] for r in rows], float).T
    np.testing.assert_array_equal(trl.total_reward(parts, weights), want.numpy().astype(np.float64))


def test_reading_a_right_wrong_trl_log_imports_no_torch():
    """The shipped TRL log (right/wrong rewards): `gsd diagnose` reads it without importing torch or scipy.stats."""
    code = (
        "import sys; from gsd.cli import main; "
        "rc = main(['diagnose', '--no-progress', '--json', sys.argv[1]]); "
        "print(rc, 'torch' in sys.modules, 'scipy.stats' in sys.modules, file=sys.stderr)"
    )
    res = subprocess.run(
        [sys.executable, "-c", code, str(ROOT / "data" / "example_logs" / "trl")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": ""},
    )
    assert res.stderr.strip().splitlines()[-1] == "0 False False", res.stderr[-2000:]
