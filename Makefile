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

.PHONY: install up test deploy-test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: $(BIN)/python $(PYPROJECTS) requirements-dev.txt
	$(BIN)/python -m pip install -q $(addprefix -e ,$(PACKAGES) $(TEST_PACKAGES)) -r requirements-dev.txt
	touch $@

install: $(VENV)/.installed

up: install
	exec $(BIN)/aimem up --data-dir "$(DATA_DIR)" --port-base $(PORT_BASE)

test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS)

deploy-test: install  # compose/Helm/Prometheus/Grafana checks + the real-container test
	$(BIN)/python -m pytest tests/deploy $(PYTEST_ARGS)

bench: install
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV)
