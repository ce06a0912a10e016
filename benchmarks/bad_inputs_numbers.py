"""Issue 44's surfaces for ``bad_inputs.py``: steps, counts, fractions, seconds and values that are
not numbers, as the scalar readers, the scalar diagnosis, the timing-log reader, the group-size
advice, the live SilenceAlert and ``gsd example-logs`` meet them.  Each case names what it
expects (``error``: refused with gsd's input error; ``answer``: a result its check accepts); the
files are written into ``tmp`` here, the calls run in ``bad_inputs.py``'s worker.
"""

from __future__ import annotations

import json
from pathlib import Path

SCALARS = "__import__('gsd.diagnose.scalars', fromlist=['_'])"
DIAG = "__import__('gsd.diagnose.scalar_diagnosis', fromlist=['_'])"
ADVICE = "__import__('gsd.core.advice', fromlist=['_'])"
ALERT = "__import__('gsd.integrations.trl_alerts', fromlist=['_']).SilenceAlert"
NS = "__import__('types').SimpleNamespace"
ZSTD = "frac_reward_zero_std"

# (JSON text of a step, valid?): valid steps are integers in [0, 2^63 - 1]
STEPS = [
    ("0", True),
    ("7", True),
    ("9223372036854775807", True),
    ("9223372036854775808", False),
    ("18446744073709551615", False),
    ("1e20", False),
    ("1e300", False),
    ("-5", False),
    ("-1", False),
    ("1.5", False),
    ("2.0", True),
    ("null", False),
    ('"3"', False),
    ("true", False),
    ("[3]", False),
    ("NaN", False),
    ("Infinity", False),
]
# (JSON text of a logged zero-std fraction, is it a number in [0, 1]?)
FRACTIONS = [
    ("0.5", True),
    ("0", True),
    ("1", True),
    ('"0.5"', False),
    ("true", False),
    ("[0.5]", False),
    ('{"v": 0.5}', False),
    ("null", False),
    ("1.5", False),
    ("-0.25", False),
    ("1e308", False),
]
# (JSON text of a count of evicted groups, valid?)
COUNTS = [
    ("0", True),
    ("40", True),
    ("-40", False),
    ("1.5", False),
    ("1e300", True),
    ('"4"', None),
    ("Infinity", False),
]
SECONDS = [
    ("2.5", True),
    ("0", True),
    ('"2.5"', False),
    ("-1", False),
    ("true", False),
    ("[1]", False),
    ("Infinity", False),
]


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def adders(cases: list):
    """``api(expr, expect, check, budget)`` and ``cli(argv, expect, must_name, post, budget)``, each appending
    one case to ``cases`` (the catalogue's two kinds of single call)."""

    def api(expr, expect, check="v >= 0", budget=0):
        cases.append({"kind": "api", "expr": expr, "expect": expect, "check": check, "budget": budget})

    def cli(argv, expect, must_name=None, post=None, budget=0):
        cases.append(
            {"kind": "cli", "argv": argv, "expect": expect, "must_name": must_name, "post": post, "budget": budget}
        )

    return api, cli


