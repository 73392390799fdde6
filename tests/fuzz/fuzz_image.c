/* fuzz_image.c - the image-upload state machine (server/image.c) under
 * sequences of hostile chunks: fuzzed upload ids, names, flags, offsets,
 * totals, hashes and data, against a real store in a temp directory (on
 * /dev/shm when it can, so fsync costs nothing).
 *
 * A shadow of each upload id (free, active or committed; its name; the bytes
 * it accepted) is kept from the results, and after every chunk:
 *  - the result is one of the documented ones;
 *  - a final file appears only from a call that reports a commit, and then
 *    holds exactly the bytes accepted for that upload, whose hash the commit
 *    named;
 *  - the directory holds exactly the temp files of the active uploads and the
 *    committed files, and nothing is ever written outside it.
 * After the store is destroyed no temp file is left.
 *
 * Input: byte 0 picks max_image; then ops: one byte (7 mod 8: expire every
 * upload, or with bit 3 run the idle scan with a clock reading taken before
 * the last chunk, which must expire nothing; else a chunk: id, name, flags,
 * offset, total, hash and data, each either raw or derived from the shadow,
 * so commits with the right hash happen).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rdmem/content.h"
#include "rdmem/wire.h"
#include "server/image.h"
#include "tests/fuzz/fuzz.h"

#define IDS	  8
#define MAX_FINAL 64
#define MAX_OPS	  64

enum { SH_FREE, SH_ACTIVE, SH_DONE };

struct shadow {
	int state;
	char name[RDMEM_IMAGE_NAME_MAX + 1];
	uint8_t *bytes; /* accepted so far, in order */
	uint32_t len, cap;
	uint32_t last_off; /* of the last accepted chunk, to aim repeats */
};

static char parent[64], dir[96];
static struct shadow sh[IDS];
static char finals[MAX_FINAL][RDMEM_IMAGE_NAME_MAX + 1];
static unsigned nfinals;
static uint64_t tick_ns; /* a clock reading taken just before the last chunk */

static const uint64_t ids[IDS] = { 1, 2, 3, 4, 5, 6, 0, UINT64_MAX };
static const uint64_t max_images[] = { 0, 16, 100, 4096, 1u << 20 };
static const char *const names[] = {
	"a",   "image.bin", "x y",  "a.1.part",	   "a..b",	"..",	   ".",	   ".hidden",
	"a/b", "../escape", "/abs", "back\\slash", "tab\there", "del\x7f", "\xff", "",
};

static void sh_reset(struct shadow *s)
{
	free(s->bytes);
	memset(s, 0, sizeof(*s));
}

static void sh_append(struct shadow *s, const uint8_t *p, uint32_t n)
{
	if (!n)
		return;
	if (s->len + (uint64_t)n > s->cap) {
		uint32_t cap = s->cap ? s->cap : 256;

		while (cap < s->len + (uint64_t)n)
			cap *= 2;
		s->bytes = realloc(s->bytes, cap);
		FUZZ_CHECK(s->bytes);
		s->cap = cap;
	}
	memcpy(s->bytes + s->len, p, n);
	s->len += n;
}

static void temp_name(char *out, size_t cap, const char *name, uint64_t id)
{
	snprintf(out, cap, ".%s.%llu.part", name, (unsigned long long)id);
}

static int exists(const char *name)
{
	char p[512];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return lstat(p, &st) == 0;
}

/* The whole content of dir/name, or NULL; *len set. */
static uint8_t *slurp(const char *name, size_t *len)
{
	char p[512];
	struct stat st;
	uint8_t *buf;
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	fd = open(p, O_RDONLY | O_NOFOLLOW);
	if (fd < 0)
		return NULL;
	FUZZ_CHECK(fstat(fd, &st) == 0 && S_ISREG(st.st_mode));
	buf = malloc((size_t)st.st_size + 1);
	FUZZ_CHECK(buf);
	FUZZ_CHECK(read(fd, buf, (size_t)st.st_size) == st.st_size);
	close(fd);
	*len = (size_t)st.st_size;
	return buf;
}

static int is_final(const char *name)
{
	unsigned i;

	for (i = 0; i < nfinals; i++)
		if (!strcmp(finals[i], name))
			return 1;
	return 0;
}

