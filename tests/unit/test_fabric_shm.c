/* test_fabric_shm.c - the shm fabric backend against the contract of
 * include/rdmem/fabric.h: handshake and private data, WRITE/READ/WRITE_IMM
 * byte-exact, completion order and selective signalling, every NIC-like
 * check and the connection break it causes, the send queue contract,
 * doorbell wake-ups without lost wake-ups, peer death, hostile immediates
 * and ring words, and no leaks (forged handshakes: test_fabric_shm_forged.c).
 * Prints the backend's latency and bandwidth as '#' lines.
 *
 * In-process pairs (server half on a thread) where two mappings of one memfd
 * are enough; forked server processes for sleeping, death and the figures.
 */
#include "tests/fabric_pair.h"

/* ---- forked servers ---- */

static int t_echo_busy;		    /* the echo child busy-polls instead of sleeping */
static _Atomic int *t_child_sleeps; /* MAP_SHARED: counted by the echo child */

/* Forks a child serving one connection on a fresh listener with fn. */
static pid_t t_fork_server(int (*fn)(struct rdmem_listener *), uint16_t *port)
{
	int pfd[2];
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	if (pipe(pfd) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		struct rdmem_listener *l;
		uint16_t pt;

		close(pfd[0]);
		alarm(30); /* never outlive a crashed parent for long */
		l = t_listen(&pt);
		if (!l || write(pfd[1], &pt, sizeof(pt)) != sizeof(pt))
			_exit(90);
		close(pfd[1]);
		_exit(fn(l));
	}
	close(pfd[1]);
	if (pid < 0 || read(pfd[0], port, sizeof(*port)) != sizeof(*port)) {
		close(pfd[0]);
		return -1;
	}
	close(pfd[0]);
	t_port_next = (uint16_t)(*port + 1);
	return pid;
}

