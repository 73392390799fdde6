/* rdmem.c - the `rdmem` command: every op of the runtime from a shell (the
 * benchmark, `rdmem bench`, is in bench.c), on librdmem (linked statically: the installed tool
 * needs no loader path, and the calls keep the inline fast path).
 *
 * Exit codes: 0 ok, 1 not found, 2 usage, 3 any other error (one line on
 * stderr saying what failed).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/route.h"
#include "cli/cli.h"
#include "rdmem/util.h"

static const char usage_text[] =
    "usage: rdmem [--shm-name NAME] [--path auto|eager|lazy|bulk|tcp] [--timeout MS]\n"
    "             [--verbose] [-h|--help] [--version] COMMAND\n"
    "commands:\n"
    "  ping | local-ping | echo TEXT\n"
    "  put KEY VALUE | put KEY --file F | get KEY | del KEY | mget K1,K2,...\n"
    "  profile ID | large-get big:<n>[k|m] | image-put KEY FILE [--chunk-size B]\n"
    "  stats [--json] | agent-stats [--json] | agent-ctl COMMAND\n"
    "  bench --op ping|get|put|mget|large-get|bigput|local-ping [-n N] [--window W]\n"
    "        [--size B] [--keys K] [--gap-us G] [--json]\n"
    "  lifecycle N|stale|repeat-reclaim|timeout   (LAZY object lifecycle checks)\n"
    "exit status: 0 ok, 1 not found, 2 usage, 3 other errors\n";

int rdmem_cli_usage(const char *fmt, const char *arg)
{
	fputs("rdmem: ", stderr);
	fprintf(stderr, fmt, arg);
	fputs("\n", stderr);
	fputs(usage_text, stderr);
	return EXIT_USAGE;
}

/* Reports a failed op and maps it to the exit code. */
int rdmem_cli_fail(const char *what, int rc)
{
	fprintf(stderr, "rdmem: %s: %s\n", what, rdmem_strerror(rc));
	return rc == -ENOENT ? EXIT_NOT_FOUND : EXIT_FAIL;
}

int64_t rdmem_cli_stat(const char *text, uint32_t len, const char *name)
{
	size_t n = strlen(name);
	const char *p = text;

	while (p && p < text + len) {
		if ((size_t)(text + len - p) > n && !strncmp(p, name, n) && p[n] == ' ')
			return strtoll(p + n + 1, NULL, 10);
		p = memchr(p, '\n', (size_t)(text + len - p));
		p = p ? p + 1 : NULL;
	}
	return -1;
}

/* The server's limits as "the server's --flag of N bytes", or with its default. */
struct server_caps {
	char value[128], image[128];
	int64_t max_value; /* -1: unknown */
};

/* Returns the limit, or -1 when the server did not say. */
static int64_t server_cap(char *out, size_t cap, const char *text, uint32_t len, const char *name,
			  const char *flag, const char *dflt)
{
	int64_t v = text ? rdmem_cli_stat(text, len, name) : -1;

	if (v >= 0)
		snprintf(out, cap, "the server's %s of %" PRId64 " bytes (rdmem-server %s)", flag,
			 v, flag);
	else
		snprintf(out, cap, "the server's %s (rdmem-server %s, default %s)", flag, flag,
			 dflt);
	return v;
}

/*
 * Reads limits.* from the server's stats, once, for a "too big" message;
 * within the user's --timeout and at most 500 ms, so a server that cannot
 * answer only costs the message its values.
 */
static void server_caps_read(struct cli *c, struct server_caps *caps)
{
	uint32_t ms = c->opts.timeout_ms && c->opts.timeout_ms < 500 ? c->opts.timeout_ms : 500;
	struct rdmem_opts o = { RDMEM_PATH_AUTO, ms, NULL };
	char *text = NULL;
	uint32_t len = 0;

	if (!c->h || rdmem_stats(c->h, 0, &text, &len, &o) != 0) {
		free(text);
		text = NULL;
	}
	caps->max_value = server_cap(caps->value, sizeof(caps->value), text, len,
				     "limits.max_value", "--max-value", "1m");
	server_cap(caps->image, sizeof(caps->image), text, len, "limits.max_image", "--max-image",
		   "64m");
	free(text);
}

