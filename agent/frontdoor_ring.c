/* frontdoor_ring.c - the agent's front-door actor (see agent/frontdoor.h):
 * the ring consumer. The segment's lifecycle (create, replace, destroy) is in
 * frontdoor_segment.c.
 *
 * One thread owns the consumer side of the SHM ring and the agent-private
 * view of every client: which slots the agent holds, how many calls are in
 * flight, whether the client died. Clients are peers: everything they write
 * (ring cells, client table, slot words, descriptors) is read once, copied,
 * and validated before use; nothing a client writes can make the agent read
 * or write outside the segment, or touch another client's slot.
 */
#include "agent/frontdoor_impl.h"

/* How much earlier than its client the agent gives a call up. */
#define RDMEM_AGENT_DEADLINE_MARGIN_NS 20000000ull

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/affinity.h"
#include "rdmem/idle.h"
#include "rdmem/util.h"
#include "shm/segment.h"

#define RDMEM_FD_BATCH	 64	      /* ring entries per round before other work */
#define RDMEM_FD_SCAN_NS 100000000ull /* dead-client scan period */
/* An orphan is taken on a second look at least this long after the first. */
#define RDMEM_FD_ORPHAN_GAP_NS 90000000ull
#define RDMEM_FD_CLOCK_ROUNDS  64 /* busy rounds between looks at the clock */
/*
 * Scans go on this long after the ring was last active: long enough for one
 * scan to see a slot whose entry a client overwrote, after which the scan
 * itself asks for the second look (scan_pending). Then the actor sleeps
 * until a producer or the door wakes it: an idle agent has no tick.
 */
#define RDMEM_FD_QUIET_NS (2 * RDMEM_FD_SCAN_NS)

static void rdmem_frontdoor_count(_Atomic uint64_t *counter)
{
	atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
}

/* Counts a refused entry and logs it, rate-limited so a hostile client cannot flood the log. */
__attribute__((format(printf, 2, 3))) static void rdmem_frontdoor_refuse(struct rdmem_frontdoor *fd,
									 const char *fmt, ...)
{
	uint64_t n = atomic_fetch_add_explicit(&fd->n_bad, 1, memory_order_relaxed) + 1;
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	rdmem_warn_limited("front door %s: refused entry: %s (%" PRIu64 " refused so far)",
			   fd->name, msg, n);
}

/* ---- completion -------------------------------------------------------- */

static struct rdmem_shm_slot *rdmem_frontdoor_slot(struct rdmem_frontdoor *fd, uint32_t c,
						   uint32_t s)
{
	return rdmem_shm_slot_at(fd->base, &fd->geom, c, s);
}

/* Fills the slot's reply descriptor from a completion that passed the checks. */
static void rdmem_frontdoor_write_reply(struct rdmem_shm_slot *slot,
					const struct rdmem_agent_call *call,
					const struct rdmem_agent_reply *rep)
{
	struct rdmem_desc d;

	memset(&d, 0, sizeof(d));
	d.seq = call->slot_seq;
	d.op = call->req.op;
	d.flags = rep->flags;
	d.status = rep->status;
	d.path = call->path;
	d.val_len = rep->val_len;
	d.data_off = rep->data_off;
	d.aux = rep->aux;
	d.req_id = call->req.req_id;
	memcpy(d.args.raw, rep->args, sizeof(d.args.raw));
	memcpy(&slot->rep, &d, sizeof(d));
}

/*
 * Client wake-ups a thread holds back until rdmem_frontdoor_flush_wakes()
 * (docs/architecture.md "One thread fewer per call"). Per thread: a session
 * actor that wakes a client in the middle of its round, holding its token,
 * is preempted by that client on a shared CPU, and the client's next call
 * then finds the token held and crosses threads after all.
 */
#define RDMEM_FD_WAKES_MAX 64 /* a round's completions; past it, at once */

struct rdmem_fd_wakes {
	int defer;
	unsigned n;
	_Atomic uint32_t *word[RDMEM_FD_WAKES_MAX];
};

static _Thread_local struct rdmem_fd_wakes rdmem_fd_wakes;

void rdmem_frontdoor_defer_wakes(void)
{
	rdmem_fd_wakes.defer = 1;
}

/*
 * A word may be unmapped by now (its client's area given back): the wake
 * then fails with EFAULT or reaches a word nobody waits on, and a waiter on
 * a word reused meanwhile takes it as the spurious wake-up every futex
 * waiter allows for. The state word itself changed before the wake was put
 * off (the release CAS in rdmem_frontdoor_publish()), so no wait goes to
 * sleep on it; only its end is later.
 */
void rdmem_frontdoor_flush_wakes(void)
{
	struct rdmem_fd_wakes *w = &rdmem_fd_wakes;

	for (unsigned i = 0; i < w->n; i++)
		rdmem_futex_wake(w->word[i], 1);
	w->n = 0;
}

static void rdmem_frontdoor_wake(_Atomic uint32_t *word)
{
	struct rdmem_fd_wakes *w = &rdmem_fd_wakes;

	if (w->defer && w->n < RDMEM_FD_WAKES_MAX)
		w->word[w->n++] = word;
	else
		rdmem_futex_wake(word, 1);
}

/*
 * Hands the slot back: TAKEN -> DONE (wake the client if it sleeps), or
 * ABANDONED -> FREE when the client gave up. Any other phase means the client
 * rewrote its own slot word while we held it; we leave it alone.
 */
static int rdmem_frontdoor_publish(struct rdmem_frontdoor *fd, struct rdmem_shm_slot *slot)
{
	uint32_t st = atomic_load_explicit(&slot->state, memory_order_relaxed);

	for (;;) {
		uint32_t phase = RDMEM_SLOT_PHASE(st), next;

		if (phase == RDMEM_SLOT_TAKEN)
			next = RDMEM_SLOT_DONE;
		else if (phase == RDMEM_SLOT_ABANDONED)
			next = RDMEM_SLOT_FREE;
		else
			return -EPROTO;
		/*
		 * Release: the reply descriptor and value bytes (DONE), or our
		 * last access to the payload (FREE), happen before the client's
		 * acquire load that sees the new phase in libclient.
		 */
		if (atomic_compare_exchange_weak_explicit(
			&slot->state, &st, next, memory_order_release, memory_order_relaxed)) {
			if (next == RDMEM_SLOT_FREE)
				rdmem_frontdoor_count(&fd->n_dropped);
			else if (st & RDMEM_SLOT_WAITING)
				rdmem_frontdoor_wake(&slot->state);
			return 0;
		}
	}
}

