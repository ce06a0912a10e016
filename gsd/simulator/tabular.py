"""The numpy engine: tabular runs with the logit gradient written out, many runs as one program, no torch.

A tabular policy has one free logit z_j per prompt, and the loss of :mod:`.loss` on one
on-policy epoch is L = −Σ_j (1/G_j) Σ_answers A_i·log π(y_i | z_j).  With ∂ log π(right)/∂z =
1 − p and ∂ log π(wrong)/∂z = −p, its logit gradient needs no autograd:

    g_j = −∂L/∂z_j = (1/G_j)·[(n_rr·A₊ + n_rw·A₋)·(1 − p_j) − (n_wr·A₊ + n_ww·A₋)·p_j]

where n_yr counts the kept group's answers that are y (right/wrong) and were marked r by the
verifier, and A₊, A₋ are the advantages of a reward marked right / wrong (the core's
:func:`gsd.core.groups.advantages`, tabulated per (G, k) as :class:`~.loss.AdvantageTable` does).  With
an exact verifier g_j = (1/G)·[k·A₊·(1 − p) − (G − k)·A₋·p], which for GRPO (ddof 0, eps 0) is σ,
the identity of :ref:`theory-identity`.  The tests check g against torch's autograd of
:func:`~.loss.policy_loss` on the same groups (1e-12), and the optimizers against :mod:`.optim`.

Why an engine without torch: importing torch takes ~1.5 s on this project's 2-core machines —
more than the whole paper campaign's arithmetic — and a tabular step is a handful of
elementwise numpy passes (paper size: 1.4 ms against the torch engine's 2.0 ms, measured).
``engine = "auto"`` (the default) picks this engine whenever :func:`~.config.numpy_blockers`
finds nothing that needs torch (a network policy, PPO epochs, clipping, a KL penalty, a budget
plan with ``rollouts = "answers"``, a rollout log, a GPU).

A budget plan (``allocation`` other than ``"fixed"``, :mod:`.budget`) runs here with
``rollouts = "counts"``: each run keeps its counts in a :class:`~.planning.CountPlanner` and plans
through :func:`~.planning.plan_sizes`, the function the torch engine's planner calls, so equal
counts give equal plans; each prompt's binomial count is drawn at its own G (0: skipped, no
answers, no update, not counted as a batch prompt), and the advantage table holds every size
the plans may use.

Runs of one config but for :data:`~.config.FREE_KEYS` (seed, method, G, max_draws, ddof, eps)
run as one program (:func:`run_programs`): every array has a leading run axis (R, …), each run
draws from its own numpy generator, and every operation is elementwise or a sum along one
run's row, which numpy reduces as it reduces that run's array alone — so a run's ledger,
checkpoint and summary are bit for bit those of the run made alone (wall times aside; tested).
One run is a program of one.

Random streams: each run's generator is numpy's PCG64 seeded with the run's rollout sub-seed
(:func:`~.population.sub_seed`); per step, in this order: the batch (``permutation``, only when
``batch_size < n_prompts``); the (D, B, G) uniforms of the answers, or the (D, B) binomial counts
(``rollouts = "counts"``); then, with a noisy verifier only, the flips.  These are not the torch
engine's streams: the same config gives other draws (the same distributions) under
``engine = "torch"``.

A run folder is the torch engine's (:mod:`.runfolder`) with ``checkpoint.npz`` (arrays and the
generator's state, read without pickle) in place of ``checkpoint.pt``.
"""

from __future__ import annotations

import io
import json
import os
import threading
import time
from pathlib import Path

import numpy as np

from ..core.groups import advantages
from ..core.methods import method_spec
from ..core.weighting import decile_index
from ..errors import InputError
from .config import FREE_KEYS, SimConfig
from .ledger import COLUMNS, N_DECILES, N_QUARTILES, Ledger, closed_form_columns
from .planning import CountPlanner, planned_sizes
from .population import STREAM_ROLLOUTS, initial_quartiles, initial_solve_rates, population_state, sub_seed
from .runfolder import (
    Member,
    check_array,
    check_identity,
    check_ledger_rows,
    check_step,
    damaged,
    drive,
    finish,
    ledger_row,
    logit,
    open_runs,
    run_identity,
    save_checkpoint,
    sigmoid,
)

__all__ = ["run_programs", "program_key", "advantage_rows", "advantage_sums", "logit_gradient", "mean_updates"]

ENGINE = "numpy"
#: Prompts per step of one program, all its runs together, at most (unless ``max_runs`` says
#: otherwise): its (runs, prompts) arrays then stay within a core's cache (256 KB in float64).
#: Past it a program is slower than its runs one by one — each numpy pass is bound by memory,
#: not by the per-call overhead a program shares (30 paper-size runs: 0.92× as one program).
PROGRAM_ENTRIES = 1 << 15
_CHECKPOINT_KEYS = ("step", "z", "z_ref", "rng_state", "ledger", "ledger_columns", "engine")


