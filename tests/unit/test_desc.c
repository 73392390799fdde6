/* test_desc.c - descriptor validation and the TCP frame parser: every bad
 * header is judged before a payload byte is needed, and no input (4 GiB
 * lengths, garbage, byte-by-byte feeding) makes it read past the buffer. */
#include <stdlib.h>
#include <string.h>

#include "tcp/frame.h"
#include "rdmem/wire.h"
#include "tests/check.h"
#include "tests/raw_tcp.h"

#define CAP (1u << 20)

static struct rdmem_desc req(uint16_t op, uint16_t klen, uint32_t vlen)
{
	return raw_tcp_desc(op, klen, vlen, 77);
}

static void test_desc_check(void)
{
	struct rdmem_desc d = req(RDMEM_OP_KV_PUT, 3, 10);

	CHECK_EQ(rdmem_desc_check(&d, CAP), RDMEM_S_OK);
	d.op = 0;
	CHECK_EQ(rdmem_desc_check(&d, CAP), RDMEM_S_BAD_REQUEST);
	d.op = RDMEM_OP__COUNT;
	CHECK_EQ(rdmem_desc_check(&d, CAP), RDMEM_S_BAD_REQUEST);
	d.op = 0xffff;
	CHECK_EQ(rdmem_desc_check(&d, CAP), RDMEM_S_BAD_REQUEST);
	d = req(RDMEM_OP_KV_GET, RDMEM_MAX_KEY + 1, 0);
	CHECK_EQ(rdmem_desc_check(&d, CAP), RDMEM_S_BAD_REQUEST);
	d = req(RDMEM_OP_KV_GET, RDMEM_MAX_KEY, 0);
	CHECK_EQ(rdmem_desc_check(&d, CAP), RDMEM_S_OK);
	d = req(RDMEM_OP_KV_PUT, 1, CAP + 1);
	CHECK_EQ(rdmem_desc_check(&d, CAP), RDMEM_S_TOO_BIG);
	d = req(RDMEM_OP_KV_PUT, 1, CAP);
	CHECK_EQ(rdmem_desc_check(&d, CAP), RDMEM_S_OK);
	d.path = RDMEM_PATH__COUNT;
	CHECK_EQ(rdmem_desc_check(&d, CAP), RDMEM_S_BAD_REQUEST);
	CHECK_EQ(rdmem_status_errno(RDMEM_S_TOO_BIG), -E2BIG);
	CHECK_EQ(rdmem_status_errno(RDMEM_S_NOT_FOUND), -ENOENT);
	CHECK_EQ(rdmem_status_errno(999), -EPROTO);
}

static void test_frame_ok_and_pipelined(void)
{
	uint8_t buf[512];
	struct rdmem_desc a = req(RDMEM_OP_KV_PUT, 3, 5), b = req(RDMEM_OP_PING, 0, 0);
	struct rdmem_frame f;
	size_t len = 0;

	memcpy(buf + len, &a, 64), len += 64;
	memcpy(buf + len, "keyvalue", 8), len += 8;
	memcpy(buf + 1 + len, &b, 64); /* parser must not assume alignment: shift by 1 */
	memmove(buf + len, buf + 1 + len, 64), len += 64;
	REQUIRE(rdmem_frame_parse(buf, len, CAP, &f) == RDMEM_FRAME_OK);
	CHECK_EQ(f.len, 72);
	CHECK_EQ(f.desc.op, RDMEM_OP_KV_PUT);
	CHECK_EQ(f.desc.req_id, 77);
	REQUIRE(rdmem_frame_parse(buf + f.len, len - f.len, CAP, &f) == RDMEM_FRAME_OK);
	CHECK_EQ(f.desc.op, RDMEM_OP_PING);
	CHECK_EQ(f.len, 64);

	/* Same frame parsed from an odd address. */
	{
		uint8_t *odd = malloc(200);

		REQUIRE(odd);
		memcpy(odd + 3, &a, 64);
		memcpy(odd + 67, "keyvalue", 8);
		CHECK(rdmem_frame_parse(odd + 3, 72, CAP, &f) == RDMEM_FRAME_OK && f.len == 72);
		free(odd);
	}
}

