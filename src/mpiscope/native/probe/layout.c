/* Prints the size and field offsets of the raw-format structs, one
 * "struct field offset" line each; tests/unit/test_record_layout.py compares
 * them with the NumPy dtypes of mpiscope/trace/record.py. */
#include <stddef.h>
#include <stdio.h>

#include "../runtime/record.h"

#define F(s, f) printf(#s " " #f " %zu\n", offsetof(struct s, f))
#define S(s) printf(#s " sizeof %zu\n", sizeof(struct s))

int main(void)
{
    S(msc_rec); F(msc_rec, t_enter); F(msc_rec, t_leave); F(msc_rec, bytes); F(msc_rec, callsite);
    F(msc_rec, req); F(msc_rec, peer); F(msc_rec, tag); F(msc_rec, comm); F(msc_rec, call);
    S(msc_block_header); F(msc_block_header, magic); F(msc_block_header, version); F(msc_block_header, thread);
    F(msc_block_header, rank); F(msc_block_header, seq); F(msc_block_header, tick0); F(msc_block_header, ns0);
    F(msc_block_header, tick_last); F(msc_block_header, ns_last);
    F(msc_block_header, crc); F(msc_block_header, crc_records); F(msc_block_header, reserved);
    S(msc_commdef); F(msc_commdef, magic); F(msc_commdef, id); F(msc_commdef, kind); F(msc_commdef, gid);
    F(msc_commdef, size); F(msc_commdef, remote_size); F(msc_commdef, my_rank); F(msc_commdef, crc);
    F(msc_file_header, magic); F(msc_file_header, version); F(msc_file_header, rank); F(msc_file_header, world_size);
    F(msc_file_header, clock_kind); F(msc_file_header, state); F(msc_file_header, end_signal);
    F(msc_file_header, nblocks); F(msc_file_header, tick_init); F(msc_file_header, ns_init);
    F(msc_file_header, tick_end); F(msc_file_header, offset_init_ns); F(msc_file_header, offset_end_at_ns);
    F(msc_file_header, sync_rtt_end_ns); F(msc_file_header, dropped); F(msc_file_header, hostname);
    F(msc_file_header, boot_id); F(msc_file_header, writer_cpu_ns); F(msc_file_header, writer_blocks);
    F(msc_file_header, blocks_sealed); F(msc_file_header, sealed); F(msc_file_header, crc);
    F(msc_file_header, cpus_online); F(msc_file_header, cpus_allowed); F(msc_file_header, cpu_mask);
    F(msc_file_header, mpi_library); S(msc_file_header);
    printf("constants version %u page %u header %u block %u recs %u magic %llu\n", MSC_FORMAT_VERSION,
           MSC_HEADER_PAGE, MSC_HEADER_BYTES, MSC_BLOCK_BYTES, (unsigned)MSC_RECS_PER_BLOCK,
           (unsigned long long)MSC_FILE_MAGIC);
    return 0;
}
