"""Per-step and per-prompt tables against a direct pandas/scipy computation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import betabinom

import gsd
from gsd.diagnose import diagnose, diagnose_log, read_rollouts
from gsd.diagnose.report import format_report
from gsd.integrations.verl import write_step as write_verl_step

from .conftest import direct_steps, rollouts, write_trl, write_verl


def _direct_predictions(df, prior):
    """Posterior before each step from cumulative counts, then scipy's beta-binomial pmf."""
    g = df.groupby(["step", "prompt"])["right"].agg(G="size", k="sum").reset_index()
    g = g.sort_values(["prompt", "step"])
    g["n_before"] = g.groupby("prompt")["G"].cumsum() - g["G"]
    g["k_before"] = g.groupby("prompt")["k"].cumsum() - g["k"]
    a = prior[0] + g["k_before"]
    b = prior[1] + g["n_before"] - g["k_before"]
    g["q"] = betabinom.pmf(0, g["G"], a, b) + betabinom.pmf(g["G"], g["G"], a, b)
    ks = np.arange(17)
    pmf = betabinom.pmf(ks[None, :], g["G"].to_numpy()[:, None], a.to_numpy()[:, None], b.to_numpy()[:, None])
    sig = (
        np.sqrt(np.clip(ks[None, :] * (g["G"].to_numpy()[:, None] - ks[None, :]), 0, None)) / g["G"].to_numpy()[:, None]
    )
    g["es"] = (pmf * sig).sum(axis=1)
    from scipy.special import beta as B

    g["scale"] = B(a + 0.5, b + 0.5) / B(a, b)
    return g


@pytest.mark.parametrize("fmt", ["verl", "trl"])
def test_step_numbers_equal_direct_computation(tmp_path, fmt):
    # TRL draws num_generations for every prompt; verl's table may mix sizes.
    df, _ = rollouts(graded=True, fixed_group_size=8 if fmt == "trl" else None)
    if fmt == "verl":
        write_verl(tmp_path, df, malformed_step=3)
        dx = diagnose(tmp_path, threshold=0.5, ddof=0, eps=0.0)  # the direct sums below use the paper's std
    else:
        write_trl(tmp_path, df)
        dx = diagnose(tmp_path, reward="accuracy_reward", threshold=0.5, ddof=0, eps=0.0)
    want = direct_steps(df, reward="score")
    got = dx.steps
    np.testing.assert_array_equal(got["step"], want["step"])
    for col, ref in (
        ("groups", "groups"),
        ("rollouts", "rollouts"),
        ("silent_groups", "silent"),
        ("wasted_rollouts", "wasted"),
    ):
        np.testing.assert_array_equal(got[col], want[ref], err_msg=col)
    np.testing.assert_allclose(got["silent_frac"], want["silent_frac"], rtol=1e-12)
    np.testing.assert_allclose(got["effective_gradient_ratio"], 1 - want["wasted"] / want["rollouts"], rtol=1e-12)

    prior = (dx.summary["prior"]["a"], dx.summary["prior"]["b"])
    direct = _direct_predictions(df, prior)
    per_step = direct.groupby("step").agg(q=("q", "mean"), es=("es", "sum"), scale=("scale", "sum"))
    np.testing.assert_allclose(got["silent_pred"], per_step["q"], rtol=1e-9)
    np.testing.assert_allclose(got["fidelity"], per_step["es"] / per_step["scale"], rtol=1e-9)
    assert dx.summary["bad_rows"] == (1 if fmt == "verl" else 0)


def test_prior_is_the_run_fit_and_prompts_table(tmp_path):
    df, p_true = rollouts()
    write_verl(tmp_path, df)
    dx = diagnose(tmp_path, epsilon=0.1, level=0.8)
    totals = df.groupby("prompt")["right"].agg(["sum", "size"])
    a, b = gsd.fit_beta_prior(totals["sum"], totals["size"])
    assert dx.summary["prior"]["a"] == pytest.approx(a) and dx.summary["prior"]["b"] == pytest.approx(b)
    pr = dx.prompts.set_index("prompt").loc[totals.index]
    np.testing.assert_array_equal(pr["rollouts"], totals["size"])
    np.testing.assert_array_equal(pr["right"], totals["sum"])
    post = gsd.posterior_from_counts(totals["sum"].to_numpy(), totals["size"].to_numpy(), prior=(a, b))
    np.testing.assert_allclose(pr["p_mean"], post.mean, rtol=1e-12)
    lo, hi = post.interval(0.8)
    np.testing.assert_allclose(pr["p_lo"], lo, rtol=1e-12)
    np.testing.assert_array_equal(pr["group_size"], gsd.required_group_size(post.mean, 0.1))
    g = df.groupby(["prompt", "step"])["right"].agg(["sum", "size"])
    silent = ((g["sum"] == 0) | (g["sum"] == g["size"])).groupby("prompt").sum()
    np.testing.assert_array_equal(pr["silent_steps"], silent.loc[totals.index])


