/* test_admin.c - who may steer the agent (docs/architecture.md, "Who may
 * steer the agent"): agent-ctl (force every call to TCP, simulate RDMA down)
 * is for root, the agent's own user and members of --admin-group, judged by
 * the credentials the kernel gives the agent at attach, not by anything the
 * client says. Any client the socket lets in may still call and read stats.
 *
 * The clients here are forked children that drop to uid 2002 (not nobody: the client refuses the overflow uid 65534) with
 * the group the socket is shared with as their primary or a supplementary
 * group, then attach and try agent-ctl, agent-stats and a ping.
 */
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "e2e.h"
#include "tmpdir.h"

#define NOBODY	  2002	/* not the overflow uid 65534, which the client refuses */
#define DOOR_GID  65534 /* nogroup: the socket's group, so nobody can attach */
#define OTHER_GID 1	/* daemon: a primary group that grants nothing */

static char runtime_dir[64];

/* What a client saw, encoded in its exit status: ctl rc, stats rc, ping rc. */
struct outcome {
	int ctl, stats, ping;
};

/* Child: become uid with primary gid and one supplementary group (or none). */
static int drop_to(uid_t uid, gid_t gid, const gid_t *extra)
{
	return setgroups(extra ? 1 : 0, extra) || setgid(gid) || setuid(uid) ? -1 : 0;
}

static int code_of(int rc)
{
	return rc == 0 ? 0 : rc == -EACCES ? 1 : 2;
}

/* Attaches as (uid, gid, extra) in a child and reports what each op returned. */
static int client_as(struct e2e *e, uid_t uid, gid_t gid, const gid_t *extra, struct outcome *out)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		char *text = NULL;
		uint32_t len = 0;
		rdmem_t *h = NULL;
		int ctl, stats, ping;

		if (drop_to(uid, gid, extra) || rdmem_open(e->shm, &h))
			_exit(100);
		ctl = rdmem_agent_ctl(h, "simulate-rdma-down off", &text, &len, NULL);
		free(text);
		text = NULL;
		stats = rdmem_agent_stats(h, 0, &text, &len, NULL);
		free(text);
		ping = rdmem_ping(h, NULL);
		rdmem_close(h);
		_exit(code_of(ctl) * 9 + code_of(stats) * 3 + code_of(ping));
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status) >= 27)
		return -1;
	out->ctl = WEXITSTATUS(status) / 9;
	out->stats = WEXITSTATUS(status) / 3 % 3;
	out->ping = WEXITSTATUS(status) % 3;
	return 0;
}

static int start(struct e2e *e, const char *admin_group)
{
	if (e2e_init(e, "shm") || e2e_server(e, "shm", NULL))
		return -1;
	if (admin_group)
		return e2e_agent(e, "--shm-group", "nogroup", "--admin-group", admin_group, NULL);
	return e2e_agent(e, "--shm-group", "nogroup", NULL);
}

/* Without --admin-group: another user may call and read stats, not steer. */
static void test_other_user_cannot_steer(void)
{
	struct outcome o;
	long long denied0;
	struct e2e e;

	REQUIRE(start(&e, NULL) == 0);
	denied0 = e2e_stat(&e, "frontdoor.ctl_denied");
	REQUIRE(client_as(&e, NOBODY, DOOR_GID, NULL, &o) == 0);
	printf("# nobody: agent-ctl %s, agent-stats %s, ping %s\n",
	       o.ctl == 1 ? "-EACCES"
	       : o.ctl	  ? "failed"
			  : "ok",
	       o.stats ? "failed" : "ok", o.ping ? "failed" : "ok");
	CHECK_EQ(o.ctl, 1); /* -EACCES: before, any client could */
	CHECK_EQ(o.stats, 0);
	CHECK_EQ(o.ping, 0);
	CHECK_EQ(e2e_stat(&e, "frontdoor.ctl_denied"), denied0 + 1);
	/* The agent's own user (root here) still may. */
	CHECK_EQ(e2e_ctl(&e, "simulate-rdma-down off"), 0);
	e2e_fini(&e);
}

/* --admin-group G: members by primary or supplementary group may steer. */
static void test_admin_group_members_steer(void)
{
	gid_t extra = DOOR_GID;
	struct outcome o;
	struct e2e e;

	REQUIRE(start(&e, "nogroup") == 0);
	REQUIRE(client_as(&e, NOBODY, DOOR_GID, NULL, &o) == 0);
	CHECK_EQ(o.ctl, 0);
	CHECK_EQ(o.ping, 0);
	/* A supplementary member (SO_PEERGROUPS), primary group daemon. */
	REQUIRE(client_as(&e, NOBODY, OTHER_GID, &extra, &o) == 0);
	CHECK_EQ(o.ctl, 0);
	CHECK_EQ(o.stats, 0);
	CHECK_EQ(e2e_stat(&e, "frontdoor.ctl_denied"), 0);
	e2e_fini(&e);
}

/* --admin-group names another group: a member of the door's group only is refused. */
static void test_admin_group_is_not_the_door_group(void)
{
	gid_t extra = DOOR_GID;
	struct outcome o;
	struct e2e e;

	REQUIRE(start(&e, "daemon") == 0);
	REQUIRE(client_as(&e, NOBODY, DOOR_GID, NULL, &o) == 0);
	CHECK_EQ(o.ctl, 1);
	CHECK_EQ(o.ping, 0);
	REQUIRE(client_as(&e, NOBODY, OTHER_GID, &extra, &o) == 0);
	CHECK_EQ(o.ctl, 0); /* primary group daemon, the socket by its supplementary group */
	e2e_fini(&e);
}

int main(void)
{
	int rc;

	if (geteuid() != 0 || !getgrnam("nogroup") || !getgrnam("daemon")) {
		printf("ok - test_admin # SKIP needs root and the groups nogroup and daemon "
		       "(to run clients as another user)\n");
		return 0;
	}
	/* A private runtime directory: the agent creates it 0750 root:nogroup. */
	snprintf(runtime_dir, sizeof(runtime_dir), "%s/rdmem-admin-%d", test_tmpdir(),
		 (int)getpid());
	setenv("RDMEM_RUNTIME_DIR", runtime_dir, 1);
	rdmem_log_init("test_admin", 0);
	RUN(test_other_user_cannot_steer);
	RUN(test_admin_group_members_steer);
	RUN(test_admin_group_is_not_the_door_group);
	rc = check_done();
	rmdir(runtime_dir);
	return rc;
}
