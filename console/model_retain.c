/* SPDX-License-Identifier: MIT */
/*
 * The model's retention (console.h): a finished task stays for retain_ns
 * after it finished (by the traced process's clock), and at most
 * retain_max of them stay, then they go, in batches (see model.c).
 *
 * The finished tasks wait in finish order ((finished_ns, id), ties by
 * id): a sorted run, each update's finished tasks sorted and added at
 * its end (an update names them in no order, but after the previous
 * update's: fin_flush()), and a heap for any that come too far out of
 * order.  A
 * batch takes the ones that go from the front, oldest first (those too
 * old, and the oldest over retain_max: the same prefix of the finish
 * order a scan of every task found), and deletes each in place: from
 * tasks[] (the last task moved into its place), from the index (a
 * tombstone, model.c's con_model_hash_tidy()), from the list and the
 * dirty vector (one pass, only when one that goes is in them).  A batch
 * costs what it forgets, where it cost a scan of every task, a selection
 * over the finished ones and a rebuild of the whole index (issue 21:
 * 30% of the console's time at 30,000 tasks a second).
 *
 * An entry is not removed when its task changes (a peer may send a task
 * unfinished again, or finished at another time): it is stale, and
 * goes when it comes first, or in a compaction once the entries
 * are over twice the finished tasks (memory: 16 bytes a finished task,
 * at most twice over).
 */
#include <stdlib.h>
#include <string.h>

#include "console.h"
#include "model_internal.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static bool fin_less(const con_fin_t *a, const con_fin_t *b)
{
	return a->at < b->at || (a->at == b->at && a->id < b->id);
}

static void heap_up(con_fin_t *h, size_t i)
{
	con_fin_t e = h[i];

	while (i && fin_less(&e, &h[(i - 1) / 2])) {
		h[i] = h[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h[i] = e;
}

static void heap_down(con_fin_t *h, size_t n, size_t i)
{
	con_fin_t e = h[i];

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= n)
			break;
		if (c + 1 < n && fin_less(&h[c + 1], &h[c]))
			c++;
		if (!fin_less(&h[c], &e))
			break;
		h[i] = h[c];
		i = c;
	}
	h[i] = e;
}

static size_t fin_count(const con_model_t *m)
{
	return m->fin_pend - m->fin_lo + m->nfin_heap;
}

/* The first entry (the smallest), NULL when none. */
static const con_fin_t *fin_first(const con_model_t *m)
{
	const con_fin_t *a = m->fin_lo < m->fin_hi ? &m->fin[m->fin_lo] : NULL;
	const con_fin_t *b = m->nfin_heap ? &m->fin_heap[0] : NULL;

	if (!a || (b && fin_less(b, a)))
		return b;
	return a;
}

/* The first entry out (there is one). */
static void fin_pop(con_model_t *m)
{
	if (m->fin_lo < m->fin_hi &&
	    (!m->nfin_heap || !fin_less(&m->fin_heap[0], &m->fin[m->fin_lo]))) {
		m->fin_lo++;
		return;
	}
	m->fin_heap[0] = m->fin_heap[--m->nfin_heap];
	if (m->nfin_heap)
		heap_down(m->fin_heap, m->nfin_heap, 0);
}

/* The task entry @e stands for; NULL when stale. */
static con_task_t *fin_task(const con_model_t *m, const con_fin_t *e)
{
	con_task_t *t = (con_task_t *)con_model_task(m, e->id);

	return t && t->finished_ns == e->at ? t : NULL;
}

/* Keep of @h's @n entries those not stale and not seen (a task's second
 * entry: finished, unfinished, finished again at the same time), in
 * their order, their tasks marked seen (doomed); returns how many. */
static size_t fin_filter(con_model_t *m, con_fin_t *h, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		con_task_t *t = fin_task(m, &h[i]);

		if (t && !t->doomed) {
			t->doomed = true;
			h[k++] = h[i];
		}
	}
	return k;
}

static void fin_unmark(con_model_t *m, const con_fin_t *h, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fin_task(m, &h[i])->doomed = false;
}

/* A fresh array of @cap entries holding @n from @h (freed). */
static con_fin_t *fin_move(con_fin_t *h, size_t n, size_t cap)
{
	con_fin_t *to = con_xreallocarray(NULL, cap, sizeof(*to));

	if (n)
		memcpy(to, h, n * sizeof(*to));
	free(h);
	return to;
}

/* Stale entries out, the run and the pending ones slid to the start
 * (each keeping its order), the room halved when it is four times what
 * is left. */
