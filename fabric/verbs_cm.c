/* verbs_cm.c - the verbs fabric backend's connection side: librdmacm for
 * connection management, libibverbs for PD, CQ and RC QP setup and teardown.
 * Registrations and one-sided WRITE/READ are in verbs_dp.c.
 *
 * Per connection: its own CM event channel (an accepted cm_id is migrated off
 * the listener's channel), PD, completion channel, one CQ, one RC QP and its
 * registrations. Only standard verbs; nothing vendor-specific.
 *
 * Send queue accounting. Every send WR carries the backend's post sequence
 * number as its wr_id; a shadow ring keeps the caller's wr_id and op. RC
 * completes a send queue in order, so a signalled completion retires every
 * WR up to it. The backend signals at least every signal_every WRs itself
 * (those completions are hidden from poll), so at most signal_every - 1 WRs
 * are ever waiting with no completion to come; the QP's send queue is
 * max_send_wr + signal_every deep, so those never block a post of up to
 * max_send_wr WRs, and one slot stays free for the drain marker of close.
 * The CQ holds the send queue plus the receive queue: it cannot overflow.
 *
 * Private data travels in a 2-byte frame {magic, length} so the peer gets
 * exactly what was sent (IB CM pads it to a fixed size) and foreign peers are
 * refused. Zero fields of struct rdmem_fab_attr take the defaults below.
 *
 * Threads: a conn belongs to one thread at a time (the session actor); the
 * backend keeps no shared state, so it needs no locks or atomics.
 */
#include "fabric/verbs.h"
#include "rdmem/util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int rdmem_fab_verbs_available(void)
{
	struct ibv_device **list;
	int n = 0;

	list = ibv_get_device_list(&n);
	if (!list)
		return 0;
	ibv_free_device_list(list);
	return n > 0;
}

/* ---- small helpers ------------------------------------------------------ */

static int rdmem_verbs_nonblock(int fd, const char *what)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		int e = errno;

		rdmem_err_limited("verbs: making the %s fd non-blocking: %s", what, strerror(e));
		return -e;
	}
	return 0;
}

static void rdmem_verbs_addr_str(const struct sockaddr *sa, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;

	if (sa && sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
		port = ntohs(in->sin_port);
		snprintf(buf, len, "%s:%u", ip, port);
	} else if (sa && sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;

		inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
		port = ntohs(in6->sin6_port);
		snprintf(buf, len, "[%s]:%u", ip, port);
	} else {
		snprintf(buf, len, "?");
	}
}

static int rdmem_verbs_lookup(const char *host, uint16_t port, int passive, struct addrinfo **res)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	char svc[8];
	int rc;

	hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
	snprintf(svc, sizeof(svc), "%u", port);
	rc = getaddrinfo(host, svc, &hints, res);
	if (rc) {
		rdmem_err_limited("verbs: cannot resolve address %s: %s", host ? host : "*",
				  gai_strerror(rc));
		return -EADDRNOTAVAIL;
	}
	return 0;
}

static int rdmem_verbs_channel(struct rdma_event_channel **out)
{
	*out = rdma_create_event_channel();
	if (!*out) {
		int e = errno;

		rdmem_err_limited(
		    "verbs: rdma_create_event_channel: %s%s", strerror(e),
		    e == ENODEV || e == ENOENT
			? " (no RDMA device or rdma_cm on this host; scripts/rxe-vm.sh "
			  "runs Soft-RoCE in a VM)"
			: "");
		return -e;
	}
	return rdmem_verbs_nonblock((*out)->fd, "CM event channel");
}

/* Events are acked as soon as read: rdma_migrate_id and rdma_destroy_id wait
 * for every event of their id to be acked. */
static void rdmem_verbs_ack_event(struct rdma_cm_event *ev)
{
	if (rdma_ack_cm_event(ev))
		rdmem_err_limited("verbs: rdma_ack_cm_event: %s", strerror(errno));
}

/* Waits up to timeout_ms for the next event on ch (its fd is non-blocking). */
static int rdmem_verbs_next_event(struct rdma_event_channel *ch, int timeout_ms,
				  struct rdma_cm_event **ev)
{
	uint64_t deadline = rdmem_now_ns() + (uint64_t)timeout_ms * 1000000ull;

	for (;;) {
		struct pollfd p = { .fd = ch->fd, .events = POLLIN };
		uint64_t now;

		if (rdma_get_cm_event(ch, ev) == 0)
			return 0;
		if (errno != EAGAIN && errno != EWOULDBLOCK) {
			int e = errno;

			rdmem_err_limited("verbs: rdma_get_cm_event: %s", strerror(e));
			return -e;
		}
		now = rdmem_now_ns();
		if (now >= deadline)
			return -ETIMEDOUT;
		if (poll(&p, 1, (int)((deadline - now) / 1000000ull) + 1) < 0 && errno != EINTR) {
			int e = errno;

			rdmem_err_limited("verbs: poll on CM channel: %s", strerror(e));
			return -e;
		}
	}
}

/* ---- private data frame ------------------------------------------------- */

