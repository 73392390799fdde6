/* cli.h - private to the rdmem tool (cli/rdmem.c, the commands; cli/bench.c,
 * `rdmem bench`): the parsed command line and the helpers both use.
 */
#ifndef RDMEM_CLI_H
#define RDMEM_CLI_H

#include "libclient/rdmem.h"

#define EXIT_NOT_FOUND 1
#define EXIT_USAGE     2
#define EXIT_FAIL      3
#define MAX_BENCH_OPS  50000000ull

struct cli {
	const char *shm_name;
	struct rdmem_opts opts;
	struct rdmem_info info;
	int verbose;
	int json;
	const char *file;
	uint64_t chunk_size;
	const char *bench_op;
	uint64_t n, window, size, keys, gap_us;
	int have_n, have_window, have_size, have_keys, have_gap, have_chunk;
	/* What the command sends, for a -E2BIG message naming the limits:
	 * req_kind ("value", "image", "reply"...) of req_bytes (0: not known). */
	const char *req_kind;
	uint64_t req_bytes;
	int done; /* --help or --version answered: exit 0 */
	int argc; /* positional arguments, the command first */
	char **argv;
	rdmem_t *h;
};

/* The value of counter name in stats text ("name value" lines), or -1. */
int64_t rdmem_cli_stat(const char *text, uint32_t len, const char *name);
/* Prints "rdmem: <fmt with arg>" and the usage; returns EXIT_USAGE. */
int rdmem_cli_usage(const char *fmt, const char *arg);
/* Reports a failed op and maps it to the exit code. */
int rdmem_cli_fail(const char *what, int rc);
/* -E2BIG explained: the limits that could apply, their values where the
 * agent tells them, and the flags that raise them; returns EXIT_FAIL. */
int rdmem_cli_too_big(struct cli *c, const char *what);
/* Checks the command got exactly n arguments and no option it ignores. */
int rdmem_cli_want_args(struct cli *c, int n, const char *synopsis);
/* Attaches to the agent once the command's arguments are known to be good. */
int rdmem_cli_attach(struct cli *c);
/* `rdmem lifecycle N|stale|repeat-reclaim|timeout` (lifecycle.c). */
int rdmem_cli_lifecycle(struct cli *c);
/* `rdmem bench` (bench.c). */
int rdmem_cli_bench(struct cli *c);

#endif
