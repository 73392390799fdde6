/* link.c - opening and closing the agent's RDMA connection to a server. */
#include "agent/link.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "fabric/dataplane.h"
#include "rdmem/util.h"

#define RDMEM_PAGE 4096u
/* Send WRs a ring slot may have outstanding: request payload and descriptor
 * (2: fabric/dataplane.h), and a LAZY READ; the spare covers control-page
 * READs. RECLAIMs take a slot of their own. */
#define RDMEM_LINK_WRS_PER_SLOT 3u
#define RDMEM_LINK_WR_SPARE	64u

static uint64_t rdmem_link_page_up(uint64_t n)
{
	return (n + RDMEM_PAGE - 1) / RDMEM_PAGE * RDMEM_PAGE;
}

/* A remote's 32-bit len saturates (RDMEM_REMOTE_LEN_MAX): need is checked up to that. */
static int rdmem_remote_ok(const struct rdmem_remote *r, uint64_t need)
{
	return r->len >= RDMEM_MIN(need, RDMEM_REMOTE_LEN_MAX) && r->addr + r->len >= r->addr;
}

/* The object pool: its 64-bit length, and the largest object inside it. */
static int rdmem_link_objpool_ok(const struct rdmem_xchg_welcome *w)
{
	return w->objpool_bytes && w->objpool.addr + w->objpool_bytes > w->objpool.addr &&
	       w->objpool.len == RDMEM_MIN(w->objpool_bytes, RDMEM_REMOTE_LEN_MAX) && w->obj_max &&
	       w->obj_max <= w->objpool_bytes && w->obj_count;
}

int rdmem_link_check_welcome(const struct rdmem_xchg_welcome *w, size_t len, uint32_t asked_slots,
			     uint32_t asked_resp_bytes)
{
	if (len < sizeof(*w) || w->magic != RDMEM_XCHG_MAGIC || w->version != RDMEM_LAYOUT_VERSION)
		return -EPROTO;
	if (w->ring_slots == 0 || w->ring_slots > asked_slots)
		return -EPROTO;
	/* data_off stays 32-bit: 4096 slots x (1 MiB + 64) at most (layout.h). */
	if (w->slot_bytes < RDMEM_DESC_SIZE || w->slot_bytes > RDMEM_MAX_SLOT_BYTES ||
	    w->max_value == 0 || w->max_value > RDMEM_MAX_VALUE_LIMIT)
		return -EPROTO;
	/* The server writes replies where our layout has them, and no more. */
	if (w->resp_stride != rdmem_slot_stride(asked_resp_bytes) ||
	    w->eager_bytes > asked_resp_bytes)
		return -EPROTO;
	/* Below the server's floor of --object-ttl no LAZY READ could be trusted. */
	if (w->object_ttl_ms < RDMEM_MIN_OBJECT_TTL_MS)
		return -EPROTO;
	if (!rdmem_remote_ok(&w->req, (uint64_t)w->ring_slots * rdmem_slot_stride(w->slot_bytes)) ||
	    !rdmem_remote_ok(&w->ctrl, sizeof(struct rdmem_ctrl)) || !rdmem_link_objpool_ok(w))
		return -EPROTO;
	return 0;
}

uint64_t rdmem_link_request_room(const struct rdmem_xchg_welcome *w)
{
	/* From slot 0's payload to the last slot's end. */
	return (uint64_t)w->ring_slots * rdmem_slot_stride(w->slot_bytes) - RDMEM_DESC_SIZE;
}

uint64_t rdmem_link_max_request(const struct rdmem_xchg_welcome *w, uint32_t max_value)
{
	return (uint64_t)RDMEM_MIN(max_value, w->max_value) + RDMEM_MAX_KEY;
}

int rdmem_link_geometry_note(const struct rdmem_xchg_welcome *w, uint32_t asked_slots,
			     uint32_t max_value, char *line, size_t len)
{
	uint64_t ring = rdmem_link_request_room(w);
	uint64_t need = rdmem_link_max_request(w, max_value);

	if (ring >= need)
		return 0;
	snprintf(
	    line, len,
	    "rdma: the server's request ring holds %llu B (%u slots: server --ring-slots "
	    "%u, agent --ring-slots %u; of server --slot-bytes %u each) but a request may take "
	    "%llu B (agent --max-value %u, server --max-value %u, key %u): AUTO sends "
	    "larger requests over TCP, forced RDMA paths refuse them (-E2BIG); raise the "
	    "server's --slot-bytes or --ring-slots, or lower the agent's --max-value",
	    (unsigned long long)ring, w->ring_slots, w->srv_ring_slots, asked_slots, w->slot_bytes,
	    (unsigned long long)need, max_value, w->max_value, RDMEM_MAX_KEY);
	return 1;
}