void rdmem_frontdoor_complete(struct rdmem_frontdoor *fd, struct rdmem_agent_call *call,
			      const struct rdmem_agent_reply *rep)
{
	uint32_t c = call->client, s = call->slot;
	struct rdmem_agent_reply fixed = *rep;
	struct rdmem_fd_client *cl;
	struct rdmem_shm_slot *slot;
	uint64_t bit = 1ull << s;

	if (call->join) { /* a part of a split call: the router merges it */
		call->join(call, rep);
		return;
	}
	if (c >= fd->geom.clients || s >= fd->geom.slots ||
	    call != &fd->calls[(size_t)c * fd->geom.slots + s]) {
		rdmem_err(
		    "front door %s: completion of a call that is not ours (client %u slot %u)",
		    fd->name, c, s);
		return;
	}
	cl = &fd->clients[c];
	if (!(atomic_load_explicit(&cl->held, memory_order_relaxed) & bit)) {
		rdmem_err("front door %s: second completion of client %u slot %u ignored", fd->name,
			  c, s);
		return;
	}
	if (fixed.status >= RDMEM_S__COUNT || fixed.data_off > fd->geom.payload_cap ||
	    fixed.val_len > fd->geom.payload_cap - fixed.data_off) {
		rdmem_err("front door %s: reply for client %u slot %u out of the slot (status %u, "
			  "%u bytes at %u, capacity %u): sent as an I/O error",
			  fd->name, c, s, fixed.status, fixed.val_len, fixed.data_off,
			  fd->geom.payload_cap);
		memset(&fixed, 0, sizeof(fixed));
		fixed.status = RDMEM_S_IO;
	}
	slot = rdmem_frontdoor_slot(fd, c, s);
	if (atomic_load_explicit(&cl->dead, memory_order_relaxed)) {
		rdmem_frontdoor_count(&fd->n_dropped); /* reclaim resets the slot */
		atomic_fetch_and_explicit(&cl->held, ~bit, memory_order_relaxed);
	} else {
		rdmem_frontdoor_write_reply(slot, call, &fixed);
		/*
		 * Not held any more before the slot changes hands: once the
		 * client sees DONE it may resubmit the slot at once, and the
		 * front-door thread must then take it. Relaxed: the release
		 * CAS in publish orders it before the client's resubmission.
		 */
		atomic_fetch_and_explicit(&cl->held, ~bit, memory_order_relaxed);
		if (rdmem_frontdoor_publish(fd, slot)) {
			rdmem_frontdoor_refuse(
			    fd, "client %u rewrote slot %u while the agent held it", c, s);
			/* Scored by the actor: the score is its alone. */
			atomic_fetch_add_explicit(&cl->late_strikes, 1, memory_order_relaxed);
		}
	}
	/*
	 * Release: pairs with the acquire load in the dead-client scan, which
	 * resets the slots only after every completion finished with them.
	 */
	atomic_fetch_sub_explicit(&cl->inflight, 1, memory_order_release);
}

void rdmem_frontdoor_complete_status(struct rdmem_frontdoor *fd, struct rdmem_agent_call *call,
				     uint16_t status)
{
	struct rdmem_agent_reply rep;

	memset(&rep, 0, sizeof(rep));
	rep.status = status;
	rdmem_frontdoor_complete(fd, call, &rep);
}

/* ---- cutting off a misbehaving client ---------------------------------- */

static void rdmem_frontdoor_mark_dead(struct rdmem_frontdoor *fd, uint32_t c, int32_t pid);

/*
 * A misbehaviour found in client c's table entry or in a ring entry naming
 * c (the common part, shm/segment.h) is c's only when no other user could
 * have written it: every client maps the common part, so this holds while
 * every uid ever handed the segment, root's and ours aside, is c's own.
 * (One found in c's slots is c's: only c maps its area.) A process of c's uid could
 * kill c outright, so framing it gains that process nothing; a process of
 * another uid never gets c cut off. See docs/architecture.md.
 */
static int rdmem_frontdoor_attributable(const struct rdmem_frontdoor *fd, uint32_t c)
{
	/* Acquire: pairs with the door's release stores in rdmem_door_writer(),
	 * made before any memfd left; a uid recorded since then changes the
	 * answer at once. */
	int64_t w = atomic_load_explicit(&fd->door.writer_uid, memory_order_acquire);

	if (atomic_load_explicit(&fd->door.writers_mixed, memory_order_acquire))
		return 0;
	/* Relaxed: stored before the claim the caller saw (acquire there). */
	return w < 0 ||
	       w == (int64_t)atomic_load_explicit(&fd->clients[c].uid, memory_order_relaxed);
}

/* Leaks one strike per RDMEM_FD_STRIKE_DECAY_NS since the last leak. */
static void rdmem_frontdoor_leak(struct rdmem_fd_client *cl, uint64_t now)
{
	uint64_t n;

	if (!cl->score || now < cl->score_ns) {
		cl->score = 0;
		cl->score_ns = now;
		return;
	}
	n = (now - cl->score_ns) / RDMEM_FD_STRIKE_DECAY_NS;
	cl->score = n >= cl->score ? 0 : cl->score - n;
	cl->score_ns = cl->score ? cl->score_ns + n * RDMEM_FD_STRIKE_DECAY_NS : now;
}

/* Disconnects client c as if it had died; the door closes its connection. */
static void rdmem_frontdoor_cut(struct rdmem_frontdoor *fd, uint32_t c, uint64_t claim,
				const char *why)
{
	struct rdmem_fd_client *cl = &fd->clients[c];
	int32_t pid = (int32_t)(uint32_t)claim;

	rdmem_frontdoor_count(&fd->n_cut_off);
	rdmem_warn_limited("front door %s: client %u (pid %d, uid %u) cut off: %" PRIu64
			   " misbehaviours faster than one a second, past --client-strikes %u "
			   "(last: %s)",
			   fd->name, c, pid, atomic_load_explicit(&cl->uid, memory_order_relaxed),
			   cl->score, fd->client_strikes, why);
	/* Its owner as the scan knows it: a scan that had not seen this claim
	 * yet would take it for a new owner and undo the mark below. */
	if (cl->pid != pid || cl->gen != (uint32_t)(claim >> 32)) {
		cl->pid = pid;
		cl->gen = (uint32_t)(claim >> 32);
		cl->start_ticks = pid > 0 ? rdmem_frontdoor_proc_start(pid) : 0;
	}
	rdmem_frontdoor_mark_dead(fd, c, pid);
	/* Release: pairs with the door's acquire load; it closes the connection. */
	atomic_store_explicit(&cl->cut, 1, memory_order_release);
	rdmem_door_nudge(fd);
}

/*
 * Scores one misbehaviour naming client c, when attributable to it (actor
 * thread). own: found in c's own area, which nobody else maps.
 */