static void fin_compact(con_model_t *m)
{
	size_t n, np, nh;

	if (!m->fin)
		return; /* nothing in the heap either: only a flush fills it */
	n = fin_filter(m, m->fin + m->fin_lo, m->fin_hi - m->fin_lo);
	np = fin_filter(m, m->fin + m->fin_hi, m->fin_pend - m->fin_hi);
	memmove(m->fin, m->fin + m->fin_lo, n * sizeof(*m->fin));
	memmove(m->fin + n, m->fin + m->fin_hi, np * sizeof(*m->fin));
	m->fin_lo = 0;
	m->fin_hi = n;
	m->fin_pend = n + np;
	nh = fin_filter(m, m->fin_heap, m->nfin_heap);
	fin_unmark(m, m->fin, n + np);
	fin_unmark(m, m->fin_heap, nh);
	m->nfin_heap = nh;
	for (size_t i = nh / 2; i-- > 0;)
		heap_down(m->fin_heap, nh, i);
	if (m->fin_cap > 1024 && 4 * (n + np) < m->fin_cap) {
		m->fin_cap /= 2;
		m->fin = fin_move(m->fin, n + np, m->fin_cap);
	}
	if (m->fin_heap_cap > 1024 && 4 * nh < m->fin_heap_cap) {
		m->fin_heap_cap /= 2;
		m->fin_heap = fin_move(m->fin_heap, nh, m->fin_heap_cap);
	}
}

void con_model_fin_push(con_model_t *m, uint64_t at, uint64_t id)
{
	if (fin_count(m) >= 2 * m->nfinished + 1024)
		fin_compact(m);
	if (m->fin_pend == m->fin_cap) {
		size_t n = m->fin_pend - m->fin_lo;

		/* Slid down when a quarter is free at the start (each entry
		 * moves once per cap / 4 taken); else grown. */
		if (m->fin_lo && m->fin_lo >= m->fin_cap / 4) {
			memmove(m->fin, m->fin + m->fin_lo,
				n * sizeof(*m->fin));
		} else {
			con_fin_t *to;

			m->fin_cap = m->fin_cap ? 2 * m->fin_cap : 256;
			to = con_xreallocarray(NULL, m->fin_cap, sizeof(*to));
			if (n)
				memcpy(to, m->fin + m->fin_lo, n * sizeof(*to));
			free(m->fin);
			m->fin = to;
		}
		m->fin_hi -= m->fin_lo;
		m->fin_pend = n;
		m->fin_lo = 0;
	}
	m->fin[m->fin_pend++] = (con_fin_t){ .at = at, .id = id };
}

static int cmp_fin(const void *a, const void *b)
{
	const con_fin_t *x = a, *y = b;

	return fin_less(x, y) ? -1 : fin_less(y, x);
}

/*
 * @p's @k entries in order: by finish time, a byte at a time from the
 * lowest (LSD radix: stable), over the bytes in which they differ from
 * the earliest (four for an update's 400 ms); qsort()'s merge sort cost
 * 8% of the console's instructions.  Ties (the same nanosecond) are put
 * in id order by qsort() over the result, when there are any.
 */
static void fin_sort(con_fin_t *p, size_t k)
{
	uint64_t lo = p[0].at, hi = p[0].at;
	con_fin_t *a = p, *b, *tmp;
	bool ties = false;

	if (k < 32) {
		qsort(p, k, sizeof(*p), cmp_fin);
		return;
	}
	for (size_t i = 1; i < k; i++) {
		if (p[i].at < lo)
			lo = p[i].at;
		if (p[i].at > hi)
			hi = p[i].at;
	}
	b = tmp = con_xreallocarray(NULL, k, sizeof(*tmp));
	for (unsigned shift = 0; shift < 64 && (hi - lo) >> shift; shift += 8) {
		size_t count[256] = { 0 }, at = 0;
		con_fin_t *t;

		for (size_t i = 0; i < k; i++)
			count[((a[i].at - lo) >> shift) & 255]++;
		for (unsigned d = 0; d < 256; d++) {
			size_t c = count[d];

			count[d] = at;
			at += c;
		}
		for (size_t i = 0; i < k; i++)
			b[count[((a[i].at - lo) >> shift) & 255]++] = a[i];
		t = a;
		a = b;
		b = t;
	}
	if (a != p)
		memcpy(p, a, k * sizeof(*p));
	free(tmp);
	for (size_t i = 1; i < k && !ties; i++)
		ties = p[i].at == p[i - 1].at;
	if (ties)
		qsort(p, k, sizeof(*p), cmp_fin);
}

