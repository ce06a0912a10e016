"""The engine's stages on their own: a per-prompt group size flows through sampling,
advantages, the loss and the generation count, and every logit still moves by the identity
g = σ²/(σ_c + eps) of its own group (checked against a direct computation from the counts)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gsd.simulator.loss import AdvantageTable, policy_loss
from gsd.simulator.sampling import Batch, sample_groups

from .conftest import expected_update_of_k


def _batch(p, G):
    G = torch.as_tensor(G, dtype=torch.int64)
    return Batch(
        idx=None, p=torch.as_tensor(p, dtype=torch.float64), G=G, g_max=int(G.max()), uniform=bool((G == G.max()).all())
    )


@pytest.mark.parametrize("rollouts", ["answers", "counts"])
@pytest.mark.parametrize("method, ddof, eps", [("grpo", 0, 0.0), ("grpo", 1, 1e-2), ("dr_grpo", 0, 0.0)])
def test_per_prompt_group_size_gives_each_prompt_its_identity(rollouts, method, ddof, eps):
    rng = np.random.default_rng(0)
    N = 3000
    p = rng.uniform(0.05, 0.95, N)
    sizes = [0, 2, 3, 5, 8, 16]
    G = rng.choice(sizes, N)
    batch = _batch(p, G)
    gen = torch.Generator().manual_seed(1)
    groups = sample_groups(batch, draws=1, noise=0.0, rollouts=rollouts, gen=gen)
    k = groups.k.numpy()
    assert (k <= G).all() and (k[G == 0] == 0).all()
    assert groups.n.sum(dim=(1, 2)).numpy().tolist() == G.astype(float).tolist()  # every answer in one cell
    assert groups.drawn.numpy().tolist() == (G > 0).astype(int).tolist()  # a skipped prompt draws nothing
    silent = ((k == 0) | (k == G)) & (G > 0)
    assert groups.silent_first.numpy().tolist() == silent.tolist()

    table = AdvantageTable(sizes[1:], method, ddof=ddof, eps=eps, dtype=torch.float64, device="cpu")
    z = torch.logit(batch.p).requires_grad_(True)
    policy_loss(z, groups.n, table.lookup(groups.G, groups.k), G=groups.G).loss.backward()
    g = np.zeros(N)
    for size in sizes[1:]:  # the identity at each prompt's own G
        at = G == size
        g[at] = expected_update_of_k(k[at], size, method, ddof, eps)
    np.testing.assert_allclose(-z.grad.numpy(), g, rtol=1e-12, atol=1e-14)
    assert (z.grad.numpy()[G == 0] == 0).all()


@pytest.mark.parametrize("rollouts", ["answers", "counts"])
def test_rewards_and_dapo_draws_with_per_prompt_sizes(rollouts):
    p = np.full(400, 0.03)
    G = np.tile([0, 4, 9, 12], 100)
    groups = sample_groups(_batch(p, G), draws=3, noise=0.0, rollouts=rollouts, gen=torch.Generator().manual_seed(2))
    r = groups.rewards().numpy()
    assert r.shape == (400, 12)
    assert ((r == 1).sum(1) == groups.k.numpy()).all()
    assert ((r >= 0).sum(1) == G).all()  # padding beyond each prompt's G
    drawn = groups.drawn.numpy()
    assert (drawn[G == 0] == 0).all() and drawn[G > 0].min() >= 1 and drawn.max() == 3
    # generations of the step = Σ groups drawn × G (what the ledger counts)
    assert int((groups.drawn * groups.G).sum()) == int((drawn * G).sum())
    kept_silent = groups.zero_update.numpy()
    k = groups.k.numpy()
    assert (((k == 0) | (k == G))[G > 0] == kept_silent[G > 0]).all()
    assert (drawn[kept_silent] == 3).all()


def test_noisy_verifier_cells_are_consistent():
    """Flipped rewards: k counts what the verifier marked right; answers stay in their rows."""
    p = np.full(5000, 0.3)
    groups = sample_groups(
        _batch(p, np.full(5000, 6)), draws=1, noise=0.2, rollouts="answers", gen=torch.Generator().manual_seed(3)
    )
    n = groups.n.numpy()
    assert (n >= 0).all()
    assert np.array_equal(n[:, 0, 0] + n[:, 1, 0], groups.k.numpy())
    # reward rate q = p(1−ν) + (1−p)ν = 0.38; the right-answer rate stays p
    assert n[:, :, 0].sum() / n.sum() == pytest.approx(0.38, abs=0.01)
    assert n[:, 0, :].sum() / n.sum() == pytest.approx(0.3, abs=0.01)


def test_rloo_trains_and_tracks_its_closed_form(tmp_path):
    """Every method of gsd.core.methods runs in the simulator: RLOO's update is p(1−p) exactly."""
    from gsd.simulator import SimConfig, run_simulation

    s = run_simulation(
        SimConfig(n_prompts=3000, steps=10, method="rloo", device="cpu", seed=7), tmp_path / "r", progress=False
    )
    assert s["grad_mass_over_closed_form"] == pytest.approx(1.0, abs=0.01)
    assert s["final"]["mean_p"] > s["initial"]["mean_p"]


