"""Training simulator: a Bernoulli-logit policy trained by GRPO, Dr.GRPO, DAPO or RLOO.

The gradient mass the closed forms of :ref:`theory-update` predict is here *produced* — by
sampled groups, the method's advantages, the loss's logit gradient and an optimizer — and
recorded step by step in a ledger beside the prediction, so the closed forms are tested as
training dynamics rather than restated.  Two engines run it (``engine`` in :class:`SimConfig`):
torch with autograd (:mod:`.engine`: every policy and loss option, CPU or GPU), and numpy for
the tabular policy (:mod:`.tabular`: the logit gradient written out, checked against autograd;
no torch import), which ``engine = "auto"`` picks whenever the config allows.

Public API (also used by the sweep engine and the reproduction):

* :class:`SimConfig` — every knob of a run (``from_toml``, ``with_overrides``, ``to_dict``);
* :func:`run_simulation` — train one arm into a run folder, resumable; returns its summary;
* :func:`run_many` — several runs, as one program where they differ only in seed, method or
  group size (:mod:`.batched`; :func:`batch_key` says which can share one), each as if run alone;
* :func:`is_complete` — whether a run folder holds a finished run;
* :data:`COLUMNS` — the ledger's columns and their meaning; :func:`read_ledger`;
* :func:`run_paper_campaign`, :func:`make_campaign_figure`, :func:`measure_initial_deciles` —
  the paper's three-arm campaign (:ref:`theory-paper`) and its figure.

Only the config is imported eagerly: torch, pandas and matplotlib load on first use, so that
``gsd`` sub-commands that do not simulate start fast.
"""

from .config import SimConfig, batch_key

_LAZY = {
    "run_simulation": "dispatch",
    "is_complete": "runfolder",
    "run_many": "dispatch",
    "COLUMNS": "ledger",
    "read_ledger": "ledger",
    "run_paper_campaign": "campaign",
    "make_campaign_figure": "campaign",
    "measure_initial_deciles": "campaign",
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'gsd.simulator' has no attribute {name!r}")


__all__ = ["SimConfig", "batch_key", *_LAZY]
