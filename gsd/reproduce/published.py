"""The numbers the paper prints, and how ours compare with each of them at its printed precision.

:data:`PUBLISHED` holds every published number with its units, precision and where the paper
prints it; :func:`compare` puts ours beside them.  Nothing in the reproduction is tuned towards
these values: they are only read when the comparison table is written.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Published", "PUBLISHED", "HISTOGRAM_NOTE", "compare"]


@dataclass(frozen=True)
class Published:
    """A number the paper prints, in its printed units.

    ``data`` is ``"histogram"`` when our number is computed from the shipped Big-Math histogram,
    whose k = 63 / k = 64 bar was split with two other published figures (see
    :data:`HISTOGRAM_NOTE`), so the row is not a fully independent check.
    """

    quantity: str
    value: float
    decimals: int  # printed precision
    scale: float  # ours × scale is in the printed units
    unit: str
    source: str
    data: str = ""


_PAPER = "docs/theory.md, section The paper's definitions and reproduction targets"
_LAW = "docs/theory.md, section The group-size law"
_TRAINERS = "docs/theory.md, section What trainers compute"

#: What a row marked "histogram" depends on (shown under the comparison table).
HISTOGRAM_NOTE = (
    "computed from the shipped Big-Math histogram (data/README.md), whose shared "
    "k = 63 / k = 64 bar was split with two published figures: the decile shares of the paper's "
    'Big-Math panel and the "Big-Math (frozen)" E[p^32] marker of its DAPO figure; these rows are '
    "therefore not fully independent of the paper's figures"
)

#: key → the published value our number is compared with.
PUBLISHED = {
    "bigmath_silent_G8": Published(
        "Big-Math: expected silent share at G = 8 (closed form)",
        44.3,
        1,
        100.0,
        "%",
        f"the paper's Big-Math figure; its text rounds it to 44 % ({_PAPER})",
        "histogram",
    ),
    "bigmath_extreme_share_dr_grpo": Published(
        "Big-Math: extreme prompts' gradient share, Dr.GRPO (large G)", 13.9, 1, 100.0, "%", _PAPER, "histogram"
    ),
    "bigmath_extreme_share_grpo": Published(
        "Big-Math: extreme prompts' gradient share, GRPO (large G)", 24.7, 1, 100.0, "%", _PAPER, "histogram"
    ),
    "fidelity_law_p0.05_G64": Published("fidelity at p = 0.05, G = 64, by the law", 0.959, 3, 1.0, "", _LAW),
    "fidelity_exact_p0.05_G64": Published("fidelity at p = 0.05, G = 64, exact", 0.945, 3, 1.0, "", _LAW),
    "trl_gap_G8": Published("TRL's GRPO update below the paper's at G = 8 (ddof 1)", 6.5, 1, 1.0, "%", _TRAINERS),
    "campaign_silent_r2": Published(
        "campaign: R² of GRPO-arm silent fraction vs closed form", 0.999, 3, 1.0, "", _PAPER, "histogram"
    ),
}


def compare(ours: dict) -> list[dict]:
    """One row per published number: ours (in printed units), published, difference, agreement.

    ``agrees_at_printed_precision`` is true when ours, rounded to the decimals the paper prints,
    equals the published value.  A key missing from ``ours`` (or NaN) is listed as not computed.
    """
    rows = []
    for key, pub in PUBLISHED.items():
        raw = ours.get(key)
        value = float("nan") if raw is None else float(raw) * pub.scale
        computed = math.isfinite(value)
        rows.append(
            {
                "key": key,
                "quantity": pub.quantity,
                "ours": value if computed else None,
                "published": pub.value,
                "difference": value - pub.value if computed else None,
                "unit": pub.unit,
                "agrees_at_printed_precision": bool(
                    computed and round(value, pub.decimals) == round(pub.value, pub.decimals)
                ),
                "computed": computed,
                "source": pub.source,
                "data": pub.data,
                "decimals": pub.decimals,
            }
        )
    return rows
