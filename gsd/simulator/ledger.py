"""The per-step ledger of a run, its closed-form predictions and the run summary.

Each training step appends one row: what the step *did* (silent groups seen, generations
spent, the logit-gradient mass per decile of initial p) beside what the closed forms
of the math core *predict* for the same prompts at the policy the step sampled from
(:ref:`theory-silent`, :ref:`theory-update`).  :data:`COLUMNS` names and explains every column.

The closed forms come from :mod:`gsd.core.silent` and :mod:`gsd.core.update`, unchanged; the only thing
added here is the effect of a noisy verifier, derived below.

The run's files are written with :mod:`gsd.io.atomic` (a temporary file in the same folder, then
``os.replace``), so a run killed at any instant leaves either the old file or the new one, never
half of one.
"""

from __future__ import annotations

import math
import threading
from pathlib import Path

import numpy as np

from ..core.arrays import is_tensor, namespace
from ..core.binomial import symmetric_expectation
from ..core.chebyshev import chebyshev_expectation, chebyshev_table
from ..core.methods import method_spec
from ..core.silent import minor_rate, nonsilent_from_minor, silent_from_minor, truncated_draws
from ..core.update import method_update, noisy_update
from ..core.weighting import large_group_factor
from ..errors import InputError
from ..io.atomic import atomic_path

__all__ = [
    "COLUMNS",
    "BLOCKS",
    "Ledger",
    "WALL_COLUMNS",
    "INT_COLUMNS",
    "reward_rate",
    "predicted_update",
    "predicted_silent",
    "large_group_update",
    "per_decile",
    "closed_form_columns",
    "ledger_frame",
    "r_squared",
    "summarise",
    "read_ledger",
    "write_ledger",
    "LEDGER_FILE",
]

#: The ledger's file in a run folder.
LEDGER_FILE = "ledger.parquet"

N_DECILES = 10
N_QUARTILES = 4

#: Every ledger column and what it means.  "Batch" = the prompts sampled at this step;
#: "before" = at the policy the step sampled from (before its update).
COLUMNS: dict[str, str] = {
    "step": "step index, 0-based; the row describes the rollouts and update of this step",
    "n_batch": "prompts in this step's batch",
    "silent_frac": "observed fraction of batch prompts whose (first) group was silent (all rewards equal)",
    "silent_pred": "predicted silent fraction: mean over the batch of q^G + (1−q)^G at the p before the step (q = reward rate, = p without verifier noise)",
    "zero_update_frac": "observed fraction of batch prompts that got no update (silent; for DAPO: silent in all max_draws draws)",
    "zero_update_pred": "predicted zero-update fraction: mean of P_silent (DAPO: P_silent^max_draws)",
    "groups": "groups drawn this step (DAPO counts every redraw)",
    "groups_pred": "expected groups drawn: n_batch, or Σ (1 − P_silent^D)/(1 − P_silent) for DAPO",
    "generations": "answers generated this step = groups × G",
    "generations_cum": "answers generated up to and including this step",
    "loss": "value of the loss at the first epoch (policy term + KL term)",
    "kl": "mean k3 estimate of KL(π‖π_init) over the sampled answers at the first epoch (0 without a KL penalty)",
    "clip_frac": "fraction of answers whose ratio lay outside [1−ε_low, 1+ε_high] at the last epoch (0 without clipping)",
    "grad_mass": "Σ over batch prompts of g_j = −∂L/∂z_j, the logit gradient of the first epoch's policy loss (torch's autograd, or written out by the numpy engine) "
    "(the update before the learning rate; g_j ≥ 0 with an exact verifier, so this is Σ|∂L/∂z_j| there; a noisy verifier can make g_j < 0)",
    "grad_pred": "Σ over batch prompts of the closed form m_method(p_j, G) at the p before the step (NaN on steps without closed forms)",
    "grad_limit": "Σ over batch prompts of sqrt(p_j(1−p_j)) at the p before the step: the large-G GRPO update (docs/theory.md, sections Expected update and The group-size law); "
    "grad_mass / grad_limit is the step's measured fidelity (the mass-weighted mean of |Δz_j| / (lr·sqrt(p_j(1−p_j)))) and "
    "grad_pred / grad_limit its exact expectation Σ φ(p_j, G)·sqrt(p_j(1−p_j)) / grad_limit (GRPO with ddof 0, eps 0, exact verifier)",
    "grad_law": "Σ over batch prompts of sqrt(p_j(1−p_j))·(1 − 1/(8·G·p_j(1−p_j))) at the p before the step: the update the "
    "group-size law predicts (docs/theory.md, section The group-size law), so grad_law / grad_limit is the law's fidelity at the same weights",
}
COLUMNS.update(
    {
        f"grad_mass_d{d}": f"grad_mass restricted to prompts whose initial p lies in decile {d} ([{d / 10:.1f}, {(d + 1) / 10:.1f}))"
        for d in range(N_DECILES)
    }
)
COLUMNS.update({f"grad_pred_d{d}": f"grad_pred restricted to initial-p decile {d}" for d in range(N_DECILES)})
COLUMNS.update({f"grad_limit_d{d}": f"grad_limit restricted to initial-p decile {d}" for d in range(N_DECILES)})
COLUMNS.update(
    {
        "mean_p": "mean p over all prompts, before the step",
        "mean_arcsin": "mean 2·arcsin(√p) over all prompts (GRPO's large-G objective), before the step",
    }
)
COLUMNS.update(
    {
        f"mean_p_q{q + 1}": f"mean p, before the step, of initial-p quartile {q + 1} (q1 = the initially hardest 25 %)"
        for q in range(N_QUARTILES)
    }
)
COLUMNS.update(
    {
        "effective_ratio": "effective-gradient ratio: groups drawn this step that were not silent / groups drawn "
        "(= 1 − silent_frac without redraws; DAPO's redraws count in the denominator)",
        "value_planned": "Σ over the batch of the allocator's expected value (config key allocation) at the plan's G, "
        "under what the plan knew (allocation_source); NaN for a fixed G or before the first informed plan",
        "grad_planned": "Σ over the batch of the GRPO update E[σ̂²/(σ̂_c + eps)] at the plan's G, in the run's std "
        "convention (ddof, eps; E[σ̂] in the paper's), under what the plan knew: the update the plan expects, to "
        "compare with grad_mass (NaN for a fixed G)",
    }
)
COLUMNS.update({"wall_s": "wall-clock seconds of this step (differs between otherwise identical runs)"})

