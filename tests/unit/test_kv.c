/* test_kv.c - the sharded KV store: semantics, caps, growth, consistent
 * multi-key reads, and threads racing put/get/del on shared keys with
 * self-describing values, so a torn or mixed-up value is caught. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdmem/wire.h"
#include "server/kv.h"
#include "server/siphash.h"
#include "tests/check.h"

#define MAXV (64u << 10)

struct copy_out {
	uint8_t *buf;
	uint32_t len;
	int found;
};

static int copy_one(void *ctx, const struct rdmem_kv_ref *refs, uint32_t n)
{
	struct copy_out *o = ctx;

	(void)n;
	o->found = refs[0].val != NULL;
	o->len = refs[0].len;
	if (o->found)
		memcpy(o->buf, refs[0].val, refs[0].len);
	return 0;
}

static int get(struct rdmem_kv *kv, const char *key, uint8_t *buf, uint32_t *len)
{
	struct rdmem_kv_key k = { (const uint8_t *)key, (uint32_t)strlen(key) };
	struct rdmem_kv_ref ref;
	struct copy_out o = { buf, 0, 0 };
	int ret = rdmem_kv_read(kv, &k, 1, &ref, copy_one, &o);

	if (ret < 0)
		return ret;
	*len = o.len;
	return o.found ? 0 : -ENOENT;
}

static int put(struct rdmem_kv *kv, const char *key, const void *v, uint32_t len)
{
	return rdmem_kv_put(kv, (const uint8_t *)key, (uint32_t)strlen(key), v, len);
}

static void test_kv_semantics(void)
{
	struct rdmem_kv *kv;
	uint8_t buf[MAXV], big[MAXV + 1], key[RDMEM_MAX_KEY + 1];
	uint64_t keys, bytes;
	uint32_t len;

	REQUIRE(rdmem_kv_create(8, MAXV, 0, &kv) == 0);
	CHECK_EQ(get(kv, "a", buf, &len), -ENOENT);
	CHECK_EQ(put(kv, "a", "one", 3), 0);
	CHECK(get(kv, "a", buf, &len) == 0 && len == 3 && memcmp(buf, "one", 3) == 0);
	CHECK_EQ(put(kv, "a", "second", 6), 0);
	CHECK(get(kv, "a", buf, &len) == 0 && len == 6 && memcmp(buf, "second", 6) == 0);
	CHECK_EQ(put(kv, "empty", "", 0), 0);
	CHECK(get(kv, "empty", buf, &len) == 0 && len == 0);
	rdmem_kv_usage(kv, &keys, &bytes);
	CHECK(keys == 2 && bytes == 6);
	CHECK_EQ(rdmem_kv_del(kv, (const uint8_t *)"a", 1), 0);
	CHECK_EQ(rdmem_kv_del(kv, (const uint8_t *)"a", 1), -ENOENT);
	CHECK_EQ(get(kv, "a", buf, &len), -ENOENT);

	memset(big, 'b', sizeof(big));
	CHECK_EQ(put(kv, "big", big, MAXV + 1), -E2BIG); /* refused whole, never cut */
	CHECK_EQ(get(kv, "big", buf, &len), -ENOENT);
	CHECK_EQ(put(kv, "big", big, MAXV), 0);
	CHECK(get(kv, "big", buf, &len) == 0 && len == MAXV && memcmp(buf, big, MAXV) == 0);

	memset(key, 'k', sizeof(key));
	CHECK_EQ(rdmem_kv_put(kv, key, RDMEM_MAX_KEY + 1, "v", 1), -EINVAL);
	CHECK_EQ(rdmem_kv_put(kv, key, 0, "v", 1), -EINVAL);
	CHECK_EQ(rdmem_kv_put(kv, key, RDMEM_MAX_KEY, "v", 1), 0);
	/* Keys are bytes: embedded NULs and prefixes are distinct keys. */
	CHECK_EQ(rdmem_kv_put(kv, (const uint8_t *)"x\0y", 3, "1", 1), 0);
	CHECK_EQ(rdmem_kv_put(kv, (const uint8_t *)"x", 1, "2", 1), 0);
	CHECK(get(kv, "x", buf, &len) == 0 && len == 1 && buf[0] == '2');
	CHECK_EQ(rdmem_kv_create(3, MAXV, 0, &(struct rdmem_kv *){ NULL }), -EINVAL);
	rdmem_kv_destroy(kv);
}

