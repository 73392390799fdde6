/* stats.c - the STATS report: every service counter as "name value" lines,
 * or as one JSON object with RDMEM_F_JSON. Names are stable: scripts and the
 * agent parse them. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "rdmem/util.h"
#include "server/service_impl.h"

static uint64_t ld(atomic_uint_fast64_t *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

struct snapshot {
	uint64_t keys, kv_bytes;
	struct rdmem_image_stats img;
	struct rdmem_hook_stats hook;
	int64_t sessions;
	uint64_t uptime_s;
	struct rdmem_dedup_stats dd;
	uint64_t dd_window, dd_untracked;
};

static void take_snapshot(struct rdmem_service *svc, struct snapshot *s)
{
	memset(s, 0, sizeof(*s));
	rdmem_kv_usage(svc->kv, &s->keys, &s->kv_bytes);
	if (svc->images)
		rdmem_image_stats(svc->images, &s->img);
	if (svc->hook)
		rdmem_hook_stats(svc->hook, &s->hook);
	s->sessions = atomic_load_explicit(&svc->sessions, memory_order_relaxed);
	s->uptime_s = (rdmem_now_ns() - svc->start_ns) / 1000000000ull;
	if (svc->dedup) {
		rdmem_dedup_get_stats(svc->dedup, &s->dd);
		s->dd_window = rdmem_dedup_get_config(svc->dedup)->window;
	}
	s->dd_untracked = ld(&svc->untracked);
}

/* Exactly-once: one line per counter, or one JSON object; names in dedup.h. */
static void format_dedup(const struct snapshot *s, int json, struct rdmem_text *o)
{
	const struct rdmem_dedup_stats *d = &s->dd;
	const char *fmt =
	    json ? ",\"dedup\":{\"window\":%" PRIu64 ",\"agents\":%" PRIu64 ",\"bytes\":%" PRIu64
		   ",\"binds\":%" PRIu64 ",\"bind_refused\":%" PRIu64 ",\"executed\":%" PRIu64
		   ",\"replayed\":%" PRIu64 ",\"waited\":%" PRIu64 ",\"stale\":%" PRIu64
		   ",\"expired\":%" PRIu64 ",\"untracked\":%" PRIu64 "}"
		 : "dedup.window %" PRIu64 "\ndedup.agents %" PRIu64 "\ndedup.bytes %" PRIu64
		   "\ndedup.binds %" PRIu64 "\ndedup.bind_refused %" PRIu64
		   "\ndedup.executed %" PRIu64 "\ndedup.replayed %" PRIu64 "\ndedup.waited %" PRIu64
		   "\ndedup.stale %" PRIu64 "\ndedup.expired %" PRIu64 "\ndedup.untracked %" PRIu64
		   "\n";

	rdmem_text_add(o, fmt, s->dd_window, d->agents, d->bytes, d->binds, d->bind_refused,
		       d->executed, d->replayed, d->waited, d->stale, d->expired, s->dd_untracked);
}

static void format_text(struct rdmem_service *svc, const struct snapshot *s, struct rdmem_text *o)
{
	unsigned i;

	rdmem_text_add(o, "uptime_s %" PRIu64 "\nsessions %" PRId64 "\n", s->uptime_s, s->sessions);
	rdmem_text_add(o, "kv_keys %" PRIu64 "\nkv_bytes %" PRIu64 "\n", s->keys, s->kv_bytes);
	rdmem_text_add(
	    o, "bad_input %" PRIu64 "\nbad_request %" PRIu64 "\nauth_failures %" PRIu64 "\n",
	    ld(&svc->bad_input), ld(&svc->bad_request), ld(&svc->auth_failures));
	rdmem_text_add(o, "bytes_in %" PRIu64 "\nbytes_out %" PRIu64 "\n", ld(&svc->bytes_in),
		       ld(&svc->bytes_out));
	for (i = 1; i < RDMEM_OP__COUNT; i++)
		rdmem_text_add(o, "op.%s.calls %" PRIu64 "\nop.%s.errors %" PRIu64 "\n",
			       rdmem_op_name(i), ld(&svc->ops[i].calls), rdmem_op_name(i),
			       ld(&svc->ops[i].errors));
	for (i = 0; i < RDMEM_PATH__COUNT; i++)
		rdmem_text_add(o, "path.%s.calls %" PRIu64 "\n", rdmem_path_name(i),
			       ld(&svc->paths[i]));
	rdmem_text_add(
	    o,
	    "uploads.active %" PRIu64 "\nuploads.committed %" PRIu64 "\nuploads.failed %" PRIu64
	    "\nuploads.timed_out %" PRIu64 "\nuploads.bytes %" PRIu64 "\n",
	    s->img.active, s->img.committed, s->img.failed, s->img.timed_out, s->img.bytes);
	rdmem_text_add(
	    o, "hooks.runs %" PRIu64 "\nhooks.failures %" PRIu64 "\nhooks.running %" PRIu64 "\n",
	    s->hook.runs, s->hook.failures, s->hook.running);
	rdmem_text_add(o, "reclaim.freed %" PRIu64 "\nreclaim.refused %" PRIu64 "\n",
		       ld(&svc->reclaim_freed), ld(&svc->reclaim_refused));
}

