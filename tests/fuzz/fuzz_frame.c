/* fuzz_frame.c - the TCP frame parser (tcp/frame.c) on hostile byte
 * streams, consumed the way the server's connection loop consumes them.
 *
 * Input: byte 0 picks the receiver's max_value, byte 1 how many split points
 * follow (2 bytes each), the rest is the stream. The stream is parsed twice:
 * whole, from an exact-size heap copy (ASan sees any read past it), and
 * delivered in chunks cut at the split points into a growing buffer, with
 * refused payloads drained as they arrive. Every verdict is checked against
 * the frame's own bytes, and both deliveries must give the same frames: how
 * TCP happens to cut a stream must never change what the server sees.
 */
#include "tcp/frame.h"
#include "tests/fuzz/fuzz.h"

#define MAX_SPLITS 8
#define MAX_EVENTS 4096

struct event {
	enum rdmem_frame_kind kind;
	uint64_t len;
	uint16_t status;
	struct rdmem_desc desc;
};

struct events {
	struct event ev[MAX_EVENTS];
	size_t n;
	int overflow;
};

static const uint32_t max_values[] = { 0, 1, 4096, RDMEM_DEFAULT_MAX_VALUE, RDMEM_MAX_VALUE_LIMIT };

/* Judges one verdict on buf[0, avail) against the bytes themselves. */
static void check_verdict(const uint8_t *buf, size_t avail, uint32_t max_value,
			  enum rdmem_frame_kind k, const struct rdmem_frame *f)
{
	uint64_t cap = RDMEM_DESC_SIZE + (uint64_t)RDMEM_MAX_KEY + max_value;
	uint32_t magic = 0;

	if (avail >= sizeof(magic))
		memcpy(&magic, buf, sizeof(magic));
	switch (k) {
	case RDMEM_FRAME_NEED:
		FUZZ_CHECK(f->need > 0);
		FUZZ_CHECK(avail < sizeof(magic) || magic == RDMEM_FRAME_MAGIC);
		if (avail < RDMEM_DESC_SIZE) {
			FUZZ_CHECK(f->need == RDMEM_DESC_SIZE - avail);
			break;
		}
		/* A header was judged valid: the caller may allocate len bytes. */
		FUZZ_CHECK(rdmem_desc_check(&f->desc, max_value) == RDMEM_S_OK);
		FUZZ_CHECK(f->len <= cap);
		FUZZ_CHECK(avail < f->len && f->need == f->len - avail);
		break;
	case RDMEM_FRAME_OK:
		FUZZ_CHECK(avail >= RDMEM_DESC_SIZE && f->len <= avail && f->len <= cap);
		FUZZ_CHECK(memcmp(&f->desc, buf, RDMEM_DESC_SIZE) == 0);
		FUZZ_CHECK(f->desc.state == RDMEM_FRAME_MAGIC);
		FUZZ_CHECK(rdmem_desc_check(&f->desc, max_value) == RDMEM_S_OK);
		FUZZ_CHECK(f->desc.op > 0 && f->desc.op < RDMEM_OP__COUNT);
		FUZZ_CHECK(f->desc.path < RDMEM_PATH__COUNT);
		FUZZ_CHECK(f->desc.key_len <= RDMEM_MAX_KEY && f->desc.val_len <= max_value);
		FUZZ_CHECK(f->len == RDMEM_DESC_SIZE + rdmem_desc_payload_len(&f->desc));
		/* Where the server's dispatch will read key and value. */
		fz_touch(buf + RDMEM_DESC_SIZE, f->desc.key_len);
		fz_touch(buf + RDMEM_DESC_SIZE + f->desc.key_len, f->desc.val_len);
		break;
	case RDMEM_FRAME_REJECT:
		FUZZ_CHECK(avail >= RDMEM_DESC_SIZE && f->why);
		FUZZ_CHECK(memcmp(&f->desc, buf, RDMEM_DESC_SIZE) == 0);
		FUZZ_CHECK(f->status == RDMEM_S_BAD_REQUEST || f->status == RDMEM_S_TOO_BIG);
		FUZZ_CHECK(f->status == rdmem_desc_check(&f->desc, max_value));
		/* The receiver drains at most this much before it answers. */
		FUZZ_CHECK(f->len == RDMEM_DESC_SIZE + rdmem_desc_payload_len(&f->desc));
		FUZZ_CHECK(f->len <= RDMEM_DESC_SIZE + RDMEM_FRAME_DRAIN_LIMIT);
		break;
	case RDMEM_FRAME_BAD:
		FUZZ_CHECK(f->why);
		FUZZ_CHECK(avail >= sizeof(magic));
		FUZZ_CHECK(magic != RDMEM_FRAME_MAGIC ||
			   (avail >= RDMEM_DESC_SIZE &&
			    rdmem_desc_payload_len(&f->desc) > RDMEM_FRAME_DRAIN_LIMIT));
		break;
	default:
		FUZZ_CHECK(!"unknown verdict");
	}
}

