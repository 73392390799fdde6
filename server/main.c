/* main.c - rdmem-server: option parsing and validation; the work is in server.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rdmem/fabric.h"
#include "rdmem/layout.h"
#include "rdmem/util.h"
#include "rdmem/wire.h"
#include "common/metrics_http.h"
#include "server/dedup.h"
#include "server/lane.h"
#include "server/hook.h"
#include "server/server.h"

#define MIN_MAX_VALUE (4u << 10) /* a STATS report must fit in a reply */

static const char usage_text[] =
    "usage: rdmem-server [options]\n"
    "  -b, --bind ADDR          address to listen on (default 0.0.0.0)\n"
    "  -p, --port PORT          RDMA port (default 7471)\n"
    "      --tcp-port N         TCP fallback port (default PORT+1; 0 picks a free one)\n"
    "      --no-tcp             no TCP fallback listener\n"
    "      --tcp-max-conns N    TCP connections at once, 16..65536 (default 1024)\n"
    "      --tcp-auth-ms MS     a new TCP connection must authenticate (with\n"
    "                           --secret-file) or send a valid frame within MS, or\n"
    "                           it is closed; 100..60000 (default 3000)\n"
    "      --tcp-idle-ms MS     close TCP connections with no traffic for MS\n"
    "                           (agents reconnect), 1000..86400000 (default 300000)\n"
    "      --tcp-max-per-addr N TCP connections from one address, 1..65536 (default 64)\n"
    "      --tcp-max-partial-per-addr N\n"
    "                           unproven connections of one address holding half\n"
    "                           a frame, 1..65536 (default 8)\n"
    "      --tcp-reserved-pct P share of --tcp-max-conns kept for proven peers\n"
    "                           (authenticated, or sent a valid frame), 0..90\n"
    "                           (default 10)\n"
    "      --tcp-out-budget BYTES\n"
    "                           reply buffers of all TCP connections; past it a\n"
    "                           connection is read only while under 64 KiB of its\n"
    "                           replies are unsent (not 4 MiB), so a peer that\n"
    "                           reads nothing holds 64 KiB and one reply more;\n"
    "                           k/m/g suffix, 1m..1024g (default 64m)\n"
    "      --image-dir DIR      accept image uploads into DIR\n"
    "      --image-hook CMD     run CMD <final path> after each committed image\n"
    "      --image-hook-timeout MS\n"
    "                           kill a hook running longer; 1000..86400000\n"
    "                           (default 300000)\n"
    "      --fabric F           verbs | shm | none: the RDMA listener (default: verbs with\n"
    "                           an RDMA device, else shm for agents on this host)\n"
    "      --batch-budget N     request slots a session drains per round (default 32)\n"
    "      --ring-slots N       request ring slots per session (default 256)\n"
    "      --slot-bytes BYTES   payload bytes per request slot (default 32k, 1k..1m)\n"
    "      --objpool-slabs N    64 KiB objects per session (default 256, max 65536;\n"
    "                           object offsets are 64-bit: pools past 4 GiB work)\n"
    "      --object-ttl MS      free objects not reclaimed after MS (default 10000)\n"
    "      --max-sessions N     agent sessions at once (default 64)\n"
    "      --max-sessions-per-addr N\n"
    "                           sessions from one peer address, 1..4096 (default:\n"
    "                           --max-sessions, no limit of its own)\n"
    "      --session-grace-ms MS\n"
    "                           when sessions are full, one whose agent sent no\n"
    "                           request for MS is closed for a new agent;\n"
    "                           100..3600000 (default 5000)\n"
    "      --shared-pool on|off one message pool leased to sessions (default on), or\n"
    "                           a private set of regions per session\n"
    "      --stage-bytes BYTES  largest EAGER reply, capped per session by the agent's\n"
    "                           response slot; bigger go LAZY (default 16k, max 1m)\n"
    "      --workers N          threads serving sessions (default 1)\n"
    "      --group-threshold N  group sessions above this many per worker (default 64)\n"
    "      --group-size N       at most N sessions with work per group (default 32)\n"
    "      --slice-us N         a group's time slice in microseconds (default 500)\n"
    "      --quiet-lane N       places per worker for sessions sending one call at a\n"
    "                           time, polled every 256 requests whatever their group,\n"
    "                           0..64 (default 8; 0: none)\n"
    "      --busy-poll          session workers never sleep (dedicated cores)\n"
    "      --secret-file PATH   peers must prove this shared secret (mode 0600 file)\n"
    "      --tls-cert PATH      TLS 1.3 on every TCP connection: this certificate\n"
    "                           chain (PEM), with --tls-key\n"
    "      --tls-key PATH       its private key (PEM, mode 0600 file)\n"
    "      --tls-ca PATH        require client certificates signed by this CA (PEM)\n"
    "      --max-value BYTES    largest value and reply, k/m suffix (default 1m, max 64m)\n"
    "      --max-image BYTES    largest image upload (default 64m, max 1g)\n"
    "      --kv-max-bytes BYTES keys and values stored at most, k/m/g suffix; a PUT\n"
    "                           past it is answered NO_SPACE; 1m..16384g (default:\n"
    "                           half of this machine's memory)\n"
    "      --upload-timeout MS  abandon an upload idle this long (default 30000)\n"
    "      --dedup-window N     non-idempotent calls remembered per agent, so a retry\n"
    "                           runs once; power of two, 16..65536 (default 4096)\n"
    "      --dedup-agents N     agents remembered at once, 1..65536 (default 256)\n"
    "      --dedup-idle MS      forget an agent without connections after MS\n"
    "                           (default 300000)\n"
    "      --no-dedup           keep no window: retries may run twice\n"
    "      --metrics-port N     serve Prometheus /metrics on port N (default off)\n"
    "      --metrics-bind ADDR  address of /metrics (default 127.0.0.1)\n"
    "      --verbose            debug logging\n"
    "  -h, --help               this text\n";

