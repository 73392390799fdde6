/* test_turn_wake.c - the server's side of a turn that wakes (layout 6;
 * include/rdmem/layout.h, RDMEM_TURN_IMM), driven by two raw peers (tests/
 * raw_peer.h) against a real rdmem-server in two groups of one. The credit
 * is one: a turn comes with the immediate only when the peer's requests
 * acknowledged (desc.hint) every earlier one; otherwise it is a plain
 * WRITE of the word. A wake the server sent without a receive for it would
 * break the connection (shm) or stall it (verbs).
 *
 * Each round: both peers keep calls in flight until peer B's turn word
 * tells it to hold; then both stop (in round 3, B sends one more request,
 * as an acknowledgement, once A's group is served), take their replies,
 * and wait for B's word to turn (the worker goes idle, or B's requests
 * still waiting make it a member: either way the server tells it its
 * turn). The round counts the wakes B got, from its start (with credit
 * one a round has one at most, wherever it falls). The hints B sends
 * (counted from the wakes B took; the first time through, w = 0, 1, 1, 2,
 * 2) decide:
 *   1. hint w, nothing sent yet: a wake;
 *   2. hint w - 1 (the wake not acknowledged): none;
 *   3. hint w - 1, then, while B holds and A's group is served, one
 *      request with hint w: a wake. The server reads the hint as the
 *      request arrives, at the switch that makes B a member and tells it
 *      its turn; read when served, after that turn, it would be too late
 *      (found by review). Sent while A's group is served, never in B's
 *      own slice (which goes on a little after the hold is told, and
 *      would serve it before the turn), so such a server fails here
 *      unless this thread stalls twice at the wrong moments;
 *   4. hint w + 8 (claims wakes never sent): none;
 *   5. hint w (acknowledged): a wake.
 * Slices are 100 ms, so a hold (50 ms) outlasts the drain and the other
 * group's grace (20 ms); a round whose hold ran out before its turn (no
 * turn is written then, nor a wake) is tried again. Hints are counted
 * from the wakes B took, so the rounds can run again: a turn told as the
 * worker goes to sleep can beat round 3's acknowledgement (no wake,
 * rightly; seen once in CI), and then rounds 1-3 run once more. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "raw_peer.h"

#define TW_SLOTS  8
#define TW_WINDOW 4 /* slots 0-3 keep calls in flight; slot 4 carries an acknowledgement */
#define TW_SLICE  "100000"
#define TW_NO_ACK 99 /* a round without an acknowledgement */

static struct proc server;
static const char *fab_name = "shm";

static int start_server(void)
{
	char *flags[] = { "--workers",
			  "1",
			  "--group-threshold",
			  "1",
			  "--group-size",
			  "1",
			  "--slice-us",
			  TW_SLICE,
			  "--quiet-lane",
			  "0",
			  NULL };

	return raw_peer_server_start(&server, fab_name, flags);
}

/* A peer with its calls in flight and what its completions said. */
struct tw_peer {
	struct raw_peer p;
	uint32_t busy;	   /* bit i: a call in slot i */
	uint16_t hint;	   /* what its requests say of wakes taken */
	unsigned replies;  /* good replies taken */
	unsigned wakes;	   /* completions with RDMEM_TURN_IMM */
	unsigned bad;	   /* anything else unexpected */
	uint16_t seen_seq; /* the turn word's sequence last seen */
};

static int tw_send(struct tw_peer *t, uint32_t i)
{
	struct rdmem_desc d = raw_peer_desc(RDMEM_OP_PING, 0, 0, 0);

	d.seq = ++t->p.seq[i];
	d.data_off = raw_peer_data_off(&t->p, i);
	d.req_id = i;
	d.hint = t->hint;
	if (raw_peer_send(&t->p, i, &d, 0) < 0)
		return -1;
	t->busy |= 1u << i;
	return 0;
}

