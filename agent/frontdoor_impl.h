/* frontdoor_impl.h - private to the front door (frontdoor_ring.c, the ring
 * consumer actor; frontdoor_segment.c, the segment's lifecycle): the agent's
 * state for one segment and the client liveness test both use.
 */
#ifndef RDMEM_AGENT_FRONTDOOR_IMPL_H
#define RDMEM_AGENT_FRONTDOOR_IMPL_H

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/frontdoor.h"
#include "agent/pin.h"
#include "shm/door.h"
#include "shm/segment.h"

/* The header bytes the agent owns and keeps: everything before the ring words. */
#define RDMEM_FD_HDR_OWN offsetof(struct rdmem_shm_header, ring)

/* The agent's private view of one client entry. */
struct rdmem_fd_client {
	/* Written by any completing thread, read by the front-door thread. */
	_Atomic uint64_t held;	   /* bit s: the agent holds slot s (taken, not completed) */
	_Atomic uint32_t inflight; /* calls taken and not completed */
	_Atomic int dead;	   /* completions for it are dropped */
	/*
	 * Door thread -> actor. claim: gen << 32 | pid of the owner the door
	 * assigned from SO_PEERCRED, 0 while free; the actor sets 0 when it has
	 * reclaimed the entry (release, after the slot resets), the door sets it
	 * (release) when it assigns. gone: the owner's connection closed.
	 */
	_Atomic uint64_t claim;
	_Atomic int gone;
	/* Door -> actor, stored before claim: this attach's serial (never
	 * reused, unlike claim's 32-bit gen): whose area the agent maps there.
	 * 0 from the entry's reclaim on (rdmem_frontdoor_client_serial). */
	_Atomic uint64_t serial;
	/* Door -> actor, stored before claim: the owner may run agent-ctl
	 * (root, the agent's user, or --admin-group, from its credentials). */
	_Atomic int admin;
	/* Door -> actor, stored before claim: the owner's uid (SO_PEERCRED),
	 * which decides whether a misbehaviour naming it is attributable. */
	_Atomic uint32_t uid;
	/* Actor -> door: the actor cut this client off; the door closes its
	 * connection (and holds its pid off, see RDMEM_FD_CUT_HOLD_NS). */
	_Atomic int cut;
	/* Completing threads -> actor: slots found rewritten while held. */
	_Atomic uint32_t late_strikes;
	/* Door -> actor: no pidfd watches the owner, so the actor's scans must
	 * keep looking at its pid (rdmem_door_owner_watch). */
	_Atomic int pid_unwatched;
	/* Door -> actor: the owner sent RDMEM_DOOR_TAKE on its connection: it
	 * marked slots RDMEM_SLOT_NO_ENTRY (the ring was full) for the actor
	 * to take (rdmem_frontdoor_take_marked). */
	_Atomic int take_req;
	/* Front-door thread only. */
	int32_t pid;
	uint32_t gen;
	uint64_t start_ticks; /* /proc/<pid>/stat starttime: tells a reused pid apart */
	uint64_t dead_head;   /* ring head when found dead; reclaim once the tail passed it */
	int32_t dead_pid;
	uint64_t orphan_seen; /* bit s: slot s was submitted, not held, at the last scan */
	uint32_t orphan_seq[RDMEM_SHM_MAX_SLOTS]; /* its seq then */
	uint64_t orphan_scan_ns;		  /* when that scan looked */
	uint64_t orphan_taken; /* bit s: the scan took slot s; its late entry is no strike */
	uint64_t score;	       /* strikes, leaking one per RDMEM_FD_STRIKE_DECAY_NS */
	uint64_t score_ns;     /* when score last leaked */
};

/* A connection that has not finished its hello yet. */
struct rdmem_door_pending {
	int fd;		      /* -1: unused */
	pid_t pid;	      /* SO_PEERCRED at accept; 0: outside our PID namespace */
	uid_t uid;	      /* SO_PEERCRED at accept: whose share it counts against */
	int admin;	      /* its credentials allow agent-ctl */
	uint64_t deadline_ns; /* closed then */
	uint32_t got;	      /* hello bytes so far */
	uint64_t seq;	      /* accept order: the oldest is evicted first */
	int waiting;	      /* hello good, table full, an entry being reclaimed */
	struct rdmem_door_hello hello;
};

