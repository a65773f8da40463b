/* SPDX-License-Identifier: MIT */
/*
 * The model's timeline (console.h): POLL events fill a per-worker strip
 * of time in polls in CON_TL_BUCKET_NS buckets, CON_TL_BUCKETS of them,
 * the newest last; each bucket also keeps its CON_TL_TOP longest polls,
 * for the spike view (con_model_spike, con_model_worst_bucket).  The
 * strip is time in polls, not busy time: a worker is busy while it is
 * not parked (the runtime's counter, busy_ratio), which includes what
 * it does between polls.
 */
#include <stdlib.h>
#include <string.h>

#include "console.h"
#include "model_internal.h"

/*
 * Make bucket number @b the newest, clearing the ones that reappear.  The
 * first time (no bucket yet), every slot the strip reaches: polls ending
 * in bucket 0 (the clock's first 100 ms) are kept in slot 0 without
 * making a bucket newest, and a strip whose bucket number is a multiple
 * of CON_TL_BUCKETS would read them as its own (the fuzzer's input: a
 * 29 us poll of bucket 0 read as bucket 629,376's longest).
 */
static void tl_advance(con_model_t *m, uint64_t b)
{
	uint64_t from = m->tl_last ? m->tl_last + 1 : 0;

	if (b - from >= CON_TL_BUCKETS)
		from = b - (CON_TL_BUCKETS - 1);
	for (uint64_t x = from; x <= b; x++) {
		for (uint32_t i = 0; i < m->nworkers; i++) {
			con_worker_series_t *s = m->workers[i].series;

			if (s) {
				s->tl_poll_ns[x % CON_TL_BUCKETS] = 0;
				s->tl_max_poll[x % CON_TL_BUCKETS] = 0;
			}
		}
		if (m->tl_top[x % CON_TL_BUCKETS])
			memset(m->tl_top[x % CON_TL_BUCKETS], 0,
			       sizeof(**m->tl_top));
	}
	m->tl_last = b;
	if (b + 1 >= CON_TL_BUCKETS && b + 1 - CON_TL_BUCKETS > m->tl_first)
		m->tl_first = b + 1 - CON_TL_BUCKETS;
	if (!m->tl_first)
		m->tl_first = b;
	/* The longest poll's bucket left the strip: the next longest. */
	if (m->tl_worst && (m->tl_worst < m->tl_first ||
			    m->tl_worst + CON_TL_BUCKETS <= m->tl_last))
		m->tl_worst = con_model_tl_worst_scan(m, &m->tl_worst_dur);
}

/* Keep @e among the bucket's CON_TL_TOP longest polls.  The common case
 * (full, and shorter than the shortest kept) is one comparison. */
static void tl_top_add(con_tl_top_t *t, const weft_event_t *e)
{
	con_poll_t p;
	size_t min = 0;

	/* Its tail padding too: checkpoints save the bucket as it is in
	 * memory (model_save.c), and every byte written must be defined. */
	memset(&p, 0, sizeof(p));
	p.end_ns = e->ts;
	p.dur_ns = e->a1;
	p.task = e->task;
	p.worker = e->worker;

	t->polls++;
	if (t->ntop < CON_TL_TOP) {
		t->top[t->ntop++] = p;
		if (t->ntop < CON_TL_TOP)
			return;
	} else {
		if (p.dur_ns <= t->min_dur)
			return;
		for (size_t i = 1; i < CON_TL_TOP; i++)
			if (t->top[i].dur_ns < t->top[min].dur_ns)
				min = i;
		t->top[min] = p;
	}
	min = 0;
	for (size_t i = 1; i < CON_TL_TOP; i++)
		if (t->top[i].dur_ns < t->top[min].dur_ns)
			min = i;
	t->min_dur = t->top[min].dur_ns;
}

static int poll_cmp_longest(const void *a, const void *b)
{
	const con_poll_t *x = a, *y = b;

	if (x->dur_ns != y->dur_ns)
		return x->dur_ns > y->dur_ns ? -1 : 1;
	return x->end_ns < y->end_ns ? -1 : x->end_ns > y->end_ns;
}

size_t con_model_spike(const con_model_t *m, uint64_t b, con_poll_t *out,
		       uint64_t *polls)
{
	const con_tl_top_t *t;

	if (polls)
		*polls = 0;
	if (!m->tl_last || b > m->tl_last || b < m->tl_first ||
	    b + CON_TL_BUCKETS <= m->tl_last)
		return 0;
	t = m->tl_top[b % CON_TL_BUCKETS];
	if (!t)
		return 0;
	memcpy(out, t->top, t->ntop * sizeof(*out));
	qsort(out, t->ntop, sizeof(*out), poll_cmp_longest);
	if (polls)
		*polls = t->polls;
	return t->ntop;
}

/*
 * The bucket on the strip with the longest poll, the newest of equals,
 * by looking at every poll kept (CON_TL_BUCKETS x CON_TL_TOP); *@dur its
 * length.  The model keeps the answer as polls come (tl_worst: the spike
 * view asks at every redraw) and scans only when that bucket leaves the
 * strip, and con_model_is_consistent() compares the two.
 */