def test_first_step_predicted_from_prior_alone(tmp_path):
    df, _ = rollouts()
    write_verl(tmp_path, df)
    dx = diagnose(tmp_path, prior="uniform")
    first = dx.groups[dx.groups["step"] == 1]
    assert (first["n_before"] == 0).all()
    # Uniform prior: P(silent) = 2/(G + 1) for every group.
    np.testing.assert_allclose(first["silent_pred"], 2.0 / (first["G"] + 1), rtol=1e-12)


def test_graded_rewards_need_a_threshold_for_predictions_only(tmp_path):
    df, _ = rollouts(graded=True, steps=2)
    write_verl(tmp_path, df)
    dx = diagnose(tmp_path)
    assert dx.steps["silent_pred"].isna().all() and dx.summary["prior"] is None
    assert "p_mean" not in dx.prompts and any("--threshold" in w for w in dx.summary["warnings"])
    with pytest.raises(ValueError, match="graded .* --threshold"):
        gsd.diagnose.binarise(df["score"])


def test_two_valued_scores_map_to_right_and_wrong(tmp_path):
    df, _ = rollouts(steps=3)
    write_verl(tmp_path, df.assign(score=2 * df["score"] - 1))  # verl-style −1 / +1
    dx = diagnose(tmp_path)
    assert "1 counts as right, -1 as wrong" in dx.summary["rewards_as"]
    np.testing.assert_array_equal(dx.steps["silent_groups"], direct_steps(df)["silent"])


def test_singletons_counted_apart_and_no_groups_is_an_error(tmp_path):
    df, _ = rollouts(steps=3, prompts=50)
    one = df[df["step"] == 2].drop_duplicates("prompt")  # step 2: one rollout per prompt
    mixed = pd.concat([df[df["step"] != 2], one])
    write_verl(tmp_path / "mixed", mixed)
    dx = diagnose(tmp_path / "mixed")
    row = dx.steps.set_index("step").loc[2]
    assert row["groups"] == 0 and row["singletons"] == len(one) and np.isnan(row["silent_frac"])
    assert dx.summary["steps_without_groups"] == [2]
    assert dx.summary["singletons"] == len(one)
    write_verl(tmp_path / "single", one)
    with pytest.raises(ValueError, match="no prompt has two or more rollouts"):
        diagnose(tmp_path / "single")


def test_missing_prompts_keep_their_history(tmp_path):
    df, _ = rollouts(steps=4, prompts=40)
    write_verl(tmp_path, df)
    log = read_rollouts(tmp_path)
    dx = diagnose_log(log)
    g = dx.groups
    seen = df.groupby("prompt")["step"].nunique()
    # A prompt's n_before at a step is the number of its rollouts at earlier steps, skipped steps included.
    label = log.labels[g["prompt"]]
    for lab, step, n_before in zip(label[:200], g["step"][:200], g["n_before"][:200]):
        assert n_before == int(((df["prompt"] == lab) & (df["step"] < step)).sum())
    assert (seen < 4).any()  # some prompts are missing on some steps


