/* test_blob.c - the blob codec: ARRAY and PROFILE round trips, and refusal
 * of every truncation and of forged offsets, lengths and counts. */
#include <stdint.h>
#include <string.h>

#include "rdmem/blob.h"
#include "tests/check.h"

static uint8_t blob[4096];

static uint32_t make_array(void)
{
	struct rdmem_blob_writer w;

	if (rdmem_blob_array_begin(&w, blob, sizeof(blob), 4) < 0)
		return 0;
	rdmem_blob_array_set(&w, 0, "alpha", 5, RDMEM_BLOB_PRESENT);
	/* entry 1 left missing */
	rdmem_blob_array_set(&w, 2, "", 0, RDMEM_BLOB_PRESENT); /* present but empty */
	rdmem_blob_array_set(&w, 3, "the fourth value", 16, RDMEM_BLOB_PRESENT);
	return rdmem_blob_finish(&w);
}

static const char *const tags[] = { "rdma", "kernel", "storage" };
static const char *const cnames[] = { "followers", "posts" };
static const uint64_t cvals[] = { 12345, UINT64_MAX };

static int64_t make_profile(void)
{
	struct rdmem_profile_in p = { 1001, "Ada Lovelace", tags, 3, cnames, cvals, 2 };

	return rdmem_blob_profile_encode(&p, blob, sizeof(blob));
}

static void test_array_round_trip(void)
{
	struct rdmem_blob_array a;
	uint32_t len = make_array(), n, f;
	const void *d;

	REQUIRE(len == rdmem_blob_array_size(4, 5 + 16));
	REQUIRE(rdmem_blob_array_open(blob, len, &a) == 0);
	CHECK_EQ(a.count, 4);
	rdmem_blob_array_get(&a, 0, &d, &n, &f);
	CHECK(n == 5 && f == RDMEM_BLOB_PRESENT && memcmp(d, "alpha", 5) == 0);
	rdmem_blob_array_get(&a, 1, &d, &n, &f);
	CHECK(n == 0 && f == 0);
	rdmem_blob_array_get(&a, 2, &d, &n, &f);
	CHECK(n == 0 && f == RDMEM_BLOB_PRESENT);
	rdmem_blob_array_get(&a, 3, &d, &n, &f);
	CHECK(n == 16 && memcmp(d, "the fourth value", 16) == 0);
}

static void test_array_empty_and_full(void)
{
	struct rdmem_blob_writer w;
	struct rdmem_blob_array a;
	uint8_t small[40];

	REQUIRE(rdmem_blob_array_begin(&w, blob, sizeof(blob), 0) == 0);
	CHECK(rdmem_blob_array_open(blob, rdmem_blob_finish(&w), &a) == 0 && a.count == 0);
	/* A writer never overruns its buffer: a value that does not fit is refused. */
	REQUIRE(rdmem_blob_array_begin(&w, small, sizeof(small), 1) == 0);
	CHECK_EQ(rdmem_blob_array_set(&w, 0, "0123456789", 10, RDMEM_BLOB_PRESENT), -E2BIG);
	CHECK_EQ(rdmem_blob_array_begin(&w, small, sizeof(small), 2), -E2BIG);
	CHECK_EQ(rdmem_blob_array_set(&w, 5, "x", 1, 0), -EINVAL);
}

static void test_array_every_truncation_refused(void)
{
	struct rdmem_blob_array a;
	uint32_t len = make_array(), cut;

	REQUIRE(len > 0);
	for (cut = 0; cut < len; cut++) {
		/* The header's total_len still says len: the shorter buffer must be refused. */
		if (rdmem_blob_array_open(blob, cut, &a) == 0) {
			fprintf(stderr, "  truncation to %u of %u accepted\n", cut, len);
			CHECK(0);
		}
		/* Even with total_len forged to match the cut, tables must not leave it. */
		if (cut >= RDMEM_BLOB_HDR) {
			uint8_t copy[4096];

			memcpy(copy, blob, cut);
			rdmem_st32(copy + 8, cut);
			if (cut < rdmem_blob_array_size(4, 21) &&
			    rdmem_blob_array_open(copy, cut, &a) == 0) {
				fprintf(stderr, "  forged truncation to %u accepted\n", cut);
				CHECK(0);
			}
		}
	}
}

static void test_array_forgeries_refused(void)
{
	struct rdmem_blob_array a;
	uint32_t len = make_array();
	uint8_t copy[4096];
	uint8_t *ent0 = copy + RDMEM_BLOB_HDR;

#define FORGED(mutation)                                                                           \
	do {                                                                                       \
		memcpy(copy, blob, len);                                                           \
		mutation;                                                                          \
		CHECK(rdmem_blob_array_open(copy, len, &a) == -EINVAL);                            \
	} while (0)

	FORGED(rdmem_st32(copy, 0x12345678));	      /* magic */
	FORGED(copy[4] = RDMEM_BLOB_PROFILE);	      /* kind */
	FORGED(copy[6] = 9);			      /* version */
	FORGED(rdmem_st32(copy + 8, len + 1));	      /* total_len */
	FORGED(rdmem_st32(copy + 12, 5));	      /* count: table runs into data */
	FORGED(rdmem_st32(copy + 12, 0x10000000));    /* count * 16 overflows 32 bits */
	FORGED(rdmem_st32(copy + 12, UINT32_MAX));    /* count: absurd */
	FORGED(rdmem_st32(ent0, len));		      /* offset past the end */
	FORGED(rdmem_st32(ent0, 0));		      /* offset into the header */
	FORGED(rdmem_st32(ent0, RDMEM_BLOB_HDR + 4)); /* offset into the table */
	FORGED(rdmem_st32(ent0 + 4, len));	      /* length past the end */
	FORGED(rdmem_st32(ent0 + 4, UINT32_MAX));     /* off + len wraps */
	FORGED(rdmem_st32(ent0, UINT32_MAX - 2));     /* off near 4 GiB */
	FORGED(rdmem_st32(ent0 + 8, 0x80));	      /* unknown flag */
#undef FORGED
	/* The untouched blob still opens, so the refusals above were the mutations. */
	CHECK(rdmem_blob_array_open(blob, len, &a) == 0);
}

