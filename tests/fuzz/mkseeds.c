/* mkseeds.c - writes the seed corpus of every fuzz target from valid inputs
 * made with the runtime's own encoders (frames, descriptors, handshake
 * structs, blobs), each laid out in its harness's input format, plus a few
 * near-misses next to the boundaries the checks guard. `make fuzz-seeds`
 * regenerates tests/fuzz/corpus/; the output is deterministic.
 *
 *   usage: fuzz_mkseeds OUTDIR   (writes OUTDIR/<target>/<seed>)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rdmem/auth.h"
#include "rdmem/blob.h"
#include "rdmem/content.h"
#include "rdmem/layout.h"
#include "rdmem/wire.h"

struct seed {
	uint8_t d[16384];
	size_t n;
};

static const char *outdir;
static int failed;

static void put(struct seed *s, const void *p, size_t n)
{
	if (!n)
		return;
	if (s->n + n > sizeof(s->d)) {
		fprintf(stderr, "mkseeds: seed too large\n");
		exit(1);
	}
	memcpy(s->d + s->n, p, n);
	s->n += n;
}

static void u8(struct seed *s, uint8_t v)
{
	put(s, &v, 1);
}

static void u16(struct seed *s, uint16_t v)
{
	put(s, &v, 2);
}

static void u32(struct seed *s, uint32_t v)
{
	put(s, &v, 4);
}

static void u64(struct seed *s, uint64_t v)
{
	put(s, &v, 8);
}

static void emit(const char *target, const char *name, const struct seed *s)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", outdir, target);
	if (mkdir(path, 0755) < 0 && errno != EEXIST) {
		perror(path);
		exit(1);
	}
	snprintf(path, sizeof(path), "%s/%s/%s", outdir, target, name);
	f = fopen(path, "wb");
	if (!f || fwrite(s->d, 1, s->n, f) != s->n || fclose(f)) {
		perror(path);
		failed = 1;
	}
}

static struct rdmem_desc desc(uint32_t state, uint16_t op, uint16_t key_len, uint32_t val_len)
{
	struct rdmem_desc d;

	memset(&d, 0, sizeof(d));
	d.state = state;
	d.op = op;
	d.key_len = key_len;
	d.val_len = val_len;
	d.path = RDMEM_PATH_TCP;
	d.req_id = 42;
	return d;
}

/* A TCP frame: header, key, value. */
static void frame(struct seed *s, uint16_t op, uint16_t flags, const void *key, uint16_t klen,
		  const void *val, uint32_t vlen)
{
	struct rdmem_desc d = desc(RDMEM_FRAME_MAGIC, op, klen, vlen);

	d.flags = flags;
	put(s, &d, sizeof(d));
	put(s, key, klen);
	put(s, val, vlen);
}

/* ---- fuzz_frame: [max_value index][splits][split offsets u16][stream] ---- */

static void frame_head(struct seed *s, uint8_t max_index, int nsplit, const uint16_t *cuts)
{
	int i;

	s->n = 0;
	u8(s, max_index);
	u8(s, (uint8_t)nsplit);
	for (i = 0; i < nsplit; i++)
		u16(s, cuts[i]);
}

static uint32_t key_array(uint8_t *buf, size_t cap)
{
	struct rdmem_blob_writer w;

	if (rdmem_blob_array_begin(&w, buf, cap, 3) < 0)
		return 0;
	rdmem_blob_array_set(&w, 0, "alpha", 5, 0);
	rdmem_blob_array_set(&w, 1, "beta", 4, 0);
	rdmem_blob_array_set(&w, 2, "user:1001", 9, RDMEM_BLOB_PRESENT);
	return rdmem_blob_finish(&w);
}

