/* image.c - the chunked image upload state machine and its io_uring file I/O.
 *
 * Each upload owns a temp file ".<name>.<id>.part" in the image directory.
 * Chunks are appended at offset == bytes received, hashed as they go, and
 * written with io_uring on a ring owned by the store. COMMIT checks length and
 * hash, fsyncs the file, renames it over the final name and fsyncs the
 * directory, so a crash leaves either the old state or the whole new file.
 * A committed upload is remembered until it idles out so that a retried final
 * chunk is acknowledged instead of refused, or until a new upload needs its
 * place (the committed upload idle longest goes first, img_oldest_done).
 * When every record is in progress, a new upload takes the record of the
 * upload stalled longest, if one is stalled (img_pay, img_record, img_begin).
 */
#include "server/image.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <liburing.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rdmem/content.h"
#include "rdmem/util.h"
#include "rdmem/wire.h"
#include "common/uring.h"

#define IMG_TMP_MAX (RDMEM_IMAGE_NAME_MAX + 32)
/* A chunk holding the store this long moves every upload's clock on (img_forgive). */
#define IMG_FORGIVE_NS 10000000ull

enum upload_state { UPLOAD_FREE = 0, UPLOAD_ACTIVE, UPLOAD_DONE };

struct upload {
	enum upload_state state;
	uint64_t id;
	char name[RDMEM_IMAGE_NAME_MAX + 1];
	char tmp[IMG_TMP_MAX];
	int fd;
	uint32_t total;
	uint32_t received;
	uint64_t hash;		   /* rolling hash of bytes [0, received) */
	uint64_t hash_before_last; /* ... of bytes [0, last_off), to check a repeat */
	uint32_t last_off;
	uint32_t last_len;
	uint64_t last_ns; /* last activity, for the idle timeout */
	uint64_t paid_ns; /* progress clock: ahead of now while it moves (img_pay) */
};

struct rdmem_image_store {
	pthread_mutex_t lock; /* guards everything below, the ring included */
	struct io_uring ring;
	int dirfd;
	char dir[RDMEM_IMAGE_PATH_MAX];
	uint64_t max_image;
	uint64_t timeout_ns;
	struct upload up[RDMEM_IMAGE_MAX_UPLOADS];
	uint64_t chunk_ns;		/* when the chunk holding the lock began (img_forgive) */
	struct rdmem_image_stats stats; /* active is recomputed on read */
};

int rdmem_image_name_ok(const uint8_t *name, size_t len)
{
	size_t i;

	if (len == 0 || len > RDMEM_IMAGE_NAME_MAX || name[0] == '.')
		return 0;
	for (i = 0; i < len; i++)
		if (name[i] < 0x20 || name[i] > 0x7e || name[i] == '/' || name[i] == '\\')
			return 0;
	/* A leading '.' is already refused, so ".." can only appear inside. */
	for (i = 0; i + 1 < len; i++)
		if (name[i] == '.' && name[i + 1] == '.')
			return 0;
	return 1;
}

/* Runs the one prepared SQE and returns its result (bytes or -errno). */
static int img_uring_run(struct rdmem_image_store *st)
{
	struct io_uring_cqe *cqe;
	int ret;

	ret = io_uring_submit_and_wait(&st->ring, 1);
	if (ret < 0)
		return ret;
	ret = io_uring_wait_cqe(&st->ring, &cqe);
	if (ret < 0)
		return ret;
	ret = cqe->res;
	io_uring_cqe_seen(&st->ring, cqe);
	return ret;
}

static int img_write(struct rdmem_image_store *st, int fd, const uint8_t *p, uint32_t len,
		     uint64_t off)
{
	while (len) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&st->ring);
		int ret;

		if (!sqe)
			return -EBUSY;
		io_uring_prep_write(sqe, fd, p, len, off);
		ret = img_uring_run(st);
		if (ret < 0)
			return ret;
		if (ret == 0)
			return -EIO;
		p += ret, len -= (uint32_t)ret, off += (uint64_t)ret;
	}
	return 0;
}

static int img_fsync(struct rdmem_image_store *st, int fd)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&st->ring);

	if (!sqe)
		return -EBUSY;
	io_uring_prep_fsync(sqe, fd, 0);
	return img_uring_run(st);
}