def test_half_life_discounts_against_a_direct_loop(tmp_path):
    df, _ = rollouts(steps=6, prompts=60, seed=3)
    df = df[~((df["step"] == 4) & (df["prompt"].str.contains(" 1")))]  # gaps: some prompts skip step 4
    write_verl(tmp_path, df)
    h = 2.5
    dx = diagnose(tmp_path, half_life=h, prior=(1.0, 1.0))
    g = dx.groups
    labels = read_rollouts(tmp_path).labels
    counts = df.groupby(["prompt", "step"])["right"].agg(["size", "sum"])
    for row in g.sample(80, random_state=0).itertuples():
        past = counts.loc[labels[row.prompt]]
        past = past[past.index < row.step]
        w = 2.0 ** (-(row.step - past.index.to_numpy()) / h)
        assert row.n_eff == pytest.approx((w * past["size"]).sum(), rel=1e-12, abs=1e-300)
        assert row.k_eff == pytest.approx((w * past["sum"]).sum(), rel=1e-12, abs=1e-300)
        assert row.a == pytest.approx(1.0 + row.k_eff) and row.b == pytest.approx(1.0 + row.n_eff - row.k_eff)
    # Per prompt: every group weighs 2^(−age/h), age counted from the last step.
    pr = dx.prompts.set_index("prompt")
    for lab in labels[:20]:
        c = counts.loc[lab]
        w = 2.0 ** (-(6 - c.index.to_numpy()) / h)
        assert pr.loc[lab, "p_mean"] == pytest.approx(
            (1 + (w * c["sum"]).sum()) / (2 + (w * c["size"]).sum()), rel=1e-12
        )
    with pytest.raises(ValueError, match="half_life"):
        diagnose(tmp_path, half_life=0)


def test_budget_plan_is_gsd_plans_default(tmp_path):
    """diagnose --budget and plan --budget share one default plan (gsd.allocation.DEFAULT_PLAN, uniform G)."""
    from gsd.allocation import DEFAULT_PLAN, budget_plan

    df, _ = rollouts(steps=3, prompts=80)
    write_verl(tmp_path, df)
    dx = diagnose(tmp_path, budget=640)
    a, b = dx.summary["prior"]["a"], dx.summary["prior"]["b"]
    pr = dx.prompts
    post = gsd.posterior_from_counts(pr["right"].to_numpy(), pr["rollouts"].to_numpy(), prior=(a, b))
    assert DEFAULT_PLAN == "uniform" and dx.summary["budget_plan"] == DEFAULT_PLAN
    np.testing.assert_array_equal(pr["group_size_budget"], budget_plan(post, 640).group_size)
    np.testing.assert_array_equal(pr["group_size_budget"], gsd.uniform_plan(post, 640).group_size)
    assert pr["group_size_budget"].sum() <= 640


def test_headline_is_the_advised_group_size(tmp_path):
    """The summary's advice is gsd.group_size_advice over the prompts' posteriors at the run's prompts per step;
    the fidelity law is reported under its own name, never as the advice."""
    df, _ = rollouts(steps=3, prompts=80)
    write_verl(tmp_path, df)
    dx = diagnose(tmp_path)
    s, pr = dx.summary, dx.prompts
    post = gsd.BetaPosterior(pr["a"].to_numpy(), pr["b"].to_numpy(), (s["prior"]["a"], s["prior"]["b"]))
    n_step = int(np.median(dx.steps["groups"]))
    want = gsd.group_size_advice(
        post,
        prompts_per_step=n_step,
        g_grid=(2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64),
        ddof=s["update_convention"]["ddof"],
        eps=s["update_convention"]["eps"],
    )
    assert s["advised_group_size"] == want.advised_G_per_generation == s["advice"]["advised_G_per_generation"]
    assert s["advice"]["best_G_per_generation"] == want.best_G_per_generation
    assert s["advice"]["optimizer"] == "adam" and s["advice"]["hold"] == "prompts"
    assert s["advice"]["prompts_per_step"] == n_step and s["advised_group_size_per_second"] is None
    assert s["fidelity_group_size"] == s["median_group_size_recommended"] == gsd.median_group_size(pr["p_mean"], 0.05)
    text = format_report(dx, verbose=True)
    assert text.splitlines()[1].startswith(f"Advised: uniform G = {want.advised_G_per_generation} answers per prompt")
    assert "1.7-3.3" not in text and "within 16" not in text  # no fixed sentence of measured ratios
    assert "Fidelity law (not the advice)" in text and "Recommended group sizes" not in text
    with_cost = diagnose(tmp_path, cost=gsd.StepCost(60.0, 0.0, 0.001), optimizer="sgd")
    sgd = gsd.group_size_advice(
        post,
        prompts_per_step=n_step,
        g_grid=(2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64),
        optimizer="sgd",
        cost=gsd.StepCost(60.0, 0.0, 0.001),
        ddof=s["update_convention"]["ddof"],
        eps=s["update_convention"]["eps"],
    )
    assert with_cost.summary["advised_group_size_per_second"] == sgd.advised_G_per_second
    assert "per second: G = " in format_report(with_cost, verbose=True)


