/* fuzz_resp.c - the RESP parser (agent/resp_parse.c) on hostile byte streams,
 * consumed the way agent/resp.c consumes a connection's input.
 *
 * Input: byte 0 picks the max bulk length, byte 1 how many split points
 * follow (2 bytes each), the rest is the stream. The stream is parsed whole
 * (from an exact-size heap copy: ASan sees any read past it) and delivered in
 * chunks cut at the split points into a growing buffer; both must give the
 * same commands and the same verdict. Every command is checked against the
 * limits, its arguments must lie inside the buffer, and re-encoding it as a
 * multibulk frame must parse back to the same arguments.
 */
#include "agent/resp_parse.h"
#include "tests/fuzz/fuzz.h"

#define MAX_SPLITS 8
#define MAX_ARGS   64

static const uint32_t max_bulks[] = { 0, 1, 16, 1024, 1u << 20 };

struct run {
	uint64_t hash; /* of every command's arguments, in order */
	uint32_t cmds;
	int error;
};

static uint64_t hash_cmd(uint64_t h, const struct rdmem_resp_cmd *c)
{
	uint32_t i;

	h = h * 1000003 + c->argc;
	for (i = 0; i < c->argc; i++)
		h = h * 31 + c->argv[i].len + fz_touch(c->argv[i].p, c->argv[i].len);
	return h;
}

/* Encodes c as a multibulk frame and checks it parses back the same. */
static void round_trip(const struct rdmem_resp_cmd *c, const struct rdmem_resp_limits *lim)
{
	struct rdmem_resp_arg argv[MAX_ARGS];
	struct rdmem_resp_cmd back = { 0, MAX_ARGS, argv };
	struct rdmem_resp_out o = { 0 };
	char why[256];
	uint32_t i;

	rdmem_resp_array(&o, c->argc);
	for (i = 0; i < c->argc; i++)
		rdmem_resp_bulk(&o, c->argv[i].p, c->argv[i].len);
	FUZZ_CHECK(!o.oom);
	FUZZ_CHECK(rdmem_resp_parse(o.p, o.len, lim, &back, why, sizeof(why)) == (ssize_t)o.len);
	FUZZ_CHECK(back.argc == c->argc);
	for (i = 0; i < c->argc; i++)
		FUZZ_CHECK(back.argv[i].len == c->argv[i].len &&
			   memcmp(back.argv[i].p, c->argv[i].p, c->argv[i].len) == 0);
	rdmem_resp_out_free(&o);
}

/* Parses buf[0, len) to the end as the connection loop does; returns the
 * bytes left unparsed. */
static size_t consume(const uint8_t *buf, size_t len, const struct rdmem_resp_limits *lim,
		      struct run *r)
{
	struct rdmem_resp_arg argv[MAX_ARGS];
	struct rdmem_resp_cmd c = { 0, MAX_ARGS, argv };
	char why[256];
	size_t pos = 0;

	while (!r->error && pos < len) {
		ssize_t n = rdmem_resp_parse(buf + pos, len - pos, lim, &c, why, sizeof(why));
		uint32_t i;

		if (n < 0) {
			FUZZ_CHECK(strncmp(why, "Protocol error: ", 16) == 0);
			FUZZ_CHECK(!strchr(why, '\r') && !strchr(why, '\n'));
			r->error = 1;
			break;
		}
		if (n == 0)
			break;
		FUZZ_CHECK((size_t)n <= len - pos);
		FUZZ_CHECK(c.argc <= lim->max_args);
		for (i = 0; i < c.argc; i++) {
			FUZZ_CHECK(c.argv[i].p >= buf + pos && c.argv[i].p <= buf + pos + n);
			FUZZ_CHECK(c.argv[i].len <= (size_t)(buf + pos + n - c.argv[i].p));
			FUZZ_CHECK(c.argv[i].len <= lim->max_bulk);
		}
		if (c.argc)
			round_trip(&c, lim);
		r->hash = hash_cmd(r->hash, &c);
		r->cmds++;
		pos += (size_t)n;
	}
	return len - pos;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz f = fz_init(data, size);
	struct rdmem_resp_limits lim = { max_bulks[fz_u8(&f) % RDMEM_ARRAY_SIZE(max_bulks)],
					 MAX_ARGS };
	unsigned nsplit = fz_u8(&f) % (MAX_SPLITS + 1), i;
	size_t cuts[MAX_SPLITS + 1], len, have = 0, done = 0;
	struct run whole = { 0, 0, 0 }, split = { 0, 0, 0 };
	const uint8_t *stream;
	uint8_t *copy, *buf;

	for (i = 0; i < nsplit; i++)
		cuts[i] = fz_u16(&f);
	stream = fz_bytes(&f, f.n, &len);
	copy = malloc(len ? len : 1);
	buf = malloc(len ? len : 1);
	FUZZ_CHECK(copy && buf);
	memcpy(copy, stream, len);
	consume(copy, len, &lim, &whole);

	/* Chunked: bytes arrive up to each cut; the unparsed tail is kept. */
	cuts[nsplit] = len;
	for (i = 0; i <= nsplit && !split.error; i++) {
		size_t upto = cuts[i] < len ? cuts[i] : len, left;

		if (upto <= done)
			continue;
		memcpy(buf + have, stream + done, upto - done);
		have += upto - done;
		done = upto;
		left = consume(buf, have, &lim, &split);
		memmove(buf, buf + have - left, left);
		have = left;
	}
	FUZZ_CHECK(whole.error == split.error);
	FUZZ_CHECK(whole.cmds == split.cmds && whole.hash == split.hash);
	free(copy);
	free(buf);
	return 0;
}
