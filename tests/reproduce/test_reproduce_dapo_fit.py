"""DAPO consistency fit: the model, τ recovery on generated curves, input checks."""

import numpy as np
import pandas as pd
import pytest

from gsd.reproduce import dapo_fit


@pytest.fixture(scope="module")
def model():
    return dapo_fit.AllCorrectModel()  # shipped Big-Math, 32 samples


def test_model_interpolation_is_exact_to_rounding(model):
    T = np.geomspace(0.011, 9e4, 3000)
    exact = model.exact(T)
    assert np.abs(model(T) - exact).max() < 1e-9
    # the direct sum against a plain mean over all 215,608 problems
    from gsd import load_bigmath

    full = load_bigmath()
    for t in (1.0, 3.7, 25.0):
        assert float(model.exact(t)) == pytest.approx(np.mean(full ** (32 / t)), rel=1e-12)
    assert float(model.mean_solve_rate(1.0)) == pytest.approx(full.mean(), rel=1e-12)
    assert model.values.size == 65  # the histogram's distinct rates


def test_model_limits_and_inverse(model):
    assert model(1.0) == pytest.approx(model.exact(1.0))
    assert model.floor < model(1.0) < model(50.0) < model.ceiling
    for T in (1.0, 2.5, 10.0, 300.0):
        assert model.temperature_for(float(model.exact(T))) == pytest.approx(T, rel=1e-7)
    with pytest.raises(ValueError, match="plateau"):
        model.temperature_for(0.99)  # above P(p > 0): no competence reaches it
    with pytest.raises(ValueError, match="plateau"):
        model.temperature_for(0.01)  # below P(p = 1)


def test_competence_curve():
    assert dapo_fit.competence(0.0, 50.0, 8.0) == pytest.approx(1.0)
    assert dapo_fit.competence(1e6, 50.0, 8.0) == pytest.approx(8.0)
    assert dapo_fit.competence(50.0, 50.0, 8.0) == pytest.approx(1 + 7 * (1 - np.exp(-1)))
    assert dapo_fit.competence(5.0, 50.0, 8.0, start_step=10.0) == 1.0


@pytest.mark.parametrize("tau,T_inf", [(80.0, 10.0), (25.0, 3.0), (150.0, 40.0)])
def test_noise_free_curve_recovers_tau(model, tau, T_inf):
    # Run for 15 τ so the last 8 points sit on the plateau (pin bias ~ e^-14): exact recovery.
    steps = np.linspace(0, 15 * tau, 91)
    c = dapo_fit.synthetic_curve(tau=tau, T_inf=T_inf, steps=steps, noise_sd=0.0, model=model)
    fit = dapo_fit.fit_all_correct_curve(c.step, c.fraction, model=model, n_bootstrap=0)
    assert fit.tau == pytest.approx(tau, rel=1e-4)
    assert fit.T_inf == pytest.approx(T_inf, rel=1e-4)
    assert fit.r2 > 1 - 1e-8
    # the one-parameter model is the truth here; a generic exponential is not
    assert fit.generic2["r2"] < fit.r2


def test_noisy_recovery_within_the_noise(model):
    """|τ̂ − τ| within 4 bootstrap sd, and the bootstrap sd matches the spread over repeated noise."""
    tau, T_inf, sd = 80.0, 10.0, 0.005
    fits = []
    for seed in range(4):
        c = dapo_fit.synthetic_curve(tau=tau, T_inf=T_inf, noise_sd=sd, seed=seed, model=model)
        fit = dapo_fit.fit_all_correct_curve(c.step, c.fraction, model=model, n_bootstrap=60, seed=seed)
        assert abs(fit.tau - tau) <= 4 * fit.tau_boot_sd, (seed, fit.tau, fit.tau_boot_sd)
        assert fit.tau_ci[0] < fit.tau < fit.tau_ci[1]
        assert 0.9 < fit.r2 < 1 and fit.r2_ci[0] <= fit.r2_ci[1]
        fits.append(fit)
    # spread of τ̂ over 30 independent noise draws, against the bootstrap's estimate of it
    taus = [
        dapo_fit.fit_all_correct_curve(
            *_xy(dapo_fit.synthetic_curve(tau=tau, T_inf=T_inf, noise_sd=sd, seed=100 + s, model=model)),
            model=model,
            n_bootstrap=0,
        ).tau
        for s in range(30)
    ]
    spread = np.std(taus, ddof=1)
    boot = np.mean([f.tau_boot_sd for f in fits])
    assert 0.5 < boot / spread < 2.0
    assert abs(np.mean(taus) - tau) < 4 * spread / np.sqrt(30) + 0.01 * tau  # no gross bias


def _xy(df):
    return df.step.to_numpy(), df.fraction.to_numpy()


def test_other_distribution_and_sample_count():
    rng = np.random.default_rng(7)
    p = rng.beta(0.6, 0.8, 4000)
    m = dapo_fit.AllCorrectModel(p, n_samples=16)
    c = dapo_fit.synthetic_curve(tau=40.0, T_inf=5.0, steps=np.arange(0, 601, 6.0), noise_sd=0.0, model=m)
    fit = dapo_fit.fit_all_correct_curve(c.step, c.fraction, model=m, n_bootstrap=0)
    assert fit.tau == pytest.approx(40.0, rel=1e-4) and fit.n_samples == 16
    assert float(m.exact(1.0)) == pytest.approx(np.mean(p**16), rel=1e-12)


