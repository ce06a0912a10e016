"""The allocation comparison end to end on a tiny campaign: best uniform G, targets, winners, the
objective-gain decomposition, the report section and the command."""

from __future__ import annotations

import numpy as np
import pytest

from gsd.io.atomic import read_json
from gsd.reproduce import allocation_comparison as ac
from gsd.reproduce.report_markdown import allocation_markdown
from gsd.simulator.ledger import read_ledger

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TINY = """
[campaign]
seeds = [0, 1]
reference_arm = "fixed_g8"
uniform_arms = ["fixed_g4", "fixed_g8", "fixed_g16"]

[variants.tabular]
policy = "tabular"

[variants.mlp]
policy = "mlp"
optimizer = "adam"
lr = 0.01
allocation_lr = 0.5

[base]
steps = 6
n_prompts = 60
rollouts = "counts"
closed_form_every = 0
checkpoint_every = 100
device = "cpu"
g_max = 16
replan_every = 2
logged_window = 2

[arms.fixed_g4]
allocation = "fixed"
group_size = 4
steps = 12

[arms.fixed_g8]
allocation = "fixed"

[arms.fixed_g16]
allocation = "fixed"
group_size = 16
steps = 3

[arms.greso]
allocation = "greso"
replan_every = 1
steps = 12

[arms.horizon]
allocation = "horizon"

[arms.oracle_gain]
allocation = "gain"
allocation_source = "oracle"
"""


@pytest.fixture(scope="module")
def done(tmp_path_factory):
    root = tmp_path_factory.mktemp("cmp")
    (root / "tiny.toml").write_text(TINY)
    summary = ac.run_comparison(root / "out", config=root / "tiny.toml")
    return root, summary


def _curve(run):
    led = read_ledger(run)
    final = read_json(run / "summary.json")["final"]["mean_arcsin"]
    return np.r_[0.0, led.generations_cum.to_numpy()], np.r_[led.mean_arcsin.to_numpy(), final]


def test_best_uniform_and_targets_by_direct_reading(done):
    root, s = done
    assert s == read_json(root / "out" / ac.SUMMARY_FILE)
    for v, sv in s["variants"].items():
        finals = {
            a: np.mean(
                [
                    read_json(root / "out" / v / "runs" / a / f"seed{sd}" / "summary.json")["final"]["mean_arcsin"]
                    for sd in (0, 1)
                ]
            )
            for a in ("fixed_g4", "fixed_g8", "fixed_g16")
        }
        best = max(finals, key=finals.get)
        assert sv["best_uniform"] == best
        assert sv["arms"][best]["mean_arcsin"]["mean"] == pytest.approx(finals[best], rel=1e-12)
        t50 = []
        for sd in (0, 1):
            budget = sv["budget"][str(sd)]
            x, y = _curve(root / "out" / v / "runs" / best / f"seed{sd}")
            t50.append(y[np.nonzero(x <= 0.5 * budget)[0][-1]])
        assert sv["targets"]["t50"] == pytest.approx(np.mean(t50), rel=1e-12)
        # The best uniform reaches its own 100 % target (the mean of its seeds' ends) in some seed.
        assert sv["arms"][best]["generations_to_t100"]["n"] >= 1


def test_winner_flag_is_interval_clearance(done):
    _, s = done
    for sv in s["variants"].values():
        ref = sv["arms"][sv["best_uniform"]]
        for a, r in sv["arms"].items():
            if a.startswith("oracle") or a.startswith("fixed"):
                assert r["winner"] == []
                continue
            clear = r["mean_arcsin"]["lo"] > ref["mean_arcsin"]["hi"]
            assert ("final objective" in r["winner"]) == clear
        # A paired difference of the best uniform with itself is exactly 0.
        assert ref["diff_vs_best"]["mean"] == 0.0


def test_decomposition_sums_to_the_objective_change(done):
    root, s = done
    for v, sv in s["variants"].items():
        assert "decomposition" not in sv["arms"]["greso"]  # its run overshoots the budget
        for a in ("fixed_g8", "horizon", "fixed_g4"):
            parts = [q["mean"] for q in sv["arms"][a]["decomposition"]]
            change = np.mean(
                [
                    read_json(root / "out" / v / "runs" / a / f"seed{sd}" / "summary.json")["final"]["mean_arcsin"]
                    - read_json(root / "out" / v / "runs" / a / f"seed{sd}" / "summary.json")["initial"]["mean_arcsin"]
                    for sd in (0, 1)
                ]
            )
            assert sum(parts) == pytest.approx(change, rel=1e-9, abs=1e-12)


