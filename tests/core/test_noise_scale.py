"""The noise scale: McCandlish's two-batch estimator against synthetic gradients with a known tr(Σ) and |G|²,
the closed-form signal and noise of a step against direct enumeration and Monte Carlo, and the joint advice
against a direct minimisation (docs/theory.md, section The noise scale)."""

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

import gsd
from gsd.core.advice import StepCost, batch_advice, step_noise_terms
from gsd.core.noise_scale import GAIN_KEYS as GAIN
from gsd.core.noise_scale import noise_scale_from_logs, noise_scale_from_norms
from gsd.core.posterior import BetaPosterior


def _synthetic(rng, d, M, b, g, sigma, n):
    """n steps of M micro-batch means of b examples x ~ N(G, σ² I_d), |G| = g: (small_sq, big_sq)."""
    G = np.zeros(d)
    G[0] = g
    y = G + rng.normal(0.0, sigma / math.sqrt(b), size=(n, M, d))
    return (y**2).sum(-1).mean(1), (y.mean(1) ** 2).sum(-1)


@settings(max_examples=30, deadline=None)
@given(
    st.integers(1, 40),
    st.integers(2, 6),
    st.integers(1, 64),
    st.floats(0.0, 3.0),
    st.floats(0.1, 3.0),
    st.integers(0, 2**31),
)
def test_estimator_is_unbiased(d, M, b, g, sigma, seed):
    """Per step: tr Σ̂ = σ²χ²_{d(M−1)}/(M−1) (variance 2dσ⁴/(M−1)) and |G|²̂ = |ȳ|² − W/(M−1), whose
    variance is 2d(s²/M)²·M/(M−1) + 4|G|²s²/M with s² = σ²/b (ȳ and W independent, Gaussian).  The mean
    over n steps is within 6 of its exact standard deviations of the truth."""
    n = 400
    small, big = _synthetic(np.random.default_rng(seed), d, M, b, g, sigma, n)
    ns = noise_scale_from_norms(small, big, b, M * b)
    s2 = sigma**2 / b
    sd_tr = math.sqrt(2 * d * sigma**4 / (M - 1) / n)
    sd_g = math.sqrt((2 * d * (s2 / M) ** 2 * M / (M - 1) + 4 * g * g * s2 / M) / n)
    assert abs(ns.trace - d * sigma**2) <= 6 * sd_tr
    assert abs(ns.gradient_sq - g * g) <= 6 * sd_g


def test_interval_covers_the_true_noise_scale():
    """Coverage of the 95 % delta-method interval over 300 independent runs of 400 steps: the count of
    covering runs is at least the 1e-6 quantile of Binomial(300, 0.93) (allowing 2 % for the ratio's
    O(1/n) bias at this n)."""
    rng = np.random.default_rng(7)
    d, M, b, g, sigma = 8, 2, 4, 1.0, 1.0
    truth = d * sigma**2 / g**2
    cover = 0
    for _ in range(300):
        ns = noise_scale_from_norms(*_synthetic(rng, d, M, b, g, sigma, 400), b, M * b)
        cover += ns.b_noise_lo <= truth <= ns.b_noise_hi
    assert cover >= stats.binom.ppf(1e-6, 300, 0.93)


def test_example_and_unresolved_gradient():
    ns = noise_scale_from_norms([5.0, 5.0], [3.0, 3.0], 2, 4)
    assert (ns.gradient_sq, ns.trace, ns.b_noise) == (1.0, 8.0, 8.0)
    # |G|² estimated ≤ 0: the noise scale is not resolved, B_noise = inf, never a negative batch
    ns = noise_scale_from_norms([4.0, 4.0], [2.0, 2.0], 1, 2)
    assert ns.gradient_sq == 0.0 and math.isinf(ns.b_noise)


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"small_sq": [1.0, np.nan]}, "small_sq"),
        ({"big_sq": [1.0, np.inf]}, "big_sq"),
        ({"big_sq": [1.0, -1.0]}, "big_sq"),
        ({"big_sq": [1.0]}, "one entry per step"),
        ({"b_small": 4}, "b_small must be smaller"),
        ({"b_small": 0}, "b_small"),
        ({"b_big": float("inf")}, "b_big"),
        ({"level": 1.0}, "level"),
    ],
)
def test_bad_input_is_named(kw, match):
    args = {"small_sq": [2.0, 3.0], "big_sq": [1.0, 1.5], "b_small": 2, "b_big": 4, **kw}
    level = args.pop("level", 0.95)
    with pytest.raises(gsd.InputError, match=match):
        noise_scale_from_norms(args["small_sq"], args["big_sq"], args["b_small"], args["b_big"], level=level)


