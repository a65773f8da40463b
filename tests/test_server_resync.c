/* SPDX-License-Identifier: MIT */
/*
 * A client owed a full update gets one of its own (server_stream.c,
 * weft__server_resync()): a console that skipped updates, or one that
 * joins a stream under way, no longer restarts the stream of every other
 * client (at 1,000,000 tasks a full update streams for seconds, to every
 * console, each time one fell behind).
 *
 * A real runtime of 20,000 idle tasks (their full update is streamed:
 * a first record and a backlog) under a load of short tasks, a server
 * with a 1 MiB bound per client, three clients of updates on one stream
 * (the default interval, no filter) through a real unix socket, and a
 * subscriber of events in the process (events flow only while one
 * listens): A reads all along on a thread of its own; B stops reading
 * until it has skipped updates, then reads again; C joins meanwhile.  A
 * takes one full update, its first, and skips nothing; B takes a second
 * full update and C its first, each naming every task and carrying the
 * warning raised while B skipped (a task that held its worker 30 ms),
 * once.
 *
 * Nor is one made for nobody: a resync's backlog whose clients all left
 * stops, and a resync asked for a client that took another full update
 * meanwhile makes none; and a client that joins a stream, leaves the
 * last of one, or pauses its events restarts no other client's stream
 * (each case's comment has its scenario).  Each case runs in a process
 * of its own (main()).
 */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_helpers.h"
#include "server_helpers.h"

#include "server_internal.h"
#include "server_state_internal.h"
#include "weft/probe.h"
#include "weft/wire.h"

#define IDLE 20000

/* What a client saw: full updates, updates skipped, and the distinct
 * idle tasks named since its last full update (ids kept sorted as they
 * come: a task named twice counts once). */
struct saw {
	unsigned fulls;
	uint64_t skipped;
	size_t named;
	uint64_t *ids;
	size_t nids, cap;
	/* Warnings by seq; a copy not marked history after the first (a
	 * console lists it twice). */
	uint64_t wseq[256];
	size_t nw;
	unsigned plain_again;
	_Atomic unsigned blocker_warned;
	/* Records since its last full update that named tasks with no
	 * stats: its backlog's (a pass's records have stats). */
	unsigned task_records;
};

static void saw_add(struct saw *s, uint64_t id)
{
	size_t lo = 0, hi = s->nids;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (s->ids[mid] < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < s->nids && s->ids[lo] == id)
		return;
	if (s->nids == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 1024;
		s->ids = realloc(s->ids, s->cap * sizeof(*s->ids));
		assert_non_null(s->ids);
	}
	memmove(s->ids + lo + 1, s->ids + lo, (s->nids - lo) * sizeof(*s->ids));
	s->ids[lo] = id;
	s->nids++;
	s->named = s->nids;
}

static void see(struct saw *s, const Weft__V1__Frame *f)
{
	const Weft__V1__Update *u;

	if (f->body_case != WEFT__V1__FRAME__BODY_UPDATE)
		return;
	u = f->update;
	if (u->updates_skipped > s->skipped)
		s->skipped = u->updates_skipped;
	if (u->full) {
		s->fulls++;
		s->named = s->nids = 0;
		s->task_records = 0;
	}
	s->task_records += u->n_tasks && !u->full && !u->stats;
	for (size_t i = 0; i < u->n_tasks; i++)
		if (!strcmp(u->tasks[i]->name, "idle"))
			saw_add(s, u->tasks[i]->id);
	for (size_t i = 0; i < u->n_warnings; i++) {
		const Weft__V1__Warning *w = u->warnings[i];
		bool again = false;

		for (size_t j = 0; j < s->nw; j++)
			again |= s->wseq[j] == w->seq;
		if (again) {
			s->plain_again += !w->history;
			continue;
		}
		if (s->nw < sizeof(s->wseq) / sizeof(s->wseq[0]))
			s->wseq[s->nw++] = w->seq;
		if (!strcmp(w->task_name, "blocker"))
			atomic_fetch_add(&s->blocker_warned, 1);
	}
}