/* Takes what completed: replies free their slot, wakes are counted. */
static int tw_poll(struct tw_peer *t)
{
	struct rdmem_wc wc[16];
	struct rdmem_desc rep;
	int n = rdmem_fab_poll(t->p.l->conn, wc, 16), i;

	for (i = 0; i < n; i++) {
		if (wc[i].status != RDMEM_WC_SUCCESS)
			return -1;
		if (wc[i].op != RDMEM_WC_RECV_IMM)
			continue;
		if (rdmem_fab_post_recv(t->p.l->conn, 1) < 0)
			return -1;
		if (wc[i].imm == RDMEM_TURN_IMM)
			t->wakes++;
		else if (wc[i].imm >= TW_SLOTS || !(t->busy & (1u << wc[i].imm)) ||
			 rdmem_dp_take(raw_peer_resp(&t->p, wc[i].imm), &rep) < 0 ||
			 rep.status != RDMEM_S_OK)
			t->bad++;
		else {
			t->busy &= ~(1u << wc[i].imm);
			t->replies++;
		}
	}
	return n < 0 ? -1 : 0;
}

/* The turn word: 1 and its hold when it changed since last seen, else 0. */
static int tw_word(struct tw_peer *t, uint16_t *hold)
{
	uint64_t w;
	uint16_t seq;

	memcpy(&w, (const void *)t->p.l->turn, sizeof(w));
	if (rdmem_turn_decode(w, &seq, hold) < 0 || seq == t->seen_seq)
		return 0;
	t->seen_seq = seq;
	return 1;
}

/* Keeps both peers' windows full until b is told to hold. */
static int tw_until_hold(struct tw_peer *a, struct tw_peer *b)
{
	uint64_t end = rdmem_now_ns() + 10000000000ull;
	uint16_t hold;
	uint32_t i;

	while (rdmem_now_ns() < end) {
		if (tw_poll(a) < 0 || tw_poll(b) < 0)
			return -1;
		if (tw_word(b, &hold) && hold)
			return 0;
		for (i = 0; i < TW_WINDOW; i++) {
			if (!(a->busy & (1u << i)) && tw_send(a, i) < 0)
				return -1;
			if (!(b->busy & (1u << i)) && tw_send(b, i) < 0)
				return -1;
		}
	}
	return -1;
}

/* Takes both peers' completions for ms milliseconds, or until b got
 * `wakes` wakes in all; -1 on a broken connection. */
static int tw_settle(struct tw_peer *a, struct tw_peer *b, unsigned wakes, int ms)
{
	uint64_t end = rdmem_now_ns() + (uint64_t)ms * 1000000;

	while (rdmem_now_ns() < end && b->wakes < wakes)
		if (tw_poll(a) < 0 || tw_poll(b) < 0)
			return -1;
	return 0;
}

/* Waits until a's group is served after the hold: b's slice is over, and
 * what b sends now waits for its next turn. A reply of a's means that (a's
 * replies from before b's slice were taken long before: a hold is told a
 * grace, 20 ms, or more into b's slice), and so does a with nothing in
 * flight (served since the loop's last refill). Then a's window is filled
 * once, so the worker has a's calls to serve as b's request lands. It can
 * still go to sleep first, telling b its turn, if this thread is off the
 * CPU for the ~50 us the worker spins before it sleeps: the test's rerun
 * covers that. -1 on a broken connection, or when a gets no reply in 2 s. */
static int tw_other_slice(struct tw_peer *a, struct tw_peer *b)
{
	uint64_t end = rdmem_now_ns() + 2000000000ull;
	unsigned before = a->replies;
	uint32_t i;

	while (a->busy && a->replies == before && rdmem_now_ns() < end)
		if (tw_poll(a) < 0 || tw_poll(b) < 0)
			return -1;
	if (a->busy && a->replies == before) {
		printf("# no reply of the other group's in 2 s after the hold\n");
		return -1;
	}
	for (i = 0; i < TW_WINDOW; i++)
		if (!(a->busy & (1u << i)) && tw_send(a, i) < 0)
			return -1;
	return 0;
}

/* One try of a round (see the top): the wakes b got, -2 when its hold ran
 * out before a turn came (nothing to count: try again), -1 on error. */
