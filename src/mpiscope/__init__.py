"""mpiscope: see, diagnose and fix the communication of MPI programs."""

from mpiscope.glibc import one_arena

__version__ = "0.1.0"

# before NumPy, Polars and Arrow start threads (glibc.one_arena)
one_arena()