/* Reads @c until every idle task was named since its last full update
 * and @fulls full updates came, or @ms.  Returns whether they were. */
static bool read_until(struct tclient *c, struct saw *s, unsigned fulls, int ms)
{
	struct timespec t0, t;
	Weft__V1__Frame *f;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if (s->fulls >= fulls && s->named >= IDLE)
			return true;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 +
			    (t.tv_nsec - t0.tv_nsec) / 1000000 >
		    ms)
			return false;
		f = tc_next(c, 1000);
		if (!f)
			continue;
		see(s, f);
		weft_wire_frame_free(f);
	}
}

/* Client A: reads on its own thread until told to stop. */
struct reader {
	struct tclient *c;
	struct saw s;
	_Atomic bool stop;
	_Atomic bool named_all;
};

static void *reader_main(void *arg)
{
	struct reader *r = arg;

	while (!atomic_load(&r->stop)) {
		Weft__V1__Frame *f = tc_next(r->c, 200);

		if (!f)
			continue;
		see(&r->s, f);
		weft_wire_frame_free(f);
		if (r->s.named >= IDLE)
			atomic_store(&r->named_all, true);
	}
	return NULL;
}

/* Changes to send: rounds of 50 short tasks, 10 ms apart (under a MB
 * a second of task records, well within the collector's pace, and
 * within what A's thread reads under TSan on a loaded machine). */
struct load {
	weft_runtime_t *rt;
	_Atomic bool stop;
};

static void *load_main(void *arg)
{
	struct load *l = arg;

	while (!atomic_load(&l->stop)) {
		workload(l->rt, 50, 2);
		usleep(10000);
	}
	return NULL;
}

/* Reads @c until @fulls full updates came, or @ms.  Returns whether. */
static bool read_fulls(struct tclient *c, struct saw *s, unsigned fulls, int ms)
{
	for (int waited = 0; s->fulls < fulls && waited < ms; waited += 100) {
		Weft__V1__Frame *f = tc_next(c, 100);

		if (!f)
			continue;
		see(s, f);
		weft_wire_frame_free(f);
	}
	return s->fulls >= fulls;
}

static void no_events(void *ctx, const weft_event_t *ev, size_t n)
{
	(void)ctx;
	(void)ev;
	(void)n;
}

/* A runtime of IDLE idle tasks, and an events subscriber in the process
 * (events flow only while one listens). */
static weft_runtime_t *idle_runtime(weft_probe_sub_t **ev_sub)
{
	weft_runtime_t *rt;

	xdg_make();
	weft_notify_init(&idle_note);
	rt = rt_with_server();
	for (int i = 0; i < IDLE; i++) {
		weft_spawn_t sp = { .poll = idle_poll,
				    .state = &(struct idle){ 0 },
				    .size = sizeof(struct idle),
				    .name = "idle" };

		assert_int_equal(weft_spawn_with(rt, &sp, NULL), 0);
	}
	assert_int_equal(
		weft_probe_subscribe(
			&(weft_probe_sub_opts_t){ .events = true,
						  .on_events = no_events },
			ev_sub),
		0);
	return rt;
}

static void idle_runtime_destroy(weft_runtime_t *rt, weft_probe_sub_t *ev_sub)
{
	weft_probe_unsubscribe(ev_sub);
	weft_notify_waiters(&idle_note);
	weft_runtime_destroy(rt);
	weft_notify_fini(&idle_note);
	xdg_remove();
}

/*
 * The start both A-and-B cases share: IDLE idle tasks, a server on
 * @sock (in $XDG_RUNTIME_DIR) whose slow clients are never kicked, A
 * and B subscribed to updates together (one stream, one full update).
 * A is read by a thread of its own all along; B, with a small receive
 * buffer, takes its first full update whole and then stops reading.
 * Returns once A has every task and B has skipped updates under a load
 * of changes (running until ab_stop_load()).
 */
