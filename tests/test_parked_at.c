/* SPDX-License-Identifier: MIT */
/*
 * Where a task is parked (issue 18): the site of the await its last poll
 * returned PENDING from, as WEFT_AWAIT, WEFT_YIELD and the fiber awaits
 * record it (weft/future.h, weft/fiber.h) and the worker keeps it in the
 * task (task.c, weft__task_parked_at()).
 *
 * One worker, so that the tasks run one after the other in the order the
 * test thread spawned them (from outside, through the global queue): a
 * task spawned and joined after another has run only once the other's
 * poll, and the worker's store after it, are over (settle()).  A join
 * handle is the task pointer, so task_of() is a cast.  Tasks left parked
 * forever are cancelled by weft_runtime_destroy().
 */
#include <string.h>

#include "runtime_internal.h"
#include "test_helpers.h"

static weft_task_t *task_of(weft_join_t *j)
{
	return (weft_task_t *)j;
}

/* Asserts that @site names line @line of this file. */
static void assert_site(const weft_site_t *site, int line)
{
	assert_non_null(site);
	assert_non_null(site->file);
	assert_string_equal(site->file, __FILE__);
	assert_int_equal(site->line, line);
}

static weft_poll_t nop_poll(void *arg, weft_cx_t *cx)
{
	(void)arg;
	(void)cx;
	return WEFT_READY;
}

/* Returns once every task spawned before it has finished its poll. */
static void settle(weft_runtime_t *rt)
{
	assert_int_equal(join_wait_drop(spawn_ok(rt, nop_poll, NULL, NULL, 0,
						 true),
					NULL),
			 0);
}

/* Never READY and never woken: the task stays where it awaits it. */
static weft_poll_t never_poll(void *arg, weft_cx_t *cx)
{
	(void)arg;
	(void)cx;
	return WEFT_PENDING;
}

/* ------------------------------------------------------ nested awaits */

/* Lines of the awaits, each stored on the line of its await. */
static int inner_line, outer_line, yield_line;

struct inner {
	int weft_pc;
};

static weft_poll_t inner_poll(struct inner *in, weft_cx_t *cx)
{
	WEFT_ASYNC_BEGIN(in);
	inner_line = __LINE__; WEFT_AWAIT(in, never_poll(NULL, cx));
	WEFT_ASYNC_END(in);
}

struct outer {
	int weft_pc;
	struct inner inner;
};

static weft_poll_t outer_poll(void *arg, weft_cx_t *cx)
{
	struct outer *o = arg;

	WEFT_ASYNC_BEGIN(o);
	outer_line = __LINE__; WEFT_AWAIT(o, inner_poll(&o->inner, cx));
	WEFT_ASYNC_END(o);
}

/* The innermost await is where the task is parked, not the outer one. */
static void test_parked_at_nested_await_is_the_inner(void **state)
{
	weft_runtime_t *rt = rt_create(1);
	weft_join_t *j;

	(void)state;
	j = spawn_ok(rt, outer_poll, NULL, &(struct outer){ 0 },
		     sizeof(struct outer), true);
	settle(rt);
	assert_int_not_equal(outer_line, inner_line);
	assert_site(weft__task_parked_at(task_of(j)), inner_line);
	weft_join_drop(j);
	weft_runtime_destroy(rt);
}

/* -------------------------------------------------------------- yield */

struct yielder {
	int weft_pc;
	const weft_site_t *seen; /* where its second poll found it parked */
};

static weft_poll_t yielder_poll(void *arg, weft_cx_t *cx)
{
	struct yielder *y = arg;

	WEFT_ASYNC_BEGIN(y);
	yield_line = __LINE__; WEFT_YIELD(y, cx);
	/* Polled again at once: the site is the last PENDING's. */
	y->seen = weft__task_parked_at(weft__current_task());
	weft_cx_return(cx, (void *)y->seen);
	WEFT_ASYNC_END(y);
}

static void test_parked_at_yield_is_its_line(void **state)
{
	weft_runtime_t *rt = rt_create(1);
	void *out = NULL;

	(void)state;
	assert_int_equal(join_wait_drop(spawn_ok(rt, yielder_poll, NULL,
						 &(struct yielder){ 0 },
						 sizeof(struct yielder), true),
					&out),
			 0);
	assert_site(out, yield_line);
	weft_runtime_destroy(rt);
}

/* --------------------------------------------------------- by hand */

/* Awaits something READY with the macro, then finishes. */
struct ready_then_done {
	int weft_pc;
};

static weft_poll_t ready_then_done_poll(void *arg, weft_cx_t *cx)
{
	struct ready_then_done *r = arg;

	WEFT_ASYNC_BEGIN(r);
	WEFT_AWAIT(r, nop_poll(NULL, cx));
	WEFT_ASYNC_END(r);
}

/*
 * A poll written by hand records no site: its task shows none, though
 * the task polled before it on the same worker left one behind (a READY
 * poll that evaluated a WEFT_AWAIT), and though it was itself parked at
 * a site by its previous poll.
 */
struct by_hand {
	int weft_pc;
	unsigned polls;
};

static int by_hand_line;

