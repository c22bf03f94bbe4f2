! From Fortran: a polling loop of MPI_IPROBE while rank 0 sleeps 20 ms before each send (a sleep,
! not a busy loop: on a loaded 2-core machine the prober lost its core to the worker), and an
! MPI_SEND to a rank the world does not have under MPI_ERRORS_RETURN, which fails and sends nothing.
! The loop must fold into one record per round and be its late-sender wait; the failed send
! must carry its error code and be no message.
program probe_fail_f
  use mpi
  use, intrinsic :: iso_c_binding, only: c_int
  implicit none
  interface
    integer(c_int) function usleep(us) bind(C, name="usleep")
      import :: c_int
      integer(c_int), value :: us
    end function usleep
  end interface
  integer :: rank, ierr, berr, i, status(MPI_STATUS_SIZE)
  logical :: found
  double precision :: x(4)
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  x = 1
  do i = 1, 5
    if (rank == 0) then
      ierr = usleep(20000_c_int)
      call MPI_Send(x, 4, MPI_DOUBLE_PRECISION, 1, i, MPI_COMM_WORLD, ierr)
    else if (rank == 1) then
      found = .false.
      do while (.not. found)
        call MPI_Iprobe(0, i, MPI_COMM_WORLD, found, status, ierr)
      end do
      call MPI_Recv(x, 4, MPI_DOUBLE_PRECISION, 0, i, MPI_COMM_WORLD, status, ierr)
    end if
  end do
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN, ierr)
  if (rank == 0) call MPI_Send(x, 4, MPI_DOUBLE_PRECISION, 99, 99, MPI_COMM_WORLD, berr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call MPI_Finalize(ierr)
end program probe_fail_f
