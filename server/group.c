/* group.c - a worker's slice schedule (see group.h). */
#include "server/group.h"

#include <errno.h>
#include <stdlib.h>

#include "rdmem/util.h"

int rdmem_group_init(struct rdmem_group *g, const struct rdmem_rdma_config *cfg)
{
	g->threshold = cfg->group_threshold;
	g->size = RDMEM_MAX(1u, cfg->group_size);
	g->slice_us = cfg->slice_us;
	g->members = g->cursor = g->busy = 0;
	g->serving = 0;
	g->told = 0;
	g->grouped = 0;
	g->slice_start = g->slice_end = 0;
	atomic_init(&g->groups, 1);
	atomic_init(&g->group_members, 0);
	atomic_init(&g->slices, 0);
	atomic_init(&g->held_arrivals, 0);
	g->member = calloc(g->size, sizeof(*g->member));
	return g->member ? 0 : -ENOMEM;
}

void rdmem_group_fini(struct rdmem_group *g)
{
	free(g->member);
	g->member = NULL;
}

/* Requests waiting (its completions reaped first), or a broken connection,
 * which the group's poll then closes. */
static int rdmem_group_has_work(struct rdmem_session *s)
{
	return rdmem_session_peek(s) < 0 || rdmem_session_backlog(s) != 0;
}

static uint32_t rdmem_group_count(const struct rdmem_group *g, uint32_t busy)
{
	return (busy + g->size - 1) / g->size;
}

/* Tells every member to hold yield_us, or (0) that its turn has come; a
 * lane member is never told to hold. */
static void rdmem_group_mark(const struct rdmem_group *g, const struct rdmem_group_view *v,
			     uint32_t yield_us, uint64_t now)
{
	uint32_t k;

	for (k = 0; k < g->members; k++) {
		struct rdmem_session *s;

		if (g->member[k] == RDMEM_GROUP_LEFT)
			continue;
		s = v->sess[g->member[k]];
		rdmem_session_set_yield(s, rdmem_lane_has(v->lane, s) ? 0 : yield_us, now);
	}
}

/* Every hold we told ends: nobody waits for a turn any more. A holder's
 * completions are reaped first: a request that came since the last reap
 * (the worker armed its CQ to sleep) may acknowledge the wake this turn
 * needs, and read after it, the turn goes plain and the agent sleeps its
 * hold out (found by test_turn_wake). What the reap finds is served when
 * the armed CQ wakes the worker; an error it finds, the next round's poll
 * or the connection's event does (as a switch's peek leaves them). */
static void rdmem_group_go_all(const struct rdmem_group_view *v, uint64_t now)
{
	uint32_t i;

	for (i = 0; i < v->n; i++) {
		struct rdmem_session *s = v->sess[i];

		if (rdmem_session_holding(s, now))
			(void)rdmem_session_peek(s);
		rdmem_session_set_yield(s, 0, now);
	}
}

/*
 * The next group: the first --group-size sessions with requests waiting,
 * looking from the one after the last group's last member, so busy sessions
 * take turns whatever their place in the array, and no further than it
 * takes to fill the group: each place looked at costs a peek at the
 * session's completions, and a peek of every session at every switch was
 * 18 % of a worker's time at 1,024 sessions (docs/architecture.md, "Groups
 * of busy sessions"). How many are busy is counted when a hint is told
 * (rdmem_group_maybe_yield, rdmem_group_cut), not here. The last group's
 * holds stand; the new group's members that were told to hold are told
 * their turn has come, so they send what they held now, not when their
 * hold runs out.
 */
