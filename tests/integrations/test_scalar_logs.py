"""Scalar logs written by their real writers inside the test: TRL 1.16.0's GRPOTrainer (trainer_state.json,
its TensorBoard and W&B callbacks), torch's SummaryWriter, W&B offline, verl 0.9.1's file logger; and
the TRL callback that alerts on silence, in a real tiny training.  The truth is what the reward
functions saw (:class:`real_trainers.Truth`)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

pytest.importorskip("trl")
pytest.importorskip("tensorboard")
pytest.importorskip("wandb")

from gsd.cli import main

from .real_trainers import trl_run

PROMPTS = [f"q{i}" for i in range(8)]
P = [0.1, 0.9, 0.5, 0.3, 0.0, 1.0, 0.7, 0.2]
G, BATCH, STEPS = 4, 16, 4


def _scalars_json(capsys, *argv):
    capsys.readouterr()
    rc = main(["scalars", "--json", *map(str, argv)])
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if out.strip() else None), err


def test_wandb_offline_run_read_with_its_own_step(tmp_path, monkeypatch, capsys):
    # wandb.setup() reads WANDB_* once per process: teardown() before and after, so each run here
    # takes its own folder
    import wandb

    wandb.teardown()

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = wandb.init(project="gsd-test", dir=str(tmp_path), config={"num_generations": 8})
    for step in range(3):
        run.log({"reward": 0.25 * (step + 1), "frac_reward_zero_std": 0.5 - 0.125 * step}, step=step)
    run.finish()
    wandb.teardown()
    rc, data, err = _scalars_json(capsys, tmp_path / "wandb", "--draws", 0)
    assert rc == 0, err
    assert [s["step"] for s in data["steps"]] == [0, 1, 2]
    assert [s["silent_frac"] for s in data["steps"]] == [0.5, 0.375, 0.25]
    assert data["summary"]["group_size"] == 8 and data["summary"]["group_size_from"].startswith("config")


@pytest.fixture(scope="module")
def trl_logged(tmp_path_factory):
    """One TRL run logging to trainer_state.json, TensorBoard and W&B (offline) at once."""
    import wandb

    root = tmp_path_factory.mktemp("trl_scalars")
    wandb.teardown()  # wandb.setup() reads WANDB_* once per process
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WANDB_MODE", "offline")
        mp.setenv("WANDB_DIR", str(root))
        mp.setenv("WANDB_SILENT", "true")
        mp.setenv("WANDB_PROJECT", "gsd-test")
        truth = trl_run(
            root / "out", prompts=PROMPTS, p=P, G=G, batch=BATCH, max_steps=STEPS, report_to=["tensorboard", "wandb"]
        )
        wandb.finish()
        wandb.teardown()
    return root, truth


def _truth_mean_reward(truth):
    return {step + 1: float(np.mean(r)) for step, _, r in truth.calls["correct"]}


@pytest.mark.parametrize("where", ["trainer_state", "tensorboard", "wandb"])
def test_trl_scalars_read_as_written(trl_logged, capsys, where):
    root, truth = trl_logged
    path = {"trainer_state": root / "out", "tensorboard": root / "out" / "runs", "wandb": root / "wandb"}[where]
    extra = ["--group-size", G, "--groups", BATCH // G] if where == "trainer_state" else []
    rc, data, err = _scalars_json(capsys, path, *extra)
    assert rc == 0, err
    want = truth.per_step()
    mean = _truth_mean_reward(truth)
    got = {s["step"]: s for s in data["steps"]}
    assert sorted(got) == sorted(want)
    for step, (groups, silent, wasted) in want.items():
        assert got[step]["silent_frac"] == pytest.approx(silent, abs=1e-12)  # TRL's own frac_reward_zero_std
        assert got[step]["mean_reward"] == pytest.approx(mean[step], abs=1e-6)  # float32 in the log
        assert got[step]["wasted_rollouts"] == pytest.approx(wasted, abs=1e-9)
    s = data["summary"]
    assert s["wasted_rollouts"] == pytest.approx(sum(w for _, _, w in want.values()), abs=1e-9)
    assert s["rollouts"] == STEPS * BATCH
    # TensorBoard and W&B carry TRL's config: G, the groups and the schedule are read, the count is exact
    assert s["wasted_exact"] is (where != "trainer_state")
    assert s["group_size"] == G and s["groups_per_generation"] == BATCH // G


def test_scalars_batch_advice_with_the_runs_noise_scale(trl_logged, capsys):
    """gsd scalars --noise-scale --run-lr on a real TRL run's trainer_state.json: the summary's batch advice is
    gsd.core.advice.batch_advice over the population fitted at the advice's step, at the run's generations
    per step (groups × G), with the run's lr; the report's first advice line names B, G and lr.  Without the
    groups per generation it is refused by name."""
    from gsd.core.advice import batch_advice
    from gsd.core.difficulty_fit import beta_from_moments

    root, _ = trl_logged
    noise = "40,20,80"
    rc, data, err = _scalars_json(
        capsys, root / "out", "--group-size", G, "--groups", BATCH // G, "--noise-scale", noise, "--run-lr", 1e-6
    )
    assert rc == 0, err
    s = data["summary"]
    if s.get("advice_step") is None:
        pytest.skip("no step of this run has a proper Beta fit: no population to advise for")
    row = next(r for r in data["steps"] if r["step"] == s["advice_step"])
    fit = beta_from_moments([row["mean_reward"]], [row["silent_frac"]], G)
    want = batch_advice(fit.population(0), (40.0, 20.0, 80.0), generations_per_step=BATCH, group_size=G, lr=1e-6)
    got = s["batch_advice"]
    assert (got["B_per_generation"], got["G"], got["lr_per_generation"]) == (want.B_per_generation, want.G, 1e-6)
    capsys.readouterr()
    main(["scalars", str(root / "out"), "--group-size", str(G), "--groups", str(BATCH // G), "--noise-scale", noise])
    out = capsys.readouterr().out
    first = next(line for line in out.splitlines() if line.startswith("Advised:"))  # after the run's line(s)
    assert first.startswith(f"Advised: B = {want.B_per_generation} generations per step, G = {want.G}")
    rc, _, err = _scalars_json(capsys, root / "out", "--group-size", G, "--noise-scale", noise)
    assert rc != 0 and "--groups" in err


def test_tensorboard_summary_writer_and_two_runs(tmp_path, capsys):
    from torch.utils.tensorboard import SummaryWriter

    run = tmp_path / "runs" / "a"
    w = SummaryWriter(log_dir=str(run))
    m, z = [0.5, 0.6, 0.8], [0.25, 0.375, 0.5]
    for step, (mi, zi) in enumerate(zip(m, z), start=10):
        w.add_scalar("train/reward", mi, step)
        w.add_scalar("train/frac_reward_zero_std", zi, step)
    w.close()
    rc, data, err = _scalars_json(capsys, tmp_path / "runs", "--group-size", 8, "--groups", 32)
    assert rc == 0, err
    assert [s["step"] for s in data["steps"]] == [10, 11, 12]
    assert [s["silent_frac"] for s in data["steps"]] == pytest.approx(z)  # float32 in the event file
    assert [s["mean_reward"] for s in data["steps"]] == pytest.approx(m)
    # intervals of 10, 1, 1 steps (the first log covers steps 1..10): wasted share weighs them so
    assert data["summary"]["silent_share"] == pytest.approx((0.25 * 10 + 0.375 + 0.5) / 12, rel=1e-6)
    w2 = SummaryWriter(log_dir=str(tmp_path / "runs" / "b"))
    w2.add_scalar("train/reward", 0.1, 1)
    w2.close()
    rc, _, err = _scalars_json(capsys, tmp_path / "runs")
    assert rc == 2 and "2 runs" in err


def test_verl_file_logger(tmp_path, monkeypatch, capsys):
    from verl.utils.tracking import Tracking

    path = tmp_path / "metrics.jsonl"
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(path))
    tracker = Tracking(project_name="gsd", experiment_name="t", default_backend="file")
    scores = [0.2, 0.5, 0.9]
    for step, s in enumerate(scores, start=1):
        tracker.log({"critic/score/mean": np.float32(s), "response_length/mean": 12.0}, step=step)
    tracker.finish()
    rc, data, err = _scalars_json(capsys, path, "--group-size", 8)
    assert rc == 0, err
    assert data["summary"]["format"] == "verl" and data["summary"]["silent_metric"] is None
    assert data["summary"]["wasted_share"] is None
    assert any("verl 0.9.1 logs only the mean score" in n for n in data["summary"]["notes"])
    rc, _, err = _scalars_json(capsys, path, "--fail-on", "silent>0.5")  # cannot be checked: not a pass
    assert rc == 3 and "not in the log: cannot be checked" in err
    # the lower bound m^G + (1-m)^G from the mean score alone
    got = [s["silent_lower_bound"] for s in data["steps"]]
    assert got == pytest.approx([np.float32(s) ** 8 + (1 - np.float32(s)) ** 8 for s in scores], rel=1e-6)


def test_verl_to_wandb_config_gives_the_sizes(tmp_path, monkeypatch, capsys):
    """verl's Tracking with the wandb backend hands W&B its nested config: G and the groups come from it."""
    import wandb
    from verl.utils.tracking import Tracking

    wandb.teardown()
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    config = {
        "trainer": {"project_name": "gsd"},
        "actor_rollout_ref": {"rollout": {"n": 4}},
        "data": {"train_batch_size": 6},
    }
    tracker = Tracking(project_name="gsd", experiment_name="v", default_backend="wandb", config=config)
    for step in (1, 2):
        tracker.log({"critic/score/mean": 0.25 * step, "training/filter_groups/evicted_samples": step}, step=step)
    tracker.finish()
    wandb.teardown()
    rc, data, err = _scalars_json(capsys, tmp_path / "wandb")
    assert rc == 0, err
    s = data["summary"]
    assert (s["group_size"], s["groups_per_generation"]) == (4, 6)
    assert [r["silent_frac"] for r in data["steps"]] == pytest.approx([1 / 7, 2 / 8])
    assert s["wasted_rollouts"] == pytest.approx((1 + 2) * 4)


