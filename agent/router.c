/* router.c - the agent's servers and the calls' way to them (see router.h).
 *
 * The backend table is published as one pointer: the front-door actor (and
 * a split call's next part, from whichever thread finished the last) reads
 * it inside an enter/leave pair; a reload swaps it, waits until no reader
 * is inside, then stops the backends it dropped. Kept backends move over.
 */
#include "agent/router.h"

#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/metrics.h"
#include "agent/route.h"
#include "agent/router_impl.h"
#include "rdmem/fabric.h"
#include "rdmem/util.h"
#include "shm/segment.h"

/* ---- the server list ----------------------------------------------------------- */

static int router_why(char *why, size_t cap, const char *fmt, const char *entry)
{
	snprintf(why, cap, fmt, entry);
	return -EINVAL;
}

/* "host", "host:port", "[v6]", "[v6]:port", or a bare IPv6 address. */
static int router_parse_entry(const char *text, uint16_t dport, uint16_t dtcp,
			      struct rdmem_router_entry *e, char *why, size_t cap)
{
	const char *colon = strrchr(text, ':'), *host = text, *end;
	size_t hlen;
	unsigned long port = dport;
	char *stop;

	if (text[0] == '[') {
		end = strchr(text, ']');
		if (!end || (end[1] && end[1] != ':'))
			return router_why(why, cap, "server '%s': '[' without a closing ']'", text);
		host = text + 1;
		hlen = (size_t)(end - host);
		colon = end[1] == ':' ? end + 1 : NULL;
	} else if (colon && strchr(text, ':') != colon) {
		hlen = strlen(text); /* a bare IPv6 address: no port */
		colon = NULL;
	} else {
		hlen = colon ? (size_t)(colon - text) : strlen(text);
	}
	if (!hlen || hlen > 255)
		return router_why(why, cap, "server '%s': the host must be 1..255 bytes", text);
	/* Letters, digits and . - _ (and : % of an IPv6 address): a name then
	 * needs no quoting where it is shown (stats JSON, /metrics labels). */
	if (strspn(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_:%") <
	    hlen)
		return router_why(
		    why, cap, "server '%s': a host is letters, digits and . - _ (: %% for IPv6)",
		    text);
	if (colon) {
		errno = 0;
		port = strtoul(colon + 1, &stop, 10);
		/* digits only: strtoul would also take a sign or spaces */
		if (!colon[1] || strspn(colon + 1, "0123456789") != strlen(colon + 1) || *stop ||
		    errno || port < 1 || port > 65534)
			return router_why(why, cap, "server '%s': the port must be 1..65534", text);
	}
	memcpy(e->host, host, hlen);
	e->host[hlen] = '\0';
	e->port = (uint16_t)port;
	e->tcp_port = colon || !dtcp ? (uint16_t)(port + 1) : dtcp;
	/* The name keys hash against always carries the port, so agents that
	 * spell the same server with and without the default agree. */
	snprintf(e->name, sizeof(e->name), strchr(e->host, ':') ? "[%s]:%u" : "%s:%u", e->host,
		 e->port);
	return 0;
}

static char *router_trim(char *s)
{
	char *end;

	while (*s == ' ' || *s == '\t' || *s == '\r')
		s++;
	end = s + strlen(s);
	while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
		*--end = '\0';
	return s;
}

static int router_add_entry(char *item, uint16_t port, uint16_t tcp, struct rdmem_router_entry *out,
			    uint32_t *n, char *why, size_t cap)
{
	struct rdmem_router_entry e;
	uint32_t i;
	int ret;

	if (*n == RDMEM_ROUTER_MAX_SERVERS)
		return router_why(why, cap, "more than 64 servers (at '%s')", item);
	if ((ret = router_parse_entry(item, port, tcp, &e, why, cap)) < 0)
		return ret;
	for (i = 0; i < *n; i++)
		if (!strcmp(out[i].name, e.name))
			return router_why(why, cap, "server '%s' is listed twice", e.name);
	out[(*n)++] = e;
	return 0;
}

int rdmem_router_parse_list(const char *text, int file, uint16_t port, uint16_t tcp_port,
			    struct rdmem_router_entry *out, uint32_t *n, char *why, size_t why_cap)
{
	char *copy = strdup(text), *rest = copy, *line, *hash;
	int ret = 0;

