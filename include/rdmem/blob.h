/* blob.h - self-contained result blobs: MGET arrays and PROFILE structs.
 *
 * A blob is one buffer: a 16-byte header, then tables whose entries point to
 * each other by offsets relative to the blob start, then the bytes they name.
 * It can be copied, RDMA-read or sent as is; no pointer is ever stored.
 *
 *   header   u32 magic "RDB1", u16 kind, u16 version, u32 total_len, u32 count
 *   ARRAY    count x {u32 off, u32 len, u32 flags, u32 reserved}, then data
 *   PROFILE  u64 id, u32 name_off, u32 name_len, u32 tags_off, u32 tag_count,
 *            u32 counters_off, u32 counter_count; tags: tag_count x {u32 off,
 *            u32 len}; counters: counter_count x {u32 name_off, u32 name_len,
 *            u64 value}; then strings
 *
 * Readers validate the whole blob when they open it (every table and every
 * byte range inside total_len, total_len equal to the buffer), so accessors
 * never fail afterwards and a truncated or forged blob is refused up front.
 * All loads go through memcpy (a blob may sit at any alignment) and every
 * integer is little-endian (rdmem/byteorder.h), whatever the host.
 *
 * Header-only so that libclient can decode results with libc alone.
 */
#ifndef RDMEM_BLOB_H
#define RDMEM_BLOB_H

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "rdmem/byteorder.h"

#define RDMEM_BLOB_MAGIC	0x31424452u /* "RDB1" */
#define RDMEM_BLOB_VERSION	1
#define RDMEM_BLOB_HDR		16u
#define RDMEM_BLOB_ARRAY_ENT	16u
#define RDMEM_BLOB_PROFILE_BODY 32u
#define RDMEM_BLOB_TAG_ENT	8u
#define RDMEM_BLOB_COUNTER_ENT	16u

enum rdmem_blob_kind { RDMEM_BLOB_ARRAY = 1, RDMEM_BLOB_PROFILE = 2 };

/* ARRAY entry flags */
#define RDMEM_BLOB_PRESENT 1u /* MGET: the key exists (a missing key has len 0) */

static inline uint32_t rdmem_ld32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof(v));
	return rdmem_le32(v);
}

static inline uint64_t rdmem_ld64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof(v));
	return rdmem_le64(v);
}

static inline void rdmem_st32(uint8_t *p, uint32_t v)
{
	v = rdmem_le32(v);
	memcpy(p, &v, sizeof(v));
}

static inline void rdmem_st64(uint8_t *p, uint64_t v)
{
	v = rdmem_le64(v);
	memcpy(p, &v, sizeof(v));
}

/* True when [off, off + len) lies inside [lo, total); overflow-safe. */
static inline int rdmem_blob_range_ok(uint64_t off, uint64_t len, uint64_t lo, uint64_t total)
{
	return off >= lo && off <= total && len <= total - off;
}

/* ---- writer ------------------------------------------------------------ */

struct rdmem_blob_writer {
	uint8_t *buf;
	uint32_t cap;
	uint32_t used; /* bytes appended so far, header and tables included */
};

/* Appends bytes; returns their offset, or 0 when they do not fit. */
static inline uint32_t rdmem_blob_append(struct rdmem_blob_writer *w, const void *p, uint32_t len)
{
	uint32_t off = w->used;

	if (len > w->cap - w->used)
		return 0;
	if (len)
		memcpy(w->buf + off, p, len);
	w->used += len;
	return off;
}

static inline void rdmem_blob_put_header(struct rdmem_blob_writer *w, uint16_t kind, uint32_t count)
{
	uint16_t k = rdmem_le16(kind), v = rdmem_le16(RDMEM_BLOB_VERSION);

	rdmem_st32(w->buf, RDMEM_BLOB_MAGIC);
	memcpy(w->buf + 4, &k, 2);
	memcpy(w->buf + 6, &v, 2);
	rdmem_st32(w->buf + 8, 0); /* total_len, set by rdmem_blob_finish() */
	rdmem_st32(w->buf + 12, count);
}

/* Seals the blob and returns its length. */
static inline uint32_t rdmem_blob_finish(struct rdmem_blob_writer *w)
{
	rdmem_st32(w->buf + 8, w->used);
	return w->used;
}

/* Bytes an ARRAY blob of count entries carrying data_bytes of values needs. */
static inline uint64_t rdmem_blob_array_size(uint32_t count, uint64_t data_bytes)
{
	return RDMEM_BLOB_HDR + (uint64_t)count * RDMEM_BLOB_ARRAY_ENT + data_bytes;
}

static inline int rdmem_blob_array_begin(struct rdmem_blob_writer *w, void *buf, uint64_t cap,
					 uint32_t count)
{
	uint64_t need = rdmem_blob_array_size(count, 0);

	if (cap > UINT32_MAX)
		cap = UINT32_MAX;
	if (need > cap)
		return -E2BIG;
	w->buf = (uint8_t *)buf;
	w->cap = (uint32_t)cap;
	w->used = (uint32_t)need;
	rdmem_blob_put_header(w, RDMEM_BLOB_ARRAY, count);
	memset(w->buf + RDMEM_BLOB_HDR, 0, (size_t)count * RDMEM_BLOB_ARRAY_ENT);
	return 0;
}