static void rdmem_frontdoor_strike(struct rdmem_frontdoor *fd, uint32_t c, const char *why, int own)
{
	struct rdmem_fd_client *cl;
	uint64_t claim;

	if (!fd->client_strikes || c >= fd->geom.clients)
		return;
	cl = &fd->clients[c];
	/* Acquire: pairs with the door's release store of claim (uid before it). */
	claim = atomic_load_explicit(&cl->claim, memory_order_acquire);
	if (!claim || atomic_load_explicit(&cl->dead, memory_order_relaxed))
		return; /* nobody to blame, or already on its way out */
	if (!own && !rdmem_frontdoor_attributable(fd, c)) {
		rdmem_frontdoor_count(&fd->n_unattributed);
		return;
	}
	rdmem_frontdoor_count(&fd->n_strikes);
	rdmem_frontdoor_leak(cl, rdmem_now_ns());
	if (++cl->score > fd->client_strikes)
		rdmem_frontdoor_cut(fd, c, claim, why);
}

/*
 * An entry for slot s of c found the slot not SUBMITTED or held by us. That
 * is what an honest producer's entry meets when it came so late that the
 * orphan scan took its slot first (a process preempted or stopped between
 * its slot word and its ring cell, which a loaded host does every so often):
 * the first such entry after a scan take is no refusal and no strike, only
 * a count. Returns 1 when the entry was that one.
 */
static int rdmem_frontdoor_late_entry(struct rdmem_frontdoor *fd, uint32_t c, uint32_t s)
{
	struct rdmem_fd_client *cl = &fd->clients[c];
	uint64_t bit = 1ull << s;

	if (!(cl->orphan_taken & bit))
		return 0;
	cl->orphan_taken &= ~bit;
	rdmem_frontdoor_count(&fd->n_late_entries);
	return 1;
}

/* Strikes completing threads found (a slot rewritten while held), on the actor. */
static void rdmem_frontdoor_late_strikes(struct rdmem_frontdoor *fd, uint32_t c)
{
	uint32_t n =
	    atomic_exchange_explicit(&fd->clients[c].late_strikes, 0, memory_order_relaxed);

	while (n--)
		rdmem_frontdoor_strike(fd, c, "rewrote a slot the agent held", 1);
}

/* ---- taking calls ------------------------------------------------------ */

/* Checks the copied request; returns RDMEM_S_OK or the status to refuse it with. */
static uint16_t rdmem_frontdoor_check_call(struct rdmem_frontdoor *fd, uint32_t c,
					   const struct rdmem_agent_call *call, const char **why)
{
	const struct rdmem_desc *d = &call->req;

	if (!rdmem_shm_op_allowed(d->op))
		return *why = "unknown or agent-only op", RDMEM_S_BAD_REQUEST;
	/* Acquire: pairs with the door's release store, made before it handed
	 * this client its entry (and so before any call of its could come). */
	if (d->op == RDMEM_SHM_OP_AGENT_CTL &&
	    !atomic_load_explicit(&fd->clients[c].admin, memory_order_acquire)) {
		rdmem_frontdoor_count(&fd->n_ctl_denied);
		return *why = "agent-ctl needs root, the agent's user or --admin-group",
		       RDMEM_S_DENIED;
	}
	if (d->flags & ~RDMEM_SHM_REQ_FLAGS)
		return *why = "unknown request flags", RDMEM_S_BAD_REQUEST;
	if (call->forced_path >= RDMEM_PATH__COUNT)
		return *why = "unknown path", RDMEM_S_BAD_REQUEST;
	if (d->key_len > RDMEM_MAX_KEY)
		return *why = "key longer than the key area", RDMEM_S_BAD_REQUEST;
	if (d->val_len > fd->geom.max_value)
		return *why = "value over max_value", RDMEM_S_TOO_BIG;
	return RDMEM_S_OK;
}

/* Fills the call table entry of (c, s) from the slot the agent now holds. */
static struct rdmem_agent_call *rdmem_frontdoor_fill_call(struct rdmem_frontdoor *fd, uint32_t c,
							  uint32_t s, uint64_t now)
{
	struct rdmem_shm_slot *slot = rdmem_frontdoor_slot(fd, c, s);
	struct rdmem_agent_call *call = &fd->calls[(size_t)c * fd->geom.slots + s];
	uint64_t deadline = slot->deadline_ns;
	uint8_t *payload = rdmem_shm_payload(slot);

	memset(call, 0, sizeof(*call));
	/* One copy: the client cannot change what we validate and use. */
	memcpy(&call->req, &slot->req, sizeof(call->req));
	call->slot_seq = slot->seq;
	call->forced_path = slot->path;
	call->path = call->forced_path;
	call->req.seq = call->slot_seq;
	call->req.path = call->forced_path;
	call->req.state = 0;
	call->payload = payload;
	call->payload_cap = fd->geom.payload_cap;
	call->key = payload;
	call->val = payload + RDMEM_SHM_VALUE_OFF;
	call->start_ns = now;
	/* A past deadline stays (the call expires); none or too far is capped. */
	if (!deadline || (deadline > now && deadline - now > RDMEM_SHM_MAX_TIMEOUT_NS))
		deadline = now + RDMEM_SHM_MAX_TIMEOUT_NS;
	/*
	 * The agent gives up a little before the client does, so the client
	 * hears why (-EHOSTUNREACH: no server) instead of a bare -ETIMEDOUT.
	 */
	if (deadline > now && deadline - now > 2 * RDMEM_AGENT_DEADLINE_MARGIN_NS)
		deadline -= RDMEM_AGENT_DEADLINE_MARGIN_NS;
	call->deadline_ns = deadline;
	call->client = (uint16_t)c;
	call->slot = (uint16_t)s;
	return call;
}

/*
 * Takes slot (c, s) from SUBMITTED to TAKEN. Returns 1 when the agent now
 * holds it, 0 when an abandoned slot was handed back, -1 when nothing was
 * taken (a refusal counted, or the scan found the slot withdrawn).
 */
