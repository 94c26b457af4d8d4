#!/usr/bin/env bash
# The workbook on a GPU box, measured in one sequential run, with the evidence kept: engine starts
# and decode speed per configuration (scripts/gpu_engine_lab.py), every notebook on the tiny profile
# executed by the workbook's runner (nbclient: a cell error fails the notebook, as under nbval
# --nbval-lax; the executed copy with its outputs is kept), the vLLM-marked tests, notebooks 02 and
# 04 on a shape profile (random weights, no download; $SHAPE, default qwen3-30b-a3b-shape), and the
# MoE step-cost lab on the same shape.
# Per step: wall seconds and the GPU's peak memory (nvidia-smi every 0.5 s). No hub access needed.
# Results go to $LOGS (default build/gpu-check): table.md, summary.txt, one log per step, the
# executed notebooks under tiny/ and shape/, gpu-engine-lab.json, gpu-moe-lab.json.
#   setsid nohup bash scripts/gpu_check.sh &       (detached on a shared box)
#   STEPS="engines nb tests shape lab" (default, in that order)   NOTEBOOKS="06 04" (default all)
#   SHAPE_NOTEBOOKS="02 04"   ENGINE_CONFIGS=a,b (gpu_engine_lab.py names)   LAB_ARGS="--engines 1:1.5"
#   SHAPE=qwen3-235b-a22b-shape (4 GPUs) STEPS="shape lab" SHAPE_NOTEBOOKS=02 LAB_ARGS="--kv-cache-gib 4"
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PY:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
LOGS=${LOGS:-build/gpu-check}
STEPS=${STEPS-engines nb tests shape lab}
SHAPE=${SHAPE:-qwen3-30b-a3b-shape}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
command -v nvidia-smi > /dev/null || { echo "gpu_check: no nvidia-smi here: this script measures a GPU box"; exit 2; }
mkdir -p "$LOGS"
summary="$LOGS/summary.txt"
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown) start $(date +%s)" >> "$summary"
nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader,nounits -lms 500 \
  > "$LOGS/gpumem.csv" 2>/dev/null &
sampler=$!
trap 'kill "$sampler" 2>/dev/null' EXIT
step() {  # step NAME COMMAND...: run, log, and append "NAME rc=N start end" to the summary
  local name=$1; shift
  local start; start=$(date +%s)
  echo "[gpu_check] $name ..."
  "$@" > "$LOGS/$name.log" 2>&1
  local rc=$?
  echo "$name rc=$rc $start $(date +%s)" >> "$summary"
  echo "[gpu_check] $name rc=$rc in $(( $(date +%s) - start )) s"
}
notebooks() {  # notebooks PREFIXES...: the notebook files, every one when no prefix is given
  if [ $# -eq 0 ]; then ls notebooks/*.ipynb; else for n in "$@"; do ls notebooks/"$n"_*.ipynb; done; fi
}
for s in $STEPS; do
  case $s in
    engines) step engines "$PY" scripts/gpu_engine_lab.py --profile-first \
               --out "$LOGS/gpu-engine-lab.json" ${ENGINE_CONFIGS:+--configs "$ENGINE_CONFIGS"} ;;
    nb) for nb in $(notebooks ${NOTEBOOKS:-}); do
          step "tiny-$(basename "$nb" .ipynb)" env WORKBOOK_PROFILE=tiny \
            "$PY" -m helpers.tools.runner "$nb" --build-dir "$LOGS/tiny"
        done ;;
    tests) step vllm-tests env WORKBOOK_PROFILE=tiny \
             "$PY" -m pytest tests -m vllm -p no:cacheprovider -q -rf --durations=10 ;;
    shape) for nb in $(notebooks ${SHAPE_NOTEBOOKS:-02 04}); do
             step "shape-$(basename "$nb" .ipynb)" env WORKBOOK_PROFILE=$SHAPE \
               "$PY" -m helpers.tools.runner "$nb" --build-dir "$LOGS/shape"
           done ;;
    lab) step lab "$PY" scripts/gpu_moe_lab.py --profile "$SHAPE" --out "$LOGS/gpu-moe-lab.json" \
           ${LAB_ARGS:-} ;;
    *) echo "gpu_check: unknown step $s (engines nb tests shape lab)"; exit 2 ;;
  esac
done
kill "$sampler" 2>/dev/null
"$PY" - "$summary" "$LOGS/gpumem.csv" <<'PYEOF' | tee "$LOGS/table.md"
import datetime as dt, sys
mem = []
for line in open(sys.argv[2]):
    try:
        stamp, used = (x.strip() for x in line.split(","))
        mem.append((dt.datetime.strptime(stamp, "%Y/%m/%d %H:%M:%S.%f").timestamp(), int(used)))
    except ValueError:
        continue  # a line cut short when the sampler was stopped
print("| step | rc | seconds | peak GPU memory (GiB) |\n|---|---|---|---|")
for line in open(sys.argv[1]):
    parts = line.split()
    if len(parts) == 4 and parts[1].startswith("rc="):
        start, end = int(parts[2]), int(parts[3])
        peak = max((m for t, m in mem if start <= t <= end + 1), default=0)
        print(f"| {parts[0]} | {parts[1][3:]} | {end - start} | {peak / 1024:.1f} |")
PYEOF
echo "done $(date +%s)" >> "$summary"