static void img_release(struct rdmem_image_store *st, struct upload *u)
{
	if (u->fd >= 0)
		close(u->fd);
	if (u->state == UPLOAD_ACTIVE && unlinkat(st->dirfd, u->tmp, 0) < 0 && errno != ENOENT)
		rdmem_warn("image: cannot remove %s/%s: %s", st->dir, u->tmp, strerror(errno));
	memset(u, 0, sizeof(*u));
	u->fd = -1;
}

/* Fails an upload: temp file gone, slot free. Returns err for tail calls. */
static int img_abort(struct rdmem_image_store *st, struct upload *u, int err, const char *why)
{
	rdmem_warn_limited("image: upload %" PRIu64 " (%s) aborted after %u of %u bytes: %s", u->id,
			   u->name, u->received, u->total, why);
	st->stats.failed++;
	img_release(st, u);
	return err;
}

static struct upload *img_find(struct rdmem_image_store *st, uint64_t id)
{
	unsigned i;

	for (i = 0; i < RDMEM_IMAGE_MAX_UPLOADS; i++)
		if (st->up[i].state != UPLOAD_FREE && st->up[i].id == id)
			return &st->up[i];
	return NULL;
}

/*
 * The committed upload idle longest, or NULL. A committed upload is kept
 * only to acknowledge a retried final chunk; when every record is taken, a
 * new upload needs the place more. Before, committed uploads held their
 * records for --upload-timeout (30 s), so the 65th upload within 30 s was
 * refused busy. A retry of an evicted upload's final chunk is refused
 * (ENOENT), unless the exactly-once window answers it first, as it does for
 * calls with an id; a single-chunk upload's retry (INIT|COMMIT) writes the
 * same file again.
 */
static struct upload *img_oldest_done(struct rdmem_image_store *st)
{
	struct upload *old = NULL;
	unsigned i;

	for (i = 0; i < RDMEM_IMAGE_MAX_UPLOADS; i++)
		if (st->up[i].state == UPLOAD_DONE && (!old || st->up[i].last_ns < old->last_ns))
			old = &st->up[i];
	return old;
}

/*
 * Credits an upload n new bytes: each buys 1/RDMEM_IMAGE_FLOOR_BYTES_PER_S
 * of time on its clock, counted from now if the clock is behind, up to
 * RDMEM_IMAGE_CREDIT_MS ahead. An upload is stalled when its clock is behind
 * now: it moved slower than the floor, or paused longer than it had paid
 * for. A new upload starts at now and pays with its first chunk, a repeated
 * chunk moves no new bytes and buys nothing: holding a record costs a peer
 * the floor rate (all 64: 2 MiB/s). Credit up to 10 s lets an upload that
 * moved fast ride out a pause (a TCP retransmit, a path change).
 */
static void img_pay(struct upload *u, uint32_t n, uint64_t now)
{
	uint64_t paid = RDMEM_MAX(u->paid_ns, now);

	paid += (uint64_t)n * 1000000000ull / RDMEM_IMAGE_FLOOR_BYTES_PER_S;
	u->paid_ns = RDMEM_MIN(paid, now + RDMEM_IMAGE_CREDIT_MS * 1000000ull);
}

/* The upload in progress stalled longest (its clock furthest behind now), or NULL. */
static struct upload *img_stalled(struct rdmem_image_store *st, uint64_t now)
{
	struct upload *old = NULL;
	unsigned i;

	for (i = 0; i < RDMEM_IMAGE_MAX_UPLOADS; i++) {
		struct upload *u = &st->up[i];

		if (u->state == UPLOAD_ACTIVE && u->paid_ns < now &&
		    (!old || u->paid_ns < old->paid_ns))
			old = u;
	}
	return old;
}

/*
 * A record for a new upload, left as it is until the upload's file exists:
 * a free one, else the committed upload idle longest, else the upload
 * stalled longest; NULL: busy. Before, one peer could start 64 uploads and
 * keep each alive with a repeated chunk every --upload-timeout: every other
 * upload was refused busy for as long as it liked. Uploads that move are
 * never given up, whoever sends them: records go by progress, not by
 * connection (a peer makes connections freely; an agent carries a whole
 * host's uploads on one).
 */
static struct upload *img_record(struct rdmem_image_store *st, uint64_t now)
{
	struct upload *u;
	unsigned i;

