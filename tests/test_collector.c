/* SPDX-License-Identifier: MIT */
/*
 * The collector folding in event streams built by hand: two rings, events
 * pushed in a chosen order, passes run on this thread (no collector
 * thread, no runtime).  For what a live run makes rarely: a ring taken in
 * one pass holding what happened after events that another ring hands
 * over only in the next pass.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_helpers.h"

#include "collector_internal.h"

#include "collector_harness.h"

static uint64_t now_ns = 1;

static int setup(void **state)
{
	(void)state;
	return harness_setup();
}

static int teardown(void **state)
{
	(void)state;
	harness_teardown(now_ns += 1000000);
	return 0;
}

/* A poll of @task from tick @from to tick @to, with @flags. */
static void poll(ring_entry_t *e, unsigned from, unsigned to, uint64_t task,
		 uint32_t flags)
{
	ev(e, to, WEFT_EV_POLL, task, (uint64_t)(to - from) * TICK, flags);
}

static void pass(void)
{
	pthread_mutex_lock(&p->lock);
	weft__collector_pass(p, now_ns += 1000000);
	pthread_mutex_unlock(&p->lock);
}

/* In order, a wake after a pending poll queues the task. */
static void test_wake_after_poll_queues(void **state)
{
	(void)state;
	ev(ring_b, 1, WEFT_EV_SPAWN, 10, 0, 0);
	poll(ring_b, 2, 3, 10, 0);
	pass();
	assert_int_equal(task(10).state, WEFT_TASK_IDLE);
	ev(ring_a, 5, WEFT_EV_WAKE, 10, 0, 0);
	pass();
	assert_int_equal(task(10).state, WEFT_TASK_SCHEDULED);
	assert_int_equal(task(10).wakes, 1);
}

/*
 * A wake handed over a pass late, stamped before the task's last poll
 * began: made in a long poll of its waker (stamped with that poll's start)
 * after the task's poll ended, it queued the task, which must show so.
 */
static void test_late_wake_from_long_poll_queues(void **state)
{
	(void)state;
	ev(ring_b, 1, WEFT_EV_SPAWN, 11, 0, 0);
	poll(ring_b, 2, 3, 11, 0); /* the task, pending at 3 */
	pass();
	assert_int_equal(task(11).state, WEFT_TASK_IDLE);
	/* Its waker polled from 1 to 10 and woke it at 8: stamped 1. */
	ev(ring_a, 1, WEFT_EV_WAKE, 11, 99, WEFT_WAKE_BY_VAL);
	poll(ring_a, 1, 10, 99, 0);
	pass();
	assert_int_equal(task(11).state, WEFT_TASK_SCHEDULED);
	assert_int_equal(task(11).wakes, 1);
}

/* A wake during the last poll, late: the task goes back in a queue. */
static void test_late_wake_in_poll_queues(void **state)
{
	(void)state;
	ev(ring_b, 1, WEFT_EV_SPAWN, 12, 0, 0);
	poll(ring_b, 2, 6, 12, 0);
	pass();
	assert_int_equal(task(12).state, WEFT_TASK_IDLE);
	ev(ring_a, 4, WEFT_EV_WAKE, 12, 0, 0);
	pass();
	assert_int_equal(task(12).state, WEFT_TASK_SCHEDULED);
}

/* A spawn handed over after the task's polls and end: it stays done. */
static void test_late_spawn_keeps_task_done(void **state)
{
	weft_probe_task_t t;

	(void)state;
	poll(ring_b, 2, 3, 13, WEFT_POLL_READY);
	ev(ring_b, 3, WEFT_EV_COMPLETE, 13, 0, 0);
	pass();
	assert_int_equal(task(13).state, WEFT_TASK_DONE);
	ev(ring_a, 1, WEFT_EV_SPAWN, 13, 7, 0);
	pass();
	t = task(13);
	assert_int_equal(t.state, WEFT_TASK_DONE);
	assert_int_equal(t.parent, 7);
	assert_int_equal(t.polls, 1);
}

/* A spawn handed over after a pending poll: the task stays idle. */
static void test_late_spawn_keeps_task_idle(void **state)
{
	(void)state;
	poll(ring_b, 2, 3, 14, 0);
	pass();
	ev(ring_a, 1, WEFT_EV_SPAWN, 14, 0, 0);
	pass();
	assert_int_equal(task(14).state, WEFT_TASK_IDLE);
}

/* Spawn sites: what the runtime's rings say of where tasks come from. */
static const char site_name[] = "handler", site_file[] = "src/handler.c";
static const char other_name[] = "other", other_file[] = "src/other.c";

/* Site @id announced on @e's ring at tick @at (SITE, SITE_LOC). */
static void site(ring_entry_t *e, unsigned at, uint64_t id, const char *name,
		 const char *file, uint32_t line, uint32_t size)
{
	ev(e, at, WEFT_EV_SITE, id, (uintptr_t)name, size);
	ev(e, at, WEFT_EV_SITE_LOC, id, (uintptr_t)file, line);
}

/* A SPAWN of @task from site @id (kind @kind). */
static void spawn(ring_entry_t *e, unsigned at, uint64_t task, uint64_t id,
		  uint32_t kind)
{
	ev(e, at, WEFT_EV_SPAWN, task, 0,
	   kind | (uint32_t)id << WEFT_SPAWN_SITE_SHIFT);
}

/* A SPAWN naming a site met on its ring is that site's task: one event. */
static void test_site_names_spawn(void **state)
{
	weft_probe_task_t t;

	(void)state;
	site(ring_a, 1, 5, site_name, site_file, 42, 96);
	spawn(ring_a, 1, 70, 5, 1);
	spawn(ring_a, 2, 71, 5, 0);
	pass();
	t = task(70);
	assert_ptr_equal(t.name, site_name);
	assert_ptr_equal(t.file, site_file);
	assert_int_equal(t.line, 42);
	assert_int_equal(t.state_size, 96);
	assert_int_equal(t.kind, 1);
	t = task(71);
	assert_ptr_equal(t.name, site_name);
	assert_int_equal(t.kind, 0);
	/* The site's id is no task's. */
	pthread_mutex_lock(&p->lock);
	assert_null(weft__collector_task(p, 5));
	pthread_mutex_unlock(&p->lock);
}

/*
 * A site whose announcement was dropped (or half of it): its tasks show
 * as not known, not as the site met before them nor the one after.
 */
static void test_site_dropped_is_unknown(void **state)
{
	weft_probe_task_t t;

	(void)state;
	site(ring_a, 1, 5, site_name, site_file, 42, 96);
	spawn(ring_a, 1, 72, 5, 0);
	/* Site 6 never met, site 7 only half (its SITE_LOC dropped). */
	spawn(ring_a, 2, 73, 6, 0);
	ev(ring_b, 2, WEFT_EV_SITE, 7, (uintptr_t)other_name, 64);
	spawn(ring_b, 3, 74, 7, 0);
	/* Past every site a ring can announce. */
	spawn(ring_b, 3, 75, 100000, 0);
	pass();
	assert_ptr_equal(task(72).name, site_name);
	for (uint64_t id = 73; id <= 75; id++) {
		t = task(id);
		assert_null(t.name);
		assert_null(t.file);
		assert_int_equal(t.line, 0);
	}
	pthread_mutex_lock(&p->lock);
	assert_int_equal(p->sites_unknown, 3);
	pthread_mutex_unlock(&p->lock);
}

/*
 * A trace from before sites (and a record with none): SPAWN with site 0,
 * then SPAWN_INFO and SPAWN_LOC, read as they always were.
 */
static void test_site_old_format_reads(void **state)
{
	weft_probe_task_t t;

	(void)state;
	site(ring_a, 1, 5, site_name, site_file, 42, 96);
	ev(ring_a, 2, WEFT_EV_SPAWN, 76, 0, 1);
	ev(ring_a, 2, WEFT_EV_SPAWN_INFO, 76, (uintptr_t)other_name, 4096);
	ev(ring_a, 2, WEFT_EV_SPAWN_LOC, 76, (uintptr_t)other_file, 7);
	pass();
	t = task(76);
	assert_ptr_equal(t.name, other_name);
	assert_ptr_equal(t.file, other_file);
	assert_int_equal(t.line, 7);
	assert_int_equal(t.state_size, 4096);
	assert_int_equal(t.kind, 1);
	assert_true(t.warnings & 1u << WEFT_WARN_LARGE_FUTURE);
}

/*
 * Tiny tasks (one poll under 2 us), most from one spawn site: the warning
 * names that site, its task name and a task of it, so that the user
 * knows which spawn to batch; a few from another site do not hide it.
 */
static void test_tiny_tasks_name_their_site(void **state)
{
	weft_probe_warning_t w = { 0 };
	bool found = false;
	uint64_t id = 1000;
	unsigned at = 1;

	(void)state;
	site(ring_a, at, 5, site_name, site_file, 42, 96);
	site(ring_a, at, 6, other_name, other_file, 7, 64);
	for (unsigned i = 0; i < 12000; i++, id++, at++) {
		spawn(ring_a, at, id, i % 10 ? 5 : 6, 0);
		ev(ring_a, at, WEFT_EV_POLL, id, 1, WEFT_POLL_READY);
		ev(ring_a, at, WEFT_EV_COMPLETE, id, 0, 0);
		if (i % 300 == 299)
			pass();
	}
	pthread_mutex_lock(&p->lock);
	/* The warning's check: more than 10,000, 10 s on. */
	weft__collector_pass(p, now_ns += 11000000000ull);
	for (uint64_t q = 0; q < p->warn_seq && q < WARN_KEEP; q++)
		if (p->warnings[q].kind == WEFT_WARN_TINY_TASKS) {
			w = p->warnings[q];
			found = true;
		}
	pthread_mutex_unlock(&p->lock);
	assert_true(found);
	print_message("%s\n", w.detail);
	assert_non_null(strstr(w.detail, "12000 tasks ran one poll"));
	assert_non_null(strstr(w.detail, "10800 of them \"handler\" spawned "
					 "at handler.c:42"));
	assert_ptr_equal(w.task_name, site_name);
	assert_ptr_equal(w.file, site_file);
	assert_int_equal(w.line, 42);
	assert_true(w.task >= 1000 && w.task < id && w.task % 10 != 0);
}

/* Await sites (issue 21): where a task parks, named in its POLL. */
static const char await_file[] = "src/await.c";

/* A pending POLL of @task naming await site @id (0: none). */
static void poll_at(ring_entry_t *e, unsigned at, uint64_t task, uint32_t id)
{
	ev(e, at, WEFT_EV_POLL, task, 10, id << WEFT_POLL_SITE_SHIFT);
}

/*
 * A task that parks at two awaits in turn: each POLL names the site met
 * on its ring, and the record says it, step by step; a POLL naming no
 * site leaves the place as it was.
 */
static void test_await_site_names_poll(void **state)
{
	(void)state;
	ev(ring_a, 1, WEFT_EV_SPAWN, 80, 0, 0);
	ev(ring_a, 2, WEFT_EV_AWAIT_SITE, 3, (uintptr_t)await_file, 30);
	poll_at(ring_a, 2, 80, 3);
	pass();
	assert_ptr_equal(task(80).parked_file, await_file);
	assert_int_equal(task(80).parked_line, 30);
	ev(ring_b, 3, WEFT_EV_AWAIT_SITE, 4, (uintptr_t)await_file, 40);
	poll_at(ring_b, 3, 80, 4);
	pass();
	assert_int_equal(task(80).parked_line, 40);
	/* Back at the first, on the other ring: told again there first. */
	ev(ring_b, 4, WEFT_EV_AWAIT_SITE, 3, (uintptr_t)await_file, 30);
	poll_at(ring_b, 4, 80, 3);
	poll_at(ring_b, 5, 80, 0);
	pass();
	assert_ptr_equal(task(80).parked_file, await_file);
	assert_int_equal(task(80).parked_line, 30);
	/* The site's id is no task's. */
	pthread_mutex_lock(&p->lock);
	assert_null(weft__collector_task(p, 3));
	assert_int_equal(p->awaits_unknown, 0);
	pthread_mutex_unlock(&p->lock);
}

/*
 * A POLL naming an await site never met (its announcement dropped): the
 * task parks at a place not known, not at the site met before it nor at
 * the one it was at; and PARKED_AT, the form before, is read as it was.
 */
static void test_await_site_unknown_and_old_form(void **state)
{
	(void)state;
	ev(ring_a, 1, WEFT_EV_SPAWN, 81, 0, 0);
	ev(ring_a, 2, WEFT_EV_POLL, 81, 10, 0);
	ev(ring_a, 2, WEFT_EV_PARKED_AT, 81, (uintptr_t)await_file, 12);
	pass();
	assert_ptr_equal(task(81).parked_file, await_file);
	assert_int_equal(task(81).parked_line, 12);
	ev(ring_a, 3, WEFT_EV_AWAIT_SITE, 5, (uintptr_t)await_file, 50);
	poll_at(ring_a, 4, 81, 6);
	pass();
	assert_null(task(81).parked_file);
	assert_int_equal(task(81).parked_line, 0);
	/* Past every id a ring can announce: not known either. */
	poll_at(ring_a, 5, 81, 5);
	poll_at(ring_a, 6, 81, 100000);
	pass();
	assert_null(task(81).parked_file);
	assert_int_equal(task(81).parked_line, 0);
	pthread_mutex_lock(&p->lock);
	assert_int_equal(p->awaits_unknown, 2);
	pthread_mutex_unlock(&p->lock);
}

/* A large future's warning from its site, located there. */
static void test_site_large_future_located(void **state)
{
	const weft_probe_warning_t *w;

	(void)state;
	site(ring_b, 1, 9, other_name, other_file, 11, 8192);
	spawn(ring_b, 1, 77, 9, 0);
	pass();
	assert_true(task(77).warnings & 1u << WEFT_WARN_LARGE_FUTURE);
	pthread_mutex_lock(&p->lock);
	w = &p->warnings[(p->warn_seq - 1) % WARN_KEEP];
	assert_int_equal(w->kind, WEFT_WARN_LARGE_FUTURE);
	assert_int_equal(w->task, 77);
	assert_ptr_equal(w->file, other_file);
	assert_int_equal(w->line, 11);
	pthread_mutex_unlock(&p->lock);
}

