/* SPDX-License-Identifier: MIT */
/*
 * The live tasks grouped by spawn site (console.h, con_group_t): what a
 * user looks at when the task-leak warning fires.  Rebuilt whole from the
 * model's tasks when they changed: the live ones sorted by site and
 * parked-at line, then one pass over the runs.  Memory: one pointer per
 * task the model keeps, and at most one group per live task.  Task
 * strings are interned (model.c), so a site is a (file pointer, line)
 * pair and equal names are equal pointers.
 */
#include <stdlib.h>
#include <string.h>

#include "console.h"
#include "model_internal.h"

void con_model_groups_set_sort(con_model_t *m, con_group_col_t col,
			       bool invert)
{
	if (col >= CON_GCOL_MAX)
		col = CON_GCOL_LIVE;
	m->group_sort_col = col;
	m->group_sort_invert = invert;
	m->groups_stale = true;
}

void con_model_groups_set_filter(con_model_t *m, const char *filter)
{
	snprintf(m->group_filter, sizeof(m->group_filter), "%s",
		 filter ? filter : "");
	m->groups_stale = true;
}

const char *con_group_col_label(con_group_col_t col)
{
	static const char *const labels[] = {
#define CON_X(name, label) label,
		CON_GROUP_COLUMNS(CON_X)
#undef CON_X
	};

	return col < CON_GCOL_MAX ? labels[col] : "?";
}

const char *con_group_site(const con_group_t *g, char *buf, size_t len)
{
	if (g->file[0])
		snprintf(buf, len, "%s:%u", g->file, g->line);
	else
		snprintf(buf, len, "-");
	return buf;
}

const char *con_fmt_warning_bits(uint32_t bits, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (unsigned k = 1; k < WEFT_WARN_MAX && k < 32 && n < len; k++)
		if (bits & (1u << k)) {
			int w = snprintf(buf + n, len - n, "%s%s", n ? "," : "",
					 weft_warning_kind_name(k));

			if (w < 0)
				break;
			n += (size_t)w;
		}
	if (!buf[0])
		snprintf(buf, len, "-");
	return buf;
}

/* The filter is a substring (any case) of the site (file:line), the
 * name, or the most common parked-at file. */
bool con_model_group_matches(const con_model_t *m, const con_group_t *g)
{
	char site[CON_RES_STR_MAX + 16];

	if (!m->group_filter[0])
		return true;
	con_group_site(g, site, sizeof(site));
	return con_contains_ci(site, m->group_filter) ||
	       con_contains_ci(g->name, m->group_filter) ||
	       con_contains_ci(g->parked_file, m->group_filter);
}

static int cmp_ptr(const void *a, const void *b)
{
	return (uintptr_t)a < (uintptr_t)b ? -1 : (uintptr_t)a > (uintptr_t)b;
}

/* Live tasks by site, then parked-at line (pointers: any fixed order). */
static int task_site_cmp(const void *pa, const void *pb)
{
	const con_task_t *a = *(const con_task_t *const *)pa;
	const con_task_t *b = *(const con_task_t *const *)pb;
	int c;

	if ((c = cmp_ptr(a->file, b->file)) ||
	    (c = con_cmp_u64(a->line, b->line)))
		return c;
	if ((c = cmp_ptr(a->parked_file, b->parked_file)) ||
	    (c = con_cmp_u64(a->parked_line, b->parked_line)))
		return c;
	return con_cmp_u64(a->id, b->id);
}

static int site_cmp(const con_group_t *a, const con_group_t *b)
{
	int c = strcmp(a->file, b->file);

	return c ? c : con_cmp_u64(a->line, b->line);
}

static int group_cmp(const void *pa, const void *pb, void *arg)
{
	const con_group_t *a = *(const con_group_t *const *)pa;
	const con_group_t *b = *(const con_group_t *const *)pb;
	const con_model_t *m = arg;
	int c = 0;

	switch (m->group_sort_col) {
	case CON_GCOL_NAME:
		c = strcmp(a->name, b->name);
		break;
	case CON_GCOL_IDLE:
		c = con_cmp_u64(a->idle, b->idle);
		break;
	case CON_GCOL_SCHED:
		c = con_cmp_u64(a->scheduled, b->scheduled);
		break;
	case CON_GCOL_RUNNING:
		c = con_cmp_u64(a->running, b->running);
		break;
	case CON_GCOL_LIVE:
		c = con_cmp_u64(a->live, b->live);
		break;
	case CON_GCOL_OLDEST:
		/* By age: the oldest spawned last, as the largest. */
		c = con_cmp_u64(b->oldest_spawned_ns, a->oldest_spawned_ns);
		break;
	case CON_GCOL_PARKED:
		c = strcmp(a->parked_file, b->parked_file);
		if (!c)
			c = con_cmp_u64(a->parked_line, b->parked_line);
		break;
	case CON_GCOL_WARN:
		c = con_cmp_u64((uint64_t)__builtin_popcount(a->warnings),
				(uint64_t)__builtin_popcount(b->warnings));
		break;
	case CON_GCOL_SITE:
	default:
		break;
	}
	if (!c)
		c = site_cmp(a, b);
	return m->group_sort_invert ? -c : c;
}

