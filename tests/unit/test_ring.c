/* test_ring.c - the front door's MPSC ring (shm/ring.h) under real processes:
 * exactly-once per-producer order with 8 producer processes, producers
 * stopped or killed between claim and publish, the 32-bit sequence wrap,
 * scribbled cells, and the sleep/kick hand-shake.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rdmem/idle.h"
#include "shm/ring.h"
#include "tests/check.h"

#define PRODUCERS    8
#define PER_PRODUCER 100000u
#define TEST_SKIP_NS 2000000ull /* 2 ms: short, so stalled tests stay fast */

struct ring_mem {
	struct rdmem_ring_ctl ctl;
	_Atomic uint64_t cells[];
};

/* A ring in MAP_SHARED anonymous memory, inherited by forked producers. */
static struct ring_mem *ring_new(struct rdmem_ring *r, uint64_t size, uint64_t start)
{
	size_t len = sizeof(struct ring_mem) + size * sizeof(uint64_t);
	struct ring_mem *m =
	    mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (m == MAP_FAILED) {
		perror("mmap ring");
		return NULL;
	}
	rdmem_ring_bind(r, &m->ctl, m->cells, size);
	rdmem_ring_format(r, start);
	return m;
}

static void ring_free(struct ring_mem *m, uint64_t size)
{
	munmap(m, sizeof(struct ring_mem) + size * sizeof(uint64_t));
}

/* Pops one entry within timeout_ms, sleeping on the doorbell when idle. */
static int pop_wait(struct rdmem_ring *r, struct rdmem_ring_consumer *c, uint16_t *client,
		    uint16_t *slot, unsigned timeout_ms)
{
	uint64_t deadline = rdmem_now_ns() + timeout_ms * 1000000ull;
	struct rdmem_idle idle;

	rdmem_idle_init(&idle, 0);
	while (rdmem_now_ns() < deadline) {
		int busy, rc = rdmem_ring_pop(r, c, client, slot);
		uint32_t bell;

		if (rc == 1)
			return 1;
		if (!rdmem_idle_step(&idle, 0))
			continue;
		bell = rdmem_ring_sleep_begin(r, c, &busy);
		if (!busy)
			rdmem_ring_sleep(
			    r, bell,
			    RDMEM_MIN(rdmem_ring_stall_left_ns(c, rdmem_now_ns()), 10000000ull));
		rdmem_idle_reset(&idle);
	}
	return 0;
}

static int push_retry(struct rdmem_ring *r, uint16_t client, uint16_t slot)
{
	uint64_t deadline = rdmem_now_ns() + 5000000000ull;
	int rc;

	while ((rc = rdmem_ring_push(r, client, slot)) == -EAGAIN && rdmem_now_ns() < deadline)
		sched_yield();
	return rc;
}

static void test_ring_single_thread_fifo_and_full(void)
{
	struct rdmem_ring r;
	struct rdmem_ring_consumer c;
	struct ring_mem *m = ring_new(&r, 64, 0);
	uint16_t cl, sl;
	unsigned i;

	REQUIRE(m);
	rdmem_ring_consumer_init(&c, 0);
	CHECK_EQ(rdmem_ring_pop(&r, &c, &cl, &sl), 0);
	for (i = 0; i < 64; i++)
		CHECK_EQ(rdmem_ring_push(&r, (uint16_t)i, (uint16_t)(i * 3)), 0);
	CHECK_EQ(rdmem_ring_push(&r, 1, 1), -EAGAIN);
	CHECK_EQ(rdmem_ring_push(&r, 0xffff, 1), -EINVAL);
	for (i = 0; i < 64; i++) {
		CHECK_EQ(rdmem_ring_pop(&r, &c, &cl, &sl), 1);
		CHECK_EQ(cl, i);
		CHECK_EQ(sl, i * 3);
	}
	CHECK_EQ(rdmem_ring_pop(&r, &c, &cl, &sl), 0);
	CHECK_EQ(rdmem_ring_push(&r, 7, 8), 0);
	CHECK_EQ(rdmem_ring_pop(&r, &c, &cl, &sl), 1);
	CHECK_EQ(c.skipped, 0);
	ring_free(m, 64);
}

