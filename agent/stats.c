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
	s->rdma_errors_total = atomic_load_explicit(&c->rdma_errors, memory_order_relaxed);
	s->link_opens = atomic_load_explicit(&c->link_opens, memory_order_relaxed);
	s->link_losses = atomic_load_explicit(&c->link_losses, memory_order_relaxed);
	s->link_stalls = atomic_load_explicit(&c->link_stalls, memory_order_relaxed);
	s->link_up = atomic_load_explicit(&c->link_up, memory_order_relaxed);
	s->memlock_short = atomic_load_explicit(&c->memlock_short, memory_order_relaxed);
}

static const char *const rdmem_pressure_names[] = { "none", "ring", "objpool" };

#define U(x) ((unsigned long long)(x))

static void rdmem_stats_text(const struct rdmem_agent_snapshot *s, struct rdmem_text *o)
{
	const struct rdmem_ctrl *c = &s->ctrl;
	int p;

	rdmem_text_add(o,
		       "agent: fabric %s, rdma link %s, opens %llu, losses %llu, rdma errors %u "
		       "(total %llu), fallbacks to tcp %llu, force-path %s\n",
		       s->fabric ? rdmem_fab_kind_name(s->fabric) : "none (tcp only)",
		       s->memlock_short ? "off (locked-memory limit too low)"
		       : s->link_up	? "up"
					: "down",
		       U(s->link_opens), U(s->link_losses), s->rdma_errors, U(s->rdma_errors_total),
		       U(s->fallbacks), rdmem_path_name(s->force));
	for (p = RDMEM_PATH_EAGER; p < RDMEM_PATH_TCP; p++)
		rdmem_text_add(o, "path %-5s calls %llu ok %llu failed %llu\n", rdmem_path_name(p),
			       U(s->calls[p]), U(s->ok[p]), U(s->failed[p]));
	rdmem_text_add(o,
		       "path tcp   calls %llu ok %llu failed %llu retried %llu unreachable %llu "
		       "timeouts %llu\n",
		       U(s->tcp.calls), U(s->tcp.ok), U(s->tcp.failed), U(s->tcp.retried),
		       U(s->tcp.unreachable), U(s->tcp.timeouts));
	rdmem_text_add(
	    o,
	    "rdma: slots in use %u/%u, posted %llu, replies %llu, lazy reads %llu "
	    "(%llu B), bulk sges %llu (%llu B), reclaim msgs %llu objects %llu refused "
	    "%llu, late replies %llu, bad replies %llu, ctrl reads %llu torn %llu, group yields "
	    "%llu, READs in flight at most %u (peak %u, waited %llu)\n",
	    s->rdma.inflight, s->rdma.slots, U(s->rdma.posted), U(s->rdma.replies),
	    U(s->rdma.lazy_reads), U(s->rdma.lazy_bytes), U(s->rdma.bulk_sges),
	    U(s->rdma.bulk_bytes), U(s->rdma.reclaim_msgs), U(s->rdma.reclaimed),
	    U(s->rdma.reclaim_refused), U(s->rdma.late_replies), U(s->rdma.bad_replies),
	    U(s->rdma.ctrl_reads), U(s->rdma.ctrl_torn), U(s->rdma.yields), s->rdma.reads_max,
	    s->rdma.reads_peak, U(s->rdma.read_waits));
	rdmem_text_add(o,
		       "tcp: connected %u, connects %llu, disconnects %llu, in flight %u, waiting "
		       "%u, bytes out %llu in %llu\n",
		       s->tcp.connected, U(s->tcp.connects), U(s->tcp.disconnects), s->tcp.inflight,
		       s->tcp.waiting, U(s->tcp.bytes_out), U(s->tcp.bytes_in));
	rdmem_text_add(o,
		       "frontdoor: clients %u, calls %llu, local pings %llu, bad entries %llu, "
		       "skipped %llu, dead clients %llu, dropped replies %llu\n",
		       s->fd.attached, U(s->fd.calls), U(s->fd.local_pings), U(s->fd.bad_entries),
		       U(s->fd.skipped), U(s->fd.dead_clients), U(s->fd.dropped));
	rdmem_text_add(o, "liveness: links dropped for a dead path %llu\n", U(s->link_stalls));
	rdmem_text_add(o, "simulate: rdma-down %s, op-fail %u, pressure %s\n",
		       s->sim.rdma_down ? "on" : "off", s->sim.op_fail,
		       rdmem_pressure_names[s->sim.pressure % 3]);
	if (!s->have_ctrl)
		return;
	rdmem_text_add(
	    o,
	    "server control page: session %u, ring backlog %u/%u, object pool %llu/%llu B "
	    "(%u live), completed %llu failed %llu bad %llu eager->lazy %llu\n",
	    c->session_id, c->ring_backlog, c->ring_slots, U(c->objpool_used), U(c->objpool_bytes),
	    c->objects_live, U(c->completed), U(c->failed), U(c->bad_requests),
	    U(c->eager_to_lazy));
	rdmem_text_add(
	    o,
	    "server objects: alloc %llu reclaim %llu repeat %llu stale %llu timeout %llu "
	    "full %llu; bulk requests %llu (%llu B); service ewma eager %llu lazy %llu "
	    "bulk %llu ns\n",
	    U(c->obj_alloc), U(c->obj_reclaim), U(c->obj_repeat), U(c->obj_stale),
	    U(c->obj_timeout), U(c->obj_full), U(c->bulk_requests), U(c->bulk_bytes),
	    U(c->ewma_ns[RDMEM_PATH_EAGER]), U(c->ewma_ns[RDMEM_PATH_LAZY]),
	    U(c->ewma_ns[RDMEM_PATH_BULK]));
}

