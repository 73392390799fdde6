/* test_opts_tls.c - the TLS flags of rdmem-server and rdmem-agent: in
 * --help, a cert without its key (and the like) refused at parse time
 * (exit 2), and files checked at start (exit 1): missing, not a regular
 * file, a key readable by others; each error names the flag. A FIFO at a
 * file's path is refused at once (it used to block the start until a writer
 * came), and a key owned by another user is refused (as root).
 * --tls-server-name empty or over 253 characters: refused (exit 2). */
#include <fcntl.h>
#include <sys/stat.h>

#include "tests/opts_check.h"
#include "tests/tmpdir.h"

static char dir[128], pem[160], key_ok[160], key_loose[160], fifo[160], key_other[160];

/* prog runs under wrap (a command prefix, or ""). */
static void expect_in(const char *wrap, const char *prog, const char *args, int status,
		      const char *want)
{
	char cmd[1024], out[8192];
	int st;

	snprintf(cmd, sizeof(cmd), "%s%s/%s %s", wrap, proc_bin(), prog, args);
	st = opts_run(cmd, out, sizeof(out));
	if (st != status || !strstr(out, want))
		fprintf(stderr, "  %s: exit %d, wanted %d and \"%s\" in:\n%.600s\n", cmd, st,
			status, want, out);
	CHECK_EQ(st, status);
	CHECK(strstr(out, want) != NULL);
}

static void expect(const char *prog, const char *args, int status, const char *want)
{
	expect_in("", prog, args, status, want);
}

static void put_file(const char *path, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);

	if (fd < 0 || write(fd, "x\n", 2) != 2)
		abort();
	close(fd);
	chmod(path, mode);
}

static void test_server_tls_flags(void)
{
	char a[1024];

	expect("rdmem-server", "--tls-cert /x.pem", 2, "--tls-cert needs --tls-key");
	expect("rdmem-server", "--tls-key /x.key", 2, "--tls-key needs --tls-cert");
	expect("rdmem-server", "--tls-ca /x.pem", 2, "--tls-ca needs --tls-cert and --tls-key");
	snprintf(a, sizeof(a), "-b 127.0.0.1 -p 1 --tls-cert /nonexistent.pem --tls-key %s",
		 key_ok);
	expect("rdmem-server", a, 1, "--tls-cert /nonexistent.pem: No such file or directory");
	snprintf(a, sizeof(a), "-b 127.0.0.1 -p 1 --tls-cert %s --tls-key %s", pem, key_loose);
	expect("rdmem-server", a, 1, "readable by others (mode 644); chmod 600 it");
	snprintf(a, sizeof(a), "-b 127.0.0.1 -p 1 --tls-cert %s --tls-key %s --tls-ca %s", pem,
		 key_ok, dir);
	expect("rdmem-server", a, 1, "--tls-ca");
	/* Readable, private, but no PEM inside: GnuTLS's refusal, naming both flags. */
	snprintf(a, sizeof(a), "-b 127.0.0.1 -p 1 --tls-cert %s --tls-key %s", pem, key_ok);
	expect("rdmem-server", a, 1, "--tls-cert");
}

/* Run under timeout(1): a start blocked on the FIFO is killed (exit 137), not
 * left to hang the suite. */
static void test_fifo_refused_at_once(void)
{
	char a[1024];

	snprintf(a, sizeof(a), "-b 127.0.0.1 -p 1 --tls-cert %s --tls-key %s", pem, fifo);
	expect_in("timeout -s KILL 10 ", "rdmem-server", a, 1, "--tls-key");
	expect_in("timeout -s KILL 10 ", "rdmem-server", a, 1, "not a regular file");
	snprintf(a, sizeof(a), "-b 127.0.0.1 -p 1 --tls-cert %s --tls-key %s --tls-ca %s", pem,
		 key_ok, fifo);
	expect_in("timeout -s KILL 10 ", "rdmem-server", a, 1, "not a regular file");
}

/* Whoever owns the key chose it and can swap it: only this user or root. */
static void test_key_of_another_user_refused(void)
{
	char a[1024];

	if (geteuid() != 0) {
		check_skip("key of another user", "needs root to give a file to another uid");
		return;
	}
	snprintf(a, sizeof(a), "-b 127.0.0.1 -p 1 --tls-cert %s --tls-key %s", pem, key_other);
	expect("rdmem-server", a, 1, "--tls-key");
	expect("rdmem-server", a, 1, "owned by uid 64123");
}