static void too_big_server(struct cli *c, const char *what, uint32_t max)
{
	int forced = c->opts.path != RDMEM_PATH_AUTO && c->opts.path != RDMEM_PATH_TCP;
	const char *kind = c->req_kind ? c->req_kind : "reply";
	struct server_caps caps;

	server_caps_read(c, &caps);
	if (!strcmp(kind, "image"))
		fprintf(stderr,
			"rdmem: %s: too big: the server refused the %" PRIu64 "-byte image: "
			"%s caps an upload, %s each chunk (--chunk-size, here %" PRIu64
			" bytes; the agent's max value is %u, rdmem-agent --max-value)\n",
			what, c->req_bytes, caps.image, caps.value,
			c->have_chunk ? c->chunk_size : RDMEM_IMAGE_CHUNK_DEFAULT, max);
	else if (forced && c->req_bytes && caps.max_value >= 0 &&
		 c->req_bytes <= (uint64_t)caps.max_value)
		/* Within both max values: what refused it is the request ring. */
		fprintf(stderr,
			"rdmem: %s: too big: the %s (%" PRIu64 " bytes) is within the agent's "
			"max value of %u bytes and %s, but a forced RDMA path (--path) needs it "
			"to fit the server's request ring (rdmem-server --slot-bytes and "
			"--ring-slots; AUTO sends it over TCP)\n",
			what, kind, c->req_bytes, max, caps.value);
	else if (!c->req_bytes)
		fprintf(stderr,
			"rdmem: %s: too big: the %s is over the agent's max value of %u bytes "
			"(rdmem-agent --max-value) or over %s\n",
			what, kind, max, caps.value);
	else
		fprintf(stderr,
			"rdmem: %s: too big: the %s (%" PRIu64 " bytes) is within the agent's "
			"max value of %u bytes (rdmem-agent --max-value) but over %s, which caps "
			"every value and reply%s\n",
			what, kind, c->req_bytes, max, caps.value,
			forced
			    ? "; a forced RDMA path (--path) also refuses requests over the "
			      "server's request ring (rdmem-server --slot-bytes and --ring-slots)"
			    : "");
}

int rdmem_cli_too_big(struct cli *c, const char *what)
{
	uint32_t max = c->h ? rdmem_max_value(c->h) : 0;

	/* An image goes in chunks: only the server's limits can refuse its size. */
	if (c->req_bytes > max && !(c->req_kind && !strcmp(c->req_kind, "image")))
		fprintf(stderr,
			"rdmem: %s: too big: the %s is %" PRIu64 " bytes, over the agent's max "
			"value of %u bytes (raise it with rdmem-agent --max-value; the server's "
			"--max-value caps it too)\n",
			what, c->req_kind ? c->req_kind : "reply", c->req_bytes, max);
	else
		too_big_server(c, what, max);
	return EXIT_FAIL;
}

/* The value of option argv[*i]; NULL (after a usage message) when missing. */
static const char *opt_value(int argc, char **argv, int *i)
{
	if (*i + 1 >= argc) {
		rdmem_cli_usage("option %s needs a value", argv[*i]);
		return NULL;
	}
	return argv[++*i];
}

static int parse_number_opt(int argc, char **argv, int *i, uint64_t lo, uint64_t hi, uint64_t *out,
			    int *seen)
{
	const char *name = argv[*i], *v = opt_value(argc, argv, i);

	if (!v)
		return EXIT_USAGE;
	if (rdmem_parse_size(v, out) || *out < lo || *out > hi) {
		fprintf(stderr, "rdmem: %s: '%s' is not a number in %" PRIu64 "..%" PRIu64 "\n",
			name, v, lo, hi);
		fputs(usage_text, stderr);
		return EXIT_USAGE;
	}
	*seen = 1;
	return 0;
}

