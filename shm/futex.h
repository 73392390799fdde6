/* futex.h - futex wait/wake on words of the shared front-door segment.
 *
 * The words live in a MAP_SHARED mapping used by several processes, so these
 * are the shared (non-PRIVATE) futex ops: the kernel keys them on the page,
 * not on the address space. Header-only and libc-only (syscall()), because
 * libclient waits on its slot words with them.
 */
#ifndef RDMEM_SHM_FUTEX_H
#define RDMEM_SHM_FUTEX_H

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/*
 * Sleeps while *word == expected, at most timeout_ns (0: no limit).
 * Returns 0 when woken, -EAGAIN when the word already differed, -ETIMEDOUT,
 * or -EINTR; callers re-check their condition in every case.
 */
static inline int rdmem_futex_wait(_Atomic uint32_t *word, uint32_t expected, uint64_t timeout_ns)
{
	struct timespec ts, *tsp = NULL;

	if (timeout_ns) {
		ts.tv_sec = (time_t)(timeout_ns / 1000000000ull);
		ts.tv_nsec = (long)(timeout_ns % 1000000000ull);
		tsp = &ts;
	}
	if (syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, expected, tsp, NULL, 0) == 0)
		return 0;
	return -errno;
}

/* Wakes up to n sleepers on word; returns how many woke, or -errno. */
static inline int rdmem_futex_wake(_Atomic uint32_t *word, int n)
{
	long rc = syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, n, NULL, NULL, 0);

	return rc < 0 ? -errno : (int)rc;
}

static inline int rdmem_futex_wake_all(_Atomic uint32_t *word)
{
	return rdmem_futex_wake(word, INT_MAX);
}

#endif
