# Hase: every set-up step lives here. `make demo` and `make test` are the README's two commands.
# EP=cpu (default) installs plain onnxruntime; EP=cuda installs onnxruntime-gpu instead (never both).
PYTHON ?= python3
VENV   ?= .venv
EP     ?= cpu
BIN    := $(VENV)/bin
HASE   := $(BIN)/hase
ZOO    ?= configs/zoo_small.toml
DEVICE ?= configs/devices.toml
ifeq ($(EP),cuda)
  EXTRA := gpu
  OTHER := onnxruntime
else
  EXTRA := cpu
  OTHER := onnxruntime-gpu
endif

.PHONY: setup demo test zoo collect train report bench clean

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

setup: $(BIN)/activate
	-$(BIN)/pip uninstall --quiet --yes $(OTHER) 2>/dev/null
	$(BIN)/pip install --quiet -e ".[$(EXTRA),openvino,dev]"

demo: setup collect
	@echo "Done: measurements in data/hase.sqlite — try: $(HASE) profile model_zoo/small/resnet_d18_w0.5_r64_b1.onnx"

test: setup
	$(BIN)/python -m pytest -q

zoo: setup
	$(HASE) zoo --config $(ZOO) --out model_zoo

collect: setup
	$(HASE) collect --zoo $(ZOO) --devices $(DEVICE) --store data/hase.sqlite

bench: setup
	$(BIN)/python benchmarks/bench_collect.py

clean:
	rm -rf $(VENV) model_zoo/*/ data/*.sqlite* .pytest_cache
