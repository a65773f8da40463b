/* SPDX-License-Identifier: MIT */
/*
 * The workload the console's live test attaches to (console_live.sh):
 * like console_workload.c, but in rounds until killed (or after argv[1]
 * seconds, 60 by default, so a lost test cannot leave it running).
 * Each round keeps two workers busy with tasks named "ticker" (yield,
 * sleep 1 ms, repeat) and runs one task "lock-bad" holding a
 * weft_mutex_t across an await.  A subscriber sees only the warnings
 * raised after it subscribed, so the warning must come again and again.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
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
};

/* Unlocks only on the thread that locked (a pthread mutex must be). */
static weft_poll_t lock_bad_poll(void *arg, weft_cx_t *cx)
{
	struct locker *l = arg;

	WEFT_ASYNC_BEGIN(l);
	weft_mutex_lock(l->m);
	l->owner = pthread_self();
	WEFT_YIELD(l, cx);
	while (!pthread_equal(l->owner, pthread_self()) && l->tries++ < 100000)
		WEFT_YIELD(l, cx);
	weft_mutex_unlock(l->m);
	WEFT_ASYNC_END(l);
}

int main(int argc, char **argv)
{
	weft_config_t cfg = { .workers = 2 };
	enum { TICKERS = 8 };
	time_t end = time(NULL) + (argc > 1 ? atoi(argv[1]) : 60);
	weft_runtime_t *rt;
	weft_mutex_t m;

	weft_mutex_init(&m, "accounts");
	if (weft_runtime_create(&cfg, &rt)) {
		fputs("console_live_workload: cannot create the runtime\n",
		      stderr);
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	while (time(NULL) < end) {
		struct ticker t[TICKERS];
		struct locker l = { .m = &m };
		weft_join_t *j[TICKERS + 1];

		for (int i = 0; i < TICKERS; i++) {
			t[i] = (struct ticker){ .n = 100 };
			if (weft_spawn_named(rt, "ticker", ticker_poll, &t[i],
					     &j[i]))
				return 1;
		}
		if (weft_spawn_named(rt, "lock-bad", lock_bad_poll, &l,
				     &j[TICKERS]))
			return 1;
		for (int i = 0; i <= TICKERS; i++) {
			weft_join_wait(j[i], NULL);
			weft_join_drop(j[i]);
		}
	}
	weft_runtime_destroy(rt);
	weft_mutex_fini(&m);
	return 0;
}
