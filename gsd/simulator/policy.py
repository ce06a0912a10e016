"""Bernoulli-logit policies: each prompt j is answered right with probability p_j = sigmoid(z_j).

The score of an answer y ∈ {0, 1} is ∂ log π(y)/∂z = y − p, so for a binary verifier the
contrast s̄₊ − s̄₋ of :ref:`theory-identity` is exactly 1 in logit space and the per-prompt logit gradient
is the method's function of the group std σ (:ref:`theory-update`).  Both policies expose
``forward(idx) -> z`` (logits of the prompts ``idx``, or of all prompts when ``idx`` is None);
the engine measures ∂L/∂z on that output, so the ledger is the same for both.

* :class:`TabularPolicy`: one free logit per prompt (the paper's model).  Plain SGD with
  learning rate η moves z_j by exactly η·g_j.
* :class:`MLPPolicy`: z_j = f_θ(e_j) + b_j with e_j a fixed random embedding of prompt j and
  f_θ a one-hidden-layer tanh network shared by all prompts, so an update for one prompt moves
  the others (interference).  The offset b_j = logit(p0_j) − f_θ0(e_j) is set once at init so the
  initial p equals the population's to rounding, without fitting; by default it is frozen, so
  every change of p goes through the shared parameters.
"""

from __future__ import annotations

import math

from ..extras import require_torch

torch = require_torch("the torch policies, MLP included (gsd.simulator.policy)")
nn = torch.nn

__all__ = ["TabularPolicy", "MLPPolicy", "make_policy"]


class TabularPolicy(nn.Module):
    """One logit per prompt, initialised at logit(p0)."""

    def __init__(self, p0, *, dtype, device):
        super().__init__()
        p0 = torch.as_tensor(p0, dtype=torch.float64)
        self.z = nn.Parameter(torch.logit(p0).to(device=device, dtype=dtype))

    def forward(self, idx=None):
        return self.z if idx is None else self.z[idx]


class MLPPolicy(nn.Module):
    """Logit = shared tanh network of a fixed random prompt embedding + a per-prompt offset."""

    def __init__(self, p0, *, embed_dim, hidden, offset, seed, dtype, device):
        super().__init__()
        gen = torch.Generator().manual_seed(seed)  # CPU: the init is the same on every device
        n = len(p0)
        emb = torch.randn(n, embed_dim, generator=gen, dtype=torch.float64)
        # Unit-norm-ish embeddings keep tanh out of saturation whatever embed_dim is.
        self.register_buffer("emb", (emb / math.sqrt(embed_dim)).to(device=device, dtype=dtype))
        self.net = nn.Sequential(nn.Linear(embed_dim, hidden), nn.Tanh(), nn.Linear(hidden, 1))
        for layer in (self.net[0], self.net[2]):
            bound = 1.0 / math.sqrt(layer.in_features)  # torch's default range, drawn from our generator
            with torch.no_grad():
                layer.weight.copy_(torch.empty_like(layer.weight).uniform_(-bound, bound, generator=gen))
                layer.bias.copy_(torch.empty_like(layer.bias).uniform_(-bound, bound, generator=gen))
        self.net.to(device=device, dtype=dtype)
        with torch.no_grad():
            target = torch.logit(torch.as_tensor(p0, dtype=torch.float64)).to(device=device, dtype=dtype)
            b = target - self.net(self.emb).squeeze(-1)
        if offset == "learned":
            self.offset = nn.Parameter(b)
        else:
            self.register_buffer("offset", b)

    def forward(self, idx=None):
        if idx is None:
            return self.net(self.emb).squeeze(-1) + self.offset
        return self.net(self.emb[idx]).squeeze(-1) + self.offset[idx]


def make_policy(cfg, p0, *, seed, dtype, device) -> nn.Module:
    if cfg.policy == "tabular":
        return TabularPolicy(p0, dtype=dtype, device=device)
    return MLPPolicy(
        p0,
        embed_dim=cfg.mlp_embed_dim,
        hidden=cfg.mlp_hidden,
        offset=cfg.mlp_offset,
        seed=seed,
        dtype=dtype,
        device=device,
    )
