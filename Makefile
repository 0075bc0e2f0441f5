# Thin targets over the `bench` command and pytest. Every target sets up .venv itself.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
export LITELLM_LOCAL_MODEL_COST_MAP := True
export MLFLOW_DISABLE_TELEMETRY := true
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: setup browser demo test lab mlflow-ui serve-local bench-throughput clean

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

# Debian's Chromium, for the test that opens the HTML report in a headless browser (Playwright
# drives it; nothing ever downloads a browser). Installed once with apt-get (as root, or via sudo).
CHROMIUM ?= /usr/bin/chromium
browser:
	@test -x $(CHROMIUM) || { \
	  echo "installing Debian's chromium for the report's browser test (about a minute) ..."; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null; then SUDO=sudo; else \
	    echo "make: $(CHROMIUM) is missing; install it as root: apt-get install chromium" >&2; exit 1; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; }

# The main job: the demo sweep on the embedded model, ending with its HTML report's path
# (resumable; a second run makes no model call and re-renders the report).
demo: setup
	$(BIN)/bench sweep params/demo.yaml

# The whole test suite (fake provider on loopback, the embedded model, notebooks, the report in Chromium).
test: setup browser
	BENCH_CHROMIUM=$(CHROMIUM) $(BIN)/python -m pytest -q

# JupyterLab on the project's kernel (the .venv's python), on loopback. As root (a container),
# Jupyter refuses to start without --allow-root: pass it then.
lab: setup
	$(BIN)/jupyter lab --notebook-dir=notebooks --ip=127.0.0.1 $$([ "$$(id -u)" = 0 ] && echo --allow-root)

# MLflow's UI on a run's own store, offline, on 127.0.0.1, until Ctrl-C (`bench ui`): RUN=<sweep or run
# folder>; without RUN, MLFLOW_TRACKING_URI if set, else the run tracked last. UI_PORT=<n> fixes the port.
RUN ?=
UI_PORT ?=
mlflow-ui: setup
	$(BIN)/bench ui $(RUN) $(if $(UI_PORT),--port $(UI_PORT))

serve-local: setup
	$(BIN)/bench serve-local

bench-throughput: setup
	$(BIN)/python benchmarks/throughput.py

clean:
	rm -rf $(VENV) runs .pytest_cache
