/* session.h - one agent's RDMA session on the server: its registered
 * regions, object pool, control page and the worker thread that serves its
 * request ring through the shared dispatch.
 */
#ifndef RDMEM_SERVER_SESSION_H
#define RDMEM_SERVER_SESSION_H

#include <stdint.h>

#include "rdmem/fabric.h"
#include "rdmem/layout.h"
#include "server/service.h"

/* Send WRs a ring slot's reply may have outstanding (payload, descriptor,
 * state), and spare room; the listener asks the fabric for this much and a
 * session serves only as many slots as the granted queues hold. */
#define RDMEM_SESSION_WRS_PER_SLOT 3u
#define RDMEM_SESSION_WR_SPARE	   64u

struct rdmem_rdma_config {
	enum rdmem_fab_kind fabric;
	const char *addr;
	uint16_t port;
	uint32_t ring_slots;	/* request ring slots per session */
	uint32_t slot_bytes;	/* payload bytes per request slot */
	uint32_t objpool_slabs; /* 64 KiB objects per session */
	uint32_t object_ttl_ms; /* unreclaimed objects are freed after this */
	uint32_t batch_budget;	/* READY slots served per round */
	uint32_t max_value;
	uint32_t max_sessions;
	int busy_poll;
};

struct rdmem_session;

/*
 * Builds the session for a connect request whose private data was hello:
 * allocates and registers its regions, accepts, and starts its worker.
 * On failure the request is rejected and conn freed.
 */
int rdmem_session_open(const struct rdmem_rdma_config *cfg, struct rdmem_service *svc,
		       struct rdmem_conn *conn, const struct rdmem_xchg_hello *hello, uint32_t id,
		       struct rdmem_session **out);
/* True once the worker has ended (the agent left or the connection broke). */
int rdmem_session_finished(struct rdmem_session *s);
/* Stops the worker if it runs, disconnects, and frees everything. */
void rdmem_session_close(struct rdmem_session *s);

/* Validates the agent's connect private data; returns 0 or a status. */
int rdmem_session_check_hello(const struct rdmem_xchg_hello *h, size_t len);

#endif
