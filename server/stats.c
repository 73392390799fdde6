/* stats.c - the server's counter table and the STATS report: every counter
 * as "name value" lines, or one JSON object with RDMEM_F_JSON; /metrics
 * (server/metrics.c) renders the same table. Names are stable: scripts and
 * tests read them. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "rdmem/util.h"
#include "server/service_impl.h"

static uint64_t ld(atomic_uint_fast64_t *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

static uint64_t ld_pos(atomic_int_fast64_t *c)
{
	int64_t v = atomic_load_explicit(c, memory_order_relaxed);

	return v > 0 ? (uint64_t)v : 0;
}

void rdmem_server_snapshot_take(struct rdmem_service *svc, struct rdmem_server_snapshot *s)
{
	struct rdmem_tally_sum sum;
	unsigned i;

	memset(s, 0, sizeof(*s));
	rdmem_tallies_sum(&svc->tally, &sum);
	s->uptime_s = (rdmem_now_ns() - svc->start_ns) / 1000000000ull;
	s->sessions = ld_pos(&svc->sessions);
	s->rdma_qps = ld_pos(&svc->rdma.qps);
	s->rdma_cqs = ld_pos(&svc->rdma.cqs);
	s->rdma_mrs = ld_pos(&svc->rdma.mrs);
	s->rdma_registered_bytes = ld_pos(&svc->rdma.registered_bytes);
	s->rdma_recv_wqes = ld_pos(&svc->rdma.recv_wqes);
	rdmem_kv_usage(svc->kv, &s->kv_keys, &s->kv_bytes);
	rdmem_kv_limit_usage(svc->kv, &s->kv_max_bytes, &s->kv_charged, &s->kv_refused);
	s->bad_input = ld(&svc->bad_input);
	s->bad_request = sum.bad_request;
	s->auth_failures = ld(&svc->auth_failures);
	s->mac_failures = ld(&svc->mac_failures);
	s->bytes_in = sum.bytes_in;
	for (i = 0; i < RDMEM_NET__COUNT; i++)
		s->net[i] = ld(&svc->net[i]);
	s->bytes_out = sum.bytes_out;
	for (i = 1; i < RDMEM_OP__COUNT; i++) {
		s->op_calls[i] = sum.calls[i];
		s->op_errors[i] = sum.errors[i];
	}
	for (i = 0; i < RDMEM_PATH__COUNT; i++)
		s->path_calls[i] = sum.paths[i];
	s->pool_used = ld_pos(&svc->pool_used);
	s->pool_bytes = ld_pos(&svc->pool_bytes);
	s->pool_live = ld_pos(&svc->pool_live);
	s->reclaim_freed = ld(&svc->reclaim_freed);
	s->reclaim_refused = ld(&svc->reclaim_refused);
	if (svc->images)
		rdmem_image_stats(svc->images, &s->img);
	if (svc->hook)
		rdmem_hook_stats(svc->hook, &s->hook);
	if (svc->dedup) {
		rdmem_dedup_get_stats(svc->dedup, &s->dd);
		s->dd_window = rdmem_dedup_get_config(svc->dedup)->window;
	}
	s->dd_untracked = ld(&svc->untracked);
	s->tcp_out_held = ld(&svc->tcp_out_held);
	s->tcp_in_held = ld(&svc->tcp_in_held);
	s->max_value = svc->cfg.max_value;
	s->max_image = svc->cfg.max_image;
}

#define S(name, type, f, help) RDMEM_CTR(struct rdmem_server_snapshot, name, type, f, help)
#define C		       RDMEM_CTR_COUNTER
#define G		       RDMEM_CTR_GAUGE
#define OP(op, OP)                                                                                 \
	S("ops." op ".calls", C, op_calls[OP], "Calls of " op " dispatched."),                     \
	    S("ops." op ".errors", C, op_errors[OP], op " replies with a status other than OK.")
#define PATH(p, P) S("paths." p, C, path_calls[P], "Calls that came on " p ".")

static const struct rdmem_ctr rdmem_server_ctrs[] = {
	S("uptime_s", G, uptime_s, "Seconds since the service started."),
	S("limits.max_value", G, max_value, "--max-value: the largest value or reply (bytes)."),
	S("limits.max_image", G, max_image, "--max-image: the largest image upload (bytes)."),
	S("sessions", G, sessions, "Agent RDMA sessions open."),
	S("resources.qps", G, rdma_qps, "Queue pairs of the open RDMA sessions."),
	S("resources.cqs", G, rdma_cqs, "Completion queues of the open RDMA sessions."),
	S("resources.mrs", G, rdma_mrs, "Memory registrations of the open RDMA sessions."),
	S("resources.registered_bytes", G, rdma_registered_bytes,
	  "Bytes the open RDMA sessions registered (their peers reach some of them)."),
	S("resources.recv_wqes", G, rdma_recv_wqes,
	  "Receive work requests the open RDMA sessions post: their receive queues' depth "
	  "(each reposts in batches of 32, so up to 31 fewer are posted at a time)."),
	S("kv.keys", G, kv_keys, "Keys stored."),
	S("kv.bytes", G, kv_bytes, "Key and value bytes stored."),
	S("kv.max_bytes", G, kv_max_bytes,
	  "The store's memory limit (--kv-max-bytes; default half of this machine's memory)."),
	S("kv.charged_bytes", G, kv_charged,
	  "Memory the entries hold against --kv-max-bytes (keys, values and entry headers)."),
	S("kv.refused_full", C, kv_refused,
	  "PUTs answered NO_SPACE: they would have taken the store past --kv-max-bytes."),
	S("bad_input", C, bad_input, "Frames or descriptors refused before dispatch."),
	S("bad_request", C, bad_request, "Calls answered BAD_REQUEST."),
	S("auth_failures", C, auth_failures, "Peers refused by the shared-secret check."),
	S("mac_failures", C, mac_failures,
	  "TCP frames after AUTH whose MAC failed (changed, replayed, dropped, reflected)."),
	S("net.tcp_refused_full", C, net[RDMEM_NET_TCP_REFUSED_FULL],
	  "TCP connections refused: --tcp-max-conns open and none unproven to close."),
	S("net.tcp_refused_addr", C, net[RDMEM_NET_TCP_REFUSED_ADDR],
	  "TCP connections refused: --tcp-max-per-addr open from that address."),
	S("net.tcp_evicted", C, net[RDMEM_NET_TCP_EVICTED],
	  "Unproven TCP connections closed to admit a newer one."),
	S("net.tcp_deadline", C, net[RDMEM_NET_TCP_DEADLINE],
	  "TCP connections closed for not proving themselves within --tcp-auth-ms."),
	S("net.tcp_idle", C, net[RDMEM_NET_TCP_IDLE],
	  "TCP connections closed after --tcp-idle-ms without traffic."),
	S("net.tcp_partial_limit", C, net[RDMEM_NET_TCP_PARTIAL_LIMIT],
	  "TCP connections closed: --tcp-max-partial-per-addr half-finished frames."),
	S("net.tcp_turns_ended", C, net[RDMEM_NET_TCP_TURNS_ENDED],
	  "TCP connections whose turn (200 us of frames) ended with frames left: the loop "
	  "served the others before going on."),
	S("net.tcp_out_paused", C, net[RDMEM_NET_TCP_OUT_PAUSED],
	  "Times a TCP connection's reading paused at 64 KiB of unsent replies, not 4 MiB, "
	  "because all connections' reply buffers held more than --tcp-out-budget."),
	S("net.rdma_refused_addr", C, net[RDMEM_NET_RDMA_REFUSED_ADDR],
	  "RDMA sessions refused: --max-sessions-per-addr open from that address."),
	S("net.rdma_reclaimed", C, net[RDMEM_NET_RDMA_RECLAIMED],
	  "RDMA sessions that never sent a request, closed to admit a new one."),
	S("net.rdma_evicted", C, net[RDMEM_NET_RDMA_EVICTED],
	  "RDMA sessions closed while sessions were full, each the idlest of the address "
	  "holding the most, for a peer of an address holding fewer."),
	S("net.rdma_parked", C, net[RDMEM_NET_RDMA_PARKED],
	  "RDMA connect requests kept until the place made for them was free."),
	S("net.rdma_park_timeouts", C, net[RDMEM_NET_RDMA_PARK_TIMEOUTS],
	  "Kept connect requests refused: no place freed within 1 s."),
	S("net.rdma_bad_requests", C, net[RDMEM_NET_RDMA_BAD_REQUESTS],
	  "RDMA connect requests refused before a session for what the peer sent: malformed, or "
	  "(shm) declaring more of its memory than a session maps."),
	S("tls.handshakes", C, net[RDMEM_NET_TLS_HANDSHAKES], "TLS sessions established on TCP."),
	S("tls.handshake_failures", C, net[RDMEM_NET_TLS_HANDSHAKE_FAILURES],
	  "TLS handshakes refused (certificate, protocol) or not finished within --tcp-auth-ms."),
	S("tls.record_failures", C, net[RDMEM_NET_TLS_RECORD_FAILURES],
	  "TLS records that failed to decrypt (changed on the way): each closed its connection."),
	S("tcp.out_held_bytes", G, tcp_out_held,
	  "Reply buffers the TCP connections hold (allocated bytes), against --tcp-out-budget."),
	S("tcp.in_held_bytes", G, tcp_in_held,
	  "Receive buffers the TCP connections hold: 64 KiB each, up to a frame while larger "
	  "frames come, given back after 1 s at rest."),
	S("bytes_in", C, bytes_in, "Request key and value bytes."),
	S("bytes_out", C, bytes_out, "Reply value bytes."),
	OP("ping", RDMEM_OP_PING),
	OP("echo", RDMEM_OP_ECHO),
	OP("put", RDMEM_OP_KV_PUT),
	OP("get", RDMEM_OP_KV_GET),
	OP("del", RDMEM_OP_KV_DEL),
	OP("mget", RDMEM_OP_KV_MGET),
	OP("profile", RDMEM_OP_PROFILE),
	OP("large_get", RDMEM_OP_LARGE_GET),
	OP("image_chunk", RDMEM_OP_IMAGE_CHUNK),
	OP("reclaim", RDMEM_OP_RECLAIM),
	OP("stats", RDMEM_OP_STATS),
	OP("auth", RDMEM_OP_AUTH),
	OP("bind", RDMEM_OP_BIND),
	PATH("auto", RDMEM_PATH_AUTO),
	PATH("eager", RDMEM_PATH_EAGER),
	PATH("lazy", RDMEM_PATH_LAZY),
	PATH("bulk", RDMEM_PATH_BULK),
	PATH("tcp", RDMEM_PATH_TCP),
	S("objpool.used_bytes", G, pool_used,
	  "Object-pool bytes held by LAZY replies not reclaimed yet, all sessions."),
	S("objpool.bytes", G, pool_bytes, "Object-pool size, all sessions."),
	S("objpool.objects_live", G, pool_live, "Objects not reclaimed yet, all sessions."),
	S("reclaim.freed", C, reclaim_freed, "Objects freed by RECLAIM."),
	S("reclaim.refused", C, reclaim_refused,
	  "RECLAIM entries refused (stale generation, or on TCP)."),
	S("uploads.active", G, img.active, "Image uploads in progress."),
	S("uploads.committed", C, img.committed, "Images committed."),
	S("uploads.failed", C, img.failed, "Image uploads that failed (timeouts included)."),
	S("uploads.timed_out", C, img.timed_out, "Image uploads abandoned."),
	S("uploads.done_evicted", C, img.done_evicted,
	  "Committed uploads forgotten before --upload-timeout to make room for a new one "
	  "(a retry of their final chunk is then refused)."),
	S("uploads.active_evicted", C, img.active_evicted,
	  "Stalled uploads (under 32 KiB/s over the last second) given up for a new upload when "
	  "every record was in progress (the stalled upload then fails)."),
	S("uploads.bytes", C, img.bytes, "Image bytes received."),
	S("hooks.runs", C, hook.runs, "Post-commit hooks started."),
	S("hooks.failures", C, hook.failures, "Hooks that could not start or exited non-zero."),
	S("hooks.running", G, hook.running, "Hooks running now."),
	S("hooks.waiting", G, hook.waiting, "Commits whose hook waits for one of 8 places."),
	S("hooks.timed_out", C, hook.timed_out,
	  "Hooks killed after --image-hook-timeout (counted in hooks.failures too)."),
	S("dedup.window", G, dd_window, "Calls remembered per agent (0: --no-dedup)."),
	S("dedup.agents", G, dd.agents, "Agents whose dedup window is kept."),
	S("dedup.bytes", G, dd.bytes, "Memory of the dedup windows."),
	S("dedup.binds", C, dd.binds, "Connections bound to an agent's window."),
	S("dedup.bind_refused", C, dd.bind_refused,
	  "Agents not tracked: --dedup-agents windows all had live connections."),
	S("dedup.executed", C, dd.executed, "Tracked calls run."),
	S("dedup.replayed", C, dd.replayed,
	  "Retries answered from the dedup window instead of running again."),
	S("dedup.waited", C, dd.waited, "Retries that waited for their first run to end."),
	S("dedup.stale", C, dd.stale,
	  "Retries older than the dedup window: answered STALE, not run."),
	S("dedup.expired", C, dd.expired, "Agents forgotten: idle, or evicted for a new one."),
	S("dedup.untracked", C, dd_untracked,
	  "Calls with a call id on a connection with no dedup window."),
};

_Static_assert(RDMEM_OP__COUNT == 14, "a new op needs its OP() line in rdmem_server_ctrs");
_Static_assert(RDMEM_PATH__COUNT == 5, "a new path needs its PATH() line in rdmem_server_ctrs");

const struct rdmem_ctr_table rdmem_server_ctr_table = { "server", rdmem_server_ctrs,
							RDMEM_ARRAY_SIZE(rdmem_server_ctrs) };

/* The RDMA side's own report (sessions, leases, groups), when it has one:
 * a list per worker and session, not counters, so it is not in the table. */
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
	/* JSON keeps room for its closing "}\n" until the end. */
	size_t tail = json ? 2 : 0;
	struct rdmem_text o = { buf, cap > tail ? cap - tail : 0, 0, 0 };
	struct rdmem_server_snapshot s;
	size_t counters;

	rdmem_server_snapshot_take(svc, &s);
	rdmem_ctr_report(&rdmem_server_ctr_table, &s, 0, json, NULL, &o);
	counters = o.len;
	format_hook(svc, json, &o);
	/* The per-session list outgrew the reply (a reply is at most
	 * --max-value bytes): the counters alone, and say why. */
	if (o.overflow && counters + 160 < o.cap) {
		o.len = counters;
		o.overflow = 0;
		buf[o.len] = '\0';
		rdmem_text_add(&o, json ? ",\"rdma\":null,\"rdma_omitted\":\"%s\"" : "rdma: %s\n",
			       "the session list is longer than a reply may be (--max-value)");
	}
	o.cap = cap;
	if (json)
		rdmem_text_add(&o, "}\n");
	return o.overflow ? 0 : o.len;
}
