/* vg_uring_shim.c - LD_PRELOAD shim that lets io_uring programs run under
 * valgrind 3.19 (Debian 12) for the callgrind stage of scripts/bench.sh.
 *
 * Why: valgrind runs one thread at a time under a lock that a thread drops
 * only around syscalls valgrind knows may block. 3.19 does not count
 * io_uring_enter among them, so a thread waiting for completions keeps the
 * lock and every other thread of the process stops (rdmem-server's TCP loop
 * froze its start-up this way). The shim turns each blocking wait into a
 * poll() on the ring fd (a syscall valgrind does release the lock for)
 * followed by the real call, which then finds its completion and does not
 * block. Semantics are kept: the same submissions, the same CQEs, -ETIME
 * after the same timeout. Used only under valgrind; it adds a poll() per
 * wait that would have slept, which the report mentions.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

/* The next definition of name (liburing's), found once. */
static void *real(const char *name)
{
	void *f = dlsym(RTLD_NEXT, name);

	if (!f) {
		fprintf(stderr, "vg_uring_shim: no %s in liburing\n", name);
		abort();
	}
	return f;
}
#define REAL(fn) ((__typeof__(&fn))real(#fn))

static int ts_ms(const struct __kernel_timespec *ts)
{
	long long ms;

	if (!ts)
		return -1;
	ms = (long long)ts->tv_sec * 1000 + (ts->tv_nsec + 999999) / 1000000;
	return ms > 0x7fffffff ? 0x7fffffff : (int)ms;
}

/* Waits, outside io_uring_enter, until the ring has a completion; 0 on timeout. */
static int wait_ready(struct io_uring *ring, int ms)
{
	struct pollfd p = { .fd = ring->ring_fd, .events = POLLIN };
	int n;

	while (io_uring_cq_ready(ring) == 0) {
		n = poll(&p, 1, ms);
		if (n == 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return 1; /* let the real call report it */
	}
	return 1;
}

static const struct __kernel_timespec zero_ts = { 0, 0 };

int __io_uring_get_cqe(struct io_uring *ring, struct io_uring_cqe **cqe_ptr, unsigned submit,
		       unsigned wait_nr, sigset_t *sigmask)
{
	static __typeof__(&__io_uring_get_cqe) fn;
	int ret;

	if (!fn)
		fn = REAL(__io_uring_get_cqe);
	if (wait_nr == 0)
		return fn(ring, cqe_ptr, submit, 0, sigmask);
	if (submit) {
		ret = io_uring_submit(ring);
		if (ret < 0)
			return ret;
	}
	wait_ready(ring, -1);
	return fn(ring, cqe_ptr, 0, wait_nr, sigmask);
}

int io_uring_wait_cqes(struct io_uring *ring, struct io_uring_cqe **cqe_ptr, unsigned wait_nr,
		       struct __kernel_timespec *ts, sigset_t *sigmask)
{
	static __typeof__(&io_uring_wait_cqes) fn;

	if (!fn)
		fn = REAL(io_uring_wait_cqes);
	if (wait_nr && !wait_ready(ring, ts_ms(ts)))
		ts = (struct __kernel_timespec *)&zero_ts;
	return fn(ring, cqe_ptr, wait_nr, ts, sigmask);
}

int io_uring_wait_cqe_timeout(struct io_uring *ring, struct io_uring_cqe **cqe_ptr,
			      struct __kernel_timespec *ts)
{
	static __typeof__(&io_uring_wait_cqe_timeout) fn;

	if (!fn)
		fn = REAL(io_uring_wait_cqe_timeout);
	if (!wait_ready(ring, ts_ms(ts)))
		ts = (struct __kernel_timespec *)&zero_ts;
	return fn(ring, cqe_ptr, ts);
}

int io_uring_submit_and_wait(struct io_uring *ring, unsigned wait_nr)
{
	static __typeof__(&io_uring_submit_and_wait) fn;
	int ret;

	if (!fn)
		fn = REAL(io_uring_submit_and_wait);
	if (wait_nr == 0)
		return fn(ring, 0);
	ret = io_uring_submit(ring);
	if (ret < 0)
		return ret;
	wait_ready(ring, -1);
	fn(ring, wait_nr);
	return ret; /* what was submitted, as the real call reports */
}

int io_uring_submit_and_wait_timeout(struct io_uring *ring, struct io_uring_cqe **cqe_ptr,
				     unsigned wait_nr, struct __kernel_timespec *ts,
				     sigset_t *sigmask)
{
	static __typeof__(&io_uring_submit_and_wait_timeout) fn;
	int ret;

	if (!fn)
		fn = REAL(io_uring_submit_and_wait_timeout);
	if (wait_nr == 0)
		return fn(ring, cqe_ptr, 0, ts, sigmask);
	ret = io_uring_submit(ring);
	if (ret < 0)
		return ret;
	if (!wait_ready(ring, ts_ms(ts)))
		ts = (struct __kernel_timespec *)&zero_ts;
	ret = fn(ring, cqe_ptr, wait_nr, ts, sigmask);
	return ret;
}