static int t_child_status(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int t_post_imm(struct rdmem_conn *c, uint32_t imm, int flags)
{
	struct rdmem_wr w = {
		.wr_id = imm, .op = RDMEM_WR_WRITE_IMM, .flags = (uint8_t)flags, .imm = imm
	};

	return rdmem_fab_post(c, &w, 1);
}

/* Receives immediates; answers each one with T_REPLY set; ends on T_STOP or
 * when the peer leaves. Sleeps when idle unless t_echo_busy. */
static int t_echo_child(struct rdmem_listener *l)
{
	struct t_srv v = { .l = l, .recvs = 16 };
	struct rdmem_wc wc[16];
	int sleeps = 0;

	t_srv_main(&v);
	if (v.rc)
		return 1;
	for (unsigned spins = 0;; spins++) {
		int n =
		    t_echo_busy ? rdmem_fab_poll(v.s.c, wc, 16) : t_wait(v.s.c, wc, 16, &sleeps);

		if (t_child_sleeps)
			atomic_store(t_child_sleeps, sleeps);

		if (n < 0)
			return n == -ETIMEDOUT ? 10 : 11;
		for (int i = 0; i < n; i++) {
			if (wc[i].status == RDMEM_WC_FLUSH_ERR)
				return 0;
			if (wc[i].status || wc[i].op != RDMEM_WC_RECV_IMM)
				return 12;
			if (wc[i].imm == T_STOP)
				return 0;
			if ((wc[i].imm & T_REPLY) && t_post_imm(v.s.c, wc[i].imm, 0))
				return 13;
		}
		if (n && rdmem_fab_post_recv(v.s.c, n))
			return 14;
		if (!n && spins % 64 == 63)
			sched_yield();
	}
}

/* ---- handshake ---- */

static void test_connect_private_data(void)
{
	struct t_pair p;

	T_OK(t_pair_open(&p, NULL, 0, 0));
	for (int i = 0; i < T_NAREA; i++) {
		CHECK_EQ(p.cli.peer[i].addr, (uintptr_t)p.srv.s.mr[i].addr);
		CHECK_EQ(p.cli.peer[i].rkey, p.srv.s.mr[i].rkey);
		CHECK_EQ(p.srv.s.peer[i].addr, (uintptr_t)p.cli.mr[i].addr);
		CHECK_EQ(p.srv.s.peer[i].rkey, p.cli.mr[i].rkey);
	}
	CHECK(strstr(rdmem_fab_peer(p.cli.c), "@rdmem-shm:") != NULL);
	CHECK(strstr(rdmem_fab_peer(p.srv.s.c), "client pid") != NULL);
	CHECK_EQ(rdmem_fab_check(p.cli.c), 0);
	CHECK_EQ(rdmem_fab_check(p.srv.s.c), 0);
	CHECK(!t_readable(rdmem_fab_event_fd(p.cli.c), 0));
	CHECK(!t_readable(rdmem_fab_event_fd(p.srv.s.c), 0));
	CHECK_EQ(rdmem_fab_max_inline(p.cli.c), SHMFAB_MAX_INLINE);
	t_pair_close(&p);
}

static void test_reject_with_reason(void)
{
	struct t_pair p = { 0 };
	char reason[64] = { 0 };
	size_t len = sizeof(reason);

	p.l = t_listen(&p.port);
	REQUIRE(p.l);
	CHECK_EQ(t_connect(&p, NULL, 0, 0, "busy: try later", reason, &len), -ECONNREFUSED);
	CHECK_EQ(p.srv.rc, 0);
	CHECK_EQ(len, strlen("busy: try later") + 1);
	CHECK(strcmp(reason, "busy: try later") == 0);
	t_pair_close(&p);
}

static void test_private_data_limits(void)
{
	struct rdmem_listener *l;
	struct rdmem_conn *c = NULL;
	uint8_t big[200] = { 0 };
	size_t plen = sizeof(big);
	uint16_t port;

	l = t_listen(&port);
	REQUIRE(l);
	T_OK(rdmem_fab_resolve(RDMEM_FAB_SHM, "localhost", port, NULL, T_TIMEOUT, &c));
	/* rdma_cm carries at most 56 bytes in a connect request, 54 of them ours. */
	CHECK_EQ(rdmem_fab_connect(c, big, SHMFAB_PRIV_CONNECT + 1, big, &plen, 100), -EMSGSIZE);
	CHECK_EQ(rdmem_fab_connect(c, big, 8, big, &plen, 100), -ETIMEDOUT);
	rdmem_fab_close(c);
	rdmem_fab_listener_close(l);
}

static void test_resolve_errors(void)
{
	struct rdmem_listener *l;
	struct rdmem_conn *c = NULL;
	uint16_t port;

	/* TEST-NET-1 is never this host. */
	CHECK_EQ(rdmem_fab_resolve(RDMEM_FAB_SHM, "192.0.2.1", 7471, NULL, 100, &c), -EHOSTUNREACH);
	l = t_listen(&port);
	REQUIRE(l);
	rdmem_fab_listener_close(l);
	CHECK_EQ(rdmem_fab_resolve(RDMEM_FAB_SHM, "127.0.0.1", port, NULL, 100, &c), -ECONNREFUSED);
	CHECK(c == NULL);
}

/* ---- data path ---- */

static void test_write_sges(void)
{
	static const uint32_t lens[4] = { 1, 7, 300, 4093 };
	static uint8_t expect[8192];
	struct rdmem_wc wc[2];
	struct t_pair p;

	T_OK(t_pair_open(&p, NULL, 0, 0));
	for (int nsge = 1; nsge <= 4; nsge++) {
		uint64_t off = 16384ull * (uint64_t)nsge + 3;
		struct rdmem_wr w =
		    t_wr((uint64_t)nsge, RDMEM_WR_WRITE, RDMEM_WR_SIGNALED, &p.cli.peer[T_RW], off);
		uint8_t *dst = p.srv.s.area[T_RW] + off;
		uint32_t total = 0;

		for (int i = 0; i < nsge; i++) {
			uint8_t *a = p.cli.local + 8192 * i + (uint32_t)i;

			for (uint32_t k = 0; k < lens[i]; k++)
				a[k] = (uint8_t)(nsge * 31 + i * 7 + (int)k);
			t_sge(&w, a, lens[i], p.cli.lmr.lkey);
			memcpy(expect + total, a, lens[i]);
			total += lens[i];
		}
		CHECK_EQ(rdmem_fab_post(p.cli.c, &w, 1), 0);
		CHECK_EQ(t_poll(p.cli.c, wc, 1), 1);
		CHECK_EQ(wc[0].wr_id, nsge);
		CHECK_EQ(wc[0].status, RDMEM_WC_SUCCESS);
		CHECK_EQ(wc[0].op, RDMEM_WC_WRITE);
		CHECK(memcmp(dst, expect, total) == 0);
		CHECK_EQ(dst[-1], 0);
		CHECK_EQ(dst[total], 0);
	}
	/* State words: 8 and 4 aligned bytes gathered from two SGEs. */
	uint64_t v8 = 0x1122334455667788ull;
	uint32_t v4 = 0xa1b2c3d4u;
	memcpy(p.cli.local, &v8, 8);
	memcpy(p.cli.local + 64, &v4, 4);
	struct rdmem_wr ws[2] = {
		t_wr(10, RDMEM_WR_WRITE, 0, &p.cli.peer[T_RW], 256),
		t_wr(11, RDMEM_WR_WRITE, RDMEM_WR_SIGNALED, &p.cli.peer[T_RW], 264),
	};
	t_sge(&ws[0], p.cli.local, 3, p.cli.lmr.lkey);
	t_sge(&ws[0], p.cli.local + 3, 5, p.cli.lmr.lkey);
	t_sge(&ws[1], p.cli.local + 64, 4, p.cli.lmr.lkey);
	CHECK_EQ(rdmem_fab_post(p.cli.c, ws, 2), 0);
	CHECK_EQ(t_poll(p.cli.c, wc, 1), 1);
	CHECK_EQ(wc[0].wr_id, 11);
	CHECK(memcmp(p.srv.s.area[T_RW] + 256, &v8, 8) == 0);
	CHECK(memcmp(p.srv.s.area[T_RW] + 264, &v4, 4) == 0);
	CHECK_EQ(rdmem_fab_poll(p.cli.c, wc, 2), 0);
	t_pair_close(&p);
}

static void test_read_sges(void)
{
	static const uint32_t lens[4] = { 5000, 1, 64, 333 };
	uint8_t *src;
	struct rdmem_wc wc;
	struct t_pair p;

	T_OK(t_pair_open(&p, NULL, 0, 0));
	src = p.srv.s.area[T_RO];
	for (uint32_t k = 0; k < T_AREA; k++)
		src[k] = (uint8_t)(k * 13 + 5);
	for (int nsge = 1; nsge <= 4; nsge++) {
		uint64_t off = 777ull * (uint64_t)nsge;
		struct rdmem_wr w = t_wr(100 + (uint64_t)nsge, RDMEM_WR_READ, RDMEM_WR_SIGNALED,
					 &p.cli.peer[T_RO], off);
		uint64_t done = 0;

		memset(p.cli.local, 0, 65536);
		for (int i = 0; i < nsge; i++)
			t_sge(&w, p.cli.local + 16384 * i + 1, lens[i], p.cli.lmr.lkey);
		CHECK_EQ(rdmem_fab_post(p.cli.c, &w, 1), 0);
		CHECK_EQ(t_poll(p.cli.c, &wc, 1), 1);
		CHECK_EQ(wc.wr_id, 100 + nsge);
		CHECK_EQ(wc.status, RDMEM_WC_SUCCESS);
		CHECK_EQ(wc.op, RDMEM_WC_READ);
		for (int i = 0; i < nsge; i++) {
			uint8_t *d = p.cli.local + 16384 * i + 1;

			CHECK(memcmp(d, src + off + done, lens[i]) == 0);
			CHECK_EQ(d[-1], 0);
			CHECK_EQ(d[lens[i]], 0);
			done += lens[i];
		}
	}
	/* An aligned 8-byte READ (one atomic load) scattered into 3 + 5 bytes. */
	struct rdmem_wr w = t_wr(200, RDMEM_WR_READ, RDMEM_WR_SIGNALED, &p.cli.peer[T_RO], 4096);
	t_sge(&w, p.cli.local + 100, 3, p.cli.lmr.lkey);
	t_sge(&w, p.cli.local + 200, 5, p.cli.lmr.lkey);
	CHECK_EQ(rdmem_fab_post(p.cli.c, &w, 1), 0);
	CHECK_EQ(t_poll(p.cli.c, &wc, 1), 1);
	CHECK(memcmp(p.cli.local + 100, src + 4096, 3) == 0);
	CHECK(memcmp(p.cli.local + 200, src + 4099, 5) == 0);
	t_pair_close(&p);
}

static void test_order_and_signalling(void)
{
	struct rdmem_wc wc[8];
	struct rdmem_wr w[6];
	struct t_pair p;
	static const uint64_t want[] = { 1, 3, 4, 6, 8 };

	T_OK(t_pair_open(&p, NULL, 0, 0));
	for (int i = 0; i < 6; i++) {
		int sig = i == 0 || i == 2 || i == 3 || i == 5;

		w[i] = t_wr((uint64_t)i + 1, i == 3 ? RDMEM_WR_READ : RDMEM_WR_WRITE,
			    sig ? RDMEM_WR_SIGNALED : 0, &p.cli.peer[T_RW], 64ull * (uint64_t)i);
		t_sge(&w[i], p.cli.local + 64 * i, 16, p.cli.lmr.lkey);
	}
	CHECK_EQ(rdmem_fab_post(p.cli.c, w, 6), 0);
	w[0].wr_id = 7;
	w[0].flags = 0;
	CHECK_EQ(rdmem_fab_post(p.cli.c, &w[0], 1), 0);
	w[0].wr_id = 8;
	w[0].flags = RDMEM_WR_SIGNALED;
	CHECK_EQ(rdmem_fab_post(p.cli.c, &w[0], 1), 0);
	CHECK_EQ(t_poll(p.cli.c, wc, 5), 5);
	for (int i = 0; i < 5; i++) {
		CHECK_EQ(wc[i].wr_id, want[i]);
		CHECK_EQ(wc[i].status, RDMEM_WC_SUCCESS);
		CHECK_EQ(wc[i].op, want[i] == 4 ? RDMEM_WC_READ : RDMEM_WC_WRITE);
	}
	CHECK_EQ(rdmem_fab_poll(p.cli.c, wc, 8), 0);
	t_pair_close(&p);
}

static void test_write_imm(void)
{
	static const uint32_t imms[] = { 0xdeadbeefu, 7, 0, 0x12345678u };
	struct rdmem_wc wc[8];
	struct rdmem_wr w[4];
	struct t_pair p;

	T_OK(t_pair_open(&p, NULL, 8, 0));
	for (int i = 0; i < 3; i++) {
		memset(p.cli.local + 128 * i, 0x40 + i, 100);
		w[i] = t_wr((uint64_t)i, RDMEM_WR_WRITE_IMM, 0, &p.cli.peer[T_WO],
			    128ull * (uint64_t)i);
		w[i].imm = imms[i];
		t_sge(&w[i], p.cli.local + 128 * i, 100, p.cli.lmr.lkey);
	}
	/* A bare doorbell: no data, so no rkey is checked (as with IB). */
	w[3] = (struct rdmem_wr){
		.wr_id = 3, .op = RDMEM_WR_WRITE_IMM, .flags = RDMEM_WR_SIGNALED, .imm = imms[3]
	};
	CHECK_EQ(rdmem_fab_post(p.cli.c, w, 4), 0);
	CHECK_EQ(t_poll(p.cli.c, wc, 1), 1);
	CHECK_EQ(wc[0].wr_id, 3);
	CHECK_EQ(wc[0].status, RDMEM_WC_SUCCESS);
	CHECK_EQ(t_poll(p.srv.s.c, wc, 4), 4);
	for (int i = 0; i < 4; i++) {
		CHECK_EQ(wc[i].op, RDMEM_WC_RECV_IMM);
		CHECK_EQ(wc[i].status, RDMEM_WC_SUCCESS);
		CHECK_EQ(wc[i].imm, imms[i]);
		CHECK_EQ(wc[i].wr_id, 0);
	}
	for (int i = 0; i < 3; i++) {
		uint8_t *d = p.srv.s.area[T_WO] + 128 * i;

		CHECK(d[0] == 0x40 + i && d[99] == 0x40 + i && d[100] == 0);
	}
	CHECK_EQ(rdmem_fab_poll(p.srv.s.c, wc, 8), 0);
	t_pair_close(&p);
}

static void t_check_broken_both(struct t_pair *p, int srv_recvs)
{
	struct rdmem_wc wc[8];
	struct rdmem_wr w = t_wr(99, RDMEM_WR_WRITE, 0, &p->srv.s.peer[T_RW], 0);
	int n;

	CHECK_EQ(rdmem_fab_check(p->cli.c), -ECONNRESET);
	CHECK(t_readable(rdmem_fab_event_fd(p->cli.c), 0));
	CHECK(t_readable(rdmem_fab_event_fd(p->srv.s.c), T_TIMEOUT));
	CHECK(t_readable(rdmem_fab_comp_fd(p->srv.s.c), 0));
	CHECK_EQ(rdmem_fab_check(p->srv.s.c), -ECONNRESET);
	/* The peer's posted receives flush, as its QP entered the error state. */
	n = rdmem_fab_poll(p->srv.s.c, wc, 8);
	CHECK_EQ(n, srv_recvs);
	for (int i = 0; i < n; i++)
		CHECK(wc[i].status == RDMEM_WC_FLUSH_ERR && wc[i].op == RDMEM_WC_RECV_IMM);
	/* And it accepts no new WR, as an RC QP in the error state. */
	t_sge(&w, p->srv.s.local, 8, p->srv.s.lmr.lkey);
	CHECK_EQ(rdmem_fab_post(p->srv.s.c, &w, 1), -ECONNRESET);
	CHECK_EQ(rdmem_fab_poll(p->srv.s.c, wc, 8), 0);
}

static void test_rnr(void)
{
	struct rdmem_wc wc[4];
	struct rdmem_wr w[2];
	struct t_pair p;

	T_OK(t_pair_open(&p, NULL, 1, 0));
	memset(p.cli.local, 0x5a, 16);
	for (int i = 0; i < 2; i++) {
		w[i] = t_wr((uint64_t)i + 1, RDMEM_WR_WRITE_IMM, 0, &p.cli.peer[T_RW],
			    64ull * (uint64_t)i);
		w[i].imm = (uint32_t)i + 40;
		t_sge(&w[i], p.cli.local, 16, p.cli.lmr.lkey);
	}
	CHECK_EQ(rdmem_fab_post(p.cli.c, w, 2), 0);
	CHECK_EQ(rdmem_fab_poll(p.cli.c, wc, 4), 1);
	CHECK(wc[0].wr_id == 2 && wc[0].status == RDMEM_WC_RNR_ERR);
	CHECK_EQ(p.srv.s.area[T_RW][64], 0); /* an RNR-refused WRITE_IMM lands nothing */
	CHECK_EQ(p.srv.s.area[T_RW][0], 0x5a);
	/* The immediate that had a receive is still delivered after the break. */
	CHECK_EQ(rdmem_fab_poll(p.srv.s.c, wc, 4), 1);
	CHECK(wc[0].imm == 40 && wc[0].status == RDMEM_WC_SUCCESS);
	w[0].wr_id = 3;
	CHECK_EQ(rdmem_fab_post(p.cli.c, w, 1), -ECONNRESET);
	CHECK_EQ(rdmem_fab_poll(p.cli.c, wc, 4), 0);
	t_check_broken_both(&p, 0);
	t_pair_close(&p);
}

enum {
	V_RKEY,
	V_PAST_END,
	V_OVERFLOW,
	V_READ_WO,
	V_WRITE_RO,
	V_IMM_RO,
	V_REVOKED,
	V_LOCAL_OUTSIDE,
	V_LKEY,
	V_NCASES
};

static struct rdmem_wr t_bad_wr(struct t_pair *p, int v)
{
	struct t_side *s = &p->cli;
	struct rdmem_wr w = t_wr(2, RDMEM_WR_WRITE, 0, &s->peer[T_RW], 0);

	t_sge(&w, s->local, 16, s->lmr.lkey);
	switch (v) {
	case V_RKEY:
		w.rkey ^= 0x100;
		break; /* same index, wrong random part */
	case V_PAST_END:
		w.remote_addr += T_AREA - 8;
		break;
	case V_OVERFLOW:
		w.remote_addr = UINT64_MAX - 7;
		break; /* +16 wraps to 8 */
	case V_READ_WO:
		w = t_wr(2, RDMEM_WR_READ, 0, &s->peer[T_WO], 0);
		t_sge(&w, s->local, 16, s->lmr.lkey);
		break;
	case V_WRITE_RO:
		w.remote_addr = s->peer[T_RO].addr;
		w.rkey = s->peer[T_RO].rkey;
		break;
	case V_IMM_RO:
		w.op = RDMEM_WR_WRITE_IMM;
		w.remote_addr = s->peer[T_RO].addr;
		w.rkey = s->peer[T_RO].rkey;
		break;
	case V_REVOKED:
		w.remote_addr = s->peer[T_WO].addr;
		w.rkey = s->peer[T_WO].rkey;
		break;
	case V_LOCAL_OUTSIDE:
		w.sge[0].addr = (uintptr_t)s->local + T_AREA - 8;
		break;
	case V_LKEY:
		w.sge[0].lkey ^= 0x100;
		break;
	}
	return w;
}

static int t_untouched(const uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i])
			return 0;
	return 1;
}

