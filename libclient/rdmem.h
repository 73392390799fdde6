/* rdmem.h - the RDMemRPC client library: header-only, libc only.
 *
 * A local app attaches to the agent's shared-memory segment (/rdmem by
 * default), writes each request into one of its own slots, publishes
 * (client, slot) into the agent's MPSC ring, and waits on the slot word
 * (spin, yield, then futex). Build with -Iinclude -I. from the repository
 * root; link nothing but libc.
 *
 *   rdmem_t *h;
 *   if (rdmem_open(NULL, &h) == 0) {          // NULL: "/rdmem"
 *           rdmem_put(h, "k", 1, "v", 1, NULL);
 *           rdmem_close(h);
 *   }
 *
 * Every function returns 0 or -errno: the reply status through
 * rdmem_status_errno() (-ENOENT not found, -E2BIG over the cap, -EINVAL bad
 * request, -ETIMEDOUT, -EHOSTUNREACH no path, ...) or a local error:
 *   -ECONNREFUSED  no agent: segment missing, closed, or its agent is gone
 *   -ESHUTDOWN     the agent stopped or restarted while the call was in flight
 *                  (the next call re-attaches to the new agent by itself)
 *   -EUSERS        every client entry of the segment is taken
 *   -EPROTO        not an rdmem segment / other version / malformed reply
 *   -ENOBUFS       reply larger than the caller's buffer (needed length given)
 * rdmem_strerror() turns them into one-line messages.
 *
 * Per call, struct rdmem_opts (NULL for defaults) forces a path and sets the
 * timeout, and can return which path carried the call and its latency.
 * Values are never truncated. A handle is safe to use from many threads;
 * up to rdmem_slots() calls of one handle are in flight at once, and more
 * wait for a slot (within their timeout). Do not use a handle across fork().
 *
 * Async: fill a struct rdmem_rpc (rdmem_rpc_init()), rdmem_submit() it, then
 * rdmem_poll() (non-blocking) or rdmem_wait() it; every submitted call must
 * be polled or waited to completion, and rdmem_rpc_free() releases a reply
 * buffer the library allocated.
 *
 * Request formats (the server's dispatch reads the same): key bytes then
 * value bytes; KV_MGET's value is a blob ARRAY of keys and its reply a blob
 * ARRAY of values (rdmem/blob.h); PROFILE carries the id as decimal text in
 * the key and in args[0]; LARGE_GET's key is "big:<n>[k|m]"; IMAGE_CHUNK's
 * key is the image name, its value the chunk, args the struct
 * rdmem_image_args; STATS and AGENT_STATS take RDMEM_F_JSON; AGENT_CTL's key
 * is the command line.
 */
#ifndef RDMEM_CLIENT_H
#define RDMEM_CLIENT_H

/* futex(), OFD locks, CPU affinity: include this header first, or build
 * with -D_GNU_SOURCE. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rdmem/blob.h"
#include "rdmem/content.h"
#include "rdmem/idle.h"
#include "rdmem/wire.h"
#include "shm/segment.h"

#define RDMEM_DEFAULT_TIMEOUT_MS  5000u
#define RDMEM_IMAGE_CHUNK_DEFAULT (24u << 10)
/* A blocked waiter looks at the agent this often (its liveness, the epoch). */
#define RDMEM_LIVENESS_NS 20000000ull
/* How long attach waits for an agent that is still formatting its segment. */
#define RDMEM_ATTACH_INIT_NS 200000000ull

/* ---- public types ------------------------------------------------------ */

/* What one call did; filled when struct rdmem_opts.info points here. */
struct rdmem_info {
	uint8_t path;	     /* enum rdmem_path that carried the call (AUTO: local) */
	uint16_t status;     /* wire status of the reply */
	uint64_t latency_ns; /* submit to reply, as the caller saw it */
	int late;	     /* the reply came after the deadline (delivered anyway) */
};

struct rdmem_opts {
	uint8_t path;		 /* enum rdmem_path; RDMEM_PATH_AUTO lets the agent choose */
	uint32_t timeout_ms;	 /* 0: the handle's default */
	struct rdmem_info *info; /* optional out */
};

struct rdmem_att; /* one attachment to one agent incarnation (private) */

struct rdmem_rpc {
	/* request: set by the caller before rdmem_submit() */
	uint16_t op; /* enum rdmem_op or enum rdmem_shm_op */
	uint16_t flags;
	uint32_t aux;
	const void *key;
	uint32_t key_len;
	const void *val;
	uint32_t val_len;
	uint64_t args[3];
	uint8_t path;	     /* enum rdmem_path */
	uint32_t timeout_ms; /* 0: the handle's default */
	void *rbuf;	     /* reply value goes here; NULL: a malloc'd copy in rval */
	uint32_t rcap;
	uint8_t inplace; /* no rbuf: rval points into the call's slot, no copy at all;
			  * the slot stays ours until rdmem_rpc_free() */
	/* result: valid once rdmem_poll() returned 1 or rdmem_wait() returned */
	int rc;		 /* 0 or -errno */
	uint16_t status; /* wire status */
	uint16_t rflags;
	uint32_t rlen; /* value bytes (the needed length when rc == -ENOBUFS) */
	void *rval;    /* rbuf, or malloc'd with a NUL after rlen bytes: rdmem_rpc_free() */
	uint32_t raux;
	uint64_t rargs[3];
	uint8_t rpath; /* path that carried it */
	int late;
	uint64_t latency_ns;
	/* private */
	struct rdmem_att *att_;
	uint32_t slot_;
	uint32_t seq_;
	int state_;
	int owns_rval_;
	struct rdmem_att *held_; /* inplace: the attachment whose slot_ we still hold */
	uint64_t start_ns_;
	uint64_t deadline_ns_;
};

struct rdmem_counters {
	uint64_t calls;
	uint64_t timeouts;    /* calls abandoned at their deadline */
	uint64_t late;	      /* replies found after the deadline, delivered */
	uint64_t shutdowns;   /* calls cut by an agent stop or restart */
	uint64_t reattach;    /* attachments made after the first */
	uint64_t bad_replies; /* sequence or bounds check failed (-EPROTO) */
};