static int parse_option(struct cli *c, int argc, char **argv, int *i)
{
	const char *a = argv[*i], *v;
	uint64_t ms;
	int seen;

	if (!strcmp(a, "-h") || !strcmp(a, "--help"))
		return fputs(usage_text, stdout), c->done = 1, 0;
	if (!strcmp(a, "--version"))
		return printf("rdmem %s\n", rdmem_version()), c->done = 1, 0;
	if (!strcmp(a, "--verbose") || !strcmp(a, "-v"))
		return c->verbose = 1, 0;
	if (!strcmp(a, "--json"))
		return c->json = 1, 0;
	if (!strcmp(a, "--shm-name")) {
		if (!(v = opt_value(argc, argv, i)))
			return EXIT_USAGE;
		c->shm_name = v;
		return 0;
	}
	if (!strcmp(a, "--path")) {
		if (!(v = opt_value(argc, argv, i)))
			return EXIT_USAGE;
		return rdmem_path_parse(v, &c->opts.path) ? rdmem_cli_usage("unknown path '%s'", v)
							  : 0;
	}
	if (!strcmp(a, "--timeout")) {
		int rc = parse_number_opt(argc, argv, i, 1, 3600000, &ms, &seen);

		c->opts.timeout_ms = (uint32_t)ms;
		return rc;
	}
	if (!strcmp(a, "--file")) {
		if (!(c->file = opt_value(argc, argv, i)))
			return EXIT_USAGE;
		return 0;
	}
	if (!strcmp(a, "--op")) {
		if (!(c->bench_op = opt_value(argc, argv, i)))
			return EXIT_USAGE;
		return 0;
	}
	if (!strcmp(a, "--chunk-size"))
		return parse_number_opt(argc, argv, i, 1, RDMEM_MAX_VALUE_LIMIT, &c->chunk_size,
					&c->have_chunk);
	if (!strcmp(a, "-n"))
		return parse_number_opt(argc, argv, i, 1, MAX_BENCH_OPS, &c->n, &c->have_n);
	if (!strcmp(a, "--window"))
		return parse_number_opt(argc, argv, i, 1, RDMEM_SHM_MAX_SLOTS, &c->window,
					&c->have_window);
	if (!strcmp(a, "--size"))
		return parse_number_opt(argc, argv, i, 0, RDMEM_MAX_VALUE_LIMIT, &c->size,
					&c->have_size);
	if (!strcmp(a, "--keys"))
		return parse_number_opt(argc, argv, i, 1, 1000000, &c->keys, &c->have_keys);
	if (!strcmp(a, "--gap-us"))
		return parse_number_opt(argc, argv, i, 0, 1000000, &c->gap_us, &c->have_gap);
	return rdmem_cli_usage("unknown option '%s'", a);
}

static int parse_args(struct cli *c, int argc, char **argv)
{
	int i, rc, positional_only = 0;

	c->argv = calloc((size_t)argc, sizeof(char *));
	if (!c->argv)
		return EXIT_FAIL;
	for (i = 1; i < argc; i++) {
		if (!positional_only && !strcmp(argv[i], "--")) {
			positional_only = 1;
		} else if (!positional_only && argv[i][0] == '-' && argv[i][1] != '\0') {
			rc = parse_option(c, argc, argv, &i);
			if (rc)
				return rc;
		} else {
			c->argv[c->argc++] = argv[i];
		}
	}
	if (c->done)
		return 0;
	if (c->argc == 0)
		return rdmem_cli_usage("%s", "no command given");
	return 0;
}

/* The first option given that cmd does not take, or NULL. */
static const char *stray_option(const struct cli *c, const char *cmd)
{
	int stats = !strcmp(cmd, "stats") || !strcmp(cmd, "agent-stats");
	int bench = !strcmp(cmd, "bench");

	if (c->json && !stats && !bench)
		return "--json";
	if (c->file && strcmp(cmd, "put"))
		return "--file";
	if (c->have_chunk && strcmp(cmd, "image-put"))
		return "--chunk-size";
	if (!bench && (c->bench_op || c->have_n || c->have_window || c->have_size || c->have_keys ||
		       c->have_gap))
		return "--op, -n, --window, --size, --keys and --gap-us";
	return NULL;
}

