/* session.h - one agent's RDMA session on the server: its lease of the
 * message pool (request slots, object pool, control page), its
 * registrations on its own connection, and the steps a worker thread drives
 * it with: poll (reap completions, serve a batch through the shared
 * dispatch, answer), arm before sleeping, close.
 */
#ifndef RDMEM_SERVER_SESSION_H
#define RDMEM_SERVER_SESSION_H

#include <stdatomic.h>
#include <stdint.h>

#include "rdmem/fabric.h"
#include "rdmem/layout.h"
#include "server/pool.h"
#include "server/service.h"

/* Receives reposted at a time; a session keeps ring_slots + this many posted. */
#define RDMEM_SESSION_RECV_BATCH 32
/* Send WRs a ring slot's reply may have outstanding, and spare room; the
 * listener asks the fabric for this much and a session serves only as many
 * slots as the granted queues hold. A reply is one WR since layout 4 (its
 * staged descriptor and payload are one gather entry); 2 stays the bound of
 * fabric/dataplane.h for a message. */
#define RDMEM_SESSION_WRS_PER_SLOT 2u
#define RDMEM_SESSION_WR_SPARE	   64u

struct rdmem_rdma_config {
	enum rdmem_fab_kind fabric;
	const char *addr;
	uint16_t port;
	uint32_t ring_slots;	/* request slots per session: its calls in flight */
	uint32_t slot_bytes;	/* payload bytes per request slot */
	uint32_t stage_bytes;	/* largest EAGER reply; bigger ones go LAZY */
	uint32_t objpool_slabs; /* 64 KiB objects per session */
	uint32_t object_ttl_ms; /* unreclaimed objects are freed after this */
	uint32_t batch_budget;	/* READY slots served per round */
	uint32_t max_value;
	uint32_t max_sessions;
	int shared_pool;	  /* one message pool leased to sessions (else one each) */
	uint32_t workers;	  /* threads serving sessions */
	uint32_t group_threshold; /* above this many sessions a worker groups them */
	uint32_t group_size;	  /* sessions served together in a time slice */
	uint32_t slice_us;	  /* a group's time slice */
	uint32_t quiet_lane;	  /* sessions in a worker's quiet lane (server/lane.h) */
	int busy_poll;
	int tcp_up;		 /* the TCP fallback listener runs (not --no-tcp) */
	uint32_t max_per_addr;	 /* --max-sessions-per-addr */
	uint32_t grace_ms;	 /* --session-grace-ms: a new session's time to send */
	struct rdmem_auth *auth; /* --secret-file; NULL: no authentication */
};

struct rdmem_session;

/* Leases sized by the server's options, leases of them: one per session. */
struct rdmem_pool_config rdmem_session_pool_config(const struct rdmem_rdma_config *cfg,
						   uint32_t leases);

/*
 * Builds the session for a connect request whose private data was hello:
 * takes a lease (of pool, or of a pool of its own when pool is NULL),
 * registers it, accepts. On failure the request is rejected and conn freed.
 */
int rdmem_session_open(const struct rdmem_rdma_config *cfg, struct rdmem_service *svc,
		       struct rdmem_pool *pool, struct rdmem_conn *conn,
		       const struct rdmem_xchg_hello *hello, uint32_t id,
		       struct rdmem_session **out);
/*
 * Hostile peers: what the listener knows of an open session, an entry of
 * its own table (server/share.c), so it may pick a session to close without
 * touching one a worker owns. The session ends (-ETIMEDOUT from tick) when
 * *reclaim_before_ns (set by the listener when it is full) or
 * *addr_reclaim_before_ns (set when its address is at its limit) passes its
 * start and its peer never sent a request, or when the listener sets evict.
 * (server/share.h says who gets a place when the server is full.)
 */
struct rdmem_session_guard {
	atomic_uint *addr_n; /* sessions of the peer's address: closing decrements it */
	const atomic_uint_fast64_t *reclaim_before_ns;
	const atomic_uint_fast64_t *addr_reclaim_before_ns; /* valid while it is open */
	/* The worker's: the last sweep that saw new requests (opened_ns
	 * before any); the listener closes the idlest. */
	atomic_uint_fast64_t heard_ns;
	atomic_uint sent;   /* the worker's: the peer sent a request */
	atomic_uint evict;  /* the listener's: its place goes to another address */
	atomic_uint used;   /* an open session holds the entry; its close clears it */
	uint64_t opened_ns; /* the listener's, before the hand-over */
};
/* addr: the peer's address key (netaddr.h), for exactly-once's shares */
void rdmem_session_set_guard(struct rdmem_session *s, struct rdmem_session_guard *g,
			     const char *addr);