	if (!copy)
		return -ENOMEM;
	*n = 0;
	/* strsep, not strtok: "a,,b" has an empty entry, which is a mistake. */
	while (!ret && (line = strsep(&rest, file ? "\n" : ","))) {
		if (file && (hash = strchr(line, '#')))
			*hash = '\0';
		line = router_trim(line);
		if (!*line && file)
			continue;
		if (!*line)
			ret = router_why(why, why_cap, "an empty server in '%s'", text);
		else
			ret = router_add_entry(line, port, tcp_port, out, n, why, why_cap);
	}
	free(copy);
	if (!ret && !*n)
		ret = router_why(why, why_cap, "no server in %s", file ? "the file" : "the list");
	return ret;
}

/* ---- backends -------------------------------------------------------------------- */

/* True when host resolves to an address of this machine. */
static int router_host_is_local(const char *host)
{
	struct addrinfo *res = NULL, *ai;
	struct ifaddrs *ifs = NULL, *i;
	int local = 0;

	if (getaddrinfo(host, NULL, NULL, &res) != 0)
		return 0;
	if (getifaddrs(&ifs) == 0) {
		for (ai = res; ai && !local; ai = ai->ai_next)
			for (i = ifs; i && !local; i = i->ifa_next)
				local = i->ifa_addr && ai->ai_family == AF_INET &&
					i->ifa_addr->sa_family == AF_INET &&
					!memcmp(&((struct sockaddr_in *)ai->ai_addr)->sin_addr,
						&((struct sockaddr_in *)i->ifa_addr)->sin_addr, 4);
		freeifaddrs(ifs);
	}
	freeaddrinfo(res);
	return local;
}

/* --fabric, or: verbs where a device is, else shm for a server on this
 * host (the emulated fabric is local only), else TCP alone. */
static int router_fabric(const struct rdmem_router *r, const char *host)
{
	if (r->cfg.fabric_kind >= 0)
		return r->cfg.fabric_kind;
	if (rdmem_fab_verbs_available())
		return RDMEM_FAB_VERBS;
	return router_host_is_local(host) ? RDMEM_FAB_SHM : 0;
}

static void router_backend_stop(struct rdmem_router_backend *b)
{
	if (!b)
		return;
	rdmem_agent_session_stop(b->session); /* first: it hands calls to the TCP actor */
	rdmem_tcp_actor_stop(b->tcp);
	free(b);
}

static int router_backend_start(struct rdmem_router *r, const struct rdmem_router_entry *e,
				struct rdmem_router_backend **out)
{
	struct rdmem_router_backend *b = calloc(1, sizeof(*b));
	struct rdmem_tcp_actor_config tc = r->cfg.tcp;
	struct rdmem_agent_config sc = r->cfg.session;
	int ret;

	if (!b)
		return -ENOMEM;
	b->entry = *e;
	b->seed = rdmem_route_server_seed(e->name);
	tc.host = b->entry.host;
	tc.name = b->entry.name;
	tc.port = e->tcp_port;
	sc.server = b->entry.host;
	sc.name = b->entry.name;
	sc.port = e->port;
	sc.tcp_port = e->tcp_port;
	sc.fabric = router_fabric(r, e->host);
	if ((ret = rdmem_tcp_actor_start(&tc, r->fd, &b->tcp)) < 0) {
		free(b);
		return ret;
	}
	if ((ret = rdmem_agent_session_start(&sc, r->fd, b->tcp, &b->session)) < 0) {
		rdmem_tcp_actor_stop(b->tcp);
		free(b);
		return ret;
	}
	b->msrc = (struct rdmem_agent_metrics_src){ r->fd, b->tcp, b->session, sc.fabric };
	rdmem_info("server %s: rdma %s:%u (%s), tcp port %u", e->name, e->host, e->port,
		   sc.fabric ? rdmem_fab_kind_name(sc.fabric) : "off", e->tcp_port);
	*out = b;
	return 0;
}

/* ---- the published table ---------------------------------------------------------- */

struct rdmem_router_table *rdmem_router_enter(struct rdmem_router *r)
{
	/* seq_cst on both: a reload's exchange and this increment are ordered
	 * one way or the other, so either the reload sees us inside, or we
	 * load the table it published. */
	atomic_fetch_add_explicit(&r->readers, 1, memory_order_seq_cst);
	return atomic_load_explicit(&r->table, memory_order_seq_cst);
}

void rdmem_router_leave(struct rdmem_router *r)
{
	/* Release: our last use of the table happens before a reload's
	 * acquire load of readers sees it drop. */
	atomic_fetch_sub_explicit(&r->readers, 1, memory_order_release);
}

/* Publishes t; returns the table it replaced, which no reader uses now. */
static struct rdmem_router_table *router_publish(struct rdmem_router *r,
						 struct rdmem_router_table *t)
{
	struct rdmem_router_table *old =
	    atomic_exchange_explicit(&r->table, t, memory_order_seq_cst);