#: Columns holding integers (the rest are floats).
INT_COLUMNS = ("step", "n_batch", "groups", "generations", "generations_cum")

#: Columns that legitimately differ between two runs of the same config.
WALL_COLUMNS = ("wall_s",)


# --------------------------------------------------------------------------- closed forms
# Each takes the batch's p as a numpy array (host) or a torch tensor (the engine: float64 on the
# run's device, so a GPU step never waits for the host) and evaluates the core's own formulas
# (gsd.core.silent, gsd.core.update, gsd.core.weighting) in that library: numpy floats and arrays back, or
# 0-d and 1-d tensors.  ``keep``: a mask of the prompts that count (a budget plan's G = 0
# skips a prompt); their sums and means leave the others out.  A 2-d p holds one run per row
# (the numpy engine's programs, :mod:`.tabular`): sums and means are then per row, each reduced
# as that row alone would be.
def reward_rate(p, noise: float):
    """Probability that the verifier says "right": q = p(1−ν) + (1−p)ν."""
    p = p if is_tensor(p) else np.asarray(p, dtype=np.float64)
    return p if noise == 0 else p * (1.0 - noise) + (1.0 - p) * noise


def _host_expectation(q, G, f, minor=None):
    """E[f(k)] over k ~ Binom(G, q) on the host: at one G with a Chebyshev table
    (:mod:`gsd.core.chebyshev`: ~4·sqrt(G) multiply-adds per prompt, within the table's stated bound
    of the exact sum, 7.1e-14 at G = 64), else the core's exact sum.  ``minor``: min(q, 1 − q)
    when the caller has it."""
    if np.ndim(G) == 0:
        table = chebyshev_table(int(G), f)
        if table is not None:
            return chebyshev_expectation(q, table, minor=minor if np.shape(minor) == np.shape(q) else None)
    return symmetric_expectation(q, G, f)


def _expectation(p, g_max, minor=None):
    """The binomial expectation in p's library: :func:`_host_expectation` on numpy (with
    ``minor``, min(p, 1 − p), for this ``p`` only), the device's exact sum on a tensor."""
    if not is_tensor(p):
        if minor is None:
            return _host_expectation
        return lambda q, G, f: _host_expectation(q, G, f, minor=minor if q is p else None)
    from .binomial import device_expectation

    return lambda q, G, f: device_expectation(q, G, f, g_max=g_max)


