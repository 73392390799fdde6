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

static int check_case_failed;
static int check_cases_failed;

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

static inline void check_run(const char *name, void (*fn)(void))
{
	check_case_failed = 0;
	fn();
	printf("%s - %s\n", check_case_failed ? "not ok" : "ok", name);
	fflush(stdout);
	check_cases_failed += check_case_failed;
}

#define RUN(fn) check_run(#fn, fn)

static inline void check_skip(const char *name, const char *why)
{
	printf("ok - %s # SKIP %s\n", name, why);
	fflush(stdout);
}

static inline int check_done(void)
{
	return check_cases_failed ? 1 : 0;
}

#endif
