#!/usr/bin/env bash
# Every GPU check of the project in one run of at most 10 minutes, ending in one table.
#   bash scripts/gpu_check.sh [WHEEL_DIR] [LOG_DIR]     run it (on a CUDA machine; no network needed)
#   bash scripts/gpu_check.sh --plan                    print the steps and their time limits, run nothing
# Installs every wheel in WHEEL_DIR (e.g. nvidia-cudnn-frontend) into a private folder without the
# network (--no-index), then runs each step under its own time limit: the GPU tests, every check on
# cuDNN (gpu_check.py), check, engines, sweep, shrink, repro and rerun on cuDNN, the examples (an
# example exits 0, or 3 where its GPU part could not run), the sweep's speed. A step whose limit would
# pass the 570 s deadline is not started (said as such). Each step's output goes to LOG_DIR/STEP.txt;
# the table to LOG_DIR/table.md, printed at the end whatever the steps did.
# Expects python3 with torch (CUDA), CuPy and nvidia-cudnn-cu12/13 already there.
set -u -o pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
plan_only=""
[ "${1:-}" = "--plan" ] && { plan_only=1; shift; }
wheels="${1:-$repo/.whl}"
logs="${2:-$repo/gpu-logs}"
py="${PYTHON:-python3}"
deadline="${GPU_CHECK_DEADLINE:-570}"  # seconds; a shorter one for the test of this script (tests/test_gpu_check_script.py)
cd "$repo"

# name | seconds | command (run by bash from the repository root, $py and $logs set). The most telling steps
# first: the GPU tests (each test under its own limit, none stopping the others), then every check on cuDNN
# (gpu_check.py, which prints each row as it ends and its table whatever happens), then the commands.
# The limits add up to the deadline; a step that would pass it is not started, and the table says so.
examples=""
for f in examples/[0-9]*.py; do examples+=" $(basename "$f" .py)"; done
steps=(
  "env|15|\$py -m convcheck env && (nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv || echo \"nvidia-smi: none here\") && \$py -c 'import importlib.util as u; found=[m for m in (\"jax\", \"onnxruntime\", \"openvino\") if u.find_spec(m)]; print(\"runtimes installed:\", found or \"none\")'"
  "GPU tests (pytest -m gpu, 30 s a test)|150|CONVCHECK_GPU_TEST_LIMIT=30 \$py -m pytest -m gpu tests -q -p no:cacheprovider"
  "every dtype and direction on cuDNN (gpu_check.py)|110|\$py scripts/gpu_check.py --out \$logs"
  "check lesson on cuDNN|30|\$py -m convcheck check mb2ic16ih14oc8oh14kh3ph1 --backend cudnn --json --save-lesson \$logs/lesson > \$logs/check.json && \$py -m convcheck lesson \$logs/lesson"
  "engines res2a_branch2b fp16|35|\$py -m convcheck engines mb8ic64ih56oc64oh56kh3ph1 --dtype fp16"
  "sweep resnet_50 mb8 fp32 and fp16|45|\$py -m convcheck sweep --batch cases/benchdnn/shapes_resnet_50 --mb 8 --backend cudnn --out \$logs/sweep.jsonl --quiet && \$py -m convcheck sweep --batch cases/benchdnn/shapes_resnet_50 --mb 8 --dtype fp16 --backend cudnn --out \$logs/sweep16.jsonl --quiet"
  "shrink a planted cuDNN failure|35|\$py -m convcheck sweep mb8ic64ih28oc64oh28kh3ph1 --backend cudnn --plant padding --out \$logs/planted.jsonl --quiet; [ \$? -eq 1 ] && \$py -m convcheck shrink \$logs/planted.jsonl --index 1 --budget 40 --out \$logs/shrunk.jsonl; [ \$? -eq 1 ]"
  "repro of a cuDNN record|25|\$py -m convcheck repro \$logs/sweep.jsonl --index 1 -o \$logs/repro.py && \$py \$logs/repro.py"
  "rerun of a cuDNN record|10|\$py -m convcheck rerun \$logs/sweep.jsonl --index 2"
  "examples:$examples|75|rc=0; for e in$examples; do timeout 20 \$py examples/\$e.py > \$logs/example_\$e.txt 2>&1; c=\$?; echo \"example \$e: exit \$c\"; case \$c in 0|3) ;; *) rc=1 ;; esac; done; exit \$rc"
  "sweep speed, quick (sweep_throughput)|40|\$py benchmarks/sweep_throughput.py --repeat 1 --no-fresh --no-cli"
)

if [ -n "$plan_only" ]; then
  total=0
  for s in "${steps[@]}"; do
    IFS='|' read -r name limit _ <<< "$s"
    echo "$limit s  $name"
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
  IFS='|' read -r name limit cmd <<< "$s"
  file="$logs/$(echo "$name" | tr -c 'A-Za-z0-9_\n-' '_').txt"
  if [ $((SECONDS - start + limit)) -gt "$deadline" ]; then
    table+="| $name | not started: the ${deadline} s deadline | - | - |\n"
    status=1
    continue
  fi
  t0=$SECONDS
  timeout "$limit" bash -c "$cmd" > "$file" 2>&1
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
