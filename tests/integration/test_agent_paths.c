/* test_agent_paths.c - the whole product on this host: app (libclient) ->
 * SHM front door -> rdmem-agent -> shm fabric or TCP -> rdmem-server, real
 * processes. Every op byte-exact through every forced path and AUTO; AUTO's
 * choices and the fallbacks shown by the agent's path counters; the object
 * lifecycle; an async window of 32.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "e2e.h"

static struct e2e e;
static const uint8_t paths[] = { RDMEM_PATH_AUTO, RDMEM_PATH_EAGER, RDMEM_PATH_LAZY,
				 RDMEM_PATH_BULK, RDMEM_PATH_TCP };
static const uint32_t sizes[] = { 0, 1, 4096, 4097, 16384, 65536, 1u << 20 };

static struct rdmem_opts on(uint8_t path, struct rdmem_info *info)
{
	struct rdmem_opts o = { path, 10000, info };

	return o;
}

/* A field of the agent's /proc status in kB: VmPin counts what verbs
 * registrations pin, RssShmem the shared pages it has mapped. -1: unknown. */
static long agent_kb(const char *field)
{
	return proc_status_kb(e.agent.pid, field);
}

/*
 * Requests of up to 4 KiB are copied to the agent's staging, so a client
 * that moves only small payloads never has its area registered (over verbs
 * a registration pins the whole area, 1+ MiB a slot). Its first call that
 * moves a large one registers it once for the attach: here an EAGER GET the
 * server answers by reference, whose READ is the first to need the area.
 * Runs first: nothing else has moved a large payload on this attach.
 */
static void test_small_calls_leave_area_unregistered(void)
{
	long long regs = e2e_stat(&e, "rdma.area_regs"), staged = e2e_stat(&e, "rdma.staged");
	long pin = agent_kb("VmPin"), shm = agent_kb("RssShmem");
	int verbs = !strcmp(e.fabric, "verbs");
	uint8_t *v = malloc(65536), *got = NULL;
	struct rdmem_opts eager = on(RDMEM_PATH_EAGER, NULL), tcp = on(RDMEM_PATH_TCP, NULL);
	uint32_t len = 0;
	int i;

	REQUIRE(v);
	e2e_fill(v, 65536, 7);
	for (i = 0; i < 64; i++) {
		char key[16];
		void *out = NULL;

		snprintf(key, sizeof(key), "small-%d", i);
		CHECK_EQ(rdmem_put(e.h, key, (uint32_t)strlen(key), v, i % 2 ? 32 : 4000, NULL), 0);
		CHECK_EQ(rdmem_get(e.h, key, (uint32_t)strlen(key), &out, &len, NULL), 0);
		CHECK(out && len == (i % 2 ? 32u : 4000u) && memcmp(out, v, len) == 0);
		free(out);
	}
	CHECK(e2e_stat(&e, "rdma.staged") - staged >= 128);
	CHECK_EQ(e2e_stat(&e, "rdma.area_regs"), regs);
	printf("# 128 small calls: agent VmPin %ld -> %ld kB, RssShmem %ld -> %ld kB, area "
	       "registrations %lld\n",
	       pin, agent_kb("VmPin"), shm, agent_kb("RssShmem"),
	       e2e_stat(&e, "rdma.area_regs") - regs);
	if (shm >= 0)
		CHECK(agent_kb("RssShmem") - shm < 4096);
	if (verbs)
		CHECK(pin >= 0 && agent_kb("VmPin") == pin);
	CHECK_EQ(rdmem_put(e.h, "large-1", 7, v, 65536, &tcp), 0);
	CHECK_EQ(e2e_stat(&e, "rdma.area_regs"), regs);
	CHECK_EQ(rdmem_get(e.h, "large-1", 7, (void **)&got, &len, &eager), 0);
	CHECK(got && len == 65536 && memcmp(got, v, len) == 0);
	CHECK_EQ(e2e_stat(&e, "rdma.area_regs") - regs, 1);
	/* Over verbs the registration pinned the whole area, 1 MiB a slot and
	 * more: proof the measure above would have seen one. */
	printf("# after the area's registration: agent VmPin %ld kB\n", agent_kb("VmPin"));
	if (verbs)
		CHECK(agent_kb("VmPin") - pin > 1024);
	CHECK_EQ(rdmem_put(e.h, "large-2", 7, v, 65536, &eager), 0);
	CHECK_EQ(e2e_stat(&e, "rdma.area_regs") - regs, 1); /* once per attach */
	free(got);
	free(v);
}

