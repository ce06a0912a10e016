"""Logs written by the real trainers' own code (TRL 1.16.0, verl 0.9.1), on the CPU, with the truth
recorded inside the run: the reward functions see every group the trainer drew.

Nothing is downloaded: the model is a tiny Qwen2 built from a config and the tokenizer a
word-level one built in code.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

WORDS = ["<pad>", "<eos>", "<unk>"] + [f"w{i}" for i in range(40)] + [f"q{i}" for i in range(16)]
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }} {{ m['content'] }} {% endfor %}"
    "{% if add_generation_prompt %}assistant {% endif %}"
)


def diagnose_json(capsys, *argv):
    """``gsd diagnose --json`` on ``argv``: the parsed output (what the trainers printed before is dropped)."""
    from gsd.cli import main

    capsys.readouterr()  # verl's writer prints a line per dump
    rc = main(["diagnose", "--no-progress", "--json", *map(str, argv)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return json.loads(out)


def steps_of(data):
    """{step: (groups, silent_frac, wasted_rollouts)} of a ``gsd diagnose --json`` output."""
    return {s["step"]: (s["groups"], s["silent_frac"], s["wasted_rollouts"]) for s in data["steps"]}


def tokenizer():
    from gsd.reproduce.transformer import tokenizer as word_tokenizer

    return word_tokenizer(WORDS, CHAT_TEMPLATE)


def tiny_model(seed=0):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    return Qwen2ForCausalLM(
        Qwen2Config(
            vocab_size=64,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            pad_token_id=0,
            eos_token_id=1,
            bos_token_id=None,
        )
    )


@dataclass
class Truth:
    """What the reward functions saw: one entry per generation (call), rows in the trainer's order."""

    G: int
    weights: tuple
    calls: dict = field(default_factory=dict)  # function name -> list of (global_step, prompts, rewards)
    trainer: object = None  # the trainer that ran

    def record(self, name, step, prompts, rewards):
        self.calls.setdefault(name, []).append((step, prompts, rewards))

    def per_step(self, steps=None):
        """{step: (groups, silent_frac, wasted_rollouts)} of the generations (only ``steps`` if given).

        As TRL counts, with TRL's own arithmetic: the rewards as a float32 tensor (None → NaN),
        the weighted float32 ``nansum`` (a row with every reward None stays NaN), a group silent
        when ``torch.isclose(nanstd(group), 0)`` — TRL's ``nanstd``, NaN (fewer than two scorable
        rows) is not silent — and a silent group wastes its G rollouts."""
        import torch
        from trl.trainer.utils import nanstd

        names = list(self.calls)
        table = {}
        for calls in zip(*(self.calls[n] for n in names)):
            step = calls[0][0] + 1
            if steps is not None and step not in steps:
                continue
            parts = torch.tensor([[torch.nan if x is None else x for x in c[2]] for c in calls], dtype=torch.float32).T
            total = (parts * torch.tensor(self.weights, dtype=torch.float32)).nansum(dim=1)
            total[torch.isnan(parts).all(dim=1)] = torch.nan
            std = nanstd(total.view(-1, self.G), dim=1)
            silent = torch.isclose(std, torch.zeros_like(std)).numpy()
            table[step] = (len(silent), float(silent.mean()), int(self.G * silent.sum()))
        return table

    def generations(self):
        """Per generation: the step that first uses it (global_step at the call + 1) and per group
        (block of G rows) its total reward (float64, None as NaN)."""
        names = list(self.calls)
        out = []
        for calls in zip(*(self.calls[n] for n in names)):
            step = calls[0][0] + 1
            total = sum(
                w * np.array([np.nan if x is None else x for x in c[2]], float) for w, c in zip(self.weights, calls)
            )
            out.append((step, total.reshape(-1, self.G)))
        return out


