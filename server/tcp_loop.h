/* tcp_loop.h - the TCP fallback path of rdmem-server: one thread, one
 * io_uring, many connections, pipelined calls, all through the same dispatch
 * as the RDMA paths.
 */
#ifndef RDMEM_SERVER_TCP_LOOP_H
#define RDMEM_SERVER_TCP_LOOP_H

#include <stdint.h>

#include "server/service.h"

struct rdmem_tcp_server;
struct rdmem_tls_ctx;

struct rdmem_tcp_server_config {
	const char *addr;	   /* numeric IPv4/IPv6 address to bind */
	uint16_t port;		   /* 0: the kernel picks one (see rdmem_tcp_server_port) */
	uint32_t max_value;	   /* the service's cap: frames beyond it are refused */
	unsigned max_conns;	   /* 0: RDMEM_TCP_DEFAULT_MAX_CONNS */
	struct rdmem_auth *auth;   /* --secret-file: a connection's first frame must be AUTH */
	struct rdmem_tls_ctx *tls; /* --tls-cert: every connection is TLS 1.3 (tcp/tls.h) */
	/*
	 * Hostile peers (0: the defaults below). A connection is "proven" once
	 * it authenticated (with auth) or sent one valid frame (without); until
	 * then it must get there within auth_ms, and it may be closed to admit
	 * a newer one when unproven connections fill their share. reserved_pct
	 * of max_conns is kept for proven connections.
	 */
	unsigned auth_ms;	       /* --tcp-auth-ms */
	unsigned idle_ms;	       /* --tcp-idle-ms: no bytes either way this long: closed */
	unsigned max_per_addr;	       /* --tcp-max-per-addr */
	unsigned max_partial_per_addr; /* --tcp-max-partial-per-addr: connections mid-frame */
	unsigned reserved_pct;	       /* --tcp-reserved-pct; 0 is a valid value: set_reserved */
	uint64_t out_budget;	       /* --tcp-out-budget: reply buffers of all connections */
	int set_reserved;
};

#define RDMEM_TCP_DEFAULT_MAX_CONNS	   1024u
#define RDMEM_TCP_DEFAULT_AUTH_MS	   3000u
#define RDMEM_TCP_DEFAULT_IDLE_MS	   300000u
#define RDMEM_TCP_DEFAULT_MAX_PER_ADDR	   64u
#define RDMEM_TCP_DEFAULT_PARTIAL_PER_ADDR 8u
#define RDMEM_TCP_DEFAULT_RESERVED_PCT	   10u
#define RDMEM_TCP_DEFAULT_OUT_BUDGET	   (64ull << 20)

/* Binds and listens (so a busy port fails here, before any thread starts). */
int rdmem_tcp_server_create(struct rdmem_service *svc, const struct rdmem_tcp_server_config *cfg,
			    struct rdmem_tcp_server **out);
uint16_t rdmem_tcp_server_port(const struct rdmem_tcp_server *s);
/* Starts the loop thread. */
int rdmem_tcp_server_start(struct rdmem_tcp_server *s);
/*
 * Stops accepting, answers every request already received, flushes replies
 * (for at most RDMEM_TCP_DRAIN_MS), closes all connections, joins the thread.
 */
void rdmem_tcp_server_stop(struct rdmem_tcp_server *s);
void rdmem_tcp_server_destroy(struct rdmem_tcp_server *s);

#define RDMEM_TCP_DRAIN_MS 2000u

#endif
