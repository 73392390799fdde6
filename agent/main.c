/* main.c - rdmem-agent: the resident per-host daemon. Parses options,
 * starts the actors (the front door; per server, through the router, a
 * session and a TCP actor), waits for SIGINT/SIGTERM (SIGHUP re-reads
 * --servers-file), stops them in an order that never leaves a call
 * unanswered. */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "agent/frontdoor.h"
#include "agent/metrics.h"
#include "agent/path.h"
#include "agent/resp.h"
#include "agent/resp_mem.h"
#include "agent/router.h"
#include "agent/session.h"
#include "agent/tcp_actor.h"
#include "common/metrics_http.h"
#include "rdmem/auth.h"
#include "rdmem/fabric.h"
#include "rdmem/layout.h"
#include "shm/door.h"
#include "shm/segment.h"
#include "rdmem/util.h"
#include "tcp/tls.h"

struct rdmem_agent_opts {
	struct rdmem_agent_config cfg;
	struct rdmem_frontdoor_config fd;
	const char *fabric; /* NULL: choose */
	int fabric_kind;    /* --fabric parsed: RDMEM_FAB_*, 0 for TCP, -1 per server */
	const char *servers_file;
	struct rdmem_router_entry *servers; /* -s or --servers-file, parsed */
	uint32_t nservers;
	const char *secret_file;
	struct rdmem_tls_files tls; /* --tls-ca, --tls-cert, --tls-key, --tls-server-name */
	struct rdmem_tls_ctx *tls_ctx;
	uint32_t port, tcp_port, connect_timeout_ms;
	uint32_t metrics_port; /* 0: no /metrics endpoint */
	const char *metrics_bind;
	struct rdmem_resp_config resp;
	uint32_t resp_port;
	int verbose;
};

