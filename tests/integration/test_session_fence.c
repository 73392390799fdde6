/* test_session_fence.c - one session can never read or write another
 * session's areas on the server, whatever address and rkey it forges.
 *
 *   test_session_fence [shm|verbs]   (default shm)
 *
 * Raw agents (tests/raw_peer.h) against a real rdmem-server. The victim V
 * leaves a distinctive value in its object pool (a LAZY GET it never
 * reclaims) and knows its own windows. An attacker, in a process forked
 * before any session (so it inherits nothing of V's), gets V's addresses and
 * rkeys and tries, each on a fresh session of its own (an access error
 * breaks the connection that made it):
 *   - READ V's object, control page and request slot with V's rkeys;
 *   - WRITE into V's request slot, object and control page with V's rkeys;
 *   - READ V's object with its own object pool rkey; WRITE_WITH_IMM into
 *     V's request slot with its own request rkey; one byte past the end of
 *     its own pool;
 *   - V's object pool rkey with other bits (two guesses).
 * Each must complete with a remote access error, after a READ of its own
 * control page on the same session succeeded (so the operation works, and
 * what stops the forged one is the fence), and no byte of V's pattern may
 * reach the attacker's buffer.
 *
 * What does the fencing: over verbs the device (one PD per session), so the
 * statuses are the proof. On shm the requester checks rkeys and bounds
 * itself, so the statuses only show our emulator refuses as a NIC would; a
 * hostile peer need not run it. What it can reach there is what it maps, so
 * the attacker must also map and hold nothing of V's session: no memfd V
 * maps, no fd V holds (files, receive pages, doorbell sockets).
 *
 * The attacks run twice: V idle, and V with a call in flight (on shm held in
 * flight for the whole round: the server runs in the emulator's black-hole
 * test mode, its replies and V's request held until the round ends). With
 * grouping on (groups of one) over the leased pool, and with private regions
 * and no grouping. A session's areas are registered for its whole life
 * today, so a slice changes nothing of this; the virtualized mapping will,
 * and this test is its guard. Then V's object, its stored value and its
 * control page are unchanged and V's calls are served.
 * docs/architecture.md, "Session hygiene and reaping".
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "raw_peer.h"
#include "tmpdir.h"

#define T_TIMEOUT_MS RAW_PEER_TIMEOUT_MS
#define T_VALUE	     4000u /* V's value: its object and its PUT */
#define T_KEY	     "fence-v"
#define T_MAX_FILES  256

static struct proc server;
static const char *fab_name = "shm";

/* What the attacker learns of V: everything but a way in. */
struct fence_target {
	uint16_t port; /* the case's server */
	struct rdmem_remote req, objpool, ctrl;
	uint64_t object; /* V's object's address */
	uint64_t slot1;	 /* V's request slot 1's payload: its PUT's value */
	uint32_t nfiles; /* shm: inodes of V's session: every memfd it maps, every fd
			    (doorbell sockets, receive pages) it holds */
	uint64_t files[T_MAX_FILES];
};

/* ---- V's side --------------------------------------------------------------- */

static void fill_v(uint8_t *b, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		b[i] = (uint8_t) "VICTIM!!"[i % 8];
}

/* Any 8 bytes of V's pattern in b: a byte of V's reached it. */
static int holds_v(const uint8_t *b, uint32_t n)
{
	return n >= 8 && memmem(b, n, "VICTIM!!", 8) != NULL;
}

static int call_ok(struct raw_peer *p, uint32_t slot, struct rdmem_desc *d, uint32_t sent,
		   struct rdmem_desc *rep)
{
	return raw_peer_call(p, slot, d, sent, rep) == 0 && rep->status == RDMEM_S_OK ? 0 : -1;
}

/* PUT T_KEY = V's pattern. */
static int v_put(struct raw_peer *v)
{
	struct rdmem_desc d = raw_peer_desc(RDMEM_OP_KV_PUT, sizeof(T_KEY) - 1, T_VALUE, 0), rep;

	memcpy(v->buf, T_KEY, d.key_len);
	fill_v(v->buf + d.key_len, T_VALUE);
	return call_ok(v, 0, &d, d.key_len + T_VALUE, &rep);
}

