/* stats.c - agent counters and their text/JSON rendering. */
#include "agent/stats.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "rdmem/fabric.h"
#include "rdmem/util.h"

void rdmem_agent_count_call(struct rdmem_agent_counters *c, uint8_t path)
{
	rdmem_agent_count(&c->calls[path % RDMEM_PATH__COUNT], 1);
}

void rdmem_agent_count_done(struct rdmem_agent_counters *c, uint8_t path, uint16_t status)
{
	path %= RDMEM_PATH__COUNT;
	rdmem_agent_count(status == RDMEM_S_OK ? &c->ok[path] : &c->failed[path], 1);
}

void rdmem_agent_counters_read(struct rdmem_agent_counters *c, struct rdmem_agent_snapshot *s)
{
	int p;

	for (p = 0; p < RDMEM_PATH__COUNT; p++) {
		s->calls[p] = atomic_load_explicit(&c->calls[p], memory_order_relaxed);
		s->ok[p] = atomic_load_explicit(&c->ok[p], memory_order_relaxed);
		s->failed[p] = atomic_load_explicit(&c->failed[p], memory_order_relaxed);
	}
	s->fallbacks = atomic_load_explicit(&c->fallbacks, memory_order_relaxed);
	s->inline_calls = atomic_load_explicit(&c->inline_calls, memory_order_relaxed);
	s->rdma_errors_total = atomic_load_explicit(&c->rdma_errors, memory_order_relaxed);
	s->link_opens = atomic_load_explicit(&c->link_opens, memory_order_relaxed);
	s->link_losses = atomic_load_explicit(&c->link_losses, memory_order_relaxed);
	s->link_stalls = atomic_load_explicit(&c->link_stalls, memory_order_relaxed);
	s->link_up = atomic_load_explicit(&c->link_up, memory_order_relaxed);
	s->memlock_short = atomic_load_explicit(&c->memlock_short, memory_order_relaxed);
	rdmem_resp_stats_read(&s->resp);
}

static const char *const rdmem_pressure_names[] = { "none", "ring", "objpool" };

void rdmem_agent_snapshot_names(struct rdmem_agent_snapshot *s)
{
	s->fabric_name = s->fabric ? rdmem_fab_kind_name(s->fabric) : "tcp";
	s->force_name = rdmem_path_name(s->force);
	s->pressure_name = rdmem_pressure_names[(unsigned)s->sim.pressure % 3];
}

#define S(name, type, f, help) RDMEM_CTR(struct rdmem_agent_snapshot, name, type, f, help)
#define SRV(name, type, f, help)                                                                   \
	RDMEM_CTR_IF(struct rdmem_agent_snapshot, RDMEM_AGENT_CTR_CTRL, "server." name, type,      \
		     ctrl.f, "Server control page: " help)
#define C RDMEM_CTR_COUNTER
#define G RDMEM_CTR_GAUGE
#define PATH(p, P)                                                                                 \
	S("paths." p ".calls", C, calls[P], "Calls the path selector sent " p "."),                \
	    S("paths." p ".ok", C, ok[P], "Calls finished OK on " p "."),                          \
	    S("paths." p ".failed", C, failed[P], "Calls finished with an error on " p ".")

/* Groups stay together (JSON nests on them); "paths" comes before "tcp" so
 * a reader searching "tcp" then "ok" finds the path's figure first. */
