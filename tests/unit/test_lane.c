/* test_lane.c - the quiet lane's membership (server/lane.h): who joins,
 * who leaves, who gives way when it is full, when the lane is due, and
 * that a closed session is gone. */
#include "server/lane.h"
#include "rdmem/util.h"
#include "tests/check.h"

/* Sessions are only compared by address here. */
static char sess[RDMEM_LANE_MAX + 2];
#define S(i) ((struct rdmem_session *)(void *)&sess[i])

static void test_one_call_joins_a_burst_leaves(void)
{
	struct rdmem_lane l;

	rdmem_lane_init(&l, 8);
	rdmem_lane_note(&l, S(0), 16, 0); /* a flooder's visit */
	CHECK(!rdmem_lane_has(&l, S(0)));
	rdmem_lane_note(&l, S(1), 1, 0); /* one call at a time */
	CHECK(rdmem_lane_has(&l, S(1)));
	CHECK_EQ(l.n, 1);
	rdmem_lane_note(&l, S(1), 1, 0); /* already in: not twice */
	CHECK_EQ(l.n, 1);
	rdmem_lane_note(&l, S(1), 2, 0); /* a burst: the round serves it */
	CHECK(!rdmem_lane_has(&l, S(1)));
	CHECK_EQ(l.n, 0);
}

/* What a poll found, not what it served: with --batch-budget 1 every poll
 * serves one, and a flooder's other 15 wait. */
static void test_found_not_served(void)
{
	struct rdmem_lane l;

	rdmem_lane_init(&l, 8);
	rdmem_lane_note(&l, S(0), 1, 15);
	CHECK(!rdmem_lane_has(&l, S(0)));
	rdmem_lane_note(&l, S(1), 1, 0);
	CHECK(rdmem_lane_has(&l, S(1)));
	rdmem_lane_note(&l, S(1), 1, 1); /* a member found with two: out */
	CHECK(!rdmem_lane_has(&l, S(1)));
	rdmem_lane_note(&l, S(1), 1, 0);
	rdmem_lane_polled(&l, 0, 1, 3); /* the lane's poll found four: out */
	CHECK(!rdmem_lane_has(&l, S(1)));
}

static void test_due_every_lane_every_served(void)
{
	struct rdmem_lane l;
	uint32_t i;

	rdmem_lane_init(&l, 8);
	/* No members: never due, however much is served. */
	for (i = 0; i < 4 * RDMEM_LANE_EVERY / 16; i++)
		CHECK(!rdmem_lane_note(&l, S(0), 16, 0));
	CHECK_EQ(l.since, 0);			 /* not counted while the lane is empty */
	CHECK(!rdmem_lane_note(&l, S(1), 1, 0)); /* joins; 1 served */
	for (i = 1; i + 16 < RDMEM_LANE_EVERY; i += 16)
		CHECK(!rdmem_lane_note(&l, S(0), 16, 0));
	CHECK(rdmem_lane_note(&l, S(0), 16, 0)); /* RDMEM_LANE_EVERY reached */
}

static void test_cap(void)
{
	struct rdmem_lane l;
	uint32_t i;

	rdmem_lane_init(&l, 3);
	for (i = 0; i < 5; i++)
		rdmem_lane_note(&l, S(i), 1, 0);
	CHECK_EQ(l.n, 3);
	CHECK(!rdmem_lane_has(&l, S(3))); /* members all busy: no place */
	rdmem_lane_init(&l, 0);		  /* --quiet-lane 0: no lane at all */
	rdmem_lane_note(&l, S(0), 1, 0);
	CHECK_EQ(l.n, 0);
	rdmem_lane_init(&l, 1000); /* clamped to the array */
	CHECK_EQ(l.cap, RDMEM_LANE_MAX);
	for (i = 0; i < RDMEM_LANE_MAX + 2; i++)
		rdmem_lane_note(&l, S(i), 1, 0);
	CHECK_EQ(l.n, RDMEM_LANE_MAX);
}

/* Lane polls of member k that find nothing. */
static void empty_polls(struct rdmem_lane *l, uint32_t k, uint32_t n)
{
	while (n--)
		rdmem_lane_polled(l, k, 0, 0);
}

/* A full lane: a newcomer takes the place of the member idle longest, once
 * it found nothing RDMEM_LANE_GIVE_WAY lane polls in a row; never of one
 * that had a call more often. A squatter that keeps its place with a call
 * now and then loses it to a session that is quiet for real. */
