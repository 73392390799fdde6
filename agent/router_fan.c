/* router_fan.c - one call, several servers (see router_impl.h).
 *
 * A split call's parts live in the client's own slot, in the reply area
 * of the call they came from: each part gets its sub-request and a share
 * of that area for its reply, so the RDMA paths reach them through the
 * client's registered area like any call. An MGET's share is in proportion
 * to its keys; a part whose values did not fit its share runs again alone,
 * with the whole area, once the others are done. Replies are copied out of
 * the slot (which the client can write) before they are read, then merged
 * into the slot in the order the caller asked. docs/architecture.md,
 * "Many servers".
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/router_impl.h"
#include "rdmem/blob.h"
#include "rdmem/util.h"
#include "shm/segment.h"

enum { FAN_MGET, FAN_STATS, FAN_CTL };

struct rdmem_router_fan;

struct rdmem_router_part {
	struct rdmem_agent_call call; /* first: the join hook gets &call */
	struct rdmem_router_fan *fan;
	uint64_t seed;	       /* its server, found again by seed for a rerun */
	uint32_t first, nkeys; /* MGET: its keys are fan->order[first, first + nkeys) */
	uint32_t keybytes;
	uint32_t share; /* reply bytes its region had */
	uint16_t status;
	uint8_t deferred; /* runs (again) alone, with the whole reply area */
	uint8_t rerun;	  /* ran with the whole area already */
	uint8_t *reply;	  /* the reply bytes, copied out of the slot */
	uint32_t reply_len;
	char name[RDMEM_ROUTER_NAME_MAX]; /* STATS: its server, heading its report */
};

struct rdmem_router_fan {
	struct rdmem_router *r;
	struct rdmem_agent_call *parent;
	int kind;
	atomic_uint pending; /* parts out, plus one while parts are being sent */
	uint32_t nparts;
	uint8_t *base;	/* the parent's reply area in its slot */
	uint32_t space; /* its bytes */
	uint8_t *req;	/* MGET: the request, copied out of the slot */
	struct rdmem_blob_array keys;
	uint32_t *order; /* key indexes, grouped by part */
	char ctl[RDMEM_MAX_KEY + 1];
	/* Bytes charged to r->heap: parts finishing on different threads add
	 * to it at once (relaxed: fan_free reads it after the last part's
	 * acq_rel decrement of pending). */
	atomic_uint_fast64_t held;
	struct rdmem_router_part parts[];
};

static void fan_next(struct rdmem_router_fan *f);

static uint32_t align64(uint64_t n)
{
	return (uint32_t)((n + 63) & ~63ull);
}

static int fan_charge(struct rdmem_router_fan *f, uint64_t bytes)
{
	/* Relaxed: a budget, not a synchronisation point. */
	uint64_t now = atomic_fetch_add_explicit(&f->r->heap, bytes, memory_order_relaxed);

	if (now + bytes > RDMEM_ROUTER_HEAP_MAX) {
		atomic_fetch_sub_explicit(&f->r->heap, bytes, memory_order_relaxed);
		rdmem_router_count(&f->r->cnt.busy);
		return -EBUSY;
	}
	atomic_fetch_add_explicit(&f->held, bytes, memory_order_relaxed);
	return 0;
}

static void fan_free(struct rdmem_router_fan *f)
{
	uint32_t i;

	for (i = 0; i < f->nparts; i++)
		free(f->parts[i].reply);
	atomic_fetch_sub_explicit(&f->r->heap, atomic_load_explicit(&f->held, memory_order_relaxed),
				  memory_order_relaxed);
	free(f->req);
	free(f->order);
	free(f);
}

/* Answers the call the parts came from and lets the fan go. */
static void fan_answer(struct rdmem_router_fan *f, uint16_t status, uint32_t len)
{
	struct rdmem_agent_reply rep = { status,
					 0,
					 status == RDMEM_S_OK ? len : 0,
					 (uint32_t)(f->base - f->parent->payload),
					 0,
					 { 0, 0, 0 } };

	rdmem_frontdoor_complete(f->r->fd, f->parent, &rep);
	fan_free(f);
}

/* ---- parts ------------------------------------------------------------------ */

