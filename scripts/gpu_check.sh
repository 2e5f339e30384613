#!/usr/bin/env bash
# The GPU check, on a CUDA machine with no network.
#   bash scripts/gpu_check.sh WHEEL_DIR LOG_DIR
# Installs every wheel in WHEEL_DIR (e.g. nvidia-cudnn-frontend) into a private
# folder without touching the network (--no-index), then runs the GPU tests and
# scripts/gpu_check.py, which prints the table. Logs go to LOG_DIR.
# Expects python3 with torch (CUDA), CuPy and nvidia-cudnn-cu12/13 already there.
set -u -o pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
wheels="${1:-$repo/.whl}"
logs="${2:-$repo/gpu-logs}"
py="${PYTHON:-python3}"
mkdir -p "$logs"
site="$(mktemp -d)"
if compgen -G "$wheels/*.whl" >/dev/null; then
  "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" "$wheels"/*.whl \
    || { echo "gpu_check: installing the wheels in $wheels failed" >&2; exit 2; }
else
  echo "gpu_check: no wheels in $wheels; using what $py already has" >&2
fi
export PYTHONPATH="$site:$repo${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
cd "$repo"
status=0
echo "== environment" | tee "$logs/env.txt"
timeout 120 "$py" -m convcheck env 2>&1 | tee -a "$logs/env.txt" || status=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | tee -a "$logs/env.txt"
echo "== GPU tests"
timeout 240 "$py" -m pytest -m gpu tests -q -p no:cacheprovider 2>&1 | tee "$logs/pytest_gpu.txt" || status=1
echo "== GPU check table"
timeout 240 "$py" scripts/gpu_check.py --out "$logs" 2>&1 | tee "$logs/gpu_check.txt" || status=1
echo "== GPU sweep (shapes_resnet_50, batch 8, fp32 and fp16)"
for dt in fp32 fp16; do
  timeout 150 "$py" -m convcheck sweep --batch cases/benchdnn/shapes_resnet_50 --mb 8 --dtype "$dt" \
    --out "$logs/sweep.jsonl" --quiet 2>&1 | tee -a "$logs/sweep_summary.txt"
  rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] || status=1
done
timeout 120 "$py" -m convcheck report "$logs/sweep.jsonl" --html "$logs/sweep.html" --pictures 3 || status=1
echo "== GPU sweep of every engine (two resnet-50 layers, batch 8, fp16)"
timeout 150 "$py" -m convcheck sweep --batch cases/benchdnn/shapes_resnet_50 --mb 8 --dtype fp16 --match 'res2a_branch2[ab]' \
  --all-engines --out "$logs/sweep_engines.jsonl" --quiet 2>&1 | tee "$logs/sweep_engines_summary.txt" || status=1
echo "== examples on the GPU"
for f in examples/*.py; do
  case "$(basename "$f")" in _*) continue ;; esac  # a helper the examples share, not an example (as in the tests)
  timeout 60 "$py" "$f" > "$logs/example_$(basename "$f" .py).txt" 2>&1
  rc=$?
  echo "$(basename "$f"): exit $rc" | tee -a "$logs/examples.txt"
  [ $rc -eq 0 ] || status=1
done
echo "== reproducer scripts (convcheck graph ... --python), one per direction, dtype and fusion"
mkdir -p "$logs/repro"
for spec in "fprop fp32 -" "dgrad fp32 -" "wgrad fp32 -" "fprop tf32 -" "fprop fp16 -" "fprop bf16 -" \
            "dgrad fp16 -" "wgrad bf16 -" "fprop fp32 bias,relu" "fprop fp16 bias,gelu"; do
  set -- $spec
  name="repro_${1}_${2}_${3//,/_}"
  fuse=(); [ "$3" = "-" ] || fuse=(--fuse "$3")
  "$py" -m convcheck graph mb8ic64ih28oc64oh28kh3ph1 --direction "$1" --dtype "$2" "${fuse[@]}" --python > "$logs/repro/$name.py"
  timeout 60 "$py" "$logs/repro/$name.py" > "$logs/repro/$name.txt" 2>&1
  rc=$?
  echo "$name: exit $rc: $(grep -E '^(engine|PASS|FAIL)' "$logs/repro/$name.txt" | tr '\n' ' ')" | tee -a "$logs/repro_summary.txt"
  [ $rc -eq 0 ] || status=1
done
echo "== GPU sweep speed at batch 32, from the sweep's own records (benchmarks/sweep_throughput.py)"
timeout 200 "$py" benchmarks/sweep_throughput.py --repeat 2 2>&1 | tee "$logs/sweep_throughput.txt" || status=1
echo "== comparison speed against reading both outputs (benchmarks/compare_speed.py)"
timeout 120 "$py" benchmarks/compare_speed.py 2>&1 | tee "$logs/compare_speed.txt" || status=1
# VGG-16 at batch 8 and 32: the part of the grid the CPU could not run (README "Fast algorithms").
# Stopped at 150 s, the benchmark prints the tables of the problems that finished, and says so.
echo "== fast algorithms on the GPU (benchmarks/fast_algorithms.py --device cuda: VGG-16's 3x3 layers at batch 8 and 32)"
timeout 150 "$py" benchmarks/fast_algorithms.py --device cuda --nets vgg_16 --mb 8,32 --max-macs 1e11 \
  > "$logs/fast_algorithms.md" 2> "$logs/fast_algorithms_progress.txt"
rc=$?
tail -n 30 "$logs/fast_algorithms.md" "$logs/fast_algorithms_progress.txt"
[ $rc -eq 0 ] || status=1
exit $status
