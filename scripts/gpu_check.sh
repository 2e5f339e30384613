#!/usr/bin/env bash
# Every GPU check of the project in one run of at most 8 minutes, ending in one table.
#   bash scripts/gpu_check.sh [WHEEL_DIR] [LOG_DIR]     run it (on a CUDA machine; no network needed)
#   bash scripts/gpu_check.sh --plan                    print the steps, their time limits and what sized them
# Installs every wheel in WHEEL_DIR (e.g. nvidia-cudnn-frontend) into a private folder without the
# network (--no-index), then runs each step under its own time limit, the most telling first: the
# in-process GPU tests, every check on cuDNN (gpu_check.py), the GPU tests that start commands, then
# check, engines, sweep, shrink, repro and rerun on cuDNN, the examples (an example exits 0, or 3 where
# its GPU part could not run), the sweep's speed. A step whose limit would pass the deadline (480 s) is
# not started (said as such). A step past its limit gets SIGINT first (pytest then writes its per-test
# results: LOG_DIR/gpu-tests*.xml, and its -rA summary in the step's log), then SIGKILL 5 s later. Each
# step's output goes to LOG_DIR/STEP.txt; the table to LOG_DIR/table.md, printed at the end whatever the
# steps did.
# Expects python3 with torch (CUDA), CuPy and nvidia-cudnn-cu12/13 already there.
# GPU_CHECK_DEADLINE (seconds) and GPU_CHECK_STEPS (a file of "name|limit|what sized it|command" lines
# run instead of the steps below) are for the test of this script (tests/test_gpu_check_script.py).
set -u -o pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
plan_only=""
[ "${1:-}" = "--plan" ] && { plan_only=1; shift; }
wheels="${1:-$repo/.whl}"
logs="${2:-$repo/gpu-logs}"
py="${PYTHON:-python3}"
deadline="${GPU_CHECK_DEADLINE:-480}"
grace=5  # seconds between a step's SIGINT and its SIGKILL, inside its limit
cd "$repo"

# name | seconds | what the limit comes from | command (run by bash from the repository root, $py and $logs set).
# Measured costs (docs/measurements/gpu_check_costs.md, medians of 3 on a 2-core AMD EPYC without a GPU):
# Python starts in 0.04 s, imports torch in 1.6 s, torch, CuPy and the frontend in 2.4 s, runs `convcheck env`
# in 2.5 s, collects the 122 GPU tests in 7.1 s, a CLI check on the CPU in 1.6 s. On one H200 (2026-11-30,
# docs/measurements/gpu_h200.md, before the compare's compiled kernels were removed): a fresh `convcheck
# check` process 19 s, `lesson` 17 s, a first check in a process 17.5 s and every later one 0.007-0.12 s, 94
# GPU tests in about 200 s. A T4 has about an eighth of an H200's fp32 throughput (8.1 against 67 TFLOPS)
# and a fifteenth of its memory bandwidth (320 GB/s against 4.8 TB/s): the limits below give a step its
# CPU-side cost (process start, imports) plus its GPU work at T4 speed, with room.
examples=""
for f in examples/[0-9]*.py; do examples+=" $(basename "$f" .py)"; done
n_examples=$(echo $examples | wc -w)
steps=(
  "env|15|2.5 s on the CPU (imports), plus CUDA's start and nvidia-smi|\$py -m convcheck env && (nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv || echo \"nvidia-smi: none here\") && \$py -c 'import importlib.util as u; found=[m for m in (\"jax\", \"onnxruntime\", \"openvino\") if u.find_spec(m)]; print(\"runtimes installed:\", found or \"none\")'"
  "GPU tests in this process (pytest -m 'gpu and not cli', 20 s a test)|110|7.1 s to collect; 116 tests (on an H200 94 took about 200 s, most of it the compiled compare since removed: 17.5 s a first check)|CONVCHECK_GPU_TEST_LIMIT=20 \$py -m pytest -m 'gpu and not cli' tests -v -rA -p no:cacheprovider --junitxml \$logs/gpu-tests.xml"
  "every dtype and direction on cuDNN (gpu_check.py)|75|2.4 s of imports; 60 rows, two of them fresh processes (19 s on an H200 before the compare's compile was removed)|\$py scripts/gpu_check.py --out \$logs"
  "GPU tests that start commands (pytest -m 'gpu and cli', 30 s a test)|50|6 tests, each at least one fresh process (2.4 s of imports on the CPU)|CONVCHECK_GPU_TEST_LIMIT=30 \$py -m pytest -m 'gpu and cli' tests -v -rA -p no:cacheprovider --junitxml \$logs/gpu-tests-cli.xml"
  "check lesson on cuDNN|30|two fresh processes: 1.6 s each on the CPU, 19 s and 17 s on an H200|\$py -m convcheck check mb2ic16ih14oc8oh14kh3ph1 --backend cudnn --json --save-lesson \$logs/lesson-cli > \$logs/check.json && \$py -m convcheck lesson \$logs/lesson-cli"
  "engines res2a_branch2b fp16|25|one process; every plan of one layer at batch 8 (83 plan records of two layers took 19 s in one process on an H200)|\$py -m convcheck engines mb8ic64ih56oc64oh56kh3ph1 --dtype fp16"
  "sweep resnet_50 mb8 fp32 and fp16|35|two processes; 20 layers each at batch 8 (0.23 s for 20 at batch 32 on an H200, warm)|\$py -m convcheck sweep --batch cases/benchdnn/shapes_resnet_50 --mb 8 --backend cudnn --out \$logs/sweep.jsonl --quiet && \$py -m convcheck sweep --batch cases/benchdnn/shapes_resnet_50 --mb 8 --dtype fp16 --backend cudnn --out \$logs/sweep16.jsonl --quiet"
  "shrink a planted cuDNN failure|25|two processes; a shrink of at most 40 checks of small problems|\$py -m convcheck sweep mb8ic64ih28oc64oh28kh3ph1 --backend cudnn --plant padding --out \$logs/planted.jsonl --quiet; [ \$? -eq 1 ] && \$py -m convcheck shrink \$logs/planted.jsonl --index 1 --budget 40 --out \$logs/shrunk.jsonl; [ \$? -eq 1 ]"
  "repro of a cuDNN record|20|two processes: convcheck, then the script (torch, CuPy and the frontend: 2.4 s of imports)|\$py -m convcheck repro \$logs/sweep.jsonl --index 1 -o \$logs/repro.py && \$py \$logs/repro.py"
  "rerun of a cuDNN record|20|one process loading CUDA, CuPy and cuDNN (19 s for a first check on an H200 before the compare's compile was removed)|\$py -m convcheck rerun \$logs/sweep.jsonl --index 2"
  "examples:$examples|45|$n_examples processes, 4 at a time: 2.4 s of imports each on the CPU, small problems|printf '%s\\n'$examples | xargs -P 4 -I{} bash -c 'timeout 30 \"\$py\" examples/{}.py > \"\$logs/example_{}.txt\" 2>&1; echo \"example {}: exit \$?\"' | sort | tee \$logs/examples.txt; ! grep -qvE ': exit (0|3)\$' \$logs/examples.txt"
  "sweep speed at batch 8, one configuration (sweep_throughput)|30|resnet_50 at batch 8, fprop fp32, one sweep; its peers (torch fp32 and float64) in one fresh process, each measured once after its first call|\$py benchmarks/sweep_throughput.py --mb 8 --configs fprop:fp32 --repeat 1 --runs 1 --peer-repeat 1 --no-fresh --no-cli"
)
if [ -n "${GPU_CHECK_STEPS:-}" ]; then
  mapfile -t steps < <(grep -v '^\s*\(#\|$\)' "$GPU_CHECK_STEPS")
