/* bench.c - `rdmem bench`: a closed-loop benchmark through the front door,
 * on the same async API an app uses (rdmem_submit / rdmem_wait), a FIFO
 * window of calls in flight, every reply's value checked (mget: 16 keys
 * a call, every value), latency
 * percentiles from the shared routine (rdmem/pctl.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "rdmem/blob.h"
#include "rdmem/pctl.h"

enum bench_op { B_PING, B_LOCAL_PING, B_GET, B_PUT, B_LARGE_GET, B_BIGPUT, B_MGET };

/* Keys one MGET of the benchmark asks for: consecutive keys from its own. */
#define BENCH_MGET_KEYS 16u

struct bench {
	enum bench_op op;
	uint64_t n, window, size, keys;
	char spec[32];	  /* large-get key */
	uint8_t **expect; /* get, mget: the value of key i; put: one value for all */
	void **mreq;	  /* mget: the request of the call starting at key i */
	uint32_t *mlen;
	uint64_t nvals;
	struct rdmem_rpc *rpc;
	uint64_t *kidx;	 /* key index of the call in window place w */
	char (*key)[17]; /* key i: "bench:%010u", 16 bytes, formatted before timing */
	uint64_t *lat;
	uint64_t done, failures, timeouts, wrong, late, paths[RDMEM_PATH__COUNT];
	uint64_t first_error;
	int first_rc;
};

static int bench_parse_op(const char *s, enum bench_op *op)
{
	static const char *const names[] = { "ping",	  "local-ping", "get", "put",
					     "large-get", "bigput",	"mget" };
	unsigned i;

	for (i = 0; i < RDMEM_ARRAY_SIZE(names); i++)
		if (s && !strcmp(s, names[i])) {
			*op = (enum bench_op)i;
			return 0;
		}
	return -EINVAL;
}

static const char *bench_op_name(enum bench_op op)
{
	static const char *const names[] = { "ping",	  "local-ping", "get", "put",
					     "large-get", "bigput",	"mget" };
	return names[op];
}

static void bench_value(uint8_t *p, uint64_t size, uint64_t key)
{
	rdmem_big_fill(size, key * 4096, p, size); /* any deterministic bytes per key */
}

/* mget: the request of each starting key, built before timing. */
static int bench_mget_setup(struct bench *b)
{
	const char *keys[BENCH_MGET_KEYS];
	uint32_t lens[BENCH_MGET_KEYS];
	uint64_t i, j;
	int rc;

	b->mreq = calloc(b->keys, sizeof(*b->mreq));
	b->mlen = calloc(b->keys, sizeof(*b->mlen));
	if (!b->mreq || !b->mlen)
		return -ENOMEM;
	for (i = 0; i < b->keys; i++) {
		for (j = 0; j < BENCH_MGET_KEYS; j++) {
			keys[j] = b->key[(i + j) % b->keys];
			lens[j] = 16;
		}
		if ((rc =
			 rdmem_mget_request(keys, lens, BENCH_MGET_KEYS, &b->mreq[i], &b->mlen[i])))
			return rc;
	}
	return 0;
}

/* Prepares the values (and, for get and mget, stores them) before timing starts. */
static int bench_setup(struct cli *c, struct bench *b)
{
	uint64_t i;
	int kv = b->op == B_GET || b->op == B_MGET;

	/* get, mget: one value per key; put, bigput: one value; large-get: the object. */
	b->nvals = kv ? b->keys : b->op >= B_PUT ? 1 : 0;
	b->rpc = calloc(b->window, sizeof(*b->rpc));
	b->kidx = calloc(b->window, sizeof(*b->kidx));
	b->key = calloc(b->keys ? b->keys : 1, sizeof(*b->key));
	b->lat = calloc(b->n, sizeof(*b->lat));
	b->expect = calloc(b->nvals ? b->nvals : 1, sizeof(*b->expect));
	if (!b->rpc || !b->kidx || !b->key || !b->lat || !b->expect)
		return -ENOMEM;
	/* Keys are formatted now, not while timing: 16 bytes each, as the GET. */
	for (i = 0; i < (b->keys ? b->keys : 1); i++)
		snprintf(b->key[i], sizeof(b->key[i]), "bench:%010u", (unsigned)(i % 1000000000u));
	for (i = 0; i < b->nvals; i++) {
		int rc;

		if (!(b->expect[i] = malloc(b->size + 1)))
			return -ENOMEM;
		/* large-get: the object itself, so a reply is checked with one memcmp */
		if (b->op == B_LARGE_GET)
			rdmem_big_fill(b->size, 0, b->expect[i], b->size);
		else
			bench_value(b->expect[i], b->size, i);
		if (kv && (rc = rdmem_put(c->h, b->key[i], 16, b->expect[i], (uint32_t)b->size,
					  &c->opts)))
			return rc;
	}
	snprintf(b->spec, sizeof(b->spec), "big:%" PRIu64, b->size);
	return b->op == B_MGET ? bench_mget_setup(b) : 0;
}

