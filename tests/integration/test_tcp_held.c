/* test_tcp_held.c - one client's deadlines cannot break the TCP connection
 * the agent shares among all its clients.
 *
 * The agent sends a request over TCP straight from the client's front-door
 * slot, so a call whose deadline passes while its bytes are half on the wire
 * cannot simply be let go: the kernel still reads the slot. It used to tear
 * the connection down instead ("a call timed out half-sent"), and every
 * other client's calls were resent on a new one: a client with large values
 * and deadlines of a few milliseconds could make the agent reconnect at will.
 * Now such a call is held until its bytes are with the kernel, then answered
 * TIMEOUT (tcp.timeouts_held), and the connection stays.
 *
 * Here the server is stopped (SIGSTOP) while 24 PUTs of 1 MB go out over
 * TCP with a 100 ms deadline: the kernel's buffers fill and some request is
 * half sent when the deadlines pass. Checked: every PUT times out, at least
 * one was held, the server resumed, the agent made no new TCP connection,
 * each key holds its whole value or nothing, and a GET still works.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "e2e.h"

#define T_CALLS	  24
#define T_VALUE	  1000000
#define T_TIMEOUT 100 /* ms */

static struct e2e e;
static uint8_t vals[T_CALLS][T_VALUE];

static int submit_put(struct rdmem_rpc *rpc, const char *key, const uint8_t *val)
{
	rdmem_rpc_init(rpc, RDMEM_OP_KV_PUT);
	rpc->key = key;
	rpc->key_len = (uint32_t)strlen(key);
	rpc->val = val;
	rpc->val_len = T_VALUE;
	rpc->path = RDMEM_PATH_TCP;
	rpc->timeout_ms = T_TIMEOUT;
	return rdmem_submit(e.h, rpc);
}

/* Waits up to ms for every call to end; returns how many did. */
static int wait_all(struct rdmem_rpc *rpc, int *done, int n, int ms)
{
	uint64_t end = rdmem_now_ns() + (uint64_t)ms * 1000000ull;
	int left = n, i;

	while (left && rdmem_now_ns() < end) {
		for (i = 0; i < n; i++)
			if (!done[i] && rdmem_poll(e.h, &rpc[i]) == 1) {
				done[i] = 1;
				left--;
			}
		proc_sleep_ms(1);
	}
	return n - left;
}

/* Each key holds the whole value its PUT sent, or nothing. */
static int keys_whole_or_absent(char keys[][32])
{
	struct rdmem_opts o = { RDMEM_PATH_TCP, 5000, NULL };
	int i, bad = 0, stored = 0;

	for (i = 0; i < T_CALLS; i++) {
		void *got = NULL;
		uint32_t len = 0;
		int rc = rdmem_get(e.h, keys[i], (uint32_t)strlen(keys[i]), &got, &len, &o);

		if (rc == 0 && len == T_VALUE && !memcmp(got, vals[i], T_VALUE))
			stored++;
		else if (rc != -ENOENT) {
			fprintf(stderr, "  %s: %d with %u bytes, not its value\n", keys[i], rc,
				len);
			bad++;
		}
		free(got);
	}
	printf("# PUTs that landed whole after their timeout: %d of %d\n", stored, T_CALLS);
	return bad;
}

static void test_half_sent_timeout_keeps_the_connection(void)
{
	struct rdmem_opts tcp = { RDMEM_PATH_TCP, 3000, NULL };
	static struct rdmem_rpc rpc[T_CALLS];
	static char keys[T_CALLS][32];
	int done[T_CALLS] = { 0 }, i, timeouts = 0;
	long long connects, held;

	/* The connection exists before the test: its count is the baseline. */
	REQUIRE(rdmem_put(e.h, "warm", 4, "v", 1, &tcp) == 0);
	connects = e2e_stat(&e, "tcp.connects");
	CHECK(connects >= 1); /* the stat is there: the equality below means something */
	kill(e.server.pid, SIGSTOP);
	REQUIRE(proc_stop_wait(e.server.pid, 2000) == 0);
	for (i = 0; i < T_CALLS; i++) {
		snprintf(keys[i], sizeof(keys[i]), "held-%02d", i);
		e2e_fill(vals[i], T_VALUE, (uint32_t)i + 11);
		REQUIRE(submit_put(&rpc[i], keys[i], vals[i]) == 0);
	}
	CHECK_EQ(wait_all(rpc, done, T_CALLS, 5000), T_CALLS);
	for (i = 0; i < T_CALLS; i++)
		timeouts += rpc[i].rc == -ETIMEDOUT;
	CHECK_EQ(timeouts, T_CALLS);
	proc_sleep_ms(150); /* the agent's scans (every 5 ms) find the half-sent one */
	held = e2e_stat(&e, "tcp.timeouts_held");
	printf("# timed-out calls held until sent: %lld\n", held);
	CHECK(held >= 1);
	kill(e.server.pid, SIGCONT);
	for (i = 0; i < 300 && e2e_stat(&e, "tcp.inflight") != 0; i++)
		proc_sleep_ms(10);
	CHECK_EQ(e2e_stat(&e, "tcp.inflight"), 0);
	CHECK_EQ(keys_whole_or_absent(keys), 0);
	/* The one connection carried it all. */
	CHECK_EQ(e2e_stat(&e, "tcp.connects"), connects);
	CHECK(!proc_log_has(&e.agent, "timed out half-sent"));
	for (i = 0; i < T_CALLS; i++)
		rdmem_rpc_free(&rpc[i]);
}

