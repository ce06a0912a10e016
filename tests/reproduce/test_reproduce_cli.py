"""The reproduction's command line: dapo-fit, reproduce, bigmath, group-size-table, figures."""

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gsd.cli import main
from gsd.reproduce import dapo_fit, report


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def curve_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("curve") / "curve.csv"
    c = dapo_fit.synthetic_curve(tau=60.0, T_inf=6.0, noise_sd=0.003, seed=4)
    c[["step", "fraction"]].to_csv(path, index=False)
    return path


def test_dapo_fit_json(capsys, curve_csv):
    code, out, _ = run(capsys, "dapo-fit", str(curve_csv), "--json", "--bootstrap", "30")
    assert code == 0
    s = json.loads(out)
    assert abs(s["tau"] - 60.0) < 4 * s["tau_boot_sd"]
    assert s["n_points"] == 61 and s["n_samples"] == 32
    assert 0 < s["r2"] <= 1 and s["generic2_r2"] is not None


def test_dapo_fit_table_figure_and_difficulty(capsys, curve_csv, tmp_path):
    hist = tmp_path / "hist.csv"
    from gsd import load_histogram

    load_histogram().to_csv(hist, index=False)
    fig = tmp_path / "fit.png"
    code, out, _ = run(
        capsys, "dapo-fit", str(curve_csv), "--difficulty", str(hist), "--bootstrap", "5", "--figure", str(fig)
    )
    assert code == 0 and "tau" in out and fig.stat().st_size > 1000


def _one_line_error(capsys, *argv):
    code, out, err = run(capsys, *argv)
    assert code == 2
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("gsd dapo-fit: error:"), err
    assert "Traceback" not in err
    return lines[0]


def test_dapo_fit_bad_input_exits_2_with_one_line(capsys, tmp_path):
    assert "no such file" in _one_line_error(capsys, "dapo-fit", str(tmp_path / "missing.csv"))
    wrong = tmp_path / "wrong.csv"
    pd.DataFrame({"step": np.arange(20), "acc": 0.2}).to_csv(wrong, index=False)
    assert "fraction" in _one_line_error(capsys, "dapo-fit", str(wrong))
    nan = tmp_path / "nan.csv"
    pd.DataFrame({"step": np.arange(20), "fraction": np.r_[np.full(19, 0.2), np.nan]}).to_csv(nan, index=False)
    assert "row 19" in _one_line_error(capsys, "dapo-fit", str(nan))
    text = tmp_path / "text.csv"
    pd.DataFrame({"step": np.arange(20), "fraction": ["x"] * 20}).to_csv(text, index=False)
    assert "non-numeric" in _one_line_error(capsys, "dapo-fit", str(text))
    flat = tmp_path / "flat.csv"
    pd.DataFrame({"step": np.arange(20), "fraction": np.full(20, 0.99)}).to_csv(flat, index=False)
    assert "plateau" in _one_line_error(capsys, "dapo-fit", str(flat))


@pytest.fixture(scope="module")
def fast_report(tmp_path_factory):
    root = tmp_path_factory.mktemp("rep")
    out = root / "reports" / "latest"  # the layout of `make figures`: figures beside, not inside
    code = main(
        [
            "reproduce",
            "--fast",
            "--skip-campaign",
            "--transformer",
            "skip",
            "--group-size-training",
            "skip",
            "--out",
            str(out),
            "--figures",
            str(root / "figures"),
            "--quiet",
            "--json",
        ]
    )
    assert code == 0
    return out


def test_reproduce_fast_writes_the_report(fast_report):
    assert (fast_report / "report.md").is_file() and (fast_report / "report.json").is_file()
    rep = json.loads((fast_report / "report.json").read_text())
    assert tuple(rep) == report.REPORT_KEYS
    keys = {r["key"] for r in rep["comparisons"]}
    assert keys == set(report.PUBLISHED)
    by = {r["key"]: r for r in rep["comparisons"]}
    for key in (
        "bigmath_silent_G8",
        "bigmath_extreme_share_dr_grpo",
        "bigmath_extreme_share_grpo",
        "fidelity_law_p0.05_G64",
        "fidelity_exact_p0.05_G64",
        "trl_gap_G8",
    ):
        assert by[key]["computed"] and by[key]["agrees_at_printed_precision"], by[key]
        assert by[key]["difference"] == pytest.approx(by[key]["ours"] - by[key]["published"])
    assert not by["campaign_silent_r2"]["computed"]
    # Rows computed from the histogram (whose 63/64 bar was split with published figures) say so.
    from_histogram = {k for k, r in by.items() if r["data"] == "histogram"}
    assert from_histogram == {
        "bigmath_silent_G8",
        "bigmath_extreme_share_dr_grpo",
        "bigmath_extreme_share_grpo",
        "campaign_silent_r2",
    }
    assert rep["campaign"]["status"] == "skipped"
    assert rep["transformer"]["status"] == "skipped"  # its own test: tests/reproduce/test_reproduce_transformer.py
    assert rep["group_size_training"]["status"] == "skipped"  # its own: tests/reproduce/test_group_size_training.py
    assert rep["meta"]["mode"] == "fast"
    assert rep["group_size_table"]["all_symmetric"] and rep["group_size_table"]["matches_brute_force_scan"]
    assert rep["dapo"]["fit"]["tau"] > 0
    md = (fast_report / "report.md").read_text()
    assert "## Ours vs published" in md and "44.3" in md and "campaign: skipped" in md
    assert "E[p^32] marker" in md and "decile shares" in md
    names = {p.split("/")[-1] for p in rep["figures"]["written"]}
    from gsd.reproduce.figures import FIGURES

    assert set(FIGURES) <= names
    for name in FIGURES:
        assert (fast_report.parents[1] / "figures" / name).stat().st_size > 5000
    # The report's figure links are relative to the report, and lead to the figures.
    links = re.findall(r"^- \[[^]]+\]\(([^)]+)\)$", md, flags=re.M)
    assert len(links) == len(rep["figures"]["written"]) >= len(FIGURES)
    assert all(link.startswith("../../figures/") and (fast_report / link).is_file() for link in links), links
    assert not list(fast_report.rglob("*.tmp"))  # atomic writes leave nothing behind


