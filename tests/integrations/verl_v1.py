"""verl 0.9.1's default (V1) trainer, its rollout dump run for real on the CPU.

Trajectories go into a real TransferQueue (``transferqueue`` 0.1.11: its Ray controller and
SimpleStorage units on a local Ray), keyed ``{uid}_{session_id}_{index}`` as V1's agent loop puts
them (``agent_loop_tq.py``: every output of a multi-turn session carries the session's final
score); with ``filter_groups`` the batch is drawn by V1's own ``ReplayBuffer.sample`` (DAPO's
eviction and refill); the dump is ``PPOTrainerSync._log_rollout_data`` →
``_write_generations``.  The truth is recorded from the keys: per group (uid) the final output
of each session.
"""

from __future__ import annotations

import os
import random
import uuid
from pathlib import Path

import numpy as np


def start_transfer_queue():
    """A local Ray and TransferQueue (one storage unit); returns a function that stops them."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray
    import transfer_queue as tq
    from omegaconf import OmegaConf

    # Logical CPUs: the controller and the storage unit are actors that each ask for one.
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, configure_logging=False)
    tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}}))

    def stop():
        tq.close()
        ray.shutdown()

    return stop


class VerlV1Run:
    """Steps of a V1 run dumped into ``dump_dir``; ``truth[step]`` = per group its sessions' final scores."""

    def __init__(self, dump_dir: Path, n: int = 4, seed: int = 0):
        from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

        from .real_trainers import tokenizer

        self.dump_dir, self.n = Path(dump_dir), n
        self.rng = random.Random(seed)
        self.tok = tokenizer()
        trainer = object.__new__(PPOTrainerSync)  # only what _log_rollout_data uses
        trainer.tokenizer = self.tok
        trainer._init_dump_executor()
        self.trainer = trainer
        self.truth: dict[int, list] = {}
        self.generated: dict[int, list] = {}  # every group drawn at a step, evicted ones included
        self.evicted: dict[int, int] = {}
        self.metrics: dict[int, dict] = {}  # the ReplayBuffer's own metrics of each step (filter_groups)

    # -- trajectories as V1's agent loop puts them

    def _group(self, prompt: str, p: float, outputs=None, graded=None):
        """One prompt's n sessions: keys, TransferQueue fields and tags, and its final scores."""
        import torch

        uid = str(uuid.UUID(int=self.rng.getrandbits(128)))
        ids = torch.tensor(self.tok(prompt)["input_ids"], dtype=torch.int64)
        keys, fields, finals = [], [], []
        for session in range(self.n):
            right = self.rng.random() < p
            score = float(right) if graded is None else float(graded[int(right)])
            m = 1 if outputs is None else outputs[session % len(outputs)]
            for index in range(m):  # a multi-turn session: every output carries the final score
                length = self.rng.randint(1, 4)
                rm = torch.zeros(length)
                rm[-1] = score
                keys.append(f"{uid}_{session}_{index}")
                fields.append(
                    {
                        "uid": uid,
                        "prompts": ids,
                        "responses": torch.randint(3, 40, (length,)),
                        "rm_scores": rm,
                        "reward_model": {"ground_truth": "w1"},
                    }
                )
            finals.append(np.float32(score).item())
        return uid, keys, fields, finals

    def _put(self, groups, step):
        import transfer_queue as tq
        from verl.utils.tensordict_utils import list_of_dict_to_tensordict

        keys = [k for g in groups for k in g[1]]
        fields = [f for g in groups for f in g[2]]
        order = list(range(len(keys)))
        self.rng.shuffle(order)  # TransferQueue hands rows back in any order; the dump sorts them
        tags = [{"status": "success", "global_steps": step} for _ in keys]
        meta = tq.kv_batch_put(
            keys=[keys[i] for i in order],
            partition_id="train",
            fields=list_of_dict_to_tensordict([fields[i] for i in order]),
            tags=tags,
        )
        for uid, *_ in groups:  # the prompt's own key: its group is finished (ReplayBuffer's view)
            tq.kv_put(
                key=uid, partition_id="train", tag={"is_prompt": True, "status": "finished", "global_steps": step}
            )
        return meta

    def step(self, step: int, prompts, p, *, outputs=None, graded=None, filter_groups=False):
        """One training step of ``len(prompts)`` groups; ``outputs``: outputs per session (cycled);
        ``filter_groups``: DAPO's eviction and refill by V1's ReplayBuffer before the dump."""
        import transfer_queue as tq
        from transfer_queue import KVBatchMeta

        groups = [self._group(q, x, outputs, graded) for q, x in zip(prompts, p)]
        self.generated[step] = [g[3] for g in groups]
        meta = self._put(groups, step)
        if filter_groups:
            meta = self._sample_with_filter(step, prompts, p, groups, outputs, graded)
        else:
            meta = KVBatchMeta(partition_id="train", keys=meta.keys, tags=meta.tags)
        kept = {k.rsplit("_", 2)[0] for k in meta.keys}
        self.truth[step] = [g[3] for g in groups if g[0] in kept]
        self.trainer.global_steps = step
        self.trainer._log_rollout_data(meta, {}, str(self.dump_dir))
        self.trainer._shutdown_dump_executor()  # the file is written before the next step
        self.trainer._init_dump_executor()
        tq.kv_clear(keys=list(meta.keys) + sorted(kept), partition_id="train")

    def _sample_with_filter(self, step, prompts, p, groups, outputs, graded):
        from omegaconf import OmegaConf
        from verl.trainer.ppo.v1.replay_buffer import FILTER_GROUPS_REWARD_METRIC, ReplayBuffer

        pool = list(zip(prompts, p))

        def refill(count):  # the trainer's refill: fresh prompts drawn and rolled out
            fresh = [self._group(*pool[self.rng.randrange(len(pool))], outputs, graded) for _ in range(count)]
            groups.extend(fresh)
            self.generated[step].extend(g[3] for g in fresh)
            self._put(fresh, step)

        buffer = ReplayBuffer(
            "sync",
            OmegaConf.create({}),
            None,
            "drop",
            OmegaConf.create({}),
            poll_interval=0.0,
            refill_fn=refill,
            filter_groups_metric=FILTER_GROUPS_REWARD_METRIC,
            train_batch_size=len(prompts),
            gen_batch_size=1,
            max_inflight_gen_batches=4,
        )
        meta, metrics = buffer.sample(global_steps=step, partition_id="train", batch_size=len(prompts))
        self.evicted[step] = int(metrics.get("training/filter_groups/evicted_samples", 0))
        self.metrics[step] = metrics
        return meta

    def close(self):
        self.trainer._shutdown_dump_executor()

    def per_step(self, steps=None):
        """{step: (groups, silent_frac, wasted_rollouts)} of the dumped groups, a session counted once."""
        out = {}
        for step, groups in self.truth.items():
            if steps is not None and step not in steps:
                continue
            silent = [len(g) >= 2 and max(g) == min(g) for g in groups]
            out[step] = (len(groups), float(np.mean(silent)), int(sum(len(g) for g, s in zip(groups, silent) if s)))
        return out
