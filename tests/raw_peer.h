/* raw_peer.h - a test playing a raw agent against a real rdmem-server: an
 * RDMA link (agent/link.c) driven by hand-written descriptors, so a test can
 * forge any field. Shared by test_rdma_server.c and test_lease_hygiene.c. */
#ifndef RDMEM_TEST_RAW_PEER_H
#define RDMEM_TEST_RAW_PEER_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/link.h"
#include "fabric/dataplane.h"
#include "proc.h"
#include "rdmem/util.h"

#define RAW_PEER_TIMEOUT_MS 5000
#define RAW_PEER_BUF	    (2u << 20)

struct raw_peer {
	struct rdmem_link *l;
	struct rdmem_mr mr;
	uint8_t *buf; /* request payloads go from here */
	uint32_t seq[64];
};

/* The server the peers connect to: the test sets fabric, host, port, src_addr. */
static struct rdmem_link_config raw_peer_target = { .fabric = RDMEM_FAB_SHM, .host = "127.0.0.1" };

/* The fabric (shm or verbs, as named) and the address the peers use:
 * RDMEM_TEST_ADDR (the server's), RDMEM_TEST_SOURCE (ours), as the rxe
 * suite sets them. Prints why and returns -1 for an unknown fabric. */
static inline int raw_peer_target_from(const char *fabric)
{
	const char *env;

	if (rdmem_fab_kind_parse(fabric, &raw_peer_target.fabric) < 0) {
		printf("not ok - fabric '%s': shm or verbs\n", fabric);
		return -1;
	}
	if ((env = getenv("RDMEM_TEST_ADDR")) && *env)
		raw_peer_target.host = env;
	if ((env = getenv("RDMEM_TEST_SOURCE")) && *env)
		raw_peer_target.src_addr = env;
	return 0;
}

/* Starts rdmem-server over fabric on a fresh port pair (the peers' in
 * raw_peer_target.port, its TCP port the next), with the flags in extra
 * (NULL-terminated) after the address ones, and waits until it listens. */
static inline int raw_peer_server_start(struct proc *p, const char *fabric, char *const *extra)
{
	char bin[512], port[16], tcp_port[16], ready[64];
	char *argv[48] = { bin,	     "-b",	 (char *)raw_peer_target.host,
			   "-p",     port,	 "--tcp-port",
			   tcp_port, "--fabric", (char *)fabric };
	size_t n = 9;

	for (; *extra; extra++) {
		if (n + 1 >= RDMEM_ARRAY_SIZE(argv))
			return -1;
		argv[n++] = *extra;
	}
	raw_peer_target.port = (uint16_t)proc_free_port_pair();
	snprintf(bin, sizeof(bin), "%s/rdmem-server", proc_bin());
	snprintf(port, sizeof(port), "%u", raw_peer_target.port);
	snprintf(tcp_port, sizeof(tcp_port), "%u", raw_peer_target.port + 1);
	snprintf(ready, sizeof(ready), "listening %s", fabric);
	return proc_start(p, "server", argv, ready, RAW_PEER_TIMEOUT_MS);
}

/* Connects with ring_slots slots, trying `tries` times 50 ms apart (a server
 * may still hold the previous session's lease). */
static inline int raw_peer_open(struct raw_peer *p, uint32_t ring_slots, int tries)
{
	struct rdmem_link_config cfg = raw_peer_target;

	cfg.ring_slots = ring_slots;
	cfg.resp_bytes = 16384;
	cfg.timeout_ms = RAW_PEER_TIMEOUT_MS;
	memset(p, 0, sizeof(*p));
	while (rdmem_link_open(&cfg, &p->l) < 0 && --tries > 0)
		proc_sleep_ms(50);
	if (!p->l)
		return -1;
	p->buf = calloc(1, RAW_PEER_BUF);
	if (!p->buf)
		return -1;
	return rdmem_fab_reg(p->l->conn, p->buf, RAW_PEER_BUF, RDMEM_ACCESS_LOCAL, &p->mr);
}

static inline void raw_peer_close(struct raw_peer *p)
{
	rdmem_fab_dereg(p->l->conn, &p->mr);
	rdmem_link_close(p->l);
	free(p->buf);
}

/* Waits for a completion of op; 0 and the wc, or -1 on error or timeout. */
static inline int raw_peer_wait(struct raw_peer *p, uint8_t op, struct rdmem_wc *out)
{
	uint64_t end = rdmem_now_ns() + RAW_PEER_TIMEOUT_MS * 1000000ull;
	struct rdmem_wc wc;

	while (rdmem_now_ns() < end) {
		int n = rdmem_fab_poll(p->l->conn, &wc, 1);

		if (n < 0 || (n == 1 && wc.status != RDMEM_WC_SUCCESS))
			return -1;
		if (n == 1 && wc.op == op) {
			*out = wc;
			if (op == RDMEM_WC_RECV_IMM)
				rdmem_fab_post_recv(p->l->conn, 1);
			return 0;
		}
	}
	return -1;
}

