/* SPDX-License-Identifier: MIT */
/*
 * A checkpoint saved: a model as bytes that outlive the process (the
 * replay's side index, replay_side.c): the rest of the model (all but
 * its tasks) laid out as the structures are in memory, each pointer
 * replaced by what it points to, then its tasks packed as a checkpoint
 * in memory packs them (con_model_pack(), model_pack.c).  Read back
 * only by a build with the same layout (con_model_save_layout() is in
 * the index's header), and only after the index's checksum of these
 * bytes matched; even so every count is checked against the bytes left
 * and the model's bounds, so bytes that lie make false, never a read
 * past the end.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"
#include "model_pack_internal.h"

static void put_raw(buf_t *b, const void *p, size_t n)
{
	put_var(b, n);
	put_bytes(b, p, n);
}

/* A string, NULL as length 0 and "" as 1 (its NUL). */
static void put_str(buf_t *b, const char *s)
{
	put_var(b, s ? strlen(s) + 1 : 0);
	if (s)
		put_bytes(b, s, strlen(s) + 1);
}

static const uint8_t *get_raw(rd_t *r, size_t n)
{
	const uint8_t *p = r->p;

	if (r->bad || get_var(r) != n || (size_t)(r->end - r->p) < n) {
		r->bad = true;
		return NULL;
	}
	p = r->p;
	r->p += n;
	return p;
}

static bool get_copy(rd_t *r, void *dst, size_t n)
{
	const uint8_t *p = get_raw(r, n);

	if (p)
		memcpy(dst, p, n);
	return p != NULL;
}

/* A string put_str() wrote, in the bytes (NULL: none, or bad). */
static const char *get_str(rd_t *r, bool *null)
{
	uint64_t n = get_var(r);
	const char *s = (const char *)r->p;

	*null = !n;
	if (r->bad || !n)
		return NULL;
	if ((uint64_t)(r->end - r->p) < n || r->p[n - 1] != '\0' ||
	    strlen(s) + 1 != n) {
		r->bad = true;
		return NULL;
	}
	r->p += n;
	return s;
}

static char *get_xstr(rd_t *r)
{
	bool null;
	const char *s = get_str(r, &null);

	return s ? con_xstrdup(s) : NULL;
}

/*
 * get_rest() replaces every pointer of con_model_t it knows of: a field
 * added to the model must be looked at there (a pointer replaced, or
 * NULL), then this size updated.  (LP64 only: the size differs
 * elsewhere.)
 */
#define CON_MODEL_SAVED_SIZE 1152
#if UINTPTR_MAX == UINT64_MAX
static_assert(sizeof(con_model_t) == CON_MODEL_SAVED_SIZE,
	      "con_model_t changed: check get_rest() in model_save.c");
#endif