struct rdmem_att {
	_Atomic uint32_t refs; /* the handle's own, plus one per call in flight */
	_Atomic int stale;     /* the agent went away: no new calls here */
	int fd;		       /* kept open to test the agent's lock on the segment */
	void *base;
	size_t len;
	struct rdmem_shm_header *hdr;
	struct rdmem_shm_geom geom;
	struct rdmem_ring ring;
	uint32_t client;
	int32_t pid;
	int32_t agent_pid;
	uint64_t epoch;
	_Atomic uint64_t busy;		   /* bit s: slot s is used by a call of this process */
	_Atomic uint64_t next_liveness_ns; /* when to test the agent process again */
};

typedef struct rdmem {
	char name[RDMEM_SHM_NAME_MAX + 1];
	atomic_flag lock; /* guards att: swap on re-attach, take a reference */
	struct rdmem_att *att;
	int attached_once;
	int single_cpu; /* we may run on one CPU only: spinning cannot help */
	uint32_t timeout_ms;
	_Atomic uint64_t next_req_id;
	_Atomic uint64_t n_calls, n_timeouts, n_late, n_shutdowns, n_reattach, n_bad;
} rdmem_t;

enum { RDMEM__IDLE = 0, RDMEM__INFLIGHT, RDMEM__DONE };

/* ---- attachment -------------------------------------------------------- */

/* Gone when its pid is, or when its lock on the segment fd is (zombie, reused pid). */
static inline int rdmem__agent_gone(int fd, int32_t pid)
{
	if (pid <= 0 || (kill(pid, 0) < 0 && errno == ESRCH))
		return 1;
	return rdmem_shm_agent_locked(fd) == 0;
}

static inline void rdmem__att_unmap(struct rdmem_att *a)
{
	struct rdmem_shm_client *me = rdmem_shm_client_at(a->base, &a->geom, a->client);
	int32_t pid = a->pid;

	/*
	 * Hand the entry back. Release: our slot writes precede the next
	 * claimer's acquire CAS. Slots we abandoned stay ABANDONED until the
	 * agent frees them; a later claimer's allocator skips them meanwhile.
	 */
	if (!atomic_load_explicit(&a->stale, memory_order_relaxed))
		atomic_compare_exchange_strong_explicit(&me->pid, &pid, 0, memory_order_release,
							memory_order_relaxed);
	munmap(a->base, a->len);
	close(a->fd);
	free(a);
}

static inline void rdmem__att_put(struct rdmem_att *a)
{
	/* acq_rel: the last owner sees every other owner's use before unmapping. */
	if (atomic_fetch_sub_explicit(&a->refs, 1, memory_order_acq_rel) == 1)
		rdmem__att_unmap(a);
}

