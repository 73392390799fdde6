/* test_exhaustion.c - resources run out: the request ring, the object pool,
 * the image directory's disk, the KV store's memory, the front door's client table. Each gives
 * back-pressure or a clear error, never a crash, a hang, or another
 * client's call lost.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>

#include "check.h"
#include "e2e.h"

/* n calls at window w on one path; returns how many failed with each rc. */
struct tally {
	int ok, busy, other, other_rc;
};

static struct tally window_calls(rdmem_t *h, uint16_t op, const char *key, int n, int w,
				 uint8_t path)
{
	struct rdmem_rpc rpc[64];
	struct tally t = { 0, 0, 0, 0 };
	int issued = 0, done = 0, i, active[64] = { 0 };

	while (done < n) {
		for (i = 0; i < w; i++) {
			if (!active[i] && issued < n) {
				rdmem_rpc_init(&rpc[i], op);
				rpc[i].key = key;
				rpc[i].key_len = (uint32_t)strlen(key);
				rpc[i].path = path;
				rpc[i].timeout_ms = 5000;
				active[i] = rdmem_submit(h, &rpc[i]) == 0;
				issued++;
				if (!active[i]) {
					done++;
					t.other++;
				}
			}
			if (!active[i] || rdmem_poll(h, &rpc[i]) != 1)
				continue;
			active[i] = 0;
			done++;
			if (rpc[i].rc == 0)
				t.ok++;
			else if (rpc[i].rc == -EBUSY)
				t.busy++;
			else
				t.other++, t.other_rc = rpc[i].rc;
			rdmem_rpc_free(&rpc[i]);
		}
	}
	return t;
}

/* 4 ring slots, 32 calls in flight: forced EAGER waits its turn; AUTO spills to TCP. */
static void test_request_ring_full(void)
{
	struct e2e e;
	struct tally t;

	REQUIRE(e2e_init(&e, "shm") == 0);
	REQUIRE(e2e_server(&e, "shm", NULL) == 0);
	REQUIRE(e2e_agent(&e, "--ring-slots", "4", NULL) == 0);
	CHECK_EQ(rdmem_put(e.h, "r", 1, "value", 5, NULL), 0);
	t = window_calls(e.h, RDMEM_OP_KV_GET, "r", 2000, 32, RDMEM_PATH_EAGER);
	CHECK_EQ(t.ok, 2000);
	if (t.other)
		fprintf(stderr, "  %d calls failed, e.g. %s\n", t.other,
			rdmem_strerror(t.other_rc));
	CHECK_EQ(e2e_stat(&e, "paths.tcp.ok"), 0); /* forced EAGER waited, never spilled */
	CHECK_EQ(e2e_stat(&e, "fallbacks"), 0);
	t = window_calls(e.h, RDMEM_OP_KV_GET, "r", 2000, 32, RDMEM_PATH_AUTO);
	CHECK_EQ(t.ok, 2000);
	/* The ring did fill, and AUTO sent the overflow TCP: the chooser sees
	 * the backlog and picks TCP up front (or, posting into a full ring,
	 * falls back), where forced EAGER above never went TCP. */
	printf("# AUTO, 4 ring slots: %lld on TCP (%lld fallbacks)\n", e2e_stat(&e, "paths.tcp.ok"),
	       e2e_stat(&e, "fallbacks"));
	CHECK(e2e_stat(&e, "paths.tcp.ok") > 0);
	e2e_fini(&e);
}

/* 12 objects in the pool, 32 LAZY calls in flight: forced LAZY gets a clear
 * -EBUSY for what does not fit; AUTO takes TCP and every call succeeds. */
