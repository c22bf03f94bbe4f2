"""Compilers' symbols read as the source names the procedures: Fortran's (callsites.fortran_name)
and Cython's, for Python programs (callsites.cython_name)."""

from __future__ import annotations

import pytest

from mpiscope.trace.callsites import cython_name, fortran_name


@pytest.mark.parametrize("symbol, where, name", [
    ("__clover_module_MOD_clover_exchange", "??:0", "clover_module::clover_exchange"),  # gfortran
    ("_QMcomm_modPexchange", "??:0", "comm_mod::exchange"),                            # LLVM flang
    ("_QMmFhostPinner", "a.f90:1", "m::host::inner"),
    ("_QPsolve", "solve.F90:12", "solve"),
    ("comm_mp_exchange_", "??:0", "comm::exchange"),                                   # ifort, ifx
    ("helper_", "/src/m.f90:9", "helper"),                                             # external procedure
    ("helper_", "/src/m.c:9", "helper_"),              # a C function may end in an underscore
    ("helper_", "??:0", "helper_"),
    ("MAIN__", "/src/m.f90:13", "MAIN__"),
    ("std::vector<int>::push_back(int const&)", "a.cc:1", "std::vector<int>::push_back(int const&)"),
])
def test_fortran_symbols_read_as_the_source_names_them(symbol, where, name):
    assert fortran_name(symbol, where) == name


@pytest.mark.parametrize("symbol, name", [
    ("__pyx_pw_6mpi4py_3MPI_4Comm_71Recv", "mpi4py.MPI.Comm.Recv"),        # a method (counter 71)
    ("__pyx_pw_6mpi4py_3MPI_4Comm_261sendrecv", "mpi4py.MPI.Comm.sendrecv"),
    ("__pyx_f_6mpi4py_3MPI_PyMPI_recv", "mpi4py.MPI.PyMPI_recv"),          # a cdef function
    ("__pyx_pw_6mpi4py_3MPI_9_commctx_inter", "mpi4py.MPI._commctx_inter"),  # 9: a counter, not a length
    ("__pyx_f_6mpi4py_3MPI_10_p_msg_cco_for_allgather", "mpi4py.MPI._p_msg_cco.for_allgather"),
    ("__pyx_pw_8petsc4py_5PETSc_3Vec_45norm", "petsc4py.PETSc.Vec.norm"),
    # a counter that reads as a scope's length: 3Get_ would be a scope "Get"
    ("__pyx_pw_6mpi4py_3MPI_13Distgraphcomm_3Get_dist_neighbors_count",
     "mpi4py.MPI.Distgraphcomm.Get_dist_neighbors_count"),
    ("__pyx_pw_6mpi4py_3MPI_4Comm_7__bool__", "mpi4py.MPI.Comm.__bool__"),
    ("__pyx_f_6mpi4py_3MPI_PyMPI_bcast_p2p.constprop.0", "mpi4py.MPI.PyMPI_bcast_p2p"),  # a GCC clone
    ("__pyx_tp_new_6mpi4py_3MPI_Comm", None),
    ("main", None),
    ("__pyx_pw_", None),
])
def test_cython_symbols_read_as_python_names(symbol, name):
    assert cython_name(symbol) == name


def test_compiler_clones_are_named_as_their_function(tmp_path):
    """GCC's copies of a function (.constprop.0, .isra.0, .part.0) are the function the source has."""
    from mpiscope.trace.callsites import _label

    assert _label("/bin/app", 0x1234, "exchange.constprop.0", "??:0") == "exchange (app+0x1234)"
    assert _label("/bin/app", 0x1234, "__halo_MOD_swap.isra.0", "/src/halo.f90:7") == "halo::swap (halo.f90:7)"
