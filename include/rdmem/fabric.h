/* fabric.h - the connection layer the RDMA data plane speaks.
 *
 * One small interface in the shape of RC verbs, two backends:
 *   verbs  libibverbs + librdmacm; one CM event channel, PD, CQ, QP per conn
 *   shm    same host, no NIC: regions are memfds shared over a Unix socket,
 *          WRITE/READ are copies done by the initiator, rkeys, bounds and
 *          access rights are checked as a NIC checks them, and a violation
 *          completes with RDMEM_WC_REM_ACCESS_ERR and breaks the connection.
 *
 * Lifecycle, client:  resolve -> alloc/reg -> connect (private data exchange)
 *            server:  listen -> get_request -> alloc/reg -> accept
 * Register every region the peer will access before connect/accept: the shm
 * backend hands the peer its regions during that exchange.
 *
 * Every function returns 0 (or a count) on success and -errno on failure,
 * after logging what failed, on which peer, and why.
 *
 * Private data: the peer receives exactly the bytes and length sent. Limits
 * come from RC verbs (rdma_cm over IB/RoCE carries 56 bytes in a connect
 * request, 196 in an accept, 148 in a reject), less the 2-byte frame the
 * verbs backend adds to deliver the exact length; above them -EMSGSIZE.
 * Never trust private data: check its length and version before use.
 */
#ifndef RDMEM_FABRIC_H
#define RDMEM_FABRIC_H

#include <stddef.h>
#include <stdint.h>

enum rdmem_fab_kind { RDMEM_FAB_VERBS = 1, RDMEM_FAB_SHM = 2 };

/* Access a registration gives the peer; local access is always granted. */
enum rdmem_access {
	RDMEM_ACCESS_LOCAL = 0,
	RDMEM_ACCESS_REMOTE_WRITE = 1u << 0,
	RDMEM_ACCESS_REMOTE_READ = 1u << 1,
};

struct rdmem_mr {
	void *addr;
	uint64_t len;
	uint32_t lkey;
	uint32_t rkey;
	unsigned access;
	void *impl; /* backend handle */
};

/* Where the peer's region is, as exchanged in private data. */
struct rdmem_remote {
	uint64_t addr; /* in the peer's address space */
	uint32_t rkey;
	uint32_t len;
};

#define RDMEM_FAB_MAX_SGE 4

struct rdmem_sge {
	uint64_t addr; /* local virtual address inside a registration */
	uint32_t len;
	uint32_t lkey;
};

enum rdmem_wr_op { RDMEM_WR_WRITE = 1, RDMEM_WR_WRITE_IMM, RDMEM_WR_READ };

enum rdmem_wr_flag {
	RDMEM_WR_SIGNALED = 1u << 0, /* report a completion for this WR */
	RDMEM_WR_INLINE = 1u << 1,   /* copy the source at post time; honoured for
				      * writes up to max_inline bytes, ignored above */
};

struct rdmem_wr {
	uint64_t wr_id;
	uint8_t op;    /* enum rdmem_wr_op */
	uint8_t flags; /* enum rdmem_wr_flag */
	uint8_t nsge;
	uint32_t imm; /* RDMEM_WR_WRITE_IMM: delivered to the peer's receive */
	uint64_t remote_addr;
	uint32_t rkey;
	struct rdmem_sge sge[RDMEM_FAB_MAX_SGE];
};

enum rdmem_wc_status {
	RDMEM_WC_SUCCESS = 0,
	RDMEM_WC_REM_ACCESS_ERR, /* rkey, bounds or rights refused by the peer */
	RDMEM_WC_LOC_PROT_ERR,	 /* an SGE outside a local registration */
	RDMEM_WC_FLUSH_ERR,	 /* the connection broke before this WR ran */
	RDMEM_WC_RNR_ERR,	 /* the peer had no receive posted for an immediate */
	RDMEM_WC_GENERAL_ERR,
};

enum rdmem_wc_op { RDMEM_WC_WRITE = 1, RDMEM_WC_READ, RDMEM_WC_RECV_IMM };

