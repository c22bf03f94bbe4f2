"""mpiscope: see, diagnose and fix the communication of MPI programs."""

__version__ = "0.1.0"
