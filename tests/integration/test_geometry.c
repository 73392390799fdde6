/* test_geometry.c - negotiated session geometry: any pair of legal server and
 * agent flag values either carries every call byte-exact or says at connect,
 * in one line naming both sides' flags, which requests RDMA cannot carry.
 *
 *   - the finding-1 reproducer: server --stage-bytes 4k, agent --resp-bytes
 *     16k, 3000-byte GETs at window 8 on EAGER, AUTO, LAZY and BULK;
 *   - a cross product of mismatched legal values (both ends of each range
 *     and an odd value inside it: every other test runs the defaults, and an
 *     odd size misaligns what a power of two hides), every min/max pair of
 *     the key pairs, plus a seeded
 *     sample (RDMEM_GEOMETRY_SEED replays it, RDMEM_GEOMETRY_EXTRA adds more);
 *   - an object pool above 4 GiB: LAZY reads of objects past 2^32 are exact;
 *   - a layout-version mismatch is refused with a reason naming both.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/link.h"
#include "check.h"
#include "e2e.h"
#include "rdmem/layout.h"
#include "server/session.h"

#define GEO_WINDOW   8
#define GEO_SIZE_CAP (2u << 20) /* largest value a cross-product case moves */
#define GEO_MAX_JOBS 512

/* Bytes no other (key, size) has at the same offset: a misplaced reply shows. */
static void geo_fill(uint8_t *buf, uint32_t len, uint32_t seed)
{
	uint32_t i, x = seed * 2654435761u + 1;

	for (i = 0; i < len; i++) {
		x = x * 1103515245u + 12345u;
		buf[i] = (uint8_t)(x >> 16);
	}
}

struct geo_job {
	uint16_t op;
	uint8_t path;
	char key[48];
	uint8_t *val; /* PUT / ECHO request value */
	uint32_t val_len;
	const uint8_t *want; /* expected reply value (GET / ECHO) */
	uint32_t want_len;
	int rc; /* result */
	uint8_t rpath;
	int exact; /* reply bytes as expected */
};

/* Runs the jobs with up to w in flight; fills rc, rpath and exact. */
static void geo_run_jobs(rdmem_t *h, struct geo_job *jobs, int n, int w)
{
	struct rdmem_rpc rpc[GEO_WINDOW];
	int job_of[GEO_WINDOW], next = 0, done = 0, i;

	for (i = 0; i < w; i++)
		job_of[i] = -1;
	while (done < n) {
		for (i = 0; i < w; i++) {
			struct geo_job *j;

			if (job_of[i] < 0 && next < n) {
				j = &jobs[next];
				rdmem_rpc_init(&rpc[i], j->op);
				rpc[i].key = j->key;
				rpc[i].key_len = (uint32_t)strlen(j->key);
				rpc[i].val = j->val;
				rpc[i].val_len = j->val_len;
				rpc[i].path = j->path;
				rpc[i].timeout_ms = 20000;
				if (rdmem_submit(h, &rpc[i]) == 0) {
					job_of[i] = next++;
				} else {
					j->rc = rpc[i].rc ? rpc[i].rc : -EIO;
					next++, done++;
				}
			}
			if (job_of[i] < 0 || rdmem_poll(h, &rpc[i]) != 1)
				continue;
			j = &jobs[job_of[i]];
			j->rc = rpc[i].rc;
			j->rpath = rpc[i].rpath;
			j->exact = rpc[i].rc == 0 && rpc[i].rlen == j->want_len &&
				   (!j->want_len || memcmp(rpc[i].rval, j->want, j->want_len) == 0);
			rdmem_rpc_free(&rpc[i]);
			job_of[i] = -1;
			done++;
		}
	}
}

static const uint8_t geo_paths[] = { RDMEM_PATH_EAGER, RDMEM_PATH_AUTO, RDMEM_PATH_LAZY,
				     RDMEM_PATH_BULK };

/* ---- (a) the finding-1 reproducer ------------------------------------------ */