static int bench_submit(struct cli *c, struct bench *b, uint64_t w, uint64_t i)
{
	struct rdmem_rpc *r = &b->rpc[w];
	uint64_t k = i % (b->keys ? b->keys : 1);
	static const uint16_t ops[] = { RDMEM_OP_PING,	 RDMEM_SHM_OP_LOCAL_PING, RDMEM_OP_KV_GET,
					RDMEM_OP_KV_PUT, RDMEM_OP_LARGE_GET,	  RDMEM_OP_KV_PUT,
					RDMEM_OP_KV_MGET };

	rdmem_rpc_init(r, ops[b->op]);
	r->path = c->opts.path;
	r->timeout_ms = c->opts.timeout_ms;
	b->kidx[w] = k;
	if (b->op == B_LARGE_GET) {
		r->key = b->spec;
		r->key_len = (uint32_t)strlen(b->spec);
	} else if (b->op == B_MGET) {
		r->val = b->mreq[k];
		r->val_len = b->mlen[k];
	} else if (b->op != B_PING && b->op != B_LOCAL_PING) {
		r->key_len = 16;
		r->key = b->key[k];
	}
	if (b->op == B_PUT || b->op == B_BIGPUT) {
		r->val = b->expect[0];
		r->val_len = (uint32_t)b->size;
	}
	/* Replies are read where they landed in the slot: no copy to time. */
	r->inplace = 1;
	return rdmem_submit(c->h, r);
}

/* An MGET's reply: every value, in order, the one its key holds. */
static int bench_mget_wrong(const struct bench *b, const struct rdmem_rpc *r, uint64_t k)
{
	struct rdmem_blob_array a;
	uint32_t j, len, flags;
	const void *v;

	if (rdmem_blob_array_open(r->rval, r->rlen, &a) < 0 || a.count != BENCH_MGET_KEYS)
		return 1;
	for (j = 0; j < BENCH_MGET_KEYS; j++) {
		rdmem_blob_array_get(&a, j, &v, &len, &flags);
		if (!(flags & RDMEM_BLOB_PRESENT) || len != b->size ||
		    memcmp(v, b->expect[(k + j) % b->keys], b->size))
			return 1;
	}
	return 0;
}

/* Accounts one finished call and checks its value. */
static void bench_account(struct bench *b, struct rdmem_rpc *r, uint64_t k)
{
	int wrong = 0;

	b->lat[b->done++] = r->latency_ns;
	if (r->rc) {
		b->failures++;
		b->timeouts += r->rc == -ETIMEDOUT;
		if (!b->first_rc)
			b->first_rc = r->rc;
		rdmem_rpc_free(r);
		return;
	}
	b->late += r->late != 0;
	if (r->rpath < RDMEM_PATH__COUNT)
		b->paths[r->rpath]++;
	if (b->op == B_GET)
		wrong = r->rlen != b->size || memcmp(r->rval, b->expect[k], b->size);
	else if (b->op == B_LARGE_GET)
		wrong = r->rlen != b->size || memcmp(r->rval, b->expect[0], b->size);
	else if (b->op == B_MGET)
		wrong = bench_mget_wrong(b, r, k);
	else
		wrong = r->rlen != 0;
	b->wrong += wrong;
	rdmem_rpc_free(r); /* gives the in-place reply's slot back */
}

