#!/usr/bin/env bash
# Build one of the later development sets (its table, benchmarks/devsets/specs/devNN.csv: timm and transformers
# configs with random weights, nothing downloaded from a model hub) into OUT (default models/dev<SET>, kept out of
# git), one folder a part (OUT/heldout; the second set also OUT/check). benchmarks/devsets/README.md lists the sets.
#   bash benchmarks/devsets/build.sh SET [OUT] [export.py options, e.g. --only NAME,NAME | --skip-existing]
# Reuses the first dev set's venv ($DEVSET_VENV, default /tmp/devset-venv) when it has what the export needs, else
# makes it the same way ../shared/models/devset/build.sh does (CPU torch 2.13.0, pinned onnx/onnxruntime/transformers/
# timm). The export runs under `nice -n 10`, one model per process; 4 to 11 minutes and 2-6 GB a set on 2 cores.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ $# -lt 1 ] || [[ "$1" == -* ]]; then
  echo "usage: bash benchmarks/devsets/build.sh SET [OUT] [export.py options]   (sets: $(cd "$HERE/specs" && ls dev*.csv | sed 's/dev0*\([0-9]*\)\.csv/\1/' | sort -n | paste -sd' '))" >&2
  exit 2
fi
SET="$1"; shift
OUT="models/dev${SET#0}"
if [ $# -gt 0 ] && [[ "$1" != -* ]]; then OUT="$1"; shift; fi
VENV="${DEVSET_VENV:-/tmp/devset-venv}"
PY="$VENV/bin/python"
python3 "$HERE/export.py" --set "$SET" --list > /dev/null   # a bad SET or table fails here, before any install
if [ ! -x "$PY" ] || ! "$PY" -c "import torch, onnx, onnxruntime, onnxscript, transformers, importlib.util as u; assert u.find_spec('timm')" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$PY" -m pip install -q torch==2.13.0 onnx==1.23.2 onnxruntime==1.32.0 onnxscript==0.7.2 transformers==5.24.0 pillow==13.0.0
  "$PY" -m pip install -q --no-deps timm==1.0.31      # its torchvision imports get inert stand-ins in export.py
fi
export TRANSFORMERS_VERBOSITY=error HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONWARNINGS=ignore
start=$(date +%s)
nice -n 10 "$PY" "$HERE/export.py" --set "$SET" --out "$OUT" "$@"
echo "dev set $SET built in $(( $(date +%s) - start )) s -> $OUT ($OUT/models.tsv, $OUT/failed.tsv)"