/* Our clock in the high half (the server refuses stale ones), random below. */
static uint64_t rdmem_link_nonce(void)
{
	uint32_t r;

	if (getrandom(&r, sizeof(r), 0) != sizeof(r))
		r = (uint32_t)rdmem_now_ns();
	return (uint64_t)time(NULL) << 32 | r;
}

/* The agent's memory for a link: response slots and the turn word (resp, an
 * allocation of its own), and the local region: descriptor staging, control
 * page snapshot, RECLAIM buffers and payload staging. Returns both. */
static uint64_t rdmem_link_region_bytes(uint32_t slots, uint32_t resp_bytes, uint64_t *resp_out)
{
	uint64_t resp = rdmem_link_page_up(rdmem_turn_off(slots, resp_bytes) + RDMEM_TURN_BYTES);
	uint64_t stage = rdmem_link_page_up((uint64_t)slots * RDMEM_DESC_SIZE);
	uint64_t reclaim = (uint64_t)RDMEM_LINK_RECLAIM_BUFS * RDMEM_LINK_RECLAIM_REFS *
			   sizeof(struct rdmem_objref);

	if (resp_out)
		*resp_out = resp;
	return resp + stage + RDMEM_CTRL_BYTES + rdmem_link_page_up(reclaim) +
	       (uint64_t)slots * RDMEM_LINK_STAGE_BYTES;
}

/* Bytes of client slots a link may keep registered at once: every slot of
 * every client, as far as --max-client-mem and --max-total-mem allow. */
static uint64_t rdmem_link_fd_pin_bytes(const struct rdmem_link_config *cfg)
{
	uint64_t per_client = (uint64_t)cfg->fd_slots * cfg->fd_payload_cap, all;

	if (cfg->pin && cfg->fd_payload_cap)
		per_client = RDMEM_MIN(per_client, cfg->pin->max_client / cfg->fd_payload_cap *
						       cfg->fd_payload_cap);
	all = per_client * cfg->fd_clients;
	return cfg->pin ? RDMEM_MIN(all, cfg->pin->max_total) : all;
}

int rdmem_link_memlock_short(const struct rdmem_link_config *cfg, uint64_t *need, uint64_t *limit)
{
	*need = rdmem_link_region_bytes(cfg->ring_slots, cfg->resp_bytes, NULL) +
		rdmem_link_fd_pin_bytes(cfg);
	return cfg->fabric == RDMEM_FAB_VERBS && rdmem_memlock_limit(limit) && *need > *limit;
}

static int rdmem_link_regions(struct rdmem_link *l, const struct rdmem_link_config *cfg)
{
	uint64_t resp, local, stage;
	int ret;

	/* Two allocations: the server may write the response slots, and only
	 * them (fabric.h: a remote-access registration is one whole allocation). */
	local = rdmem_link_region_bytes(l->slots, l->resp_bytes, &resp) - resp;
	stage = rdmem_link_page_up((uint64_t)l->slots * RDMEM_DESC_SIZE);
	l->resp = rdmem_fab_alloc(l->conn, resp);
	if (!l->resp)
		return -ENOMEM;
	l->resp_len = resp;
	l->region = rdmem_fab_alloc(l->conn, local);
	if (!l->region)
		return -ENOMEM;
	l->region_len = local;
	/* Where our hello's slots end: the server serves fewer if it must. */
	l->turn = (uint64_t *)(l->resp + rdmem_turn_off(l->slots, l->resp_bytes));
	l->stage = (struct rdmem_desc *)l->region;
	l->ctrl = (struct rdmem_ctrl *)(l->region + stage);
	l->reclaim = l->region + stage + RDMEM_CTRL_BYTES;
	/* Last in the local region (rdmem_link_region_bytes). */
	l->stage_payload = l->region + local - (uint64_t)l->slots * RDMEM_LINK_STAGE_BYTES;
	ret = rdmem_fab_reg(l->conn, l->resp, resp, RDMEM_ACCESS_REMOTE_WRITE, &l->mr_resp);
	if (ret == 0)
		ret = rdmem_fab_reg(l->conn, l->region, local, RDMEM_ACCESS_LOCAL, &l->mr_local);
	if (ret == 0 && cfg->fd_base && cfg->pin) {
		l->regs = calloc((size_t)cfg->fd_clients * cfg->fd_slots, sizeof(*l->regs));
		l->reg_failed = calloc(cfg->fd_clients, sizeof(*l->reg_failed));
		if (!l->regs || !l->reg_failed)
			return -ENOMEM;
		l->fd_base = cfg->fd_base;
		l->fd_area_off = cfg->fd_area_off;
		l->fd_area_len = cfg->fd_area_len;
		l->fd_clients = cfg->fd_clients;
		l->fd_slots = cfg->fd_slots;
		l->fd_slot_size = cfg->fd_slot_size;
		l->fd_payload_off = cfg->fd_payload_off;
		l->fd_payload_cap = cfg->fd_payload_cap;
		l->pin = cfg->pin;
	}
	return ret;
}

