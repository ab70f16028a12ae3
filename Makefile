# Two commands a newcomer pastes on a fresh machine (see README):
#   make bench-sample   -- the main offline job on the embedded defaults (bundled MiniLM, CPU)
#   make test           -- the test suite
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU wheel of torch lies on disk here; pinning it first keeps pip from pulling a CUDA build.
TORCH := torch==2.13.0

$(PY):
	python3 -m venv $(VENV)

install: $(PY)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(TORCH)
	$(PY) -m pip install -q -e .

install-dev: $(PY)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(TORCH)
	$(PY) -m pip install -q -e '.[dev,formats]'

test: install-dev
	$(PY) -m pytest -q

bench-sample: install
	$(VENV)/bin/regret-gateway bench offline --data ../shared/data/routerbench --trials 5 --out runs/routerbench

.PHONY: install install-dev test bench-sample