static void seeds_frame(void)
{
	static const uint16_t c2[] = { 10, 70 }, c3[] = { 1, 5, 63 }, c1[] = { 100 };
	struct rdmem_auth_tcp tok = { 0x1234567800000001ull, { 0 } };
	struct seed s;
	uint8_t big[5000], keys[256];
	uint32_t klen = key_array(keys, sizeof(keys));

	memset(big, 'v', sizeof(big));
	frame_head(&s, 3, 2, c2);
	frame(&s, RDMEM_OP_KV_PUT, 0, "k1", 2, "hello", 5);
	frame(&s, RDMEM_OP_KV_GET, 0, "k1", 2, NULL, 0);
	frame(&s, RDMEM_OP_PING, 0, NULL, 0, NULL, 0);
	emit("frame", "put_get_ping", &s);

	frame_head(&s, 2, 3, c3);
	frame(&s, RDMEM_OP_ECHO, 0, NULL, 0, big, 100);
	frame(&s, RDMEM_OP_STATS, RDMEM_F_JSON, NULL, 0, NULL, 0);
	emit("frame", "echo_header_split", &s);

	/* Refused with a status, payload drained, and the next frame still served. */
	frame_head(&s, 2, 1, c1);
	frame(&s, RDMEM_OP_KV_GET, 0, big, RDMEM_MAX_KEY + 1, NULL, 0);
	frame(&s, RDMEM_OP_PING, 0, NULL, 0, NULL, 0);
	emit("frame", "key_too_long_then_ping", &s);

	frame_head(&s, 2, 1, c1);
	frame(&s, RDMEM_OP_ECHO, 0, NULL, 0, big, 4097);
	frame(&s, RDMEM_OP_PING, 0, NULL, 0, NULL, 0);
	emit("frame", "value_over_cap_then_ping", &s);

	frame_head(&s, 3, 0, NULL);
	frame(&s, RDMEM_OP_KV_MGET, 0, NULL, 0, keys, klen);
	frame(&s, RDMEM_OP_PROFILE, 0, "1001", 4, NULL, 0);
	frame(&s, RDMEM_OP_LARGE_GET, 0, "big:4k", 6, NULL, 0);
	emit("frame", "mget_profile_large", &s);

	frame_head(&s, 3, 0, NULL);
	{
		struct rdmem_desc d = desc(RDMEM_FRAME_MAGIC, RDMEM_OP_IMAGE_CHUNK, 9, 16);

		d.flags = RDMEM_F_IMG_INIT | RDMEM_F_IMG_COMMIT;
		d.args.image.upload_id = 7;
		d.args.image.total = 16;
		d.args.image.hash = rdmem_hash_update(RDMEM_HASH_INIT, "0123456789abcdef", 16);
		put(&s, &d, sizeof(d));
		put(&s, "image.bin", 9);
		put(&s, "0123456789abcdef", 16);
	}
	emit("frame", "image_chunk", &s);

	frame_head(&s, 3, 0, NULL);
	frame(&s, RDMEM_OP_AUTH, 0, NULL, 0, &tok, sizeof(tok));
	frame(&s, RDMEM_OP_PING, 0, NULL, 0, NULL, 0);
	emit("frame", "auth_first", &s);

	frame_head(&s, 3, 0, NULL);
	put(&s, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27);
	emit("frame", "http_garbage", &s);

	/* A 4 GiB length prefix: closed, never allocated. */
	frame_head(&s, 4, 0, NULL);
	{
		struct rdmem_desc d = desc(RDMEM_FRAME_MAGIC, RDMEM_OP_KV_PUT, 1, 0xffffffffu);

		put(&s, &d, sizeof(d));
	}
	emit("frame", "length_beyond_cap", &s);
}

/* ---- fuzz_desc -------------------------------------------------------------
 * [slots-1 u8][slot_bytes-1 u16][max_value index u8][slot u8][desc 64]
 * [server slots-1 u16][hello len u8][hello][asked slots u16][welcome len u8][welcome]
 * [asked --resp-bytes - 64 u16]
 */

static void desc_seed(const char *name, uint8_t slots, uint16_t slot_bytes, uint8_t slot,
		      struct rdmem_desc d, int hello_bad, int welcome_wrap)
{
	struct rdmem_xchg_hello h;
	struct rdmem_xchg_welcome w;
	struct seed s = { .n = 0 };

	u8(&s, (uint8_t)(slots - 1));
	u16(&s, (uint16_t)(slot_bytes - 1));
	u8(&s, 3); /* 1 MiB */
	u8(&s, slot);
	put(&s, &d, sizeof(d));

	memset(&h, 0, sizeof(h));
	h.magic = RDMEM_XCHG_MAGIC;
	h.version = RDMEM_LAYOUT_VERSION;
	h.ring_slots = 64;
	h.resp_bytes = RDMEM_DEFAULT_RESP_BYTES;
	h.resp = (struct rdmem_remote){ 0x7f0000001000ull, 0x1234,
					(uint32_t)(rdmem_turn_off(64, RDMEM_DEFAULT_RESP_BYTES) +
						   RDMEM_TURN_BYTES) };
	if (hello_bad)
		h.resp.len -= 1; /* one byte short of the turn word's end */
	h.nonce = 0x6000000000000001ull;
	u16(&s, 31);
	u8(&s, sizeof(h));
	put(&s, &h, sizeof(h));

