/* fuzz_frontdoor.c - the agent's front door (agent/frontdoor_ring.c, shm/ring.h)
 * against a hostile local client, which can write anything into the shared
 * segment: ring cells and head, its slot words, descriptors and deadlines,
 * the client table.
 *
 * Each input gets a real, fresh segment (3 clients x 5 slots), whose actor
 * thread is never started: two clients attach through the door (librdmem),
 * so their areas are mapped; the third entry stays free, its area unmapped,
 * named only by ring entries. The harness plays the clients, writing their
 * slots through the agent's own mapping, then runs the actor's round on its
 * own thread (rdmem_frontdoor_poll), so every run is deterministic. The input is a program of client actions, rounds and
 * completions. Checked:
 *  - a call handed to submit() keeps the documented contract (allowed op and
 *    flags, a known path, key and value inside its own slot's payload, the
 *    slot's seq, a bounded deadline, the slot TAKEN) and no slot is handed
 *    out twice before it is completed;
 *  - every entry a round takes is accounted exactly once: submitted,
 *    refused (bad_entries), dropped, expired or answered as a local ping;
 *  - inflight equals the calls handed out and not completed;
 *  - a completion leaves the slot DONE with the slot's seq and a reply inside
 *    the payload, or frees or leaves it, never anything else.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/frontdoor.h"
#include "libclient/rdmem.h"
#include "shm/segment.h"
#include "tests/fuzz/fuzz.h"

#define CLIENTS	  3
#define ATTACHED  2 /* entries 0 and 1: attached, their slots written */
#define SLOTS	  5
#define MAX_VALUE 1000
#define MAX_OPS	  512
#define NO_PID	  0x7ffffff0 /* above any pid_max: never a live process */

static char name[64];
static struct rdmem_frontdoor *fd;
static uint8_t *base;
static struct rdmem_shm_geom g;
static struct rdmem_ring ring;
static struct rdmem_agent_call *held[CLIENTS][SLOTS];
static rdmem_t *att[ATTACHED];
static unsigned submitted, nheld;

static const uint16_t ops[] = {
	RDMEM_OP_PING,		 RDMEM_OP_ECHO,
	RDMEM_OP_KV_PUT,	 RDMEM_OP_KV_GET,
	RDMEM_OP_KV_DEL,	 RDMEM_OP_KV_MGET,
	RDMEM_OP_PROFILE,	 RDMEM_OP_LARGE_GET,
	RDMEM_OP_IMAGE_CHUNK,	 RDMEM_OP_RECLAIM,
	RDMEM_OP_STATS,		 RDMEM_OP_AUTH,
	RDMEM_SHM_OP_LOCAL_PING, RDMEM_SHM_OP_AGENT_STATS,
	RDMEM_SHM_OP_AGENT_CTL,	 0,
};

static const uint32_t states[] = {
	RDMEM_SLOT_FREE,
	RDMEM_SLOT_SUBMITTED,
	RDMEM_SLOT_TAKEN,
	RDMEM_SLOT_DONE,
	RDMEM_SLOT_ABANDONED,
	RDMEM_SLOT_SUBMITTED | RDMEM_SLOT_WAITING,
	RDMEM_SLOT_ABANDONED | RDMEM_SLOT_WAITING,
};

static struct rdmem_shm_slot *slot_of(uint32_t c, uint32_t s)
{
	return rdmem_shm_slot_at(base, &g, c, s);
}

static uint32_t phase_of(uint32_t c, uint32_t s)
{
	return RDMEM_SLOT_PHASE(atomic_load(&slot_of(c, s)->state));
}

static void on_submit(void *ctx, struct rdmem_agent_call *call)
{
	const struct rdmem_desc *d = &call->req;
	uint32_t c = call->client, s = call->slot;
	struct rdmem_shm_slot *slot;

	(void)ctx;
	FUZZ_CHECK(c < CLIENTS && s < SLOTS);
	FUZZ_CHECK(!held[c][s]);
	slot = slot_of(c, s);
	FUZZ_CHECK(phase_of(c, s) == RDMEM_SLOT_TAKEN);
	FUZZ_CHECK(call->payload == rdmem_shm_payload(slot) && call->payload_cap == g.payload_cap);
	FUZZ_CHECK(call->key == call->payload && call->val == call->payload + RDMEM_SHM_VALUE_OFF);
	FUZZ_CHECK(rdmem_shm_op_allowed(d->op) && d->op != RDMEM_SHM_OP_LOCAL_PING);
	FUZZ_CHECK(d->op != RDMEM_OP_RECLAIM && d->op != RDMEM_OP_AUTH);
	FUZZ_CHECK(!(d->flags & ~RDMEM_SHM_REQ_FLAGS));
	FUZZ_CHECK(call->forced_path < RDMEM_PATH__COUNT && d->path == call->forced_path);
	/* The paths read key_len bytes at key and val_len at val: inside the slot. */
	FUZZ_CHECK(d->key_len <= RDMEM_SHM_VALUE_OFF);
	FUZZ_CHECK(d->val_len <= MAX_VALUE && RDMEM_SHM_VALUE_OFF + d->val_len <= g.payload_cap);
	FUZZ_CHECK(d->seq == call->slot_seq && call->slot_seq == slot->seq);
	FUZZ_CHECK(call->deadline_ns > call->start_ns);
	FUZZ_CHECK(call->deadline_ns - call->start_ns <= RDMEM_SHM_MAX_TIMEOUT_NS);
	held[c][s] = call;
	nheld++;
	submitted++;
}

