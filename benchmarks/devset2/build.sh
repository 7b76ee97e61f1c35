#!/usr/bin/env bash
# Build the second development set (benchmarks/devset2/specs.py: 72 models of architecture families the first dev set
# lacks, from timm and transformers configs with random weights, nothing downloaded from a model hub) into OUT
# (default models/dev2, kept out of git), split into OUT/check and OUT/heldout by benchmarks/devset2/split.csv.
#   bash benchmarks/devset2/build.sh [OUT] [export.py options, e.g. --only NAME,NAME | --skip-existing]
# Reuses the first dev set's venv ($DEVSET_VENV, default /tmp/devset-venv) when it has what the export needs, else
# makes it the same way ../shared/models/devset/build.sh does (CPU torch 2.13.0, pinned onnx/onnxruntime/transformers/
# timm). About 11 minutes and 5.4 GB on a 2-core machine; the export runs under `nice -n 10`.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="${1:-models/dev2}"; [ $# -gt 0 ] && shift
VENV="${DEVSET_VENV:-/tmp/devset-venv}"
PY="$VENV/bin/python"
if [ ! -x "$PY" ] || ! "$PY" -c "import torch, onnx, onnxruntime, onnxscript, transformers, importlib.util as u; assert u.find_spec('timm')" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$PY" -m pip install -q torch==2.13.0 onnx==1.23.2 onnxruntime==1.32.0 onnxscript==0.7.2 transformers==5.24.0 pillow==13.0.0
  "$PY" -m pip install -q --no-deps timm==1.0.31      # its torchvision imports get inert stand-ins in export.py
fi
mkdir -p "$OUT"
export TRANSFORMERS_VERBOSITY=error HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONWARNINGS=ignore
start=$(date +%s)
nice -n 10 "$PY" "$HERE/export.py" --out "$OUT" "$@"
echo "dev set built in $(( $(date +%s) - start )) s -> $OUT ($OUT/models.tsv, $OUT/failed.tsv)"