	memset(&w, 0, sizeof(w));
	w.magic = RDMEM_XCHG_MAGIC;
	w.version = RDMEM_LAYOUT_VERSION;
	w.ring_slots = 64;
	w.slot_bytes = welcome_wrap ? (1u << 27) : RDMEM_DEFAULT_SLOT_BYTES;
	w.max_value = RDMEM_DEFAULT_MAX_VALUE;
	w.session_id = 3;
	w.req =
	    (struct rdmem_remote){ 0x7e0000000000ull, 1,
				   (uint32_t)(64 * rdmem_slot_stride(RDMEM_DEFAULT_SLOT_BYTES)) };
	w.resp_stride = (uint32_t)rdmem_slot_stride(RDMEM_DEFAULT_RESP_BYTES);
	w.eager_bytes = RDMEM_DEFAULT_RESP_BYTES;
	w.objpool_bytes = 8u << 20;
	w.obj_max = 1u << 20;
	w.obj_count = 128;
	w.srv_ring_slots = 64;
	w.srv_stage_bytes = RDMEM_DEFAULT_RESP_BYTES;
	w.object_ttl_ms = 10000;
	w.objpool = (struct rdmem_remote){ 0x7e0000800000ull, 3, 8u << 20 };
	w.ctrl = (struct rdmem_remote){ 0x7e0001000000ull, 4, RDMEM_CTRL_BYTES };
	u16(&s, 64);
	u8(&s, sizeof(w));
	put(&s, &w, sizeof(w));
	u16(&s, RDMEM_DEFAULT_RESP_BYTES - RDMEM_DESC_SIZE);
	emit("desc", name, &s);
}

static void seeds_desc(void)
{
	struct rdmem_desc d = desc(RDMEM_RING_READY, RDMEM_OP_KV_PUT, 8, 100);

	d.path = RDMEM_PATH_EAGER;
	d.data_off = (uint32_t)rdmem_slot_data_off(3, 4096);
	desc_seed("put_in_slot_3", 16, 4096, 3, d, 0, 0);

	/* BULK: the payload runs from slot 14 through 15, the last of the region. */
	d = desc(RDMEM_RING_READY, RDMEM_OP_ECHO, 0,
		 (uint32_t)(2 * rdmem_slot_stride(4096) - RDMEM_DESC_SIZE));
	d.path = RDMEM_PATH_BULK;
	d.data_off = (uint32_t)rdmem_slot_data_off(14, 4096);
	desc_seed("bulk_to_region_end", 16, 4096, 14, d, 0, 0);

	d.val_len++; /* one byte past the region */
	desc_seed("bulk_one_past_end", 16, 4096, 14, d, 1, 0);

	d = desc(RDMEM_RING_READY, RDMEM_OP_KV_GET, 4, 0);
	d.data_off = (uint32_t)rdmem_slot_data_off(2, 4096) + 1;
	desc_seed("data_off_not_its_slot", 16, 4096, 2, d, 0, 1);

	d = desc(RDMEM_RING_FREE, RDMEM_OP_PING, 0, 0);
	desc_seed("slot_not_ready", 16, 4096, 0, d, 0, 0);
}

/* ---- fuzz_blob: the blob itself ------------------------------------------ */

static void seeds_blob(void)
{
	static const char *const tags[] = { "rdma", "kernel", "storage" };
	static const char *const cnames[] = { "followers", "posts" };
	static const uint64_t cvals[] = { 12345, UINT64_MAX };
	struct rdmem_profile_in p = { 1001, "Ada Lovelace", tags, 3, cnames, cvals, 2 };
	struct rdmem_profile_in empty = { 7, "", NULL, 0, NULL, NULL, 0 };
	struct rdmem_blob_writer w;
	struct seed s = { .n = 0 };
	int64_t n;

	s.n = key_array(s.d, sizeof(s.d));
	emit("blob", "mget_keys", &s);

	rdmem_blob_array_begin(&w, s.d, sizeof(s.d), 4);
	rdmem_blob_array_set(&w, 0, "alpha", 5, RDMEM_BLOB_PRESENT);
	rdmem_blob_array_set(&w, 2, "", 0, RDMEM_BLOB_PRESENT);
	rdmem_blob_array_set(&w, 3, "the fourth value", 16, RDMEM_BLOB_PRESENT);
	s.n = rdmem_blob_finish(&w);
	emit("blob", "mget_reply_with_missing", &s);

	rdmem_blob_array_begin(&w, s.d, sizeof(s.d), 0);
	s.n = rdmem_blob_finish(&w);
	emit("blob", "array_empty", &s);

	n = rdmem_blob_profile_encode(&p, s.d, sizeof(s.d));
	s.n = n > 0 ? (size_t)n : 0;
	emit("blob", "profile", &s);

	n = rdmem_blob_profile_encode(&empty, s.d, sizeof(s.d));
	s.n = n > 0 ? (size_t)n : 0;
	emit("blob", "profile_empty", &s);
}

