/* SPDX-License-Identifier: MIT */
/*
 * The collector's count of a task's wakers from event streams built by
 * hand (as test_collector.c: two rings, passes run on this thread): the
 * clones of its own waker a POLL carries (WEFT_POLL_CLONES_SHIFT) count
 * as WAKER_CLONE events do, also when a drop of one, made on another
 * thread during the poll, is read a pass before the POLL that counts it,
 * or before the task's record; and an old trace's WAKER_CLONE events
 * read as before.
 */
#include <stdlib.h>
#include <string.h>

#include "test_helpers.h"

#include "collector_internal.h"

#include "collector_harness.h"

static int setup(void **state)
{
	(void)state;
	return harness_setup();
}

static int teardown(void **state)
{
	(void)state;
	harness_teardown(weft__probe_clock_to_ns(base) + 100000000000ull);
	return 0;
}

static unsigned lost_warnings(uint64_t task)
{
	unsigned n = 0;

	pthread_mutex_lock(&p->lock);
	for (uint64_t s = p->warn_seq > WARN_KEEP ? p->warn_seq - WARN_KEEP : 0;
	     s < p->warn_seq; s++) {
		const weft_probe_warning_t *w = &p->warnings[s % WARN_KEEP];

		n += w->kind == WEFT_WARN_LOST_WAKER && w->task == task;
	}
	pthread_mutex_unlock(&p->lock);
	return n;
}

/*
 * Four tasks parked after one poll, each spawned at tick 1 and polled
 * from tick 2 to 10, their clones dropped on ring b at tick 5 (during
 * the poll).  The drops are read a pass before the POLLs that count the
 * clones.  71 cloned twice (in its POLL), 72 the same in the old form
 * (two WAKER_CLONE events and a POLL of none): one dropped, one left,
 * neither is lost.  73 cloned once, 74 in the old form: dropped, none
 * left, both lost.
 */
static void test_collector_wakers_drop_before_poll(void **state)
{
	unsigned later = ms_ticks(1200);
	weft_probe_task_t t;

	(void)state;
	for (uint64_t id = 71; id <= 74; id++) {
		ev(ring_a, 1, WEFT_EV_SPAWN, id, 0, 0);
		ev(ring_b, 5, WEFT_EV_WAKER_DROP, id, 0, 0);
	}
	ev(ring_a, 2, WEFT_EV_WAKER_CLONE, 72, 0, 0);
	ev(ring_a, 2, WEFT_EV_WAKER_CLONE, 72, 0, 0);
	ev(ring_a, 2, WEFT_EV_WAKER_CLONE, 74, 0, 0);
	/* The drops (and the old form's clones) only. */
	passes_at(6);
	t = task(71);
	assert_int_equal(t.waker_clones, 0);
	assert_int_equal(t.waker_drops, 1);
	poll_pending(ring_a, 2, 10, 71, 2);
	poll_pending(ring_a, 2, 10, 72, 0);
	poll_pending(ring_a, 2, 10, 73, 1);
	poll_pending(ring_a, 2, 10, 74, 0);
	passes_at(11);
	passes_at(11 + later);
	passes_at(11 + 2 * later);
	for (uint64_t id = 71; id <= 74; id++) {
		t = task(id);
		assert_int_equal(t.state, WEFT_TASK_IDLE);
		assert_int_equal(t.waker_clones, id == 71 || id == 72 ? 2 : 1);
		assert_int_equal(t.waker_drops, 1);
		assert_int_equal(lost_warnings(id),
				 id == 71 || id == 72 ? 0 : 1);
	}
}

/*
 * A POLL's clones, a WAKE by value and a drop, in order: what is left is
 * what the events say (a wake by value uses one up), whether the clones
 * came in the POLL or as events.  Each task cloned twice in its first
 * poll (75 and 77 in their POLLs, 76 and 78 as events), was woken by
 * value and parked again: 75 and 76 with one waker left; 77 and 78 had
 * the other dropped, and have none.
 */
static void test_collector_wakers_wake_by_value(void **state)
{
	unsigned later = ms_ticks(1200);
	weft_probe_task_t t;

	(void)state;
	for (uint64_t id = 75; id <= 78; id++)
		ev(ring_a, 1, WEFT_EV_SPAWN, id, 0, 0);
	poll_pending(ring_a, 2, 4, 75, 2);
	poll_pending(ring_a, 2, 4, 77, 2);
	for (int i = 0; i < 2; i++) {
		ev(ring_a, 3, WEFT_EV_WAKER_CLONE, 76, 0, 0);
		ev(ring_a, 3, WEFT_EV_WAKER_CLONE, 78, 0, 0);
	}
	poll_pending(ring_a, 2, 4, 76, 0);
	poll_pending(ring_a, 2, 4, 78, 0);
	for (uint64_t id = 75; id <= 78; id++)
		ev(ring_b, 6, WEFT_EV_WAKE, id, 0,
		   WEFT_WAKE_TASK | WEFT_WAKE_BY_VAL);
	ev(ring_b, 6, WEFT_EV_WAKER_DROP, 77, 0, 0);
	ev(ring_b, 6, WEFT_EV_WAKER_DROP, 78, 0, 0);
	for (uint64_t id = 75; id <= 78; id++)
		poll_pending(ring_a, 7, 8, id, 0);
	passes_at(10);
	passes_at(10 + later);
	passes_at(10 + 2 * later);
	for (uint64_t id = 75; id <= 78; id++) {
		t = task(id);
		assert_int_equal(t.state, WEFT_TASK_IDLE);
		assert_int_equal(t.polls, 2);
		assert_int_equal(t.waker_clones, 2);
		assert_int_equal(t.waker_drops, id <= 76 ? 0 : 1);
		assert_int_equal(t.wakes, 1);
		assert_int_equal(lost_warnings(id), id <= 76 ? 0 : 1);
	}
}