static void test_violations(void)
{
	static const char *const names[V_NCASES] = {
		"bad rkey",	     "past the end",	  "address overflow",
		"READ write-only",   "WRITE read-only",	  "WRITE_IMM read-only",
		"deregistered rkey", "local SGE outside", "bad lkey",
	};
	for (int v = 0; v < V_NCASES; v++) {
		unsigned want =
		    v >= V_LOCAL_OUTSIDE ? RDMEM_WC_LOC_PROT_ERR : RDMEM_WC_REM_ACCESS_ERR;
		struct rdmem_wc wc[4];
		struct rdmem_wr w[3];
		struct t_pair p;
		int failed_before = check_case_failed;

		T_OK(t_pair_open(&p, NULL, 2, 0));
		if (v == V_REVOKED)
			rdmem_fab_dereg(p.srv.s.c, &p.srv.s.mr[T_WO]);
		memset(p.cli.local, 0x77, 64);
		w[0] = t_wr(1, RDMEM_WR_WRITE, RDMEM_WR_SIGNALED, &p.cli.peer[T_RW], 4096);
		t_sge(&w[0], p.cli.local, 8, p.cli.lmr.lkey);
		w[1] = t_bad_wr(&p, v); /* unsignaled: errors complete regardless */
		w[2] = w[0];
		w[2].wr_id = 3;
		CHECK_EQ(rdmem_fab_post(p.cli.c, w, 3), 0);
		CHECK_EQ(rdmem_fab_poll(p.cli.c, wc, 4), 3);
		CHECK(wc[0].wr_id == 1 && wc[0].status == RDMEM_WC_SUCCESS);
		CHECK(wc[1].wr_id == 2 && wc[1].status == want);
		CHECK(wc[2].wr_id == 3 && wc[2].status == RDMEM_WC_FLUSH_ERR);
		CHECK_EQ(p.srv.s.area[T_RW][4096], 0x77);
		CHECK(t_untouched(p.srv.s.area[T_RO], T_AREA));
		CHECK(t_untouched(p.srv.s.area[T_WO], T_AREA));
		CHECK(t_untouched(p.srv.s.area[T_RW] + T_AREA - 8, 8));
		t_check_broken_both(&p, 2);
		t_pair_close(&p);
		if (check_case_failed != failed_before)
			fprintf(stderr, "  ^ in violation case '%s'\n", names[v]);
	}
}

