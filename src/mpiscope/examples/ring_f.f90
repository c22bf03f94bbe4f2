! Ring in Fortran (`use mpi`): a token travels rank -> rank+1 ITERS times,
! with a nonblocking receive, a blocking send, MPI_WAITALL and an
! MPI_ALLREDUCE per round; then the ranks are gathered in place (MPI_IN_PLACE:
! the send count and type are ignored). usage: ring_f [iters]
program ring_f
    use mpi
    implicit none
    integer :: ierr, rank, nprocs, i, iters, next, prev, nargs
    integer :: reqs(1), stats(MPI_STATUS_SIZE, 1), ranks(64)
    double precision :: buf(8), token(8), total
    character(len=16) :: arg

    call MPI_INIT(ierr)
    call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
    call MPI_COMM_SIZE(MPI_COMM_WORLD, nprocs, ierr)
    iters = 3
    nargs = command_argument_count()
    if (nargs > 0) then
        call get_command_argument(1, arg)
        read (arg, *) iters
    end if
    next = mod(rank + 1, nprocs)
    prev = mod(rank + nprocs - 1, nprocs)
    token = rank
    do i = 1, iters
        call MPI_IRECV(buf, 8, MPI_DOUBLE_PRECISION, prev, i, MPI_COMM_WORLD, reqs(1), ierr)
        call MPI_SEND(token, 8, MPI_DOUBLE_PRECISION, next, i, MPI_COMM_WORLD, ierr)
        call MPI_WAITALL(1, reqs, stats, ierr)
        call MPI_ALLREDUCE(buf(1), total, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
    end do
    ranks(rank + 1) = rank
    call MPI_ALLGATHER(MPI_IN_PLACE, 7, MPI_DOUBLE_PRECISION, ranks, 1, MPI_INTEGER, MPI_COMM_WORLD, ierr)
    do i = 1, nprocs
        if (ranks(i) /= i - 1) error stop "MPI_ALLGATHER in place: wrong result"
    end do
    call MPI_FINALIZE(ierr)
end program ring_f
