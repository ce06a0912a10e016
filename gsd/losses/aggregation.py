"""Loss aggregation over a batch of responses, and the length bias each choice implies
(:ref:`theory-trainers`, :ref:`theory-losses`).

Given per-token losses ``l`` of shape (..., B, T) — B responses padded to T positions — and a
0/1 ``mask`` of active (response) tokens, write n_i = Σ_t m_it for the length of response i and
S_i = Σ_t m_it l_it for its token sum. The modes:

======================== ==================================== ===========================
mode                     value                                 weight of one token of i
======================== ==================================== ===========================
token-mean               Σ_i S_i / Σ_i n_i                     1 / Σ_j n_j
token-sum                Σ_i S_i                               1
seq-mean-token-mean      (1/B') Σ_i S_i / n_i                  1 / (B' n_i)
seq-mean-token-sum       (1/B') Σ_i S_i                        1 / B'
seq-mean-token-sum-norm  (1/B') Σ_i S_i / L                    1 / (B' L)
token-sum-norm           Σ_i S_i / L                           1 / L
======================== ==================================== ===========================

B' counts the rows: all B of them (``rows="all"``, a fully masked row adds 0 to the sum and 1 to
the count) or only rows with at least one active token (``rows="nonempty"``). L is a constant
normaliser (default: the padded length T). Every mode is linear in the losses, so the weight
column is exactly the gradient ∂loss/∂l_it (:func:`token_weights`).

Length bias: under seq-mean-token-mean a response's tokens share a fixed 1/B' between them,
so each token of a long response counts less — a long wrong answer (negative advantage) is
penalised less per token than a short one, and a short right answer is rewarded more per token.
token-mean and the constant normalisers give every token the same weight whatever its length.

Trainer conventions, checked against the installed TRL 1.16.0 and verl 0.9.1 (formulas
restated, not copied; see :ref:`theory-losses`):

TRL ``GRPOTrainer`` ``loss_type`` (``trl/trainer/grpo_trainer.py``, ``_compute_loss``; the
default is ``dapo``):

* ``grpo`` and ``sapo``: per row, token sum / max(n_i, 1); then the plain mean over all B rows.
* ``bnpo``: Σ S_i / max(Σ n_i, 1) over the local (per-device) batch.
* ``dr_grpo``: Σ S_i / (B · max_completion_length) — B counts every row, the constant is the
  configured maximum completion length, not the padded width of the batch.
* ``dapo``, ``cispo`` and ``vespo``: Σ S_i / (N / P · GA / S), with N the active-token count
  of the whole generation batch gathered over the P processes, GA the accumulation steps and S
  ``steps_per_generation`` (by default S = GA); after DDP averages gradients and accumulation
  sums micro-batches this is the global token mean.  On one process and one micro-batch it
  equals ``bnpo`` (token-mean).  N is counted *after* ``mask_truncated_completions`` zeroes
  the truncated rows (``_generate_and_score_completions`` masks ``completion_mask`` and then
  sums it into ``num_items_in_batch``), so with that option the denominator excludes their
  tokens: pass the masked mask and the preset is exact.
* ``luspo``: Σ_i S_i / B, every row counted (seq-mean-token-sum, rows="all").
* grpo / sapo / bnpo / dr_grpo / luspo are then divided by the number of gradient-accumulation
  steps (dapo's normaliser already spans them); with one step nothing changes.

The presets cover the aggregation step only: cispo, sapo, vespo and luspo also change the
per-token loss (clipped weights, soft gates, sequence-level ratios), which is not modelled here.

verl ``agg_loss`` in ``verl/trainer/ppo/core_algos.py`` (``actor.loss_agg_mode``, default
``token-mean``), two generations:

* current (0.9.1) — ``agg_loss(loss_mat, loss_mask, loss_agg_mode, dp_size, batch_num_tokens,
  global_batch_size, loss_scale_factor)``: token-mean = Σ S_i / (global token count);
  token-sum = Σ S_i; seq-mean-token-sum and seq-mean-token-mean divide by the number of rows
  with at least one active token (rows="nonempty"); seq-mean-token-sum-norm =
  seq-mean-token-sum / ``loss_scale_factor`` (default: the padded length T). Distributed runs
  pass the global counts and multiply by dp_size, so the result is the global-batch value; on
  one process it is the formula above.  Two differences: seq-mean-token-mean divides each row
  by n_i + 1e-8 rather than n_i (a relative difference of 1e-8/n_i), and a batch with no active
  token gives 0/0 = NaN in token-mean and the seq-mean-* modes where :func:`aggregate` returns 0.
* legacy — volcengine/verl at commit 26b5d6b (mid 2025; not re-checked, the signature is gone
  from 0.9.1), ``agg_loss(loss_mat, loss_mask, loss_agg_mode)``: the same token-mean;
  seq-mean-token-sum and seq-mean-token-mean take ``torch.mean`` over all B rows (an empty row
  is 0/0 = NaN in seq-mean-token-mean there; here it counts 0); and seq-mean-token-sum-norm =
  Σ_i S_i / T — the whole token sum over the padded length, *not* divided by B.
  ``VERL_LEGACY_AGG_MODES`` reproduces it (mode ``token-sum-norm``).

Legacy verl's seq-mean-token-sum-norm is B times larger (no mean over rows); TRL's grpo counts
fully masked rows in its mean while current verl's seq-mean-* skip them.
"""