def program_key(cfg: SimConfig) -> str:
    """Equal for runs that can share one program of this engine (all keys but :data:`FREE_KEYS`)."""
    return json.dumps({k: v for k, v in cfg.to_dict().items() if k not in FREE_KEYS}, sort_keys=True)


def advantage_rows(G: int, method: str, *, ddof: int, eps: float) -> np.ndarray:
    """(G + 1, 2) float64: A₊ and A₋, the advantages of a reward marked right / wrong in a group of
    G answers of which k are marked right (row k), from the core on the canonical group (k ones,
    then G − k zeros).  A reward that row k cannot hold (A₊ at k = 0) repeats A₋: its count is 0."""
    canon = (np.arange(G)[None, :] < np.arange(G + 1)[:, None]).astype(np.float64)
    a = advantages(canon, method, ddof=ddof, eps=eps)
    return np.stack([a[:, 0], a[:, -1]], axis=-1)


def advantage_sums(right, flips, G, adv):
    """(S₊, S₋): the advantages summed over a group's right answers and over its wrong ones.

    ``right``: right answers of the kept group; ``flips``: (right ones marked wrong, wrong ones
    marked right), or None for an exact verifier; ``G``: group sizes; ``adv``: (..., 2) A₊, A₋ at
    the group's k.  S₊ = (n_rr·A₊ + n_rw·A₋) and S₋ = (n_wr·A₊ + n_ww·A₋) in the module
    docstring's cell counts.
    """
    a_r, a_w = adv[..., 0], adv[..., 1]
    if flips is None:
        return right * a_r, (G - right) * a_w
    fr, fw = flips
    return (right - fr) * a_r + fr * a_w, fw * a_r + (G - right - fw) * a_w


def logit_gradient(s_right, s_wrong, G, p, q, out=None, scratch=None):
    """g = −∂L/∂z = (S₊·(1 − p) − S₋·p)/G per prompt (the module docstring's formula), with
    S₊, S₋ from :func:`advantage_sums`, p = π(right) = sigmoid(z) and q = π(wrong) = sigmoid(−z),
    computed from z rather than as 1 − p (exact near p = 1).  ``out``, ``scratch``: arrays of
    the result's shape and dtype to compute it in (the same operations, the same bits)."""
    if out is None:
        return (s_right * q - s_wrong * p) / G
    np.multiply(s_right, q, out=out)
    out -= np.multiply(s_wrong, p, out=scratch)
    out /= G
    return out


def log_sigmoid(x, limit, out=None, negate: bool = False):
    """log x for x = sigmoid(±z) > 0, and ``limit`` (±z, the log's asymptote; ``negate``: −limit)
    where x underflowed to 0, into ``out``: log of the accurately rounded sigmoid, ~4× cheaper
    than logaddexp."""
    out = np.empty_like(x) if out is None else out
    with np.errstate(divide="ignore"):
        np.log(x, out=out)
    under = x <= 0
    if under.any():
        (np.negative if negate else np.positive)(limit, out=out, where=under)
    return out


def _draw_groups(rng, p: np.ndarray, G: int, cfg, dtype):
    """One group of G answers per entry of ``p`` (shape (..., n)) from ``rng``: right answers,
    and the verifier's flips (right ones marked wrong, wrong ones marked right; None when
    exact), each an integer array of p's shape.

    ``rollouts = "answers"``: (..., G, n) uniforms in ``dtype``, answer-major within each row of
    p, so that the count is a sum over rows (~4× faster than along a short last axis); the flips
    are a second block of the same shape.  ``"counts"``: binomial counts in p's order, then the
    flips as binomials of the right and of the wrong answers."""
    noise = cfg.verifier_noise
    if cfg.rollouts == "counts":
        right = rng.binomial(G, p)
        flips = (rng.binomial(right, noise), rng.binomial(G - right, noise)) if noise else None
    else:
        shape = (*p.shape[:-1], G, p.shape[-1])
        ans = rng.random(shape, dtype=dtype) < p[..., None, :]
        right = ans.sum(axis=-2)
        flips = None
        if noise:
            flip = rng.random(shape, dtype=dtype) < noise
            flips = ((ans & flip).sum(axis=-2), (~ans & flip).sum(axis=-2))
    return right, flips


#: Entries of one chunk of answers in :func:`mean_updates` (a few 32 MB temporaries).
CHUNK_ANSWERS = 1 << 22


