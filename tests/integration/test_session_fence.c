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
 *   - READ V's object, V's control page, with V's rkeys;
 *   - READ V's object with its own object pool rkey; one byte past the end
 *     of its own pool;
 *   - WRITE and WRITE_WITH_IMM into V's request slot, with V's rkey and with
 *     its own;
 *   - V's object pool rkey with its other bits changed (a guess).
 * Each must complete with a remote access error (or be refused at post),
 * after a READ of its own control page on the same session succeeded (so
 * the operation works, and what stops the forged one is the fence), and no
 * byte of V's may reach the attacker's buffer. On the shm fabric the
 * attacker also holds no file of V's (a hostile peer need not use our
 * fabric code: what it can reach is what it maps). The attacks run twice:
 * V idle (in no group), and V with a call in flight (its group's slice).
 * Then V's object, its stored value and its control page are unchanged and
 * V's session still serves. With grouping on (groups of one, every session
 * grouped) over the leased pool, and with private regions and no grouping.
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

#define T_TIMEOUT_MS RAW_PEER_TIMEOUT_MS
#define T_VALUE	     4000u /* V's value: its object and its PUT */
#define T_KEY	     "fence-v"
#define T_MAX_FILES  64

static struct proc server;
static const char *fab_name = "shm";

/* What the attacker learns of V: everything but a way in. */
struct fence_target {
	uint16_t port; /* the case's server */
	struct rdmem_remote req, objpool, ctrl;
	uint64_t object; /* V's object's address */
	uint32_t nfiles; /* shm: the inodes of the files V's session maps */
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

/* The shm fabric's files this process maps (the backend names them all). */
static uint32_t shm_files(uint64_t *ino, uint32_t max)
{
	char line[512];
	unsigned long long lo, hi, off;
	unsigned long inode;
	uint32_t n = 0;
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f) && n < max)
		if (strstr(line, "/memfd:rdmem-shm-region") &&
		    sscanf(line, "%llx-%llx %*s %llx %*s %lu", &lo, &hi, &off, &inode) == 4)
			ino[n++] = inode;
	fclose(f);
	return n;
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

enum fence_attack {
	ATK_READ_OBJECT,	/* V's object, V's rkey */
	ATK_READ_CTRL,		/* V's control page, V's rkey */
	ATK_READ_OBJECT_OWNKEY, /* V's object, our object pool's rkey */
	ATK_READ_PAST_OWN,	/* the last byte of our pool and the next, our rkey */
	ATK_WRITE_SLOT,		/* V's request slot 0, V's rkey */
	ATK_WRITE_IMM_OWNKEY,	/* V's request slot 0, our request rkey, an immediate */
	ATK_GUESS_KEY,		/* V's object, V's rkey with its low byte changed */
	ATK_GUESS_KEY_HIGH,	/* V's object, V's rkey with its high bits changed */
	ATK_COUNT
};

static const char *const attack_name[ATK_COUNT] = {
	"READ V's object with V's rkey",
	"READ V's control page with V's rkey",
	"READ V's object with our own rkey",
	"READ past the end of our own pool",
	"WRITE into V's request slot with V's rkey",
	"WRITE_WITH_IMM into V's request slot with our own rkey",
	"READ V's object with a guessed rkey (low byte)",
	"READ V's object with a guessed rkey (high bits)",
};

static void attack_wr(const struct fence_target *t, const struct raw_peer *a, int k,
		      struct rdmem_wr *wr, uint32_t *len)
{
	memset(wr, 0, sizeof(*wr));
	*len = T_VALUE;
	wr->op = RDMEM_WR_READ;
	wr->remote_addr = t->object;
	switch (k) {
	case ATK_READ_OBJECT:
		wr->rkey = t->objpool.rkey;
		break;
	case ATK_READ_CTRL:
		wr->remote_addr = t->ctrl.addr;
		wr->rkey = t->ctrl.rkey;
		*len = t->ctrl.len;
		break;
	case ATK_READ_OBJECT_OWNKEY:
		wr->rkey = a->l->w.objpool.rkey;
		break;
	case ATK_READ_PAST_OWN:
		wr->remote_addr = a->l->w.objpool.addr + a->l->w.objpool.len - 1;
		wr->rkey = a->l->w.objpool.rkey;
		*len = 2;
		break;
	case ATK_WRITE_SLOT:
		wr->op = RDMEM_WR_WRITE;
		wr->remote_addr = t->req.addr;
		wr->rkey = t->req.rkey;
		*len = 64;
		break;
	case ATK_WRITE_IMM_OWNKEY:
		wr->op = RDMEM_WR_WRITE_IMM;
		wr->remote_addr = t->req.addr;
		wr->rkey = a->l->w.req.rkey;
		wr->imm = 0;
		*len = 64;
		break;
	case ATK_GUESS_KEY:
		wr->rkey = t->objpool.rkey ^ 0x5a;
		break;
	default:
		wr->rkey = t->objpool.rkey ^ 0x00a5a500;
		break;
	}
}

