/* test_multi_server.c - one agent, three servers (rdmem-agent -s A,B,C and
 * --servers-file): every key lives on the server agent/route.h picks for it
 * and on no other, read back byte-exact; an MGET spanning the servers comes
 * back merged in request order; PING/ECHO/PROFILE/LARGE_GET/IMAGE go where
 * their key routes; agent-stats has a section per server and agent-ctl
 * reaches every session; a server killed under load fails only its own keys
 * and rejoins by itself when restarted; the servers file is re-read on
 * SIGHUP and on agent-ctl reload, servers kept keeping their sessions.
 * Every case runs with the agent on --fabric shm and on --fabric tcp; the
 * servers are real rdmem-server processes on loopback.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/route.h"
#include "check.h"
#include "e2e.h"
#include "rdmem/util.h"
#include "tmpdir.h"

#define NS	  3
#define NKEYS	  3000
#define VAL_MAX	  70000
#define READY_MS  30000
#define REJOIN_MS 15000
#define HOST	  "127.0.0.1"

static struct srv {
	struct proc p;
	unsigned port; /* RDMA port; TCP is port + 1 */
	char name[32]; /* "127.0.0.1:PORT": the name the agent routes by */
	char img[128];
	char log[16];
} srv[NS];

static struct proc agent;
static rdmem_t *h;
static char shm[64], fabric[8], list_file[160], tmpdir[64];
static int servers_up, agent_up;
static uint8_t *val, *got_buf;

/* ---- processes -------------------------------------------------------------- */

static int start_server(int i)
{
	char bin[512], port[16], tcp[16];
	char *argv[] = { bin, "-b",	  HOST,	 "-p",		port,	    "--tcp-port",
			 tcp, "--fabric", "shm", "--image-dir", srv[i].img, NULL };

	snprintf(bin, sizeof(bin), "%s/rdmem-server", proc_bin());
	snprintf(port, sizeof(port), "%u", srv[i].port);
	snprintf(tcp, sizeof(tcp), "%u", srv[i].port + 1);
	return proc_start(&srv[i].p, srv[i].log, argv, "listening tcp", READY_MS);
}

/* How many times needle occurs in p's log (which may outgrow proc_log_has's 64 KiB). */
static int log_count(const struct proc *p, const char *needle)
{
	FILE *f = fopen(p->log, "r");
	char line[4096];
	int n = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, needle) != NULL;
	fclose(f);
	return n;
}

/* RDMA sessions the agent has opened with server i (its log says each). */
static int sessions_with(int i)
{
	char needle[64];

	snprintf(needle, sizeof(needle), "with %s ", srv[i].name);
	return log_count(&agent, needle);
}

/* Waits up to ms until the agent has at least want[i] sessions with each
 * server i of idx[0..n). 0, or -1. */
static int wait_sessions(const int *idx, const int *want, int n, int ms)
{
	uint64_t end = rdmem_now_ns() + (uint64_t)ms * 1000000ull;
	int k;

	for (;;) {
		for (k = 0; k < n && sessions_with(idx[k]) >= want[k]; k++)
			;
		if (k == n)
			return 0;
		if (rdmem_now_ns() > end)
			break;
		proc_sleep_ms(20);
	}
	fprintf(stderr, "  no RDMA session with %s after %d ms\n", srv[idx[k]].name, ms);
	proc_dump_log(&agent);
	return -1;
}

/*
 * Starts the agent on this run's fabric with how ("-s" or "--servers-file"),
 * arg, and up to 4 more arguments (NULL-ended); idx[0..n) are the servers it
 * should dial (on shm: each must get its RDMA session). Attaches h.
 */
static int start_agent(const int *idx, int n, const char *how, const char *arg, ...)
{
	char bin[512];
	const char *argv[24] = { bin, how,	   arg, "--fabric", fabric, "--shm-name",
				 shm, "--clients", "4", "--slots",  "32" };
	int argc = 11, one[NS] = { 1, 1, 1 };
	va_list ap;

	snprintf(bin, sizeof(bin), "%s/rdmem-agent", proc_bin());
	va_start(ap, arg);
	while (argc < 20 && (argv[argc] = va_arg(ap, const char *)))
		argc++;
	va_end(ap);
	argv[argc] = NULL;
	if (proc_start(&agent, "agent", (char *const *)argv, "ready:", READY_MS) < 0)
		return -1;
	if (!strcmp(fabric, "shm") && wait_sessions(idx, one, n, READY_MS) < 0)
		return -1;
	return rdmem_open(shm, &h);
}

static void stop_agent(void)
{
	if (h)
		rdmem_close(h);
	h = NULL;
	if (agent.pid > 0)
		CHECK_EQ(proc_stop(&agent, SIGTERM, 5000), 0);
	e2e_unlink_door(shm);
	agent_up = 0;
}

/* ---- routing, predicted ----------------------------------------------------- */

/* The server (an index into srv) the agent listing idx[0..n) sends key to. */
static int owner_in(const int *idx, int n, const void *key, size_t len)
{
	uint64_t seeds[NS];
	int k;

	for (k = 0; k < n; k++)
		seeds[k] = rdmem_route_server_seed(srv[idx[k]].name);
	return idx[rdmem_route_pick(seeds, (uint32_t)n, rdmem_route_key_hash(key, len))];
}

static const int all3[NS] = { 0, 1, 2 };

static int owner(const char *key)
{
	return owner_in(all3, NS, key, strlen(key));
}

/* ---- straight to one server over its TCP port ------------------------------- */

static struct rdmem_tcp_client *direct[NS];

static void direct_close(void)
{
	int i;

	for (i = 0; i < NS; i++) {
		if (direct[i])
			rdmem_tcp_client_close(direct[i]);
		direct[i] = NULL;
	}
}

/* GET key from server i itself: 0 (value in buf, *len), -ENOENT, or -errno. */
static int direct_get(int i, const char *key, void *buf, uint32_t cap, uint32_t *len)
{
	struct rdmem_tcp_call call;
	int rc;

	if (!direct[i] &&
	    rdmem_tcp_client_connect(HOST, (uint16_t)(srv[i].port + 1), 2000, &direct[i]) < 0)
		return -ECONNREFUSED;
	memset(&call, 0, sizeof(call));
	call.req.op = RDMEM_OP_KV_GET;
	call.req.key_len = (uint16_t)strlen(key);
	call.key = key;
	call.reply = buf;
	call.reply_cap = cap;
	rc = rdmem_tcp_client_call(direct[i], &call, 5000);
	if (rc < 0) {
		rdmem_tcp_client_close(direct[i]);
		direct[i] = NULL;
		return rc;
	}
	*len = call.rep.val_len;
	return call.rep.status == RDMEM_S_OK	      ? 0
	       : call.rep.status == RDMEM_S_NOT_FOUND ? -ENOENT
						      : -EIO;
}

/* A number from server i's own STATS (e.g. "ops.ping.calls"), or -1. */
static long long server_stat(int i, const char *path)
{
	static char text[1 << 17];

	return e2e_server_json_at(srv[i].port + 1, text, sizeof(text)) == 0
		   ? e2e_json_num(text, path)
		   : -1;
}

/* ---- values ----------------------------------------------------------------- */

static uint32_t size_of(uint32_t i)
{
	return i % 100 == 7 ? VAL_MAX : i % 50 == 3 ? 0 : (i * 37u) % 5000u;
}

static uint32_t seed_of(const char *key, uint32_t version)
{
	return (uint32_t)rdmem_route_key_hash(key, strlen(key)) ^ (version * 7919u);
}

/* PUT key with the value of (key, size, version) through the agent. */
static int put_v(const char *key, uint32_t size, uint32_t version, uint8_t *buf,
		 const struct rdmem_opts *o)
{
	e2e_fill(buf, size, seed_of(key, version));
	return rdmem_put(h, key, (uint32_t)strlen(key), buf, size, o);
}

