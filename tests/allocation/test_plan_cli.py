"""`gsd plan --budget` and gsd.io.input_tables: rows kept in place, columns kept, errors exit 2."""

import json
import re

import numpy as np
import pandas as pd
import pytest

import gsd
from gsd.cli import main
from gsd.io import input_tables as tables


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def counts_csv(tmp_path):
    df = pd.DataFrame(
        {
            "id": ["a", "b", "c", "d", "e", "f", "g"],
            "note": list("ABCDEFG"),
            "k": [0, 3, None, 9, 8, -1, 5],
            "n": [8, 8, 8, 8, 8, 8, 16],
        }
    )
    path = tmp_path / "counts.csv"
    df.to_csv(path, index=False)
    return path


def test_counts_input_keeps_rows_columns_and_order(capsys, counts_csv):
    code, out, err = _run(
        capsys,
        "plan",
        "--input",
        str(counts_csv),
        "--k-column",
        "k",
        "--n-column",
        "n",
        "--budget",
        "40",
        "--g-max",
        "32",
        "--json",
        "--value",
        "update",
    )
    assert code == 0, err
    res = json.loads(out)
    rows = pd.DataFrame(res["rows"])
    assert rows["id"].tolist() == list("abcdefg") and rows["note"].tolist() == list("ABCDEFG")
    st = dict(zip(rows.id, rows.status))
    assert st["c"] == "missing k" and st["d"] == "k > n" and st["f"] == "k below 0"
    good = rows[rows.status.isin(["planned", "skipped"])]
    assert len(good) == 4 and rows.loc[~rows.status.isin(["planned", "skipped"]), "group_size"].isna().all()
    assert good.group_size.sum() <= 40
    # The plan equals the library's on the usable rows, with the posterior fitted to them alone.
    post = gsd.posterior_from_counts([0, 3, 8, 5], [8, 8, 8, 16])
    plan = gsd.allocate_group_sizes(post, 40, g_max=32)
    assert good.group_size.tolist() == plan.group_size.tolist()
    np.testing.assert_allclose(good.expected_value, plan.value, rtol=1e-12)
    np.testing.assert_allclose(good.posterior_mean, post.mean, rtol=1e-12)
    served = plan.group_size > 0
    sub = gsd.BetaPosterior(post.a[served], post.b[served], post.prior)
    np.testing.assert_allclose(good.silent_probability[served], gsd.expected_silent_rate(sub, plan.group_size[served]))
    assert res["summary"]["unusable_rows"] == 3 and res["summary"]["spent"] == plan.spent


def test_table_output_and_file(capsys, counts_csv, tmp_path):
    out_path = tmp_path / "plan.parquet"
    code, out, err = _run(
        capsys,
        "plan",
        "--input",
        str(counts_csv),
        "--k-column",
        "k",
        "--n-column",
        "n",
        "--budget",
        "40",
        "--output",
        str(out_path),
        "--advice",
    )
    assert code == 0, err
    assert "3 rows not usable (0-based): 2 (missing k), 3 (k > n), 5 (k below 0)" in out
    assert "uniform G" in out
    df = pd.read_parquet(out_path)
    assert list(df.columns[:4]) == ["id", "note", "k", "n"] and len(df) == 7


def test_per_rollout_table_grouped_by_prompt(capsys, tmp_path):
    rng = np.random.default_rng(0)
    ids = rng.choice(["q1", "q2", "q3", "q4"], size=80)
    reward = rng.integers(0, 2, size=80).astype(float)
    reward[5] = np.nan
    reward[7] = 0.5
    path = tmp_path / "rollouts.jsonl"
    pd.DataFrame({"prompt": ids, "reward": reward}).to_json(path, orient="records", lines=True)
    code, out, err = _run(
        capsys,
        "plan",
        "--input",
        str(path),
        "--prompt-column",
        "prompt",
        "--budget",
        "32",
        "--value",
        "knapsack",
        "--json",
    )
    assert code == 0, err
    rows = pd.DataFrame(json.loads(out)["rows"])
    first_seen = list(dict.fromkeys(ids))
    assert rows.prompt.tolist() == first_seen
    for _, r in rows.iterrows():
        mine = (ids == r.prompt) & np.isin(reward, [0, 1])
        assert r.rollouts == mine.sum() and r.right == reward[mine].sum()
    assert rows.bad_rollouts.sum() == 2


