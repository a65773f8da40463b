/* SPDX-License-Identifier: MIT */
/*
 * The console's state store (console/model.c) fed with hand-built
 * frames: updates applied and merged, retention of finished tasks, sort
 * and filter of the task list, warnings newest first, worker history and
 * the timeline from POLL events, malformed content ignored; resources
 * (bounded, retained) and the Resources view, WAITING ON; the tasks
 * grouped by spawn site, their view and keys; the task
 * list kept sorted incrementally, the watched task's events, a timeline
 * bucket's longest polls; then the views rendered to text and the key
 * actions, all without a terminal; and a trace file replayed from its
 * index (console/replay.c) against every frame read in order.
 */
#include <curses.h>
#include <fcntl.h>
#include <malloc.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define HAVE_MEMCHECK 1
#endif
#endif

#include "test_helpers.h"

#include "console.h"
#include "weft/trace_reader.h"
#include "weft/trace_stream.h"

#define MS 1000000ull
#define SEC 1000000000ull

static Weft__V1__Task *task_msg(uint64_t id, const char *name, uint64_t polls)
{
	Weft__V1__Task *t = calloc(1, sizeof(*t));

	assert_non_null(t);
	weft__v1__task__init(t);
	t->id = id;
	t->name = (char *)name;
	t->file = (char *)(name[0] ? "app.c" : "");
	t->line = (uint32_t)id;
	t->polls = polls;
	t->busy_ns = polls * 1000;
	t->state = WEFT_TASK_IDLE;
	return t;
}

/* An update at @now with @n tasks (freed here after feeding). */
/* The blocking pool's figures feed() puts in its stats (busy, queued,
 * jobs). */
static uint64_t feed_blocking[3];

static void feed(con_model_t *m, uint64_t now, Weft__V1__Task **tasks, size_t n,
		 Weft__V1__Worker **workers, size_t nw,
		 Weft__V1__Warning **warnings, size_t nx)
{
	Weft__V1__Update u = WEFT__V1__UPDATE__INIT;
	Weft__V1__Stats st = WEFT__V1__STATS__INIT;
	Weft__V1__Frame f = WEFT__V1__FRAME__INIT;

	st.now_ns = now;
	st.start_ns = 1 * SEC;
	st.workers = 2;
	st.live_tasks = n;
	st.polls_per_s = 1000;
	st.steals_per_s = 10;
	st.events_per_s = 5000;
	st.events_dropped = 3;
	st.blocking_busy = feed_blocking[0];
	st.blocking_queued = feed_blocking[1];
	st.blocking_jobs = feed_blocking[2];
	u.stats = &st;
	u.tasks = tasks;
	u.n_tasks = n;
	u.workers = workers;
	u.n_workers = nw;
	u.warnings = warnings;
	u.n_warnings = nx;
	f.body_case = WEFT__V1__FRAME__BODY_UPDATE;
	f.update = &u;
	con_model_frame(m, &f);
	for (size_t i = 0; i < n; i++)
		free(tasks[i]);
}

/*
 * Memory a task costs the console (issue 21: at most 300 bytes, the
 * --once text of the Tasks view included): 100,000 tasks fed as a first
 * full update brings them (records of 10,000), the list sorted, the
 * text printed.  Counted twice: the model's own count
 * (con_model_bytes()), and the heap it grew by as glibc counts it, at
 * its highest while the text is written (sampled at each of the FILE's
 * writes: the page's grid is alive then).  Before the change, by the
 * same count (estimated, not run: the test needs con_once_print()):
 * about 330 bytes in the model (a 256-byte chunk a record, an index of
 * pointers, two lists twice the tasks long, a dirty vector as long as
 * them) and 960 more for the text's one tall grid; weft-console
 * --once --view tasks on 1,000,000 tasks peaked at 1,195 bytes a task.
 */
struct heap_probe {
	size_t base, peak;
	size_t lines;
};

static size_t heap_now(void)
{
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
}

static ssize_t heap_write(void *cookie, const char *buf, size_t n)
{
	struct heap_probe *hp = cookie;
	size_t h = heap_now();

	if (h > hp->peak)
		hp->peak = h;
	for (size_t i = 0; i < n; i++)
		hp->lines += buf[i] == '\n';
	return (ssize_t)n;
}

static void test_console_model_bytes_per_task(void **state)
{
	/* Under valgrind (slow, its own malloc): fewer, and no heap
	 * figure; still more than a --once page. */
	const size_t n = on_valgrind() ? 20000 : 100000, batch = 10000;
	struct heap_probe hp = { 0 };
	cookie_io_functions_t io = { .write = heap_write };
	con_session_t ses = { .view = CON_VIEW_TASKS, .once = true };
	size_t model_bytes, heap;
	con_model_t m, c;
	FILE *out;

	(void)state;
	hp.base = hp.peak = heap_now();
	con_model_init(&m, "test");
	for (size_t at = 0; at < n; at += batch) {
		Weft__V1__Task **ts = calloc(batch, sizeof(*ts));

		assert_non_null(ts);
		for (size_t i = 0; i < batch; i++) {
			ts[i] = task_msg(at + i + 1, "idle", 1);
			ts[i]->line = 12; /* one spawn site */
			ts[i]->parked_file = (char *)"app.c";
			ts[i]->parked_line = 7;
		}
		feed(&m, 2 * SEC, ts, batch, NULL, 0, NULL, 0);
		free(ts);
		/* Sorted once early: the rest then comes past the dirty
		 * vector's bound, flagged, and is merged in. */
		if (!at) {
			ses.model = &m;
			con_session_resort(&ses);
		}
	}
	assert_int_equal(m.ntasks, n);
	assert_true(m.dirty_overflow);
	con_session_resort(&ses);
	assert_int_equal(m.nlist, n);
	assert_true(con_model_is_consistent(&m));
	out = fopencookie(&hp, "w", io);
	assert_non_null(out);
	con_once_print(&ses, 120, out);
	fclose(out);
	/* The header's three rows, the column labels, a row a task. */
	assert_int_equal(hp.lines, n + 4);

	model_bytes = con_model_bytes(&m);
	heap = hp.peak - hp.base;
	print_message("%zu tasks: model %zu bytes a task, heap at its peak "
		      "%zu\n",
		      n, model_bytes / n, heap / n);
	assert_true(model_bytes <= 300 * n);
	/* glibc's count: not under valgrind or ASan (their own malloc). */
	if (!on_valgrind() && hp.base)
		assert_true(heap <= 300 * n);

	/* The spawn-site groups shown too: room for the groups, not one
	 * a task (a group is 88 bytes). */
	ses.view = CON_VIEW_SITES;
	con_session_resort(&ses);
	assert_int_equal(m.ngroups, 1);
	heap = heap_now() - hp.base;
	print_message("with the spawn sites: heap %zu bytes a task\n",
		      heap / n);
	if (!on_valgrind() && hp.base)
		assert_true(heap <= 300 * n);

	/* A copy (a replay's checkpoint) costs the same. */
	con_model_clone(&c, &m);
	assert_true(con_model_is_consistent(&c));
	assert_int_equal(c.ntasks, n);
	assert_true(con_model_bytes(&c) <= 300 * n);
	con_model_fini(&c);
	con_model_fini(&m);
}

static void test_console_model_update_applied(void **state)
{
	con_model_t m;
	Weft__V1__Hello h = WEFT__V1__HELLO__INIT;
	Weft__V1__Frame f = WEFT__V1__FRAME__INIT;
	Weft__V1__Worker w0 = WEFT__V1__WORKER__INIT,
			 w1 = WEFT__V1__WORKER__INIT;
	Weft__V1__WorkerCounters c0 = WEFT__V1__WORKER_COUNTERS__INIT;
	uint64_t stolen[2] = { 0, 7 };
	Weft__V1__Worker *ws[] = { &w0, &w1 };
	Weft__V1__Task *ts[] = { task_msg(1, "alpha", 5),
				 task_msg(2, "beta", 9) };
	con_header_t hd;
	const con_task_t *t;

	(void)state;
	con_model_init(&m, "test");
	h.pid = 42;
	h.process_name = "svc";
	h.workers = 2;
	h.start_ns = 1 * SEC;
	f.body_case = WEFT__V1__FRAME__BODY_HELLO;
	f.hello = &h;
	con_model_frame(&m, &f);
	c0.polls = 100;
	c0.steals = 7;
	c0.parks = 3;
	w0.counters = &c0;
	w0.queue_depth = 4;
	w0.polls_per_s = 500;
	w0.stolen_from = stolen;
	w0.n_stolen_from = 2;
	w1.index = 1;
	w1.state = 2;
	feed(&m, 3 * SEC, ts, 2, ws, 2, NULL, 0);

	assert_int_equal(m.pid, 42);
	assert_string_equal(m.process, "svc");
	assert_int_equal(m.nworkers, 2);
	assert_int_equal(m.ntasks, 2);
	t = con_model_task(&m, 2);
	assert_non_null(t);
	assert_string_equal(t->name, "beta");
	assert_int_equal(t->polls, 9);
	assert_int_equal(m.workers[0].counters.polls, 100);
	assert_int_equal(m.workers[0].queue_depth, 4);
	assert_int_equal(m.workers[1].state, 2);
	/* Worker 0 stole 7 from worker 1: worker 1's "out". */
	assert_int_equal(m.workers[1].stolen_by_others, 7);
	assert_int_equal(con_worker_depth_at(&m, &m.workers[0], 0), 4);

	con_model_header(&m, &hd);
	assert_int_equal(hd.uptime_ns, 2 * SEC);
	assert_int_equal(hd.workers, 2);
	assert_int_equal(hd.live_tasks, 2);
	assert_true(hd.steal_rate > 0.0099 && hd.steal_rate < 0.0101);
	assert_int_equal(hd.dropped, 3);
	assert_true(con_model_is_consistent(&m));
	con_model_fini(&m);
}

/*
 * Workers past 64 (and past the 256 the model once kept), up to the
 * runtime's 4,096: their records grow with the highest index; a peer's
 * stolen_out is a worker's "out" (not summed from the thieves'
 * breakdowns, which list the top victims only); 4096 is a bad frame.
 */
static void test_console_model_workers_past_64(void **state)
{
	con_model_t m;
	Weft__V1__Worker w99 = WEFT__V1__WORKER__INIT,
			 w4095 = WEFT__V1__WORKER__INIT,
			 bad = WEFT__V1__WORKER__INIT;
	Weft__V1__WorkerCounters c = WEFT__V1__WORKER_COUNTERS__INIT;
	Weft__V1__WorkerSteal st = WEFT__V1__WORKER_STEAL__INIT,
			      *stp[] = { &st };
	Weft__V1__Worker *ws[] = { &w99, &w4095 }, *bs[] = { &bad };

	(void)state;
	con_model_init(&m, "test");
	c.polls = 5;
	w99.index = 99;
	w99.counters = &c;
	w99.stolen_out = 11;
	st.victim = 99;
	st.tasks = 11;
	w4095.index = 4095;
	w4095.counters = &c;
	w4095.n_stolen = 1;
	w4095.stolen = stp;
	feed(&m, 3 * SEC, NULL, 0, ws, 2, NULL, 0);
	assert_int_equal(m.nworkers, 4096);
	assert_non_null(con_model_worker(&m, 99));
	assert_null(con_model_worker(&m, 98));
	assert_int_equal(m.workers[99].counters.polls, 5);
	assert_int_equal(m.workers[4095].counters.polls, 5);
	assert_int_equal(m.workers[99].stolen_by_others, 11);
	assert_int_equal(m.workers[4095].stolen_by_others, 0);
	/* Again: set, not summed. */
	feed(&m, 4 * SEC, NULL, 0, ws, 2, NULL, 0);
	assert_int_equal(m.workers[99].stolen_by_others, 11);
	assert_true(con_model_is_consistent(&m));

	bad.index = 4096;
	feed(&m, 5 * SEC, NULL, 0, bs, 1, NULL, 0);
	assert_int_equal(m.bad_frames, 1);
	assert_int_equal(m.nworkers, 4096);
	assert_true(con_model_is_consistent(&m));
	con_model_fini(&m);
}

static void test_console_model_update_merges(void **state)
{
	con_model_t m;
	Weft__V1__Task *a[] = { task_msg(1, "alpha", 5) };
	Weft__V1__Task *b[] = { task_msg(1, "", 8) };

	(void)state;
	con_model_init(&m, "test");
	feed(&m, 2 * SEC, a, 1, NULL, 0, NULL, 0);
	feed(&m, 3 * SEC, b, 1, NULL, 0, NULL, 0);
	assert_int_equal(m.ntasks, 1);
	assert_int_equal(con_model_task(&m, 1)->polls, 8);
	/* An update without the name keeps the one seen first. */
	assert_string_equal(con_model_task(&m, 1)->name, "alpha");
	assert_int_equal(m.updates, 2);
	con_model_fini(&m);
}

static void test_console_model_retention(void **state)
{
	con_model_t m;
	Weft__V1__Task *a[] = { task_msg(1, "live", 1),
				task_msg(2, "done", 1) };
	Weft__V1__Task *none[1];

	(void)state;
	con_model_init(&m, "test");
	m.retain_ns = 2 * SEC;
	a[1]->state = WEFT_TASK_DONE;
	a[1]->finished_ns = 2 * SEC;
	feed(&m, 2 * SEC, a, 2, NULL, 0, NULL, 0);
	con_model_resort(&m);
	assert_int_equal(m.nlist, 2);
	feed(&m, 3 * SEC, none, 0, NULL, 0, NULL, 0);
	assert_non_null(con_model_task(&m, 2)); /* 1 s after: kept */
	feed(&m, 4 * SEC + 1, none, 0, NULL, 0, NULL, 0);
	/* Over 2 s, but a batch waits until an eighth more is due. */
	assert_non_null(con_model_task(&m, 2));
	feed(&m, 4 * SEC + SEC / 4 + 1, none, 0, NULL, 0, NULL, 0);
	assert_null(con_model_task(&m, 2)); /* gone */
	assert_non_null(con_model_task(&m, 1));
	assert_int_equal(m.ntasks, 1);
	con_model_resort(&m);
	assert_int_equal(m.nlist, 1);
	assert_true(con_model_is_consistent(&m));
	con_model_fini(&m);
}

/* Many tasks: the index grows and survives removals. */
static void test_console_model_many_tasks(void **state)
{
	con_model_t m;
	enum { N = 5000 };
	Weft__V1__Task **ts = calloc(N, sizeof(*ts));

	(void)state;
	assert_non_null(ts);
	con_model_init(&m, "test");
	m.retain_ns = 1;
	for (int i = 0; i < N; i++) {
		ts[i] = task_msg((uint64_t)i + 1, "t", 1);
		if (i % 2) {
			ts[i]->finished_ns = 1 * SEC;
			ts[i]->state = WEFT_TASK_DONE;
		}
	}
	feed(&m, 1 * SEC, ts, N, NULL, 0, NULL, 0);
	assert_int_equal(m.ntasks, N);
	/* One copy of "t" and one of "app.c" for all of them. */
	assert_int_equal(m.nstrs, 2);
	assert_ptr_equal(con_model_task(&m, 1)->name,
			 con_model_task(&m, N)->name);
	feed(&m, 2 * SEC, ts, 0, NULL, 0, NULL, 0);
	assert_int_equal(m.ntasks, N / 2);
	assert_int_equal(m.nstrs, 2);
	for (int i = 0; i < N; i++)
		assert_true((con_model_task(&m, (uint64_t)i + 1) != NULL) ==
			    (i % 2 == 0));
	assert_true(con_model_is_consistent(&m));
	/* Renamed, each its own name: "t" goes with its last reference;
	 * finished and retired, so do the rest. */
	{
		static char names[N / 2][16];

		for (int i = 0; i < N / 2; i++) {
			snprintf(names[i], sizeof(names[i]), "n%d", i);
			ts[i] = task_msg(2 * (uint64_t)i + 1, names[i], 2);
			ts[i]->finished_ns = 3 * SEC;
			ts[i]->state = WEFT_TASK_DONE;
		}
		feed(&m, 3 * SEC, ts, N / 2, NULL, 0, NULL, 0);
		assert_int_equal(m.nstrs, N / 2 + 1);
		assert_string_equal(con_model_task(&m, 7)->name, "n3");
		assert_true(con_model_is_consistent(&m));
		feed(&m, 4 * SEC, ts, 0, NULL, 0, NULL, 0);
		assert_int_equal(m.ntasks, 0);
		assert_int_equal(m.nstrs, 0);
		assert_true(con_model_is_consistent(&m));
	}
	con_model_fini(&m);
	free(ts);
}

/*
 * At most retain_max finished tasks stay, however young: the oldest go
 * once an eighth over; live tasks stay whatever their number.
 */
static void test_console_model_retains_at_most_retain_max(void **state)
{
	con_model_t m;
	enum { MAX = 1000, FINISHED = 3000, LIVE = 2000 };
	Weft__V1__Task **ts = calloc(FINISHED + LIVE, sizeof(*ts));

	(void)state;
	assert_non_null(ts);
	con_model_init(&m, "test");
	m.retain_max = MAX;
	/* Just under the trigger (an eighth over): nothing goes. */
	for (int i = 0; i < MAX + MAX / 8; i++) {
		ts[i] = task_msg((uint64_t)i + 1, "done", 1);
		ts[i]->finished_ns = 1 * SEC + (uint64_t)i * 1000;
		ts[i]->state = WEFT_TASK_DONE;
	}
	feed(&m, 2 * SEC, ts, MAX + MAX / 8, NULL, 0, NULL, 0);
	assert_int_equal(m.ntasks, MAX + MAX / 8);
	assert_int_equal(m.nfinished, MAX + MAX / 8);
	/* The rest, finished later, and tasks still running. */
	for (int i = MAX + MAX / 8; i < FINISHED; i++) {
		ts[i - (MAX + MAX / 8)] = task_msg((uint64_t)i + 1, "done", 1);
		ts[i - (MAX + MAX / 8)]->finished_ns =
			1 * SEC + (uint64_t)i * 1000;
		ts[i - (MAX + MAX / 8)]->state = WEFT_TASK_DONE;
	}
	for (int i = 0; i < LIVE; i++)
		ts[FINISHED - (MAX + MAX / 8) + i] =
			task_msg(1000000 + (uint64_t)i, "live", 1);
	feed(&m, 2 * SEC, ts, FINISHED - (MAX + MAX / 8) + LIVE, NULL, 0, NULL,
	     0);
	assert_int_equal(m.nfinished, MAX);
	assert_int_equal(m.ntasks, MAX + LIVE);
	/* The newest MAX finished ones are those kept. */
	for (int i = 0; i < FINISHED; i++)
		assert_true((con_model_task(&m, (uint64_t)i + 1) != NULL) ==
			    (i >= FINISHED - MAX));
	for (int i = 0; i < LIVE; i++)
		assert_non_null(con_model_task(&m, 1000000 + (uint64_t)i));
	assert_true(con_model_is_consistent(&m));
	con_model_fini(&m);
	free(ts);
}

