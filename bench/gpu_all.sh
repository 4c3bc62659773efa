#!/bin/bash
# Every GPU check of memprobe in one call, for a lent GPU session (about 15 minutes of device time
# in all; this is sized to finish in under 8): the 7B-shaped attacker-loop probe with its GCG and
# membership passes (bench/gpu_probe.py), then a vLLM smoke test when vLLM is installed.
# Random weights of real shapes, no hub: nothing is downloaded.
#
#   bash bench/gpu_all.sh [OUT_DIR]        # figures as JSON and text under OUT_DIR (default $OUT or /tmp/gpu-out)
set -u
cd "$(dirname "$0")/.."
OUT_DIR=${1:-${OUT:-/tmp/gpu-out}}
mkdir -p "$OUT_DIR"
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] && PY=${PYTHON:-.venv/bin/python}
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
started=$(date +%s)
step() {  # name, seconds, command...: run one check under a time cap, keep going on failure
  local name=$1 limit=$2; shift 2
  echo "== $name (cap ${limit}s)"
  timeout "$limit" "$@" > "$OUT_DIR/$name.txt" 2>&1
  echo "   rc=$? after $(( $(date +%s) - started )) s"; tail -n 8 "$OUT_DIR/$name.txt"
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT_DIR/gpu.txt" 2>&1
cat "$OUT_DIR/gpu.txt"
# 3 rounds × 24 at length 200 on a Llama-7B-shaped victim and a Mistral-7B-shaped attacker (bf16),
# then GCG 10 steps × width 128 and the membership signals on the victim.
step gpu_probe 360 "$PY" bench/gpu_probe.py --json "$OUT_DIR/gpu_probe.json"
if "$PY" -c "import vllm" 2>/dev/null; then
  step vllm_contract 120 "$PY" -m pytest tests/unit/models/test_models_contract.py -q -k vllm -p no:cacheprovider
fi
echo "all GPU checks done in $(( $(date +%s) - started )) s; figures in $OUT_DIR"
