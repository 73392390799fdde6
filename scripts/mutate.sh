#!/usr/bin/env bash
# mutate.sh - the suite must catch known bugs. Copies the tree (tracked and
# untracked, not ignored, files) to a temporary directory, builds it, runs
# the tests named below once unmutated (they must pass, or a "kill" would
# prove nothing), then applies each mutation ALONE: a one-line perl
# substitution of a known bug, rebuilds what it touches, runs its small
# fixed set of relevant tests (each stops at its first failed case:
# RDMEM_TEST_FAIL_FAST, tests/check.h), and puts the file back. A mutation
# the tests do not fail "survived": that is a missing test. A mutation whose
# text no longer matches the source fails too (update it here with the code).
#
#   scripts/mutate.sh            every mutation (CI: 92 took 1,023 s on 2 vCPUs
#                                before fail-fast, 772 s after; each one's
#                                time is tabled)
#   scripts/mutate.sh NAME...    only these
#
# Prints one "ok - mutation NAME: killed by ..." / "not ok - mutation NAME:
# survived" line each, a table, and "N passed, N failed". Exits 1 unless
# every mutation was killed.
set -u
unset mutant # set per mutant run only (run_for)
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc 2>/dev/null || echo 2)
per_test_timeout=${RDMEM_MUTATE_TIMEOUT:-90}

