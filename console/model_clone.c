/* SPDX-License-Identifier: MIT */
/*
 * Copies of the console's model: con_model_clone() for the replay's
 * checkpoints, and con_model_bytes(), what one costs (the checkpoints'
 * budget).  The resources' part is con_model_res_clone() (model_res.c).
 */
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

/*
 * A deep copy: every pointer of @dst is its own (strings interned in its
 * own table, tasks, resources, series, rings), so either model may be
 * fed, resorted or freed without the other.  The tasks keep their order
 * and their index (deleted slots too), retention its finish order (by
 * ids: nothing to find again); the list, dirty vector and resources'
 * list point at the copy's records (found again by id); the spawn-site
 * groups and the spare tasks are not copied (the groups are marked
 * stale: con_model_groups_resort() rebuilds them from the tasks).
 */
void con_model_clone(con_model_t *dst, const con_model_t *src)
{
	*dst = *src;
	dst->target = con_xstrdup(src->target);
	dst->process = con_xstrdup(src->process);
	dst->clock = con_xstrdup(src->clock);
	con_sites_copy(&dst->sites, &src->sites);
	dst->strs = NULL;
	dst->strs_cap = dst->nstrs = 0;
	memset(dst->str_hint, 0, sizeof(dst->str_hint));
	/* Its own slabs, as many records as the tasks (no free ones). */
	dst->slabs = NULL;
	dst->nslabs = dst->slabs_cap = dst->slab_used = 0;
	dst->free_tasks = NULL;

	/* Tasks, in order, and their index (same capacity). */
	dst->tasks = src->tasks_cap ?
			     con_xcalloc(src->tasks_cap, sizeof(*dst->tasks)) :
			     NULL;
	for (size_t i = 0; i < src->ntasks; i++) {
		const con_task_t *s = src->tasks[i];
		con_task_t *t = con_model_task_alloc(dst);

		*t = *s;

		t->name = con_model_str_ref(dst, s->name);
		t->file = con_model_str_ref(dst, s->file);
		t->parked_file = con_model_str_ref(dst, s->parked_file);
		t->hist = con_xmemdup(s->hist, 2 * sizeof(*s->hist));
		t->waited = con_xmemdup(s->waited,
					WEFT_TASK_WAITED * sizeof(*s->waited));
		dst->tasks[i] = t;
	}
	/* The same indices: the index is copied as it is. */
	dst->hash = con_xmemdup(src->hash, src->hash_cap * sizeof(*src->hash));
	dst->fin = con_xmemdup(src->fin, src->fin_cap * sizeof(*src->fin));
	dst->fin_heap = con_xmemdup(src->fin_heap,
				    src->fin_heap_cap * sizeof(*src->fin_heap));
	dst->list = NULL;
	if (src->list_cap)
		dst->list = con_xcalloc(src->list_cap, sizeof(*dst->list));
	for (size_t i = 0; i < src->nlist; i++)
		dst->list[i] = con_model_task(dst, src->list[i]->id);
	dst->dirty = NULL;
	if (src->dirty_cap)
		dst->dirty = con_xcalloc(src->dirty_cap, sizeof(*dst->dirty));
	for (size_t i = 0; i < src->ndirty; i++)
		dst->dirty[i] =
			(con_task_t *)con_model_task(dst, src->dirty[i]->id);

	/* Workers and their series. */
	dst->workers = con_xmemdup(src->workers,
				   src->workers_cap * sizeof(*src->workers));
	for (uint32_t i = 0; i < src->workers_cap; i++)
		dst->workers[i].series =
			con_xmemdup(src->workers[i].series,
				    sizeof(*src->workers[i].series));

	/* Warnings, their strings. */
	dst->warnings = con_xmemdup(src->warnings,
				    src->warnings_cap * sizeof(*src->warnings));
	for (size_t i = 0; i < src->nwarnings; i++) {
		con_warning_t *w = &dst->warnings[i];

		w->task_name = w->task_name ? con_xstrdup(w->task_name) : NULL;
		w->file = w->file ? con_xstrdup(w->file) : NULL;
		w->detail = w->detail ? con_xstrdup(w->detail) : NULL;
	}

	dst->tl_top =
		con_xmemdup(src->tl_top, CON_TL_BUCKETS * sizeof(*src->tl_top));
	for (uint32_t b = 0; dst->tl_top && b < CON_TL_BUCKETS; b++)
		dst->tl_top[b] =
			con_xmemdup(src->tl_top[b], sizeof(**src->tl_top));
	dst->recent = con_xmemdup(src->recent,
				  src->recent_cap * sizeof(*src->recent));
	dst->watch =
		con_xmemdup(src->watch, CON_WATCH_EVENTS * sizeof(*src->watch));

	con_model_res_clone(dst, src);

	/* The groups: rebuilt when next read. */
	dst->groups = NULL;
	dst->group_list = NULL;
	dst->group_tmp = NULL;
	dst->ngroups = dst->ngroup_list = dst->groups_cap = 0;
	dst->groups_room = 0;
	dst->groups_stale = true;
}

/* About the heap bytes @m holds (what a clone of it costs). */
size_t con_model_bytes(const con_model_t *m)
{
	size_t n = sizeof(*m);

	n += m->tasks_cap * sizeof(*m->tasks) + m->hash_cap * sizeof(*m->hash);
	n += (m->fin_cap + m->fin_heap_cap) * sizeof(*m->fin);
	n += m->list_cap * sizeof(*m->list) + m->dirty_cap * sizeof(*m->dirty);
	n += m->nslabs * CON_TASK_SLAB * sizeof(con_task_t) +
	     m->slabs_cap * sizeof(*m->slabs);
	for (size_t i = 0; i < m->ntasks; i++) {
		const con_task_t *t = m->tasks[i];

		if (t->hist)
			n += 2 * sizeof(*t->hist);
		if (t->waited)
			n += WEFT_TASK_WAITED * sizeof(*t->waited);
	}
	n += m->strs_cap * sizeof(*m->strs) + m->nstrs * 64;
	n += m->workers_cap * sizeof(*m->workers);
	for (uint32_t i = 0; i < m->workers_cap; i++)
		if (m->workers[i].series)
			n += sizeof(*m->workers[i].series);
	n += m->warnings_cap * sizeof(*m->warnings) + m->nwarnings * 128;
	for (uint32_t b = 0; m->tl_top && b < CON_TL_BUCKETS; b++)
		n += sizeof(*m->tl_top) +
		     (m->tl_top[b] ? sizeof(**m->tl_top) : 0);
	n += m->recent_cap * sizeof(*m->recent);
	if (m->watch)
		n += CON_WATCH_EVENTS * sizeof(*m->watch);
	n += m->nres * (sizeof(con_resource_t) + 2 * sizeof(weft_hist_t));
	n += (m->res_cap + m->res_hash_cap + m->res_list_cap) * sizeof(void *);
	return n;
}