from __future__ import annotations

from typing import NamedTuple

from ..extras import require_torch

torch = require_torch("gsd.losses")

from ..validation import InputError, as_float_tensor, as_positive

__all__ = [
    "AGG_MODES",
    "ROWS",
    "AggPreset",
    "TRL_LOSS_TYPES",
    "VERL_AGG_MODES",
    "VERL_LEGACY_AGG_MODES",
    "aggregate",
    "aggregate_as",
    "per_token_weight",
    "token_weights",
    "sequence_weights",
    "trainer_table",
]

#: Aggregation modes understood by :func:`aggregate`.
AGG_MODES = (
    "token-mean",
    "token-sum",
    "seq-mean-token-mean",
    "seq-mean-token-sum",
    "seq-mean-token-sum-norm",
    "token-sum-norm",
)
#: How the per-sequence modes count rows: every row, or only rows with an active token.
ROWS = ("all", "nonempty")

_NORM_MODES = ("seq-mean-token-sum-norm", "token-sum-norm")


class AggPreset(NamedTuple):
    """A trainer's aggregation expressed in :func:`aggregate`'s terms.

    ``norm`` says where the constant normaliser L comes from: None (mode has none),
    ``"padded"`` (the padded length T, default if not given), or ``"required"`` (the caller
    must pass it, e.g. TRL's ``max_completion_length``).
    """

    mode: str
    rows: str = "all"
    norm: str | None = None


#: TRL ``GRPOConfig.loss_type`` → aggregation (one process, one accumulation step; TRL 1.16).
TRL_LOSS_TYPES = {
    "grpo": AggPreset("seq-mean-token-mean", "all"),
    "bnpo": AggPreset("token-mean"),
    "dr_grpo": AggPreset("seq-mean-token-sum-norm", "all", "required"),
    "dapo": AggPreset("token-mean"),
    "cispo": AggPreset("token-mean"),
    "sapo": AggPreset("seq-mean-token-mean", "all"),
    "luspo": AggPreset("seq-mean-token-sum", "all"),
    "vespo": AggPreset("token-mean"),
}

#: verl ``actor.loss_agg_mode`` (0.9.1 ``agg_loss``) → aggregation (one process).
VERL_AGG_MODES = {
    "token-mean": AggPreset("token-mean"),
    "token-sum": AggPreset("token-sum"),
    "seq-mean-token-sum": AggPreset("seq-mean-token-sum", "nonempty"),
    "seq-mean-token-mean": AggPreset("seq-mean-token-mean", "nonempty"),
    "seq-mean-token-sum-norm": AggPreset("seq-mean-token-sum-norm", "nonempty", "padded"),
}

#: verl ``loss_agg_mode`` in the legacy ``agg_loss(loss_mat, loss_mask, loss_agg_mode)``.
VERL_LEGACY_AGG_MODES = {
    "token-mean": AggPreset("token-mean"),
    "seq-mean-token-sum": AggPreset("seq-mean-token-sum", "all"),
    "seq-mean-token-mean": AggPreset("seq-mean-token-mean", "all"),
    "seq-mean-token-sum-norm": AggPreset("token-sum-norm", "all", "padded"),
}

