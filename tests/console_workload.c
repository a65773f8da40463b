/* SPDX-License-Identifier: MIT */
/*
 * The workload of the console's end-to-end tests.
 *
 * console_workload: what console_tmux.sh records (WEFT_TRACE=path): two
 * workers kept busy for about a second and a half by 16 tasks named
 * "ticker" (yield, sleep 1 ms, repeat), plus one task named "lock-bad"
 * that holds a weft_mutex_t across an await, which the probe reports as
 * lock-held-across-await.
 *
 * console_workload --live SECS: what console_live.sh attaches to: prints
 * "ready", then the same in shorter rounds (8 tickers) until SECS have
 * passed, so a lost test cannot leave it running.  A subscriber sees
 * only the warnings raised after it subscribed, so the warning must come
 * again and again.
 *
 * console_workload --live SECS WORKERS: the same on WORKERS workers
 * (console_workers.sh: 100), each of which first runs one "gate" task:
 * WORKERS gates, spawned one at a time, block their worker's poll until
 * all have come (10 s at most), so every worker has polled before
 * "ready".
 *
 * The bad task unlocks only on the thread that locked (a pthread mutex
 * must be).  When a wake has moved it to the other worker it sleeps 1 ms
 * and looks again: each such PENDING is one more warning (at least one
 * is certain), but a sleep, unlike a yield, keeps their number small, so
 * the task's lock-acquire stays among the console's recent events.  (A
 * yield loop once made 1,733 polls before a steal brought it back.)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "weft/mutex.h"
#include "weft/weft.h"

struct ticker {
	int weft_pc;
	int i;
	int n;
	weft_sleep_t sl;
};

static weft_poll_t ticker_poll(void *arg, weft_cx_t *cx)
{
	struct ticker *t = arg;

	WEFT_ASYNC_BEGIN(t);
	for (t->i = 0; t->i < t->n; t->i++) {
		WEFT_YIELD(t, cx);
		weft_sleep_init(&t->sl, WEFT_MSEC(1));
		WEFT_AWAIT(t, weft_sleep_poll(&t->sl, cx));
	}
	WEFT_ASYNC_END(t);
}

struct locker {
	int weft_pc;
	int tries;
	weft_mutex_t *m;
	pthread_t owner;
	weft_sleep_t sl;
};

static weft_poll_t lock_bad_poll(void *arg, weft_cx_t *cx)
{
	struct locker *l = arg;

	WEFT_ASYNC_BEGIN(l);
	weft_mutex_lock(l->m);
	l->owner = pthread_self();
	WEFT_YIELD(l, cx);
	while (!pthread_equal(l->owner, pthread_self()) && l->tries++ < 10000) {
		weft_sleep_init(&l->sl, WEFT_MSEC(1));
		WEFT_AWAIT(l, weft_sleep_poll(&l->sl, cx));
	}
	weft_mutex_unlock(l->m);
	WEFT_ASYNC_END(l);
}

/* One round: @tickers tickers of @n rounds each and one lock-bad task. */
static int run_round(weft_runtime_t *rt, weft_mutex_t *m, int tickers, int n)
{
	struct ticker t[16];
	struct locker l = { .m = m };
	weft_join_t *j[16 + 1];

	for (int i = 0; i < tickers; i++) {
		t[i] = (struct ticker){ .n = n };
		if (weft_spawn_named(rt, "ticker", ticker_poll, &t[i], &j[i]))
			return -1;
	}
	if (weft_spawn_named(rt, "lock-bad", lock_bad_poll, &l, &j[tickers]))
		return -1;
	for (int i = 0; i <= tickers; i++) {
		weft_join_wait(j[i], NULL);
		weft_join_drop(j[i]);
	}
	return 0;
}

static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static unsigned gate_arrived, gate_want;

static weft_poll_t gate_poll(void *arg, weft_cx_t *cx)
{
	struct timespec until;

	(void)arg;
	(void)cx;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	pthread_mutex_lock(&gate_lock);
	gate_arrived++;
	pthread_cond_broadcast(&gate_cond);
	while (gate_arrived < gate_want &&
	       !pthread_cond_timedwait(&gate_cond, &gate_lock, &until))
		;
	pthread_mutex_unlock(&gate_lock);
	return WEFT_READY;
}

/*
 * A gate per worker: each of the @n workers polls one.  Each spawned
 * once the one before is on a worker, so that the spawn wakes an idle
 * worker (spawned at once, a worker may take several and block on the
 * first).  Past 10 s, the gates are let go whatever came.
 */
static int run_gates(weft_runtime_t *rt, unsigned n)
{
	weft_join_t **j = calloc(n, sizeof(*j));
	struct timespec until;
	bool late = false;
	unsigned k = 0;
	int rc = 0;

	if (!j)
		return -1;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	gate_want = n;
	for (; k < n && !late; k++) {
		if (weft_spawn_named(rt, "gate", gate_poll, NULL, &j[k])) {
			rc = -1;
			break;
		}
		pthread_mutex_lock(&gate_lock);
		while (gate_arrived < k + 1 && !late)
			late = pthread_cond_timedwait(&gate_cond, &gate_lock,
						      &until) != 0;
		pthread_mutex_unlock(&gate_lock);
	}
	pthread_mutex_lock(&gate_lock);
	gate_want = 0; /* all let go */
	pthread_cond_broadcast(&gate_cond);
	pthread_mutex_unlock(&gate_lock);
	for (unsigned i = 0; i < k; i++) {
		weft_join_wait(j[i], NULL);
		weft_join_drop(j[i]);
	}
	free(j);
	return rc;
}

int main(int argc, char **argv)
{
	weft_config_t cfg = { .workers = 2 };
	bool live = (argc == 3 || argc == 4) && !strcmp(argv[1], "--live");
	time_t end = live ? time(NULL) + atoi(argv[2]) : 0;
	weft_runtime_t *rt;
	weft_mutex_t m;
	int rc = 0;

	if (argc != 1 && !live) {
		fputs("usage: console_workload [--live SECS [WORKERS]]\n",
		      stderr);
		return 2;
	}
	if (argc == 4)
		cfg.workers = (unsigned)atoi(argv[3]);
	weft_mutex_init(&m, "accounts");
	if (weft_runtime_create(&cfg, &rt)) {
		fputs("console_workload: cannot create the runtime\n", stderr);
		return 1;
	}
	if (!live) {
		rc = run_round(rt, &m, 16, 600);
	} else {
		if (argc == 4)
			rc = run_gates(rt, cfg.workers);
		printf("ready\n");
		fflush(stdout);
		while (!rc && time(NULL) < end)
			rc = run_round(rt, &m, 8, 100);
	}
	if (rc)
		fputs("console_workload: cannot spawn\n", stderr);
	weft_runtime_destroy(rt);
	weft_mutex_fini(&m);
	return rc ? 1 : 0;
}
