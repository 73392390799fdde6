/* test_pin_budget.c - the agent's budget of pinned client memory
 * (agent/pin.h, --max-client-mem, --max-total-mem), end to end: a real
 * rdmem-server and rdmem-agent, libclient handles.
 *
 * Zero copy registers one client slot at a time (its payload), charged to
 * the budget: the first large call pins one slot, not the client's whole
 * area. Past the budget an idle registration is let go (any client's for the
 * total, the caller's own for its limit); with none idle, AUTO copies the
 * call over TCP and a forced BULK or LAZY call fails -ENOMEM, never with
 * wrong bytes, and the budget is never passed. Both sides of the limit.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/route.h"
#include "check.h"
#include "e2e.h"
#include "shm/segment.h"

#define OBJ    "big:64k"
#define OBJLEN 7

static struct e2e e;
static uint64_t slot_bytes; /* what one slot's registration covers */

static long agent_kb(const char *field)
{
	return proc_status_kb(e.agent.pid, field);
}

/* Starts the agent with extra flags (NULL-terminated); e.h attached. */
static int agent_with(const char *a, const char *b, const char *c, const char *d)
{
	return e2e_agent(&e, a, b, c, d, NULL);
}

/* A LARGE_GET of the server's 64 KiB object on path through h: 0 with the
 * bytes checked, or the call's rc. */
static int large_get(rdmem_t *h, uint8_t path, uint8_t *carried)
{
	struct rdmem_rpc rpc;
	int rc;

	rdmem_rpc_init(&rpc, RDMEM_OP_LARGE_GET);
	rpc.key = OBJ;
	rpc.key_len = OBJLEN;
	rpc.path = path;
	rc = rdmem_submit(h, &rpc);
	if (rc < 0)
		return rc;
	rc = rdmem_wait(h, &rpc);
	if (rc == 0 && rdmem_large_verify(OBJ, rpc.rval, rpc.rlen) != 0)
		rc = -EBADMSG; /* wrong bytes: what must never happen */
	if (carried)
		*carried = rpc.rpath;
	rdmem_rpc_free(&rpc);
	return rc;
}

/* A 64 KiB PUT on path, read back over TCP: 0, or the first rc that failed. */
static int bulk_put(rdmem_t *h, uint8_t path, uint32_t seed)
{
	struct rdmem_opts o = { path, 10000, NULL }, tcp = { RDMEM_PATH_TCP, 10000, NULL };
	static uint8_t v[65536];
	void *got = NULL;
	uint32_t len = 0;
	int rc;

	e2e_fill(v, sizeof(v), seed);
	rc = rdmem_put(h, "pin-put", 7, v, sizeof(v), &o);
	if (rc == 0)
		rc = rdmem_get(h, "pin-put", 7, &got, &len, &tcp);
	if (rc == 0 && (len != sizeof(v) || memcmp(got, v, len) != 0))
		rc = -EBADMSG;
	free(got);
	return rc;
}

/* With the defaults, the first zero-copy call pins its slot's payload and
 * nothing else of the client's area (32 slots here). */
static void test_default_pins_one_slot(void)
{
	long pin;

	REQUIRE(agent_with(NULL, NULL, NULL, NULL) == 0);
	pin = agent_kb("VmPin");
	CHECK_EQ(e2e_stat(&e, "frontdoor.pin_bytes"), 0);
	CHECK_EQ(e2e_stat(&e, "frontdoor.pin_max_client"), 64ll << 20);
	CHECK_EQ(e2e_stat(&e, "frontdoor.pin_max_total"), 256ll << 20);
	CHECK_EQ(large_get(e.h, RDMEM_PATH_LAZY, NULL), 0);
	CHECK_EQ(e2e_stat(&e, "frontdoor.pin_bytes"), (long long)slot_bytes);
	CHECK_EQ(e2e_stat(&e, "rdma.areas_live"), 1);
	CHECK_EQ(large_get(e.h, RDMEM_PATH_LAZY, NULL), 0); /* the same slot: no new one */
	CHECK_EQ(e2e_stat(&e, "rdma.area_regs"), 1);
	printf("# one slot registered: %llu KiB of a %llu KiB area; agent VmPin %ld -> %ld kB\n",
	       (unsigned long long)slot_bytes >> 10, (unsigned long long)(32 * slot_bytes) >> 10,
	       pin, agent_kb("VmPin"));
	if (!strcmp(e.fabric, "verbs")) /* pinned: the slot, not 32 of them */
		CHECK(agent_kb("VmPin") - pin > 512 &&
		      agent_kb("VmPin") - pin < (long)(2 * slot_bytes / 1024));
	e2e_stop_agent(&e);
}