static void test_ring_sequence_wraps_32_bits(void)
{
	uint64_t start = 0xffffffffull - 100, i;
	struct rdmem_ring r;
	struct rdmem_ring_consumer c;
	struct ring_mem *m = ring_new(&r, 64, start);
	uint16_t cl, sl;
	int bad = 0;

	REQUIRE(m);
	rdmem_ring_consumer_init(&c, start);
	/* Run 20 laps across the wrap, keeping the ring half full. */
	for (i = 0; i < 32; i++)
		CHECK_EQ(rdmem_ring_push(&r, 1, (uint16_t)i), 0);
	for (i = 32; i < 20 * 64; i++) {
		bad += rdmem_ring_push(&r, 1, (uint16_t)i) != 0;
		bad += rdmem_ring_pop(&r, &c, &cl, &sl) != 1 || sl != (uint16_t)(i - 32);
	}
	CHECK_EQ(bad, 0);
	CHECK(c.tail > 0xffffffffull);
	/* Full detection still works right after the wrap. */
	for (i = 0; i < 32; i++)
		CHECK_EQ(rdmem_ring_push(&r, 2, 2), 0);
	CHECK_EQ(rdmem_ring_push(&r, 2, 2), -EAGAIN);
	ring_free(m, 64);
}

static void producer_main(struct rdmem_ring *r, uint16_t id)
{
	uint32_t k;

	for (k = 0; k < PER_PRODUCER; k++)
		if (push_retry(r, id, (uint16_t)k) != 0)
			_exit(10);
	_exit(0);
}

static void test_ring_8_producer_processes_exactly_once_in_order(void)
{
	uint64_t size = 1024, total = 0;
	struct rdmem_ring r;
	struct rdmem_ring_consumer c;
	struct ring_mem *m = ring_new(&r, size, 0);
	uint32_t next[PRODUCERS] = { 0 };
	pid_t pids[PRODUCERS];
	int p, disorder = 0, status;

	REQUIRE(m);
	rdmem_ring_consumer_init(&c, 0);
	c.skip_after_ns = 50000000ull; /* only a dead producer would stall this long */
	for (p = 0; p < PRODUCERS; p++) {
		pids[p] = fork();
		REQUIRE(pids[p] >= 0);
		if (pids[p] == 0)
			producer_main(&r, (uint16_t)p);
	}
	while (total < (uint64_t)PRODUCERS * PER_PRODUCER) {
		uint16_t cl, sl;

		if (!pop_wait(&r, &c, &cl, &sl, 10000))
			break;
		total++;
		if (cl >= PRODUCERS || sl != (uint16_t)next[cl]) {
			if (disorder++ < 5)
				fprintf(stderr, "  entry %u/%u, expected slot %u\n", cl, sl,
					cl < PRODUCERS ? (uint16_t)next[cl] : 0);
			continue;
		}
		next[cl]++;
	}
	for (p = 0; p < PRODUCERS; p++) {
		CHECK(waitpid(pids[p], &status, 0) == pids[p]);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		CHECK_EQ(next[p], PER_PRODUCER);
	}
	CHECK_EQ(total, (uint64_t)PRODUCERS * PER_PRODUCER);
	CHECK_EQ(disorder, 0);
	CHECK_EQ(c.skipped, 0);
	{
		uint16_t cl, sl;
		CHECK_EQ(rdmem_ring_pop(&r, &c, &cl, &sl), 0);
	}
	ring_free(m, size);
}

/* Child: claims a position, stops itself before publishing, then (if it is
 * continued) tries to publish and reports what happened in its exit code. */
static pid_t spawn_stalled_producer(struct rdmem_ring *r, uint16_t id)
{
	pid_t pid = fork();
	uint64_t pos;

	if (pid != 0)
		return pid;
	if (rdmem_ring_claim(r, &pos))
		_exit(20);
	raise(SIGSTOP);
	if (rdmem_ring_publish(r, pos, id, 1) != -ESTALE)
		_exit(21); /* the consumer skipped pos: this publish must fail */
	_exit(push_retry(r, id, 2) == 0 ? 0 : 22);
}

