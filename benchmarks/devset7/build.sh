#!/usr/bin/env bash
# Build the seventh development set (benchmarks/devset7/specs.py: models of architecture families that none of the
# earlier sets has, timm and transformers configs with random weights, nothing downloaded from a model hub) into OUT
# (default models/dev7, kept out of git). The whole set is held out: every model goes to OUT/heldout.
#   bash benchmarks/devset7/build.sh [OUT] [export.py options, e.g. --only NAME,NAME | --skip-existing]
# It is the second dev set's build (benchmarks/devset2/build.sh: its venv, $DEVSET_VENV, and its exporter) with
# --specs benchmarks/devset7/specs.py. timm's torchvision imports get export.py's inert stand-ins (the venv has no
# torchvision, as in the earlier sets).
# The export runs under `nice -n 10`, one model per process; about 4 minutes and 1.9 GB on a 2-core machine.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="${1:-models/dev7}"; [ $# -gt 0 ] && shift
exec bash "$HERE/../devset2/build.sh" "$OUT" --specs "$HERE/specs.py" "$@"
