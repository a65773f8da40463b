/* SPDX-License-Identifier: MIT */
/*
 * The workload the console's end-to-end test records (WEFT_TRACE=path
 * console_workload): two workers kept busy for about a second and a half
 * by tasks named "ticker" (yield, sleep 1 ms, repeat), plus one task
 * named "lock-bad" that holds a weft_mutex_t across an await, which the
 * probe reports as lock-held-across-await.
 *
 * The bad task unlocks only on the thread that locked (a pthread mutex
 * must be): when a wake moves it to the other worker it yields again
 * until it is back.  Each such PENDING is one more warning; at least one
 * is certain.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

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

int main(void)
{
	weft_config_t cfg = { .workers = 2 };
	enum { TICKERS = 16 };
	weft_join_t *j[TICKERS + 1];
	weft_runtime_t *rt;
	weft_mutex_t m;

	weft_mutex_init(&m, "accounts");
	if (weft_runtime_create(&cfg, &rt)) {
		fputs("console_workload: cannot create the runtime\n", stderr);
		return 1;
	}
	for (int i = 0; i < TICKERS; i++) {
		struct ticker t = { .n = 600 };

		if (weft_spawn_named(rt, "ticker", ticker_poll, &t, &j[i]))
			return 1;
	}
	{
		struct locker l = { .m = &m };

		if (weft_spawn_named(rt, "lock-bad", lock_bad_poll, &l,
				     &j[TICKERS]))
			return 1;
	}
	for (int i = 0; i <= TICKERS; i++) {
		weft_join_wait(j[i], NULL);
		weft_join_drop(j[i]);
	}
	weft_runtime_destroy(rt);
	weft_mutex_fini(&m);
	return 0;
}
