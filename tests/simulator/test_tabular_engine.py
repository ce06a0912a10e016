"""The numpy engine (gsd.simulator.tabular): its written-out logit gradient and loss against
torch's autograd of the torch engine's loss, its optimizers against the torch engine's, many
runs as one program bit for bit equal to the runs alone, resume after a kill, the choice of
engine, and a damaged checkpoint."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch

from gsd.simulator import SimConfig, batch_key, read_ledger, run_many, run_simulation
from gsd.simulator.config import numpy_blockers, resolve_engine
from gsd.simulator.ledger import WALL_COLUMNS
from gsd.simulator.loss import AdvantageTable, policy_loss
from gsd.simulator.optim import SGD, Adam
from gsd.simulator.tabular import _SGD, _Adam, _log, advantage_rows, advantage_sums, logit_gradient


# --------------------------------------------------------------------------- gradient and loss
@pytest.mark.parametrize("method, ddof, eps", [("grpo", 0, 0.0), ("grpo", 1, 1e-4), ("dr_grpo", 0, 0.0), ("rloo", 0, 0.0),
                                               ("dapo", 1, 1e-6)])
@pytest.mark.parametrize("noisy", [False, True])
def test_gradient_and_loss_equal_autograd(method, ddof, eps, noisy):
    """On the same groups (cell counts, with and without verifier flips) and logits spread to
    |z| = 30, plus some at ±800 (where sigmoid underflows to 0 in float64), the written-out g
    and loss equal torch's autograd of policy_loss to 1e-12."""
    rng = np.random.default_rng(7)
    B = 4000
    G = rng.integers(2, 17, size=B)
    z = rng.uniform(-30, 30, size=B)
    z[:10], z[10:20] = -800.0, 800.0
    with np.errstate(over="ignore"):
        p, q = 1 / (1 + np.exp(-z)), 1 / (1 + np.exp(z))
    right = rng.binomial(G, np.clip(p, 0.05, 0.95))
    flips = (rng.binomial(right, 0.2), rng.binomial(G - right, 0.2)) if noisy else None
    k = right if flips is None else right - flips[0] + flips[1]
    adv = np.empty((B, 2))
    for g in np.unique(G):  # the engine's table per G
        rows = G == g
        adv[rows] = advantage_rows(int(g), "grpo" if method == "dapo" else method, ddof=ddof, eps=eps)[k[rows]]
    s_right, s_wrong = advantage_sums(right.astype(float), None if flips is None else tuple(f.astype(float) for f in flips),
                                      G.astype(float), adv)
    g_ours = logit_gradient(s_right, s_wrong, G, p, q)
    loss_ours = -((s_right * _log(p, z) + s_wrong * _log(q, -z)) / G).sum()

    # The torch engine: cells n[y, r], its own advantage table, autograd.
    fr, fw = flips if flips is not None else (np.zeros(B), np.zeros(B))
    n = torch.tensor(np.stack([right - fr, fr, fw, G - right - fw], axis=-1), dtype=torch.float64).reshape(B, 2, 2)
    table = AdvantageTable(np.unique(G).tolist(), method if method != "dapo" else "grpo", ddof=ddof, eps=eps,
                           dtype=torch.float64, device="cpu")
    Gt, kt = torch.as_tensor(G), torch.as_tensor(k)
    zt = torch.tensor(z, requires_grad=True)
    terms = policy_loss(zt, n, table.lookup(Gt, kt), G=Gt)
    terms.loss.backward()
    np.testing.assert_allclose(g_ours, -zt.grad.numpy(), rtol=1e-12, atol=1e-15)
    assert loss_ours == pytest.approx(terms.loss.item(), rel=1e-12, abs=1e-12)
    assert (np.abs(g_ours) > 0).sum() > B // 4  # many groups moved: the comparison is not of zeros


