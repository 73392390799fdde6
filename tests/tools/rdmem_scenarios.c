/* rdmem_scenarios.c - the seven business scenarios, driven through
 * libclient against a running agent (scripts/run_business_scenarios.sh
 * starts one, or uses yours). Each scenario prints one JSON line:
 *
 *   {"scenario":"ycsb","title":...,"ok":true,"checks":[{"name":..,"status":"ok"|"fail"|"skip",
 *    "detail":..},...],"figures":{"ops":..,"qps":..,"p50_us":..,"p99_us":..,...}}
 *
 * and scripts/scenario_report.py turns the lines into the Markdown/JSON
 * report. Every check compares what came back with what was sent or with
 * what the server's deterministic generators must produce (LARGE_GET bytes,
 * PROFILE blobs, encoded here with the server's own code): nothing passes
 * on a status code alone.
 *
 *   rdmem_scenarios --shm-name NAME [--scenario all|ycsb|profile|cdn|image|tcp|faults|async]
 *                   [-n N] [--window W] [--image-dir DIR] [--seed S]
 * Exit status: 0 all checks passed (or skipped), 1 a check failed, 2 usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "libclient/rdmem.h"
#include "rdmem/pctl.h"
#include "server/profile.h"

#define MAX_CHECKS    48
#define MAX_WINDOW    64
#define FIG_CAP	      4096
#define STATS_WAIT_MS 3000

/* ---- options and output ------------------------------------------------ */

struct opts {
	const char *shm;
	const char *only;
	const char *image_dir;
	uint64_t n, seed;
	uint32_t window;
};

struct check {
	char name[96];
	char status[8];
	char detail[160];
};

struct scen {
	const char *id, *title;
	struct check checks[MAX_CHECKS];
	int nchecks, failed;
	char fig[FIG_CAP];
	size_t flen;
};

static rdmem_t *H;
static struct opts O;

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

__attribute__((format(printf, 4, 5))) static void check3(struct scen *s, const char *status,
							 const char *name, const char *fmt, ...)
{
	struct check *c;
	va_list ap;

	if (s->nchecks == MAX_CHECKS)
		return;
	c = &s->checks[s->nchecks++];
	snprintf(c->name, sizeof(c->name), "%s", name);
	snprintf(c->status, sizeof(c->status), "%s", status);
	va_start(ap, fmt);
	vsnprintf(c->detail, sizeof(c->detail), fmt, ap);
	va_end(ap);
	s->failed += strcmp(status, "fail") == 0;
}

#define CHECK(s, cond, name, ...) check3((s), (cond) ? "ok" : "fail", (name), __VA_ARGS__)
#define SKIP(s, name, ...)	  check3((s), "skip", (name), __VA_ARGS__)

static void fig(struct scen *s, const char *key, double v)
{
	int n;

	if (!isfinite(v))
		v = 0;
	n = snprintf(s->fig + s->flen, FIG_CAP - s->flen, "%s\"%s\":%.6g", s->flen ? "," : "", key,
		     v);
	if (n > 0 && (size_t)n < FIG_CAP - s->flen)
		s->flen += (size_t)n;
}

static void scen_print(struct scen *s)
{
	int i;

	printf("{\"scenario\":\"%s\",\"title\":", s->id);
	json_str(stdout, s->title);
	printf(",\"ok\":%s,\"checks\":[", s->failed ? "false" : "true");
	for (i = 0; i < s->nchecks; i++) {
		printf("%s{\"name\":", i ? "," : "");
		json_str(stdout, s->checks[i].name);
		printf(",\"status\":\"%s\",\"detail\":", s->checks[i].status);
		json_str(stdout, s->checks[i].detail);
		printf("}");
	}
	printf("],\"figures\":{%s}}\n", s->fig);
	fflush(stdout);
}

/* ---- latency series ---------------------------------------------------- */

struct lat {
	uint64_t *v;
	uint64_t n, cap;
};