def mean_updates(cfg: SimConfig, p0: np.ndarray, methods, draws: int, rng) -> list[np.ndarray]:
    """g_j averaged over ``draws`` independent groups per prompt at p0, for each method, float64.

    The methods are paired: every drawn group is scored by each method's advantages, so their
    means differ by the method alone.  Draws come in chunks of at most :data:`CHUNK_ANSWERS`
    answers, in draw-major order; with an exact verifier the stream does not depend on the
    split (with a noisy one each chunk's flips follow its answers).  The torch engine's
    measurement, :func:`~.campaign.measure_initial_deciles`, with numpy's draws and the
    gradient written out.
    """
    G, N = cfg.group_size, p0.size
    dtype = np.dtype(cfg.dtype)
    z = logit(p0).astype(dtype)
    p, q = sigmoid(z), sigmoid(z, negate=True)
    tables = [advantage_rows(G, method_spec(m).advantage, ddof=cfg.ddof, eps=cfg.eps).astype(dtype) for m in methods]
    sums = [np.zeros(N) for _ in methods]
    chunk = max(1, CHUNK_ANSWERS // (N * (G if cfg.rollouts == "answers" else 1)))
    done = 0
    while done < draws:
        c = min(chunk, draws - done)
        # c independent groups of every prompt, draw after draw: without verifier noise the
        # stream does not depend on the split into chunks.
        right, flips = _draw_groups(rng, np.broadcast_to(p, (c, N)), G, cfg, dtype)
        k = right if flips is None else right - flips[0] + flips[1]
        right, flips = right.astype(dtype), None if flips is None else (flips[0].astype(dtype), flips[1].astype(dtype))
        for total, table in zip(sums, tables):
            s_right, s_wrong = advantage_sums(right, flips, G, table[k])
            total += logit_gradient(s_right, s_wrong, G, p, q).sum(axis=0)
        done += c
    return [total / draws for total in sums]


# --------------------------------------------------------------------------- optimizers
class NumpySGD:
    """The torch engine's SGD (:class:`~.optim.SGD`): b ← μ·b + g (b ← g on the first step), z ← z − lr·b."""

    def __init__(self, cfg, z):
        self.lr, self.momentum, self.buffer = cfg.lr, cfg.momentum, None

    def step(self, z, grad):
        g = grad
        if self.momentum:
            self.buffer = grad.copy() if self.buffer is None else self.buffer * self.momentum + grad
            g = self.buffer
        z -= self.lr * g

    def state(self, r=None) -> dict:
        if self.buffer is None:
            return {}
        return {"opt_buffer": self.buffer if r is None else self.buffer[r]}

    def load(self, states) -> None:
        if "opt_buffer" in states[0]:
            self.buffer = np.stack([s["opt_buffer"] for s in states])


class NumpyAdam:
    """The torch engine's Adam (:class:`~.optim.Adam`): β = (0.9, 0.999), ε = 1e-8, torch's
    single-tensor update written in numpy."""

    betas, eps = (0.9, 0.999), 1e-8

    def __init__(self, cfg, z):
        self.lr, self.steps = cfg.lr, 0
        self.exp_avg, self.exp_avg_sq = np.zeros_like(z), np.zeros_like(z)

    def step(self, z, grad):
        beta1, beta2 = self.betas
        self.steps += 1
        t = float(self.steps)
        self.exp_avg += (grad - self.exp_avg) * (1 - beta1)
        self.exp_avg_sq *= beta2
        self.exp_avg_sq += grad * grad * (1 - beta2)
        denom = np.sqrt(self.exp_avg_sq) / (1 - beta2**t) ** 0.5 + self.eps
        z -= (self.lr / (1 - beta1**t)) * (self.exp_avg / denom)

    def state(self, r=None) -> dict:
        cut = (lambda x: x) if r is None else (lambda x: x[r])
        return {
            "opt_steps": np.int64(self.steps),
            "opt_exp_avg": cut(self.exp_avg),
            "opt_exp_avg_sq": cut(self.exp_avg_sq),
        }

    def load(self, states) -> None:
        self.steps = int(states[0]["opt_steps"])
        self.exp_avg = np.stack([s["opt_exp_avg"] for s in states])
        self.exp_avg_sq = np.stack([s["opt_exp_avg_sq"] for s in states])


# --------------------------------------------------------------------------- the program
class Program:
    """R runs of one config but for :data:`~.config.FREE_KEYS`: their logits as one (R, N) array."""

    def __init__(self, members: list[Member]):
        self.members = members
        self.cfgs = [m.cfg for m in members]
        base = self.base = self.cfgs[0]
        self.R, self.N = len(members), base.n_prompts
        self.B = base.batch_size or self.N
        self.dtype = np.dtype(base.dtype)
        p0 = np.stack([m.p0 for m in members])  # (R, N) float64
        self.z = logit(p0).astype(self.dtype)
        self.z_ref = self.z.copy()
        self.opt = (NumpySGD if base.optimizer == "sgd" else NumpyAdam)(base, self.z)
        self.rngs = [np.random.Generator(np.random.PCG64(sub_seed(c.seed, STREAM_ROLLOUTS))) for c in self.cfgs]
        self.G = np.array([c.group_size for c in self.cfgs])[:, None]  # (R, 1)
        self.G_f = self.G.astype(self.dtype)
        self.D = np.array([c.max_draws if method_spec(c.method).redraws_silent else 1 for c in self.cfgs])[:, None]
        # A budget plan (allocation != "fixed") gives each prompt its own G each step: every run
        # tabulates every size its plans may use, size after size, and g_off[r, G] is where G's rows
        # start in run r's table.
        self.planners = None if base.allocation == "fixed" else [CountPlanner(c, self.N) for c in self.cfgs]
        # With a plan, row 0 of each run's table is all zeros: a skipped prompt (G = 0) reads it.
        sizes = [[c.group_size] if self.planners is None else [0] + list(planned_sizes(c)) for c in self.cfgs]
        tables = [
            np.concatenate(
                [
                    advantage_rows(G, method_spec(c.method).advantage, ddof=c.ddof, eps=c.eps)
                    if G
                    else np.zeros((1, 2))
                    for G in gs
                ]
            )
            for c, gs in zip(self.cfgs, sizes)
        ]
        if self.planners is not None:
            self.g_off = np.zeros((self.R, max(max(gs) for gs in sizes) + 1), dtype=np.int64)
            for r, gs in enumerate(sizes):
                self.g_off[r, gs] = np.cumsum([0] + [G + 1 for G in gs[:-1]])
        self.adv_flat = np.concatenate(tables).astype(self.dtype)  # run r's rows start at adv_at[r]
        self.adv_at = np.cumsum([0] + [len(t) for t in tables[:-1]])[:, None]
        # An exact verifier's sums by row, S₊ = k·A₊ and S₋ = (G − k)·A₋ (G = 0: the zero row), in
        # the run's dtype: the products advantage_sums forms, rounded as there, read in one take.
        k_rows = np.concatenate([np.arange(G + 1) for gs in sizes for G in gs]).astype(self.dtype)
        G_rows = np.concatenate([np.full(G + 1, G) for gs in sizes for G in gs]).astype(self.dtype)
        self.sums_flat = (k_rows * self.adv_flat[:, 0], (G_rows - k_rows) * self.adv_flat[:, 1])
        self.decile = np.stack([decile_index(p) for p in p0])  # (R, N)
        quart = np.stack([initial_quartiles(p) for p in p0])
        self.quart_at = quart + np.arange(self.R)[:, None] * N_QUARTILES  # one bincount fills every run's bins
        self.quart_n = np.stack([np.bincount(q, minlength=N_QUARTILES) for q in quart]).astype(np.float64)
        self.ledgers = [Ledger(c.steps) for c in self.cfgs]
        # Runs whose closed forms are one formula (the keys they depend on alike), in order.
        alike: dict = {}
        for r, c in enumerate(self.cfgs):
            alike.setdefault((c.method, c.group_size, c.ddof, c.eps, c.max_draws), []).append(r)
        self.alike = list(alike.values())
        self.generations_cum = [0] * self.R
        self.start = 0
        self._work: dict = {}
        self.decile_at = self.decile + np.arange(self.R)[:, None] * N_DECILES  # one bincount fills every run's bins

    def work(self, name: str, dtype, shape=None) -> np.ndarray:
        """A work array of this program, kept from step to step (``shape``: (R, B) by default).

        A step's arrays are hundreds of KB to MB each; made afresh every step, glibc hands them
        back to the system when they are freed (mmap, heap trimming) and the next step pays a
        page fault per 4 KB — a quarter of a 10^5 × 64 step (measured).  Kept here, a library caller needs
        no allocator settings (:mod:`gsd.io.heap`).
        """
        shape = (self.R, self.B) if shape is None else shape
        buf = self._work.get(name)
        if buf is None or buf.shape != shape or buf.dtype != dtype:
            buf = self._work[name] = np.empty(shape, dtype=dtype)
        return buf

    def float64(self, p_b: np.ndarray) -> np.ndarray:
        """The batch's p in float64 (what the closed forms and the binomial draws read), converted
        once a step into a kept row when the run's dtype is narrower."""
        if p_b.dtype == np.float64:
            return p_b
        p64 = self.work("p64", np.float64)
        np.copyto(p64, p_b)
        return p64

    # ----------------------------------------------------------------------- state
    def population_state(self, p: np.ndarray) -> dict:
        """Per run: mean p, mean 2·arcsin√p, mean p per initial quartile (R, 4) (:func:`~.population.population_state`)."""
        return population_state(p, self.quart_at, self.quart_n, self.R)

    def population_summaries(self, z: np.ndarray) -> list[dict]:
        s = self.population_state(sigmoid(z))
        return [
            {
                "mean_p": float(s["mean_p"][r]),
                "mean_arcsin": float(s["mean_arcsin"][r]),
                "quartile_mean_p": s["mean_p_q"][r].tolist(),
            }
            for r in range(self.R)
        ]

    # ----------------------------------------------------------------------- one step
    def draw(self, p_b: np.ndarray, p64: np.ndarray | None = None) -> dict:
        """Each run's kept groups, drawn from its own stream: (R, B) arrays of right answers,
        answers marked right (k), the verifier's flips (None when exact), groups drawn, first
        draw silent, no update.

        DAPO (D = max_draws > 1) draws every prompt's group, then again the prompts whose group
        was silent, up to D groups in all; a prompt silent in every draw keeps its last group
        (advantages 0).  Every drawn group counts as generation cost.  ``p64``: p_b in float64,
        which binomial counts read (numpy converts a float32 p to it anyway: the same draws).
        """
        dtype = self.dtype
        right = self.work("right", np.int64)
        flips = (self.work("flip_rw", np.int64), self.work("flip_wr", np.int64)) if self.base.verifier_noise else None
        k = right if flips is None else self.work("k", np.int64)
        drawn = self.work("drawn", np.int64)
        drawn.fill(1)
        silent = self.work("silent", bool)
        first = self.work("first", bool)
        planned = self.planners is not None
        if planned:
            np.greater(self.G_b, 0, out=drawn, casting="unsafe")  # a skipped prompt (G = 0) draws no group
        for r, rng in enumerate(self.rngs):
            D, G = int(self.D[r, 0]), (self.G_b[r] if planned else int(self.G[r, 0]))
            source = p64 if p64 is not None and self.base.rollouts == "counts" else p_b
            at, p = slice(None), source[r]
            for d in range(D):
                got, flipped = _draw_groups(rng, p, G, self.base, dtype)
                right[r, at] = got
                marked = got if flipped is None else got - flipped[0] + flipped[1]
                if flips is not None:
                    flips[0][r, at], flips[1][r, at] = flipped
                    k[r, at] = marked
                now = (marked == 0) | (marked == G)
                if planned:
                    now &= G > 0  # a skipped prompt is not a silent group (D = 1: no redraws with a plan)
                if d == 0:
                    first[r] = silent[r] = now
                else:
                    drawn[r, at] += 1
                    silent[r, at] = now
                if d + 1 == D:  # no redraw follows: which prompts were silent is not needed
                    break
                at = np.flatnonzero(now) if d == 0 else at[now]
                if at.size == 0:
                    break
                p = source[r, at]

        def cell(name, counts):
            out = self.work(name, dtype)
            np.copyto(out, counts, casting="unsafe")  # astype(dtype), into the kept array
            return out

        # the counts as the run's floats: only a noisy verifier's sums read them (an exact one's are tabulated)
        cells = (
            (None, None)
            if flips is None
            else (cell("right_f", right), (cell("flip_rw_f", flips[0]), cell("flip_wr_f", flips[1])))
        )
        return {
            "right": cells[0],
            "flips": cells[1],
            "k": k,
            "drawn": drawn,
            "silent_first": first,
            "zero_update": silent,
        }

    def step(self, step: int) -> None:
        t0 = time.perf_counter()
        N, B = self.N, self.B
        # the policy this step samples from
        p_all = sigmoid(self.z, out=self.work("p", self.dtype, self.z.shape))
        q_all = sigmoid(self.z, out=self.work("q", self.dtype, self.z.shape), negate=True)
        idx = None
        if B < N:
            idx = np.stack([rng.permutation(N)[:B] for rng in self.rngs])
        take = (lambda x: x) if idx is None else (lambda x: np.take_along_axis(x, idx, 1))
        p_b, q_b = take(p_all), take(q_all)
        p64 = self.float64(p_b)
        dec_b = self.decile if idx is None else np.take_along_axis(self.decile, idx, 1)
        G_cells, G_div = self.G_f, self.G_f
        if self.planners is not None:
            self.G_b = np.stack(
                [pl.plan(step, None if idx is None else idx[r], p64[r]) for r, pl in enumerate(self.planners)]
            )
            G_cells = self.G_b.astype(self.dtype)
            G_div = np.maximum(G_cells, 1)  # the torch loss's G.clamp(min=1): a skipped prompt has no answers
        # What the row predicts reads p alone: beside the draws (which release the GIL) when large
        pending = _beside(self.predictions, step, p_all, p64, dec_b) if self.R * self.B >= BESIDE_ENTRIES else None
        predictions = None if pending is not None else self.predictions(step, p_all, p64, dec_b)
        g = self.draw(p_b, p64)
        at = np.add(self.adv_at, g["k"], out=self.work("adv_at", np.int64))
        if self.planners is not None:
            at += np.take_along_axis(self.g_off, self.G_b, 1)
        # each run's own table; mode "clip" skips take's bounds check (every index is a row: k ∈ [0, G])
        if g["flips"] is None:
            s_right = np.take(self.sums_flat[0], at, out=self.work("s_right", self.dtype), mode="clip")
            s_wrong = np.take(self.sums_flat[1], at, out=self.work("s_wrong", self.dtype), mode="clip")
        else:
            adv = np.take(self.adv_flat, at, axis=0, out=self.work("adv", self.dtype, (self.R, self.B, 2)), mode="clip")
            s_right, s_wrong = advantage_sums(g["right"], g["flips"], G_cells, adv)
        dz = logit_gradient(
            s_right,
            s_wrong,
            G_div,
            p_b,
            q_b,
            out=self.work("dz", self.dtype),
            scratch=self.work("dz_scratch", self.dtype),
        )
        # The loss of the first (only) epoch, L = −Σ_j (S₊·log π(right) + S₋·log π(wrong))/G, per run.
        z_b = take(self.z)
        log_p, log_q = self.work("log_p", self.dtype), self.work("log_q", self.dtype)
        log_sigmoid(p_b, z_b, out=log_p)
        log_sigmoid(q_b, z_b, out=log_q, negate=True)
        log_p *= s_right
        log_q *= s_wrong
        log_p += log_q
        log_p /= G_div
        loss = -log_p.sum(axis=1)
        if self.planners is not None:
            for r, pl in enumerate(self.planners):
                pl.observe(step, None if idx is None else idx[r], g["k"][r], self.G_b[r], g["silent_first"][r])
        grad = -dz if idx is None else _scatter(-dz, idx, N)
        self.opt.step(self.z, grad)
        state, closed = pending.result() if pending is not None else predictions
        self.fill_ledger(step, idx, dec_b, g["silent_first"], g["zero_update"], g["drawn"], dz, loss, state, closed)
        wall = time.perf_counter() - t0
        for ledger in self.ledgers:
            ledger.put(step, wall_s=wall)

    def predictions(self, step: int, p_all: np.ndarray, p64: np.ndarray, dec_b: np.ndarray) -> tuple[dict, list]:
        """What a step's ledger rows say of the policy it sampled from, a function of p alone:
        the population state (mean p, mean 2·arcsin√p, quartile means; in the run's dtype, as
        the torch engine) and each run's closed forms (float64 ``p64`` of the batch)."""
        state = self.population_state(p_all)
        closed = [None] * self.R
        if self.planners is not None:  # each run its own G per prompt: the kept prompts' closed forms, run by run
            for r, cfg in enumerate(self.cfgs):
                keep = self.G_b[r] > 0
                update = bool(cfg.closed_form_every) and step % cfg.closed_form_every == 0
                cols = closed_form_columns(p64[r][keep], self.G_b[r][keep], dec_b[r][keep], cfg, update=update)
                closed[r] = {k: float(v) if np.ndim(v) == 0 else v for k, v in cols.items()}
            return state, closed
        for rows in self.alike:  # runs of one method and G: their closed forms in one pass, one row each
            cfg = self.cfgs[rows[0]]
            update = bool(cfg.closed_form_every) and step % cfg.closed_form_every == 0
            every = len(rows) == self.R  # all runs, in order (rows are ascending): the arrays themselves, not a copy
            cols = closed_form_columns(
                p64 if every else p64[rows], cfg.group_size, dec_b if every else dec_b[rows], cfg, update=update
            )
            for i, r in enumerate(rows):
                closed[r] = {k: float(v[i]) if np.ndim(v) == 1 else v[i] for k, v in cols.items()}
        return state, closed

    def fill_ledger(self, step, idx, dec_b, silent_first, zero_update, drawn, dz, loss, state, closed) -> None:
        R = self.R
        dec_at = self.decile_at if idx is None else dec_b + np.arange(R)[:, None] * N_DECILES
        mass_d = np.bincount(
            dec_at.reshape(-1), weights=dz.reshape(-1), minlength=R * N_DECILES
        )  # float64 weights, as astype
        groups = drawn.sum(axis=1)
        if self.planners is None:
            n_batch, generations = np.full(R, float(self.B)), groups * self.G[:, 0]  # G·groups, exactly
        else:
            n_batch, generations = (
                groups.astype(np.float64),
                (drawn * self.G_b).sum(axis=1),
            )  # D = 1: a drawn prompt is a kept one
        # count_nonzero row by row (with an axis it sums int64 copies; runs, not prompts)
        per_run = {
            "n_batch": n_batch,
            "silent": np.array([np.count_nonzero(x) for x in silent_first]),
            "zero_update": np.array([np.count_nonzero(x) for x in zero_update]),
            "groups": groups,
            "generations": generations,
            "loss": loss,
        }
        for r in range(R):
            host = {name: float(v[r]) for name, v in per_run.items()}
            host.update(
                kl=0.0,
                clip_frac=0.0,
                grad_mass_d=mass_d[r * N_DECILES : (r + 1) * N_DECILES],
                mean_p=float(state["mean_p"][r]),
                mean_arcsin=float(state["mean_arcsin"][r]),
                mean_p_q=state["mean_p_q"][r],
            )
            host.update(closed[r])
            self.generations_cum[r] += int(host["generations"])
            planner = None if self.planners is None else self.planners[r]
            self.ledgers[r].put(step, **ledger_row(step, host, self.generations_cum[r], planner))

    # ----------------------------------------------------------------------- checkpoints
    def save(self, next_step: int) -> None:
        for r, m in enumerate(self.members):
            state = {
                "step": np.int64(next_step),
                "z": self.z[r],
                "z_ref": self.z_ref[r],
                "rng_state": np.str_(json.dumps(self.rngs[r].bit_generator.state)),
                "ledger": self.ledgers[r].table[:next_step],
                "ledger_columns": np.array(list(COLUMNS)),
                "engine": np.str_(ENGINE),
                "run": np.str_(json.dumps(run_identity(m.cfg, ENGINE))),
                **self.opt.state(r),
                **({} if self.planners is None else self.planners[r].state()),
            }
            buf = io.BytesIO()
            np.savez(buf, **state)
            save_checkpoint(m.out, ENGINE, buf.getbuffer(), self.ledgers[r].table[:next_step])

    def load(self, ckpts: list[dict]) -> None:
        self.z = np.stack([c["z"] for c in ckpts]).astype(self.dtype)
        self.z_ref = np.stack([c["z_ref"] for c in ckpts]).astype(self.dtype)
        self.opt.load(ckpts)
        for rng, c in zip(self.rngs, ckpts):
            rng.bit_generator.state = json.loads(str(c["rng_state"]))
        self.start = int(ckpts[0]["step"])
        for pl, c in zip(self.planners or [], ckpts):
            pl.load(c)
        for r, c in enumerate(ckpts):
            self.ledgers[r].table[: self.start] = c["ledger"]
            self.generations_cum[r] = int(self.ledgers[r].get(self.start - 1, "generations_cum"))


#: Prompts per step (all runs of a program) from which a step's predictions run in a helper
#: thread beside its draws (:func:`_beside`); below it the hand-over costs more than it hides.
BESIDE_ENTRIES = 1 << 16

_helper = None
_helper_lock = threading.Lock()


def _forget_helper() -> None:
    """In a forked child: the parent's helper thread does not exist there (a future submitted to
    its executor would never run), nor may its lock be held; the child starts its own."""
    global _helper, _helper_lock
    _helper, _helper_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_helper)


