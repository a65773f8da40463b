/* SPDX-License-Identifier: MIT */
/*
 * The hierarchical timer wheel (timer_wheel.c) on its own, no driver and
 * no threads: where insert files an entry, remove's bookkeeping, advance
 * firing in deadline order and never early, cascading from the high
 * levels, the horizon, wrap-around, the batch limit, and a randomised
 * comparison against a plain list.  Internal API; times are in ticks.
 *
 * Every test checks the wheel's structure after each step with
 * wheel_check(): list links, occupancy bits, each entry's recorded level
 * and slot, the count, and that next_expiration() is never later than the
 * earliest pending deadline (a later one would make the driver oversleep).
 */
#include <string.h>

#include "test_helpers.h"

#include "timer_internal.h"

/* Mirrors timer_wheel.c: one level-5 slot short of the full 2^36 range. */
#define LEVEL_BITS 6
#define MAX_TICKS (((uint64_t)1 << (LEVEL_BITS * WHEEL_LEVELS)) - 1)
#define HORIZON                                                                \
	(MAX_TICKS + 1 - ((uint64_t)1 << (LEVEL_BITS * (WHEEL_LEVELS - 1))))

#define TICKS_PER_SEC 1000u
#define HOUR ((uint64_t)3600 * TICKS_PER_SEC)
#define DAY (24 * HOUR)
#define YEAR (365 * DAY)

static uint64_t range_of(unsigned level)
{
	return (uint64_t)1 << (LEVEL_BITS * level);
}

/* Structure and next_expiration() against the entries still pending. */
static void wheel_check(const timer_wheel_t *wh)
{
	uint64_t min_when = UINT64_MAX, next;
	size_t n = 0;

	for (unsigned l = 0; l < WHEEL_LEVELS; l++) {
		const wheel_level_t *lv = &wh->levels[l];

		for (unsigned s = 0; s < WHEEL_SLOTS; s++) {
			const weft_timer_entry_t *prev = NULL;
			bool occupied = (lv->occupied >> s) & 1;

			assert_int_equal(occupied, lv->slots[s] != NULL);
			for (const weft_timer_entry_t *e = lv->slots[s]; e;
			     e = e->next) {
				assert_ptr_equal(e->prev, prev);
				assert_int_equal(e->level, l);
				assert_int_equal(e->slot, s);
				if (e->when < min_when)
					min_when = e->when;
				prev = e;
				n++;
			}
		}
	}
	assert_int_equal(n, wh->count);
	next = weft__wheel_next_expiration(wh);
	if (n == 0) {
		assert_true(next == UINT64_MAX);
	} else {
		assert_true(next <= min_when || next <= wh->elapsed);
		assert_true(next >= wh->elapsed);
	}
}

static void entry_init(weft_timer_entry_t *e, uint64_t when)
{
	memset(e, 0, sizeof(*e));
	e->when = when;
}

static bool is_pending(const timer_wheel_t *wh, const weft_timer_entry_t *x)
{
	const wheel_level_t *lv = &wh->levels[x->level];

	for (const weft_timer_entry_t *e = lv->slots[x->slot]; e; e = e->next)
		if (e == x)
			return true;
	return false;
}

/* Advances to @now with room for @max; returns how many fired. */
static size_t advance(timer_wheel_t *wh, uint64_t now,
		      weft_timer_entry_t **fired, size_t max)
{
	size_t n = weft__wheel_advance(wh, now, fired, max);

	for (size_t i = 0; i < n; i++) {
		/* Never early, and in deadline order. */
		assert_true(fired[i]->when <= now);
		if (i)
			assert_true(fired[i - 1]->when <= fired[i]->when);
		assert_null(fired[i]->next);
		assert_null(fired[i]->prev);
	}
	wheel_check(wh);
	return n;
}

/* ----------------------------------------------------------------- tests */

