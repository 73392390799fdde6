/* resp_parse.h - the Redis protocol (RESP2/RESP3) for the agent's RESP front
 * end, with no I/O: an incremental request parser (multibulk arrays of bulk
 * strings, and inline "telnet" lines) and a reply encoder into a growable
 * buffer. agent/resp.c does the sockets; this file can be unit-tested and
 * fuzzed on its own (tests/unit/test_resp_parse.c, tests/fuzz/fuzz_resp.c).
 */
#ifndef RDMEM_AGENT_RESP_PARSE_H
#define RDMEM_AGENT_RESP_PARSE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* An inline line, or a header line (*N, $N), longer than this is refused: a
 * peer cannot make the agent buffer an unbounded line. Redis uses 64 KiB. */
#define RDMEM_RESP_MAX_INLINE (64u << 10)
/* Arguments of one command (Redis allows 1024 * 1024; each DEL or MSET key
 * is one call here, and the parser's argument array is sized by this). */
#define RDMEM_RESP_MAX_ARGS (1u << 16)

struct rdmem_resp_limits {
	uint32_t max_bulk; /* largest bulk string accepted (the agent's max value) */
	uint32_t max_args; /* most arguments in one command, at most RDMEM_RESP_MAX_ARGS */
};

struct rdmem_resp_arg {
	const uint8_t *p; /* into the caller's input buffer */
	uint32_t len;
};

struct rdmem_resp_cmd {
	uint32_t argc;		     /* 0: an empty command (blank line, "*0"): skip it */
	uint32_t cap;		     /* entries in argv, set by the caller */
	struct rdmem_resp_arg *argv; /* the caller's array */
};

/*
 * Parses one command at the front of buf[0, len): returns the bytes it took
 * (> 0) with cmd filled, 0 when more bytes are needed, or -1 on a protocol
 * error: why holds a Redis-style message ("Protocol error: ..."), the caller
 * answers it and closes the connection (the stream cannot be resynchronised).
 * Stateless: call it again on the grown buffer; it only scans headers, bulk
 * bodies are skipped by length. When argc would exceed cmd->cap, the command
 * is refused like one over max_args.
 */
ssize_t rdmem_resp_parse(const uint8_t *buf, size_t len, const struct rdmem_resp_limits *lim,
			 struct rdmem_resp_cmd *cmd, char *why, size_t why_len);

/* Where an incomplete command's scan stopped (zeroed: nothing known). */
struct rdmem_resp_resume {
	size_t pos;    /* bytes of the command already checked */
	uint32_t argi; /* multibulk: arguments already checked */
};

/*
 * rdmem_resp_parse, going on from where the last call on this command
 * stopped: without it a command arriving a few bytes at a time is rescanned
 * from its start on every call, quadratic in its arguments (a 65536-argument
 * DEL sent slowly stalled every other connection). rs belongs to the command
 * at buf[0]: the caller keeps the incomplete command at the front of its
 * buffer and zeroes rs when it drops the buffer. Reset to zero when a command
 * completes or fails.
 */
ssize_t rdmem_resp_parse_resume(const uint8_t *buf, size_t len, const struct rdmem_resp_limits *lim,
				struct rdmem_resp_cmd *cmd, char *why, size_t why_len,
				struct rdmem_resp_resume *rs);

/* ---- replies ------------------------------------------------------------- */

/* A growable reply buffer; oom turns 1 when an append could not grow it
 * (the caller closes the connection). */
struct rdmem_resp_out {
	uint8_t *p;
	size_t len, cap;
	size_t off; /* bytes already written to the peer (the sender's cursor) */
	int oom;
};

void rdmem_resp_out_free(struct rdmem_resp_out *o);
/* Drops the sent prefix [0, off) so the buffer does not grow forever. */
void rdmem_resp_out_compact(struct rdmem_resp_out *o);
void rdmem_resp_raw(struct rdmem_resp_out *o, const void *p, size_t n);
void rdmem_resp_simple(struct rdmem_resp_out *o, const char *s); /* +s */
/* -msg: \r and \n in msg become spaces (a reply line cannot hold them). */
void rdmem_resp_error(struct rdmem_resp_out *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void rdmem_resp_int(struct rdmem_resp_out *o, int64_t v);
void rdmem_resp_bulk(struct rdmem_resp_out *o, const void *p, size_t n);
void rdmem_resp_bulk_str(struct rdmem_resp_out *o, const char *s);
void rdmem_resp_nil(struct rdmem_resp_out *o, int proto); /* $-1 (RESP2) or _ (RESP3) */
void rdmem_resp_array(struct rdmem_resp_out *o, size_t n);
/* A map of n pairs: %n on RESP3, an array of 2n on RESP2. */
void rdmem_resp_map(struct rdmem_resp_out *o, size_t n, int proto);

/* The "unknown command" error Redis gives, arguments quoted and cut short. */
void rdmem_resp_unknown(struct rdmem_resp_out *o, const struct rdmem_resp_cmd *cmd);

/* Case-insensitive: is argument a equal to the NUL-terminated word w? */
int rdmem_resp_is(const struct rdmem_resp_arg *a, const char *w);

#endif