static void test_kv_growth(void)
{
	struct rdmem_kv *kv;
	char key[32];
	uint8_t buf[32];
	uint32_t len, i, bad = 0;
	uint64_t keys, bytes;

	REQUIRE(rdmem_kv_create(2, MAXV, 0, &kv) == 0);
	for (i = 0; i < 20000; i++) {
		snprintf(key, sizeof(key), "key-%u", i);
		if (put(kv, key, &i, sizeof(i)))
			bad++;
	}
	for (i = 0; i < 20000; i++) {
		uint32_t v;

		snprintf(key, sizeof(key), "key-%u", i);
		if (get(kv, key, buf, &len) || len != 4 || (memcpy(&v, buf, 4), v != i))
			bad++;
	}
	CHECK_EQ(bad, 0);
	rdmem_kv_usage(kv, &keys, &bytes);
	CHECK(keys == 20000 && bytes == 80000);
	rdmem_kv_destroy(kv);
}

/* The store's hash before it was keyed: FNV-1a and a finalizer, the same
 * in every server, so anyone could search keys for it offline. */
static uint64_t unkeyed_hash(const char *key)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *key; key++) {
		h ^= (uint8_t)*key;
		h *= 0x100000001b3ull;
	}
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h;
}

/* SipHash under a key the attacker knows: the all-zero key, what a store
 * whose random key was lost (calloc'd) would use. */
static uint64_t known_key_hash(const char *key)
{
	static const uint8_t k[RDMEM_SIPHASH_KEY_BYTES];

	return rdmem_siphash13(k, key, strlen(key));
}

#define FLOOD_KEYS	1500
#define FLOOD_MAX_CHAIN 16

/*
 * Hash flooding: FLOOD_KEYS keys a client picked to share one bucket (their
 * hashes agree in the low `bits`: one bucket up to 2^bits buckets), found
 * by trying, as an attacker would, must not build one long chain. With
 * them in one chain every GET of that bucket walks 1500 entries. The
 * store's own hash is keyed with a secret: 1500 keys in >= 2048 buckets
 * give a longest chain of ~6; above 16 happens by chance with a
 * probability far below 1e-9.
 */
static void flood(uint64_t (*attacker_hash)(const char *), unsigned bits, const char *what)
{
	struct rdmem_kv *kv;
	char key[32];
	uint32_t found = 0, tries = 0, longest, bad = 0;

	REQUIRE(rdmem_kv_create(1, MAXV, 0, &kv) == 0);
	while (found < FLOOD_KEYS) {
		snprintf(key, sizeof(key), "flood-%u", tries++);
		if ((attacker_hash(key) & ((1u << bits) - 1)) != 0)
			continue;
		found++;
		bad += put(kv, key, "v", 1) != 0;
	}
	CHECK_EQ(bad, 0);
	longest = rdmem_kv_longest_chain(kv);
	printf("# %u keys sharing a bucket under %s (%u tries): longest chain %u\n", found, what,
	       tries, longest);
	CHECK(longest <= FLOOD_MAX_CHAIN);
	rdmem_kv_destroy(kv);
}

/* Keys for the store's old hash, unkeyed FNV-1a (~16k tries a key). */
static void test_kv_flood(void)
{
	flood(unkeyed_hash, 14, "the old unkeyed hash");
}

/* Keys for SipHash under a key the attacker knows (~4k tries a key): only
 * the store's secret key spreads them. */
static void test_kv_flood_known_key(void)
{
	flood(known_key_hash, 12, "SipHash with a known key");
}

static int collect(void *ctx, const struct rdmem_kv_ref *refs, uint32_t n)
{
	uint32_t *mask = ctx, i;

	for (i = 0; i < n; i++)
		if (refs[i].val && refs[i].len == 1 && refs[i].val[0] == (uint8_t)('0' + i))
			*mask |= 1u << i;
	return 42;
}

static void test_kv_multi_read(void)
{
	struct rdmem_kv *kv;
	struct rdmem_kv_key keys[4] = { { (const uint8_t *)"k0", 2 },
					{ (const uint8_t *)"k1", 2 },
					{ (const uint8_t *)"missing", 7 },
					{ (const uint8_t *)"k3", 2 } };
	struct rdmem_kv_ref refs[4];
	uint32_t mask = 0;

	REQUIRE(rdmem_kv_create(64, MAXV, 0, &kv) == 0);
	put(kv, "k0", "0", 1);
	put(kv, "k1", "1", 1);
	put(kv, "k3", "3", 1);
	CHECK_EQ(rdmem_kv_read(kv, keys, 4, refs, collect, &mask), 42);
	CHECK_EQ(mask, 0xb);
	CHECK(refs[2].val == NULL);
	/* The same key twice locks its shard once (a second rdlock could deadlock). */
	keys[1] = keys[0];
	mask = 0;
	CHECK_EQ(rdmem_kv_read(kv, keys, 2, refs, collect, &mask), 42);
	keys[0].len = 0;
	CHECK_EQ(rdmem_kv_read(kv, keys, 2, refs, collect, &mask), -EINVAL);
	/* One key takes its own path (a GET): the same checks, the same answers. */
	CHECK_EQ(rdmem_kv_read(kv, keys, 1, refs, collect, &mask), -EINVAL);
	keys[0].len = RDMEM_MAX_KEY + 1;
	CHECK_EQ(rdmem_kv_read(kv, keys, 1, refs, collect, &mask), -EINVAL);
	mask = 0;
	CHECK_EQ(rdmem_kv_read(kv, &keys[1], 1, refs, collect, &mask), 42); /* k0 */
	CHECK(mask == 1 && refs[0].len == 1 && refs[0].val[0] == '0');
	CHECK_EQ(rdmem_kv_read(kv, &keys[2], 1, refs, collect, &mask), 42);
	CHECK(refs[0].val == NULL && refs[0].len == 0);
	rdmem_kv_destroy(kv);
}

