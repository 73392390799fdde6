/* session.h - the agent's session actor: one per server. It owns the RDMA
 * link (through a connector thread that dials and redials), the path
 * selector's view of the world, and the calls on the RDMA paths; calls the
 * selector sends to TCP go to the TCP actor. Front-door calls arrive via
 * rdmem_agent_session_submit(), the front door's submit callback.
 */
#ifndef RDMEM_AGENT_SESSION_H
#define RDMEM_AGENT_SESSION_H

#include <stdint.h>

#include "agent/call.h"
#include "agent/frontdoor.h"
#include "agent/path.h"
#include "agent/tcp_actor.h"
#include "rdmem/fabric.h"

enum rdmem_pressure { RDMEM_PRESSURE_NONE, RDMEM_PRESSURE_RING, RDMEM_PRESSURE_OBJPOOL };

/* Fault injection, set by flags at start or by `rdmem agent-ctl` at run time. */
struct rdmem_simulate {
	int rdma_down;	      /* pretend RDMA is unavailable */
	uint32_t op_fail;     /* fail the next N RDMA operations */
	int pressure;	      /* enum rdmem_pressure: pretend the server is full */
	uint32_t rdma_errors; /* add N to the RDMA error count once */
	uint32_t reply_loss;  /* treat the next N RDMA replies as failed completions: the
			       * server ran the call, the agent retries it (AUTO: on TCP) */
	uint32_t link_break;  /* the next N call posts fail as on a QP in error: the link
			       * goes and is dialled again (AUTO: the call on TCP) */
};

struct rdmem_agent_config {
	const char *server;
	const char *name;  /* "host:port", what a call that cannot reach it is told */
	uint16_t port;	   /* RDMA */
	uint16_t tcp_port; /* TCP fallback */
	int fabric;	   /* RDMEM_FAB_VERBS / RDMEM_FAB_SHM, or 0 for TCP only */
	struct rdmem_path_config path;
	uint32_t ring_slots;
	uint32_t resp_bytes;
	uint32_t max_reads;	 /* cap on RDMA READs in flight per link; 0: as agreed */
	uint32_t stall_ms;	 /* --rdma-stall-ms: liveness deadline; 0: the default */
	uint32_t clients, slots; /* front-door geometry */
	uint32_t max_value;	 /* front door's --max-value: the largest value a call carries */
	int connect_timeout_ms;
	int busy_poll;
	const char *source;	 /* --source: local address to dial RDMA from */
	struct rdmem_auth *auth; /* --secret-file; NULL: none */
	struct rdmem_simulate sim;
};

struct rdmem_agent_session;

int rdmem_agent_session_start(const struct rdmem_agent_config *cfg, struct rdmem_frontdoor *fd,
			      struct rdmem_tcp_actor *tcp, struct rdmem_agent_session **out);
void rdmem_agent_session_stop(struct rdmem_agent_session *s);
/* Hands a call to the session: the front-door actor's thread only (one
 * producer). It takes the call on its own thread when the session's token
 * is free, and then holds the token until rdmem_agent_session_batch_end(),
 * which it must call before it sleeps or leaves the router's table. */
void rdmem_agent_session_submit(void *ctx, struct rdmem_agent_call *call);
/* The end of the front door's batch: posts what it built, gives the token
 * back, and wakes an actor asleep that has new work (front-door thread). */
void rdmem_agent_session_batch_end(struct rdmem_agent_session *s);
/* The same from any thread (a split call's part sent again). */
void rdmem_agent_session_submit_any(struct rdmem_agent_session *s, struct rdmem_agent_call *call);
/* A front-door client entry was reclaimed (front-door actor thread): the
 * session lets go of its area's registration. The router calls it for
 * every session (rdmem_frontdoor_on_release). */
void rdmem_agent_session_released(void *ctx, uint32_t client);
/* Wakes the session's actor for a round (any thread; it looks at what
 * changed, e.g. the pinned-memory budget's shed generation). */
void rdmem_agent_session_wake(struct rdmem_agent_session *s);

struct rdmem_agent_counters;
struct rdmem_call_metrics;
struct rdmem_agent_gauges;
/* The actor's counters for the /metrics thread: relaxed atomics, one writer. */
void rdmem_agent_session_metrics(struct rdmem_agent_session *s, struct rdmem_agent_counters **cnt,
				 struct rdmem_call_metrics **calls,
				 struct rdmem_agent_gauges **gauges);

#endif