static void test_send_queue_full(void)
{
	struct rdmem_fab_attr attr = { .max_send_wr = 8, .max_recv_wr = 4, .signal_every = 8 };
	struct rdmem_wc wc[16];
	struct rdmem_wr w[9];
	struct t_pair p;

	T_OK(t_pair_open(&p, &attr, 0, 0));
	for (int i = 0; i < 9; i++) {
		w[i] = t_wr((uint64_t)i, RDMEM_WR_WRITE, 0, &p.cli.peer[T_RW], 512);
		t_sge(&w[i], p.cli.local, 1, p.cli.lmr.lkey);
	}
	/* Unsignaled WRs hold their slots until a poll reaps our own signal. */
	for (int i = 0; i < 8; i++)
		CHECK_EQ(rdmem_fab_post(p.cli.c, &w[i], 1), 0);
	CHECK_EQ(rdmem_fab_post(p.cli.c, &w[8], 1), -EAGAIN);
	CHECK_EQ(rdmem_fab_poll(p.cli.c, wc, 16), 0);
	CHECK_EQ(rdmem_fab_post(p.cli.c, &w[8], 1), 0); /* 1 slot in use */
	for (int i = 0; i < 9; i++)
		w[i].flags = RDMEM_WR_SIGNALED;
	for (int i = 0; i < 7; i++)
		CHECK_EQ(rdmem_fab_post(p.cli.c, &w[i], 1), 0);
	CHECK_EQ(rdmem_fab_post(p.cli.c, &w[7], 1), -EAGAIN);
	CHECK_EQ(rdmem_fab_poll(p.cli.c, wc, 16), 7);
	/* A batch that does not fit posts nothing. */
	p.cli.local[0] = 0x99;
	CHECK_EQ(rdmem_fab_post(p.cli.c, w, 9), -EAGAIN);
	CHECK(p.srv.s.area[T_RW][512] != 0x99);
	CHECK_EQ(rdmem_fab_post(p.cli.c, w, 8), 0);
	CHECK_EQ(rdmem_fab_poll(p.cli.c, wc, 16), 8);
	CHECK_EQ(p.srv.s.area[T_RW][512], 0x99);
	/* Receives: posted but not yet polled count against max_recv_wr. */
	CHECK_EQ(rdmem_fab_post_recv(p.cli.c, 4), 0);
	CHECK_EQ(rdmem_fab_post_recv(p.cli.c, 1), -EAGAIN);
	CHECK_EQ(t_post_imm(p.srv.s.c, 5, 0), 0);
	CHECK_EQ(rdmem_fab_post_recv(p.cli.c, 1), -EAGAIN);
	CHECK_EQ(rdmem_fab_poll(p.cli.c, wc, 16), 1);
	CHECK_EQ(rdmem_fab_post_recv(p.cli.c, 1), 0);
	CHECK_EQ(rdmem_fab_post_recv(p.cli.c, 1), -EAGAIN);
	t_pair_close(&p);

	/* With the default signal_every, a caller that polls never sees -EAGAIN. */
	attr.signal_every = 0;
	T_OK(t_pair_open(&p, &attr, 0, 0));
	w[0] = t_wr(1, RDMEM_WR_WRITE, 0, &p.cli.peer[T_RW], 0);
	t_sge(&w[0], p.cli.local, 8, p.cli.lmr.lkey);
	for (int i = 0; i < 100; i++) {
		CHECK_EQ(rdmem_fab_post(p.cli.c, w, 1), 0);
		CHECK_EQ(rdmem_fab_poll(p.cli.c, wc, 16), 0);
	}
	t_pair_close(&p);
}