struct ab {
	weft_runtime_t *rt;
	weft_probe_sub_t *ev_sub;
	weft_server_t *srv;
	char path[300];
	struct tclient a, b;
	struct reader ra;
	struct saw sb;
	struct load load;
	pthread_t th, lt;
};

static void ab_start(struct ab *f, const char *sock)
{
	weft_server_opts_t o = { .workers = 2,
				 .client_buf_max = 1u << 20,
				 .slow_kick_ms = 60000,
				 .stall_ms = 60000 };
	weft_server_stats_t st;
	int small = 4096;

	memset(f, 0, sizeof(*f));
	f->ra.c = &f->a;
	f->rt = idle_runtime(&f->ev_sub);
	snprintf(f->path, sizeof(f->path), "%s/%s", xdg, sock);
	o.unix_path = f->path;
	assert_int_equal(weft__server_create(&o, &f->srv), 0);
	tc_open(&f->a, f->path);
	tc_expect_header(&f->a);
	tc_open(&f->b, f->path);
	setsockopt(f->b.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	tc_expect_header(&f->b);
	tc_subscribe(&f->a, true, false);
	tc_subscribe(&f->b, true, false);
	assert_int_equal(pthread_create(&f->th, NULL, reader_main, &f->ra), 0);
	assert_true(read_until(&f->b, &f->sb, 1, 30000));
	for (int i = 0; i < 3000 && !atomic_load(&f->ra.named_all); i++)
		usleep(10000);
	assert_true(atomic_load(&f->ra.named_all));

	/* Changes to send, until B has skipped updates (30 s at most). */
	f->load.rt = f->rt;
	assert_int_equal(pthread_create(&f->lt, NULL, load_main, &f->load), 0);
	for (int i = 0; i < 3000; i++) {
		weft__server_stats(f->srv, &st);
		if (st.updates_skipped)
			break;
		usleep(10000);
	}
	assert_true(st.updates_skipped > 0);
}

static void ab_stop_load(struct ab *f)
{
	atomic_store(&f->load.stop, true);
	pthread_join(f->lt, NULL);
}

/* A's reader stopped (after what it has read), and its stats. */
static void ab_stop_reader(struct ab *f)
{
	atomic_store(&f->ra.stop, true);
	pthread_join(f->th, NULL);
}

/* A new client on @f's server, subscribed to updates. */
static void ab_join(struct ab *f, struct tclient *c)
{
	tc_open(c, f->path);
	tc_expect_header(c);
	tc_subscribe(c, true, false);
}

/* Everything ab_start() made, B and A closed if still open (fd >= 0). */
static void ab_end(struct ab *f)
{
	free(f->ra.s.ids);
	free(f->sb.ids);
	tc_close(&f->a);
	if (f->b.fd >= 0)
		tc_close(&f->b);
	weft__server_destroy(f->srv);
	idle_runtime_destroy(f->rt, f->ev_sub);
}

/*
 * A task whose one poll holds its worker for 30 ms of its own CPU time: a
 * long-poll warning (WEFT_LONG_POLL, 10 ms by default).  CPU time, not
 * wall time: on a loaded machine a wall-clock spin is mostly off the
 * CPU, and the probe rightly blames no task for that.
 */
static long cpu_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec * 1000000000L + t.tv_nsec;
}

static weft_poll_t blocker_poll(void *arg, weft_cx_t *cx)
{
	long t0 = cpu_ns();

	(void)arg;
	(void)cx;
	while (cpu_ns() - t0 < 30000000L)
		;
	return WEFT_READY;
}

