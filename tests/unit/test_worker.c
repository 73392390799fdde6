/* test_worker.c - a worker (server/worker.c) with its slice schedule
 * (group.c) and quiet lane (lane.c), over scripted sessions: every
 * rdmem_session_* the worker calls is a fake here (the real session.o is
 * never linked in), so what each poll finds is exact and the test needs no
 * fabric and no agent. test_lane checks the lane's rules alone; this checks
 * that the worker feeds them what a poll found, polls a member for one call
 * and never tells a member to hold (docs/architecture.md, "The quiet
 * lane"), and that groups are made of busy sessions only, taking turns, and
 * survive a member's drop ("Groups of busy sessions"). */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "server/group.h"
#include "server/worker.h"
#include "tests/check.h"

/* A flooder always has more than a batch waiting. A quiet session's next
 * call has arrived by every poll or peek, and nothing behind it: a poll
 * serves it and leaves none. An idle one never has a call. */
enum fake_kind { FAKE_FLOOD, FAKE_QUIET, FAKE_IDLE };
#define FAKE_FLOOD_BACKLOG 1000

struct rdmem_session {
	_Atomic int kind;		/* enum fake_kind; a case may change it */
	int comp, event;		/* eventfds: the worker's epoll needs real fds */
	atomic_int dead;		/* set by the test: the next poll fails */
	atomic_int closed;		/* rdmem_session_close calls */
	atomic_int polled_closed;	/* polls after it was closed */
	atomic_ullong polls, one_polls; /* all polls; polls with a budget of one */
	atomic_ullong holds;		/* set_yield calls with a hold */
	atomic_uint hold_now;		/* the last turn word: a hold, or 0 (its turn) */
	atomic_int holding;		/* its agent holds on a hint (set by a case) */
	atomic_ullong joins;		/* slices whose group it was in */
	atomic_uint pending;		/* quiet: its call waits (seen by a peek) */
	atomic_ullong peeks;		/* rdmem_session_peek calls */
	atomic_ullong group;		/* the last slice whose group it was in */
};

/* ---- the fake session: the worker thread calls these ------------------------ */

int rdmem_session_poll(struct rdmem_session *s, uint32_t budget, uint64_t now)
{
	(void)now;
	if (atomic_load(&s->closed))
		atomic_fetch_add(&s->polled_closed, 1);
	if (atomic_load(&s->dead))
		return -EPIPE;
	atomic_fetch_add(&s->polls, 1);
	if (budget == 1)
		atomic_fetch_add(&s->one_polls, 1);
	atomic_store(&s->pending, 0);
	return s->kind == FAKE_FLOOD ? (int)budget : s->kind == FAKE_QUIET;
}

uint32_t rdmem_session_backlog(const struct rdmem_session *s)
{
	return s->kind == FAKE_FLOOD ? FAKE_FLOOD_BACKLOG : atomic_load(&s->pending);
}

int rdmem_session_peek(struct rdmem_session *s)
{
	atomic_fetch_add(&s->peeks, 1);
	atomic_store(&s->pending, s->kind == FAKE_QUIET);
	return atomic_load(&s->dead) ? -EPIPE : 0;
}

int rdmem_session_tick(struct rdmem_session *s, uint64_t now)
{
	(void)now;
	return atomic_load(&s->dead) ? -EPIPE : 0;
}

int rdmem_session_holding(const struct rdmem_session *s, uint64_t now)
{
	(void)now;
	return atomic_load(&s->holding);
}

uint64_t rdmem_session_timed(const struct rdmem_session *s)
{
	(void)s;
	return 0;
}

int rdmem_session_arm(struct rdmem_session *s)
{
	return s->kind != FAKE_IDLE; /* work waits: no sleep */
}

int rdmem_session_woke(struct rdmem_session *s, int comp_ready, int event_ready)
{
	(void)comp_ready;
	(void)event_ready;
	return atomic_load(&s->dead) ? -EPIPE : 0;
}

int rdmem_session_comp_fd(struct rdmem_session *s)
{
	return s->comp;
}

int rdmem_session_event_fd(struct rdmem_session *s)
{
	return s->event;
}

