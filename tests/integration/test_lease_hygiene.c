/* test_lease_hygiene.c - no byte a session can read was written for another
 * session, and the control page tells the truth about the TCP fallback.
 *
 *   test_lease_hygiene [shm|verbs]   (default shm)
 *
 * This test plays a raw agent (agent/link.c and hand-written descriptors).
 * Session A fills its payload area and object pool with a distinctive
 * pattern (PUTs, then LAZY GETs it leaves unreclaimed) and disconnects;
 * with --max-sessions 1, session B must get the same lease. B then
 *   - RDMA-READs its whole object pool: every byte must be zero;
 *   - reads its control page: B's own figures, nothing of A's;
 *   - sends a PUT whose descriptor claims a value it never wrote, so the
 *     server stores whatever its payload area held, and reads it back:
 *     zeros, not A's request bytes;
 * with --shared-pool on and off. And --no-tcp publishes tcp_state 0.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/link.h"
#include "check.h"
#include "fabric/dataplane.h"
#include "proc.h"
#include "rdmem/util.h"

#define T_TIMEOUT_MS 5000
#define T_BUF	     (2u << 20)
#define T_SMALL	     60000u  /* a 64 KiB object */
#define T_LARGE	     200000u /* a 256 KiB object, spanning payload slots */

static struct proc server;
static unsigned port;
static enum rdmem_fab_kind fabric = RDMEM_FAB_SHM;
static const char *fab_name = "shm", *addr = "127.0.0.1", *source;

struct peer {
	struct rdmem_link *l;
	struct rdmem_mr mr;
	uint8_t *buf; /* request payloads go from here; READs land here */
	uint32_t seq;
};

static int start_server(const char *shared_pool, int no_tcp)
{
	char bin[512], p[16], tp[16], ready[64];
	char *argv[24] = { bin,
			   "-b",
			   (char *)addr,
			   "-p",
			   p,
			   "--tcp-port",
			   tp,
			   "--fabric",
			   (char *)fab_name,
			   "--max-sessions",
			   "1",
			   "--shared-pool",
			   (char *)shared_pool,
			   "--objpool-slabs",
			   "8",
			   "--object-ttl",
			   "60000",
			   NULL };

	if (no_tcp)
		argv[17] = "--no-tcp";
	port = proc_free_port_pair();
	snprintf(bin, sizeof(bin), "%s/rdmem-server", proc_bin());
	snprintf(p, sizeof(p), "%u", port);
	snprintf(tp, sizeof(tp), "%u", port + 1);
	snprintf(ready, sizeof(ready), "listening %s", fab_name);
	return proc_start(&server, "server", argv, ready, T_TIMEOUT_MS);
}

/* Connects, retrying while the server still holds the previous session's lease. */
static int peer_open(struct peer *p)
{
	struct rdmem_link_config cfg = { .fabric = fabric,
					 .host = addr,
					 .port = (uint16_t)port,
					 .ring_slots = 16,
					 .resp_bytes = 16384,
					 .timeout_ms = T_TIMEOUT_MS,
					 .src_addr = source };
	int tries;

	memset(p, 0, sizeof(*p));
	for (tries = 0; tries < 100 && rdmem_link_open(&cfg, &p->l) < 0; tries++)
		proc_sleep_ms(50);
	if (!p->l)
		return -1;
	p->buf = calloc(1, T_BUF);
	if (!p->buf)
		return -1;
	return rdmem_fab_reg(p->l->conn, p->buf, T_BUF, RDMEM_ACCESS_LOCAL, &p->mr);
}

static void peer_close(struct peer *p)
{
	rdmem_fab_dereg(p->l->conn, &p->mr);
	rdmem_link_close(p->l);
	free(p->buf);
}

