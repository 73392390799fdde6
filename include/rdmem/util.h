/* util.h - small helpers every part of the runtime shares: clocks, sizes,
 * CPU relax, and logging with context. */
#ifndef RDMEM_UTIL_H
#define RDMEM_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#define RDMEM_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
/* Appends item to a singly linked FIFO kept as head and tail pointers (a
 * `next` field links the items). */
#define RDMEM_FIFO_PUSH(head, tail, item)                                                          \
	do {                                                                                       \
		(item)->next = NULL;                                                               \
		if (tail)                                                                          \
			(tail)->next = (item);                                                     \
		else                                                                               \
			(head) = (item);                                                           \
		(tail) = (item);                                                                   \
	} while (0)
#define RDMEM_MIN(a, b)	  ((a) < (b) ? (a) : (b))
#define RDMEM_MAX(a, b)	  ((a) > (b) ? (a) : (b))
#define RDMEM_CACHELINE	  64
#define rdmem_likely(x)	  __builtin_expect(!!(x), 1)
#define rdmem_unlikely(x) __builtin_expect(!!(x), 0)

static inline uint64_t rdmem_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void rdmem_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

/*
 * Parses a byte size with an optional k/m/g suffix (powers of 1024).
 * Returns 0, or -EINVAL for anything else (empty, junk, overflow).
 */
int rdmem_parse_size(const char *s, uint64_t *out);

/* Reads the whole file at path, named by flag in every error (see
 * common/conf_file.c): a regular file of at most max bytes, checked and read
 * through one open, never blocking on a FIFO; with secret, also owned by this
 * user or root and closed to group and others. *data is malloc'd: give it
 * back with rdmem_conf_file_free(*data, *len), which wipes it. */
int rdmem_conf_file_read(const char *flag, const char *path, int secret, size_t max, uint8_t **data,
			 size_t *len);
void rdmem_conf_file_free(uint8_t *data, size_t len);
/* Trust rules for paths another local user may touch (common/conf_file.c):
 * a uid of root or this process's, and a directory in which others could
 * rename or plant entries (writable by group or others, not sticky). */
int rdmem_uid_trusted(uid_t uid);
int rdmem_dir_open_to_others(mode_t mode);

/* Parses a path name ("auto", "eager", "lazy", "bulk", "tcp": rdmem_path_name
 * in rdmem/wire.h) into *path; -EINVAL for any other (or NULL) name. Shared by
 * rdmem-agent's --path and the rdmem tool's --path. */
int rdmem_path_parse(const char *name, uint8_t *path);

/*
 * A numeric command-line option of rdmem-server or rdmem-agent: its getopt
 * code, its flag, the inclusive range, and where the value lands (an offset
 * into the daemon's options struct). Each daemon keeps one table of these,
 * as data, so a range is one edit and the test (tests/unit/test_opts_*.c)
 * can check every entry against -h and the refusal message.
 */
struct rdmem_opt_num {
	int code;	  /* getopt_long's value */
	const char *flag; /* "--ring-slots" */
	uint64_t lo, hi;
	uint8_t size;  /* 1: a byte size, k/m/g suffixes (powers of 1024) */
	uint8_t width; /* bytes of the field: 2, 4 or 8 */
	uint32_t off;  /* offset of the field */
};

#define RDMEM_OPT_NUM(T, code, flag, lo, hi, f)                                                    \
	{                                                                                          \
		code, flag, lo, hi, 0, (uint8_t)sizeof(((T *)0)->f), (uint32_t)offsetof(T, f)      \
	}
#define RDMEM_OPT_SIZE(T, code, flag, lo, hi, f)                                                   \
	{                                                                                          \
		code, flag, lo, hi, 1, (uint8_t)sizeof(((T *)0)->f), (uint32_t)offsetof(T, f)      \
	}