# name | file | perl substitution (applied with -0: may span lines) | tests
# A test "tsan:NAME" or "asan:NAME" is tests/unit/NAME.c built alone with
# ThreadSanitizer or AddressSanitizer, with the sources after "+" if any
# ("asan:test_objpool+server/objpool.c"): an ordering bug is invisible to an
# x86 run, and an out-of-bounds read of a few bytes seldom changes a result.
mutations=(
	"bounds-payload|server/session.c|s/rdmem_desc_payload_len\(req\) > area - req->data_off/rdmem_desc_payload_len(req) > area/|test_rdma_server"
	"request-read-in-place|server/session.c|s/\tif \(rdmem_session_snapshot\(s, &req, &call\) < 0\) \{/\tcall.key = s->req + req.data_off;\n\tcall.val = call.key + req.key_len;\n\tif (0 \&\& rdmem_session_snapshot(s, &req, &call) < 0) {/|test_slot_race"
	"lease-fits-ignored|server/listener.c|s/\tif \(\(ret = rdmem_listener_lease_fits\(cfg\)\) < 0\) \{/\tif (0 \&\& (ret = rdmem_listener_lease_fits(cfg)) < 0) {/|test_flags"
	"value-opaque-all|server/service.h|s/return op == RDMEM_OP_KV_PUT \S\S op == RDMEM_OP_ECHO;/return op != 0;/|test_slot_race"
	"ring-full-waits|libclient/call.c|s/\t\tif \(call_mark_no_entry\(a, s\) == 0\)/\t\tif (0 \&\& call_mark_no_entry(a, s) == 0)/|test_ring_hostile"
	"image-done-kept|server/image.c|s/return \(u = img_oldest_done\(st\)\) \? u : img_stalled\(st, now\);/return (u = 0 ? img_oldest_done(st) : NULL) ? u : img_stalled(st, now);/|test_image"
	"image-stalled-kept|server/image.c|s/if \(u->state == UPLOAD_ACTIVE && u->paid_ns < now &&/if (0 \&\& u->state == UPLOAD_ACTIVE \&\& u->paid_ns < now \&\&/|test_image"
	"image-progress-unpaid|server/image.c|s/img_pay\(u, c->len, now\);/img_pay(u, 0, now);/|test_image"
	"image-evict-before-first-chunk|server/image.c|s/\tret = img_apply\(st, &fresh, c, now, ack\);/\timg_take_record(st, rec);\n\tret = img_apply(st, \&fresh, c, now, ack);/|test_image"
	"dedup-lru-only|server/dedup.c|s/\t\treturn -1;\n/\t\treturn -1;\n\treturn 3;\n/|test_dedup"
	"dedup-grace-ignored|server/dedup.c|s/\t\treturn 1;\n\treturn a->addr == mine/\t\treturn 3;\n\treturn a->addr == mine/|test_dedup"
	"dedup-own-ignored|server/dedup.c|s/return a->addr == mine /return (const void *)a == mine /|test_dedup"
	"dedup-empty-not-first|server/dedup.c|s/memory_order_relaxed\)\)\n\t\treturn 0;/memory_order_relaxed))\n\t\treturn 3;/|test_dedup"
	"tcp-out-budget-ignored|server/tcp_loop.c|s/return c->srv->out_held > c->srv->cfg.out_budget \? TCP_OUT_LOW : TCP_OUT_HIGH;/return TCP_OUT_HIGH;/|test_tcp_out_budget"
	"tcp-out-held-leaks|server/tcp_loop.c|s/\ts->out_held -= c->held;\n//|test_tcp_out_budget"
	"tcp-out-low-always|server/tcp_loop.c|s/return c->srv->out_held > c->srv->cfg.out_budget \? TCP_OUT_LOW : TCP_OUT_HIGH;/return TCP_OUT_LOW;/|test_tcp_out_budget"
	"tcp-out-held-never-shrinks|server/tcp_loop.c|s/\ts->out_held = s->out_held - c->held \+ held;\n\tc->held = held;/\tif (held > c->held) {\n\t\ts->out_held = s->out_held - c->held + held;\n\t\tc->held = held;\n\t}/|test_tcp_out_budget"
	"tcp-rest-trim-off|server/tcp_loop.c|s/\tc->trimmed_at_ns = c->last_ns;\n\toutbuf_trim\(&c->out\[0\], 0\);/\tc->trimmed_at_ns = c->last_ns;\n\treturn;\n\toutbuf_trim(\&c->out[0], 0);/|test_tcp_out_budget"
	"tcp-stop-drops-held-frames|server/tcp_loop.c|s/if \(!c->refused && c->rlen &&/if (!c->closing \&\& c->rlen \&\&/|test_tcp_out_budget"
	"shm-impostor-trusted|fabric/emu_cm.c|s/\tif \(cr.uid == 0 \x7c\x7c cr.uid == geteuid\(\)\)/\tif (1 \x7c\x7c cr.uid == geteuid())/|shm_impostor.sh"
	"image-part-follows-links|server/image.c|s/const int flags = O_WRONLY \x7c O_CREAT \x7c O_EXCL \x7c O_NOFOLLOW \x7c O_CLOEXEC;/const int flags = O_WRONLY \x7c O_CREAT \x7c O_TRUNC \x7c O_CLOEXEC;/|test_image"
	"conf-file-takes-a-fifo|common/conf_file.c|s/if \(!S_ISREG\(st->st_mode\)\) \{/if (0) {/|test_opts_tls test_secret"
	"conf-file-owner-unchecked|common/conf_file.c|s/return uid == 0 \x7c\x7c uid == geteuid\(\);/return uid != (uid_t)-2 \x7c\x7c 1;/|test_opts_tls test_secret"
	"conf-link-owner-unchecked|common/conf_file.c|s/\tif \(!rdmem_uid_trusted\(st->st_uid\)\) \{\n\t\trdmem_err\(\x22%s %s: %s is owned/\tif (!S_ISLNK(st->st_mode) \&\& !rdmem_uid_trusted(st->st_uid)) {\n\t\trdmem_err(\x22%s %s: %s is owned/|test_opts_tls"
	"conf-links-not-walked|common/conf_file.c|s/\t\tif \(!S_ISLNK\(st.st_mode\)\)\n\t\t\tcontinue;/\t\tif (1)\n\t\t\tcontinue;/|test_opts_tls"
	"resp-socket-dir-unchecked|agent/resp.c|s/\(rc = resp_unix_dir_private\(path, &r->unix_at\)\) < 0\)/(rc = resp_unix_dir_private(path, \&r->unix_at)) < -4096)/|resp.sh"
	"tcp-half-sent-withdrawn|agent/tcp_actor.c|s/\t\ttears = rdmem_tcp_client_withdraw_tears\(a->cli, t\);/\t\ttears = 0;/|test_tcp_held"
	"tcp-held-for-good|agent/tcp_actor.c|s/if \(tears \&\& now - call->deadline_ns < RDMEM_TCP_HELD_MAX_NS\)/if (tears)/|test_tcp_held"
	"door-take-no-rest|agent/frontdoor_door.c|s/quiet_until\[c\] = now \+ RDMEM_DOOR_TAKE_GAP_NS;/quiet_until[c] = now;/|test_ring_hostile"
	"tcp-withdraw-drain-kills|tcp/client.c|s/ && c->recv_busy &&\n\t       c->recv_direct;/;/|test_tcp_withdraw"
	"unix-at-bound-by-path|agent/unix_at.c|s/\"\/proc\/self\/fd\/%d\/%s\", at->dirfd,\n\t\t     at->name\);/\"%.0d%s\", at->dirfd, path);/|test_unix_at"
	"image-dir-unchecked|server/image.c|s/\tstruct stat sb;\n\n\tif \(fstat\(dirfd, &sb\) < 0\) \{/\tstruct stat sb;\n\n\treturn 0;\n\tif (fstat(dirfd, \&sb) < 0) {/|test_image"
	"tcp-stop-turn-unbounded|server/tcp_frames.c|s/\t\treturn now > c->srv->stop_deadline_ns;/\t\treturn 0;/|test_tcp_turn"
	"tcp-stop-first-frame-served|server/tcp_frames.c|s/if \(\(frames \x7c\x7c c->srv->stopping\) &&/if (frames \&\&/|test_tcp_turn"
	"tcp-refused-auth-read-on|server/tcp_admit.c|s/rdmem_tcp_conn_refuse\(c\);\n\treturn ret;/rdmem_tcp_conn_close_after_flush(c);\n\treturn ret;/|test_secret"
	"tcp-rbuf-shrunk-each-frame|server/tcp_frames.c|s/\t\tret = conn_fit_rbuf\(c\);/\t\trdmem_tcp_conn_rbuf_shrink(c), ret = conn_fit_rbuf(c);/|test_tcp_out_budget"
	"tcp-rbuf-kept-at-rest|server/tcp_loop.c|s/\t\tsrv_cancel\(c->srv, tcp_ud\(c, UD_RECV\)\);/\t\t;/|test_tcp_out_budget"
	"tcp-rbuf-trim-recv-not-rearmed|server/tcp_loop.c|s/\t\t\trdmem_tcp_conn_rbuf_shrink\(c\);\n\t\t\tconn_kick\(c\);/\t\t\trdmem_tcp_conn_rbuf_shrink(c);/|test_tcp_out_budget"
	"hook-timeout-ignored|server/hook.c|s/\tif \(j->killed /\treturn;\n\tif (j->killed /|test_hook"
	"kv-limit-ignored|server/kv.c|s/if \(!kv->max_bytes /if (1 + !kv->max_bytes /|test_kv"
	"kv-replace-charged-whole|server/kv.c|s/\(old \? \(int64_t\)rdmem_kv_charge\(old->klen, old->vlen\) : 0\)/0/|test_kv"
	"tcp-turn-unbounded|server/tcp_conn.h|s/(#define TCP_TURN_NS\s+)200000ull/\$1(200000ull << 30)/|test_server_tcp"
	"bounds-object-id|server/objpool.c|s/ref->object_id >= p->nobjs/ref->object_id > p->nobjs/|test_objpool asan:test_objpool+server/objpool.c"
	"bounds-value-cap|include/rdmem/wire.h|s/d->val_len > max_value\)/d->val_len > max_value + 1)/|test_desc test_server_tcp"
	"release-barrier|shm/ring.h|s/(rdmem_ring_entry_word\(pos, client, slot\),\s*)memory_order_release/\$1memory_order_relaxed/|tsan:test_ring_threads"
	"generation-check|server/objpool.c|s/o->ready_ns && ref->generation == o->generation/o->ready_ns/|test_objpool test_rdma_server"
	"resp-payload-offset|agent/rdma.c|s/r->l->resp \+ \(uint64_t\)i \* r->l->w.resp_stride \+ RDMEM_DESC_SIZE/r->l->resp + (uint64_t)i * r->l->w.resp_stride/|test_agent_paths"
	"path-swap|agent/path.c|s/return RDMEM_PATH_LAZY;/return RDMEM_PATH_EAGER;/|test_path test_agent_paths"
	"pool-pressure-ignored|agent/path.c|s/st->objpool_used_pct > RDMEM_PRESSURE_OBJPOOL_PCT/0/|test_exhaustion"
	"route-first-server|agent/router.c|s/if \(t->n == 1\)\n\t\treturn 0;/if (1)\n\t\treturn 0;/|test_multi_server"
	"mget-merge-order|agent/router_fan.c|s/rdmem_blob_array_set\(&w, f->order\[f->parts\[i\].first \+ j\]/rdmem_blob_array_set(&w, f->parts[i].first + j/|test_multi_server"
	"reclaim-skipped|agent/rdma.c|s/\trdmem_rdma_reclaim_read\(r, &s->ref\);\n(\trdmem_rdma_finish\(r, i, RDMEM_PATH_LAZY\);)/\t(void)rdmem_rdma_reclaim_read;\n\$1/|test_agent_paths"
	"lazy-lease-ignored|agent/rdma.c|s/!rdmem_rdma_lease_held\(r, s\)/!rdmem_rdma_lease_held(r, s) \&\& 0/|test_lazy_lease"
	"lease-from-call-start|agent/rdma.c|s/RDMEM_MAX\(call->start_ns, r->turn\.look_ns\)/call->start_ns/|test_lazy_lease"
	"cutoff-misattributed|agent/frontdoor_ring.c|s/if \(!own \&\& !rdmem_frontdoor_attributable\(fd, c\)\)/if (!own \&\& !rdmem_frontdoor_attributable(fd, c) \&\& 0)/|test_client_cutoff"
	"busy-no-tcp-retry|agent/session.c|s/rdmem_agent_read_only\(call->req.op\)\) \{/rdmem_agent_read_only(call->req.op) \&\& 0) {/|test_exhaustion"
	"wire-field-unconverted|include/rdmem/wire.h|s/\tRDMEM_LE32_SWAP\(d->val_len\);\n//|test_wire_swap"
	"wake-skipped|shm/ring.h|s/if \(atomic_load_explicit\(&r->ctl->sleeping, memory_order_relaxed\)\)\n\t\trdmem_ring_bell/if (0)\n\t\trdmem_ring_bell/|test_ring test_frontdoor"
	"timeout-not-held|agent/rdma.c|s/if \(s->from_area \&\& s->post_no > r->done_no\)/if (0 \&\& s->from_area)/|test_slot_release"
	"expire-bound-not-relowered|agent/rdma.c|s/\t\tif \(s->owner == RDMEM_OWN_CALL \&\& !rdmem_rdma_expire_slot\(r, s, now_ns\)\)\n\t\t\tr->expire_at = RDMEM_MIN\(r->expire_at, s->call->deadline_ns\);/\t\tif (s->owner == RDMEM_OWN_CALL)\n\t\t\t(void)rdmem_rdma_expire_slot(r, s, now_ns);/|test_slot_release"
	"ttl-scan-wraps|server/objpool.c|s/if \(now_ns > o->ready_ns \+ p->ttl_ns\)/if (now_ns - o->ready_ns > p->ttl_ns)/|test_objpool test_lazy_lease"
	"siphash-tail-first-byte-lost|server/siphash.h|s/\t\tlast \x7c= p\[0\];/\t\t;/|test_siphash"
	"kv-hash-key-fixed|server/kv.c|s/\trandombytes_buf\(kv->hash_key, sizeof\(kv->hash_key\)\);\n//|test_kv"
	"lane-never-polled|server/worker.c|s/\tif \(n \&\& rdmem_lane_note\(/\tif (0 \&\& n \&\& rdmem_lane_note(/|test_worker test_many_sessions"
	"lane-polls-a-batch|server/worker.c|s/rdmem_session_poll\(s, 1, now\)/rdmem_session_poll(s, w->ws->cfg->batch_budget, now)/|test_worker"
	"lane-told-served-only|server/worker.c|s/\(uint32_t\)n, rdmem_session_backlog\(s\)\)\)/(uint32_t)n, 0))/|test_worker"
	"lane-member-holds|server/group.c|s/rdmem_lane_has\(v->lane, s\) \? 0 : yield_us/yield_us/|test_worker"
	"group-drop-unseen|server/worker.c|s/\trdmem_group_dropped\(&w->group, i, w->nsess\);[^\n]*\n//|test_worker"
	"group-idle-joins|server/group.c|s/int join = rdmem_group_has_work\(v->sess\[i\]\);/int join = 1;/|test_worker"
	"group-no-turns|server/group.c|s/g->cursor = g->members \? last \+ 1 : g->cursor;/g->cursor = g->members ? 0 * last : g->cursor;/|test_worker"
	"group-off-holds-stay|server/group.c|s/\trdmem_group_go_all\(v, now\);\n\tg->serving/\t(void)v;\n\t(void)now;\n\tg->serving/|test_worker"
	"group-moved-unfollowed|server/group.c|s/\t\telse if \(g->member\[k\] == last\)\n\t\t\tg->member\[k\] = i;/\t\telse if (g->member[k] == last)\n\t\t\tg->member[k] = last;/|test_worker"
	"group-empty-waits|server/group.c|s/if \(!rdmem_group_live\(g\)\) \{/if (0 \&\& !rdmem_group_live(g)) {/|test_worker"
	"group-holders-not-busy|server/group.c|s/\(holders \S\S rdmem_session_holding\(s, now\)\)/(holders \&\& rdmem_session_holding(s, now) \&\& 0)/|test_worker"
	"group-sleep-keeps-group|server/worker.c|s/\trdmem_group_idle\(&w->group, &view, now\);/\t(void)view;/|test_worker"
	"group-idle-holds-stay|server/group.c|s/\trdmem_group_go_all\(v, now\);\n\tg->members = 0;/\t(void)v;\n\t(void)now;\n\tg->members = 0;/|test_worker"
	"group-switch-ends-holds|server/group.c|s/\tg->members = 0;\n\tfor \(j = 0;/\trdmem_group_mark(g, v, 0, now);\n\tg->members = 0;\n\tfor (j = 0;/|test_worker"
	"group-turn-untold|server/group.c|s/\trdmem_group_mark\(g, v, 0, now\);\n\tg->told = 0;/\tg->told = 0;/|test_worker"
	"group-dry-keeps-quarter|server/group.c|s/\t\trdmem_group_tell\(g, v, now\);\n\tg->slice_end = now;/\t\trdmem_group_tell(g, v, now);\n\tg->slice_end = now + (uint64_t)g->slice_us * 250;/|test_worker"
	"group-dry-untold|server/group.c|s/\tif \(others\)\n\t\trdmem_group_tell\(g, v, now\);\n//|test_worker"
	"turn-told-every-round|server/session.c|s/if \(s->turn_err \S\S \(hold_us \? holding : !holding\)\)/if (s->turn_err + 0 * holding)/|test_group_yield"
	"turn-hold-ignored|agent/link.h|s/\*until = v->look_ns \+ \(uint64_t\)hold_us \* 1000;/*until = 0;/|test_turn_word test_group_yield"
	"turn-torn-trusted|include/rdmem/layout.h|s/if \(\(v >> 32\) != \(v & 0xffffffffu\)\)\n\t\treturn -1;/if (0)\n\t\treturn -1;/|test_turn_word"
	"group-cut-told-for-holders|server/group.c|s/rdmem_group_others\(g, v, 0, now\)/rdmem_group_others(g, v, 1, now)/|test_worker"
	"group-quarter-told-once|server/group.c|s/ now\)\);\n\t\}\n\trdmem_group_tell\(g, v, now\);/ now));\n\t\trdmem_group_tell(g, v, now);\n\t}/|test_worker"
	"group-quarter-every-round|server/group.c|s/\tif \(!g->told\) \{/\tif (1) {/|test_worker"
	"group-members-counted-twice|server/group.c|s/if \(rdmem_session_group\(s\) == g->serving\)/if (0 \&\& rdmem_session_group(s) == g->serving)/|test_worker"
	"turn-older-taken|agent/link.h|s/\(int16_t\)\(uint16_t\)\(seq - v->seq\) <= 0/seq == v->seq/|test_turn_word"
	"turn-wake-unacked|agent/rdma.c|s/d->hint = \(uint16_t\)r->st.turn_wakes;/d->hint = 0;/|test_group_yield"
	"turn-wake-as-reply|agent/rdma.c|s/if \(wc->imm == RDMEM_TURN_IMM\)\n/if (0)\n/|test_group_yield"
	"turn-wake-no-credit|server/session.c|s/if \(!hold_us && rdmem_turn_may_wake\(\(uint16_t\)s->wakes, s->wakes_acked\)\) \{/if (!hold_us) {/|test_turn_wake"
	"turn-ack-never-taken|server/session.c|s/\t\trdmem_session_take_ack\(s, wc\[i\]\.imm\);/\t\t(void)rdmem_session_take_ack;/|test_turn_wake"
	"turn-ack-at-serve|server/session.c|s/\t\trdmem_session_take_ack\(s, wc\[i\]\.imm\);\n//; s/\tst = rdmem_session_check_req\(&req, slot/\trdmem_session_take_ack(s, slot);\n\tst = rdmem_session_check_req(&req, slot/|test_turn_wake"
	"turn-ack-trusts-hint|include/rdmem/layout.h|s/return hint == sent \? hint : acked;/(void)sent, (void)acked;\n\treturn hint;/|test_turn_word"
	"group-dry-lane-waits|server/worker.c|s/if \(!work \&\& w->lane.n\)/if (0 \&\& !work \&\& w->lane.n)/|test_worker"
	"lane-burst-stays|server/lane.c|s/\t\tif \(served \+ left > 1\)\n\t\t\trdmem_lane_remove/\t\tif (0 \&\& served + left > 1)\n\t\t\trdmem_lane_remove/|test_lane"
	"lane-counts-served|server/lane.c|s/served == 1 \&\& !left \&\&/served == 1 \&\&/|test_lane"
	"lane-full-no-way|server/lane.c|s/\t\tif \(l->idle\[k\] >= RDMEM_LANE_GIVE_WAY \&\&/\t\tif (0 \&\&/|test_lane"
	"lane-gives-way-at-once|server/lane.h|s/#define RDMEM_LANE_GIVE_WAY 8/#define RDMEM_LANE_GIVE_WAY 1/|test_lane"
	"event-check-skipped|server/worker.c|s/\t\tif \(now - w->checked_at > RDMEM_WORKER_CHECK_NS\)/\t\tif (0 \&\& now - w->checked_at > RDMEM_WORKER_CHECK_NS)/|test_session_reap"
	"expire-bound-not-lowered|agent/rdma.c|s/\tr->expire_at = RDMEM_MIN\(r->expire_at, call->deadline_ns\);\n//|test_slot_release"
	"shed-never-asked|agent/rdma.c|s/\t\trdmem_pin_ask_shed\(r->l->pin\);\n//|test_pin_budget"
	"read-wait-blocks-queue|agent/rdma.c|s/\t\tif \(ret < 0 && ret != -EBUSY\)\n\t\t\treturn ret;/\t\tif (ret == -EBUSY)\n\t\t\treturn 0;\n\t\tif (ret < 0)\n\t\t\treturn ret;/|test_pin_budget"
	"pin-limit-ignored|agent/pin.c|s/rdmem_pin_add\(&b->total, bytes, b->max_total\)/rdmem_pin_add(\&b->total, bytes, UINT64_MAX)/|test_pin test_pin_budget"
	"area-kept|agent/frontdoor_ring.c|s/\tif \(fd->released\)\n/\tif (0 \&\& fd->released)\n/|test_agent_paths"
	"never-inline|agent/session.c|s/if \(!s->fd_holds \&\& !atomic_load_explicit\(&s->actor_wants/if (0 \&\& !atomic_load_explicit(\&s->actor_wants/|test_inline_calls"
	"asleep-not-woken|agent/session.c|s/\tif \(ring\)\n\t\trdmem_queue_ring\(&s->in\);/\tif (0)\n\t\trdmem_queue_ring(\&s->in);/|test_inline_calls"
	"front-door-registers|agent/session.c|s/rdmem_rdma_may_register\(s->rdma, 0\);/rdmem_rdma_may_register(s->rdma, 1);/|test_inline_calls"
	"shm-exports-part-of-a-file|fabric/emu.c|s/\tif \(!shmfab_whole_alloc\(a, m->addr, len\)\) \{/\tif (0 \&\& !shmfab_whole_alloc(a, m->addr, len)) {/|test_fabric_shm"
	"shm-read-only-unsealed|fabric/emu.c|s/\tif \(\(rc = shmfab_seal_export\(c, a, access\)\) < 0\)/\tif (0 \&\& (rc = shmfab_seal_export(c, a, access)) < 0)/|test_fabric_shm"
	"tcp-bind-no-wait|server/tcp_loop.c|s/errno != EADDRINUSE \x7c\x7c rdmem_now_ns\(\) >= until\)/errno != EADDRINUSE \x7c\x7c rdmem_now_ns() + RDMEM_TCP_BIND_WAIT_MS * 1000000ull >= until)/|test_server_tcp"
	"shm-takes-hugetlb|fabric/emu_cm.c|s/ \x7c\x7c fs.f_type != TMPFS_MAGIC\)/)/|test_fabric_shm_forged"
	"front-door-drops-link|agent/session.c|s/\tif \(s->fd_holds\) \{\n\t\tif \(!s->link_err\)/\tif (0) {\n\t\tif (!s->link_err)/|test_inline_calls"
	"shm-peer-bytes-uncapped|fabric/emu_cm.c|s/ \&\& total <= c->max_peer_bytes\)/)/|test_fabric_shm_forged"
	"server-maps-any-peer|server/listener.c|s/\.max_peer_bytes = rdmem_max_resp_region\(\),/.max_peer_bytes = 0,/|test_fabric_shm_forged"
	"server-maps-many-regions|server/listener.c|s/\t\t\t\t    .max_peer_regions = 1 \};/\t\t\t\t    .max_peer_regions = 0 };/|test_fabric_shm_forged"
	"shm-remote-range-unchecked|fabric/emu.c|s/\tif \(wr->remote_addr < r->addr \x7c\x7c off > r->len \x7c\x7c total > r->len - off\)/\tif (0)/|test_session_fence"
)