/*
 * A client that moved a large payload and detached: its area's registration
 * (over verbs, its whole area pinned) goes with the reclaim of its entry,
 * not when the entry is next used.
 */
static void test_departed_client_area_released(void)
{
	long long live = e2e_stat(&e, "rdma.areas_live"), drops = e2e_stat(&e, "rdma.area_drops");
	struct rdmem_opts eager = on(RDMEM_PATH_EAGER, NULL);
	uint8_t *v = calloc(1, 65536);
	long pin = agent_kb("VmPin"), pinned;
	rdmem_t *h = NULL;
	int i;

	REQUIRE(v);
	REQUIRE(rdmem_open(e.shm, &h) == 0);
	CHECK_EQ(rdmem_put(h, "departed", 8, v, 65536, &eager), 0);
	CHECK_EQ(e2e_stat(&e, "rdma.areas_live"), live + 1);
	pinned = agent_kb("VmPin");
	rdmem_close(h);
	for (i = 0; i < 300 && e2e_stat(&e, "rdma.areas_live") > live; i++)
		proc_sleep_ms(10);
	CHECK_EQ(e2e_stat(&e, "rdma.areas_live"), live);
	CHECK_EQ(e2e_stat(&e, "rdma.area_drops") - drops, 1);
	printf("# agent VmPin %ld kB, with a departed client's area registered %ld, after it went "
	       "%ld (polled every 10 ms: %d polls)\n",
	       pin, pinned, agent_kb("VmPin"), i);
	if (!strcmp(e.fabric, "verbs"))
		CHECK(pinned - pin > 1024 && agent_kb("VmPin") == pin);
	free(v);
}

/* PUT, GET, DEL of every size on every path; the value comes back byte-exact. */
static void test_kv_every_path_every_size(void)
{
	uint8_t *val = malloc(1u << 20);
	size_t p, i;

	REQUIRE(val);
	for (p = 0; p < sizeof(paths); p++) {
		for (i = 0; i < RDMEM_ARRAY_SIZE(sizes); i++) {
			struct rdmem_info info = { 0 };
			struct rdmem_opts o = on(paths[p], &info);
			char key[32];
			void *got = NULL;
			uint32_t len = 0;

			snprintf(key, sizeof(key), "kv-%zu-%zu", p, i);
			e2e_fill(val, sizes[i], (uint32_t)(p * 100 + i));
			CHECK_EQ(rdmem_put(e.h, key, (uint32_t)strlen(key), val, sizes[i], &o), 0);
			if (paths[p] != RDMEM_PATH_AUTO)
				CHECK_EQ(info.path, paths[p]);
			CHECK_EQ(rdmem_get(e.h, key, (uint32_t)strlen(key), &got, &len, &o), 0);
			CHECK_EQ(len, sizes[i]);
			CHECK(got && memcmp(got, val, sizes[i]) == 0);
			free(got);
			got =
			    (void
				 *)1; /* a failed call must set it NULL (free() after it is safe) */
			CHECK_EQ(rdmem_del(e.h, key, (uint32_t)strlen(key), &o), 0);
			CHECK_EQ(rdmem_get(e.h, key, (uint32_t)strlen(key), &got, &len, &o),
				 -ENOENT);
			CHECK(got == NULL && len == 0);
		}
	}
	free(val);
}

static void test_over_cap_refused(void)
{
	uint8_t *val = calloc(1, (1u << 20) + 1);
	size_t p;

	REQUIRE(val);
	for (p = 0; p < sizeof(paths); p++) {
		struct rdmem_opts o = on(paths[p], NULL);

		CHECK_EQ(rdmem_put(e.h, "big", 3, val, (1u << 20) + 1, &o), -E2BIG);
	}
	free(val);
}