/* Server with --tls-cert pem and --tls-key key (or --tls-ca ca): exit 1 with want. */
static void expect_key(const char *key, const char *ca, const char *want)
{
	char a[1024];

	snprintf(a, sizeof(a), "-b 127.0.0.1 -p 1 --tls-cert %s --tls-key %s%s%s", pem, key,
		 ca ? " --tls-ca " : "", ca ? ca : "");
	expect("rdmem-server", a, 1, want);
}

/*
 * Whoever can change what a path names chooses the key (or the CA, or the
 * secret: the same code). A review pointed a root server's --secret-file,
 * through a link of its own in a directory it could write, at a root file
 * of 0600 whose bytes a Debian package ships. Every step of the path must
 * be this user's or root's and writable by nobody else (a sticky directory
 * aside), and a link must be ours or root's; a key has one name.
 */
static void test_path_must_be_trusted(void)
{
	char open_dir[200], key_in_open[240], their_link[240], hard[200], ca_loose[200];
	char theirs[200], key_in_theirs[240], ours[200], nested[240];

	if (geteuid() != 0) {
		check_skip("path trust", "needs root to give files to another uid");
		return;
	}
	snprintf(open_dir, sizeof(open_dir), "%s/open", dir);
	snprintf(key_in_open, sizeof(key_in_open), "%s/k.key", open_dir);
	REQUIRE(mkdir(open_dir, 0700) == 0 && chmod(open_dir, 0777) == 0);
	put_file(key_in_open, 0600);
	expect_key(key_in_open, NULL, "is writable by others (mode 0777) and not sticky");
	/* Sticky (as /tmp): fine for our own file, not for another user's link. */
	REQUIRE(chmod(open_dir, 01777) == 0);
	expect_key(key_in_open, NULL, "cannot load");
	snprintf(their_link, sizeof(their_link), "%s/their.key", open_dir);
	REQUIRE(symlink(key_ok, their_link) == 0 && lchown(their_link, 64123, 64123) == 0);
	expect_key(their_link, NULL, "is owned by uid 64123");
	/* Our own link: followed, and the file it names checked. */
	snprintf(ours, sizeof(ours), "%s/our.key", dir);
	REQUIRE(symlink(key_ok, ours) == 0);
	expect_key(ours, NULL, "cannot load");
	/* A second name of a private file (another user may link root's). */
	snprintf(hard, sizeof(hard), "%s/hard.key", dir);
	REQUIRE(link(key_ok, hard) == 0);
	expect_key(hard, NULL, "has 2 names");
	REQUIRE(unlink(hard) == 0);
	/* A directory of another user's on the way. */
	snprintf(theirs, sizeof(theirs), "%s/theirs", dir);
	snprintf(key_in_theirs, sizeof(key_in_theirs), "%s/k.key", theirs);
	REQUIRE(mkdir(theirs, 0755) == 0);
	put_file(key_in_theirs, 0600);
	REQUIRE(chown(theirs, 64123, 64123) == 0);
	expect_key(key_in_theirs, NULL, "is owned by uid 64123");
	/* ... also where our own link leads: the path as resolved is walked too. */
	snprintf(ours, sizeof(ours), "%s/to-theirs.key", dir);
	REQUIRE(symlink(key_in_theirs, ours) == 0);
	expect_key(ours, NULL, "is owned by uid 64123");
	/* ... and a link met on the way there: ours leads into their directory,
	 * where their link leads back to a private file of ours (a review's
	 * case: neither the path as given nor as resolved shows their link). */
	snprintf(nested, sizeof(nested), "%s/cfg", theirs);
	snprintf(their_link, sizeof(their_link), "%s/cfg/s", theirs);
	REQUIRE(mkdir(nested, 0755) == 0 && chown(nested, 64123, 64123) == 0);
	REQUIRE(symlink(key_ok, their_link) == 0 && lchown(their_link, 64123, 64123) == 0);
	snprintf(ours, sizeof(ours), "%s/via-theirs.key", dir);
	REQUIRE(symlink(their_link, ours) == 0);
	expect_key(ours, NULL, "is owned by uid 64123");
	/* A relative link with ".." that stays in our tree: followed. */
	snprintf(ours, sizeof(ours), "%s/rel.key", dir);
	REQUIRE(symlink("open/../ok.key", ours) == 0);
	expect_key(ours, NULL, "cannot load");
	/* A CA others may write: they would choose whom we trust. */
	snprintf(ca_loose, sizeof(ca_loose), "%s/ca-loose.pem", dir);
	put_file(ca_loose, 0664);
	expect_key(key_ok, ca_loose, "--tls-ca");
	expect_key(key_ok, ca_loose, "writable by others (mode 664)");
}