/*
 * Parses arg for the table entry with code c and stores it into opts.
 * Returns 0; -ENOENT when no entry has code c; -EINVAL after printing
 * "<prog>: <flag>: '<arg>' is not a number in [lo, hi]" (or "a size in
 * [lo, hi] bytes (k/m/g)") on stderr.
 */
int rdmem_opt_num_parse(const struct rdmem_opt_num *t, size_t n, int c, const char *arg,
			const char *prog, void *opts);

/*
 * The locked-memory limit registrations count against: 1 with *limit_bytes
 * set when RLIMIT_MEMLOCK is finite and the process lacks CAP_IPC_LOCK (which
 * lifts it, the kernel's rule); 0 when nothing limits what it may pin.
 */
int rdmem_memlock_limit(uint64_t *limit_bytes);

/*
 * A bounded text buffer for reports (STATS, agent-stats): appends until the
 * buffer is full, then remembers that it overflowed instead of failing each
 * call, so a report is written straight through and checked once at the end.
 */
struct rdmem_text {
	char *buf;
	size_t cap, len;
	int overflow;
};

void rdmem_text_add(struct rdmem_text *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void rdmem_text_vadd(struct rdmem_text *t, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

/* ---- logging ------------------------------------------------------------
 * One line per event: "<prog>: <level>: <message>". Errors name what failed,
 * the peer, and errno text; callers pass those in the message.
 */
enum rdmem_log_level { RDMEM_LOG_ERROR, RDMEM_LOG_WARN, RDMEM_LOG_INFO, RDMEM_LOG_DEBUG };

extern int rdmem_log_level;

void rdmem_log_init(const char *prog, int verbose);
void rdmem_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define rdmem_err(...)	rdmem_log(RDMEM_LOG_ERROR, __VA_ARGS__)
#define rdmem_warn(...) rdmem_log(RDMEM_LOG_WARN, __VA_ARGS__)
#define rdmem_info(...) rdmem_log(RDMEM_LOG_INFO, __VA_ARGS__)
/*
 * Rate-limited logging, for any message a peer or a client can provoke: each
 * call site logs its first RDMEM_LOG_BURST lines per window
 * (rdmem_log_window_ns, 10 s), then stays quiet; the first line it logs in a
 * later window is preceded by how many it left out. Counters, not the log,
 * carry the full numbers, so nothing is lost but repetition.
 */
#define RDMEM_LOG_BURST 5
struct rdmem_log_site {
	_Atomic uint64_t window;  /* which window count belongs to */
	_Atomic uint32_t count;	  /* lines attempted in that window */
	_Atomic uint64_t dropped; /* not logged since the last line that was */
};
extern uint64_t rdmem_log_window_ns;
/* 1 when this line may be logged; *dropped then holds the lines left out. */
int rdmem_log_admit(struct rdmem_log_site *site, uint64_t *dropped);

#define rdmem_log_limited(level, ...)                                                              \
	do {                                                                                       \
		static struct rdmem_log_site rdmem_site_;                                          \
		uint64_t rdmem_dropped_ = 0;                                                       \
		if ((level) <= rdmem_log_level &&                                                  \
		    rdmem_log_admit(&rdmem_site_, &rdmem_dropped_)) {                              \
			if (rdmem_dropped_)                                                        \
				rdmem_log(level, "(%llu more like the next line were not logged)", \
					  (unsigned long long)rdmem_dropped_);                     \
			rdmem_log(level, __VA_ARGS__);                                             \
		}                                                                                  \
	} while (0)
#define rdmem_warn_limited(...) rdmem_log_limited(RDMEM_LOG_WARN, __VA_ARGS__)
#define rdmem_err_limited(...)	rdmem_log_limited(RDMEM_LOG_ERROR, __VA_ARGS__)

#define rdmem_debug(...)                                                                           \
	do {                                                                                       \
		if (rdmem_log_level >= RDMEM_LOG_DEBUG)                                            \
			rdmem_log(RDMEM_LOG_DEBUG, __VA_ARGS__);                                   \
	} while (0)

#endif