struct rdmem_link_reg *rdmem_link_reg(struct rdmem_link *l, uint32_t client, uint32_t slot)
{
	if (!l->regs || client >= l->fd_clients || slot >= l->fd_slots)
		return NULL;
	return &l->regs[(size_t)client * l->fd_slots + slot];
}

void rdmem_link_reg_drop(struct rdmem_link *l, uint32_t client, uint32_t slot)
{
	struct rdmem_link_reg *r = rdmem_link_reg(l, client, slot);

	if (!r || !r->serial)
		return;
	rdmem_fab_dereg(l->conn, &r->mr);
	rdmem_pin_release(l->pin, client, l->fd_payload_cap);
	r->serial = 0;
	l->areas_live--;
	l->area_drops++;
}

int rdmem_link_reg_lkey(struct rdmem_link *l, uint32_t client, uint32_t slot, uint64_t serial,
			uint32_t *lkey, enum rdmem_pin_refusal *over)
{
	struct rdmem_link_reg *r = rdmem_link_reg(l, client, slot);
	uint8_t *payload;
	int ret;

	*over = RDMEM_PIN_OK;
	if (!r || !serial)
		return -EINVAL;
	if (r->serial == serial) {
		*lkey = r->mr.lkey;
		return 0;
	}
	if (rdmem_link_reg_refused(l, client, serial))
		return -ENOMEM;
	rdmem_link_reg_drop(l, client, slot);
	*over = rdmem_pin_charge(l->pin, client, l->fd_payload_cap);
	if (*over != RDMEM_PIN_OK)
		return -ENOBUFS;
	payload = l->fd_base + l->fd_area_off + client * l->fd_area_len +
		  (uint64_t)slot * l->fd_slot_size + l->fd_payload_off;
	ret = rdmem_fab_reg(l->conn, payload, l->fd_payload_cap, RDMEM_ACCESS_LOCAL, &r->mr);
	if (ret < 0) {
		rdmem_pin_release(l->pin, client, l->fd_payload_cap);
		/* The locked-memory limit (ENOMEM, EAGAIN) or the device's count
		 * of registrations (ENOSPC) is pressure like the budget's:
		 * letting idle registrations go may make room. */
		if (ret == -ENOMEM || ret == -EAGAIN || ret == -ENOSPC) {
			*over = RDMEM_PIN_TOTAL;
			rdmem_warn_limited(
			    "rdma: cannot register client %u's slot %u (%u KiB): %s "
			    "(locked-memory limit, see `ulimit -l`, or the device's "
			    "registrations: lower --max-total-mem); idle ones go first",
			    client, slot, l->fd_payload_cap >> 10, strerror(-ret));
			return -ENOBUFS;
		}
		l->reg_failed[client] = serial;
		rdmem_warn_limited("rdma: cannot register client %u's slot %u (%u KiB): %s; its "
				   "large calls go over TCP until it attaches again",
				   client, slot, l->fd_payload_cap >> 10, strerror(-ret));
		return ret == -ENOBUFS ? -EIO : ret; /* -ENOBUFS says "budget" */
	}
	r->serial = serial;
	r->last_post = 0;
	l->area_regs++;
	l->areas_live++;
	*lkey = r->mr.lkey;
	return 0;
}

/* Said once per link, at connect: which requests this geometry cannot carry. */
static void rdmem_link_note(const struct rdmem_link *l, const struct rdmem_link_config *cfg)
{
	char line[512];

	if (rdmem_link_geometry_note(&l->w, cfg->ring_slots, cfg->max_value, line, sizeof(line)))
		rdmem_warn("%s", line);
	/* Not a geometry problem (TCP refuses them too), but worth knowing once. */
	if (cfg->max_value > l->w.max_value)
		rdmem_info("rdma: server --max-value %u is below this agent's --max-value %u: "
			   "larger values are refused (-E2BIG) on every path",
			   l->w.max_value, cfg->max_value);
}

