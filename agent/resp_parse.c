/* resp_parse.c - RESP request parsing and reply encoding, no I/O (see
 * resp_parse.h). Every length a peer sends is checked against the limits
 * before anything is sized from it. */
#include "agent/resp_parse.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* "*N\r\n" and "$N\r\n" lines: a sign and 19 digits fit; longer is garbage. */
#define RESP_HDR_MAX 22

static ssize_t resp_fail(char *why, size_t why_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static ssize_t resp_fail(char *why, size_t why_len, const char *fmt, ...)
{
	va_list ap;

	if (why_len) {
		va_start(ap, fmt);
		vsnprintf(why, why_len, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* Offset of the "\r\n" ending the line at buf[0], within max bytes: -1
 * when not there yet, -2 when max bytes passed without one. */
static ssize_t resp_line_end(const uint8_t *buf, size_t len, size_t max)
{
	size_t n = len < max ? len : max;
	const uint8_t *cr = memchr(buf, '\r', n);

	if (!cr)
		return len >= max ? -2 : -1;
	if ((size_t)(cr - buf) + 1 >= len)
		return -1; /* the '\n' has not come yet */
	return cr[1] == '\n' ? cr - buf : -2;
}

/* A decimal in buf[0, n), optional leading '-': 0, or -1 if anything else. */
static int resp_number(const uint8_t *buf, size_t n, long long *out)
{
	size_t i = 0;
	long long v = 0;
	int neg = 0;

	if (n && buf[0] == '-') {
		neg = 1;
		i = 1;
	}
	if (i == n || n - i > 18)
		return -1;
	for (; i < n; i++) {
		if (buf[i] < '0' || buf[i] > '9')
			return -1;
		v = v * 10 + (buf[i] - '0');
	}
	*out = neg ? -v : v;
	return 0;
}

/* One "<type>N\r\n" header at buf: 0 with *v and *used, 1 need more, -1 garbage. */
static int resp_header(const uint8_t *buf, size_t len, long long *v, size_t *used)
{
	ssize_t e = resp_line_end(buf, len, RESP_HDR_MAX);

	if (e == -1)
		return 1;
	if (e < 0 || resp_number(buf + 1, (size_t)e - 1, v) < 0)
		return -1;
	*used = (size_t)e + 2;
	return 0;
}

/* Not complete yet: where the scan stopped, for the next call to go on from. */
static ssize_t resp_need_more(struct rdmem_resp_resume *rs, size_t pos, uint32_t argi)
{
	if (rs) {
		rs->pos = pos;
		rs->argi = argi;
	}
	return 0;
}

static ssize_t resp_parse_multibulk(const uint8_t *buf, size_t len,
				    const struct rdmem_resp_limits *lim, struct rdmem_resp_cmd *cmd,
				    char *why, size_t why_len, struct rdmem_resp_resume *rs)
{
	uint32_t max_args = lim->max_args < cmd->cap ? lim->max_args : cmd->cap;
	size_t pos, used;
	long long n, blen;
	uint32_t i = 0;
	int r, resumed = 0;

	r = resp_header(buf, len, &n, &used);
	if (r)
		return r > 0 ? 0
			     : resp_fail(why, why_len, "Protocol error: invalid multibulk length");
	if (n > (long long)max_args)
		return resp_fail(
		    why, why_len,
		    "Protocol error: invalid multibulk length %lld (limit %u arguments)", n,
		    max_args);
	cmd->argc = 0;
	pos = used;
	if (n <= 0)
		return (ssize_t)pos; /* "*0", "*-1": nothing to run, as Redis */
	if (rs && rs->pos > pos && rs->pos <= len && rs->argi < (uint32_t)n) {
		/* Arguments [0, argi) were checked by an earlier call: go on from
		 * there, so a command trickling in is not rescanned per byte. */
		pos = rs->pos;
		i = rs->argi;
		resumed = 1;
	}
	for (; i < (uint32_t)n; i++) {
		size_t arg = pos;

		if (pos >= len)
			return resp_need_more(rs, arg, i);
		if (buf[pos] != '$')
			return resp_fail(why, why_len, "Protocol error: expected '$', got '%c'",
					 buf[pos] >= 0x20 && buf[pos] < 0x7f ? buf[pos] : '?');
		r = resp_header(buf + pos, len - pos, &blen, &used);
		if (r > 0)
			return resp_need_more(rs, arg, i);
		if (r < 0 || blen < 0)
			return resp_fail(why, why_len, "Protocol error: invalid bulk length");
		if (blen > (long long)lim->max_bulk)
			return resp_fail(why, why_len,
					 "Protocol error: bulk length %lld over the limit %u "
					 "(the agent's --max-value)",
					 blen, lim->max_bulk);
		pos += used;
		if (len - pos < (size_t)blen + 2)
			return resp_need_more(rs, arg, i);
		if (buf[pos + blen] != '\r' || buf[pos + blen + 1] != '\n')
			return resp_fail(why, why_len,
					 "Protocol error: bulk string not followed by CRLF");
		cmd->argv[i].p = buf + pos;
		cmd->argv[i].len = (uint32_t)blen;
		pos += (size_t)blen + 2;
	}
	if (resumed) /* complete: one full pass fills argv from the start */
		return resp_parse_multibulk(buf, len, lim, cmd, why, why_len, NULL);
	cmd->argc = (uint32_t)n;
	return (ssize_t)pos;
}

/* A telnet-style line: arguments split on spaces and tabs (no quoting). */
static ssize_t resp_parse_inline(const uint8_t *buf, size_t len,
				 const struct rdmem_resp_limits *lim, struct rdmem_resp_cmd *cmd,
				 char *why, size_t why_len, struct rdmem_resp_resume *rs)
{
	uint32_t max_args = lim->max_args < cmd->cap ? lim->max_args : cmd->cap;
	size_t n = len < RDMEM_RESP_MAX_INLINE ? len : RDMEM_RESP_MAX_INLINE;
	/* Bytes an earlier call saw without a newline are not searched again. */
	size_t from = rs && rs->pos < n ? rs->pos : 0;
	const uint8_t *nl = memchr(buf + from, '\n', n - from);
	size_t end, i = 0;

	if (!nl) {
		if (len >= RDMEM_RESP_MAX_INLINE)
			return resp_fail(why, why_len,
					 "Protocol error: too big inline request (limit %u bytes)",
					 RDMEM_RESP_MAX_INLINE);
		return resp_need_more(rs, n, 0);
	}
	end = (size_t)(nl - buf);
	if (end && buf[end - 1] == '\r')
		end--;
	cmd->argc = 0;
	while (i < end) {
		size_t start;

		while (i < end && (buf[i] == ' ' || buf[i] == '\t'))
			i++;
		if (i == end)
			break;
		start = i;
		while (i < end && buf[i] != ' ' && buf[i] != '\t')
			i++;
		if (cmd->argc == max_args)
			return resp_fail(why, why_len,
					 "Protocol error: too many arguments in an inline request "
					 "(limit %u)",
					 max_args);
		if (i - start > lim->max_bulk)
			return resp_fail(why, why_len,
					 "Protocol error: inline argument over the limit %u",
					 lim->max_bulk);
		cmd->argv[cmd->argc].p = buf + start;
		cmd->argv[cmd->argc].len = (uint32_t)(i - start);
		cmd->argc++;
	}
	return (ssize_t)(nl - buf) + 1;
}

ssize_t rdmem_resp_parse_resume(const uint8_t *buf, size_t len, const struct rdmem_resp_limits *lim,
				struct rdmem_resp_cmd *cmd, char *why, size_t why_len,
				struct rdmem_resp_resume *rs)
{
	ssize_t n;

	if (why_len)
		why[0] = '\0';
	cmd->argc = 0;
	if (!len)
		return 0;
	n = buf[0] == '*' ? resp_parse_multibulk(buf, len, lim, cmd, why, why_len, rs)
			  : resp_parse_inline(buf, len, lim, cmd, why, why_len, rs);
	if (n != 0 && rs)
		rs->pos = rs->argi = 0; /* the next command starts afresh */
	return n;
}

ssize_t rdmem_resp_parse(const uint8_t *buf, size_t len, const struct rdmem_resp_limits *lim,
			 struct rdmem_resp_cmd *cmd, char *why, size_t why_len)
{
	return rdmem_resp_parse_resume(buf, len, lim, cmd, why, why_len, NULL);
}

/* ---- replies ------------------------------------------------------------- */

void rdmem_resp_out_free(struct rdmem_resp_out *o)
{
	free(o->p);
	memset(o, 0, sizeof(*o));
}

void rdmem_resp_out_compact(struct rdmem_resp_out *o)
{
	if (!o->off)
		return;
	memmove(o->p, o->p + o->off, o->len - o->off);
	o->len -= o->off;
	o->off = 0;
}

static int resp_reserve(struct rdmem_resp_out *o, size_t n)
{
	size_t cap = o->cap ? o->cap : 256;
	uint8_t *p;

	if (o->oom)
		return -1;
	if (o->cap - o->len >= n)
		return 0;
	while (cap - o->len < n) {
		if (cap > SIZE_MAX / 2) {
			o->oom = 1;
			return -1;
		}
		cap *= 2;
	}
	p = realloc(o->p, cap);
	if (!p) {
		o->oom = 1;
		return -1;
	}
	o->p = p;
	o->cap = cap;
	return 0;
}

void rdmem_resp_raw(struct rdmem_resp_out *o, const void *p, size_t n)
{
	if (!n || resp_reserve(o, n))
		return;
	memcpy(o->p + o->len, p, n);
	o->len += n;
}

static void resp_line(struct rdmem_resp_out *o, char type, const char *s, size_t n)
{
	if (resp_reserve(o, n + 3))
		return;
	o->p[o->len++] = (uint8_t)type;
	memcpy(o->p + o->len, s, n);
	o->len += n;
	o->p[o->len++] = '\r';
	o->p[o->len++] = '\n';
}

static void resp_header_out(struct rdmem_resp_out *o, char type, long long v)
{
	char num[24];
	int n = snprintf(num, sizeof(num), "%lld", v);

	resp_line(o, type, num, (size_t)n);
}

void rdmem_resp_simple(struct rdmem_resp_out *o, const char *s)
{
	resp_line(o, '+', s, strlen(s));
}

void rdmem_resp_error(struct rdmem_resp_out *o, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	int n, i;

	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= sizeof(msg))
		n = sizeof(msg) - 1;
	for (i = 0; i < n; i++)
		if (msg[i] == '\r' || msg[i] == '\n')
			msg[i] = ' ';
	resp_line(o, '-', msg, (size_t)n);
}

void rdmem_resp_int(struct rdmem_resp_out *o, int64_t v)
{
	resp_header_out(o, ':', (long long)v);
}

void rdmem_resp_bulk(struct rdmem_resp_out *o, const void *p, size_t n)
{
	resp_header_out(o, '$', (long long)n);
	if (resp_reserve(o, n + 2))
		return;
	if (n)
		memcpy(o->p + o->len, p, n);
	o->len += n;
	o->p[o->len++] = '\r';
	o->p[o->len++] = '\n';
}

void rdmem_resp_bulk_str(struct rdmem_resp_out *o, const char *s)
{
	rdmem_resp_bulk(o, s, strlen(s));
}

void rdmem_resp_nil(struct rdmem_resp_out *o, int proto)
{
	if (proto >= 3)
		rdmem_resp_raw(o, "_\r\n", 3);
	else
		rdmem_resp_raw(o, "$-1\r\n", 5);
}

void rdmem_resp_array(struct rdmem_resp_out *o, size_t n)
{
	resp_header_out(o, '*', (long long)n);
}

void rdmem_resp_map(struct rdmem_resp_out *o, size_t n, int proto)
{
	if (proto >= 3)
		resp_header_out(o, '%', (long long)n);
	else
		resp_header_out(o, '*', (long long)(2 * n));
}

/* Appends 'arg' (cut to fit), as Redis quotes arguments in its errors. */
static size_t resp_quote(char *dst, size_t cap, const struct rdmem_resp_arg *a, size_t max)
{
	size_t n = a->len < max ? a->len : max;
	int w;

	w = snprintf(dst, cap, "'%.*s'", (int)n, (const char *)a->p);
	return w < 0 ? 0 : ((size_t)w >= cap ? cap - 1 : (size_t)w);
}

void rdmem_resp_unknown(struct rdmem_resp_out *o, const struct rdmem_resp_cmd *cmd)
{
	char msg[400], *p = msg;
	size_t left = sizeof(msg), n;
	uint32_t i;

	n = resp_quote(p, left, &cmd->argv[0], 128);
	p += n;
	left -= n;
	n = (size_t)snprintf(p, left, ", with args beginning with: ");
	p += n;
	left -= n;
	/* Redis shows the first arguments, each cut to 128 characters. */
	for (i = 1; i < cmd->argc && p - msg < 256; i++) {
		n = resp_quote(p, left, &cmd->argv[i], 128);
		p += n;
		left -= n;
		if (left > 1) {
			*p++ = ' ';
			*p = '\0';
			left--;
		}
	}
	rdmem_resp_error(o, "ERR unknown command %s", msg);
}

int rdmem_resp_is(const struct rdmem_resp_arg *a, const char *w)
{
	size_t n = strlen(w);

	return a->len == n && strncasecmp((const char *)a->p, w, n) == 0;
}