def test_fail_on_exit_codes(trl_logged, capsys):
    root, truth = trl_logged
    worst = max(s for _, s, _ in truth.per_step().values())
    rc, data, err = _scalars_json(capsys, root / "out" / "runs", "--fail-on", f"silent>{worst - 1e-9}")
    assert rc == 3 and "--fail-on silent>" in err and data["fail_on"][0]["value"] == pytest.approx(worst)
    rc, _, err = _scalars_json(capsys, root / "out" / "runs", "--fail-on", f"silent>={worst + 1e-9},wasted>0.99")
    assert rc == 0, err
    for bad, said in (
        ("silent>1.5", "in [0, 1]"),
        ("silence>0.5", "cannot read 'silence>0.5'"),
        ("silent>nan", "in [0, 1]"),
        ("silent<0.5", "cannot read"),
    ):
        rc, _, err = _scalars_json(capsys, root / "out" / "runs", "--fail-on", bad)
        assert rc == 2 and "--fail-on" in err and said in err, err


def test_diagnose_fail_on(trl_logged, capsys):
    """The same rules on TRL's per-rollout log (completions/) of the same run: `gsd diagnose --fail-on`."""
    from gsd.diagnose.scalar_diagnosis import FAIL_ON_EXIT
    from gsd.diagnose.scalars_cli import FAIL_ON_EXIT as SPELLED

    root, truth = trl_logged
    assert FAIL_ON_EXIT == SPELLED == 3
    want = truth.per_step()
    share = sum(w for _, _, w in want.values()) / (STEPS * BATCH)
    capsys.readouterr()
    rc = main(["diagnose", "--no-progress", "--json", str(root / "out"), "--fail-on", f"wasted>{share - 1e-9}"])
    assert rc == 3 and "--fail-on wasted>" in capsys.readouterr().err
    rc = main(["diagnose", "--no-progress", "--json", str(root / "out"), "--fail-on", f"wasted>{share + 1e-9}"])
    assert rc == 0
    rc = main(["diagnose", "--no-progress", str(root / "out"), "--fail-on", "wasted>2"])
    assert rc == 2 and "--fail-on 'wasted>2'" in capsys.readouterr().err


