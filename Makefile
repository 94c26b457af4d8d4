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

export WORKBOOK_PROFILE := $(PROFILE)
ifeq ($(PROFILE),tiny)
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
endif

.DEFAULT_GOAL := help
.PHONY: help venv preflight lint run test lab tiny-models bench clean FORCE

help: ## list the targets
	@echo "make <target> [PROFILE=tiny|qwen3-30b-a3b]   (PROFILE=$(PROFILE))"
	@awk 'BEGIN {FS = ":.*## "} /^[a-z][a-z-]*:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

venv: $(STAMP) ## create/refresh .venv from requirements/ (a no-op when up to date)

# Always ask the script: it hashes requirements/*.txt + pyproject.toml and returns at once if current.
$(STAMP): FORCE
	$(PYTHON) scripts/setup_env.py

# Seconds, not minutes: hub reachable, GPUs and memory, pairing (hub profiles); data/ present (tiny).
# A failure is one line and exit 2, so `make test`/`make run` stop before pytest or the notebooks start.
preflight: venv ## check this machine can run PROFILE (hub, GPUs, pairing; tiny: data/ present)
	$(VPY) -m helpers.tools.preflight --profile $(PROFILE)

run: venv preflight ## execute all notebooks headless -> build/*.ipynb, build/*.html, build/run-summary.json
	$(VPY) -m helpers.tools.runner $(NOTEBOOKS)

test: venv preflight lint ## lint, then pytest tests/ plus every notebook via nbval
	$(VPY) -m pytest tests --nbval-lax --nbval-current-env notebooks

lint: venv ## ruff: lint (src, tests, scripts, notebook cells) and format check
	$(VPY) -m ruff check .
	$(VPY) -m ruff format --check .

lab: venv ## JupyterLab on notebooks/ with the venv's kernel
	$(VPY) -m jupyter lab --notebook-dir=notebooks $(LAB_FLAGS)

tiny-models: venv ## retrain the tiny verifier + EAGLE-3 drafter into data/
	$(VPY) scripts/make_tiny_models.py

bench: venv ## benchmark the tiny pair (plain vs EAGLE-3)
	$(VPY) scripts/bench_tiny_pair.py

clean: ## remove build/
	rm -rf build

FORCE:
