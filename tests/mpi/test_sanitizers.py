"""The recorder under ThreadSanitizer (MPI_THREAD_MULTIPLE) and under
AddressSanitizer + UndefinedBehaviorSanitizer (the examples that exercise the
request, message and communicator tables). The sanitizer runtime is preloaded
first; UCX's malloc/mmap hooks are turned off, since they conflict with the
sanitizers' own interception (MPICH crashes under TSan with them on, with or
without mpiscope)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.conftest import MPICH, require

from mpiscope.mpi.build import rebuild

RUNTIME_ENV = {"UCX_MEM_MALLOC_HOOKS": "no", "UCX_MEM_MMAP_HOOK_MODE": "none"}


def sanitizer_runtime(name: str) -> str:
    cc = shutil.which("gcc")
    require(cc is not None, "gcc", "apt-get install gcc")
    path = subprocess.run([cc, f"-print-file-name={name}"], capture_output=True, text=True, check=False).stdout.strip()
    require(os.path.isabs(path) and Path(path).exists(), f"the {name} runtime", "apt-get install gcc")
    return path


def traced(tmp: Path, lib: Path, preload: list[str], prog: Path, ranks: int, args: list[str],
           extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    out = tmp / prog.name
    (out / "raw").mkdir(parents=True)
    env = dict(MPICH.environ(), MPISCOPE_DIR=str(out), LD_PRELOAD=":".join([*preload, str(lib / "libmpiscope.so")]),
               **RUNTIME_ENV, **extra)
    return subprocess.run([*MPICH.launch(ranks), str(prog), *args], env=env,
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.slow
def test_thread_sanitizer(tmp_path, example):
    tsan = sanitizer_runtime("libtsan.so")
    lib = rebuild(str(MPICH.mpicc), tmp_path / "tsan-lib", build_type="RelWithDebInfo", sanitize="thread",
                  recorder_only=True)
    done = traced(tmp_path, lib, [tsan], example("threads", MPICH), 2, ["4", "30"], {"TSAN_OPTIONS": "halt_on_error=0"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "WARNING: ThreadSanitizer" not in done.stderr, done.stderr[-5000:]


@pytest.mark.slow
def test_address_and_undefined_sanitizers(tmp_path, example):
    asan, ubsan = sanitizer_runtime("libasan.so"), sanitizer_runtime("libubsan.so")
    lib = rebuild(str(MPICH.mpicc), tmp_path / "asan-lib", build_type="RelWithDebInfo", sanitize="address,undefined",
                  recorder_only=True)
    for name in ("p2pmodes", "nbc", "comms", "rma"):
        done = traced(tmp_path, lib, [asan, ubsan], example(name, MPICH), 4, [],
                      {"ASAN_OPTIONS": "detect_leaks=0", "UBSAN_OPTIONS": "print_stacktrace=1"})
        assert done.returncode == 0, (name, done.stderr[-3000:])
        assert "ERROR: AddressSanitizer" not in done.stderr and "runtime error" not in done.stderr, \
            (name, done.stderr[-5000:])
