/* test_siphash.c - server/siphash.h computes SipHash.
 *
 * The same code, with its rounds as parameters, is checked three ways:
 *   as SipHash-2-4 on the paper's own test vector;
 *   as SipHash-2-4 against libsodium's crypto_shorthash (the reference the
 *     store used before), for every length 0-64 (every tail length, one to
 *     eight words) and 250-300 (the length byte wraps at 256) under 50
 *     random keys (the first differing case is printed);
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

/* The first differing case, so that a failure can be rerun by hand. */
static void report_case(const uint8_t *key, const uint8_t *in, unsigned n)
{
	unsigned i;

	fprintf(stderr, "  differs: key ");
	for (i = 0; i < RDMEM_SIPHASH_KEY_BYTES; i++)
		fprintf(stderr, "%02x", key[i]);
	fprintf(stderr, ", %u bytes ", n);
	for (i = 0; i < n; i++)
		fprintf(stderr, "%02x", in[i]);
	fprintf(stderr, "\n");
}

/* The paper's own vector (SipHash-2-4, appendix A): key 00..0f, the 15
 * bytes 00..0e: a129ca6149be45e5 (as a 64-bit number; e5 45 .. a1 as bytes). */
static void test_sip24_paper_vector(void)
{
	uint8_t key[RDMEM_SIPHASH_KEY_BYTES], in[15];
	unsigned i;

	for (i = 0; i < sizeof(key); i++)
		key[i] = (uint8_t)i;
	for (i = 0; i < sizeof(in); i++)
		in[i] = (uint8_t)i;
	CHECK_EQ(rdmem_siphash_cd(key, in, sizeof(in), 2, 4), 0xa129ca6149be45e5ull);
}

static void test_sip24_matches_libsodium(void)
{
	uint8_t key[RDMEM_SIPHASH_KEY_BYTES], in[300], out[crypto_shorthash_BYTES];
	unsigned k, n, bad = 0, cases = 0;

	REQUIRE(sodium_init() >= 0);
	randombytes_buf(in, sizeof(in));
	for (k = 0; k < 50; k++) {
		randombytes_buf(key, sizeof(key));
		/* Every tail of up to 8 words, and past 255 (the length byte wraps). */
		for (n = 0; n <= sizeof(in); n += n < 64 || n >= 250 ? 1 : 37) {
			uint64_t want;

			crypto_shorthash(out, in, n, key);
			memcpy(&want, out, sizeof(want));
			want = le64toh(want); /* libsodium stores it little-endian */
			if (rdmem_siphash_cd(key, in, n, 2, 4) != want && !bad++)
				report_case(key, in, n);
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
	RUN(test_sip24_paper_vector);
	RUN(test_sip24_matches_libsodium);
	RUN(test_sip13_matches_cpython);
	RUN(test_sip13_spreads_keys);
	return check_done();
}
