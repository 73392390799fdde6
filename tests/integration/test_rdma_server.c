/* test_rdma_server.c - the server's RDMA data plane against a hand-driven
 * peer: a real rdmem-server process, and this test playing
 * a (sometimes hostile) agent that writes descriptors itself. Checks EAGER
 * and LAZY replies, RECLAIM (ok, repeat, stale, unknown), the TTL scan, the
 * control page, every forged descriptor refused and counted, and that one
 * session's breakage leaves another untouched.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "raw_peer.h"
#include "rdmem/content.h"

#define T_TIMEOUT_MS 5000

static struct proc server;

static struct rdmem_desc desc(uint16_t op, uint16_t key_len, uint32_t val_len)
{
	return raw_peer_desc(op, key_len, val_len, 0);
}

static int peer_open(struct raw_peer *p)
{
	return raw_peer_open(p, 64, 1);
}

static int peer_ctrl(struct raw_peer *p, struct rdmem_ctrl *c)
{
	int tries;

	for (tries = 0; tries < 100; tries++) {
		if (raw_peer_read(p, p->l->w.ctrl.addr, p->l->w.ctrl.rkey, c, sizeof(*c)) < 0)
			return -1;
		if (c->seq_begin == c->seq_end && !(c->seq_begin & 1))
			return 0;
	}
	return -1;
}

static int put(struct raw_peer *p, const char *key, uint32_t len, uint8_t fill)
{
	struct rdmem_desc d = desc(RDMEM_OP_KV_PUT, (uint16_t)strlen(key), len), rep;

	memcpy(p->buf, key, d.key_len);
	memset(p->buf + d.key_len, fill, len);
	if (raw_peer_call(p, 0, &d, d.key_len + len, &rep) < 0)
		return -1;
	return rep.status;
}

static void test_eager_round_trip(void)
{
	struct rdmem_desc d = desc(RDMEM_OP_KV_GET, 3, 0), rep;
	struct raw_peer p;
	uint32_t i;

	REQUIRE(peer_open(&p) == 0);
	CHECK_EQ(put(&p, "k-1", 100, 0x41), RDMEM_S_OK);
	memcpy(p.buf, "k-1", 3);
	REQUIRE(raw_peer_call(&p, 5, &d, 3, &rep) == 0);
	CHECK_EQ(rep.status, RDMEM_S_OK);
	CHECK_EQ(rep.val_len, 100);
	CHECK(!(rep.flags & RDMEM_F_OBJREF));
	for (i = 0; i < 100; i++)
		CHECK_EQ(raw_peer_resp_data(&p, 5)[i], 0x41);
	raw_peer_close(&p);
}

static void test_lazy_and_reclaim(void)
{
	struct rdmem_desc d = desc(RDMEM_OP_LARGE_GET, 7, 0), rep, rc;
	struct rdmem_objref ref;
	struct rdmem_ctrl ctrl;
	struct raw_peer p;
	uint8_t *obj = malloc(64 << 10);

	REQUIRE(obj && peer_open(&p) == 0);
	/* 64 KiB does not fit the 16 KiB response slot: the server goes LAZY. */
	memcpy(p.buf, "big:64k", 7);
	REQUIRE(raw_peer_call(&p, 1, &d, 7, &rep) == 0);
	CHECK_EQ(rep.status, RDMEM_S_OK);
	REQUIRE(rep.flags & RDMEM_F_OBJREF);
	ref = rep.args.obj;
	CHECK_EQ(ref.length, 65536);
	REQUIRE(raw_peer_read(&p, p.l->w.objpool.addr + ref.offset, p.l->w.objpool.rkey, obj,
			      ref.length) == 0);
	CHECK_EQ(rdmem_big_verify(65536, 0, obj, 65536), 65536);
	REQUIRE(peer_ctrl(&p, &ctrl) == 0);
	CHECK_EQ(ctrl.objects_live, 1);
	CHECK(ctrl.eager_to_lazy >= 1);
	/* RECLAIM: freed; again: harmless repeat; a forged generation: stale. */
	d = desc(RDMEM_OP_RECLAIM, 0, sizeof(ref));
	memcpy(p.buf, &ref, sizeof(ref));
	REQUIRE(raw_peer_call(&p, 2, &d, sizeof(ref), &rc) == 0);
	CHECK_EQ(rc.aux, 1);
	CHECK_EQ(rc.args.raw[0], 0);
	d = desc(RDMEM_OP_RECLAIM, 0, sizeof(ref));
	REQUIRE(raw_peer_call(&p, 2, &d, sizeof(ref), &rc) == 0);
	CHECK_EQ(rc.aux, 1); /* a repeat counts as done, not refused */
	ref.generation += 7;
	memcpy(p.buf, &ref, sizeof(ref));
	d = desc(RDMEM_OP_RECLAIM, 0, sizeof(ref));
	REQUIRE(raw_peer_call(&p, 2, &d, sizeof(ref), &rc) == 0);
	CHECK_EQ(rc.args.raw[0], 1);
	ref.object_id = 1u << 30;
	memcpy(p.buf, &ref, sizeof(ref));
	d = desc(RDMEM_OP_RECLAIM, 0, sizeof(ref));
	REQUIRE(raw_peer_call(&p, 2, &d, sizeof(ref), &rc) == 0);
	CHECK_EQ(rc.args.raw[0], 1);
	proc_sleep_ms(20);
	REQUIRE(peer_ctrl(&p, &ctrl) == 0);
	CHECK_EQ(ctrl.objects_live, 0);
	CHECK_EQ(ctrl.obj_reclaim, 1);
	CHECK_EQ(ctrl.obj_repeat, 1);
	CHECK_EQ(ctrl.obj_stale, 2);
	raw_peer_close(&p);
	free(obj);
}

