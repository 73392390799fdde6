/* test_flags.c - the server and agent flags no other test sets, each shown
 * to do what its help text says: two workers each serving a session with
 * private pools; the EAGER stage, response slot and request slot sizes;
 * busy polling; the image cap; the agent's BULK/LAZY/error thresholds and
 * connect timeout; the segment's group; the start-time --simulate-* faults.
 * Real processes over the shm fabric.
 */
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "check.h"
#include "e2e.h"

/* Another agent on its own segment "<e.shm>-<tag>" with the extra flags
 * (NULL-ended); *h is a handle on it. */
static int flag_agent(struct e2e *e, struct proc *p, rdmem_t **h, char *shm, size_t cap,
		      const char *tag, ...)
{
	va_list ap;
	int ret;

	snprintf(shm, cap, "%s-%s", e->shm, tag);
	va_start(ap, tag);
	ret = e2e_agent_named(e, p, tag, shm, ap);
	va_end(ap);
	return ret == 0 ? rdmem_open(shm, h) : ret;
}

static void flag_agent_stop(struct proc *p, rdmem_t *h, const char *shm)
{
	if (h)
		rdmem_close(h);
	proc_stop(p, SIGTERM, 5000);
	e2e_unlink_door(shm);
}

static long long flag_stat(rdmem_t *h, const char *path)
{
	char *text = NULL;
	uint32_t len;
	long long v;

	if (rdmem_agent_stats(h, 1, &text, &len, NULL) < 0)
		return -1;
	v = e2e_json_num(text, path);
	free(text);
	return v;
}

/* PUT n bytes on put_path, GET them back on get_path; 1 when byte-exact
 * and each call was carried where asked (AUTO: anywhere). */
static int flag_round_trip(rdmem_t *h, const char *key, uint32_t n, uint8_t put_path,
			   uint8_t get_path)
{
	static uint8_t val[1 << 17];
	struct rdmem_info info = { 0 };
	struct rdmem_opts o = { put_path, 3000, &info };
	void *got = NULL;
	uint32_t len = 0;
	int ok;

	e2e_fill(val, n, n);
	if (rdmem_put(h, key, (uint32_t)strlen(key), val, n, &o) != 0)
		return 0;
	ok = put_path == RDMEM_PATH_AUTO || info.path == put_path;
	o.path = get_path;
	ok = ok && rdmem_get(h, key, (uint32_t)strlen(key), &got, &len, &o) == 0 && len == n &&
	     memcmp(got, val, n) == 0 && (get_path == RDMEM_PATH_AUTO || info.path == get_path);
	free(got);
	return ok;
}

/* The completed count of worker w's first session in the server's STATS
 * JSON, or -1 when that worker serves no session. */
static long long flag_worker_calls(const char *json, int w)
{
	char key[32];
	const char *p;

	snprintf(key, sizeof(key), "{\"worker\":%d,", w);
	if (!(p = strstr(json, key)) || !(p = strstr(p, "\"sessions\":[")))
		return -1;
	p += strlen("\"sessions\":[");
	return *p == '{' ? e2e_json_num(p, "completed") : -1;
}

/* --workers 2 --shared-pool off: two agents' sessions land on both
 * workers, each with its own regions, and every path is byte-exact. */
static void test_two_workers_private_pools(void)
{
	static char json[1 << 16];
	struct proc p2 = { 0 };
	rdmem_t *h2 = NULL;
	char shm2[96];
	struct e2e e;
	int i;

	REQUIRE(e2e_init(&e, "shm") == 0);
	REQUIRE(e2e_server(&e, "shm", "--workers", "2", "--shared-pool", "off", NULL) == 0);
	REQUIRE(e2e_agent(&e, NULL) == 0);
	REQUIRE(flag_agent(&e, &p2, &h2, shm2, sizeof(shm2), "w2", NULL) == 0);
	CHECK(flag_round_trip(e.h, "w-eager", 1000, RDMEM_PATH_EAGER, RDMEM_PATH_EAGER));
	CHECK(flag_round_trip(h2, "w-eager2", 1000, RDMEM_PATH_EAGER, RDMEM_PATH_EAGER));
	CHECK(flag_round_trip(e.h, "w-bulk", 100000, RDMEM_PATH_BULK, RDMEM_PATH_LAZY));
	CHECK(flag_round_trip(h2, "w-bulk2", 100000, RDMEM_PATH_BULK, RDMEM_PATH_LAZY));
	CHECK(flag_round_trip(h2, "w-tcp2", 5000, RDMEM_PATH_TCP, RDMEM_PATH_TCP));
	/* The workers publish their session lists now and then: wait for it. */
	for (i = 0; i < 60; i++) {
		REQUIRE(e2e_server_json(&e, json, sizeof(json)) == 0);
		if (flag_worker_calls(json, 0) > 0 && flag_worker_calls(json, 1) > 0)
			break;
		proc_sleep_ms(50);
	}
	CHECK_EQ(e2e_json_num(json, "shared_pool"), 0);
	printf("# worker 0: %lld calls, worker 1: %lld calls\n", flag_worker_calls(json, 0),
	       flag_worker_calls(json, 1));
	CHECK(flag_worker_calls(json, 0) > 0);
	CHECK(flag_worker_calls(json, 1) > 0);
	flag_agent_stop(&p2, h2, shm2);
	e2e_fini(&e);
}