static int is_active_temp(const char *name)
{
	char t[RDMEM_IMAGE_NAME_MAX + 40];
	unsigned i;

	for (i = 0; i < IDS; i++) {
		if (sh[i].state != SH_ACTIVE)
			continue;
		temp_name(t, sizeof(t), sh[i].name, ids[i]);
		if (!strcmp(t, name))
			return 1;
	}
	return 0;
}

/* The directory holds the active uploads' temp files and committed files, nothing else. */
static void check_dirs(int after_destroy)
{
	unsigned active = 0, temps = 0, i;
	struct dirent *e;
	DIR *d;

	for (i = 0; i < IDS; i++)
		active += sh[i].state == SH_ACTIVE;
	d = opendir(dir);
	FUZZ_CHECK(d);
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (e->d_name[0] == '.') {
			FUZZ_CHECK(!after_destroy);
			FUZZ_CHECK(is_active_temp(e->d_name));
			temps++;
		} else {
			FUZZ_CHECK(is_final(e->d_name));
		}
	}
	closedir(d);
	FUZZ_CHECK(temps == (after_destroy ? 0 : active));
	if (!after_destroy)
		return;
	/* Nothing landed next to the image directory (checked once per input: it is slow). */
	d = opendir(parent);
	FUZZ_CHECK(d);
	while ((e = readdir(d)))
		FUZZ_CHECK(!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
			   !strcmp(e->d_name, "img"));
	closedir(d);
}

static void chunk(struct rdmem_image_store *st, struct fz *in)
{
	unsigned k = fz_u8(in) % IDS, sel = fz_u8(in);
	struct shadow *s = &sh[k];
	struct rdmem_image_chunk c;
	struct rdmem_image_ack ack;
	uint8_t name[256], *data;
	int rc;

	memset(&c, 0, sizeof(c));
	c.upload_id = ids[k];
	/* Names: the table (good and bad), the upload's own, 200/201 bytes, or raw bytes. */
	if (sel < RDMEM_ARRAY_SIZE(names)) {
		c.name_len = (uint32_t)strlen(names[sel]);
		memcpy(name, names[sel], c.name_len);
	} else if (sel < 128 && s->state != SH_FREE) {
		c.name_len = (uint32_t)strlen(s->name);
		memcpy(name, s->name, c.name_len);
	} else if (sel < 136) {
		c.name_len = RDMEM_IMAGE_NAME_MAX + (sel & 1);
		memset(name, 'n', c.name_len);
	} else {
		c.name_len = fz_u8(in);
		fz_copy(in, name, c.name_len);
	}
	c.name = name;
	c.flags = fz_u8(in) & 7; /* INIT, COMMIT, and one unknown flag */
	switch (fz_u8(in) % 3) {
	case 0:
		c.offset = s->len;
		break;
	case 1:
		c.offset = s->last_off;
		break;
	default:
		c.offset = fz_u32(in);
	}
	c.total = fz_u8(in) % 2 ? fz_u8(in) : fz_u32(in);
	c.len = fz_u8(in) % 65;
	data = malloc(c.len ? c.len : 1); /* exact size: ASan sees reads past the chunk */
	FUZZ_CHECK(data);
	fz_copy(in, data, c.len);
	c.data = data;
	switch (fz_u8(in) % 3) {
	case 0:
		c.hash = rdmem_hash_update(rdmem_hash_update(RDMEM_HASH_INIT, s->bytes, s->len),
					   data, c.len);
		break;
	case 1:
		c.hash = rdmem_hash_update(RDMEM_HASH_INIT, s->bytes, s->len);
		break;
	default:
		c.hash = fz_u64(in);
	}

	/* The server's tick reads its clock before it takes the store's lock: a
	 * reading this old may reach rdmem_image_expire() after this chunk. */
	tick_ns = rdmem_now_ns();
	rc = rdmem_image_chunk(st, &c, &ack);
	FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ENOENT || rc == -E2BIG || rc == -EBADMSG ||
		   rc == -EBUSY || rc == -EIO || rc == -ENOSPC);
	FUZZ_CHECK(!ack.committed || rc == 0);
	if (rc == 0) {
		FUZZ_CHECK(rdmem_image_name_ok(name, c.name_len));
		FUZZ_CHECK(!(c.flags & ~(unsigned)(RDMEM_F_IMG_INIT | RDMEM_F_IMG_COMMIT)));
		if (s->state == SH_FREE) {
			/* Only an INIT at offset 0 starts an upload. */
			FUZZ_CHECK((c.flags & RDMEM_F_IMG_INIT) && c.offset == 0);
			s->state = SH_ACTIVE;
			memcpy(s->name, name, c.name_len);
			s->name[c.name_len] = '\0';
		}
		FUZZ_CHECK(c.name_len == strlen(s->name) && !memcmp(name, s->name, c.name_len));
		if (s->state == SH_ACTIVE && c.offset == s->len) {
			sh_append(s, data, c.len);
			s->last_off = c.offset;
		}
		FUZZ_CHECK(ack.received == s->len);
		if (ack.committed) {
			uint8_t *file;
			size_t flen = 0;

			FUZZ_CHECK(s->state == SH_ACTIVE && (c.flags & RDMEM_F_IMG_COMMIT));
			FUZZ_CHECK(c.hash == rdmem_hash_update(RDMEM_HASH_INIT, s->bytes, s->len));
			file = slurp(s->name, &flen);
			FUZZ_CHECK(file && flen == s->len &&
				   (!flen || !memcmp(file, s->bytes, flen)));
			free(file);
			FUZZ_CHECK(nfinals < MAX_FINAL);
			if (!is_final(s->name))
				snprintf(finals[nfinals++], sizeof(finals[0]), "%s", s->name);
			s->state = SH_DONE;
		} else if (s->state == SH_DONE) {
			/* A retried committing chunk is acknowledged, nothing more. */
			FUZZ_CHECK(c.flags & RDMEM_F_IMG_COMMIT);
		}
	} else if (s->state == SH_ACTIVE) {
		char t[RDMEM_IMAGE_NAME_MAX + 40];

		/* Refused: either aborted (temp file gone) or left alone. */
		temp_name(t, sizeof(t), s->name, ids[k]);
		if (!exists(t))
			sh_reset(s);
	}
	free(data);
	check_dirs(0);
}

