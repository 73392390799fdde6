/* metrics.c - rdmem-server's Prometheus page: the counter table (the same
 * names and values STATS reports, server/stats.c), then what only this page
 * shows: calls by op and path, and dispatch time per path. Runs on the metrics thread and reads
 * only relaxed atomics and the stores' own locked getters. */
#include <stdio.h>
#include <string.h>

#include "rdmem/util.h"
#include "server/service_impl.h"

static void render_calls(struct rdmem_prom *o, struct rdmem_service *svc)
{
	struct rdmem_tally_sum sum;
	char labels[64];
	unsigned op, p;

	rdmem_tallies_sum(&svc->tally, &sum);
	rdmem_prom_family(o, "rdmem_server_calls_total", "counter",
			  "Calls dispatched, by op and the path they came on.");
	for (op = 1; op < RDMEM_OP__COUNT; op++)
		for (p = 0; p < RDMEM_PATH__COUNT; p++) {
			uint64_t v = sum.op_path[op][p];

			if (!v)
				continue; /* a series appears with its first call */
			snprintf(labels, sizeof(labels), "op=\"%s\",path=\"%s\"", rdmem_op_name(op),
				 rdmem_path_name(p));
			rdmem_prom_sample(o, "rdmem_server_calls_total", labels, v);
		}
	rdmem_prom_family(o, "rdmem_server_dispatch_latency_seconds", "histogram",
			  "Time in the dispatch (the op itself), by the path the call came on.");
	for (p = 1; p < RDMEM_PATH__COUNT; p++) {
		snprintf(labels, sizeof(labels), "path=\"%s\"", rdmem_path_name(p));
		rdmem_prom_hist(o, "rdmem_server_dispatch_latency_seconds", labels, &sum.lat[p]);
	}
}

int rdmem_service_render_metrics(void *ctx, char *buf, size_t cap)
{
	struct rdmem_service *svc = ctx;
	struct rdmem_server_snapshot s;
	struct rdmem_prom o;

	rdmem_server_snapshot_take(svc, &s);
	rdmem_prom_init(&o, buf, cap);
	rdmem_ctr_prom(&rdmem_server_ctr_table, &s, 0, &o);
	render_calls(&o, svc);
	return rdmem_prom_finish(&o);
}