static void heap_push(con_model_t *m, const con_fin_t *e)
{
	if (m->nfin_heap == m->fin_heap_cap) {
		m->fin_heap_cap = m->fin_heap_cap ? 2 * m->fin_heap_cap : 256;
		m->fin_heap = con_xreallocarray(m->fin_heap, m->fin_heap_cap,
						sizeof(*m->fin_heap));
	}
	m->fin_heap[m->nfin_heap] = *e;
	heap_up(m->fin_heap, m->nfin_heap++);
}

/*
 * The pending entries (an update's finished tasks, in the order the
 * update names them: not their finish order, the server lists them as
 * its table holds them) sorted and put in the run: after it when they
 * all finished after its last (the common case: an update's tasks
 * finished after the previous update's), merged with the part of the run
 * they overlap when that part is short; else those before the run's
 * last go into the heap, so that a peer sending them backwards costs
 * O(log n) each, not a merge with the whole run.
 */
static void fin_flush(con_model_t *m)
{
	size_t k = m->fin_pend - m->fin_hi, lo, hi, s;
	con_fin_t *p, *tmp;

	if (!k)
		return;
	p = m->fin + m->fin_hi;
	fin_sort(p, k);
	if (m->fin_lo == m->fin_hi ||
	    !fin_less(&p[0], &m->fin[m->fin_hi - 1])) {
		m->fin_hi = m->fin_pend;
		return;
	}
	/* The run's first entry after p[0]: [lo, fin_hi) overlaps. */
	lo = m->fin_lo;
	hi = m->fin_hi;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (fin_less(&p[0], &m->fin[mid]))
			hi = mid;
		else
			lo = mid + 1;
	}
	s = m->fin_hi - lo;
	if (s > 2 * k + 64) {
		size_t j = 0;

		while (j < k && fin_less(&p[j], &m->fin[m->fin_hi - 1]))
			heap_push(m, &p[j++]);
		memmove(p, p + j, (k - j) * sizeof(*p));
		m->fin_hi += k - j;
		m->fin_pend = m->fin_hi;
		return;
	}
	/* Merged forward into [lo, fin_pend): the overlap copied out
	 * first, so a write never passes the pending entry it reads. */
	tmp = con_xreallocarray(NULL, s, sizeof(*tmp));
	memcpy(tmp, m->fin + lo, s * sizeof(*tmp));
	for (size_t i = 0, j = 0, w = lo; i < s || j < k; w++)
		if (j == k || (i < s && !fin_less(&p[j], &tmp[i])))
			m->fin[w] = tmp[i++];
		else
			m->fin[w] = p[j++];
	free(tmp);
	m->fin_hi = m->fin_pend;
}

bool con_model_fin_is_consistent(const con_model_t *m)
{
	uint64_t *ids;
	size_t n = 0, found = 0;

	if (m->fin_lo > m->fin_hi || m->fin_hi > m->fin_pend ||
	    m->fin_pend > m->fin_cap || m->nfin_heap > m->fin_heap_cap)
		return false;
	for (size_t i = m->fin_lo + 1; i < m->fin_hi; i++)
		if (fin_less(&m->fin[i], &m->fin[i - 1]))
			return false;
	for (size_t i = 1; i < m->nfin_heap; i++)
		if (fin_less(&m->fin_heap[i], &m->fin_heap[(i - 1) / 2]))
			return false;
	/* Every finished task kept has an entry (one at least). */
	ids = con_xcalloc(fin_count(m) + 1, sizeof(*ids));
	for (size_t i = m->fin_lo; i < m->fin_pend + m->nfin_heap; i++) {
		const con_fin_t *e = i < m->fin_pend ?
					     &m->fin[i] :
					     &m->fin_heap[i - m->fin_pend];
		const con_task_t *t = fin_task(m, e);

		if (t)
			ids[n++] = t->id;
	}
	qsort(ids, n, sizeof(*ids), cmp_u64);
	for (size_t i = 0; i < n; i++)
		found += !i || ids[i] != ids[i - 1];
	free(ids);
	return found == m->nfinished;
}

/* Out of tasks[] and the index, and freed: @t's place taken by the last
 * task (the order of tasks[] means nothing). */
static void task_delete(con_model_t *m, con_task_t *t)
{
	size_t j = con_model_hash_slot(m, t->id), i = m->hash[j] - 1;
	size_t last = m->ntasks - 1;

	m->hash[j] = CON_HASH_TOMB;
	m->hash_tombs++;
	if (i != last) {
		size_t k = con_model_hash_slot(m, m->tasks[last]->id);

		m->tasks[i] = m->tasks[last];
		m->hash[k] = (uint32_t)i + 1;
	}
	m->ntasks--;
	con_model_task_free(m, t);
}