static double pct_us(const struct bench *b, double p)
{
	return rdmem_pctl_us(b->lat, b->done, p);
}

static void bench_print(const struct cli *c, struct bench *b, double secs)
{
	double sum = 0;
	uint64_t i;
	unsigned p;
	int first = 1;

	for (i = 0; i < b->done; i++)
		sum += (double)b->lat[i];
	rdmem_pctl_sort(b->lat, b->done);
	if (c->json) {
		printf(
		    "{\"op\":\"%s\",\"ops\":%" PRIu64 ",\"window\":%" PRIu64 ",\"size\":%" PRIu64
		    ",\"seconds\":%.6f,\"qps\":%.1f,\"avg_us\":%.2f,\"p50_us\":%.2f,\"p99_us\":%.2f"
		    ",\"p999_us\":%.2f,\"max_us\":%.2f,\"failures\":%" PRIu64
		    ",\"timeouts\":%" PRIu64 ",\"wrong\":%" PRIu64 ",\"late\":%" PRIu64
		    ",\"paths\":{",
		    bench_op_name(b->op), b->done, b->window, b->size, secs, (double)b->done / secs,
		    b->done ? sum / (double)b->done / 1000.0 : 0.0, pct_us(b, 0.5), pct_us(b, 0.99),
		    pct_us(b, 0.999), pct_us(b, 1.0), b->failures, b->timeouts, b->wrong, b->late);
		for (p = 0; p < RDMEM_PATH__COUNT; p++)
			if (b->paths[p]) {
				printf("%s\"%s\":%" PRIu64, first ? "" : ",",
				       p ? rdmem_path_name(p) : "local", b->paths[p]);
				first = 0;
			}
		printf("}}\n");
		return;
	}
	printf("bench %s: %" PRIu64 " ops, window %" PRIu64 ", size %" PRIu64 " B\n",
	       bench_op_name(b->op), b->done, b->window, b->size);
	printf("  %.3f s, %.0f ops/s\n", secs, (double)b->done / secs);
	printf("  latency us: avg %.2f  p50 %.2f  p99 %.2f  p99.9 %.2f  max %.2f\n",
	       b->done ? sum / (double)b->done / 1000.0 : 0.0, pct_us(b, 0.5), pct_us(b, 0.99),
	       pct_us(b, 0.999), pct_us(b, 1.0));
	printf("  failures %" PRIu64 " (timeouts %" PRIu64 "), wrong values %" PRIu64
	       ", late replies %" PRIu64 "\n",
	       b->failures, b->timeouts, b->wrong, b->late);
	printf("  paths:");
	for (p = 0; p < RDMEM_PATH__COUNT; p++)
		if (b->paths[p])
			printf(" %s %" PRIu64, p ? rdmem_path_name(p) : "local", b->paths[p]);
	printf("\n");
}

static void bench_free(struct bench *b)
{
	uint64_t i;

	for (i = 0; b->expect && i < b->nvals; i++)
		free(b->expect[i]);
	for (i = 0; b->mreq && i < b->keys; i++)
		free(b->mreq[i]);
	free(b->mreq);
	free(b->mlen);
	free(b->expect);
	free(b->rpc);
	free(b->kidx);
	free(b->key);
	free(b->lat);
}

