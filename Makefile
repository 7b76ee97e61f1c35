# Hase: every set-up step lives here. `make demo` and `make test` are the README's two commands.
# `make test-fast` skips the tests marked slow; `make lint typecheck` are the checks .ci/run runs before the tests.
# EP=cpu (default) installs plain onnxruntime; EP=cuda installs onnxruntime-gpu instead (never both).
PYTHON ?= python3
VENV   ?= .venv
EP     ?= cpu
BIN    := $(VENV)/bin
HASE   := $(BIN)/hase
ZOO    ?= configs/zoo_small.toml
DEVICE ?= configs/devices.toml
STORE  ?= data/hase.sqlite
# The six small exported models shipped in shared/ are collected too (family "exported") when present.
EXPORTED ?= $(wildcard ../shared/models/exported)
ifeq ($(EP),cuda)
  EXTRA := gpu
  OTHER := onnxruntime
else
  EXTRA := cpu
  OTHER := onnxruntime-gpu
endif

# What `make collect train report` (and `make demo`, below) writes stays out of git (.gitignore): the store, the
# predictors, the report. The predictor shipped with Hase is package data (hase/predictors/, never written by
# training); its report is docs/reference-report/.
PREDICTORS ?= data/predictors
REPORT ?= reports

# Real exported models of third-party architectures (../shared/models/devset/build.sh, about 10 minutes; kept out of
# git): `make devset` builds them, `make devset-eval` predicts and measures them with the shipped predictor (resumable).
DEVSET ?= models/dev
DEVSET_OUT ?= reports/devset

# A cpu-1t predictor of this host's own in minutes (issue 30): the zoo's models profiled for a budget, in active
# order (OWN_ORDER=coverage: breadth first), spans only, then trained on the span target (docs/host.md). Resumable.
OWN_BUDGET_S ?= 660
OWN_ORDER ?= active
OWN_STORE ?= data/own.sqlite
OWN_PREDICTORS ?= data/predictors-own

.PHONY: own-predictor survey setup demo test test-fast lint typecheck zoo collect refine train train-gpu report bench clean devset devset-build devset-eval devset-dynamic devset-sweep predictors-with-devsets

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# Re-installs only when pyproject.toml changes or the EP choice changes.
$(VENV)/.installed-$(EP): pyproject.toml | $(BIN)/activate
	-$(BIN)/pip uninstall --quiet --yes $(OTHER) 2>/dev/null
	rm -f $(VENV)/.installed-*
	$(BIN)/pip install --quiet -e ".[$(EXTRA),openvino,ray,dev]"
	touch $@

setup: $(VENV)/.installed-$(EP)