/*
 * The front door's calls in flight when idle, as a stats call sees them (it
 * counts itself). The lowest of 10 readings over 100 ms: the agent publishes
 * a reply before it counts the call out (agent/frontdoor_ring.c: the count
 * releases the slot to the dead-client scan), so the call that just returned
 * may still be counted. A single reading of 2 once made a CI run wait for a
 * value the gauge had already left (2026-12-07).
 */
static long long front_door_idle(void)
{
	long long low = LLONG_MAX, v;
	int i;

	for (i = 0; i < 10; i++) {
		if (i)
			proc_sleep_ms(10);
		v = e2e_stat(&e, "frontdoor.inflight");
		if (v >= 0 && v < low)
			low = v;
	}
	return low == LLONG_MAX ? -1 : low;
}

/*
 * A held call must not be held for good: a server stopped for good leaves
 * its kernel answering with a zero window, and the call's bytes never all
 * go. 2 s past its deadline the agent withdraws it anyway, which breaks the
 * connection (RDMEM_TCP_HELD_MAX_NS, agent/tcp_actor.c); the connection's
 * TCP_USER_TIMEOUT would end it only 3.3-5.5 s after, and a server stalled
 * mid-reply (its kernel acknowledging everything) never. The front door
 * gets the slots back: what is timed is the front door's calls in flight.
 * Not the TCP window's (tcp.inflight): a call whose bytes all reached the
 * kernel before its cap (as they do on a loaded host, the send buffer
 * growing) is answered then, without breaking the connection, and its
 * window slot waits for a reply the stopped server never sends until the
 * kernel ends the connection. Timing that gauge failed 1 run in 4 beside a
 * CI run on 2026-12-07 (3.49 s), and CI's ASan suite twice.
 */
static void test_held_calls_leave_with_a_stuck_connection(void)
{
	static struct rdmem_rpc rpc[T_CALLS];
	static char keys[T_CALLS][32];
	int done[T_CALLS] = { 0 }, i;
	long long held = e2e_stat(&e, "tcp.timeouts_held"), inflight = -1, fd_busy = -1;
	long long fd_idle = front_door_idle();
	uint64_t t0;
	double secs;

	REQUIRE(fd_idle >= 1); /* the stats call asking counts itself */

	kill(e.server.pid, SIGSTOP);
	REQUIRE(proc_stop_wait(e.server.pid, 2000) == 0);
	for (i = 0; i < T_CALLS; i++) {
		snprintf(keys[i], sizeof(keys[i]), "stuck-%02d", i);
		REQUIRE(submit_put(&rpc[i], keys[i], vals[i]) == 0);
	}
	CHECK_EQ(wait_all(rpc, done, T_CALLS, 5000), T_CALLS);
	t0 = rdmem_now_ns();
	proc_sleep_ms(300);
	CHECK(e2e_stat(&e, "tcp.timeouts_held") > held);
	/* At most the baseline: one read too high (a call counted out late for
	 * 100 ms) must not make this wait for a value already passed. */
	for (i = 0;
	     i < 1000 && ((fd_busy = e2e_stat(&e, "frontdoor.inflight")) < 0 || fd_busy > fd_idle);
	     i++)
		proc_sleep_ms(10);
	secs = (double)(rdmem_now_ns() - t0) / 1e9;
	printf("# held calls answered %.2f s after their timeout, server still stopped (the "
	       "agent's cap: 2 s past the deadline)\n",
	       secs);
	/* Not asserted: a held call whose bytes reach the kernel before its cap
	 * is answered without this. */
	printf("# a held call was withdrawn at the agent's cap: %s\n",
	       proc_log_has(&e.agent, "past its deadline: breaking the connection") ? "yes" : "no");
	CHECK(fd_busy >= 0 && fd_busy <= fd_idle);
	/* By the agent's cap (or sooner), not the kernel's TCP_USER_TIMEOUT. */
	CHECK(secs < 2.6);
	/* And the window's slots come back with the connection, by 5.5 s. */
	for (i = 0; i < 600 && (inflight = e2e_stat(&e, "tcp.inflight")) != 0; i++)
		proc_sleep_ms(10);
	CHECK_EQ(inflight, 0);
	kill(e.server.pid, SIGCONT);
	for (i = 0; i < T_CALLS; i++)
		rdmem_rpc_free(&rpc[i]);
}

int main(void)
{
	rdmem_log_init("test_tcp_held", 0);
	if (e2e_init(&e, "shm") < 0 || e2e_server(&e, "shm", NULL) < 0 || e2e_agent(&e, NULL) < 0) {
		printf("not ok - start the server and agent\n");
		e2e_fini(&e);
		return 1;
	}
	RUN(test_half_sent_timeout_keeps_the_connection);
	RUN(test_held_calls_leave_with_a_stuck_connection);
	e2e_fini(&e);
	return check_done();
}