	/* seq_cst, not just acquire (which pairs with rdmem_router_leave()):
	 * this load and the exchange above must be ordered against a reader's
	 * increment and its load of the table, both seq_cst (store-load, as in
	 * Dekker's). Readers stay inside for a route and a queue push, or the
	 * front door for one batch of calls it takes inline (at most
	 * RDMEM_FD_BATCH routes and posts), so this spins for microseconds. */
	while (atomic_load_explicit(&r->readers, memory_order_seq_cst))
		sched_yield();
	return old;
}

static void router_table_fill(struct rdmem_router_table *t)
{
	uint32_t i;

	for (i = 0; i < t->n; i++)
		t->seeds[i] = t->b[i]->seed;
}

int rdmem_router_start(const struct rdmem_router_config *cfg, struct rdmem_frontdoor *fd,
		       const struct rdmem_router_entry *list, uint32_t n, struct rdmem_router **out)
{
	struct rdmem_router *r = calloc(1, sizeof(*r));
	struct rdmem_router_table *t = calloc(1, sizeof(*t));
	int ret = 0;

	if (!r || !t) {
		free(r);
		free(t);
		return -ENOMEM;
	}
	r->cfg = *cfg;
	r->fd = fd;
	pthread_mutex_init(&r->lock, NULL);
	for (t->n = 0; t->n < n && ret == 0; t->n++)
		if ((ret = router_backend_start(r, &list[t->n], &t->b[t->n])) < 0)
			break;
	router_table_fill(t);
	atomic_store_explicit(&r->table, t, memory_order_release);
	*out = r;
	if (ret == 0) {
		/* Set before the front door's actor starts (the agent's start
		 * order), cleared in stop before any backend goes. */
		rdmem_frontdoor_on_release(fd, rdmem_router_released, r);
		r->pin_waker = (struct rdmem_pin_waker){ rdmem_router_pin_shed, r };
		rdmem_pin_set_waker(rdmem_frontdoor_pin(fd), &r->pin_waker);
	}
	return ret;
}

void rdmem_router_stop(struct rdmem_router *r)
{
	struct rdmem_router_table *t, *none;
	uint32_t i;

	if (!r)
		return;
	rdmem_frontdoor_on_release(r->fd, NULL, NULL);
	rdmem_pin_set_waker(rdmem_frontdoor_pin(r->fd), NULL);
	/* An empty table first: a split call's part sent again while the
	 * backends stop finds no server (RDMEM_S_UNREACHABLE), never a
	 * stopped one. Without memory, stop them anyway: no front door runs. */
	none = calloc(1, sizeof(*none));
	t = none ? router_publish(r, none) : atomic_load_explicit(&r->table, memory_order_acquire);
	for (i = 0; t && i < t->n; i++)
		router_backend_stop(t->b[i]);
	if (none) {
		free(t);
		t = none;
	}
	rdmem_router_answer_reload(r, RDMEM_S_SHUTDOWN, "the agent is stopping");
	pthread_mutex_destroy(&r->lock);
	free(t);
	free(r);
}

void rdmem_router_released(void *ctx, uint32_t client)
{
	struct rdmem_router *r = ctx;
	struct rdmem_router_table *t = rdmem_router_enter(r);
	uint32_t i;

	for (i = 0; i < t->n; i++)
		rdmem_agent_session_released(t->b[i]->session, client);
	rdmem_router_leave(r);
}

/* A link's pinned-memory budget needed room (agent/pin.h): every session
 * looks at the shed generation on its next round. */
void rdmem_router_pin_shed(void *ctx)
{
	struct rdmem_router *r = ctx;
	struct rdmem_router_table *t = rdmem_router_enter(r);
	uint32_t i;

	for (i = 0; i < t->n; i++)
		rdmem_agent_session_wake(t->b[i]->session);
	rdmem_router_leave(r);
}

/* ---- routing ------------------------------------------------------------------------ */

uint32_t rdmem_router_pick_key(const struct rdmem_router_table *t, const void *key, uint32_t len)
{
	if (t->n == 1)
		return 0;
	return rdmem_route_pick(t->seeds, t->n, rdmem_route_key_hash(key, len));
}

/*
 * Which server one call goes to. The key is read in the client's slot,
 * which the client may still write: a client that changes it under us only
 * sends its own call to a server that does not own the key it ends up
 * with, which it could do with a legal call anyway.
 */
static uint32_t router_pick(const struct rdmem_router_table *t, const struct rdmem_agent_call *c)
{
	return rdmem_router_pick_key(t, c->key, c->req.key_len);
}

/*
 * The front door's thread stays inside the table for a whole batch of
 * calls (rdmem_router_batch_end leaves it): a session may hold its token
 * across the batch, and a reload must not stop a session the front door
 * still holds. A reload waits for the batch, tens of microseconds.
 */
void rdmem_router_submit(void *ctx, struct rdmem_agent_call *call)
{
	struct rdmem_router *r = ctx;
	struct rdmem_router_table *t = r->batch ? r->batch : (r->batch = rdmem_router_enter(r));
	uint16_t op = call->req.op;

	if (!t->n)
		rdmem_frontdoor_complete_status(r->fd, call, RDMEM_S_SHUTDOWN);
	else if (op == RDMEM_SHM_OP_AGENT_CTL && rdmem_router_ctl_is_reload(call))
		rdmem_router_ask_reload(r, call);
	else if (t->n > 1 && (op == RDMEM_OP_KV_MGET || op == RDMEM_OP_STATS ||
			      op == RDMEM_SHM_OP_AGENT_STATS || op == RDMEM_SHM_OP_AGENT_CTL))
		rdmem_router_fan_out(r, t, call);
	else
		rdmem_agent_session_submit(t->b[router_pick(t, call)]->session, call);
}

void rdmem_router_batch_end(void *ctx)
{
	struct rdmem_router *r = ctx;
	struct rdmem_router_table *t = r->batch;
	uint32_t i;

	if (!t)
		return;
	for (i = 0; i < t->n; i++)
		rdmem_agent_session_batch_end(t->b[i]->session);
	r->batch = NULL;
	rdmem_router_leave(r);
}

/* ---- reload ----------------------------------------------------------------------- */

/* A regular file only: a FIFO or a device would block the main thread,
 * which also waits for SIGTERM. */
static int router_read_file(const char *path, char **text, char *why, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY), ret = 0;
	struct stat st;
	ssize_t len = 0;

