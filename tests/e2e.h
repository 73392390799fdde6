/* e2e.h - end-to-end test rig: a real rdmem-server and rdmem-agent on this
 * host (shm fabric by default), a libclient handle on the agent's private
 * segment, and readers for the agent's JSON telemetry. Header-only. */
#ifndef RDMEM_TEST_E2E_H
#define RDMEM_TEST_E2E_H

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "tcp/client.h"
#include "rdmem/auth.h"
#include "libclient/rdmem.h"
#include "proc.h"
#include "shm/door.h"
#include "tmpdir.h"

/* Daemons print their ready line within a second here; Soft-RoCE under TCG
 * on a loaded host (an agent pinning its segment) has taken over 10 s. */
#define E2E_READY_MS 30000

struct e2e {
	struct proc server, agent;
	unsigned port;
	char shm[64];
	char fabric[16];
	char image_dir[128];
	char clients[8], slots[8]; /* front-door geometry: the segment is all RAM */
	char bin[3][512];
	rdmem_t *h;
	/* Set by a test whose agent must NOT get an RDMA session (a refused
	 * secret): starting the agent then does not fail without one. */
	int rdma_optional;
	/* With rdma_optional: the agent's log line that ends the wait for a
	 * session (the refusal the test expects) once it has been logged
	 * twice, a redial included, not after 30 s. Starting the agent fails
	 * when it never is: a test must not quietly wait on a stale text. */
	const char *rdma_settled;
};

/* Where the server listens and the agent dials: RDMEM_TEST_ADDR (an rxe
 * address in the Soft-RoCE VM), else loopback. */
static inline const char *e2e_addr(void)
{
	const char *a = getenv("RDMEM_TEST_ADDR");

	return a && *a ? a : "127.0.0.1";
}

/* The local address the agent dials RDMA from: RDMEM_TEST_SOURCE (the VM's
 * second rxe device in its veth mode), else none (routing decides). */
static inline const char *e2e_source(void)
{
	const char *a = getenv("RDMEM_TEST_SOURCE");

	return a && *a ? a : NULL;
}

/* Starts rdmem-server with the extra arguments (NULL-terminated). */
static inline int e2e_server(struct e2e *e, const char *fabric, ...)
{
	char port[16], tcp[16];
	const char *argv[40] = { e->bin[0], "-b",	   e2e_addr(),	"-p",
				 port,	    "--tcp-port",  tcp,		"--fabric",
				 fabric,    "--image-dir", e->image_dir };
	int n = e->image_dir[0] ? 11 : 9; /* an empty image_dir: a server without one */
	va_list ap;

	snprintf(e->bin[0], sizeof(e->bin[0]), "%s/rdmem-server", proc_bin());
	snprintf(port, sizeof(port), "%u", e->port);
	snprintf(tcp, sizeof(tcp), "%u", e->port + 1);
	va_start(ap, fabric);
	while (n < 38 && (argv[n] = va_arg(ap, const char *)))
		n++;
	va_end(ap);
	argv[n] = NULL;
	return proc_start(&e->server, "server", (char *const *)argv, "listening tcp", E2E_READY_MS);
}

/* Starts rdmem-agent on the private segment with the extra arguments. */
static inline int e2e_agent_named(struct e2e *e, struct proc *p, const char *name, const char *shm,
				  va_list ap)
{
	char port[16];
	const char *argv[40] = { e->bin[1],  "-s",	e2e_addr(),   "-p", port,
				 "--fabric", e->fabric, "--shm-name", shm,  "--clients",
				 e->clients, "--slots", e->slots };
	int n = 13;

	snprintf(e->bin[1], sizeof(e->bin[1]), "%s/rdmem-agent", proc_bin());
	snprintf(port, sizeof(port), "%u", e->port);
	if (e2e_source()) {
		argv[n++] = "--source";
		argv[n++] = e2e_source();
	}
	while (n < 38 && (argv[n] = va_arg(ap, const char *)))
		n++;
	argv[n] = NULL;
	if (proc_start(p, name, (char *const *)argv, "ready:", E2E_READY_MS) < 0)
		return -1;
	/* The RDMA link comes up in the background; give it its moment (up to
	 * 30 s: Soft-RoCE under TCG on a loaded host is slow to pin and dial).
	 * Without it an "RDMA" test would quietly run over TCP: fail instead. */
	if (strcmp(e->fabric, "tcp") != 0) {
		int i;

		for (i = 0; i < 3000 && !proc_log_has(p, "rdma: session"); i++) {
			if (e->rdma_settled && proc_log_count(p, e->rdma_settled) >= 2)
				break;
			proc_sleep_ms(10);
		}
		if (e->rdma_settled && proc_log_count(p, e->rdma_settled) < 2) {
			fprintf(stderr, "  e2e: %s never logged \"%s\" twice\n", name,
				e->rdma_settled);
			return -1;
		}
		if (!e->rdma_optional && !proc_log_has(p, "rdma: session")) {
			fprintf(stderr, "  e2e: %s has no RDMA session over %s after 30 s\n", name,
				e->fabric);
			return -1;
		}
	}
	return 0;
}

