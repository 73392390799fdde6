/* resp_mem.h - what the RESP front end's connections may hold, each and
 * together (docs/architecture.md, "The Redis protocol front end", "Bounded
 * memory"): the per-connection limits, the smallest agent-wide budget
 * (--resp-max-memory) that still lets one connection carry the largest
 * command, the running total the budget is checked against, and the rank
 * that picks the connection to close when over it. No I/O (time is passed
 * in), so tests/unit/test_resp_mem.c checks it on its own. */
#ifndef RDMEM_AGENT_RESP_MEM_H
#define RDMEM_AGENT_RESP_MEM_H

#include <stdint.h>

/* Output a slow reader may leave unread before its input stops being read
 * and no new call of its is sent (on top of the replies of its calls in
 * flight). */
#define RDMEM_RESP_OUT_SOFT (4u << 20)
/* Bytes of queued commands (their argument copies) past which a
 * connection's input stops being read: the queue's count limit alone let a
 * pipeline of large SETs behind a slow server pin 1024 x --max-value
 * (1 GiB) per connection. */
#define RDMEM_RESP_QUEUED_SOFT (4u << 20)

/* Input one connection may buffer: an MSET of two largest values (each up
 * to max(max_value, the key limit)) with room for its headers; a command
 * that cannot fit is a protocol error. */
uint64_t rdmem_resp_mem_input_limit(uint32_t max_value);
/* Queued argument bytes past which a connection is paused: never below one
 * largest command, so any command the parser accepts can still run. */
uint64_t rdmem_resp_mem_queued_limit(uint32_t max_value);
/* A RESP bulk reply's header and trailer, with room. */
#define RDMEM_RESP_REPLY_OVERHEAD 64u
/* A connection's struct and its queue's bookkeeping (at most 1024 commands). */
#define RDMEM_RESP_CONN_SLACK (256u << 10)

/* Output capacity one connection may hold: a slow reader's unread bytes up
 * to the mark, the replies of its calls in flight (one per slot, each up to
 * the largest value), doubled for the buffer's growth. */
uint64_t rdmem_resp_mem_output_limit(uint32_t max_value, uint32_t slots);
/* The smallest --resp-max-memory that lets one connection do anything a
 * legal client may without being closed for it: a full input buffer,
 * argument copies up to the pause mark plus one more command, the output
 * limit above, and its bookkeeping. */
uint64_t rdmem_resp_mem_floor(uint32_t max_value, uint32_t slots);

/* The bytes all connections hold. A closed connection whose calls are still
 * in flight keeps what those calls point into until they finish; its bytes
 * stay in the total (they are held) but move to dying, which no eviction
 * can free: only live bytes are held against the budget, else a stopped
 * server's calls would get every other connection closed. */
struct rdmem_resp_mem {
	uint64_t live;	/* bytes of connections being served */
	uint64_t dying; /* bytes of closed connections waiting for their calls */
};

/* One connection's share of the total, and how long it has held it without
 * progress (which connection goes when the live total is over budget). */
struct rdmem_resp_mem_conn {
	uint64_t bytes;
	int dying;
	uint64_t progress_ns; /* when it last made progress (or connected) */
	uint64_t moved;	      /* bytes read or written since then */
};

/* Sets a connection's figure to bytes, moving the total by the difference:
 * O(1), so it runs after every read and every pass over the connection. */
void rdmem_resp_mem_set(struct rdmem_resp_mem *m, struct rdmem_resp_mem_conn *c, uint64_t bytes);
/* The connection was closed: its bytes count as dying from now on. */
void rdmem_resp_mem_dying(struct rdmem_resp_mem *m, struct rdmem_resp_mem_conn *c);
/* True when the live connections hold more than budget bytes. */
int rdmem_resp_mem_over(const struct rdmem_resp_mem *m, uint64_t budget);

/* Progress, which ranks the connections when one must go: bytes moved
 * through its socket, either way (a command read, a reply written), at an
 * average of at least RDMEM_RESP_PROGRESS_RATE since its last progress,
 * judged over at most the last second: so at most RDMEM_RESP_PROGRESS_RATE
 * bytes after a long pause. A peer dribbling a partial command, or not
 * reading its replies, makes none; one uploading a large value or draining
 * its replies at any real speed makes it on nearly every read or write. */
#define RDMEM_RESP_PROGRESS_RATE (32u << 10) /* bytes a second */
/* Time stalled counts up to this much (see rdmem_resp_mem_score). */
#define RDMEM_RESP_STALL_CAP_MS 10000u

/* The connection was accepted at now_ns: it starts with progress. */
void rdmem_resp_mem_start(struct rdmem_resp_mem_conn *c, uint64_t now_ns);
/* It moved n bytes at now_ns; 1 when that made progress (its clock restarts). */
int rdmem_resp_mem_moved(struct rdmem_resp_mem_conn *c, uint64_t n, uint64_t now_ns);
/* How much closing it would relieve the budget of stalled holding: its KiB
 * (rounded up) times the milliseconds since its last progress, the time
 * capped at RDMEM_RESP_STALL_CAP_MS. */
uint64_t rdmem_resp_mem_score(const struct rdmem_resp_mem_conn *c, uint64_t now_ns);
/* True when a should be closed before b: higher score, else more bytes. */
int rdmem_resp_mem_before(const struct rdmem_resp_mem_conn *a, const struct rdmem_resp_mem_conn *b,
			  uint64_t now_ns);

#endif
