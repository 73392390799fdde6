/* ring.h - the front door's lock-free bounded MPSC ring of (client, slot)
 * entries: many client processes produce, the agent alone consumes.
 *
 * Each cell is ONE 64-bit atomic word {seq:32 | client:16 | slot:16}:
 *   EMPTY(p)  = {p, 0xffff, 0xffff}  the cell waits for position p
 *   ENTRY(p)  = {p, client, slot}    position p is published
 * seq is the low 32 bits of the 64-bit position p; a cell serves positions
 * p, p + size, p + 2 size, ...
 *
 * Producer: claim a position p by CAS on head, allowed only while its cell
 * reads EMPTY(p) (so the previous lap was consumed: the ring is bounded with
 * no separate count); then publish with one CAS EMPTY(p) -> ENTRY(p). A
 * single-word publish means a torn entry can never be read.
 * Consumer: takes ENTRY(tail) and frees the cell for the next lap by storing
 * EMPTY(tail + size). If position tail was claimed but stays unpublished for
 * skip_after_ns (the producer died, or is stopped), it CASes EMPTY(tail) ->
 * EMPTY(tail + size): the position is skipped, and so is every position
 * claimed by then that is still unpublished when the consumer reaches it
 * (one stall per burst of abandoned claims, not one per position). The late
 * producer's publish CAS then fails (its expected EMPTY(tail) is gone, and
 * no later lap can look like it: the seq differs) and it claims a new
 * position. The only ABA left is a producer stalled between claim and
 * publish for 2^32 positions; its late entry names its own slot, which the
 * agent validates like any other entry.
 *
 * Clients map the ring read-write, so any word may hold anything. The
 * consumer repairs in O(1), without waiting: a cell at tail holding neither
 * EMPTY(tail) nor ENTRY(tail) (back to EMPTY(tail)), and a head outside
 * [tail, tail + size] (back to tail). A producer that finds head naming an
 * already published position moves head on.
 *
 * Waking the consumer (an eventcount): the agent announces sleeping = 1,
 * re-checks the ring, then futex-waits on doorbell; a producer, after it
 * publishes, rings the doorbell only if sleeping is set, so a busy agent
 * costs producers no syscall. The two sides are the two halves of a Dekker
 * pattern (store mine, full fence, load theirs); see rdmem_ring_kick() and
 * rdmem_ring_sleep_begin(). Since any client can clear sleeping, a call
 * the agent has not taken after 20 ms rings anyway (rdmem_ring_bell(), from
 * librdmem's slow path), and so do the agent's own door and stop.
 *
 * The ring lives in the shared segment; struct rdmem_ring is a process-local
 * view of it. Header-only: libclient produces with it.
 */
#ifndef RDMEM_SHM_RING_H
#define RDMEM_SHM_RING_H

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>

#include "rdmem/util.h"
#include "shm/futex.h"

#define RDMEM_RING_NONE	      0xffffffffu /* low word of EMPTY(p) */
#define RDMEM_RING_MAX_CLIENT 0xfffeu	  /* 0xffff is reserved for EMPTY */
#define RDMEM_RING_MIN_SIZE   64u
#define RDMEM_RING_MAX_SIZE   (1u << 24)
/* A publish takes nanoseconds; only a preempted or dead producer is slower. */
#define RDMEM_RING_SKIP_NS     1000000ull
#define RDMEM_RING_CLAIM_TRIES 64
#define RDMEM_RING_PUSH_TRIES  16

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "ring cells must be lock-free across processes");
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "futex words must be lock-free across processes");

/* Shared control words, in the segment header; one cache line per writer side. */
struct rdmem_ring_ctl {
	_Atomic uint64_t head; /* next position to claim; producers CAS it */
	uint8_t pad0[56];
	_Atomic uint32_t doorbell; /* the agent's futex word: bumped to wake it */
	_Atomic uint32_t sleeping; /* 1 while the agent is (about to be) blocked */
	uint8_t pad1[56];
};
_Static_assert(sizeof(struct rdmem_ring_ctl) == 128, "ring ctl is two cache lines");

struct rdmem_ring {
	struct rdmem_ring_ctl *ctl;
	_Atomic uint64_t *cells;
	uint64_t size; /* power of two */
	uint64_t mask;
};

