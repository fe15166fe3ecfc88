# Two commands on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The CDK CLI (npm, pinned in infra/package-lock.json) lives in infra/node_modules; the app is Python.
CDK := infra/node_modules/.bin/cdk
CDK_FLAGS := --no-notices --output cdk.out
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CDK_DISABLE_CLI_TELEMETRY := true
SAM_VENV := .venv-sam
TEMPLATE := cdk.out/Memstack.template.json

BENCH_STAMP := $(VENV)/.installed-bench
# Memstack Studio's browser tests drive Debian's chromium through Playwright (never a downloaded browser).
CHROMIUM := /usr/bin/chromium

.PHONY: bench demo test lint typecheck install clean synth bundle sam-check cdk-cli browser

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,infra,strands,agents,mcp]'
	touch $(STAMP)

install: $(STAMP)

# Installed with apt when missing: as root, or through sudo when there is one.
$(CHROMIUM):
	@if [ "$$(id -u)" = 0 ]; then SUDO=; \
	elif command -v sudo >/dev/null 2>&1; then SUDO=sudo; \
	else echo "$(CHROMIUM) is missing and neither root nor sudo is available: install Debian's chromium" >&2; exit 1; fi; \
	$$SUDO apt-get update && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium

browser: $(CHROMIUM)

# The benchmarks need matplotlib (the optional `bench` group), kept out of `make test`'s install.
$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $(BENCH_STAMP)

# Every benchmark -> benchmarks/results/ (README.md, Markdown, JSON, PNG); ARGS="--quick" for a fast run,
# written to benchmarks/results/quick/ (git-ignored) so it never overwrites the committed full run.
bench: $(BENCH_STAMP)
	$(BIN)/python benchmarks/run_all.py $(ARGS)

demo: $(STAMP)
	$(BIN)/memstack demo $(ARGS)

test: $(STAMP) $(CHROMIUM)
	$(BIN)/ruff check shared tests benchmarks functions infra app.py examples
	$(BIN)/mypy
	$(BIN)/mypy infra app.py
	$(BIN)/python -m pytest -n 2 $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check shared tests benchmarks functions infra app.py examples
	$(BIN)/ruff format --check shared tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy
	$(BIN)/mypy infra app.py

clean:
	rm -rf $(VENV) .memstack .pytest_cache .mypy_cache .ruff_cache cdk.out .cdk-bundle-cache .venv-sam .aws-sam infra/node_modules

$(CDK): infra/package.json infra/package-lock.json
	npm ci --prefix infra --no-audit --no-fund --loglevel=error
	touch $(CDK)

cdk-cli: $(CDK)

# The CloudFormation template, offline, without bundling the functions' code (seconds).
synth: $(STAMP) $(CDK)
	$(CDK) synth $(CDK_FLAGS) --quiet -c bundle=false
	@echo "template: $(TEMPLATE)"

# The deployable assembly: each function bundled locally with pip for Lambda (arm64, CPython 3.12), no Docker.
bundle: $(STAMP) $(CDK)
	$(CDK) synth $(CDK_FLAGS) --quiet
	@du -sh cdk.out/asset.*/ 2>/dev/null || true

# SAM reads the bundled template: `sam validate --lint` and `sam build` (SAM CLI in its own venv).
$(SAM_VENV)/bin/sam:
	$(PY) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(SAM_VENV)/bin/python -m pip install --quiet aws-sam-cli

sam-check: bundle $(SAM_VENV)/bin/sam
	SAM_CLI_TELEMETRY=0 $(SAM_VENV)/bin/sam validate --lint --template $(TEMPLATE) --region us-east-1
	SAM_CLI_TELEMETRY=0 $(SAM_VENV)/bin/sam build --template $(TEMPLATE) --build-dir .aws-sam/build --region us-east-1
