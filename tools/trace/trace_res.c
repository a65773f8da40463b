/* SPDX-License-Identifier: MIT */
/*
 * Resources as the updates say them (trace_tool.h): the live ones by id,
 * each the merge of its records (the first name and file seen stay; the
 * rest is the last record's: counts and histograms are cumulative), and
 * of the dropped ones only the TT_RES_GONE most contended, for stats.
 * A record with dropped_ns set is a resource's last: it leaves the live
 * table.  Nothing is trusted: id 0 is ignored, strings cut at 256 bytes,
 * lists at WEFT_RES_LIST, histograms at WEFT_HIST_BUCKETS, and past
 * TT_RES_MAX live resources new ones are only counted.  The names of
 * their holders and waiters, forgotten tasks included
 * (tt_task_label_warned()).  Then the
 * warnings, counted as warnings, not rows: a fold's row stands for the N
 * it says.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_tool.h"

#define STR_MAX 256

static size_t res_hash(const tt_restab_t *r, uint64_t id)
{
	return (size_t)((id * 0x9e3779b97f4a7c15ull) >> 20) & (r->nb - 1);
}

static tt_resource_t **res_slot(tt_restab_t *r, uint64_t id)
{
	tt_resource_t **pp = &r->b[res_hash(r, id)];

	while (*pp && (*pp)->id != id)
		pp = &(*pp)->next;
	return pp;
}

static void res_grow(tt_restab_t *r)
{
	size_t old = r->nb;
	tt_resource_t **b = r->b;

	r->nb = old ? 2 * old : 256;
	r->b = tt_xmalloc(r->nb * sizeof(*r->b));
	memset(r->b, 0, r->nb * sizeof(*r->b));
	for (size_t i = 0; i < old; i++)
		for (tt_resource_t *x = b[i], *next; x; x = next) {
			size_t j = res_hash(r, x->id);

			next = x->next;
			x->next = r->b[j];
			r->b[j] = x;
		}
	free(b);
}

static void res_free_one(tt_resource_t *x)
{
	free(x->name);
	free(x->file);
	free(x);
}

const tt_resource_t *tt_res_find(const tt_restab_t *r, uint64_t id)
{
	if (!r->nb || !id)
		return NULL;
	for (tt_resource_t *x = r->b[res_hash(r, id)]; x; x = x->next)
		if (x->id == id)
			return x;
	for (size_t i = 0; i < r->ngone; i++)
		if (r->gone[i]->id == id)
			return r->gone[i];
	return NULL;
}

static char *str_cut(const char *s)
{
	char *d;
	size_t n;

	if (!s)
		s = "";
	n = strnlen(s, STR_MAX);
	d = tt_xmalloc(n + 1);
	memcpy(d, s, n);
	d[n] = '\0';
	return d;
}

/*
 * Contention order: the kinds that contend first, then total wait, then
 * wait p99, then acquires, then id.
 */
static int res_cmp(const tt_resource_t *a, const tt_resource_t *b)
{
	uint64_t pa, pb;

	if (weft_resource_kind_contends(a->kind) !=
	    weft_resource_kind_contends(b->kind))
		return weft_resource_kind_contends(a->kind) ? -1 : 1;
	if (a->wait.sum_ns != b->wait.sum_ns)
		return a->wait.sum_ns > b->wait.sum_ns ? -1 : 1;
	pa = weft_hist_percentile(&a->wait, 99);
	pb = weft_hist_percentile(&b->wait, 99);
	if (pa != pb)
		return pa > pb ? -1 : 1;
	if (a->acquires != b->acquires)
		return a->acquires > b->acquires ? -1 : 1;
	return a->id < b->id ? -1 : a->id > b->id;
}