static int rdmem_frontdoor_take_slot(struct rdmem_frontdoor *fd, uint32_t c, uint32_t s,
				     int scanned)
{
	struct rdmem_shm_slot *slot = rdmem_frontdoor_slot(fd, c, s);
	struct rdmem_fd_client *cl = &fd->clients[c];
	/* Acquire: pairs with the client's release store of SUBMITTED/ABANDONED. */
	uint32_t st = atomic_load_explicit(&slot->state, memory_order_acquire);

	for (;;) {
		uint32_t phase = RDMEM_SLOT_PHASE(st);

		if (phase == RDMEM_SLOT_ABANDONED) {
			/* Given up before we took it: nobody else holds it, hand it back.
			 * Relaxed: the agent never touched the payload. */
			if (atomic_compare_exchange_strong_explicit(
				&slot->state, &st, RDMEM_SLOT_FREE, memory_order_relaxed,
				memory_order_relaxed))
				rdmem_frontdoor_count(&fd->n_dropped);
			else
				continue;
			return 0;
		}
		if (phase != RDMEM_SLOT_SUBMITTED ||
		    (st & ~(RDMEM_SLOT_WAITING | RDMEM_SLOT_NO_ENTRY | 0xffu))) {
			/* The scan saw SUBMITTED; the client may since have
			 * withdrawn it (ring full till its deadline): no entry,
			 * nothing to refuse. */
			if (scanned || rdmem_frontdoor_late_entry(fd, c, s))
				return -1;
			rdmem_frontdoor_refuse(
			    fd, "client %u slot %u is in state %#x, not submitted", c, s, st);
			rdmem_frontdoor_strike(fd, c, "entry for a slot not submitted", 0);
			return -1;
		}
		/* Relaxed is enough here: attach happened long before submit. The
		 * door's claim, not the pid word a client can write, says who owns it. */
		if (!atomic_load_explicit(&cl->claim, memory_order_relaxed) ||
		    atomic_load_explicit(&cl->dead, memory_order_relaxed)) {
			rdmem_frontdoor_refuse(fd, "client %u is not attached (slot %u)", c, s);
			return -1;
		}
		/* Acquire: the request bytes the client wrote before SUBMITTED. */
		if (atomic_compare_exchange_weak_explicit(
			&slot->state, &st, RDMEM_SLOT_TAKEN | (st & RDMEM_SLOT_WAITING),
			memory_order_acquire, memory_order_acquire))
			return 1;
	}
}

/*
 * Takes the call in slot (c, s), from a ring entry or (scanned) from the
 * orphan scan. Returns 1 when the slot was taken or handed back (so a late
 * entry for it may still come), else 0.
 */
static int rdmem_frontdoor_take(struct rdmem_frontdoor *fd, uint32_t c, uint32_t s, int scanned)
{
	struct rdmem_agent_call *call;
	struct rdmem_fd_client *cl;
	const char *why = NULL;
	uint64_t now, bit, claim;
	uint16_t status;
	int taken;

	rdmem_frontdoor_count(&fd->n_calls);
	if (c >= fd->geom.clients || s >= fd->geom.slots) {
		rdmem_frontdoor_refuse(fd, "client %u slot %u outside the %u x %u table", c, s,
				       fd->geom.clients, fd->geom.slots);
		return 0;
	}
	cl = &fd->clients[c];
	bit = 1ull << s;
	/* Acquire: pairs with the door's release of claim, after it mapped c's
	 * area. Nothing of a free entry is mapped: its slots are not looked at.
	 * Only this thread clears claim (reclaim), so the area stays while we
	 * hold the call. */
	claim = atomic_load_explicit(&cl->claim, memory_order_acquire);
	if (!claim) {
		rdmem_frontdoor_refuse(fd, "client %u is not attached (slot %u)", c, s);
		return 0;
	}
	if (atomic_load_explicit(&cl->held, memory_order_relaxed) & bit) {
		if (rdmem_frontdoor_late_entry(fd, c, s))
			return 0;
		rdmem_frontdoor_refuse(fd, "client %u slot %u is already held by the agent", c, s);
		rdmem_frontdoor_strike(fd, c, "entry for a slot the agent holds", 0);
		return 0;
	}
	taken = rdmem_frontdoor_take_slot(fd, c, s, scanned);
	if (taken <= 0)
		return taken == 0;
	atomic_fetch_or_explicit(&cl->held, bit, memory_order_relaxed);
	atomic_fetch_add_explicit(&cl->inflight, 1, memory_order_relaxed);
	now = rdmem_now_ns();
	call = rdmem_frontdoor_fill_call(fd, c, s, now);
	/* Relaxed: stored before the claim we loaded with acquire. */
	call->client_serial = atomic_load_explicit(&cl->serial, memory_order_relaxed);
	status = rdmem_frontdoor_check_call(fd, c, call, &why);
	if (status != RDMEM_S_OK) {
		rdmem_frontdoor_refuse(fd, "client %u slot %u: %s (op %u, key %u B, value %u B)", c,
				       s, why, call->req.op, call->req.key_len, call->req.val_len);
		/* Not scored: each is one answered call, as cheap as any, and
		 * an honest caller can send them (a newer library's op to an
		 * older agent, agent-ctl without the right, a value too big). */
		rdmem_frontdoor_complete_status(fd, call, status);
	} else if (call->deadline_ns <= now) {
		rdmem_frontdoor_count(&fd->n_expired);
		rdmem_frontdoor_complete_status(fd, call, RDMEM_S_TIMEOUT);
	} else if (call->req.op == RDMEM_SHM_OP_LOCAL_PING) {
		rdmem_frontdoor_count(&fd->n_local_pings);
		rdmem_frontdoor_complete_status(fd, call, RDMEM_S_OK);
	} else {
		fd->batch_open = 1;
		fd->submit(fd->submit_ctx, call);
	}
	return 1;
}

/* The calls taken since the last call of this went to submit: say the batch ended. */
static void rdmem_frontdoor_end_batch(struct rdmem_frontdoor *fd)
{
	if (!fd->batch_open)
		return;
	fd->batch_open = 0;
	if (fd->batch_end)
		fd->batch_end(fd->submit_ctx);
}

/* Adds what the consumer counted since before to counter; returns the difference. */
static uint64_t rdmem_frontdoor_account(_Atomic uint64_t *counter, uint64_t now, uint64_t before)
{
	if (now != before)
		atomic_fetch_add_explicit(counter, now - before, memory_order_relaxed);
	return now - before;
}

/* Counts and logs (rate-limited: clients provoke these) what the last round repaired. */
static void rdmem_frontdoor_ring_report(struct rdmem_frontdoor *fd,
					const struct rdmem_ring_consumer *before)
{
	const struct rdmem_ring_consumer *now = &fd->cons;
	uint64_t n;

	rdmem_frontdoor_account(&fd->n_skipped, now->skipped, before->skipped);
	if ((n = rdmem_frontdoor_account(&fd->n_stalls, now->stalls, before->stalls)))
		rdmem_warn_limited(
		    "front door %s: skipped ring positions claimed but not published "
		    "within %" PRIu64 " us (producer stalled, died or hostile; %" PRIu64
		    " skipped so far)",
		    fd->name, fd->cons.skip_after_ns / 1000,
		    atomic_load_explicit(&fd->n_skipped, memory_order_relaxed));
	if ((n = rdmem_frontdoor_account(&fd->n_repaired, now->repaired, before->repaired)))
		rdmem_warn_limited("front door %s: repaired %" PRIu64
				   " ring cell(s) a client overwrote",
				   fd->name, n);
	if ((n = rdmem_frontdoor_account(&fd->n_head_repaired, now->head_repaired,
					 before->head_repaired)))
		rdmem_warn_limited("front door %s: ring head out of [tail, tail + %" PRIu64
				   "] (a client wrote it): reset to the tail",
				   fd->name, fd->ring.size);
}