	for (i = 0; i < RDMEM_IMAGE_MAX_UPLOADS; i++)
		if (st->up[i].state == UPLOAD_FREE)
			return &st->up[i];
	return (u = img_oldest_done(st)) ? u : img_stalled(st, now);
}

/* Empties a record img_record gave for the new upload. */
static void img_take_record(struct rdmem_image_store *st, struct upload *u)
{
	if (u->state == UPLOAD_DONE) {
		st->stats.done_evicted++;
		img_release(st, u);
	} else if (u->state == UPLOAD_ACTIVE) {
		st->stats.active_evicted++;
		img_abort(st, u, -EBUSY,
			  "stalled while every record was in progress: given up for a new upload");
	}
}

static int img_apply(struct rdmem_image_store *st, struct upload *u,
		     const struct rdmem_image_chunk *c, uint64_t now, struct rdmem_image_ack *ack);

/*
 * A new temp file, never an existing name: O_EXCL | O_NOFOLLOW write through
 * nothing another process put there (a symlink planted at a name the peer
 * chose the id of made the server truncate and write its target, as root).
 * A name already there (a leftover, or a plant) is removed, the link itself
 * and not what it points to, and the create tried once more.
 */
static int img_create_part(struct rdmem_image_store *st, const char *tmp)
{
	const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
	int fd = openat(st->dirfd, tmp, flags, 0644);

	if (fd < 0 && errno == EEXIST && unlinkat(st->dirfd, tmp, 0) == 0)
		fd = openat(st->dirfd, tmp, flags, 0644);
	return fd;
}

/* Opens the file of a new upload into u (no record yet: img_chunk_locked). */
static int img_start(struct rdmem_image_store *st, const struct rdmem_image_chunk *c, uint64_t now,
		     struct upload *u)
{
	char tmp[IMG_TMP_MAX];
	int fd;

	if (c->offset != 0)
		return -EINVAL;
	if (c->total > st->max_image || c->len > c->total)
		return -E2BIG;
	snprintf(tmp, sizeof(tmp), ".%.*s.%" PRIu64 ".part", (int)c->name_len,
		 (const char *)c->name, c->upload_id);
	fd = img_create_part(st, tmp);
	if (fd < 0) {
		int err = -errno;

		rdmem_err_limited("image: cannot create %s/%s: %s", st->dir, tmp, strerror(errno));
		return err == -ENOSPC ? err : -EIO;
	}
	memset(u, 0, sizeof(*u));
	memcpy(u->name, c->name, c->name_len);
	memcpy(u->tmp, tmp, sizeof(tmp));
	u->fd = fd;
	u->state = UPLOAD_ACTIVE;
	u->id = c->upload_id;
	u->total = c->total;
	u->hash = RDMEM_HASH_INIT;
	u->hash_before_last = RDMEM_HASH_INIT;
	u->last_ns = now;
	u->paid_ns = now;
	return 0;
}

/*
 * A new upload's first chunk runs on a record of its own before it takes
 * one of the store's (img_record, chosen first so a busy store refuses at
 * once): a first chunk that fails (a bad hash, a write error) has emptied
 * nobody's record.
 */
static int img_begin(struct rdmem_image_store *st, const struct rdmem_image_chunk *c, uint64_t now,
		     struct rdmem_image_ack *ack)
{
	struct upload fresh, *rec = img_record(st, now);
	int ret;

	if (!rec)
		return -EBUSY;
	if ((ret = img_start(st, c, now, &fresh)) < 0)
		return ret;
	ret = img_apply(st, &fresh, c, now, ack);
	if (fresh.state == UPLOAD_FREE) /* aborted: its temp file is gone */
		return ret;
	img_take_record(st, rec);
	*rec = fresh;
	ack->received = rec->received;
	return ret;
}

static int img_append(struct rdmem_image_store *st, struct upload *u,
		      const struct rdmem_image_chunk *c, uint64_t now)
{
	int ret;

	if (c->len > u->total - u->received)
		return img_abort(st, u, -E2BIG, "chunk runs past the announced total");
	ret = img_write(st, u->fd, c->data, c->len, c->offset);
	if (ret < 0) {
		rdmem_err("image: write %s/%s: %s", st->dir, u->tmp, strerror(-ret));
		return img_abort(st, u, ret == -ENOSPC ? ret : -EIO, "write failed");
	}
	u->hash_before_last = u->hash;
	u->hash = rdmem_hash_update(u->hash, c->data, c->len);
	u->received += c->len;
	img_pay(u, c->len, now);
	u->last_off = c->offset;
	u->last_len = c->len;
	st->stats.bytes += c->len;
	return 0;
}