want=("$@")
selected() { # NAME
	[ ${#want[@]} -eq 0 ] && return 0
	local w
	for w in "${want[@]}"; do [ "$w" = "$1" ] && return 0; done
	return 1
}

work=$(mktemp -d /tmp/rdmem-mutate.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 0755 "$work" # shm_impostor.sh runs a server of the copy as another user
(cd "$root" && git ls-files -z --cached --others --exclude-standard |
	tar --null -T - -cf - 2>/dev/null) | tar -C "$work" -xf - || {
	echo "not ok - mutate: cannot copy the tree to $work"
	exit 1
}
cd "$work" || exit 1
rm -rf build

# The make targets and commands for a list of tests.
targets_of() { # TESTS...
	local t
	# The CLI too: test_frontdoor's CLI case skips without it, and CI
	# refuses a skip it does not expect. scale_bench: test_many_sessions
	# drives its sessions with it.
	printf "%s\n" build/rdmem-server build/rdmem-agent build/rdmem build/tests/scale_bench
	for t in "$@"; do
		case $t in
		tsan:* | asan:* | *.sh) ;; # built apart; a script needs the daemons above
		*) echo "build/tests/$t" ;;
		esac
	done
}
# Sanitized program path for "tsan:NAME+src..." / "asan:NAME+src...".
san_prog() { local spec=${1#*:}; echo "build/${1%%:*}/${spec%%+*}"; }
build_san() { # tsan:NAME[+SRC...] | asan:NAME[+SRC...]
	local kind=${1%%:*} spec=${1#*:} srcs flag
	IFS=+ read -ra srcs <<<"$spec"
	flag=$([ "$kind" = tsan ] && echo "-fsanitize=thread -Wno-tsan" || echo "-fsanitize=address,undefined")
	mkdir -p "build/$kind"
	# shellcheck disable=SC2086 # flag is two words on purpose
	cc -std=c11 -D_GNU_SOURCE -O1 -g $flag -fno-omit-frame-pointer -Iinclude -I. -Itests \
		"tests/unit/${srcs[0]}.c" "${srcs[@]:1}" -o "$(san_prog "$1")" -pthread
}
build_for() { # TESTS...
	local t targets
	mapfile -t targets < <(targets_of "$@")
	make -j"$jobs" "${targets[@]}" >>build.log 2>&1 || return 1
	for t in "$@"; do
		case $t in tsan:* | asan:*) build_san "$t" >>build.log 2>&1 || return 1 ;; esac
	done
}
run_for() { # TESTS... ; 0 when they all pass (mutant=1: stop at the first failed case)
	local t progs=()
	for t in "$@"; do
		case $t in
		tsan:* | asan:*) progs+=("$(san_prog "$t")") ;;
		*.sh) progs+=("tests/integration/$t") ;;
		*) progs+=("build/tests/$t") ;;
		esac
	done
	RDMEM_BIN=$work/build RDMEM_TEST_TIMEOUT=$per_test_timeout \
		env ${mutant:+RDMEM_TEST_FAIL_FAST=1} scripts/run-tests.sh "${progs[@]}" >run.log 2>&1
}