/* ---- fuzz_frontdoor: a program of client actions, rounds, completions -----
 * op byte (mod 10), client byte, slot byte, then per op:
 *   1 submit: mode, 64 desc bytes, path[, deadline u64]
 *   3 slot state: nothing (state table index op / 10 % 7) or u32 when op & 0x80
 *   5 ring cell: delta, mode, client pick, slot pick[, word u64][, index]
 *   6 head: mode[, delta | u64]
 *   7 client entry: mode
 *   8 round: scan
 *   9 complete one: k, then status, val mode[, u32 | u8], off mode[, u32]
 */

enum {
	FD_PUSH = 0,
	FD_SUBMIT = 1,
	FD_STATE = 3,
	FD_CELL = 5,
	FD_HEAD = 6,
	FD_CLIENT = 7,
	FD_ROUND = 8,
	FD_COMPLETE = 9
};

static void fd_op(struct seed *s, uint8_t op, uint8_t c, uint8_t slot)
{
	u8(s, op);
	u8(s, c);
	u8(s, slot);
}

/* mode bit 0: near-valid fields; bit 1: path mod 5; bits 2-3: deadline kind; bit 4: WAITING. */
static void fd_submit(struct seed *s, uint8_t c, uint8_t slot, uint8_t mode, uint16_t op_index,
		      uint16_t key_len, uint32_t val_len, uint8_t path)
{
	struct rdmem_desc d = desc(0, op_index, key_len, val_len);

	fd_op(s, FD_SUBMIT, c, slot);
	u8(s, mode);
	put(s, &d, sizeof(d));
	u8(s, path);
}

static void fd_round(struct seed *s, uint8_t scan)
{
	fd_op(s, FD_ROUND, 0, 0);
	u8(s, scan);
}

static void fd_complete(struct seed *s, uint8_t status, uint8_t val_len)
{
	fd_op(s, FD_COMPLETE, 0, 0);
	u8(s, 0);      /* k: the first held call */
	u8(s, status); /* status */
	u8(s, 0);      /* val_len: one byte */
	u8(s, val_len);
	u8(s, 0); /* data_off: the value area */
}