/* The same in any finish order, ties included: the newest stay. */
static void test_console_model_retains_newest_in_any_order(void **state)
{
	enum { MAX = 500, N = 2000 };
	Weft__V1__Task **ts = calloc(N, sizeof(*ts));
	unsigned seed = 12345;

	(void)state;
	assert_non_null(ts);
	for (int trial = 0; trial < 20; trial++) {
		con_model_t m;
		uint64_t at[N];
		size_t kept = 0;

		con_model_init(&m, "test");
		m.retain_max = MAX;
		for (int i = 0; i < N; i++) {
			/* Trial 0 all tied; then a few values, then many. */
			seed = seed * 1103515245u + 12345u;
			at[i] = 1 * SEC +
				(trial ? (seed >> 8) % (trial * 97u) : 0);
			ts[i] = task_msg((uint64_t)i + 1, "done", 1);
			ts[i]->finished_ns = at[i];
			ts[i]->state = WEFT_TASK_DONE;
		}
		feed(&m, 2 * SEC, ts, N, NULL, 0, NULL, 0);
		assert_int_equal(m.nfinished, MAX);
		assert_int_equal(m.ntasks, MAX);
		/* None kept older than one dropped. */
		for (int i = 0; i < N; i++) {
			const con_task_t *t =
				con_model_task(&m, (uint64_t)i + 1);

			for (int j = 0; t && j < N; j++)
				if (!con_model_task(&m, (uint64_t)j + 1))
					assert_true(at[j] <= at[i]);
			kept += t != NULL;
		}
		assert_int_equal(kept, MAX);
		assert_true(con_model_is_consistent(&m));
		con_model_fini(&m);
	}
	free(ts);
}

/* What retention holds: its entries, the index's deleted slots, the
 * index (at most 16 times the tasks, or 1,024 slots). */
static void retention_bounded(const con_model_t *m, size_t slack)
{
	assert_true(m->fin_pend - m->fin_lo + m->nfin_heap <=
		    2 * m->nfinished + 1024 + slack);
	assert_true(2 * (m->ntasks + m->hash_tombs) + 2 <= m->hash_cap);
	assert_true(m->hash_cap <= 1024 || m->hash_cap <= 16 * (m->ntasks + 1));
}

/*
 * Steady churn (issue 21: retention deletes in place, in finish order):
 * rounds of finished tasks named in no order, overlapping the previous
 * round's finish times (merged), every seventh round finished before
 * all the others (stragglers), a few tasks sent unfinished again and
 * finished again later.  After each round the newest retain_max
 * finished tasks are those kept, the model consistent, what retention
 * holds bounded; then one task finished, unfinished, finished again
 * 3,000 times: the stale entries do not pile up (a bound two over, for
 * the one sent unfinished after its push).
 */
static void test_console_model_retention_churn(void **state)
{
	enum { MAX = 1000, PER = 300, ROUNDS = 60, FLIP = 5 };
	enum { IDS = ROUNDS * PER + 1 };
	Weft__V1__Task *ts[PER + FLIP];
	uint64_t *at = calloc(IDS, sizeof(*at)); /* 0: live or unknown */
	uint64_t flipped[FLIP] = { 0 }, next_id = 1;
	unsigned seed = 7;
	con_model_t m;

	(void)state;
	assert_non_null(at);
	con_model_init(&m, "test");
	m.retain_max = MAX;
	m.retain_ns = 100000 * SEC; /* by count only */
	for (int r = 0; r < ROUNDS; r++) {
		bool back = r % 7 == 5;
		uint64_t round_first = next_id, max_gone = 0, min_kept = ~0ull;
		size_t n = 0;

		for (int i = 0; i < PER; i++) {
			uint64_t id = next_id++;

			seed = seed * 1103515245u + 12345u;
			ts[n] = task_msg(id, "done", 1);
			ts[n]->state = WEFT_TASK_DONE;
			ts[n]->finished_ns =
				back ? 1 * SEC + (seed >> 8) % 1000 :
				       (10 + r) * SEC + (seed >> 4) % (2 * SEC);
			at[id] = ts[n++]->finished_ns;
		}
		/* Last round's flipped ones finished again; five of this
		 * round's sent unfinished (after their finished record). */
		for (int i = 0; i < FLIP && r; i++) {
			ts[n] = task_msg(flipped[i], "done", 1);
			ts[n]->state = WEFT_TASK_DONE;
			ts[n]->finished_ns = (11 + r) * SEC + (uint64_t)i;
			at[flipped[i]] = ts[n++]->finished_ns;
		}
		feed(&m, (10 + r) * SEC, ts, n, NULL, 0, NULL, 0);
		n = 0;
		for (int i = 0; i < FLIP && !back; i++) {
			flipped[i] = round_first + 10 * (uint64_t)i;
			ts[n] = task_msg(flipped[i], "done", 1);
			at[flipped[i]] = 0;
			n++;
		}
		if (n)
			feed(&m, (10 + r) * SEC, ts, n, NULL, 0, NULL, 0);
		assert_true(con_model_is_consistent(&m));
		assert_true(m.nfinished <= MAX + MAX / 8);
		retention_bounded(&m, PER + 3 * FLIP);
		/* None kept finished before one forgotten. */
		for (uint64_t id = 1; id < next_id; id++) {
			const con_task_t *t = con_model_task(&m, id);

			if (!at[id])
				continue;
			if (t && at[id] < min_kept)
				min_kept = at[id];
			if (!t && at[id] > max_gone)
				max_gone = at[id];
		}
		assert_true(max_gone <= min_kept);
	}
	/* The last round's flipped ones unfinished after its batch. */
	assert_int_equal(m.nfinished, MAX - FLIP);
	for (int i = 0; i < 6000; i++) {
		ts[0] = task_msg(1000000, "flip", 1);
		if (i % 2 == 0) {
			ts[0]->state = WEFT_TASK_DONE;
			ts[0]->finished_ns = (100 + i) * SEC;
		}
		feed(&m, 70 * SEC, ts, 1, NULL, 0, NULL, 0);
		retention_bounded(&m, 2);
	}
	assert_true(con_model_is_consistent(&m));
	con_model_fini(&m);
	free(at);
}

static void test_console_model_sort(void **state)
{
	con_model_t m;
	Weft__V1__Task *ts[] = { task_msg(1, "charlie", 5),
				 task_msg(2, "alpha", 9),
				 task_msg(3, "bravo", 5) };

	(void)state;
	con_model_init(&m, "test");
	feed(&m, 2 * SEC, ts, 3, NULL, 0, NULL, 0);
	con_model_resort(&m);
	assert_int_equal(m.list[0]->id, 1); /* by id */
	assert_int_equal(m.list[2]->id, 3);
	con_model_set_sort(&m, CON_COL_POLLS, false);
	con_model_resort(&m);
	/* 5, 5 (ties by id), then 9. */
	assert_int_equal(m.list[0]->id, 1);
	assert_int_equal(m.list[1]->id, 3);
	assert_int_equal(m.list[2]->id, 2);
	con_model_set_sort(&m, CON_COL_POLLS, true);
	con_model_resort(&m);
	assert_int_equal(m.list[0]->id, 2);
	con_model_set_sort(&m, CON_COL_NAME, false);
	con_model_resort(&m);
	assert_string_equal(m.list[0]->name, "alpha");
	assert_string_equal(m.list[1]->name, "bravo");
	assert_string_equal(m.list[2]->name, "charlie");
	con_model_fini(&m);
}

static void test_console_model_filter(void **state)
{
	con_model_t m;
	Weft__V1__Task *ts[] = { task_msg(1, "http-accept", 5),
				 task_msg(2, "HTTP-conn", 9),
				 task_msg(13, "db", 5) };

	(void)state;
	con_model_init(&m, "test");
	ts[2]->state = WEFT_TASK_SCHEDULED;
	feed(&m, 2 * SEC, ts, 3, NULL, 0, NULL, 0);
	con_model_set_filter(&m, "http");
	con_model_resort(&m);
	assert_int_equal(m.nlist, 2); /* any case */
	con_model_set_filter(&m, "13");
	con_model_resort(&m);
	assert_int_equal(m.nlist, 1);
	assert_int_equal(m.list[0]->id, 13);
	con_model_set_filter(&m, "sched");
	con_model_resort(&m);
	assert_int_equal(m.nlist, 1);
	con_model_set_filter(&m, "nothing-matches");
	con_model_resort(&m);
	assert_int_equal(m.nlist, 0);
	con_model_set_filter(&m, "");
	con_model_resort(&m);
	assert_int_equal(m.nlist, 3);
	con_model_fini(&m);
}

/*
 * A task a worker polls shows running (from the worker's record, its own
 * unchanged: a hung task's never changes), and the filter follows it in
 * and out, as the workers' records say (found by review: the filter was
 * looked at again only for tasks whose own record changed).
 */
static void test_console_model_filter_running(void **state)
{
	con_model_t m;
	Weft__V1__Worker w0 = WEFT__V1__WORKER__INIT,
			 w1 = WEFT__V1__WORKER__INIT;
	Weft__V1__Worker *ws[] = { &w0, &w1 };
	Weft__V1__Task *ts[] = { task_msg(1, "stuck", 5),
				 task_msg(2, "other", 9) };

	(void)state;
	con_model_init(&m, "test");
	w0.state = 2;
	w1.index = 1;
	w1.state = 2;
	feed(&m, 2 * SEC, ts, 2, ws, 2, NULL, 0);
	con_model_set_filter(&m, "running");
	con_model_resort(&m);
	assert_int_equal(m.nlist, 0);
	/* Worker 0 now polls task 1 (no task record: no events). */
	w0.state = 0;
	w0.current_task = 1;
	w0.poll_started_ns = 1 * SEC;
	feed(&m, 3 * SEC, NULL, 0, ws, 2, NULL, 0);
	con_model_resort(&m);
	assert_string_equal(con_task_status_name(&m, con_model_task(&m, 1)),
			    "running");
	assert_int_equal(m.nlist, 1);
	assert_int_equal(m.list[0]->id, 1);
	/* And out again when the worker parks. */
	w0.state = 2;
	w0.current_task = 0;
	feed(&m, 4 * SEC, NULL, 0, ws, 2, NULL, 0);
	con_model_resort(&m);
	assert_int_equal(m.nlist, 0);
	con_model_fini(&m);
}

static Weft__V1__Warning *warning_msg(uint64_t seq, uint32_t kind,
				      uint64_t task)
{
	Weft__V1__Warning *w = calloc(1, sizeof(*w));

	assert_non_null(w);
	weft__v1__warning__init(w);
	w->seq = seq;
	w->kind = kind;
	w->task = task;
	w->task_name = "lock-bad";
	w->detail = "lock accounts taken at app.c:10";
	w->at_ns = 2 * SEC + seq;
	return w;
}

static void test_console_model_warnings_newest_first(void **state)
{
	con_model_t m;
	Weft__V1__Warning *x[] = {
		warning_msg(1, WEFT_WARN_LONG_POLL, 7),
		warning_msg(2, WEFT_WARN_LOCK_HELD_ACROSS_AWAIT, 8),
	};
	Weft__V1__Task *none[1];
	con_header_t h;

	(void)state;
	con_model_init(&m, "test");
	feed(&m, 2 * SEC, none, 0, NULL, 0, x, 2);
	assert_int_equal(m.nwarnings, 2);
	assert_int_equal(con_warnings_row(&m, 0)->seq, 2);
	assert_int_equal(con_warnings_row(&m, 1)->seq, 1);
	assert_null(con_warnings_row(&m, 2));
	con_model_header(&m, &h);
	assert_int_equal(h.warnings, 2);
	assert_false(con_warnings_row(&m, 0)->history);
	free(x[0]);
	free(x[1]);
	con_model_fini(&m);
}

/*
 * A console attached late gets the warnings kept so far, marked history;
 * the same history again (a reconnect) lists each once.
 */
static void test_console_model_warning_history(void **state)
{
	con_model_t m;
	Weft__V1__Warning *x[] = {
		warning_msg(1, WEFT_WARN_LONG_POLL, 7),
		warning_msg(2, WEFT_WARN_NEVER_YIELDED, 7),
	};
	Weft__V1__Warning *y[] = { warning_msg(3, WEFT_WARN_LONG_POLL, 8) };
	Weft__V1__Task *none[1];

	(void)state;
	x[0]->history = x[1]->history = true;
	con_model_init(&m, "test");
	feed(&m, 2 * SEC, none, 0, NULL, 0, x, 2);
	feed(&m, 3 * SEC, none, 0, NULL, 0, y, 1);
	feed(&m, 4 * SEC, none, 0, NULL, 0, x, 2);
	assert_int_equal(m.nwarnings, 3);
	assert_false(con_warnings_row(&m, 0)->history);
	assert_true(con_warnings_row(&m, 1)->history);
	assert_true(con_warnings_row(&m, 2)->history);
	free(x[0]);
	free(x[1]);
	free(y[0]);
	con_model_fini(&m);
}

static void test_console_model_timeline(void **state)
{
	con_poll_t polls[CON_TL_TOP];
	con_model_t m;
	weft_event_t ev[2] = {
		/* 50 ms poll ending at 1.250 s on worker 1 */
		{ .ts = 1250 * MS,
		  .a1 = 50 * MS,
		  .worker = 1,
		  .kind = WEFT_EV_POLL },
		/* 100 ms poll ending at 1.350 s on worker 0: two buckets */
		{ .ts = 1350 * MS,
		  .a1 = 100 * MS,
		  .worker = 0,
		  .kind = WEFT_EV_POLL },
	};
	uint64_t b;

	(void)state;
	con_model_init(&m, "test");
	con_model_events(&m, ev, 2);
	assert_int_equal(m.events, 2);
	b = 1350 * MS / CON_TL_BUCKET_NS;
	assert_int_equal(m.tl_last, b);
	assert_int_equal(
		m.workers[1].series->tl_poll_ns[(b - 1) % CON_TL_BUCKETS],
		50 * MS);
	assert_int_equal(m.workers[0].series->tl_poll_ns[b % CON_TL_BUCKETS],
			 50 * MS);
	assert_int_equal(
		m.workers[0].series->tl_poll_ns[(b - 1) % CON_TL_BUCKETS],
		50 * MS);
	assert_int_equal(m.workers[0].series->tl_max_poll[b % CON_TL_BUCKETS],
			 100 * MS);
	con_model_fini(&m);

	/* A poll as long as a corrupt input says, ending near 2^64 ns: it
	 * fills the strip's buckets (the last one cut at 2^64, not wrapped)
	 * and the model does not walk the 1.8e11 buckets since it began
	 * (which took the fuzzer's inputs seconds, and could hang). */
	con_model_init(&m, "test");
	ev[0] = (weft_event_t){ .ts = UINT64_MAX - 5,
				.a1 = UINT64_MAX - 5,
				.worker = 0,
				.kind = WEFT_EV_POLL };
	con_model_events(&m, ev, 1);
	b = (UINT64_MAX - 5) / CON_TL_BUCKET_NS;
	assert_int_equal(m.tl_last, b);
	assert_int_equal(m.workers[0].series->tl_poll_ns[b % CON_TL_BUCKETS],
			 UINT64_MAX - 5 - b * CON_TL_BUCKET_NS);
	assert_int_equal(
		m.workers[0].series->tl_poll_ns[(b - 1) % CON_TL_BUCKETS],
		CON_TL_BUCKET_NS);
	assert_true(con_model_is_consistent(&m));
	con_model_fini(&m);

	/* Polls of bucket 0 (the clock's first 100 ms), then of a bucket
	 * whose slot is the same (a multiple of CON_TL_BUCKETS, on the
	 * strip): bucket 0's polls are not the new strip's (the fuzzer's
	 * input, from a trace whose first events had small times). */
	con_model_init(&m, "test");
	ev[0] = (weft_event_t){ .ts = 1116195, .a1 = 29015, .worker = 1,
				.kind = WEFT_EV_POLL };
	con_model_events(&m, ev, 1);
	b = 4917 * (uint64_t)CON_TL_BUCKETS + 113;
	ev[0] = (weft_event_t){ .ts = b * CON_TL_BUCKET_NS + 5,
				.a1 = 3,
				.worker = 0,
				.kind = WEFT_EV_POLL };
	con_model_events(&m, ev, 1);
	assert_int_equal(m.tl_last, b);
	assert_int_equal(con_model_spike(&m, b - 113, polls, NULL), 0);
	assert_int_equal(con_model_worst_bucket(&m), b);
	assert_true(con_model_is_consistent(&m));
	con_model_fini(&m);
}

static void test_console_model_malformed_ignored(void **state)
{
	con_model_t m;
	Weft__V1__Worker w = WEFT__V1__WORKER__INIT;
	Weft__V1__Worker *ws[] = { &w };
	Weft__V1__Histogram hist = WEFT__V1__HISTOGRAM__INIT;
	uint32_t buckets[200];
	Weft__V1__Task *ts[] = { task_msg(5, "x", 1), task_msg(0, "zero", 1) };
	weft_event_t bad = {
		.ts = 5, .a1 = 99, .worker = 9999, .kind = WEFT_EV_POLL
	};

	(void)state;
	for (int i = 0; i < 200; i++)
		buckets[i] = 1;
	hist.buckets = buckets;
	hist.n_buckets = 200;
	ts[0]->poll_hist = &hist;
	ts[0]->name = NULL;
	ts[0]->state = 77;
	w.index = 100000;
	con_model_init(&m, "test");
	feed(&m, 2 * SEC, ts, 2, ws, 1, NULL, 0);
	assert_int_equal(m.bad_frames, 1);
	assert_int_equal(m.ntasks, 1); /* id 0 is no task */
	assert_non_null(con_model_task(&m, 5)->hist);
	assert_int_equal(con_model_task(&m, 5)->state, 0);
	con_model_events(&m, &bad, 1);
	con_model_frame(&m, NULL);
	assert_true(con_model_is_consistent(&m));
	con_model_fini(&m);
}

/* -------------------------------------------------------------- views */

/*
 * Not inlined: inlined at -O3, GCC takes the text open_memstream() left
 * in the local buf for a pointer to buf itself (-Wdangling-pointer).
 */
static __attribute__((noinline)) char *render(con_session_t *s, int w, int h)
{
	con_grid_t g;
	char *buf = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&buf, &len);

	assert_non_null(fp);
	con_session_resort(s);
	con_grid_init(&g, w, h, true);
	con_screen_draw(s, &g);
	con_grid_print(&g, fp);
	con_grid_fini(&g);
	fclose(fp);
	return buf;
}

static void populated(con_model_t *m)
{
	Weft__V1__Worker w0 = WEFT__V1__WORKER__INIT,
			 w1 = WEFT__V1__WORKER__INIT;
	Weft__V1__WorkerCounters c = WEFT__V1__WORKER_COUNTERS__INIT;
	Weft__V1__Worker *ws[] = { &w0, &w1 };
	Weft__V1__Task *ts[] = { task_msg(1, "ticker", 50),
				 task_msg(2, "lock-bad", 3) };
	Weft__V1__Warning *x[] = {
		warning_msg(1, WEFT_WARN_LOCK_HELD_ACROSS_AWAIT, 2),
	};

	c.polls = 1234;
	w0.counters = &c;
	w1.counters = &c;
	w1.index = 1;
	ts[1]->warnings = 1u << WEFT_WARN_LOCK_HELD_ACROSS_AWAIT;
	con_model_init(m, "replay t.weft");
	feed(m, 2 * SEC, ts, 2, ws, 2, x, 1);
	free(x[0]);
}

/*
 * The blocking pool's line: from the stats when they carry the pool's
 * counts (jobs begun before anyone listened have no start event), from
 * the events otherwise (a trace from before the stats had them).
 */
