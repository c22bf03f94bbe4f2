! io_f.f90 through `use mpi_f08`: handles are derived types, ierror is optional. Each rank writes
! its 1024 INTEGERs at its own offset with MPI_File_write_at_all, ITERS times, then reads them back
! with MPI_File_read_at and stops with code 1 if they differ. usage: io_f08 ITERS FILE
program io_f08
    use mpi_f08
    implicit none
    integer, parameter :: n = 1024
    integer :: rank, i, j, iters, buf(n), back(n)
    type(MPI_File) :: fh
    type(MPI_Status) :: status
    integer(kind=MPI_OFFSET_KIND) :: offset
    character(len=16) :: arg
    character(len=256) :: path

    call MPI_Init()
    call MPI_Comm_rank(MPI_COMM_WORLD, rank)
    call get_command_argument(1, arg)
    read (arg, *) iters
    call get_command_argument(2, path)
    call MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE + MPI_MODE_RDWR, MPI_INFO_NULL, fh)
    offset = int(rank, MPI_OFFSET_KIND) * n * 4
    do i = 1, iters
        buf = [(i * 100000 + rank * 1000 + j, j = 1, n)]
        call MPI_File_write_at_all(fh, offset, buf, n, MPI_INTEGER, status)
    end do
    ! sync-barrier-sync: the collective writes are in the file for every rank's reads
    call MPI_File_sync(fh)
    call MPI_Barrier(MPI_COMM_WORLD)
    call MPI_File_sync(fh)
    call MPI_File_read_at(fh, offset, back, n, MPI_INTEGER, MPI_STATUS_IGNORE)
    call MPI_File_close(fh)
    call MPI_Barrier(MPI_COMM_WORLD)
    if (rank == 0) call MPI_File_delete(path, MPI_INFO_NULL)
    call MPI_Finalize()
    if (any(back /= buf)) stop 1
end program io_f08