static void seeds_frontdoor(void)
{
	struct seed s = { .n = 0 };

	/* op indexes into the harness's table: 0 PING, 1 ECHO, 2 PUT, 9 RECLAIM, 11 AUTH, 12 LOCAL_PING. */
	fd_submit(&s, 0, 0, 0x13, 1, 0, 10, RDMEM_PATH_AUTO);
	fd_submit(&s, 1, 4, 0x03, 2, 5, 100, RDMEM_PATH_EAGER);
	fd_round(&s, 0);
	fd_complete(&s, RDMEM_S_OK, 10);
	fd_complete(&s, RDMEM_S_OK, 0);
	fd_submit(&s, 0, 1, 0x03, 12, 0, 0, 0);
	fd_round(&s, 1);
	emit("frontdoor", "echo_put_local_ping", &s);

	s.n = 0;
	fd_submit(&s, 0, 2, 0x03, 1, 0, 10, 0);
	fd_op(&s, FD_STATE + 10 * 4, 0, 2); /* ABANDONED before the agent takes it */
	fd_round(&s, 0);
	fd_submit(&s, 0, 3, 0x03, 1, 0, 10, 0);
	fd_round(&s, 0);
	fd_op(&s, FD_STATE + 10 * 4, 0, 3); /* ABANDONED while the agent holds it */
	fd_complete(&s, RDMEM_S_OK, 10);
	emit("frontdoor", "abandoned_before_and_during", &s);

	s.n = 0;
	fd_submit(&s, 1, 0, 0x03, 1, 0, 10, 0);
	fd_round(&s, 0);
	fd_op(&s, FD_CLIENT, 1, 0);
	u8(&s, 130); /* pid NO_PID: the client died */
	fd_round(&s, 1);
	fd_complete(&s, RDMEM_S_OK, 10);
	fd_round(&s, 1);
	emit("frontdoor", "client_dies_holding_a_call", &s);

	s.n = 0;
	fd_op(&s, FD_CELL, 0, 0);
	u8(&s, 0);	      /* at head */
	u8(&s, 2);	      /* raw word */
	u8(&s, 0), u8(&s, 0); /* client, slot picks */
	u64(&s, 0x0123456789abcdefull);
	fd_round(&s, 0);
	fd_round(&s, 0);
	fd_submit(&s, 0, 0, 0x03, 0, 0, 0, 0);
	fd_round(&s, 0);
	fd_round(&s, 0);
	emit("frontdoor", "scribbled_cell_repaired", &s);

	s.n = 0;
	fd_op(&s, FD_HEAD, 0, 0);
	u8(&s, 0); /* claim, never publish */
	fd_submit(&s, 0, 0, 0x03, 0, 0, 0, 0);
	fd_round(&s, 0);
	fd_round(&s, 0);
	fd_round(&s, 0);
	emit("frontdoor", "stalled_producer_skipped", &s);

	s.n = 0;
	fd_submit(&s, 0, 0, 0x03 | (2 << 2), 1, 0, 10, 0); /* deadline already past */
	fd_submit(&s, 0, 1, 0x03, 11, 0, 0, 0);		   /* AUTH: agent-only */
	fd_submit(&s, 0, 2, 0x03, 1, RDMEM_MAX_KEY + 1, 0, 0);
	fd_submit(&s, 0, 3, 0x01, 1, 0, 1001, 7); /* value over the cap, unknown path */
	fd_op(&s, FD_PUSH, 3, 5);		  /* no such client, no such slot */
	fd_round(&s, 0);
	emit("frontdoor", "refused_entries", &s);

	s.n = 0;
	fd_submit(&s, 0, 0, 0x03, 1, 0, 10, 0);
	fd_round(&s, 0);
	fd_op(&s, FD_STATE, 0, 0); /* FREE: rewritten while the agent holds it */
	fd_complete(&s, RDMEM_S_OK, 10);
	fd_op(&s, FD_PUSH, 0, 0); /* a duplicate entry for it */
	fd_round(&s, 0);
	emit("frontdoor", "slot_rewritten_while_held", &s);
}

/* ---- fuzz_image: [max_image index] then ops ------------------------------
 * chunk: op (not 7 mod 8), id index, name selector[, len, bytes], flags,
 *        offset mode[, u32], total (odd byte: u8 follows; even: u32), len, data,
 *        hash mode[, u64]
 */

#define OWN_NAME 16 /* selector: the upload's own name */

/* off_mode: 0 = bytes received so far, 1 = the last chunk's offset, else off. */
static void img_chunk(struct seed *s, uint8_t id, uint8_t sel, uint8_t flags, uint32_t off_mode,
		      uint8_t total, const char *data, uint8_t len, uint8_t hash_mode)
{
	u8(s, 0);
	u8(s, id);
	u8(s, sel);
	u8(s, flags);
	u8(s, off_mode < 2 ? (uint8_t)off_mode : 2);
	if (off_mode >= 2)
		u32(s, off_mode);
	u8(s, 1);
	u8(s, total);
	u8(s, len);
	put(s, data, len);
	u8(s, hash_mode);
	if (hash_mode == 2)
		u64(s, 0xdeadbeefull);
}

