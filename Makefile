# charlm: character-level RNN/LSTM language models, KenLM baselines, analyses, report.
# `make help` lists the targets. Needs GNU make and bash.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

# ---------------------------------------------------------------- paths and versions (defined once)
# Interpreter the virtual environment is created from.
PYTHON          ?= python3
VENV            := .venv
PY              := $(VENV)/bin/python
PIP             := $(PY) -m pip
TORCH_VERSION   := 2.13.0
KENLM_VERSION   := 0.3.0
KENLM_MAX_ORDER := 21
# Built KenLM wheel + lmplz/build_binary, outside the repo so other checkouts (CI) reuse them.
KENLM_CACHE     ?= $${XDG_CACHE_HOME:-$$HOME/.cache}/charlm/kenlm-$(KENLM_VERSION)-order$(KENLM_MAX_ORDER)
KENLM_SETUP     := charlm/kenlm_setup.py
# The default report: the converged models that ship with the suite (charlm/profiles/reference.toml); quick trains.
PROFILE         ?= reference
# Extra options of `python -m reports` (e.g. REPORT_ARGS=--retrain to train a profile's shipped models again).
REPORT_ARGS     ?=
REPORT_BUILD    := reports/build
ARTIFACTS       := artifacts
SETUP_STAMP     := $(VENV)/.setup-done
INSTALL_STAMP   := $(VENV)/.charlm-installed
# Debian/Ubuntu packages: KenLM build, weasyprint (PDF), headless chromium (render check), poppler (pdftoppm).
APT_PACKAGES    := build-essential cmake libboost-program-options-dev libboost-system-dev \
                   libboost-thread-dev libboost-test-dev zlib1g-dev libbz2-dev liblzma-dev \
                   libpango-1.0-0 libpangoft2-1.0-0 fonts-dejavu-core fonts-symbola chromium poppler-utils
# Added when $(PYTHON) is missing or lacks venv/ensurepip or its C headers (Python.h, for the kenlm module).
APT_PYTHON      := python3 python3-venv python3-dev

.PHONY: help setup sysdeps venv kenlm test test-slow lint bench report timings docs report-check clean distclean

help: ## list the targets and the variables they use
	@echo "Usage: make <target> [PROFILE=reference|quick|standard|...]"
	@echo
	@grep -hE '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-13s %s\n", $$1, $$2}'
	@echo
	@echo "Variables: PROFILE=$(PROFILE)  REPORT_ARGS=$(REPORT_ARGS)  PYTHON=$(PYTHON)  VENV=$(VENV)"
	@echo "           KENLM_CACHE=$(KENLM_CACHE)"

# ---------------------------------------------------------------- setup

setup: kenlm ## sysdeps + venv + kenlm (idempotent; a second run takes seconds)
	@touch $(SETUP_STAMP)
	@echo "setup OK"

# test/bench/report only run setup when .venv (or its stamp) is missing or pyproject.toml changed.
$(SETUP_STAMP): pyproject.toml
	@$(MAKE) setup

sysdeps: ## install missing system packages (apt, as root); elsewhere list what is missing and fail
	@missing=""; \
	if ! $(PYTHON) -c 'import ensurepip, venv, sysconfig, os, sys; sys.exit(not os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' 2>/dev/null; then \
	  py_missing=1; else py_missing=0; fi; \
	if command -v dpkg-query >/dev/null 2>&1; then \
	  want="$(APT_PACKAGES)"; if [ $$py_missing = 1 ]; then want="$$want $(APT_PYTHON)"; fi; \
	  for p in $$want; do \
	    dpkg-query -W -f='$${db:Status-Abbrev}' "$$p" 2>/dev/null | grep -q '^ii' || missing="$$missing $$p"; \
	  done; \
	  if [ -z "$$missing" ]; then \
	    if [ $$py_missing = 1 ]; then echo "sysdeps: $(PYTHON) cannot create a venv or lacks Python.h (set PYTHON=...)" >&2; exit 1; fi; \
	    echo "sysdeps OK (all Debian packages present)"; exit 0; fi; \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "sysdeps: installing:$$missing"; \
	    export DEBIAN_FRONTEND=noninteractive; \
	    apt-get -o DPkg::Lock::Timeout=600 update -q; \
	    apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends $$missing; \
	    echo "sysdeps OK (installed:$$missing)"; \
	  else \
	    echo "sysdeps: missing Debian packages:$$missing" >&2; \
	    echo "  run as root: apt-get update && apt-get install -y --no-install-recommends$$missing" >&2; \
	    exit 1; \
	  fi; \
	else \
	  [ $$py_missing = 1 ] && missing="$$missing python3(with-venv-and-Python.h)"; \
	  for t in g++ cmake make pdftoppm; do command -v $$t >/dev/null 2>&1 || missing="$$missing $$t"; done; \
	  command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 \
	    || command -v google-chrome >/dev/null 2>&1 || missing="$$missing chromium"; \
	  for h in boost/program_options.hpp boost/thread.hpp boost/test/unit_test.hpp zlib.h bzlib.h lzma.h; do \
	    echo "#include <$$h>" | g++ -E -x c++ - >/dev/null 2>&1 || missing="$$missing <$$h>"; \
	  done; \
	  for l in libpango-1.0.so libpangoft2-1.0.so; do \
	    ldconfig -p 2>/dev/null | grep -q "$$l" || missing="$$missing $$l"; \
	  done; \
	  fc-list 2>/dev/null | grep -qi dejavu || missing="$$missing DejaVu-fonts"; \
	  fc-list 2>/dev/null | grep -qi symbola || missing="$$missing Symbola-font(the-control-pictures)"; \
	  if [ -n "$$missing" ]; then echo "sysdeps: not Debian/apt; missing:$$missing" >&2; exit 1; fi; \
	  echo "sysdeps OK"; \
	fi