static void test_other_ops_every_path(void)
{
	const char *keys[] = { "m-a", "m-missing", "m-b" };
	uint32_t klens[] = { 3, 9, 3 };
	size_t p;

	CHECK_EQ(rdmem_put(e.h, "m-a", 3, "alpha", 5, NULL), 0);
	CHECK_EQ(rdmem_put(e.h, "m-b", 3, "", 0, NULL), 0);
	for (p = 0; p < sizeof(paths); p++) {
		struct rdmem_opts o = on(paths[p], NULL);
		struct rdmem_mget m;
		struct rdmem_profile prof;
		const void *d;
		void *out = NULL;
		uint32_t len;
		uint8_t echo[3000];

		CHECK_EQ(rdmem_ping(e.h, &o), 0);
		e2e_fill(echo, sizeof(echo), 7);
		CHECK_EQ(rdmem_echo(e.h, echo, sizeof(echo), &out, &len, &o), 0);
		CHECK(len == sizeof(echo) && out && memcmp(out, echo, len) == 0);
		free(out);
		REQUIRE(rdmem_mget(e.h, keys, klens, 3, &m, &o) == 0);
		CHECK_EQ(rdmem_mget_value(&m, 0, &d, &len), 1);
		CHECK(len == 5 && memcmp(d, "alpha", 5) == 0);
		CHECK_EQ(rdmem_mget_value(&m, 1, &d, &len), 0);
		CHECK_EQ(rdmem_mget_value(&m, 2, &d, &len), 1);
		CHECK_EQ(len, 0);
		rdmem_mget_free(&m);
		REQUIRE(rdmem_profile(e.h, 1042, &prof, &o) == 0);
		CHECK_EQ(prof.view.id, 1042);
		CHECK(prof.view.name_len > 0 && prof.view.tag_count > 0);
		rdmem_profile_free(&prof);
		CHECK_EQ(rdmem_profile(e.h, 5, &prof, &o), -ENOENT);
		CHECK_EQ(rdmem_large_get(e.h, "big:1m", &out, &len, &o), 0);
		CHECK_EQ(len, 1u << 20);
		CHECK(out && rdmem_big_verify(1u << 20, 0, out, len) == len);
		free(out);
		out = NULL;
		CHECK_EQ(rdmem_large_get(e.h, "big:2m", &out, &len, &o), -E2BIG);
	}
}

static int file_equals(const char *path, const uint8_t *want, size_t n)
{
	FILE *f = fopen(path, "rb");
	uint8_t *got = malloc(n + 1);
	size_t r = f && got ? fread(got, 1, n + 1, f) : 0;
	int same = r == n && memcmp(got, want, n) == 0;

	if (f)
		fclose(f);
	free(got);
	return same;
}

static void test_image_upload_every_path(void)
{
	uint32_t n = 3u << 20;
	uint8_t *img = malloc(n);
	size_t p;

	REQUIRE(img);
	e2e_fill(img, n, 42);
	for (p = 0; p < sizeof(paths); p++) {
		struct rdmem_opts o = on(paths[p], NULL);
		char name[32], path[256];

		snprintf(name, sizeof(name), "cam-%zu.jpg", p);
		snprintf(path, sizeof(path), "%s/%s", e.image_dir, name);
		CHECK_EQ(rdmem_image_put(e.h, name, img, n, NULL, &o), 0);
		CHECK(file_equals(path, img, n));
	}
	free(img);
}

/* AUTO's choices, read back from the agent's per-path counters. */
static void test_auto_choices(void)
{
	uint8_t *v = calloc(1, 65536);
	void *out = NULL;
	uint32_t len;
	long long eager, lazy, bulk;

	REQUIRE(v);
	CHECK_EQ(rdmem_put(e.h, "auto-small", 10, v, 32, NULL), 0);
	CHECK_EQ(rdmem_put(e.h, "auto-64k", 8, v, 65536, NULL), 0);
	eager = e2e_stat(&e, "paths.eager.ok");
	lazy = e2e_stat(&e, "paths.lazy.ok");
	bulk = e2e_stat(&e, "paths.bulk.ok");
	CHECK_EQ(rdmem_get(e.h, "auto-small", 10, &out, &len, NULL), 0);
	free(out);
	CHECK_EQ(e2e_stat(&e, "paths.eager.ok") - eager, 1);
	CHECK_EQ(rdmem_get(e.h, "auto-64k", 8, &out, &len, NULL), 0);
	free(out);
	CHECK_EQ(e2e_stat(&e, "paths.lazy.ok") - lazy, 1);
	CHECK_EQ(rdmem_put(e.h, "auto-16k", 8, v, 16384, NULL), 0);
	CHECK_EQ(e2e_stat(&e, "paths.bulk.ok") - bulk, 1);
	free(v);
}