	if (fd < 0 || fstat(fd, &st) < 0) {
		ret = -errno;
		snprintf(why, cap, "--servers-file %s: %s", path, strerror(errno));
	} else if (!S_ISREG(st.st_mode)) {
		ret = -EINVAL;
		snprintf(why, cap, "--servers-file %s: not a regular file", path);
	} else if (!(*text = calloc(1, RDMEM_ROUTER_FILE_MAX + 1))) {
		ret = -ENOMEM;
		snprintf(why, cap, "--servers-file %s: out of memory", path);
	} else if ((len = read(fd, *text, RDMEM_ROUTER_FILE_MAX + 1)) < 0 ||
		   len > RDMEM_ROUTER_FILE_MAX) {
		ret = len < 0 ? -errno : -EFBIG;
		snprintf(why, cap, "--servers-file %s: %s", path,
			 len < 0 ? strerror(errno) : "over 64 KiB");
		free(*text);
		*text = NULL;
	} else if (memchr(*text, '\0', (size_t)len)) {
		ret = -EINVAL;
		snprintf(why, cap, "--servers-file %s: a NUL byte: not a text file", path);
		free(*text);
		*text = NULL;
	}
	if (fd >= 0)
		close(fd);
	return ret;
}

int rdmem_router_read_servers(const char *path, uint16_t port, uint16_t tcp,
			      struct rdmem_router_entry *out, uint32_t *n, char *why, size_t cap)
{
	char *text = NULL, inner[256];
	int ret = router_read_file(path, &text, why, cap);

	if (ret < 0)
		return ret;
	ret = rdmem_router_parse_list(text, 1, port, tcp, out, n, inner, sizeof(inner));
	if (ret < 0)
		snprintf(why, cap, "--servers-file %s: %s", path, inner);
	free(text);
	return ret;
}

static struct rdmem_router_backend *router_find(struct rdmem_router_table *t, const char *name)
{
	uint32_t i;

	for (i = 0; i < t->n; i++)
		if (t->b[i] && !strcmp(t->b[i]->entry.name, name))
			return t->b[i];
	return NULL;
}

/* Builds the table of list from old's backends and new ones; *added counts
 * the new. On failure the new ones are stopped and old is untouched. */
static int router_build(struct rdmem_router *r, struct rdmem_router_table *old,
			const struct rdmem_router_entry *list, uint32_t n,
			struct rdmem_router_table *t, uint32_t *added)
{
	uint32_t i;
	int ret = 0;