def test_from_two_logs(tmp_path):
    """grad_norm of two runs' trainer_state.json at two batch sizes: the same numbers as the norms given."""
    for name, norms in (("small", [3.0, 2.0, 2.5]), ("big", [2.0, 1.5, 1.0])):
        hist = [{"step": i + 1, "grad_norm": v, "loss": 0.0} for i, v in enumerate(norms)]
        (tmp_path / name).mkdir()
        (tmp_path / name / "trainer_state.json").write_text(json.dumps({"log_history": hist}))
    ns = noise_scale_from_logs(tmp_path / "small", tmp_path / "big", 8, 32, first_steps=3)
    ref = noise_scale_from_norms(np.square([3.0, 2.0, 2.5]), np.square([2.0, 1.5, 1.0]), 8, 32)
    assert ns == ref
    with pytest.raises(gsd.InputError, match="first_steps"):
        noise_scale_from_logs(tmp_path / "small", tmp_path / "big", 8, 32, first_steps=1)
    with pytest.raises(gsd.InputError, match="trainer_state"):
        noise_scale_from_logs(tmp_path / "nowhere", tmp_path / "big", 8, 32)


# ------------------------------------------------------------------------------------- closed forms


def _direct_terms(p, G):
    """Signal and noise per generation by enumerating k (population-std advantages)."""
    S = N = 0.0
    for k in range(G + 1):
        w = math.comb(G, k) * p**k * (1 - p) ** (G - k)
        r = np.r_[np.ones(k), np.zeros(G - k)]
        sd = r.std()
        A = (r - r.mean()) / sd if sd > 0 else np.zeros(G)
        S += w * math.sqrt(p * (1 - p)) * (A * (r - p)).mean()
        N += w * (A**2).sum() / G
    return S, N


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=5), st.integers(2, 12))
def test_terms_against_enumeration(p, G):
    t = step_noise_terms(p, [G])
    direct = np.array([_direct_terms(x, G) for x in p]).mean(0)
    assert t["signal"][0] == pytest.approx(direct[0], rel=1e-10, abs=1e-14)
    assert t["noise"][0] == pytest.approx(direct[1], rel=1e-10, abs=1e-14)


@settings(max_examples=15, deadline=None)
@given(st.floats(0.02, 0.98), st.integers(2, 10), st.integers(0, 2**31))
def test_terms_against_monte_carlo(p, G, seed):
    """n simulated groups: the sample means are within 6 a-priori standard errors (ΣA²/G ∈ [0, 1], so its
    variance ≤ 1/4; the signal term is bounded by √(G−1)·√(p(1−p)) in absolute value)."""
    n = 20000
    r = (np.random.default_rng(seed).random((n, G)) < p).astype(float)
    sd = r.std(1, keepdims=True)
    A = np.where(sd > 0, (r - r.mean(1, keepdims=True)) / np.where(sd > 0, sd, 1), 0.0)
    sig = math.sqrt(p * (1 - p)) * (A * (r - p)).mean(1)
    noise = (A**2).sum(1) / G
    t = step_noise_terms([p], [G])
    assert abs(noise.mean() - t["noise"][0]) <= 6 * 0.5 / math.sqrt(n)
    assert abs(sig.mean() - t["signal"][0]) <= 6 * math.sqrt(G - 1) * math.sqrt(p * (1 - p)) / math.sqrt(n)


def test_terms_under_a_posterior_are_the_integral():
    a, b, G = 2.5, 4.0, 6
    t = step_noise_terms(BetaPosterior(np.array([a]), np.array([b]), (1.0, 1.0)), [G])
    for i, key in enumerate(("signal", "noise")):
        ref = integrate.quad(lambda x, i=i: _direct_terms(x, G)[i] * stats.beta.pdf(x, a, b), 0, 1, epsabs=1e-13)[0]
        assert t[key][0] == pytest.approx(ref, rel=1e-8)


