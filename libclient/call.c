/* call.c - librdmem's half of a call: everything the inline fast path
 * (rdmem_fast.h) hands off because it waits, sleeps or looks at the agent:
 * taking the attachment, waiting for a slot or ring room, the liveness and
 * deadline checks, the futex wait, abandoning a call. Also the out-of-line
 * copies of the fast path's functions, for C++ and function pointers. */
#include <unistd.h>

#include "libclient/rdmem_priv.h"
#include "shm/futex.h"

static int call_check_request(const struct rdmem_rpc *c, const struct rdmem_att *a)
{
	if (!rdmem_shm_op_allowed(c->op) || c->path >= RDMEM_PATH__COUNT ||
	    (c->flags & ~RDMEM_SHM_REQ_FLAGS) || c->key_len > RDMEM_MAX_KEY ||
	    (c->key_len && !c->key) || (c->val_len && !c->val))
		return -EINVAL;
	if (c->val_len > a->geom.max_value)
		return -E2BIG;
	return 0;
}

/* Drops the attachment reference of a call that sent nothing. */
static void call_drop(struct rdmem_rpc *c)
{
	rdmem__att_put(c->p_.att);
	c->p_.att = NULL;
}

/* Takes the current attachment for c and checks c against it. */
static int call_acquire(rdmem_t *h, struct rdmem_rpc *c)
{
	struct rdmem_att *a;
	int rc;

	a = rdmem__att_get(h, &rc);
	if (!a)
		return rc;
	c->p_.att = a;
	rc = rdmem__att_alive(a, c->p_.start_ns) ? call_check_request(c, a) : -ESHUTDOWN;
	if (rc) {
		call_drop(c);
		return rc;
	}
	c->p_.req_id = atomic_fetch_add_explicit(&h->next_req_id, 1, memory_order_relaxed);
	return 0;
}

int rdmem__submit_begin(rdmem_t *h, struct rdmem_rpc *c)
{
	uint32_t ms = c->timeout_ms ? c->timeout_ms : h->timeout_ms;

	c->rc = 0;
	c->status = 0;
	c->rlen = 0;
	c->late = 0;
	c->rpath = 0;
	c->latency_ns = 0;
	c->p_.att = NULL;
	c->p_.state = RDMEM__IDLE;
	c->p_.start_ns = rdmem_now_ns();
	c->p_.bell_ns = 0;
	c->p_.deadline_ns = c->p_.start_ns + (uint64_t)ms * 1000000ull;
	atomic_fetch_add_explicit(&h->n_calls, 1, memory_order_relaxed);
	return call_acquire(h, c);
}

/*
 * A wait that began at since and still waits on the agent rings its
 * doorbell itself, once per liveness period: a producer's push rings only if
 * the agent said it sleeps, and any client can clear that word (or fill the
 * ring, or move its head) so that nothing else would wake an agent with no
 * tick (docs/architecture.md, "When the front-door actor scans").
 */
static void call_bell_every(struct rdmem_ring *r, uint64_t since, uint64_t *bell_ns, uint64_t now)
{
	if (now - since < RDMEM_LIVENESS_NS || (*bell_ns && now - *bell_ns < RDMEM_LIVENESS_NS))
		return;
	*bell_ns = now;
	rdmem_ring_bell(r);
}

/* Waits one idle round for slots or ring room; 1 when the deadline passed. */
static int call_idle_until(struct rdmem_idle *w, uint64_t deadline, struct rdmem_att *a,
			   uint64_t since, uint64_t *bell_ns)
{
	uint64_t now;

	if (rdmem_idle_step(w, 0)) {
		usleep(100); /* nothing to futex-wait on: a slot or ring space frees by itself */
		rdmem_idle_reset(w);
	}
	now = rdmem_now_ns();
	call_bell_every(&a->ring, since, bell_ns, now);
	return now >= deadline;
}

/* Gets a slot within the deadline; on -ESHUTDOWN the caller re-attaches. */
static int call_slot_get(struct rdmem_att *a, uint64_t deadline, uint32_t *s)
{
	uint64_t since = rdmem_now_ns(), bell_ns = 0;
	struct rdmem_idle w;

	rdmem_idle_init(&w, a->single_cpu);
	while (rdmem__slot_try(a, s)) {
		if (!rdmem__att_alive(a, rdmem_now_ns()))
			return -ESHUTDOWN;
		if (call_idle_until(&w, deadline, a, since, &bell_ns))
			return -ETIMEDOUT;
	}
	return 0;
}

