/* fuzz_blob.c - the blob decoder (include/rdmem/blob.h) on hostile bytes: an
 * MGET key array from a client reaches the server's dispatch, and MGET and
 * PROFILE replies from a server reach libclient.
 *
 * The input is the blob, copied to an exact-size heap buffer so ASan flags
 * any read past it. Whatever opens must be readable through every accessor,
 * each range inside the buffer; and it must survive a round trip through the
 * writer: encoding what was decoded gives a blob that opens to the same
 * entries, tags and counters.
 */
#include "rdmem/blob.h"
#include "tests/fuzz/fuzz.h"

static int inside(const uint8_t *buf, uint64_t len, const void *p, uint64_t n)
{
	const uint8_t *q = p;

	return q >= buf && (uint64_t)(q - buf) <= len && n <= len - (uint64_t)(q - buf);
}

static void fuzz_array(const uint8_t *buf, uint64_t len)
{
	struct rdmem_blob_array a, b;
	struct rdmem_blob_writer w;
	uint64_t data = 0, size;
	uint8_t *copy;
	uint32_t i;

	if (rdmem_blob_array_open(buf, len, &a) < 0)
		return;
	FUZZ_CHECK(rdmem_blob_array_size(a.count, 0) <= len);
	for (i = 0; i < a.count; i++) {
		const void *d;
		uint32_t n, flags;

		rdmem_blob_array_get(&a, i, &d, &n, &flags);
		FUZZ_CHECK(inside(buf, len, d, n));
		FUZZ_CHECK((flags & ~RDMEM_BLOB_PRESENT) == 0);
		fz_touch(d, n);
		data += n;
	}
	/* Entries may share bytes, so the copy can be larger than the input. */
	size = rdmem_blob_array_size(a.count, data);
	if (size > UINT32_MAX || size > (64u << 20))
		return;
	copy = malloc(size);
	FUZZ_CHECK(copy);
	FUZZ_CHECK(rdmem_blob_array_begin(&w, copy, size, a.count) == 0);
	for (i = 0; i < a.count; i++) {
		const void *d;
		uint32_t n, flags;

		rdmem_blob_array_get(&a, i, &d, &n, &flags);
		FUZZ_CHECK(rdmem_blob_array_set(&w, i, d, n, flags) == 0);
	}
	FUZZ_CHECK(rdmem_blob_finish(&w) == size);
	FUZZ_CHECK(rdmem_blob_array_open(copy, size, &b) == 0 && b.count == a.count);
	for (i = 0; i < a.count; i++) {
		const void *d1, *d2;
		uint32_t n1, n2, f1, f2;

		rdmem_blob_array_get(&a, i, &d1, &n1, &f1);
		rdmem_blob_array_get(&b, i, &d2, &n2, &f2);
		FUZZ_CHECK(n1 == n2 && f1 == f2 && memcmp(d1, d2, n1) == 0);
	}
	free(copy);
}

/* A NUL-terminated copy, or NULL when the string holds a NUL (the writer takes C strings). */
static char *cstr(const char *s, uint32_t n)
{
	char *c;

	if (memchr(s, 0, n))
		return NULL;
	c = malloc((size_t)n + 1);
	FUZZ_CHECK(c);
	memcpy(c, s, n);
	c[n] = '\0';
	return c;
}

static void fuzz_profile(const uint8_t *buf, uint64_t len)
{
	struct rdmem_profile_view v, v2;
	struct rdmem_profile_in p;
	char **tags, **cnames;
	uint64_t *cvals;
	uint8_t *copy = NULL;
	int64_t n;
	uint32_t i, ok = 1;

	if (rdmem_blob_profile_open(buf, len, &v) < 0)
		return;
	FUZZ_CHECK(inside(buf, len, v.name, v.name_len));
	fz_touch(v.name, v.name_len);
	tags = calloc((size_t)v.tag_count + 1, sizeof(*tags));
	cnames = calloc((size_t)v.counter_count + 1, sizeof(*cnames));
	cvals = calloc((size_t)v.counter_count + 1, sizeof(*cvals));
	FUZZ_CHECK(tags && cnames && cvals);
	for (i = 0; i < v.tag_count; i++) {
		const char *s;
		uint32_t sl;

		rdmem_blob_profile_tag(&v, i, &s, &sl);
		FUZZ_CHECK(inside(buf, len, s, sl));
		fz_touch(s, sl);
		ok &= (tags[i] = cstr(s, sl)) != NULL;
	}
	for (i = 0; i < v.counter_count; i++) {
		const char *s;
		uint32_t sl;

		rdmem_blob_profile_counter(&v, i, &s, &sl, &cvals[i]);
		FUZZ_CHECK(inside(buf, len, s, sl));
		fz_touch(s, sl);
		ok &= (cnames[i] = cstr(s, sl)) != NULL;
	}
	p.id = v.id;
	p.name = cstr(v.name, v.name_len);
	p.tags = (const char *const *)tags;
	p.tag_count = v.tag_count;
	p.counter_names = (const char *const *)cnames;
	p.counter_values = cvals;
	p.counter_count = v.counter_count;
	if (ok && p.name && rdmem_blob_profile_size(&p) <= (64u << 20)) {
		uint64_t size = rdmem_blob_profile_size(&p);

		copy = malloc(size);
		FUZZ_CHECK(copy);
		n = rdmem_blob_profile_encode(&p, copy, size);
		FUZZ_CHECK(n == (int64_t)size);
		FUZZ_CHECK(rdmem_blob_profile_open(copy, size, &v2) == 0);
		FUZZ_CHECK(v2.id == v.id && v2.name_len == v.name_len &&
			   memcmp(v2.name, v.name, v.name_len) == 0);
		FUZZ_CHECK(v2.tag_count == v.tag_count && v2.counter_count == v.counter_count);
		for (i = 0; i < v.tag_count; i++) {
			const char *s1, *s2;
			uint32_t l1, l2;

			rdmem_blob_profile_tag(&v, i, &s1, &l1);
			rdmem_blob_profile_tag(&v2, i, &s2, &l2);
			FUZZ_CHECK(l1 == l2 && memcmp(s1, s2, l1) == 0);
		}
		for (i = 0; i < v.counter_count; i++) {
			const char *s1, *s2;
			uint32_t l1, l2;
			uint64_t c1, c2;

			rdmem_blob_profile_counter(&v, i, &s1, &l1, &c1);
			rdmem_blob_profile_counter(&v2, i, &s2, &l2, &c2);
			FUZZ_CHECK(l1 == l2 && c1 == c2 && memcmp(s1, s2, l1) == 0);
		}
	}
	for (i = 0; i < v.tag_count; i++)
		free(tags[i]);
	for (i = 0; i < v.counter_count; i++)
		free(cnames[i]);
	free(tags);
	free(cnames);
	free(cvals);
	free((char *)p.name);
	free(copy);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fz_quiet();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *buf = malloc(size ? size : 1);

	FUZZ_CHECK(buf);
	memcpy(buf, data, size);
	fuzz_array(buf, size);
	fuzz_profile(buf, size);
	free(buf);
	return 0;
}