static int wait_stopped(pid_t pid)
{
	int status;

	return waitpid(pid, &status, WUNTRACED) == pid && WIFSTOPPED(status);
}

static void test_ring_producer_killed_between_claim_and_publish(void)
{
	struct rdmem_ring r;
	struct rdmem_ring_consumer c;
	struct ring_mem *m = ring_new(&r, 64, 0);
	uint16_t cl, sl;
	pid_t pid;
	int status, i;
	uint64_t t0;

	REQUIRE(m);
	rdmem_ring_consumer_init(&c, 0);
	c.skip_after_ns = TEST_SKIP_NS;
	pid = spawn_stalled_producer(&r, 9);
	REQUIRE(pid > 0);
	REQUIRE(wait_stopped(pid));
	CHECK(kill(pid, SIGKILL) == 0);
	CHECK(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status));
	/* Later entries must flow past the dead producer's claimed position. */
	for (i = 0; i < 50; i++) /* the ring holds 63 more */
		CHECK_EQ(rdmem_ring_push(&r, 3, (uint16_t)i), 0);
	t0 = rdmem_now_ns();
	for (i = 0; i < 50; i++) {
		CHECK_EQ(pop_wait(&r, &c, &cl, &sl, 2000), 1);
		CHECK(cl == 3 && sl == i);
	}
	CHECK(rdmem_now_ns() - t0 < 1000000000ull);
	CHECK_EQ(c.skipped, 1);
	CHECK_EQ(rdmem_ring_pop(&r, &c, &cl, &sl), 0);
	ring_free(m, 64);
}

/*
 * A client sets head a whole ring ahead (in range: every position "claimed",
 * none published). After the one stall, each pop call skips at most
 * RDMEM_RING_POP_SKIPS positions and returns -EAGAIN, so one store costs the
 * consumer bounded work per call, not a ring's worth of CASes in one.
 */
static void test_ring_claim_burst_skips_in_bounded_steps(void)
{
	const uint64_t size = 4096;
	struct rdmem_ring r;
	struct rdmem_ring_consumer c;
	struct ring_mem *m = ring_new(&r, size, 0);
	uint16_t cl, sl;
	int rc, calls = 0;

	REQUIRE(m);
	rdmem_ring_consumer_init(&c, 0);
	c.skip_after_ns = TEST_SKIP_NS;
	atomic_store(&m->ctl.head, size);
	CHECK_EQ(rdmem_ring_pop(&r, &c, &cl, &sl), -EAGAIN); /* the stall starts */
	usleep(3000);
	do {
		uint64_t before = c.skipped;

		rc = rdmem_ring_pop(&r, &c, &cl, &sl);
		CHECK(c.skipped - before <= 256); /* the documented bound, not the macro */
		calls++;
	} while (rc == -EAGAIN && calls < 100);
	CHECK_EQ(rc, 0);
	CHECK_EQ(c.skipped, size);
	CHECK_EQ(c.stalls, 1);
	CHECK(calls >= (int)(size / 256));
	/* and the ring works after it */
	CHECK_EQ(rdmem_ring_push(&r, 1, 2), 0);
	CHECK_EQ(rdmem_ring_pop(&r, &c, &cl, &sl), 1);
	CHECK(cl == 1 && sl == 2);
	ring_free(m, size);
}