/* Client and slot numbers: mostly in range, sometimes anything. */
static uint16_t pick(struct fz *in, unsigned n)
{
	uint8_t b = fz_u8(in);

	return b < 240 ? (uint16_t)(b % (n + 1)) : fz_u16(in);
}

/* What libclient does to submit, with the fields from the input. */
static void client_submit(struct fz *in, uint32_t c, uint32_t s)
{
	struct rdmem_shm_slot *slot = slot_of(c, s);
	uint8_t mode = fz_u8(in);
	struct rdmem_desc d;
	uint64_t now = rdmem_now_ns();

	fz_copy(in, &d, sizeof(d));
	if (mode & 1) {
		/* Near-valid, so calls get through and the later steps run. */
		d.op = ops[d.op % RDMEM_ARRAY_SIZE(ops)];
		d.flags &= RDMEM_SHM_REQ_FLAGS;
		d.key_len %= RDMEM_MAX_KEY + 2;
		d.val_len %= MAX_VALUE + 2;
	}
	memcpy(&slot->req, &d, sizeof(d));
	slot->path = fz_u8(in);
	if (mode & 2)
		slot->path %= RDMEM_PATH__COUNT;
	slot->seq++;
	switch ((mode >> 2) & 3) {
	case 0:
		slot->deadline_ns = now + 5000000000ull;
		break;
	case 1:
		slot->deadline_ns = 0;
		break;
	case 2:
		slot->deadline_ns = 1;
		break;
	default:
		slot->deadline_ns = fz_u64(in);
	}
	atomic_store(&slot->state, RDMEM_SLOT_SUBMITTED | (mode & 16 ? RDMEM_SLOT_WAITING : 0));
	if (!(mode & 32))
		rdmem_ring_push(&ring, (uint16_t)c, (uint16_t)s);
}

static void poke_cell(struct fz *in)
{
	uint64_t head = atomic_load(&ring.ctl->head), pos = head + (int8_t)fz_u8(in);
	uint8_t mode = fz_u8(in);
	uint16_t c = pick(in, CLIENTS), sl = pick(in, SLOTS);
	uint64_t w;

	switch (mode % 3) {
	case 0:
		w = rdmem_ring_entry_word(pos, c, sl);
		break;
	case 1:
		w = rdmem_ring_empty_word(pos);
		break;
	default:
		w = fz_u64(in);
	}
	atomic_store(&ring.cells[(mode & 4 ? fz_u8(in) : pos) & ring.mask], w);
}

static void poke_head(struct fz *in)
{
	uint64_t pos;

	switch (fz_u8(in) % 3) {
	case 0:
		rdmem_ring_claim(&ring, &pos);
		break; /* a producer that dies before publishing */
	case 1:
		atomic_fetch_add(&ring.ctl->head, (uint64_t)(int64_t)(int8_t)fz_u8(in));
		break;
	default:
		atomic_store(&ring.ctl->head, fz_u64(in));
	}
}

static void poke_client(struct fz *in, uint32_t c)
{
	struct rdmem_shm_client *e = rdmem_shm_client_at(base, &g, c);
	static const int32_t pids[] = { 0, -1, NO_PID, 1 };
	uint8_t mode = fz_u8(in);

	atomic_store(&e->pid, mode < 128 ? (int32_t)getpid() : pids[mode % 4]);
	if (mode & 1)
		atomic_fetch_add(&e->gen, 1);
}

static void round_(struct fz *in)
{
	struct rdmem_frontdoor_stats a, b;
	int n;

	rdmem_frontdoor_get_stats(fd, &a);
	submitted = 0;
	n = rdmem_frontdoor_poll(fd, on_submit, NULL, fz_u8(in) & 1);
	rdmem_frontdoor_get_stats(fd, &b);
	FUZZ_CHECK(n >= 0 && b.calls - a.calls == (uint64_t)n);
	FUZZ_CHECK(b.calls - a.calls == submitted + (b.bad_entries - a.bad_entries) +
					    (b.dropped - a.dropped) + (b.expired - a.expired) +
					    (b.local_pings - a.local_pings) +
					    (b.late_entries - a.late_entries));
	FUZZ_CHECK(b.inflight == nheld);
}