static void test_resync_is_the_skippers_alone(void **state)
{
	struct tclient c;
	struct saw sc = { 0 };
	weft_server_stats_t st;
	struct ab f;
	bool b_named, c_named;

	(void)state;
	ab_start(&f, "resync.sock");
	/* A warning while B skips: B must have it after its resync. */
	{
		weft_join_t *j;
		int n = 0;

		assert_int_equal(weft_spawn_named(f.rt, "blocker", blocker_poll,
						  &n, &j),
				 0);
		assert_int_equal(weft_join_wait(j, NULL), 0);
		weft_join_drop(j);
		for (int i = 0;
		     i < 3000 && !atomic_load(&f.ra.s.blocker_warned); i++)
			usleep(10000);
		assert_true(atomic_load(&f.ra.s.blocker_warned) > 0);
	}

	/* C joins the stream under way: a full update of its own. */
	ab_join(&f, &c);
	c_named = read_until(&c, &sc, 1, 30000);
	/* B reads again: a full update of its own, every task named. */
	b_named = read_until(&f.b, &f.sb, 2, 30000);

	ab_stop_load(&f);
	/* A's frames of the while (a full update sent it would be there). */
	usleep(500 * 1000);
	ab_stop_reader(&f);
	weft__server_stats(f.srv, &st);
	print_message("A: %u full, %llu skipped; B: %u full, %zu named since; "
		      "C: %u full, %zu named; server: %llu skipped, %llu "
		      "resyncs\n",
		      f.ra.s.fulls, (unsigned long long)f.ra.s.skipped,
		      f.sb.fulls, f.sb.named, sc.fulls, sc.named,
		      (unsigned long long)st.updates_skipped,
		      (unsigned long long)st.resyncs);
	assert_true(c_named);
	assert_true(b_named);
	/*
	 * A takes its first full update and no other, unless it skipped
	 * itself (its thread starved on a loaded machine): then one for
	 * each update it skipped at most, never B's or C's.
	 */
	if (f.ra.s.skipped)
		print_message("A skipped %llu updates itself\n",
			      (unsigned long long)f.ra.s.skipped);
	assert_true(f.ra.s.fulls >= 1);
	assert_true(f.ra.s.fulls - 1 <= f.ra.s.skipped);
	assert_true(sc.fulls >= 1 && sc.fulls - 1 <= sc.skipped);
	assert_true(f.sb.skipped > 0);
	/* Every client has the warning once, and no plain copy twice. */
	assert_true(atomic_load(&f.sb.blocker_warned) > 0);
	assert_true(atomic_load(&sc.blocker_warned) > 0);
	assert_int_equal(f.ra.s.plain_again, 0);
	assert_int_equal(f.sb.plain_again, 0);
	assert_int_equal(sc.plain_again, 0);

	free(sc.ids);
	tc_close(&c);
	ab_end(&f);
}

/*
 * A resync's backlog whose clients all left stops: B skips, takes its
 * resync's full record and stops reading, so that the backlog waits for
 * it; C joins meanwhile (its resync waits for that backlog's end); B
 * closes.  The server makes no record of B's backlog after that: the
 * records it makes are C's backlog, every one of which C takes (before,
 * B's backlog ran to its end for nobody: 1,800 KB of records here, at
 * 1,000,000 tasks seconds of the collector's time).  A has every task
 * and one full update; C one full update and every task.
 */
static void test_resync_backlog_stops_when_its_clients_leave(void **state)
{
	struct tclient c;
	struct saw sc = { 0 };
	weft_server_stats_t st;
	uint64_t made, rec0;
	struct ab f;
	int still = 0;

	(void)state;
	/* B skips (it does not read while changes come). */
	ab_start(&f, "stop.sock");
	ab_stop_load(&f);

	/* B takes its resync's full record, then stops reading: its backlog
	 * waits for B (1 s without a record). */
	assert_true(read_fulls(&f.b, &f.sb, 2, 30000));
	weft__server_stats(f.srv, &st);
	rec0 = st.backlog_records;
	for (int i = 0; i < 300 && still < 10; i++) {
		usleep(100 * 1000);
		weft__server_stats(f.srv, &st);
		still = st.backlog_records == rec0 ? still + 1 : 0;
		rec0 = st.backlog_records;
	}
	assert_int_equal(still, 10);
	assert_int_equal(st.backlogs_stopped, 0);

	/* C joins: its resync waits for B's backlog.  Then B goes. */
	ab_join(&f, &c);
	usleep(300 * 1000);
	weft__server_stats(f.srv, &st);
	assert_int_equal(st.backlog_records, rec0);
	tc_close(&f.b);

	/* C's full update, every task named. */
	assert_true(read_until(&c, &sc, 1, 30000));
	/* Its last backlog record was made before C read it (counted at
	 * the end of that pass: a moment later). */
	usleep(300 * 1000);
	weft__server_stats(f.srv, &st);
	made = st.backlog_records - rec0;
	ab_stop_reader(&f);
	print_message("after B closed: %llu backlog records made, C took %u; "
		      "%llu stopped; A: %u full, %zu named; C: %u full, %zu "
		      "named\n",
		      (unsigned long long)made, sc.task_records,
		      (unsigned long long)st.backlogs_stopped, f.ra.s.fulls,
		      f.ra.s.named, sc.fulls, sc.named);
	assert_int_equal(made, sc.task_records);
	assert_int_equal(st.backlogs_stopped, 1);
	assert_int_equal(sc.fulls, 1);
	assert_int_equal(sc.named, IDLE);
	assert_true(f.ra.s.fulls >= 1 && f.ra.s.fulls - 1 <= f.ra.s.skipped);
	assert_int_equal(f.ra.s.named, IDLE);

	free(sc.ids);
	tc_close(&c);
	ab_end(&f);
}