/* Checks the command got exactly n arguments and no option it ignores. */
int rdmem_cli_want_args(struct cli *c, int n, const char *synopsis)
{
	const char *stray = stray_option(c, c->argv[0]);

	if (stray) {
		fprintf(stderr, "rdmem: %s: %s does not apply here\nrdmem: usage: rdmem %s\n",
			c->argv[0], stray, synopsis);
		return EXIT_USAGE;
	}
	if (c->argc - 1 != n) {
		fprintf(stderr,
			"rdmem: %s: expected %d argument%s, got %d\nrdmem: usage: rdmem %s\n",
			c->argv[0], n, n == 1 ? "" : "s", c->argc - 1, synopsis);
		return EXIT_USAGE;
	}
	return 0;
}

static void report(struct cli *c, const char *what)
{
	if (c->verbose)
		fprintf(stderr, "rdmem: %s: status %s, path %s, latency %.1f us%s\n", what,
			rdmem_strerror(rdmem_status_errno(c->info.status)),
			c->info.path ? rdmem_path_name(c->info.path) : "local",
			(double)c->info.latency_ns / 1000.0, c->info.late ? " (late)" : "");
}

static int write_all(const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n) {
		ssize_t w = write(1, b, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -errno;
		b += w, n -= (size_t)w;
	}
	return 0;
}

/* Reads a whole file; *len up to max bytes, else -E2BIG (*len: its size). */
static int read_file(const char *path, uint64_t max, uint8_t **out, uint64_t *len)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	int rc = 0;

	if (!f)
		return -errno;
	if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode)) {
		fclose(f);
		return -EINVAL;
	}
	*len = (uint64_t)st.st_size; /* also with -E2BIG: the message names it */
	if (*len > max) {
		fclose(f);
		return -E2BIG;
	}
	*out = malloc(*len ? *len : 1);
	if (!*out)
		rc = -ENOMEM;
	else if (*len && fread(*out, 1, *len, f) != *len)
		rc = ferror(f) ? -EIO : -EAGAIN; /* shrank while we read it */
	fclose(f);
	if (rc) {
		free(*out);
		*out = NULL;
	}
	return rc;
}

/* Attaches to the agent once the command's arguments are known to be good. */
int rdmem_cli_attach(struct cli *c)
{
	const char *name = c->shm_name ? c->shm_name : RDMEM_SHM_DEFAULT_NAME;
	int rc;

	if (c->h)
		return 0;
	rc = rdmem_open(c->shm_name, &c->h);
	if (rc == -EINVAL || rc == -ENAMETOOLONG)
		return rdmem_cli_usage("bad --shm-name '%s': want /NAME without another '/', or "
				       "the socket's absolute path (at most 107 bytes)",
				       name);
	if (rc == -EPERM) {
		fprintf(stderr,
			"rdmem: %s: refused to attach: the socket's directory must be root's or "
			"yours (or under a root-owned /run) and writable by its owner only, and "
			"the agent must run as that owner (an impostor does not); check ls -ld\n",
			name);
		return EXIT_FAIL;
	}
	if (rc) {
		fprintf(stderr, "rdmem: %s: %s\n", name, rdmem_strerror(rc));
		return EXIT_FAIL;
	}
	return 0;
}

/* ---- commands ---------------------------------------------------------- */

/* Reports a finished call: 0, or the exit status of its failure. */
/* An agent serves at most 64 servers, named "host:port" (agent/router.h). */
#define CLI_MAX_SERVERS 64
#define CLI_SERVER_NAME 280

/* One server section of a many-server agent-stats report: its name, and
 * whether neither its RDMA link nor its TCP connection is up. */
static const char *next_server(const char *p, const char *end, char *name, size_t cap, int *down)
{
	const char *at = p, *sec_end;
	size_t n;

	while (at && at < end && strncmp(at, "server ", 7))
		at = (at = memchr(at, '\n', (size_t)(end - at))) ? at + 1 : NULL;
	if (!at || at >= end)
		return NULL;
	n = strcspn(at + 7, "\n");
	snprintf(name, cap, "%.*s", (int)n, at + 7);
	sec_end = at + 7 + n;
	while (sec_end < end && strncmp(sec_end, "\n\n", 2))
		sec_end++;
	*down = rdmem_cli_stat(at, (uint32_t)(sec_end - at), "link_up") == 0 &&
		rdmem_cli_stat(at, (uint32_t)(sec_end - at), "tcp.connected") == 0;
	return sec_end;
}