fi

if [ -n "$plan_only" ]; then
  total=0
  for s in "${steps[@]}"; do
    IFS='|' read -r name limit why _ <<< "$s"
    echo "$limit s  $name  [$why]"
    total=$((total + limit))
  done
  echo "total of the limits: $total s (deadline $deadline s)"
  exit 0
fi

mkdir -p "$logs"
site="$(mktemp -d)"
if compgen -G "$wheels/*.whl" >/dev/null; then
  "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" "$wheels"/*.whl \
    || { echo "gpu_check: installing the wheels in $wheels failed" >&2; exit 2; }
else
  echo "gpu_check: no wheels in $wheels; using what $py already has" >&2
fi
export PYTHONPATH="$site:$repo${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 py logs

start=$SECONDS
status=0
table="| step | result | seconds | last line |\n|---|---|---|---|\n"
for s in "${steps[@]}"; do
  IFS='|' read -r name limit _ cmd <<< "$s"
  file="$logs/$(echo "$name" | tr -c 'A-Za-z0-9_\n-' '_' | cut -c1-80).txt"
  if [ $((SECONDS - start + limit)) -gt "$deadline" ]; then
    table+="| $name | not started: the ${deadline} s deadline | - | - |\n"
    status=1
    continue
  fi
  t0=$SECONDS
  timeout --signal=INT --kill-after="$grace" "$((limit > grace ? limit - grace : 1))" bash -c "$cmd" > "$file" 2>&1
  rc=$?
  case $rc in
    0) result="ok" ;;
    124|137) result="TIMEOUT after ${limit} s"; status=1 ;;
    *) result="FAILED (exit $rc)"; status=1 ;;
  esac
  last="$(grep -v '^\s*$' "$file" | tail -n 1 | cut -c1-140 | tr '|' '/')"
  table+="| $name | $result | $((SECONDS - t0)) | $last |\n"
  echo "gpu_check: $name: $result ($((SECONDS - t0)) s)" >&2
done
printf "%b" "$table" | tee "$logs/table.md"
echo "gpu_check: $((SECONDS - start)) s in all; logs in $logs"
exit $status
