"""One process of a 2-process TRL run (``torchrun --nproc_per_node 2``, gloo, CPU), run by
test_trl_processes.py.

``GroupTracker.wrap`` on the reward function (and ``GSDGRPOTrainer`` given those wrapped
functions, which puts the tracker's figures into TRL's log), 12 rows per generation over 2 processes
with G = 4, so the middle group of every generation is cut between the processes.  Each process
writes what its own reward function saw (the truth, its rows only), its tracker's metrics and
TRL's log history to ``OUT/rank{r}.json``, and what ``GSDGRPOTrainer(skip_above=...)`` said.

``trl_two_processes.py OUT fail``: two reward functions (``correct``, ``fmt``), and at the second
generation process 1's ``correct`` returns its first reward as a ``decimal.Decimal``, which TRL
takes (``torch.tensor`` converts it) and the tracker cannot: only process 1's tracker fails before
the once-per-generation gather, while process 0's waits in it.
"""

import json
import sys
from pathlib import Path

PROMPTS = [f"q{i} w1 w2" for i in range(6)]
P = [0.0, 1.0, 0.5, 0.3, 1.0, 0.5]


def decimal_at(func, rank: int, step: int):
    """``func`` returning its first reward as a Decimal on process ``rank`` at ``global_step == step``."""
    import functools
    from decimal import Decimal

    import torch.distributed as dist

    @functools.wraps(func)
    def reward(*args, **kwargs):
        r = func(*args, **kwargs)
        if dist.get_rank() == rank and kwargs["trainer_state"].global_step == step:
            r = [Decimal(repr(r[0]))] + list(r[1:])
        return r

    return reward


def main_fail(out: Path) -> None:
    """One process's tracker fails before the gather at step 2: both still record every generation."""
    import warnings

    import torch.distributed as dist
    from real_trainers import trl_run

    from gsd.live import GroupTracker, GSDGRPOTrainer

    tracker = GroupTracker(4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        truth = trl_run(
            out / "trl",
            prompts=PROMPTS,
            p=P,
            G=4,
            batch=6,
            max_steps=4,
            second_reward=True,
            wrap=lambda funcs: tracker.wrap([decimal_at(funcs[0], 1, 1), funcs[1]]),
            trainer_cls=GSDGRPOTrainer,
            trainer_kwargs={"gsd_tracker": tracker},
        )
    (out / f"rank{dist.get_rank()}.json").write_text(
        json.dumps(
            {
                "calls": truth.calls,
                "metrics": tracker.metrics,
                "unscorable": tracker.unscorable,
                "warnings": tracker.warnings,
                "runtime_warnings": [
                    str(w.message)
                    for w in caught
                    if issubclass(w.category, RuntimeWarning) and str(w.message).startswith("gsd:")
                ],
                "log_history": truth.trainer.state.log_history,
            }
        )
    )


def main(out: Path) -> None:
    import torch.distributed as dist
    from real_trainers import tiny_model, tokenizer, trl_run

    from gsd import InputError
    from gsd.live import GroupTracker, GSDGRPOTrainer

    tracker = GroupTracker(4)
    truth = trl_run(
        out / "trl",
        prompts=PROMPTS,
        p=P,
        G=4,
        batch=6,
        max_steps=4,
        wrap=tracker.wrap,
        trainer_cls=GSDGRPOTrainer,
        trainer_kwargs={"gsd_tracker": tracker},
    )
    try:  # skipping is refused with several processes, before training
        GSDGRPOTrainer(
            model=tiny_model(),
            reward_funcs=[lambda prompts, **kw: [0.0] * len(prompts)],
            args=truth.trainer.args,
            train_dataset=truth.trainer.train_dataset,
            processing_class=tokenizer(),
            skip_above=0.9,
        )
        refused = None
    except InputError as exc:
        refused = str(exc)
    rank = dist.get_rank()
    (out / f"rank{rank}.json").write_text(
        json.dumps(
            {
                "world": dist.get_world_size(),
                "calls": truth.calls["correct"],
                "metrics": tracker.metrics,
                "log_history": truth.trainer.state.log_history,
                "warnings": tracker.warnings,
                "skip_refused": refused,
            }
        )
    )


if __name__ == "__main__":  # run by torchrun; importing it (pytest's doctest collection) runs nothing
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # real_trainers, beside this file
    (main_fail if sys.argv[2:] == ["fail"] else main)(Path(sys.argv[1]))
