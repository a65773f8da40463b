/* SPDX-License-Identifier: MIT */
/*
 * The preloaded lock shim (libweft-lockshim.so): a raw pthread mutex held
 * across an await raises "lock held across await"; one released before
 * the await does not, nor does one a task takes and releases in one poll
 * after another task's hold of the same lock ended on another thread
 * (the holder resumed on another worker and unlocked there: the hold
 * left in the first worker's table was blamed on the next task there).  Run by ctest with LD_PRELOAD set; linked against
 * the shared libweft, whose hook the shim sets.  Exit 0 on success.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <weft/probe.h>
#include <weft/weft.h>

static pthread_mutex_t raw = PTHREAD_MUTEX_INITIALIZER;
static unsigned bad_warnings, good_warnings, moved_warnings, taker_warnings;
static _Atomic uint64_t bad_id, good_id, moved_id, taker_id;
static char detail[160];

static void on_update(void *ctx, const weft_probe_update_t *u)
{
	(void)ctx;
	for (size_t i = 0; i < u->nwarnings; i++) {
		const weft_probe_warning_t *w = &u->warnings[i];

		if (w->kind != WEFT_WARN_LOCK_HELD_ACROSS_AWAIT)
			continue;
		if (w->task == bad_id) {
			bad_warnings++;
			snprintf(detail, sizeof(detail), "%s", w->detail);
		}
		if (w->task == good_id)
			good_warnings++;
		if (w->task == moved_id)
			moved_warnings++;
		if (w->task == taker_id)
			taker_warnings++;
	}
}

struct st {
	int weft_pc;
	bool hold;
};

static weft_poll_t task_poll(void *arg, weft_cx_t *cx)
{
	struct st *s = arg;

	WEFT_ASYNC_BEGIN(s);
	pthread_mutex_lock(&raw);
	if (!s->hold)
		pthread_mutex_unlock(&raw);
	WEFT_YIELD(s, cx);
	if (s->hold)
		pthread_mutex_unlock(&raw);
	WEFT_ASYNC_END(s);
}

/*
 * The holder that moves: on a runtime of two workers, takes the lock,
 * then sleeps (holding it) until it wakes on the other worker, and
 * unlocks there.  Each try leaves a spinner in its worker's LIFO slot,
 * which runs there next and keeps it busy for 30 ms, so that the sleep's
 * wake goes to the other worker, parked in the driver.  Then the taker,
 * on the worker the lock was taken on (tried the same way), takes and
 * releases it in one poll and yields: the hold left behind in the first
 * worker's table used to be what its unlock forgot, its own hold
 * staying, blamed at the yield.
 */
static pthread_t locked_on;
static _Atomic int moved_ok, taker_ok;

static weft_poll_t spin_poll(void *arg, weft_cx_t *cx)
{
	uint64_t until = weft_now_ns() + WEFT_MSEC(30);

	(void)arg, (void)cx;
	while (weft_now_ns() < until)
		;
	return WEFT_READY;
}

struct hop {
	int weft_pc;
	int tries;
	bool taker;
	weft_sleep_t sl;
};

/* Until this poll runs on the thread @want says (the one the lock was
 * taken on, or another), at most 100 tries. */
static bool hop_there(struct hop *h, bool want_same)
{
	return (pthread_equal(pthread_self(), locked_on) != 0) == want_same ||
	       h->tries >= 100;
}

static weft_poll_t hop_poll(void *arg, weft_cx_t *cx)
{
	struct hop *h = arg;

	WEFT_ASYNC_BEGIN(h);
	if (!h->taker) {
		pthread_mutex_lock(&raw);
		locked_on = pthread_self();
	}
	while (!hop_there(h, h->taker)) {
		h->tries++;
		weft_spawn_named(NULL, "spinner", spin_poll, (char *)NULL,
				 NULL);
		weft_sleep_init(&h->sl, WEFT_MSEC(5));
		WEFT_AWAIT(h, weft_sleep_poll(&h->sl, cx));
		weft_sleep_fini(&h->sl);
	}
	if (h->taker) {
		taker_ok = pthread_equal(pthread_self(), locked_on) != 0;
		pthread_mutex_lock(&raw);
	} else {
		moved_ok = pthread_equal(pthread_self(), locked_on) == 0;
	}
	pthread_mutex_unlock(&raw);
	WEFT_YIELD(h, cx);
	WEFT_ASYNC_END(h);
}

static void run_moved(void)
{
	weft_runtime_t *rt;
	weft_join_t *j;

	if (weft_runtime_create(&(weft_config_t){ .workers = 2 }, &rt))
		return;
	if (!weft_spawn_named(rt, "raw-moved", hop_poll, &(struct hop){ 0 },
			      &j)) {
		moved_id = weft_join_id(j);
		weft_join_wait(j, NULL);
		weft_join_drop(j);
	}
	if (!weft_spawn_named(rt, "raw-taker", hop_poll,
			      &(struct hop){ .taker = true }, &j)) {
		taker_id = weft_join_id(j);
		weft_join_wait(j, NULL);
		weft_join_drop(j);
	}
	weft_probe_flush();
	weft_runtime_destroy(rt);
}

static uint64_t run(weft_runtime_t *rt, bool hold)
{
	weft_join_t *j;
	uint64_t id;

	if (weft_spawn_named(rt, hold ? "raw-bad" : "raw-good", task_poll,
			     &(struct st){ .hold = hold }, &j))
		return 0;
	id = weft_join_id(j);
	if (hold)
		bad_id = id;
	else
		good_id = id;
	weft_join_wait(j, NULL);
	weft_join_drop(j);
	return id;
}

int main(void)
{
	weft_probe_sub_t *sub;
	weft_runtime_t *rt;

	if (weft_probe_subscribe(&(weft_probe_sub_opts_t){ .events = true,
							   .on_update = on_update },
				 &sub) ||
	    /* One worker: the bad task unlocks on the thread that locked. */
	    weft_runtime_create(&(weft_config_t){ .workers = 1 }, &rt)) {
		fprintf(stderr, "test_lockshim: setup failed\n");
		return 1;
	}
	run(rt, true);
	run(rt, false);
	weft_probe_flush();
	weft_runtime_destroy(rt);
	run_moved();
	weft_probe_unsubscribe(sub);
	printf("bad=%u good=%u moved=%u (moved %d) taker=%u (on its "
	       "worker %d) detail=%s\n",
	       bad_warnings, good_warnings, moved_warnings, moved_ok,
	       taker_warnings, taker_ok, detail);
	if (!moved_ok || !taker_ok)
		printf("the moves did not happen: that case not checked\n");
	else if (!moved_warnings || taker_warnings)
		bad_warnings =
			0; /* fails below: the holder said, the taker not */
	if (bad_warnings != 1 || good_warnings != 0 ||
	    !strstr(detail, "pthread_mutex_t") ||
	    !strstr(detail, "test_lockshim+0x")) {
		fprintf(stderr, "test_lockshim: FAILED\n");
		return 1;
	}
	printf("1 passed, 0 failed\n");
	return 0;
}
