/* pool.h - the server's message pool: a fixed number of leases of one
 * geometry, one lease per session (ScaleRPC's "virtualized mapping", sized by what a
 * session may have in flight rather than by a private full-size ring).
 *
 * A lease is four areas: request slots (descriptor and payload each,
 * include/rdmem/layout.h), an object pool for LAZY replies, a control page,
 * and a local staging area for EAGER replies. Each is an allocation of its
 * own, which the session registers whole on its own connection (fabric.h: on
 * shm the peer gets the allocation's file), so its peer can reach the three
 * remote areas of its lease, each only as registered, and nothing else. A
 * lease comes back to the pool whole when the session ends, whatever killed
 * it.
 *
 * Two shapes from one code path: --shared-pool on, one pool for the server
 * with max-sessions small leases; off, a pool per session holding one lease
 * of the classic per-session sizes (1024 slots, 256 slabs).
 *
 * Hygiene: a lease's memory is mapped when the lease is taken and unmapped
 * when it is given back, so every tenant starts from memory no other session
 * ever wrote: fresh anonymous pages (verbs) or a fresh memfd (shm). Zeroing
 * in place would not do: on verbs a page still pinned by a registration keeps
 * its old bytes in the NIC's view whatever the CPU does to its mapping, and on
 * shm a previous peer may still map the old memfd. The cost follows what a
 * session touched (the kernel frees and zero-fills those pages), not the
 * lease size, and a free lease costs no memory at all.
 */
#ifndef RDMEM_SERVER_POOL_H
#define RDMEM_SERVER_POOL_H

#include <pthread.h>
#include <stdint.h>

#include "rdmem/fabric.h"
#include "rdmem/layout.h"
#include "server/objpool.h"

struct rdmem_pool_config {
	enum rdmem_fab_kind fabric;
	uint32_t leases;      /* sessions the pool holds */
	uint32_t lease_slots; /* request slots per lease: the session's calls in flight */
	uint32_t slot_bytes;  /* request payload bytes per slot */
	uint32_t stage_bytes; /* EAGER reply bytes per slot (larger replies go LAZY) */
	struct rdmem_objpool_config obj; /* per lease */
};

struct rdmem_lease {
	uint32_t index;
	uint8_t *req;	  /* lease_slots x rdmem_slot_stride(slot_bytes): the request slots */
	uint8_t *objects; /* the lease's object pool area */
	uint8_t *ctrl;	  /* RDMEM_CTRL_BYTES */
	uint8_t *staging; /* lease_slots x rdmem_slot_stride(stage_bytes), never remote */
	uint64_t req_len, objects_len, staging_len;
};

enum { RDMEM_POOL_REQ, RDMEM_POOL_OBJECTS, RDMEM_POOL_CTRL, RDMEM_POOL_STAGING, RDMEM_POOL_AREAS };

struct rdmem_pool_mem {
	uint8_t *area[RDMEM_POOL_AREAS];
};

struct rdmem_pool {
	struct rdmem_pool_config cfg;
	uint64_t lease_bytes;		       /* the four areas */
	uint64_t area_bytes[RDMEM_POOL_AREAS]; /* each page-rounded */
	pthread_mutex_t lock;	    /* leases are taken and returned by session setup/teardown */
	struct rdmem_pool_mem *mem; /* per lease: its memory while taken, else all NULL */
	uint8_t *taken;
	uint32_t ntaken;
};

int rdmem_pool_create(const struct rdmem_pool_config *cfg, struct rdmem_pool **out);
void rdmem_pool_destroy(struct rdmem_pool *p);
/* Takes a free lease on fresh, all-zero memory: 0, -EBUSY when every lease
 * is held, or -ENOMEM. */
int rdmem_pool_take(struct rdmem_pool *p, struct rdmem_lease *out);
/*
 * Gives the lease back and unmaps its memory. Call only once nothing can
 * reach it any more: the session's registrations are gone and its
 * connection is closed (a NIC then neither reads nor writes the pages).
 */
void rdmem_pool_give(struct rdmem_pool *p, const struct rdmem_lease *l);
uint32_t rdmem_pool_taken(struct rdmem_pool *p);
/* Bytes one lease of this configuration holds: what a session registers. */
uint64_t rdmem_pool_lease_size(const struct rdmem_pool_config *cfg);

#endif
