/* SPDX-License-Identifier: MIT */
/*
 * The model's task list (console.h): the tasks that match the filter, in
 * the order of the sort column, that the Tasks view reads.  Resorting
 * takes the dirty tasks out of the list, sorts them and merges them
 * back in; a full sort only after the sort or the filter changed.
 */
#include <stdlib.h>
#include <string.h>

#include "console.h"
#include "model_internal.h"

void con_model_set_sort(con_model_t *m, con_task_col_t col, bool invert)
{
	if (col >= CON_COL_MAX)
		col = CON_COL_ID;
	m->sort_col = col;
	m->sort_invert = invert;
	m->list_stale = true;
	m->list_rebuild = true;
}

void con_model_set_filter(con_model_t *m, const char *filter)
{
	snprintf(m->filter, sizeof(m->filter), "%s", filter ? filter : "");
	m->list_stale = true;
	m->list_rebuild = true;
}

/*
 * @filter in @site ("app.c:12"), any case, not followed by a digit when
 * it ends in one: "app.c:12" is the site app.c:12 (or dir/app.c:12),
 * not app.c:120.  What the spawn-site groups' Enter filters by.
 */
static bool site_contains(const char *site, const char *filter)
{
	size_t n = strlen(filter);
	bool digit_end = n && filter[n - 1] >= '0' && filter[n - 1] <= '9';

	for (const char *p = site; *p; p++)
		if (!strncasecmp(p, filter, n) &&
		    !(digit_end && p[n] >= '0' && p[n] <= '9'))
			return true;
	return false;
}

/*
 * A task matches when the filter is a substring (any case) of its name,
 * its location (file, or file:line), where it is parked, its state's
 * name, the kind, name or file of the resource it waits on, or equals
 * its id.
 */
bool con_model_task_matches(const con_model_t *m, const con_task_t *t)
{
	char id[24];

	if (!m->filter[0])
		return true;
	snprintf(id, sizeof(id), "%llu", (unsigned long long)t->id);
	if (t->waiting_on && t->state != WEFT_TASK_DONE) {
		const con_resource_t *r = con_model_resource(m, t->waiting_on);

		if (r && (con_contains_ci(r->name, m->filter) ||
			  con_contains_ci(r->file, m->filter) ||
			  con_contains_ci(weft_resource_kind_name(r->kind),
					  m->filter)))
			return true;
	}
	if (t->file[0] && strchr(m->filter, ':')) {
		char site[CON_RES_STR_MAX + 16];

		snprintf(site, sizeof(site), "%s:%u", t->file, t->line);
		if (site_contains(site, m->filter))
			return true;
	}
	return con_contains_ci(t->name, m->filter) ||
	       con_contains_ci(t->file, m->filter) ||
	       con_contains_ci(t->parked_file, m->filter) ||
	       con_contains_ci(con_task_status_name(m, t), m->filter) ||
	       !strcmp(id, m->filter);
}

int con_model_task_cmp(const void *pa, const void *pb, void *arg)
{
	const con_task_t *a = *(const con_task_t *const *)pa;
	const con_task_t *b = *(const con_task_t *const *)pb;
	const con_model_t *m = arg;
	int c = 0;

	switch (m->sort_col) {
	case CON_COL_NAME:
		c = strcmp(a->name, b->name);
		break;
	case CON_COL_STATE:
		c = con_cmp_u64(con_task_shown_state(m, a),
				con_task_shown_state(m, b));
		break;
	case CON_COL_WORKER:
		c = con_cmp_u64(con_task_shown_worker(m, a),
				con_task_shown_worker(m, b));
		break;
	case CON_COL_POLLS:
		c = con_cmp_u64(a->polls, b->polls);
		break;
	case CON_COL_BUSY:
		c = con_cmp_u64(a->busy_ns, b->busy_ns);
		break;
	case CON_COL_SCHED:
		c = con_cmp_u64(a->scheduled_ns, b->scheduled_ns);
		break;
	case CON_COL_IDLE:
		c = con_cmp_u64(
			con_task_idle_unknown(m, a) ? UINT64_MAX :
						      con_task_idle_ns(m, a),
			con_task_idle_unknown(m, b) ? UINT64_MAX :
						      con_task_idle_ns(m, b));
		break;
	case CON_COL_WAKES:
		c = con_cmp_u64(a->wakes, b->wakes);
		break;
	case CON_COL_MAXPOLL:
		c = con_cmp_u64(a->max_poll_ns, b->max_poll_ns);
		break;
	case CON_COL_WARN:
		c = con_cmp_u64((uint64_t)__builtin_popcount(a->warnings),
				(uint64_t)__builtin_popcount(b->warnings));
		break;
	case CON_COL_PARKED:
		c = strcmp(a->parked_file, b->parked_file);
		if (!c)
			c = con_cmp_u64(a->parked_line, b->parked_line);
		break;
	case CON_COL_WAITING:
		/* Tasks waiting on one resource side by side; those waiting
		 * on nothing first. */
		c = con_cmp_u64(a->state != WEFT_TASK_DONE ? a->waiting_on : 0,
				b->state != WEFT_TASK_DONE ? b->waiting_on : 0);
		break;
	case CON_COL_LOCATION:
		c = strcmp(a->file, b->file);
		if (!c)
			c = con_cmp_u64(a->line, b->line);
		break;
	case CON_COL_ID:
	default:
		break;
	}
	if (!c)
		c = con_cmp_u64(a->id, b->id);
	return m->sort_invert ? -c : c;
}

