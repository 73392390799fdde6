/* lifecycle.c - `rdmem lifecycle N|stale|repeat-reclaim|timeout`: checks the
 * LAZY object lifecycle end to end through a live agent and server. A LAZY
 * GET makes an object in the server's pool, the agent READs it into our slot
 * and RECLAIMs it with its generation; the counters the agent's stats carry
 * (its own rdma.* and the server's control page, server.obj_*) must move by
 * exactly what the calls did. stale, repeat-reclaim and timeout bend the
 * RECLAIM of one object through agent-ctl simulate-reclaim (admin only), as
 * docs/architecture.md ("Operator scripts and lifecycle checks") describes.
 * Run it against a quiet agent: other clients' LAZY calls move the counters too.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "rdmem/content.h"

#define LC_VALUE_BYTES 4096
#define LC_MAX_N       1000000ull
#define LC_SETTLE_MS   5000u   /* RECLAIMs go out in batches: time to land */
#define LC_TTL_WAIT_MS 120000u /* the server's --object-ttl (default 10 s) and its scan */

/* The counters a check reads, as agent-stats names them. */
enum {
	LC_SESSION,
	LC_LAZY_READS,
	LC_LAZY_EXPIRED,
	LC_RECLAIMED,
	LC_REFUSED,
	LC_ALLOC,
	LC_RECLAIM,
	LC_REPEAT,
	LC_STALE,
	LC_TIMEOUT,
	LC_LIVE,
	LC__COUNT
};

static const char *const lc_names[LC__COUNT] = {
	"server.session",	"rdma.lazy_reads",    "rdma.lazy_expired",   "rdma.reclaimed",
	"rdma.reclaim_refused", "server.obj_alloc",   "server.obj_reclaim",  "server.obj_repeat",
	"server.obj_stale",	"server.obj_timeout", "server.objects_live",
};

/* What each counter means, for the lines the check prints. */
static const char *const lc_meaning[LC__COUNT] = {
	"the agent's RDMA session to the server (the same one throughout)",
	"LAZY objects the agent READ",
	"LAZY READs finished too late to trust",
	"RECLAIM entries the server accepted",
	"RECLAIM entries the server refused",
	"objects the server made for LAZY replies",
	"objects freed by a RECLAIM with their generation",
	"repeated RECLAIMs answered harmlessly",
	"RECLAIMs with a stale generation refused",
	"objects freed by the server's --object-ttl scan",
	"objects live in the server's pool",
};

struct lc {
	struct cli *c;
	int64_t base[LC__COUNT];
	int64_t want[LC__COUNT]; /* deltas from base */
	int failed;
};

static void lc_line(struct lc *l, int ok, const char *fmt, const char *arg)
{
	printf("%s - ", ok ? "ok" : "not ok");
	printf(fmt, arg);
	putchar('\n');
	fflush(stdout);
	l->failed |= !ok;
}

/* Reads every counter of lc_names from the agent's stats into v. */
static int lc_read(struct lc *l, int64_t v[LC__COUNT])
{
	struct rdmem_opts o = { 0 }; /* stats run on the agent: no forced path */
	char *text = NULL;
	uint32_t len = 0;
	int rc = rdmem_agent_stats(l->c->h, 0, &text, &len, &o), i;

	if (rc)
		return rdmem_cli_fail("lifecycle: agent-stats", rc);
	for (i = 0; i < LC__COUNT; i++)
		v[i] = rdmem_cli_stat(text, len, lc_names[i]);
	free(text);
	if (v[LC_SESSION] < 0 || v[LC_ALLOC] < 0) {
		fprintf(stderr,
			"rdmem: lifecycle: the agent has no RDMA session to a server (no "
			"server.obj_* counters): LAZY objects need the verbs or shm fabric\n");
		return EXIT_FAIL;
	}
	return 0;
}

static int lc_reached(const struct lc *l, const int64_t v[LC__COUNT])
{
	int i;

	for (i = 0; i < LC__COUNT; i++)
		if (v[i] - l->base[i] != l->want[i])
			return 0;
	return 1;
}

