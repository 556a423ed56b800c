# aimem: `make up` runs the local stack, `make test` runs every test.
# Only python3, make and git are assumed; everything else installs into $(VENV).
PYTHON ?= python3
VENV ?= .venv
PORT_BASE ?= 8701
DATA_DIR ?= $(if $(AIMEM_DATA_DIR),$(AIMEM_DATA_DIR),./data)
BIN := $(VENV)/bin
PACKAGES := libs/aimem-common services/writer services/ingress services/query \
            services/maintainer services/mcp-gateway cli
# Test support (seeder, stack launcher, fake LLM): installed for tests, never in the image.
TEST_PACKAGES := libs/aimem-testing
PYPROJECTS := $(addsuffix /pyproject.toml,$(PACKAGES) $(TEST_PACKAGES))

.PHONY: install agents up test deploy-test model-check bench screenshots clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: $(BIN)/python $(PYPROJECTS) requirements-dev.txt
	$(BIN)/python -m pip install -q $(addprefix -e ,$(PACKAGES) $(TEST_PACKAGES)) -r requirements-dev.txt
	touch $@

install: $(VENV)/.installed

# The real agent CLIs the e2e tests drive (pinned; npm installs them once into
# ~/.cache/aimem-agents, outside this tree; tests call the same installer on first use).
agents: install
	$(BIN)/python -m aimem_testing.agents

up: install
	exec $(BIN)/aimem up --data-dir "$(DATA_DIR)" --port-base $(PORT_BASE)

test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS)

deploy-test: install  # compose/Helm/Prometheus/Grafana checks + the real-container test
	$(BIN)/python -m pytest tests/deploy $(PYTEST_ARGS)

# The long run of the session/handoff lifecycle model (tests/e2e/test_lifecycle_model.py):
# MODEL_EXAMPLES random interleavings of MODEL_STEPS steps through the real stack, fixed seed;
# prints examples, steps and invariant checks. AIMEM_MODEL_GAPS=none checks every issue-26 class.
MODEL_EXAMPLES ?= 500
MODEL_STEPS ?= 25
model-check: install
	AIMEM_MODEL_EXAMPLES=$(MODEL_EXAMPLES) AIMEM_MODEL_STEPS=$(MODEL_STEPS) AIMEM_MODEL_REPORT=$(CURDIR)/.model-check.txt \
	  $(BIN)/python -m pytest tests/e2e/test_lifecycle_model.py -k test_lifecycle_matches_the_model \
	  -p no:cacheprovider -q -s --timeout 0 $(PYTEST_ARGS); rc=$$?; cat $(CURDIR)/.model-check.txt; exit $$rc

bench: install
	$(BIN)/python -m bench

# The README's pictures (docs/pictures-*.png): a seeded local stack shot by Debian's Chromium.
screenshots: install
	$(BIN)/python -m aimem_testing.screenshots --out docs

clean:
	rm -rf $(VENV)