static void test_malformed_wrs(void)
{
	uint8_t stack[SHMFAB_MAX_INLINE + 1];
	struct rdmem_wc wc[2];
	struct rdmem_wr w;
	struct t_pair p;

	T_OK(t_pair_open(&p, NULL, 0, 0));
	memset(stack, 0x31, sizeof(stack));
	/* Inline data needs no registration. */
	w = t_wr(1, RDMEM_WR_WRITE, RDMEM_WR_SIGNALED | RDMEM_WR_INLINE, &p.cli.peer[T_RW], 0);
	t_sge(&w, stack, SHMFAB_MAX_INLINE, 0);
	CHECK_EQ(rdmem_fab_post(p.cli.c, &w, 1), 0);
	CHECK_EQ(rdmem_fab_poll(p.cli.c, wc, 2), 1);
	CHECK(wc[0].status == RDMEM_WC_SUCCESS &&
	      p.srv.s.area[T_RW][SHMFAB_MAX_INLINE - 1] == 0x31);
	w.op = RDMEM_WR_READ;
	w.sge[0].len = 8;
	CHECK_EQ(rdmem_fab_post(p.cli.c, &w, 1), -EINVAL);
	w.op = 9;
	CHECK_EQ(rdmem_fab_post(p.cli.c, &w, 1), -EINVAL);
	w.op = RDMEM_WR_WRITE;
	w.nsge = RDMEM_FAB_MAX_SGE + 1;
	CHECK_EQ(rdmem_fab_post(p.cli.c, &w, 1), -EINVAL);
	CHECK_EQ(rdmem_fab_post_recv(p.cli.c, 0), -EINVAL);
	CHECK_EQ(rdmem_fab_poll(p.cli.c, wc, 2), 0);
	CHECK_EQ(rdmem_fab_check(p.cli.c), 0); /* refused posts break nothing */
	t_pair_close(&p);
}

/*
 * A hostile peer with the fd of a read-only export: memfds have mode 0777,
 * so reopening it through /proc/self/fd gives a writable file; the seal
 * must still refuse every way of writing through it. Ours, mapped before
 * the export, keeps writing.
 */
static void t_read_only_stays_read_only(struct rdmem_conn *c)
{
	struct rdmem_mr mr;
	char path[64];
	uint8_t *mem = rdmem_fab_alloc(c, 8192), *w;
	int fd;

	REQUIRE(mem);
	REQUIRE(rdmem_fab_reg(c, mem, 8192, RDMEM_ACCESS_REMOTE_READ, &mr) == 0);
	snprintf(path, sizeof(path), "/proc/self/fd/%d",
		 ((struct shmfab_conn *)c)->mr[SHMFAB_KEY_IDX(mr.lkey)].fd);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd >= 0) { /* the open itself is allowed: the seal is the guard */
		w = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		CHECK(w == MAP_FAILED);
		if (w != MAP_FAILED)
			munmap(w, 8192);
		CHECK(pwrite(fd, "x", 1, 0) < 0);
		close(fd);
	}
	w = mmap(NULL, 8192, PROT_READ, MAP_SHARED,
		 ((struct shmfab_conn *)c)->mr[SHMFAB_KEY_IDX(mr.lkey)].fd, 0);
	CHECK(w != MAP_FAILED);
	if (w != MAP_FAILED) {
		CHECK(mprotect(w, 8192, PROT_READ | PROT_WRITE) < 0);
		munmap(w, 8192);
	}
	mem[0] = 0x42; /* our own mapping, made before the seal */
	CHECK_EQ(mem[0], 0x42);
	/* The other access on the same file: refused, one file one access. */
	{
		struct rdmem_mr mr2;

		CHECK_EQ(rdmem_fab_reg(c, mem, 8192, RDMEM_ACCESS_REMOTE_WRITE, &mr2), -EINVAL);
	}
	rdmem_fab_dereg(c, &mr);
	rdmem_fab_free(c, mem, 8192);
}

