"""Rollout dumps written by other trainers' own code (AReaL 1.0.4), on the CPU, with the truth
recorded inside the run.

AReaL
    Its ``WorkflowExecutor`` runs its ``RLVRWorkflow`` wrapped in ``GroupedRolloutWorkflow`` (one
    task per dataset row, ``n_samples`` answers each) and dumps every finished task with its own
    ``_dump_trajectory`` to ``{fileroot}/logs/{user}/{experiment}/{trial}/rollout/{version}/
    {task_id}.jsonl``.  The only stand-in is the generation server: an object with AReaL's
    ``agenerate`` / ``get_version`` that returns random tokens (the role of SGLang or vLLM).
    AReaL scores answers in a process pool, so the truth is recorded in the executor's own
    process, by the ``should_accept_fn`` hook it calls on every finished task with the reward
    tensor the trainer receives (and the task id from AReaL's workflow context).

SkyRL is not driven here: ``skyrl`` 0.4.0 requires Python >= 3.12 and cannot be imported on the
Python 3.11 the project runs (its ``skyrl.tinker.types`` builds a pydantic model on
``typing.TypedDict``, which pydantic refuses below 3.12); ``skyrl-train`` 0.3.1 requires 3.12 too.
Nor is ms-swift 4.6.0, whose ``GRPOTrainer`` writes ``completions.jsonl``: it requires TRL < 1.0
and its import fails against TRL 1.16 (``trl.experimental.ppo`` is gone).
"""

from __future__ import annotations

import logging
import random
from pathlib import Path

import numpy as np

from .real_trainers import tokenizer

AREAL_EXPERIMENT, AREAL_TRIAL = "gsd", "trial0"


def areal_reward(prompt, completion, prompt_ids, completion_ids, p, graded=False, **data):
    """Right with probability ``p``, decided by the answer's tokens (AReaL calls this in a worker
    process, so it must be a picklable function of its arguments); graded: right·0.8 + 0.1 or 0.2."""
    u = (sum((i + 1) * t for i, t in enumerate(completion_ids)) * 2654435761 % 2**32) / 2**32
    right = float(u < p)
    return right * 0.8 + (0.1 if u * 1e3 % 1 < 0.5 else 0.2) if graded else right


class ArealRun:
    """AReaL 1.0.4's own rollout loop and dump, driven version by version on the CPU.

    Parameters
    ----------
    root : Path
        AReaL's ``fileroot``; the dumps land in :attr:`log_dir`.
    G : int
        ``gconfig.n_samples``: answers per dataset row (one task, one group).
    empty : float
        Probability that the generation server returns an empty answer (AReaL trains on it but
        leaves it out of the dump).
    rank, tasks : int, dict
        A second executor writing into the same trial (a data-parallel rank with its own rollout
        engine, numbering its tasks from 0 too) shares the first one's ``tasks``.
    """

    def __init__(self, root: Path, G: int = 4, seed: int = 0, empty: float = 0.0, rank: int = 0, tasks=None):
        from areal.api.cli_args import GenerationHyperparameters, InferenceEngineConfig
        from areal.api.io_struct import ModelResponse
        from areal.infra.remote_inf_engine import GroupedRolloutWorkflow
        from areal.infra.workflow_executor import WorkflowExecutor
        from areal.workflow.rlvr import RLVRWorkflow

        self.root, self.G = Path(root), G
        tok = tokenizer()
        tok.save_pretrained(self.root / "tokenizer")
        rng = random.Random(seed)

        class Server:  # the generation server: random tokens, stamped with the current version
            version = 0

            def get_version(self):
                return self.version

            async def agenerate(self, req):
                n = 0 if rng.random() < empty else rng.randint(1, 3)
                return ModelResponse(
                    input_tokens=list(req.input_ids),
                    output_tokens=[rng.randint(3, 40) for _ in range(n)],
                    output_logprobs=[-1.0] * n,
                    output_versions=[self.version] * n,
                    tokenizer=tok,
                )

        self.server = Server()
        self.config = InferenceEngineConfig(
            experiment_name=AREAL_EXPERIMENT,
            trial_name=AREAL_TRIAL,
            fileroot=str(root),
            tokenizer_path=str(self.root / "tokenizer"),
            dump_to_file=True,
            consumer_batch_size=64,
            max_concurrent_rollouts=64,
            max_head_offpolicyness=0,
        )
        self.executor = WorkflowExecutor(self.config, self.server)
        self.executor.initialize(logger=logging.getLogger("areal-test"))
        self.workflow = GroupedRolloutWorkflow(
            RLVRWorkflow(areal_reward, GenerationHyperparameters(max_new_tokens=3), tok),
            G,
            logging.getLogger("areal-test"),
        )
        self.rank = rank
        self.tasks: dict = (
            {} if tasks is None else tasks
        )  # (rank, task_id) -> (version, is_eval, rewards, empty rows, accepted)

    @property
    def log_dir(self) -> Path:
        from areal.utils.stats_logger import StatsLogger

        return Path(
            StatsLogger.get_log_path(experiment_name=AREAL_EXPERIMENT, trial_name=AREAL_TRIAL, fileroot=str(self.root))
        )

    def step(self, version: int, prompts, p, *, graded=False, dynamic_filter=False, is_eval=False):
        """One rollout batch at model ``version``: one task per prompt.  ``dynamic_filter``: the
        ``should_accept_fn`` also rejects groups whose rewards are all equal (DAPO's filter)."""
        from areal.infra import workflow_context

        self.server.version = version  # AReaL admits (version + 1)·64 tasks: a step of up to 64 never waits

        def record(traj):
            rewards = traj["rewards"].double().numpy().copy()
            empty = (traj["loss_mask"].sum(-1) == 0).numpy()
            accept = not (dynamic_filter and rewards.max() == rewards.min())
            self.tasks[self.rank, workflow_context.get().task_id] = (version, is_eval, rewards, empty, accept)
            return accept

        for j, (text, q) in enumerate(zip(prompts, p)):
            data = {"messages": [{"role": "user", "content": text}], "p": float(q), "graded": graded}
            self.executor.submit(data, self.workflow, should_accept_fn=record, is_eval=is_eval)
        self.executor.wait(count=len(prompts), timeout=120)

    def close(self):
        self.executor.destroy()

    def per_step(self, *, complete_only=True, is_eval=False):
        """{version: (groups, silent_frac, wasted_rollouts)} as AReaL normalised them (every answer
        of a task, accepted or not).  ``complete_only``: leave out the tasks that lost a row in the
        dump (an empty answer)."""
        out = {}
        for v in sorted({t[0] for t in self.tasks.values() if t[1] == is_eval}):
            groups = [
                t for t in self.tasks.values() if t[0] == v and t[1] == is_eval and not (complete_only and t[3].any())
            ]
            silent = [g[2].max() == g[2].min() for g in groups]
            out[v] = (len(groups), float(np.mean(silent)), int(sum(g[2].size for g, s in zip(groups, silent) if s)))
        return out

    def incomplete(self, is_eval=False) -> int:
        """Tasks that lost a row in the dump."""
        return sum(1 for t in self.tasks.values() if t[1] == is_eval and t[3].any())