struct rdmem_wc {
	uint64_t wr_id; /* the WR's, or 0 for a receive */
	uint32_t imm;	/* RDMEM_WC_RECV_IMM */
	uint8_t status; /* enum rdmem_wc_status */
	uint8_t op;	/* enum rdmem_wc_op */
};

/* Queue sizes; the CQ holds send + recv depth, so it cannot overflow. */
struct rdmem_fab_attr {
	uint32_t max_send_wr;  /* outstanding WRs the caller may post */
	uint32_t max_recv_wr;  /* receives for immediates */
	uint32_t max_inline;   /* bytes; clamped to what the device gives */
	uint32_t signal_every; /* the backend signals at least every N WRs itself */
	const char *src_addr;  /* client: local address to connect from (verbs: it
				  picks the RDMA device), NULL: routing decides */
	/* shm: the bytes of the peer's remote-access registrations this side
	 * maps, in all; a peer declaring more is refused (0: 1 TiB). What a
	 * peer declares is mapped into our address space, so a peer could
	 * otherwise fill it (64 regions of 1 TiB). Verbs maps nothing of the
	 * peer's. */
	uint64_t max_peer_bytes;
	/* shm: and how many regions, each a mapping of its own (0: 64); many
	 * sessions of 64 small ones would use up vm.max_map_count. */
	uint32_t max_peer_regions;
};

#define RDMEM_FAB_CONNECT_PRIV_MAX 54
#define RDMEM_FAB_ACCEPT_PRIV_MAX  194
#define RDMEM_FAB_REJECT_PRIV_MAX  146

struct rdmem_conn;
struct rdmem_listener;

const char *rdmem_fab_kind_name(enum rdmem_fab_kind kind);
int rdmem_fab_kind_parse(const char *name, enum rdmem_fab_kind *kind);
/* True when this host has an RDMA device the verbs backend can open. */
int rdmem_fab_verbs_available(void);
const char *rdmem_wc_status_name(unsigned status);

/* ---- server side ---- */
int rdmem_fab_listen(enum rdmem_fab_kind kind, const char *addr, uint16_t port,
		     struct rdmem_listener **out);
int rdmem_fab_listener_fd(struct rdmem_listener *l); /* readable when a request waits */
/*
 * Takes one waiting connect request (-EAGAIN when none) and creates its conn
 * resources. *priv_len: in, the buffer size; out, the peer's private data size.
 */
int rdmem_fab_get_request(struct rdmem_listener *l, const struct rdmem_fab_attr *attr,
			  struct rdmem_conn **out, void *priv, size_t *priv_len);
int rdmem_fab_accept(struct rdmem_conn *c, const void *priv, size_t len);
/* Refuses the request with private data (a reason) and frees c. */
void rdmem_fab_reject(struct rdmem_conn *c, const void *priv, size_t len);
void rdmem_fab_listener_close(struct rdmem_listener *l);

/* ---- client side ---- */
int rdmem_fab_resolve(enum rdmem_fab_kind kind, const char *host, uint16_t port,
		      const struct rdmem_fab_attr *attr, int timeout_ms, struct rdmem_conn **out);
/*
 * Connects with our private data and returns the peer's. -ECONNREFUSED with
 * the peer's reason in priv when it rejected us.
 */
int rdmem_fab_connect(struct rdmem_conn *c, const void *priv, size_t len, void *peer_priv,
		      size_t *peer_len, int timeout_ms);

/* ---- memory ----
 * Memory the peer may access must come from rdmem_fab_alloc() (page-aligned;
 * shm: a shared memfd mapping), and each remote-access registration must be
 * one whole allocation: from its start, ending in its last page. The shm
 * backend gives the peer the allocation's file, which cannot be handed out
 * in part, so it refuses anything less (-EINVAL): a read-only or local area
 * sharing a file with a writable one would be the peer's to write. Areas of
 * different access take allocations of their own. An fd's open mode binds
 * no one (a peer reopens a read-only one writable through /proc), so the
 * backend seals the file when it first goes out: a read-only export against
 * every new writable mapping and write (Linux 5.1), each against further
 * seals. One allocation is therefore exported with one access. Memory has no
 * write-only mapping: a peer may read what it may write. Local-only
 * registrations may be anywhere.
 * Order at the end: dereg, then free, then close (free needs the conn; close
 * deregisters what is still registered).
 */