/* Fills entry i. Entries may be set in any order; unset ones are empty. */
static inline int rdmem_blob_array_set(struct rdmem_blob_writer *w, uint32_t i, const void *data,
				       uint32_t len, uint32_t flags)
{
	uint8_t *ent = w->buf + RDMEM_BLOB_HDR + (size_t)i * RDMEM_BLOB_ARRAY_ENT;
	uint32_t off = w->used;

	if (i >= rdmem_ld32(w->buf + 12))
		return -EINVAL;
	if (len && !rdmem_blob_append(w, data, len))
		return -E2BIG;
	rdmem_st32(ent, len ? off : 0);
	rdmem_st32(ent + 4, len);
	rdmem_st32(ent + 8, flags);
	return 0;
}

/* ---- reader ------------------------------------------------------------ */

struct rdmem_blob_array {
	const uint8_t *base;
	uint32_t count;
};

static inline int rdmem_blob_header_check(const uint8_t *b, uint64_t len, uint16_t kind)
{
	uint16_t k, v;

	if (len < RDMEM_BLOB_HDR || len > UINT32_MAX)
		return -EINVAL;
	memcpy(&k, b + 4, 2);
	memcpy(&v, b + 6, 2);
	if (rdmem_ld32(b) != RDMEM_BLOB_MAGIC || rdmem_le16(k) != kind ||
	    rdmem_le16(v) != RDMEM_BLOB_VERSION)
		return -EINVAL;
	if (rdmem_ld32(b + 8) != len)
		return -EINVAL;
	return 0;
}

static inline int rdmem_blob_array_open(const void *buf, uint64_t len, struct rdmem_blob_array *a)
{
	const uint8_t *b = (const uint8_t *)buf;
	uint32_t count, i;
	uint64_t data_lo;

	if (rdmem_blob_header_check(b, len, RDMEM_BLOB_ARRAY))
		return -EINVAL;
	count = rdmem_ld32(b + 12);
	data_lo = rdmem_blob_array_size(count, 0);
	if (data_lo > len)
		return -EINVAL;
	for (i = 0; i < count; i++) {
		const uint8_t *ent = b + RDMEM_BLOB_HDR + (size_t)i * RDMEM_BLOB_ARRAY_ENT;
		uint32_t off = rdmem_ld32(ent), n = rdmem_ld32(ent + 4);

		if (n && !rdmem_blob_range_ok(off, n, data_lo, len))
			return -EINVAL;
		if (rdmem_ld32(ent + 8) & ~RDMEM_BLOB_PRESENT)
			return -EINVAL;
	}
	a->base = b;
	a->count = count;
	return 0;
}

static inline void rdmem_blob_array_get(const struct rdmem_blob_array *a, uint32_t i,
					const void **data, uint32_t *len, uint32_t *flags)
{
	const uint8_t *ent = a->base + RDMEM_BLOB_HDR + (size_t)i * RDMEM_BLOB_ARRAY_ENT;

	*len = rdmem_ld32(ent + 4);
	*data = a->base + (*len ? rdmem_ld32(ent) : 0);
	*flags = rdmem_ld32(ent + 8);
}

/* ---- PROFILE ----------------------------------------------------------- */

struct rdmem_profile_in {
	uint64_t id;
	const char *name;
	const char *const *tags;
	uint32_t tag_count;
	const char *const *counter_names;
	const uint64_t *counter_values;
	uint32_t counter_count;
};

struct rdmem_profile_view {
	const uint8_t *base;
	uint64_t id;
	const char *name; /* not NUL-terminated: use name_len */
	uint32_t name_len;
	uint32_t tag_count;
	uint32_t counter_count;
	uint32_t tags_off;
	uint32_t counters_off;
};

static inline uint64_t rdmem_blob_profile_size(const struct rdmem_profile_in *p)
{
	uint64_t n = RDMEM_BLOB_HDR + RDMEM_BLOB_PROFILE_BODY + strlen(p->name);
	uint32_t i;

	n += (uint64_t)p->tag_count * RDMEM_BLOB_TAG_ENT;
	n += (uint64_t)p->counter_count * RDMEM_BLOB_COUNTER_ENT;
	for (i = 0; i < p->tag_count; i++)
		n += strlen(p->tags[i]);
	for (i = 0; i < p->counter_count; i++)
		n += strlen(p->counter_names[i]);
	return n;
}