def test_unsaturated_run_is_flagged(model):
    c = dapo_fit.synthetic_curve(tau=300.0, T_inf=10.0, noise_sd=0.0, model=model)  # span = 2 τ
    fit = dapo_fit.fit_all_correct_curve(c.step, c.fraction, model=model, n_bootstrap=0)
    assert fit.saturation < 0.95  # the report shows how far the pin is from a true plateau


def test_summary_and_tables(model):
    c = dapo_fit.synthetic_curve(model=model, seed=1)
    fit = dapo_fit.fit_all_correct_curve(c.step, c.fraction, model=model, n_bootstrap=10)
    s = fit.summary()
    for key in ("tau", "tau_ci", "T_inf", "plateau", "r2", "r2_ci", "generic2_r2", "generic3_r2", "saturation"):
        assert key in s
    assert list(fit.table().columns) == ["quantity", "value"]
    assert list(fit.curve().columns) == ["step", "fraction", "model", "generic2", "competence"]
    t = dapo_fit.all_correct_curve_table(model=model, n_points=20)
    assert (np.diff(t.all_correct) > 0).all() and (t.homogeneous < t.all_correct).all()


@pytest.mark.parametrize(
    "steps,fraction,match",
    [
        (np.arange(20.0), np.r_[np.full(19, 0.2), np.nan], "fraction"),
        (np.r_[np.arange(19.0), 5.0], np.full(20, 0.2), "step"),
        (np.arange(8.0), np.full(8, 0.2), "at least"),
        (np.arange(20.0), np.r_[np.full(19, 0.2), 1.5], "fraction"),
        (np.arange(20.0), np.full(19, 0.2), "same length"),
    ],
)
def test_bad_curves_are_refused(model, steps, fraction, match):
    with pytest.raises(ValueError, match=match):
        dapo_fit.fit_all_correct_curve(steps, fraction, model=model, n_bootstrap=0)


def test_read_curve(tmp_path):
    path = tmp_path / "c.csv"
    pd.DataFrame({"step": [0, 1], "fraction": [0.1, 0.2]}).to_csv(path, index=False)
    s, f = dapo_fit.read_curve(path)
    assert list(s) == [0, 1] and list(f) == [0.1, 0.2]
    with pytest.raises(ValueError, match="no such file"):
        dapo_fit.read_curve(tmp_path / "nope.csv")
    with pytest.raises(ValueError, match="lacks column"):
        dapo_fit.read_curve(path, fraction_column="acc")


@pytest.mark.parametrize("level", [0.9, 0.95])
def test_bca_interval_is_scipys_on_the_same_replicates(level):
    """The BCa formula against scipy.stats.bootstrap's, fed the same bootstrap distribution (its
    ``bootstrap_result`` with no new resamples) on a skewed sample, where BCa and the percentile
    interval differ."""
    from types import SimpleNamespace

    from scipy import stats

    rng = np.random.default_rng(1)
    x = rng.lognormal(size=25)
    reps = rng.choice(x, size=(3000, x.size)).mean(axis=1)
    ref = stats.bootstrap(
        (x,),
        np.mean,
        n_resamples=0,
        method="BCa",
        confidence_level=level,
        bootstrap_result=SimpleNamespace(bootstrap_distribution=reps),
    ).confidence_interval
    ours = dapo_fit.bca_interval(x.mean(), reps, (x.sum() - x) / (x.size - 1), level)
    np.testing.assert_allclose(ours, (ref.low, ref.high), rtol=1e-12)
    assert not np.allclose(ours, np.percentile(reps, [50 * (1 - level), 50 * (1 + level)]), rtol=1e-3)
    assert np.isnan(dapo_fit.bca_interval(10.0, reps, x, level)).all()  # every replicate below: no interval


@pytest.mark.parametrize("noise_sd, last_step", [(0.05, 300.0), (0.01, 150.0), (0.02, 100.0)])
def test_noisy_curves_intervals_hold_their_estimates_or_say_why(model, noise_sd, last_step):
    """Noisy curves, and curves cut before their plateau (τ = 80): every interval holds its
    estimate, or a note names it and why.  The percentile interval left τ̂ outside, unexplained,
    on the two cut curves (54.6 outside [39.3, 50.9]; 38.7 outside [22.0, 37.8])."""
    c = dapo_fit.synthetic_curve(noise_sd=noise_sd, steps=np.arange(0.0, last_step + 1, 5.0), model=model)
    fit = dapo_fit.fit_all_correct_curve(c.step, c.fraction, model=model, n_bootstrap=100)
    for name, est, (lo, hi) in (("τ", fit.tau, fit.tau_ci), ("R²", fit.r2, fit.r2_ci)):
        assert lo <= est <= hi or any(
            n.startswith(f"{name}: the BCa interval") and "lie below it" in n for n in fit.notes
        ), (name, est, lo, hi, fit.notes)
    assert "(BCa)" in " ".join(fit.table()["quantity"])
