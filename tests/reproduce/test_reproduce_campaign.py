"""The campaign part of `gsd reproduce`: numbers read from the simulator's summary, and a real run."""

import pytest

from gsd.reproduce import provenance, report


def test_campaign_numbers_from_a_summary():
    summary = {
        "silent_r2": {"grpo": 0.9991, "dr_grpo": 0.998, "dapo": 0.9993},
        "arms": {"grpo": {"silent_rmse": 0.004}, "dr_grpo": {"silent_rmse": 0.005}},
        "campaign": {"base": {"n_prompts": 6000, "steps": 150, "group_size": 8}},
        "decile_measurement": {"draws": 200, "grpo": {"share_max_abs_diff": 2e-4}},
        "hard_quartile_initial": 0.05,
        "hard_quartile_final": {"grpo": 0.99},
        "dapo_generation_cost_ratio": 3.5,
    }
    n = report.campaign_numbers(summary)
    assert n["silent_r2_grpo"] == 0.9991
    assert n["setup"] == {"n_prompts": 6000, "steps": 150, "group_size": 8}
    assert n["decile_share_max_abs_diff"] == {"grpo": 2e-4}
    assert report.campaign_numbers({})["silent_r2_grpo"] is None
    row = {r["key"]: r for r in report.compare({"campaign_silent_r2": n["silent_r2_grpo"]})}["campaign_silent_r2"]
    assert row["computed"] and row["difference"] == pytest.approx(0.0001)


def test_campaign_not_installed_is_reported(monkeypatch):
    monkeypatch.setattr(report, "optional_import", lambda name: (None, f"{name} not installed"))
    out = report.campaign_stage(None, False)
    assert out == {"status": "not available", "reason": "gsd.simulator.campaign not installed"}


def test_campaign_stage_runs_the_simulator(tmp_path, monkeypatch, capsys):
    pytest.importorskip("gsd.simulator.campaign")
    small = {"n_prompts": 800, "steps": 40, "decile_draws": 20}  # a small campaign: the wiring, not the paper's numbers
    out = report.campaign_stage(tmp_path, False, small)
    assert out["status"] == "ok" and not out["reused_complete_run"] and out["reuse"] == "computed"
    assert set(out["silent_r2"]) == {"grpo", "dr_grpo", "dapo"}
    assert out["setup"]["n_prompts"] == 800 and out["setup"]["steps"] == 40
    assert 0.9 < out["silent_r2_grpo"] <= 1.0
    assert out["dapo_generation_cost_ratio"] > 1
    again = report.campaign_stage(tmp_path, False, small)
    assert again["reused_complete_run"] and again["silent_r2_grpo"] == out["silent_r2_grpo"]
    assert again["reuse"].startswith("reused: an earlier complete run by the same code and config")
    assert again["fingerprint"] == out["fingerprint"]
    # After a code change the folder's results are not reused: they are computed again.
    summary = tmp_path / "campaign" / "campaign_summary.json"
    before = summary.read_text()
    real = provenance.code_fingerprint()
    monkeypatch.setattr(provenance, "code_fingerprint", lambda: real[::-1])
    changed = report.campaign_stage(tmp_path, True, small)
    assert changed["status"] == "ok" and not changed["reused_complete_run"]
    assert changed["reuse"].startswith("computed again") and changed["fingerprint"] != out["fingerprint"]
    assert "computed again: the earlier results there were made by other code or config" in capsys.readouterr().err
    assert summary.read_text() != before  # rewritten (its wall times differ), not read back
    assert changed["silent_r2_grpo"] == out["silent_r2_grpo"]  # the same code underneath: the same numbers