static void test_stage_below_resp_bytes(void)
{
	enum { KEYS = 64, SIZE = 3000, N = 3000 };
	static uint8_t vals[KEYS][SIZE];
	static struct geo_job jobs[N];
	struct e2e e;
	size_t p;
	int i;

	REQUIRE(e2e_init(&e, "shm") == 0);
	REQUIRE(e2e_server(&e, "shm", "--stage-bytes", "4k", NULL) == 0);
	REQUIRE(e2e_agent(&e, NULL) == 0); /* --resp-bytes 16k, the default */
	for (i = 0; i < KEYS; i++) {
		char key[32];

		snprintf(key, sizeof(key), "geo-a-%d", i);
		geo_fill(vals[i], SIZE, (uint32_t)i + 1);
		CHECK_EQ(rdmem_put(e.h, key, (uint32_t)strlen(key), vals[i], SIZE, NULL), 0);
	}
	for (p = 0; p < sizeof(geo_paths); p++) {
		int wrong = 0, failed = 0, tcp = 0;

		for (i = 0; i < N; i++) {
			memset(&jobs[i], 0, sizeof(jobs[i]));
			jobs[i].op = RDMEM_OP_KV_GET;
			jobs[i].path = geo_paths[p];
			snprintf(jobs[i].key, sizeof(jobs[i].key), "geo-a-%d", i % KEYS);
			jobs[i].want = vals[i % KEYS];
			jobs[i].want_len = SIZE;
		}
		geo_run_jobs(e.h, jobs, N, GEO_WINDOW);
		for (i = 0; i < N; i++) {
			failed += jobs[i].rc != 0;
			wrong += jobs[i].rc == 0 && !jobs[i].exact;
			tcp += jobs[i].rpath == RDMEM_PATH_TCP;
		}
		printf("# stage 4k / resp 16k, %s: %d GETs of %d B, %d wrong, %d failed, %d on "
		       "tcp\n",
		       rdmem_path_name(geo_paths[p]), N, SIZE, wrong, failed, tcp);
		CHECK_EQ(wrong, 0);
		CHECK_EQ(failed, 0);
		if (geo_paths[p] != RDMEM_PATH_AUTO)
			CHECK_EQ(tcp, 0); /* the forced path really ran */
	}
	/* EAGER replies of 3000 B fit the 4k capacity: no detour through objects. */
	CHECK(e2e_stat(&e, "paths.eager.ok") >= N);
	CHECK_EQ(e2e_stat(&e, "rdma.bad_replies"), 0);
	e2e_fini(&e);
}

/* ---- (b) the cross product --------------------------------------------------- */

/* Each flag: its minimum, its default, its maximum (server/main.c, agent/main.c). */
enum {
	GEO_STAGE,
	GEO_SLOT,
	GEO_SRING,
	GEO_SMAX,
	GEO_RESP,
	GEO_ARING,
	GEO_BULK,
	GEO_LARGE,
	GEO_AMAX,
	GEO_NFLAGS
};

static const struct {
	const char *flag;
	int server;
	const char *v[3];
} geo_flags[GEO_NFLAGS] = {
	[GEO_STAGE] = { "--stage-bytes", 1, { "64", "4099", "1048576" } },
	[GEO_SLOT] = { "--slot-bytes", 1, { "1024", "32771", "1048576" } },
	[GEO_SRING] = { "--ring-slots", 1, { "1", "255", "4096" } },
	[GEO_SMAX] = { "--max-value", 1, { "4096", "1048576", "67108864" } },
	[GEO_RESP] = { "--resp-bytes", 0, { "64", "16385", "1048576" } },
	[GEO_ARING] = { "--ring-slots", 0, { "1", "257", "4096" } },
	[GEO_BULK] = { "--bulk-threshold", 0, { "0", "8192", "4294967295" } },
	[GEO_LARGE] = { "--large-threshold", 0, { "0", "8192", "4294967295" } },
	[GEO_AMAX] = { "--max-value", 0, { "1", "1048573", "67108864" } },
};

/* The key pairs (server flag, agent flag): every min/max combination runs. */
static const int geo_pairs[][2] = {
	{ GEO_STAGE, GEO_RESP },  { GEO_SRING, GEO_ARING }, { GEO_SMAX, GEO_AMAX },
	{ GEO_SLOT, GEO_AMAX },	  { GEO_SLOT, GEO_ARING },  { GEO_SLOT, GEO_BULK },
	{ GEO_STAGE, GEO_LARGE }, { GEO_SMAX, GEO_LARGE },  { GEO_STAGE, GEO_AMAX },
};

static uint32_t geo_seed_state;

static uint32_t geo_rand(void)
{
	geo_seed_state = geo_seed_state * 1103515245u + 12345u;
	return geo_seed_state >> 8;
}

static uint64_t geo_val(const int pick[GEO_NFLAGS], int f)
{
	return strtoull(geo_flags[f].v[pick[f]], NULL, 10);
}

