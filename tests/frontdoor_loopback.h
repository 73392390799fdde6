/* frontdoor_loopback.h - a stand-in for the agent's session actor, for front
 * door tests and tools: submit() queues the call, a responder thread answers
 * it from a tiny in-memory service (KV, ECHO, MGET, PROFILE, LARGE_GET, image
 * upload, STATS, AGENT_STATS, AGENT_CTL) and completes it into the slot.
 *
 * Test hooks through ECHO: a value "sleep:<ms>" is answered after ms
 * milliseconds, a value "hold" is never answered (until the responder stops).
 * AGENT_CTL "corrupt-get on|off" flips a byte in every GET reply (to prove
 * that value checks can fail).
 * The path reported is the forced one, or TCP under AUTO.
 */
#ifndef RDMEM_TESTS_FRONTDOOR_LOOPBACK_H
#define RDMEM_TESTS_FRONTDOOR_LOOPBACK_H

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/frontdoor.h"
#include "rdmem/blob.h"
#include "rdmem/content.h"
#include "rdmem/util.h"
#include "shm/segment.h"

#define LB_BUCKETS 1024

struct lb_item {
	struct lb_item *next;
	uint32_t key_len, val_len;
	uint8_t *key, *val;
};

struct lb_upload {
	struct lb_upload *next;
	uint64_t id;
	uint32_t total, done;
	uint8_t *buf;
};

struct lb {
	struct rdmem_frontdoor *fd;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct rdmem_agent_call *queue, *queue_tail; /* submitted, not yet seen */
	struct rdmem_agent_call *delayed;	     /* due at start_ns + delay */
	int stop;
	pthread_t thread;
	struct lb_item *kv[LB_BUCKETS]; /* responder thread only */
	struct lb_upload *uploads;
	_Atomic uint64_t served;
	_Atomic int corrupt_get; /* AGENT_CTL "corrupt-get on": flip a byte of GET replies */
};

static uint32_t lb_hash(const uint8_t *key, uint32_t len)
{
	return (uint32_t)rdmem_hash_update(RDMEM_HASH_INIT, key, len) % LB_BUCKETS;
}

static struct lb_item **lb_find(struct lb *lb, const uint8_t *key, uint32_t len)
{
	struct lb_item **p = &lb->kv[lb_hash(key, len)];

	while (*p && ((*p)->key_len != len || memcmp((*p)->key, key, len)))
		p = &(*p)->next;
	return p;
}

static int lb_put(struct lb *lb, const uint8_t *key, uint32_t klen, const uint8_t *val,
		  uint32_t vlen)
{
	struct lb_item **p = lb_find(lb, key, klen), *it = *p;
	uint8_t *copy = malloc(vlen ? vlen : 1);

	if (!copy)
		return RDMEM_S_NO_SPACE;
	memcpy(copy, val, vlen);
	if (!it) {
		it = calloc(1, sizeof(*it));
		if (!it || !(it->key = malloc(klen ? klen : 1))) {
			free(it);
			free(copy);
			return RDMEM_S_NO_SPACE;
		}
		memcpy(it->key, key, klen);
		it->key_len = klen;
		*p = it;
	}
	free(it->val);
	it->val = copy;
	it->val_len = vlen;
	return RDMEM_S_OK;
}

static void lb_reply(struct lb *lb, struct rdmem_agent_call *call, uint16_t status, uint32_t off,
		     uint32_t len)
{
	struct rdmem_agent_reply rep;

	memset(&rep, 0, sizeof(rep));
	rep.status = status;
	rep.data_off = off;
	rep.val_len = len;
	call->path = call->forced_path ? call->forced_path : RDMEM_PATH_TCP;
	atomic_fetch_add(&lb->served, 1);
	rdmem_frontdoor_complete(lb->fd, call, &rep);
}

static void lb_get(struct lb *lb, struct rdmem_agent_call *call)
{
	struct lb_item *it = *lb_find(lb, call->key, call->req.key_len);

	if (!it)
		return lb_reply(lb, call, RDMEM_S_NOT_FOUND, 0, 0);
	if (it->val_len > call->payload_cap - RDMEM_SHM_VALUE_OFF)
		return lb_reply(lb, call, RDMEM_S_TOO_BIG, 0, 0);
	memcpy(call->val, it->val, it->val_len);
	if (it->val_len && atomic_load(&lb->corrupt_get))
		call->val[it->val_len / 2] ^= 0x20;
	lb_reply(lb, call, RDMEM_S_OK, RDMEM_SHM_VALUE_OFF, it->val_len);
}

