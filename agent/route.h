/* route.h - which server a key lives on, when an agent has several:
 * rendezvous (highest-random-weight) hashing. Every server gets a score for
 * the key, a hash of (key, server name); the highest score wins. Removing a
 * server moves only the keys it won (each to its runner-up); adding one
 * moves only the keys it now wins, about 1/n of them. The score depends on
 * the names alone, not on their order, so agents that list the same servers
 * by the same "host:port" names route every key alike.
 * Header-only: the agent and the tests that predict its routing use it.
 */
#ifndef RDMEM_AGENT_ROUTE_H
#define RDMEM_AGENT_ROUTE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Murmur3's 64-bit finalizer: every input bit flips each output bit with
 * probability about 1/2, so scores of one key on two servers are independent. */
static inline uint64_t rdmem_route_mix(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h;
}

/* FNV-1a over the key, then mixed: keys differing in one byte score apart. */
static inline uint64_t rdmem_route_key_hash(const void *key, size_t len)
{
	const uint8_t *p = key;
	uint64_t h = 0xcbf29ce484222325ull;
	size_t i;

	for (i = 0; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return rdmem_route_mix(h ^ len);
}

/* A server's seed: the hash of its name as the agent's server list spells it. */
static inline uint64_t rdmem_route_server_seed(const char *name)
{
	return rdmem_route_key_hash(name, strlen(name));
}

/* The index in seeds[0..n) of the server the key hash goes to (n >= 1).
 * Ties (a 2^-64 event) go to the lower index. */
static inline uint32_t rdmem_route_pick(const uint64_t *seeds, uint32_t n, uint64_t key_hash)
{
	uint64_t best = 0;
	uint32_t i, win = 0;

	for (i = 0; i < n; i++) {
		uint64_t score = rdmem_route_mix(key_hash ^ seeds[i]);

		if (i == 0 || score > best) {
			best = score;
			win = i;
		}
	}
	return win;
}

#endif
