/* metrics.c - rdmem-server's Prometheus page: the service's counters (the
 * same ones STATS reports), calls by op and path, the sessions' object
 * pools, and dispatch time per path. Runs on the metrics thread and reads
 * only relaxed atomics and the stores' own locked getters. */
#include <stdio.h>
#include <string.h>

#include "rdmem/util.h"
#include "server/service_impl.h"

#define LD(x) atomic_load_explicit(&(x), memory_order_relaxed)

static void one(struct rdmem_prom *o, const char *name, const char *type, const char *help,
		uint64_t v)
{
	rdmem_prom_family(o, name, type, help);
	rdmem_prom_sample(o, name, "", v);
}

/* Exactly-once calls (server/dedup.h); nothing with --no-dedup. */
static void render_dedup(struct rdmem_prom *o, struct rdmem_service *svc)
{
	struct rdmem_dedup_stats d;

	if (!svc->dedup)
		return;
	rdmem_dedup_get_stats(svc->dedup, &d);
	one(o, "rdmem_server_dedup_agents", "gauge", "Agents whose dedup window is kept.",
	    d.agents);
	one(o, "rdmem_server_dedup_bytes", "gauge", "Memory of the dedup windows.", d.bytes);
	one(o, "rdmem_server_dedup_replayed_total", "counter",
	    "Retries answered from the dedup window instead of running again.", d.replayed);
	one(o, "rdmem_server_dedup_stale_total", "counter",
	    "Retries older than the dedup window: answered STALE, not run.", d.stale);
	one(o, "rdmem_server_dedup_bind_refused_total", "counter",
	    "Agents not tracked: --dedup-agents windows all had live connections.", d.bind_refused);
	one(o, "rdmem_server_dedup_untracked_total", "counter",
	    "Calls with a call id on a connection with no dedup window.", LD(svc->untracked));
}

static void render_calls(struct rdmem_prom *o, struct rdmem_service *svc)
{
	char labels[64];
	unsigned op, p;

	rdmem_prom_family(o, "rdmem_server_calls_total", "counter",
			  "Calls dispatched, by op and the path they came on.");
	for (op = 1; op < RDMEM_OP__COUNT; op++)
		for (p = 0; p < RDMEM_PATH__COUNT; p++) {
			uint64_t v = LD(svc->op_path[op][p]);

			if (!v)
				continue; /* a series appears with its first call */
			snprintf(labels, sizeof(labels), "op=\"%s\",path=\"%s\"", rdmem_op_name(op),
				 rdmem_path_name(p));
			rdmem_prom_sample(o, "rdmem_server_calls_total", labels, v);
		}
	rdmem_prom_family(o, "rdmem_server_errors_total", "counter",
			  "Replies with a status other than OK, by op.");
	for (op = 1; op < RDMEM_OP__COUNT; op++) {
		snprintf(labels, sizeof(labels), "op=\"%s\"", rdmem_op_name(op));
		rdmem_prom_sample(o, "rdmem_server_errors_total", labels, LD(svc->ops[op].errors));
	}
	rdmem_prom_family(o, "rdmem_server_dispatch_latency_seconds", "histogram",
			  "Time in the dispatch (the op itself), by the path the call came on.");
	for (p = 1; p < RDMEM_PATH__COUNT; p++) {
		struct rdmem_hist_snap s;

		memset(&s, 0, sizeof(s));
		rdmem_hist_read(&svc->lat[p], &s);
		snprintf(labels, sizeof(labels), "path=\"%s\"", rdmem_path_name(p));
		rdmem_prom_hist(o, "rdmem_server_dispatch_latency_seconds", labels, &s);
	}
}

int rdmem_service_render_metrics(void *ctx, char *buf, size_t cap)
{
	struct rdmem_service *svc = ctx;
	struct rdmem_image_stats img = { 0 };
	struct rdmem_hook_stats hook = { 0 };
	uint64_t keys = 0, kv_bytes = 0;
	int64_t sessions = LD(svc->sessions);
	struct rdmem_prom o;

	rdmem_kv_usage(svc->kv, &keys, &kv_bytes);
	if (svc->images)
		rdmem_image_stats(svc->images, &img);
	if (svc->hook)
		rdmem_hook_stats(svc->hook, &hook);
	rdmem_prom_init(&o, buf, cap);
	one(&o, "rdmem_server_uptime_seconds", "gauge", "Seconds since the service started.",
	    (rdmem_now_ns() - svc->start_ns) / 1000000000ull);
	one(&o, "rdmem_server_sessions", "gauge", "Agent RDMA sessions open.",
	    sessions > 0 ? (uint64_t)sessions : 0);
	render_calls(&o, svc);
	one(&o, "rdmem_server_bad_input_total", "counter",
	    "Frames or descriptors refused before dispatch.", LD(svc->bad_input));
	one(&o, "rdmem_server_bad_request_total", "counter", "Calls answered BAD_REQUEST.",
	    LD(svc->bad_request));
	one(&o, "rdmem_server_bytes_in_total", "counter", "Request key and value bytes.",
	    LD(svc->bytes_in));
	one(&o, "rdmem_server_bytes_out_total", "counter", "Reply value bytes.",
	    LD(svc->bytes_out));
	one(&o, "rdmem_server_kv_keys", "gauge", "Keys stored.", keys);
	one(&o, "rdmem_server_kv_bytes", "gauge", "Key and value bytes stored.", kv_bytes);
	one(&o, "rdmem_server_objpool_used_bytes", "gauge",
	    "Object-pool bytes held by LAZY replies not reclaimed yet, all sessions.",
	    (uint64_t)RDMEM_MAX(LD(svc->pool_used), 0));
	one(&o, "rdmem_server_objpool_bytes", "gauge", "Object-pool size, all sessions.",
	    (uint64_t)RDMEM_MAX(LD(svc->pool_bytes), 0));
	one(&o, "rdmem_server_objects_live", "gauge", "Objects not reclaimed yet, all sessions.",
	    (uint64_t)RDMEM_MAX(LD(svc->pool_live), 0));
	one(&o, "rdmem_server_reclaim_freed_total", "counter", "Objects freed by RECLAIM.",
	    LD(svc->reclaim_freed));
	one(&o, "rdmem_server_reclaim_refused_total", "counter",
	    "RECLAIM entries refused (stale generation, or on TCP).", LD(svc->reclaim_refused));
	one(&o, "rdmem_server_uploads_active", "gauge", "Image uploads in progress.", img.active);
	one(&o, "rdmem_server_uploads_committed_total", "counter", "Images committed.",
	    img.committed);
	one(&o, "rdmem_server_uploads_failed_total", "counter", "Image uploads that failed.",
	    img.failed);
	one(&o, "rdmem_server_uploads_timed_out_total", "counter", "Image uploads abandoned.",
	    img.timed_out);
	one(&o, "rdmem_server_upload_bytes_total", "counter", "Image bytes received.", img.bytes);
	one(&o, "rdmem_server_hook_runs_total", "counter", "Post-commit hooks started.", hook.runs);
	one(&o, "rdmem_server_hook_failures_total", "counter",
	    "Hooks that could not start or exited non-zero.", hook.failures);
	one(&o, "rdmem_server_hooks_running", "gauge", "Hooks running now.", hook.running);
	render_dedup(&o, svc);
	return rdmem_prom_finish(&o);
}