/* GET T_KEY: LAZY (the object's address in *object, left unreclaimed) or EAGER. */
static int v_get(struct raw_peer *v, int lazy, uint64_t *object)
{
	struct rdmem_desc d = raw_peer_desc(RDMEM_OP_KV_GET, sizeof(T_KEY) - 1, 0,
					    lazy ? RDMEM_F_WANT_OBJREF : 0),
			  rep;

	memcpy(v->buf, T_KEY, d.key_len);
	if (call_ok(v, 0, &d, d.key_len, &rep) < 0 || rep.val_len != T_VALUE)
		return -1;
	if (!lazy) {
		memcpy(v->buf, raw_peer_resp_data(v, 0), T_VALUE);
		return 0;
	}
	if (!(rep.flags & RDMEM_F_OBJREF) || rep.args.obj.length != T_VALUE)
		return -1;
	*object = v->l->w.objpool.addr + rep.args.obj.offset;
	return raw_peer_read(v, *object, v->l->w.objpool.rkey, v->buf, T_VALUE);
}

/* The inodes of every memfd this process maps and every fd it holds. */
static uint32_t own_inodes(uint64_t *ino, uint32_t max)
{
	char line[512];
	unsigned long long lo, hi, off;
	unsigned long inode;
	struct stat st;
	uint32_t n = 0;
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f) && n < max)
		if (strstr(line, "/memfd:") &&
		    sscanf(line, "%llx-%llx %*s %llx %*s %lu", &lo, &hi, &off, &inode) == 4)
			ino[n++] = inode;
	fclose(f);
	for (int fd = 0; fd < 1024 && n < max; fd++)
		if (fstat(fd, &st) == 0)
			ino[n++] = st.st_ino;
	return n;
}

static int has_inode(const uint64_t *set, uint32_t n, uint64_t ino)
{
	for (uint32_t i = 0; i < n; i++)
		if (set[i] == ino)
			return 1;
	return 0;
}

/* V's own: what this process holds now and did not hold at *base. */
static uint32_t victim_inodes(const uint64_t *base, uint32_t nbase, uint64_t *out, uint32_t max)
{
	uint64_t now[T_MAX_FILES];
	uint32_t n = own_inodes(now, T_MAX_FILES), k = 0;

	for (uint32_t i = 0; i < n && k < max; i++)
		if (!has_inode(base, nbase, now[i]) && !has_inode(out, k, now[i]))
			out[k++] = now[i];
	return k;
}

/* ---- the attacker's side (a child process) ------------------------------------ */

/* Posts wr (its SGE into p->buf) and waits for its completion: the status,
 * -1 when the post itself was refused, -2 when nothing completed in time. */
static int fence_op(struct raw_peer *p, struct rdmem_wr *wr, uint32_t len)
{
	uint64_t end = rdmem_now_ns() + T_TIMEOUT_MS * 1000000ull;
	struct rdmem_wc wc;

	wr->wr_id = 0xfe;
	wr->flags = RDMEM_WR_SIGNALED;
	wr->nsge = 1;
	wr->sge[0] = (struct rdmem_sge){ (uintptr_t)p->buf, len, p->mr.lkey };
	if (rdmem_fab_post(p->l->conn, wr, 1) < 0)
		return -1;
	while (rdmem_now_ns() < end) {
		int n = rdmem_fab_poll(p->l->conn, &wc, 1);

		if (n < 0)
			return RDMEM_WC_FLUSH_ERR;
		if (n == 1 && wc.wr_id == wr->wr_id)
			return wc.status;
	}
	return -2;
}

static int own_ctrl_read(struct raw_peer *a)
{
	struct rdmem_wr wr = { .op = RDMEM_WR_READ,
			       .remote_addr = a->l->w.ctrl.addr,
			       .rkey = a->l->w.ctrl.rkey };

	return fence_op(a, &wr, a->l->w.ctrl.len);
}