venv: sysdeps ## create .venv, pip install torch==2.13.0 (CPU wheel) first, then -e '.[test]'
	@test -x $(PY) || { echo "creating $(VENV) from $(PYTHON)"; $(PYTHON) -m venv $(VENV); }
	@if $(PY) -c 'import importlib.metadata as m, sys; sys.exit(m.version("torch").split("+")[0] != "$(TORCH_VERSION)")' 2>/dev/null; then \
	  echo "torch $(TORCH_VERSION) already installed"; \
	else \
	  $(PIP) install "torch==$(TORCH_VERSION)"; \
	fi
	@if [ -f $(INSTALL_STAMP) ] && [ ! pyproject.toml -nt $(INSTALL_STAMP) ] \
	    && $(PY) -c 'import importlib.metadata as m; m.version("charlm"); m.version("pytest-xdist"); m.version("ruff")' 2>/dev/null; then \
	  echo "charlm (editable) already installed"; \
	else \
	  $(PIP) install -e '.[test]' && touch $(INSTALL_STAMP); \
	fi

kenlm: venv ## KenLM with max order 21: python module + lmplz/build_binary in .venv/bin (built once into KENLM_CACHE)
	@KENLM_CACHE="$(KENLM_CACHE)" $(PY) $(KENLM_SETUP) --version $(KENLM_VERSION) --max-order $(KENLM_MAX_ORDER)

# ---------------------------------------------------------------- work

test: $(SETUP_STAMP) ## run the test suite: pytest -q -n 2 (tests marked with one xdist_group share a worker)
	$(PY) -m pytest -q -n 2 --dist loadgroup

test-slow: $(SETUP_STAMP) ## the slow tests (every analysis on the shipped War and Peace, about 3 min; CI runs them)
	CHARLM_SLOW_TESTS=1 $(PY) -m pytest -q -m slow

lint: $(SETUP_STAMP) ## ruff check + ruff format --check (lines of at most 120 characters; settings in pyproject.toml)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

bench: $(SETUP_STAMP) ## run the benchmarks (python -m charlm.bench)
	$(PY) -m charlm.bench

report: $(SETUP_STAMP) ## the HTML+PDF report of PROFILE (default reference: the shipped models; PROFILE=quick trains)
	$(PY) -m reports --profile $(PROFILE) $(REPORT_ARGS)

timings: $(SETUP_STAMP) ## a cold run of PROFILE (fresh artifacts and cache), kept as the record its estimate prices by
	@d=$$(mktemp -d); trap 'rm -rf "$$d"' EXIT; \
	CHARLM_ARTIFACTS=$$d/art XDG_CACHE_HOME=$$d/cache $(PY) -m reports --profile $(PROFILE) --record-timings $(REPORT_ARGS)

docs: $(SETUP_STAMP) ## tables of our numbers in docs/ from the last report run (python -m reports.docs)
	$(PY) -m reports.docs --profile $(PROFILE)

report-check: $(SETUP_STAMP) ## render-check the built report in headless chromium for PROFILE
	$(PY) -m reports.check --profile $(PROFILE)

# ---------------------------------------------------------------- cleaning

clean: ## remove reports/build and python caches (keeps artifacts/ and .venv)
	rm -rf $(REPORT_BUILD) .pytest_cache
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
	find . -path ./$(VENV) -prune -o -name '*.pyc' -type f -exec rm -f {} +

distclean: clean ## clean + DELETE artifacts/ (trained models, results) and .venv; KENLM_CACHE is kept
	rm -rf $(ARTIFACTS) $(VENV) build *.egg-info