def numbers_cases(tmp: Path) -> list:
    d = tmp / "i44"
    d.mkdir(exist_ok=True)
    cases = []
    api, cli = adders(cases)

    # TRL trainer_state.json: the step of a log entry
    for i, (step, ok) in enumerate(STEPS):
        good = '{"step": 1, "frac_reward_zero_std": 0.25, "reward": 0.5}'
        other = f'{{"step": {step}, "frac_reward_zero_std": 0.5, "reward": 0.5}}'
        p = write(d / f"trl_step{i}.json", f'{{"log_history": [{good}, {other}]}}')
        want = "" if not ok else f" & np.isin({json.loads(step)}, v)"
        api(
            f"{SCALARS}.read_scalars({p!r}, fmt='trl').metrics.index.to_numpy()",
            "answer" if ok else "error",
            f"(v >= 0){want}",
        )
        cli(["scalars", "--json", "--format", "trl", p], "answer" if ok else "error", "step")
    # verl file-logger JSONL: the step of a line
    for i, (step, ok) in enumerate(STEPS):
        p = write(
            d / f"verl_step{i}.jsonl",
            f'{{"step": 1, "data": {{"critic/score/mean": 0.5}}}}\n'
            f'{{"step": {step}, "data": {{"critic/score/mean": 0.25}}}}\n',
        )
        api(f"{SCALARS}.read_scalars({p!r}, fmt='verl').metrics.index.to_numpy()", "answer" if ok else "error")
    # TRL's frac_reward_zero_std as logged: a value that is not a number is counted and said
    for i, (value, ok) in enumerate(FRACTIONS):
        entries = [
            f'{{"step": {s}, "frac_reward_zero_std": {value if s == 2 else "0.25"}, "reward": 0.5}}' for s in (1, 2, 3)
        ]
        (d / f"trl_z{i}").mkdir(exist_ok=True)
        p = write(d / f"trl_z{i}" / "trainer_state.json", '{"log_history": [' + ", ".join(entries) + "]}")
        number = value not in ('"0.5"', "true", "[0.5]", '{"v": 0.5}', "null")
        # read: every number kept, every non-number counted in the notes
        counted = f"any('frac_reward_zero_std' in n and 'not a number' in n for n in l.notes) == {not number}"
        api(f"(lambda l: [float({counted})])({SCALARS}.read_scalars({p!r}))", "answer", "v == 1")
        # the diagnosis: a fraction outside [0, 1] refused, a dropped value said, the share in [0, 1]
        expect = "error" if number and not ok else "answer"
        api(f"[{DIAG}.diagnose_scalars({p!r}).summary['silent_share']]", expect, "(v >= 0) & (v <= 1)")
        cli(["scalars", "--json", p], expect, ZSTD)
    # one text cell in a table column: the column stays, the cell is counted
    for i, cell in enumerate(["x", "True", "0.5.1", "-", "?"]):
        p = write(d / f"cell{i}.csv", f"step,{ZSTD},reward\n1,0.5,0.5\n2,{cell},0.5\n3,0.25,0.5\n")
        api(
            f"(lambda l: [l.dropped.get({ZSTD!r}, 0), l.metrics[{ZSTD!r}].notna().sum()])"
            f"({SCALARS}.read_scalars({p!r}))",
            "answer",
            "v == np.array([1, 2])",
        )
    # table step columns
    for i, (step, ok) in enumerate(
        [
            ("1e300", False),
            ("-5", False),
            ("1.5", False),
            ("x", False),
            ("9223372036854775807", True),
            ("9223372036854775808", False),
            ("18446744073709551615", False),
            ("4", True),
        ]
    ):
        p = write(d / f"tstep{i}.csv", f"step,{ZSTD}\n1,0.5\n{step},0.25\n")
        api(f"{SCALARS}.read_scalars({p!r}).metrics.index.to_numpy()", "answer" if ok else "error")
        cli(["scalars", "--json", p], "answer" if ok else "error", "step")
    for i, (dtype, big, ok) in enumerate(
        [
            ("uint64", 2**64 - 1, False),
            ("uint64", 2**63, False),
            ("uint64", 2**63 - 1, True),
            ("int64", -1, False),
            ("float64", 1e19, False),
        ]
    ):
        p = d / f"pstep{i}.parquet"
        expr = (
            f"(pd.DataFrame({{'step': np.array([1, {big!r}], dtype='{dtype}'), {ZSTD!r}: [0.5, 0.25]}})"
            f".to_parquet({str(p)!r}), {SCALARS}.read_scalars({str(p)!r}).metrics.index.to_numpy())[1]"
        )
        api("(lambda pd: " + expr + ")(__import__('pandas'))", "answer" if ok else "error")
    # verl V1's DAPO filter: groups evicted at a step
    key = "training/filter_groups/evicted_samples"
    for i, (count, ok) in enumerate(COUNTS):
        p = write(
            d / f"evicted{i}.jsonl",
            "".join(f'{{"step": {s}, "data": {{"{key}": {count}, "critic/score/mean": 0.5}}}}\n' for s in (1, 2)),
        )
        expect = "either" if ok is None else "answer" if ok else "error"
        api(
            f"[{DIAG}.diagnose_scalars({p!r}, group_size=4, groups=8).summary['silent_share'] or 0]",
            expect,
            "(v >= 0) & (v <= 1)",
        )
        cli(["scalars", "--json", "--group-size", "4", "--groups", "8", p], expect, "evicted")
    # steps that run backwards or negative: the share's weights
    p = write(d / "negative.csv", f"step,{ZSTD}\n-5,0.5\n1,0.5\n2,0.5\n")
    api(f"[{DIAG}.diagnose_scalars({p!r}, group_size=4, groups=8).summary['silent_share']]", "error")
    cli(["scalars", "--json", "--group-size", "4", "--groups", "8", p], "error", "step")
    # timing logs: step_times_from_log
    for i, (sec, ok) in enumerate(SECONDS):
        p = write(
            d / f"time{i}.json",
            f'{{"log_history": [{{"step": 1, "step_time": 1.0}}, {{"step": 2, "step_time": {sec}}}]}}',
        )
        api(f"{ADVICE}.step_times_from_log({p!r}).seconds.to_numpy()", "answer" if ok else "error")
        q = write(d / f"vtime{i}.jsonl", f'{{"step": 1, "data": {{"timing_s/step": {sec}, "timing_s/gen": 1.0}}}}\n')
        api(f"{ADVICE}.step_times_from_log({q!r}).seconds.to_numpy()", "answer" if ok else "error")
    for i, (step, ok) in enumerate(STEPS):
        p = write(d / f"timestep{i}.json", f'{{"log_history": [{{"step": {step}, "step_time": 1.0}}]}}')
        api(f"{ADVICE}.step_times_from_log({p!r}).step.to_numpy()", "answer" if ok else "error")
    # the advice for degenerate populations: refused by name, or a JSON-valid summary
    for ps, ok in (
        ("[0.0, 1.0]", False),
        ("[0.0]", False),
        ("[1.0, 1.0, 1.0]", False),
        ("[0.0, 0.5]", True),
        ("[1e-300, 1.0]", None),  # its progress underflows to 0 at every G in float64: either
        ("[0.5]", True),
    ):
        js = "__import__('json')"
        api(
            f"[{js}.loads({js}.dumps(gsd.group_size_advice({ps}).summary(), allow_nan=False))"
            "['advised_G_per_generation']]",
            "either" if ok is None else "answer" if ok else "error",
            "v >= 2",
        )
        cli(
            ["plan", "--p", ps.strip("[]").replace(" ", ""), "--budget", "64", "--advice"],
            "either" if ok is None else "answer" if ok else "error",
            "silent",
        )
    # SilenceAlert.on_log: whatever TRL hands it, it returns control and never raises
    for value in (
        "None",
        "'0.5'",
        "[0.5]",
        "{'v': 0.5}",
        "True",
        "1.5",
        "-0.1",
        "float('nan')",
        "float('inf')",
        "0.5",
        "2**70",
        "b'0.5'",
    ):
        call = (
            f"(lambda a: [a.on_log({NS}(), {NS}(global_step=1), {NS}(should_training_stop=False), "
            f"logs={{{ZSTD!r}: {value}}}) is not None])({ALERT}(silent=0.9))"
        )
        api(call, "answer", "v == 1", budget=60)
    for logs in ("None", "[1]", "{}", "{'eval_loss': 1.0, 'frac_reward_zero_std': 'x'}"):
        call = (
            f"(lambda a: [a.on_log({NS}(), {NS}(), {NS}(should_training_stop=False), logs={logs}) is not None])"
            f"({ALERT}(silent=0.9))"
        )
        api(call, "answer", "v == 1", budget=60)
    # prompts that UTF-8 cannot hold (a lone surrogate, as JSON's escapes can write one): one prompt each
    for i, text in enumerate(["\\ud800", "\\udc00", "x\\udfff", "\\ud83d\\ude00", "\\u0000"]):
        rows = "".join(f'{{"prompt": "{text}", "step": 0, "reward": {r}}}\n' for r in (0, 1))
        rows += "".join(f'{{"prompt": "b", "step": 0, "reward": {r}}}\n' for r in (1, 1))
        p = write(d / f"surrogate{i}.jsonl", rows)
        post = "(lambda s: s['rows'] == 4 and s['silent_frac'] == 0.5)(json.loads(stdout)['summary'])"
        cli(["diagnose", "--no-progress", "--json", p, "--reward-column", "reward"], "answer", post=post)
    # gsd example-logs: OS errors named with DEST
    (d / "afile").write_text("x")
    for name, expect in (
        ("d" * 255, "answer"),
        ("d" * 256, "error"),
        ("e" * 300, "error"),
        ("afile/sub", "error"),
        ("x" * 200 + "/" + "y" * 255, "answer"),
    ):
        cli(["example-logs", str(d / name)], expect, "cannot write" if expect == "error" else None)
    return cases