/* Where insert files an entry: the level of the highest differing group. */
static void test_timer_wheel_insert_placement(void **state)
{
	static const struct {
		uint64_t when;
		unsigned level;
		unsigned slot;
	} cases[] = {
		{ 1, 0, 1 },
		{ 63, 0, 63 },
		{ 64, 1, 1 },
		{ 4095, 1, 63 },
		{ 4096, 2, 1 },
		{ (uint64_t)1 << 18, 3, 1 },
		{ (uint64_t)1 << 24, 4, 1 },
		{ (uint64_t)1 << 30, 5, 1 },
		{ ((uint64_t)1 << 35) + 5, 5, 32 },
	};
	weft_timer_entry_t e[sizeof(cases) / sizeof(cases[0])];
	timer_wheel_t wh;

	(void)state;
	weft__wheel_init(&wh);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		entry_init(&e[i], cases[i].when);
		assert_true(weft__wheel_insert(&wh, &e[i]));
		assert_int_equal(e[i].level, cases[i].level);
		assert_int_equal(e[i].slot, cases[i].slot);
		assert_true(wh.levels[cases[i].level].occupied &
			    ((uint64_t)1 << cases[i].slot));
		assert_int_equal(wh.count, i + 1);
		wheel_check(&wh);
	}
	/* Due already (when <= elapsed): refused, nothing changes. */
	{
		weft_timer_entry_t due;

		entry_init(&due, 0);
		assert_false(weft__wheel_insert(&wh, &due));
		assert_int_equal(wh.count, sizeof(cases) / sizeof(cases[0]));
	}
	assert_int_equal(weft__wheel_next_expiration(&wh), 1);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		weft__wheel_remove(&wh, &e[i]);
	assert_int_equal(wh.count, 0);
	for (unsigned l = 0; l < WHEEL_LEVELS; l++)
		assert_int_equal(wh.levels[l].occupied, 0);
	wheel_check(&wh);
}

/* Removal keeps the slot's list and its occupancy bit exact. */
static void test_timer_wheel_remove_bookkeeping(void **state)
{
	weft_timer_entry_t e[3];
	timer_wheel_t wh;

	(void)state;
	weft__wheel_init(&wh);
	/* Three in one slot: remove the middle, the head, the tail. */
	for (int i = 0; i < 3; i++) {
		entry_init(&e[i], 10);
		assert_true(weft__wheel_insert(&wh, &e[i]));
	}
	wheel_check(&wh);
	weft__wheel_remove(&wh, &e[1]);
	wheel_check(&wh);
	assert_true(wh.levels[0].occupied & (1u << 10));
	weft__wheel_remove(&wh, &e[2]); /* the head: pushed last */
	wheel_check(&wh);
	assert_true(wh.levels[0].occupied & (1u << 10));
	weft__wheel_remove(&wh, &e[0]);
	wheel_check(&wh);
	assert_int_equal(wh.levels[0].occupied, 0);
	assert_null(e[0].next);
	assert_null(e[0].prev);
	/* Re-insertable after removal. */
	assert_true(weft__wheel_insert(&wh, &e[0]));
	assert_int_equal(wh.count, 1);
	weft__wheel_remove(&wh, &e[0]);
	wheel_check(&wh);
}

/* Removal at every level, before and after an entry cascaded down. */
static void test_timer_wheel_remove_every_level(void **state)
{
	weft_timer_entry_t e[WHEEL_LEVELS + 1], other;
	weft_timer_entry_t *fired[4];
	timer_wheel_t wh;

	(void)state;
	weft__wheel_init(&wh);
	for (unsigned l = 0; l < WHEEL_LEVELS; l++) {
		entry_init(&e[l], range_of(l) * 3 + 1);
		assert_true(weft__wheel_insert(&wh, &e[l]));
		assert_int_equal(e[l].level, l);
	}
	/* Past the horizon: filed at the top level. */
	entry_init(&e[WHEEL_LEVELS], 3 * YEAR);
	assert_true(weft__wheel_insert(&wh, &e[WHEEL_LEVELS]));
	assert_int_equal(e[WHEEL_LEVELS].level, WHEEL_LEVELS - 1);
	wheel_check(&wh);
	for (unsigned l = 0; l <= WHEEL_LEVELS; l++) {
		weft__wheel_remove(&wh, &e[l]);
		wheel_check(&wh);
	}
	assert_int_equal(wh.count, 0);

	/* An entry cascaded from level 3 to level 0, then removed. */
	entry_init(&e[0], range_of(3) * 2 + range_of(2) * 5 + 7);
	entry_init(&other, range_of(3) * 2 + 3);
	assert_true(weft__wheel_insert(&wh, &e[0]));
	assert_true(weft__wheel_insert(&wh, &other));
	assert_int_equal(e[0].level, 3);
	assert_int_equal(advance(&wh, other.when, fired, 4), 1);
	assert_ptr_equal(fired[0], &other);
	assert_true(is_pending(&wh, &e[0]));
	assert_true(e[0].level < 3);
	weft__wheel_remove(&wh, &e[0]);
	wheel_check(&wh);
	assert_int_equal(wh.count, 0);
	assert_int_equal(advance(&wh, range_of(4), fired, 4), 0);
}