static inline int e2e_agent(struct e2e *e, ...)
{
	va_list ap;
	int ret;

	va_start(ap, e);
	ret = e2e_agent_named(e, &e->agent, "agent", e->shm, ap);
	va_end(ap);
	if (ret == 0)
		ret = rdmem_open(e->shm, &e->h);
	return ret;
}

/* Another agent (its own session with the server) on its own segment. */
static inline int e2e_second_agent(struct e2e *e, struct proc *p, const char *shm, ...)
{
	va_list ap;
	int ret;

	va_start(ap, shm);
	ret = e2e_agent_named(e, p, "agent2", shm, ap);
	va_end(ap);
	return ret;
}

static inline int e2e_init(struct e2e *e, const char *fabric)
{
	memset(e, 0, sizeof(*e));
	e->port = proc_free_port_pair();
	snprintf(e->shm, sizeof(e->shm), "/rdmem-e2e-%d", (int)getpid());
	snprintf(e->fabric, sizeof(e->fabric), "%s", fabric);
	snprintf(e->clients, sizeof(e->clients), "4");
	snprintf(e->slots, sizeof(e->slots), "32");
	snprintf(e->image_dir, sizeof(e->image_dir), "%s/rdmem-e2e-img-%d", test_tmpdir(),
		 (int)getpid());
	mkdir(e->image_dir, 0755);
	return e->port ? 0 : -1;
}

static inline void e2e_stop_agent(struct e2e *e)
{
	if (e->h)
		rdmem_close(e->h);
	e->h = NULL;
	proc_stop(&e->agent, SIGTERM, 5000);
}

/* Removes the attach socket an agent killed with -9 left behind for name. */
static inline void e2e_unlink_door(const char *name)
{
	char path[RDMEM_DOOR_PATH_MAX];

	if (rdmem_door_path(name, NULL, geteuid(), path, sizeof(path)) == 0)
		unlink(path);
}

static inline void e2e_fini(struct e2e *e)
{
	char cmd[256];

	e2e_stop_agent(e);
	proc_stop(&e->server, SIGTERM, 5000);
	/* Agents killed with -9 leave their sockets (their memory went with them). */
	e2e_unlink_door(e->shm);
	snprintf(cmd, sizeof(cmd), "%s-b", e->shm);
	e2e_unlink_door(cmd);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", e->image_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "  could not remove %s\n", e->image_dir);
}

/* The value of member key (n bytes) of the object at p ('{'), looked up at
 * that object's own level only; NULL when it has none. */
static inline const char *e2e_json_member(const char *p, const char *key, size_t n)
{
	int depth = 0;

	for (; *p; p++) {
		if (*p == '"') {
			const char *s = p + 1, *e = s;

			while (*e && *e != '"')
				e += e[0] == '\\' && e[1] ? 2 : 1;
			if (!*e)
				return NULL;
			if (depth == 1 && (size_t)(e - s) == n && !strncmp(s, key, n) &&
			    e[1] == ':')
				return e + 2;
			p = e;
		} else if (*p == '{' || *p == '[') {
			depth++;
		} else if ((*p == '}' || *p == ']') && --depth == 0) {
			return NULL;
		}
	}
	return NULL;
}

/*
 * A number from JSON by a dotted path of keys, each key searched as text
 * after the previous one: "slices" finds the first worker's in
 * rdma.workers[], as the server-STATS tests want. Loose: a key of the same
 * name earlier in the text wins, so the agent's stats go through
 * e2e_json_path_num instead. Returns -1 when it is not there.
 */
static inline long long e2e_json_num(const char *json, const char *path)
{
	char key[64];
	const char *p = json, *dot;

	while (*path) {
		size_t n;

		dot = strchr(path, '.');
		n = dot ? (size_t)(dot - path) : strlen(path);
		snprintf(key, sizeof(key), "\"%.*s\":", (int)n, path);
		p = strstr(p, key);
		if (!p)
			return -1;
		p += strlen(key);
		path += n + (dot ? 1 : 0);
	}
	return strtoll(p, NULL, 10);
}

