#!/usr/bin/env bash
# Hase on the lent NVIDIA GPU machine, in ONE device call (all results under $OUT). Prepare once, here:
#   bash ../shared/gpu/setup-local.sh          # fills the git-ignored .gpu/ (onnxruntime-gpu 1.31.1, cupti-python)
# then run it with the device tool, carrying .gpu:
#   run(command="bash scripts/gpu/run_on_device.sh", carry=[".gpu"], timeout_s=600)
# Steps, each time-boxed so the whole call ends before BUDGET_S (default 570 s): the kit's smoke test, the
# `gpu`-marked tests, `hase profile --ep cuda` on ResNet-50 / BERT-base size at batch 1 and 64, small real
# CUDA-profile + CUPTI fixtures, then `hase collect` of the default zoo on configs/devices_gpu.toml with the time
# left, and the store cut into parts of <= 16 MiB. What comes back: $OUT/{log.txt, smoke.txt, pytest.txt,
# profiles/, gpu_fixtures/, collect.log, store/}. On the CPU side: `make train-gpu GPU_RESULTS=<files_at>/store`.
# HASE_GPU_DRY=1 (no .gpu needed) runs the same steps on the CPU EP with small models: a check of this script.
# A second call that only continues the collect: HASE_GPU_STEPS=collect HASE_GPU_RESUME=<folder in the checkout
# holding the returned store parts> (carry it too if it is git-ignored).
set -uo pipefail
BUDGET_S=${BUDGET_S:-570}
OUT=${OUT:-$PWD/gpu_out}
export OUT
mkdir -p "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1
left() { echo $((BUDGET_S - SECONDS)); }
step() { echo "== $1 at ${SECONDS}s (left $(left)s)"; }
STEPS=",${HASE_GPU_STEPS:-smoke,pytest,profiles,fixtures,collect},"
want() { [[ "$STEPS" == *",$1,"* ]]; }

if [ "${HASE_GPU_DRY:-0}" = 1 ]; then
  PY=${PY:-.venv/bin/python}
else
  source .gpu/device-env.sh || { echo "device-env.sh failed"; exit 2; }
  nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
  if want smoke; then
    step smoke
    timeout 90 $PY .gpu/gpu_smoke.py > "$OUT/smoke.txt" 2>&1; echo "smoke rc=$?"; tail -3 "$OUT/smoke.txt"
  fi
fi
export HASE_GPU_MODELS=${HASE_GPU_MODELS:-/tmp/hase_gpu_models}

if want pytest; then
  step "pytest -m gpu"
  timeout 150 $PY -m pytest -q -p no:cacheprovider -o addopts="" -m gpu -rs \
    tests/measure/test_gpu_cuda.py tests/profiling/gpu/test_gpu_cupti_live.py > "$OUT/pytest.txt" 2>&1
  echo "pytest rc=$?"; tail -5 "$OUT/pytest.txt"
fi
if want profiles; then
  step profiles
  timeout 180 $PY scripts/gpu/capture.py profiles; echo "profiles rc=$?"
fi
if want fixtures; then
  step fixtures
  timeout 60 $PY scripts/gpu/capture.py fixtures; echo "fixtures rc=$?"
fi
if want collect; then
  if [ -n "${HASE_GPU_RESUME:-}" ]; then
    mkdir -p "$OUT/store"
    $PY scripts/gpu/join_store.py "$HASE_GPU_RESUME" "$OUT/store/hase_gpu.sqlite" || echo "resume: join failed"
  fi
  step collect
  LIMIT=$(( $(left) - 25 ))
  if [ "$LIMIT" -gt 30 ]; then $PY scripts/gpu/capture.py collect "$LIMIT"; else echo "no time left for collect"; fi
  tail -5 "$OUT/collect.log" 2>/dev/null
  step pack
  $PY scripts/gpu/capture.py pack
fi
step done
