/* redis_client.c - the Redis comparison client (hiredis, one thread, one
 * connection): GET/SET at window 1, and a pipeline of --window commands
 * in flight above that. The ops map to Redis as
 *   get -> GET of a preloaded key          put, bigput -> SET
 *   large-get -> GET of a preloaded "big:<size>" value holding the same
 *                bytes as RDMemRPC's generated object
 * Every reply is checked; a wrong one counts as a failure, exit status 1.
 *
 *   redis_client --port P --op get|put|large-get|bigput [--size B] [--window W] [-n N]
 * Prints one JSON record (latency.h) on stdout.
 */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "latency.h"
#include "workload.h"

struct rbench {
	struct bench_opts o;
	redisContext *c;
	char (*keys)[BENCH_KEY_LEN + 1];
	uint8_t *values; /* keys x size: value of key i at i * size */
	uint8_t *object; /* LARGE_GET: the expected object */
	char big_key[32];
	uint64_t failures;
	uint64_t *t0; /* start time of each call in flight, by call index % window */
};

static const uint8_t *rb_value(const struct rbench *b, unsigned i)
{
	return b->values + (size_t)i * b->o.size;
}

static int rb_make_expected(struct rbench *b)
{
	unsigned i, nk = b->o.op == BENCH_LARGE_GET ? 0 : b->o.keys;

	b->keys = calloc(b->o.keys, sizeof(*b->keys));
	b->values = malloc((size_t)nk * b->o.size + 1);
	b->object = malloc(b->o.op == BENCH_LARGE_GET ? b->o.size : 1);
	b->t0 = calloc(b->o.window, sizeof(*b->t0));
	if (!b->keys || !b->values || !b->object || !b->t0)
		return -1;
	for (i = 0; i < b->o.keys; i++)
		bench_key(b->keys[i], i);
	for (i = 0; i < nk; i++)
		bench_value(b->values + (size_t)i * b->o.size, b->o.size, i, b->o.seed);
	if (b->o.op == BENCH_LARGE_GET)
		rdmem_big_fill(b->o.size, 0, b->object, b->o.size);
	snprintf(b->big_key, sizeof(b->big_key), "big:%llu", (unsigned long long)b->o.size);
	return 0;
}

/* Queues call i (not sent until the next read). */
static int rb_append(struct rbench *b, uint64_t i)
{
	unsigned k = (unsigned)(i % b->o.keys);

	switch (b->o.op) {
	case BENCH_GET:
		return redisAppendCommand(b->c, "GET %b", b->keys[k], (size_t)BENCH_KEY_LEN);
	case BENCH_LARGE_GET:
		return redisAppendCommand(b->c, "GET %s", b->big_key);
	default:
		return redisAppendCommand(b->c, "SET %b %b", b->keys[k], (size_t)BENCH_KEY_LEN,
					  rb_value(b, k), (size_t)b->o.size);
	}
}

static int rb_reply_good(const struct rbench *b, const redisReply *r, uint64_t i)
{
	unsigned k = (unsigned)(i % b->o.keys);

	if (!r)
		return 0;
	if (bench_is_put(b->o.op))
		return r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
	if (r->type != REDIS_REPLY_STRING || r->len != b->o.size)
		return 0;
	return memcmp(r->str, b->o.op == BENCH_GET ? rb_value(b, k) : b->object, b->o.size) == 0;
}

/* Reads the reply of call i and checks it; -1 when the connection broke. */
static int rb_take(struct rbench *b, uint64_t i, struct lat_stats *st)
{
	redisReply *r = NULL;

	if (redisGetReply(b->c, (void **)&r) != REDIS_OK) {
		fprintf(stderr, "redis_client: connection: %s\n", b->c->errstr);
		b->failures++;
		return -1;
	}
	if (st)
		lat_add(st, b->t0[i % b->o.window], lat_now_ns());
	if (!rb_reply_good(b, r, i) && b->failures++ < 5)
		fprintf(stderr, "redis_client: %s call %llu: wrong reply (type %d)\n", b->o.op_name,
			(unsigned long long)i, r ? r->type : -1);
	freeReplyObject(r);
	return 0;
}

