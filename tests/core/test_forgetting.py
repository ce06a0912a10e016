"""The one discount 2^(−Δ/h) and the one half-life check, against a direct computation; and every
user of them (diagnose, the live tracker, the simulator) taking the same one."""

import math
import warnings

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gsd.core.forgetting import HALF_LIVES, as_half_life, decay
from gsd.errors import InputError


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 2**62), min_size=1, max_size=8),
    st.floats(1e-3, 1e6, allow_nan=False, allow_infinity=False),
)
def test_decay_against_mpmath(ages, h):
    """Integer ages: 2^(−Δ/h) in 50 digits.  The float64 result goes through Δ → float (relative
    error ≤ 2^-53), Δ/h (≤ 2^-53) and exp2 (≤ 1 ulp): the exponent x = Δ/h carries a relative
    error ≤ 2^-52, hence an absolute one ≤ x·2^-52 and a relative error of 2^−x of ≤ ln2·x·2^-52,
    plus 2 ulps for the rounding of the result.  Results under the smallest normal double are
    checked absolutely."""
    mpmath.mp.dps = 50
    got = decay(np.array(ages, np.int64), h)
    for age, g in zip(ages, got):
        x = mpmath.mpf(age) / mpmath.mpf(h)
        want = float(mpmath.power(2, -x))
        rel = math.log(2) * float(x) * 2.0**-52 + 4 * 2.0**-53
        assert abs(g - want) <= rel * want + 2.0**-1022


def test_decay_shapes_none_and_overflow():
    assert decay([0, 1, 2], None).tolist() == [1.0, 1.0, 1.0]  # no forgetting: every count whole
    assert decay(np.zeros((2, 3), np.int64), 4.0).shape == (2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # overflow of Δ/h is the 0 it stands for, silently
        assert decay(np.array([2**62], np.int64), 1e-300).tolist() == [0.0]
    # adjacent steps near 2^62 are one step apart: the age is exact before it becomes a float
    assert decay(np.int64(2**62 + 1) - np.int64(2**62), 1.0) == 0.5


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), -float("inf"), True, "8", "auto", [2.0], 10**400])
def test_as_half_life_rejects(bad):
    with pytest.raises(InputError, match=r"half_life must be .*got"):
        as_half_life(bad)
    with pytest.raises(InputError, match="half_life"):
        decay([1], bad)


def test_as_half_life_accepts_and_names():
    assert as_half_life(None) is None
    assert as_half_life(np.float32(2.5)) == 2.5 and type(as_half_life(3)) is float
    assert as_half_life("auto", auto=True) == "auto"
    with pytest.raises(InputError, match=r"logged_half_life must be None or a finite number of steps > 0, got -2"):
        as_half_life(-2, name="logged_half_life")
    with pytest.raises(InputError, match=r"None, 'auto' or"):
        as_half_life("soon", auto=True)


def test_half_lives_longest_first():
    assert HALF_LIVES[0] is None
    rest = [h for h in HALF_LIVES[1:] if h is not None]
    assert len(rest) == len(HALF_LIVES) - 1 and rest == sorted(rest, reverse=True)
    assert all(as_half_life(h) == h for h in rest)


def test_every_user_takes_the_one_check():
    """diagnose, the live tracker and the simulator reject the same values with the same check."""
    from gsd.diagnose.tables import diagnose_log
    from gsd.live.reward_calls import as_half_lives
    from gsd.simulator.config import SimConfig

    assert as_half_lives("auto") == HALF_LIVES and as_half_lives(None) == (None,) and as_half_lives(4) == (4.0,)
    for bad in (0, -1.0, float("inf"), "often"):
        with pytest.raises(InputError, match="half_life"):
            as_half_lives(bad)
        with pytest.raises(InputError, match="half_life"):
            diagnose_log(None, half_life=bad)  # checked before the log is read
    for bad in (-1.0, float("inf"), float("nan")):
        with pytest.raises(InputError, match="logged_half_life"):
            SimConfig(logged_half_life=bad)
    assert SimConfig(logged_half_life=0.0).logged_half_life == 0.0


def test_old_paths_warn_and_give_the_core_names():
    import gsd.core.posterior as core_posterior
    import gsd.diagnose.posteriors as posteriors
    import gsd.diagnose.tables as tables

    for module in (tables, posteriors):
        for name, new in (
            ("HALF_LIVES", HALF_LIVES),
            ("one_step_log_score", core_posterior.one_step_log_score),
            ("expected_scale", core_posterior.expected_scale),
        ):
            with pytest.warns(DeprecationWarning, match=f"{name} has moved"):
                assert getattr(module, name) is new
    with pytest.warns(DeprecationWarning, match="decay has moved"):
        assert posteriors.decay is decay


@pytest.mark.parametrize("bad", [[-1], [float("nan")], [-float("inf")], ["a"], [True, False], [None]])
def test_decay_refuses_what_is_not_an_age(bad):
    """Issue 44: a negative age weighed more than a fresh count (2^0.5 at −1), NaN gave a NaN weight, bools
    were ages 1 and 0, text and None were a TypeError from numpy: each is gsd's input error naming age."""
    with pytest.raises(InputError, match="age must be numbers of steps >= 0"):
        decay(bad, 2.0)


def test_decay_of_infinite_age_is_zero():
    assert decay([np.inf, 0.0], 2.0).tolist() == [0.0, 1.0]