/* The consumer's private state: never in the segment, so no client can touch it. */
struct rdmem_ring_consumer {
	uint64_t tail;
	uint64_t stall_since_ns; /* when the cell at tail was first seen claimed-unpublished */
	uint64_t skip_after_ns;
	uint64_t skip_until;	/* positions below it still unpublished are skipped at once */
	uint64_t skipped;	/* positions given up on: producer died or stalled */
	uint64_t stalls;	/* waits of skip_after_ns that ended in skipping */
	uint64_t repaired;	/* cells holding a word no producer may write (scribbled) */
	uint64_t head_repaired; /* head found outside [tail, tail + size] and reset */
};

static inline uint64_t rdmem_ring_empty_word(uint64_t pos)
{
	return (uint64_t)(uint32_t)pos << 32 | RDMEM_RING_NONE;
}

static inline uint64_t rdmem_ring_entry_word(uint64_t pos, uint16_t client, uint16_t slot)
{
	return (uint64_t)(uint32_t)pos << 32 | (uint32_t)client << 16 | slot;
}

static inline uint32_t rdmem_ring_word_seq(uint64_t w)
{
	return (uint32_t)(w >> 32);
}

static inline int rdmem_ring_size_ok(uint64_t size)
{
	return size >= RDMEM_RING_MIN_SIZE && size <= RDMEM_RING_MAX_SIZE && !(size & (size - 1));
}

/* Binds a view; size must pass rdmem_ring_size_ok(). */
static inline void rdmem_ring_bind(struct rdmem_ring *r, void *ctl, void *cells, uint64_t size)
{
	r->ctl = (struct rdmem_ring_ctl *)ctl;
	r->cells = (_Atomic uint64_t *)cells;
	r->size = size;
	r->mask = size - 1;
}

/*
 * Formats an unused ring whose first position is start (tests start near the
 * 32-bit wrap). Runs before the segment is announced RUNNING, so relaxed
 * stores suffice: the release store of the header state publishes them.
 */
static inline void rdmem_ring_format(struct rdmem_ring *r, uint64_t start)
{
	uint64_t i;

	for (i = 0; i < r->size; i++)
		atomic_store_explicit(&r->cells[(start + i) & r->mask],
				      rdmem_ring_empty_word(start + i), memory_order_relaxed);
	atomic_store_explicit(&r->ctl->head, start, memory_order_relaxed);
	atomic_store_explicit(&r->ctl->doorbell, 0, memory_order_relaxed);
	atomic_store_explicit(&r->ctl->sleeping, 0, memory_order_relaxed);
}

static inline void rdmem_ring_consumer_init(struct rdmem_ring_consumer *c, uint64_t start)
{
	c->tail = start;
	c->stall_since_ns = 0;
	c->skip_after_ns = RDMEM_RING_SKIP_NS;
	c->skip_until = start;
	c->skipped = 0;
	c->stalls = 0;
	c->repaired = 0;
	c->head_repaired = 0;
}

/* ---- producer ---------------------------------------------------------- */

/*
 * Claims one position. Returns 0, or -EAGAIN when the ring is full (or a
 * scribbled cell blocks it until the consumer repairs it).
 */
static inline int rdmem_ring_claim(struct rdmem_ring *r, uint64_t *pos_out)
{
	/* Relaxed: head only picks a candidate; the CAS below decides. */
	uint64_t pos = atomic_load_explicit(&r->ctl->head, memory_order_relaxed);
	int tries;

	for (tries = 0; tries < RDMEM_RING_CLAIM_TRIES; tries++) {
		/*
		 * Relaxed: the cell word carries no data we read through it;
		 * it only says whether lap pos may start. Our publish CAS re-
		 * checks the same word atomically, so a stale EMPTY(pos) here
		 * can at worst make that CAS fail.
		 */
		uint64_t w = atomic_load_explicit(&r->cells[pos & r->mask], memory_order_relaxed);
		int32_t lap = (int32_t)(rdmem_ring_word_seq(w) - (uint32_t)pos);

		if (w == rdmem_ring_empty_word(pos)) {
			/* Relaxed: claiming orders nothing; the publish CAS releases. */
			if (atomic_compare_exchange_weak_explicit(&r->ctl->head, &pos, pos + 1,
								  memory_order_relaxed,
								  memory_order_relaxed)) {
				*pos_out = pos;
				return 0;
			}
			continue; /* pos now holds the current head */
		}
		if (lap < 0)
			return -EAGAIN; /* the cell still holds the previous lap: full */
		if (lap == 0) {
			/*
			 * Published already, yet head still names it: a client
			 * wrote head back. Move it on for everyone. Relaxed, as
			 * above; on failure pos holds the current head.
			 */
			if (atomic_compare_exchange_weak_explicit(&r->ctl->head, &pos, pos + 1,
								  memory_order_relaxed,
								  memory_order_relaxed))
				pos++;
			continue;
		}
		rdmem_cpu_relax();
		pos = atomic_load_explicit(&r->ctl->head, memory_order_relaxed);
	}
	return -EAGAIN;
}

