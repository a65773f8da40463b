/* SPDX-License-Identifier: MIT */
/*
 * The model's own consistency check (the tests' and the fuzzers'): the
 * index, the dirty list, the string table's counts against the tasks'
 * and resources' references, the worst polls, the bounds.
 */
#include <stdbool.h>
#include <stdint.h>

#include "console.h"
#include "model_internal.h"

#define con_empty con_model_empty

/* The longest poll kept as polls came, as a scan finds it. */
static bool worst_is_consistent(const con_model_t *m)
{
	uint64_t dur, b = con_model_tl_worst_scan(m, &dur);

	return !m->tl_last || (b == m->tl_worst && dur == m->tl_worst_dur);
}

bool con_model_is_consistent(const con_model_t *m)
{
	size_t inhash = 0;

	size_t tombs = 0;

	for (size_t i = 0; i < m->hash_cap; i++)
		if (m->hash[i] == CON_HASH_TOMB) {
			tombs++;
		} else if (m->hash[i]) {
			const con_task_t *t;

			inhash++;
			if (m->hash[i] > m->ntasks)
				return false;
			t = m->tasks[m->hash[i] - 1];
			if (con_model_task(m, t->id) != t)
				return false;
		}
	if (inhash != m->ntasks || tombs != m->hash_tombs ||
	    2 * (m->ntasks + tombs) + 2 > m->hash_cap * 2)
		return false;
	if (!con_model_fin_is_consistent(m))
		return false;
	{
		size_t finished = 0;

		for (size_t i = 0; i < m->ntasks; i++) {
			if (con_model_task(m, m->tasks[i]->id) != m->tasks[i])
				return false;
			finished += m->tasks[i]->finished_ns != 0;
		}
		if (finished != m->nfinished)
			return false;
	}
	if (!m->list_stale)
		for (size_t i = 0; i < m->nlist; i++) {
			if (con_model_task(m, m->list[i]->id) != m->list[i] ||
			    !m->list[i]->listed)
				return false;
			if (i &&
			    con_model_task_cmp(&m->list[i - 1], &m->list[i],
					       (void *)m) >= 0)
				return false;
		}
	for (size_t i = 0; i < m->ndirty; i++)
		if (!m->dirty[i]->dirty ||
		    con_model_task(m, m->dirty[i]->id) != m->dirty[i])
			return false;
	/* The string table: every reference is a task's name or file. */
	{
		uint64_t refs = 0, used = 0;
		size_t nstrs = 0;

		for (size_t i = 0; i < m->strs_cap; i++)
			for (const struct con_str_s *e = m->strs[i]; e;
			     e = e->next) {
				if (!e->refs ||
				    (e->hash & (m->strs_cap - 1)) != i)
					return false;
				refs += e->refs;
				nstrs++;
			}
		for (size_t i = 0; i < m->ntasks; i++)
			used += (m->tasks[i]->name != con_empty) +
				(m->tasks[i]->file != con_empty) +
				(m->tasks[i]->parked_file != con_empty);
		for (size_t i = 0; i < m->nres; i++)
			used += (m->res[i]->name != con_empty) +
				(m->res[i]->file != con_empty);
		if (refs != used || nstrs != m->nstrs)
			return false;
	}
	return m->nwarnings <= CON_MAX_WARNINGS &&
	       m->nworkers <= m->workers_cap &&
	       m->stolen_hi <= m->workers_cap &&
	       m->workers_cap <= CON_MAX_WORKERS &&
	       m->recent_cap <= CON_RECENT_EVENTS && worst_is_consistent(m) &&
	       (m->nrecent <= m->recent_cap ||
		m->recent_cap == CON_RECENT_EVENTS) &&
	       con_model_res_is_consistent(m);
}
