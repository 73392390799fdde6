/* siphash.h - SipHash (Aumasson and Bernstein), the keyed hash of the
 * server's key-value store: keys come from clients, and a hash they could
 * compute offline would let them put thousands of keys in one bucket (hash
 * flooding, test_kv).
 *
 * The store uses SipHash-1-3: one compression round a word and three to
 * finish, as CPython (3.11 on) and Rust's HashMap use for the same job;
 * SipHash-2-4 (libsodium's crypto_shorthash, which the store used before)
 * cost 189 instructions a GET of the benchmark's 16-byte keys (callgrind),
 * this SipHash-1-3 139. The rounds are parameters so that test_siphash
 * checks the code as SipHash-2-4 (the paper's vector, and libsodium's for
 * lengths 0-64 and 250-300 under random keys) and as SipHash-1-3 (values
 * CPython computed).
 */
#ifndef RDMEM_SERVER_SIPHASH_H
#define RDMEM_SERVER_SIPHASH_H

#include <endian.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define RDMEM_SIPHASH_KEY_BYTES 16

static inline uint64_t rdmem_sip_rotl(uint64_t x, int b)
{
	return (x << b) | (x >> (64 - b));
}

/* Little-endian on the wire of the algorithm, whatever the host's order. */
static inline uint64_t rdmem_sip_load(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

static inline __attribute__((always_inline)) void rdmem_sip_rounds(uint64_t v[4], int n)
{
	while (n--) {
		v[0] += v[1];
		v[1] = rdmem_sip_rotl(v[1], 13) ^ v[0];
		v[0] = rdmem_sip_rotl(v[0], 32);
		v[2] += v[3];
		v[3] = rdmem_sip_rotl(v[3], 16) ^ v[2];
		v[0] += v[3];
		v[3] = rdmem_sip_rotl(v[3], 21) ^ v[0];
		v[2] += v[1];
		v[1] = rdmem_sip_rotl(v[1], 17) ^ v[2];
		v[2] = rdmem_sip_rotl(v[2], 32);
	}
}

/* SipHash-c-d of len bytes at in under a 16-byte key. */
static inline __attribute__((always_inline)) uint64_t
rdmem_siphash_cd(const uint8_t *key, const void *in, size_t len, int c, int d)
{
	uint64_t k0 = rdmem_sip_load(key), k1 = rdmem_sip_load(key + 8);
	uint64_t v[4] = { k0 ^ 0x736f6d6570736575ull, k1 ^ 0x646f72616e646f6dull,
			  k0 ^ 0x6c7967656e657261ull, k1 ^ 0x7465646279746573ull };
	const uint8_t *p = in, *end = p + (len & ~(size_t)7);
	uint64_t last = (uint64_t)len << 56, m;

	for (; p != end; p += 8) {
		m = rdmem_sip_load(p);
		v[3] ^= m;
		rdmem_sip_rounds(v, c);
		v[0] ^= m;
	}
	switch (len & 7) { /* the tail, little-endian, without a loop */
	case 7:
		last |= (uint64_t)p[6] << 48;
		/* fall through */
	case 6:
		last |= (uint64_t)p[5] << 40;
		/* fall through */
	case 5:
		last |= (uint64_t)p[4] << 32;
		/* fall through */
	case 4:
		last |= (uint64_t)p[3] << 24;
		/* fall through */
	case 3:
		last |= (uint64_t)p[2] << 16;
		/* fall through */
	case 2:
		last |= (uint64_t)p[1] << 8;
		/* fall through */
	case 1:
		last |= p[0];
	}
	v[3] ^= last;
	rdmem_sip_rounds(v, c);
	v[0] ^= last;
	v[2] ^= 0xff;
	rdmem_sip_rounds(v, d);
	return v[0] ^ v[1] ^ v[2] ^ v[3];
}

static inline uint64_t rdmem_siphash13(const uint8_t *key, const void *in, size_t len)
{
	return rdmem_siphash_cd(key, in, len, 1, 3);
}

#endif