/* Where an attack aims, and with which key. */
enum fence_where { AT_OBJECT, AT_CTRL, AT_SLOT1, AT_REQ, AT_OWN_POOL_END };
enum fence_key { K_V_OBJ, K_V_CTRL, K_V_REQ, K_OWN_OBJ, K_OWN_REQ, K_GUESS_LOW, K_GUESS_HIGH };

static const struct fence_attack {
	const char *name;
	uint8_t op; /* enum rdmem_wr_op */
	uint8_t where, key;
	uint32_t len; /* 0: T_VALUE */
} attacks[] = {
	{ "READ V's object with V's rkey", RDMEM_WR_READ, AT_OBJECT, K_V_OBJ, 0 },
	{ "READ V's control page with V's rkey", RDMEM_WR_READ, AT_CTRL, K_V_CTRL, 64 },
	{ "READ V's request slot with V's rkey", RDMEM_WR_READ, AT_SLOT1, K_V_REQ, 0 },
	{ "WRITE into V's request slot with V's rkey", RDMEM_WR_WRITE, AT_REQ, K_V_REQ, 64 },
	{ "WRITE into V's object with V's rkey", RDMEM_WR_WRITE, AT_OBJECT, K_V_OBJ, 0 },
	{ "WRITE into V's control page with V's rkey", RDMEM_WR_WRITE, AT_CTRL, K_V_CTRL, 64 },
	{ "READ V's object with our own rkey", RDMEM_WR_READ, AT_OBJECT, K_OWN_OBJ, 0 },
	{ "WRITE_WITH_IMM into V's request slot with our own rkey", RDMEM_WR_WRITE_IMM, AT_REQ,
	  K_OWN_REQ, 64 },
	{ "READ past the end of our own pool", RDMEM_WR_READ, AT_OWN_POOL_END, K_OWN_OBJ, 2 },
	{ "READ V's object with a guessed rkey (low byte)", RDMEM_WR_READ, AT_OBJECT, K_GUESS_LOW,
	  0 },
	{ "READ V's object with a guessed rkey (high bits)", RDMEM_WR_READ, AT_OBJECT, K_GUESS_HIGH,
	  0 },
};

#define ATK_COUNT ((int)RDMEM_ARRAY_SIZE(attacks))

static void attack_wr(const struct fence_target *t, const struct raw_peer *a, int k,
		      struct rdmem_wr *wr, uint32_t *len)
{
	const struct fence_attack *x = &attacks[k];
	const uint64_t addr[] = { [AT_OBJECT] = t->object,
				  [AT_CTRL] = t->ctrl.addr,
				  [AT_SLOT1] = t->slot1,
				  [AT_REQ] = t->req.addr,
				  [AT_OWN_POOL_END] =
				      a->l->w.objpool.addr + a->l->w.objpool.len - 1 };
	const uint32_t key[] = { [K_V_OBJ] = t->objpool.rkey,
				 [K_V_CTRL] = t->ctrl.rkey,
				 [K_V_REQ] = t->req.rkey,
				 [K_OWN_OBJ] = a->l->w.objpool.rkey,
				 [K_OWN_REQ] = a->l->w.req.rkey,
				 [K_GUESS_LOW] = t->objpool.rkey ^ 0x5a,
				 [K_GUESS_HIGH] = t->objpool.rkey ^ 0x00a5a500 };

	memset(wr, 0, sizeof(*wr));
	wr->op = x->op;
	wr->remote_addr = addr[x->where];
	wr->rkey = key[x->key];
	*len = x->len ? x->len : T_VALUE;
}

/* The attacker maps, or holds open, anything of V's session: 1 (and says so). */
static int holds_v_file(const struct fence_target *t)
{
	uint64_t mine[T_MAX_FILES];
	uint32_t n = own_inodes(mine, T_MAX_FILES);

	for (uint32_t i = 0; i < n; i++)
		if (has_inode(t->files, t->nfiles, mine[i])) {
			printf("# the attacker holds V's file or socket (inode %llu)\n",
			       (unsigned long long)mine[i]);
			return 1;
		}
	return 0;
}

