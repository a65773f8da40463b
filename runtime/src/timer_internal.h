/* SPDX-License-Identifier: MIT */
/*
 * The timer wheel's structures (timer_wheel.c) and the time driver that
 * guards and drives it (time_driver.c).
 */
#ifndef WEFT_TIMER_INTERNAL_H
#define WEFT_TIMER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weft/time.h"

#define WHEEL_LEVELS 6
#define WHEEL_SLOTS 64

typedef struct wheel_level_s {
	uint64_t occupied; /* bit n: slots[n] is non-empty */
	weft_timer_entry_t *slots[WHEEL_SLOTS];
} wheel_level_t;

typedef struct timer_wheel_s {
	uint64_t elapsed; /* the wheel's current tick */
	size_t count;
	/*
	 * The due slot an advance ran out of room in, taken first by the
	 * next one; resume_level == WHEEL_LEVELS: none.
	 */
	unsigned resume_level;
	unsigned resume_slot;
	wheel_level_t levels[WHEEL_LEVELS];
} timer_wheel_t;

/* timer_wheel.c */
void weft__wheel_init(timer_wheel_t *wh);
bool weft__wheel_insert(timer_wheel_t *wh, weft_timer_entry_t *e);
void weft__wheel_remove(timer_wheel_t *wh, weft_timer_entry_t *e);
uint64_t weft__wheel_next_expiration(const timer_wheel_t *wh);
size_t weft__wheel_advance(timer_wheel_t *wh, uint64_t now,
			   weft_timer_entry_t **fired, size_t max);

#endif /* WEFT_TIMER_INTERNAL_H */
