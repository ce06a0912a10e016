"""Diagnose a GRPO run from its rollout logs (verl, TRL or a plain table).

``gsd diagnose LOG...`` reads the rollouts a trainer logged and says, step by step, how much of
the generation budget fell in silent groups, what the closed forms predicted from each prompt's
posterior before the step, the fidelity of the group sizes drawn, and which group sizes the data
recommend next (see :ref:`theory-logs` for the formats and :ref:`theory-silent` for the math).

* :func:`read_rollouts` — logs → :class:`RolloutLog` (prompt code, step, reward per rollout);
* :func:`diagnose_log` — :class:`RolloutLog` → :class:`Diagnosis` (per-group, per-step and
  per-prompt tables and a summary);
* :func:`diagnose` — both at once;
* :func:`write_outputs`, :func:`format_report`, :func:`diagnosis_figure` — what the CLI writes.
"""

from ..lazy import lazy_exports

# Public names and the submodule that defines them, imported on first use so that the CLI can
# register ``gsd diagnose`` without loading pandas, pyarrow or scipy.  The log writers live with
# their trainer (gsd.integrations), under these names here.
__getattr__, __dir__, _lazy_names = lazy_exports(
    __name__,
    {
        "readers": ("FORMATS", "BadRow", "RolloutLog", "read_rollouts", "parse_reward"),
        "tables": ("STEP_KEYS", "Diagnosis", "binarise", "diagnose_log"),
        "report": ("format_report", "diagnosis_json", "write_outputs"),
        "figure": ("diagnosis_figure",),
    },
    aliases={
        "write_verl_step": ("gsd.integrations.verl", "write_step"),
        "write_trl_step": ("gsd.integrations.trl", "write_step"),
    },
)
__all__ = [
    "FORMATS",
    "STEP_KEYS",
    "BadRow",
    "RolloutLog",
    "Diagnosis",
    "read_rollouts",
    "diagnose_log",
    "diagnose",
    "binarise",
    "format_report",
    "diagnosis_json",
    "write_outputs",
    "diagnosis_figure",
    "write_verl_step",
    "write_trl_step",
    "parse_reward",
]


def streams_by_default(streaming, shards, group_size, scale) -> bool:
    """Whether :func:`diagnose` reads the log as counts: asked (``streaming`` or ``shards``), or
    not refused (``streaming`` None) where nothing needs every rollout (``group_size``, a batch
    std)."""
    if group_size is not None:
        return False
    if streaming is None and not shards:
        return scale != "batch"
    return bool(streaming or shards)


def diagnose(
    paths,
    *,
    fmt: str = "auto",
    reward=None,
    threshold=None,
    prompt_col=None,
    step_col=None,
    group_col=None,
    group_size=None,
    prior="empirical-bayes",
    epsilon: float = 0.05,
    level: float = 0.9,
    budget=None,
    half_life=None,
    ddof=None,
    eps=None,
    scale=None,
    optimizer=None,
    cost=None,
    noise=None,
    run_lr=None,
    progress=None,
    streaming: bool | None = None,
    shards=None,
    address=None,
    groups=True,
):
    """Read rollout logs and diagnose them: :func:`read_rollouts` then :func:`diagnose_log`.

    Takes the arguments of both and returns a :class:`Diagnosis`.  ``streaming``: read verl
    dumps and tables piece by piece into counts and diagnose them run of steps by run of steps
    (:func:`gsd.diagnose.counted.diagnose_counted`: the same diagnosis, field by field, in memory
    that grows with the groups, not the rollouts); None (default): so wherever it can — not with
    ``scale="batch"`` (the step's std of every reward) or ``group_size`` (blocks of rows), which
    read the whole log, as False does; True with ``scale="batch"`` is an InputError.  TRL,
    AReaL and GroupTracker tables are read whole either way.  ``shards``: count the files in
    that many Ray tasks (``address``: a Ray cluster to join).  ``groups``, streamed: True keeps
    the group table whole in the Diagnosis, None drops it (memory: the counts'), a callable
    receives each run's table (a file writer).

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> for step in (1, 2):
    ...     rows = [{"input": q, "score": s, "step": step} for q, ss in (("a", (0, 1, 1, 0)), ("b", (0, 0, 0, 0)))
    ...             for s in ss]
    ...     _ = (d / f"{step}.jsonl").write_text("".join(json.dumps(r) + "\\n" for r in rows))
    >>> dx = diagnose(d, prior="uniform")
    >>> dx.steps[["step", "groups", "rollouts", "silent_frac", "wasted_rollouts"]].to_dict("records")[0]
    {'step': 1, 'groups': 2, 'rollouts': 8, 'silent_frac': 0.5, 'wasted_rollouts': 4}
    """
    from .readers import read_rollouts
    from .tables import diagnose_log

    options = {
        "prior": prior,
        "epsilon": epsilon,
        "level": level,
        "budget": budget,
        "half_life": half_life,
        "ddof": ddof,
        "eps": eps,
        "scale": scale,
        "optimizer": optimizer,
        "cost": cost,
        "noise": noise,
        "run_lr": run_lr,
    }
    read = {"fmt": fmt, "reward": reward, "prompt_col": prompt_col, "step_col": step_col, "group_col": group_col}
    if streams_by_default(streaming, shards, group_size, scale):
        from .counted import diagnose_counted

        return diagnose_counted(
            paths,
            threshold=threshold,
            progress=progress,
            shards=shards,
            address=address,
            groups=groups,
            **read,
            **options,
        )
    log = read_rollouts(paths, group_size=group_size, progress=progress, **read)
    return diagnose_log(log, threshold=threshold, **options)