/* --max-client-mem 0: nothing is ever pinned. AUTO still moves large
 * values (over TCP), byte-exact; forced BULK and LAZY say -ENOMEM. */
static void test_zero_budget(void)
{
	uint8_t carried = 0;

	REQUIRE(agent_with("--max-client-mem", "0", NULL, NULL) == 0);
	CHECK_EQ(large_get(e.h, RDMEM_PATH_LAZY, NULL), -ENOMEM);
	CHECK_EQ(bulk_put(e.h, RDMEM_PATH_BULK, 1), -ENOMEM);
	CHECK_EQ(large_get(e.h, RDMEM_PATH_AUTO, &carried), 0);
	CHECK_EQ(carried, RDMEM_PATH_TCP);
	CHECK_EQ(bulk_put(e.h, RDMEM_PATH_AUTO, 2), 0);
	CHECK_EQ(e2e_stat(&e, "frontdoor.pin_bytes"), 0);
	CHECK_EQ(e2e_stat(&e, "rdma.areas_live"), 0);
	CHECK(e2e_stat(&e, "rdma.pin_refused") >= 3);
	/* A limit below one slot refuses before any charge, eviction or shed. */
	CHECK_EQ(e2e_stat(&e, "frontdoor.pin_refused_client"), 0);
	CHECK_EQ(e2e_stat(&e, "rdma.pin_evicted"), 0);
	e2e_stop_agent(&e);
}

/* --max-total-mem of one slot, two clients taking turns: each turn lets the
 * other's idle registration go (after a fence when a BULK request's WRs may
 * still read it), and the total is never passed. */
static void test_total_of_one_slot_takes_turns(void)
{
	char total[32];
	rdmem_t *b = NULL;
	int i, bad = 0;

	snprintf(total, sizeof(total), "%llu", (unsigned long long)slot_bytes);
	REQUIRE(agent_with("--max-total-mem", total, NULL, NULL) == 0);
	REQUIRE(rdmem_open(e.shm, &b) == 0);
	for (i = 0; i < 8; i++) {
		bad += large_get(e.h, RDMEM_PATH_LAZY, NULL) != 0;
		bad += bulk_put(b, RDMEM_PATH_BULK, (uint32_t)i) != 0;
		bad += e2e_stat(&e, "frontdoor.pin_bytes") > (long long)slot_bytes;
		bad += bulk_put(e.h, RDMEM_PATH_BULK, (uint32_t)i + 100) != 0;
		bad += large_get(b, RDMEM_PATH_LAZY, NULL) != 0;
	}
	CHECK_EQ(bad, 0);
	printf("# 32 forced calls taking turns: %lld registrations, %lld evicted\n",
	       e2e_stat(&e, "rdma.area_regs"), e2e_stat(&e, "rdma.pin_evicted"));
	CHECK(e2e_stat(&e, "rdma.pin_evicted") >= 15);
	CHECK_EQ(e2e_stat(&e, "frontdoor.pin_bytes"), (long long)slot_bytes);
	rdmem_close(b);
	e2e_stop_agent(&e);
}

/* A client that detached gives its registrations back to the budget. */
static void test_detach_gives_back(void)
{
	rdmem_t *b = NULL;
	int i;

	REQUIRE(agent_with(NULL, NULL, NULL, NULL) == 0);
	REQUIRE(rdmem_open(e.shm, &b) == 0);
	CHECK_EQ(large_get(b, RDMEM_PATH_LAZY, NULL), 0);
	CHECK_EQ(bulk_put(b, RDMEM_PATH_BULK, 5), 0);
	CHECK_EQ(e2e_stat(&e, "frontdoor.pin_bytes"), (long long)slot_bytes);
	rdmem_close(b);
	for (i = 0; i < 300 && e2e_stat(&e, "frontdoor.pin_bytes") > 0; i++)
		proc_sleep_ms(10);
	CHECK_EQ(e2e_stat(&e, "frontdoor.pin_bytes"), 0);
	CHECK_EQ(e2e_stat(&e, "rdma.areas_live"), 0);
	e2e_stop_agent(&e);
}

