"""hang.c's "recv" mode in Python (mpi4py): rank 1 receives what rank 0 never sends, the others
enter a barrier. Python's SIGINT handler only sets a flag, so Ctrl-C leaves a rank blocked in MPI."""
from mpi4py import MPI

comm = MPI.COMM_WORLD
for _ in range(10):
    comm.allreduce(0)
if comm.rank == 0:
    print("ready", flush=True)
if comm.rank == 1:
    comm.recv(source=0, tag=7)
else:
    comm.Barrier()