void rdmem_session_set_yield(struct rdmem_session *s, uint32_t hold_us, uint64_t now)
{
	(void)now;
	if (hold_us)
		atomic_fetch_add(&s->holds, 1);
	atomic_store(&s->hold_now, hold_us);
}

void rdmem_session_set_group(struct rdmem_session *s, uint64_t slice)
{
	atomic_store(&s->group, slice);
	atomic_fetch_add(&s->joins, 1);
}

uint64_t rdmem_session_group(const struct rdmem_session *s)
{
	return atomic_load(&s->group);
}

void rdmem_session_follow_slices(struct rdmem_session *s, const uint64_t *serving)
{
	(void)s;
	(void)serving;
}

void rdmem_session_get_info(const struct rdmem_session *s, struct rdmem_session_info *out)
{
	memset(out, 0, sizeof(*out));
	out->backlog = rdmem_session_backlog(s);
}

void rdmem_session_close(struct rdmem_session *s)
{
	atomic_fetch_add(&s->closed, 1);
}

/* ---- the harness ---------------------------------------------------------------- */

#define MAX_FAKES 8

struct bench {
	struct rdmem_rdma_config cfg;
	struct rdmem_workers *ws;
	struct rdmem_session s[MAX_FAKES];
	int n;
};

static void bench_cfg(struct bench *b, uint32_t batch_budget)
{
	memset(b, 0, sizeof(*b));
	b->cfg.workers = 1;
	b->cfg.batch_budget = batch_budget;
	b->cfg.quiet_lane = 8;
	b->cfg.group_threshold = 64; /* off unless a case turns it on */
	b->cfg.group_size = 1;
	b->cfg.slice_us = 200;
}

/* Grouped from the first session on (threshold 0, below the flag's range:
 * a worker that adopted only the first yet groups it already), groups of
 * `size`, no lane. */
static void bench_grouped(struct bench *b, uint32_t size)
{
	bench_cfg(b, 16);
	b->cfg.group_threshold = 0;
	b->cfg.group_size = size;
	b->cfg.quiet_lane = 0;
}

static int bench_start(struct bench *b, const enum fake_kind *kinds, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		b->s[i].kind = kinds[i];
		b->s[i].comp = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		b->s[i].event = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (b->s[i].comp < 0 || b->s[i].event < 0)
			return -errno;
	}
	b->n = n;
	if (rdmem_workers_start(&b->cfg, &b->ws) < 0)
		return -1;
	/* One worker: it adopts them in this order, so they sit in its array
	 * (and in the order a group switch looks at them) 0, 1, 2. */
	for (i = 0; i < n; i++)
		rdmem_workers_add(b->ws, &b->s[i]);
	return 0;
}