static void geo_describe(const int pick[GEO_NFLAGS], char *out, size_t len)
{
	size_t n = 0;
	int f;

	for (f = 0; f < GEO_NFLAGS && n < len; f++)
		n +=
		    (size_t)snprintf(out + n, len - n, "%s%s %s", f == GEO_RESP ? " | agent " : " ",
				     geo_flags[f].flag, geo_flags[f].v[pick[f]]);
}

static int geo_add_size(uint32_t *sizes, int n, uint64_t s, uint64_t cap)
{
	int i;

	if (s > cap)
		s = cap;
	for (i = 0; i < n; i++)
		if (sizes[i] == s)
			return n;
	sizes[n] = (uint32_t)s;
	return n + 1;
}

/* The sizes around every boundary of this geometry, up to the common max value. */
static int geo_sizes(const int pick[GEO_NFLAGS], uint32_t *sizes)
{
	uint64_t vmax = geo_val(pick, GEO_SMAX) < geo_val(pick, GEO_AMAX) ? geo_val(pick, GEO_SMAX)
									  : geo_val(pick, GEO_AMAX);
	uint64_t eager = geo_val(pick, GEO_STAGE) < geo_val(pick, GEO_RESP)
			     ? geo_val(pick, GEO_STAGE)
			     : geo_val(pick, GEO_RESP);
	uint64_t slot = geo_val(pick, GEO_SLOT);
	int n = 0;

	if (vmax > GEO_SIZE_CAP)
		vmax = GEO_SIZE_CAP;
	n = geo_add_size(sizes, n, 0, vmax);
	n = geo_add_size(sizes, n, 1, vmax);
	n = geo_add_size(sizes, n, 3000, vmax);
	n = geo_add_size(sizes, n, eager, vmax);
	n = geo_add_size(sizes, n, eager + 1, vmax);
	n = geo_add_size(sizes, n, slot - 32, vmax);
	n = geo_add_size(sizes, n, slot + 1, vmax);
	n = geo_add_size(sizes, n, 100000, vmax);
	n = geo_add_size(sizes, n, vmax, vmax);
	return n;
}

/* The line the agent says at connect when its requests can outgrow the ring. */
#define GEO_NOTE "AUTO sends larger requests over TCP"

/*
 * A forced RDMA call may be refused -E2BIG only when the agent said so at
 * connect and the request cannot fit one slot (one slot always exists).
 */
static int geo_forced_ok(const struct e2e *e, const struct geo_job *j, uint64_t slot)
{
	if (j->rc == -E2BIG)
		return proc_log_has(&e->agent, GEO_NOTE) && strlen(j->key) + j->val_len > slot;
	if (j->rc != 0)
		return 0;
	/* EAGER or BULK GETs may come back LAZY: the server moves what does not fit. */
	return j->rpath != RDMEM_PATH_TCP;
}

/* PUT, then GET and ECHO every size on one path; 0 when all is well. */
static int geo_path_round(struct e2e *e, const int pick[GEO_NFLAGS], uint8_t path,
			  const uint32_t *sizes, int nsizes, uint8_t **vals, char *why,
			  size_t why_len)
{
	static struct geo_job jobs[GEO_MAX_JOBS];
	uint64_t slot = geo_val(pick, GEO_SLOT);
	int n = 0, i, bad = 0;

	for (i = 0; i < nsizes; i++) {
		struct geo_job *j = &jobs[n++];

		memset(j, 0, sizeof(*j));
		j->op = RDMEM_OP_KV_PUT;
		j->path = path;
		snprintf(j->key, sizeof(j->key), "geo-%u-%u", path, sizes[i]);
		j->val = vals[i];
		j->val_len = sizes[i];
	}
	geo_run_jobs(e->h, jobs, n, GEO_WINDOW);
	for (i = 0; i < n; i++) {
		int ok =
		    path == RDMEM_PATH_AUTO ? jobs[i].rc == 0 : geo_forced_ok(e, &jobs[i], slot);

		if (!ok && !bad++)
			snprintf(why, why_len, "%s PUT of %u B: %s (path %s)",
				 rdmem_path_name(path), jobs[i].val_len, rdmem_strerror(jobs[i].rc),
				 rdmem_path_name(jobs[i].rpath));
	}
	/* GETs twice over (window 8 reuses slots) and an ECHO of each size. */
	n = 0;
	for (i = 0; i < 3 * nsizes; i++) {
		struct geo_job *j = &jobs[n++];
		int s = i % nsizes;

		memset(j, 0, sizeof(*j));
		j->op = i < 2 * nsizes ? RDMEM_OP_KV_GET : RDMEM_OP_ECHO;
		j->path = path;
		if (j->op == RDMEM_OP_KV_GET)
			snprintf(j->key, sizeof(j->key), "geo-%u-%u", path, sizes[s]);
		if (j->op == RDMEM_OP_ECHO) { /* ECHO takes no key */
			j->val = vals[s];
			j->val_len = sizes[s];
		}
		j->want = vals[s];
		j->want_len = sizes[s];
	}
	geo_run_jobs(e->h, jobs, n, GEO_WINDOW);
	for (i = 0; i < n; i++) {
		const struct geo_job *j = &jobs[i];
		/* A GET of a value its forced PUT could not store is not found. */
		int put_refused = j->op == RDMEM_OP_KV_GET && path != RDMEM_PATH_AUTO &&
				  proc_log_has(&e->agent, GEO_NOTE) &&
				  strlen(j->key) + j->want_len > slot;
		int ok;

		if (put_refused)
			ok = j->rc == -ENOENT || (j->rc == 0 && j->exact);
		else if (path == RDMEM_PATH_AUTO || j->op == RDMEM_OP_KV_GET)
			ok = j->rc == 0 && j->exact &&
			     (path == RDMEM_PATH_AUTO || j->rpath != RDMEM_PATH_TCP);
		else
			ok = geo_forced_ok(e, j, slot) && (j->rc != 0 || j->exact);
		if (!ok && !bad++)
			snprintf(why, why_len, "%s %s of %u B: %s, %s", rdmem_path_name(path),
				 rdmem_op_name(j->op), j->want_len, rdmem_strerror(j->rc),
				 j->rc == 0 ? "wrong bytes" : "failed");
	}
	return bad;
}

