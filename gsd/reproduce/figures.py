"""Regenerate every figure of the reproduction into one folder (``gsd figures``).

:data:`FIGURES` maps each file name to the maker that draws it.  :func:`make_all` writes them
(PNG, atomically), then asks the other parts of the package for theirs when they are installed:
the loss-geometry figures (``gsd.losses.figures.make_all``, files ``loss_*.png``) and the
campaign figure (``campaign.png``, only when a campaign run folder is given or found).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Callable

from ..errors import MissingExtra
from ..plotstyle import FAST_ENV, fast_mode, figures_dir, save_figure
from ..validation import InputError
from . import bigmath, dapo_fit, group_size_table, theory

__all__ = ["FIGURES", "FAST_ENV", "fast_mode", "monte_carlo_sizes", "make_figures", "make_all"]

#: Environment variable that asks notebooks and makers for small Monte Carlo runs.


def monte_carlo_sizes(fast: bool | None = None) -> dict:
    """Sample sizes of the Monte Carlo runs and the bootstrap, full or fast (``fast=None``: from
    ``GSD_NOTEBOOK_FAST``).  The fast sizes keep every check meaningful, with wider error bars."""
    fast = fast_mode() if fast is None else fast
    return {
        "identity_draws": 300 if fast else 2000,
        "objective_groups": 400 if fast else 4000,
        "dapo_bootstrap": 40 if fast else 200,
    }


def _dapo_fit_figure(fast: bool):
    curve = dapo_fit.synthetic_curve()
    fit = dapo_fit.fit_all_correct_curve(curve.step, curve.fraction, n_bootstrap=0)
    return dapo_fit.fit_figure(fit, truth=curve.truth.to_numpy(), title=dapo_fit.reference_title())


#: file name → maker(fast) returning a matplotlib Figure.
FIGURES: dict[str, Callable] = {
    "identity_gk.png": lambda fast: theory.identity_figure(
        theory.identity_monte_carlo(n_draws=monte_carlo_sizes(fast)["identity_draws"])
    ),
    "fidelity_law.png": lambda fast: theory.fidelity_law_figure(),
    "silent_rate.png": lambda fast: theory.silent_rate_figure(),
    "objectives.png": lambda fast: theory.objectives_figure(
        mc=theory.objective_monte_carlo(n_groups=monte_carlo_sizes(fast)["objective_groups"])
    ),
    "difficulty_weight.png": lambda fast: theory.difficulty_weight_figure(),
    "bigmath_histogram.png": lambda fast: bigmath.histogram_figure(),
    "bigmath_silent.png": lambda fast: bigmath.silent_figure(),
    "bigmath_deciles.png": lambda fast: bigmath.decile_figure(),
    "group_size_fidelity.png": lambda fast: group_size_table.fidelity_vs_group_size_figure(),
    "group_size_required.png": lambda fast: group_size_table.required_group_size_figure(),
    "dapo_all_correct.png": lambda fast: dapo_fit.all_correct_figure(),
    "dapo_fit.png": _dapo_fit_figure,
}


def make_figures(outdir=None, *, fast: bool = False, only=None, progress: bool = False) -> list[Path]:
    """Write this package's own reproduction figures (:data:`FIGURES`) into ``outdir``
    (default: :func:`gsd.plotstyle.figures_dir`)."""
    out = Path(outdir) if outdir is not None else figures_dir()
    names = list(FIGURES) if only is None else list(only)
    unknown = [n for n in names if n not in FIGURES]
    if unknown:
        raise InputError(f"only: unknown figure(s) {unknown}; known: {sorted(FIGURES)}")
    paths = []
    for name in names:
        fig = FIGURES[name](fast)
        paths.append(save_figure(fig, out / name))
        if progress:
            print(f"  wrote {out / name}", file=sys.stderr)
    return paths


def optional_import(module: str):
    """Import an optional part of the package; None (and the reason) if it is not there."""
    try:
        return importlib.import_module(module), None
    except MissingExtra as exc:  # torch-only parts without the [torch] extra: the reason names it
        return None, str(exc)
    except ModuleNotFoundError as exc:
        if exc.name and (module.startswith(exc.name) or exc.name.startswith(module.rsplit(".", 1)[0])):
            return None, f"{module} not installed"
        raise


_optional = optional_import  # the name other branches import


def loss_figures(outdir) -> tuple[list[Path], str | None]:
    """The loss-geometry figures, if that part of the package is present."""
    mod, why = optional_import("gsd.losses.figures")
    if mod is None:
        return [], why
    return mod.make_all(Path(outdir)), None  # each file written atomically


def campaign_figure(source, outdir) -> tuple[list[Path], str | None]:
    """``campaign.png`` from a campaign run folder or summary, if the simulator is present.

    A folder that holds no finished campaign raises ``InputError`` naming it.
    """
    if source is None:
        return [], "no campaign run given or found"
    if not isinstance(source, dict):
        source = Path(source)
        if not (source / "campaign_summary.json").is_file():
            raise InputError(f"campaign: {str(source)!r} holds no finished campaign (no campaign_summary.json)")
    mod, why = optional_import("gsd.simulator.campaign")
    if mod is None:
        return [], why
    return [mod.make_campaign_figure(source, Path(outdir) / "campaign.png")], None  # written atomically


def find_campaign_run(candidates=None):
    """The first folder among ``candidates`` (default: reports/latest/campaign) with a finished campaign."""
    if candidates is None:
        candidates = [Path("reports") / "latest" / "campaign"]
    for c in candidates:
        if (Path(c) / "campaign_summary.json").is_file():
            return Path(c)
    return None


def make_all(
    outdir=None,
    *,
    fast: bool = False,
    campaign=None,
    include_losses: bool = True,
    include_campaign: bool = True,
    progress: bool = False,
) -> dict:
    """Every figure: this package's, the loss-geometry ones and the campaign's when available.

    ``campaign``: a campaign run folder or summary dict; ``None`` looks for
    ``reports/latest/campaign``.  Returns ``{"written": [paths], "skipped": {part: reason}}``.
    """
    out = Path(outdir) if outdir is not None else figures_dir()
    if (
        campaign is not None
        and not isinstance(campaign, dict)
        and not (Path(campaign) / "campaign_summary.json").is_file()
    ):
        raise InputError(f"campaign: {str(campaign)!r} holds no finished campaign (no campaign_summary.json)")
    written = make_figures(out, fast=fast, progress=progress)
    skipped = {}
    parts = []
    if include_losses:
        parts.append(("losses", lambda: loss_figures(out)))
    if include_campaign:
        source = campaign if campaign is not None else find_campaign_run()
        parts.append(("campaign", lambda: campaign_figure(source, out)))
    for part, draw in parts:
        paths, why = draw()
        written += paths
        if progress:  # every file counted in "N figures" has its "wrote" line
            for path in paths:
                print(f"  wrote {path}", file=sys.stderr)
        if why:
            skipped[part] = why
    return {"written": written, "skipped": skipped}
