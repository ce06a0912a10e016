"""The conventions of ``gsd.trainer_advantages`` against the trainers' own advantage code: TRL
1.16.0's asynchronous GRPO scorer and AReaL 1.0.4's ``Normalization``, run on the same groups."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

import gsd


def _groups(seed):
    """Binary groups (some silent), graded groups and a few groups of equal graded rewards."""
    rng = np.random.default_rng(seed)
    binary = (rng.random((12, 6)) < rng.random((12, 1))).astype(np.float64)
    graded = np.round(rng.random((6, 6)), 3)
    equal = np.repeat(np.array([[0.1], [1 / 3], [0.7]]), 6, axis=1)
    return np.concatenate([binary, graded, equal])


def _trl_async_advantages(per_func):
    """TRL's ``_AsyncRolloutLoop._score_group`` on one group; ``per_func``: (K, G) rewards, None allowed."""
    from accelerate import PartialState
    from trl.experimental.async_grpo.async_rollout_worker import RolloutGroup, TrainingSequence, _AsyncRolloutLoop

    PartialState(cpu=True)  # the scorer logs through accelerate, which needs its (one-process) state
    K, G = len(per_func), len(per_func[0])
    loop = object.__new__(_AsyncRolloutLoop)  # the scorer needs only its reward functions, not a vLLM server
    loop.reward_funcs = [lambda k=k, **kw: list(per_func[k]) for k in range(K)]
    loop.reward_func_names = [f"f{k}" for k in range(K)]
    loop._env_reward_types, loop._provides_rollout_reward = [], False
    seq = [
        [TrainingSequence(input_ids=[1, 2], completion_mask=[0, 1], old_log_probs=[0.0, -1.0], rollout_id=str(i))]
        for i in range(G)
    ]
    group = RolloutGroup(
        prompts=[[]] * G,
        reward_kwargs={},
        completions=[[]] * G,
        completions_ids=[[2]] * G,
        completions_sequences=seq,
        tool_call_counts=[0] * G,
        tool_failure_counts=[0] * G,
        model_version=0,
        group_id=0,
        env_rewards=[None] * G,
        rollout_rewards=[None] * G,
    )
    samples = asyncio.run(loop._score_group(group))
    return np.array([s.advantage for s in samples])


def test_trl_async_convention_is_its_scorer():
    pytest.importorskip("trl.experimental.async_grpo")
    r = _groups(0)
    signal = r.max(1) > r.min(1)
    want = np.stack([_trl_async_advantages([row]) for row in r])
    got = gsd.trainer_advantages(r, "trl_async")
    np.testing.assert_allclose(got[signal], want[signal], rtol=1e-12, atol=1e-15)
    # A group of equal rewards: gsd gives 0; TRL's float64 mean leaves a rounding residue that
    # 1/(std + 1e-8) magnifies, a few units in the last place of the reward over eps.
    assert (got[~signal] == 0).all()
    ulp = np.spacing(r[~signal, :1])
    assert (np.abs(want[~signal]) <= r.shape[1] * ulp / 1e-8).all()
    # The population std: a 1-in-6 group is ±(5/6)/sqrt(5/36) apart, not the sample std's value.
    np.testing.assert_allclose(
        _trl_async_advantages([[1, 0, 0, 0, 0, 0]])[0], (5 / 6) / (np.sqrt(5) / 6 + 1e-8), rtol=1e-12
    )
    # Two functions are summed with weight 1; a group of one gets 0.
    two = np.array([[1, 0, 1, 1], [0.5, 0.5, 0, 1]])
    np.testing.assert_allclose(_trl_async_advantages(two), gsd.trainer_advantages(two.sum(0), "trl_async"), rtol=1e-12)
    assert (
        _trl_async_advantages([[0.7]]).tolist()
        == gsd.trainer_advantages([[0.7]], "trl_async").ravel().tolist()
        == [0.0]
    )


def test_trl_async_unscorable_rows_are_left_out_of_their_group():
    pytest.importorskip("trl.experimental.async_grpo")
    got = _trl_async_advantages([[1.0, None, 0.0, 1.0]])
    assert got[1] == 0.0
    np.testing.assert_allclose(got[[0, 2, 3]], gsd.trainer_advantages([1.0, 0.0, 1.0], "trl_async"), rtol=1e-12)


def test_areal_convention_is_its_normalization():
    pytest.importorskip("areal", reason="the tests against AReaL need areal==1.0.4 (make install)")
    import torch
    from areal.api.cli_args import NormConfig
    from areal.utils.data import Normalization

    r = _groups(1)
    G = r.shape[1]
    for std_level, scale in (("group", "group"), (None, "none")):
        norm = Normalization(NormConfig(mean_level="group", std_level=std_level, group_size=G))
        want = norm(torch.tensor(r.ravel(), dtype=torch.float32)).double().numpy().reshape(r.shape)
        got = gsd.trainer_advantages(r.astype(np.float32).astype(np.float64), "areal", scale=scale)
        # AReaL returns float32: compare at its precision.
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    one = Normalization(NormConfig(mean_level="group", std_level="group", group_size=1))
    assert one(torch.tensor([0.7, 0.0])).tolist() == gsd.trainer_advantages([[0.7], [0.0]], "areal").ravel().tolist()
