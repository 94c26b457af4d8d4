#!/usr/bin/env bash
# The workbook on a GPU box, measured: every notebook under nbval ($WORKBOOK_PROFILE: tiny, or
# qwen3-30b-a3b-shape), the vLLM-marked tests, and the MoE step-cost lab on the Qwen3-30B-A3B shape
# (dummy weights), with per-notebook wall time and peak GPU memory. No hub access needed. Logs and
# results go to $LOGS (default build/gpu-check); run it detached on a shared box:
#   setsid nohup bash scripts/gpu_check.sh &
#   STEPS="nb tests lab" (default all three, in that order)   LAB_ENGINES="1:1.5,3:2.5" (default all)
#   NOTEBOOKS="06 04" (notebook number prefixes in the order to run; default every notebook)
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PY:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
LOGS=${LOGS:-build/gpu-check}
STEPS=${STEPS-nb tests lab}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
export WORKBOOK_PROFILE=${WORKBOOK_PROFILE:-tiny}  # or qwen3-30b-a3b-shape: no hub either
command -v nvidia-smi > /dev/null || { echo "gpu_check: no nvidia-smi here: this script measures a GPU box"; exit 2; }
mkdir -p "$LOGS"
: > "$LOGS/gpumem.csv"
summary="$LOGS/summary.txt"
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown) profile $WORKBOOK_PROFILE start $(date +%s)" >> "$summary"
nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader,nounits -lms 500 \
  > "$LOGS/gpumem.csv" 2>/dev/null &
sampler=$!
step() {  # step NAME COMMAND...: run, log, and append "NAME rc=N start end" to the summary
  local name=$1; shift
  local start; start=$(date +%s)
  "$@" > "$LOGS/$name.log" 2>&1
  echo "$name rc=$? $start $(date +%s)" >> "$summary"
}
for s in $STEPS; do
  case $s in
    nb) if [ -n "${NOTEBOOKS:-}" ]; then nbs=(); for n in $NOTEBOOKS; do nbs+=(notebooks/"$n"_*.ipynb); done
        else nbs=(notebooks/*.ipynb); fi
        for nb in "${nbs[@]}"; do
          step "$(basename "$nb" .ipynb)" "$PY" -m pytest --nbval-lax --nbval-current-env "$nb" \
            -p no:cacheprovider -q --durations=8
        done ;;
    tests) step vllm-tests "$PY" -m pytest tests -m vllm -p no:cacheprovider -q -rf --durations=10 ;;
    lab) step lab "$PY" scripts/gpu_moe_lab.py --out "$LOGS/gpu-moe-lab.json" \
           ${LAB_ENGINES:+--engines "$LAB_ENGINES"} ;;
  esac
done
kill "$sampler" 2>/dev/null
"$PY" - "$summary" "$LOGS/gpumem.csv" <<'PYEOF' | tee "$LOGS/table.md"
import datetime as dt, sys
mem = []
for line in open(sys.argv[2]):
    stamp, used = (x.strip() for x in line.split(","))
    t = dt.datetime.strptime(stamp, "%Y/%m/%d %H:%M:%S.%f").timestamp()
    mem.append((t, int(used)))
print("| step | rc | seconds | peak GPU memory (MiB) |\n|---|---|---|---|")
for line in open(sys.argv[1]):
    parts = line.split()
    if len(parts) == 4 and parts[1].startswith("rc="):
        start, end = int(parts[2]), int(parts[3])
        peak = max((m for t, m in mem if start <= t <= end), default=0)
        print(f"| {parts[0]} | {parts[1][3:]} | {end - start} | {peak} |")
PYEOF
echo "done $(date +%s)" >> "$summary"