/* The SCHEDULING_DELAY warnings raised so far that name @task. */
static unsigned delay_warnings(uint64_t task)
{
	unsigned n = 0;

	pthread_mutex_lock(&p->lock);
	for (uint64_t s = p->warn_seq > WARN_KEEP ? p->warn_seq - WARN_KEEP : 0;
	     s < p->warn_seq; s++) {
		const weft_probe_warning_t *w = &p->warnings[s % WARN_KEEP];

		n += w->kind == WEFT_WARN_SCHEDULING_DELAY && w->task == task;
	}
	pthread_mutex_unlock(&p->lock);
	return n;
}

#define LATE 10000000u /* ticks: seconds, whatever the clock */

/*
 * A poll dropped by a full ring leaves its task SCHEDULED since its wake;
 * woken and polled again seconds later, it would read as one wait of
 * seconds (the "false 510 ms" of issue 17).  Not raised: that wait spans
 * the drops.  Its twin, woken after the drops and polled as late, is.
 */
static void test_no_sched_delay_across_drops(void **state)
{
	weft_event_t x = { .task = 20, .worker = 0, .kind = WEFT_EV_POLL };
	uint64_t suppressed;

	(void)state;
	ev(ring_b, 1, WEFT_EV_SPAWN, 20, 0, 0);
	poll(ring_b, 2, 3, 20, 0);
	ev(ring_b, 10, WEFT_EV_WAKE, 20, 0, 0);
	pass();
	assert_int_equal(task(20).state, WEFT_TASK_SCHEDULED);
	suppressed = p->drops_suppressed;
	/* Ring a fills; the poll of 20 from 11 to 12 does not fit. */
	for (unsigned i = 0; i < 1024; i++)
		ev(ring_a, 11, WEFT_EV_MARK, 0, i, 0);
	x.ts = base + 12ull * TICK;
	x.a1 = TICK;
	assert_false(weft__ring_push_spsc(&ring_a->ring, &x));
	pass();
	/* Woken again and polled seconds later. */
	ev(ring_b, LATE, WEFT_EV_WAKE, 20, 0, 0);
	poll(ring_a, LATE + 1, LATE + 2, 20, 0);
	pass();
	assert_int_equal(task(20).polls, 2);
	assert_int_equal(delay_warnings(20), 0);
	assert_int_equal(p->drops_suppressed, suppressed + 1);

	/* The twin: its wait starts after the drops. */
	ev(ring_b, LATE, WEFT_EV_SPAWN, 21, 0, 0);
	poll(ring_b, LATE + 1, LATE + 2, 21, 0);
	ev(ring_b, LATE + 3, WEFT_EV_WAKE, 21, 0, 0);
	poll(ring_a, 2 * LATE, 2 * LATE + 1, 21, 0);
	pass();
	assert_int_equal(delay_warnings(21), 1);
}

/*
 * A victim held longer and longer: said at its first wait over the
 * threshold, not at one less than twice that, again at one more than
 * twice it, and not at one as long again.  An audit's victim, behind one
 * 80 ms poll and then 1.5 s behind a run of them, was said only at the
 * first (a once bit).
 */
static void test_sched_delay_said_again_longer(void **state)
{
	static const unsigned waits_ms[] = { 80, 120, 1500, 1500, 3100 };
	static const unsigned said[] = { 1, 1, 2, 2, 3 };
	unsigned ms = ms_ticks(1), at = 10;

	(void)state;
	ev(ring_b, 1, WEFT_EV_SPAWN, 30, 0, 0);
	poll(ring_b, 2, 3, 30, 0);
	pass();
	for (unsigned i = 0; i < 5; i++) {
		ev(ring_b, at, WEFT_EV_WAKE, 30, 0, 0);
		at += waits_ms[i] * ms;
		poll(ring_b, at, at + 1, 30, 0);
		at += 10;
		pass();
		if (delay_warnings(30) != said[i])
			fail_msg("after a wait of %u ms: %u warnings, not %u",
				 waits_ms[i], delay_warnings(30), said[i]);
	}
	assert_int_equal(task(30).polls, 6);
}

/*
 * A wake burst that wakes a task still in its poll (it went on after it
 * registered for the wake): the wait from that poll's end to its next poll
 * is the burst's, as its fellows' are, and is not warned on its own.  The
 * CI's TSan phase once warned such a victim ("woken, then waited 532.1 ms
 * for a worker") beside the burst naming its waker: the end of the poll
 * the wake came in forgot which burst the wake belonged to.  Its twin
 * wakes itself in the poll that answered the burst's wake: the wait after
 * that is its own, and a burst long over must not hide it.
 */
static void test_burst_wake_in_poll_is_the_bursts(void **state)
{
	const uint64_t waker = 99, first = 100, n = 12, twin = 200;
	uint32_t saved = p->config.wake_burst;

	(void)state;
	p->config.wake_burst = 8;
	ev(ring_b, 1, WEFT_EV_SPAWN, waker, 0, 0);
	for (uint64_t i = 0; i < n; i++)
		ev(ring_a, 1, WEFT_EV_SPAWN, first + i, 0, 0);
	ev(ring_a, 1, WEFT_EV_SPAWN, twin, 0, 0);
	/* All but the first wait from polls ended before the burst... */
	for (unsigned i = 1; i < n; i++)
		poll(ring_a, 1 + i, 2 + i, first + i, 0);
	poll(ring_a, 14, 15, twin, 0);
	/* ...the first from one the burst's wake comes in (20 to 40). */
	poll(ring_a, 20, 40, first, 0);
	/* The waker's poll, 30 to 35, wakes them all (stamped at its start). */
	for (uint64_t i = 0; i < n; i++)
		ev(ring_b, 30, WEFT_EV_WAKE, first + i, waker,
		   WEFT_WAKE_BY_VAL);
	ev(ring_b, 30, WEFT_EV_WAKE, twin, waker, WEFT_WAKE_BY_VAL);
	poll(ring_b, 30, 35, waker, WEFT_POLL_READY);
	/*
	 * The twin: its poll after the burst (50 to 60) answers the burst's
	 * wake and wakes itself; the wait from its end is its own, not the
	 * burst's, and is warned.
	 */
	ev(ring_a, 55, WEFT_EV_WAKE, twin, twin, 0);
	poll(ring_a, 50, 60, twin, 0);
	pass();
	/* Polled seconds later, every one of them, the twin first (while
	 * the burst is still kept). */
	poll(ring_a, LATE - 2, LATE - 1, twin, WEFT_POLL_READY);
	for (unsigned i = 0; i < n; i++)
		poll(ring_a, LATE + i, LATE + i + 1, first + i,
		     WEFT_POLL_READY);
	pass();
	pass();
	for (unsigned i = 0; i < n; i++)
		assert_int_equal(delay_warnings(first + i), 0);
	assert_int_equal(delay_warnings(twin), 1);
	p->config.wake_burst = saved;
}

/* ------------------------------------------------- a yielding task */

/* Tick @at as the collector takes it, in ns. */
static uint64_t ns_at(unsigned at)
{
	struct weft__probe_clock_conv cv;
	uint64_t raw = base + (uint64_t)at * TICK;

	weft__probe_clock_conv_get(&cv);
	return cv.tsc ? weft__probe_clock_conv_ts(&cv, raw) : raw;
}

/*
 * A task that yields again and again (the collector's fast path for a
 * poll, collector_events.c's poll_fast()), with what takes it off that
 * path in between: its first polls, a pass boundary, a wake of itself in
 * a poll that then returns pending, a move to another worker, its end.
 * Every count, sum and histogram must be what the events say, as worked
 * out here poll by poll.
 */
static void test_yields_counted(void **state)
{
	enum { ID = 40, POLLS = 40, CUT = 21 };
	struct {
		unsigned from, to, wake;
		uint32_t flags;
	} q[POLLS];
	const weft_probe_task_t *t;
	weft_probe_task_t tc;
	weft_hist_t ph, sh, gph, gsh;
	uint64_t woken = 0, sched = 0, busy = 0, maxp = 0, wakes = 0;
	unsigned at = 1, done = 0;

	(void)state;
	memset(&ph, 0, sizeof(ph));
	memset(&sh, 0, sizeof(sh));
	memset(&gph, 0, sizeof(gph));
	memset(&gsh, 0, sizeof(gsh));
	memset(&tc, 0, sizeof(tc));
	ev(ring_a, at, WEFT_EV_SPAWN, ID, 0, 0);
	for (unsigned i = 0; i < POLLS; i++) {
		/* Worker 0, then worker 1 from poll 25 on. */
		ring_entry_t *e = i < 25 ? ring_a : ring_b;

		q[i].from = at + 1 + i % 3;
		q[i].to = q[i].from + 1 + i % 4;
		q[i].wake = 0;
		q[i].flags = i == POLLS - 1 ? WEFT_POLL_READY :
			     i == 12        ? 0 :
					      WEFT_POLL_YIELDED;
		if (i == 12) {
			/* It wakes itself in the poll, which returns pending. */
			q[i].wake = q[i].from + 1;
			ev(e, q[i].wake, WEFT_EV_WAKE, ID, ID, 0);
		}
		poll(e, q[i].from, q[i].to, ID, q[i].flags);
		at = q[i].to;
		if (i + 1 != CUT && i + 1 != POLLS)
			continue;
		/*
		 * What the pass makes of them, in ns as it converted them
		 * (the clock's rate is refined at each pass's start).
		 */
		pass();
		if (!done)
			woken = ns_at(1);
		for (; done <= i; done++) {
			uint64_t delay = ns_at(q[done].from) - woken;
			uint64_t dur = ns_at(q[done].to) - ns_at(q[done].from);

			sched += delay;
			busy += dur;
			if (dur > maxp)
				maxp = dur;
			/* Both histograms from the second poll on. */
			if (done > 0) {
				weft_hist_record(&sh, delay);
				weft_hist_record(&ph, dur);
			}
			if (q[done].wake) {
				wakes++;
				woken = ns_at(q[done].wake);
			} else if (q[done].flags == WEFT_POLL_YIELDED) {
				wakes++;
				woken = ns_at(q[done].to);
			}
		}
	}
	/* Copied under the lock, checked out of it (a failed check leaves
	 * the test by longjmp). */
	pthread_mutex_lock(&p->lock);
	t = weft__collector_task(p, ID);
	if (t) {
		tc = *t;
		if (t->poll_hist)
			gph = *t->poll_hist;
		if (t->sched_hist)
			gsh = *t->sched_hist;
	}
	pthread_mutex_unlock(&p->lock);
	assert_non_null(t);
	assert_int_equal(tc.state, WEFT_TASK_DONE);
	assert_int_equal(tc.polls, POLLS);
	assert_int_equal(tc.wakes, wakes);
	assert_int_equal(tc.self_wakes, wakes);
	assert_int_equal(tc.busy_ns, busy);
	assert_int_equal(tc.scheduled_ns, sched);
	assert_int_equal(tc.max_poll_ns, maxp);
	assert_int_equal(tc.last_worker, 1);
	assert_memory_equal(&gph, &ph, sizeof(ph));
	assert_memory_equal(&gsh, &sh, sizeof(sh));
}

/*
 * The drain's conversion (weft__collector_conv_copy(): a POLL's duration
 * from its stamp's product) against the general one, to the nanosecond:
 * rates from 0.3 to 5 GHz and odd ones, stamps from the base to 2^60
 * ticks past it and before it, durations from 0 to past the stamp
 * (the general conversion's own cases), every kind the copy tells apart.
 */
static void test_conv_copy_exact(void **state)
{
	static const uint64_t q[] = { 14316557653ull, 4294967296ull,
				      2045222521ull,  1160802242ull,
				      858993459ull,   3ull,
				      4294967295ull,  2147483649ull };
	static const uint8_t kinds[] = { WEFT_EV_POLL, WEFT_EV_BLOCKING_END,
					 WEFT_EV_WAKE, WEFT_EV_SPAWN };
	uint64_t x = 0x853C49E6748FEA9Bull;
	unsigned checked = 0;

	(void)state;
	for (unsigned i = 0; i < sizeof(q) / sizeof(q[0]); i++) {
		for (unsigned n = 0; n < 20000; n++) {
			struct weft__probe_clock_conv cv = {
				.tsc = true,
				.base_tsc = n % 3 ? 1000000007ull * (n % 7) : 0,
				.base_ns = 1700000000000000000ull,
				.ns_per_tick_q32 = q[i],
			};
			weft_event_t s, got, want;
			uint64_t dt;

			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			/* A stamp of any magnitude past the base, or before. */
			dt = x >> (4 + x % 60);
			memset(&s, 0, sizeof(s));
			s.ts = n % 11 == 0 ?
				       cv.base_tsc - dt % (cv.base_tsc + 1) :
				       cv.base_tsc + dt;
			s.kind = kinds[n % 4];
			s.task = n;
			s.a2 = (uint32_t)x;
			s.worker = (uint16_t)(x >> 32);
			/* Durations up to the stamp and past it. */
			s.a1 = n % 13 == 0 ? dt + 1 + (x >> 40) :
			       n % 5 == 0  ? dt :
					     dt >> (x % 64);
			want = s;
			weft__probe_clock_conv_event(&cv, &want);
			weft__collector_conv_copy(&cv, &got, &s);
			if (memcmp(&got, &want, sizeof(got)))
				fail_msg(
					"q %llu base %llu raw %llu a1 %llu kind "
					"%u: ts %llu a1 %llu, want %llu %llu",
					(unsigned long long)q[i],
					(unsigned long long)cv.base_tsc,
					(unsigned long long)s.ts,
					(unsigned long long)s.a1, s.kind,
					(unsigned long long)got.ts,
					(unsigned long long)got.a1,
					(unsigned long long)want.ts,
					(unsigned long long)want.a1);
			checked++;
		}
	}
	assert_int_equal(checked, 8 * 20000);
}

/*
 * A copy of task @id's record and its two histograms (zeroed without
 * them), taken under the lock and checked out of it (a failed check
 * leaves the test by longjmp).  False: no record.
 */
static bool rec_copy(uint64_t id, task_rec_t *rec, weft_hist_t h[2])
{
	const weft_probe_task_t *t;

	memset(h, 0, 2 * sizeof(*h));
	pthread_mutex_lock(&p->lock);
	t = weft__collector_task(p, id);
	if (t) {
		memcpy(rec, (const char *)t - offsetof(task_rec_t, pub),
		       sizeof(*rec));
		if (rec->hist)
			memcpy(h, rec->hist, 2 * sizeof(*h));
	}
	pthread_mutex_unlock(&p->lock);
	return t != NULL;
}

/*
 * Many tasks yielding in turn on two workers, as yield_many's are, each
 * poll of a task between polls of others (the collector's fast path
 * finds each task by its hash bucket, not by the last one found): two of
 * them share a bucket with another (ids a table's size apart), some move
 * between the workers, some polls end pending with a wake of their own
 * task in them, passes fall between them.  Every count, sum, maximum and
 * histogram of every task is what the events say.
 */