def trl_run(
    out: Path,
    *,
    prompts,
    p,
    G=4,
    batch=16,
    max_steps=4,
    weights=None,
    second_reward=False,
    seed=0,
    trainer_cls=None,
    trainer_kwargs=None,
    wrap=None,
    unscorable=None,
    values=None,
    none_rows=(),
    resume=None,
    truth=None,
    **config,
):
    """Train a tiny GRPOTrainer with ``log_completions=True`` into ``out``; returns the Truth.

    ``p``: per prompt, the probability that the ``correct`` reward is 1 (drawn by the reward
    function from its own generator); with ``values`` (per prompt a pair (wrong, right)) the
    reward is that pair's entry instead of 0/1.  ``none_rows``: positions within every
    generation whose reward is None.  ``resume``: a checkpoint folder to resume from;
    ``truth``: a Truth to add this run's calls to (a resumed run continues its first attempt's).  ``second_reward``: a second function ``fmt`` (0 or 1,
    probability 1/2), weighted by ``weights``.  ``trainer_cls`` (default GRPOTrainer) is built
    with ``trainer_kwargs``; ``wrap`` maps the reward functions before they are handed over.
    """
    import random

    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from gsd.reproduce.transformer import torch_threads

    weights = tuple(weights or ((1.0, 1.0) if second_reward else (1.0,)))
    truth = truth if truth is not None else Truth(G, weights)
    rng = random.Random(seed + (1000 if resume else 0))

    def correct(prompts, completions, p, trainer_state, v=None, **kw):
        right = [rng.random() < q for q in p]
        r = [float(x) for x in right] if values is None else [float(values[j][int(x)]) for j, x in zip(v, right)]
        if unscorable:  # the function cannot score every unscorable-th row: TRL gets None
            r = [None if i % unscorable == unscorable - 1 else x for i, x in enumerate(r)]
        r = [None if i in none_rows else x for i, x in enumerate(r)]
        if _training(kw):
            truth.record("correct", trainer_state.global_step, list(prompts), r)
        return r

    def fmt(prompts, completions, trainer_state, **kw):
        r = [float(rng.random() < 0.5) for _ in prompts]
        if _training(kw):
            truth.record("fmt", trainer_state.global_step, list(prompts), r)
        return r

    config.setdefault("logging_steps", 1)
    config.setdefault("save_strategy", "no")
    config.setdefault("report_to", [])
    funcs = [correct, fmt] if second_reward else [correct]
    columns = {"prompt": list(prompts), "p": list(p)}
    if values is not None:
        columns["v"] = list(range(len(prompts)))
    ds = Dataset.from_dict(columns)
    args = GRPOConfig(
        output_dir=str(out),
        use_cpu=True,
        use_vllm=False,
        max_completion_length=3,
        num_generations=G,
        per_device_train_batch_size=batch,
        max_steps=max_steps,
        log_completions=True,
        num_completions_to_print=0,
        seed=seed,
        learning_rate=1e-3,
        reward_weights=list(weights) if second_reward else None,
        **config,
    )
    # one torch thread: the tiny model's matrices are a few dozen wide, a second thread only adds its start
    # and waits (a 4-step run took 1.3-5.7 s on two threads of a busy 2-core machine, 0.5-0.7 s on one,
    # with the same rewards and groups)
    with torch_threads(1):
        trainer = (trainer_cls or GRPOTrainer)(
            model=tiny_model(seed),
            reward_funcs=wrap(funcs) if wrap else funcs,
            args=args,
            train_dataset=ds,
            eval_dataset=ds if config.get("eval_strategy", "no") != "no" else None,
            processing_class=tokenizer(),
            **(trainer_kwargs or {}),
        )
        trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    trainer.save_state()
    truth.trainer = trainer
    return truth


def _training(kw) -> bool:
    """TRL calls the reward functions in evaluation too; the trainer's own model says which (the
    bound ``log_extra`` it passes leads back to the trainer)."""
    return bool(kw["log_extra"].__self__.model.training)


# ----------------------------------------------------------------------------------------- verl


