/* alloc_count.c - LD_PRELOAD shim for bench/hotpath.sh: counts the heap
 * allocations a process makes (malloc, calloc, realloc, aligned_alloc,
 * posix_memalign, memalign) so the audit can tell whether the steady-state
 * call path allocates. Not linked into anything we ship.
 *
 * A helper thread rewrites ALLOC_COUNT_FILE.<pid> with the running total
 * every 200 ms and at exit; the script reads it before and after the measured calls.
 * Nothing is printed from inside an allocation (no recursion), and a call
 * that arrives while dlsym() is still resolving (glibc's dlsym calls calloc)
 * is served from a small static arena.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_ulong allocs;
static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void *(*real_memalign)(size_t, size_t);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);

static _Alignas(16) char early[8192];
static size_t early_used;

static void *early_alloc(size_t n)
{
	void *p;

	n = (n + 15) & ~(size_t)15;
	if (early_used + n > sizeof(early))
		return NULL;
	p = early + early_used;
	early_used += n;
	return p;
}

static int is_early(const void *p)
{
	return (const char *)p >= early && (const char *)p < early + sizeof(early);
}

static void resolve(void)
{
	static int busy;

	if (real_malloc || busy)
		return;
	busy = 1;
	real_calloc = dlsym(RTLD_NEXT, "calloc");
	real_malloc = dlsym(RTLD_NEXT, "malloc");
	real_realloc = dlsym(RTLD_NEXT, "realloc");
	real_memalign = dlsym(RTLD_NEXT, "memalign");
	real_posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
	real_aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
	busy = 0;
}

void *malloc(size_t n)
{
	resolve();
	if (!real_malloc)
		return early_alloc(n);
	atomic_fetch_add_explicit(&allocs, 1, memory_order_relaxed);
	return real_malloc(n);
}

void *calloc(size_t a, size_t b)
{
	void *p;

	resolve();
	if (!real_calloc) {
		if (b && a > sizeof(early) / b)
			return NULL;
		p = early_alloc(a * b);
		if (p)
			memset(p, 0, a * b);
		return p;
	}
	atomic_fetch_add_explicit(&allocs, 1, memory_order_relaxed);
	return real_calloc(a, b);
}

void *realloc(void *p, size_t n)
{
	resolve();
	if (is_early(p)) {
		size_t left = (size_t)(early + sizeof(early) - (char *)p);
		void *q = malloc(n);

		if (q)
			memcpy(q, p, n < left ? n : left);
		return q;
	}
	atomic_fetch_add_explicit(&allocs, 1, memory_order_relaxed);
	return real_realloc(p, n);
}

void free(void *p)
{
	static void (*real_free)(void *);

	if (!p || is_early(p))
		return;
	if (!real_free)
		real_free = dlsym(RTLD_NEXT, "free");
	real_free(p);
}

void *memalign(size_t al, size_t n)
{
	resolve();
	atomic_fetch_add_explicit(&allocs, 1, memory_order_relaxed);
	return real_memalign(al, n);
}

int posix_memalign(void **out, size_t al, size_t n)
{
	resolve();
	atomic_fetch_add_explicit(&allocs, 1, memory_order_relaxed);
	return real_posix_memalign(out, al, n);
}

void *aligned_alloc(size_t al, size_t n)
{
	resolve();
	atomic_fetch_add_explicit(&allocs, 1, memory_order_relaxed);
	return real_aligned_alloc(al, n);
}

/* Writes the total to ALLOC_COUNT_FILE.<pid> (whole, by rename). */
static void report(void)
{
	const char *base = getenv("ALLOC_COUNT_FILE");
	char path[512], tmp[520], line[32];
	int fd, n;

	if (!base || !*base)
		return;
	snprintf(path, sizeof(path), "%s.%d", base, (int)getpid());
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	n = snprintf(line, sizeof(line), "%lu\n",
		     atomic_load_explicit(&allocs, memory_order_relaxed));
	if (fd < 0)
		return;
	if (write(fd, line, (size_t)n) == n)
		rename(tmp, path);
	close(fd);
}

static void *reporter(void *arg)
{
	struct timespec t = { 0, 200 * 1000 * 1000 }; /* 5 wake-ups a second: ~0 per call */

	(void)arg;
	for (;;) {
		report();
		nanosleep(&t, NULL);
	}
	return NULL;
}

__attribute__((destructor)) static void stop(void)
{
	report();
}

__attribute__((constructor)) static void start(void)
{
	const char *base = getenv("ALLOC_COUNT_FILE");
	pthread_attr_t a;
	pthread_t th;

	resolve();
	if (!base || !*base)
		return;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_create(&th, &a, reporter, NULL);
	pthread_attr_destroy(&a);
}
