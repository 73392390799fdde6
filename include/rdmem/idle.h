/* idle.h - how an idle actor waits: spin, then yield, then block.
 *
 * Measured on the 2-vCPU machines this runs on: a cache-line round trip
 * between two spinning threads costs 0.2-0.45 us, a sched_yield() hand-off
 * between two threads sharing a vCPU ~0.9 us, and waking a thread blocked on
 * the other vCPU ~40 us. So an actor with nothing to do
 *   1. spins with cpu_relax for a few hundred nanoseconds (a peer on the
 *      other vCPU answers within a cache-line round trip),
 *   2. then yields for up to RDMEM_IDLE_YIELD_NS, which lets the actor it is
 *      waiting for run on this vCPU at ~1 us a hand-off instead of ~40 us,
 *   3. then blocks (futex, eventfd, CQ event), so an idle process burns no
 *      core. The yield window is about the cost of one wake-up: waiting
 *      longer than a wake-up costs cannot save more than a wake-up costs
 *      (the classic 2-competitive spin-then-block bound).
 * busy_poll (--busy-poll) never blocks, for dedicated cores.
 *
 * Header-only: libclient waits for replies the same way.
 */
#ifndef RDMEM_IDLE_H
#define RDMEM_IDLE_H

#include <sched.h>
#include <stdint.h>

#include "rdmem/util.h"

#define RDMEM_IDLE_SPINS    64
#define RDMEM_IDLE_YIELD_NS 50000ull

struct rdmem_idle {
	uint32_t spins;
	uint64_t since_ns; /* when the yield phase began; 0 before it */
};

static inline void rdmem_idle_reset(struct rdmem_idle *w)
{
	w->spins = 0;
	w->since_ns = 0;
}

/* One idle round. Returns 1 when the caller should block now. */
static inline int rdmem_idle_step(struct rdmem_idle *w, int busy_poll)
{
	if (w->spins < RDMEM_IDLE_SPINS) {
		w->spins++;
		rdmem_cpu_relax();
		return 0;
	}
	if (!w->since_ns)
		w->since_ns = rdmem_now_ns();
	else if (!busy_poll && rdmem_now_ns() - w->since_ns > RDMEM_IDLE_YIELD_NS)
		return 1;
	sched_yield();
	return 0;
}

/* The end of one round of a polling loop that found `work` things to do:
 * 1 when the caller should block now. Work starts the spin phase again. */
static inline int rdmem_idle_after(struct rdmem_idle *w, int work, int busy_poll)
{
	if (!work && !rdmem_idle_step(w, busy_poll))
		return 0;
	rdmem_idle_reset(w);
	return !work;
}

#endif