/*
 * Random deadlines, advanced in random steps: each fires at the first
 * advance that reaches it, never before, in deadline order.
 */
#define ORDER_N 4096

static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

static void test_timer_wheel_fires_in_order(void **state)
{
	weft_timer_entry_t *e = calloc(ORDER_N, sizeof(*e));
	weft_timer_entry_t **fired = calloc(ORDER_N, sizeof(*fired));
	uint64_t rng = 0x1234567, now = 0, prev_now = 0, last_when = 0;
	size_t done = 0;
	timer_wheel_t wh;

	(void)state;
	assert_non_null(e);
	assert_non_null(fired);
	weft__wheel_init(&wh);
	for (size_t i = 0; i < ORDER_N; i++) {
		/* Spread over every level up to about 4 hours. */
		uint64_t span = (uint64_t)1 << (rng_next(&rng) % 24);

		entry_init(&e[i], 1 + rng_next(&rng) % span);
		assert_true(weft__wheel_insert(&wh, &e[i]));
	}
	wheel_check(&wh);
	while (done < ORDER_N) {
		size_t n;

		now += 1 +
		       rng_next(&rng) % ((uint64_t)1 << (rng_next(&rng) % 20));
		n = advance(&wh, now, fired, ORDER_N);
		for (size_t i = 0; i < n; i++) {
			/* Not late: it was not due at the previous advance. */
			assert_true(fired[i]->when > prev_now);
			assert_true(fired[i]->when >= last_when);
			last_when = fired[i]->when;
		}
		/* Nothing due is left behind. */
		for (size_t i = 0; i < ORDER_N; i++)
			if (e[i].when <= now && is_pending(&wh, &e[i]))
				fail_msg("entry %zu due at %llu left at %llu",
					 i, (unsigned long long)e[i].when,
					 (unsigned long long)now);
		done += n;
		prev_now = now;
	}
	assert_int_equal(wh.count, 0);
	free(fired);
	free(e);
}

/*
 * Deadlines hours and days ahead, reached in big jumps: they cascade down
 * from the high levels and fire exactly when the jump passes them.
 */
static void test_timer_wheel_cascade_big_jumps(void **state)
{
	const uint64_t whens[] = {
		HOUR,
		HOUR + 1,
		3 * HOUR + 59 * 60 * 1000 + 999,
		DAY,
		DAY + 1,
		7 * DAY,
		7 * DAY + 12 * HOUR,
		30 * DAY,
		200 * DAY,
	};
	enum { N = sizeof(whens) / sizeof(whens[0]) };
	/* One spare: a full @fired leaves the wheel's time behind. */
	weft_timer_entry_t e[N], *fired[N + 1];
	timer_wheel_t wh;
	uint64_t now = 0;
	size_t next = 0;

	(void)state;
	weft__wheel_init(&wh);
	for (size_t i = 0; i < N; i++) {
		entry_init(&e[i], whens[i]);
		assert_true(weft__wheel_insert(&wh, &e[i]));
		assert_true(e[i].level >= 3);
	}
	/* Jump straight to one tick before each deadline, then onto it. */
	while (next < N) {
		uint64_t target = whens[next];
		unsigned level_before = e[next].level;

		assert_int_equal(advance(&wh, target - 1, fired, N), 0);
		assert_true(is_pending(&wh, &e[next]));
		/* Cascaded down as its time came near. */
		assert_true(e[next].level <= level_before);
		assert_int_equal(weft__wheel_next_expiration(&wh), target);
		now = target;
		assert_int_equal(advance(&wh, now, fired, N), 1);
		assert_ptr_equal(fired[0], &e[next]);
		next++;
	}
	assert_int_equal(wh.count, 0);

	/* The same deadlines reached in one jump of a year: all at once. */
	weft__wheel_init(&wh);
	for (size_t i = 0; i < N; i++) {
		entry_init(&e[i], whens[i]);
		assert_true(weft__wheel_insert(&wh, &e[i]));
	}
	assert_int_equal(advance(&wh, YEAR, fired, N + 1), N);
	for (size_t i = 0; i < N; i++)
		assert_ptr_equal(fired[i], &e[i]);
	assert_int_equal(wh.elapsed, YEAR);
}

