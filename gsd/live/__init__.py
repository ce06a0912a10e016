"""gsd inside a live training run: a tracker in the reward functions, a skipping sampler, a trainer subclass.

The live hooks sit on top of the log reader and its tables (:mod:`gsd.diagnose`), which in turn
sit on the trainers' format modules (:mod:`gsd.integrations`): a live run's groups are counted as
``gsd diagnose`` counts a log, and the table the tracker saves is read back by it.  Each name is
imported on first use (TRL only when ``GSDGRPOTrainer`` is first touched).

* :mod:`gsd.live.tracker` — :class:`GroupTracker` (every group of a TRL run, from inside its
  reward functions), :data:`LIVE_METRICS`, TRL's arithmetic :func:`trl_total`, :func:`trl_zero_std`;
* :mod:`gsd.live.reward_calls` — what TRL hands a reward function and how the tracker takes it in
  (rewards, weights, prompt keys, one generation gathered over processes);
* :mod:`gsd.live.sampler` — :class:`SkipSampler`, :class:`SkipPolicy` (prompts skipped before
  generation);
* :mod:`gsd.live.trainer` — :class:`GSDGRPOTrainer` (TRL's ``GRPOTrainer`` with the tracker's
  figures in its logs).
"""

from ..lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "tracker": ("GroupTracker", "LIVE_METRICS", "trl_total", "trl_zero_std"),
        "sampler": ("SkipPolicy", "SkipSampler"),
        "trainer": ("GSDGRPOTrainer",),
    },
)