/* Two servers, a total of one slot: the link that registered it stays idle
 * while the other needs room. A link can let go only of its own, so the
 * refused one asks every session to shed its idle registrations (agent/pin.h):
 * the second server's calls must get zero copy soon after, not never. */
static void test_shed_across_links(void)
{
	char bin[512], port[16], tcp[16], list[96], total[32], agent_bin[512], name[2][32];
	char *sargv[] = { bin,		"-b", (char *)e2e_addr(), "-p",	    port,
			  "--tcp-port", tcp,  "--fabric",	  e.fabric, NULL };
	struct proc srv2 = { 0 }, ag = { 0 };
	unsigned p2 = proc_free_port_pair();
	struct rdmem_opts bulk = { RDMEM_PATH_BULK, 10000, NULL };
	static uint8_t v[65536];
	char key[2][32];
	uint64_t seeds[2];
	rdmem_t *h = NULL;
	int i, n, rc = -1, nomem = 0;

	snprintf(bin, sizeof(bin), "%s/rdmem-server", proc_bin());
	snprintf(port, sizeof(port), "%u", p2);
	snprintf(tcp, sizeof(tcp), "%u", p2 + 1);
	REQUIRE(p2 && proc_start(&srv2, "server2", sargv, "listening tcp", E2E_READY_MS) == 0);
	snprintf(name[0], sizeof(name[0]), "%s:%u", e2e_addr(), e.port);
	snprintf(name[1], sizeof(name[1]), "%s:%u", e2e_addr(), p2);
	snprintf(list, sizeof(list), "%s,%s", name[0], name[1]);
	snprintf(total, sizeof(total), "%llu", (unsigned long long)slot_bytes);
	snprintf(agent_bin, sizeof(agent_bin), "%s/rdmem-agent", proc_bin());
	{
		char *aargv[] = { agent_bin, "-s",	   list,  "--fabric",
				  e.fabric,  "--shm-name", e.shm, "--clients",
				  "4",	     "--slots",	   "32",  "--max-total-mem",
				  total,     NULL };

		REQUIRE(proc_start(&ag, "agent-2s", aargv, "ready:", E2E_READY_MS) == 0);
	}
	for (i = 0; i < 3000 && proc_log_count(&ag, "rdma: session") < 2; i++)
		proc_sleep_ms(10);
	REQUIRE(proc_log_count(&ag, "rdma: session") == 2);
	REQUIRE(rdmem_open(e.shm, &h) == 0);
	/* A key of each server, as the agent routes (agent/route.h). */
	seeds[0] = rdmem_route_server_seed(name[0]);
	seeds[1] = rdmem_route_server_seed(name[1]);
	for (n = 0, i = 0; n < 2 && i < 1000; i++) {
		char k[32];
		uint32_t owner;

		snprintf(k, sizeof(k), "shed-%d", i);
		owner = rdmem_route_pick(seeds, 2, rdmem_route_key_hash(k, strlen(k)));
		if ((owner == 0 && n == 0) || (owner == 1 && n == 1))
			snprintf(key[n++], sizeof(key[0]), "%s", k);
	}
	REQUIRE(n == 2);
	e2e_fill(v, sizeof(v), 9);
	CHECK_EQ(rdmem_put(h, key[0], (uint32_t)strlen(key[0]), v, sizeof(v), &bulk), 0);
	/* Server 2's link holds nothing: it must get the slot from link 1. */
	for (i = 0; i < 100; i++) {
		rc = rdmem_put(h, key[1], (uint32_t)strlen(key[1]), v, sizeof(v), &bulk);
		if (rc != -ENOMEM)
			break;
		nomem++;
		proc_sleep_ms(10);
	}
	printf("# second server's first zero-copy call: %d -ENOMEM first, then %s\n", nomem,
	       rdmem_strerror(rc));
	CHECK_EQ(rc, 0);
	rdmem_close(h);
	proc_stop(&ag, SIGTERM, 5000);
	proc_stop(&srv2, SIGTERM, 5000);
	e2e_unlink_door(e.shm);
}