/* A part's reply: kept (copied out of the slot) and counted. Any thread. */
static void fan_part_done(struct rdmem_agent_call *call, const struct rdmem_agent_reply *rep)
{
	struct rdmem_router_part *p = (struct rdmem_router_part *)call;
	struct rdmem_router_fan *f = p->fan;

	p->status = rep->status;
	/* Keep the values, reports, or the name of a server that is down. */
	if ((p->status == RDMEM_S_UNREACHABLE || (p->status == RDMEM_S_OK && f->kind != FAN_CTL)) &&
	    rep->val_len) {
		if (rep->data_off > call->payload_cap ||
		    rep->val_len > call->payload_cap - rep->data_off)
			p->status = RDMEM_S_IO;
		else if (fan_charge(f, rep->val_len) < 0 || !(p->reply = malloc(rep->val_len)))
			p->status = RDMEM_S_BUSY;
		else
			memcpy(p->reply, call->payload + rep->data_off, rep->val_len);
		p->reply_len = p->reply ? rep->val_len : 0;
	}
	/* Its values did not fit its share: alone, with the whole area, they may. */
	if (p->status == RDMEM_S_TOO_BIG && f->kind == FAN_MGET && !p->rerun)
		p->deferred = 1;
	/* acq_rel: the last part to finish sees every other part's reply. */
	if (atomic_fetch_sub_explicit(&f->pending, 1, memory_order_acq_rel) == 1)
		fan_next(f);
}

/* Makes p's call: its sub-request at region (sub bytes), then its share. */
static void fan_part_call(struct rdmem_router_fan *f, struct rdmem_router_part *p, uint8_t *region,
			  uint32_t sub, uint32_t share, uint16_t op)
{
	const struct rdmem_agent_call *parent = f->parent;
	struct rdmem_agent_call *c = &p->call;

	memset(c, 0, sizeof(*c));
	c->req = parent->req;
	c->req.op = op;
	c->req.key_len = op == RDMEM_SHM_OP_AGENT_CTL ? parent->req.key_len : 0;
	c->req.val_len = sub;
	c->payload = region;
	c->payload_cap = align64(sub) + share;
	c->key = op == RDMEM_SHM_OP_AGENT_CTL ? (uint8_t *)f->ctl : region;
	c->val = region;
	c->deadline_ns = parent->deadline_ns;
	c->start_ns = parent->start_ns;
	c->client = parent->client;
	c->slot = parent->slot;
	c->slot_seq = parent->slot_seq;
	c->client_serial = parent->client_serial;
	c->forced_path = parent->forced_path;
	c->path = parent->path;
	c->join = fan_part_done;
	p->share = share;
}

/* Writes p's MGET sub-request (its keys, from the copy) at region. */
static uint32_t fan_mget_sub(struct rdmem_router_fan *f, struct rdmem_router_part *p,
			     uint8_t *region)
{
	uint64_t size = rdmem_blob_array_size(p->nkeys, p->keybytes);
	struct rdmem_blob_writer w = { 0 };
	uint32_t i, len, flags;
	const void *k;

	/* Sized exactly above: cannot fail (an empty request would be refused). */
	if (rdmem_blob_array_begin(&w, region, size, p->nkeys) < 0)
		return 0;
	for (i = 0; i < p->nkeys; i++) {
		rdmem_blob_array_get(&f->keys, f->order[p->first + i], &k, &len, &flags);
		rdmem_blob_array_set(&w, i, k, len, flags);
	}
	return rdmem_blob_finish(&w);
}

/* ---- merging ------------------------------------------------------------------ */

/* The first part that failed, or NULL. */
static const struct rdmem_router_part *fan_first_error(const struct rdmem_router_fan *f)
{
	uint32_t i;

	for (i = 0; i < f->nparts; i++)
		if (f->parts[i].status != RDMEM_S_OK)
			return &f->parts[i];
	return NULL;
}

/* A part's failure is the call's; one that could not reach its server
 * passes the server's name on (rdmem_call_name_server). */
static void fan_fail(struct rdmem_router_fan *f, const struct rdmem_router_part *p)
{
	uint32_t len =
	    p->status == RDMEM_S_UNREACHABLE && p->reply_len <= f->space ? p->reply_len : 0;
	struct rdmem_agent_reply rep = { p->status, 0,
					 len,	    (uint32_t)(f->base - f->parent->payload),
					 0,	    { 0, 0, 0 } };

	if (len)
		memcpy(f->base, p->reply, len);
	rdmem_frontdoor_complete(f->r->fd, f->parent, &rep);
	fan_free(f);
}