static int rdmem_verbs_frame(uint8_t *buf, const void *priv, size_t len, size_t max,
			     const char *what, const char *peer)
{
	if (len > max) {
		rdmem_err_limited("verbs: %s private data for %s is %zu bytes; RC allows %zu", what,
				  peer, len, max);
		return -EMSGSIZE;
	}
	if (len && !priv)
		return -EINVAL;
	buf[0] = RDMEM_VERBS_PRIV_MAGIC;
	buf[1] = (uint8_t)len;
	if (len)
		memcpy(buf + RDMEM_VERBS_PRIV_HDR, priv, len);
	return (int)(len + RDMEM_VERBS_PRIV_HDR);
}

/* Checks the peer's frame; copies its payload into out (*out_len: in, room). */
static int rdmem_verbs_unframe(const void *data, size_t data_len, void *out, size_t *out_len,
			       const char *what, const char *peer)
{
	const uint8_t *d = data;
	size_t room = out_len ? *out_len : 0;

	if (!d || data_len < RDMEM_VERBS_PRIV_HDR || d[0] != RDMEM_VERBS_PRIV_MAGIC ||
	    d[1] > data_len - RDMEM_VERBS_PRIV_HDR) {
		rdmem_err_limited(
		    "verbs: %s from %s carries no valid private data frame (%zu bytes, "
		    "first byte 0x%02x): not an rdmem peer?",
		    what, peer, data_len, d && data_len ? d[0] : 0);
		return -EPROTO;
	}
	if (d[1] > room) {
		rdmem_err_limited(
		    "verbs: %s from %s carries %u bytes of private data; room for %zu", what, peer,
		    d[1], room);
		return -EMSGSIZE;
	}
	if (d[1])
		memcpy(out, d + RDMEM_VERBS_PRIV_HDR, d[1]);
	*out_len = d[1];
	return 0;
}

/* ---- queue sizing and resources ----------------------------------------- */

/* Sizes queues from attr, clamped to the device; see the header comment. */
static int rdmem_verbs_size(struct rdmem_verbs_conn *c, const struct rdmem_fab_attr *attr,
			    const struct ibv_device_attr *dev)
{
	uint32_t want_send = attr && attr->max_send_wr ? attr->max_send_wr : RDMEM_VERBS_DEF_SEND;
	uint32_t qp_wr = (uint32_t)dev->max_qp_wr, want_recv;
	uint64_t cqe = dev->max_cqe > 0 ? (uint64_t)dev->max_cqe : 0;

	c->max_send = want_send;
	c->max_recv = attr && attr->max_recv_wr ? attr->max_recv_wr : RDMEM_VERBS_DEF_RECV;
	want_recv = c->max_recv;
	c->signal_every = attr && attr->signal_every ? attr->signal_every : RDMEM_VERBS_DEF_SIGNAL;
	c->signal_every = RDMEM_MIN(c->signal_every, c->max_send);
	if (qp_wr < 2 || c->signal_every >= qp_wr)
		c->signal_every = 1;
	if ((uint64_t)c->max_send + c->signal_every > qp_wr)
		c->max_send = qp_wr - c->signal_every;
	if (c->max_recv > qp_wr)
		c->max_recv = qp_wr;
	/* One CQ holds both queues: shrink them in proportion until it can.
	 * Callers size their protocol to rdmem_fab_queue_caps(). */
	if ((uint64_t)c->max_send + c->signal_every + c->max_recv > cqe) {
		uint64_t room = cqe > c->signal_every ? cqe - c->signal_every : 0;
		uint64_t send = room * c->max_send / ((uint64_t)c->max_send + c->max_recv);

		if (send < 1 || room - send < 1) {
			rdmem_err_limited("verbs: %s CQs hold %d entries: too few for any queue",
					  rdmem_verbs_dev(c), dev->max_cqe);
			return -EINVAL;
		}
		c->max_send = (uint32_t)send;
		c->max_recv = (uint32_t)(room - send);
	}
	if (c->max_send != want_send || c->max_recv != want_recv)
		rdmem_warn_limited(
		    "verbs: %s allows %u WRs per QP and %d CQ entries: send queue %u -> %u, "
		    "receive queue %u -> %u",
		    rdmem_verbs_dev(c), qp_wr, dev->max_cqe, want_send, c->max_send, want_recv,
		    c->max_recv);
	c->sq_depth = c->max_send + c->signal_every;
	c->rq_depth = c->max_recv;
	c->max_sge = (uint32_t)RDMEM_MIN(RDMEM_FAB_MAX_SGE, dev->max_sge);
	c->max_sge_rd =
	    (uint32_t)RDMEM_MIN((int)c->max_sge, dev->max_sge_rd ? dev->max_sge_rd : dev->max_sge);
	c->resp_res = (uint8_t)RDMEM_MIN(RDMEM_VERBS_RD_ATOM_MAX, dev->max_qp_rd_atom);
	c->init_depth = (uint8_t)RDMEM_MIN(RDMEM_VERBS_RD_ATOM_MAX, dev->max_qp_init_rd_atom);
	return 0;
}

static int rdmem_verbs_query(struct rdmem_verbs_conn *c, const struct rdmem_fab_attr *attr)
{
	struct ibv_device_attr dev;
	struct ibv_port_attr port;
	int rc;

	rc = ibv_query_device(c->id->verbs, &dev);
	if (rc) {
		rdmem_err_limited("verbs: ibv_query_device(%s) for %s: %s", rdmem_verbs_dev(c),
				  c->peer, strerror(rc));
		return -rc;
	}
	rc = ibv_query_port(c->id->verbs, c->id->port_num, &port);
	if (rc) {
		rdmem_err_limited("verbs: ibv_query_port(%s, %u) for %s: %s", rdmem_verbs_dev(c),
				  c->id->port_num, c->peer, strerror(rc));
		return -rc;
	}
	c->max_msg = port.max_msg_sz;
	return rdmem_verbs_size(c, attr, &dev);
}