def test_advice_also_holding_the_runs_generations_per_step():
    """Beside the prompts-held advice, the same posteriors at the run's generations per step held fixed
    (prompts per step x its G), on the grid a step of that size can hold."""
    from gsd.resources import example_logs

    dx = diagnose(example_logs() / "trl")
    s, pr = dx.summary, dx.prompts
    G, n_step = s["group_size"], int(np.median(dx.steps["groups"]))
    post = gsd.BetaPosterior(pr["a"].to_numpy(), pr["b"].to_numpy(), (s["prior"]["a"], s["prior"]["b"]))
    B = n_step * G
    grid = [g for g in (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64) if g <= B]
    want = gsd.group_size_advice(
        post,
        hold="generations",
        generations_per_step=B,
        g_grid=grid,
        ddof=s["update_convention"]["ddof"],
        eps=s["update_convention"]["eps"],
    )
    gen = s["advice_holding_generations"]
    assert gen["hold"] == "generations" and gen["generations_per_step"] == B
    assert gen["advised_G_per_generation"] == want.advised_G_per_generation
    assert f"holding generations per step instead ({B} per step" in format_report(dx, verbose=True)


def test_batch_advice_with_the_runs_noise_scale():
    """--noise-scale and --run-lr: the report's first advice line names B, G and lr, from
    gsd.core.advice.batch_advice at the run's generations per step over the posterior means."""
    from gsd.core.advice import batch_advice
    from gsd.diagnose.report import format_report
    from gsd.resources import example_logs

    dx = diagnose(example_logs() / "trl", noise=(40.0, 20.0, 80.0), run_lr=1e-6)
    s, pr = dx.summary, dx.prompts
    G, n_step = s["group_size"], int(np.median(dx.steps["groups"]))
    post = gsd.BetaPosterior(pr["a"].to_numpy(), pr["b"].to_numpy(), (s["prior"]["a"], s["prior"]["b"]))
    want = batch_advice(
        post.mean,
        (40.0, 20.0, 80.0),
        generations_per_step=n_step * G,
        group_size=G,
        lr=1e-6,
        g_grid=(2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64),
        ddof=s["update_convention"]["ddof"],
        eps=s["update_convention"]["eps"],
    )
    got = s["batch_advice"]
    assert (got["B_per_generation"], got["G"]) == (want.B_per_generation, want.G)
    assert got["lr_per_generation"] == pytest.approx(want.lr_per_generation)
    head = format_report(dx).splitlines()[1]
    assert head.startswith(f"Advised: B = {want.B_per_generation} generations per step, G = {want.G}, lr ")


def test_batch_advice_on_a_table_grouped_by_prompt(tmp_path):
    """A table log grouped by prompt has no reader's G: --noise-scale takes the run's G from its rows (the
    same rollouts per group at every step) and gives the advice TRL's own log of the same run gets; a log
    whose groups differ in size is refused, naming the sizes (it used to ask for --group-size, which the
    table format refuses)."""
    import pandas as pd

    from gsd.resources import example_logs

    table = pd.read_csv(example_logs() / "rollouts.csv")
    kw = {"prompt_col": "qid", "reward": "r", "step_col": "it", "noise": (40.0, 20.0, 80.0), "run_lr": 1e-6}
    dx = diagnose(example_logs() / "rollouts.csv", **kw)
    sizes = table.groupby(["it", "qid"]).size()
    assert (sizes == 4).all()  # the shipped table: one G at every step
    got = dx.summary["batch_advice"]
    assert got["run"]["G"] == 4 and got["run"]["B"] == 4 * int(np.median(dx.steps["groups"]))
    uneven = tmp_path / "uneven.csv"
    table.iloc[:-1].to_csv(uneven, index=False)
    with pytest.raises(gsd.InputError, match=r"one group size G .* 3\.88–4 rollouts per group"):
        diagnose(uneven, **kw)


@pytest.mark.parametrize("a, b", [(1e-3, 50.0), (0.02, 0.01), (300.0, 1e-2), (5.0, 5.0), (2e5, 3e5)])
def test_expected_scale_against_mpmath(a, b):
    mpmath = pytest.importorskip("mpmath")
    from gsd.core.posterior import expected_scale

    mpmath.mp.dps = 40
    want = mpmath.beta(a + 0.5, b + 0.5) / mpmath.beta(a, b)
    assert expected_scale(a, b) == pytest.approx(float(want), rel=1e-9)


