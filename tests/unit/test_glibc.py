"""mpiscope's threads share glibc's one heap (glibc.one_arena): a heap per thread kept what each
freed out of the others' reach (a merge in pieces peaked 20 % higher)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import require

from mpiscope.glibc import glibc

THREADS = """
import ctypes, threading
{imports}
import numpy as np
kept = []
def work():
    kept.append(np.ones(1000))   # 8 KB, from a heap (below the threshold for a mapping of its own)
threads = [threading.Thread(target=work) for _ in range(3)]
for t in threads: t.start()
for t in threads: t.join()
ctypes.CDLL("libc.so.6").malloc_stats()   # one "Arena N:" block per heap, on stderr
"""


def heaps(imports: str) -> int:
    done = subprocess.run([sys.executable, "-c", THREADS.format(imports=imports)], capture_output=True, text=True,
                          check=True)
    return sum(line.startswith("Arena ") for line in done.stderr.splitlines())


def test_threads_of_a_process_that_imports_mpiscope_share_one_heap():
    require(glibc() is not None, "glibc (malloc_stats, mallopt)", "run on a glibc system such as Debian")
    assert heaps("") > 1          # without it, threads take heaps of their own
    assert heaps("import mpiscope") == 1