static void test_interleaved_yields_counted(void **state)
{
	enum { NT = 14, ROUNDS = 24, CUT = 5 };
	struct want {
		uint64_t id, sched, busy, maxp, wakes;
		uint64_t woken; /* a tick until its first poll, then ns */
		unsigned polls, moved;
		uint16_t worker;
		weft_hist_t ph, sh;
	} *w = calloc(NT, sizeof(*w));
	/* A pass's polls, folded into w[] once it ran (in its ns). */
	struct made {
		unsigned k, from, to, wake;
		uint32_t flags;
	} *m = calloc((size_t)NT * CUT, sizeof(*m));
	uint64_t x = 0x2545F4914F6CDD1Dull;
	unsigned at = 1, nm = 0;

	(void)state;
	assert_non_null(w);
	assert_non_null(m);
	for (unsigned k = 0; k < NT; k++) {
		/* The last two share buckets with the first two. */
		unsigned c = k - (NT - 2);

		w[k].id = k < NT - 2 ? 500 + k : 500 + c + 1024 * (c + 1);
		w[k].woken = at;
		ev(ring_a, at++, WEFT_EV_SPAWN, w[k].id, 0, 0);
	}
	for (unsigned r = 0; r < ROUNDS; r++) {
		for (unsigned j = 0; j < NT; j++) {
			/* Each round in its own order. */
			unsigned k = (j * 5 + r * 3) % NT;
			struct made *q = &m[nm++];

			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			/*
			 * Mostly where it ran last; now and then the other (a
			 * move, as is a first poll off the spawning worker).
			 */
			if (!r)
				w[k].worker = k % 2;
			else if (x % 7 == 0)
				w[k].worker ^= 1;
			if (!r ? w[k].worker != 0 : x % 7 == 0)
				w[k].moved++;
			q->k = k;
			/*
			 * Longer waits and polls in the last rounds: their
			 * maxima come from polls taken once the busy-wait
			 * warning is said (counted a chunk at a time).
			 */
			q->from = at + 1 + (unsigned)(x >> 8) % 3 +
				  (r >= ROUNDS - 4 ? 3 * r : 0);
			q->to = q->from + 1 + (unsigned)(x >> 16) % 5 +
				(r >= ROUNDS - 4 ? r - 6 : 0);
			q->wake = 0;
			q->flags = WEFT_POLL_YIELDED;
			if (r == ROUNDS - 1) {
				q->flags = WEFT_POLL_READY;
			} else if ((x >> 24) % 9 == 0) {
				/* Pending, woken by itself in the poll. */
				q->flags = 0;
				q->wake = q->from + 1;
				ev(w[k].worker ? ring_b : ring_a, q->wake,
				   WEFT_EV_WAKE, w[k].id, w[k].id, 0);
			}
			poll(w[k].worker ? ring_b : ring_a, q->from, q->to,
			     w[k].id, q->flags);
			at = q->to;
		}
		if (r % CUT != CUT - 1 && r != ROUNDS - 1)
			continue;
		/* The clock's rate is refined at each pass's start. */
		pass();
		for (unsigned i = 0; i < nm; i++) {
			struct want *t = &w[m[i].k];
			uint64_t delay, dur = ns_at(m[i].to) - ns_at(m[i].from);

			/* Its spawn, in its first poll's pass. */
			if (!t->polls)
				t->woken = ns_at((unsigned)t->woken);
			delay = ns_at(m[i].from) - t->woken;

			t->sched += delay;
			t->busy += dur;
			if (dur > t->maxp)
				t->maxp = dur;
			if (t->polls++) {
				weft_hist_record(&t->sh, delay);
				weft_hist_record(&t->ph, dur);
			}
			if (m[i].wake) {
				t->wakes++;
				t->woken = ns_at(m[i].wake);
			} else if (m[i].flags == WEFT_POLL_YIELDED) {
				t->wakes++;
				t->woken = ns_at(m[i].to);
			}
		}
		nm = 0;
	}
	for (unsigned k = 0; k < NT; k++) {
		task_rec_t r;
		weft_hist_t h[2];

		assert_true(rec_copy(w[k].id, &r, h));
		assert_int_equal(r.pub.state, WEFT_TASK_DONE);
		assert_int_equal(r.pub.polls, ROUNDS);
		assert_int_equal(r.moved, w[k].moved);
		assert_int_equal(r.pub.polls, w[k].polls);
		assert_int_equal(r.pub.wakes, w[k].wakes);
		assert_int_equal(r.pub.self_wakes, w[k].wakes);
		assert_int_equal(r.pub.busy_ns, w[k].busy);
		assert_int_equal(r.pub.scheduled_ns, w[k].sched);
		assert_int_equal(r.pub.max_poll_ns, w[k].maxp);
		assert_int_equal(r.pub.last_worker, w[k].worker);
		assert_memory_equal(&h[0], &w[k].ph, sizeof(h[0]));
		assert_memory_equal(&h[1], &w[k].sh, sizeof(h[1]));
	}
	free(m);
	free(w);
}

/* ------------------------------------------------------- resources */

static weft_probe_resource_t res(uint64_t id, bool *found)
{
	const weft_probe_resource_t *r;
	weft_probe_resource_t out = { 0 };

	pthread_mutex_lock(&p->lock);
	r = weft__collector_res(p, id);
	*found = r != NULL;
	if (r)
		out = *r;
	pthread_mutex_unlock(&p->lock);
	return out;
}

/*
 * A notify finalised with a task queued on it: the drop is said and the
 * resource forgotten; the waiter's end, made after (its future saw the
 * close), must not bring it back as a resource of no kind, and the task
 * waits no more.
 */
static void test_res_late_end_after_drop(void **state)
{
	bool found;

	(void)state;
	ev(ring_a, 1, WEFT_EV_SPAWN, 30, 0, 0);
	ev(ring_a, 2, WEFT_EV_RES_NEW, 0, 100, WEFT_RES_NOTIFY);
	ev(ring_a, 2, WEFT_EV_RES_WAIT, 30, 100, WEFT_RES_OP_NOTIFIED);
	poll(ring_a, 2, 3, 30, 0);
	pass();
	assert_int_equal(task(30).waiting_on, 100);
	assert_int_equal(res(100, &found).nwaiters, 1);
	ev(ring_b, 4, WEFT_EV_RES_DROP, 0, 100, 0);
	pass();
	assert_true(res(100, &found).dropped_ns > 0);
	ev(ring_a, 5, WEFT_EV_RES_WAIT_END, 30, 100,
	   WEFT_RES_OP_NOTIFIED | WEFT_RES_CLOSED);
	pass();
	assert_true(res(100, &found).dropped_ns > 0);
	assert_int_equal(task(30).waiting_on, 0);
}

/*
 * A semaphore's holders count permits: A takes 2, B 1; A gives back 1,
 * then 1: B still holds its one.  Permits given back by a task that holds
 * none (a semaphore used as a signal) take nobody's.
 */
static void test_res_semaphore_permits(void **state)
{
	weft_probe_resource_t r;
	bool found;

	(void)state;
	ev(ring_a, 1, WEFT_EV_SPAWN, 31, 0, 0);
	ev(ring_a, 1, WEFT_EV_SPAWN, 32, 0, 0);
	ev(ring_a, 1, WEFT_EV_SPAWN, 33, 0, 0);
	ev(ring_a, 2, WEFT_EV_RES_NEW, 0, 101, WEFT_RES_SEMAPHORE);
	ev(ring_a, 2, WEFT_EV_RES_ACQUIRE, 31, 101, 2);
	ev(ring_a, 3, WEFT_EV_RES_ACQUIRE, 32, 101, 1);
	ev(ring_a, 4, WEFT_EV_RES_RELEASE, 31, 101, 1);
	ev(ring_a, 5, WEFT_EV_RES_RELEASE, 31, 101, 1);
	ev(ring_a, 6, WEFT_EV_RES_RELEASE, 33, 101, 1);
	pass();
	r = res(101, &found);
	assert_true(found);
	assert_int_equal(r.nholders, 1);
	assert_int_equal(r.holders[0], 32);
	assert_int_equal(r.acquires, 2);
}

/*
 * Ends a pass before their starts (another ring, read later): a wait's
 * end before the wait, a release before its acquire.  Nobody is left
 * waiting or holding.
 */
static void test_res_end_before_start(void **state)
{
	weft_probe_resource_t r;
	bool found;

	(void)state;
	ev(ring_a, 1, WEFT_EV_SPAWN, 34, 0, 0);
	ev(ring_a, 1, WEFT_EV_RES_NEW, 0, 102, WEFT_RES_MUTEX);
	ev(ring_a, 6, WEFT_EV_RES_WAIT_END, 34, 102,
	   WEFT_RES_OP_ACQUIRE | WEFT_RES_ACQUIRED | 1u << 16);
	ev(ring_a, 8, WEFT_EV_RES_RELEASE, 34, 102, 1);
	pass();
	ev(ring_b, 3, WEFT_EV_RES_WAIT, 34, 102, WEFT_RES_OP_ACQUIRE);
	pass();
	r = res(102, &found);
	assert_true(found);
	assert_int_equal(r.nwaiters, 0);
	assert_int_equal(r.nholders, 0);
	assert_int_equal(task(34).waiting_on, 0);

	/* And a release a pass before its acquire. */
	ev(ring_a, 20, WEFT_EV_RES_RELEASE, 34, 102, 1);
	pass();
	ev(ring_b, 18, WEFT_EV_RES_ACQUIRE, 34, 102, 1);
	pass();
	r = res(102, &found);
	assert_int_equal(r.nholders, 0);
	assert_int_equal(r.acquires, 2);
}

/*
 * Workers past 64 (issue 20): a ring of worker 70 gets records for it
 * (and its victims) as its events come.  Its steals from 40 workers, more
 * than the 32 counted: the victim it then takes most from, 99, comes
 * first with the tasks certainly taken from it, 16 victims listed; each
 * victim's stolen_out is exact.
 */
static void test_steals_past_64(void **state)
{
	ring_entry_t *r = ring_add(70);
	weft_probe_worker_t w;
	unsigned at = 1;

	(void)state;
	ev(r, at++, WEFT_EV_SPAWN, 20, 0, 0);
	poll(r, at, at + 1, 20, 0);
	at += 2;
	for (unsigned v = 0; v < 40; v++)
		ev(r, at++, WEFT_EV_STEAL, 0, v, 1);
	ev(r, at++, WEFT_EV_STEAL, 0, 99, 1);
	ev(r, at++, WEFT_EV_STEAL, 0, 99, 9);
	pass();

	pthread_mutex_lock(&p->lock);
	assert_true(p->nworker_slots >= 100);
	assert_true(p->wk[70].max_poll > 0);
	assert_int_equal(p->workers[99].stolen_out, 10);
	assert_int_equal(p->workers[39].stolen_out, 1);
	assert_int_equal(p->workers[0].stolen_out, 1);
	weft__collector_publish_steals(p, 70);
	w = p->workers[70];
	pthread_mutex_unlock(&p->lock);
	assert_int_equal(w.nstolen, WEFT_WORKER_STOLEN);
	assert_int_equal(w.stolen[0].victim, 99);
	/* It took a slot counted at 1 (err 1): 10 certain, its exact 10. */
	assert_int_equal(w.stolen[0].tasks, 10);
	for (unsigned i = 1; i < w.nstolen; i++)
		assert_int_equal(w.stolen[i].tasks, 1);
}

/* ------------------------------------------------- blocking-queue */

/* A pass whose clock reads tick @at (warnings look at it). */
static void pass_at(unsigned at)
{
	pthread_mutex_lock(&p->lock);
	weft__collector_pass(
		p, weft__probe_clock_to_ns(base + (uint64_t)at * TICK));
	pthread_mutex_unlock(&p->lock);
}

/* ------------------------------------------------ folds said whole */

static const char fold_name[] = "burst", fold_file[] = "src/burst.c";

/*
 * The rows of @kind raised since warning @from, and the warnings they
 * stand for: a fold's row ("N more from ...") N, any other row itself.
 */
static void said_since(uint64_t from, uint8_t kind, unsigned *rows,
		       unsigned long long *said)
{
	bool counts_right = true;

	*rows = 0;
	*said = 0;
	pthread_mutex_lock(&p->lock);
	for (uint64_t s = from; s < p->warn_seq; s++) {
		const weft_probe_warning_t *w = &p->warnings[s % WARN_KEEP];
		unsigned long long more;

		if (w->kind != kind)
			continue;
		(*rows)++;
		if (sscanf(w->detail, "%llu more ", &more) == 1 &&
		    strstr(w->detail, "(folded)")) {
			*said += more;
			counts_right &= w->count == more;
		} else {
			*said += 1;
			counts_right &= w->count <= 1;
		}
	}
	pthread_mutex_unlock(&p->lock);
	/* Each row's count field says what its text says. */
	assert_true(counts_right);
}

static uint64_t warn_seq_now(void)
{
	uint64_t s;

	pthread_mutex_lock(&p->lock);
	s = p->warn_seq;
	pthread_mutex_unlock(&p->lock);
	return s;
}

/* A pass at tick @at that serves a weft_probe_flush(). */
static void flush_pass_at(unsigned at)
{
	pthread_mutex_lock(&p->lock);
	p->flush_requested = 1;
	weft__collector_pass(
		p, weft__probe_clock_to_ns(base + (uint64_t)at * TICK));
	p->flush_requested = 0;
	pthread_mutex_unlock(&p->lock);
}

/* @n tasks from @first of site 6 (fold_name at fold_file:35), each one
 * poll of 15 ms, one after the other from tick @at; the tick after. */
static unsigned burst_of(unsigned at, uint64_t first, unsigned n)
{
	unsigned ms15 = ms_ticks(15);

	for (unsigned i = 0; i < n; i++) {
		spawn(ring_a, at, first + i, 6, 0);
		poll(ring_a, at, at + ms15, first + i, WEFT_POLL_READY);
		at += ms15 + 1;
	}
	return at;
}

/*
 * 20 handlers each block a 15 ms poll, and the process stops well within
 * the fold's second (burst.c of the outside tester, RUN_MS=0): five
 * rows, the other fifteen counted in the fold.  A flush says the fold
 * (the recorder flushes at its stop, at exit), and its window goes on:
 * five more in it are folded again, and the collector's stop says them.
 * The stats count every long poll, not the rows (a fold's row is no
 * warning of its own).  The fold's row was said only once its window
 * closed in a later pass: the fifteen were lost to a trace and to the
 * stats of a process that stopped first.
 */
