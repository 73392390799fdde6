/* yield_floor.c - the floor under any round trip between two processes that
 * share one CPU: a parent and a child pass one shared word back and forth,
 * each waiting for its turn with sched_yield() (spinning cannot help: the
 * peer cannot run while we spin). Two context switches per round trip and
 * nothing else, so a front door whose app and agent share a CPU cannot beat
 * it. Prints "p50_us p99_us" over N round trips. Run it under taskset -c C.
 *   yield_floor [N]   (default 100000)
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* Waits until *turn == want. Acquire pairs with the peer's release store. */
static void wait_turn(_Atomic uint64_t *turn, uint64_t want)
{
	while (atomic_load_explicit(turn, memory_order_acquire) != want)
		sched_yield();
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 10) : 100000;
	_Atomic uint64_t *turn;
	uint64_t *lat;
	pid_t child;
	int status;

	if (n < 1 || n > 10000000) {
		fprintf(stderr, "yield_floor: N must be 1..10000000\n");
		return 2;
	}
	turn = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	lat = calloc((size_t)n, sizeof(*lat));
	if (turn == MAP_FAILED || !lat) {
		perror("yield_floor: memory");
		return 1;
	}
	child = fork();
	if (child < 0) {
		perror("yield_floor: fork");
		return 1;
	}
	if (child == 0) {
		for (uint64_t i = 0; i < (uint64_t)n; i++) {
			wait_turn(turn, 2 * i + 1);
			/* Release: the parent's acquire load sees our turn. */
			atomic_store_explicit(turn, 2 * i + 2, memory_order_release);
		}
		_exit(0);
	}
	for (uint64_t i = 0; i < (uint64_t)n; i++) {
		uint64_t t0 = now_ns();

		atomic_store_explicit(turn, 2 * i + 1, memory_order_release);
		wait_turn(turn, 2 * i + 2);
		lat[i] = now_ns() - t0;
	}
	if (waitpid(child, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "yield_floor: the child failed\n");
		return 1;
	}
	qsort(lat, (size_t)n, sizeof(*lat), cmp_u64);
	printf("%.2f %.2f\n", (double)lat[n / 2] / 1e3, (double)lat[(n * 99) / 100] / 1e3);
	free(lat);
	return 0;
}
