"""What a new user sees in the first ten minutes: every report on the shipped example logs and every
help text fits 100 columns, the advised setting is in the first five lines of every report, the
commands are grouped, a misspelt command or option gets "did you mean", a scalar log or a table
that is not a rollout log is said to be one, and the smaller points of the issue."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest

from gsd.cli import build_parser, main
from gsd.cli.layout import EXAMPLES, GROUPS
from gsd.core.advice import advice_headline, group_size_advice

WIDTH = 100


@pytest.fixture(scope="module")
def examples(tmp_path_factory):
    dest = tmp_path_factory.mktemp("first10") / "examples"
    assert main(["example-logs", str(dest)]) == 0
    return dest


def _run(capsys, argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return out


def _reports(ex):
    rollouts = [ex / "rollouts.csv", "--prompt-column", "qid", "--reward-column", "r", "--step-column", "it"]
    return {
        "diagnose trl": ["diagnose", "--no-progress", ex / "trl"],
        "diagnose verl": ["diagnose", "--no-progress", ex / "verl" / "rollout_data"],
        "diagnose areal": ["diagnose", "--no-progress", ex / "areal"],
        "diagnose table": ["diagnose", "--no-progress", *rollouts],
        "diagnose verbose": ["diagnose", "--no-progress", "--verbose", ex / "trl"],
        "diagnose half-life": ["diagnose", "--no-progress", "--half-life", "auto", ex / "verl" / "rollout_data"],
        "scalars": ["scalars", ex / "trl", "--group-size", "4", "--groups", "8"],
        "scalars without G": ["scalars", ex / "trl"],
        "plan --advice": ["plan", "--p", "0.05,0.3,0.5,0.9", "--budget", "32", "--advice"],
        "plan --advice verbose": ["plan", "--p", "0.05,0.3,0.5,0.9", "--budget", "32", "--advice", "--verbose"],
        "plan --input": ["plan", "--input", *rollouts[:5], "--budget", "64", "--advice"],
    }


@pytest.mark.parametrize("name", list(_reports(Path("examples"))))
def test_report_fits_and_opens_with_the_advice(capsys, examples, name):
    out = _run(capsys, _reports(examples)[name])
    lines = out.splitlines()
    too_wide = [ln for ln in lines if len(ln) > WIDTH]
    assert not too_wide, f"{name}: {len(too_wide)} line(s) over {WIDTH} columns, e.g. {too_wide[0]!r}"
    head = "\n".join(lines[:5])
    assert "Advised:" in head, f"{name}: no advised setting in the first five lines:\n{head}"


def test_the_advised_setting_is_the_advice(capsys, examples):
    """The headline names the advice's own G (computed apart: gsd.group_size_advice on the same
    prompts), and the ratios it quotes are the advice table's."""
    p = np.array([0.05, 0.3, 0.5, 0.9])
    adv = group_size_advice(p, prompts_per_step=p.size, g_grid=[2, 3, 4, 6, 8, 12, 16, 24, 32])
    out = _run(capsys, ["plan", "--p", "0.05,0.3,0.5,0.9", "--budget", "32", "--advice", "--g-max", "32"])
    first = out.splitlines()[0]
    assert first.startswith(f"Advised: uniform G = {adv.advised_G_per_generation} answers per prompt")
    rel = dict(zip(adv.table_columns["G"].tolist(), adv.table_columns["relative_per_generation"].tolist()))
    quoted = [int(part.split("G = ")[1].split(":")[0]) for part in first.split("; ")[1:]]
    assert quoted and all(f"G = {g}: {rel[g]:.2f}x" in first for g in quoted)


def test_headline_from_the_advice_or_its_summary():
    adv = group_size_advice([0.1, 0.5, 0.8], prompts_per_step=3, optimizer="adam", score_noise=2.0)
    text = advice_headline(adv)
    assert text == advice_headline(adv.summary())
    lines = text.splitlines()
    assert len(lines) == 2 and all(len(ln) <= WIDTH for ln in lines)
    assert "score noise 2" in lines[1] and "prompts per step held fixed" in lines[1]
    sgd = advice_headline(group_size_advice([0.1, 0.5], prompts_per_step=2, optimizer="sgd"))
    assert "; SGD;" in sgd
    assert advice_headline({"advised_G_per_generation": None}).startswith("Advised: no group size")


def _parsers():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return parser, sub.choices


