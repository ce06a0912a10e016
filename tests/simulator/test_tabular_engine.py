"""The numpy engine (gsd.simulator.tabular): its written-out logit gradient and loss against
torch's autograd of the torch engine's loss, its optimizers against the torch engine's, the two
engines against the same closed forms, the choice of engine, no torch import, and a damaged or
foreign checkpoint.  Its programs of many runs are tested with the torch engine's
(test_batched.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch

from gsd.simulator import SimConfig, read_ledger, run_simulation
from gsd.simulator.config import numpy_blockers, resolve_engine
from gsd.simulator.ledger import WALL_COLUMNS
from gsd.simulator.loss import AdvantageTable, policy_loss
from gsd.simulator.optim import SGD, Adam
from gsd.simulator.tabular import NumpyAdam, NumpySGD, advantage_rows, advantage_sums, log_sigmoid, logit_gradient


# --------------------------------------------------------------------------- gradient and loss
@pytest.mark.parametrize(
    "method, ddof, eps", [("grpo", 0, 0.0), ("grpo", 1, 1e-4), ("dr_grpo", 0, 0.0), ("rloo", 0, 0.0), ("dapo", 1, 1e-6)]
)
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
    s_right, s_wrong = advantage_sums(
        right.astype(float), None if flips is None else tuple(f.astype(float) for f in flips), G.astype(float), adv
    )
    g_ours = logit_gradient(s_right, s_wrong, G, p, q)
    loss_ours = -((s_right * log_sigmoid(p, z) + s_wrong * log_sigmoid(q, -z)) / G).sum()

    # The torch engine: cells n[y, r], its own advantage table, autograd.
    fr, fw = flips if flips is not None else (np.zeros(B), np.zeros(B))
    n = torch.tensor(np.stack([right - fr, fr, fw, G - right - fw], axis=-1), dtype=torch.float64).reshape(B, 2, 2)
    table = AdvantageTable(
        np.unique(G).tolist(),
        method if method != "dapo" else "grpo",
        ddof=ddof,
        eps=eps,
        dtype=torch.float64,
        device="cpu",
    )
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
    cfg = SimConfig(
        optimizer="adam" if kind == "adam" else "sgd",
        lr=0.01 if kind == "adam" else 0.3,
        momentum=0.9 if kind == "momentum" else 0.0,
    )
    ours = (NumpyAdam if kind == "adam" else NumpySGD)(cfg, z0)
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


# --------------------------------------------------------------------------- the two engines
def test_engines_agree_in_distribution(tmp_path):
    """The two engines draw from different streams, so their ledgers differ; both track the
    same closed forms (silent fraction, gradient mass), well inside the sampling noise."""
    cfg = SimConfig(n_prompts=3000, steps=20, device="cpu", method="dapo")
    sums = {
        e: run_simulation(cfg.with_overrides({"engine": e}), tmp_path / e, progress=False) for e in ("numpy", "torch")
    }
    for s in sums.values():
        assert s["silent_r2"] > 0.9
        assert s["grad_mass_over_closed_form"] == pytest.approx(1.0, abs=0.01)
        assert s["groups_total"] == pytest.approx(s["groups_pred_total"], rel=0.01)
    assert sums["numpy"]["final"]["mean_p"] == pytest.approx(sums["torch"]["final"]["mean_p"], abs=0.01)


# --------------------------------------------------------------------------- choosing the engine
def test_engine_choice():
    assert resolve_engine(SimConfig(device="cpu")) == "numpy"
    for key, value in [
        ("policy", "mlp"),
        ("ppo_epochs", 2),
        ("clip", True),
        ("kl_coef", 0.1),
        ("rollout_log", "trl"),
        ("allocation", "update"),
    ]:
        cfg = SimConfig(device="cpu", **{key: value})
        assert resolve_engine(cfg) == "torch" and numpy_blockers(cfg)[0].startswith(key), key
    assert resolve_engine(SimConfig(device="cpu", engine="torch")) == "torch"
    with pytest.raises(ValueError, match=r"config key 'engine' = 'numpy'.*policy = 'mlp' needs torch"):
        SimConfig(engine="numpy", policy="mlp")
    with pytest.raises(ValueError, match="config key 'engine' = 'jax'"):
        SimConfig(engine="jax")


def test_a_numpy_run_never_imports_torch(tmp_path):
    code = (
        "import sys; from gsd.simulator import SimConfig, run_simulation; "
        f"s = run_simulation(SimConfig(n_prompts=64, steps=2), {str(tmp_path / 'r')!r}, progress=False); "
        "assert s['engine'] == 'numpy', s['engine']; "
        "bad = [m for m in ('torch', 'scipy.stats', 'pandas') if m in sys.modules]; assert not bad, bad"
    )
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
    pd.testing.assert_frame_equal(
        read_ledger(run).drop(columns=list(WALL_COLUMNS)),
        read_ledger(tmp_path / "whole").drop(columns=list(WALL_COLUMNS)),
        check_exact=True,
    )
    assert {k: v for k, v in resumed.items() if k != "wall_s_total"} == {
        k: v for k, v in whole.items() if k != "wall_s_total"
    }


@pytest.mark.parametrize(
    "method, ddof, eps, noise",
    [("grpo", 0, 0.0, 0.0), ("dapo", 1, 1e-4, 0.0), ("dr_grpo", 0, 0.0, 0.1), ("rloo", 0, 0.0, 0.0)],
)
def test_closed_forms_one_run_per_row_equal_each_run_alone(method, ddof, eps, noise):
    """The ledger's closed forms of a (runs, prompts) p, as a program evaluates them, equal those of
    each run's 1-d p (the torch engine's CPU path), bit for bit; and the silent rate and the
    large-G limit equal their formulas written out here."""
    from gsd.simulator.ledger import closed_form_columns

    cfg = SimConfig(method=method, ddof=ddof, eps=eps, verifier_noise=noise, group_size=6)
    rng = np.random.default_rng(11)
    p = rng.uniform(1e-6, 1 - 1e-6, size=(3, 1001))
    dec = rng.integers(0, 10, size=p.shape)
    rows = closed_form_columns(p, 6, dec, cfg)
    for r in range(3):
        alone = closed_form_columns(p[r], 6, dec[r], cfg)
        assert set(alone) == set(rows)
        for key, value in alone.items():
            assert np.array_equal(np.asarray(rows[key][r]), np.asarray(value)), key
    q = p * (1 - noise) + (1 - p) * noise
    np.testing.assert_allclose(rows["silent_pred"], (q**6 + (1 - q) ** 6).mean(axis=1), rtol=1e-13)
    np.testing.assert_allclose(rows["grad_limit"], np.sqrt(p * (1 - p)).sum(axis=1), rtol=1e-13)
    want_d = np.stack([np.bincount(dec[r], weights=np.sqrt(p[r] * (1 - p[r])), minlength=10) for r in range(3)])
    np.testing.assert_allclose(rows["grad_limit_d"], want_d, rtol=1e-13)


# --------------------------------------------------------------------------- predictions beside the draws
def _large_config(**kw):
    from gsd.simulator import tabular

    # one program at the size where a step's predictions run in the helper thread
    return SimConfig(
        n_prompts=tabular.BESIDE_ENTRIES,
        group_size=8,
        steps=3,
        rollouts="counts",
        closed_form_every=1,
        checkpoint_every=10**6,
        engine="numpy",
        **kw,
    )


@pytest.mark.parametrize("method", ["grpo", "dapo"])
def test_predictions_beside_the_draws_same_ledger(tmp_path, monkeypatch, method):
    """A large step's closed forms and population state, computed in the helper thread while the
    draws run, give the ledger bit for bit of the same run computed in line."""
    from gsd.simulator import tabular

    cfg = _large_config(method=method, max_draws=4)
    run_simulation(cfg, tmp_path / "beside", progress=False)
    if tabular.usable_cpus() >= 2:
        assert tabular.helper_started()
    monkeypatch.setattr(tabular, "BESIDE_ENTRIES", 1 << 62)
    run_simulation(cfg, tmp_path / "inline", progress=False)
    pd.testing.assert_frame_equal(
        read_ledger(tmp_path / "beside").drop(columns=list(WALL_COLUMNS)),
        read_ledger(tmp_path / "inline").drop(columns=list(WALL_COLUMNS)),
        check_exact=True,
    )


def _child_run(out):
    run_simulation(_large_config(), out, progress=False)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="fork only")
def test_a_forked_child_starts_its_own_helper(tmp_path):
    """After the parent used its helper thread, a forked child (the allocation comparison's
    workers may be) runs large steps to the end rather than waiting on the parent's thread."""
    import multiprocessing

    from gsd.simulator import tabular

    run_simulation(_large_config(), tmp_path / "parent", progress=False)
    child = multiprocessing.get_context("fork").Process(target=_child_run, args=(tmp_path / "child",))
    child.start()
    child.join(timeout=120)
    if child.is_alive():
        child.kill()
    assert child.exitcode == 0
    pd.testing.assert_frame_equal(
        read_ledger(tmp_path / "parent").drop(columns=list(WALL_COLUMNS)),
        read_ledger(tmp_path / "child").drop(columns=list(WALL_COLUMNS)),
        check_exact=True,
    )
    assert tabular.usable_cpus() < 2 or tabular.helper_started()


