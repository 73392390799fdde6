/* emu.h - private to the RDMA emulator, the shm fabric backend (emu.c, emu_cm.c) and
 * its tests: the handshake wire format, the shared receive page, and the
 * connection state.
 *
 * Connections: a SOCK_SEQPACKET Unix socket in the abstract namespace,
 * "@rdmem-shm:<port>", so it is per network namespace and needs no file.
 * The handshake is one message each way (CONNECT, then ACCEPT or REJECT),
 * carrying private data, our remote-access registrations and their fds by
 * SCM_RIGHTS. After it the socket carries nothing; its EOF is the
 * "connection broke" event.
 *
 * Every side owns one receive page (a sealed memfd) that the peer maps: the
 * peer queues immediates into its ring, reads our posted-receive count from
 * it, and checks our registrations' live flags there.
 *
 * Doorbell: a datagram socket pair per side, not an eventfd. We poll its
 * receive end (comp_fd); the peer and we ring its send end. An eventfd's
 * file description would be shared with the peer, which could clear
 * O_NONBLOCK and saturate the counter so that our write() blocks forever;
 * send(MSG_DONTWAIT) cannot block, whatever the peer does to the socket.
 */
#ifndef RDMEM_FAB_SHM_H
#define RDMEM_FAB_SHM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "fabric/fabric_impl.h"

/* Cross-process atomics are only sound on lock-free types (no hidden lock). */
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "shm fabric needs lock-free 32-bit atomics");
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "shm fabric needs lock-free 64-bit atomics");

#define SHMFAB_MAGIC   0x48534452u /* "RDSH" */
#define SHMFAB_VERSION 1

/* A key's low byte is the registration's index; the rest is random. */
#define SHMFAB_MAX_MRS	   256
#define SHMFAB_KEY_IDX(k)  ((k)&0xffu)
#define SHMFAB_MAX_REGIONS 64	/* remote-access registrations per side */
#define SHMFAB_MAX_QUEUE   8192 /* below 4096 ring slots' WRs: the clamp gets exercised */
#define SHMFAB_MAX_INLINE  256
#define SHMFAB_MAX_PENDING 64 /* accepted connections waiting for their CONNECT */
#define SHMFAB_MAX_READS   16 /* reported as the READ depth; copies need none */
#define SHMFAB_MAX_REGION  (1ull << 40)
#define SHMFAB_DEF_QUEUE   256

/* rdma_cm's private data limits (RC over IB/RoCE), enforced here too so a
 * data plane that outgrows them fails in CI, not first on a NIC. */
#define SHMFAB_PRIV_CONNECT RDMEM_FAB_CONNECT_PRIV_MAX
#define SHMFAB_PRIV_ACCEPT  RDMEM_FAB_ACCEPT_PRIV_MAX
#define SHMFAB_PRIV_REJECT  RDMEM_FAB_REJECT_PRIV_MAX
#define SHMFAB_PRIV_AREA    200 /* >= the largest, keeps the table 8-aligned */

enum shmfab_msg_type { SHMFAB_MSG_CONNECT = 1, SHMFAB_MSG_ACCEPT, SHMFAB_MSG_REJECT };

/* fds of CONNECT and ACCEPT, in this order; REJECT carries none. */
enum { SHMFAB_FD_PAGE = 0, SHMFAB_FD_DOORBELL = 1, SHMFAB_FD_REGION0 = 2 };
#define SHMFAB_MAX_FDS (SHMFAB_FD_REGION0 + SHMFAB_MAX_REGIONS)

struct shmfab_wire_region {
	uint64_t addr;	 /* in the sender's address space */
	uint64_t len;	 /* bytes */
	uint64_t offset; /* of addr inside this region's fd */
	uint32_t rkey;
	uint32_t access; /* enum rdmem_access, remote bits only, not 0 */
};