static void rdmem_group_switch(struct rdmem_group *g, const struct rdmem_group_view *v,
			       uint64_t now)
{
	uint64_t slice = atomic_load_explicit(&g->slices, memory_order_relaxed) + 1;
	uint32_t j, held = 0, last = g->cursor;

	g->members = 0;
	for (j = 0; j < v->n && g->members < g->size; j++) {
		uint32_t i = (g->cursor + j) % v->n;
		int join = rdmem_group_has_work(v->sess[i]);

		held += join && rdmem_session_holding(v->sess[i], now);
		if (join) {
			g->member[g->members++] = i;
			rdmem_session_set_group(v->sess[i], slice);
			last = i;
		}
	}
	g->cursor = g->members ? last + 1 : g->cursor;
	g->serving = slice;
	rdmem_group_mark(g, v, 0, now);
	g->told = 0;
	g->slice_start = now;
	g->slice_end = now + (uint64_t)g->slice_us * 1000;
	/* Relaxed: figures for STATS, read alone; this thread is their one writer. */
	if (g->members)
		atomic_store_explicit(&g->slices, slice, memory_order_relaxed);
	if (held)
		atomic_fetch_add_explicit(&g->held_arrivals, held, memory_order_relaxed);
	atomic_store_explicit(&g->group_members, g->members, memory_order_relaxed);
}

/* Members not dropped since the switch: 0 when none is left to serve (or
 * tell). */
static uint32_t rdmem_group_live(const struct rdmem_group *g)
{
	uint32_t k, live = 0;

	for (k = 0; k < g->members; k++)
		live += g->member[k] != RDMEM_GROUP_LEFT;
	return live;
}

/*
 * Busy sessions outside the active group, every one looked at: with
 * requests waiting (peeked), or, with holders set, holding on a hold we
 * told. Exact, as the hold a hint tells must not outlast the turn: told
 * too long, an agent with nothing waiting when its group comes round is not
 * told its turn, and waits a whole rotation more. A count kept over a
 * rotation, one switch's part at a time, was tried (f70b834, 25da270): it
 * ran high for up to two rotations when load fell (found by review). So
 * each hint peeks every session once: at 1,024 sessions 15-19 % of the
 * worker, in the dry groups' cuts; a cheaper exact count needs all
 * sessions' completions in one place (a CQ shared by the worker's
 * sessions).
 */
static uint32_t rdmem_group_others(const struct rdmem_group *g, const struct rdmem_group_view *v,
				   int holders, uint64_t now)
{
	uint32_t i, busy = 0;

	for (i = 0; i < v->n; i++) {
		struct rdmem_session *s = v->sess[i];

		if (rdmem_session_group(s) == g->serving)
			continue; /* a member */
		busy += rdmem_group_has_work(s) || (holders && rdmem_session_holding(s, now));
	}
	return busy;
}

/* The hint's count: busy sessions, in groups' worth, rounded up. */
static void rdmem_group_set_busy(struct rdmem_group *g, uint32_t busy)
{
	g->busy = rdmem_group_count(g, busy);
	/* Relaxed: a figure for STATS, read alone; this thread is its one writer. */
	atomic_store_explicit(&g->groups, g->busy, memory_order_relaxed);
}

/*
 * Tells the members' agents how long to hold off, once each (in a slice's
 * last quarter, or when the group runs dry while others wait): until half
 * a slice before their next turn (after the other busy groups' slices), so
 * their requests are already in the ring when it starts (ScaleRPC's
 * warm-up).
 */
static void rdmem_group_tell(const struct rdmem_group *g, const struct rdmem_group_view *v,
			     uint64_t now)
{
	/* 64-bit: a million-microsecond slice times thousands of groups; the
	 * turn word carries at most 65535 us anyway (rdmem_session_set_yield). */
	uint64_t hold = (uint64_t)g->slice_us * (g->busy - 1) - g->slice_us / 2;

	if (g->busy > 1)
		rdmem_group_mark(g, v, (uint32_t)RDMEM_MIN(hold, (uint64_t)UINT32_MAX), now);
}

/*
 * In the slice's last quarter: the members and every session busy outside
 * the group, counted once a slice, at the quarter's first round. A session
 * whose agent is holding on our hint has nothing waiting, but it is busy
 * for the count: left out, each slice would count one group fewer than
 * there are, and the hints shrink until the last group of a rotation is
 * never told to hold (found by review). Told at every round of the
 * quarter, as a hold running is not told again: a member whose hold ran
 * out inside the quarter (the word's 65,535 us cap is less than a quarter
 * of a slice over 262 ms) or that left the quiet lane is told again (found
 * by review).
 */