/* ---- concurrency ---------------------------------------------------------- */

#define THREADS 4
#define OPS	20000
#define NKEYS	48
#define VAL_MAX 3000

struct val_hdr {
	uint32_t key;
	uint32_t len;
	uint32_t seq;
	uint32_t writer;
};

static uint8_t pattern(uint32_t key, uint32_t seq, uint32_t writer, uint32_t i)
{
	return (uint8_t)(key * 131 + seq * 7 + writer * 29 + i);
}

/* small: one size per key, at most 128 B, so a write that finds its key
 * replaces a value of its own size (the store copies those in place). */
static uint32_t make_val(uint8_t *v, uint32_t key, uint32_t seq, uint32_t writer, int small)
{
	struct val_hdr h = { key, sizeof(h) + (small ? 16 * (key % 8) : (seq * 37 + key) % VAL_MAX),
			     seq, writer };
	uint32_t i;

	memcpy(v, &h, sizeof(h));
	for (i = sizeof(h); i < h.len; i++)
		v[i] = pattern(key, seq, writer, i);
	return h.len;
}

/* A value must be exactly what one writer wrote for this key. */
static int val_ok(const uint8_t *v, uint32_t len, uint32_t key)
{
	struct val_hdr h;
	uint32_t i;

	if (len < sizeof(h))
		return 0;
	memcpy(&h, v, sizeof(h));
	if (h.key != key || h.len != len)
		return 0;
	for (i = sizeof(h); i < len; i++)
		if (v[i] != pattern(key, h.seq, h.writer, i))
			return 0;
	return 1;
}

struct worker {
	struct rdmem_kv *kv;
	int small;
	uint32_t id;
	uint32_t torn;
	uint32_t hits;
	uint32_t full; /* PUTs refused by the memory limit */
};

static void *kv_worker(void *arg)
{
	struct worker *w = arg;
	uint8_t *val = malloc(sizeof(struct val_hdr) + VAL_MAX),
		*buf = malloc(sizeof(struct val_hdr) + VAL_MAX);
	uint32_t seed = w->id * 2654435761u + 1, i;

	for (i = 0; i < OPS && val && buf; i++) {
		uint32_t r, key, len;
		char name[16];

		seed = seed * 1103515245u + 12345u;
		r = seed >> 8;
		key = r % NKEYS;
		snprintf(name, sizeof(name), "key%u", key);
		switch ((r >> 8) % 4) {
		case 0:
		case 1:
			if (get(w->kv, name, buf, &len) == 0) {
				w->hits++;
				if (!val_ok(buf, len, key))
					w->torn++;
			}
			break;
		case 2:
			len = make_val(val, key, i, w->id, w->small);
			switch (put(w->kv, name, val, len)) {
			case 0:
				break;
			case -ENOSPC:
				w->full++;
				break;
			default:
				w->torn++;
			}
			break;
		default:
			rdmem_kv_del(w->kv, (const uint8_t *)name, (uint32_t)strlen(name));
		}
	}
	free(val);
	free(buf);
	return NULL;
}

/* max_bytes: the store's memory limit (0: none); with one, PUTs race for
 * the last bytes and the charge must still add up to the entries'. */
