#!/usr/bin/env bash
# GPU check of the simulator, in under 6 minutes: the CUDA path of the paper campaign, the scale
# benchmark (10^6 prompts x G = 64: answers per second with and without the closed forms, which
# run on the device) and many runs as one program, every figure written to one folder.
#
#   bash benchmarks/gpu_check.sh [OUT]          # default OUT: runs/gpu_check
#
# Needs the package installed with a CUDA build of torch (docs/install.md, "GPU"). Without a CUDA device
# it runs a small CPU fallback of the same steps (a check that the script itself works), and
# says so in OUT/figures.txt. Each part has its own time limit, so the whole stays under 6 min.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/gpu_check}
PY=${PY:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
mkdir -p "$OUT"
LOG="$OUT/log.txt"
: > "$LOG"
# The shipped configs and data are gsd._simulations and gsd._data only once the package is installed
# (pip install -e . maps them); a bare checkout on PYTHONPATH finds neither, and every part would fail.
if ! "$PY" -c "import gsd._data, gsd._simulations" 2>>"$LOG"; then
  echo "gpu_check: $PY cannot import gsd's shipped data: install the package first (pip install -e .)" | tee -a "$LOG"
  exit 2
fi

if "$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" 2>>"$LOG"; then
  DEVICE=cuda
  CAMPAIGN_SETS=()
  SCALE=(--prompts 1000000 --group-size 64 --steps 3 --dtype float32)
  MANY=(--seeds 3 --steps 50 --repeats 2)
  nvidia-smi > "$OUT/nvidia_smi.txt" 2>&1 || true
else
  DEVICE=cpu
  echo "gpu_check: no CUDA device, running the small CPU fallback (not a GPU measurement)" | tee -a "$LOG"
  CAMPAIGN_SETS=(--set n_prompts=1000 --set steps=20 --set decile_draws=20)
  SCALE=(--prompts 20000 --group-size 64 --steps 2 --dtype float32)
  MANY=(--seeds 1 --steps 10 --repeats 2)
fi
"$PY" -c "import torch, platform; print('torch', torch.__version__, 'cuda', torch.version.cuda, platform.platform())" >> "$LOG" 2>&1

status=0
# 1. The paper campaign on the device (3 arms x 150 steps x 6,000 prompts, G = 8), whole process.
rm -rf "$OUT/campaign"
start=$(date +%s%N)
timeout 150 "$PY" -m gsd.cli simulate --campaign paper_campaign --out "$OUT/campaign" \
  --device "$DEVICE" --no-progress --json "${CAMPAIGN_SETS[@]}" > "$OUT/campaign.json" 2>> "$LOG" || status=1
end=$(date +%s%N)
echo "campaign_process_ms $(( (end - start) / 1000000 ))" > "$OUT/campaign_time.txt"

# 2. Scale: per-step throughput at 10^6 prompts x G = 64, with and without the per-step closed
#    forms, beside the numpy loop at the same size (benchmarks/bench_simulator.py, part 3).
timeout 150 "$PY" benchmarks/bench_simulator.py --device "$DEVICE" "${SCALE[@]}" --skip-campaign \
  --scaling-prompts "" --out "$OUT/bench_scale.json" > "$OUT/bench_scale.txt" 2>> "$LOG" || status=1

# 3. Many runs as one program: seeds x (GRPO, Dr.GRPO, DAPO) at paper size, batched against one by one
#    (benchmarks/bench_batched.py; on CUDA the ledger's closed forms run on the device).
timeout 120 "$PY" benchmarks/bench_batched.py --device "$DEVICE" --engines torch "${MANY[@]}" --out "$OUT/bench_batched.json" \
  > "$OUT/bench_batched.txt" 2>> "$LOG" || status=1

# 4. The figures, in one file.
"$PY" - "$OUT" "$DEVICE" <<'EOF' >> "$LOG" 2>&1 || status=1
import json, sys
from pathlib import Path
out, device = Path(sys.argv[1]), sys.argv[2]
lines = [f"device: {device}" + ("" if device == "cuda" else " (CPU fallback: small sizes, not a GPU measurement)")]
camp = out / "campaign.json"
if camp.is_file() and camp.stat().st_size:
    s = json.loads(camp.read_text())
    lines.append("campaign silent R2: " + ", ".join(f"{k} {v:.5f}" for k, v in s["silent_r2"].items()))
    lines.append("campaign hardest-quartile final mean p: " + ", ".join(f"{k} {v:.4f}" for k, v in s["hard_quartile_final"].items()))
    lines.append(f"campaign DAPO generations / GRPO: {s['dapo_generation_cost_ratio']:.4f} (closed form {s['dapo_generation_cost_ratio_pred']:.4f})")
    for m in ("grpo", "dr_grpo"):
        lines.append(f"campaign initial deciles {m}: largest share gap {s['decile_measurement'][m]['share_max_abs_diff']:.5f}")
    lines.append((out / "campaign_time.txt").read_text().strip())
else:
    lines.append("campaign: no result (see log.txt)")
bench = out / "bench_scale.json"
if bench.is_file():
    tp = json.loads(bench.read_text())["throughput"]
    lines.append(f"scale {tp['prompts']:,} prompts x G = {tp['group_size']} ({tp['dtype']}), s/step:")
    for key, v in tp.items():
        if isinstance(v, dict):
            lines.append(f"  {key:<38} {v['s_per_step']:.4f} s  {v['answers_per_s']:,.0f} answers/s")
    ref = tp["numpy_ledger"]["s_per_step"]
    for rollouts in ("answers", "counts"):
        lines.append(f"  ratio engine_{rollouts}_with_closed_form / numpy_ledger: {tp[f'engine_{rollouts}_with_closed_form']['s_per_step'] / ref:.2f}")
    # The two answers the check exists for: answers per second with the full ledger and without.
    for rollouts in ("answers", "counts"):
        on, off = (tp[f"engine_{rollouts}_{w}_closed_form"]["answers_per_s"] for w in ("with", "no"))
        lines.append(f"ANSWERS/S {device} {tp['prompts']:,} x {tp['group_size']} rollouts={rollouts}: "
                     f"with the ledger's closed forms {on:,.0f}, without {off:,.0f}")
else:
    lines.append("scale benchmark: no result (see log.txt)")
many = out / "bench_batched.json"
if many.is_file():
    b = json.loads(many.read_text())
    t = b["torch"]
    lines.append(f"many runs (torch engine): {b['runs']} runs x {b['steps']} steps, separate {t['separate_s']:.2f} s, "
                 f"batched {t['batched_s']:.2f} s, speed-up {t['speedup']:.2f}x, identical ledgers {t['identical_runs']}/{b['runs']}")
    for key, what in (("batched_vs_separate", "batched against apart"), ("separate_vs_separate", "apart, twice")):
        if key in t:
            g = t[key]
            lines.append(f"  {what}: largest relative ledger gap {g['max_rel_gap']:.2e} ({g['column']}), "
                         f"first differing step {g['first_step']}")
else:
    lines.append("many runs: no result (see log.txt)")
(out / "figures.txt").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
cat "$OUT/figures.txt" 2>/dev/null
exit $status
