"""Which prompts a live TRL run generates for: TRL's sampler order with some prompts skipped before generation.

:class:`SkipSampler` keeps TRL's ``RepeatSampler`` order and skips, at their turn, prompts whose
next group the tracker's posterior (:class:`gsd.live.tracker.GroupTracker`) says is almost surely
silent, or of low value per rollout against the batch's alternatives (:class:`SkipPolicy`).
:class:`gsd.live.trainer.GSDGRPOTrainer` puts it in place of TRL's sampler.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from ..validation import real_or_none
from .tracker import GroupTracker

__all__ = ["SkipPolicy", "SkipSampler"]


@dataclass(frozen=True)
class SkipPolicy:
    """Hyper-parameters of ``GSDGRPOTrainer(skip_policy="value")``: which prompts fill each
    generation batch, by value per rollout against the batch's alternatives.

    At each generation batch of B prompts the sampler looks at the next ``ceil(candidates·B)``
    prompts in turn order (TRL's order: a fresh permutation of the dataset each time the last one
    is used up) and keeps the B most valuable; the others are skipped at this turn.  A prompt's
    value is ``allocation_value(p, G, value)/G``, the expected progress per rollout of a group of
    the run's G, with p drawn from the prompt's posterior (Thompson sampling: a prompt whose
    posterior is wide is sometimes drawn high, so none is written off on a few groups), or under
    the posterior expectation with ``thompson=False``.  The posterior is the tracker's, with its
    half-life (:class:`GroupTracker` ``half_life``).  At one G, every value symmetric in p and
    1 − p that rises towards p = ½ (all but ``"knapsack"``) ranks Thompson draws alike, by how
    near ½ the drawn p is; ``value`` matters with ``thompson=False`` or ``"knapsack"``.

    Attributes
    ----------
    candidates : float ≥ 1
        Prompts looked at per batch slot (default 2: half of the prompts whose turn comes are
        skipped; 1 skips nothing).
    value : str
        The value of a group (:func:`gsd.allocation_value`; default ``"gain"``, the expected
        one-step gain of 2·arcsin√p, the objective gsd reports learning on).  One-step values
        only (not ``"horizon"`` / ``"dr_horizon"``).
    thompson : bool
        Value a draw from each posterior (default) rather than the posterior expectation.
    max_skips : int ≥ 0
        Hard cap on starvation: a prompt skipped at its last ``max_skips`` turns is drawn at the
        next (default 4: at least once every 5 turns).
    seed : int, optional
        Seed of the Thompson draws (default: the trainer's ``args.seed``).

    A prompt with no rollouts of its own, and one at its cap, is drawn first; when more of them
    than B come up together, those beyond B wait, in order, for the next batch (neither drawn nor
    skipped).
    """

    candidates: float = 2.0
    value: str = "gain"
    thompson: bool = True
    max_skips: int = 4
    seed: int | None = None

    def __post_init__(self):
        from ..allocation import ALLOCATION_VALUES, HORIZON_VALUES

        c = real_or_none(self.candidates)
        if c is None or not 1.0 <= c <= 64.0:
            raise InputError(f"candidates must be a number in [1, 64], got {self.candidates!r}")
        one_step = [v for v in ALLOCATION_VALUES if v not in HORIZON_VALUES]
        if self.value not in one_step:
            raise InputError(f"value must be one of {', '.join(map(repr, one_step))}, got {self.value!r}")
        if not isinstance(self.thompson, (bool, np.bool_)):
            raise InputError(f"thompson must be True or False, got {self.thompson!r}")
        as_max_skips(self.max_skips)
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer))):
            raise InputError(f"seed must be an integer or None, got {self.seed!r}")


def as_max_skips(max_skips) -> int:
    """``max_skips`` as an int in [0, 10⁶], or an InputError naming it."""
    if isinstance(max_skips, bool) or not isinstance(max_skips, (int, np.integer)) or not 0 <= max_skips <= 10**6:
        raise InputError(f"max_skips must be an integer in [0, 1000000], got {max_skips!r}")
    return int(max_skips)


class SkipSampler:
    """TRL's ``RepeatSampler`` order (each prompt ``num_generations`` times, each generation batch
    ``repeat_count`` times) with some prompts skipped before generation; every generation batch
    keeps its B prompts.

    Prompts come up in turns (a fresh permutation of the dataset each time the last one is used
    up).  Two rules:

    - ``policy`` (a :class:`SkipPolicy`): each batch looks at ``ceil(candidates·B)`` turns and
      keeps the B prompts of highest value per rollout (see :class:`SkipPolicy`).
    - ``skip_above`` (the legacy rule): at its turn a prompt is skipped when its posterior
      probability of a silent group at the run's G is above ``skip_above``; the batch is filled
      with the next prompts.  A prompt without rollouts of its own is never skipped.

    Under either, a prompt skipped at its last ``max_skips`` turns is drawn at the next.  If the
    valuation fails, the batch is the next B prompts in turn order (warned once through the
    tracker): the sampler never stops the run.
    """

    def __init__(
        self,
        keys,
        tracker: GroupTracker,
        *,
        batch_size: int,
        repeat_count: int,
        shuffle: bool,
        seed,
        skip_above: float | None = None,
        max_skips: int = 4,
        policy: SkipPolicy | None = None,
    ):
        import torch

        if (skip_above is None) == (policy is None):
            raise InputError("give SkipSampler one rule: skip_above or policy")
        self.keys = list(keys)
        self.tracker = tracker
        self.num_samples = len(self.keys)
        self.batch_size, self.repeat_count = int(batch_size), int(repeat_count)
        self.mini_repeat_count = tracker.num_generations
        self.shuffle = shuffle
        self.policy = policy
        self.skip_above = None if skip_above is None else float(skip_above)
        self.max_skips = policy.max_skips if policy is not None else as_max_skips(max_skips)
        self.generator = torch.Generator()
        if seed is not None:
            self.generator.manual_seed(int(seed))
        draw_seed = policy.seed if policy is not None and policy.seed is not None else seed
        self.rng = np.random.default_rng(None if draw_seed is None else int(draw_seed))
        self.streak = np.zeros(self.num_samples, np.int64)  # consecutive turns skipped
        self._queue = np.zeros(0, np.int64)
        self.pending: list[int] = []  # prompts skipped for each batch drawn and not yet generated
        self.skipped = 0
        self.turns = 0
        #: Per batch drawn: the dataset rows whose turn it was, and which were skipped.
        self.decisions: list[tuple[np.ndarray, np.ndarray]] = []

    def __len__(self) -> int:
        return (self.num_samples // self.batch_size) * self.batch_size * self.mini_repeat_count * self.repeat_count

    def _turns(self, count: int) -> np.ndarray:
        import torch

        out = []
        while count:
            if self._queue.size == 0:
                self._queue = (
                    torch.randperm(self.num_samples, generator=self.generator).numpy()
                    if self.shuffle
                    else np.arange(self.num_samples)
                )
            take, self._queue = self._queue[:count], self._queue[count:]
            out.append(take)
            count -= take.size
        return np.concatenate(out)

    def _codes(self, rows) -> np.ndarray:
        return self.tracker._codes_of_keys([self.keys[i] for i in rows])

    def next_batch(self) -> np.ndarray:
        """The prompt indices of the next batch, as the sampler's iterator hands them to TRL (it advances the
        sampler: skips are counted and the streaks updated)."""
        try:
            chosen, looked, skipped = self._by_value() if self.policy is not None else self._by_silence()
        except Exception as exc:  # noqa: BLE001 (never stop the run: fall back to plain turn order)
            self.tracker._unscorable(
                None,
                "sampler",
                f"the skip sampler could not value the prompts "
                f"({type(exc).__name__}: {exc}); this batch is the next prompts in turn order",
            )
            looked = self._turns(self.batch_size)
            chosen, skipped = looked, np.zeros(looked.size, bool)
            self.streak[looked] = 0
        self.decisions.append((looked, skipped))
        self.turns += looked.size
        self.skipped += int(skipped.sum())
        self.pending.append(int(skipped.sum()))
        return chosen

    def _by_silence(self):
        chosen, looked, skipped = [], [], []
        need = self.batch_size
        while need:
            rows = self._turns(need)
            q = self.tracker._silent_probability_of_codes(self._codes(rows))
            skip = (q > self.skip_above) & (self.streak[rows] < self.max_skips)
            self.streak[rows] = np.where(skip, self.streak[rows] + 1, 0)
            chosen.append(rows[~skip])
            looked.append(rows)
            skipped.append(skip)
            need -= int((~skip).sum())
        return np.concatenate(chosen), np.concatenate(looked), np.concatenate(skipped)

    def _by_value(self):
        """The B most valuable of the next ceil(candidates·B) turns; prompts never seen and
        prompts at their cap first (in turn order), those beyond B waiting for the next batch."""
        B = self.batch_size
        window = self._turns(min(self.num_samples, max(B, int(np.ceil(self.policy.candidates * B)))))
        first = np.zeros(window.size, bool)
        first[np.unique(window, return_index=True)[1]] = True  # a prompt twice in one window (a new permutation)
        tracker = self.tracker
        a, b, seen = tracker._posterior_of_codes(self._codes(window), tracker._next_step())
        must = first & ((~seen) | (self.streak[window] >= self.max_skips) | tracker._graded)
        if must.sum() >= B:
            keep = must & (np.cumsum(must) <= B)
        else:
            value = self._values(a, b)
            value[must | ~first] = -np.inf  # ranked apart: must is kept, a repeat waits
            free = np.flatnonzero(first & ~must)
            top = free[np.argsort(-value[free], kind="stable")[: B - int(must.sum())]]
            keep = must.copy()
            keep[top] = True
        wait = (must | ~first) & ~keep  # back to the front of the queue, in order
        looked = ~wait
        self._queue = np.concatenate([window[wait], self._queue])
        rows, skip = window[looked], ~keep[looked]
        self.streak[rows] = np.where(skip, self.streak[rows] + 1, 0)
        return window[keep], rows, skip

    def _values(self, a, b) -> np.ndarray:
        """Value per rollout of a group of the run's G under each posterior Beta(a, b): at a
        Thompson draw of p, or the posterior expectation."""
        from ..allocation import allocation_value
        from ..core.posterior import BetaPosterior

        G = self.mini_repeat_count
        if self.policy.thompson:
            return allocation_value(self.rng.beta(a, b), G, self.policy.value) / G
        return allocation_value(BetaPosterior(a, b, (0.0, 0.0)), G, self.policy.value) / G

    def __iter__(self):
        G = self.mini_repeat_count
        for _ in range(self.num_samples // self.batch_size):
            batch = self.next_batch().tolist()
            for _ in range(self.repeat_count):
                for index in batch:
                    for _ in range(G):
                        yield index

    def take_skipped(self) -> int:
        """Prompts skipped for the oldest batch not yet generated (batches are generated in the
        order they are drawn; the data loader draws one ahead)."""
        return self.pending.pop(0) if self.pending else 0
