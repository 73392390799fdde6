/* test_frame_tag.c - golden bytes of wire version 3's TCP frame MACs
 * (tcp/frame_mac.h, rdmem_auth_tcp_keys): the per-connection keys, the
 * server's AUTH proof and the tags are pinned to values computed outside
 * this code (Python's hashlib/hmac: keyed BLAKE2b-128 over the LE sequence
 * number, the 64 header bytes and the payload; HMAC-SHA-256 for the keys),
 * so an agent and a server built apart agree. Also: a tag checked in pieces
 * of any size, and what must not verify (another sequence number, the other
 * direction's key, one bit changed).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "rdmem/auth.h"
#include "rdmem/byteorder.h"
#include "rdmem/util.h"
#include "tcp/frame.h"
#include "tcp/frame_mac.h"
#include "tmpdir.h"

static const uint8_t golden_to_server[32] = {
	0xd0, 0x17, 0xe3, 0x52, 0x3d, 0x13, 0xcb, 0xa8, 0x08, 0x67, 0xaf,
	0xd3, 0x89, 0x21, 0x9a, 0x74, 0x19, 0x46, 0x32, 0xb5, 0xa8, 0x32,
	0x78, 0x66, 0xa6, 0xa9, 0x64, 0xa2, 0x39, 0x27, 0x71, 0x4c,
};
/* Agent to server, sequence 5, header bytes 0..63, payload "key" "value!". */
static const uint8_t golden_tag_a2s[RDMEM_FRAME_TAG] = {
	0x5d, 0x4c, 0x50, 0xc5, 0xd0, 0xbe, 0x55, 0x22,
	0xa6, 0xca, 0x8c, 0xdd, 0xd9, 0xc1, 0x87, 0x84,
};
/* Server to agent, sequence 0, the same header, no payload. */
static const uint8_t golden_tag_s2a[RDMEM_FRAME_TAG] = {
	0x21, 0xf3, 0xad, 0xfc, 0x0e, 0x7c, 0x9a, 0xce,
	0x05, 0xc5, 0x0b, 0x20, 0x74, 0x53, 0x9b, 0x87,
};
static const uint8_t golden_proof[RDMEM_AUTH_MAC] = {
	0xbf, 0x33, 0x13, 0x9d, 0xc4, 0x18, 0x0c, 0x67,
	0x1f, 0x9c, 0x97, 0x77, 0x68, 0xa4, 0x56, 0x59,
};

static struct rdmem_auth *auth;
static uint64_t an, sn; /* the nonces as wire bytes */
static uint8_t hdr[RDMEM_DESC_SIZE];

static void test_keys_and_proof(void)
{
	uint8_t to_server[RDMEM_AUTH_TCP_KEY], to_agent[RDMEM_AUTH_TCP_KEY], proof[RDMEM_AUTH_MAC];

	rdmem_auth_tcp_keys(auth, an, sn, to_server, to_agent);
	CHECK(memcmp(to_server, golden_to_server, sizeof(to_server)) == 0);
	CHECK(memcmp(to_server, to_agent, sizeof(to_agent)) != 0);
	rdmem_auth_mac(auth, "server-tcp", &an, sizeof(an), &sn, sizeof(sn), proof, sizeof(proof));
	CHECK(memcmp(proof, golden_proof, sizeof(proof)) == 0);
	/* The AUTH reply value: the server's nonce (8 bytes), then its proof. */
	CHECK_EQ(sizeof(struct rdmem_auth_tcp_reply), 8 + RDMEM_AUTH_MAC);
}

static void test_golden_tags(void)
{
	struct rdmem_frame_mac *agent = rdmem_frame_mac_tcp(auth, an, sn, 0);
	struct rdmem_frame_mac *server = rdmem_frame_mac_tcp(auth, an, sn, 1);
	uint8_t tag[RDMEM_FRAME_TAG];

	REQUIRE(agent && server);
	rdmem_frame_mac_sign(agent, 5, hdr, "key", 3, "value!", 6, tag);
	CHECK(memcmp(tag, golden_tag_a2s, sizeof(tag)) == 0);
	rdmem_frame_mac_sign(server, 0, hdr, NULL, 0, NULL, 0, tag);
	CHECK(memcmp(tag, golden_tag_s2a, sizeof(tag)) == 0);
	rdmem_frame_mac_free(agent);
	rdmem_frame_mac_free(server);
}

