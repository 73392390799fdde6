/* rdmem_fast.h - the call's fast path, inline (rdmem.h includes it for C):
 * claim a slot, write the request, publish it, poll the slot word, copy the
 * reply out. What can sleep is librdmem's (rdmem__*_slow). The API names are
 * macros onto these; librdmem exports them out of line: `(rdmem_submit)(h, c)`.
 */
#ifndef RDMEM_FAST_H
#define RDMEM_FAST_H

#include <stdatomic.h>
/* What the header-only library included (with fcntl, sched, time, unistd via shm/). */
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "rdmem/idle.h"
#include "shm/segment.h"

/* The fast path's view of one attachment. ABI: inline code built against an
 * older header reads these fields, so they never move. */
struct rdmem_att {
	_Atomic uint32_t refs; /* the handle's own, plus one per call in flight */
	_Atomic int stale;     /* the agent went away: no new calls here */
	void *base;
	struct rdmem_shm_header *hdr;
	struct rdmem_shm_geom geom;
	struct rdmem_ring ring;
	uint32_t client;
	int single_cpu;	       /* we may run on one CPU only: spinning cannot help */
	_Atomic uint64_t busy; /* bit s: slot s is used by a call of this process */
};

static inline struct rdmem_shm_slot *rdmem__slot(struct rdmem_att *a, uint32_t s)
{
	return rdmem_shm_slot_at(a->base, &a->geom, a->client, s);
}

static inline void rdmem__att_put(struct rdmem_att *a)
{
	/* acq_rel: the last owner sees every other owner's use before unmapping. */
	if (atomic_fetch_sub_explicit(&a->refs, 1, memory_order_acq_rel) == 1)
		rdmem__att_unmap(a);
}

/* Tries once to take a slot that is unused here and FREE in the segment. */
static inline int rdmem__slot_try(struct rdmem_att *a, uint32_t *out)
{
	uint64_t all = a->geom.slots == 64 ? ~0ull : (1ull << a->geom.slots) - 1;
	uint64_t skip = 0, busy = atomic_load_explicit(&a->busy, memory_order_relaxed);

	while (~(busy | skip) & all) {
		uint32_t s = (uint32_t)__builtin_ctzll(~(busy | skip) & all);
		uint64_t bit = 1ull << s;

		/* Acquire: pairs with the release in rdmem__slot_release() by the
		 * thread that used the slot before us. */
		if (!atomic_compare_exchange_weak_explicit(
			&a->busy, &busy, busy | bit, memory_order_acquire, memory_order_relaxed))
			continue;
		/* Acquire: pairs with the agent's release store of FREE after an
		 * abandoned call, so its last payload access is behind us. */
		if (atomic_load_explicit(&rdmem__slot(a, s)->state, memory_order_acquire) ==
		    RDMEM_SLOT_FREE) {
			*out = s;
			return 0;
		}
		/* Abandoned and still held by the agent: leave it. */
		atomic_fetch_and_explicit(&a->busy, ~bit, memory_order_relaxed);
		skip |= bit;
		busy = atomic_load_explicit(&a->busy, memory_order_relaxed);
	}
	return -EBUSY;
}

static inline void rdmem__slot_release(struct rdmem_att *a, uint32_t s)
{
	/* Release: our use of the slot precedes the next thread's acquire CAS. */
	atomic_fetch_and_explicit(&a->busy, ~(1ull << s), memory_order_release);
}

static inline void rdmem__rpc_end(rdmem_t *h, struct rdmem_rpc *c, int rc)
{
	c->rc = rc;
	c->p_.state = RDMEM__DONE;
	if (rc == -ETIMEDOUT && c->status != RDMEM_S_TIMEOUT)
		rdmem__count(h, RDMEM__N_TIMEOUT);
	else if (rc == -ESHUTDOWN)
		rdmem__count(h, RDMEM__N_SHUTDOWN);
	if (c->p_.att) {
		rdmem__att_put(c->p_.att);
		c->p_.att = NULL;
	}
}

/* Writes the request into slot s; state turns SUBMITTED last. */
static inline void rdmem__write_request(struct rdmem_rpc *c, struct rdmem_att *a, uint32_t s)
{
	struct rdmem_shm_slot *slot = rdmem__slot(a, s);
	uint8_t *payload = rdmem_shm_payload(slot);
	struct rdmem_desc d;

	c->p_.seq = slot->seq + 1;
	slot->seq = c->p_.seq;
	slot->deadline_ns = c->p_.deadline_ns;
	slot->path = c->path;
	if (c->key_len)
		memcpy(payload, c->key, c->key_len);
	if (c->val_len)
		memcpy(payload + RDMEM_SHM_VALUE_OFF, c->val, c->val_len);
	memset(&d, 0, sizeof(d));
	d.seq = c->p_.seq;
	d.op = c->op;
	d.flags = c->flags;
	d.path = c->path;
	d.key_len = (uint16_t)c->key_len;
	d.val_len = c->val_len;
	d.aux = c->aux;
	d.req_id = c->p_.req_id;
	memcpy(d.args.raw, c->args, sizeof(d.args.raw));
	memcpy(&slot->req, &d, sizeof(d));
	/* Release: the request above is visible to the agent that sees SUBMITTED
	 * (its acquire load in the front door's take). */
	atomic_store_explicit(&slot->state, RDMEM_SLOT_SUBMITTED, memory_order_release);
}

