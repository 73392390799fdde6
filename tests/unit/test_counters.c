/* test_counters.c - one counter table per daemon drives the text, JSON and
 * Prometheus outputs: every table entry appears in all three under its one
 * name (dots in text and JSON nesting; rdmem_<daemon>_<name>[_total] in
 * Prometheus) with the same value, and no output has a key the table lacks.
 * The agent is checked with a snapshot whose every field holds a distinct
 * value (so two entries reading one field, or an entry reading the wrong
 * one, show up); the server with a real service and its real renderers.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/stats.h"
#include "common/counters.h"
#include "server/service_impl.h"
#include "tests/check.h"

#define MAXK 512

struct kv {
	char name[128];
	char val[64]; /* the number or the word, as written */
};

struct kvs {
	struct kv k[MAXK];
	int n;
};

static void kvs_add(struct kvs *m, const char *name, size_t nlen, const char *val, size_t vlen)
{
	if (m->n >= MAXK || nlen >= sizeof(m->k[0].name) || vlen >= sizeof(m->k[0].val)) {
		CHECK(!"output too big for the test's map");
		return;
	}
	memcpy(m->k[m->n].name, name, nlen);
	m->k[m->n].name[nlen] = '\0';
	memcpy(m->k[m->n].val, val, vlen);
	m->k[m->n].val[vlen] = '\0';
	m->n++;
}

static const struct kv *kvs_get(const struct kvs *m, const char *name)
{
	int i;

	for (i = 0; i < m->n; i++)
		if (strcmp(m->k[i].name, name) == 0)
			return &m->k[i];
	return NULL;
}

/* "name value" lines. */
static void parse_text(const char *t, struct kvs *m)
{
	while (*t) {
		const char *sp = strchr(t, ' '), *nl = strchr(t, '\n');

		REQUIRE(sp && nl && sp < nl);
		kvs_add(m, t, (size_t)(sp - t), sp + 1, (size_t)(nl - sp - 1));
		t = nl + 1;
	}
}

/* Our JSON: objects, strings without escapes, unsigned numbers. Flattens to dotted names. */
static const char *parse_json_obj(const char *p, char *prefix, struct kvs *m)
{
	size_t plen = strlen(prefix);

	if (*p++ != '{')
		return NULL;
	while (*p && *p != '}') {
		const char *k = p + 1, *ke;

		if (*p != '"' || !(ke = strchr(k, '"')) || ke[1] != ':')
			return NULL;
		snprintf(prefix + plen, 128 - plen, "%s%.*s", plen ? "." : "", (int)(ke - k), k);
		p = ke + 2;
		if (*p == '{') {
			p = parse_json_obj(p, prefix, m);
			if (!p)
				return NULL;
		} else if (*p == '"') {
			const char *e = strchr(p + 1, '"');

			if (!e)
				return NULL;
			kvs_add(m, prefix, strlen(prefix), p + 1, (size_t)(e - p - 1));
			p = e + 1;
		} else {
			const char *e = p;

			while (isdigit((unsigned char)*e))
				e++;
			if (e == p)
				return NULL;
			kvs_add(m, prefix, strlen(prefix), p, (size_t)(e - p));
			p = e;
		}
		prefix[plen] = '\0';
		if (*p == ',')
			p++;
	}
	return *p == '}' ? p + 1 : NULL;
}

static void parse_json(const char *t, struct kvs *m)
{
	char prefix[128] = "";
	const char *end = parse_json_obj(t, prefix, m);

	CHECK(end && strcmp(end, "\n") == 0);
}

/* Samples only ("# HELP/# TYPE" lines checked apart); a label value becomes the value. */
static void parse_prom(const char *t, struct kvs *m, struct kvs *types)
{
	while (*t) {
		const char *nl = strchr(t, '\n'), *sp, *br;

		REQUIRE(nl);
		if (strncmp(t, "# TYPE ", 7) == 0) {
			sp = strchr(t + 7, ' ');
			kvs_add(types, t + 7, (size_t)(sp - t - 7), sp + 1, (size_t)(nl - sp - 1));
		} else if (*t != '#') {
			sp = strchr(t, ' ');
			br = memchr(t, '{', (size_t)(sp - t));
			if (br && strncmp(br, "{value=\"", 8) == 0)
				kvs_add(m, t, (size_t)(br - t), br + 8,
					(size_t)(strchr(br + 8, '"') - br - 8));
			else
				kvs_add(m, t, (size_t)((br ? br : sp) - t), sp + 1,
					(size_t)(nl - sp - 1));
		}
		t = nl + 1;
	}
}

