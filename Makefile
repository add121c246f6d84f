# Two commands do all set-up on a fresh machine (see README):
#   make study   build the environment, then run the whole default study
#   make test    build the environment, then run the test suite
VENV := .venv
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
PYTHON ?= python3.11

.PHONY: env study test clean-study

env: $(VENV)/.installed

# torch first: the pinned CPU build from the local wheel directory; anything that pulled a
# newer torch would bring several GB of CUDA packages (see docs/environment.md).
$(VENV)/.installed: requirements.lock pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet torch==2.13.0
	$(VENV)/bin/pip install --quiet -r requirements.lock
	$(VENV)/bin/pip install --quiet --no-deps -e .
	touch $@

study: env
	snakemake --cores all

test: env
	pytest

clean-study:
	rm -rf data index runs results/metrics results/tables results/figures logs benchmarks .snakemake