/* Takes up to one batch of entries; returns how many. */
static int rdmem_frontdoor_drain(struct rdmem_frontdoor *fd)
{
	struct rdmem_ring_consumer before = fd->cons;
	uint16_t c, s;
	int n;

	for (n = 0; n < RDMEM_FD_BATCH; n++) {
		if (rdmem_ring_pop(&fd->ring, &fd->cons, &c, &s) != 1)
			break;
		rdmem_frontdoor_take(fd, c, s, 0);
	}
	rdmem_frontdoor_end_batch(fd);
	if (fd->cons.skipped != before.skipped || fd->cons.repaired != before.repaired ||
	    fd->cons.head_repaired != before.head_repaired) {
		rdmem_frontdoor_ring_report(fd, &before);
		fd->active = 1;
	}
	fd->active |= n > 0;
	return n;
}

/*
 * Takes the slots client c marked RDMEM_SLOT_NO_ENTRY: it found the ring
 * full and asked on its connection (shm/door.h). The mark is the client's
 * own word in its own area, so unlike an orphan (two looks 90 ms apart, in
 * case its entry is only late) the slot is taken at once: no entry comes.
 */
static int rdmem_frontdoor_take_client_marked(struct rdmem_frontdoor *fd, uint32_t c)
{
	struct rdmem_fd_client *cl = &fd->clients[c];
	uint64_t held = atomic_load_explicit(&cl->held, memory_order_relaxed);
	uint32_t s;
	int taken = 0;

	/* Acquire: pairs with the door's release of claim, after it mapped c's
	 * area. A client found dead (its calls are dropped) is left to its
	 * reclaim: taking its slots would only refuse them. */
	if (!atomic_load_explicit(&cl->claim, memory_order_acquire) ||
	    atomic_load_explicit(&cl->dead, memory_order_relaxed))
		return 0;
	for (s = 0; s < fd->geom.slots; s++) {
		/* Acquire: pairs with the client's release CAS that marked it
		 * (take_slot loads it again before it takes the slot). */
		uint32_t st = atomic_load_explicit(&rdmem_frontdoor_slot(fd, c, s)->state,
						   memory_order_acquire);

		if (RDMEM_SLOT_PHASE(st) != RDMEM_SLOT_SUBMITTED || !(st & RDMEM_SLOT_NO_ENTRY) ||
		    (held & (1ull << s)))
			continue;
		if (rdmem_frontdoor_take(fd, c, s, 1)) {
			rdmem_frontdoor_count(&fd->n_no_entry);
			taken++;
		}
	}
	return taken;
}

/* Every client whose take request the door passed on: their marked slots. */
static int rdmem_frontdoor_take_marked(struct rdmem_frontdoor *fd)
{
	uint32_t c;
	int taken = 0;

	/* Acquire: pairs with the door's release store after it set a
	 * client's take_req (rdmem_door_ask_take). */
	if (!atomic_exchange_explicit(&fd->take_req, 0, memory_order_acquire))
		return 0;
	for (c = 0; c < fd->geom.clients; c++)
		if (atomic_exchange_explicit(&fd->clients[c].take_req, 0, memory_order_relaxed))
			taken += rdmem_frontdoor_take_client_marked(fd, c);
	rdmem_frontdoor_end_batch(fd);
	fd->active |= taken > 0;
	return taken;
}

/* ---- dead clients ------------------------------------------------------ */

/* Frees a dead client's entry once nothing of it is left in the agent or the ring. */
static void rdmem_frontdoor_reclaim(struct rdmem_frontdoor *fd, uint32_t c)
{
	struct rdmem_shm_client *entry = rdmem_shm_client_at(fd->base, &fd->geom, c);
	struct rdmem_fd_client *cl = &fd->clients[c];

	/* Its area goes: the next owner gets a fresh one, FREE slots and all. */
	rdmem_frontdoor_client_unmap(fd, c);
	atomic_store_explicit(&cl->held, 0, memory_order_relaxed);
	atomic_store_explicit(&cl->dead, 0, memory_order_relaxed);
	atomic_store_explicit(&cl->late_strikes, 0, memory_order_relaxed);
	atomic_store_explicit(&cl->pid_unwatched, 0, memory_order_relaxed);
	cl->orphan_taken = 0;
	cl->score = 0;
	cl->pid = 0;
	atomic_store_explicit(&entry->pid, 0, memory_order_relaxed);
	atomic_store_explicit(&cl->serial, 0, memory_order_relaxed); /* no attach */
	/*
	 * Release: the unmap and resets above happen before the door may hand
	 * the entry out again; pairs with its acquire load of claim.
	 */
	atomic_store_explicit(&cl->claim, 0, memory_order_release);
	rdmem_door_nudge(fd); /* it closes the dead client's connection */
	if (fd->released)
		fd->released(fd->released_ctx, c);
	rdmem_frontdoor_count(&fd->n_dead);
	rdmem_log_limited(RDMEM_LOG_INFO, "front door %s: reclaimed client %u of pid %d", fd->name,
			  c, cl->dead_pid);
}

/*
 * A client may overwrite a published ring entry of another: that call's slot
 * then stays SUBMITTED (or ABANDONED, once its client gave up) with no entry
 * to bring it to the agent. A slot in that state, not held by the agent,
 * with the same seq at two scans in a row (100 to 200 ms) is taken as if its
 * entry had come; an entry that does come later (its producer was only
 * preempted) finds it taken and is ignored (late_entries). So a lost entry
 * costs its call one scan period, not a timeout.
 */
static int rdmem_frontdoor_scan_orphans(struct rdmem_frontdoor *fd, uint32_t c, uint64_t now)
{
	struct rdmem_fd_client *cl = &fd->clients[c];
	uint64_t held = atomic_load_explicit(&cl->held, memory_order_relaxed), seen = 0;
	uint32_t s;
	int taken = 0;

	/*
	 * Two looks at least a scan period apart: a hang-up or an attach asks
	 * for an extra scan at once, and two scans microseconds apart would
	 * take the slot of a producer preempted for only that long.
	 */
	if (now - cl->orphan_scan_ns < RDMEM_FD_ORPHAN_GAP_NS)
		return 0;
	cl->orphan_scan_ns = now;

	for (s = 0; s < fd->geom.slots; s++) {
		struct rdmem_shm_slot *slot = rdmem_frontdoor_slot(fd, c, s);
		/*
		 * Acquire: pairs with the client's release store of SUBMITTED
		 * (ABANDONED is an RMW in its release sequence), so the seq it
		 * wrote before is what we read below.
		 */
		uint32_t phase =
		    RDMEM_SLOT_PHASE(atomic_load_explicit(&slot->state, memory_order_acquire));
		uint64_t bit = 1ull << s;

		if ((phase != RDMEM_SLOT_SUBMITTED && phase != RDMEM_SLOT_ABANDONED) ||
		    (held & bit))
			continue;
		if ((cl->orphan_seen & bit) && cl->orphan_seq[s] == slot->seq) {
			rdmem_frontdoor_count(&fd->n_orphans);
			rdmem_warn_limited(
			    "front door %s: client %u slot %u was submitted but its "
			    "ring entry never came (overwritten, or its producer stalled): "
			    "taken by the scan",
			    fd->name, c, s);
			if (rdmem_frontdoor_take(fd, c, s, 1)) {
				cl->orphan_taken |= bit;
				taken++;
			}
			continue;
		}
		seen |= bit;
		cl->orphan_seq[s] = slot->seq;
	}
	cl->orphan_seen = seen;
	return taken;
}