static void rdmem_group_maybe_yield(struct rdmem_group *g, const struct rdmem_group_view *v,
				    uint64_t now)
{
	if (now + (uint64_t)g->slice_us * 1000 / 4 < g->slice_end)
		return;
	if (!g->told) {
		g->told = 1;
		rdmem_group_set_busy(g, rdmem_group_live(g) + rdmem_group_others(g, v, 1, now));
	}
	rdmem_group_tell(g, v, now);
}

/*
 * Grouping just turned off (sessions left, the count fell to the
 * threshold): every hold told ends (left running, agents would wait for a
 * turn nobody gives any more), and every session's control page stops
 * showing it in the active group.
 */
static void rdmem_group_off(struct rdmem_group *g, const struct rdmem_group_view *v, uint64_t now)
{
	rdmem_group_go_all(v, now);
	g->serving = atomic_load_explicit(&g->slices, memory_order_relaxed) + 1;
	g->members = 0;
	g->grouped = 0;
	g->slice_end = 0; /* on again: a new group at once */
	atomic_store_explicit(&g->groups, 1, memory_order_relaxed); /* STATS */
	atomic_store_explicit(&g->group_members, 0, memory_order_relaxed);
}

int rdmem_group_turn(struct rdmem_group *g, const struct rdmem_group_view *v, uint64_t now)
{
	if (!rdmem_group_on(g, v->n)) {
		if (g->grouped)
			rdmem_group_off(g, v, now);
		return 0;
	}
	g->grouped = 1;
	if (now >= g->slice_end)
		rdmem_group_switch(g, v, now);
	rdmem_group_maybe_yield(g, v, now);
	return 1;
}

/*
 * The active group ran dry before its slice ended: its turn ends now. When
 * other sessions have requests waiting (rdmem_group_others), its agents
 * are told to hold first, as a slice's last quarter tells them: their next
 * requests belong to their next turn. Holders alone are no reason to tell
 * (nobody competes for the NIC now), nor do they lengthen the hold, though
 * they come back before this group's next turn: a review asked for that,
 * and it cost throughput without a better tail (1,024 sessions, window 4,
 * two rounds each: all busy 1.07 and 1.17 M QPS against 1.91 and 1.84 M,
 * p99 4.6 and 3.1 ms against 3.5 and 3.8 ms; 128 busy 1.45 and 1.52 M
 * against 1.92 and 1.90 M).
 *
 * Before the turn word the hold rode on replies, so a dry group kept a last
 * quarter of its turn to answer with it; the word reaches every member at
 * once, and that quarter only kept the worker idle while other groups
 * waited (measured: with 128 of 1,024 sessions busy, 1.38 and 1.24 M QPS
 * with it against 1.74 and 1.69 M for replies carrying the hold).
 */
static void rdmem_group_cut(struct rdmem_group *g, const struct rdmem_group_view *v, uint64_t now)
{
	uint32_t others = rdmem_group_others(g, v, 0, now);

	rdmem_group_set_busy(g, g->size + others); /* this group, then theirs */
	if (others)
		rdmem_group_tell(g, v, now);
	g->slice_end = now;
}

void rdmem_group_dry(struct rdmem_group *g, const struct rdmem_group_view *v, uint64_t now)
{
	if (!rdmem_group_on(g, v->n))
		return;
	/* Nobody in the group (none was busy at the switch, or all left): a
	 * request that came since waits for no grace and no quarter; the
	 * next round makes a group. */
	if (!rdmem_group_live(g)) {
		g->slice_end = now;
		return;
	}
	/* The grace, a fifth of the slice: requests still on the way at the
	 * start of the turn. */
	if (now > g->slice_start + (uint64_t)g->slice_us * 200)
		rdmem_group_cut(g, v, now);
}

void rdmem_group_idle(struct rdmem_group *g, const struct rdmem_group_view *v, uint64_t now)
{
	rdmem_group_go_all(v, now);
	g->members = 0;
	g->slice_end = 0;
	atomic_store_explicit(&g->group_members, 0, memory_order_relaxed); /* STATS */
}

void rdmem_group_dropped(struct rdmem_group *g, uint32_t i, uint32_t last)
{
	uint32_t k;

	for (k = 0; k < g->members; k++) {
		if (g->member[k] == i)
			g->member[k] = RDMEM_GROUP_LEFT;
		else if (g->member[k] == last)
			g->member[k] = i;
	}
}