static void test_fold_said_at_flush_and_stop(void **state)
{
	uint64_t from = warn_seq_now(), count0, count1, stats0, stats1;
	unsigned rows, at;
	unsigned long long said;

	(void)state;
	pthread_mutex_lock(&p->lock);
	count0 = p->warn_kind_count[WEFT_WARN_LONG_POLL];
	stats0 = p->stats.warnings;
	pthread_mutex_unlock(&p->lock);
	site(ring_a, 1, 6, fold_name, fold_file, 35, 64);
	at = burst_of(2, 400, 20);
	pass_at(at);
	said_since(from, WEFT_WARN_LONG_POLL, &rows, &said);
	assert_int_equal(rows, 5);
	assert_int_equal(said, 5);

	flush_pass_at(at + 1);
	said_since(from, WEFT_WARN_LONG_POLL, &rows, &said);
	assert_int_equal(rows, 6);
	assert_int_equal(said, 20);
	pthread_mutex_lock(&p->lock);
	count1 = p->warn_kind_count[WEFT_WARN_LONG_POLL];
	stats1 = p->stats.warnings;
	pthread_mutex_unlock(&p->lock);
	assert_int_equal(count1 - count0, 20);
	assert_int_equal(stats1 - stats0, 20);

	at = burst_of(at + 2, 420, 5);
	pass_at(at);
	said_since(from, WEFT_WARN_LONG_POLL, &rows, &said);
	assert_int_equal(rows, 6);
	assert_int_equal(said, 20);
	pthread_mutex_lock(&p->lock);
	weft__collector_stop(p);
	assert_int_equal(weft__collector_start(p), 0);
	count1 = p->warn_kind_count[WEFT_WARN_LONG_POLL];
	pthread_mutex_unlock(&p->lock);
	assert_int_equal(count1 - count0, 25);
	said_since(from, WEFT_WARN_LONG_POLL, &rows, &said);
	assert_int_equal(rows, 7);
	assert_int_equal(said, 25);
}

/*
 * One task, six polls of 150 ms, 500 ms apart (cpu_loop.c of the outside
 * tester): one long-poll row a second for the task, the others counted
 * in its fold and said, so that the rows stand for all six.  Those past
 * the task's limit were dropped, counted nowhere: three of six said.
 */
static void test_long_polls_past_task_limit_counted(void **state)
{
	uint64_t from = warn_seq_now(), count0, count1;
	unsigned rows, at = 2, ms150 = ms_ticks(150), ms500 = ms_ticks(500);
	unsigned long long said;

	(void)state;
	pthread_mutex_lock(&p->lock);
	count0 = p->warn_kind_count[WEFT_WARN_LONG_POLL];
	pthread_mutex_unlock(&p->lock);
	site(ring_a, 1, 7, other_name, other_file, 12, 64);
	spawn(ring_a, 1, 500, 7, 0);
	for (unsigned i = 0; i < 6; i++) {
		poll(ring_a, at, at + ms150, 500, i == 5 ? WEFT_POLL_READY : 0);
		at += ms150;
		pass_at(at + 1);
		at += ms500;
	}
	flush_pass_at(at);
	said_since(from, WEFT_WARN_LONG_POLL, &rows, &said);
	assert_in_range(rows, 4, 6);
	assert_int_equal(said, 6);
	pthread_mutex_lock(&p->lock);
	count1 = p->warn_kind_count[WEFT_WARN_LONG_POLL];
	pthread_mutex_unlock(&p->lock);
	assert_int_equal(count1 - count0, 6);
}

/*
 * The OS holds worker 0 off its CPU in three polls 100 ms apart: one
 * PREEMPTED row a second a worker, the others counted and said by the
 * flush.  They were dropped uncounted.
 */
static void test_preempted_past_limit_counted(void **state)
{
	uint64_t from = warn_seq_now(), t0;
	unsigned rows;
	unsigned long long said;

	(void)state;
	pass_at(1);
	pthread_mutex_lock(&p->lock);
	t0 = weft__probe_clock_to_ns(base + TICK);
	for (unsigned i = 0; i < 3; i++)
		weft__collector_warn_preempted(p, 0, t0 + i * 100000000ull,
					       30000000, 2000000);
	pthread_mutex_unlock(&p->lock);
	flush_pass_at(2 + ms_ticks(300));
	said_since(from, WEFT_WARN_PREEMPTED, &rows, &said);
	assert_int_equal(rows, 2);
	assert_int_equal(said, 3);
}

/* The last warning of @kind raised on @task: found or not. */
static bool warning_on(uint8_t kind, uint64_t task, weft_probe_warning_t *out)
{
	bool found = false;

	pthread_mutex_lock(&p->lock);
	for (uint64_t s = p->warn_seq > WARN_KEEP ? p->warn_seq - WARN_KEEP : 0;
	     s < p->warn_seq; s++) {
		const weft_probe_warning_t *w = &p->warnings[s % WARN_KEEP];

		if (w->kind == kind && w->task == task) {
			*out = *w;
			found = true;
		}
	}
	pthread_mutex_unlock(&p->lock);
	return found;
}

/*
 * Polls of 40 ms on worker 0.  Task 600's spent 38 ms in a blocking-pool
 * submission (its RT_WAIT stamped at its start, as blocking.c does):
 * the runtime's time, not the task's, said as a worker warning naming no
 * task.  Task 601's waited 10 ms of its 40: still its own long poll.
 * Task 602's wait came in an earlier, short poll: its long one is its
 * own.  (An outside tester's pool program used as it should be had its
 * handler blamed for "a blocking call" under load: the worker slept on
 * the pool's lock, held by a pool thread the OS kept off a CPU.)
 */
static void test_rt_wait_not_blamed(void **state)
{
	uint64_t from = warn_seq_now();
	unsigned ms = ms_ticks(1), at = 2, rows = 0;
	weft_probe_warning_t w;

	(void)state;
	site(ring_a, 1, 7, other_name, other_file, 12, 64);
	spawn(ring_a, 1, 600, 7, 0);
	spawn(ring_a, 1, 601, 7, 0);
	spawn(ring_a, 1, 602, 7, 0);
	ev(ring_a, at + ms, WEFT_EV_RT_WAIT, 600, WEFT_RT_WAIT_POOL_SUBMIT,
	   38000);
	poll(ring_a, at, at + 40 * ms, 600, 0);
	at += 41 * ms;
	ev(ring_a, at + ms, WEFT_EV_RT_WAIT, 601, WEFT_RT_WAIT_POOL_SUBMIT,
	   10000);
	poll(ring_a, at, at + 40 * ms, 601, 0);
	at += 41 * ms;
	ev(ring_a, at, WEFT_EV_RT_WAIT, 602, WEFT_RT_WAIT_POOL_SUBMIT, 1000);
	poll(ring_a, at, at + 2 * ms, 602, 0);
	at += 3 * ms;
	poll(ring_a, at, at + 40 * ms, 602, 0);
	pass_at(at + 41 * ms);
	assert_false(warning_on(WEFT_WARN_LONG_POLL, 600, &w));
	assert_true(warning_on(WEFT_WARN_LONG_POLL, 601, &w));
	assert_true(warning_on(WEFT_WARN_LONG_POLL, 602, &w));
	pthread_mutex_lock(&p->lock);
	for (uint64_t s = from; s < p->warn_seq; s++) {
		const weft_probe_warning_t *x = &p->warnings[s % WARN_KEEP];

		if (x->kind != WEFT_WARN_PREEMPTED)
			continue;
		rows++;
		assert_int_equal(x->task, 0);
		assert_int_equal(x->worker, 0);
		assert_non_null(strstr(x->detail, "spent 38.0 ms of a 40.0 ms "
						  "poll in the runtime's "
						  "blocking-pool submission"));
	}
	pthread_mutex_unlock(&p->lock);
	assert_int_equal(rows, 1);
}

/*
 * A lock held across an await whose two events a pass split: task 7's
 * LOCK_HELD_PENDING taken by one pass, its LOCK_SITE (pushed right after
 * it, as a worker does) only by the next, with task 8's pair, stamped
 * earlier and handed over late, merged in before it.  Both are warned
 * when released, each with its own lock and site.  (The pending kept for
 * its pass only was lost with its warning: a worker preempted between
 * the two pushes, in a CI run under ASan.)
 */
static void test_lock_site_in_next_pass(void **state)
{
	weft_probe_warning_t w;

	(void)state;
	ev(ring_a, 1, WEFT_EV_SPAWN, 7, 0, 0);
	poll(ring_a, 10, 12, 7, 0);
	ev(ring_a, 12, WEFT_EV_LOCK_HELD_PENDING, 7, (uintptr_t) "ledger", 5);
	pass();
	ev(ring_b, 1, WEFT_EV_SPAWN, 8, 0, 0);
	poll(ring_b, 10, 11, 8, 0);
	ev(ring_b, 11, WEFT_EV_LOCK_HELD_PENDING, 8, (uintptr_t) "accounts", 2);
	ev(ring_b, 11, WEFT_EV_LOCK_SITE, 8, (uintptr_t) "b.c", 4);
	ev(ring_a, 12, WEFT_EV_LOCK_SITE, 7, (uintptr_t) "a.c", 3);
	pass();
	assert_int_equal(task(7).locks_held, 1);
	assert_int_equal(task(8).locks_held, 1);
	ev(ring_a, 40, WEFT_EV_LOCK_HELD_END, 7, (uintptr_t) "ledger", 1);
	ev(ring_b, 41, WEFT_EV_LOCK_HELD_END, 8, (uintptr_t) "accounts", 0);
	pass();
	assert_true(warning_on(WEFT_WARN_LOCK_HELD_ACROSS_AWAIT, 7, &w));
	assert_non_null(strstr(w.detail, "\"ledger\" (taken at a.c:3)"));
	assert_non_null(strstr(w.detail, "1 tasks or threads blocked"));
	assert_true(warning_on(WEFT_WARN_LOCK_HELD_ACROSS_AWAIT, 8, &w));
	assert_non_null(strstr(w.detail, "\"accounts\" (taken at b.c:4)"));
}

/*
 * A large future whose SPAWN_INFO and SPAWN_LOC a pass split (the ring
 * read between the two pushes): task 7's warning is published with its
 * location, once the next pass reads it, not before without it, and
 * another ring's warning raised in between takes nothing of it.  Task
 * 8's SPAWN_LOC never comes (dropped): its warning is said by the end
 * of the pass after, unlocated.  (Said at the SPAWN_INFO, the warning
 * went out with no location; the location patched into the kept copy
 * later reached no subscriber.)
 */
static void test_large_future_loc_in_next_pass(void **state)
{
	weft_probe_warning_t w;
	uint64_t n;

	(void)state;
	ev(ring_a, 1, WEFT_EV_SPAWN, 7, 0, 0);
	ev(ring_a, 1, WEFT_EV_SPAWN_INFO, 7, (uintptr_t)other_name, 8192);
	ev(ring_b, 1, WEFT_EV_SPAWN, 8, 0, 0);
	ev(ring_b, 1, WEFT_EV_SPAWN_INFO, 8, (uintptr_t)site_name, 4096);
	pass();
	/* Published: nothing of either without its location. */
	assert_false(warning_on(WEFT_WARN_LARGE_FUTURE, 7, &w) &&
		     w.file == NULL);
	assert_false(warning_on(WEFT_WARN_LARGE_FUTURE, 8, &w));
	ev(ring_b, 2, WEFT_EV_SPAWN, 9, 0, 0);
	ev(ring_b, 2, WEFT_EV_SPAWN_INFO, 9, (uintptr_t)site_name, 2048);
	ev(ring_b, 2, WEFT_EV_SPAWN_LOC, 9, (uintptr_t)site_file, 5);
	ev(ring_a, 3, WEFT_EV_SPAWN_LOC, 7, (uintptr_t)other_file, 11);
	pass();
	assert_true(warning_on(WEFT_WARN_LARGE_FUTURE, 7, &w));
	assert_ptr_equal(w.file, other_file);
	assert_int_equal(w.line, 11);
	assert_non_null(strstr(w.detail, "8192 bytes"));
	/* The text says where too: the row names the task, not the site. */
	assert_non_null(strstr(w.detail, "(spawned at "));
	assert_non_null(strstr(w.detail, ":11)"));
	assert_true(warning_on(WEFT_WARN_LARGE_FUTURE, 9, &w));
	assert_ptr_equal(w.file, site_file);
	/* Task 8's, unlocated, by the end of the pass after its own. */
	assert_true(warning_on(WEFT_WARN_LARGE_FUTURE, 8, &w));
	assert_null(w.file);
	assert_non_null(strstr(w.detail, "4096 bytes"));
	/* Each once. */
	pthread_mutex_lock(&p->lock);
	n = p->warn_kind_count[WEFT_WARN_LARGE_FUTURE];
	pthread_mutex_unlock(&p->lock);
	pass();
	pthread_mutex_lock(&p->lock);
	n = p->warn_kind_count[WEFT_WARN_LARGE_FUTURE] - n;
	pthread_mutex_unlock(&p->lock);
	assert_int_equal(n, 0);
}

/*
 * A lock's release read before its site: task 9's LOCK_HELD_PENDING and
 * the LOCK_HELD_END of its next poll, on the other worker, taken by one
 * pass, the LOCK_SITE pushed between them only by the next (the
 * collector read the first ring's tail between the two pushes, the
 * second's after the release); and task 10's release read a pass before
 * its pending and site.  Each is warned as released, with its hold and
 * who blocked, and neither is left held: no "still held" a second on.
 * Nor is task 11's, pending twice in one hold and released between its
 * second pending and that one's site.  (The release that found no hold
 * was dropped: no warning at the release, and a second on a false
 * "still held"; the second pending's site made a hold of its own.)
 */
