! Ring in Fortran 2008 (`use mpi_f08`): handles are derived types and ierror
! is optional. Per round a token travels rank -> rank+1 with MPI_Irecv,
! MPI_Send and MPI_Waitall, then MPI_Sendrecv goes the other way (its status
! says who sent), and MPI_Allreduce sums; rank 0 broadcasts once at the end,
! and sends the sum to the last rank, which receives it from any source with
! MPI_STATUS_IGNORE; the ranks are gathered in place (MPI_IN_PLACE: the send
! count and type are ignored). Some calls pass ierror, some leave it out.
! usage: ring_f08 [iters]
program ring_f08
    use mpi_f08
    implicit none
    integer :: ierr, rank, nprocs, i, iters, next, prev, nargs, ranks(64)
    type(MPI_Request) :: reqs(1)
    type(MPI_Status) :: st
    double precision :: buf(8), token(8), back(4), total
    character(len=16) :: arg

    call MPI_Init()
    call MPI_Comm_rank(MPI_COMM_WORLD, rank)
    call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
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
        call MPI_Irecv(buf, 8, MPI_DOUBLE_PRECISION, prev, i, MPI_COMM_WORLD, reqs(1))
        call MPI_Send(token, 8, MPI_DOUBLE_PRECISION, next, i, MPI_COMM_WORLD, ierr)
        call MPI_Waitall(1, reqs, MPI_STATUSES_IGNORE)
        call MPI_Sendrecv(token, 4, MPI_DOUBLE_PRECISION, prev, 100 + i, back, 4, MPI_DOUBLE_PRECISION, &
                          MPI_ANY_SOURCE, 100 + i, MPI_COMM_WORLD, st)
        if (st%MPI_SOURCE /= next) error stop "MPI_Sendrecv: wrong source"
        call MPI_Allreduce(buf(1), total, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
    end do
    call MPI_Bcast(total, 1, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD)
    if (rank == 0) call MPI_Send(total, 1, MPI_DOUBLE_PRECISION, nprocs - 1, 200, MPI_COMM_WORLD)
    if (rank == nprocs - 1) call MPI_Recv(total, 1, MPI_DOUBLE_PRECISION, MPI_ANY_SOURCE, 200, MPI_COMM_WORLD, &
                                          MPI_STATUS_IGNORE)
    ranks(rank + 1) = rank
    call MPI_Allgather(MPI_IN_PLACE, 7, MPI_DOUBLE_PRECISION, ranks, 1, MPI_INTEGER, MPI_COMM_WORLD)
    do i = 1, nprocs
        if (ranks(i) /= i - 1) error stop "MPI_Allgather in place: wrong result"
    end do
    call MPI_Finalize(ierr)
end program ring_f08
