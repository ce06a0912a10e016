"""Every group of a live TRL ``GRPOTrainer`` run, counted as TRL counts it, from inside its reward functions.

TRL calls each reward function once per generation with the rows in group order (each prompt's
``num_generations`` completions consecutive) and every dataset column as a keyword argument, so
:class:`GroupTracker` wraps the reward functions and sees every group exactly once, whatever
``num_iterations``, ``steps_per_generation`` or ``logging_steps``.  With several processes each
process's reward functions see only their share of the rows; the tracker gathers them (in
process order, as TRL gathers its rewards) so every process records the whole generation.

A group is silent as TRL counts ``frac_reward_zero_std``: the rewards cast to float32, their
weighted total summed in float32 (``nansum``: a function that returned None adds nothing; a row
where every function did is left out), the group's sample std (ddof 1, NaN with fewer than two
rows) and ``torch.isclose(std, 0)`` (``|std| <= 1e-8``).  :func:`trl_total` and
:func:`trl_zero_std` are those operations, in torch, on the trainer's device.

What TRL hands a reward function and how the tracker takes it in (rewards, weights, prompt keys,
the gathering over processes) is :mod:`gsd.live.reward_calls`.  TRL's file format is
:mod:`gsd.integrations.trl`; the table the tracker saves,
:mod:`gsd.integrations.tracker_table`; the trainer that puts the tracker's figures into TRL's logs,
:mod:`gsd.live.trainer`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..integrations import tracker_table as _table
from ..integrations.columns import chat_label
from ..validation import real_or_none
from .reward_calls import (
    TRL_KWARGS,
    Unscorable,
    as_half_lives,
    as_prior,
    as_rewards,
    as_weights,
    callable_name,
    distinct_names,
    gathered,
    is_async,
    is_training,
    kind_and_reason,
    open_unit_number,
    prompt_key,
    trainer_of,
    world_size,
)

__all__ = ["GroupTracker", "LIVE_METRICS", "trl_total", "trl_zero_std"]

#: gsd's figures in TRL's logs, each logged as ``gsd/<name>``.
LIVE_METRICS = (
    "silent_frac",
    "silent_pred",
    "effective_ratio",
    "fidelity",
    "advised_group_size",
    "fidelity_group_size",
    "recommended_group_size",
    "skipped",
)


def trl_total(parts, weights, device=None):
    """TRL's weighted total reward per row (:func:`gsd.integrations.trl.total_reward` on the
    trainer's ``device``)."""
    from ..integrations.trl import total_reward

    return total_reward(parts, weights, device=device)


def trl_zero_std(total, group_size: int, device=None):
    """TRL's per-group std of the total and its zero-std test, groups as consecutive blocks of
    ``group_size`` (:func:`gsd.integrations.trl.group_std` on the trainer's ``device``)."""
    from ..integrations.trl import group_std

    return group_std(total, group_size, device=device)