static void seeds_image(void)
{
	const char *d = "0123456789abcdefghijklmnopqrstuvwxyz";
	struct seed s = { .n = 0 };

	u8(&s, 4);
	img_chunk(&s, 0, 1, RDMEM_F_IMG_INIT, 0, 30, d, 10, 0);
	img_chunk(&s, 0, OWN_NAME, 0, 0, 0, d + 10, 10, 0);
	img_chunk(&s, 0, OWN_NAME, RDMEM_F_IMG_COMMIT, 0, 0, d + 20, 10, 0);
	img_chunk(&s, 0, OWN_NAME, RDMEM_F_IMG_COMMIT, 1, 0, d + 20, 10, 0); /* retried */
	emit("image", "three_chunks_commit_retry", &s);

	s.n = 0;
	u8(&s, 4);
	img_chunk(&s, 1, 2, RDMEM_F_IMG_INIT, 0, 20, d, 10, 0);
	img_chunk(&s, 1, OWN_NAME, RDMEM_F_IMG_INIT, 1, 20, d, 10, 0);	/* repeated first chunk */
	img_chunk(&s, 1, OWN_NAME, RDMEM_F_IMG_COMMIT, 0, 0, d, 10, 2); /* wrong hash */
	emit("image", "repeat_then_wrong_hash", &s);

	s.n = 0;
	u8(&s, 4);
	img_chunk(&s, 0, 1, RDMEM_F_IMG_INIT, 0, 20, d, 10, 0);
	img_chunk(&s, 1, 1, RDMEM_F_IMG_INIT, 0, 10, d, 10, 0);		/* same name, other id */
	img_chunk(&s, 1, OWN_NAME, RDMEM_F_IMG_COMMIT, 1, 0, d, 10, 1); /* retried, as a commit */
	img_chunk(&s, 0, OWN_NAME, RDMEM_F_IMG_COMMIT, 0, 0, d + 10, 10, 0);
	emit("image", "two_uploads_one_name", &s);

	s.n = 0;
	u8(&s, 4);
	img_chunk(&s, 2, 9, RDMEM_F_IMG_INIT | RDMEM_F_IMG_COMMIT, 0, 4, d, 4, 0);   /* ../escape */
	img_chunk(&s, 2, 8, RDMEM_F_IMG_INIT | RDMEM_F_IMG_COMMIT, 0, 4, d, 4, 0);   /* a/b */
	img_chunk(&s, 2, 7, RDMEM_F_IMG_INIT | RDMEM_F_IMG_COMMIT, 0, 4, d, 4, 0);   /* .hidden */
	img_chunk(&s, 2, 4, RDMEM_F_IMG_INIT | RDMEM_F_IMG_COMMIT, 0, 4, d, 4, 0);   /* a..b */
	img_chunk(&s, 2, 129, RDMEM_F_IMG_INIT | RDMEM_F_IMG_COMMIT, 0, 4, d, 4, 0); /* 201 bytes */
	img_chunk(&s, 3, 128, RDMEM_F_IMG_INIT | RDMEM_F_IMG_COMMIT, 0, 4, d, 4, 0); /* 200 bytes */
	emit("image", "names_at_the_edges", &s);

	s.n = 0;
	u8(&s, 1);						 /* max_image 16 */
	img_chunk(&s, 0, 0, RDMEM_F_IMG_INIT, 0, 200, d, 10, 0); /* total over max_image */
	img_chunk(&s, 0, 0, RDMEM_F_IMG_INIT, 0, 12, d, 10, 0);
	img_chunk(&s, 0, OWN_NAME, 0, 0, 0, d, 10, 0); /* past its total */
	img_chunk(&s, 0, 0, RDMEM_F_IMG_INIT, 0, 12, d, 10, 0);
	u8(&s, 7);			       /* expire every upload */
	img_chunk(&s, 0, 0, 0, 0, 0, d, 2, 0); /* its upload is gone */
	emit("image", "caps_and_expiry", &s);

	s.n = 0;
	u8(&s, 4);
	img_chunk(&s, 4, 1, RDMEM_F_IMG_INIT, 0, 20, d, 10, 0);
	img_chunk(&s, 4, OWN_NAME, 0, 15, 0, d, 10, 0); /* a gap: aborts the upload */
	emit("image", "out_of_order", &s);
}

/* ---- fuzz_service: [max_value index] then calls ---------------------------
 * 64 descriptor bytes, mode (bit 0 near-valid, bits 1-2 sink: 0 heap, 1 pool,
 * 2 refuse; bit 3 RECLAIM of handed-out refs; bit 4 no reclaim callback),
 * key bytes, value bytes (bit 3: count, then two bytes per reference).
 */

#define SINK_POOL    (1 << 1)
#define SINK_REFUSE  (2 << 1)
#define RECLAIM_REFS (1 << 3)

static void svc_call(struct seed *s, uint16_t op, uint16_t flags, uint8_t mode, const void *key,
		     uint16_t klen, const void *val, uint32_t vlen)
{
	struct rdmem_desc d = desc(0, op, klen, vlen);

	d.flags = flags;
	put(s, &d, sizeof(d));
	u8(s, mode);
	put(s, key, klen);
	put(s, val, vlen);
}

