/* SPDX-License-Identifier: MIT */
/*
 * A set of durations (or counts) for percentiles (trace_tool.h): each
 * value kept, for exact ranks, up to TT_DURS_EXACT; past that only a
 * log-linear histogram of 64 steps a power of two (within 1.6 %), so
 * that memory stays bounded on any file.  The exact values' array grows
 * as filled, so a set of a few values costs a few values.
 */
#include <stdlib.h>
#include <string.h>

#include "trace_tool.h"

static unsigned dur_bucket(uint64_t v)
{
	unsigned e;

	if (v < (1u << TT_DURS_SUB_BITS))
		return (unsigned)v;
	e = 63 - (unsigned)__builtin_clzll(v); /* >= SUB_BITS */
	return ((e - TT_DURS_SUB_BITS + 1) << TT_DURS_SUB_BITS) |
	       (unsigned)((v >> (e - TT_DURS_SUB_BITS)) &
			  ((1u << TT_DURS_SUB_BITS) - 1));
}

/* The smallest value in bucket @b. */
static uint64_t dur_bucket_low(unsigned b)
{
	unsigned e = (b >> TT_DURS_SUB_BITS) + TT_DURS_SUB_BITS - 1;

	if (b < (1u << TT_DURS_SUB_BITS))
		return b;
	return (1ull << e) | ((uint64_t)(b & ((1u << TT_DURS_SUB_BITS) - 1))
			      << (e - TT_DURS_SUB_BITS));
}

static void u64_swap(uint64_t *a, uint64_t *b)
{
	uint64_t t = *a;

	*a = *b;
	*b = t;
}

/*
 * Puts the value of rank @k (0-based) of v[0..n) at v[k], the smaller
 * ones before it and the larger after: quickselect with a three-way
 * partition (runs of equal durations are common), median-of-three
 * pivots, O(n) on average (a sort of millions of polls took half the
 * verb's time).
 */
static void u64_select(uint64_t *v, size_t n, size_t k)
{
	ptrdiff_t lo = 0, hi = (ptrdiff_t)n - 1, want = (ptrdiff_t)k;

	while (lo < hi) {
		ptrdiff_t lt = lo, i = lo, gt = hi, mid = lo + (hi - lo) / 2;
		uint64_t a = v[lo], b = v[mid], c = v[hi], pivot;

		pivot = a < b ? (b < c ? b : (a < c ? c : a)) :
				(a < c ? a : (b < c ? c : b));
		/* v[lo, lt) < pivot, v[lt, i) == pivot, v(gt, hi] > pivot. */
		while (i <= gt) {
			if (v[i] < pivot)
				u64_swap(&v[lt++], &v[i++]);
			else if (v[i] > pivot)
				u64_swap(&v[i], &v[gt--]);
			else
				i++;
		}
		if (want < lt)
			hi = lt - 1;
		else if (want > gt)
			lo = gt + 1;
		else
			return;
	}
}

/* From this size, a set's exact values are mapped at their most. */
#define DURS_BIG ((size_t)2 << 20)

static void exact_free(tt_durs_t *d)
{
	if (d->big)
		tt_big_free(d->exact, d->cap * sizeof(*d->exact));
	else
		free(d->exact);
	d->big = false;
}

void tt_durs_add(tt_durs_t *d, uint64_t v)
{
	if (!d->inexact && d->n == d->cap) {
		size_t max = d->exact_max ? d->exact_max : TT_DURS_EXACT;

		if (d->n >= max) {
			exact_free(d);
			d->exact = NULL;
			d->inexact = true;
		} else if (d->cap * 2 * sizeof(*d->exact) >= DURS_BIG) {
			/* Mapped at its most (touched only as filled):
			 * doubling it on malloc's heap copied it, each copy
			 * new pages to fault. */
			uint64_t *e = tt_big_calloc(max * sizeof(*e));

			memcpy(e, d->exact, d->n * sizeof(*e));
			free(d->exact);
			d->exact = e;
			d->cap = max;
			d->big = true;
		} else {
			d->cap = d->cap ? 2 * d->cap : 256;
			if (d->cap > max)
				d->cap = max;
			d->exact = tt_xrealloc(d->exact,
					       d->cap * sizeof(*d->exact));
		}
	}
	if (!d->inexact)
		d->exact[d->n] = v;
	d->buckets[dur_bucket(v)]++;
	if (v > d->max)
		d->max = v;
	d->sum += v;
	d->n++;
}

uint64_t tt_durs_rank(tt_durs_t *d, size_t k)
{
	uint64_t seen = 0;

	if (!d->n)
		return 0;
	if (k >= d->n)
		k = d->n - 1;
	if (!d->inexact) {
		u64_select(d->exact, d->n, k);
		return d->exact[k];
	}
	for (unsigned b = 0; b < TT_DURS_BUCKETS; b++) {
		seen += d->buckets[b];
		if (seen > k) {
			uint64_t low = dur_bucket_low(b);

			return low < d->max ? low : d->max;
		}
	}
	return d->max;
}

uint64_t tt_durs_pct(tt_durs_t *d, unsigned pct)
{
	return tt_durs_rank(d, d->n * pct / 100);
}

void tt_durs_free(tt_durs_t *d)
{
	size_t max = d->exact_max;

	exact_free(d);
	memset(d, 0, sizeof(*d));
	d->exact_max = max;
}

const char *tt_dur(char *buf, size_t len, uint64_t ns)
{
	if (!ns)
		snprintf(buf, len, "-");
	else if (ns >= 1000000000u)
		snprintf(buf, len, "%.2fs", (double)ns / 1e9);
	else if (ns >= 1000000u)
		snprintf(buf, len, "%.1fms", (double)ns / 1e6);
	else
		snprintf(buf, len, "%.1fus", (double)ns / 1e3);
	return buf;
}