/* Marks client c dead as pid (its last owner): reclaimed once nothing of it is in flight. */
static void rdmem_frontdoor_mark_dead(struct rdmem_frontdoor *fd, uint32_t c, int32_t pid)
{
	struct rdmem_fd_client *cl = &fd->clients[c];

	atomic_store_explicit(&cl->dead, 1, memory_order_relaxed);
	cl->dead_pid = pid;
	cl->dead_head = atomic_load_explicit(&fd->ring.ctl->head, memory_order_relaxed);
	/* A head a client moved out of range would delay the reclaim for ever. */
	if (rdmem_ring_head_bad(&fd->ring, &fd->cons, cl->dead_head))
		cl->dead_head = fd->cons.tail;
}

/*
 * The pid word in the segment is the client's to scribble on; the door's
 * claim holds the pid the kernel reported. A word that differs is counted
 * and put back, and never decides anything.
 */
static void rdmem_frontdoor_pid_check(struct rdmem_frontdoor *fd, uint32_t c, int32_t owner)
{
	struct rdmem_shm_client *entry = rdmem_shm_client_at(fd->base, &fd->geom, c);
	int32_t word = atomic_load_explicit(&entry->pid, memory_order_relaxed);

	if (word == owner)
		return;
	rdmem_frontdoor_count(&fd->n_pid_forged);
	rdmem_warn_limited("front door %s: client %u's pid word was overwritten with %d; "
			   "restored to its owner, pid %d",
			   fd->name, c, word, owner);
	/* Relaxed: only the word itself changes hands. */
	atomic_compare_exchange_strong_explicit(&entry->pid, &word, owner, memory_order_relaxed,
						memory_order_relaxed);
	rdmem_frontdoor_strike(fd, c, "overwrote its pid word", 0);
}

/* Returns how many calls it took (lost entries, see scan_orphans). */
static int rdmem_frontdoor_scan_client(struct rdmem_frontdoor *fd, uint32_t c, uint64_t now)
{
	struct rdmem_fd_client *cl = &fd->clients[c];
	/* Acquire: pairs with the door's release store of claim, after it
	 * filled the entry. */
	uint64_t claim = atomic_load_explicit(&cl->claim, memory_order_acquire);
	int32_t pid = (int32_t)(uint32_t)claim;
	uint32_t gen = (uint32_t)(claim >> 32);
	int taken = 0;

	if (!claim)
		return 0; /* free: whatever its words say */
	if (pid != cl->pid || gen != cl->gen) {
		cl->pid = pid;
		cl->gen = gen;
		cl->start_ticks = pid > 0 ? rdmem_frontdoor_proc_start(pid) : 0;
		atomic_store_explicit(&cl->dead, 0, memory_order_relaxed);
	}
	if (!atomic_load_explicit(&cl->dead, memory_order_relaxed)) {
		rdmem_frontdoor_late_strikes(fd, c);
		rdmem_frontdoor_pid_check(fd, c, pid);
		/* Gone when its connection closed (rdmem_close, exit, kill), or
		 * its pid is: a forked child may still hold the connection. */
		if (atomic_load_explicit(&cl->gone, memory_order_relaxed) ||
		    !rdmem_frontdoor_pid_alive(pid, cl->start_ticks)) {
			/* Limited: a client can attach and leave in a loop. */
			rdmem_log_limited(RDMEM_LOG_INFO,
					  "front door %s: client %u (pid %d) is gone; reclaiming "
					  "its slots",
					  fd->name, c, pid);
			rdmem_frontdoor_mark_dead(fd, c, pid);
		}
	}
	if (!atomic_load_explicit(&cl->dead, memory_order_relaxed))
		taken = rdmem_frontdoor_scan_orphans(fd, c, now);
	/* Acquire: pairs with the release decrement at the end of complete(). */
	if (atomic_load_explicit(&cl->dead, memory_order_relaxed) &&
	    atomic_load_explicit(&cl->inflight, memory_order_acquire) == 0 &&
	    (int64_t)(fd->cons.tail - cl->dead_head) >= 0)
		rdmem_frontdoor_reclaim(fd, c);
	return taken;
}

/* The header as we formatted it? The plain words byte for byte, the atomic
 * ones (state, epoch) by atomic loads. */
static int rdmem_frontdoor_header_same(const struct rdmem_frontdoor *fd)
{
	const uint8_t *h = (const uint8_t *)fd->hdr;
	const size_t live = offsetof(struct rdmem_shm_header, state),
		     pid = offsetof(struct rdmem_shm_header, agent_pid),
		     after_epoch = offsetof(struct rdmem_shm_header, created_ns);

	return !memcmp(h, fd->hdr_own, live) &&
	       !memcmp(h + pid, fd->hdr_own + pid, sizeof(fd->hdr->agent_pid)) &&
	       !memcmp(h + after_epoch, fd->hdr_own + after_epoch,
		       sizeof(fd->hdr_own) - after_epoch) &&
	       /* Relaxed: a client's write or our own destroy(); nothing is read
		* through them. */
	       atomic_load_explicit(&fd->hdr->state, memory_order_relaxed) == RDMEM_SHM_RUNNING &&
	       atomic_load_explicit(&fd->hdr->epoch, memory_order_relaxed) == fd->epoch;
}

/*
 * The header words (state, epoch, identity and geometry) are ours; clients
 * no longer act on them, but tools and people read them. Put back once
 * found changed for a scan period unless another agent took our socket
 * (--shm-reset): it marks us CLOSED with a new epoch, then takes the path
 * well within that time, and its CLOSED must stand; the door thread then
 * hangs up on our clients (rdmem_door_taken). (Scans also run early when a
 * client leaves: hence the clock.)
 */
