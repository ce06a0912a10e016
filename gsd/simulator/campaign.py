"""The paper's controlled campaign (:ref:`theory-paper`): three arms, one population, one figure.

* Arms: GRPO, Dr.GRPO and DAPO (≤ 4 draws), each a run of the same base config, so they start
  from the same initial population (same seed); compatible arms run as one program
  (:func:`~.batched.run_many`), each with the numbers it would have alone.
* Measurement (a): per-step silent fraction against the mean of p^G + (1−p)^G (R² per arm).
* Measurement (b): gradient mass per decile of initial p from repeated group draws on the
  initial population (:func:`measure_initial_deciles`), the logit gradient averaged over the
  draws, against the finite-G closed forms m_GRPO and m_Dr (:ref:`theory-update`), as shares.
* Measurement (c): mean p of the initially hardest quartile over training, and DAPO's
  generation cost relative to GRPO.

The campaign is a folder: ``campaign.json`` (the resolved campaign), ``arms/<name>/`` (one run
folder per arm, resumable), ``deciles.json``, ``campaign_summary.json`` and ``campaign.png``.
"""

from __future__ import annotations

import copy
import math
import time
from pathlib import Path

import numpy as np

from ..core.methods import ADVANTAGE_METHODS
from ..core.update import expected_update
from ..core.weighting import decile_index
from ..errors import InputError
from ..io.atomic import entry_path, make_folder, read_json, write_json
from ..io.lock import hold_folder
from ..plotstyle import COLORS, method_label, new_figure, save_figure, styled
from ..resources import config_file
from .config import SimConfig, config_diff, read_config_file, repeat_settings, resolve_device, resolve_engine
from .dispatch import run_many
from .ledger import N_DECILES, read_ledger
from .population import STREAM_INIT, initial_solve_rates, sub_seed

__all__ = [
    "default_campaign_path",
    "load_campaign",
    "run_paper_campaign",
    "measure_initial_deciles",
    "make_campaign_figure",
]

# Stream label for the decile measurement's draws (the run streams use 0–2).
STREAM_DECILES = 3

#: Campaign-level keys (everything else in ``overrides`` goes to the base config).
CAMPAIGN_KEYS = {
    "decile_draws": "independent group draws per prompt at the initial p for measurement (b)",
    "decile_methods": "methods measured in (b) (the paper: grpo and dr_grpo)",
}
#: Values of the campaign-level keys when a campaign file leaves them out.
_CAMPAIGN_KEY_DEFAULTS = {"decile_draws": 200, "decile_methods": ["grpo", "dr_grpo"]}


def default_campaign_path() -> Path:
    """The shipped campaign ``paper_campaign`` (``simulations/paper_campaign.toml``, :mod:`gsd.resources`)."""
    return config_file("paper_campaign", what="campaign file")


def load_campaign(config_path=None, overrides: dict | None = None) -> dict:
    """The resolved campaign: ``{"decile_draws", "decile_methods", "base": {...}, "arms": {name: {...}}}``.

    ``config_path``: a campaign file, or the name of a shipped one (None: ``paper_campaign``,
    the paper's campaign).  ``overrides``: campaign keys (:data:`CAMPAIGN_KEYS`) or base-config keys.
    Every arm config is validated here, before any work.
    """
    config_path = default_campaign_path() if config_path is None else config_path
    data = read_config_file(config_path)
    if "arms" not in data or "base" not in data:
        raise InputError(f"campaign file {str(config_path)!r} needs a [base] table and [arms.NAME] tables")
    raw = {**copy.deepcopy(_CAMPAIGN_KEY_DEFAULTS), **data.get("campaign", {})}
    raw["base"], raw["arms"] = data["base"], data["arms"]
    unknown = sorted(set(data) - {"campaign", "base", "arms"}) + sorted(
        set(data.get("campaign", {})) - set(CAMPAIGN_KEYS)
    )
    if unknown:
        raise InputError(f"campaign file {str(config_path)!r}: unknown key {unknown[0]!r}")
    for key, value in (overrides or {}).items():
        if key in CAMPAIGN_KEYS:
            raw[key] = value
        else:
            raw["base"][key] = value
    draws = raw["decile_draws"]
    methods = raw["decile_methods"]
    if not isinstance(methods, list) or not methods or any(m not in ADVANTAGE_METHODS for m in methods):
        raise InputError(
            f"campaign key 'decile_methods' = {methods!r}: must be a non-empty list of {ADVANTAGE_METHODS}"
        )
    if not isinstance(raw["arms"], dict) or not raw["arms"]:
        raise InputError("campaign needs at least one [arms.NAME] table")
    base = SimConfig.from_dict(raw["base"])
    check_decile_draws(draws, base)
    raw["base"] = base.to_dict()
    arms = {}
    for name, arm in raw["arms"].items():
        entry_path(Path("arms"), name, what="campaign arm")  # its run folder: arms/<name>
        if not isinstance(arm, dict):
            raise InputError(f"campaign arm {name!r} must be a table of config keys, got {arm!r}")
        cfg = base.with_overrides({"name": f"{base.name}-{name}", **arm})
        arms[name] = cfg.to_dict()
    raw["arms"] = arms
    return raw