static int name_ok(const char *s)
{
	int part = 0;

	for (; *s; s++) {
		if (*s == '.') {
			if (!part)
				return 0;
			part = 0;
		} else if (islower((unsigned char)*s) || isdigit((unsigned char)*s) || *s == '_') {
			part++;
		} else {
			return 0;
		}
	}
	return part > 0;
}

/* Names are snake_case parts; names, Prometheus names and fields unique;
 * groups contiguous (else JSON would repeat an object's key). */
static void check_table(const struct rdmem_ctr_table *t)
{
	size_t i, j;
	char a[128], b[128];

	CHECK(t->n > 0);
	for (i = 0; i < t->n; i++) {
		const struct rdmem_ctr *c = &t->ctr[i];

		if (!name_ok(c->name))
			printf("#   bad name '%s'\n", c->name);
		CHECK(name_ok(c->name));
		CHECK(c->help && *c->help);
		CHECK(c->type == RDMEM_CTR_LABEL ? c->width == sizeof(char *)
						 : (c->width == 4 || c->width == 8));
		CHECK_EQ(rdmem_ctr_prom_name(t, c, a, sizeof(a)), 0);
		for (j = 0; j < i; j++) {
			const struct rdmem_ctr *d = &t->ctr[j];

			CHECK(strcmp(c->name, d->name) != 0);
			CHECK(c->off != d->off);
			REQUIRE(rdmem_ctr_prom_name(t, d, b, sizeof(b)) == 0);
			CHECK(strcmp(a, b) != 0);
		}
	}
}

/* Entries whose names start with group (ending in '.') form one run. */
static int group_contiguous(const struct rdmem_ctr_table *t, const char *group)
{
	size_t i, len = strlen(group);
	int runs = 0, in = 0;

	for (i = 0; i < t->n; i++) {
		int m = strncmp(t->ctr[i].name, group, len) == 0;

		runs += m && !in;
		in = m;
	}
	return runs == 1;
}

static void check_groups(const struct rdmem_ctr_table *t)
{
	char group[128];
	size_t i;
	const char *d;

	for (i = 0; i < t->n; i++)
		for (d = strchr(t->ctr[i].name, '.'); d; d = strchr(d + 1, '.')) {
			snprintf(group, sizeof(group), "%.*s", (int)(d - t->ctr[i].name + 1),
				 t->ctr[i].name);
			if (!group_contiguous(t, group))
				printf("#   group %s is split\n", group);
			CHECK(group_contiguous(t, group));
		}
}

static void expected(const struct rdmem_ctr_table *t, const struct rdmem_ctr *c, const void *snap,
		     char *val, size_t cap)
{
	if (c->type == RDMEM_CTR_LABEL)
		snprintf(val, cap, "%s", rdmem_ctr_label(c, snap));
	else
		snprintf(val, cap, "%llu", (unsigned long long)rdmem_ctr_value(c, snap));
	(void)t;
}

/* Every shown entry in all three with its value; nothing else (but the extra
 * Prometheus-only families, and extra_json/extra_text prefixes). */
static void check_outputs(const struct rdmem_ctr_table *t, const void *snap, unsigned mask,
			  const char *text, const char *json, const char *prom,
			  const char *const *prom_only, const char *skip_value)
{
	static struct kvs mt, mj, mp, types;
	char pname[128], want[64];
	size_t i;
	int k, shown = 0;

	memset(&mt, 0, sizeof(mt));
	memset(&mj, 0, sizeof(mj));
	memset(&mp, 0, sizeof(mp));
	memset(&types, 0, sizeof(types));
	parse_text(text, &mt);
	parse_json(json, &mj);
	parse_prom(prom, &mp, &types);
	for (i = 0; i < t->n; i++) {
		const struct rdmem_ctr *c = &t->ctr[i];
		const struct kv *a, *b, *p, *ty;

		if (c->cond && !(mask & c->cond))
			continue;
		shown++;
		expected(t, c, snap, want, sizeof(want));
		REQUIRE(rdmem_ctr_prom_name(t, c, pname, sizeof(pname)) == 0);
		a = kvs_get(&mt, c->name);
		b = kvs_get(&mj, c->name);
		p = kvs_get(&mp, pname);
		ty = kvs_get(&types, pname);
		if (!a || !b || !p)
			printf("#   %s: text %s json %s prom %s\n", c->name, a ? "yes" : "NO",
			       b ? "yes" : "NO", p ? "yes" : "NO");
		CHECK(a && b && p && ty);
		if (!a || !b || !p || !ty)
			continue;
		CHECK(strcmp(ty->val, c->type == RDMEM_CTR_COUNTER ? "counter" : "gauge") == 0);
		if (skip_value && strcmp(c->name, skip_value) == 0)
			continue; /* moves between renders (uptime) */
		if (strcmp(a->val, want) || strcmp(b->val, want) || strcmp(p->val, want))
			printf("#   %s: want %s, text %s json %s prom %s\n", c->name, want, a->val,
			       b->val, p->val);
		CHECK(!strcmp(a->val, want) && !strcmp(b->val, want) && !strcmp(p->val, want));
	}
	CHECK_EQ(mt.n, shown);
	CHECK_EQ(mj.n, shown);
	for (k = 0; k < mp.n; k++) {
		int known = 0;

		for (i = 0; i < t->n && !known; i++)
			known = rdmem_ctr_prom_name(t, &t->ctr[i], pname, sizeof(pname)) == 0 &&
				!strcmp(pname, mp.k[k].name) &&
				(!t->ctr[i].cond || (mask & t->ctr[i].cond));
		for (i = 0; prom_only && prom_only[i] && !known; i++)
			known = !strncmp(mp.k[k].name, prom_only[i], strlen(prom_only[i]));
		if (!known)
			printf("#   prometheus sample %s is not in the table\n", mp.k[k].name);
		CHECK(known);
	}
}

