#!/usr/bin/env bash
# Hase on the lent NVIDIA GPU machine, in ONE device call (all results under $OUT). Prepare once, here:
#   bash ../shared/gpu/setup-local.sh          # fills the git-ignored .gpu/ (onnxruntime-gpu 1.31.1, cupti-python)
# then run it with the device tool, carrying .gpu:
#   run(command="bash scripts/gpu/run_on_device.sh", carry=[".gpu"], timeout_s=600)
# Steps, each in a `timeout -k` box sized so the whole call ends before BUDGET_S (default 570 s), leaving
# RESERVE_S for the last pack: versions first (onnxruntime, providers, cuda-bindings, cupti-python; whether CUPTI
# can record and why not), the kit's smoke test, the `gpu`-marked tests, `hase profile --ep cuda` figures on
# ResNet-50 / BERT-base size at batch 1 and 64 (each model in its own box), small real CUDA-profile + CUPTI
# fixtures, then `hase collect` of the default zoo on configs/devices_gpu.toml with the time left.
# Everything is written under WORK ($HASE_GPU_WORK, outside $OUT); after every step `capture.py pack` puts in $OUT
# only what can come back (8 files, 16 MiB each, 64 MiB in all): log.txt, summary.json, results.tar.gz (all but
# the store) and store/hase_gpu.sqlite.gz.part-* (15 MiB parts), and prints summary.json and the pytest summary,
# so even a cut-off reply says what happened. A step that exits 124/137 hit its box, 130 stopped on SIGTERM: the
# next step runs. On the CPU side: `make train-gpu GPU_RESULTS=<files_at>/store`; `tar xzf results.tar.gz`.
# HASE_GPU_DRY=1 (no .gpu needed) runs the same steps on the CPU EP with small models: a check of this script.
# A second call that only continues the collect: HASE_GPU_STEPS=collect HASE_GPU_RESUME=<folder in the checkout
# holding the returned store parts> (carry it too if it is git-ignored).
set -uo pipefail
BUDGET_S=${BUDGET_S:-570}
RESERVE_S=${RESERVE_S:-30}
OUT=${OUT:-$PWD/gpu_out}
HASE_GPU_WORK=${HASE_GPU_WORK:-$(mktemp -d /tmp/hase_gpu_work.XXXXXX)}
export OUT HASE_GPU_WORK
WORK=$HASE_GPU_WORK
mkdir -p "$OUT" "$WORK"
exec > >(tee -a "$OUT/log.txt") 2>&1
left() { echo $((BUDGET_S - RESERVE_S - SECONDS)); }
step() { echo "== $1 at ${SECONDS}s (left $(left)s)"; }
STEPS=",${HASE_GPU_STEPS:-env,smoke,pytest,profiles,fixtures,collect},"
want() { [[ "$STEPS" == *",$1,"* ]]; }
# box NAME WANT_S CMD...: CMD under `timeout -k 10` for WANT_S or the time left, whichever is less; the outcome
# goes into summary.json, then pack. 124/137: hit the box; 130: stopped on SIGTERM (the CLI's exit code).
box() {
  local name=$1 want_s=$2 t0=$SECONDS limit rc
  shift 2
  limit=$(left)
  [ "$want_s" -lt "$limit" ] && limit=$want_s
  step "$name (box ${limit}s)"
  if [ "$limit" -lt 10 ]; then echo "$name: skipped, no time left"; rc=124; else
    timeout -k 10 "$limit" "$@"; rc=$?
  fi
  echo "$name rc=$rc in $((SECONDS - t0))s"
  [ "$rc" = 130 ] && echo "$name: stopped on SIGTERM (exit 130); going on with the next step"
  timeout -k 5 20 $PY scripts/gpu/capture.py record "$name" "$rc" "$((SECONDS - t0))" "$limit"
  timeout -k 5 60 $PY scripts/gpu/capture.py pack > "$WORK/pack.txt" 2>&1 || { echo "pack failed:"; tail -5 "$WORK/pack.txt"; }
  return 0
}

if [ "${HASE_GPU_DRY:-0}" = 1 ]; then
  PY=${PY:-.venv/bin/python}
else
  source .gpu/device-env.sh || { echo "device-env.sh failed"; exit 2; }
  nvidia-smi > "$WORK/nvidia-smi.txt" 2>&1
fi
export HASE_GPU_MODELS=${HASE_GPU_MODELS:-/tmp/hase_gpu_models}

want env && box env 60 $PY scripts/gpu/capture.py env
if want smoke && [ "${HASE_GPU_DRY:-0}" != 1 ]; then
  box smoke 90 bash -c "$PY .gpu/gpu_smoke.py > '$WORK/smoke.txt' 2>&1"; tail -3 "$WORK/smoke.txt"
fi
if want pytest; then
  box pytest 150 bash -c "$PY -m pytest -q -p no:cacheprovider -o addopts='' -m gpu -rs \
    tests/measure/test_gpu_cuda.py tests/profiling/gpu/test_gpu_cupti_live.py > '$WORK/pytest.txt' 2>&1"
  tail -5 "$WORK/pytest.txt"
fi
want profiles && box profiles 180 $PY scripts/gpu/capture.py profiles "$(( $(left) < 180 ? $(left) - 15 : 165 ))"
want fixtures && box fixtures 60 $PY scripts/gpu/capture.py fixtures 45
if want collect; then
  if [ -n "${HASE_GPU_RESUME:-}" ]; then
    mkdir -p "$WORK/store"
    $PY scripts/gpu/join_store.py "$HASE_GPU_RESUME" "$WORK/store/hase_gpu.sqlite" || echo "resume: join failed"
  fi
  LIMIT=$(( $(left) - 15 ))
  if [ "$LIMIT" -gt 30 ]; then box collect $((LIMIT + 15)) $PY scripts/gpu/capture.py collect "$LIMIT"
  else echo "no time left for collect"; fi
  tail -5 "$WORK/collect.log" 2>/dev/null
fi
step done
cat "$WORK/pack.txt"
