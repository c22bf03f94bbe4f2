/* Helpers of the Fortran entry points (fortran_gen.c and fortran.c). */
#ifndef MSC_FORTRAN_H
#define MSC_FORTRAN_H

#include "runtime.h"

#define MSC_UNUSED __attribute__((unused))

/* The MPI standard ABI (MPI-5, e.g. mpicc -mpi-abi) has no Fortran types:
 * its programs are C, and a build for it leaves the Fortran entry points out. */
#ifdef MPI_ABI_VERSION
#define MSC_HAVE_FORTRAN 0
#else
#define MSC_HAVE_FORTRAN 1

/* Fortran INTEGER arrays (counts, displacements) are read as C int arrays. */
_Static_assert(sizeof(MPI_Fint) == sizeof(int), "MPI_Fint must be a C int");

/* MPI-4 names the size of a Fortran status in mpi.h; before, it is the C
 * status in MPI_Fint units in both MPICH and Open MPI. */
#ifndef MPI_F_STATUS_SIZE
#define MPI_F_STATUS_SIZE ((int)(sizeof(MPI_Status) / sizeof(MPI_Fint)))
#endif

/* MPI_STATUS(ES)_IGNORE of mpif.h/`use mpi`, or of `use mpi_f08`. */
int msc_f_status_ignored(const MPI_Fint *f);
int msc_f_statuses_ignored(const MPI_Fint *f);
void *msc_fortran_symbol(const char *name);
int msc_f_in_place(const void *buf);
const MPI_Datatype *msc_f2c_types(const MPI_Fint *types, int32_t n);
int32_t msc_f_peers(MPI_Comm comm);

#endif /* MSC_HAVE_FORTRAN */

#endif