/* Each numeric field of the snapshot gets 1000 + its entry's index. */
static void fill_distinct(const struct rdmem_ctr_table *t, void *snap)
{
	size_t i;

	for (i = 0; i < t->n; i++) {
		const struct rdmem_ctr *c = &t->ctr[i];
		uint64_t v = 1000 + i;
		uint32_t v32 = (uint32_t)v;

		if (c->width == 8 && c->type != RDMEM_CTR_LABEL)
			memcpy((char *)snap + c->off, &v, 8);
		else if (c->width == 4)
			memcpy((char *)snap + c->off, &v32, 4);
	}
}

static char text[32768], json[32768], prom[65536];

static void agent_render(struct rdmem_agent_snapshot *s)
{
	struct rdmem_prom o;
	unsigned mask = rdmem_agent_snapshot_mask(s);

	REQUIRE(rdmem_agent_stats_format(s, 0, text, sizeof(text)) > 0);
	REQUIRE(rdmem_agent_stats_format(s, 1, json, sizeof(json)) > 0);
	rdmem_prom_init(&o, prom, sizeof(prom));
	/* what rdmem_agent_metrics_render() writes for the table */
	rdmem_ctr_prom(&rdmem_agent_ctr_table, s, mask, &o);
	REQUIRE(rdmem_prom_finish(&o) > 0);
	check_outputs(&rdmem_agent_ctr_table, s, mask, text, json, prom, NULL, NULL);
}

static void test_agent_table(void)
{
	check_table(&rdmem_agent_ctr_table);
	check_groups(&rdmem_agent_ctr_table);
}

static void test_agent_outputs(void)
{
	static struct rdmem_agent_snapshot s;

	memset(&s, 0, sizeof(s));
	fill_distinct(&rdmem_agent_ctr_table, &s);
	s.fabric = RDMEM_FAB_SHM;
	s.force = RDMEM_PATH_LAZY;
	s.sim.pressure = 2;
	s.have_ctrl = 1;
	rdmem_agent_snapshot_names(&s);
	CHECK(strcmp(s.fabric_name, "shm") == 0 && strcmp(s.force_name, "lazy") == 0);
	agent_render(&s);
	CHECK(strstr(text, "rdma.reclaim_msgs ") && strstr(json, "\"rdma\":{"));
	CHECK(strstr(prom, "\nrdmem_agent_rdma_reclaimed_total "));
	/* without the control page, the server.* entries are in none of the three */
	s.have_ctrl = 0;
	agent_render(&s);
	CHECK(!strstr(text, "server.") && !strstr(json, "\"server\"") &&
	      !strstr(prom, "rdmem_agent_server_"));
}

static void test_server_table(void)
{
	check_table(&rdmem_server_ctr_table);
	check_groups(&rdmem_server_ctr_table);
}