def _g_max(G) -> int:
    return int(G) if np.ndim(G) == 0 and not is_tensor(G) else int(G.max())


def predicted_update(p, cfg, G=None, *, g_max: int | None = None, minor=None):
    """Expected logit update of each prompt, m_method(p, G) (:ref:`theory-update`), at the
    run's ddof/eps, DAPO's ``max_draws`` and verifier noise: the formulas of
    :func:`gsd.core.update.expected_update` (on numpy at one G: its Chebyshev table, see
    :func:`_host_expectation`).

    ``G``: each prompt's group size (default: the config's ``group_size``), ≥ 1 (≥ 2 for DAPO
    and RLOO).  ``g_max``: the largest G, when ``G`` is a tensor (spares a device→host copy).
    ``minor``: min(q, 1 − q) of the reward rate q (:func:`reward_rate`), numpy, when the caller
    has it (:func:`closed_form_columns`: the silent rate's).
    """
    G = cfg.group_size if G is None else G
    spec = method_spec(cfg.method)
    if not is_tensor(p):
        p = np.asarray(p, dtype=np.float64)
    q = reward_rate(p, cfg.verifier_noise)
    g_max = (None if not is_tensor(p) else _g_max(G)) if g_max is None else g_max
    with np.errstate(
        divide="ignore", invalid="ignore"
    ):  # the core takes log1p(−1) where 1 − P_silent rounds to 1 (large G)
        m = method_update(
            q,
            G,
            cfg.method,
            cfg.ddof,
            cfg.eps,
            cfg.max_draws if spec.redraws_silent else None,
            _expectation(q, g_max, minor),
        )
        return noisy_update(m, p, q, cfg.verifier_noise) if cfg.verifier_noise else m


def _mean(x, keep):
    if keep is None:
        return x.mean(-1)
    return namespace(x).where(keep, x, 0.0).sum(-1) / keep.sum(-1)


def _total(x, keep):
    return x.sum(-1) if keep is None else namespace(x).where(keep, x, 0.0).sum(-1)


def _host(x):
    """A numpy result as the ledger takes it: a float when 0-d, else the array (one per run)."""
    return float(x) if np.ndim(x) == 0 else x


def per_decile(x, decile, keep=None, n_bins: int = N_DECILES):
    """Σ of ``x`` per decile index (``np.bincount`` or ``index_add`` on the device); (runs,
    n_bins) for a 2-d numpy ``x`` of one run per row."""
    if keep is not None:
        x = namespace(x).where(keep, x, 0.0)
    if not is_tensor(x):
        if np.ndim(x) == 2 and x.shape[0] == 1:  # one run: no offset array
            return np.bincount(decile.reshape(-1), weights=x.reshape(-1), minlength=n_bins)[None]
        if np.ndim(x) == 2:  # each row's bins after the previous row's: one bincount, each row's entries in order
            rows = x.shape[0]
            at = decile + np.arange(rows)[:, None] * n_bins
            return np.bincount(at.reshape(-1), weights=x.reshape(-1), minlength=rows * n_bins).reshape(rows, n_bins)
        return np.bincount(decile, weights=x, minlength=n_bins)
    import torch

    return torch.zeros(n_bins, dtype=x.dtype, device=x.device).index_add_(0, decile, x)


_local = threading.local()


#: Entries up to which a work array is kept between calls (16 MB of float64): a larger batch
#: gets a fresh one each time, so a thread never holds more than a few of these after a run.
KEEP_WORK_ENTRIES = 1 << 21


def work_array(name: str, like: np.ndarray, dtype=np.float64) -> np.ndarray | None:
    """A work array of ``like``'s shape (float64, or ``dtype``), kept per thread between steps
    (None for a tensor or a scalar): the sums below read it and nothing keeps it, so a
    10^5-prompt step makes no fresh array for it (a fresh one costs a pass of its own: ~0.25 ms
    at 10^5 float64, measured).  Above :data:`KEEP_WORK_ENTRIES` a fresh array, not kept."""
    if not isinstance(like, np.ndarray) or like.ndim == 0:
        return None
    if like.size > KEEP_WORK_ENTRIES:
        return np.empty(like.shape, dtype=dtype)
    store = getattr(_local, "work", None)
    if store is None:
        store = _local.work = {}
    buf = store.get(name)
    if buf is None or buf.shape != like.shape or buf.dtype != dtype:
        buf = store[name] = np.empty(like.shape, dtype=dtype)
    return buf