static const struct rdmem_ctr rdmem_agent_ctrs[] = {
	S("fabric", RDMEM_CTR_LABEL, fabric_name, "The RDMA fabric: verbs, shm, or tcp (none)."),
	S("link_up", G, link_up, "1 while the RDMA session is up."),
	S("link_opens", C, link_opens, "RDMA sessions opened."),
	S("link_losses", C, link_losses, "RDMA sessions lost."),
	S("link_stalls", C, link_stalls,
	  "RDMA sessions dropped by the liveness check (--rdma-stall-ms)."),
	S("memlock_short", G, memlock_short,
	  "1 when RDMA is off: the locked-memory limit is too low."),
	S("rdma_errors", C, rdma_errors_total, "RDMA operations that failed."),
	S("rdma_error_window", G, rdma_errors,
	  "RDMA errors the path selector compares with --error-threshold."),
	S("fallbacks", C, fallbacks, "RDMA calls retried on TCP."),
	S("inline_calls", C, inline_calls,
	  "Calls the front-door thread routed and posted itself, with no hand-off to the "
	  "session thread (it does when that thread is between rounds)."),
	S("force_path", RDMEM_CTR_LABEL, force_name, "The path every call takes (--force-path)."),
	PATH("eager", RDMEM_PATH_EAGER),
	PATH("lazy", RDMEM_PATH_LAZY),
	PATH("bulk", RDMEM_PATH_BULK),
	S("paths.tcp.calls", C, tcp.calls, "Calls sent on TCP (fallbacks included)."),
	S("paths.tcp.ok", C, tcp.ok, "Calls finished OK on TCP."),
	S("paths.tcp.failed", C, tcp.failed, "Calls finished with an error on TCP."),
	S("paths.tcp.retried", C, tcp.retried, "TCP calls sent again after a lost connection."),
	S("paths.tcp.unreachable", C, tcp.unreachable,
	  "TCP calls failed with no server to send them to."),
	S("paths.tcp.timeouts", C, tcp.timeouts, "TCP calls past their deadline."),
	S("rdma.slots_in_use", G, rdma.inflight, "Server request-ring slots held by calls."),
	S("rdma.slots", G, rdma.slots, "Server request-ring slots of the session."),
	S("rdma.posted", C, rdma.posted, "RDMA calls posted on the current link."),
	S("rdma.doorbells", C, rdma.doorbells,
	  "Posts (doorbells) on the current link: calls, READs and RECLAIMs built in one "
	  "round go out in one."),
	S("rdma.wqes", C, rdma.wqes,
	  "Send WRs (WQEs) those posts carried on the current link: request and RECLAIM "
	  "messages, READs."),
	S("rdma.msg_wqes", C, rdma.msg_wqes,
	  "WQEs built for request and RECLAIM messages on the current link: one each, two "
	  "only for a payload in more pieces than the device gathers."),
	S("rdma.replies", C, rdma.replies, "RDMA replies taken on the current link."),
	S("rdma.lazy_reads", C, rdma.lazy_reads, "LAZY replies RDMA-read on the current link."),
	S("rdma.lazy_bytes", C, rdma.lazy_bytes,
	  "Bytes RDMA-read for LAZY replies on the current link."),
	S("rdma.lazy_expired", C, rdma.lazy_expired,
	  "LAZY reads that finished too late to trust (server --object-ttl): sent over TCP "
	  "again, or failed -ESTALE."),
	S("rdma.bulk_sges", C, rdma.bulk_sges,
	  "Scatter-gather entries of BULK writes on the current link."),
	S("rdma.bulk_bytes", C, rdma.bulk_bytes,
	  "Bytes written by BULK requests on the current link."),
	S("rdma.reclaim_msgs", C, rdma.reclaim_msgs, "RECLAIM messages sent on the current link."),
	S("rdma.reclaimed", C, rdma.reclaimed,
	  "Server objects released by RECLAIM on the current link."),
	S("rdma.reclaim_refused", C, rdma.reclaim_refused,
	  "RECLAIM entries the server refused (stale) on the current link."),
	S("rdma.late_replies", C, rdma.late_replies,
	  "Replies that arrived after their call timed out."),
	S("rdma.bad_replies", C, rdma.bad_replies,
	  "Replies refused by the slot, sequence or bounds checks."),
	S("rdma.ctrl_reads", C, rdma.ctrl_reads, "Server control-page reads."),
	S("rdma.ctrl_torn", C, rdma.ctrl_torn, "Control-page reads torn by a concurrent update."),
	S("rdma.yields", C, rdma.yields,
	  "Turn words from the server saying this session's group slice is ending: hold."),
	S("rdma.turns", C, rdma.turns,
	  "Turn words from the server saying this session's group turn has come."),
	S("rdma.turn_wakes", C, rdma.turn_wakes,
	  "Turns that came with an immediate and woke this session (layout 6)."),
	S("rdma.wake_saved_us", C, rdma.wake_saved_us,
	  "Microseconds left of holds holding a call when a turn that wakes ended them."),
	S("rdma.yield_holds", C, rdma.yield_holds,
	  "Yields that held back at least one new call until this group's turn."),
	S("rdma.reads_max", G, rdma.reads_max,
	  "RDMA READs allowed in flight (agreed depth, capped by --max-reads)."),
	S("rdma.reads_peak", G, rdma.reads_peak, "Most RDMA READs in flight at once."),
	S("rdma.read_waits", C, rdma.read_waits,
	  "LAZY READs that waited for the READ depth or the send queue."),
	S("rdma.timeouts_held", C, rdma.timeouts_held,
	  "Timed-out calls held until their request writes completed."),
	S("rdma.staged", C, rdma.staged,
	  "Requests (payload at most 4 KiB) copied to the agent's registered staging "
	  "instead of sent from the client's area."),
	S("rdma.area_regs", C, rdma.area_regs,
	  "Client slots registered on the current link: at a slot's first call after "
	  "each attach that moves a large payload (BULK, LAZY, a request over 4 KiB, or "
	  "a reply the server sent by reference)."),
	S("rdma.area_drops", C, rdma.area_drops,
	  "Client slot registrations let go on the current link: after the client detached, "
	  "replaced by its entry's next attach, or evicted for the budget."),
	S("rdma.area_refused", C, rdma.area_refused,
	  "Reply READs not issued because the client's slot could not be registered "
	  "(pinned-memory budget or locked-memory limit): read-only AUTO calls went over "
	  "TCP, others failed."),
	S("rdma.areas_live", G, rdma.areas_live,
	  "Client slots registered now on the current link (with verbs each pins its slot's "
	  "payload, max-value + 66 KiB; the shm fabric pins nothing)."),
	S("rdma.pin_evicted", C, rdma.pin_evicted,
	  "Idle client slot registrations let go to stay within --max-client-mem or "
	  "--max-total-mem."),
	S("rdma.reg_deferred", C, rdma.reg_deferred,
	  "Calls the front-door thread took that needed a client slot registered: left "
	  "pending for the session thread, which registers (inline_calls)."),
	S("rdma.pin_waits", C, rdma.pin_waits,
	  "Tries of a call that had to wait for a registration to become idle (calls of the "
	  "link held the budget, or a fence READ had to prove its WRs done): a call that "
	  "waits is tried again each round, and each try counts."),
	S("rdma.pin_refused", C, rdma.pin_refused,
	  "Calls refused a registration with nothing of this link's to let go or wait for, or "
	  "with a limit below one slot: AUTO calls went over TCP, forced BULK/LAZY ones "
	  "failed -ENOMEM."),
	S("tcp.connected", G, tcp.connected, "1 while the TCP fallback connection is up."),
	S("tcp.connects", C, tcp.connects, "TCP connections made."),
	S("tcp.timeouts_held", C, tcp.timeouts_held,
	  "TCP calls past their deadline held until the kernel was done with their slot "
	  "(withdrawing them would have broken the shared connection; at most 2 s)."),
	S("tcp.disconnects", C, tcp.disconnects, "TCP connections lost."),
	S("tcp.inflight", G, tcp.inflight, "TCP calls on the wire."),
	S("tcp.waiting", G, tcp.waiting, "TCP calls waiting for a connection or window."),
	S("tcp.bytes_out", C, tcp.bytes_out, "Request payload bytes sent on TCP."),
	S("tcp.bytes_in", C, tcp.bytes_in, "Reply payload bytes received on TCP."),
	S("tcp.mac_failures", C, tcp.mac_failures,
	  "TCP replies whose MAC failed (changed, replayed, dropped, reflected): each "
	  "reconnected."),
	S("tls.handshakes", C, tcp.tls_handshakes, "TLS sessions established with the server."),
	S("tls.handshake_failures", C, tcp.tls_handshake_failures,
	  "TLS handshakes that failed (certificate refused, refused by the server, timed out)."),
	S("tls.record_failures", C, tcp.tls_record_failures,
	  "TLS records from the server that failed to decrypt: each reconnected."),
	S("frontdoor.clients", G, fd.attached, "Local processes attached to the front door."),
	S("frontdoor.inflight", G, fd.inflight, "Front-door calls not completed yet."),
	S("frontdoor.calls", C, fd.calls,
	  "Ring entries and orphan-scan takes handled: each one a call submitted, a local "
	  "ping, expired, dropped, a bad entry, a late entry (a call the scan served "
	  "counts again when its entry comes) or a scan take that found the slot "
	  "withdrawn by its client."),
	S("frontdoor.local_pings", C, fd.local_pings, "Local pings answered by the front door."),
	S("frontdoor.bad_entries", C, fd.bad_entries, "Ring entries refused by validation."),
	S("frontdoor.skipped", C, fd.skipped,
	  "Ring positions skipped after a dead or stalled producer."),
	S("frontdoor.repaired", C, fd.repaired, "Ring cells a client scribbled on, rewritten."),
	S("frontdoor.stalls", C, fd.stalls,
	  "Waits for a claimed, unpublished ring position that ended in skipping."),
	S("frontdoor.head_repaired", C, fd.head_repaired,
	  "Ring heads a client moved out of range, put back."),
	S("frontdoor.pid_forged", C, fd.pid_forged,
	  "Client pid words found overwritten, put back to the credentialed pid."),
	S("frontdoor.header_repaired", C, fd.header_repaired,
	  "Segment headers (state, epoch, geometry) a client overwrote, put back."),
	S("frontdoor.orphans", C, fd.orphans,
	  "Submitted slots whose ring entry never came (a client overwrote it or has not "
	  "published it yet), taken by the scan."),
	S("frontdoor.no_entry", C, fd.no_entry,
	  "Slots a client marked for want of ring room (a client jamming the ring, or a "
	  "claim that lost every race), taken at its request on its connection."),
	S("frontdoor.take_requests", C, fd.take_reqs,
	  "Reads of such requests on clients' connections (one read may carry several)."),
	S("frontdoor.late_entries", C, fd.late_entries,
	  "Ring entries that came after the scan took their slot (a producer preempted "
	  "between its slot and its ring cell): ignored, not refused."),
	S("frontdoor.dead_clients", C, fd.dead_clients,
	  "Client entries reclaimed from dead processes."),
	S("frontdoor.dropped", C, fd.dropped, "Completions for clients that died or gave up."),
	S("frontdoor.epoch", G, fd.epoch,
	  "The segment's agent epoch: changes when another agent takes it over."),
	S("frontdoor.expired", C, fd.expired,
	  "Calls whose deadline passed before the agent took them."),
	S("frontdoor.door_attached", C, fd.door_attached,
	  "Attaches granted on the socket (sealed segment handed over)."),
	S("frontdoor.door_bad_hello", C, fd.door_bad_hello,
	  "Socket connections closed for a bad hello or bytes after it."),
	S("frontdoor.door_timeouts", C, fd.door_timeouts,
	  "Socket connections closed for not sending their hello in time."),
	S("frontdoor.door_full", C, fd.door_full, "Attaches refused: every client entry in use."),
	S("frontdoor.door_evicted", C, fd.door_evicted,
	  "Handshakes dropped for newer ones: too many connections at once."),
	S("frontdoor.door_hangups", C, fd.door_hangups,
	  "Attached clients whose socket connection closed (detach or death)."),
	S("frontdoor.door_uid_full", C, fd.door_uid_full,
	  "Attaches refused: the client's uid holds its --clients-per-uid entries."),
	S("frontdoor.door_pid_unknown", C, fd.door_pid_unknown,
	  "Attaches from outside the agent's PID namespace (pid 0): tracked by their "
	  "connection alone."),
	S("frontdoor.door_owner_exits", C, fd.door_owner_exits,
	  "Clients whose process exited while its connection was still open (a process it "
	  "forked holds it), told by a pidfd."),
	S("frontdoor.ctl_denied", C, fd.ctl_denied,
	  "agent-ctl calls refused: not root, the agent's user or --admin-group."),
	S("frontdoor.cut_off", C, fd.cut_off,
	  "Clients disconnected for misbehaving faster than --client-strikes allows."),
	S("frontdoor.strikes", C, fd.strikes, "Misbehaviours attributed to one client, scored."),
	S("frontdoor.unattributed", C, fd.unattributed,
	  "Misbehaviours naming a client that another user could have forged: not scored."),
	S("frontdoor.door_cut_refused", C, fd.door_cut_refused,
	  "Attaches refused: the process was cut off less than 10 s before."),
	S("frontdoor.pin_bytes", G, fd.pin_bytes,
	  "Client slot bytes registered now for zero copy, on every link (what verbs pins)."),
	S("frontdoor.pin_max_client", G, fd.pin_max_client, "--max-client-mem, bytes."),
	S("frontdoor.pin_max_total", G, fd.pin_max_total, "--max-total-mem, bytes."),
	S("frontdoor.pin_refused_client", C, fd.pin_refused_client,
	  "Charges refused for one client's --max-client-mem (each try, before any eviction)."),
	S("frontdoor.pin_refused_total", C, fd.pin_refused_total,
	  "Charges refused for --max-total-mem (each try, before any eviction)."),
	S("frontdoor.door_no_memory", C, fd.door_no_memory,
	  "Attaches refused: no memory (or mapping) for the client's own area."),
	S("resp.conns", C, resp.conns,
	  "Redis-protocol connections accepted (--resp-port, --resp-socket)."),
	S("resp.clients", G, resp.clients, "Redis-protocol connections open."),
	S("resp.cmds", C, resp.cmds, "Redis-protocol commands taken."),
	S("resp.errors", C, resp.errors, "Redis-protocol error replies."),
	S("resp.protocol_errors", C, resp.protocol_errors,
	  "Redis-protocol connections closed for malformed input."),
	S("resp.refused", C, resp.refused,
	  "Redis-protocol connections refused at --resp-max-conns."),
	S("resp.paused", C, resp.paused,
	  "Redis-protocol connections whose input was held back: too many queued commands "
	  "or bytes, or replies left unread."),
	S("resp.evicted", C, resp.evicted,
	  "Silent Redis-protocol connections closed for a new one at --resp-max-conns "
	  "(--resp-idle-evict)."),
	S("resp.evicted_memory", C, resp.evicted_memory,
	  "Redis-protocol connections closed, the one holding most first, while all of them "
	  "held more than --resp-max-memory."),
	S("resp.memory", G, resp.memory,
	  "Bytes the Redis-protocol connections hold: buffers and queued commands."),
	S("simulate.rdma_down", G, sim.rdma_down, "Fault injection: 1 while RDMA is held down."),
	S("simulate.op_fail", G, sim.op_fail, "Fault injection: RDMA operations left to fail."),
	S("simulate.link_break", G, sim.link_break,
	  "Fault injection: call posts left to fail as on a broken link."),
	S("simulate.reply_loss", G, sim.reply_loss,
	  "Fault injection: RDMA replies left to drop after the server ran the call."),
	S("simulate.tcp_reply_loss", G, tcp.sim_reply_loss,
	  "Fault injection: TCP replies left to drop after the server ran the call."),
	S("simulate.pressure", RDMEM_CTR_LABEL, pressure_name,
	  "Fault injection: server pressure pretended (none, ring, objpool)."),
	SRV("session", G, session_id, "this agent's session id."),
	SRV("ring_backlog", G, ring_backlog, "READY request slots not yet taken."),
	SRV("ring_slots", G, ring_slots, "ring slots."),
	SRV("objpool_used", G, objpool_used, "object-pool bytes held by live objects."),
	SRV("objpool_bytes", G, objpool_bytes, "object-pool size."),
	SRV("objects_live", G, objects_live, "objects not reclaimed yet."),
	SRV("completed", C, completed, "calls completed."),
	SRV("failed", C, failed, "replies with a status other than OK."),
	SRV("bad_requests", C, bad_requests, "descriptors refused."),
	SRV("eager_to_lazy", C, eager_to_lazy, "replies too big for the reply slot, sent LAZY."),
	SRV("obj_alloc", C, obj_alloc, "objects allocated."),
	SRV("obj_reclaim", C, obj_reclaim, "objects freed by RECLAIM."),
	SRV("obj_repeat", C, obj_repeat, "repeated RECLAIMs of a freed object (harmless)."),
	SRV("obj_stale", C, obj_stale, "RECLAIMs with a wrong generation, refused."),
	SRV("obj_timeout", C, obj_timeout, "objects freed by the TTL scan."),
	SRV("obj_full", C, obj_full, "allocations failed: pool full."),
	SRV("bulk_requests", C, bulk_requests, "requests whose payload spanned several slots."),
	SRV("bulk_bytes", C, bulk_bytes, "bytes of those requests."),
	SRV("ewma_eager_ns", G, ewma_ns[RDMEM_PATH_EAGER], "EAGER service time, moving average."),
	SRV("ewma_lazy_ns", G, ewma_ns[RDMEM_PATH_LAZY], "LAZY service time, moving average."),
	SRV("ewma_bulk_ns", G, ewma_ns[RDMEM_PATH_BULK], "BULK service time, moving average."),
};