def test_degenerate_population():
    """Every prompt at 0 or 1: no signal and no noise (defined); no batch can be advised (refused by name)."""
    t = step_noise_terms([0.0, 1.0, 1.0], [2, 4])
    assert np.all(t["signal"] == 0) and np.all(t["noise"] == 0)
    with pytest.raises(gsd.InputError, match="group_size 4"):
        batch_advice([0.0, 1.0], (20.0, 10.0, 40.0), generations_per_step=64, group_size=4)


# ------------------------------------------------------------------------------------- the joint advice


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.floats(0.02, 0.98), min_size=1, max_size=5),
    st.floats(1.0, 500.0),
    st.sampled_from([2, 4, 8]),
    st.floats(0.01, 5.0),
    st.floats(1e-4, 0.1),
)
def test_batch_advice_is_the_models_optimum(p, bn, G_run, t_step, t_rollout):
    grid = [2, 3, 4, 6, 8, 16]
    cost = StepCost(t_step=t_step, t_rollout=t_rollout)
    adv = batch_advice(
        p, (bn, bn / 2, bn * 2), generations_per_step=64, group_size=G_run, lr=1e-3, cost=cost, g_grid=grid
    )
    t = step_noise_terms(p, grid)
    ratio = t["noise"] / t["signal"] ** 2
    knees = bn * ratio / ratio[grid.index(G_run)]
    fits = np.array(grid) <= knees
    assert adv.G == (grid[int(np.argmin(np.where(fits, ratio, np.inf)))] if fits.any() else grid[0])
    knee = knees[grid.index(adv.G)]
    assert abs(adv.B_per_generation - knee) <= adv.G / 2 or adv.B_per_generation == adv.G
    # per second: the direct minimum of S_min(1 + B_noise/B)·t(B) over a fine grid of B
    B = np.geomspace(1e-3, 1e7, 200001)
    best = B[np.argmin((1 + knee / B) * (t_step + t_rollout * B))]
    assert abs(adv.B_per_second - best) <= max(adv.G / 2, best * 1e-4) or adv.B_per_second == adv.G
    assert adv.lr_per_generation == adv.lr_per_second == 1e-3  # the run's lr, at every B
    lo, hi = adv.B_per_generation_interval
    assert lo <= knee <= hi
    assert "B = " in gsd.core.advice.advice_headline(adv)


def test_batch_advice_refuses_what_it_cannot_use():
    with pytest.raises(gsd.InputError, match="B_noise must be finite"):
        batch_advice([0.5], (math.inf, 1.0, math.inf), generations_per_step=64, group_size=4)
    with pytest.raises(gsd.InputError, match="generations_per_step"):
        batch_advice([0.5], (20.0, 10.0, 40.0), generations_per_step=0, group_size=4)
    with pytest.raises(gsd.InputError, match="lr"):
        batch_advice([0.5], (20.0, 10.0, 40.0), generations_per_step=64, group_size=4, lr=float("nan"))


# ------------------------------------------------------------------------------------- issue 44: bad input


@pytest.mark.parametrize("bad", [["a", "b"], [True, True], None, {"a": 1}, [1.0, None]])
def test_norms_that_are_not_numbers_are_named(bad):
    """Text, bools, None or a dict as squared norms: gsd's input error naming the argument (text and a dict
    were a ValueError/TypeError from numpy; bools were read as 1.0)."""
    with pytest.raises(gsd.InputError, match="small_sq must hold numbers"):
        noise_scale_from_norms(bad, [3.0, 3.0], 2, 4)


@pytest.mark.parametrize("unit", [1.5e307, 1e-300, 1e-320])
def test_norms_near_float64s_ends_are_exact(unit):
    """Squared norms whose b·norm overflows (4·3.5·1.5e307 was inf: B_noise came out NaN) or that are
    subnormal: the estimate, in units of the largest norm, against exact rational arithmetic on the same
    floats."""
    from fractions import Fraction as F

    small, big = [5.0 * unit, 6.0 * unit], [3.0 * unit, 3.5 * unit]
    ns = noise_scale_from_norms(small, big, 2, 4)
    g = [(4 * F(b) - 2 * F(s)) / 2 for s, b in zip(small, big)]
    t = [(F(s) - F(b)) / (F(1, 2) - F(1, 4)) for s, b in zip(small, big)]
    G2, tr = sum(g) / 2, sum(t) / 2
    # a step is a handful of roundings (scale, multiply, subtract, divide, mean, unscale): 16 ulp relative;
    # a result that is itself subnormal (unit 1e-320) carries half its last place absolute, 2^-1075
    eps = 16 * 2.0**-53
    assert abs(ns.gradient_sq - float(G2)) <= eps * float(G2) + 2.0**-1075
    assert abs(ns.trace - float(tr)) <= eps * float(tr) + 2.0**-1075
    assert abs(ns.b_noise - float(tr / G2)) <= 2 * eps * float(tr / G2)  # the ratio, in normal numbers