/* GET key through the agent; 0 and *exact = 1 when it is (size, version)'s value. */
static int get_v(const char *key, uint32_t size, uint32_t version, uint8_t *buf, int *exact,
		 const struct rdmem_opts *o)
{
	void *got = NULL;
	uint32_t len = 0;
	int rc = rdmem_get(h, key, (uint32_t)strlen(key), &got, &len, o);

	*exact = 0;
	if (rc == 0) {
		e2e_fill(buf, size, seed_of(key, version));
		*exact = len == size && got && memcmp(got, buf, size) == 0;
	}
	free(got);
	return rc;
}

static void key_name(char *buf, size_t cap, const char *what, uint32_t i)
{
	snprintf(buf, cap, "%s-%s-%05u", fabric, what, i);
}

/* ---- agent telemetry -------------------------------------------------------- */

static char *agent_stats(int json)
{
	char *text = NULL;
	uint32_t len = 0;

	if (rdmem_agent_stats(h, json, &text, &len, NULL) < 0) {
		free(text);
		return NULL;
	}
	return text;
}

/* Server name's object in the agent's JSON ({"servers":{"NAME":{...},...}}), or NULL. */
static const char *section(const char *json, const char *name)
{
	char key[48];
	const char *p;

	snprintf(key, sizeof(key), "\"%s\":", name);
	for (p = json; (p = strstr(p, key)); p++) {
		const char *q = p + strlen(key);

		while (*q == ' ')
			q++;
		if (*q == '{')
			return q;
	}
	return NULL;
}

/* The JSON lists exactly the servers idx[0..n) of srv. */
static int lists_exactly(const char *json, const int *idx, int n)
{
	int i, k, ok = json && strstr(json, "\"servers\":") != NULL;

	for (i = 0; ok && i < NS; i++) {
		int want = 0;

		for (k = 0; k < n; k++)
			want |= idx[k] == i;
		ok = !section(json, srv[i].name) == !want;
	}
	return ok;
}

/* Waits up to ms for the agent's JSON to list exactly idx[0..n). */
static int wait_listed(const int *idx, int n, int ms)
{
	uint64_t end = rdmem_now_ns() + (uint64_t)ms * 1000000ull;

	do {
		char *json = agent_stats(1);
		int ok = lists_exactly(json, idx, n);

		free(json);
		if (ok)
			return 1;
		proc_sleep_ms(50);
	} while (rdmem_now_ns() < end);
	return 0;
}

/* ---- cases ------------------------------------------------------------------ */

static void test_agent_up(void)
{
	char list[128];

	REQUIRE(servers_up);
	snprintf(list, sizeof(list), "%s,%s,%s", srv[0].name, srv[1].name, srv[2].name);
	REQUIRE(start_agent(all3, NS, "-s", list, NULL) == 0);
	agent_up = 1;
	CHECK_EQ(rdmem_ping(h, NULL), 0);
	if (!strcmp(fabric, "shm")) {
		int i;

		for (i = 0; i < NS; i++)
			CHECK_EQ(sessions_with(i), 1);
	}
}

/* 3000 distinct keys, distinct values (0 B to 70000 B), byte-exact back. */
static void test_put_get_3000(void)
{
	struct rdmem_opts o = { RDMEM_PATH_AUTO, 10000, NULL };
	int per[NS] = { 0 }, bad_put = 0, bad_get = 0, i;
	char key[64];

	REQUIRE(agent_up);
	for (i = 0; i < NKEYS; i++) {
		int rc;

		key_name(key, sizeof(key), "k", (uint32_t)i);
		rc = put_v(key, size_of((uint32_t)i), 1, val, &o);
		if (rc && bad_put++ < 5)
			fprintf(stderr, "  put %s (server %d): %s\n", key, owner(key) + 1,
				rdmem_strerror(rc));
		per[owner(key)]++;
	}
	for (i = 0; i < NKEYS; i++) {
		int exact, rc;

		key_name(key, sizeof(key), "k", (uint32_t)i);
		rc = get_v(key, size_of((uint32_t)i), 1, val, &exact, &o);
		if ((rc || !exact) && bad_get++ < 5)
			fprintf(stderr, "  get %s (server %d): %s%s\n", key, owner(key) + 1,
				rdmem_strerror(rc), rc == 0 ? ", wrong bytes" : "");
	}
	CHECK_EQ(bad_put, 0);
	CHECK_EQ(bad_get, 0);
	printf("# %d keys: %d / %d / %d on servers 1 / 2 / 3\n", NKEYS, per[0], per[1], per[2]);
	for (i = 0; i < NS; i++)
		CHECK(per[i] > NKEYS / 4);
}

/*
 * Each key is on the server route.h names and only there (asked of every
 * server straight over its TCP port), with the bytes the agent was given.
 * A DEL through the agent removes it from that server.
 */
static void test_placement(void)
{
	uint32_t i, len;
	int misplaced = 0, missing = 0, wrong = 0, s;
	char key[64];

	REQUIRE(agent_up);
	for (i = 0; i < NKEYS; i += 7) {
		int own;

		key_name(key, sizeof(key), "k", i);
		own = owner(key);
		for (s = 0; s < NS; s++) {
			int rc = direct_get(s, key, got_buf, VAL_MAX, &len);

			if (s != own && rc != -ENOENT && misplaced++ < 5)
				fprintf(stderr, "  %s: server %d answered %s (owner: server %d)\n",
					key, s + 1, rdmem_strerror(rc), own + 1);
			if (s == own && rc != 0 && missing++ < 5)
				fprintf(stderr, "  %s: not on its server %d: %s\n", key, own + 1,
					rdmem_strerror(rc));
			if (s == own && rc == 0) {
				e2e_fill(val, size_of(i), seed_of(key, 1));
				wrong += len != size_of(i) || memcmp(got_buf, val, len) != 0;
			}
		}
	}
	CHECK_EQ(misplaced, 0);
	CHECK_EQ(missing, 0);
	CHECK_EQ(wrong, 0);
	for (i = 0; i < 60; i++) {
		key_name(key, sizeof(key), "k", i * 11);
		CHECK_EQ(rdmem_del(h, key, (uint32_t)strlen(key), NULL), 0);
		CHECK_EQ(direct_get(owner(key), key, got_buf, VAL_MAX, &len), -ENOENT);
	}
	direct_close();
}

/* 64 keys over all three servers, some missing: merged back in request order. */
static void test_mget_spans_servers(void)
{
	enum { N = 64 };
	const char *keys[N];
	char names[N][64];
	uint32_t klens[N], i, len;
	int present_on[NS] = { 0 }, missing_on[NS] = { 0 }, bad = 0, s;
	long long before[NS];
	struct rdmem_mget m;

	REQUIRE(agent_up);
	for (i = 0; i < N; i++) {
		key_name(names[i], sizeof(names[i]), "mg", i);
		keys[i] = names[i];
		klens[i] = (uint32_t)strlen(names[i]);
		if (i % 5 == 3) {
			missing_on[owner(names[i])]++;
			continue;
		}
		present_on[owner(names[i])]++;
		CHECK_EQ(put_v(names[i], (i * 131u) % 3000u, 1, val, NULL), 0);
	}
	for (s = 0; s < NS; s++) {
		CHECK(present_on[s] > 0); /* the batch really spans the servers */
		before[s] = server_stat(s, "ops.mget.calls");
	}
	CHECK(missing_on[0] + missing_on[1] + missing_on[2] > 0);
	REQUIRE(rdmem_mget(h, keys, klens, N, &m, NULL) == 0);
	for (i = 0; i < N; i++) {
		const void *d = NULL;
		int has = rdmem_mget_value(&m, i, &d, &len);

		if (i % 5 == 3) {
			if (has != 0 && bad++ < 5)
				fprintf(stderr, "  mget[%u] %s: present, should be missing\n", i,
					names[i]);
			continue;
		}
		e2e_fill(val, (i * 131u) % 3000u, seed_of(names[i], 1));
		if ((has != 1 || len != (i * 131u) % 3000u || (len && memcmp(d, val, len))) &&
		    bad++ < 5)
			fprintf(stderr, "  mget[%u] %s (server %d): %s\n", i, names[i],
				owner(names[i]) + 1, has == 1 ? "wrong bytes" : "missing");
	}
	CHECK_EQ(bad, 0);
	rdmem_mget_free(&m);
	/* It fanned out: each server answered an MGET of its own keys. */
	for (s = 0; s < NS; s++) {
		long long after = server_stat(s, "ops.mget.calls");

		printf("# server %d: %d keys in the batch (%d missing), %lld MGET\n", s + 1,
		       present_on[s] + missing_on[s], missing_on[s], after - before[s]);
		CHECK(after - before[s] >= 1);
	}
	/* All missing: every entry missing, none invented. */
	{
		const char *none[3] = { "no-such-1", "no-such-2", "no-such-3" };
		uint32_t nl[3] = { 9, 9, 9 };
		const void *d;

		REQUIRE(rdmem_mget(h, none, nl, 3, &m, NULL) == 0);
		for (i = 0; i < 3; i++)
			CHECK_EQ(rdmem_mget_value(&m, i, &d, &len), 0);
		rdmem_mget_free(&m);
	}
}