/* A dropped resource: kept among the TT_RES_GONE most contended. */
static void gone_keep(tt_restab_t *r, tt_resource_t *x)
{
	size_t worst = 0;

	if (r->ngone < TT_RES_GONE) {
		r->gone[r->ngone++] = x;
		return;
	}
	for (size_t i = 1; i < r->ngone; i++)
		if (res_cmp(r->gone[i], r->gone[worst]) > 0)
			worst = i;
	if (res_cmp(x, r->gone[worst]) < 0) {
		res_free_one(r->gone[worst]);
		r->gone[worst] = x;
	} else {
		res_free_one(x);
	}
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

void tt_res_note(tt_restab_t *r, const Weft__V1__Resource *m)
{
	tt_resource_t **pp, *x;

	if (!m || !m->id)
		return;
	if (!r->nb)
		res_grow(r);
	pp = res_slot(r, m->id);
	if (!(x = *pp)) {
		for (size_t i = 0; i < r->ngone; i++)
			if (r->gone[i]->id == m->id)
				return; /* its last record came again */
		if (r->n >= TT_RES_MAX) {
			r->discarded++;
			return;
		}
		if (r->n + 1 > 2 * r->nb) {
			res_grow(r);
			pp = res_slot(r, m->id);
		}
		x = tt_xmalloc(sizeof(*x));
		memset(x, 0, sizeof(*x));
		x->id = m->id;
		x->name = str_cut("");
		x->file = str_cut("");
		*pp = x;
		r->n++;
		r->seen++;
	}
	if (m->kind && m->kind < WEFT_RES_KIND_MAX)
		x->kind = (uint8_t)m->kind;
	if (!x->name[0] && m->name && m->name[0]) {
		free(x->name);
		x->name = str_cut(m->name);
	}
	if (!x->file[0] && m->file && m->file[0]) {
		free(x->file);
		x->file = str_cut(m->file);
		x->line = m->line;
	}
	x->dropped_ns = m->dropped_ns;
	x->nholders_kept = list_copy(x->holders, m->holders, m->n_holders);
	x->nwaiters_kept = list_copy(x->waiters, m->waiters, m->n_waiters);
	x->nholders = m->nholders > x->nholders_kept ? m->nholders :
						       x->nholders_kept;
	x->nwaiters = m->nwaiters > x->nwaiters_kept ? m->nwaiters :
						       x->nwaiters_kept;
	x->acquires = m->acquires;
	x->waits = m->waits;
	x->longest_holder = m->longest_holder;
	x->longest_hold_ns = m->longest_hold_ns;
	if (m->wait_hist)
		weft_wire_hist_get(&x->wait, m->wait_hist);
	if (m->hold_hist)
		weft_wire_hist_get(&x->hold, m->hold_hist);
	if (x->dropped_ns) {
		*pp = x->next;
		x->next = NULL;
		r->n--;
		r->dropped++;
		gone_keep(r, x);
	}
}

const char *tt_res_label(const tt_resource_t *x, char *buf, size_t len)
{
	const char *kind = weft_resource_kind_name(x->kind);

	if (x->name[0])
		snprintf(buf, len, "%s %s", kind, x->name);
	else if (x->file[0])
		snprintf(buf, len, "%s %s:%u", kind, x->file, x->line);
	else
		snprintf(buf, len, "%s #%llu", kind, (unsigned long long)x->id);
	return buf;
}

static int top_cmp(const void *a, const void *b)
{
	return res_cmp(*(const tt_resource_t *const *)a,
		       *(const tt_resource_t *const *)b);
}

size_t tt_res_top(const tt_restab_t *r, const tt_resource_t **out, size_t max)
{
	const tt_resource_t **all;
	size_t n = 0, k;

	if (!max || !(r->n + r->ngone))
		return 0;
	all = tt_xmalloc((r->n + r->ngone) * sizeof(*all));
	for (size_t i = 0; i < r->nb; i++)
		for (const tt_resource_t *x = r->b[i]; x; x = x->next)
			if (weft_resource_kind_contends(x->kind))
				all[n++] = x;
	for (size_t i = 0; i < r->ngone; i++)
		if (weft_resource_kind_contends(r->gone[i]->kind))
			all[n++] = r->gone[i];
	if (!n) {
		free(all);
		return 0;
	}
	qsort(all, n, sizeof(*all), top_cmp);
	k = n < max ? n : max;
	memcpy(out, all, k * sizeof(*out));
	free(all);
	return k;
}

void tt_res_free(tt_restab_t *r)
{
	for (size_t i = 0; i < r->nb; i++)
		for (tt_resource_t *x = r->b[i], *next; x; x = next) {
			next = x->next;
			res_free_one(x);
		}
	for (size_t i = 0; i < r->ngone; i++)
		res_free_one(r->gone[i]);
	free(r->b);
	memset(r, 0, sizeof(*r));
}

const char *tt_task_label_warned(const tt_trace_t *t, uint64_t id, char *buf,
				 size_t len)
{
	const tt_task_t *k = tt_task(t, id);

	if (k && k->name[0])
		return tt_task_label(t, id, buf, len);
	/* Forgotten since it ended: its name then, or the one a warning
	 * about it kept. */
	for (size_t i = TT_GONE_NAMES; id && t->gone_names && i-- > 0;)
		if (t->gone_names[i].id == id) {
			snprintf(buf, len, "%s", t->gone_names[i].name);
			return buf;
		}
	for (size_t i = t->nkept; id && i-- > 0;)
		if (t->warnings[i].task == id && t->warnings[i].label) {
			snprintf(buf, len, "%s", t->warnings[i].label);
			return buf;
		}
	return tt_task_label(t, id, buf, len);
}

/* ------------------------------------------------------------ warnings */

uint64_t tt_warning_count(const Weft__V1__Warning *w)
{
	unsigned long long n;
	char tail;

	if (w->count)
		return w->count;
	/*
	 * A trace recorded before rows carried their count: a fold's row
	 * says it first ("15 more from tasks spawned at ... (folded)").
	 */
	if (w->detail && strstr(w->detail, "(folded)") &&
	    sscanf(w->detail, "%llu more%c", &n, &tail) == 2 && tail == ' ' &&
	    n)
		return n;
	return 1;
}

void tt_warnings_note(tt_trace_t *t, const Weft__V1__Update *u)
{
	for (size_t i = 0; i < u->n_warnings; i++) {
		const Weft__V1__Warning *w = u->warnings[i];
		uint64_t said = tt_warning_count(w);
		tt_warning_t *x;

		t->nwarnings++;
		t->said += said;
		if (w->kind < WEFT_WARN_MAX) {
			t->warnings_by_kind[w->kind]++;
			t->said_by_kind[w->kind] += said;
		}
		if (t->nkept == TT_WARNINGS_KEPT)
			continue;
		if (!t->warnings)
			t->warnings = tt_xmalloc(TT_WARNINGS_KEPT *
						 sizeof(*t->warnings));
		x = &t->warnings[t->nkept++];
		x->kind = w->kind;
		x->worker = w->worker;
		x->task = w->task;
		x->at_ns = w->at_ns;
		x->value_ns = w->value_ns;
		x->detail = tt_xstrdup(w->detail);
		/*
		 * The name the warning carries, as the console shows it: a
		 * warning kept from before the stream began (Warning.history:
		 * a file recorded from outside) is often about a task that
		 * ended before, which no update of the file names.  Else the
		 * name now: it is forgotten a while after the task ends.
		 */
		x->label = NULL;
		if (w->task && w->task_name && w->task_name[0])
			x->label = tt_xstrdup(w->task_name);
		else if (w->task && tt_task(t, w->task) &&
			 tt_task(t, w->task)->name[0])
			x->label = tt_xstrdup(tt_task(t, w->task)->name);
	}
}
