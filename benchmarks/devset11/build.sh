#!/usr/bin/env bash
# Build the eleventh development set (benchmarks/devset11/specs.py: mainstream architectures at their standard published
# sizes, timm and transformers configs with random weights, nothing downloaded from a model hub) into OUT
# (default models/dev11, kept out of git). The whole set is held out: every model goes to OUT/heldout.
#   bash benchmarks/devset11/build.sh [OUT] [export.py options, e.g. --only NAME,NAME | --skip-existing]
# It is the second dev set's build (benchmarks/devset2/build.sh: its venv, $DEVSET_VENV, and its exporter) with
# --specs benchmarks/devset11/specs.py. timm's torchvision imports get export.py's inert stand-ins (the venv has no
# torchvision, as in the earlier sets).
# The export runs under `nice -n 10`, one model per process.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="${1:-models/dev11}"; [ $# -gt 0 ] && shift
exec bash "$HERE/../devset2/build.sh" "$OUT" --specs "$HERE/specs.py" "$@"