/* 8 LAZY gets leave no live object once the agent has reclaimed them. */
static void test_lazy_objects_reclaimed(void)
{
	long long reclaimed = e2e_stat(&e, "rdma.reclaimed");
	void *out = NULL;
	uint32_t len;
	int i;

	for (i = 0; i < 8; i++) {
		struct rdmem_opts o = on(RDMEM_PATH_LAZY, NULL);

		CHECK_EQ(rdmem_large_get(e.h, "big:100k", &out, &len, &o), 0);
		free(out);
	}
	/* RECLAIMs go out when the agent is idle; give them a moment. */
	for (i = 0; i < 100 && e2e_stat(&e, "rdma.reclaimed") - reclaimed < 8; i++)
		proc_sleep_ms(10);
	CHECK_EQ(e2e_stat(&e, "rdma.reclaimed") - reclaimed, 8);
	for (i = 0; i < 100 && e2e_stat(&e, "server.objects_live") != 0; i++)
		proc_sleep_ms(10);
	CHECK_EQ(e2e_stat(&e, "server.objects_live"), 0);
	CHECK_EQ(e2e_stat(&e, "rdma.reclaim_refused"), 0);
}

static long long tcp_ok(void)
{
	return e2e_stat(&e, "paths.tcp.ok");
}

/* Each fallback trigger sends AUTO calls over TCP, and they succeed. */
static void test_fallbacks(void)
{
	const char *triggers[][2] = {
		{ "simulate-rdma-down on", "simulate-rdma-down off" },
		{ "simulate-server-pressure ring", "simulate-server-pressure off" },
		{ "simulate-server-pressure objpool", "simulate-server-pressure off" },
	};
	long long before, fallbacks;
	size_t t;

	CHECK_EQ(rdmem_put(e.h, "fb", 2, "v", 1, NULL), 0);
	for (t = 0; t < RDMEM_ARRAY_SIZE(triggers); t++) {
		before = tcp_ok();
		CHECK_EQ(e2e_ctl(&e, triggers[t][0]), 0);
		CHECK_EQ(rdmem_put(e.h, "fb", 2, "w", 1, NULL), 0);
		CHECK_EQ(tcp_ok() - before, 1);
		CHECK_EQ(e2e_ctl(&e, triggers[t][1]), 0);
		before = tcp_ok();
		CHECK_EQ(rdmem_put(e.h, "fb", 2, "x", 1, NULL), 0);
		CHECK_EQ(tcp_ok() - before, 0);
	}
	/* One injected RDMA failure: that call is retried on TCP and succeeds. */
	fallbacks = e2e_stat(&e, "fallbacks");
	before = tcp_ok();
	CHECK_EQ(e2e_ctl(&e, "simulate-rdma-op-fail 1"), 0);
	CHECK_EQ(rdmem_put(e.h, "fb", 2, "y", 1, NULL), 0);
	CHECK_EQ(e2e_stat(&e, "fallbacks") - fallbacks, 1);
	CHECK_EQ(tcp_ok() - before, 1);
	/* Errors over --error-threshold: AUTO stays on TCP. */
	CHECK_EQ(e2e_ctl(&e, "simulate-rdma-errors 100"), 0);
	before = tcp_ok();
	CHECK_EQ(rdmem_put(e.h, "fb", 2, "z", 1, NULL), 0);
	CHECK_EQ(tcp_ok() - before, 1);
	CHECK_EQ(e2e_ctl(&e, "simulate-bogus 1"), -EINVAL);
}

/*
 * 32 forced-EAGER GETs in flight, each of a different value: each reply is
 * copied out of its own RDMA response slot (slots 0..31 at once), so a
 * wrong response stride or slot index gives some call another's bytes.
 */