/* Everything: filter every task, sort them all. */
static void list_rebuild(con_model_t *m)
{
	m->nlist = 0;
	for (size_t i = 0; i < m->ntasks; i++) {
		con_task_t *t = m->tasks[i];

		t->dirty = false; /* those past the vector too */
		t->listed = con_model_task_matches(m, t);
		if (t->listed)
			m->list[m->nlist++] = t;
	}
	if (m->nlist > 1)
		qsort_r(m->list, m->nlist, sizeof(*m->list), con_model_task_cmp,
			m);
}

/*
 * Only what changed: take the dirty tasks out of the (sorted) list, sort
 * those of them that match, and merge the two runs.  The order is total
 * (ties go by id), so this gives exactly what a full sort would.  The
 * merge is in place, from the back: the list has room for every task, so
 * the kept run's tail moves up by the changed tasks still to place (no
 * second list as long as the first: 8 bytes a task).
 */
static void list_merge(con_model_t *m)
{
	size_t n = 0, k = 0, a, out, nd = m->ndirty;
	con_task_t **dirty = m->dirty;

	for (size_t i = 0; i < m->nlist; i++) {
		con_task_t *t = (con_task_t *)m->list[i];

		if (t->dirty)
			t->listed = false;
		else
			m->list[n++] = t;
	}
	/*
	 * More changed than the vector holds (a stream naming every task):
	 * the flagged ones, found by a pass over the tasks, into a vector
	 * made for this merge and freed after it.  The peak is what a full
	 * sort's own buffer would be (glibc's qsort merges through one),
	 * the time k log k, not n log n at every redraw while the stream
	 * lasts.
	 */
	if (m->dirty_overflow) {
		nd = 0;
		for (size_t i = 0; i < m->ntasks; i++)
			nd += m->tasks[i]->dirty;
		dirty = con_xreallocarray(NULL, nd ? nd : 1, sizeof(*dirty));
		nd = 0;
		for (size_t i = 0; i < m->ntasks; i++)
			if (m->tasks[i]->dirty)
				dirty[nd++] = m->tasks[i];
	}
	for (size_t i = 0; i < nd; i++) {
		con_task_t *t = dirty[i];

		t->dirty = false;
		if (con_model_task_matches(m, t))
			dirty[k++] = t;
	}
	if (k > 1)
		qsort_r(dirty, k, sizeof(*dirty), con_model_task_cmp, m);
	/* Each changed task's place by binary search, largest first, the
	 * runs between moved whole: k log n comparisons, not n + k. */
	a = n;
	out = n + k;
	for (size_t b = k; b-- > 0;) {
		size_t lo = 0, hi = a;

		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;

			if (con_model_task_cmp(&m->list[mid], &dirty[b], m) <
			    0)
				lo = mid + 1;
			else
				hi = mid;
		}
		/* list[lo, a) goes after dirty[b]. */
		out -= a - lo;
		memmove(m->list + out, m->list + lo,
			(a - lo) * sizeof(*m->list));
		a = lo;
		dirty[b]->listed = true;
		m->list[--out] = dirty[b];
	}
	m->nlist = n + k;
	if (dirty != m->dirty)
		free(dirty);
}

void con_model_resort(con_model_t *m)
{
	con_model_res_resort(m); /* the Resources view's list too */
	if (m->groups_on)
		con_model_groups_resort(m); /* the spawn-site groups */
	if (!m->list_stale)
		return;
	/* An eighth to spare: a list as long as the tasks, not twice. */
	if (m->ntasks > m->list_cap) {
		m->list_cap = m->ntasks + m->ntasks / 8;
		m->list = con_xreallocarray(m->list, m->list_cap,
					    sizeof(*m->list));
	}
	if (m->list_rebuild) {
		for (size_t i = 0; i < m->ndirty; i++)
			m->dirty[i]->dirty = false;
		list_rebuild(m);
	} else {
		list_merge(m);
	}
	m->ndirty = 0;
	m->dirty_overflow = false;
	m->list_rebuild = false;
	m->list_stale = false;
}