/* One attack on a fresh session: 0 when fenced. */
static int attack_one(const struct fence_target *t, int k, const char *phase)
{
	struct raw_peer a;
	struct rdmem_wr wr;
	uint32_t len;
	int ctl, st, bad = 0;

	if (raw_peer_open(&a, 16, 100) < 0) {
		printf("# %s, %s: no session for the attacker\n", phase, attacks[k].name);
		return 1;
	}
	ctl = own_ctrl_read(&a);
	attack_wr(t, &a, k, &wr, &len);
	memset(a.buf, 0, T_VALUE);
	if (wr.op != RDMEM_WR_READ)
		fill_v(a.buf, len); /* what a forged write would leave in V's slot */
	st = ctl == RDMEM_WC_SUCCESS ? fence_op(&a, &wr, len) : -3;
	if (ctl != RDMEM_WC_SUCCESS) {
		printf("# %s, %s: our own control page READ failed (%d)\n", phase, attacks[k].name,
		       ctl);
		bad = 1;
	} else if (st == RDMEM_WC_SUCCESS || st == -2) {
		printf("# %s, %s: %s\n", phase, attacks[k].name,
		       st ? "no completion" : "it completed: NOT FENCED");
		bad = 1;
	} else if (st != RDMEM_WC_REM_ACCESS_ERR) {
		printf("# %s, %s: status %s, expected a remote access error\n", phase,
		       attacks[k].name, rdmem_wc_status_name((unsigned)st));
		bad = 1;
	} else if (wr.op == RDMEM_WR_READ && holds_v(a.buf, len)) {
		printf("# %s, %s: V's bytes reached us\n", phase, attacks[k].name);
		bad = 1;
	} else {
		printf("# %s, %s: fenced (remote access error)\n", phase, attacks[k].name);
	}
	if (raw_peer_target.fabric == RDMEM_FAB_SHM && holds_v_file(t))
		bad = 1;
	raw_peer_close(&a);
	return bad;
}

/* The attacker process, forked before any session (or any verbs context:
 * a child cannot use one its parent opened) and kept for every case. Per
 * case it reads V's target, then a phase byte per round ('e' ends the case)
 * and answers each round with a byte and the case with the number of
 * attacks that got through (0: all fenced). */
static pid_t atk_pid;
static int atk_to = -1, atk_back = -1;

static void attacker(int in, int done)
{
	struct fence_target t;
	char phase;

	while (read(in, &t, sizeof(t)) == (ssize_t)sizeof(t)) {
		int failed = 0;

		raw_peer_target.port = t.port;
		while (read(in, &phase, 1) == 1 && phase != 'e') {
			const char *name = phase == 'i' ? "V idle" : "V with a call in flight";

			for (int k = 0; k < ATK_COUNT; k++)
				failed += attack_one(&t, k, name);
			fflush(stdout);
			if (write(done, "d", 1) != 1)
				_exit(101);
		}
		if (write(done, &failed, sizeof(failed)) != (ssize_t)sizeof(failed))
			_exit(102);
	}
	_exit(0);
}

static int attacker_start(void)
{
	int to[2], back[2];

	if (pipe(to) < 0 || pipe(back) < 0)
		return -1;
	fflush(stdout);
	if ((atk_pid = fork()) == 0) {
		close(to[1]);
		close(back[0]);
		attacker(to[0], back[1]);
	}
	close(to[0]);
	close(back[1]);
	atk_to = to[1];
	atk_back = back[0];
	return atk_pid > 0 ? 0 : -1;
}

/* ---- the case ------------------------------------------------------------------ */

static int start_server(char *const *design)
{
	char *flags[24] = {
		"--max-sessions", "8", "--objpool-slabs", "8", "--object-ttl", "60000"
	};
	size_t n = 6;

	for (; *design && n + 1 < RDMEM_ARRAY_SIZE(flags); design++)
		flags[n++] = *design;
	flags[n] = NULL;
	return raw_peer_server_start(&server, fab_name, flags);
}