def _beside(fn, *args):
    """``fn(*args)`` in this module's one helper thread, as a future; None where the process may
    use a single CPU (nothing to overlap).

    A large step's binomial draws (numpy releases the GIL inside them) take most of its time,
    and its predictions (:meth:`Program.predictions`: closed forms, population state) read only
    p, so on a second core they cost no wall time; they are the same operations on the same
    arrays, so the same bits.  The thread is started on first use and kept for the process
    (idle, it waits on a queue and takes no CPU; it ends with the interpreter, and a forked
    child starts its own); its numpy work rows are its own (:mod:`.ledger` and
    :mod:`gsd.core.chebyshev` keep them per thread)."""
    global _helper
    if usable_cpus() < 2:
        return None
    with _helper_lock:
        if _helper is None:
            from concurrent.futures import ThreadPoolExecutor

            _helper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gsd-ledger")
        return _helper.submit(fn, *args)


def helper_started() -> bool:
    """Whether this process has started its helper thread (:func:`_beside`)."""
    return _helper is not None


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity where the system says, else all)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _scatter(values: np.ndarray, idx: np.ndarray, n: int) -> np.ndarray:
    """(R, n) zeros with ``values`` (R, B) at ``idx`` (R, B): the gradient of every prompt."""
    out = np.zeros((values.shape[0], n), dtype=values.dtype)
    np.put_along_axis(out, idx, values, 1)
    return out


