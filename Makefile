# Two commands do all set-up on a fresh machine (see README):
#   make study   build the environment, then run the whole default study
#   make test    build the environment, then run the test suite
VENV := .venv
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
PYTHON ?= python3.11

.PHONY: env study study-extended test check clean-study pull push bench bench-gpu

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

# the default plus the rows beyond its 60 minutes (config/extended.yaml)
study-extended: env
	snakemake --cores all --configfile config/extended.yaml

test: env
	pytest

# check: the finished study's headline table cells against its expected file (docs/claims.md); a missing
# file fails here (the workflow's rule check_expected only reports it). EXPECTED=tests/config/expected/tiny.yaml
# after a tiny run; --update rewrites the file after an intended change.
EXPECTED ?= config/expected/default.yaml
check: env
	python -m rankstudy check-expected --expected $(EXPECTED) --tables-dir results/tables

# DVC (docs/cluster.md): artifacts of the study on the remote in .dvc/config.
# SNAKEMAKE_ARGS: the arguments of the run the artifacts came from, e.g. --configfile config/x.yaml
SNAKEMAKE_ARGS ?=
# push: record the outputs of the last Snakemake run (dvc.lock), summarise them, upload them;
# then commit dvc.lock and summary/ with git.
# (Folders a config does not produce are recorded empty: DVC has no optional outputs.)
push:
	mkdir -p data index text train teachers models encoders runs results logs benchmarks
	dvc commit --force study
	dvc repro --single-item summary
	dvc push
# pull: download the artifacts of the checked-out dvc.lock, then touch every output in DAG order
# (DVC does not keep mtimes; without this Snakemake would rerun jobs whose inputs look newer).
pull:
	dvc pull
	snakemake --touch --forceall $(SNAKEMAKE_ARGS) --quiet

# bench: the maintained benchmarks (bench/README.md), one after the other, each timing its two ways side by side
# and printing its report (those with a results file write it); about two hours on 2 cores: run nothing else
# meanwhile. `make bench-NAME` runs one. bench/gpu_efficiency.py (make bench-gpu) needs a GPU; bench/training_negatives.py
# a finished run of config/msmarco-passages.yaml (its usage line); tests/unit/test_bench.py keeps this list whole.
BENCHMARKS := tk_speed tkl_speed tkl_central_rows document_reuse train_step busy_speed slice_threads length_groups micro_batch \
	malloc cpu_isa social_graph sparse_attention choppy_predict efficiency_processes dense_encode dry_run streaming
DENSE_COLLECTION ?= resources/data/trec-dl20-passage-top100/collection.tsv
bench: $(addprefix bench-,$(BENCHMARKS))
bench-dense_encode: BENCH_ARGS = --collection $(DENSE_COLLECTION) --docs 1024
bench-gpu: env
	python bench/gpu_efficiency.py
bench-%: env
	python bench/$*.py $(BENCH_ARGS)

clean-study:
	rm -rf data index runs results/metrics results/tables results/figures logs benchmarks .snakemake