/* Tells the attacker to run a round and waits for it. */
static int attacker_round(int out, int done, char phase)
{
	char c;

	return write(out, &phase, 1) == 1 && read(done, &c, 1) == 1 ? 0 : -1;
}

/* V's state, checked after the attacks: object, stored value, control page. */
static void check_victim(struct raw_peer *v, uint64_t object)
{
	struct rdmem_ctrl ctrl;
	uint8_t want[T_VALUE];
	uint64_t again;

	fill_v(want, T_VALUE);
	memset(v->buf, 0, T_VALUE);
	CHECK_EQ(raw_peer_read(v, object, v->l->w.objpool.rkey, v->buf, T_VALUE), 0);
	CHECK(memcmp(v->buf, want, T_VALUE) == 0);
	memset(v->buf, 0, T_VALUE);
	CHECK_EQ(v_get(v, 0, &again), 0);
	CHECK(memcmp(v->buf, want, T_VALUE) == 0);
	CHECK_EQ(raw_peer_read(v, v->l->w.ctrl.addr, v->l->w.ctrl.rkey, v->buf, sizeof(ctrl)), 0);
	memcpy(&ctrl, v->buf, sizeof(ctrl));
	CHECK_EQ(ctrl.magic, RDMEM_CTRL_MAGIC);
	CHECK_EQ(ctrl.session_id, v->l->w.session_id);
}

/*
 * The server as the one that writes: a session whose hello points its
 * response slots past its own registration (same rkey, address 1 MiB past
 * the end), then sends a GET of V's key. The server's reply WRITE must be
 * refused (a remote access error on the server's side: the device over
 * verbs, the server's own bounds check on shm) and that session closed; V's
 * memory and the server's stay untouched. Returns the number of checks that
 * failed here (0: fenced).
 */
static int forged_reply_session(void)
{
	const uint32_t slots = 4, resp_bytes = 4096;
	struct rdmem_fab_attr attr = { .max_send_wr = 64, .max_recv_wr = 64, .signal_every = 16 };
	uint64_t resp_len = rdmem_turn_off(slots, resp_bytes) + RDMEM_TURN_BYTES;
	struct rdmem_xchg_hello h = { .magic = RDMEM_XCHG_MAGIC,
				      .version = RDMEM_LAYOUT_VERSION,
				      .ring_slots = slots,
				      .resp_bytes = resp_bytes };
	union {
		struct rdmem_xchg_welcome w;
		uint8_t raw[256];
	} peer = { 0 };
	struct rdmem_conn *c = NULL;
	struct rdmem_mr mr_resp, mr_stage;
	struct rdmem_sge key;
	struct rdmem_dp_msg m;
	struct rdmem_wc wc;
	size_t len = sizeof(peer);
	uint8_t *resp = NULL, *stage = NULL;
	uint64_t end;
	int bad = 0, got_reply = 0;

	resp_len = (resp_len + 4095) & ~4095ull;
	if (rdmem_fab_resolve(raw_peer_target.fabric, raw_peer_target.host, raw_peer_target.port,
			      &attr, T_TIMEOUT_MS, &c) < 0 ||
	    !(resp = rdmem_fab_alloc(c, resp_len)) || !(stage = rdmem_fab_alloc(c, 4096)) ||
	    rdmem_fab_reg(c, resp, resp_len, RDMEM_ACCESS_REMOTE_WRITE, &mr_resp) < 0 ||
	    rdmem_fab_reg(c, stage, 4096, RDMEM_ACCESS_LOCAL, &mr_stage) < 0 ||
	    rdmem_fab_post_recv(c, (int)slots + 8) < 0) {
		printf("# forged reply address: no session to try it on\n");
		return 1;
	}
	h.resp = (struct rdmem_remote){ (uintptr_t)resp + resp_len + (1u << 20), mr_resp.rkey,
					(uint32_t)resp_len };
	h.nonce = rdmem_now_ns();
	rdmem_hello_le(&h);
	if (rdmem_fab_connect(c, &h, sizeof(h), &peer, &len, T_TIMEOUT_MS) < 0) {
		printf("# forged reply address: refused at connect (acceptable, but unexpected)\n");
		bad = 1;
		goto out;
	}
	rdmem_welcome_le(&peer.w);
	/* A GET of V's key in slot 0: its reply would carry V's value. */
	memcpy(stage + 64, T_KEY, sizeof(T_KEY) - 1);
	*(struct rdmem_desc *)stage = raw_peer_desc(RDMEM_OP_KV_GET, sizeof(T_KEY) - 1, 0, 0);
	((struct rdmem_desc *)stage)->seq = 1;
	((struct rdmem_desc *)stage)->data_off =
	    (uint32_t)rdmem_slot_data_off(0, peer.w.slot_bytes);
	key = (struct rdmem_sge){ (uintptr_t)stage + 64, sizeof(T_KEY) - 1, mr_stage.lkey };
	m = (struct rdmem_dp_msg){ .slot = 0,
				   .desc = (struct rdmem_desc *)stage,
				   .desc_lkey = mr_stage.lkey,
				   .slot_addr = peer.w.req.addr,
				   .rkey = peer.w.req.rkey,
				   .payload = &key,
				   .npayload = 1 };
	if (rdmem_dp_publish(c, &m) < 0) {
		printf("# forged reply address: the request did not go out\n");
		bad = 1;
		goto out;
	}
	/* No reply may land; the server drops the session (our side sees the
	 * connection break, or nothing, within the timeout). */
	end = rdmem_now_ns() + 1000000000ull;
	while (rdmem_now_ns() < end) {
		int n = rdmem_fab_poll(c, &wc, 1);

		if (n < 0)
			break;
		if (n == 1 && wc.op == RDMEM_WC_RECV_IMM && wc.status == RDMEM_WC_SUCCESS)
			got_reply = 1;
	}
	if (got_reply || holds_v(resp, (uint32_t)resp_len)) {
		printf("# forged reply address: a reply landed: NOT FENCED\n");
		bad = 1;
	}
out:
	rdmem_fab_close(c);
	return bad;
}