/* The MGET reply in request order, from the parts' copies. */
static void fan_merge_mget(struct rdmem_router_fan *f)
{
	struct rdmem_blob_array a[RDMEM_ROUTER_MAX_SERVERS];
	struct rdmem_blob_writer w;
	uint64_t data = 0, total;
	uint32_t i, j, len, flags;
	const void *v;

	for (i = 0; i < f->nparts; i++) {
		struct rdmem_router_part *p = &f->parts[i];

		if (rdmem_blob_array_open(p->reply, p->reply_len, &a[i]) < 0 ||
		    a[i].count != p->nkeys) {
			rdmem_warn_limited("router: a server's MGET reply is malformed: refused");
			fan_answer(f, RDMEM_S_IO, 0);
			return;
		}
		for (j = 0; j < p->nkeys; j++) {
			rdmem_blob_array_get(&a[i], j, &v, &len, &flags);
			data += len;
		}
	}
	total = rdmem_blob_array_size(f->keys.count, data);
	if (total > f->space || rdmem_blob_array_begin(&w, f->base, total, f->keys.count) < 0) {
		fan_answer(f, RDMEM_S_TOO_BIG, 0);
		return;
	}
	for (i = 0; i < f->nparts; i++)
		for (j = 0; j < f->parts[i].nkeys; j++) {
			rdmem_blob_array_get(&a[i], j, &v, &len, &flags);
			rdmem_blob_array_set(&w, f->order[f->parts[i].first + j], v, len, flags);
		}
	fan_answer(f, RDMEM_S_OK, rdmem_blob_finish(&w));
}

/* The router's own counts, after the servers' reports. */
static void fan_router_stats(struct rdmem_router_fan *f, struct rdmem_text *o, int json)
{
	const struct rdmem_router_counters *c = &f->r->cnt;
	const char *name[] = { "splits", "parts", "reruns", "busy", "reloads", "reload_failures" };
	const atomic_uint_fast64_t *v[] = { &c->splits, &c->parts,   &c->reruns,
					    &c->busy,	&c->reloads, &c->reload_failures };
	size_t i;

	rdmem_text_add(o, json ? ",\"router\":{" : "\nrouter\n");
	for (i = 0; i < RDMEM_ARRAY_SIZE(name); i++) {
		/* Relaxed: counts; pairs with no store in particular. */
		uint64_t n = atomic_load_explicit(v[i], memory_order_relaxed);

		if (json)
			rdmem_text_add(o, "%s\"%s\":%llu", i ? "," : "", name[i],
				       (unsigned long long)n);
		else
			rdmem_text_add(o, "router.%s %llu\n", name[i], (unsigned long long)n);
	}
	if (json)
		rdmem_text_add(o, "}");
}

/* A word for why a server's report is missing. */
static const char *fan_status_word(uint16_t status)
{
	switch (status) {
	case RDMEM_S_UNREACHABLE:
		return "unreachable";
	case RDMEM_S_TIMEOUT:
		return "timed out";
	case RDMEM_S_TOO_BIG:
		return "too big for its share of the reply";
	case RDMEM_S_SHUTDOWN:
		return "shutting down";
	default:
		return "failed";
	}
}

/* Per-server reports, each headed by its server's name. */
static void fan_merge_stats(struct rdmem_router_fan *f)
{
	int json = !!(f->parent->req.flags & RDMEM_F_JSON);
	struct rdmem_text o = { (char *)f->base, f->space, 0, 0 };
	uint32_t i, len;

	if (json)
		rdmem_text_add(&o, "{\"servers\":{");
	for (i = 0; i < f->nparts; i++) {
		struct rdmem_router_part *p = &f->parts[i];

		/* A server that did not answer still gets its section: stats are
		 * wanted most while one is down. */
		if (p->status != RDMEM_S_OK) {
			if (json)
				rdmem_text_add(&o, "%s\"%s\":{\"error\":\"%s\",\"status\":%u}%s",
					       i ? "," : "", p->name, fan_status_word(p->status),
					       p->status, i + 1 == f->nparts ? "}" : "");
			else
				rdmem_text_add(&o, "%sserver %s\nerror %s (status %u)\n",
					       i ? "\n" : "", p->name, fan_status_word(p->status),
					       p->status);
			continue;
		}
		for (len = p->reply_len; len && (p->reply[len - 1] == '\n' || !p->reply[len - 1]);)
			len--;
		if (!len && json) {
			rdmem_text_add(&o, "%s\"%s\":{}%s", i ? "," : "", p->name,
				       i + 1 == f->nparts ? "}" : "");
			continue;
		}
		if (json)
			rdmem_text_add(&o, "%s\"%s\":%.*s%s", i ? "," : "", p->name, (int)len,
				       (const char *)p->reply, i + 1 == f->nparts ? "}" : "");
		else
			rdmem_text_add(&o, "%sserver %s\n%.*s\n", i ? "\n" : "", p->name, (int)len,
				       (const char *)p->reply);
	}
	if (f->parent->req.op == RDMEM_SHM_OP_AGENT_STATS)
		fan_router_stats(f, &o, json);
	if (json)
		rdmem_text_add(&o, "}\n");
	fan_answer(f, o.overflow ? RDMEM_S_TOO_BIG : RDMEM_S_OK, (uint32_t)o.len);
}

