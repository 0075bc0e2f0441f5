# Thin targets over the `bench` command and pytest. Every target sets up .venv itself.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
export LITELLM_LOCAL_MODEL_COST_MAP := True
export MLFLOW_DISABLE_TELEMETRY := true
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: setup demo test lab serve-local bench-throughput clean

# Create or update .venv with the project and its `local` and `dev` extras (idempotent:
# reinstalls only when pyproject.toml changed). llama-cpp-python builds from source the
# first time (about 8 minutes on 2 cores); pip caches the wheel afterwards.
setup: $(STAMP)
$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "bench needs Python 3.11; set PYTHON=python3.11")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip wheel
	$(BIN)/python -m pip install --quiet -e '.[local,dev]'
	@touch $(STAMP)

# The main job: the demo sweep on the embedded model (resumable; a second run makes no model call).
demo: setup
	$(BIN)/bench sweep params/demo.yaml

# The whole test suite (fake provider on loopback, the embedded model, notebooks).
test: setup
	$(BIN)/python -m pytest -q

# JupyterLab on the project's kernel (the .venv's python).
lab: setup
	$(BIN)/jupyter lab --notebook-dir=notebooks

serve-local: setup
	$(BIN)/bench serve-local

bench-throughput: setup
	$(BIN)/python benchmarks/throughput.py

clean:
	rm -rf $(VENV) runs .pytest_cache