@pytest.mark.parametrize("kind", ["sgd", "momentum", "adam"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_optimizers_equal_the_torch_engines(kind, dtype):
    """The numpy SGD / momentum / Adam move the logits as the torch engine's optimizers (1e-12
    in float64, 1e-6 in float32)."""
    rng = np.random.default_rng(3)
    z0 = rng.normal(size=(2, 300)).astype(dtype)
    cfg = SimConfig(optimizer="adam" if kind == "adam" else "sgd", lr=0.01 if kind == "adam" else 0.3,
                    momentum=0.9 if kind == "momentum" else 0.0)
    ours = (_Adam if kind == "adam" else _SGD)(cfg, z0)
    z = z0.copy()
    param = torch.nn.Parameter(torch.from_numpy(z0.copy()))
    ref = Adam([param], lr=cfg.lr) if kind == "adam" else SGD([param], lr=cfg.lr, momentum=cfg.momentum)
    for _ in range(8):
        grad = rng.normal(size=z0.shape).astype(dtype)
        ours.step(z, grad)
        param.grad = torch.from_numpy(grad.copy())
        ref.step()
    tol = 1e-12 if dtype == np.float64 else 1e-6
    np.testing.assert_allclose(z, param.detach().numpy(), rtol=tol, atol=tol)


# --------------------------------------------------------------------------- many runs, one program
PAPER = SimConfig(n_prompts=501, steps=7, checkpoint_every=3, device="cpu")  # 501: no vector-step condition
EVERYTHING = SimConfig(n_prompts=450, steps=6, checkpoint_every=4, device="cpu", rollouts="counts", optimizer="adam", lr=0.02,
                       batch_size=161, verifier_noise=0.1, dtype="float32")
VARIANTS = [dict(seed=1, method="grpo"), dict(seed=2, method="dapo", max_draws=3), dict(seed=1, method="dr_grpo", group_size=6),
            dict(seed=3, method="rloo"), dict(seed=2, method="grpo", ddof=1, eps=1e-6, group_size=5),
            dict(seed=4, method="dapo", group_size=12)]


def _same_run(folder_a, folder_b, summary_a, summary_b):
    a = read_ledger(folder_a).drop(columns=list(WALL_COLUMNS))
    b = read_ledger(folder_b).drop(columns=list(WALL_COLUMNS))
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    with np.load(folder_a / "checkpoint.npz") as ca, np.load(folder_b / "checkpoint.npz") as cb:
        assert ca.files == cb.files
        for key in ca.files:
            if key != "ledger":  # its wall_s column differs
                assert np.array_equal(ca[key], cb[key]), key
    drop = lambda s: {k: v for k, v in s.items() if k != "wall_s_total"}  # noqa: E731
    assert drop(summary_a) == drop(summary_b)


@pytest.mark.parametrize("base", [PAPER, EVERYTHING], ids=["paper", "everything"])
def test_each_run_equals_the_run_alone(tmp_path, base):
    cfgs = [base.with_overrides({**v, "name": f"r{i}"}) for i, v in enumerate(VARIANTS)]
    assert {resolve_engine(c) for c in cfgs} == {"numpy"} and len({batch_key(c) for c in cfgs}) == 1
    together = run_many([(c, tmp_path / "many" / c.name) for c in cfgs], progress=False)
    for c, s in zip(cfgs, together):
        assert s["engine"] == "numpy" and s["threads"] == 1
        alone = run_simulation(c, tmp_path / "alone" / c.name, progress=False)
        _same_run(tmp_path / "alone" / c.name, tmp_path / "many" / c.name, alone, s)


def test_killed_program_resumes_to_the_same_ledgers(tmp_path):
    cfgs = [PAPER.with_overrides({**v, "name": f"r{i}"}) for i, v in enumerate(VARIANTS[:3])]
    runs = [(c, tmp_path / "cut" / c.name) for c in cfgs]

    class Killed(Exception):
        pass

    def die(step):
        if step == 4:  # after the checkpoint at 3, before the one at 6
            raise Killed

    with pytest.raises(Killed):
        run_many(runs, progress=False, on_step=die)
    for _, out in runs:
        with np.load(out / "checkpoint.npz") as f:
            assert int(f["step"]) == 3
    with pytest.raises(ValueError, match="resume"):
        run_many(runs, progress=False)  # an unfinished run is not silently restarted
    # One run resumed alone, the other two as a program: the same ledgers as uninterrupted runs.
    first = run_simulation(*runs[0], resume=True, progress=False)
    resumed = [first, *run_many(runs[1:], resume=True, progress=False)]
    for c, s in zip(cfgs, resumed):
        alone = run_simulation(c, tmp_path / "alone" / c.name, progress=False)
        _same_run(tmp_path / "alone" / c.name, tmp_path / "cut" / c.name, alone, s)
    assert run_many(runs, progress=False) == resumed  # finished: the summaries, nothing rerun


def test_engines_agree_in_distribution(tmp_path):
    """The two engines draw from different streams, so their ledgers differ; both track the
    same closed forms (silent fraction, gradient mass), well inside the sampling noise."""
    cfg = SimConfig(n_prompts=3000, steps=20, device="cpu", method="dapo")
    sums = {e: run_simulation(cfg.with_overrides({"engine": e}), tmp_path / e, progress=False) for e in ("numpy", "torch")}
    for s in sums.values():
        assert s["silent_r2"] > 0.9
        assert s["grad_mass_over_closed_form"] == pytest.approx(1.0, abs=0.01)
        assert s["groups_total"] == pytest.approx(s["groups_pred_total"], rel=0.01)
    assert sums["numpy"]["final"]["mean_p"] == pytest.approx(sums["torch"]["final"]["mean_p"], abs=0.01)


# --------------------------------------------------------------------------- choosing the engine
def test_engine_choice():
    assert resolve_engine(SimConfig(device="cpu")) == "numpy"
    for key, value in [("policy", "mlp"), ("ppo_epochs", 2), ("clip", True), ("kl_coef", 0.1), ("rollout_log", "trl"),
                       ("allocation", "update")]:
        cfg = SimConfig(device="cpu", **{key: value})
        assert resolve_engine(cfg) == "torch" and numpy_blockers(cfg)[0].startswith(key), key
    assert resolve_engine(SimConfig(device="cpu", engine="torch")) == "torch"
    with pytest.raises(ValueError, match=r"config key 'engine' = 'numpy'.*policy = 'mlp' needs torch"):
        SimConfig(engine="numpy", policy="mlp")
    with pytest.raises(ValueError, match="config key 'engine' = 'jax'"):
        SimConfig(engine="jax")


def test_a_numpy_run_never_imports_torch(tmp_path):
    code = ("import sys; from gsd.simulator import SimConfig, run_simulation; "
            f"s = run_simulation(SimConfig(n_prompts=64, steps=2), {str(tmp_path / 'r')!r}, progress=False); "
            "assert s['engine'] == 'numpy', s['engine']; "
            "bad = [m for m in ('torch', 'scipy.stats', 'pandas') if m in sys.modules]; assert not bad, bad")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_damaged_or_foreign_checkpoint_is_named(tmp_path, monkeypatch):
    cfg = SimConfig(n_prompts=64, steps=6, checkpoint_every=2, device="cpu")
    run = tmp_path / "r"

    def die(step):
        if step == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt, match="stopped at step 4 of 6"):
        run_simulation(cfg, run, progress=False, on_step=die)
    raw = (run / "checkpoint.npz").read_bytes()
    (run / "checkpoint.npz").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match=r"checkpoint.npz' is damaged .*delete it"):
        run_simulation(cfg, run, resume=True, progress=False)
    (run / "checkpoint.npz").write_bytes(raw)
    # engine = auto resolved to numpy here; on a machine with a GPU it resolves to torch, which
    # must not restart the run or read a checkpoint it cannot.
    import gsd.simulator.config as config_module

    with monkeypatch.context() as m:
        m.setattr(config_module, "gpu_present", lambda: True)
        auto = cfg.with_overrides({"device": "auto"})
        (run / "config.json").write_text(json.dumps(auto.to_dict()))
        with pytest.raises(ValueError, match="written by the numpy engine.*--set engine=numpy"):
            run_simulation(auto, run, resume=True, progress=False)
    (run / "config.json").write_text(json.dumps(cfg.to_dict()))
    resumed = run_simulation(cfg, run, resume=True, progress=False)
    whole = run_simulation(cfg, tmp_path / "whole", progress=False)
    _same_run(tmp_path / "whole", run, whole, resumed)