/* Deadlines past the horizon (about 2.2 years) wait at the top level. */
static void test_timer_wheel_horizon(void **state)
{
	weft_timer_entry_t far, farther, forever, *fired[4];
	timer_wheel_t wh;
	uint64_t now;

	(void)state;
	weft__wheel_init(&wh);
	entry_init(&far, 3 * YEAR);
	entry_init(&farther, 5 * YEAR + 17);
	/* weft_sleep_init(UINT64_MAX): a deadline that never comes. */
	entry_init(&forever, UINT64_MAX / 2);
	assert_true(3 * YEAR > HORIZON);
	assert_true(weft__wheel_insert(&wh, &far));
	assert_true(weft__wheel_insert(&wh, &farther));
	assert_true(weft__wheel_insert(&wh, &forever));
	wheel_check(&wh);
	assert_true(weft__wheel_next_expiration(&wh) <= HORIZON);

	/* Half-year jumps: nothing fires early, entries get re-filed. */
	for (now = YEAR / 2; now < 3 * YEAR; now += YEAR / 2)
		assert_int_equal(advance(&wh, now, fired, 4), 0);
	assert_int_equal(advance(&wh, 3 * YEAR - 1, fired, 4), 0);
	assert_int_equal(advance(&wh, 3 * YEAR, fired, 4), 1);
	assert_ptr_equal(fired[0], &far);
	assert_int_equal(advance(&wh, 5 * YEAR + 16, fired, 4), 0);
	assert_int_equal(advance(&wh, 5 * YEAR + 17, fired, 4), 1);
	assert_ptr_equal(fired[0], &farther);
	assert_int_equal(advance(&wh, 40 * YEAR, fired, 4), 0);
	assert_true(is_pending(&wh, &forever));
	weft__wheel_remove(&wh, &forever);
	wheel_check(&wh);
	assert_int_equal(wh.count, 0);
}

/*
 * Wrap-around: slot indices restart at 0 when the time crosses a level's
 * range, and at the top level, past 2^36 ticks, a later deadline sits in
 * a lower-numbered slot than the current one.
 */
static void test_timer_wheel_wrap_around(void **state)
{
	static const uint64_t offsets[] = {
		1,
		3,
		4,
		63,
		64,
		100,
		4000,
		5000,
		(uint64_t)1 << 20,
		((uint64_t)1 << 30) + 7,
		(uint64_t)1 << 33,
		HORIZON - 1,
	};
	enum { N = sizeof(offsets) / sizeof(offsets[0]) };
	static const uint64_t bases[] = {
		60,                        /* level 0 wraps */
		4090,                      /* level 1 wraps */
		((uint64_t)1 << 36) - 100, /* the top level wraps */
		((uint64_t)1 << 36) * 3 + ((uint64_t)63 << 30) + 12345,
	};
	weft_timer_entry_t e[N], *fired[N];

	(void)state;
	for (size_t b = 0; b < sizeof(bases) / sizeof(bases[0]); b++) {
		timer_wheel_t wh;
		size_t next = 0;

		weft__wheel_init(&wh);
		/* An empty wheel's time jumps to any `now`. */
		assert_int_equal(advance(&wh, bases[b], fired, N), 0);
		assert_int_equal(wh.elapsed, bases[b]);
		for (size_t i = 0; i < N; i++) {
			entry_init(&e[i], bases[b] + offsets[i]);
			assert_true(weft__wheel_insert(&wh, &e[i]));
		}
		wheel_check(&wh);
		while (next < N) {
			uint64_t when = e[next].when;

			assert_int_equal(advance(&wh, when - 1, fired, N), 0);
			assert_int_equal(advance(&wh, when, fired, N), 1);
			assert_ptr_equal(fired[0], &e[next]);
			next++;
		}
		assert_int_equal(wh.count, 0);
	}
}