/*
 * A resync asked for a client that then takes the subscription's full
 * update makes no full update: A subscribes (a new subscription) and
 * subscribes again, in one write, which the server reads in one go;
 * between the two, the collector makes the subscription's full update
 * (the server thread is held on stat_lock, which reconcile takes after
 * subscribing, until that update is in the queue: the race made
 * certain).  A's second Subscribe asks a resync for it, which waits for
 * the full update's backlog; A then takes that full update and its
 * backlog.  Before, the backlog's end made the resync's full update
 * anyway, for nobody.
 */
static void test_resync_for_a_client_that_took_the_first_full(void **state)
{
	weft_server_opts_t o = { .workers = 2 };
	Weft__V1__Frame f = WEFT__V1__FRAME__INIT;
	Weft__V1__Subscribe sub = WEFT__V1__SUBSCRIBE__INIT;
	weft_wire_buf_t two = { 0 };
	struct saw sa = { 0 };
	weft_server_stats_t st;
	weft_probe_sub_t *ev_sub;
	struct tclient a;
	char path[300];
	weft_server_t *srv;
	weft_runtime_t *rt;
	bool queued = false;

	(void)state;
	rt = idle_runtime(&ev_sub);
	snprintf(path, sizeof(path), "%s/took.sock", xdg);
	o.unix_path = path;
	assert_int_equal(weft__server_create(&o, &srv), 0);
	tc_open(&a, path);
	tc_expect_header(&a);

	sub.updates = true;
	f.body_case = WEFT__V1__FRAME__BODY_SUBSCRIBE;
	f.subscribe = &sub;
	assert_int_equal(weft_wire_record_append(&two, &f), 0);
	assert_int_equal(weft_wire_record_append(&two, &f), 0);
	pthread_mutex_lock(&srv->stat_lock);
	tc_send_raw(&a, two.data, two.len);
	for (int i = 0; i < 3000 && !queued; i++) {
		usleep(10000);
		pthread_mutex_lock(&srv->qlock);
		queued = srv->qhead && srv->qhead->full;
		pthread_mutex_unlock(&srv->qlock);
	}
	pthread_mutex_unlock(&srv->stat_lock);
	weft_wire_buf_fini(&two);
	assert_true(queued);

	/* The full update, its backlog, then a second for a possible
	 * resync's full update to come (ten passes). */
	assert_true(read_until(&a, &sa, 1, 30000));
	read_fulls(&a, &sa, 2, 1000);
	weft__server_stats(srv, &st);
	print_message("A: %u full, %zu named; %llu resync full updates\n",
		      sa.fulls, sa.named, (unsigned long long)st.resync_fulls);
	assert_int_equal(sa.fulls, 1);
	assert_int_equal(sa.named, IDLE);
	assert_int_equal(st.resync_fulls, 0);

	free(sa.ids);
	tc_close(&a);
	weft__server_destroy(srv);
	idle_runtime_destroy(rt, ev_sub);
}