static void bench_stop(struct bench *b)
{
	int i;

	rdmem_workers_stop(b->ws);
	for (i = 0; i < b->n; i++) {
		CHECK_EQ(atomic_load(&b->s[i].closed), 1); /* once, by its owner */
		CHECK_EQ(atomic_load(&b->s[i].polled_closed), 0);
		close(b->s[i].comp);
		close(b->s[i].event);
	}
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* A worker figure as STATS shows it, or -1. */
static long stats_field(struct bench *b, const char *name)
{
	char buf[4096], key[64];
	const char *p;

	if (rdmem_workers_format(b->ws, 1, buf, sizeof(buf)) < 0)
		return -1;
	snprintf(key, sizeof(key), "\"%s\":", name);
	p = strstr(buf, key);
	return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

/* Waits up to 5 s for STATS to show `want` in field `name` (the worker
 * publishes its figures every 100 ms); returns the last value seen. */
static long wait_stat(struct bench *b, const char *name, long want)
{
	long v = stats_field(b, name);
	int i;

	for (i = 0; i < 500 && v != want; i++) {
		sleep_ms(10);
		v = stats_field(b, name);
	}
	return v;
}

/* The largest value field `name` shows over `ms` milliseconds (ten
 * publishes a second). */
static long max_stat(struct bench *b, const char *name, int ms)
{
	long v, most = -1;
	int i;

	for (i = 0; i < ms / 10; i++) {
		v = stats_field(b, name);
		most = v > most ? v : most;
		sleep_ms(10);
	}
	return most;
}

/* Waits up to 5 s for s to have had `polls` polls. */
static int wait_polls(struct rdmem_session *s, unsigned long long polls)
{
	int i;

	for (i = 0; i < 500 && atomic_load(&s->polls) < polls; i++)
		sleep_ms(10);
	return atomic_load(&s->polls) >= polls;
}

/* ---- cases ---------------------------------------------------------------------- */

/* A quiet session next to a flooder joins the lane, and the lane polls it
 * for one call (a poll with budget 1; the round's are --batch-budget 16).
 * The flooder is never polled so: it is not a member. */
static void test_lane_polls_a_member_for_one_call(void)
{
	const enum fake_kind kinds[] = { FAKE_FLOOD, FAKE_QUIET };
	struct bench b;

	bench_cfg(&b, 16);
	REQUIRE(bench_start(&b, kinds, 2) == 0);
	/* A lane poll is due every 256 requests served: 16 flooder polls. */
	CHECK(wait_polls(&b.s[0], 20000));
	sleep_ms(250); /* a publish of the lane's figures */
	CHECK(atomic_load(&b.s[1].one_polls) > 100);
	CHECK_EQ(atomic_load(&b.s[0].one_polls), 0);
	CHECK_EQ(wait_stat(&b, "lane", 1), 1);
	CHECK(stats_field(&b, "lane_served") > 100);
	bench_stop(&b);
}

/* What a poll found decides membership, not what it served: with
 * --batch-budget 1 every poll serves one, and the flooder, with 1,000
 * behind it, must stay out. */
static void test_lane_counts_what_a_poll_found(void)
{
	const enum fake_kind kinds[] = { FAKE_FLOOD, FAKE_QUIET };
	struct bench b;

	bench_cfg(&b, 1);
	REQUIRE(bench_start(&b, kinds, 2) == 0);
	CHECK(wait_polls(&b.s[0], 20000));
	sleep_ms(250);
	CHECK_EQ(wait_stat(&b, "lane", 1), 1);
	/* and stays so: a flooder let in would be in nearly every snapshot
	 * (it leaves at each lane poll, and its next poll lets it in again) */
	CHECK_EQ(max_stat(&b, "lane", 600), 1);
	bench_stop(&b);
}

/* Grouped (group size 1: flooder, quiet, flooder take turns), the
 * flooders are told to hold at the end of their slices, the quiet member
 * never: it is served whatever the group. */
static void test_grouped_member_never_holds(void)
{
	const enum fake_kind kinds[] = { FAKE_FLOOD, FAKE_QUIET, FAKE_FLOOD };
	struct bench b;

	bench_cfg(&b, 16);
	b.cfg.group_threshold = 0; /* grouped however many are adopted yet */
	REQUIRE(bench_start(&b, kinds, 3) == 0);
	CHECK(wait_polls(&b.s[0], 20000));
	CHECK(wait_polls(&b.s[2], 20000));
	sleep_ms(250);
	CHECK_EQ(wait_stat(&b, "groups", 3), 3);
	CHECK(stats_field(&b, "slices") > 10);
	CHECK(atomic_load(&b.s[1].joins) > 0);
	CHECK(atomic_load(&b.s[0].holds) > 0);
	CHECK(atomic_load(&b.s[2].holds) > 0);
	CHECK_EQ(atomic_load(&b.s[1].holds), 0);
	CHECK(atomic_load(&b.s[1].one_polls) > 100);
	bench_stop(&b);
}

/* A member whose connection fails is closed and leaves the lane; the
 * worker goes on serving the rest. */
static void test_failed_member_leaves(void)
{
	const enum fake_kind kinds[] = { FAKE_FLOOD, FAKE_QUIET };
	struct bench b;
	unsigned long long before;
	int i;

	bench_cfg(&b, 16);
	REQUIRE(bench_start(&b, kinds, 2) == 0);
	CHECK(wait_polls(&b.s[1], 1000));
	atomic_store(&b.s[1].dead, 1);
	for (i = 0; i < 500 && !atomic_load(&b.s[1].closed); i++)
		sleep_ms(10);
	CHECK(atomic_load(&b.s[1].closed));
	CHECK_EQ(rdmem_workers_sessions(b.ws), 1);
	before = atomic_load(&b.s[0].polls);
	CHECK(wait_polls(&b.s[0], before + 10000));
	sleep_ms(250);
	CHECK_EQ(wait_stat(&b, "lane", 0), 0);
	bench_stop(&b);
}

/* Grouped at group size 2, three flooders among three idle sessions make
 * groups of two busy ones: the idle are never polled nor in a group (fixed
 * groups of neighbours would poll each in its group's turn), and the busy
 * take turns, each in about two slices of three. */
static void test_groups_hold_busy_sessions_only(void)
{
	const enum fake_kind kinds[] = { FAKE_IDLE,  FAKE_FLOOD, FAKE_IDLE,
					 FAKE_FLOOD, FAKE_IDLE,	 FAKE_FLOOD };
	struct bench b;
	unsigned long long lo = ~0ull, hi = 0;
	int i;

	bench_grouped(&b, 2);
	REQUIRE(bench_start(&b, kinds, 6) == 0);
	for (i = 1; i < 6; i += 2)
		CHECK(wait_polls(&b.s[i], 20000));
	CHECK_EQ(wait_stat(&b, "groups", 2), 2);
	CHECK_EQ(wait_stat(&b, "group_members", 2), 2);
	CHECK(stats_field(&b, "slices") > 10);
	for (i = 0; i < 6; i += 2) {
		CHECK_EQ(atomic_load(&b.s[i].polls), 0);
		CHECK_EQ(atomic_load(&b.s[i].joins), 0);
	}
	bench_stop(&b); /* then the counts hold still */
	for (i = 1; i < 6; i += 2) {
		unsigned long long j = atomic_load(&b.s[i].joins);

		lo = j < lo ? j : lo;
		hi = j > hi ? j : hi;
	}
	/* Round robin: joins differ by at most one between busy sessions. */
	CHECK(lo > 10);
	CHECK(hi - lo <= 1);
}

/* The array's last session fails while it is in the active group: the
 * group forgets it, and no later poll reaches it (it is closed once) or
 * drops a live session in its place. */
static void test_member_dropped_mid_slice(void)
{
	const enum fake_kind kinds[] = { FAKE_FLOOD, FAKE_FLOOD, FAKE_FLOOD, FAKE_FLOOD };
	struct bench b;
	int i;

	bench_grouped(&b, 3);
	REQUIRE(bench_start(&b, kinds, 4) == 0);
	for (i = 0; i < 4; i++)
		CHECK(wait_polls(&b.s[i], 1000));
	atomic_store(&b.s[3].dead, 1);
	for (i = 0; i < 500 && !atomic_load(&b.s[3].closed); i++)
		sleep_ms(10);
	for (i = 0; i < 3; i++)
		CHECK(wait_polls(&b.s[i], atomic_load(&b.s[i].polls) + 20000));
	CHECK_EQ(rdmem_workers_sessions(b.ws), 3);
	for (i = 0; i < 3; i++)
		CHECK_EQ(atomic_load(&b.s[i].closed), 0);
	bench_stop(&b);
}

/* The schedule alone, driven by hand on this thread (group.c, no worker),
 * over three scripted sessions. */
struct hand {
	struct rdmem_session s[3];
	struct rdmem_session *arr[3];
	struct rdmem_lane lane; /* none: cap 0 */
	struct rdmem_group g;
	struct rdmem_group_view v;
};

static int hand_init(struct hand *h, const enum fake_kind kinds[3], uint32_t threshold,
		     uint32_t size)
{
	struct rdmem_rdma_config cfg = { .group_threshold = threshold,
					 .group_size = size,
					 .slice_us = 200 };
	int i;

	memset(h, 0, sizeof(*h));
	for (i = 0; i < 3; i++) {
		h->s[i].kind = kinds[i];
		h->arr[i] = &h->s[i];
	}
	rdmem_lane_init(&h->lane, 0);
	h->v = (struct rdmem_group_view){ h->arr, 3, &h->lane };
	return rdmem_group_init(&h->g, &cfg);
}

#define HAND_T0 1000000 /* the clock of a hand-driven schedule's first turn */

/* Three flooders, threshold 0 and group size 1, the first group made at
 * HAND_T0: session 0 alone. */
static int hand_floods(struct hand *h)
{
	const enum fake_kind kinds[3] = { FAKE_FLOOD, FAKE_FLOOD, FAKE_FLOOD };

	if (hand_init(h, kinds, 0, 1) < 0 || !rdmem_group_turn(&h->g, &h->v, HAND_T0))
		return -1;
	return h->g.member[0] == 0 ? 0 : -1;
}

/* By hand:
 * three flooders grouped one at a time are told to hold in the last
 * quarter of a slice; when one leaves and grouping turns off (2 sessions,
 * threshold 2), every hold ends at the next round, and grouping on again
 * makes a new group at once. */
static void test_grouping_off_ends_holds(void)
{
	const enum fake_kind kinds[3] = { FAKE_FLOOD, FAKE_FLOOD, FAKE_FLOOD };
	struct hand h;
	struct rdmem_group_view *v = &h.v;
	struct rdmem_group *g = &h.g;
	uint64_t t = 1000000;

	REQUIRE(hand_init(&h, kinds, 2, 1) == 0);
	CHECK(rdmem_group_turn(g, v, t));
	CHECK_EQ(g->members, 1);
	CHECK_EQ(atomic_load(&h.arr[g->member[0]]->hold_now), 0); /* not yet: the first 3/4 */
	CHECK(rdmem_group_turn(g, v, t + 160000));		  /* the last quarter */
	CHECK_EQ(g->busy, 3);
	CHECK_EQ(atomic_load(&h.arr[g->member[0]]->hold_now), 200 * 2 - 100);
	v->n = 2; /* the worker dropped the third */
	rdmem_group_dropped(g, 2, 2);
	CHECK(!rdmem_group_turn(g, v, t + 170000));
	CHECK_EQ(atomic_load(&h.s[0].hold_now), 0);
	CHECK_EQ(atomic_load(&h.s[1].hold_now), 0);
	v->n = 3;
	CHECK(rdmem_group_turn(g, v, t + 171000)); /* mid-slice, but a new group */
	CHECK_EQ(g->members, 1);
	rdmem_group_fini(g);
}

/* By hand: idle, busy, busy at group size 2 make the group {1, 2}; the
 * worker drops session 1 and moves its last, 2, into place 1: the group
 * skips the one that left and follows the one that moved. Then a group
 * with nobody left in it ends at the round that finds it dry, with no
 * grace: a request that came since waits for a new group, not a slice. */
static void test_group_follows_a_moved_member(void)
{
	const enum fake_kind kinds[3] = { FAKE_IDLE, FAKE_FLOOD, FAKE_FLOOD };
	struct hand h;
	struct rdmem_group_view *v = &h.v;
	struct rdmem_group *g = &h.g;
	uint64_t t = 1000000;

	REQUIRE(hand_init(&h, kinds, 0, 2) == 0);
	CHECK(rdmem_group_turn(g, v, t));
	REQUIRE(g->members == 2);
	CHECK_EQ(g->member[0], 1);
	CHECK_EQ(g->member[1], 2);
	h.arr[1] = h.arr[2]; /* what rdmem_worker_drop(w, 1) does */
	v->n = 2;
	rdmem_group_dropped(g, 1, 2);
	CHECK_EQ(g->member[0], RDMEM_GROUP_LEFT);
	CHECK_EQ(g->member[1], 1);
	v->n = 1;
	rdmem_group_dropped(g, 1, 1); /* and now the last, in place */
	CHECK_EQ(g->member[1], RDMEM_GROUP_LEFT);
	rdmem_group_dry(g, v, t + 1000); /* well within the grace */
	CHECK_EQ(g->slice_end, t + 1000);
	rdmem_group_fini(g);
}

/* The peeks each of sessions [0, n) took since the last call. */
static void peeks_taken(struct rdmem_session *s, uint32_t n, unsigned long long *out)
{
	uint32_t i;

	for (i = 0; i < n; i++)
		out[i] = atomic_exchange(&s[i].peeks, 0);
}

/* Session kinds by letter: f flooding, i idle. */
static void kinds_set(struct rdmem_session *s, const char *k)
{
	int i;

	for (i = 0; k[i]; i++)
		s[i].kind = k[i] == 'f' ? FAKE_FLOOD : FAKE_IDLE;
}

/* By hand, eight sessions at group size 2: a switch looks no further than
 * it takes to fill its group (a place looked at is a peek at a session's
 * completions; all of them at every switch was 18 % of a worker's time at
 * 1,024 sessions). A hint counts exactly, looking at every session outside
 * the group once: the slice's last quarter (members, and the others busy
 * or holding) once a slice, a dry group's cut (others with requests
 * waiting). */
static void test_switch_looks_no_further_than_its_group(void)
{
	struct rdmem_session s[8];
	struct rdmem_session *arr[8];
	struct rdmem_lane lane;
	struct rdmem_group g;
	struct rdmem_group_view v = { arr, 8, &lane };
	struct rdmem_rdma_config cfg = { .group_threshold = 0, .group_size = 2, .slice_us = 200 };
	unsigned long long peeks[8];
	uint64_t t = HAND_T0;
	int i;

	memset(s, 0, sizeof(s));
	for (i = 0; i < 8; i++)
		arr[i] = &s[i];
	kinds_set(s, "iffiifff");
	rdmem_lane_init(&lane, 0);
	REQUIRE(rdmem_group_init(&g, &cfg) == 0);
	CHECK(rdmem_group_turn(&g, &v, t)); /* 0 (idle), 1, 2 */
	CHECK_EQ(g.member[0], 1);
	CHECK_EQ(g.member[1], 2);
	peeks_taken(s, 8, peeks);
	for (i = 0; i < 8; i++)
		CHECK_EQ(peeks[i], i < 3);
	/* The last quarter: 2 members, 5 and 6 busy, and 7 holding on an
	 * earlier word with nothing waiting, busy too: 5, in 3 groups (4
	 * without the holder would be 2). */
	s[7].kind = FAKE_IDLE;
	atomic_store(&s[7].holding, 1);
	CHECK(rdmem_group_turn(&g, &v, t + 160000));
	CHECK_EQ(g.busy, 3);
	CHECK_EQ(atomic_load(&s[1].hold_now), 200 * 2 - 100);
	peeks_taken(s, 8, peeks);
	for (i = 0; i < 8; i++)
		CHECK_EQ(peeks[i], i != 1 && i != 2);
	CHECK(rdmem_group_turn(&g, &v, t + 170000)); /* counted once a slice */
	peeks_taken(s, 8, peeks);
	for (i = 0; i < 8; i++)
		CHECK_EQ(peeks[i], 0);
	/* but told at every round of the quarter (a real session writes only
	 * when no hold of ours runs: one that ran out is told again) */
	CHECK_EQ(atomic_load(&s[1].holds), 2);
	/* Dry: this group and the others with requests waiting (5 and 6),
	 * not the holder: 4, in 2 groups (5 with it would be 3). */
	kinds_set(s, "iiiiiffi");
	rdmem_group_dry(&g, &v, t + 180000);
	CHECK_EQ(g.slice_end, t + 180000);
	CHECK_EQ(g.busy, 2);
	CHECK_EQ(atomic_load(&s[1].hold_now), 200 - 100);
	peeks_taken(s, 8, peeks);
	for (i = 0; i < 8; i++)
		CHECK_EQ(peeks[i], i != 1 && i != 2);
	CHECK(rdmem_group_turn(&g, &v, t + 180000)); /* 3, 4 (idle), 5, 6 */
	CHECK_EQ(g.member[0], 5);
	CHECK_EQ(g.member[1], 6);
	peeks_taken(s, 8, peeks);
	for (i = 0; i < 8; i++)
		CHECK_EQ(peeks[i], i >= 3 && i <= 6);
	rdmem_group_fini(&g);
}

/* By hand: three flooders at group size 1; the first is told to hold in
 * its slice's last quarter, and obeys (nothing waiting). It still counts
 * for the next hint: the next group is told to hold for two slices less
 * half, as the first was, not for one less half. */
static void test_holding_sessions_count(void)
{
	struct hand h;
	struct rdmem_group_view *v = &h.v;
	struct rdmem_group *g = &h.g;
	uint64_t t = HAND_T0;

	REQUIRE(hand_floods(&h) == 0);
	CHECK(rdmem_group_turn(g, v, t + 160000));
	CHECK_EQ(atomic_load(&h.s[0].hold_now), 200 * 2 - 100);
	h.s[0].kind = FAKE_IDLE; /* its agent holds: nothing waiting */
	atomic_store(&h.s[0].holding, 1);
	CHECK(rdmem_group_turn(g, v, t + 200000)); /* the next slice */
	CHECK_EQ(g->member[0], 1);
	CHECK(rdmem_group_turn(g, v, t + 360000));
	CHECK_EQ(g->busy, 3);
	CHECK_EQ(atomic_load(&h.s[1].hold_now), 200 * 2 - 100);
	rdmem_group_fini(g);
}

/* By hand: three flooders at group size 1. The first is told to hold in
 * its slice's last quarter; the switch to the second leaves that hold
 * standing (its agent must not send during others' slices), and the
 * switch that makes it a member again tells it its turn has come. Going
 * idle ends every hold told. */
static void test_holds_stand_until_the_turn(void)
{
	struct hand h;
	struct rdmem_group_view *v = &h.v;
	struct rdmem_group *g = &h.g;
	uint64_t t = HAND_T0;
	int i;

	REQUIRE(hand_floods(&h) == 0);
	CHECK(rdmem_group_turn(g, v, t + 160000)); /* s0's last quarter */
	CHECK_EQ(atomic_load(&h.s[0].hold_now), 200 * 2 - 100);
	CHECK(rdmem_group_turn(g, v, t + 200000)); /* s1's slice */
	CHECK_EQ(g->member[0], 1);
	CHECK_EQ(atomic_load(&h.s[0].hold_now), 200 * 2 - 100);
	CHECK(rdmem_group_turn(g, v, t + 360000));
	CHECK(rdmem_group_turn(g, v, t + 400000)); /* s2's slice */
	CHECK_EQ(atomic_load(&h.s[0].hold_now), 200 * 2 - 100);
	CHECK_EQ(atomic_load(&h.s[1].hold_now), 200 * 2 - 100);
	CHECK(rdmem_group_turn(g, v, t + 560000));
	CHECK(rdmem_group_turn(g, v, t + 600000)); /* s0's turn again */
	CHECK_EQ(g->member[0], 0);
	CHECK_EQ(atomic_load(&h.s[0].hold_now), 0);
	CHECK_EQ(atomic_load(&h.s[1].hold_now), 200 * 2 - 100);
	rdmem_group_idle(g, v, t + 610000);
	for (i = 0; i < 3; i++)
		CHECK_EQ(atomic_load(&h.s[i].hold_now), 0);
	rdmem_group_fini(g);
}

/* By hand: three flooders at group size 1; the first's agent goes quiet
 * after the grace. Its turn ends at that round, not a quarter later (the
 * turn word tells it at once; a kept quarter only idled the worker), and
 * since the others wait it is told to hold until its next turn. */
static void test_dry_group_ends_at_once(void)
{
	struct hand h;
	struct rdmem_group_view *v = &h.v;
	struct rdmem_group *g = &h.g;
	uint64_t t = HAND_T0;

	REQUIRE(hand_floods(&h) == 0);
	h.s[0].kind = FAKE_IDLE;
	rdmem_group_dry(g, v, t + 30000); /* within the grace (40 us) */
	CHECK_EQ(g->slice_end, t + 200000);
	CHECK_EQ(atomic_load(&h.s[0].hold_now), 0);
	rdmem_group_dry(g, v, t + 50000);
	CHECK_EQ(g->slice_end, t + 50000);
	CHECK_EQ(atomic_load(&h.s[0].hold_now), 200 * 2 - 100);
	CHECK(rdmem_group_turn(g, v, t + 50000)); /* the next group, now */
	CHECK_EQ(g->member[0], 1);
	rdmem_group_fini(g);
}

/* By hand: the first's group runs dry after the grace while the others'
 * agents hold on our word, none with requests waiting: nobody competes,
 * so it is not told to hold (a hold would idle the worker until theirs
 * end), and its turn ends. */
static void test_dry_cut_among_holders(void)
{
	struct hand h;
	struct rdmem_group_view *v = &h.v;
	struct rdmem_group *g = &h.g;
	int i;

	REQUIRE(hand_floods(&h) == 0);
	for (i = 0; i < 3; i++)
		h.s[i].kind = FAKE_IDLE;
	atomic_store(&h.s[1].holding, 1);
	atomic_store(&h.s[2].holding, 1);
	rdmem_group_dry(g, v, HAND_T0 + 50000);
	CHECK_EQ(g->slice_end, HAND_T0 + 50000);
	CHECK_EQ(atomic_load(&h.s[0].hold_now), 0);
	rdmem_group_fini(g);
}

/* A worker goes to sleep with a group whose member went quiet, in a
 * one-second slice; a request from another session wakes it and is served
 * at once, not after the old group's grace (200 ms): going to sleep ends
 * the group. */
static void test_sleep_ends_the_group(void)
{
	const enum fake_kind kinds[] = { FAKE_FLOOD, FAKE_IDLE };
	struct bench b;
	uint64_t one = 1, t0, waited_ms;
	int i;

	bench_grouped(&b, 1);
	b.cfg.slice_us = 1000000;
	REQUIRE(bench_start(&b, kinds, 2) == 0);
	CHECK(wait_polls(&b.s[0], 1000));
	b.s[0].kind = FAKE_IDLE; /* the group's one member runs dry */
	sleep_ms(20);		 /* the worker spins a little, then sleeps */
	t0 = rdmem_now_ns();
	b.s[1].kind = FAKE_FLOOD;
	CHECK(write(b.s[1].comp, &one, sizeof(one)) == sizeof(one)); /* its completion */
	for (i = 0; i < 2000 && atomic_load(&b.s[1].polls) == 0; i++)
		sleep_ms(1);
	waited_ms = (rdmem_now_ns() - t0) / 1000000;
	printf("# served after %llu ms\n", (unsigned long long)waited_ms);
	CHECK(atomic_load(&b.s[1].polls) > 0);
	/* A group kept through the sleep ends at its grace: 200 ms after its
	 * slice began, about 175 ms from here. */
	CHECK(waited_ms < 100);
	bench_stop(&b);
}

/* Grouped at size 1 with one-second slices: a quiet session joins the
 * lane in its own slice, then a flooder gets the next; when the flooder
 * goes quiet its group is dry, and the lane member goes on being served at
 * once, not after the dry group's grace (200 ms) and last quarter. */
static void test_dry_group_serves_the_lane(void)
{
	const enum fake_kind kinds[] = { FAKE_IDLE, FAKE_QUIET };
	struct bench b;
	unsigned long long before;

	bench_grouped(&b, 1);
	b.cfg.quiet_lane = 8;
	b.cfg.slice_us = 1000000;
	REQUIRE(bench_start(&b, kinds, 2) == 0);
	CHECK_EQ(wait_stat(&b, "lane", 1), 1);
	b.s[0].kind = FAKE_FLOOD; /* its group comes when the quiet one's slice ends */
	CHECK(wait_polls(&b.s[0], 10000));
	b.s[0].kind = FAKE_IDLE; /* and now its group is dry */
	sleep_ms(10);
	before = atomic_load(&b.s[1].polls);
	sleep_ms(100);
	CHECK(atomic_load(&b.s[1].polls) > before + 10);
	bench_stop(&b);
}

int main(void)
{
	RUN(test_lane_polls_a_member_for_one_call);
	RUN(test_lane_counts_what_a_poll_found);
	RUN(test_grouped_member_never_holds);
	RUN(test_failed_member_leaves);
	RUN(test_groups_hold_busy_sessions_only);
	RUN(test_member_dropped_mid_slice);
	RUN(test_grouping_off_ends_holds);
	RUN(test_holds_stand_until_the_turn);
	RUN(test_dry_group_ends_at_once);
	RUN(test_dry_cut_among_holders);
	RUN(test_group_follows_a_moved_member);
	RUN(test_holding_sessions_count);
	RUN(test_switch_looks_no_further_than_its_group);
	RUN(test_sleep_ends_the_group);
	RUN(test_dry_group_serves_the_lane);
	return check_done();
}