const struct rdmem_ctr_table rdmem_agent_ctr_table = { "agent", rdmem_agent_ctrs,
						       RDMEM_ARRAY_SIZE(rdmem_agent_ctrs) };

int rdmem_agent_stats_format(const struct rdmem_agent_snapshot *s, int json, char *buf, size_t cap)
{
	struct rdmem_text o = { buf, cap, 0, 0 };

	if (!cap)
		return -E2BIG;
	rdmem_ctr_report(&rdmem_agent_ctr_table, s, rdmem_agent_snapshot_mask(s), json, "}\n", &o);
	return o.overflow ? -E2BIG : (int)o.len;
}

int rdmem_frontdoor_format_stats(struct rdmem_frontdoor *fd, int json, char *buf, size_t cap)
{
	struct rdmem_agent_snapshot snap; /* only fd is read */
	struct rdmem_text o = { buf, cap, 0, 0 };
	struct rdmem_ctr_table view;

	if (!cap || rdmem_ctr_table_group(&rdmem_agent_ctr_table, "frontdoor.", &view) < 0)
		return -ENOBUFS;
	memset(&snap, 0, sizeof(snap));
	rdmem_frontdoor_get_stats(fd, &snap.fd);
	rdmem_ctr_report(&view, &snap, 0, json, "}", &o);
	return o.overflow ? -ENOBUFS : (int)o.len;
}