static int img_is_repeat(const struct upload *u, const struct rdmem_image_chunk *c)
{
	return u->last_len && c->offset == u->last_off && c->len == u->last_len &&
	       u->received == u->last_off + u->last_len;
}

static int img_commit(struct rdmem_image_store *st, struct upload *u,
		      const struct rdmem_image_chunk *c, struct rdmem_image_ack *ack)
{
	int ret;

	if (u->received != u->total)
		return img_abort(st, u, -EINVAL, "commit before the last byte");
	if (u->hash != c->hash)
		return img_abort(st, u, -EBADMSG, "hash mismatch");
	ret = img_fsync(st, u->fd);
	if (ret < 0) {
		rdmem_err("image: fsync %s/%s: %s", st->dir, u->tmp, strerror(-ret));
		return img_abort(st, u, -EIO, "fsync failed");
	}
	if (renameat(st->dirfd, u->tmp, st->dirfd, u->name) < 0) {
		rdmem_err("image: rename %s/%s to %s: %s", st->dir, u->tmp, u->name,
			  strerror(errno));
		return img_abort(st, u, -EIO, "rename failed");
	}
	ret = img_fsync(st, st->dirfd);
	if (ret < 0)
		rdmem_warn("image: fsync directory %s: %s (file %s is in place)", st->dir,
			   strerror(-ret), u->name);
	close(u->fd);
	u->fd = -1;
	u->state = UPLOAD_DONE;
	st->stats.committed++;
	ack->committed = 1;
	/* Cannot truncate: create() keeps the directory short enough for any name. */
	if (snprintf(ack->path, sizeof(ack->path), "%s/%s", st->dir, u->name) < 0)
		ack->path[0] = '\0';
	rdmem_log_limited(RDMEM_LOG_INFO, "image: committed %s (%u bytes, upload %" PRIu64 ")",
			  ack->path, u->total, u->id);
	return 0;
}

/* The repeated last chunk: same bytes (checked by hash) means a retry. */
static int img_repeat(struct rdmem_image_store *st, struct upload *u,
		      const struct rdmem_image_chunk *c)
{
	if (rdmem_hash_update(u->hash_before_last, c->data, c->len) == u->hash)
		return 0;
	if (u->state == UPLOAD_DONE)
		return -EINVAL;
	return img_abort(st, u, -EBADMSG, "repeated chunk differs from the first copy");
}

static int img_apply(struct rdmem_image_store *st, struct upload *u,
		     const struct rdmem_image_chunk *c, uint64_t now, struct rdmem_image_ack *ack)
{
	int ret;

	if (u->state == UPLOAD_DONE) {
		/* Only a retry of the committing chunk may still arrive. */
		if (!(c->flags & RDMEM_F_IMG_COMMIT) || !img_is_repeat(u, c) || c->hash != u->hash)
			return -EINVAL;
		return img_repeat(st, u, c);
	}
	if (c->offset == u->received) {
		ret = img_append(st, u, c, now);
	} else if (img_is_repeat(u, c)) {
		ret = img_repeat(st, u, c);
	} else {
		char why[96];

		snprintf(why, sizeof(why), "chunk at offset %u, expected %u", c->offset,
			 u->received);
		return img_abort(st, u, -EINVAL, why);
	}
	if (ret < 0)
		return ret;
	if (c->flags & RDMEM_F_IMG_COMMIT)
		return img_commit(st, u, c, ack);
	return 0;
}

static int img_chunk_locked(struct rdmem_image_store *st, const struct rdmem_image_chunk *c,
			    struct rdmem_image_ack *ack)
{
	struct upload *u = img_find(st, c->upload_id);
	uint64_t now = st->chunk_ns = rdmem_now_ns();
	int ret;

	if (u && (c->name_len != strlen(u->name) || memcmp(c->name, u->name, c->name_len)))
		return -EINVAL; /* someone else's upload id: leave it alone */
	if (c->flags & RDMEM_F_IMG_INIT) {
		if (u && (c->offset != 0 || c->total != u->total || !img_is_repeat(u, c)))
			return -EINVAL;
		if (!u)
			return img_begin(st, c, now, ack);
	} else if (!u) {
		return -ENOENT;
	}
	u->last_ns = now;
	ret = img_apply(st, u, c, now, ack);
	if (u->state != UPLOAD_FREE)
		ack->received = u->received;
	return ret;
}

