/* SPDX-License-Identifier: MIT */
/*
 * A console that attaches while a worker is in a poll.  The poll's first
 * event after it makes the worker's ring; populating the ring (8 MiB of
 * small pages by default: milliseconds, hundreds beside busy neighbours)
 * is the probe's work, not the task's.  The runtime monitor times a poll
 * that began before anyone listened, and it blamed the task for that
 * work: a long poll "computing on a CPU" of a task whose polls take
 * microseconds.  Here the ring is 256 MiB (WEFT_PROBE_RING), huge pages
 * are off for the process and the long-poll threshold is 20 ms, so that
 * populating it inside the poll makes a long poll on any machine.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "test_helpers.h"

#include "weft/probe.h"
#include "weft/weft.h"

#define RING_EVENTS "8388608" /* 256 MiB of 32-byte events */
#define LONG_POLL_MS 20
#define LONG_POLL_STR "20"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t watched;
static unsigned long_polls;
static char detail[256];

static void on_update(void *ctx, const weft_probe_update_t *u)
{
	(void)ctx;
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < u->nwarnings; i++) {
		const weft_probe_warning_t *w = &u->warnings[i];

		if (!watched || w->task != watched ||
		    (w->kind != WEFT_WARN_LONG_POLL &&
		     w->kind != WEFT_WARN_NEVER_YIELDED))
			continue;
		long_polls++;
		snprintf(detail, sizeof(detail), "%s", w->detail);
	}
	pthread_mutex_unlock(&lock);
}

static atomic_bool in_poll, go;

/* Waits in its one poll until the test has subscribed, then emits. */
static weft_poll_t straddle_poll(void *arg, weft_cx_t *cx)
{
	(void)arg, (void)cx;
	atomic_store(&in_poll, true);
	while (!atomic_load(&go))
		;
	weft_probe_mark(1, 0); /* the thread's first event: its ring */
	return WEFT_READY;
}

static void test_attach_mid_poll_ring_not_blamed(void **state)
{
	weft_probe_sub_t *sub;
	weft_runtime_t *rt;
	weft_join_t *j;
	uint64_t t0, took;
	unsigned n;

	(void)state;
	assert_int_equal(
		weft_runtime_create(&(weft_config_t){ .workers = 1 }, &rt), 0);
	assert_int_equal(weft_spawn_named(rt, "straddler", straddle_poll,
					  &(int){ 0 }, &j),
			 0);
	pthread_mutex_lock(&lock);
	watched = weft_join_id(j);
	pthread_mutex_unlock(&lock);
	while (!atomic_load(&in_poll))
		usleep(100);
	t0 = weft_now_ns();
	assert_int_equal(
		weft_probe_subscribe(
			&(weft_probe_sub_opts_t){ .events = true,
						  .on_update = on_update },
			&sub),
		0);
	took = weft_now_ns() - t0;
	atomic_store(&go, true);
	assert_int_equal(weft_join_wait(j, NULL), 0);
	weft_join_drop(j);
	usleep(20000); /* the monitor's look after the poll */
	weft_probe_flush();
	weft_probe_flush();
	pthread_mutex_lock(&lock);
	n = long_polls;
	pthread_mutex_unlock(&lock);
	if (n)
		print_message("blamed (subscribe took %.1f ms): %s\n",
			      (double)took / 1e6, detail);
	/* Slower than the threshold before the ring: nothing to tell. */
	if (took < WEFT_MSEC(LONG_POLL_MS) / 2)
		assert_int_equal(n, 0);
	weft_probe_unsubscribe(sub);
	weft_runtime_destroy(rt);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_attach_mid_poll_ring_not_blamed),
	};

	setenv("WEFT_PROBE_RING", RING_EVENTS, 1);
	setenv("WEFT_LONG_POLL", LONG_POLL_STR, 1);
	(void)prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
