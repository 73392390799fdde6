/* tcp_actor.h - the agent's TCP actor: the fallback path to the server.
 *
 * One thread owns the TCP connection (io_uring, many calls pipelined on it),
 * reconnects with backoff when the server goes away, retries calls that
 * were in flight when the connection broke (a non-idempotent one carries its
 * call id, and the server answers a repeat from its dedup window), and
 * fails a call with -EHOSTUNREACH only when its deadline passes with no
 * server to send it to. Replies are received straight into the client's slot.
 */
#ifndef RDMEM_AGENT_TCP_ACTOR_H
#define RDMEM_AGENT_TCP_ACTOR_H

#include <stdint.h>

#include "agent/call.h"
#include "agent/frontdoor.h"

struct rdmem_tcp_actor;
struct rdmem_tls_ctx;

struct rdmem_tcp_actor_config {
	const char *host;
	const char *name; /* the server's "host:port" (RDMA port), told to unreachable calls */
	uint16_t port;
	uint32_t clients, slots; /* front-door geometry: one TCP call per client slot */
	int connect_timeout_ms;
	int busy_poll;
	struct rdmem_auth *auth;   /* --secret-file: prove it first on every connection */
	struct rdmem_tls_ctx *tls; /* --tls-ca: TLS 1.3 on every connection (tcp/tls.h) */
};

struct rdmem_tcp_actor_stats {
	uint64_t calls, ok, failed, retried, unreachable, timeouts, connects, disconnects;
	uint64_t bytes_out, bytes_in, mac_failures;
	uint64_t tls_handshakes, tls_handshake_failures, tls_record_failures, timeouts_held;
	uint32_t connected, inflight, waiting;
	uint32_t sim_reply_loss; /* fault injection: TCP replies left to drop */
};

int rdmem_tcp_actor_start(const struct rdmem_tcp_actor_config *cfg, struct rdmem_frontdoor *fd,
			  struct rdmem_tcp_actor **out);
void rdmem_tcp_actor_stop(struct rdmem_tcp_actor *a);
/* Hands a call over; called by the session actor only (single producer). */
void rdmem_tcp_actor_submit(struct rdmem_tcp_actor *a, struct rdmem_agent_call *call);
void rdmem_tcp_actor_get_stats(struct rdmem_tcp_actor *a, struct rdmem_tcp_actor_stats *out);
/* Fault injection: the next n TCP replies are dropped as if the connection
 * broke after the server ran the call; the calls are sent again on a new one. */
void rdmem_tcp_actor_simulate_reply_loss(struct rdmem_tcp_actor *a, uint32_t n);
/* The agent's identity for exactly-once calls; lives as long as the actor. */
struct rdmem_agent_ident *rdmem_tcp_actor_ident(struct rdmem_tcp_actor *a);
/* Per op and latency of the calls TCP finished, for /metrics (relaxed atomics). */
struct rdmem_call_metrics *rdmem_tcp_actor_call_metrics(struct rdmem_tcp_actor *a);

#endif