static void seeds_service(void)
{
	struct seed s = { .n = 0 };
	uint8_t keys[256], big[300];
	uint32_t klen;
	struct rdmem_blob_writer w;

	memset(big, 'x', sizeof(big));
	rdmem_blob_array_begin(&w, keys, sizeof(keys), 2);
	rdmem_blob_array_set(&w, 0, "k1", 2, 0);
	rdmem_blob_array_set(&w, 1, "k2", 2, 0);
	klen = rdmem_blob_finish(&w);

	u8(&s, 1); /* max_value 4096 */
	svc_call(&s, RDMEM_OP_KV_PUT, 0, 0, "k1", 2, "value-1", 7);
	svc_call(&s, RDMEM_OP_KV_GET, 0, 0, "k1", 2, NULL, 0);
	svc_call(&s, RDMEM_OP_KV_MGET, 0, 0, NULL, 0, keys, klen);
	svc_call(&s, RDMEM_OP_KV_DEL, 0, 0, "k1", 2, NULL, 0);
	svc_call(&s, RDMEM_OP_KV_GET, 0, 0, "k1", 2, NULL, 0);
	svc_call(&s, RDMEM_OP_KV_DEL, 0, 0, "k1", 2, NULL, 0);
	svc_call(&s, RDMEM_OP_LARGE_GET, 0, 0, "k2", 2, NULL, 0);
	emit("service", "kv_put_get_mget_del", &s);

	s.n = 0;
	u8(&s, 2); /* max_value 64 KiB */
	svc_call(&s, RDMEM_OP_LARGE_GET, 0, SINK_POOL, "big:10000", 9, NULL, 0);
	svc_call(&s, RDMEM_OP_PROFILE, 0, SINK_POOL, "1001", 4, NULL, 0);
	svc_call(&s, RDMEM_OP_LARGE_GET, 0, SINK_POOL, "big:64k", 7, NULL, 0);
	/* Both references back, then the same again (a retried RECLAIM), then aged. */
	svc_call(&s, 0, 0, RECLAIM_REFS, NULL, 0, NULL, 0);
	u8(&s, 1), u8(&s, 0), u8(&s, 0), u8(&s, 1), u8(&s, 0);
	svc_call(&s, 0, 0, RECLAIM_REFS, NULL, 0, NULL, 0);
	u8(&s, 1), u8(&s, 0), u8(&s, 0), u8(&s, 1), u8(&s, 0);
	svc_call(&s, 0, 0, RECLAIM_REFS | 16, NULL, 0, NULL, 0);
	u8(&s, 0), u8(&s, 0), u8(&s, 2);
	emit("service", "lazy_replies_reclaimed", &s);

	s.n = 0;
	u8(&s, 1);
	svc_call(&s, RDMEM_OP_ECHO, 0, 0, NULL, 0, big, 100);
	svc_call(&s, RDMEM_OP_ECHO, 0, SINK_REFUSE, NULL, 0, big, 100);
	svc_call(&s, RDMEM_OP_STATS, RDMEM_F_JSON, 0, NULL, 0, NULL, 0);
	svc_call(&s, RDMEM_OP_STATS, 0, 0, NULL, 0, NULL, 0);
	svc_call(&s, RDMEM_OP_PING, 0, 0, NULL, 0, NULL, 0);
	svc_call(&s, RDMEM_OP_PING, 0, 0, "k", 1, NULL, 0);
	svc_call(&s, RDMEM_OP_AUTH, 0, 0, NULL, 0, big, 24);
	svc_call(&s, RDMEM_OP_KV_MGET, 0, 0, NULL, 0, big, 40);		/* not a blob */
	svc_call(&s, RDMEM_OP_PROFILE, 0, 0, "01001", 5, NULL, 0);	/* not canonical */
	svc_call(&s, RDMEM_OP_LARGE_GET, 0, 0, "big:5000", 8, NULL, 0); /* over max_value */
	emit("service", "echo_stats_and_refusals", &s);

	s.n = 0;
	u8(&s, 1);
	{
		struct rdmem_desc d = desc(0, RDMEM_OP_IMAGE_CHUNK, 9, 16);

		d.flags = RDMEM_F_IMG_INIT | RDMEM_F_IMG_COMMIT;
		d.args.image.upload_id = 9;
		d.args.image.total = 16;
		d.args.image.hash = rdmem_hash_update(RDMEM_HASH_INIT, "0123456789abcdef", 16);
		put(&s, &d, sizeof(d));
		u8(&s, 0);
		put(&s, "image.bin", 9);
		put(&s, "0123456789abcdef", 16);
	}
	emit("service", "image_upload", &s);
}

/* ---- fuzz_reply ------------------------------------------------------------
 * [max_value index][request op u16][request val_len u32][resp_bytes - 64 u16]
 * [resp_bytes - eager bytes u16][objpool bytes u64][largest object u32][reply descriptor 64]
 */