static void rdmem_frontdoor_header_check(struct rdmem_frontdoor *fd, uint64_t now)
{
	struct rdmem_shm_header *h = fd->hdr;
	const size_t live = offsetof(struct rdmem_shm_header, state);
	const size_t after_epoch = offsetof(struct rdmem_shm_header, created_ns);

	/* Closing, or retired by another agent: the header is left as it is,
	 * and asks for no further scan (hdr_bad_since 0). */
	if (rdmem_frontdoor_header_same(fd) ||
	    atomic_load_explicit(&fd->closing, memory_order_relaxed) ||
	    atomic_load_explicit(&fd->retired, memory_order_relaxed) || rdmem_door_taken(fd)) {
		fd->hdr_bad_since = 0;
		return;
	}
	if (!fd->hdr_bad_since)
		fd->hdr_bad_since = now;
	if (now - fd->hdr_bad_since < RDMEM_FD_SCAN_NS)
		return;
	memcpy(h, fd->hdr_own, live);
	memcpy(&h->agent_pid, fd->hdr_own + offsetof(struct rdmem_shm_header, agent_pid),
	       sizeof(h->agent_pid));
	memcpy((uint8_t *)h + after_epoch, fd->hdr_own + after_epoch,
	       sizeof(fd->hdr_own) - after_epoch);
	atomic_store_explicit(&h->epoch, fd->epoch, memory_order_relaxed);
	/* Release: pairs with the clients' acquire load of RUNNING; publishes
	 * the words put back above. */
	atomic_store_explicit(&h->state, RDMEM_SHM_RUNNING, memory_order_release);
	fd->hdr_bad_since = 0;
	rdmem_frontdoor_count(&fd->n_header_repaired);
	rdmem_warn_limited("front door %s: a client overwrote the segment header (state, epoch "
			   "or geometry); put back",
			   fd->name);
}

/*
 * Does client c need the next scan whatever the ring does? A slot seen
 * submitted with no entry (the second look takes it), an owner gone or
 * dead and not yet reclaimed, or an owner no pidfd watches.
 */
static int rdmem_frontdoor_look_again(struct rdmem_frontdoor *fd, uint32_t c)
{
	struct rdmem_fd_client *cl = &fd->clients[c];

	/* Relaxed: hints for when to scan next; a flag read late asks at
	 * worst for the scan after this one. */
	return atomic_load_explicit(&cl->claim, memory_order_relaxed) &&
	       (cl->orphan_seen || atomic_load_explicit(&cl->gone, memory_order_relaxed) ||
		atomic_load_explicit(&cl->dead, memory_order_relaxed) ||
		atomic_load_explicit(&cl->pid_unwatched, memory_order_relaxed));
}

/* Returns how many calls the scan took (lost entries). */
static int rdmem_frontdoor_scan(struct rdmem_frontdoor *fd, uint64_t now)
{
	uint32_t c;
	int taken = 0;

	rdmem_frontdoor_header_check(fd, now);
	/* One lstat a scan covers what the door's inotify watch cannot see (its
	 * directory removed or moved, then the path bound anew): the door
	 * looks, retires and hangs up. */
	if (!atomic_load_explicit(&fd->retired, memory_order_relaxed) && rdmem_door_taken(fd))
		rdmem_door_nudge(fd);
	fd->scan_pending = fd->hdr_bad_since != 0;
	for (c = 0; c < fd->geom.clients; c++) {
		taken += rdmem_frontdoor_scan_client(fd, c, now);
		/* Before the next client's system calls (/proc, kill, munmap):
		 * a session's token is not held across them. */
		rdmem_frontdoor_end_batch(fd);
		fd->scan_pending |= rdmem_frontdoor_look_again(fd, c);
	}
	fd->next_scan_ns = now + RDMEM_FD_SCAN_NS;
	return taken;
}

/* ---- the actor --------------------------------------------------------- */

/*
 * How long the actor may sleep: until the next scan while scans are due
 * (RDMEM_FD_QUIET_NS), until a stalled ring position must be skipped, or,
 * with neither, until woken (0: no limit).
 */
static uint64_t rdmem_frontdoor_sleep_ns(const struct rdmem_frontdoor *fd, uint64_t now)
{
	uint64_t t = UINT64_MAX;

	if (fd->scan_pending || now - fd->active_ns < RDMEM_FD_QUIET_NS)
		t = fd->next_scan_ns > now ? fd->next_scan_ns - now : 1;
	t = RDMEM_MIN(t, rdmem_ring_stall_left_ns(&fd->cons, now));
	return t == UINT64_MAX ? 0 : t;
}

/* Blocks on the doorbell until a producer rings, the door asks, a scan is
 * due, or a stall must be aged. */
static void rdmem_frontdoor_block(struct rdmem_frontdoor *fd)
{
	uint64_t timeout = rdmem_frontdoor_sleep_ns(fd, rdmem_now_ns());
	uint32_t bell;
	int busy;

	bell = rdmem_ring_sleep_begin(&fd->ring, &fd->cons, &busy);
	if (busy || atomic_load_explicit(&fd->stop, memory_order_acquire) ||
	    atomic_load_explicit(&fd->scan_req, memory_order_relaxed) ||
	    atomic_load_explicit(&fd->take_req, memory_order_relaxed)) {
		atomic_store_explicit(&fd->ring.ctl->sleeping, 0, memory_order_relaxed);
		return;
	}
	rdmem_ring_sleep(&fd->ring, bell, timeout);
}

static void *rdmem_frontdoor_main(void *arg)
{
	struct rdmem_frontdoor *fd = arg;
	struct rdmem_idle idle;
	uint32_t rounds = 0;

	/* Spinning pays only while the client can run on another CPU at the
	 * same time; pinned to one CPU, every spin delays the client we wait for. */
	rdmem_idle_init(&idle, rdmem_affinity_single_cpu());
	/* Acquire: pairs with the release store in destroy(). */
	while (!atomic_load_explicit(&fd->stop, memory_order_acquire)) {
		int n = rdmem_frontdoor_drain(fd);

		/* Relaxed look first: the exchange inside is the acquire. */
		if (atomic_load_explicit(&fd->take_req, memory_order_relaxed))
			n += rdmem_frontdoor_take_marked(fd);

		/* Spin phase: look at the ring only; no scan, no bookkeeping. */
		if (n == 0 && idle.spins < RDMEM_IDLE_SPINS) {
			rdmem_idle_step(&idle, fd->busy_poll);
			continue;
		}
		if (n == 0 || ++rounds % RDMEM_FD_CLOCK_ROUNDS == 0) {
			uint64_t now = rdmem_now_ns();

			if (fd->active) {
				fd->active_ns = now;
				fd->active = 0;
			}

			/* Acquire: pairs with the door's release of scan_req after
			 * it flagged a client gone. */
			if (now >= fd->next_scan_ns ||
			    atomic_exchange_explicit(&fd->scan_req, 0, memory_order_acquire))
				rdmem_frontdoor_scan(fd, now);
		}
		if (n > 0) {
			rdmem_idle_reset(&idle);
			continue;
		}
		if (!rdmem_idle_step(&idle, fd->busy_poll))
			continue;
		rdmem_frontdoor_block(fd);
		rdmem_idle_reset(&idle);
	}
	return NULL;
}

