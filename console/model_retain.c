/* SPDX-License-Identifier: MIT */
/*
 * The model's retention (console.h): a finished task stays for retain_ns
 * after it finished (by the traced process's clock), and at most
 * retain_max of them stay, then they go, in batches (see model.c).
 *
 * The finished tasks wait in a binary min-heap by finish time (m->fin:
 * (finished_ns, id), ties by id), pushed as they finish; a batch pops
 * the ones that go, oldest first (those too old, and the oldest over
 * retain_max: the same prefix of the finish order a scan of every task
 * found), and deletes each in place: from tasks[] (the last task moved
 * into its place), from the index (a tombstone, model.c's
 * con_model_hash_tidy()), from the list and the dirty vector (one pass,
 * only when one that goes is in them).  A batch costs what it forgets,
 * O(log n) each, where it cost a scan of every task, a selection over
 * the finished ones and a rebuild of the whole index (issue 21: 30% of
 * the console's time at 30,000 tasks a second).
 *
 * An entry is not removed when its task changes (a peer may send a task
 * unfinished again, or finished at another time): it is stale, and
 * goes when it comes to the top, or in a compaction once the entries
 * are over twice the finished tasks (memory: 16 bytes a finished task,
 * at most twice over).
 */
#include <stdlib.h>
#include <string.h>

#include "console.h"
#include "model_internal.h"

static bool fin_less(const con_fin_t *a, const con_fin_t *b)
{
	return a->at < b->at || (a->at == b->at && a->id < b->id);
}

static void fin_up(con_fin_t *h, size_t i)
{
	con_fin_t e = h[i];

	while (i && fin_less(&e, &h[(i - 1) / 2])) {
		h[i] = h[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h[i] = e;
}

static void fin_down(con_fin_t *h, size_t n, size_t i)
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

static void fin_pop(con_model_t *m)
{
	m->fin[0] = m->fin[--m->nfin];
	if (m->nfin)
		fin_down(m->fin, m->nfin, 0);
}

/* The task entry @e stands for; NULL when stale. */
static con_task_t *fin_task(con_model_t *m, const con_fin_t *e)
{
	con_task_t *t = (con_task_t *)con_model_task(m, e->id);

	return t && t->finished_ns == e->at ? t : NULL;
}

/*
 * Stale entries out (and a task's second entry: finished, unfinished,
 * finished again at the same time), the rest made a heap again; the
 * room halved when it is four times what is left.
 */
static void fin_compact(con_model_t *m)
{
	size_t n = 0;

	for (size_t i = 0; i < m->nfin; i++) {
		con_task_t *t = fin_task(m, &m->fin[i]);

		if (t && !t->doomed) {
			t->doomed = true; /* seen: only here, cleared below */
			m->fin[n++] = m->fin[i];
		}
	}
	for (size_t i = 0; i < n; i++)
		fin_task(m, &m->fin[i])->doomed = false;
	m->nfin = n;
	for (size_t i = n / 2; i-- > 0;)
		fin_down(m->fin, n, i);
	if (m->fin_cap > 1024 && 4 * n < m->fin_cap) {
		m->fin_cap /= 2;
		m->fin = con_xreallocarray(m->fin, m->fin_cap, sizeof(*m->fin));
	}
}

void con_model_fin_push(con_model_t *m, uint64_t at, uint64_t id)
{
	if (m->nfin >= 2 * m->nfinished + 1024)
		fin_compact(m);
	if (m->nfin == m->fin_cap) {
		m->fin_cap = m->fin_cap ? 2 * m->fin_cap : 256;
		m->fin = con_xreallocarray(m->fin, m->fin_cap, sizeof(*m->fin));
	}
	m->fin[m->nfin] = (con_fin_t){ .at = at, .id = id };
	fin_up(m->fin, m->nfin++);
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

	/* The oldest finished task kept: the heap's top, once the stale
	 * entries above it are off. */
	while (m->nfin && !fin_task(m, &m->fin[0]))
		fin_pop(m);
	m->oldest_finished_ns = m->nfin ? m->fin[0].at : 0;
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
	while (m->nfin) {
		const con_fin_t *e = &m->fin[0];
		con_task_t *t = fin_task(m, e);

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
	while (m->nfin && !fin_task(m, &m->fin[0]))
		fin_pop(m);
	m->oldest_finished_ns = m->nfin ? m->fin[0].at : 0;
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
	for (size_t i = 0; i < ngone; i++)
		task_delete(m, gone[i]);
	free(gone);
	con_model_hash_tidy(m);
}
