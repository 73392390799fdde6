/* test_turn_word.c - the turn word the server writes into an agent's region
 * (include/rdmem/layout.h) and how the agent reads it (agent/link.h,
 * rdmem_link_turn_look): its bytes on the wire, a torn read, a hold seen
 * late, a turn, an older word landing after a newer one, and the credit of
 * a turn that wakes. */
#include <string.h>

#include "agent/link.h"
#include "check.h"

/* Little-endian, one 32-bit value (sequence high, hold low) twice. */
static void test_turn_bytes(void)
{
	const uint8_t want[8] = { 0xf4, 0x01, 0x07, 0x00, 0xf4, 0x01, 0x07, 0x00 };
	uint64_t w = rdmem_turn_encode(7, 500);
	uint16_t seq = 0, hold = 0;

	CHECK(memcmp(&w, want, sizeof(want)) == 0);
	CHECK_EQ(rdmem_turn_decode(w, &seq, &hold), 0);
	CHECK_EQ(seq, 7);
	CHECK_EQ(hold, 500);
	CHECK_EQ(rdmem_turn_off(4, 64), 4 * 128);
}

/* A write landing as we read: halves of two words differ, and the read
 * says nothing, whichever half came first. */
static void test_torn_read_is_ignored(void)
{
	uint64_t old = rdmem_turn_encode(1, 300), new = rdmem_turn_encode(2, 0), torn;
	uint16_t seq, hold;

	memcpy(&torn, &old, 4);
	memcpy((uint8_t *)&torn + 4, (uint8_t *)&new + 4, 4);
	CHECK_EQ(rdmem_turn_decode(torn, &seq, &hold), -1);
	memcpy(&torn, &new, 4);
	memcpy((uint8_t *)&torn + 4, (uint8_t *)&old + 4, 4);
	CHECK_EQ(rdmem_turn_decode(torn, &seq, &hold), -1);
}

/* The agent's view: a hold counts from the stamp of its last look (it was
 * written after it), the same word seen again is nothing new, a torn one
 * is nothing yet, and a turn is a turn. */
static void test_agent_reads_the_word(void)
{
	uint64_t word = 0, until = 0;
	struct rdmem_link l;
	struct rdmem_turn_view v = { 0 };

	memset(&l, 0, sizeof(l));
	l.turn = &word;
	CHECK_EQ(rdmem_link_turn_look(&l, &v, &until), RDMEM_TURN_SAME); /* never written */
	v.look_ns = 5000000;
	word = rdmem_turn_encode(1, 750);
	CHECK_EQ(rdmem_link_turn_look(&l, &v, &until), RDMEM_TURN_HOLD);
	CHECK_EQ(until, 5000000 + 750 * 1000);
	until = 0;
	v.look_ns = 9000000;
	CHECK_EQ(rdmem_link_turn_look(&l, &v, &until), RDMEM_TURN_SAME);
	CHECK_EQ(until, 0);
	/* Seen late: the stamp is old, the hold is over already. */
	word = rdmem_turn_encode(2, 750);
	v.look_ns = 1000;
	CHECK_EQ(rdmem_link_turn_look(&l, &v, &until), RDMEM_TURN_HOLD);
	CHECK_EQ(until, 1000 + 750 * 1000);
	/* Torn between a hold and a turn: nothing, then the turn once whole. */
	{
		uint64_t go = rdmem_turn_encode(3, 0), torn = word;

		memcpy(&torn, &go, 4);
		word = torn;
		CHECK_EQ(rdmem_link_turn_look(&l, &v, &until), RDMEM_TURN_SAME);
		word = go;
		CHECK_EQ(rdmem_link_turn_look(&l, &v, &until), RDMEM_TURN_GO);
		CHECK_EQ(v.seq, 3);
	}
	/* An older word landing late (a NIC placing out of order) is not news;
	 * the sequence wraps in serial-number order. */
	word = rdmem_turn_encode(2, 750);
	CHECK_EQ(rdmem_link_turn_look(&l, &v, &until), RDMEM_TURN_SAME);
	v.seq = 65535;
	word = rdmem_turn_encode(0, 0);
	CHECK_EQ(rdmem_link_turn_look(&l, &v, &until), RDMEM_TURN_GO);
	CHECK_EQ(v.seq, 0);
}

/* A turn that wakes (layout 6) takes the one receive the agent keeps for
 * it: the server may send the next only once the agent's hint says it
 * took the last. A hint that claims more, or an old one, changes nothing:
 * the count stays honest; the counts wrap. */
static void test_wake_credit_is_one(void)
{
	uint16_t sent = 0, acked = 0;

	CHECK(rdmem_turn_may_wake(sent, acked));
	sent++; /* a wake goes out */
	CHECK(!rdmem_turn_may_wake(sent, acked));
	acked = rdmem_turn_ack(sent, acked, 0); /* a request sent before it landed */
	CHECK_EQ(acked, 0);
	acked = rdmem_turn_ack(sent, acked, 7); /* a hint for wakes never sent */
	CHECK_EQ(acked, 0);
	CHECK(!rdmem_turn_may_wake(sent, acked));
	acked = rdmem_turn_ack(sent, acked, 1); /* took it */
	CHECK_EQ(acked, 1);
	CHECK(rdmem_turn_may_wake(sent, acked));
	acked = rdmem_turn_ack(sent, acked, 0); /* an older request, served after */
	CHECK_EQ(acked, 1);
	sent = 65535, acked = 65535;
	sent++;
	CHECK(!rdmem_turn_may_wake(sent, acked));
	acked = rdmem_turn_ack(sent, acked, 0);
	CHECK_EQ(acked, 0);
	CHECK(rdmem_turn_may_wake(sent, acked));
	/* Never a slot index: the agent tells a wake from a reply by it. */
	CHECK(RDMEM_TURN_IMM >= RDMEM_MAX_RING_SLOTS);
}

int main(void)
{
	RUN(test_turn_bytes);
	RUN(test_torn_read_is_ignored);
	RUN(test_agent_reads_the_word);
	RUN(test_wake_credit_is_one);
	return check_done();
}