def _state(tmp_path, entries, name="trainer_state.json"):
    path = tmp_path / name
    path.write_text('{"log_history": [' + ", ".join(entries) + "]}")
    return path


@pytest.mark.parametrize(
    "norm, step, match",
    [
        ("NaN", "2", "grad_norm must be a finite number"),
        ("Infinity", "2", "grad_norm must be a finite number"),
        ("-2.0", "2", "grad_norm must be a finite number"),  # squared, -2 was read as a norm of 2
        ('"x"', "2", "grad_norm must be a finite number"),  # was float('x'): ValueError
        ("true", "2", "grad_norm must be a finite number"),  # was read as 1.0
        ("[1.0]", "2", "grad_norm must be a finite number"),
        ("1.5", '"x"', "step must be an integer"),  # was int('x'): ValueError
        ("1.5", "1.5", "step must be an integer"),  # was int(1.5) = 1, silently
        ("1.5", "NaN", "step must be an integer"),
        ("1.5", "-3", "step must be an integer"),
        ("1.5", "null", "step must be an integer"),
    ],
)
def test_grad_norm_logs_bad_entries_are_named(tmp_path, norm, step, match):
    path = _state(tmp_path, ['{"step": 1, "grad_norm": 1.0}', f'{{"step": {step}, "grad_norm": {norm}}}'])
    with pytest.raises(gsd.InputError, match=match):
        gsd.core.noise_scale.grad_norms_from_log(path)


@pytest.mark.parametrize("text", ['{"log_history": 5}', "[1, 2]", "not json", ""])
def test_a_file_that_is_not_a_trainer_state_is_named(tmp_path, text):
    (tmp_path / "trainer_state.json").write_text(text)
    with pytest.raises(gsd.InputError, match="trainer_state|log_history"):
        gsd.core.noise_scale.grad_norms_from_log(tmp_path)


def test_norms_whose_squares_overflow(tmp_path):
    """grad_norm 1e200 squares beyond float64 (it was refused as an infinite squared norm): the logs' noise
    scale equals the one of the same norms divided by 1e200, its ‖G‖² and tr Σ times 1e400 (inf here)."""
    norms_s, norms_b = [3.0, 2.0, 2.5], [2.0, 1.5, 1.0]
    for name, norms, unit in (("s", norms_s, 1e200), ("b", norms_b, 1e200), ("s1", norms_s, 1.0), ("b1", norms_b, 1.0)):
        _state(tmp_path, [f'{{"step": {i + 1}, "grad_norm": {v * unit!r}}}' for i, v in enumerate(norms)], name)
    big = noise_scale_from_logs(tmp_path / "s", tmp_path / "b", 8, 32)
    ref = noise_scale_from_logs(tmp_path / "s1", tmp_path / "b1", 8, 32)
    assert big.b_noise == pytest.approx(ref.b_noise, rel=1e-13)  # both a few roundings of the same ratio
    assert math.isinf(big.gradient_sq) and math.isinf(big.trace)  # 1e400 · O(1): beyond float64, said as inf
    assert (big.b_noise_lo, big.b_noise_hi) == pytest.approx((ref.b_noise_lo, ref.b_noise_hi), rel=1e-12)


@pytest.mark.parametrize(
    "noise, kw, match",
    [
        ((1e20, 1e20, 1e20), {}, "beyond"),  # advised B = 8.8e19 generations: was returned as an int
        ((1e308, 1e308, 1e308), {}, "beyond"),
        ((100.0, 50.0, 200.0), {"lr": 1e308}, "lr must be a number in"),  # lr·√(B/B_run) overflowed
        ((100.0, 50.0, 200.0), {"lr": math.inf}, "lr must be a number in"),
    ],
)
def test_batch_advice_beyond_float64_is_named(noise, kw, match):
    with pytest.raises(gsd.InputError, match=match):
        batch_advice([0.5], noise, generations_per_step=64, group_size=8, **kw)


