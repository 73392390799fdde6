/* test_opts_net.c - rdmem-server's hostile-network limits (--tcp-*,
 * --max-sessions-per-addr, --session-grace-ms): each in --help with its
 * range, and a value outside it refused naming the flag and the limit. */
#include "tests/opts_check.h"

static void refused(const char *args, const char *want)
{
	char cmd[512], out[8192];

	snprintf(cmd, sizeof(cmd), "%s/rdmem-server %s", proc_bin(), args);
	CHECK_EQ(opts_run(cmd, out, sizeof(out)), 2);
	if (!strstr(out, want))
		fprintf(stderr, "  %s: wanted \"%s\" in:\n%.400s\n", args, want, out);
	CHECK(strstr(out, want) != NULL);
}

static void test_net_refusals(void)
{
	refused("--tcp-max-conns 8", "--tcp-max-conns: '8' is not a number in [16, 65536]");
	refused("--tcp-auth-ms 99", "--tcp-auth-ms: '99' is not a number in [100, 60000]");
	refused("--tcp-idle-ms 999", "--tcp-idle-ms: '999' is not a number in [1000, 86400000]");
	refused("--tcp-max-per-addr 0", "--tcp-max-per-addr: '0' is not a number in [1, 65536]");
	refused("--tcp-max-partial-per-addr 0",
		"--tcp-max-partial-per-addr: '0' is not a number in [1, 65536]");
	refused("--tcp-reserved-pct 91", "--tcp-reserved-pct: '91' is not a number in [0, 90]");
	refused("--max-sessions-per-addr 4097",
		"--max-sessions-per-addr: '4097' is not a number in [1, 4096]");
	refused("--session-grace-ms 99",
		"--session-grace-ms: '99' is not a number in [100, 3600000]");
}

static void test_net_help(void)
{
	static const char *const want[] = { "16..65536 (default 1024)",
					    "100..60000 (default 3000)",
					    "1000..86400000 (default 300000)",
					    "1..65536 (default 64)",
					    "1..65536 (default 8)",
					    "0..90",
					    "1..4096 (default:",
					    "100..3600000 (default 5000)" };
	char cmd[512], out[16384];
	size_t i;

	snprintf(cmd, sizeof(cmd), "%s/rdmem-server --help", proc_bin());
	CHECK_EQ(opts_run(cmd, out, sizeof(out)), 0);
	for (i = 0; i < RDMEM_ARRAY_SIZE(want); i++) {
		if (!strstr(out, want[i]))
			fprintf(stderr, "  --help lacks \"%s\"\n", want[i]);
		CHECK(strstr(out, want[i]) != NULL);
	}
}

int main(void)
{
	(void)opts_check; /* the table check is test_opts_server's */
	RUN(test_net_refusals);
	RUN(test_net_help);
	return check_done();
}