static int call_abandon(rdmem_t *h, struct rdmem_rpc *c);

/*
 * The push failed: the ring holds twice the slots there are, so it is full
 * only when a client claims positions it never publishes (or writes the
 * head), which any client can do as often as it likes; or, rarely, a claim
 * gave up after RDMEM_RING_CLAIM_TRIES lost races. Rather than wait for room,
 * mark the slot NO_ENTRY and ask the agent on our own connection to take it
 * (shm/door.h). 0 when the slot is on its way (marked, or the agent took it
 * meanwhile); -1 when it is in no state to mark (push as before).
 */
static int call_mark_no_entry(struct rdmem_att *a, uint32_t s)
{
	_Atomic uint32_t *word = &rdmem__slot(a, s)->state;
	/* Relaxed: SUBMITTED was stored with release after the request. */
	uint32_t st = atomic_load_explicit(word, memory_order_relaxed);

	while (RDMEM_SLOT_PHASE(st) == RDMEM_SLOT_SUBMITTED && !(st & RDMEM_SLOT_NO_ENTRY)) {
		/* Release: the agent's acquire load of the marked word sees the
		 * request (a release sequence headed by the SUBMITTED store). */
		if (atomic_compare_exchange_weak_explicit(word, &st, st | RDMEM_SLOT_NO_ENTRY,
							  memory_order_release,
							  memory_order_relaxed)) {
			rdmem__att_ask_take(a);
			return 0;
		}
	}
	/* Taken (a stray entry, the orphan scan) or marked: on its way. */
	return RDMEM_SLOT_PHASE(st) == RDMEM_SLOT_SUBMITTED ||
		       RDMEM_SLOT_PHASE(st) == RDMEM_SLOT_TAKEN ||
		       RDMEM_SLOT_PHASE(st) == RDMEM_SLOT_DONE
		   ? 0
		   : -1;
}

/* Publishes the written slot: a ring entry, or, the ring full, a mark the
 * agent takes it by (call_mark_no_entry). */
static int call_push(rdmem_t *h, struct rdmem_rpc *c)
{
	struct rdmem_att *a = c->p_.att;
	uint32_t s = c->p_.slot;
	struct rdmem_idle w;
	int rc = 0;

	rdmem_idle_init(&w, a->single_cpu);
	while (rdmem_ring_push(&a->ring, (uint16_t)a->client, (uint16_t)s)) {
		if (call_mark_no_entry(a, s) == 0)
			break;
		rc = -ESHUTDOWN;
		if (!rdmem__att_alive(a, rdmem_now_ns()))
			break;
		rc = -ETIMEDOUT;
		if (call_idle_until(&w, c->p_.deadline_ns, a, c->p_.start_ns, &c->p_.bell_ns))
			break;
		rc = 0;
	}
	if (rc == -ETIMEDOUT) {
		uint32_t st = RDMEM_SLOT_SUBMITTED;

		/* Never published: take the slot back, unless a stray entry
		 * made the agent take it, in which case it is abandoned. */
		if (!atomic_compare_exchange_strong_explicit(&rdmem__slot(a, s)->state, &st,
							     RDMEM_SLOT_FREE, memory_order_relaxed,
							     memory_order_relaxed))
			return call_abandon(h, c);
	}
	if (rc) {
		c->p_.state = RDMEM__IDLE;
		rdmem__slot_release(a, s);
		call_drop(c);
	}
	return rc;
}

/* One attempt on the current attachment, waiting for a slot and ring room. */
static int call_once(rdmem_t *h, struct rdmem_rpc *c)
{
	uint32_t s;
	int rc = call_acquire(h, c);

	if (rc)
		return rc;
	rc = call_slot_get(c->p_.att, c->p_.deadline_ns, &s);
	if (rc) {
		call_drop(c);
		return rc;
	}
	c->p_.slot = s;
	rdmem__write_request(c, c->p_.att, s);
	c->p_.state = RDMEM__INFLIGHT;
	return call_push(h, c);
}

/* What rdmem_submit() returns once an attempt ended with rc. */
static int call_submitted(rdmem_t *h, struct rdmem_rpc *c, int rc)
{
	/* Nothing was sent when an attachment turned out stale: retry once, fresh. */
	if (rc == -ESHUTDOWN && c->p_.state == RDMEM__IDLE)
		rc = call_once(h, c);
	if (c->p_.state == RDMEM__INFLIGHT)
		return 0;
	if (c->p_.state != RDMEM__DONE)
		rdmem__rpc_end(h, c, rc);
	return c->rc;
}