/*
 * Publishes (client, slot) at a claimed position. Returns 0, or -ESTALE when
 * the consumer skipped the position meanwhile: claim a new one.
 */
static inline int rdmem_ring_publish(struct rdmem_ring *r, uint64_t pos, uint16_t client,
				     uint16_t slot)
{
	uint64_t expected = rdmem_ring_empty_word(pos);

	/*
	 * Release: everything this producer wrote before (the slot's request
	 * descriptor, payload and SUBMITTED state) becomes visible to the
	 * consumer whose acquire load in rdmem_ring_pop() reads this word.
	 */
	if (atomic_compare_exchange_strong_explicit(&r->cells[pos & r->mask], &expected,
						    rdmem_ring_entry_word(pos, client, slot),
						    memory_order_release, memory_order_relaxed))
		return 0;
	return -ESTALE;
}

/*
 * Wakes the consumer whether or not it said it sleeps (a system call). All
 * waiters: any client can park threads on the doorbell, and FUTEX_WAKE of
 * one would wake them, in arrival order, instead of the agent.
 */
static inline void rdmem_ring_bell(struct rdmem_ring *r)
{
	/*
	 * Release: pairs with the acquire load of doorbell in
	 * rdmem_ring_sleep_begin(); a consumer that reads this new value
	 * therefore also sees our entry when it re-checks the ring.
	 */
	atomic_fetch_add_explicit(&r->ctl->doorbell, 1, memory_order_release);
	rdmem_futex_wake_all(&r->ctl->doorbell);
}

/* Wakes the consumer if it announced it sleeps. Call after publishing. */
static inline void rdmem_ring_kick(struct rdmem_ring *r)
{
	/*
	 * Dekker, producer half: our publish (a store) must be ordered before
	 * our load of sleeping. Pairs with the seq_cst fence in
	 * rdmem_ring_sleep_begin(): either we see sleeping == 1, or the
	 * consumer's re-check after its fence sees our entry.
	 */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&r->ctl->sleeping, memory_order_relaxed))
		rdmem_ring_bell(r);
}

/*
 * Claims and publishes one entry, retrying when a slow publish was skipped.
 * Returns 0 or -EAGAIN (full: retry later, as the ring drains).
 */
static inline int rdmem_ring_push(struct rdmem_ring *r, uint16_t client, uint16_t slot)
{
	uint64_t pos;
	int tries, rc;

	if (client > RDMEM_RING_MAX_CLIENT)
		return -EINVAL;
	for (tries = 0; tries < RDMEM_RING_PUSH_TRIES; tries++) {
		rc = rdmem_ring_claim(r, &pos);
		if (rc) {
			/*
			 * Full, or a word a client wrote blocks the claim. A
			 * consumer with entries to take never sleeps, so one
			 * that sleeps now has a repair to make: wake it.
			 */
			rdmem_ring_kick(r);
			return rc;
		}
		if (rdmem_ring_publish(r, pos, client, slot) == 0) {
			rdmem_ring_kick(r);
			return 0;
		}
	}
	return -EAGAIN;
}

/* ---- consumer ---------------------------------------------------------- */

/*
 * The cell at tail may hold only EMPTY(tail) or ENTRY(tail): the consumer
 * itself wrote EMPTY(tail) when it freed the previous lap, and producers only
 * turn it into ENTRY(tail). Any other word is a client's scribble; put
 * EMPTY(tail) back at once (no need to wait: no honest writer can be midway).
 * A producer that claimed tail then publishes normally.
 */
static inline void rdmem_ring_repair_cell(struct rdmem_ring *r, struct rdmem_ring_consumer *c,
					  uint64_t w)
{
	/* Relaxed: we publish nothing; a failed CAS means the word changed
	 * again, and the caller re-reads it with acquire. */
	if (atomic_compare_exchange_strong_explicit(&r->cells[c->tail & r->mask], &w,
						    rdmem_ring_empty_word(c->tail),
						    memory_order_relaxed, memory_order_relaxed))
		c->repaired++;
}