/* Creates the RC QP, halving the inline size until the device accepts it. */
static int rdmem_verbs_create_qp(struct rdmem_verbs_conn *c, uint32_t want_inline)
{
	uint32_t asked_inline = want_inline;
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr qa;

	for (;;) {
		memset(&init, 0, sizeof(init));
		init.send_cq = c->cq;
		init.recv_cq = c->cq;
		init.qp_type = IBV_QPT_RC;
		init.cap.max_send_wr = c->sq_depth;
		init.cap.max_recv_wr = c->rq_depth;
		init.cap.max_send_sge = c->max_sge;
		init.cap.max_recv_sge = 1;
		init.cap.max_inline_data = want_inline;
		if (rdma_create_qp(c->id, c->pd, &init) == 0)
			break;
		if ((errno != EINVAL && errno != ENOMEM) || want_inline == 0) {
			int e = errno;

			rdmem_err_limited(
			    "verbs: rdma_create_qp on %s for %s (sq %u, rq %u, sge %u, "
			    "inline %u, then down to %u): %s",
			    rdmem_verbs_dev(c), c->peer, c->sq_depth, c->rq_depth, c->max_sge,
			    asked_inline, want_inline, strerror(e));
			return -e;
		}
		want_inline /= 2;
	}
	/* What the QP really got: providers may round the inline size. */
	if (ibv_query_qp(c->id->qp, &qa, IBV_QP_CAP, &init)) {
		int e = errno;

		rdmem_err_limited("verbs: ibv_query_qp for %s: %s", c->peer, strerror(e));
		return -e;
	}
	c->max_inline = RDMEM_MIN(qa.cap.max_inline_data, init.cap.max_inline_data);
	return 0;
}

static int rdmem_verbs_alloc_arrays(struct rdmem_verbs_conn *c)
{
	c->sq = calloc(c->sq_depth, sizeof(*c->sq));
	c->swr = calloc(c->max_send, sizeof(*c->swr));
	c->sge = calloc((size_t)c->max_send * RDMEM_FAB_MAX_SGE, sizeof(*c->sge));
	c->rwr = calloc(c->max_recv, sizeof(*c->rwr));
	if (!c->sq || !c->swr || !c->sge || !c->rwr) {
		rdmem_err_limited("verbs: out of memory for the queues of %s", c->peer);
		return -ENOMEM;
	}
	return 0;
}

/*
 * The READ depth the connection really got: rdma_cm programs the QP's
 * max_rd_atomic from the initiator depth we offered and the responder
 * resources the peer granted (the lower wins; rxe rounds up to a power of
 * two). Zero would leave every READ waiting forever on rxe and fail it on
 * a NIC, so it fails the connection instead.
 */
static int rdmem_verbs_learn_reads(struct rdmem_verbs_conn *c)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr qa;
	int rc = ibv_query_qp(c->id->qp, &qa, IBV_QP_MAX_QP_RD_ATOMIC, &init);

	if (rc) {
		rdmem_err_limited("verbs: ibv_query_qp(max_rd_atomic) for %s: %s", c->peer,
				  strerror(rc));
		return -rc;
	}
	c->max_reads = qa.max_rd_atomic;
	if (c->max_reads == 0) {
		rdmem_err_limited(
		    "verbs: %s: the connection allows no RDMA READ in flight (we offered "
		    "initiator depth %u, responder resources %u)",
		    c->peer, c->init_depth, c->resp_res);
		return -EPROTO;
	}
	rdmem_debug("verbs: %s: up to %u RDMA READs in flight", c->peer, c->max_reads);
	return 0;
}

/* PD, completion channel, CQ and RC QP on the device the cm_id resolved to. */
static int rdmem_verbs_setup(struct rdmem_verbs_conn *c, const struct rdmem_fab_attr *attr)
{
	int rc = rdmem_verbs_query(c, attr);

	if (rc)
		return rc;
	c->pd = ibv_alloc_pd(c->id->verbs);
	if (!c->pd) {
		rc = errno;
		rdmem_err_limited("verbs: ibv_alloc_pd(%s) for %s: %s", rdmem_verbs_dev(c), c->peer,
				  strerror(rc));
		return -rc;
	}
	c->cc = ibv_create_comp_channel(c->id->verbs);
	if (!c->cc) {
		rc = errno;
		rdmem_err_limited("verbs: ibv_create_comp_channel for %s: %s", c->peer,
				  strerror(rc));
		return -rc;
	}
	rc = rdmem_verbs_nonblock(c->cc->fd, "completion channel");
	if (rc)
		return rc;
	c->cq = ibv_create_cq(c->id->verbs, (int)(c->sq_depth + c->rq_depth), c, c->cc, 0);
	if (!c->cq) {
		rc = errno;
		rdmem_err_limited("verbs: ibv_create_cq(%u) for %s: %s", c->sq_depth + c->rq_depth,
				  c->peer, strerror(rc));
		return -rc;
	}
	rc = rdmem_verbs_create_qp(c, attr ? attr->max_inline : 0);
	if (rc)
		return rc;
	rdmem_debug("verbs: %s on %s port %u: sq %u (max_send %u, signal every %u), rq %u, "
		    "inline %u, sge %u/%u (write/read), rd_atom %u/%u, max_msg %u",
		    c->peer, rdmem_verbs_dev(c), c->id->port_num, c->sq_depth, c->max_send,
		    c->signal_every, c->rq_depth, c->max_inline, c->max_sge, c->max_sge_rd,
		    c->resp_res, c->init_depth, c->max_msg);
	return rdmem_verbs_alloc_arrays(c);
}