static void lat_add(struct lat *l, uint64_t ns)
{
	if (l->n == l->cap) {
		uint64_t cap = l->cap ? l->cap * 2 : 1024;
		uint64_t *v = realloc(l->v, cap * sizeof(*v));

		if (!v)
			return; /* a figure short of a sample; checks do not use it */
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = ns;
}

static double lat_pct_us(struct lat *l, double p)
{
	rdmem_pctl_sort(l->v, l->n);
	return rdmem_pctl_us(l->v, l->n, p);
}

/* prefix_p50_us, prefix_p99_us (no prefix: p50_us, p99_us). */
static void fig_lat(struct scen *s, const char *prefix, struct lat *l)
{
	char k[64];

	snprintf(k, sizeof(k), "%s%sp50_us", prefix, *prefix ? "_" : "");
	fig(s, k, lat_pct_us(l, 0.5));
	snprintf(k, sizeof(k), "%s%sp99_us", prefix, *prefix ? "_" : "");
	fig(s, k, lat_pct_us(l, 0.99));
}

static void lat_free(struct lat *l)
{
	free(l->v);
	memset(l, 0, sizeof(*l));
}

static double secs_since(uint64_t t0)
{
	return (double)(rdmem_now_ns() - t0) / 1e9;
}

/* ---- helpers ----------------------------------------------------------- */

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double uniform(uint64_t *s)
{
	return (double)(splitmix(s) >> 11) / 9007199254740992.0;
}

/* Deterministic bytes for (a, b): what a value must hold when read back. */
static void fill(uint8_t *p, size_t len, uint64_t a, uint64_t b)
{
	uint64_t s = a * 0x100000001b3ull ^ (b << 32) ^ b, w = 0;
	size_t i;

	for (i = 0; i < len; i++) {
		if (i % 8 == 0)
			w = splitmix(&s);
		p[i] = (uint8_t)(w >> (8 * (i % 8)));
	}
}

static int same(const void *got, uint32_t got_len, uint64_t a, uint64_t b, size_t len)
{
	uint8_t *want;
	int eq;

	if (got_len != len)
		return 0;
	want = malloc(len ? len : 1);
	if (!want)
		return 0;
	fill(want, len, a, b);
	eq = memcmp(got, want, len) == 0;
	free(want);
	return eq;
}

/* A number from the agent's JSON telemetry: "key": inside "section":{...}. */
static int json_u64(const char *json, const char *section, const char *key, uint64_t *out)
{
	char pat[64];
	const char *p = json;

	if (section) {
		snprintf(pat, sizeof(pat), "\"%s\":{", section);
		if (!(p = strstr(json, pat)))
			return -ENOENT;
	}
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	if (!(p = strstr(p, pat)))
		return -ENOENT;
	*out = strtoull(p + strlen(pat), NULL, 10);
	return 0;
}

static char *agent_stats(void)
{
	char *text = NULL;
	uint32_t len;

	if (rdmem_agent_stats(H, 1, &text, &len, NULL))
		return NULL;
	return text;
}

/* 1 when the agent has an RDMA link (so EAGER/LAZY/BULK can be checked). */
static int agent_has_rdma(void)
{
	char *st = agent_stats();
	uint64_t up = 0;

	if (st)
		json_u64(st, NULL, "link_up", &up);
	free(st);
	return up == 1;
}

/*
 * A check that needs an RDMA link the agent does not have. Against a remote
 * server without RDMA that is a skip; where RDMA is guaranteed (make test's
 * shm fabric: scenarios.sh sets RDMEM_SCENARIOS_REQUIRE_RDMA=1) a missing
 * link is a failure, so a broken link cannot turn the checks into skips.
 */
static void no_rdma(struct scen *s, const char *name, const char *why)
{
	const char *req = getenv("RDMEM_SCENARIOS_REQUIRE_RDMA");

	if (req && strcmp(req, "1") == 0)
		CHECK(s, 0, name, "%s (RDMEM_SCENARIOS_REQUIRE_RDMA=1: RDMA must be up)", why);
	else
		SKIP(s, name, "%s", why);
}

static int ctl(const char *cmd)
{
	char *reply = NULL;
	uint32_t len;
	int rc = rdmem_agent_ctl(H, cmd, &reply, &len, NULL);

	free(reply);
	return rc;
}

static void key_of(char *buf, size_t cap, const char *prefix, uint64_t i)
{
	snprintf(buf, cap, "scen:%d:%s:%" PRIu64, (int)getpid(), prefix, i);
}

static int put_value(const char *prefix, uint64_t i, uint64_t ver, size_t len, uint8_t path)
{
	char key[96];
	uint8_t *v = malloc(len ? len : 1);
	struct rdmem_opts o = { path, 0, NULL };
	int rc;

	if (!v)
		return -ENOMEM;
	key_of(key, sizeof(key), prefix, i);
	fill(v, len, i, ver);
	rc = rdmem_put(H, key, (uint32_t)strlen(key), v, (uint32_t)len, &o);
	free(v);
	return rc;
}

/* ---- a generic async pipeline: window W, refilled as calls finish ----- */

struct pop {
	struct rdmem_rpc rpc;
	int busy;     /* 0 free, 1 in flight, 2 finished at submit (rc says why) */
	uint64_t i;   /* op number */
	uint64_t key; /* scenario's key index */
	uint64_t ver; /* reads: oldest version they may see; updates: version written */
	int kind;     /* scenario's op kind */
	char keybuf[96];
	uint8_t *buf; /* request value (owned) */
};

/* prep fills op->rpc (rdmem_rpc_init) and may set buf/key/ver/kind; < 0 skips. */
typedef int (*prep_fn)(void *ctx, uint64_t i, struct pop *op);
typedef void (*done_fn)(void *ctx, struct pop *op);

struct pipe_stats {
	uint32_t max_inflight;
	uint64_t polled; /* completions rdmem_poll() found without a wait */
	uint64_t waited;
};

static void pop_reset(struct pop *op)
{
	rdmem_rpc_free(&op->rpc);
	free(op->buf);
	memset(op, 0, sizeof(*op));
}

/* Runs n ops with at most w in flight; done() sees each finished op. */
static int run_pipeline(uint64_t n, uint32_t w, prep_fn prep, done_fn done, void *ctx,
			struct pipe_stats *ps)
{
	struct pop *ops = calloc(w, sizeof(*ops));
	uint64_t next = 0, finished = 0;
	uint32_t inflight = 0, i;

	memset(ps, 0, sizeof(*ps));
	if (!ops)
		return -ENOMEM;
	while (finished < n) {
		int got = 0;
		struct pop *oldest = NULL;

		for (i = 0; i < w && next < n; i++) {
			struct pop *op = &ops[i];

			if (op->busy)
				continue;
			op->i = next++;
			if (prep(ctx, op->i, op) < 0) {
				op->rpc.rc = -EINVAL;
				op->busy = 2;
				continue;
			}
			op->busy = rdmem_submit(H, &op->rpc) == 0 ? 1 : 2;
			inflight += op->busy == 1;
		}
		if (inflight > ps->max_inflight)
			ps->max_inflight = inflight;
		/* A non-blocking sweep over every call in flight ... */
		for (i = 0; i < w; i++) {
			struct pop *op = &ops[i];

			if (op->busy == 1 && !rdmem_poll(H, &op->rpc)) {
				if (!oldest || op->i < oldest->i)
					oldest = op;
				continue;
			}
			if (!op->busy)
				continue;
			if (op->busy == 1) {
				inflight--;
				ps->polled++;
			}
			done(ctx, op);
			pop_reset(op);
			finished++;
			got++;
		}
		/* ... and when it found nothing, sleep on the oldest. */
		if (!got && oldest) {
			rdmem_wait(H, &oldest->rpc);
			ps->waited++;
		}
	}
	free(ops);
	return 0;
}

/* ---- 1. YCSB-style hot KV cache ----------------------------------------- */

/* YCSB's zipfian generator (Gray et al.): item 0 is the hottest. */
struct zipf {
	uint64_t n;
	double theta, alpha, zetan, eta, half_pow;
};

static double zeta(uint64_t n, double theta)
{
	double z = 0;
	uint64_t i;

	for (i = 1; i <= n; i++)
		z += 1.0 / pow((double)i, theta);
	return z;
}

static void zipf_init(struct zipf *z, uint64_t n, double theta)
{
	z->n = n;
	z->theta = theta;
	z->alpha = 1.0 / (1.0 - theta);
	z->zetan = zeta(n, theta);
	z->eta = (1.0 - pow(2.0 / (double)n, 1.0 - theta)) / (1.0 - zeta(2, theta) / z->zetan);
	z->half_pow = 1.0 + pow(0.5, theta);
}

static uint64_t zipf_next(struct zipf *z, uint64_t *rng)
{
	double u = uniform(rng), uz = u * z->zetan;
	uint64_t k;

	if (uz < 1.0)
		return 0;
	if (uz < z->half_pow)
		return 1;
	k = (uint64_t)((double)z->n * pow(z->eta * u - z->eta + 1.0, z->alpha));
	return k < z->n ? k : z->n - 1;
}

#define YCSB_VALUE    512u
#define YCSB_READ_PCT 95

enum { K_READ, K_UPDATE };

struct ycsb {
	struct zipf z;
	uint64_t rng, keys;
	uint64_t *ver;	  /* last version known written */
	uint64_t *latest; /* last version handed to an update */
	uint64_t *hits;	  /* accesses per key */
	uint64_t reads, updates, failed, wrong, missing;
	struct lat rlat, ulat;
	int loading;
};

static int ycsb_prep(void *ctx, uint64_t i, struct pop *op)
{
	struct ycsb *y = ctx;
	uint64_t k = y->loading ? i : zipf_next(&y->z, &y->rng);
	int update = y->loading || splitmix(&y->rng) % 100 >= YCSB_READ_PCT;

	key_of(op->keybuf, sizeof(op->keybuf), "ycsb", k);
	op->key = k;
	if (!y->loading)
		y->hits[k]++;
	if (update) {
		op->kind = K_UPDATE;
		op->ver = ++y->latest[k];
		if (!(op->buf = malloc(YCSB_VALUE)))
			return -ENOMEM;
		fill(op->buf, YCSB_VALUE, k, op->ver);
		rdmem_rpc_init(&op->rpc, RDMEM_OP_KV_PUT);
		op->rpc.val = op->buf;
		op->rpc.val_len = YCSB_VALUE;
	} else {
		op->kind = K_READ;
		op->ver = y->ver[k];
		rdmem_rpc_init(&op->rpc, RDMEM_OP_KV_GET);
	}
	op->rpc.key = op->keybuf;
	op->rpc.key_len = (uint32_t)strlen(op->keybuf);
	return 0;
}

static void ycsb_done(void *ctx, struct pop *op)
{
	struct ycsb *y = ctx;
	uint64_t v;
	int ok = 0;

	if (op->rpc.rc) {
		y->failed++;
		y->missing += op->rpc.rc == -ENOENT;
		return;
	}
	if (op->kind == K_UPDATE) {
		y->updates += !y->loading;
		if (op->ver > y->ver[op->key])
			y->ver[op->key] = op->ver;
		if (!y->loading)
			lat_add(&y->ulat, op->rpc.latency_ns);
		return;
	}
	/* A read may see any version from the one committed when it left up to
	 * the newest update that was in flight with it. */
	for (v = op->ver; v <= y->latest[op->key] && !ok; v++)
		ok = same(op->rpc.rval, op->rpc.rlen, op->key, v, YCSB_VALUE);
	y->wrong += !ok;
	y->reads++;
	lat_add(&y->rlat, op->rpc.latency_ns);
}

static void scen_ycsb(struct scen *s)
{
	struct ycsb y = { 0 };
	struct pipe_stats ps;
	uint64_t keys = RDMEM_MAX(100, RDMEM_MIN(O.n / 4, 10000)), top = keys / 10, hot = 0, i, t0;
	double secs, theo, emp, sigma;

	s->id = "ycsb";
	s->title = "YCSB-B hot KV cache: zipfian keys (theta 0.99), 95% read / 5% update";
	y.keys = keys;
	y.rng = O.seed;
	y.ver = calloc(keys, sizeof(*y.ver));
	y.latest = calloc(keys, sizeof(*y.latest));
	y.hits = calloc(keys, sizeof(*y.hits));
	if (!y.ver || !y.latest || !y.hits) {
		CHECK(s, 0, "memory", "out of memory");
		goto out;
	}
	zipf_init(&y.z, keys, 0.99);
	y.loading = 1;
	run_pipeline(keys, O.window, ycsb_prep, ycsb_done, &y, &ps);
	CHECK(s, y.failed == 0, "load every key", "%" PRIu64 " keys of %u B, %" PRIu64 " failed",
	      keys, YCSB_VALUE, y.failed);
	y.loading = 0;
	y.failed = 0;
	t0 = rdmem_now_ns();
	run_pipeline(O.n, O.window, ycsb_prep, ycsb_done, &y, &ps);
	secs = secs_since(t0);
	CHECK(s, y.failed == 0, "no failed call", "%" PRIu64 " of %" PRIu64 " failed", y.failed,
	      O.n);
	CHECK(s, y.missing == 0, "every read hits (cache fully loaded)", "%" PRIu64 " misses",
	      y.missing);
	CHECK(s, y.wrong == 0, "every read returns the latest value",
	      "%" PRIu64 " of %" PRIu64 " reads wrong", y.wrong, y.reads);
	CHECK(s, y.reads + y.updates == O.n, "every op accounted",
	      "%" PRIu64 " reads + %" PRIu64 " updates", y.reads, y.updates);
	/* The hottest 10% of the keys get the share zipf predicts (5 sigma). */
	for (i = 0; i < top; i++)
		hot += y.hits[i];
	theo = zeta(top, 0.99) / y.z.zetan;
	emp = (double)hot / (double)O.n;
	sigma = sqrt(theo * (1 - theo) / (double)O.n);
	CHECK(s, fabs(emp - theo) <= 5 * sigma + 1e-9, "key popularity follows zipf",
	      "top 10%% of keys got %.1f%% of ops, zipf predicts %.1f%%", 100 * emp, 100 * theo);
	CHECK(s, ps.max_inflight == RDMEM_MIN(O.window, O.n), "pipeline kept the window full",
	      "max %u in flight, window %u", ps.max_inflight, O.window);
	fig(s, "ops", (double)O.n);
	fig(s, "qps", (double)O.n / secs);
	fig(s, "keys", (double)keys);
	fig(s, "hot10_share_pct", 100 * emp);
	fig_lat(s, "read", &y.rlat);
	fig_lat(s, "update", &y.ulat);
	{
		struct lat all = { 0 };

		for (i = 0; i < y.rlat.n; i++)
			lat_add(&all, y.rlat.v[i]);
		for (i = 0; i < y.ulat.n; i++)
			lat_add(&all, y.ulat.v[i]);
		fig_lat(s, "", &all);
		lat_free(&all);
	}
out:
	lat_free(&y.rlat);
	lat_free(&y.ulat);
	free(y.ver);
	free(y.latest);
	free(y.hits);
}

/* ---- 2. user profile composite reads ------------------------------------- */

/* A user page: PROFILE (the server's composite record) plus an MGET of the
 * user's cart, preferences and one key that was never written. */
enum { K_PROFILE, K_MGET };

struct prof {
	uint64_t users, rng;
	uint64_t failed, wrong_profile, wrong_mget;
	struct lat plat, mlat;
};

static size_t cart_len(uint64_t u)
{
	return 100 + (size_t)(u * 37 % 1900);
}

static int prof_prep(void *ctx, uint64_t i, struct pop *op)
{
	struct prof *p = ctx;
	uint64_t u = splitmix(&p->rng) % p->users, id = RDMEM_PROFILE_FIRST_ID + u;

	op->key = u;
	if (i % 2 == 0) {
		op->kind = K_PROFILE;
		snprintf(op->keybuf, sizeof(op->keybuf), "%" PRIu64, id);
		rdmem_rpc_init(&op->rpc, RDMEM_OP_PROFILE);
		op->rpc.key = op->keybuf;
		op->rpc.key_len = (uint32_t)strlen(op->keybuf);
		op->rpc.args[0] = id;
		return 0;
	}
	{
		char k[3][96];
		const char *names[3] = { "cart", "prefs", "never" };
		struct rdmem_blob_writer w;
		uint64_t bytes = 0, size;
		int j;

		for (j = 0; j < 3; j++) {
			char pre[32];

			snprintf(pre, sizeof(pre), "user-%s", names[j]);
			key_of(k[j], sizeof(k[j]), pre, u);
			bytes += strlen(k[j]);
		}
		size = rdmem_blob_array_size(3, bytes);
		if (!(op->buf = malloc(size)) || rdmem_blob_array_begin(&w, op->buf, size, 3))
			return -ENOMEM;
		for (j = 0; j < 3; j++)
			if (rdmem_blob_array_set(&w, (uint32_t)j, k[j], (uint32_t)strlen(k[j]),
						 RDMEM_BLOB_PRESENT))
				return -E2BIG;
		op->kind = K_MGET;
		rdmem_rpc_init(&op->rpc, RDMEM_OP_KV_MGET);
		op->rpc.val = op->buf;
		op->rpc.val_len = rdmem_blob_finish(&w);
		op->rpc.aux = 3;
	}
	return 0;
}

/* The exact blob the server must send for id: encoded here with its code. */
static int profile_expected(uint64_t id, uint8_t *buf, size_t cap, int64_t *len)
{
	struct rdmem_profile_buf pb;
	struct rdmem_profile_in in;
	int rc = rdmem_profile_lookup(id, &pb, &in);

	if (rc)
		return rc;
	*len = rdmem_blob_profile_encode(&in, buf, cap);
	return *len < 0 ? (int)*len : 0;
}

static void prof_done(void *ctx, struct pop *op)
{
	struct prof *p = ctx;

	if (op->rpc.rc) {
		p->failed++;
		return;
	}
	if (op->kind == K_PROFILE) {
		uint8_t want[2048];
		int64_t len;

		lat_add(&p->plat, op->rpc.latency_ns);
		if (profile_expected(RDMEM_PROFILE_FIRST_ID + op->key, want, sizeof(want), &len) ||
		    (uint64_t)len != op->rpc.rlen || memcmp(want, op->rpc.rval, (size_t)len))
			p->wrong_profile++;
		return;
	}
	{
		struct rdmem_blob_array arr;
		const void *d;
		uint32_t l, f;
		int bad = rdmem_blob_array_open(op->rpc.rval, op->rpc.rlen, &arr) || arr.count != 3;

		lat_add(&p->mlat, op->rpc.latency_ns);
		if (!bad) {
			rdmem_blob_array_get(&arr, 0, &d, &l, &f);
			bad |=
			    !(f & RDMEM_BLOB_PRESENT) || !same(d, l, op->key, 1, cart_len(op->key));
			rdmem_blob_array_get(&arr, 1, &d, &l, &f);
			bad |= !(f & RDMEM_BLOB_PRESENT) || !same(d, l, op->key, 2, 64);
			rdmem_blob_array_get(&arr, 2, &d, &l, &f);
			bad |= (f & RDMEM_BLOB_PRESENT) != 0;
		}
		p->wrong_mget += bad;
	}
}

static void scen_profile(struct scen *s)
{
	struct prof p = { 0 };
	struct pipe_stats ps;
	struct rdmem_profile pr;
	uint64_t u, t0, ops = RDMEM_MAX(2, O.n & ~1ull);
	int rc, setup = 0;
	double secs;

	s->id = "profile";
	s->title = "User profile composite reads: PROFILE record + MGET of the user's keys";
	p.users = RDMEM_MAX(10, RDMEM_MIN(O.n / 4, RDMEM_PROFILE_LAST_ID - RDMEM_PROFILE_FIRST_ID));
	p.rng = O.seed ^ 2;
	for (u = 0; u < p.users; u++) {
		setup |= put_value("user-cart", u, 1, cart_len(u), RDMEM_PATH_AUTO) ? 1 : 0;
		setup |= put_value("user-prefs", u, 2, 64, RDMEM_PATH_AUTO) ? 1 : 0;
	}
	CHECK(s, !setup, "store each user's cart and prefs", "%" PRIu64 " users", p.users);
	t0 = rdmem_now_ns();
	run_pipeline(ops, O.window, prof_prep, prof_done, &p, &ps);
	secs = secs_since(t0);
	CHECK(s, p.failed == 0, "no failed call", "%" PRIu64 " of %" PRIu64 " failed", p.failed,
	      ops);
	CHECK(s, p.wrong_profile == 0, "every PROFILE blob is byte-exact",
	      "%" PRIu64 " of %" PRIu64 " differ from the seeded record", p.wrong_profile,
	      p.plat.n);
	CHECK(s, p.wrong_mget == 0,
	      "every MGET returns cart and prefs exact, the unset key missing",
	      "%" PRIu64 " of %" PRIu64 " wrong", p.wrong_mget, p.mlat.n);
	rc = rdmem_profile(H, RDMEM_PROFILE_LAST_ID + 1, &pr, NULL);
	CHECK(s, rc == -ENOENT, "unknown user id is not found", "%s", rdmem_strerror(rc));
	if (rc == 0)
		rdmem_profile_free(&pr);
	rc = rdmem_profile(H, RDMEM_PROFILE_FIRST_ID, &pr, NULL);
	CHECK(s,
	      rc == 0 && pr.view.counter_count == RDMEM_PROFILE_COUNTERS &&
		  pr.view.tag_count >= 2 && pr.view.tag_count <= RDMEM_PROFILE_MAX_TAGS,
	      "profile decodes through the public API", "%s, %u tags, %u counters",
	      rdmem_strerror(rc), rc ? 0 : pr.view.tag_count, rc ? 0 : pr.view.counter_count);
	if (rc == 0)
		rdmem_profile_free(&pr);
	fig(s, "ops", (double)ops);
	fig(s, "qps", (double)ops / secs);
	fig(s, "users", (double)p.users);
	{
		struct lat all = { 0 };

		for (u = 0; u < p.plat.n; u++)
			lat_add(&all, p.plat.v[u]);
		for (u = 0; u < p.mlat.n; u++)
			lat_add(&all, p.mlat.v[u]);
		fig_lat(s, "", &all);
		lat_free(&all);
	}
	fig_lat(s, "profile", &p.plat);
	fig_lat(s, "mget", &p.mlat);
	lat_free(&p.plat);
	lat_free(&p.mlat);
}

/* ---- 3. CDN large-object pulls with lifecycle accounting ----------------- */

/* Pulls generated objects (LARGE_GET big:N) and stored ones (GET of values
 * over the reply slot), many at once; every LAZY reply leaves an object in
 * the server's pool that the agent must RDMA-read and RECLAIM. */
enum { K_BIG, K_STORED };

#define CDN_STORED 3

struct cdn {
	uint64_t rng;
	uint32_t max_value;
	uint64_t sizes[4];
	unsigned nsizes;
	size_t stored_len[CDN_STORED];
	char spec[4][32];
	uint64_t failed, wrong, bytes, lazy;
	struct lat lat;
};

static int cdn_prep(void *ctx, uint64_t i, struct pop *op)
{
	struct cdn *c = ctx;
	uint64_t r = splitmix(&c->rng);

	(void)i;
	if (r % 4 == 0) {
		op->kind = K_STORED;
		op->key = (r >> 8) % CDN_STORED;
		key_of(op->keybuf, sizeof(op->keybuf), "cdn", op->key);
		rdmem_rpc_init(&op->rpc, RDMEM_OP_KV_GET);
		op->rpc.key = op->keybuf;
	} else {
		op->kind = K_BIG;
		op->key = (r >> 8) % c->nsizes;
		rdmem_rpc_init(&op->rpc, RDMEM_OP_LARGE_GET);
		op->rpc.key = c->spec[op->key];
	}
	op->rpc.key_len = (uint32_t)strlen(op->rpc.key);
	return 0;
}

static void cdn_done(void *ctx, struct pop *op)
{
	struct cdn *c = ctx;
	int ok;

	if (op->rpc.rc) {
		c->failed++;
		return;
	}
	if (op->kind == K_BIG)
		ok = rdmem_large_verify(c->spec[op->key], op->rpc.rval, op->rpc.rlen) == 0;
	else
		ok = same(op->rpc.rval, op->rpc.rlen, op->key, 7, c->stored_len[op->key]);
	c->wrong += !ok;
	c->bytes += op->rpc.rlen;
	c->lazy += op->rpc.rpath == RDMEM_PATH_LAZY;
	lat_add(&c->lat, op->rpc.latency_ns);
}

struct lifecycle {
	uint64_t lazy_reads, reclaimed, refused, timeouts, live;
	int have_server;
};

static int lifecycle_read(struct lifecycle *l)
{
	char *st = agent_stats();
	int rc = -EIO;

	memset(l, 0, sizeof(*l));
	if (st && !json_u64(st, "rdma", "lazy_reads", &l->lazy_reads) &&
	    !json_u64(st, "rdma", "reclaimed", &l->reclaimed) &&
	    !json_u64(st, "rdma", "reclaim_refused", &l->refused)) {
		l->have_server = !json_u64(st, "server", "objects_live", &l->live) &&
				 !json_u64(st, "server", "obj_timeout", &l->timeouts);
		rc = 0;
	}
	free(st);
	return rc;
}

static void scen_cdn(struct scen *s)
{
	struct cdn c = { 0 };
	struct pipe_stats ps;
	struct lifecycle a, b;
	uint64_t t0, ops = RDMEM_MAX(8, O.n / 2), waited_ms = 0;
	unsigned i;
	int rdma = agent_has_rdma(), setup = 0;
	double secs;

	s->id = "cdn";
	s->title = "CDN large-object pulls (LAZY path) with lifecycle accounting";
	c.rng = O.seed ^ 3;
	c.max_value = rdmem_max_value(H);
	{
		const uint64_t want[4] = { 16u << 10, 64u << 10, 256u << 10, 1u << 20 };

		for (i = 0; i < 4; i++)
			if (want[i] <= c.max_value) {
				c.sizes[c.nsizes] = want[i];
				snprintf(c.spec[c.nsizes], sizeof(c.spec[0]), "big:%" PRIu64,
					 want[i]);
				c.nsizes++;
			}
	}
	for (i = 0; i < CDN_STORED; i++) {
		c.stored_len[i] =
		    RDMEM_MIN((size_t)c.max_value, (size_t)(100u << 10) * (1u + 3 * i));
		setup |= put_value("cdn", i, 7, c.stored_len[i], RDMEM_PATH_AUTO) ? 1 : 0;
	}
	CHECK(s, !setup && c.nsizes, "store the objects", "%u stored, %u generated sizes",
	      CDN_STORED, c.nsizes);
	/* A renamed or missing counter fails here: it must not silence the
	 * LAZY and reclaim checks below. */
	CHECK(s, lifecycle_read(&a) == 0, "agent stats carry the LAZY lifecycle counters",
	      "rdma.lazy_reads, rdma.reclaimed, rdma.reclaim_refused");
	t0 = rdmem_now_ns();
	run_pipeline(ops, RDMEM_MIN(O.window, 8u), cdn_prep, cdn_done, &c, &ps);
	secs = secs_since(t0);
	CHECK(s, c.failed == 0, "no failed pull", "%" PRIu64 " of %" PRIu64 " failed", c.failed,
	      ops);
	CHECK(s, c.wrong == 0, "every object byte-exact", "%" PRIu64 " wrong", c.wrong);
	if (!rdma) {
		no_rdma(s, "large replies take the LAZY path",
			"no RDMA link: TCP carries everything");
		no_rdma(s, "every LAZY object reclaimed", "no RDMA link, no object pool");
	} else {
		CHECK(s, c.lazy == ops, "large replies take the LAZY path",
		      "%" PRIu64 " of %" PRIu64 " came LAZY", c.lazy, ops);
		/* RECLAIMs go out in batches: give the last one its moment. */
		for (;;) {
			int done = lifecycle_read(&b) == 0 && b.have_server &&
				   b.reclaimed - a.reclaimed == b.lazy_reads - a.lazy_reads &&
				   b.live == 0;

			if (done || waited_ms >= STATS_WAIT_MS)
				break;
			usleep(50000);
			waited_ms += 50;
		}
		CHECK(s, b.lazy_reads - a.lazy_reads >= c.lazy, "agent RDMA-read every LAZY reply",
		      "%" PRIu64 " reads for %" PRIu64 " LAZY replies", b.lazy_reads - a.lazy_reads,
		      c.lazy);
		CHECK(s, b.reclaimed - a.reclaimed == b.lazy_reads - a.lazy_reads,
		      "every LAZY object reclaimed", "%" PRIu64 " reclaimed of %" PRIu64,
		      b.reclaimed - a.reclaimed, b.lazy_reads - a.lazy_reads);
		CHECK(s, b.have_server && b.live == 0, "server holds no live object afterwards",
		      "objects_live %" PRIu64 " after %" PRIu64 " ms", b.live, waited_ms);
		CHECK(s, b.refused == a.refused, "no RECLAIM refused as stale",
		      "%" PRIu64 " refused", b.refused - a.refused);
		CHECK(s, b.timeouts == a.timeouts, "no object left to the TTL scan",
		      "%" PRIu64 " freed by TTL", b.timeouts - a.timeouts);
	}
	fig(s, "ops", (double)ops);
	fig(s, "qps", (double)ops / secs);
	fig(s, "mib_per_s", (double)c.bytes / secs / 1048576.0);
	fig(s, "lazy", (double)c.lazy);
	fig_lat(s, "", &c.lat);
	lat_free(&c.lat);
}

/* ---- 4. edge image chunk migration with hash check ----------------------- */

/* One chunk of an upload by hand, so a test can break the protocol. */
static int image_chunk(const char *name, uint64_t id, const uint8_t *data, uint32_t off, uint32_t n,
		       uint32_t total, uint16_t flags, uint64_t hash)
{
	struct rdmem_image_args args = { id, off, total, hash };
	struct rdmem_rpc c;
	int rc;

	rdmem_rpc_init(&c, RDMEM_OP_IMAGE_CHUNK);
	c.flags = flags;
	memcpy(c.args, &args, sizeof(c.args));
	c.key = name;
	c.key_len = (uint32_t)strlen(name);
	c.val = data + off;
	c.val_len = n;
	rc = rdmem_submit(H, &c);
	if (rc == 0)
		rc = rdmem_wait(H, &c);
	rdmem_rpc_free(&c);
	return rc;
}

/* 1 when DIR/name exists and holds exactly data; -1 when it is absent. */
static int file_matches(const char *name, const uint8_t *data, size_t len)
{
	char path[512];
	uint8_t *buf;
	FILE *f;
	size_t got;
	int eq;

	snprintf(path, sizeof(path), "%s/%s", O.image_dir, name);
	if (!(f = fopen(path, "rb")))
		return -1;
	buf = malloc(len + 1);
	got = buf ? fread(buf, 1, len + 1, f) : 0;
	fclose(f);
	eq = buf && got == len && memcmp(buf, data, len) == 0;
	free(buf);
	return eq;
}

static void scen_image(struct scen *s)
{
	const uint32_t want_sizes[] = { 1,	    (24u << 10) - 1, 24u << 10, (24u << 10) + 1,
					300u << 10, 1536u << 10,     3u << 20 };
	const uint32_t chunks[] = { 0, 7000, 64u << 10 };
	uint32_t max = rdmem_max_value(H), i;
	uint64_t bytes = 0, t0, up = 0, failed = 0, mismatched = 0, missing = 0, hash, id;
	struct lat lat = { 0 };
	uint8_t *data = malloc(3u << 20);
	char name[128];
	double secs;
	int rc, r1, r2;

	s->id = "image";
	s->title = "Edge image chunk migration: chunked uploads, rolling hash checked at commit";
	if (!data) {
		CHECK(s, 0, "memory", "out of memory");
		return;
	}
	t0 = rdmem_now_ns();
	for (i = 0; i < RDMEM_ARRAY_SIZE(want_sizes); i++) {
		uint32_t chunk = chunks[i % RDMEM_ARRAY_SIZE(chunks)];
		struct rdmem_image_opts io = { chunk <= max ? chunk : 0, NULL, NULL, 0 };
		struct rdmem_opts o = { 0 };
		struct rdmem_info info;
		uint64_t c0 = rdmem_now_ns();

		o.info = &info;
		fill(data, want_sizes[i], 40 + i, 4);
		snprintf(name, sizeof(name), "scen-%d-%u.bin", (int)getpid(), i);
		rc = rdmem_image_put(H, name, data, want_sizes[i], &io, &o);
		lat_add(&lat, rdmem_now_ns() - c0);
		up++;
		if (rc) {
			failed++;
			continue;
		}
		bytes += want_sizes[i];
		if (O.image_dir) {
			int m = file_matches(name, data, want_sizes[i]);

			missing += m < 0;
			mismatched += m == 0;
		}
	}
	secs = secs_since(t0);
	CHECK(s, failed == 0, "every upload commits",
	      "%" PRIu64 " of %" PRIu64 " failed (sizes 1 B .. 3 MiB, chunks 24k/7000/64k)", failed,
	      up);
	if (O.image_dir)
		CHECK(s, !missing && !mismatched, "every stored file is byte-exact",
		      "%" PRIu64 " missing, %" PRIu64 " differ", missing, mismatched);
	else
		SKIP(s, "every stored file is byte-exact", "server's image dir not given (remote)");

	/* A wrong hash at COMMIT: refused, and nothing left behind. */
	fill(data, 50000, 99, 1);
	snprintf(name, sizeof(name), "scen-%d-badhash.bin", (int)getpid());
	id = rdmem__random_id();
	hash = rdmem_hash_update(RDMEM_HASH_INIT, data, 50000);
	r1 = image_chunk(name, id, data, 0, 30000, 50000, RDMEM_F_IMG_INIT, 0);
	r2 = r1 ? r1
		: image_chunk(name, id, data, 30000, 20000, 50000, RDMEM_F_IMG_COMMIT, hash ^ 1);
	CHECK(s, r1 == 0 && r2 == -EBADMSG, "a wrong hash is refused at commit",
	      "first %s, commit %s", rdmem_strerror(r1), rdmem_strerror(r2));
	if (O.image_dir)
		CHECK(s, file_matches(name, data, 50000) < 0, "a refused upload leaves no file",
		      "%s/%s", O.image_dir, name);
	/* A gap in the offsets: refused. */
	snprintf(name, sizeof(name), "scen-%d-gap.bin", (int)getpid());
	id = rdmem__random_id();
	r1 = image_chunk(name, id, data, 0, 10000, 50000, RDMEM_F_IMG_INIT, 0);
	r2 = r1 ? r1 : image_chunk(name, id, data, 20000, 10000, 50000, 0, 0);
	CHECK(s, r1 == 0 && r2 == -EINVAL, "a chunk out of order is refused", "first %s, gap %s",
	      rdmem_strerror(r1), rdmem_strerror(r2));
	/* The name is checked: no path ever escapes the image directory. */
	r1 = rdmem_image_put(H, "../escape.bin", data, 100, NULL, NULL);
	CHECK(s, r1 == -EINVAL, "a name with a path is refused", "%s", rdmem_strerror(r1));
	fig(s, "ops", (double)up);
	fig(s, "qps", (double)up / secs);
	fig(s, "mib_per_s", (double)bytes / secs / 1048576.0);
	fig_lat(s, "", &lat);
	lat_free(&lat);
	free(data);
}

/* ---- 5. TCP fallback carrying the full RPC set --------------------------- */

struct step {
	const char *what;
	int rc;
	uint8_t path;
	int right; /* the reply is what it must be */
};

/* Runs every op once with o (which records the path); returns how many steps. */
static int full_rpc_set(struct step *st, const char *tag)
{
	struct rdmem_info info;
	struct rdmem_opts o = { RDMEM_PATH_AUTO, 0, &info };
	char key[96], mk[2][96];
	const char *mkeys[2] = { mk[0], mk[1] };
	uint32_t mlens[2], len;
	uint8_t val[3000], *img;
	void *out;
	struct rdmem_mget mg;
	struct rdmem_profile pr;
	char *text;
	int n = 0, rc;

#define STEP(name, call, ok_expr)                                                                  \
	do {                                                                                       \
		memset(&info, 0, sizeof(info));                                                    \
		rc = (call);                                                                       \
		st[n].what = (name);                                                               \
		st[n].rc = rc;                                                                     \
		st[n].path = info.path;                                                            \
		st[n].right = (ok_expr);                                                           \
		n++;                                                                               \
	} while (0)

	key_of(key, sizeof(key), tag, 1);
	fill(val, sizeof(val), 5, 5);
	STEP("ping", rdmem_ping(H, &o), rc == 0);
	out = NULL;
	STEP("echo", rdmem_echo(H, val, sizeof(val), &out, &len, &o),
	     rc == 0 && len == sizeof(val) && !memcmp(out, val, len));
	free(out);
	STEP("put", rdmem_put(H, key, (uint32_t)strlen(key), val, sizeof(val), &o), rc == 0);
	out = NULL;
	STEP("get", rdmem_get(H, key, (uint32_t)strlen(key), &out, &len, &o),
	     rc == 0 && same(out, len, 5, 5, sizeof(val)));
	free(out);
	snprintf(mk[0], sizeof(mk[0]), "%s", key);
	key_of(mk[1], sizeof(mk[1]), tag, 2);
	mlens[0] = (uint32_t)strlen(mk[0]);
	mlens[1] = (uint32_t)strlen(mk[1]);
	STEP("mget", rdmem_mget(H, mkeys, mlens, 2, &mg, &o), rc == 0 && mg.arr.count == 2);
	if (rc == 0) {
		const void *d;
		uint32_t l;

		st[n - 1].right = rdmem_mget_value(&mg, 0, &d, &l) &&
				  same(d, l, 5, 5, sizeof(val)) &&
				  !rdmem_mget_value(&mg, 1, &d, &l);
		rdmem_mget_free(&mg);
	}
	STEP("profile", rdmem_profile(H, RDMEM_PROFILE_FIRST_ID + 7, &pr, &o), rc == 0);
	if (rc == 0) {
		uint8_t want[2048];
		int64_t wl;

		st[n - 1].right =
		    !profile_expected(RDMEM_PROFILE_FIRST_ID + 7, want, sizeof(want), &wl) &&
		    (uint64_t)wl == pr.len && !memcmp(want, pr.blob, pr.len);
		rdmem_profile_free(&pr);
	}
	out = NULL;
	STEP("large-get big:256k", rdmem_large_get(H, "big:256k", &out, &len, &o),
	     rc == 0 && rdmem_large_verify("big:256k", out, len) == 0);
	free(out);
	img = malloc(100000);
	if (img) {
		char name[96];

		fill(img, 100000, 6, 6);
		snprintf(name, sizeof(name), "scen-%d-%s.bin", (int)getpid(), tag);
		STEP("image-put (5 chunks)", rdmem_image_put(H, name, img, 100000, NULL, &o),
		     rc == 0 && (!O.image_dir || file_matches(name, img, 100000) == 1));
		free(img);
	}
	text = NULL;
	STEP("stats", rdmem_stats(H, 1, &text, &len, &o), rc == 0 && text && text[0] == '{');
	free(text);
	STEP("del", rdmem_del(H, key, (uint32_t)strlen(key), &o), rc == 0);
	out = NULL;
	STEP("get after del", rdmem_get(H, key, (uint32_t)strlen(key), &out, &len, &o),
	     rc == -ENOENT);
	free(out);
#undef STEP
	return n;
}

static int ping_path(uint8_t *path)
{
	struct rdmem_info info = { 0 };
	struct rdmem_opts o = { RDMEM_PATH_AUTO, 0, &info };
	int rc = rdmem_ping(H, &o);

	*path = info.path;
	return rc;
}

/* Pings until one goes the RDMA way (not TCP); returns the ms it took, or -1. */
static long wait_rdma_again(long limit_ms)
{
	uint64_t t0 = rdmem_now_ns();
	uint8_t path;

	for (;;) {
		long ms = (long)((rdmem_now_ns() - t0) / 1000000);

		if (ping_path(&path) == 0 && path != RDMEM_PATH_TCP)
			return ms;
		if (ms >= limit_ms)
			return -1;
		usleep(20000);
	}
}

static void scen_tcp(struct scen *s)
{
	struct step st[16];
	struct lat lat = { 0 };
	int n, i, ok = 0, on_tcp = 0, rdma = agent_has_rdma(), rc;
	uint64_t t0, k, ops = RDMEM_MAX(10, O.n / 2), failed = 0;
	char report[160] = "", key[96];
	double secs;
	long back;

	s->id = "tcp";
	s->title = "TCP fallback carrying the full RPC set (RDMA marked down at run time)";
	rc = ctl("simulate-rdma-down on");
	CHECK(s, rc == 0, "agent takes simulate-rdma-down on", "%s", rdmem_strerror(rc));
	n = full_rpc_set(st, "tcp");
	for (i = 0; i < n; i++) {
		ok += st[i].right;
		on_tcp += st[i].path == RDMEM_PATH_TCP;
		if ((!st[i].right || st[i].path != RDMEM_PATH_TCP) && strlen(report) < 100)
			snprintf(report + strlen(report), sizeof(report) - strlen(report),
				 "%s%s: %s/%s", report[0] ? "; " : "", st[i].what,
				 rdmem_strerror(st[i].rc), rdmem_path_name(st[i].path));
	}
	CHECK(s, ok == n, "every op gives the right answer over TCP", "%d of %d right%s%s", ok, n,
	      report[0] ? ": " : "", report);
	CHECK(s, on_tcp == n, "every op was carried by TCP", "%d of %d on tcp", on_tcp, n);
	/* A short run on TCP for the figures. */
	put_value("tcpload", 0, 1, 1024, RDMEM_PATH_AUTO);
	key_of(key, sizeof(key), "tcpload", 0);
	t0 = rdmem_now_ns();
	for (k = 0; k < ops; k++) {
		struct rdmem_info info;
		struct rdmem_opts o = { RDMEM_PATH_AUTO, 0, &info };
		void *out = NULL;
		uint32_t len;

		rc = rdmem_get(H, key, (uint32_t)strlen(key), &out, &len, &o);
		failed += rc != 0 || info.path != RDMEM_PATH_TCP || !same(out, len, 0, 1, 1024);
		free(out);
		lat_add(&lat, info.latency_ns);
	}
	secs = secs_since(t0);
	CHECK(s, failed == 0, "a run of gets stays on TCP and right",
	      "%" PRIu64 " of %" PRIu64 " wrong or off TCP", failed, ops);
	rc = ctl("simulate-rdma-down off");
	CHECK(s, rc == 0, "agent takes simulate-rdma-down off", "%s", rdmem_strerror(rc));
	if (rdma) {
		back = wait_rdma_again(3000);
		CHECK(s, back >= 0, "calls go back to RDMA when it is up again", "after %ld ms",
		      back);
		fig(s, "rdma_back_ms", (double)back);
	} else {
		no_rdma(s, "calls go back to RDMA when it is up again",
			"the agent has no RDMA link");
	}
	fig(s, "ops", (double)ops);
	fig(s, "qps", (double)ops / secs);
	fig_lat(s, "", &lat);
	lat_free(&lat);
}

/* ---- 6. runtime faults and resource pressure with recovery ---------------- */

static void path_counts(uint64_t n, const char *tag, uint64_t *tcp, uint64_t *bad, struct lat *l)
{
	char key[96];
	uint64_t i;

	key_of(key, sizeof(key), tag, 0);
	*tcp = *bad = 0;
	for (i = 0; i < n; i++) {
		struct rdmem_info info = { 0 };
		struct rdmem_opts o = { RDMEM_PATH_AUTO, 0, &info };
		void *out = NULL;
		uint32_t len;
		int rc = rdmem_get(H, key, (uint32_t)strlen(key), &out, &len, &o);

		*bad += rc != 0 || !same(out, len, 0, 3, 2048);
		*tcp += info.path == RDMEM_PATH_TCP;
		free(out);
		if (l)
			lat_add(l, info.latency_ns);
	}
}

static uint64_t stat_of(const char *section, const char *key)
{
	char *st = agent_stats();
	uint64_t v = 0;

	if (st)
		json_u64(st, section, key, &v);
	free(st);
	return v;
}

static void scen_faults(struct scen *s)
{
	struct lat normal = { 0 }, faulty = { 0 };
	uint64_t tcp, bad, f0, f1, e0, e1;
	struct rdmem_opts forced = { RDMEM_PATH_EAGER, 0, NULL };
	char key[96];
	void *out = NULL;
	uint32_t len;
	long back;
	int rc;

	s->id = "faults";
	s->title = "Runtime faults and resource pressure: injected RDMA failures, error bursts, "
		   "server pressure; recovery";
	if (!agent_has_rdma()) {
		no_rdma(s, "fault injection",
			"the agent has no RDMA link: nothing to fall back from");
		return;
	}
	rc = put_value("fault", 0, 3, 2048, RDMEM_PATH_AUTO);
	CHECK(s, rc == 0, "store the probe value", "%s", rdmem_strerror(rc));
	path_counts(20, "fault", &tcp, &bad, &normal);
	CHECK(s, bad == 0 && tcp == 0, "baseline: gets right and on RDMA",
	      "%" PRIu64 " wrong, %" PRIu64 " on tcp", bad, tcp);

	/* (a) failed RDMA operations: AUTO calls retry on TCP, nobody sees an error. */
	f0 = stat_of(NULL, "fallbacks");
	e0 = stat_of(NULL, "rdma_errors");
	rc = ctl("simulate-rdma-op-fail 5");
	path_counts(20, "fault", &tcp, &bad, &faulty);
	f1 = stat_of(NULL, "fallbacks");
	e1 = stat_of(NULL, "rdma_errors");
	CHECK(s, rc == 0 && bad == 0, "5 failed RDMA ops: every AUTO get still right",
	      "%" PRIu64 " of 20 wrong", bad);
	CHECK(s, tcp == 5 && f1 - f0 == 5 && e1 - e0 == 5, "the 5 failed ops were retried on TCP",
	      "%" PRIu64 " on tcp, fallbacks +%" PRIu64 ", rdma errors +%" PRIu64, tcp, f1 - f0,
	      e1 - e0);

	/* (b) a forced path is not retried: the caller sees the failure. */
	key_of(key, sizeof(key), "fault", 0);
	rc = ctl("simulate-rdma-op-fail 1");
	rc = rc ? rc : rdmem_get(H, key, (uint32_t)strlen(key), &out, &len, &forced);
	free(out);
	out = NULL;
	CHECK(s, rc == -EIO, "a forced EAGER call fails with -EIO instead of moving", "%s",
	      rdmem_strerror(rc));
	rc = rdmem_get(H, key, (uint32_t)strlen(key), &out, &len, &forced);
	CHECK(s, rc == 0 && same(out, len, 0, 3, 2048), "the next forced EAGER call works", "%s",
	      rdmem_strerror(rc));
	free(out);

	/* (c) an error burst over --error-threshold: AUTO avoids RDMA, then comes back. */
	rc = ctl("simulate-rdma-errors 100");
	path_counts(10, "fault", &tcp, &bad, &faulty);
	CHECK(s, rc == 0 && bad == 0 && tcp == 10, "over the error threshold: AUTO goes TCP",
	      "%" PRIu64 " of 10 on tcp, %" PRIu64 " wrong", tcp, bad);
	back = wait_rdma_again(10000);
	CHECK(s, back >= 0, "errors age out: back on RDMA", "after %ld ms", back);
	fig(s, "error_burst_recovery_ms", (double)back);

	/* (d) server pressure (ring, object pool): AUTO goes TCP until it ends. */
	rc = ctl("simulate-server-pressure ring");
	path_counts(10, "fault", &tcp, &bad, &faulty);
	CHECK(s, rc == 0 && bad == 0 && tcp == 10, "request ring pressure: AUTO goes TCP",
	      "%" PRIu64 " of 10 on tcp, %" PRIu64 " wrong", tcp, bad);
	rc = ctl("simulate-server-pressure objpool");
	path_counts(10, "fault", &tcp, &bad, &faulty);
	CHECK(s, rc == 0 && bad == 0 && tcp == 10, "object pool pressure: AUTO goes TCP",
	      "%" PRIu64 " of 10 on tcp, %" PRIu64 " wrong", tcp, bad);
	rc = ctl("simulate-server-pressure off");
	back = wait_rdma_again(3000);
	CHECK(s, rc == 0 && back >= 0, "pressure gone: back on RDMA", "after %ld ms", back);

	/* (e) the agent refuses a command it does not know. */
	rc = ctl("simulate-meteor on");
	CHECK(s, rc == -EINVAL, "an unknown agent-ctl command is refused", "%s",
	      rdmem_strerror(rc));
	path_counts(20, "fault", &tcp, &bad, NULL);
	CHECK(s, bad == 0 && tcp == 0, "after all faults: gets right and on RDMA",
	      "%" PRIu64 " wrong, %" PRIu64 " on tcp", bad, tcp);
	fig(s, "ops", (double)(normal.n + faulty.n));
	fig_lat(s, "normal", &normal);
	fig_lat(s, "fault", &faulty);
	{
		struct lat all = { 0 };
		uint64_t i;

		for (i = 0; i < normal.n; i++)
			lat_add(&all, normal.v[i]);
		for (i = 0; i < faulty.n; i++)
			lat_add(&all, faulty.v[i]);
		fig_lat(s, "", &all);
		lat_free(&all);
	}
	lat_free(&normal);
	lat_free(&faulty);
}

/* ---- 7. multi-outstanding async pipeline ---------------------------------- */

/* Mixed calls, many in flight, each carrying its own tag; every reply must
 * belong to the call it completes. */
enum { K_ECHO, K_APUT, K_AGET, K_PING };

struct async_run {
	uint64_t failed, wrong;
	struct lat lat;
	uint64_t keys;
};

static int async_prep(void *ctx, uint64_t i, struct pop *op)
{
	struct async_run *a = ctx;

	op->kind = (int)(i % 4);
	op->key = i % a->keys;
	switch (op->kind) {
	case K_ECHO:
		if (!(op->buf = malloc(256)))
			return -ENOMEM;
		fill(op->buf, 256, 7000 + i, i); /* unique per call */
		rdmem_rpc_init(&op->rpc, RDMEM_OP_ECHO);
		op->rpc.val = op->buf;
		op->rpc.val_len = 256;
		return 0;
	case K_APUT:
		/* Writes the key's one value again: concurrent gets see it either way. */
		if (!(op->buf = malloc(1024)))
			return -ENOMEM;
		fill(op->buf, 1024, op->key, 9);
		rdmem_rpc_init(&op->rpc, RDMEM_OP_KV_PUT);
		op->rpc.val = op->buf;
		op->rpc.val_len = 1024;
		break;
	case K_AGET:
		rdmem_rpc_init(&op->rpc, RDMEM_OP_KV_GET);
		break;
	default:
		rdmem_rpc_init(&op->rpc, RDMEM_OP_PING);
		return 0;
	}
	key_of(op->keybuf, sizeof(op->keybuf), "async", op->key);
	op->rpc.key = op->keybuf;
	op->rpc.key_len = (uint32_t)strlen(op->keybuf);
	return 0;
}

static void async_done(void *ctx, struct pop *op)
{
	struct async_run *a = ctx;

	if (op->rpc.rc) {
		a->failed++;
		return;
	}
	lat_add(&a->lat, op->rpc.latency_ns);
	if (op->kind == K_ECHO)
		a->wrong += !same(op->rpc.rval, op->rpc.rlen, 7000 + op->i, op->i, 256);
	else if (op->kind == K_AGET)
		a->wrong += !same(op->rpc.rval, op->rpc.rlen, op->key, 9, 1024);
	else
		a->wrong += op->rpc.rlen != 0;
}

static void scen_async(struct scen *s)
{
	struct async_run one = { 0 }, many = { 0 };
	struct pipe_stats ps1, psw;
	uint32_t w = RDMEM_MIN(O.window, rdmem_slots(H));
	uint64_t n = RDMEM_MAX(64, O.n), n1 = RDMEM_MAX(16, n / 4), k, t0;
	double q1, qw;
	int setup = 0;

	s->id = "async";
	s->title = "Multi-outstanding async pipeline: submit/poll/wait, mixed ops, tagged replies";
	one.keys = many.keys = 64;
	for (k = 0; k < 64; k++)
		setup |= put_value("async", k, 9, 1024, RDMEM_PATH_AUTO) ? 1 : 0;
	CHECK(s, !setup, "store the keys", "64 keys of 1 KiB");
	t0 = rdmem_now_ns();
	run_pipeline(n1, 1, async_prep, async_done, &one, &ps1);
	q1 = (double)n1 / secs_since(t0);
	t0 = rdmem_now_ns();
	run_pipeline(n, w, async_prep, async_done, &many, &psw);
	qw = (double)n / secs_since(t0);
	CHECK(s, one.failed + many.failed == 0, "no failed call",
	      "%" PRIu64 " failed at window 1, %" PRIu64 " at window %u", one.failed, many.failed,
	      w);
	CHECK(s, one.wrong + many.wrong == 0, "every reply belongs to its own call",
	      "%" PRIu64 " replies wrong", one.wrong + many.wrong);
	CHECK(s, psw.max_inflight == w, "the window filled: calls really outstanding at once",
	      "max %u in flight of %u", psw.max_inflight, w);
	CHECK(s, many.lat.n + many.failed == n, "every call completed once",
	      "%" PRIu64 " completions for %" PRIu64 " calls", many.lat.n + many.failed, n);
	fig(s, "ops", (double)n);
	fig(s, "qps", qw);
	fig(s, "window", (double)w);
	fig(s, "qps_window1", q1);
	fig(s, "speedup", qw / q1);
	fig_lat(s, "", &many.lat);
	fig_lat(s, "window1", &one.lat);
	lat_free(&one.lat);
	lat_free(&many.lat);
}

/* ---- main ---------------------------------------------------------------- */

static const struct {
	const char *name;
	void (*run)(struct scen *s);
} scenarios[] = {
	{ "ycsb", scen_ycsb },	 { "profile", scen_profile }, { "cdn", scen_cdn },
	{ "image", scen_image }, { "tcp", scen_tcp },	      { "faults", scen_faults },
	{ "async", scen_async },
};

static int usage(void)
{
	fprintf(stderr,
		"usage: rdmem_scenarios --shm-name NAME [--scenario all|ycsb|profile|cdn|image|"
		"tcp|faults|async]\n"
		"                       [-n N] [--window W] [--image-dir DIR] [--seed S]\n");
	return 2;
}

static int parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!s || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

int main(int argc, char **argv)
{
	uint64_t v;
	size_t i;
	int a, rc, failed = 0, ran = 0;

	O.only = "all";
	O.n = 1000;
	O.window = 16;
	O.seed = 42;
	/* Every option takes a value: step over both. */
	for (a = 1; a < argc; a += 2) {
		const char *arg = argv[a], *val = a + 1 < argc ? argv[a + 1] : NULL;

		if (!strcmp(arg, "--shm-name") && val)
			O.shm = val;
		else if (!strcmp(arg, "--scenario") && val)
			O.only = val;
		else if (!strcmp(arg, "--image-dir") && val)
			O.image_dir = val;
		else if (!strcmp(arg, "-n") && !parse_u64(val, 1, 100000000, &v))
			O.n = v;
		else if (!strcmp(arg, "--window") && !parse_u64(val, 1, MAX_WINDOW, &v))
			O.window = (uint32_t)v;
		else if (!strcmp(arg, "--seed") && !parse_u64(val, 0, UINT64_MAX, &v))
			O.seed = v;
		else
			return usage();
	}
	if ((rc = rdmem_open(O.shm, &H))) {
		fprintf(stderr, "rdmem_scenarios: %s: %s\n", O.shm ? O.shm : "/rdmem",
			rdmem_strerror(rc));
		return 1;
	}
	if (O.window > rdmem_slots(H))
		O.window = rdmem_slots(H);
	for (i = 0; i < RDMEM_ARRAY_SIZE(scenarios); i++) {
		struct scen *s;

		if (strcmp(O.only, "all") && strcmp(O.only, scenarios[i].name))
			continue;
		s = calloc(1, sizeof(*s));
		if (!s)
			return 1;
		scenarios[i].run(s);
		scen_print(s);
		failed += s->failed != 0;
		ran++;
		free(s);
	}
	rdmem_close(H);
	if (!ran)
		return usage();
	return failed ? 1 : 0;
}
