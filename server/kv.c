/* kv.c - sharded hash table behind KV_PUT/GET/DEL/MGET and LARGE_GET of
 * stored values.
 *
 * Each shard is a chained hash table behind a rwlock; a key's shard comes from
 * the high bits of its hash, its bucket from the low bits. The hash is keyed
 * (SipHash-1-3, server/siphash.h, with a random key per store):
 * keys come from clients, and with an unkeyed hash one can compute offline
 * keys that share a bucket and turn every lookup of that bucket into a walk
 * of thousands of entries (hash flooding). test_kv runs that attack with
 * keys found for the old FNV-1a hash and for SipHash under a known key. An
 * entry is one
 * allocation holding key and value. A PUT of a large value builds it outside
 * the lock, so the write lock is held only to swap a pointer; a small value
 * (KV_INPLACE_MAX) that replaces one of its size is copied over it under the
 * write lock, and a small new entry is built under it: no allocation on a
 * steady stream of same-size updates, one lock round trip for an insert.
 *
 * Readers copy values out under the shard's read lock instead of taking a
 * reference count: a GET copies the value exactly once anyway (into the
 * reply slot, object or send buffer), readers of one shard do not block each
 * other, and a refcount would cost two atomic RMWs on a shared line per GET
 * plus deferred frees. Only writers to the same shard wait for a large copy.
 * Multi-key reads lock every shard involved, in ascending order (no lock
 * cycles), so an MGET sees one consistent snapshot and can size its reply
 * before copying.
 */
#include "server/kv.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "rdmem/wire.h"
#include "server/siphash.h"

#define KV_DEFAULT_SHARDS 64u
#define KV_MAX_SHARDS	  1024u
#define KV_MIN_BUCKETS	  64u

/* From this size glibc may serve an allocation with mmap, whole pages. */
#define KV_MMAP_BYTES (128u << 10)

struct kv_entry {
	struct kv_entry *next;
	uint64_t hash;
	uint32_t klen;
	uint32_t vlen;
	uint8_t data[]; /* key, then value */
};

struct kv_shard {
	pthread_rwlock_t lock;
	struct kv_entry **buckets;
	uint32_t nbuckets; /* power of two */
	uint32_t count;
} __attribute__((aligned(64)));

struct rdmem_kv {
	unsigned nshards;
	unsigned shard_bits;
	uint32_t max_value;
	/*
	 * Statistics only: relaxed, nothing is ordered by them. Signed: a DEL may
	 * subtract before the racing PUT of the same key added, for a moment.
	 */
	atomic_int_fast64_t keys;
	atomic_int_fast64_t bytes;
	/*
	 * The memory limit: charged is what entries hold (rdmem_kv_charge),
	 * reserved before an entry goes in (kv_reserve), so committed entries
	 * never hold more than max_bytes. Relaxed: a budget, no data rides on it.
	 */
	uint64_t max_bytes; /* 0: no limit */
	atomic_int_fast64_t charged;
	atomic_uint_fast64_t refused;
	struct kv_shard *shards;
	uint8_t hash_key[RDMEM_SIPHASH_KEY_BYTES]; /* secret, per store */
};

static uint64_t kv_hash(const struct rdmem_kv *kv, const uint8_t *key, uint32_t len)
{
	return rdmem_siphash13(kv->hash_key, key, len);
}

static unsigned kv_shard_of(const struct rdmem_kv *kv, uint64_t hash)
{
	return kv->shard_bits ? (unsigned)(hash >> (64 - kv->shard_bits)) : 0;
}

static int kv_key_ok(uint32_t klen)
{
	return klen > 0 && klen <= RDMEM_MAX_KEY;
}

/*
 * What an entry costs the process, not just its bytes: glibc's chunk (the
 * request plus an 8-byte header, in 16-byte steps, at least 32; page-rounded
 * once mmap serves it) and its share of the bucket arrays (up to two
 * pointers a key). Counting the bytes alone, 4-byte keys with empty values
 * took 2.2x their charge in resident memory: a limit of half the machine
 * ran it out of memory.
 */