static struct rdmem_verbs_conn *rdmem_verbs_conn_new(void)
{
	struct rdmem_verbs_conn *c = calloc(1, sizeof(*c));

	if (!c) {
		rdmem_err_limited("verbs: out of memory for a connection");
		return NULL;
	}
	c->base.ops = &rdmem_fab_verbs_ops;
	c->mrs.next = c->mrs.prev = &c->mrs;
	return c;
}

/* ---- teardown ----------------------------------------------------------- */

/* Moves the QP to error and waits (bounded) for a marker WR posted behind the
 * send queue to flush: then no send WR of ours is still in flight. Receives
 * get no marker: rxe (Linux 6.1) does not flush a receive queue in error, and
 * destroying the QP retires posted receives in any case. */
static void rdmem_verbs_drain(struct rdmem_verbs_conn *c)
{
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_ERR };
	struct ibv_send_wr swr = { .wr_id = RDMEM_VERBS_WRID_DRAIN,
				   .opcode = IBV_WR_RDMA_WRITE,
				   .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr *bad;
	uint64_t deadline = rdmem_now_ns() + RDMEM_VERBS_DRAIN_MS * 1000000ull;
	int rc, waiting;

	rc = ibv_modify_qp(c->id->qp, &qa, IBV_QP_STATE);
	if (rc) {
		rdmem_warn_limited("verbs: moving the QP of %s to error: %s", c->peer,
				   strerror(rc));
		return;
	}
	if (!c->connected)
		return; /* nothing was ever posted to the send queue */
	rc = ibv_post_send(c->id->qp, &swr, &bad);
	if (rc)
		rdmem_warn_limited("verbs: posting the drain marker for %s: %s", c->peer,
				   strerror(rc));
	waiting = rc == 0;
	while (waiting && rdmem_now_ns() < deadline) {
		struct ibv_wc wc[RDMEM_VERBS_POLL_BATCH];
		int n = ibv_poll_cq(c->cq, RDMEM_VERBS_POLL_BATCH, wc);

		if (n < 0)
			break;
		for (int i = 0; i < n; i++) {
			if (wc[i].wr_id == RDMEM_VERBS_WRID_DRAIN)
				waiting = 0;
			else if (wc[i].status == IBV_WC_WR_FLUSH_ERR)
				c->flushed++;
		}
		if (n == 0)
			usleep(200);
	}
	if (waiting)
		rdmem_warn_limited("verbs: draining the send queue of %s: not flushed after %d ms",
				   c->peer, RDMEM_VERBS_DRAIN_MS);
	if (c->flushed)
		rdmem_debug("verbs: %u WRs of %s flushed", c->flushed, c->peer);
}

static void rdmem_verbs_dereg_all(struct rdmem_verbs_conn *c)
{
	while (c->mrs.next != &c->mrs)
		rdmem_verbs_dereg_one(c, c->mrs.next);
}

static void rdmem_verbs_destroy_cq(struct rdmem_verbs_conn *c)
{
	int rc;

	if (c->cq_unacked)
		ibv_ack_cq_events(c->cq, c->cq_unacked);
	c->cq_unacked = 0;
	rc = ibv_destroy_cq(c->cq);
	if (rc)
		rdmem_err_limited("verbs: ibv_destroy_cq for %s: %s", c->peer, strerror(rc));
}

/* Frees everything in the order verbs requires; any part may be missing. */
static void rdmem_verbs_destroy(struct rdmem_verbs_conn *c)
{
	int rc;

	if (c->id && c->id->qp) {
		if (!c->drained)
			rdmem_verbs_drain(c);
		rdma_destroy_qp(c->id);
	}
	rdmem_verbs_dereg_all(c);
	if (c->cq)
		rdmem_verbs_destroy_cq(c);
	if (c->cc && (rc = ibv_destroy_comp_channel(c->cc)))
		rdmem_err_limited("verbs: ibv_destroy_comp_channel for %s: %s", c->peer,
				  strerror(rc));
	if (c->pd && (rc = ibv_dealloc_pd(c->pd)))
		rdmem_err_limited("verbs: ibv_dealloc_pd for %s: %s", c->peer, strerror(rc));
	if (c->id && rdma_destroy_id(c->id))
		rdmem_err_limited("verbs: rdma_destroy_id for %s: %s", c->peer, strerror(errno));
	if (c->ch)
		rdma_destroy_event_channel(c->ch);
	free(c->sq);
	free(c->swr);
	free(c->sge);
	free(c->rwr);
	free(c);
}

static void rdmem_verbs_disconnect(struct rdmem_verbs_conn *c)
{
	if (!c->connected || c->disc_sent)
		return;
	c->disc_sent = 1;
	/* Fails harmlessly (EINVAL) when the peer disconnected first. */
	if (rdma_disconnect(c->id))
		rdmem_debug("verbs: rdma_disconnect from %s: %s", c->peer, strerror(errno));
}

