/* service.h - the server's one dispatch: every path (TCP, EAGER, LAZY, BULK)
 * hands a validated call here and gets the same ops, state and reply bytes.
 *
 * The path owns where reply bytes live. The dispatcher asks its reply sink
 * for exactly the bytes it needs once it knows the length, and writes them in
 * place: into an RDMA reply slot, an object-pool object (LAZY) or a TCP send
 * buffer. So a 1 MiB GET is copied once, from the KV store to where the
 * client will read it.
 */
#ifndef RDMEM_SERVER_SERVICE_H
#define RDMEM_SERVER_SERVICE_H

#include <stddef.h>
#include <stdint.h>

#include "rdmem/netaddr.h"
#include "rdmem/wire.h"

struct rdmem_service;

struct rdmem_service_config {
	uint32_t max_value;	    /* --max-value: largest value stored (bytes) */
	unsigned kv_shards;	    /* power of two */
	const char *image_dir;	    /* --image-dir; NULL: image upload refused */
	const char *image_hook;	    /* --image-hook CMD, run with the final path */
	uint64_t max_image;	    /* largest image accepted (bytes) */
	uint32_t upload_timeout_ms; /* an upload idle this long is abandoned */
	uint64_t kv_max_bytes;	    /* --kv-max-bytes; 0: half of this machine's memory */
	uint32_t hook_timeout_ms;   /* --image-hook-timeout; 0: the default */
};

/*
 * Per connection (RDMA session, TCP connection) state of the service, owned
 * by the path and zero-initialised: the agent identity RDMEM_OP_BIND bound.
 * Only the connection's own thread uses it. Release it when the connection ends.
 */
struct rdmem_dedup_agent;
struct rdmem_service_peer {
	struct rdmem_dedup_agent *agent;
	uint64_t agent_id;
	char addr[RDMEM_ADDR_GROUP_MAX]; /* the peer's address (netaddr.h); the transport's */
};

/* Where the reply payload goes. */
struct rdmem_reply_sink {
	/*
	 * Returns 0 and a buffer of len bytes, or a status: RDMEM_S_TOO_BIG when
	 * the path can never carry len bytes, RDMEM_S_BUSY when it cannot now.
	 * Called at most once per dispatch.
	 */
	int (*reserve)(struct rdmem_reply_sink *sink, uint32_t len, void **buf);
};

/*
 * key and val must be memory nobody else writes while the call runs, with
 * one exception: the value of an op for which rdmem_service_value_opaque()
 * is true may sit where the peer can rewrite it (an RDMA request slot),
 * since such an op reads it once, as opaque bytes. Every other op checks
 * bytes and reads them again (an MGET entry's offset, an image's name).
 */
struct rdmem_call {
	const struct rdmem_desc *req; /* passed rdmem_desc_check() */
	const uint8_t *key;	      /* req->key_len bytes */
	const uint8_t *val;	      /* req->val_len bytes */
	/*
	 * RECLAIM frees objects of the caller's session: the value is an array
	 * of struct rdmem_objref, each handed to reclaim(), which returns a
	 * status (RDMEM_S_STALE for a wrong generation). NULL on paths without
	 * an object pool (TCP): the refs are then counted and refused.
	 */
	int (*reclaim)(void *ctx, const struct rdmem_objref *ref);
	void *reclaim_ctx;
};

/* True when op reads its value once, as opaque bytes: PUT stores it, ECHO
 * returns it. A peer that rewrites such a value mid-call changes only what
 * its own call stores or gets back. */
static inline int rdmem_service_value_opaque(uint16_t op)
{
	return op == RDMEM_OP_KV_PUT || op == RDMEM_OP_ECHO;
}

int rdmem_service_create(const struct rdmem_service_config *cfg, struct rdmem_service **out);
void rdmem_service_destroy(struct rdmem_service *svc);

/*
 * Runs one call. Fills rep->status, rep->flags, rep->val_len and rep->args;
 * the caller sets the transport fields (state, seq, req_id, path) and sends.
 * Never fails: every problem becomes a status in rep.
 */
void rdmem_service_dispatch(struct rdmem_service *svc, const struct rdmem_call *call,
			    struct rdmem_reply_sink *sink, struct rdmem_desc *rep);
/* The same for a call of the connection peer: BIND binds it, and calls with
 * an id run once per its agent (peer NULL: as rdmem_service_dispatch). t0 is
 * when the caller started the call (rdmem_now_ns()), for the latency
 * histogram; returns when it ended, so the caller reads the clock once. */
uint64_t rdmem_service_dispatch_peer(struct rdmem_service *svc, const struct rdmem_call *call,
				     struct rdmem_service_peer *peer, struct rdmem_reply_sink *sink,
				     struct rdmem_desc *rep, uint64_t t0);

/*
 * Exactly-once calls (server/dedup.h): the service starts with the default
 * window; this replaces it (cfg NULL: none, retries may run twice). Call
 * before any path serves. Returns 0 or -EINVAL for a config out of range.
 */
