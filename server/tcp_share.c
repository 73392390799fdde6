/* tcp_share.c - a full TCP table shared between addresses. When every one
 * of --tcp-max-conns connections is proven, a newcomer from an address
 * holding at least two fewer than the address holding the most comes in
 * past the limit, in a pool of its own (TCP_SHARE_OVER places, one per
 * address; conn->over), and once it proves itself that address's idlest
 * connection is closed for it. Deciding at the proof means a peer without
 * the secret closes nothing; an unproven connection that did not qualify
 * never displaces one that did. Closings are paced by one token bucket
 * (TCP_SHARE_RATE_NS each, TCP_SHARE_BURST at once), and an address whose
 * taken place closes within TCP_SHARE_COOL_NS waits that long before it
 * takes another (a dialer that takes and drops). Before, proven
 * connections were never closed for a newcomer, and 16 addresses holding
 * 64 each (--tcp-max-per-addr) kept every other agent off TCP for good.
 */
#include "server/tcp_conn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdmem/util.h"

/* The newcomer's address holds held (itself not counted): it qualifies
 * when the address holding the most holds at least held + 2. */
#define TCP_SHARE_MARGIN 2u

int rdmem_tcp_share_init(struct rdmem_tcp_server *s)
{
	s->share_cap = s->cfg.max_conns + TCP_SHARE_OVER + 1;
	s->share_scratch = calloc(s->share_cap, sizeof(*s->share_scratch));
	s->share_tokens = TCP_SHARE_BURST;
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
 * addresses makes it slow (O(n log n); ~32 us at 1,024).
 */
static unsigned share_top(struct rdmem_tcp_server *s, const char * not, char *top, size_t cap)
{
	struct conn *c, **v = s->share_scratch;
	unsigned n = 0, i, run, best = 0;

	top[0] = '\0';
	for (c = s->conns; c && n < s->share_cap; c = c->next)
		if (!c->dead && c->proven && !c->closing)
			v[n++] = c;
	qsort(v, n, sizeof(*v), share_cmp_host);
	for (i = 0; i < n; i += run) {
		for (run = 1; i + run < n && !strcmp(v[i]->host, v[i + run]->host); run++)
			;
		if (run > best && strcmp(v[i]->host, not )) {
			best = run;
			snprintf(top, cap, "%s", v[i]->host);
		}
	}
	return best;
}

/* 1 while host waits after dropping a place it took. */
static int share_cooling(const struct rdmem_tcp_server *s, const char *host, uint64_t now)
{
	unsigned i;

	for (i = 0; i < TCP_SHARE_COOLS; i++)
		if (now < s->share_cools[i].until_ns && !strcmp(s->share_cools[i].key, host))
			return 1;
	return 0;
}

/* The tokens now (refilled by the time passed); 0: no closing may start. */
static unsigned share_tokens(struct rdmem_tcp_server *s, uint64_t now)
{
	uint64_t add = (now - s->share_refill_ns) / TCP_SHARE_RATE_NS;

	if (add) {
		s->share_tokens =
		    (unsigned)RDMEM_MIN((uint64_t)TCP_SHARE_BURST, s->share_tokens + add);
		s->share_refill_ns = s->share_tokens == TCP_SHARE_BURST
					 ? now
					 : s->share_refill_ns + add * TCP_SHARE_RATE_NS;
	}
	return s->share_tokens;
}

/* The over place host may use: none taken by it, one free, or the oldest
 * of another address past its grace (closed). 0: none. */
static int share_over_place(struct rdmem_tcp_server *s, const char *host, uint64_t now)
{
	uint64_t grace = s->cfg.auth_ms * 1000000ull / 2;
	struct conn *c, *oldest = NULL;

	for (c = s->conns; c; c = c->next) {
		if (c->dead || !c->over)
			continue;
		if (!strcmp(c->host, host))
			return 0;
		if (!oldest || c->born_ns < oldest->born_ns)
			oldest = c;
	}
	if (s->nover < TCP_SHARE_OVER)
		return 1;
	if (!oldest || now - oldest->born_ns < grace)
		return 0;
	rdmem_service_count_net(s->svc, RDMEM_NET_TCP_EVICTED);
	rdmem_tcp_conn_kill(oldest, "past a full table without proving itself in its grace");
	return 1;
}

/* The address counts for admission: again once the last count is older
 * than TCP_SHARE_TOP_NS or 100 times what it cost (1 % of the loop at most
 * under a connect storm, at any --tcp-max-conns). */
static void share_count(struct rdmem_tcp_server *s, uint64_t now)
{
	uint64_t cost;

	if (now < s->share_top_next_ns)
		return;
	s->share_top_n = share_top(s, "", s->share_top_key, sizeof(s->share_top_key));
	cost = rdmem_now_ns() - now;
	s->share_top_next_ns = now + RDMEM_MAX(TCP_SHARE_TOP_NS, 100 * cost);
}

/* 1: a newcomer from host (holding held) comes in past a full table. */
int rdmem_tcp_share_admit(struct rdmem_tcp_server *s, const char *host, unsigned held)
{
	uint64_t now = rdmem_now_ns();

	if (!share_tokens(s, now) || share_cooling(s, host, now))
		return 0;
	share_count(s, now);
	/* The address holding the most is never two short of another. */
	if (!strcmp(s->share_top_key, host) || s->share_top_n < held + TCP_SHARE_MARGIN)
		return 0;
	return share_over_place(s, host, now);
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
 * -1 when that no longer holds or no token is left (c must go).
 */
int rdmem_tcp_share_take(struct rdmem_tcp_server *s, struct conn *c, unsigned held)
{
	uint64_t now = rdmem_now_ns();
	char top[RDMEM_ADDR_GROUP_MAX];
	struct conn *victim;
	unsigned t;

	if (!share_tokens(s, now)) /* before the count: a refusal costs no sort */
		return -1;
	t = share_top(s, c->host, top, sizeof(top));
	/* held counts c: before it came its address held held - 1 */
	if (t + 1 < held + TCP_SHARE_MARGIN || !(victim = share_idlest(s, top)))
		return -1;
	s->share_tokens--;
	c->took_ns = now;
	rdmem_service_count_net(s->svc, RDMEM_NET_TCP_SHARED);
	rdmem_log_limited(RDMEM_LOG_INFO,
			  "tcp %s: connections full: %s holds %u of them, %s %u: closing %s, "
			  "idle %llu ms",
			  s->name, top, t, c->host, held - 1, victim->peer,
			  (unsigned long long)((now - victim->last_ns) / 1000000));
	victim->took_ns = 0; /* closed for another: its address is not to blame */
	rdmem_tcp_conn_kill(victim, "closed for a newcomer of another address");
	return 0;
}

/* c is closing: if it took its place less than TCP_SHARE_COOL_NS ago, its
 * address waits that long before it takes another (one entry per address;
 * with every entry waiting, the token bucket alone paces it). */
void rdmem_tcp_share_closed(struct rdmem_tcp_server *s, const struct conn *c)
{
	uint64_t now = rdmem_now_ns();
	unsigned i;

	if (!c->took_ns || now - c->took_ns >= TCP_SHARE_COOL_NS || share_cooling(s, c->host, now))
		return;
	for (i = 0; i < TCP_SHARE_COOLS; i++)
		if (now >= s->share_cools[i].until_ns) {
			snprintf(s->share_cools[i].key, sizeof(s->share_cools[i].key), "%s",
				 c->host);
			s->share_cools[i].until_ns = now + TCP_SHARE_COOL_NS;
			return;
		}
}