/*
 * head outside [tail, tail + size] cannot come from a producer (a claim
 * needs the cell freed by the consumer, so head <= tail + size; every
 * position below tail was published or skipped, so head >= tail): a client
 * wrote it. Put it back at tail. Honest claims made before are safe: their
 * cells still name their positions, a second claim of one of them loses the
 * publish CAS and claims again.
 */
static inline void rdmem_ring_repair_head(struct rdmem_ring *r, struct rdmem_ring_consumer *c,
					  uint64_t head)
{
	/* Relaxed: head carries no data; producers check every claim on the cell. */
	if (atomic_compare_exchange_strong_explicit(&r->ctl->head, &head, c->tail,
						    memory_order_relaxed, memory_order_relaxed))
		c->head_repaired++;
	c->stall_since_ns = 0;
	c->skip_until = c->tail; /* what it covered was measured on a forged head */
}

static inline int rdmem_ring_head_bad(const struct rdmem_ring *r,
				      const struct rdmem_ring_consumer *c, uint64_t head)
{
	return head - c->tail > r->size; /* unsigned: below tail wraps to huge */
}

/*
 * Position tail is claimed but not published (its cell reads EMPTY(tail)).
 * Waits skip_after_ns once; then every position claimed by that time (up to
 * the head read now) that is still unpublished when reached is skipped at
 * once, so a producer that claims many positions and publishes none costs
 * one stall, not one per position. Returns 1 (tail moved or the cell
 * changed: look again) or -EAGAIN (still waiting).
 */
static inline int rdmem_ring_stalled(struct rdmem_ring *r, struct rdmem_ring_consumer *c,
				     uint64_t head)
{
	uint64_t w = rdmem_ring_empty_word(c->tail);

	if ((int64_t)(c->skip_until - c->tail) <= 0) {
		uint64_t now = rdmem_now_ns();

		if (!c->stall_since_ns) {
			c->stall_since_ns = now;
			return -EAGAIN;
		}
		if (now - c->stall_since_ns < c->skip_after_ns)
			return -EAGAIN;
		c->skip_until = head;
		c->stalls++;
	}
	/*
	 * Relaxed: we publish nothing, and the late producer learns of the
	 * skip through its own CAS on this word (it then claims again). On
	 * failure the producer published meanwhile; the caller re-reads the
	 * cell with acquire before it touches the slot.
	 */
	if (!atomic_compare_exchange_strong_explicit(&r->cells[c->tail & r->mask], &w,
						     rdmem_ring_empty_word(c->tail + r->size),
						     memory_order_relaxed, memory_order_relaxed))
		return 1;
	c->stall_since_ns = 0;
	c->tail++;
	c->skipped++;
	return 1;
}

/* Repairs (cells, head) one pop call makes at most before it yields: a
 * client rewriting a word in a loop cannot keep the consumer in here. */
#define RDMEM_RING_POP_REPAIRS 4
/* Unpublished positions one pop call skips at most: a head a client moved a
 * whole ring ahead costs the consumer bounded work per call, not a ring's. */
#define RDMEM_RING_POP_SKIPS 256

/*
 * Takes the next entry. Returns 1 with *client and *slot set, 0 when the ring
 * is empty, or -EAGAIN while the next position is claimed but not yet
 * published (call again soon; it is skipped after skip_after_ns) or after
 * repairing what a client wrote (call again).
 */
