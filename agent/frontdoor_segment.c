/* frontdoor_segment.c - the front door's segment lifecycle: create it as a
 * memfd, allocate and seal it, map and format it, open the door clients
 * attach through (frontdoor_door.c), and at the end close both. The ring
 * consumer is in frontdoor_ring.c.
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
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>

#include "rdmem/util.h"

static int rdmem_frontdoor_fail(const char *what, const char *name, int err)
{
	rdmem_err("front door %s: %s: %s", name, what, strerror(err));
	return -err;
}

/* Wakes every client that sleeps on a slot of a segment we are leaving. */
static void rdmem_frontdoor_wake_all(struct rdmem_frontdoor *fd)
{
	const struct rdmem_shm_geom *g = &fd->geom;
	uint32_t c, s;

	for (c = 0; c < g->clients; c++) {
		/* Acquire: pairs with the door's release of claim, after it mapped
		 * the area; only a claimed entry's area is mapped. */
		if (!atomic_load_explicit(&fd->clients[c].claim, memory_order_acquire))
			continue;
		for (s = 0; s < g->slots; s++) {
			struct rdmem_shm_slot *slot = rdmem_shm_slot_at(fd->base, g, c, s);

			if (atomic_load_explicit(&slot->state, memory_order_relaxed) &
			    RDMEM_SLOT_WAITING)
				rdmem_futex_wake_all(&slot->state);
		}
	}
}

/* Leaves [addr, addr + len) reserved and empty: nothing mapped, nothing held. */
static int rdmem_frontdoor_reserve_at(void *addr, uint64_t len)
{
	void *p = mmap(addr, len, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | (addr ? MAP_FIXED : 0), -1, 0);

	return p == MAP_FAILED ? -errno : 0;
}