/*
 * Yields (polls that end woken by themselves), each with a clone: the
 * collector's fast path for yields (poll_fast()) leaves them to
 * on_poll(), which counts the clones.
 */
static void test_collector_wakers_yields(void **state)
{
	weft_probe_task_t t;

	(void)state;
	ev(ring_a, 1, WEFT_EV_SPAWN, 79, 0, 0);
	for (unsigned i = 0; i < 40; i++)
		ev(ring_a, 3 + 2 * i, WEFT_EV_POLL, 79, TICK,
		   WEFT_POLL_YIELDED | 1u << WEFT_POLL_CLONES_SHIFT);
	passes_at(100);
	t = task(79);
	assert_int_equal(t.polls, 40);
	assert_int_equal(t.self_wakes, 40);
	assert_int_equal(t.waker_clones, 40);
	assert_int_equal(t.waker_drops, 0);
}

/*
 * Tasks whose SPAWN is read a pass after their first POLL (its ring, a
 * third, read early: the SPAWN case in collector_events.c), the POLL
 * making their record.  A drop or a wake by value of a clone made in
 * that poll, on another thread, comes before the record: held for it
 * (weft__collector_early_waker()), not lost.  81 cloned once in its POLL,
 * dropped; 82 the same in the old form (a WAKER_CLONE event, before the
 * record too); 83 cloned once, woken by value (a joiner's wake); 84
 * cloned twice, one dropped, one left.  81-83 have no waker left and are
 * warned lost; 84 is not.
 */
static void test_collector_wakers_spawn_late(void **state)
{
	unsigned later = ms_ticks(1200);
	ring_entry_t *ring_c;
	weft_probe_task_t t;

	(void)state;
	pthread_mutex_lock(&p->lock);
	ring_c = ring_add(2);
	pthread_mutex_unlock(&p->lock);
	ev(ring_a, 2, WEFT_EV_WAKER_CLONE, 82, 0, 0);
	ev(ring_b, 5, WEFT_EV_WAKER_DROP, 81, 0, 0);
	ev(ring_b, 5, WEFT_EV_WAKER_DROP, 82, 0, 0);
	ev(ring_b, 5, WEFT_EV_WAKE, 83, 0, WEFT_WAKE_TASK | WEFT_WAKE_BY_VAL);
	ev(ring_b, 5, WEFT_EV_WAKER_DROP, 84, 0, 0);
	poll_pending(ring_a, 2, 10, 81, 1);
	poll_pending(ring_a, 2, 10, 82, 0);
	poll_pending(ring_a, 2, 10, 83, 1);
	poll_pending(ring_a, 2, 10, 84, 2);
	passes_at(11);
	for (uint64_t id = 81; id <= 84; id++)
		ev(ring_c, 1, WEFT_EV_SPAWN, id, 0, 0);
	passes_at(12);
	passes_at(12 + later);
	passes_at(12 + 2 * later);
	for (uint64_t id = 81; id <= 84; id++) {
		t = task(id);
		assert_int_equal(t.state, WEFT_TASK_IDLE);
		assert_int_equal(t.waker_clones, id == 84 ? 2 : 1);
		assert_int_equal(t.waker_drops, id == 83 ? 0 : 1);
		assert_int_equal(lost_warnings(id), id == 84 ? 0 : 1);
	}
}

/*
 * An early count lost: 85's clone (a WAKER_CLONE from another thread,
 * before its record) is held, then its slot taken by a drop of 149 (same
 * low bits) while young.  85's POLL makes its record with none of it:
 * 85, which holds that clone, must not be warned lost (its waker count
 * is not trusted, wakers_unsure).
 */
static void test_collector_wakers_early_lost(void **state)
{
	unsigned later = ms_ticks(1200);
	ring_entry_t *ring_c;

	(void)state;
	pthread_mutex_lock(&p->lock);
	ring_c = ring_add(2);
	pthread_mutex_unlock(&p->lock);
	ev(ring_b, 3, WEFT_EV_WAKER_CLONE, 85, 0, 0);
	ev(ring_b, 4, WEFT_EV_WAKER_DROP, 85 + EARLY_WAKERS, 0, 0);
	poll_pending(ring_a, 2, 10, 85, 0);
	passes_at(11);
	ev(ring_c, 1, WEFT_EV_SPAWN, 85, 0, 0);
	passes_at(12);
	passes_at(12 + later);
	passes_at(12 + 2 * later);
	assert_int_equal(task(85).state, WEFT_TASK_IDLE);
	assert_int_equal(lost_warnings(85), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_collector_wakers_drop_before_poll, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_collector_wakers_wake_by_value, setup, teardown),
		cmocka_unit_test_setup_teardown(test_collector_wakers_yields,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_collector_wakers_spawn_late, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_collector_wakers_early_lost, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
