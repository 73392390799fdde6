/* test_opts_agent.c - rdmem-agent's numeric options (rdmem_agent_ranges in
 * agent/main.c, included here for its table) against the built program, and
 * the --resp-max-memory floor that --max-value sets. */
#define main rdmem_agent_main_under_test
#include "agent/main.c"
#undef main

#include "tests/opts_check.h"

static void test_agent_ranges(void)
{
	static struct rdmem_agent_opts o;

	opts_check("rdmem-agent", "-s 127.0.0.1", rdmem_agent_ranges,
		   RDMEM_ARRAY_SIZE(rdmem_agent_ranges), &o);
}

static int opts_run_agent_slots(char *out, size_t cap)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "%s/rdmem-agent -s 127.0.0.1 --slots 65", proc_bin());
	return opts_run(cmd, out, cap);
}

static void test_agent_refusals(void)
{
	static struct rdmem_agent_opts o;
	char out[4096];

	/* a number option takes no size suffix, a size option does */
	CHECK_EQ(rdmem_opt_num_parse(rdmem_agent_ranges, RDMEM_ARRAY_SIZE(rdmem_agent_ranges),
				     OPT_SLOTS, "1k", "rdmem-agent", &o),
		 -EINVAL);
	CHECK_EQ(rdmem_opt_num_parse(rdmem_agent_ranges, RDMEM_ARRAY_SIZE(rdmem_agent_ranges),
				     OPT_MAX_VALUE, "64k", "rdmem-agent", &o),
		 0);
	CHECK_EQ(o.fd.max_value, 64u << 10);
	CHECK_EQ(rdmem_opt_num_parse(rdmem_agent_ranges, RDMEM_ARRAY_SIZE(rdmem_agent_ranges), 'v',
				     "1", "rdmem-agent", &o),
		 -ENOENT);
	CHECK_EQ(opts_run_agent_slots(out, sizeof(out)), 2);
	CHECK(strstr(out, "rdmem-agent: --slots: '65' is not a number in [1, 64]"));
}

/* --resp-max-memory's floor grows with --max-value and --slots, past what
 * the range can say: a budget one connection could not live in is refused
 * at start, named. */
static void test_agent_resp_memory_floor(void)
{
	static struct rdmem_agent_opts o;
	char cmd[256], out[4096];

	rdmem_agent_defaults(&o);
	o.resp_port = 6380;
	o.resp.max_memory = 57935872ull; /* the floor at the defaults (test_resp_mem) */
	CHECK_EQ(rdmem_agent_resp_memory(&o), 0);
	o.resp.max_memory--;
	CHECK_EQ(rdmem_agent_resp_memory(&o), -EINVAL);
	o.fd.slots = 2; /* fewer replies in flight: 32 MiB holds one connection */
	o.resp.max_memory = 32u << 20;
	CHECK_EQ(rdmem_agent_resp_memory(&o), 0);
	o.fd.slots = 16;
	o.fd.max_value = 4u << 20;
	CHECK_EQ(rdmem_agent_resp_memory(&o), -EINVAL);
	o.resp.max_memory = rdmem_resp_mem_floor(4u << 20, 16);
	CHECK_EQ(rdmem_agent_resp_memory(&o), 0);
	o.resp.max_memory = 0; /* unset: the RESP thread raises its default */
	o.fd.max_value = 64u << 20;
	CHECK_EQ(rdmem_agent_resp_memory(&o), 0);
	o.resp.max_memory = 16u << 20; /* no RESP front end: nothing to hold */
	o.resp_port = 0;
	CHECK_EQ(rdmem_agent_resp_memory(&o), 0);
	snprintf(cmd, sizeof(cmd),
		 "%s/rdmem-agent -s 127.0.0.1 --resp-port 1 --max-value 64m --resp-max-memory 256m",
		 proc_bin());
	CHECK_EQ(opts_run(cmd, out, sizeof(out)), 2);
	if (!strstr(out, "--resp-max-memory: 268435456 bytes is below 2964588544"))
		printf("#   %s: %s", cmd, out);
	CHECK(strstr(out, "--resp-max-memory: 268435456 bytes is below 2964588544"));
}

int main(void)
{
	RUN(test_agent_ranges);
	RUN(test_agent_refusals);
	RUN(test_agent_resp_memory_floor);
	return check_done();
}