def read_checkpoint(path: Path, cfg: SimConfig, p0: np.ndarray) -> dict:
    """A numpy run's checkpoint, verified whole before any step: it names this run
    (:func:`~.runfolder.check_identity`), its step, ledger, logits (this run's dtype, finite; the
    reference logits exactly this run's initial ones), random state and optimizer state (shapes,
    dtype, finite, Adam's step count equal to the step and second moments >= 0).  A damaged or
    foreign one is named in one line."""
    try:
        with np.load(path, allow_pickle=False) as f:
            ckpt = {k: f[k] for k in f.files}
    except Exception as exc:  # a cut or overwritten file fails in zipfile or numpy's reader
        raise damaged(path, f"{type(exc).__name__}: {str(exc).splitlines()[0][:80] if str(exc) else ''}") from None
    missing = [k for k in _CHECKPOINT_KEYS if k not in ckpt]
    if missing:
        raise damaged(path, f"no {missing[0]!r} entry")
    if list(ckpt["ledger_columns"]) != list(COLUMNS):
        raise InputError(f"{str(path)!r}: the checkpoint's ledger has other columns (written by another version)")
    if str(ckpt["engine"]) != ENGINE:
        raise damaged(path, f"it says it was written by the {str(ckpt['engine'])[:20]!r} engine")
    check_identity(path, ckpt["run"] if "run" in ckpt else None, cfg, ENGINE)
    start = check_step(path, ckpt["step"], cfg)
    check_ledger_rows(path, ckpt["ledger"], start)
    n, dtype = cfg.n_prompts, np.dtype(cfg.dtype)
    check_array(path, "z", ckpt["z"], (n,), dtype)
    check_array(path, "z_ref", ckpt["z_ref"], (n,), dtype)
    if not np.array_equal(ckpt["z_ref"], logit(p0).astype(dtype)):
        raise InputError(
            f"{str(path)!r} belongs to another run (its initial logits are not this run's population); "
            "delete it, or the run folder, and run again"
        )
    try:
        state = json.loads(str(ckpt["rng_state"]))
        np.random.PCG64().state = state
    except (ValueError, TypeError, KeyError) as exc:
        raise damaged(path, f"its random state does not load ({type(exc).__name__})") from None
    if cfg.optimizer == "adam":
        if any(k not in ckpt for k in ("opt_steps", "opt_exp_avg", "opt_exp_avg_sq")):
            raise damaged(path, "no Adam state")
        if check_step(path, ckpt["opt_steps"], cfg, what="Adam step count") != start:
            raise damaged(path, f"its Adam step count {ckpt['opt_steps'].item()!r} is not its step {start}")
        check_array(path, "opt_exp_avg", ckpt["opt_exp_avg"], (n,), dtype)
        check_array(path, "opt_exp_avg_sq", ckpt["opt_exp_avg_sq"], (n,), dtype, nonnegative=True)
    elif cfg.momentum:
        if "opt_buffer" not in ckpt:
            raise damaged(path, "no momentum buffer")
        check_array(path, "opt_buffer", ckpt["opt_buffer"], (n,), dtype)
    if cfg.allocation != "fixed":
        _check_planner(path, ckpt, cfg)
    return ckpt