void rdmem_verbs_close(struct rdmem_conn *conn)
{
	struct rdmem_verbs_conn *c = rdmem_verbs_conn_of(conn);

	rdmem_verbs_disconnect(c);
	rdmem_verbs_destroy(c);
}

/* ---- connection events -------------------------------------------------- */

void rdmem_verbs_break(struct rdmem_verbs_conn *c)
{
	c->broken = 1;
	rdmem_verbs_disconnect(c); /* tells the peer now, not at its next timeout */
}

void rdmem_verbs_shutdown(struct rdmem_conn *conn)
{
	struct rdmem_verbs_conn *c = rdmem_verbs_conn_of(conn);

	if (c->drained || !c->id || !c->id->qp)
		return;
	rdmem_verbs_break(c);
	rdmem_verbs_drain(c);
	c->drained = 1;
}

static void rdmem_verbs_cm_event(struct rdmem_verbs_conn *c, const struct rdma_cm_event *ev)
{
	switch (ev->event) {
	case RDMA_CM_EVENT_ESTABLISHED:
		c->established = 1;
		rdmem_log_limited(RDMEM_LOG_INFO, "verbs: connection from %s established on %s",
				  c->peer, rdmem_verbs_dev(c));
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		rdmem_log_limited(RDMEM_LOG_INFO, "verbs: %s disconnected", c->peer);
		c->broken = 1;
		break;
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
		break;
	case RDMA_CM_EVENT_ADDR_CHANGE:
		rdmem_warn_limited("verbs: the address of %s changed (link down?)",
				   rdmem_verbs_dev(c));
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_REJECTED:
		rdmem_err_limited("verbs: connection with %s: %s (status %d)", c->peer,
				  rdma_event_str(ev->event), ev->status);
		c->broken = 1;
		break;
	default:
		rdmem_debug("verbs: %s: %s", c->peer, rdma_event_str(ev->event));
	}
}

int rdmem_verbs_check(struct rdmem_conn *conn)
{
	struct rdmem_verbs_conn *c = rdmem_verbs_conn_of(conn);
	struct rdma_cm_event *ev;

	while (rdma_get_cm_event(c->ch, &ev) == 0) {
		rdmem_verbs_cm_event(c, ev);
		rdmem_verbs_ack_event(ev);
	}
	if (errno != EAGAIN && errno != EWOULDBLOCK) {
		rdmem_err_limited("verbs: rdma_get_cm_event for %s: %s", c->peer, strerror(errno));
		c->broken = 1;
	}
	return c->broken ? -ECONNRESET : 0;
}

int rdmem_verbs_event_fd(struct rdmem_conn *conn)
{
	return rdmem_verbs_conn_of(conn)->ch->fd;
}

/* ---- server side -------------------------------------------------------- */

int rdmem_verbs_listen(const char *addr, uint16_t port, struct rdmem_listener **out)
{
	struct rdmem_verbs_listener *l = calloc(1, sizeof(*l));
	struct addrinfo *ai = NULL;
	int rc;

	if (!l)
		return -ENOMEM;
	l->base.ops = &rdmem_fab_verbs_ops;
	snprintf(l->name, sizeof(l->name), "%s:%u", addr ? addr : "*", port);
	rc = rdmem_verbs_channel(&l->ch);
	if (rc == 0 && rdma_create_id(l->ch, &l->id, l, RDMA_PS_TCP)) {
		rc = -errno;
		rdmem_err_limited("verbs: rdma_create_id for listener %s: %s", l->name,
				  strerror(-rc));
	}
	if (rc == 0)
		rc = rdmem_verbs_lookup(addr, port, 1, &ai);
	if (rc == 0 && rdma_bind_addr(l->id, ai->ai_addr)) {
		rc = -errno;
		rdmem_err_limited(
		    "verbs: rdma_bind_addr %s: %s%s", l->name, strerror(-rc),
		    rc == -ENODEV || rc == -EADDRNOTAVAIL
			? " (no RDMA device serves this address; `rdma link` lists them)"
			: "");
	}
	if (rc == 0 && rdma_listen(l->id, RDMEM_VERBS_BACKLOG)) {
		rc = -errno;
		rdmem_err_limited("verbs: rdma_listen %s: %s", l->name, strerror(-rc));
	}
	if (ai)
		freeaddrinfo(ai);
	if (rc) {
		rdmem_fab_listener_close(&l->base);
		return rc;
	}
	rdmem_info("verbs: listening on %s", l->name);
	*out = &l->base;
	return 0;
}

int rdmem_verbs_listener_fd(struct rdmem_listener *listener)
{
	return ((struct rdmem_verbs_listener *)listener)->ch->fd;
}

void rdmem_verbs_listener_close(struct rdmem_listener *listener)
{
	struct rdmem_verbs_listener *l = (struct rdmem_verbs_listener *)listener;

	if (l->id && rdma_destroy_id(l->id))
		rdmem_err_limited("verbs: rdma_destroy_id for listener %s: %s", l->name,
				  strerror(errno));
	if (l->ch)
		rdma_destroy_event_channel(l->ch);
	free(l);
}

/* What a connect request carried, copied before its event is acked. */
struct rdmem_verbs_req {
	struct rdma_cm_id *id;
	uint8_t priv[RDMEM_VERBS_PRIV_BUF];
	size_t priv_len;
	uint8_t initiator_depth, responder_resources;
};