/* The attacker maps, or holds open, one of V's files: 1 (and says which). */
static int holds_v_file(const struct fence_target *t)
{
	uint64_t mine[T_MAX_FILES];
	uint32_t n = shm_files(mine, T_MAX_FILES);
	struct stat st;
	int fd;

	for (uint32_t i = 0; i < n; i++)
		for (uint32_t j = 0; j < t->nfiles; j++)
			if (mine[i] == t->files[j]) {
				printf("# attacker maps V's file (inode %llu)\n",
				       (unsigned long long)mine[i]);
				return 1;
			}
	for (fd = 0; fd < 1024; fd++)
		if (fstat(fd, &st) == 0)
			for (uint32_t j = 0; j < t->nfiles; j++)
				if ((uint64_t)st.st_ino == t->files[j] && S_ISREG(st.st_mode)) {
					printf("# attacker holds V's file as fd %d\n", fd);
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
		printf("# %s, %s: no session for the attacker\n", phase, attack_name[k]);
		return 1;
	}
	ctl = own_ctrl_read(&a);
	attack_wr(t, &a, k, &wr, &len);
	memset(a.buf, 0, T_VALUE);
	if (wr.op != RDMEM_WR_READ)
		fill_v(a.buf, len); /* what a forged write would leave in V's slot */
	st = ctl == RDMEM_WC_SUCCESS ? fence_op(&a, &wr, len) : -3;
	if (ctl != RDMEM_WC_SUCCESS) {
		printf("# %s, %s: our own control page READ failed (%d)\n", phase, attack_name[k],
		       ctl);
		bad = 1;
	} else if (st == RDMEM_WC_SUCCESS || st == -2) {
		printf("# %s, %s: %s\n", phase, attack_name[k],
		       st ? "no completion" : "it completed: NOT FENCED");
		bad = 1;
	} else if (st != -1 && st != RDMEM_WC_REM_ACCESS_ERR) {
		printf("# %s, %s: status %s, expected a remote access error\n", phase,
		       attack_name[k], rdmem_wc_status_name((unsigned)st));
		bad = 1;
	} else if (wr.op == RDMEM_WR_READ && holds_v(a.buf, len)) {
		printf("# %s, %s: V's bytes reached us\n", phase, attack_name[k]);
		bad = 1;
	} else {
		printf("# %s, %s: fenced (%s)\n", phase, attack_name[k],
		       st == -1 ? "refused at post" : "remote access error");
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
			const char *name = phase == 'i' ? "V idle" : "V in its slice";

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

static void fence(char *const *design)
{
	struct fence_target t = { 0 };
	struct raw_peer v;
	struct rdmem_desc d, rep;
	struct rdmem_wc wc = { 0 };
	int failed = -1;

	REQUIRE(start_server(design) == 0);
	if (raw_peer_open(&v, 16, 100) == 0) {
		CHECK_EQ(v_put(&v), 0);
		CHECK_EQ(v_get(&v, 1, &t.object), 0);
		CHECK(holds_v(v.buf, T_VALUE)); /* the object holds V's bytes */
		t.port = raw_peer_target.port;
		t.req = v.l->w.req;
		t.objpool = v.l->w.objpool;
		t.ctrl = v.l->w.ctrl;
		t.nfiles = shm_files(t.files, T_MAX_FILES);
		CHECK(raw_peer_target.fabric != RDMEM_FAB_SHM || t.nfiles >= 4);
		CHECK(write(atk_to, &t, sizeof(t)) == (ssize_t)sizeof(t));
		CHECK_EQ(attacker_round(atk_to, atk_back, 'i'), 0);
		/* A PUT in slot 1 in flight while the attacks run: V's group
		 * holds the slice (a session with a request waiting). */
		d = raw_peer_desc(RDMEM_OP_KV_PUT, 5, 100, 0);
		memcpy(v.buf, "fence", 5);
		d.seq = ++v.seq[1];
		d.data_off = raw_peer_data_off(&v, 1);
		CHECK_EQ(raw_peer_send(&v, 1, &d, 105), 0);
		CHECK_EQ(attacker_round(atk_to, atk_back, 'b'), 0);
		CHECK_EQ(raw_peer_wait(&v, RDMEM_WC_RECV_IMM, &wc), 0);
		CHECK_EQ(wc.imm, 1);
		CHECK_EQ(rdmem_dp_take(raw_peer_resp(&v, 1), &rep), 0);
		CHECK_EQ(rep.status, RDMEM_S_OK);
		CHECK(write(atk_to, "e", 1) == 1);
		CHECK(read(atk_back, &failed, sizeof(failed)) == (ssize_t)sizeof(failed));
		CHECK_EQ(failed, 0); /* attacks that got through */
		check_victim(&v, t.object);
		raw_peer_close(&v);
	} else {
		CHECK(!"session for the victim");
	}
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