def _check_planner(path: Path, ckpt: dict, cfg: SimConfig) -> None:
    """A budget planner's arrays in a checkpoint: present, of this run's shapes, finite, counts >= 0."""
    n, B = cfg.n_prompts, cfg.batch_size or cfg.n_prompts
    need = ["planner_k_cum", "planner_n_cum", "planner_streak", "planner_planned"] + (
        ["planner_ring"] if cfg.logged_window else []
    )
    missing = [k for k in need if k not in ckpt]
    if missing:
        raise damaged(path, f"no {missing[0]!r} entry")
    for name in ("planner_k_cum", "planner_n_cum"):
        check_array(path, name, ckpt[name], (n,), np.float64)
    check_array(path, "planner_streak", ckpt["planner_streak"], (n,), np.int64, nonnegative=True)
    check_array(path, "planner_planned", ckpt["planner_planned"], (2,), np.float64, finite=False)
    if cfg.logged_window:
        check_array(path, "planner_ring", ckpt["planner_ring"], (cfg.logged_window, 2, n), np.float64)
    if "planner_G" in ckpt:
        check_array(path, "planner_G", ckpt["planner_G"], (B,), np.int64, nonnegative=True)


# --------------------------------------------------------------------------- running
def run_programs(
    runs, *, resume: bool = False, progress: bool = True, on_step=None, notify=None, max_runs: int | None = None
) -> list[dict]:
    """Run ``(config, out_dir)`` pairs on this engine; their summaries, in order.

    Runs of one :func:`program_key` at the same next step share a program (at most ``max_runs``
    runs each, by default as many as :data:`PROGRAM_ENTRIES` allows); a finished run's summary is
    read back, an unfinished one needs ``resume``.  The folders are opened, locked, verified and
    finished by the run-folder layer (:func:`~.runfolder.open_runs`), held while the programs run.
    """
    from contextlib import ExitStack

    items = [(c if isinstance(c, SimConfig) else SimConfig.from_dict(c), Path(o)) for c, o in runs]
    p0s = [initial_solve_rates(cfg) for cfg, _ in items]  # before any folder: a bad source = no folder
    with ExitStack() as held:
        summaries, members = open_runs(
            items, p0s, resume=resume, engine=ENGINE, read_checkpoint=read_checkpoint, held=held, notify=notify
        )
        pending: dict = {}
        for m in members:
            pending.setdefault((program_key(m.cfg), m.start), []).append(m)
        for group in pending.values():
            size = max_runs or max(1, PROGRAM_ENTRIES // (group[0].cfg.batch_size or group[0].cfg.n_prompts))
            for s in range(0, len(group), size):
                chunk = group[s : s + size]
                for m, summary in zip(chunk, _run_program(chunk, progress=progress, on_step=on_step)):
                    summaries[m.pos] = summary
    return summaries


def _run_program(members: list[Member], *, progress: bool, on_step) -> list[dict]:
    prog = Program(members)
    if members[0].ckpt is not None:
        prog.load([m.ckpt for m in members])
    initial = prog.population_summaries(prog.z_ref)
    drive(prog, members, progress=progress, on_step=on_step)
    final = prog.population_summaries(prog.z)
    return finish(members, prog.ledgers, initial, final, device="cpu", threads=1, engine=ENGINE)
