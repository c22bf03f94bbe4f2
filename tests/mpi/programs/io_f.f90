! MPI-IO from Fortran (`use mpi`): the file opened by name, its view set, then each rank writes its
! 1024 INTEGERs at its own offset
! (an INTEGER(KIND=MPI_OFFSET_KIND) argument) with MPI_FILE_WRITE_AT_ALL, ITERS times, then
! reads them back with MPI_FILE_READ_AT and stops with code 1 if they differ.
! usage: io_f ITERS FILE
program io_f
    use mpi
    implicit none
    integer, parameter :: n = 1024
    integer :: ierr, rank, fh, i, j, iters, buf(n), back(n)
    integer :: status(MPI_STATUS_SIZE)
    integer(kind=MPI_OFFSET_KIND) :: offset, fsize
    character(len=16) :: arg
    character(len=256) :: path

    call MPI_INIT(ierr)
    call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
    call get_command_argument(1, arg)
    read (arg, *) iters
    call get_command_argument(2, path)
    call MPI_FILE_OPEN(MPI_COMM_WORLD, path, MPI_MODE_CREATE + MPI_MODE_RDWR, MPI_INFO_NULL, fh, ierr)
    if (ierr /= MPI_SUCCESS) stop 2
    ! the default view, set again: a CHARACTER argument ('native') besides the file name
    call MPI_FILE_SET_VIEW(fh, int(0, MPI_OFFSET_KIND), MPI_BYTE, MPI_BYTE, 'native', MPI_INFO_NULL, ierr)
    if (ierr /= MPI_SUCCESS) stop 3
    offset = int(rank, MPI_OFFSET_KIND) * n * 4
    do i = 1, iters
        buf = [(i * 100000 + rank * 1000 + j, j = 1, n)]
        call MPI_FILE_WRITE_AT_ALL(fh, offset, buf, n, MPI_INTEGER, status, ierr)
    end do
    ! the standard's sync-barrier-sync: without it a collective write may still be on its way to the
    ! file through another rank (Open MPI 4.1's OMPIO: 5 runs of 12 read back old data)
    call MPI_FILE_SYNC(fh, ierr)
    call MPI_BARRIER(MPI_COMM_WORLD, ierr)
    call MPI_FILE_SYNC(fh, ierr)
    ! the size comes back through the recorder's wrapper: an INTEGER(KIND=MPI_OFFSET_KIND) output
    call MPI_FILE_GET_SIZE(fh, fsize, ierr)
    if (fsize /= int(4 * n * 4, MPI_OFFSET_KIND)) stop 4
    call MPI_FILE_READ_AT(fh, offset, back, n, MPI_INTEGER, status, ierr)
    call MPI_FILE_CLOSE(fh, ierr)
    call MPI_BARRIER(MPI_COMM_WORLD, ierr)
    if (rank == 0) call MPI_FILE_DELETE(path, MPI_INFO_NULL, ierr)
    call MPI_FINALIZE(ierr)
    if (any(back /= buf)) stop 1
end program io_f
