/* service.c - the one dispatch behind every path: argument checks, the ops,
 * and the counters STATS reports.
 *
 * Reply bytes go through the path's sink exactly once, reserved at their
 * exact length and written in place, so the path decides where they land
 * (reply slot, pool object, TCP send buffer) and no op copies twice. An
 * empty reply reserves nothing. No reply is larger than --max-value: the
 * cap that keeps values whole also bounds every buffer a path provides.
 */
#include "server/service.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <stdio.h>
#include <unistd.h>

#include "rdmem/blob.h"
#include "rdmem/content.h"
#include "rdmem/memlimit.h"
#include "rdmem/util.h"
#include "server/profile.h"
#include "server/service_impl.h"

#define SVC_MGET_MAX_KEYS   4096u	 /* bounds the time an MGET holds shard locks */
#define SVC_MGET_STACK_KEYS 64u		 /* an MGET of up to this many keys allocates nothing */
#define SVC_STATS_CAP	    (256u << 10) /* ~3 KiB, plus a line per RDMA session */
#define SVC_MAX_IMAGE	    (1ull << 30)

/* Timed work started (an upload, a hook, an agent's last connection gone):
 * the tick's caller recomputes its deadline. Rare events, one write each. */
static void svc_wake(struct rdmem_service *svc)
{
	uint64_t one = 1;

	/* EAGAIN: the counter is full, so the caller is awake anyway. */
	if (write(svc->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		rdmem_err_limited("service: waking the timer thread: %s", strerror(errno));
}

struct svc_ctx {
	struct rdmem_service *svc;
	const struct rdmem_call *call;
	const struct rdmem_desc *req;
	struct rdmem_reply_sink *sink;
	struct rdmem_desc *rep;
	struct rdmem_service_peer *peer; /* NULL: the path binds no identity */
};

typedef uint16_t (*svc_op_fn)(struct svc_ctx *x);

/* Asks the path for len reply bytes; the status is the reply's on failure. */
static uint16_t svc_reserve(struct svc_ctx *x, uint32_t len, void **buf)
{
	int st;

	if (len > x->svc->cfg.max_value)
		return RDMEM_S_TOO_BIG;
	st = x->sink->reserve(x->sink, len, buf);
	if (st != RDMEM_S_OK)
		return (uint16_t)st;
	x->rep->val_len = len;
	return RDMEM_S_OK;
}

static uint16_t svc_reply_bytes(struct svc_ctx *x, const void *data, uint32_t len)
{
	void *buf;
	uint16_t st;

	if (!len)
		return RDMEM_S_OK;
	st = svc_reserve(x, len, &buf);
	if (st == RDMEM_S_OK)
		memcpy(buf, data, len);
	return st;
}

static uint16_t op_ping(struct svc_ctx *x)
{
	return x->req->key_len || x->req->val_len ? RDMEM_S_BAD_REQUEST : RDMEM_S_OK;
}

static uint16_t op_echo(struct svc_ctx *x)
{
	if (x->req->key_len)
		return RDMEM_S_BAD_REQUEST;
	return svc_reply_bytes(x, x->call->val, x->req->val_len);
}

static uint16_t op_put(struct svc_ctx *x)
{
	int ret =
	    rdmem_kv_put(x->svc->kv, x->call->key, x->req->key_len, x->call->val, x->req->val_len);

	return ret == -ENOMEM ? RDMEM_S_NO_SPACE : rdmem_errno_status(ret);
}

static uint16_t op_del(struct svc_ctx *x)
{
	if (x->req->val_len)
		return RDMEM_S_BAD_REQUEST;
	return rdmem_errno_status(rdmem_kv_del(x->svc->kv, x->call->key, x->req->key_len));
}

/* Runs under the shard lock: the value is copied straight into the sink. */
static int get_copy(void *ctx, const struct rdmem_kv_ref *refs, uint32_t n)
{
	struct svc_ctx *x = ctx;

	(void)n;
	if (!refs[0].val)
		return RDMEM_S_NOT_FOUND;
	return svc_reply_bytes(x, refs[0].val, refs[0].len);
}

static uint16_t op_get(struct svc_ctx *x)
{
	struct rdmem_kv_key key = { x->call->key, x->req->key_len };
	struct rdmem_kv_ref ref;
	int ret;

	if (x->req->val_len || !key.len)
		return RDMEM_S_BAD_REQUEST;
	ret = rdmem_kv_read(x->svc->kv, &key, 1, &ref, get_copy, x);
	return ret < 0 ? rdmem_errno_status(ret) : (uint16_t)ret;
}

/* Sizes the whole reply first: it is refused whole or sent whole. */
static int mget_build(void *ctx, const struct rdmem_kv_ref *refs, uint32_t n)
{
	struct svc_ctx *x = ctx;
	struct rdmem_blob_writer w;
	uint64_t data = 0, total;
	uint32_t i;
	void *buf;
	uint16_t st;

	for (i = 0; i < n; i++)
		data += refs[i].len;
	total = rdmem_blob_array_size(n, data);
	if (total > x->svc->cfg.max_value)
		return RDMEM_S_TOO_BIG;
	st = svc_reserve(x, (uint32_t)total, &buf);
	if (st != RDMEM_S_OK)
		return st;
	if (rdmem_blob_array_begin(&w, buf, total, n) < 0)
		return RDMEM_S_IO;
	for (i = 0; i < n; i++)
		if (refs[i].val &&
		    rdmem_blob_array_set(&w, i, refs[i].val, refs[i].len, RDMEM_BLOB_PRESENT) < 0)
			return RDMEM_S_IO;
	return rdmem_blob_finish(&w) == total ? RDMEM_S_OK : RDMEM_S_IO;
}

static uint16_t op_mget(struct svc_ctx *x)
{
	struct rdmem_kv_key kbuf[SVC_MGET_STACK_KEYS], *keys = kbuf;
	struct rdmem_kv_ref rbuf[SVC_MGET_STACK_KEYS], *refs = rbuf;
	struct rdmem_blob_array a;
	uint32_t i, flags;
	int ret = 0;

	if (x->req->key_len || rdmem_blob_array_open(x->call->val, x->req->val_len, &a) < 0)
		return RDMEM_S_BAD_REQUEST;
	if (a.count > SVC_MGET_MAX_KEYS)
		return RDMEM_S_TOO_BIG;
	if (a.count > SVC_MGET_STACK_KEYS) {
		keys = malloc((size_t)a.count * (sizeof(*keys) + sizeof(*refs)));
		if (!keys)
			return RDMEM_S_BUSY;
		refs = (struct rdmem_kv_ref *)(keys + a.count);
	}
	for (i = 0; i < a.count && !ret; i++) {
		const void *k;

		rdmem_blob_array_get(&a, i, &k, &keys[i].len, &flags);
		keys[i].key = k;
		/* A key entry may carry PRESENT (rdmem_blob_array_open allows no other flag). */
		(void)flags;
		if (!keys[i].len || keys[i].len > RDMEM_MAX_KEY)
			ret = -EINVAL;
	}
	if (!ret) /* no key, no lookup: the empty array */
		ret = a.count ? rdmem_kv_read(x->svc->kv, keys, a.count, refs, mget_build, x)
			      : mget_build(x, NULL, 0);
	if (keys != kbuf)
		free(keys);
	return ret < 0 ? rdmem_errno_status(ret) : (uint16_t)ret;
}

static uint16_t op_profile(struct svc_ctx *x)
{
	struct rdmem_profile_buf pbuf;
	struct rdmem_profile_in p;
	uint64_t id, size;
	void *buf;
	uint16_t st;

	if (x->req->val_len || rdmem_profile_parse_id(x->call->key, x->req->key_len, &id) < 0)
		return RDMEM_S_BAD_REQUEST;
	if (rdmem_profile_lookup(id, &pbuf, &p) < 0)
		return RDMEM_S_NOT_FOUND;
	size = rdmem_blob_profile_size(&p);
	if (size > x->svc->cfg.max_value)
		return RDMEM_S_TOO_BIG;
	st = svc_reserve(x, (uint32_t)size, &buf);
	if (st != RDMEM_S_OK)
		return st;
	return rdmem_blob_profile_encode(&p, buf, size) == (int64_t)size ? RDMEM_S_OK : RDMEM_S_IO;
}

/*
 * The object of that size, generated once: copying it (~40-60 us a MiB here)
 * costs less than generating it again (~95 us), and a large-object service
 * keeps its objects in memory anyway. The first sizes asked for are kept;
 * further sizes (NULL) are generated straight into the reply.
 */
static const uint8_t *svc_big_object(struct rdmem_service *svc, uint64_t size)
{
	const uint8_t *obj = NULL;
	size_t i;

	pthread_mutex_lock(&svc->big_lock);
	for (i = 0; i < RDMEM_ARRAY_SIZE(svc->big) && svc->big[i].size; i++)
		if (svc->big[i].size == size)
			obj = svc->big[i].bytes;
	if (!obj && i < RDMEM_ARRAY_SIZE(svc->big) && (svc->big[i].bytes = malloc(size))) {
		rdmem_big_fill(size, 0, svc->big[i].bytes, size);
		svc->big[i].size = size;
		obj = svc->big[i].bytes;
	}
	pthread_mutex_unlock(&svc->big_lock);
	return obj;
}

/* "big:<n>[k|m]" is generated; any other key is a stored value, as GET. */
static uint16_t op_large_get(struct svc_ctx *x)
{
	uint64_t size;
	void *buf;
	uint16_t st;

	if (x->req->val_len)
		return RDMEM_S_BAD_REQUEST;
	if (rdmem_big_parse((const char *)x->call->key, x->req->key_len, &size) < 0)
		return op_get(x);
	if (size > x->svc->cfg.max_value)
		return RDMEM_S_TOO_BIG;
	if (!size)
		return RDMEM_S_OK;
	st = svc_reserve(x, (uint32_t)size, &buf);
	if (st == RDMEM_S_OK) {
		const uint8_t *obj = svc_big_object(x->svc, size);

		if (obj)
			memcpy(buf, obj, size);
		else
			rdmem_big_fill(size, 0, buf, size);
	}
	return st;
}

static uint16_t op_image_chunk(struct svc_ctx *x)
{
	const struct rdmem_image_args *ia = &x->req->args.image;
	struct rdmem_image_chunk c = {
		.upload_id = ia->upload_id,
		.name = x->call->key,
		.name_len = x->req->key_len,
		.flags = x->req->flags & (RDMEM_F_IMG_INIT | RDMEM_F_IMG_COMMIT), /* not CALL_ID */
		.offset = ia->offset,
		.total = ia->total,
		.hash = ia->hash,
		.data = x->call->val,
		.len = x->req->val_len,
	};
	struct rdmem_image_ack ack;
	int ret;

	if (!x->svc->images) {
		/* Counted in ops.image_chunk.errors; the client's message names the flag. */
		rdmem_debug("image upload refused: the server runs without --image-dir");
		return RDMEM_S_UNSUPPORTED;
	}
	ret = rdmem_image_chunk(x->svc->images, &c, &ack);
	x->rep->aux = ack.received;
	x->rep->args.image.upload_id = ia->upload_id;
	x->rep->args.image.offset = ack.received;
	if (ret == 0 && ack.committed && x->svc->hook)
		rdmem_hook_run(x->svc->hook, ack.path); /* failures are counted there */
	/* A new upload (INIT) or a hook has a time to be looked at again; a
	 * refused INIT made nothing, and costs no wake-up. */
	if (ret == 0 && (c.flags & RDMEM_F_IMG_INIT || (ack.committed && x->svc->hook)))
		svc_wake(x->svc);
	return ret == -ENOMEM ? RDMEM_S_NO_SPACE : rdmem_errno_status(ret);
}

/* Without a reclaim callback (TCP) every reference is refused and counted. */
static uint16_t op_reclaim(struct svc_ctx *x)
{
	const uint32_t ent = sizeof(struct rdmem_objref);
	uint32_t i, n = x->req->val_len / ent, freed = 0, refused = 0;

	if (x->req->key_len || x->req->val_len % ent)
		return RDMEM_S_BAD_REQUEST;
	for (i = 0; i < n; i++) {
		struct rdmem_objref ref;

		memcpy(&ref, x->call->val + (size_t)i * ent, ent); /* payload is unaligned */
		rdmem_objref_le(&ref);
		if (x->call->reclaim && x->call->reclaim(x->call->reclaim_ctx, &ref) == RDMEM_S_OK)
			freed++;
		else
			refused++;
	}
	atomic_fetch_add_explicit(&x->svc->reclaim_freed, freed, memory_order_relaxed);
	atomic_fetch_add_explicit(&x->svc->reclaim_refused, refused, memory_order_relaxed);
	x->rep->aux = freed;
	x->rep->args.raw[0] = refused;
	return RDMEM_S_OK;
}

static uint16_t op_stats(struct svc_ctx *x)
{
	char *text;
	size_t len;
	uint16_t st;

	if (x->req->key_len || x->req->val_len)
		return RDMEM_S_BAD_REQUEST;
	text = malloc(SVC_STATS_CAP);
	if (!text)
		return RDMEM_S_BUSY;
	/* A reply is at most --max-value bytes: the report fits that or says
	 * what it left out. */
	len = rdmem_stats_format(x->svc, x->req->flags & RDMEM_F_JSON, text,
				 RDMEM_MIN(SVC_STATS_CAP, x->svc->cfg.max_value));
	st = len ? svc_reply_bytes(x, text, (uint32_t)len) : RDMEM_S_IO;
	free(text);
	return st;
}

/* AUTH belongs to session setup; reaching the dispatch means a confused peer. */
static uint16_t op_auth(struct svc_ctx *x)
{
	(void)x;
	return RDMEM_S_BAD_REQUEST;
}

/* Binds the calling connection to its agent's dedup window (wire.h, RDMEM_OP_BIND). */
static uint16_t op_bind(struct svc_ctx *x)
{
	struct rdmem_service_peer *peer = x->peer;
	uint64_t id = x->req->args.raw[0];
	int ret;

	if (x->req->key_len || x->req->val_len || !id || !peer)
		return RDMEM_S_BAD_REQUEST;
	x->rep->args.raw[0] = id;
	if (!x->svc->dedup)
		return RDMEM_S_OK; /* aux 0: this server keeps no window */
	if (peer->agent_id)	   /* bound already: the same agent again is harmless */
		return peer->agent_id == id ? RDMEM_S_OK : RDMEM_S_BAD_REQUEST;
	ret = rdmem_dedup_bind(x->svc->dedup, id, x->req->aux, peer->addr, &peer->agent);
	if (ret == -ENOSPC) {
		rdmem_warn_limited(
		    "dedup: agent %016llx (%s) not tracked: --dedup-agents %u agents with live "
		    "connections are tracked already; its retries may run twice",
		    (unsigned long long)id, peer->addr,
		    rdmem_dedup_get_config(x->svc->dedup)->max_agents);
		return RDMEM_S_NO_SPACE;
	}
	if (ret < 0)
		return RDMEM_S_BUSY;
	peer->agent_id = id;
	x->rep->aux = rdmem_dedup_get_config(x->svc->dedup)->window;
	x->rep->args.raw[1] = rdmem_dedup_instance(x->svc->dedup);
	return RDMEM_S_OK;
}

static const struct {
	svc_op_fn fn;
	uint16_t flags; /* request flags the op accepts */
} svc_ops[RDMEM_OP__COUNT] = {
	[RDMEM_OP_PING] = { op_ping, 0 },
	[RDMEM_OP_ECHO] = { op_echo, 0 },
	[RDMEM_OP_KV_PUT] = { op_put, RDMEM_F_CALL_ID },
	[RDMEM_OP_KV_GET] = { op_get, 0 },
	[RDMEM_OP_KV_DEL] = { op_del, RDMEM_F_CALL_ID },
	[RDMEM_OP_KV_MGET] = { op_mget, 0 },
	[RDMEM_OP_PROFILE] = { op_profile, 0 },
	[RDMEM_OP_LARGE_GET] = { op_large_get, 0 },
	[RDMEM_OP_IMAGE_CHUNK] = { op_image_chunk,
				   RDMEM_F_IMG_INIT | RDMEM_F_IMG_COMMIT | RDMEM_F_CALL_ID },
	[RDMEM_OP_RECLAIM] = { op_reclaim, RDMEM_F_CALL_ID },
	[RDMEM_OP_STATS] = { op_stats, RDMEM_F_JSON },
	[RDMEM_OP_AUTH] = { op_auth, 0 },
	[RDMEM_OP_BIND] = { op_bind, 0 },
};

static uint16_t svc_run(struct svc_ctx *x)
{
	const struct rdmem_desc *req = x->req;
	uint16_t st = rdmem_desc_check(req, x->svc->cfg.max_value);

	/* Paths check before calling; checking again keeps a path's bug from becoming ours. */
	if (st != RDMEM_S_OK)
		return st;
	if (req->flags & ~svc_ops[req->op].flags)
		return RDMEM_S_BAD_REQUEST;
	if ((req->key_len && !x->call->key) || (req->val_len && !x->call->val))
		return RDMEM_S_BAD_REQUEST;
	return svc_ops[req->op].fn(x);
}

/* A call the agent tagged for exactly-once, on a connection bound to it. */
struct svc_ticket {
	struct rdmem_dedup_agent *agent; /* NULL: not tracked */
	uint64_t ext;
};

/*
 * Looks a tagged call up in its agent's window. Returns 1 when rep is the
 * answer already (a replay, or a retry the window cannot vouch for), 0 when
 * the call is to run (tracked when t->agent is set).
 */
static int svc_dedup_begin(struct rdmem_service *svc, const struct rdmem_call *call,
			   struct rdmem_service_peer *peer, struct rdmem_desc *rep,
			   struct svc_ticket *t)
{
	const struct rdmem_desc *req = call->req;
	struct rdmem_dedup_result rec;

	if (!(req->flags & RDMEM_F_CALL_ID) || req->op >= RDMEM_OP__COUNT ||
	    !(svc_ops[req->op].flags & RDMEM_F_CALL_ID) || !svc->dedup)
		return 0;
	if (!peer || !peer->agent) {
		atomic_fetch_add_explicit(&svc->untracked, 1, memory_order_relaxed);
		return 0;
	}
	switch (rdmem_dedup_begin(svc->dedup, peer->agent, req->aux, &t->ext, &rec)) {
	case RDMEM_DEDUP_RUN:
		t->agent = peer->agent;
		return 0;
	case RDMEM_DEDUP_REPLAY:
		rep->status = rec.status;
		rep->aux = rec.aux;
		memcpy(rep->args.raw, rec.args, sizeof(rec.args));
		return 1;
	case RDMEM_DEDUP_STALE:
		rdmem_debug("%s call %u of agent %016llx: older than the dedup window (or than a "
			    "lost one: forgotten, or a restart), not run",
			    rdmem_op_name(req->op), req->aux, (unsigned long long)peer->agent_id);
		rep->status = RDMEM_S_STALE;
		return 1;
	default:
		rep->status = RDMEM_S_BUSY;
		return 1;
	}
}

static void svc_dedup_end(struct rdmem_service *svc, const struct svc_ticket *t,
			  const struct rdmem_desc *rep)
{
	struct rdmem_dedup_result res = { rep->status, rep->aux, { 0, 0, 0 } };

	if (!t->agent)
		return;
	memcpy(res.args, rep->args.raw, sizeof(res.args));
	rdmem_dedup_end(svc->dedup, t->agent, t->ext, &res);
}

/* Answered from the dedup window: op counters count runs, so only the path counts it. */
static void svc_count(struct rdmem_service *svc, const struct rdmem_desc *req,
		      const struct rdmem_desc *rep, uint64_t ns, int answered)
{
	unsigned op = req->op < RDMEM_OP__COUNT ? req->op : 0;
	uint16_t st = rep->status;
	struct rdmem_tally *t = rdmem_tally_mine(&svc->tally);
	int shared = !t;

	if (shared)
		t = &svc->tally.shared;
	if (req->path < RDMEM_PATH__COUNT) {
		rdmem_tally_add(&t->op_path[op][req->path], 1, shared);
		if (shared)
			rdmem_hist_add_shared(&t->lat[req->path], ns);
		else
			rdmem_hist_add_single(&t->lat[req->path], ns);
	}
	rdmem_tally_add(&t->bytes_in, rdmem_desc_payload_len(req), shared);
	if (answered)
		return;
	rdmem_tally_add(&t->ops[op].calls, 1, shared);
	rdmem_tally_add(&t->bytes_out, rep->val_len, shared);
	if (st != RDMEM_S_OK)
		rdmem_tally_add(&t->ops[op].errors, 1, shared);
	if (st == RDMEM_S_BAD_REQUEST) {
		rdmem_tally_add(&t->bad_request, 1, shared);
		rdmem_debug("%s request %" PRIu64 " refused: bad request (key %u B, value %u B, "
			    "flags 0x%x)",
			    rdmem_op_name(req->op), req->req_id, req->key_len, req->val_len,
			    req->flags);
	}
}

void rdmem_service_dispatch(struct rdmem_service *svc, const struct rdmem_call *call,
			    struct rdmem_reply_sink *sink, struct rdmem_desc *rep)
{
	rdmem_service_dispatch_peer(svc, call, NULL, sink, rep, rdmem_now_ns());
}

uint64_t rdmem_service_dispatch_peer(struct rdmem_service *svc, const struct rdmem_call *call,
				     struct rdmem_service_peer *peer, struct rdmem_reply_sink *sink,
				     struct rdmem_desc *rep, uint64_t t0)
{
	const struct rdmem_desc *req = call->req;
	struct svc_ctx x = { svc, call, req, sink, rep, peer };
	struct svc_ticket t = { NULL, 0 };
	uint64_t t1;
	int answered;

	rep->status = RDMEM_S_OK;
	rep->flags = 0;
	rep->val_len = 0;
	rep->aux = 0;
	memset(&rep->args, 0, sizeof(rep->args));
	answered = svc_dedup_begin(svc, call, peer, rep, &t);
	if (!answered) {
		uint16_t st = svc_run(&x);

		if (st != RDMEM_S_OK)
			rep->val_len =
			    0; /* reserved bytes, if any, are not part of a failed reply */
		rep->status = st;
		svc_dedup_end(svc, &t, rep);
	}
	t1 = rdmem_now_ns();
	svc_count(svc, req, rep, t1 - t0, answered);
	return t1;
}

void rdmem_service_peer_release(struct rdmem_service *svc, struct rdmem_service_peer *peer)
{
	if (svc->dedup && peer->agent) {
		rdmem_dedup_unbind(svc->dedup, peer->agent);
		svc_wake(svc); /* its window may now expire */
	}
	peer->agent = NULL;
	peer->agent_id = 0;
}

uint64_t rdmem_service_tick(struct rdmem_service *svc)
{
	uint64_t next = UINT64_MAX, t;

	/* Each deadline read once into t (RDMEM_MIN evaluates twice). */
	if (svc->images) {
		rdmem_image_expire(svc->images, rdmem_now_ns());
		next = rdmem_image_next_expiry(svc->images);
	}
	/* A hook's end shows as its pipe's EOF only if it left no children
	 * holding it: reaped by polling, but only while one runs. */
	if (svc->hook && rdmem_hook_reap(svc->hook)) {
		t = rdmem_now_ns() + RDMEM_SERVICE_HOOK_POLL_NS;
		next = RDMEM_MIN(next, t);
	}
	if (svc->dedup) {
		rdmem_dedup_expire(svc->dedup, rdmem_now_ns());
		t = rdmem_dedup_next_expiry(svc->dedup);
		next = RDMEM_MIN(next, t);
	}
	return next;
}

int rdmem_service_wake_fd(const struct rdmem_service *svc)
{
	return svc->wake_fd;
}

void rdmem_service_set_stats_hook(struct rdmem_service *svc,
				  int (*fn)(void *ctx, int json, char *buf, size_t cap), void *ctx)
{
	/* Servers already run (TCP STATS may be inside the old hook): under the lock. */
	pthread_mutex_lock(&svc->stats_lock);
	svc->stats_hook = fn;
	svc->stats_ctx = ctx;
	pthread_mutex_unlock(&svc->stats_lock);
}

void rdmem_service_count_auth_failure(struct rdmem_service *svc)
{
	atomic_fetch_add_explicit(&svc->auth_failures, 1, memory_order_relaxed);
}

void rdmem_service_count_mac_failure(struct rdmem_service *svc)
{
	atomic_fetch_add_explicit(&svc->mac_failures, 1, memory_order_relaxed);
}

void rdmem_service_count_net(struct rdmem_service *svc, enum rdmem_net_ctr what)
{
	atomic_fetch_add_explicit(&svc->net[what], 1, memory_order_relaxed);
}

void rdmem_service_set_tcp_held(struct rdmem_service *svc, uint64_t out_bytes, uint64_t in_bytes)
{
	/* relaxed: gauges for STATS, nothing is published through them */
	atomic_store_explicit(&svc->tcp_out_held, out_bytes, memory_order_relaxed);
	atomic_store_explicit(&svc->tcp_in_held, in_bytes, memory_order_relaxed);
}

void rdmem_service_count_bad_input(struct rdmem_service *svc)
{
	atomic_fetch_add_explicit(&svc->bad_input, 1, memory_order_relaxed);
}

void rdmem_service_session_delta(struct rdmem_service *svc, int delta,
				 const struct rdmem_rdma_usage *u)
{
	atomic_fetch_add_explicit(&svc->sessions, delta, memory_order_relaxed);
	atomic_fetch_add_explicit(&svc->rdma.qps, delta * u->qps, memory_order_relaxed);
	atomic_fetch_add_explicit(&svc->rdma.cqs, delta * u->cqs, memory_order_relaxed);
	atomic_fetch_add_explicit(&svc->rdma.mrs, delta * u->mrs, memory_order_relaxed);
	atomic_fetch_add_explicit(&svc->rdma.registered_bytes, delta * u->registered_bytes,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&svc->rdma.recv_wqes, delta * u->recv_wqes, memory_order_relaxed);
}

void rdmem_service_pool_delta(struct rdmem_service *svc, int64_t used, int64_t bytes, int64_t live)
{
	atomic_fetch_add_explicit(&svc->pool_used, used, memory_order_relaxed);
	atomic_fetch_add_explicit(&svc->pool_bytes, bytes, memory_order_relaxed);
	atomic_fetch_add_explicit(&svc->pool_live, live, memory_order_relaxed);
}

static int svc_config_ok(const struct rdmem_service_config *cfg)
{
	if (cfg->max_value == 0 || cfg->max_value > RDMEM_MAX_VALUE_LIMIT)
		return 0;
	if (cfg->kv_shards & (cfg->kv_shards - 1))
		return 0;
	if (cfg->image_hook && !cfg->image_dir)
		return 0;
	return cfg->max_image <= SVC_MAX_IMAGE;
}

int rdmem_service_set_dedup(struct rdmem_service *svc, const struct rdmem_dedup_config *cfg)
{
	struct rdmem_dedup *d = NULL;
	int ret = cfg ? rdmem_dedup_create(cfg, &d) : 0;

	if (ret)
		return ret;
	rdmem_dedup_destroy(svc->dedup);
	svc->dedup = d;
	return 0;
}

int rdmem_service_create(const struct rdmem_service_config *cfg, struct rdmem_service **out)
{
	struct rdmem_service *svc;
	int ret;

	if (!svc_config_ok(cfg))
		return -EINVAL;
	svc = calloc(1, sizeof(*svc));
	if (!svc)
		return -ENOMEM;
	svc->cfg = *cfg;
	svc->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (svc->wake_fd < 0) {
		ret = -errno;
		rdmem_err("service: eventfd: %s", strerror(errno));
		free(svc);
		return ret;
	}
	pthread_mutex_init(&svc->big_lock, NULL);
	rdmem_tallies_init(&svc->tally);
	if (!svc->cfg.max_image)
		svc->cfg.max_image = 64u << 20;
	svc->start_ns = rdmem_now_ns();
	pthread_mutex_init(&svc->stats_lock, NULL);
	/* The store's default limit: half of the memory this process may use.
	 * Without one, a peer PUTting distinct keys grew the server until the
	 * kernel's OOM killer ended it, and every tenant lost every key. */
	if (!svc->cfg.kv_max_bytes) {
		const char *whose;

		svc->cfg.kv_max_bytes = rdmem_mem_limit(&whose) / 2;
		rdmem_info("kv: at most %llu MiB of keys and values, half of %s (--kv-max-bytes)",
			   (unsigned long long)(svc->cfg.kv_max_bytes >> 20), whose);
	}
	ret = rdmem_kv_create(cfg->kv_shards, cfg->max_value, svc->cfg.kv_max_bytes, &svc->kv);
	if (!ret && cfg->image_dir)
		ret = rdmem_image_create(cfg->image_dir, svc->cfg.max_image, cfg->upload_timeout_ms,
					 &svc->images);
	if (!ret && cfg->image_hook)
		ret = rdmem_hook_create(cfg->image_hook,
					cfg->hook_timeout_ms ? cfg->hook_timeout_ms
							     : RDMEM_HOOK_DEFAULT_TIMEOUT,
					&svc->hook);
	if (!ret)
		ret = rdmem_dedup_create(&(struct rdmem_dedup_config)RDMEM_DEDUP_DEFAULTS,
					 &svc->dedup);
	if (ret) {
		rdmem_service_destroy(svc);
		return ret;
	}
	/* The config's strings belong to the caller; only the stores kept copies. */
	svc->cfg.image_dir = NULL;
	svc->cfg.image_hook = NULL;
	*out = svc;
	return 0;
}

void rdmem_service_destroy(struct rdmem_service *svc)
{
	if (!svc)
		return;
	rdmem_image_destroy(svc->images);
	rdmem_hook_destroy(svc->hook);
	rdmem_dedup_destroy(svc->dedup);
	rdmem_kv_destroy(svc->kv);
	for (size_t i = 0; i < RDMEM_ARRAY_SIZE(svc->big); i++)
		free(svc->big[i].bytes);
	pthread_mutex_destroy(&svc->big_lock);
	pthread_mutex_destroy(&svc->stats_lock);
	rdmem_tallies_destroy(&svc->tally);
	close(svc->wake_fd);
	free(svc);
}
