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

from ..lazy import lazy_exports
from .config import SimConfig, batch_key

__getattr__, __dir__, _lazy_names = lazy_exports(
    __name__,
    {
        "dispatch": ("run_simulation", "run_many"),
        "runfolder": ("is_complete",),
        "ledger": ("COLUMNS", "read_ledger"),
        "campaign": ("run_paper_campaign", "make_campaign_figure", "measure_initial_deciles"),
    },
)
__all__ = ["SimConfig", "batch_key", *_lazy_names]
