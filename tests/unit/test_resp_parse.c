/* test_resp_parse.c - the RESP parser and reply encoder (agent/resp_parse.c):
 * exact arguments for multibulk and inline commands, a frame cut at every
 * byte boundary asks for more (never a command, never an error), pipelined
 * batches parse one command at a time, and hostile lengths, wrong types and
 * nested arrays are refused with a Redis-style reason. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/resp_parse.h"
#include "check.h"

#define MAXA 64

static const struct rdmem_resp_limits lim = { 1024, MAXA };
static struct rdmem_resp_arg argv_[MAXA];
static char why[256];

static ssize_t parse(const char *buf, size_t len, struct rdmem_resp_cmd *cmd)
{
	cmd->cap = MAXA;
	cmd->argv = argv_;
	return rdmem_resp_parse((const uint8_t *)buf, len, &lim, cmd, why, sizeof(why));
}

static int arg_is(const struct rdmem_resp_cmd *c, uint32_t i, const char *s, size_t n)
{
	return i < c->argc && c->argv[i].len == n && memcmp(c->argv[i].p, s, n) == 0;
}

static void test_multibulk_exact(void)
{
	static const char f[] = "*3\r\n$3\r\nSET\r\n$5\r\na\r\nb\0\r\n$0\r\n\r\n";
	struct rdmem_resp_cmd c;

	CHECK_EQ(parse(f, sizeof(f) - 1, &c), (ssize_t)(sizeof(f) - 1));
	CHECK_EQ(c.argc, 3u);
	CHECK(arg_is(&c, 0, "SET", 3));
	CHECK(arg_is(&c, 1, "a\r\nb\0", 5)); /* binary-safe: CR LF NUL inside */
	CHECK(arg_is(&c, 2, "", 0));
}

/* Every proper prefix needs more; the whole frame is one command. */
static void test_truncated_every_boundary(void)
{
	static const char f[] = "*2\r\n$3\r\nGET\r\n$10\r\n0123456789\r\n";
	struct rdmem_resp_cmd c;
	size_t n;

	for (n = 0; n < sizeof(f) - 1; n++) {
		char *copy = malloc(n + 1); /* exact size: ASan sees a read past it */

		memcpy(copy, f, n);
		if (parse(copy, n, &c) != 0) {
			printf("#   prefix of %zu bytes did not ask for more (%s)\n", n, why);
			CHECK(0);
		}
		free(copy);
	}
	CHECK_EQ(parse(f, sizeof(f) - 1, &c), (ssize_t)(sizeof(f) - 1));
	CHECK(arg_is(&c, 1, "0123456789", 10));
}

static void test_inline(void)
{
	struct rdmem_resp_cmd c;

	CHECK_EQ(parse("PING\r\n", 6, &c), 6);
	CHECK_EQ(c.argc, 1u);
	CHECK(arg_is(&c, 0, "PING", 4));
	CHECK_EQ(parse("  set  k\tv \n", 12, &c), 12); /* bare LF, extra blanks */
	CHECK_EQ(c.argc, 3u);
	CHECK(arg_is(&c, 0, "set", 3) && arg_is(&c, 1, "k", 1) && arg_is(&c, 2, "v", 1));
	CHECK_EQ(parse("\r\n", 2, &c), 2); /* an empty line: nothing to run */
	CHECK_EQ(c.argc, 0u);
	CHECK_EQ(parse("GET k", 5, &c), 0); /* no newline yet */
}

static void test_inline_too_long(void)
{
	size_t n = RDMEM_RESP_MAX_INLINE;
	char *big = malloc(n);
	struct rdmem_resp_cmd c;

	memset(big, 'a', n);
	CHECK_EQ(parse(big, n - 1, &c), 0);
	CHECK_EQ(parse(big, n, &c), -1);
	CHECK(strstr(why, "too big inline request") != NULL);
	free(big);
}

/* Three commands in one buffer come out one at a time, in order. */
static void test_pipelined_batch(void)
{
	static const char f[] =
	    "*1\r\n$4\r\nPING\r\nECHO hi\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*0\r\n";
	const char *p = f, *end = f + sizeof(f) - 1;
	struct rdmem_resp_cmd c;
	ssize_t n;

	CHECK((n = parse(p, (size_t)(end - p), &c)) == 14 && arg_is(&c, 0, "PING", 4));
	p += n;
	CHECK((n = parse(p, (size_t)(end - p), &c)) == 9 && c.argc == 2 && arg_is(&c, 1, "hi", 2));
	p += n;
	CHECK((n = parse(p, (size_t)(end - p), &c)) == 20 && arg_is(&c, 1, "k", 1));
	p += n;
	CHECK((n = parse(p, (size_t)(end - p), &c)) == 4 && c.argc == 0);
	p += n;
	CHECK(p == end);
}