/* The run [i, j) of one site's tasks, sorted by parked-at line. */
static void group_fill(con_group_t *g, const con_task_t *const *t, size_t i,
		       size_t j)
{
	const con_task_t *oldest = t[i];

	memset(g, 0, sizeof(*g));
	g->file = t[i]->file;
	g->line = t[i]->line;
	g->parked_file = con_model_empty;
	for (size_t k = i; k < j; k++) {
		const con_task_t *x = t[k];

		g->live++;
		g->idle += x->state == WEFT_TASK_IDLE;
		g->scheduled += x->state == WEFT_TASK_SCHEDULED;
		g->running += x->state == WEFT_TASK_RUNNING;
		g->warnings |= x->warnings;
		if (x->spawned_ns < oldest->spawned_ns ||
		    (x->spawned_ns == oldest->spawned_ns && x->id < oldest->id))
			oldest = x;
	}
	g->name = oldest->name;
	g->oldest_spawned_ns = oldest->spawned_ns;
	g->oldest_id = oldest->id;
	g->oldest_unseen = oldest->spawn_unseen;
	/* The longest run of one parked-at line (known ones only); a tie
	 * goes to the first in file, then line order. */
	for (size_t k = i, r; k < j; k = r) {
		const con_task_t *x = t[k];
		uint32_t n;

		for (r = k + 1; r < j && t[r]->parked_file == x->parked_file &&
				t[r]->parked_line == x->parked_line;
		     r++)
			;
		n = (uint32_t)(r - k);
		if (!x->parked_line)
			continue;
		if (n > g->parked_count ||
		    (n == g->parked_count &&
		     (strcmp(x->parked_file, g->parked_file) < 0 ||
		      (!strcmp(x->parked_file, g->parked_file) &&
		       x->parked_line < g->parked_line)))) {
			g->parked_count = n;
			g->parked_file = x->parked_file;
			g->parked_line = x->parked_line;
		}
	}
}

static void groups_build(con_model_t *m)
{
	size_t n = 0;

	size_t ng = 0;

	if (m->ntasks > m->groups_cap) {
		m->groups_cap = m->ntasks + m->ntasks / 8;
		m->group_tmp = con_xreallocarray(m->group_tmp, m->groups_cap,
						 sizeof(*m->group_tmp));
	}
	for (size_t i = 0; i < m->ntasks; i++)
		if (m->tasks[i]->state != WEFT_TASK_DONE &&
		    !m->tasks[i]->finished_ns)
			m->group_tmp[n++] = m->tasks[i];
	if (n > 1)
		qsort(m->group_tmp, n, sizeof(*m->group_tmp), task_site_cmp);
	/*
	 * Room for the groups there are, not one a task: a group is 88
	 * bytes, and 1,000,000 tasks of a few sites made 88 MB of them
	 * (issue 21: at most 300 bytes a task, whatever the view).
	 */
	for (size_t i = 0; i < n; i++)
		ng += !i || m->group_tmp[i]->file != m->group_tmp[i - 1]->file ||
		      m->group_tmp[i]->line != m->group_tmp[i - 1]->line;
	if (ng > m->groups_room) {
		m->groups_room = ng + ng / 8;
		m->groups = con_xreallocarray(m->groups, m->groups_room,
					      sizeof(*m->groups));
		m->group_list = con_xreallocarray(m->group_list, m->groups_room,
						  sizeof(*m->group_list));
	}
	m->ngroups = 0;
	for (size_t i = 0, j; i < n; i = j) {
		for (j = i + 1; j < n && m->group_tmp[j]->file ==
						 m->group_tmp[i]->file &&
				m->group_tmp[j]->line == m->group_tmp[i]->line;
		     j++)
			;
		group_fill(&m->groups[m->ngroups++], m->group_tmp, i, j);
	}
}

void con_model_groups_resort(con_model_t *m)
{
	if (!m->groups_stale)
		return;
	groups_build(m);
	m->ngroup_list = 0;
	for (size_t i = 0; i < m->ngroups; i++)
		if (con_model_group_matches(m, &m->groups[i]))
			m->group_list[m->ngroup_list++] = &m->groups[i];
	if (m->ngroup_list > 1)
		qsort_r(m->group_list, m->ngroup_list, sizeof(*m->group_list),
			group_cmp, m);
	m->groups_stale = false;
}

void con_model_groups_free(con_model_t *m)
{
	free(m->groups);
	free(m->group_list);
	free(m->group_tmp);
	m->groups = NULL;
	m->group_list = NULL;
	m->group_tmp = NULL;
	m->ngroups = m->ngroup_list = m->groups_cap = m->groups_room = 0;
}
