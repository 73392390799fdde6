/* test_siphash.c - server/siphash.h computes SipHash.
 *
 * The same code, with its rounds as parameters, is checked two ways:
 *   as SipHash-2-4 against libsodium's crypto_shorthash (the reference the
 *     store used before), for every length 0-64 (every tail length, one to
 *     eight words) under 50 random keys;
 *   as SipHash-1-3, what the store uses, against values CPython 3.11
 *     computed (hash() of bytes is SipHash-1-3 there, sys.hash_info), under
 *     the all-zero key (PYTHONHASHSEED=0) and under a random one (read from
 *     _Py_HashSecret with ctypes), on 2026-12-07.
 * And the store's hash spreads keys: 4,096 keys that differ in one
 * character fill 4,096 buckets with no chain longer than 8 (test_kv runs
 * the flooding attack itself).
 */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/siphash.h"
#include "tests/check.h"

static void test_sip24_matches_libsodium(void)
{
	uint8_t key[RDMEM_SIPHASH_KEY_BYTES], in[64], out[crypto_shorthash_BYTES];
	unsigned k, n, bad = 0, cases = 0;

	REQUIRE(sodium_init() >= 0);
	randombytes_buf(in, sizeof(in));
	for (k = 0; k < 50; k++) {
		randombytes_buf(key, sizeof(key));
		for (n = 0; n <= sizeof(in); n++) {
			uint64_t want;

			crypto_shorthash(out, in, n, key);
			memcpy(&want, out, sizeof(want));
			want = le64toh(want); /* libsodium stores it little-endian */
			bad += rdmem_siphash_cd(key, in, n, 2, 4) != want;
			cases++;
		}
	}
	printf("# SipHash-2-4 against libsodium: %u of %u differ\n", bad, cases);
	CHECK_EQ(bad, 0);
}

static const char *const kat_in[] = { "a", "abcdefg", "abcdefgh", "key:00000001",
				      "0123456789abcdef0123456789abcdef!" };
static const uint64_t kat_zero[] = { 4644417185603328019ull, 7904145750247929094ull,
				     4574395652268504554ull, 10583772951641554570ull,
				     17689447155625615483ull };
static const uint8_t kat_key[RDMEM_SIPHASH_KEY_BYTES] = { 0xf1, 0xef, 0xea, 0x48, 0x0c, 0xc6,
							  0x83, 0xb7, 0xb3, 0x2e, 0xd3, 0xaa,
							  0x67, 0x89, 0xe2, 0x89 };
static const uint64_t kat_keyed[] = { 12110062573281216736ull, 15495351309957964880ull,
				      1593310533337983682ull, 9139165997771678166ull,
				      17296136601075223389ull };

static void test_sip13_matches_cpython(void)
{
	static const uint8_t zero[RDMEM_SIPHASH_KEY_BYTES];
	size_t i;

	for (i = 0; i < sizeof(kat_in) / sizeof(kat_in[0]); i++) {
		CHECK_EQ(rdmem_siphash13(zero, kat_in[i], strlen(kat_in[i])), kat_zero[i]);
		CHECK_EQ(rdmem_siphash13(kat_key, kat_in[i], strlen(kat_in[i])), kat_keyed[i]);
	}
	/* Not SipHash-2-4: the store's hash really changed. */
	CHECK(rdmem_siphash_cd(zero, "a", 1, 2, 4) != kat_zero[0]);
}

static void test_sip13_spreads_keys(void)
{
	static unsigned chain[4096];
	char key[32];
	unsigned i, longest = 0;

	for (i = 0; i < 4096; i++) {
		unsigned b;

		snprintf(key, sizeof(key), "user:%08u", i);
		b = (unsigned)(rdmem_siphash13(kat_key, key, strlen(key)) & 4095);
		if (++chain[b] > longest)
			longest = chain[b];
	}
	printf("# 4,096 keys in 4,096 buckets: longest chain %u\n", longest);
	CHECK(longest <= 8); /* fixed key and keys: the same 7 every run */
}

int main(void)
{
	RUN(test_sip24_matches_libsodium);
	RUN(test_sip13_matches_cpython);
	RUN(test_sip13_spreads_keys);
	return check_done();
}