static void rdmem_stats_json(const struct rdmem_agent_snapshot *s, struct rdmem_text *o)
{
	const struct rdmem_ctrl *c = &s->ctrl;
	int p;

	rdmem_text_add(
	    o,
	    "{\"fabric\":\"%s\",\"link_up\":%u,\"link_opens\":%llu,\"link_losses\":%llu,"
	    "\"memlock_short\":%u,\"rdma_errors\":%u,\"rdma_errors_total\":%llu,\"fallbacks\":%llu,"
	    "\"force_path\":\"%s\",\"paths\":{",
	    s->fabric ? rdmem_fab_kind_name(s->fabric) : "none", s->link_up, U(s->link_opens),
	    U(s->link_losses), s->memlock_short, s->rdma_errors, U(s->rdma_errors_total),
	    U(s->fallbacks), rdmem_path_name(s->force));
	for (p = RDMEM_PATH_EAGER; p < RDMEM_PATH_TCP; p++)
		rdmem_text_add(o, "\"%s\":{\"calls\":%llu,\"ok\":%llu,\"failed\":%llu},",
			       rdmem_path_name(p), U(s->calls[p]), U(s->ok[p]), U(s->failed[p]));
	rdmem_text_add(o,
		       "\"tcp\":{\"calls\":%llu,\"ok\":%llu,\"failed\":%llu,\"retried\":%llu,"
		       "\"unreachable\":%llu,\"timeouts\":%llu}},",
		       U(s->tcp.calls), U(s->tcp.ok), U(s->tcp.failed), U(s->tcp.retried),
		       U(s->tcp.unreachable), U(s->tcp.timeouts));
	rdmem_text_add(
	    o,
	    "\"rdma\":{\"slots_in_use\":%u,\"slots\":%u,\"posted\":%llu,\"replies\":%llu,"
	    "\"lazy_reads\":%llu,\"lazy_bytes\":%llu,\"bulk_sges\":%llu,\"bulk_bytes\":%llu,"
	    "\"reclaim_msgs\":%llu,\"reclaimed\":%llu,\"reclaim_refused\":%llu,"
	    "\"late_replies\":%llu,\"bad_replies\":%llu,\"ctrl_reads\":%llu,"
	    "\"ctrl_torn\":%llu,\"yields\":%llu,\"reads_max\":%u,\"reads_peak\":%u,"
	    "\"read_waits\":%llu,\"timeouts_held\":%llu},",
	    s->rdma.inflight, s->rdma.slots, U(s->rdma.posted), U(s->rdma.replies),
	    U(s->rdma.lazy_reads), U(s->rdma.lazy_bytes), U(s->rdma.bulk_sges),
	    U(s->rdma.bulk_bytes), U(s->rdma.reclaim_msgs), U(s->rdma.reclaimed),
	    U(s->rdma.reclaim_refused), U(s->rdma.late_replies), U(s->rdma.bad_replies),
	    U(s->rdma.ctrl_reads), U(s->rdma.ctrl_torn), U(s->rdma.yields), s->rdma.reads_max,
	    s->rdma.reads_peak, U(s->rdma.read_waits), U(s->rdma.timeouts_held));
	rdmem_text_add(o,
		       "\"tcp\":{\"connected\":%u,\"connects\":%llu,\"disconnects\":%llu,"
		       "\"inflight\":%u,\"waiting\":%u,\"bytes_out\":%llu,\"bytes_in\":%llu},",
		       s->tcp.connected, U(s->tcp.connects), U(s->tcp.disconnects), s->tcp.inflight,
		       s->tcp.waiting, U(s->tcp.bytes_out), U(s->tcp.bytes_in));
	rdmem_text_add(
	    o,
	    "\"frontdoor\":{\"clients\":%u,\"calls\":%llu,\"local_pings\":%llu,"
	    "\"bad_entries\":%llu,\"skipped\":%llu,\"dead_clients\":%llu,\"dropped\":%llu},",
	    s->fd.attached, U(s->fd.calls), U(s->fd.local_pings), U(s->fd.bad_entries),
	    U(s->fd.skipped), U(s->fd.dead_clients), U(s->fd.dropped));
	rdmem_text_add(o, "\"link_stalls\":%llu,", U(s->link_stalls));
	rdmem_text_add(o, "\"simulate\":{\"rdma_down\":%d,\"op_fail\":%u,\"pressure\":\"%s\"}",
		       s->sim.rdma_down, s->sim.op_fail, rdmem_pressure_names[s->sim.pressure % 3]);
	if (s->have_ctrl)
		rdmem_text_add(o,
			       ",\"server\":{\"session\":%u,\"ring_backlog\":%u,\"ring_slots\":%u,"
			       "\"objpool_used\":%llu,\"objpool_bytes\":%llu,\"objects_live\":%u,"
			       "\"completed\":%llu,\"failed\":%llu,\"bad_requests\":%llu,"
			       "\"eager_to_lazy\":%llu,\"obj_alloc\":%llu,\"obj_reclaim\":%llu,"
			       "\"obj_repeat\":%llu,\"obj_stale\":%llu,\"obj_timeout\":%llu,"
			       "\"obj_full\":%llu,\"bulk_requests\":%llu,\"bulk_bytes\":%llu}",
			       c->session_id, c->ring_backlog, c->ring_slots, U(c->objpool_used),
			       U(c->objpool_bytes), c->objects_live, U(c->completed), U(c->failed),
			       U(c->bad_requests), U(c->eager_to_lazy), U(c->obj_alloc),
			       U(c->obj_reclaim), U(c->obj_repeat), U(c->obj_stale),
			       U(c->obj_timeout), U(c->obj_full), U(c->bulk_requests),
			       U(c->bulk_bytes));
	rdmem_text_add(o, "}\n");
}

int rdmem_agent_stats_format(const struct rdmem_agent_snapshot *s, int json, char *buf, size_t cap)
{
	struct rdmem_text o = { buf, cap, 0, 0 };

	if (!cap)
		return -E2BIG;
	if (json)
		rdmem_stats_json(s, &o);
	else
		rdmem_stats_text(s, &o);
	return o.overflow ? -E2BIG : (int)o.len;
}