_work = work_array  # the name other branches import


def predicted_silent(p, cfg, G=None, keep=None, *, minor=None) -> dict:
    """Predicted per-batch means: silent rate (:ref:`theory-silent`), zero-update rate and groups drawn.

    ``minor``: min(q, 1 − q) of the reward rate q (:func:`reward_rate`), when the caller has it."""
    G = cfg.group_size if G is None else G
    q = reward_rate(p, cfg.verifier_noise)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # as gsd.core.silent.dapo_generation_cost
        a = minor_rate(q, out=work_array("minor", q)) if minor is None else minor
        s = silent_from_minor(a, G, out=work_array("silent", q))
        if method_spec(cfg.method).redraws_silent:
            zero = s**cfg.max_draws
            groups = _total(truncated_draws(nonsilent_from_minor(a, G), cfg.max_draws), keep)
        else:
            zero = s
            if is_tensor(q):
                groups = _total(namespace(q).ones_like(q), keep)
            else:  # Σ 1 over the batch (or the kept prompts): the count itself
                groups = np.full(q.shape[:-1], float(q.shape[-1])) if keep is None else np.sum(keep, axis=-1) * 1.0
    out = {"silent_pred": _mean(s, keep), "zero_update_pred": _mean(zero, keep), "groups_pred": groups}
    return out if is_tensor(q) else {k: _host(v) for k, v in out.items()}


def large_group_update(p, G, decile, n_bins: int = N_DECILES, keep=None):
    """The large-G GRPO update sqrt(p(1−p)) of each prompt, summed: ``(grad_limit, grad_law,
    per-decile grad_limit)`` for the ledger's columns of the same names.

    grad_law sums sqrt(p(1−p))·fidelity_law(p, G) (:ref:`theory-law`; the core's
    :func:`gsd.core.weighting.large_group_weight` and :func:`gsd.core.update.fidelity_law`, multiplied out as
    sqrt(p(1−p)) − 1/(8·G·sqrt(p(1−p))), equal but for rounding); a prompt at
    p ∈ {0, 1} (reachable only by rounding a saturated logit) contributes the law's limit
    there, −∞.  ``G``: the group size, or one per prompt.
    """
    p = p if is_tensor(p) else np.asarray(p, dtype=np.float64)
    lim = large_group_factor(p, divides_by_std=True, out=work_array("limit", p))
    limit, limit_d = _total(lim, keep), per_decile(lim, decile, keep, n_bins)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # Σ lim·(1 − 1/(8·G·lim²)) = Σ lim − Σ 1/(8·G·lim), lim² = p(1−p); at lim = 0 the second
        # sum is +∞ and grad_law −∞.  On numpy in lim's own array: no fresh temporary per step.
        inv = np.multiply(lim, 8.0 * G, out=lim) if isinstance(lim, np.ndarray) and np.ndim(G) == 0 else (8.0 * G) * lim
        inv = np.divide(1.0, inv, out=inv) if isinstance(inv, np.ndarray) else 1.0 / inv
        law_sum = limit - _total(inv, keep)
    if not is_tensor(p):
        limit, law_sum = _host(limit), _host(law_sum)
    return limit, law_sum, limit_d


def closed_form_columns(p, G, decile, cfg, *, keep=None, update: bool = True, g_max: int | None = None) -> dict:
    """A step's closed-form ledger columns from its batch: silent_pred, zero_update_pred,
    groups_pred, grad_limit, grad_law and grad_limit_d; with ``update`` also grad_pred and
    grad_pred_d.  ``p``, ``G`` (an int, or one per prompt), ``decile`` and ``keep``: numpy
    arrays or tensors (then 0-d and 1-d tensors back, on p's device); a 2-d numpy p of one run
    per row gives one value (and one row of deciles) per run."""
    limit, law, limit_d = large_group_update(p, G, decile, keep=keep)
    minor = None
    if not is_tensor(p):  # min(q, 1 − q) once, for the silent rate and the update's table
        q = reward_rate(p, cfg.verifier_noise)
        minor = minor_rate(q, out=work_array("minor", q))
    out = {
        **predicted_silent(p, cfg, G, keep, minor=minor),
        "grad_limit": limit,
        "grad_law": law,
        "grad_limit_d": limit_d,
    }
    if update:
        m = predicted_update(p, cfg, G, g_max=g_max, minor=minor)
        total = _total(m, keep)
        out.update(grad_pred=total if is_tensor(total) else _host(total), grad_pred_d=per_decile(m, decile, keep))
    return out


