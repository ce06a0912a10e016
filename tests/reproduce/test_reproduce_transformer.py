"""The closed forms of the expected update against TRL 1.16.0's own loss gradient on a tiny
transformer whose solve rates are exact (gsd.reproduce.transformer)."""

from math import comb, sqrt

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gsd import InputError
from gsd.reproduce import transformer


def _direct_factor(p, G, ddof, eps):
    """c(p, G) by the sum over k right of G, written out: E[g | k] = σ²/(σ_ddof + eps)/(p(1-p)) ∇p."""
    total = 0.0
    for k in range(1, G):
        var = k * (G - k) / G**2  # population variance of the group's 0/1 rewards
        std = sqrt(k * (G - k) / (G * (G - ddof)))
        total += comb(G, k) * p**k * (1 - p) ** (G - k) * var / (std + eps)
    return total / (p * (1 - p))


@settings(max_examples=60, deadline=None)
@given(p=st.floats(0.01, 0.99), G=st.integers(2, 40))
def test_closed_form_factor_is_the_sum_over_k(p, G):
    assert transformer.closed_form_factor(p, G, "grpo") == pytest.approx(_direct_factor(p, G, 1, 1e-4), rel=1e-9)
    # the paper's convention: φ(G, p)·∇(2 arcsin √p) = c ∇p
    assert transformer.closed_form_factor(p, G, "grpo_paper") == pytest.approx(_direct_factor(p, G, 0, 0.0), rel=1e-9)
    assert transformer.closed_form_factor(p, G, "dr_grpo") == pytest.approx(1 - 1 / G)


def test_bad_input_names_the_argument():
    with pytest.raises(InputError, match="method"):
        transformer.closed_form_factor(0.5, 8, "dapo")
    with pytest.raises(InputError, match="variant"):
        transformer.build_task(2, variant="long")
    with pytest.raises(InputError, match="n_prompts"):
        transformer.build_task(transformer.MAX_PROMPTS + 1)
    with pytest.raises(InputError, match="method"):
        transformer.train_silent(None, "dapo")
    with pytest.raises(InputError, match="loss_type"):
        transformer.sigma_update(None, loss_types=("sum",))


@pytest.fixture(scope="module")
def measured():
    pytest.importorskip("trl")
    import copy

    task = transformer.build_task(8, variant="correlated", seed=0)
    initial = copy.deepcopy(task)  # before a trainer holds the model
    spare = copy.deepcopy(task)  # for the trainings below, whichever fixture runs first
    run = transformer.measured_update(
        task, G=8, draws=20, copies=4, scale_rewards=("group", "none"), loss_types=("dr_grpo",), seed=0
    )
    return task, run, initial, spare


@pytest.mark.slow
def test_solve_rates_spread_and_exact(measured):
    task, run = measured[:2]
    p = np.array(run["p"])
    assert p.min() < 0.2 and p.max() > 0.8  # spread like a difficulty distribution
    assert np.array_equal(p, task.solve_rates())  # the run left the model as it was
    assert 1 < run["mean_length"] < task.max_len  # lengths vary


@pytest.mark.slow
@pytest.mark.parametrize("scale", ["group", "none"])
def test_sequence_level_update_is_the_closed_form(measured, scale):
    # TRL's dr_grpo divides the token sum by a constant (B × max_completion_length): the
    # sequence score, so E[update] is GRPO's closed form (group) or Dr.GRPO's (none), exactly.
    row = next(r for r in measured[1]["rows"] if r["scale_rewards"] == scale and r["loss_type"] == "dr_grpo")
    assert row["reference"] == ("grpo" if scale == "group" else "dr_grpo")
    assert row["lo"] < 1 < row["hi"], row
    assert row["hi"] - row["lo"] < 0.15  # an interval that could have missed