/*
 * -EHOSTUNREACH from an agent with several servers: which are down, and
 * (for a call with one key) which of them holds the key (agent/route.h).
 */
static void name_unreachable(struct cli *c, const char *key)
{
	char names[CLI_MAX_SERVERS][CLI_SERVER_NAME], *text = NULL;
	uint64_t seeds[CLI_MAX_SERVERS];
	int downs[CLI_MAX_SERVERS];
	const char *p, *end;
	uint32_t len = 0, n = 0, i;

	if (rdmem_agent_stats(c->h, 0, &text, &len, NULL) < 0)
		return;
	for (p = text, end = text + len;
	     n < RDMEM_ARRAY_SIZE(names) &&
	     (p = next_server(p, end, names[n], sizeof(names[n]), &downs[n]));
	     n++)
		seeds[n] = rdmem_route_server_seed(names[n]);
	if (n > 1 && key) {
		i = rdmem_route_pick(seeds, n, rdmem_route_key_hash(key, strlen(key)));
		fprintf(stderr, "rdmem: the key is on server %s%s\n", names[i],
			downs[i] ? ", which is down (no RDMA link, no TCP connection)" : "");
		n = 0;
	}
	for (i = 0; n > 1 && i < n; i++)
		if (downs[i])
			fprintf(stderr,
				"rdmem: server %s is down (no RDMA link, no TCP connection)\n",
				names[i]);
	free(text);
}

static int cli_done(struct cli *c, const char *what, int rc)
{
	report(c, what);
	if (rc == -E2BIG)
		return rdmem_cli_too_big(c, what);
	if (rc == -EHOSTUNREACH) {
		rc = rdmem_cli_fail(what, rc);
		name_unreachable(c, strcmp(what, "mget") && c->argc > 1 ? c->argv[1] : NULL);
		return rc;
	}
	return rc ? rdmem_cli_fail(what, rc) : 0;
}

/* How print_reply() ends a value: as it is; with "\n"; with "\n" unless it ends a line. */
enum { OUT_RAW, OUT_NL, OUT_LINE };

/* The end of a command whose reply is a malloc'd value: reports the call,
 * then writes the value to stdout (and a newline as nl says) and frees it. */
static int print_reply(struct cli *c, const char *what, int rc, char *val, uint32_t len, int nl)
{
	if ((rc = cli_done(c, what, rc)))
		return rc;
	rc = write_all(val, len);
	if (!rc && (nl == OUT_NL || (nl == OUT_LINE && (len == 0 || val[len - 1] != '\n'))))
		rc = write_all("\n", 1);
	free(val);
	return rc ? rdmem_cli_fail("write stdout", rc) : 0;
}

static int cmd_ping(struct cli *c, int local)
{
	int rc = rdmem_cli_want_args(c, 0, local ? "local-ping" : "ping");

	if (rc || (rc = rdmem_cli_attach(c)))
		return rc;
	rc = local ? rdmem_local_ping(c->h, &c->opts) : rdmem_ping(c->h, &c->opts);
	if ((rc = cli_done(c, c->argv[0], rc)))
		return rc;
	printf("ok: %.1f us via %s\n", (double)c->info.latency_ns / 1000.0,
	       local ? "the front door" : rdmem_path_name(c->info.path));
	return 0;
}

static int cmd_echo(struct cli *c)
{
	int rc = rdmem_cli_want_args(c, 1, "echo TEXT");
	void *out = NULL;
	uint32_t len = 0;

	if (rc || (rc = rdmem_cli_attach(c)))
		return rc;
	c->req_kind = "text";
	c->req_bytes = strlen(c->argv[1]);
	rc = rdmem_echo(c->h, c->argv[1], (uint32_t)strlen(c->argv[1]), &out, &len, &c->opts);
	return print_reply(c, "echo", rc, out, len, OUT_NL);
}

static int check_key(const char *key)
{
	if (!*key || strlen(key) > RDMEM_MAX_KEY) {
		fprintf(stderr, "rdmem: key must be 1..%u bytes\n", RDMEM_MAX_KEY);
		return EXIT_USAGE;
	}
	return 0;
}