/*
 * An MGET whose values are all but a few on one server: three values of
 * 300,000 B on server 1, 27 of 1000 B on the others. The agent splits the
 * reply area by key count, so server 1's part overflows its share and must
 * run again alone (router_fan.c); the merge is still whole and in order.
 * Four such values (1.2 MB) are over --max-value (1 MiB): -E2BIG, as from
 * one server.
 */
static void test_mget_uneven(void)
{
	enum { N = 31, BIG = 300000 };
	const char *keys[N];
	char names[N][64];
	uint32_t klens[N], sizes[N], i, len, nbig = 0, nsmall = 0, c = 0;
	uint8_t *big = malloc(BIG);
	struct rdmem_mget m;
	long long reruns;
	int bad = 0, rc;

	REQUIRE(agent_up);
	REQUIRE(big);
	/* Big values of server 1 at 0, 10, 20 (and 30); small ones of the others between. */
	while (nbig + nsmall < N) {
		char key[64];
		int own;

		key_name(key, sizeof(key), "mgu", c++);
		own = owner(key);
		if (own == 0 && nbig < 4) {
			i = nbig * 10;
			sizes[i] = BIG;
			nbig++;
		} else if (own != 0 && nsmall < 27) {
			i = (nsmall / 9) * 10 + nsmall % 9 + 1;
			sizes[i] = 1000;
			nsmall++;
		} else {
			continue;
		}
		snprintf(names[i], sizeof(names[i]), "%s", key);
		keys[i] = names[i];
		klens[i] = (uint32_t)strlen(key);
		e2e_fill(big, sizes[i], seed_of(key, 1));
		CHECK_EQ(rdmem_put(h, key, klens[i], big, sizes[i], NULL), 0);
	}
	{
		char *json = agent_stats(1);

		reruns = json ? e2e_json_num(json, "router.reruns") : -1;
		free(json);
	}
	rc = rdmem_mget(h, keys, klens, N - 1, &m, NULL);
	CHECK_EQ(rc, 0);
	if (rc == 0) {
		for (i = 0; i < N - 1; i++) {
			const void *d = NULL;

			e2e_fill(big, sizes[i], seed_of(names[i], 1));
			if ((rdmem_mget_value(&m, i, &d, &len) != 1 || len != sizes[i] ||
			     memcmp(d, big, len)) &&
			    bad++ < 5)
				fprintf(stderr,
					"  mget[%u] %s (%u B, server %d): wrong or missing\n", i,
					names[i], sizes[i], owner(names[i]) + 1);
		}
		rdmem_mget_free(&m);
	}
	CHECK_EQ(bad, 0);
	/* The case did what it is for: a part ran again alone (the agent's
	 * "router.reruns"; not checked where the agent does not count it). */
	{
		char *json = agent_stats(1);
		long long now = json ? e2e_json_num(json, "router.reruns") : -1;

		printf("# router.reruns %lld -> %lld\n", reruns, now);
		if (reruns >= 0)
			CHECK(now > reruns);
		free(json);
	}
	/* With the 4th big value: 1.2 MB of values, over the 1 MiB cap. */
	rc = rdmem_mget(h, keys, klens, N, &m, NULL);
	printf("# mget of 4 x %u B + 27 x 1000 B: %s\n", BIG, rdmem_strerror(rc));
	CHECK_EQ(rc, -E2BIG);
	if (rc == 0)
		rdmem_mget_free(&m);
	/* And the agent is none the worse. */
	CHECK_EQ(rdmem_mget(h, keys, klens, 2, &m, NULL), 0);
	rdmem_mget_free(&m);
	free(big);
}

static int file_size_in(const char *dir, const char *name)
{
	char path[320];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return stat(path, &st) == 0 ? (int)st.st_size : -1;
}

/*
 * The other ops, counted where they land (each server's own STATS): PING and
 * ECHO on the server of the empty key; PROFILE on the server of its id's
 * decimal text; LARGE_GET on the server of its spec; an IMAGE upload's
 * chunks, and its file, on the server of its name.
 */
static void test_other_ops_route(void)
{
	static const char *const specs[] = { "big:1k", "big:64k", "big:100k",
					     "big:7",  "big:1m",  "big:33k" };
	long long ping0[NS], echo0[NS], prof0[NS], large0[NS], img0[NS];
	int want_prof[NS] = { 0 }, want_large[NS] = { 0 }, want_img[NS] = { 0 };
	int empty = owner_in(all3, NS, "", 0), s, i;
	uint32_t len;

	REQUIRE(agent_up);
	for (s = 0; s < NS; s++) {
		ping0[s] = server_stat(s, "ops.ping.calls");
		echo0[s] = server_stat(s, "ops.echo.calls");
		prof0[s] = server_stat(s, "ops.profile.calls");
		large0[s] = server_stat(s, "ops.large_get.calls");
		img0[s] = server_stat(s, "ops.image_chunk.calls");
	}
	for (i = 0; i < 20; i++)
		CHECK_EQ(rdmem_ping(h, NULL), 0);
	for (i = 0; i < 5; i++) {
		void *out = NULL;

		CHECK_EQ(rdmem_echo(h, "hello", 5, &out, &len, NULL), 0);
		CHECK(out && len == 5 && !memcmp(out, "hello", 5));
		free(out);
	}
	for (i = 0; i < 12; i++) {
		struct rdmem_profile prof;
		char id[16];

		snprintf(id, sizeof(id), "%d", 1001 + i * 17);
		want_prof[owner(id)]++;
		if (rdmem_profile(h, (uint64_t)(1001 + i * 17), &prof, NULL) == 0) {
			CHECK_EQ(prof.view.id, 1001 + i * 17);
			rdmem_profile_free(&prof);
		} else {
			CHECK(0);
		}
	}
	for (i = 0; i < (int)RDMEM_ARRAY_SIZE(specs); i++) {
		void *out = NULL;

		want_large[owner(specs[i])]++;
		CHECK_EQ(rdmem_large_get(h, specs[i], &out, &len, NULL), 0);
		CHECK(out && rdmem_large_verify(specs[i], out, len) == 0);
		free(out);
	}
	e2e_fill(val, 60000, 99);
	for (i = 0; i < 6; i++) {
		char name[64];

		snprintf(name, sizeof(name), "%s-cam-%d.jpg", fabric, i);
		want_img[owner(name)] += 3; /* 60000 B in 24 KiB chunks */
		CHECK_EQ(rdmem_image_put(h, name, val, 60000, NULL, NULL), 0);
		for (s = 0; s < NS; s++) {
			int size = file_size_in(srv[s].img, name);

			if (s == owner(name))
				CHECK_EQ(size, 60000);
			else
				CHECK_EQ(size, -1);
		}
	}
	for (s = 0; s < NS; s++) {
		long long ping = server_stat(s, "ops.ping.calls") - ping0[s],
			  echo = server_stat(s, "ops.echo.calls") - echo0[s],
			  prof = server_stat(s, "ops.profile.calls") - prof0[s],
			  large = server_stat(s, "ops.large_get.calls") - large0[s],
			  img = server_stat(s, "ops.image_chunk.calls") - img0[s];

		printf("# server %d: ping %lld echo %lld profile %lld (want %d) large_get %lld "
		       "(want %d) image chunks %lld (want %d)\n",
		       s + 1, ping, echo, prof, want_prof[s], large, want_large[s], img,
		       want_img[s]);
		CHECK(s == empty ? ping >= 20 : ping == 0);
		CHECK(s == empty ? echo >= 5 : echo == 0);
		CHECK(want_prof[s] ? prof >= want_prof[s] : prof == 0);
		CHECK(want_large[s] ? large >= want_large[s] : large == 0);
		CHECK(want_img[s] ? img >= want_img[s] : img == 0);
	}
}

