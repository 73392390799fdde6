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
 * with --shared-pool on and off. And --no-tcp publishes tcp_state 0. On the
 * shm fabric, each file the two sides share holds one registered area.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "raw_peer.h"

#define T_TIMEOUT_MS RAW_PEER_TIMEOUT_MS
#define T_BUF	     RAW_PEER_BUF
#define T_SMALL	     60000u  /* a 64 KiB object */
#define T_LARGE	     200000u /* a 256 KiB object, spanning payload slots */

static struct proc server;
static const char *fab_name = "shm";

static int start_server(const char *shared_pool, int no_tcp)
{
	char *flags[] = { "--max-sessions",	      "1", "--shared-pool", (char *)shared_pool,
			  "--objpool-slabs",	      "8", "--object-ttl",  "60000",
			  no_tcp ? "--no-tcp" : NULL, NULL };

	return raw_peer_server_start(&server, fab_name, flags);
}

/* Retries while the server still holds the previous session's lease. */
static int peer_open(struct raw_peer *p)
{
	return raw_peer_open(p, 16, 100);
}

/* One call in slot 0, `sent` bytes of payload from p->buf; 0 when it is OK. */
static int peer_call(struct raw_peer *p, struct rdmem_desc *d, uint32_t sent,
		     struct rdmem_desc *rep)
{
	return raw_peer_call(p, 0, d, sent, rep) == 0 && rep->status == RDMEM_S_OK ? 0 : -1;
}

/* RDMA-READs len bytes at raddr into p->buf. */
static int peer_read(struct raw_peer *p, uint64_t raddr, uint32_t rkey, uint32_t len)
{
	return raw_peer_read(p, raddr, rkey, p->buf, len);
}

/* PUT key = len bytes; only `written` bytes of key + value really go out. */
static int put(struct raw_peer *p, const char *key, uint32_t len, uint32_t written)
{
	struct rdmem_desc d = raw_peer_desc(RDMEM_OP_KV_PUT, (uint16_t)strlen(key), len, 0), rep;

	memcpy(p->buf, key, d.key_len);
	return peer_call(p, &d, written, &rep);
}

/* LAZY GET of key: the value stays in an object (unreclaimed), copied to p->buf. */
static int get_lazy(struct raw_peer *p, const char *key, uint32_t *len)
{
	struct rdmem_desc d = raw_peer_desc(RDMEM_OP_KV_GET, (uint16_t)strlen(key), 0,
					    RDMEM_F_WANT_OBJREF),
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
	struct raw_peer a;
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
	raw_peer_close(&a);
}

/* Session B, on the lease A had: nothing of A's is readable. */
static void tenant_b(void)
{
	struct rdmem_ctrl ctrl;
	struct raw_peer b;
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
	raw_peer_close(&b);
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
	struct raw_peer p;

	REQUIRE(start_server("on", no_tcp) == 0);
	if (peer_open(&p) == 0) {
		CHECK_EQ(peer_read(&p, p.l->w.ctrl.addr, p.l->w.ctrl.rkey, sizeof(ctrl)), 0);
		memcpy(&ctrl, p.buf, sizeof(ctrl));
		CHECK_EQ(ctrl.magic, RDMEM_CTRL_MAGIC);
		CHECK_EQ(ctrl.rdma_state, 1);
		CHECK_EQ(ctrl.tcp_state, no_tcp ? 0 : 1);
		raw_peer_close(&p);
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

/* The shm fabric's memfds one process maps (the backend names them all
 * "rdmem-shm-region"): inode, offset and length of each mapping. */
struct shm_map {
	unsigned long inode;
	unsigned long long off, len;
};

static int shm_maps(pid_t pid, struct shm_map *m, int max)
{
	char path[64], line[512];
	unsigned long long lo, hi, off;
	unsigned long inode;
	FILE *f;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	if (!(f = fopen(path, "r")))
		return -1;
	while (fgets(line, sizeof(line), f) && n < max)
		if (strstr(line, "/memfd:rdmem-shm-region") &&
		    sscanf(line, "%llx-%llx %*s %llx %*s %lu", &lo, &hi, &off, &inode) == 4)
			m[n++] = (struct shm_map){ inode, off, hi - lo };
	fclose(f);
	return n;
}

/* Each file mapped once, whole from offset 0: a file holding one area. */
static int maps_whole(const struct shm_map *m, int n)
{
	for (int i = 0; i < n; i++) {
		if (m[i].off)
			return 0;
		for (int j = i + 1; j < n; j++)
			if (m[j].inode == m[i].inode)
				return 0;
	}
	return 1;
}

/*
 * A peer gets the file behind each area registered for it, and a file cannot
 * be handed out in part: if the server's request slots (writable) shared a
 * file with its object pool, control page or staging, the agent could map
 * and write all of them, whatever the registrations say. So each file both
 * sides map must be one area, mapped whole by both: the same length here and
 * in the server (the owner maps its allocation whole).
 */
static void test_peer_files_hold_one_area(void)
{
	struct shm_map mine[64], srv[256];
	struct raw_peer p;
	int n, ns, shared = 0;

	if (raw_peer_target.fabric != RDMEM_FAB_SHM) {
		printf(
		    "# skipped: memfds are the shm fabric's (verbs: the NIC checks MR bounds)\n");
		return;
	}
	REQUIRE(start_server("on", 0) == 0);
	if (peer_open(&p) == 0) {
		n = shm_maps(getpid(), mine, 64);
		ns = shm_maps(server.pid, srv, 256);
		CHECK(n > 0 && ns > 0);
		CHECK(maps_whole(mine, n));
		CHECK(maps_whole(srv, ns));
		for (int i = 0; i < n; i++)
			for (int j = 0; j < ns; j++)
				if (mine[i].inode == srv[j].inode) {
					shared++;
					CHECK_EQ(mine[i].len, srv[j].len);
				}
		/* The request slots, object pool and control page; our
		 * response slots. Fewer: the check above looked at nothing. */
		printf("# %d files mapped here, %d in the server, %d by both\n", n, ns, shared);
		CHECK_EQ(shared, 4);
		raw_peer_close(&p);
	} else {
		CHECK(!"session with the server");
	}
	CHECK_EQ(proc_stop(&server, SIGTERM, T_TIMEOUT_MS), 0);
}

int main(int argc, char **argv)
{
	rdmem_log_init("test_lease_hygiene", 0);
	if (argc > 1)
		fab_name = argv[1];
	if (raw_peer_target_from(fab_name) < 0)
		return 1;
	RUN(test_reused_lease_shared_pool);
	RUN(test_reused_lease_private_pool);
	RUN(test_ctrl_tcp_state_no_tcp);
	RUN(test_ctrl_tcp_state_with_tcp);
	RUN(test_peer_files_hold_one_area);
	return check_done();
}