def test_markdown_report_section_and_command(done, tmp_path, capsys):
    root, s = done
    md = "\n".join(
        allocation_markdown({"status": "ok", "run_dir": str(root / "out"), "config": "tiny", "comparison": s})
    )
    assert "best uniform" in md and "Objective-gain decomposition" in md and "horizon (H-step objective)" in md
    assert "At the paper's scale" in md
    assert ac.comparison_verdict(s).startswith("tabular:")
    from gsd.cli import main

    png = tmp_path / "cmp.png"
    assert (
        main(
            [
                "allocation-comparison",
                "--config",
                str(root / "tiny.toml"),
                "--out",
                str(root / "out"),
                "--quiet",
                "--figure",
                str(png),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "| uniform G = 8 |" in out and png.is_file() and png.stat().st_size > 10_000


def test_a_variant_alone_waits_for_the_summary(tmp_path):
    (tmp_path / "tiny.toml").write_text(TINY)  # a comparison needs two seeds for its intervals
    assert ac.run_comparison(tmp_path / "o", config=tmp_path / "tiny.toml", variants=["tabular"]) == {}
    assert not (tmp_path / "o" / ac.SUMMARY_FILE).exists()
    with pytest.raises(ValueError, match="variant"):
        ac.run_comparison(tmp_path / "o", config=tmp_path / "tiny.toml", variants=["cnn"])


def test_worker_processes_give_the_same_runs(done, tmp_path):
    """jobs = 2 runs every (variant, arm, seed) in two spawned processes: each run's ledger (wall
    times aside) and the summary equal the runs made one after the other in this process."""
    root, summary = done
    again = ac.run_comparison(tmp_path / "out", config=root / "tiny.toml", jobs=2)
    runs = sorted((root / "out").glob("*/runs/*/seed*"))
    assert len(runs) == 2 * 6 * 2
    for run in runs:
        a = read_ledger(run).drop(columns=["wall_s"])
        b = read_ledger(tmp_path / "out" / run.relative_to(root / "out")).drop(columns=["wall_s"])
        assert a.equals(b), run
    assert again["variants"] == summary["variants"]


def test_figure_reads_without_the_code(done):
    """A title, labelled axes, one legend outside the panels (none over the curves), and each
    uniform G in a style of its own."""
    root, s = done
    fig = ac.comparison_figure(s, root / "out")
    assert fig._suptitle is not None and "generations" in fig._suptitle.get_text()
    assert len(fig.legends) == 1 and all(ax.get_legend() is None for ax in fig.axes)
    fig.canvas.draw()
    legend = fig.legends[0].get_window_extent()
    for ax in fig.axes:
        assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()
        assert not legend.overlaps(ax.get_window_extent())
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert len(labels) == len(set(labels)) == len(s["variants"]["tabular"]["arms"])
    handles = dict(zip(labels, fig.legends[0].legend_handles))
    uniform = [ac.LABELS[a] for a in s["uniform_arms"]]
    styles = {(str(handles[u].get_color()), str(handles[u]._dash_pattern)) for u in uniform}
    assert len(styles) == len(uniform)


def test_report_intervals_stay_in_range(done):
    """Probabilities inside [0, 1], generations and ratios not below 0, with two seeds."""
    _, s = done
    for sv in s["variants"].values():
        for r in sv["arms"].values():
            for key in ("generations_to_t50", "generations_to_t100", "speedup_t50"):
                assert r[key]["lo"] is None or r[key]["lo"] >= 0, (key, r[key])  # None: one seed, no interval
            assert 0 <= r["hard_quartile_p"]["lo"] <= r["hard_quartile_p"]["hi"] <= 1


def test_two_comparisons_into_one_out(tmp_path):
    """Two real `gsd allocation-comparison` processes into one --out: the second is refused at once
    naming the first (exit 2, one line), the first finishes (before: each failed on the other's
    run folders, both exit 2, neither finished)."""
    import os
    import subprocess
    import sys
    import time

    (tmp_path / "tiny.toml").write_text(TINY)
    out = tmp_path / "out"
    argv = [
        sys.executable,
        "-m",
        "gsd.cli",
        "allocation-comparison",
        "--config",
        str(tmp_path / "tiny.toml"),
        "--out",
        str(out),
        "--quiet",
        "--jobs",
        "1",
    ]
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "OMP_NUM_THREADS": "1"}
    first = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 120
        while not list(out.glob("*.lock")) and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert first.poll() is None, first.communicate()
        t0 = time.monotonic()
        second = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
        assert second.returncode == 2 and "is in use by pid" in second.stderr, second.stderr
        assert second.stderr.strip().count("\n") == 0 and time.monotonic() - t0 < 60
        _, err = first.communicate(timeout=600)
        assert first.returncode == 0, err
    finally:
        first.kill()
        first.wait()
    assert (out / ac.SUMMARY_FILE).is_file()
    assert not list(out.glob("*.lock"))


def test_verdict_of_uniform_arms_alone():
    summary = {
        "uniform_arms": ["fixed_g4", "fixed_g8"],
        "variants": {
            "tabular": {"best_uniform": "fixed_g4", "arms": {"fixed_g4": {"winner": []}, "fixed_g8": {"winner": []}}}
        },
    }
    text = ac.comparison_verdict(summary)
    assert text.startswith("tabular: no allocation rule among the arms; the best uniform G is")