void *rdmem_fab_alloc(struct rdmem_conn *c, size_t len);
void rdmem_fab_free(struct rdmem_conn *c, void *p, size_t len);
/*
 * Memory every connection of a backend may register, also for remote access:
 * a server's message pool, whose leases sessions take. As with
 * rdmem_fab_alloc, a remote-access registration is one whole allocation, so
 * the peer reaches that area and nothing else.
 */
void *rdmem_fab_alloc_shared(enum rdmem_fab_kind kind, size_t len);
void rdmem_fab_free_shared(enum rdmem_fab_kind kind, void *p, size_t len);
int rdmem_fab_reg(struct rdmem_conn *c, void *addr, uint64_t len, unsigned access,
		  struct rdmem_mr *out);
void rdmem_fab_dereg(struct rdmem_conn *c, struct rdmem_mr *mr);

/* ---- data path ---- */
/*
 * Posts n WRs in order; -EAGAIN (nothing posted) when the send queue is full,
 * -EINVAL when n exceeds max_send_wr, -ECONNRESET once the connection broke.
 * Once broken, outstanding WRs complete with RDMEM_WC_FLUSH_ERR; a backend may
 * report those of unsignaled WRs too (with their wr_id), as an RC QP does.
 */
int rdmem_fab_post(struct rdmem_conn *c, const struct rdmem_wr *wrs, int n);
int rdmem_fab_post_recv(struct rdmem_conn *c, int n);
/* Returns up to max completions; internal signalling completions are hidden. */
int rdmem_fab_poll(struct rdmem_conn *c, struct rdmem_wc *wc, int max);
/* Sleeping: arm, poll once more, then wait for comp_fd to be readable. */
int rdmem_fab_arm(struct rdmem_conn *c);
int rdmem_fab_comp_fd(struct rdmem_conn *c);
void rdmem_fab_ack(struct rdmem_conn *c); /* consumes a completion event */
/* Connection events: readable when something happened; check returns
 * -ECONNRESET once the peer is gone or the connection broke. */
int rdmem_fab_event_fd(struct rdmem_conn *c);
int rdmem_fab_check(struct rdmem_conn *c);
uint32_t rdmem_fab_max_inline(struct rdmem_conn *c);
/* Gather entries one send WR may hold here (<= RDMEM_FAB_MAX_SGE). */
uint32_t rdmem_fab_max_send_sge(struct rdmem_conn *c);
/*
 * RDMA READs this connection may have outstanding at once: the initiator
 * depth the two ends agreed on (verbs: the QP's max_rd_atomic once
 * connected). A NIC holds further READs, and every WR behind them, in the
 * send queue until one completes: callers keep at most this many in flight.
 */
uint32_t rdmem_fab_max_reads(struct rdmem_conn *c);
/*
 * The queue sizes the connection really got (struct rdmem_fab_attr asks;
 * the device may grant less): WRs one post may hold and receives that may
 * be posted. Callers size their protocol to these, so the send queue, the
 * receive queue and the CQ stay within bounds by construction.
 */
void rdmem_fab_queue_caps(struct rdmem_conn *c, uint32_t *max_send, uint32_t *max_recv);
const char *rdmem_fab_peer(struct rdmem_conn *c);
/*
 * Moves the connection to error and waits until no WR posted on it can still
 * touch local memory (verbs: the QP goes to ERR and a marker WR behind the
 * send queue flushes; shm: WRs ran at post, so breaking is enough). After it,
 * memory that outstanding WRs named may be reused; posts fail -ECONNRESET.
 * Idempotent; close() does it too.
 */
void rdmem_fab_shutdown(struct rdmem_conn *c);
void rdmem_fab_close(struct rdmem_conn *c); /* disconnects; frees MRs, QP, CQ, PD */

#endif
