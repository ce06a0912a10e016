"""Issue 44's newest surfaces for ``bad_inputs.py``: the gradient noise scale (from norms, from two
logs), the batch advice, ``--noise-scale`` and ``--run-lr`` of ``gsd plan --advice`` / ``gsd diagnose``
/ ``gsd scalars``, the forgetting discount, the live noise-scale recorder, and ``gsd count``'s
``--shards`` and folders.  Each case names what it expects (``error``: refused with gsd's input error;
``answer``: a result its check accepts; ``either``); files are written into ``tmp`` here, the calls
run in ``bad_inputs.py``'s worker.  ``python benchmarks/bad_inputs.py --only advice``.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

from bad_inputs_numbers import adders, write

from gsd.cli import main

NS = "__import__('gsd.core.noise_scale', fromlist=['_'])"
ADV = "__import__('gsd.core.advice', fromlist=['_'])"
FORGET = "__import__('gsd.core.forgetting', fromlist=['_'])"

# squared norms per step (small, big) and whether a noise scale follows from them
NORMS = [
    ("[5.0, 5.0]", "[3.0, 3.0]", "answer"),
    ("[5.0]", "[3.0]", "answer"),  # one step: the estimate, no interval (NaN standard errors)
    ("[float('nan'), 5.0]", "[3.0, 3.0]", "error"),
    ("[float('inf'), 5.0]", "[3.0, 3.0]", "error"),
    ("[5.0, 5.0]", "[-3.0, 3.0]", "error"),
    ("[]", "[]", "error"),
    ("[5.0, 5.0]", "[3.0]", "error"),
    ("['a', 'b']", "[3.0, 3.0]", "error"),
    ("[True, True]", "[3.0, 3.0]", "error"),
    ("None", "[3.0]", "error"),
    ("{'a': 1}", "[3.0]", "error"),
    ("[[5.0, 5.0]]", "[[3.0, 3.0]]", "answer"),
    ("[1e308, 1e308]", "[6e307, 6e307]", "answer"),  # representable norms whose b·norm overflows
    ("[1e-310, 1e-310]", "[6e-311, 6e-311]", "answer"),  # subnormal squared norms
    ("[5e307, 5e307]", "[1e308, 1e308]", "answer"),  # ‖G‖² > 0, tr Σ < 0: B_noise 0 or below, said
]
# (b_small, b_big) and whether they are two batch sizes with b_small < b_big
BATCHES = [
    ("2", "4", "answer"),
    ("4", "4", "error"),
    ("8", "4", "error"),
    ("0", "4", "error"),
    ("-2", "4", "error"),
    ("float('nan')", "4", "error"),
    ("2", "float('inf')", "error"),
    ("True", "4", "error"),
    ("'2'", "4", "error"),
    ("2", "2**60", "error"),
    ("2", "4.0", "answer"),
    ("1", "2**53 - 1", "answer"),
]
LEVELS = [
    ("0.9", "answer"),
    ("0", "error"),
    ("1", "error"),
    ("float('nan')", "error"),
    ("True", "error"),
    ("'0.9'", "error"),
]

# a trainer_state.json's log_history entries: (grad_norm, step) texts, as JSON
GRAD_LOGS = [
    ("1.5", "1", "answer"),
    ("NaN", "2", "error"),
    ("Infinity", "2", "error"),
    ("-2.0", "2", "error"),  # a norm is never negative: its square would hide the sign
    ('"x"', "2", "error"),
    ("true", "2", "error"),
    ("[1.0]", "2", "error"),
    ("1e200", "2", "answer"),  # a norm whose square overflows float64
    ("1.5", '"x"', "error"),
    ("1.5", "1.5", "error"),
    ("1.5", "NaN", "error"),
    ("1.5", "-3", "error"),
    ("1.5", "1e300", "error"),
    ("1.5", "null", "error"),
]

# (p, noise, generations_per_step, group_size, lr): batch_advice's arguments and what they should give
BATCH_ADVICE = [
    ("[0.2, 0.5, 0.7]", "(100.0, 50.0, 200.0)", "64", "8", "1e-6", "answer"),
    ("[0.0, 1.0]", "(100.0, 50.0, 200.0)", "64", "8", "1e-6", "error"),  # every prompt silent for sure
    ("[]", "(100.0, 50.0, 200.0)", "64", "8", "1e-6", "error"),
    ("[float('nan')]", "(100.0, 50.0, 200.0)", "64", "8", "1e-6", "error"),
    ("[1.5]", "(100.0, 50.0, 200.0)", "64", "8", "1e-6", "error"),
    ("[-0.1, 0.5]", "(100.0, 50.0, 200.0)", "64", "8", "1e-6", "error"),
    ("['a']", "(100.0, 50.0, 200.0)", "64", "8", "1e-6", "error"),
    ("[1e-300, 0.5]", "(100.0, 50.0, 200.0)", "64", "8", "1e-6", "answer"),
    ("[0.5]", "(0.0, 0.0, 0.0)", "64", "8", "1e-6", "error"),
    ("[0.5]", "(-5.0, 0.0, 1.0)", "64", "8", "1e-6", "error"),
    ("[0.5]", "(float('inf'), 1.0, float('inf'))", "64", "8", "1e-6", "error"),
    ("[0.5]", "(float('nan'), 1.0, 2.0)", "64", "8", "1e-6", "error"),
    ("[0.5]", "(100.0, 200.0, 50.0)", "64", "8", "1e-6", "error"),
    ("[0.5]", "(100.0, 50.0, float('nan'))", "64", "8", "1e-6", "error"),
    ("[0.5]", "(100.0, 50.0, float('inf'))", "64", "8", "1e-6", "answer"),  # ‖G‖² not resolved: no upper end
    ("[0.5]", "(1e308, 1e308, 1e308)", "64", "8", "1e-6", "error"),  # a B beyond any count of generations
    ("[0.5]", "(1e20, 1e20, 1e20)", "64", "8", "1e-6", "error"),
    ("[0.5]", "(1e-300, 1e-300, 1e-300)", "64", "8", "1e-6", "answer"),
    ("[0.5]", "'abc'", "64", "8", "1e-6", "error"),
    ("[0.5]", "5.0", "64", "8", "1e-6", "error"),
    ("[0.5]", "(1.0, 2.0)", "64", "8", "1e-6", "error"),
    ("[0.5]", "(100.0, 50.0, 200.0)", "0", "8", "1e-6", "error"),
    ("[0.5]", "(100.0, 50.0, 200.0)", "-64", "8", "1e-6", "error"),
    ("[0.5]", "(100.0, 50.0, 200.0)", "2**60", "8", "1e-6", "error"),
    ("[0.5]", "(100.0, 50.0, 200.0)", "64.5", "8", "1e-6", "error"),
    ("[0.5]", "(100.0, 50.0, 200.0)", "True", "8", "1e-6", "error"),
    ("[0.5]", "(100.0, 50.0, 200.0)", "64", "0", "1e-6", "error"),
    ("[0.5]", "(100.0, 50.0, 200.0)", "64", "1", "1e-6", "error"),
    ("[0.5]", "(100.0, 50.0, 200.0)", "64", "10**12", "1e-6", "error"),
    ("[0.5]", "(100.0, 50.0, 200.0)", "64", "8", "0", "error"),
    ("[0.5]", "(100.0, 50.0, 200.0)", "64", "8", "-1e-6", "error"),
    ("[0.5]", "(100.0, 50.0, 200.0)", "64", "8", "float('inf')", "error"),
    ("[0.5]", "(100.0, 50.0, 200.0)", "64", "8", "float('nan')", "error"),
    ("[0.5]", "(100.0, 50.0, 200.0)", "64", "8", "True", "error"),
    ("[0.5]", "(100.0, 50.0, 200.0)", "64", "8", "'1e-6'", "error"),
    ("[0.5]", "(2e6, 2e6, 2e6)", "2", "2", "1e308", "error"),  # lr·√(B/B_run) beyond float64
    ("[0.5]", "(100.0, 50.0, 200.0)", "64", "8", "None", "answer"),
]
FIELDS = "[a.G, a.B_per_generation, a.b_noise, *(a.B_per_generation_interval)]"

# --noise-scale and --run-lr as typed, and whether they are valid
NOISE_TEXT = [
    ("100", "answer"),
    ("100,50,200", "answer"),
    ("100,50,inf", "answer"),  # the interval noise_scale_from_norms gives where ‖G‖² is not resolved
    ("abc", "error"),
    ("inf", "error"),
    ("nan", "error"),
    ("-5", "error"),
    ("0", "error"),
    ("1e308", "error"),
    ("1e400", "error"),
    ("100,200,50", "error"),
    ("100,50", "error"),
    ("100,nan,200", "error"),
]
LR_TEXT = [
    ("1e-6", "answer"),
    ("abc", "error"),
    ("inf", "error"),
    ("nan", "error"),
    ("-1e-6", "error"),
    ("0", "error"),
    ("1e308", "error"),
    ("1e400", "error"),
]

# as_half_life's argument and whether it is a half-life
HALF = [
    ("8", "answer"),
    ("0.5", "answer"),
    ("1e308", "answer"),
    ("5e-324", "answer"),
    ("float('nan')", "error"),
    ("float('inf')", "error"),
    ("-float('inf')", "error"),
    ("0", "error"),
    ("-1", "error"),
    ("True", "error"),
    ("'8'", "error"),
    ("'auto'", "error"),  # without auto=True
    ("[8]", "error"),
    ("complex(8, 0)", "error"),
    ("__import__('numpy').float64('nan')", "error"),
]
# decay's ages (with half-life 2) and whether they are ages
AGES = [
    ("[0, 1, 2]", "answer"),
    ("[2**63 - 1]", "answer"),
    ("[float('inf')]", "answer"),  # infinitely old weighs 0
    ("[-1]", "error"),  # a count from the future would weigh more than a fresh one
    ("[float('nan')]", "error"),
    ("['a']", "error"),
    ("[True, False]", "error"),
    ("[-float('inf')]", "error"),
    ("[None]", "error"),
]


# the live recorder fed 3 steps of M micro-batches whose gradients are ``grads`` (of step i, micro-batch k;
# None: no gradient); v: steps recorded, clipped, and the recorded squared norms (finite, >= 0)
RECORD = """
import torch
from types import SimpleNamespace as S
from gsd.live.noise_scale import _Recorder
m, r = torch.nn.Linear(3, 2), _Recorder()
args = S(gradient_accumulation_steps={M}, per_device_train_batch_size=4, max_grad_norm={clip})
for i in range(3):
    for p in m.parameters():
        p.grad = None
    r.begin()
    for k in range({M}):
        for p, g in zip(m.parameters(), {grads}):
            if g is not None:
                p.grad = g if p.grad is None else p.grad + g
        r.substep(m) if k < {M} - 1 else r.finish(args, S(global_step=i), m)
