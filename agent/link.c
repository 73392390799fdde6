/* link.c - opening and closing the agent's RDMA connection to a server. */
#include "agent/link.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "rdmem/util.h"

#define RDMEM_PAGE 4096u
/* Send WRs a ring slot may have outstanding: request payload, descriptor and
 * state (3), and a LAZY READ; the spare covers control-page READs. RECLAIMs
 * take a slot of their own. */
#define RDMEM_LINK_WRS_PER_SLOT 4u
#define RDMEM_LINK_WR_SPARE	64u

static uint64_t rdmem_link_page_up(uint64_t n)
{
	return (n + RDMEM_PAGE - 1) / RDMEM_PAGE * RDMEM_PAGE;
}

static int rdmem_remote_ok(const struct rdmem_remote *r, uint64_t need)
{
	return r->len >= need && r->addr + r->len >= r->addr;
}

int rdmem_link_check_welcome(const struct rdmem_xchg_welcome *w, size_t len, uint32_t asked_slots)
{
	if (len < sizeof(*w) || w->magic != RDMEM_XCHG_MAGIC || w->version != RDMEM_LAYOUT_VERSION)
		return -EPROTO;
	if (w->ring_slots == 0 || w->ring_slots > asked_slots)
		return -EPROTO;
	if (w->slot_bytes < RDMEM_DESC_SIZE || w->max_value > RDMEM_MAX_VALUE_LIMIT)
		return -EPROTO;
	if (!rdmem_remote_ok(&w->req_ring, (uint64_t)w->ring_slots * RDMEM_DESC_SIZE) ||
	    !rdmem_remote_ok(&w->req_payload, (uint64_t)w->ring_slots * w->slot_bytes) ||
	    !rdmem_remote_ok(&w->ctrl, sizeof(struct rdmem_ctrl)) ||
	    !rdmem_remote_ok(&w->objpool, 0))
		return -EPROTO;
	return 0;
}

/* Our clock in the high half (the server refuses stale ones), random below. */
static uint64_t rdmem_link_nonce(void)
{
	uint32_t r;

	if (getrandom(&r, sizeof(r), 0) != sizeof(r))
		r = (uint32_t)rdmem_now_ns();
	return (uint64_t)time(NULL) << 32 | r;
}

/* The agent region: response ring + data (resp), then staging, control page
 * snapshot and RECLAIM buffers (local). */
static uint64_t rdmem_link_region_bytes(uint32_t slots, uint32_t resp_bytes, uint64_t *resp_out)
{
	uint64_t resp = rdmem_link_page_up((uint64_t)slots * (RDMEM_DESC_SIZE + resp_bytes));
	uint64_t stage = rdmem_link_page_up((uint64_t)slots * RDMEM_DESC_SIZE);
	uint64_t reclaim = (uint64_t)RDMEM_LINK_RECLAIM_BUFS * RDMEM_LINK_RECLAIM_REFS *
			   sizeof(struct rdmem_objref);

	if (resp_out)
		*resp_out = resp;
	return resp + stage + RDMEM_CTRL_BYTES + rdmem_link_page_up(reclaim);
}

int rdmem_link_memlock_short(const struct rdmem_link_config *cfg, uint64_t *need, uint64_t *limit)
{
	*need = rdmem_link_region_bytes(cfg->ring_slots, cfg->resp_bytes, NULL) + cfg->fd_len;
	return cfg->fabric == RDMEM_FAB_VERBS && rdmem_memlock_limit(limit) && *need > *limit;
}

static int rdmem_link_regions(struct rdmem_link *l, const struct rdmem_link_config *cfg)
{
	uint64_t resp, local, stage;
	int ret;

	l->region_len = rdmem_link_region_bytes(l->slots, l->resp_bytes, &resp);
	local = l->region_len - resp;
	stage = rdmem_link_page_up((uint64_t)l->slots * RDMEM_DESC_SIZE);
	l->region = rdmem_fab_alloc(l->conn, l->region_len);
	if (!l->region)
		return -ENOMEM;
	l->resp_ring = (struct rdmem_desc *)l->region;
	l->resp_data = l->region + (uint64_t)l->slots * RDMEM_DESC_SIZE;
	l->stage = (struct rdmem_desc *)(l->region + resp);
	l->ctrl = (struct rdmem_ctrl *)(l->region + resp + stage);
	l->reclaim = l->region + resp + stage + RDMEM_CTRL_BYTES;
	ret = rdmem_fab_reg(l->conn, l->region, resp, RDMEM_ACCESS_REMOTE_WRITE, &l->mr_resp);
	if (ret == 0)
		ret = rdmem_fab_reg(l->conn, l->region + resp, local, RDMEM_ACCESS_LOCAL,
				    &l->mr_local);
	if (ret == 0 && cfg->fd_base)
		ret = rdmem_fab_reg(l->conn, cfg->fd_base, cfg->fd_len, RDMEM_ACCESS_LOCAL,
				    &l->mr_fd);
	return ret;
}

