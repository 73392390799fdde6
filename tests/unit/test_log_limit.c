/* test_log_limit.c - rdmem_log_limited(): a message a peer can provoke at any
 * rate writes at most RDMEM_LOG_BURST lines per window and per call site, and
 * the next window's first line says how many it left out. */
#include "rdmem/util.h"
#include "tests/check.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char captured[1 << 16];

/* Runs fn with stderr sent to a file; returns the number of lines written. */
static int count_lines(void (*fn)(int), int arg)
{
	FILE *tmp = tmpfile();
	int saved = dup(2), lines = 0;
	size_t n;

	if (!tmp || saved < 0)
		return -1;
	fflush(stderr);
	dup2(fileno(tmp), 2);
	fn(arg);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(tmp);
	n = fread(captured, 1, sizeof(captured) - 1, tmp);
	captured[n] = 0;
	fclose(tmp);
	for (size_t i = 0; i < n; i++)
		lines += captured[i] == '\n';
	return lines;
}

static void flood_one_site(int times)
{
	for (int i = 0; i < times; i++)
		rdmem_warn_limited("peer %d sent garbage", i);
}

static void flood_two_sites(int times)
{
	for (int i = 0; i < times; i++) {
		rdmem_warn_limited("site a %d", i);
		rdmem_warn_limited("site b %d", i);
	}
}

static void test_burst_then_quiet(void)
{
	CHECK_EQ(count_lines(flood_one_site, 100000), RDMEM_LOG_BURST);
	CHECK(strstr(captured, "peer 0 sent garbage") != NULL);
	CHECK(strstr(captured, "peer 5 sent garbage") == NULL);
}

static void test_sites_are_separate(void)
{
	/* One noisy site does not silence another. */
	CHECK_EQ(count_lines(flood_two_sites, 1000), 2 * RDMEM_LOG_BURST);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Starts just after a window's edge, so the first loop stays inside one. */
static void sleep_to_window_start(void)
{
	uint64_t into = rdmem_now_ns() % rdmem_log_window_ns;

	sleep_ms((long)((rdmem_log_window_ns - into) / 1000000) + 1);
}

static void flood_across_windows(int times)
{
	sleep_to_window_start();
	for (int w = 0; w < 2; w++) {
		for (int i = 0; i < times; i++)
			rdmem_warn_limited("window %d line %d", w, i);
		sleep_ms(60); /* past the 50 ms window the test set */
	}
}

static void test_next_window_reports_what_it_left_out(void)
{
	uint64_t saved = rdmem_log_window_ns;

	rdmem_log_window_ns = 50ull * 1000000ull;
	/* Window 1: BURST lines; window 2: the count line, then BURST lines. */
	CHECK_EQ(count_lines(flood_across_windows, 20), 2 * RDMEM_LOG_BURST + 1);
	CHECK(strstr(captured, "(15 more like the next line were not logged)") != NULL);
	CHECK(strstr(captured, "window 1 line 0") != NULL);
	rdmem_log_window_ns = saved;
}

int main(void)
{
	rdmem_log_init("test_log_limit", 0);
	RUN(test_burst_then_quiet);
	RUN(test_sites_are_separate);
	RUN(test_next_window_reports_what_it_left_out);
	return check_done();
}