/* Waits for a completion of op; 0, or -1 on error or timeout. */
static int peer_wait(struct peer *p, uint8_t op, struct rdmem_wc *out)
{
	uint64_t end = rdmem_now_ns() + T_TIMEOUT_MS * 1000000ull;
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

/* One call in slot 0: d as given, `sent` bytes of payload from p->buf. */
static int peer_call(struct peer *p, struct rdmem_desc *d, uint32_t sent, struct rdmem_desc *rep)
{
	struct rdmem_sge sge = { (uintptr_t)p->buf, sent, p->mr.lkey };
	struct rdmem_dp_msg m = {
		0,    &p->l->stage[0], p->l->mr_local.lkey,	 p->l->w.req_ring,
		&sge, sent ? 1 : 0,    p->l->w.req_payload.addr, p->l->w.req_payload.rkey
	};
	struct rdmem_wc wc;

	d->seq = ++p->seq;
	d->data_off = 0;
	p->l->stage[0] = *d;
	if (rdmem_dp_publish(p->l->conn, &m) < 0 || peer_wait(p, RDMEM_WC_RECV_IMM, &wc) < 0)
		return -1;
	if (wc.imm != 0 || rdmem_dp_take(&p->l->resp_ring[0], rep) < 0)
		return -1;
	return rep->seq == d->seq && rep->status == RDMEM_S_OK ? 0 : -1;
}

static int peer_read(struct peer *p, uint64_t raddr, uint32_t rkey, uint32_t len)
{
	struct rdmem_wr wr = { 0 };
	struct rdmem_wc wc;

	wr.wr_id = 77;
	wr.op = RDMEM_WR_READ;
	wr.flags = RDMEM_WR_SIGNALED;
	wr.remote_addr = raddr;
	wr.rkey = rkey;
	wr.nsge = 1;
	wr.sge[0] = (struct rdmem_sge){ (uintptr_t)p->buf, len, p->mr.lkey };
	return rdmem_fab_post(p->l->conn, &wr, 1) < 0 || peer_wait(p, RDMEM_WC_READ, &wc) < 0 ? -1
											      : 0;
}

static struct rdmem_desc desc(uint16_t op, uint16_t key_len, uint32_t val_len, uint16_t flags)
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

/* PUT key = len bytes; only `written` bytes of key + value really go out. */
static int put(struct peer *p, const char *key, uint32_t len, uint32_t written)
{
	struct rdmem_desc d = desc(RDMEM_OP_KV_PUT, (uint16_t)strlen(key), len, 0), rep;

	memcpy(p->buf, key, d.key_len);
	return peer_call(p, &d, written, &rep);
}

/* LAZY GET of key: the value stays in an object (unreclaimed), copied to p->buf. */
static int get_lazy(struct peer *p, const char *key, uint32_t *len)
{
	struct rdmem_desc d = desc(RDMEM_OP_KV_GET, (uint16_t)strlen(key), 0, RDMEM_F_WANT_OBJREF),
			  rep;

	memcpy(p->buf, key, d.key_len);
	if (peer_call(p, &d, d.key_len, &rep) < 0 || !(rep.flags & RDMEM_F_OBJREF))
		return -1;
	*len = rep.args.obj.length;
	return peer_read(p, p->l->w.objpool.addr + rep.args.obj.offset, p->l->w.objpool.rkey,
			 rep.args.obj.length);
}

/* Tenant A's bytes: "TENANT-A" over and over. */
static void fill_a(uint8_t *b, uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n; i++)
		b[i] = (uint8_t) "TENANT-A"[i % 8];
}

static uint64_t nonzero(const uint8_t *b, uint64_t n)
{
	uint64_t i, c = 0;

	for (i = 0; i < n; i++)
		c += b[i] != 0;
	return c;
}

/* Session A: payload area and object pool full of its pattern, then gone. */
static void tenant_a(void)
{
	struct peer a;
	uint32_t len = 0;
	int k;

	REQUIRE(peer_open(&a) == 0);
	for (k = 0; k < 2; k++) {
		const char *key = k ? "hyg-large" : "hyg-small";
		uint32_t n = k ? T_LARGE : T_SMALL;

		fill_a(a.buf + strlen(key), n);
		CHECK_EQ(put(&a, key, n, (uint32_t)strlen(key) + n), 0);
		/* Twice: two live objects of the class, both left unreclaimed. */
		CHECK_EQ(get_lazy(&a, key, &len), 0);
		CHECK_EQ(get_lazy(&a, key, &len), 0);
		CHECK_EQ(len, n);
		CHECK_EQ(a.buf[0], 'T'); /* the pattern really sits in A's object pool */
	}
	peer_close(&a);
}