static void test_registration_rules(void)
{
	struct rdmem_listener *l;
	struct rdmem_conn *c = NULL;
	struct rdmem_mr mr;
	uint16_t port;
	void *heap = malloc(8192), *mem;
	long pg = sysconf(_SC_PAGESIZE);

	REQUIRE(heap && pg > 0);
	l = t_listen(&port);
	REQUIRE(l);
	T_OK(rdmem_fab_resolve(RDMEM_FAB_SHM, NULL, port, NULL, T_TIMEOUT, &c));
	CHECK_EQ(rdmem_fab_reg(c, heap, 8192, RDMEM_ACCESS_REMOTE_WRITE, &mr), -EINVAL);
	CHECK_EQ(rdmem_fab_reg(c, heap, 8192, RDMEM_ACCESS_LOCAL, &mr), 0);
	CHECK_EQ(mr.access, RDMEM_ACCESS_LOCAL);
	rdmem_fab_dereg(c, &mr);
	CHECK_EQ(rdmem_fab_reg(c, heap, 8192, 1u << 7, &mr), -EINVAL);
	mem = rdmem_fab_alloc(c, 10000);
	REQUIRE(mem);
	CHECK_EQ(((uintptr_t)mem) % (uintptr_t)pg, 0);
	CHECK_EQ(rdmem_fab_reg(c, (uint8_t *)mem + 8000, 8192, RDMEM_ACCESS_REMOTE_READ, &mr),
		 -EINVAL);
	/* Remote access takes the whole allocation: the peer gets its file, so
	 * a part would hand it the rest (a writable fd maps every byte). */
	CHECK_EQ(rdmem_fab_reg(c, (uint8_t *)mem + 100, 9000, RDMEM_ACCESS_REMOTE_READ, &mr),
		 -EINVAL);
	if (pg < 10000) { /* more than one page: one page of it is a part */
		CHECK_EQ(rdmem_fab_reg(c, mem, (uint64_t)pg, RDMEM_ACCESS_REMOTE_WRITE, &mr),
			 -EINVAL);
		CHECK_EQ(rdmem_fab_reg(c, (uint8_t *)mem + pg, 10000 - (uint64_t)pg,
				       RDMEM_ACCESS_REMOTE_READ, &mr),
			 -EINVAL);
	}
	CHECK_EQ(rdmem_fab_reg(c, (uint8_t *)mem + 100, 9000, RDMEM_ACCESS_LOCAL, &mr), 0);
	rdmem_fab_dereg(c, &mr);
	/* From its start into its last page: the allocation, and the file the
	 * peer would get holds exactly it. */
	CHECK_EQ(rdmem_fab_reg(c, mem, 9000, RDMEM_ACCESS_REMOTE_WRITE, &mr), 0);
	CHECK(mr.rkey != mr.lkey);
	{
		const struct shmfab_mr *m = &((struct shmfab_conn *)c)->mr[SHMFAB_KEY_IDX(mr.lkey)];
		struct stat st;

		CHECK(m->fd >= 0 && fstat(m->fd, &st) == 0 &&
		      st.st_size == (10000 + pg - 1) / pg * pg);
	}
	rdmem_fab_dereg(c, &mr);
	CHECK(mr.impl == NULL);
	/* Exported writable, so the file is: read-only would be refused. */
	CHECK_EQ(rdmem_fab_reg(c, mem, 10000, RDMEM_ACCESS_REMOTE_READ, &mr), -EINVAL);
	rdmem_fab_free(c, mem, 10000);
	t_read_only_stays_read_only(c);
	rdmem_fab_close(c);
	rdmem_fab_listener_close(l);
	free(heap);
}

/* A peer that queues more immediates than we gave it credits breaks the
 * connection; nothing bogus is delivered. */
static void test_hostile_immediates(void)
{
	struct rdmem_wc wc[8];
	struct t_pair p;
	struct shmfab_conn *cc;

	T_OK(t_pair_open(&p, NULL, 2, 0));
	cc = (struct shmfab_conn *)p.cli.c;
	atomic_store(&cc->peer_page->produced, 5);
	CHECK_EQ(rdmem_fab_poll(p.srv.s.c, wc, 8), 2);
	CHECK(wc[0].status == RDMEM_WC_FLUSH_ERR && wc[1].status == RDMEM_WC_FLUSH_ERR);
	CHECK_EQ(rdmem_fab_check(p.srv.s.c), -ECONNRESET);
	CHECK(t_readable(rdmem_fab_event_fd(p.cli.c), T_TIMEOUT));
	CHECK_EQ(rdmem_fab_check(p.cli.c), -ECONNRESET);
	t_pair_close(&p);
}
/* ---- wake-ups ---- */

/* Sleeps armed until the parent's immediate wakes it. */
static int t_sleeper_child(struct rdmem_listener *l)
{
	struct t_srv v = { .l = l, .recvs = 4 };
	struct pollfd pf;
	struct rdmem_wc wc;

	t_srv_main(&v);
	if (v.rc)
		return 1;
	pf = (struct pollfd){ .fd = rdmem_fab_comp_fd(v.s.c), .events = POLLIN };
	if (rdmem_fab_poll(v.s.c, &wc, 1) != 0 || rdmem_fab_arm(v.s.c) ||
	    rdmem_fab_poll(v.s.c, &wc, 1) != 0)
		return 2;
	if (poll(&pf, 1, 0) != 0)
		return 3;
	if (t_post_imm(v.s.c, 1, 0)) /* "I am going to sleep" */
		return 4;
	if (poll(&pf, 1, T_TIMEOUT) != 1)
		return 5; /* not woken: a lost wake-up */
	rdmem_fab_ack(v.s.c);
	if (poll(&pf, 1, 0) != 0)
		return 6; /* ack did not consume the event */
	if (rdmem_fab_poll(v.s.c, &wc, 1) != 1 || wc.imm != 42 || wc.status)
		return 7;
	t_side_close(&v.s);
	rdmem_fab_listener_close(l);
	return 0;
}