/* Runs count calls with up to window in flight; window 1 is plain request/reply. */
static int rb_run(struct rbench *b, uint64_t count, struct lat_stats *st)
{
	uint64_t issued = 0, done = 0;

	while (done < count) {
		while (issued < count && issued - done < b->o.window) {
			b->t0[issued % b->o.window] = lat_now_ns();
			if (rb_append(b, issued++) != REDIS_OK)
				return -1;
		}
		if (rb_take(b, done++, st) < 0)
			return -1;
	}
	return 0;
}

static int rb_set(struct rbench *b, const char *key, size_t klen, const void *v, size_t vlen)
{
	redisReply *r = redisCommand(b->c, "SET %b %b", key, klen, v, vlen);
	int ok = r && r->type == REDIS_REPLY_STATUS;

	freeReplyObject(r);
	return ok ? 0 : -1;
}

/* GET needs its keys, LARGE_GET its object, stored before measuring. */
static int rb_preload(struct rbench *b)
{
	unsigned i;

	if (b->o.op == BENCH_LARGE_GET)
		return rb_set(b, b->big_key, strlen(b->big_key), b->object, b->o.size);
	if (b->o.op != BENCH_GET)
		return 0;
	for (i = 0; i < b->o.keys; i++)
		if (rb_set(b, b->keys[i], BENCH_KEY_LEN, rb_value(b, i), b->o.size) < 0)
			return -1;
	return 0;
}

/* After PUTs: every key written must read back as its value. */
static int rb_verify_puts(struct rbench *b, uint64_t written)
{
	unsigned i;

	for (i = 0; bench_is_put(b->o.op) && i < b->o.keys && i < written; i++) {
		redisReply *r = redisCommand(b->c, "GET %b", b->keys[i], (size_t)BENCH_KEY_LEN);
		int ok = r && r->type == REDIS_REPLY_STRING && r->len == b->o.size &&
			 memcmp(r->str, rb_value(b, i), b->o.size) == 0;

		freeReplyObject(r);
		if (!ok) {
			fprintf(stderr, "redis_client: %s does not read back\n", b->keys[i]);
			return -1;
		}
	}
	return 0;
}

static int rb_connect(struct rbench *b)
{
	struct timeval tv = { 5, 0 };

	b->c = redisConnectWithTimeout(b->o.host, b->o.port, tv);
	if (!b->c || b->c->err) {
		fprintf(stderr, "redis_client: connect %s:%d: %s\n", b->o.host, b->o.port,
			b->c ? b->c->errstr : "out of memory");
		return -1;
	}
	/* A hung server must not hang the benchmark. */
	return redisSetTimeout(b->c, tv) == REDIS_OK ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct rbench b;
	struct lat_stats st;
	int rc;

	memset(&b, 0, sizeof(b));
	if (bench_parse_args(argc, argv, &b.o, "redis") < 0 || lat_init(&st, b.o.n) < 0)
		return 2;
	if (rb_make_expected(&b) < 0 || rb_connect(&b) < 0 || rb_preload(&b) < 0) {
		fprintf(stderr, "redis_client: setup failed\n");
		return 1;
	}
	if (rb_run(&b, b.o.warmup, NULL) < 0 || b.failures) {
		fprintf(stderr, "redis_client: warm-up failed\n");
		return 1;
	}
	lat_begin(&st);
	rc = rb_run(&b, b.o.n, &st);
	lat_end(&st);
	st.failures = b.failures + (rc < 0) +
		      (rb_verify_puts(&b, b.o.warmup > b.o.n ? b.o.warmup : b.o.n) < 0);
	lat_print_json(stdout, &st, b.o.system, b.o.op_name, b.o.size, b.o.window);
	redisFree(b.c);
	lat_free(&st);
	return st.failures ? 1 : 0;
}