/*
 * A chunk that held the store long (a commit's fsyncs on a slow disk, a
 * write the kernel throttled) held every other upload's next chunk too:
 * their clocks move on by as long, so the server's own delay never makes
 * an upload look stalled. Called with the lock held, at the end of a chunk
 * whose img_chunk_locked read its clock at st->chunk_ns.
 */
static void img_forgive(struct rdmem_image_store *st)
{
	uint64_t now = rdmem_now_ns(), held = now - st->chunk_ns;
	unsigned i;

	if (held < IMG_FORGIVE_NS)
		return;
	/* Only uploads that had not stalled when it began: a paused upload
	 * gains no time from a peer's slow commits. */
	for (i = 0; i < RDMEM_IMAGE_MAX_UPLOADS; i++) {
		struct upload *u = &st->up[i];

		if (u->state == UPLOAD_ACTIVE && u->paid_ns >= st->chunk_ns)
			u->paid_ns =
			    RDMEM_MIN(u->paid_ns + held, now + RDMEM_IMAGE_CREDIT_MS * 1000000ull);
	}
}

int rdmem_image_chunk(struct rdmem_image_store *st, const struct rdmem_image_chunk *c,
		      struct rdmem_image_ack *ack)
{
	int ret;

	ack->received = 0;
	ack->committed = 0;
	ack->path[0] = '\0';
	if (!rdmem_image_name_ok(c->name, c->name_len))
		return -EINVAL;
	if (c->flags & ~(unsigned)(RDMEM_F_IMG_INIT | RDMEM_F_IMG_COMMIT))
		return -EINVAL;
	pthread_mutex_lock(&st->lock);
	ret = img_chunk_locked(st, c, ack);
	img_forgive(st);
	pthread_mutex_unlock(&st->lock);
	return ret;
}

unsigned rdmem_image_expire(struct rdmem_image_store *st, uint64_t now_ns)
{
	unsigned i, n = 0;

	pthread_mutex_lock(&st->lock);
	for (i = 0; i < RDMEM_IMAGE_MAX_UPLOADS; i++) {
		struct upload *u = &st->up[i];

		/* now_ns was read before the lock: a chunk applied while we waited
		 * for it is newer, and unsigned now_ns - last_ns would call it idle. */
		if (u->state == UPLOAD_FREE || now_ns < u->last_ns ||
		    now_ns - u->last_ns <= st->timeout_ns)
			continue;
		if (u->state == UPLOAD_ACTIVE) {
			st->stats.timed_out++;
			img_abort(st, u, -ETIMEDOUT, "abandoned (idle past the upload timeout)");
			n++;
		} else {
			img_release(st, u);
		}
	}
	pthread_mutex_unlock(&st->lock);
	return n;
}

uint64_t rdmem_image_next_expiry(struct rdmem_image_store *st)
{
	uint64_t next = UINT64_MAX;
	unsigned i;

	pthread_mutex_lock(&st->lock);
	for (i = 0; i < RDMEM_IMAGE_MAX_UPLOADS; i++)
		if (st->up[i].state != UPLOAD_FREE) /* expired once idle > timeout: + 1 */
			next = RDMEM_MIN(next, st->up[i].last_ns + st->timeout_ns + 1);
	pthread_mutex_unlock(&st->lock);
	return next;
}

void rdmem_image_stats(struct rdmem_image_store *st, struct rdmem_image_stats *out)
{
	unsigned i;

	pthread_mutex_lock(&st->lock);
	*out = st->stats;
	out->active = 0;
	for (i = 0; i < RDMEM_IMAGE_MAX_UPLOADS; i++)
		out->active += st->up[i].state == UPLOAD_ACTIVE;
	pthread_mutex_unlock(&st->lock);
}

/* Matches ".<name>.<digits>.part", the only names this store creates. */
static int img_is_stale_temp(const char *n)
{
	size_t len = strlen(n), i;

	if (len < 8 || n[0] != '.' || strcmp(n + len - 5, ".part") != 0)
		return 0;
	i = len - 5;
	if (i == 0 || n[i - 1] < '0' || n[i - 1] > '9')
		return 0;
	while (i > 1 && n[i - 1] >= '0' && n[i - 1] <= '9')
		i--;
	return i > 2 && n[i - 1] == '.';
}