def test_per_step_table(trl_logged, tmp_path, capsys):
    """Any CSV of per-step metrics: here TRL's log_history written by pandas with W&B's `_step` name."""
    import pandas as pd

    root, truth = trl_logged
    history = json.loads((root / "out" / "trainer_state.json").read_text())["log_history"]
    rows = [
        {
            "_step": h["step"],
            "train/reward": h["reward"],
            "train/frac_reward_zero_std": h["frac_reward_zero_std"],
            "_runtime": 1.0,
        }
        for h in history
        if "reward" in h
    ]
    pd.DataFrame(rows).to_csv(tmp_path / "history.csv", index=False)
    rc, data, err = _scalars_json(capsys, tmp_path / "history.csv", "--group-size", G, "--groups", BATCH // G)
    assert rc == 0, err
    assert {s["step"]: s["silent_frac"] for s in data["steps"]} == {k: v[1] for k, v in truth.per_step().items()}
    rc, _, err = _scalars_json(capsys, tmp_path / "history.csv", "--step-col", "nope")
    assert rc == 2 and "'nope'" in err


def test_silence_alert_warns_then_stops(tmp_path):
    from gsd.integrations.trl_alerts import SilenceAlert, SilenceWarning

    warn = SilenceAlert(silent=0.2, wasted=0.2)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        truth = trl_run(
            tmp_path / "warn", prompts=PROMPTS, p=P, G=G, batch=BATCH, max_steps=3, trainer_kwargs={"callbacks": [warn]}
        )
    per_step = truth.per_step()
    assert truth.trainer.state.global_step == 3
    assert [a["step"] for a in warn.alerts if a["metric"] == "silent"] == [s for s, v in per_step.items() if v[1] > 0.2]
    assert warn.wasted_share == pytest.approx(np.mean([v[1] for v in per_step.values()]))
    assert sum(issubclass(w.category, SilenceWarning) for w in seen) == len({a["metric"] for a in warn.alerts})
    stop = SilenceAlert(silent=0.0, stop=True)  # any silent group: stop after the first logged step
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SilenceWarning)
        truth = trl_run(
            tmp_path / "stop", prompts=PROMPTS, p=P, G=G, batch=BATCH, max_steps=4, trainer_kwargs={"callbacks": [stop]}
        )
    first = min(s for s, v in truth.per_step().items() if v[1] > 0)
    assert truth.trainer.state.global_step == first and stop.alerts[0]["step"] == first