@pytest.mark.parametrize("p", [0.05, 0.3, 0.9])
def test_known_p_limit_of_the_predictions(tmp_path, p):
    """With a prior concentrated at p (and no history), the predictions are the known-p closed forms."""
    df, _ = rollouts(steps=1, prompts=50)
    write_verl(tmp_path, df)
    s = 1e7  # Var p = p(1−p)/s moves every expectation by O(G²/s)
    dx = diagnose(tmp_path, prior=(p * s, (1 - p) * s))
    conv = dx.summary["update_convention"]  # a verl log: verl's std (ddof 1, eps 1e-6)
    assert (conv["ddof"], conv["eps"]) == (1, 1e-6)
    g = dx.groups
    G = g["G"].to_numpy()
    update = gsd.expected_update(p, G, "grpo", ddof=1, eps=1e-6)
    np.testing.assert_allclose(g["silent_pred"], gsd.silent_rate(p, G), rtol=1e-4)
    np.testing.assert_allclose(g["sigma_pred"], update, rtol=1e-4)
    want = update.sum() / (len(G) * np.sqrt(p * (1 - p)))
    assert dx.steps["fidelity"].iloc[0] == pytest.approx(want, rel=1e-4)
    np.testing.assert_allclose(dx.steps["fidelity_plugin"].iloc[0], gsd.fidelity(p, G).mean(), rtol=1e-4)


def test_auto_half_life_scores_against_a_direct_sum(tmp_path):
    from scipy.stats import betabinom

    from gsd.core.forgetting import HALF_LIVES

    df, _ = rollouts(steps=6, prompts=60, seed=3)
    df = df[~((df["step"] == 4) & (df["prompt"].str.contains(" 1")))]  # gaps: some prompts skip step 4
    write_verl(tmp_path, df)
    dx = diagnose(tmp_path, half_life="auto", prior=(1.0, 1.0))
    choice = dx.summary["half_life_choice"]
    counts = df.groupby(["prompt", "step"])["right"].agg(["size", "sum"])
    want = []
    for h in HALF_LIVES:  # every group of a prompt seen before, scored by its posterior before the step
        total = 0.0
        for prompt, c in counts.groupby(level=0):
            c = c.droplevel(0)
            for t in c.index[1:]:
                past = c[c.index < t]
                w = np.ones(len(past)) if h is None else 2.0 ** (-(t - past.index.to_numpy()) / h)
                ke, ne = (w * past["sum"]).sum(), (w * past["size"]).sum()
                total += betabinom.logpmf(c.loc[t, "sum"], c.loc[t, "size"], 1.0 + ke, 1.0 + ne - ke)
        want.append(total)
    assert choice["candidates"] == list(HALF_LIVES)
    assert choice["log_score"] == pytest.approx(want, rel=1e-10)
    assert dx.summary["half_life"] == HALF_LIVES[int(np.argmax(want))]
    # The groups and prompts are those of that half-life, as if it had been given.
    given = diagnose(tmp_path, half_life=dx.summary["half_life"], prior=(1.0, 1.0))
    pd.testing.assert_frame_equal(dx.groups, given.groups)


def _moving_log(folder, drift, *, prompts=100, steps=12, G=8, seed=0):
    """A verl dump whose solve rates climb by ``drift`` on the logit scale per step; the true p."""
    rng = np.random.default_rng(seed)
    logit0 = rng.normal(-1.0, 1.5, prompts)
    truth = {}
    for step in range(1, steps + 1):
        p = 1.0 / (1.0 + np.exp(-(logit0 + drift * (step - 1))))
        truth[step] = p
        pid = np.repeat(np.arange(prompts), G)
        right = (rng.random(pid.size) < p[pid]).astype(float)
        write_verl_step(folder, step, [f"q{i}" for i in pid], right)
    return truth


@pytest.mark.parametrize("drift", [0.0, 0.6])
def test_auto_half_life_forgets_when_the_policy_learns(tmp_path, drift):
    from gsd.core.posterior import BetaPosterior

    truth = _moving_log(tmp_path, drift)
    coverage = {}
    for h in (None, "auto"):
        dx = diagnose(tmp_path, half_life=h)
        g = dx.groups
        seen = (g["n_before"] > 0).to_numpy()
        x = np.array([int(s[1:]) for s in dx.prompts["prompt"]])[g["prompt"].to_numpy()]
        p = np.array([truth[s][i] for s, i in zip(g["step"], x)])
        lo, hi = BetaPosterior(g["a"].to_numpy(), g["b"].to_numpy(), (np.nan, np.nan)).interval(0.9)
        coverage[h] = float(((lo <= p) & (p <= hi))[seen].mean())
    chosen = dx.summary["half_life"]
    if drift == 0:  # a fixed policy: counting everything (or nearly) predicts best
        assert chosen is None or chosen >= 16, dx.summary["half_life_choice"]
    else:  # a learning one: a short memory, and intervals that cover the current p far more often
        assert chosen is not None and chosen <= 4, dx.summary["half_life_choice"]
        assert coverage["auto"] > coverage[None] + 0.2, coverage