static void expect_error(const char *frame, size_t len, const char *reason)
{
	struct rdmem_resp_cmd c;
	ssize_t n = parse(frame, len, &c);

	if (n != -1 || !strstr(why, reason)) {
		printf("#   '%.*s': got %zd '%s', wanted an error with '%s'\n", (int)len, frame, n,
		       why, reason);
		CHECK(0);
	}
}

static void test_hostile_lengths(void)
{
	/* Over the limit: refused from the header alone, nothing buffered. */
	expect_error("*1\r\n$1025\r\n", 11, "bulk length 1025 over the limit 1024");
	expect_error("*1\r\n$99999999999999999999\r\n", 27, "invalid bulk length");
	expect_error("*1\r\n$-1\r\n", 9, "invalid bulk length");
	expect_error("*1\r\n$x\r\n", 8, "invalid bulk length");
	expect_error("*1\r\n$\r\n", 7, "invalid bulk length");
	expect_error("*65\r\n", 5, "invalid multibulk length 65");
	expect_error("*1x\r\n", 5, "invalid multibulk length");
	expect_error("*12345678901234567890123456\r\n", 29, "invalid multibulk length");
	/* A header line that never ends is refused once it cannot be a number. */
	expect_error("*111111111111111111111111", 25, "invalid multibulk length");
	expect_error("*1\r\n$3\r\nabcXY", 13, "not followed by CRLF");
}

static void test_wrong_types_and_nesting(void)
{
	expect_error("*1\r\n:5\r\n", 8, "expected '$', got ':'");
	expect_error("*1\r\n+OK\r\n", 9, "expected '$', got '+'");
	expect_error("*2\r\n*1\r\n$1\r\na\r\n", 15, "expected '$', got '*'"); /* nested */
}

static void test_negative_count_is_empty(void)
{
	struct rdmem_resp_cmd c;

	CHECK_EQ(parse("*-1\r\n", 5, &c), 5);
	CHECK_EQ(c.argc, 0u);
}

static void test_encoder(void)
{
	struct rdmem_resp_out o = { 0 };
	static const char want[] = "+OK\r\n-ERR a  b\r\n:-7\r\n$3\r\na\0b\r\n$-1\r\n_\r\n*2\r\n"
				   "%1\r\n*2\r\n";
	struct rdmem_resp_arg a[3] = { { (const uint8_t *)"FOO", 3 },
				       { (const uint8_t *)"x", 1 },
				       { (const uint8_t *)"y", 1 } };
	struct rdmem_resp_cmd c = { 3, 3, a };

	rdmem_resp_simple(&o, "OK");
	rdmem_resp_error(&o, "ERR a\r\nb"); /* CR LF cannot end up in a reply line */
	rdmem_resp_int(&o, -7);
	rdmem_resp_bulk(&o, "a\0b", 3);
	rdmem_resp_nil(&o, 2);
	rdmem_resp_nil(&o, 3);
	rdmem_resp_array(&o, 2);
	rdmem_resp_map(&o, 1, 3);
	rdmem_resp_map(&o, 1, 2);
	CHECK(!o.oom && o.len == sizeof(want) - 1 && memcmp(o.p, want, o.len) == 0);
	o.len = 0;
	rdmem_resp_unknown(&o, &c);
	CHECK(o.len > 0 && memcmp(o.p,
				  "-ERR unknown command 'FOO', with args beginning with: 'x' 'y' "
				  "\r\n",
				  o.len) == 0);
	rdmem_resp_out_free(&o);
}

int main(void)
{
	RUN(test_multibulk_exact);
	RUN(test_truncated_every_boundary);
	RUN(test_inline);
	RUN(test_inline_too_long);
	RUN(test_pipelined_batch);
	RUN(test_hostile_lengths);
	RUN(test_wrong_types_and_nesting);
	RUN(test_negative_count_is_empty);
	RUN(test_encoder);
	return check_done();
}