static void lc_sleep_ms(unsigned ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Polls the counters until they moved by want (or wait_ms passed), then
 * prints one line per counter. RECLAIMs are batched and the control page is
 * read on demand, so the numbers settle a moment after the calls return. */
static int lc_settle(struct lc *l, unsigned wait_ms, const char *stage)
{
	int64_t v[LC__COUNT];
	unsigned waited = 0;
	int rc, i;

	printf("# %s\n", stage);
	while ((rc = lc_read(l, v)) == 0 && !lc_reached(l, v) && waited < wait_ms) {
		lc_sleep_ms(20);
		waited += 20;
	}
	if (rc)
		return rc;
	for (i = 0; i < LC__COUNT; i++) {
		char line[256];
		int64_t d = v[i] - l->base[i];

		if (i == LC_SESSION)
			snprintf(line, sizeof(line), "%s %" PRId64 ": %s", lc_names[i], v[i],
				 lc_meaning[i]);
		else
			snprintf(line, sizeof(line), "%s %+" PRId64 " (want %+" PRId64 "): %s",
				 lc_names[i], d, l->want[i], lc_meaning[i]);
		lc_line(l, d == l->want[i], "%s", line);
	}
	return 0;
}

/* One LAZY GET of key, checked: status, path and every byte. */
static int lc_get(struct lc *l, const char *key, const uint8_t *want, uint32_t want_len)
{
	struct rdmem_opts o = l->c->opts;
	void *val = NULL;
	uint32_t len = 0;
	int rc, ok;

	o.path = RDMEM_PATH_LAZY;
	rc = rdmem_get(l->c->h, key, (uint32_t)strlen(key), &val, &len, &o);
	ok =
	    !rc && l->c->info.path == RDMEM_PATH_LAZY && len == want_len && !memcmp(val, want, len);
	free(val);
	if (!ok) {
		fprintf(stderr, "rdmem: lifecycle: LAZY GET %s: %s, path %s, %u of %u bytes%s\n",
			key, rdmem_strerror(rc),
			l->c->info.path ? rdmem_path_name(l->c->info.path) : "none", len, want_len,
			rc ? "" : " (value or path wrong)");
		return -1;
	}
	return 0;
}

static int lc_ctl(struct lc *l, const char *cmd)
{
	struct rdmem_opts o = { 0 };
	char *text = NULL;
	uint32_t len = 0;
	int rc = rdmem_agent_ctl(l->c->h, cmd, &text, &len, &o);

	free(text);
	if (rc == -EACCES)
		fprintf(stderr,
			"rdmem: lifecycle: agent-ctl %s refused: it is for root, the "
			"agent's user and rdmem-agent --admin-group\n",
			cmd);
	else if (rc)
		fprintf(stderr,
			"rdmem: lifecycle: agent-ctl %s: %s (an agent older than this "
			"tool, or no RDMA session)\n",
			cmd, rdmem_strerror(rc));
	return rc ? EXIT_FAIL : 0;
}

/* Runs n checked LAZY GETs of our own key; 0 or the exit status. */
static int lc_gets(struct lc *l, uint64_t n)
{
	char key[64];
	uint8_t *val = malloc(LC_VALUE_BYTES);
	uint64_t i;
	int rc;

	if (!val)
		return rdmem_cli_fail("lifecycle", -ENOMEM);
	snprintf(key, sizeof(key), "rdmem-lifecycle:%ld", (long)getpid());
	rdmem_big_fill(LC_VALUE_BYTES, (uint64_t)getpid() * 8, val, LC_VALUE_BYTES);
	/* Stored before the baseline: a PUT of 4 KiB makes no object. */
	if ((rc = rdmem_put(l->c->h, key, (uint32_t)strlen(key), val, LC_VALUE_BYTES, NULL))) {
		free(val);
		return rdmem_cli_fail("lifecycle: put", rc);
	}
	if ((rc = lc_read(l, l->base)) == 0) {
		char line[128];

		for (i = 0; i < n && !lc_get(l, key, val, LC_VALUE_BYTES); i++)
			;
		snprintf(line, sizeof(line),
			 "%" PRIu64 " of %" PRIu64 " LAZY GETs of a %u-byte value byte-exact", i, n,
			 LC_VALUE_BYTES);
		lc_line(l, i == n, "%s", line);
		/* A DEL makes no object: the counters are not moved by it. */
		rdmem_del(l->c->h, key, (uint32_t)strlen(key), NULL);
	}
	free(val);
	return rc;
}

/* Arms fault for the next LAZY object, then reads one; a GET that failed
 * disarms it, so no later call of another client meets it. */
static int lc_faulted_get(struct lc *l, const char *fault)
{
	int rc = lc_ctl(l, fault);

	if (rc || (rc = lc_gets(l, 1)) || !l->failed)
		return rc;
	lc_ctl(l, "simulate-reclaim off");
	return EXIT_FAIL;
}

static void lc_want_gets(struct lc *l, int64_t n)
{
	memset(l->want, 0, sizeof(l->want));
	l->want[LC_LAZY_READS] = n;
	l->want[LC_ALLOC] = n;
}

static int lc_run(struct lc *l, const char *mode)
{
	int rc;

	if (!strcmp(mode, "stale")) {
		if ((rc = lc_faulted_get(l, "simulate-reclaim stale")))
			return rc;
		lc_want_gets(l, 1);
		l->want[LC_RECLAIM] = l->want[LC_RECLAIMED] = 1;
		l->want[LC_STALE] = l->want[LC_REFUSED] = 1;
		return lc_settle(l, LC_SETTLE_MS,
				 "the agent sent the object's previous generation first, then the "
				 "right one: the first is refused, the second frees it");
	}
	if (!strcmp(mode, "repeat-reclaim")) {
		if ((rc = lc_faulted_get(l, "simulate-reclaim repeat")))
			return rc;
		lc_want_gets(l, 1);
		l->want[LC_RECLAIM] = l->want[LC_REPEAT] = 1;
		l->want[LC_RECLAIMED] = 2; /* the repeat is answered OK, frees nothing */
		return lc_settle(l, LC_SETTLE_MS,
				 "the agent sent the same RECLAIM twice: the object is freed once, "
				 "the repeat answered harmlessly");
	}
	if (!strcmp(mode, "timeout")) {
		if ((rc = lc_faulted_get(l, "simulate-reclaim withhold")))
			return rc;
		lc_want_gets(l, 1);
		l->want[LC_LIVE] = 1;
		if ((rc = lc_settle(l, LC_SETTLE_MS,
				    "the agent withheld the object's RECLAIM: it stays live")))
			return rc;
		l->want[LC_LIVE] = 0;
		l->want[LC_TIMEOUT] = 1;
		if ((rc = lc_settle(l, LC_TTL_WAIT_MS,
				    "waiting for the server's --object-ttl scan to free it")))
			return rc;
		if ((rc = lc_ctl(l, "simulate-reclaim release")))
			return rc;
		l->want[LC_STALE] = l->want[LC_REFUSED] = 1;
		return lc_settle(l, LC_SETTLE_MS,
				 "the withheld RECLAIM sent now, after the TTL freed the object: "
				 "refused as stale");
	}
	return -1;
}

int rdmem_cli_lifecycle(struct cli *c)
{
	const char *synopsis = "lifecycle N|stale|repeat-reclaim|timeout";
	int rc = rdmem_cli_want_args(c, 1, synopsis);
	const char *mode = c->argv[1];
	struct lc l;
	uint64_t n = 0;

	memset(&l, 0, sizeof(l));
	l.c = c;
	if (rc)
		return rc;
	if (strcmp(mode, "stale") && strcmp(mode, "repeat-reclaim") && strcmp(mode, "timeout") &&
	    (rdmem_parse_size(mode, &n) || n < 1 || n > LC_MAX_N || mode[0] < '0' || mode[0] > '9'))
		return rdmem_cli_usage("lifecycle wants N (1..1000000), stale, repeat-reclaim or "
				       "timeout, not '%s'",
				       mode);
	if ((rc = rdmem_cli_attach(c)))
		return rc;
	if (n) {
		if ((rc = lc_gets(&l, n)))
			return rc;
		lc_want_gets(&l, (int64_t)n);
		l.want[LC_RECLAIM] = l.want[LC_RECLAIMED] = (int64_t)n;
		rc = lc_settle(&l, LC_SETTLE_MS,
			       "every object READ and RECLAIMed with its generation, none left");
	} else {
		rc = lc_run(&l, mode);
	}
	if (rc)
		return rc;
	printf("lifecycle %s: %s\n", mode, l.failed ? "FAILED" : "passed");
	return l.failed ? EXIT_FAIL : 0;
}