# `make demo`: the whole path on a small zoo, ending in predictions to check (5.5-6 min from a fresh clone on a loaded
# 2-core VM, install included; docs/results.md). It measures configs/zoo_demo.toml on cpu-1t alone into its own
# store, trains and reports on it, predicts the three exported test models with that predictor and with the shipped
# one and runs each here (predicted vs measured), and compares this host with the shipped predictor's machine. All it
# writes is git-ignored; the full path (both device configurations, the full zoo, an adaptive round) is
# `make collect train report`.
DEMO_ZOO ?= configs/zoo_demo.toml
DEMO_DEVICE ?= cpu-1t
DEMO_STORE ?= data/demo.sqlite
DEMO_PREDICTORS ?= data/predictors-demo
DEMO_REPORT ?= reports/demo
DEMO_ADAPTED ?= data/predictors-adapted
DEMO_MODELS ?= $(sort $(wildcard tests/data/models/*.onnx))
SHIPPED := hase/predictors
demo:
	@echo "== demo 1/8: virtual environment and install in $(VENV) (first run only: about 1.5-2 min)"
	@$(MAKE) --no-print-directory setup
	@echo "== demo 2/8: build the demo zoo ($(DEMO_ZOO)) and measure it on $(DEMO_DEVICE) into $(DEMO_STORE), about 2.5 min"
	$(HASE) collect --zoo $(DEMO_ZOO) --devices $(DEVICE) --device $(DEMO_DEVICE) --store $(DEMO_STORE)
	@echo "== demo 3/8: train a $(DEMO_DEVICE) predictor on it into $(DEMO_PREDICTORS), about 1 min"
	$(HASE) train --store $(DEMO_STORE) --out $(DEMO_PREDICTORS) --config configs/predictor.toml --device $(DEMO_DEVICE)
	@echo "== demo 4/8: its report, $(DEMO_REPORT)/report.html, a few seconds"
	$(HASE) evaluate --store $(DEMO_STORE) --predictors $(DEMO_PREDICTORS) --device $(DEMO_DEVICE) --out $(DEMO_REPORT)
	@echo "== demo 5/8: the exported test models predicted by the demo predictor, then run here, about 5 s"
	$(HASE) predict $(DEMO_MODELS) --measure --predictors $(DEMO_PREDICTORS) --device $(DEMO_DEVICE)
	@echo "== demo 6/8: the same models predicted by the predictor shipped with Hase ($(SHIPPED)/), then run here, about 5 s"
	$(HASE) predict $(DEMO_MODELS) --measure --predictors $(SHIPPED) --device $(DEMO_DEVICE)
	@echo "== demo 7/8: this host against the shipped predictor's machine, op family by op family, about 20 s"
	$(HASE) host check --device $(DEMO_DEVICE) --predictors $(SHIPPED)
	@echo "== demo 8/8: the shipped predictor adapted to this host from 90 s of measurements (hase adapt), then the same models again"
	$(HASE) adapt --device $(DEMO_DEVICE) --predictors $(SHIPPED) --budget-s 90 --out $(DEMO_ADAPTED)
	$(HASE) predict $(DEMO_MODELS) --measure --predictors $(DEMO_ADAPTED) --device $(DEMO_DEVICE)
	@echo "Done: measurements in $(DEMO_STORE), the demo predictor in $(DEMO_PREDICTORS), its report in $(DEMO_REPORT)/report.html, the adapted one in $(DEMO_ADAPTED) (all git-ignored)."
	@echo "Next: $(HASE) predict MODEL.onnx [--measure]; a predictor of your own from the full zoo: make collect train report (35-60 min on the 2-core VM the shipped predictors come from)."

own-predictor: setup
	$(HASE) collect --zoo $(ZOO) --devices $(DEVICE) --device cpu-1t --store $(OWN_STORE) --spans-only --budget-s $(OWN_BUDGET_S) --order $(OWN_ORDER)
	$(HASE) train --store $(OWN_STORE) --out $(OWN_PREDICTORS) --config configs/predictor.toml --device cpu-1t --targets span

test: setup
	$(BIN)/python -m pytest -q

test-fast: setup
	$(BIN)/python -m pytest -q -m "not slow"

lint: setup
	$(BIN)/ruff check hase tests benchmarks
	$(BIN)/lint-imports

typecheck: setup
	$(BIN)/mypy

zoo: setup
	$(HASE) zoo --config $(ZOO) --out model_zoo

collect: setup
	$(HASE) collect --zoo $(ZOO) --devices $(DEVICE) --store $(STORE) $(if $(EXPORTED),--models-dir $(EXPORTED))
	$(MAKE) --no-print-directory refine

# The kernel sampler's adaptive rounds (the zoo config's [sampler] rounds; none without one): each round is written
# from the errors on $(REFINE_DEVICE) once the previous one is collected, then collected on every device. Resumable.
ROUNDS ?= data/sampler
REFINE_DEVICE ?= cpu-1t
refine: setup
	@set -e; stem=$(basename $(notdir $(ZOO))); for i in 1 2 3 4 5 6 7 8 9 10; do \
	  r=$(ROUNDS)/$$stem.round$$i.toml; \
	  [ -f $$r ] || $(HASE) zoo --config $(ZOO) --refine --store $(STORE) --device $(REFINE_DEVICE) --rounds-dir $(ROUNDS); \
	  [ -f $$r ] || break; \
	  $(HASE) collect --zoo $$r --devices $(DEVICE) --store $(STORE); \
	done

train: setup
	$(HASE) train --store $(STORE) --out $(PREDICTORS) --config configs/predictor.toml

report: setup
	$(HASE) evaluate --store $(STORE) --predictors $(PREDICTORS) --device cpu-1t --out $(REPORT)

# The NVIDIA GPU predictor from a GPU run (scripts/gpu/run_on_device.sh, docs/gpu.md): GPU_RESULTS is the store/ folder
# it brought back (parts of <= 16 MiB), joined into GPU_STORE, then `h100-cuda` is trained into PREDICTORS.
GPU_RESULTS ?= gpu_out/store
GPU_STORE ?= data/hase_gpu.sqlite
train-gpu: setup
	$(BIN)/python scripts/gpu/join_store.py $(GPU_RESULTS) $(GPU_STORE)
	$(HASE) train --store $(GPU_STORE) --out $(PREDICTORS) --config configs/predictor.toml --device h100-cuda

devset:
	bash ../shared/models/devset/build.sh $(DEVSET)

# The later dev sets (2 to 11), one table each in benchmarks/devsets/specs/: `make devset-build SET=11` builds one into
# models/dev$(SET) (git-ignored) from the package registry, not ../shared. Set 2's check part is for tuning; every
# held-out part is spent except set 2's frozen heldout/ (benchmarks/devsets/README.md says which set is what).
SET ?=
SET_OUT ?= models/dev$(SET)
devset-build:
	@test -n "$(SET)" || { echo "usage: make devset-build SET=N (a table of benchmarks/devsets/specs/)"; exit 2; }
	bash benchmarks/devsets/build.sh $(SET) $(SET_OUT)

devset-eval: setup
	$(HASE) evaluate --devset $(DEVSET) --device cpu-1t --out $(DEVSET_OUT)

# Predictors trained with real graphs too (the shipped cpu-mt; the shipped cpu-1t is `make train`'s, which scored
# better on the frozen sets, docs/results.md): the store of `make collect` plus the real models of $(DEVSET) and
# $(DEVSET2_CHECK) (never dev2's heldout/) as families of their kind, collected into a copy of the store and trained
# with leave-family-out over both (benchmarks/lofo_with_devset.py; needs `make devset devset-build SET=2 devset-eval`,
# whose devset.csv names the first dev set's groups). Writes $(LOFO)/predictors/<device>; read its figures, then copy
# it into hase/predictors/ by hand.
LOFO ?= data/lofo
DEVSET2_CHECK ?= models/dev2/check
predictors-with-devsets: setup
	for d in cpu-1t cpu-mt; do $(BIN)/python benchmarks/lofo_with_devset.py --store $(STORE) --device $$d \
	  --models $(DEVSET2_CHECK) --models $(DEVSET) --groups $(DEVSET_OUT)/devset.csv --out $(LOFO) || exit 1; done

# Batch sweep: symbolic-batch copies of the devset's quick models (those whose batch can be freed) plus text encoders
# exported with symbolic batch and sequence (benchmarks/export_dynamic.py, in the devset's venv), each predicted and
# measured at --free-dim batch=1, 2, 4, 8.
DEVSET_VENV ?= /tmp/devset-venv
DEVSET_DYNAMIC ?= $(DEVSET)-dynamic-text
devset-dynamic:
	$(DEVSET_VENV)/bin/python benchmarks/export_dynamic.py --out $(DEVSET_DYNAMIC)

devset-sweep: setup
	$(HASE) evaluate --devset $(DEVSET) --batch-sweep $(if $(wildcard $(DEVSET_DYNAMIC)),--sweep-also $(DEVSET_DYNAMIC)) \
		--device cpu-1t --out $(DEVSET_OUT)-sweep

# This host measured once into benchmarks/hosts/<digest>.survey.json.gz (commit it); cross_host prints the accuracy of
# the shipped predictors, as they are and adapted, on every surveyed host's real models (docs/host.md).
survey: setup
	$(HASE) host survey
	$(BIN)/python benchmarks/cross_host.py

bench: setup
	$(BIN)/python benchmarks/bench_collect.py --zoo $(ZOO)
	$(BIN)/python benchmarks/bench_predict.py
	$(BIN)/python benchmarks/bench_pipeline.py

clean:
	rm -rf $(VENV) model_zoo/*/ data/*.sqlite* data/predictors data/predictors-demo data/predictors-adapted reports .pytest_cache
