/* metrics_http.h - the /metrics endpoint of rdmem-agent and rdmem-server.
 *
 * One thread, one listening TCP socket, a few connections at once, each
 * driven by poll() without blocking. It answers `GET /metrics` (and HEAD)
 * with the Prometheus text its callback renders; anything else gets 400,
 * 404 or 405, an oversized request 400, and a client that does not finish
 * its request (or read the answer) within the timeout is dropped. Every
 * answer closes the connection. Off unless a port is given; the default
 * bind address is loopback because the page is not authenticated.
 */
#ifndef RDMEM_FABRIC_METRICS_HTTP_H
#define RDMEM_FABRIC_METRICS_HTTP_H

#include <stddef.h>
#include <stdint.h>

#define RDMEM_METRICS_DEFAULT_BIND "127.0.0.1"
#define RDMEM_METRICS_REQ_MAX	   4096u /* request line and headers */
#define RDMEM_METRICS_TIMEOUT_MS   5000	 /* per connection, request to answer */
#define RDMEM_METRICS_MAX_CONNS	   8u
#define RDMEM_METRICS_BODY_MAX	   (16u << 20) /* the callback's largest answer */

/*
 * Renders the page into buf; returns its length, or -E2BIG when cap is too
 * small (it is called again with a bigger buffer), or another -errno (500).
 * Runs on the metrics thread: it may read only thread-safe state.
 */
typedef int (*rdmem_metrics_render_fn)(void *ctx, char *buf, size_t cap);

struct rdmem_metrics_http_config {
	const char *bind; /* numeric IPv4/IPv6 address; NULL: RDMEM_METRICS_DEFAULT_BIND */
	uint16_t port;	  /* 0: any free port (rdmem_metrics_http_port() tells which) */
	rdmem_metrics_render_fn render;
	void *ctx;
};

struct rdmem_metrics_http;

/* Binds, listens and starts the thread; 0 or -errno (logged). */
int rdmem_metrics_http_start(const struct rdmem_metrics_http_config *cfg,
			     struct rdmem_metrics_http **out);
uint16_t rdmem_metrics_http_port(const struct rdmem_metrics_http *m);
/* Stops the thread, closes every socket, frees; NULL is fine. */
void rdmem_metrics_http_stop(struct rdmem_metrics_http *m);

/* Validates a --metrics-bind argument: 0 when it is a numeric address. */
int rdmem_metrics_bind_ok(const char *addr);

#endif
