/* test_ring_wrap.c - a producer stalled between claim and publish across a
 * wrap of the ring's 32-bit cell sequence (shm/ring.h).
 *
 * A cell carries the low 32 bits of its position. A producer stopped after
 * claiming position p, then skipped by the consumer, can publish 2^32
 * positions later into the cell that waits for p + 2^32 (same low bits),
 * before anyone claimed that position. The consumer takes the late entry
 * (it names the producer's own slot, which the agent validates like any
 * other) and moves its tail past a head nobody advanced: head < tail. That
 * used to wedge the ring for good (every claim failed, the consumer rewrote
 * the same cell every millisecond); now the consumer puts head back and the
 * ring flows on.
 *
 * 2^32 positions take minutes to push, so the test formats the ring at
 * p + 2^32 instead: the cells and head it leaves are exactly what that
 * traffic would.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shm/ring.h"
#include "tests/check.h"

#define SIZE	 64u
#define SKIP_NS	 2000000ull
#define BOUND_MS 500 /* the ring must flow again within this */

struct ring_mem {
	struct rdmem_ring_ctl ctl;
	_Atomic uint64_t cells[SIZE];
};

/* Pops one entry within ms, or returns what the last pop returned. */
static int pop_within(struct rdmem_ring *r, struct rdmem_ring_consumer *c, uint16_t *cl,
		      uint16_t *sl, unsigned ms)
{
	uint64_t end = rdmem_now_ns() + ms * 1000000ull;
	int rc;

	while ((rc = rdmem_ring_pop(r, c, cl, sl)) != 1 && rdmem_now_ns() < end)
		usleep(100);
	return rc;
}

static void test_ring_publish_after_32_bit_wrap_does_not_wedge(void)
{
	struct ring_mem *m =
	    mmap(NULL, sizeof(*m), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	uint64_t start = 1000, pos_q = start + (1ull << 32), t0;
	struct rdmem_ring_consumer c;
	struct rdmem_ring r;
	uint16_t cl, sl;
	int status, i, pushed = 0;
	pid_t pid;

	REQUIRE(m != MAP_FAILED);
	rdmem_ring_bind(&r, &m->ctl, m->cells, SIZE);
	rdmem_ring_format(&r, start);
	rdmem_ring_consumer_init(&c, start);
	c.skip_after_ns = SKIP_NS;
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		uint64_t pos;

		if (rdmem_ring_claim(&r, &pos) || pos != start)
			_exit(2);
		raise(SIGSTOP);
		/* Lands: the cell waits for start + 2^32, whose low bits are ours. */
		_exit(rdmem_ring_publish(&r, pos, 7, 7) == 0 ? 0 : 3);
	}
	REQUIRE(waitpid(pid, &status, WUNTRACED) == pid && WIFSTOPPED(status));
	/* The consumer gives the stalled position up. */
	CHECK_EQ(pop_within(&r, &c, &cl, &sl, 200), 0);
	CHECK_EQ(c.skipped, 1);
	/* 2^32 positions later, idle: every cell and the head as that traffic leaves them. */
	rdmem_ring_format(&r, pos_q);
	rdmem_ring_consumer_init(&c, pos_q);
	c.skip_after_ns = SKIP_NS;
	CHECK(kill(pid, SIGCONT) == 0);
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* The late entry comes out once, naming the stalled producer's slot. */
	CHECK_EQ(pop_within(&r, &c, &cl, &sl, 200), 1);
	CHECK(cl == 7 && sl == 7);
	/* Then the ring must flow: 3 laps of entries, each within the bound. */
	t0 = rdmem_now_ns();
	for (i = 0; i < 3 * (int)SIZE; i++) {
		uint64_t end = rdmem_now_ns() + BOUND_MS * 1000000ull;
		int rc;

		while ((rc = rdmem_ring_push(&r, 1, (uint16_t)(i % 64))) == -EAGAIN &&
		       rdmem_now_ns() < end)
			(void)rdmem_ring_pop(&r, &c, &cl, &sl); /* the consumer's turn */
		if (rc)
			break;
		pushed++;
		if (pop_within(&r, &c, &cl, &sl, BOUND_MS) != 1 || cl != 1 || sl != i % 64)
			break;
	}
	printf("# %d of %u entries after the wrap, in %llu ms; %llu cell(s) rewritten\n", pushed,
	       3 * SIZE, (unsigned long long)((rdmem_now_ns() - t0) / 1000000),
	       (unsigned long long)c.repaired);
	CHECK_EQ(pushed, 3 * SIZE);
	CHECK(rdmem_now_ns() - t0 < BOUND_MS * 1000000ull);
	CHECK_EQ(rdmem_ring_pop(&r, &c, &cl, &sl), 0);
	munmap(m, sizeof(*m));
}

int main(void)
{
	RUN(test_ring_publish_after_32_bit_wrap_does_not_wedge);
	return check_done();
}