/* rc 0: attached, but every slot was busy; else the first attempt's error. */
int rdmem__submit_slow(rdmem_t *h, struct rdmem_rpc *c, int rc)
{
	uint32_t s;

	if (rc == 0) {
		rc = call_slot_get(c->p_.att, c->p_.deadline_ns, &s);
		if (rc) {
			call_drop(c);
		} else {
			c->p_.slot = s;
			rdmem__write_request(c, c->p_.att, s);
			c->p_.state = RDMEM__INFLIGHT;
			rc = call_push(h, c);
		}
	}
	return call_submitted(h, c, rc);
}

/* The request is written but the ring was full at the first try. */
int rdmem__push_slow(rdmem_t *h, struct rdmem_rpc *c)
{
	return call_submitted(h, c, call_push(h, c));
}

/* Gives up on an in-flight call: the agent frees the slot when it is done with it. */
static int call_abandon(rdmem_t *h, struct rdmem_rpc *c)
{
	struct rdmem_att *a = c->p_.att;
	_Atomic uint32_t *word = &rdmem__slot(a, c->p_.slot)->state;
	/* Acquire: if it is DONE after all, the reply bytes are visible. */
	uint32_t st = atomic_load_explicit(word, memory_order_acquire);

	for (;;) {
		uint32_t phase = RDMEM_SLOT_PHASE(st);

		if (phase == RDMEM_SLOT_DONE) {
			rdmem__finish(h, c);
			return c->rc;
		}
		if (phase != RDMEM_SLOT_SUBMITTED && phase != RDMEM_SLOT_TAKEN)
			break; /* not ours to change; the slot stays out of use */
		/* Acquire on both outcomes, for the DONE case above. */
		if (atomic_compare_exchange_weak_explicit(word, &st, RDMEM_SLOT_ABANDONED,
							  memory_order_acquire,
							  memory_order_acquire))
			break;
	}
	rdmem__slot_release(a, c->p_.slot); /* stays out of use until the agent sets FREE */
	rdmem__rpc_end(h, c, -ETIMEDOUT);
	return c->rc;
}

/*
 * A published call the agent has not taken: its entry may have been
 * overwritten, or the agent not woken (see call_bell_every); the woken agent
 * drains the ring, and its scans take a slot whose entry was lost.
 */
static void call_ring_if_untaken(struct rdmem_rpc *c, uint64_t now)
{
	struct rdmem_att *a = c->p_.att;
	/* Relaxed: a hint; a spare wake-up costs the agent one look. */
	uint32_t st =
	    atomic_load_explicit(&rdmem__slot(a, c->p_.slot)->state, memory_order_relaxed);

	if (RDMEM_SLOT_PHASE(st) == RDMEM_SLOT_SUBMITTED)
		call_bell_every(&a->ring, c->p_.start_ns, &c->p_.bell_ns, now);
}

/* The slot is not DONE: is the agent still there, is the deadline past? */
int rdmem__poll_slow(rdmem_t *h, struct rdmem_rpc *c)
{
	struct rdmem_att *a = c->p_.att;
	uint64_t now = rdmem_now_ns();

	call_ring_if_untaken(c, now);
	if (!rdmem__att_alive(a, now)) {
		rdmem__slot_release(a, c->p_.slot);
		rdmem__rpc_end(h, c, -ESHUTDOWN);
		return 1;
	}
	if (now >= c->p_.deadline_ns) {
		call_abandon(h, c);
		return 1;
	}
	return 0;
}

/* Sleeps on the slot word until the agent publishes, the deadline, or a liveness check. */
static void call_block(struct rdmem_rpc *c)
{
	_Atomic uint32_t *word = &rdmem__slot(c->p_.att, c->p_.slot)->state;
	uint32_t st = atomic_load_explicit(word, memory_order_relaxed);
	uint32_t phase = RDMEM_SLOT_PHASE(st);
	uint64_t now = rdmem_now_ns(), timeout;

	if (phase != RDMEM_SLOT_SUBMITTED && phase != RDMEM_SLOT_TAKEN)
		return;
	/*
	 * Relaxed: the WAITING bit and the agent's DONE transition are both
	 * RMWs on this one word, so one of them sees the other: either our
	 * CAS fails on DONE, or the agent's CAS sees WAITING and wakes us.
	 */
	if (!(st & RDMEM_SLOT_WAITING) &&
	    !atomic_compare_exchange_strong_explicit(word, &st, st | RDMEM_SLOT_WAITING,
						     memory_order_relaxed, memory_order_relaxed))
		return;
	if (now >= c->p_.deadline_ns)
		return;
	timeout = RDMEM_MIN(c->p_.deadline_ns - now, RDMEM_LIVENESS_NS);
	rdmem_futex_wait(word, st | RDMEM_SLOT_WAITING, timeout);
}

