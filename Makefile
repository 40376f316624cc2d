# WebCodex: the two commands a new user needs are `make run` and `make test`.
SHELL := /bin/bash
NODE_BIN := node_modules/.bin
# buf runs the protoc-gen-es plugin from the local install.
export PATH := $(CURDIR)/node_modules/.bin:$(PATH)
# Without PROJECT, `make run` and `make up` serve a copy of examples/sample-project made once
# under .webcodex/ (untracked): the tracked sample is never served, so never changed.
SAMPLE_COPY := .webcodex/sample-project
PROJECT ?= $(SAMPLE_COPY)
PORT ?= 8080
STAMP := node_modules/.webcodex-install-stamp
# `make` alone prints what each target does.
.DEFAULT_GOAL := help

docs: build
	node tools/scripts/gen-tools-doc.mjs

.PHONY: docs setup install generate codegen-check build lint format run dev up test test-unit test-integration test-e2e test-one mutation faults bench bench-compare chart images test-containers clean help

help:
	@echo "make run [PROJECT=dir] [PORT=8080]  start WebCodex embedded on a directory (default: a copy of the sample in .webcodex/)"
	@echo "make test                           lint, codegen check, unit, chart, integration and e2e tests"
	@echo "make test-one F=<file.test.ts>      build only that test's package and run that one test file"
	@echo "make mutation [M=name,...]          mutation testing (StrykerJS) of the safety-critical modules; score and survivors"
	@echo "make bench                          benchmarks (ratios against same-run baselines)"
	@echo "make bench-compare BASE=<dir>       this build against another built checkout, side by side"
	@echo "make faults                         long fault suite (1,000 Runner kills, 100,000 fuzz cases, 3 rounds of service kills, 10-minute soak); figures to bench-results/faults.json"
	@echo "make images                         the six service images (sizes at the end)"
	@echo "make test-containers                the images run as the chart runs them, and the containerised stack (needs a Docker engine)"
	@echo "make up PROJECT=dir                 distributed mode on localhost (needs WEBCODEX_POSTGRES_URL, WEBCODEX_REDIS_URL)"

