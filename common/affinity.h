/* affinity.h - what the thread's CPU affinity says about waiting: an actor
 * confined to one CPU cannot be answered while it spins by anyone sharing
 * that CPU (rdmem/idle.h's no_spin). Not installed: idle.h is a client
 * header and must not need _GNU_SOURCE. */
#ifndef RDMEM_COMMON_AFFINITY_H
#define RDMEM_COMMON_AFFINITY_H

#include <sched.h>

/* True when this thread may run on one CPU only: spinning cannot help. */
static inline int rdmem_affinity_single_cpu(void)
{
	cpu_set_t set;

	return sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) == 1;
}

#endif