class GroupTracker:
    """Every group of a live TRL ``GRPOTrainer`` run, exactly, from inside its reward functions.

    ``tracker.wrap(reward_funcs)`` returns reward functions to give the trainer: each calls the
    user's function unchanged and records its rewards.  TRL calls each reward function once per
    generation with the rows in group order, so every group is seen exactly once whatever
    ``num_iterations``, ``steps_per_generation`` or ``logging_steps``; with several processes the
    tracker gathers every process's rows, in process order, as TRL gathers its rewards.  The
    functions are summed as TRL sums them (:func:`trl_total`: float32, ``weights``; a row where
    every function returned None is left out of its group) and a group is silent as TRL counts
    ``frac_reward_zero_std`` (:func:`trl_zero_std`).  Evaluation calls are not recorded.  A
    generation is numbered by the optimizer step that first uses it (as TRL numbers its completion
    files).

    Parameters
    ----------
    num_generations : int ≥ 2
        TRL's ``num_generations`` (G): a group is a block of G consecutive rows.
    weights : sequence of float, optional
        TRL's ``reward_weights`` (default: 1 each; :class:`GSDGRPOTrainer` takes the trainer's).
    threshold : float, optional
        Count total reward ≥ threshold as right for the posteriors and predictions.  Without it
        the live predictions need 0/1 totals (graded totals get the measured figures only).
        It never changes what is silent.
    prompt_id : str, optional
        A dataset column that identifies a prompt (TRL passes dataset columns to the reward
        functions); default: the prompt itself (its text, or a conversation's JSON).
    prior : ``"empirical-bayes"`` (default), ``"uniform"``, ``"jeffreys"`` or (a, b)
        Prior of each prompt's solve rate.  Live, empirical Bayes is fitted to the rollouts
        recorded *before* each generation (uniform before the first; refitted when they have
        grown by a quarter); :meth:`diagnosis` fits it to the whole run, as ``gsd diagnose`` does.
    epsilon : float in (0, 1)
        Fidelity target 1 − ε of the recommended group size.
    half_life : None (default), float > 0 or ``"auto"``
        Forget old rollouts, as ``gsd diagnose --half-life`` does: a prompt's counts from a
        generation Δ steps before the one predicted weigh 2^(−Δ/half_life) in its posterior
        (steps are the tracker's, the optimizer step that first uses a generation: one step per
        generation at TRL's defaults).  ``"auto"`` keeps every half-life of
        :data:`gsd.core.forgetting.HALF_LIVES` (None included) and uses, at each generation, the
        one whose posteriors have best predicted the run's groups so far: the sum over groups of
        prompts seen before of :func:`gsd.core.posterior.one_step_log_score`, the log-probability
        the posterior before the generation gave to the group's right answers (diagnose's score;
        ties keep the longer half-life).  The predictions, :meth:`silent_probability`,
        :meth:`posterior` and the skip sampler use the forgetting posterior.

    A training run is never stopped by the tracker: a generation it cannot record (rewards TRL
    cannot take, rows that do not form groups, every reward NaN or None) is listed in
    :attr:`unscorable` with the reason, warned about once per kind (:attr:`warnings` and a
    ``RuntimeWarning``), and training goes on as TRL decides.  Bad constructor arguments are
    refused at once.

    Attributes
    ----------
    metrics : list of dict
        Per recorded generation: ``step`` and the :data:`LIVE_METRICS` (see the docs page
        "gsd in a TRL run").
    warnings : list of str
    unscorable : list of dict
        Per generation the tracker could not score: ``step`` and ``reason``.

    Examples
    --------
    >>> tracker = GroupTracker(2)
    >>> def correct(prompts, completions, **kw):
    ...     return [1.0 if c == "yes" else 0.0 for c in completions]
    >>> [f] = tracker.wrap([correct])
    >>> f(prompts=["a", "a", "b", "b"], completions=["yes", "no", "no", "no"])
    [1.0, 0.0, 0.0, 0.0]
    >>> tracker.metrics[-1]["silent_frac"], tracker.metrics[-1]["effective_ratio"]
    (0.5, 0.5)
    """

    def __init__(
        self,
        num_generations,
        *,
        weights=None,
        threshold=None,
        prompt_id=None,
        prior="empirical-bayes",
        epsilon: float = 0.05,
        half_life=None,
    ):
        from ..validation import as_scalar_group_size

        self.num_generations = as_scalar_group_size(num_generations, "num_generations", minimum=2)
        self.weights = None if weights is None else as_weights(weights)
        if threshold is not None and real_or_none(threshold) is None:
            raise InputError(f"threshold must be a finite number, got {threshold!r}")
        self.threshold = None if threshold is None else float(threshold)
        if prompt_id is not None and not (isinstance(prompt_id, str) and prompt_id):
            raise InputError(f"prompt_id must be the name of a dataset column, got {prompt_id!r}")
        self.prompt_id = prompt_id
        self.prior = as_prior(prior)
        self.epsilon = open_unit_number(epsilon, "epsilon")
        self.half_life = half_life
        candidates = as_half_lives(half_life)
        self.metrics: list[dict] = []
        self.last_posterior = None  # the posteriors of every prompt seen, as of the last generation
        self.warnings: list[str] = []
        self.unscorable: list[dict] = []
        self._warned: set = set()
        self._skip_left: set = set()  # functions still to report for a generation that failed
        self._failure = None  # (step, kind, reason) of that generation, until it joins the other processes
        self._functions = None  # names of the wrapped reward functions
        self._code: dict[str, int] = {}  # prompt key -> dense code, in order of first appearance
        self._keys: list[str] = []
        self._values: list = []  # per code: the prompt as the saved table holds it
        self._labels: list[str] = []
        self._n = np.zeros(16, np.int64)  # per code: rollouts and right answers recorded (capacity grows)
        self._k = np.zeros(16, np.int64)
        self._steps: list[int] = []
        self._group_prompt: list[np.ndarray] = []  # per generation: each group's prompt code
        self._parts: list[np.ndarray] = []  # per generation: (functions, rows) float32 rewards, NaN for None
        self._totals: list[np.ndarray] = []  # per generation: TRL's float32 total per row
        self._silent: list[np.ndarray] = []  # per generation: each group's zero-std verdict, as TRL counts it
        self._pending = None
        self._graded = False
        self._prior_at = (0, None)  # (rollouts recorded, prior) at the last fit
        # Forgetting: per candidate half-life (inf: none) and prompt, the discounted rollouts and right
        # answers as of the prompt's last recorded step (never an absolute 2^(t/h): no overflow, and
        # step differences are taken in integers before any float).
        self._candidates = candidates
        self._dn = np.zeros((len(candidates), 16))
        self._dk = np.zeros((len(candidates), 16))
        self._last = np.zeros(16, np.int64)
        self._scores = np.zeros(len(candidates))  # one-step-ahead log score of each candidate so far
        self._scored = 0
        self._best = 0

    # -- wrapping

    def wrap(self, reward_funcs):
        """Reward functions for ``GRPOTrainer(reward_funcs=...)``: the same functions (same names,
        same results, async kept async) that also record their rewards here.  A list gives a
        list, one function one function.  A function that returns an iterator (a generator)
        hands TRL the list of its values."""
        import functools

        single = not isinstance(reward_funcs, (list, tuple))
        funcs = [reward_funcs] if single else list(reward_funcs)
        if self._functions is not None:
            raise InputError("this GroupTracker already wraps reward functions; use one tracker per trainer")
        if not funcs:
            raise InputError("reward_funcs is empty")
        for i, f in enumerate(funcs):
            where = "reward_funcs" if single else f"reward_funcs[{i}]"
            if isinstance(f, str) or hasattr(f, "parameters"):
                raise InputError(
                    f"{where}: {f!r} is a reward model; the tracker records the rewards of Python reward "
                    "functions (score the model inside a reward function to track it)"
                )
            if not callable(f):
                raise InputError(f"{where} must be a reward function, got {f!r}")
            if getattr(f, "_gsd_tracker", None) is not None:
                raise InputError(f"{where} is already wrapped by a GroupTracker")
        trl_names = [callable_name(f) for f in funcs]
        if self.weights is not None and len(self.weights) != len(funcs):
            raise InputError(f"weights has {len(self.weights)} entries for {len(funcs)} reward functions")
        self._functions = distinct_names(trl_names)

        def one(func, index):
            if is_async(func):

                async def wrapped(*args, **kwargs):
                    return self._observe(index, args, kwargs, await func(*args, **kwargs))
            else:

                def wrapped(*args, **kwargs):
                    return self._observe(index, args, kwargs, func(*args, **kwargs))

            functools.update_wrapper(wrapped, func, assigned=("__module__", "__qualname__", "__doc__"), updated=())
            wrapped.__name__ = trl_names[index]  # TRL names its metrics after it: as it would unwrapped
            wrapped._gsd_tracker = self
            return wrapped

        wrapped = [one(f, i) for i, f in enumerate(funcs)]
        return wrapped[0] if single else wrapped

    def _observe(self, index, args, kwargs, rewards):
        """Record one function's rewards and hand them to TRL.  Whatever goes wrong in the tracking
        is recorded and warned about, never raised: gsd only observes the run (what TRL cannot
        take, TRL itself refuses)."""
        try:
            once = iter(rewards) is rewards
        except TypeError:
            once = None
        if once:  # an iterator would reach TRL exhausted once recorded: hand it the values instead
            rewards = list(rewards)
        if self._skip_left:  # the rest of a generation that could not be recorded: not mixed into the next
            if index in self._skip_left:
                self._skip_left.discard(index)
                if not self._skip_left and self._failure is not None:
                    self._join_failed(depth=1)
                return rewards
            self._skip_left = set()  # a new generation began (TRL stopped the last one)
            if self._failure is not None:  # never joined: the other processes went on without it
                self._unscorable(*self._failure)
                self._failure = None
        try:
            if once is None and is_training(kwargs):
                raise Unscorable(
                    "not-a-list",
                    f"reward function {self._functions[index]!r} returned {rewards!r}, not one reward per completion",
                )
            whole = self._record(index, args, kwargs, rewards) if once is not None else None
        except Exception as exc:  # noqa: BLE001 (the tracker must never end the user's training)
            self._failed(index, kwargs, exc)
            return rewards
        if whole is not None:
            try:
                self._add_generation(gathered(whole))
            except Exception as exc:  # noqa: BLE001 (after the gather: every process records it alike)
                self._unscorable(whole["step"], *kind_and_reason(exc))
        return rewards

    def _failed(self, index, kwargs, exc):
        """A generation this process cannot record, found before the once-per-generation gather.
        With several processes the others wait in that gather for this one's rows: this process
        joins it with a failure marker once its last function has reported (:meth:`_join_failed`),
        so every process records the generation as unscorable and training goes on."""
        pend = self._pending
        done = {i for i, part in enumerate(pend["parts"]) if part is not None} if pend is not None else set()
        self._skip_left = set(range(len(self._functions))) - done - {index}
        self._pending = None
        step = getattr(kwargs.get("trainer_state"), "global_step", None)
        failure = (step + 1 if isinstance(step, int) else self._next_step(), *kind_and_reason(exc))
        if world_size() < 2:
            self._unscorable(*failure, depth=1)
            return
        self._failure = failure
        if not self._skip_left:
            self._join_failed(depth=2)

    def _join_failed(self, depth: int):
        """Join the generation's gather with this process's failure marker; record what every
        process will record (:func:`gathered` raises the same on the others)."""
        step, kind, reason = self._failure
        self._failure = None
        try:
            gathered({"failed": (kind, reason)})
        except Unscorable as exc:
            self._unscorable(step, exc.kind, str(exc), depth)
        except Exception as exc:  # noqa: BLE001 (a collective that failed: this process's reason alone)
            self._unscorable(
                step, kind, f"{reason}; joining the other processes failed ({type(exc).__name__}: {exc})", depth
            )
        else:  # no other process after all
            self._unscorable(step, kind, reason, depth)

    def _unscorable(self, step, kind, reason, depth: int = 0):
        """A generation the tracker cannot score: listed, warned about once per kind (the warning
        points at the reward function's caller, ``depth`` frames further up than from
        :meth:`_observe`)."""
        import warnings

        self.unscorable.append({"step": step, "reason": reason})
        if kind not in self._warned:
            self._warned.add(kind)
            message = f"generation at step {step} not scored by gsd ({reason}); training goes on" + (
                ""
                if kind == "no-finite-reward"
                else "; later generations with this problem are listed in "
                "GroupTracker.unscorable without a further warning"
            )
            self.warnings.append(message)
            warnings.warn("gsd: " + message, RuntimeWarning, stacklevel=4 + depth)

    def _record(self, index, args, kwargs, rewards):
        """Keep one function's rewards for the generation; the generation once every function has
        reported (None before, and for an evaluation call)."""
        if not is_training(kwargs):
            return None
        name = self._functions[index]
        prompts = kwargs.get("prompts", args[0] if args else None)
        if prompts is None:
            raise Unscorable(
                "no-prompts", "the tracked reward function was called without prompts (TRL passes prompts=...)"
            )
        rewards = list(rewards)
        if len(rewards) != len(prompts):
            raise Unscorable(
                "length", f"reward function {name!r} returned {len(rewards)} rewards for {len(prompts)} completions"
            )
        try:
            r = as_rewards(rewards, name, len(rewards))
        except InputError as exc:
            raise Unscorable("reward-value", str(exc)) from None
        pend = self._pending
        if pend is not None and (pend["parts"][index] is not None or len(prompts) != len(pend["prompts"])):
            # A new generation began before every function reported (one raised): drop the partial one.
            self.warnings.append(
                f"a generation at step {pend['step']} was dropped: not every reward function returned for it"
            )
            pend = None
        if pend is None:
            ids = None
            if self.prompt_id is not None:
                if self.prompt_id not in kwargs:
                    cols = sorted(k for k in kwargs if k not in TRL_KWARGS)
                    raise Unscorable(
                        "prompt-id",
                        f"prompt_id={self.prompt_id!r} is not a dataset column TRL passed "
                        f"to the reward functions (columns: {', '.join(cols) or 'none'})",
                    )
                ids = list(kwargs[self.prompt_id])
            state = kwargs.get("trainer_state")
            step = int(state.global_step) + 1 if state is not None else (self._steps[-1] + 1 if self._steps else 1)
            trainer = trainer_of(kwargs)
            device = getattr(getattr(trainer, "accelerator", None), "device", None)
            pend = {
                "prompts": list(prompts),
                "ids": ids,
                "step": step,
                "device": device,
                "parts": [None] * len(self._functions),
            }
        pend["parts"][index] = r
        if any(p is None for p in pend["parts"]):
            self._pending = pend
            return None
        self._pending = None
        return pend

    # -- one generation

    def _code_of(self, value) -> int:
        key = self.key(value)
        code = self._code.get(key)
        if code is None:
            code = self._code[key] = len(self._keys)
            self._keys.append(key)
            structured = self.prompt_id is None and isinstance(value, (list, tuple))
            self._values.append(list(value) if structured else key)
            self._labels.append((chat_label(value) if structured else key)[:80])
            if code >= self._n.size:
                self._n = np.concatenate([self._n, np.zeros(self._n.size, np.int64)])
                self._k = np.concatenate([self._k, np.zeros(self._k.size, np.int64)])
                self._last = np.concatenate([self._last, np.zeros(self._last.size, np.int64)])
                self._dn = np.concatenate([self._dn, np.zeros_like(self._dn)], axis=1)
                self._dk = np.concatenate([self._dk, np.zeros_like(self._dk)], axis=1)
        return code

    def _add_generation(self, pend):
        G = self.num_generations
        source = pend["ids"] if self.prompt_id is not None else pend["prompts"]
        rows = len(source)
        if rows % G:
            raise Unscorable(
                "rows",
                f"the reward functions got {rows} rows, not a multiple of num_generations={G}: "
                "give the tracker the trainer's num_generations",
            )
        firsts = source[::G]
        if any(source[j] != firsts[j // G] for j in range(rows)):
            raise Unscorable(
                "blocks",
                f"a block of num_generations={G} rows holds two prompts: the trainer's "
                "num_generations differs from the tracker's",
            )
        codes = np.fromiter((self._code_of(v) for v in firsts), np.int64, len(firsts))
        parts = np.stack(pend["parts"])
        if self.weights is None and len(parts) > 1 and not self.metrics:
            self.warnings.append(
                f"weights not given: the {len(parts)} reward functions are summed with weight 1 "
                "(give the tracker the trainer's reward_weights)"
            )
        w = np.ones(len(parts)) if self.weights is None else np.asarray(self.weights, np.float64)
        total = trl_total(parts, w, pend["device"])
        std, silent = trl_zero_std(total, G, pend["device"])
        with np.errstate(over="ignore"):
            parts = parts.astype(np.float32).astype(np.float64)  # the values TRL summed
        groups = total.reshape(-1, G)
        finite = np.isfinite(groups)
        m = finite.sum(axis=1)
        scored = (~np.isnan(groups)).sum(axis=1)  # the rows TRL normalises
        speaks = np.isfinite(std) & ~silent  # a finite nonzero advantage somewhere in the group
        right = self._right(groups, finite)
        gen = {
            "step": pend["step"],
            "silent_frac": float(silent.sum() / silent.size),
            "effective_ratio": float((scored * speaks).sum() / scored.sum()) if scored.sum() else float("nan"),
            "skipped": 0,
        }
        gen.update(self._predictions(codes, m, right, int(pend["step"])))
        if not m.any():
            # TRL trains on (every advantage zero); nothing here to count or predict from.
            self._unscorable(
                pend["step"],
                "no-finite-reward",
                "no reward function returned a finite reward for any row: TRL trains on it with zero advantages",
                depth=1,
            )
        self._steps.append(int(pend["step"]))
        self._group_prompt.append(codes)
        self._parts.append(parts)
        self._totals.append(total)
        self._silent.append(silent)
        self.metrics.append(gen)

    def _right(self, groups, finite):
        """Right answers per group (finite rows only), or None once the totals are graded."""
        if self._graded:
            return None
        vals = groups[finite]
        if self.threshold is not None:
            return (finite & (groups >= self.threshold)).sum(axis=1)
        if np.all((vals == 0.0) | (vals == 1.0)):
            return (finite & (groups == 1.0)).sum(axis=1)
        self._graded = True
        self.warnings.append(
            "the total rewards are graded (not 0/1): from this generation on, no predictions; give "
            "the tracker a threshold (reward >= threshold counts as right)"
        )
        return None

    def _predictions(self, codes, m, right, step):
        """silent_pred and fidelity from each prompt's (forgetting) posterior before the
        generation; each candidate half-life scored on it; the recommended group size from the
        posteriors after it (counts updated here)."""
        from ..allocation import allocation_value, expected_silent_rate
        from ..core.groupsize import median_group_size
        from ..core.posterior import BetaPosterior, expected_scale, one_step_log_score, posterior_from_counts

        nan = float("nan")
        if right is None:
            return {
                "silent_pred": nan,
                "fidelity": nan,
                "advised_group_size": nan,
                "fidelity_group_size": nan,
                "recommended_group_size": nan,
            }
        a0, b0 = self._prior_now()
        multi = m >= 2
        n_eff, k_eff = self._discounted(codes, step)  # (candidates, groups)
        n, k = n_eff[self._best], k_eff[self._best]
        out = {"silent_pred": nan, "fidelity": nan}
        if multi.any():
            post = BetaPosterior(a0 + k[multi], b0 + (n - k)[multi], (a0, b0))
            out["silent_pred"] = float(expected_silent_rate(post, m[multi]).mean())
            scale = expected_scale(post.a, post.b).sum()
            out["fidelity"] = float(allocation_value(post, m[multi], "update").sum() / scale) if scale > 0 else nan
        seen = (m >= 1) & (self._n[codes] > 0)  # groups of prompts seen at earlier generations: diagnose's score
        if seen.any():
            self._scores += one_step_log_score(right[seen], m[seen], k_eff[:, seen], n_eff[:, seen], (a0, b0)).sum(1)
            self._scored += int(seen.sum())
            self._best = int(np.argmax(self._scores))  # the first (longest) of ties, as diagnose
        # Discount each prompt's counts to this step, then add the generation's.
        u = np.unique(codes)
        self._dn[:, u], self._dk[:, u] = self._discounted(u, step)
        self._last[u] = step
        np.add.at(self._dn, (slice(None), codes), m)
        np.add.at(self._dk, (slice(None), codes), right)
        np.add.at(self._n, codes, m)
        np.add.at(self._k, codes, right)
        # Every prompt recorded so far: the advised G (gsd diagnose's advised_group_size, at this generation's
        # prompts per step) and the fidelity law's median at the posterior means (its fidelity_group_size).
        from ..diagnose.tables import group_size_advice_for

        n, k = self._n[: len(self._keys)], self._k[: len(self._keys)]
        if (n > 0).any():
            seen = posterior_from_counts(k[n > 0], n[n > 0], prior=(a0, b0))
            self.last_posterior = seen  # the batch advice of a run with a noise scale reads it
            out["advised_group_size"] = float(
                group_size_advice_for(seen, np.unique(codes).size).advised_G_per_generation
            )
            out["fidelity_group_size"] = median_group_size(seen.mean, self.epsilon)
        else:  # nothing scored yet (every reward so far None or NaN)
            out["advised_group_size"] = out["fidelity_group_size"] = nan
        out["recommended_group_size"] = out["fidelity_group_size"]  # deprecated alias of fidelity_group_size
        return out

    def _discounted(self, codes, step):
        """Each candidate's discounted rollouts and right answers of prompts ``codes`` at ``step``,
        arrays (candidates, prompts): the counts as of each prompt's last step times 2^(−Δ/h),
        Δ = step − last (integers, exact at any step; a step before the last counts as Δ = 0;
        a factor that underflows is the zero it stands for)."""
        from ..core.forgetting import decay

        dt = np.maximum(np.int64(step) - self._last[codes], 0)
        f = np.stack([decay(dt, h) for h in self._candidates])  # a few candidates, each over every prompt
        return self._dn[:, codes] * f, self._dk[:, codes] * f

    @property
    def half_life_now(self):
        """The half-life the posteriors use now (None: no forgetting): the given one, or with
        ``half_life="auto"`` the best scored so far."""
        return self._candidates[self._best]

    @property
    def half_life_choice(self) -> dict:
        """As ``gsd diagnose --json``'s ``half_life_choice``: ``candidates``, ``log_score`` (each
        candidate's summed one-step-ahead log score, under the prior live at each generation) and
        ``groups_scored``; and ``half_life``, the one in use."""
        return {
            "candidates": list(self._candidates),
            "log_score": self._scores.tolist(),
            "groups_scored": self._scored,
            "half_life": self.half_life_now,
        }

    def _prior_now(self):
        """The prior for the next predictions: empirical Bayes fitted to the rollouts recorded so
        far (uniform before any), refitted whenever they have grown by a quarter since the last
        fit (a fit costs ~0.1 s; the prior moves slowly once there are many rollouts), else the
        given one."""
        from ..core.posterior import PRIORS, fit_beta_prior

        if not isinstance(self.prior, str):
            return self.prior
        if self.prior != "empirical-bayes":
            return PRIORS[self.prior]
        size = len(self._keys)
        n, k = self._n[:size], self._k[:size]
        total = int(n.sum())
        if self._prior_at[1] is None or (total > 0 and total >= 1.25 * self._prior_at[0]):
            self._prior_at = (total, fit_beta_prior(k, n) if total > 0 else PRIORS["uniform"])
        return self._prior_at[1]

    # -- what the skipping sampler asks

    def silent_probability(self, prompts) -> np.ndarray:
        """Probability that the next group of ``num_generations`` answers to each prompt is silent
        (all right or all wrong), under the prompt's posterior now (:meth:`posterior`): the exact
        beta-binomial [B(a+G, b) + B(a, b+G)]/B(a, b) (:func:`gsd.expected_silent_rate`).  NaN for
        a prompt with no rollout recorded yet, and for every prompt once the totals are graded.

        ``prompts``: prompt texts / conversations, or values of the ``prompt_id`` column.
        """
        codes = np.fromiter((self._code.get(self.key(v), -1) for v in prompts), np.int64)
        return self._silent_probability_of_codes(codes)

    def posterior(self, prompts, *, step=None):
        """Each prompt's posterior Beta(a₀ + k_eff, b₀ + n_eff − k_eff) for a generation at
        ``step`` (default: the step after the last recorded), its counts discounted by the
        half-life in use (:attr:`half_life_now`), the live prior; the prior itself for a prompt
        without rollouts.  Once the totals are graded there is none (InputError).

        ``prompts``: prompt texts / conversations, or values of the ``prompt_id`` column.
        """
        from ..core.posterior import BetaPosterior

        if self._graded:
            raise InputError("the total rewards are graded: the tracker has no posterior (give it a threshold)")
        step = self._next_step() if step is None else step
        if isinstance(step, bool) or not isinstance(step, (int, np.integer)):
            raise InputError(f"step must be an integer, got {step!r}")
        codes = np.fromiter((self._code.get(self.key(v), -1) for v in prompts), np.int64)
        a, b, _ = self._posterior_of_codes(codes, int(step))
        return BetaPosterior(a, b, tuple(self._prior_now()))

    def _next_step(self) -> int:
        return self._steps[-1] + 1 if self._steps else 1

    def _posterior_of_codes(self, codes, step):
        """(a, b, seen) of the forgetting posterior at ``step``; seen: the prompt has rollouts of its
        own (codes < 0: prompts never recorded)."""
        a0, b0 = self._prior_now()
        known = codes >= 0
        seen = known.copy()
        seen[known] = self._n[codes[known]] > 0
        n = np.zeros(codes.size)
        k = np.zeros(codes.size)
        if seen.any():
            dn, dk = self._discounted(codes[seen], step)
            n[seen], k[seen] = dn[self._best], dk[self._best]
        return a0 + k, b0 + (n - k), seen

    def _silent_probability_of_codes(self, codes) -> np.ndarray:
        from ..allocation import expected_silent_rate
        from ..core.posterior import BetaPosterior

        q = np.full(codes.size, np.nan)
        if self._graded:
            return q
        a, b, seen = self._posterior_of_codes(codes, self._next_step())
        if seen.any():
            q[seen] = expected_silent_rate(
                BetaPosterior(a[seen], b[seen], tuple(self._prior_now())), self.num_generations
            )
        return q

    def _codes_of_keys(self, keys) -> np.ndarray:
        return np.fromiter((self._code.get(k, -1) for k in keys), np.int64, len(keys))

    def key(self, value) -> str:
        """The key that identifies a prompt (a dataset row's ``prompt``, or its ``prompt_id`` value)."""
        return str(value) if self.prompt_id is not None else prompt_key(value)

    # -- the run as a log

    @property
    def generations(self) -> int:
        """Training generations recorded."""
        return len(self._steps)

    def _reward_name(self) -> str:
        from ..diagnose.readers import reward_text

        names = self._functions or ["reward"]
        w = self.weights if self.weights is not None else [1.0] * len(names)
        return reward_text(list(zip(w, names)))

    def _rows(self):
        """Per rollout (finite totals only): prompt code, step, group number, total, parts, and
        whether TRL counted the rollout's group zero-std."""
        if not self._steps:
            raise InputError("the tracker has recorded no training generation yet")
        G = self.num_generations
        sizes = np.array([c.size for c in self._group_prompt])
        step = np.repeat(np.array(self._steps, np.int64), sizes * G)
        code = np.repeat(np.concatenate(self._group_prompt), G)
        group = np.repeat(np.arange(sizes.sum(), dtype=np.int64), G)
        total = np.concatenate(self._totals)
        parts = np.concatenate(self._parts, axis=1)
        zero = np.repeat(np.concatenate(self._silent), G)
        keep = np.isfinite(total)
        return code[keep], step[keep], group[keep], total[keep], parts[:, keep], zero[keep]

    def _description(self) -> dict:
        return _table.describe(
            group_size=self.num_generations,
            threshold=self.threshold,
            reward_name=self._reward_name(),
            weights=self.weights,
            functions=self._functions or [],
        )

    def rollout_log(self):
        """The recorded groups as a :class:`gsd.diagnose.RolloutLog` (prompt codes ordered as the
        log reader orders them, so :meth:`diagnosis` equals ``gsd diagnose`` on :meth:`save`'s table)."""
        from ..diagnose.readers import RolloutLog
        from ..io.hashing import hash_text

        code, step, group, total, _, zero = self._rows()
        hashes = hash_text(self._keys)  # as the log reader hashes the saved table's prompts
        used = np.unique(code)
        order = np.argsort(hashes[used], kind="stable")
        rank = np.empty(len(self._keys), np.int64)
        rank[used[order]] = np.arange(used.size)
        from ..diagnose.readers import pair_codes

        numbers, inverse = np.unique(group, return_inverse=True)  # the group column as the saved table holds it
        gkey = hash_text(numbers.astype(str).tolist())[inverse.ravel()]
        gcode, n_groups = pair_codes(step, gkey)
        silent = np.zeros(n_groups, bool)
        silent[gcode] = zero  # TRL's verdict, not a recount of the finite rows left
        d = self._description()
        return RolloutLog(
            prompt=rank[code],
            step=step,
            reward=total,
            labels=np.array(self._labels, dtype=object)[used[order]],
            hashes=hashes[used[order]],
            files=[],
            fmt="table",
            trainer="trl",
            reward_name=d["reward_name"],
            group=gcode,
            group_by=d["group_by"],
            silence=d["silence"],
            group_size=self.num_generations,
            silent=silent,
            threshold=self.threshold,
            warnings=list(self.warnings),
        )

    def diagnosis(self, *, level: float = 0.9, budget=None, half_life=None):
        """The run so far as :func:`gsd.diagnose.diagnose` sees it (same tables, same summary):
        the prior (empirical Bayes by default) fitted to the whole run, the tracker's threshold
        and epsilon."""
        from ..diagnose.tables import diagnose_log

        return diagnose_log(
            self.rollout_log(),
            threshold=self.threshold,
            prior=self.prior,
            epsilon=self.epsilon,
            level=level,
            budget=budget,
            half_life=half_life,
        )

    def save(self, path) -> Path:
        """Write the recorded groups as a self-describing parquet table: ``gsd diagnose PATH``
        (no flags) reads it back to :meth:`diagnosis`'s numbers (with a prior other than
        empirical Bayes, pass the same ``--prior``).

        Columns ``prompt`` (text, conversation, or the ``prompt_id`` value as text), ``step``,
        ``group`` (one number per group of the run), ``reward`` (the float32 weighted total the
        trainer normalised) and one ``reward:<function>`` column per reward function (unweighted,
        cast to float32 as TRL casts them), and ``zero_std`` (TRL counted the row's group in
        ``frac_reward_zero_std``); the file's metadata (:mod:`gsd.integrations.tracker_table`) says
        so.  Rows whose total is not finite (every function returned None, or an infinite reward) are
        left out: the log reader takes finite rewards only.
        """
        import pyarrow as pa
        import pyarrow.parquet as pq

        from ..io.atomic import atomic_path

        path = Path(path)
        if path.suffix != ".parquet":
            raise InputError(
                f"path must end in .parquet (the table carries its description in parquet metadata), got {str(path)!r}"
            )
        code, step, group, total, parts, zero = self._rows()
        columns = {
            "prompt": pa.array(self._values).take(pa.array(code)),  # per rollout, gathered in pyarrow
            "step": pa.array(step),
            "group": pa.array(group),
            "reward": pa.array(total),
            _table.SILENT_COL: pa.array(zero),
        }
        for name, col in zip(self._functions, parts):
            columns[f"reward:{name}"] = pa.array(col)
        table = pa.table(columns).replace_schema_metadata({_table.KEY: json.dumps(self._description())})
        with atomic_path(path) as tmp:
            pq.write_table(table, tmp)
        return path
