/* frontdoor_segment.c - the front door's segment lifecycle: check and retire
 * a segment already under the name (a live agent keeps it; a dead one's is
 * replaced with a new epoch so its clients re-attach), size, map and format a
 * new one, and unlink it at the end only while the name is still ours. The
 * ring consumer is in frontdoor_ring.c.
 */
#include "agent/frontdoor_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "rdmem/util.h"

static int rdmem_frontdoor_fail(const char *what, const char *name, int err)
{
	rdmem_err("front door %s: %s: %s", name, what, strerror(err));
	return -err;
}

/* Wakes every client that sleeps on a slot of a segment we are leaving. */
static void rdmem_frontdoor_wake_all(void *base, const struct rdmem_shm_geom *g)
{
	uint32_t c, s;

	for (c = 0; c < g->clients; c++)
		for (s = 0; s < g->slots; s++) {
			struct rdmem_shm_slot *slot = rdmem_shm_slot_at(base, g, c, s);

			if (atomic_load_explicit(&slot->state, memory_order_relaxed) &
			    RDMEM_SLOT_WAITING)
				rdmem_futex_wake_all(&slot->state);
		}
}

/*
 * Marks an old segment CLOSED with a new epoch so its attached clients notice
 * at once; with a valid geometry, also wakes its sleepers.
 */
static void rdmem_frontdoor_retire(struct rdmem_shm_header *h, const struct rdmem_shm_geom *g)
{
	atomic_fetch_add_explicit(&h->epoch, 1, memory_order_relaxed);
	/* Release: pairs with the clients' acquire load of state (libclient). */
	atomic_store_explicit(&h->state, RDMEM_SHM_CLOSED, memory_order_release);
	if (g)
		rdmem_frontdoor_wake_all(h, g);
}

/*
 * Looks at a segment already under our name. Returns 0 and the epoch to
 * follow when there is none or it may be replaced (then it is retired and
 * unlinked), or a refusal.
 */
static int rdmem_frontdoor_replace_old(const char *name, int reset, uint64_t *epoch)
{
	struct rdmem_shm_geom g;
	struct rdmem_shm_header *h;
	struct stat st;
	int ofd, rc = 0, check;

	*epoch = (uint64_t)time(NULL); /* fresh name: an epoch no earlier agent had */
	ofd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
	if (ofd < 0)
		return errno == ENOENT
			   ? 0
			   : rdmem_frontdoor_fail("open the existing segment", name, errno);
	if (fstat(ofd, &st) < 0) {
		rc = rdmem_frontdoor_fail("fstat the existing segment", name, errno);
		goto out;
	}
	if (st.st_size < (off_t)RDMEM_SHM_HEADER_SIZE) {
		check = -EPROTO;
		h = NULL;
	} else {
		h = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, ofd, 0);
		if (h == MAP_FAILED) {
			rc = rdmem_frontdoor_fail("map the existing segment", name, errno);
			goto out;
		}
		check = rdmem_shm_header_check(h, (uint64_t)st.st_size, &g);
	}
	if (check && !reset) {
		rdmem_err("front door %s: a segment of that name exists and is not an rdmem front "
			  "door (or is damaged); remove it or use --shm-reset",
			  name);
		rc = -EEXIST;
	} else if (!check) {
		uint32_t state = atomic_load_explicit(&h->state, memory_order_acquire);
		int32_t pid = h->agent_pid;
		int locked = rdmem_shm_agent_locked(ofd);
		int live =
		    state != RDMEM_SHM_CLOSED &&
		    (locked >= 0 ? locked
				 : pid > 0 && rdmem_frontdoor_pid_alive(pid, h->agent_start));

		if (live && !reset) {
			rdmem_err("front door %s: in use by the running agent pid %d; stop it or "
				  "use --shm-reset",
				  name, pid);
			rc = -EBUSY;
		} else {
			if (live)
				rdmem_warn(
				    "front door %s: taking over from the running agent pid %d "
				    "(--shm-reset)",
				    name, pid);
			rdmem_frontdoor_retire(h, &g);
			*epoch = atomic_load_explicit(&h->epoch, memory_order_relaxed) + 1;
		}
	} else {
		rdmem_warn("front door %s: replacing a segment that is not ours (--shm-reset)",
			   name);
	}
	if (h && h != MAP_FAILED)
		munmap(h, (size_t)st.st_size);
	if (!rc && shm_unlink(name) < 0 && errno != ENOENT)
		rc = rdmem_frontdoor_fail("unlink the old segment", name, errno);
out:
	close(ofd);
	return rc;
}