static void test_console_views_blocking_pool(void **state)
{
	con_model_t m;
	con_session_t s = { .model = &m,
			    .once = true,
			    .ascii = true,
			    .view = CON_VIEW_WORKERS };
	weft_event_t ev[] = {
		{ .ts = 2 * SEC, .kind = WEFT_EV_BLOCKING_END },
		{ .ts = 2 * SEC, .kind = WEFT_EV_BLOCKING_END },
		{ .ts = 2 * SEC, .kind = WEFT_EV_BLOCKING_START },
		{ .ts = 2 * SEC, .kind = WEFT_EV_BLOCKING_START },
		{ .ts = 2 * SEC, .kind = WEFT_EV_BLOCKING_START },
	};
	char *out;

	(void)state;
	populated(&m);
	con_model_events(&m, ev, sizeof(ev) / sizeof(ev[0]));
	out = render(&s, 120, 20);
	/* Events alone: three started, two ended (begun before). */
	assert_non_null(strstr(out, "blocking pool: 1 running, 0 queued "
				    "(3 jobs)"));
	free(out);
	feed_blocking[0] = 3;
	feed_blocking[1] = 2;
	feed_blocking[2] = 7;
	feed(&m, 3 * SEC, NULL, 0, NULL, 0, NULL, 0);
	memset(feed_blocking, 0, sizeof(feed_blocking));
	out = render(&s, 120, 20);
	assert_non_null(strstr(out, "blocking pool: 3 running, 2 queued "
				    "(7 jobs)"));
	free(out);
	con_model_fini(&m);
}

/*
 * Worker indices of four digits (the runtime allows 4,096 workers): the
 * column widens for them, so worker 4095's state sits under STATE as
 * worker 0's does.
 */
static void test_console_views_workers_wide_index(void **state)
{
	con_model_t m;
	con_session_t s = { .model = &m,
			    .once = true,
			    .ascii = true,
			    .view = CON_VIEW_WORKERS };
	Weft__V1__Worker w0 = WEFT__V1__WORKER__INIT,
			 w4095 = WEFT__V1__WORKER__INIT;
	Weft__V1__WorkerCounters c = WEFT__V1__WORKER_COUNTERS__INIT;
	Weft__V1__Worker *ws[] = { &w0, &w4095 };
	const char *rows[] = { "\n 0 ", "\n 4095 " };
	char *out, *head, *state_col;

	(void)state;
	con_model_init(&m, "test");
	c.polls = 5;
	w0.counters = &c;
	w4095.index = 4095;
	w4095.counters = &c;
	feed(&m, 3 * SEC, NULL, 0, ws, 2, NULL, 0);
	out = render(&s, 200, 4200);
	head = strstr(out, " W ");
	assert_non_null(head);
	state_col = strstr(head, "STATE");
	assert_non_null(state_col);
	for (size_t i = 0; i < 2; i++) {
		char *row = strstr(out, rows[i]);
		size_t at = (size_t)(state_col - head);

		assert_non_null(row);
		row++; /* past the newline */
		if (row[at] == ' ' || row[at - 1] != ' ')
			fail_msg("worker row '%.40s' not under '%.40s'", row,
				 head);
	}
	free(out);
	con_model_fini(&m);
}

static void test_console_views_render(void **state)
{
	con_model_t m;
	con_session_t s = { .model = &m, .once = true, .ascii = true };
	char *out;

	(void)state;
	populated(&m);
	s.view = CON_VIEW_WORKERS;
	out = render(&s, 120, 20);
	assert_non_null(strstr(out, "STEALS-IN"));
	assert_non_null(strstr(out, "global queue"));
	free(out);
	s.view = CON_VIEW_TASKS;
	out = render(&s, 120, 20);
	assert_non_null(strstr(out, "lock-bad"));
	assert_non_null(strstr(out, "ticker"));
	free(out);
	s.view = CON_VIEW_WARNINGS;
	out = render(&s, 120, 20);
	assert_non_null(strstr(out, "lock-held-across-await"));
	free(out);
	s.view = CON_VIEW_DETAIL;
	s.detail_task = 2;
	out = render(&s, 120, 40);
	assert_non_null(strstr(out, "task 2  lock-bad"));
	free(out);
	/* A tiny screen: everything clipped, nothing overruns. */
	s.once = false;
	s.help = true;
	out = render(&s, 20, 3);
	free(out);
	con_model_fini(&m);
}

static void test_console_keys_actions(void **state)
{
	con_model_t m;
	con_session_t s = { .model = &m };
	unsigned f;

	(void)state;
	populated(&m);
	assert_int_equal(con_keys_handle(&s, 'q'), CON_QUIT);
	f = con_keys_handle(&s, 't');
	assert_true(f & CON_REDRAW);
	assert_int_equal(s.view, CON_VIEW_TASKS);
	f = con_keys_handle(&s, '>');
	assert_true(f & CON_RESORT);
	assert_int_equal(m.sort_col, CON_COL_NAME);
	con_keys_handle(&s, 'i');
	assert_true(m.sort_invert);
	con_keys_handle(&s, '/');
	assert_true(s.filter_edit);
	con_keys_handle(&s, 'l');
	con_keys_handle(&s, 'o');
	con_keys_handle(&s, 'c');
	f = con_keys_handle(&s, '\n');
	assert_true(f & CON_RESORT);
	assert_false(s.filter_edit);
	assert_string_equal(m.filter, "loc");
	con_model_resort(&m);
	assert_int_equal(m.nlist, 1);
	f = con_keys_handle(&s, '\n'); /* open the selected task */
	assert_int_equal(s.view, CON_VIEW_DETAIL);
	assert_int_equal(s.detail_task, 2);
	con_keys_handle(&s, 27); /* back */
	assert_int_equal(s.view, CON_VIEW_TASKS);
	con_keys_handle(&s, 27); /* clear the filter */
	assert_string_equal(m.filter, "");
	con_keys_handle(&s, 'x');
	assert_int_equal(s.view, CON_VIEW_WARNINGS);
	con_keys_handle(&s, '?');
	assert_true(s.help);
	con_keys_handle(&s, 'j'); /* any key closes the help */
	assert_false(s.help);
	con_keys_handle(&s, 'G');
	con_session_clamp(&s, 40);
	assert_int_equal(s.sel[CON_VIEW_WARNINGS], 0); /* one warning */
	con_model_fini(&m);
}

/* ------------------------------------------------------- incremental */

/* A list built from scratch, for comparison with the incremental one. */
static void full_order(con_model_t *m, const con_task_t **out, size_t *n)
{
	con_model_set_sort(m, m->sort_col, m->sort_invert); /* full */
	con_model_resort(m);
	memcpy(out, m->list, m->nlist * sizeof(*out));
	*n = m->nlist;
}

/*
 * Many rounds of random changes (new tasks, changed figures, finished
 * tasks retired) under every sort column and with a filter: the list
 * that resorting keeps up to date by merging only the changed tasks is
 * the list a full sort gives, and the model stays consistent.
 */
static void test_console_model_incremental_resort(void **state)
{
	enum { ROUNDS = 60, PER = 40, IDS = 600 };
	static const con_task_t *want[IDS + 1];
	static const char *const names[] = { "alpha", "beta", "gamma",
					     "delta" };
	con_model_t m;
	uint32_t seed = 12345;
	uint64_t now = 2 * SEC;

	(void)state;
	con_model_init(&m, "test");
	m.retain_ns = 3 * SEC / 10;
	for (int r = 0; r < ROUNDS; r++) {
		Weft__V1__Task *ts[PER];
		size_t nwant;

		for (int i = 0; i < PER; i++) {
			seed = seed * 1103515245u + 12345u;
			ts[i] = task_msg(1 + (seed >> 8) % IDS,
					 names[(seed >> 4) % 4],
					 (seed >> 12) % 50);
			ts[i]->max_poll_ns = (seed >> 3) % 7;
			ts[i]->state = (seed >> 20) % 3;
			if ((seed >> 24) % 9 == 0) {
				ts[i]->state = WEFT_TASK_DONE;
				ts[i]->finished_ns = now;
			}
		}
		now += SEC / 10;
		feed(&m, now, ts, PER, NULL, 0, NULL, 0);
		if (r % 10 == 3)
			con_model_set_filter(&m, r % 20 == 3 ? "a" : "");
		con_model_set_sort(&m, (con_task_col_t)(r / 6 % CON_COL_MAX),
				   r % 2);
		con_model_resort(&m); /* full, after the sort changed */
		for (int k = 0; k < 3; k++) {
			Weft__V1__Task *more[PER];

			for (int i = 0; i < PER; i++) {
				seed = seed * 1103515245u + 12345u;
				more[i] = task_msg(1 + (seed >> 8) % IDS,
						   names[(seed >> 4) % 4],
						   (seed >> 12) % 50);
			}
			now += SEC / 50;
			feed(&m, now, more, PER, NULL, 0, NULL, 0);
			con_model_resort(&m); /* incremental */
			assert_true(con_model_is_consistent(&m));
			{
				size_t n = m.nlist;
				const con_task_t **got =
					malloc((n + 1) * sizeof(*got));

				assert_non_null(got);
				memcpy(got, m.list, n * sizeof(*got));
				full_order(&m, want, &nwant);
				assert_int_equal(n, nwant);
				assert_memory_equal(got, want,
						    n * sizeof(*got));
				free(got);
			}
		}
	}
	assert_true(m.ntasks > 0);
	con_model_fini(&m);
}

/* ------------------------------------------------------------ watch */

static void test_console_model_watch_events(void **state)
{
	con_model_t m;
	weft_event_t ev[6];
	const weft_event_t *e;

	(void)state;
	con_model_init(&m, "test");
	for (int i = 0; i < 6; i++)
		ev[i] = (weft_event_t){ .ts = 100 + (uint64_t)i,
					.task = i % 2 ? 7 : 8,
					.kind = WEFT_EV_WAKE };
	con_model_events(&m, ev, 3); /* 8, 7, 8 */
	assert_null(con_model_watch_event(&m, 0));
	con_model_watch(&m, 7); /* from the recent ring: one */
	e = con_model_watch_event(&m, 0);
	assert_non_null(e);
	assert_int_equal(e->ts, 101);
	assert_null(con_model_watch_event(&m, 1));
	con_model_events(&m, ev + 3, 3); /* 7, 8, 7 */
	assert_int_equal(m.nwatch, 3);
	assert_int_equal(con_model_watch_event(&m, 0)->ts, 105);
	assert_int_equal(con_model_watch_event(&m, 1)->ts, 103);
	assert_int_equal(con_model_watch_event(&m, 2)->ts, 101);
	/* More than the ring holds: the newest stay. */
	for (int i = 0; i < CON_WATCH_EVENTS + 10; i++) {
		weft_event_t x = { .ts = 1000 + (uint64_t)i,
				   .task = 7,
				   .kind = WEFT_EV_POLL,
				   .a1 = 5 };

		con_model_events(&m, &x, 1);
	}
	assert_int_equal(con_model_watch_event(&m, 0)->ts,
			 1000 + CON_WATCH_EVENTS + 9);
	assert_non_null(con_model_watch_event(&m, CON_WATCH_EVENTS - 1));
	assert_null(con_model_watch_event(&m, CON_WATCH_EVENTS));
	con_model_watch_fill(&m, ev, 2);
	assert_int_equal(con_model_watch_event(&m, 0)->ts, 101);
	con_model_watch(&m, 0);
	assert_null(con_model_watch_event(&m, 0));
	con_model_fini(&m);

	/* The recent ring grows as events come (1024, 2048, ...) and wraps
	 * only at CON_RECENT_EVENTS: a task watched later finds its events
	 * in order, through the growth and after the wrap. */
	con_model_init(&m, "test");
	for (uint64_t i = 0; i < CON_RECENT_EVENTS + 3000; i++) {
		weft_event_t x = { .ts = i,
				   .task = i % 100 ? 10 : 9,
				   .kind = WEFT_EV_WAKE };

		con_model_events(&m, &x, 1);
		if (i == 1499) { /* grown once: 15 of task 9 so far */
			con_model_watch(&m, 9);
			assert_int_equal(m.nwatch, 15);
			for (size_t k = 0; k < 15; k++)
				assert_int_equal(
					con_model_watch_event(&m, k)->ts,
					1400 - 100 * k);
			con_model_watch(&m, 0);
		}
	}
	assert_true(con_model_is_consistent(&m));
	con_model_watch(&m, 9);
	/* The ring holds the newest CON_RECENT_EVENTS: task 9's from
	 * 3000 on, of which the watch keeps the newest 256. */
	assert_int_equal(m.nwatch, (CON_RECENT_EVENTS + 3000 - 3000) / 100 + 1);
	assert_int_equal(con_model_watch_event(&m, 0)->ts,
			 (CON_RECENT_EVENTS + 2999) / 100 * 100);
	assert_int_equal(con_model_watch_event(&m, CON_WATCH_EVENTS - 1)->ts,
			 (CON_RECENT_EVENTS + 2999) / 100 * 100 -
				 100 * (CON_WATCH_EVENTS - 1));
	con_model_fini(&m);
}

/* ------------------------------------------------------------ spike */

static void test_console_model_spike(void **state)
{
	con_model_t m;
	con_poll_t top[CON_TL_TOP];
	uint64_t b = 20, polls;
	size_t n;

	(void)state;
	con_model_init(&m, "test");
	/* 100 short polls in bucket 20, then a 30 ms one in bucket 21
	 * (ending in it: it spans 20 and 21), one of 5 ms in 20. */
	for (uint64_t i = 0; i < 100; i++) {
		weft_event_t e = { .ts = b * CON_TL_BUCKET_NS + 1000 + i * 100,
				   .a1 = 10 + i,
				   .task = 1000 + i,
				   .worker = (uint16_t)(i % 2),
				   .kind = WEFT_EV_POLL };

		con_model_events(&m, &e, 1);
	}
	{
		weft_event_t e[2] = {
			{ .ts = b * CON_TL_BUCKET_NS + 90 * MS,
			  .a1 = 5 * MS,
			  .task = 2,
			  .worker = 1,
			  .kind = WEFT_EV_POLL },
			{ .ts = (b + 1) * CON_TL_BUCKET_NS + 10 * MS,
			  .a1 = 30 * MS,
			  .task = 3,
			  .worker = 0,
			  .kind = WEFT_EV_POLL },
		};

		con_model_events(&m, e, 2);
	}
	n = con_model_spike(&m, b, top, &polls);
	assert_int_equal(polls, 102);
	assert_int_equal(n, CON_TL_TOP);
	assert_int_equal(top[0].task, 3); /* longest first */
	assert_int_equal(top[0].dur_ns, 30 * MS);
	assert_int_equal(top[1].task, 2);
	assert_int_equal(top[2].dur_ns, 10 + 99);
	for (size_t i = 1; i < n; i++)
		assert_true(top[i - 1].dur_ns >= top[i].dur_ns);
	/* The shortest kept is the 30th longest of the short ones. */
	assert_int_equal(top[n - 1].dur_ns, 10 + 100 - (CON_TL_TOP - 2));
	n = con_model_spike(&m, b + 1, top, &polls);
	assert_int_equal(n, 1);
	assert_int_equal(polls, 1);
	assert_int_equal(con_model_worst_bucket(&m), b + 1);
	assert_int_equal(con_model_spike(&m, b + 2, top, NULL), 0);
	assert_int_equal(con_model_spike(&m, 3, top, NULL), 0);
	/* The strip moves on: bucket b leaves it and is forgotten. */
	{
		weft_event_t e = { .ts = (b + CON_TL_BUCKETS + 1) *
					 CON_TL_BUCKET_NS,
				   .a1 = 1,
				   .task = 9,
				   .kind = WEFT_EV_POLL };

		con_model_events(&m, &e, 1);
	}
	assert_int_equal(con_model_spike(&m, b, top, NULL), 0);
	con_model_fini(&m);
}

/* Timeline cursor, spike list, detail and back, with the keys. */
static void test_console_keys_timeline(void **state)
{
	con_model_t m;
	con_session_t s = { .model = &m, .once = true, .ascii = true };
	weft_event_t e[2] = {
		{ .ts = 5 * SEC + 50 * MS,
		  .a1 = 20 * MS,
		  .task = 2,
		  .worker = 1,
		  .kind = WEFT_EV_POLL },
		{ .ts = 5 * SEC + 150 * MS,
		  .a1 = 1000,
		  .task = 1,
		  .worker = 0,
		  .kind = WEFT_EV_POLL },
	};
	uint64_t newest = (5 * SEC + 150 * MS) / CON_TL_BUCKET_NS;
	char *out;

	(void)state;
	populated(&m);
	con_model_events(&m, e, 2);
	assert_int_equal(con_keys_handle(&s, 'm') & CON_REDRAW, CON_REDRAW);
	assert_int_equal(s.view, CON_VIEW_TIMELINE);
	assert_int_equal(con_timeline_cursor(&s), newest);
	con_keys_handle(&s, 'l'); /* already the newest: stays */
	assert_int_equal(con_timeline_cursor(&s), newest);
	con_keys_handle(&s, 'h');
	assert_int_equal(con_timeline_cursor(&s), newest - 1);
	con_keys_handle(&s, KEY_LEFT); /* the oldest bucket: stays */
	assert_int_equal(con_timeline_cursor(&s), newest - 1);
	con_keys_handle(&s, KEY_RIGHT); /* the newest: follows it */
	assert_int_equal(con_timeline_cursor(&s), newest);
	assert_int_equal(s.tl_cursor, 0);
	con_keys_handle(&s, KEY_LEFT);
	assert_int_equal(con_timeline_cursor(&s), newest - 1);
	out = render(&s, 120, 20);
	assert_non_null(strstr(out, "longest 20ms by task 2 lock-bad"));
	free(out);
	con_keys_handle(&s, '\n');
	assert_int_equal(s.view, CON_VIEW_SPIKE);
	assert_int_equal(s.spike_bucket, newest - 1);
	out = render(&s, 120, 20);
	assert_non_null(strstr(out, "lock-bad"));
	assert_non_null(strstr(out, "    20ms       2 lock-bad"));
	free(out);
	con_keys_handle(&s, '\n'); /* the poll's task */
	assert_int_equal(s.view, CON_VIEW_DETAIL);
	assert_int_equal(s.detail_task, 2);
	con_keys_handle(&s, 27);
	assert_int_equal(s.view, CON_VIEW_SPIKE);
	con_keys_handle(&s, 27);
	assert_int_equal(s.view, CON_VIEW_TIMELINE);
	/* h and l are not view letters any more; 0 picks no view. */
	con_keys_handle(&s, 0);
	assert_int_equal(s.view, CON_VIEW_TIMELINE);
	con_model_fini(&m);
}

