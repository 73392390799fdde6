/* group.c - a worker's slice schedule (see group.h). */
#include "server/group.h"

#include "rdmem/util.h"

void rdmem_group_init(struct rdmem_group *g, const struct rdmem_rdma_config *cfg)
{
	g->threshold = cfg->group_threshold;
	g->size = cfg->group_size;
	g->slice_us = cfg->slice_us;
	g->active = g->busy = 0;
	g->slice_start = g->slice_end = 0;
	atomic_init(&g->groups, 1);
	atomic_init(&g->active_group, 0);
	atomic_init(&g->slices, 0);
}

static uint32_t rdmem_group_count(const struct rdmem_group *g, uint32_t n)
{
	return rdmem_group_on(g, n) ? (n + g->size - 1) / g->size : 1;
}

/* Sessions [first, end) of group k. */
static void rdmem_group_range(const struct rdmem_group *g, uint32_t n, uint32_t k,
			      uint32_t *first, uint32_t *end)
{
	uint32_t size = rdmem_group_on(g, n) ? g->size : n;

	*first = RDMEM_MIN(k * size, n);
	*end = RDMEM_MIN(*first + size, n);
}

/* True when a session of group k has requests waiting (peeks at their CQs). */
static int rdmem_group_busy(const struct rdmem_group *g, const struct rdmem_group_view *v,
			    uint32_t k)
{
	uint32_t i, end, busy = 0;

	rdmem_group_range(g, v->n, k, &i, &end);
	for (; i < end; i++) {
		if (rdmem_session_peek(v->sess[i]) < 0)
			return 1; /* a broken session: the group's poll will close it */
		busy |= rdmem_session_backlog(v->sess[i]) != 0;
	}
	return busy;
}

static void rdmem_group_mark(const struct rdmem_group *g, const struct rdmem_group_view *v,
			     uint32_t k, uint32_t yield_us)
{
	uint32_t i, end;

	rdmem_group_range(g, v->n, k, &i, &end);
	for (; i < end; i++)
		rdmem_session_set_yield(v->sess[i],
					rdmem_lane_has(v->lane, v->sess[i]) ? 0 : yield_us);
}

/* Moves to the next group with work; an idle group costs no slice. */
static void rdmem_group_switch(struct rdmem_group *g, const struct rdmem_group_view *v,
			       uint64_t now)
{
	uint32_t n = rdmem_group_count(g, v->n), k, next = g->active, busy = 0, i;

	for (k = 1; k <= n; k++) {
		uint32_t cand = (g->active + k) % n;

		if (rdmem_group_busy(g, v, cand)) {
			if (!busy)
				next = cand;
			busy++;
		}
	}
	rdmem_group_mark(g, v, g->active % n, 0);
	g->busy = busy;
	if (next != g->active)
		atomic_fetch_add_explicit(&g->slices, 1, memory_order_relaxed);
	g->active = next % n;
	g->slice_start = now;
	g->slice_end = now + (uint64_t)g->slice_us * 1000;
	for (i = 0; i < v->n; i++)
		rdmem_session_set_group(v->sess[i], i / g->size, g->active);
	/* Relaxed: figures for STATS, read alone; this thread is their one writer. */
	atomic_store_explicit(&g->groups, n, memory_order_relaxed);
	atomic_store_explicit(&g->active_group, g->active, memory_order_relaxed);
}

/*
 * In the last quarter of a slice, replies tell agents how long to hold off:
 * until half a slice before their group's next turn, so their requests are
 * already in the ring when it starts (ScaleRPC's warm-up).
 */
static void rdmem_group_maybe_yield(const struct rdmem_group *g,
				    const struct rdmem_group_view *v, uint64_t now)
{
	uint64_t slice_ns = (uint64_t)g->slice_us * 1000;

	if (g->busy > 1 && now + slice_ns / 4 >= g->slice_end)
		rdmem_group_mark(g, v, g->active, g->slice_us * (g->busy - 1) - g->slice_us / 2);
}

void rdmem_group_turn(struct rdmem_group *g, const struct rdmem_group_view *v, uint64_t now,
		      uint32_t *first, uint32_t *end)
{
	if (!rdmem_group_on(g, v->n)) {
		atomic_store_explicit(&g->groups, 1, memory_order_relaxed); /* STATS */
		*first = 0;
		*end = v->n;
		return;
	}
	if (now >= g->slice_end || g->active >= rdmem_group_count(g, v->n))
		rdmem_group_switch(g, v, now);
	rdmem_group_maybe_yield(g, v, now);
	rdmem_group_range(g, v->n, g->active, first, end);
}

/* Groups other than the active one with requests waiting now. */
static uint32_t rdmem_group_others_busy(const struct rdmem_group *g,
					const struct rdmem_group_view *v)
{
	uint32_t n = rdmem_group_count(g, v->n), k, busy = 0;

	for (k = 0; k < n; k++)
		busy += k != g->active && rdmem_group_busy(g, v, k);
	return busy;
}

/*
 * The active group ran dry before its slice ended. Cutting at once (what
 * this did before) left its agents untold: a yield rides only replies of the
 * slice's last quarter, and only when busy, counted at the switch, was 2 or
 * more; a group cut for running dry is not busy at that switch, so with two
 * groups the count was 1 and no yield ever went out (measured: two agents
 * at window 4 or 16, the default 500 us slice, 0 yields in 200000 replies).
 * So when another group waits now (its CQs peeked, once per slice), a dry
 * group keeps a last quarter of its turn, as a busy one does: the requests
 * its agents send meanwhile are answered with the yield, and they hold until
 * their next turn. The price: up to a quarter slice with nothing to serve
 * when a group's agents are slower than that to send again. Nobody else
 * waiting: cut now, nobody needs telling.
 */
static void rdmem_group_cut(struct rdmem_group *g, const struct rdmem_group_view *v, uint64_t now)
{
	uint64_t quarter = (uint64_t)g->slice_us * 1000 / 4;
	uint32_t others;

	if (now + quarter >= g->slice_end) {
		/* In a last quarter already: it was granted (and the yield set)
		 * if anyone waited when it began; else end the turn. */
		if (g->busy <= 1)
			g->slice_end = now;
		return;
	}
	others = rdmem_group_others_busy(g, v);
	if (!others) {
		g->slice_end = now;
		return;
	}
	g->busy = others + 1;
	g->slice_end = now + quarter;
	rdmem_group_maybe_yield(g, v, now);
}

void rdmem_group_dry(struct rdmem_group *g, const struct rdmem_group_view *v, uint64_t now)
{
	/* The grace, a fifth of the slice: requests still on the way at the
	 * start of the turn. */
	if (rdmem_group_on(g, v->n) && now > g->slice_start + (uint64_t)g->slice_us * 200)
		rdmem_group_cut(g, v, now);
}