def test_rates_input_and_plain_p(capsys):
    code, out, err = _run(
        capsys, "plan", "--p", "0.02,0.5,0.98,0.3", "--budget", "32", "--g-max", "16", "--json", "--value", "update"
    )
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert [r["group_size"] for r in rows] == [6, 9, 6, 11]


def test_trainer_std_convention_flows_to_the_plan(capsys):
    """--ddof/--eps value groups as that trainer updates them: the API's plan, and another one."""
    p = [0.02, 0.1, 0.3, 0.5, 0.7, 0.9, 0.98]
    argv = ["plan", "--p", ",".join(map(str, p)), "--budget", "16", "--g-max", "16", "--json", "--value", "update"]
    code, out, err = _run(capsys, *argv, "--ddof", "1", "--eps", "1e-4")
    assert code == 0, err
    got = json.loads(out)
    want = gsd.allocate_group_sizes(p, 16, g_max=16, ddof=1, eps=1e-4)
    assert [r["group_size"] for r in got["rows"]] == want.group_size.tolist()
    assert got["summary"]["ddof"] == 1 and got["summary"]["eps"] == 1e-4
    np.testing.assert_allclose([r["expected_value"] for r in got["rows"]], want.value, rtol=1e-12)
    paper = gsd.allocate_group_sizes(p, 16, g_max=16).group_size.tolist()
    assert paper != want.group_size.tolist()  # the convention changes the plan: no pair under ddof 1
    assert 2 in paper and 2 not in want.group_size.tolist()


@pytest.mark.parametrize(
    "argv,match",
    [
        (["--p", "0.5,0.2", "--budget", "1"], "budget must be >= g_min"),
        (["--p", "0.5,0.2", "--budget", "10", "--g-min", "8", "--g-max", "4"], "g_min must be <= g_max"),
        (["--p", "0.5,0.2", "--budget", "10", "--g-min", "2", "--g-max", "9", "--step", "2"], "step must divide"),
        (["--p", "0.5", "--budget", "10", "--value", "dapo"], "value must be one of"),
        (["--p", "0.5", "--budget", "10", "--epsilon", "0.05"], "does not take --epsilon"),
        (["--p", "0.5"], "give a target"),
        (["--p", "0.5", "--budget", "10", "--ddof", "2"], "ddof must be 0"),
        (["--p", "0.5", "--budget", "10", "--eps", "-1"], "eps must be a finite number"),
    ],
)
def test_errors_exit_2_with_one_line(capsys, argv, match):
    code, out, err = _run(capsys, "plan", *argv)
    assert code == 2 and err.count("\n") == 1
    assert re.search(match, err), err


def test_nan_rate_is_an_unusable_row_not_a_shift(capsys):
    code, out, err = _run(capsys, "plan", "--p", "0.5,nan,0.3", "--budget", "10", "--json")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert [r["status"] for r in rows] == ["planned", "missing p", "planned"]
    assert rows[1]["group_size"] is None
    code, out, err = _run(capsys, "plan", "--p", "nan", "--budget", "10")
    assert code == 2 and "no usable row" in err


def test_missing_column_lists_the_columns(capsys, counts_csv):
    code, out, err = _run(
        capsys, "plan", "--input", str(counts_csv), "--k-column", "right", "--n-column", "n", "--budget", "40"
    )
    assert code == 2 and "'right' is not a column" in err and "'id', 'note', 'k', 'n'" in err


def test_numeric_column_statuses():
    df = pd.DataFrame({"x": [0.5, None, "abc", np.inf, 1.5, -0.1, 2.0]})
    v, st = tables.numeric_column(df, "x", lo=0, hi=1)
    assert st.tolist() == ["ok", "missing x", "x not a number", "x not finite", "x above 1", "x below 0", "x above 1"]
    assert np.isnan(v[1:]).all() and v[0] == 0.5
    k, n, st = tables.counts_from_columns(pd.DataFrame({"k": [1, 2.5, 3], "n": [2, 4, 2]}), "k", "n")
    assert st.tolist() == ["ok", "k not an integer", "k > n"]
    assert tables.describe_bad_rows(["ok", "ok"]) == ""


