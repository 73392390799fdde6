/* resp.c - the agent's Redis protocol front end: one epoll thread accepts
 * RESP connections (loopback TCP, Unix socket), parses commands
 * (agent/resp_parse.c) and carries each data command as librdmem calls on
 * the agent's own front door, so a Redis client's GET goes the way an app's
 * rdmem_get() goes: same path selection, fallback and deadlines. Calls are
 * pipelined with the library's async API (rdmem_submit/rdmem_poll) up to the
 * handle's slots; replies go out in each connection's command order.
 * Design and limits: docs/architecture.md, "The Redis protocol front end".
 */
#include "agent/resp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent/resp_mem.h"
#include "agent/resp_parse.h"
#include "agent/unix_at.h"
#include "common/metrics.h"
#include "libclient/rdmem.h"
#include "rdmem/blob.h"
#include "rdmem/util.h"

/* Commands parsed ahead of their replies, per connection: the pipeline depth
 * one client may hold in the agent. */
#define RESP_MAX_QUEUED 1024u
/* A drained input or output buffer larger than this is freed: buffers do
 * not shrink by themselves, so one large value would leave its capacity
 * with the connection for good, counted against --resp-max-memory while
 * the connection sits idle. Smaller ones are kept: no malloc per command. */
#define RESP_BUF_KEEP (64u << 10)
/* Idle loop: spin this many empty rounds with calls in flight, then yield,
 * then sleep in epoll_wait 1 ms at a time. */
#define RESP_SPIN_ROUNDS  64
#define RESP_YIELD_ROUNDS 2048

enum resp_kind {
	K_LOCAL, /* answered by the agent itself, reply prebuilt */
	K_PING,
	K_ECHO,
	K_GET,
	K_SET,
	K_DEL,
	K_EXISTS,
	K_MGET,
	K_MSET,
};

struct resp_conn;
struct resp_call;

struct resp_cmd {
	struct resp_cmd *next;
	struct resp_conn *conn;
	int kind;
	int proto; /* the connection's RESP version when the command came (HELLO may follow) */
	uint32_t nsub, submitted, done;
	int64_t count;		/* DEL, EXISTS: keys found */
	int rc;			/* first error of a multi-call command */
	struct resp_call *held; /* the finished call whose reply is still to encode */
	struct rdmem_resp_out local;
	uint8_t *args; /* a copy of the arguments: argv points into it */
	struct rdmem_resp_arg *argv;
	uint32_t argc;
	size_t bytes; /* counted in conn->queued_bytes */
	void *mget_req;
	uint32_t mget_len;
};

struct resp_call {
	struct rdmem_rpc rpc;
	struct resp_cmd *cmd; /* NULL: free */
	int inflight;
};

struct resp_conn {
	struct resp_conn *next, *prev;
	int fd;
	uint64_t id;
	int proto;	   /* 2 or 3 (HELLO) */
	int closing;	   /* QUIT or protocol error: flush, then close */
	int eof;	   /* the peer shut its side: answer what came, then close */
	int parse_held;	   /* input left unparsed because the connection was paused */
	int paused;	   /* input not read: counted in resp.paused when it starts */
	int dead;	   /* the socket failed: drop replies, free once no call is in flight */
	uint32_t events;   /* what epoll watches now */
	uint64_t heard_ns; /* when the peer last sent bytes (or connected) */
	char name[64];
	char addr[64];
	uint8_t *in;
	size_t in_len, in_cap;
	struct rdmem_resp_resume resume; /* the scan of the command at in[0] so far */
	struct rdmem_resp_out out;
	struct resp_cmd *head, *tail, *unsent; /* unsent: first not fully submitted */
	uint32_t queued;
	size_t queued_bytes;		/* memory the queued commands hold (resp_cmd.bytes) */
	uint32_t inflight;		/* calls of this connection in flight */
	struct rdmem_resp_mem_conn mem; /* its share of r->mem, as of its last event */
};

struct rdmem_resp {
	struct rdmem_resp_config cfg;
	rdmem_t *h;
	int ep, evfd, lfd_tcp, lfd_unix;
	struct rdmem_unix_at unix_at; /* --resp-socket's directory and name */
	struct stat unix_st;	      /* the socket file bound there: removed at exit if still it */
	pthread_t thread;
	int started;
	struct resp_conn *conns;
	uint32_t nconns;
	uint64_t next_id, start_ns;
	struct resp_call *calls;
	uint32_t ncalls, busy;
	int starved; /* a connection has work for the next pass: do not sleep */
	struct resp_conn *lead, *first_starved; /* who goes first next pass (fairness) */
	struct resp_conn *pass_lead;		/* who went first this pass */
	struct rdmem_resp_limits lim;
	uint32_t max_value;
	size_t in_max;		   /* largest input one connection may buffer */
	size_t queued_max;	   /* queued bytes past which a connection is paused */
	struct rdmem_resp_mem mem; /* bytes all connections hold (--resp-max-memory) */
	struct rdmem_resp_arg *argv;
	char why[256];
};

/* One RESP front end per agent process; its thread is the one writer. */
static struct {
	atomic_uint_fast64_t conns, clients, cmds, errors, protocol_errors, refused, paused,
	    evicted, evicted_memory, memory;
} resp_ctr;

static void resp_count(atomic_uint_fast64_t *c, int64_t n)
{
	rdmem_count_single(c, (uint64_t)n); /* the one writer; n < 0 wraps back */
}

void rdmem_resp_stats_read(struct rdmem_resp_stats *o)
{
	/* Relaxed: independent counters, shown as they are. */
	o->conns = atomic_load_explicit(&resp_ctr.conns, memory_order_relaxed);
	o->clients = atomic_load_explicit(&resp_ctr.clients, memory_order_relaxed);
	o->cmds = atomic_load_explicit(&resp_ctr.cmds, memory_order_relaxed);
	o->errors = atomic_load_explicit(&resp_ctr.errors, memory_order_relaxed);
	o->protocol_errors = atomic_load_explicit(&resp_ctr.protocol_errors, memory_order_relaxed);
	o->refused = atomic_load_explicit(&resp_ctr.refused, memory_order_relaxed);
	o->paused = atomic_load_explicit(&resp_ctr.paused, memory_order_relaxed);
	o->evicted = atomic_load_explicit(&resp_ctr.evicted, memory_order_relaxed);
	o->evicted_memory = atomic_load_explicit(&resp_ctr.evicted_memory, memory_order_relaxed);
	o->memory = atomic_load_explicit(&resp_ctr.memory, memory_order_relaxed);
}

/* ---- replies ---------------------------------------------------------------- */