static weft_poll_t by_hand_poll(void *arg, weft_cx_t *cx)
{
	struct by_hand *b = arg;

	/* From its second poll on (the test wakes it): by hand. */
	if (b->polls++ > 0)
		return WEFT_PENDING;
	WEFT_ASYNC_BEGIN(b);
	by_hand_line = __LINE__; WEFT_AWAIT(b, never_poll(NULL, cx));
	WEFT_ASYNC_END(b);
}

/* Wakes @j's task by hand: the test holds no waker of it. */
static void wake(weft_join_t *j)
{
	weft_waker_t w = { &weft__task_waker_vtable, task_of(j) };

	/* By reference: the join handle's reference keeps it alive. */
	weft_waker_wake_by_ref(&w);
}

static void test_parked_at_by_hand_is_null(void **state)
{
	weft_runtime_t *rt = rt_create(1);
	weft_join_t *parked, *hand;

	(void)state;
	/* A READY poll on this worker evaluated a WEFT_AWAIT last. */
	assert_int_equal(join_wait_drop(spawn_ok(rt, ready_then_done_poll,
						 NULL,
						 &(struct ready_then_done){ 0 },
						 sizeof(struct ready_then_done),
						 true),
					NULL),
			 0);
	hand = spawn_ok(rt, never_poll, NULL, NULL, 0, true);
	settle(rt);
	assert_null(weft__task_parked_at(task_of(hand)));

	/* A PENDING one, then the hand-written poll of another task. */
	parked = spawn_ok(rt, outer_poll, NULL, &(struct outer){ 0 },
			  sizeof(struct outer), true);
	weft_join_drop(hand);
	hand = spawn_ok(rt, never_poll, NULL, NULL, 0, true);
	settle(rt);
	assert_site(weft__task_parked_at(task_of(parked)), inner_line);
	assert_null(weft__task_parked_at(task_of(hand)));
	weft_join_drop(hand);
	weft_join_drop(parked);

	/* A task parked at a site whose next poll awaits by hand. */
	hand = spawn_ok(rt, by_hand_poll, NULL, &(struct by_hand){ 0 },
			sizeof(struct by_hand), true);
	settle(rt);
	assert_site(weft__task_parked_at(task_of(hand)), by_hand_line);
	wake(hand);
	settle(rt);
	assert_null(weft__task_parked_at(task_of(hand)));
	weft_join_drop(hand);
	weft_runtime_destroy(rt);
}

/* ------------------------------------------------------------- fibers */

/*
 * Pending until its second poll, when it says so (@polled) and stays
 * pending: a fiber re-polls its future in place, on whichever worker,
 * and must keep its site for each poll.
 */
struct twice {
	unsigned polls;
	tcount_t *polled;
};

static weft_poll_t twice_poll(void *arg, weft_cx_t *cx)
{
	struct twice *t = arg;

	(void)cx;
	if (++t->polls >= 2)
		tcount_add(t->polled, 1);
	return WEFT_PENDING;
}

static int fiber_line, join_line;

struct fiber_arg {
	struct twice twice;
	weft_join_t *other;
};

static void *awaiter(void *arg)
{
	struct fiber_arg *a = arg;

	/* A READY await first: it leaves no site for what follows. */
	weft_await(nop_poll, NULL);
	fiber_line = __LINE__; weft_await(twice_poll, &a->twice);
	return NULL;
}

static void *joiner(void *arg)
{
	struct fiber_arg *a = arg;

	join_line = __LINE__; weft_fiber_join(a->other, NULL, NULL);
	return NULL;
}

/* Calls the function itself: no site. */
static void *bare_awaiter(void *arg)
{
	(void)arg;
	weft_await(nop_poll, NULL);
	(weft_await)(never_poll, NULL);
	return NULL;
}

static void test_parked_at_fiber_is_the_call(void **state)
{
	weft_runtime_t *rt = rt_create(1);
	struct fiber_arg a = { 0 };
	weft_join_t *j, *jj, *jb;
	tcount_t polled;

	(void)state;
	tcount_init(&polled);
	a.twice.polled = &polled;
	a.other = spawn_ok(rt, never_poll, NULL, NULL, 0, true);
	assert_int_equal(weft_spawn_fiber(rt, "awaiter", awaiter, &a, &j), 0);
	assert_int_equal(weft_spawn_fiber(rt, "joiner", joiner, &a, &jj), 0);
	assert_int_equal(weft_spawn_fiber(rt, "bare", bare_awaiter, NULL,
					  &jb),
			 0);
	settle(rt);
	assert_site(weft__task_parked_at(task_of(j)), fiber_line);
	assert_site(weft__task_parked_at(task_of(jj)), join_line);
	assert_null(weft__task_parked_at(task_of(jb)));

	/* Polled again in place (a wake that finds it still pending). */
	wake(j);
	tcount_wait(&polled, 1);
	settle(rt);
	assert_site(weft__task_parked_at(task_of(j)), fiber_line);

	/* The joiner awaits a.other until both are cancelled: drop after. */
	weft_runtime_destroy(rt);
	weft_join_drop(jb);
	weft_join_drop(jj);
	weft_join_drop(j);
	weft_join_drop(a.other);
	tcount_fini(&polled);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parked_at_nested_await_is_the_inner),
		cmocka_unit_test(test_parked_at_yield_is_its_line),
		cmocka_unit_test(test_parked_at_by_hand_is_null),
		cmocka_unit_test(test_parked_at_fiber_is_the_call),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