uint64_t rdmem_kv_charge(uint32_t klen, uint32_t vlen)
{
	/* 4 KiB here; 64 KiB on some arm64 and ppc64 kernels. Relaxed: racing
	 * first calls store the same value, nothing else rides on it. */
	static _Atomic uint64_t kv_page;
	uint64_t chunk = (sizeof(struct kv_entry) + (uint64_t)klen + vlen + 8 + 15) & ~15ull;
	uint64_t page = atomic_load_explicit(&kv_page, memory_order_relaxed);

	if (!page) {
		page = (uint64_t)sysconf(_SC_PAGESIZE);
		atomic_store_explicit(&kv_page, page, memory_order_relaxed);
	}
	if (chunk < 32)
		chunk = 32;
	else if (chunk >= KV_MMAP_BYTES)
		chunk = (chunk + page - 1) & ~(page - 1);
	return chunk + 2 * sizeof(struct kv_entry *);
}

/* Takes delta bytes of the budget; 0 when they would go past the limit. */
static int kv_reserve(struct rdmem_kv *kv, int64_t delta)
{
	int64_t now = atomic_fetch_add_explicit(&kv->charged, delta, memory_order_relaxed) + delta;

	if (!kv->max_bytes || delta <= 0 || now <= (int64_t)kv->max_bytes)
		return 1;
	/* Two racing PUTs may both give back here: the edge refuses early, never late. */
	atomic_fetch_sub_explicit(&kv->charged, delta, memory_order_relaxed);
	atomic_fetch_add_explicit(&kv->refused, 1, memory_order_relaxed);
	return 0;
}

int rdmem_kv_create(unsigned shards, uint32_t max_value, uint64_t max_bytes, struct rdmem_kv **out)
{
	struct rdmem_kv *kv;
	unsigned i;

	if (!shards)
		shards = KV_DEFAULT_SHARDS;
	if (shards > KV_MAX_SHARDS || (shards & (shards - 1)))
		return -EINVAL;
	if (sodium_init() < 0) /* randombytes_buf's source */
		return -EIO;
	kv = calloc(1, sizeof(*kv));
	if (!kv)
		return -ENOMEM;
	randombytes_buf(kv->hash_key, sizeof(kv->hash_key));
	kv->shards = aligned_alloc(64, sizeof(*kv->shards) * shards);
	if (!kv->shards) {
		free(kv);
		return -ENOMEM;
	}
	kv->nshards = shards;
	kv->max_value = max_value;
	kv->max_bytes = max_bytes > INT64_MAX ? INT64_MAX : max_bytes;
	while ((1u << kv->shard_bits) < shards)
		kv->shard_bits++;
	for (i = 0; i < shards; i++) {
		struct kv_shard *s = &kv->shards[i];

		memset(s, 0, sizeof(*s));
		pthread_rwlock_init(&s->lock, NULL);
		s->nbuckets = KV_MIN_BUCKETS;
		s->buckets = calloc(s->nbuckets, sizeof(*s->buckets));
		if (!s->buckets) {
			kv->nshards = i + 1;
			rdmem_kv_destroy(kv);
			return -ENOMEM;
		}
	}
	*out = kv;
	return 0;
}

void rdmem_kv_destroy(struct rdmem_kv *kv)
{
	unsigned i, b;

	if (!kv)
		return;
	for (i = 0; i < kv->nshards; i++) {
		struct kv_shard *s = &kv->shards[i];

		for (b = 0; s->buckets && b < s->nbuckets; b++) {
			struct kv_entry *e = s->buckets[b], *next;

			for (; e; e = next) {
				next = e->next;
				free(e);
			}
		}
		free(s->buckets);
		pthread_rwlock_destroy(&s->lock);
	}
	free(kv->shards);
	free(kv);
}

/* Returns the link that points at the key's entry (or at the chain's NULL). */
static struct kv_entry **kv_find(struct kv_shard *s, uint64_t hash, const uint8_t *key,
				 uint32_t klen)
{
	struct kv_entry **link = &s->buckets[hash & (s->nbuckets - 1)];

	for (; *link; link = &(*link)->next) {
		struct kv_entry *e = *link;

		if (e->hash == hash && e->klen == klen && memcmp(e->data, key, klen) == 0)
			break;
	}
	return link;
}

/* Doubles the bucket array; on allocation failure chains just grow longer. */
static void kv_grow(struct kv_shard *s)
{
	uint32_t n = s->nbuckets * 2, b;
	struct kv_entry **nb = calloc(n, sizeof(*nb));

	if (!nb)
		return;
	for (b = 0; b < s->nbuckets; b++) {
		struct kv_entry *e = s->buckets[b], *next;

		for (; e; e = next) {
			next = e->next;
			e->next = nb[e->hash & (n - 1)];
			nb[e->hash & (n - 1)] = e;
		}
	}
	free(s->buckets);
	s->buckets = nb;
	s->nbuckets = n;
}