enum {
	OPT_TCP_PORT = 256,
	OPT_NO_TCP,
	OPT_IMAGE_DIR,
	OPT_IMAGE_HOOK,
	OPT_BATCH,
	OPT_MAX_VALUE,
	OPT_MAX_IMAGE,
	OPT_KV_MAX_BYTES,
	OPT_UPLOAD_TIMEOUT,
	OPT_HOOK_TIMEOUT,
	OPT_VERBOSE,
	OPT_FABRIC,
	OPT_RING_SLOTS,
	OPT_SLOT_BYTES,
	OPT_OBJPOOL_SLABS,
	OPT_OBJECT_TTL,
	OPT_MAX_SESSIONS,
	OPT_BUSY_POLL,
	OPT_METRICS_PORT,
	OPT_METRICS_BIND,
	OPT_SHARED_POOL,
	OPT_STAGE_BYTES,
	OPT_WORKERS,
	OPT_GROUP_THRESHOLD,
	OPT_GROUP_SIZE,
	OPT_SLICE_US,
	OPT_QUIET_LANE,
	OPT_SECRET_FILE,
	OPT_DEDUP_WINDOW,
	OPT_DEDUP_AGENTS,
	OPT_DEDUP_IDLE,
	OPT_NO_DEDUP,
	OPT_TCP_MAX_CONNS,
	OPT_TCP_AUTH_MS,
	OPT_TCP_IDLE_MS,
	OPT_TCP_MAX_PER_ADDR,
	OPT_TCP_MAX_PARTIAL,
	OPT_TCP_RESERVED,
	OPT_TCP_OUT_BUDGET,
	OPT_MAX_SESSIONS_PER_ADDR,
	OPT_SESSION_GRACE_MS,
	OPT_TLS_CERT,
	OPT_TLS_KEY,
	OPT_TLS_CA
};