static void format_json(struct rdmem_service *svc, const struct snapshot *s, struct rdmem_text *o)
{
	unsigned i;

	rdmem_text_add(o, "{\"uptime_s\":%" PRIu64 ",\"sessions\":%" PRId64, s->uptime_s,
		       s->sessions);
	rdmem_text_add(o, ",\"kv\":{\"keys\":%" PRIu64 ",\"bytes\":%" PRIu64 "}", s->keys,
		       s->kv_bytes);
	rdmem_text_add(
	    o, ",\"bad_input\":%" PRIu64 ",\"bad_request\":%" PRIu64 ",\"auth_failures\":%" PRIu64,
	    ld(&svc->bad_input), ld(&svc->bad_request), ld(&svc->auth_failures));
	rdmem_text_add(o, ",\"bytes_in\":%" PRIu64 ",\"bytes_out\":%" PRIu64, ld(&svc->bytes_in),
		       ld(&svc->bytes_out));
	rdmem_text_add(o, ",\"ops\":{");
	for (i = 1; i < RDMEM_OP__COUNT; i++)
		rdmem_text_add(o, "%s\"%s\":{\"calls\":%" PRIu64 ",\"errors\":%" PRIu64 "}",
			       i > 1 ? "," : "", rdmem_op_name(i), ld(&svc->ops[i].calls),
			       ld(&svc->ops[i].errors));
	rdmem_text_add(o, "},\"paths\":{");
	for (i = 0; i < RDMEM_PATH__COUNT; i++)
		rdmem_text_add(o, "%s\"%s\":%" PRIu64, i ? "," : "", rdmem_path_name(i),
			       ld(&svc->paths[i]));
	rdmem_text_add(o,
		       "},\"uploads\":{\"active\":%" PRIu64 ",\"committed\":%" PRIu64
		       ",\"failed\":%" PRIu64 ",\"timed_out\":%" PRIu64 ",\"bytes\":%" PRIu64 "}",
		       s->img.active, s->img.committed, s->img.failed, s->img.timed_out,
		       s->img.bytes);
	rdmem_text_add(
	    o, ",\"hooks\":{\"runs\":%" PRIu64 ",\"failures\":%" PRIu64 ",\"running\":%" PRIu64 "}",
	    s->hook.runs, s->hook.failures, s->hook.running);
	rdmem_text_add(o, ",\"reclaim\":{\"freed\":%" PRIu64 ",\"refused\":%" PRIu64 "}",
		       ld(&svc->reclaim_freed), ld(&svc->reclaim_refused));
}

/* The RDMA side's own report (sessions, leases, groups), when it has one. */
static void format_hook(struct rdmem_service *svc, int json, struct rdmem_text *o)
{
	int n;

	pthread_mutex_lock(&svc->stats_lock);
	if (!svc->stats_hook || o->overflow) {
		pthread_mutex_unlock(&svc->stats_lock);
		return;
	}
	rdmem_text_add(o, json ? ",\"rdma\":" : "rdma:\n");
	n = o->overflow ? -1
			: svc->stats_hook(svc->stats_ctx, json, o->buf + o->len, o->cap - o->len);
	pthread_mutex_unlock(&svc->stats_lock);
	if (n < 0)
		o->overflow = 1;
	else
		o->len += (size_t)n;
}

size_t rdmem_stats_format(struct rdmem_service *svc, int json, char *buf, size_t cap)
{
	struct rdmem_text o = { buf, cap, 0, 0 };
	struct snapshot s;

	take_snapshot(svc, &s);
	if (json)
		format_json(svc, &s, &o);
	else
		format_text(svc, &s, &o);
	format_dedup(&s, json, &o);
	format_hook(svc, json, &o);
	if (json)
		rdmem_text_add(&o, "}\n");
	return o.overflow ? 0 : o.len;
}
