/* door_hold.c - attaches N clients to a front door, each makes M echo calls
 * of S bytes (touching what an honest client touches), prints "held" and
 * waits for stdin to close, then detaches; with --attach-loop K it instead
 * times K attach + detach pairs and prints the median in microseconds.
 * Built against a tree's librdmem.a by bench/door_memory.sh, so two trees'
 * front doors can be measured side by side. A measurement tool, not a test.
 *   door_hold SOCKET_OR_NAME N M S
 *   door_hold SOCKET_OR_NAME --attach-loop K
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rdmem.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int attach_loop(const char *name, int k)
{
	uint64_t *us = calloc((size_t)k, sizeof(*us));
	int i;

	if (!us)
		return 1;
	for (i = 0; i < k; i++) {
		uint64_t t0 = now_ns();
		rdmem_t *h = NULL;
		int rc = rdmem_open(name, &h);

		if (rc) {
			fprintf(stderr, "door_hold: attach %d: %s\n", i, rdmem_strerror(rc));
			free(us);
			return 1;
		}
		rdmem_close(h);
		us[i] = (now_ns() - t0) / 1000;
	}
	qsort(us, (size_t)k, sizeof(*us), cmp_u64);
	printf("attach_detach_p50_us %llu\n", (unsigned long long)us[k / 2]);
	free(us);
	return 0;
}

int main(int argc, char **argv)
{
	rdmem_t **h;
	char *buf;
	int n, m, s, i, j;

	if (argc == 4 && !strcmp(argv[2], "--attach-loop"))
		return attach_loop(argv[1], atoi(argv[3]));
	if (argc != 5) {
		fprintf(stderr, "usage: door_hold SOCKET N M S | SOCKET --attach-loop K\n");
		return 2;
	}
	n = atoi(argv[2]);
	m = atoi(argv[3]);
	s = atoi(argv[4]);
	h = calloc((size_t)n, sizeof(*h));
	buf = malloc((size_t)s + 1);
	if (!h || !buf || n <= 0 || s <= 0)
		return 2;
	memset(buf, 'x', (size_t)s);
	for (i = 0; i < n; i++) {
		int rc = rdmem_open(argv[1], &h[i]);

		for (j = 0; rc == 0 && j < m; j++) {
			void *out = NULL;
			uint32_t len = 0;

			rc = rdmem_echo(h[i], buf, (uint32_t)s, &out, &len, NULL);
			if (rc == 0 && (len != (uint32_t)s || memcmp(out, buf, len)))
				rc = -1;
			free(out);
		}
		if (rc) {
			fprintf(stderr, "door_hold: client %d: %s\n", i, rdmem_strerror(rc));
			return 1;
		}
	}
	printf("held\n");
	fflush(stdout);
	while (fgetc(stdin) != EOF)
		;
	for (i = 0; i < n; i++)
		rdmem_close(h[i]);
	free(h);
	free(buf);
	return 0;
}