struct shmfab_hello {
	uint32_t magic;
	uint16_t version;
	uint16_t type;	   /* enum shmfab_msg_type */
	uint32_t priv_len; /* bytes of priv used */
	uint32_t nregions; /* table entries after this header */
	uint32_t rq_cap;   /* slots in the sender's receive ring, power of 2 */
	uint32_t reserved; /* 0 */
	uint8_t priv[SHMFAB_PRIV_AREA];
};

/* A message is the header then nregions table entries. */
struct shmfab_msg {
	struct shmfab_hello hdr;
	struct shmfab_wire_region region[SHMFAB_MAX_REGIONS];
};

/*
 * The receive page of one side (its owner). Fields on their own cache lines
 * by writer, so the sender's produced store does not bounce the owner's line.
 */
struct shmfab_page {
	_Alignas(64) _Atomic uint64_t posted;	/* owner: receives posted, ever */
	_Alignas(64) _Atomic uint64_t produced; /* peer: immediates queued, ever */
	_Alignas(64) _Atomic uint32_t armed;	/* owner sets 1; peer takes it to ring */
	_Alignas(64) _Atomic uint32_t broken;	/* either side sets 1 */
	/* owner: rkey of each exported registration by key index, 0 once gone */
	_Alignas(64) _Atomic uint32_t live[SHMFAB_MAX_MRS];
	_Alignas(64) _Atomic uint32_t ring[]; /* peer writes immediates */
};

size_t shmfab_page_bytes(uint32_t cap);

/* ---- connection state (both files) ---- */

struct shmfab_mr {
	uint8_t *addr;
	uint64_t len;
	uint32_t lkey, rkey;
	unsigned access;
	int fd; /* remote access: the fd the peer gets, else -1 */
	uint8_t in_use;
	uint8_t exported; /* sent to the peer: its live flag is ours to clear */
};

/* A peer registration, mapped here. */
struct shmfab_rmr {
	uint64_t addr, len;
	uint32_t rkey;
	unsigned access;
	uint8_t *base; /* where the peer's addr lies in our mapping */
	void *map;
	size_t map_len;
};

struct shmfab_alloc {
	struct shmfab_alloc *next;
	void *addr;
	size_t len;
	int fd;
};

struct shmfab_cqe {
	struct rdmem_wc wc;
	uint64_t seq;	/* send queue position; reaping it retires all before it */
	uint8_t hidden; /* our own signalling, not shown to the caller */
};

enum shmfab_state { SHMFAB_RESOLVED = 1, SHMFAB_REQUESTED, SHMFAB_CONNECTED };

/*
 * Test-only NIC timing, so CI can show what copying at post time hides.
 * Read from the environment of the process when a connection is made;
 * tests set them for the process under test, nothing else does.
 *   RDMEM_SHM_TEST_DELAY_MS=N   WRs run N ms (at most SHMFAB_TEST_MAX_DELAY_MS)
 *                               after their post, in order, as a NIC that
 *                               reads local buffers late; inline data is
 *                               still copied at post, as a NIC copies it
 *                               into the WQE.
 *   RDMEM_SHM_TEST_BLACKHOLE=PATH  while the file PATH exists the network
 *                               under this process is cut: its WRs do not
 *                               run (an RC QP retrying for ever), immediates
 *                               sent to it stay unseen, and connects time
 *                               out. Removing PATH heals it; the held WRs run.
 */
#define SHMFAB_TEST_MAX_DELAY_MS 10000

struct shmfab_deferred {
	struct rdmem_wr wr;
	uint64_t due_ns;
	uint8_t inl[SHMFAB_MAX_INLINE]; /* the inline bytes, copied at post */
};

struct shmfab_conn {
	struct rdmem_conn base;
	pthread_mutex_t lock; /* post, poll, reg... may run on different threads */
	int state;
	int broken;
	int sock;
	char name[80];

