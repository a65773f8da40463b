/* SPDX-License-Identifier: MIT */
/*
 * A hierarchical timer wheel: 6 levels of 64 slots, 1 ms per level-0 slot,
 * so level L slots span 64^L ms and the wheel looks about 2.2 years
 * ahead (a later timer is filed at the horizon and re-filed from there).  Insert and cancel are O(1): a timer is filed at the level
 * of the highest 6-bit group in which its deadline differs from the wheel's
 * current time (`elapsed`), in the slot named by that group.  Advancing
 * takes the earliest occupied slot (found through each level's occupancy
 * bitmap), moves `elapsed` up to its start and re-files its timers one
 * level down, or expires them at level 0.
 *
 * Never early: deadlines are rounded up to the next whole tick and a tick
 * expires only once the clock has passed its end (see weft__wheel_tick_*).
 *
 * The batch limit: advance hands out at most @max timers.  When it runs
 * out of room inside a slot, the rest of that slot's list stays where it
 * is (O(1), the entries' level and slot stay true for remove) and the slot
 * is remembered as `resume`, taken before any other by the next call; its
 * due timers are the earliest in the wheel, since `elapsed` has not moved
 * past them.  (Moving them one by one, as an earlier version did, cost
 * O(slot length) per call: quadratic for a slot of thousands of timers.)
 *
 * Not thread-safe by itself: the time driver guards it with its lock.
 */
#include <string.h>

#include "timer_internal.h"

#define SLOT_MASK ((uint64_t)WHEEL_SLOTS - 1)
#define MAX_TICKS (((uint64_t)1 << (6 * WHEEL_LEVELS)) - 1)
/*
 * How far ahead a timer is filed.  One top-level slot short of the full
 * range, so a timer in the next top-level round lands in a slot before
 * the current one (and is seen as wrapped), never in the current one.
 */
#define HORIZON (MAX_TICKS + 1 - ((uint64_t)1 << (6 * (WHEEL_LEVELS - 1))))

static uint64_t slot_range(unsigned level)
{
	return (uint64_t)1 << (6 * level);
}

static uint64_t level_range(unsigned level)
{
	return (uint64_t)1 << (6 * (level + 1));
}

static unsigned level_for(uint64_t elapsed, uint64_t when)
{
	uint64_t masked = (elapsed ^ when) | SLOT_MASK;
	unsigned significant;

	if (masked >= MAX_TICKS)
		masked = MAX_TICKS - 1;
	significant = 63 - (unsigned)__builtin_clzll(masked);
	return significant / 6;
}

static unsigned slot_for(uint64_t when, unsigned level)
{
	return (unsigned)((when >> (6 * level)) & SLOT_MASK);
}

void weft__wheel_init(timer_wheel_t *wh)
{
	memset(wh, 0, sizeof(*wh));
	wh->resume_level = WHEEL_LEVELS;
}

static void slot_push(timer_wheel_t *wh, unsigned level, unsigned slot,
		      weft_timer_entry_t *e)
{
	weft_timer_entry_t **head = &wh->levels[level].slots[slot];

	e->prev = NULL;
	e->next = *head;
	if (*head)
		(*head)->prev = e;
	*head = e;
	wh->levels[level].occupied |= (uint64_t)1 << slot;
	e->level = (uint8_t)level;
	e->slot = (uint8_t)slot;
}

bool weft__wheel_insert(timer_wheel_t *wh, weft_timer_entry_t *e)
{
	uint64_t when = e->when;
	unsigned level;

	if (when <= wh->elapsed)
		return false; /* already due */
	if (when - wh->elapsed > HORIZON)
		when = wh->elapsed + HORIZON; /* re-filed when reached */
	level = level_for(wh->elapsed, when);
	slot_push(wh, level, slot_for(when, level), e);
	wh->count++;
	return true;
}

void weft__wheel_remove(timer_wheel_t *wh, weft_timer_entry_t *e)
{
	wheel_level_t *lv = &wh->levels[e->level];

	if (e->prev)
		e->prev->next = e->next;
	else
		lv->slots[e->slot] = e->next;
	if (e->next)
		e->next->prev = e->prev;
	if (!lv->slots[e->slot]) {
		lv->occupied &= ~((uint64_t)1 << e->slot);
		if (wh->resume_level == e->level && wh->resume_slot == e->slot)
			wh->resume_level = WHEEL_LEVELS;
	}
	e->next = e->prev = NULL;
	wh->count--;
}