_FRAMEWORKS = {"trl": TRL_LOSS_TYPES, "verl": VERL_AGG_MODES, "verl-legacy": VERL_LEGACY_AGG_MODES}


def _check_mode(mode, rows):
    if mode not in AGG_MODES:
        raise InputError(f"mode must be one of {AGG_MODES}, got {mode!r}")
    if rows not in ROWS:
        raise InputError(f"rows must be one of {ROWS}, got {rows!r}")


def _mask(mask, name="mask"):
    m = as_float_tensor(mask, name)
    if m.ndim < 2:
        raise InputError(f"{name} must have shape (..., B, T), got {tuple(m.shape)}")
    if bool(((m.detach() != 0) & (m.detach() != 1)).any()):
        raise InputError(f"{name} must hold only 0 and 1 (active / padding tokens)")
    return m


def _norm(norm, T):
    if norm is None:
        return float(T)
    return as_positive(norm, "norm")


def per_token_weight(
    lengths, mode: str = "token-mean", *, rows: str = "all", norm: float | None = None, padded_length=None
):
    """Weight that every token of response i gets in the aggregate, from the lengths alone.

    lengths : (..., B) active-token counts n_i of the responses in the batch (>= 0). Returns
    (..., B): the ∂(aggregate)/∂l_it shared by each active token of response i (the value is
    also reported for empty rows; it multiplies no token there). ``norm`` is the constant L of
    the ``*-norm`` modes; it defaults to ``padded_length`` (T), which is then required.

    Example: in a batch of lengths (10, 100) under seq-mean-token-mean a token of the short
    answer weighs 1/20, one of the long answer 1/200; under token-mean both weigh 1/110.
    """
    _check_mode(mode, rows)
    n = as_float_tensor(lengths, "lengths")
    if n.ndim < 1:
        raise InputError("lengths must have shape (..., B), got a scalar")
    if bool((n.detach() < 0).any()):
        raise InputError("lengths must be >= 0")
    B = n.shape[-1]
    if rows == "all":
        b_eff = torch.full(n.shape[:-1] + (1,), float(B), dtype=n.dtype, device=n.device)
    else:
        b_eff = (n > 0).to(n.dtype).sum(dim=-1, keepdim=True).clamp_min(1.0)
    if mode in _NORM_MODES:
        if norm is None and padded_length is None:
            raise InputError("norm (the constant L) or padded_length is required for the *-norm modes")
        L = _norm(norm, padded_length)
    ones = torch.ones_like(n)
    if mode == "token-mean":
        return ones / n.sum(dim=-1, keepdim=True).clamp_min(1.0)
    if mode == "token-sum":
        return ones
    if mode == "seq-mean-token-mean":
        return 1.0 / (b_eff * n.clamp_min(1.0))
    if mode == "seq-mean-token-sum":
        return ones / b_eff
    if mode == "seq-mean-token-sum-norm":
        return ones / (b_eff * L)
    return ones / L  # token-sum-norm


def token_weights(mask, mode: str = "token-mean", *, rows: str = "all", norm: float | None = None):
    """Weights w (..., B, T) with aggregate(l, mask, ...) = Σ w · l: the gradient of the mode."""
    m = _mask(mask)
    w = per_token_weight(m.sum(dim=-1), mode, rows=rows, norm=norm, padded_length=m.shape[-1])
    return w.unsqueeze(-1) * m


def sequence_weights(mask, mode: str = "token-mean", *, rows: str = "all", norm: float | None = None):
    """Total weight of each response, n_i × per-token weight, shape (..., B).

    Constant 1/B' under seq-mean-token-mean (every answer counts the same whatever its length);
    proportional to n_i under the token-level and constant-normaliser modes.
    """
    return token_weights(mask, mode, rows=rows, norm=norm).sum(dim=-1)