/* Each server's section has force_path = want (a label: "force_path":"tcp"). */
static int all_forced(const char *want)
{
	char *json = agent_stats(1), label[48];
	int s, ok = json != NULL;

	snprintf(label, sizeof(label), "\"force_path\":\"%s\"", want);
	for (s = 0; ok && s < NS; s++) {
		const char *sec = section(json, srv[s].name),
			   *at = sec ? strstr(sec, "\"force_path\":") : NULL;

		ok = at && !strncmp(at, label, strlen(label));
	}
	free(json);
	return ok;
}

/* The path a small PUT to a key of server s takes. */
static int path_to(int s)
{
	struct rdmem_info info = { 0 };
	struct rdmem_opts o = { RDMEM_PATH_AUTO, 5000, &info };
	char key[64];
	uint32_t i;

	for (i = 0;; i++) {
		key_name(key, sizeof(key), "path", i);
		if (owner(key) == s)
			break;
	}
	if (rdmem_put(h, key, (uint32_t)strlen(key), "v", 1, &o) != 0)
		return -1;
	return info.path;
}

/* agent-stats: a section per server (JSON and text); agent-ctl reaches each session. */
static void test_stats_and_ctl(void)
{
	char *json, *text, *reply = NULL, line[64];
	uint32_t len;
	int s;

	REQUIRE(agent_up);
	json = agent_stats(1);
	text = agent_stats(0);
	REQUIRE(json && text);
	CHECK(!strncmp(json, "{\"servers\":{", 12));
	CHECK(lists_exactly(json, all3, NS));
	for (s = 0; s < NS; s++) {
		const char *sec = section(json, srv[s].name);

		REQUIRE(sec);
		/* The object a single-server agent returns: its fields, in order. */
		CHECK(!strncmp(sec, "{\"fabric\":", 10));
		CHECK(e2e_json_num(sec, "paths.tcp.calls") >= 0);
		if (!strcmp(fabric, "shm"))
			CHECK_EQ(e2e_json_num(sec, "link_up"), 1);
		snprintf(line, sizeof(line), "server %s\n", srv[s].name);
		CHECK(!strncmp(text, line, strlen(line)) ||
		      (strstr(text, line) && strstr(text, line)[-1] == '\n'));
	}
	if (!strstr(json, "\"servers\":"))
		printf("# agent-stats --json: %.300s\n", json);
	free(json);
	free(text);

	CHECK_EQ(rdmem_agent_ctl(h, "force-path tcp", &reply, &len, NULL), 0);
	free(reply);
	reply = NULL;
	CHECK(all_forced("tcp"));
	for (s = 0; s < NS; s++)
		CHECK_EQ(path_to(s), RDMEM_PATH_TCP);
	CHECK_EQ(rdmem_agent_ctl(h, "force-path auto", &reply, &len, NULL), 0);
	free(reply);
	reply = NULL;
	CHECK(all_forced("auto"));
	for (s = 0; s < NS; s++)
		CHECK_EQ(path_to(s), !strcmp(fabric, "shm") ? RDMEM_PATH_EAGER : RDMEM_PATH_TCP);
	CHECK_EQ(rdmem_agent_ctl(h, "force-path nowhere", &reply, &len, NULL), -EINVAL);
	free(reply);
	reply = NULL;
	CHECK(all_forced("auto"));
	/* Nothing to reload: the list came from -s. */
	CHECK(rdmem_agent_ctl(h, "reload", &reply, &len, NULL) < 0);
	free(reply);
	reply = NULL;
	CHECK(wait_listed(all3, NS, 0));
	/* The servers' own STATS, through the agent. */
	CHECK_EQ(rdmem_stats(h, 1, &reply, &len, NULL), 0);
	free(reply);
}

/* ---- a server dies under load ----------------------------------------------- */

#define PER_SERVER    12   /* keys per server per thread */
#define DEAD_MS	      5000 /* how long the threads run on with server 2 dead */
#define DOWN_AFTER_MS 4000
/* The agent's TCP actor holds a dead server's calls for 3 s (RDMEM_TCP_DOWN_NS
 * in agent/tcp_actor.c: a restart is ridden out), each failing at its
 * deadline; after that they fail at once. Calls begun DOWN_AFTER_MS after the
 * kill are past that. */

struct loader {
	pthread_t t;
	int id;
	char keys[NS * PER_SERVER][48];
	int own[NS * PER_SERVER];
	uint32_t ver[NS * PER_SERVER]; /* last version PUT that returned 0 */
	uint8_t *buf;
	/* servers 1 and 3 */
	long other_ok, other_fail, wrong, other_after;
	uint64_t other_max_ns; /* the slowest of their calls begun after the kill */
	/* server 2: before the kill; after it, by result */
	long s2_live_ok, s2_ok_dead, s2_unreach, s2_timedout, s2_bad_errno;
	long s2_late, s2_late_unreach; /* failures of calls begun DOWN_AFTER_MS after the kill */
	uint64_t s2_late_ns;
	int first_bad_rc;
};

static atomic_int load_stop;
static _Atomic uint64_t kill_ns; /* when server 2 was dead (reaped); 0 while it lives */
static int victim = 1;		 /* server 2 */

static int down_rc(int rc)
{
	return rc == -EHOSTUNREACH || rc == -ETIMEDOUT;
}

static void note_bad(struct loader *l, const char *what, const char *key, int rc)
{
	if (!l->first_bad_rc) {
		l->first_bad_rc = rc ? rc : -EBADMSG;
		fprintf(stderr, "  thread %d: %s %s (server %d): %s\n", l->id, what, key,
			owner(key) + 1, rc ? rdmem_strerror(rc) : "wrong bytes");
	}
}

/* A call of server 2's key, begun at t (kill: kill_ns then), returned rc
 * (exact: a GET's bytes were right; 1 for a PUT). */
static void victim_result(struct loader *l, const char *what, const char *key, int rc, int exact,
			  uint64_t t, uint64_t kill)
{
	uint64_t took = rdmem_now_ns() - t;

	if (rc == 0 && !exact) {
		l->wrong++;
		note_bad(l, what, key, 0);
	} else if (rc == 0 && kill) {
		l->s2_ok_dead++;
		note_bad(l, what, key, 0);
		fprintf(stderr, "  (that %s succeeded with server 2 dead)\n", what);
	} else if (rc == 0) {
		l->s2_live_ok++;
	} else if (kill) { /* in flight at the kill: any failure will do */
		if (rc == -EHOSTUNREACH)
			l->s2_unreach++;
		else if (rc == -ETIMEDOUT)
			l->s2_timedout++;
		else {
			l->s2_bad_errno++;
			note_bad(l, what, key, rc);
		}
		if (t - kill >= (uint64_t)DOWN_AFTER_MS * 1000000ull) {
			l->s2_late++;
			l->s2_late_unreach += rc == -EHOSTUNREACH;
			l->s2_late_ns += took;
		}
	}
}

