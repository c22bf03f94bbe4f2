! A Cartesian communicator made from Fortran (mpif.h's MPI_CART_CREATE), then an allreduce on it:
! one new communicator in the trace (MPICH's Fortran binding calls the C MPI_Cart_create, which
! the recorder wraps too). The allreduce is in a module procedure and the communicator is freed in
! an external one: the call sites name them as the source does (cart_ops::reduce, release).
module cart_ops
  use mpi
  implicit none
contains
  subroutine reduce(comm, x, y)
    integer, intent(in) :: comm
    double precision, intent(in) :: x
    double precision, intent(out) :: y
    integer :: ierr
    call MPI_Allreduce(x, y, 1, MPI_DOUBLE_PRECISION, MPI_SUM, comm, ierr)
  end subroutine reduce
end module cart_ops

subroutine release(comm)
  use mpi
  implicit none
  integer, intent(inout) :: comm
  integer :: ierr
  call MPI_Comm_free(comm, ierr)
end subroutine release

program cart_f
  use mpi
  use cart_ops
  implicit none
  integer :: ierr, cart, dims(2)
  logical :: periods(2)
  double precision :: x, y
  call MPI_Init(ierr)
  dims = 2
  periods = .false.
  call MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, .true., cart, ierr)
  x = 1
  call reduce(cart, x, y)
  call release(cart)
  call MPI_Finalize(ierr)
end program cart_f
