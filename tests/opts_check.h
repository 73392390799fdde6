/* opts_check.h - checks a daemon's numeric-option table (struct
 * rdmem_opt_num, include/rdmem/util.h) against the built program: every
 * flag is in -h, a value just outside the range is refused (exit 2) with a
 * message naming the flag and the limit, and both limits fit the field. */
#ifndef RDMEM_TESTS_OPTS_CHECK_H
#define RDMEM_TESTS_OPTS_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "rdmem/util.h"
#include "tests/check.h"
#include "tests/proc.h"

/* Runs cmd; returns its exit status and what it wrote (stdout and stderr). */
static int opts_run(const char *cmd, char *out, size_t cap)
{
	char full[1024];
	FILE *f;
	size_t n;
	int st;

	snprintf(full, sizeof(full), "%s 2>&1", cmd);
	f = popen(full, "r");
	if (!f)
		return -1;
	n = fread(out, 1, cap - 1, f);
	out[n] = '\0';
	st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* flag as a word of the help text: "--port N", not inside "--tcp-port". */
static int opts_in_help(const char *help, const char *flag)
{
	size_t n = strlen(flag);
	const char *p;

	for (p = strstr(help, flag); p; p = strstr(p + 1, flag))
		if ((p == help || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\n'))
			return 1;
	return 0;
}

static uint64_t opts_field(const struct rdmem_opt_num *e, const void *opts)
{
	const char *p = (const char *)opts + e->off;
	uint16_t v16;
	uint32_t v32;
	uint64_t v64;

	if (e->width == 2) {
		memcpy(&v16, p, 2);
		return v16;
	}
	if (e->width == 4) {
		memcpy(&v32, p, 4);
		return v32;
	}
	memcpy(&v64, p, 8);
	return v64;
}

/* A value refused: exit 2, and the message names the flag and the limit. */
static void opts_refused(const char *prog, const char *pre, const struct rdmem_opt_num *e,
			 unsigned long long bad, unsigned long long limit)
{
	char cmd[512], out[4096], want[32];
	int st;

	snprintf(cmd, sizeof(cmd), "%s/%s %s %s %llu", proc_bin(), prog, pre, e->flag, bad);
	st = opts_run(cmd, out, sizeof(out));
	snprintf(want, sizeof(want), "%llu", limit);
	if (st != 2 || !strstr(out, e->flag) || !strstr(out, want))
		printf("#   %s: exit %d: %s", cmd, st, out);
	CHECK_EQ(st, 2);
	CHECK(strstr(out, e->flag) && strstr(out, want));
}

static void opts_check(const char *prog, const char *pre, const struct rdmem_opt_num *t, size_t n,
		       void *opts)
{
	static char help[16384];
	char cmd[512], arg[32];
	size_t i;

	snprintf(cmd, sizeof(cmd), "%s/%s -h", proc_bin(), prog);
	REQUIRE(opts_run(cmd, help, sizeof(help)) == 0);
	for (i = 0; i < n; i++) {
		const struct rdmem_opt_num *e = &t[i];

		if (!opts_in_help(help, e->flag))
			printf("#   %s -h does not show %s\n", prog, e->flag);
		CHECK(opts_in_help(help, e->flag));
		/* both limits are accepted and land in the field unchanged */
		snprintf(arg, sizeof(arg), "%llu", (unsigned long long)e->lo);
		CHECK_EQ(rdmem_opt_num_parse(t, n, e->code, arg, prog, opts), 0);
		CHECK_EQ(opts_field(e, opts), e->lo);
		snprintf(arg, sizeof(arg), "%llu", (unsigned long long)e->hi);
		CHECK_EQ(rdmem_opt_num_parse(t, n, e->code, arg, prog, opts), 0);
		CHECK_EQ(opts_field(e, opts), e->hi);
		if (e->hi < UINT64_MAX)
			opts_refused(prog, pre, e, (unsigned long long)e->hi + 1, e->hi);
		if (e->lo > 0)
			opts_refused(prog, pre, e, (unsigned long long)e->lo - 1, e->lo);
	}
}

#endif