static void test_lock_released_before_site(void **state)
{
	unsigned t0 = 4 * LATE;
	weft_probe_warning_t w;

	(void)state;
	ev(ring_a, t0, WEFT_EV_SPAWN, 9, 0, 0);
	ev(ring_a, t0, WEFT_EV_SPAWN, 10, 0, 0);
	poll(ring_a, t0 + 10, t0 + 12, 9, 0);
	ev(ring_a, t0 + 12, WEFT_EV_LOCK_HELD_PENDING, 9, (uintptr_t) "ledger",
	   5);
	ev(ring_b, t0 + 20, WEFT_EV_LOCK_HELD_END, 9, (uintptr_t) "ledger", 2);
	ev(ring_b, t0 + 22, WEFT_EV_LOCK_HELD_END, 10, (uintptr_t) "journal",
	   1);
	pass_at(t0 + 23);
	ev(ring_a, t0 + 12, WEFT_EV_LOCK_SITE, 9, (uintptr_t) "a.c", 3);
	poll(ring_a, t0 + 13, t0 + 14, 10, 0);
	ev(ring_a, t0 + 14, WEFT_EV_LOCK_HELD_PENDING, 10,
	   (uintptr_t) "journal", 4);
	ev(ring_a, t0 + 14, WEFT_EV_LOCK_SITE, 10, (uintptr_t) "j.c", 8);
	pass_at(t0 + 24);
	assert_true(warning_on(WEFT_WARN_LOCK_HELD_ACROSS_AWAIT, 9, &w));
	assert_non_null(strstr(w.detail, "\"ledger\" (taken at a.c:3) "
					 "across an await: held"));
	assert_non_null(strstr(w.detail, "2 tasks or threads blocked"));
	assert_true(warning_on(WEFT_WARN_LOCK_HELD_ACROSS_AWAIT, 10, &w));
	assert_non_null(strstr(w.detail, "\"journal\" (taken at j.c:8) "
					 "across an await: held"));
	/* Task 11 pending twice in one hold, released between its second
	 * pending and that pending's site. */
	ev(ring_a, t0 + 30, WEFT_EV_SPAWN, 11, 0, 0);
	poll(ring_a, t0 + 30, t0 + 31, 11, 0);
	ev(ring_a, t0 + 31, WEFT_EV_LOCK_HELD_PENDING, 11, (uintptr_t) "vault",
	   1);
	ev(ring_a, t0 + 31, WEFT_EV_LOCK_SITE, 11, (uintptr_t) "v.c", 2);
	poll(ring_a, t0 + 32, t0 + 33, 11, 0);
	ev(ring_a, t0 + 33, WEFT_EV_LOCK_HELD_PENDING, 11, (uintptr_t) "vault",
	   3);
	ev(ring_b, t0 + 35, WEFT_EV_LOCK_HELD_END, 11, (uintptr_t) "vault", 0);
	pass_at(t0 + 36);
	ev(ring_a, t0 + 33, WEFT_EV_LOCK_SITE, 11, (uintptr_t) "v.c", 2);
	pass_at(t0 + 37);
	assert_true(warning_on(WEFT_WARN_LOCK_HELD_ACROSS_AWAIT, 11, &w));
	assert_non_null(strstr(w.detail, "across an await: held"));
	pass_at(t0 + 37 + ms_ticks(2000));
	assert_true(warning_on(WEFT_WARN_LOCK_HELD_ACROSS_AWAIT, 11, &w));
	assert_null(strstr(w.detail, "still held"));
	assert_true(warning_on(WEFT_WARN_LOCK_HELD_ACROSS_AWAIT, 9, &w));
	assert_null(strstr(w.detail, "still held"));
	assert_true(warning_on(WEFT_WARN_LOCK_HELD_ACROSS_AWAIT, 10, &w));
	assert_null(strstr(w.detail, "still held"));
}

/*
 * A lock held across an await whose release a full ring dropped: the
 * hold is never told released, and a second on it reads as still held.
 * Not said: the drops fell within it, and its release may be among them
 * (as a wait's across drops is not, collector_res_warn.c).  (It was said,
 * "still held", of a lock released long before.)
 */
static void test_lock_held_across_drops_unsaid(void **state)
{
	weft_event_t x = { .task = 12,
			   .worker = 1,
			   .kind = WEFT_EV_LOCK_HELD_END };
	weft_probe_warning_t w;
	uint64_t suppressed;

	(void)state;
	ev(ring_a, 50, WEFT_EV_SPAWN, 12, 0, 0);
	poll(ring_a, 50, 51, 12, 0);
	ev(ring_a, 51, WEFT_EV_LOCK_HELD_PENDING, 12, (uintptr_t) "till", 1);
	ev(ring_a, 51, WEFT_EV_LOCK_SITE, 12, (uintptr_t) "t.c", 5);
	pass_at(52);
	suppressed = p->drops_suppressed;
	/* Ring b fills; the release at 61 does not fit. */
	for (unsigned i = 0; i < 1024; i++)
		ev(ring_b, 60, WEFT_EV_MARK, 0, i, 0);
	x.ts = base + 61ull * TICK;
	x.a1 = (uintptr_t) "till";
	assert_false(weft__ring_push_spsc(&ring_b->ring, &x));
	pass_at(62);
	pass_at(62 + ms_ticks(2000));
	assert_false(warning_on(WEFT_WARN_LOCK_HELD_ACROSS_AWAIT, 12, &w));
	/* (Its lost-waker check too: idle, no waker known.) */
	assert_true(p->drops_suppressed > suppressed);
}

static void pool_job_start(ring_entry_t *e, unsigned at, uint64_t task,
			   uint64_t pool)
{
	ev(e, at, WEFT_EV_RES_ACQUIRE, task, pool, 1);
	ev(e, at, WEFT_EV_RES_SITE, task, (uintptr_t) "routes.c", 12);
	ev(e, at, WEFT_EV_RES_LABEL, task, (uintptr_t) "slow-report", 0);
}

/*
 * A convoy over between two looks (they come every 250 ms): a job of
 * task 60 held the pool's one thread 30 ms while task 61's job waited.
 * Nobody holds it when looked at; the warning names the job that held
 * it, and its task.
 */
static void test_res_pool_convoy_over(void **state)
{
	unsigned t0 = LATE, ms = ms_ticks(1);
	weft_probe_warning_t w;

	(void)state;
	ev(ring_a, t0, WEFT_EV_SPAWN, 60, 0, 0);
	ev(ring_a, t0, WEFT_EV_SPAWN, 61, 0, 0);
	ev(ring_a, t0, WEFT_EV_RES_NEW, 0, 110, WEFT_RES_BLOCKING_POOL);
	pool_job_start(ring_b, t0 + 1, 60, 110);
	ev(ring_a, t0 + 2, WEFT_EV_RES_WAIT, 61, 110, WEFT_RES_OP_JOB);
	ev(ring_b, t0 + 30 * ms, WEFT_EV_RES_RELEASE, 60, 110, 1);
	ev(ring_a, t0 + 30 * ms + 1, WEFT_EV_RES_WAIT_END, 61, 110,
	   WEFT_RES_OP_JOB);
	pool_job_start(ring_b, t0 + 30 * ms + 2, 61, 110);
	ev(ring_b, t0 + 31 * ms, WEFT_EV_RES_RELEASE, 61, 110, 1);
	pass_at(t0 + 300 * ms);
	assert_true(warning_on(WEFT_WARN_BLOCKING_QUEUE, 60, &w));
	print_message("%s\n", w.detail);
	assert_non_null(strstr(w.detail, "1 jobs waited > 10 ms"));
	assert_non_null(strstr(w.detail, "held longest by \"slow-report\" "
					 "(routes.c:12) of task 60"));
}

/*
 * A wait read before the start of the job it waits behind (that job's
 * thread's ring read a pass later, or the pool's threads still
 * starting): no warning of an unknown culprit while the wait is young;
 * once the job is seen, it is named.
 */
static void test_res_pool_culprit_late(void **state)
{
	unsigned t0 = 2 * LATE, ms = ms_ticks(1);
	weft_probe_warning_t w;

	(void)state;
	ev(ring_a, t0, WEFT_EV_SPAWN, 62, 0, 0);
	ev(ring_a, t0, WEFT_EV_SPAWN, 63, 0, 0);
	ev(ring_a, t0, WEFT_EV_RES_NEW, 0, 111, WEFT_RES_BLOCKING_POOL);
	ev(ring_a, t0 + 2, WEFT_EV_RES_WAIT, 63, 111, WEFT_RES_OP_JOB);
	pass_at(t0 + 30 * ms);
	assert_false(warning_on(WEFT_WARN_BLOCKING_QUEUE, 0, &w));
	assert_false(warning_on(WEFT_WARN_BLOCKING_QUEUE, 62, &w));
	pool_job_start(ring_b, t0 + 1, 62, 111);
	pass_at(t0 + 300 * ms);
	assert_true(warning_on(WEFT_WARN_BLOCKING_QUEUE, 62, &w));
	print_message("%s\n", w.detail);
	assert_non_null(strstr(w.detail, "on its threads: 1 x "
					 "\"slow-report\" (routes.c:12) of "
					 "task 62"));
}

/* ------------------------------------------------------- deadlocks */

static const char bank_file[] = "bank.c";

/* A resource @id of @kind named @name, at tick @at. */
static void res_named(unsigned at, uint64_t id, uint32_t kind, const char *name)
{
	ev(ring_a, at, WEFT_EV_RES_NEW, 0, id, kind);
	ev(ring_a, at, WEFT_EV_RES_NAME, id, (uintptr_t)name, 0);
}

/* @task takes @res (one permit) at bank.c:@line, at tick @at. */
static void res_take(unsigned at, uint64_t task, uint64_t res, uint32_t line)
{
	ev(ring_a, at, WEFT_EV_RES_ACQUIRE, task, res, 1);
	ev(ring_a, at, WEFT_EV_RES_SITE, task, (uintptr_t)bank_file, line);
}

/* The warnings of @kind kept (of every test so far: compare counts). */
static unsigned warnings_of(uint8_t kind)
{
	unsigned n = 0;

	pthread_mutex_lock(&p->lock);
	for (uint64_t s = p->warn_seq > WARN_KEEP ? p->warn_seq - WARN_KEEP : 0;
	     s < p->warn_seq; s++)
		n += p->warnings[s % WARN_KEEP].kind == kind;
	pthread_mutex_unlock(&p->lock);
	return n;
}

/*
 * A lock held by a thread, not a task (weft_block_on(), a plain thread:
 * task 0), while a task waits past the threshold: the contention warning
 * says a thread held it, where it was taken, not "a task not seen" (an
 * audit's block_on holder).
 */
static void test_res_contention_thread_holder(void **state)
{
	unsigned t0 = LATE, ms = ms_ticks(1);
	unsigned before = warnings_of(WEFT_WARN_CONTENTION);
	weft_probe_warning_t w;

	(void)state;
	site(ring_a, t0, 9, "reader", bank_file, 70, 64);
	spawn(ring_a, t0, 95, 9, 0);
	res_named(t0, 150, WEFT_RES_MUTEX, "config");
	res_take(t0 + 1, 0, 150, 33);
	ev(ring_b, t0 + 2, WEFT_EV_RES_WAIT, 95, 150, WEFT_RES_OP_ACQUIRE);
	pass_at(t0 + 100 * ms);
	pass_at(t0 + 200 * ms);
	assert_true(warnings_of(WEFT_WARN_CONTENTION) > before);
	/* The holder's warning: on no task (the thread's, 0). */
	assert_true(warning_on(WEFT_WARN_CONTENTION, 0, &w));
	print_message("%s\n", w.detail);
	assert_non_null(strstr(w.detail, "a thread, not a task"));
	assert_null(strstr(w.detail, "not seen"));
	assert_non_null(strstr(w.detail, "bank.c:33"));
}

/*
 * Three tellers, each holding one lock and waiting for the next's, and a
 * fourth waiting behind the first lock (stuck, but in no cycle): one
 * deadlock warning, on the lowest task of the cycle, naming the other
 * two, each lock held with where it was taken, and each waited for;
 * said at the second look that finds it (the first may see a release
 * not read yet), and never again.
 */
static void test_res_deadlock_cycle(void **state)
{
	unsigned t0 = LATE, ms = ms_ticks(1);
	weft_probe_warning_t w;
	unsigned before = warnings_of(WEFT_WARN_DEADLOCK);

	(void)state;
	site(ring_a, t0, 9, "teller", bank_file, 50, 64);
	for (uint64_t t = 80; t <= 83; t++)
		spawn(ring_a, t0, t, 9, 0);
	res_named(t0, 130, WEFT_RES_MUTEX, "a");
	res_named(t0, 131, WEFT_RES_MUTEX, "b");
	res_named(t0, 132, WEFT_RES_MUTEX, "c");
	res_take(t0 + 1, 80, 130, 10);
	res_take(t0 + 1, 81, 131, 11);
	res_take(t0 + 1, 82, 132, 12);
	ev(ring_b, t0 + 2, WEFT_EV_RES_WAIT, 80, 131, WEFT_RES_OP_ACQUIRE);
	ev(ring_b, t0 + 2, WEFT_EV_RES_WAIT, 81, 132, WEFT_RES_OP_ACQUIRE);
	ev(ring_b, t0 + 2, WEFT_EV_RES_WAIT, 82, 130, WEFT_RES_OP_ACQUIRE);
	ev(ring_b, t0 + 2, WEFT_EV_RES_WAIT, 83, 130, WEFT_RES_OP_ACQUIRE);
	pass_at(t0 + 300 * ms);
	assert_int_equal(warnings_of(WEFT_WARN_DEADLOCK), before);
	pass_at(t0 + 600 * ms);
	assert_int_equal(warnings_of(WEFT_WARN_DEADLOCK), before + 1);
	assert_true(warning_on(WEFT_WARN_DEADLOCK, 80, &w));
	print_message("%s\n", w.detail);
	/* Whole, it would not fit in 159 characters: where the locks were
	 * taken left out, every task, where spawned, and lock said. */
	assert_string_equal(w.detail,
			    "holds mutex \"a\", waits for \"b\"; task 81 "
			    "teller (bank.c:50) holds \"b\", waits for \"c\"; "
			    "task 82 teller (line 50) holds \"c\", waits for "
			    "\"a\"; waiting 600.0 ms");
	assert_true(w.value_ns >= 590000000ull);
	pass_at(t0 + 900 * ms);
	pass_at(t0 + 1500 * ms);
	assert_int_equal(warnings_of(WEFT_WARN_DEADLOCK), before + 1);
}

/*
 * No cycle that is not one.  A cycle whose one wait ends (cancelled)
 * between two looks: nothing said.  A semaphore and a lock taken in
 * opposite orders is a deadlock; its twin, whose semaphore was given a
 * permit by a task that held none (a signal: anyone may serve its
 * waiters), is not said.
 */
