/* SPDX-License-Identifier: MIT */
/*
 * The console's state store (console/model.c) fed with hand-built
 * frames: updates applied and merged, retention of finished tasks, sort
 * and filter of the task list, warnings newest first, worker history and
 * the timeline from POLL events, malformed content ignored; then the
 * views rendered to text and the key actions, all without a terminal.
 */
#include <curses.h>
#include <string.h>

#include "test_helpers.h"

#include "console.h"

#define MS 1000000ull
#define SEC 1000000000ull

static Weft__V1__Task *task_msg(uint64_t id, const char *name,
				uint64_t polls)
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
static void feed(con_model_t *m, uint64_t now, Weft__V1__Task **tasks,
		 size_t n, Weft__V1__Worker **workers, size_t nw,
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
	assert_null(con_model_task(&m, 2)); /* over 2 s: gone */
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
	feed(&m, 2 * SEC, ts, 0, NULL, 0, NULL, 0);
	assert_int_equal(m.ntasks, N / 2);
	for (int i = 0; i < N; i++)
		assert_true((con_model_task(&m, (uint64_t)i + 1) != NULL) ==
			    (i % 2 == 0));
	assert_true(con_model_is_consistent(&m));
	con_model_fini(&m);
	free(ts);
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
	free(x[0]);
	free(x[1]);
	con_model_fini(&m);
}

static void test_console_model_timeline(void **state)
{
	con_model_t m;
	weft_event_t ev[2] = {
		/* 50 ms poll ending at 1.250 s on worker 1 */
		{ .ts = 1250 * MS, .a1 = 50 * MS, .worker = 1,
		  .kind = WEFT_EV_POLL },
		/* 100 ms poll ending at 1.350 s on worker 0: two buckets */
		{ .ts = 1350 * MS, .a1 = 100 * MS, .worker = 0,
		  .kind = WEFT_EV_POLL },
	};
	uint64_t b;

	(void)state;
	con_model_init(&m, "test");
	con_model_events(&m, ev, 2);
	assert_int_equal(m.events, 2);
	b = 1350 * MS / CON_TL_BUCKET_NS;
	assert_int_equal(m.tl_last, b);
	assert_int_equal(m.workers[1].tl_busy[(b - 1) % CON_TL_BUCKETS],
			 50 * MS);
	assert_int_equal(m.workers[0].tl_busy[b % CON_TL_BUCKETS], 50 * MS);
	assert_int_equal(m.workers[0].tl_busy[(b - 1) % CON_TL_BUCKETS],
			 50 * MS);
	assert_int_equal(m.workers[0].tl_max_poll[b % CON_TL_BUCKETS],
			 100 * MS);
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
	weft_event_t bad = { .ts = 5, .a1 = 99, .worker = 9999,
			     .kind = WEFT_EV_POLL };

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
	assert_true(con_model_task(&m, 5)->has_hist);
	assert_int_equal(con_model_task(&m, 5)->state, 0);
	con_model_events(&m, &bad, 1);
	con_model_frame(&m, NULL);
	assert_true(con_model_is_consistent(&m));
	con_model_fini(&m);
}

/* -------------------------------------------------------------- views */

static char *render(con_session_t *s, int w, int h)
{
	con_grid_t g;
	char *buf = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&buf, &len);

	assert_non_null(fp);
	con_model_resort(s->model);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_console_model_update_applied),
		cmocka_unit_test(test_console_model_update_merges),
		cmocka_unit_test(test_console_model_retention),
		cmocka_unit_test(test_console_model_many_tasks),
		cmocka_unit_test(test_console_model_sort),
		cmocka_unit_test(test_console_model_filter),
		cmocka_unit_test(test_console_model_warnings_newest_first),
		cmocka_unit_test(test_console_model_timeline),
		cmocka_unit_test(test_console_model_malformed_ignored),
		cmocka_unit_test(test_console_views_render),
		cmocka_unit_test(test_console_keys_actions),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