/* The detail: the lock named by a warning, and the task's events. */
static void test_console_views_detail(void **state)
{
	con_model_t m;
	con_session_t s = { .model = &m,
			    .once = true,
			    .ascii = true,
			    .view = CON_VIEW_DETAIL,
			    .detail_task = 2 };
	Weft__V1__Task *ts[] = { task_msg(2, "lock-bad", 3) };
	Weft__V1__Warning *x =
		warning_msg(9, WEFT_WARN_LOCK_HELD_ACROSS_AWAIT, 2);
	weft_event_t ev[] = {
		{ .ts = 2 * SEC,
		  .task = 2,
		  .a1 = 0x1234,
		  .kind = WEFT_EV_LOCK_ACQUIRE },
		/* At the warning's time: ties 0x1234 to "accounts". */
		{ .ts = 2 * SEC + 9,
		  .task = 2,
		  .a1 = 0x1234,
		  .a2 = 1,
		  .kind = WEFT_EV_LOCK_HELD_PENDING },
		{ .ts = 2 * SEC + 10,
		  .task = 2,
		  .a1 = 4000,
		  .a2 = 0,
		  .kind = WEFT_EV_POLL },
		{ .ts = 2 * SEC + 11,
		  .task = 2,
		  .a1 = 0x99,
		  .kind = WEFT_EV_LOCK_ACQUIRE },
		{ .ts = 2 * SEC + 12,
		  .task = 2,
		  .a1 = 0x99,
		  .kind = WEFT_EV_LOCK_RELEASE },
		{ .ts = 2 * SEC + 20, .task = 3, .kind = WEFT_EV_POLL },
	};
	char *out;

	(void)state;
	x->detail = "held lock \"accounts\" (taken at app.c:42) across an "
		    "await, 1.50 ms so far";
	x->value_ns = 1500 * 1000;
	ts[0]->locks_held = 1;
	populated(&m);
	con_model_events(&m, ev, sizeof(ev) / sizeof(ev[0]));
	feed(&m, 3 * SEC, ts, 1, NULL, 0, &x, 1);
	free(x);
	con_session_watch(&s);
	assert_int_equal(m.watch_task, 2);
	out = render(&s, 120, 40);
	assert_non_null(strstr(out, "locks held across an await: 1"));
	assert_non_null(strstr(out, "\"accounts\"  taken at app.c:42  held "
				    "1.5ms"));
	assert_non_null(strstr(out, "recent events (newest first, 5 seen"));
	/* Taken, not released: held now, named through the warning. */
	assert_non_null(strstr(out, "held now: \"accounts\"  taken at "
				    "app.c:42  for 1.00s"));
	/* Taken and released: not held. */
	assert_null(strstr(out, "held now: lock 0x99"));
	assert_non_null(strstr(out, "took lock 0x1234"));
	assert_non_null(strstr(out, "polled 4.0us -> pending"));
	free(out);
	con_model_fini(&m);
}

/*
 * A pending POLL naming its await site (issue 21): the detail says where
 * the task parked, by the line the stream's AWAIT_SITE announced; a site
 * it never announced is not known, never another site's line.
 */
static void test_console_views_detail_await_sites(void **state)
{
	con_model_t m;
	con_session_t s = { .model = &m,
			    .once = true,
			    .ascii = true,
			    .view = CON_VIEW_DETAIL,
			    .detail_task = 2 };
	Weft__V1__Task *ts[] = { task_msg(2, "parker", 3) };
	weft_event_t ev[] = {
		/* The task field is the site's id, no task's. */
		{ .ts = 2 * SEC,
		  .task = 5,
		  .a1 = 0x4000,
		  .a2 = 77,
		  .kind = WEFT_EV_AWAIT_SITE },
		{ .ts = 2 * SEC,
		  .task = 2,
		  .a1 = 4000,
		  .a2 = 5u << WEFT_POLL_SITE_SHIFT,
		  .kind = WEFT_EV_POLL },
		{ .ts = 2 * SEC + 10,
		  .task = 2,
		  .a1 = 3000,
		  .a2 = 6u << WEFT_POLL_SITE_SHIFT,
		  .kind = WEFT_EV_POLL },
	};
	char *out;

	(void)state;
	populated(&m);
	con_model_events(&m, ev, sizeof(ev) / sizeof(ev[0]));
	feed(&m, 3 * SEC, ts, 1, NULL, 0, NULL, 0);
	con_session_watch(&s);
	out = render(&s, 120, 40);
	assert_non_null(strstr(out, "recent events (newest first, 2 seen"));
	assert_non_null(
		strstr(out, "polled 4.0us -> pending, parked at line 77"));
	assert_non_null(strstr(out,
			       "polled 3.0us -> pending, parked (where not "
			       "known)"));
	free(out);
	con_model_fini(&m);
}

/*
 * An await site the model learnt from an Update's sites (Site id
 * WEFT_WIRE_AWAIT_SITE_BASE + 9), not from an AWAIT_SITE event: a model
 * saved and loaded (a side-index checkpoint) that then reads a POLL
 * naming it says the line, as the model it was saved from does.
 * Without the await sites saved with the model: where not known.
 */
static void test_console_views_detail_await_sites_saved(void **state)
{
	con_model_t m, got;
	con_saved_t sv;
	Weft__V1__Update u = WEFT__V1__UPDATE__INIT;
	Weft__V1__Stats st = WEFT__V1__STATS__INIT;
	Weft__V1__Frame f = WEFT__V1__FRAME__INIT;
	Weft__V1__Site site = WEFT__V1__SITE__INIT, *sites[] = { &site };
	/* Enough tasks for the saved counts to pass its checks against
	 * the bytes (a model of one task has its tables' room larger). */
	enum { NT = 2000 };
	Weft__V1__Task **ts = calloc(NT, sizeof(*ts));
	weft_event_t ev = { .ts = 4 * SEC,
			    .task = 2,
			    .a1 = 4000,
			    .a2 = 9u << WEFT_POLL_SITE_SHIFT,
			    .kind = WEFT_EV_POLL };
	con_model_t *models[] = { &m, &got };

	(void)state;
	assert_non_null(ts);
	for (unsigned i = 0; i < NT; i++)
		ts[i] = task_msg(2 + i, "parker", 3);
	/* A model fed this one Update. */
	con_model_init(&m, "saved");
	m.mode = CON_MODE_REPLAY;
	site.id = WEFT_WIRE_AWAIT_SITE_BASE + 9;
	site.file = "srv.c";
	site.line = 88;
	st.now_ns = 3 * SEC;
	st.start_ns = 1 * SEC;
	st.workers = 2;
	u.stats = &st;
	u.tasks = ts;
	u.n_tasks = NT;
	u.sites = sites;
	u.n_sites = 1;
	f.body_case = WEFT__V1__FRAME__BODY_UPDATE;
	f.update = &u;
	con_model_frame(&m, &f);
	for (unsigned i = 0; i < NT; i++)
		free(ts[i]);
	free(ts);
	con_model_save(&sv, &m);
	assert_true(con_model_load(&got, sv.p, sv.len));
	con_saved_free(&sv);
	for (unsigned i = 0; i < 2; i++) {
		con_session_t s = { .model = models[i],
				    .once = true,
				    .ascii = true,
				    .view = CON_VIEW_DETAIL,
				    .detail_task = 2 };
		char *out;

		con_model_events(models[i], &ev, 1);
		con_session_watch(&s);
		out = render(&s, 120, 40);
		assert_non_null(strstr(
			out, "polled 4.0us -> pending, parked at line 88"));
		free(out);
	}
	con_model_fini(&got);
	con_model_fini(&m);
}

/*
 * View @v of @s, drawn 140 columns wide, holds every string of @has and
 * none of @hasnt (both NULL-terminated, may be NULL).
 */
static void assert_view(con_session_t *s, con_view_id_t v,
			const char *const *has, const char *const *hasnt)
{
	char *out;

	s->view = v;
	out = render(s, 140, 40);
	for (; has && *has; has++)
		if (!strstr(out, *has))
			fail_msg("no \"%s\" in:\n%s", *has, out);
	for (; hasnt && *hasnt; hasnt++)
		if (strstr(out, *hasnt))
			fail_msg("\"%s\" in:\n%s", *hasnt, out);
	free(out);
}

/*
 * Workers view: BUSY% is the runtime's time not parked (busy_ratio),
 * POLL% the time in polls from the POLL events, over the last whole
 * second; "-" while no events tell.  A worker spinning on a task that
 * wakes itself is busy all the time with half of it in polls here.
 */
static void test_console_views_busy_and_poll(void **state)
{
	con_model_t m;
	con_session_t s = { .model = &m, .once = true, .ascii = true };
	Weft__V1__Worker w0 = WEFT__V1__WORKER__INIT,
			 w1 = WEFT__V1__WORKER__INIT;
	Weft__V1__Worker *ws[] = { &w0, &w1 };
	weft_event_t ev[13];

	(void)state;
	con_model_init(&m, "test");
	w0.busy_ratio = 0.97;
	w1.index = 1;
	w1.busy_ratio = 0.02;
	feed(&m, 2 * SEC, NULL, 0, ws, 2, NULL, 0);
	assert_true(con_model_poll_ratio(&m, 0) < 0);
	assert_view(&s, CON_VIEW_WORKERS,
		    (const char *[]){ "BUSY% POLL%", " 97%     - ", NULL },
		    NULL);
	/* Worker 0: 50 ms of polls in each bucket from 1.1 s to 2.3 s. */
	for (int i = 0; i < 13; i++)
		ev[i] = (weft_event_t){ .ts = (1100 + 100 * (uint64_t)i) * MS +
					      60 * MS,
					.a1 = 50 * MS,
					.kind = WEFT_EV_POLL };
	con_model_events(&m, ev, 13);
	feed(&m, 2350 * MS, NULL, 0, ws, 2, NULL, 0);
	/* The whole buckets 1.3 s to 2.2 s: the first and the newest are
	 * partial. */
	assert_true(con_model_poll_ratio(&m, 0) > 0.499 &&
		    con_model_poll_ratio(&m, 0) < 0.501);
	assert_true(con_model_poll_ratio(&m, 1) == 0);
	assert_view(&s, CON_VIEW_WORKERS,
		    (const char *[]){ " 97%   50% ", "  2%    0% ", NULL },
		    NULL);
	/* Gone idle: the second after its last poll holds none. */
	feed(&m, 4 * SEC, NULL, 0, ws, 2, NULL, 0);
	assert_true(con_model_poll_ratio(&m, 0) == 0);
	/* The timeline says what its strip is. */
	assert_view(&s, CON_VIEW_TIMELINE,
		    (const char *[]){ "time in polls per 100ms", NULL }, NULL);
	con_model_fini(&m);
}

/*
 * A task its own record calls idle while a worker is in a poll of it (a
 * hung poll: the record is where its last poll left it) is shown
 * running, on that worker: its idle time stops where that poll began,
 * and sorting by STATE, WORKER or IDLE goes by what is shown.
 */
static void test_console_model_running_not_idle(void **state)
{
	con_model_t m;
	con_session_t s = {
		.model = &m, .once = true, .ascii = true, .view = CON_VIEW_TASKS
	};
	Weft__V1__Worker w0 = WEFT__V1__WORKER__INIT,
			 w1 = WEFT__V1__WORKER__INIT;
	Weft__V1__Worker *ws[] = { &w0, &w1 };
	Weft__V1__Task *ts[] = { task_msg(1, "hung", 3),
				 task_msg(2, "parked", 3),
				 task_msg(3, "queued", 3) };
	const con_task_t *hung;
	char *out;

	(void)state;
	con_model_init(&m, "test");
	/* Idle from 1.5 s; worker 0 in a poll of it since 1.8 s. */
	ts[0]->idle_ns = 100 * MS;
	ts[0]->idle_since_ns = 1500 * MS;
	ts[0]->last_worker = 5;
	ts[1]->idle_since_ns = 1900 * MS;
	ts[1]->last_worker = 1;
	ts[2]->state = WEFT_TASK_SCHEDULED;
	ts[2]->last_worker = 3;
	w0.state = 0;
	w0.current_task = 1;
	w0.poll_started_ns = 1800 * MS;
	w1.index = 1;
	w1.state = 2;
	feed(&m, 2 * SEC, ts, 3, ws, 2, NULL, 0);
	hung = con_model_task(&m, 1);
	assert_non_null(hung);
	assert_string_equal(con_task_status_name(&m, hung), "running");
	assert_int_equal(con_task_idle_ns(&m, hung), 400 * MS);
	/* Three seconds on, still in that poll: not a nanosecond more. */
	feed(&m, 5 * SEC, NULL, 0, ws, 2, NULL, 0);
	assert_int_equal(con_task_idle_ns(&m, hung), 400 * MS);
	assert_int_equal(con_task_idle_ns(&m, con_model_task(&m, 2)),
			 3100 * MS);
	out = render(&s, 160, 10);
	assert_non_null(strstr(out, "hung          running     0 "));
	assert_non_null(strstr(out, "400ms"));
	free(out);
	/* By state: idle, scheduled, running. */
	con_model_set_sort(&m, CON_COL_STATE, false);
	con_model_resort(&m);
	assert_int_equal(m.list[0]->id, 2);
	assert_int_equal(m.list[1]->id, 3);
	assert_int_equal(m.list[2]->id, 1);
	/* By worker: 0 (polling it), 1, 3 (their last). */
	con_model_set_sort(&m, CON_COL_WORKER, false);
	con_model_resort(&m);
	assert_int_equal(m.list[0]->id, 1);
	assert_int_equal(m.list[1]->id, 2);
	assert_int_equal(m.list[2]->id, 3);
	/* By idle: queued (0), hung (400 ms), parked (3.1 s). */
	con_model_set_sort(&m, CON_COL_IDLE, false);
	con_model_resort(&m);
	assert_int_equal(m.list[0]->id, 3);
	assert_int_equal(m.list[1]->id, 1);
	assert_int_equal(m.list[2]->id, 2);
	/* The poll ended (pending): idle again from its end, 5.2 s. */
	w0.state = 2;
	w0.current_task = 0;
	ts[0] = task_msg(1, "hung", 4);
	ts[0]->idle_ns = 400 * MS;
	ts[0]->idle_since_ns = 5200 * MS;
	feed(&m, 5500 * MS, ts, 1, ws, 2, NULL, 0);
	hung = con_model_task(&m, 1);
	assert_string_equal(con_task_status_name(&m, hung), "idle");
	assert_int_equal(con_task_idle_ns(&m, hung), 700 * MS);
	con_model_fini(&m);
}

/*
 * Nothing prints WEFT_EVENT_NO_WORKER as a number (a warning about no
 * worker, a task never polled), and a task that ended cancelled reads
 * "cancelled", not "done".
 */
static void test_console_views_no_worker_and_cancelled(void **state)
{
	con_model_t m;
	con_session_t s = { .model = &m, .once = true, .ascii = true };
	Weft__V1__Task *ts[] = { task_msg(3, "hung", 4),
				 task_msg(4, "finished", 2),
				 task_msg(5, "never-polled", 0) };
	Weft__V1__Warning *x = warning_msg(5, WEFT_WARN_EVENTS_DROPPED, 0);
	const char *const no_65535[] = { "65535", NULL };

	(void)state;
	ts[0]->state = WEFT_TASK_DONE;
	ts[0]->status = -ECANCELED;
	ts[0]->finished_ns = 2 * SEC;
	ts[1]->state = WEFT_TASK_DONE;
	ts[1]->finished_ns = 2 * SEC;
	ts[2]->last_worker = WEFT_EVENT_NO_WORKER;
	x->worker = WEFT_EVENT_NO_WORKER;
	x->task_name = "";
	x->detail = "1234 events dropped";
	con_model_init(&m, "test");
	feed(&m, 2 * SEC, ts, 3, NULL, 0, &x, 1);
	free(x);
	assert_view(&s, CON_VIEW_WARNINGS,
		    (const char *[]){ "events-dropped", "   - ", NULL },
		    no_65535);
	assert_view(&s, CON_VIEW_TASKS,
		    (const char *[]){ "hung          cancelled",
				      "finished      done", NULL },
		    no_65535);
	s.detail_task = 3;
	assert_view(&s, CON_VIEW_DETAIL,
		    (const char *[]){ "task 3  hung  (future, cancelled)",
				      NULL },
		    NULL);
	s.detail_task = 5;
	assert_view(&s, CON_VIEW_DETAIL,
		    (const char *[]){ "last worker -", NULL }, no_65535);
	con_model_fini(&m);
}

/*
 * Where a task is parked (issue 18): its own column in the task list
 * (the file's end kept, with the line) and a line in the detail; an
 * idle task's idle time counts the stretch under way, from the end of
 * its last pending poll; a record that says it is parked nowhere clears
 * the site.
 */
static void test_console_views_parked_at(void **state)
{
	con_model_t m;
	con_session_t s = { .model = &m, .once = true, .ascii = true };
	Weft__V1__Task *ts[] = { task_msg(7, "conn", 3) };
	const con_task_t *t;

	(void)state;
	ts[0]->parked_file = "srv/conn.c";
	ts[0]->parked_line = 88;
	ts[0]->idle_ns = 500 * MS;
	ts[0]->idle_since_ns = 1 * SEC;
	con_model_init(&m, "test");
	feed(&m, 3 * SEC, ts, 1, NULL, 0, NULL, 0);
	t = con_model_task(&m, 7);
	assert_non_null(t);
	assert_int_equal(con_task_idle_ns(&m, t), 2500 * MS);
	assert_view(&s, CON_VIEW_TASKS,
		    (const char *[]){ "PARKED AT", "conn.c:88", NULL }, NULL);
	s.detail_task = 7;
	assert_view(&s, CON_VIEW_DETAIL,
		    (const char *[]){ "parked at srv/conn.c:88", NULL }, NULL);

	ts[0] = task_msg(7, "conn", 4);
	ts[0]->state = WEFT_TASK_SCHEDULED;
	ts[0]->idle_ns = 2500 * MS;
	feed(&m, 4 * SEC, ts, 1, NULL, 0, NULL, 0);
	t = con_model_task(&m, 7);
	assert_int_equal(con_task_idle_ns(&m, t), 2500 * MS);
	assert_view(&s, CON_VIEW_TASKS, NULL,
		    (const char *[]){ "conn.c:88", NULL });
	con_model_fini(&m);
}

/*
 * A task idle since before anyone listened (known from the runtime's
 * list: spawn_unseen, no idle stretch heard): its idle time is shown
 * "?", and it sorts as the longest idle, above one heard idle for 2 s.
 * Once heard parking, its time is known again.
 */
static void test_console_views_idle_unknown(void **state)
{
	con_model_t m;
	con_session_t s = { .model = &m, .once = true, .ascii = true };
	Weft__V1__Task *ts[] = { task_msg(7, "hung", 0),
				 task_msg(8, "slow", 3) };
	const con_task_t *t;

	(void)state;
	ts[0]->spawn_unseen = 1;
	ts[1]->idle_since_ns = 1 * SEC;
	con_model_init(&m, "test");
	feed(&m, 3 * SEC, ts, 2, NULL, 0, NULL, 0);
	t = con_model_task(&m, 7);
	assert_non_null(t);
	assert_true(con_task_idle_unknown(&m, t));
	assert_false(con_task_idle_unknown(&m, con_model_task(&m, 8)));
	con_model_set_sort(&m, CON_COL_IDLE, true);
	con_model_resort(&m);
	assert_int_equal(m.list[0]->id, 7);
	assert_view(&s, CON_VIEW_TASKS, (const char *[]){ "hung", NULL }, NULL);
	s.detail_task = 7;
	assert_view(&s, CON_VIEW_DETAIL,
		    (const char *[]){ "idle ? (since before anyone listened)",
				      NULL },
		    NULL);
	ts[0] = task_msg(7, "hung", 1);
	ts[0]->spawn_unseen = 1;
	ts[0]->idle_since_ns = 2 * SEC;
	feed(&m, 4 * SEC, ts, 1, NULL, 0, NULL, 0);
	t = con_model_task(&m, 7);
	assert_false(con_task_idle_unknown(&m, t));
	assert_int_equal(con_task_idle_ns(&m, t), 2 * SEC);
	con_model_fini(&m);
}