/* One configuration: 0 when every call was exact (or refused as announced). */
static int geo_case(const int pick[GEO_NFLAGS], char *why, size_t why_len)
{
	const char *sargs[16], *aargs[16];
	uint32_t sizes[16];
	uint8_t *vals[16];
	int ns = 0, na = 0, f, i, nsizes, bad = 0;
	struct e2e e;
	size_t p;

	for (f = 0; f < GEO_NFLAGS; f++) {
		const char **a = geo_flags[f].server ? sargs : aargs;
		int *k = geo_flags[f].server ? &ns : &na;

		a[(*k)++] = geo_flags[f].flag;
		a[(*k)++] = geo_flags[f].v[pick[f]];
	}
	sargs[ns] = aargs[na] = NULL;
	if (e2e_init(&e, "shm") < 0)
		return snprintf(why, why_len, "no free port"), 1;
	/* Few front-door slots: with --max-value 64m each holds 64 MiB of address space. */
	snprintf(e.clients, sizeof(e.clients), "1");
	snprintf(e.slots, sizeof(e.slots), "%d", GEO_WINDOW);
	if (e2e_server(&e, "shm", "--max-sessions", "2", sargs[0], sargs[1], sargs[2], sargs[3],
		       sargs[4], sargs[5], sargs[6], sargs[7], NULL) < 0 ||
	    e2e_agent(&e, aargs[0], aargs[1], aargs[2], aargs[3], aargs[4], aargs[5], aargs[6],
		      aargs[7], aargs[8], aargs[9], NULL) < 0) {
		e2e_fini(&e);
		return snprintf(why, why_len, "server or agent did not start"), 1;
	}
	if (!proc_log_has(&e.agent, "rdma: session")) {
		e2e_fini(&e);
		return snprintf(why, why_len, "no RDMA session"), 1;
	}
	nsizes = geo_sizes(pick, sizes);
	for (i = 0; i < nsizes; i++) {
		vals[i] = malloc(sizes[i] ? sizes[i] : 1);
		geo_fill(vals[i], sizes[i], sizes[i] * 7919u + (uint32_t)pick[GEO_STAGE]);
	}
	for (p = 0; p < sizeof(geo_paths) && !bad; p++)
		bad = geo_path_round(&e, pick, geo_paths[p], sizes, nsizes, vals, why, why_len);
	/* A value above the server's cap is refused, never cut, on every path. */
	if (!bad && geo_val(pick, GEO_AMAX) > geo_val(pick, GEO_SMAX)) {
		uint32_t big = (uint32_t)geo_val(pick, GEO_SMAX) + 1;
		uint8_t *v = calloc(1, big);
		int rc = rdmem_put(e.h, "geo-over", 8, v, big, NULL);

		if (rc != -E2BIG)
			bad = snprintf(why, why_len, "PUT above the server's max: %s",
				       rdmem_strerror(rc)) > 0;
		free(v);
	}
	if (!bad && e2e_stat(&e, "rdma.bad_replies") != 0)
		bad = snprintf(why, why_len, "agent refused %lld replies",
			       e2e_stat(&e, "rdma.bad_replies")) > 0;
	/* The note, when said, names both sides' values and the flags to change. */
	if (!bad && proc_log_has(&e.agent, GEO_NOTE) &&
	    !(proc_log_has(&e.agent, "server --slot-bytes") &&
	      proc_log_has(&e.agent, "agent --max-value") &&
	      proc_log_has(&e.agent, "server --ring-slots")))
		bad = snprintf(why, why_len, "the connect note does not name the flags") > 0;
	if (bad)
		proc_dump_log(&e.agent);
	for (i = 0; i < nsizes; i++)
		free(vals[i]);
	e2e_fini(&e);
	return bad;
}