#: Column blocks, filled by one name: ``grad_mass_d`` → grad_mass_d0 … grad_mass_d9, etc.
BLOCKS: dict[str, list[str]] = {
    **{f"grad_{what}_d": [f"grad_{what}_d{d}" for d in range(N_DECILES)] for what in ("mass", "pred", "limit")},
    "mean_p_q": [f"mean_p_q{q + 1}" for q in range(N_QUARTILES)],
}


class Ledger:
    """The run's ledger: a float64 (steps, len(COLUMNS)) table, filled row by row by column name.

    ``put(step, silent_frac=0.1, grad_mass_d=array_of_10, ...)``: plain names are columns of
    :data:`COLUMNS`, block names (:data:`BLOCKS`) fill their columns in order.  Unset entries
    stay NaN.  Integers are exact below 2^53.
    """

    def __init__(self, steps: int):
        self.table = np.full((steps, len(COLUMNS)), np.nan)
        self._at = {c: slice(j, j + 1) for j, c in enumerate(COLUMNS)}
        index = list(COLUMNS)
        for name, cols in BLOCKS.items():
            j = index.index(cols[0])
            self._at[name] = slice(j, j + len(cols))

    def put(self, row_index: int, /, **values) -> None:
        row = self.table[row_index]
        for name, value in values.items():
            row[self._at[name]] = value

    def columns(self, rows: int | None = None) -> dict:
        """The first ``rows`` rows (default: all) as {column: float64 array}, no DataFrame."""
        t = self.table if rows is None else self.table[:rows]
        return {c: t[:, j] for j, c in enumerate(COLUMNS)}

    def get(self, step: int, name: str):
        """The value (or block) ``name`` of row ``step``."""
        v = self.table[step, self._at[name]]
        return v if v.size > 1 else float(v[0])


def ledger_frame(table: np.ndarray):
    """The ledger as a DataFrame from its float64 (steps, len(COLUMNS)) table: the
    :data:`INT_COLUMNS` as int64 (exact below 2^53), the rest float64."""
    import pandas as pd

    table = np.asarray(table, dtype=np.float64).reshape(-1, len(COLUMNS))
    return pd.DataFrame(
        {c: (table[:, j].astype(np.int64) if c in INT_COLUMNS else table[:, j]) for j, c in enumerate(COLUMNS)},
        columns=list(COLUMNS),
    )


# --------------------------------------------------------------------------- summary
def r_squared(observed, predicted) -> float:
    """Coefficient of determination of ``predicted`` as a prediction of ``observed``.

    R² = 1 − Σ(obs − pred)² / Σ(obs − mean obs)²  (no refit: a biased prediction lowers it).
    NaN when the observations do not vary.
    """
    obs = np.asarray(observed, dtype=np.float64)
    pred = np.asarray(predicted, dtype=np.float64)
    ss_tot = float(((obs - obs.mean()) ** 2).sum()) if obs.size else 0.0
    if ss_tot == 0:
        return math.nan
    return 1.0 - float(((obs - pred) ** 2).sum()) / ss_tot


def _shares(x):
    x = np.asarray(x, dtype=np.float64)
    total = x.sum()
    return (x / total).tolist() if total > 0 else [math.nan] * len(x)


