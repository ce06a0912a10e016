"""gsd's verl presets against verl's own functions, when verl is installed (skipped otherwise).

verl is no dependency of gsd; the rules are restated independently in test_trainers.py and
tests/losses.  With ``pip install --no-deps verl==0.9.1`` (plus its import-time dependencies)
this file calls verl's advantage estimators, ``kl_penalty``, ``compute_policy_loss_vanilla`` and
``agg_loss`` on the same inputs.
"""

import numpy as np
import pytest
import torch

import gsd
from gsd.losses import aggregate_as, grpo_objective, kl_estimate

core = pytest.importorskip("verl.trainer.ppo.core_algos")


def _verl_advantages(fn, rewards, **kw):
    B, G = rewards.shape
    token_rewards = torch.zeros(B * G, 3, dtype=torch.float64)
    token_rewards[:, -1] = torch.as_tensor(rewards.reshape(-1))  # the outcome reward on the last token
    index = np.repeat(np.arange(B), G).astype(str)
    adv, _ = fn(token_rewards, torch.ones(B * G, 3), index, **kw)
    return adv[:, 0].reshape(B, G).numpy()


REWARDS = {
    "binary": (np.random.default_rng(0).random((16, 8)) < 0.4).astype(float),
    "graded": np.round(np.random.default_rng(1).random((6, 5)), 3),
    "one per group": np.array([[1.0], [0.0], [0.3]]),
}


@pytest.mark.parametrize("name", sorted(REWARDS))
def test_advantage_estimators(name):
    r = REWARDS[name]
    cases = [
        (core.compute_grpo_outcome_advantage, {}, "group"),
        (core.compute_grpo_outcome_advantage, {"norm_adv_by_std_in_grpo": False}, "none"),
        (core.compute_rloo_outcome_advantage, {}, "rloo"),
        (core.compute_rloo_vectorized_outcome_advantage, {}, "rloo_vectorized"),
    ]
    # verl divides a lone response by a float32 1 + 1e-6 (= 1 + 9.54e-7) whatever the rewards' dtype
    tol = 1e-7 if r.shape[-1] == 1 else 1e-12
    for fn, kw, scale in cases:
        np.testing.assert_allclose(
            gsd.trainer_advantages(r, "verl", scale=scale), _verl_advantages(fn, r, **kw), rtol=tol, atol=1e-12
        )
    # the vectorised GRPO computes in float32
    vec = _verl_advantages(core.compute_grpo_vectorized_outcome_advantage, r)
    np.testing.assert_allclose(gsd.trainer_advantages(r, "verl", dtype="float32"), vec, rtol=1e-6, atol=1e-6)


def test_low_var_kl():
    g = torch.Generator().manual_seed(0)
    logp = torch.cat([-torch.rand(40, generator=g, dtype=torch.float64) * 4, torch.tensor([-30.0, -0.1, -25.0])])
    ref = torch.cat([-torch.rand(40, generator=g, dtype=torch.float64) * 4, torch.tensor([-0.1, -30.0, -0.01])])
    torch.testing.assert_close(kl_estimate(logp, ref, "k3", trainer="verl"), core.kl_penalty(logp, ref, "low_var_kl"))
    torch.testing.assert_close(kl_estimate(logp, ref, "k1", trainer="verl"), core.kl_penalty(logp, ref, "k1"))


class _ActorConfig(dict):
    __getattr__ = dict.__getitem__


def test_vanilla_policy_loss_per_token():
    g = torch.Generator().manual_seed(1)
    logp = torch.cat([-torch.rand(30, generator=g, dtype=torch.float64) * 3, torch.tensor([-30.0, -0.1, -1.0])])
    old = torch.cat([-torch.rand(30, generator=g, dtype=torch.float64) * 3, torch.tensor([-0.2, -40.0, -1.5])])
    adv = torch.cat([torch.randn(30, generator=g, dtype=torch.float64), torch.tensor([1.0, -1.0, 2.0])])
    cfg = _ActorConfig(clip_ratio=0.2, clip_ratio_low=0.2, clip_ratio_high=0.28, clip_ratio_c=3.0, global_batch_info={})
    # one token per row under token-mean: the aggregate of a (1, 1) batch is the per-token loss
    theirs = torch.stack(
        [
            core.compute_policy_loss_vanilla(
                old[i].view(1, 1), logp[i].view(1, 1), adv[i].view(1, 1), torch.ones(1, 1), "token-mean", cfg
            )[0]
            for i in range(len(logp))
        ]
    )
    ours = -grpo_objective(logp, old, adv, eps_low=0.2, eps_high=0.28, trainer="verl")
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-15)


def test_agg_loss_modes():
    g = torch.Generator().manual_seed(2)
    loss = torch.randn(6, 7, generator=g, dtype=torch.float64)
    mask = (torch.arange(7)[None, :] < torch.tensor([7, 3, 0, 5, 7, 1])[:, None]).to(torch.float64)
    for mode in gsd.losses.VERL_AGG_MODES:
        torch.testing.assert_close(
            aggregate_as(loss, mask, "verl", mode), core.agg_loss(loss, mask, mode), rtol=1e-7, atol=0.0
        )  # seq-mean-token-mean: verl divides by n_i + 1e-8
