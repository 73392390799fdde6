/* frontdoor_owner.c - is a client entry's owner still there? The door thread
 * keeps a pidfd of each owner it credentialed (SO_PEERCRED) and tells the
 * actor the moment that process exits, so an idle agent needs no periodic
 * look at /proc to find a client that died while a process it forked holds
 * its connection open (its connection's close tells the rest). The actor's
 * scans still check the pid (kill, /proc start time) whenever they run.
 */
#include "agent/frontdoor_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "rdmem/util.h"
#include "shm/futex.h"

/* starttime (field 22) of /proc/<pid>/stat, or 0 when unknown. */
uint64_t rdmem_frontdoor_proc_start(int32_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long start = 0;
	int f, i;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = open(path, O_RDONLY | O_CLOEXEC);
	if (f < 0)
		return 0;
	n = read(f, buf, sizeof(buf) - 1);
	close(f);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* comm may hold spaces and parentheses: fields restart after the last ')'. */
	p = strrchr(buf, ')');
	for (i = 2; p && i < 22; i++)
		p = strchr(p + 1, ' ');
	if (!p || sscanf(p + 1, "%llu", &start) != 1)
		return 0;
	return start;
}

/*
 * Alive unless kill() says ESRCH or the pid now names a younger process.
 * Pid 0 (a client outside our PID namespace) is alive: only its connection
 * can tell, and kill(0, 0) would ask about our own process group.
 */
int rdmem_frontdoor_pid_alive(int32_t pid, uint64_t start_ticks)
{
	uint64_t now_start;

	if (pid <= 0)
		return 1;
	if (kill(pid, 0) < 0 && errno == ESRCH)
		return 0;
	if (!start_ticks)
		return 1;
	now_start = rdmem_frontdoor_proc_start(pid);
	return !now_start || now_start == start_ticks;
}

/* Door thread: wakes the actor out of its doorbell wait, or keeps it from
 * starting one. It may be asleep with no deadline. */
static void rdmem_door_wake_actor(struct rdmem_frontdoor *fd)
{
	/*
	 * Release: pairs with the acquire load of the doorbell in
	 * rdmem_ring_sleep_begin(); an actor that reads the bumped value also
	 * reads scan_req or take_req set and does not sleep, one that read it before sees
	 * the word changed and its futex wait returns at once.
	 */
	atomic_fetch_add_explicit(&fd->hdr->ring.doorbell, 1, memory_order_release);
	rdmem_futex_wake_all(&fd->hdr->ring.doorbell);
}

static void rdmem_door_scan_now(struct rdmem_frontdoor *fd)
{
	/* Release: what the caller stored (gone, pid_unwatched) before the
	 * actor's acquire exchange of scan_req. */
	atomic_store_explicit(&fd->scan_req, 1, memory_order_release);
	rdmem_door_wake_actor(fd);
}

void rdmem_door_ask_take(struct rdmem_frontdoor *fd, uint32_t c)
{
	/* Relaxed: published by the release exchange of fd->take_req below. */
	atomic_store_explicit(&fd->clients[c].take_req, 1, memory_order_relaxed);
	/* Release: pairs with the actor's acquire exchange of take_req. A
	 * request still pending was rung for already (and is rung again each
	 * round until taken, rdmem_door_scan_again): no second wake. */
	if (!atomic_exchange_explicit(&fd->take_req, 1, memory_order_release))
		rdmem_door_wake_actor(fd);
}

/* Door thread, every round: the actor has not taken the door's last request
 * yet. Rings again: a client can write the doorbell back between our bump
 * and the actor's futex wait, which loses that wake-up. */
void rdmem_door_scan_again(struct rdmem_frontdoor *fd)
{
	/* Relaxed: the request itself was released when it was made. */
	if (atomic_load_explicit(&fd->scan_req, memory_order_relaxed) ||
	    atomic_load_explicit(&fd->take_req, memory_order_relaxed))
		rdmem_door_wake_actor(fd);
}

/* Door thread: client c is gone (connection closed, cut off, or its owner exited). */
void rdmem_door_tell_actor(struct rdmem_frontdoor *fd, uint32_t c)
{
	atomic_store_explicit(&fd->clients[c].gone, 1, memory_order_relaxed);
	rdmem_door_scan_now(fd);
}

/*
 * After attach: a pidfd of the owner, polled by the door thread. Without
 * one (out of fds, or no pidfd_open), the entry is marked for the actor's
 * scans to keep looking at the pid, as they did before pidfds. Pid 0 (a
 * client in another PID namespace) has only its connection.
 */
void rdmem_door_owner_watch(struct rdmem_frontdoor *fd, uint32_t c, pid_t pid)
{
	struct rdmem_door *d = &fd->door;
	long pfd;

	if (pid <= 0)
		return;
	pfd = syscall(SYS_pidfd_open, pid, 0);
	if (pfd >= 0) { /* close-on-exec, as pidfd_open makes them */
		d->pidfd[c] = (int)pfd;
		return;
	}
	if (errno == ESRCH) { /* gone before we looked: as if it exited now */
		rdmem_door_tell_actor(fd, c);
		return;
	}
	rdmem_warn_limited("front door %s: pidfd_open(%d): %s: the actor will look for client %u's "
			   "owner every scan instead",
			   fd->name, (int)pid, strerror(errno), c);
	atomic_store_explicit(&fd->clients[c].pid_unwatched, 1, memory_order_relaxed);
	rdmem_door_scan_now(fd);
}

/* Door thread: the connection and the pidfd of entry c go (either may be -1). */
void rdmem_door_owner_forget(struct rdmem_door *d, uint32_t c)
{
	if (d->conn[c] >= 0)
		close(d->conn[c]);
	if (d->pidfd[c] >= 0)
		close(d->pidfd[c]);
	d->conn[c] = d->pidfd[c] = -1;
}

/*
 * Door thread: the pidfd of entry c polled readable. Asked again now: the
 * poll set was built before this round closed and opened fds, so its fd
 * number may since name a new owner's pidfd.
 */
void rdmem_door_owner_exited(struct rdmem_frontdoor *fd, uint32_t c)
{
	struct rdmem_door *d = &fd->door;
	struct pollfd pf = { d->pidfd[c], POLLIN, 0 };

	if (poll(&pf, 1, 0) != 1)
		return;
	atomic_fetch_add_explicit(&d->n_owner_exits, 1, memory_order_relaxed); /* statistics */
	close(d->pidfd[c]);
	d->pidfd[c] = -1;
	rdmem_log_limited(RDMEM_LOG_INFO,
			  "front door %s: the owner of client %u exited (its connection may "
			  "still be open in a process it forked)",
			  fd->name, c);
	rdmem_door_tell_actor(fd, c);
}