/*
 * A number by a dotted path of keys, each key a member of the object the
 * previous one names: "tcp.timeouts_held" is the tcp object's, never
 * rdma.timeouts_held (which the loose search found, as text after "tcp").
 * Returns -1 when it is not there or is not a number.
 */
static inline long long e2e_json_path_num(const char *json, const char *path)
{
	const char *p = strchr(json, '{');

	while (p && *path) {
		const char *dot = strchr(path, '.');
		size_t n = dot ? (size_t)(dot - path) : strlen(path);

		p = e2e_json_member(p, path, n);
		path += n + (dot ? 1 : 0);
		while (p && *p == ' ')
			p++;
		if (p && *path && *p != '{')
			return -1;
	}
	return p && (*p == '-' || (*p >= '0' && *p <= '9')) ? strtoll(p, NULL, 10) : -1;
}

/* The server's STATS JSON, asked over its TCP port (tcp_port) into buf. */
/* The server's JSON STATS from its TCP port; with secret_file (not NULL) the
 * connection proves the shared secret first (a server with one refuses
 * anything else). */
static inline int e2e_server_json_auth(unsigned tcp_port, const char *secret_file, char *buf,
				       size_t cap)
{
	struct rdmem_auth *a = NULL;
	struct rdmem_tcp_client *c;
	struct rdmem_tcp_call call;
	int ret = -1;

	if (cap < 2 || (secret_file && rdmem_auth_load(secret_file, &a) < 0))
		return -1;
	if (rdmem_tcp_client_connect(e2e_addr(), (uint16_t)tcp_port, 2000, &c) < 0) {
		rdmem_auth_free(a);
		return -1;
	}
	memset(&call, 0, sizeof(call));
	call.req.op = RDMEM_OP_STATS;
	call.req.flags = RDMEM_F_JSON;
	call.reply = buf;
	call.reply_cap = (uint32_t)(cap - 1);
	if ((!a || rdmem_tcp_client_auth(c, a, 2000) == 0) &&
	    rdmem_tcp_client_call(c, &call, 5000) == 0 && call.rep.status == RDMEM_S_OK) {
		buf[call.rep.val_len] = '\0';
		ret = 0;
	}
	rdmem_tcp_client_close(c);
	rdmem_auth_free(a);
	return ret;
}

static inline int e2e_server_json_at(unsigned tcp_port, char *buf, size_t cap)
{
	return e2e_server_json_auth(tcp_port, NULL, buf, cap);
}

/* One number from the STATS of a server started with --secret-file secret_file. */
static inline long long e2e_server_stat_auth(struct e2e *e, const char *secret_file,
					     const char *path)
{
	char text[16384];

	return e2e_server_json_auth(e->port + 1, secret_file, text, sizeof(text)) < 0
		   ? -1
		   : e2e_json_num(text, path);
}

static inline int e2e_server_json(struct e2e *e, char *buf, size_t cap)
{
	return e2e_server_json_at(e->port + 1, buf, cap);
}

static inline long long e2e_stat(struct e2e *e, const char *path)
{
	char *text = NULL;
	uint32_t len;
	long long v;

	if (rdmem_agent_stats(e->h, 1, &text, &len, NULL) < 0)
		return -1;
	v = e2e_json_path_num(text, path);
	free(text);
	return v;
}

/* Waits (bounded by ms) until the agent's link_up is want; 1 if it is. */
static inline int e2e_link_becomes(struct e2e *e, long long want, int ms)
{
	int i;

	for (i = 0; i < ms / 10 && e2e_stat(e, "link_up") != want; i++)
		proc_sleep_ms(10);
	return e2e_stat(e, "link_up") == want;
}

static inline int e2e_ctl(struct e2e *e, const char *cmd)
{
	char *reply = NULL;
	uint32_t len;
	int ret = rdmem_agent_ctl(e->h, cmd, &reply, &len, NULL);

	free(reply);
	return ret;
}

/* A value of n bytes that names its key and length, so a swap is caught. */
static inline void e2e_fill(uint8_t *buf, uint32_t n, uint32_t seed)
{
	uint32_t i, x = seed * 2654435761u + n;

	for (i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		buf[i] = (uint8_t)(x >> 16);
	}
}

#endif
