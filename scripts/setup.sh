#!/usr/bin/env bash
# Set up .venv with what this machine needs, on a fresh machine.
#   bash scripts/setup.sh            the main job: convcheck with torch, NumPy and rich; on a machine
#                                    with an NVIDIA GPU and driver, also the cuDNN frontend, cuDNN and
#                                    CuPy for that driver's CUDA (the cu12 or cu13 extra)
#   bash scripts/setup.sh --tests    what the test suite needs besides: pytest, pytest-xdist, hypothesis, matplotlib,
#                                    Ray, and the real cuDNN frontend and cuDNN even without a GPU
#                                    (the graph-construction tests build graphs through them)
#   bash scripts/setup.sh --plan     print what it would install here, and install nothing
# Environment: PYTHON (default python3); CONVCHECK_EXTRAS (replaces the extras chosen here, e.g.
# "cu13,test"); TORCH_VERSION (default 2.13.0); TORCH_INDEX (default: PyTorch's CPU wheel index
# without a GPU, its cu126/cu130 index with one).
set -euo pipefail
cd "$(dirname "$0")/.."
py="${PYTHON:-python3}"
mode=main
plan=""
for arg in "$@"; do
  case "$arg" in
    --tests) mode=tests ;;
    --plan) plan=1 ;;
    *) echo "setup.sh: unknown option '$arg' (expected --tests and/or --plan)" >&2; exit 2 ;;
  esac
done

# Which CUDA this machine's driver runs, if any: nvidia-smi prints "CUDA Version: 13.0".
cuda_major=""
if command -v nvidia-smi >/dev/null 2>&1 && smi="$(nvidia-smi 2>/dev/null)"; then
  cuda_major="$(printf '%s\n' "$smi" | sed -n 's/.*CUDA Version: *\([0-9][0-9]*\)\..*/\1/p' | head -n 1)"
fi
if [ -n "$cuda_major" ] && [ "$cuda_major" -ge 13 ]; then
  gpu_extra=cu13; gpu_index=https://download.pytorch.org/whl/cu130
elif [ -n "$cuda_major" ]; then
  gpu_extra=cu12; gpu_index=https://download.pytorch.org/whl/cu126
else
  gpu_extra=""; gpu_index=""
fi

extras="$gpu_extra"
if [ "$mode" = tests ]; then
  extras="${gpu_extra:-cu12},test,runtimes"  # the frontend and cuDNN for the graph-construction tests, GPU or not; the runtimes' backends
fi
extras="${CONVCHECK_EXTRAS-$extras}"
torch_version="${TORCH_VERSION:-2.13.0}"
torch_index="${TORCH_INDEX:-${gpu_index:-https://download.pytorch.org/whl/cpu}}"
target="."
[ -n "$extras" ] && target=".[${extras}]"

if [ -n "$plan" ]; then
  echo "gpu: ${cuda_major:+CUDA $cuda_major driver}${cuda_major:-none}"
  echo "torch: torch==${torch_version} from ${torch_index}"
  echo "install: pip install -e '${target}'"
  exit 0
fi

[ -x .venv/bin/python ] || "$py" -m venv .venv
vpy=.venv/bin/python
"$vpy" -m pip install -q --upgrade pip

# torch first, from an explicit index: a plain `pip install torch` on Linux pulls a multi-GB
# CUDA build that a CPU-only machine (and CI) cannot use. --no-deps with no retries: an
# unreachable index fails at once instead of retrying for every dependency; torch's own
# dependencies come from PyPI in the next step.
if ! "$vpy" -c "import torch" 2>/dev/null; then
  "$vpy" -m pip install -q --no-deps --retries 0 --timeout 15 "torch==${torch_version}" --index-url "$torch_index" \
    || "$vpy" -m pip install -q --no-deps "torch==${torch_version}"
fi
"$vpy" -m pip install -q -e "$target"

if [ "$mode" = tests ]; then
  # Every other supported cudnn-frontend release, for the graph-construction tests of every release
  # (tests/test_frontend_releases.py; 1.23.0, the oldest, also serves tests/test_cudnn_graph_cpu.py).
  # About 18 MB each. Optional: a release that is not available is skipped, and said.
  for v in 1.23.0 1.24.1 1.25.0 1.26.0 1.27.0 1.28.0 1.29.1 1.30.0 1.31.0; do
    [ -d ".venv/frontends/$v/cudnn" ] && continue
    "$vpy" -m pip install -q --no-deps --target ".venv/frontends/$v" "nvidia-cudnn-frontend==$v" \
      || echo "setup: nvidia-cudnn-frontend $v is not available for this Python; its test will skip" >&2
  done
fi
"$vpy" -m convcheck --version