static void lb_del(struct lb *lb, struct rdmem_agent_call *call)
{
	struct lb_item **p = lb_find(lb, call->key, call->req.key_len), *it = *p;

	if (!it)
		return lb_reply(lb, call, RDMEM_S_NOT_FOUND, 0, 0);
	*p = it->next;
	free(it->key);
	free(it->val);
	free(it);
	lb_reply(lb, call, RDMEM_S_OK, 0, 0);
}

/* Reads the key array, writes the value array at payload offset 0. */
static void lb_mget(struct lb *lb, struct rdmem_agent_call *call)
{
	struct rdmem_blob_array keys;
	struct rdmem_blob_writer w;
	uint8_t *req = malloc(call->req.val_len ? call->req.val_len : 1);
	uint32_t i;
	int st = RDMEM_S_OK;

	if (!req)
		return lb_reply(lb, call, RDMEM_S_NO_SPACE, 0, 0);
	/* The reply overwrites the request area: work from a copy. */
	memcpy(req, call->val, call->req.val_len);
	if (rdmem_blob_array_open(req, call->req.val_len, &keys) ||
	    rdmem_blob_array_begin(&w, call->payload, call->payload_cap, keys.count)) {
		free(req);
		return lb_reply(lb, call, RDMEM_S_BAD_REQUEST, 0, 0);
	}
	for (i = 0; i < keys.count && st == RDMEM_S_OK; i++) {
		const void *k;
		uint32_t klen, flags;
		struct lb_item *it;

		rdmem_blob_array_get(&keys, i, &k, &klen, &flags);
		it = *lb_find(lb, k, klen);
		if (it && rdmem_blob_array_set(&w, i, it->val, it->val_len, RDMEM_BLOB_PRESENT))
			st = RDMEM_S_TOO_BIG;
	}
	free(req);
	if (st)
		return lb_reply(lb, call, (uint16_t)st, 0, 0);
	lb_reply(lb, call, RDMEM_S_OK, 0, rdmem_blob_finish(&w));
}

static void lb_profile(struct lb *lb, struct rdmem_agent_call *call)
{
	static const char *const tags[] = { "loopback", "test" };
	static const char *const names[] = { "visits", "id" };
	uint64_t values[2] = { 42, call->req.args.raw[0] };
	char name[48];
	struct rdmem_profile_in in = { call->req.args.raw[0], name, tags, 2, names, values, 2 };
	int64_t n;

	snprintf(name, sizeof(name), "profile-%" PRIu64, in.id);
	n = rdmem_blob_profile_encode(&in, call->payload, call->payload_cap);
	if (n < 0)
		return lb_reply(lb, call, RDMEM_S_TOO_BIG, 0, 0);
	lb_reply(lb, call, RDMEM_S_OK, 0, (uint32_t)n);
}

static void lb_large_get(struct lb *lb, struct rdmem_agent_call *call)
{
	uint64_t size;

	if (rdmem_big_parse((const char *)call->key, call->req.key_len, &size))
		return lb_reply(lb, call, RDMEM_S_BAD_REQUEST, 0, 0);
	if (size > call->payload_cap)
		return lb_reply(lb, call, RDMEM_S_TOO_BIG, 0, 0);
	rdmem_big_fill(size, 0, call->payload, size);
	lb_reply(lb, call, RDMEM_S_OK, 0, (uint32_t)size);
}

static struct lb_upload **lb_upload_find(struct lb *lb, uint64_t id)
{
	struct lb_upload **p = &lb->uploads;

	while (*p && (*p)->id != id)
		p = &(*p)->next;
	return p;
}

static void lb_upload_drop(struct lb_upload **p)
{
	struct lb_upload *u = *p;

	*p = u->next;
	free(u->buf);
	free(u);
}

/* In-order chunks; at COMMIT the hash must match, then the image is stored as "image:<key>". */
static void lb_image(struct lb *lb, struct rdmem_agent_call *call)
{
	const struct rdmem_image_args *a = &call->req.args.image;
	struct lb_upload **p = lb_upload_find(lb, a->upload_id), *u = *p;
	char key[RDMEM_MAX_KEY + 8];
	int st;

	if (call->req.flags & RDMEM_F_IMG_INIT) {
		if (u || !(u = calloc(1, sizeof(*u))) || !(u->buf = malloc(a->total + 1u))) {
			free(u);
			return lb_reply(lb, call, RDMEM_S_BAD_REQUEST, 0, 0);
		}
		u->id = a->upload_id;
		u->total = a->total;
		u->next = lb->uploads;
		lb->uploads = u;
		p = &lb->uploads;
	}
	if (!u || a->offset != u->done || call->req.val_len > u->total - u->done) {
		if (u)
			lb_upload_drop(p);
		return lb_reply(lb, call, RDMEM_S_BAD_REQUEST, 0, 0);
	}
	memcpy(u->buf + u->done, call->val, call->req.val_len);
	u->done += call->req.val_len;
	if (!(call->req.flags & RDMEM_F_IMG_COMMIT))
		return lb_reply(lb, call, RDMEM_S_OK, 0, 0);
	st = u->done != u->total || rdmem_hash_update(RDMEM_HASH_INIT, u->buf, u->total) != a->hash
		 ? RDMEM_S_MISMATCH
		 : RDMEM_S_OK;
	if (st == RDMEM_S_OK) {
		int n = snprintf(key, sizeof(key), "image:%.*s", (int)call->req.key_len,
				 (const char *)call->key);
		st = lb_put(lb, (const uint8_t *)key, (uint32_t)n, u->buf, u->total);
	}
	lb_upload_drop(p);
	lb_reply(lb, call, (uint16_t)st, 0, 0);
}