static void complete(struct fz *in, int all)
{
	unsigned k = fz_u8(in), i;

	for (i = 0; i < CLIENTS * SLOTS; i++) {
		uint32_t c = (k + i) / SLOTS % CLIENTS, s = (k + i) % SLOTS, seq, before, after;
		struct rdmem_agent_call *call = held[c][s];
		struct rdmem_agent_reply rep;
		struct rdmem_shm_slot *slot = slot_of(c, s);

		if (!call)
			continue;
		memset(&rep, 0, sizeof(rep));
		rep.status = fz_u8(in) % (RDMEM_S__COUNT + 1);
		rep.val_len = fz_u8(in) & 1 ? fz_u32(in) : fz_u8(in);
		rep.data_off = fz_u8(in) & 1 ? fz_u32(in) : RDMEM_SHM_VALUE_OFF;
		seq = call->slot_seq;
		before = phase_of(c, s);
		held[c][s] = NULL;
		nheld--;
		rdmem_frontdoor_complete(fd, call, &rep);
		after = phase_of(c, s);
		if (after == RDMEM_SLOT_DONE && before == RDMEM_SLOT_TAKEN) {
			FUZZ_CHECK(slot->rep.seq == seq && slot->rep.status < RDMEM_S__COUNT);
			FUZZ_CHECK(slot->rep.data_off <= g.payload_cap &&
				   slot->rep.val_len <= g.payload_cap - slot->rep.data_off);
		} else {
			/* Given up (ABANDONED -> FREE), a dead client's, or rewritten: not ours. */
			FUZZ_CHECK(after == before ||
				   (before == RDMEM_SLOT_ABANDONED && after == RDMEM_SLOT_FREE));
		}
		if (!all)
			return;
	}
}

static void setup(void)
{
	struct rdmem_frontdoor_config cfg;
	size_t len;
	uint32_t c;

	memset(&cfg, 0, sizeof(cfg));
	cfg.shm_name = name;
	cfg.group = (gid_t)-1;
	cfg.clients = CLIENTS;
	cfg.slots = SLOTS;
	cfg.max_value = MAX_VALUE;
	cfg.ring_skip_ns = 1; /* a stall is skipped on the next round, not after 1 ms */
	FUZZ_CHECK(rdmem_frontdoor_create(&cfg, &fd) == 0);
	base = rdmem_frontdoor_segment(fd, &len);
	FUZZ_CHECK(rdmem_shm_header_check((void *)base, len, &g) == 0);
	rdmem_shm_ring_view(base, &g, &ring);
	/* Clients 0 and 1 attached through the door (the door thread runs),
	 * client 2 free. */
	for (c = 0; c < ATTACHED; c++)
		FUZZ_CHECK(rdmem_open(name, &att[c]) == 0);
}

static void teardown(void)
{
	uint32_t c;

	rdmem_frontdoor_destroy(fd);
	fd = NULL;
	for (c = 0; c < ATTACHED; c++)
		rdmem_close(att[c]);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fz_quiet();
	snprintf(name, sizeof(name), "/rdmem-fuzz-%d", (int)getpid());
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz in = fz_init(data, size);
	struct rdmem_frontdoor_stats st;
	unsigned n = 0;

	setup();
	while (!fz_empty(&in) && n++ < MAX_OPS) {
		uint8_t op = fz_u8(&in), b1 = fz_u8(&in), b2 = fz_u8(&in);
		uint32_t c = b1 % ATTACHED, s = b2 % SLOTS;

		switch (op % 10) {
		case 0:
			rdmem_ring_push(&ring, (uint16_t)(b1 % (CLIENTS + 1)),
					(uint16_t)(b2 % (SLOTS + 1)));
			break;
		case 1:
		case 2:
			client_submit(&in, c, s);
			break;
		case 3:
			atomic_store(&slot_of(c, s)->state,
				     op & 0x80 ? fz_u32(&in) : states[op / 10 % 7]);
			break;
		case 4: {
			/* Raw bytes anywhere in a slot's 256-byte control block. */
			uint8_t off = fz_u8(&in);

			fz_copy(&in, (uint8_t *)slot_of(c, s) + off,
				RDMEM_MIN(8u, (unsigned)RDMEM_SHM_SLOT_HDR - off));
			break;
		}
		case 5:
			poke_cell(&in);
			break;
		case 6:
			poke_head(&in);
			break;
		case 7:
			poke_client(&in, b1 % CLIENTS);
			break;
		case 8:
			round_(&in);
			break;
		default:
			complete(&in, 0);
		}
	}
	/* Every call handed out is completed; a last round's calls too. */
	complete(&in, 1);
	rdmem_frontdoor_get_stats(fd, &st);
	FUZZ_CHECK(nheld == 0 && st.inflight == 0);
	round_(&in);
	complete(&in, 1);
	rdmem_frontdoor_get_stats(fd, &st);
	FUZZ_CHECK(nheld == 0 && st.inflight == 0);
	teardown();
	return 0;
}
