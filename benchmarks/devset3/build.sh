#!/usr/bin/env bash
# Build the third development set (benchmarks/devset3/specs.py: 36 models of architecture families that neither the
# first nor the second dev set has, timm and transformers configs with random weights, nothing downloaded from a model
# hub) into OUT (default models/dev3, kept out of git). The whole set is held out: every model goes to OUT/heldout.
#   bash benchmarks/devset3/build.sh [OUT] [export.py options, e.g. --only NAME,NAME | --skip-existing]
# It is the second dev set's build (benchmarks/devset2/build.sh: its venv, $DEVSET_VENV, and its exporter) with
# --specs benchmarks/devset3/specs.py.
# The export runs under `nice -n 10`, one model per process; about 5 minutes and 2.8 GB on a 2-core machine.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="${1:-models/dev3}"; [ $# -gt 0 ] && shift
exec bash "$HERE/../devset2/build.sh" "$OUT" --specs "$HERE/specs.py" "$@"