/* Maps the segment and checks it is a running agent's; the mapping is returned in *a. */
static inline int rdmem__att_map(const char *name, struct rdmem_att *a)
{
	uint64_t give_up = rdmem_now_ns() + RDMEM_ATTACH_INIT_NS;
	struct stat st;
	uint32_t state;
	int fd, rc;

	fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
	if (fd < 0)
		return errno == ENOENT ? -ECONNREFUSED : -errno;
	/* An agent creating the segment sizes it right after: wait for that. */
	while ((rc = fstat(fd, &st)) == 0 && st.st_size < (off_t)RDMEM_SHM_HEADER_SIZE &&
	       rdmem_now_ns() < give_up)
		usleep(1000);
	if (rc < 0 || st.st_size < (off_t)RDMEM_SHM_HEADER_SIZE) {
		rc = rc < 0 ? -errno : -ECONNREFUSED;
		close(fd);
		return rc;
	}
	a->len = (size_t)st.st_size;
	a->base = mmap(NULL, a->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (a->base == MAP_FAILED) {
		rc = -errno;
		close(fd);
		return rc;
	}
	a->fd = fd;
	a->hdr = (struct rdmem_shm_header *)a->base;
	/* Acquire: pairs with the agent's release store of RUNNING, after formatting. */
	while ((state = atomic_load_explicit(&a->hdr->state, memory_order_acquire)) ==
		   RDMEM_SHM_INIT &&
	       rdmem_now_ns() < give_up)
		usleep(1000);
	if (state != RDMEM_SHM_RUNNING)
		rc = -ECONNREFUSED;
	else if ((rc = rdmem_shm_header_check(a->hdr, a->len, &a->geom)) != 0)
		rc = -EPROTO;
	else if (rdmem__agent_gone(a->fd, a->hdr->agent_pid))
		rc = -ECONNREFUSED;
	if (rc) {
		munmap(a->base, a->len);
		close(fd);
	}
	return rc;
}

/* Claims a client entry: CAS 0 -> our pid. */
static inline int rdmem__att_claim(struct rdmem_att *a)
{
	uint32_t c;

	a->pid = (int32_t)getpid();
	for (c = 0; c < a->geom.clients; c++) {
		struct rdmem_shm_client *e = rdmem_shm_client_at(a->base, &a->geom, c);
		int32_t free_pid = 0;

		/* Acquire: pairs with the agent's release when it reclaimed the
		 * entry, so its slot resets are visible to us. */
		if (atomic_compare_exchange_strong_explicit(
			&e->pid, &free_pid, a->pid, memory_order_acquire, memory_order_relaxed)) {
			atomic_fetch_add_explicit(&e->gen, 1, memory_order_relaxed);
			e->attach_ns = rdmem_now_ns();
			a->client = c;
			return 0;
		}
	}
	return -EUSERS;
}

static inline int rdmem__attach(const char *name, struct rdmem_att **out)
{
	struct rdmem_att *a = (struct rdmem_att *)calloc(1, sizeof(*a));
	int rc;

	if (!a)
		return -ENOMEM;
	rc = rdmem__att_map(name, a);
	if (rc) {
		free(a);
		return rc;
	}
	a->agent_pid = a->hdr->agent_pid;
	a->epoch = atomic_load_explicit(&a->hdr->epoch, memory_order_relaxed);
	rdmem_shm_ring_view(a->base, &a->geom, &a->ring);
	rc = rdmem__att_claim(a);
	if (rc) {
		munmap(a->base, a->len);
		close(a->fd);
		free(a);
		return rc;
	}
	atomic_store_explicit(&a->refs, 1, memory_order_relaxed);
	atomic_store_explicit(&a->next_liveness_ns, rdmem_now_ns() + RDMEM_LIVENESS_NS,
			      memory_order_relaxed);
	*out = a;
	return 0;
}

static inline void rdmem__lock(rdmem_t *h)
{
	/* Acquire/release: the critical section is a pointer read and a ref bump. */
	while (atomic_flag_test_and_set_explicit(&h->lock, memory_order_acquire))
		sched_yield();
}

static inline void rdmem__unlock(rdmem_t *h)
{
	atomic_flag_clear_explicit(&h->lock, memory_order_release);
}

/* Returns the current attachment with a reference, re-attaching after a stale one. */
static inline struct rdmem_att *rdmem__att_get(rdmem_t *h, int *err)
{
	struct rdmem_att *a, *old = NULL;
	int rc = 0;

	rdmem__lock(h);
	a = h->att;
	if (a && atomic_load_explicit(&a->stale, memory_order_relaxed)) {
		old = a;
		h->att = a = NULL;
	}
	if (!a) {
		rc = rdmem__attach(h->name, &a);
		if (rc == 0) {
			h->att = a;
			if (h->attached_once)
				atomic_fetch_add_explicit(&h->n_reattach, 1, memory_order_relaxed);
			h->attached_once = 1;
		}
	}
	if (a)
		atomic_fetch_add_explicit(&a->refs, 1, memory_order_relaxed);
	rdmem__unlock(h);
	if (old)
		rdmem__att_put(old); /* the handle's reference */
	*err = rc;
	return a;
}

/*
 * Is the agent behind a still the one we attached to? Header loads are
 * cheap and run on every check; kill() and the lock test run every
 * RDMEM_LIVENESS_NS.
 */
static inline int rdmem__att_alive(struct rdmem_att *a, uint64_t now)
{
	struct rdmem_shm_client *me = rdmem_shm_client_at(a->base, &a->geom, a->client);

	if (atomic_load_explicit(&a->stale, memory_order_relaxed))
		return 0;
	/* Acquire: pairs with the agent's release store of CLOSED. */
	if (atomic_load_explicit(&a->hdr->state, memory_order_acquire) != RDMEM_SHM_RUNNING ||
	    atomic_load_explicit(&a->hdr->epoch, memory_order_relaxed) != a->epoch ||
	    atomic_load_explicit(&me->pid, memory_order_relaxed) != a->pid)
		goto stale;
	if (now >= atomic_load_explicit(&a->next_liveness_ns, memory_order_relaxed)) {
		atomic_store_explicit(&a->next_liveness_ns, now + RDMEM_LIVENESS_NS,
				      memory_order_relaxed);
		if (rdmem__agent_gone(a->fd, a->agent_pid))
			goto stale;
	}
	return 1;
stale:
	atomic_store_explicit(&a->stale, 1, memory_order_relaxed);
	return 0;
}

/* ---- slots ------------------------------------------------------------- */

static inline struct rdmem_shm_slot *rdmem__slot(struct rdmem_att *a, uint32_t s)
{
	return rdmem_shm_slot_at(a->base, &a->geom, a->client, s);
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

/* ---- calls ------------------------------------------------------------- */

static inline void rdmem_rpc_init(struct rdmem_rpc *c, uint16_t op)
{
	memset(c, 0, sizeof(*c));
	c->op = op;
}

/* 1 while a submitted call has not been polled or waited to completion. */
static inline int rdmem_rpc_pending(const struct rdmem_rpc *c)
{
	return c->state_ == RDMEM__INFLIGHT;
}

static inline void rdmem_rpc_free(struct rdmem_rpc *c)
{
	if (c->owns_rval_)
		free(c->rval);
	if (c->held_) {
		/* Relaxed: FREE publishes nothing to the agent; the slot is ours again. */
		atomic_store_explicit(&rdmem__slot(c->held_, c->slot_)->state, RDMEM_SLOT_FREE,
				      memory_order_relaxed);
		rdmem__slot_release(c->held_, c->slot_);
		rdmem__att_put(c->held_);
		c->held_ = NULL;
	}
	c->rval = NULL;
	c->owns_rval_ = 0;
}

static inline void rdmem__rpc_end(rdmem_t *h, struct rdmem_rpc *c, int rc)
{
	c->rc = rc;
	c->state_ = RDMEM__DONE;
	if (rc == -ETIMEDOUT && c->status != RDMEM_S_TIMEOUT)
		atomic_fetch_add_explicit(&h->n_timeouts, 1, memory_order_relaxed);
	else if (rc == -ESHUTDOWN)
		atomic_fetch_add_explicit(&h->n_shutdowns, 1, memory_order_relaxed);
	if (c->att_) {
		rdmem__att_put(c->att_);
		c->att_ = NULL;
	}
}

static inline int rdmem__check_request(const struct rdmem_rpc *c, const struct rdmem_att *a)
{
	if (!rdmem_shm_op_allowed(c->op) || c->path >= RDMEM_PATH__COUNT ||
	    (c->flags & ~RDMEM_SHM_REQ_FLAGS) || c->key_len > RDMEM_MAX_KEY ||
	    (c->key_len && !c->key) || (c->val_len && !c->val))
		return -EINVAL;
	if (c->val_len > a->geom.max_value)
		return -E2BIG;
	return 0;
}

/* Writes the request into slot s; state turns SUBMITTED last. */
static inline void rdmem__write_request(rdmem_t *h, struct rdmem_rpc *c, struct rdmem_att *a,
					uint32_t s)
{
	struct rdmem_shm_slot *slot = rdmem__slot(a, s);
	uint8_t *payload = rdmem_shm_payload(slot);
	struct rdmem_desc d;

	c->seq_ = slot->seq + 1;
	slot->seq = c->seq_;
	slot->deadline_ns = c->deadline_ns_;
	slot->path = c->path;
	if (c->key_len)
		memcpy(payload, c->key, c->key_len);
	if (c->val_len)
		memcpy(payload + RDMEM_SHM_VALUE_OFF, c->val, c->val_len);
	memset(&d, 0, sizeof(d));
	d.seq = c->seq_;
	d.op = c->op;
	d.flags = c->flags;
	d.path = c->path;
	d.key_len = (uint16_t)c->key_len;
	d.val_len = c->val_len;
	d.aux = c->aux;
	d.req_id = atomic_fetch_add_explicit(&h->next_req_id, 1, memory_order_relaxed);
	memcpy(d.args.raw, c->args, sizeof(d.args.raw));
	memcpy(&slot->req, &d, sizeof(d));
	/* Release: the request above is visible to the agent that sees SUBMITTED
	 * (its acquire load in the front door's take). */
	atomic_store_explicit(&slot->state, RDMEM_SLOT_SUBMITTED, memory_order_release);
}

/* Waits one idle round; 1 when the deadline passed. */
static inline int rdmem__idle_until(struct rdmem_idle *w, uint64_t deadline)
{
	if (rdmem_idle_step(w, 0)) {
		usleep(100); /* nothing to futex-wait on: a slot or ring space frees by itself */
		rdmem_idle_reset(w);
	}
	return rdmem_now_ns() >= deadline;
}

/* Gets a slot within the deadline; on -ESHUTDOWN the caller re-attaches. */
static inline int rdmem__slot_get(struct rdmem_att *a, uint64_t deadline, uint32_t *s)
{
	struct rdmem_idle w;

	rdmem_idle_reset(&w);
	while (rdmem__slot_try(a, s)) {
		if (!rdmem__att_alive(a, rdmem_now_ns()))
			return -ESHUTDOWN;
		if (rdmem__idle_until(&w, deadline))
			return -ETIMEDOUT;
	}
	return 0;
}

/* Publishes (client, s) in the ring, waiting for room within the deadline. */
static inline int rdmem__push(struct rdmem_att *a, uint32_t s, uint64_t deadline)
{
	struct rdmem_idle w;

	rdmem_idle_reset(&w);
	while (rdmem_ring_push(&a->ring, (uint16_t)a->client, (uint16_t)s)) {
		if (!rdmem__att_alive(a, rdmem_now_ns()))
			return -ESHUTDOWN;
		if (rdmem__idle_until(&w, deadline))
			return -ETIMEDOUT;
	}
	return 0;
}

static inline int rdmem__abandon(rdmem_t *h, struct rdmem_rpc *c);

/* One attempt at submitting on the current attachment. */
static inline int rdmem__submit_once(rdmem_t *h, struct rdmem_rpc *c)
{
	struct rdmem_att *a;
	uint32_t s;
	int rc;

	a = rdmem__att_get(h, &rc);
	if (!a)
		return rc;
	c->att_ = a;
	rc = rdmem__att_alive(a, c->start_ns_) ? rdmem__check_request(c, a) : -ESHUTDOWN;
	if (!rc)
		rc = rdmem__slot_get(a, c->deadline_ns_, &s);
	if (rc) {
		rdmem__att_put(a);
		c->att_ = NULL;
		return rc;
	}
	c->slot_ = s;
	rdmem__write_request(h, c, a, s);
	c->state_ = RDMEM__INFLIGHT;
	rc = rdmem__push(a, s, c->deadline_ns_);
	if (rc == -ETIMEDOUT) {
		uint32_t st = RDMEM_SLOT_SUBMITTED;

		/* Never published: take the slot back, unless a stray entry
		 * made the agent take it, in which case it is abandoned. */
		if (!atomic_compare_exchange_strong_explicit(&rdmem__slot(a, s)->state, &st,
							     RDMEM_SLOT_FREE, memory_order_relaxed,
							     memory_order_relaxed))
			return rdmem__abandon(h, c);
	}
	if (rc) {
		c->state_ = RDMEM__IDLE;
		rdmem__slot_release(a, s);
		rdmem__att_put(a);
		c->att_ = NULL;
	}
	return rc;
}

/*
 * Starts a call. Returns 0 when it is in flight (then poll or wait it), or
 * -errno when it never left: c->rc holds the same value then.
 */
static inline int rdmem_submit(rdmem_t *h, struct rdmem_rpc *c)
{
	uint32_t ms = c->timeout_ms ? c->timeout_ms : h->timeout_ms;
	int rc, tries;

	c->rc = 0;
	c->status = 0;
	c->rlen = 0;
	c->late = 0;
	c->rpath = 0;
	c->latency_ns = 0;
	c->att_ = NULL;
	c->state_ = RDMEM__IDLE;
	c->start_ns_ = rdmem_now_ns();
	c->deadline_ns_ = c->start_ns_ + (uint64_t)ms * 1000000ull;
	atomic_fetch_add_explicit(&h->n_calls, 1, memory_order_relaxed);
	/* Nothing was sent when an attachment turns out stale: retry once, fresh. */
	for (tries = 0; tries < 2; tries++) {
		rc = rdmem__submit_once(h, c);
		if (rc != -ESHUTDOWN || c->state_ != RDMEM__IDLE)
			break;
	}
	if (c->state_ == RDMEM__INFLIGHT)
		return 0;
	if (c->state_ != RDMEM__DONE)
		rdmem__rpc_end(h, c, rc);
	return c->rc;
}

/* Copies the reply out of the slot and gives the slot back. */
static inline void rdmem__finish(rdmem_t *h, struct rdmem_rpc *c)
{
	struct rdmem_att *a = c->att_;
	struct rdmem_shm_slot *slot = rdmem__slot(a, c->slot_);
	uint8_t *payload = rdmem_shm_payload(slot);
	struct rdmem_desc d;
	int rc;

	memcpy(&d, &slot->rep, sizeof(d));
	c->latency_ns = rdmem_now_ns() - c->start_ns_;
	c->late = c->start_ns_ + c->latency_ns > c->deadline_ns_;
	if (c->late)
		atomic_fetch_add_explicit(&h->n_late, 1, memory_order_relaxed);
	if (d.seq != c->seq_ || d.data_off > a->geom.payload_cap ||
	    d.val_len > a->geom.payload_cap - d.data_off) {
		atomic_fetch_add_explicit(&h->n_bad, 1, memory_order_relaxed);
		rc = -EPROTO;
	} else {
		c->status = d.status;
		c->rflags = d.flags;
		c->raux = d.aux;
		c->rpath = d.path;
		memcpy(c->rargs, d.args.raw, sizeof(c->rargs));
		c->rlen = d.val_len;
		rc = rdmem_status_errno(d.status);
		if (c->rbuf) {
			if (d.val_len > c->rcap)
				rc = rc ? rc : -ENOBUFS;
			else if (d.val_len)
				memcpy(c->rbuf, payload + d.data_off, d.val_len);
			c->rval = c->rbuf;
		} else if (c->inplace && rc == 0) {
			/* The reply stays where the agent (or the NIC) put it: no copy.
			 * The slot and the mapping stay ours until rdmem_rpc_free(). */
			c->rval = payload + d.data_off;
			c->held_ = a;
			atomic_fetch_add_explicit(&a->refs, 1, memory_order_relaxed);
			rdmem__rpc_end(h, c, rc);
			return;
		} else if ((c->rval = malloc((size_t)d.val_len + 1)) != NULL) {
			memcpy(c->rval, payload + d.data_off, d.val_len);
			((uint8_t *)c->rval)[d.val_len] = 0;
			c->owns_rval_ = 1;
		} else {
			rc = -ENOMEM;
		}
	}
	/* Relaxed: FREE publishes nothing to the agent; the slot is ours again. */
	atomic_store_explicit(&slot->state, RDMEM_SLOT_FREE, memory_order_relaxed);
	rdmem__slot_release(a, c->slot_);
	rdmem__rpc_end(h, c, rc);
}

/* Gives up on an in-flight call: the agent frees the slot when it is done with it. */
static inline int rdmem__abandon(rdmem_t *h, struct rdmem_rpc *c)
{
	struct rdmem_att *a = c->att_;
	_Atomic uint32_t *word = &rdmem__slot(a, c->slot_)->state;
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
	rdmem__slot_release(a, c->slot_); /* stays out of use until the agent sets FREE */
	rdmem__rpc_end(h, c, -ETIMEDOUT);
	return c->rc;
}

/*
 * Checks a call without blocking: 1 when it finished (c->rc, and the reply
 * fields, are set), 0 while it is still in flight.
 */
static inline int rdmem_poll(rdmem_t *h, struct rdmem_rpc *c)
{
	struct rdmem_att *a = c->att_;
	uint64_t now;

	if (c->state_ != RDMEM__INFLIGHT)
		return 1;
	/* Acquire: pairs with the agent's release CAS to DONE (reply, then state). */
	if (RDMEM_SLOT_PHASE(atomic_load_explicit(&rdmem__slot(a, c->slot_)->state,
						  memory_order_acquire)) == RDMEM_SLOT_DONE) {
		rdmem__finish(h, c);
		return 1;
	}
	now = rdmem_now_ns();
	if (!rdmem__att_alive(a, now)) {
		rdmem__slot_release(a, c->slot_);
		rdmem__rpc_end(h, c, -ESHUTDOWN);
		return 1;
	}
	if (now >= c->deadline_ns_) {
		rdmem__abandon(h, c);
		return 1;
	}
	return 0;
}

/* Sleeps on the slot word until the agent publishes, the deadline, or a liveness check. */
static inline void rdmem__block(struct rdmem_rpc *c)
{
	_Atomic uint32_t *word = &rdmem__slot(c->att_, c->slot_)->state;
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
	if (now >= c->deadline_ns_)
		return;
	timeout = RDMEM_MIN(c->deadline_ns_ - now, RDMEM_LIVENESS_NS);
	rdmem_futex_wait(word, st | RDMEM_SLOT_WAITING, timeout);
}

/* Starts an idle wait; with one CPU to run on, skips the spin phase. */
static inline void rdmem__idle_reset(const rdmem_t *h, struct rdmem_idle *w)
{
	rdmem_idle_reset(w);
	if (h->single_cpu)
		w->spins = RDMEM_IDLE_SPINS;
}

/* Cheap look at the slot word only; rdmem_poll() re-reads it with acquire. */
static inline int rdmem__maybe_done(struct rdmem_rpc *c)
{
	return c->state_ != RDMEM__INFLIGHT ||
	       RDMEM_SLOT_PHASE(atomic_load_explicit(&rdmem__slot(c->att_, c->slot_)->state,
						     memory_order_relaxed)) == RDMEM_SLOT_DONE;
}

/* Blocks until the call finishes; returns c->rc. */
static inline int rdmem_wait(rdmem_t *h, struct rdmem_rpc *c)
{
	struct rdmem_idle w;

	rdmem__idle_reset(h, &w);
	for (;;) {
		/* Spin phase: the slot word alone, no clock or liveness checks. */
		if (w.spins < RDMEM_IDLE_SPINS && !rdmem__maybe_done(c)) {
			rdmem_idle_step(&w, 0);
			continue;
		}
		if (rdmem_poll(h, c))
			return c->rc;
		if (rdmem_idle_step(&w, 0)) {
			rdmem__block(c);
			rdmem__idle_reset(h, &w);
		}
	}
}

/* ---- handle ------------------------------------------------------------ */

/*
 * Attaches to the agent's segment (NULL: "/rdmem"). Fails with
 * -ECONNREFUSED when no agent runs there, -EINVAL for a bad name.
 */
static inline int rdmem_open(const char *name, rdmem_t **out)
{
	rdmem_t *h = (rdmem_t *)calloc(1, sizeof(*h));
	struct rdmem_att *a;
	int rc;

	if (!h)
		return -ENOMEM;
	atomic_flag_clear(&h->lock);
	h->timeout_ms = RDMEM_DEFAULT_TIMEOUT_MS;
	{
		cpu_set_t set;

		h->single_cpu =
		    sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) == 1;
	}
	if (rdmem_shm_name_norm(name ? name : RDMEM_SHM_DEFAULT_NAME, h->name, sizeof(h->name))) {
		free(h);
		return -EINVAL;
	}
	a = rdmem__att_get(h, &rc);
	if (!a) {
		free(h);
		return rc;
	}
	rdmem__att_put(a);
	*out = h;
	return 0;
}

/* Detaches. Every submitted call must have finished (polled or waited). */
static inline void rdmem_close(rdmem_t *h)
{
	if (!h)
		return;
	if (h->att)
		rdmem__att_put(h->att);
	free(h);
}

static inline void rdmem_set_timeout(rdmem_t *h, uint32_t ms)
{
	h->timeout_ms = ms ? ms : RDMEM_DEFAULT_TIMEOUT_MS;
}

/* Geometry of the current attachment (0 when detached). */
static inline uint32_t rdmem__geom_field(rdmem_t *h, int which)
{
	struct rdmem_att *a;
	uint32_t v;
	int rc;

	a = rdmem__att_get(h, &rc);
	if (!a)
		return 0;
	v = which == 0 ? a->geom.slots : a->geom.max_value;
	rdmem__att_put(a);
	return v;
}

/* Calls one handle can have in flight at once. */
static inline uint32_t rdmem_slots(rdmem_t *h)
{
	return rdmem__geom_field(h, 0);
}

/* Largest value (or image chunk) a call may carry. */
static inline uint32_t rdmem_max_value(rdmem_t *h)
{
	return rdmem__geom_field(h, 1);
}

static inline void rdmem_get_counters(rdmem_t *h, struct rdmem_counters *out)
{
	out->calls = atomic_load_explicit(&h->n_calls, memory_order_relaxed);
	out->timeouts = atomic_load_explicit(&h->n_timeouts, memory_order_relaxed);
	out->late = atomic_load_explicit(&h->n_late, memory_order_relaxed);
	out->shutdowns = atomic_load_explicit(&h->n_shutdowns, memory_order_relaxed);
	out->reattach = atomic_load_explicit(&h->n_reattach, memory_order_relaxed);
	out->bad_replies = atomic_load_explicit(&h->n_bad, memory_order_relaxed);
}

static inline const char *rdmem_strerror(int rc)
{
	switch (rc) {
	case 0:
		return "ok";
	case -ENOENT:
		return "not found";
	case -ECONNREFUSED:
		return "no rdmem agent is running on this segment";
	case -ESHUTDOWN:
		return "the agent stopped or restarted during the call";
	case -EUSERS:
		return "every client entry of the agent's segment is taken";
	case -EPROTO:
		return "protocol error (not an rdmem segment, other version, or bad reply)";
	case -ENOBUFS:
		return "reply larger than the buffer";
	case -E2BIG:
		return "too big (over the configured maximum value size)";
	case -EINVAL:
		return "bad request";
	case -ETIMEDOUT:
		return "timed out";
	case -EHOSTUNREACH:
		return "no path to the server";
	case -EBADMSG:
		return "content check failed";
	case -EACCES:
		return "permission denied";
	default:
		return strerror(-rc);
	}
}

/* ---- one call per op --------------------------------------------------- */

static inline void rdmem__rpc_opts(struct rdmem_rpc *c, const struct rdmem_opts *o)
{
	if (o) {
		c->path = o->path;
		c->timeout_ms = o->timeout_ms;
	}
}

/* Runs c to completion and reports it in o->info. */
static inline int rdmem__run(rdmem_t *h, struct rdmem_rpc *c, const struct rdmem_opts *o)
{
	int rc;

	rdmem__rpc_opts(c, o);
	rc = rdmem_submit(h, c);
	if (rc == 0)
		rc = rdmem_wait(h, c);
	if (o && o->info) {
		o->info->path = c->rpath;
		o->info->status = c->status;
		o->info->latency_ns = c->latency_ns;
		o->info->late = c->late;
	}
	return rc;
}

/* Runs a call whose reply value, if any, is returned malloc'd in *out. */
static inline int rdmem__run_value(rdmem_t *h, struct rdmem_rpc *c, void **out, uint32_t *len,
				   const struct rdmem_opts *o)
{
	int rc = rdmem__run(h, c, o);

	if (rc) {
		rdmem_rpc_free(c);
		return rc;
	}
	*out = c->rval;
	if (len)
		*len = c->rlen;
	return 0;
}

static inline int rdmem_ping(rdmem_t *h, const struct rdmem_opts *o)
{
	struct rdmem_rpc c;
	int rc;

	rdmem_rpc_init(&c, RDMEM_OP_PING);
	rc = rdmem__run(h, &c, o);
	rdmem_rpc_free(&c);
	return rc;
}

/* Round trip through the ring to the front-door actor only (no server). */
static inline int rdmem_local_ping(rdmem_t *h, const struct rdmem_opts *o)
{
	struct rdmem_rpc c;
	int rc;

	rdmem_rpc_init(&c, RDMEM_SHM_OP_LOCAL_PING);
	rc = rdmem__run(h, &c, o);
	rdmem_rpc_free(&c);
	return rc;
}

/* *out: malloc'd copy of what the server echoed (NUL-terminated); free() it. */
static inline int rdmem_echo(rdmem_t *h, const void *in, uint32_t len, void **out,
			     uint32_t *out_len, const struct rdmem_opts *o)
{
	struct rdmem_rpc c;

	rdmem_rpc_init(&c, RDMEM_OP_ECHO);
	c.val = in;
	c.val_len = len;
	return rdmem__run_value(h, &c, out, out_len, o);
}

static inline int rdmem_put(rdmem_t *h, const void *key, uint32_t key_len, const void *val,
			    uint32_t val_len, const struct rdmem_opts *o)
{
	struct rdmem_rpc c;
	int rc;

	rdmem_rpc_init(&c, RDMEM_OP_KV_PUT);
	c.key = key;
	c.key_len = key_len;
	c.val = val;
	c.val_len = val_len;
	rc = rdmem__run(h, &c, o);
	rdmem_rpc_free(&c);
	return rc;
}

/* *val: malloc'd copy of the whole value (NUL after *len bytes); free() it. */
static inline int rdmem_get(rdmem_t *h, const void *key, uint32_t key_len, void **val,
			    uint32_t *len, const struct rdmem_opts *o)
{
	struct rdmem_rpc c;

	rdmem_rpc_init(&c, RDMEM_OP_KV_GET);
	c.key = key;
	c.key_len = key_len;
	return rdmem__run_value(h, &c, val, len, o);
}

/* Into the caller's buffer; -ENOBUFS with *len = the value's length when it does not fit. */
static inline int rdmem_get_into(rdmem_t *h, const void *key, uint32_t key_len, void *buf,
				 uint32_t cap, uint32_t *len, const struct rdmem_opts *o)
{
	struct rdmem_rpc c;
	int rc;

	rdmem_rpc_init(&c, RDMEM_OP_KV_GET);
	c.key = key;
	c.key_len = key_len;
	c.rbuf = buf;
	c.rcap = cap;
	rc = rdmem__run(h, &c, o);
	if (rc == 0 || rc == -ENOBUFS)
		*len = c.rlen;
	return rc;
}

static inline int rdmem_del(rdmem_t *h, const void *key, uint32_t key_len,
			    const struct rdmem_opts *o)
{
	struct rdmem_rpc c;
	int rc;

	rdmem_rpc_init(&c, RDMEM_OP_KV_DEL);
	c.key = key;
	c.key_len = key_len;
	rc = rdmem__run(h, &c, o);
	rdmem_rpc_free(&c);
	return rc;
}

/* MGET result: a validated blob ARRAY, one entry per key asked, in order. */
struct rdmem_mget {
	void *blob;
	uint32_t len;
	struct rdmem_blob_array arr;
};

/* Entry i: returns 1 and its bytes when the key exists, 0 when it is missing. */
static inline int rdmem_mget_value(const struct rdmem_mget *m, uint32_t i, const void **data,
				   uint32_t *len)
{
	uint32_t flags;

	rdmem_blob_array_get(&m->arr, i, data, len, &flags);
	return (flags & RDMEM_BLOB_PRESENT) != 0;
}

static inline void rdmem_mget_free(struct rdmem_mget *m)
{
	free(m->blob);
	m->blob = NULL;
}

/* Builds the request blob: an ARRAY of the n keys. */
static inline int rdmem__mget_request(const char *const *keys, const uint32_t *key_lens, uint32_t n,
				      void **blob, uint32_t *len)
{
	struct rdmem_blob_writer w = { NULL, 0, 0 };
	uint64_t bytes = 0;
	uint32_t i;

	for (i = 0; i < n; i++) {
		if (key_lens[i] > RDMEM_MAX_KEY)
			return -EINVAL;
		bytes += key_lens[i];
	}
	bytes = rdmem_blob_array_size(n, bytes);
	if (bytes > UINT32_MAX)
		return -E2BIG;
	*blob = malloc((size_t)bytes);
	if (!*blob)
		return -ENOMEM;
	/* Sized exactly above, so neither call can run out of room. */
	if (rdmem_blob_array_begin(&w, *blob, bytes, n))
		goto fail;
	for (i = 0; i < n; i++)
		if (rdmem_blob_array_set(&w, i, keys[i], key_lens[i], RDMEM_BLOB_PRESENT))
			goto fail;
	*len = rdmem_blob_finish(&w);
	return 0;
fail:
	free(*blob);
	return -E2BIG;
}

static inline int rdmem_mget(rdmem_t *h, const char *const *keys, const uint32_t *key_lens,
			     uint32_t n, struct rdmem_mget *out, const struct rdmem_opts *o)
{
	struct rdmem_rpc c;
	void *req;
	uint32_t req_len;
	int rc;

	memset(out, 0, sizeof(*out));
	if (n == 0)
		return -EINVAL;
	rc = rdmem__mget_request(keys, key_lens, n, &req, &req_len);
	if (rc)
		return rc;
	rdmem_rpc_init(&c, RDMEM_OP_KV_MGET);
	c.val = req;
	c.val_len = req_len;
	c.aux = n;
	rc = rdmem__run_value(h, &c, &out->blob, &out->len, o);
	free(req);
	if (rc)
		return rc;
	if (rdmem_blob_array_open(out->blob, out->len, &out->arr) || out->arr.count != n) {
		rdmem_mget_free(out);
		return -EPROTO;
	}
	return 0;
}

/* PROFILE result: a validated profile blob; read it with rdmem/blob.h accessors. */
struct rdmem_profile {
	void *blob;
	uint32_t len;
	struct rdmem_profile_view view;
};

static inline void rdmem_profile_free(struct rdmem_profile *p)
{
	free(p->blob);
	p->blob = NULL;
}

static inline int rdmem_profile(rdmem_t *h, uint64_t id, struct rdmem_profile *out,
				const struct rdmem_opts *o)
{
	struct rdmem_rpc c;
	char key[24];
	int rc, n = snprintf(key, sizeof(key), "%" PRIu64, id);

	memset(out, 0, sizeof(*out));
	rdmem_rpc_init(&c, RDMEM_OP_PROFILE);
	c.key = key;
	c.key_len = (uint32_t)n;
	c.args[0] = id;
	rc = rdmem__run_value(h, &c, &out->blob, &out->len, o);
	if (rc)
		return rc;
	if (rdmem_blob_profile_open(out->blob, out->len, &out->view) || out->view.id != id) {
		rdmem_profile_free(out);
		return -EPROTO;
	}
	return 0;
}

/* spec "big:<n>[k|m]": the server's deterministic object; *val malloc'd. */
static inline int rdmem_large_get(rdmem_t *h, const char *spec, void **val, uint32_t *len,
				  const struct rdmem_opts *o)
{
	struct rdmem_rpc c;
	uint64_t size;

	if (!spec || rdmem_big_parse(spec, strlen(spec), &size))
		return -EINVAL;
	rdmem_rpc_init(&c, RDMEM_OP_LARGE_GET);
	c.key = spec;
	c.key_len = (uint32_t)strlen(spec);
	return rdmem__run_value(h, &c, val, len, o);
}

/* 0 when val is exactly the object spec names, else -EBADMSG (or -EINVAL). */
static inline int rdmem_large_verify(const char *spec, const void *val, uint32_t len)
{
	uint64_t size;

	if (!spec || rdmem_big_parse(spec, strlen(spec), &size))
		return -EINVAL;
	if (size != len || rdmem_big_verify(size, 0, val, len) != len)
		return -EBADMSG;
	return 0;
}

struct rdmem_image_opts {
	uint32_t chunk_size; /* 0: RDMEM_IMAGE_CHUNK_DEFAULT; at most rdmem_max_value() */
	void (*progress)(void *arg, uint64_t done, uint64_t total);
	void *arg;
	uint64_t upload_id; /* out: the random id the upload used */
};

static inline uint64_t rdmem__random_id(void)
{
	static _Atomic uint64_t fallback;
	uint64_t id = 0;

	if (getrandom(&id, sizeof(id), GRND_NONBLOCK) != (ssize_t)sizeof(id) || !id)
		id = (rdmem_now_ns() ^ ((uint64_t)getpid() << 40)) +
		     atomic_fetch_add(&fallback, 0x9e3779b97f4a7c15ull);
	return id;
}

/*
 * Uploads len bytes as image key, in chunks through our slot: INIT on the
 * first, COMMIT (with the rolling hash of the whole image) on the last.
 * The server keeps nothing of an upload that fails.
 */
static inline int rdmem_image_put(rdmem_t *h, const char *key, const void *data, uint64_t len,
				  struct rdmem_image_opts *io, const struct rdmem_opts *o)
{
	uint32_t chunk = io && io->chunk_size ? io->chunk_size : RDMEM_IMAGE_CHUNK_DEFAULT;
	uint32_t max = rdmem_max_value(h);
	uint64_t id = rdmem__random_id(), hash = RDMEM_HASH_INIT, off = 0;
	int rc;

	if (!key || !*key || strlen(key) > RDMEM_MAX_KEY || (len && !data))
		return -EINVAL;
	if (len > UINT32_MAX)
		return -E2BIG;
	if (!max)
		return -ECONNREFUSED;
	if (chunk > max)
		return -E2BIG;
	if (io)
		io->upload_id = id;
	do {
		uint32_t n = (uint32_t)RDMEM_MIN((uint64_t)chunk, len - off);
		struct rdmem_image_args args = { id, (uint32_t)off, (uint32_t)len, 0 };
		struct rdmem_rpc c;

		rdmem_rpc_init(&c, RDMEM_OP_IMAGE_CHUNK);
		hash = rdmem_hash_update(hash, (const uint8_t *)data + off, n);
		c.flags = (uint16_t)((off == 0 ? RDMEM_F_IMG_INIT : 0) |
				     (off + n == len ? RDMEM_F_IMG_COMMIT : 0));
		if (off + n == len)
			args.hash = hash;
		memcpy(c.args, &args, sizeof(c.args));
		c.key = key;
		c.key_len = (uint32_t)strlen(key);
		c.val = (const uint8_t *)data + off;
		c.val_len = n;
		rc = rdmem__run(h, &c, o);
		rdmem_rpc_free(&c);
		if (rc)
			return rc;
		off += n;
		if (io && io->progress)
			io->progress(io->arg, off, len);
	} while (off < len);
	return 0;
}

/* Text (or JSON) reply ops: *text malloc'd and NUL-terminated. */
static inline int rdmem__text_op(rdmem_t *h, uint16_t op, int json, const char *arg, char **text,
				 uint32_t *len, const struct rdmem_opts *o)
{
	struct rdmem_rpc c;

	rdmem_rpc_init(&c, op);
	c.flags = json ? RDMEM_F_JSON : 0;
	if (arg) {
		c.key = arg;
		c.key_len = (uint32_t)strlen(arg);
	}
	return rdmem__run_value(h, &c, (void **)text, len, o);
}

/* The server's counters. */
static inline int rdmem_stats(rdmem_t *h, int json, char **text, uint32_t *len,
			      const struct rdmem_opts *o)
{
	return rdmem__text_op(h, RDMEM_OP_STATS, json, NULL, text, len, o);
}

/* The agent's telemetry (front door, sessions, paths). */
static inline int rdmem_agent_stats(rdmem_t *h, int json, char **text, uint32_t *len,
				    const struct rdmem_opts *o)
{
	return rdmem__text_op(h, RDMEM_SHM_OP_AGENT_STATS, json, NULL, text, len, o);
}

/* A runtime command for the agent (e.g. fault injection); its answer in *reply. */
static inline int rdmem_agent_ctl(rdmem_t *h, const char *cmd, char **reply, uint32_t *len,
				  const struct rdmem_opts *o)
{
	if (!cmd || !*cmd || strlen(cmd) > RDMEM_MAX_KEY)
		return -EINVAL;
	return rdmem__text_op(h, RDMEM_SHM_OP_AGENT_CTL, 0, cmd, reply, len, o);
}

#endif