uint64_t con_model_tl_worst_scan(const con_model_t *m, uint64_t *dur)
{
	uint64_t best = 0, best_dur = 0;

	*dur = 0;
	if (!m->tl_last)
		return 0;
	for (uint64_t b = m->tl_last;
	     b >= m->tl_first && b > 0 && b + CON_TL_BUCKETS > m->tl_last;
	     b--) {
		const con_tl_top_t *t = m->tl_top[b % CON_TL_BUCKETS];

		for (uint32_t i = 0; t && i < t->ntop; i++)
			if (t->top[i].dur_ns > best_dur) {
				best_dur = t->top[i].dur_ns;
				best = b;
			}
	}
	*dur = best_dur;
	return best;
}

uint64_t con_model_worst_bucket(const con_model_t *m)
{
	return m->tl_last ? m->tl_worst : 0;
}

/*
 * Whole buckets only: the newest is still filling, and the strip's first
 * began before the events did (the console attached, or the recording
 * started, inside it).  Buckets after the newest with a poll, up to the
 * latest update's time, had none: a worker gone idle reads 0, not the
 * share of its last busy second.
 */
double con_model_poll_ratio(const con_model_t *m, uint32_t i)
{
	uint64_t last, from, sum = 0, n = 0;
	double r;

	if (!m->tl_last || i >= m->nworkers)
		return -1;
	last = m->now_ns / CON_TL_BUCKET_NS;
	if (last < m->tl_last)
		last = m->tl_last;
	last--; /* the newest whole bucket */
	from = last + 1 > CON_TL_POLL_WINDOW ? last + 1 - CON_TL_POLL_WINDOW :
					       0;
	if (from <= m->tl_first)
		from = m->tl_first + 1;
	if (from > last)
		return -1;
	for (uint64_t b = from; b <= last; b++, n++)
		if (b <= m->tl_last && m->workers[i].series)
			sum += m->workers[i]
				       .series->tl_poll_ns[b % CON_TL_BUCKETS];
	r = (double)sum / (double)(n * CON_TL_BUCKET_NS);
	return r > 1 ? 1 : r;
}

void con_model_tl_poll(con_model_t *m, const weft_event_t *e)
{
	uint64_t end = e->ts, dur = e->a1, start, first;
	con_worker_series_t *w;

	if (e->worker >= CON_MAX_WORKERS || dur > end)
		return;
	/* A bucket's top polls (1 KiB) made when a poll first lands in
	 * it: all 128 at once were 131 KiB, past what ASan's allocator
	 * keeps in its pools, so every model the console fuzzer made
	 * mapped, faulted in and unmapped them. */
	if (!m->tl_top)
		m->tl_top = con_xcalloc(CON_TL_BUCKETS, sizeof(*m->tl_top));
	start = end - dur;
	if (end / CON_TL_BUCKET_NS > m->tl_last)
		tl_advance(m, end / CON_TL_BUCKET_NS);
	/* Known and with its series, as a worker is at every poll but
	 * its first: no call (issue 21: two calls a poll were 2% of a live
	 * console's time at 60,000 tasks a second). */
	if (e->worker >= m->nworkers)
		con_model_workers_fit(m, e->worker + 1u);
	w = m->workers[e->worker].series;
	if (!w)
		w = con_worker_series(&m->workers[e->worker]);
	/* From the strip's oldest bucket at the earliest: a poll as long
	 * as the input says (a corrupt file's, up to 2^64 ns) spans at most
	 * CON_TL_BUCKETS of them, not every bucket since it began. */
	first = start / CON_TL_BUCKET_NS;
	if (first < m->tl_first)
		first = m->tl_first;
	if (m->tl_last >= CON_TL_BUCKETS &&
	    first <= m->tl_last - CON_TL_BUCKETS)
		first = m->tl_last - CON_TL_BUCKETS + 1;
	for (uint64_t b = first; b <= end / CON_TL_BUCKET_NS; b++) {
		uint64_t lo = b * CON_TL_BUCKET_NS;
		uint64_t hi = lo > UINT64_MAX - CON_TL_BUCKET_NS ?
				      UINT64_MAX :
				      lo + CON_TL_BUCKET_NS;
		uint64_t s = start > lo ? start : lo, x = end < hi ? end : hi;

		w->tl_poll_ns[b % CON_TL_BUCKETS] += x - s;
		if (dur > w->tl_max_poll[b % CON_TL_BUCKETS])
			w->tl_max_poll[b % CON_TL_BUCKETS] = dur;
		if (!m->tl_top[b % CON_TL_BUCKETS])
			m->tl_top[b % CON_TL_BUCKETS] =
				con_xcalloc(1, sizeof(**m->tl_top));
		tl_top_add(m->tl_top[b % CON_TL_BUCKETS], e);
		/* As con_model_tl_worst_scan() would say: the longest,
		 * the newest bucket of equals, bucket 0 never. */
		if (b && dur &&
		    (dur > m->tl_worst_dur ||
		     (dur == m->tl_worst_dur && b > m->tl_worst))) {
			m->tl_worst = b;
			m->tl_worst_dur = dur;
		}
	}
}