static void lb_text(struct lb *lb, struct rdmem_agent_call *call, const char *text)
{
	size_t n = strlen(text);

	if (n > call->payload_cap)
		return lb_reply(lb, call, RDMEM_S_TOO_BIG, 0, 0);
	memcpy(call->payload, text, n);
	lb_reply(lb, call, RDMEM_S_OK, 0, (uint32_t)n);
}

static void lb_stats(struct lb *lb, struct rdmem_agent_call *call)
{
	char text[128];

	snprintf(text, sizeof(text),
		 call->req.flags & RDMEM_F_JSON ? "{\"served\":%" PRIu64 "}"
						: "loopback.served %" PRIu64 "\n",
		 atomic_load(&lb->served));
	lb_text(lb, call, text);
}

static void lb_agent_stats(struct lb *lb, struct rdmem_agent_call *call)
{
	int n = rdmem_frontdoor_format_stats(lb->fd, call->req.flags & RDMEM_F_JSON,
					     (char *)call->payload, call->payload_cap);

	lb_reply(lb, call, n < 0 ? RDMEM_S_TOO_BIG : RDMEM_S_OK, 0, n < 0 ? 0 : (uint32_t)n);
}

static void lb_agent_ctl(struct lb *lb, struct rdmem_agent_call *call)
{
	char text[RDMEM_MAX_KEY + 16];

	int n = snprintf(text, sizeof(text), "ok %.*s", (int)call->req.key_len,
			 (const char *)call->key);

	if (!strcmp(text, "ok corrupt-get on") || !strcmp(text, "ok corrupt-get off"))
		atomic_store(&lb->corrupt_get, text[n - 1] == 'n');
	lb_text(lb, call, text);
}

/* ECHO answers from payload offset 0, so replies at data_off 0 are exercised too. */
static void lb_echo(struct lb *lb, struct rdmem_agent_call *call)
{
	memmove(call->payload, call->val, call->req.val_len);
	lb_reply(lb, call, RDMEM_S_OK, 0, call->req.val_len);
}

static void lb_serve(struct lb *lb, struct rdmem_agent_call *call)
{
	switch (call->req.op) {
	case RDMEM_OP_PING:
		return lb_reply(lb, call, RDMEM_S_OK, 0, 0);
	case RDMEM_OP_ECHO:
		return lb_echo(lb, call);
	case RDMEM_OP_KV_PUT:
		return lb_reply(lb, call,
				(uint16_t)lb_put(lb, call->key, call->req.key_len, call->val,
						 call->req.val_len),
				0, 0);
	case RDMEM_OP_KV_GET:
		return lb_get(lb, call);
	case RDMEM_OP_KV_DEL:
		return lb_del(lb, call);
	case RDMEM_OP_KV_MGET:
		return lb_mget(lb, call);
	case RDMEM_OP_PROFILE:
		return lb_profile(lb, call);
	case RDMEM_OP_LARGE_GET:
		return lb_large_get(lb, call);
	case RDMEM_OP_IMAGE_CHUNK:
		return lb_image(lb, call);
	case RDMEM_OP_STATS:
		return lb_stats(lb, call);
	case RDMEM_SHM_OP_AGENT_STATS:
		return lb_agent_stats(lb, call);
	case RDMEM_SHM_OP_AGENT_CTL:
		return lb_agent_ctl(lb, call);
	default:
		return lb_reply(lb, call, RDMEM_S_BAD_REQUEST, 0, 0);
	}
}

