#!/usr/bin/env bash
# Set up .venv with convcheck, its GPU extras and its test tools, on a fresh machine.
#   bash scripts/dev_setup.sh
# Environment: PYTHON (default python3), CONVCHECK_EXTRAS (default "cu12,test";
# use "cu13,test" on a CUDA 13 machine), TORCH_VERSION (default 2.13.0),
# TORCH_INDEX (default PyTorch's CPU wheel index; set it to .../whl/cu126 or
# similar for a GPU build of torch).
set -euo pipefail
cd "$(dirname "$0")/.."
py="${PYTHON:-python3}"
extras="${CONVCHECK_EXTRAS:-cu12,test}"
torch_version="${TORCH_VERSION:-2.13.0}"
torch_index="${TORCH_INDEX:-https://download.pytorch.org/whl/cpu}"

[ -x .venv/bin/python ] || "$py" -m venv .venv
vpy=.venv/bin/python
"$vpy" -m pip install -q --upgrade pip

# torch first, from an explicit index: a plain `pip install torch` on Linux pulls
# a multi-GB CUDA build that a CPU-only machine (and CI) cannot use.
# --no-deps with no retries: an unreachable index fails at once instead of retrying
# for every dependency; torch's own dependencies come from PyPI in the next step.
if ! "$vpy" -c "import torch" 2>/dev/null; then
  "$vpy" -m pip install -q --no-deps --retries 0 --timeout 15 "torch==${torch_version}" --index-url "$torch_index" \
    || "$vpy" -m pip install -q --no-deps "torch==${torch_version}"
fi
"$vpy" -m pip install -q -e ".[${extras}]"

# A second cudnn-frontend release for the graph-construction test of two
# releases (tests/test_cudnn_graph_cpu.py). Optional: skipped if unavailable.
if [ ! -d .venv/frontend-1.23/cudnn ]; then
  "$vpy" -m pip install -q --no-deps --target .venv/frontend-1.23 "nvidia-cudnn-frontend==1.23.0" \
    || echo "dev_setup: nvidia-cudnn-frontend 1.23.0 is not available for this Python; that test will skip" >&2
fi
"$vpy" -m convcheck --version