static int cmd_put(struct cli *c)
{
	int rc = rdmem_cli_want_args(c, c->file ? 1 : 2, "put KEY VALUE | put KEY --file F");
	const char *key = c->argv[1];
	uint8_t *val = NULL;
	uint64_t len;

	if (rc || (rc = check_key(key)) || (rc = rdmem_cli_attach(c)))
		return rc;
	c->req_kind = "value";
	if (c->file) {
		rc = read_file(c->file, rdmem_max_value(c->h), &val, &len);
		if (rc == -E2BIG) {
			c->req_bytes = len;
			return rdmem_cli_too_big(c, "put");
		}
		if (rc) {
			fprintf(stderr, "rdmem: put: cannot read %s: %s\n", c->file,
				rc == -EINVAL ? "not a regular file" : strerror(-rc));
			return EXIT_FAIL;
		}
	} else {
		val = (uint8_t *)c->argv[2];
		len = strlen(c->argv[2]);
	}
	c->req_bytes = len;
	rc = rdmem_put(c->h, key, (uint32_t)strlen(key), val, (uint32_t)len, &c->opts);
	if (c->file)
		free(val);
	return cli_done(c, "put", rc);
}

static int cmd_get(struct cli *c)
{
	int rc = rdmem_cli_want_args(c, 1, "get KEY");
	void *val = NULL;
	uint32_t len = 0;

	if (rc || (rc = check_key(c->argv[1])) || (rc = rdmem_cli_attach(c)))
		return rc;
	rc = rdmem_get(c->h, c->argv[1], (uint32_t)strlen(c->argv[1]), &val, &len, &c->opts);
	return print_reply(c, "get", rc, val, len, OUT_RAW);
}

static int cmd_del(struct cli *c)
{
	int rc = rdmem_cli_want_args(c, 1, "del KEY");

	if (rc || (rc = check_key(c->argv[1])) || (rc = rdmem_cli_attach(c)))
		return rc;
	rc = rdmem_del(c->h, c->argv[1], (uint32_t)strlen(c->argv[1]), &c->opts);
	return cli_done(c, "del", rc);
}

static int cmd_mget(struct cli *c)
{
	int rc = rdmem_cli_want_args(c, 1, "mget K1,K2,...");
	char *list, *save = NULL, *k;
	const char **keys;
	uint32_t *lens, n = 0, i;
	struct rdmem_mget m;

	if (rc)
		return rc;
	list = strdup(c->argv[1]);
	keys = calloc(strlen(c->argv[1]) + 1, sizeof(*keys));
	lens = calloc(strlen(c->argv[1]) + 1, sizeof(*lens));
	if (!list || !keys || !lens)
		return rdmem_cli_fail("mget", -ENOMEM);
	for (k = strtok_r(list, ",", &save); k; k = strtok_r(NULL, ",", &save)) {
		if ((rc = check_key(k)))
			goto out;
		keys[n] = k;
		lens[n++] = (uint32_t)strlen(k);
	}
	if (n == 0) {
		rc = rdmem_cli_usage("%s", "mget needs at least one key");
		goto out;
	}
	if ((rc = rdmem_cli_attach(c)))
		goto out;
	rc = rdmem_mget(c->h, keys, lens, n, &m, &c->opts);
	if ((rc = cli_done(c, "mget", rc)))
		goto out;
	for (i = 0; i < n; i++) {
		const void *d;
		uint32_t len;

		printf("%s\t", keys[i]);
		if (rdmem_mget_value(&m, i, &d, &len)) {
			fflush(stdout);
			write_all(d, len);
			printf("\n");
		} else {
			printf("(missing)\n");
		}
	}
	rdmem_mget_free(&m);
out:
	free(list);
	free(keys);
	free(lens);
	return rc;
}

