/* util.c - logging and argument parsing shared by rdmem-server and rdmem-agent. */
#include "rdmem/util.h"
#include "rdmem/wire.h"

#include <errno.h>
#include <stdatomic.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

int rdmem_log_level = RDMEM_LOG_INFO;
static const char *rdmem_log_prog = "rdmem";

void rdmem_log_init(const char *prog, int verbose)
{
	rdmem_log_prog = prog;
	rdmem_log_level = verbose ? RDMEM_LOG_DEBUG : RDMEM_LOG_INFO;
}

void rdmem_log(int level, const char *fmt, ...)
{
	static const char *const names[] = { "error", "warning", "info", "debug" };
	char line[1024];
	va_list ap;
	int n;

	if (level > rdmem_log_level)
		return;
	n = snprintf(line, sizeof(line), "%s: %s: ", rdmem_log_prog, names[level]);
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	/* One write per line keeps lines whole when threads log at once. */
	strcat(line, "\n");
	fputs(line, stderr);
}

uint64_t rdmem_log_window_ns = 10ull * 1000000000ull;

int rdmem_log_admit(struct rdmem_log_site *site, uint64_t *dropped)
{
	uint64_t win = rdmem_now_ns() / rdmem_log_window_ns;
	uint64_t seen = atomic_load_explicit(&site->window, memory_order_relaxed);

	/* Relaxed throughout: the site publishes no data, only a decision to
	 * print. Only forward: a thread that read the clock before a window's
	 * edge must not move the window back and reset the count. */
	if ((int64_t)(win - seen) > 0 &&
	    atomic_compare_exchange_strong_explicit(&site->window, &seen, win, memory_order_relaxed,
						    memory_order_relaxed))
		atomic_store_explicit(&site->count, 0, memory_order_relaxed);
	if (atomic_fetch_add_explicit(&site->count, 1, memory_order_relaxed) < RDMEM_LOG_BURST) {
		*dropped = atomic_exchange_explicit(&site->dropped, 0, memory_order_relaxed);
		return 1;
	}
	atomic_fetch_add_explicit(&site->dropped, 1, memory_order_relaxed);
	return 0;
}

void rdmem_text_vadd(struct rdmem_text *t, const char *fmt, va_list ap)
{
	int n;

	if (t->overflow)
		return;
	n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
	if (n < 0 || (size_t)n >= t->cap - t->len)
		t->overflow = 1;
	else
		t->len += (size_t)n;
}

void rdmem_text_add(struct rdmem_text *t, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	rdmem_text_vadd(t, fmt, ap);
	va_end(ap);
}

int rdmem_parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	char *end;
	int shift = 0;

	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	}
	if (*end != '\0' || (shift && v > (UINT64_MAX >> shift)))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

int rdmem_path_parse(const char *name, uint8_t *path)
{
	unsigned p;

	for (p = 0; name && p < RDMEM_PATH__COUNT; p++) {
		if (strcmp(name, rdmem_path_name(p)) == 0) {
			*path = (uint8_t)p;
			return 0;
		}
	}
	return -EINVAL;
}

/* A decimal number, nothing else. */
static int rdmem_parse_num(const char *s, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

static void rdmem_opt_store(const struct rdmem_opt_num *e, void *opts, uint64_t v)
{
	char *dst = (char *)opts + e->off;
	uint16_t v16 = (uint16_t)v;
	uint32_t v32 = (uint32_t)v;

	if (e->width == 2)
		memcpy(dst, &v16, 2);
	else if (e->width == 4)
		memcpy(dst, &v32, 4);
	else
		memcpy(dst, &v, 8);
}

int rdmem_opt_num_parse(const struct rdmem_opt_num *t, size_t n, int c, const char *arg,
			const char *prog, void *opts)
{
	const struct rdmem_opt_num *e;
	uint64_t v;
	int ret;

	for (e = t; e < t + n && e->code != c; e++)
		;
	if (e == t + n)
		return -ENOENT;
	ret = e->size ? rdmem_parse_size(arg, &v) : rdmem_parse_num(arg, &v);
	if (ret < 0 || v < e->lo || v > e->hi) {
		fprintf(stderr, "%s: %s: '%s' is not a %s in [%llu, %llu]%s\n", prog, e->flag, arg,
			e->size ? "size" : "number", (unsigned long long)e->lo,
			(unsigned long long)e->hi, e->size ? " bytes (k/m/g)" : "");
		return -EINVAL;
	}
	rdmem_opt_store(e, opts, v);
	return 0;
}

static int rdmem_can_lock_any(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];

	if (syscall(SYS_capget, &h, d) < 0)
		return 0;
	return !!(d[CAP_IPC_LOCK / 32].effective & (1u << (CAP_IPC_LOCK % 32)));
}

int rdmem_memlock_limit(uint64_t *limit_bytes)
{
	struct rlimit rl;

	*limit_bytes = 0;
	if (getrlimit(RLIMIT_MEMLOCK, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY ||
	    rdmem_can_lock_any())
		return 0;
	*limit_bytes = rl.rlim_cur;
	return 1;
}