static void rdmem_agent_usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: rdmem-agent -s SERVER[,SERVER...] | --servers-file FILE [options]\n"
	    "  -s, --server LIST          rdmem-server addresses, host[:port] each, comma-\n"
	    "                             separated (1..64); keys are spread over them by\n"
	    "                             rendezvous hashing of host:port\n"
	    "      --servers-file FILE    the list from a file, one host[:port] a line\n"
	    "                             (# comments); re-read on SIGHUP or agent-ctl reload\n"
	    "  -p, --port N               server RDMA port where a server has none (default %u)\n"
	    "      --tcp-port N           server TCP port where a server names no port\n"
	    "                             (default: port + 1; always port + 1 with one)\n"
	    "      --fabric F             verbs | shm | tcp (default: verbs with an RDMA\n"
	    "                             device, else shm for a server on this host, else tcp)\n"
	    "      --shm-name NAME        front-door name (default /rdmem): clients attach\n"
	    "                             through the socket <runtime dir>/NAME.sock\n"
	    "      --socket PATH          the attach socket instead (absolute path); its\n"
	    "                             directory is created 0750, or must be ours and\n"
	    "                             writable by nobody else. Runtime dir: /run/rdmem\n"
	    "                             (root), else $XDG_RUNTIME_DIR/rdmem, else\n"
	    "                             /run/rdmem if root made it ours (never /tmp);\n"
	    "                             or $RDMEM_RUNTIME_DIR\n"
	    "      --shm-reset            take over a live agent's socket (its clients move\n"
	    "                             here) or a foreign file at the socket path\n"
	    "      --shm-group GROUP      group of the socket (0660) and its directory (0750):\n"
	    "                             its members may attach (for a non-root agent only\n"
	    "                             when root made the directory, in /run: clients\n"
	    "                             refuse another user's directory elsewhere)\n"
	    "      --admin-group GROUP    its members may also run agent-ctl (force paths,\n"
	    "                             simulate faults); else root and the agent's user only\n"
	    "      --clients N            front-door client entries, 1-1024 (default 32)\n"
	    "      --clients-per-uid N    entries one user may hold, 1-1024 (default half of\n"
	    "                             --clients); root and the agent's user: all\n"
	    "      --client-strikes N     disconnect a client past N misbehaviours\n"
	    "                             attributable to it, one forgiven a second,\n"
	    "                             0-1000000 (default 16; 0: never)\n"
	    "      --slots N              slots per client, at most 64 (default 16); the segment\n"
	    "                             holds clients x slots x (max-value + 65 KiB) of RAM\n"
	    "      --max-value B          largest value a call carries (default 1m)\n"
	    "      --max-client-mem B     client memory the agent may pin at once for one\n"
	    "                             client's zero-copy calls, 0-1024g (default 64m, or\n"
	    "                             one slot if more); a slot is pinned whole\n"
	    "                             (max-value + 66 KiB); past it a call waits for\n"
	    "                             room, or copies over TCP (AUTO; forced BULK/LAZY:\n"
	    "                             -ENOMEM) when another server's link holds it\n"
	    "      --max-total-mem B      the same for all clients together, 0-1024g (default\n"
	    "                             256m, or one slot if more); within the locked-\n"
	    "                             memory limit\n"
	    "      --force-path P         auto | eager | lazy | bulk | tcp (default auto)\n"
	    "      --bulk-threshold B     requests this big go BULK (default 8k)\n"
	    "      --large-threshold B    replies expected this big go LAZY (default 8k)\n"
	    "      --error-threshold N    RDMA errors before AUTO uses TCP (default 8)\n"
	    "      --ring-slots N         request/response ring slots (default %u)\n"
	    "      --resp-bytes B         payload bytes per response slot (default 16k, 64..1m);\n"
	    "                             the server's stage bytes may cap EAGER replies\n"
	    "      --connect-timeout MS   connect timeout (default 2000)\n"
	    "      --max-reads N          RDMA READs in flight per link (default and upper\n"
	    "                             bound: the depth the connection agreed)\n"
	    "      --rdma-stall-ms MS     RDMA READs in flight and nothing completing for this\n"
	    "                             long: the path is dead, calls move to TCP and the\n"
	    "                             link is redialled (default %u)\n"
	    "      --busy-poll            never sleep when idle (dedicated cores)\n"
	    "      --secret-file PATH     prove this shared secret to the server, and check\n"
	    "                             that the server knows it too (mode 0600 file)\n"
	    "      --tls-ca PATH          TLS 1.3 to the server's TCP port: its certificate\n"
	    "                             must chain to this CA (PEM) and carry its name\n"
	    "      --tls-server-name NAME the name to check (default: each server's host)\n"
	    "      --tls-cert PATH        our client certificate (PEM), for a server that\n"
	    "                             requires one; with --tls-key\n"
	    "      --tls-key PATH         its private key (PEM, mode 0600 file)\n"
	    "      --source ADDR          local address to dial RDMA from (picks the device)\n"
	    "      --simulate-rdma-down   fault injection: RDMA unavailable\n"
	    "      --simulate-rdma-op-fail N      fail the next N RDMA operations\n"
	    "      --simulate-server-pressure ring|objpool\n"
	    "      --simulate-rdma-errors N       start with N RDMA errors counted\n"
	    "      --metrics-port N       serve Prometheus /metrics on port N (default off)\n"
	    "      --metrics-bind ADDR    address of /metrics (default 127.0.0.1)\n"
	    "      --resp-port N          serve the Redis protocol (RESP2/3) on port N\n"
	    "                             (default off)\n"
	    "      --resp-bind ADDR       address of --resp-port (default 127.0.0.1)\n"
	    "      --resp-socket PATH     serve the Redis protocol on a Unix socket\n"
	    "                             (mode 0660; default off)\n"
	    "      --resp-max-conns N     Redis-protocol connections at once (default %u)\n"
	    "      --resp-idle-evict S    at --resp-max-conns, a new connection replaces one\n"
	    "                             silent for S seconds (default %u; 0: never)\n"
	    "      --resp-max-memory B    bytes all Redis-protocol connections may hold; over\n"
	    "                             it the one holding most is closed (default %llum,\n"
	    "                             16m..64g, not below what one connection may hold)\n"
	    "  -v, --verbose              debug logging\n"
	    "  -h, --help\n",
	    RDMEM_DEFAULT_PORT, RDMEM_DEFAULT_RING_SLOTS, RDMEM_RDMA_STALL_DEFAULT_MS,
	    RDMEM_RESP_DEFAULT_MAX_CONNS, RDMEM_RESP_DEFAULT_IDLE_EVICT,
	    (unsigned long long)(RDMEM_RESP_DEFAULT_MAX_MEMORY >> 20));
}