def test_silence_alert_never_stops_training_on_bad_values(tmp_path):
    """Issue 44: SilenceAlert.on_log raised into the training loop on a None, text, list or dict
    value.  A callback ahead of it writes such values into TRL's real logs; training completes,
    each kind is warned about once, and the numeric logs are still counted."""
    from transformers import TrainerCallback

    from gsd.integrations.trl_alerts import SilenceAlert

    bad = iter([None, "0.5", [0.5], {"v": 0.5}, 1.5])

    class Corrupt(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs is not None and "frac_reward_zero_std" in logs:
                logs["frac_reward_zero_std"] = next(bad, logs["frac_reward_zero_std"])

    alert = SilenceAlert(silent=0.0, wasted=0.0)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        truth = trl_run(
            tmp_path / "bad",
            prompts=PROMPTS,
            p=P,
            G=G,
            batch=BATCH,
            max_steps=6,
            trainer_kwargs={"callbacks": [Corrupt(), alert]},
        )
    assert truth.trainer.state.global_step == 6
    kinds = [p["kind"] for p in alert.problems]
    assert kinds == ["not-a-number"] * 4 + ["not-a-fraction"]
    assert [p["step"] for p in alert.problems] == [1, 2, 3, 4, 5]
    said = [str(w.message) for w in seen if issubclass(w.category, RuntimeWarning) and "SilenceAlert" in str(w.message)]
    assert len(said) == 2 and "frac_reward_zero_std = None is not a number" in said[0]
    assert [a["step"] for a in alert.alerts if a["metric"] == "silent"] == [6] * (
        truth.per_step()[6][1] > 0
    )  # only step 6 kept its own value


def test_silence_alert_survives_what_it_is_handed():
    """The hook on its own: logs that are not a dict, a state without a step, a warnings filter
    that turns warnings into errors: nothing raises."""
    from types import SimpleNamespace

    from gsd.integrations.trl_alerts import SilenceAlert

    alert = SilenceAlert(silent=0.5)
    control = SimpleNamespace(should_training_stop=False)
    args = SimpleNamespace()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for logs, state in (
            (["frac_reward_zero_std"], SimpleNamespace(global_step=1)),
            ({"frac_reward_zero_std": 0.25}, SimpleNamespace()),
            ({"frac_reward_zero_std": "x"}, SimpleNamespace(global_step=2)),
            ({"frac_reward_zero_std": 0.9}, SimpleNamespace(global_step=3)),
        ):
            assert alert.on_log(args, state, control, logs=logs) is control
    assert [p["kind"] for p in alert.problems] == ["error", "not-a-number", "error"]
    assert "SilenceWarning" in alert.problems[-1]["reason"]


def test_silence_alert_bad_arguments():
    from gsd import InputError
    from gsd.integrations.trl_alerts import SilenceAlert

    for kw, said in (
        ({}, "give a threshold"),
        ({"silent": 1.5}, "silent must be a fraction"),
        ({"wasted": float("nan")}, "wasted must be"),
        ({"silent": 0.5, "stop": "yes"}, "stop must"),
    ):
        with pytest.raises(InputError, match=said):
            SilenceAlert(**kw)


def test_torn_wandb_file_and_bad_inputs(trl_logged, tmp_path):
    """A W&B run file cut mid-record (a run killed while writing) is read up to the cut, with a note;
    bad paths, formats and lines are one InputError naming them."""
    from gsd import InputError
    from gsd.diagnose.scalars import read_scalars

    root, _ = trl_logged
    whole = read_scalars(root / "wandb")
    data = next((root / "wandb").rglob("run-*.wandb")).read_bytes()
    cut = tmp_path / "run-cut.wandb"
    cut.write_bytes(data[: len(data) * 2 // 3 + 3])
    torn = read_scalars(cut)
    assert any("torn record" in n for n in torn.notes) and not any("torn" in n for n in whole.notes)
    common = torn.metrics.index.intersection(whole.metrics.index)
    col = "train/frac_reward_zero_std"
    assert (
        torn.metrics.loc[common, col]
        .dropna()
        .equals(whole.metrics.loc[common, col].dropna().loc[torn.metrics.loc[common, col].dropna().index])
    )
    with pytest.raises(InputError, match="does not exist"):
        read_scalars(tmp_path / "nope")
    with pytest.raises(InputError, match="fmt must be one of"):
        read_scalars(cut, fmt="mlflow")
    bad = tmp_path / "verl.jsonl"
    bad.write_text('{"step": 1, "data": {"critic/score/mean": 0.5}}\n{"step": 2, "data": \n')
    with pytest.raises(InputError, match=r"verl.jsonl:2: not a JSON line"):
        read_scalars(bad)
    with pytest.raises(InputError, match="not a W&B run file"):
        read_scalars(bad, fmt="wandb")


def test_wasted_rollouts_follow_trls_schedule(tmp_path, capsys):
    """num_iterations=2 (a generation every other step) logged every 2 steps: each log averages one
    generation, and the wasted rollouts read from TensorBoard (TRL's config in it) equal the generations'
    own count; counting a generation per step would double it."""
    truth = trl_run(
        tmp_path / "out",
        prompts=PROMPTS,
        p=P,
        G=G,
        batch=BATCH,
        max_steps=6,
        logging_steps=2,
        num_iterations=2,
        report_to=["tensorboard"],
    )
    want = truth.per_step()
    assert sorted(want) == [1, 3, 5]  # the generations, at the steps that first use them
    rc, data, err = _scalars_json(capsys, tmp_path / "out" / "runs")
    assert rc == 0, err
    s = data["summary"]
    assert s["wasted_exact"] and [r["step"] for r in data["steps"]] == [2, 4, 6]
    assert [r["generations"] for r in data["steps"]] == [1, 1, 1]
    assert s["wasted_rollouts"] == pytest.approx(sum(w for _, _, w in want.values()), abs=1e-9)
    assert s["rollouts"] == 3 * BATCH