static void test_frame_byte_by_byte(void)
{
	struct rdmem_desc a = req(RDMEM_OP_ECHO, 0, 100);
	uint8_t *buf = malloc(64 + 100);
	struct rdmem_frame f;
	size_t n;

	REQUIRE(buf);
	memcpy(buf, &a, 64);
	memset(buf + 64, 'x', 100);
	/* Each prefix is fed in a buffer of exactly its size, so ASan sees any over-read. */
	for (n = 0; n < 164; n++) {
		uint8_t *pre = malloc(n ? n : 1);
		enum rdmem_frame_kind k;

		memcpy(pre, buf, n);
		k = rdmem_frame_parse(pre, n, CAP, &f);
		if (k != RDMEM_FRAME_NEED || f.need != (n < 64 ? 64 - n : 164 - n)) {
			fprintf(stderr, "  prefix %zu: kind %d need %llu\n", n, k,
				(unsigned long long)f.need);
			CHECK(0);
		}
		free(pre);
	}
	CHECK(rdmem_frame_parse(buf, 164, CAP, &f) == RDMEM_FRAME_OK);
	free(buf);
}

static void test_frame_rejects(void)
{
	struct rdmem_desc d;
	struct rdmem_frame f;

	d = req(99, 0, 8);
	REQUIRE(rdmem_frame_parse(&d, 64, CAP, &f) == RDMEM_FRAME_REJECT);
	CHECK_EQ(f.status, RDMEM_S_BAD_REQUEST);
	CHECK_EQ(f.len, 72); /* the caller drains the payload and answers */
	CHECK_EQ(f.desc.req_id, 77);

	d = req(RDMEM_OP_KV_GET, RDMEM_MAX_KEY + 1, 0);
	REQUIRE(rdmem_frame_parse(&d, 64, CAP, &f) == RDMEM_FRAME_REJECT);
	CHECK_EQ(f.status, RDMEM_S_BAD_REQUEST);

	d = req(RDMEM_OP_KV_PUT, 1, CAP + 1);
	REQUIRE(rdmem_frame_parse(&d, 64, CAP, &f) == RDMEM_FRAME_REJECT);
	CHECK_EQ(f.status, RDMEM_S_TOO_BIG);
	CHECK_EQ(f.len, 64 + 1 + CAP + 1);
}

static void test_frame_bad(void)
{
	struct rdmem_desc d;
	struct rdmem_frame f;
	uint8_t garbage[64];
	unsigned i;

	d = req(RDMEM_OP_KV_PUT, 1, UINT32_MAX); /* a 4 GiB length: no drain, close */
	CHECK(rdmem_frame_parse(&d, 64, CAP, &f) == RDMEM_FRAME_BAD);
	d = req(RDMEM_OP_KV_PUT, 0xffff, 0xfffffff0u);
	CHECK(rdmem_frame_parse(&d, 64, CAP, &f) == RDMEM_FRAME_BAD);
	d = req(RDMEM_OP_KV_PUT, 0, (uint32_t)RDMEM_FRAME_DRAIN_LIMIT + 1);
	CHECK(rdmem_frame_parse(&d, 64, CAP, &f) == RDMEM_FRAME_BAD);

	d = req(RDMEM_OP_PING, 0, 0);
	d.state = 0x12345678;
	CHECK(rdmem_frame_parse(&d, 64, CAP, &f) == RDMEM_FRAME_BAD);
	CHECK(rdmem_frame_parse(&d, 4, CAP, &f) == RDMEM_FRAME_BAD); /* known after 4 bytes */
	CHECK(rdmem_frame_parse(&d, 3, CAP, &f) == RDMEM_FRAME_NEED);

	srand(check_seed("frame fuzz", 7));
	for (i = 0; i < 1000; i++) {
		unsigned j;

		for (j = 0; j < sizeof(garbage); j++)
			garbage[j] = (uint8_t)rand();
		if (rdmem_frame_parse(garbage, sizeof(garbage), CAP, &f) != RDMEM_FRAME_BAD) {
			CHECK(0);
			break;
		}
	}
	memcpy(garbage, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27);
	CHECK(rdmem_frame_parse(garbage, 27, CAP, &f) == RDMEM_FRAME_BAD);
}

static void test_frame_reply_init(void)
{
	struct rdmem_desc d = req(RDMEM_OP_KV_GET, 3, 0), rep;

	d.seq = 9;
	rdmem_frame_reply_init(&rep, &d);
	CHECK(rep.state == RDMEM_FRAME_MAGIC && rep.req_id == 77 && rep.op == RDMEM_OP_KV_GET &&
	      rep.seq == 9 && rep.key_len == 0 && rep.val_len == 0 && rep.status == 0);
}

int main(void)
{
	RUN(test_desc_check);
	RUN(test_frame_ok_and_pipelined);
	RUN(test_frame_byte_by_byte);
	RUN(test_frame_rejects);
	RUN(test_frame_bad);
	RUN(test_frame_reply_init);
	return check_done();
}
