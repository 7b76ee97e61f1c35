#!/usr/bin/env bash
# Build the fifth development set (benchmarks/devset5/specs.py: models of architecture families that none of the
# earlier sets has, timm and transformers configs with random weights, nothing downloaded from a model hub) into OUT
# (default models/dev5, kept out of git). The whole set is held out: every model goes to OUT/heldout.
#   bash benchmarks/devset5/build.sh [OUT] [export.py options, e.g. --only NAME,NAME | --skip-existing]
# It is the second dev set's build (benchmarks/devset2/build.sh: its venv, $DEVSET_VENV, and its exporter) with
# --specs benchmarks/devset5/specs.py.
# The export runs under `nice -n 10`, one model per process; about 5 minutes (286 s) and 3.2 GB on a 2-core machine.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="${1:-models/dev5}"; [ $# -gt 0 ] && shift
exec bash "$HERE/../devset2/build.sh" "$OUT" --specs "$HERE/specs.py" "$@"