#define KV_INPLACE_MAX 256u /* values this small are replaced in place */

static struct kv_entry *kv_entry_new(uint64_t hash, const uint8_t *key, uint32_t klen,
				     const void *val, uint32_t vlen)
{
	struct kv_entry *e = malloc(sizeof(*e) + klen + vlen);

	if (!e)
		return NULL;
	e->hash = hash;
	e->klen = klen;
	e->vlen = vlen;
	memcpy(e->data, key, klen);
	if (vlen)
		memcpy(e->data + klen, val, vlen);
	return e;
}

int rdmem_kv_put(struct rdmem_kv *kv, const uint8_t *key, uint32_t klen, const void *val,
		 uint32_t vlen)
{
	struct kv_entry *e = NULL, *old, **link;
	int small = vlen <= KV_INPLACE_MAX;
	struct kv_shard *s;
	uint64_t hash;
	int64_t delta;

	if (!kv_key_ok(klen))
		return -EINVAL;
	if (vlen > kv->max_value)
		return -E2BIG;
	hash = kv_hash(kv, key, klen);
	s = &kv->shards[kv_shard_of(kv, hash)];
	if (!small && !(e = kv_entry_new(hash, key, klen, val, vlen)))
		return -ENOMEM;

	pthread_rwlock_wrlock(&s->lock);
	link = kv_find(s, hash, key, klen);
	old = *link;
	if (small && old && old->vlen == vlen) {
		/* No reader is inside: they copy out under the read lock. */
		memcpy(old->data + klen, val, vlen);
		pthread_rwlock_unlock(&s->lock);
		return 0;
	}
	/* Under the lock: old is the entry this one replaces, so a PUT that
	 * shrinks or keeps a value is never refused, full or not. */
	delta = (int64_t)rdmem_kv_charge(klen, vlen) -
		(old ? (int64_t)rdmem_kv_charge(old->klen, old->vlen) : 0);
	if (!kv_reserve(kv, delta)) {
		pthread_rwlock_unlock(&s->lock);
		free(e);
		return -ENOSPC;
	}
	if (small && !(e = kv_entry_new(hash, key, klen, val, vlen))) {
		pthread_rwlock_unlock(&s->lock);
		atomic_fetch_sub_explicit(&kv->charged, delta, memory_order_relaxed);
		return -ENOMEM;
	}
	e->next = old ? old->next : NULL;
	*link = e;
	if (!old && ++s->count > s->nbuckets)
		kv_grow(s);
	pthread_rwlock_unlock(&s->lock);

	if (old) {
		atomic_fetch_sub_explicit(&kv->bytes, (int64_t)old->vlen, memory_order_relaxed);
		free(old);
	} else {
		atomic_fetch_add_explicit(&kv->keys, 1, memory_order_relaxed);
	}
	atomic_fetch_add_explicit(&kv->bytes, vlen, memory_order_relaxed);
	return 0;
}

int rdmem_kv_del(struct rdmem_kv *kv, const uint8_t *key, uint32_t klen)
{
	struct kv_entry *e, **link;
	struct kv_shard *s;
	uint64_t hash;

	if (!kv_key_ok(klen))
		return -EINVAL;
	hash = kv_hash(kv, key, klen);
	s = &kv->shards[kv_shard_of(kv, hash)];

	pthread_rwlock_wrlock(&s->lock);
	link = kv_find(s, hash, key, klen);
	e = *link;
	if (e) {
		*link = e->next;
		s->count--;
	}
	pthread_rwlock_unlock(&s->lock);

	if (!e)
		return -ENOENT;
	atomic_fetch_sub_explicit(&kv->keys, 1, memory_order_relaxed);
	atomic_fetch_sub_explicit(&kv->bytes, (int64_t)e->vlen, memory_order_relaxed);
	atomic_fetch_sub_explicit(&kv->charged, (int64_t)rdmem_kv_charge(e->klen, e->vlen),
				  memory_order_relaxed);
	free(e);
	return 0;
}

/* Walks the set bits word by word, in ascending shard order (the order every
 * multi-shard locker takes, so two never deadlock): testing each of up to
 * 1,024 shards cost a GET ~1,400 instructions, a third of the server's. */
static void kv_lock_set(struct rdmem_kv *kv, const uint64_t *set, int lock)
{
	unsigned w;

	for (w = 0; w < (kv->nshards + 63) / 64; w++) {
		uint64_t bits = set[w];

		while (bits) {
			struct kv_shard *s = &kv->shards[w * 64 + (unsigned)__builtin_ctzll(bits)];

			if (lock)
				pthread_rwlock_rdlock(&s->lock);
			else
				pthread_rwlock_unlock(&s->lock);
			bits &= bits - 1;
		}
	}
}