static void test_agent_tls_flags(void)
{
	char a[1024], name[255];

	expect("rdmem-agent", "-s 127.0.0.1 --tls-cert /x.pem --tls-key /x.key", 2,
	       "need --tls-ca");
	expect("rdmem-agent", "-s 127.0.0.1 --tls-server-name x", 2, "need --tls-ca");
	expect("rdmem-agent", "-s 127.0.0.1 --tls-ca /x.pem --tls-cert /x.pem", 2,
	       "--tls-cert needs --tls-key");
	/* A name the check would not use as given: refused, not truncated or dropped. */
	expect("rdmem-agent", "-s 127.0.0.1 --tls-ca /x.pem --tls-server-name ''", 2,
	       "--tls-server-name needs 1 to 253 characters");
	memset(name, 'a', 254);
	name[254] = '\0';
	snprintf(a, sizeof(a), "-s 127.0.0.1 --tls-ca /x.pem --tls-server-name %s", name);
	expect("rdmem-agent", a, 2, "--tls-server-name needs 1 to 253 characters");
	snprintf(a, sizeof(a),
		 "-s 127.0.0.1 --fabric tcp --shm-name /rdmem-opts-tls-%d "
		 "--tls-ca /nonexistent.pem",
		 (int)getpid());
	expect("rdmem-agent", a, 1, "--tls-ca /nonexistent.pem: No such file or directory");
	snprintf(a, sizeof(a),
		 "-s 127.0.0.1 --fabric tcp --shm-name /rdmem-opts-tls-%d "
		 "--tls-ca %s --tls-cert %s --tls-key %s",
		 (int)getpid(), pem, pem, key_loose);
	expect("rdmem-agent", a, 1, "--tls-key");
}

static void test_tls_help(void)
{
	char cmd[512], out[16384];

	snprintf(cmd, sizeof(cmd), "%s/rdmem-server --help", proc_bin());
	CHECK_EQ(opts_run(cmd, out, sizeof(out)), 0);
	CHECK(opts_in_help(out, "--tls-cert") && opts_in_help(out, "--tls-key") &&
	      opts_in_help(out, "--tls-ca"));
	snprintf(cmd, sizeof(cmd), "%s/rdmem-agent --help", proc_bin());
	CHECK_EQ(opts_run(cmd, out, sizeof(out)), 0);
	CHECK(opts_in_help(out, "--tls-cert") && opts_in_help(out, "--tls-key") &&
	      opts_in_help(out, "--tls-ca") && opts_in_help(out, "--tls-server-name"));
}

int main(void)
{
	char cmd[256];

	(void)opts_check;
	snprintf(dir, sizeof(dir), "%s/rdmem-opts-tls-%d", test_tmpdir(), (int)getpid());
	mkdir(dir, 0700);
	snprintf(pem, sizeof(pem), "%s/c.pem", dir);
	snprintf(key_ok, sizeof(key_ok), "%s/ok.key", dir);
	snprintf(key_loose, sizeof(key_loose), "%s/loose.key", dir);
	put_file(pem, 0644);
	put_file(key_ok, 0600);
	put_file(key_loose, 0644);
	snprintf(fifo, sizeof(fifo), "%s/fifo.key", dir);
	snprintf(key_other, sizeof(key_other), "%s/other.key", dir);
	if (mkfifo(fifo, 0600) < 0)
		abort();
	put_file(key_other, 0600);
	if (geteuid() == 0 && chown(key_other, 64123, 64123) < 0)
		abort();
	RUN(test_server_tls_flags);
	RUN(test_fifo_refused_at_once);
	RUN(test_key_of_another_user_refused);
	RUN(test_path_must_be_trusted);
	RUN(test_agent_tls_flags);
	RUN(test_tls_help);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "  could not remove %s\n", dir);
	return check_done();
}