def test_compare_handles_missing_and_rounding():
    rows = {r["key"]: r for r in report.compare({"bigmath_silent_G8": 0.44278, "trl_gap_G8": 6.4586})}
    assert rows["bigmath_silent_G8"]["ours"] == pytest.approx(44.278)
    assert rows["bigmath_silent_G8"]["agrees_at_printed_precision"]
    assert rows["trl_gap_G8"]["agrees_at_printed_precision"]
    assert not rows["campaign_silent_r2"]["computed"] and rows["campaign_silent_r2"]["ours"] is None


def test_bigmath_and_group_size_table_commands(capsys):
    code, out, _ = run(capsys, "bigmath", "--json")
    assert code == 0
    s = json.loads(out)
    assert round(100 * s["headline"]["silent_G8_closed_form"], 1) == 44.3
    code, out, _ = run(capsys, "bigmath", "--table", "silent")
    assert code == 0 and "subsampled" in out
    code, out, _ = run(capsys, "group-size-table", "--json")
    rows = json.loads(out)
    assert code == 0 and rows[3]["95% exact"] == 69
    code, _, err = run(capsys, "group-size-table", "--p", "0,0.5")
    assert code == 2 and len(err.strip().splitlines()) == 1
    # A p given twice is one row of the wide table, the same as given once.
    code, out, _ = run(capsys, "group-size-table", "--p", ".1,.1", "--fidelity", "0.9", "--json")
    twice = json.loads(out)
    assert code == 0 and twice == json.loads(
        run(capsys, "group-size-table", "--p", ".1", "--fidelity", "0.9", "--json")[1]
    )


def test_figures_command_writes_selected_makers(capsys, tmp_path, monkeypatch):
    from gsd.reproduce import figures

    monkeypatch.setattr(
        figures, "FIGURES", {k: figures.FIGURES[k] for k in ("silent_rate.png", "difficulty_weight.png")}
    )
    monkeypatch.chdir(tmp_path)  # no reports/latest/campaign here
    code, out, _ = run(capsys, "figures", "--out", str(tmp_path / "figs"), "--no-losses", "--fast")
    assert code == 0
    assert sorted(p.name for p in (tmp_path / "figs").glob("*.png")) == ["difficulty_weight.png", "silent_rate.png"]
    assert "campaign: not drawn" in out
    assert not [p for p in (tmp_path / "figs").iterdir() if p.name.startswith(".")]
    code, _, err = run(
        capsys, "figures", "--out", str(tmp_path / "figs"), "--no-losses", "--campaign", str(tmp_path / "no_run")
    )
    assert code == 2 and len(err.strip().splitlines()) == 1 and "campaign_summary.json" in err


def test_figures_count_matches_its_wrote_lines(capsys, tmp_path, monkeypatch):
    """ "N figures" counts exactly the files it names in "wrote" lines, the loss figures included."""
    from gsd.reproduce import figures

    monkeypatch.setattr(figures, "FIGURES", {k: figures.FIGURES[k] for k in ("silent_rate.png",)})

    def two_loss_figures(out):
        paths = [Path(out) / "loss_a.png", Path(out) / "loss_b.png"]
        for p in paths:
            p.write_bytes(b"\x89PNG")
        return paths, None

    monkeypatch.setattr(figures, "loss_figures", two_loss_figures)
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "figures", "--out", str(tmp_path / "figs"), "--fast", "--no-campaign")
    assert code == 0
    wrote = [ln.split("wrote ", 1)[1] for ln in err.splitlines() if "wrote " in ln]
    assert sorted(Path(w).name for w in wrote) == ["loss_a.png", "loss_b.png", "silent_rate.png"]
    assert f"{len(wrote)} figures in {tmp_path / 'figs'}" in out
