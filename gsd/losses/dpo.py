"""Direct Preference Optimization: the loss, its gradient and the "both answers fall" diagnostic
(:ref:`theory-losses`; Rafailov et al. 2023, eq. 7).

For a recorded pair (x, y_w preferred, y_l rejected) and sequence log-probabilities summed
over each answer's tokens:

    gain    g(y) = log πθ(y|x) − log π_ref(y|x)
    margin  Δ    = g(y_w) − g(y_l)
    loss    L    = −log σ(β Δ)          β > 0

The loss only sees Δ. Two pairs with the same Δ get the same loss even if, in one of them, the
preferred answer became *less* likely than under the reference (g(y_w) < 0) and the rejected
one simply fell faster (the failure Smaug studies). :func:`dpo_flags` marks those pairs.

All functions broadcast over leading dimensions and are differentiable.
"""

from __future__ import annotations

from ..extras import require_torch

torch = require_torch("gsd.losses")
import torch.nn.functional as F

from ..validation import as_float_tensor, as_positive, broadcast_shapes

__all__ = [
    "dpo_gain",
    "dpo_margin",
    "dpo_loss",
    "dpo_loss_from_gains",
    "dpo_grad",
    "dpo_flags",
    "dpo_diagnostics",
]


def _pair(a, b, name_a, name_b):
    ta = as_float_tensor(a, name_a)
    tb = as_float_tensor(b, name_b)
    broadcast_shapes(**{name_a: ta, name_b: tb})
    return ta, tb.to(ta.dtype)


def dpo_gain(logp_policy, logp_ref):
    """g(y) = log πθ(y|x) − log π_ref(y|x): how much more likely the answer became."""
    lp, lr = _pair(logp_policy, logp_ref, "logp_policy", "logp_ref")
    return lp - lr


def dpo_margin(policy_chosen, policy_rejected, ref_chosen, ref_rejected):
    """Δ = g(y_w) − g(y_l) from the four sequence log-probabilities (broadcast together)."""
    pc = as_float_tensor(policy_chosen, "policy_chosen")
    pr = as_float_tensor(policy_rejected, "policy_rejected")
    rc = as_float_tensor(ref_chosen, "ref_chosen")
    rr = as_float_tensor(ref_rejected, "ref_rejected")
    broadcast_shapes(policy_chosen=pc, policy_rejected=pr, ref_chosen=rc, ref_rejected=rr)
    return (pc - rc) - (pr - rr)


def dpo_loss_from_gains(gain_chosen, gain_rejected, *, beta: float = 0.1):
    """L = −log σ(β (g_w − g_l)), elementwise; computed as −logsigmoid for stability."""
    beta = as_positive(beta, "beta")
    gw, gl = _pair(gain_chosen, gain_rejected, "gain_chosen", "gain_rejected")
    return -F.logsigmoid(beta * (gw - gl))


def dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, *, beta: float = 0.1):
    """Per-pair DPO loss −log σ(β Δ) from sequence log-probabilities (average over pairs yourself).

    policy_* : log πθ of the chosen / rejected answers; ref_* : log π_ref of the same answers.
    Seed (§2): gains +2 and −1 give Δ = 3, loss log(1 + e^{−3β}).
    """
    beta = as_positive(beta, "beta")
    delta = dpo_margin(policy_chosen, policy_rejected, ref_chosen, ref_rejected)
    return -F.logsigmoid(beta * delta)


def dpo_grad(gain_chosen, gain_rejected, *, beta: float = 0.1):
    """Analytic gradient of the loss with respect to the two policy log-probabilities.

        ∂L/∂ log πθ(y_w) = −β σ(−βΔ),   ∂L/∂ log πθ(y_l) = +β σ(−βΔ)

    Returns ``(grad_chosen, grad_rejected)``. Gradient descent therefore pushes log πθ(y_w) up
    and log πθ(y_l) down with the same weight β σ(−βΔ), large while the pair is mis-ordered and
    vanishing as Δ grows — nothing in it asks the preferred answer's own probability to rise.
    """
    beta = as_positive(beta, "beta")
    gw, gl = _pair(gain_chosen, gain_rejected, "gain_chosen", "gain_rejected")
    w = beta * torch.sigmoid(-beta * (gw - gl))
    return -w, w


def dpo_flags(gain_chosen, gain_rejected):
    """True where the preferred answer lost probability against the reference (g(y_w) < 0) while
    the preference margin still improved (Δ > 0): the loss looks fine, the answer got rarer."""
    gw, gl = _pair(gain_chosen, gain_rejected, "gain_chosen", "gain_rejected")
    return (gw < 0) & (gw - gl > 0)


def dpo_diagnostics(gain_chosen, gain_rejected, *, beta: float = 0.1):
    """One row per pair (pandas DataFrame) with what the loss alone hides.

    Columns: ``gain_chosen``, ``gain_rejected``, ``margin`` (Δ), ``loss``, ``chosen_down``
    (g_w < 0), ``rejected_down`` (g_l < 0), ``both_down`` and ``flag`` (g_w < 0 and Δ > 0,
    see :func:`dpo_flags`). Inputs are flattened after broadcasting.

    Seed (§2): gains (+2, −1) and (−1, −4) both have Δ = 3 and the same loss; only the second
    is flagged.
    """
    import pandas as pd

    gw, gl = _pair(gain_chosen, gain_rejected, "gain_chosen", "gain_rejected")
    gw, gl = torch.broadcast_tensors(gw.detach(), gl.detach())
    loss = dpo_loss_from_gains(gw, gl, beta=beta)
    return pd.DataFrame(
        {
            "gain_chosen": gw.reshape(-1).tolist(),
            "gain_rejected": gl.reshape(-1).tolist(),
            "margin": (gw - gl).reshape(-1).tolist(),
            "loss": loss.reshape(-1).tolist(),
            "chosen_down": (gw < 0).reshape(-1).tolist(),
            "rejected_down": (gl < 0).reshape(-1).tolist(),
            "both_down": ((gw < 0) & (gl < 0)).reshape(-1).tolist(),
            "flag": dpo_flags(gw, gl).reshape(-1).tolist(),
        }
    )
