# The two commands: `make demo` (real training + sidecar + alerts) and `make test` (the suite).
# Both bootstrap .venv on first use; re-running is fast once it is there.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.msdoctor-bootstrapped

.PHONY: demo test bootstrap system bench clean-venv

demo: bootstrap
	$(PY) -m msdoctor demo

test: bootstrap system
	$(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadgroup --no-loadscope-reorder --durations=30 tests

bench: bootstrap
	@for b in tests/bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

bootstrap: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip wheel setuptools
	$(PY) -m pip install -q -e ".[train,test]"
	touch $(STAMP)

# Debian packages the real-server tests use (Prometheus, Alertmanager, tmux, Chromium).
system:
	@bash scripts/bootstrap-system

clean-venv:
	rm -rf $(VENV)