static void test_res_deadlock_only_cycles(void **state)
{
	unsigned t0 = LATE, ms = ms_ticks(1);
	weft_probe_warning_t w;
	unsigned before = warnings_of(WEFT_WARN_DEADLOCK);

	(void)state;
	site(ring_a, t0, 9, "teller", bank_file, 50, 64);
	for (uint64_t t = 84; t <= 90; t++)
		spawn(ring_a, t0, t, 9, 0);
	/* 84 and 85: a cycle for one look, then 85 gives up. */
	res_named(t0, 133, WEFT_RES_MUTEX, "d");
	res_named(t0, 134, WEFT_RES_MUTEX, "e");
	res_take(t0 + 1, 84, 133, 20);
	res_take(t0 + 1, 85, 134, 21);
	ev(ring_b, t0 + 2, WEFT_EV_RES_WAIT, 84, 134, WEFT_RES_OP_ACQUIRE);
	ev(ring_b, t0 + 2, WEFT_EV_RES_WAIT, 85, 133, WEFT_RES_OP_ACQUIRE);
	/* 86 and 87 on a semaphore used as a signal (88 gave a permit). */
	res_named(t0, 135, WEFT_RES_SEMAPHORE, "s");
	res_named(t0, 136, WEFT_RES_MUTEX, "f");
	ev(ring_a, t0 + 1, WEFT_EV_RES_RELEASE, 88, 135, 1);
	res_take(t0 + 2, 86, 135, 22);
	res_take(t0 + 2, 87, 136, 23);
	ev(ring_b, t0 + 3, WEFT_EV_RES_WAIT, 86, 136, WEFT_RES_OP_ACQUIRE);
	ev(ring_b, t0 + 3, WEFT_EV_RES_WAIT, 87, 135, WEFT_RES_OP_ACQUIRE);
	/* 89 and 90 on a semaphore only its holders give back. */
	res_named(t0, 137, WEFT_RES_SEMAPHORE, "t");
	res_named(t0, 138, WEFT_RES_MUTEX, "g");
	res_take(t0 + 2, 89, 137, 24);
	res_take(t0 + 2, 90, 138, 25);
	ev(ring_b, t0 + 3, WEFT_EV_RES_WAIT, 89, 138, WEFT_RES_OP_ACQUIRE);
	ev(ring_b, t0 + 3, WEFT_EV_RES_WAIT, 90, 137, WEFT_RES_OP_ACQUIRE);
	pass_at(t0 + 300 * ms);
	ev(ring_b, t0 + 400 * ms, WEFT_EV_RES_WAIT_END, 85, 133,
	   WEFT_RES_OP_ACQUIRE | WEFT_RES_CANCELLED);
	pass_at(t0 + 600 * ms);
	pass_at(t0 + 900 * ms);
	assert_false(warning_on(WEFT_WARN_DEADLOCK, 84, &w));
	assert_false(warning_on(WEFT_WARN_DEADLOCK, 86, &w));
	assert_true(warning_on(WEFT_WARN_DEADLOCK, 89, &w));
	print_message("%s\n", w.detail);
	assert_string_equal(w.detail,
			    "(bank.c:50) holds semaphore \"t\" (acquired at "
			    "line 24), waits for \"g\"; task 90 teller (line "
			    "50) holds \"g\" (acquired at line 25), waits for "
			    "\"t\"; waiting 600.0 ms");
	assert_int_equal(warnings_of(WEFT_WARN_DEADLOCK), before + 1);
}

/*
 * A cycle whose waits began before events were dropped: a release or a
 * wait's end may be among those lost, and nothing is said of it, however
 * long it seems to last.
 */
static void test_res_deadlock_across_drops(void **state)
{
	weft_event_t x = { .task = 91,
			   .a1 = 139,
			   .a2 = 1,
			   .worker = 1,
			   .kind = WEFT_EV_RES_RELEASE };
	unsigned t0 = 3 * LATE, ms = ms_ticks(1);
	unsigned before = warnings_of(WEFT_WARN_DEADLOCK);

	(void)state;
	site(ring_a, 50, 9, "teller", bank_file, 50, 64);
	spawn(ring_a, 50, 91, 9, 0);
	spawn(ring_a, 50, 92, 9, 0);
	res_named(50, 139, WEFT_RES_MUTEX, "h");
	res_named(50, 140, WEFT_RES_MUTEX, "i");
	res_take(51, 91, 139, 30);
	res_take(51, 92, 140, 31);
	ev(ring_a, 52, WEFT_EV_RES_WAIT, 91, 140, WEFT_RES_OP_ACQUIRE);
	ev(ring_a, 52, WEFT_EV_RES_WAIT, 92, 139, WEFT_RES_OP_ACQUIRE);
	pass_at(53);
	/* Ring b fills; 91's release at 61 does not fit. */
	for (unsigned i = 0; i < 1024; i++)
		ev(ring_b, 60, WEFT_EV_MARK, 0, i, 0);
	x.ts = base + 61ull * TICK;
	assert_false(weft__ring_push_spsc(&ring_b->ring, &x));
	pass_at(62);
	pass_at(t0 + 300 * ms);
	pass_at(t0 + 600 * ms);
	pass_at(t0 + 900 * ms);
	assert_int_equal(warnings_of(WEFT_WARN_DEADLOCK), before);
}

/* Two rings of threads that are not workers (the blocking pool's). */
static void pool_rings(ring_entry_t **c, ring_entry_t **d)
{
	pthread_mutex_lock(&p->lock);
	*c = ring_add(WEFT_EVENT_NO_WORKER);
	*d = ring_add(WEFT_EVENT_NO_WORKER);
	pthread_mutex_unlock(&p->lock);
}

/* The site and label of @task's "nightly" job (export.c:7), at @at. */
static void nightly_site(ring_entry_t *e, unsigned at, uint64_t task)
{
	ev(e, at, WEFT_EV_RES_SITE, task, (uintptr_t) "export.c", 7);
	ev(e, at, WEFT_EV_RES_LABEL, task, (uintptr_t) "nightly", 0);
}

/*
 * Two pool threads (no worker index: one "other" thread to the
 * collector) each start a job.  A pass takes task 64's RES_ACQUIRE alone
 * (its thread preempted before the RES_SITE and RES_LABEL pushed right
 * after it), then task 65's whole start from the other thread; the next
 * pass takes 64's site and label.  Both jobs are named where they were
 * submitted.  (Tied to the other threads' last acquire, 65's, 64's site
 * and label found no holder and were lost: its job showed "unnamed".)
 */
static void test_res_pool_site_in_next_pass(void **state)
{
	unsigned t0 = 3 * LATE, ms = ms_ticks(1);
	ring_entry_t *ring_c, *ring_d;
	weft_probe_warning_t w;

	(void)state;
	pool_rings(&ring_c, &ring_d);
	ev(ring_a, t0, WEFT_EV_SPAWN, 64, 0, 0);
	ev(ring_a, t0, WEFT_EV_SPAWN, 65, 0, 0);
	ev(ring_a, t0, WEFT_EV_SPAWN, 66, 0, 0);
	ev(ring_a, t0, WEFT_EV_RES_NEW, 0, 112, WEFT_RES_BLOCKING_POOL);
	ev(ring_c, t0 + 1, WEFT_EV_RES_ACQUIRE, 64, 112, 1);
	pool_job_start(ring_d, t0 + 2, 65, 112);
	ev(ring_a, t0 + 3, WEFT_EV_RES_WAIT, 66, 112, WEFT_RES_OP_JOB);
	pass_at(t0 + 3);
	nightly_site(ring_c, t0 + 1, 64);
	pass_at(t0 + 300 * ms);
	assert_true(warning_on(WEFT_WARN_BLOCKING_QUEUE, 64, &w));
	print_message("%s\n", w.detail);
	assert_non_null(strstr(w.detail, "on its threads: 1 x \"nightly\" "
					 "(export.c:7) of task 64"));
	assert_non_null(strstr(w.detail, "1 x \"slow-report\" (routes.c:12)"));
}

/*
 * The same with jobs a plain thread submitted (task 0): each a hold of
 * its own, not one the task's.  The site and label that come a pass
 * late are the first job's, not the second's, named already.  (Taken by
 * the newest hold of task 0, the second job was named the first's, and
 * the first showed "unnamed".)
 */
static void test_res_pool_site_of_plain_thread(void **state)
{
	unsigned t0 = 5 * LATE, ms = ms_ticks(1);
	ring_entry_t *ring_c, *ring_d;
	weft_probe_warning_t w;

	(void)state;
	pool_rings(&ring_c, &ring_d);
	ev(ring_a, t0, WEFT_EV_SPAWN, 67, 0, 0);
	ev(ring_a, t0, WEFT_EV_RES_NEW, 0, 113, WEFT_RES_BLOCKING_POOL);
	ev(ring_c, t0 + 1, WEFT_EV_RES_ACQUIRE, 0, 113, 1);
	pool_job_start(ring_d, t0 + 2, 0, 113);
	ev(ring_a, t0 + 3, WEFT_EV_RES_WAIT, 67, 113, WEFT_RES_OP_JOB);
	pass_at(t0 + 3);
	nightly_site(ring_c, t0 + 1, 0);
	pass_at(t0 + 300 * ms);
	assert_true(warning_on(WEFT_WARN_BLOCKING_QUEUE, 0, &w));
	print_message("%s\n", w.detail);
	assert_non_null(strstr(w.detail, "on its threads: 1 x \"nightly\" "
					 "(export.c:7) of a plain thread, 1 x "
					 "\"slow-report\" (routes.c:12)"));
}

/*
 * A pool job whose release a full ring dropped stays a holder: it may
 * have ended in the drops.  A convoy after them is the jobs seen running
 * since: the warning names task 70's, not the ghost of task 68's, nor
 * counts it among the threads.  (The ghost, the oldest hold, was the
 * warning's task: "held" ever longer, named in every warning after.)
 */
static void test_res_pool_holder_across_drops(void **state)
{
	weft_event_t x = { .task = 68,
			   .a1 = 114,
			   .a2 = 1,
			   .worker = WEFT_EVENT_NO_WORKER,
			   .kind = WEFT_EV_RES_RELEASE };
	unsigned t0 = 6 * LATE, ms = ms_ticks(1);
	ring_entry_t *ring_c, *ring_d;
	weft_probe_warning_t w;

	(void)state;
	pool_rings(&ring_c, &ring_d);
	ev(ring_a, 50, WEFT_EV_SPAWN, 68, 0, 0);
	ev(ring_a, 50, WEFT_EV_RES_NEW, 0, 114, WEFT_RES_BLOCKING_POOL);
	ev(ring_c, 51, WEFT_EV_RES_ACQUIRE, 68, 114, 1);
	ev(ring_c, 51, WEFT_EV_RES_LABEL, 68, (uintptr_t) "ghost", 0);
	pass_at(52);
	/* Ring c fills; the job's release at 61 does not fit. */
	for (unsigned i = 0; i < 1024; i++)
		ev(ring_c, 60, WEFT_EV_MARK, 0, i, 0);
	x.ts = base + 61ull * TICK;
	assert_false(weft__ring_push_spsc(&ring_c->ring, &x));
	pass_at(62);
	/* Seconds on, a convoy behind task 70's job. */
	ev(ring_a, t0, WEFT_EV_SPAWN, 69, 0, 0);
	ev(ring_a, t0, WEFT_EV_SPAWN, 70, 0, 0);
	pool_job_start(ring_d, t0 + 1, 70, 114);
	ev(ring_a, t0 + 2, WEFT_EV_RES_WAIT, 69, 114, WEFT_RES_OP_JOB);
	pass_at(t0 + 3);
	pass_at(t0 + 300 * ms);
	assert_false(warning_on(WEFT_WARN_BLOCKING_QUEUE, 68, &w));
	assert_true(warning_on(WEFT_WARN_BLOCKING_QUEUE, 70, &w));
	print_message("%s\n", w.detail);
	assert_non_null(strstr(w.detail, "on its threads: 1 x "
					 "\"slow-report\" (routes.c:12) of "
					 "task 70"));
}

/* ------------------------------------- where a long poll's time went */

#define MS 1000000ull

/* A window sample read between @from_ms and @at_ms (ms), its thread's
 * CPU time @on_ms and ended waits @off_ms. */
static worker_window_t sample_at(double from_ms, double at_ms, double on_ms,
				 double off_ms)
{
	return (worker_window_t){ .at_ns = (uint64_t)(from_ms * MS),
				  .sched_from_ns = (uint64_t)(from_ms * MS),
				  .sched_at_ns = (uint64_t)(at_ms * MS),
				  .on_cpu_ns = (uint64_t)(on_ms * MS),
				  .off_cpu_ns = (uint64_t)(off_ms * MS),
				  .off_cpu_read = true };
}

/*
 * A poll's own part less its time in the runtime's work, where the split
 * took its waits for a CPU out already (a review's cases): 40 ms, 18 of
 * them runnable, 38 in a submission: 2 ms its own, not 22 - 38 wrapped.
 * 45 ms, 20 runnable (all in a 20 ms submission), 25 computing: 25 its
 * own, not 5.  No split (own = dur): the submission's whole.
 */
static void test_rt_wait_less_cpu_waits(void **state)
{
	(void)state;
	assert_int_equal(weft__collector_own_less_rt(22 * MS, 40 * MS, 38 * MS),
			 2 * MS);
	assert_int_equal(weft__collector_own_less_rt(25 * MS, 45 * MS, 20 * MS),
			 25 * MS);
	assert_int_equal(weft__collector_own_less_rt(40 * MS, 40 * MS, 38 * MS),
			 2 * MS);
	assert_int_equal(weft__collector_own_less_rt(3 * MS, 40 * MS, 50 * MS),
			 0);
}

/*
 * A poll still running, a 4 ms computation on a CPU shared with eleven
 * threads: it ran 1.4 ms from 1 ms, waited 7.6 ms, ran 1.4 ms, and has
 * waited since 11.4 ms; looked at 55 ms in, four samples saw it
 * unchanged.  Runnable now, its time off a CPU is not its own: only its
 * CPU time is (from the newest sample, the wait's part before it read
 * as "asleep in the kernel", 33 ms of its own, and blamed it).  Asleep
 * now (a blocking call), that time is its own.
 */
