# commlir: the few commands a newcomer needs.
#
#   make setup   install what is missing (LLVM/MLIR 22, lit/FileCheck, rustfmt, clippy, the
#                Python environment .venv with PyTorch for python/commlir_torch)
#   make build   cargo build --release of the tools (target/release/commlir-*)
#   make dist    dist/commlir-run: the runner for GPU nodes (< 20 MB, no LLVM/MLIR), checked
#   make demo    run commlir-opt with a real pipeline on an example and show input and result
#   make test    the one test command: fmt, clippy, cargo tests (incl. lit and docs freshness),
#                the Python tests of commlir_torch against PyTorch on gloo
#   make bench   commlir-opt vs mlir-opt on a generated 200k-op file (ratio, same run)
#   make fuzz    the cargo-fuzz target `roundtrip` for FUZZ_SECONDS (default 600)

SHELL := /bin/bash
.DEFAULT_GOAL := help

LLVM_BIN ?= /usr/lib/llvm-22/bin
APT_PACKAGES := llvm-22-dev libmlir-22-dev mlir-22-tools libpolly-22-dev clang-22 \
                zlib1g-dev libzstd-dev llvm-22-tools librsvg2-bin
# apt-get as root, through sudo otherwise.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_INSTALL := $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends

# FileCheck, lit, not, count and mlir-opt for everything below.
export PATH := $(LLVM_BIN):$(PATH)