/* Reply WRs the server posts wait while this file exists (shm test mode):
 * V's call stays in flight for the whole round. */
static char hole[96];

static int victim_reply_landed(struct raw_peer *v)
{
	return raw_peer_resp(v, 1)->seq == v->seq[1];
}

static void fence(char *const *design)
{
	struct fence_target t = { 0 };
	struct raw_peer v;
	struct rdmem_desc d, rep;
	struct rdmem_wc wc = { 0 };
	uint64_t base[T_MAX_FILES];
	uint32_t nbase = own_inodes(base, T_MAX_FILES);
	int failed = -1, shm = raw_peer_target.fabric == RDMEM_FAB_SHM;
	uint32_t seen;

	snprintf(hole, sizeof(hole), "%s/rdmem-fence-hole-%d", test_tmpdir(), (int)getpid());
	unlink(hole);
	if (shm) /* the server's connections only: we unset it before our own */
		setenv("RDMEM_SHM_TEST_BLACKHOLE", hole, 1);
	REQUIRE(start_server(design) == 0);
	unsetenv("RDMEM_SHM_TEST_BLACKHOLE");
	if (raw_peer_open(&v, 16, 100) == 0) {
		CHECK_EQ(v_put(&v), 0);
		CHECK_EQ(v_get(&v, 1, &t.object), 0);
		CHECK(holds_v(v.buf, T_VALUE)); /* the object holds V's bytes */
		t.port = raw_peer_target.port;
		t.req = v.l->w.req;
		t.objpool = v.l->w.objpool;
		t.ctrl = v.l->w.ctrl;
		t.slot1 = raw_peer_req_addr(&v, 1) + raw_peer_data_off(&v, 1);
		t.nfiles = victim_inodes(base, nbase, t.files, T_MAX_FILES);
		CHECK(!shm || t.nfiles >= 4);
		CHECK(write(atk_to, &t, sizeof(t)) == (ssize_t)sizeof(t));
		CHECK_EQ(attacker_round(atk_to, atk_back, 'i'), 0);
		/* A PUT of V's pattern in slot 1, in flight while the attacks
		 * run (the attacks READ its slot). On shm the request and its
		 * reply wait in the black hole until the round is over; over
		 * verbs the reply may come back first. */
		if (shm)
			CHECK(close(open(hole, O_CREAT | O_WRONLY | O_CLOEXEC, 0600)) == 0);
		d = raw_peer_desc(RDMEM_OP_KV_PUT, 5, T_VALUE, 0);
		memcpy(v.buf, "fence", 5);
		fill_v(v.buf + 5, T_VALUE);
		d.seq = ++v.seq[1];
		d.data_off = raw_peer_data_off(&v, 1);
		CHECK_EQ(raw_peer_send(&v, 1, &d, 5 + T_VALUE), 0);
		CHECK_EQ(attacker_round(atk_to, atk_back, 'b'), 0);
		if (shm) {
			CHECK(!victim_reply_landed(&v)); /* the call was in flight throughout */
			unlink(hole);
			/* Healing wakes nothing: a server asleep since the PUT's
			 * doorbell (rung into the hole) waits for the next one. */
			d = raw_peer_desc(RDMEM_OP_KV_GET, 5, 0, 0);
			d.seq = ++v.seq[2];
			d.data_off = raw_peer_data_off(&v, 2);
			CHECK_EQ(raw_peer_send(&v, 2, &d, 5), 0);
			CHECK_EQ(raw_peer_wait(&v, RDMEM_WC_RECV_IMM, &wc), 0);
			seen = wc.imm;
			CHECK_EQ(raw_peer_wait(&v, RDMEM_WC_RECV_IMM, &wc), 0);
			CHECK_EQ(seen + wc.imm, 3); /* both replies, in either order */
			wc.imm = 1;
		} else {
			CHECK_EQ(raw_peer_wait(&v, RDMEM_WC_RECV_IMM, &wc), 0);
		}
		CHECK_EQ(wc.imm, 1);
		CHECK_EQ(rdmem_dp_take(raw_peer_resp(&v, 1), &rep), 0);
		CHECK_EQ(rep.status, RDMEM_S_OK);
		CHECK(write(atk_to, "e", 1) == 1);
		CHECK(read(atk_back, &failed, sizeof(failed)) == (ssize_t)sizeof(failed));
		CHECK_EQ(failed, 0); /* attacks that got through */
		check_victim(&v, t.object);
		CHECK_EQ(forged_reply_session(), 0);
		for (int i = 0; i < 100 && !proc_log_has(&server, "remote access error"); i++)
			proc_sleep_ms(20);
		CHECK(
		    proc_log_has(&server, "remote access error")); /* the server's WRITE, refused */
		check_victim(&v, t.object);
		raw_peer_close(&v);
	} else {
		CHECK(!"session for the victim");
	}
	unlink(hole);
	CHECK_EQ(proc_stop(&server, SIGTERM, T_TIMEOUT_MS), 0);
}

static void test_fence_pooled_grouped(void)
{
	char *design[] = {
		"--shared-pool", "on", "--group-threshold", "1", "--group-size", "1", "--slice-us",
		"500",		 NULL
	};

	fence(design);
}

static void test_fence_private_ungrouped(void)
{
	char *design[] = { "--shared-pool", "off", "--group-threshold", "1048576", NULL };

	fence(design);
}

int main(int argc, char **argv)
{
	rdmem_log_init("test_session_fence", 0);
	/* An attacker that dies must fail a check here, not kill us with SIGPIPE. */
	signal(SIGPIPE, SIG_IGN);
	if (argc > 1)
		fab_name = argv[1];
	if (raw_peer_target_from(fab_name) < 0)
		return 1;
	if (attacker_start() < 0) {
		printf("not ok - attacker process: %s\n", strerror(errno));
		return 1;
	}
	RUN(test_fence_pooled_grouped);
	RUN(test_fence_private_ungrouped);
	close(atk_to);
	{
		int status = -1;

		CHECK_EQ(waitpid(atk_pid, &status, 0), atk_pid);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	return check_done();
}