static const struct option long_opts[] = {
	{ "bind", required_argument, NULL, 'b' },
	{ "port", required_argument, NULL, 'p' },
	{ "tcp-port", required_argument, NULL, OPT_TCP_PORT },
	{ "no-tcp", no_argument, NULL, OPT_NO_TCP },
	{ "image-dir", required_argument, NULL, OPT_IMAGE_DIR },
	{ "image-hook", required_argument, NULL, OPT_IMAGE_HOOK },
	{ "batch-budget", required_argument, NULL, OPT_BATCH },
	{ "max-value", required_argument, NULL, OPT_MAX_VALUE },
	{ "max-image", required_argument, NULL, OPT_MAX_IMAGE },
	{ "kv-max-bytes", required_argument, NULL, OPT_KV_MAX_BYTES },
	{ "upload-timeout", required_argument, NULL, OPT_UPLOAD_TIMEOUT },
	{ "image-hook-timeout", required_argument, NULL, OPT_HOOK_TIMEOUT },
	{ "verbose", no_argument, NULL, OPT_VERBOSE },
	{ "fabric", required_argument, NULL, OPT_FABRIC },
	{ "ring-slots", required_argument, NULL, OPT_RING_SLOTS },
	{ "slot-bytes", required_argument, NULL, OPT_SLOT_BYTES },
	{ "objpool-slabs", required_argument, NULL, OPT_OBJPOOL_SLABS },
	{ "object-ttl", required_argument, NULL, OPT_OBJECT_TTL },
	{ "max-sessions", required_argument, NULL, OPT_MAX_SESSIONS },
	{ "busy-poll", no_argument, NULL, OPT_BUSY_POLL },
	{ "shared-pool", required_argument, NULL, OPT_SHARED_POOL },
	{ "stage-bytes", required_argument, NULL, OPT_STAGE_BYTES },
	{ "workers", required_argument, NULL, OPT_WORKERS },
	{ "group-threshold", required_argument, NULL, OPT_GROUP_THRESHOLD },
	{ "group-size", required_argument, NULL, OPT_GROUP_SIZE },
	{ "slice-us", required_argument, NULL, OPT_SLICE_US },
	{ "quiet-lane", required_argument, NULL, OPT_QUIET_LANE },
	{ "metrics-port", required_argument, NULL, OPT_METRICS_PORT },
	{ "metrics-bind", required_argument, NULL, OPT_METRICS_BIND },
	{ "secret-file", required_argument, NULL, OPT_SECRET_FILE },
	{ "tls-cert", required_argument, NULL, OPT_TLS_CERT },
	{ "tls-key", required_argument, NULL, OPT_TLS_KEY },
	{ "tls-ca", required_argument, NULL, OPT_TLS_CA },
	{ "dedup-window", required_argument, NULL, OPT_DEDUP_WINDOW },
	{ "dedup-agents", required_argument, NULL, OPT_DEDUP_AGENTS },
	{ "dedup-idle", required_argument, NULL, OPT_DEDUP_IDLE },
	{ "no-dedup", no_argument, NULL, OPT_NO_DEDUP },
	{ "max-sessions-per-addr", required_argument, NULL, OPT_MAX_SESSIONS_PER_ADDR },
	{ "session-grace-ms", required_argument, NULL, OPT_SESSION_GRACE_MS },
	{ "tcp-max-conns", required_argument, NULL, OPT_TCP_MAX_CONNS },
	{ "tcp-auth-ms", required_argument, NULL, OPT_TCP_AUTH_MS },
	{ "tcp-idle-ms", required_argument, NULL, OPT_TCP_IDLE_MS },
	{ "tcp-max-per-addr", required_argument, NULL, OPT_TCP_MAX_PER_ADDR },
	{ "tcp-max-partial-per-addr", required_argument, NULL, OPT_TCP_MAX_PARTIAL },
	{ "tcp-reserved-pct", required_argument, NULL, OPT_TCP_RESERVED },
	{ "tcp-out-budget", required_argument, NULL, OPT_TCP_OUT_BUDGET },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

#define N(code, flag, lo, hi, f) RDMEM_OPT_NUM(struct rdmem_server_config, code, flag, lo, hi, f)
#define B(code, flag, lo, hi, f) RDMEM_OPT_SIZE(struct rdmem_server_config, code, flag, lo, hi, f)

/* Numeric options, each with its range and where it lands (B: a byte size, k/m/g). */
static const struct rdmem_opt_num ranges[] = {
	N('p', "--port", 1, 65535, port),
	N(OPT_TCP_PORT, "--tcp-port", 0, 65535, tcp_port),
	N(OPT_BATCH, "--batch-budget", 1, 1024, rdma.batch_budget),
	N(OPT_RING_SLOTS, "--ring-slots", 1, RDMEM_MAX_RING_SLOTS, rdma.ring_slots),
	B(OPT_SLOT_BYTES, "--slot-bytes", 1024, RDMEM_MAX_SLOT_BYTES, rdma.slot_bytes),
	N(OPT_OBJPOOL_SLABS, "--objpool-slabs", 1, 65536, rdma.objpool_slabs),
	N(OPT_OBJECT_TTL, "--object-ttl", RDMEM_MIN_OBJECT_TTL_MS, 86400000, rdma.object_ttl_ms),
	N(OPT_MAX_SESSIONS, "--max-sessions", 1, 4096, rdma.max_sessions),
	B(OPT_STAGE_BYTES, "--stage-bytes", 64, RDMEM_MAX_STAGE_BYTES, rdma.stage_bytes),
	N(OPT_WORKERS, "--workers", 1, 64, rdma.workers),
	N(OPT_GROUP_THRESHOLD, "--group-threshold", 1, 1u << 20, rdma.group_threshold),
	N(OPT_GROUP_SIZE, "--group-size", 1, 4096, rdma.group_size),
	N(OPT_SLICE_US, "--slice-us", 10, 1000000, rdma.slice_us),
	N(OPT_QUIET_LANE, "--quiet-lane", 0, RDMEM_LANE_MAX, rdma.quiet_lane),
	B(OPT_MAX_VALUE, "--max-value", MIN_MAX_VALUE, RDMEM_MAX_VALUE_LIMIT, svc.max_value),
	B(OPT_MAX_IMAGE, "--max-image", 1, 1ull << 30, svc.max_image),
	B(OPT_KV_MAX_BYTES, "--kv-max-bytes", 1ull << 20, 1ull << 44, svc.kv_max_bytes),
	N(OPT_UPLOAD_TIMEOUT, "--upload-timeout", 100, 86400000, svc.upload_timeout_ms),
	N(OPT_HOOK_TIMEOUT, "--image-hook-timeout", 1000, 86400000, svc.hook_timeout_ms),
	N(OPT_DEDUP_WINDOW, "--dedup-window", RDMEM_DEDUP_MIN_WINDOW, RDMEM_DEDUP_MAX_WINDOW,
	  dedup.window),
	N(OPT_DEDUP_AGENTS, "--dedup-agents", 1, RDMEM_DEDUP_MAX_AGENTS, dedup.max_agents),
	N(OPT_DEDUP_IDLE, "--dedup-idle", 1, 86400000, dedup.idle_ms),
	N(OPT_METRICS_PORT, "--metrics-port", 1, 65535, metrics_port),
	N(OPT_MAX_SESSIONS_PER_ADDR, "--max-sessions-per-addr", 1, 4096, rdma.max_per_addr),
	N(OPT_SESSION_GRACE_MS, "--session-grace-ms", 100, 3600000, rdma.grace_ms),
	N(OPT_TCP_MAX_CONNS, "--tcp-max-conns", 16, 65536, tcp.max_conns),
	N(OPT_TCP_AUTH_MS, "--tcp-auth-ms", 100, 60000, tcp.auth_ms),
	N(OPT_TCP_IDLE_MS, "--tcp-idle-ms", 1000, 86400000, tcp.idle_ms),
	N(OPT_TCP_MAX_PER_ADDR, "--tcp-max-per-addr", 1, 65536, tcp.max_per_addr),
	N(OPT_TCP_MAX_PARTIAL, "--tcp-max-partial-per-addr", 1, 65536, tcp.max_partial_per_addr),
	N(OPT_TCP_RESERVED, "--tcp-reserved-pct", 0, 90, tcp.reserved_pct),
	B(OPT_TCP_OUT_BUDGET, "--tcp-out-budget", 1ull << 20, 1ull << 40, tcp.out_budget),
};

#undef N
#undef B

static void __attribute__((noreturn)) die_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "rdmem-server: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n%s", usage_text);
	exit(2);
}