/* Refuses a segment /dev/shm cannot hold, then allocates every page of it. */
static int rdmem_frontdoor_size(int sfd, const char *name, uint64_t size)
{
	struct statvfs vfs;
	uint64_t avail;
	int rc;

	if (fstatvfs(sfd, &vfs) < 0)
		return rdmem_frontdoor_fail("statvfs /dev/shm", name, errno);
	avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
	if (avail < size) {
		rdmem_err("front door %s: needs %" PRIu64 " MiB of shared memory, /dev/shm has "
			  "%" PRIu64 " MiB free (lower clients, slots or max value)",
			  name, size >> 20, avail >> 20);
		return -ENOSPC;
	}
	if (ftruncate(sfd, (off_t)size) < 0)
		return rdmem_frontdoor_fail("size the segment", name, errno);
	/* Real pages now: a sparse tmpfs file would SIGBUS whoever touches a
	 * page once /dev/shm fills up. */
	rc = posix_fallocate(sfd, 0, (off_t)size);
	if (rc) {
		rdmem_err("front door %s: cannot allocate %" PRIu64 " MiB in /dev/shm: %s", name,
			  size >> 20, strerror(rc));
		return -rc;
	}
	return 0;
}

/* Formats a fresh mapping; state turns RUNNING last. */
static void rdmem_frontdoor_format(struct rdmem_frontdoor *fd, uint64_t epoch)
{
	struct rdmem_shm_header *h = fd->hdr;
	struct timespec now;

	rdmem_shm_header_fill(h, &fd->geom);
	h->agent_pid = (int32_t)getpid();
	h->agent_start = rdmem_frontdoor_proc_start(h->agent_pid);
	clock_gettime(CLOCK_REALTIME, &now);
	h->created_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
	atomic_store_explicit(&h->epoch, epoch, memory_order_relaxed);
	rdmem_shm_ring_view(fd->base, &fd->geom, &fd->ring);
	rdmem_ring_format(&fd->ring, 0);
	rdmem_ring_consumer_init(&fd->cons, 0);
	if (fd->ring_skip_ns)
		fd->cons.skip_after_ns = fd->ring_skip_ns;
	/* Client table and slots are zero (fresh pages): free entries, FREE slots.
	 * Release: publishes all of the above to clients that acquire RUNNING. */
	atomic_store_explicit(&h->state, RDMEM_SHM_RUNNING, memory_order_release);
}

static int rdmem_frontdoor_map_new(struct rdmem_frontdoor *fd,
				   const struct rdmem_frontdoor_config *cfg, uint64_t epoch)
{
	gid_t group = cfg->group;
	struct stat st;
	int rc;

	fd->shm_fd = shm_open(fd->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, RDMEM_SHM_MODE);
	if (fd->shm_fd < 0) {
		if (errno == EEXIST) {
			rdmem_err("front door %s: another agent created it meanwhile", fd->name);
			return -EBUSY;
		}
		return rdmem_frontdoor_fail("create the segment", fd->name, errno);
	}
	/* The umask may have cut the mode; group members must read and write. */
	if (fchmod(fd->shm_fd, RDMEM_SHM_MODE) < 0)
		return rdmem_frontdoor_fail("chmod 0660", fd->name, errno);
	if (group != (gid_t)-1 && group != 0 && fchown(fd->shm_fd, (uid_t)-1, group) < 0)
		return rdmem_frontdoor_fail("chown to the client group", fd->name, errno);
	if (fstat(fd->shm_fd, &st) < 0)
		return rdmem_frontdoor_fail("fstat the segment", fd->name, errno);
	fd->dev = st.st_dev;
	fd->ino = st.st_ino;
	rc = rdmem_frontdoor_size(fd->shm_fd, fd->name, fd->geom.total_size);
	if (rc)
		return rc;
	fd->base =
	    mmap(NULL, fd->geom.total_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd->shm_fd, 0);
	if (fd->base == MAP_FAILED) {
		fd->base = NULL;
		return rdmem_frontdoor_fail("map the segment", fd->name, errno);
	}
	fd->hdr = fd->base;
	rc = rdmem_shm_lock_agent(fd->shm_fd);
	if (rc)
		return rdmem_frontdoor_fail("lock the segment (agent liveness)", fd->name, -rc);
	rdmem_frontdoor_format(fd, epoch);
	return 0;
}