static int rdmem_link_handshake(struct rdmem_link *l, const struct rdmem_link_config *cfg)
{
	struct rdmem_xchg_hello h = { 0 };
	union {
		struct rdmem_xchg_welcome w;
		struct rdmem_xchg_reject r;
		uint8_t raw[256];
	} peer;
	size_t len = sizeof(peer);
	int ret;

	h.magic = RDMEM_XCHG_MAGIC;
	h.version = RDMEM_LAYOUT_VERSION;
	h.ring_slots = l->slots;
	h.resp_bytes = l->resp_bytes;
	h.resp = (struct rdmem_remote){ (uintptr_t)l->mr_resp.addr, l->mr_resp.rkey,
					(uint32_t)l->mr_resp.len };
	h.nonce = rdmem_link_nonce();
	if (cfg->auth)
		rdmem_auth_mac(cfg->auth, "agent", &h, offsetof(struct rdmem_xchg_hello, proof),
			       NULL, 0, h.proof, sizeof(h.proof));
	memset(&peer, 0, sizeof(peer));
	ret = rdmem_fab_connect(l->conn, &h, sizeof(h), &peer, &len, cfg->timeout_ms);
	if (ret == -ECONNREFUSED && len >= sizeof(peer.r) && peer.r.magic == RDMEM_XCHG_MAGIC) {
		peer.r.reason[sizeof(peer.r.reason) - 1] = '\0';
		rdmem_warn("server %s:%u refused the session: %s", cfg->host, cfg->port,
			   peer.r.reason);
		return rdmem_status_errno(peer.r.status) ? rdmem_status_errno(peer.r.status)
							 : -ECONNREFUSED;
	}
	if (ret < 0)
		return ret;
	if (rdmem_link_check_welcome(&peer.w, len, l->slots) < 0) {
		rdmem_err("server %s:%u: malformed session parameters (%zu bytes)", cfg->host,
			  cfg->port, len);
		return -EPROTO;
	}
	/* Mutual authentication: a server without the secret is not ours. */
	if (cfg->auth && rdmem_auth_verify(cfg->auth, "server", &h.nonce, sizeof(h.nonce), &peer.w,
					   offsetof(struct rdmem_xchg_welcome, proof), peer.w.proof,
					   sizeof(peer.w.proof)) < 0) {
		rdmem_err("server %s:%u did not prove the shared secret: refusing it", cfg->host,
			  cfg->port);
		return -EACCES;
	}
	l->w = peer.w;
	l->max_reads = rdmem_fab_max_reads(l->conn);
	if (cfg->max_reads && cfg->max_reads < l->max_reads)
		l->max_reads = cfg->max_reads;
	l->slots = peer.w.ring_slots;
	l->slot_bytes = peer.w.slot_bytes;
	return 0;
}

/* A device may grant smaller queues than asked: then the link uses fewer
 * ring slots, so that every slot's WRs (RDMEM_LINK_WRS_PER_SLOT) and reply
 * receive fit by construction and a post never finds the queue full. */
static void rdmem_link_fit_queues(struct rdmem_link *l)
{
	uint32_t max_send, max_recv, fit;

	rdmem_fab_queue_caps(l->conn, &max_send, &max_recv);
	fit = max_send > RDMEM_LINK_WR_SPARE
		  ? (max_send - RDMEM_LINK_WR_SPARE) / RDMEM_LINK_WRS_PER_SLOT
		  : 0;
	/* slots + RDMEM_LINK_RECV_BATCH receives stay posted */
	fit =
	    RDMEM_MIN(fit, max_recv > RDMEM_LINK_RECV_BATCH ? max_recv - RDMEM_LINK_RECV_BATCH : 0);
	if (fit >= l->slots)
		return;
	rdmem_warn("rdma: %s gives a send queue of %u and a receive queue of %u: %u ring slots "
		   "instead of %u",
		   rdmem_fab_peer(l->conn), max_send, max_recv, RDMEM_MAX(fit, 1u), l->slots);
	l->slots = RDMEM_MAX(fit, 1u);
}

int rdmem_link_open(const struct rdmem_link_config *cfg, struct rdmem_link **out)
{
	/* Per slot: request payload + descriptor + state, a LAZY READ, and room
	 * for control-page reads and RECLAIMs. */
	struct rdmem_fab_attr attr = { .max_send_wr = RDMEM_LINK_WRS_PER_SLOT * cfg->ring_slots +
						      RDMEM_LINK_WR_SPARE,
				       .max_recv_wr = cfg->ring_slots + RDMEM_LINK_RECV_BATCH,
				       .max_inline = 64,
				       .signal_every = 64,
				       .src_addr = cfg->src_addr };
	struct rdmem_link *l = calloc(1, sizeof(*l));
	int ret;

	if (!l)
		return -ENOMEM;
	l->slots = cfg->ring_slots;
	l->resp_bytes = cfg->resp_bytes;
	ret =
	    rdmem_fab_resolve(cfg->fabric, cfg->host, cfg->port, &attr, cfg->timeout_ms, &l->conn);
	if (ret == 0)
		rdmem_link_fit_queues(l);
	if (ret == 0)
		ret = rdmem_link_regions(l, cfg);
	/* One receive per response slot, plus the batch that may be owed. */
	if (ret == 0)
		ret = rdmem_fab_post_recv(l->conn, (int)(l->slots + RDMEM_LINK_RECV_BATCH));
	if (ret == 0)
		ret = rdmem_link_handshake(l, cfg);
	if (ret < 0) {
		rdmem_link_close(l);
		return ret;
	}
	*out = l;
	return 0;
}

void rdmem_link_close(struct rdmem_link *l)
{
	if (!l)
		return;
	if (l->conn) {
		rdmem_fab_dereg(l->conn, &l->mr_fd);
		rdmem_fab_dereg(l->conn, &l->mr_local);
		rdmem_fab_dereg(l->conn, &l->mr_resp);
		if (l->region)
			rdmem_fab_free(l->conn, l->region, l->region_len);
		rdmem_fab_close(l->conn);
	}
	free(l);
}
