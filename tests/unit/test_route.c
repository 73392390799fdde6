/* test_route.c - agent/route.h, the rendezvous hashing that places keys on an
 * agent's servers: keys spread evenly over 3, 4 and 8 servers; removing a
 * server moves exactly the keys it owned, adding one moves only the keys it
 * now wins; the pick depends on the servers' names, never on their order;
 * and the hash is pinned, since agents (and tests) that name the same
 * servers must route every key alike, version after version.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/route.h"
#include "check.h"

#define NKEYS 100000u
#define MAXS  8u

static const char *const names[MAXS] = {
	"127.0.0.1:7471", "127.0.0.1:7473", "127.0.0.1:7475",	"10.0.0.7:7471",
	"[::1]:7471",	  "rdmem-a.lan",    "rdmem-b.lan:9000", "192.168.1.20:12000",
};

/* The i-th test key: short, varied, like real ones ("user:1234:session"). */
static size_t key_of(uint32_t i, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "%s:%u:%s", i % 3 ? "user" : "img", i, i % 2 ? "s" : "profile");

	return (size_t)n;
}

static uint64_t key_hash(uint32_t i)
{
	char k[64];
	size_t n = key_of(i, k, sizeof(k));

	return rdmem_route_key_hash(k, n);
}

static void seeds_of(const char *const *list, uint32_t n, uint64_t *seeds)
{
	uint32_t i;

	for (i = 0; i < n; i++)
		seeds[i] = rdmem_route_server_seed(list[i]);
}

/* Which name key i goes to among list[0..n). */
static const char *owner(const char *const *list, uint32_t n, uint64_t kh)
{
	uint64_t seeds[MAXS];

	seeds_of(list, n, seeds);
	return list[rdmem_route_pick(seeds, n, kh)];
}

static void check_even(uint32_t n)
{
	uint64_t seeds[MAXS];
	uint32_t count[MAXS] = { 0 }, i;
	double even = (double)NKEYS / n, worst = 0;

	seeds_of(names, n, seeds);
	for (i = 0; i < NKEYS; i++) {
		uint32_t s = rdmem_route_pick(seeds, n, key_hash(i));

		REQUIRE(s < n);
		count[s]++;
	}
	for (i = 0; i < n; i++) {
		double dev = (count[i] - even) / even;

		if (dev < 0)
			dev = -dev;
		if (dev > worst)
			worst = dev;
		/* Binomial spread is ~1% of even at n = 8 for 100k keys: 4% is
		 * 4 sigma, and the keys are fixed, so this never flakes. */
		CHECK(dev < 0.04);
		if (dev >= 0.04)
			fprintf(stderr, "  %u servers: server %u has %u keys, even is %.0f\n", n, i,
				count[i], even);
	}
	printf("# %u servers, %u keys: worst server %.2f%% off even\n", n, NKEYS, worst * 100);
}

static void test_even_over_3_4_8(void)
{
	check_even(3);
	check_even(4);
	check_even(8);
}

/* Removing one of 4 servers: its keys (about a quarter) move, no other does. */
static void test_remove_moves_only_its_keys(void)
{
	const char *const after[3] = { names[0], names[1], names[3] }; /* names[2] gone */
	uint32_t i, moved = 0, others_moved = 0, owned = 0;

	for (i = 0; i < NKEYS; i++) {
		uint64_t kh = key_hash(i);
		const char *was = owner(names, 4, kh), *now = owner(after, 3, kh);

		owned += was == names[2];
		if (was != now) {
			moved++;
			others_moved += was != names[2];
		}
		/* Every key of the removed server moved somewhere left. */
		if (was == names[2])
			CHECK(now != names[2]);
	}
	CHECK_EQ(others_moved, 0);
	CHECK_EQ(moved, owned);
	printf("# 4 -> 3 servers: %.2f%% of keys moved (expected ~25%%)\n", 100.0 * moved / NKEYS);
	CHECK(moved > NKEYS * 22 / 100 && moved < NKEYS * 28 / 100);
}

/* Adding a 5th: about a fifth of the keys move, every one to the new server. */
static void test_add_moves_only_to_new(void)
{
	const char *const before[4] = { names[0], names[1], names[2], names[3] };
	const char *const after[5] = { names[0], names[1], names[2], names[3], names[4] };
	uint32_t i, moved = 0, elsewhere = 0;

	for (i = 0; i < NKEYS; i++) {
		uint64_t kh = key_hash(i);
		const char *was = owner(before, 4, kh), *now = owner(after, 5, kh);

		if (was != now) {
			moved++;
			elsewhere += now != names[4];
		}
	}
	CHECK_EQ(elsewhere, 0);
	printf("# 4 -> 5 servers: %.2f%% of keys moved (expected ~20%%), all to the new one\n",
	       100.0 * moved / NKEYS);
	CHECK(moved > NKEYS * 17 / 100 && moved < NKEYS * 23 / 100);
}