/* Every part answered: the call's answer. */
static void fan_finish(struct rdmem_router_fan *f)
{
	const struct rdmem_router_part *bad = fan_first_error(f);

	if (bad && f->kind != FAN_STATS) {
		fan_fail(f, bad);
		return;
	}
	if (f->kind == FAN_CTL) {
		fan_answer(f, RDMEM_S_OK, 0);
		return;
	}
	if (f->kind == FAN_MGET) {
		fan_merge_mget(f);
		return;
	}
	fan_merge_stats(f);
}

/* ---- running the parts ---------------------------------------------------------- */

/* The index in t of the server with this seed, t->n if it left. */
static uint32_t fan_backend(const struct rdmem_router_table *t, uint64_t seed)
{
	uint32_t b;

	for (b = 0; b < t->n && t->seeds[b] != seed; b++)
		;
	return b;
}

/* Runs the next deferred part alone with the whole area, or finishes.
 * Called with no part out, by whichever thread finished the last one. */
static void fan_next(struct rdmem_router_fan *f)
{
	struct rdmem_router *r = f->r; /* f may be gone once the rerun is sent */
	struct rdmem_router_table *t;
	uint32_t i, b, sub;

	for (i = 0; i < f->nparts; i++) {
		struct rdmem_router_part *p = &f->parts[i];

		if (!p->deferred)
			continue;
		p->deferred = 0;
		p->rerun = 1;
		sub = align64(rdmem_blob_array_size(p->nkeys, p->keybytes));
		if (sub >= f->space) {
			p->status = RDMEM_S_TOO_BIG;
			continue;
		}
		free(p->reply);
		p->reply = NULL;
		fan_part_call(f, p, f->base, fan_mget_sub(f, p, f->base), f->space - sub,
			      RDMEM_OP_KV_MGET);
		t = rdmem_router_enter(r);
		if ((b = fan_backend(t, p->seed)) == t->n) {
			rdmem_router_leave(r);
			p->status = RDMEM_S_UNREACHABLE; /* its server left the list meanwhile */
			continue;
		}
		atomic_store_explicit(&f->pending, 1, memory_order_relaxed);
		rdmem_router_count(&r->cnt.reruns);
		rdmem_router_count(&r->cnt.parts);
		rdmem_agent_session_submit_any(t->b[b]->session, &p->call);
		rdmem_router_leave(r);
		return;
	}
	fan_finish(f);
}

/* Groups the MGET's keys by server; returns the parts made, 0 for a
 * request the servers would refuse, -1 when out of memory. */
static int fan_mget_group(struct rdmem_router_fan *f, struct rdmem_router_table *t)
{
	uint32_t count[RDMEM_ROUTER_MAX_SERVERS] = { 0 }, at[RDMEM_ROUTER_MAX_SERVERS];
	uint32_t *pick, i, b, len, flags, n = 0;
	const void *k;

	/* Both arrays count against the budget too: 8 bytes a key. */
	if (fan_charge(f, 2ull * f->keys.count * sizeof(*pick)) < 0)
		return -1;
	pick = calloc(f->keys.count ? f->keys.count : 1, sizeof(*pick));
	f->order = calloc(f->keys.count ? f->keys.count : 1, sizeof(*f->order));
	if (!pick || !f->order) {
		free(pick);
		return -1;
	}
	for (i = 0; i < f->keys.count; i++) {
		rdmem_blob_array_get(&f->keys, i, &k, &len, &flags);
		count[pick[i] = rdmem_router_pick_key(t, k, len)]++;
	}
	for (b = 0; b < t->n; b++) {
		if (!count[b])
			continue;
		f->parts[n] = (struct rdmem_router_part){ .fan = f, .seed = t->seeds[b] };
		f->parts[n].first = n ? f->parts[n - 1].first + f->parts[n - 1].nkeys : 0;
		f->parts[n].nkeys = count[b];
		at[b] = f->parts[n].first;
		count[b] = n++; /* from here: the part of server b */
	}
	for (i = 0; i < f->keys.count; i++) {
		rdmem_blob_array_get(&f->keys, i, &k, &len, &flags);
		f->order[at[pick[i]]++] = i;
		f->parts[count[pick[i]]].keybytes += len;
	}
	free(pick);
	return (int)n;
}

