/* test_path.c - the path selector against its rules (docs/architecture.md, "Paths"). */
#include <string.h>

#include "agent/path.h"
#include "check.h"

static const struct rdmem_path_config cfg = { RDMEM_PATH_AUTO, 8192, 8192, 10 };
static const struct rdmem_path_state healthy = { 1, 0, 10, 10, 0, 0 };

static enum rdmem_path pick(const struct rdmem_path_state *st, uint8_t forced, uint64_t req,
			    uint64_t reply)
{
	struct rdmem_path_call c = { forced, req, reply };

	return rdmem_select_path(&cfg, st, &c);
}

static void test_size_rules(void)
{
	CHECK_EQ(pick(&healthy, RDMEM_PATH_AUTO, 48, 0), RDMEM_PATH_EAGER);
	CHECK_EQ(pick(&healthy, RDMEM_PATH_AUTO, 8191, 0), RDMEM_PATH_EAGER);
	CHECK_EQ(pick(&healthy, RDMEM_PATH_AUTO, 8192, 0), RDMEM_PATH_BULK);
	CHECK_EQ(pick(&healthy, RDMEM_PATH_AUTO, 16, 8191), RDMEM_PATH_EAGER);
	CHECK_EQ(pick(&healthy, RDMEM_PATH_AUTO, 16, 65536), RDMEM_PATH_LAZY);
	/* A big request wins over a big reply: BULK is rule 4, LAZY rule 5. */
	CHECK_EQ(pick(&healthy, RDMEM_PATH_AUTO, 65536, 65536), RDMEM_PATH_BULK);
}

static void test_fallback_rules(void)
{
	struct rdmem_path_state down = healthy, errors = healthy, ring = healthy, pool = healthy;

	down.rdma_up = 0;
	errors.rdma_errors = 11;
	ring.ring_used_pct = 91;
	pool.objpool_used_pct = 86;
	CHECK_EQ(pick(&down, RDMEM_PATH_AUTO, 16, 0), RDMEM_PATH_TCP);
	CHECK_EQ(pick(&errors, RDMEM_PATH_AUTO, 16, 0), RDMEM_PATH_TCP);
	CHECK_EQ(pick(&ring, RDMEM_PATH_AUTO, 16, 0), RDMEM_PATH_TCP);
	CHECK_EQ(pick(&pool, RDMEM_PATH_AUTO, 16, 0), RDMEM_PATH_TCP);
	errors.rdma_errors = 10; /* at the threshold is still tolerated */
	ring.ring_used_pct = 90;
	pool.objpool_used_pct = 85;
	CHECK_EQ(pick(&errors, RDMEM_PATH_AUTO, 16, 0), RDMEM_PATH_EAGER);
	CHECK_EQ(pick(&ring, RDMEM_PATH_AUTO, 16, 0), RDMEM_PATH_EAGER);
	CHECK_EQ(pick(&pool, RDMEM_PATH_AUTO, 16, 0), RDMEM_PATH_EAGER);
}

static void test_forced_wins(void)
{
	struct rdmem_path_state down = healthy;
	struct rdmem_path_config forced = cfg;
	struct rdmem_path_call c = { RDMEM_PATH_AUTO, 16, 0 };

	down.rdma_up = 0;
	CHECK_EQ(pick(&down, RDMEM_PATH_EAGER, 16, 0), RDMEM_PATH_EAGER);
	CHECK_EQ(pick(&healthy, RDMEM_PATH_TCP, 1 << 20, 0), RDMEM_PATH_TCP);
	forced.force = RDMEM_PATH_LAZY;
	CHECK_EQ(rdmem_select_path(&forced, &down, &c), RDMEM_PATH_LAZY);
	/* The call's own choice beats the agent-wide one. */
	c.forced = RDMEM_PATH_BULK;
	CHECK_EQ(rdmem_select_path(&forced, &healthy, &c), RDMEM_PATH_BULK);
}

static void test_expected_reply(void)
{
	struct rdmem_desc d;

	memset(&d, 0, sizeof(d));
	d.op = RDMEM_OP_LARGE_GET;
	d.key_len = 8;
	CHECK_EQ(rdmem_path_expected_reply(&d, (const uint8_t *)"big:64k!"), 0);
	d.key_len = 7;
	CHECK_EQ(rdmem_path_expected_reply(&d, (const uint8_t *)"big:64k"), 65536);
	d.op = RDMEM_OP_ECHO;
	d.val_len = 300;
	CHECK_EQ(rdmem_path_expected_reply(&d, NULL), 300);
	d.op = RDMEM_OP_KV_GET;
	CHECK_EQ(rdmem_path_expected_reply(&d, (const uint8_t *)"k"), 0);
}

static void test_parse(void)
{
	uint8_t p = 99;

	CHECK_EQ(rdmem_path_parse("lazy", &p), 0);
	CHECK_EQ(p, RDMEM_PATH_LAZY);
	CHECK_EQ(rdmem_path_parse("fast", &p), -EINVAL);
}

int main(void)
{
	RUN(test_size_rules);
	RUN(test_fallback_rules);
	RUN(test_forced_wins);
	RUN(test_expected_reply);
	RUN(test_parse);
	return check_done();
}