def test_every_help_fits_and_has_two_examples(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # a wide terminal: the help still stops at 100 columns
    parser, commands = _parsers()
    texts = {"gsd": parser.format_help()} | {name: p.format_help() for name, p in commands.items()}
    for name, text in texts.items():
        wide = [ln for ln in text.splitlines() if len(ln) > WIDTH]
        assert not wide, f"gsd {name} --help: {wide[0]!r}"
    for name, p in commands.items():
        lines = texts[name].split("examples:\n", 1)[-1].splitlines()
        assert len(EXAMPLES[name]) == 2 and lines[:2] == [f"  {e}" for e in EXAMPLES[name]], name
        assert all(e.startswith(f"gsd {name}") for e in EXAMPLES[name])


def test_top_help_lists_the_four_first(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    parser, commands = _parsers()
    text = parser.format_help()
    start = text.index("Start here:")
    first_group = text[start:].split("\n\n", 1)[0]
    assert [ln.split()[0] for ln in first_group.splitlines()[1:] if ln[2:3].strip()] == list(GROUPS[0][1])
    assert all(f"  {name}" in text for name in commands)  # every command listed once, in a group or "Other"
    assert start < text.index("The paper's evidence:")


@pytest.mark.parametrize(
    "argv, hint",
    [
        (["diagnse", "x"], "did you mean diagnose?"),
        (["scalar", "x"], "did you mean scalars?"),
        (["diagnose", "--promt-column", "q", "x"], "--promt-column (did you mean --prompt-column?)"),
        (["plan", "--p", "0.5", "--epsilom", "0.1"], "did you mean --epsilon?"),
    ],
)
def test_did_you_mean(capsys, argv, hint):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert hint in err and len(err.splitlines()[-1]) < 200


def test_scalar_logs_name_gsd_scalars(capsys, examples, tmp_path):
    (tmp_path / "tb" / "run").mkdir(parents=True)
    (tmp_path / "tb" / "run" / "events.out.tfevents.1.host").write_bytes(b"")
    verl_metrics = tmp_path / "metrics.jsonl"
    verl_metrics.write_text('{"step": 1, "data": {"critic/score/mean": 0.5}}\n')
    for log in (examples / "trl" / "trainer_state.json", tmp_path / "tb", verl_metrics):
        assert main(["diagnose", "--no-progress", str(log)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"`gsd scalars {log}`" in err, err


def test_a_table_that_is_not_a_rollout_log(capsys, tmp_path):
    table = tmp_path / "histogram.csv"
    table.write_text("k,p_hat,count\n0,0.0,10\n1,0.125,4\n")
    assert main(["diagnose", "--no-progress", str(table)]) == 2
    err = capsys.readouterr().err
    assert "not a rollout log" in err and "--prompt-column" not in err
    # named on purpose, a missing column is still named as such
    assert main(["diagnose", "--no-progress", str(table), "--prompt-column", "qid", "--reward-column", "count"]) == 2
    assert "no prompt column 'qid'" in capsys.readouterr().err


def test_smaller_points(capsys, examples):
    out = _run(capsys, ["diagnose", "--no-progress", examples / "areal"])
    assert "<unk>" not in out and "none yet" not in out
    steps = out[out.index("    step ") :].split("\n\n", 1)[0].splitlines()
    assert steps[0].split()[5] == "wasted"
    # the wasted column counts rollouts (silent groups x G), not the silent share again
    rows = [ln.split() for ln in steps[1:]]
    assert all(round(float(r[3]) / 100 * int(r[2])) == int(r[7]) for r in rows), rows


def test_figure_legends(tmp_path):
    pytest.importorskip("matplotlib")
    from gsd.reproduce import dapo_fit, theory

    fig = theory.objectives_figure()
    for ax in fig.axes:
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert len(labels) == len(set(labels)), labels
    curve = dapo_fit.synthetic_curve()
    fit = dapo_fit.fit_all_correct_curve(curve.step, curve.fraction, n_bootstrap=0)
    texts = [
        t.get_text() for t in dapo_fit.fit_figure(fit, truth=curve.truth.to_numpy()).axes[0].get_legend().get_texts()
    ]
    assert "logged" not in texts and any(t.startswith("synthetic") for t in texts)


def test_install_hints_work_before_publication():
    from gsd.extras import TORCH_EXTRA, TRL_EXTRA

    assert not TORCH_EXTRA.startswith("grpo-gsd") and not TRL_EXTRA.startswith("grpo-gsd")