def summarise(
    ledger, cfg, *, initial: dict, final: dict, device: str, threads: int | None = None, engine: str = "torch"
) -> dict:
    """The run's summary: how well the closed forms tracked the training dynamics.

    ``ledger``: its columns by name (the float64 table's :meth:`Ledger.columns`, or a
    DataFrame as :func:`read_ledger` returns).

    * ``silent_r2``: R² of ``silent_pred`` against ``silent_frac`` over the steps;
    * ``decile_share_measured`` / ``decile_share_closed_form``: each initial-p decile's share of
      the logit-gradient mass summed over the steps with closed forms (the budget share of
      :ref:`theory-update`, measured from the updates applied against Σ m_method);
    * ``fidelity_measured`` / ``fidelity_exact`` / ``fidelity_law``: Σ grad_mass, Σ grad_pred and
      Σ grad_law over Σ grad_limit — the mass-weighted fidelity of the run's updates to the
      large-G GRPO update, as measured from the updates applied, as the exact closed form predicts it
      (φ(p, G) for GRPO with ddof 0, eps 0 and an exact verifier; for another method the ratio
      of its m_method to sqrt(p(1−p))) and as the group-size law predicts it.  All three over
      the steps with closed forms (every step when the run has none: then ``fidelity_exact``
      is NaN); the ``_step0`` variants are the first step's, at the initial population;
    * ``initial`` / ``final``: mean p, mean 2·arcsin√p and the four initial-p quartile means;
    * ``generations_total``: answers generated (DAPO's redraws included);
    * ``threads``: the CPU threads the run used (its numbers depend on the count; the numpy
      engine uses one);
    * ``engine``: ``numpy`` or ``torch``, the engine that ran it (their random streams differ).
    """
    col = {c: np.asarray(ledger[c], dtype=np.float64) for c in COLUMNS}
    cf = ~np.isnan(col["grad_pred"])
    measured = np.array([col[f"grad_mass_d{d}"][cf].sum() for d in range(N_DECILES)])
    closed = np.array([col[f"grad_pred_d{d}"][cf].sum() for d in range(N_DECILES)])
    share_m, share_c = _shares(measured), _shares(closed)
    diff = np.abs(np.asarray(share_m) - np.asarray(share_c))
    total_pred = float(col["grad_pred"][cf].sum())
    fid_rows = cf if cf.any() else np.ones_like(cf)
    first = np.arange(cf.size) < 1

    def ratio(rows, name):
        den = float(col["grad_limit"][rows].sum())
        return float(col[name][rows].sum()) / den if rows.any() and den > 0 else math.nan  # NaN stays NaN

    silent, pred = col["silent_frac"], col["silent_pred"]
    out = {
        "complete": True,
        "name": cfg.name,
        "method": cfg.method,
        "policy": cfg.policy,
        "device": device,
        "threads": threads,
        "engine": engine,
        "steps": int(cf.size),
        "n_prompts": cfg.n_prompts,
        "group_size": cfg.group_size,
        "silent_r2": r_squared(silent, pred),
        "silent_rmse": float(np.sqrt(((silent - pred) ** 2).mean())),
        "silent_frac_mean": float(silent.mean()),
        "silent_pred_mean": float(pred.mean()),
        "zero_update_frac_mean": float(col["zero_update_frac"].mean()),
        "zero_update_pred_mean": float(col["zero_update_pred"].mean()),
        "decile_share_measured": share_m,
        "decile_share_closed_form": share_c,
        "decile_share_max_abs_diff": float(np.nanmax(diff)) if np.isfinite(diff).any() else math.nan,
        "grad_mass_over_closed_form": float(col["grad_mass"][cf].sum() / total_pred) if total_pred > 0 else math.nan,
        "closed_form_steps": int(cf.sum()),
        "fidelity_measured": ratio(fid_rows, "grad_mass"),
        "fidelity_exact": ratio(cf, "grad_pred"),
        "fidelity_law": ratio(fid_rows, "grad_law"),
        "fidelity_measured_step0": ratio(first, "grad_mass"),
        "fidelity_exact_step0": ratio(first, "grad_pred"),
        "fidelity_law_step0": ratio(first, "grad_law"),
        "initial": initial,
        "final": final,
        "groups_total": int(col["groups"].sum()),
        "groups_pred_total": float(col["groups_pred"].sum()),
        "generations_total": int(col["generations"].sum()),
        "wall_s_total": float(col["wall_s"].sum()),
        **allocation_summary(col, final),
        "config": cfg.to_dict(),
    }
    return out


#: Training targets whose cost in generations the summary reports: (ledger column, threshold).
TARGETS = {"mean_p_0.9": ("mean_p", 0.9), "hard_quartile_p_0.8": ("mean_p_q1", 0.8)}


def generations_to_target(ledger, column: str, threshold: float, final_value: float):
    """Answers generated before ``column`` first reached ``threshold`` (NaN if it never did).

    ``ledger``: the ledger's columns by name (a DataFrame or a dict of arrays).  Its state
    columns are read before each step, so reaching the target at step t cost the generations of
    steps 0 … t−1; the state after the last step counts too.
    """
    before = np.asarray(ledger[column], dtype=np.float64)
    spent = np.concatenate([[0.0], np.asarray(ledger["generations_cum"], dtype=np.float64)])
    hit = np.nonzero(np.concatenate([before, [final_value]]) >= threshold)[0]
    return float(spent[hit[0]]) if hit.size else math.nan