static void test_profile_round_trip(void)
{
	struct rdmem_profile_view v;
	int64_t len = make_profile();
	const char *s;
	uint32_t n, i;
	uint64_t val;

	REQUIRE(len > 0);
	REQUIRE(rdmem_blob_profile_open(blob, (uint64_t)len, &v) == 0);
	CHECK(v.id == 1001);
	CHECK(v.name_len == 12 && memcmp(v.name, "Ada Lovelace", 12) == 0);
	REQUIRE(v.tag_count == 3 && v.counter_count == 2);
	for (i = 0; i < 3; i++) {
		rdmem_blob_profile_tag(&v, i, &s, &n);
		CHECK(n == strlen(tags[i]) && memcmp(s, tags[i], n) == 0);
	}
	for (i = 0; i < 2; i++) {
		rdmem_blob_profile_counter(&v, i, &s, &n, &val);
		CHECK(n == strlen(cnames[i]) && memcmp(s, cnames[i], n) == 0 && val == cvals[i]);
	}
	CHECK_EQ(rdmem_blob_profile_encode(
		     &(struct rdmem_profile_in){ 1, "x", tags, 3, cnames, cvals, 2 }, blob, 20),
		 -E2BIG);
}

static void test_profile_every_truncation_refused(void)
{
	struct rdmem_profile_view v;
	int64_t len = make_profile();
	uint8_t copy[4096];
	int64_t cut;

	REQUIRE(len > 0);
	for (cut = 0; cut < len; cut++) {
		CHECK(rdmem_blob_profile_open(blob, (uint64_t)cut, &v) == -EINVAL);
		memcpy(copy, blob, (size_t)cut);
		if (cut >= RDMEM_BLOB_HDR)
			rdmem_st32(copy + 8, (uint32_t)cut);
		if (rdmem_blob_profile_open(copy, (uint64_t)cut, &v) == 0) {
			fprintf(stderr, "  forged profile truncation to %lld accepted\n",
				(long long)cut);
			CHECK(0);
		}
	}
}

static void test_profile_forgeries_refused(void)
{
	struct rdmem_profile_view v;
	int64_t len = make_profile();
	uint8_t copy[4096];
	uint8_t *body = copy + RDMEM_BLOB_HDR;
	uint32_t tags_off;

	REQUIRE(len > 0);
	tags_off = rdmem_ld32(blob + RDMEM_BLOB_HDR + 16);
#define FORGED(mutation)                                                                           \
	do {                                                                                       \
		memcpy(copy, blob, (size_t)len);                                                   \
		mutation;                                                                          \
		CHECK(rdmem_blob_profile_open(copy, (uint64_t)len, &v) == -EINVAL);                \
	} while (0)

	FORGED(copy[4] = RDMEM_BLOB_ARRAY);		     /* kind */
	FORGED(rdmem_st32(body + 8, (uint32_t)len));	     /* name offset */
	FORGED(rdmem_st32(body + 12, UINT32_MAX));	     /* name length */
	FORGED(rdmem_st32(body + 8, 4));		     /* name inside the header */
	FORGED(rdmem_st32(body + 16, (uint32_t)len - 4));    /* tag table off the end */
	FORGED(rdmem_st32(body + 20, 0x20000000));	     /* tag_count * 8 overflows */
	FORGED(rdmem_st32(body + 20, UINT32_MAX));	     /* tag_count absurd */
	FORGED(rdmem_st32(body + 28, 0x10000000));	     /* counter_count * 16 overflows */
	FORGED(rdmem_st32(body + 24, UINT32_MAX - 8));	     /* counters offset wraps */
	FORGED(rdmem_st32(copy + tags_off, (uint32_t)len));  /* a tag string off the end */
	FORGED(rdmem_st32(copy + tags_off + 4, UINT32_MAX)); /* a tag length absurd */
#undef FORGED
	CHECK(rdmem_blob_profile_open(blob, (uint64_t)len, &v) == 0);
}

int main(void)
{
	RUN(test_array_round_trip);
	RUN(test_array_empty_and_full);
	RUN(test_array_every_truncation_refused);
	RUN(test_array_forgeries_refused);
	RUN(test_profile_round_trip);
	RUN(test_profile_every_truncation_refused);
	RUN(test_profile_forgeries_refused);
	return check_done();
}