/* A task of spawn site @file:@line, parked at @pfile:@pline (0: none). */
static Weft__V1__Task *site_task(uint64_t id, const char *name,
				 const char *file, uint32_t line,
				 uint32_t state, const char *pfile,
				 uint32_t pline, uint64_t spawned)
{
	Weft__V1__Task *t = task_msg(id, name, 1);

	t->file = (char *)file;
	t->line = line;
	t->state = state;
	t->parked_file = (char *)pfile;
	t->parked_line = pline;
	t->spawned_ns = spawned;
	return t;
}

/*
 * The tasks by spawn site (issue 18, for the task-leak warning): one
 * group per site with live tasks, counts by state, the oldest's name and
 * age, the most common parked-at line, the warnings OR'd; finished tasks
 * left out; by live count, most first, by default; sort, invert and
 * filter; kept up to date as tasks change and finish; then the view and
 * its keys: s shows it and takes it back, Enter filters the task list to
 * the site (app.c:12, not app.c:120).
 */
static void test_console_model_groups(void **state)
{
	con_model_t m;
	con_session_t s = { .model = &m, .once = true, .ascii = true };
	Weft__V1__Task *ts[] = {
		/* leak.c:12: four live (one scheduled), one done. */
		site_task(1, "helper", "leak.c", 12, WEFT_TASK_IDLE, "leak.c",
			  30, 1500 * MS),
		site_task(2, "helper", "leak.c", 12, WEFT_TASK_IDLE, "leak.c",
			  30, 1200 * MS),
		site_task(3, "helper2", "leak.c", 12, WEFT_TASK_SCHEDULED,
			  "leak.c", 31, 1800 * MS),
		site_task(4, "helper", "leak.c", 12, WEFT_TASK_IDLE, "", 0,
			  1900 * MS),
		site_task(5, "helper", "leak.c", 12, WEFT_TASK_DONE, "leak.c",
			  31, 1000 * MS),
		/* leak.c:120: one running, with a warning. */
		site_task(6, "other", "leak.c", 120, WEFT_TASK_RUNNING, "", 0,
			  1700 * MS),
		/* main.c:5: two idle, parked at two lines (a tie). */
		site_task(7, "conn", "main.c", 5, WEFT_TASK_IDLE, "srv.c", 9,
			  1600 * MS),
		site_task(8, "conn", "main.c", 5, WEFT_TASK_IDLE, "srv.c", 7,
			  1650 * MS),
	};
	const con_group_t *g;
	char buf[128];
	unsigned f;

	(void)state;
	ts[1]->warnings = 1u << WEFT_WARN_TASK_LEAK;
	ts[5]->warnings = 1u << WEFT_WARN_LONG_POLL;
	ts[4]->finished_ns = 1900 * MS;
	con_model_init(&m, "test");
	feed(&m, 2 * SEC, ts, 8, NULL, 0, NULL, 0);
	/* Not built while nobody shows them... */
	con_model_resort(&m);
	assert_int_equal(m.ngroup_list, 0);
	/* ...and built on demand. */
	con_model_groups_resort(&m);
	assert_int_equal(m.ngroups, 3);
	assert_int_equal(m.ngroup_list, 3);
	g = m.group_list[0];
	assert_string_equal(con_group_site(g, buf, sizeof(buf)), "leak.c:12");
	assert_int_equal(g->live, 4);
	assert_int_equal(g->idle, 3);
	assert_int_equal(g->scheduled, 1);
	assert_int_equal(g->running, 0);
	/* The oldest live one (task 5, older, is done). */
	assert_int_equal(g->oldest_id, 2);
	assert_int_equal(g->oldest_spawned_ns, 1200 * MS);
	assert_string_equal(g->name, "helper");
	/* Two at leak.c:30, one at :31 (the done one not counted). */
	assert_string_equal(g->parked_file, "leak.c");
	assert_int_equal(g->parked_line, 30);
	assert_int_equal(g->parked_count, 2);
	assert_int_equal(g->warnings, 1u << WEFT_WARN_TASK_LEAK);
	g = m.group_list[1];
	assert_string_equal(con_group_site(g, buf, sizeof(buf)), "main.c:5");
	assert_int_equal(g->live, 2);
	/* A tie: the first line. */
	assert_int_equal(g->parked_line, 7);
	assert_int_equal(g->parked_count, 1);
	g = m.group_list[2];
	assert_string_equal(con_group_site(g, buf, sizeof(buf)), "leak.c:120");
	assert_int_equal(g->running, 1);
	assert_int_equal(g->parked_line, 0);
	assert_string_equal(con_fmt_warning_bits(g->warnings, buf, sizeof(buf)),
			    weft_warning_kind_name(WEFT_WARN_LONG_POLL));

	/* Inverted: the fewest first; by site; filtered. */
	con_model_groups_set_sort(&m, CON_GCOL_LIVE, false);
	con_model_groups_resort(&m);
	assert_int_equal(m.group_list[0]->live, 1);
	con_model_groups_set_sort(&m, CON_GCOL_SITE, false);
	con_model_groups_resort(&m);
	assert_string_equal(m.group_list[0]->file, "leak.c");
	assert_int_equal(m.group_list[0]->line, 12);
	assert_int_equal(m.group_list[1]->line, 120);
	con_model_groups_set_sort(&m, CON_GCOL_OLDEST, true);
	con_model_groups_resort(&m);
	assert_int_equal(m.group_list[0]->line, 12); /* spawned 1.2 s */
	con_model_groups_set_filter(&m, "main");
	con_model_groups_resort(&m);
	assert_int_equal(m.ngroup_list, 1);
	assert_int_equal(m.group_list[0]->line, 5);
	con_model_groups_set_filter(&m, "leak.c:12");
	con_model_groups_resort(&m);
	assert_int_equal(m.ngroup_list, 2); /* a substring: :120 too */
	con_model_groups_set_filter(&m, "");
	con_model_groups_set_sort(&m, CON_GCOL_LIVE, true);

	/* Tasks finish and come: the groups follow. */
	ts[0] = site_task(1, "helper", "leak.c", 12, WEFT_TASK_DONE, "", 0,
			  1500 * MS);
	ts[0]->finished_ns = 2500 * MS;
	ts[1] = site_task(9, "fresh", "new.c", 1, WEFT_TASK_IDLE, "", 0,
			  2900 * MS);
	feed(&m, 3 * SEC, ts, 2, NULL, 0, NULL, 0);
	con_model_groups_resort(&m);
	assert_int_equal(m.ngroups, 4);
	assert_int_equal(m.group_list[0]->live, 3);
	assert_true(con_model_is_consistent(&m));

	/* The view, through the keys. */
	s.view = CON_VIEW_TASKS;
	f = con_keys_handle(&s, 's');
	assert_true(f & CON_RESORT);
	assert_int_equal(s.view, CON_VIEW_SITES);
	assert_view(&s, CON_VIEW_SITES,
		    (const char *[]){ "SPAWNED AT", "LIVEv", "OLDEST",
				      "MOST PARKED AT", "leak.c:12",
				      "leak.c:30 (1)", "task-leak", NULL },
		    NULL);
	{
		char *out = render(&s, 140, 40);
		const char *a = strstr(out, "leak.c:12 "),
			   *b = strstr(out, "main.c:5 ");

		/* The most live tasks first; the oldest 1.2 s ago at 3 s. */
		assert_non_null(a);
		assert_non_null(b);
		assert_true(a < b);
		if (!strstr(a, "1.80s"))
			fail_msg("%s", out);
		free(out);
	}
	con_keys_handle(&s, 'i'); /* the fewest first */
	assert_false(m.group_sort_invert);
	con_keys_handle(&s, '<');
	assert_int_equal(m.group_sort_col, CON_GCOL_RUNNING);
	con_keys_handle(&s, 'i');
	con_keys_handle(&s, '>');
	con_keys_handle(&s, '/');
	assert_true(s.filter_edit);
	con_keys_handle(&s, 'l');
	con_keys_handle(&s, 'e');
	con_keys_handle(&s, '\n');
	assert_string_equal(m.group_filter, "le");
	assert_int_equal(s.view, CON_VIEW_SITES);
	con_session_resort(&s);
	assert_int_equal(m.ngroup_list, 2); /* leak.c:12, :120 */
	/* Enter: the task list, filtered to the first site. */
	s.sel[CON_VIEW_SITES] = 0;
	f = con_keys_handle(&s, '\n');
	assert_true(f & CON_RESORT);
	assert_int_equal(s.view, CON_VIEW_TASKS);
	assert_string_equal(m.filter, "leak.c:12");
	con_session_resort(&s);
	/* Tasks 2, 3, 4 and done 5 and 1 (kept a while); not 6 (:120). */
	assert_int_equal(m.nlist, 5);
	for (size_t i = 0; i < m.nlist; i++)
		assert_int_equal(m.list[i]->line, 12);
	/* s again, and s back; Esc clears the filter, then goes back. */
	con_keys_handle(&s, 's');
	assert_int_equal(s.view, CON_VIEW_SITES);
	con_keys_handle(&s, 's');
	assert_int_equal(s.view, CON_VIEW_TASKS);
	con_keys_handle(&s, 's');
	con_keys_handle(&s, 27);
	assert_string_equal(m.group_filter, "");
	assert_int_equal(s.view, CON_VIEW_SITES);
	con_keys_handle(&s, 27);
	assert_int_equal(s.view, CON_VIEW_TASKS);
	con_model_fini(&m);
}

/* --------------------------------------------------------- resources */

static Weft__V1__Resource *res_msg(uint64_t id, uint32_t kind, const char *name,
				   const char *file, uint32_t line)
{
	Weft__V1__Resource *r = calloc(1, sizeof(*r));

	assert_non_null(r);
	weft__v1__resource__init(r);
	r->id = id;
	r->kind = kind;
	r->name = (char *)name;
	r->file = (char *)file;
	r->line = line;
	return r;
}

/* An update at @now with tasks and resources (all freed here). */
static void feed_res(con_model_t *m, uint64_t now, Weft__V1__Task **tasks,
		     size_t n, Weft__V1__Resource **res, size_t nr)
{
	Weft__V1__Update u = WEFT__V1__UPDATE__INIT;
	Weft__V1__Stats st = WEFT__V1__STATS__INIT;
	Weft__V1__Frame f = WEFT__V1__FRAME__INIT;

	st.now_ns = now;
	st.start_ns = 1 * SEC;
	st.workers = 2;
	u.stats = &st;
	u.tasks = tasks;
	u.n_tasks = n;
	u.resources = res;
	u.n_resources = nr;
	f.body_case = WEFT__V1__FRAME__BODY_UPDATE;
	f.update = &u;
	con_model_frame(m, &f);
	for (size_t i = 0; i < n; i++)
		free(tasks[i]);
	for (size_t i = 0; i < nr; i++)
		free(res[i]);
}

/*
 * A deadlock as the detail tells it: the holder's "locks held" counts
 * what it holds now (a weft_mutex_t taken and not released, by its
 * events; an async mutex listing it among its holders), each with the
 * whole count waiting on it (two here, not the one a list of the first
 * might suggest); and "warnings" lists a warning row that names the
 * task though its record carries no bit for it yet.
 */
static void test_console_views_detail_deadlock(void **state)
{
	con_model_t m;
	con_session_t s = { .model = &m,
			    .once = true,
			    .ascii = true,
			    .view = CON_VIEW_DETAIL,
			    .detail_task = 1 };
	Weft__V1__Task *ts[] = { task_msg(1, "dl-a", 2), task_msg(2, "dl-b", 2),
				 task_msg(3, "dl-c", 1) };
	Weft__V1__Resource *rs[] = {
		res_msg(10, WEFT_RES_MUTEX, "table-a", "app.c", 5),
		res_msg(11, WEFT_RES_MUTEX, "table-b", "app.c", 6),
	};
	uint64_t h10[] = { 1 }, w10[] = { 3, 2 }, h11[] = { 2 }, w11[] = { 1 };
	Weft__V1__Warning *x = warning_msg(4, WEFT_WARN_NEVER_YIELDED, 1);
	weft_event_t ev[] = {
		{ .ts = 2 * SEC,
		  .task = 1,
		  .a1 = 0x55,
		  .kind = WEFT_EV_LOCK_ACQUIRE },
	};
	char *out;

	(void)state;
	ts[0]->waiting_on = 11;
	ts[1]->waiting_on = 10;
	ts[2]->waiting_on = 10;
	rs[0]->holders = h10;
	rs[0]->n_holders = 1;
	rs[0]->nholders = 1;
	rs[0]->waiters = w10;
	rs[0]->n_waiters = 2;
	rs[0]->nwaiters = 2;
	rs[1]->holders = h11;
	rs[1]->n_holders = 1;
	rs[1]->nholders = 1;
	rs[1]->waiters = w11;
	rs[1]->n_waiters = 1;
	rs[1]->nwaiters = 1;
	con_model_init(&m, "test");
	con_model_events(&m, ev, 1);
	feed_res(&m, 3 * SEC, ts, 3, rs, 2);
	/* The warning row; task 1's record (warnings 0) is unchanged. */
	feed(&m, 3 * SEC, NULL, 0, NULL, 0, &x, 1);
	free(x);
	assert_int_equal(con_model_task(&m, 1)->warnings, 0);
	con_session_watch(&s);
	out = render(&s, 120, 40);
	assert_non_null(strstr(out, "locks held 2"));
	assert_non_null(strstr(out, "held now: lock 0x55"));
	assert_non_null(strstr(out, "held now: mutex table-a  (2 waiting on "
				    "it)"));
	assert_null(strstr(out, "table-b  ("));
	assert_non_null(strstr(out, "warnings: never-yielded"));
	assert_null(strstr(out, "warnings: none"));
	free(out);
	/* A waiter holds nothing. */
	s.detail_task = 3;
	con_session_watch(&s);
	out = render(&s, 120, 40);
	assert_non_null(strstr(out, "locks held 0"));
	assert_null(strstr(out, "held now"));
	free(out);
	con_model_fini(&m);
}

/* The role of the first cell of @text in @g, or -1 when not there. */
static int role_of(const con_grid_t *g, const char *text)
{
	size_t n = strlen(text);

	for (int y = 0; y < g->h; y++)
		for (int x = 0; x + (int)n <= g->w; x++) {
			size_t k = 0;

			while (k < n && g->cells[y * g->w + x + (int)k].ch ==
						(wchar_t)text[k])
				k++;
			if (k == n)
				return g->cells[y * g->w + x].role;
		}
	return -1;
}

/*
 * Waits by design do not stand out as contention: a listener in accept
 * (an fd) and a sleeper (the timer wheel) have waiters and no holder;
 * their rows read normal, a lock's with waiters a warning.
 */
static void test_console_views_resources_by_design(void **state)
{
	con_model_t m;
	con_session_t s = { .model = &m,
			    .once = true,
			    .ascii = true,
			    .view = CON_VIEW_RESOURCES };
	Weft__V1__Task *ts[] = { task_msg(1, "acceptor", 1),
				 task_msg(2, "sleeper", 1),
				 task_msg(3, "locker", 1) };
	Weft__V1__Resource *rs[] = {
		res_msg(7, WEFT_RES_IO, "listen-fd", NULL, 0),
		res_msg(8, WEFT_RES_TIMER_WHEEL, "timer wheel", NULL, 0),
		res_msg(9, WEFT_RES_MUTEX, "cache", "app.c", 20),
	};
	uint64_t w7[] = { 1 }, w8[] = { 2 }, w9[] = { 3 };
	con_grid_t g;

	(void)state;
	rs[0]->waiters = w7;
	rs[1]->waiters = w8;
	rs[2]->waiters = w9;
	for (int i = 0; i < 3; i++) {
		rs[i]->n_waiters = 1;
		rs[i]->nwaiters = 1;
		rs[i]->oldest_wait_ns = 1 * SEC;
	}
	con_model_init(&m, "test");
	feed_res(&m, 3 * SEC, ts, 3, rs, 3);
	con_session_resort(&s);
	con_grid_init(&g, 140, 20, true);
	con_screen_draw(&s, &g);
	assert_int_equal(role_of(&g, "listen-fd"), CON_ROLE_NORMAL);
	assert_int_equal(role_of(&g, "timer wheel"), CON_ROLE_NORMAL);
	assert_int_equal(role_of(&g, "cache"), CON_ROLE_WARN);
	con_grid_fini(&g);
	/* One resource's page: its oldest wait is said, not as a warning. */
	s.view = CON_VIEW_RESOURCE;
	s.detail_res = 8;
	con_grid_init(&g, 140, 20, true);
	con_screen_draw(&s, &g);
	assert_int_equal(role_of(&g, "the oldest wait began"), CON_ROLE_NORMAL);
	con_grid_fini(&g);
	s.detail_res = 9;
	con_grid_init(&g, 140, 20, true);
	con_screen_draw(&s, &g);
	assert_int_equal(role_of(&g, "the oldest wait began"), CON_ROLE_WARN);
	con_grid_fini(&g);
	con_model_fini(&m);
}

/*
 * A resource's longest holder is named after the model forgot it: task 4
 * ("holder") held it longest, then ended and was let go; the view still
 * says its name (it said "by task 4" and no more).  A new longest holder
 * the model never knew is not given the old one's name.
 */
static void test_console_model_res_holder_forgotten(void **state)
{
	Weft__V1__Task *a[] = { task_msg(4, "holder", 1) };
	Weft__V1__Resource *x[1];
	const con_resource_t *r;
	con_model_t m;

	(void)state;
	con_model_init(&m, "test");
	m.retain_ns = 1;
	a[0]->state = WEFT_TASK_DONE;
	a[0]->finished_ns = 1 * SEC;
	x[0] = res_msg(1, WEFT_RES_MUTEX, "cache", "app.c", 10);
	x[0]->longest_holder = 4;
	x[0]->longest_hold_ns = 7000000;
	feed_res(&m, 1 * SEC, a, 1, x, 1);
	for (int i = 0; i < 2; i++) {
		x[0] = res_msg(1, WEFT_RES_MUTEX, NULL, NULL, 0);
		x[0]->longest_holder = 4;
		x[0]->longest_hold_ns = 7000000;
		feed_res(&m, (3 + 2 * (uint64_t)i) * SEC, NULL, 0, x, 1);
	}
	assert_null(con_model_task(&m, 4));
	r = con_model_resource(&m, 1);
	assert_non_null(r);
	assert_string_equal(r->longest_holder_name, "holder");
	/* A clone and a saved copy keep it (their strings their own). */
	{
		con_model_t c, got;
		con_saved_t sv;

		con_model_clone(&c, &m);
		con_model_save(&sv, &m);
		assert_true(con_model_load(&got, sv.p, sv.len));
		con_saved_free(&sv);
		assert_string_equal(
			con_model_resource(&c, 1)->longest_holder_name,
			"holder");
		assert_string_equal(
			con_model_resource(&got, 1)->longest_holder_name,
			"holder");
		con_model_fini(&c);
		con_model_fini(&got);
	}
	x[0] = res_msg(1, WEFT_RES_MUTEX, NULL, NULL, 0);
	x[0]->longest_holder = 9;
	x[0]->longest_hold_ns = 9000000;
	feed_res(&m, 6 * SEC, NULL, 0, x, 1);
	assert_string_equal(r->longest_holder_name, "");
	assert_true(con_model_is_consistent(&m));
	con_model_fini(&m);
}

/*
 * Resources into the model: by id, merged (the first name stays),
 * untrusted input bounded (id 0 refused, lists cut to WEFT_RES_LIST,
 * counts raised to their lists, long names cut, NaN rates 0), histograms
 * into percentiles; a dropped one retained retain_ns, then gone; at most
 * CON_MAX_RESOURCES kept.
 */