all_tests=()
for m in "${mutations[@]}"; do
	IFS='|' read -r name _ _ tests <<<"$m"
	selected "$name" || continue
	read -ra ts <<<"$tests"
	all_tests+=("${ts[@]}")
done
if [ ${#all_tests[@]} -eq 0 ]; then
	echo "not ok - mutate: no mutation named ${want[*]}"
	exit 1
fi
mapfile -t all_tests < <(printf '%s\n' "${all_tests[@]}" | sort -u)

t0=$SECONDS
echo "# building the unmutated copy in $work"
if ! build_for "${all_tests[@]}"; then
	tail -20 build.log
	echo "not ok - mutate: the unmutated copy does not build"
	exit 1
fi
echo "# the unmutated tests: ${all_tests[*]}"
if ! run_for "${all_tests[@]}"; then
	grep -E '^not ok|passed, ' run.log
	echo "not ok - mutate: the tests fail without any mutation: kills would prove nothing"
	exit 1
fi

pass=0 fail=0 table=()
for m in "${mutations[@]}"; do
	IFS='|' read -r name file expr tests <<<"$m"
	selected "$name" || continue
	read -ra ts <<<"$tests"
	m0=$SECONDS
	cp -p "$file" "$file.orig"
	perl -0pi -e "$expr" "$file"
	if cmp -s "$file" "$file.orig"; then
		verdict="stale"
		echo "not ok - mutation $name: its pattern no longer matches $file (update scripts/mutate.sh)"
	elif ! build_for "${ts[@]}"; then
		# A mutation that cannot compile proves nothing about the tests.
		verdict="no-build"
		echo "not ok - mutation $name: the mutated tree does not build"
		tail -5 build.log | sed 's/^/#   /'
	elif mutant=1 run_for "${ts[@]}"; then
		verdict="SURVIVED"
		echo "not ok - mutation $name ($file): survived $tests"
	else
		verdict="killed"
		echo "ok - mutation $name ($file): killed by $(grep -E '^not ok' run.log | head -1 | cut -c1-100)"
	fi
	mv "$file.orig" "$file"
	touch "$file" # newer than the mutated objects: the next build redoes them
	if [ "$verdict" = killed ]; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
	table+=("$(printf '%-30s %-9s %4d s  %s' "$name" "$verdict" $((SECONDS - m0)) "$tests")")
done

echo "# mutation                       result    time   tests"
printf '#   %s\n' "${table[@]}"
echo "# mutate took $((SECONDS - t0)) s"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