/* Full updates @c gets within @ms, read until @most came (@ms 0: in
 * what has come already). */
static unsigned fulls_within(struct tclient *c, int ms, unsigned most)
{
	struct timespec t0, t;
	unsigned n = 0;
	long left = ms;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (!ms) { /* what has come, all of it */
		Weft__V1__Frame *f;

		while ((f = tc_next(c, 0)) != NULL) {
			if (f->body_case == WEFT__V1__FRAME__BODY_UPDATE)
				n += f->update->full;
			weft_wire_frame_free(f);
		}
		return n;
	}
	while (n < most && left > 0) {
		Weft__V1__Frame *f = tc_next(c, (int)left);

		if (f && f->body_case == WEFT__V1__FRAME__BODY_UPDATE)
			n += f->update->full;
		weft_wire_frame_free(f);
		clock_gettime(CLOCK_MONOTONIC, &t);
		left = ms - ((t.tv_sec - t0.tv_sec) * 1000 +
			     (t.tv_nsec - t0.tv_nsec) / 1000000);
	}
	return n;
}

/*
 * A client that joins a stream that exists, or leaves the last of its
 * stream, restarts no other stream: X on a 100 ms stream, then Y on a
 * 200 ms one (a new stream: both take a full update, as before), then Z
 * on X's.  The clients' list, newest first, then names X's stream
 * first, where the subscription had Y's: the streams were taken for
 * others, and X and Y took a full update again.  Now only Z takes one,
 * of its own.  Then Y leaves: X and Z took a new subscription's full
 * update; now they go on.
 */
static void test_resync_streams_kept_for_others(void **state)
{
	weft_server_opts_t o = { .workers = 2 };
	weft_server_stats_t st;
	struct tclient x, y, z;
	struct seen sx, sz;
	char path[300];
	weft_server_t *srv;
	weft_runtime_t *rt;
	unsigned xf, yf;

	(void)state;
	xdg_make();
	rt = rt_with_server();
	snprintf(path, sizeof(path), "%s/join.sock", xdg);
	o.unix_path = path;
	assert_int_equal(weft__server_create(&o, &srv), 0);
	tc_open(&x, path);
	tc_expect_header(&x);
	tc_open(&y, path);
	tc_expect_header(&y);
	tc_subscribe_ex(&x, true, false, 100, NULL);
	assert_int_equal(fulls_within(&x, 10000, 1), 1);
	tc_subscribe_ex(&y, true, false, 200, NULL);
	assert_int_equal(fulls_within(&y, 10000, 1), 1);
	assert_int_equal(fulls_within(&x, 10000, 1), 1);

	tc_open(&z, path);
	tc_expect_header(&z);
	tc_subscribe_ex(&z, true, false, 100, NULL);
	assert_int_equal(fulls_within(&z, 10000, 1), 1);
	/* X's and Y's updates of the while: five of Y's intervals. */
	xf = fulls_within(&x, 1000, UINT_MAX);
	yf = fulls_within(&y, 1000, UINT_MAX);
	weft__server_stats(srv, &st);
	print_message("after Z joined: X %u full, Y %u full; %llu resync "
		      "full updates\n",
		      xf, yf, (unsigned long long)st.resync_fulls);
	assert_int_equal(xf, 0);
	assert_int_equal(yf, 0);
	assert_int_equal(st.resync_fulls, 1);

	/* Y leaves: X and Z go on, with updates (their next ten, read
	 * from the close on). */
	fulls_within(&x, 0, UINT_MAX);
	fulls_within(&z, 0, UINT_MAX);
	tc_close(&y);
	memset(&sx, 0, sizeof(sx));
	memset(&sz, 0, sizeof(sz));
	tc_count(&x, &sx, 5000, 10, 0);
	tc_count(&z, &sz, 5000, 10, 0);
	print_message("after Y left: X %u updates, %u full; Z %u, %u full\n",
		      sx.updates, sx.full, sz.updates, sz.full);
	assert_int_equal(sx.updates, 10);
	assert_int_equal(sz.updates, 10);
	assert_int_equal(sx.full, 0);
	assert_int_equal(sz.full, 0);

	tc_close(&x);
	tc_close(&z);
	weft__server_destroy(srv);
	weft_runtime_destroy(rt);
	xdg_remove();
}

