"""One home per outside trainer: what it computes, what it writes, and its quirks.

* :mod:`gsd.integrations.trl` — TRL's ``GRPOTrainer`` (its advantage convention, its
  ``completions_{step:05d}.parquet`` logs, ``trainer_state.json``; the live hooks import TRL
  itself, and only there);
* :mod:`gsd.integrations.verl` — verl's GRPO (its convention, its ``{step}.jsonl`` rollout
  dumps and their reordering).

The log reader (:mod:`gsd.diagnose.readers`), the simulator's log writer
(:mod:`gsd.simulator.rollout_log`) and the trainer conventions (:mod:`gsd.trainers`) all take
their knowledge of a trainer from here; reading a log never needs the trainer installed.
"""

#: The trainers with an integration module.
TRAINERS = ("trl", "verl")

#: Column (TRL) or extra key (verl) in which gsd's own simulator logs a prompt's true solve rate;
#: never a reward.
TRUTH_COLUMN = "true_p"