static void test_eager_window_32(void)
{
	static uint8_t vals[32][3000];
	struct rdmem_rpc rpc[32];
	char keys[32][16];
	int i, right = 0;

	for (i = 0; i < 32; i++) {
		snprintf(keys[i], sizeof(keys[i]), "ew-%02d", i);
		e2e_fill(vals[i], sizeof(vals[i]), 700 + (uint32_t)i);
		REQUIRE(rdmem_put(e.h, keys[i], 5, vals[i], sizeof(vals[i]), NULL) == 0);
	}
	for (i = 0; i < 32; i++) {
		rdmem_rpc_init(&rpc[i], RDMEM_OP_KV_GET);
		rpc[i].key = keys[i];
		rpc[i].key_len = 5;
		rpc[i].path = RDMEM_PATH_EAGER;
		REQUIRE(rdmem_submit(e.h, &rpc[i]) == 0);
	}
	for (i = 0; i < 32; i++) {
		rdmem_wait(e.h, &rpc[i]);
		right += rpc[i].rc == 0 && rpc[i].rpath == RDMEM_PATH_EAGER &&
			 rpc[i].rlen == sizeof(vals[i]) &&
			 memcmp(rpc[i].rval, vals[i], sizeof(vals[i])) == 0;
		rdmem_rpc_free(&rpc[i]);
	}
	CHECK_EQ(right, 32);
}

/* An in-place reply is read where it landed in the slot, and holds the slot. */
static void test_inplace_reply(void)
{
	struct rdmem_rpc rpc[40];
	uint8_t v[100000];
	int i, held = 0;

	e2e_fill(v, sizeof(v), 9);
	REQUIRE(rdmem_put(e.h, "inplace", 7, v, sizeof(v), NULL) == 0);
	/* More in-place replies than slots (32): the extra calls wait for a
	 * slot and, since none is freed, time out; freeing brings them back. */
	for (i = 0; i < 40; i++) {
		rdmem_rpc_init(&rpc[i], RDMEM_OP_KV_GET);
		rpc[i].key = "inplace";
		rpc[i].key_len = 7;
		rpc[i].inplace = 1;
		rpc[i].timeout_ms = 300;
		if (rdmem_submit(e.h, &rpc[i]) != 0)
			break;
		rdmem_wait(e.h, &rpc[i]);
		if (rpc[i].rc == 0) {
			held++;
			CHECK(rpc[i].rlen == sizeof(v) && !memcmp(rpc[i].rval, v, sizeof(v)));
		}
	}
	CHECK_EQ(held, 32);
	CHECK_EQ(i, 32); /* the 33rd found no slot within its timeout */
	while (i--)
		rdmem_rpc_free(&rpc[i]);
	CHECK_EQ(rdmem_ping(e.h, NULL), 0);
}

static int submit_get(struct rdmem_rpc *rpc, const char *key)
{
	rdmem_rpc_init(rpc, RDMEM_OP_KV_GET);
	rpc->key = key;
	rpc->key_len = (uint32_t)strlen(key);
	return rdmem_submit(e.h, rpc);
}

/* 10 000 calls at window 32: no failure, no late reply, all values right. */
static void test_async_window_32(void)
{
	struct rdmem_rpc rpc[32];
	char keys[32][16];
	int active[32], done = 0, issued = 0, failures = 0, late = 0, i;

	for (i = 0; i < 32; i++) {
		snprintf(keys[i], sizeof(keys[i]), "w-%02d", i);
		CHECK_EQ(rdmem_put(e.h, keys[i], 4, keys[i], 4, NULL), 0);
		active[i] = submit_get(&rpc[i], keys[i]) == 0;
		issued++;
		failures += !active[i];
	}
	while (done + failures < 10000) {
		for (i = 0; i < 32; i++) {
			if (!active[i] || rdmem_poll(e.h, &rpc[i]) != 1)
				continue;
			done++;
			failures += rpc[i].rc != 0 || rpc[i].rlen != 4 ||
				    memcmp(rpc[i].rval, keys[i], 4) != 0;
			late += rpc[i].late;
			rdmem_rpc_free(&rpc[i]);
			active[i] = 0;
			if (issued < 10000) {
				issued++;
				active[i] = submit_get(&rpc[i], keys[i]) == 0;
				failures += !active[i];
			}
		}
	}
	CHECK_EQ(done, 10000);
	CHECK_EQ(failures, 0);
	CHECK_EQ(late, 0);
}

/* 32 LAZY gets in flight on handle h; returns the calls that failed or came
 * back wrong (each value must be exactly the 64 KiB object, read LAZY). */