# --------------------------------------------------------------------------- measurement (b)
#: Answers the decile measurement may draw at most (decile_draws × prompts × G): about ten minutes
#: of either engine on one core; the paper's campaign draws 200 × its prompts × 8, ~10⁷.
MAX_DECILE_ANSWERS = 10**10


def check_decile_draws(draws, cfg: SimConfig) -> None:
    """``decile_draws`` checked before any work: an integer >= 1 whose answers (draws × prompts ×
    G) stay within :data:`MAX_DECILE_ANSWERS`."""
    if isinstance(draws, bool) or not isinstance(draws, int) or draws < 1:
        raise InputError(f"campaign key 'decile_draws' = {draws!r}: must be an integer >= 1")
    answers = draws * cfg.n_prompts * cfg.group_size
    if answers > MAX_DECILE_ANSWERS:
        raise InputError(
            f"campaign key 'decile_draws' = {draws!r}: {draws:,} draws × {cfg.n_prompts:,} prompts × G = "
            f"{cfg.group_size} is {answers:.3g} answers, above the limit of {MAX_DECILE_ANSWERS:.0e} "
            f"(at most {MAX_DECILE_ANSWERS // (cfg.n_prompts * cfg.group_size):,} draws here)"
        )


def measure_initial_deciles(
    cfg: SimConfig, *, draws: int = 200, methods=("grpo", "dr_grpo"), progress: bool = False, threads: int | None = None
) -> dict:
    """Gradient mass per decile of initial p, from ``draws`` independent groups per prompt.

    Runs the stages of the engine the config resolves to (:func:`~.config.resolve_engine`) on
    the initial population: ``draws`` groups of G answers per prompt (as answers or as counts,
    following ``cfg.rollouts``), the core's advantages, and the loss's logit gradient averaged
    over the draws — backpropagated through :func:`~.loss.policy_loss` by the torch engine,
    written out by the numpy one (:func:`~.tabular.mean_updates`, numpy's random stream).
    −∂L/∂z_j is then the mean update of prompt j, compared per decile with
    Σ m_method(p_j, G) (:ref:`theory-update`).  The methods are paired: each drawn group is
    scored by every method's loss, so their measurements differ by the method alone (and a
    method's numbers do not depend on which others are measured beside it).  Returns, per
    method, the measured and closed-form decile shares, the measured/closed-form ratio per
    decile and overall.
    """
    check_decile_draws(draws, cfg)
    G, N = cfg.group_size, cfg.n_prompts
    p0 = initial_solve_rates(cfg)
    decile = decile_index(p0)
    methods = list(dict.fromkeys(methods))
    out = {"draws": draws, "n_prompts": N, "group_size": G, "counts": np.bincount(decile, minlength=N_DECILES).tolist()}
    if resolve_engine(cfg) == "numpy":  # the logit gradient written out, numpy's draws (.tabular)
        from .tabular import mean_updates

        rng = np.random.Generator(np.random.PCG64(sub_seed(cfg.seed, STREAM_DECILES)))
        g_means = mean_updates(cfg, p0, methods, draws, rng)
    else:
        g_means = _torch_mean_updates(cfg, p0, methods, draws, threads)
    for method, g_mean in zip(methods, g_means):
        measured = np.bincount(decile, weights=g_mean, minlength=N_DECILES)
        m = expected_update(p0, G, method, ddof=cfg.ddof, eps=cfg.eps, verifier_noise=cfg.verifier_noise)
        closed = np.bincount(decile, weights=m, minlength=N_DECILES)
        share_m, share_c = measured / measured.sum(), closed / closed.sum()
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = np.where(closed > 0, measured / closed, np.nan)
        out[method] = {
            "share_measured": share_m.tolist(),
            "share_closed_form": share_c.tolist(),
            "share_max_abs_diff": float(np.max(np.abs(share_m - share_c))),
            "mass_ratio_per_decile": ratio.tolist(),
            "mass_ratio": float(measured.sum() / closed.sum()),
        }
    return out