/* Gives the request's cm_id its own channel, checks its private data and
 * creates its resources; on failure the request is refused. */
static int rdmem_verbs_take(const struct rdmem_verbs_req *req, const struct rdmem_fab_attr *attr,
			    struct rdmem_verbs_conn **out, void *priv, size_t *priv_len)
{
	struct rdmem_verbs_conn *c = rdmem_verbs_conn_new();
	int rc;

	if (!c) {
		if (rdma_reject(req->id, NULL, 0) || rdma_destroy_id(req->id))
			rdmem_err_limited("verbs: refusing a request: %s", strerror(errno));
		return -ENOMEM;
	}
	c->id = req->id;
	c->id->context = c;
	rdmem_verbs_addr_str(rdma_get_peer_addr(c->id), c->peer, sizeof(c->peer));
	rc = rdmem_verbs_channel(&c->ch);
	if (rc == 0 && rdma_migrate_id(c->id, c->ch)) {
		rc = -errno;
		rdmem_err_limited("verbs: rdma_migrate_id for %s: %s", c->peer, strerror(-rc));
	}
	if (rc == 0)
		rc = rdmem_verbs_unframe(req->priv, req->priv_len, priv, priv_len,
					 "connect request", c->peer);
	if (rc == 0)
		rc = rdmem_verbs_setup(c, attr);
	if (rc) {
		if (rdma_reject(c->id, NULL, 0))
			rdmem_warn_limited("verbs: rdma_reject %s: %s", c->peer, strerror(errno));
		rdmem_verbs_destroy(c);
		return rc;
	}
	c->resp_res = RDMEM_MIN(c->resp_res, req->initiator_depth);
	c->init_depth = RDMEM_MIN(c->init_depth, req->responder_resources);
	*out = c;
	return 0;
}

int rdmem_verbs_get_request(struct rdmem_listener *listener, const struct rdmem_fab_attr *attr,
			    struct rdmem_conn **out, void *priv, size_t *priv_len)
{
	struct rdmem_verbs_listener *l = (struct rdmem_verbs_listener *)listener;
	struct rdmem_verbs_conn *c = NULL;
	struct rdmem_verbs_req req;
	struct rdma_cm_event *ev;
	int rc;

	for (;;) {
		if (rdma_get_cm_event(l->ch, &ev)) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return -EAGAIN;
			rc = -errno;
			rdmem_err_limited("verbs: rdma_get_cm_event on listener %s: %s", l->name,
					  strerror(-rc));
			return rc;
		}
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
			break;
		rdmem_warn_limited("verbs: listener %s: %s (status %d)", l->name,
				   rdma_event_str(ev->event), ev->status);
		rdmem_verbs_ack_event(ev);
	}
	req.id = ev->id;
	req.priv_len = ev->param.conn.private_data_len;
	if (req.priv_len && ev->param.conn.private_data)
		memcpy(req.priv, ev->param.conn.private_data, req.priv_len);
	else
		req.priv_len = 0;
	req.initiator_depth = ev->param.conn.initiator_depth;
	req.responder_resources = ev->param.conn.responder_resources;
	/* Ack first: rdma_migrate_id waits until the id has no unacked event. */
	rdmem_verbs_ack_event(ev);
	rc = rdmem_verbs_take(&req, attr, &c, priv, priv_len);
	if (rc)
		return rc;
	*out = &c->base;
	return 0;
}

/* The connection parameters both sides send: framed private data, READ depths, retries. */
static int rdmem_verbs_conn_param(struct rdmem_verbs_conn *c, uint8_t *buf, const void *priv,
				  size_t len, size_t max, const char *what,
				  struct rdma_conn_param *p)
{
	int n = rdmem_verbs_frame(buf, priv, len, max, what, c->peer);

	if (n < 0)
		return n;
	*p = (struct rdma_conn_param){ 0 };
	p->private_data = buf;
	p->private_data_len = (uint8_t)n;
	p->responder_resources = c->resp_res;
	p->initiator_depth = c->init_depth;
	p->retry_count = RDMEM_VERBS_RETRY;
	p->rnr_retry_count = RDMEM_VERBS_RETRY;
	return 0;
}

int rdmem_verbs_accept(struct rdmem_conn *conn, const void *priv, size_t len)
{
	struct rdmem_verbs_conn *c = rdmem_verbs_conn_of(conn);
	uint8_t buf[RDMEM_VERBS_PRIV_BUF];
	struct rdma_conn_param p;
	int n;

	n = rdmem_verbs_conn_param(c, buf, priv, len, RDMEM_FAB_ACCEPT_PRIV_MAX, "accept", &p);
	if (n < 0)
		return n;
	if (rdma_accept(c->id, &p)) {
		int e = errno;

		rdmem_err_limited("verbs: rdma_accept %s: %s", c->peer, strerror(e));
		return -e;
	}
	c->connected = 1; /* rdma_accept moved the QP to RTS */
	return rdmem_verbs_learn_reads(c);
}

