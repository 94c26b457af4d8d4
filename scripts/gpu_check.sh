#!/usr/bin/env bash
# The workbook on a GPU box, measured, with the evidence kept. Steps (each timed, each with its log):
#   engines   engine starts and decode speed per configuration (scripts/gpu_engine_lab.py)
#   nb        every notebook on the tiny profile under nbval (`pytest --nbval-lax`, as make test
#             runs them), each executed once: kit.nbval_keep keeps that execution
#   nb-NN     notebook NN alone, the same way (kept in tiny-NN/): to spread the notebooks over lanes
#   tests     the vLLM-marked tests (pytest -m vllm)
#   shape-NN  notebook NN on a shape profile under nbval ($SHAPE, default qwen3-30b-a3b-shape)
#   NAME      a step a chapter adds: its chapter.json's gpu_steps (`python -m kit.chapters
#             gpu-steps` lists them), a bash command run with $PY, $SHAPE and $LOGS set, e.g.
#             lab      the MoE step-cost lab on the shape ($LAB_ARGS); with LAB_INSTALL=1 its
#                      record replaces the lane's data/measurements/gpu-moe-lab.json, so that the
#                      lane's later steps read it: LANES="lab nb-06 nb-02" LAB_INSTALL=1
#             harness-shape  the acceptance harness on the shape profile ($HARNESS_LIMIT)
#             speculators    05's trainer beside speculators' own, tau side by side (speculators/)
# LANES lists the steps: '|' separates lanes that run at the same time, each in its own copy of
# the checkout (its own build/: servers, logs, figures), steps inside a lane one after another.
#   LANES="engines nb | tests | shape-02 shape-04" (the default)   LANES="nb" (one lane)
# Per step and per notebook: seconds, the GPU's peak memory in that time (nvidia-smi every 0.5 s;
# with several lanes it is the whole GPU's, every lane together) and the model runner of every
# engine started (build/logs/engine-starts.jsonl of the lane). Results go to $LOGS (default
# build/gpu-check): table.md, summary.txt, one log per step, tiny/ and shape-NN/ (the executed
# notebooks and nbval-times.json), gpu-engine-lab.json, gpu-moe-lab.json, lane-N-engine-starts.jsonl.
# On the H200 test machine, first install the stack (scripts/gpu_stack/) and source its env.sh.
#   setsid nohup bash scripts/gpu_check.sh > build/gpu-check.out 2>&1 &     (detached)
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
PY=${PY:-$([ -x .venv/bin/python ] && echo "$ROOT/.venv/bin/python" || echo python3)}
LOGS=$(mkdir -p "${LOGS:-build/gpu-check}" && cd "${LOGS:-build/gpu-check}" && pwd)
LANES=${LANES-engines nb | tests | shape-02 shape-04}
SHAPE=${SHAPE:-qwen3-30b-a3b-shape}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
command -v nvidia-smi > /dev/null || { echo "gpu_check: no nvidia-smi here: this script measures a GPU box"; exit 2; }
summary="$LOGS/summary.txt"
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown) start $(date +%s) lanes $LANES" >> "$summary"
nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader,nounits -lms 500 \
  > "$LOGS/gpumem.csv" 2>/dev/null &
sampler=$!
trap 'kill "$sampler" 2>/dev/null' EXIT

nbval() {  # nbval PROFILE KEEP_DIR NOTEBOOK...: nbval over the notebooks, keeping what it executed
  local profile=$1 keep=$2; shift 2
  env WORKBOOK_PROFILE="$profile" "$PY" -m pytest --nbval-lax --nbval-current-env "$@" \
    -p kit.nbval_keep --nbval-keep "$keep" -p no:cacheprovider -q -rf
}
run_step() {  # run_step STEP: the step's command, in the current lane's checkout
  case $1 in
    engines) "$PY" scripts/gpu_engine_lab.py --out "$LOGS/gpu-engine-lab.json" \
               ${ENGINE_CONFIGS:+--configs "$ENGINE_CONFIGS"} ;;
    nb) nbval tiny "$LOGS/tiny" notebooks/*.ipynb ;;
    nb-*) nbval tiny "$LOGS/tiny-${1#nb-}" notebooks/"${1#nb-}"_*.ipynb ;;
    tests) env WORKBOOK_PROFILE=tiny "$PY" -m pytest tests src/chapters -m vllm -p no:cacheprovider -q -rf \
             --durations=10 ;;
    shape-*) nbval "$SHAPE" "$LOGS/$1" notebooks/"${1#shape-}"_*.ipynb ;;
    *) local command  # a chapter's step (kit.chapters names the known ones when there is none)
       command=$("$PY" -m kit.chapters gpu-step "$1") \
         || { echo "gpu_check: unknown step $1 (engines nb nb-NN tests shape-NN, or ${command#kit.chapters: })"; return 2; }
       PY="$PY" SHAPE="$SHAPE" LOGS="$LOGS" bash -c "$command" ;;
  esac
}
lane() {  # lane N STEP...: the steps one after another in a copy of the checkout of their own
  local n=$1; shift
  local copy=/tmp/gpu-lane-$n
  rm -rf "$copy" && mkdir -p "$copy"
  tar -C "$ROOT" --exclude=./.gpu --exclude=./.venv --exclude=./build/gpu-check -cf - . \
    | tar -C "$copy" -xf -
  rm -f "$copy/build/logs/engine-starts.jsonl"
  cd "$copy" || return 2
  export PYTHONPATH="$copy/src${PYTHONPATH:+:$PYTHONPATH}"
  for s in "$@"; do
    local start; start=$(date +%s)
    echo "[gpu_check] lane $n: $s ..."
    run_step "$s" > "$LOGS/$s.log" 2>&1
    local rc=$?
    echo "$s rc=$rc $start $(date +%s) lane=$n" >> "$summary"
    echo "[gpu_check] lane $n: $s rc=$rc in $(( $(date +%s) - start )) s"
    cp -f build/logs/engine-starts.jsonl "$LOGS/lane-$n-engine-starts.jsonl" 2>/dev/null
  done
}
n=0
IFS='|' read -ra lanes <<< "$LANES"
for steps in "${lanes[@]}"; do
  n=$((n + 1))
  # shellcheck disable=SC2086  # a lane's steps are words
  (lane "$n" $steps) &
done
wait $(jobs -p | grep -v "^$sampler$")
kill "$sampler" 2>/dev/null
"$PY" scripts/gpu_check_table.py "$LOGS" | tee "$LOGS/table.md"
echo "done $(date +%s)" >> "$summary"
