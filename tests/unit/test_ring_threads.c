/* test_ring_threads.c - the front-door ring with producer and consumer as
 * threads of one process: every entry's slot payload, written before the
 * push, is what the consumer reads after the pop. Plain builds check the
 * bytes; under make tsan (and scripts/mutate.sh's barrier mutation) ThreadSanitizer
 * sees the payload handed over only through the ring's release/acquire
 * pair, so a publish weakened to relaxed is reported as a data race (the
 * forked producers of test_ring are invisible to it).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shm/ring.h"
#include "tests/check.h"

#define RT_PRODUCERS 2
#define RT_SLOTS     32	    /* payload slots per producer */
#define RT_ENTRIES   200000 /* per producer */
#define RT_RING	     64

struct rt_slot {
	uint64_t value[4];  /* plain memory: ordered only by the ring */
	_Atomic int in_use; /* 1 from the producer's fill to the consumer's read */
};

static struct rdmem_ring_ctl rt_ctl;
static _Atomic uint64_t rt_cells[RT_RING];
static struct rdmem_ring rt_ring;
static struct rt_slot rt_slots[RT_PRODUCERS][RT_SLOTS];

static void *rt_producer(void *arg)
{
	uint16_t client = (uint16_t)(uintptr_t)arg;
	uint64_t n;

	for (n = 1; n <= RT_ENTRIES; n++) {
		struct rt_slot *s = &rt_slots[client][n % RT_SLOTS];
		int i;

		/* Acquire: pairs with the consumer's release of in_use, so its
		 * read of the old value happened before we overwrite it. */
		while (atomic_load_explicit(&s->in_use, memory_order_acquire))
			sched_yield();
		for (i = 0; i < 4; i++)
			s->value[i] = n * 4 + (uint64_t)i + ((uint64_t)client << 40);
		/* Relaxed: the ring's release publish orders it (and the value). */
		atomic_store_explicit(&s->in_use, 1, memory_order_relaxed);
		while (rdmem_ring_push(&rt_ring, client, (uint16_t)(n % RT_SLOTS)) != 0)
			sched_yield();
	}
	return NULL;
}

static void test_threads_hand_over_payloads(void)
{
	uint64_t got = 0, bad = 0, next[RT_PRODUCERS] = { 1, 1 };
	struct rdmem_ring_consumer c;
	pthread_t t[RT_PRODUCERS];
	uintptr_t p;

	rdmem_ring_bind(&rt_ring, &rt_ctl, rt_cells, RT_RING);
	rdmem_ring_format(&rt_ring, 0);
	rdmem_ring_consumer_init(&c, 0);
	c.skip_after_ns = 10000000000ull; /* threads here never die mid-publish */
	for (p = 0; p < RT_PRODUCERS; p++)
		REQUIRE(pthread_create(&t[p], NULL, rt_producer, (void *)p) == 0);
	while (got < (uint64_t)RT_PRODUCERS * RT_ENTRIES) {
		uint16_t client, slot;
		struct rt_slot *s;
		int i, rc = rdmem_ring_pop(&rt_ring, &c, &client, &slot);

		if (rc == 0 || rc == -EAGAIN) { /* empty, or a push half done */
			sched_yield();
			continue;
		}
		if (rc != 1) { /* the producers would wait forever: stop here */
			printf("not ok - test_threads_hand_over_payloads: pop returned %d\n", rc);
			exit(1);
		}
		REQUIRE(client < RT_PRODUCERS && slot < RT_SLOTS);
		s = &rt_slots[client][slot];
		/* Each producer's entries arrive in its own order. */
		bad += slot != next[client] % RT_SLOTS;
		for (i = 0; i < 4; i++)
			bad += s->value[i] !=
			       next[client] * 4 + (uint64_t)i + ((uint64_t)client << 40);
		next[client]++;
		/* Release: pairs with the producer's acquire before refilling. */
		atomic_store_explicit(&s->in_use, 0, memory_order_release);
		got++;
	}
	for (p = 0; p < RT_PRODUCERS; p++)
		pthread_join(t[p], NULL);
	printf("# %llu entries from %d producer threads, %llu wrong\n", (unsigned long long)got,
	       RT_PRODUCERS, (unsigned long long)bad);
	CHECK_EQ(got, (uint64_t)RT_PRODUCERS * RT_ENTRIES);
	CHECK_EQ(bad, 0);
	CHECK_EQ(c.skipped, 0);
}

int main(void)
{
	RUN(test_threads_hand_over_payloads);
	return check_done();
}