static void *loader_run(void *arg)
{
	struct loader *l = arg;
	uint32_t round = 1;

	while (!atomic_load(&load_stop)) {
		int k;

		round++;
		for (k = 0; k < NS * PER_SERVER && !atomic_load(&load_stop); k++) {
			const char *key = l->keys[k];
			int mine = l->own[k] == victim, exact, rc;
			struct rdmem_opts o = { RDMEM_PATH_AUTO, mine ? 1000 : 4000, NULL };
			uint32_t size = 100 + (uint32_t)k * 97;
			uint64_t kill = atomic_load(&kill_ns), t = rdmem_now_ns();

			rc = put_v(key, size, round, l->buf, &o);
			if (mine) {
				if (rc == 0)
					l->ver[k] = round;
				victim_result(l, "put", key, rc, 1, t, kill);
				kill = atomic_load(&kill_ns);
				t = rdmem_now_ns();
				rc = get_v(key, size, l->ver[k], l->buf, &exact, &o);
				victim_result(l, "get", key, rc, exact, t, kill);
				continue;
			}
			if (rc != 0) {
				l->other_fail++;
				note_bad(l, "put", key, rc);
				continue;
			}
			l->ver[k] = round;
			rc = get_v(key, size, round, l->buf, &exact, &o);
			if (rc == 0 && exact) {
				l->other_ok++;
				if (kill) {
					l->other_after++;
					if (rdmem_now_ns() - t > l->other_max_ns)
						l->other_max_ns = rdmem_now_ns() - t;
				}
			} else if (rc == 0) {
				l->wrong++;
				note_bad(l, "get", key, 0);
			} else {
				l->other_fail++;
				note_bad(l, "get", key, rc);
			}
		}
	}
	return NULL;
}

/* Fills the thread's keys: PER_SERVER of each server, by the route. */
static void loader_keys(struct loader *l)
{
	int got[NS] = { 0 }, n = 0;
	uint32_t i;

	for (i = 0; n < NS * PER_SERVER; i++) {
		char key[48];
		int s;

		snprintf(key, sizeof(key), "%s-load%d-%u", fabric, l->id, i);
		s = owner(key);
		if (got[s] == PER_SERVER)
			continue;
		got[s]++;
		snprintf(l->keys[n], sizeof(l->keys[n]), "%s", key);
		l->own[n++] = s;
	}
}

/*
 * Server 2 is killed (SIGKILL) while two threads PUT and GET keys of all
 * three: keys of servers 1 and 3 never fail and never come back wrong; keys
 * of server 2 fail with -EHOSTUNREACH (or -ETIMEDOUT) once it is dead. Then
 * it is restarted on the same ports: within 15 s its keys work again (its
 * data is gone: GET is -ENOENT until a new PUT), with no help from anyone.
 */
static void test_kill_and_rejoin(void)
{
	static struct loader ld[2];
	long late = 0, late_unreach = 0;
	uint64_t late_ns = 0;
	int empty = owner_in(all3, NS, "", 0), i, k, rc, exact, rejoined = 0, gone = 0;
	uint64_t t0;
	struct rdmem_opts quick = { RDMEM_PATH_AUTO, 1000, NULL };

	REQUIRE(agent_up);
	atomic_store(&load_stop, 0);
	atomic_store(&kill_ns, 0);
	for (i = 0; i < 2; i++) {
		memset(&ld[i], 0, sizeof(ld[i]));
		ld[i].id = i;
		ld[i].buf = malloc(VAL_MAX);
		REQUIRE(ld[i].buf);
		loader_keys(&ld[i]);
		for (k = 0; k < NS * PER_SERVER; k++)
			CHECK_EQ(put_v(ld[i].keys[k], 100 + (uint32_t)k * 97, 0, val, NULL), 0);
	}
	for (i = 0; i < 2; i++)
		REQUIRE(pthread_create(&ld[i].t, NULL, loader_run, &ld[i]) == 0);
	proc_sleep_ms(700);
	proc_stop(&srv[victim].p, SIGKILL, 5000);
	atomic_store(&kill_ns, rdmem_now_ns());
	/* PING has no key: it goes where the empty key does. */
	rc = rdmem_ping(h, &quick);
	if (empty == victim)
		CHECK(down_rc(rc));
	else
		CHECK_EQ(rc, 0);
	proc_sleep_ms(DEAD_MS);
	atomic_store(&load_stop, 1);
	for (i = 0; i < 2; i++)
		pthread_join(ld[i].t, NULL);
	for (i = 0; i < 2; i++) {
		struct loader *l = &ld[i];

		printf("# thread %d: servers 1+3: %ld round trips ok (%ld after the kill, the "
		       "slowest call %.1f ms), %ld failed, %ld wrong\n",
		       i, l->other_ok, l->other_after, (double)l->other_max_ns / 1e6, l->other_fail,
		       l->wrong);
		printf("# thread %d: server 2: %ld calls ok before the kill; after it %ld "
		       "-EHOSTUNREACH, %ld -ETIMEDOUT, %ld ok, %ld another error\n",
		       i, l->s2_live_ok, l->s2_unreach, l->s2_timedout, l->s2_ok_dead,
		       l->s2_bad_errno);
		CHECK_EQ(l->other_fail, 0);
		CHECK_EQ(l->wrong, 0);
		CHECK_EQ(l->s2_ok_dead, 0);
		CHECK_EQ(l->s2_bad_errno, 0);
		CHECK(l->s2_unreach + l->s2_timedout > 0);
		/* Servers 1 and 3 went on serving, none of their calls held up
		 * behind server 2's (which waited up to 1 s each). */
		CHECK(l->other_after > 0);
		CHECK(l->other_max_ns < 500 * 1000000ull);
		late += l->s2_late;
		late_unreach += l->s2_late_unreach;
		late_ns += l->s2_late_ns;
	}
	/* Once the agent holds server 2 down, its calls fail at once. */
	printf("# server 2's calls begun %d ms after the kill: %ld failed, %ld of them "
	       "-EHOSTUNREACH, in %.1f ms on average\n",
	       DOWN_AFTER_MS, late, late_unreach,
	       late ? (double)late_ns / (double)late / 1e6 : 0.0);
	CHECK(late > 0);
	CHECK_EQ(late_unreach, late);
	CHECK(late && late_ns / (uint64_t)late < 300 * 1000000ull);

	/* Back on the same ports: it rejoins by itself. */
	REQUIRE(start_server(victim) == 0);
	t0 = rdmem_now_ns();
	{
		struct loader *l = &ld[0];
		int probe = -1;

		for (k = 0; k < NS * PER_SERVER && probe < 0; k++)
			if (l->own[k] == victim)
				probe = k;
		REQUIRE(probe >= 0);
		while (!rejoined && rdmem_now_ns() - t0 < (uint64_t)REJOIN_MS * 1000000ull) {
			if (put_v(l->keys[probe], 321, 77, val, &quick) == 0 &&
			    get_v(l->keys[probe], 321, 77, val, &exact, &quick) == 0 && exact)
				rejoined = 1;
			else
				proc_sleep_ms(50);
		}
		printf("# server 2 restarted: its keys work again after %.2f s\n",
		       (double)(rdmem_now_ns() - t0) / 1e9);
		CHECK(rejoined);
		REQUIRE(rejoined);
		/* Its data went with it: the other keys are not found until PUT again. */
		for (i = 0; i < 2; i++)
			for (k = 0; k < NS * PER_SERVER; k++) {
				if (ld[i].own[k] != victim || (i == 0 && k == probe))
					continue;
				rc = get_v(ld[i].keys[k], 1, 0, val, &exact, NULL);
				CHECK_EQ(rc, -ENOENT);
				gone += rc == -ENOENT;
				CHECK_EQ(put_v(ld[i].keys[k], 4000, 5, val, NULL), 0);
				CHECK_EQ(get_v(ld[i].keys[k], 4000, 5, val, &exact, NULL), 0);
				CHECK(exact);
			}
	}
	/* And the survivors' keys hold their last values. */
	for (i = 0; i < 2; i++)
		for (k = 0; k < NS * PER_SERVER; k++) {
			if (ld[i].own[k] == victim)
				continue;
			CHECK_EQ(get_v(ld[i].keys[k], 100 + (uint32_t)k * 97, ld[i].ver[k], val,
				       &exact, NULL),
				 0);
			CHECK(exact);
		}
	/* Over shm the RDMA link is dialled again too. */
	if (!strcmp(fabric, "shm")) {
		int idx[1] = { victim }, two[1] = { 2 };

		CHECK_EQ(wait_sessions(idx, two, 1, REJOIN_MS), 0);
		printf("# RDMA session with server 2 again after %.2f s\n",
		       (double)(rdmem_now_ns() - t0) / 1e9);
	}
	printf("# %d keys of server 2 were gone after its restart\n", gone);
	for (i = 0; i < 2; i++)
		free(ld[i].buf);
}