static int bench_check_args(struct cli *c, struct bench *b)
{
	static const uint64_t default_size[] = { 0, 0, 64, 64, 64 << 10, 256 << 10, 64 };
	uint32_t slots, max;
	int rc;

	if (!c->bench_op || bench_parse_op(c->bench_op, &b->op))
		return rdmem_cli_usage(
		    "bench --op must be ping, local-ping, get, put, large-get, bigput or mget%s",
		    "");
	if ((rc = rdmem_cli_attach(c)))
		return rc;
	slots = rdmem_slots(c->h);
	max = rdmem_max_value(c->h);
	b->n = c->have_n ? c->n : 10000;
	b->window = c->have_window ? c->window : 1;
	b->size = c->have_size ? c->size : default_size[b->op];
	/* get keeps one expected value per key: at most ~64 MiB of them by default */
	b->keys = b->op == B_GET || b->op == B_PUT || b->op == B_BIGPUT || b->op == B_MGET
		      ? (c->have_keys ? c->keys
				      : RDMEM_MAX(1, RDMEM_MIN(RDMEM_MIN(b->n, 1024),
							       (64u << 20) / (b->size + 1))))
		      : 0;
	if (b->window > slots) {
		fprintf(stderr,
			"rdmem: bench: window %" PRIu64 " is over the %u calls a client "
			"may have in flight\n",
			b->window, slots);
		return EXIT_USAGE;
	}
	if (b->size > max || (b->op == B_LARGE_GET && b->size == 0)) {
		fprintf(stderr,
			"rdmem: bench: size %" PRIu64 " must be 1..%u (the agent's max value; "
			"rdmem-agent --max-value raises it)\n",
			b->size, max);
		return EXIT_USAGE;
	}
	if (b->op == B_MGET &&
	    rdmem_blob_array_size(BENCH_MGET_KEYS, BENCH_MGET_KEYS * b->size) > max) {
		fprintf(stderr,
			"rdmem: bench: an mget of %u values of %" PRIu64
			" B is over the agent's max "
			"value %u (rdmem-agent --max-value raises it)\n",
			BENCH_MGET_KEYS, b->size, max);
		return EXIT_USAGE;
	}
	if (c->gap_us && b->window > 1) {
		/* Latency is stamped when a reply is polled: with calls in flight
		 * the pauses before them would be timed too. */
		fprintf(stderr, "rdmem: bench: --gap-us needs --window 1\n");
		return EXIT_USAGE;
	}
	if ((b->op == B_PING || b->op == B_LOCAL_PING) && c->have_size) {
		fprintf(stderr, "rdmem: bench: --size does not apply to %s\n", c->bench_op);
		return EXIT_USAGE;
	}
	return 0;
}

/* --gap-us (window 1 only): a pause before each call but the first, so the
 * agent and the server go idle between calls as under a light load; the
 * pause is not timed (latency runs from the submit). */
static void bench_gap(uint64_t us)
{
	struct timespec ts = { .tv_sec = (time_t)(us / 1000000),
			       .tv_nsec = (long)(us % 1000000) * 1000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int rdmem_cli_bench(struct cli *c)
{
	struct bench b;
	uint64_t sent = 0, head = 0, t0, i;
	double secs;
	int rc = rdmem_cli_want_args(
	    c, 0, "bench --op OP [-n N] [--window W] [--size B] [--gap-us G] [--json]");

	memset(&b, 0, sizeof(b));
	if (rc || (rc = bench_check_args(c, &b)))
		return rc;
	rc = bench_setup(c, &b);
	if (rc) {
		bench_free(&b);
		c->req_bytes = b.size;
		return rc == -E2BIG ? rdmem_cli_too_big(c, "bench setup")
				    : rdmem_cli_fail("bench setup", rc);
	}
	t0 = rdmem_now_ns();
	/* A FIFO window: fill it, then wait for the oldest and refill its place. */
	for (i = 0; i < b.window && sent < b.n; i++, sent++)
		if (bench_submit(c, &b, i, sent))
			bench_account(&b, &b.rpc[i], b.kidx[i]);
	while (b.done < b.n) {
		uint64_t w = head++ % b.window;
		struct rdmem_rpc *r = &b.rpc[w];

		if (rdmem_rpc_pending(r)) {
			rdmem_wait(c->h, r);
			bench_account(&b, r, b.kidx[w]);
		}
		if (sent < b.n && c->gap_us)
			bench_gap(c->gap_us);
		if (sent < b.n && bench_submit(c, &b, w, sent++))
			bench_account(&b, r, b.kidx[w]);
	}
	secs = (double)(rdmem_now_ns() - t0) / 1e9;
	bench_print(c, &b, secs);
	if (b.first_rc)
		fprintf(stderr, "rdmem: bench: first failure: %s\n", rdmem_strerror(b.first_rc));
	rc = b.failures || b.wrong ? EXIT_FAIL : 0;
	if (b.wrong)
		fprintf(stderr, "rdmem: bench: %" PRIu64 " replies carried a wrong value\n",
			b.wrong);
	bench_free(&b);
	return rc;
}
