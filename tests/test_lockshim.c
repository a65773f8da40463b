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
#include <unistd.h>

#include <weft/probe.h>
#include <weft/weft.h>

static pthread_mutex_t raw = PTHREAD_MUTEX_INITIALIZER;
static unsigned bad_warnings, good_warnings, moved_warnings;
static uint64_t bad_id, good_id, moved_id;
static _Atomic int moved_locked, moved_released;
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
 * Takes the lock and keeps it across yields until the main thread, which
 * released it meanwhile, says so: the unlock on another thread than the
 * lock's, as when the holder resumes on another worker.  (POSIX leaves an
 * unlock by another thread undefined; glibc's default mutex does it.)
 */
static weft_poll_t moved_poll(void *arg, weft_cx_t *cx)
{
	struct st *s = arg;

	WEFT_ASYNC_BEGIN(s);
	pthread_mutex_lock(&raw);
	moved_locked = 1;
	while (!moved_released)
		WEFT_YIELD(s, cx);
	WEFT_ASYNC_END(s);
}

static void run_moved(weft_runtime_t *rt)
{
	weft_join_t *j;

	if (weft_spawn_named(rt, "raw-moved", moved_poll, &(struct st){ 0 },
			     &j))
		return;
	moved_id = weft_join_id(j);
	while (!moved_locked)
		usleep(1000);
	pthread_mutex_unlock(&raw);
	moved_released = 1;
	weft_join_wait(j, NULL);
	weft_join_drop(j);
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
	/* The same worker, after a hold released elsewhere. */
	run_moved(rt);
	run(rt, false);
	weft_probe_flush();
	weft_runtime_destroy(rt);
	weft_probe_unsubscribe(sub);
	printf("bad=%u good=%u moved=%u detail=%s\n", bad_warnings,
	       good_warnings, moved_warnings, detail);
	if (bad_warnings != 1 || good_warnings != 0 || !moved_warnings ||
	    !strstr(detail, "pthread_mutex_t") ||
	    !strstr(detail, "test_lockshim+0x")) {
		fprintf(stderr, "test_lockshim: FAILED\n");
		return 1;
	}
	printf("1 passed, 0 failed\n");
	return 0;
}