static inline int rdmem_ring_pop(struct rdmem_ring *r, struct rdmem_ring_consumer *c,
				 uint16_t *client, uint16_t *slot)
{
	uint64_t skipped = c->skipped;
	int repairs = 0;

	for (;;) {
		_Atomic uint64_t *cell = &r->cells[c->tail & r->mask];
		/*
		 * Acquire: pairs with the producer's release CAS in
		 * rdmem_ring_publish(), so the slot it names is fully written.
		 */
		uint64_t w = atomic_load_explicit(cell, memory_order_acquire);
		uint64_t empty = rdmem_ring_empty_word(c->tail), head;
		int rc;

		if (w != empty && rdmem_ring_word_seq(w) == (uint32_t)c->tail) {
			*client = (uint16_t)(w >> 16);
			*slot = (uint16_t)w;
			/*
			 * Relaxed: the next lap's producer reads nothing through
			 * this word but the word itself (its claim is checked by
			 * its own CAS on head and on this cell).
			 */
			atomic_store_explicit(cell, rdmem_ring_empty_word(c->tail + r->size),
					      memory_order_relaxed);
			c->tail++;
			c->stall_since_ns = 0;
			return 1;
		}
		if (w != empty) {
			if (repairs++ == RDMEM_RING_POP_REPAIRS)
				return -EAGAIN;
			rdmem_ring_repair_cell(r, c, w);
			continue;
		}
		/* Relaxed: only tells "nothing claimed" from "claimed, unpublished". */
		head = atomic_load_explicit(&r->ctl->head, memory_order_relaxed);
		if (head == c->tail) {
			c->stall_since_ns = 0;
			return 0;
		}
		if (rdmem_ring_head_bad(r, c, head)) {
			if (repairs++ == RDMEM_RING_POP_REPAIRS)
				return -EAGAIN;
			rdmem_ring_repair_head(r, c, head);
			continue;
		}
		rc = rdmem_ring_stalled(r, c, head);
		if (rc <= 0)
			return rc;
		if (c->skipped - skipped >= RDMEM_RING_POP_SKIPS)
			return -EAGAIN; /* rdmem_ring_pending() says: call again */
	}
}

/*
 * True when rdmem_ring_pop() has something to do now: an entry, or a stall
 * whose clock has not started. A stall already being aged is not work: the
 * consumer may sleep rdmem_ring_stall_left_ns(), and a late publish kicks it.
 */
static inline int rdmem_ring_pending(struct rdmem_ring *r, const struct rdmem_ring_consumer *c)
{
	/* Relaxed: a hint for the sleep decision; pop re-reads with acquire. */
	uint64_t w = atomic_load_explicit(&r->cells[c->tail & r->mask], memory_order_relaxed);
	uint64_t head;

	if (w != rdmem_ring_empty_word(c->tail))
		return 1; /* an entry, or a scribbled word to repair now */
	head = atomic_load_explicit(&r->ctl->head, memory_order_relaxed);
	if (head == c->tail)
		return 0;
	return rdmem_ring_head_bad(r, c, head) || (int64_t)(c->skip_until - c->tail) > 0 ||
	       !c->stall_since_ns;
}

/* How long the consumer may sleep before a stalled position must be skipped. */
static inline uint64_t rdmem_ring_stall_left_ns(const struct rdmem_ring_consumer *c,
						uint64_t now_ns)
{
	uint64_t aged;

	if (!c->stall_since_ns)
		return UINT64_MAX;
	aged = now_ns - c->stall_since_ns;
	return aged >= c->skip_after_ns ? 1 : c->skip_after_ns - aged;
}

/*
 * Consumer, before blocking: returns the doorbell value to pass to
 * rdmem_ring_sleep(), or sets *busy when the ring has work after all.
 */
static inline uint32_t rdmem_ring_sleep_begin(struct rdmem_ring *r,
					      const struct rdmem_ring_consumer *c, int *busy)
{
	/*
	 * Acquire: pairs with the release fetch_add in rdmem_ring_bell() (a
	 * producer's, or the agent's door and stop, which also bump it); if
	 * we read a bumped value, the entry behind it is visible to the check
	 * below, so we never sleep on a value that already announced work.
	 */
	uint32_t bell = atomic_load_explicit(&r->ctl->doorbell, memory_order_acquire);

	atomic_store_explicit(&r->ctl->sleeping, 1, memory_order_relaxed);
	/*
	 * Dekker, consumer half: the sleeping store must be ordered before the
	 * ring re-check. Pairs with the fence in rdmem_ring_kick().
	 */
	atomic_thread_fence(memory_order_seq_cst);
	*busy = rdmem_ring_pending(r, c);
	if (*busy)
		atomic_store_explicit(&r->ctl->sleeping, 0, memory_order_relaxed);
	return bell;
}

/* Blocks until a producer rings (or timeout_ns passes), then clears sleeping. */
static inline void rdmem_ring_sleep(struct rdmem_ring *r, uint32_t bell, uint64_t timeout_ns)
{
	rdmem_futex_wait(&r->ctl->doorbell, bell, timeout_ns);
	/* Relaxed: producers that still see 1 only pay a spare wake-up. */
	atomic_store_explicit(&r->ctl->sleeping, 0, memory_order_relaxed);
}

#endif