static void check_addr(const char *s)
{
	unsigned char buf[sizeof(struct in6_addr)];

	if (inet_pton(AF_INET, s, buf) != 1 && inet_pton(AF_INET6, s, buf) != 1)
		die_usage("--bind needs a numeric IPv4 or IPv6 address, not '%s'", s);
}

static void check_dir(const char *s)
{
	struct stat st;

	if (stat(s, &st) < 0) {
		fprintf(stderr, "rdmem-server: --image-dir %s: %s\n", s, strerror(errno));
		exit(2);
	}
	if (!S_ISDIR(st.st_mode))
		die_usage("--image-dir %s is not a directory", s);
}

static void parse_fabric(const char *s, struct rdmem_server_config *cfg)
{
	enum rdmem_fab_kind kind;

	if (strcmp(s, "none") == 0) {
		cfg->no_rdma = 1;
		return;
	}
	if (rdmem_fab_kind_parse(s, &kind) < 0)
		die_usage("--fabric must be verbs, shm or none, not '%s'", s);
	cfg->no_rdma = 0;
	cfg->rdma.fabric = kind;
}

static void parse_args(int argc, char **argv, struct rdmem_server_config *cfg, int *verbose)
{
	int tcp_port_given = 0, opt, ret;

	while ((opt = getopt_long(argc, argv, "b:p:h", long_opts, NULL)) != -1) {
		ret = rdmem_opt_num_parse(ranges, RDMEM_ARRAY_SIZE(ranges), opt, optarg,
					  "rdmem-server", cfg);
		if (ret == -EINVAL)
			exit(2);
		tcp_port_given |= ret == 0 && opt == OPT_TCP_PORT;
		cfg->tcp.set_reserved |= ret == 0 && opt == OPT_TCP_RESERVED;
		if (ret == 0 && opt == OPT_DEDUP_WINDOW &&
		    (cfg->dedup.window & (cfg->dedup.window - 1)))
			die_usage("--dedup-window must be a power of two, not '%s'", optarg);
		if (ret == 0)
			continue;
		switch (opt) {
		case 'b':
			check_addr(optarg);
			cfg->bind_addr = optarg;
			break;
		case OPT_NO_TCP:
			cfg->no_tcp = 1;
			break;
		case OPT_IMAGE_DIR:
			check_dir(optarg);
			cfg->svc.image_dir = optarg;
			break;
		case OPT_IMAGE_HOOK:
			if (!*optarg)
				die_usage("--image-hook needs a command%s", "");
			cfg->svc.image_hook = optarg;
			break;
		case OPT_FABRIC:
			parse_fabric(optarg, cfg);
			break;
		case OPT_BUSY_POLL:
			cfg->rdma.busy_poll = 1;
			break;
		case OPT_SHARED_POOL:
			if (strcmp(optarg, "on") && strcmp(optarg, "off"))
				die_usage("--shared-pool is on or off, not '%s'", optarg);
			cfg->rdma.shared_pool = !strcmp(optarg, "on");
			break;
		case OPT_SECRET_FILE:
			cfg->secret_file = optarg;
			break;
		case OPT_TLS_CERT:
			cfg->tls.cert = optarg;
			break;
		case OPT_TLS_KEY:
			cfg->tls.key = optarg;
			break;
		case OPT_TLS_CA:
			cfg->tls.ca = optarg;
			break;
		case OPT_NO_DEDUP:
			cfg->no_dedup = 1;
			break;
		case OPT_VERBOSE:
			*verbose = 1;
			break;
		case OPT_METRICS_BIND:
			if (rdmem_metrics_bind_ok(optarg) < 0)
				die_usage("--metrics-bind needs a numeric IPv4 or IPv6 address, "
					  "not '%s'",
					  optarg);
			cfg->metrics_bind = optarg;
			break;
		case 'h':
			fputs(usage_text, stdout);
			exit(0);
		default:
			die_usage("unknown or incomplete option%s", "");
		}
	}
	if (optind < argc)
		die_usage("unexpected argument '%s'", argv[optind]);
	if (rdmem_tls_files_misuse(&cfg->tls, 1))
		die_usage("%s", rdmem_tls_files_misuse(&cfg->tls, 1));
	if (cfg->tls.cert && cfg->no_tcp)
		die_usage("--tls-cert is for the TCP listener, which --no-tcp turns off%s", "");
	if (cfg->svc.image_hook && !cfg->svc.image_dir)
		die_usage("--image-hook needs --image-dir%s", "");
	if (!tcp_port_given && cfg->port == 65535 && !cfg->no_tcp)
		die_usage("--port 65535 leaves no room for the TCP port; give --tcp-port%s", "");
	if (!tcp_port_given)
		cfg->tcp_port = (uint16_t)(cfg->port + 1);
}