/* Disconnects and gives everything back, the lease included. */
void rdmem_session_close(struct rdmem_session *s);

/* Validates the agent's connect private data (and its proof, with auth);
 * returns 0 or a status, with why (for the reject private data) saying what. */
/* Refuses a connect request with r (host order; converted for the wire here). */
void rdmem_session_reject(struct rdmem_conn *c, struct rdmem_xchg_reject *r);

int rdmem_session_check_hello(const struct rdmem_xchg_hello *h, size_t len, struct rdmem_auth *auth,
			      char *why, size_t why_len);

/*
 * One round: reap completions, serve up to budget READY requests, keep the
 * control page and receives current. now: the worker's clock for the round
 * (one read per round, not two per session: at 1,024 sessions on this VM
 * clock reads were 22 % of a worker's perf samples, 14 % after; the rest
 * time each request). Returns the requests served, or
 * -errno once the session is over (the agent left, the connection broke).
 */
int rdmem_session_poll(struct rdmem_session *s, uint32_t budget, uint64_t now);
/* Reaps completions only (a worker looking for sessions with work). */
int rdmem_session_peek(struct rdmem_session *s);
/* Upkeep of a session the worker may not be polling (another group's): reaps
 * completions, refreshes the control page, runs the object TTL scan (its
 * connection's events are the worker's: rdmem_worker_check). now: the
 * worker's clock. Returns -errno once the session is over. */
int rdmem_session_tick(struct rdmem_session *s, uint64_t now);
/* Requests received and not served yet. */
uint32_t rdmem_session_backlog(const struct rdmem_session *s);
/* When the session next has work only a timer brings (its objects' TTL
 * scan), in rdmem_now_ns() time, or 0 for never: a worker about to sleep on
 * the session's fds wakes then. */
uint64_t rdmem_session_timed(const struct rdmem_session *s);
/*
 * Before the worker sleeps: refresh the control page and ask for a
 * completion event. Returns > 0 when work arrived meanwhile (do not sleep),
 * 0 to sleep, -errno when the session is over.
 */
int rdmem_session_arm(struct rdmem_session *s);
/* After the worker woke on one of the session's fds. */
int rdmem_session_woke(struct rdmem_session *s, int comp_ready, int event_ready);
int rdmem_session_comp_fd(struct rdmem_session *s);
int rdmem_session_event_fd(struct rdmem_session *s);
/*
 * Connection grouping's turn word (layout.h), written to the agent's region
 * at once: hold_us > 0 tells it to hold new calls that long (its group's
 * slice is ending), unless a hold we told is still running; 0 tells it its
 * turn has come, if a hold we told may still be running (else nothing is
 * written). A write that cannot be posted ends the session at its next
 * poll, peek or tick.
 */
void rdmem_session_set_yield(struct rdmem_session *s, uint32_t hold_us, uint64_t now);
/* True while the agent may be holding its calls on a turn word we wrote
 * (its hold has not run out and no turn was given since). */
int rdmem_session_holding(const struct rdmem_session *s, uint64_t now);
/* Slice `slice` starts with the session in its group (the control page's
 * group equals active_group while it is). */
void rdmem_session_set_group(struct rdmem_session *s, uint64_t slice);
/* The last slice whose group held the session (0: none yet). */
uint64_t rdmem_session_group(const struct rdmem_session *s);
/* Where the control page's active_group comes from: the worker's slice now,
 * which the worker thread alone writes and reads (group.h). */
void rdmem_session_follow_slices(struct rdmem_session *s, const uint64_t *serving);

struct rdmem_session_info {
	uint32_t id, lease, slots, backlog, objects_live, group;
	uint64_t completed, registered_bytes;
	uint64_t doorbells; /* reply posts: one per poll under load */
	uint64_t wqes;	    /* reply WRs built for those posts: one a reply */
	uint64_t turns;	    /* turn words written (holds and turns) */
	uint64_t wakes;	    /* of them, turns with an immediate that wakes the agent */
};
void rdmem_session_get_info(const struct rdmem_session *s, struct rdmem_session_info *out);

/*
 * Checks a request taken from ring slot `slot` (< slots) beyond
 * rdmem_desc_check(): its payload starts in that slot, 64 bytes in, and ends
 * inside the region of slots x rdmem_slot_stride(slot_bytes). Returns 0 or a
 * status.
 */
uint16_t rdmem_session_check_req(const struct rdmem_desc *req, uint32_t slot, uint32_t slots,
				 uint32_t slot_bytes, uint32_t max_value);

#endif
