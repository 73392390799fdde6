/* tally.c - per-thread dispatch counters: finding a thread's block, adding
 * it, and summing them all (tally.h). */
#include "server/tally.h"

#include <stdlib.h>
#include <string.h>

#define RDMEM_TALLY_BYTES ((sizeof(struct rdmem_tally) + 63) / 64 * 64)

_Thread_local struct rdmem_tally_cache rdmem_tally_cache;

/* Serials start at 1: a thread's zeroed cache matches no set. */
static atomic_uint_fast64_t rdmem_tally_serials;

void rdmem_tallies_init(struct rdmem_tallies *t)
{
	memset(t, 0, sizeof(*t));
	t->serial = atomic_fetch_add_explicit(&rdmem_tally_serials, 1, memory_order_relaxed) + 1;
	pthread_mutex_init(&t->lock, NULL);
}

void rdmem_tallies_destroy(struct rdmem_tallies *t)
{
	struct rdmem_tally *b = atomic_load_explicit(&t->head, memory_order_acquire), *next;

	for (; b; b = next) {
		next = b->next;
		free(b);
	}
	atomic_store_explicit(&t->head, NULL, memory_order_relaxed);
	pthread_mutex_destroy(&t->lock);
}

/*
 * First count of this thread in t (or the first since it counted in another
 * set): its block if it has one (a thread that serves two services, as tests
 * do), else a new one. A new thread that reuses an exited thread's id takes
 * that block over, still its only writer.
 */
struct rdmem_tally *rdmem_tally_mine_slow(struct rdmem_tallies *t)
{
	pthread_t self = pthread_self();
	struct rdmem_tally *b;

	pthread_mutex_lock(&t->lock);
	/* Relaxed: the lock orders this with every earlier push. */
	for (b = atomic_load_explicit(&t->head, memory_order_relaxed); b; b = b->next)
		if (pthread_equal(b->owner, self))
			break;
	/* Whole cache lines of its own: no other thread's block or hot data
	 * shares a line with it. */
	if (!b && (b = aligned_alloc(64, RDMEM_TALLY_BYTES))) {
		memset(b, 0, sizeof(*b));
		b->owner = self;
		b->next = atomic_load_explicit(&t->head, memory_order_relaxed);
		/* Release: pairs with the acquire in rdmem_tallies_sum(); a
		 * reader that finds the block sees it zeroed and its next. */
		atomic_store_explicit(&t->head, b, memory_order_release);
	}
	pthread_mutex_unlock(&t->lock);
	rdmem_tally_cache = (struct rdmem_tally_cache){ t->serial, b };
	return b;
}

static uint64_t ld(atomic_uint_fast64_t *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

static void rdmem_tally_add_to(struct rdmem_tally *b, struct rdmem_tally_sum *out)
{
	unsigned op, p;

	for (op = 0; op < RDMEM_OP__COUNT; op++) {
		out->calls[op] += ld(&b->ops[op].calls);
		out->errors[op] += ld(&b->ops[op].errors);
		for (p = 0; p < RDMEM_PATH__COUNT; p++) {
			uint64_t v = ld(&b->op_path[op][p]);

			out->op_path[op][p] += v;
			out->paths[p] += v;
		}
	}
	for (p = 0; p < RDMEM_PATH__COUNT; p++)
		rdmem_hist_read(&b->lat[p], &out->lat[p]);
	out->bad_request += ld(&b->bad_request);
	out->bytes_in += ld(&b->bytes_in);
	out->bytes_out += ld(&b->bytes_out);
}

void rdmem_tallies_sum(struct rdmem_tallies *t, struct rdmem_tally_sum *out)
{
	struct rdmem_tally *b;

	memset(out, 0, sizeof(*out));
	rdmem_tally_add_to(&t->shared, out);
	/* Acquire: pairs with the release that published each block. */
	for (b = atomic_load_explicit(&t->head, memory_order_acquire); b; b = b->next)
		rdmem_tally_add_to(b, out);
}