def test_cli_bad_input_is_one_line(capsys):
    from gsd.cli import main

    assert main(["transformer-update", "--G", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--G" in err and len(err.splitlines()) == 1
    with pytest.raises(InputError, match="variants"):
        transformer.run(variants=("long",))


@pytest.mark.slow
def test_notebook_executes(run_notebook):
    from pathlib import Path

    pytest.importorskip("trl")
    run = run_notebook(Path(__file__).resolve().parents[2] / "notebooks" / "12_transformer.ipynb", timeout=300)
    assert len(run.images) >= run.figure_cells >= 1


@pytest.fixture(scope="module")
def trained(measured):
    return transformer.train_silent(measured[2], "dr_grpo", G=8, copies=8, steps=12, lr=3e-3)


@pytest.mark.slow
def test_training_silent_fraction_against_the_exact_p(trained):
    steps = trained["steps"]
    assert len(steps) == 12
    # TRL's logged fraction is the one of the rewards its reward function returned (the truth)
    assert [s["measured"] for s in steps] == pytest.approx([s["silent_from_rewards"] for s in steps], abs=1e-6)
    # the policy learns: the mean exact p rises
    assert steps[-1]["mean_p"] > steps[0]["mean_p"]
    exact = np.mean([abs(s["measured"] - s["exact"]) for s in steps])
    pooled = np.mean([abs(s["measured"] - s["pooled"]) for s in steps])
    assert exact < pooled  # Jensen: the pooled p undercounts silent groups


@pytest.mark.slow
def test_report_section(measured, trained):
    from gsd.reproduce import report_markdown

    run = {"G": 8, "variants": {"correlated": measured[1]}}
    stage = {
        "status": "ok",
        "mode": "fast",
        "G": 8,
        "n_prompts": 8,
        "draws": 20,
        "copies": 4,
        "rows": transformer.table(run).to_dict(orient="records"),
        "silent_r2": {"dr_grpo": {"exact": trained["r2_exact"], "pooled": trained["r2_pooled"]}},
    }
    text = "\n".join(report_markdown.transformer_markdown(stage))
    assert "TRL's update on a transformer" in text and text.count("| correlated |") == len(measured[1]["rows"])
    assert "skipped" in "\n".join(
        report_markdown.transformer_markdown({"status": "skipped", "reason": "--transformer skip"})
    )


@pytest.mark.slow
def test_reproduce_stage_writes_its_figures_beside_the_report(tmp_path, monkeypatch):
    from gsd.reproduce import report, report_markdown

    pytest.importorskip("trl")
    # tiny sizes: this checks the stage's plumbing; the numbers are the tests above
    monkeypatch.setitem(transformer.SIZES, "fast", (2, 1))
    monkeypatch.setitem(transformer.TRAIN_SIZES, "fast", (2, 1))
    stage = report.transformer_stage("fast", 0, tmp_path / "figures", tmp_path / "out")
    paths = stage.pop("_figures")
    assert stage["status"] == "ok" and len(stage["rows"]) == 2 * 3 * 4
    assert {p.name for p in paths} == {"transformer_update.png", "transformer_silent.png"}
    assert all(p.parent == tmp_path / "out" / "transformer" and p.stat().st_size > 5000 for p in paths)
    assert not (tmp_path / "figures").exists()  # a fast run leaves the quoted figures alone
    assert set(stage["silent_r2"]) == set(transformer.TRAININGS)
    text = "\n".join(report_markdown.transformer_markdown(stage))
    assert text.count("| independent |") == text.count("| correlated |") == 12


@pytest.fixture(scope="module")
def methods(measured, tmp_path_factory):
    """GRPO and the skip sampler from one initial model, each writing TRL's own completions log,
    diagnosed; then the per-group update against σ on the same initial model."""
    import copy

    out = {}
    for method in ("grpo", "skip"):
        folder = tmp_path_factory.mktemp(method)
        t = transformer.train_silent(
            copy.deepcopy(measured[3]), method, G=8, copies=2, steps=6, lr=3e-3, completions_dir=folder
        )
        out[method] = (t, transformer.calibrate(t, folder))
        out[f"{method}_log"] = folder
    out["sigma"] = transformer.sigma_update(copy.deepcopy(measured[3]), G=8, draws=8, loss_types=("dr_grpo",))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("method", ["grpo", "skip"])
def test_diagnose_reads_trl_log_of_the_run(methods, method):
    t, cal = methods[method]
    # every group gsd diagnose read from TRL's parquet files has the k the reward function returned
    assert cal["k_matches"]
    assert cal["silent_measured"] == pytest.approx([s["silent_from_rewards"] for s in t["steps"]], abs=1e-12)
    assert cal["groups"] == 16 * 5  # steps 2..6, every prompt seen before
    assert 0 <= cal["coverage"] <= 1 and 0 <= cal["mae"] < 1
    # step 1's recorded p is the initial model's, evaluated under the trainer's bf16 autocast
    # (GRPOConfig's bf16 defaults to True), the forward its generation samples from
    assert t["steps"][0]["p"] == pytest.approx(methods["sigma"]["p"], abs=0.02)


@pytest.mark.slow
def test_auto_half_life_on_the_trl_log_is_a_given_half_life(methods):
    from gsd.core.forgetting import HALF_LIVES

    t, default = methods["grpo"]
    auto = transformer.calibrate(t, methods["grpo_log"], half_life="auto")
    assert auto["half_life"] in HALF_LIVES and default["half_life"] is None
    given = transformer.calibrate(t, methods["grpo_log"], half_life=auto["half_life"])
    for key in ("mae", "coverage", "r2_pred", "groups"):
        assert auto[key] == given[key], key
    assert auto["silent_pred"] == given["silent_pred"] and auto["k_matches"]


@pytest.mark.slow
def test_skip_sampler_generates_as_many_groups(methods):
    grpo, skip = methods["grpo"][0], methods["skip"][0]
    assert [len(s["groups"]) for s in skip["steps"]] == [len(s["groups"]) for s in grpo["steps"]] == [16] * 6
    assert len(skip["skipped"]) == 6 and all(n >= 0 for n in skip["skipped"])
    if sum(skip["skipped"]) == 0:  # nothing skipped: the same sampler order, the same run
        assert skip["p_final"] == pytest.approx(grpo["p_final"], abs=1e-6)


@pytest.mark.slow
def test_sequence_level_update_is_proportional_to_sigma(methods):
    s = methods["sigma"]["dr_grpo"]
    assert s["slope_lo"] < 1 < s["slope_hi"], s
    assert s["slope_hi"] - s["slope_lo"] < 0.5
    assert [b["k"] for b in s["by_k"]] == list(range(9)) and sum(b["n"] for b in s["by_k"]) == 8 * 8


@pytest.mark.slow
def test_transformer_train_command(tmp_path, monkeypatch, capsys):
    import json

    from gsd.cli import main

    pytest.importorskip("trl")
    # tiny sizes: the command's plumbing; the numbers are the tests above
    monkeypatch.setitem(transformer.TRAIN_RUN_SIZES, "fast", (8, 2, 1, 1, 2))
    logs = tmp_path / "logs"
    assert (
        main(
            [
                "transformer-train",
                "--fast",
                "--quiet",
                "--json",
                "--figure",
                str(tmp_path / "t.png"),
                "--out",
                str(logs),
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert set(out["quartile"]) == set(transformer.METHODS) and len(out["hardest"]["0"]) == 2
    assert all(len(q["0"]) == 3 for q in out["quartile"].values())  # 2 steps, then the final
    assert (tmp_path / "t.png").stat().st_size > 5000
    # --out keeps each training's TRL logs, which gsd diagnose reads: TRL's own silent fraction
    # per step is the one the run recorded.
    for method in transformer.METHODS:
        run = logs / "seed0" / method
        assert sorted(f.name for f in (run / "completions").iterdir()) == [
            "completions_00001.parquet",
            "completions_00002.parquet",
        ]
        assert main(["diagnose", "--no-progress", "--json", str(run)]) == 0
        dx = json.loads(capsys.readouterr().out)
        recorded = [s["measured"] for s in out["runs"]["0"][method]["steps"]]
        assert [s["trainer_silent_frac"] for s in dx["steps"]] == recorded
    assert main(["transformer-train", "--fast", "--quiet", "--out", str(logs)]) == 2  # never into a used folder