static void test_console_model_resources(void **state)
{
	static uint64_t many[100];
	static char long_name[1000];
	Weft__V1__Histogram wait = WEFT__V1__HISTOGRAM__INIT;
	uint32_t buckets[200];
	weft_hist_t h = { 0 };
	con_model_t m;
	const con_resource_t *r;
	Weft__V1__Resource *x[3];

	(void)state;
	con_model_init(&m, "test");
	for (int i = 0; i < 100; i++)
		many[i] = 1000 + (uint64_t)i;
	memset(long_name, 'n', sizeof(long_name) - 1);

	x[0] = res_msg(1, WEFT_RES_MUTEX, "cache", "app.c", 10);
	x[0]->nholders = 1;
	x[0]->n_holders = 1;
	x[0]->holders = many;
	x[0]->nwaiters = 3; /* fewer than listed: raised */
	x[0]->n_waiters = 100;
	x[0]->waiters = many;
	x[0]->acquires_per_s = __builtin_nan("");
	for (unsigned i = 0; i < WEFT_HIST_BUCKETS; i++)
		weft_hist_record(&h, 1000ull << (i % 10));
	for (int i = 0; i < 200; i++)
		buckets[i] = i < WEFT_HIST_BUCKETS ? h.buckets[i] : 7;
	wait.buckets = buckets;
	wait.n_buckets = 200; /* more than there are: cut */
	wait.count = h.count;
	wait.max_ns = h.max_ns;
	x[0]->wait_hist = &wait;
	x[1] = res_msg(0, WEFT_RES_MUTEX, "zero", NULL, 0); /* refused */
	x[2] = res_msg(2, 200, long_name, NULL, 0);         /* unknown kind */
	feed_res(&m, 2 * SEC, NULL, 0, x, 3);
	assert_int_equal(m.nres, 2);
	assert_int_equal(m.bad_frames, 1);
	r = con_model_resource(&m, 1);
	assert_non_null(r);
	assert_int_equal(r->kind, WEFT_RES_MUTEX);
	assert_string_equal(r->name, "cache");
	assert_int_equal(r->nholders, 1);
	assert_int_equal(r->holders[0], 1000);
	assert_int_equal(r->nwaiters_kept, WEFT_RES_LIST);
	assert_int_equal(r->nwaiters, WEFT_RES_LIST);
	assert_true(r->acquires_per_s == 0);
	assert_non_null(r->hist);
	assert_int_equal(r->wait_max, h.max_ns);
	assert_true(r->wait_p50 > 0 && r->wait_p50 <= r->wait_p99);
	r = con_model_resource(&m, 2);
	assert_int_equal(r->kind, 0);
	assert_int_equal(strlen(r->name), CON_RES_STR_MAX);
	assert_true(con_model_is_consistent(&m));

	/* A later record without the name keeps it; figures follow. */
	x[0] = res_msg(1, WEFT_RES_MUTEX, NULL, NULL, 0);
	x[0]->acquires = 77;
	x[0]->acquires_per_s = 12.5;
	feed_res(&m, 3 * SEC, NULL, 0, x, 1);
	r = con_model_resource(&m, 1);
	assert_string_equal(r->name, "cache");
	assert_string_equal(r->file, "app.c");
	assert_int_equal(r->acquires, 77);
	assert_int_equal(r->nwaiters, 0);
	assert_non_null(r->hist); /* kept from before */

	/* Dropped: kept retain_ns, then gone. */
	x[0] = res_msg(2, WEFT_RES_MPSC, NULL, NULL, 0);
	x[0]->dropped_ns = 3 * SEC;
	feed_res(&m, 3 * SEC, NULL, 0, x, 1);
	con_model_resort(&m);
	assert_int_equal(m.nres_list, 2);
	feed_res(&m, 3 * SEC + m.retain_ns - 1, NULL, 0, NULL, 0);
	assert_non_null(con_model_resource(&m, 2));
	feed_res(&m, 3 * SEC + m.retain_ns, NULL, 0, NULL, 0);
	assert_null(con_model_resource(&m, 2));
	assert_non_null(con_model_resource(&m, 1));
	con_model_resort(&m);
	assert_int_equal(m.nres_list, 1);
	assert_true(con_model_is_consistent(&m));
	con_model_fini(&m);

	/* Bounded: past CON_MAX_RESOURCES, counted, not kept. */
	con_model_init(&m, "test");
	{
		enum { N = CON_MAX_RESOURCES + 10 };
		Weft__V1__Resource *all = calloc(N, sizeof(*all));
		Weft__V1__Resource **ptrs = calloc(N, sizeof(*ptrs));
		Weft__V1__Update u = WEFT__V1__UPDATE__INIT;

		assert_non_null(all);
		assert_non_null(ptrs);
		for (size_t i = 0; i < N; i++) {
			weft__v1__resource__init(&all[i]);
			all[i].id = i + 1;
			all[i].kind = WEFT_RES_IO;
			ptrs[i] = &all[i];
		}
		u.resources = ptrs;
		u.n_resources = N;
		con_model_update(&m, &u);
		assert_int_equal(m.nres, CON_MAX_RESOURCES);
		assert_int_equal(m.res_discarded, 10);
		assert_true(con_model_is_consistent(&m));
		free(all);
		free(ptrs);
	}
	con_model_fini(&m);
}

/* A model with resource 5 (a mutex held by task 1, tasks 2 and 3
 * waiting) and resource 6 (an unnamed mpsc, task 4 waiting to send). */
static void resourced(con_model_t *m)
{
	static uint64_t holders[] = { 1 }, waiters[] = { 2, 3 },
			senders[] = { 4 };
	Weft__V1__Task *ts[] = { task_msg(1, "holder", 5),
				 task_msg(2, "waiter-a", 1),
				 task_msg(3, "waiter-b", 1),
				 task_msg(4, "producer", 9) };
	Weft__V1__Resource *rs[] = {
		res_msg(5, WEFT_RES_MUTEX, "cache", "app.c", 20),
		res_msg(6, WEFT_RES_MPSC, NULL, "demo.c", 88),
	};
	Weft__V1__Histogram wh = WEFT__V1__HISTOGRAM__INIT;
	weft_hist_t h = { 0 };

	for (int i = 0; i < 100; i++)
		weft_hist_record(&h, 2 * MS);
	wh.buckets = h.buckets;
	wh.n_buckets = WEFT_HIST_BUCKETS;
	wh.count = h.count;
	wh.max_ns = 9 * MS;
	rs[0]->nholders = 1;
	rs[0]->n_holders = 1;
	rs[0]->holders = holders;
	rs[0]->nwaiters = 2;
	rs[0]->n_waiters = 2;
	rs[0]->waiters = waiters;
	rs[0]->acquires_per_s = 420;
	rs[0]->wait_hist = &wh;
	rs[1]->nwaiters = 1;
	rs[1]->n_waiters = 1;
	rs[1]->waiters = senders;
	rs[1]->owner = 1;
	for (int i = 1; i <= 2; i++) {
		ts[i]->waiting_on = 5;
		ts[i]->waiting_since_ns = 2 * SEC;
		ts[i]->waiting_op = WEFT_RES_OP_ACQUIRE;
	}
	/* waiter-b: woken (its wait ends at its next poll), queued. */
	ts[2]->state = WEFT_TASK_SCHEDULED;
	ts[3]->waiting_on = 6;
	ts[3]->waiting_since_ns = 2500 * MS;
	ts[3]->waiting_op = WEFT_RES_OP_SEND;
	{
		static Weft__V1__TaskWait w[2];
		static Weft__V1__TaskWait *wp[2] = { &w[0], &w[1] };

		weft__v1__task_wait__init(&w[0]);
		weft__v1__task_wait__init(&w[1]);
		w[0].resource = 5;
		w[0].total_ns = 1200 * MS;
		w[0].waits = 3;
		w[1].resource = 6;
		w[1].total_ns = 40 * MS;
		w[1].waits = 2;
		ts[3]->waited = wp;
		ts[3]->n_waited = 2;
	}
	con_model_init(m, "test");
	feed_res(m, 3 * SEC, ts, 4, rs, 2);
}

/*
 * WAITING ON in the task list and the task detail; the Resources view's
 * rows; Enter on a resource lists its holder and waiters, Enter on one
 * opens that task, Esc goes back step by step; sort and filter keys act
 * on the resources while their view shows.
 */
static void test_console_views_resources(void **state)
{
	con_model_t m;
	con_session_t s = { .model = &m, .once = true, .ascii = true };
	char *out;

	(void)state;
	resourced(&m);
	assert_true(con_model_is_consistent(&m));
	assert_view(&s, CON_VIEW_TASKS,
		    (const char *[]){ "WAITING ON", "mutex cache",
				      "mpsc demo.c:88", NULL },
		    NULL);
	s.detail_task = 4;
	assert_view(&s, CON_VIEW_DETAIL,
		    (const char *[]){ "waiting on mpsc demo.c:88 (send) for "
				      "500",
				      "waited longest on: mutex cache ",
				      " in 3, mpsc demo.c:88 ", " in 2", NULL },
		    NULL);
	s.detail_task = 3;
	assert_view(&s, CON_VIEW_DETAIL,
		    (const char *[]){ "waiting on mutex cache (acquire) for ",
				      "; woken since, queued for a worker",
				      NULL },
		    NULL);
	/* The holder waits on nothing heard, idle since before anyone
	 * listened (idle_since 0): not known, not "no resource". */
	s.detail_task = 1;
	assert_view(&s, CON_VIEW_DETAIL,
		    (const char *[]){ "waiting on: not known (parked since "
				      "before anyone listened",
				      NULL },
		    (const char *[]){ "no resource", NULL });
	{
		/* The holder's acquire's site event, and a wait for a
		 * oneshot's value: told in words (an audit read the raw
		 * "resource-site a1=... a2=25", and "(done)" as finished). */
		weft_event_t ev = { .ts = 3 * SEC + 1,
				    .task = 1,
				    .a1 = 0x1000,
				    .a2 = 25,
				    .kind = WEFT_EV_RES_SITE };

		con_model_events(&m, &ev, 1);
		s.detail_task = 1;
		con_session_watch(&s);
		assert_view(&s, CON_VIEW_DETAIL,
			    (const char *[]){ "acquired it at line 25", NULL },
			    (const char *[]){ "a1=", NULL });
		assert_string_equal(weft_resource_op_name(WEFT_RES_OP_DONE),
				    "completion");
	}
	s.detail_task = 0;
	assert_view(&s, CON_VIEW_RESOURCES,
		    (const char *[]){ "KIND", "HOLD", "WAIT P99", "HOLD P99",
				      "mutex", "cache", "mpsc", "demo.c:88",
				      "420", NULL },
		    NULL);
	{
		/* A channel counts no acquires: its ACQ/S "-", not 0 (the
		 * row: ID KIND NAME HOLD WAIT ACQ/S ...). */
		char *text, *row, tok[6][32];

		s.view = CON_VIEW_RESOURCES;
		text = render(&s, 140, 40);
		row = strstr(text, " 6 mpsc ");
		assert_non_null(row);
		assert_int_equal(sscanf(row, "%31s %31s %31s %31s %31s %31s",
					tok[0], tok[1], tok[2], tok[3], tok[4],
					tok[5]),
				 6);
		assert_string_equal(tok[2], "demo.c:88");
		assert_string_equal(tok[5], "-");
		free(text);
	}
	/* The help lists r. */
	s.once = false;
	s.help = true;
	s.view = CON_VIEW_TASKS;
	out = render(&s, 140, 40);
	assert_non_null(strstr(out, "w t x d m r"));
	assert_non_null(strstr(out, " r Resources"));
	free(out);
	s.help = false;

	/* Keys: r, sort and invert on the resources, Enter twice, Esc. */
	con_keys_handle(&s, 'r');
	assert_int_equal(s.view, CON_VIEW_RESOURCES);
	con_keys_handle(&s, '>');
	assert_int_equal(m.res_sort_col, CON_RCOL_KIND);
	assert_int_equal(m.sort_col, CON_COL_ID); /* the tasks' untouched */
	con_keys_handle(&s, '>');
	con_keys_handle(&s, '>');
	con_keys_handle(&s, '>');
	assert_int_equal(m.res_sort_col, CON_RCOL_WAITERS);
	con_keys_handle(&s, 'i');
	assert_true(m.res_sort_invert);
	con_model_resort(&m);
	assert_int_equal(m.res_list[0]->id, 5); /* most waiters first */
	s.sel[CON_VIEW_RESOURCES] = 0;
	con_keys_handle(&s, '\n');
	assert_int_equal(s.view, CON_VIEW_RESOURCE);
	assert_int_equal(s.detail_res, 5);
	s.once = true;
	assert_view(&s, CON_VIEW_RESOURCE,
		    (const char *[]){ "mutex cache", "holders: 1",
				      "waiters (oldest first): 2", "holder",
				      "waiter-a", "waiter-b", "p99", NULL },
		    (const char *[]){ "producer", NULL });
	s.once = false;
	con_session_clamp(&s, 40);
	con_keys_handle(&s, 'j');
	con_keys_handle(&s, 'j');
	con_session_clamp(&s, 40);
	assert_int_equal(con_resource_row_task(&s, s.sel[CON_VIEW_RESOURCE]),
			 3);
	con_keys_handle(&s, '\n');
	assert_int_equal(s.view, CON_VIEW_DETAIL);
	assert_int_equal(s.detail_task, 3);
	con_keys_handle(&s, 27);
	assert_int_equal(s.view, CON_VIEW_RESOURCE);
	con_keys_handle(&s, 27);
	assert_int_equal(s.view, CON_VIEW_RESOURCES);

	/* A filter on the resources: by kind. */
	con_keys_handle(&s, '/');
	assert_true(s.filter_edit);
	con_keys_handle(&s, 'm');
	con_keys_handle(&s, 'p');
	con_keys_handle(&s, '\n');
	assert_string_equal(m.res_filter, "mp");
	assert_string_equal(m.filter, "");
	con_model_resort(&m);
	assert_int_equal(m.nres_list, 1);
	assert_int_equal(m.res_list[0]->id, 6);
	con_keys_handle(&s, 27);
	assert_string_equal(m.res_filter, "");

	/* The task filter finds tasks by what they wait on. */
	con_model_set_filter(&m, "cache");
	con_model_resort(&m);
	assert_int_equal(m.nlist, 2);
	con_model_set_sort(&m, CON_COL_WAITING, false);
	con_model_set_filter(&m, "");
	con_model_resort(&m);
	assert_int_equal(m.list[0]->id, 1);
	assert_int_equal(m.list[3]->id, 4);
	assert_true(con_model_is_consistent(&m));
	con_model_fini(&m);
}

/*
 * A model where every part of every view has something to draw: two
 * workers with history, tasks (one with histograms) waiting on
 * resources, warnings, the timeline's polls over 30 buckets, the watched
 * task's events.
 */
static void rich(con_model_t *m)
{
	Weft__V1__Worker w0 = WEFT__V1__WORKER__INIT,
			 w1 = WEFT__V1__WORKER__INIT;
	Weft__V1__WorkerCounters c = WEFT__V1__WORKER_COUNTERS__INIT;
	Weft__V1__Worker *ws[] = { &w0, &w1 };
	Weft__V1__Histogram ph = WEFT__V1__HISTOGRAM__INIT;
	Weft__V1__Task *ts[] = { task_msg(2, "waiter-a", 40) };
	Weft__V1__Warning *x[] = {
		warning_msg(1, WEFT_WARN_LOCK_HELD_ACROSS_AWAIT, 2),
		warning_msg(2, WEFT_WARN_LONG_POLL, 1),
	};
	weft_event_t ev[300];
	weft_hist_t h = { 0 };

	resourced(m);
	for (size_t i = 0; i < sizeof(ev) / sizeof(ev[0]); i++)
		ev[i] = (weft_event_t){ .ts = 1 * SEC + i * 10 * MS,
					.a1 = (i % 7) * 3 * MS,
					.task = 1 + i % 4,
					.worker = (uint16_t)(i % 2),
					.kind = WEFT_EV_POLL };
	con_model_events(m, ev, sizeof(ev) / sizeof(ev[0]));
	for (uint64_t i = 1; i <= 100; i++)
		weft_hist_record(&h, i * 50 * 1000);
	ph.buckets = h.buckets;
	ph.n_buckets = WEFT_HIST_BUCKETS;
	ph.count = h.count;
	ph.max_ns = h.max_ns;
	ts[0]->poll_hist = &ph;
	ts[0]->sched_hist = &ph;
	ts[0]->waiting_on = 5;
	ts[0]->waiting_since_ns = 2 * SEC;
	ts[0]->locks_held = 1;
	c.polls = 1234;
	w0.counters = &c;
	w1.counters = &c;
	w1.index = 1;
	for (int i = 0; i < 3; i++)
		feed(m, (uint64_t)(4 + i) * SEC, i ? NULL : ts, i ? 0 : 1, ws,
		     2, i ? NULL : x, i ? 0 : 2);
	free(x[0]);
	free(x[1]);
}

/*
 * Every view, the help over it and the frame, at every terminal size
 * from 1x1 up (a one-row grid once made the header read a row it did
 * not have: ASan's heap-buffer-overflow; under ASan a cell out of place
 * is a failure here).  The view and the help stay in the view's rows:
 * the status line is the status line, whatever the view would draw
 * past them.  Then a normal size still draws everything.
 */
static void test_console_views_every_size(void **state)
{
	static const int sizes[][2] = {
		{ 1, 1 },   { 2, 1 },    { 40, 1 },    { 10, 5 }, { 3, 2 },
		{ 120, 3 }, { 1, 40 },   { 200, 2 },   { 7, 6 },  { 9, 30 },
		{ 84, 8 },  { 120, 12 }, { 300, 100 },
	};
	static const char status[] = " ? help  q quit";
	con_model_t m;
	con_session_t s = { .model = &m, .ascii = true };
	char *out;

	(void)state;
	rich(&m);
	for (size_t k = 0; k < 4; k++) {
		s.once = k & 1;
		s.help = k & 2;
		s.ascii = !(k & 1);
		for (int v = 0; v < CON_VIEW_MAX; v++)
			for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]);
			     i++) {
				con_grid_t g;
				int w = sizes[i][0], h = sizes[i][1];

				s.view = (con_view_id_t)v;
				s.detail_task = 2;
				s.detail_res = 5;
				s.sel[v] = 1;
				con_session_resort(&s);
				con_session_clamp(&s, h);
				con_session_watch(&s);
				con_grid_init(&g, w, h, s.ascii);
				con_screen_draw(&s, &g);
				/* The status line, cut to the width, on the
				 * last row, the help or not. */
				for (int x = 0; !s.once && x < w &&
						x < (int)sizeof(status) - 1;
				     x++)
					assert_int_equal(
						g.cells[(h - 1) * w + x].ch,
						(wchar_t)status[x]);
				con_grid_fini(&g);
			}
	}
	/* Back to a normal size: everything drawn again. */
	s.once = true;
	s.help = false;
	s.ascii = true;
	s.view = CON_VIEW_WORKERS;
	out = render(&s, 120, 30);
	assert_non_null(strstr(out, "STEALS-IN"));
	assert_non_null(strstr(out, "global queue"));
	free(out);
	s.view = CON_VIEW_DETAIL;
	con_session_watch(&s);
	out = render(&s, 120, 40);
	assert_non_null(strstr(out, "poll time  n=100"));
	assert_non_null(strstr(out, "waiting on mutex cache"));
	free(out);
	s.view = CON_VIEW_TIMELINE;
	out = render(&s, 120, 30);
	assert_non_null(strstr(out, "cursor: "));
	free(out);
	con_model_fini(&m);
}