static int cmd_profile(struct cli *c)
{
	int rc = rdmem_cli_want_args(c, 1, "profile ID");
	struct rdmem_profile p;
	uint64_t id;
	uint32_t i, len;
	char *end;

	if (rc)
		return rc;
	errno = 0;
	id = strtoull(c->argv[1], &end, 10);
	if (errno || *end || c->argv[1][0] < '0' || c->argv[1][0] > '9')
		return rdmem_cli_usage("profile ID must be a number, not '%s'", c->argv[1]);
	if ((rc = rdmem_cli_attach(c)))
		return rc;
	rc = rdmem_profile(c->h, id, &p, &c->opts);
	if ((rc = cli_done(c, "profile", rc)))
		return rc;
	printf("id: %" PRIu64 "\nname: %.*s\ntags:", p.view.id, (int)p.view.name_len, p.view.name);
	for (i = 0; i < p.view.tag_count; i++) {
		const char *s;

		rdmem_blob_profile_tag(&p.view, i, &s, &len);
		printf(" %.*s", (int)len, s);
	}
	printf("\ncounters:\n");
	for (i = 0; i < p.view.counter_count; i++) {
		const char *s;
		uint64_t v;

		rdmem_blob_profile_counter(&p.view, i, &s, &len, &v);
		printf("  %.*s: %" PRIu64 "\n", (int)len, s, v);
	}
	rdmem_profile_free(&p);
	return 0;
}

static int cmd_large_get(struct cli *c)
{
	int rc = rdmem_cli_want_args(c, 1, "large-get big:<n>[k|m]");
	void *val = NULL;
	uint32_t len = 0;
	uint64_t size;

	if (rc)
		return rc;
	if (rdmem_big_parse(c->argv[1], strlen(c->argv[1]), &size))
		return rdmem_cli_usage("large-get wants big:<n>[k|m], not '%s'", c->argv[1]);
	if ((rc = rdmem_cli_attach(c)))
		return rc;
	c->req_bytes = size; /* the reply's size, known here */
	rc = rdmem_large_get(c->h, c->argv[1], &val, &len, &c->opts);
	if ((rc = cli_done(c, "large-get", rc)))
		return rc;
	rc = rdmem_large_verify(c->argv[1], val, len);
	free(val);
	if (rc) {
		fprintf(stderr, "rdmem: large-get: %u bytes, content does not match %s\n", len,
			c->argv[1]);
		return EXIT_FAIL;
	}
	printf("%s: %u bytes, verified\n", c->argv[1], len);
	return 0;
}

#define CLI_PROGRESS_MIN (4ull << 20)

static void progress_bar(void *arg, uint64_t done, uint64_t total)
{
	int width = 40, filled = total ? (int)(done * (uint64_t)width / total) : width;

	(void)arg;
	fprintf(stderr, "\r[%.*s%*s] %3d%% %.1f/%.1f MiB", filled,
		"########################################", width - filled, "",
		total ? (int)(done * 100 / total) : 100, (double)done / 1048576.0,
		(double)total / 1048576.0);
	if (done == total)
		fputc('\n', stderr);
}

static int cmd_image_put(struct cli *c)
{
	int rc = rdmem_cli_want_args(c, 2, "image-put KEY FILE [--chunk-size B]");
	struct rdmem_image_opts io = { 0, NULL, NULL, 0 };
	uint8_t *data = NULL;
	uint64_t len;

	if (rc || (rc = check_key(c->argv[1])) || (rc = rdmem_cli_attach(c)))
		return rc;
	io.chunk_size = c->have_chunk ? (uint32_t)c->chunk_size : RDMEM_IMAGE_CHUNK_DEFAULT;
	if (io.chunk_size > rdmem_max_value(c->h)) {
		fprintf(stderr,
			"rdmem: image-put: chunk size %u is over the agent's max value of %u "
			"bytes: lower --chunk-size, or raise rdmem-agent --max-value\n",
			io.chunk_size, rdmem_max_value(c->h));
		return EXIT_USAGE;
	}
	rc = read_file(c->argv[2], UINT32_MAX, &data, &len);
	if (rc) {
		fprintf(stderr, "rdmem: image-put: cannot read %s: %s\n", c->argv[2],
			rc == -EINVAL  ? "not a regular file"
			: rc == -E2BIG ? "over 4 GiB, the most one upload can carry"
				       : strerror(-rc));
		return EXIT_FAIL;
	}
	/* On a terminal only (both outputs: piped or logged, no \r lines), and
	 * only for uploads long enough to watch. */
	if (len >= CLI_PROGRESS_MIN && isatty(1) && isatty(2))
		io.progress = progress_bar;
	c->req_kind = "image";
	c->req_bytes = len;
	rc = rdmem_image_put(c->h, c->argv[1], data, len, &io, &c->opts);
	free(data);
	report(c, "image-put (last chunk)");
	if (rc == -E2BIG)
		return rdmem_cli_too_big(c, "image-put");
	if (rc)
		return rdmem_cli_fail("image-put", rc);
	printf("uploaded %s: %" PRIu64 " bytes in %" PRIu64 " chunks of %u, upload id %016" PRIx64
	       "\n",
	       c->argv[1], len, len ? (len + io.chunk_size - 1) / io.chunk_size : 1, io.chunk_size,
	       io.upload_id);
	return 0;
}