/* Unlinks our name unless another agent has replaced the segment since. */
static void rdmem_frontdoor_unlink_ours(struct rdmem_frontdoor *fd)
{
	struct stat st;
	int f = shm_open(fd->name, O_RDONLY | O_CLOEXEC, 0);

	if (f < 0)
		return;
	if (fstat(f, &st) == 0 && st.st_dev == fd->dev && st.st_ino == fd->ino &&
	    shm_unlink(fd->name) < 0 && errno != ENOENT)
		rdmem_warn("front door %s: unlink: %s", fd->name, strerror(errno));
	close(f);
}

static int rdmem_frontdoor_geom(const struct rdmem_frontdoor_config *cfg, struct rdmem_shm_geom *g)
{
	uint32_t clients = cfg->clients ? cfg->clients : RDMEM_SHM_DEFAULT_CLIENTS;
	uint32_t slots = cfg->slots ? cfg->slots : RDMEM_SHM_DEFAULT_SLOTS;
	uint32_t max_value = cfg->max_value ? cfg->max_value : RDMEM_DEFAULT_MAX_VALUE;
	int rc = rdmem_shm_geom_compute(clients, slots, max_value, g);

	if (rc)
		rdmem_err(
		    "front door: bad geometry: %u clients (1..%u), %u slots (1..%u), max value "
		    "%u (<= %u)",
		    clients, RDMEM_SHM_MAX_CLIENTS, slots, RDMEM_SHM_MAX_SLOTS, max_value,
		    RDMEM_MAX_VALUE_LIMIT);
	return rc;
}

static void rdmem_frontdoor_free(struct rdmem_frontdoor *fd)
{
	if (fd->base)
		munmap(fd->base, fd->geom.total_size);
	if (fd->shm_fd >= 0)
		close(fd->shm_fd);
	free(fd->clients);
	free(fd->calls);
	free(fd);
}

int rdmem_frontdoor_create(const struct rdmem_frontdoor_config *cfg, struct rdmem_frontdoor **out)
{
	struct rdmem_frontdoor *fd;
	uint64_t epoch;
	size_t n;
	int rc;

	fd = calloc(1, sizeof(*fd));
	if (!fd)
		return -ENOMEM;
	fd->shm_fd = -1;
	fd->busy_poll = cfg->busy_poll;
	fd->ring_skip_ns = cfg->ring_skip_ns;
	if (rdmem_shm_name_norm(cfg->shm_name ? cfg->shm_name : RDMEM_SHM_DEFAULT_NAME, fd->name,
				sizeof(fd->name))) {
		rdmem_err("front door: bad segment name '%s': want /NAME, 1..%d characters, no "
			  "other '/'",
			  cfg->shm_name, RDMEM_SHM_NAME_MAX - 1);
		rc = -EINVAL;
		goto fail;
	}
	rc = rdmem_frontdoor_geom(cfg, &fd->geom);
	if (rc)
		goto fail;
	n = (size_t)fd->geom.clients * fd->geom.slots;
	fd->clients = calloc(fd->geom.clients, sizeof(*fd->clients));
	fd->calls = calloc(n, sizeof(*fd->calls));
	if (!fd->clients || !fd->calls) {
		rc = -ENOMEM;
		goto fail;
	}
	rc = rdmem_frontdoor_replace_old(fd->name, cfg->reset, &epoch);
	if (rc)
		goto fail;
	rc = rdmem_frontdoor_map_new(fd, cfg, epoch);
	if (rc) {
		if (fd->shm_fd >= 0)
			rdmem_frontdoor_unlink_ours(fd);
		goto fail;
	}
	rdmem_info("front door %s: %u clients x %u slots, %u B payload per slot, %" PRIu64
		   " MiB, epoch %" PRIu64,
		   fd->name, fd->geom.clients, fd->geom.slots, fd->geom.payload_cap,
		   fd->geom.total_size >> 20, epoch);
	*out = fd;
	return 0;
fail:
	rdmem_frontdoor_free(fd);
	return rc;
}

void rdmem_frontdoor_destroy(struct rdmem_frontdoor *fd)
{
	if (!fd)
		return;
	/* Release: pairs with the clients' acquire load of state (libclient). */
	atomic_store_explicit(&fd->hdr->state, RDMEM_SHM_CLOSED, memory_order_release);
	rdmem_frontdoor_stop(fd);
	rdmem_frontdoor_wake_all(fd->base, &fd->geom);
	rdmem_frontdoor_unlink_ours(fd);
	rdmem_frontdoor_free(fd);
}

void *rdmem_frontdoor_segment(struct rdmem_frontdoor *fd, size_t *len)
{
	*len = fd->geom.total_size;
	return fd->base;
}

uint32_t rdmem_frontdoor_payload_cap(struct rdmem_frontdoor *fd)
{
	return fd->geom.payload_cap;
}