int rdmem_frontdoor_client_map(struct rdmem_frontdoor *fd, uint32_t c)
{
	uint8_t *area = rdmem_shm_client_area(fd->base, &fd->geom, c);
	uint64_t len = rdmem_shm_client_size(&fd->geom);
	int mfd, rc;

	/*
	 * A fresh memfd for every attach: the entry's last owner may keep its
	 * old mapping (or have passed the fd on); it must never see this
	 * owner's calls. Sparse on purpose: pages come as the client touches
	 * them. A memfd lives on the kernel's internal tmpfs, which has no size
	 * limit, so a page that cannot be had means the OOM killer, as for any
	 * anonymous memory, never a SIGBUS from a full /dev/shm.
	 */
	mfd = memfd_create("rdmem-client", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (mfd < 0)
		return -errno;
	if (ftruncate(mfd, (off_t)len) < 0 || fcntl(mfd, F_ADD_SEALS, RDMEM_DOOR_SEALS) < 0 ||
	    mmap(area, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, mfd, 0) == MAP_FAILED) {
		rc = -errno;
		close(mfd);
		/* A failed MAP_FIXED may have unmapped the range: hold it again,
		 * or a later mmap of ours could land there. */
		rdmem_frontdoor_reserve_at(area, len);
		return rc;
	}
	return mfd;
}

void rdmem_frontdoor_client_unmap(struct rdmem_frontdoor *fd, uint32_t c)
{
	uint8_t *area = rdmem_shm_client_area(fd->base, &fd->geom, c);
	uint64_t len = rdmem_shm_client_size(&fd->geom);
	int rc;

	/*
	 * Frees the pages first (a hole punched in the memfd, which the seals
	 * allow): the client may keep its fd after it left, and pages the agent
	 * touched (replies) are charged to the agent; an attach/detach loop
	 * keeping fds would otherwise grow the agent's memory without bound.
	 * A mapping the client kept now reads zeros.
	 */
	/* Not when taken over: we hung up on live clients, which may still
	 * read replies in their area (an in-place reply held by the app). */
	if (!atomic_load_explicit(&fd->retired, memory_order_relaxed) &&
	    madvise(area, len, MADV_REMOVE) < 0)
		rdmem_warn_limited("front door %s: cannot free client %u's area: %s", fd->name, c,
				   strerror(errno));
	rc = rdmem_frontdoor_reserve_at(area, len);
	/* Still mapped: the next attach maps over it; never leave a hole. */
	if (rc && mprotect(area, len, PROT_NONE) < 0)
		rc = -errno;
	if (rc)
		rdmem_warn_limited("front door %s: cannot unmap client %u's area: %s", fd->name, c,
				   strerror(-rc));
}

/*
 * Refuses a geometry whose memory, every client area used to the full (what
 * hostile or busy clients can do), the host cannot hold: pages come on
 * demand, but the worst case must still fit in RAM and swap.
 */
static int rdmem_frontdoor_fits(const char *name, uint64_t worst)
{
	struct sysinfo si;
	uint64_t avail;

	if (sysinfo(&si) < 0)
		return rdmem_frontdoor_fail("sysinfo", name, errno);
	avail = ((uint64_t)si.totalram + si.totalswap) * si.mem_unit;
	if (avail >= worst)
		return 0;
	rdmem_err("front door %s: could need %" PRIu64 " MiB of shared memory with every client "
		  "area in use, the host has %" PRIu64 " MiB of RAM and swap (lower clients, "
		  "slots or max value)",
		  name, worst >> 20, avail >> 20);
	return -ENOSPC;
}

/* Allocates every page of the common part (header, client table, ring: a
 * few pages) and seals it. */
static int rdmem_frontdoor_size(int sfd, const char *name, uint64_t size)
{
	int rc;

	if (ftruncate(sfd, (off_t)size) < 0)
		return rdmem_frontdoor_fail("size the segment", name, errno);
	rc = posix_fallocate(sfd, 0, (off_t)size);
	if (rc) {
		rdmem_err("front door %s: cannot allocate %" PRIu64 " KiB of shared memory: %s",
			  name, size >> 10, strerror(rc));
		return rc == ENOMEM ? -ENOSPC : -rc;
	}
	/* From here on nobody, we included, can change its size. */
	if (fcntl(sfd, F_ADD_SEALS, RDMEM_DOOR_SEALS) < 0)
		return rdmem_frontdoor_fail("seal the segment", name, errno);
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
	/* The client table is zero (fresh pages): free entries; a client's slots
	 * come FREE in the memfd made for its attach.
	 * Release: publishes all of the above to clients that acquire RUNNING. */
	atomic_store_explicit(&h->state, RDMEM_SHM_RUNNING, memory_order_release);
	memcpy(fd->hdr_own, h, sizeof(fd->hdr_own)); /* before any client has the fd */
}

static int rdmem_frontdoor_map_new(struct rdmem_frontdoor *fd, uint64_t epoch)
{
	int rc;

	/* A memfd has no name anyone else could open or pre-create: clients get
	 * it from the door, sealed. */
	fd->shm_fd = memfd_create(fd->name + 1, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd->shm_fd < 0)
		return rdmem_frontdoor_fail("create the segment (memfd)", fd->name, errno);
	rc = rdmem_frontdoor_size(fd->shm_fd, fd->name, fd->geom.slots_off);
	if (rc)
		return rc;
	/* The whole range reserved, empty: client areas are mapped as they attach. */
	fd->base = mmap(NULL, fd->geom.total_size, PROT_NONE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (fd->base == MAP_FAILED) {
		fd->base = NULL;
		return rdmem_frontdoor_fail("reserve the segment's range", fd->name, errno);
	}
	if (mmap(fd->base, fd->geom.slots_off, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
		 fd->shm_fd, 0) == MAP_FAILED)
		return rdmem_frontdoor_fail("map the segment", fd->name, errno);
	fd->hdr = fd->base;
	rdmem_frontdoor_format(fd, epoch);
	return 0;
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
	rdmem_door_close(fd);
	if (fd->base)
		munmap(fd->base, fd->geom.total_size);
	if (fd->shm_fd >= 0)
		close(fd->shm_fd);
	free(fd->clients);
	free(fd->calls);
	rdmem_pin_fini(&fd->pin);
	free(fd);
}

/* A limit as configured, or its default: never below one slot's payload,
 * so zero copy works with every legal --max-value. */
static uint64_t rdmem_frontdoor_mem_limit(const struct rdmem_frontdoor_config *cfg, uint64_t set,
					  uint64_t dflt, uint32_t slot)
{
	if (cfg->has_mem_limits && set != RDMEM_FD_MEM_DEFAULT)
		return set;
	return RDMEM_MAX(dflt, (uint64_t)slot);
}

/* The pinned-memory budget (agent/pin.h); says so when a limit set below
 * one slot's payload leaves no zero copy at all. */
static int rdmem_frontdoor_pin_init(struct rdmem_frontdoor *fd,
				    const struct rdmem_frontdoor_config *cfg)
{
	uint32_t slot = fd->geom.payload_cap;
	uint64_t client =
	    rdmem_frontdoor_mem_limit(cfg, cfg->max_client_mem, RDMEM_FD_DEFAULT_CLIENT_MEM, slot);
	uint64_t total =
	    rdmem_frontdoor_mem_limit(cfg, cfg->max_total_mem, RDMEM_FD_DEFAULT_TOTAL_MEM, slot);

	if (RDMEM_MIN(client, total) < slot)
		rdmem_warn("front door %s: --max-%s-mem %" PRIu64 " is below one slot's payload "
			   "(%u B: --max-value + 66 KiB): no large payload moves with zero copy; "
			   "AUTO calls copy over TCP, forced BULK and LAZY ones fail -ENOMEM",
			   fd->name, client < slot ? "client" : "total", RDMEM_MIN(client, total),
			   slot);
	return rdmem_pin_init(&fd->pin, fd->geom.clients, client, total);
}

int rdmem_frontdoor_create(const struct rdmem_frontdoor_config *cfg, struct rdmem_frontdoor **out)
{
	struct rdmem_frontdoor *fd;
	struct timespec now;
	uint64_t epoch;
	size_t n;
	int rc;

	fd = calloc(1, sizeof(*fd));
	if (!fd)
		return -ENOMEM;
	fd->shm_fd = fd->door.listen_fd = fd->door.wake[0] = fd->door.wake[1] = -1;
	fd->door.bell = fd->door.watch = -1; /* closed by rdmem_door_close() on any failure */
	fd->busy_poll = cfg->busy_poll;
	fd->ring_skip_ns = cfg->ring_skip_ns;
	fd->client_strikes = RDMEM_MIN(cfg->client_strikes, RDMEM_FD_STRIKES_MAX);
	if (rdmem_shm_name_norm(cfg->shm_name ? cfg->shm_name : RDMEM_SHM_DEFAULT_NAME, fd->name,
				sizeof(fd->name))) {
		rdmem_err("front door: bad segment name '%s': want /NAME, 1..%d characters, no "
			  "other '/'",
			  cfg->shm_name, RDMEM_SHM_NAME_MAX - 1);
		rc = -EINVAL;
		goto fail;
	}
	rc = rdmem_frontdoor_geom(cfg, &fd->geom);
	if (!rc)
		rc = rdmem_frontdoor_fits(fd->name, fd->geom.total_size);
	if (rc)
		goto fail;
	n = (size_t)fd->geom.clients * fd->geom.slots;
	fd->clients = calloc(fd->geom.clients, sizeof(*fd->clients));
	fd->calls = calloc(n, sizeof(*fd->calls));
	if (!fd->clients || !fd->calls || rdmem_frontdoor_pin_init(fd, cfg)) {
		rc = -ENOMEM;
		goto fail;
	}
	/* Nanoseconds: a restarted agent's epoch differs from every earlier one's. */
	clock_gettime(CLOCK_REALTIME, &now);
	fd->epoch = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
	rc = rdmem_door_open(fd, cfg); /* may raise the epoch past a retired agent's */
	if (rc)
		goto fail;
	epoch = fd->epoch;
	rc = rdmem_frontdoor_map_new(fd, epoch);
	if (!rc)
		rc = rdmem_door_start(fd);
	if (rc)
		goto fail;
	rdmem_info("front door %s: socket %s, %u clients x %u slots, %u B payload per slot, "
		   "%" PRIu64 " KiB shared, up to %" PRIu64 " KiB per client as it uses it, "
		   "epoch %" PRIu64,
		   fd->name, fd->door.path, fd->geom.clients, fd->geom.slots, fd->geom.payload_cap,
		   fd->geom.slots_off >> 10, rdmem_shm_client_size(&fd->geom) >> 10, epoch);
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
	/* Relaxed: the actor reads it on its own thread's next scan; a repair it
	 * makes before seeing it is undone by the store below. */
	atomic_store_explicit(&fd->closing, 1, memory_order_relaxed);
	/* Release: pairs with the clients' acquire load of state (libclient). */
	atomic_store_explicit(&fd->hdr->state, RDMEM_SHM_CLOSED, memory_order_release);
	rdmem_frontdoor_stop(fd);
	rdmem_frontdoor_wake_all(fd);
	rdmem_frontdoor_free(fd); /* closes every connection, removes our socket */
}

void *rdmem_frontdoor_segment(struct rdmem_frontdoor *fd, size_t *len)
{
	*len = fd->geom.total_size;
	return fd->base;
}

void rdmem_frontdoor_areas(struct rdmem_frontdoor *fd, struct rdmem_frontdoor_areas *out)
{
	out->base = fd->base;
	out->area_off = fd->geom.slots_off;
	out->area_len = rdmem_shm_client_size(&fd->geom);
	out->clients = fd->geom.clients;
	out->slots = fd->geom.slots;
	out->slot_size = fd->geom.slot_size;
	out->payload_off = RDMEM_SHM_SLOT_HDR;
	out->payload_cap = fd->geom.payload_cap;
	out->pin = &fd->pin;
}

struct rdmem_pin_budget *rdmem_frontdoor_pin(struct rdmem_frontdoor *fd)
{
	return &fd->pin;
}

void rdmem_frontdoor_on_release(struct rdmem_frontdoor *fd, rdmem_frontdoor_released_fn fn,
				void *ctx)
{
	fd->released = fn;
	fd->released_ctx = ctx;
}

void rdmem_frontdoor_on_batch_end(struct rdmem_frontdoor *fd, rdmem_frontdoor_batch_fn fn)
{
	fd->batch_end = fn;
}

uint64_t rdmem_frontdoor_client_serial(struct rdmem_frontdoor *fd, uint32_t c)
{
	/* Relaxed: a caller that must see a reclaim's 0 learned of the reclaim
	 * through the release it made after this store (released hook). */
	return c < fd->geom.clients
		   ? atomic_load_explicit(&fd->clients[c].serial, memory_order_relaxed)
		   : 0;
}

uint32_t rdmem_frontdoor_payload_cap(struct rdmem_frontdoor *fd)
{
	return fd->geom.payload_cap;
}
