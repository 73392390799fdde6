/* test_opts_agent.c - rdmem-agent's numeric options (rdmem_agent_ranges in
 * agent/main.c, included here for its table) against the built program. */
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

int main(void)
{
	RUN(test_agent_ranges);
	RUN(test_agent_refusals);
	return check_done();
}