/* ------------------------------------------------------------ replay */

/*
 * A trace file built here: the header, then per step an EventBatch
 * (tasks 1-4 polled on one worker; task 9 too in the first 20 steps)
 * and an Update (one of tasks 1-6 changed, task 9 done at step 25, a
 * warning every 300 steps).  Every other Update's now is before the batch just ahead
 * of it, so the index has times to make non-decreasing.  More than 4096
 * records, so the index grows.  @mark_step: *@mark_off receives where
 * that step's batch starts.
 */
#define REPLAY_STEPS 2100

static void replay_write(const char *path, size_t mark_step, uint64_t *mark_off)
{
	weft_wire_buf_t b = { 0 };
	weft_wire_batch_t bt;
	Weft__V1__Hello h = WEFT__V1__HELLO__INIT;
	static const char *names[] = { "", "t1", "t2", "t3", "t4", "t5", "t6" };
	FILE *fp;

	h.pid = 4242;
	h.process_name = "svc";
	h.workers = 2;
	h.start_ns = 1 * SEC;
	assert_int_equal(weft_wire_header_append(&b, &h, 0), 0);
	weft_wire_batch_init(&bt);
	for (size_t k = 0; k < REPLAY_STEPS; k++) {
		uint64_t t = 2 * SEC + k * MS;
		weft_event_t ev[5];
		size_t n = 0;
		Weft__V1__Frame f = WEFT__V1__FRAME__INIT;
		Weft__V1__Update u = WEFT__V1__UPDATE__INIT;
		Weft__V1__Stats st = WEFT__V1__STATS__INIT;
		Weft__V1__Worker w0 = WEFT__V1__WORKER__INIT,
				 w1 = WEFT__V1__WORKER__INIT;
		Weft__V1__WorkerCounters c = WEFT__V1__WORKER_COUNTERS__INIT;
		Weft__V1__Worker *ws[] = { &w0, &w1 };
		Weft__V1__Task *ts[2];
		Weft__V1__Warning *x = NULL;
		size_t nt = 0;

		for (uint64_t id = 1; id <= 4; id++)
			ev[n++] = (weft_event_t){ .ts = t + id * 1000,
						  .task = id,
						  .a1 = 500 * id,
						  .worker = (uint16_t)(k % 2),
						  .kind = WEFT_EV_POLL };
		if (k < 20)
			ev[n++] = (weft_event_t){ .ts = t + 5000,
						  .task = 9,
						  .a1 = 100,
						  .worker = (uint16_t)(k % 2),
						  .kind = WEFT_EV_POLL };
		if (k == mark_step)
			*mark_off = b.len;
		/* One worker's run: one batch. */
		assert_int_equal(weft_wire_batch_encode(&bt, ev, n), (int)n);
		f.body_case = WEFT__V1__FRAME__BODY_EVENTS;
		f.events = &bt.msg;
		assert_int_equal(weft_wire_record_append(&b, &f), 0);

		st.now_ns = k % 2 ? t : t + MS / 2;
		st.start_ns = 1 * SEC;
		st.workers = 2;
		st.live_tasks = 6;
		c.polls = 4 * k;
		w0.counters = &c;
		w1.counters = &c;
		w1.index = 1;
		ts[nt++] = task_msg(k % 6 + 1, names[k % 6 + 1], k);
		if (k == 0 || k == 25) {
			ts[nt] = task_msg(9, "early", k ? 20 : 1);
			if (k) {
				ts[nt]->state = WEFT_TASK_DONE;
				ts[nt]->finished_ns = t;
			}
			nt++;
		}
		if (k % 300 == 150)
			x = warning_msg(k / 300 + 1, WEFT_WARN_LONG_POLL, 2);
		u.stats = &st;
		u.tasks = ts;
		u.n_tasks = nt;
		u.workers = ws;
		u.n_workers = 2;
		u.warnings = x ? &x : NULL;
		u.n_warnings = x ? 1 : 0;
		f.body_case = WEFT__V1__FRAME__BODY_UPDATE;
		f.update = &u;
		assert_int_equal(weft_wire_record_append(&b, &f), 0);
		for (size_t i = 0; i < nt; i++)
			free(ts[i]);
		free(x);
	}
	weft_wire_batch_fini(&bt);
	fp = fopen(path, "wb");
	assert_non_null(fp);
	assert_int_equal(fwrite(b.data, 1, b.len, fp), b.len);
	assert_int_equal(fclose(fp), 0);
	weft_wire_buf_fini(&b);
}

/* What the replay should show, from every frame read in order. */
struct replay_ref {
	size_t n; /* records after the header */
	uint64_t first_ns, last_ns;
	uint64_t warn_after; /* the first warning's time after first_ns */
};

/*
 * Feeds @m (when not NULL) every frame of @path whose time (made
 * non-decreasing) is at most @upto, the header first, the way the
 * whole-file replay did; fills @ref.  Events of task @id, if any, go
 * to @ev (up to @cap, the newest kept: the file's are in time order).
 */
static size_t replay_reference(const char *path, con_model_t *m, uint64_t upto,
			       struct replay_ref *ref, uint64_t id,
			       weft_event_t *ev, size_t cap)
{
	static weft_event_t buf[WEFT_WIRE_BATCH_MAX];
	weft_trace_reader_t rd;
	Weft__V1__Frame *f;
	uint64_t at = 0;
	size_t nev = 0;

	memset(ref, 0, sizeof(*ref));
	assert_int_equal(weft_trace_reader_open(&rd, path), 0);
	if (m) {
		con_model_init(m, "replay t.weft");
		m->mode = CON_MODE_REPLAY;
	}
	while (weft_trace_reader_next(&rd, &f) == 1) {
		bool header = rd.frames == 1;
		uint64_t t = weft_trace_frame_time(f);

		if (!header) {
			at = t > at ? t : at;
			if (!ref->first_ns)
				ref->first_ns = at;
			if (!ref->warn_after && at > ref->first_ns &&
			    f->body_case == WEFT__V1__FRAME__BODY_UPDATE &&
			    f->update->n_warnings)
				ref->warn_after = at;
			ref->n++;
			ref->last_ns = at;
		}
		if (m && (header || at <= upto))
			con_model_frame(m, f);
		if (id && !header && at <= upto &&
		    f->body_case == WEFT__V1__FRAME__BODY_EVENTS) {
			int k = weft_wire_batch_decode(f->events, buf,
						       WEFT_WIRE_BATCH_MAX);

			for (int j = 0; j < k; j++) {
				if (buf[j].task != id)
					continue;
				if (nev == cap) {
					memmove(ev, ev + 1,
						(cap - 1) * sizeof(*ev));
					nev--;
				}
				ev[nev++] = buf[j];
			}
		}
		if (!header)
			weft_wire_frame_free(f);
	}
	weft_trace_reader_close(&rd);
	return nev;
}

/* The same state: figures, and every view drawn the same. */
static void assert_same_model(con_model_t *a, con_model_t *b)
{
	static const con_view_id_t views[] = { CON_VIEW_WORKERS, CON_VIEW_TASKS,
					       CON_VIEW_WARNINGS,
					       CON_VIEW_TIMELINE };

	assert_int_equal(a->pid, b->pid);
	assert_int_equal(a->now_ns, b->now_ns);
	assert_int_equal(a->updates, b->updates);
	assert_int_equal(a->batches, b->batches);
	assert_int_equal(a->events, b->events);
	assert_int_equal(a->ntasks, b->ntasks);
	assert_int_equal(a->nwarnings, b->nwarnings);
	for (size_t i = 0; i < sizeof(views) / sizeof(views[0]); i++) {
		con_session_t sa = { .model = a, .once = true, .ascii = true };
		con_session_t sb = { .model = b, .once = true, .ascii = true };
		char *x, *y;

		sa.view = sb.view = views[i];
		x = render(&sa, 120, 30);
		y = render(&sb, 120, 30);
		assert_string_equal(x, y);
		free(x);
		free(y);
	}
}

static void assert_replay_at(con_replay_t *r, con_model_t *m, const char *path,
			     uint64_t pos)
{
	con_model_t ref;
	struct replay_ref rf;

	con_replay_seek(r, m, pos);
	assert_int_equal(r->pos_ns, pos);
	replay_reference(path, &ref, pos, &rf, 0, NULL, 0);
	assert_same_model(m, &ref);
	con_model_fini(&ref);
}

/*
 * Replays @path and checks it against every frame read in order: at the
 * end, after a seek back to the middle and forward again, played on in
 * small steps from the start; the warnings found ahead and the tasks'
 * events behind.  @exact_events: the file's events are in time order
 * and few (a file built here), so a task's events are exactly its
 * newest ones.
 */
/* replay_check()'s checkpoint spacing and budget (0: the replay's). */
static uint64_t replay_ckpt_every;
static size_t replay_ckpt_budget;

static void replay_check(const char *path, const uint64_t *ids, size_t nids,
			 bool exact_events)
{
	con_replay_t r;
	con_model_t m;
	struct replay_ref rf;
	uint64_t mid, step;

	replay_reference(path, NULL, UINT64_MAX, &rf, 0, NULL, 0);
	assert_int_equal(con_replay_open(&r, path), 0);
	if (replay_ckpt_every)
		r.ckpt_every = replay_ckpt_every;
	if (replay_ckpt_budget)
		r.ckpt_budget = replay_ckpt_budget;
	assert_int_equal(r.n, rf.n);
	assert_int_equal(r.first_ns, rf.first_ns);
	assert_int_equal(r.last_ns, rf.last_ns);
	assert_int_equal(r.pos_ns, rf.first_ns);
	con_model_init(&m, "replay t.weft");
	m.mode = CON_MODE_REPLAY;
	con_replay_seek(&r, &m, r.first_ns);
	assert_int_equal(con_replay_next_warning(&r), rf.warn_after);
	assert_replay_at(&r, &m, path, r.last_ns);
	assert_int_equal(r.next, r.n);
	assert_int_equal(con_replay_next_warning(&r), 0);

	/* The events of a task, walking back through the file. */
	for (size_t i = 0; i < nids; i++) {
		weft_event_t got[16], want[16];
		size_t n = con_replay_task_events(&r, ids[i], got, 16);
		size_t nw = replay_reference(path, NULL, r.pos_ns, &rf, ids[i],
					     want, 16);

		assert_true(n > 0);
		for (size_t j = 0; j < n; j++) {
			assert_int_equal(got[j].task, ids[i]);
			if (j)
				assert_true(got[j].ts >= got[j - 1].ts);
		}
		if (!exact_events)
			continue;
		assert_int_equal(n, nw);
		for (size_t j = 0; j < n; j++) {
			assert_int_equal(got[j].ts, want[j].ts);
			assert_int_equal(got[j].a1, want[j].a1);
		}
	}

	/* Back to the middle (from the start again), then on to the end. */
	mid = r.first_ns + (r.last_ns - r.first_ns) / 2;
	assert_replay_at(&r, &m, path, mid);
	assert_true(r.next > 0 && r.next < r.n);
	if (exact_events) {
		weft_event_t got[16], want[16];
		size_t n = con_replay_task_events(&r, ids[0], got, 16);

		assert_int_equal(n, replay_reference(path, NULL, mid, &rf,
						     ids[0], want, 16));
		assert_int_equal(got[n - 1].ts, want[n - 1].ts);
		assert_true(got[n - 1].ts <= mid);
	}
	assert_replay_at(&r, &m, path, r.last_ns);

	/* From the start in small steps, as the clock plays it. */
	con_replay_seek(&r, &m, r.first_ns);
	step = (r.last_ns - r.first_ns) / 37 + 1;
	for (uint64_t p = r.first_ns; p < r.last_ns; p += step)
		con_replay_seek(&r, &m, p);
	assert_replay_at(&r, &m, path, r.last_ns);
	assert_null(r.error);
	con_model_fini(&m);
	con_replay_close(&r);
}

static char *replay_path(const char *name)
{
	char *p = malloc(256);

	assert_non_null(p);
	snprintf(p, 256, "%s/weft-test-replay-%d-%s",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid(),
		 name);
	return p;
}

/* Replayed from the file's index: the same model as every frame read
 * in order, at the end, back and forward again, and the tasks' events. */
static void test_console_replay_same_as_frames(void **state)
{
	char *path = replay_path("same.weft");
	uint64_t ids[] = { 2, 9 }, off;
	const char *more = getenv("WEFT_TEST_REPLAY_TRACE");

	(void)state;
	replay_write(path, 0, &off);
	replay_check(path, ids, 2, true);
	unlink(path);
	free(path);
	/* A recorded trace as well, when given (the demo's, say). */
	if (more && more[0]) {
		con_model_t ref;
		struct replay_ref rf;

		replay_reference(more, &ref, UINT64_MAX, &rf, 0, NULL, 0);
		assert_true(ref.ntasks > 0);
		ids[0] = ref.tasks[0]->id;
		ids[1] = ref.tasks[ref.ntasks - 1]->id;
		con_model_fini(&ref);
		replay_check(more, ids, 2, false);
	}
}

/*
 * A file cut inside its last record replays to the record before; a
 * malformed record is skipped when whole records follow it, and bytes
 * that are no records end the replay there, the reason kept; a record
 * that no longer reads when the clock reaches it (the file changed)
 * ends it too.
 */
static void test_console_replay_cut_and_malformed(void **state)
{
	char *path = replay_path("cut.weft");
	con_replay_t r;
	con_model_t m, ref;
	struct replay_ref rf;
	uint64_t bad, later;
	char want[64];
	FILE *fp;
	long len;

	(void)state;
	replay_write(path, 1000, &bad);
	fp = fopen(path, "r+b");
	assert_non_null(fp);
	assert_int_equal(fseek(fp, 0, SEEK_END), 0);
	len = ftell(fp);
	assert_int_equal(fclose(fp), 0);
	assert_int_equal(truncate(path, len - 3), 0);
	assert_int_equal(con_replay_open(&r, path), 0);
	assert_true(r.truncated);
	assert_null(r.error);
	assert_int_equal(r.n, 2 * REPLAY_STEPS - 1);
	con_model_init(&m, "replay t.weft");
	m.mode = CON_MODE_REPLAY;
	assert_replay_at(&r, &m, path, r.last_ns);
	con_model_fini(&m);
	con_replay_close(&r);

	/* Step 1000's batch: not a record tag, with whole records after
	 * it: the reader skips it (issue 19), the replay goes on. */
	replay_write(path, 1000, &bad);
	fp = fopen(path, "r+b");
	assert_non_null(fp);
	assert_int_equal(fseek(fp, (long)bad, SEEK_SET), 0);
	assert_int_equal(fputc(0, fp), 0);
	assert_int_equal(fclose(fp), 0);
	assert_int_equal(con_replay_open(&r, path), 0);
	assert_false(r.truncated);
	assert_null(r.error);
	assert_int_equal(r.n, 2 * REPLAY_STEPS - 1);
	con_replay_close(&r);

	/* From step 1000's batch on, bytes that are no records: the
	 * replay ends there, the reason kept. */
	replay_write(path, 1000, &bad);
	fp = fopen(path, "r+b");
	assert_non_null(fp);
	assert_int_equal(fseek(fp, 0, SEEK_END), 0);
	len = ftell(fp);
	assert_int_equal(fseek(fp, (long)bad, SEEK_SET), 0);
	for (long i = (long)bad; i < len; i++)
		assert_int_equal(fputc(0, fp), 0);
	assert_int_equal(fclose(fp), 0);
	assert_int_equal(con_replay_open(&r, path), 0);
	assert_false(r.truncated);
	assert_non_null(r.error);
	snprintf(want, sizeof(want), "(record at byte %llu)",
		 (unsigned long long)bad);
	assert_non_null(strstr(r.error, want));
	assert_int_equal(r.n, 2 * 1000);
	con_model_init(&m, "replay t.weft");
	m.mode = CON_MODE_REPLAY;
	assert_replay_at(&r, &m, path, r.last_ns);
	con_model_fini(&m);
	con_replay_close(&r);

	/* The file changes under an open replay: step 1500's batch goes
	 * bad after the index was made; the clock stops there. */
	replay_write(path, 1500, &later);
	assert_int_equal(con_replay_open(&r, path), 0);
	assert_int_equal(r.n, 2 * REPLAY_STEPS);
	con_model_init(&m, "replay t.weft");
	m.mode = CON_MODE_REPLAY;
	con_replay_seek(&r, &m, r.first_ns);
	fp = fopen(path, "r+b");
	assert_non_null(fp);
	assert_int_equal(fseek(fp, (long)later, SEEK_SET), 0);
	assert_int_equal(fputc(0, fp), 0);
	assert_int_equal(fclose(fp), 0);
	con_replay_seek(&r, &m, r.last_ns);
	assert_non_null(r.error);
	assert_non_null(strstr(r.error, "changed"));
	assert_int_equal(r.n, 2 * 1500);
	assert_int_equal(r.next, r.n);
	/* The reference to the last record played: the reader reads on
	 * past the bad one now (it skips it), the replay does not. */
	replay_reference(path, &ref, r.rec[r.n - 1].at, &rf, 0, NULL, 0);
	assert_same_model(&m, &ref);
	con_model_fini(&ref);
	con_model_fini(&m);
	con_replay_close(&r);
	unlink(path);
	free(path);
}

/* ------------------------------------------------------------- clone */

/* Every view of @m, drawn as text one after another. */
static char *render_all(con_model_t *m)
{
	char *all = NULL, *x;
	size_t len = 0;

	for (int v = 0; v < CON_VIEW_MAX; v++) {
		con_session_t s = { .model = m, .once = true, .ascii = true };

		s.view = (con_view_id_t)v;
		s.detail_task = 2;
		s.detail_res = 5;
		x = render(&s, 140, 40);
		all = realloc(all, len + strlen(x) + 1);
		assert_non_null(all);
		memcpy(all + len, x, strlen(x) + 1);
		len += strlen(x);
		free(x);
	}
	return all;
}

/* More of everything: a task renamed, one new, a resource, events. */
static void rich_more(con_model_t *m)
{
	Weft__V1__Task *ts[] = { task_msg(2, "renamed", 50),
				 task_msg(77, "holder", 3) };
	Weft__V1__Resource *rs[] = {
		res_msg(5, WEFT_RES_MUTEX, "cache", "app.c", 20),
		res_msg(8, WEFT_RES_MPSC, "jobs", "jobs.c", 9),
	};
	weft_event_t ev[40];

	for (size_t i = 0; i < 40; i++)
		ev[i] = (weft_event_t){ .ts = 8 * SEC + i * MS,
					.a1 = (i % 5) * MS,
					.task = 77,
					.worker = (uint16_t)(i % 2),
					.kind = WEFT_EV_POLL };
	con_model_events(m, ev, 40);
	feed_res(m, 9 * SEC, ts, 2, rs, 2);
}

/*
 * A clone is a deep copy: the same views; the source freed, the clone
 * still reads and takes more frames as a model built the same way (under
 * ASan a pointer shared with the freed source is a use after free); and
 * the clone freed first leaves the source whole.
 */