static void reply_seed(const char *name, uint8_t max_index, uint16_t op, uint32_t req_len,
		       uint32_t reply_len, int lazy, uint64_t obj_off, uint64_t pool)
{
	struct rdmem_desc d = desc(RDMEM_RING_READY, op, 0, reply_len);
	struct seed s = { .n = 0 };

	d.path = lazy ? RDMEM_PATH_LAZY : RDMEM_PATH_EAGER;
	if (lazy) {
		d.flags = RDMEM_F_OBJREF;
		d.args.obj = (struct rdmem_objref){
			.object_id = 5, .length = reply_len, .offset = obj_off, .generation = 3
		};
	}
	u8(&s, max_index);
	u16(&s, op);
	u32(&s, req_len);
	u16(&s, RDMEM_DEFAULT_RESP_BYTES - RDMEM_DESC_SIZE);
	u16(&s, 0); /* EAGER capacity: the whole response slot */
	u64(&s, pool);
	u32(&s, 2u << 20);
	put(&s, &d, sizeof(d));
	emit("reply", name, &s);
}

static void seeds_reply(void)
{
	/* max_value indexes: 0 -> 0, 1 -> 1000, 2 -> 4096, 3 -> 65536, 4 -> 1 MiB. */
	reply_seed("eager_get", 2, RDMEM_OP_KV_GET, 0, 4096, 0, 0, 1u << 20);
	reply_seed("eager_over_resp_slot", 3, RDMEM_OP_KV_GET, 0, RDMEM_DEFAULT_RESP_BYTES + 1, 0,
		   0, 1u << 20);
	reply_seed("lazy_get", 3, RDMEM_OP_LARGE_GET, 0, 65536, 1, 65536, 1u << 20);
	reply_seed("lazy_past_pool", 3, RDMEM_OP_LARGE_GET, 0, 65536, 1, (1u << 20) - 100,
		   1u << 20);
	reply_seed("echo_max_overlaps", 4, RDMEM_OP_ECHO, 1u << 20, 1u << 20, 1, 0, 2u << 20);
	reply_seed("echo_small_after_request", 2, RDMEM_OP_ECHO, 1000, 1000, 0, 0, 1u << 20);
	reply_seed("lazy_past_4g", 3, RDMEM_OP_LARGE_GET, 0, 65536, 1, (5ull << 30) + 4096,
		   6ull << 30);
}

/* ---- fuzz_resp: [max bulk index][splits][split offsets u16][stream] ---- */

static void resp_seed(const char *name, uint8_t max_index, int nsplit, const uint16_t *cuts,
		      const char *stream, size_t len)
{
	struct seed s = { .n = 0 };
	int i;

	u8(&s, max_index);
	u8(&s, (uint8_t)nsplit);
	for (i = 0; i < nsplit; i++)
		u16(&s, cuts[i]);
	put(&s, stream, len);
	emit("resp", name, &s);
}

#define RESP_SEED(name, idx, n, cuts, lit) resp_seed(name, idx, n, cuts, lit, sizeof(lit) - 1)

static void seeds_resp(void)
{
	static const uint16_t c2[] = { 5, 17 }, c3[] = { 1, 9, 30 };

	RESP_SEED("set_get_pipelined", 3, 2, c2,
		  "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
	RESP_SEED("inline_ping_echo", 3, 3, c3, "PING\r\nECHO  a b\r\n\r\nset k v\n");
	RESP_SEED("binary_value", 3, 0, NULL, "*2\r\n$4\r\nECHO\r\n$4\r\n\0\r\n\x01\r\n");
	RESP_SEED(
	    "hello_mget", 4, 1, c2,
	    "*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n*3\r\n$4\r\nMGET\r\n$1\r\na\r\n$1\r\nb\r\n*0\r\n");
	RESP_SEED("bulk_over_limit", 2, 0, NULL, "*1\r\n$17\r\n0123456789abcdefg\r\n");
	RESP_SEED("nested_array", 3, 0, NULL, "*2\r\n*1\r\n$1\r\na\r\n");
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
		return 2;
	}
	outdir = argv[1];
	if (mkdir(outdir, 0755) < 0 && errno != EEXIST) {
		perror(outdir);
		return 1;
	}
	seeds_frame();
	seeds_desc();
	seeds_blob();
	seeds_frontdoor();
	seeds_image();
	seeds_service();
	seeds_reply();
	seeds_resp();
	return failed;
}
