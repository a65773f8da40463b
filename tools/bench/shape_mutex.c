/* SPDX-License-Identifier: MIT */
/*
 * The contended async mutex: mutex_contended.
 *
 * MUTEX_TASKS tasks each take one weft_async_mutex_t MUTEX_ROUNDS times,
 * add to a counter and let go, holding it across one yield: the others
 * queue on it meanwhile, so nearly every lock is the slow path (a waiter
 * queued, handed the lock by the unlock, woken).  What the resources'
 * events cost where they are densest (issue 18): a wait, its end, an
 * acquire, its site and a release per lock while anyone listens.  No
 * anchor has this shape; it is weft's own, run in the probe modes.
 *
 * The check: the counter is MUTEX_TASKS * MUTEX_ROUNDS (every increment
 * under the lock).  Threads: run function on main, the tasks on the
 * workers; main reads the counter after the latch, whose last done()
 * orders every task's writes before its wait returns.
 */
#include <stdint.h>

#include "bench.h"

#define MUTEX_TASKS 8u
#define MUTEX_ROUNDS 25000u

struct locker {
	int weft_pc;
	weft_async_mutex_t *m;
	weft_async_mutex_lock_t lk;
	uint64_t *counter;
	weft_countdown_t *done;
	unsigned i;
};

static weft_poll_t locker_poll(void *arg, weft_cx_t *cx)
{
	struct locker *st = arg;

	WEFT_ASYNC_BEGIN(st);
	for (st->i = 0; st->i < MUTEX_ROUNDS; st->i++) {
		weft_async_mutex_lock_init(&st->lk, st->m);
		WEFT_AWAIT(st, weft_async_mutex_lock_poll(&st->lk, cx));
		weft_async_mutex_lock_fini(&st->lk);
		(*st->counter)++;
		WEFT_YIELD(st, cx);
		weft_async_mutex_unlock(st->m);
	}
	weft_countdown_done(st->done);
	WEFT_ASYNC_END(st);
}

static uint64_t mutex_contended(struct bench *b)
{
	weft_async_mutex_t m;
	weft_countdown_t *done = bench_latch(b, MUTEX_TASKS);
	uint64_t counter = 0, t0, el;
	int rc;

	weft_async_mutex_init(&m);
	weft_async_mutex_name(&m, "bench lock");
	t0 = weft_now_ns();
	for (unsigned i = 0; i < MUTEX_TASKS; i++) {
		rc = weft_spawn_named(b->rt, "locker", locker_poll,
				      (&(struct locker){ .m = &m,
							 .counter = &counter,
							 .done = done }),
				      NULL);
		if (rc)
			bench_die("weft_spawn", rc);
	}
	weft_countdown_wait(done);
	el = weft_now_ns() - t0;
	weft_async_mutex_fini(&m);
	if (counter != (uint64_t)MUTEX_TASKS * MUTEX_ROUNDS)
		bench_check_failed("mutex_contended counter %llu, want %u",
				   (unsigned long long)counter,
				   MUTEX_TASKS * MUTEX_ROUNDS);
	return el;
}

const struct bench_shape shape_mutex_contended = {
	.name = "mutex_contended",
	.unit = "lock of an async mutex that 8 tasks hold across a yield",
	.ops = (size_t)MUTEX_TASKS * MUTEX_ROUNDS,
	.run = mutex_contended,
};