@pytest.mark.parametrize(
    "over",
    [{}, {"dtype": "float32", "method": "dr_grpo"}, {"allocation": "update", "g_min": 2, "g_max": 6, "method": "rloo"}],
)
def test_exact_verifier_sums_by_row_are_the_advantages_summed(tmp_path, monkeypatch, over):
    """The engine's per-row sums for an exact verifier (S₊ = Σ of the k right answers'
    advantages, S₋ = Σ of the G − k wrong ones'), against the core's advantages of the canonical
    group summed directly, bit for bit in the run's dtype; with a plan, G = 0 (a skipped prompt)
    reads a row of zeros."""
    from gsd.core.groups import advantages
    from gsd.core.methods import method_spec
    from gsd.simulator import tabular
    from gsd.simulator.planning import planned_sizes

    seen = []
    init = tabular.Program.__init__
    monkeypatch.setattr(tabular.Program, "__init__", lambda self, members: (init(self, members), seen.append(self))[0])
    cfg = SimConfig(n_prompts=50, steps=2, rollouts="counts", engine="numpy", ddof=1, eps=1e-4, **over)
    run_simulation(cfg, tmp_path / "run", progress=False)
    [prog] = seen
    dtype = np.dtype(cfg.dtype)
    sizes = [cfg.group_size] if cfg.allocation == "fixed" else list(planned_sizes(cfg))
    s_right, s_wrong = prog.sums_flat
    for G in sizes:
        at = prog.adv_at[0, 0] + (0 if prog.planners is None else prog.g_off[0, G])
        for k in range(G + 1):
            a = advantages(
                (np.arange(G) < k).astype(np.float64)[None],
                method_spec(cfg.method).advantage,
                ddof=cfg.ddof,
                eps=cfg.eps,
            )[0].astype(dtype)
            # k equal advantages summed is k times one of them, rounded once: the engine's product
            right = dtype.type(k) * a[0] if k else dtype.type(0)
            wrong = dtype.type(G - k) * a[-1] if k < G else dtype.type(0)
            assert s_right[at + k] == right and s_wrong[at + k] == wrong, (G, k)
            assert abs(float(right) - float(a[:k].astype(np.float64).sum())) <= 1e-6 * (1 + abs(float(right)))
    if prog.planners is not None:
        zero = prog.adv_at[0, 0] + prog.g_off[0, 0]
        assert s_right[zero] == 0 and s_wrong[zero] == 0
