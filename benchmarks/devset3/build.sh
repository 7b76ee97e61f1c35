#!/usr/bin/env bash
# Build the third development set (benchmarks/devset3/specs.py: 36 models of architecture families that neither the
# first nor the second dev set has, timm and transformers configs with random weights, nothing downloaded from a model
# hub) into OUT (default models/dev3, kept out of git). The whole set is held out: every model goes to OUT/heldout.
#   bash benchmarks/devset3/build.sh [OUT] [export.py options, e.g. --only NAME,NAME | --skip-existing]
# The exporter is the second dev set's (benchmarks/devset2/export.py --specs benchmarks/devset3/specs.py), run in the
# same venv ($DEVSET_VENV, default /tmp/devset-venv; made like benchmarks/devset2/build.sh makes it when missing).
# The export runs under `nice -n 10`, one model per process; about 5 minutes and 2.8 GB on a 2-core machine.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="${1:-models/dev3}"; [ $# -gt 0 ] && shift
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
nice -n 10 "$PY" "$HERE/../devset2/export.py" --specs "$HERE/specs.py" --out "$OUT" "$@"
echo "devset3 built in $(( $(date +%s) - start )) s -> $OUT/heldout ($OUT/models.tsv, $OUT/failed.tsv)"
