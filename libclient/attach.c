/* attach.c - librdmem's attachments and handles: map the agent's segment,
 * claim a client entry, notice a dead or replaced agent, re-attach. */
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "libclient/rdmem_priv.h"

/* Gone when its pid is, or when its lock on the segment fd is (zombie, reused pid). */
static int att_agent_gone(int fd, int32_t pid)
{
	if (pid <= 0 || (kill(pid, 0) < 0 && errno == ESRCH))
		return 1;
	return rdmem_shm_agent_locked(fd) == 0;
}

void rdmem__att_unmap(struct rdmem_att *pub)
{
	struct rdmem_att_lib *a = rdmem__lib(pub);
	struct rdmem_shm_client *me = rdmem_shm_client_at(pub->base, &pub->geom, pub->client);
	int32_t pid = a->pid;

	/*
	 * Hand the entry back. Release: our slot writes precede the next
	 * claimer's acquire CAS. Slots we abandoned stay ABANDONED until the
	 * agent frees them; a later claimer's allocator skips them meanwhile.
	 */
	if (!atomic_load_explicit(&pub->stale, memory_order_relaxed))
		atomic_compare_exchange_strong_explicit(&me->pid, &pid, 0, memory_order_release,
							memory_order_relaxed);
	munmap(pub->base, a->len);
	close(a->fd);
	free(a);
}

/* Waits (bounded) for an agent that is still creating the segment to size it. */
static int att_wait_sized(int fd, struct stat *st)
{
	uint64_t give_up = rdmem_now_ns() + RDMEM_ATTACH_INIT_NS;
	int rc;

	while ((rc = fstat(fd, st)) == 0 && st->st_size < (off_t)RDMEM_SHM_HEADER_SIZE &&
	       rdmem_now_ns() < give_up)
		usleep(1000);
	if (rc < 0)
		return -errno;
	return st->st_size < (off_t)RDMEM_SHM_HEADER_SIZE ? -ECONNREFUSED : 0;
}

/* Checks the mapped segment is a running agent's. */
static int att_check(struct rdmem_att_lib *a)
{
	uint64_t give_up = rdmem_now_ns() + RDMEM_ATTACH_INIT_NS;
	struct rdmem_shm_header *hdr = a->pub.hdr;
	uint32_t state;

	/* Acquire: pairs with the agent's release store of RUNNING, after formatting. */
	while ((state = atomic_load_explicit(&hdr->state, memory_order_acquire)) ==
		   RDMEM_SHM_INIT &&
	       rdmem_now_ns() < give_up)
		usleep(1000);
	if (state != RDMEM_SHM_RUNNING)
		return -ECONNREFUSED;
	if (rdmem_shm_header_check(hdr, a->len, &a->pub.geom) != 0)
		return -EPROTO;
	if (att_agent_gone(a->fd, hdr->agent_pid))
		return -ECONNREFUSED;
	return 0;
}

