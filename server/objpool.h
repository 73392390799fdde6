/* objpool.h - a session's object pool: where LAZY replies wait for the agent
 * to RDMA-READ them, and the generation-checked RECLAIM that frees them.
 *
 * Objects come in size classes carved out of one registered area: 64 KiB
 * slabs for most replies, then larger classes up to the largest value. An
 * object is READY from allocation until the agent RECLAIMs it (its
 * generation must match: a repeat of a RECLAIM just done is harmless, any
 * other mismatch is stale and refused) or the TTL scan frees it. Owned by
 * one session worker thread: no locks.
 */
#ifndef RDMEM_SERVER_OBJPOOL_H
#define RDMEM_SERVER_OBJPOOL_H

#include <stddef.h>
#include <stdint.h>

#include "rdmem/layout.h"
#include "rdmem/util.h"
#include "rdmem/wire.h"

struct rdmem_objpool_config {
	uint32_t slab_count; /* 64 KiB objects */
	uint32_t max_value;  /* the largest class holds this many bytes */
	uint32_t ttl_ms;     /* READY longer than this (plus a quarter): freed by the scan */
};

struct rdmem_objpool_class {
	uint32_t size; /* bytes per object */
	uint32_t count;
	uint32_t first_id;  /* object ids of this class: first_id .. first_id + count - 1 */
	uint64_t area_off;  /* where its objects start in the pool area */
	uint32_t *free_ids; /* stack of free object ids */
	uint32_t nfree;
};

struct rdmem_objpool_obj {
	uint64_t generation; /* bumped at every free; 0 is never valid */
	uint64_t ready_ns;   /* 0 when free */
	uint32_t length;
	uint8_t cls;
};

struct rdmem_objpool_stats {
	uint64_t alloc, reclaim, repeat, stale, timeout, full;
	uint64_t used_bytes;
	uint32_t live;
};

struct rdmem_objpool {
	struct rdmem_objpool_class cls[RDMEM_OBJ_CLASSES];
	struct rdmem_objpool_obj *objs;
	uint32_t nobjs;
	uint8_t *area;
	uint64_t area_bytes;
	uint64_t ttl_ns;
	/* The earliest moment the TTL scan may free an object; 0 before the
	 * first object and after a scan found none live. Early once its object
	 * was reclaimed (a RECLAIM leaves it), never late. Lets a worker sleep
	 * until then instead of ticking. */
	uint64_t next_expiry_ns;
	struct rdmem_objpool_stats st;
};

/* Bytes of registered memory the pool needs for cfg. */
uint64_t rdmem_objpool_area_bytes(const struct rdmem_objpool_config *cfg);
int rdmem_objpool_init(struct rdmem_objpool *p, const struct rdmem_objpool_config *cfg, void *area);
void rdmem_objpool_fini(struct rdmem_objpool *p);
/* Bytes of the largest object: the largest reply the pool can carry. */
uint32_t rdmem_objpool_max_object(const struct rdmem_objpool *p);

/* Returns 0 with the object's ref and bytes, or RDMEM_S_TOO_BIG / RDMEM_S_BUSY (full). */
int rdmem_objpool_alloc(struct rdmem_objpool *p, uint32_t len, uint64_t now_ns,
			struct rdmem_objref *ref, void **buf);
/* Returns RDMEM_S_OK (freed or harmless repeat) or RDMEM_S_STALE. */
int rdmem_objpool_reclaim(struct rdmem_objpool *p, const struct rdmem_objref *ref);
/* Frees objects READY for longer than the TTL and sets next_expiry_ns;
 * returns how many it freed. */
uint32_t rdmem_objpool_scan(struct rdmem_objpool *p, uint64_t now_ns);

#endif
