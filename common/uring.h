/* uring.h - what ThreadSanitizer must be told about an io_uring.
 *
 * The SQ and CQ rings and the SQE array are memory the kernel shares with us,
 * and liburing maps and unmaps them with raw system calls that TSan does not
 * intercept. So TSan sees neither the kernel's accesses nor a ring going away:
 * when a thread's ring is unmapped and another thread's new ring lands at the
 * same address, TSan still holds the old ring's accesses and reports the new
 * owner's first SQE as a race with a thread that has finished (seen in
 * test_server_tcp's concurrent clients). rdmem_uring_tsan() marks exactly
 * those ranges, and nothing else, as outside TSan's view. It compiles to
 * nothing unless TSan is on.
 */
#ifndef RDMEM_FABRIC_URING_H
#define RDMEM_FABRIC_URING_H

#include <liburing.h>

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RDMEM_TSAN 1
#endif
#endif

#ifdef RDMEM_TSAN
/* TSan's dynamic annotation: reports on [mem, mem + size) are expected. */
void AnnotateBenignRaceSized(const char *file, int line, const volatile void *mem,
			     unsigned long size, const char *desc);
#endif

/* Call right after io_uring_queue_init() succeeded. */
static inline void rdmem_uring_tsan(const struct io_uring *r)
{
#ifdef RDMEM_TSAN
	AnnotateBenignRaceSized(__FILE__, __LINE__, r->sq.ring_ptr, r->sq.ring_sz,
				"io_uring SQ ring, shared with the kernel");
	AnnotateBenignRaceSized(__FILE__, __LINE__, r->cq.ring_ptr, r->cq.ring_sz,
				"io_uring CQ ring, shared with the kernel");
	AnnotateBenignRaceSized(__FILE__, __LINE__, r->sq.sqes,
				r->sq.ring_entries * sizeof(struct io_uring_sqe),
				"io_uring SQE array, shared with the kernel");
#else
	(void)r;
#endif
}

#endif
