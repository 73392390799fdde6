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

int rdmem_lane_note(struct rdmem_lane *l, struct rdmem_session *s, uint32_t n)
{
	uint32_t k = rdmem_lane_find(l, s);

	if (n > 1 && k < l->n)
		rdmem_lane_remove(l, k); /* a burst: the round serves it */
	else if (n == 1 && k == l->n && l->n < l->cap) {
		l->s[l->n] = s;
		l->idle[l->n++] = 0;
	}
	l->since += n;
	return l->n && l->since >= RDMEM_LANE_EVERY;
}

void rdmem_lane_polled(struct rdmem_lane *l, uint32_t k, uint32_t n)
{
	if (k >= l->n)
		return;
	l->served += n;
	if (n > 1 || (n == 0 && ++l->idle[k] >= RDMEM_LANE_IDLE))
		rdmem_lane_remove(l, k);
	else if (n == 1)
		l->idle[k] = 0;
}

void rdmem_lane_forget(struct rdmem_lane *l, const struct rdmem_session *s)
{
	uint32_t k = rdmem_lane_find(l, s);

	if (k < l->n)
		rdmem_lane_remove(l, k);
}
