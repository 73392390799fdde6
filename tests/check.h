/* check.h - the unit-test harness: named cases, non-fatal checks, and one
 * "ok - " / "not ok - " line per case that scripts/run-tests.sh counts.
 *
 *   static void test_x(void) { CHECK(1 + 1 == 2); CHECK_EQ(f(), 3); }
 *   int main(void) { RUN(test_x); return check_done(); }
 */
#ifndef RDMEM_CHECK_H
#define RDMEM_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_case_failed;
static int check_cases_failed;
static int check_in_case;	    /* inside RUN: the case's line reports its checks */
static int check_outside_failed;    /* checks failed outside any RUN (set-up, shutdown) */
static const char *check_case_skip; /* set by check_skip inside RUN: why the case skipped */

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			check_case_failed = 1;                                                     \
			fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
		}                                                                                  \
	} while (0)

#define CHECK_EQ(a, b)                                                                             \
	do {                                                                                       \
		long long check_a_ = (long long)(a), check_b_ = (long long)(b);                    \
		if (check_a_ != check_b_) {                                                        \
			check_case_failed = 1;                                                     \
			fprintf(stderr, "  %s:%d: %s == %lld, expected %s == %lld\n", __FILE__,    \
				__LINE__, #a, check_a_, #b, check_b_);                             \
		}                                                                                  \
	} while (0)

/* Stops the case early where going on would only crash. Evaluates cond once. */
#define REQUIRE(cond)                                                                              \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			check_case_failed = 1;                                                     \
			fprintf(stderr, "  %s:%d: REQUIRE(%s) failed\n", __FILE__, __LINE__,       \
				#cond);                                                            \
			return;                                                                    \
		}                                                                                  \
	} while (0)

/* Failed checks made outside any RUN (set-up before the first case, a
 * shutdown after the last) would be lost when the next case resets the flag:
 * keep them so check_done reports and fails them. */
static inline void check_fold_outside(void)
{
	if (!check_in_case && check_case_failed)
		check_outside_failed++;
	check_case_failed = 0;
}

/* RDMEM_TEST_FAIL_FAST=1 (not empty, not 0): exit after the first failed
 * case. Its stderr lines may be lost where a test pipes stderr through a
 * thread of its own (test_ring_hostile, test_client_cutoff). */
static inline int check_fail_fast(void)
{
	const char *v = getenv("RDMEM_TEST_FAIL_FAST");

	return v && *v && strcmp(v, "0") != 0;
}

static inline void check_run(const char *name, void (*fn)(void))
{
	check_fold_outside();
	check_in_case = 1;
	check_case_skip = NULL;
	fn();
	check_in_case = 0;
	/* One line per case: a skipped case counts as a skip only, never also
	 * as a pass; a case that failed before skipping still fails. */
	if (check_case_skip && !check_case_failed)
		printf("ok - %s # SKIP %s\n", name, check_case_skip);
	else
		printf("%s - %s\n", check_case_failed ? "not ok" : "ok", name);
	fflush(stdout);
	/* scripts/mutate.sh needs one failed case, not the rest: the children
	 * a test started (tests/proc.h) get SIGTERM when it exits. */
	if (check_case_failed && check_fail_fast()) {
		fflush(stderr);
		exit(1);
	}
	check_cases_failed += check_case_failed;
	check_case_failed = 0;
}

#define RUN(fn) check_run(#fn, fn)

/* Inside RUN: the running case reports as skipped with this reason (name is
 * ignored, the case's own name is used). Outside RUN: a skipped case line of
 * its own. The reason must be a string literal or outlive the case. */
static inline void check_skip(const char *name, const char *why)
{
	if (check_in_case) {
		check_case_skip = why;
		return;
	}
	printf("ok - %s # SKIP %s\n", name, why);
	fflush(stdout);
}

/* The seed of a randomised test: RDMEM_SEED when set (to replay a run),
 * else dflt; printed either way so every failing run can be replayed. */
static inline unsigned check_seed(const char *what, unsigned dflt)
{
	const char *env = getenv("RDMEM_SEED");
	unsigned seed = env && *env ? (unsigned)strtoul(env, NULL, 0) : dflt;

	printf("# %s seed %u (RDMEM_SEED=%u replays it)\n", what, seed, seed);
	fflush(stdout);
	return seed;
}

static inline int check_done(void)
{
	check_fold_outside();
	if (check_outside_failed) {
		printf("not ok - checks outside any case (set-up or shutdown): %d failed\n",
		       check_outside_failed);
		fflush(stdout);
	}
	return check_cases_failed || check_outside_failed ? 1 : 0;
}

#endif