static void test_forced_lazy_and_ttl(void)
{
	struct rdmem_desc d = desc(RDMEM_OP_KV_GET, 3, 0), rep;
	struct rdmem_ctrl ctrl;
	struct raw_peer p;

	REQUIRE(peer_open(&p) == 0);
	CHECK_EQ(put(&p, "k-2", 10, 0x42), RDMEM_S_OK);
	memcpy(p.buf, "k-2", 3);
	d.flags = RDMEM_F_WANT_OBJREF;
	d.path = RDMEM_PATH_LAZY;
	REQUIRE(raw_peer_call(&p, 3, &d, 3, &rep) == 0);
	CHECK(rep.flags & RDMEM_F_OBJREF);
	CHECK_EQ(rep.args.obj.length, 10);
	/* Never reclaimed: the server's TTL scan (300 ms here) frees it. */
	proc_sleep_ms(700);
	REQUIRE(peer_ctrl(&p, &ctrl) == 0);
	CHECK_EQ(ctrl.objects_live, 0);
	CHECK(ctrl.obj_timeout >= 1);
	raw_peer_close(&p);
}

/* Each forged descriptor gets BAD_REQUEST (or TOO_BIG) and a counter. */
static void test_forged_descriptors(void)
{
	struct rdmem_desc d, rep;
	struct rdmem_ctrl before, after;
	struct raw_peer p;

	REQUIRE(peer_open(&p) == 0);
	REQUIRE(peer_ctrl(&p, &before) == 0);
	d = desc(99, 0, 0);
	REQUIRE(raw_peer_call(&p, 4, &d, 0, &rep) == 0);
	CHECK_EQ(rep.status, RDMEM_S_BAD_REQUEST);
	d = desc(RDMEM_OP_KV_GET, 3, 0);
	d.data_off = raw_peer_data_off(&p, 9); /* another slot's payload */
	REQUIRE(raw_peer_call(&p, 4, &d, 0, &rep) == 0);
	CHECK_EQ(rep.status, RDMEM_S_BAD_REQUEST);
	d = desc(RDMEM_OP_KV_PUT, 3, 64u << 20); /* past the payload area */
	REQUIRE(raw_peer_call(&p, 60, &d, 0, &rep) == 0);
	CHECK(rep.status == RDMEM_S_BAD_REQUEST || rep.status == RDMEM_S_TOO_BIG);
	d = desc(RDMEM_OP_KV_PUT, 3, (1u << 20) - 100); /* runs past the area's end */
	REQUIRE(raw_peer_call(&p, 63, &d, 0, &rep) == 0);
	CHECK_EQ(rep.status, RDMEM_S_BAD_REQUEST);
	d = desc(RDMEM_OP_KV_GET, RDMEM_MAX_KEY + 1, 0);
	REQUIRE(raw_peer_call(&p, 4, &d, 0, &rep) == 0);
	CHECK_EQ(rep.status, RDMEM_S_BAD_REQUEST);
	d = desc(RDMEM_OP_KV_GET, 3, 0);
	d.path = 200;
	REQUIRE(raw_peer_call(&p, 4, &d, 0, &rep) == 0);
	CHECK_EQ(rep.status, RDMEM_S_BAD_REQUEST);
	proc_sleep_ms(20);
	REQUIRE(peer_ctrl(&p, &after) == 0);
	CHECK_EQ(after.bad_requests - before.bad_requests, 6);
	/* The session still serves good calls. */
	CHECK_EQ(put(&p, "k-3", 5, 0x43), RDMEM_S_OK);
	raw_peer_close(&p);
}