def aggregate(loss, mask, mode: str = "token-mean", *, rows: str = "all", norm: float | None = None):
    """Reduce per-token losses (..., B, T) to one value per batch (...,) under ``mode``.

    mask : 0/1 (..., B, T), 1 on response tokens; rows : "all" or "nonempty" (how B' counts
    rows in the ``seq-mean-*`` modes); norm : the constant L of the ``*-norm`` modes (default T). See
    the module docstring for the formulas and :func:`aggregate_as` for trainer presets.
    """
    _check_mode(mode, rows)
    l = as_float_tensor(loss, "loss", allow="any")  # padding may hold anything; active tokens are checked below
    m = _mask(mask)
    if tuple(l.shape) != tuple(m.shape):
        raise InputError(
            f"loss and mask must have the same shape (..., B, T), got {tuple(l.shape)} and {tuple(m.shape)}"
        )
    bad = (m.detach() > 0) & ~torch.isfinite(l.detach())
    if bool(bad.any()):
        raise InputError(f"loss is not finite at {int(bad.sum())} active token(s), e.g. {float(l.detach()[bad][0])!r}")
    m = m.to(l.dtype)
    B, T = l.shape[-2], l.shape[-1]
    # Padding positions may hold garbage (even inf); select rather than multiply so they cannot leak.
    masked = torch.where(m > 0, l, torch.zeros_like(l))
    seq_sum = masked.sum(dim=-1)  # S_i
    n = m.sum(dim=-1)  # n_i
    if mode == "token-mean":
        return seq_sum.sum(dim=-1) / n.sum(dim=-1).clamp_min(1.0)
    if mode == "token-sum":
        return seq_sum.sum(dim=-1)
    if mode == "token-sum-norm":
        return seq_sum.sum(dim=-1) / _norm(norm, T)
    if rows == "all":
        b_eff = torch.full(n.shape[:-1], float(B), dtype=l.dtype, device=l.device)
    else:
        b_eff = (n > 0).to(l.dtype).sum(dim=-1).clamp_min(1.0)
    if mode == "seq-mean-token-mean":
        return (seq_sum / n.clamp_min(1.0)).sum(dim=-1) / b_eff
    total = seq_sum.sum(dim=-1) / b_eff
    if mode == "seq-mean-token-sum":
        return total
    return total / _norm(norm, T)  # seq-mean-token-sum-norm


def _preset(framework, name):
    if framework not in _FRAMEWORKS:
        raise InputError(f"framework must be one of {tuple(_FRAMEWORKS)}, got {framework!r}")
    table = _FRAMEWORKS[framework]
    if name not in table:
        raise InputError(f"{framework} has no aggregation named {name!r}; known: {tuple(table)}")
    return table[name]


def aggregate_as(loss, mask, framework: str, name: str, *, norm: float | None = None):
    """The value a trainer computes from (loss, mask) on one process and one micro-batch.

    framework : "trl" (``name`` = a ``loss_type``), "verl" (a ``loss_agg_mode``) or
    "verl-legacy"; norm : TRL dr_grpo's ``max_completion_length`` (required) or verl's
    ``loss_scale_factor`` (default: the padded length).
    """
    p = _preset(framework, name)
    if p.norm == "required" and norm is None:
        raise InputError(f"{framework} {name} needs norm (max_completion_length)")
    return aggregate(loss, mask, p.mode, rows=p.rows, norm=norm)


def trainer_table(loss, mask, *, max_completion_length: float | None = None):
    """Every TRL loss_type and verl loss_agg_mode evaluated on one batch (pandas DataFrame).

    loss, mask : (B, T). max_completion_length defaults to the padded length T (TRL dr_grpo).
    Columns: ``framework``, ``name``, ``mode``, ``rows``, ``value``.
    """
    import pandas as pd

    l = as_float_tensor(loss, "loss", allow="any")  # aggregate_as checks the active tokens
    if l.ndim != 2:
        raise InputError(f"trainer_table takes one batch, loss of shape (B, T), got {tuple(l.shape)}")
    mcl = (
        float(l.shape[-1])
        if max_completion_length is None
        else as_positive(max_completion_length, "max_completion_length")
    )
    rows = []
    for framework, table in _FRAMEWORKS.items():
        for name, p in table.items():
            norm = mcl if p.norm == "required" else None
            value = aggregate_as(l.detach(), mask, framework, name, norm=norm)
            rows.append({"framework": framework, "name": name, "mode": p.mode, "rows": p.rows, "value": float(value)})
    return pd.DataFrame(rows)