/* ECHO "sleep:<ms>" -> due time; "hold" -> never (UINT64_MAX); 0: now. */
static uint64_t lb_due(const struct rdmem_agent_call *call)
{
	char buf[24];
	uint32_t n = call->req.val_len;

	if (call->req.op != RDMEM_OP_ECHO || n < 4 || n >= sizeof(buf))
		return 0;
	memcpy(buf, call->val, n);
	buf[n] = '\0';
	if (!strcmp(buf, "hold"))
		return UINT64_MAX;
	if (strncmp(buf, "sleep:", 6))
		return 0;
	return call->start_ns + strtoull(buf + 6, NULL, 10) * 1000000ull;
}

static void lb_submit(void *ctx, struct rdmem_agent_call *call)
{
	struct lb *lb = ctx;

	call->next = NULL;
	pthread_mutex_lock(&lb->mu);
	if (lb->queue_tail)
		lb->queue_tail->next = call;
	else
		lb->queue = call;
	lb->queue_tail = call;
	pthread_cond_signal(&lb->cv);
	pthread_mutex_unlock(&lb->mu);
}

/* Serves the delayed calls that are due; returns the next due time. */
static uint64_t lb_run_delayed(struct lb *lb)
{
	struct rdmem_agent_call **p = &lb->delayed, *c;
	uint64_t now = rdmem_now_ns(), next = UINT64_MAX;

	while ((c = *p)) {
		uint64_t due = lb_due(c);

		if (due <= now) {
			*p = c->next;
			lb_serve(lb, c);
		} else {
			next = RDMEM_MIN(next, due);
			p = &c->next;
		}
	}
	return next;
}

static void *lb_main(void *arg)
{
	struct lb *lb = arg;

	pthread_mutex_lock(&lb->mu);
	while (!lb->stop) {
		struct rdmem_agent_call *call = lb->queue;
		uint64_t next;

		if (call) {
			lb->queue = call->next;
			if (!lb->queue)
				lb->queue_tail = NULL;
			pthread_mutex_unlock(&lb->mu);
			if (lb_due(call)) {
				call->next = lb->delayed;
				lb->delayed = call;
			} else {
				lb_serve(lb, call);
			}
			pthread_mutex_lock(&lb->mu);
			continue;
		}
		pthread_mutex_unlock(&lb->mu);
		next = lb_run_delayed(lb);
		pthread_mutex_lock(&lb->mu);
		if (!lb->queue && !lb->stop) {
			struct timespec ts;
			uint64_t wait = next == UINT64_MAX ? 50000000ull : 1000000ull;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += (long)wait;
			ts.tv_sec += ts.tv_nsec / 1000000000L;
			ts.tv_nsec %= 1000000000L;
			pthread_cond_timedwait(&lb->cv, &lb->mu, &ts);
		}
	}
	pthread_mutex_unlock(&lb->mu);
	return NULL;
}

/* Creates a front door with cfg and starts it with a loopback responder. */
static int lb_start(struct lb **out, const struct rdmem_frontdoor_config *cfg)
{
	struct lb *lb = calloc(1, sizeof(*lb));
	int rc;

	if (!lb)
		return -ENOMEM;
	pthread_mutex_init(&lb->mu, NULL);
	pthread_cond_init(&lb->cv, NULL);
	rc = rdmem_frontdoor_create(cfg, &lb->fd);
	if (rc) {
		free(lb);
		return rc;
	}
	if (pthread_create(&lb->thread, NULL, lb_main, lb)) {
		rdmem_frontdoor_destroy(lb->fd);
		free(lb);
		return -EAGAIN;
	}
	rc = rdmem_frontdoor_start(lb->fd, lb_submit, lb);
	if (rc) {
		pthread_mutex_lock(&lb->mu);
		lb->stop = 1;
		pthread_cond_signal(&lb->cv);
		pthread_mutex_unlock(&lb->mu);
		pthread_join(lb->thread, NULL);
		rdmem_frontdoor_destroy(lb->fd);
		free(lb);
		return rc;
	}
	*out = lb;
	return 0;
}

/* Stops the responder (calls it still holds are never answered), then the front door. */
static void lb_stop(struct lb *lb)
{
	unsigned i;

	pthread_mutex_lock(&lb->mu);
	lb->stop = 1;
	pthread_cond_signal(&lb->cv);
	pthread_mutex_unlock(&lb->mu);
	pthread_join(lb->thread, NULL);
	rdmem_frontdoor_destroy(lb->fd);
	for (i = 0; i < LB_BUCKETS; i++)
		while (lb->kv[i]) {
			struct lb_item *it = lb->kv[i];

			lb->kv[i] = it->next;
			free(it->key);
			free(it->val);
			free(it);
		}
	while (lb->uploads)
		lb_upload_drop(&lb->uploads);
	pthread_mutex_destroy(&lb->mu);
	pthread_cond_destroy(&lb->cv);
	free(lb);
}

#endif
