/* group.h - a worker's slice schedule (connection grouping, ScaleRPC):
 * above --group-threshold sessions, the worker serves one group of at most
 * --group-size sessions for a slice of --slice-us. A group is made at each
 * switch from the sessions that have requests waiting, taken round robin
 * from where the last group ended, looking only as far as it takes to fill
 * the group: an idle session is never in a group and costs a peek at its
 * completions per rotation at a switch, one per hint (a slice's last
 * quarter, a dry group's cut: each counts the sessions busy, exactly), and,
 * while fewer are busy than a group holds, one per switch (while the
 * worker spins idle, a switch a round); a busy one gets a slice in its
 * turn, whatever the others do.
 * In a slice's last quarter, or when the group runs dry while others wait
 * (its turn then ends at once), each member's agent is told once, in its
 * turn word (layout.h), how long to hold new calls: until half a slice
 * before its next turn as predicted, at most 65,535 us. A member told to
 * hold that has requests waiting when its group comes round is told its
 * turn; a holding agent with none waits out its hold (the word wakes
 * nobody). Every hold ends when the worker goes idle or grouping turns
 * off.
 * Owned by the worker thread; the counters are read by STATS
 * (docs/architecture.md, "Groups of busy sessions"). */
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

#define RDMEM_GROUP_LEFT UINT32_MAX /* a member whose session was dropped */

struct rdmem_group {
	uint32_t threshold, size, slice_us; /* --group-threshold, -size, --slice-us */
	uint32_t *member;		    /* the active group: indices into the array */
	uint32_t members;
	uint32_t cursor; /* where the next switch starts looking */
	int grouped;	 /* the last round was grouped */
	uint32_t busy;	 /* groups' worth of busy sessions, counted for the last hint */
	int told;	 /* this slice's last quarter has counted for its hint */
	/* The slice now (a member's rdmem_session_group equals it); every
	 * session's control page shows it. */
	uint64_t serving;
	uint64_t slice_start, slice_end;
	atomic_uint groups;	   /* STATS: busy groups at the last hint (1 ungrouped) */
	atomic_uint group_members; /* STATS: sessions in the active group */
	atomic_ullong slices;	   /* STATS: slices that served a group */
	/* STATS: sessions a switch found with requests waiting while a hold we
	 * told them ran: requests already on the way when the turn word
	 * landed, or an agent that does not honour it. */
	atomic_ullong held_arrivals;
};

int rdmem_group_init(struct rdmem_group *g, const struct rdmem_rdma_config *cfg);
void rdmem_group_fini(struct rdmem_group *g);
/* True when n sessions are grouped (more than --group-threshold). */
static inline int rdmem_group_on(const struct rdmem_group *g, uint32_t n)
{
	return n > g->threshold;
}
/* The start of a round at `now`. Grouping off: returns 0, poll them all.
 * Else switches to the next group when the slice is over, tells its
 * members to hold in its last quarter, and returns 1: poll
 * g->member[0, members), skipping RDMEM_GROUP_LEFT. */
int rdmem_group_turn(struct rdmem_group *g, const struct rdmem_group_view *v, uint64_t now);
/* The round found no work: after a grace at the start of the slice, the
 * group's turn ends, its agents told to hold when other sessions have
 * requests waiting. */
void rdmem_group_dry(struct rdmem_group *g, const struct rdmem_group_view *v, uint64_t now);
/* The worker is about to sleep, every session armed and none with work:
 * the group's turn and every hold end, so the request that wakes it is served
 * by a new group at once, not after the old one's grace (found by review:
 * with the dry quarter of then, up to 0.45 of a slice with the worker
 * idle). */
void rdmem_group_idle(struct rdmem_group *g, const struct rdmem_group_view *v, uint64_t now);
/* The worker dropped session i and moved its last, `last`, into i. */
void rdmem_group_dropped(struct rdmem_group *g, uint32_t i, uint32_t last);

#endif
