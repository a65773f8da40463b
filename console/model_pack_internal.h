/* SPDX-License-Identifier: MIT */
/*
 * The bytes of a packed model (model_pack.c) and of a saved one
 * (model_save.c): a growing buffer written with varints, and a reader
 * of them that never reads past its end (bad set instead, 0 returned).
 */
#ifndef WEFT_CONSOLE_MODEL_PACK_INTERNAL_H
#define WEFT_CONSOLE_MODEL_PACK_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "console.h"

typedef struct buf_s {
	uint8_t *p;
	size_t len, cap;
} buf_t;

static inline void buf_room(buf_t *b, size_t n)
{
	if (b->len + n <= b->cap)
		return;
	while (b->len + n > b->cap)
		b->cap = b->cap ? 2 * b->cap : 4096;
	b->p = con_xreallocarray(b->p, b->cap, 1);
}

static inline void put_var(buf_t *b, uint64_t v)
{
	buf_room(b, 10);
	while (v >= 0x80) {
		b->p[b->len++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	b->p[b->len++] = (uint8_t)v;
}

static inline void put_bytes(buf_t *b, const void *p, size_t n)
{
	buf_room(b, n);
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

typedef struct rd_s {
	const uint8_t *p, *end;
	bool bad;
} rd_t;

static inline uint64_t get_var(rd_t *r)
{
	uint64_t v = 0;

	for (unsigned shift = 0; shift < 64; shift += 7) {
		if (r->p >= r->end) {
			r->bad = true;
			return 0;
		}
		uint8_t c = *r->p++;

		v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80))
			return v;
	}
	r->bad = true;
	return 0;
}

/*
 * The fields a task packs, in order, one bit each in its mask: the
 * counters and times first (most tasks have them: a mask of two bytes),
 * each present when not zero; then the "sticky" ones (from F_STICKY on),
 * present when not the same as the previous task's (a service's tasks
 * share their name, file, line, parent and state: most are not there).
 * model_save.c's layout number counts them.
 */
enum {
	F_ID,       /* the difference from the previous task's */
	F_SPAWNED,  /* likewise */
	F_FINISHED, /* after the spawn (+1; 0: live) */
	F_POLLS,
	F_BUSY,
	F_SCHEDULED,
	F_IDLE,
	F_WAKES,
	F_MAX_POLL,
	F_WAKER_CLONES,
	F_WAKER_DROPS,
	F_SELF_WAKES,
	F_IDLE_SINCE, /* after the spawn (+1; 0: not set) */
	F_WAITING_ON,
	F_WAITING_SINCE, /* after the spawn (+1; 0: not set) */
	F_STICKY,
	F_PARENT = F_STICKY,
	F_NAME, /* numbers in the strings' table, 0: "" */
	F_FILE,
	F_PARKED_FILE,
	F_LINE,
	F_PARKED_LINE,
	F_STATE_SIZE,
	F_WARNINGS,
	F_LOCKS_HELD,
	F_STATUS, /* zigzag */
	F_LAST_WORKER,
	F_KIND,
	F_STATE,
	F_WAITING_OP,
	F_NWAITED,
	F_FLAGS,
	F_MAX
};

#endif /* WEFT_CONSOLE_MODEL_PACK_INTERNAL_H */