/* Session B, on the lease A had: nothing of A's is readable. */
static void tenant_b(void)
{
	struct rdmem_ctrl ctrl;
	struct peer b;
	uint64_t off, dirty = 0, total;
	uint32_t len = 0;

	REQUIRE(peer_open(&b) == 0);
	total = b.l->w.objpool.len;
	for (off = 0; off < total; off += T_BUF) {
		uint32_t n = (uint32_t)RDMEM_MIN((uint64_t)T_BUF, total - off);

		REQUIRE(peer_read(&b, b.l->w.objpool.addr + off, b.l->w.objpool.rkey, n) == 0);
		dirty += nonzero(b.buf, n);
	}
	printf("# object pool: %llu bytes read, %llu not zero\n", (unsigned long long)total,
	       (unsigned long long)dirty);
	CHECK(total >= T_LARGE);
	CHECK_EQ(dirty, 0);
	/* The control page: B's own session and counters only. */
	REQUIRE(peer_read(&b, b.l->w.ctrl.addr, b.l->w.ctrl.rkey, b.l->w.ctrl.len) == 0);
	memcpy(&ctrl, b.buf, sizeof(ctrl));
	CHECK_EQ(ctrl.session_id, b.l->w.session_id);
	CHECK_EQ(ctrl.completed, 0);
	CHECK_EQ(ctrl.objects_live, 0);
	CHECK_EQ(nonzero(b.buf + sizeof(ctrl), b.l->w.ctrl.len - sizeof(ctrl)), 0);
	/* A PUT claiming T_SMALL value bytes it never writes: the server stores
	 * what the payload area held. It must be zeros, not A's request. */
	CHECK_EQ(put(&b, "hyg-b", T_SMALL, 5), 0);
	memset(b.buf, 0xee, T_SMALL);
	CHECK_EQ(get_lazy(&b, "hyg-b", &len), 0);
	CHECK_EQ(len, T_SMALL);
	CHECK_EQ(nonzero(b.buf, T_SMALL), 0);
	peer_close(&b);
}

static void lease_reuse(const char *shared_pool)
{
	REQUIRE(start_server(shared_pool, 0) == 0);
	tenant_a();
	tenant_b();
	CHECK_EQ(proc_stop(&server, SIGTERM, T_TIMEOUT_MS), 0);
}

static void test_reused_lease_shared_pool(void)
{
	lease_reuse("on");
}

static void test_reused_lease_private_pool(void)
{
	lease_reuse("off");
}

/* tcp_state says whether agents have a TCP fallback: 0 with --no-tcp. */
static void check_tcp_state(int no_tcp)
{
	struct rdmem_ctrl ctrl;
	struct peer p;

	REQUIRE(start_server("on", no_tcp) == 0);
	if (peer_open(&p) == 0) {
		CHECK_EQ(peer_read(&p, p.l->w.ctrl.addr, p.l->w.ctrl.rkey, sizeof(ctrl)), 0);
		memcpy(&ctrl, p.buf, sizeof(ctrl));
		CHECK_EQ(ctrl.magic, RDMEM_CTRL_MAGIC);
		CHECK_EQ(ctrl.rdma_state, 1);
		CHECK_EQ(ctrl.tcp_state, no_tcp ? 0 : 1);
		peer_close(&p);
	} else {
		CHECK(!"session with the server");
	}
	CHECK_EQ(proc_stop(&server, SIGTERM, T_TIMEOUT_MS), 0);
}

static void test_ctrl_tcp_state_no_tcp(void)
{
	check_tcp_state(1);
}

static void test_ctrl_tcp_state_with_tcp(void)
{
	check_tcp_state(0);
}

int main(int argc, char **argv)
{
	const char *env;

	rdmem_log_init("test_lease_hygiene", 0);
	if (argc > 1)
		fab_name = argv[1];
	if (rdmem_fab_kind_parse(fab_name, &fabric) < 0) {
		printf("not ok - fabric '%s': shm or verbs\n", fab_name);
		return 1;
	}
	if ((env = getenv("RDMEM_TEST_ADDR")) && *env)
		addr = env;
	if ((env = getenv("RDMEM_TEST_SOURCE")) && *env)
		source = env;
	RUN(test_reused_lease_shared_pool);
	RUN(test_reused_lease_private_pool);
	RUN(test_ctrl_tcp_state_no_tcp);
	RUN(test_ctrl_tcp_state_with_tcp);
	return check_done();
}
