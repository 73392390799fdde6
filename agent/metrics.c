/* metrics.c - rdmem-agent's Prometheus page (see metrics.h). */
#include "agent/metrics.h"

#include <stdio.h>

#include "agent/frontdoor.h"
#include "agent/session.h"
#include "agent/stats.h"
#include "agent/tcp_actor.h"
#include "rdmem/fabric.h"

#define LD(x)	 atomic_load_explicit(&(x), memory_order_relaxed)
#define ST(x, v) atomic_store_explicit(&(x), (v), memory_order_relaxed)

void rdmem_agent_gauges_publish(struct rdmem_agent_gauges *g, const struct rdmem_rdma_stats *rdma,
				const struct rdmem_ctrl *ctrl, uint32_t rdma_error_window)
{
	const struct rdmem_rdma_stats none = { 0 };

	ST(g->have_link, rdma != NULL);
	ST(g->rdma_error_window, rdma_error_window);
	if (!rdma)
		rdma = &none;
	ST(g->slots_used, rdma->inflight);
	ST(g->slots, rdma->slots);
	ST(g->posted, rdma->posted);
	ST(g->lazy_reads, rdma->lazy_reads);
	ST(g->lazy_bytes, rdma->lazy_bytes);
	ST(g->bulk_sges, rdma->bulk_sges);
	ST(g->bulk_bytes, rdma->bulk_bytes);
	ST(g->reclaimed, rdma->reclaimed);
	ST(g->reclaim_refused, rdma->reclaim_refused);
	ST(g->late_replies, rdma->late_replies);
	ST(g->bad_replies, rdma->bad_replies);
	ST(g->have_ctrl, ctrl != NULL);
	if (!ctrl)
		return;
	ST(g->srv_ring_backlog, ctrl->ring_backlog);
	ST(g->srv_ring_slots, ctrl->ring_slots);
	ST(g->srv_pool_used, ctrl->objpool_used);
	ST(g->srv_pool_bytes, ctrl->objpool_bytes);
	ST(g->srv_objects_live, ctrl->objects_live);
}

/* Label text for path p: the agent answers AUTO-path calls itself. */
static const char *path_label(unsigned p)
{
	return p == RDMEM_PATH_AUTO ? "local" : rdmem_path_name(p);
}

static void render_calls(struct rdmem_prom *o, struct rdmem_call_metrics *const *cms, unsigned n)
{
	struct rdmem_hist_snap lat[RDMEM_PATH__COUNT] = { 0 };
	char labels[96];
	unsigned op, p, i, r;

	rdmem_prom_family(o, "rdmem_agent_calls_total", "counter",
			  "Calls finished, by op, the path that carried them and result.");
	for (op = 0; op < RDMEM_OP__COUNT; op++)
		for (p = 0; p < RDMEM_PATH__COUNT; p++)
			for (r = 0; r < 2; r++) {
				uint64_t v = 0;

				for (i = 0; i < n; i++)
					v += r ? LD(cms[i]->failed[op][p]) : LD(cms[i]->ok[op][p]);
				if (!v)
					continue; /* a series appears with its first call */
				snprintf(labels, sizeof(labels),
					 "op=\"%s\",path=\"%s\",result=\"%s\"",
					 op ? rdmem_op_name(op) : "agent_local", path_label(p),
					 r ? "error" : "ok");
				rdmem_prom_sample(o, "rdmem_agent_calls_total", labels, v);
			}
	for (i = 0; i < n; i++)
		for (p = 0; p < RDMEM_PATH__COUNT; p++)
			rdmem_hist_read(&cms[i]->lat[p], &lat[p]);
	rdmem_prom_family(o, "rdmem_agent_call_latency_seconds", "histogram",
			  "Front-door take to completion, by the path that carried the call.");
	for (p = 0; p < RDMEM_PATH__COUNT; p++) {
		snprintf(labels, sizeof(labels), "path=\"%s\"", path_label(p));
		rdmem_prom_hist(o, "rdmem_agent_call_latency_seconds", labels, &lat[p]);
	}
}

/* One family with one sample and no labels. */
static void one(struct rdmem_prom *o, const char *name, const char *type, const char *help,
		uint64_t v)
{
	rdmem_prom_family(o, name, type, help);
	rdmem_prom_sample(o, name, "", v);
}

