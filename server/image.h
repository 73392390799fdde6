/* image.h - the image store: chunked uploads written to a temp file in the
 * image directory with io_uring, checked against the client's rolling hash,
 * and renamed into place atomically at COMMIT.
 *
 * An upload is named by a client-chosen 64-bit id and carries the final file
 * name. Chunks arrive strictly in order; the last chunk repeated (same
 * offset, same bytes) is acknowledged again, so a retried call is harmless.
 * Every failure removes the temp file: a final file exists only complete and
 * hash-checked. Thread-safe (one mutex).
 */
#ifndef RDMEM_SERVER_IMAGE_H
#define RDMEM_SERVER_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#define RDMEM_IMAGE_NAME_MAX	200u /* the temp name adds a dot, the id and ".part" */
#define RDMEM_IMAGE_MAX_UPLOADS 64u  /* uploads in progress at once */
/* An upload that moved less than this many bytes a second since it began
 * (credit for at most RDMEM_IMAGE_CREDIT_MS ahead) is stalled: a new upload
 * may take its record when every record is in progress (image.c, img_pay). */
#define RDMEM_IMAGE_FLOOR_BYTES_PER_S (32u << 10)
#define RDMEM_IMAGE_CREDIT_MS	      10000u
#define RDMEM_IMAGE_PATH_MAX	      4096u

struct rdmem_image_store;

struct rdmem_image_chunk {
	uint64_t upload_id;
	const uint8_t *name; /* final file name (the call's key) */
	uint32_t name_len;
	unsigned flags; /* RDMEM_F_IMG_INIT / RDMEM_F_IMG_COMMIT */
	uint32_t offset;
	uint32_t total; /* with INIT */
	uint64_t hash;	/* with COMMIT: rolling hash of the whole image */
	const void *data;
	uint32_t len;
};

struct rdmem_image_ack {
	uint32_t received;		 /* image bytes stored so far */
	int committed;			 /* 1: this call committed the image */
	char path[RDMEM_IMAGE_PATH_MAX]; /* the final path, when committed */
};

struct rdmem_image_stats {
	uint64_t active;
	uint64_t committed;
	uint64_t failed;	 /* every aborted upload, timeouts included */
	uint64_t timed_out;	 /* abandoned uploads */
	uint64_t done_evicted;	 /* committed uploads forgotten early for a new one */
	uint64_t active_evicted; /* stalled uploads given up for a new one (image.c) */
	uint64_t bytes;		 /* chunk bytes written */
};

/* dir must exist and be writable; stale temp files of a previous run are removed. */
int rdmem_image_create(const char *dir, uint64_t max_image, uint32_t timeout_ms,
		       struct rdmem_image_store **out);
/* Aborts every upload in progress (temp files removed). */
void rdmem_image_destroy(struct rdmem_image_store *st);

/*
 * Applies one chunk. 0, or -EINVAL (bad name, offset, flags; the upload is
 * aborted when it was its own), -ENOENT (unknown upload), -E2BIG (over total
 * or max_image), -EBADMSG (hash mismatch), -EBUSY (every record holds an
 * upload in progress that is not stalled), -EIO, -ENOSPC.
 */
int rdmem_image_chunk(struct rdmem_image_store *st, const struct rdmem_image_chunk *c,
		      struct rdmem_image_ack *ack);

/* Aborts uploads idle longer than the timeout; returns how many. */
unsigned rdmem_image_expire(struct rdmem_image_store *st, uint64_t now_ns);
/* When the next upload held now times out if it stays idle (UINT64_MAX:
 * none held). A chunk only moves an upload's time later; a new upload is
 * the caller's to announce (rdmem_service_wake). */
uint64_t rdmem_image_next_expiry(struct rdmem_image_store *st);

void rdmem_image_stats(struct rdmem_image_store *st, struct rdmem_image_stats *out);

/* A safe final name: printable, no '/', no leading '.', within the limit. */
int rdmem_image_name_ok(const uint8_t *name, size_t len);

#endif
