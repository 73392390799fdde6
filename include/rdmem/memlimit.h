/* memlimit.h - the memory this process may use (common/memlimit.c). */
#ifndef RDMEM_MEMLIMIT_H
#define RDMEM_MEMLIMIT_H

#include <stdint.h>

/* Bytes: the machine's memory, or its cgroup's limit (and its ancestors';
 * v2 memory.max, v1 memory.limit_in_bytes) when lower; 2 GiB when neither
 * is known. *whose says which, for a log line. */
uint64_t rdmem_mem_limit(const char **whose);

#endif
