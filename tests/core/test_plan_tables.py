"""``gsd plan`` on tables: every row kept in order with its columns and a status, input columns
never overwritten, integers that float64 would round refused, outputs written faithfully."""

from __future__ import annotations

import contextlib
import io
import json

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gsd.cli import main


def test_fidelity_plan_keeps_every_row_in_order_with_its_columns(tmp_path, gsd_cli):
    src = tmp_path / "rates.csv"
    src.write_text("id,rate\n1,0.1\n2,\n3,0.5\n4,nan\n5,0.9\n6,x\n")
    out = tmp_path / "plan.csv"
    rc, text, _ = gsd_cli("plan", "--input", str(src), "--column", "rate", "--epsilon", "0.05", "--output", str(out))
    assert rc == 0 and "6 rows planned" in text and "missing rate" in text
    plan = pd.read_csv(out)
    assert plan["id"].tolist() == [1, 2, 3, 4, 5, 6]
    assert plan["status"].tolist() == ["ok", "missing rate", "ok", "missing rate", "ok", "rate not a number"]
    assert plan["group_size"].isna().tolist() == [False, True, False, True, False, True]


@pytest.mark.parametrize("mode", [["--column", "rate"], ["--k-column", "k", "--n-column", "n"]])
def test_budget_plan_never_overwrites_input_columns(tmp_path, gsd_cli, mode):
    src = tmp_path / "in.csv"
    pd.DataFrame(
        {
            "k": [1, 2, 3],
            "n": [4, 4, 4],
            "rate": [0.2, 0.5, 0.7],
            "status": ["mine", "mine", "mine"],
            "group_size": [3, 3, 3],
        }
    ).to_csv(src, index=False)
    out = tmp_path / "plan.csv"
    rc, text, _ = gsd_cli("plan", "--input", str(src), *mode, "--budget", "24", "--output", str(out))
    assert rc == 0 and "status_plan" in text and "group_size_plan" in text
    plan = pd.read_csv(out)
    assert plan["status"].tolist() == ["mine"] * 3 and plan["group_size"].tolist() == [3, 3, 3]
    assert set(plan["status_plan"]) <= {"planned", "skipped"} and plan["group_size_plan"].sum() <= 24
    rc, text, _ = gsd_cli("plan", "--input", str(src), *mode, "--budget", "24", "--json")
    assert json.loads(text)["summary"]["renamed_columns"] == {"group_size": "group_size_plan", "status": "status_plan"}


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_per_rollout_plan_writes_parquet_and_csv(tmp_path, gsd_cli, suffix):
    src = tmp_path / "roll.csv"
    src.write_text("prompt,reward\na,1\na,0\nb,1\nb,1\nc,\n")
    out = tmp_path / f"plan{suffix}"
    rc, _, err = gsd_cli(
        "plan", "--input", str(src), "--prompt-column", "prompt", "--budget", "16", "--output", str(out)
    )
    assert rc == 0, err
    plan = pd.read_parquet(out) if suffix == ".parquet" else pd.read_csv(out)
    assert plan["prompt"].tolist() == ["a", "b", "c"] and plan["status"].tolist()[2] == "no usable reward"


def test_integers_beyond_2_53_are_refused_not_rounded(tmp_path, gsd_cli):
    src = tmp_path / "kn.csv"
    src.write_text("k,n\n9007199254740993,9007199254740995\n1,4\n")
    rc, text, _ = gsd_cli("plan", "--input", str(src), "--k-column", "k", "--n-column", "n", "--budget", "16", "--json")
    assert rc == 0
    rows = json.loads(text)["rows"]
    assert rows[0]["status"] == "k beyond 2^53" and rows[1]["status"] == "planned"
    ids = tmp_path / "ids.csv"  # a blank id turns the column into floats: 2^53 + 1 would merge with 2^53
    ids.write_text("prompt,reward\n9007199254740993,1\n9007199254740992,0\n,1\n")
    rc, _, err = gsd_cli("plan", "--input", str(ids), "--prompt-column", "prompt", "--budget", "16")
    assert rc == 2 and "beyond 2^53" in err and err.count("\n") == 1


def test_mixed_type_column_to_parquet_is_refused_by_name_and_csv_is_written(tmp_path, gsd_cli):
    src = tmp_path / "m.jsonl"
    src.write_text('{"id": 1, "rate": 0.2}\n{"id": "a", "rate": 0.4}\n')
    rc, _, err = gsd_cli(
        "plan", "--input", str(src), "--column", "rate", "--budget", "8", "--output", str(tmp_path / "m.parquet")
    )
    assert rc == 2 and "column 'id' mixes int, str" in err and not (tmp_path / "m.parquet").exists()
    rc, _, _ = gsd_cli(
        "plan", "--input", str(src), "--column", "rate", "--budget", "8", "--output", str(tmp_path / "m.csv")
    )
    assert rc == 0 and pd.read_csv(tmp_path / "m.csv")["id"].astype(str).tolist() == ["1", "a"]


