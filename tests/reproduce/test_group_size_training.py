"""gsd group-size-training: TRL's own GRPOTrainer at equal generations, the truth recorded in the run."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gsd import InputError
from gsd.reproduce import group_size_training as gst

pytest.importorskip("trl")

#: Smaller than FAST (seconds in CI): one task, both protocols, two uniform G and the two choosing arms.
TINY = gst.Config(
    n_prompts=16,
    tasks=("first_token",),
    lrs=(1e-2,),
    seeds=(0,),
    group_sizes=(2, 4),
    arms=("greso", "oracle"),
    prompts_per_step=4,
    generations_per_step=8,
    budget=32,
    pretrain_steps=10,
)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("gst") / "run"
    return out, gst.run(out, TINY, progress=False)


def test_runs_in_trl_and_records_the_truth(tiny_run):
    out, results = tiny_run
    # every cell: 2 protocols x (2 uniform G + 2 arms at the best G)
    assert len(results) == 8 and len(gst.load(out)) == 8
    for r in results:
        n, G = r["prompts_per_step"], r["G"]
        assert n == (TINY.prompts_per_step if r["protocol"] == "prompts" else TINY.generations_per_step // G)
        # equal generations, exactly: every arm spent the budget, every step n groups of G rewards
        assert sum(r["generations"]) == TINY.budget
        assert all(g == n * G for g in r["generations"])
        assert all(len(k) == n and len(grp) == n for k, grp in zip(r["k"], r["groups"]))
        # the rewards the reward function returned are the ones TRL trained on: their mean per step is TRL's
        # logged mean reward
        mine = [sum(k) / (n * G) for k in r["k"]]
        np.testing.assert_allclose(mine, r["trl_reward"], atol=1e-6)
        # the trajectory starts at the exact p of the initial model's hardest quarter; inside train() the
        # model's forward runs under accelerate's bfloat16 autocast (GRPOConfig's bf16=True default), p0 before
        # it in float32: they agree to bfloat16's precision (8 significant bits)
        hard = gst.hardest_quarter(r["p0"])
        assert r["hardest_prompts"] == hard.tolist()
        assert r["hardest"][0] == pytest.approx(np.mean(np.asarray(r["p0"])[hard]), rel=2**-7)
        assert len(r["hardest"]) == len(r["step_time"]) + 1 == len(r["wall"]) + 1
        assert all(t > 0 for t in r["step_time"]) and np.all(np.diff(r["wall"]) > 0)
    summ = gst.summary(results)
    assert set(summ["generations"]) == {TINY.budget}
    assert set(summ["arm"]) == {"uniform", "greso", "oracle"}


def test_oracle_groups_are_the_top_value_prompts(tiny_run):
    from gsd.core.update import fidelity

    _, results = tiny_run
    r = next(r for r in results if r["arm"] == "oracle")
    # at the first step the oracle picked the prompts of largest phi(G, p) at the initial exact p
    v = fidelity(np.asarray(r["p0"]), r["G"])
    chosen = np.asarray(r["groups"][0])
    assert v[chosen].min() >= np.sort(v)[::-1][len(chosen) - 1] - 1e-12


def test_resume_skips_finished_cells(tiny_run, monkeypatch):
    out, results = tiny_run

    def boom(*a, **k):
        raise AssertionError("a finished cell was trained again")

    monkeypatch.setattr(gst, "train_arm", boom)
    again = gst.run(out, TINY, resume=True, progress=False)

    def key(r):
        return r["protocol"], r["arm"], r["G"]

    assert sorted(map(key, again)) == sorted(map(key, results))
    assert {key(r): r["hardest"] for r in again} == {key(r): r["hardest"] for r in results}


def test_first_reach_and_paired_interval_by_hand():
    cost = np.array([0, 10, 20, 30, 40])
    traj = np.array([0.1, 0.55, 0.5, 0.85, 0.95])
    got = gst.first_reach(cost, traj, (0.5, 0.8, 0.9, 0.99))
    np.testing.assert_array_equal(got[:3], [10, 30, 40])
    assert np.isnan(got[3])  # not reached: never the budget
    # t interval on differences, by hand: mean 2, sd 1, n 3, t_{0.975, 2} = 4.302652729749464
    m, lo, hi, n = gst.paired_interval([1.0, 2.0, 3.0])
    assert (m, n) == (2.0, 3)
    assert hi - m == pytest.approx(4.302652729749464 / np.sqrt(3), rel=1e-12) and m - lo == pytest.approx(hi - m)
    assert np.isnan(gst.paired_interval([1.0, np.nan, 3.0])[0])  # an unreached seed: no number stands in
    assert np.isnan(gst.paired_interval([1.0])[1])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=30), st.floats(0, 1))
def test_first_reach_matches_a_loop(traj, target):
    cost = np.cumsum(np.arange(1, len(traj) + 1))
    want = next((c for c, y in zip(cost, traj) if y >= target), np.nan)
    got = gst.first_reach(cost, traj, (target,))[0]
    assert (np.isnan(want) and np.isnan(got)) or got == want


def test_summary_on_hand_made_trajectories():
    def cell(arm, G, seed, hardest, secs):
        steps = len(hardest) - 1
        return {
            "task": "t",
            "lr": 1e-3,
            "protocol": "prompts",
            "arm": arm,
            "G": G,
            "seed": seed,
            "generations": [8] * steps,
            "step_time": [secs] * steps,
            "wall": list(np.arange(1, steps + 1) * secs),
            "hardest": hardest,
            "arcsin": list(np.linspace(1, 2, steps + 1)),
        }

    rs = [cell("uniform", 2, s, [0.1, 0.6, 0.85, 0.95], 1.0) for s in (0, 1, 2)]
    rs += [
        cell("uniform", 4, 0, [0.1, 0.3, 0.5, 0.81], 0.5),
        cell("uniform", 4, 1, [0.1, 0.3, 0.5, 0.7], 0.5),
        cell("uniform", 4, 2, [0.1, 0.3, 0.82, 0.9], 0.5),
    ]
    rs += [cell("oracle", 2, s, [0.1, 0.8 + 0.01 * s, 0.9, 0.95], 1.0) for s in (0, 1, 2)]
    df = gst.summary(rs).set_index(["arm", "G"])
    assert (df["best_uniform_G"] == 2).all()  # reached 0.8 in 3 seeds against 2
    assert df.loc[("uniform", 2), "gens_to_0.8"] == 16 and df.loc[("oracle", 2), "gens_to_0.8"] == 8
    assert np.isnan(df.loc[("uniform", 4), "gens_to_0.8"]) and df.loc[("uniform", 4), "reached_0.8"] == 2
    assert df.loc[("oracle", 2), "d_gens_0.8"] == -8 and df.loc[("oracle", 2), "d_gens_0.8_lo"] == -8
    # equal wall time: T = 1.5 s (G = 4's whole run); G = 2 had done one step (p 0.6) by then
    assert df.loc[("uniform", 2), "hardest_at_T"] == pytest.approx(0.6)
    assert df.loc[("uniform", 4), "hardest_at_T"] == pytest.approx(np.mean([0.81, 0.7, 0.9]))


def test_greso_rule_as_the_paper_states_it():
    g = gst.GresoChooser([f"q{i}" for i in range(4)], 2, seed=0)
    prompts = ["q0", "q0", "q1", "q1", "q2", "q2"]
    g.observe(prompts, [1, 1, 0, 0, 1, 0])
    g.observe(prompts, [1, 1, 0, 0, 0, 0])
    assert g.z_easy.tolist() == [2, 0, 0, 0] and g.z_hard.tolist() == [0, 2, 1, 0]
    np.testing.assert_allclose(g.keep_probability(np.arange(4)), [0.25, 0.25, 0.5, 1.0])
    g.p_easy = 0.05
    g.z_easy[0] = 5
    assert g.keep_probability([0])[0] == 0.01  # the floor: a prompt is never dropped for good
    # exploration moves after the first pass: easy share 1/3 >= 1/12 -> less, hard 2/3 >= 1/6 -> less
    g.passes = 2
    g.p_easy = g.p_hard = 0.5
    g.observe(prompts, [1, 1, 0, 0, 1, 0])
    assert (g.p_easy, g.p_hard) == (0.49, 0.49)
    chosen = g.choose(3)
    assert len(chosen) == 3


def test_shared_task_and_bad_config():
    from gsd.reproduce.transformer import build_task

    task = build_task(32, structure="shared", pretrain_steps=2, max_len=3)
    assert task.prompts[:2] == ["u0 v0", "u1 v0"] and task.prompts[16] == "u0 v1"
    # the right answer is a rule of the first feature
    assert all(task.right[x] == task.right[x % 16] for x in range(32))
    p = task.solve_rates()
    assert p.shape == (32,) and np.all((p > 0) & (p < 1))
    with pytest.raises(InputError, match="multiple of 16"):
        build_task(20, structure="shared", pretrain_steps=0)
    with pytest.raises(InputError, match="p_range"):
        build_task(8, p_range=(0.5, np.inf), pretrain_steps=0)
    with pytest.raises(InputError, match="budget"):
        gst.config_from(True, budget=60)
    with pytest.raises(InputError, match="unknown"):
        gst.config_from(True, arms=("nope",))


def test_reproduce_stage_and_cli(tiny_run, tmp_path, monkeypatch, capsys):
    from gsd.cli import main
    from gsd.reproduce import report, report_markdown

    _, results = tiny_run
    monkeypatch.setattr(gst, "run", lambda out, cfg, **kw: results)  # the stage's own work, not the trainings
    stage = report.group_size_training_stage("fast", tmp_path)
    assert stage["status"] == "ok" and len(stage["rows"]) == 8  # 2 protocols x 4 arms
    assert all(p.is_file() for p in stage["_figures"])
    md = "\n".join(report_markdown.group_size_training_markdown(stage))
    assert "hardest quarter" in md and "oracle" in md
    assert report.group_size_training_stage("skip", tmp_path)["status"] == "skipped"
    assert (
        main(
            [
                "group-size-training",
                "--fast",
                "--out",
                str(tmp_path / "cli"),
                "--quiet",
                "--figure",
                str(tmp_path / "f.png"),
                "--csv",
                str(tmp_path / "s.csv"),
                "--tables",
                str(tmp_path / "t.md"),
            ]
        )
        == 0
    )
    assert "oracle" in capsys.readouterr().out and (tmp_path / "f.png").is_file()
    import pandas as pd

    summ = gst.summary(results)
    back = pd.read_csv(tmp_path / "s.csv")
    assert back[["arm", "G"]].values.tolist() == summ[["arm", "G"]].values.tolist()
    np.testing.assert_allclose(back["final_arcsin"], summ["final_arcsin"], rtol=1e-5)
    md = (tmp_path / "t.md").read_text()
    # one table per (task, lr, protocol), one row per arm; the reference row is the best uniform G's
    assert md.count("(best uniform G = ") == 2 and md.count("\n| ") == 2 + len(summ)
    assert md.count("| (reference) |") == 2 * 2  # its two paired columns, in each table


def test_cgrpo_counts_sampled_rows_not_padding_and_stops_at_the_budget(monkeypatch):
    """trl-cgrpo's arm: the generations it is charged are the rows its model sampled (training and
    calibration), counted here by wrapping the trainer's one sampling call, never the padding rows it
    fills a stopped prompt's block with; it stops at the first step that reaches the budget."""
    pytest.importorskip("trl_cgrpo", reason="needs trl-cgrpo==0.2.0 (pip install --no-deps trl-cgrpo==0.2.0)")
    from trl_cgrpo import CGRPOTrainer

    from gsd.reproduce.transformer import build_task

    sampled = []  # rows per call of the model's generation (training increments and calibration)
    base = CGRPOTrainer._base_generate

    def counted(self, prompt_ids, *args, **kwargs):
        sampled.append(len(prompt_ids))
        return base(self, prompt_ids, *args, **kwargs)

    monkeypatch.setattr(CGRPOTrainer, "_base_generate", counted)
    cfg = dataclasses.replace(TINY, arms=("cgrpo",), prompts_per_step=8, budget=64)
    task = build_task(cfg.n_prompts, variant=cfg.variant, max_len=cfg.max_len, seed=0, pretrain_steps=10)
    r = gst.train_arm(task, cfg, protocol="prompts", arm="cgrpo", G=2, lr=1e-2, seed=0)
    rows = cfg.prompts_per_step * 2  # the best uniform G's generations per step: CGRPO's rows per step
    k_max = max(gst.CGRPO_GRID)
    assert r["G"] == k_max and r["prompts_per_step"] == rows // k_max
    real, pad, cal = (np.array(r[f"cgrpo_{k}"]) for k in ("real", "padded", "calibration"))
    # every step's block is rows wide; the reward function saw every row (k sums its rewards per block)
    assert np.all(real + pad == rows) and all(len(k) == rows // k_max for k in r["k"])
    assert pad.sum() > 0  # the check below could not tell padding from generation otherwise
    # charged = sampled, exactly: the padding is not generation, the calibration rollouts are
    assert sum(r["generations"]) == sum(sampled) == real.sum() + cal.sum()
    assert cal[0] == rows // k_max * k_max  # calibrated once before the first step, one training call's size
    # stopped at the first step that reached the budget; the curves end at the budget
    g = np.cumsum(r["generations"])
    assert g[-1] >= cfg.budget > (g[-2] if g.size > 1 else 0)
    assert r["overshoot"] == g[-1] - cfg.budget < r["generations"][-1]
    c = gst.curves(r)
    assert c["gens"][-1] == cfg.budget and np.all(np.diff(c["gens"]) > 0)
    lo, hi = sorted(r["hardest"][-2:])
    assert lo <= c["hardest"][-1] <= hi
    assert gst.summary([{"task": "first_token", **r}])["generations"].tolist() == [cfg.budget]
