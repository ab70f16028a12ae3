# Two commands a newcomer pastes on a fresh machine (see README):
#   make demo           -- the main job: the closed loop on the embedded defaults (SQLite, bundled MiniLM, CPU)
#   make test           -- the test suite
# Also: make bench-sample (the paper's offline experiment on ../shared/data/routerbench).
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU wheel of torch lies on disk here; pinning it first keeps pip from pulling a CUDA build.
TORCH := torch==2.13.0
# The main job's size (docs/experiments/static-encoder.md#the-demo): a world of 6,000 prompts (a fifth of the
# traffic prompts never sent, scored), 250 requests per team and round, uniform until 300 scored rows a model
# (two rounds), then the first router serves the third.
DEMO_SIZE := --world-size 6000 --requests 250 --cold-start-rows 300 --rounds 3

$(PY):
	python3 -m venv $(VENV)

# --no-compile: Python compiles what is imported, on first import; byte-compiling all of LiteLLM at install
# took longer than the install itself saves (docs/experiments/static-encoder.md#the-demo).
install: $(PY)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q --no-compile $(TORCH)
	$(PY) -m pip install -q --no-compile -e '.[train]'

install-dev: $(PY)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q --no-compile $(TORCH)
	$(PY) -m pip install -q --no-compile -e '.[train,dev,formats,scale,ray]'

lint: install-dev
	$(VENV)/bin/ruff check src tests
	$(VENV)/bin/ruff format --check src tests
	$(VENV)/bin/mypy

test: install-dev
	$(PY) -m pytest -q

demo: install
	$(VENV)/bin/regret-gateway demo $(DEMO_SIZE) --out runs/demo

bench-sample: install
	$(VENV)/bin/regret-gateway bench offline --data ../shared/data/routerbench --trials 5 --out runs/routerbench

.PHONY: install install-dev lint test demo bench-sample