/* Regions for the parts: sub-requests, then reply shares by key count; a
 * part whose share cannot hold even empty values waits to run alone. */
static void fan_mget_layout(struct rdmem_router_fan *f, uint8_t **region, uint32_t *sub)
{
	uint64_t subs = 0, rest;
	uint32_t i, off = 0;

	for (i = 0; i < f->nparts; i++)
		subs += align64(rdmem_blob_array_size(f->parts[i].nkeys, f->parts[i].keybytes));
	rest = subs < f->space ? f->space - subs : 0;
	for (i = 0; i < f->nparts; i++) {
		struct rdmem_router_part *p = &f->parts[i];
		uint32_t share = (uint32_t)((rest * p->nkeys / f->keys.count) & ~63ull);

		sub[i] = align64(rdmem_blob_array_size(p->nkeys, p->keybytes));
		region[i] = f->base + off;
		p->share = share;
		p->deferred = !rest || share < rdmem_blob_array_size(p->nkeys, 0);
		if (!p->deferred)
			off += sub[i] + share;
	}
}

/* Sends the parts not deferred; the last reply (or this, if none went) runs
 * fan_next(). Front-door thread, inside the table t. */
static void fan_send(struct rdmem_router_fan *f, struct rdmem_router_table *t, uint8_t **region,
		     const uint32_t *sub, uint16_t op)
{
	uint32_t i, b, out = 0;

	for (i = 0; i < f->nparts; i++)
		out += !f->parts[i].deferred;
	/* The extra one keeps a fast part from finishing the fan mid-loop. */
	atomic_store_explicit(&f->pending, out + 1, memory_order_relaxed);
	for (i = 0; i < f->nparts; i++) {
		struct rdmem_router_part *p = &f->parts[i];
		uint32_t len = sub[i];

		if (p->deferred)
			continue;
		if (f->kind == FAN_MGET)
			len = fan_mget_sub(f, p, region[i]);
		fan_part_call(f, p, region[i], len, p->share, op);
		b = fan_backend(t, p->seed); /* in t: the parts were made from it */
		rdmem_router_count(&f->r->cnt.parts);
		rdmem_agent_session_submit(t->b[b]->session, &p->call);
	}
	if (atomic_fetch_sub_explicit(&f->pending, 1, memory_order_acq_rel) == 1)
		fan_next(f);
}

/* MGET: copy the request out of the slot (the client may still write it). */
static int fan_mget_prepare(struct rdmem_router_fan *f, struct rdmem_router_table *t)
{
	const struct rdmem_agent_call *c = f->parent;
	int n;

	if (c->req.key_len)
		return -EINVAL;
	if (fan_charge(f, c->req.val_len) < 0 ||
	    !(f->req = malloc(c->req.val_len ? c->req.val_len : 1)))
		return -EBUSY;
	memcpy(f->req, c->val, c->req.val_len);
	if (rdmem_blob_array_open(f->req, c->req.val_len, &f->keys) < 0)
		return -EINVAL;
	n = fan_mget_group(f, t);
	if (n < 0)
		return -EBUSY;
	f->nparts = (uint32_t)n;
	return 0;
}

/* STATS, CTL: one part per server, equal shares. */
static void fan_each_server(struct rdmem_router_fan *f, struct rdmem_router_table *t,
			    uint8_t **region, uint32_t *sub)
{
	uint32_t i, share = (f->space / t->n) & ~63u;

	f->nparts = t->n;
	for (i = 0; i < t->n; i++) {
		f->parts[i] = (struct rdmem_router_part){ .fan = f, .seed = t->seeds[i] };
		f->parts[i].share = share;
		snprintf(f->parts[i].name, sizeof(f->parts[i].name), "%s", t->b[i]->entry.name);
		region[i] = f->base + (size_t)i * share;
		sub[i] = 0;
	}
	if (f->kind == FAN_CTL) {
		memcpy(f->ctl, f->parent->key, f->parent->req.key_len);
		f->ctl[f->parent->req.key_len] = '\0';
	}
}