CARGO ?= cargo
# Every tool package under tools/ (commlir-opt, commlir-run, later commlir-translate).
TOOLS := $(notdir $(wildcard tools/*))
RELEASE_BIN := target/release

# demo: the pipeline and the input. Switch the pipeline with
#   make demo DEMO_PIPELINE='builtin.module(func.func(cse,dce),symbol-dce)'
DEMO_INPUT ?= examples/tp_mlp.mlir
DEMO_PIPELINE ?= builtin.module(func.func(coll-to-comm,cse,dce),symbol-dce)
DEMO_FLAGS ?=
# demo: the recommended pipeline (README) run on every example (lowered, bucketed, scheduled,
# pools planned), then run on the sim backend and compared with the input's results.
DEMO_SCHEDULE ?= builtin.module(func.func(coll-fold-prescale,coll-bucket,coll-to-comm{one-shot-threshold=0},comm-overlap-schedule,comm-plan-pools))

# The Python environment of python/commlir_torch (the PyTorch exporter): made by `make setup`
# once, reused after. Packages from PyPI, pinned.
VENV ?= .venv
PYTHON ?= python3
PYTHON_PACKAGES := torch==2.11.0 numpy==2.4.6 safetensors==0.8.0
# The Python tests run the exporter's programs on these binaries (the debug build of `cargo
# test`).
PY_TEST_BIN ?= $(or $(CARGO_TARGET_DIR),$(CURDIR)/target)/debug
# One shell command (no recursive make, so that `make -n test` runs nothing): fails when the
# environment or the binaries are missing.
PY_TEST = echo "==> $(VENV)/bin/python -m unittest discover -s python/tests (binaries: $(PY_TEST_BIN))"; \
	{ [ -x $(VENV)/bin/python ] || { echo "Python tests: $(VENV)/bin/python missing (make setup-python)"; false; }; } && \
	{ [ -x $(PY_TEST_BIN)/commlir-run ] && [ -x $(PY_TEST_BIN)/commlir-opt ] || \
	  { echo "Python tests: no commlir-opt/commlir-run in $(PY_TEST_BIN)"; false; }; } && \
	( cd python && COMMLIR_OPT=$(PY_TEST_BIN)/commlir-opt COMMLIR_RUN=$(PY_TEST_BIN)/commlir-run \
	  $(abspath $(VENV))/bin/python -m unittest discover -s tests -t . -v )

FUZZ_SECONDS ?= 600
FUZZ_TARGET ?= roundtrip

.PHONY: help setup setup-apt setup-rust setup-python setup-bench setup-fuzz build dist demo test \
        test-python test-python-run fmt clippy cargo-test lit bench fuzz clean

help:
	@sed -n '3,10p' Makefile | sed 's/^# *//'

setup: setup-apt setup-rust setup-python

# Installs only what is missing; `apt-get update` only when something is.
setup-apt:
	@missing=""; \
	for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "setup: installing$$missing"; \
	  $(SUDO) apt-get update -q && $(APT_INSTALL)$$missing; \
	else echo "setup: LLVM/MLIR 22 packages present"; fi

setup-rust:
	@command -v $(CARGO) >/dev/null || { echo "setup: cargo not found: install Rust from https://rustup.rs"; exit 1; }
	@$(CARGO) fmt --version >/dev/null 2>&1 || rustup component add rustfmt
	@$(CARGO) clippy --version >/dev/null 2>&1 || rustup component add clippy
	@echo "setup: rustfmt and clippy present"

# Idempotent: nothing happens when the environment already imports torch.
setup-python:
	@if [ -x $(VENV)/bin/python ] && $(VENV)/bin/python -c "import torch, numpy, safetensors" 2>/dev/null; then \
	  echo "setup: Python environment $(VENV) present (torch $$($(VENV)/bin/python -c 'import torch; print(torch.__version__)'))"; \
	else \
	  echo "setup: creating $(VENV) with $(PYTHON_PACKAGES)"; \
	  { [ -x $(VENV)/bin/python ] || $(PYTHON) -m venv $(VENV) || \
	    { echo "setup: '$(PYTHON) -m venv' failed (Debian: apt-get install python3-venv)"; exit 1; }; } && \
	  $(VENV)/bin/python -m pip install --upgrade pip && \
	  $(VENV)/bin/python -m pip install $(PYTHON_PACKAGES); \
	fi

# hyperfine makes the benchmark's statistics nicer; bench/run.sh works without it.
setup-bench:
	@command -v hyperfine >/dev/null || dpkg -s hyperfine >/dev/null 2>&1 || \
	  { $(APT_INSTALL) hyperfine || { $(SUDO) apt-get update -q && $(APT_INSTALL) hyperfine; } || \
	    echo "setup-bench: hyperfine not installable; bench/run.sh falls back to a median of runs"; }

# cargo-fuzz runs on the stable toolchain with RUSTC_BOOTSTRAP=1 (see docs/getting-started.md).
setup-fuzz: setup-rust
	@command -v cargo-fuzz >/dev/null || $(CARGO) install cargo-fuzz --locked

build:
	$(CARGO) build --release $(addprefix -p ,$(TOOLS))

# The runner alone, to copy to GPU nodes: the release build (debug info stripped, symbols kept:
# Cargo.toml's [profile.release.package.commlir-run]), then the deployability test on that file
# (under 20 MB, no LLVM/MLIR library, symbol or crate; tools/commlir-run/tests/deployable.rs).
dist:
	$(CARGO) build --release -p commlir-run
	@mkdir -p dist && cp $(RELEASE_BIN)/commlir-run dist/
	COMMLIR_RUN_BINARY=$(CURDIR)/dist/commlir-run $(CARGO) test --release -p commlir-run --test deployable
	@ls -l dist/commlir-run

demo: setup build
	@echo "==> input: $(DEMO_INPUT)"; echo
	@cat $(DEMO_INPUT)
	@echo; echo "==> $(RELEASE_BIN)/commlir-opt $(DEMO_INPUT) --pass-pipeline='$(DEMO_PIPELINE)' $(DEMO_FLAGS)"; echo
	@$(RELEASE_BIN)/commlir-opt $(DEMO_INPUT) --pass-pipeline='$(DEMO_PIPELINE)' $(DEMO_FLAGS)
	@for f in examples/*.mlir; do \
	  echo; echo "==> $$f on 2 simulated ranks, before and after $(DEMO_SCHEDULE)"; \
	  $(RELEASE_BIN)/commlir-run $$f --ranks 2 > /tmp/commlir-demo-before.txt; \
	  $(RELEASE_BIN)/commlir-opt $$f --pass-pipeline='$(DEMO_SCHEDULE)' --comm-report=/tmp/commlir-demo-report.json \
	    | $(RELEASE_BIN)/commlir-run - --ranks 2 > /tmp/commlir-demo-after.txt; \
	  cat /tmp/commlir-demo-after.txt; \
	  if cmp -s /tmp/commlir-demo-before.txt /tmp/commlir-demo-after.txt; then \
	    echo "   results bit-identical before and after the pipeline"; \
	  else echo "   RESULTS DIFFER"; diff /tmp/commlir-demo-before.txt /tmp/commlir-demo-after.txt; exit 1; fi; \
	  grep -E '"(peak_memory_bytes|exposed_comm_ns|makespan_ns|lower_bound_bytes)"' /tmp/commlir-demo-report.json | sed 's/^ */   /'; \
	done
	@for f in examples/upstream/*.mlir; do \
	  echo; echo "==> $$f (upstream shard + arith, read by real MLIR) on 2 simulated ranks, converted, then after $(DEMO_SCHEDULE)"; \
	  $(RELEASE_BIN)/commlir-translate --import-mlir $$f --pass-pipeline='builtin.module(shard-to-coll,func.func(arith-to-compute))' \
	    | $(RELEASE_BIN)/commlir-run - --ranks 2 > /tmp/commlir-demo-before.txt; \
	  $(RELEASE_BIN)/commlir-translate --import-mlir $$f --pass-pipeline='builtin.module(shard-to-coll,func.func(arith-to-compute))' \
	    | $(RELEASE_BIN)/commlir-opt - --pass-pipeline='$(DEMO_SCHEDULE)' | $(RELEASE_BIN)/commlir-run - --ranks 2 > /tmp/commlir-demo-after.txt; \
	  cat /tmp/commlir-demo-after.txt; \
	  if cmp -s /tmp/commlir-demo-before.txt /tmp/commlir-demo-after.txt; then \
	    echo "   results bit-identical before and after the pipeline"; \
	  else echo "   RESULTS DIFFER"; exit 1; fi; \
	done

# The docs freshness check (docs/dialects/*.md generated from the op definitions) is the
# cargo test dialects/tests/docs_fresh.rs, and lit runs from tools/commlir-opt/tests/lit.rs:
# both are part of `cargo test --workspace`.
# The Python tests (python/tests) run after cargo test, on its debug binaries; a missing
# environment is a failure, not a skip.
# All four steps run even if one fails, so that one run shows every problem.
test: setup
	@status=0; \
	echo "==> cargo fmt --all --check"; \
	$(CARGO) fmt --all --check || { status=1; echo "make test: FAILED: rustfmt (fix: cargo fmt --all)"; }; \
	echo "==> cargo clippy --workspace --all-targets --keep-going -- -D warnings"; \
	$(CARGO) clippy --workspace --all-targets --keep-going -- -D warnings || { status=1; echo "make test: FAILED: clippy"; }; \
	echo "==> cargo test --workspace --no-fail-fast"; \
	$(CARGO) test --workspace --no-fail-fast || { status=1; echo "make test: FAILED: cargo test"; }; \
	$(PY_TEST) || { status=1; echo "make test: FAILED: Python tests"; }; \
	exit $$status

# The Python tests alone (builds the debug binaries they run).
test-python: setup-python
	$(CARGO) build -p commlir-opt -p commlir-run
	@$(PY_TEST)

# The Python tests on the binaries already built in $(PY_TEST_BIN).
test-python-run:
	@$(PY_TEST)

fmt:
	$(CARGO) fmt --all

clippy:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# lit alone, on the debug binaries (cargo build first).
lit:
	$(CARGO) build $(addprefix -p ,$(TOOLS))
	lit -v test/

bench: setup setup-bench build
	bench/run.sh

# The corpus (fuzz/corpus/, not committed) starts from the small .mlir files of test/ and
# examples/; libFuzzer adds what it finds there; crashes land in fuzz/artifacts/.
fuzz: setup-fuzz
	@mkdir -p fuzz/corpus/$(FUZZ_TARGET)
	@find test examples -name '*.mlir' -size -32k | while read -r f; do \
	  cp "$$f" "fuzz/corpus/$(FUZZ_TARGET)/seed-$$(echo "$$f" | tr '/' '_')"; done
	RUSTC_BOOTSTRAP=1 $(CARGO) fuzz run $(FUZZ_TARGET) fuzz/corpus/$(FUZZ_TARGET) \
	  -- -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=4096

clean:
	$(CARGO) clean
	rm -rf bench/out bench/target fuzz/target dist