def test_advice_states_the_comparison_verdict(capsys, counts_csv):
    from gsd.allocation.cli import EVIDENCE

    argv = ("plan", "--input", str(counts_csv), "--k-column", "k", "--n-column", "n", "--budget", "40", "--advice")
    code, out, err = _run(capsys, *argv, "--verbose")
    assert code == 0, err
    words = " ".join(out.split())  # the report wraps it at 100 columns
    assert EVIDENCE in words
    assert "every plan from logged counts at 8 rollouts per prompt per step lost to it" in words
    code, out, err = _run(capsys, *argv)  # by default, a line says where it is
    assert code == 0 and EVIDENCE not in " ".join(out.split()) and "--verbose (the evidence" in out
    code, out, err = _run(
        capsys,
        "plan",
        "--input",
        str(counts_csv),
        "--k-column",
        "k",
        "--n-column",
        "n",
        "--budget",
        "40",
        "--advice",
        "--json",
    )
    assert json.loads(out)["evidence"] == EVIDENCE


def test_horizon_value_takes_lr_and_horizon(capsys):
    code, out, err = _run(
        capsys,
        "plan",
        "--p",
        "0.02,0.3,0.5,0.9",
        "--budget",
        "32",
        "--g-max",
        "16",
        "--value",
        "horizon",
        "--lr",
        "0.5",
        "--horizon",
        "50",
        "--json",
    )
    assert code == 0, err
    got = [r["group_size"] for r in json.loads(out)["rows"]]
    want = gsd.allocate_group_sizes([0.02, 0.3, 0.5, 0.9], 32, g_max=16, value="horizon", lr=0.5, horizon=50)
    assert got == want.group_size.tolist()
    code, out, err = _run(capsys, "plan", "--p", "0.3", "--budget", "32", "--value", "horizon")
    assert code == 2 and "lr" in err
    code, out, err = _run(capsys, "plan", "--p", "0.3", "--budget", "32", "--lr", "0.5")
    assert code == 2 and "--lr and --horizon" in err


def test_a_file_of_prompts_prints_its_summary_not_its_rows(capsys, tmp_path):
    """300 prompts: a summary, the G distribution and where the rows are; --show-rows prints them all."""
    rng = np.random.default_rng(0)
    n = np.full(300, 8)
    path = tmp_path / "counts.csv"
    pd.DataFrame(
        {"prompt": [f"q{i}" for i in range(300)], "k": rng.binomial(n, rng.beta(0.6, 0.6, 300)), "n": n}
    ).to_csv(path, index=False)
    argv = ("plan", "--input", str(path), "--k-column", "k", "--n-column", "n", "--budget", "2400")
    code, out, err = _run(capsys, *argv)
    assert code == 0, err
    assert len(out.splitlines()) < 10 and "q299" not in out
    assert "300 rows not printed: --output FILE writes them" in out
    code, js, err = _run(capsys, *argv, "--json")
    sizes = np.array([r["group_size"] for r in json.loads(js)["rows"]])
    served = sizes[sizes > 0]
    assert f"G over the {served.size} served prompts: min {served.min()}, median {np.median(served):g}, " in out
    assert f"max {served.max()}" in out
    code, out, err = _run(capsys, *argv, "--show-rows")
    assert code == 0 and "q0" in out and "q299" in out and len(out.splitlines()) > 300


