# Everything a fresh machine needs: `make run` brings a broker up, `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
DEB_PACKAGES := kafkacat zookeeper default-jre-headless chromium chromium-driver
ARGS ?=
PYTEST_ARGS ?=

.PHONY: run test lint bench demo sysdeps venv clean

sysdeps:
	@missing=""; \
	command -v kcat >/dev/null 2>&1 || command -v kafkacat >/dev/null 2>&1 || missing="$$missing kafkacat"; \
	[ -e /usr/share/zookeeper/bin/zkServer.sh ] || missing="$$missing zookeeper"; \
	command -v java >/dev/null 2>&1 || missing="$$missing default-jre-headless"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v chromedriver >/dev/null 2>&1 || missing="$$missing chromium-driver"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = "0" ]; then \
	    echo "installing Debian packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "missing Debian packages:$$missing (run: sudo apt-get install$$missing)"; exit 1; \
	  fi; \
	fi

$(VENV)/.stamp-installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[test,spark]'
	touch $@

venv: $(VENV)/.stamp-installed

run: sysdeps venv
	$(VENV)/bin/odradek up $(ARGS)

test: sysdeps venv
	$(PY) -m pytest $(PYTEST_ARGS)

lint: venv
	$(VENV)/bin/ruff check src tests bench examples
	$(VENV)/bin/mypy

demo: sysdeps venv
	$(VENV)/bin/odradek demo $(ARGS)

clean:
	rm -rf $(VENV) .odradek-data .pytest_cache .mypy_cache .ruff_cache