/* --stage-bytes / --resp-bytes (matching: 8 KiB) and --slot-bytes 16 KiB:
 * an 8 KiB reply fits EAGER; a 20 KB forced-EAGER request spans two request
 * slots; replies past the stage do not come EAGER; all byte-exact. */
static void test_stage_and_slot_sizes(void)
{
	struct e2e e;

	REQUIRE(e2e_init(&e, "shm") == 0);
	REQUIRE(e2e_server(&e, "shm", "--stage-bytes", "8192", "--slot-bytes", "16384", NULL) == 0);
	REQUIRE(e2e_agent(&e, "--resp-bytes", "8192", NULL) == 0);
	CHECK(flag_round_trip(e.h, "g-8k", 8192, RDMEM_PATH_EAGER, RDMEM_PATH_EAGER));
	CHECK(flag_round_trip(e.h, "g-8k1", 8193, RDMEM_PATH_EAGER, RDMEM_PATH_AUTO));
	CHECK(flag_round_trip(e.h, "g-20k", 20000, RDMEM_PATH_EAGER, RDMEM_PATH_AUTO));
	{
		struct rdmem_info info = { 0 };
		struct rdmem_opts o = { RDMEM_PATH_AUTO, 3000, &info };
		void *got = NULL;
		uint32_t len;

		/* A reply past the 8 KiB stage: AUTO expects it large or the
		 * server moves it LAZY; either way not in the response slot. */
		CHECK_EQ(rdmem_get(e.h, "g-8k1", 5, &got, &len, &o), 0);
		free(got);
		CHECK(info.path != RDMEM_PATH_EAGER || e2e_stat(&e, "server.eager_to_lazy") > 0);
	}
	e2e_fini(&e);
}

/* --busy-poll on both sides: every call still right. */
static void test_busy_poll(void)
{
	struct e2e e;
	int i, ok = 0;

	REQUIRE(e2e_init(&e, "shm") == 0);
	REQUIRE(e2e_server(&e, "shm", "--busy-poll", NULL) == 0);
	REQUIRE(e2e_agent(&e, "--busy-poll", NULL) == 0);
	for (i = 0; i < 200; i++)
		ok += flag_round_trip(e.h, "bp", (uint32_t)(i * 97 % 20000), RDMEM_PATH_AUTO,
				      RDMEM_PATH_AUTO);
	CHECK_EQ(ok, 200);
	e2e_fini(&e);
}

/* --max-image 1m: a 2 MiB upload is refused, a 500 KB one stored. */
static void test_max_image(void)
{
	static uint8_t img[2u << 20];
	struct e2e e;

	REQUIRE(e2e_init(&e, "shm") == 0);
	REQUIRE(e2e_server(&e, "shm", "--max-image", "1m", NULL) == 0);
	REQUIRE(e2e_agent(&e, NULL) == 0);
	e2e_fill(img, sizeof(img), 3);
	CHECK(rdmem_image_put(e.h, "too-big.jpg", img, sizeof(img), NULL, NULL) < 0);
	CHECK_EQ(rdmem_image_put(e.h, "fits.jpg", img, 500000, NULL, NULL), 0);
	e2e_fini(&e);
}

/*
 * No --image-dir: every path refuses an upload with -EOPNOTSUPP, whose text
 * names the flag (it was a bare -EINVAL, "bad request"), and counts it; the
 * server serves everything else.
 */
