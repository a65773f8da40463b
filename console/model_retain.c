/* SPDX-License-Identifier: MIT */
/*
 * The model's retention (console.h): a finished task stays for retain_ns
 * after it finished (by the traced process's clock), and at most
 * retain_max of them stay, then they go, in batches (see model.c).
 */
#include <stdlib.h>
#include <string.h>

#include "console.h"
#include "model_internal.h"

static int cmp_finished(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * The @k-th smallest of @a (0-based): a quickselect, O(n) on average, the
 * array reordered.  Median of three for the pivot: finish times come
 * nearly sorted (tasks are named in the order they finish).  Past twice
 * log2(n) rounds (an input made to defeat the pivot: quadratic, 262 ms
 * at 112,500 against 1 ms), the rest is sorted instead.
 */
static uint64_t select_kth(uint64_t *a, size_t n, size_t k)
{
	size_t lo = 0, hi = n - 1, rounds = 0, limit = 8;

	for (size_t m = n; m > 1; m >>= 1)
		limit += 2;
	while (lo < hi) {
		if (++rounds > limit) {
			qsort(a + lo, hi - lo + 1, sizeof(*a), cmp_finished);
			break;
		}
		size_t mid = lo + (hi - lo) / 2, i = lo, j = hi;
		uint64_t x = a[lo], y = a[mid], z = a[hi], pivot, t;

		pivot = x < y ? (y < z ? y : (x < z ? z : x)) :
				(x < z ? x : (y < z ? z : y));
		/* Hoare partition: [lo, j] <= pivot <= [i, hi]. */
		for (;;) {
			while (a[i] < pivot)
				i++;
			while (a[j] > pivot)
				j--;
			if (i >= j)
				break;
			t = a[i];
			a[i] = a[j];
			a[j] = t;
			i++;
			j--;
		}
		if (k <= j)
			hi = j;
		else
			lo = j + 1;
	}
	return a[k];
}

/*
 * The finish time at and before which the oldest @excess finished tasks
 * lie, and in *@ties how many of them finished at it (the others, before
 * it): the scan is due only once an eighth of retain_max is over, so it
 * comes every retain_max / 8 finishes, and costs a pass over the tasks.
 */
static uint64_t finished_cut(const con_model_t *m, size_t excess, size_t *ties)
{
	uint64_t *at = malloc(m->nfinished * sizeof(*at)), cut;
	size_t n = 0, before = 0;

	*ties = 0;
	if (!at)
		return 0;
	for (size_t i = 0; i < m->ntasks && n < m->nfinished; i++)
		if (m->tasks[i]->finished_ns)
			at[n++] = m->tasks[i]->finished_ns;
	if (excess > n)
		excess = n;
	cut = excess ? select_kth(at, n, excess - 1) : 0;
	for (size_t i = 0; cut && i < n; i++)
		before += at[i] < cut;
	*ties = excess - before;
	free(at);
	return cut;
}

void con_model_retain(con_model_t *m)
{
	uint64_t oldest = 0, cut = 0;
	size_t kept = 0, doomed = 0, ties = 0;
	bool by_age;

	/* Nothing finished, or nothing finished long enough ago: no scan
	 * (a big process has 100,000 tasks and an update every 20 ms).
	 * Due means an eighth of retain_ns late, so that steady churn
	 * brings a scan every retain_ns / 8, not one per update.  Likewise
	 * for the count: an eighth of retain_max over (a process finishing
	 * 200,000 tasks a second would keep 1.2 million for six seconds). */
	by_age = m->oldest_finished_ns && m->now_ns > m->oldest_finished_ns &&
		 m->now_ns - m->oldest_finished_ns >
			 m->retain_ns + m->retain_ns / 8;
	if (m->retain_max && m->nfinished > m->retain_max + m->retain_max / 8) {
		cut = finished_cut(m, m->nfinished - m->retain_max, &ties);
	}
	if (!by_age && !cut)
		return;
	for (size_t i = 0; i < m->ntasks; i++) {
		con_task_t *t = m->tasks[i];

		if (!t->finished_ns)
			continue;
		/* Too old, or among the oldest over the count: those that
		 * finished before the cut, and as many at it as make up the
		 * number. */
		if ((m->now_ns > t->finished_ns &&
		     m->now_ns - t->finished_ns > m->retain_ns) ||
		    t->finished_ns < cut ||
		    (t->finished_ns == cut && ties && ties--)) {
			t->doomed = true;
			doomed++;
		} else if (!oldest || t->finished_ns < oldest) {
			oldest = t->finished_ns;
		}
	}
	m->nfinished -= doomed;
	m->oldest_finished_ns = oldest;
	if (!doomed)
		return;
	m->groups_stale = true;
	/* Out of the list and the dirty vector first: they point at it. */
	for (size_t i = 0; i < m->nlist; i++)
		if (!m->list[i]->doomed)
			m->list[kept++] = m->list[i];
	m->nlist = kept;
	kept = 0;
	for (size_t i = 0; i < m->ndirty; i++)
		if (!m->dirty[i]->doomed)
			m->dirty[kept++] = m->dirty[i];
	m->ndirty = kept;
	kept = 0;
	for (size_t i = 0; i < m->ntasks; i++) {
		con_task_t *t = m->tasks[i];

		if (t->doomed) {
			con_model_task_free(m, t);
			continue;
		}
		m->tasks[kept++] = t;
	}
	m->ntasks = kept;
	/* Rebuilt, not unlinked one by one: the ids are dense, so the
	 * table holds long runs, and a backward-shift deletion walks to the
	 * end of its run (quadratic over a batch of thousands). */
	con_model_hash_rebuild(m);
}