/* --fabric as a kind (0: TCP alone), or -1: per server (router.c). */
static int rdmem_agent_fabric_kind(const struct rdmem_agent_opts *o, int *kind)
{
	enum rdmem_fab_kind k;

	*kind = -1;
	if (!o->fabric)
		return 0;
	if (strcmp(o->fabric, "tcp") == 0) {
		*kind = 0;
		return 0;
	}
	if (rdmem_fab_kind_parse(o->fabric, &k) < 0) {
		fprintf(stderr, "rdmem-agent: --fabric: '%s' is not verbs, shm or tcp\n",
			o->fabric);
		return -EINVAL;
	}
	*kind = (int)k;
	return 0;
}

enum {
	OPT_TCP_PORT = 256,
	OPT_FABRIC,
	OPT_SHM_NAME,
	OPT_SOCKET,
	OPT_SHM_RESET,
	OPT_SHM_GROUP,
	OPT_ADMIN_GROUP,
	OPT_CLIENTS,
	OPT_CLIENTS_PER_UID,
	OPT_CLIENT_STRIKES,
	OPT_SLOTS,
	OPT_MAX_VALUE,
	OPT_FORCE,
	OPT_BULK,
	OPT_LARGE,
	OPT_ERRORS,
	OPT_RING,
	OPT_RESP,
	OPT_CONNECT,
	OPT_BUSY,
	OPT_SIM_DOWN,
	OPT_SIM_FAIL,
	OPT_SIM_PRESSURE,
	OPT_SIM_ERRORS,
	OPT_METRICS_PORT,
	OPT_METRICS_BIND,
	OPT_SECRET,
	OPT_SOURCE,
	OPT_MAX_READS,
	OPT_STALL,
	OPT_RESP_PORT,
	OPT_RESP_BIND,
	OPT_RESP_SOCKET,
	OPT_RESP_MAX_CONNS,
	OPT_RESP_IDLE_EVICT,
	OPT_RESP_MAX_MEMORY,
	OPT_MAX_CLIENT_MEM,
	OPT_MAX_TOTAL_MEM,
	OPT_TLS_CA,
	OPT_TLS_CERT,
	OPT_TLS_KEY,
	OPT_TLS_NAME,
	OPT_SERVERS_FILE,
};

