/* kv.h - the server's key-value store: a sharded hash table shared by every
 * session and path. Values are stored whole (never truncated) up to the
 * configured cap; keys are 1..RDMEM_MAX_KEY bytes of anything.
 */
#ifndef RDMEM_SERVER_KV_H
#define RDMEM_SERVER_KV_H

#include <stdint.h>

struct rdmem_kv;

struct rdmem_kv_key {
	const uint8_t *key;
	uint32_t len;
};

/* One looked-up value, valid only inside the rdmem_kv_read() callback. */
struct rdmem_kv_ref {
	const uint8_t *val; /* NULL when the key is absent */
	uint32_t len;
};

/* Called with every looked-up key resolved and their shards read-locked. */
typedef int (*rdmem_kv_read_fn)(void *ctx, const struct rdmem_kv_ref *refs, uint32_t n);

/*
 * shards: power of two (0 picks the default); max_value: the value cap;
 * max_bytes: the memory entries may hold (rdmem_kv_charge each), 0 for no
 * limit. A PUT that would take the store past it is refused -ENOSPC.
 */
int rdmem_kv_create(unsigned shards, uint32_t max_value, uint64_t max_bytes, struct rdmem_kv **out);
void rdmem_kv_destroy(struct rdmem_kv *kv);

/* What an entry of klen + vlen bytes counts against max_bytes: its allocation. */
uint64_t rdmem_kv_charge(uint32_t klen, uint32_t vlen);

/* 0, -EINVAL (empty or too long key), -E2BIG (value over the cap), -ENOSPC
 * (the store would hold more than max_bytes), -ENOMEM. */
int rdmem_kv_put(struct rdmem_kv *kv, const uint8_t *key, uint32_t klen, const void *val,
		 uint32_t vlen);
/* 0, -ENOENT, -EINVAL. */
int rdmem_kv_del(struct rdmem_kv *kv, const uint8_t *key, uint32_t klen);

/*
 * Looks up n keys as one consistent snapshot and hands them to fn, whose
 * return value is returned. -EINVAL for a bad key (fn is not called).
 */
int rdmem_kv_read(struct rdmem_kv *kv, const struct rdmem_kv_key *keys, uint32_t n,
		  struct rdmem_kv_ref *refs, rdmem_kv_read_fn fn, void *ctx);

/* Live keys and value bytes (approximate while writers run). */
void rdmem_kv_usage(struct rdmem_kv *kv, uint64_t *keys, uint64_t *bytes);
/* The memory limit (0: none), what entries hold against it, PUTs refused by it. */
void rdmem_kv_limit_usage(struct rdmem_kv *kv, uint64_t *max_bytes, uint64_t *charged,
			  uint64_t *refused);
/* The longest bucket chain of any shard: a walk of every entry under each
 * shard's read lock, O(keys) (tests and diagnostics, not a gauge). */
uint32_t rdmem_kv_longest_chain(struct rdmem_kv *kv);

#endif