def test_batch_advice_limits_are_the_clis():
    """--noise-scale and --run-lr check the same limits before the advice is imported."""
    from gsd.cli import support

    assert support.MAX_NOISE_SCALE == gsd.core.advice.MAX_BATCH
    assert support.MAX_RUN_LR == gsd.core.advice.MAX_LR
    assert gsd.core.advice.MAX_LR * math.sqrt(gsd.core.advice.MAX_BATCH) < np.finfo(float).max


def test_batch_advice_with_an_unbounded_interval():
    """hi = inf (noise_scale_from_norms' interval where ‖G‖² is not resolved) is an interval; its advised B
    interval reaches inf and the advice is still the knee of b_noise."""
    adv = batch_advice([0.5], (100.0, 50.0, math.inf), generations_per_step=64, group_size=8)
    ref = batch_advice([0.5], (100.0, 50.0, 200.0), generations_per_step=64, group_size=8)
    assert adv.B_per_generation == ref.B_per_generation and math.isinf(adv.B_per_generation_interval[1])


def test_batch_advice_per_second_beyond_2_53_is_a_note():
    """A cost whose per-generation part is 1e-300 s puts B* at 1e160 generations (it was returned as a
    160-digit int): no per-second B, and a note saying why."""
    adv = batch_advice(
        [0.5], (100.0, 50.0, 200.0), generations_per_step=64, group_size=8, cost=StepCost(1.0, 0.0, 1e-300)
    )
    assert adv.B_per_second is None and "beyond 2^53" in adv.notes[0]


@settings(max_examples=200, deadline=None)
@given(
    k_over_bs=st.floats(1e-3, 1e3),
    bs=st.floats(1, 1e4),
    ratio_b=st.floats(1.5, 100),
)
def test_knee_from_ratio_inverts_mccandlishs_law(k_over_bs, bs, ratio_b):
    """r = (1 + K/b_small)/(1 + K/b_big) computed directly gives back K.  Over this range r − 1 ≥ 3e-4 and
    1 − r·b_small/b_big ≥ 4e-4, so K's relative condition is below 1e4: a few float64 roundings times it
    stay under 1e-10."""
    from gsd.core.noise_scale import knee_from_ratio, knee_from_step_gains

    K, bb = k_over_bs * bs, ratio_b * bs
    r = (1 + K / bs) / (1 + K / bb)
    assert knee_from_ratio(r, bs, bb) == pytest.approx(K, rel=1e-10)
    # gains of any scale with that ratio at every step: the same K, a zero-width interval
    got = knee_from_step_gains([2.5e-3, 1e-3], [2.5e-3 * r, 1e-3 * r], bs, bb)
    assert got.knee == pytest.approx(K, rel=1e-10) and got.steps == 2


def test_knee_from_ratio_ends():
    from gsd.core.noise_scale import knee_from_ratio

    np.testing.assert_array_equal(knee_from_ratio([0.5, 1.0, 2.0, 3.0, np.nan], 32, 64), [0, 0, np.inf, np.inf, np.nan])


def test_step_gain_knee_interval_and_unresolved_small_gain():
    from gsd.core.noise_scale import knee_from_step_gains

    rng = np.random.default_rng(0)
    gs = 1 + 0.1 * rng.standard_normal(50)
    k = knee_from_step_gains(gs, 1.5 * gs + 0.05 * rng.standard_normal(50), 32, 64)
    assert k.knee_lo < k.knee < k.knee_hi and 0.5 * 64 < k.knee < 2 * 64
    # a small batch that gains nothing on average: every batch below is useless, K = inf
    assert knee_from_step_gains([-1.0, 0.5], [1.0, 1.0], 32, 64).knee == math.inf


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"gain_small": [1.0, np.nan]}, "gain_small"),
        ({"gain_big": [1.0, np.inf]}, "gain_big"),
        ({"gain_big": [1.0]}, "one entry per step"),
        ({"gain_small": ["a", "b"]}, "gain_small"),
        ({"b_small": 64}, "b_small must be smaller"),
        ({"b_big": 0}, "b_big"),
        ({"level": 1.0}, "level"),
    ],
)
def test_step_gain_bad_input_is_named(kw, match):
    from gsd.core.noise_scale import knee_from_step_gains

    args = {"gain_small": [1.0, 1.0], "gain_big": [1.2, 1.3], "b_small": 32, "b_big": 64, "level": 0.95, **kw}
    level = args.pop("level")
    with pytest.raises(gsd.InputError, match=match):
        knee_from_step_gains(**args, level=level)