static void test_console_model_clone(void **state)
{
	con_model_t a, b, c;
	char *x, *y;

	(void)state;
	rich(&a);
	con_model_watch(&a, 2);
	con_model_resort(&a);
	con_model_clone(&b, &a);
	assert_true(con_model_is_consistent(&b));
	assert_true(con_model_res_is_consistent(&b));
	assert_true(con_model_bytes(&b) > sizeof(b));
	x = render_all(&a);
	y = render_all(&b);
	assert_string_equal(x, y);
	free(y);
	con_model_fini(&a);
	y = render_all(&b);
	assert_string_equal(x, y);
	free(x);
	free(y);

	/* The clone fed on, as the source would have been. */
	rich(&c);
	con_model_watch(&c, 2);
	rich_more(&b);
	rich_more(&c);
	assert_true(con_model_is_consistent(&b));
	x = render_all(&b);
	y = render_all(&c);
	assert_string_equal(x, y);
	free(x);
	free(y);

	/* A clone of the clone, freed first: the clone reads on. */
	con_model_clone(&a, &b);
	x = render_all(&a);
	con_model_fini(&a);
	rich_more(&b);
	rich_more(&c);
	y = render_all(&b);
	free(x);
	x = render_all(&c);
	assert_string_equal(x, y);
	free(x);
	free(y);
	con_model_fini(&b);
	con_model_fini(&c);

	/* An empty model clones too. */
	con_model_init(&a, "empty");
	con_model_clone(&b, &a);
	con_model_fini(&a);
	x = render_all(&b);
	free(x);
	con_model_fini(&b);
}

/*
 * Checkpoints: taken every few KB here (and thinned to a budget of a few
 * models, the spacing doubled), seeks back and forth restore the nearest
 * one and read on from it, and the model is the one every frame up to
 * that time makes; seeking forward past what was read reads on.  Then
 * the whole replay check with them, and with none at all.
 */
static void test_console_replay_checkpoints(void **state)
{
	static const double at[] = { 0.9, 0.1, 0.5, 0.05, 0.95, 0.3,
				     0.3, 0.7, 0.0, 1.0,  0.02 };
	char *path = replay_path("ckpt.weft");
	uint64_t ids[] = { 2, 9 }, off, restored, every;
	con_replay_t r;
	con_model_t m;

	(void)state;
	replay_write(path, 0, &off);
	assert_int_equal(con_replay_open(&r, path), 0);
	assert_int_equal(r.nckpt, 0);
	r.ckpt_every = every = 2048;
	con_model_init(&m, "replay t.weft");
	m.mode = CON_MODE_REPLAY;
	/* The budget: room for about six copies of the whole model. */
	{
		con_model_t tmp;
		struct replay_ref rf;

		replay_reference(path, &tmp, UINT64_MAX, &rf, 0, NULL, 0);
		r.ckpt_budget = 6 * con_model_bytes(&tmp);
		con_model_fini(&tmp);
	}
	/* Halfway, then to the end: checkpoints all the way. */
	assert_replay_at(&r, &m, path, (r.first_ns + r.last_ns) / 2);
	assert_replay_at(&r, &m, path, r.last_ns);
	assert_true(r.nckpt >= 2);
	assert_true(r.ckpt_thinned > 0);
	assert_true(r.ckpt_every > every);
	assert_true(r.ckpt_bytes <= r.ckpt_budget);
	for (size_t i = 1; i < r.nckpt; i++)
		assert_true(r.ckpt[i].next > r.ckpt[i - 1].next);
	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
		uint64_t pos =
			r.first_ns +
			(uint64_t)(at[i] * (double)(r.last_ns - r.first_ns));
		size_t before = r.next;

		restored = r.ckpt_restored;
		assert_replay_at(&r, &m, path, pos);
		assert_true(r.ckpt_bytes <= r.ckpt_budget);
		/* Back past a checkpoint: restored, not read from the start. */
		if (r.next < before && r.nckpt && r.ckpt[0].next <= r.next)
			assert_int_equal(r.ckpt_restored, restored + 1);
	}
	assert_true(r.ckpt_restored >= 4);
	/* The sort the session chose survives a restore. */
	con_model_set_sort(&m, CON_COL_POLLS, true);
	con_replay_seek(&r, &m, r.first_ns + (r.last_ns - r.first_ns) / 4);
	assert_int_equal(m.sort_col, CON_COL_POLLS);
	assert_true(m.sort_invert);
	con_model_fini(&m);
	con_replay_close(&r);

	/* The whole check with checkpoints, then with none (budget 0). */
	replay_ckpt_every = 1024;
	replay_check(path, ids, 2, true);
	setenv("WEFT_CONSOLE_CHECKPOINT_MB", "0", 1);
	replay_ckpt_every = 0;
	assert_int_equal(con_replay_open(&r, path), 0);
	assert_int_equal(r.ckpt_budget, 0);
	con_replay_close(&r);
	replay_check(path, ids, 2, true);
	unsetenv("WEFT_CONSOLE_CHECKPOINT_MB");
	unlink(path);
	free(path);
}

/*
 * The checkpoints' packed form (model_pack.c): a model packed and
 * unpacked is the same model (figures, every view, the tasks one by one),
 * and a blob cut short, or with bytes changed, is refused or read within
 * its bounds (never past them: ASan), never a crash.
 */
static void test_console_model_pack(void **state)
{
	char *path = replay_path("pack.weft");
	con_model_t ref, got;
	con_packed_t pk;
	struct replay_ref rf;
	uint64_t off, seed = 0x9e3779b97f4a7c15ull;
	size_t len;

	(void)state;
	replay_write(path, 0, &off);
	replay_reference(path, &ref, UINT64_MAX, &rf, 0, NULL, 0);
	assert_true(ref.ntasks > 0);
	con_session_resort(&(con_session_t){ .model = &ref, .once = true });
	con_model_pack(&pk, &ref);
	assert_true(con_packed_bytes(&pk) < con_model_bytes(&ref));
	assert_true(con_model_unpack(&got, &pk));
	assert_same_model(&got, &ref);
	assert_int_equal(got.nlist, ref.nlist);
	assert_int_equal(got.nfinished, ref.nfinished);
	for (size_t i = 0; i < ref.ntasks; i++) {
		const con_task_t *a = ref.tasks[i], *b = got.tasks[i];

		assert_int_equal(a->id, b->id);
		assert_int_equal(a->parent, b->parent);
		assert_string_equal(a->name, b->name);
		assert_string_equal(a->file, b->file);
		assert_string_equal(a->parked_file, b->parked_file);
		assert_int_equal(a->spawned_ns, b->spawned_ns);
		assert_int_equal(a->finished_ns, b->finished_ns);
		assert_int_equal(a->busy_ns, b->busy_ns);
		assert_int_equal(a->idle_since_ns, b->idle_since_ns);
		assert_int_equal(a->waiting_since_ns, b->waiting_since_ns);
		assert_int_equal(a->status, b->status);
		assert_int_equal(a->state, b->state);
		assert_int_equal(!a->hist, !b->hist);
		if (a->hist)
			assert_memory_equal(a->hist, b->hist,
					    2 * sizeof(*a->hist));
		assert_int_equal(!a->waited, !b->waited);
		if (a->waited)
			assert_memory_equal(a->waited, b->waited,
					    WEFT_TASK_WAITED *
						    sizeof(*a->waited));
		assert_ptr_equal(con_model_task(&got, a->id), b);
	}
	assert_int_equal(got.recent_cap, ref.recent_cap);
	if (ref.recent)
		assert_memory_equal(got.recent, ref.recent,
				    (ref.nrecent < ref.recent_cap ?
					     ref.nrecent :
					     ref.recent_cap) *
					    sizeof(*ref.recent));
	/* The copy lives on its own: fed on, freed, the original intact. */
	con_model_retain(&got);
	con_model_fini(&got);

	/* Cut short anywhere: refused. */
	len = pk.len;
	for (size_t cut = 0; cut < len; cut += 1 + cut / 7) {
		pk.len = cut;
		assert_false(con_model_unpack(&got, &pk));
	}
	pk.len = len;
	/* Bytes changed: refused, or a model that frees cleanly. */
	for (int i = 0; i < 400; i++) {
		size_t at;
		uint8_t was;

		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		at = (size_t)(seed >> 33) % len;
		was = pk.blob[at];
		pk.blob[at] ^= (uint8_t)(1u << (seed >> 29 & 7));
		if (con_model_unpack(&got, &pk))
			con_model_fini(&got);
		pk.blob[at] = was;
	}
	assert_true(con_model_unpack(&got, &pk));
	assert_same_model(&got, &ref);
	con_model_fini(&got);
	con_packed_free(&pk);
	con_model_fini(&ref);
	unlink(path);
	free(path);
}

/*
 * A model saved whole (model_save.c, the side index's checkpoints) is
 * bytes every one of which is defined: the structures written as they
 * are in memory have zeroed padding (the warnings' array, grown with
 * realloc, is written through zeroed copies).  Under valgrind (the
 * suite's valgrind phase) the bytes are checked and written to a real
 * file, as the side index writes them; loaded back, the same model.
 */
static void test_console_model_save_defined(void **state)
{
	char *path = replay_path("save.weft"), *out = replay_path("save.bin");
	con_model_t ref, got;
	con_saved_t sv;
	struct replay_ref rf;
	uint64_t off;
	int fd;

	(void)state;
	replay_write(path, 0, &off);
	replay_reference(path, &ref, UINT64_MAX, &rf, 0, NULL, 0);
	assert_true(ref.nwarnings > 0);
	assert_true(ref.nworkers > 0);
	con_model_save(&sv, &ref);
#ifdef HAVE_MEMCHECK
	/* 0 when every byte is defined; else the first undefined one's
	 * address (and valgrind's report of where it was made). */
	assert_true(VALGRIND_CHECK_MEM_IS_DEFINED(sv.p, sv.len) == 0);
#endif
	fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, sv.p, sv.len), (ssize_t)sv.len);
	assert_int_equal(close(fd), 0);
	assert_true(con_model_load(&got, sv.p, sv.len));
	assert_same_model(&got, &ref);
	assert_int_equal(got.nwarnings, ref.nwarnings);
	for (size_t i = 0; i < ref.nwarnings; i++) {
		assert_int_equal(got.warnings[i].seq, ref.warnings[i].seq);
		assert_int_equal(got.warnings[i].kind, ref.warnings[i].kind);
		assert_int_equal(got.warnings[i].line, ref.warnings[i].line);
		assert_int_equal(got.warnings[i].history,
				 ref.warnings[i].history);
	}
	con_model_fini(&got);
	con_saved_free(&sv);
	con_model_fini(&ref);
	unlink(out);
	unlink(path);
	free(out);
	free(path);
}

/*
 * Checkpoints taken by the index pass (its own model fed every record
 * it indexes): once the file is indexed, a seek forward into what was
 * never replayed restores the nearest one instead of reading on, and
 * every seek gives the model every frame up to that time makes; on a
 * file cut inside its last record too.
 */
static void index_ckpt_check(const char *path, bool spill)
{
	static const double at[] = { 0.9, 0.5, 0.95, 0.1, 0.6, 1.0, 0.0, 0.3 };
	struct replay_ref rf;
	con_replay_t r;
	con_model_t m;
	size_t restores = 0;

	replay_reference(path, NULL, UINT64_MAX, &rf, 0, NULL, 0);
	assert_int_equal(con_replay_open_lazy(&r, path, 0), 0);
	assert_non_null(r.im);
	r.ckpt_every = 1024;
	con_model_init(&m, "replay t.weft");
	m.mode = CON_MODE_REPLAY;
	assert_replay_at(&r, &m, path, r.first_ns);
	assert_true(con_replay_index(&r, UINT64_MAX));
	assert_null(r.im);
	assert_int_equal(r.n, rf.n);
	assert_true(r.nckpt >= 2);
	assert_true(r.ckpt_bytes <= r.ckpt_budget);
	assert_true(r.spill_bytes <= r.spill_budget);
	for (size_t i = 1; i < r.nckpt; i++)
		assert_true(r.ckpt[i].next > r.ckpt[i - 1].next);
	/* Their packed tasks in the spill file, or in memory (also when
	 * only tmpfs is there for the file). */
	if (!spill)
		assert_int_equal(r.spill_fd, -1);
	spill = r.spill_fd >= 0;
	for (size_t i = 0; i < r.nckpt; i++) {
		assert_int_equal(r.ckpt[i].spilled, spill);
		assert_int_equal(!r.ckpt[i].pk.blob, spill);
	}
	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
		uint64_t pos =
			r.first_ns +
			(uint64_t)(at[i] * (double)(r.last_ns - r.first_ns));
		uint64_t before = r.ckpt_restored;

		assert_replay_at(&r, &m, path, pos);
		restores += r.ckpt_restored > before;
	}
	assert_true(restores >= 3);
	assert_null(r.error);
	con_model_fini(&m);
	con_replay_close(&r);
}

static void test_console_replay_index_checkpoints(void **state)
{
	char *path = replay_path("ixckpt.weft");
	struct stat st;
	uint64_t off;

	(void)state;
	replay_write(path, 0, &off);
	/* Spilled to a file, then in memory. */
	setenv("WEFT_CONSOLE_CHECKPOINT_DISK_MB", "64", 1);
	index_ckpt_check(path, true);
	setenv("WEFT_CONSOLE_CHECKPOINT_DISK_MB", "0", 1);
	index_ckpt_check(path, false);
	/* Cut inside its last record. */
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(truncate(path, st.st_size - 3), 0);
	index_ckpt_check(path, false);
	setenv("WEFT_CONSOLE_CHECKPOINT_DISK_MB", "64", 1);
	index_ckpt_check(path, true);
	unsetenv("WEFT_CONSOLE_CHECKPOINT_DISK_MB");
	/* No checkpoints: no index model either. */
	setenv("WEFT_CONSOLE_CHECKPOINT_MB", "0", 1);
	{
		con_replay_t r;

		assert_int_equal(con_replay_open_lazy(&r, path, 0), 0);
		assert_null(r.im);
		assert_true(con_replay_index(&r, UINT64_MAX));
		assert_int_equal(r.nckpt, 0);
		con_replay_close(&r);
	}
	unsetenv("WEFT_CONSOLE_CHECKPOINT_MB");
	unlink(path);
	free(path);
}

/*
 * Opened lazily (the console's first screen): a record or two indexed,
 * the rest as seeks reach past it and by con_replay_index(); the model
 * is the same as every frame read in order all along, and the figures
 * the whole index gives are the same at its end.
 */
static void test_console_replay_lazy_index(void **state)
{
	char *path = replay_path("lazy.weft");
	con_replay_t r;
	con_model_t m;
	struct replay_ref rf;
	uint64_t off, mid;

	(void)state;
	replay_write(path, 0, &off);
	replay_reference(path, NULL, UINT64_MAX, &rf, 0, NULL, 0);
	assert_int_equal(con_replay_open_lazy(&r, path, 0), 0);
	assert_false(r.indexed);
	assert_true(r.n >= 1 && r.n < rf.n);
	assert_true(r.indexed_bytes < r.size);
	assert_int_equal(r.first_ns, rf.first_ns);
	assert_true(r.last_ns < rf.last_ns);
	con_model_init(&m, "replay t.weft");
	m.mode = CON_MODE_REPLAY;
	assert_replay_at(&r, &m, path, r.first_ns);
	/* A seek past the index indexes as far as it needs, no further. */
	mid = rf.first_ns + (rf.last_ns - rf.first_ns) / 2;
	assert_replay_at(&r, &m, path, mid);
	assert_false(r.indexed);
	assert_true(r.n < rf.n);
	assert_true(r.last_ns > mid);
	/* A step at a time, then the rest. */
	assert_false(con_replay_index(&r, 0));
	assert_true(con_replay_index(&r, UINT64_MAX));
	assert_true(r.indexed);
	assert_null(r.ix);
	assert_int_equal(r.n, rf.n);
	assert_int_equal(r.last_ns, rf.last_ns);
	assert_int_equal(r.indexed_bytes, r.size);
	assert_replay_at(&r, &m, path, r.last_ns);
	assert_replay_at(&r, &m, path, r.first_ns + (mid - r.first_ns) / 3);
	con_model_fini(&m);
	con_replay_close(&r);

	/* The next warning, indexing on to find it; closed while still
	 * indexing: nothing leaks (ASan). */
	assert_int_equal(con_replay_open_lazy(&r, path, 0), 0);
	assert_false(r.indexed);
	assert_int_equal(con_replay_next_warning(&r), 0);
	assert_int_equal(con_replay_find_warning(&r), rf.warn_after);
	con_replay_close(&r);
	assert_int_equal(con_replay_open_lazy(&r, path, 0), 0);
	assert_false(r.indexed);
	con_replay_close(&r);
	unlink(path);
	free(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_console_model_update_applied),
		cmocka_unit_test(test_console_model_workers_past_64),
		cmocka_unit_test(test_console_model_update_merges),
		cmocka_unit_test(test_console_model_retention),
		cmocka_unit_test(test_console_model_many_tasks),
		cmocka_unit_test(test_console_model_sort),
		cmocka_unit_test(test_console_model_filter),
		cmocka_unit_test(test_console_model_filter_running),
		cmocka_unit_test(test_console_model_warnings_newest_first),
		cmocka_unit_test(test_console_model_warning_history),
		cmocka_unit_test(test_console_model_timeline),
		cmocka_unit_test(test_console_model_malformed_ignored),
		cmocka_unit_test(test_console_model_resources),
		cmocka_unit_test(test_console_model_res_holder_forgotten),
		cmocka_unit_test(test_console_views_resources),
		cmocka_unit_test(test_console_views_every_size),
		cmocka_unit_test(test_console_views_render),
		cmocka_unit_test(test_console_views_workers_wide_index),
		cmocka_unit_test(test_console_keys_actions),
		cmocka_unit_test(test_console_model_incremental_resort),
		cmocka_unit_test(test_console_model_retains_at_most_retain_max),
		cmocka_unit_test(test_console_model_retention_churn),
		cmocka_unit_test(
			test_console_model_retains_newest_in_any_order),
		cmocka_unit_test(test_console_model_watch_events),
		cmocka_unit_test(test_console_model_spike),
		cmocka_unit_test(test_console_keys_timeline),
		cmocka_unit_test(test_console_views_detail),
		cmocka_unit_test(test_console_views_detail_await_sites),
		cmocka_unit_test(test_console_views_detail_await_sites_saved),
		cmocka_unit_test(test_console_views_blocking_pool),
		cmocka_unit_test(test_console_views_busy_and_poll),
		cmocka_unit_test(test_console_model_running_not_idle),
		cmocka_unit_test(test_console_views_detail_deadlock),
		cmocka_unit_test(test_console_views_resources_by_design),
		cmocka_unit_test(test_console_views_no_worker_and_cancelled),
		cmocka_unit_test(test_console_views_parked_at),
		cmocka_unit_test(test_console_views_idle_unknown),
		cmocka_unit_test(test_console_model_groups),
		cmocka_unit_test(test_console_replay_same_as_frames),
		cmocka_unit_test(test_console_replay_cut_and_malformed),
		cmocka_unit_test(test_console_model_clone),
		cmocka_unit_test(test_console_model_bytes_per_task),
		cmocka_unit_test(test_console_replay_checkpoints),
		cmocka_unit_test(test_console_replay_lazy_index),
		cmocka_unit_test(test_console_model_pack),
		cmocka_unit_test(test_console_model_save_defined),
		cmocka_unit_test(test_console_replay_index_checkpoints),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