static void clean_dir(void)
{
	struct dirent *e;
	DIR *d = opendir(dir);
	int dfd;

	FUZZ_CHECK(d);
	dfd = dirfd(d);
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			unlinkat(dfd, e->d_name, 0);
	closedir(d);
}

static void cleanup(void)
{
	clean_dir();
	rmdir(dir);
	rmdir(parent);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";

	(void)argc;
	(void)argv;
	fz_quiet();
	/* rdmem-fuzz-<pid>-*: scripts/fuzz.sh removes those of a harness that crashed. */
	snprintf(parent, sizeof(parent), "%s/rdmem-fuzz-%d-image.XXXXXX", base, (int)getpid());
	FUZZ_CHECK(mkdtemp(parent));
	snprintf(dir, sizeof(dir), "%s/img", parent);
	FUZZ_CHECK(mkdir(dir, 0700) == 0);
	atexit(cleanup);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz in = fz_init(data, size);
	struct rdmem_image_store *st;
	unsigned i, ops = 0;

	FUZZ_CHECK(rdmem_image_create(dir, max_images[fz_u8(&in) % RDMEM_ARRAY_SIZE(max_images)],
				      60000, &st) == 0);
	while (!fz_empty(&in) && ops++ < MAX_OPS) {
		uint8_t op = fz_u8(&in);

		if (op % 8 == 7 && op & 8) {
			/* A tick whose clock reading predates the last chunk: nothing is idle. */
			struct rdmem_image_stats a, b;

			rdmem_image_stats(st, &a);
			FUZZ_CHECK(rdmem_image_expire(st, tick_ns) == 0);
			rdmem_image_stats(st, &b);
			FUZZ_CHECK(b.timed_out == a.timed_out && b.active == a.active);
			check_dirs(0);
			continue;
		}
		if (op % 8 == 7) {
			/* Every upload idles out: active ones aborted, committed ones forgotten. */
			rdmem_image_expire(st, rdmem_now_ns() + 120000000000ull);
			for (i = 0; i < IDS; i++)
				sh_reset(&sh[i]);
			check_dirs(0);
			continue;
		}
		chunk(st, &in);
	}
	rdmem_image_destroy(st);
	check_dirs(1);
	for (i = 0; i < IDS; i++)
		sh_reset(&sh[i]);
	nfinals = 0;
	clean_dir();
	return 0;
}