def test_advice_is_a_summary_with_the_full_tables_in_the_file(capsys, tmp_path):
    """--advice prints a few lines (issue: 522 before); the full tables go beside --output and into --json."""
    p = "0.02,0.1,0.3,0.5,0.7,0.9"
    code, out, err = _run(capsys, "plan", "--p", p, "--budget", "48", "--advice")
    assert code == 0, err
    assert len(out.splitlines()) < 20
    want = gsd.group_size_advice(
        [0.02, 0.1, 0.3, 0.5, 0.7, 0.9],
        prompts_per_step=6,
        g_grid=[2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512],
    )
    assert out.startswith(f"Advised: uniform G = {want.advised_G_per_generation} answers per prompt")
    assert "prompts per step held fixed; Adam;" in out
    path = tmp_path / "plan.csv"
    code, out, err = _run(
        capsys,
        "plan",
        "--p",
        p,
        "--budget",
        "48",
        "--advice",
        "--output",
        str(path),
        "--cost",
        "30,0,0.01",
        "--optimizer",
        "sgd",
    )
    assert code == 0, err
    full = pd.read_csv(tmp_path / "plan.advice.csv")
    sgd = gsd.group_size_advice(
        [0.02, 0.1, 0.3, 0.5, 0.7, 0.9],
        prompts_per_step=6,
        optimizer="sgd",
        cost=gsd.StepCost(30.0, 0.0, 0.01),
        g_grid=want.table.G.to_numpy(),
    )
    got = full.dropna(subset=["progress_per_generation"]).reset_index(drop=True)
    np.testing.assert_allclose(got.progress_per_second, sgd.table.progress_per_second, rtol=1e-12)
    assert f"Fastest uniform G per second: {sgd.advised_G_per_second}" in out
    assert full.value_value_per_rollout.notna().sum() == 511  # the value-per-rollout curve, G = 2 … 512
    code, out, err = _run(capsys, "plan", "--p", p, "--budget", "48", "--advice", "--json", "--hold", "generations")
    res = json.loads(out)
    assert code == 0 and res["summary"]["speed"]["hold"] == "generations" and len(res["speed"]) > 1
    code, out, err = _run(capsys, "plan", "--p", p, "--budget", "48", "--advice", "--cost", "1,2")
    assert code == 2 and "--cost" in err


def test_advice_with_a_noise_scale_names_B_G_and_lr(capsys):
    """--noise-scale: the advice's first line is gsd.core.advice.batch_advice's, measured at --budget and the
    uniform plan's G there; a bad value is refused by name."""
    from gsd.core.advice import advice_headline, batch_advice

    p = [0.05, 0.3, 0.5, 0.9]
    code, out, _ = _run(
        capsys,
        "plan",
        "--p",
        "0.05,0.3,0.5,0.9",
        "--budget",
        "32",
        "--advice",
        "--noise-scale",
        "40,20,80",
        "--run-lr",
        "1e-6",
    )
    assert code == 0
    want = batch_advice(p, (40.0, 20.0, 80.0), generations_per_step=32, group_size=8, lr=1e-6)
    assert advice_headline(want) in out
    code, out, err = _run(capsys, "plan", "--p", "0.5", "--budget", "32", "--advice", "--noise-scale", "40,50,80")
    assert code != 0 and "--noise-scale" in err


@pytest.mark.parametrize(
    "option, text",
    [
        ("--noise-scale", "1e308"),  # advised B = 1e308 generations per step: printed as a 300-digit integer
        ("--noise-scale", "1e20"),
        ("--noise-scale", "inf"),
        ("--noise-scale", "nan"),
        ("--run-lr", "1e308"),  # lr·√(B/B_run) beyond float64: printed as "lr 1e+308"
        ("--run-lr", "inf"),  # refused by the advice as "lr must be ...", not naming --run-lr
        ("--run-lr", "nan"),
        ("--run-lr", "0"),
        ("--run-lr", "abc"),
    ],
)
def test_noise_scale_and_run_lr_out_of_range_are_named(capsys, option, text):
    """Issue 44: exit 2 with a line naming the option (argparse's usage error for text), before the advice
    is computed."""
    argv = ["plan", "--p", "0.2,0.5,0.7", "--budget", "64", "--advice", "--noise-scale", "100", f"{option}={text}"]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's usage error
        code = exc.code
    out, err = capsys.readouterr()
    assert code == 2 and option in err.strip().splitlines()[-1] and out == ""


def test_noise_scale_interval_may_reach_inf(capsys):
    """B_NOISE,LO,inf: the interval gsd.core.noise_scale gives where the gradient is not resolved from 0
    (it was refused as not finite)."""
    from gsd.core.advice import advice_headline, batch_advice

    argv = ["plan", "--p", "0.2,0.5,0.7", "--budget", "64", "--advice", "--noise-scale", "100,50,inf"]
    code, out, _ = _run(capsys, *argv)
    want = batch_advice([0.2, 0.5, 0.7], (100.0, 50.0, float("inf")), generations_per_step=64, group_size=21)
    assert code == 0 and advice_headline(want) in out