/* One key (a GET): one hash and one shard lock, no shard set to build and
 * walk (that, and hashing the key twice, cost a GET ~250 instructions). */
static int kv_read_one(struct rdmem_kv *kv, const struct rdmem_kv_key *key,
		       struct rdmem_kv_ref *ref, rdmem_kv_read_fn fn, void *ctx)
{
	uint64_t hash = kv_hash(kv, key->key, key->len);
	struct kv_shard *s = &kv->shards[kv_shard_of(kv, hash)];
	struct kv_entry *e;
	int ret;

	pthread_rwlock_rdlock(&s->lock);
	e = *kv_find(s, hash, key->key, key->len);
	ref->val = e ? e->data + e->klen : NULL;
	ref->len = e ? e->vlen : 0;
	ret = fn(ctx, ref, 1);
	pthread_rwlock_unlock(&s->lock);
	return ret;
}

/* Many keys (an MGET): every shard involved locked at once, in order. */
static int kv_read_many(struct rdmem_kv *kv, const struct rdmem_kv_key *keys, uint32_t n,
			struct rdmem_kv_ref *refs, rdmem_kv_read_fn fn, void *ctx)
{
	uint64_t set[KV_MAX_SHARDS / 64] = { 0 };
	uint32_t i;
	int ret;

	for (i = 0; i < n; i++) {
		unsigned sh;

		if (!kv_key_ok(keys[i].len))
			return -EINVAL;
		sh = kv_shard_of(kv, kv_hash(kv, keys[i].key, keys[i].len));
		set[sh / 64] |= 1ull << (sh % 64);
	}
	kv_lock_set(kv, set, 1);
	for (i = 0; i < n; i++) {
		uint64_t hash = kv_hash(kv, keys[i].key, keys[i].len);
		struct kv_shard *s = &kv->shards[kv_shard_of(kv, hash)];
		struct kv_entry *e = *kv_find(s, hash, keys[i].key, keys[i].len);

		refs[i].val = e ? e->data + e->klen : NULL;
		refs[i].len = e ? e->vlen : 0;
	}
	ret = fn(ctx, refs, n);
	kv_lock_set(kv, set, 0);
	return ret;
}

/* A GET does not pay for an MGET's shard set (zeroing it alone cost 21
 * instructions a call). */
int rdmem_kv_read(struct rdmem_kv *kv, const struct rdmem_kv_key *keys, uint32_t n,
		  struct rdmem_kv_ref *refs, rdmem_kv_read_fn fn, void *ctx)
{
	if (n == 1)
		return kv_key_ok(keys[0].len) ? kv_read_one(kv, keys, refs, fn, ctx) : -EINVAL;
	return kv_read_many(kv, keys, n, refs, fn, ctx);
}

void rdmem_kv_limit_usage(struct rdmem_kv *kv, uint64_t *max_bytes, uint64_t *charged,
			  uint64_t *refused)
{
	int64_t c = atomic_load_explicit(&kv->charged, memory_order_relaxed);

	*max_bytes = kv->max_bytes;
	*charged = c > 0 ? (uint64_t)c : 0;
	*refused = atomic_load_explicit(&kv->refused, memory_order_relaxed);
}

void rdmem_kv_usage(struct rdmem_kv *kv, uint64_t *keys, uint64_t *bytes)
{
	int64_t k = atomic_load_explicit(&kv->keys, memory_order_relaxed);
	int64_t b = atomic_load_explicit(&kv->bytes, memory_order_relaxed);

	*keys = k > 0 ? (uint64_t)k : 0;
	*bytes = b > 0 ? (uint64_t)b : 0;
}

uint32_t rdmem_kv_longest_chain(struct rdmem_kv *kv)
{
	uint32_t longest = 0, b, n;
	unsigned i;

	for (i = 0; i < kv->nshards; i++) {
		struct kv_shard *s = &kv->shards[i];

		pthread_rwlock_rdlock(&s->lock);
		for (b = 0; b < s->nbuckets; b++) {
			const struct kv_entry *e = s->buckets[b];

			for (n = 0; e; e = e->next)
				n++;
			longest = n > longest ? n : longest;
		}
		pthread_rwlock_unlock(&s->lock);
	}
	return longest;
}
