/* lane.c - a worker's quiet lane (see lane.h). At most RDMEM_LANE_MAX
 * members, found by a scan: cheaper than a field in every session for the
 * 8 a default lane holds, and only a poll that served something looks. */
#include "server/lane.h"

#include "rdmem/util.h"

void rdmem_lane_init(struct rdmem_lane *l, uint32_t cap)
{
	*l = (struct rdmem_lane){ .cap = RDMEM_MIN(cap, (uint32_t)RDMEM_LANE_MAX) };
}

static uint32_t rdmem_lane_find(const struct rdmem_lane *l, const struct rdmem_session *s)
{
	uint32_t k;

	for (k = 0; k < l->n && l->s[k] != s; k++)
		;
	return k;
}

int rdmem_lane_has(const struct rdmem_lane *l, const struct rdmem_session *s)
{
	return rdmem_lane_find(l, s) < l->n;
}

static void rdmem_lane_remove(struct rdmem_lane *l, uint32_t k)
{
	l->n--;
	l->s[k] = l->s[l->n];
	l->idle[k] = l->idle[l->n];
}

/*
 * Where a newcomer goes: a free place, else the place of the member idle
 * longest, if its last RDMEM_LANE_GIVE_WAY lane polls found nothing (one
 * empty poll is not enough: a full-rate quiet client whose last call the
 * round took, or that paused, would lose its place to any newcomer). So a
 * session holds a place only by using it at least that often; whoever
 * holds all of them is served one call each per lane poll, all the lane
 * gives (lane.h).
 */
static uint32_t rdmem_lane_place(const struct rdmem_lane *l)
{
	uint32_t k, most = l->cap;

	if (l->n < l->cap)
		return l->n;
	for (k = 0; k < l->n; k++)
		if (l->idle[k] >= RDMEM_LANE_GIVE_WAY &&
		    (most == l->cap || l->idle[k] > l->idle[most]))
			most = k;
	return most; /* l->cap: no place */
}

int rdmem_lane_note(struct rdmem_lane *l, struct rdmem_session *s, uint32_t served, uint32_t left)
{
	uint32_t k = rdmem_lane_find(l, s);

	if (k < l->n) {
		if (served + left > 1)
			rdmem_lane_remove(l, k); /* a burst: the round serves it */
		else if (served)
			l->idle[k] = 0; /* its call came to the round first */
	} else if (served == 1 && !left && (k = rdmem_lane_place(l)) < l->cap) {
		if (k == l->n)
			l->n++; /* a free place, else a member's taken over */
		l->s[k] = s;
		l->idle[k] = 0;
	}
	/* Counted only while there are members: a first member is polled
	 * 256 requests after it joined, not at once. */
	l->since = l->n ? l->since + served : 0;
	return l->n && l->since >= RDMEM_LANE_EVERY;
}

void rdmem_lane_polled(struct rdmem_lane *l, uint32_t k, uint32_t served, uint32_t left)
{
	if (k >= l->n)
		return;
	l->served += served;
	if (served + left > 1 || (!served && ++l->idle[k] >= RDMEM_LANE_IDLE))
		rdmem_lane_remove(l, k);
	else if (served)
		l->idle[k] = 0;
}

void rdmem_lane_forget(struct rdmem_lane *l, const struct rdmem_session *s)
{
	uint32_t k = rdmem_lane_find(l, s);

	if (k < l->n)
		rdmem_lane_remove(l, k);
}