struct rdmem_dedup_config;
int rdmem_service_set_dedup(struct rdmem_service *svc, const struct rdmem_dedup_config *cfg);

/* The connection ended: lets its agent's dedup window expire once idle. */
void rdmem_service_peer_release(struct rdmem_service *svc, struct rdmem_service_peer *peer);

/*
 * Timed work: abandoned uploads, finished hooks, idle dedup windows. Returns
 * when it next has some (rdmem_now_ns() clock; UINT64_MAX: none until
 * something new starts, which makes rdmem_service_wake_fd() readable). The
 * caller sleeps until then or until the fd is readable, reads the fd, and
 * calls again: an idle server does not wake.
 */
uint64_t rdmem_service_tick(struct rdmem_service *svc);
#define RDMEM_SERVICE_HOOK_POLL_NS 100000000ull /* while a hook runs */
int rdmem_service_wake_fd(const struct rdmem_service *svc);

/* Counts one bad input that never reached dispatch (a frame, a descriptor). */
void rdmem_service_count_bad_input(struct rdmem_service *svc);
/* Counts one peer refused for not proving the shared secret. */
void rdmem_service_count_auth_failure(struct rdmem_service *svc);
/* A TCP frame after AUTH failed its tag (tcp/frame_mac.h): tampered, replayed, lost. */
void rdmem_service_count_mac_failure(struct rdmem_service *svc);

/* What the listeners did to a hostile (or just slow) network peer: each a
 * counter "net.<name>" (see stats.c), the full number behind a log line
 * that is rate-limited. */
enum rdmem_net_ctr {
	RDMEM_NET_TCP_REFUSED_FULL,   /* --tcp-max-conns reached, nothing to evict */
	RDMEM_NET_TCP_REFUSED_ADDR,   /* --tcp-max-per-addr reached */
	RDMEM_NET_TCP_EVICTED,	      /* unproven connection closed to admit a newer one */
	RDMEM_NET_TCP_DEADLINE,	      /* did not prove itself within --tcp-auth-ms */
	RDMEM_NET_TCP_IDLE,	      /* idle past --tcp-idle-ms */
	RDMEM_NET_TCP_PARTIAL_LIMIT,  /* past --tcp-max-partial-per-addr mid-frame */
	RDMEM_NET_TCP_TURNS_ENDED,    /* a connection's turn ended with frames left */
	RDMEM_NET_TCP_OUT_PAUSED,     /* reading paused at TCP_OUT_LOW: --tcp-out-budget */
	RDMEM_NET_RDMA_REFUSED_ADDR,  /* --max-sessions-per-addr reached */
	RDMEM_NET_RDMA_RECLAIMED,     /* sessions that never sent, closed for a new one */
	RDMEM_NET_RDMA_EVICTED,	      /* closed for a peer of another address (fair share) */
	RDMEM_NET_RDMA_PARKED,	      /* connect requests kept until a place made freed */
	RDMEM_NET_RDMA_PARK_TIMEOUTS, /* of them, refused: no place within 1 s */
	RDMEM_NET_RDMA_BAD_REQUESTS,  /* connect requests refused for what the peer sent */
	/* With --tls-cert: counters "tls.<name>". */
	RDMEM_NET_TLS_HANDSHAKES,	  /* TLS sessions established */
	RDMEM_NET_TLS_HANDSHAKE_FAILURES, /* refused, broken or past --tcp-auth-ms */
	RDMEM_NET_TLS_RECORD_FAILURES,	  /* a record failed to decrypt: connection closed */
	RDMEM_NET__COUNT
};
void rdmem_service_count_net(struct rdmem_service *svc, enum rdmem_net_ctr what);
/* The TCP path's reply buffers, all connections (bytes allocated): a gauge. */
void rdmem_service_set_tcp_held(struct rdmem_service *svc, uint64_t out_bytes, uint64_t in_bytes);

/* The RDMA side adds its own section to STATS. Safe while calls are served;
 * fn NULL clears it, and returns only once no STATS is inside the old hook. */
void rdmem_service_set_stats_hook(struct rdmem_service *svc,
				  int (*fn)(void *ctx, int json, char *buf, size_t cap), void *ctx);

/* What one RDMA session holds of the device, for STATS resources.* (summed over
 * sessions: the resources that grow with them, the scaling curve's columns). */
struct rdmem_rdma_usage {
	int64_t qps, cqs, mrs, registered_bytes, recv_wqes;
};

/* A session opened (delta 1) or closed (-1), holding u. */
void rdmem_service_session_delta(struct rdmem_service *svc, int delta,
				 const struct rdmem_rdma_usage *u);

/* A session's object pool changed by these amounts (bytes used, size, live objects). */
void rdmem_service_pool_delta(struct rdmem_service *svc, int64_t used, int64_t bytes, int64_t live);

/* The Prometheus page (an rdmem_metrics_render_fn; ctx is the service). */
int rdmem_service_render_metrics(void *svc, char *buf, size_t cap);

#endif
