/* session_impl.h - the session itself, shared by the two files that build
 * and drive it: server/session.c (the data path a worker drives: reap,
 * serve, answer, the control page, the turn word) and server/session_open.c
 * (setup and teardown: the hello's checks, the lease and its registrations,
 * accept, close). Private to them; everyone else sees session.h.
 */
#ifndef RDMEM_SERVER_SESSION_IMPL_H
#define RDMEM_SERVER_SESSION_IMPL_H

#include <stdatomic.h>
#include <stdint.h>

#include "rdmem/layout.h"
#include "server/objpool.h"
#include "server/session.h"

#define RDMEM_SESSION_CTRL_NS	1000000ull   /* control page refresh while busy */
#define RDMEM_SESSION_SCAN_NS	100000000ull /* object TTL scan */
#define RDMEM_SESSION_BATCH_WRS 32	     /* reply WRs posted at once */
/* Request copies up to this size are kept for the next request (server/session.c). */
#define RDMEM_SESSION_COPY_KEEP (64u << 10)

struct rdmem_session {
	const struct rdmem_rdma_config *cfg;
	struct rdmem_service *svc;
	struct rdmem_conn *conn;
	uint32_t id;
	uint32_t slots, slot_bytes;
	uint64_t req_stride; /* request slot i at req + i * req_stride */
	/* Response slot i is at resp.addr + i * resp_stride, its payload 64
	 * bytes on: the agent's layout, never ours (resp_bytes from its hello).
	 * eager_bytes is the most payload we write there. */
	uint32_t resp_bytes, resp_stride, eager_bytes;
	struct rdmem_remote resp; /* the agent's response slots */

	struct rdmem_pool *pool;  /* where the lease comes from */
	struct rdmem_pool *owned; /* the pool when it is ours alone (no shared pool) */
	struct rdmem_lease lease;
	uint8_t *req; /* per slot: request descriptor, then request payload */
	struct rdmem_ctrl *ctrl;
	uint8_t *staging; /* per slot: reply descriptor, then reply payload */
	struct rdmem_mr mr_req, mr_objects, mr_ctrl, mr_staging;
	struct rdmem_objpool objects;

	uint32_t *ready; /* FIFO of slots whose immediate arrived */
	uint32_t ready_head, ready_count;
	uint32_t recv_owed; /* receives consumed and not yet reposted */
	/* Replies built by this poll and not posted yet: they go out in one
	 * post (one doorbell) when the poll ends or the batch is full. */
	struct rdmem_wr batch[RDMEM_SESSION_BATCH_WRS];
	uint32_t batch_n, batch_cap;
	uint64_t doorbells;
	uint64_t wqes; /* reply WRs built (posted now or with the next post): one a reply */
	/* The turn word (layout.h): where it is in the agent's region, the
	 * sequence of our last write, and when the hold it told ends (0: none
	 * running). turn_err: a turn write that could not be posted, which
	 * ends the session at its next reap. */
	uint64_t turn_addr;
	uint16_t turn_seq;
	uint16_t wakes_acked; /* of the wakes below, as the agent's hint counts them */
	uint64_t hold_until;
	uint64_t turns; /* turn words written */
	uint64_t wakes; /* of them, with an immediate (RDMEM_TURN_IMM); mod 2^16 in hints */
	int turn_err;
	uint64_t group;		 /* the last slice whose group held it */
	const uint64_t *serving; /* the worker's slice now (group.h), or NULL */

	uint64_t ctrl_seq, ctrl_at, scan_at;
	uint64_t completed, failed, bad, eager_to_lazy, bulk_requests, bulk_bytes;
	uint64_t ewma_ns[RDMEM_PATH__COUNT];
	int64_t pool_told[3];	       /* used, size, live as last added to the service's sums */
	struct rdmem_rdma_usage usage; /* as added to the service's sums while open */
	int accepted;
	int setup_err; /* why a session never accepted is refused: its reject names it */
	/* The agent RDMEM_OP_BIND named, for exactly-once calls. */
	struct rdmem_service_peer peer;
	uint64_t opened_ns;
	uint64_t heard;			   /* requests the peer sent (in-range immediates) */
	uint64_t heard_seen;		   /* heard as the last tick saw it */
	struct rdmem_session_guard *guard; /* the listener's entry, or NULL */
	/* The copy of a request's key and value the service reads
	 * (rdmem_session_snapshot), grown to the largest a request needed. */
	uint8_t *copy;
	uint32_t copy_cap;
};

static inline uint64_t rdmem_session_staging_stride(const struct rdmem_session *s)
{
	return rdmem_slot_stride(s->cfg->stage_bytes);
}

static inline uint64_t rdmem_session_registered_bytes(const struct rdmem_session *s)
{
	return s->mr_req.len + s->mr_objects.len + s->mr_ctrl.len + s->mr_staging.len;
}

/* The service sums every session's pool for /metrics: it gets the changes. */
void rdmem_session_tell_pool(struct rdmem_session *s, int64_t used, int64_t size, int64_t live);
/* Refreshes the control page the agent reads (layout.h). */
void rdmem_session_publish_ctrl(struct rdmem_session *s, uint64_t now);

#endif