static const struct option rdmem_agent_longopts[] = {
	{ "server", required_argument, NULL, 's' },
	{ "servers-file", required_argument, NULL, OPT_SERVERS_FILE },
	{ "port", required_argument, NULL, 'p' },
	{ "tcp-port", required_argument, NULL, OPT_TCP_PORT },
	{ "fabric", required_argument, NULL, OPT_FABRIC },
	{ "shm-name", required_argument, NULL, OPT_SHM_NAME },
	{ "socket", required_argument, NULL, OPT_SOCKET },
	{ "shm-reset", no_argument, NULL, OPT_SHM_RESET },
	{ "shm-group", required_argument, NULL, OPT_SHM_GROUP },
	{ "admin-group", required_argument, NULL, OPT_ADMIN_GROUP },
	{ "clients", required_argument, NULL, OPT_CLIENTS },
	{ "clients-per-uid", required_argument, NULL, OPT_CLIENTS_PER_UID },
	{ "client-strikes", required_argument, NULL, OPT_CLIENT_STRIKES },
	{ "slots", required_argument, NULL, OPT_SLOTS },
	{ "max-value", required_argument, NULL, OPT_MAX_VALUE },
	{ "force-path", required_argument, NULL, OPT_FORCE },
	{ "bulk-threshold", required_argument, NULL, OPT_BULK },
	{ "large-threshold", required_argument, NULL, OPT_LARGE },
	{ "error-threshold", required_argument, NULL, OPT_ERRORS },
	{ "ring-slots", required_argument, NULL, OPT_RING },
	{ "resp-bytes", required_argument, NULL, OPT_RESP },
	{ "connect-timeout", required_argument, NULL, OPT_CONNECT },
	{ "busy-poll", no_argument, NULL, OPT_BUSY },
	{ "simulate-rdma-down", no_argument, NULL, OPT_SIM_DOWN },
	{ "simulate-rdma-op-fail", required_argument, NULL, OPT_SIM_FAIL },
	{ "simulate-server-pressure", required_argument, NULL, OPT_SIM_PRESSURE },
	{ "simulate-rdma-errors", required_argument, NULL, OPT_SIM_ERRORS },
	{ "metrics-port", required_argument, NULL, OPT_METRICS_PORT },
	{ "metrics-bind", required_argument, NULL, OPT_METRICS_BIND },
	{ "secret-file", required_argument, NULL, OPT_SECRET },
	{ "tls-ca", required_argument, NULL, OPT_TLS_CA },
	{ "tls-cert", required_argument, NULL, OPT_TLS_CERT },
	{ "tls-key", required_argument, NULL, OPT_TLS_KEY },
	{ "tls-server-name", required_argument, NULL, OPT_TLS_NAME },
	{ "source", required_argument, NULL, OPT_SOURCE },
	{ "max-reads", required_argument, NULL, OPT_MAX_READS },
	{ "rdma-stall-ms", required_argument, NULL, OPT_STALL },
	{ "resp-port", required_argument, NULL, OPT_RESP_PORT },
	{ "resp-bind", required_argument, NULL, OPT_RESP_BIND },
	{ "resp-socket", required_argument, NULL, OPT_RESP_SOCKET },
	{ "resp-max-conns", required_argument, NULL, OPT_RESP_MAX_CONNS },
	{ "resp-idle-evict", required_argument, NULL, OPT_RESP_IDLE_EVICT },
	{ "resp-max-memory", required_argument, NULL, OPT_RESP_MAX_MEMORY },
	{ "max-client-mem", required_argument, NULL, OPT_MAX_CLIENT_MEM },
	{ "max-total-mem", required_argument, NULL, OPT_MAX_TOTAL_MEM },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

#define N(code, flag, lo, hi, f) RDMEM_OPT_NUM(struct rdmem_agent_opts, code, flag, lo, hi, f)
#define B(code, flag, lo, hi, f) RDMEM_OPT_SIZE(struct rdmem_agent_opts, code, flag, lo, hi, f)

/* Numeric options, each with its range and where it lands (B: a byte size, k/m/g). */
static const struct rdmem_opt_num rdmem_agent_ranges[] = {
	N('p', "--port", 1, 65534, port),
	N(OPT_TCP_PORT, "--tcp-port", 1, 65535, tcp_port),
	N(OPT_CLIENTS, "--clients", 1, RDMEM_SHM_MAX_CLIENTS, fd.clients),
	N(OPT_CLIENTS_PER_UID, "--clients-per-uid", 1, RDMEM_SHM_MAX_CLIENTS, fd.clients_per_uid),
	N(OPT_CLIENT_STRIKES, "--client-strikes", 0, RDMEM_FD_STRIKES_MAX, fd.client_strikes),
	N(OPT_SLOTS, "--slots", 1, RDMEM_SHM_MAX_SLOTS, fd.slots),
	B(OPT_MAX_VALUE, "--max-value", 1, RDMEM_MAX_VALUE_LIMIT, fd.max_value),
	B(OPT_MAX_CLIENT_MEM, "--max-client-mem", 0, RDMEM_PIN_MAX_LIMIT, fd.max_client_mem),
	B(OPT_MAX_TOTAL_MEM, "--max-total-mem", 0, RDMEM_PIN_MAX_LIMIT, fd.max_total_mem),
	B(OPT_BULK, "--bulk-threshold", 0, UINT32_MAX, cfg.path.bulk_threshold),
	B(OPT_LARGE, "--large-threshold", 0, UINT32_MAX, cfg.path.large_threshold),
	N(OPT_ERRORS, "--error-threshold", 0, UINT32_MAX, cfg.path.error_threshold),
	N(OPT_RING, "--ring-slots", 1, RDMEM_MAX_RING_SLOTS, cfg.ring_slots),
	B(OPT_RESP, "--resp-bytes", 64, RDMEM_MAX_RESP_BYTES, cfg.resp_bytes),
	N(OPT_MAX_READS, "--max-reads", 1, 255, cfg.max_reads),
	N(OPT_STALL, "--rdma-stall-ms", 50, 600000, cfg.stall_ms),
	N(OPT_CONNECT, "--connect-timeout", 1, 600000, connect_timeout_ms),
	N(OPT_SIM_FAIL, "--simulate-rdma-op-fail", 0, UINT32_MAX, cfg.sim.op_fail),
	N(OPT_SIM_ERRORS, "--simulate-rdma-errors", 0, UINT32_MAX, cfg.sim.rdma_errors),
	N(OPT_METRICS_PORT, "--metrics-port", 1, 65535, metrics_port),
	N(OPT_RESP_PORT, "--resp-port", 1, 65535, resp_port),
	N(OPT_RESP_MAX_CONNS, "--resp-max-conns", 1, 1000000, resp.max_conns),
	N(OPT_RESP_IDLE_EVICT, "--resp-idle-evict", 0, 86400, resp.idle_evict_s),
	B(OPT_RESP_MAX_MEMORY, "--resp-max-memory", RDMEM_RESP_MIN_MAX_MEMORY,
	  RDMEM_RESP_MAX_MAX_MEMORY, resp.max_memory),
};

#undef N
#undef B

static int rdmem_agent_group(const char *flag, const char *name, gid_t *gid)
{
	struct group *g = getgrnam(name);
	uint64_t v;

	if (g) {
		*gid = g->gr_gid;
		return 0;
	}
	if (rdmem_parse_size(name, &v) == 0 && v < UINT32_MAX) {
		*gid = (gid_t)v;
		return 0;
	}
	fprintf(stderr, "rdmem-agent: %s: no group '%s'\n", flag, name);
	return -EINVAL;
}

static int rdmem_agent_text(struct rdmem_agent_opts *o, int c, const char *arg)
{
	switch (c) {
	case 's':
		o->cfg.server = arg;
		return 0;
	case OPT_SERVERS_FILE:
		o->servers_file = arg;
		return 0;
	case OPT_FABRIC:
		o->fabric = arg;
		return 0;
	case OPT_SHM_NAME:
		o->fd.shm_name = arg;
		return 0;
	case OPT_SOCKET:
		if (arg[0] == '/' && strlen(arg) < RDMEM_DOOR_PATH_MAX) {
			o->fd.socket_path = arg;
			return 0;
		}
		fprintf(stderr,
			"rdmem-agent: --socket: '%s' is not an absolute path of at most %zu "
			"bytes\n",
			arg, RDMEM_DOOR_PATH_MAX - 1);
		return -EINVAL;
	case OPT_SHM_RESET:
		o->fd.reset = 1;
		return 0;
	case OPT_SHM_GROUP:
		return rdmem_agent_group("--shm-group", arg, &o->fd.group);
	case OPT_ADMIN_GROUP:
		o->fd.has_admin_group = 1;
		return rdmem_agent_group("--admin-group", arg, &o->fd.admin_group);
	case OPT_BUSY:
		o->cfg.busy_poll = o->fd.busy_poll = 1;
		return 0;
	case OPT_SIM_DOWN:
		o->cfg.sim.rdma_down = 1;
		return 0;
	case OPT_METRICS_BIND:
		if (rdmem_metrics_bind_ok(arg) == 0) {
			o->metrics_bind = arg;
			return 0;
		}
		fprintf(stderr,
			"rdmem-agent: --metrics-bind: '%s' is not a numeric IPv4 or IPv6 "
			"address\n",
			arg);
		return -EINVAL;
	case OPT_SECRET:
		o->secret_file = arg;
		return 0;
	case OPT_RESP_BIND:
		if (rdmem_metrics_bind_ok(arg) == 0) {
			o->resp.bind = arg;
			return 0;
		}
		fprintf(stderr,
			"rdmem-agent: --resp-bind: '%s' is not a numeric IPv4 or IPv6 address\n",
			arg);
		return -EINVAL;
	case OPT_RESP_SOCKET:
		o->resp.socket = arg;
		return 0;
	case OPT_TLS_CA:
		o->tls.ca = arg;
		return 0;
	case OPT_TLS_CERT:
		o->tls.cert = arg;
		return 0;
	case OPT_TLS_KEY:
		o->tls.key = arg;
		return 0;
	case OPT_TLS_NAME:
		o->tls.server_name = arg;
		return 0;
	case OPT_SOURCE:
		o->cfg.source = arg;
		return 0;
	case 'v':
		o->verbose = 1;
		return 0;
	case OPT_FORCE:
		if (rdmem_path_parse(arg, &o->cfg.path.force) == 0)
			return 0;
		fprintf(stderr,
			"rdmem-agent: --force-path: '%s' is not auto, eager, lazy, bulk "
			"or tcp\n",
			arg);
		return -EINVAL;
	case OPT_SIM_PRESSURE:
		if (strcmp(arg, "ring") == 0)
			o->cfg.sim.pressure = RDMEM_PRESSURE_RING;
		else if (strcmp(arg, "objpool") == 0)
			o->cfg.sim.pressure = RDMEM_PRESSURE_OBJPOOL;
		else {
			fprintf(stderr,
				"rdmem-agent: --simulate-server-pressure: ring or objpool\n");
			return -EINVAL;
		}
		return 0;
	case 'h':
		rdmem_agent_usage(stdout);
		exit(0);
	}
	rdmem_agent_usage(stderr);
	return -EINVAL;
}

/* A --resp-max-memory given must leave room for one connection doing what a
 * legal client may (it would be closed for it otherwise); its floor grows
 * with --max-value and --slots, so the range alone cannot say it. Unset,
 * the RESP thread picks the default, raised to the floor. */
static int rdmem_agent_resp_memory(const struct rdmem_agent_opts *o)
{
	uint64_t floor = rdmem_resp_mem_floor(o->fd.max_value, o->fd.slots);

	if (!(o->resp_port || o->resp.socket) || !o->resp.max_memory || o->resp.max_memory >= floor)
		return 0;
	fprintf(stderr,
		"rdmem-agent: --resp-max-memory: %llu bytes is below %llu, what one "
		"Redis-protocol connection may hold with --max-value %u and --slots %u (its "
		"input, argument copies and unread output): raise it or lower --max-value or "
		"--slots\n",
		(unsigned long long)o->resp.max_memory, (unsigned long long)floor, o->fd.max_value,
		o->fd.slots);
	return -EINVAL;
}

static void rdmem_agent_defaults(struct rdmem_agent_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->port = RDMEM_DEFAULT_PORT;
	o->fd.shm_name = "/rdmem";
	o->fd.group = (gid_t)-1;
	o->fd.clients = 32;
	o->fd.client_strikes = RDMEM_FD_STRIKES_DEFAULT;
	o->fd.slots = 16;
	o->fd.max_value = RDMEM_DEFAULT_MAX_VALUE;
	o->fd.max_client_mem = RDMEM_FD_MEM_DEFAULT; /* 64m, or one slot if more */
	o->fd.max_total_mem = RDMEM_FD_MEM_DEFAULT;  /* 256m, or one slot if more */
	o->fd.has_mem_limits = 1;
	o->connect_timeout_ms = 2000;
	o->cfg.path = (struct rdmem_path_config){ RDMEM_PATH_AUTO, 8192, 8192, 8 };
	o->cfg.ring_slots = RDMEM_DEFAULT_RING_SLOTS;
	o->cfg.resp_bytes = RDMEM_DEFAULT_RESP_BYTES;
	o->resp.max_conns = RDMEM_RESP_DEFAULT_MAX_CONNS;
	o->resp.idle_evict_s = RDMEM_RESP_DEFAULT_IDLE_EVICT;
}

/* The server list of -s or --servers-file, checked now: a bad one is a
 * usage error, not a daemon that starts and serves nobody. */
static int rdmem_agent_servers(struct rdmem_agent_opts *o)
{
	char why[512];
	int ret;

	o->servers = calloc(RDMEM_ROUTER_MAX_SERVERS, sizeof(*o->servers));
	if (!o->servers)
		return -ENOMEM;
	if (o->servers_file)
		ret = rdmem_router_read_servers(o->servers_file, o->cfg.port, (uint16_t)o->tcp_port,
						o->servers, &o->nservers, why, sizeof(why));
	else
		ret = rdmem_router_parse_list(o->cfg.server, 0, o->cfg.port, (uint16_t)o->tcp_port,
					      o->servers, &o->nservers, why, sizeof(why));
	if (ret < 0)
		fprintf(stderr, "rdmem-agent: %s%s\n", o->servers_file ? "" : "-s: ", why);
	return ret;
}

static int rdmem_agent_parse(struct rdmem_agent_opts *o, int argc, char **argv)
{
	int c, ret;

	rdmem_agent_defaults(o);
	while ((c = getopt_long(argc, argv, "s:p:vh", rdmem_agent_longopts, NULL)) != -1) {
		ret = rdmem_opt_num_parse(rdmem_agent_ranges, RDMEM_ARRAY_SIZE(rdmem_agent_ranges),
					  c, optarg, "rdmem-agent", o);
		if (ret == -ENOENT)
			ret = rdmem_agent_text(o, c, optarg);
		if (ret < 0)
			return ret;
	}
	if (optind < argc || !!o->cfg.server == !!o->servers_file) {
		fprintf(stderr, "rdmem-agent: %s\n",
			optind < argc	? "unexpected argument"
			: o->cfg.server ? "-s and --servers-file: give one, not both"
					: "-s SERVER or --servers-file FILE is required");
		rdmem_agent_usage(stderr);
		return -EINVAL;
	}
	if (rdmem_tls_files_misuse(&o->tls, 0)) {
		fprintf(stderr, "rdmem-agent: %s\n", rdmem_tls_files_misuse(&o->tls, 0));
		return -EINVAL;
	}
	if (rdmem_agent_resp_memory(o) < 0)
		return -EINVAL;
	o->cfg.port = (uint16_t)o->port;
	o->cfg.tcp_port = (uint16_t)(o->tcp_port ? o->tcp_port : o->port + 1);
	o->cfg.clients = o->fd.clients;
	o->cfg.slots = o->fd.slots;
	o->cfg.max_value = o->fd.max_value;
	o->cfg.connect_timeout_ms = (int)o->connect_timeout_ms;
	o->resp.port = (uint16_t)o->resp_port;
	o->resp.shm_name = o->fd.shm_name;
	if (rdmem_agent_fabric_kind(o, &o->fabric_kind) < 0)
		return -EINVAL;
	return rdmem_agent_servers(o);
}

/* ---- running ---------------------------------------------------------------- */

struct rdmem_agent {
	struct rdmem_frontdoor *fd;
	struct rdmem_router *router;
	struct rdmem_metrics_http *metrics;
	struct rdmem_resp *resp;
};

static int rdmem_agent_start(struct rdmem_agent *a, struct rdmem_agent_opts *o)
{
	struct rdmem_router_config rc = { o->cfg,
					  { NULL, NULL, 0, o->cfg.clients, o->cfg.slots,
					    o->cfg.connect_timeout_ms, o->cfg.busy_poll, NULL,
					    NULL },
					  o->fabric_kind,
					  o->servers_file,
					  o->cfg.port,
					  (uint16_t)o->tcp_port };
	int ret;

	if (o->secret_file && (ret = rdmem_auth_load(o->secret_file, &o->cfg.auth)) < 0)
		return ret;
	rc.session.auth = rc.tcp.auth = o->cfg.auth;
	if (o->tls.ca && (ret = rdmem_tls_ctx_create(&o->tls, 0, &o->tls_ctx)) < 0)
		return ret;
	rc.tcp.tls = o->tls_ctx;
	if ((ret = rdmem_frontdoor_create(&o->fd, &a->fd)) < 0)
		return ret;
	if ((ret = rdmem_router_start(&rc, a->fd, o->servers, o->nservers, &a->router)) < 0)
		return ret;
	rdmem_frontdoor_on_batch_end(a->fd, rdmem_router_batch_end);
	if ((ret = rdmem_frontdoor_start(a->fd, rdmem_router_submit, a->router)) < 0)
		return ret;
	if (o->metrics_port) {
		struct rdmem_metrics_http_config mc = { o->metrics_bind, (uint16_t)o->metrics_port,
							rdmem_router_metrics_render, a->router };

		ret = rdmem_metrics_http_start(&mc, &a->metrics);
	}
	/* Last: it is a client of the front door started above. */
	if (ret == 0 && (o->resp.port || o->resp.socket))
		ret = rdmem_resp_start(&o->resp, &a->resp);
	return ret;
}

/* Front door first (no new calls), then the actors that still hold calls,
 * then the segment itself, so every call in flight is answered. */
static void rdmem_agent_stop(struct rdmem_agent *a)
{
	rdmem_resp_stop(a->resp);	     /* a client: it finishes its calls while all runs */
	rdmem_metrics_http_stop(a->metrics); /* it reads the actors' counters */
	if (a->fd)
		rdmem_frontdoor_stop(a->fd);
	rdmem_router_stop(a->router);
	if (a->fd)
		rdmem_frontdoor_destroy(a->fd);
}

/* SIGHUP (or `agent-ctl reload`, which raises it) re-reads --servers-file;
 * SIGINT and SIGTERM stop the agent. */
static int rdmem_agent_wait_signal(struct rdmem_agent *a, const sigset_t *set)
{
	char msg[512];
	int sig = 0;

	for (;;) {
		if (sigwait(set, &sig) != 0)
			return -EINTR;
		if (sig != SIGHUP)
			break;
		rdmem_router_reload(a->router, msg, sizeof(msg));
	}
	rdmem_info("signal %d: stopping", sig);
	return 0;
}

int main(int argc, char **argv)
{
	struct rdmem_agent_opts o;
	struct rdmem_agent a = { 0 };
	char names[1024];
	sigset_t set;
	uint32_t n;
	int ret;

	if (rdmem_agent_parse(&o, argc, argv) < 0) {
		free(o.servers);
		return 2;
	}
	rdmem_log_init("rdmem-agent", o.verbose);
	/* Threads inherit the mask: only sigwait() in main sees these. */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	ret = rdmem_agent_start(&a, &o);
	if (ret == 0) {
		n = rdmem_router_servers(a.router, names, sizeof(names));
		rdmem_info("ready: front door %s, %s %s",
			   o.fd.socket_path ? o.fd.socket_path : o.fd.shm_name,
			   n == 1 ? "server" : "servers", names);
		rdmem_agent_wait_signal(&a, &set);
	} else {
		rdmem_err("start failed: %s", strerror(-ret));
	}
	rdmem_agent_stop(&a);
	rdmem_auth_free(o.cfg.auth);
	rdmem_tls_ctx_free(o.tls_ctx);
	free(o.servers);
	return ret == 0 ? 0 : 1;
}
