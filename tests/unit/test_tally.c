/* test_tally.c - the server's per-thread dispatch counters (server/tally.h):
 * threads counting at once lose nothing, a reader summing meanwhile never
 * sees a counter go back, each thread has one block per set (found again
 * after it counted in another set), and the shared block for a thread
 * without one is exact under fetch_add. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "server/tally.h"
#include "tests/check.h"

#define THREADS 4
#define CALLS	20000

struct job {
	struct rdmem_tallies *a, *b; /* b: counted every 7th call, if set */
	int shared;		     /* count in a->shared, as a thread without a block */
	struct rdmem_tally *first;   /* the block a gave this thread at first */
	int same;		     /* a gave the same block every time */
};

static void count_one(struct rdmem_tallies *set, int shared, uint64_t ns)
{
	struct rdmem_tally *t = shared ? &set->shared : rdmem_tally_mine(set);

	rdmem_tally_add(&t->ops[RDMEM_OP_KV_GET].calls, 1, shared);
	rdmem_tally_add(&t->op_path[RDMEM_OP_KV_GET][RDMEM_PATH_EAGER], 1, shared);
	rdmem_tally_add(&t->bytes_in, 3, shared);
	if (shared)
		rdmem_hist_add_shared(&t->lat[RDMEM_PATH_EAGER], ns);
	else
		rdmem_hist_add_single(&t->lat[RDMEM_PATH_EAGER], ns);
}

static void *counter(void *arg)
{
	struct job *j = arg;
	int i;

	j->same = 1;
	for (i = 0; i < CALLS; i++) {
		count_one(j->a, j->shared, 1000u + (unsigned)i);
		if (!j->shared) {
			struct rdmem_tally *t = rdmem_tally_mine(j->a);

			if (!j->first)
				j->first = t;
			j->same &= t == j->first;
		}
		if (j->b && i % 7 == 0)
			count_one(j->b, 0, 5);
	}
	return NULL;
}

struct reader {
	struct rdmem_tallies *set;
	atomic_int stop;
	int went_back;
	atomic_int reads; /* the counters start after the first */
};

static void *summer(void *arg)
{
	struct reader *r = arg;
	uint64_t last = 0;

	while (!atomic_load(&r->stop)) {
		struct rdmem_tally_sum s;

		rdmem_tallies_sum(r->set, &s);
		r->went_back |= s.calls[RDMEM_OP_KV_GET] < last;
		last = s.calls[RDMEM_OP_KV_GET];
		atomic_fetch_add(&r->reads, 1);
	}
	return NULL;
}

static int blocks(struct rdmem_tallies *set)
{
	struct rdmem_tally *b = atomic_load(&set->head);
	int n = 0;

	for (; b; b = b->next)
		n++;
	return n;
}

static void run_threads(struct job *jobs, int n, struct reader *r)
{
	pthread_t th[THREADS], rd;
	int i;

	REQUIRE(pthread_create(&rd, NULL, summer, r) == 0);
	/* The counters start only once the reader has summed, so it is
	 * running while they count: on 2 busy vCPUs (asan) it was once first
	 * scheduled after they had ended, and checked nothing. */
	while (atomic_load(&r->reads) == 0)
		sched_yield();
	for (i = 0; i < n; i++)
		REQUIRE(pthread_create(&th[i], NULL, counter, &jobs[i]) == 0);
	for (i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	atomic_store(&r->stop, 1);
	pthread_join(rd, NULL);
}

static void test_tally_threads(void)
{
	struct rdmem_tallies a, b;
	struct job jobs[THREADS];
	struct reader r = { &a, 0, 0, 0 };
	struct rdmem_tally_sum s;
	int i;

	rdmem_tallies_init(&a);
	rdmem_tallies_init(&b);
	CHECK(a.serial != b.serial && a.serial && b.serial);
	for (i = 0; i < THREADS; i++)
		jobs[i] = (struct job){ &a, i == 0 ? &b : NULL, 0, NULL, 0 };
	run_threads(jobs, THREADS, &r);
	rdmem_tallies_sum(&a, &s);
	CHECK_EQ(s.calls[RDMEM_OP_KV_GET], THREADS * CALLS);
	CHECK_EQ(s.op_path[RDMEM_OP_KV_GET][RDMEM_PATH_EAGER], THREADS * CALLS);
	CHECK_EQ(s.paths[RDMEM_PATH_EAGER], THREADS * CALLS); /* summed over ops */
	CHECK_EQ(s.bytes_in, 3ull * THREADS * CALLS);
	CHECK_EQ(s.lat[RDMEM_PATH_EAGER].count, THREADS * CALLS);
	CHECK_EQ(s.calls[RDMEM_OP_KV_PUT], 0);
	/* One block per thread, found again after counting in b. */
	CHECK_EQ(blocks(&a), THREADS);
	for (i = 0; i < THREADS; i++)
		CHECK(jobs[i].same && jobs[i].first);
	rdmem_tallies_sum(&b, &s);
	CHECK_EQ(s.calls[RDMEM_OP_KV_GET], (CALLS + 6) / 7);
	CHECK_EQ(s.lat[RDMEM_PATH_EAGER].sum_ns, 5ull * ((CALLS + 6) / 7));
	CHECK_EQ(blocks(&b), 1);
	CHECK(!r.went_back);
	rdmem_tallies_destroy(&a);
	rdmem_tallies_destroy(&b);
}

static void test_tally_shared(void)
{
	struct rdmem_tallies a;
	struct job jobs[THREADS];
	struct reader r = { &a, 0, 0, 0 };
	struct rdmem_tally_sum s;
	int i;

	rdmem_tallies_init(&a);
	for (i = 0; i < THREADS; i++)
		jobs[i] = (struct job){ &a, NULL, 1, NULL, 0 };
	run_threads(jobs, THREADS, &r);
	rdmem_tallies_sum(&a, &s);
	CHECK_EQ(s.calls[RDMEM_OP_KV_GET], THREADS * CALLS);
	CHECK_EQ(s.lat[RDMEM_PATH_EAGER].count, THREADS * CALLS);
	CHECK_EQ(blocks(&a), 0);
	CHECK(!r.went_back);
	rdmem_tallies_destroy(&a);
}

/* A set made where a destroyed one was (same address) is a new set to the
 * threads' caches: its serial differs, so no stale block is used. */
static void test_tally_reuse(void)
{
	struct rdmem_tallies a;
	struct rdmem_tally *t;
	struct rdmem_tally_sum s;

	rdmem_tallies_init(&a);
	t = rdmem_tally_mine(&a);
	REQUIRE(t);
	rdmem_tally_add(&t->bytes_out, 9, 0);
	rdmem_tallies_destroy(&a);
	rdmem_tallies_init(&a);
	t = rdmem_tally_mine(&a);
	REQUIRE(t);
	rdmem_tallies_sum(&a, &s);
	CHECK_EQ(s.bytes_out, 0);
	CHECK_EQ(blocks(&a), 1);
	rdmem_tallies_destroy(&a);
}

int main(void)
{
	RUN(test_tally_threads);
	RUN(test_tally_shared);
	RUN(test_tally_reuse);
	return check_done();
}