static int tw_try(struct tw_peer *a, struct tw_peer *b, uint16_t hint, int ack, int want)
{
	unsigned before = b->wakes;
	uint64_t end;
	uint16_t hold = 1;

	b->hint = hint;
	if (tw_until_hold(a, b) < 0)
		return -1;
	if (ack >= 0) {
		if (tw_other_slice(a, b) < 0)
			return -1;
		b->hint = (uint16_t)ack;
		if (tw_send(b, TW_WINDOW) < 0) /* a slot the window leaves free */
			return -1;
	}
	for (end = rdmem_now_ns() + 1000000000ull; rdmem_now_ns() < end && hold;) {
		if (tw_poll(a) < 0 || tw_poll(b) < 0)
			return -1; /* a broken connection, not a hold that ran out */
		if (tw_word(b, &hold) && !hold)
			break;
	}
	if (hold)
		return -2;
	/* A wake lands with its word: wait for it, or make sure none comes. */
	if (tw_settle(a, b, before + (unsigned)want, want ? 3000 : 100) < 0)
		return -1;
	return (int)(b->wakes - before);
}

static int tw_round(struct tw_peer *a, struct tw_peer *b, uint16_t hint, int ack, int want)
{
	int tries, got = -2;

	for (tries = 0; tries < 3 && got == -2; tries++) {
		got = tw_try(a, b, hint, ack, want);
		if (got == -2)
			printf("# the hold ran out before a turn: again\n");
	}
	return got;
}

/* The hints of a round, relative to the wakes b took so far (what an
 * agent's hint counts): 0 acknowledges them all, -1 one short, 8 claims
 * wakes never sent. */
static const struct {
	int hint, ack, want; /* ack: the acknowledgement's hint, or no ack (TW_NO_ACK) */
	const char *what;
} tw_rounds[] = {
	{ 0, TW_NO_ACK, 1, "credit: a wake" },
	{ -1, TW_NO_ACK, 0, "not acknowledged: none" },
	{ -1, 0, 1, "acknowledged by a request sent while holding: a wake" },
	{ 8, TW_NO_ACK, 0, "a claim of wakes never sent: none" },
	{ 0, TW_NO_ACK, 1, "acknowledged: a wake" },
};

static void test_a_wake_needs_the_last_acknowledged(void)
{
	struct tw_peer a = { 0 }, b = { 0 };
	int got = 0, again = 1;
	size_t i;

	if (raw_peer_open(&a.p, TW_SLOTS, 20) < 0 || raw_peer_open(&b.p, TW_SLOTS, 20) < 0) {
		CHECK(!"two raw peers connect");
		goto out;
	}
	for (i = 0; i < RDMEM_ARRAY_SIZE(tw_rounds) && got >= 0; i++) {
		int ack =
		    tw_rounds[i].ack == TW_NO_ACK ? -1 : (uint16_t)(b.wakes + tw_rounds[i].ack);

		got = tw_round(&a, &b, (uint16_t)(b.wakes + tw_rounds[i].hint), ack,
			       tw_rounds[i].want);
		printf("# round %zu (%s): %d wake(s)\n", i + 1, tw_rounds[i].what, got);
		/* An acknowledgement that lands just after the worker, all calls
		 * done, told b its turn on its way to sleep: that turn rightly
		 * carries no wake (CI saw it once). It takes this thread off the
		 * CPU just then (tw_other_slice). The late hint gives a credit,
		 * so rounds 1-3 run again from there: 1 must wake, 2 must not, 3
		 * must. A hint read only when its request is served fails round
		 * 3 both times. */
		if (ack >= 0 && got == 0 && again--) {
			printf("# the turn came before the acknowledgement was read: rounds 1-3 "
			       "again\n");
			i = (size_t)-1;
			continue;
		}
		CHECK_EQ(got, tw_rounds[i].want);
	}
	CHECK_EQ(a.bad + b.bad, 0);
out:
	if (a.p.l)
		raw_peer_close(&a.p);
	if (b.p.l)
		raw_peer_close(&b.p);
}

int main(int argc, char **argv)
{
	rdmem_log_init("test_turn_wake", 0);
	fab_name = argc > 1 ? argv[1] : fab_name;
	if (raw_peer_target_from(fab_name) < 0 || start_server() < 0) {
		printf("not ok - start rdmem-server over %s\n", fab_name);
		return 1;
	}
	RUN(test_a_wake_needs_the_last_acknowledged);
	proc_stop(&server, SIGTERM, 5000);
	return check_done();
}