static void record(struct events *e, enum rdmem_frame_kind k, const struct rdmem_frame *f)
{
	struct event *ev;

	if (e->n == MAX_EVENTS) {
		e->overflow = 1;
		return;
	}
	ev = &e->ev[e->n++];
	memset(ev, 0, sizeof(*ev));
	ev->kind = k;
	if (k == RDMEM_FRAME_BAD)
		return; /* why it is bad may depend on how much had arrived */
	ev->len = f->len;
	ev->status = f->status;
	ev->desc = f->desc;
}

/*
 * The server loop's consumer over one receive buffer: frames until NEED or
 * BAD. Returns bytes consumed; *drain is what a REJECT still owes; *closed
 * is set on BAD.
 */
static size_t consume(const uint8_t *buf, size_t len, uint32_t max_value, struct events *e,
		      uint64_t *drain, int *closed)
{
	size_t pos = 0;

	while (!*closed && !e->overflow) {
		struct rdmem_frame f;
		size_t avail = len - pos;
		enum rdmem_frame_kind k = rdmem_frame_parse(buf + pos, avail, max_value, &f);

		check_verdict(buf + pos, avail, max_value, k, &f);
		if (k == RDMEM_FRAME_NEED)
			break;
		record(e, k, &f);
		if (k == RDMEM_FRAME_BAD) {
			*closed = 1;
			break;
		}
		if (k == RDMEM_FRAME_REJECT && f.len > avail) {
			*drain = f.len - avail;
			pos = len;
			break;
		}
		pos += f.len;
	}
	return pos;
}

static struct events whole, split;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fz_quiet();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz in = fz_init(data, size);
	uint32_t max_value = max_values[fz_u8(&in) % RDMEM_ARRAY_SIZE(max_values)];
	size_t nsplit = fz_u8(&in) % (MAX_SPLITS + 1), cut[MAX_SPLITS + 1], i, len, pos, rlen = 0;
	uint8_t *stream, *rbuf;
	uint64_t drain = 0;
	int closed = 0;

	for (i = 0; i < nsplit; i++)
		cut[i] = fz_u16(&in);
	len = in.n;
	stream = malloc(len ? len : 1);
	rbuf = malloc(len ? len : 1);
	FUZZ_CHECK(stream && rbuf);
	memcpy(stream, in.p, len);

	/* Whole: the exact-size copy, so the parser cannot read past it unseen. */
	whole.n = 0;
	whole.overflow = 0;
	consume(stream, len, max_value, &whole, &drain, &closed);

	/* Split: chunks end at the sorted cut points, the last at the end. */
	for (i = 0; i < nsplit; i++)
		cut[i] = len ? cut[i] % len : 0;
	for (i = 1; i < nsplit; i++) {
		size_t v = cut[i], j = i;

		for (; j > 0 && cut[j - 1] > v; j--)
			cut[j] = cut[j - 1];
		cut[j] = v;
	}
	cut[nsplit++] = len;
	split.n = 0;
	split.overflow = 0;
	drain = 0;
	closed = 0;
	for (i = 0, pos = 0; i < nsplit && !closed; i++) {
		size_t chunk = cut[i] - pos, skip;

		/* Bytes of a refused payload are read and dropped, never buffered. */
		skip = drain < chunk ? (size_t)drain : chunk;
		drain -= skip;
		memcpy(rbuf + rlen, stream + pos + skip, chunk - skip);
		rlen += chunk - skip;
		pos = cut[i];
		if (drain)
			continue;
		{
			size_t used = consume(rbuf, rlen, max_value, &split, &drain, &closed);

			memmove(rbuf, rbuf + used, rlen - used);
			rlen -= used;
		}
	}
	if (!whole.overflow && !split.overflow) {
		FUZZ_CHECK(whole.n == split.n);
		for (i = 0; i < whole.n; i++)
			FUZZ_CHECK(memcmp(&whole.ev[i], &split.ev[i], sizeof(whole.ev[i])) == 0);
	}
	free(stream);
	free(rbuf);
	return 0;
}
