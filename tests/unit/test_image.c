/* test_image.c - the image upload state machine on a real temp directory:
 * in-order chunks, a repeated chunk, and every failure (out of order, hash
 * mismatch, size overflow, bad names, timeout, stop) leaving neither a final
 * file nor a temp file behind. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rdmem/content.h"
#include "rdmem/util.h"
#include "rdmem/wire.h"
#include "server/image.h"
#include "tests/check.h"

static char dir[] = "/tmp/rdmem-test-image-XXXXXX";
static uint8_t img[100000];
static struct rdmem_image_ack ack;

/* Files in the directory (temp files included). */
static int dir_entries(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

/* Removes every file in the directory. */
static void clear_dir(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	while (d && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			unlinkat(dirfd(d), e->d_name, 0);
	if (d)
		closedir(d);
}

static int file_equals(const char *name, const uint8_t *data, size_t len)
{
	char path[512];
	uint8_t *buf = malloc(len + 1);
	int fd, ok;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDONLY);
	if (fd < 0 || !buf) {
		free(buf);
		if (fd >= 0)
			close(fd);
		return 0;
	}
	n = read(fd, buf, len + 1);
	ok = n == (ssize_t)len && memcmp(buf, data, len) == 0;
	close(fd);
	free(buf);
	return ok;
}

static int chunk(struct rdmem_image_store *st, uint64_t id, const char *name, unsigned flags,
		 uint32_t off, uint32_t len, uint32_t total, uint64_t hash)
{
	struct rdmem_image_chunk c = { id,
				       (const uint8_t *)name,
				       (uint32_t)strlen(name),
				       flags,
				       off,
				       total,
				       hash,
				       img + off,
				       len };

	return rdmem_image_chunk(st, &c, &ack);
}

static struct rdmem_image_store *store(uint32_t timeout_ms)
{
	struct rdmem_image_store *st = NULL;

	if (rdmem_image_create(dir, sizeof(img), timeout_ms, &st) < 0)
		return NULL;
	return st;
}

/* Uploads [0, upto) in 7000-byte chunks; returns the first error. */
static int upload_prefix(struct rdmem_image_store *st, uint64_t id, const char *name, uint32_t upto,
			 uint32_t total)
{
	uint32_t off;
	int ret;

	for (off = 0; off < upto; off += 7000) {
		uint32_t n = RDMEM_MIN(7000u, upto - off);

		ret = chunk(st, id, name, off ? 0 : RDMEM_F_IMG_INIT, off, n, total, 0);
		if (ret)
			return ret;
	}
	return 0;
}

static void test_upload_in_order(void)
{
	struct rdmem_image_store *st = store(10000);
	uint64_t hash = rdmem_hash_update(RDMEM_HASH_INIT, img, sizeof(img));
	struct rdmem_image_stats s;

	REQUIRE(st);
	REQUIRE(upload_prefix(st, 1, "photo.jpg", 98000, sizeof(img)) == 0);
	CHECK_EQ(ack.received, 98000);
	CHECK_EQ(dir_entries(), 1); /* only the temp file so far */
	CHECK(!file_equals("photo.jpg", img, sizeof(img)));
	CHECK_EQ(chunk(st, 1, "photo.jpg", RDMEM_F_IMG_COMMIT, 98000, 2000, 0, hash), 0);
	CHECK(ack.committed == 1 && ack.received == sizeof(img));
	CHECK(strstr(ack.path, "/photo.jpg") != NULL);
	CHECK(file_equals("photo.jpg", img, sizeof(img)));
	CHECK_EQ(dir_entries(), 1); /* temp file renamed, not copied */
	/* The committing chunk retried: acknowledged, not committed twice. */
	CHECK_EQ(chunk(st, 1, "photo.jpg", RDMEM_F_IMG_COMMIT, 98000, 2000, 0, hash), 0);
	CHECK_EQ(ack.committed, 0);
	rdmem_image_stats(st, &s);
	CHECK(s.committed == 1 && s.failed == 0 && s.active == 0);
	rdmem_image_destroy(st);
	CHECK(file_equals("photo.jpg", img, sizeof(img))); /* a committed file stays */
	unlink(strcat(strcpy((char[600]){ 0 }, dir), "/photo.jpg"));
}

static void test_repeated_chunk_and_single_chunk(void)
{
	struct rdmem_image_store *st = store(10000);
	uint64_t hash = rdmem_hash_update(RDMEM_HASH_INIT, img, 5000);

	REQUIRE(st);
	CHECK_EQ(chunk(st, 2, "a.png", RDMEM_F_IMG_INIT, 0, 3000, 5000, 0), 0);
	CHECK_EQ(chunk(st, 2, "a.png", RDMEM_F_IMG_INIT, 0, 3000, 5000, 0), 0); /* INIT retried */
	CHECK_EQ(chunk(st, 2, "a.png", 0, 3000, 1000, 0, 0), 0);
	CHECK_EQ(chunk(st, 2, "a.png", 0, 3000, 1000, 0, 0), 0); /* retried: harmless */
	CHECK_EQ(ack.received, 4000);
	CHECK_EQ(chunk(st, 2, "a.png", RDMEM_F_IMG_COMMIT, 4000, 1000, 0, hash), 0);
	CHECK(file_equals("a.png", img, 5000));
	/* INIT and COMMIT in one chunk. */
	CHECK_EQ(chunk(st, 3, "b.png", RDMEM_F_IMG_INIT | RDMEM_F_IMG_COMMIT, 0, 100, 100,
		       rdmem_hash_update(RDMEM_HASH_INIT, img, 100)),
		 0);
	CHECK(file_equals("b.png", img, 100));
	rdmem_image_destroy(st);
	CHECK_EQ(dir_entries(), 2);
	unlink(strcat(strcpy((char[600]){ 0 }, dir), "/a.png"));
	unlink(strcat(strcpy((char[600]){ 0 }, dir), "/b.png"));
}

/* Each failure: the upload is gone, nothing is left in the directory. */
static void test_failures_leave_nothing(void)
{
	struct rdmem_image_store *st = store(10000);
	uint64_t wrong = 12345;
	struct rdmem_image_stats s;

	REQUIRE(st);
	/* out of order: a gap */
	REQUIRE(upload_prefix(st, 10, "gap.jpg", 14000, 50000) == 0);
	CHECK_EQ(chunk(st, 10, "gap.jpg", 0, 21000, 7000, 0, 0), -EINVAL);
	CHECK_EQ(dir_entries(), 0);
	CHECK_EQ(chunk(st, 10, "gap.jpg", 0, 14000, 7000, 0, 0), -ENOENT); /* aborted for good */
	/* out of order: going back */
	REQUIRE(upload_prefix(st, 11, "back.jpg", 21000, 50000) == 0);
	CHECK_EQ(chunk(st, 11, "back.jpg", 0, 0, 7000, 0, 0), -EINVAL);
	CHECK_EQ(dir_entries(), 0);
	/* a "repeat" with different bytes */
	REQUIRE(upload_prefix(st, 12, "rep.jpg", 14000, 50000) == 0);
	img[7000] ^= 1;
	CHECK_EQ(chunk(st, 12, "rep.jpg", 0, 7000, 7000, 0, 0), -EBADMSG);
	img[7000] ^= 1;
	CHECK_EQ(dir_entries(), 0);
	/* hash mismatch at commit */
	REQUIRE(upload_prefix(st, 13, "hash.jpg", 14000, 21000) == 0);
	CHECK_EQ(chunk(st, 13, "hash.jpg", RDMEM_F_IMG_COMMIT, 14000, 7000, 0, wrong), -EBADMSG);
	CHECK_EQ(dir_entries(), 0);
	/* more bytes than announced */
	REQUIRE(upload_prefix(st, 14, "over.jpg", 7000, 10000) == 0);
	CHECK_EQ(chunk(st, 14, "over.jpg", 0, 7000, 7000, 0, 0), -E2BIG);
	CHECK_EQ(dir_entries(), 0);
	/* commit before the last byte */
	REQUIRE(upload_prefix(st, 15, "short.jpg", 7000, 10000) == 0);
	CHECK_EQ(chunk(st, 15, "short.jpg", RDMEM_F_IMG_COMMIT, 7000, 1000, 0, 0), -EINVAL);
	CHECK_EQ(dir_entries(), 0);
	/* announced total over the store's limit, INIT at a non-zero offset, no INIT */
	CHECK_EQ(chunk(st, 16, "huge.jpg", RDMEM_F_IMG_INIT, 0, 10, sizeof(img) + 1, 0), -E2BIG);
	CHECK_EQ(chunk(st, 17, "mid.jpg", RDMEM_F_IMG_INIT, 10, 10, 100, 0), -EINVAL);
	CHECK_EQ(chunk(st, 18, "noinit.jpg", 0, 0, 10, 100, 0), -ENOENT);
	CHECK_EQ(chunk(st, 19, "flags.jpg", RDMEM_F_IMG_INIT | 0x80, 0, 10, 100, 0), -EINVAL);
	CHECK_EQ(dir_entries(), 0);
	rdmem_image_stats(st, &s);
	CHECK_EQ(s.failed, 6);
	CHECK_EQ(s.active, 0);
	rdmem_image_destroy(st);
}

static void test_bad_names(void)
{
	static const char *const bad[] = { "",	   ".hidden", "..",	"a/b",	     "../x",
					   "x/..", "a..b",    "/etc/x", "tab\there", "a\\b" };
	struct rdmem_image_store *st = store(10000);
	char longname[RDMEM_IMAGE_NAME_MAX + 2];
	unsigned i;

	REQUIRE(st);
	for (i = 0; i < RDMEM_ARRAY_SIZE(bad); i++)
		if (chunk(st, 30 + i, bad[i], RDMEM_F_IMG_INIT, 0, 10, 10, 0) != -EINVAL) {
			fprintf(stderr, "  name '%s' accepted\n", bad[i]);
			CHECK(0);
		}
	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	CHECK_EQ(chunk(st, 50, longname, RDMEM_F_IMG_INIT, 0, 10, 10, 0), -EINVAL);
	CHECK(rdmem_image_name_ok((const uint8_t *)"ok name-1.jpg", 13));
	CHECK(!rdmem_image_name_ok((const uint8_t *)"nul\0x", 5));
	/* A chunk naming someone else's upload is refused and does not hurt it. */
	REQUIRE(upload_prefix(st, 60, "mine.jpg", 7000, 14000) == 0);
	CHECK_EQ(chunk(st, 60, "theirs.jpg", 0, 7000, 7000, 0, 0), -EINVAL);
	CHECK_EQ(chunk(st, 60, "mine.jpg", 0, 7000, 7000, 0, 0), 0);
	CHECK_EQ(dir_entries(), 1);
	rdmem_image_destroy(st); /* stop: the temp file goes */
	CHECK_EQ(dir_entries(), 0);
}

static void test_timeout_and_stale(void)
{
	struct rdmem_image_store *st = store(100);
	struct rdmem_image_stats s;
	uint64_t tick;
	int fd;

	REQUIRE(st);
	CHECK_EQ(rdmem_image_next_expiry(st), UINT64_MAX); /* nothing held: no deadline */
	/* The server's tick reads its clock before it waits for the store's lock:
	 * a chunk applied meanwhile is newer than that reading, not idle. */
	tick = rdmem_now_ns();
	REQUIRE(upload_prefix(st, 70, "slow.jpg", 7000, 14000) == 0);
	/* The main thread sleeps until then: the upload's idle limit (100 ms). */
	CHECK(rdmem_image_next_expiry(st) > tick + 100000000ull);
	CHECK(rdmem_image_next_expiry(st) <= rdmem_now_ns() + 100000001ull);
	CHECK_EQ(rdmem_image_expire(st, tick), 0);
	CHECK_EQ(dir_entries(), 1);
	CHECK_EQ(rdmem_image_expire(st, rdmem_now_ns()), 0);
	CHECK_EQ(dir_entries(), 1);
	CHECK_EQ(rdmem_image_expire(st, rdmem_now_ns() + 200000000ull), 1);
	CHECK_EQ(dir_entries(), 0);
	CHECK_EQ(rdmem_image_next_expiry(st), UINT64_MAX);
	CHECK_EQ(chunk(st, 70, "slow.jpg", 0, 7000, 7000, 0, 0), -ENOENT);
	rdmem_image_stats(st, &s);
	CHECK(s.timed_out == 1 && s.failed == 1);
	rdmem_image_destroy(st);

	/* A temp file left by a crashed run is swept at start; other files are not. */
	fd = open(strcat(strcpy((char[600]){ 0 }, dir), "/.crash.jpg.99.part"), O_CREAT | O_WRONLY,
		  0644);
	CHECK(fd >= 0);
	close(fd);
	fd = open(strcat(strcpy((char[600]){ 0 }, dir), "/.keep.part"), O_CREAT | O_WRONLY, 0644);
	close(fd);
	st = store(100);
	REQUIRE(st);
	CHECK_EQ(dir_entries(), 1);
	rdmem_image_destroy(st);
	unlink(strcat(strcpy((char[600]){ 0 }, dir), "/.keep.part"));
}

/*
 * More single-chunk uploads than the store has records, back to back, with
 * a timeout far off: each is committed (a committed upload's record makes
 * room for a new one; before, the 65th within --upload-timeout was refused
 * busy), and a retry of the latest is still acknowledged.
 */
static void test_more_uploads_than_records(void)
{
	struct rdmem_image_store *st = store(60000);
	uint64_t hash = rdmem_hash_update(RDMEM_HASH_INIT, img, 100);
	unsigned flags = RDMEM_F_IMG_INIT | RDMEM_F_IMG_COMMIT, i, ok = 0;
	struct rdmem_image_stats s;
	char name[32];

	REQUIRE(st);
	for (i = 0; i < 3 * RDMEM_IMAGE_MAX_UPLOADS; i++) {
		snprintf(name, sizeof(name), "many-%u.jpg", i);
		ok += chunk(st, 1000 + i, name, flags, 0, 100, 100, hash) == 0 && ack.committed;
	}
	CHECK_EQ(ok, 3 * RDMEM_IMAGE_MAX_UPLOADS);
	CHECK_EQ(dir_entries(), (int)(3 * RDMEM_IMAGE_MAX_UPLOADS));
	CHECK(file_equals("many-0.jpg", img, 100));
	/* The records idle longest went: the latest two stay, and a retry of
	 * their final chunk is acknowledged; the first one's is refused. */
	CHECK_EQ(chunk(st, 1000 + i - 1, name, RDMEM_F_IMG_COMMIT, 0, 100, 100, hash), 0);
	snprintf(name, sizeof(name), "many-%u.jpg", i - 2);
	CHECK_EQ(chunk(st, 1000 + i - 2, name, RDMEM_F_IMG_COMMIT, 0, 100, 100, hash), 0);
	CHECK_EQ(chunk(st, 1000, "many-0.jpg", RDMEM_F_IMG_COMMIT, 0, 100, 100, hash), -ENOENT);
	rdmem_image_stats(st, &s);
	CHECK_EQ(s.committed, 3 * RDMEM_IMAGE_MAX_UPLOADS);
	CHECK_EQ(s.done_evicted, 2 * RDMEM_IMAGE_MAX_UPLOADS);
	/* An upload in progress that moves is never evicted: with every record
	 * holding one (40,000 bytes: 1.2 s paid at the floor rate), busy. */
	rdmem_image_destroy(st);
	REQUIRE((st = store(60000)) != NULL);
	for (i = 0; i < RDMEM_IMAGE_MAX_UPLOADS; i++) {
		snprintf(name, sizeof(name), "part-%u.jpg", i);
		CHECK_EQ(chunk(st, 5000 + i, name, RDMEM_F_IMG_INIT, 0, 40000, sizeof(img), 0), 0);
	}
	CHECK_EQ(chunk(st, 9999, "one-more.jpg", flags, 0, 100, 100, hash), -EBUSY);
	rdmem_image_destroy(st);
	clear_dir();
}

static struct rdmem_image_store *stall_st;

/* Chunk [off, off + len) of upload id, a sizeof(img)-byte image. */
static int big_chunk(uint64_t id, unsigned flags, uint32_t off, uint32_t len)
{
	char name[32];

	snprintf(name, sizeof(name), "stall-%" PRIu64 ".jpg", id);
	return chunk(stall_st, id, name, flags, off, len, sizeof(img), 0);
}

/*
 * With every record in progress, a new upload takes the record of an upload
 * that stalled (moved less than the floor rate: 32 KiB buys 1 s), never of
 * one that moves. Before, a peer could start 64 uploads and keep them alive
 * by repeating a chunk: every other upload was refused busy.
 */
static void test_stalled_uploads_give_way(void)
{
	const unsigned max = RDMEM_IMAGE_MAX_UPLOADS;
	struct rdmem_image_stats s;
	unsigned i, ok = 0;

	REQUIRE((stall_st = store(60000)) != NULL);
	/* Half start with 40,000 bytes (1.2 s at the floor rate), half with 10. */
	for (i = 0; i < max; i++)
		ok += big_chunk(100 + i, RDMEM_F_IMG_INIT, 0, i < max / 2 ? 40000 : 10) == 0;
	CHECK_EQ(ok, max);
	usleep(50000); /* 10 bytes paid for 0.3 ms */
	/* A quarter repeat their first chunk (a retry: acknowledged, no new bytes). */
	for (i = max / 2, ok = 0; i < max * 3 / 4; i++)
		ok += big_chunk(100 + i, RDMEM_F_IMG_INIT, 0, 10) == 0;
	CHECK_EQ(ok, max / 4);
	/* First chunks that fail take nobody's record: longer than the image,
	 * or a one-chunk image whose hash is wrong. */
	CHECK_EQ(chunk(stall_st, 901, "stall-901.jpg", RDMEM_F_IMG_INIT, 0, 200, 100, 0), -E2BIG);
	CHECK_EQ(chunk(stall_st, 902, "stall-902.jpg", RDMEM_F_IMG_INIT | RDMEM_F_IMG_COMMIT, 0,
		       100, 100, 12345),
		 -EBADMSG);
	rdmem_image_stats(stall_st, &s);
	CHECK_EQ(s.active_evicted, 0);
	CHECK_EQ(dir_entries(), (int)max);
	/* New uploads take the stalled records, repeaters' and silent ones',
	 * never a mover's; with those gone, busy. */
	for (i = 0, ok = 0; i < max / 2; i++)
		ok += big_chunk(200 + i, RDMEM_F_IMG_INIT, 0, 40000) == 0;
	CHECK_EQ(ok, max / 2);
	CHECK_EQ(big_chunk(299, RDMEM_F_IMG_INIT, 0, 40000), -EBUSY);
	rdmem_image_stats(stall_st, &s);
	CHECK(s.active_evicted == max / 2 && s.active == max);
	for (i = 0, ok = 0; i < max; i++)
		ok += big_chunk(100 + i, 0, i < max / 2 ? 40000 : 10, 10) ==
		      (i < max / 2 ? 0 : -ENOENT);
	CHECK_EQ(ok, max);
	CHECK_EQ(dir_entries(), (int)max); /* the stalled uploads' temp files are gone */
	rdmem_image_destroy(stall_st);
	stall_st = NULL;
	clear_dir();
}

/*
 * A symlink planted at the temp name of an upload whose id the peer chose:
 * the server writes neither through it nor over its target, and the upload
 * goes on in a file of its own. Before, it truncated and wrote the target
 * with its own rights (a review's root server overwrote a 0600 file of
 * root's), then renamed the link to the final name.
 */
static void test_planted_symlink_not_followed(void)
{
	static const char victim_text[] = "not the server's to write\n";
	char victim[] = "/tmp/rdmem-test-image-victim-XXXXXX", link[600], got[64] = { 0 };
	uint64_t hash = rdmem_hash_update(RDMEM_HASH_INIT, img, sizeof(img));
	struct rdmem_image_store *st = store(10000);
	struct stat sb;
	int vfd;

	REQUIRE(st);
	vfd = mkstemp(victim);
	REQUIRE(vfd >= 0);
	REQUIRE(write(vfd, victim_text, sizeof(victim_text) - 1) == sizeof(victim_text) - 1);
	snprintf(link, sizeof(link), "%s/.pic.42.part", dir);
	REQUIRE(symlink(victim, link) == 0);
	CHECK_EQ(upload_prefix(st, 42, "pic", sizeof(img), sizeof(img)), 0);
	CHECK_EQ(chunk(st, 42, "pic", RDMEM_F_IMG_COMMIT, sizeof(img), 0, 0, hash), 0);
	CHECK(pread(vfd, got, sizeof(got) - 1, 0) == sizeof(victim_text) - 1 &&
	      strcmp(got, victim_text) == 0);
	CHECK(fstat(vfd, &sb) == 0 && sb.st_size == (off_t)(sizeof(victim_text) - 1));
	CHECK(file_equals("pic", img, sizeof(img)));
	snprintf(link, sizeof(link), "%s/pic", dir);
	CHECK(lstat(link, &sb) == 0 && S_ISREG(sb.st_mode)); /* a file, not the link */
	close(vfd);
	unlink(victim);
	rdmem_image_destroy(st);
	clear_dir();
}

/* A directory others can write, or another user's, is refused at start. */
static void test_shared_dir_refused(void)
{
	struct rdmem_image_store *st = NULL;

	REQUIRE(chmod(dir, 0770) == 0);
	CHECK_EQ(rdmem_image_create(dir, sizeof(img), 1000, &st), -EPERM);
	CHECK(chmod(dir, 01777) == 0);
	CHECK_EQ(rdmem_image_create(dir, sizeof(img), 1000, &st), -EPERM);
	CHECK(chmod(dir, 0700) == 0);
	if (geteuid() == 0) {
		CHECK(chown(dir, 1234, (gid_t)-1) == 0);
		CHECK_EQ(rdmem_image_create(dir, sizeof(img), 1000, &st), -EPERM);
		CHECK(chown(dir, 0, (gid_t)-1) == 0);
	}
	CHECK_EQ(rdmem_image_create(dir, sizeof(img), 1000, &st), 0);
	rdmem_image_destroy(st);
}

int main(void)
{
	size_t i;

	rdmem_log_init("test_image", 0);
	if (!mkdtemp(dir)) {
		check_skip("image tests", "cannot create a temp directory");
		return 0;
	}
	for (i = 0; i < sizeof(img); i++)
		img[i] = (uint8_t)(i * 7 + (i >> 9));
	RUN(test_upload_in_order);
	RUN(test_repeated_chunk_and_single_chunk);
	RUN(test_failures_leave_nothing);
	RUN(test_bad_names);
	RUN(test_timeout_and_stale);
	RUN(test_more_uploads_than_records);
	RUN(test_stalled_uploads_give_way);
	RUN(test_planted_symlink_not_followed);
	RUN(test_shared_dir_refused);
	rmdir(dir);
	return check_done();
}