/* One byte under one slot: no registration fits. */
static void test_total_one_byte_short(void)
{
	char total[32];

	snprintf(total, sizeof(total), "%llu", (unsigned long long)slot_bytes - 1);
	REQUIRE(agent_with("--max-total-mem", total, NULL, NULL) == 0);
	CHECK_EQ(large_get(e.h, RDMEM_PATH_LAZY, NULL), -ENOMEM);
	CHECK_EQ(e2e_stat(&e, "frontdoor.pin_bytes"), 0);
	CHECK(e2e_stat(&e, "rdma.pin_refused") >= 1);
	CHECK_EQ(e2e_stat(&e, "frontdoor.pin_refused_total"), 0); /* never charged */
	e2e_stop_agent(&e);
}

/* 128 calls on path, 32 in flight at a time, through e.h: how many came
 * back right (byte-exact), -ENOMEM, or wrong. */
static void window_of_32(uint8_t path, int *ok, int *nomem, int *wrong)
{
	struct rdmem_rpc rpc[32];
	int round, i;

	for (round = 0; round < 4; round++) {
		for (i = 0; i < 32; i++) {
			rdmem_rpc_init(&rpc[i], RDMEM_OP_LARGE_GET);
			rpc[i].key = OBJ;
			rpc[i].key_len = OBJLEN;
			rpc[i].path = path;
			REQUIRE(rdmem_submit(e.h, &rpc[i]) == 0);
		}
		for (i = 0; i < 32; i++) {
			int rc = rdmem_wait(e.h, &rpc[i]);
			int right =
			    rc == 0 && rdmem_large_verify(OBJ, rpc[i].rval, rpc[i].rlen) == 0;

			*ok += right;
			*nomem += rc == -ENOMEM;
			*wrong += rc == 0 && !right;
			rdmem_rpc_free(&rpc[i]);
		}
		CHECK(e2e_stat(&e, "frontdoor.pin_bytes") <= (long long)(2 * slot_bytes));
	}
}

/*
 * 32 calls at once from one client allowed two slots. A forced LAZY call is
 * registered before it is posted: one that finds both slots in use waits
 * for a call to finish. An EAGER call the server answers by reference (64
 * KiB, over the 16 KiB response slot) needs its slot only for the READ: one
 * that waits moves to the back of the READ queue, so the READs behind it,
 * whose calls hold the two slots, go first. All come back right.
 */
static void test_window_over_client_limit(void)
{
	static const uint8_t paths[] = { RDMEM_PATH_LAZY, RDMEM_PATH_EAGER };
	char limit[32];
	size_t p;

	snprintf(limit, sizeof(limit), "%llu", (unsigned long long)(2 * slot_bytes));
	REQUIRE(agent_with("--max-client-mem", limit, NULL, NULL) == 0);
	for (p = 0; p < sizeof(paths); p++) {
		long long waits = e2e_stat(&e, "rdma.pin_waits");
		int ok = 0, nomem = 0, wrong = 0;

		window_of_32(paths[p], &ok, &nomem, &wrong);
		printf(
		    "# 128 forced %s calls, 32 at a time, 2 slots allowed: %d right, %d -ENOMEM, "
		    "%lld tries waited for a slot's registration\n",
		    paths[p] == RDMEM_PATH_LAZY ? "LAZY" : "EAGER (by reference)", ok, nomem,
		    e2e_stat(&e, "rdma.pin_waits") - waits);
		CHECK_EQ(wrong, 0);
		CHECK_EQ(ok, 128);
		CHECK(e2e_stat(&e, "rdma.pin_waits") > waits);
	}
	e2e_stop_agent(&e);
}

int main(int argc, char **argv)
{
	const char *fabric = argc > 1 ? argv[1] : "shm";
	struct rdmem_shm_geom g;

	rdmem_log_init("test_pin_budget", 0);
	if (!strcmp(fabric, "tcp")) {
		printf("1..0 # SKIP the budget covers RDMA registrations: no TCP run\n");
		return 0;
	}
	if (e2e_init(&e, fabric) < 0 || e2e_server(&e, fabric, NULL) < 0 ||
	    rdmem_shm_geom_compute(4, 32, RDMEM_DEFAULT_MAX_VALUE, &g) < 0) {
		printf("not ok - start the server over %s\n", fabric);
		e2e_fini(&e);
		return 1;
	}
	slot_bytes = g.payload_cap;
	RUN(test_default_pins_one_slot);
	RUN(test_zero_budget);
	RUN(test_total_of_one_slot_takes_turns);
	RUN(test_total_one_byte_short);
	RUN(test_detach_gives_back);
	RUN(test_shed_across_links);
	RUN(test_window_over_client_limit);
	e2e_fini(&e);
	return check_done();
}