uint64_t con_model_save_layout(void)
{
	/* The sizes of what is written as it is in memory, and the bounds
	 * the counts are checked against. */
	const uint64_t v[] = {
		sizeof(con_model_t),
		sizeof(con_worker_t),
		sizeof(con_worker_series_t),
		sizeof(con_warning_t),
		sizeof(con_tl_top_t),
		sizeof(con_resource_t),
		sizeof(weft_hist_t),
		sizeof(weft_event_t),
		sizeof(con_task_t),
		sizeof(con_fin_t),
		sizeof(Weft__V1__Stats),
		CON_TL_BUCKETS,
		CON_WATCH_EVENTS,
		CON_RECENT_EVENTS,
		CON_MAX_WORKERS,
		F_MAX,
		WEFT_TASK_WAITED,
	};
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		h ^= v[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/*
 * The bytes are written as they are in memory, padding too: every
 * structure written raw must have its padding defined (zeroed), or the
 * index holds whatever was there (and valgrind says so at its write).
 * The model, its workers, timeline buckets, resources and histograms are
 * allocated zeroed (calloc, memset) and changed field by field, so their
 * padding stays zero; copies of them are whole-struct copies of those.
 * The warnings are not (model.c grows their array with realloc and
 * fills each field): each is written through a zeroed copy, field by
 * field.  A field added to con_warning_t goes in put_warning() too.
 */
#if UINTPTR_MAX == UINT64_MAX
static_assert(sizeof(con_warning_t) == 88,
	      "con_warning_t changed: check put_warning() in model_save.c");
#endif

static void put_warning(buf_t *b, const con_warning_t *w)
{
	con_warning_t c;

	memset(&c, 0, sizeof(c));
	c.seq = w->seq;
	c.kind = w->kind;
	c.worker = w->worker;
	c.task = w->task;
	c.task_name = w->task_name;
	c.file = w->file;
	c.line = w->line;
	c.at_ns = w->at_ns;
	c.value_ns = w->value_ns;
	c.detail = w->detail;
	c.history = w->history;
	c.count = w->count;
	put_raw(b, &c, sizeof(c));
}

/* The rest of @m (not its tasks, list, dirty vector or recent events:
 * the packed blob holds those). */
static void put_rest(buf_t *b, const con_model_t *m)
{
	uint8_t flag, *blob;
	size_t n;

	put_raw(b, m, sizeof(*m));
	put_str(b, m->target);
	put_str(b, m->process);
	put_str(b, m->clock);
	for (uint32_t i = 0; i < m->workers_cap; i++) {
		put_raw(b, &m->workers[i], sizeof(m->workers[i]));
		if (m->workers[i].series)
			put_raw(b, m->workers[i].series,
				sizeof(*m->workers[i].series));
	}
	for (size_t i = 0; i < m->nwarnings; i++) {
		const con_warning_t *w = &m->warnings[i];

		put_warning(b, w);
		put_str(b, w->task_name);
		put_str(b, w->file);
		put_str(b, w->detail);
	}
	for (uint32_t i = 0; m->tl_top && i < CON_TL_BUCKETS; i++) {
		flag = m->tl_top[i] != NULL;
		put_bytes(b, &flag, 1);
		if (flag)
			put_raw(b, m->tl_top[i], sizeof(*m->tl_top[i]));
	}
	if (m->watch)
		put_raw(b, m->watch, CON_WATCH_EVENTS * sizeof(*m->watch));
	for (size_t i = 0; i < m->nres; i++) {
		const con_resource_t *r = m->res[i];

		put_raw(b, r, sizeof(*r));
		put_str(b, r->name);
		put_str(b, r->file);
		put_str(b, r->longest_holder_name);
		if (r->hist)
			put_raw(b, r->hist, 2 * sizeof(*r->hist));
	}
	for (size_t i = 0; i < m->nres_list; i++)
		put_var(b, m->res_list[i]->id);
	/* Retention's finish order (model_retain.c): its entries only,
	 * the sorted run and the pending ones, then the heap. */
	put_var(b, m->fin_pend - m->fin_lo);
	put_var(b, m->fin_hi - m->fin_lo);
	if (m->fin_pend > m->fin_lo)
		put_raw(b, m->fin + m->fin_lo,
			(m->fin_pend - m->fin_lo) * sizeof(*m->fin));
	put_var(b, m->nfin_heap);
	if (m->nfin_heap)
		put_raw(b, m->fin_heap, m->nfin_heap * sizeof(*m->fin_heap));
	blob = con_sites_save(&m->sites, &n); /* model_sites.c */
	put_var(b, n);
	put_raw(b, blob, n);
	free(blob);
}

/* Retention's entries (put_rest()'s last part) into @m; false on a count
 * past the bytes. */
static bool get_fin(rd_t *r, con_model_t *m)
{
	uint64_t n = get_var(r), hi = get_var(r), nh;

	if (r->bad || hi > n ||
	    n > (uint64_t)(r->end - r->p) / sizeof(con_fin_t))
		return false;
	if (n) {
		m->fin = con_xmalloc(n * sizeof(*m->fin));
		m->fin_cap = m->fin_pend = (size_t)n;
		m->fin_hi = (size_t)hi;
		if (!get_copy(r, m->fin, n * sizeof(*m->fin)))
			return false;
	}
	nh = get_var(r);
	if (r->bad || nh > (uint64_t)(r->end - r->p) / sizeof(con_fin_t))
		return false;
	if (nh) {
		m->fin_heap = con_xmalloc(nh * sizeof(*m->fin_heap));
		m->fin_heap_cap = m->nfin_heap = (size_t)nh;
		if (!get_copy(r, m->fin_heap, nh * sizeof(*m->fin_heap)))
			return false;
	}
	return true;
}

static bool get_flag(rd_t *r)
{
	if (r->bad || r->p >= r->end) {
		r->bad = true;
		return false;
	}
	return *r->p++ != 0;
}

/*
 * The resources of the rest (@m's raw counts say how many): read into a
 * model of their own, then cloned into @m as a checkpoint's copy is
 * (strings interned, index rebuilt).
 */
static bool get_res(rd_t *r, con_model_t *m, size_t nres, size_t nres_list)
{
	con_model_t tmp;
	con_resource_t *recs;
	bool ok = true;

	memset(&tmp, 0, sizeof(tmp));
	recs = con_xcalloc(nres ? nres : 1, sizeof(*recs));
	tmp.res = con_xcalloc(nres ? nres : 1, sizeof(*tmp.res));
	tmp.res_cap = nres;
	for (size_t i = 0; i < nres && ok; i++) {
		bool null;
		uint8_t had_hist;

		ok = get_copy(r, &recs[i], sizeof(recs[i]));
		had_hist = ok && recs[i].hist;
		recs[i].hist = NULL;
		recs[i].name = get_str(r, &null);
		ok = ok && !null && recs[i].name;
		recs[i].file = get_str(r, &null);
		ok = ok && !null && recs[i].file;
		recs[i].longest_holder_name = get_str(r, &null);
		ok = ok && !null && recs[i].longest_holder_name;
		if (ok && had_hist) {
			recs[i].hist = con_xmalloc(2 * sizeof(*recs[i].hist));
			ok = get_copy(r, recs[i].hist,
				      2 * sizeof(*recs[i].hist));
		}
		tmp.res[tmp.nres++] = &recs[i];
		if (!ok) {
			recs[i].name = recs[i].file = "";
			recs[i].longest_holder_name = "";
		}
	}
	tmp.res_hash_cap = nres ? 1 : 0;
	tmp.res_list_cap = nres_list;
	if (ok) {
		/* No index in tmp: the list by a scan (a few thousand at
		 * most, once a restore). */
		con_model_t src = tmp;
		con_resource_t **list =
			con_xcalloc(nres_list ? nres_list : 1, sizeof(*list));

		for (size_t i = 0; i < nres_list && ok; i++) {
			uint64_t id = get_var(r);
			size_t j = 0;

			while (j < nres && recs[j].id != id)
				j++;
			ok = !r->bad && j < nres;
			if (ok)
				list[i] = &recs[j];
		}
		src.res_list = (const con_resource_t **)list;
		src.nres_list = nres_list;
		src.res_list_cap = nres_list;
		src.res_hash_cap = nres ? 1 : 0;
		if (ok) {
			/* Its counts first: the clone rebuilds the index of
			 * m's nres (when src had one) and finds the list's
			 * records in it. */
			m->nres = m->res_cap = nres;
			m->nres_list = m->res_list_cap = nres_list;
			con_model_res_clone(m, &src);
		}
		free(list);
	}
	for (size_t i = 0; i < tmp.nres; i++)
		free(recs[i].hist);
	free(tmp.res);
	free(recs);
	return ok;
}

/*
 * @m made from the rest's bytes: its fields as they were (what a clone
 * copies with *dst = *src), every pointer then replaced by one of ours
 * (or NULL): the groups, the strings' table and the tasks' parts are
 * rebuilt or come from the packed blob.
 */
static bool get_rest(rd_t *r, con_model_t *m)
{
	const Weft__V1__Stats stats0 = WEFT__V1__STATS__INIT;
	const Weft__V1__WorkerCounters wc0 = WEFT__V1__WORKER_COUNTERS__INIT;
	con_model_t raw;
	const uint8_t *sites;
	uint64_t n;
	bool tl, watch;

	memset(m, 0, sizeof(*m));
	if (!get_copy(r, &raw, sizeof(raw)))
		return false;
	*m = raw;
	m->target = m->process = m->clock = NULL;
	m->stats.base = stats0.base;
	m->stats.clock = NULL;
	m->tasks = NULL;
	m->ntasks = m->tasks_cap = 0;
	m->workers = NULL;
	m->workers_cap = 0;
	m->warnings = NULL;
	m->nwarnings = m->warnings_cap = 0;
	m->tl_top = NULL;
	m->watch = NULL;
	m->list = NULL;
	m->nlist = m->list_cap = 0;
	m->res = NULL;
	m->res_list = NULL;
	m->res_hash = NULL;
	m->nres = m->res_cap = m->res_hash_cap = 0;
	m->nres_list = m->res_list_cap = 0;
	m->groups = NULL;
	m->group_list = NULL;
	m->group_tmp = NULL;
	m->ngroups = m->ngroup_list = m->groups_cap = m->groups_room = 0;
	m->groups_stale = true;
	m->strs = NULL;
	m->strs_cap = m->nstrs = 0;
	m->slabs = NULL;
	m->nslabs = m->slabs_cap = m->slab_used = 0;
	m->free_tasks = NULL;
	m->hash = NULL;
	m->hash_cap = m->hash_tombs = 0;
	memset(m->str_hint, 0, sizeof(m->str_hint));
	m->fin = m->fin_heap = NULL;
	m->fin_lo = m->fin_hi = m->fin_pend = m->fin_cap = 0;
	m->nfin_heap = m->fin_heap_cap = 0;
	m->dirty = NULL;
	m->ndirty = m->dirty_cap = 0;
	m->recent = NULL;
	m->recent_cap = 0;
	memset(&m->sites, 0, sizeof(m->sites));
	/* What indexes a table: in range (the session's sort and filter
	 * replace the task list's on a restore). */
	if ((unsigned)m->sort_col >= CON_COL_MAX)
		m->sort_col = CON_COL_ID;
	if ((unsigned)m->res_sort_col >= CON_RCOL_MAX)
		m->res_sort_col = 0;
	if ((unsigned)m->group_sort_col >= CON_GCOL_MAX)
		m->group_sort_col = CON_GCOL_LIVE;
	if ((unsigned)m->mode > CON_MODE_REPLAY)
		m->mode = CON_MODE_REPLAY;
	m->filter[sizeof(m->filter) - 1] = '\0';
	m->res_filter[sizeof(m->res_filter) - 1] = '\0';
	m->group_filter[sizeof(m->group_filter) - 1] = '\0';

	m->target = get_xstr(r);
	m->process = get_xstr(r);
	m->clock = get_xstr(r);
	if (r->bad || raw.workers_cap > CON_MAX_WORKERS ||
	    raw.nworkers > raw.workers_cap || raw.stolen_hi > raw.workers_cap ||
	    raw.nwarnings > raw.warnings_cap ||
	    raw.warnings_cap > 2 * CON_MAX_WARNINGS ||
	    raw.nwarnings > CON_MAX_WARNINGS || raw.nres > CON_MAX_RESOURCES ||
	    raw.nres_list > raw.nres ||
	    (uint64_t)(r->end - r->p) <
		    raw.workers_cap + raw.nwarnings + raw.nres)
		return false;
	if (raw.workers_cap) {
		m->workers = con_xcalloc(raw.workers_cap, sizeof(*m->workers));
		m->workers_cap = raw.workers_cap;
	}
	for (uint32_t i = 0; i < raw.workers_cap; i++) {
		con_worker_t *w = &m->workers[i];
		bool series;

		if (!get_copy(r, w, sizeof(*w)))
			return false;
		series = w->series != NULL;
		w->series = NULL;
		w->counters.base = wc0.base;
		if (series) {
			w->series = con_xmalloc(sizeof(*w->series));
			if (!get_copy(r, w->series, sizeof(*w->series)))
				return false;
		}
	}
	if (raw.warnings_cap) {
		m->warnings =
			con_xcalloc(raw.warnings_cap, sizeof(*m->warnings));
		m->warnings_cap = raw.warnings_cap;
	}
	for (size_t i = 0; i < raw.nwarnings; i++) {
		con_warning_t *w = &m->warnings[i];

		if (!get_copy(r, w, sizeof(*w))) {
			memset(w, 0, sizeof(*w));
			return false;
		}
		w->task_name = w->file = w->detail = NULL;
		m->nwarnings++;
		w->task_name = get_xstr(r);
		w->file = get_xstr(r);
		w->detail = get_xstr(r);
		if (r->bad)
			return false;
	}
	tl = raw.tl_top != NULL;
	if (tl) {
		m->tl_top = con_xcalloc(CON_TL_BUCKETS, sizeof(*m->tl_top));
		for (uint32_t i = 0; i < CON_TL_BUCKETS; i++) {
			if (!get_flag(r))
				continue;
			m->tl_top[i] = con_xmalloc(sizeof(*m->tl_top[i]));
			if (!get_copy(r, m->tl_top[i], sizeof(*m->tl_top[i])))
				return false;
			if (m->tl_top[i]->ntop > CON_TL_TOP)
				return false;
		}
	}
	watch = raw.watch != NULL;
	if (watch) {
		m->watch = con_xcalloc(CON_WATCH_EVENTS, sizeof(*m->watch));
		if (!get_copy(r, m->watch,
			      CON_WATCH_EVENTS * sizeof(*m->watch)))
			return false;
	}
	if (r->bad || !get_res(r, m, raw.nres, raw.nres_list) || !get_fin(r, m))
		return false;
	n = get_var(r);
	sites = get_raw(r, n);
	return sites && con_sites_load(&m->sites, sites, n);
}

void con_model_save(con_saved_t *out, const con_model_t *m)
{
	con_packed_t pk;
	buf_t b = { 0 };

	con_model_pack(&pk, m);
	put_rest(&b, m);
	put_var(&b, pk.len);
	put_var(&b, pk.strs_len);
	put_var(&b, pk.nstrs);
	put_bytes(&b, pk.blob, pk.len);
	con_packed_free(&pk);
	out->p = b.p;
	out->len = b.len;
}

bool con_model_load(con_model_t *dst, const void *bytes, size_t len)
{
	rd_t r = { bytes, (const uint8_t *)bytes + len, false };
	con_packed_t pk;
	uint64_t n, strs_len, nstrs;
	bool ok;

	memset(dst, 0, sizeof(*dst));
	memset(&pk, 0, sizeof(pk));
	if (!get_rest(&r, &pk.rest)) {
		con_model_fini(&pk.rest);
		return false;
	}
	n = get_var(&r);
	strs_len = get_var(&r);
	nstrs = get_var(&r);
	if (r.bad || n != (uint64_t)(r.end - r.p) || strs_len > n ||
	    nstrs > n) {
		con_model_fini(&pk.rest);
		return false;
	}
	pk.blob = (uint8_t *)r.p; /* read only */
	pk.len = (size_t)n;
	pk.strs_len = (size_t)strs_len;
	pk.nstrs = (size_t)nstrs;
	ok = con_model_unpack(dst, &pk);
	con_model_fini(&pk.rest);
	return ok;
}

void con_saved_free(con_saved_t *s)
{
	free(s->p);
	s->p = NULL;
	s->len = 0;
}