@settings(max_examples=100, deadline=None)
@given(k_over_b=st.floats(1e-2, 1e2), b=st.floats(4, 1e3), scale=st.floats(1e-6, 1e3))
def test_knee_from_gain_levels_recovers_the_law_and_agrees_with_two_levels(k_over_b, b, scale):
    """Mean gains on McCandlish's law at B/4, B/2, B (gain ∝ 1/(1 + K/b)) give back K (a least-squares line
    through three exact points: a few roundings; K's condition over this range is below 1e4, bound 1e-9);
    two levels give :func:`knee_from_ratio` of their ratio."""
    from gsd.core.noise_scale import knee_from_gain_levels, knee_from_ratio

    K = k_over_b * b
    sizes = [b / 4, b / 2, b]
    row = [scale / (1 + K / s) for s in sizes]
    got = knee_from_gain_levels([row, row], sizes)
    assert got.knee == pytest.approx(K, rel=1e-9)
    two = knee_from_gain_levels([row[1:], row[1:]], sizes[1:])
    assert two.knee == pytest.approx(float(knee_from_ratio(row[2] / row[1], b / 2, b)), rel=1e-9)


def test_knee_from_gain_levels_interval_is_the_same_every_time():
    from gsd.core.noise_scale import knee_from_gain_levels

    rng = np.random.default_rng(3)
    base = 1 / (1 + 40 / np.array([16.0, 32.0, 64.0]))
    gains = base + 0.05 * rng.standard_normal((30, 3))
    a, b = knee_from_gain_levels(gains, [16, 32, 64]), knee_from_gain_levels(gains, [16, 32, 64])
    assert a == b and a.knee_lo < a.knee < a.knee_hi and a.steps == 30
    # the smallest batch gains nothing on average: K = inf
    assert knee_from_gain_levels([[-1.0, 1.0, 2.0], [0.5, 1.0, 2.0]], [16, 32, 64]).knee == math.inf


@pytest.mark.parametrize(
    ("gains", "sizes", "match"),
    [
        ([[1.0, np.nan]], [32, 64], "finite"),
        ([[1.0, 2.0]], [64, 32], "increasing"),
        ([[1.0, 2.0]], [16, 32, 64], "one per column"),
        ([1.0, 2.0], [32, 64], "steps × levels"),
        ([["a", "b"]], [32, 64], "steps × levels"),
        ([[1.0, 2.0]], [0, 64], "batch_sizes"),
    ],
)
def test_knee_from_gain_levels_bad_input_is_named(gains, sizes, match):
    from gsd.core.noise_scale import knee_from_gain_levels

    with pytest.raises(gsd.InputError, match=match):
        knee_from_gain_levels(gains, sizes)


@pytest.mark.parametrize(
    ("entries", "match"),
    [
        ([{"step": 1, "grad_norm": 1.0}], "logs no gsd/gain_small"),
        ([{"step": 1, **dict.fromkeys(GAIN, 1.0), "gsd/gain_big": float("nan")}], "gsd/gain_big must be a finite"),
        ([{"step": 1, **dict.fromkeys(GAIN, 1.0), "gsd/gain_small": "x"}], "gsd/gain_small must be a finite"),
        (
            [
                {
                    "step": 1,
                    "gsd/gain_small": 1.0,
                    "gsd/gain_big": 1.5,
                    "gsd/gain_small_generations": 8,
                    "gsd/gain_big_generations": 16,
                },
                {
                    "step": 2,
                    "gsd/gain_small": 1.0,
                    "gsd/gain_big": 1.5,
                    "gsd/gain_small_generations": 16,
                    "gsd/gain_big_generations": 32,
                },
            ],
            "change batch sizes",
        ),
        ([{"step": -1, **dict.fromkeys(GAIN, 1.0)}], "step"),
    ],
)
def test_knee_from_log_bad_entries_are_named(tmp_path, entries, match):
    from gsd.core.noise_scale import knee_from_log

    (tmp_path / "trainer_state.json").write_text(json.dumps({"log_history": entries}))
    with pytest.raises(gsd.InputError, match=match):
        knee_from_log(tmp_path)