static void test_object_pool_full(void)
{
	long long full, fallbacks, tcp;
	struct e2e e;
	struct tally t;

	REQUIRE(e2e_init(&e, "shm") == 0);
	REQUIRE(e2e_server(&e, "shm", "--objpool-slabs", "8", NULL) == 0);
	REQUIRE(e2e_agent(&e, NULL) == 0);
	t = window_calls(e.h, RDMEM_OP_LARGE_GET, "big:200k", 600, 32, RDMEM_PATH_LAZY);
	CHECK_EQ(t.ok + t.busy, 600);
	CHECK_EQ(t.other, 0);
	printf("# forced LAZY, pool of 12: %d ok, %d -EBUSY\n", t.ok, t.busy);
	/* The pool did run out (refusals, counted by the server) and was not
	 * simply refusing everything. */
	CHECK(t.busy > 0);
	CHECK(t.ok > 0);
	full = e2e_stat(&e, "server.obj_full");
	CHECK(full > 0);
	fallbacks = e2e_stat(&e, "fallbacks");
	tcp = e2e_stat(&e, "paths.tcp.ok");
	t = window_calls(e.h, RDMEM_OP_LARGE_GET, "big:200k", 600, 32, RDMEM_PATH_AUTO);
	CHECK_EQ(t.ok, 600);
	/* AUTO met the same full pool and retried those calls on TCP. */
	printf("# AUTO, pool of 12: %lld more refusals, %lld retried on TCP\n",
	       e2e_stat(&e, "server.obj_full") - full, e2e_stat(&e, "fallbacks") - fallbacks);
	CHECK(e2e_stat(&e, "fallbacks") > fallbacks);
	CHECK(e2e_stat(&e, "paths.tcp.ok") > tcp);
	/* Nothing leaked: every object came back. */
	proc_sleep_ms(100);
	CHECK_EQ(e2e_stat(&e, "server.objects_live"), 0);
	e2e_fini(&e);
}

/*
 * Real pressure on the control page, no simulate-*: a child process keeps 32
 * forced-LAZY 60 KiB reads in flight against a pool of 8 objects, so the
 * server's control page shows the pool over 85 % used. Small AUTO ECHOs from
 * this process (their replies never touch the pool, so they are never
 * refused and never "fall back") must be routed TCP by the selector reading
 * that page, and go back to EAGER when the load stops.
 */
static void test_pool_pressure_routes_auto_to_tcp(void)
{
	struct rdmem_info info;
	struct rdmem_opts o = { RDMEM_PATH_AUTO, 5000, &info };
	int i, on_tcp = 0, on_eager = 0, st;
	long long fallbacks;
	uint8_t msg[64];
	void *got = NULL;
	uint32_t len;
	struct e2e e;
	pid_t pid;

	REQUIRE(e2e_init(&e, "shm") == 0);
	/* --max-value 64k: the pool is the 8 slabs alone (512 KiB), so 7 live
	 * 60 KiB objects are over the 85 % at which AUTO avoids RDMA. */
	REQUIRE(e2e_server(&e, "shm", "--objpool-slabs", "8", "--max-value", "64k", NULL) == 0);
	REQUIRE(e2e_agent(&e, NULL) == 0);
	pid = fork();
	if (pid == 0) {
		rdmem_t *h;

		if (rdmem_open(e.shm, &h) < 0)
			_exit(2);
		window_calls(h, RDMEM_OP_LARGE_GET, "big:60k", 1000000, 32, RDMEM_PATH_LAZY);
		rdmem_close(h);
		_exit(0);
	}
	e2e_fill(msg, sizeof(msg), 5);
	for (i = 0; i < 20000 && on_tcp < 50 && waitpid(pid, &st, WNOHANG) == 0; i++) {
		CHECK_EQ(rdmem_echo(e.h, msg, sizeof(msg), &got, &len, &o), 0);
		free(got);
		got = NULL;
		on_tcp += info.path == RDMEM_PATH_TCP;
	}
	/* A stats query reads the page now, under pressure: the snapshot the
	 * agent keeps through the quiet spell below. */
	fallbacks = e2e_stat(&e, "fallbacks");
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	printf("# real pool pressure: %d of %d small AUTO calls routed TCP; %lld fallbacks\n",
	       on_tcp, i, fallbacks);
	CHECK(on_tcp > 0);
	/* The pressure gone (objects reclaimed, the page read again), AUTO is
	 * back on EAGER. A quiet spell first: the agent reads no page while
	 * idle, so the next calls start on the snapshot that says "pressure"
	 * and go TCP; those calls must get the page read again (they once
	 * did not: every call stayed on TCP for good). */
	proc_sleep_ms(300);
	for (i = 0; i < 500 && on_eager < 10; i++) {
		CHECK_EQ(rdmem_echo(e.h, msg, sizeof(msg), &got, &len, &o), 0);
		free(got);
		got = NULL;
		on_eager = info.path == RDMEM_PATH_EAGER ? on_eager + 1 : 0;
		if (!on_eager)
			proc_sleep_ms(2);
	}
	CHECK_EQ(on_eager, 10);
	e2e_fini(&e);
}

