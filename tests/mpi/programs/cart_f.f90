! A Cartesian communicator made from Fortran (mpif.h's MPI_CART_CREATE), then an allreduce on it:
! one new communicator in the trace (MPICH's Fortran binding calls the C MPI_Cart_create, which
! the recorder wraps too).
program cart_f
  use mpi
  implicit none
  integer :: ierr, cart, dims(2)
  logical :: periods(2)
  double precision :: x, y
  call MPI_Init(ierr)
  dims = 2
  periods = .false.
  call MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, .true., cart, ierr)
  x = 1
  call MPI_Allreduce(x, y, 1, MPI_DOUBLE_PRECISION, MPI_SUM, cart, ierr)
  call MPI_Comm_free(cart, ierr)
  call MPI_Finalize(ierr)
end program cart_f
