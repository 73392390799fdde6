/* metrics.c - rdmem-agent's Prometheus page (see metrics.h). */
#include "agent/metrics.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/frontdoor.h"
#include "agent/session.h"
#include "agent/stats.h"
#include "agent/tcp_actor.h"
#include "rdmem/fabric.h"

#define LD(x)	 atomic_load_explicit(&(x), memory_order_relaxed)
#define ST(x, v) atomic_store_explicit(&(x), (v), memory_order_relaxed)

void rdmem_agent_gauges_publish(struct rdmem_agent_gauges *g, const struct rdmem_rdma_stats *rdma,
				const struct rdmem_ctrl *ctrl, uint32_t rdma_error_window,
				const struct rdmem_simulate *sim, uint8_t force)
{
	uint64_t w[RDMEM_ARRAY_SIZE(g->w)] = { 0 };
	struct rdmem_agent_pub p;
	size_t i;

	memset(&p, 0, sizeof(p));
	if (rdma)
		p.rdma = *rdma;
	if (ctrl)
		p.ctrl = *ctrl;
	p.have_ctrl = ctrl != NULL;
	p.sim = *sim;
	p.rdma_errors = rdma_error_window;
	p.force = force;
	memcpy(w, &p, sizeof(p));
	for (i = 0; i < RDMEM_ARRAY_SIZE(w); i++)
		ST(g->w[i], w[i]); /* pairs with the load in rdmem_agent_gauges_read() */
}

void rdmem_agent_gauges_read(struct rdmem_agent_gauges *g, struct rdmem_agent_pub *out)
{
	uint64_t w[RDMEM_ARRAY_SIZE(g->w)];
	size_t i;

	for (i = 0; i < RDMEM_ARRAY_SIZE(w); i++)
		w[i] = LD(g->w[i]);
	memcpy(out, w, sizeof(*out));
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

/* The same snapshot AGENT_STATS renders, from what other threads publish. */
static void rdmem_agent_metrics_snapshot(struct rdmem_agent_metrics_src *src,
					 struct rdmem_agent_counters *cnt,
					 struct rdmem_agent_gauges *g,
					 struct rdmem_agent_snapshot *s)
{
	struct rdmem_agent_pub p;

	memset(s, 0, sizeof(*s));
	rdmem_frontdoor_get_stats(src->fd, &s->fd);
	rdmem_tcp_actor_get_stats(src->tcp, &s->tcp);
	rdmem_agent_counters_read(cnt, s);
	rdmem_agent_gauges_read(g, &p);
	s->rdma = p.rdma;
	s->ctrl = p.ctrl;
	s->have_ctrl = (int)p.have_ctrl;
	s->sim = p.sim;
	s->rdma_errors = p.rdma_errors;
	s->force = (uint8_t)p.force;
	s->fabric = src->fabric;
	rdmem_agent_snapshot_names(s);
}

int rdmem_agent_metrics_render(void *ctx, char *buf, size_t cap)
{
	struct rdmem_agent_metrics_src *src = ctx;

	return rdmem_agent_metrics_render_many(&src, NULL, 1, buf, cap);
}

/* Every server's counters under one family each, labelled by server when
 * names is given; the per-op call counts and latencies summed over all. */
int rdmem_agent_metrics_render_many(struct rdmem_agent_metrics_src *const *srcs,
				    const char *const *names, unsigned n, char *buf, size_t cap)
{
	struct rdmem_call_metrics *cms[2 * RDMEM_AGENT_METRICS_MAX];
	const char *labels[RDMEM_AGENT_METRICS_MAX];
	const void *snaps[RDMEM_AGENT_METRICS_MAX];
	unsigned masks[RDMEM_AGENT_METRICS_MAX], i;
	char(*lab)[320] = NULL;
	struct rdmem_agent_snapshot *s = NULL;
	struct rdmem_prom o;

	if (!n || n > RDMEM_AGENT_METRICS_MAX || !(s = calloc(n, sizeof(*s))) ||
	    (names && !(lab = calloc(n, sizeof(*lab))))) {
		free(s);
		return -ENOMEM;
	}
	rdmem_prom_init(&o, buf, cap);
	for (i = 0; i < n; i++) {
		struct rdmem_agent_counters *cnt;
		struct rdmem_agent_gauges *g;

		rdmem_agent_session_metrics(srcs[i]->session, &cnt, &cms[2 * i], &g);
		cms[2 * i + 1] = rdmem_tcp_actor_call_metrics(srcs[i]->tcp);
		rdmem_agent_metrics_snapshot(srcs[i], cnt, g, &s[i]);
		snaps[i] = &s[i];
		masks[i] = rdmem_agent_snapshot_mask(&s[i]);
		if (names) {
			snprintf(lab[i], sizeof(lab[i]), "server=\"%s\"", names[i]);
			labels[i] = lab[i];
		}
	}
	rdmem_ctr_prom_many(&rdmem_agent_ctr_table, snaps, masks, names ? labels : NULL, n, &o);
	render_calls(&o, cms, 2 * n);
	free(s);
	free(lab);
	return rdmem_prom_finish(&o);
}