static void img_sweep_stale(struct rdmem_image_store *st)
{
	int fd = dup(st->dirfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;

	if (!d) {
		if (fd >= 0)
			close(fd);
		rdmem_warn("image: cannot scan %s for stale temp files: %s", st->dir,
			   strerror(errno));
		return;
	}
	while ((e = readdir(d))) {
		if (!img_is_stale_temp(e->d_name))
			continue;
		if (unlinkat(st->dirfd, e->d_name, 0) == 0)
			rdmem_info("image: removed stale temp file %s/%s", st->dir, e->d_name);
	}
	closedir(d);
}

/*
 * The directory is ours alone: owned by us or root, writable by neither its
 * group nor others. Anyone else who can write there can plant the names the
 * server writes or renames onto, or swap a committed file for a symlink
 * before the hook (run as the server's user) or a viewer opens it.
 */
static int img_dir_private(int dirfd, const char *dir)
{
	struct stat sb;

	if (fstat(dirfd, &sb) < 0) {
		int err = errno;

		rdmem_err("image: --image-dir %s: fstat: %s", dir, strerror(err));
		return -err;
	}
	if (sb.st_uid != geteuid() && sb.st_uid != 0) {
		rdmem_err("image: --image-dir %s is owned by uid %u, not by this server's user "
			  "(uid %u) or root: refused",
			  dir, (unsigned)sb.st_uid, (unsigned)geteuid());
		return -EPERM;
	}
	if (sb.st_mode & (S_IWGRP | S_IWOTH)) {
		rdmem_err("image: --image-dir %s is writable by its group or others (mode %04o): "
			  "another user could plant the names uploads are written to or swap "
			  "a stored image before the hook runs; refused (chmod go-w %s)",
			  dir, (unsigned)(sb.st_mode & 07777), dir);
		return -EPERM;
	}
	return 0;
}

int rdmem_image_create(const char *dir, uint64_t max_image, uint32_t timeout_ms,
		       struct rdmem_image_store **out)
{
	struct rdmem_image_store *st;
	unsigned i;
	int ret;

	if (strlen(dir) >= RDMEM_IMAGE_PATH_MAX - RDMEM_IMAGE_NAME_MAX - 2)
		return -ENAMETOOLONG;
	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (st->dirfd < 0) {
		ret = -errno;
		rdmem_err("image: cannot open image directory %s: %s", dir, strerror(errno));
		free(st);
		return ret;
	}
	if ((ret = img_dir_private(st->dirfd, dir)) < 0) {
		close(st->dirfd);
		free(st);
		return ret;
	}
	ret = io_uring_queue_init(8, &st->ring, 0);
	if (ret < 0) {
		rdmem_err("image: io_uring_queue_init: %s", strerror(-ret));
		close(st->dirfd);
		free(st);
		return ret;
	}
	rdmem_uring_tsan(&st->ring);
	snprintf(st->dir, sizeof(st->dir), "%s", dir);
	st->max_image = max_image > UINT32_MAX ? UINT32_MAX : max_image;
	st->timeout_ns = (uint64_t)timeout_ms * 1000000ull;
	pthread_mutex_init(&st->lock, NULL);
	for (i = 0; i < RDMEM_IMAGE_MAX_UPLOADS; i++)
		st->up[i].fd = -1;
	img_sweep_stale(st);
	*out = st;
	return 0;
}

void rdmem_image_destroy(struct rdmem_image_store *st)
{
	unsigned i;

	if (!st)
		return;
	pthread_mutex_lock(&st->lock);
	for (i = 0; i < RDMEM_IMAGE_MAX_UPLOADS; i++) {
		if (st->up[i].state == UPLOAD_ACTIVE)
			img_abort(st, &st->up[i], -ESHUTDOWN, "server stopping");
		else if (st->up[i].state == UPLOAD_DONE)
			img_release(st, &st->up[i]);
	}
	pthread_mutex_unlock(&st->lock);
	io_uring_queue_exit(&st->ring);
	close(st->dirfd);
	pthread_mutex_destroy(&st->lock);
	free(st);
}