/* ---- the servers file ------------------------------------------------------- */

/* Writes idx[0..n)'s names to the servers file (with a comment and a blank line),
 * by rename, so the agent never reads half a file. */
static int write_list(const int *idx, int n)
{
	char tmp[200];
	FILE *f;
	int k;

	snprintf(tmp, sizeof(tmp), "%s.tmp", list_file);
	if (!(f = fopen(tmp, "w")))
		return -1;
	fprintf(f, "# rdmem servers for test_multi_server\n\n");
	for (k = 0; k < n; k++)
		fprintf(f, "%s\n%s", srv[idx[k]].name, k == 0 ? "# the next one\n\n" : "");
	if (fclose(f) != 0)
		return -1;
	return rename(tmp, list_file);
}

/* PUTs count new keys and checks each landed on the server the list idx
 * picks (straight from every server). */
static void check_routes_by(const int *idx, int n, const char *what, int count)
{
	int i, s, bad = 0, per[NS] = { 0 };
	uint32_t len;
	char key[64];

	for (i = 0; i < count; i++) {
		int own;

		key_name(key, sizeof(key), what, (uint32_t)i);
		own = owner_in(idx, n, key, strlen(key));
		per[own]++;
		if (put_v(key, 64, 3, val, NULL) != 0 && bad++ < 5) {
			fprintf(stderr, "  put %s failed\n", key);
			continue;
		}
		for (s = 0; s < NS; s++) {
			int rc = direct_get(s, key, got_buf, VAL_MAX, &len);

			if ((s == own ? rc != 0 : rc != -ENOENT) && bad++ < 5)
				fprintf(stderr,
					"  %s (%s): server %d says %s, owner is server %d\n", key,
					what, s + 1, rdmem_strerror(rc), own + 1);
		}
	}
	direct_close();
	CHECK_EQ(bad, 0);
	printf("# %s: %d keys on servers 1 / 2 / 3: %d / %d / %d\n", what, count, per[0], per[1],
	       per[2]);
}

/* The agent's own count of TCP connections it made to server s, or -1. */
static long long tcp_connects(int s)
{
	char *json = agent_stats(1);
	const char *sec = json ? section(json, srv[s].name) : NULL;
	long long v = sec ? e2e_json_num(sec, "tcp.connects") : -1;

	free(json);
	return v;
}

/*
 * --servers-file with servers 1 and 2; rewritten with 1, 2 and 3 and SIGHUP:
 * the agent lists three and routes by the three-server pick, its sessions
 * with 1 and 2 untouched; rewritten with 1 and 3 and agent-ctl reload: the
 * reply counts the change, and the agent routes by that pair.
 */
static void test_servers_file(void)
{
	static const int one_two[2] = { 0, 1 }, one_three[2] = { 0, 2 };
	char *reply = NULL, cmd[512], out[256];
	long long c1, c3;
	uint32_t len = 0;
	FILE *p;

	REQUIRE(servers_up);
	REQUIRE(write_list(one_two, 2) == 0);
	REQUIRE(start_agent(one_two, 2, "--servers-file", list_file, NULL) == 0);
	agent_up = 1;
	CHECK(wait_listed(one_two, 2, 2000));
	check_routes_by(one_two, 2, "sf12", 150);
	c1 = tcp_connects(0);
	CHECK(c1 >= 0); /* present: the equalities below must not be -1 == -1 */

	REQUIRE(write_list(all3, NS) == 0);
	CHECK_EQ(kill(agent.pid, SIGHUP), 0);
	CHECK(wait_listed(all3, NS, 5000));
	CHECK(agent.pid > 0 && waitpid(agent.pid, NULL, WNOHANG) == 0); /* still running */
	check_routes_by(all3, NS, "sf123", 200);
	if (!strcmp(fabric, "shm")) {
		int idx[1] = { 2 }, one[1] = { 1 };

		CHECK_EQ(wait_sessions(idx, one, 1, READY_MS), 0);
		CHECK_EQ(sessions_with(0), 1); /* kept, not redialled */
		CHECK_EQ(sessions_with(1), 1);
	}
	CHECK_EQ(tcp_connects(0), c1);
	/* Keys of the first list that still route to 1 or 2 are still there. */
	{
		int i, kept = 0, lost = 0, exact;
		char key[64];

		for (i = 0; i < 150; i++) {
			key_name(key, sizeof(key), "sf12", (uint32_t)i);
			if (owner(key) == 2)
				continue;
			kept++;
			if (get_v(key, 64, 3, val, &exact, NULL) != 0 || !exact)
				lost++;
		}
		printf(
		    "# after SIGHUP: %d of the 150 keys stayed on servers 1-2, %d of them lost\n",
		    kept, lost);
		CHECK_EQ(lost, 0);
	}
	c3 = tcp_connects(2);
	CHECK(c3 >= 0);

	REQUIRE(write_list(one_three, 2) == 0);
	CHECK_EQ(rdmem_agent_ctl(h, "reload", &reply, &len, NULL), 0);
	printf("# agent-ctl reload: %.*s\n", reply ? (int)len : 6, reply ? reply : "(none)");
	CHECK(reply && strstr(reply, "reloaded: 2 servers (+0 -1)"));
	free(reply);
	reply = NULL;
	CHECK(wait_listed(one_three, 2, 2000));
	check_routes_by(one_three, 2, "sf13", 150);
	if (!strcmp(fabric, "shm")) {
		CHECK_EQ(sessions_with(0), 1);
		CHECK_EQ(sessions_with(2), 1);
	}
	CHECK_EQ(tcp_connects(0), c1);
	CHECK_EQ(tcp_connects(2), c3);

	/* A list that does not parse: refused, the servers stay as they were. */
	{
		FILE *f = fopen(list_file, "w");

		REQUIRE(f);
		fprintf(f, "%s\n127.0.0.1:notaport\n%s\n", srv[0].name, srv[1].name);
		fclose(f);
	}
	CHECK(rdmem_agent_ctl(h, "reload", &reply, &len, NULL) < 0);
	free(reply);
	reply = NULL;
	CHECK(wait_listed(one_three, 2, 0));
	check_routes_by(one_three, 2, "sf13b", 30);
	REQUIRE(write_list(one_three, 2) == 0);

	/* The CLI's reload: nothing changed. */
	snprintf(cmd, sizeof(cmd), "%s/rdmem --shm-name %s agent-ctl reload 2>&1", proc_bin(), shm);
	out[0] = '\0';
	if ((p = popen(cmd, "r"))) {
		if (!fgets(out, sizeof(out), p))
			out[0] = '\0';
		CHECK_EQ(pclose(p), 0);
	}
	printf("# rdmem agent-ctl reload: %s", out);
	CHECK(strstr(out, "reloaded: 2 servers (+0 -0)") != NULL);
	stop_agent();
}