static void test_arm_wakes_sleeper(void)
{
	struct t_pair p = { 0 };
	struct rdmem_wc wc;
	pid_t pid = t_fork_server(t_sleeper_child, &p.port);

	REQUIRE(pid > 0);
	CHECK_EQ(t_client(&p, NULL, 4, NULL, NULL), 0);
	CHECK_EQ(t_wait(p.cli.c, &wc, 1, NULL), 1);
	CHECK_EQ(wc.imm, 1);
	usleep(50 * 1000); /* the child is asleep in poll() by now */
	CHECK_EQ(t_post_imm(p.cli.c, 42, 0), 0);
	CHECK_EQ(t_child_status(pid), 0);
	t_side_close(&p.cli);
}

/* Windows of immediates against the sleeping echo child, each answered;
 * both sides sleep whenever idle. A lost wake-up stalls 5 s and fails. */
static void test_no_lost_wakeup(void)
{
	struct t_pair p = { 0 };
	struct rdmem_wc wc[4];
	uint32_t seq = 0, sent = 0;
	int sleeps = 0, windows = 3000;
	uint64_t t0;
	pid_t pid;

	t_echo_busy = 0;
	pid = t_fork_server(t_echo_child, &p.port);
	REQUIRE(pid > 0);
	CHECK_EQ(t_client(&p, NULL, 4, NULL, NULL), 0);
	t0 = rdmem_now_ns();
	srand(check_seed("wake stress", 7));
	for (int i = 0; i < windows && !check_case_failed; i++) {
		int w = 1 + rand() % 8, n;

		for (int k = 0; k < w; k++, sent++) {
			CHECK_EQ(t_post_imm(p.cli.c, ++seq | (k == w - 1 ? T_REPLY : 0), 0), 0);
			if (rand() % 4 == 0)
				sched_yield();
		}
		if (rand() % 4 == 0) /* let the child fall asleep before the next window */
			usleep((useconds_t)(rand() % 100));
		n = t_wait(p.cli.c, wc, 4, &sleeps);
		CHECK_EQ(n, 1);
		CHECK(n == 1 && wc[0].imm == (seq | T_REPLY) && wc[0].status == 0);
		CHECK_EQ(rdmem_fab_post_recv(p.cli.c, 1), 0);
	}
	CHECK_EQ(t_post_imm(p.cli.c, T_STOP, 0), 0);
	CHECK_EQ(t_child_status(pid), 0);
	printf("# wake stress: %d windows, %u immediates, sleeps: client %d, server %d, %.0f ms\n",
	       windows, sent, sleeps, t_child_sleeps ? atomic_load(t_child_sleeps) : -1,
	       (double)(rdmem_now_ns() - t0) / 1e6);
	/* The test is about wake-ups: both sides must have gone to sleep (and
	 * been woken) at least once, or it only showed busy polling works. */
	CHECK(sleeps > 0);
	CHECK(t_child_sleeps && atomic_load(t_child_sleeps) > 0);
	t_side_close(&p.cli);
}

/* ---- peer death and leaks ---- */

static int t_doomed_child(struct rdmem_listener *l)
{
	struct t_srv v = { .l = l, .recvs = 4 };

	t_srv_main(&v);
	if (v.rc)
		return 1;
	for (;;)
		pause();
}

static void test_peer_death(void)
{
	struct t_pair p = { 0 };
	struct rdmem_wc wc[4];
	struct rdmem_wr w;
	pid_t pid = t_fork_server(t_doomed_child, &p.port);

	REQUIRE(pid > 0);
	CHECK_EQ(t_client(&p, NULL, 2, NULL, NULL), 0);
	CHECK_EQ(rdmem_fab_check(p.cli.c), 0);
	CHECK(!t_readable(rdmem_fab_event_fd(p.cli.c), 0));
	kill(pid, SIGKILL);
	CHECK_EQ(t_child_status(pid), 128 + SIGKILL);
	CHECK(t_readable(rdmem_fab_event_fd(p.cli.c), T_TIMEOUT));
	CHECK_EQ(rdmem_fab_check(p.cli.c), -ECONNRESET);
	w = t_wr(5, RDMEM_WR_WRITE, 0, &p.cli.peer[T_RW], 0);
	t_sge(&w, p.cli.local, 8, p.cli.lmr.lkey);
	CHECK_EQ(rdmem_fab_post(p.cli.c, &w, 1), -ECONNRESET);
	/* Its posted receives flush. */
	CHECK_EQ(rdmem_fab_poll(p.cli.c, wc, 4), 2);
	CHECK(wc[0].status == RDMEM_WC_FLUSH_ERR && wc[0].op == RDMEM_WC_RECV_IMM);
	CHECK(wc[1].status == RDMEM_WC_FLUSH_ERR && wc[1].op == RDMEM_WC_RECV_IMM);
	t_side_close(&p.cli);
}

static void test_no_leak_200_cycles(void)
{
	struct t_pair p = { 0 };
	int fds0, maps0, saved = rdmem_log_level;

	T_OK(t_pair_open(&p, NULL, 2, 2)); /* warm-up, see above */
	t_side_close(&p.cli);
	t_side_close(&p.srv.s);
	fds0 = proc_fd_count(getpid());
	maps0 = t_count_maps();
	rdmem_log_level = -1; /* 40 rejects and 20 abandoned handshakes log */
	for (int i = 0; i < 200 && !check_case_failed; i++) {
		struct rdmem_wc wc[2];
		char reason[32];
		size_t rlen = sizeof(reason);

		if (i % 10 == 3) { /* a client dies mid-handshake */
			struct rdmem_conn *c = NULL, *sc = NULL;

			CHECK_EQ(
			    rdmem_fab_resolve(RDMEM_FAB_SHM, NULL, p.port, NULL, T_TIMEOUT, &c), 0);
			rdmem_fab_close(c);
			CHECK_EQ(t_get_request(p.l, NULL, &sc, NULL, NULL), -ECONNRESET);
			continue;
		}
		if (i % 5 == 1) {
			CHECK_EQ(t_connect(&p, NULL, 0, 0, "no", reason, &rlen), -ECONNREFUSED);
		} else {
			CHECK_EQ(t_connect(&p, NULL, 2, 2, NULL, NULL, NULL), 0);
			CHECK_EQ(t_post_imm(p.cli.c, (uint32_t)i, 0), 0);
			CHECK_EQ(t_poll(p.srv.s.c, wc, 1), 1);
		}
		t_side_close(&p.cli);
		t_side_close(&p.srv.s);
	}
	rdmem_log_level = saved;
	CHECK_EQ(proc_fd_count(getpid()), fds0);
	CHECK_EQ(t_count_maps(), maps0);
	rdmem_fab_listener_close(p.l);
}