v = [len(r.big_sq), r.clipped, *r.big_sq, *r.small_sq]
"""
ONES = "torch.ones"
RECORDER = [
    (f"[{ONES}(2, 3) * (i + k + 1), {ONES}(2) * (k + 1)]", 2, 0),
    (f"[{ONES}(2, 3) * float('nan'), {ONES}(2)]", 2, 0),  # NaN steps left out, counted
    ("[None, None]", 2, 0),  # no gradients at all
    (f"[{ONES}(2, 3), {ONES}(2)]", 1, 0),  # M = 1: nothing to record
    (f"[{ONES}(2, 3) * 100, {ONES}(2)]", 2, 1.0),  # every step clipped
    (f"[{ONES}(2, 3) * (k + 1), None if k == 0 else {ONES}(2)]", 2, 0),  # a gradient born late
    (f"[{ONES}(2, 3) * (k + 1), {ONES}(2) if k == 0 else None]", 3, 0),  # a gradient that stops
]


def advice_cases(tmp: Path) -> list:
    d = tmp / "i44b"
    d.mkdir(exist_ok=True)
    cases = []
    api, cli = adders(cases)

    # noise_scale_from_norms: the estimate finite or +inf (‖G‖² not resolved), never NaN
    ok_ns = "~np.isnan(v[:1]) & (v[1:2] >= 0) | (v[1:2] <= 0)"
    fields = "[n.b_noise, n.gradient_sq, n.trace]"
    for small, big, expect in NORMS:
        api(f"(lambda n: {fields})({NS}.noise_scale_from_norms({small}, {big}, 2, 4))", expect, ok_ns)
    # exactness where b·norm overflows: ‖G‖² = (4·big − 2·small)/2, tr Σ = (small − big)/(1/2 − 1/4)
    api(
        f"(lambda n: [n.gradient_sq / 2e307 - 1, n.trace / 1.6e308 - 1])"
        f"({NS}.noise_scale_from_norms([1e308, 1e308], [6e307, 6e307], 2, 4))",
        "answer",
        "np.abs(v) < 1e-12",
    )
    for bs, bb, expect in BATCHES:
        api(f"(lambda n: {fields})({NS}.noise_scale_from_norms([5.0, 6.0], [3.0, 3.5], {bs}, {bb}))", expect, ok_ns)
    for level, expect in LEVELS:
        api(
            f"(lambda n: [n.b_noise_lo, n.b_noise_hi])"
            f"({NS}.noise_scale_from_norms([5.0, 6.0], [3.0, 3.5], 2, 4, level={level}))",
            expect,
        )
    # grad_norms_from_log / noise_scale_from_logs on TRL trainer_state.json files
    good = write(
        d / "good.json",
        json.dumps({"log_history": [{"step": s, "grad_norm": 2.0 + 0.1 * s} for s in (1, 2, 3)]}),
    )
    for i, (norm, step, expect) in enumerate(GRAD_LOGS):
        p = write(
            d / f"grad{i}.json",
            '{"log_history": [{"step": 1, "grad_norm": 1.0}, ' + f'{{"step": {step}, "grad_norm": {norm}}}]}}',
        )
        api(f"{NS}.grad_norms_from_log({p!r})", expect, "np.isfinite(v) & (v >= 0)")
        api(
            f"(lambda n: [n.b_noise, n.gradient_sq])({NS}.noise_scale_from_logs({p!r}, {good!r}, 2, 4))",
            expect,
            "~np.isnan(v)",
        )
    for i, text in enumerate(['{"log_history": 5}', '{"log_history": [5, "x"]}', "[1, 2]", "not json", "", "\x00"]):
        p = write(d / f"state{i}.json", text)
        api(f"{NS}.grad_norms_from_log({p!r})", "error")
    (d / "empty_dir").mkdir(exist_ok=True)
    for path in (str(d / "empty_dir"), str(d / "missing.json"), str(d)):
        api(f"{NS}.grad_norms_from_log({path!r})", "error")
    for first in ("1", "0", "True", "2.5", "10**30"):
        expect = "answer" if first == "10**30" else "error"
        api(f"[{NS}.noise_scale_from_logs({good!r}, {good!r}, 2, 4, first_steps={first}).steps]", expect)
    one = write(d / "one.json", '{"log_history": [{"step": 1, "grad_norm": 1.0}]}')
    api(f"[{NS}.noise_scale_from_logs({one!r}, {good!r}, 2, 4).steps]", "error")
    api(f"[{NS}.noise_scale_from_logs({good!r}, {good!r}, 4, 2).steps]", "error")
    # batch_advice and BatchAdvice.summary (JSON without NaN)
    js = "__import__('json')"
    for p, noise, B, G, lr, expect in BATCH_ADVICE:
        call = f"{ADV}.batch_advice({p}, {noise}, generations_per_step={B}, group_size={G}, lr={lr})"
        api(f"(lambda a: {FIELDS})({call})", expect, "(v >= 0) & ~np.isnan(v)")
        if expect == "answer":
            api(f"[len({js}.dumps({call}.summary(), allow_nan=True)) > 0]", "answer", "v == 1")
    api(
        f"(lambda n: (lambda a: [a.B_per_generation, a.G])({ADV}.batch_advice([0.2, 0.5], n, "
        "generations_per_step=4, group_size=2)))"
        f"({NS}.noise_scale_from_norms([5.0, 6.0], [3.0, 3.5], 2, 4))",
        "answer",
        "v >= 2",
    )
    for cost in ("'x'", "(1.0, 0.0, 0.1)", f"{ADV}.StepCost(1.0, 0.0, 0.1)"):
        expect = "answer" if "StepCost" in cost else "error"
        api(
            f"(lambda a: [a.B_per_second])({ADV}.batch_advice([0.5], (100.0, 50.0, 200.0), "
            f"generations_per_step=64, group_size=8, cost={cost}))",
            expect,
            "v >= 1",
        )
    # the CLI: gsd plan --advice, gsd diagnose, gsd scalars with --noise-scale / --run-lr
    trl = d / "example"  # gsd example-logs' TRL run (its group size known: --noise-scale needs it)
    with contextlib.redirect_stdout(io.StringIO()):
        main(["example-logs", str(trl)])
    scalars = write(d / "scalars.csv", "step,frac_reward_zero_std\n1,0.5\n2,0.25\n")
    plan = ["plan", "--p", "0.2,0.5,0.7", "--budget", "64", "--advice"]
    diag = ["diagnose", "--no-progress", "--json", str(trl / "trl")]
    for text, expect in NOISE_TEXT:
        cli([*plan, f"--noise-scale={text}"], expect, "noise-scale")
        cli([*diag, f"--noise-scale={text}"], expect, "noise-scale")
    for text, expect in LR_TEXT:
        cli([*plan, "--noise-scale", "100", f"--run-lr={text}"], expect, "run-lr")
        cli([*diag, "--noise-scale", "100", f"--run-lr={text}"], expect, "run-lr")
    for opt in ("--noise-scale=100", "--run-lr=1e-6"):  # gsd scalars has no batch advice: refused by name
        cli(["scalars", "--json", scalars, opt], "error", opt.split("=")[0])
    # forgetting
    for h, expect in HALF:
        api(f"[{FORGET}.as_half_life({h})]", expect, "v > 0")
    api(f"[{FORGET}.as_half_life('auto', auto=True) == 'auto']", "answer", "v == 1")
    for ages, expect in AGES:
        api(f"{FORGET}.decay({ages}, 2.0)", expect, "(v >= 0) & (v <= 1)")
    for h in ("0", "float('nan')", "'x'"):
        api(f"{FORGET}.decay([0, 1], {h})", "error")
    api(f"{FORGET}.decay([0, 1], None)", "answer", "v == 1")
    api(f"{FORGET}.decay([0, 10**6], 5e-324)", "answer", "(v >= 0) & (v <= 1)")
    # the live recorder: NaN gradients, a model without gradients, M = 1, clipped steps, a parameter
    # whose gradient appears only in a later micro-batch; every hook returns, nothing raises
    for grads, M, clip in RECORDER:
        code = RECORD.format(grads=grads, M=M, clip=clip)
        api(f"(lambda ns: (exec({code!r}, ns), ns['v'])[1])({{}})", "answer", "np.isfinite(v) & (v >= 0)")
    # gsd count: --shards and folders
    counts_dir = d / "count_logs"
    counts_dir.mkdir(exist_ok=True)
    (counts_dir / "r.jsonl").write_text(
        "".join(
            json.dumps({"prompt": f"q{i}", "step": s, "reward": float((i + s + k) % 3 == 0)}) + "\n"
            for s in range(2)
            for i in range(4)
            for k in range(4)
        )
    )
    count = ["count", "--no-progress", "--json", "--reward-column", "reward"]
    for shards in ("0", "-1", "abc", "1e10", "4097", "nan", "1.5", "99999999999999999999"):
        cli([*count, "--shards", shards, str(counts_dir)], "error", "shards")
    (d / "count_empty").mkdir(exist_ok=True)
    (d / "count_junk").mkdir(exist_ok=True)
    (d / "count_junk" / "a.jsonl").write_bytes(b"\x00\x01\x02 not json")
    (d / "count_junk" / "b.jsonl").write_text("{not json\n")
    for folder in (str(d / "count_empty"), str(d / "count_missing"), str(d / "count_junk"), str(d / "afile.txt")):
        cli([*count, folder], "error")
    (d / "afile.txt").write_text("hello\n")
    cli([*count, str(counts_dir)], "answer")
    return cases