void rdmem_verbs_reject(struct rdmem_conn *conn, const void *priv, size_t len)
{
	struct rdmem_verbs_conn *c = rdmem_verbs_conn_of(conn);
	uint8_t buf[RDMEM_VERBS_PRIV_BUF];
	int n;

	n = rdmem_verbs_frame(buf, priv, len, RDMEM_FAB_REJECT_PRIV_MAX, "reject", c->peer);
	if (rdma_reject(c->id, n > 0 ? buf : NULL, n > 0 ? (uint8_t)n : 0))
		rdmem_warn_limited("verbs: rdma_reject %s: %s", c->peer, strerror(errno));
	rdmem_verbs_destroy(c);
}

/* ---- client side -------------------------------------------------------- */

/* Waits for the event that ends one resolution step. A quiet timeout is one
 * the caller retries: it is logged at debug level only. */
static int rdmem_verbs_expect(struct rdmem_verbs_conn *c, enum rdma_cm_event_type want,
			      int timeout_ms, const char *step, int quiet)
{
	struct rdma_cm_event *ev;
	int rc = rdmem_verbs_next_event(c->ch, timeout_ms, &ev);
	int status;

	if (rc == -ETIMEDOUT && !quiet)
		rdmem_err_limited("verbs: %s of %s: no answer in %d ms", step, c->peer, timeout_ms);
	if (rc)
		return rc;
	if (ev->event == want) {
		rdmem_verbs_ack_event(ev);
		return 0;
	}
	status = ev->status < 0 ? ev->status : -EHOSTUNREACH;
	if (quiet && status == -ETIMEDOUT)
		rdmem_debug("verbs: %s of %s timed out; retrying", step, c->peer);
	else
		rdmem_err_limited(
		    "verbs: %s of %s failed: %s: %s%s", step, c->peer, rdma_event_str(ev->event),
		    strerror(-status),
		    ev->event == RDMA_CM_EVENT_ROUTE_ERROR && status == -ENODEV
			? " (rxe bound to lo cannot resolve routes: bind it to a dummy "
			  "or veth netdev)"
			: "");
	rdmem_verbs_ack_event(ev);
	return status;
}

/* One attempt at address resolution, on a fresh cm_id. */
static int rdmem_verbs_addr_try(struct rdmem_verbs_conn *c, const struct sockaddr *src,
				const struct sockaddr *dst, int try_ms, int quiet)
{
	char from[INET6_ADDRSTRLEN + 8] = "";

	if (c->id && rdma_destroy_id(c->id))
		rdmem_err_limited("verbs: rdma_destroy_id for %s: %s", c->peer, strerror(errno));
	c->id = NULL;
	if (rdma_create_id(c->ch, &c->id, c, RDMA_PS_TCP)) {
		int e = errno;

		c->id = NULL;
		rdmem_err_limited("verbs: rdma_create_id for %s: %s", c->peer, strerror(e));
		return -e;
	}
	if (rdma_resolve_addr(c->id, (struct sockaddr *)src, (struct sockaddr *)dst, try_ms)) {
		int e = errno;

		if (src)
			rdmem_verbs_addr_str(src, from, sizeof(from));
		rdmem_err_limited("verbs: rdma_resolve_addr %s%s%s: %s%s", c->peer,
				  src ? " from " : "", from, strerror(e),
				  e == ENODEV || e == EADDRNOTAVAIL
				      ? " (no RDMA device for this address; `rdma link` lists them)"
				      : "");
		return -e;
	}
	return rdmem_verbs_expect(c, RDMA_CM_EVENT_ADDR_RESOLVED, try_ms + 500,
				  "address resolution", quiet);
}

/* On first contact ib_core retries address resolution only at the request's
 * timeout unless a neighbour update wakes it, and that wake-up does not always
 * come (rxe over a veth, Linux 6.1: ARP completes, the request sleeps on).
 * Short attempts resolve as soon as the neighbour is known. */
static int rdmem_verbs_resolve_addr(struct rdmem_verbs_conn *c, const struct sockaddr *src,
				    const struct sockaddr *dst, int timeout_ms)
{
	uint64_t deadline = rdmem_now_ns() + (uint64_t)timeout_ms * 1000000ull;

	for (;;) {
		uint64_t now = rdmem_now_ns();
		int left = now < deadline ? (int)((deadline - now) / 1000000ull) : 0;
		int try_ms = RDMEM_MIN(RDMEM_MAX(left, 1), RDMEM_VERBS_ADDR_TRY_MS);
		int rc = rdmem_verbs_addr_try(c, src, dst, try_ms, left > try_ms);

		if (rc != -ETIMEDOUT || left <= try_ms)
			return rc;
	}
}

static int rdmem_verbs_find_path(struct rdmem_verbs_conn *c, const char *src,
				 const struct sockaddr *dst, int timeout_ms)
{
	struct addrinfo *sai = NULL;
	int rc = 0;

	if (src)
		rc = rdmem_verbs_lookup(src, 0, 0, &sai);
	if (rc == 0)
		rc = rdmem_verbs_resolve_addr(c, sai ? sai->ai_addr : NULL, dst, timeout_ms);
	if (sai)
		freeaddrinfo(sai);
	if (rc == 0 && rdma_resolve_route(c->id, timeout_ms)) {
		rc = -errno;
		rdmem_err_limited("verbs: rdma_resolve_route %s: %s%s", c->peer, strerror(-rc),
				  rc == -ENODEV
				      ? " (rxe bound to lo cannot resolve routes: bind it to "
					"a dummy or veth netdev)"
				      : "");
	}
	if (rc == 0)
		rc = rdmem_verbs_expect(c, RDMA_CM_EVENT_ROUTE_RESOLVED, timeout_ms,
					"route resolution", 0);
	return rc;
}