/* ---- reloads under load ----------------------------------------------------- */

struct steady {
	pthread_t t;
	int id;
	uint8_t *buf;
	long ok, failed, wrong;
};

/* PUT then GET keys that live on server 1 or 3 with or without server 2 in
 * the list (rendezvous: their owner among 1, 2, 3 is not 2). */
static void *steady_run(void *arg)
{
	struct steady *st = arg;
	struct rdmem_opts o = { RDMEM_PATH_AUTO, 4000, NULL };
	uint32_t i = 0, round = 0;

	while (!atomic_load(&load_stop)) {
		char key[48];
		int rc, exact;

		snprintf(key, sizeof(key), "%s-steady%d-%u", fabric, st->id, i++ % 64);
		if (owner(key) == 1)
			continue;
		round++;
		rc = put_v(key, 200 + round % 3000, round, st->buf, &o);
		if (rc == 0)
			rc = get_v(key, 200 + round % 3000, round, st->buf, &exact, &o);
		if (rc == 0 && exact)
			st->ok++;
		else if (rc == 0)
			st->wrong++;
		else if (st->failed++ < 3)
			fprintf(stderr, "  thread %d: %s (server %d): %s\n", st->id, key,
				owner(key) + 1, rdmem_strerror(rc));
	}
	return NULL;
}

/*
 * pid's descriptors of the kinds a server's session holds (sockets, eventfds,
 * io_uring, memfd regions), listed into buf one a line; returns how many.
 * Pipes and files are left out: a sanitizer's report file and symbolizer
 * pipes come and go with its reports, not with the agent's servers.
 */
static int fd_kinds(pid_t pid, char *buf, size_t cap)
{
	char dir[64], path[512], target[128];
	struct dirent *d;
	size_t used = 0;
	int n = 0;
	DIR *dd;

	buf[0] = '\0';
	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	if (!(dd = opendir(dir)))
		return -1;
	while ((d = readdir(dd))) {
		ssize_t len;

		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
		len = readlink(path, target, sizeof(target) - 1);
		target[len > 0 ? len : 0] = '\0';
		if (strncmp(target, "socket:", 7) && strncmp(target, "anon_inode:", 11) &&
		    strncmp(target, "/memfd:", 7))
			continue;
		n++;
		if (used + 200 < cap)
			used += (size_t)snprintf(buf + used, cap - used, "#   fd %s -> %s\n",
						 d->d_name, target);
	}
	closedir(dd);
	return n;
}

/*
 * Server 2 joins and leaves the list ten times (agent-ctl reload each time)
 * while two threads PUT and GET keys of servers 1 and 3: not one of their
 * calls fails. Each time server 2 leaves, its session goes: over shm the
 * server ends with no session of ours, and the agent holds no more files
 * than it did before.
 */
static void test_reload_under_load(void)
{
	static const int one_three[2] = { 0, 2 };
	static struct steady st[2];
	static char fds_before[8192], fds_after[8192];
	int i, c, fd0, fd1 = -1, bad_reply = 0;
	long ok = 0;

	REQUIRE(servers_up);
	REQUIRE(write_list(one_three, 2) == 0);
	REQUIRE(start_agent(one_three, 2, "--servers-file", list_file, NULL) == 0);
	agent_up = 1;
	/* Warm up, so both sessions have made every connection they keep. */
	for (i = 0; i < 200; i++) {
		char key[48];

		snprintf(key, sizeof(key), "%s-warm-%d", fabric, i);
		CHECK_EQ(put_v(key, 20000, 1, val, NULL), 0);
	}
	fd0 = fd_kinds(agent.pid, fds_before, sizeof(fds_before));
	atomic_store(&load_stop, 0);
	for (i = 0; i < 2; i++) {
		memset(&st[i], 0, sizeof(st[i]));
		st[i].id = i;
		st[i].buf = malloc(4000);
		REQUIRE(st[i].buf);
		REQUIRE(pthread_create(&st[i].t, NULL, steady_run, &st[i]) == 0);
	}
	for (c = 0; c < 10; c++) {
		char *reply = NULL;
		uint32_t len = 0;
		int add = c % 2 == 0;

		CHECK_EQ(write_list(add ? all3 : one_three, add ? 3 : 2), 0);
		CHECK_EQ(rdmem_agent_ctl(h, "reload", &reply, &len, NULL), 0);
		if (!reply || !strstr(reply, add ? "(+1 -0)" : "(+0 -1)")) {
			bad_reply++;
			fprintf(stderr, "  reload %d: %.*s\n", c, reply ? (int)len : 6,
				reply ? reply : "(none)");
		}
		free(reply);
		proc_sleep_ms(150);
	}
	atomic_store(&load_stop, 1);
	for (i = 0; i < 2; i++) {
		pthread_join(st[i].t, NULL);
		printf("# thread %d: %ld round trips ok, %ld failed, %ld wrong\n", i, st[i].ok,
		       st[i].failed, st[i].wrong);
		CHECK_EQ(st[i].failed, 0);
		CHECK_EQ(st[i].wrong, 0);
		ok += st[i].ok;
		free(st[i].buf);
	}
	CHECK(ok > 100);
	CHECK_EQ(bad_reply, 0);
	CHECK(wait_listed(one_three, 2, 0));
	/* Server 2 left for good: nothing of its sessions is left on either side. */
	if (!strcmp(fabric, "shm")) {
		for (i = 0; i < 250 && server_stat(1, "sessions") != 0; i++)
			proc_sleep_ms(20);
		CHECK_EQ(server_stat(1, "sessions"), 0);
		CHECK(sessions_with(1) >= 1); /* it did dial server 2 while listed */
	}
	for (i = 0; i < 150; i++) {
		fd1 = fd_kinds(agent.pid, fds_after, sizeof(fds_after));
		if (fd1 <= fd0)
			break;
		proc_sleep_ms(20);
	}
	printf("# agent's sockets, eventfds, rings and regions: %d before the reloads, %d after\n",
	       fd0, fd1);
	CHECK(fd0 > 0 && fd1 > 0 && fd1 <= fd0);
	if (fd1 > fd0)
		printf("# before:\n%s# after:\n%s", fds_before, fds_after);
	stop_agent();
}

/* ---- command-line forms (once) ---------------------------------------------- */

/* Runs the agent with these arguments to its exit (up to 5 s): its exit
 * status, or -1 (it kept running: killed). */