/* The same names listed in any order pick the same name for every key. */
static void test_order_independent(void)
{
	unsigned seed = check_seed("permutations", 1234);
	const char *perm[MAXS];
	uint32_t p, i, n, differ = 0;

	for (n = 2; n <= MAXS; n++) {
		for (p = 0; p < 8; p++) {
			uint32_t j;

			memcpy(perm, names, sizeof(perm));
			for (j = n - 1; j > 0; j--) { /* Fisher-Yates over the first n */
				uint32_t k = (uint32_t)rand_r(&seed) % (j + 1);
				const char *t = perm[j];

				perm[j] = perm[k];
				perm[k] = t;
			}
			for (i = 0; i < 20000; i++) {
				uint64_t kh = key_hash(i * 7 + p);

				differ += strcmp(owner(names, n, kh), owner(perm, n, kh)) != 0;
			}
		}
	}
	CHECK_EQ(differ, 0);
	/* Reversed, with a fresh copy of each name (strings, not pointers, count). */
	{
		char copies[4][32];
		const char *rev[4];
		uint64_t a[4], b[4];

		for (i = 0; i < 4; i++) {
			snprintf(copies[i], sizeof(copies[i]), "%s", names[3 - i]);
			rev[i] = copies[i];
		}
		seeds_of(names, 4, a);
		seeds_of(rev, 4, b);
		for (i = 0; i < 10000; i++) {
			uint64_t kh = key_hash(i);

			CHECK_EQ(rdmem_route_pick(a, 4, kh), 3 - rdmem_route_pick(b, 4, kh));
		}
	}
}

/* The same key and list give the same server, call after call. */
static void test_deterministic(void)
{
	uint64_t seeds[MAXS], again[MAXS];
	uint32_t i, diff = 0;

	seeds_of(names, MAXS, seeds);
	seeds_of(names, MAXS, again);
	CHECK(memcmp(seeds, again, sizeof(seeds)) == 0);
	for (i = 0; i < 10000; i++) {
		uint64_t kh = key_hash(i);

		diff += kh != key_hash(i);
		diff += rdmem_route_pick(seeds, MAXS, kh) != rdmem_route_pick(again, MAXS, kh);
	}
	CHECK_EQ(diff, 0);
	/* One server takes everything; the empty key (PING, ECHO) has a home. */
	CHECK_EQ(rdmem_route_pick(seeds, 1, key_hash(5)), 0);
	CHECK_EQ(rdmem_route_key_hash("", 0), rdmem_route_key_hash(NULL, 0));
	CHECK(rdmem_route_pick(seeds, 3, rdmem_route_key_hash("", 0)) < 3);
	/* Distinct names and keys hash apart: a seed is the whole name, a key
	 * hash covers every byte and the length. */
	CHECK(rdmem_route_server_seed("127.0.0.1:7471") !=
	      rdmem_route_server_seed("127.0.0.1:7473"));
	CHECK(rdmem_route_server_seed("127.0.0.1") != rdmem_route_server_seed("127.0.0.1:7471"));
	CHECK(rdmem_route_key_hash("ab", 2) != rdmem_route_key_hash("ba", 2));
	CHECK(rdmem_route_key_hash("a\0", 2) != rdmem_route_key_hash("a", 1));
	{
		uint8_t big[256];

		memset(big, 'x', sizeof(big));
		for (i = 0; i < sizeof(big); i++) {
			uint64_t h0 = rdmem_route_key_hash(big, sizeof(big));

			big[i] ^= 1;
			diff += rdmem_route_key_hash(big, sizeof(big)) == h0;
			big[i] ^= 1;
		}
		CHECK_EQ(diff, 0);
	}
}

/*
 * Known answers. Two agents (or an agent and a client predicting it, like
 * test_multi_server) that list the same servers must send every key to the
 * same one: a change to the hash re-homes about every key of a deployment
 * whose agents upgrade one at a time. Change these only on purpose.
 */
static void test_pinned_values(void)
{
	static const char *const three[3] = { "127.0.0.1:7471", "127.0.0.1:7473",
					      "127.0.0.1:7475" };
	uint64_t seeds[3];

	CHECK(rdmem_route_key_hash("", 0) == 0xefd01f60ba992926ull);
	CHECK(rdmem_route_key_hash("a", 1) == 0x25ad9d1b70de62d1ull);
	CHECK(rdmem_route_server_seed("127.0.0.1:7471") == 0x6290943a558e02ccull);
	seeds_of(three, 3, seeds);
	CHECK_EQ(rdmem_route_pick(seeds, 3, rdmem_route_key_hash("user:1", 6)), 1);
	CHECK_EQ(rdmem_route_pick(seeds, 3, rdmem_route_key_hash("user:3", 6)), 0);
	CHECK_EQ(rdmem_route_pick(seeds, 3, rdmem_route_key_hash("user:6", 6)), 2);
	CHECK_EQ(rdmem_route_pick(seeds, 3, rdmem_route_key_hash("1042", 4)), 2);
	CHECK_EQ(rdmem_route_pick(seeds, 3, rdmem_route_key_hash("", 0)), 1);
}

int main(void)
{
	RUN(test_even_over_3_4_8);
	RUN(test_remove_moves_only_its_keys);
	RUN(test_add_moves_only_to_new);
	RUN(test_order_independent);
	RUN(test_deterministic);
	RUN(test_pinned_values);
	return check_done();
}
