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
	snprintf(dir, sizeof(dir), "/tmp/rdmem-opts-tls-%d", (int)getpid());
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
	RUN(test_agent_tls_flags);
	RUN(test_tls_help);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "  could not remove %s\n", dir);
	return check_done();
}