/* The start tick of the earliest occupied slot at @level, or UINT64_MAX. */
static uint64_t level_next(const timer_wheel_t *wh, unsigned level,
			   unsigned *slot_out)
{
	const wheel_level_t *lv = &wh->levels[level];
	uint64_t now = wh->elapsed;
	unsigned now_slot, zeros, slot;
	uint64_t occupied, start, deadline;

	if (!lv->occupied)
		return UINT64_MAX;
	now_slot = (unsigned)((now >> (6 * level)) & SLOT_MASK);
	/* Rotate so that bit 0 is the current slot. */
	occupied = now_slot ? (lv->occupied >> now_slot) |
				      (lv->occupied << (64 - now_slot))
			    : lv->occupied;
	zeros = (unsigned)__builtin_ctzll(occupied);
	slot = (zeros + now_slot) & SLOT_MASK;
	start = now & ~(level_range(level) - 1);
	deadline = start + slot * slot_range(level);
	if (deadline < (now & ~(slot_range(level) - 1)))
		deadline += level_range(level); /* wrapped round */
	*slot_out = slot;
	return deadline;
}

static bool resume_pending(const timer_wheel_t *wh)
{
	return wh->resume_level < WHEEL_LEVELS &&
	       (wh->levels[wh->resume_level].occupied &
		((uint64_t)1 << wh->resume_slot));
}

/*
 * The start tick of the slot to take next (its level and slot in @level
 * and @slot), or UINT64_MAX when the wheel is empty.
 */
static uint64_t next_slot(const timer_wheel_t *wh, unsigned *level,
			  unsigned *slot)
{
	/* Still due: `elapsed` never moves while it is pending. */
	if (resume_pending(wh)) {
		*level = wh->resume_level;
		*slot = wh->resume_slot;
		return wh->elapsed;
	}
	/*
	 * The lowest occupied level holds the earliest timer: timers above
	 * level L differ from `elapsed` in a higher group, so they lie past
	 * the level-L range that contains `elapsed`.
	 */
	for (*level = 0; *level < WHEEL_LEVELS; (*level)++) {
		uint64_t d = level_next(wh, *level, slot);

		if (d != UINT64_MAX)
			return d;
	}
	return UINT64_MAX;
}

uint64_t weft__wheel_next_expiration(const timer_wheel_t *wh)
{
	unsigned level, slot;
	uint64_t d = next_slot(wh, &level, &slot);

	return d < wh->elapsed ? wh->elapsed : d;
}

size_t weft__wheel_advance(timer_wheel_t *wh, uint64_t now,
			   weft_timer_entry_t **fired, size_t max)
{
	size_t n = 0;

	while (n < max) {
		unsigned level, slot;
		uint64_t deadline = next_slot(wh, &level, &slot);
		wheel_level_t *lv;
		weft_timer_entry_t *e;

		if (deadline == UINT64_MAX || deadline > now)
			break;
		if (deadline > wh->elapsed)
			wh->elapsed = deadline;

		/* Take the slot; expire or re-file each timer. */
		lv = &wh->levels[level];
		e = lv->slots[slot];
		lv->slots[slot] = NULL;
		lv->occupied &= ~((uint64_t)1 << slot);
		wh->resume_level = WHEEL_LEVELS;
		while (e) {
			weft_timer_entry_t *next = e->next;

			if (n == max) {
				/*
				 * Out of room: the rest stay in this slot (no
				 * re-filing above can have landed in it: they
				 * go to lower levels, or for the horizon to
				 * another top-level slot).
				 */
				e->prev = NULL;
				lv->slots[slot] = e;
				lv->occupied |= (uint64_t)1 << slot;
				wh->resume_level = level;
				wh->resume_slot = slot;
				break;
			}
			wh->count--;
			e->next = e->prev = NULL;
			if (e->when <= wh->elapsed)
				fired[n++] = e;
			else
				/* Later in this slot: re-file lower down. */
				weft__wheel_insert(wh, e);
			e = next;
		}
	}
	if (n < max && now > wh->elapsed)
		wh->elapsed = now;
	return n;
}