static void test_no_image_dir(void)
{
	static const uint8_t paths[] = { RDMEM_PATH_AUTO, RDMEM_PATH_EAGER, RDMEM_PATH_BULK,
					 RDMEM_PATH_TCP };
	static uint8_t img[100000];
	char dir[sizeof(((struct e2e *)0)->image_dir)], *text = NULL;
	struct e2e e;
	uint32_t len;
	unsigned i;

	REQUIRE(e2e_init(&e, "shm") == 0);
	memcpy(dir, e.image_dir, sizeof(dir));
	e.image_dir[0] = '\0';
	REQUIRE(e2e_server(&e, "shm", NULL) == 0);
	memcpy(e.image_dir, dir, sizeof(dir)); /* e2e_fini removes it */
	REQUIRE(e2e_agent(&e, NULL) == 0);
	e2e_fill(img, sizeof(img), 5);
	for (i = 0; i < RDMEM_ARRAY_SIZE(paths); i++) {
		struct rdmem_opts o = { paths[i], 3000, NULL };

		CHECK_EQ(rdmem_image_put(e.h, "no-dir.jpg", img, sizeof(img), NULL, &o),
			 -EOPNOTSUPP);
	}
	CHECK(strstr(rdmem_strerror(-EOPNOTSUPP), "--image-dir") != NULL);
	if (rdmem_stats(e.h, 1, &text, &len, NULL) == 0) {
		CHECK(e2e_json_num(text, "ops.image_chunk.errors") >=
		      (long long)RDMEM_ARRAY_SIZE(paths));
		free(text);
	} else {
		CHECK(!"the server's stats");
	}
	CHECK_EQ(flag_round_trip(e.h, "nd", 3000, RDMEM_PATH_AUTO, RDMEM_PATH_AUTO), 1);
	e2e_fini(&e);
}

static uint8_t flag_echo_path(rdmem_t *h, uint32_t n)
{
	static uint8_t buf[1 << 16];
	struct rdmem_info info = { 0 };
	struct rdmem_opts o = { RDMEM_PATH_AUTO, 3000, &info };
	void *got = NULL;
	uint32_t len = 0;
	int rc;

	e2e_fill(buf, n, 11);
	rc = rdmem_echo(h, buf, n, &got, &len, &o);
	if (rc || len != n || memcmp(got, buf, n) != 0)
		info.path = 0xff;
	free(got);
	return info.path;
}

/* --bulk-threshold 1000 --large-threshold 5000 --error-threshold 0
 * --connect-timeout 500: AUTO picks by the given sizes, and one RDMA error
 * is enough to send AUTO to TCP. */
static void test_agent_thresholds(void)
{
	struct rdmem_info info = { 0 };
	struct rdmem_opts o = { RDMEM_PATH_AUTO, 3000, &info };
	uint8_t v[2000];
	void *got = NULL;
	uint32_t len;
	struct e2e e;

	REQUIRE(e2e_init(&e, "shm") == 0);
	REQUIRE(e2e_server(&e, "shm", NULL) == 0);
	REQUIRE(e2e_agent(&e, "--bulk-threshold", "1000", "--large-threshold", "5000",
			  "--error-threshold", "0", "--connect-timeout", "500", NULL) == 0);
	e2e_fill(v, sizeof(v), 1);
	CHECK_EQ(rdmem_put(e.h, "t", 1, v, sizeof(v), &o), 0);
	CHECK_EQ(info.path, RDMEM_PATH_BULK); /* 2000 B >= 1000 (default 8k: EAGER) */
	/* A 6000 B reply to a small request: >= 5000 goes LAZY (default: EAGER). */
	CHECK_EQ(rdmem_large_get(e.h, "big:6000", &got, &len, &o), 0);
	free(got);
	CHECK_EQ(info.path, RDMEM_PATH_LAZY);
	CHECK_EQ(flag_echo_path(e.h, 100), RDMEM_PATH_EAGER);
	/* One failed RDMA op: retried on TCP, and with a threshold of 0 the next
	 * AUTO call goes TCP too (the default 8 would keep it on RDMA). */
	CHECK_EQ(e2e_ctl(&e, "simulate-rdma-op-fail 1"), 0);
	CHECK_EQ(flag_echo_path(e.h, 100), RDMEM_PATH_TCP);
	CHECK_EQ(flag_echo_path(e.h, 100), RDMEM_PATH_TCP);
	CHECK_EQ(e2e_stat(&e, "fallbacks"), 1);
	e2e_fini(&e);
}