/* Maps the segment and checks it is a running agent's. */
static int att_map(const char *name, struct rdmem_att_lib *a)
{
	struct stat st;
	int fd, rc;

	fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
	if (fd < 0)
		return errno == ENOENT ? -ECONNREFUSED : -errno;
	rc = att_wait_sized(fd, &st);
	if (rc) {
		close(fd);
		return rc;
	}
	a->len = (size_t)st.st_size;
	a->pub.base = mmap(NULL, a->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (a->pub.base == MAP_FAILED) {
		rc = -errno;
		close(fd);
		return rc;
	}
	a->fd = fd;
	a->pub.hdr = (struct rdmem_shm_header *)a->pub.base;
	rc = att_check(a);
	if (rc) {
		munmap(a->pub.base, a->len);
		close(fd);
	}
	return rc;
}

/* Claims a client entry: CAS 0 -> our pid. */
static int att_claim(struct rdmem_att_lib *a)
{
	uint32_t c;

	a->pid = (int32_t)getpid();
	for (c = 0; c < a->pub.geom.clients; c++) {
		struct rdmem_shm_client *e = rdmem_shm_client_at(a->pub.base, &a->pub.geom, c);
		int32_t free_pid = 0;

		/* Acquire: pairs with the agent's release when it reclaimed the
		 * entry, so its slot resets are visible to us. */
		if (atomic_compare_exchange_strong_explicit(
			&e->pid, &free_pid, a->pid, memory_order_acquire, memory_order_relaxed)) {
			atomic_fetch_add_explicit(&e->gen, 1, memory_order_relaxed);
			e->attach_ns = rdmem_now_ns();
			a->pub.client = c;
			return 0;
		}
	}
	return -EUSERS;
}

static int att_attach(rdmem_t *h, struct rdmem_att **out)
{
	struct rdmem_att_lib *a = (struct rdmem_att_lib *)calloc(1, sizeof(*a));
	int rc;

	if (!a)
		return -ENOMEM;
	rc = att_map(h->name, a);
	if (rc) {
		free(a);
		return rc;
	}
	a->agent_pid = a->pub.hdr->agent_pid;
	a->epoch = atomic_load_explicit(&a->pub.hdr->epoch, memory_order_relaxed);
	a->pub.single_cpu = h->single_cpu;
	rdmem_shm_ring_view(a->pub.base, &a->pub.geom, &a->pub.ring);
	rc = att_claim(a);
	if (rc) {
		munmap(a->pub.base, a->len);
		close(a->fd);
		free(a);
		return rc;
	}
	atomic_store_explicit(&a->pub.refs, 1, memory_order_relaxed);
	atomic_store_explicit(&a->next_liveness_ns, rdmem_now_ns() + RDMEM_LIVENESS_NS,
			      memory_order_relaxed);
	*out = &a->pub;
	return 0;
}

static void att_lock(rdmem_t *h)
{
	/* Acquire/release: the critical section is a pointer read and a ref bump. */
	while (atomic_flag_test_and_set_explicit(&h->lock, memory_order_acquire))
		sched_yield();
}

static void att_unlock(rdmem_t *h)
{
	atomic_flag_clear_explicit(&h->lock, memory_order_release);
}

/* Returns the current attachment with a reference, re-attaching after a stale one. */
struct rdmem_att *rdmem__att_get(rdmem_t *h, int *err)
{
	struct rdmem_att *a, *old = NULL;
	int rc = 0;

	att_lock(h);
	a = h->att;
	if (a && atomic_load_explicit(&a->stale, memory_order_relaxed)) {
		old = a;
		h->att = a = NULL;
	}
	if (!a) {
		rc = att_attach(h, &a);
		if (rc == 0) {
			h->att = a;
			if (h->attached_once)
				atomic_fetch_add_explicit(&h->n_reattach, 1, memory_order_relaxed);
			h->attached_once = 1;
		}
	}
	if (a)
		atomic_fetch_add_explicit(&a->refs, 1, memory_order_relaxed);
	att_unlock(h);
	if (old)
		rdmem__att_put(old); /* the handle's reference */
	*err = rc;
	return a;
}

/*
 * Is the agent behind a still the one we attached to? Header loads are
 * cheap and run on every check; kill() and the lock test run every
 * RDMEM_LIVENESS_NS.
 */
int rdmem__att_alive(struct rdmem_att *pub, uint64_t now)
{
	struct rdmem_att_lib *a = rdmem__lib(pub);
	struct rdmem_shm_client *me = rdmem_shm_client_at(pub->base, &pub->geom, pub->client);

	if (atomic_load_explicit(&pub->stale, memory_order_relaxed))
		return 0;
	/* Acquire: pairs with the agent's release store of CLOSED. */
	if (atomic_load_explicit(&pub->hdr->state, memory_order_acquire) != RDMEM_SHM_RUNNING ||
	    atomic_load_explicit(&pub->hdr->epoch, memory_order_relaxed) != a->epoch ||
	    atomic_load_explicit(&me->pid, memory_order_relaxed) != a->pid)
		goto stale;
	if (now >= atomic_load_explicit(&a->next_liveness_ns, memory_order_relaxed)) {
		atomic_store_explicit(&a->next_liveness_ns, now + RDMEM_LIVENESS_NS,
				      memory_order_relaxed);
		if (att_agent_gone(a->fd, a->agent_pid))
			goto stale;
	}
	return 1;
stale:
	atomic_store_explicit(&pub->stale, 1, memory_order_relaxed);
	return 0;
}

/* ---- handle ------------------------------------------------------------ */

int rdmem_open(const char *name, rdmem_t **out)
{
	rdmem_t *h = (rdmem_t *)calloc(1, sizeof(*h));
	struct rdmem_att *a;
	cpu_set_t set;
	int rc;

	if (!h)
		return -ENOMEM;
	atomic_flag_clear(&h->lock);
	h->timeout_ms = RDMEM_DEFAULT_TIMEOUT_MS;
	h->single_cpu = sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) == 1;
	if (rdmem_shm_name_norm(name ? name : RDMEM_SHM_DEFAULT_NAME, h->name, sizeof(h->name))) {
		free(h);
		return -EINVAL;
	}
	a = rdmem__att_get(h, &rc);
	if (!a) {
		free(h);
		return rc;
	}
	rdmem__att_put(a);
	*out = h;
	return 0;
}

void rdmem_close(rdmem_t *h)
{
	if (!h)
		return;
	if (h->att)
		rdmem__att_put(h->att);
	free(h);
}

void rdmem_set_timeout(rdmem_t *h, uint32_t ms)
{
	h->timeout_ms = ms ? ms : RDMEM_DEFAULT_TIMEOUT_MS;
}

/* Geometry of the current attachment (0 when detached). */
static uint32_t att_geom_field(rdmem_t *h, int which)
{
	struct rdmem_att *a;
	uint32_t v;
	int rc;

	a = rdmem__att_get(h, &rc);
	if (!a)
		return 0;
	v = which == 0 ? a->geom.slots : a->geom.max_value;
	rdmem__att_put(a);
	return v;
}

uint32_t rdmem_slots(rdmem_t *h)
{
	return att_geom_field(h, 0);
}

uint32_t rdmem_max_value(rdmem_t *h)
{
	return att_geom_field(h, 1);
}

void rdmem_get_counters(rdmem_t *h, struct rdmem_counters *out)
{
	out->calls = atomic_load_explicit(&h->n_calls, memory_order_relaxed);
	out->timeouts = atomic_load_explicit(&h->n_timeouts, memory_order_relaxed);
	out->late = atomic_load_explicit(&h->n_late, memory_order_relaxed);
	out->shutdowns = atomic_load_explicit(&h->n_shutdowns, memory_order_relaxed);
	out->reattach = atomic_load_explicit(&h->n_reattach, memory_order_relaxed);
	out->bad_replies = atomic_load_explicit(&h->n_bad, memory_order_relaxed);
}

/* Relaxed: statistics only; nothing is published through them. */
void rdmem__count(rdmem_t *h, int which)
{
	_Atomic uint64_t *n = which == RDMEM__N_TIMEOUT	   ? &h->n_timeouts
			      : which == RDMEM__N_SHUTDOWN ? &h->n_shutdowns
			      : which == RDMEM__N_LATE	   ? &h->n_late
							   : &h->n_bad;

	atomic_fetch_add_explicit(n, 1, memory_order_relaxed);
}
