/* SPDX-License-Identifier: MIT */
/*
 * Two runtimes in one process, listened to.  Events carry a worker's
 * index, not its runtime: what the OS says of a worker's thread (where a
 * poll's time went) was read from the first runtime's worker of that
 * index, and an outside audit saw a task spinning on the second blamed
 * for "a blocking call" (the first's worker 0 was parked).  The
 * oversubscribed warning counted the first runtime's workers alone.
 */
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "test_helpers.h"

#include "weft/probe.h"
#include "weft/weft.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t spinner;
static unsigned long_polls, oversub;
static char long_detail[256], oversub_detail[256];

static void on_update(void *ctx, const weft_probe_update_t *u)
{
	(void)ctx;
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < u->nwarnings; i++) {
		const weft_probe_warning_t *w = &u->warnings[i];

		if (w->kind == WEFT_WARN_LONG_POLL && w->task == spinner) {
			long_polls++;
			snprintf(long_detail, sizeof(long_detail), "%s",
				 w->detail);
		}
		if (w->kind == WEFT_WARN_OVERSUBSCRIBED && !w->history) {
			oversub++;
			snprintf(oversub_detail, sizeof(oversub_detail), "%s",
				 w->detail);
		}
	}
	pthread_mutex_unlock(&lock);
}

/* One 60 ms poll computing, no syscall. */
static weft_poll_t spin_poll(void *arg, weft_cx_t *cx)
{
	uint64_t until = weft_now_ns() + WEFT_MSEC(60);

	(void)arg, (void)cx;
	while (weft_now_ns() < until)
		;
	return WEFT_READY;
}

static void test_two_runtimes(void **state)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	weft_runtime_t *a, *b;
	weft_probe_sub_t *sub;
	weft_join_t *j;
	char want[64], ld[256], od[256];
	unsigned n_long, n_over;

	(void)state;
	assert_true(cpus > 0 && cpus < 64);
	assert_int_equal(
		weft_probe_subscribe(
			&(weft_probe_sub_opts_t){ .events = true,
						  .on_update = on_update },
			&sub),
		0);
	assert_int_equal(weft_runtime_create(
				 &(weft_config_t){ .workers = (unsigned)cpus },
				 &a),
			 0);
	assert_int_equal(
		weft_runtime_create(&(weft_config_t){ .workers = 1 }, &b), 0);
	usleep(50000); /* the first's workers parked */
	assert_int_equal(
		weft_spawn_named(b, "spinner", spin_poll, (char *)NULL, &j), 0);
	spinner = weft_join_id(j);
	assert_int_equal(weft_join_wait(j, NULL), 0);
	weft_join_drop(j);
	for (int i = 0; i < 10; i++) {
		usleep(20000);
		weft_probe_flush();
	}
	/* Copied out first: a failed assert must not leave the lock
	 * held for the callback (the teardown would hang). */
	pthread_mutex_lock(&lock);
	n_long = long_polls;
	n_over = oversub;
	memcpy(ld, long_detail, sizeof(ld));
	memcpy(od, oversub_detail, sizeof(od));
	pthread_mutex_unlock(&lock);
	print_message("long poll: %s\noversubscribed: %s\n", ld, od);
	/* Said, and not as what the other runtime's worker did. */
	assert_true(n_long >= 1);
	assert_null(strstr(ld, "asleep in the kernel"));
	assert_int_equal(n_over, 1);
	snprintf(want, sizeof(want), "%ld workers on %ld CPUs (all runtimes)",
		 cpus + 1, cpus);
	assert_non_null(strstr(od, want));
	weft_runtime_destroy(b);
	weft_runtime_destroy(a);
	weft_probe_unsubscribe(sub);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_two_runtimes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
