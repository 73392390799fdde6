/* fd_loopback.c - runs the agent's front door with the loopback responder of
 * tests/frontdoor_loopback.h in place of the session actor, until SIGINT or
 * SIGTERM: a server-less agent for CLI tests and for measuring the front door.
 *
 *   fd_loopback [--shm-name NAME] [--socket PATH] [--clients N] [--slots N]
 *               [--max-value B] [--busy-poll] [--shm-reset] [--clients-per-uid N]
 *               [--group GID] [--client-strikes N]
 * Prints "ready <name>" on stdout once clients may attach.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/frontdoor_loopback.h"

static int parse_u32(const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
	uint64_t v;

	if (!s || rdmem_parse_size(s, &v) || v < lo || v > hi)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

static int usage(const char *why, const char *arg)
{
	fprintf(
	    stderr,
	    "fd_loopback: %s%s\nusage: fd_loopback [--shm-name NAME] [--socket PATH] [--clients N] "
	    "[--slots N] [--max-value B] [--busy-poll] [--shm-reset] [--clients-per-uid N] "
	    "[--group GID] [--client-strikes N]\n",
	    why, arg ? arg : "");
	return 2;
}

static int parse_args(int argc, char **argv, struct rdmem_frontdoor_config *cfg)
{
	int i;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int bad = 0;

		if (!strcmp(a, "--busy-poll")) {
			cfg->busy_poll = 1;
			continue;
		}
		if (!strcmp(a, "--shm-reset")) {
			cfg->reset = 1;
			continue;
		}
		if (!strcmp(a, "--shm-name") && v)
			cfg->shm_name = v;
		else if (!strcmp(a, "--socket") && v)
			cfg->socket_path = v;
		else if (!strcmp(a, "--clients") && v)
			bad = parse_u32(v, 1, RDMEM_SHM_MAX_CLIENTS, &cfg->clients);
		else if (!strcmp(a, "--clients-per-uid") && v)
			bad = parse_u32(v, 1, RDMEM_SHM_MAX_CLIENTS, &cfg->clients_per_uid);
		else if (!strcmp(a, "--slots") && v)
			bad = parse_u32(v, 1, RDMEM_SHM_MAX_SLOTS, &cfg->slots);
		else if (!strcmp(a, "--max-value") && v)
			bad = parse_u32(v, 1, RDMEM_MAX_VALUE_LIMIT, &cfg->max_value);
		else if (!strcmp(a, "--client-strikes") && v)
			bad = parse_u32(v, 0, RDMEM_FD_STRIKES_MAX, &cfg->client_strikes);
		else if (!strcmp(a, "--group") && v) {
			uint32_t g = 0;

			bad = parse_u32(v, 0, UINT32_MAX - 1, &g);
			cfg->group = (gid_t)g;
		} else
			return usage("unknown option or missing value: ", a);
		if (bad)
			return usage("bad value for ", a);
		i++;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct rdmem_frontdoor_config cfg;
	struct rdmem_frontdoor_stats st;
	struct lb *lb;
	sigset_t set;
	int sig, rc;

	memset(&cfg, 0, sizeof(cfg));
	cfg.group = (gid_t)-1;
	rc = parse_args(argc, argv, &cfg);
	if (rc)
		return rc;
	rdmem_log_init("fd_loopback", 0);
	/* Block the stop signals before any thread starts, then wait for one. */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	rc = lb_start(&lb, &cfg);
	if (rc) {
		fprintf(stderr, "fd_loopback: cannot start the front door: %s\n", strerror(-rc));
		return 1;
	}
	printf("ready %s\n", cfg.shm_name ? cfg.shm_name : RDMEM_SHM_DEFAULT_NAME);
	fflush(stdout);
	sigwait(&set, &sig);
	rdmem_frontdoor_get_stats(lb->fd, &st);
	fprintf(stderr,
		"fd_loopback: stopping on signal %d: %" PRIu64 " calls, %" PRIu64
		" local pings, %" PRIu64 " refused, %" PRIu64 " dead clients\n",
		sig, st.calls, st.local_pings, st.bad_entries, st.dead_clients);
	lb_stop(lb);
	return 0;
}
