# Thin targets over the `bench` command and pytest. Every target sets up .venv itself.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
export LITELLM_LOCAL_MODEL_COST_MAP := True
export MLFLOW_DISABLE_TELEMETRY := true
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: setup sandbox browser postgres demo test lab mlflow-ui tracking-server serve-local bench-throughput clean

# Create or update .venv with the project and its `local`, `dev`, `cluster` and `perf` extras (idempotent:
# reinstalls only when pyproject.toml changed). llama-cpp-python builds from source the
# first time (about 8 minutes on 2 cores); pip caches the wheel afterwards. It also installs Debian's bubblewrap
# (the code checks' sandbox) as root or via sudo; without either it says so and goes on.
setup: $(STAMP)
	@$(MAKE) --no-print-directory sandbox || echo "make: going on without bubblewrap: checks of kind code are \
	refused until it is installed (apt-get install bubblewrap)" >&2
$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "bench needs Python 3.11; set PYTHON=python3.11")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip wheel
	$(BIN)/python -m pip install --quiet -e '.[local,dev,cluster,perf]'
	@$(BIN)/python -m compileall -q bench  # what pip does for a package it installs (not an editable one)
	@touch $(STAMP)

# Debian's bubblewrap, the sandbox `kind: code` checks run answers in (docs/judging.md#code-run-against-tests).
sandbox:
	@command -v bwrap >/dev/null || { \
	  echo "installing Debian's bubblewrap for the code checks' sandbox ..."; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null; then SUDO=sudo; else \
	    echo "make: bwrap is missing; install it as root: apt-get install bubblewrap" >&2; exit 1; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq bubblewrap >/dev/null; }

# Debian's Chromium, for the test that opens the HTML report in a headless browser (Playwright
# drives it; nothing ever downloads a browser). Installed once with apt-get (as root, or via sudo).
CHROMIUM ?= /usr/bin/chromium
browser:
	@test -x $(CHROMIUM) || { \
	  echo "installing Debian's chromium for the report's browser test (about a minute) ..."; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null; then SUDO=sudo; else \
	    echo "make: $(CHROMIUM) is missing; install it as root: apt-get install chromium" >&2; exit 1; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; }

# Debian's PostgreSQL server binaries, for the team tracking server's test (a throwaway server on 127.0.0.1 in a
# temporary folder; nothing is configured system-wide). Installed once with apt-get (as root, or via sudo).
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	  echo "installing Debian's postgresql for the team tracking server's test (about a minute) ..."; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null; then SUDO=sudo; else \
	    echo "make: PostgreSQL's initdb is missing; install it as root: apt-get install postgresql" >&2; exit 1; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq postgresql >/dev/null; }

# The main job: the demo sweep on the embedded model, ending with its HTML report's path
# (resumable; a second run makes no model call and re-renders the report).
demo: setup
	$(BIN)/bench sweep params/demo.yaml

# The whole test suite (fake provider on loopback, the embedded model, notebooks, the report in Chromium,
# a team tracking server on a throwaway PostgreSQL), on TEST_WORKERS pytest-xdist workers: the heavy tests of one
# kind (a Dask cluster, Chromium or JupyterLab, PostgreSQL, the embedded model) run one after another on one of them,
# and a file's tests on one worker in their order (tests/conftest.py). TEST_WORKERS=0: one process (docs/tests.md).
TEST_WORKERS ?= 2
test: setup browser postgres sandbox
	BENCH_CHROMIUM=$(CHROMIUM) $(BIN)/python -m pytest -q -n $(TEST_WORKERS)

# JupyterLab on the project's kernel (the .venv's python), on loopback. As root (a container),
# Jupyter refuses to start without --allow-root: pass it then. No news prompt and no update check:
# news_url=None disables JupyterLab's announcements (its page config says news disabled), so it never asks.
LAB_QUIET = --LabApp.news_url=None --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate
lab: setup
	$(BIN)/jupyter lab --notebook-dir=notebooks --ip=127.0.0.1 $(LAB_QUIET) $$([ "$$(id -u)" = 0 ] && echo --allow-root)

# MLflow's UI on a run's own store, offline, on 127.0.0.1, until Ctrl-C (`bench ui`): RUN=<sweep or run
# folder>; without RUN, MLFLOW_TRACKING_URI if set, else the run tracked last. UI_PORT=<n> fixes the port.
RUN ?=
UI_PORT ?=
mlflow-ui: setup
	$(BIN)/bench ui $(RUN) $(if $(UI_PORT),--port $(UI_PORT))

# A team's MLflow tracking server on PostgreSQL, until Ctrl-C (`bench tracking-server`):
# BACKEND=postgresql://USER[:PASSWORD]@HOST:PORT/DATABASE[?password=…] (checked first; a password in it is
# never printed and reaches bench and mlflow only through their environment: set it as `BACKEND=… make
# tracking-server`, since make's own arguments are visible in ps), ARTIFACTS=<a folder every worker's machine
# can reach, or s3://…>, TRACKING_HOST=0.0.0.0 to be reachable from the network (default 127.0.0.1),
# TRACKING_PORT (default 5000). Then, wherever a sweep runs: export MLFLOW_TRACKING_URI=<the URL it prints>.
BACKEND ?=
ARTIFACTS ?= mlartifacts
TRACKING_HOST ?= 127.0.0.1
TRACKING_PORT ?= 5000
tracking-server: export BENCH_BACKEND_STORE_URI = $(BACKEND)
tracking-server: setup
	@test -n "$$BENCH_BACKEND_STORE_URI" || { echo "make: set BACKEND=postgresql://USER[:PASSWORD]@HOST:PORT/DATABASE" >&2; exit 2; }
	@$(BIN)/bench tracking-server --artifacts-destination '$(ARTIFACTS)' \
	  --host $(TRACKING_HOST) --port $(TRACKING_PORT)

serve-local: setup
	$(BIN)/bench serve-local

bench-throughput: setup
	$(BIN)/python benchmarks/throughput.py

# This documentation (docs/, mkdocs.yml): served by MkDocs on loopback until Ctrl-C, rebuilt on every edit;
# docs-build writes the static site to site/ (git-ignored) and fails on a broken link or anchor (--strict).
.PHONY: docs docs-build
docs docs-build: export NO_MKDOCS_2_WARNING = 1
docs: setup
	$(BIN)/mkdocs serve -a 127.0.0.1:8000
docs-build: setup
	$(BIN)/mkdocs build --strict

# The same grid through the local pool (--jobs 2) and a 2-worker Dask cluster on loopback, side by side
# (a few minutes on 2 cores); then the scaling inputs (scheduler, lease server, store). ROUNDS=3 for medians.
.PHONY: bench-cluster
ROUNDS ?= 1
bench-cluster: setup
	$(BIN)/python benchmarks/cluster.py --rounds $(ROUNDS)

clean:
	rm -rf $(VENV) runs .pytest_cache