static void render_paths(struct rdmem_prom *o, struct rdmem_agent_counters *c,
			 const struct rdmem_tcp_actor_stats *t)
{
	char labels[32];
	unsigned p;

	rdmem_prom_family(o, "rdmem_agent_path_selected_total", "counter",
			  "Calls the path selector sent each way (TCP includes fallbacks).");
	for (p = RDMEM_PATH_EAGER; p < RDMEM_PATH__COUNT; p++) {
		snprintf(labels, sizeof(labels), "path=\"%s\"", rdmem_path_name(p));
		rdmem_prom_sample(o, "rdmem_agent_path_selected_total", labels,
				  p == RDMEM_PATH_TCP ? t->calls : LD(c->calls[p]));
	}
	rdmem_prom_family(o, "rdmem_agent_path_errors_total", "counter",
			  "Calls that finished with an error status, by path.");
	for (p = RDMEM_PATH_EAGER; p < RDMEM_PATH__COUNT; p++) {
		snprintf(labels, sizeof(labels), "path=\"%s\"", rdmem_path_name(p));
		rdmem_prom_sample(o, "rdmem_agent_path_errors_total", labels,
				  p == RDMEM_PATH_TCP ? t->failed : LD(c->failed[p]));
	}
	one(o, "rdmem_agent_fallbacks_total", "counter", "RDMA calls retried on TCP.",
	    LD(c->fallbacks));
	one(o, "rdmem_agent_rdma_errors_total", "counter", "RDMA operations that failed.",
	    LD(c->rdma_errors));
	one(o, "rdmem_agent_rdma_link_up", "gauge", "1 while the RDMA session is up.",
	    LD(c->link_up));
	one(o, "rdmem_agent_rdma_link_opens_total", "counter", "RDMA sessions opened.",
	    LD(c->link_opens));
	one(o, "rdmem_agent_rdma_link_losses_total", "counter", "RDMA sessions lost.",
	    LD(c->link_losses));
	one(o, "rdmem_agent_rdma_link_stalls_total", "counter",
	    "RDMA sessions dropped by the liveness check (--rdma-stall-ms).", LD(c->link_stalls));
}

static void render_rdma(struct rdmem_prom *o, struct rdmem_agent_gauges *g)
{
	one(o, "rdmem_agent_rdma_error_window", "gauge",
	    "RDMA errors the path selector compares with --error-threshold.",
	    LD(g->rdma_error_window));
	one(o, "rdmem_agent_rdma_slots_in_use", "gauge", "Server request-ring slots held by calls.",
	    LD(g->slots_used));
	one(o, "rdmem_agent_rdma_slots", "gauge", "Server request-ring slots of the session.",
	    LD(g->slots));
	one(o, "rdmem_agent_rdma_posted_total", "counter", "RDMA calls posted on the current link.",
	    LD(g->posted));
	one(o, "rdmem_agent_lazy_reads_total", "counter",
	    "LAZY replies RDMA-read on the current link.", LD(g->lazy_reads));
	one(o, "rdmem_agent_lazy_read_bytes_total", "counter",
	    "Bytes RDMA-read for LAZY replies on the current link.", LD(g->lazy_bytes));
	one(o, "rdmem_agent_bulk_sges_total", "counter",
	    "Scatter-gather entries of BULK writes on the current link.", LD(g->bulk_sges));
	one(o, "rdmem_agent_bulk_bytes_total", "counter",
	    "Bytes written by BULK requests on the current link.", LD(g->bulk_bytes));
	one(o, "rdmem_agent_objects_reclaimed_total", "counter",
	    "Server objects released by RECLAIM on the current link.", LD(g->reclaimed));
	one(o, "rdmem_agent_reclaim_refused_total", "counter",
	    "RECLAIM entries the server refused (stale) on the current link.",
	    LD(g->reclaim_refused));
	one(o, "rdmem_agent_late_replies_total", "counter",
	    "Replies that arrived after their call timed out.", LD(g->late_replies));
	one(o, "rdmem_agent_bad_replies_total", "counter",
	    "Replies refused by the slot, sequence or bounds checks.", LD(g->bad_replies));
	if (!LD(g->have_ctrl))
		return;
	one(o, "rdmem_agent_server_ring_backlog", "gauge",
	    "Server control page: READY request slots not yet taken.", LD(g->srv_ring_backlog));
	one(o, "rdmem_agent_server_ring_slots", "gauge", "Server control page: ring slots.",
	    LD(g->srv_ring_slots));
	one(o, "rdmem_agent_server_objpool_used_bytes", "gauge",
	    "Server control page: object-pool bytes held by live objects.", LD(g->srv_pool_used));
	one(o, "rdmem_agent_server_objpool_bytes", "gauge",
	    "Server control page: object-pool size.", LD(g->srv_pool_bytes));
	one(o, "rdmem_agent_server_objects_live", "gauge",
	    "Server control page: objects not reclaimed yet.", LD(g->srv_objects_live));
}

