/* test_tcp_turn.c - a TCP connection's turn (server/tcp_frames.c) over a
 * real service and a connection with no socket, so what one turn serves is
 * exact: in service, a turn ends after TCP_TURN_NS with frames left; while
 * the server stops, a turn serves every frame it holds until the stop's
 * drain deadline, and not one past it (docs/architecture.md, "The TCP
 * path": a stop answers every frame received, within its drain). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdmem/util.h"
#include "server/service.h"
#include "server/tcp_conn.h"
#include "tcp/frame.h"
#include "tests/check.h"

/* Pipelined ECHOs of 16 KiB: a few microseconds each, so the lot takes
 * well over one TCP_TURN_NS (200 us) even on a fast machine, and their
 * replies (3.2 MiB) stay under the mark that pauses a connection. */
#define TURN_FRAMES 200u
#define TURN_VAL    (16u << 10)
#define TURN_FRAME  (RDMEM_DESC_SIZE + TURN_VAL)

static struct rdmem_service *svc;
static struct rdmem_tcp_server srv;

/* A proven connection holding TURN_FRAMES complete ECHO frames; NULL when
 * memory is short. */
static struct conn *conn_with_frames(void)
{
	struct conn *c = calloc(1, sizeof(*c));
	uint32_t i;

	if (!c)
		return NULL;
	c->srv = &srv;
	c->fd = -1;
	c->authed = c->proven = 1;
	snprintf(c->peer, sizeof(c->peer), "test");
	c->rcap = (size_t)TURN_FRAMES * TURN_FRAME;
	if (!(c->rbuf = malloc(c->rcap))) {
		free(c);
		return NULL;
	}
	for (i = 0; i < TURN_FRAMES; i++) {
		struct rdmem_desc d;
		uint8_t *f = c->rbuf + (size_t)i * TURN_FRAME;

		memset(&d, 0, sizeof(d));
		d.state = RDMEM_FRAME_MAGIC;
		d.op = RDMEM_OP_ECHO;
		d.path = RDMEM_PATH_TCP;
		d.val_len = TURN_VAL;
		d.req_id = i + 1;
		rdmem_frame_put(f, &d);
		memset(f + RDMEM_DESC_SIZE, (int)i, TURN_VAL);
	}
	c->rlen = c->rcap;
	return c;
}

/* Frames the turns so far answered: whole replies in the fill buffer. */
static uint32_t replies(const struct conn *c)
{
	return (uint32_t)(c->out[c->fill].len / TURN_FRAME);
}

static void conn_free_test(struct conn *c)
{
	srv.out_held -= c->held;
	srv.in_held -= c->rheld;
	free(c->rbuf);
	free(c->out[0].p);
	free(c->out[1].p);
	free(c);
}

/* In service a turn ends with frames left, and the next goes on. */
static void test_turn_ends_in_service(void)
{
	struct conn *c = conn_with_frames();
	uint32_t first;

	REQUIRE(c);
	srv.stopping = 0;
	CHECK_EQ(rdmem_tcp_conn_process(c), 0);
	first = replies(c);
	printf("# first turn in service: %u of %u frames\n", first, TURN_FRAMES);
	CHECK(first >= 1 && first < TURN_FRAMES);
	CHECK_EQ(c->yielded, 1);
	CHECK_EQ(c->rlen, (size_t)(TURN_FRAMES - first) * TURN_FRAME);
	rdmem_tcp_conn_set_yielded(c, 0);
	conn_free_test(c);
}

/* A stop before its deadline: one turn answers every frame, however long. */
static void test_stop_serves_all_before_deadline(void)
{
	struct conn *c = conn_with_frames();

	REQUIRE(c);
	srv.stopping = 1;
	srv.stop_deadline_ns = rdmem_now_ns() + 60ull * 1000000000ull;
	CHECK_EQ(rdmem_tcp_conn_process(c), 0);
	CHECK_EQ(replies(c), TURN_FRAMES);
	CHECK_EQ(c->yielded, 0);
	CHECK_EQ(c->rlen, 0u);
	conn_free_test(c);
}

/* A stop past its deadline serves nothing more: not a whole buffer of
 * frames, not even a first one. The turn ends; the sweep then closes it. */
static void test_stop_past_deadline_serves_none(void)
{
	struct conn *c = conn_with_frames();
	uint64_t start = rdmem_now_ns();

	REQUIRE(c);
	srv.stopping = 1;
	srv.stop_deadline_ns = start - 1;
	CHECK_EQ(rdmem_tcp_conn_turn_over(c, start), 1);
	CHECK_EQ(rdmem_tcp_conn_process(c), 0);
	CHECK_EQ(replies(c), 0u);
	CHECK_EQ(c->yielded, 1);
	CHECK_EQ(c->rlen, (size_t)TURN_FRAMES * TURN_FRAME);
	rdmem_tcp_conn_set_yielded(c, 0);
	conn_free_test(c);
}

/* The deadline, not the turn's length, is what a stop looks at. */
static void test_turn_over_while_stopping(void)
{
	struct conn c = { .srv = &srv };
	uint64_t now = rdmem_now_ns();

	srv.stopping = 0;
	CHECK_EQ(rdmem_tcp_conn_turn_over(&c, now - 2 * TCP_TURN_NS), 1);
	srv.stopping = 1;
	srv.stop_deadline_ns = now + 1000000000ull;
	CHECK_EQ(rdmem_tcp_conn_turn_over(&c, now - 2 * TCP_TURN_NS), 0);
	srv.stop_deadline_ns = now - 1;
	CHECK_EQ(rdmem_tcp_conn_turn_over(&c, now), 1);
}

int main(void)
{
	struct rdmem_service_config cfg = { 1u << 20, 4, NULL, NULL, 1u << 20, 1000, 64u << 20, 0 };

	if (rdmem_service_create(&cfg, &svc) != 0) {
		fprintf(stderr, "rdmem_service_create failed\n");
		return 1;
	}
	srv.svc = svc;
	srv.cfg.max_value = cfg.max_value;
	srv.cfg.out_budget = 64ull << 20;
	snprintf(srv.name, sizeof(srv.name), "test");
	RUN(test_turn_ends_in_service);
	RUN(test_stop_serves_all_before_deadline);
	RUN(test_stop_past_deadline_serves_none);
	RUN(test_turn_over_while_stopping);
	rdmem_service_destroy(svc);
	return check_done();
}
