"""Fortran compilers' symbols read as the source names the procedures (callsites.fortran_name)."""

from __future__ import annotations

import pytest

from mpiscope.trace.callsites import fortran_name


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
