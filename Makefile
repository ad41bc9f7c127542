# ticdc-delta-ingest: `make demo` and `make test` set everything up on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CACHE := $(HOME)/.cache/ticdc-delta-ingest
# Test worker processes (pytest-xdist). loadgroup without groups hands out one test at a time, in collection
# order and never reordered, so on each worker the Spark Connect runs (collected last) come after every
# classic test, as pyspark needs (one mode per process); `--dist load` would send large blocks up front.
# Two on two cores. Three were measured (clean clone, 981 tests): 59 minutes against 53 with two, CPU time
# 92 against 82 minutes; the suite is CPU-bound, and a third worker only adds contention.
TEST_WORKERS ?= 2
XDIST := -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder

.DEFAULT_GOAL := help
.PHONY: help install jars demo test test-full test-unit test-spark test-kafka test-connect bench lint fmt typecheck sample clean \
	kafka-up kafka-down kafka-sample registry-up registry-down \
	connect-up connect-down

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-13s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP) ## create .venv and install the project with its local Spark/Delta and dev tools

jars: $(STAMP) ## fetch the Spark packages (Delta) from Maven Central into ~/.cache, once per machine
	$(BIN)/python -m ingest.warmup >&2  # stdout stays free for targets that print a value (connect-up)

demo: jars ## mirror the bundled sample into ./lakehouse by path, then into catalog tables by name (./spark-warehouse), then TiCDC's own output of its test workloads in each format it writes (./lakehouse-formats)
	$(BIN)/ticdc-ingest demo --target-path lakehouse
	$(BIN)/ticdc-ingest demo --catalog --warehouse spark-warehouse
	$(BIN)/ticdc-ingest demo --formats tests/fixtures/corpora/tidb-tests --target-path lakehouse-formats

test: jars ## the suite: unit and real Spark + Delta tests on TEST_WORKERS processes (default 2); `full` ones: test-full
	$(BIN)/python -m pytest $(XDIST)

test-full: jars ## the whole suite and its long tail (tests marked `full`, every corpus under every protocol)
	CORPUS_PROFILE=full $(BIN)/python -m pytest $(XDIST)

test-unit: $(STAMP) ## the fast loop: pure logic only, no Spark
	$(BIN)/python -m pytest -m "not spark and not kafka and not notebook"

test-spark: jars ## only the local Spark + Delta tests
	$(BIN)/python -m pytest $(XDIST) -m spark

test-kafka: jars ## only the tests against a real local Kafka broker (started and stopped by the tests)
	$(BIN)/python -m pytest -m kafka

test-connect: jars ## only the Spark Connect runs of the both_modes tests (a local server, started and stopped)
	$(BIN)/python -m pytest -m connect

kafka-up: $(STAMP) ## start a local Kafka broker (KRaft, jars from Maven Central) and print its address
	$(BIN)/python -m testkit.local_services kafka-up

kafka-sample: $(STAMP) ## produce the bundled sample stream to topic tidb_cdc on the local broker
	$(BIN)/python -m testkit.local_services produce-sample --topic tidb_cdc

kafka-down: $(STAMP) ## stop the local Kafka broker and delete its data
	$(BIN)/python -m testkit.local_services kafka-down

registry-up: $(STAMP) ## start a local schema registry (Apicurio, Confluent-compatible API) and print its URL
	$(BIN)/python -m testkit.local_services registry-up

registry-down: $(STAMP) ## stop the local schema registry
	$(BIN)/python -m testkit.local_services registry-down

connect-up: jars ## start a local Spark Connect server (Delta, Kafka; 127.0.0.1, free port) and print its URL
	$(BIN)/python -m testkit.local_services connect-up

connect-down: $(STAMP) ## stop the local Spark Connect server
	$(BIN)/python -m testkit.local_services connect-down

bench: jars ## run the benchmark suite (sizes: BENCH_* variables, see bench/sizes.py) and write BENCHMARKS.md and bench/results.json
	$(BIN)/python -m bench.run --output BENCHMARKS.md --results bench/results.json

lint: $(STAMP) ## ruff and mypy
	$(BIN)/ruff check ingest testkit tests jobs notebooks bench
	$(BIN)/ruff format --check ingest testkit tests jobs notebooks bench
	$(BIN)/mypy

fmt: $(STAMP) ## format and fix what ruff can
	$(BIN)/ruff format ingest testkit tests jobs notebooks bench
	$(BIN)/ruff check --fix ingest testkit tests jobs notebooks bench

sample: $(STAMP) ## regenerate the bundled sample stream from its generator
	rm -rf ingest/samples/canal_json
	$(BIN)/python -m testkit.sample ingest/samples/canal_json

clean: ## remove the virtualenv and the demo lakehouse and warehouse (the jar cache in ~/.cache stays)
	rm -rf $(VENV) lakehouse lakehouse-formats spark-warehouse .pytest_cache .mypy_cache .ruff_cache