static void test_split_runnable_not_blamed(void **state)
{
	worker_window_t win[] = {
		sample_at(0, 0.01, 100, 50),       /* before the poll */
		sample_at(6, 6.01, 101.4, 50),     /* waiting since 2.4 */
		sample_at(16, 16.01, 102.8, 57.6), /* waiting since 11.4 */
		sample_at(26, 26.01, 102.8, 57.6),
		sample_at(36, 36.01, 102.8, 57.6),
		sample_at(46, 46.01, 102.8, 57.6),
	};
	weft__sched_look_t now = { .on_ns = (uint64_t)(102.8 * MS),
				   .off_ns = (uint64_t)(57.6 * MS),
				   .at_ns = 55 * MS,
				   .runnable = true };
	weft__poll_split_t sp;

	(void)state;
	assert_true(weft__collector_split_of(win, 6, NULL, 1 * MS, 54 * MS,
					     true, &now, &sp));
	assert_int_equal(sp.from_ns, 0);
	assert_int_equal(sp.to_ns, 54 * MS);
	assert_true(sp.to_ns - sp.wait_ns < 10 * MS);
	assert_in_range(sp.cpu_ns, 2 * MS, 3 * MS);
	/* Asleep now: the time neither on a CPU nor in a wait that ended
	 * is its own. */
	now.runnable = false;
	assert_true(weft__collector_split_of(win, 6, NULL, 1 * MS, 54 * MS,
					     true, &now, &sp));
	assert_true(sp.to_ns - sp.wait_ns > 30 * MS);
	/* Ended, its waits all in run_delay: judged on them alone. */
	now.off_ns = (uint64_t)(101.2 * MS);
	assert_true(weft__collector_split_of(win, 6, NULL, 1 * MS, 54 * MS,
					     false, &now, &sp));
	assert_true(sp.to_ns - sp.wait_ns < 10 * MS);
}

/*
 * An ended poll of a 4 ms computation held off a hogged CPU, 20 ms long:
 * it ran 1.4 ms, waited 9.6, ran 1.4, waited 6.6, ran 1.0.  The sample
 * of the pass before it had its time (0.5 ms before the poll) taken
 * before the pass folded its events in and was read only 11.5 ms into
 * the poll, after the first wait: it is not the poll's "before" (from
 * it, the poll had 6.6 ms of waiting and 13.4 of its own, and was
 * blamed).
 */
static void test_split_sample_read_in_poll(void **state)
{
	/* Times from 100 ms: the poll is at 101 to 121. */
	worker_window_t win[] = {
		sample_at(90, 90.01, 100, 50),
		sample_at(100.5, 112.5, 101.4, 59.6), /* pass time before */
	};
	weft__sched_look_t now = { .on_ns = (uint64_t)(103.8 * MS),
				   .off_ns = (uint64_t)(66.2 * MS),
				   .at_ns = 122 * MS,
				   .runnable = false };
	weft__poll_split_t sp;

	(void)state;
	assert_true(weft__collector_split_of(win, 2, NULL, 101 * MS, 20 * MS,
					     false, &now, &sp));
	assert_int_equal(sp.from_ns, 0);
	assert_true(sp.to_ns - sp.wait_ns < 10 * MS);
	assert_in_range(sp.wait_ns, 15 * MS, 17 * MS);
}

/*
 * A 15 ms computation on a hogged CPU, ended: its worker was woken for
 * it 60 ms before the sample before it and queued behind other threads
 * until 110 ms; the poll ran from 110 to 150 ms, 15 ms on a CPU and 25
 * waiting.  That first wait ended into run_delay whole, its 60 ms before
 * the sample too: the stretch's waiting is never more than its room
 * beside its CPU time (without that, 95 ms of waiting in a 51 ms stretch
 * left the poll 5.5 ms of its own, and its long poll unsaid).
 */
static void test_split_wait_before_sample(void **state)
{
	worker_window_t win[] = { sample_at(100, 100.01, 200, 50) };
	weft__sched_look_t now = { .on_ns = 215 * MS,
				   .off_ns = 145 * MS,
				   .at_ns = 151 * MS,
				   .runnable = false };
	weft__poll_split_t sp;

	(void)state;
	assert_true(weft__collector_split_of(win, 1, NULL, 110 * MS, 40 * MS,
					     false, &now, &sp));
	assert_int_equal(sp.from_ns, 0);
	assert_true(sp.to_ns - sp.wait_ns >= 10 * MS);
	assert_in_range(sp.wait_ns, 20 * MS, 30 * MS);
}

/*
 * A worker's first poll, before the collector's first sample of it (a
 * runtime made while the probe listens): a 4 ms computation from 2 to
 * 19 ms on a hogged CPU, its thread born at 1 ms.  Its schedstat, zero
 * at its birth, is the sample before the poll: 13 ms of the 17 waited
 * for a CPU, not the task's.  Without the birth there is no split, and
 * the poll read "not known" and was blamed.
 */
static void test_split_from_birth(void **state)
{
	worker_window_t born = sample_at(1, 1, 0, 0);
	/* A sample read at 1.5 ms, as if 12 ms had been waited by then. */
	worker_window_t win[] = { sample_at(1.5, 1.5, 0, 12) };
	weft__sched_look_t now = { .on_ns = 4 * MS,
				   .off_ns = 13 * MS,
				   .at_ns = 20 * MS,
				   .runnable = false };
	weft__poll_split_t sp;

	(void)state;
	assert_false(weft__collector_split_of(NULL, 0, NULL, 2 * MS, 17 * MS,
					      false, &now, &sp));
	assert_true(weft__collector_split_of(NULL, 0, &born, 2 * MS, 17 * MS,
					     false, &now, &sp));
	assert_int_equal(sp.from_ns, 0);
	assert_in_range(sp.wait_ns, 12 * MS, 14 * MS);
	assert_true(sp.to_ns - sp.wait_ns < 10 * MS);
	/* A sample of the window before the poll comes first. */
	assert_true(weft__collector_split_of(win, 1, &born, 2 * MS, 17 * MS,
					     false, &now, &sp));
	assert_true(sp.wait_ns <= 1 * MS);
}

/*
 * The same at a worker's start: a task woken at 5 ms waits to 25 ms for
 * a worker the OS held off its CPU 18 ms of that, before the collector's
 * first sample of it; the thread's birth at 1 ms is the sample before.
 */
static void test_os_held_from_birth(void **state)
{
	worker_window_t born = sample_at(1, 1, 0, 0);
	weft__sched_look_t now = { .on_ns = 3 * MS,
				   .off_ns = 18 * MS,
				   .at_ns = 27 * MS };
	uint64_t held = 0;

	(void)state;
	assert_false(weft__collector_os_held_of(NULL, 0, NULL, 5 * MS, 25 * MS,
						&now, &held));
	assert_true(weft__collector_os_held_of(NULL, 0, &born, 5 * MS, 25 * MS,
					       &now, &held));
	assert_int_equal(held, 18 * MS);
}

/*
 * A task woken at 100 ms and first polled at 420 ms (a 320 ms wait for a
 * worker), its worker's thread sampled at 90 ms; whether the OS held the
 * worker (weft__collector_os_held_of()):
 *   - runnable through the wait, waiting for a CPU 300 ms of it: yes;
 *   - parked 300 ms of it (a wake that did not unpark it: the runtime's
 *     fault), then 20 ms waiting for a CPU, looked at 200 ms after with
 *     178 ms more of waiting: no (judged on that stretch's share of
 *     runnable time, this read as held 198 ms: review of the change);
 *   - parked, looked at soon after: no;
 *   - runnable through it, but looked at too late to tell: no.
 */
static void test_os_held_parked_is_not_the_os(void **state)
{
	worker_window_t win[] = { sample_at(90, 90.01, 500, 1000) };
	weft__sched_look_t now = { .on_ns = 525 * MS,
				   .off_ns = 1300 * MS,
				   .at_ns = 430 * MS };
	uint64_t held = 0;

	(void)state;
	assert_true(weft__collector_os_held_of(win, 1, NULL, 100 * MS, 420 * MS,
					       &now, &held));
	assert_int_equal(held, 300 * MS);
	/* Parked, then slow to get a CPU, looked at late. */
	now = (weft__sched_look_t){ .on_ns = 522 * MS,
				    .off_ns = 1198 * MS,
				    .at_ns = 620 * MS };
	assert_false(weft__collector_os_held_of(win, 1, NULL, 100 * MS,
						420 * MS, &now, &held));
	/* Parked, looked at soon after. */
	now = (weft__sched_look_t){ .on_ns = 501 * MS,
				    .off_ns = 1020 * MS,
				    .at_ns = 430 * MS };
	assert_false(weft__collector_os_held_of(win, 1, NULL, 100 * MS,
						420 * MS, &now, &held));
	/* Held, but looked at more than half the wait after it. */
	now = (weft__sched_look_t){ .on_ns = 530 * MS,
				    .off_ns = 1450 * MS,
				    .at_ns = 590 * MS };
	assert_false(weft__collector_os_held_of(win, 1, NULL, 100 * MS,
						420 * MS, &now, &held));
	/* No sample before the wake: not known. */
	win[0] = sample_at(101, 101.01, 500, 1000);
	now = (weft__sched_look_t){ .on_ns = 525 * MS,
				    .off_ns = 1300 * MS,
				    .at_ns = 430 * MS };
	assert_false(weft__collector_os_held_of(win, 1, NULL, 100 * MS,
						420 * MS, &now, &held));
}

/*
 * The runtime monitor (nobody listening) looks at a poll still running
 * 16 ms in with nothing known of where its time went: not told yet (a
 * 1 ms poll the OS stretched was blamed for never yielding, at load 8),
 * looked at again; 45 ms in, four thresholds past, it is told.
 */
static void test_monitor_unknown_split_waits(void **state)
{
	weft__task_info_t info = { .id = 7, .name = "stretched" };
	uint64_t t0 = weft_now_ns(), seq;

	(void)state;
	assert_int_equal(p->config.long_poll_ns, 10 * MS);
	seq = p->warn_seq;
	assert_false(weft__probe_monitor_long_poll(&info, 0, t0, 16 * MS, false,
						   NULL, NULL, 0));
	assert_int_equal(p->warn_seq, seq);
	assert_true(weft__probe_monitor_long_poll(&info, 0, t0, 45 * MS, false,
						  NULL, NULL, 0));
	assert_int_equal(p->warn_seq, seq + 1);
	assert_int_equal(p->warnings[seq % WARN_KEEP].kind,
			 WEFT_WARN_NEVER_YIELDED);
	assert_int_equal(p->warnings[seq % WARN_KEEP].task, 7);
}

/*
 * The monitor saw an ended poll's thread blocked on weft_mutex_t
 * "stats_mu" for most of it (nobody listening): said as that wait, not
 * as "a blocking call" (an outside tester's program, a console attached
 * late, blamed the lock's waiter for a blocking call).  A lock seen for
 * a short part of a long poll is not its reason.
 */
static void test_monitor_names_lock_waited(void **state)
{
	weft__task_info_t info = { .id = 8, .name = "reporter" };
	weft__poll_split_t split = {
		.from_ns = 0, .to_ns = 60 * MS, .cpu_ns = 1 * MS, .wait_ns = 0
	};
	uint64_t t0 = weft_now_ns(), seq = p->warn_seq;
	const weft_probe_warning_t *w;

	(void)state;
	assert_true(weft__probe_monitor_long_poll(&info, 0, t0, 60 * MS, true,
						  &split, "stats_mu", 55 * MS));
	assert_int_equal(p->warn_seq, seq + 1);
	w = &p->warnings[seq % WARN_KEEP];
	assert_int_equal(w->kind, WEFT_WARN_LONG_POLL);
	print_message("%s\n", w->detail);
	assert_non_null(strstr(w->detail, "waiting for lock \"stats_mu\""));
	assert_null(strstr(w->detail, "blocking call"));
	info.id = 9;
	info.name = "reader";
	assert_true(weft__probe_monitor_long_poll(&info, 0, t0, 60 * MS, true,
						  &split, "stats_mu", 5 * MS));
	w = &p->warnings[(p->warn_seq - 1) % WARN_KEEP];
	print_message("%s\n", w->detail);
	assert_null(strstr(w->detail, "waiting for lock"));
}

/*
 * Task @id's yields on @e's ring, @polls of them, the last READY and
 * poll @pending (if under @polls) ending pending with no wake in it; a
 * pass after poll @cut - 1 (if under @polls) and after the last, poll
 * @cut starting a tick before the one before it ended (a stamp late,
 * against woken_at: no delay to count).  Every count, sum, maximum and
 * histogram what on_poll() makes of them, worked out here poll by poll
 * in each pass's ns.  Returns the record's once bits.
 */
static unsigned yields_check(ring_entry_t *e, uint64_t id, unsigned polls,
			     unsigned pending, unsigned cut)
{
	unsigned *from = calloc(polls, sizeof(*from));
	unsigned *to = calloc(polls, sizeof(*to));
	uint32_t *flags = calloc(polls, sizeof(*flags));
	uint64_t woken = 0, sched = 0, busy = 0, maxp = 0, wakes = 0;
	weft_hist_t ph, sh, h[2];
	bool queued = true;
	unsigned at = 1, done = 0;
	task_rec_t r;

	assert_non_null(from);
	assert_non_null(to);
	assert_non_null(flags);
	memset(&ph, 0, sizeof(ph));
	memset(&sh, 0, sizeof(sh));
	ev(e, at, WEFT_EV_SPAWN, id, 0, 0);
	for (unsigned i = 0; i < polls; i++) {
		from[i] = i == cut ? at - 1 : at + 1 + i % 3;
		to[i] = (i == cut ? at : from[i]) + 1 + i % 4;
		flags[i] = i == polls - 1 ? WEFT_POLL_READY :
			   i == pending   ? 0 :
					    WEFT_POLL_YIELDED;
		poll(e, from[i], to[i], id, flags[i]);
		at = to[i];
		if (i + 1 != cut && i + 1 != polls)
			continue;
		/* In ns as the pass converted them (the clock's rate is
		 * refined at each pass's start). */
		pass();
		if (!done)
			woken = ns_at(1);
		for (; done <= i; done++) {
			uint64_t dur = ns_at(to[done]) - ns_at(from[done]);
			uint64_t start = ns_at(from[done]);

			busy += dur;
			if (dur > maxp)
				maxp = dur;
			/* Idle after the pending poll, or started before it
			 * was woken: no delay to count. */
			if (queued && start >= woken) {
				sched += start - woken;
				if (done > 0)
					weft_hist_record(&sh, start - woken);
			}
			if (done > 0)
				weft_hist_record(&ph, dur);
			queued = flags[done] == WEFT_POLL_YIELDED;
			if (queued) {
				wakes++;
				woken = ns_at(to[done]);
			}
		}
	}
	free(from);
	free(to);
	free(flags);
	assert_true(rec_copy(id, &r, h));
	assert_int_equal(r.pub.state, WEFT_TASK_DONE);
	assert_int_equal(r.pub.polls, polls);
	assert_int_equal(r.pub.wakes, wakes);
	assert_int_equal(r.pub.self_wakes, wakes);
	assert_int_equal(r.pub.busy_ns, busy);
	assert_int_equal(r.pub.scheduled_ns, sched);
	assert_int_equal(r.pub.max_poll_ns, maxp);
	assert_memory_equal(&h[0], &ph, sizeof(ph));
	assert_memory_equal(&h[1], &sh, sizeof(sh));
	return r.once;
}