/* Response slot i: its descriptor, and its payload 64 bytes on. */
static inline struct rdmem_desc *raw_peer_resp(struct raw_peer *p, uint32_t i)
{
	return (struct rdmem_desc *)(p->l->resp + (uint64_t)i * p->l->w.resp_stride);
}

static inline uint8_t *raw_peer_resp_data(struct raw_peer *p, uint32_t i)
{
	return (uint8_t *)raw_peer_resp(p, i) + RDMEM_DESC_SIZE;
}

/* Request slot i in the server's region, and where its payload starts. */
static inline uint64_t raw_peer_req_addr(struct raw_peer *p, uint32_t i)
{
	return p->l->w.req.addr + (uint64_t)i * p->l->req_stride;
}

static inline uint32_t raw_peer_data_off(struct raw_peer *p, uint32_t i)
{
	return (uint32_t)rdmem_slot_data_off(i, p->l->slot_bytes);
}

/* Sends d (payload bytes from p->buf) into ring slot i; the caller may forge fields. */
static inline int raw_peer_send(struct raw_peer *p, uint32_t i, const struct rdmem_desc *d,
				uint32_t payload)
{
	struct rdmem_sge sge = { (uintptr_t)p->buf, payload, p->mr.lkey };
	struct rdmem_dp_msg m = {
		.slot = i,
		.desc = &p->l->stage[i],
		.desc_lkey = p->l->mr_local.lkey,
		.slot_addr = raw_peer_req_addr(p, i),
		.rkey = p->l->w.req.rkey,
		.payload = &sge,
		.npayload = payload ? 1 : 0,
	};

	p->l->stage[i] = *d;
	return rdmem_dp_publish(p->l->conn, &m);
}

/* One call in slot i: the next sequence number, the reply descriptor in rep
 * (its payload in the response slot). 0 when the reply matches the call. */
static inline int raw_peer_call(struct raw_peer *p, uint32_t i, struct rdmem_desc *d,
				uint32_t payload, struct rdmem_desc *rep)
{
	struct rdmem_wc wc;

	d->seq = ++p->seq[i];
	if (!d->data_off)
		d->data_off = raw_peer_data_off(p, i);
	if (raw_peer_send(p, i, d, payload) < 0 || raw_peer_wait(p, RDMEM_WC_RECV_IMM, &wc) < 0)
		return -1;
	if (wc.imm != i || rdmem_dp_take(raw_peer_resp(p, i), rep) < 0)
		return -1;
	return rep->seq == d->seq ? 0 : -1;
}

/* RDMA-READs len bytes at raddr into dst (p->buf, or memory it registers). */
static inline int raw_peer_read(struct raw_peer *p, uint64_t raddr, uint32_t rkey, void *dst,
				uint32_t len)
{
	struct rdmem_wr wr = { 0 };
	struct rdmem_wc wc;
	struct rdmem_mr mr = p->mr;
	int ret;

	if (dst != p->buf && rdmem_fab_reg(p->l->conn, dst, len, RDMEM_ACCESS_LOCAL, &mr) < 0)
		return -1;
	wr.wr_id = 77;
	wr.op = RDMEM_WR_READ;
	wr.flags = RDMEM_WR_SIGNALED;
	wr.remote_addr = raddr;
	wr.rkey = rkey;
	wr.nsge = 1;
	wr.sge[0] = (struct rdmem_sge){ (uintptr_t)dst, len, mr.lkey };
	ret = rdmem_fab_post(p->l->conn, &wr, 1) < 0 || raw_peer_wait(p, RDMEM_WC_READ, &wc) < 0;
	if (dst != p->buf)
		rdmem_fab_dereg(p->l->conn, &mr);
	return ret ? -1 : 0;
}

/* A request descriptor: LAZY when it asks for an object reference, else EAGER. */
static inline struct rdmem_desc raw_peer_desc(uint16_t op, uint16_t key_len, uint32_t val_len,
					      uint16_t flags)
{
	struct rdmem_desc d;

	memset(&d, 0, sizeof(d));
	d.op = op;
	d.key_len = key_len;
	d.val_len = val_len;
	d.flags = flags;
	d.path = flags & RDMEM_F_WANT_OBJREF ? RDMEM_PATH_LAZY : RDMEM_PATH_EAGER;
	return d;
}

#endif