int rdmem_verbs_resolve(const char *host, uint16_t port, const struct rdmem_fab_attr *attr,
			int timeout_ms, struct rdmem_conn **out)
{
	struct rdmem_verbs_conn *c = rdmem_verbs_conn_new();
	struct addrinfo *ai = NULL;
	int rc;

	if (!c)
		return -ENOMEM;
	snprintf(c->peer, sizeof(c->peer), strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, port);
	rc = rdmem_verbs_channel(&c->ch);
	if (rc == 0)
		rc = rdmem_verbs_lookup(host, port, 0, &ai);
	if (rc == 0)
		rc =
		    rdmem_verbs_find_path(c, attr ? attr->src_addr : NULL, ai->ai_addr, timeout_ms);
	if (ai)
		freeaddrinfo(ai);
	if (rc == 0)
		rc = rdmem_verbs_setup(c, attr);
	if (rc) {
		rdmem_verbs_destroy(c);
		return rc;
	}
	*out = &c->base;
	return 0;
}

/* The peer refused: its reason (if it framed one) goes to the caller. */
static int rdmem_verbs_rejected(struct rdmem_verbs_conn *c, const struct rdma_cm_event *ev,
				void *peer_priv, size_t *peer_len)
{
	const uint8_t *d = ev->param.conn.private_data;
	size_t n = ev->param.conn.private_data_len;

	if (d && n >= RDMEM_VERBS_PRIV_HDR && d[0] == RDMEM_VERBS_PRIV_MAGIC &&
	    d[1] <= n - RDMEM_VERBS_PRIV_HDR && peer_len && d[1] <= *peer_len) {
		memcpy(peer_priv, d + RDMEM_VERBS_PRIV_HDR, d[1]);
		*peer_len = d[1];
		rdmem_err_limited("verbs: %s refused the connection (%u bytes of reason)", c->peer,
				  d[1]);
	} else {
		if (peer_len)
			*peer_len = 0;
		rdmem_err_limited("verbs: %s refused the connection (CM reject reason %d: no rdmem "
				  "listener on that port?)",
				  c->peer, ev->status);
	}
	return -ECONNREFUSED;
}

/* Handles one event while connecting: 1 = established, 0 = keep waiting. */
static int rdmem_verbs_connect_event(struct rdmem_verbs_conn *c, const struct rdma_cm_event *ev,
				     void *peer_priv, size_t *peer_len)
{
	switch (ev->event) {
	case RDMA_CM_EVENT_ESTABLISHED: {
		int rc = rdmem_verbs_unframe(ev->param.conn.private_data,
					     ev->param.conn.private_data_len, peer_priv, peer_len,
					     "accept", c->peer);

		c->connected = c->established = 1;
		if (rc == 0)
			rc = rdmem_verbs_learn_reads(c);
		if (rc)
			rdmem_verbs_break(c);
		return rc ? rc : 1;
	}
	case RDMA_CM_EVENT_REJECTED:
		return rdmem_verbs_rejected(c, ev, peer_priv, peer_len);
	case RDMA_CM_EVENT_UNREACHABLE:
		rdmem_err_limited(
		    "verbs: %s unreachable (status %d; rxe on a netdev outside the initial "
		    "network namespace never receives)",
		    c->peer, ev->status);
		return -EHOSTUNREACH;
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		rdmem_err_limited("verbs: connecting to %s: %s (status %d)", c->peer,
				  rdma_event_str(ev->event), ev->status);
		return -ECONNABORTED;
	default:
		rdmem_debug("verbs: connecting to %s: %s", c->peer, rdma_event_str(ev->event));
		return 0;
	}
}

int rdmem_verbs_connect(struct rdmem_conn *conn, const void *priv, size_t len, void *peer_priv,
			size_t *peer_len, int timeout_ms)
{
	struct rdmem_verbs_conn *c = rdmem_verbs_conn_of(conn);
	uint8_t buf[RDMEM_VERBS_PRIV_BUF];
	struct rdma_conn_param p;
	struct rdma_cm_event *ev;
	int n, rc;

	n = rdmem_verbs_conn_param(c, buf, priv, len, RDMEM_FAB_CONNECT_PRIV_MAX, "connect", &p);
	if (n < 0)
		return n;
	if (rdma_connect(c->id, &p)) {
		rc = -errno;
		rdmem_err_limited("verbs: rdma_connect %s: %s", c->peer, strerror(-rc));
		return rc;
	}
	do {
		rc = rdmem_verbs_next_event(c->ch, timeout_ms, &ev);
		if (rc == -ETIMEDOUT)
			rdmem_err_limited("verbs: connecting to %s: no answer in %d ms", c->peer,
					  timeout_ms);
		if (rc)
			return rc;
		rc = rdmem_verbs_connect_event(c, ev, peer_priv, peer_len);
		rdmem_verbs_ack_event(ev);
	} while (rc == 0);
	if (rc < 0)
		return rc;
	rdmem_info("verbs: connected to %s via %s: send queue %u (signal every %u), receive "
		   "queue %u, inline %u B, %u SGEs, %u READs in flight",
		   c->peer, rdmem_verbs_dev(c), c->sq_depth, c->signal_every, c->rq_depth,
		   c->max_inline, c->max_sge, c->max_reads);
	return 0;
}
