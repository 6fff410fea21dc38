# `make demo` and `make test` are the two commands a fresh machine needs (see README.md);
# `make test-fast` is a quicker check before `make test` (docs/testing.md).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: all venv build demo test test-fast test-matrix lint typecheck pytest pytest-compat \
	pytest-releases clean

all: test

EXAMPLE := examples/nodecost
PLATFORM_EXAMPLES := examples/platform

# The virtualenv, installed from the lock of exact versions; redone when either file changes.
# The example plugin packages are installed too: the tests load them as a user's would.
$(STAMP): pyproject.toml requirements.lock $(EXAMPLE)/pyproject.toml $(PLATFORM_EXAMPLES)/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c requirements.lock -e '.[dev]'
	$(BIN)/pip install --quiet --no-deps -e $(EXAMPLE)
	$(BIN)/pip install --quiet --no-deps -e $(PLATFORM_EXAMPLES)
	touch $@

venv: $(STAMP)

# The releases besides the default one (the newest, 1.37: `ascheduler/devcluster/versions.py`;
# `ASCHEDULER_KUBE_VERSION` picks the release of the whole suite; docs/testing.md): the oldest
# supported one runs the compatibility subset (`-m "smoke or compat"`), the others the smoke
# tests.
COMPAT_RELEASE ?= 1.35
SMOKE_RELEASES ?= 1.36
OTHER_RELEASES ?= $(COMPAT_RELEASE) $(SMOKE_RELEASES)

# etcd, kube-apiserver, kube-scheduler and kwok from their Go modules, for the default release
# and the others; cached, so instant after the first time (`ascheduler cluster build --help`).
build: venv
	$(BIN)/ascheduler cluster build
	for release in $(OTHER_RELEASES); do \
		$(BIN)/ascheduler cluster build --kubernetes-version $$release || exit 1; done

demo: build
	$(BIN)/python -m ascheduler.devcluster.demo

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

# The example plugins are held to the same standard as the scheduler.
typecheck: venv
	$(BIN)/mypy --strict ascheduler $(EXAMPLE)/nodecost $(PLATFORM_EXAMPLES)/spotavoidance \
		$(PLATFORM_EXAMPLES)/teamquota

pytest: build
	$(BIN)/pytest

# The compatibility subset on the oldest supported release's plane and kube-scheduler: the
# smoke tests and the tests marked `compat` (the differential scenarios, the release checks).
pytest-compat: build
	ASCHEDULER_KUBE_VERSION=$(COMPAT_RELEASE) $(BIN)/pytest -m "smoke or compat" -p no:randomly

# The smoke tests (start, schedule, bind, report, explain) against each other release's
# plane and kube-scheduler.
pytest-releases: build
	for release in $(SMOKE_RELEASES); do \
		ASCHEDULER_KUBE_VERSION=$$release $(BIN)/pytest -m smoke -p no:randomly || exit 1; done

# The whole suite on the default (newest) release, the compatibility subset on the oldest,
# the smoke tests on the one between (docs/testing.md).
test: lint typecheck pytest pytest-compat pytest-releases

# The whole suite on each release named, one after the other (on demand: about as long as
# `make test` per release): `make test-matrix ASCHEDULER_KUBE_VERSIONS="1.35 1.36 1.37"`.
ASCHEDULER_KUBE_VERSIONS ?= 1.35 1.36 1.37
test-matrix: lint typecheck build
	for release in $(ASCHEDULER_KUBE_VERSIONS); do \
		$(BIN)/ascheduler cluster build --kubernetes-version $$release || exit 1; \
		ASCHEDULER_KUBE_VERSION=$$release $(BIN)/pytest || exit 1; done

# Lint, types, the unit tests and the smoke integration tests, in one pytest run (one plane);
# the differential scenarios, the fault injection and the other integration tests are left to
# `make test`, which runs everything.
test-fast: lint typecheck build
	$(BIN)/pytest -m "not integration or smoke"

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache *.egg-info
