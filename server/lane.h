/* lane.h - a worker's quiet lane: the few sessions that send one call at a
 * time, polled again for one call each after every RDMEM_LANE_EVERY
 * requests the worker serves, whatever their group, so a latency-sensitive
 * session's call does not wait a whole round of flooders (or, grouped,
 * every other group's slice). Membership follows what each poll finds:
 * one request and nothing left joins (when the lane is full, in place of
 * the member idle longest), more than one leaves, and RDMEM_LANE_IDLE lane
 * polls in a row that find nothing leave. Data only: the worker polls
 * (worker.c; docs/architecture.md, "The quiet lane"). */
#ifndef RDMEM_SERVER_LANE_H
#define RDMEM_SERVER_LANE_H

#include <stdint.h>

#define RDMEM_LANE_MAX	 64   /* --quiet-lane's upper bound */
#define RDMEM_LANE_EVERY 256  /* requests served between lane polls */
#define RDMEM_LANE_IDLE	 1024 /* empty lane polls in a row before a member leaves */
/* Empty lane polls in a row before a member may give its place to a
 * newcomer: a client that pauses between calls for up to ~8 lane polls
 * (about 2,000 requests served) keeps it. */
#define RDMEM_LANE_GIVE_WAY 8

struct rdmem_session;

struct rdmem_lane {
	struct rdmem_session *s[RDMEM_LANE_MAX];
	uint32_t idle[RDMEM_LANE_MAX]; /* lane polls in a row that found nothing */
	uint32_t n, cap;	       /* cap: --quiet-lane (0: no lane) */
	uint32_t since;		       /* requests served since the lane's last poll */
	uint64_t polls, served;	       /* lane polls, requests they served (STATS) */
};

void rdmem_lane_init(struct rdmem_lane *l, uint32_t cap);
/* A round's poll of s served `served` requests (> 0) and left `left`
 * waiting (the session's backlog: a poll serves at most --batch-budget).
 * Returns 1 when the lane is due for a poll (it has members and
 * RDMEM_LANE_EVERY requests were served since its last). */
int rdmem_lane_note(struct rdmem_lane *l, struct rdmem_session *s, uint32_t served, uint32_t left);
/* The lane's poll of member k (one request at most) served `served` and
 * left `left`; the member may leave, so the caller walks the lane from its
 * end. */
void rdmem_lane_polled(struct rdmem_lane *l, uint32_t k, uint32_t served, uint32_t left);
/* s is closing (or failed a lane poll): it leaves the lane. */
void rdmem_lane_forget(struct rdmem_lane *l, const struct rdmem_session *s);
int rdmem_lane_has(const struct rdmem_lane *l, const struct rdmem_session *s);

#endif