static void test_ring_stalled_producer_republishes_exactly_once(void)
{
	struct rdmem_ring r;
	struct rdmem_ring_consumer c;
	struct ring_mem *m = ring_new(&r, 64, 0);
	uint16_t cl, sl;
	pid_t pid;
	int status;

	REQUIRE(m);
	rdmem_ring_consumer_init(&c, 0);
	c.skip_after_ns = TEST_SKIP_NS;
	pid = spawn_stalled_producer(&r, 5);
	REQUIRE(pid > 0);
	REQUIRE(wait_stopped(pid));
	CHECK_EQ(push_retry(&r, 4, 4), 0);
	CHECK_EQ(pop_wait(&r, &c, &cl, &sl, 2000), 1); /* skips pos 0, takes pos 1 */
	CHECK(cl == 4 && sl == 4);
	CHECK_EQ(c.skipped, 1);
	CHECK(kill(pid, SIGCONT) == 0);
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* Its retry arrives once, as a new entry; the failed publish never does. */
	CHECK_EQ(pop_wait(&r, &c, &cl, &sl, 2000), 1);
	CHECK(cl == 5 && sl == 2);
	CHECK_EQ(rdmem_ring_pop(&r, &c, &cl, &sl), 0);
	ring_free(m, 64);
}

static void test_ring_scribbled_cell_is_repaired(void)
{
	struct rdmem_ring r;
	struct rdmem_ring_consumer c;
	struct ring_mem *m = ring_new(&r, 64, 0);
	uint16_t cl, sl;
	int i;

	REQUIRE(m);
	rdmem_ring_consumer_init(&c, 0);
	c.skip_after_ns = TEST_SKIP_NS;
	/* A client writes a word for a future lap into the next free cell. */
	atomic_store(&m->cells[0], rdmem_ring_entry_word(64 * 5, 1, 1));
	CHECK_EQ(rdmem_ring_push(&r, 1, 1), -EAGAIN);
	CHECK_EQ(pop_wait(&r, &c, &cl, &sl, 50), 0);
	CHECK_EQ(c.repaired, 1);
	for (i = 0; i < 3; i++)
		CHECK_EQ(rdmem_ring_push(&r, 2, (uint16_t)i), 0);
	for (i = 0; i < 3; i++) {
		CHECK_EQ(pop_wait(&r, &c, &cl, &sl, 1000), 1);
		CHECK(cl == 2 && sl == i);
	}
	ring_free(m, 64);
}

static void test_ring_sleeping_consumer_is_kicked(void)
{
	struct rdmem_ring r;
	struct rdmem_ring_consumer c;
	struct ring_mem *m = ring_new(&r, 64, 0);
	uint16_t cl, sl;
	uint32_t bell;
	uint64_t t0;
	pid_t pid;
	int busy, status;

	REQUIRE(m);
	rdmem_ring_consumer_init(&c, 0);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		/* Push once the parent announced it sleeps. */
		while (!atomic_load(&m->ctl.sleeping))
			sched_yield();
		usleep(20000);
		_exit(rdmem_ring_push(&r, 6, 6) == 0 ? 0 : 1);
	}
	t0 = rdmem_now_ns();
	bell = rdmem_ring_sleep_begin(&r, &c, &busy);
	CHECK(!busy);
	rdmem_ring_sleep(&r, bell, 5000000000ull);
	CHECK(rdmem_now_ns() - t0 < 2000000000ull);
	CHECK_EQ(rdmem_ring_pop(&r, &c, &cl, &sl), 1);
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && !WEXITSTATUS(status));
	/* A busy consumer costs the producer no wake-up: doorbell untouched. */
	bell = atomic_load(&m->ctl.doorbell);
	CHECK_EQ(rdmem_ring_push(&r, 6, 7), 0);
	CHECK_EQ(atomic_load(&m->ctl.doorbell), bell);
	ring_free(m, 64);
}

int main(void)
{
	RUN(test_ring_single_thread_fifo_and_full);
	RUN(test_ring_sequence_wraps_32_bits);
	RUN(test_ring_8_producer_processes_exactly_once_in_order);
	RUN(test_ring_producer_killed_between_claim_and_publish);
	RUN(test_ring_claim_burst_skips_in_bounded_steps);
	RUN(test_ring_stalled_producer_republishes_exactly_once);
	RUN(test_ring_scribbled_cell_is_repaired);
	RUN(test_ring_sleeping_consumer_is_kicked);
	return check_done();
}