static void kv_concurrent(int small, uint64_t max_bytes)
{
	struct rdmem_kv *kv;
	struct worker w[THREADS];
	pthread_t t[THREADS];
	uint32_t i, torn = 0, hits = 0, full = 0;
	uint64_t keys, bytes, limit, charged, refused;

	REQUIRE(rdmem_kv_create(4, MAXV, max_bytes, &kv) == 0); /* few shards: more contention */
	for (i = 0; i < THREADS; i++) {
		w[i] = (struct worker){ kv, small, i, 0, 0, 0 };
		REQUIRE(pthread_create(&t[i], NULL, kv_worker, &w[i]) == 0);
	}
	for (i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		torn += w[i].torn;
		hits += w[i].hits;
		full += w[i].full;
	}
	CHECK_EQ(torn, 0);
	CHECK(hits > 1000); /* the reads really raced with writers */
	/* Quiescent now: the counters must agree with the table. */
	rdmem_kv_usage(kv, &keys, &bytes);
	rdmem_kv_limit_usage(kv, &limit, &charged, &refused);
	CHECK_EQ(limit, max_bytes);
	CHECK_EQ(refused, full);
	CHECK(max_bytes ? full > 100 && charged <= max_bytes : full == 0);
	{
		uint64_t n = 0, b = 0, c = 0;
		uint8_t *buf = malloc(sizeof(struct val_hdr) + VAL_MAX);
		uint32_t len;

		REQUIRE(buf);
		for (i = 0; i < NKEYS; i++) {
			char name[16];

			snprintf(name, sizeof(name), "key%u", i);
			if (get(kv, name, buf, &len) == 0) {
				n++;
				b += len;
				c += rdmem_kv_charge((uint32_t)strlen(name), len);
				CHECK(val_ok(buf, len, i));
			}
		}
		free(buf);
		CHECK_EQ(keys, n);
		CHECK_EQ(bytes, b);
		CHECK_EQ(charged, c);
	}
	rdmem_kv_destroy(kv);
}

static void test_kv_concurrent(void)
{
	kv_concurrent(0, 0);
}

/* The same race under a memory limit below what the keys would hold. */
static void test_kv_concurrent_limited(void)
{
	kv_concurrent(0, 32u << 10);
}

/*
 * --kv-max-bytes: PUTs of new keys fill the store to the last entry that
 * fits and are refused after, changing nothing; a replacement no larger
 * goes through when full, a larger one does not; a DEL makes room.
 */
static void test_kv_memory_limit(void)
{
	const uint64_t max = 64u << 10, one = rdmem_kv_charge(8, 1000);
	const uint32_t freed = (uint32_t)(one - rdmem_kv_charge(8, 10));
	static uint8_t v[4096], buf[4096];
	uint64_t limit, charged, refused;
	struct rdmem_kv *kv;
	uint32_t len, slack;
	char key[16];
	int n = 0;

	REQUIRE(rdmem_kv_create(4, MAXV, max, &kv) == 0);
	memset(v, 'a', sizeof(v));
	do
		snprintf(key, sizeof(key), "k%07d", n);
	while (put(kv, key, v, 1000) == 0 && ++n < 1000);
	CHECK_EQ((uint64_t)n, max / one);
	slack = (uint32_t)(max - (uint64_t)n * one);
	CHECK_EQ(get(kv, key, buf, &len), -ENOENT); /* nothing of the refused PUT stored */
	memset(v, 'b', sizeof(v));
	/* Growing a value by one byte more than is left (one 16-byte step more):
	 * refused, the old one stays. */
	CHECK_EQ(put(kv, "k0000000", v, 1000 + slack + 1), -ENOSPC);
	CHECK(get(kv, "k0000000", buf, &len) == 0 && len == 1000 && buf[0] == 'a');
	CHECK_EQ(put(kv, "k0000000", v, 1000 + slack), 0); /* exactly full */
	CHECK_EQ(put(kv, "k0000001", v, 1000), 0);	   /* same size, full */
	CHECK_EQ(put(kv, "k0000002", v, 10), 0);	   /* smaller: frees `freed` */
	/* Charges go in 16-byte steps: 1000 + freed bytes cost exactly freed more. */
	CHECK_EQ(rdmem_kv_charge(8, 1000 + freed) - one, freed);
	CHECK_EQ(put(kv, "k0000003", v, 1000 + freed + 1), -ENOSPC);
	CHECK(get(kv, "k0000003", buf, &len) == 0 && len == 1000 && buf[0] == 'a');
	CHECK_EQ(put(kv, "k0000003", v, 1000 + freed), 0);
	CHECK_EQ(put(kv, "newkey-1", v, 1), -ENOSPC);
	CHECK_EQ(rdmem_kv_del(kv, (const uint8_t *)"k0000004", 8), 0);
	CHECK_EQ(put(kv, "newkey-1", v, 1000), 0);
	rdmem_kv_limit_usage(kv, &limit, &charged, &refused);
	CHECK_EQ(limit, max);
	CHECK_EQ(charged, max);
	CHECK_EQ(refused, 4);
	rdmem_kv_destroy(kv);
}

/* Same-size small values are overwritten in place: a reader must still see
 * one writer's whole value, never a mix. */
static void test_kv_concurrent_inplace(void)
{
	kv_concurrent(1, 0);
}

int main(void)
{
	RUN(test_kv_semantics);
	RUN(test_kv_growth);
	RUN(test_kv_flood);
	RUN(test_kv_flood_known_key);
	RUN(test_kv_multi_read);
	RUN(test_kv_concurrent);
	RUN(test_kv_concurrent_limited);
	RUN(test_kv_memory_limit);
	RUN(test_kv_concurrent_inplace);
	return check_done();
}
