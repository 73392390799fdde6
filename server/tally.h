/* tally.h - the counters every dispatched call moves, one block per thread
 * that dispatches (a worker, a TCP loop). Only a block's own thread writes
 * it, with a relaxed load and store: counters shared by every worker took a
 * locked read-modify-write on a line the workers pass around, seven times a
 * call. A reader sums the blocks with relaxed loads (each value exact, the
 * set not one instant, as before). A thread whose block could not be
 * allocated counts in the shared block with fetch_add. Blocks live as long
 * as the service. */
#ifndef RDMEM_SERVER_TALLY_H
#define RDMEM_SERVER_TALLY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "common/metrics.h"
#include "rdmem/wire.h"

struct rdmem_op_counters {
	atomic_uint_fast64_t calls;
	atomic_uint_fast64_t errors; /* replies with a status other than OK */
};

struct rdmem_tally {
	struct rdmem_op_counters ops[RDMEM_OP__COUNT];
	/* calls by op and path; by path alone is their sum (rdmem_tallies_sum) */
	atomic_uint_fast64_t op_path[RDMEM_OP__COUNT][RDMEM_PATH__COUNT];
	atomic_uint_fast64_t bad_request;	  /* calls answered BAD_REQUEST by dispatch */
	atomic_uint_fast64_t bytes_in;		  /* request key + value bytes */
	atomic_uint_fast64_t bytes_out;		  /* reply value bytes */
	struct rdmem_hist lat[RDMEM_PATH__COUNT]; /* dispatch time per path */
	pthread_t owner;
	struct rdmem_tally *next; /* set before the block is published, never after */
};

struct rdmem_tallies {
	uint64_t serial;		    /* this set's, never reused: the thread cache's key */
	pthread_mutex_t lock;		    /* adding a block */
	_Atomic(struct rdmem_tally *) head; /* every thread's block, newest first */
	struct rdmem_tally shared;	    /* for a thread that has none */
};

/* What the readers get: every block and the shared one added up. */
struct rdmem_tally_sum {
	uint64_t calls[RDMEM_OP__COUNT], errors[RDMEM_OP__COUNT];
	uint64_t paths[RDMEM_PATH__COUNT]; /* op_path summed over ops */
	uint64_t op_path[RDMEM_OP__COUNT][RDMEM_PATH__COUNT];
	uint64_t bad_request, bytes_in, bytes_out;
	struct rdmem_hist_snap lat[RDMEM_PATH__COUNT];
};

void rdmem_tallies_init(struct rdmem_tallies *t);
void rdmem_tallies_destroy(struct rdmem_tallies *t);
void rdmem_tallies_sum(struct rdmem_tallies *t, struct rdmem_tally_sum *out);

/* The calling thread's last block: which set it belongs to, and the block
 * (NULL when none could be allocated). */
struct rdmem_tally_cache {
	uint64_t serial;
	struct rdmem_tally *t;
};
extern _Thread_local struct rdmem_tally_cache rdmem_tally_cache;
struct rdmem_tally *rdmem_tally_mine_slow(struct rdmem_tallies *t);

/* The calling thread's block of t, or NULL: count in t->shared then. */
static inline struct rdmem_tally *rdmem_tally_mine(struct rdmem_tallies *t)
{
	if (rdmem_tally_cache.serial == t->serial)
		return rdmem_tally_cache.t;
	return rdmem_tally_mine_slow(t);
}

/* Adds v: a load and a store in an own block, fetch_add in the shared one. */
static inline void rdmem_tally_add(atomic_uint_fast64_t *c, uint64_t v, int shared)
{
	if (shared)
		atomic_fetch_add_explicit(c, v, memory_order_relaxed);
	else
		rdmem_count_single(c, v);
}

#endif
