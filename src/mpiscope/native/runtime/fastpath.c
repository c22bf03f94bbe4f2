/* Datatype sizes and received byte counts without a call into the MPI.
 *
 * PMPI_Type_size and PMPI_Get_elements_x cost 6 and 11 ns here, a third of
 * the recorder's own cost on a receive. Both answers are in plain sight for
 * the two MPI families: MPICH encodes a predefined datatype's size in its
 * handle (bits 8-15 of 0x4c..), and MPICH's and Open MPI's status structs
 * hold the byte count (count_lo/count_hi_and_cancelled, _ucount). The layout
 * is checked against the MPI's own answers at start-up; any mismatch turns
 * the shortcut off and the calls are used, so a future layout change costs
 * speed, never a wrong byte count.
 */
#include "runtime.h"

int msc_fast_types;
int msc_fast_status;

static int types_agree(void)
{
#ifdef MPICH_NUMVERSION
    if (sizeof(MPI_Datatype) != sizeof(uint32_t)) return 0;
    const MPI_Datatype probe[] = {MPI_BYTE, MPI_CHAR, MPI_INT, MPI_DOUBLE, MPI_LONG_DOUBLE,
                                  MPI_INT64_T, MPI_C_DOUBLE_COMPLEX, MPI_PACKED};
    for (size_t i = 0; i < sizeof probe / sizeof probe[0]; i++) {
        int size = -1;
        if (PMPI_Type_size(probe[i], &size) != MPI_SUCCESS) return 0;
        if (!msc_builtin_size(probe[i]) || msc_builtin_size(probe[i]) != (uint32_t)size) return 0;
    }
    return 1;
#else
    return 0;
#endif
}

#if defined(MPICH_NUMVERSION) || defined(OPEN_MPI)
static int status_agrees(MPI_Count n)
{
    MPI_Status st;
    memset(&st, 0, sizeof st);
    if (PMPI_Status_set_elements_x(&st, MPI_BYTE, n) != MPI_SUCCESS) return 0;
    return msc_status_count(&st) == (uint64_t)n;
}
#endif

void msc_fast_paths_init(void)
{
    msc_fast_types = types_agree();
#if defined(MPICH_NUMVERSION) || defined(OPEN_MPI)
    msc_fast_status = status_agrees(3) && status_agrees(((MPI_Count)5 << 32) + 7);
#endif
}