def test_auto_half_life_needs_right_wrong_rewards(tmp_path):
    df, _ = rollouts(steps=3, prompts=30, seed=1, graded=True)
    write_verl(tmp_path, df, extra=False)  # graded scores, no right/wrong column, no threshold
    with pytest.raises(ValueError, match="half_life = 'auto'.*right/wrong"):
        diagnose(tmp_path, half_life="auto")
    assert diagnose(tmp_path, half_life="auto", threshold=0.5).summary["half_life_choice"]["groups_scored"] > 0
    with pytest.raises(ValueError, match="half_life"):
        diagnose(tmp_path, half_life="soon")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(1e-2, 1e3), st.floats(1e-2, 1e3)), min_size=1, max_size=30))
def test_prompt_verdicts_follow_their_definition(ab):
    """starved ⇔ P(p < 0.05) > 0.9, saturated ⇔ P(p > 0.95) > 0.9, learning ⇔ P(0.05 ≤ p ≤ 0.95) > 0.9,
    each probability from scipy.stats.beta's own cdf / sf."""
    from scipy.stats import beta

    from gsd.diagnose.tables import prompt_verdicts

    a, b = np.array(ab).T
    below, above, words = prompt_verdicts(a, b)
    np.testing.assert_allclose(below, beta.cdf(0.05, a, b), rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(above, beta.sf(0.95, a, b), rtol=1e-12, atol=1e-300)
    lo, hi = beta.cdf(0.05, a, b), beta.sf(0.95, a, b)
    want = np.where(
        lo > 0.9, "starved", np.where(hi > 0.9, "saturated", np.where(1 - lo - hi > 0.9, "learning", "unsure"))
    )
    assert words.tolist() == want.tolist()


def test_the_report_puts_the_verdicts_beside_the_posteriors(tmp_path):
    from gsd.diagnose import diagnose, format_report

    rng = np.random.default_rng(0)
    p = np.repeat([0.0, 1.0, 0.5], 10)
    frame = pd.DataFrame(
        {"prompt": np.repeat(np.arange(30), 8 * 6) % 30, "step": np.tile(np.repeat(np.arange(6), 8), 30)}
    )
    frame["reward"] = (rng.random(len(frame)) < p[frame["prompt"]]).astype(float)
    frame.to_csv(tmp_path / "log.csv", index=False)
    dx = diagnose(tmp_path / "log.csv", reward="reward", progress=False)
    verdict = dx.prompts.set_index("prompt")["verdict"]
    assert (verdict[[str(i) for i in range(10)]] == "starved").all()
    assert (verdict[[str(i) for i in range(10, 20)]] == "saturated").all()
    assert (verdict[[str(i) for i in range(20, 30)]] == "learning").all()
    text = format_report(dx)
    assert "Prompts: 10 starved, 10 saturated, 10 learning, 0 unsure" in text and text.count(" starved\n") >= 1


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from([0.0, 1.0]), min_size=1, max_size=40),
    st.sampled_from([-1.0, 0.0]),
    st.lists(st.integers(0, 40), max_size=5),
    st.sampled_from([np.nan, np.inf, -np.inf]),
)
def test_unscorable_rows_never_change_right_wrong(values, low, where, bad):
    """NaN or ±inf rows (TRL's None, a padding row) leave the other rows' right/wrong and the
    note's kind as they are: a binary log stays binary."""
    reward = np.where(np.array(values) == 1.0, 1.0, low)
    marked = np.insert(reward, [min(i, reward.size) for i in where], bad)
    finite = np.isfinite(marked)
    want, note = gsd.diagnose.binarise(reward)
    got, got_note = gsd.diagnose.binarise(marked)
    assert got[finite].tolist() == want.tolist() and not got[~finite].any()
    assert got_note.split(";")[0] == note
