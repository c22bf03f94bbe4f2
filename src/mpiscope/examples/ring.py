"""Ring with mpi4py: a pickled object and a NumPy buffer go once around.

usage: mpiexec -n 4 python ring.py [iters]
"""

import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
nxt, prv = (rank + 1) % size, (rank - 1) % size
iters = int(sys.argv[1]) if len(sys.argv) > 1 else 3
buf = np.zeros(16, dtype=np.float64)
for i in range(iters):
    if rank == 0:
        comm.Send(buf, dest=nxt, tag=i)
        comm.Recv(buf, source=prv, tag=i)
    else:
        comm.Recv(buf, source=prv, tag=i)
        comm.Send(buf, dest=nxt, tag=i)
token = comm.sendrecv({"rank": rank}, dest=nxt, sendtag=100, source=prv, recvtag=100)
assert token["rank"] == prv
comm.Barrier()
