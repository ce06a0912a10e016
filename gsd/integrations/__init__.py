"""One home per outside trainer: what it computes, what it writes, and its quirks.

* :mod:`gsd.integrations.trl` — TRL's ``GRPOTrainer`` (its advantage convention, its
  ``completions_{step:05d}.parquet`` logs, ``trainer_state.json``);
* :mod:`gsd.integrations.trl_live` — gsd inside a live TRL run (a tracker in the reward
  functions, a ``GRPOTrainer`` subclass), built on the format module and :mod:`gsd.diagnose`;
  the only module that imports TRL itself;
* :mod:`gsd.integrations.tracker_table` — the self-describing table the tracker saves and the
  log reader reads;
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