/* Out-of-range values are refused at start, naming the flag. */
static void test_flag_limits_named(void)
{
	const char *bad[][2] = { { "--connect-timeout", "0" },
				 { "--resp-bytes", "10" },
				 { "--error-threshold", "-1" } };
	char cmd[1024];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(cmd, sizeof(cmd),
			 "%s/rdmem-agent -s 127.0.0.1 --fabric tcp %s %s 2>&1 | grep -q -- '%s'",
			 proc_bin(), bad[i][0], bad[i][1], bad[i][0]);
		CHECK_EQ(system(cmd), 0);
	}
}

/*
 * Over verbs a session pins its whole lease: one larger than the machine
 * (here ~526 GiB: 65,536 slabs with 8,192 objects of 64 MiB) could never
 * register, so the server refuses to start, naming each area's flags. The
 * check runs before any RDMA device is opened: it holds on a host without one.
 */
static void test_lease_past_memory_refused(void)
{
	char cmd[2048], log[] = "/tmp/rdmem-lease-XXXXXX";
	unsigned base = proc_free_port_pair();
	int fd = mkstemp(log);

	REQUIRE(base && fd >= 0);
	close(fd);
	snprintf(
	    cmd, sizeof(cmd),
	    "%s/rdmem-server -b 127.0.0.1 -p %u --tcp-port %u --fabric verbs --ring-slots 4096 "
	    "--slot-bytes 1m --stage-bytes 1m --objpool-slabs 65536 --max-value 64m >%s 2>&1; "
	    "[ $? -eq 1 ] && grep -q 'no session could ever register' %s && "
	    "grep -q -- 'objects [0-9]* MiB: --objpool-slabs 65536, --max-value 67108864' %s",
	    proc_bin(), base, base + 1, log, log, log);
	CHECK_EQ(system(cmd), 0);
	snprintf(cmd, sizeof(cmd), "sed 's/^/#   /' %s", log);
	if (system(cmd) != 0)
		printf("# could not show %s\n", log);
	unlink(log);
}

/* --shm-group: the segment belongs to that group, mode 0660. */
static void test_shm_group(void)
{
	struct group *g = getgrnam("daemon");
	struct proc p2 = { 0 };
	rdmem_t *h2 = NULL;
	char shm2[96], path[128];
	struct stat st;
	struct e2e e;

	REQUIRE(g); /* Debian's base system always has it */
	REQUIRE(e2e_init(&e, "shm") == 0);
	REQUIRE(e2e_server(&e, "shm", NULL) == 0);
	REQUIRE(e2e_agent(&e, NULL) == 0);
	REQUIRE(flag_agent(&e, &p2, &h2, shm2, sizeof(shm2), "grp", "--shm-group", "daemon",
			   NULL) == 0);
	/* The group may attach: the socket is its (0660), and so is the directory. */
	REQUIRE(rdmem_door_path(shm2, NULL, geteuid(), path, sizeof(path)) == 0);
	REQUIRE(stat(path, &st) == 0);
	CHECK_EQ(st.st_gid, g->gr_gid);
	CHECK_EQ(st.st_mode & 0777, 0660);
	CHECK(S_ISSOCK(st.st_mode));
	CHECK_EQ(rdmem_ping(h2, NULL), 0);
	flag_agent_stop(&p2, h2, shm2);
	e2e_fini(&e);
}