static void resp_err(struct rdmem_resp_out *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void resp_err(struct rdmem_resp_out *o, const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	rdmem_resp_error(o, "%s", msg);
	resp_count(&resp_ctr.errors, 1);
}

/* A failed call, in Redis words. */
static void resp_err_rc(struct rdmem_resp *r, struct rdmem_resp_out *o, int rc)
{
	if (rc == -E2BIG)
		resp_err(o,
			 "ERR value too big for rdmem: over the limit %u bytes (the agent's or "
			 "server's --max-value)",
			 r->max_value);
	else if (rc == -ENOSPC) /* Redis's words, so clients raise their out-of-memory error */
		resp_err(o, "OOM command not allowed when used memory > 'maxmemory' (the rdmem "
			    "server's store is full: its --kv-max-bytes)");
	else
		resp_err(o, "ERR rdmem: %s (errno %d)", rdmem_strerror(rc), -rc);
}

static void resp_arity(struct rdmem_resp_out *o, const struct rdmem_resp_arg *name)
{
	char lower[32];
	uint32_t i, n = name->len < sizeof(lower) - 1 ? name->len : sizeof(lower) - 1;

	for (i = 0; i < n; i++) {
		char ch = (char)name->p[i];

		lower[i] = ch >= 'A' && ch <= 'Z' ? (char)(ch - 'A' + 'a') : ch;
	}
	lower[n] = '\0';
	resp_err(o, "ERR wrong number of arguments for '%s' command", lower);
}

/* ---- local commands --------------------------------------------------------- */

static void resp_hello_reply(struct rdmem_resp *r, struct resp_conn *c, struct rdmem_resp_out *o)
{
	rdmem_resp_map(o, 7, c->proto);
	rdmem_resp_bulk_str(o, "server");
	rdmem_resp_bulk_str(o, "redis");
	rdmem_resp_bulk_str(o, "version");
	rdmem_resp_bulk_str(o, "7.0.0");
	rdmem_resp_bulk_str(o, "proto");
	rdmem_resp_int(o, c->proto);
	rdmem_resp_bulk_str(o, "id");
	rdmem_resp_int(o, (int64_t)c->id);
	rdmem_resp_bulk_str(o, "mode");
	rdmem_resp_bulk_str(o, "standalone");
	rdmem_resp_bulk_str(o, "role");
	rdmem_resp_bulk_str(o, "master");
	rdmem_resp_bulk_str(o, "modules");
	rdmem_resp_array(o, 0);
	(void)r;
}

/* A client name: printable, no spaces (as Redis requires). */
static int resp_name_ok(const struct rdmem_resp_arg *a, size_t cap)
{
	uint32_t i;

	if (a->len >= cap)
		return 0;
	for (i = 0; i < a->len; i++)
		if (a->p[i] <= ' ' || a->p[i] >= 0x7f)
			return 0;
	return 1;
}

static void resp_setname(struct resp_conn *c, const struct rdmem_resp_arg *a,
			 struct rdmem_resp_out *o)
{
	if (!resp_name_ok(a, sizeof(c->name))) {
		resp_err(o,
			 "ERR Client names cannot contain spaces, newlines or special "
			 "characters, and are at most %zu bytes",
			 sizeof(c->name) - 1);
		return;
	}
	memcpy(c->name, a->p, a->len);
	c->name[a->len] = '\0';
	rdmem_resp_simple(o, "OK");
}

/* HELLO [protover [AUTH user pass] [SETNAME name]] */
static void resp_hello(struct rdmem_resp *r, struct resp_conn *c, const struct rdmem_resp_cmd *m,
		       struct rdmem_resp_out *o)
{
	uint32_t i = 2;
	int proto = c->proto;

	if (m->argc >= 2) {
		if (rdmem_resp_is(&m->argv[1], "2"))
			proto = 2;
		else if (rdmem_resp_is(&m->argv[1], "3"))
			proto = 3;
		else {
			resp_err(o, "NOPROTO unsupported protocol version");
			return;
		}
	}
	for (; i < m->argc; i++) {
		if (rdmem_resp_is(&m->argv[i], "AUTH")) {
			resp_err(o, "ERR AUTH is not supported by rdmem-agent: its RESP port has "
				    "no passwords (keep --resp-bind on loopback or use "
				    "--resp-socket)");
			return;
		}
		if (rdmem_resp_is(&m->argv[i], "SETNAME") && i + 1 < m->argc) {
			if (!resp_name_ok(&m->argv[i + 1], sizeof(c->name))) {
				resp_err(o, "ERR Client names cannot contain spaces, newlines or "
					    "special characters");
				return;
			}
			memcpy(c->name, m->argv[i + 1].p, m->argv[i + 1].len);
			c->name[m->argv[i + 1].len] = '\0';
			i++;
			continue;
		}
		resp_err(o, "ERR Syntax error in HELLO option '%.*s'",
			 (int)RDMEM_MIN(m->argv[i].len, 64u), (const char *)m->argv[i].p);
		return;
	}
	c->proto = proto;
	resp_hello_reply(r, c, o);
}

static void resp_client_info(struct resp_conn *c, struct rdmem_resp_out *o)
{
	char line[256];
	int n = snprintf(line, sizeof(line), "id=%llu addr=%s name=%s db=0 resp=%d\n",
			 (unsigned long long)c->id, c->addr, c->name, c->proto);

	rdmem_resp_bulk(o, line, (size_t)RDMEM_MIN(n, (int)sizeof(line) - 1));
}

static void resp_client(struct resp_conn *c, const struct rdmem_resp_cmd *m,
			struct rdmem_resp_out *o)
{
	const struct rdmem_resp_arg *sub = &m->argv[1];

	if (rdmem_resp_is(sub, "SETNAME") && m->argc == 3)
		resp_setname(c, &m->argv[2], o);
	else if (rdmem_resp_is(sub, "GETNAME") && m->argc == 2) {
		if (c->name[0])
			rdmem_resp_bulk_str(o, c->name);
		else
			rdmem_resp_nil(o, c->proto);
	} else if (rdmem_resp_is(sub, "ID") && m->argc == 2)
		rdmem_resp_int(o, (int64_t)c->id);
	else if ((rdmem_resp_is(sub, "INFO") || rdmem_resp_is(sub, "LIST")) && m->argc == 2)
		resp_client_info(c, o);
	else if (rdmem_resp_is(sub, "SETINFO") && m->argc == 4)
		rdmem_resp_simple(o, "OK"); /* library name and version: nothing to keep */
	else
		resp_err(o,
			 "ERR unknown subcommand or wrong number of arguments for '%.*s'. Try "
			 "CLIENT HELP.",
			 (int)RDMEM_MIN(sub->len, 64u), (const char *)sub->p);
}

/* INFO's text, built by appending; a section that would not fit is cut
 * (never seen: the buffer has room for all of them twice over). */
struct resp_text {
	char p[1536];
	size_t len;
};

static void resp_text_add(struct resp_text *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void resp_text_add(struct resp_text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(t->p + t->len, sizeof(t->p) - t->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		t->len = RDMEM_MIN(t->len + (size_t)n, sizeof(t->p) - 1);
}

/* INFO's # Memory: Redis's names for what the RESP front end holds (live
 * and dying: what the process holds for it), --resp-max-memory, and how it
 * picks whom to close. Redis's used_memory counts its data set too; here
 * the data lives in the server, so this is the front end's share only. */
static void resp_info_memory(struct rdmem_resp *r, struct resp_text *t)
{
	resp_text_add(t,
		      "# Memory\r\nused_memory:%llu\r\nmaxmemory:%llu\r\n"
		      "maxmemory_policy:rdmem-evict-stalled\r\n\r\n",
		      (unsigned long long)(r->mem.live + r->mem.dying),
		      (unsigned long long)r->cfg.max_memory);
}

static void resp_info(struct rdmem_resp *r, struct rdmem_resp_out *o)
{
	struct rdmem_resp_stats s;
	struct resp_text t = { .len = 0 };

	rdmem_resp_stats_read(&s);
	resp_text_add(&t,
		      "# Server\r\nredis_version:7.0.0\r\nrdmem_version:%s\r\n"
		      "redis_mode:standalone\r\nprocess_id:%d\r\ntcp_port:%u\r\n"
		      "uptime_in_seconds:%llu\r\n\r\n"
		      "# Clients\r\nconnected_clients:%llu\r\nmaxclients:%u\r\n\r\n",
		      rdmem_version(), (int)getpid(), r->cfg.port,
		      (unsigned long long)((rdmem_now_ns() - r->start_ns) / 1000000000ull),
		      (unsigned long long)s.clients, r->cfg.max_conns);
	resp_info_memory(r, &t);
	/* evicted_clients where Redis 7 has it, in # Stats: the connections
	 * closed at --resp-max-memory (resp.evicted_memory). */
	resp_text_add(&t,
		      "# Stats\r\ntotal_connections_received:%llu\r\n"
		      "total_commands_processed:%llu\r\nrejected_connections:%llu\r\n"
		      "evicted_clients:%llu\r\ntotal_error_replies:%llu\r\n"
		      "protocol_errors:%llu\r\n",
		      (unsigned long long)s.conns, (unsigned long long)s.cmds,
		      (unsigned long long)s.refused, (unsigned long long)s.evicted_memory,
		      (unsigned long long)s.errors, (unsigned long long)s.protocol_errors);
	rdmem_resp_bulk(o, t.p, t.len);
}

/* COMMAND and its DOCS/COUNT/INFO: enough for clients' start-up. */
static void resp_command(struct resp_conn *c, const struct rdmem_resp_cmd *m,
			 struct rdmem_resp_out *o)
{
	if (m->argc >= 2 && rdmem_resp_is(&m->argv[1], "COUNT"))
		rdmem_resp_int(o, 17);
	else if (m->argc >= 2 && rdmem_resp_is(&m->argv[1], "DOCS"))
		rdmem_resp_map(o, 0, c->proto);
	else
		rdmem_resp_array(o, 0);
}

/* CONFIG GET name: redis-benchmark asks for "save" and "appendonly" at
 * start; rdmem has no such settings, so each name asked reads empty ("no"
 * for appendonly: nothing is persisted). Everything else: no settings. */
static void resp_config(struct resp_conn *c, const struct rdmem_resp_cmd *m,
			struct rdmem_resp_out *o)
{
	if (m->argc != 3 || !rdmem_resp_is(&m->argv[1], "GET") ||
	    memchr(m->argv[2].p, '*', m->argv[2].len)) {
		rdmem_resp_map(o, 0, c->proto);
		return;
	}
	rdmem_resp_map(o, 1, c->proto);
	rdmem_resp_bulk(o, m->argv[2].p, m->argv[2].len);
	rdmem_resp_bulk_str(o, rdmem_resp_is(&m->argv[2], "appendonly") ? "no" : "");
}

/* Answers a command that needs no call; 0 when it is not one of those. */
static int resp_local(struct rdmem_resp *r, struct resp_conn *c, const struct rdmem_resp_cmd *m,
		      struct rdmem_resp_out *o)
{
	const struct rdmem_resp_arg *a = &m->argv[0];

	if (rdmem_resp_is(a, "HELLO"))
		resp_hello(r, c, m, o);
	else if (rdmem_resp_is(a, "CLIENT"))
		m->argc < 2 ? resp_arity(o, a) : resp_client(c, m, o);
	else if (rdmem_resp_is(a, "COMMAND"))
		resp_command(c, m, o);
	else if (rdmem_resp_is(a, "INFO"))
		resp_info(r, o);
	else if (rdmem_resp_is(a, "SELECT")) {
		if (m->argc != 2)
			resp_arity(o, a);
		else if (rdmem_resp_is(&m->argv[1], "0"))
			rdmem_resp_simple(o, "OK");
		else
			resp_err(o, "ERR DB index is out of range (rdmem has database 0 only)");
	} else if (rdmem_resp_is(a, "CONFIG")) {
		resp_config(c, m, o);
	} else if (rdmem_resp_is(a, "QUIT")) {
		rdmem_resp_simple(o, "OK");
		c->closing = 1;
	} else
		return 0;
	return 1;
}

/* ---- data commands ------------------------------------------------------------ */

static int resp_key_ok(struct rdmem_resp_out *o, const struct rdmem_resp_arg *k)
{
	if (!k->len) {
		resp_err(o, "ERR empty keys are not supported by rdmem");
		return 0;
	}
	if (k->len > RDMEM_MAX_KEY) {
		resp_err(o, "ERR key length %u over the limit %u bytes (RDMEM_MAX_KEY)", k->len,
			 RDMEM_MAX_KEY);
		return 0;
	}
	return 1;
}

static int resp_val_ok(struct rdmem_resp *r, struct rdmem_resp_out *o,
		       const struct rdmem_resp_arg *v)
{
	if (v->len <= r->max_value)
		return 1;
	resp_err(o, "ERR value length %u over the limit %u bytes (the agent's --max-value)", v->len,
		 r->max_value);
	return 0;
}

/* SET key value [options]: rdmem keeps no TTLs and has no conditional puts. */
static int resp_check_set(struct rdmem_resp *r, const struct rdmem_resp_cmd *m,
			  struct rdmem_resp_out *o)
{
	if (m->argc < 3) {
		resp_arity(o, &m->argv[0]);
		return 0;
	}
	if (m->argc > 3) {
		resp_err(o,
			 "ERR SET option '%.*s' is not supported by rdmem (no TTLs, no "
			 "conditional or GET sets): use plain SET key value",
			 (int)RDMEM_MIN(m->argv[3].len, 32u), (const char *)m->argv[3].p);
		return 0;
	}
	return resp_key_ok(o, &m->argv[1]) && resp_val_ok(r, o, &m->argv[2]);
}

/* Validates a data command's arguments; its kind, or -1 after an error reply. */
static int resp_check(struct rdmem_resp *r, const struct rdmem_resp_cmd *m, int kind,
		      struct rdmem_resp_out *o)
{
	uint32_t i;

	switch (kind) {
	case K_PING:
		if (m->argc > 2)
			break;
		return m->argc == 1 || resp_val_ok(r, o, &m->argv[1]) ? kind : -1;
	case K_ECHO:
		if (m->argc != 2)
			break;
		return resp_val_ok(r, o, &m->argv[1]) ? kind : -1;
	case K_GET:
		if (m->argc != 2)
			break;
		return resp_key_ok(o, &m->argv[1]) ? kind : -1;
	case K_SET:
		return resp_check_set(r, m, o) ? kind : -1;
	case K_MSET:
		if (m->argc < 3 || m->argc % 2 == 0)
			break;
		for (i = 1; i < m->argc; i += 2)
			if (!resp_key_ok(o, &m->argv[i]) || !resp_val_ok(r, o, &m->argv[i + 1]))
				return -1;
		return kind;
	default: /* DEL, EXISTS, MGET: one or more keys */
		if (m->argc < 2)
			break;
		for (i = 1; i < m->argc; i++)
			if (!resp_key_ok(o, &m->argv[i]))
				return -1;
		return kind;
	}
	resp_arity(o, &m->argv[0]);
	return -1;
}

static int resp_kind_of(const struct rdmem_resp_arg *a)
{
	static const struct {
		const char *name;
		int kind;
	} k[] = { { "GET", K_GET },	  { "SET", K_SET },   { "PING", K_PING },
		  { "ECHO", K_ECHO },	  { "DEL", K_DEL },   { "UNLINK", K_DEL },
		  { "EXISTS", K_EXISTS }, { "MGET", K_MGET }, { "MSET", K_MSET } };
	size_t i;

	for (i = 0; i < RDMEM_ARRAY_SIZE(k); i++)
		if (rdmem_resp_is(a, k[i].name))
			return k[i].kind;
	return -1;
}

static uint32_t resp_nsub(int kind, uint32_t argc)
{
	switch (kind) {
	case K_DEL:
	case K_EXISTS:
		return argc - 1;
	case K_MSET:
		return (argc - 1) / 2;
	default:
		return 1;
	}
}

/* Copies the arguments: the input buffer moves on before the calls are sent. */
static int resp_cmd_args(struct resp_cmd *cmd, const struct rdmem_resp_cmd *m)
{
	size_t bytes = 0, off = 0;
	uint32_t i;

	for (i = 0; i < m->argc; i++)
		bytes += m->argv[i].len;
	cmd->argv = malloc(m->argc * sizeof(*cmd->argv));
	cmd->args = malloc(bytes ? bytes : 1);
	if (!cmd->argv || !cmd->args)
		return -ENOMEM;
	for (i = 0; i < m->argc; i++) {
		memcpy(cmd->args + off, m->argv[i].p, m->argv[i].len);
		cmd->argv[i].p = cmd->args + off;
		cmd->argv[i].len = m->argv[i].len;
		off += m->argv[i].len;
	}
	cmd->argc = m->argc;
	return 0;
}

static int resp_cmd_mget(struct rdmem_resp *r, struct resp_cmd *cmd, struct rdmem_resp_out *o)
{
	const char **keys = malloc(cmd->argc * sizeof(*keys));
	uint32_t *lens = malloc(cmd->argc * sizeof(*lens)), i, n = cmd->argc - 1;
	uint64_t bytes = 0;
	int rc = -ENOMEM;

	if (keys && lens) {
		for (i = 0; i < n; i++) {
			keys[i] = (const char *)cmd->argv[i + 1].p;
			lens[i] = cmd->argv[i + 1].len;
			bytes += lens[i];
		}
		if (rdmem_blob_array_size(n, bytes) > r->max_value) {
			resp_err(o,
				 "ERR MGET of %u keys is over the limit %u bytes of one request "
				 "(the agent's --max-value)",
				 n, r->max_value);
			rc = -E2BIG;
		} else {
			rc = rdmem_mget_request(keys, lens, n, &cmd->mget_req, &cmd->mget_len);
			if (rc && rc != -ENOMEM)
				resp_err_rc(r, o, rc);
		}
	}
	free(keys);
	free(lens);
	return rc;
}

static void resp_cmd_free(struct resp_cmd *cmd)
{
	if (cmd->held) {
		rdmem_rpc_free(&cmd->held->rpc);
		cmd->held->cmd = NULL;
	}
	rdmem_resp_out_free(&cmd->local);
	free(cmd->args);
	free(cmd->argv);
	free(cmd->mget_req);
	free(cmd);
}

static void resp_enqueue(struct resp_conn *c, struct resp_cmd *cmd)
{
	cmd->conn = c;
	cmd->proto = c->proto;
	cmd->bytes = sizeof(*cmd) + cmd->local.cap + cmd->mget_len + cmd->argc * sizeof(*cmd->argv);
	for (uint32_t i = 0; i < cmd->argc; i++)
		cmd->bytes += cmd->argv[i].len;
	c->queued_bytes += cmd->bytes;
	RDMEM_FIFO_PUSH(c->head, c->tail, cmd);
	if (!c->unsent && cmd->kind != K_LOCAL)
		c->unsent = cmd;
	c->queued++;
}

/* A local reply behind calls still owed: queued so the order holds. */
static int resp_enqueue_local(struct resp_conn *c, struct rdmem_resp_out *local)
{
	struct resp_cmd *cmd = calloc(1, sizeof(*cmd));

	if (!cmd)
		return -ENOMEM;
	cmd->kind = K_LOCAL;
	cmd->local = *local;
	memset(local, 0, sizeof(*local));
	resp_enqueue(c, cmd);
	return 0;
}

/* Runs one parsed command: answered now, or queued with its calls to send. */
static int resp_dispatch(struct rdmem_resp *r, struct resp_conn *c, const struct rdmem_resp_cmd *m)
{
	struct rdmem_resp_out tmp = { 0 }, *o = c->head ? &tmp : &c->out;
	struct resp_cmd *cmd;
	int kind;

	resp_count(&resp_ctr.cmds, 1);
	if (!resp_local(r, c, m, o)) {
		kind = resp_kind_of(&m->argv[0]);
		if (kind < 0) {
			rdmem_resp_unknown(o, m);
			resp_count(&resp_ctr.errors, 1);
		} else if (resp_check(r, m, kind, o) >= 0) {
			int rc = -ENOMEM;

			cmd = calloc(1, sizeof(*cmd));
			if (!cmd || resp_cmd_args(cmd, m) < 0 ||
			    (kind == K_MGET && (rc = resp_cmd_mget(r, cmd, o)) < 0)) {
				if (cmd)
					resp_cmd_free(cmd);
				if (rc != -ENOMEM)
					goto local; /* MGET refused: the error reply is in o */
				return -ENOMEM;
			}
			cmd->kind = kind;
			cmd->nsub = resp_nsub(kind, m->argc);
			resp_enqueue(c, cmd);
			return 0;
		}
	}
local:
	if (o == &tmp && resp_enqueue_local(c, &tmp) < 0) {
		rdmem_resp_out_free(&tmp);
		return -ENOMEM;
	}
	return 0;
}

/* ---- calls ---------------------------------------------------------------------- */

static void resp_call_fill(struct resp_cmd *cmd, uint32_t i, struct rdmem_rpc *rpc)
{
	static const uint16_t ops[] = { [K_PING] = RDMEM_OP_PING,    [K_ECHO] = RDMEM_OP_ECHO,
					[K_GET] = RDMEM_OP_KV_GET,   [K_SET] = RDMEM_OP_KV_PUT,
					[K_DEL] = RDMEM_OP_KV_DEL,   [K_EXISTS] = RDMEM_OP_KV_GET,
					[K_MGET] = RDMEM_OP_KV_MGET, [K_MSET] = RDMEM_OP_KV_PUT };
	const struct rdmem_resp_arg *a = cmd->argv;

	rdmem_rpc_init(rpc, ops[cmd->kind]);
	/* Replies are read in the slot and copied once, into the reply buffer. */
	rpc->inplace = 1;
	switch (cmd->kind) {
	case K_ECHO:
		rpc->val = a[1].p;
		rpc->val_len = a[1].len;
		break;
	case K_GET:
	case K_SET:
		rpc->key = a[1].p;
		rpc->key_len = a[1].len;
		if (cmd->kind == K_SET) {
			rpc->val = a[2].p;
			rpc->val_len = a[2].len;
		}
		break;
	case K_DEL:
	case K_EXISTS:
		rpc->key = a[1 + i].p;
		rpc->key_len = a[1 + i].len;
		break;
	case K_MSET:
		rpc->key = a[1 + 2 * i].p;
		rpc->key_len = a[1 + 2 * i].len;
		rpc->val = a[2 + 2 * i].p;
		rpc->val_len = a[2 + 2 * i].len;
		break;
	case K_MGET:
		rpc->val = cmd->mget_req;
		rpc->val_len = cmd->mget_len;
		rpc->aux = cmd->argc - 1;
		break;
	}
}

/* Folds one finished call into its command. */
static void resp_call_done(struct rdmem_resp *r, struct resp_call *k)
{
	struct resp_cmd *cmd = k->cmd;
	int rc = k->rpc.rc;

	k->inflight = 0;
	r->busy--;
	cmd->conn->inflight--;
	cmd->done++;
	if (cmd->nsub == 1 && !cmd->conn->dead) {
		cmd->held = k; /* encoded when the command reaches the head */
		return;
	}
	if (rc == 0)
		cmd->count++;
	else if (rc != -ENOENT && !cmd->rc)
		cmd->rc = rc;
	rdmem_rpc_free(&k->rpc);
	k->cmd = NULL;
}

static struct resp_call *resp_call_get(struct rdmem_resp *r)
{
	uint32_t i;

	for (i = 0; i < r->ncalls; i++)
		if (!r->calls[i].cmd)
			return &r->calls[i];
	return NULL;
}

/* Sends the connection's next calls, in command order, while slots last
 * and the peer reads its replies: a slow reader's output stays within the
 * soft mark plus the replies of its calls in flight. */
static void resp_submit_conn(struct rdmem_resp *r, struct resp_conn *c)
{
	struct resp_call *k;

	while (c->unsent && !c->dead && c->out.len - c->out.off <= RDMEM_RESP_OUT_SOFT) {
		struct resp_cmd *cmd = c->unsent;

		if (cmd->kind == K_LOCAL || cmd->submitted == cmd->nsub) {
			c->unsent = cmd->next;
			continue;
		}
		if (!(k = resp_call_get(r))) {
			r->starved = 1; /* retried next pass, without sleeping */
			/* Not the leader: it took the calls first and starving is its
			 * normal state when it holds more work than there are calls (a
			 * DEL of 65535 keys); naming it again would let it take every
			 * freed call, pass after pass, while the others wait. */
			if (!r->first_starved && c != r->pass_lead)
				r->first_starved = c;
			return;
		}
		k->cmd = cmd;
		resp_call_fill(cmd, cmd->submitted++, &k->rpc);
		k->inflight = 1;
		r->busy++;
		c->inflight++;
		if (rdmem_submit(r->h, &k->rpc) != 0)
			resp_call_done(r, k); /* it never left: rc says why */
	}
}

static int resp_poll_calls(struct rdmem_resp *r)
{
	uint32_t i;
	int n = 0;

	for (i = 0; i < r->ncalls && r->busy; i++) {
		struct resp_call *k = &r->calls[i];

		if (k->inflight && rdmem_poll(r->h, &k->rpc)) {
			resp_call_done(r, k);
			n++;
		}
	}
	return n;
}

/* ---- encoding finished commands ------------------------------------------------ */

static void resp_encode_mget(struct rdmem_resp *r, struct resp_conn *c, struct resp_cmd *cmd,
			     const struct rdmem_rpc *rpc)
{
	struct rdmem_blob_array arr;
	uint32_t i, n = cmd->argc - 1;

	if (rdmem_blob_array_open(rpc->rval, rpc->rlen, &arr) || arr.count != n) {
		resp_err_rc(r, &c->out, -EPROTO);
		return;
	}
	rdmem_resp_array(&c->out, n);
	for (i = 0; i < n; i++) {
		const void *d;
		uint32_t len, flags;

		rdmem_blob_array_get(&arr, i, &d, &len, &flags);
		if (flags & RDMEM_BLOB_PRESENT)
			rdmem_resp_bulk(&c->out, d, len);
		else
			rdmem_resp_nil(&c->out, cmd->proto);
	}
}

static void resp_encode_single(struct rdmem_resp *r, struct resp_conn *c, struct resp_cmd *cmd)
{
	const struct rdmem_rpc *rpc = &cmd->held->rpc;
	struct rdmem_resp_out *o = &c->out;

	if (rpc->rc == -ENOENT &&
	    (cmd->kind == K_GET || cmd->kind == K_DEL || cmd->kind == K_EXISTS)) {
		if (cmd->kind == K_GET)
			rdmem_resp_nil(o, cmd->proto);
		else
			rdmem_resp_int(o, 0);
	} else if (rpc->rc) {
		resp_err_rc(r, o, rpc->rc);
	} else if (cmd->kind == K_GET || cmd->kind == K_ECHO ||
		   (cmd->kind == K_PING && cmd->argc == 2)) {
		rdmem_resp_bulk(o, cmd->kind == K_GET ? rpc->rval : cmd->argv[1].p,
				cmd->kind == K_GET ? rpc->rlen : cmd->argv[1].len);
	} else if (cmd->kind == K_PING) {
		rdmem_resp_simple(o, "PONG");
	} else if (cmd->kind == K_MGET) {
		resp_encode_mget(r, c, cmd, rpc);
	} else if (cmd->kind == K_DEL || cmd->kind == K_EXISTS) {
		rdmem_resp_int(o, 1);
	} else {
		rdmem_resp_simple(o, "OK");
	}
}

static void resp_encode(struct rdmem_resp *r, struct resp_conn *c, struct resp_cmd *cmd)
{
	if (cmd->kind == K_LOCAL)
		rdmem_resp_raw(&c->out, cmd->local.p, cmd->local.len);
	else if (cmd->held)
		resp_encode_single(r, c, cmd);
	else if (cmd->rc)
		resp_err_rc(r, &c->out, cmd->rc);
	else if (cmd->kind == K_MSET)
		rdmem_resp_simple(&c->out, "OK");
	else
		rdmem_resp_int(&c->out, cmd->count);
}

/* Moves finished commands at the head of the queue into the output. */
static void resp_drain(struct rdmem_resp *r, struct resp_conn *c)
{
	while (c->head && (c->head->kind == K_LOCAL || c->head->done == c->head->nsub)) {
		struct resp_cmd *cmd = c->head;

		if (!c->dead)
			resp_encode(r, c, cmd);
		c->head = cmd->next;
		if (!c->head)
			c->tail = NULL;
		if (c->unsent == cmd)
			c->unsent = cmd->next;
		c->queued--;
		c->queued_bytes -= cmd->bytes;
		resp_cmd_free(cmd);
	}
}

/* ---- connections ---------------------------------------------------------------- */

/* What a connection holds that its peer decides: its struct, its buffers'
 * capacities and its queued commands (argument copies, MGET requests,
 * prebuilt replies: resp_cmd.bytes). Capacities, not lengths: that is what
 * malloc holds (a drained buffer keeps its size until resp_conn_trim frees
 * it), and no more of it can be resident. */
static uint64_t resp_conn_bytes(const struct resp_conn *c)
{
	return sizeof(*c) + c->in_cap + c->out.cap + c->queued_bytes;
}

/* Sets the connection's figure (and the total, and its gauge): O(1). */
static void resp_account_set(struct rdmem_resp *r, struct resp_conn *c, uint64_t bytes)
{
	if (c->dead)
		rdmem_resp_mem_dying(&r->mem, &c->mem);
	rdmem_resp_mem_set(&r->mem, &c->mem, bytes);
	/* Single writer, as resp_count. */
	atomic_store_explicit(&resp_ctr.memory, r->mem.live + r->mem.dying, memory_order_relaxed);
}

static void resp_account(struct rdmem_resp *r, struct resp_conn *c)
{
	resp_account_set(r, c, resp_conn_bytes(c));
}

/* A closed connection gives back at once all but what its calls in flight
 * point into (their commands' arguments): its buffers (no reply of it is
 * encoded or sent any more) and every command with no call in flight. */
static void resp_conn_shed(struct rdmem_resp *r, struct resp_conn *c)
{
	struct resp_cmd **pp = &c->head, *cmd;

	free(c->in);
	c->in = NULL;
	c->in_len = c->in_cap = 0;
	rdmem_resp_out_free(&c->out);
	c->unsent = c->tail = NULL;
	while ((cmd = *pp)) {
		if (cmd->submitted > cmd->done) { /* a call of it is in flight */
			c->tail = cmd;
			pp = &cmd->next;
			continue;
		}
		*pp = cmd->next;
		c->queued--;
		c->queued_bytes -= cmd->bytes;
		resp_cmd_free(cmd);
	}
	resp_account(r, c);
}

/* The socket is done: stop watching it and give back what no call needs;
 * the struct waits for its calls in flight (their replies land in it). */
static void resp_conn_kill(struct rdmem_resp *r, struct resp_conn *c)
{
	if (c->dead)
		return;
	if (epoll_ctl(r->ep, EPOLL_CTL_DEL, c->fd, NULL) < 0)
		rdmem_warn_limited("resp: epoll_ctl del %s: %s", c->addr, strerror(errno));
	c->dead = 1;
	resp_conn_shed(r, c);
}

static void resp_conn_events(struct rdmem_resp *r, struct resp_conn *c, uint32_t want)
{
	struct epoll_event ev = { .events = want, .data.ptr = c };

	if (c->dead || want == c->events)
		return;
	if (epoll_ctl(r->ep, EPOLL_CTL_MOD, c->fd, &ev) < 0) {
		rdmem_warn("resp: epoll_ctl(%s): %s", c->addr, strerror(errno));
		resp_conn_kill(r, c);
		return;
	}
	c->events = want;
}

static void resp_conn_free(struct rdmem_resp *r, struct resp_conn *c)
{
	while (c->head) {
		struct resp_cmd *cmd = c->head;

		c->head = cmd->next;
		resp_cmd_free(cmd);
	}
	if (r->lead == c)
		r->lead = NULL;
	if (r->pass_lead == c)
		r->pass_lead = NULL;
	if (r->first_starved == c)
		r->first_starved = NULL;
	if (c->prev)
		c->prev->next = c->next;
	else
		r->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	if (c->fd >= 0)
		close(c->fd);
	free(c->in);
	rdmem_resp_out_free(&c->out);
	resp_account_set(r, c, 0);
	free(c);
	r->nconns--;
	resp_count(&resp_ctr.clients, -1);
}

/* The live connection holding the most bytes for the longest without
 * progress (rdmem_resp_mem_before): a scan, only when over budget. */
static struct resp_conn *resp_most_stalled(struct rdmem_resp *r, uint64_t now)
{
	struct resp_conn *c, *worst = NULL;

	for (c = r->conns; c; c = c->next)
		if (!c->dead && (!worst || rdmem_resp_mem_before(&c->mem, &worst->mem, now)))
			worst = c;
	return worst;
}

/* Over --resp-max-memory: closes the connection holding the most bytes
 * longest without progress. Not simply the largest (Redis's rule at
 * maxmemory-clients): many small connections dribbling partial commands
 * could then keep the total near the budget and get an honest large upload
 * closed; ranked by stalled bytes, they go first and the upload, moving on
 * every read, last. 0 when no live connection is left. */
static int resp_evict_memory(struct rdmem_resp *r)
{
	uint64_t now = rdmem_now_ns();
	struct resp_conn *big = resp_most_stalled(r, now);

	if (!big)
		return 0;
	rdmem_warn_limited(
	    "resp: %s holds %llu bytes with no progress for %llu ms, the most stalled of any "
	    "connection: closed, as the Redis-protocol connections hold %llu bytes, over "
	    "--resp-max-memory %llu",
	    big->addr, (unsigned long long)big->mem.bytes,
	    (unsigned long long)((now - RDMEM_MIN(now, big->mem.progress_ns)) / 1000000u),
	    (unsigned long long)(r->mem.live + r->mem.dying),
	    (unsigned long long)r->cfg.max_memory);
	resp_conn_kill(r, big);
	resp_count(&resp_ctr.evicted_memory, 1);
	r->starved = 1; /* a pass soon frees it, unless a call of its is in flight */
	return 1;
}

/* Accounts the connection, then closes the most stalled while the live
 * total is over budget: run after every read and every pass over a connection, so
 * it costs one comparison unless over. */
static void resp_budget(struct rdmem_resp *r, struct resp_conn *c)
{
	resp_account(r, c);
	while (rdmem_resp_mem_over(&r->mem, r->cfg.max_memory) && resp_evict_memory(r))
		;
}

/* Frees drained buffers over RESP_BUF_KEEP (see there). */
static void resp_conn_trim(struct resp_conn *c)
{
	if (!c->in_len && c->in_cap > RESP_BUF_KEEP) {
		free(c->in);
		c->in = NULL;
		c->in_cap = 0;
	}
	if (c->out.off == c->out.len && c->out.cap > RESP_BUF_KEEP)
		rdmem_resp_out_free(&c->out);
}

/* Writes what is pending: 0, or -1 when the socket failed. What went out
 * counts as the connection's progress (a reader draining its replies). */
static int resp_conn_flush(struct resp_conn *c)
{
	size_t sent = 0;

	while (c->out.off < c->out.len) {
		ssize_t n = send(c->fd, c->out.p + c->out.off, c->out.len - c->out.off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n <= 0)
			return -1;
		c->out.off += (size_t)n;
		sent += (size_t)n;
	}
	if (sent)
		rdmem_resp_mem_moved(&c->mem, sent, rdmem_now_ns());
	if (c->out.off == c->out.len)
		c->out.off = c->out.len = 0;
	else if (c->out.off > (1u << 20))
		rdmem_resp_out_compact(&c->out);
	return 0;
}

/* A malformed stream: say why (after the replies still owed), then close. */
static void resp_protocol_error(struct resp_conn *c, const char *why)
{
	struct rdmem_resp_out tmp = { 0 };

	rdmem_resp_error(c->head ? &tmp : &c->out, "ERR %s", why);
	if (c->head && resp_enqueue_local(c, &tmp) < 0) {
		rdmem_resp_out_free(&tmp);
		c->out.oom = 1;
	}
	resp_count(&resp_ctr.errors, 1);
	resp_count(&resp_ctr.protocol_errors, 1);
	c->closing = 1;
	rdmem_warn_limited("resp: %s: %s; closing the connection", c->addr, why);
}

static int resp_conn_paused(const struct rdmem_resp *r, const struct resp_conn *c)
{
	return c->closing || c->queued >= RESP_MAX_QUEUED || c->queued_bytes > r->queued_max ||
	       c->out.len - c->out.off > RDMEM_RESP_OUT_SOFT;
}

/* Parses and dispatches what the input holds, while the connection may take more. */
static void resp_conn_parse(struct rdmem_resp *r, struct resp_conn *c)
{
	struct rdmem_resp_cmd m = { 0, r->lim.max_args, r->argv };
	size_t pos = 0;

	c->parse_held = 0;
	while (pos < c->in_len) {
		ssize_t n;

		if (resp_conn_paused(r, c)) {
			c->parse_held = 1;
			break;
		}
		n = rdmem_resp_parse_resume(c->in + pos, c->in_len - pos, &r->lim, &m, r->why,
					    sizeof(r->why), &c->resume);

		if (n < 0) {
			resp_protocol_error(c, r->why);
			break;
		}
		if (n == 0) {
			if (c->in_len - pos >= r->in_max) {
				snprintf(r->why, sizeof(r->why),
					 "Protocol error: command over the input limit of %zu "
					 "bytes per connection",
					 r->in_max);
				resp_protocol_error(c, r->why);
			}
			break;
		}
		pos += (size_t)n;
		if (m.argc && resp_dispatch(r, c, &m) < 0) {
			rdmem_warn_limited("resp: %s: out of memory; closing", c->addr);
			resp_conn_kill(r, c); /* it freed the input */
			return;
		}
	}
	if (pos) {
		memmove(c->in, c->in + pos, c->in_len - pos);
		c->in_len -= pos;
	}
}

/* Reads what the socket has (bounded by the input limit): -1 on EOF or error. */
static int resp_conn_read(struct rdmem_resp *r, struct resp_conn *c)
{
	for (;;) {
		ssize_t n;

		if (c->in_len == c->in_cap) {
			size_t cap = c->in_cap ? c->in_cap * 2 : 16384;
			uint8_t *p;

			if (c->in_cap >= r->in_max)
				return 0; /* full: the parser refuses what cannot fit */
			cap = RDMEM_MIN(cap, r->in_max);
			p = realloc(c->in, cap);
			if (!p)
				return -1;
			c->in = p;
			c->in_cap = cap;
		}
		n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n <= 0)
			return -1;
		c->in_len += (size_t)n;
		c->heard_ns = rdmem_now_ns();
		rdmem_resp_mem_moved(&c->mem, (uint64_t)n, c->heard_ns);
		if (c->in_len < c->in_cap)
			return 0;
	}
}

/* One pass over a connection: parse, send calls, encode, write, re-arm.
 * Parsing again after a drain: a pipeline the queue limit paused goes on. */
static void resp_conn_step(struct rdmem_resp *r, struct resp_conn *c)
{
	size_t before;

	do {
		before = c->in_len;
		if (!c->dead)
			resp_conn_parse(r, c);
		resp_submit_conn(r, c);
		resp_drain(r, c);
		resp_submit_conn(r, c); /* the drain freed calls */
	} while (!c->dead && c->in_len && c->in_len != before && !resp_conn_paused(r, c));
	if (!c->dead && (c->out.oom || resp_conn_flush(c) < 0))
		resp_conn_kill(r, c);
	if (!c->dead)
		resp_conn_trim(c);
	/* The flush may have taken the output under the mark: input held back
	 * or calls not sent then need a pass now, as no event will come for
	 * them (the peer sent everything already). */
	if (!c->dead && ((c->parse_held && !resp_conn_paused(r, c)) ||
			 (c->unsent && c->out.len - c->out.off <= RDMEM_RESP_OUT_SOFT)))
		r->starved = 1;
	if (!c->dead && (c->closing || c->eof) && !c->head && c->out.off == c->out.len)
		resp_conn_kill(r, c);
	if (!c->dead && resp_conn_paused(r, c) != c->paused) {
		c->paused = !c->paused;
		if (c->paused && !c->closing)
			resp_count(&resp_ctr.paused, 1);
	}
	if (!c->dead)
		resp_conn_events(r, c,
				 (c->paused || c->eof ? 0u : (uint32_t)EPOLLIN) |
				     (c->out.off < c->out.len ? (uint32_t)EPOLLOUT : 0u));
	resp_budget(r, c);
}

static void resp_conn_addr(struct resp_conn *c, const struct sockaddr_storage *sa, int unix_sock)
{
	char host[INET6_ADDRSTRLEN] = "?";

	if (unix_sock) {
		snprintf(c->addr, sizeof(c->addr), "unix:%llu", (unsigned long long)c->id);
		return;
	}
	if (sa->ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, host,
			  sizeof(host));
	else
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, host, sizeof(host));
	snprintf(c->addr, sizeof(c->addr), "%s:%u", host,
		 ntohs(((const struct sockaddr_in *)sa)->sin_port));
}

static void resp_refuse(int fd)
{
	static const char msg[] = "-ERR max number of clients reached (rdmem-agent "
				  "--resp-max-conns)\r\n";

	/* Best effort: the peer learns why before the close. */
	if (send(fd, msg, sizeof(msg) - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		rdmem_warn_limited("resp: refusing a connection: %s", strerror(errno));
	close(fd);
	resp_count(&resp_ctr.refused, 1);
}

/*
 * At the cap: closes the connection silent longest, if silent for
 * --resp-idle-evict seconds with nothing owed to it (no command queued or
 * call in flight, no reply unsent), so it can make way for a new one. Half
 * a command counts as silent: the peer stopped sending. 1 when one went.
 */
static int resp_evict_idle(struct rdmem_resp *r)
{
	uint64_t now = rdmem_now_ns(), limit = (uint64_t)r->cfg.idle_evict_s * 1000000000ull;
	struct resp_conn *c, *oldest = NULL;

	if (!limit)
		return 0;
	for (c = r->conns; c; c = c->next)
		if (!c->dead && !c->head && !c->inflight && c->out.off == c->out.len &&
		    now - c->heard_ns >= limit && (!oldest || c->heard_ns < oldest->heard_ns))
			oldest = c;
	if (!oldest)
		return 0;
	rdmem_warn_limited("resp: %s silent for %llu s at --resp-max-conns %u: closed for a new "
			   "connection (--resp-idle-evict)",
			   oldest->addr,
			   (unsigned long long)((now - oldest->heard_ns) / 1000000000ull),
			   r->cfg.max_conns);
	/* Not freed here: this epoll batch may still hold events naming it. The
	 * next pass frees it (nothing in flight), so nconns is one over the cap
	 * until then, for the connection that took its place. */
	resp_conn_kill(r, oldest);
	resp_count(&resp_ctr.evicted, 1);
	return 1;
}

static void resp_accept(struct rdmem_resp *r, int lfd)
{
	for (;;) {
		struct sockaddr_storage sa;
		socklen_t sl = sizeof(sa);
		struct epoll_event ev;
		struct resp_conn *c;
		int fd = accept4(lfd, (struct sockaddr *)&sa, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		int one = 1;

		if (fd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				rdmem_warn_limited("resp: accept: %s", strerror(errno));
			return;
		}
		if ((r->nconns >= r->cfg.max_conns && !resp_evict_idle(r)) ||
		    !(c = calloc(1, sizeof(*c)))) {
			resp_refuse(fd);
			continue;
		}
		if (lfd == r->lfd_tcp)
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c->fd = fd;
		c->heard_ns = rdmem_now_ns();
		rdmem_resp_mem_start(&c->mem, c->heard_ns);
		c->id = ++r->next_id;
		c->proto = 2;
		resp_conn_addr(c, &sa, lfd != r->lfd_tcp);
		c->events = EPOLLIN;
		ev.events = EPOLLIN;
		ev.data.ptr = c;
		if (epoll_ctl(r->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
			rdmem_warn("resp: epoll_ctl add %s: %s", c->addr, strerror(errno));
			close(fd);
			free(c);
			continue;
		}
		c->next = r->conns;
		if (r->conns)
			r->conns->prev = c;
		r->conns = c;
		r->nconns++;
		resp_count(&resp_ctr.conns, 1);
		resp_count(&resp_ctr.clients, 1);
		resp_budget(r, c);
	}
}

/* ---- the thread ------------------------------------------------------------------ */

static int resp_timeout(struct rdmem_resp *r, unsigned *idle)
{
	if (r->starved)
		return 0;
	if (!r->busy) {
		*idle = 0;
		return -1;
	}
	if (*idle < RESP_SPIN_ROUNDS)
		return 0;
	if (*idle < RESP_YIELD_ROUNDS) {
		sched_yield();
		return 0;
	}
	return 1;
}

/* Reads what a connection sent, then holds its input against the budget. */
static void resp_conn_input(struct rdmem_resp *r, struct resp_conn *c, uint32_t events)
{
	if (!(events & (EPOLLIN | EPOLLERR | EPOLLHUP)) || c->dead || c->eof)
		return;
	if (resp_conn_read(r, c) < 0)
		c->eof = 1; /* finish what was sent, then close */
	resp_budget(r, c);
}

static int resp_events(struct rdmem_resp *r, int timeout)
{
	struct epoll_event ev[64];
	int n = epoll_wait(r->ep, ev, 64, timeout), i, stop = 0;

	for (i = 0; i < n; i++) {
		if (ev[i].data.ptr == &r->evfd) {
			stop = 1;
		} else if (ev[i].data.ptr == &r->lfd_tcp) {
			resp_accept(r, r->lfd_tcp);
		} else if (ev[i].data.ptr == &r->lfd_unix) {
			resp_accept(r, r->lfd_unix);
		} else {
			resp_conn_input(r, ev[i].data.ptr, ev[i].events);
		}
	}
	if (n < 0 && errno != EINTR)
		rdmem_warn_limited("resp: epoll_wait: %s", strerror(errno));
	return stop;
}

/* One pass over every connection, starting with the one that waited for a
 * free call last pass (else the next in turn), so a few busy pipelines
 * cannot keep the calls from the others. */
static void resp_pass(struct rdmem_resp *r)
{
	struct resp_conn *c = r->lead ? r->lead : r->conns, *next;
	uint32_t i, n = r->nconns;

	r->starved = 0;
	r->first_starved = NULL;
	r->lead = NULL;
	r->pass_lead = c;
	for (i = 0; i < n && c; i++, c = next) {
		next = c->next ? c->next : r->conns;
		if (i == 0)
			r->lead = next != c ? next : NULL;
		resp_conn_step(r, c);
		if (c->dead && !c->inflight)
			resp_conn_free(r, c);
	}
	if (r->first_starved)
		r->lead = r->first_starved;
}

static void *resp_main(void *arg)
{
	struct rdmem_resp *r = arg;
	unsigned idle = 0;

	while (!resp_events(r, resp_timeout(r, &idle))) {
		int progress = resp_poll_calls(r);

		resp_pass(r);
		idle = progress ? 0 : idle + 1;
	}
	return NULL;
}

/* ---- setup ------------------------------------------------------------------------ */

static int resp_listen_tcp(struct rdmem_resp *r)
{
	const char *host = r->cfg.bind ? r->cfg.bind : "127.0.0.1";
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
	socklen_t len = sizeof(*in4);
	int one = 1, fd;

	if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons(r->cfg.port);
	} else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(r->cfg.port);
		len = sizeof(*in6);
	} else {
		rdmem_err("resp: --resp-bind '%s' is not a numeric IPv4 or IPv6 address", host);
		return -EINVAL;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 128) < 0) {
		int e = errno;

		rdmem_err("resp: --resp-port %u on %s: %s", r->cfg.port, host, strerror(e));
		close(fd);
		return -e;
	}
	r->lfd_tcp = fd;
	return 0;
}

/* The socket's directory (checked on its descriptor): owned by this user or
 * root, and writable by no one else unless sticky. Where another user may
 * rename entries, they could swap our socket for a link once it is bound. */
static int resp_unix_dir_private(const char *path, const struct rdmem_unix_at *at)
{
	struct stat st;

	if (fstat(at->dirfd, &st) < 0) {
		int rc = -errno;

		rdmem_err("resp: --resp-socket %s: its directory: %s", path, strerror(-rc));
		return rc;
	}
	if (!rdmem_uid_trusted(st.st_uid)) {
		rdmem_err("resp: --resp-socket %s: its directory belongs to uid %u, not this user "
			  "(uid %u) or root",
			  path, (unsigned)st.st_uid, (unsigned)geteuid());
		return -EPERM;
	}
	if (rdmem_dir_open_to_others(st.st_mode)) {
		rdmem_err("resp: --resp-socket %s: its directory is writable by others (mode %04o) "
			  "and not sticky: another user could swap the socket; chmod go-w it",
			  path, (unsigned)(st.st_mode & 07777));
		return -EPERM;
	}
	return 0;
}

/* A stale socket file (nobody listening) is replaced; a live one is not. */
static int resp_unix_stale(const struct rdmem_unix_at *at)
{
	struct stat st;
	int fd, live;

	if (fstatat(at->dirfd, at->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	live = connect(fd, (const struct sockaddr *)&at->via, sizeof(at->via)) == 0 ||
	       errno != ECONNREFUSED;
	close(fd);
	if (live)
		return -EADDRINUSE;
	return unlinkat(at->dirfd, at->name, 0) < 0 ? -errno : 0;
}

static int resp_listen_unix(struct rdmem_resp *r)
{
	const char *path = r->cfg.socket;
	int fd, rc;

	if ((rc = rdmem_unix_at_open("resp: --resp-socket", path, &r->unix_at)) < 0 ||
	    (rc = resp_unix_dir_private(path, &r->unix_at)) < 0)
		return rc;
	if ((rc = resp_unix_stale(&r->unix_at)) < 0) {
		rdmem_err("resp: --resp-socket %s: %s", path,
			  rc == -EEXIST ? "exists and is not a socket" : strerror(-rc));
		return rc;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* chmod before listen: nobody can connect while the mode is the umask's. */
	rc = rdmem_unix_at_bind(&r->unix_at, fd, 0660, (gid_t)-1, &r->unix_st);
	if (rc == 0 && listen(fd, 128) < 0)
		rc = -errno;
	if (rc < 0) {
		rdmem_err("resp: --resp-socket %s: %s", path, strerror(-rc));
		rdmem_unix_at_unlink(&r->unix_at, &r->unix_st); /* ours only */
		close(fd);
		return rc;
	}
	r->lfd_unix = fd;
	return 0;
}

static int resp_watch(struct rdmem_resp *r, int fd, void *tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = tag };

	return fd < 0 || epoll_ctl(r->ep, EPOLL_CTL_ADD, fd, &ev) == 0 ? 0 : -errno;
}

static int resp_setup(struct rdmem_resp *r)
{
	int rc;

	r->ep = epoll_create1(EPOLL_CLOEXEC);
	r->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (r->ep < 0 || r->evfd < 0)
		return -errno;
	if (r->cfg.port && (rc = resp_listen_tcp(r)) < 0)
		return rc;
	if (r->cfg.socket && (rc = resp_listen_unix(r)) < 0)
		return rc;
	if ((rc = resp_watch(r, r->evfd, &r->evfd)) < 0 ||
	    (rc = resp_watch(r, r->lfd_tcp, &r->lfd_tcp)) < 0 ||
	    (rc = resp_watch(r, r->lfd_unix, &r->lfd_unix)) < 0)
		return rc;
	if ((rc = rdmem_open(r->cfg.shm_name, &r->h)) < 0) {
		rdmem_err("resp: attaching to the front door %s: %s", r->cfg.shm_name,
			  rdmem_strerror(rc));
		return rc;
	}
	r->max_value = rdmem_max_value(r->h);
	r->lim.max_bulk = RDMEM_MAX(r->max_value, RDMEM_MAX_KEY);
	r->lim.max_args = RDMEM_RESP_MAX_ARGS;
	r->in_max = (size_t)rdmem_resp_mem_input_limit(r->max_value);
	r->queued_max = (size_t)rdmem_resp_mem_queued_limit(r->max_value);
	/* The default budget leaves room for one connection carrying the largest
	 * command; a value given is checked at start (agent/main.c). */
	r->ncalls = rdmem_slots(r->h);
	if (!r->cfg.max_memory)
		r->cfg.max_memory = RDMEM_MAX(RDMEM_RESP_DEFAULT_MAX_MEMORY,
					      rdmem_resp_mem_floor(r->max_value, r->ncalls));
	r->calls = calloc(r->ncalls, sizeof(*r->calls));
	r->argv = malloc(RDMEM_RESP_MAX_ARGS * sizeof(*r->argv));
	return r->calls && r->argv ? 0 : -ENOMEM;
}

static void resp_release(struct rdmem_resp *r)
{
	uint32_t i;

	/* rdmem_close() wants every call finished: wait them out (deadline-bounded). */
	for (i = 0; i < r->ncalls; i++)
		if (r->calls[i].inflight) {
			rdmem_wait(r->h, &r->calls[i].rpc);
			resp_call_done(r, &r->calls[i]);
		}
	while (r->conns)
		resp_conn_free(r, r->conns);
	for (i = 0; i < r->ncalls; i++)
		if (r->calls[i].cmd)
			rdmem_rpc_free(&r->calls[i].rpc);
	if (r->h)
		rdmem_close(r->h);
	if (r->lfd_unix >= 0) {
		close(r->lfd_unix);
		rdmem_unix_at_unlink(&r->unix_at, &r->unix_st);
	}
	rdmem_unix_at_close(&r->unix_at);
	if (r->lfd_tcp >= 0)
		close(r->lfd_tcp);
	if (r->evfd >= 0)
		close(r->evfd);
	if (r->ep >= 0)
		close(r->ep);
	free(r->calls);
	free(r->argv);
	free(r);
}

static void resp_log_start(const struct rdmem_resp *r)
{
	char tcp[80] = "";

	/* Only what listens: "on 0 and unix:..." read as a port 0 when TCP was off. */
	if (r->cfg.port)
		snprintf(tcp, sizeof(tcp), "%s:%u", r->cfg.bind ? r->cfg.bind : "127.0.0.1",
			 r->cfg.port);
	rdmem_info("resp: serving the Redis protocol on %s%s%s%s (max value %u B, %u calls in "
		   "flight, --resp-max-memory %llu B)",
		   tcp, r->cfg.port && r->cfg.socket ? " and " : "", r->cfg.socket ? "unix:" : "",
		   r->cfg.socket ? r->cfg.socket : "", r->max_value, r->ncalls,
		   (unsigned long long)r->cfg.max_memory);
}

int rdmem_resp_start(const struct rdmem_resp_config *cfg, struct rdmem_resp **out)
{
	struct rdmem_resp *r = calloc(1, sizeof(*r));
	int rc;

	*out = NULL;
	if (!r)
		return -ENOMEM;
	r->cfg = *cfg;
	if (!r->cfg.max_conns)
		r->cfg.max_conns = RDMEM_RESP_DEFAULT_MAX_CONNS;
	r->ep = r->evfd = r->lfd_tcp = r->lfd_unix = r->unix_at.dirfd = -1;
	r->start_ns = rdmem_now_ns();
	rc = resp_setup(r);
	if (rc == 0)
		rc = -pthread_create(&r->thread, NULL, resp_main, r);
	if (rc < 0) {
		resp_release(r);
		return rc;
	}
	r->started = 1;
	resp_log_start(r);
	*out = r;
	return 0;
}

void rdmem_resp_stop(struct rdmem_resp *r)
{
	uint64_t one = 1;

	if (!r)
		return;
	if (write(r->evfd, &one, sizeof(one)) != (ssize_t)sizeof(one))
		rdmem_warn("resp: waking the RESP thread: %s", strerror(errno));
	pthread_join(r->thread, NULL);
	resp_release(r);
}
