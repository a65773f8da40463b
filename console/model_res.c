/* SPDX-License-Identifier: MIT */
/*
 * The model's resources (console.h): what tasks wait on, as the updates
 * say (Update.resources: the changed ones, every one in a full update,
 * a dropped one once more with dropped_ns set).
 *
 * A resource is created the first time an update names it and
 * overwritten by later ones; the first name and file seen stay (a later
 * record may omit them).  A dropped one stays retain_ns after it was
 * dropped, as a finished task does, then goes, in one scan once the
 * oldest is due.  At most CON_MAX_RESOURCES are kept: a new one past
 * that is counted in res_discarded, not kept, so a peer sending
 * resources without end costs a bounded store.  Nothing is trusted: id
 * 0 is no resource (counted in bad_frames), unknown kinds read "?",
 * strings are cut at CON_RES_STR_MAX, the lists at WEFT_RES_LIST, and a
 * count below its list is raised to it.
 *
 * Resources are few beside tasks (a process's locks, channels and
 * pools, against a task per request), so the Resources view's list is
 * rebuilt and sorted whole when anything changed, not merged as the
 * task list is.
 */
#include <stdlib.h>
#include <string.h>

#include "console.h"
#include "model_internal.h"

/* ------------------------------------------------------------- index */

static size_t res_slot(uint64_t id, size_t cap)
{
	return (size_t)((id * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1);
}

static void res_hash_rebuild(con_model_t *m)
{
	size_t cap = 64;

	while (cap < 2 * m->nres + 2)
		cap *= 2;
	if (cap != m->res_hash_cap) {
		free(m->res_hash);
		m->res_hash = con_xcalloc(cap, sizeof(*m->res_hash));
		m->res_hash_cap = cap;
	} else {
		memset(m->res_hash, 0, cap * sizeof(*m->res_hash));
	}
	for (size_t i = 0; i < m->nres; i++) {
		size_t j = res_slot(m->res[i]->id, cap);

		while (m->res_hash[j])
			j = (j + 1) & (cap - 1);
		m->res_hash[j] = m->res[i];
	}
}

const con_resource_t *con_model_resource(const con_model_t *m, uint64_t id)
{
	if (!m->res_hash_cap || !id)
		return NULL;
	for (size_t j = res_slot(id, m->res_hash_cap); m->res_hash[j];
	     j = (j + 1) & (m->res_hash_cap - 1))
		if (m->res_hash[j]->id == id)
			return m->res_hash[j];
	return NULL;
}

static void res_free(con_model_t *m, con_resource_t *r)
{
	con_model_str_unref(m, r->name);
	con_model_str_unref(m, r->file);
	con_model_str_unref(m, r->longest_holder_name);
	free(r->hist);
	free(r);
}

void con_model_res_free_all(con_model_t *m)
{
	for (size_t i = 0; i < m->nres; i++)
		res_free(m, m->res[i]);
	free(m->res);
	free(m->res_hash);
	free(m->res_list);
	m->res = NULL;
	m->res_hash = NULL;
	m->res_list = NULL;
	m->nres = m->res_cap = m->res_hash_cap = 0;
	m->nres_list = m->res_list_cap = 0;
}

/* @id's resource, made when new; NULL past CON_MAX_RESOURCES. */
static con_resource_t *res_get(con_model_t *m, uint64_t id)
{
	con_resource_t *r = (con_resource_t *)con_model_resource(m, id);
	size_t j;

	if (r)
		return r;
	if (m->nres >= CON_MAX_RESOURCES) {
		m->res_discarded++;
		return NULL;
	}
	if (m->nres == m->res_cap) {
		m->res_cap = m->res_cap ? 2 * m->res_cap : 64;
		m->res = con_xreallocarray(m->res, m->res_cap, sizeof(*m->res));
	}
	r = con_xcalloc(1, sizeof(*r));
	r->id = id;
	r->name = con_model_empty;
	r->file = con_model_empty;
	r->longest_holder_name = con_model_empty;
	m->res[m->nres++] = r;
	if (2 * m->nres + 2 > m->res_hash_cap) {
		res_hash_rebuild(m);
	} else {
		for (j = res_slot(id, m->res_hash_cap); m->res_hash[j];
		     j = (j + 1) & (m->res_hash_cap - 1))
			;
		m->res_hash[j] = r;
	}
	return r;
}

/* ------------------------------------------------------------ frames */

/* Interns @s cut at CON_RES_STR_MAX bytes (NULL, "": the empty one). */
static const char *str_ref_cut(con_model_t *m, const char *s)
{
	char buf[CON_RES_STR_MAX + 1];

	if (!s || !s[0])
		return con_model_empty;
	if (strnlen(s, CON_RES_STR_MAX + 1) <= CON_RES_STR_MAX)
		return con_model_str_ref(m, s);
	memcpy(buf, s, CON_RES_STR_MAX);
	buf[CON_RES_STR_MAX] = '\0';
	return con_model_str_ref(m, buf);
}

static uint8_t list_copy(uint64_t *dst, const uint64_t *src, size_t n)
{
	if (!src)
		return 0;
	if (n > WEFT_RES_LIST)
		n = WEFT_RES_LIST;
	memcpy(dst, src, n * sizeof(*dst));
	return (uint8_t)n;
}

void con_model_res_set(con_model_t *m, const Weft__V1__Resource *x)
{
	con_resource_t *r;

	if (!x || !x->id) {
		m->bad_frames++;
		return;
	}
	r = res_get(m, x->id);
	if (!r)
		return;
	if (x->kind && x->kind < WEFT_RES_KIND_MAX)
		r->kind = (uint8_t)x->kind;
	/* The first name and file seen stay. */
	if (!r->name[0] && x->name && x->name[0])
		r->name = str_ref_cut(m, x->name);
	if (!r->file[0] && x->file && x->file[0]) {
		r->file = str_ref_cut(m, x->file);
		r->line = x->line;
	}
	r->created_ns = x->created_ns;
	r->dropped_ns = x->dropped_ns;
	r->nholders_kept = list_copy(r->holders, x->holders, x->n_holders);
	r->nwaiters_kept = list_copy(r->waiters, x->waiters, x->n_waiters);
	r->nholders = x->nholders > r->nholders_kept ? x->nholders :
						       r->nholders_kept;
	r->nwaiters = x->nwaiters > r->nwaiters_kept ? x->nwaiters :
						       r->nwaiters_kept;
	r->owner = x->owner;
	r->acquires = x->acquires;
	r->waits = x->waits;
	r->acquires_per_s = x->acquires_per_s == x->acquires_per_s &&
					    x->acquires_per_s > 0 ?
				    x->acquires_per_s :
				    0; /* NaN, negative: 0 */
	r->oldest_wait_ns = x->oldest_wait_ns;
	/*
	 * Its name now, while its task is known (an update's tasks come
	 * before its resources): the view said "by task 1" and no more of
	 * one the model had forgotten since it ended (an outside tester).
	 */
	if (x->longest_holder != r->longest_holder ||
	    !r->longest_holder_name[0]) {
		const con_task_t *t =
			x->longest_holder ?
				con_model_task(m, x->longest_holder) :
				NULL;

		if ((t && t->name[0]) ||
		    x->longest_holder != r->longest_holder) {
			con_model_str_unref(m, r->longest_holder_name);
			r->longest_holder_name =
				t && t->name[0] ?
					con_model_str_ref(m, t->name) :
					con_model_empty;
		}
	}
	r->longest_holder = x->longest_holder;
	r->longest_hold_ns = x->longest_hold_ns;
	if ((x->wait_hist || x->hold_hist) && !r->hist)
		r->hist = con_xcalloc(2, sizeof(*r->hist));
	if (x->wait_hist) {
		weft_wire_hist_get(&r->hist[0], x->wait_hist);
		r->wait_p50 = weft_hist_percentile(&r->hist[0], 50);
		r->wait_p99 = weft_hist_percentile(&r->hist[0], 99);
		r->wait_max = r->hist[0].max_ns;
	}
	if (x->hold_hist) {
		weft_wire_hist_get(&r->hist[1], x->hold_hist);
		r->hold_p99 = weft_hist_percentile(&r->hist[1], 99);
	}
	if (r->dropped_ns &&
	    (!m->oldest_dropped_ns || r->dropped_ns < m->oldest_dropped_ns))
		m->oldest_dropped_ns = r->dropped_ns;
	m->res_stale = true;
}

void con_model_res_retain(con_model_t *m)
{
	uint64_t oldest = 0;
	size_t k = 0;

	/* Not due yet: no scan. */
	if (!m->oldest_dropped_ns ||
	    m->oldest_dropped_ns + m->retain_ns > m->now_ns)
		return;
	for (size_t i = 0; i < m->nres; i++) {
		con_resource_t *r = m->res[i];

		if (r->dropped_ns &&
		    r->dropped_ns + m->retain_ns <= m->now_ns) {
			res_free(m, r);
			continue;
		}
		if (r->dropped_ns && (!oldest || r->dropped_ns < oldest))
			oldest = r->dropped_ns;
		m->res[k++] = r;
	}
	m->nres = k;
	m->oldest_dropped_ns = oldest;
	res_hash_rebuild(m);
	/* The list pointed at the ones freed. */
	m->nres_list = 0;
	m->res_stale = true;
}

/* ------------------------------------------------------------- list */

const char *con_res_label(const con_resource_t *r, char *buf, size_t len)
{
	if (r->name[0])
		snprintf(buf, len, "%s", r->name);
	else if (r->file[0])
		snprintf(buf, len, "%s:%u", r->file, r->line);
	else
		snprintf(buf, len, "#%llu", (unsigned long long)r->id);
	return buf;
}

const char *con_res_col_label(con_res_col_t col)
{
	static const char *const labels[] = {
#define CON_X(name, label) label,
		CON_RES_COLUMNS(CON_X)
#undef CON_X
	};

	return col < CON_RCOL_MAX ? labels[col] : "?";
}

void con_model_res_set_sort(con_model_t *m, con_res_col_t col, bool invert)
{
	if (col >= CON_RCOL_MAX)
		col = CON_RCOL_ID;
	m->res_sort_col = col;
	m->res_sort_invert = invert;
	m->res_stale = true;
}

void con_model_res_set_filter(con_model_t *m, const char *filter)
{
	snprintf(m->res_filter, sizeof(m->res_filter), "%s",
		 filter ? filter : "");
	m->res_stale = true;
}

/*
 * A resource matches when the filter is a substring (any case) of its
 * kind, its name or its file, or equals its id.
 */
bool con_model_res_matches(const con_model_t *m, const con_resource_t *r)
{
	char id[24];

	if (!m->res_filter[0])
		return true;
	snprintf(id, sizeof(id), "%llu", (unsigned long long)r->id);
	return con_contains_ci(weft_resource_kind_name(r->kind),
			       m->res_filter) ||
	       con_contains_ci(r->name, m->res_filter) ||
	       con_contains_ci(r->file, m->res_filter) ||
	       !strcmp(id, m->res_filter);
}

static int res_cmp(const void *pa, const void *pb, void *arg)
{
	const con_resource_t *a = *(const con_resource_t *const *)pa;
	const con_resource_t *b = *(const con_resource_t *const *)pb;
	const con_model_t *m = arg;
	int c = 0;

	switch (m->res_sort_col) {
	case CON_RCOL_KIND:
		c = strcmp(weft_resource_kind_name(a->kind),
			   weft_resource_kind_name(b->kind));
		break;
	case CON_RCOL_NAME: {
		char x[CON_RES_STR_MAX + 16], y[CON_RES_STR_MAX + 16];

		c = strcmp(con_res_label(a, x, sizeof(x)),
			   con_res_label(b, y, sizeof(y)));
		break;
	}
	case CON_RCOL_HOLDERS:
		c = con_cmp_u64(a->nholders, b->nholders);
		break;
	case CON_RCOL_WAITERS:
		c = con_cmp_u64(a->nwaiters, b->nwaiters);
		break;
	case CON_RCOL_RATE:
		c = a->acquires_per_s < b->acquires_per_s ?
			    -1 :
			    a->acquires_per_s > b->acquires_per_s;
		break;
	case CON_RCOL_WAIT_P50:
		c = con_cmp_u64(a->wait_p50, b->wait_p50);
		break;
	case CON_RCOL_WAIT_P99:
		c = con_cmp_u64(a->wait_p99, b->wait_p99);
		break;
	case CON_RCOL_WAIT_MAX:
		c = con_cmp_u64(a->wait_max, b->wait_max);
		break;
	case CON_RCOL_HOLD_P99:
		c = con_cmp_u64(a->hold_p99, b->hold_p99);
		break;
	case CON_RCOL_ID:
	default:
		break;
	}
	if (!c)
		c = con_cmp_u64(a->id, b->id);
	return m->res_sort_invert ? -c : c;
}

void con_model_res_resort(con_model_t *m)
{
	if (!m->res_stale)
		return;
	if (m->res_list_cap < m->nres) {
		m->res_list_cap = m->res_cap;
		free(m->res_list);
		m->res_list = con_xreallocarray(NULL, m->res_list_cap,
						sizeof(*m->res_list));
	}
	m->nres_list = 0;
	for (size_t i = 0; i < m->nres; i++)
		if (con_model_res_matches(m, m->res[i]))
			m->res_list[m->nres_list++] = m->res[i];
	if (m->nres_list > 1)
		qsort_r(m->res_list, m->nres_list, sizeof(*m->res_list),
			res_cmp, m);
	m->res_stale = false;
}

bool con_model_res_is_consistent(const con_model_t *m)
{
	size_t inhash = 0;

	if (m->nres > CON_MAX_RESOURCES || m->nres > m->res_cap)
		return false;
	for (size_t i = 0; i < m->res_hash_cap; i++)
		if (m->res_hash[i]) {
			inhash++;
			if (con_model_resource(m, m->res_hash[i]->id) !=
			    m->res_hash[i])
				return false;
		}
	if (inhash != m->nres)
		return false;
	for (size_t i = 0; i < m->nres; i++) {
		const con_resource_t *r = m->res[i];

		if (!r->id || con_model_resource(m, r->id) != r ||
		    r->nholders_kept > WEFT_RES_LIST ||
		    r->nwaiters_kept > WEFT_RES_LIST ||
		    r->nholders < r->nholders_kept ||
		    r->nwaiters < r->nwaiters_kept ||
		    strlen(r->name) > CON_RES_STR_MAX ||
		    strlen(r->file) > CON_RES_STR_MAX)
			return false;
	}
	if (!m->res_stale)
		for (size_t i = 0; i < m->nres_list; i++)
			if (con_model_resource(m, m->res_list[i]->id) !=
			    m->res_list[i])
				return false;
	return true;
}

/* The resources of con_model_clone(): @dst holds @src's fields, its
 * pointers still @src's; they are made its own. */
void con_model_res_clone(con_model_t *dst, const con_model_t *src)
{
	dst->res = src->res_cap ? con_xcalloc(src->res_cap, sizeof(*dst->res)) :
				  NULL;
	for (size_t i = 0; i < src->nres; i++) {
		const con_resource_t *s = src->res[i];
		con_resource_t *r = con_xmalloc(sizeof(*r));

		*r = *s;
		r->name = con_model_str_ref(dst, s->name);
		r->file = con_model_str_ref(dst, s->file);
		r->longest_holder_name =
			con_model_str_ref(dst, s->longest_holder_name);
		r->hist = con_xmemdup(s->hist, 2 * sizeof(*r->hist));
		dst->res[i] = r;
	}
	dst->res_hash = NULL;
	dst->res_hash_cap = 0;
	if (src->res_hash_cap)
		res_hash_rebuild(dst);
	dst->res_list = NULL;
	if (src->res_list_cap) {
		dst->res_list =
			con_xcalloc(src->res_list_cap, sizeof(*dst->res_list));
		for (size_t i = 0; i < src->nres_list; i++)
			dst->res_list[i] =
				con_model_resource(dst, src->res_list[i]->id);
	}
}