def test_a_per_prompt_allocation_runs_through_the_engine(tmp_path, monkeypatch):
    """Swap plan_batch for one that hands out a random G per prompt (0 = skipped): the engine's
    loss, ledger and generation count follow it without another code path."""
    import gsd.simulator.engine as engine
    from gsd.simulator import SimConfig, read_ledger, run_simulation

    sizes = [0, 2, 4, 8, 16]
    handed = []

    def plan(p_all, *, group_size, batch_size, gen):
        G = torch.as_tensor(np.random.default_rng(len(handed)).choice(sizes, p_all.shape[0]))
        handed.append(G.clone())
        return Batch(idx=None, p=p_all, G=G, g_max=16, uniform=False)

    monkeypatch.setattr(engine, "plan_batch", plan)
    table = engine.AdvantageTable  # every size the plan may hand out gets its advantages
    monkeypatch.setattr(engine, "AdvantageTable", lambda _sizes, *a, **k: table(sizes[1:], *a, **k))
    for rollouts in ("answers", "counts"):
        handed.clear()
        cfg = SimConfig(n_prompts=4000, steps=6, device="cpu", seed=3, method="dapo", max_draws=2, rollouts=rollouts)
        s = run_simulation(cfg, tmp_path / rollouts, progress=False)
        ledger = read_ledger(tmp_path / rollouts)
        for step, G in enumerate(handed):
            row = ledger.iloc[step]
            assert row["n_batch"] == int((G > 0).sum())
            assert row["groups"] >= row["n_batch"]
            assert row["generations"] % 2 == 0 and row["generations"] >= int(G.sum())  # Σ drawn × G, every G even
        assert s["grad_mass_over_closed_form"] == pytest.approx(1.0, abs=0.02)  # the closed forms at each prompt's G
        assert s["groups_total"] == pytest.approx(s["groups_pred_total"], rel=0.02)


def test_campaign_measures_any_advantage_method(tmp_path):
    """decile_methods takes every method with its own advantages (gsd.core.methods), RLOO included."""
    from gsd.simulator import run_paper_campaign

    s = run_paper_campaign(
        tmp_path / "c",
        overrides={"n_prompts": 400, "steps": 3, "decile_draws": 20, "decile_methods": ["grpo", "rloo"]},
        progress=False,
    )
    assert set(s["decile_measurement"]) >= {"grpo", "rloo"}
    assert s["decile_measurement"]["rloo"]["mass_ratio"] == pytest.approx(1.0, abs=0.05)
    assert (tmp_path / "c" / "campaign.png").stat().st_size > 10_000


def test_to_host_keeps_every_dtype_exact():
    """One cat brings ints, bools and float32 to the host as float64 without rounding: a
    float32 result would turn 2^24 + 1 generations into 2^24."""
    from gsd.simulator.engine import to_host

    named = {
        "count": torch.tensor(2**24 + 1),
        "flag": torch.tensor([True, False]).sum(),
        "f32": torch.tensor([0.1, 0.2], dtype=torch.float32),
        "f64": torch.tensor(1 / 3, dtype=torch.float64),
    }
    host = to_host(named)
    assert host["count"] == 2**24 + 1 and host["flag"] == 1.0
    assert host["f32"].dtype == np.float64 and host["f32"].tolist() == [float(np.float32(0.1)), float(np.float32(0.2))]
    assert host["f64"] == 1 / 3


def test_ledger_file_round_trip_without_pandas(tmp_path):
    """write_ledger / read_ledger(columns=...) go through pyarrow's buffers: the same values and
    dtypes as the DataFrame reader, NaN kept, and pandas never imported on that path (a fresh
    interpreter checks it: the campaign process does not need pandas)."""
    import subprocess
    import sys

    from gsd.simulator.ledger import COLUMNS, INT_COLUMNS, read_ledger, write_ledger

    rng = np.random.default_rng(0)
    table = rng.uniform(0, 100, (7, len(COLUMNS)))
    for c in INT_COLUMNS:
        table[:, list(COLUMNS).index(c)] = rng.integers(0, 2**40, 7)
    table[3, list(COLUMNS).index("grad_pred")] = np.nan
    write_ledger(tmp_path / "ledger.parquet", table)
    frame = read_ledger(tmp_path)
    cols = read_ledger(tmp_path, columns=list(COLUMNS))
    for j, c in enumerate(COLUMNS):
        assert cols[c].dtype == frame[c].dtype == (np.int64 if c in INT_COLUMNS else np.float64)
        np.testing.assert_array_equal(cols[c], frame[c].to_numpy())
        np.testing.assert_array_equal(cols[c], table[:, j].astype(cols[c].dtype))
    code = (
        "import sys, numpy as np; from gsd.simulator.ledger import COLUMNS, write_ledger, read_ledger; "
        f"write_ledger({str(tmp_path / 'b' / 'ledger.parquet')!r}, np.zeros((3, len(COLUMNS)))); "
        f"read_ledger({str(tmp_path / 'b')!r}, columns=['step', 'silent_frac']); "
        "assert 'pandas' not in sys.modules, 'pandas imported'"
    )
    (tmp_path / "b").mkdir()
    subprocess.run([sys.executable, "-c", code], check=True)
