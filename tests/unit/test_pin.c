/* test_pin.c - the agent's budget of pinned client memory (agent/pin.h):
 * both limits exactly (at the limit yes, one byte past no, nothing charged
 * by a refusal), the per-client and total refusals told apart, 0 refusing
 * everything, and threads charging and releasing at once never seen past
 * either limit, with everything given back at the end. */
#include <pthread.h>
#include <stdatomic.h>

#include "agent/pin.h"
#include "tests/check.h"

#define THREADS 4
#define ROUNDS	20000
#define UNIT	1000u

static void test_pin_limits_exact(void)
{
	struct rdmem_pin_budget b;

	REQUIRE(rdmem_pin_init(&b, 3, 3 * UNIT, 5 * UNIT) == 0);
	CHECK_EQ(rdmem_pin_charge(&b, 0, 3 * UNIT), RDMEM_PIN_OK);
	CHECK_EQ(rdmem_pin_charge(&b, 0, 1), RDMEM_PIN_CLIENT); /* one byte past its own */
	CHECK_EQ(rdmem_pin_charge(&b, 1, 2 * UNIT), RDMEM_PIN_OK);
	CHECK_EQ(rdmem_pin_total(&b), 5 * UNIT);
	CHECK_EQ(rdmem_pin_charge(&b, 2, 1), RDMEM_PIN_TOTAL); /* its own has room */
	CHECK_EQ(rdmem_pin_total(&b), 5 * UNIT);	       /* the refusal took nothing */
	CHECK_EQ(atomic_load(&b.client[2]), 0);
	CHECK_EQ(rdmem_pin_charge(&b, 3, 1), RDMEM_PIN_CLIENT); /* no such entry */
	CHECK_EQ(atomic_load(&b.refused_client), 2);
	CHECK_EQ(atomic_load(&b.refused_total), 1);
	rdmem_pin_release(&b, 0, 3 * UNIT);
	CHECK_EQ(rdmem_pin_charge(&b, 2, 3 * UNIT), RDMEM_PIN_OK);
	CHECK_EQ(rdmem_pin_charge(&b, 0, UINT64_MAX), RDMEM_PIN_CLIENT); /* no wrap */
	rdmem_pin_release(&b, 1, 2 * UNIT);
	rdmem_pin_release(&b, 2, 3 * UNIT);
	CHECK_EQ(rdmem_pin_total(&b), 0);
	rdmem_pin_fini(&b);
}

static void test_pin_zero_refuses_all(void)
{
	struct rdmem_pin_budget b;

	REQUIRE(rdmem_pin_init(&b, 2, 0, 1u << 20) == 0);
	CHECK_EQ(rdmem_pin_charge(&b, 0, 1), RDMEM_PIN_CLIENT);
	CHECK_EQ(rdmem_pin_charge(&b, 0, 0), RDMEM_PIN_OK); /* nothing is within nothing */
	rdmem_pin_fini(&b);
	REQUIRE(rdmem_pin_init(&b, 2, 1u << 20, 0) == 0);
	CHECK_EQ(rdmem_pin_charge(&b, 1, 1), RDMEM_PIN_TOTAL);
	CHECK_EQ(atomic_load(&b.client[1]), 0);
	rdmem_pin_fini(&b);
}

struct job {
	struct rdmem_pin_budget *b;
	uint32_t client;
	_Atomic int *over; /* set when a charge was seen past a limit */
};

static void *churn(void *arg)
{
	struct job *j = arg;
	uint64_t held = 0;
	int i;

	for (i = 0; i < ROUNDS; i++) {
		if (held && (i % 3 == 0 || held >= 4 * UNIT)) {
			rdmem_pin_release(j->b, j->client, UNIT);
			held -= UNIT;
		} else if (rdmem_pin_charge(j->b, j->client, UNIT) == RDMEM_PIN_OK) {
			held += UNIT;
		}
		if (rdmem_pin_total(j->b) > j->b->max_total ||
		    atomic_load_explicit(&j->b->client[j->client], memory_order_relaxed) >
			j->b->max_client)
			atomic_store(j->over, 1);
	}
	while (held) {
		rdmem_pin_release(j->b, j->client, UNIT);
		held -= UNIT;
	}
	return NULL;
}

/* Two threads per client entry, a total below the sum of the clients' own
 * limits, part of it held from the start: both limits bind (a lone thread
 * of client 1 already reaches the total), and neither is ever passed. */
static void test_pin_threads_never_over(void)
{
	struct rdmem_pin_budget b;
	struct job jobs[THREADS];
	pthread_t t[THREADS];
	_Atomic int over = 0;
	int i;

	REQUIRE(rdmem_pin_init(&b, THREADS / 2, 5 * UNIT, 7 * UNIT) == 0);
	REQUIRE(rdmem_pin_charge(&b, 0, 4 * UNIT) == RDMEM_PIN_OK);
	for (i = 0; i < THREADS; i++) {
		jobs[i] = (struct job){ &b, (uint32_t)(i / 2), &over };
		REQUIRE(pthread_create(&t[i], NULL, churn, &jobs[i]) == 0);
	}
	for (i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	rdmem_pin_release(&b, 0, 4 * UNIT);
	CHECK_EQ(atomic_load(&over), 0);
	CHECK_EQ(rdmem_pin_total(&b), 0);
	for (i = 0; i < THREADS / 2; i++)
		CHECK_EQ(atomic_load(&b.client[i]), 0);
	CHECK(atomic_load(&b.refused_total) > 0);  /* the total did bind */
	CHECK(atomic_load(&b.refused_client) > 0); /* and so did client 0's own */
	rdmem_pin_fini(&b);
}

int main(void)
{
	RUN(test_pin_limits_exact);
	RUN(test_pin_zero_refuses_all);
	RUN(test_pin_threads_never_over);
	return check_done();
}
