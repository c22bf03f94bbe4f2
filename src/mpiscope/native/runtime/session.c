/* MPI-4 sessions: a program may start MPI with MPI_Session_init and never
 * call MPI_Init. The first session then starts the recording: its
 * "mpi://WORLD" process set is the world (same processes, same order as
 * MPI_COMM_WORLD), and a communicator made from it carries the clock sync.
 * Finalizing that session ends the recording, unless MPI_Init was called
 * too: then MPI_Finalize does, as for any program.
 *
 * Like MPI_Init, MPI_Session_init must then be called by every process of
 * the job (the clock sync is collective over the world).
 */
#include <string.h>

#include "runtime.h"

#if MSC_HAVE_MPI4

static MPI_Session traced_session = MPI_SESSION_NULL;

/* The thread level the session provides, from its info ("thread_level"). */
static int session_thread_level(MPI_Session session)
{
    static const char *names[] = {"MPI_THREAD_SINGLE", "MPI_THREAD_FUNNELED", "MPI_THREAD_SERIALIZED",
                                  "MPI_THREAD_MULTIPLE"};
    static const int levels[] = {MPI_THREAD_SINGLE, MPI_THREAD_FUNNELED, MPI_THREAD_SERIALIZED,
                                 MPI_THREAD_MULTIPLE};
    MPI_Info info = MPI_INFO_NULL;
    char value[64] = "";
    int len = (int)sizeof value, flag = 0, level = MPI_THREAD_SINGLE;
    if (PMPI_Session_get_info(session, &info) != MPI_SUCCESS || info == MPI_INFO_NULL) return level;
    PMPI_Info_get_string(info, "thread_level", &len, value, &flag);
    for (int i = 0; flag && i < 4; i++)
        if (strcmp(value, names[i]) == 0) level = levels[i];
    PMPI_Info_free(&info);
    return level;
}

MSC_API int MPI_Session_init(MPI_Info info, MPI_Errhandler errhandler, MPI_Session *session)
{
    uint64_t t0 = msc_ticks();
    void *site = __builtin_return_address(0);
    int rc = PMPI_Session_init(info, errhandler, session);
    if (rc != MPI_SUCCESS) return rc;
    if (msc_tracking) { /* recording runs already (MPI_Init or an earlier session) */
        msc_concurrent |= session_thread_level(*session) == MPI_THREAD_MULTIPLE;
        msc_record_init(MSC_CALL_SESSION_INIT, t0, site);
        return rc;
    }
    if (!msc_wants_recording()) return rc;
    MPI_Group world;
    MPI_Comm sync_comm = MPI_COMM_NULL;
    int rank = 0, size = 0;
    if (PMPI_Group_from_session_pset(*session, "mpi://WORLD", &world) != MPI_SUCCESS) {
        msc_warn("not recorded, the program runs on; no mpi://WORLD process set in this session", "", 0);
        return rc;
    }
    PMPI_Group_rank(world, &rank);
    PMPI_Group_size(world, &size);
    if (PMPI_Comm_create_from_group(world, "org.mpiscope.clock", MPI_INFO_NULL, MPI_ERRORS_RETURN,
                                    &sync_comm) != MPI_SUCCESS) {
        msc_warn("not recorded, the program runs on; cannot make a communicator over mpi://WORLD", "", 0);
        PMPI_Group_free(&world);
        return rc;
    }
    traced_session = *session;
    msc_begin(MSC_CALL_SESSION_INIT, t0, site, rank, size, session_thread_level(*session), world, sync_comm);
    return rc;
}

MSC_API int MPI_Session_finalize(MPI_Session *session)
{
    /* Not the session that started the recording (or tried to: a rank whose
     * trace could not be opened still takes part in the closing clock sync). */
    if (traced_session == MPI_SESSION_NULL || *session != traced_session) {
        struct msc_rec *r = msc_enter(MSC_CALL_SESSION_FINALIZE, __builtin_return_address(0));
        int rc = PMPI_Session_finalize(session);
        if (r) msc_leave(r);
        return rc;
    }
    traced_session = MPI_SESSION_NULL;
    struct msc_rec *r = msc_enter(MSC_CALL_SESSION_FINALIZE, __builtin_return_address(0));
    int world = 0, world_done = 0;
    PMPI_Initialized(&world);
    PMPI_Finalized(&world_done);
    if (world && !world_done) {
        /* MPI_Finalize will end the recording; its clock sync needs a
         * communicator that outlives this session. */
        msc_sync_comm_from_world();
        int rc = PMPI_Session_finalize(session);
        if (r) msc_leave(r);
        return rc;
    }
    msc_before_finalize();
    int rc = PMPI_Session_finalize(session);
    msc_finished(r);
    return rc;
}

MSC_API int MPI_Comm_create_from_group(MPI_Group group, const char *stringtag, MPI_Info info,
                                       MPI_Errhandler errhandler, MPI_Comm *newcomm)
{
    struct msc_rec *r = msc_enter(MSC_CALL_COMM_CREATE_FROM_GROUP, __builtin_return_address(0));
    int rc = PMPI_Comm_create_from_group(group, stringtag, info, errhandler, newcomm);
    uint16_t nc = (msc_tracking && rc == MPI_SUCCESS) ? msc_comm_created_from_group(stringtag, *newcomm)
                                                      : MSC_COMM_UNKNOWN;
    if (r) {
        r->comm = nc;
        msc_leave(r);
    }
    return rc;
}

#if MSC_HAVE_MPI41
MSC_API int MPI_Intercomm_create_from_groups(MPI_Group local_group, int local_leader, MPI_Group remote_group,
                                             int remote_leader, const char *stringtag, MPI_Info info,
                                             MPI_Errhandler errhandler, MPI_Comm *newintercomm)
{
    struct msc_rec *r = msc_enter(MSC_CALL_INTERCOMM_CREATE_FROM_GROUPS, __builtin_return_address(0));
    int rc = PMPI_Intercomm_create_from_groups(local_group, local_leader, remote_group, remote_leader, stringtag,
                                               info, errhandler, newintercomm);
    uint16_t nc = (msc_tracking && rc == MPI_SUCCESS)
                      ? msc_intercomm_created_from_groups(stringtag, *newintercomm) : MSC_COMM_UNKNOWN;
    if (r) {
        r->comm = nc;
        msc_leave(r);
        if (MSC_UNLIKELY(rc != MPI_SUCCESS)) msc_emit_rc(r, rc);
    }
    return rc;
}
#endif

#endif
