/* metrics.h - what rdmem-agent's /metrics page shows beyond agent/stats.h:
 * per-op outcomes and per-path latency of finished calls (recorded by the
 * actor that completes them: the holder of the session's token for RDMA
 * and agent-local calls, the session actor or the front door taking calls
 * inline, agent/session.c; the TCP actor for TCP), and gauges the session
 * publishes because its RDMA state is its own. Everything is a relaxed
 * atomic with one writer at a time (the token orders them), so the metrics
 * thread reads without locks or queues.
 */
#ifndef RDMEM_AGENT_METRICS_H
#define RDMEM_AGENT_METRICS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/call.h"
#include "agent/rdma.h"
#include "agent/session.h"
#include "common/metrics.h"
#include "rdmem/layout.h"
#include "rdmem/util.h"

struct rdmem_call_metrics {
	/* [op][path]; op 0 holds the agent-local ops (stats, ctl) */
	atomic_uint_fast64_t ok[RDMEM_OP__COUNT][RDMEM_PATH__COUNT];
	atomic_uint_fast64_t failed[RDMEM_OP__COUNT][RDMEM_PATH__COUNT];
	struct rdmem_hist lat[RDMEM_PATH__COUNT]; /* front-door take to completion */
};

static inline void rdmem_metrics_bump(atomic_uint_fast64_t *c)
{
	rdmem_count_single(c, 1); /* the struct's one writer */
}

/* Records one finished call; called by the struct's one writer thread only. */
static inline void rdmem_call_metrics_done(struct rdmem_call_metrics *m,
					   const struct rdmem_agent_call *call, uint8_t path,
					   uint16_t status)
{
	unsigned op = call->req.op < RDMEM_OP__COUNT ? call->req.op : 0;

	path %= RDMEM_PATH__COUNT;
	rdmem_metrics_bump(status == RDMEM_S_OK ? &m->ok[op][path] : &m->failed[op][path]);
	if (call->start_ns)
		rdmem_hist_add_single(&m->lat[path], rdmem_now_ns() - call->start_ns);
}

/* What the session actor owns and the metrics thread shows: RDMA link
 * stats, the server's control page, fault-injection state. */
struct rdmem_agent_pub {
	struct rdmem_rdma_stats rdma; /* zero without a link */
	struct rdmem_ctrl ctrl;	      /* valid when have_ctrl */
	struct rdmem_simulate sim;
	uint32_t rdma_errors; /* the selector's window (--error-threshold) */
	uint32_t have_ctrl;
	uint32_t force;
};

/* rdmem_agent_pub copied as 64-bit relaxed atomic words: no field straddles
 * a word (each is naturally aligned), so a field is never torn; fields may
 * be from different rounds, as with separate counters. */
struct rdmem_agent_gauges {
	atomic_uint_fast64_t w[(sizeof(struct rdmem_agent_pub) + 7) / 8];
};

/* The session token's holder only. rdma and ctrl may be NULL (no link, no page read yet). */
void rdmem_agent_gauges_publish(struct rdmem_agent_gauges *g, const struct rdmem_rdma_stats *rdma,
				const struct rdmem_ctrl *ctrl, uint32_t rdma_error_window,
				const struct rdmem_simulate *sim, uint8_t force);
/* Any thread: the last published state. */
void rdmem_agent_gauges_read(struct rdmem_agent_gauges *g, struct rdmem_agent_pub *out);

struct rdmem_frontdoor;
struct rdmem_tcp_actor;
struct rdmem_agent_session;

/* What the page is rendered from; the render callback's ctx. */
struct rdmem_agent_metrics_src {
	struct rdmem_frontdoor *fd;
	struct rdmem_tcp_actor *tcp;
	struct rdmem_agent_session *session;
	int fabric; /* RDMEM_FAB_*, 0 for TCP only */
};

/* An rdmem_metrics_render_fn (common/metrics_http.h). */
int rdmem_agent_metrics_render(void *ctx, char *buf, size_t cap);
/* Several servers' sources on one page; names label each server's samples
 * (server="host:port"), NULL for one server (no label, as above). */
#define RDMEM_AGENT_METRICS_MAX 64
int rdmem_agent_metrics_render_many(struct rdmem_agent_metrics_src *const *srcs,
				    const char *const *names, unsigned n, char *buf, size_t cap);

#endif