static int lazy_window_32(rdmem_t *h)
{
	struct rdmem_rpc rpc[32];
	int bad = 0, i;

	for (i = 0; i < 32; i++) {
		rdmem_rpc_init(&rpc[i], RDMEM_OP_LARGE_GET);
		rpc[i].key = "big:64k";
		rpc[i].key_len = 7;
		rpc[i].path = RDMEM_PATH_LAZY;
		if (rdmem_submit(h, &rpc[i]) < 0) {
			rpc[i].op = 0; /* not in flight */
			bad++;
		}
	}
	for (i = 0; i < 32; i++) {
		if (!rpc[i].op)
			continue;
		rdmem_wait(h, &rpc[i]);
		bad += rpc[i].rc != 0 || rpc[i].rpath != RDMEM_PATH_LAZY ||
		       rdmem_large_verify("big:64k", rpc[i].rval, rpc[i].rlen) != 0;
		rdmem_rpc_free(&rpc[i]);
	}
	return bad;
}

/* Many LAZY READs wanted at once: the agent keeps at most the READ depth the
 * connection agreed in flight (more would stall the send queue behind them on
 * a NIC); the rest wait their turn. Then the same through a second agent
 * capped at 2 READs, which must be reached and make READs wait. */
static void test_lazy_reads_within_depth(void)
{
	struct proc agent2 = { 0 };
	char shm2[80];
	rdmem_t *h2 = NULL;
	char *text = NULL;
	uint32_t len;
	long long max, peak, waits;
	int i;

	CHECK_EQ(lazy_window_32(e.h), 0);
	max = e2e_stat(&e, "rdma.reads_max");
	peak = e2e_stat(&e, "rdma.reads_peak");
	printf("# READ depth %lld, peak %lld, waited %lld\n", max, peak,
	       e2e_stat(&e, "rdma.read_waits"));
	CHECK(max >= 1 && peak >= 1 && peak <= max);

	snprintf(shm2, sizeof(shm2), "%s-r", e.shm);
	REQUIRE(e2e_second_agent(&e, &agent2, shm2, "--max-reads", "2", NULL) == 0);
	if (rdmem_open(shm2, &h2) == 0) {
		/* Whether a READ has to wait depends on how the replies bunch
		 * up (measured 0-30 waits a window of 32 here): up to 10
		 * windows, until the cap has made READs wait. */
		for (i = 0, waits = 0; i < 10 && waits <= 0; i++) {
			CHECK_EQ(lazy_window_32(h2), 0);
			REQUIRE(rdmem_agent_stats(h2, 1, &text, &len, NULL) == 0);
			CHECK_EQ(e2e_json_num(text, "rdma.reads_max"), 2);
			peak = e2e_json_num(text, "rdma.reads_peak");
			waits = e2e_json_num(text, "rdma.read_waits");
			free(text);
		}
		printf("# capped at 2: peak %lld, waited %lld after %d windows\n", peak, waits, i);
		/* The cap was reached, never passed, and did hold READs back. */
		CHECK_EQ(peak, 2);
		CHECK(waits > 0);
		rdmem_close(h2);
	} else {
		CHECK(0);
	}
	proc_stop(&agent2, SIGTERM, 5000);
	e2e_unlink_door(shm2);
}

int main(int argc, char **argv)
{
	const char *fabric = argc > 1 ? argv[1] : "shm";

	rdmem_log_init("test_agent_paths", 0);
	if (e2e_init(&e, fabric) < 0 || e2e_server(&e, fabric, NULL) < 0 || e2e_agent(&e, NULL)) {
		printf("not ok - start server and agent over %s\n", fabric);
		e2e_fini(&e);
		return 1;
	}
	RUN(test_small_calls_leave_area_unregistered);
	RUN(test_departed_client_area_released);
	RUN(test_kv_every_path_every_size);
	RUN(test_over_cap_refused);
	RUN(test_other_ops_every_path);
	RUN(test_image_upload_every_path);
	RUN(test_auto_choices);
	RUN(test_lazy_objects_reclaimed);
	RUN(test_lazy_reads_within_depth);
	RUN(test_fallbacks);
	RUN(test_async_window_32);
	RUN(test_eager_window_32);
	RUN(test_inplace_reply);
	e2e_fini(&e);
	return check_done();
}