static void test_server_outputs(void)
{
	static const char *const prom_only[] = { "rdmem_server_calls_total",
						 "rdmem_server_dispatch_latency_seconds", NULL };
	struct rdmem_service_config cfg = { 1u << 20, 4, NULL, NULL, 1u << 20, 1000, 64u << 20, 0 };
	static struct rdmem_server_snapshot s;
	struct rdmem_rdma_usage u = { 1, 1, 4, 6303744, 80 };
	struct rdmem_service *svc = NULL;
	size_t n;
	int i;

	REQUIRE(rdmem_service_create(&cfg, &svc) == 0);
	for (i = 0; i < 3; i++)
		rdmem_service_count_bad_input(svc);
	rdmem_service_count_auth_failure(svc);
	rdmem_service_session_delta(svc, 1, &u);
	rdmem_service_session_delta(svc, 1, &u);
	rdmem_service_session_delta(svc, 1, &u);
	rdmem_service_session_delta(svc, -1, &u);
	rdmem_service_pool_delta(svc, 4096, 65536, 7);
	n = rdmem_stats_format(svc, 0, text, sizeof(text) - 1);
	REQUIRE(n > 0);
	text[n] = '\0';
	n = rdmem_stats_format(svc, 1, json, sizeof(json) - 1);
	REQUIRE(n > 0);
	json[n] = '\0';
	REQUIRE(rdmem_service_render_metrics(svc, prom, sizeof(prom)) > 0);
	rdmem_server_snapshot_take(svc, &s);
	CHECK_EQ(s.bad_input, 3);
	CHECK_EQ(s.sessions, 2);
	CHECK_EQ(s.rdma_qps, 2);
	CHECK_EQ(s.rdma_mrs, 8);
	CHECK_EQ(s.rdma_registered_bytes, 2 * 6303744);
	CHECK_EQ(s.rdma_recv_wqes, 160);
	CHECK_EQ(s.pool_live, 7);
	check_outputs(&rdmem_server_ctr_table, &s, 0, text, json, prom, prom_only, "uptime_s");
	CHECK(strstr(text, "\nbad_input 3\n") && strstr(json, "\"objects_live\":7"));
	CHECK(strstr(prom, "\nrdmem_server_auth_failures_total 1\n"));
	rdmem_service_destroy(svc);
}

/* A stand-in for the RDMA side's session list: *len bytes of it, or -1 when
 * cap is too small (as rdmem_workers_format() does). */
static int fake_list(void *ctx, int json, char *buf, size_t cap)
{
	size_t len = *(size_t *)ctx;

	(void)json;
	if (len >= cap)
		return -1;
	memset(buf, 'x', len);
	buf[len] = '\0';
	return (int)len;
}

/* STATS answers within --max-value (its floor is 4 KiB) however many sessions
 * are listed: past it the list is left out, said so, and the counters stay. */
static void test_server_stats_fit_a_reply(void)
{
	struct rdmem_service_config cfg = { 4096, 4, NULL, NULL, 1u << 20, 1000, 64u << 20, 0 };
	struct rdmem_service *svc = NULL;
	static char buf[4096];
	size_t list = 100, n;

	REQUIRE(rdmem_service_create(&cfg, &svc) == 0);
	rdmem_service_count_bad_input(svc);
	rdmem_service_set_stats_hook(svc, fake_list, &list);
	for (int json = 0; json < 2; json++) {
		list = 100;
		n = rdmem_stats_format(svc, json, buf, sizeof(buf));
		CHECK(n > 0 && n < sizeof(buf) && strstr(buf, "xxxxxxxxxx"));
		CHECK(!strstr(buf, "rdma_omitted") && !strstr(buf, "longer than a reply"));
		list = 64 << 10; /* a few hundred sessions */
		n = rdmem_stats_format(svc, json, buf, sizeof(buf));
		CHECK(n > 0 && n < sizeof(buf) && !strstr(buf, "xxxxxxxxxx"));
		CHECK(strstr(buf, json ? "\"bad_input\":1" : "\nbad_input 1\n"));
		CHECK(
		    strstr(buf, json ? "\"rdma\":null,\"rdma_omitted\":\"the session list is longer"
				     : "\nrdma: the session list is longer"));
		if (json)
			CHECK(n >= 2 && !strcmp(buf + n - 2, "}\n"));
		/* Lists that end a few bytes either side of the cap: each answers,
		 * whole (JSON closed), with the list or without it. */
		list = 0;
		n = rdmem_stats_format(svc, json, buf, sizeof(buf));
		REQUIRE(n > 0 && n < sizeof(buf));
		for (size_t len = sizeof(buf) - n - 6; len < sizeof(buf) - n + 6; len++) {
			size_t m;

			list = len;
			m = rdmem_stats_format(svc, json, buf, sizeof(buf));
			CHECK(m > 0 && m < sizeof(buf));
			if (json)
				CHECK(m >= 2 && !strcmp(buf + m - 2, "}\n"));
		}
	}
	rdmem_service_set_stats_hook(svc, NULL, NULL);
	rdmem_service_destroy(svc);
}

int main(void)
{
	RUN(test_agent_table);
	RUN(test_agent_outputs);
	RUN(test_server_table);
	RUN(test_server_outputs);
	RUN(test_server_stats_fit_a_reply);
	return check_done();
}