int main(int argc, char **argv)
{
	struct rdmem_server_config cfg = {
		.bind_addr = "0.0.0.0",
		.port = RDMEM_DEFAULT_PORT,
		.rdma = { .fabric = 0,
			  .ring_slots = RDMEM_DEFAULT_RING_SLOTS,
			  .slot_bytes = RDMEM_DEFAULT_SLOT_BYTES,
			  .objpool_slabs = 256,
			  .object_ttl_ms = 10000,
			  .batch_budget = 32,
			  .max_sessions = 64,
			  .max_per_addr = 0, /* no limit of its own: --max-sessions */
			  .grace_ms = 5000,
			  .shared_pool = 1,
			  .stage_bytes = RDMEM_DEFAULT_RESP_BYTES,
			  .workers = 1,
			  .group_threshold = 64,
			  .group_size = 32,
			  .slice_us = 500,
			  .quiet_lane = 8 },
		.svc = { .max_value = RDMEM_DEFAULT_MAX_VALUE,
			 .max_image = 64u << 20,
			 .upload_timeout_ms = 30000,
			 .hook_timeout_ms = RDMEM_HOOK_DEFAULT_TIMEOUT },
		.dedup = RDMEM_DEDUP_DEFAULTS,
	};
	struct rdmem_server srv;
	int verbose = 0, ret;

	parse_args(argc, argv, &cfg, &verbose);
	if (!cfg.rdma.fabric)
		cfg.rdma.fabric = rdmem_fab_verbs_available() ? RDMEM_FAB_VERBS : RDMEM_FAB_SHM;
	rdmem_log_init("rdmem-server", verbose);
	ret = rdmem_server_start(&srv, &cfg);
	if (ret == 0)
		ret = rdmem_server_run(&srv);
	rdmem_server_stop(&srv);
	return ret ? 1 : 0;
}
