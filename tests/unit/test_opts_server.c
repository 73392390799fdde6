/* test_opts_server.c - rdmem-server's numeric options (ranges in
 * server/main.c, included here for its table) against the built program. */
#define main rdmem_server_main_under_test
#include "server/main.c"
#undef main

#include "tests/opts_check.h"

static void test_server_ranges(void)
{
	static struct rdmem_server_config cfg;

	opts_check("rdmem-server", "", ranges, RDMEM_ARRAY_SIZE(ranges), &cfg);
}

static void test_server_refusals(void)
{
	char cmd[256], out[4096];

	snprintf(cmd, sizeof(cmd), "%s/rdmem-server --max-value 1k", proc_bin());
	CHECK_EQ(opts_run(cmd, out, sizeof(out)), 2);
	CHECK(strstr(out, "rdmem-server: --max-value: '1k' is not a size in [4096, 67108864] "
			  "bytes (k/m/g)"));
	snprintf(cmd, sizeof(cmd), "%s/rdmem-server --dedup-window 100", proc_bin());
	CHECK_EQ(opts_run(cmd, out, sizeof(out)), 2);
	CHECK(strstr(out, "--dedup-window must be a power of two"));
}

int main(void)
{
	RUN(test_server_ranges);
	RUN(test_server_refusals);
	return check_done();
}
