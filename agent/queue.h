/* queue.h - the in-process single-producer single-consumer queue actors use
 * to hand calls to each other, with an eventfd doorbell for a consumer that
 * sleeps. Capacity is sized by the caller to the number of calls that can
 * exist, so a push never fails by construction.
 */
#ifndef RDMEM_AGENT_QUEUE_H
#define RDMEM_AGENT_QUEUE_H

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "rdmem/util.h"

struct rdmem_queue {
	_Alignas(RDMEM_CACHELINE) _Atomic uint32_t head; /* consumer's */
	_Alignas(RDMEM_CACHELINE) _Atomic uint32_t tail; /* producer's */
	_Alignas(RDMEM_CACHELINE) atomic_int sleeping;	 /* consumer is about to block */
	uint32_t mask;
	void **items;
	int efd; /* doorbell, readable after a push to a sleeping consumer */
};

static inline int rdmem_queue_init(struct rdmem_queue *q, uint32_t min_capacity)
{
	uint32_t cap = 1;

	while (cap < min_capacity)
		cap <<= 1;
	atomic_init(&q->head, 0);
	atomic_init(&q->tail, 0);
	atomic_init(&q->sleeping, 0);
	q->mask = cap - 1;
	q->items = calloc(cap, sizeof(void *));
	q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (!q->items || q->efd < 0) {
		free(q->items);
		if (q->efd >= 0)
			close(q->efd);
		return -ENOMEM;
	}
	return 0;
}

static inline void rdmem_queue_fini(struct rdmem_queue *q)
{
	free(q->items);
	if (q->efd >= 0)
		close(q->efd);
	q->items = NULL;
	q->efd = -1;
}

static inline void rdmem_queue_ring(struct rdmem_queue *q)
{
	uint64_t one = 1;

	/* EAGAIN means the counter is saturated: the consumer wakes anyway. */
	if (write(q->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		rdmem_err("queue doorbell: %s", strerror(errno));
}

/* Producer side. Returns -ENOSPC only if the caller sized the queue wrong. */
static inline int rdmem_queue_push(struct rdmem_queue *q, void *item)
{
	uint32_t t = atomic_load_explicit(&q->tail, memory_order_relaxed);

	/* Pairs with the consumer's release of head: the slot is free to reuse. */
	if (t - atomic_load_explicit(&q->head, memory_order_acquire) > q->mask)
		return -ENOSPC;
	q->items[t & q->mask] = item;
	/* Publishes the item; pairs with the consumer's acquire load of tail. */
	atomic_store_explicit(&q->tail, t + 1, memory_order_release);
	/*
	 * Dekker with rdmem_queue_prepare_sleep(): our tail store and its
	 * sleeping store are each followed by a full fence before the other's
	 * load, so either it sees the item or we see it sleeping.
	 */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&q->sleeping, memory_order_relaxed))
		rdmem_queue_ring(q);
	return 0;
}

/* Consumer side: the next item, or NULL. */
static inline void *rdmem_queue_pop(struct rdmem_queue *q)
{
	uint32_t h = atomic_load_explicit(&q->head, memory_order_relaxed);
	void *item;

	/* Pairs with the producer's release store of tail. */
	if (h == atomic_load_explicit(&q->tail, memory_order_acquire))
		return NULL;
	item = q->items[h & q->mask];
	atomic_store_explicit(&q->head, h + 1, memory_order_release);
	return item;
}

static inline int rdmem_queue_empty(struct rdmem_queue *q)
{
	return atomic_load_explicit(&q->head, memory_order_relaxed) ==
	       atomic_load_explicit(&q->tail, memory_order_acquire);
}

/*
 * Before blocking on q->efd: announce it, then look once more. Returns 1
 * when the consumer may sleep, 0 when an item arrived meanwhile.
 */
static inline int rdmem_queue_prepare_sleep(struct rdmem_queue *q)
{
	atomic_store_explicit(&q->sleeping, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
	if (!rdmem_queue_empty(q)) {
		atomic_store_explicit(&q->sleeping, 0, memory_order_relaxed);
		return 0;
	}
	return 1;
}

/* After waking (or not sleeping after all): stop announcing, drain the bell. */
static inline void rdmem_queue_woke(struct rdmem_queue *q)
{
	uint64_t n;

	atomic_store_explicit(&q->sleeping, 0, memory_order_relaxed);
	if (read(q->efd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		rdmem_err("queue doorbell drain: %s", strerror(errno));
}

#endif
