/* idle.h - how an idle actor waits: spin, then yield, then block.
 *
 * Measured on the 2-vCPU machines this runs on: a cache-line round trip
 * between two spinning threads costs 0.2-0.45 us, a sched_yield() hand-off
 * between two threads sharing a vCPU ~0.9 us (0.5 us when nobody else
 * runs), a cpu_relax 25 ns, and waking a thread blocked on the other vCPU
 * ~40 us. So an actor with nothing to do
 *   1. spins with cpu_relax for RDMEM_IDLE_SPIN_NS (a peer on the other
 *      vCPU answers within a few cache-line round trips); the bound is
 *      time, not rounds, because a round costs 25 ns in a client and a few
 *      hundred in the agent's session actor, and every spin holds a CPU that
 *      the process we wait for may need. No spin phase at all when we may
 *      run on one CPU only (no_spin): a spinner then only delays its peer;
 *   2. then yields for up to RDMEM_IDLE_YIELD_NS, which lets the actor it is
 *      waiting for run on this vCPU at ~1 us a hand-off instead of ~40 us,
 *   3. then blocks (futex, eventfd, CQ event), so an idle process burns no
 *      core. The yield window is about the cost of one wake-up: waiting
 *      longer than a wake-up costs cannot save more than a wake-up costs
 *      (the classic 2-competitive spin-then-block bound).
 * busy_poll (--busy-poll) never blocks, for dedicated cores. bench/spin.sh
 * measures the choices (README, "The spin policy, measured").
 *
 * Header-only: libclient waits for replies the same way.
 */
#ifndef RDMEM_IDLE_H
#define RDMEM_IDLE_H

#include <sched.h>
#include <stdint.h>

#include "rdmem/util.h"

/* Upper bound of spin rounds; librdmem's inline wait spins this many on
 * the slot word alone (25 ns each), the others stop at RDMEM_IDLE_SPIN_NS. */
#define RDMEM_IDLE_SPINS 64
#ifndef RDMEM_IDLE_SPIN_NS
#define RDMEM_IDLE_SPIN_NS 1000ull
#endif
#define RDMEM_IDLE_YIELD_NS 50000ull

struct rdmem_idle {
	uint32_t spins;
	uint32_t no_spin;  /* we may run on one CPU only: skip the spin phase */
	uint64_t since_ns; /* when the current phase began; 0 before it */
};

static inline void rdmem_idle_reset(struct rdmem_idle *w)
{
	w->spins = w->no_spin ? RDMEM_IDLE_SPINS : 0;
	w->since_ns = 0;
}

/* Starts a waiter; no_spin: the thread may run on one CPU only
 * (common/affinity.h), or the caller knows its peer shares its CPU. */
static inline void rdmem_idle_init(struct rdmem_idle *w, int no_spin)
{
	w->no_spin = !!no_spin;
	rdmem_idle_reset(w);
}

/* One idle round. Returns 1 when the caller should block now. */
static inline int rdmem_idle_step(struct rdmem_idle *w, int busy_poll)
{
	uint64_t now;

	if (w->spins < RDMEM_IDLE_SPINS) {
		now = rdmem_now_ns();
		if (!w->since_ns)
			w->since_ns = now;
		if (now - w->since_ns < RDMEM_IDLE_SPIN_NS) {
			w->spins++;
			rdmem_cpu_relax();
			return 0;
		}
		w->spins = RDMEM_IDLE_SPINS;
		w->since_ns = 0; /* the yield phase starts now */
	}
	now = rdmem_now_ns();
	if (!w->since_ns)
		w->since_ns = now;
	else if (!busy_poll && now - w->since_ns > RDMEM_IDLE_YIELD_NS)
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