/* The image directory fills up: -ENOSPC, no partial file, and the next upload works. */
static void test_image_dir_full(void)
{
	static uint8_t img[3u << 20];
	char dir[128], cmd[256];
	struct e2e e;
	int rc;

	REQUIRE(e2e_init(&e, "shm") == 0);
	snprintf(dir, sizeof(dir), "%s", e.image_dir);
	/* mode=0700: a tmpfs root is 1777 by default, an image directory the
	 * server refuses (any user could plant names in it). */
	if (mount("rdmem-test", dir, "tmpfs", 0, "size=2m,mode=0700") < 0) {
		check_skip("test_image_dir_full", "cannot mount a small tmpfs here (needs root)");
		e2e_fini(&e);
		return;
	}
	if (e2e_server(&e, "shm", NULL) != 0 || e2e_agent(&e, NULL) != 0) {
		CHECK(!"the server and agent start over a full image directory");
		umount(dir);
		e2e_fini(&e);
		return;
	}
	e2e_fill(img, sizeof(img), 1);
	rc = rdmem_image_put(e.h, "too-big.jpg", img, sizeof(img), NULL, NULL);
	CHECK_EQ(rc, -ENOSPC);
	snprintf(cmd, sizeof(cmd), "test -z \"$(ls -A %s)\"", dir);
	CHECK_EQ(system(cmd), 0); /* neither the final nor a temp file */
	CHECK_EQ(rdmem_image_put(e.h, "small.jpg", img, 100000, NULL, NULL), 0);
	CHECK_EQ(rdmem_put(e.h, "still", 5, "fine", 4, NULL), 0);
	e2e_stop_agent(&e);
	proc_stop(&e.server, SIGTERM, 5000);
	umount(dir);
	e2e_fini(&e);
}

/*
 * The KV store full (--kv-max-bytes 1m): a PUT past the limit is answered
 * NO_SPACE (-ENOSPC), on every path, and changes nothing; what is stored
 * stays readable; a PUT replacing a value with one no larger still goes
 * through, and a DEL makes room. Before, a peer PUTting distinct keys grew
 * the server until the OOM killer ended it (a 512 MiB run: RSS 5 -> 519 MiB).
 */