def _torch_mean_updates(cfg, p0, methods, draws, threads) -> list[np.ndarray]:
    """−∂L/∂z_j of each method, averaged over the same ``draws`` groups per prompt at the
    policy's initial p (float64), by the torch engine's stages and autograd.

    The gradient is taken with respect to the logits z only (a leaf per method, so that one
    backward pass per chunk of draws yields every method's gradient): the policy's parameters
    play no part in −∂L/∂z.
    """
    import torch

    from .engine import SMALL_STEP, cpu_threads
    from .loss import AdvantageTable, policy_loss
    from .policy import make_policy
    from .sampling import Batch, sample_groups

    device = torch.device(resolve_device(cfg.device))
    dtype = getattr(torch, cfg.dtype)
    G, N = cfg.group_size, cfg.n_prompts
    policy = make_policy(cfg, p0, seed=sub_seed(cfg.seed, STREAM_INIT), dtype=dtype, device=device)
    gen = torch.Generator(device=device).manual_seed(sub_seed(cfg.seed, STREAM_DECILES))
    # Draws per backward: few enough for one CPU thread (cpu_threads), which on a busy machine
    # is 2-3x faster than two; the generator's stream does not depend on the split.
    chunk = max(1, SMALL_STEP // (N * (G if cfg.rollouts == "answers" else 1)))
    with torch.no_grad():
        z0 = policy()
    p = torch.sigmoid(z0)
    zs = [z0.clone().requires_grad_(True) for _ in methods]
    tables = [AdvantageTable([G], m, ddof=cfg.ddof, eps=cfg.eps, dtype=z0.dtype, device=z0.device) for m in methods]
    sums = [torch.zeros_like(z0) for _ in methods]
    done = 0
    with cpu_threads(device, chunk * N * G, threads):
        while done < draws:
            c = min(chunk, draws - done)
            # c independent draws of every prompt = one batch of c·N prompts (draw-major).
            batch = Batch(idx=None, p=p.repeat(c), G=torch.full((c * N,), G, device=z0.device), g_max=G, uniform=True)
            groups = sample_groups(batch, draws=1, noise=cfg.verifier_noise, rollouts=cfg.rollouts, gen=gen)
            loss = sum(
                policy_loss(z.repeat(c), groups.n, t.lookup(groups.G, groups.k), G=groups.G).pg_loss / draws
                for z, t in zip(zs, tables)
            )
            for total, grad in zip(sums, torch.autograd.grad(loss, zs)):
                total += grad
            done += c
    return [(-total).to("cpu", torch.float64).numpy() for total in sums]


# --------------------------------------------------------------------------- the campaign
def run_paper_campaign(
    out_dir,
    *,
    config_path=None,
    overrides: dict | None = None,
    progress: bool = True,
    resume: bool = True,
    notify=None,
    threads: int | None = None,
) -> dict:
    """Run every arm of the campaign, the decile measurement and the figure; return the summary.

    ``out_dir`` is the campaign folder (new, or one holding this very campaign: finished arms
    are not rerun and unfinished ones resume from their checkpoints unless ``resume=False``).
    The summary holds, per arm, the silent-fraction R², decile shares (ledger, over training)
    and final quartile means; the initial-population decile measurement; DAPO's generation
    cost relative to GRPO; the per-step series the figure is drawn from; and ``wall_s``, the
    wall seconds of each stage (arms, decile_measurement, figure) of the run that wrote it.
    ``notify(message)``: told when the campaign or an arm is found finished or resumes
    (:func:`~.engine.run_simulation`).  ``threads``: torch CPU threads for every stage (default:
    each run chooses, see :func:`~.engine.choose_threads`).
    """
    campaign = load_campaign(config_path, overrides)
    out = Path(out_dir)
    with hold_folder(out, option="out_dir"):  # one process per campaign folder (each arm holds its own)
        return _run_campaign(campaign, out, progress=progress, resume=resume, notify=notify, threads=threads)


def _run_campaign(campaign: dict, out: Path, *, progress: bool, resume: bool, notify, threads) -> dict:
    finished = _open_campaign_folder(campaign, out, notify)
    if finished is not None:
        return finished
    wall = {"arms": time.perf_counter()}  # each stage's wall seconds (summary["wall_s"]): what a speed-up bought
    arm_summaries, series = _run_arms(campaign, out, progress=progress, resume=resume, notify=notify, threads=threads)
    wall["arms"] = time.perf_counter() - wall["arms"]
    wall["decile_measurement"] = time.perf_counter()
    base = SimConfig.from_dict(campaign["base"])
    deciles = measure_initial_deciles(
        base, draws=campaign["decile_draws"], methods=campaign["decile_methods"], threads=threads
    )
    write_json(out / "deciles.json", deciles)
    wall["decile_measurement"] = time.perf_counter() - wall["decile_measurement"]
    summary = _campaign_summary(campaign, arm_summaries, deciles, series)
    wall["figure"] = time.perf_counter()
    figure = make_campaign_figure(summary, out / "campaign.png")
    wall["figure"] = time.perf_counter() - wall["figure"]
    summary["figure"] = str(figure)
    summary["wall_s"] = wall
    write_json(out / "campaign_summary.json", summary)
    return read_json(out / "campaign_summary.json")


def _open_campaign_folder(campaign: dict, out: Path, notify) -> dict | None:
    """The summary of this campaign finished earlier in ``out``; else None, with ``out`` made ready
    (the campaign written, every arm's device checked before the first arm starts)."""
    saved = out / "campaign.json"
    if saved.is_file():
        old = read_json(saved)
        if old != campaign:
            diff = "; ".join(config_diff(_flat(old), _flat(campaign)))
            raise InputError(
                f"out_dir {str(out)!r} holds a different campaign ({diff}); to continue it, "
                f"{_how_to_repeat(old, campaign)}, or use another folder"
            )
        if (out / "campaign_summary.json").is_file():
            if notify is not None:
                notify(f"campaign finished earlier in {str(out)!r}; its summary is read back, nothing reruns")
            return read_json(out / "campaign_summary.json")
    elif out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(f"out_dir {str(out)!r} exists and is not a campaign folder (no campaign.json)")
    make_folder(out)
    write_json(saved, campaign)
    for arm in campaign["arms"].values():
        resolve_device(arm["device"])
    return None


def _run_arms(campaign: dict, out: Path, *, progress: bool, resume: bool, notify, threads) -> tuple[dict, dict]:
    """({arm: its summary}, {arm: its per-step series for the figure}) after running every arm."""
    # The arms differ in method: one program where their configs allow (.batched), each arm's
    # folder and numbers as if run alone.
    arms = [
        (SimConfig.from_dict(arm), entry_path(out / "arms", name, what="campaign arm"))
        for name, arm in campaign["arms"].items()
    ]
    done = run_many(arms, resume=resume, progress=progress, threads=threads, notify=notify)
    arm_summaries, series = {}, {}
    for (name, arm), summary in zip(campaign["arms"].items(), done):
        folder = entry_path(out / "arms", name, what="campaign arm")
        arm_summaries[name] = summary
        ledger = read_ledger(folder, columns=["step", "silent_frac", "silent_pred", "mean_p_q1"])
        series[name] = _arm_series(arm["method"], ledger, summary["final"])
    return arm_summaries, series


def _arm_series(method: str, ledger, final: dict) -> dict:
    """An arm's per-step series of the figure, read from its ledger and its final state."""
    return {
        "method": method,
        "step": ledger["step"].tolist(),
        "silent_frac": ledger["silent_frac"].tolist(),
        "silent_pred": ledger["silent_pred"].tolist(),
        # Quartile means are recorded before each step; the final state closes the curve.
        "hard_quartile_step": ledger["step"].tolist() + [len(ledger["step"])],
        "hard_quartile_mean_p": ledger["mean_p_q1"].tolist() + [final["quartile_mean_p"][0]],
    }


def _dapo_cost_ratios(campaign: dict, arm_summaries: dict) -> tuple[float | None, float | None]:
    """DAPO's generations and predicted groups over GRPO's (None without both a GRPO and a DAPO arm)."""

    def by_method(method):
        return next((n for n, a in campaign["arms"].items() if a["method"] == method), None)

    grpo_arm, dapo_arm = by_method("grpo"), by_method("dapo")
    if not (grpo_arm and dapo_arm):
        return None, None
    g, d = arm_summaries[grpo_arm], arm_summaries[dapo_arm]
    return d["generations_total"] / g["generations_total"], d["groups_pred_total"] / g["groups_pred_total"]


#: The figures of each arm's summary that the campaign summary keeps.
_ARM_KEYS = (
    "method",
    "silent_r2",
    "silent_rmse",
    "silent_frac_mean",
    "silent_pred_mean",
    "decile_share_measured",
    "decile_share_closed_form",
    "decile_share_max_abs_diff",
    "grad_mass_over_closed_form",
    "initial",
    "final",
    "groups_total",
    "groups_pred_total",
    "generations_total",
    "wall_s_total",
)


def _campaign_summary(campaign: dict, arm_summaries: dict, deciles: dict, series: dict) -> dict:
    """The campaign's summary before its figure: each arm's figures, the deciles, DAPO's cost, the series."""
    cost_ratio, cost_ratio_pred = _dapo_cost_ratios(campaign, arm_summaries)
    return {
        "complete": True,
        "campaign": campaign,
        "arms": {
            n: {**{k: s[k] for k in _ARM_KEYS}, "engine": s.get("engine", "torch")} for n, s in arm_summaries.items()
        },
        "silent_r2": {n: s["silent_r2"] for n, s in arm_summaries.items()},
        "quartile_final": {n: s["final"]["quartile_mean_p"] for n, s in arm_summaries.items()},
        "hard_quartile_final": {n: s["final"]["quartile_mean_p"][0] for n, s in arm_summaries.items()},
        "hard_quartile_initial": arm_summaries[next(iter(arm_summaries))]["initial"]["quartile_mean_p"][0],
        "decile_measurement": deciles,
        "dapo_generation_cost_ratio": cost_ratio,
        "dapo_generation_cost_ratio_pred": cost_ratio_pred,
        "series": series,
    }


def _how_to_repeat(saved: dict, asked: dict) -> str:
    """What turns the campaign ``asked`` back into ``saved``: the ``--set``s of its campaign and base
    keys when they explain every difference, else the campaign file that made it."""
    want, have = ({**{k: v for k, v in c.items() if k not in ("base", "arms")}, **c["base"]} for c in (saved, asked))
    base_keys = {k for k in want if want[k] != have.get(k)}
    arms_explained = saved["arms"].keys() == asked["arms"].keys() and all(
        k in base_keys for name, arm in saved["arms"].items() for k in arm if arm[k] != asked["arms"][name].get(k)
    )
    if base_keys and arms_explained:
        return f"give it the same settings (gsd simulate: {repeat_settings(want, have)})"
    return "run the campaign file that made it"


def _flat(campaign: dict) -> dict:
    flat = {k: v for k, v in campaign.items() if k not in ("base", "arms")}
    flat.update({f"base.{k}": v for k, v in campaign.get("base", {}).items()})
    for name, arm in campaign.get("arms", {}).items():
        flat.update({f"arms.{name}.{k}": v for k, v in arm.items()})
    return flat


# --------------------------------------------------------------------------- figure
def make_campaign_figure(summary_or_dir, path) -> Path:
    """The three-panel campaign figure (:ref:`theory-paper`), written atomically to ``path`` (PNG, or
    PDF/SVG by its suffix) with :func:`gsd.plotstyle.save_figure`; returns the path.

    (a) silent fraction per step, measured (dots) and predicted mean of p^G + (1−p)^G (line);
    (b) share of the gradient mass per decile of initial p, measured over repeated
        group draws (bars) against the closed forms m_GRPO and m_Dr (markers);
    (c) mean p of the initially hardest quartile over training, per arm.

    ``summary_or_dir``: the dict :func:`run_paper_campaign` returns, or its folder.  Drawn in the
    package's figure style (:mod:`gsd.plotstyle`: no display, no LaTeX, no global pyplot state).
    """
    summary = summary_or_dir
    if not isinstance(summary, dict):
        summary = read_json(Path(summary_or_dir) / "campaign_summary.json")
    return save_figure(campaign_figure(summary), path)


#: Subplot margins of the campaign figure (figure fractions; 15 × 4.6 in).
_MARGINS = {"left": 0.045, "right": 0.99, "bottom": 0.11, "top": 0.885, "wspace": 0.2}


@styled
def campaign_figure(summary: dict):
    # Fixed margins and legend places, no mathtext: the figure is drawn once, with no layout or
    # legend-placement search (about half of what constrained layout costs to write it).
    fig, (ax_a, ax_b, ax_c) = new_figure(3, width=15, height=4.6, margins=_MARGINS)
    G = summary["campaign"]["base"]["group_size"]
    N = summary["campaign"]["base"]["n_prompts"]

    for name, s in summary["series"].items():
        color = COLORS.get(s["method"])
        r2 = summary["silent_r2"][name]
        r2_txt = "n/a" if r2 is None or (isinstance(r2, float) and math.isnan(r2)) else f"{r2:.4f}"
        ax_a.plot(s["step"], s["silent_frac"], ".", ms=3, color=color, alpha=0.6)
        ax_a.plot(
            s["step"], s["silent_pred"], "-", lw=1.4, color=color, label=f"{method_label(s['method'])} (R² = {r2_txt})"
        )
    ax_a.set_xlabel("step")
    ax_a.set_ylabel("silent fraction (first draw)")
    ax_a.set_title(f"(a) silent groups: measured (dots) vs mean pᴳ + (1−p)ᴳ (lines), G = {G}", fontsize=9)
    ax_a.legend(fontsize=8, loc="lower right")

    dec = summary["decile_measurement"]
    methods = [m for m in ADVANTAGE_METHODS if m in dec]
    x = np.arange(N_DECILES)
    width = 0.8 / max(1, len(methods))
    for i, m in enumerate(methods):
        off = (i - (len(methods) - 1) / 2) * width
        ax_b.bar(
            x + off,
            dec[m]["share_measured"],
            width=width,
            color=COLORS.get(m),
            alpha=0.55,
            label=f"{method_label(m)} measured",
        )
        ax_b.plot(x + off, dec[m]["share_closed_form"], "k_", ms=12, mew=2)
    ax_b.plot([], [], "k_", ms=12, mew=2, label="closed form m(p, G)")
    ax_b.set_xticks(x, [f"{d / 10:.1f}" for d in range(N_DECILES)], fontsize=8)
    ax_b.set_xlabel("decile of initial p (lower edge)")
    ax_b.set_ylabel("share of gradient mass")
    tallest = max((max(dec[m][k]) for m in methods for k in ("share_measured", "share_closed_form")), default=0.0)
    if tallest > 0:
        ax_b.set_ylim(0, 1.3 * tallest)  # room for the legend above the bars
    ax_b.set_title(f"(b) gradient mass by decile, {dec['draws']} group draws per prompt", fontsize=9)
    ax_b.legend(fontsize=8, loc="upper right")

    ratio = summary.get("dapo_generation_cost_ratio")
    for s in summary["series"].values():
        color = COLORS.get(s["method"])
        label = method_label(s["method"])
        if s["method"] == "dapo" and ratio is not None:
            label += f" ({ratio:.2f}× GRPO's generations)"
        ax_c.plot(s["hard_quartile_step"], s["hard_quartile_mean_p"], "-", lw=1.6, color=color, label=label)
    ax_c.set_title("(c) mean p of the initially hardest quartile", fontsize=9)
    ax_c.set_xlabel("step")
    ax_c.set_ylabel("mean p (hardest quartile)")
    ax_c.legend(fontsize=8, loc="lower right")
    fig.suptitle(f"Bernoulli-logit campaign: {N} prompts, G = {G}, measured vs closed forms", fontsize=10)
    return fig