static int cmd_text(struct cli *c, int agent)
{
	int rc = rdmem_cli_want_args(c, 0, agent ? "agent-stats [--json]" : "stats [--json]");
	char *text = NULL;
	uint32_t len = 0;

	if (rc)
		return rc;
	if ((rc = rdmem_cli_attach(c)))
		return rc;
	rc = agent ? rdmem_agent_stats(c->h, c->json, &text, &len, &c->opts)
		   : rdmem_stats(c->h, c->json, &text, &len, &c->opts);
	return print_reply(c, c->argv[0], rc, text, len, OUT_LINE);
}

static int cmd_agent_ctl(struct cli *c)
{
	int rc = rdmem_cli_want_args(c, 1, "agent-ctl COMMAND");
	char *text = NULL;
	uint32_t len = 0;

	if (rc)
		return rc;
	if (!*c->argv[1] || strlen(c->argv[1]) > RDMEM_MAX_KEY)
		return rdmem_cli_usage("agent-ctl COMMAND must be 1..1024 bytes%s", "");
	if ((rc = rdmem_cli_attach(c)))
		return rc;
	rc = rdmem_agent_ctl(c->h, c->argv[1], &text, &len, &c->opts);
	if ((rc = cli_done(c, "agent-ctl", rc)))
		return rc;
	printf("%.*s\n", (int)len, text);
	free(text);
	return 0;
}

/* Every command: its name and the function that runs it (with flag, when
 * one function serves two commands). */
static const struct cli_cmd {
	const char *name;
	int (*run)(struct cli *c);
	int (*run_flag)(struct cli *c, int flag);
	int flag;
} cli_cmds[] = {
	{ "ping", NULL, cmd_ping, 0 },
	{ "local-ping", NULL, cmd_ping, 1 },
	{ "echo", cmd_echo, NULL, 0 },
	{ "put", cmd_put, NULL, 0 },
	{ "get", cmd_get, NULL, 0 },
	{ "del", cmd_del, NULL, 0 },
	{ "mget", cmd_mget, NULL, 0 },
	{ "profile", cmd_profile, NULL, 0 },
	{ "large-get", cmd_large_get, NULL, 0 },
	{ "image-put", cmd_image_put, NULL, 0 },
	{ "stats", NULL, cmd_text, 0 },
	{ "agent-stats", NULL, cmd_text, 1 },
	{ "agent-ctl", cmd_agent_ctl, NULL, 0 },
	{ "bench", rdmem_cli_bench, NULL, 0 },
	{ "lifecycle", rdmem_cli_lifecycle, NULL, 0 },
};

static const struct cli_cmd *find_command(const char *cmd)
{
	unsigned i;

	for (i = 0; i < RDMEM_ARRAY_SIZE(cli_cmds); i++)
		if (!strcmp(cmd, cli_cmds[i].name))
			return &cli_cmds[i];
	return NULL;
}

int main(int argc, char **argv)
{
	const struct cli_cmd *cmd;
	struct cli c;
	int rc;

	memset(&c, 0, sizeof(c));
	c.opts.info = &c.info;
	rc = parse_args(&c, argc, argv);
	if (rc || c.done)
		goto out;
	if (!(cmd = find_command(c.argv[0]))) {
		rc = rdmem_cli_usage("unknown command '%s'", c.argv[0]);
		goto out;
	}
	rc = cmd->run ? cmd->run(&c) : cmd->run_flag(&c, cmd->flag);
	rdmem_close(c.h); /* NULL when the command never attached */
out:
	free(c.argv);
	return rc;
}