#define RDMEM_DOOR_PENDING 16 /* handshakes at once; a new one evicts a silent one */
/* Handshakes one uid keeps when all are taken: past it, its newcomers evict its own. */
#define RDMEM_DOOR_PENDING_PER_UID 4

/* The door thread's state (frontdoor_door.c). */
struct rdmem_door {
	char path[RDMEM_DOOR_PATH_MAX];
	int listen_fd;
	dev_t dev; /* to unlink the socket only while it is still ours */
	ino_t ino;
	int wake[2]; /* pipe: destroy() wakes the thread */
	int bell;    /* eventfd: the actor cut or reclaimed an entry (rdmem_door_nudge) */
	int watch;   /* inotify on the socket's directory: another agent took the path */
	pthread_t thread;
	int started;
	struct rdmem_door_pending pending[RDMEM_DOOR_PENDING];
	int *conn;	       /* per client entry: its owner's connection, or -1 */
	int *pidfd;	       /* per client entry: its owner's pidfd, or -1 */
	uint64_t *claimed;     /* per client entry: the claim word the door set */
	uint64_t *quiet_until; /* per client entry: its connection is not read before (ns) */
	uid_t *owner;	       /* per client entry: its owner's uid (SO_PEERCRED) */
	struct pollfd *sweep;  /* per client entry: for rdmem_door_sweep() */
	uint32_t per_uid;      /* --clients-per-uid: entries one capped uid may hold */
	uint32_t next_gen;
	uint64_t next_serial;	     /* attaches ever assigned: each one's serial */
	uint64_t accepted;	     /* connections accepted, for pending seq */
	uint64_t accept_pause_until; /* out of fds: leave the listener alone until then */
	/*
	 * The uids ever handed the segment, root's and ours aside (they are
	 * trusted anyway): one of them in writer_uid, or writers_mixed once a
	 * second one got it. A process keeps its mapping after it detaches or
	 * is cut off, so neither is ever cleared. Door thread writes (release,
	 * before the memfd leaves), the actor reads (acquire).
	 */
	_Atomic int64_t writer_uid; /* -1: none yet */
	_Atomic int writers_mixed;
	uid_t self_uid;
	int32_t cut_pid[RDMEM_DOOR_PENDING]; /* processes cut off lately, refused until... */
	uint64_t cut_until[RDMEM_DOOR_PENDING];
	gid_t admin_group; /* --admin-group, when has_admin_group */
	int has_admin_group;
	_Atomic uint64_t n_no_memory; /* attaches refused: its area could not be made */
	_Atomic uint64_t n_attached, n_bad_hello, n_timeouts, n_full, n_evicted, n_hangups,
	    n_uid_full, n_pid_unknown, n_cut_refused, n_owner_exits;
};