int rdmem_frontdoor_poll(struct rdmem_frontdoor *fd, rdmem_frontdoor_submit_fn submit, void *ctx,
			 int scan)
{
	int n;

	/* The consumer state belongs to one thread: the actor's, if it runs. */
	if (fd->started || !submit)
		return -EBUSY;
	fd->submit = submit;
	fd->submit_ctx = ctx;
	n = rdmem_frontdoor_drain(fd);
	n += rdmem_frontdoor_take_marked(fd);
	if (scan)
		n += rdmem_frontdoor_scan(fd, rdmem_now_ns()); /* calls taken, as drained ones */
	return n;
}

int rdmem_frontdoor_start(struct rdmem_frontdoor *fd, rdmem_frontdoor_submit_fn submit, void *ctx)
{
	int rc;

	if (!submit || fd->started)
		return -EINVAL;
	fd->submit = submit;
	fd->submit_ctx = ctx;
	fd->active_ns = rdmem_now_ns(); /* a first scan or two after start */
	fd->next_scan_ns = fd->active_ns + RDMEM_FD_SCAN_NS;
	rc = pthread_create(&fd->thread, NULL, rdmem_frontdoor_main, fd);
	if (rc) {
		rdmem_err("front door %s: cannot start its thread: %s", fd->name, strerror(rc));
		return -rc;
	}
	pthread_setname_np(fd->thread, "rdmem-frontdoor");
	fd->started = 1;
	return 0;
}

void rdmem_frontdoor_stop(struct rdmem_frontdoor *fd)
{
	if (!fd || !fd->started)
		return;
	/* Release: pairs with the actor loop's acquire load of stop. */
	atomic_store_explicit(&fd->stop, 1, memory_order_release);
	/* Rung until it ends: a client can write the doorbell back between
	 * our bump and the actor's futex wait, which loses one wake-up. */
	for (;;) {
		struct timespec until;

		rdmem_ring_bell(&fd->ring);
		clock_gettime(CLOCK_REALTIME, &until); /* pthread_timedjoin_np's clock */
		until.tv_nsec += 100000000;
		if (until.tv_nsec >= 1000000000) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
		if (pthread_timedjoin_np(fd->thread, NULL, &until) != ETIMEDOUT)
			break;
	}
	fd->started = 0;
}

/* ---- stats ------------------------------------------------------------- */

void rdmem_frontdoor_get_stats(struct rdmem_frontdoor *fd, struct rdmem_frontdoor_stats *out)
{
	uint32_t c;

	memset(out, 0, sizeof(*out));
	out->calls = atomic_load_explicit(&fd->n_calls, memory_order_relaxed);
	out->local_pings = atomic_load_explicit(&fd->n_local_pings, memory_order_relaxed);
	out->bad_entries = atomic_load_explicit(&fd->n_bad, memory_order_relaxed);
	out->skipped = atomic_load_explicit(&fd->n_skipped, memory_order_relaxed);
	out->repaired = atomic_load_explicit(&fd->n_repaired, memory_order_relaxed);
	out->stalls = atomic_load_explicit(&fd->n_stalls, memory_order_relaxed);
	out->head_repaired = atomic_load_explicit(&fd->n_head_repaired, memory_order_relaxed);
	out->pid_forged = atomic_load_explicit(&fd->n_pid_forged, memory_order_relaxed);
	out->header_repaired = atomic_load_explicit(&fd->n_header_repaired, memory_order_relaxed);
	out->orphans = atomic_load_explicit(&fd->n_orphans, memory_order_relaxed);
	out->no_entry = atomic_load_explicit(&fd->n_no_entry, memory_order_relaxed);
	out->take_reqs = atomic_load_explicit(&fd->n_take_reqs, memory_order_relaxed);
	out->late_entries = atomic_load_explicit(&fd->n_late_entries, memory_order_relaxed);
	out->dead_clients = atomic_load_explicit(&fd->n_dead, memory_order_relaxed);
	out->dropped = atomic_load_explicit(&fd->n_dropped, memory_order_relaxed);
	out->expired = atomic_load_explicit(&fd->n_expired, memory_order_relaxed);
	out->epoch = atomic_load_explicit(&fd->hdr->epoch, memory_order_relaxed);
	out->door_attached = atomic_load_explicit(&fd->door.n_attached, memory_order_relaxed);
	out->door_bad_hello = atomic_load_explicit(&fd->door.n_bad_hello, memory_order_relaxed);
	out->door_timeouts = atomic_load_explicit(&fd->door.n_timeouts, memory_order_relaxed);
	out->door_full = atomic_load_explicit(&fd->door.n_full, memory_order_relaxed);
	out->door_evicted = atomic_load_explicit(&fd->door.n_evicted, memory_order_relaxed);
	out->door_hangups = atomic_load_explicit(&fd->door.n_hangups, memory_order_relaxed);
	out->door_uid_full = atomic_load_explicit(&fd->door.n_uid_full, memory_order_relaxed);
	out->door_pid_unknown = atomic_load_explicit(&fd->door.n_pid_unknown, memory_order_relaxed);
	out->door_owner_exits = atomic_load_explicit(&fd->door.n_owner_exits, memory_order_relaxed);
	out->ctl_denied = atomic_load_explicit(&fd->n_ctl_denied, memory_order_relaxed);
	out->cut_off = atomic_load_explicit(&fd->n_cut_off, memory_order_relaxed);
	out->strikes = atomic_load_explicit(&fd->n_strikes, memory_order_relaxed);
	out->unattributed = atomic_load_explicit(&fd->n_unattributed, memory_order_relaxed);
	out->door_cut_refused = atomic_load_explicit(&fd->door.n_cut_refused, memory_order_relaxed);
	out->door_no_memory = atomic_load_explicit(&fd->door.n_no_memory, memory_order_relaxed);
	out->pin_bytes = rdmem_pin_total(&fd->pin);
	out->pin_max_client = fd->pin.max_client;
	out->pin_max_total = fd->pin.max_total;
	/* relaxed: counters for stats, read alone. */
	out->pin_refused_client =
	    atomic_load_explicit(&fd->pin.refused_client, memory_order_relaxed);
	out->pin_refused_total = atomic_load_explicit(&fd->pin.refused_total, memory_order_relaxed);
	for (c = 0; c < fd->geom.clients; c++) {
		out->attached +=
		    atomic_load_explicit(&fd->clients[c].claim, memory_order_relaxed) != 0;
		out->inflight +=
		    atomic_load_explicit(&fd->clients[c].inflight, memory_order_relaxed);
	}
}