static void test_full_lane_gives_way(void)
{
	struct rdmem_lane l;

	rdmem_lane_init(&l, 3);
	rdmem_lane_note(&l, S(0), 1, 0);
	rdmem_lane_note(&l, S(1), 1, 0);
	rdmem_lane_note(&l, S(2), 1, 0);
	/* One empty lane poll (the round took its call, or it paused): a
	 * full-rate quiet client keeps its place. */
	empty_polls(&l, 0, 1);
	rdmem_lane_note(&l, S(3), 1, 0);
	CHECK(!rdmem_lane_has(&l, S(3)));
	/* Nor does a pause shorter than the give-way count lose it. */
	empty_polls(&l, 0, RDMEM_LANE_GIVE_WAY - 2);
	rdmem_lane_note(&l, S(3), 1, 0);
	CHECK(!rdmem_lane_has(&l, S(3)));
	CHECK(rdmem_lane_has(&l, S(0)));
	/* lane polls: 0 and 2 idle long enough (0 longest), 1 had a call */
	empty_polls(&l, 2, RDMEM_LANE_GIVE_WAY);
	rdmem_lane_polled(&l, 1, 1, 0);
	empty_polls(&l, 0, 2);
	rdmem_lane_note(&l, S(3), 1, 0);
	CHECK(rdmem_lane_has(&l, S(3)));
	CHECK(!rdmem_lane_has(&l, S(0))); /* idle longest */
	CHECK(rdmem_lane_has(&l, S(1)) && rdmem_lane_has(&l, S(2)));
	rdmem_lane_note(&l, S(4), 1, 0);
	CHECK(rdmem_lane_has(&l, S(4)));
	CHECK(!rdmem_lane_has(&l, S(2)));
	CHECK_EQ(l.n, 3);
	rdmem_lane_note(&l, S(5), 1, 0); /* 1, 3, 4 all busy: no place */
	CHECK(!rdmem_lane_has(&l, S(5)));
	CHECK_EQ(l.n, 3);
}

static void test_idle_member_leaves(void)
{
	struct rdmem_lane l;
	uint32_t i;

	rdmem_lane_init(&l, 8);
	rdmem_lane_note(&l, S(0), 1, 0);
	for (i = 0; i + 1 < RDMEM_LANE_IDLE; i++)
		rdmem_lane_polled(&l, 0, 0, 0);
	CHECK(rdmem_lane_has(&l, S(0)));
	rdmem_lane_polled(&l, 0, 1, 0); /* a call: the count starts again */
	for (i = 0; i + 1 < RDMEM_LANE_IDLE; i++)
		rdmem_lane_polled(&l, 0, 0, 0);
	CHECK(rdmem_lane_has(&l, S(0)));
	rdmem_lane_note(&l, S(0), 1, 0); /* a call the round took: again */
	for (i = 0; i + 1 < RDMEM_LANE_IDLE; i++)
		rdmem_lane_polled(&l, 0, 0, 0);
	CHECK(rdmem_lane_has(&l, S(0)));
	rdmem_lane_polled(&l, 0, 0, 0);
	CHECK(!rdmem_lane_has(&l, S(0)));
	CHECK_EQ(l.served, 1);
}

/* Members leave from the middle while the lane is walked from its end, as
 * the worker does: every member is polled once, none twice. */
static void test_walk_from_the_end(void)
{
	struct rdmem_lane l;
	uint32_t k, polled = 0;

	rdmem_lane_init(&l, 8);
	for (k = 0; k < 6; k++)
		rdmem_lane_note(&l, S(k), 1, 0);
	for (k = l.n; k--;) {
		polled++;
		rdmem_lane_polled(&l, k, 1, k % 2 ? 4 : 0); /* odd ones burst */
	}
	CHECK_EQ(polled, 6);
	CHECK_EQ(l.n, 3);
	for (k = 0; k < 6; k++)
		CHECK_EQ(rdmem_lane_has(&l, S(k)), k % 2 == 0);
	rdmem_lane_polled(&l, 7, 1, 0); /* past the end: ignored */
	CHECK_EQ(l.n, 3);
}

static void test_forget(void)
{
	struct rdmem_lane l;

	rdmem_lane_init(&l, 8);
	rdmem_lane_note(&l, S(0), 1, 0);
	rdmem_lane_note(&l, S(1), 1, 0);
	rdmem_lane_forget(&l, S(0));
	CHECK(!rdmem_lane_has(&l, S(0)));
	CHECK(rdmem_lane_has(&l, S(1)));
	rdmem_lane_forget(&l, S(5)); /* not a member: nothing */
	CHECK_EQ(l.n, 1);
}

int main(void)
{
	RUN(test_one_call_joins_a_burst_leaves);
	RUN(test_found_not_served);
	RUN(test_due_every_lane_every_served);
	RUN(test_cap);
	RUN(test_full_lane_gives_way);
	RUN(test_idle_member_leaves);
	RUN(test_walk_from_the_end);
	RUN(test_forget);
	return check_done();
}