/*
 * A yielding task on the fast path, its busy-wait warning said (its
 * record clean: poll_fast() tests only what each poll's event may
 * change), whose poll then ends pending with no wake in it, and which
 * yields again in the same chunk: the pending poll's lookup (on_poll())
 * leaves the record to be tested whole again, so that the yield after
 * it counts from idle (no delay, none in the histogram), as on_poll()
 * has it, and queued again from there.
 */
static void test_yield_after_pending_poll(void **state)
{
	(void)state;
	/* Said before the pending poll: the polls between were fast. */
	assert_true(yields_check(ring_a, 41, 40, 30, 40) &
		    (1u << WEFT_WARN_SELF_WAKES));
}

/*
 * A yielding task, its busy-wait warning said, whose first poll in a
 * chunk (its record tested whole by poll_fast()) is left to on_poll()
 * (it started before the last one ended), then a pending poll with no
 * wake, then yields again: the first leaves the record not clean (no
 * polls of it counted aside, no lookup to make it so), so that the yield
 * after the pending poll counts from idle, as on_poll() has it.
 */
static void test_yield_left_first_in_chunk(void **state)
{
	(void)state;
	assert_true(yields_check(ring_a, 43, 40, 31, 30) &
		    (1u << WEFT_WARN_SELF_WAKES));
}

/*
 * Yields on a thread that is no worker (no worker record: poll_fast()
 * leaves each to on_poll(), which counts them all the same).
 */
static void test_yields_off_workers_counted(void **state)
{
	ring_entry_t *e;

	(void)state;
	pthread_mutex_lock(&p->lock);
	e = ring_add(WEFT_EVENT_NO_WORKER);
	pthread_mutex_unlock(&p->lock);
	yields_check(e, 42, 40, 40, 40);
}

/*
 * A yield list's polls as the collector counts them, for the fast path's
 * two one-compare tests below: each poll @from to @to (ticks), its a2,
 * on ring_b when @on_b.
 */
struct yq {
	unsigned from, to;
	uint32_t a2;
	bool on_b;
};

/* The figures on_poll() makes of a yield list's polls, as they come. */
struct yq_want {
	uint64_t woken, sched, busy, maxp;
	unsigned n;
	weft_hist_t ph, sh;
};

/*
 * @q's polls from @w->n to @to (of a task spawned at tick 1, every poll
 * but the last a yield: queued from its end) into @w, in ns as the pass
 * just run converted them (the clock's rate is refined at each pass's
 * start: each pass's polls are folded in after it).
 */
static void yq_fold(struct yq_want *w, const struct yq *q, unsigned to)
{
	if (!w->n)
		w->woken = ns_at(1);
	for (; w->n < to; w->n++) {
		const struct yq *x = &q[w->n];
		uint64_t dur = ns_at(x->to) - ns_at(x->from);
		uint64_t delay = ns_at(x->from) - w->woken;

		w->busy += dur;
		w->sched += delay;
		if (dur > w->maxp)
			w->maxp = dur;
		if (w->n > 0) {
			weft_hist_record(&w->ph, dur);
			weft_hist_record(&w->sh, delay);
		}
		w->woken = ns_at(x->to);
	}
}

/* @w against the record of @id. */
static void yq_check(uint64_t id, const struct yq_want *w)
{
	weft_hist_t h[2];
	task_rec_t r;

	assert_true(rec_copy(id, &r, h));
	assert_int_equal(r.pub.polls, w->n);
	assert_int_equal(r.pub.wakes, w->n - 1);
	assert_int_equal(r.pub.self_wakes, w->n - 1);
	assert_int_equal(r.pub.busy_ns, w->busy);
	assert_int_equal(r.pub.scheduled_ns, w->sched);
	assert_int_equal(r.pub.max_poll_ns, w->maxp);
	assert_memory_equal(&h[0], &w->ph, sizeof(h[0]));
	assert_memory_equal(&h[1], &w->sh, sizeof(h[1]));
}

/* @q's polls (and nothing else) pushed, each after the one before. */
static unsigned yq_push(uint64_t id, struct yq *q, unsigned n, unsigned at,
			const unsigned *durs, unsigned ndurs)
{
	for (unsigned i = 0; i < n; i++) {
		q[i].from = at + 1;
		q[i].to = q[i].from + durs[i % ndurs];
		poll(q[i].on_b ? ring_b : ring_a, q[i].from, q[i].to, id,
		     q[i].a2);
		at = q[i].to;
	}
	return at;
}

/*
 * The chunk's loop tells a poll poll_fast() may take from every other
 * event by one compare of the event's last word (kind, a2, worker) with
 * the record's fast_key.  A yielding task, its busy-wait warning said
 * (the fast path's clean record), whose yields then carry clones of its
 * waker, an await site not met, or come from the other worker, and an
 * event of another kind with the same a2 and worker: each is on_poll()'s
 * or process()'s, and counts as such (clones, the site not known, the
 * move), and the polls' figures are whole.
 */
static void test_yield_word_tells_polls(void **state)
{
	enum { ID = 60, N = 40 };
	static const unsigned durs[] = { 1, 2, 1, 3 };
	struct yq q[N];
	struct yq_want w = { 0 };
	uint64_t unknown;
	unsigned at = 1;
	task_rec_t r;
	weft_hist_t h[2];

	(void)state;
	pthread_mutex_lock(&p->lock);
	unknown = p->awaits_unknown;
	pthread_mutex_unlock(&p->lock);
	memset(q, 0, sizeof(q));
	ev(ring_a, 1, WEFT_EV_SPAWN, ID, 0, 0);
	for (unsigned i = 0; i < N; i++) {
		q[i].a2 = i == N - 1 ? WEFT_POLL_READY : WEFT_POLL_YIELDED;
		/* From poll 34 on, worker 1's. */
		q[i].on_b = i >= 34;
	}
	/* Past the warning (16 self-wakes): two clones, then a site. */
	q[24].a2 |= 2u << WEFT_POLL_CLONES_SHIFT;
	q[28].a2 |= 7u << WEFT_POLL_SITE_SHIFT;
	at = yq_push(ID, q, 30, at, durs, 4);
	/* A clone of its waker, a2 and worker as a yield's. */
	ev(ring_a, at, WEFT_EV_WAKER_CLONE, ID, 0, WEFT_POLL_YIELDED);
	yq_push(ID, q + 30, N - 30, at, durs, 4);
	pass();
	yq_fold(&w, q, N);
	yq_check(ID, &w);
	assert_true(rec_copy(ID, &r, h));
	assert_true(r.once & (1u << WEFT_WARN_SELF_WAKES));
	assert_int_equal(r.pub.waker_clones, 3);
	assert_int_equal(r.moved, 1);
	assert_int_equal(r.pub.last_worker, 1);
	assert_int_equal(r.pub.state, WEFT_TASK_DONE);
	pthread_mutex_lock(&p->lock);
	unknown = p->awaits_unknown - unknown;
	pthread_mutex_unlock(&p->lock);
	assert_int_equal(unknown, 1);
}

/*
 * poll_fast() tests a poll's duration against its worker's gate
 * (p->wk_gate: under long_poll_ns and the worker's max_poll, no wake
 * run open), set by the polls it took past it.  A yielding task whose
 * polls reach new maxima in a chunk: the worker's max_poll follows each.
 * Then the threshold of a long poll lowered under polls shorter than
 * that max (the gates start each chunk again): every one of them is a
 * long poll (the worker's last long poll names it), and the figures are
 * whole.
 */
static void test_yield_gate_long_and_max(void **state)
{
	enum { ID = 61, N1 = 30, N = 40 };
	static const unsigned durs1[] = { 1, 2, 1, 1, 1, 1, 1, 1, 1, 1,
					  1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
					  1, 3, 2, 1, 4, 1, 6, 2, 1, 1 };
	static const unsigned durs2[] = { 5, 1 };
	uint64_t saved = p->config.long_poll_ns, maxp, lng_task;
	uint64_t lng_start, lng_end, wmax;
	struct yq q[N];
	struct yq_want w = { 0 };
	unsigned at = 1, last = 0;

	(void)state;
	memset(q, 0, sizeof(q));
	for (unsigned i = 0; i < N; i++)
		q[i].a2 = i == N - 1 ? WEFT_POLL_READY : WEFT_POLL_YIELDED;
	ev(ring_a, 1, WEFT_EV_SPAWN, ID, 0, 0);
	at = yq_push(ID, q, N1, at, durs1, N1);
	pass();
	yq_fold(&w, q, N1);
	maxp = w.maxp;
	pthread_mutex_lock(&p->lock);
	wmax = p->wk[0].max_poll;
	lng_task = p->wk[0].lng.task;
	pthread_mutex_unlock(&p->lock);
	assert_int_equal(wmax, maxp);
	assert_int_equal(lng_task, 0);
	/* Long from 3.5 ticks: the 5-tick polls, under the 6-tick max. */
	p->config.long_poll_ns = (ns_at(100 + 7) - ns_at(100)) / 2;
	yq_push(ID, q + N1, N - N1, at, durs2, 2);
	for (unsigned i = N1; i < N; i++)
		if (q[i].to - q[i].from == 5)
			last = i;
	pass();
	yq_fold(&w, q, N);
	pthread_mutex_lock(&p->lock);
	wmax = p->wk[0].max_poll;
	lng_task = p->wk[0].lng.task;
	lng_start = p->wk[0].lng.start;
	lng_end = p->wk[0].lng.end;
	pthread_mutex_unlock(&p->lock);
	p->config.long_poll_ns = saved;
	assert_int_equal(wmax, maxp);
	assert_int_equal(lng_task, ID);
	assert_int_equal(lng_start, ns_at(q[last].from));
	assert_int_equal(lng_end, ns_at(q[last].to));
	yq_check(ID, &w);
}

/*
 * A wake run opened on a worker zeroes its gate (collector_leak.c): the
 * yield of a task whose poll woke others, its record clean, is then
 * on_poll()'s, whose end of the waking poll closes the run.  Taken by
 * poll_fast() under the gate its earlier polls set, the run would stay
 * open past its waker's poll.
 */
static void test_yield_gate_wake_run(void **state)
{
	enum { ID = 62, N = 30, WAKES_AT = 26, WOKEN = 3 };
	static const unsigned durs[] = { 1, 2, 1, 3 };
	struct yq q[N];
	struct yq_want w = { 0 };
	unsigned at = 1;
	bool open;

	(void)state;
	memset(q, 0, sizeof(q));
	for (unsigned i = 0; i < N; i++)
		q[i].a2 = WEFT_POLL_YIELDED;
	ev(ring_a, 1, WEFT_EV_SPAWN, ID, 0, 0);
	for (uint64_t k = 0; k < WOKEN; k++)
		ev(ring_b, 1, WEFT_EV_SPAWN, 300 + k, 0, 0);
	at = yq_push(ID, q, WAKES_AT, at, durs, 4);
	/* Poll WAKES_AT wakes the others (stamped at its start). */
	for (uint64_t k = 0; k < WOKEN; k++)
		ev(ring_a, at + 1, WEFT_EV_WAKE, 300 + k, ID, 0);
	yq_push(ID, q + WAKES_AT, N - WAKES_AT, at, durs, 4);
	pass();
	pthread_mutex_lock(&p->lock);
	open = p->wk[0].run_open;
	pthread_mutex_unlock(&p->lock);
	assert_false(open);
	/* Its figures (every poll a yield, none ended yet). */
	yq_fold(&w, q, N);
	{
		task_rec_t r;
		weft_hist_t h[2];

		assert_true(rec_copy(ID, &r, h));
		assert_int_equal(r.pub.polls, N);
		assert_int_equal(r.pub.busy_ns, w.busy);
		assert_int_equal(r.pub.scheduled_ns, w.sched);
		assert_memory_equal(&h[0], &w.ph, sizeof(h[0]));
		assert_memory_equal(&h[1], &w.sh, sizeof(h[1]));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_yields_counted, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_interleaved_yields_counted,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_yield_after_pending_poll,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_yields_off_workers_counted,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_yield_left_first_in_chunk,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_yield_word_tells_polls,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_yield_gate_long_and_max,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_yield_gate_wake_run, setup,
						teardown),
		cmocka_unit_test(test_conv_copy_exact),
		cmocka_unit_test(test_split_runnable_not_blamed),
		cmocka_unit_test(test_split_sample_read_in_poll),
		cmocka_unit_test(test_split_wait_before_sample),
		cmocka_unit_test(test_split_from_birth),
		cmocka_unit_test(test_os_held_from_birth),
		cmocka_unit_test(test_os_held_parked_is_not_the_os),
		cmocka_unit_test_setup_teardown(
			test_monitor_unknown_split_waits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_monitor_names_lock_waited,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_wake_after_poll_queues,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_late_wake_from_long_poll_queues, setup, teardown),
		cmocka_unit_test_setup_teardown(test_late_wake_in_poll_queues,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_late_spawn_keeps_task_done,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_late_spawn_keeps_task_idle,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_no_sched_delay_across_drops, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_sched_delay_said_again_longer, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_res_contention_thread_holder, setup, teardown),
		cmocka_unit_test_setup_teardown(test_res_late_end_after_drop,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_res_semaphore_permits,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_steals_past_64, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_res_end_before_start,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_res_pool_convoy_over,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_res_pool_culprit_late,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_res_pool_site_in_next_pass,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_res_pool_site_of_plain_thread, setup, teardown),
		cmocka_unit_test_setup_teardown(test_site_names_spawn, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_site_dropped_is_unknown,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_site_old_format_reads,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_await_site_names_poll,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_await_site_unknown_and_old_form, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_burst_wake_in_poll_is_the_bursts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_site_large_future_located,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_lock_site_in_next_pass,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_large_future_loc_in_next_pass, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tiny_tasks_name_their_site,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_lock_released_before_site,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_lock_held_across_drops_unsaid, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_res_pool_holder_across_drops, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_fold_said_at_flush_and_stop, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_long_polls_past_task_limit_counted, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_preempted_past_limit_counted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rt_wait_not_blamed, setup,
						teardown),
		cmocka_unit_test(test_rt_wait_less_cpu_waits),
		cmocka_unit_test_setup_teardown(test_res_deadlock_cycle, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_res_deadlock_only_cycles,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_res_deadlock_across_drops,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