/* Checks the frame hdr + "keyvalue!" + tag as it would arrive in pieces of `piece` bytes. */
static int check_stream(struct rdmem_frame_mac *m, uint64_t seq, const uint8_t *tag, size_t piece)
{
	uint8_t stream[9 + RDMEM_FRAME_TAG + 7];
	size_t len = 9 + RDMEM_FRAME_TAG, at = 0;

	memcpy(stream, "keyvalue!", 9);
	memcpy(stream + 9, tag, RDMEM_FRAME_TAG);
	memcpy(stream + len, "NEXTFRM", 7); /* the next frame's bytes are not taken */
	rdmem_frame_mac_begin(m, seq, hdr, 9);
	while (!rdmem_frame_mac_done(m)) {
		size_t n = sizeof(stream) - at < piece ? sizeof(stream) - at : piece;

		at += rdmem_frame_mac_absorb(m, stream + at, n);
	}
	if (at != len)
		return -ERANGE;
	return rdmem_frame_mac_verify(m);
}

static void test_stream_and_forgeries(void)
{
	struct rdmem_frame_mac *agent = rdmem_frame_mac_tcp(auth, an, sn, 0);
	struct rdmem_frame_mac *server = rdmem_frame_mac_tcp(auth, an, sn, 1);
	uint8_t bad[RDMEM_FRAME_TAG];
	size_t piece;

	REQUIRE(agent && server);
	for (piece = 1; piece <= 40; piece++)
		CHECK_EQ(check_stream(server, 5, golden_tag_a2s, piece), 0);
	CHECK_EQ(check_stream(server, 6, golden_tag_a2s, 64), -EBADMSG); /* replayed, reordered */
	CHECK_EQ(check_stream(agent, 5, golden_tag_a2s, 64), -EBADMSG);	 /* reflected */
	memcpy(bad, golden_tag_a2s, sizeof(bad));
	bad[15] ^= 0x80;
	CHECK_EQ(check_stream(server, 5, bad, 64), -EBADMSG);
	hdr[12] ^= 1; /* the status field */
	CHECK_EQ(check_stream(server, 5, golden_tag_a2s, 64), -EBADMSG);
	hdr[12] ^= 1;
	rdmem_frame_mac_free(agent);
	rdmem_frame_mac_free(server);
}

/* After AUTH a frame is header + payload + tag: len and need count the tag. */
static void test_parse_counts_the_tag(void)
{
	struct rdmem_desc d = { .state = RDMEM_FRAME_MAGIC, .op = RDMEM_OP_ECHO, .val_len = 10 };
	uint8_t buf[RDMEM_DESC_SIZE + 10 + RDMEM_FRAME_TAG] = { 0 };
	struct rdmem_frame f;

	rdmem_frame_put(buf, &d);
	CHECK(rdmem_frame_parse_tagged(buf, sizeof(buf) - 1, RDMEM_DEFAULT_MAX_VALUE,
				       RDMEM_FRAME_TAG, &f) == RDMEM_FRAME_NEED);
	CHECK_EQ(f.need, 1);
	CHECK(rdmem_frame_parse_tagged(buf, sizeof(buf), RDMEM_DEFAULT_MAX_VALUE, RDMEM_FRAME_TAG,
				       &f) == RDMEM_FRAME_OK);
	CHECK_EQ(f.len, sizeof(buf));
	CHECK(rdmem_frame_parse(buf, RDMEM_DESC_SIZE + 10, RDMEM_DEFAULT_MAX_VALUE, &f) ==
	      RDMEM_FRAME_OK);
	CHECK_EQ(f.len, RDMEM_DESC_SIZE + 10);
}

int main(void)
{
	char path[64];
	const char *secret = "correct horse battery staple\n";
	int fd, i;

	snprintf(path, sizeof(path), "%s/rdmem-tag-secret-%d", test_tmpdir(), (int)getpid());
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || write(fd, secret, strlen(secret)) != (ssize_t)strlen(secret))
		return 1;
	close(fd);
	rdmem_log_init("test_frame_tag", 0);
	if (rdmem_auth_load(path, &auth) < 0)
		return 1;
	unlink(path);
	an = rdmem_le64(0x0123456789abcdefull);
	sn = rdmem_le64(0xfedcba9876543210ull);
	for (i = 0; i < RDMEM_DESC_SIZE; i++)
		hdr[i] = (uint8_t)i;
	RUN(test_keys_and_proof);
	RUN(test_golden_tags);
	RUN(test_stream_and_forgeries);
	RUN(test_parse_counts_the_tag);
	rdmem_auth_free(auth);
	return check_done();
}