static int agent_exit_status(const char *a1, const char *a2, const char *a3, const char *a4)
{
	char bin[512], log[128];
	const char *argv[16] = { bin, a1, a2, a3, a4, "--fabric", "tcp", "--shm-name", shm, NULL };
	pid_t pid;
	int i, st;

	snprintf(bin, sizeof(bin), "%s/rdmem-agent", proc_bin());
	snprintf(log, sizeof(log), "%s/rdmem-test-%d-agent-cli.log", test_tmpdir(), (int)getpid());
	pid = fork();
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(127);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	if (pid < 0)
		return -1;
	for (i = 0; i < 500; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		proc_sleep_ms(10);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	e2e_unlink_door(shm);
	return -1;
}

/*
 * -s with --servers-file is refused; one "host:port" entry is a one-server
 * agent (its telemetry unchanged, -p ignored for an entry that names its
 * port); in a list mixing "host" (-p's port) and "host:port" every server
 * is named "host:port", its port always spelled (agent/router.c): routing,
 * like agent-stats, uses that name, so "127.0.0.1" with -p P and
 * "127.0.0.1:P" are the same server to every agent.
 */
static void test_cli_forms(void)
{
	static const int first_two[2] = { 0, 1 };
	char *json, p0[16], list[96];
	int st, s;

	REQUIRE(servers_up);
	snprintf(fabric, sizeof(fabric), "tcp");
	REQUIRE(write_list(first_two, 2) == 0);
	st = agent_exit_status("-s", srv[0].name, "--servers-file", list_file);
	printf("# -s with --servers-file: exit %d\n", st);
	CHECK(st > 0);
	st = agent_exit_status("-s", HOST ":notaport", "-p", "7471");
	printf("# -s " HOST ":notaport: exit %d\n", st);
	CHECK(st > 0);

	/* One entry with its port: -p (here a port nothing listens on) is not used. */
	REQUIRE(start_agent(all3, 1, "-s", srv[0].name, "-p", "9", NULL) == 0);
	CHECK_EQ(put_v("cli-one", 100, 1, val, NULL), 0);
	{
		uint32_t len;
		int exact;

		CHECK_EQ(get_v("cli-one", 100, 1, val, &exact, NULL), 0);
		CHECK(exact);
		CHECK_EQ(direct_get(0, "cli-one", got_buf, VAL_MAX, &len), 0);
		direct_close();
	}
	json = agent_stats(1);
	CHECK(json && !strncmp(json, "{\"fabric\":", 10) && !strstr(json, "\"servers\""));
	free(json);
	stop_agent();

	/* "127.0.0.1" with -p P1 is server 1, named "127.0.0.1:P1". */
	snprintf(p0, sizeof(p0), "%u", srv[0].port);
	snprintf(list, sizeof(list), "%s,%s", HOST, srv[1].name);
	REQUIRE(start_agent(first_two, 2, "-s", list, "-p", p0, NULL) == 0);
	json = agent_stats(1);
	CHECK(lists_exactly(json, first_two, 2));
	free(json);
	{
		int i, bad = 0, per[2] = { 0 };
		uint32_t len;
		char key[64];

		for (i = 0; i < 100; i++) {
			int own;

			key_name(key, sizeof(key), "mixed", (uint32_t)i);
			own = owner_in(first_two, 2, key, strlen(key));
			per[own]++;
			CHECK_EQ(put_v(key, 32, 1, val, NULL), 0);
			for (s = 0; s < 2; s++) {
				int rc = direct_get(s, key, got_buf, VAL_MAX, &len);

				if ((s == own ? rc != 0 : rc != -ENOENT) && bad++ < 5)
					fprintf(stderr, "  %s: server %d says %s, owner %d\n", key,
						s + 1, rdmem_strerror(rc), own + 1);
			}
		}
		direct_close();
		printf("# mixed list: %d / %d keys on servers 1 / 2\n", per[0], per[1]);
		CHECK_EQ(bad, 0);
	}
	stop_agent();
}

/*
 * An IPv6 entry, "[addr]:port": server 1 as the IPv4-mapped ::ffff:127.0.0.1
 * (reached through the IPv4 listener, so no ::1 is needed), server 2 by its
 * usual name. The agent names it "[::ffff:127.0.0.1]:P1" and routes by that.
 */
static void test_ipv6_entry(void)
{
	char name6[64], list[128], *json;
	uint64_t seeds[2];
	int i, s, bad = 0, per[2] = { 0 };
	uint32_t len;

	REQUIRE(servers_up);
	snprintf(fabric, sizeof(fabric), "tcp");
	snprintf(name6, sizeof(name6), "[::ffff:127.0.0.1]:%u", srv[0].port);
	snprintf(list, sizeof(list), "%s,%s", name6, srv[1].name);
	REQUIRE(start_agent(all3, 0, "-s", list, NULL) == 0);
	json = agent_stats(1);
	CHECK(json && section(json, name6) && section(json, srv[1].name) &&
	      !section(json, srv[0].name));
	if (json && !section(json, name6))
		printf("# agent-stats: %.200s\n", json);
	free(json);
	seeds[0] = rdmem_route_server_seed(name6);
	seeds[1] = rdmem_route_server_seed(srv[1].name);
	for (i = 0; i < 100; i++) {
		char key[64];
		int own;

		key_name(key, sizeof(key), "v6", (uint32_t)i);
		own = (int)rdmem_route_pick(seeds, 2, rdmem_route_key_hash(key, strlen(key)));
		per[own]++;
		CHECK_EQ(put_v(key, 32, 1, val, NULL), 0);
		for (s = 0; s < 2; s++) {
			int rc = direct_get(s, key, got_buf, VAL_MAX, &len);

			if ((s == own ? rc != 0 : rc != -ENOENT) && bad++ < 5)
				fprintf(stderr, "  %s: server %d says %s, owner %d\n", key, s + 1,
					rdmem_strerror(rc), own + 1);
		}
	}
	direct_close();
	printf("# [::ffff:127.0.0.1]: %d / %d keys on servers 1 / 2\n", per[0], per[1]);
	CHECK_EQ(bad, 0);
	stop_agent();
}

/* ---- main ------------------------------------------------------------------- */

/* Port pairs p, p + 1 and q, q + 1 share no port. */
static int apart(unsigned p, unsigned q)
{
	return p + 1 < q || q + 1 < p;
}

static void start_servers(void)
{
	int i, k;

	for (i = 0; i < NS; i++) {
		do {
			srv[i].port = proc_free_port_pair();
			for (k = 0; k < i && apart(srv[i].port, srv[k].port); k++)
				;
		} while (srv[i].port && k < i);
		if (!srv[i].port)
			return;
		snprintf(srv[i].name, sizeof(srv[i].name), HOST ":%u", srv[i].port);
		snprintf(srv[i].img, sizeof(srv[i].img), "%s/img%d", tmpdir, i + 1);
		snprintf(srv[i].log, sizeof(srv[i].log), "server%d", i + 1);
		mkdir(srv[i].img, 0755);
	}
	for (i = 0; i < NS; i++)
		if (start_server(i) < 0)
			return;
	servers_up = 1;
}

/* Runs case fn as "FABRIC: fn", with this run's fabric set. */
static void run_as(const char *fab, const char *name, void (*fn)(void))
{
	char full[96];

	snprintf(fabric, sizeof(fabric), "%s", fab);
	snprintf(full, sizeof(full), "%s: %s", fab, name);
	check_run(full, fn);
}

#define RUN_AS(fab, fn) run_as(fab, #fn, fn)

static void run_fabric(const char *fab)
{
	RUN_AS(fab, test_agent_up);
	RUN_AS(fab, test_put_get_3000);
	RUN_AS(fab, test_placement);
	RUN_AS(fab, test_mget_spans_servers);
	RUN_AS(fab, test_mget_uneven);
	RUN_AS(fab, test_other_ops_route);
	RUN_AS(fab, test_stats_and_ctl);
	RUN_AS(fab, test_kill_and_rejoin);
	snprintf(fabric, sizeof(fabric), "%s", fab);
	stop_agent();
	RUN_AS(fab, test_servers_file);
	RUN_AS(fab, test_reload_under_load);
}

int main(void)
{
	char cmd[128];
	int i;

	rdmem_log_init("test_multi_server", 0);
	snprintf(tmpdir, sizeof(tmpdir), "%s/rdmem-multi-%d", test_tmpdir(), (int)getpid());
	snprintf(shm, sizeof(shm), "/rdmem-multi-%d", (int)getpid());
	snprintf(list_file, sizeof(list_file), "%s/servers", tmpdir);
	mkdir(tmpdir, 0755);
	val = malloc(VAL_MAX);
	got_buf = malloc(VAL_MAX);
	if (!val || !got_buf)
		return 1;
	start_servers();
	CHECK(servers_up);
	run_fabric("shm");
	run_fabric("tcp");
	RUN(test_cli_forms);
	RUN(test_ipv6_entry);
	stop_agent();
	direct_close();
	for (i = 0; i < NS; i++)
		if (srv[i].p.pid > 0)
			proc_stop(&srv[i].p, SIGTERM, 5000);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "  could not remove %s\n", tmpdir);
	free(val);
	free(got_buf);
	return check_done();
}
