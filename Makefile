# Everything a fresh machine needs: `make run` brings a broker up, `make test` runs the whole suite, `make docs`
# builds the documentation site into build/site (warnings, broken internal links included, are errors).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
DEB_PACKAGES := kafkacat zookeeper default-jdk-headless maven chromium chromium-driver nftables iproute2
ARGS ?=
PYTEST_ARGS ?=
# The brokers' event loop (src/odradek/event_loop.py): uvloop, or `make test ODRADEK_EVENT_LOOP=asyncio` to opt out.
ODRADEK_EVENT_LOOP ?= uvloop
export ODRADEK_EVENT_LOOP

.PHONY: run test lint docs bench demo lab sysdeps venv jars clean

sysdeps:
	@missing=""; \
	command -v kcat >/dev/null 2>&1 || command -v kafkacat >/dev/null 2>&1 || missing="$$missing kafkacat"; \
	[ -e /usr/share/zookeeper/bin/zkServer.sh ] || missing="$$missing zookeeper"; \
	command -v java >/dev/null 2>&1 || missing="$$missing default-jdk-headless"; \
	command -v javac >/dev/null 2>&1 || missing="$$missing default-jdk-headless"; \
	command -v mvn >/dev/null 2>&1 || missing="$$missing maven"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v chromedriver >/dev/null 2>&1 || missing="$$missing chromium-driver"; \
	command -v nft >/dev/null 2>&1 || missing="$$missing nftables"; \
	command -v ip >/dev/null 2>&1 || missing="$$missing iproute2"; \
	command -v openssl >/dev/null 2>&1 || missing="$$missing openssl"; \
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
	$(PIP) install -q -e '.[test,spark,docs]'
	touch $@

venv: $(VENV)/.stamp-installed

run: sysdeps venv
	$(VENV)/bin/odradek up $(ARGS)

# Apache Kafka 3.9 and 4.x jars from Maven Central into .cache/jars (git-ignored, reused; $$ODRADEK_JAR_CACHE moves it):
# the tests run real Kafka brokers, tools and Java clients beside odradek (src/odradek/apache_kafka).
jars: sysdeps venv
	$(PY) -m odradek.apache_kafka fetch

test: sysdeps venv jars
	$(PY) -m pytest $(PYTEST_ARGS)

docs: venv
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --clean --site-dir build/site

# lint-imports: ARCHITECTURE.md's layer table as import-linter contracts ([tool.importlinter] in pyproject.toml).
lint: venv
	$(VENV)/bin/ruff check src tests bench examples
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache

# The lab (needs root): `make lab` brings up three ZooKeeper servers and three brokers, each on its own
# network namespace, until Ctrl-C; `make lab ARGS="run --seed 7 --faults 20"` runs the nemesis and the checker.
lab: sysdeps venv
	$(PY) -m odradek.lab $(or $(ARGS),up)

demo: sysdeps venv
	$(VENV)/bin/odradek demo $(ARGS)

clean:
	rm -rf $(VENV) .odradek-data .pytest_cache .mypy_cache .ruff_cache