@pytest.mark.parametrize("target", ["/proc/gsd-plan.csv", "/proc/self/x.parquet"])
def test_output_to_a_pseudo_file_system_is_one_line(gsd_cli, target):
    rc, _, err = gsd_cli("plan", "--p", "0.3", "--epsilon", "0.05", "--output", target)
    assert rc == 2 and err.count("\n") == 1 and "cannot write '/proc" in err


# --------------------------------------------------------------------------- fuzz of the table modes
cells = st.one_of(
    st.sampled_from(["", "nan", "inf", "-1", "0", "1", "0.5", "2", "x", "true", "1e300", "9007199254740993", "-0"]),
    st.floats(0, 1).map(repr),
    st.integers(0, 20).map(str),
)


@st.composite
def tables(draw):
    n = draw(st.integers(1, 6))
    cols = {name: [draw(cells) for _ in range(n)] for name in ("rate", "k", "n", "reward")}
    cols["prompt"] = [draw(st.sampled_from(["a", "b", "c", "", "1", "2"])) for _ in range(n)]
    for extra in draw(
        st.lists(
            st.sampled_from(["status", "group_size", "posterior_mean", "status_plan", "id"]), unique=True, max_size=3
        )
    ):
        cols[extra] = [draw(cells) for _ in range(n)]
    return cols


MODES = [
    ["--column", "rate", "--epsilon", "0.05"],
    ["--column", "rate", "--budget", "20"],
    ["--k-column", "k", "--n-column", "n", "--budget", "20"],
    ["--prompt-column", "prompt", "--budget", "20"],
]


@given(table=tables(), mode=st.sampled_from(MODES), suffix=st.sampled_from([".csv", ".parquet"]))
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_every_table_mode_keeps_rows_and_input_columns_or_refuses_in_one_line(tmp_path, table, mode, suffix):
    src = tmp_path / "in.csv"
    src.write_text(",".join(table) + "\n" + "\n".join(",".join(row) for row in zip(*table.values())) + "\n")
    raw = pd.read_csv(src)
    out = tmp_path / f"plan{suffix}"
    out.unlink(missing_ok=True)
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        rc = main(["plan", "--input", str(src), *mode, "--output", str(out)])
    if rc == 2:
        assert err.getvalue().count("\n") == 1 and not out.exists(), err.getvalue()
        return
    assert rc == 0
    plan = pd.read_parquet(out) if suffix == ".parquet" else pd.read_csv(out)
    if "--prompt-column" in mode:
        assert len(plan) == raw["prompt"].nunique(dropna=False)
        return
    assert len(plan) == len(raw)  # every row, in order, with every input column unchanged
    for name in raw.columns:
        a, b = raw[name], plan[name]
        assert a.isna().equals(b.isna()) and a[a.notna()].astype(str).tolist() == b[b.notna()].astype(str).tolist()
    assert "status" in plan.columns[len(raw.columns) :].str.replace(r"_plan\d*$", "", regex=True).tolist()


@pytest.mark.parametrize("prompt", ["prompt", "rollouts", "right", "bad_rollouts", "status"])
def test_rollouts_without_a_prompt_id_are_not_planned_and_a_prompt_column_keeps_its_ids(tmp_path, gsd_cli, prompt):
    """Rollouts with no prompt id belong to no prompt: their row says so and gets no group; a
    prompt column named like a count column (rollouts, right, ...) keeps its ids."""
    src = tmp_path / "roll.csv"
    src.write_text(f"{prompt},reward\na,1\na,0\n,1\n,1\n,0\nb,1\nb,0\n")
    out = tmp_path / "plan.csv"
    rc, text, _ = gsd_cli(
        "plan", "--input", str(src), "--prompt-column", prompt, "--budget", "16", "--output", str(out)
    )
    assert rc == 0, text
    plan = pd.read_csv(out, keep_default_na=False)
    assert plan[prompt].tolist() == ["a", "", "b"]  # the ids, in order of first appearance
    status = plan["status"] if prompt != "status" else plan["status_plan"]
    assert status.tolist()[1] == f"missing {prompt}" and plan["group_size"].tolist()[1] == ""
    assert [s != f"missing {prompt}" for s in status] == [True, False, True]
    counts = plan["rollouts" if prompt != "rollouts" else "rollouts_plan"].tolist()
    assert counts == [2, 3, 2]