$(STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund
	@touch $(STAMP)

install: $(STAMP)

# Pinned third-party MCP clients that need Node >= 22 (a Node 22 binary from the npm registry);
# a separate lockfile, used only by the e2e conformance tests.
CONFORMANCE_STAMP := tools/conformance/node_modules/.webcodex-install-stamp
$(CONFORMANCE_STAMP): tools/conformance/package.json tools/conformance/package-lock.json
	npm ci --prefix tools/conformance --ignore-scripts --no-audit --no-fund --loglevel=error
	@touch $(CONFORMANCE_STAMP)

generate: install
	$(NODE_BIN)/buf generate
	node tools/scripts/gen-proto-index.mjs

# Fails when the committed generated code differs from what buf generates now.
codegen-check: install
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(NODE_BIN)/buf generate -o $$tmp || { echo "codegen-check: buf generate failed"; exit 1; }; \
	test -d $$tmp/libs/proto/src/gen || { echo "codegen-check: buf generate wrote nothing"; exit 1; }; \
	if ! diff -r libs/proto/src/gen $$tmp/libs/proto/src/gen >/dev/null; then \
	  echo "codegen-check: libs/proto/src/gen is stale; run 'make generate' and commit"; diff -r libs/proto/src/gen $$tmp/libs/proto/src/gen | head -20; exit 1; fi; \
	node tools/scripts/gen-proto-index.mjs; \
	git diff --quiet -- libs/proto/src/index.ts || { echo "codegen-check: libs/proto/src/index.ts is stale; run 'make generate' and commit"; exit 1; }; \
	$(NODE_BIN)/buf lint proto; echo "codegen-check: generated code is current, buf lint clean"

build: install
	$(NODE_BIN)/tsc -b
	node tools/scripts/build-cards.mjs

setup: build

lint: build
	$(NODE_BIN)/eslint .
	$(NODE_BIN)/prettier --check --log-level warn .
	node tools/scripts/check-import-cycles.mjs
	node tools/scripts/check-file-size.mjs

# Formats the tree in place (what `make lint` checks); .prettierignore says what is left alone.
format: install
	$(NODE_BIN)/prettier --write --log-level warn .

$(SAMPLE_COPY):
	mkdir -p .webcodex && cp -R examples/sample-project $(SAMPLE_COPY)

run: build $(if $(filter $(SAMPLE_COPY),$(PROJECT)),$(SAMPLE_COPY))
	node tools/cli/bin/webcodex.js dev --project $(PROJECT) --port $(PORT)

dev: run

up: build $(if $(filter $(SAMPLE_COPY),$(PROJECT)),$(SAMPLE_COPY))
	node tools/cli/bin/webcodex.js up --project $(PROJECT)

test: build $(CONFORMANCE_STAMP)
	@$(MAKE) --no-print-directory lint
	@$(MAKE) --no-print-directory codegen-check
	@bash tools/scripts/ensure-services.sh
	@bash tools/scripts/ensure-toolchains.sh
	@bash tools/scripts/ensure-chromium.sh
	node tools/scripts/run-tests.mjs

test-unit: build
	@bash tools/scripts/ensure-toolchains.sh
	node tools/scripts/run-tests.mjs unit

test-integration: build $(CONFORMANCE_STAMP)
	@bash tools/scripts/ensure-services.sh
	@bash tools/scripts/ensure-chromium.sh
	node tools/scripts/run-tests.mjs integration e2e

# One test file: builds only the project that holds it (tsc -b is incremental) and runs it.
test-one: install
	@test -n "$(F)" || { echo "usage: make test-one F=<path/to/file.test.ts>" >&2; exit 2; }
	@node tools/scripts/test-one.mjs $(F)

# Mutation testing of the safety-critical modules (tools/mutation/modules.mjs) with StrykerJS,
# installed on demand from its own lockfile; slow (tens of minutes), so not part of `make test`.
# M=name,... runs only those modules. Figures to bench-results/mutation.json.
MUTATION_STAMP := tools/mutation/node_modules/.webcodex-install-stamp
$(MUTATION_STAMP): tools/mutation/package.json tools/mutation/package-lock.json
	npm ci --prefix tools/mutation --ignore-scripts --no-audit --no-fund --loglevel=error
	@touch $(MUTATION_STAMP)

mutation: build $(MUTATION_STAMP)
	M=$(M) node tools/mutation/run.mjs

# The long fault suite: 1,000 Runner kills (4 harnesses side by side), 100,000 fuzz cases, 3 rounds
# of service kills and datastore restarts, and a 10-minute soak at 32 callers; figures to
# bench-results/faults.json.
faults: build
	WEBCODEX_FAULTS_REPORT=1 WEBCODEX_FAULTS_KILLS=1000 WEBCODEX_FAULTS_KILL_SHARDS=4 WEBCODEX_FAULTS_FUZZ_CASES=100000 WEBCODEX_FAULTS_SERVICE_ROUNDS=3 WEBCODEX_FAULTS_SOAK_SECONDS=600 node tools/scripts/run-tests.mjs faults

# `make bench <part>...` runs only the named parts (e.g. `make bench economy`).
BENCH_PARTS := tool_calls tool_call_distributed tool_call_stdio spawn sandbox edit search audit ref_resolution validate_overhead agent_events economy mcp_gateway code_mode fleet provision
bench: build
	@bash tools/scripts/ensure-services.sh
	node tools/bench/dist/main.js $(filter $(BENCH_PARTS),$(MAKECMDGOALS))

# `make bench-compare BASE=<dir>`: this build against another built checkout, side by side in one
# run (read_files latency over stdio, embedded and distributed; embedded throughput); figures to
# bench-results/compare.json.
bench-compare: build
	@test -n "$(BASE)" || { echo "usage: make bench-compare BASE=<a built checkout of WebCodex>" >&2; exit 2; }
	@bash tools/scripts/ensure-services.sh
	node tools/bench/dist/compare.js "$(BASE)"

ifneq ($(filter bench,$(MAKECMDGOALS)),)
$(BENCH_PARTS):
	@:
endif

chart: install
	node --test tools/chart/

# The six images (tools/chart/images.sh: the multistage build where buildx and a registry serve
# it, otherwise the prebuilt build from this tree on a Debian base made with debootstrap).
images:
	bash tools/chart/images.sh

# The container suites alone (needs a Docker engine: DOCKER_HOST or the default socket; builds
# missing images first). `make test` runs them too, and says so when no engine answers.
test-containers: build
	node tools/scripts/run-tests.mjs containers

clean:
	rm -rf node_modules tools/conformance/node_modules */*/dist */*/*.tsbuildinfo test/dist $(STAMP)
