/* test_resp_resume.c - rdmem_resp_parse_resume (agent/resp_parse.c): a
 * command fed in pieces, each call going on from where the last stopped,
 * parses to the same arguments as in one piece, at every step size; the
 * state is dropped once a command completes or fails; and a 65536-argument
 * command arriving 16 bytes at a time costs linear work, where rescanning
 * from its start on every call (the parser before resume) took minutes of
 * CPU and stalled every other RESP connection of the agent. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/resp_parse.h"
#include "check.h"

#define NARGS 65536u

static struct rdmem_resp_limits lim = { 1u << 20, NARGS };
static struct rdmem_resp_arg *one, *pieces;
static char why[256];

static ssize_t parse(const uint8_t *b, size_t n, struct rdmem_resp_arg *argv,
		     struct rdmem_resp_cmd *c, struct rdmem_resp_resume *rs)
{
	c->cap = NARGS;
	c->argv = argv;
	return rdmem_resp_parse_resume(b, n, &lim, c, why, sizeof(why), rs);
}

/* A multibulk command of n arguments "a<i>" (and a binary one), its length in *len. */
static uint8_t *frame(uint32_t n, size_t *len)
{
	size_t cap = 64 + (size_t)n * 24, off;
	uint8_t *f = malloc(cap);
	uint32_t i;

	static const char bin[] = "$5\r\nx\r\n\0y\r\n"; /* CR LF NUL inside */

	off = (size_t)snprintf((char *)f, cap, "*%u\r\n", n + 1);
	memcpy(f + off, bin, sizeof(bin) - 1);
	off += sizeof(bin) - 1;
	for (i = 0; i < n; i++) {
		char a[16];
		int k = snprintf(a, sizeof(a), "a%u", i);

		off += (size_t)snprintf((char *)f + off, cap - off, "$%d\r\n%s\r\n", k, a);
	}
	*len = off;
	return f;
}

/* Fed step bytes more each call: 0 until the end, then the one-piece parse. */
static int fed_in_steps(const uint8_t *f, size_t len, size_t step)
{
	struct rdmem_resp_resume rs = { 0 };
	struct rdmem_resp_cmd a, b;
	ssize_t whole = parse(f, len, one, &a, NULL), r = 0;
	size_t n;
	uint32_t i;

	for (n = step < len ? step : len; n < len; n += step) {
		uint8_t *copy = malloc(n); /* exact size: ASan sees a read past it */

		memcpy(copy, f, n);
		r = parse(copy, n, pieces, &b, &rs);
		free(copy);
		if (r != 0) {
			printf("#   %zu of %zu bytes (step %zu): %zd (%s)\n", n, len, step, r, why);
			return 0;
		}
	}
	r = parse(f, len, pieces, &b, &rs);
	if (r != whole || b.argc != a.argc || rs.pos || rs.argi)
		return 0;
	for (i = 0; i < a.argc; i++)
		if (a.argv[i].len != b.argv[i].len || a.argv[i].p != b.argv[i].p)
			return 0;
	return 1;
}

static void test_same_args_every_step(void)
{
	static const char inl[] = "SET  key \t value\r\n";
	size_t len, step;
	uint8_t *f = frame(300, &len);

	for (step = 1; step <= 97; step += step < 8 ? 1 : 13)
		CHECK(fed_in_steps(f, len, step));
	CHECK(fed_in_steps(f, len, len));
	for (step = 1; step < sizeof(inl); step++)
		CHECK(fed_in_steps((const uint8_t *)inl, sizeof(inl) - 1, step));
	free(f);
}

/* A pipeline: the state of a finished command does not leak into the next. */
static void test_state_dropped_after_a_command(void)
{
	static const char two[] = "*2\r\n$3\r\nGET\r\n$3\r\nabc\r\n*1\r\n$4\r\nPING\r\n";
	struct rdmem_resp_resume rs = { 0 };
	struct rdmem_resp_cmd c;

	CHECK_EQ(parse((const uint8_t *)two, 17, pieces, &c, &rs), 0);
	CHECK(rs.pos > 0 && rs.argi == 1);
	CHECK_EQ(parse((const uint8_t *)two, sizeof(two) - 1, pieces, &c, &rs), 22);
	CHECK(rs.pos == 0 && rs.argi == 0);
	CHECK_EQ(parse((const uint8_t *)two + 22, sizeof(two) - 1 - 22, pieces, &c, &rs), 14);
	CHECK(c.argc == 1 && c.argv[0].len == 4 && !memcmp(c.argv[0].p, "PING", 4));
	/* A failure drops it too. */
	CHECK_EQ(parse((const uint8_t *)"*2\r\n$3\r\nGET\r\n$", 14, pieces, &c, &rs), 0);
	CHECK_EQ(parse((const uint8_t *)"*2\r\n$3\r\nGET\r\n$x\r\n", 17, pieces, &c, &rs), -1);
	CHECK(rs.pos == 0 && rs.argi == 0);
}

static double cpu_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* 786 KB in 16-byte steps: 49k calls. Rescanning from the start each time
 * walks ~32k headers per call (1.6e9 in all); going on walks each once. */
static void test_trickle_is_linear(void)
{
	struct rdmem_resp_resume rs = { 0 };
	struct rdmem_resp_cmd c;
	size_t len, n;
	uint8_t *f = frame(NARGS - 1, &len);
	double t0 = cpu_s(), took;
	ssize_t r = 0;

	for (n = 16; n < len && r == 0; n += 16)
		r = parse(f, n, pieces, &c, &rs);
	CHECK_EQ(r, 0);
	CHECK_EQ(parse(f, len, pieces, &c, &rs), (ssize_t)len);
	CHECK_EQ(c.argc, NARGS);
	took = cpu_s() - t0;
	printf("#   %zu bytes in 16-byte steps: %.3f s of CPU\n", len, took);
	CHECK(took < 2.0);
	free(f);
}

int main(void)
{
	one = calloc(NARGS, sizeof(*one));
	pieces = calloc(NARGS, sizeof(*pieces));
	if (!one || !pieces)
		return 1;
	RUN(test_same_args_every_step);
	RUN(test_state_dropped_after_a_command);
	RUN(test_trickle_is_linear);
	free(one);
	free(pieces);
	return check_done();
}