/* With room for 3, advance hands out 3 and the rest on the next calls. */
static void test_timer_wheel_batch_limit(void **state)
{
	weft_timer_entry_t same[5], mixed[10], *fired[10];
	timer_wheel_t wh;
	size_t total = 0, n;
	uint64_t last = 0;

	(void)state;
	weft__wheel_init(&wh);
	for (int i = 0; i < 5; i++) {
		entry_init(&same[i], 20);
		assert_true(weft__wheel_insert(&wh, &same[i]));
	}
	assert_int_equal(advance(&wh, 25, fired, 3), 3);
	/* The wheel's time stays at the slot, so the rest are still due. */
	assert_true(wh.elapsed <= 20);
	assert_int_equal(wh.count, 2);
	assert_int_equal(advance(&wh, 25, fired, 3), 2);
	assert_int_equal(wh.count, 0);
	assert_int_equal(advance(&wh, 25, fired, 3), 0);
	assert_int_equal(wh.elapsed, 25);

	/*
	 * Ten due in different slots and levels, some cascading in the
	 * same call that runs out of room, plus one not yet due.
	 */
	weft__wheel_init(&wh);
	for (int i = 0; i < 10; i++) {
		uint64_t when =
			64 + (uint64_t)(i / 2) * 1000 + (uint64_t)(i % 2);

		entry_init(&mixed[i], i == 9 ? 100000 : when);
		assert_true(weft__wheel_insert(&wh, &mixed[i]));
	}
	while ((n = advance(&wh, 5000, fired, 3)) > 0) {
		assert_true(n <= 3);
		for (size_t i = 0; i < n; i++) {
			assert_true(fired[i]->when >= last);
			last = fired[i]->when;
		}
		total += n;
	}
	assert_int_equal(total, 9);
	assert_int_equal(wh.count, 1);
	assert_true(is_pending(&wh, &mixed[9]));
	assert_int_equal(advance(&wh, 99999, fired, 3), 0);
	assert_int_equal(advance(&wh, 100000, fired, 3), 1);
}

/*
 * A slot of thousands handed out 64 at a time: the rest stay in their slot
 * (not moved one by one, which made a big slot quadratic) and are taken
 * first next time; removing from that remainder keeps everything exact.
 */
#define BIG_N 3000

static void test_timer_wheel_batch_big_slot(void **state)
{
	weft_timer_entry_t *e = calloc(BIG_N, sizeof(*e));
	weft_timer_entry_t *fired[64];
	size_t n, total = 0, removed = 0;
	uint64_t last = 0;
	timer_wheel_t wh;

	(void)state;
	assert_non_null(e);
	weft__wheel_init(&wh);
	/* All in level-1 slot 1: half due at its start, half later in it. */
	for (size_t i = 0; i < BIG_N; i++) {
		entry_init(&e[i], i % 2 ? 64 + 1 + i % 60 : 64);
		assert_true(weft__wheel_insert(&wh, &e[i]));
		assert_int_equal(e[i].level, 1);
	}
	n = advance(&wh, 200, fired, 64);
	assert_int_equal(n, 64);
	total += n;
	/* The remainder is still in level-1 slot 1, entries untouched. */
	assert_true(wh.levels[1].occupied & 2);
	assert_int_equal(wh.elapsed, 64);
	assert_int_equal(weft__wheel_next_expiration(&wh), 64);
	assert_int_equal(e[0].level, 1);
	/* Remove a few due and not-due entries from the remainder. */
	for (size_t i = 0; i < 20; i++) {
		weft_timer_entry_t *x = &e[i]; /* the list tail: unvisited */

		assert_true(is_pending(&wh, x));
		weft__wheel_remove(&wh, x);
		removed++;
	}
	wheel_check(&wh);
	while ((n = advance(&wh, 200, fired, 64)) > 0) {
		for (size_t i = 0; i < n; i++) {
			assert_true(fired[i]->when >= last);
			last = fired[i]->when;
		}
		total += n;
	}
	assert_int_equal(total, BIG_N - removed);
	assert_int_equal(wh.count, 0);
	assert_int_equal(wh.elapsed, 200);

	/* Emptied by removal while pending: the next advance moves on. */
	weft__wheel_init(&wh);
	for (size_t i = 0; i < 100; i++) {
		entry_init(&e[i], 64);
		assert_true(weft__wheel_insert(&wh, &e[i]));
	}
	assert_int_equal(advance(&wh, 64, fired, 64), 64);
	for (size_t i = 0; i < 100; i++)
		if (is_pending(&wh, &e[i]))
			weft__wheel_remove(&wh, &e[i]);
	wheel_check(&wh);
	assert_int_equal(weft__wheel_next_expiration(&wh), UINT64_MAX);
	entry_init(&e[0], 70);
	assert_true(weft__wheel_insert(&wh, &e[0]));
	assert_int_equal(advance(&wh, 69, fired, 64), 0);
	assert_int_equal(advance(&wh, 70, fired, 64), 1);
	free(e);
}