class VerlRun:
    """verl 0.9.1's own batch balancing and rollout dump, driven step by step on the CPU.

    A step takes dataset rows (prompt texts), repeats each ``n`` times as verl does
    (``batch.repeat(interleave=True)``, one ``uid`` per dataset row), scores every response,
    reorders the batch with ``RayPPOTrainer._balance_batch`` (two data-parallel ranks) and dumps
    it with ``RayPPOTrainer._log_rollout_data`` → ``_dump_generations`` → ``_write_generations``.
    The truth is the uid groups' scores.
    """

    def __init__(self, dump_dir: Path, n: int = 4, seed: int = 0):
        from omegaconf import OmegaConf
        from verl.trainer.ppo.ray_trainer import RayPPOTrainer

        self.dump_dir, self.n = Path(dump_dir), n
        self.rng = np.random.default_rng(seed)
        self.tokenizer = tokenizer()
        tr = object.__new__(RayPPOTrainer)
        tr.config = OmegaConf.create(
            {"trainer": {"balance_batch": True}, "actor_rollout_ref": {"actor": {"ppo_mini_batch_size": n}}}
        )

        class WorkerGroup:  # two data-parallel ranks: what _balance_batch asks of the workers
            _dispatch_info = {"actor": [0, 1]}

        tr.actor_rollout_wg = WorkerGroup()
        tr.tokenizer = self.tokenizer
        tr._init_dump_executor()
        self.trainer = tr
        self.truth: dict[int, list] = {}  # step -> list of per-group score arrays
        self.order: dict[int, list] = {}  # step -> the uids of those groups

    def step(self, step: int, prompts, p, *, graded=False, extra_index=False):
        """One training step: scores are right/wrong with probability ``p`` per dataset row, or
        graded (right·0.8 + a random 0.1 or 0.2: equal scores in a group are possible)."""
        import torch
        from verl import DataProto

        n, P, R = self.n, 8, 5
        B = len(prompts) * n
        ptoks = torch.zeros(B, P, dtype=torch.long)
        rtoks = torch.zeros(B, R, dtype=torch.long)
        mask = torch.zeros(B, P + R, dtype=torch.long)
        scores = torch.zeros(B, R)
        uid = np.empty(B, dtype=object)
        index = np.empty(B, dtype=object)
        rm = np.empty(B, dtype=object)
        for i in range(B):
            j = i // n
            ids = self.tokenizer(prompts[j])["input_ids"]
            ptoks[i, P - len(ids) :] = torch.tensor(ids)
            mask[i, P - len(ids) : P] = 1
            L = int(self.rng.integers(1, R + 1))
            rtoks[i, :L] = torch.tensor(self.rng.integers(3, 40, L))
            mask[i, P : P + L] = 1
            right = float(self.rng.random() < p[j])
            scores[i, L - 1] = right * 0.8 + float(self.rng.choice([0.1, 0.2])) if graded else right
            uid[i], index[i], rm[i] = f"{step}-{j}", j, {"ground_truth": "w1"}
        batch = DataProto.from_single_dict(
            {
                "prompts": ptoks,
                "responses": rtoks,
                "attention_mask": mask,
                "token_level_scores": scores,
                "uid": uid,
                "index": index,
                "reward_model": rm,
            }
        )
        self.trainer._balance_batch(batch, metrics={})
        total = batch.batch["token_level_scores"].sum(-1).numpy().astype(np.float64)
        uids = batch.non_tensor_batch["uid"]
        self.order[step] = list(dict.fromkeys(uids.tolist()))
        self.truth[step] = [total[uids == u] for u in self.order[step]]
        # A reward manager's extra info: numpy booleans (dumped as "True"/"False") and the index.
        extra = {"acc": [np.bool_(t >= 0.5) for t in total]}
        if extra_index:
            extra["index"] = batch.non_tensor_batch["index"].tolist()
        self.trainer.global_steps = step
        self.trainer._log_rollout_data(batch, extra, {}, str(self.dump_dir))
        return batch

    def close(self):
        self.trainer._shutdown_dump_executor()

    def per_step(self, drop=None):
        """{step: (groups, silent_frac, wasted_rollouts)}; ``drop``: {step: uids to leave out}."""
        out = {}
        for step, groups in self.truth.items():
            keep = [g for u, g in zip(self.order[step], groups) if u not in (drop or {}).get(step, ())]
            silent = [g.max() == g.min() for g in keep]
            out[step] = (len(keep), float(np.mean(silent)), int(sum(len(g) for g, s in zip(keep, silent) if s)))
        return out