def allocation_summary(col, final: dict) -> dict:
    """Budget-allocation view of a run: effective-gradient ratio, generations to the targets,
    planned value against measured gradient mass (``col``: the ledger's columns by name)."""
    col = {
        c: np.asarray(col[c], dtype=np.float64)
        for c in (
            "groups",
            "n_batch",
            "zero_update_frac",
            "grad_planned",
            "grad_mass",
            "generations_cum",
            "mean_p",
            "mean_p_q1",
        )
    }
    final_cols = {"mean_p": final["mean_p"], "mean_p_q1": final["quartile_mean_p"][0]}
    groups = col["groups"].sum()
    kept = (col["n_batch"] * (1 - col["zero_update_frac"])).sum()
    planned = ~np.isnan(col["grad_planned"])
    den = col["grad_planned"][planned].sum()
    return {
        "effective_ratio": float(kept / groups) if groups else math.nan,
        "generations_to_target": {
            name: generations_to_target(col, c, thr, final_cols[c]) for name, (c, thr) in TARGETS.items()
        },
        "grad_mass_over_planned": float(col["grad_mass"][planned].sum() / den)
        if planned.any() and den > 0
        else math.nan,
    }


# --------------------------------------------------------------------------- files
def write_ledger(path, table: np.ndarray) -> Path:
    """Write the ledger table (see :func:`ledger_frame`) as parquet, atomically.

    Straight from the numpy columns through pyarrow (no DataFrame: a run rewrites its ledger
    at every checkpoint); :func:`read_ledger` reads it back as :func:`ledger_frame` would
    build it, dtypes included.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = np.asarray(table, dtype=np.float64).reshape(-1, len(COLUMNS))
    # Arrays from the numpy buffers: pa.array(ndarray) imports pandas to rule out a Series
    # (0.3 s of a campaign process that never needs pandas).
    arrays = []
    for j, c in enumerate(COLUMNS):
        col = np.ascontiguousarray(table[:, j].astype(np.int64) if c in INT_COLUMNS else table[:, j])
        arrays.append(
            pa.Array.from_buffers(pa.int64() if c in INT_COLUMNS else pa.float64(), col.size, [None, pa.py_buffer(col)])
        )
    arrow = pa.Table.from_arrays(arrays, names=list(COLUMNS))
    with atomic_path(path) as tmp:
        pq.write_table(arrow, tmp, use_dictionary=False)
    return Path(path)


def read_ledger(folder, columns=None):
    """A run folder's ledger as a DataFrame; with ``columns`` (a list of names), just those as
    {name: numpy array}, read through pyarrow without pandas."""
    path = Path(folder) / LEDGER_FILE
    if not path.is_file():
        raise InputError(f"out_dir {str(folder)!r} holds no ledger")
    import pyarrow as pa

    try:
        if columns is not None:
            import pyarrow.parquet as pq

            table = pq.ParquetFile(path).read(columns=list(columns), use_pandas_metadata=False)
            return {c: _column_array(table.column(c)) for c in columns}
        import pandas as pd

        return pd.read_parquet(path)
    except (pa.ArrowException, OSError, KeyError, ValueError) as exc:  # cut short, overwritten, other columns
        raise InputError(
            f"{str(path)!r} is damaged ({type(exc).__name__}: {str(exc).splitlines()[0][:80] if str(exc) else ''}); "
            "delete it, or the run folder, and run again"
        ) from None


def _column_array(column) -> np.ndarray:
    """A ledger column (int64 or float64, no nulls) as numpy, straight from its buffers:
    pyarrow's ``to_numpy`` imports pandas (0.3 s), and ``pq.read_table`` its dataset module."""
    dtype = np.int64 if str(column.type) == "int64" else np.float64
    if str(column.type) not in ("int64", "double") or column.null_count:
        return column.to_numpy()  # not a ledger written by write_ledger: let pyarrow convert it
    parts = [np.frombuffer(ch.buffers()[1], dtype=dtype, count=len(ch), offset=ch.offset * 8) for ch in column.chunks]
    return np.concatenate(parts) if parts else np.empty(0, dtype=dtype)