/* The --simulate-* faults given at start, as agent-ctl gives them later. */
static void test_simulate_at_start(void)
{
	struct proc p = { 0 };
	rdmem_t *h = NULL;
	char shm[96];
	struct e2e e;

	REQUIRE(e2e_init(&e, "shm") == 0);
	REQUIRE(e2e_server(&e, "shm", NULL) == 0);
	REQUIRE(e2e_agent(&e, NULL) == 0);

	REQUIRE(flag_agent(&e, &p, &h, shm, sizeof(shm), "down", "--simulate-rdma-down", NULL) ==
		0);
	CHECK_EQ(flag_stat(h, "simulate.rdma_down"), 1);
	CHECK_EQ(flag_echo_path(h, 100), RDMEM_PATH_TCP);
	flag_agent_stop(&p, h, shm);

	REQUIRE(flag_agent(&e, &p, &h, shm, sizeof(shm), "ring", "--simulate-server-pressure",
			   "ring", NULL) == 0);
	CHECK_EQ(flag_echo_path(h, 100), RDMEM_PATH_TCP);
	flag_agent_stop(&p, h, shm);

	REQUIRE(flag_agent(&e, &p, &h, shm, sizeof(shm), "errs", "--simulate-rdma-errors", "9",
			   NULL) == 0);
	CHECK_EQ(flag_echo_path(h, 100), RDMEM_PATH_TCP); /* 9 > the default threshold 8 */
	flag_agent_stop(&p, h, shm);

	REQUIRE(flag_agent(&e, &p, &h, shm, sizeof(shm), "fail", "--simulate-rdma-op-fail", "2",
			   NULL) == 0);
	CHECK_EQ(flag_echo_path(h, 100), RDMEM_PATH_TCP);
	CHECK_EQ(flag_echo_path(h, 100), RDMEM_PATH_TCP);
	CHECK_EQ(flag_echo_path(h, 100), RDMEM_PATH_EAGER);
	CHECK_EQ(flag_stat(h, "fallbacks"), 2);
	flag_agent_stop(&p, h, shm);
	e2e_fini(&e);
}

/* -b 0.0.0.0 without --secret-file: the server says so (README, Security). */
static void test_bind_any_warns(void)
{
	char bin[512], port[16], tcp[16];
	char *argv[] = { bin,	       "-b", "0.0.0.0",	 "-p",	 port,
			 "--tcp-port", tcp,  "--fabric", "none", NULL };
	struct proc p = { 0 };
	unsigned base = proc_free_port_pair();

	REQUIRE(base);
	snprintf(bin, sizeof(bin), "%s/rdmem-server", proc_bin());
	snprintf(port, sizeof(port), "%u", base);
	snprintf(tcp, sizeof(tcp), "%u", base + 1);
	REQUIRE(proc_start(&p, "server-any", argv, "listening tcp", E2E_READY_MS) == 0);
	CHECK(proc_log_has(&p, "listening on every address with no --secret-file"));
	proc_stop(&p, SIGTERM, 5000);
}

/* The agent RDMA-READs the control page every 64 calls, or when 10 ms have
 * passed since the last read and a call went out since (README, Selector);
 * never while idle. */
static void test_control_page_cadence(void)
{
	long long r0, r1, r2, r3;
	struct e2e e;
	int i;

	REQUIRE(e2e_init(&e, "shm") == 0);
	REQUIRE(e2e_server(&e, "shm", NULL) == 0);
	REQUIRE(e2e_agent(&e, NULL) == 0);
	r0 = e2e_stat(&e, "rdma.ctrl_reads");
	for (i = 0; i < 6400; i++)
		CHECK_EQ(flag_echo_path(e.h, 8), RDMEM_PATH_EAGER);
	r1 = e2e_stat(&e, "rdma.ctrl_reads");
	/* One call each 20 ms: every call finds the last read over 10 ms old. */
	for (i = 0; i < 20; i++) {
		proc_sleep_ms(20);
		CHECK_EQ(flag_echo_path(e.h, 8), RDMEM_PATH_EAGER);
	}
	r2 = e2e_stat(&e, "rdma.ctrl_reads");
	/* Idle: no READ at all (each stats query reads the page once, itself
	 * included in the count it answers with; before, 20 a second). */
	proc_sleep_ms(1000);
	r3 = e2e_stat(&e, "rdma.ctrl_reads");
	printf("# control page reads: %lld over 6400 fast calls, %lld over 20 calls 20 ms apart, "
	       "%lld over 1 s idle (the stats query's own included)\n",
	       r1 - r0, r2 - r1, r3 - r2);
	CHECK(r1 - r0 >= 6400 / 64 - 1);
	CHECK(r2 - r1 >= 20 - 1);
	CHECK(r3 - r2 <= 1);
	e2e_fini(&e);
}

int main(void)
{
	rdmem_log_init("test_flags", 0);
	RUN(test_two_workers_private_pools);
	RUN(test_stage_and_slot_sizes);
	RUN(test_busy_poll);
	RUN(test_max_image);
	RUN(test_no_image_dir);
	RUN(test_agent_thresholds);
	RUN(test_flag_limits_named);
	RUN(test_lease_past_memory_refused);
	RUN(test_shm_group);
	RUN(test_simulate_at_start);
	RUN(test_bind_any_warns);
	RUN(test_control_page_cadence);
	return check_done();
}