static void test_kv_memory_full(void)
{
	static uint8_t val[4096], got[4096];
	char key[32];
	struct e2e e;
	uint32_t len;
	int i, n = 0, rc = 0;

	REQUIRE(e2e_init(&e, "shm") == 0);
	REQUIRE(e2e_server(&e, "shm", "--kv-max-bytes", "1m", NULL) == 0);
	REQUIRE(e2e_agent(&e, NULL) == 0);
	CHECK_EQ(e2e_server_stat_auth(&e, NULL, "kv.max_bytes"), 1 << 20);
	for (n = 0; n < 1000 && rc == 0; n++) {
		snprintf(key, sizeof(key), "fill-%04d", n);
		e2e_fill(val, sizeof(val), (uint32_t)n);
		rc = rdmem_put(e.h, key, (uint32_t)strlen(key), val, sizeof(val), NULL);
	}
	n--; /* the refused one */
	CHECK_EQ(rc, -ENOSPC);
	/* Nearly all of the megabyte holds values: entry headers and keys are small. */
	CHECK(n >= (1 << 20) / 4200 && n <= (1 << 20) / 4096);
	/* charged: at least the values themselves, at most the cap */
	CHECK(e2e_server_stat_auth(&e, NULL, "kv.charged_bytes") >=
	      (long long)n * (long long)sizeof(val));
	CHECK(e2e_server_stat_auth(&e, NULL, "kv.charged_bytes") <= 1 << 20);
	CHECK_EQ(e2e_server_stat_auth(&e, NULL, "kv.refused_full"), 1);
	CHECK_EQ(e2e_server_stat_auth(&e, NULL, "kv.keys"), n);
	/* The other paths say the same. */
	CHECK_EQ(rdmem_put(e.h, "fill-new", 8, val, sizeof(val),
			   &(struct rdmem_opts){ .path = RDMEM_PATH_TCP }),
		 -ENOSPC);
	for (i = 0, rc = 0; i < n; i++) {
		snprintf(key, sizeof(key), "fill-%04d", i);
		e2e_fill(val, sizeof(val), (uint32_t)i);
		rc += rdmem_get_into(e.h, key, (uint32_t)strlen(key), got, sizeof(got), &len,
				     NULL) != 0 ||
		      len != sizeof(val) || memcmp(got, val, len) != 0;
	}
	CHECK_EQ(rc, 0);
	CHECK_EQ(rdmem_put(e.h, "fill-0000", 9, val, 100, NULL), 0);	     /* smaller: fits */
	CHECK_EQ(rdmem_put(e.h, "fill-0001", 9, val, sizeof(val), NULL), 0); /* same size */
	CHECK_EQ(rdmem_del(e.h, "fill-0002", 9, NULL), 0);
	CHECK_EQ(rdmem_put(e.h, "fill-new", 8, val, sizeof(val), NULL), 0);
	e2e_fini(&e);
}

/* A full client table refuses the next process clearly; the others go on. */
static void test_too_many_clients(void)
{
	struct e2e e;
	rdmem_t *other, *third;
	int st;
	pid_t pid, pid3;

	REQUIRE(e2e_init(&e, "shm") == 0);
	snprintf(e.clients, sizeof(e.clients), "2");
	REQUIRE(e2e_server(&e, "shm", NULL) == 0);
	REQUIRE(e2e_agent(&e, NULL) == 0);
	pid = fork();
	if (pid == 0) {
		/* Another process takes the second entry and keeps calling for 1 s. */
		uint64_t end = rdmem_now_ns() + 1000000000ull;
		int bad = 0;

		if (rdmem_open(e.shm, &other) < 0)
			_exit(2);
		while (rdmem_now_ns() < end)
			bad += rdmem_put(other, "o", 1, "v", 1, NULL) != 0;
		rdmem_close(other);
		_exit(bad ? 1 : 0);
	}
	proc_sleep_ms(100);
	/* The third process (this one holds the first entry) is refused. */
	pid3 = fork();
	if (pid3 == 0)
		_exit(rdmem_open(e.shm, &third) == -EUSERS ? 0 : 1);
	CHECK_EQ(waitpid(pid3, &st, 0) == pid3 && WIFEXITED(st) ? WEXITSTATUS(st) : -1, 0);
	CHECK_EQ(rdmem_ping(e.h, NULL), 0);
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	e2e_fini(&e);
}

int main(void)
{
	rdmem_log_init("test_exhaustion", 0);
	RUN(test_request_ring_full);
	RUN(test_object_pool_full);
	RUN(test_pool_pressure_routes_auto_to_tcp);
	RUN(test_image_dir_full);
	RUN(test_kv_memory_full);
	RUN(test_too_many_clients);
	return check_done();
}
