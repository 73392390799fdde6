/* server.h - rdmem-server as a whole: the service and the listeners that
 * feed it, started and stopped in order. main() parses options into a
 * config and calls these; each listener (TCP now, RDMA sessions next) is one
 * start and one stop step here.
 */
#ifndef RDMEM_SERVER_SERVER_H
#define RDMEM_SERVER_SERVER_H

#include <stdint.h>

#include "common/metrics_http.h"
#include "server/dedup.h"
#include "server/listener.h"
#include "server/service.h"
#include "server/session.h"
#include "server/tcp_loop.h"
#include "tcp/tls.h"

struct rdmem_server_config {
	const char *bind_addr;
	uint16_t port;	   /* RDMA listener */
	uint16_t tcp_port; /* 0: any free port (the ready line names it) */
	/* --tcp-max-conns, --tcp-auth-ms, ...: 0 takes tcp_loop.h's defaults */
	struct rdmem_tcp_server_config tcp;
	int no_tcp;
	int no_rdma; /* --fabric none */
	struct rdmem_rdma_config rdma;
	struct rdmem_service_config svc;
	uint16_t metrics_port;	    /* 0: no /metrics endpoint */
	const char *metrics_bind;   /* NULL: loopback */
	const char *secret_file;    /* --secret-file: peers must prove it */
	struct rdmem_tls_files tls; /* --tls-cert, --tls-key, --tls-ca: TLS on TCP */
	/* Exactly-once: --dedup-window/-agents/-idle; window 0: the defaults. */
	struct rdmem_dedup_config dedup;
	int no_dedup; /* --no-dedup */
};

struct rdmem_server {
	struct rdmem_server_config cfg;
	struct rdmem_service *svc;
	struct rdmem_tcp_server *tcp;
	struct rdmem_listener_thread *rdma;
	struct rdmem_metrics_http *metrics;
	struct rdmem_auth *auth;
	struct rdmem_tls_ctx *tls;
	int sigfd; /* SIGINT/SIGTERM, blocked and read here: no work in handlers */
};

/* Blocks the stop signals (call before any thread exists), builds and starts everything. */
int rdmem_server_start(struct rdmem_server *srv, const struct rdmem_server_config *cfg);
/* Runs periodic work until SIGINT or SIGTERM arrives. */
int rdmem_server_run(struct rdmem_server *srv);
/* Stops listeners (in-flight calls finish), then the service (temp files go). */
void rdmem_server_stop(struct rdmem_server *srv);

#endif
