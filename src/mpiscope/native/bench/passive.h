/* IMB-RMA's Truly_passive_put on ranks 0 (origin) and 1 (target). */
#ifndef MSC_PASSIVE_H
#define MSC_PASSIVE_H

#include "common.h"

void bench_truly_passive_put(const struct msc_settings *s, MPI_Comm comm);

#endif
