/* tcp_share.c - a full TCP table shared between addresses: when every one
 * of --tcp-max-conns connections is proven, a newcomer from an address
 * holding at least two fewer than the address holding the most is let in
 * past the limit (at most TCP_SHARE_OVER at once), and once it proves
 * itself that address's idlest connection is closed for it. Deciding at the
 * proof, not at accept, means a peer without the secret closes nothing.
 * An address may take a place once per TCP_SHARE_COOL_NS, and at most
 * TCP_SHARE_COOLS addresses wait at once: at most 6.4 closings a second.
 * Without it, proven connections were never closed for a newcomer, and 16
 * addresses holding 64 each (--tcp-max-per-addr) kept every other agent off
 * the TCP path for good.
 */
#include "server/tcp_conn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdmem/util.h"

/* The newcomer holds a when proven (itself included); t >= a + 1 is the
 * "two fewer" rule counted before it came. */
#define TCP_SHARE_MARGIN 2u

int rdmem_tcp_share_init(struct rdmem_tcp_server *s)
{
	s->share_cap = s->cfg.max_conns + TCP_SHARE_OVER + 1;
	s->share_scratch = calloc(s->share_cap, sizeof(*s->share_scratch));
	return s->share_scratch ? 0 : -ENOMEM;
}

void rdmem_tcp_share_fini(struct rdmem_tcp_server *s)
{
	free(s->share_scratch);
	s->share_scratch = NULL;
}

static int share_cmp_host(const void *a, const void *b)
{
	return strcmp((*(struct conn *const *)a)->host, (*(struct conn *const *)b)->host);
}

/*
 * The address (other than not) holding the most live proven connections,
 * and how many: the hosts are sorted, not hashed, so no choice of
 * addresses makes it slow (O(n log n) for n <= --tcp-max-conns + 8).
 */
static unsigned share_top(struct rdmem_tcp_server *s, const char *not, char *top, size_t cap)
{
	struct conn *c, **v = s->share_scratch;
	unsigned n = 0, i, run, best = 0;

	for (c = s->conns; c && n < s->share_cap; c = c->next)
		if (!c->dead && c->proven && !c->closing)
			v[n++] = c;
	qsort(v, n, sizeof(*v), share_cmp_host);
	for (i = 0; i < n; i += run) {
		for (run = 1; i + run < n && !strcmp(v[i]->host, v[i + run]->host); run++)
			;
		if (run > best && strcmp(v[i]->host, not)) {
			best = run;
			snprintf(top, cap, "%s", v[i]->host);
		}
	}
	return best;
}

/* The cooldown entry of host, or a free one (NULL: every entry waits). */
static struct tcp_share_cool *share_cool(struct rdmem_tcp_server *s, const char *host,
					 uint64_t now, int *cooling)
{
	struct tcp_share_cool *free_one = NULL;
	unsigned i;

	*cooling = 0;
	for (i = 0; i < TCP_SHARE_COOLS; i++) {
		struct tcp_share_cool *e = &s->share_cools[i];

		if (now >= e->until_ns) {
			free_one = free_one ? free_one : e;
		} else if (!strcmp(e->key, host)) {
			*cooling = 1;
			return e;
		}
	}
	return free_one;
}

/* 1: a newcomer from host (holding held) may come in past a full table. */
int rdmem_tcp_share_admit(struct rdmem_tcp_server *s, const char *host, unsigned held)
{
	uint64_t now = rdmem_now_ns();
	int cooling;

	if (s->nover >= TCP_SHARE_OVER || !share_cool(s, host, now, &cooling) || cooling)
		return 0;
	/* The sort runs at most once per TCP_SHARE_TOP_NS here (a connect
	 * storm against a full table); the proof counts afresh. */
	if (now - s->share_top_ns >= TCP_SHARE_TOP_NS) {
		s->share_top_n = share_top(s, "", s->share_top_key, sizeof(s->share_top_key));
		s->share_top_ns = now;
	}
	/* The address holding the most is never two short of another. */
	return strcmp(s->share_top_key, host) && s->share_top_n >= held + TCP_SHARE_MARGIN;
}

/* The idlest live proven connection of host (NULL: none). */
static struct conn *share_idlest(struct rdmem_tcp_server *s, const char *host)
{
	struct conn *c, *best = NULL;

	for (c = s->conns; c; c = c->next)
		if (!c->dead && c->proven && !c->closing && !strcmp(c->host, host) &&
		    (!best || c->last_ns < best->last_ns))
			best = c;
	return best;
}

/*
 * c came in past the full table and just proved itself: close the idlest
 * connection of the address holding the most (two more than c's had), or
 * -1 when that no longer holds (c must go).
 */
int rdmem_tcp_share_take(struct rdmem_tcp_server *s, struct conn *c, unsigned held)
{
	uint64_t now = rdmem_now_ns();
	char top[RDMEM_ADDR_GROUP_MAX];
	struct tcp_share_cool *cool;
	struct conn *victim;
	unsigned t;
	int cooling;

	t = share_top(s, c->host, top, sizeof(top));
	s->share_top_ns = 0; /* the next admission counts afresh too */
	cool = share_cool(s, c->host, now, &cooling);
	/* held counts c: before it came its address held held - 1 */
	if (!cool || cooling || t + 1 < held + TCP_SHARE_MARGIN || !(victim = share_idlest(s, top)))
		return -1;
	snprintf(cool->key, sizeof(cool->key), "%s", c->host);
	cool->until_ns = now + TCP_SHARE_COOL_NS;
	rdmem_service_count_net(s->svc, RDMEM_NET_TCP_SHARED);
	rdmem_log_limited(RDMEM_LOG_INFO,
			  "tcp %s: connections full: %s holds %u of them, %s %u: closing %s, "
			  "idle %llu ms",
			  s->name, top, t, c->host, held - 1, victim->peer,
			  (unsigned long long)((now - victim->last_ns) / 1000000));
	rdmem_tcp_conn_kill(victim, "closed for a newcomer of another address");
	return 0;
}