static void tc_control(struct tclient *c, Weft__V1__ControlOp op)
{
	Weft__V1__Frame f = WEFT__V1__FRAME__INIT;
	Weft__V1__Control ctl = WEFT__V1__CONTROL__INIT;

	ctl.op = op;
	f.body_case = WEFT__V1__FRAME__BODY_CONTROL;
	f.control = &ctl;
	tc_send(c, &f);
}

/*
 * A pause of events restarts no stream while another's events go on: X
 * and Y take updates and events, on streams of their own (100 and 200
 * ms), under a light load of short tasks (each client unread for a
 * while holds its events: well under its 8 MiB).  X pauses its events: before, a new
 * subscription, a full update for X and for Y; now neither, and X's
 * updates go on.  X resumes: its events come again, no full update.
 */
static void test_resync_pause_keeps_streams(void **state)
{
	weft_server_opts_t o = { .workers = 2 };
	struct load load = { 0 };
	struct seen sx = { 0 }, sy = { 0 };
	struct tclient x, y;
	char path[300];
	weft_server_t *srv;
	weft_runtime_t *rt;
	pthread_t lt;

	(void)state;
	xdg_make();
	rt = rt_with_server();
	load.rt = rt;
	assert_int_equal(pthread_create(&lt, NULL, load_main, &load), 0);
	snprintf(path, sizeof(path), "%s/pause.sock", xdg);
	o.unix_path = path;
	assert_int_equal(weft__server_create(&o, &srv), 0);
	tc_open(&x, path);
	tc_expect_header(&x);
	tc_open(&y, path);
	tc_expect_header(&y);
	tc_subscribe_ex(&x, true, true, 100, NULL);
	assert_int_equal(fulls_within(&x, 10000, 1), 1);
	tc_subscribe_ex(&y, true, true, 200, NULL);
	assert_int_equal(fulls_within(&y, 10000, 1), 1);
	assert_int_equal(fulls_within(&x, 10000, 1), 1);

	/* X pauses: its next ten updates, Y's next five. */
	fulls_within(&x, 0, UINT_MAX);
	fulls_within(&y, 0, UINT_MAX);
	tc_control(&x, WEFT__V1__CONTROL_OP__CONTROL_OP_PAUSE_EVENTS);
	tc_count(&x, &sx, 5000, 10, 0);
	tc_count(&y, &sy, 5000, 5, 0);
	print_message("X paused: X %u updates, %u full; Y %u, %u full, %llu "
		      "skipped\n",
		      sx.updates, sx.full, sy.updates, sy.full,
		      (unsigned long long)sy.skipped);
	assert_int_equal(sx.updates, 10);
	assert_int_equal(sy.updates, 5);
	assert_int_equal(sx.full, 0);
	assert_int_equal(sy.full, 0);

	/* X resumes: events again, no full update for anyone. */
	memset(&sx, 0, sizeof(sx));
	memset(&sy, 0, sizeof(sy));
	fulls_within(&y, 0, UINT_MAX);
	tc_control(&x, WEFT__V1__CONTROL_OP__CONTROL_OP_RESUME_EVENTS);
	tc_count(&x, &sx, 5000, 10, 1);
	tc_count(&y, &sy, 5000, 5, 0);
	print_message("X resumed: X %u updates, %u full, %u batches; Y %u, "
		      "%u full\n",
		      sx.updates, sx.full, sx.batches, sy.updates, sy.full);
	assert_true(sx.batches >= 1);
	assert_int_equal(sx.full, 0);
	assert_int_equal(sy.full, 0);

	atomic_store(&load.stop, true);
	pthread_join(lt, NULL);
	tc_close(&x);
	tc_close(&y);
	weft__server_destroy(srv);
	weft_runtime_destroy(rt);
	xdg_remove();
}