static void render_tcp(struct rdmem_prom *o, const struct rdmem_tcp_actor_stats *t)
{
	one(o, "rdmem_agent_tcp_connected", "gauge", "1 while the TCP fallback connection is up.",
	    t->connected);
	one(o, "rdmem_agent_tcp_connects_total", "counter", "TCP connections made.", t->connects);
	one(o, "rdmem_agent_tcp_disconnects_total", "counter", "TCP connections lost.",
	    t->disconnects);
	one(o, "rdmem_agent_tcp_retried_total", "counter",
	    "TCP calls sent again after a lost connection.", t->retried);
	one(o, "rdmem_agent_tcp_unreachable_total", "counter",
	    "TCP calls failed with no server to send them to.", t->unreachable);
	one(o, "rdmem_agent_tcp_timeouts_total", "counter", "TCP calls past their deadline.",
	    t->timeouts);
	one(o, "rdmem_agent_tcp_inflight", "gauge", "TCP calls on the wire.", t->inflight);
	one(o, "rdmem_agent_tcp_waiting", "gauge", "TCP calls waiting for a connection or window.",
	    t->waiting);
	one(o, "rdmem_agent_tcp_bytes_out_total", "counter", "Request payload bytes sent on TCP.",
	    t->bytes_out);
	one(o, "rdmem_agent_tcp_bytes_in_total", "counter", "Reply payload bytes received on TCP.",
	    t->bytes_in);
}

static void render_frontdoor(struct rdmem_prom *o, const struct rdmem_frontdoor_stats *f)
{
	one(o, "rdmem_agent_clients", "gauge", "Local processes attached to the front door.",
	    f->attached);
	one(o, "rdmem_agent_frontdoor_inflight", "gauge", "Front-door calls not completed yet.",
	    f->inflight);
	one(o, "rdmem_agent_frontdoor_calls_total", "counter", "Calls taken from the SHM ring.",
	    f->calls);
	one(o, "rdmem_agent_frontdoor_local_pings_total", "counter",
	    "Local pings answered by the front door.", f->local_pings);
	one(o, "rdmem_agent_frontdoor_bad_entries_total", "counter",
	    "Ring entries refused by validation.", f->bad_entries);
	one(o, "rdmem_agent_frontdoor_skipped_total", "counter",
	    "Ring positions skipped after a dead or stalled producer.", f->skipped);
	one(o, "rdmem_agent_frontdoor_dead_clients_total", "counter",
	    "Client entries reclaimed from dead processes.", f->dead_clients);
	one(o, "rdmem_agent_frontdoor_dropped_total", "counter",
	    "Completions for clients that died or gave up.", f->dropped);
	one(o, "rdmem_agent_frontdoor_expired_total", "counter",
	    "Calls whose deadline passed before the agent took them.", f->expired);
}

int rdmem_agent_metrics_render(void *ctx, char *buf, size_t cap)
{
	struct rdmem_agent_metrics_src *src = ctx;
	struct rdmem_agent_counters *cnt;
	struct rdmem_call_metrics *cms[2];
	struct rdmem_agent_gauges *g;
	struct rdmem_tcp_actor_stats t;
	struct rdmem_frontdoor_stats f;
	struct rdmem_prom o;
	char labels[64];

	rdmem_prom_init(&o, buf, cap);
	rdmem_agent_session_metrics(src->session, &cnt, &cms[0], &g);
	cms[1] = rdmem_tcp_actor_call_metrics(src->tcp);
	rdmem_tcp_actor_get_stats(src->tcp, &t);
	rdmem_frontdoor_get_stats(src->fd, &f);
	rdmem_prom_family(&o, "rdmem_agent_info", "gauge", "The agent's fabric (1 per agent).");
	snprintf(labels, sizeof(labels), "fabric=\"%s\"",
		 src->fabric ? rdmem_fab_kind_name(src->fabric) : "tcp");
	rdmem_prom_sample(&o, "rdmem_agent_info", labels, 1);
	render_calls(&o, cms, 2);
	render_paths(&o, cnt, &t);
	render_rdma(&o, g);
	render_tcp(&o, &t);
	render_frontdoor(&o, &f);
	return rdmem_prom_finish(&o);
}
