/* ucx_kv.h - the UCX comparison system's wire and setup, shared by
 * ucx_kv_server.c and ucx_kv_client.c: a GET/SET store over UCP active
 * messages, what a team would build on UCX instead of RDMemRPC.
 *
 * One request is one active message (id UKV_AM_REQUEST): header = struct
 * ukv_req (op, key length, call tag) followed by the key; data = the value
 * (SET) or nothing (GET). The server answers on the request's reply
 * endpoint with id UKV_AM_REPLY: header = struct ukv_reply (status, tag,
 * value length); data = the value (GET). UCX picks eager or rendezvous per
 * message size; both ends handle both. Host byte order: both ends run on
 * this host (bench only).
 *
 * Connecting: the client opens a TCP connection to the server's port, each
 * side writes its UCP worker address on it (4-byte length, then the bytes)
 * and makes an endpoint from the other's; the socket is then closed. That is
 * how a UCX user gets shared memory between processes of one host: UCX
 * 1.13's own client-server connection (ucp_listener) sets up only
 * transports with a network device, so it never picks shared memory (seen
 * with UCX_LOG_LEVEL=info: "am(tcp/lo)" whatever UCX_TLS says).
 * Shared memory has no peer-failure detection in UCX, so endpoints use
 * UCP_ERR_HANDLING_MODE_NONE (as ucx_perftest does); a client says BYE
 * (id UKV_AM_BYE, no reply) before it closes, and the server closes its
 * endpoint to it, so a long benchmark does not pile up endpoints.
 * Transports come from UCX_TLS, set by bench/systems.sh: "posix,self"
 * (shared memory) or "tcp,self" (loopback TCP).
 */
#ifndef RDMEM_BENCH_UCX_KV_H
#define RDMEM_BENCH_UCX_KV_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include "latency.h"

enum { UKV_AM_REQUEST = 1, UKV_AM_REPLY = 2, UKV_AM_BYE = 3 };
enum { UKV_GET = 1, UKV_SET = 2 };

#define UKV_KEY_MAX  64
#define UKV_ADDR_MAX 65536		     /* a worker address is a few hundred bytes */
#define UKV_WAIT_NS  (10ull * 1000000000ull) /* ukv_wait gives up after this */

struct ukv_req {
	uint32_t op;
	uint32_t key_len; /* key bytes after this header, at most UKV_KEY_MAX */
	uint64_t tag;	  /* the caller's call number, echoed in the reply */
};

struct ukv_reply {
	int32_t status; /* 0, or a negative errno (-ENOENT: no such key) */
	uint32_t pad;
	uint64_t tag;
	uint64_t value_len;
};

struct ukv_net {
	ucp_context_h ctx;
	ucp_worker_h worker;
};

/* A context and one single-threaded worker with active messages. */
static inline int ukv_net_open(struct ukv_net *n, const char *who)
{
	ucp_params_t p;
	ucp_worker_params_t wp;
	ucs_status_t s;

	memset(&p, 0, sizeof(p));
	p.field_mask = UCP_PARAM_FIELD_FEATURES;
	p.features = UCP_FEATURE_AM;
	s = ucp_init(&p, NULL, &n->ctx);
	if (s != UCS_OK) {
		fprintf(stderr, "%s: ucp_init: %s\n", who, ucs_status_string(s));
		return -1;
	}
	memset(&wp, 0, sizeof(wp));
	wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
	wp.thread_mode = UCS_THREAD_MODE_SINGLE;
	s = ucp_worker_create(n->ctx, &wp, &n->worker);
	if (s != UCS_OK) {
		fprintf(stderr, "%s: ucp_worker_create: %s\n", who, ucs_status_string(s));
		ucp_cleanup(n->ctx);
		return -1;
	}
	return 0;
}

static inline void ukv_net_close(struct ukv_net *n)
{
	ucp_worker_destroy(n->worker);
	ucp_cleanup(n->ctx);
}

static inline int ukv_set_handler(struct ukv_net *n, unsigned id, ucp_am_recv_callback_t cb,
				  void *arg, const char *who)
{
	ucp_am_handler_param_t hp;
	ucs_status_t s;

	memset(&hp, 0, sizeof(hp));
	hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
			UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
	hp.id = id;
	hp.cb = cb;
	hp.arg = arg;
	hp.flags = UCP_AM_FLAG_WHOLE_MSG;
	s = ucp_worker_set_am_recv_handler(n->worker, &hp);
	if (s != UCS_OK)
		fprintf(stderr, "%s: ucp_worker_set_am_recv_handler: %s\n", who,
			ucs_status_string(s));
	return s == UCS_OK ? 0 : -1;
}

static inline int ukv_io(int fd, void *buf, size_t len, int out)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t k = out ? write(fd, p, len) : read(fd, p, len);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		len -= (size_t)k;
	}
	return 0;
}

/* Swaps worker addresses over fd (ours first, both sides) and makes an
 * endpoint to the peer's. */
static inline int ukv_ep_by_exchange(struct ukv_net *n, int fd, ucp_ep_h *ep, const char *who)
{
	ucp_address_t *mine;
	size_t mine_len;
	uint32_t len;
	void *theirs = NULL;
	ucp_ep_params_t p;
	ucs_status_t s;
	int rc = -1;

	struct timeval tmo = { 5, 0 }; /* a peer that stops mid-exchange */

	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tmo, sizeof(tmo)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tmo, sizeof(tmo)) < 0) {
		fprintf(stderr, "%s: exchange socket timeouts: %s\n", who, strerror(errno));
		return -1;
	}
	s = ucp_worker_get_address(n->worker, &mine, &mine_len);
	if (s != UCS_OK) {
		fprintf(stderr, "%s: ucp_worker_get_address: %s\n", who, ucs_status_string(s));
		return -1;
	}
	len = (uint32_t)mine_len;
	if (ukv_io(fd, &len, sizeof(len), 1) < 0 || ukv_io(fd, mine, mine_len, 1) < 0 ||
	    ukv_io(fd, &len, sizeof(len), 0) < 0 || len == 0 || len > UKV_ADDR_MAX ||
	    !(theirs = malloc(len)) || ukv_io(fd, theirs, len, 0) < 0) {
		fprintf(stderr, "%s: address exchange failed: %s\n", who,
			errno ? strerror(errno) : "a bad address length");
		goto out;
	}
	memset(&p, 0, sizeof(p));
	p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
	p.address = theirs;
	p.err_mode = UCP_ERR_HANDLING_MODE_NONE;
	s = ucp_ep_create(n->worker, &p, ep);
	if (s != UCS_OK)
		fprintf(stderr, "%s: ucp_ep_create: %s\n", who, ucs_status_string(s));
	rc = s == UCS_OK ? 0 : -1;
out:
	free(theirs);
	ucp_worker_release_address(n->worker, mine);
	return rc;
}

/* Progresses the worker until request r (from a *_nbx call) is done, for
 * at most UKV_WAIT_NS (then UCS_ERR_TIMED_OUT; UCX frees r when it ends). */
static inline ucs_status_t ukv_wait(struct ukv_net *n, ucs_status_ptr_t r)
{
	uint64_t until = lat_now_ns() + UKV_WAIT_NS;
	ucs_status_t s;

	if (r == NULL)
		return UCS_OK;
	if (UCS_PTR_IS_ERR(r))
		return UCS_PTR_STATUS(r);
	while ((s = ucp_request_check_status(r)) == UCS_INPROGRESS && lat_now_ns() < until)
		ucp_worker_progress(n->worker);
	ucp_request_free(r);
	return s == UCS_INPROGRESS ? UCS_ERR_TIMED_OUT : s;
}

#endif