/*
 * A client that subscribes again to what it has gets a full update, and
 * nobody else does (weft-trace record asks its checkpoints so): X and Y
 * on one stream of updates and events; Y sends its Subscribe again.  Y
 * takes one full update within its next ten updates, X none, and the
 * server made one resync's full update.
 */
static void test_resync_subscribe_again(void **state)
{
	weft_server_opts_t o = { .workers = 2 };
	struct load load = { 0 };
	struct seen sx = { 0 }, sy = { 0 };
	weft_server_stats_t st;
	struct tclient x, y;
	char path[300];
	weft_server_t *srv;
	weft_runtime_t *rt;
	uint64_t r0;
	pthread_t lt;

	(void)state;
	xdg_make();
	rt = rt_with_server();
	load.rt = rt;
	assert_int_equal(pthread_create(&lt, NULL, load_main, &load), 0);
	snprintf(path, sizeof(path), "%s/again.sock", xdg);
	o.unix_path = path;
	assert_int_equal(weft__server_create(&o, &srv), 0);
	tc_open(&x, path);
	tc_expect_header(&x);
	tc_open(&y, path);
	tc_expect_header(&y);
	tc_subscribe_ex(&x, true, true, 100, NULL);
	assert_int_equal(fulls_within(&x, 10000, 1), 1);
	tc_subscribe_ex(&y, true, true, 100, NULL);
	assert_int_equal(fulls_within(&y, 10000, 1), 1);
	fulls_within(&x, 0, UINT_MAX);
	/* Y's joining may have made one (or the subscription's, if it came
	 * with X's first). */
	weft__server_stats(srv, &st);
	r0 = st.resync_fulls;

	tc_subscribe_ex(&y, true, true, 100, NULL);
	tc_count(&y, &sy, 5000, 10, 0);
	tc_count(&x, &sx, 5000, 10, 0);
	weft__server_stats(srv, &st);
	print_message("Y subscribed again: Y %u updates, %u full; X %u, %u "
		      "full; %llu resync full updates\n",
		      sy.updates, sy.full, sx.updates, sx.full,
		      (unsigned long long)(st.resync_fulls - r0));
	assert_int_equal(sy.updates, 10);
	assert_int_equal(sy.full, 1);
	assert_int_equal(sx.updates, 10);
	assert_int_equal(sx.full, 0);
	assert_int_equal(st.resync_fulls - r0, 1);

	atomic_store(&load.stop, true);
	pthread_join(lt, NULL);
	tc_close(&x);
	tc_close(&y);
	weft__server_destroy(srv);
	weft_runtime_destroy(rt);
	xdg_remove();
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_resync_is_the_skippers_alone),
		cmocka_unit_test(
			test_resync_backlog_stops_when_its_clients_leave),
		cmocka_unit_test(
			test_resync_for_a_client_that_took_the_first_full),
		cmocka_unit_test(test_resync_streams_kept_for_others),
		cmocka_unit_test(test_resync_pause_keeps_streams),
		cmocka_unit_test(test_resync_subscribe_again),
	};
	int failed = 0;

	if (argc > 1) {
		cmocka_set_test_filter(argv[1]);
		return cmocka_run_group_tests(tests, NULL, NULL);
	}
	/*
	 * Each case in a process of its own: the probe is the process's,
	 * and keeps a finished task 6 s, so that a case's full updates
	 * would carry the last one's idle tasks.  (No thread runs yet.)
	 */
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		int status;
		pid_t pid;

		fflush(stdout);
		fflush(stderr);
		pid = fork();
		if (pid == 0) {
			cmocka_set_test_filter(tests[i].name);
			status = cmocka_run_group_tests(tests, NULL, NULL);
			_exit(status ? 1 : 0);
		}
		if (pid < 0 || waitpid(pid, &status, 0) != pid ||
		    !WIFEXITED(status) || WEXITSTATUS(status))
			failed++;
	}
	return failed ? 1 : 0;
}