void rdmem_router_fan_out(struct rdmem_router *r, struct rdmem_router_table *t,
			  struct rdmem_agent_call *call)
{
	struct rdmem_router_fan *f = calloc(1, sizeof(*f) + t->n * sizeof(f->parts[0]));
	uint8_t *region[RDMEM_ROUTER_MAX_SERVERS];
	uint32_t sub[RDMEM_ROUTER_MAX_SERVERS];
	int ret = 0;

	if (!f) {
		rdmem_frontdoor_complete_status(r->fd, call, RDMEM_S_BUSY);
		return;
	}
	f->r = r;
	f->parent = call;
	f->base = call->payload + rdmem_call_reply_off(call);
	f->space = rdmem_call_reply_cap(call);
	f->kind = call->req.op == RDMEM_OP_KV_MGET	   ? FAN_MGET
		  : call->req.op == RDMEM_SHM_OP_AGENT_CTL ? FAN_CTL
							   : FAN_STATS; /* server's or agent's */
	if (f->kind == FAN_MGET && (ret = fan_mget_prepare(f, t)) == 0 && f->nparts <= 1) {
		/* One server holds every key (none: the empty key's): no split. */
		uint32_t b =
		    f->nparts ? fan_backend(t, f->parts[0].seed) : rdmem_router_pick_key(t, "", 0);

		fan_free(f);
		rdmem_agent_session_submit(t->b[b]->session, call);
		return;
	}
	if (ret < 0) {
		fan_free(f);
		rdmem_frontdoor_complete_status(
		    r->fd, call, ret == -EINVAL ? RDMEM_S_BAD_REQUEST : RDMEM_S_BUSY);
		return;
	}
	rdmem_router_count(&r->cnt.splits);
	if (f->kind == FAN_MGET)
		fan_mget_layout(f, region, sub);
	else
		fan_each_server(f, t, region, sub);
	fan_send(f, t, region, sub,
		 f->kind == FAN_MGET ? RDMEM_OP_KV_MGET : (uint16_t)call->req.op);
}

/* ---- agent-ctl reload ------------------------------------------------------------ */

int rdmem_router_ctl_is_reload(const struct rdmem_agent_call *call)
{
	static const char word[] = "reload";

	return call->req.key_len == sizeof(word) - 1 && !memcmp(call->key, word, sizeof(word) - 1);
}

void rdmem_router_ask_reload(struct rdmem_router *r, struct rdmem_agent_call *call)
{
	struct rdmem_agent_call *none = NULL;

	/* acq_rel: the call's fields are visible to the main thread that
	 * takes it (pairs with the exchange in rdmem_router_answer_reload). */
	if (!atomic_compare_exchange_strong_explicit(&r->reload_call, &none, call,
						     memory_order_acq_rel, memory_order_relaxed)) {
		rdmem_frontdoor_complete_status(r->fd, call, RDMEM_S_BUSY); /* one at a time */
		return;
	}
	/* The main thread waits for it in sigwait() (every thread blocks it). */
	if (kill(getpid(), SIGHUP) < 0)
		rdmem_router_answer_reload(r, RDMEM_S_IO, "reload: cannot signal the main thread");
}

struct rdmem_agent_call *rdmem_router_take_reload(struct rdmem_router *r)
{
	return atomic_exchange_explicit(&r->reload_call, NULL, memory_order_acq_rel);
}

void rdmem_router_answer_reload(struct rdmem_router *r, uint16_t status, const char *msg)
{
	rdmem_router_answer_call(r, rdmem_router_take_reload(r), status, msg);
}

void rdmem_router_answer_call(struct rdmem_router *r, struct rdmem_agent_call *call,
			      uint16_t status, const char *msg)
{
	struct rdmem_agent_reply rep = { status, 0, 0, 0, 0, { 0, 0, 0 } };
	size_t len = strlen(msg);

	if (!call)
		return;
	rep.data_off = rdmem_call_reply_off(call);
	if (len > rdmem_call_reply_cap(call))
		len = rdmem_call_reply_cap(call);
	memcpy(call->payload + rep.data_off, msg, len);
	rep.val_len = (uint32_t)len;
	rdmem_frontdoor_complete(r->fd, call, &rep);
}