/*
 * A random mix of inserts, removes and advances (small steps and big
 * jumps) against a plain list: the wheel fires exactly the entries the
 * list says are due.
 */
#define MODEL_N 512

static void test_timer_wheel_model(void **state)
{
	weft_timer_entry_t *e = calloc(MODEL_N, sizeof(*e));
	weft_timer_entry_t **fired = calloc(MODEL_N, sizeof(*fired));
	bool *pending = calloc(MODEL_N, sizeof(*pending));
	uint64_t rng = 0xfeedbeef, now = 0;
	timer_wheel_t wh;
	unsigned steps = scale_count(20000);

	(void)state;
	assert_non_null(e);
	assert_non_null(fired);
	assert_non_null(pending);
	weft__wheel_init(&wh);
	for (unsigned step = 0; step < steps; step++) {
		size_t i = rng_next(&rng) % MODEL_N;
		unsigned op = rng_next(&rng) % 8;

		if (op < 4 && !pending[i]) {
			uint64_t span = (uint64_t)1 << (rng_next(&rng) % 40);

			entry_init(&e[i], now + 1 + rng_next(&rng) % span);
			assert_true(weft__wheel_insert(&wh, &e[i]));
			pending[i] = true;
		} else if (op < 6 && pending[i]) {
			weft__wheel_remove(&wh, &e[i]);
			pending[i] = false;
		} else if (op >= 6) {
			size_t n, expect = 0;

			now += (op == 7) ?
				       rng_next(&rng) % ((uint64_t)1 << 34) :
				       rng_next(&rng) % 200;
			for (size_t k = 0; k < MODEL_N; k++)
				expect += pending[k] && e[k].when <= now;
			n = advance(&wh, now, fired, MODEL_N);
			assert_int_equal(n, expect);
			for (size_t k = 0; k < n; k++) {
				size_t idx = (size_t)(fired[k] - e);

				assert_true(pending[idx]);
				pending[idx] = false;
			}
		}
		if (step % 64 == 0)
			wheel_check(&wh);
	}
	for (size_t k = 0; k < MODEL_N; k++)
		if (pending[k])
			weft__wheel_remove(&wh, &e[k]);
	wheel_check(&wh);
	assert_int_equal(wh.count, 0);
	free(pending);
	free(fired);
	free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_timer_wheel_insert_placement),
		cmocka_unit_test(test_timer_wheel_remove_bookkeeping),
		cmocka_unit_test(test_timer_wheel_remove_every_level),
		cmocka_unit_test(test_timer_wheel_fires_in_order),
		cmocka_unit_test(test_timer_wheel_cascade_big_jumps),
		cmocka_unit_test(test_timer_wheel_horizon),
		cmocka_unit_test(test_timer_wheel_wrap_around),
		cmocka_unit_test(test_timer_wheel_batch_limit),
		cmocka_unit_test(test_timer_wheel_batch_big_slot),
		cmocka_unit_test(test_timer_wheel_model),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
