/* uds_echo.c - the baseline for the front door's round trip: a Unix-domain
 * stream socket to an echo process, with a window of messages in flight.
 * Prints the same figures as `rdmem bench` (avg, p50, p99, p99.9, QPS).
 *
 *   uds_echo [-n N] [--window W] [--size B] [--client-cpu C] [--server-cpu C] [--json]
 */
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rdmem/pctl.h"
#include "rdmem/util.h"

struct opts {
	uint64_t n, window, size;
	int client_cpu, server_cpu, json;
};

static int pin(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return 0;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) < 0) {
		fprintf(stderr, "uds_echo: pin to cpu %d: %s\n", cpu, strerror(errno));
		return -1;
	}
	return 0;
}

static int io_all(int fd, void *buf, size_t n, int out)
{
	uint8_t *p = buf;

	while (n) {
		ssize_t r = out ? write(fd, p, n) : read(fd, p, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r, n -= (size_t)r;
	}
	return 0;
}

static void serve(int fd, uint64_t size)
{
	uint8_t *buf = malloc(size ? size : 1);

	while (buf && io_all(fd, buf, size, 0) == 0)
		if (io_all(fd, buf, size, 1))
			break;
	_exit(0);
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	int i;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		uint64_t x;

		if (!strcmp(a, "--json")) {
			o->json = 1;
			continue;
		}
		if (!v || rdmem_parse_size(v, &x)) {
			fprintf(stderr, "uds_echo: bad or missing value for %s\n", a);
			return -1;
		}
		if (!strcmp(a, "-n") && x >= 1)
			o->n = x;
		else if (!strcmp(a, "--window") && x >= 1 && x <= 1024)
			o->window = x;
		else if (!strcmp(a, "--size") && x >= 1 && x <= (1u << 20))
			o->size = x;
		else if (!strcmp(a, "--client-cpu") && x < CPU_SETSIZE)
			o->client_cpu = (int)x;
		else if (!strcmp(a, "--server-cpu") && x < CPU_SETSIZE)
			o->server_cpu = (int)x;
		else {
			fprintf(stderr, "usage: uds_echo [-n N] [--window W<=1024] [--size B] "
					"[--client-cpu C] [--server-cpu C] [--json]\n");
			return -1;
		}
		i++;
	}
	return 0;
}

/* Keeps window messages in flight; each message carries its send time. */
static int run(int fd, const struct opts *o, uint64_t *lat)
{
	uint8_t *msg = calloc(1, o->size < 8 ? 8 : o->size);
	uint64_t sent = 0, done = 0, t;

	if (!msg)
		return -1;
	while (done < o->n) {
		while (sent < o->n && sent - done < o->window) {
			t = rdmem_now_ns();
			memcpy(msg, &t, RDMEM_MIN(o->size, 8));
			if (io_all(fd, msg, o->size, 1))
				return -1;
			sent++;
		}
		if (io_all(fd, msg, o->size, 0))
			return -1;
		memcpy(&t, msg, RDMEM_MIN(o->size, 8));
		lat[done++] = rdmem_now_ns() - t;
	}
	free(msg);
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = { 100000, 1, 8, -1, -1, 0 };
	uint64_t *lat, t0, i;
	double secs, sum = 0;
	int sv[2], status;
	pid_t pid;

	if (parse_args(argc, argv, &o))
		return 2;
	if (o.size < 8)
		o.size = 8; /* the send time rides in the message */
	lat = calloc(o.n, sizeof(*lat));
	if (!lat || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) {
		perror("uds_echo: setup");
		return 1;
	}
	pid = fork();
	if (pid == 0) {
		close(sv[0]);
		if (pin(o.server_cpu))
			_exit(1);
		serve(sv[1], o.size);
	}
	close(sv[1]);
	if (pid < 0 || pin(o.client_cpu))
		return 1;
	t0 = rdmem_now_ns();
	if (run(sv[0], &o, lat)) {
		fprintf(stderr, "uds_echo: the echo process went away\n");
		return 1;
	}
	secs = (double)(rdmem_now_ns() - t0) / 1e9;
	close(sv[0]);
	waitpid(pid, &status, 0);
	for (i = 0; i < o.n; i++)
		sum += (double)lat[i];
	rdmem_pctl_sort(lat, o.n);
#define PCT(p) rdmem_pctl_us(lat, o.n, (p))
	printf(o.json ? "{\"op\":\"uds-echo\",\"ops\":%" PRIu64 ",\"window\":%" PRIu64
			",\"size\":%" PRIu64 ",\"qps\":%.1f,\"avg_us\":%.2f,\"p50_us\":%.2f"
			",\"p99_us\":%.2f,\"p999_us\":%.2f}\n"
		      : "uds echo: %" PRIu64 " ops, window %" PRIu64 ", size %" PRIu64
			" B: %.0f ops/s, latency us avg %.2f p50 %.2f p99 %.2f p99.9 %.2f\n",
	       o.n, o.window, o.size, (double)o.n / secs, sum / (double)o.n / 1000.0, PCT(0.5),
	       PCT(0.99), PCT(0.999));
	free(lat);
	return 0;
}