/* Returns the blob length, or -E2BIG when it does not fit in cap. */
static inline int64_t rdmem_blob_profile_encode(const struct rdmem_profile_in *p, void *buf,
						uint64_t cap)
{
	uint64_t need = rdmem_blob_profile_size(p);
	struct rdmem_blob_writer w = { (uint8_t *)buf, 0, 0 };
	uint32_t tags_off, counters_off, name_len = (uint32_t)strlen(p->name), i;
	uint8_t *body;

	if (need > cap || need > UINT32_MAX)
		return -E2BIG;
	w.cap = (uint32_t)need;
	body = w.buf + RDMEM_BLOB_HDR;
	tags_off = RDMEM_BLOB_HDR + RDMEM_BLOB_PROFILE_BODY;
	counters_off = tags_off + p->tag_count * RDMEM_BLOB_TAG_ENT;
	w.used = counters_off + p->counter_count * RDMEM_BLOB_COUNTER_ENT;
	rdmem_blob_put_header(&w, RDMEM_BLOB_PROFILE, 1);
	rdmem_st64(body, p->id);
	rdmem_st32(body + 8, rdmem_blob_append(&w, p->name, name_len));
	rdmem_st32(body + 12, name_len);
	rdmem_st32(body + 16, tags_off);
	rdmem_st32(body + 20, p->tag_count);
	rdmem_st32(body + 24, counters_off);
	rdmem_st32(body + 28, p->counter_count);
	for (i = 0; i < p->tag_count; i++) {
		uint8_t *ent = w.buf + tags_off + i * RDMEM_BLOB_TAG_ENT;
		uint32_t n = (uint32_t)strlen(p->tags[i]);

		rdmem_st32(ent, rdmem_blob_append(&w, p->tags[i], n));
		rdmem_st32(ent + 4, n);
	}
	for (i = 0; i < p->counter_count; i++) {
		uint8_t *ent = w.buf + counters_off + i * RDMEM_BLOB_COUNTER_ENT;
		uint32_t n = (uint32_t)strlen(p->counter_names[i]);

		rdmem_st32(ent, rdmem_blob_append(&w, p->counter_names[i], n));
		rdmem_st32(ent + 4, n);
		rdmem_st64(ent + 8, p->counter_values[i]);
	}
	return rdmem_blob_finish(&w);
}

/* Validates a string reference {off, len} read from a table. */
static inline int rdmem_blob_str_ok(const uint8_t *ent, uint64_t lo, uint64_t total)
{
	return rdmem_blob_range_ok(rdmem_ld32(ent), rdmem_ld32(ent + 4), lo, total);
}

static inline int rdmem_blob_profile_open(const void *buf, uint64_t len,
					  struct rdmem_profile_view *v)
{
	const uint8_t *b = (const uint8_t *)buf, *body = b + RDMEM_BLOB_HDR;
	uint64_t lo = RDMEM_BLOB_HDR + RDMEM_BLOB_PROFILE_BODY, tags_end, counters_end;
	uint32_t i;

	if (rdmem_blob_header_check(b, len, RDMEM_BLOB_PROFILE) || len < lo)
		return -EINVAL;
	v->base = b;
	v->id = rdmem_ld64(body);
	v->name_len = rdmem_ld32(body + 12);
	v->tags_off = rdmem_ld32(body + 16);
	v->tag_count = rdmem_ld32(body + 20);
	v->counters_off = rdmem_ld32(body + 24);
	v->counter_count = rdmem_ld32(body + 28);
	if (!rdmem_blob_str_ok(body + 8, lo, len))
		return -EINVAL;
	v->name = (const char *)b + rdmem_ld32(body + 8);
	tags_end = (uint64_t)v->tag_count * RDMEM_BLOB_TAG_ENT;
	counters_end = (uint64_t)v->counter_count * RDMEM_BLOB_COUNTER_ENT;
	if (!rdmem_blob_range_ok(v->tags_off, tags_end, lo, len) ||
	    !rdmem_blob_range_ok(v->counters_off, counters_end, lo, len))
		return -EINVAL;
	for (i = 0; i < v->tag_count; i++)
		if (!rdmem_blob_str_ok(b + v->tags_off + i * RDMEM_BLOB_TAG_ENT, lo, len))
			return -EINVAL;
	for (i = 0; i < v->counter_count; i++)
		if (!rdmem_blob_str_ok(b + v->counters_off + i * RDMEM_BLOB_COUNTER_ENT, lo, len))
			return -EINVAL;
	return 0;
}

static inline void rdmem_blob_profile_tag(const struct rdmem_profile_view *v, uint32_t i,
					  const char **s, uint32_t *len)
{
	const uint8_t *ent = v->base + v->tags_off + (size_t)i * RDMEM_BLOB_TAG_ENT;

	*s = (const char *)v->base + rdmem_ld32(ent);
	*len = rdmem_ld32(ent + 4);
}

static inline void rdmem_blob_profile_counter(const struct rdmem_profile_view *v, uint32_t i,
					      const char **name, uint32_t *len, uint64_t *value)
{
	const uint8_t *ent = v->base + v->counters_off + (size_t)i * RDMEM_BLOB_COUNTER_ENT;

	*name = (const char *)v->base + rdmem_ld32(ent);
	*len = rdmem_ld32(ent + 4);
	*value = rdmem_ld64(ent + 8);
}

#endif