static int rdmem_link_handshake(struct rdmem_link *l, const struct rdmem_link_config *cfg)
{
	struct rdmem_xchg_hello h = { 0 };
	union {
		struct rdmem_xchg_welcome w;
		struct rdmem_xchg_reject r;
		uint8_t raw[256];
	} peer;
	struct rdmem_xchg_welcome wire;
	size_t len = sizeof(peer);
	int ret;

	h.magic = RDMEM_XCHG_MAGIC;
	h.version = RDMEM_LAYOUT_VERSION;
	h.ring_slots = l->slots;
	h.resp_bytes = l->resp_bytes;
	h.resp = (struct rdmem_remote){ (uintptr_t)l->mr_resp.addr, l->mr_resp.rkey,
					(uint32_t)RDMEM_MIN(l->mr_resp.len, RDMEM_REMOTE_LEN_MAX) };
	h.nonce = rdmem_link_nonce();
	rdmem_hello_le(&h); /* from here on h holds wire bytes: what the proof covers */
	if (cfg->auth)
		rdmem_auth_mac(cfg->auth, "agent", &h, offsetof(struct rdmem_xchg_hello, proof),
			       NULL, 0, h.proof, sizeof(h.proof));
	memset(&peer, 0, sizeof(peer));
	ret = rdmem_fab_connect(l->conn, &h, sizeof(h), &peer, &len, cfg->timeout_ms);
	if (ret == -ECONNREFUSED)
		rdmem_reject_le(&peer.r);
	if (ret == -ECONNREFUSED && len >= sizeof(peer.r) && peer.r.magic == RDMEM_XCHG_MAGIC) {
		peer.r.reason[sizeof(peer.r.reason) - 1] = '\0';
		rdmem_warn("server %s:%u refused the session: %s", cfg->host, cfg->port,
			   peer.r.reason);
		return rdmem_status_errno(peer.r.status) ? rdmem_status_errno(peer.r.status)
							 : -ECONNREFUSED;
	}
	if (ret < 0)
		return ret;
	wire = peer.w; /* the server's proof covers these bytes */
	rdmem_welcome_le(&peer.w);
	if (len >= offsetof(struct rdmem_xchg_welcome, ring_slots) &&
	    peer.w.magic == RDMEM_XCHG_MAGIC && peer.w.version != RDMEM_LAYOUT_VERSION) {
		rdmem_err("server %s:%u speaks session layout v%u, this agent v%u: run the same "
			  "release on both",
			  cfg->host, cfg->port, (unsigned)peer.w.version,
			  (unsigned)RDMEM_LAYOUT_VERSION);
		return -EPROTO;
	}
	if (rdmem_link_check_welcome(&peer.w, len, l->slots, l->resp_bytes) < 0) {
		rdmem_err("server %s:%u: malformed session parameters (%zu bytes)", cfg->host,
			  cfg->port, len);
		return -EPROTO;
	}
	/* Mutual authentication: a server without the secret is not ours. */
	if (cfg->auth && rdmem_auth_verify(cfg->auth, "server", &h.nonce, sizeof(h.nonce), &wire,
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
	l->req_stride = rdmem_slot_stride(peer.w.slot_bytes);
	l->max_request = RDMEM_MIN(rdmem_link_max_request(&peer.w, cfg->max_value),
				   rdmem_link_request_room(&peer.w));
	rdmem_link_note(l, cfg);
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
	/* slots + RDMEM_LINK_RECVS_SPARE receives stay posted */
	fit = RDMEM_MIN(fit,
			max_recv > RDMEM_LINK_RECVS_SPARE ? max_recv - RDMEM_LINK_RECVS_SPARE : 0);
	if (fit >= l->slots)
		return;
	rdmem_warn("rdma: %s gives a send queue of %u and a receive queue of %u: %u ring slots "
		   "instead of %u",
		   rdmem_fab_peer(l->conn), max_send, max_recv, RDMEM_MAX(fit, 1u), l->slots);
	l->slots = RDMEM_MAX(fit, 1u);
}

int rdmem_link_open(const struct rdmem_link_config *cfg, struct rdmem_link **out)
{
	/* Per slot: request payload + descriptor, a LAZY READ, and room for
	 * control-page reads and RECLAIMs. */
	struct rdmem_fab_attr attr = { .max_send_wr = RDMEM_LINK_WRS_PER_SLOT * cfg->ring_slots +
						      RDMEM_LINK_WR_SPARE,
				       .max_recv_wr = cfg->ring_slots + RDMEM_LINK_RECVS_SPARE,
				       .max_inline = RDMEM_DP_INLINE,
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
	/* One receive per response slot, the batch that may be owed, and one
	 * for a turn that wakes us (layout.h, RDMEM_TURN_RECVS). */
	if (ret == 0)
		ret = rdmem_fab_post_recv(l->conn, (int)(l->slots + RDMEM_LINK_RECVS_SPARE));
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
		for (uint32_t c = 0; l->regs && c < l->fd_clients; c++)
			for (uint32_t i = 0; i < l->fd_slots; i++)
				rdmem_link_reg_drop(l, c, i);
		rdmem_fab_dereg(l->conn, &l->mr_local);
		rdmem_fab_dereg(l->conn, &l->mr_resp);
		if (l->region)
			rdmem_fab_free(l->conn, l->region, l->region_len);
		if (l->resp)
			rdmem_fab_free(l->conn, l->resp, l->resp_len);
		rdmem_fab_close(l->conn);
	}
	free(l->regs);
	free(l->reg_failed);
	free(l);
}
