# One entry point for humans and CI. Everything bootstraps .venv from nothing.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export NUMBA_CACHE_DIR ?= $(CURDIR)/.numba_cache

.PHONY: setup system-deps test test-deploy serve lint format bench reproduce clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

# Tests that need Redis start their own redis-server, the deploy tests a real Prometheus
# (promtool included) and Debian's haproxy (its check of the balancer's configuration), the
# status-page test headless Chromium and the V2 benchmark's quick run wrk: install them when
# missing (root on CI).
system-deps:
	@command -v redis-server >/dev/null 2>&1 || { \
		echo "installing redis-server"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server; }
	@command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 || { \
		echo "installing prometheus"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus; }
	@command -v chromium >/dev/null 2>&1 || { \
		echo "installing chromium"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }
	@command -v haproxy >/dev/null 2>&1 && command -v wrk >/dev/null 2>&1 || { \
		echo "installing haproxy and wrk"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy wrk; }

# The suite runs in TEST_WORKERS processes (pytest-xdist), a test file per worker at a time:
# most of its time is spent waiting on the servers, Redis and Prometheus it starts.
# TEST_WORKERS=0 runs it in this process.
TEST_WORKERS ?= 2

test: $(STAMP) system-deps
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# The container deployment for real (tests/deploy/containers, docs/deployment.md): installs
# Debian's docker.io and debootstrap when missing, starts dockerd when none runs (and stops
# it after), builds the images, brings the compose stack up, checks it and removes it.
$(VENV)/.deploy: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,deploy]'
	touch $(VENV)/.deploy

test-deploy: $(VENV)/.deploy
	$(BIN)/python -m pytest -q -m container tests/deploy/containers

serve: $(STAMP)
	$(BIN)/lorentztron serve

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

$(VENV)/.bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	touch $(VENV)/.bench

bench: $(VENV)/.bench
	$(BIN)/python -m benchmarks.speed_pa

# the full reproductions of the four papers and the calibration study, one after the other
# (long runs; `make test` runs each in its quick mode)
reproduce: $(VENV)/.bench
	$(BIN)/python -m benchmarks.reproduce_dos --full
	$(BIN)/python -m benchmarks.reproduce_pqr
	$(BIN)/python -m benchmarks.reproduce_mofm
	$(BIN)/python -m benchmarks.reproduce_thesis
	$(BIN)/python -m benchmarks.calibration

clean:
	rm -rf $(VENV) .numba_cache .pytest_cache .ruff_cache build *.egg-info
