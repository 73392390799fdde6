/* stats.h - the agent's telemetry: counters each actor publishes, the
 * snapshot the session actor assembles for AGENT_STATS, and its text and
 * JSON renderings (what `rdmem agent-stats` prints). */
#ifndef RDMEM_AGENT_STATS_H
#define RDMEM_AGENT_STATS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/frontdoor.h"
#include "agent/rdma.h"
#include "agent/resp.h"
#include "agent/session.h"
#include "agent/tcp_actor.h"
#include "common/counters.h"
#include "common/metrics.h"

/* Written by the holder of the session's token only (its actor, or the front
 * door taking calls inline); relaxed atomics so other threads may read. */
struct rdmem_agent_counters {
	atomic_uint_fast64_t calls[RDMEM_PATH__COUNT]; /* calls the selector sent each way */
	atomic_uint_fast64_t ok[RDMEM_PATH__COUNT];    /* finished on RDMA, by carrying path */
	atomic_uint_fast64_t failed[RDMEM_PATH__COUNT];
	atomic_uint_fast64_t fallbacks;	   /* RDMA calls retried on TCP */
	atomic_uint_fast64_t inline_calls; /* taken on the front door's thread (session.c) */
	atomic_uint_fast64_t rdma_errors;
	atomic_uint_fast64_t link_opens, link_losses;
	atomic_uint_fast64_t link_stalls; /* links dropped by the liveness check */
	atomic_uint link_up;
	atomic_uint memlock_short; /* RDMA off: the locked-memory limit is too low */
};

struct rdmem_agent_snapshot {
	struct rdmem_frontdoor_stats fd;
	struct rdmem_tcp_actor_stats tcp;
	struct rdmem_rdma_stats rdma;
	struct rdmem_resp_stats resp; /* the Redis protocol front end (agent/resp.c) */
	uint64_t calls[RDMEM_PATH__COUNT], ok[RDMEM_PATH__COUNT], failed[RDMEM_PATH__COUNT];
	uint64_t fallbacks, inline_calls, rdma_errors_total, link_opens, link_losses, link_stalls;
	uint32_t link_up;
	uint32_t memlock_short;
	uint32_t rdma_errors; /* the count the selector compares with --error-threshold */
	int fabric;
	uint8_t force;
	struct rdmem_simulate sim;
	int have_ctrl;
	struct rdmem_ctrl ctrl; /* the server's control page, last read */
	/* words the table shows; rdmem_agent_snapshot_names() fills them in */
	const char *fabric_name, *force_name, *pressure_name;
};

/* Entries shown only with the server's control page read (have_ctrl). */
#define RDMEM_AGENT_CTR_CTRL 1u

/* The agent's counter table: every name `rdmem agent-stats` (text, JSON)
 * and /metrics show, and where its value sits in the snapshot. */
extern const struct rdmem_ctr_table rdmem_agent_ctr_table;

/* Fills the snapshot's words from its numbers (fabric, force, pressure). */
void rdmem_agent_snapshot_names(struct rdmem_agent_snapshot *s);
static inline unsigned rdmem_agent_snapshot_mask(const struct rdmem_agent_snapshot *s)
{
	return s->have_ctrl ? RDMEM_AGENT_CTR_CTRL : 0;
}

/* One writer at a time (a session's counters: the holder of its token,
 * whose acquire orders it after the last one). */
static inline void rdmem_agent_count(atomic_uint_fast64_t *c, uint64_t n)
{
	rdmem_count_single(c, n);
}

void rdmem_agent_count_call(struct rdmem_agent_counters *c, uint8_t path);
void rdmem_agent_count_done(struct rdmem_agent_counters *c, uint8_t path, uint16_t status);
void rdmem_agent_counters_read(struct rdmem_agent_counters *c, struct rdmem_agent_snapshot *s);

/* Renders the snapshot; returns its length, or -E2BIG when cap is too small. */
int rdmem_agent_stats_format(const struct rdmem_agent_snapshot *s, int json, char *buf, size_t cap);

#endif