	/* our receive side: the page the peer queues immediates into */
	int page_fd;
	struct shmfab_page *page;
	size_t page_len;
	uint32_t rq_cap, max_recv;
	uint64_t rq_posted, rq_consumed;
	uint64_t rq_frozen; /* once broken: immediates that made it before */
	int bell_rx;	    /* our doorbell's receive end: comp_fd */
	int bell_tx;	    /* its send end: ours to ring ourselves, the peer's dup */
	int armed_local;    /* a waiter wants our own send completions too */

	/* the peer's receive side */
	struct shmfab_page *peer_page;
	size_t peer_page_len;
	uint32_t peer_rq_cap;
	int peer_bell;	   /* the send end of the peer's doorbell */
	uint64_t produced; /* immediates we queued; the page copy is the peer's to spoil */

	/* send queue and its completion queue */
	uint32_t max_send, signal_every, unsig_run;
	uint64_t max_peer_bytes;   /* rdmem_fab_attr: the peer's regions, in all */
	uint32_t max_peer_regions; /* rdmem_fab_attr: and how many */
	uint64_t sq_posted, sq_retired;
	struct shmfab_cqe *cq;
	uint32_t cq_mask;
	uint64_t cq_head, cq_tail;

	/* test-only deferred execution (see above); dq NULL when off */
	struct shmfab_deferred *dq;
	uint32_t dq_head, dq_n;
	uint64_t test_delay_ns;
	char test_hole[256];

	struct shmfab_mr mr[SHMFAB_MAX_MRS];
	struct shmfab_rmr rmr[SHMFAB_MAX_REGIONS];
	uint32_t nrmr;
	uint8_t rmr_pos[SHMFAB_MAX_MRS]; /* key index -> rmr position + 1 */
	struct shmfab_alloc *allocs;
};

int shmfab_conn_new(const struct rdmem_fab_attr *attr, int sock, int state, const char *name,
		    struct shmfab_conn **out);
void shmfab_conn_free(struct shmfab_conn *c);
/* Breaks the connection like an RC QP entering the error state, both sides. */
void shmfab_break(struct shmfab_conn *c);
/* Breaks our side too (and logs it) when the peer flagged a break. */
int shmfab_peer_broke(struct shmfab_conn *c);
void shmfab_ring(int fd, const char *what, const char *peer);
/* The listener's address for port (the abstract socket "rdmem-shm:PORT")
 * and its length; name gets "@rdmem-shm:PORT" for messages. */
socklen_t shmfab_sockaddr(uint16_t port, struct sockaddr_un *sun, char *name, size_t n);
/* Logs "shm: <message>: <errno text>"; returns -errno as it was on entry
 * (logging may change errno). */
int shmfab_syserr(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Test-only: 1 while RDMEM_SHM_TEST_BLACKHOLE cuts this process's network. */
int shmfab_test_holed(const struct shmfab_conn *c);
/* Validates and takes the doorbell the peer sent (*fd = -1 then). */
int shmfab_take_doorbell(struct shmfab_conn *c, int *fd);

/* emu_cm.c */
int shmfab_listen(const char *addr, uint16_t port, struct rdmem_listener **out);
int shmfab_listener_fd(struct rdmem_listener *l);
int shmfab_get_request(struct rdmem_listener *l, const struct rdmem_fab_attr *attr,
		       struct rdmem_conn **out, void *priv, size_t *priv_len);
int shmfab_accept(struct rdmem_conn *c, const void *priv, size_t len);
void shmfab_reject(struct rdmem_conn *c, const void *priv, size_t len);
void shmfab_listener_close(struct rdmem_listener *l);
int shmfab_resolve(const char *host, uint16_t port, const struct rdmem_fab_attr *attr,
		   int timeout_ms, struct rdmem_conn **out);
int shmfab_connect(struct rdmem_conn *c, const void *priv, size_t len, void *peer_priv,
		   size_t *peer_len, int timeout_ms);
int shmfab_event_fd(struct rdmem_conn *c);
int shmfab_check(struct rdmem_conn *c);
const char *shmfab_peer(struct rdmem_conn *c);
void shmfab_close(struct rdmem_conn *c);

#endif