/* rdmem__submit_begin() took the attachment and checked the request. */
static inline int rdmem__submit(rdmem_t *h, struct rdmem_rpc *c)
{
	int rc = rdmem__submit_begin(h, c);
	struct rdmem_att *a = c->p_.att;
	uint32_t s;

	if (rdmem_unlikely(rc) || rdmem_unlikely(rdmem__slot_try(a, &s)))
		return rdmem__submit_slow(h, c, rc); /* waits for a slot, re-attaches */
	c->p_.slot = s;
	rdmem__write_request(c, a, s);
	c->p_.state = RDMEM__INFLIGHT;
	if (rdmem_unlikely(rdmem_ring_push(&a->ring, (uint16_t)a->client, (uint16_t)s)))
		return rdmem__push_slow(h, c); /* ring full: the slot is marked for the agent */
	return 0;
}

/* The reply's fields; returns the call's rc from its status. */
static inline int rdmem__reply_fields(struct rdmem_rpc *c, const struct rdmem_desc *d)
{
	c->status = d->status;
	c->rflags = d->flags;
	c->raux = d->aux;
	c->rpath = d->path;
	memcpy(c->rargs, d->args.raw, sizeof(c->rargs));
	c->rlen = d->val_len;
	return rdmem_status_errno(d->status);
}

static inline void rdmem__slot_free(struct rdmem_att *a, uint32_t s)
{
	/* Relaxed: FREE publishes nothing to the agent; the slot is ours again. */
	atomic_store_explicit(&rdmem__slot(a, s)->state, RDMEM_SLOT_FREE, memory_order_relaxed);
	rdmem__slot_release(a, s);
}

/* Copies an on-time, well-formed reply that fits c->rbuf and gives the slot
 * back; librdmem takes the rest (late, malformed, in place, malloc'd). */
static inline void rdmem__finish(rdmem_t *h, struct rdmem_rpc *c)
{
	struct rdmem_att *a = c->p_.att;
	struct rdmem_shm_slot *slot = rdmem__slot(a, c->p_.slot);
	struct rdmem_desc d;
	int rc;

	memcpy(&d, &slot->rep, sizeof(d));
	c->latency_ns = rdmem_now_ns() - c->p_.start_ns;
	c->late = c->p_.start_ns + c->latency_ns > c->p_.deadline_ns;
	if (rdmem_unlikely(c->late || !c->rbuf || d.seq != c->p_.seq ||
			   d.data_off > a->geom.payload_cap ||
			   d.val_len > a->geom.payload_cap - d.data_off || d.val_len > c->rcap)) {
		rdmem__finish_slow(h, c, &d);
		return;
	}
	rc = rdmem__reply_fields(c, &d);
	if (d.val_len)
		memcpy(c->rbuf, rdmem_shm_payload(slot) + d.data_off, d.val_len);
	c->rval = c->rbuf;
	rdmem__slot_free(a, c->p_.slot);
	rdmem__rpc_end(h, c, rc);
}

/* 1 when finished; the slow half checks the clock, the agent and the deadline. */
static inline int rdmem__poll(rdmem_t *h, struct rdmem_rpc *c)
{
	if (c->p_.state != RDMEM__INFLIGHT)
		return 1;
	/* Acquire: pairs with the agent's release CAS to DONE (reply, then state). */
	if (RDMEM_SLOT_PHASE(atomic_load_explicit(&rdmem__slot(c->p_.att, c->p_.slot)->state,
						  memory_order_acquire)) == RDMEM_SLOT_DONE) {
		rdmem__finish(h, c);
		return 1;
	}
	return rdmem__poll_slow(h, c);
}

/* Cheap look at the slot word only; rdmem__poll() re-reads it with acquire. */
static inline int rdmem__maybe_done(struct rdmem_rpc *c)
{
	return c->p_.state != RDMEM__INFLIGHT ||
	       RDMEM_SLOT_PHASE(atomic_load_explicit(&rdmem__slot(c->p_.att, c->p_.slot)->state,
						     memory_order_relaxed)) == RDMEM_SLOT_DONE;
}

/* Spins on the slot word alone (no clock, no liveness check), then polls;
 * the yield and futex phases are librdmem's. Returns c->rc. */
static inline int rdmem__wait(rdmem_t *h, struct rdmem_rpc *c)
{
	uint32_t spins = 0;

	if (c->p_.state == RDMEM__INFLIGHT && !c->p_.att->single_cpu)
		while (spins++ < RDMEM_IDLE_SPINS && !rdmem__maybe_done(c))
			rdmem_cpu_relax();
	if (rdmem__poll(h, c))
		return c->rc;
	return rdmem__wait_slow(h, c);
}

#define rdmem_submit(h, c) rdmem__submit(h, c)
#define rdmem_poll(h, c)   rdmem__poll(h, c)
#define rdmem_wait(h, c)   rdmem__wait(h, c)

#endif