	*added = 0;
	for (t->n = 0; t->n < n; t->n++) {
		t->b[t->n] = router_find(old, list[t->n].name);
		if (t->b[t->n])
			continue;
		if ((ret = router_backend_start(r, &list[t->n], &t->b[t->n])) < 0)
			break;
		(*added)++;
	}
	if (ret < 0)
		for (i = 0; i < t->n; i++)
			if (!router_find(old, t->b[i]->entry.name))
				router_backend_stop(t->b[i]);
	router_table_fill(t);
	return ret;
}

static int router_swap(struct rdmem_router *r, const struct rdmem_router_entry *list, uint32_t n,
		       char *msg, size_t cap)
{
	struct rdmem_router_table *old = atomic_load_explicit(&r->table, memory_order_acquire);
	struct rdmem_router_table *t = calloc(1, sizeof(*t));
	uint32_t i, added, removed = 0;
	int ret;

	if (!t)
		return -ENOMEM;
	if ((ret = router_build(r, old, list, n, t, &added)) < 0) {
		snprintf(msg, cap, "reload failed: starting a server: %s", strerror(-ret));
		free(t);
		return ret;
	}
	old = router_publish(r, t);
	for (i = 0; i < old->n; i++)
		if (!router_find(t, old->b[i]->entry.name)) {
			rdmem_info("server %s: removed from the list; its calls end",
				   old->b[i]->entry.name);
			router_backend_stop(old->b[i]);
			removed++;
		}
	free(old);
	snprintf(msg, cap, "reloaded: %u servers (+%u -%u)", n, added, removed);
	return 0;
}

int rdmem_router_reload(struct rdmem_router *r, char *msg, size_t cap)
{
	/* First: an agent-ctl reload parked before now is answered by this
	 * reload, which reads the file after the client asked. */
	struct rdmem_agent_call *asked = rdmem_router_take_reload(r);
	struct rdmem_router_entry *list = NULL;
	uint32_t n = 0;
	int ret;

	if (!r->cfg.servers_file) {
		snprintf(msg, cap,
			 "nothing to reload: the servers came from -s, not --servers-file");
		ret = -ENOENT;
	} else if (!(list = calloc(RDMEM_ROUTER_MAX_SERVERS, sizeof(*list)))) {
		snprintf(msg, cap, "reload: out of memory");
		ret = -ENOMEM;
	} else if ((ret = rdmem_router_read_servers(r->cfg.servers_file, r->cfg.default_port,
						    r->cfg.default_tcp, list, &n, msg, cap)) == 0) {
		pthread_mutex_lock(&r->lock);
		ret = router_swap(r, list, n, msg, cap);
		pthread_mutex_unlock(&r->lock);
	}
	free(list);
	rdmem_router_count(ret == 0 ? &r->cnt.reloads : &r->cnt.reload_failures);
	if (ret == 0)
		rdmem_info("%s", msg);
	else
		rdmem_err("%s", msg);
	rdmem_router_answer_call(r, asked, ret == 0 ? RDMEM_S_OK : RDMEM_S_BAD_REQUEST, msg);
	return ret;
}

/* ---- telemetry ----------------------------------------------------------------------- */

int rdmem_router_metrics_render(void *ctx, char *buf, size_t cap)
{
	struct rdmem_router *r = ctx;
	struct rdmem_agent_metrics_src *srcs[RDMEM_ROUTER_MAX_SERVERS];
	const char *names[RDMEM_ROUTER_MAX_SERVERS];
	struct rdmem_router_table *t;
	uint32_t i;
	int ret;

	/* The lock keeps a reload from stopping a backend we read. */
	pthread_mutex_lock(&r->lock);
	t = atomic_load_explicit(&r->table, memory_order_acquire);
	for (i = 0; i < t->n; i++) {
		srcs[i] = &t->b[i]->msrc;
		names[i] = t->b[i]->entry.name;
	}
	ret = rdmem_agent_metrics_render_many(srcs, t->n > 1 ? names : NULL, t->n, buf, cap);
	pthread_mutex_unlock(&r->lock);
	return ret;
}

uint32_t rdmem_router_servers(struct rdmem_router *r, char *list, size_t cap)
{
	struct rdmem_router_table *t;
	size_t used = 0;
	uint32_t i, n;

	pthread_mutex_lock(&r->lock);
	t = atomic_load_explicit(&r->table, memory_order_acquire);
	n = t->n;
	for (i = 0; i < n && used < cap; i++)
		used += (size_t)snprintf(list + used, cap - used, "%s%s", i ? "," : "",
					 t->b[i]->entry.name);
	pthread_mutex_unlock(&r->lock);
	return n;
}
