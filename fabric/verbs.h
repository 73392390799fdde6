/* verbs.h - private to the verbs fabric backend: verbs_cm.c (librdmacm
 * connection management, queue setup and teardown) and verbs_dp.c (memory
 * registration and the data path: post, poll, completions).
 *
 * The split follows eRPC's ib_transport.cc / ib_transport_datapath.cc and
 * this tree's own emulator (fabric/emu_cm.c, fabric/emu.c): what runs once per
 * connection apart from what runs per WR.
 */
#ifndef RDMEM_FABRIC_VERBS_H
#define RDMEM_FABRIC_VERBS_H

#include "fabric/fabric_impl.h"

#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define RDMEM_VERBS_PRIV_MAGIC	0xd5
#define RDMEM_VERBS_PRIV_HDR	2
#define RDMEM_VERBS_PRIV_BUF	256
#define RDMEM_VERBS_WRID_RECV	UINT64_MAX
#define RDMEM_VERBS_WRID_DRAIN	(UINT64_MAX - 1)
#define RDMEM_VERBS_DEF_SEND	64
#define RDMEM_VERBS_DEF_RECV	64
#define RDMEM_VERBS_DEF_SIGNAL	16
#define RDMEM_VERBS_RD_ATOM_MAX 16 /* READs in flight we ask for, each way */
#define RDMEM_VERBS_POLL_BATCH	16
#define RDMEM_VERBS_ACK_BATCH	16
#define RDMEM_VERBS_DRAIN_MS	2000
#define RDMEM_VERBS_ADDR_TRY_MS 1000
#define RDMEM_VERBS_BACKLOG	64
#define RDMEM_VERBS_RETRY	7 /* rnr_retry 7: retry forever while the peer lacks a receive */

struct rdmem_verbs_sq_ent {
	uint64_t wr_id;
	uint8_t op;
	uint8_t hidden;
};

struct rdmem_verbs_mr {
	struct ibv_mr *mr;
	struct rdmem_verbs_mr *prev, *next;
};

struct rdmem_verbs_conn {
	struct rdmem_conn base;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	struct rdmem_verbs_mr mrs; /* list sentinel */
	struct rdmem_verbs_sq_ent *sq;
	struct ibv_send_wr *swr;
	struct ibv_sge *sge;
	struct ibv_recv_wr *rwr;
	uint64_t sq_head; /* oldest WR not known complete */
	uint64_t sq_tail; /* next post sequence */
	uint32_t sq_depth, rq_depth, max_send, max_recv, signal_every, unsignaled;
	uint32_t rq_posted, max_inline, max_sge, max_sge_rd, max_msg, max_reads;
	uint8_t resp_res, init_depth;
	unsigned cq_unacked, flushed;
	int connected, established, broken, disc_sent;
	int drained; /* the QP is in error and its send queue flushed */
	char peer[INET6_ADDRSTRLEN + 8];
};

struct rdmem_verbs_listener {
	struct rdmem_listener base;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	char name[INET6_ADDRSTRLEN + 8];
};

static inline struct rdmem_verbs_conn *rdmem_verbs_conn_of(struct rdmem_conn *c)
{
	return (struct rdmem_verbs_conn *)c;
}

static inline const char *rdmem_verbs_dev(const struct rdmem_verbs_conn *c)
{
	return c->id && c->id->verbs ? ibv_get_device_name(c->id->verbs->device) : "?";
}

/* verbs_cm.c: the connection side of rdmem_fab_verbs_ops. */
int rdmem_verbs_accept(struct rdmem_conn *conn, const void *priv, size_t len);
/* Marks the conn broken (the data path calls it on a fatal completion). */
void rdmem_verbs_break(struct rdmem_verbs_conn *c);
int rdmem_verbs_check(struct rdmem_conn *conn);
void rdmem_verbs_close(struct rdmem_conn *conn);
int rdmem_verbs_connect(struct rdmem_conn *conn, const void *priv, size_t len, void *peer_priv,
			size_t *peer_len, int timeout_ms);
int rdmem_verbs_event_fd(struct rdmem_conn *conn);
int rdmem_verbs_get_request(struct rdmem_listener *listener, const struct rdmem_fab_attr *attr,
			    struct rdmem_conn **out, void *priv, size_t *priv_len);
int rdmem_verbs_listen(const char *addr, uint16_t port, struct rdmem_listener **out);
void rdmem_verbs_listener_close(struct rdmem_listener *listener);
int rdmem_verbs_listener_fd(struct rdmem_listener *listener);
void rdmem_verbs_reject(struct rdmem_conn *conn, const void *priv, size_t len);
int rdmem_verbs_resolve(const char *host, uint16_t port, const struct rdmem_fab_attr *attr,
			int timeout_ms, struct rdmem_conn **out);
void rdmem_verbs_shutdown(struct rdmem_conn *conn);

/* verbs_dp.c: deregisters r and unlinks it from c's list (close uses it for
 * the registrations the caller left). */
void rdmem_verbs_dereg_one(struct rdmem_verbs_conn *c, struct rdmem_verbs_mr *r);

#endif