void con_model_retain(con_model_t *m)
{
	con_task_t **gone = NULL;
	size_t excess = 0, ngone = 0, cap = 0, kept = 0;
	bool by_age, listed = false, dirty = false;

	/* The oldest finished task kept: the first entry, once the stale
	 * ones before it are off. */
	fin_flush(m);
	while (fin_count(m) && !fin_task(m, fin_first(m)))
		fin_pop(m);
	m->oldest_finished_ns = fin_count(m) ? fin_first(m)->at : 0;
	/* Nothing finished, or nothing finished long enough ago: nothing
	 * to do.  Due means an eighth of retain_ns late, so that steady
	 * churn brings a batch every retain_ns / 8, not one per update.
	 * Likewise for the count: an eighth of retain_max over (a process
	 * finishing 200,000 tasks a second would keep 1.2 million for six
	 * seconds). */
	by_age = m->oldest_finished_ns && m->now_ns > m->oldest_finished_ns &&
		 m->now_ns - m->oldest_finished_ns >
			 m->retain_ns + m->retain_ns / 8;
	if (m->retain_max && m->nfinished > m->retain_max + m->retain_max / 8)
		excess = m->nfinished - m->retain_max;
	if (!by_age && !excess)
		return;
	/* Too old, or among the oldest over the count: a prefix of the
	 * finish order (too old is finished before now - retain_ns). */
	while (fin_count(m)) {
		const con_fin_t *e;
		con_task_t *t;

		/* The run's next ones fetched ahead: each is a lookup in a
		 * cold index, tasks[] and record.  Far enough ahead that the
		 * record is in when its finish time is read (at 8, 4 and 2
		 * ahead, that read was half of this function's time). */
		for (int s = 0; s < 3; s++)
			if (m->fin_lo + (32u >> s) < m->fin_hi)
				con_model_task_prefetch(
					m, m->fin[m->fin_lo + (32u >> s)].id,
					s);
		e = fin_first(m);
		t = fin_task(m, e);

		if (t && !t->doomed) {
			if (!(m->now_ns > e->at &&
			      m->now_ns - e->at > m->retain_ns) &&
			    ngone >= excess)
				break;
			if (ngone == cap) {
				cap = cap ? 2 * cap : 1024;
				gone = con_xreallocarray(gone, cap,
							 sizeof(*gone));
			}
			t->doomed = true;
			gone[ngone++] = t;
			listed |= t->listed;
			dirty |= t->dirty;
		}
		fin_pop(m);
	}
	while (fin_count(m) && !fin_task(m, fin_first(m)))
		fin_pop(m);
	m->oldest_finished_ns = fin_count(m) ? fin_first(m)->at : 0;
	if (!ngone)
		return;
	m->nfinished -= ngone;
	m->groups_stale = true;
	/* Out of the list and the dirty vector first: they point at it. */
	if (listed) {
		for (size_t i = 0; i < m->nlist; i++)
			if (!m->list[i]->doomed)
				m->list[kept++] = m->list[i];
		m->nlist = kept;
	}
	if (dirty) {
		kept = 0;
		for (size_t i = 0; i < m->ndirty; i++)
			if (!m->dirty[i]->doomed)
				m->dirty[kept++] = m->dirty[i];
		m->ndirty = kept;
	}
	for (size_t i = 0; i < ngone; i++) {
		/*
		 * Fetched ahead, as the selection fetches: the records gone
		 * (2.5 MiB for a batch of 12,500, out of the cache since it
		 * picked them) and the last tasks, which take their places,
		 * then the index slots of both.  Each was a miss in turn:
		 * two thirds of this function's time replaying a trace of
		 * 60,000 tasks a second.  The last task at step i + d is
		 * about tasks[ntasks - 1 - d]: a guess, only a prefetch.
		 */
		if (i + 16 < ngone)
			__builtin_prefetch(gone[i + 16], 1);
		if (m->ntasks > 16)
			__builtin_prefetch(m->tasks[m->ntasks - 17]);
		if (i + 8 < ngone)
			con_model_task_prefetch(m, gone[i + 8]->id, 0);
		if (m->ntasks > 8)
			con_model_task_prefetch(m, m->tasks[m->ntasks - 9]->id,
						0);
		task_delete(m, gone[i]);
	}
	free(gone);
	con_model_hash_tidy(m);
}