static int geo_cases_run, geo_cases_failed;

static void geo_one(const int pick[GEO_NFLAGS])
{
	char desc[512], why[256] = "";
	struct timespec t0, t1;

	geo_describe(pick, desc, sizeof(desc));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	geo_cases_run++;
	if (geo_case(pick, why, sizeof(why))) {
		geo_cases_failed++;
		fprintf(stderr, "  geometry case failed: server%s: %s\n", desc, why);
		CHECK(0);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("# server%s: %s (%.1f s)\n", desc, why[0] ? "FAILED" : "ok",
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
}

static void geo_random_pick(int pick[GEO_NFLAGS])
{
	int f;

	for (f = 0; f < GEO_NFLAGS; f++)
		pick[f] = (int)(geo_rand() % 3);
}

static void test_cross_product(void)
{
	const char *env = getenv("RDMEM_GEOMETRY_SEED"),
		   *extra_env = getenv("RDMEM_GEOMETRY_EXTRA");
	int extra = extra_env ? atoi(extra_env) : 24, pick[GEO_NFLAGS];
	size_t k;
	int a, b, i;

	geo_seed_state = env ? (uint32_t)strtoul(env, NULL, 0) : (uint32_t)time(NULL);
	printf("# cross product seed %u (replay: RDMEM_GEOMETRY_SEED=%u)\n", geo_seed_state,
	       geo_seed_state);
	/* Every min/max pair of the key pairs, the other flags drawn at random. */
	for (k = 0; k < sizeof(geo_pairs) / sizeof(geo_pairs[0]); k++) {
		for (a = 0; a <= 2; a += 2) {
			for (b = 0; b <= 2; b += 2) {
				geo_random_pick(pick);
				pick[geo_pairs[k][0]] = a;
				pick[geo_pairs[k][1]] = b;
				geo_one(pick);
			}
		}
	}
	for (i = 0; i < extra; i++) {
		geo_random_pick(pick);
		geo_one(pick);
	}
	printf("# cross product: %d configurations, %d failed\n", geo_cases_run, geo_cases_failed);
}

/* ---- (c) an object pool above 4 GiB ---------------------------------------- */

/*
 * 65536 slabs of 64 KiB fill the first 4 GiB of the pool exactly: every
 * object of the next class (256 KiB) lies past 2^32. Small and large LAZY
 * replies in flight together hold objects on both sides of 4 GiB at once: an
 * offset cut to 32 bits would alias them. The memfd is sparse: only the
 * pages written cost memory.
 */
static void test_objects_past_4g(void)
{
	enum { KEYS = 16, SMALL = 3000, LARGE = 100000, N = 512 };
	static uint8_t vals[KEYS][LARGE];
	static struct geo_job jobs[N];
	int i, wrong = 0, failed = 0;
	struct e2e e;

	REQUIRE(e2e_init(&e, "shm") == 0);
	REQUIRE(e2e_server(&e, "shm", "--objpool-slabs", "65536", "--max-sessions", "1", NULL) ==
		0);
	REQUIRE(e2e_agent(&e, NULL) == 0);
	CHECK(e2e_stat(&e, "server.objpool_bytes") > (4ll << 30));
	for (i = 0; i < KEYS; i++) {
		uint32_t len = i % 2 ? LARGE : SMALL;
		char key[32];

		snprintf(key, sizeof(key), "geo-c-%d", i);
		geo_fill(vals[i], len, (uint32_t)i + 100);
		CHECK_EQ(rdmem_put(e.h, key, (uint32_t)strlen(key), vals[i], len, NULL), 0);
	}
	for (i = 0; i < N; i++) {
		memset(&jobs[i], 0, sizeof(jobs[i]));
		jobs[i].op = RDMEM_OP_KV_GET;
		jobs[i].path = RDMEM_PATH_LAZY;
		snprintf(jobs[i].key, sizeof(jobs[i].key), "geo-c-%d", i % KEYS);
		jobs[i].want = vals[i % KEYS];
		jobs[i].want_len = i % 2 ? LARGE : SMALL;
	}
	geo_run_jobs(e.h, jobs, N, GEO_WINDOW);
	for (i = 0; i < N; i++) {
		failed += jobs[i].rc != 0;
		wrong += jobs[i].rc == 0 && !jobs[i].exact;
	}
	printf("# pool of %lld MiB: %d LAZY GETs (%d B below 4 GiB, %d B past it), %d wrong, "
	       "%d failed\n",
	       e2e_stat(&e, "server.objpool_bytes") >> 20, N, SMALL, LARGE, wrong, failed);
	CHECK_EQ(wrong, 0);
	CHECK_EQ(failed, 0);
	CHECK(e2e_stat(&e, "rdma.lazy_reads") >= N);
	CHECK_EQ(e2e_stat(&e, "rdma.bad_replies"), 0);
	e2e_fini(&e);
}

/* ---- (d) versions ---------------------------------------------------------- */

static void test_version_mismatch(void)
{
	struct rdmem_xchg_hello h = { 0 };
	struct rdmem_xchg_welcome w = { 0 };
	char why[sizeof(((struct rdmem_xchg_reject *)0)->reason)], want[64];

	h.magic = RDMEM_XCHG_MAGIC;
	h.version = RDMEM_LAYOUT_VERSION - 1;
	h.ring_slots = 1;
	h.resp_bytes = 64;
	h.resp.len = 128 + RDMEM_TURN_BYTES;
	CHECK_EQ(rdmem_session_check_hello(&h, sizeof(h), NULL, why, sizeof(why)),
		 RDMEM_S_BAD_REQUEST);
	snprintf(want, sizeof(want), "layout v%u, server speaks v%u", RDMEM_LAYOUT_VERSION - 1,
		 RDMEM_LAYOUT_VERSION);
	CHECK(strcmp(why, want) == 0);
	h.version = RDMEM_LAYOUT_VERSION;
	CHECK_EQ(rdmem_session_check_hello(&h, sizeof(h), NULL, why, sizeof(why)), RDMEM_S_OK);
	/* Layout 5: one response slot is the descriptor and its payload (128 B),
	 * and the turn word's 64 bytes follow it. */
	h.resp.len = 128 + RDMEM_TURN_BYTES - 1;
	CHECK_EQ(rdmem_session_check_hello(&h, sizeof(h), NULL, why, sizeof(why)),
		 RDMEM_S_BAD_REQUEST);
	/* A welcome of another layout, or one that moves our response stride. */
	w.magic = RDMEM_XCHG_MAGIC;
	w.version = RDMEM_LAYOUT_VERSION - 1;
	CHECK_EQ(rdmem_link_check_welcome(&w, sizeof(w), 1, 64), -EPROTO);
	w.version = RDMEM_LAYOUT_VERSION;
	w.ring_slots = 1;
	w.slot_bytes = 1024;
	w.max_value = 4096;
	w.eager_bytes = 64;
	w.object_ttl_ms = 1000;
	w.req = (struct rdmem_remote){ 0x10000, 1, 1088 };
	w.ctrl = (struct rdmem_remote){ 0x20000, 2, RDMEM_CTRL_BYTES };
	w.objpool = (struct rdmem_remote){ 0x30000, 3, 65536 };
	w.objpool_bytes = 65536;
	w.obj_max = 65536;
	w.obj_count = 1;
	w.resp_stride = 64; /* layout 3's meaning: the payload bytes */
	CHECK_EQ(rdmem_link_check_welcome(&w, sizeof(w), 1, 64), -EPROTO);
	w.resp_stride = 128; /* descriptor + 64 payload bytes */
	CHECK_EQ(rdmem_link_check_welcome(&w, sizeof(w), 1, 64), 0);
	w.req.len = 1087; /* one byte short of the one request slot */
	CHECK_EQ(rdmem_link_check_welcome(&w, sizeof(w), 1, 64), -EPROTO);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	RUN(test_version_mismatch);
	RUN(test_stage_below_resp_bytes);
	RUN(test_objects_past_4g);
	RUN(test_cross_product);
	return check_done();
}