struct rdmem_frontdoor {
	char name[RDMEM_SHM_NAME_MAX + 1];
	int shm_fd; /* the sealed memfd */
	uint64_t epoch;
	struct rdmem_door door;
	_Atomic int scan_req;		      /* the door saw a client leave: scan now */
	_Atomic int take_req;		      /* a client's take_req is set: look now */
	rdmem_frontdoor_released_fn released; /* rdmem_frontdoor_on_release() */
	void *released_ctx;
	void *base;
	struct rdmem_shm_header *hdr;
	struct rdmem_shm_geom geom;
	struct rdmem_ring ring;
	struct rdmem_ring_consumer cons; /* front-door thread only */
	int busy_poll;
	uint64_t ring_skip_ns;	 /* 0: RDMEM_RING_SKIP_NS */
	uint32_t client_strikes; /* --client-strikes; 0: never cut off */
	struct rdmem_fd_client *clients;
	struct rdmem_agent_call *calls; /* clients x slots, indexed like the slots */
	struct rdmem_pin_budget pin;	/* zero copy's pinned memory (agent/pin.h) */
	rdmem_frontdoor_submit_fn submit;
	void *submit_ctx;
	rdmem_frontdoor_batch_fn batch_end; /* rdmem_frontdoor_on_batch_end() */
	int batch_open;			    /* submit ran since batch_end last did */
	pthread_t thread;
	int started;
	_Atomic int stop;
	uint64_t next_scan_ns;
	/* Actor only. A scan runs every RDMEM_FD_SCAN_NS while it has work
	 * left (scan_pending) or the ring was active within RDMEM_FD_QUIET_NS;
	 * otherwise the actor sleeps until a producer or the door wakes it. */
	uint64_t active_ns; /* when the actor last took an entry or repaired the ring */
	int active;	    /* it did since it last read the clock */
	int scan_pending;   /* the last scan left something to look at again */
	/* The header as formatted, up to the ring words: identity, geometry,
	 * state, epoch. Ours alone; the scan puts back what a client changed. */
	_Alignas(64) uint8_t hdr_own[RDMEM_FD_HDR_OWN];
	uint64_t hdr_bad_since; /* actor: when a scan first found it changed, or 0 */
	_Atomic int closing;	/* destroy() is marking the segment CLOSED: leave it */
	/* Door -> actor and itself: another agent took our socket (--shm-reset):
	 * the door hangs up on every client, which then attaches to that
	 * agent, and the header is left as that agent marked it. */
	_Atomic int retired;
	/* Counters: relaxed atomics, read by get_stats() from any thread. */
	_Atomic uint64_t n_calls, n_local_pings, n_bad, n_skipped, n_repaired, n_dead, n_dropped,
	    n_expired, n_stalls, n_head_repaired, n_pid_forged, n_orphans, n_late_entries,
	    n_ctl_denied, n_header_repaired, n_cut_off, n_strikes, n_unattributed, n_no_entry,
	    n_take_reqs;
};

/* frontdoor_door.c: the socket, the door thread, and their end. */
/* Tells the door thread an entry was cut off or reclaimed (actor thread):
 * it closes that connection now, not at a tick. */
void rdmem_door_nudge(struct rdmem_frontdoor *fd);
int rdmem_door_open(struct rdmem_frontdoor *fd, const struct rdmem_frontdoor_config *cfg);
int rdmem_door_start(struct rdmem_frontdoor *fd);
void rdmem_door_close(struct rdmem_frontdoor *fd);
/* Another agent's socket is at our path now (not: nothing there). */
int rdmem_door_taken(const struct rdmem_frontdoor *fd);
/* Takes over from a live agent on our socket (--shm-reset): retires its segment. */
int rdmem_door_retire_live(const char *path, uint64_t *epoch);

/*
 * Client c's area (shm/segment.h): a fresh sealed memfd mapped at its place
 * in the agent's range, by the door thread before it claims the entry.
 * Returns the memfd, for the welcome (the caller closes it), or -errno.
 */
int rdmem_frontdoor_client_map(struct rdmem_frontdoor *fd, uint32_t c);
/* By the actor when it reclaims c: the area goes back to reserved, empty. */
void rdmem_frontdoor_client_unmap(struct rdmem_frontdoor *fd, uint32_t c);

/* frontdoor_owner.c: is an entry's owner still there? */
/* starttime (field 22) of /proc/<pid>/stat, or 0 when unknown. */
uint64_t rdmem_frontdoor_proc_start(int32_t pid);
/* Alive unless kill() says ESRCH or the pid now names a younger process. */
int rdmem_frontdoor_pid_alive(int32_t pid, uint64_t start_ticks);
/* Door thread: marks client c gone and wakes the actor to scan. */
void rdmem_door_tell_actor(struct rdmem_frontdoor *fd, uint32_t c);
/* Door thread: client c asked the actor to take its marked slots. */
void rdmem_door_ask_take(struct rdmem_frontdoor *fd, uint32_t c);
/* Door thread: wakes the actor again while its scan request is not taken. */
void rdmem_door_scan_again(struct rdmem_frontdoor *fd);
/* Door thread, after attach: watch the owner's pid through a pidfd. */
void rdmem_door_owner_watch(struct rdmem_frontdoor *fd, uint32_t c, pid_t pid);
/* Door thread: the pidfd of entry c says its owner exited. */
void rdmem_door_owner_exited(struct rdmem_frontdoor *fd, uint32_t c);
/* Door thread: closes entry c's connection and pidfd. */
void rdmem_door_owner_forget(struct rdmem_door *d, uint32_t c);

#endif