/* An immediate for a slot that holds no READY request is ignored and counted. */
static void test_garbage_slot(void)
{
	struct rdmem_desc d = desc(RDMEM_OP_PING, 0, 0);
	struct rdmem_ctrl before, after;
	struct rdmem_wr wr = { 0 };
	uint32_t garbage = 0x12345678;
	struct raw_peer p;

	REQUIRE(peer_open(&p) == 0);
	REQUIRE(peer_ctrl(&p, &before) == 0);
	memcpy(p.buf, &garbage, 4);
	wr.op = RDMEM_WR_WRITE_IMM;
	wr.imm = 7;
	wr.remote_addr = raw_peer_req_addr(&p, 7);
	wr.rkey = p.l->w.req.rkey;
	wr.nsge = 1;
	wr.sge[0] = (struct rdmem_sge){ (uintptr_t)p.buf, 4, p.mr.lkey };
	REQUIRE(rdmem_fab_post(p.l->conn, &wr, 1) == 0);
	wr.imm = 5000; /* no such slot */
	wr.remote_addr = raw_peer_req_addr(&p, 0);
	REQUIRE(rdmem_fab_post(p.l->conn, &wr, 1) == 0);
	proc_sleep_ms(50);
	REQUIRE(peer_ctrl(&p, &after) == 0);
	CHECK_EQ(after.bad_requests - before.bad_requests, 2);
	REQUIRE(raw_peer_call(&p, 8, &d, 0, &d) == 0);
	CHECK_EQ(d.status, RDMEM_S_OK);
	raw_peer_close(&p);
}

/* A session that breaks (access violation) takes nothing from another. */
static void test_sessions_isolated(void)
{
	struct rdmem_desc d = desc(RDMEM_OP_PING, 0, 0);
	struct raw_peer good, bad;
	uint8_t b[64];

	REQUIRE(peer_open(&good) == 0);
	REQUIRE(peer_open(&bad) == 0);
	/* Reading past the object pool is refused by the "NIC" and breaks bad's session. */
	CHECK(raw_peer_read(&bad, bad.l->w.objpool.addr + bad.l->w.objpool.len - 8,
			    bad.l->w.objpool.rkey, b, 64) < 0);
	CHECK_EQ(rdmem_fab_check(bad.l->conn), -ECONNRESET);
	CHECK_EQ(raw_peer_call(&good, 1, &d, 0, &d), 0);
	raw_peer_close(&bad);
	/* Another session's lease, with that session's own rkey, is out of
	 * reach too: each session's regions are registered on its connection
	 * only (README: "its peer can reach nothing else"). */
	REQUIRE(peer_open(&bad) == 0);
	CHECK(raw_peer_read(&bad, good.l->w.objpool.addr, good.l->w.objpool.rkey, b, 64) < 0);
	CHECK_EQ(rdmem_fab_check(bad.l->conn), -ECONNRESET);
	d = desc(RDMEM_OP_PING, 0, 0);
	CHECK_EQ(raw_peer_call(&good, 1, &d, 0, &d), 0);
	CHECK_EQ(d.status, RDMEM_S_OK);
	raw_peer_close(&bad);
	d = desc(RDMEM_OP_PING, 0, 0);
	CHECK_EQ(raw_peer_call(&good, 2, &d, 0, &d), 0);
	raw_peer_close(&good);
	/* And a new session is welcome afterwards. */
	REQUIRE(peer_open(&good) == 0);
	CHECK_EQ(put(&good, "k-4", 1, 1), RDMEM_S_OK);
	raw_peer_close(&good);
}

int main(int argc, char **argv_main)
{
	char bin[512], port_s[16], ready[64];
	const char *fab = argc > 1 ? argv_main[1] : "shm";
	char *argv[] = { bin,	      "-b",	      (char *)raw_peer_target.host,
			 "-p",	      port_s,	      "--fabric",
			 (char *)fab, "--object-ttl", "300",
			 NULL };

	rdmem_log_init("test_rdma_server", 0);
	if (raw_peer_target_from(fab) < 0)
		return 1;
	argv[2] = (char *)raw_peer_target.host;
	snprintf(ready, sizeof(ready), "listening %s", fab);
	raw_peer_target.port = (uint16_t)proc_free_port_pair();
	snprintf(bin, sizeof(bin), "%s/rdmem-server", proc_bin());
	snprintf(port_s, sizeof(port_s), "%u", raw_peer_target.port);
	if (proc_start(&server, "server", argv, ready, T_TIMEOUT_MS) < 0) {
		printf("not ok - start rdmem-server\n");
		return 1;
	}
	RUN(test_eager_round_trip);
	RUN(test_lazy_and_reclaim);
	RUN(test_forced_lazy_and_ttl);
	RUN(test_forged_descriptors);
	RUN(test_garbage_slot);
	RUN(test_sessions_isolated);
	CHECK_EQ(proc_stop(&server, SIGTERM, T_TIMEOUT_MS), 0);
	return check_done();
}