/* After the inline spin phase: yield, then block on the futex, and again.
 * With one CPU to run on, no spin phase at all (rdmem_idle_init). */
int rdmem__wait_slow(rdmem_t *h, struct rdmem_rpc *c)
{
	struct rdmem_idle w;

	rdmem_idle_init(&w, c->p_.att->single_cpu);
	w.spins = RDMEM_IDLE_SPINS; /* rdmem_wait() spun already */
	for (;;) {
		if (rdmem__poll(h, c))
			return c->rc;
		if (rdmem_idle_step(&w, 0)) {
			call_block(c);
			rdmem_idle_reset(&w);
		}
	}
}

/* rdmem__finish() for all but an on-time, well-formed reply that fits
 * c->rbuf: counts a late or malformed reply, keeps the value in the slot
 * (inplace) or copies it into malloc'd memory with a NUL after it. */
void rdmem__finish_slow(rdmem_t *h, struct rdmem_rpc *c, const struct rdmem_desc *d)
{
	struct rdmem_att *a = c->p_.att;
	uint8_t *val;
	int rc;

	if (c->late)
		rdmem__count(h, RDMEM__N_LATE);
	if (d->seq != c->p_.seq || d->data_off > a->geom.payload_cap ||
	    d->val_len > a->geom.payload_cap - d->data_off) {
		rdmem__count(h, RDMEM__N_BAD);
		rdmem__slot_free(a, c->p_.slot);
		rdmem__rpc_end(h, c, -EPROTO);
		return;
	}
	val = rdmem_shm_payload(rdmem__slot(a, c->p_.slot)) + d->data_off;
	rc = rdmem__reply_fields(c, d);
	if (c->rbuf) {
		if (d->val_len > c->rcap)
			rc = rc ? rc : -ENOBUFS;
		else if (d->val_len)
			memcpy(c->rbuf, val, d->val_len);
		c->rval = c->rbuf;
	} else if (c->inplace && rc == 0) {
		/* The reply stays where the agent (or the NIC) put it: no copy.
		 * The slot and the mapping stay ours until rdmem_rpc_free(). */
		c->rval = val;
		c->p_.held = a;
		atomic_fetch_add_explicit(&a->refs, 1, memory_order_relaxed);
		rdmem__rpc_end(h, c, rc);
		return;
	} else if ((c->rval = malloc((size_t)d->val_len + 1)) != NULL) {
		memcpy(c->rval, val, d->val_len);
		((uint8_t *)c->rval)[d->val_len] = 0;
		c->p_.owns_rval = 1;
	} else {
		rc = -ENOMEM;
	}
	rdmem__slot_free(a, c->p_.slot);
	rdmem__rpc_end(h, c, rc);
}

void rdmem_rpc_free(struct rdmem_rpc *c)
{
	if (c->p_.owns_rval)
		free(c->rval);
	if (c->p_.held) {
		rdmem__slot_free(c->p_.held, c->p_.slot);
		rdmem__att_put(c->p_.held);
		c->p_.held = NULL;
	}
	c->rval = NULL;
	c->p_.owns_rval = 0;
}

/* ---- the fast path out of line (the parentheses skip rdmem_fast.h's macros) */

void rdmem_rpc_init(struct rdmem_rpc *c, uint16_t op)
{
	memset(c, 0, sizeof(*c));
	c->op = op;
}

int rdmem_rpc_pending(const struct rdmem_rpc *c)
{
	return c->p_.state == RDMEM__INFLIGHT;
}

int(rdmem_submit)(rdmem_t *h, struct rdmem_rpc *c)
{
	return rdmem__submit(h, c);
}

int(rdmem_poll)(rdmem_t *h, struct rdmem_rpc *c)
{
	return rdmem__poll(h, c);
}

int(rdmem_wait)(rdmem_t *h, struct rdmem_rpc *c)
{
	return rdmem__wait(h, c);
}