/* ---- memory ordering ---- */

struct t_pub {
	uint8_t *area; /* the server's RW area: state word at 0, payload at 64 */
	_Atomic uint64_t ack;
	uint64_t rounds, torn;
};

static void *t_pub_reader(void *arg)
{
	struct t_pub *t = arg;
	_Atomic uint64_t *state = (_Atomic uint64_t *)(void *)t->area;
	_Atomic uint64_t *payload = (_Atomic uint64_t *)(void *)(t->area + 64);

	for (uint64_t v = 1; v <= t->rounds; v++) {
		/* acquire: pairs with the backend's release store of the state word. */
		while (atomic_load_explicit(state, memory_order_acquire) != v)
			sched_yield();
		for (int i = 0; i < 512; i++)
			t->torn += atomic_load_explicit(&payload[i], memory_order_relaxed) != v;
		atomic_store_explicit(&t->ack, v, memory_order_release);
	}
	return NULL;
}

/* Payload WRITE then 8-byte state WRITE: whoever sees the state sees it all. */
static void test_state_last_publication(void)
{
	struct t_pub t = { .rounds = 5000 };
	struct rdmem_wc wc[4];
	struct t_pair p;
	pthread_t th;

	T_OK(t_pair_open(&p, NULL, 0, 0));
	t.area = p.srv.s.area[T_RW];
	T_OK(pthread_create(&th, NULL, t_pub_reader, &t));
	for (uint64_t v = 1; v <= t.rounds; v++) {
		struct rdmem_wr w[2] = {
			t_wr(1, RDMEM_WR_WRITE, 0, &p.cli.peer[T_RW], 64),
			t_wr(2, RDMEM_WR_WRITE, 0, &p.cli.peer[T_RW], 0),
		};
		uint64_t *words = (uint64_t *)(void *)(p.cli.local + 64);

		for (int i = 0; i < 512; i++)
			words[i] = v;
		memcpy(p.cli.local, &v, 8);
		t_sge(&w[0], words, 4096, p.cli.lmr.lkey);
		t_sge(&w[1], p.cli.local, 8, p.cli.lmr.lkey);
		if (rdmem_fab_post(p.cli.c, w, 2)) {
			CHECK(0);
			break;
		}
		rdmem_fab_poll(p.cli.c, wc, 4);
		while (atomic_load_explicit(&t.ack, memory_order_acquire) != v)
			sched_yield();
	}
	pthread_join(th, NULL);
	CHECK_EQ(t.torn, 0);
	t_pair_close(&p);
}

/* ---- figures ---- */

static void test_figures(void)
{
	enum { WARM = 200, N = 2000, MB_READS = 64 };
	static uint64_t rtt[N];
	struct t_pair p = { 0 };
	struct rdmem_wc wc[4];
	struct rdmem_wr w;
	uint64_t t0;
	pid_t pid;

	t_echo_busy = 1;
	pid = t_fork_server(t_echo_child, &p.port);
	REQUIRE(pid > 0);
	CHECK_EQ(t_client(&p, NULL, 16, NULL, NULL), 0);
	for (int i = 0; i < WARM + N && !check_case_failed; i++) {
		int n = 0;

		t0 = rdmem_now_ns();
		CHECK_EQ(t_post_imm(p.cli.c, (uint32_t)i | T_REPLY, 0), 0);
		for (int spins = 0; !(n = rdmem_fab_poll(p.cli.c, wc, 1)); spins++)
			if (spins % 64 == 63)
				sched_yield();
		CHECK(n == 1 && wc[0].imm == ((uint32_t)i | T_REPLY));
		if (i >= WARM)
			rtt[i - WARM] = rdmem_now_ns() - t0;
		CHECK_EQ(rdmem_fab_post_recv(p.cli.c, 1), 0);
	}
	CHECK_EQ(t_post_imm(p.cli.c, T_STOP, 0), 0);
	CHECK_EQ(t_child_status(pid), 0);
	t_side_close(&p.cli);
	rdmem_pctl_sort(rtt, N);
	printf("# shm WRITE_IMM ping-pong, 2 processes, busy poll: round trip p50 %.2f us, "
	       "p99 %.2f us (%d samples)\n",
	       rdmem_pctl_us(rtt, N, 0.5), rdmem_pctl_us(rtt, N, 0.99), N);

	T_OK(t_pair_open(&p, NULL, 0, 0));
	memset(p.srv.s.area[T_RW], 1, T_AREA);
	w = t_wr(1, RDMEM_WR_READ, RDMEM_WR_SIGNALED, &p.cli.peer[T_RW], 0);
	t_sge(&w, p.cli.local, T_AREA, p.cli.lmr.lkey);
	t0 = rdmem_now_ns();
	for (int i = 0; i < MB_READS; i++) {
		CHECK_EQ(rdmem_fab_post(p.cli.c, &w, 1), 0);
		CHECK_EQ(rdmem_fab_poll(p.cli.c, wc, 4), 1);
	}
	printf("# shm 1 MiB READ: %.2f GiB/s (%d reads, one process, two mappings)\n",
	       MB_READS / 1024.0 / ((double)(rdmem_now_ns() - t0) / 1e9), MB_READS);
	CHECK_EQ(p.cli.local[T_AREA - 1], 1);
	t_pair_close(&p);
}

int main(void)
{
	void *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	t_child_sleeps = shared == MAP_FAILED ? NULL : shared;
	RUN(test_connect_private_data);
	RUN(test_reject_with_reason);
	RUN(test_private_data_limits);
	RUN(test_resolve_errors);
	RUN(test_write_sges);
	RUN(test_read_sges);
	RUN(test_order_and_signalling);
	RUN(test_write_imm);
	RUN(test_rnr);
	RUN(test_violations);
	RUN(test_send_queue_full);
	RUN(test_malformed_wrs);
	RUN(test_registration_rules);
	RUN(test_hostile_immediates);
	RUN(test_arm_wakes_sleeper);
	RUN(test_no_lost_wakeup);
	RUN(test_peer_death);
	RUN(test_no_leak_200_cycles);
	RUN(test_state_last_publication);
	RUN(test_figures);
	return check_done();
}
