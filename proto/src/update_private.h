/* SPDX-License-Identifier: MIT */
/*
 * What update.c and update_parts.c share: the field writers of an
 * Update's parts (strings, doubles, histograms), a task's or resource's
 * sizes from the size pass to the write, and the parts' encoders
 * (update_parts.c).  Private to proto/src.
 */
#ifndef WEFT_UPDATE_PRIVATE_H
#define WEFT_UPDATE_PRIVATE_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft/wire.h"
#include "wire_private.h"

/* sint32: zigzag, as 32 bits. */
static inline uint32_t zigzag32(int32_t v)
{
	return (uint32_t)v << 1 ^ (uint32_t)(v >> 31);
}

/* A double: absent when it compares equal to 0 (so -0.0 too). */
static inline size_t double_len(unsigned field, double v)
{
	return v != 0 ? tag_len(field) + 8 : 0;
}

static inline uint8_t *put_double(uint8_t *p, unsigned field, double v)
{
	uint64_t bits;

	if (v == 0)
		return p;
	memcpy(&bits, &v, sizeof(bits));
	p = put_tag(p, field, WT_I64);
	for (unsigned i = 0; i < 8; i++)
		*p++ = (uint8_t)(bits >> (8 * i));
	return p;
}

/*
 * The sizes and the writes are two codings of one message: a record
 * written longer than it was sized has run past the room reserved for
 * it.  A broken invariant, so abort (not weft_panic(): the fuzzers build
 * this file without the runtime).
 */
static inline void check_written(const char *what, const uint8_t *start,
				 const uint8_t *end, size_t sized)
{
	if ((size_t)(end - start) != sized) {
		fprintf(stderr, "weft: wire: %s sized %zu bytes, written %zu\n",
			what, sized, (size_t)(end - start));
		abort();
	}
}

/* A string (of @len bytes): absent when empty. */
static inline size_t str_len(unsigned field, size_t len)
{
	return len ? tag_len(field) + varint_len(len) + len : 0;
}

static inline uint8_t *put_str(uint8_t *p, unsigned field, const char *s,
			       size_t len)
{
	if (len) {
		p = put_tag(p, field, WT_LEN);
		p = put_varint(p, len);
		memcpy(p, s, len);
		p += len;
	}
	return p;
}

static inline size_t cstr_len(const char *s)
{
	return s ? strlen(s) : 0;
}

/* Histogram */

/*
 * The packed buckets' payload.  Every bucket under 128 (a task's
 * histogram nearly always: a count a bucket) is one byte each, found by
 * one OR over them (vectorised), not a varint length a bucket.
 */
static inline size_t buckets_payload(const weft_hist_t *h)
{
	uint32_t all = 0;
	size_t n = 0;

	for (unsigned i = 0; i < WEFT_HIST_BUCKETS; i++)
		all |= h->buckets[i];
	if (all < 0x80)
		return WEFT_HIST_BUCKETS;
	for (unsigned i = 0; i < WEFT_HIST_BUCKETS; i++)
		n += varint_len(h->buckets[i]);
	return n;
}

static inline size_t hist_len(const weft_hist_t *h)
{
	return sub_len(1, buckets_payload(h)) + uint_len(2, h->count) +
	       uint_len(3, h->sum_ns) + uint_len(4, h->max_ns) +
	       uint_len(5, h->outliers);
}

static inline uint8_t *put_hist(uint8_t *p, const weft_hist_t *h)
{
	size_t n = buckets_payload(h);

	p = put_sub(p, 1, n);
	if (n == WEFT_HIST_BUCKETS) {
		/* One byte each (buckets_payload()). */
		for (unsigned i = 0; i < WEFT_HIST_BUCKETS; i++)
			p[i] = (uint8_t)h->buckets[i];
		p += WEFT_HIST_BUCKETS;
	} else {
		for (unsigned i = 0; i < WEFT_HIST_BUCKETS; i++)
			p = put_varint(p, h->buckets[i]);
	}
	p = put_uint(p, 2, h->count);
	p = put_uint(p, 3, h->sum_ns);
	p = put_uint(p, 4, h->max_ns);
	return put_uint(p, 5, h->outliers);
}

/* A task's sizes, from the size pass to the write. */
struct task_size {
	size_t body;                     /* the Task message */
	size_t name, file, parked;       /* string lengths */
	size_t hist[2];                  /* poll_hist, sched_hist bodies */
	size_t waited[WEFT_TASK_WAITED]; /* TaskWait bodies */
	size_t memo_off; /* the body's bytes in the memo, when memo */
	bool is_new, is_finished, memo;
	bool strip; /* named by its site: no name, file, line, state_size */
};

/* update_parts.c: the resources, workers, warnings and stats of an
 * Update, each sized (its body) then written (tag and length outside). */
size_t weft__upd_resource_len(const weft_probe_resource_t *r,
			      struct task_size *s);
uint8_t *weft__upd_put_resource(uint8_t *p, const weft_probe_resource_t *r,
				const struct task_size *s);
size_t weft__upd_worker_len(const weft_probe_worker_t *w);
uint8_t *weft__upd_put_worker(uint8_t *p, const weft_probe_worker_t *w);
size_t weft__upd_warning_len(const weft_probe_warning_t *w);
uint8_t *weft__upd_put_warning(uint8_t *p, const weft_probe_warning_t *w);
size_t weft__upd_stats_len(const weft_probe_stats_t *s);
uint8_t *weft__upd_put_stats(uint8_t *p, const weft_probe_stats_t *s);

#endif
