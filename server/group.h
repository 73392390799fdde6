/* group.h - a worker's slice schedule (connection grouping, ScaleRPC):
 * above --group-threshold sessions, the worker's sessions are split into
 * groups of --group-size in the order of its array, and one group is served
 * for a slice of --slice-us before the next group with work; an idle group
 * costs no slice. In a slice's last quarter (or the quarter a group that ran
 * dry gets while another waits), replies carry RDMEM_F_YIELD with how long
 * the agent should hold new calls. Owned by the worker thread; the counters
 * are read by STATS (docs/architecture.md, "Yields today"). */
#ifndef RDMEM_SERVER_GROUP_H
#define RDMEM_SERVER_GROUP_H

#include <stdatomic.h>
#include <stdint.h>

#include "server/lane.h"
#include "server/session.h"

/* The sessions a schedule runs over: the worker's array, and its lane,
 * whose members are never told to hold (lane.h). */
struct rdmem_group_view {
	struct rdmem_session *const *sess;
	uint32_t n;
	const struct rdmem_lane *lane;
};

struct rdmem_group {
	uint32_t threshold, size, slice_us; /* --group-threshold, -size, --slice-us */
	uint32_t active, busy;		    /* the group served; groups busy at its switch */
	uint64_t slice_start, slice_end;
	atomic_uint groups;	  /* STATS: groups now (1 when grouping is off) */
	atomic_uint active_group; /* STATS: the group being served */
	atomic_ullong slices;	  /* STATS: group switches */
};

void rdmem_group_init(struct rdmem_group *g, const struct rdmem_rdma_config *cfg);
/* True when n sessions are grouped (more than --group-threshold). */
static inline int rdmem_group_on(const struct rdmem_group *g, uint32_t n)
{
	return n > g->threshold;
}
/* The start of a round at `now`: switches to the next group with work when
 * the slice is over, sets the yield on replies in its last quarter, and
 * returns the sessions [*first, *end) to poll. Grouping off: all of them. */
void rdmem_group_turn(struct rdmem_group *g, const struct rdmem_group_view *v, uint64_t now,
		      uint32_t *first, uint32_t *end);
/* The round found no work: after a grace at the start of the slice, the
 * active group's turn ends, or gets a last quarter to tell its agents when
 * another group waits. */
void rdmem_group_dry(struct rdmem_group *g, const struct rdmem_group_view *v, uint64_t now);

#endif
