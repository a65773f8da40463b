/* SPDX-License-Identifier: MIT */
/*
 * Delta streams: Update records at a consumer's own interval, filtered
 * and thinned (delta_internal.h has the model).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "delta_internal.h"

/* Warnings kept between two records of a stream (the oldest go first). */
#define WARN_CAP 1024u

/* ------------------------------------------------------------ filters */

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * The worker bitmap of @m's workers (*@nwords words up to the highest
 * named, NULL and 0 for none).  Return: 0; -EINVAL (a worker that is
 * neither < WEFT_DELTA_FILTER_MAX_WORKERS nor 65535); -ENOMEM.
 */
static int worker_bits(const Weft__V1__Filter *m, uint64_t **bits,
		       size_t *nwords)
{
	uint32_t top = 0;
	bool any = false;

	*bits = NULL;
	*nwords = 0;
	for (size_t i = 0; i < m->n_workers; i++) {
		if (m->workers[i] == WEFT_EVENT_NO_WORKER)
			continue;
		if (m->workers[i] >= WEFT_DELTA_FILTER_MAX_WORKERS)
			return -EINVAL;
		if (!any || m->workers[i] > top)
			top = m->workers[i];
		any = true;
	}
	if (!any)
		return 0;
	*bits = calloc(top / 64 + 1, sizeof(**bits));
	if (!*bits)
		return -ENOMEM;
	*nwords = top / 64 + 1;
	for (size_t i = 0; i < m->n_workers; i++)
		if (m->workers[i] != WEFT_EVENT_NO_WORKER)
			(*bits)[m->workers[i] / 64] |= 1ull
						       << (m->workers[i] % 64);
	return 0;
}

/*
 * weft__delta_filter_set() - @f from a Subscribe's Filter (NULL: none).
 * Return: 0; -EINVAL (a worker that is neither < 4,096 nor 65535, a kind
 * >= 32, more than WEFT_DELTA_FILTER_MAX_TASKS tasks); -ENOMEM.  @f is
 * empty on error.
 */
int weft__delta_filter_set(weft_delta_filter_t *f, const Weft__V1__Filter *m)
{
	size_t n = 0;
	int err;

	memset(f, 0, sizeof(*f));
	if (!m)
		return 0;
	if (m->n_tasks > WEFT_DELTA_FILTER_MAX_TASKS)
		return -EINVAL;
	err = worker_bits(m, &f->workers, &f->nwords);
	if (err)
		return err;
	for (size_t i = 0; i < m->n_workers; i++)
		if (m->workers[i] == WEFT_EVENT_NO_WORKER)
			f->other_threads = true;
	for (size_t i = 0; i < m->n_kinds; i++) {
		if (m->kinds[i] >= 64)
			goto out_inval;
		f->kinds |= 1ull << m->kinds[i];
	}
	if (m->n_tasks) {
		f->tasks = malloc(m->n_tasks * sizeof(*f->tasks));
		if (!f->tasks) {
			weft__delta_filter_fini(f);
			return -ENOMEM;
		}
		memcpy(f->tasks, m->tasks, m->n_tasks * sizeof(*f->tasks));
		qsort(f->tasks, m->n_tasks, sizeof(*f->tasks), u64_cmp);
		for (size_t i = 0; i < m->n_tasks; i++)
			if (!n || f->tasks[n - 1] != f->tasks[i])
				f->tasks[n++] = f->tasks[i];
		f->ntasks = n;
	}
	return 0;

out_inval:
	weft__delta_filter_fini(f);
	return -EINVAL;
}

void weft__delta_filter_fini(weft_delta_filter_t *f)
{
	free(f->tasks);
	free(f->workers);
	memset(f, 0, sizeof(*f));
}

bool weft__delta_filter_equal(const weft_delta_filter_t *a,
			      const weft_delta_filter_t *b)
{
	return a->nwords == b->nwords &&
	       (!a->nwords || !memcmp(a->workers, b->workers,
				      a->nwords * sizeof(*a->workers))) &&
	       a->other_threads == b->other_threads && a->kinds == b->kinds &&
	       a->ntasks == b->ntasks &&
	       (!a->ntasks ||
		!memcmp(a->tasks, b->tasks, a->ntasks * sizeof(*a->tasks)));
}

/* Return: 0; -ENOMEM (@dst empty). */
int weft__delta_filter_copy(weft_delta_filter_t *dst,
			    const weft_delta_filter_t *src)
{
	*dst = *src;
	dst->tasks = NULL;
	dst->workers = NULL;
	if (src->nwords) {
		dst->workers = malloc(src->nwords * sizeof(*dst->workers));
		if (!dst->workers)
			goto out_nomem;
		memcpy(dst->workers, src->workers,
		       src->nwords * sizeof(*dst->workers));
	}
	if (!src->ntasks)
		return 0;
	dst->tasks = malloc(src->ntasks * sizeof(*dst->tasks));
	if (!dst->tasks)
		goto out_nomem;
	memcpy(dst->tasks, src->tasks, src->ntasks * sizeof(*dst->tasks));
	return 0;

out_nomem:
	weft__delta_filter_fini(dst);
	return -ENOMEM;
}

static bool filter_task(const weft_delta_filter_t *f, uint64_t id)
{
	return !f->ntasks ||
	       bsearch(&id, f->tasks, f->ntasks, sizeof(id), u64_cmp);
}

static bool filter_worker(const weft_delta_filter_t *f, uint32_t w)
{
	if (!f->nwords && !f->other_threads)
		return true;
	if (w == WEFT_EVENT_NO_WORKER)
		return f->other_threads;
	return w / 64 < f->nwords && (f->workers[w / 64] >> (w % 64) & 1);
}

bool weft__delta_filter_event(const weft_delta_filter_t *f,
			      const weft_event_t *ev)
{
	if (f->kinds && (ev->kind >= 64 || !(f->kinds >> ev->kind & 1)))
		return false;
	/*
	 * An await site's announcement goes with the POLLs that may name
	 * the site: let through on its worker whatever tasks were asked
	 * for (its task field is the site's id, no task's).  A stream of
	 * chosen kinds gets it when it asks for it: its POLLs' sites are
	 * then not known.
	 */
	if (ev->kind == WEFT_EV_AWAIT_SITE)
		return filter_worker(f, ev->worker);
	/* RES_NAME, SITE and SITE_LOC are no task's events. */
	return filter_worker(f, ev->worker) &&
	       filter_task(f, weft_event_task(ev));
}

/*
 * weft__delta_events() - the events of @ev the stream's filter lets
 * through: @ev itself when it has no filter, else a scratch copy (valid
 * until the next call).  *@n is updated; NULL for no memory.
 */
const weft_event_t *weft__delta_events(weft_delta_t *d, const weft_event_t *ev,
				       size_t *n)
{
	const weft_delta_filter_t *f = &d->filter;
	size_t k = 0;

	if (!f->ntasks && !f->nwords && !f->other_threads && !f->kinds)
		return ev;
	if (*n > d->events_cap) {
		weft_event_t *e = realloc(d->events, *n * sizeof(*e));

		if (!e)
			return NULL;
		d->events = e;
		d->events_cap = *n;
	}
	for (size_t i = 0; i < *n; i++)
		if (weft__delta_filter_event(f, &ev[i]))
			d->events[k++] = ev[i];
	*n = k;
	return d->events;
}

/* ------------------------------------------------------------ streams */

/*
 * The Task records of the collector's publish, shared by the streams
 * (delta_internal.h).  Used only in weft__delta_pass(), on the
 * collector thread with probe.lock held; memo_lock guards the count of
 * streams holding it and its freeing by the last one (weft__delta_fini(),
 * any thread, after its stream's last pass: a stream still passing
 * holds a reference, so the memo is never freed under it).
 */
static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;
static weft_wire_task_memo_t memo;
static unsigned memo_users;

/*
 * The memo for @d's pass (begun for its publish), or NULL: none shared,
 * or @d its only user (the encoder's own, unindexed, costs less than the
 * memo's index that nobody else would read: callgrind, a recorder
 * alone).
 */
static weft_wire_task_memo_t *memo_for(weft_delta_t *d)
{
	unsigned users;

	if (!d->pass_seq)
		return NULL;
	pthread_mutex_lock(&memo_lock);
	if (!d->memo_user) {
		memo_users++;
		d->memo_user = true;
	}
	users = memo_users;
	pthread_mutex_unlock(&memo_lock);
	if (users < 2)
		return NULL;
	weft_wire_task_memo_begin(&memo, d->pass_seq);
	return &memo;
}

/*
 * Streams that share the memo (pass_seq set) and one interval send in
 * the same passes, without ever sending sooner than their interval: a
 * stream due that the last send of its interval's anchor (any such
 * stream's, the latest) would have waiting less than another interval
 * more waits for the anchor's next one (its records then the same as
 * the others'), and joins a send made in this very pass.  Once joined,
 * streams of one interval stay together: the same rule on the same
 * passes.  So too the histograms' once a second.  Collector thread,
 * probe.lock held (weft__delta_pass()).
 */
#define ANCHORS 16u
static struct anchor {
	uint64_t every; /* 0: free */
	bool hists;     /* the histograms' (else records') */
	uint64_t at;    /* the latest send, on the collector's clock */
} anchors[ANCHORS];

static struct anchor *anchor_of(uint64_t every, bool hists)
{
	struct anchor *free_slot = NULL;

	for (unsigned i = 0; i < ANCHORS; i++) {
		if (anchors[i].every == every && anchors[i].hists == hists)
			return &anchors[i];
		if (!anchors[i].every && !free_slot)
			free_slot = &anchors[i];
	}
	if (free_slot) {
		free_slot->every = every;
		free_slot->hists = hists;
	}
	return free_slot; /* NULL: too many intervals, none aligned */
}

/*
 * Whether something due every @every, last at @last, goes in the pass at
 * @now (@d's, shared or not).  Never sooner than @every after @last; at
 * most 2 * @every after it (a wait for the anchor is shorter).
 */
static bool due(const weft_delta_t *d, uint64_t every, bool hists,
		uint64_t last, uint64_t now)
{
	struct anchor *a;

	if (now - last < every)
		return false;
	if (!d->pass_seq || !every || !(a = anchor_of(every, hists)))
		return true;
	/* The anchor's next send within the wait allowed: this one's. */
	if (a->at != now && a->at + every > now &&
	    a->at + every - last <= 2 * every)
		return false;
	a->at = now;
	return true;
}

void weft__delta_init(weft_delta_t *d)
{
	memset(d, 0, sizeof(*d));
}

void weft__delta_fini(weft_delta_t *d)
{
	if (d->memo_user) {
		pthread_mutex_lock(&memo_lock);
		if (--memo_users == 0)
			weft_wire_task_memo_fini(&memo);
		pthread_mutex_unlock(&memo_lock);
	}
	weft__idset_fini(&d->dirty);
	free(d->dirty_ids);
	weft__idset_fini(&d->known);
	weft__idset_fini(&d->sites_sent);
	free(d->site_out);
	weft__delta_filter_fini(&d->filter);
	free(d->warn);
	free(d->tasks);
	free(d->copies);
	free(d->res);
	free(d->res_index);
	free(d->res_out);
	free(d->workers);
	free(d->events);
	weft__delta_init(d);
}

/* weft__delta_forget() - send names, files and sites again (a new file,
 * a resync). */
void weft__delta_forget(weft_delta_t *d)
{
	weft__idset_clear(&d->known);
	weft__idset_clear(&d->sites_sent);
	d->awaits_sent = 0;
}

static bool filter_warning(const weft_delta_filter_t *f,
			   const weft_probe_warning_t *w)
{
	if (f->ntasks && !filter_task(f, w->task))
		return false;
	return w->worker == WEFT_EVENT_NO_WORKER || filter_worker(f, w->worker);
}

/*
 * Keeps the warnings of @w the filter passes: the last WARN_CAP of those
 * kept and those, the oldest going first.  One move for the lot (a move
 * of the whole list per warning was a quarter megabyte each once a task
 * per request raised one).  Return: 0; -ENOMEM (@d unchanged).
 */
static int warn_keep(weft_delta_t *d, const weft_probe_warning_t *w, size_t n)
{
	size_t m = 0, skip, drop, need, cap = d->warn_cap;

	for (size_t i = 0; i < n; i++)
		m += filter_warning(&d->filter, &w[i]);
	if (!m)
		return 0;
	skip = m > WARN_CAP ? m - WARN_CAP : 0; /* new ones never kept */
	need = d->nwarn + (m - skip);
	drop = need > WARN_CAP ? need - WARN_CAP : 0; /* kept ones that go */
	need -= drop;
	while (cap < need)
		cap = cap ? 2 * cap : 16;
	if (cap != d->warn_cap) {
		weft_probe_warning_t *x = realloc(d->warn, cap * sizeof(*x));

		if (!x)
			return -ENOMEM;
		d->warn = x;
		d->warn_cap = cap;
	}
	if (drop) {
		memmove(d->warn, d->warn + drop,
			(d->nwarn - drop) * sizeof(*d->warn));
		d->nwarn -= drop;
	}
	for (size_t i = 0; i < n; i++) {
		if (!filter_warning(&d->filter, &w[i]))
			continue;
		if (skip) {
			skip--;
			continue;
		}
		d->warn[d->nwarn++] = w[i];
	}
	return 0;
}

/*
 * Empties @s after a record, and gives most of its memory back when it
 * held (@used) far less than it has room for: after a burst of changes
 * every later clear and scan would be at the burst's size.
 */
static void idset_reset(weft_idset_t *s, size_t used)
{
	size_t want = 64;
	uint64_t *slot;

	while (want < 4 * used)
		want *= 2;
	if (s->cap <= 8 * want) {
		weft__idset_clear(s);
		return;
	}
	slot = calloc(want, sizeof(*slot));
	if (!slot) {
		weft__idset_clear(s);
		return;
	}
	free(s->slot);
	s->slot = slot;
	s->cap = want;
	s->n = 0;
}

/* Task @id changed since the last record: in the dirty set, and last in
 * dirty_ids when new to it (a record walks dirty_ids, not the set's two
 * to eight times as many slots).  Return: 0; -ENOMEM (@d unchanged). */
static int dirty_add(weft_delta_t *d, uint64_t id)
{
	size_t n = d->dirty.n;
	int err;

	if (n >= d->dirty_ids_cap) {
		size_t cap = n ? 2 * n : 64;
		uint64_t *x = realloc(d->dirty_ids, cap * sizeof(*x));

		if (!x)
			return -ENOMEM;
		d->dirty_ids = x;
		d->dirty_ids_cap = cap;
	}
	err = weft__idset_add(&d->dirty, id);
	if (err)
		return err;
	if (d->dirty.n != n)
		d->dirty_ids[n] = id;
	return 0;
}

/* After a record: the dirty set empty, idset_reset()'s way. */
static void dirty_reset(weft_delta_t *d)
{
	size_t used = d->dirty.n;

	idset_reset(&d->dirty, used);
	if (d->dirty_ids_cap > 256 && d->dirty_ids_cap > 8 * used) {
		free(d->dirty_ids);
		d->dirty_ids = NULL;
		d->dirty_ids_cap = 0;
	}
}

static int scratch_tasks(weft_delta_t *d, size_t n)
{
	const weft_probe_task_t **t;
	weft_probe_task_t *c;

	if (n <= d->tasks_cap)
		return 0;
	t = realloc(d->tasks, n * sizeof(*t));
	if (!t)
		return -ENOMEM;
	d->tasks = t;
	c = realloc(d->copies, n * sizeof(*c));
	if (!c)
		return -ENOMEM;
	d->copies = c;
	d->tasks_cap = n;
	return 0;
}

/*
 * Whether @t is named by its spawn site (its four fields the site's), the
 * site's record then in the record being built if this stream has not
 * sent it.  False (the strings go out) when the site is not known or no
 * memory is left to list it.
 */
/* Site @s in the record being built (false: no memory). */
static bool site_out(weft_delta_t *d, const weft_wire_site_t *s)
{
	if (d->nsite_out == d->site_out_cap) {
		size_t cap = d->site_out_cap ? 2 * d->site_out_cap : 16;
		weft_wire_site_t *x = realloc(d->site_out, cap * sizeof(*x));

		if (!x)
			return false;
		d->site_out = x;
		d->site_out_cap = cap;
	}
	if (weft__idset_add(&d->sites_sent, s->id))
		return false;
	d->site_out[d->nsite_out++] = *s;
	return true;
}

static bool site_names(weft_delta_t *d, const weft_probe_task_t *t)
{
	const weft_wire_site_t *s = &d->site_last;

	if (!t->site || !d->site)
		return false;
	/* The tasks of a pass come from few sites, one after another
	 * often (a task per request): the last one's look kept for the
	 * pass (weft__delta_pass() forgets it). */
	if (t->site != d->site_last_id) {
		d->site_last_id = t->site;
		d->site_last_ok = d->site(t->site, &d->site_last) &&
				  d->site_last.id == t->site;
		d->site_last_sent = false;
	}
	if (!d->site_last_ok || s->name != t->name || s->file != t->file ||
	    s->line != t->line || s->state_size != t->state_size)
		return false;
	if (!d->site_last_sent)
		d->site_last_sent = weft__idset_has(&d->sites_sent, t->site) ||
				    site_out(d, s);
	return d->site_last_sent;
}

/*
 * Every await site the collector knows that this stream has not sent, in
 * the record being built: the POLLs of its events name them by id, and a
 * reader that came late (a file begun mid-run, a second console, a
 * snapshot) or lost the AWAIT_SITE that announced one learns them here
 * (weft/wire.h: WEFT_WIRE_AWAIT_SITE_BASE).  A look at each only when the
 * collector met a new one since; all again after a full update or a
 * forget (sites_sent cleared).  No memory: the next record tries again.
 */
static void awaits_out(weft_delta_t *d)
{
	uint32_t slots = 0, known;
	weft_wire_site_t s;

	if (!d->await_known || !d->await_site)
		return;
	known = d->await_known(&slots);
	if (known == d->awaits_sent)
		return;
	for (uint32_t id = 1; id < slots; id++)
		if (d->await_site(id, &s) &&
		    !weft__idset_has(&d->sites_sent, s.id) && !site_out(d, &s))
			return;
	d->awaits_sent = known;
}

/*
 * Adds the thinned copy of @t to the record being built (@t itself when
 * nothing is left out: a task's first and last record, often both; and a
 * task named by its site, whose strings the encoder leaves out,
 * weft_wire_update_append_sites(): no copy of the record for it).  A
 * task with a site that cannot name it goes as a copy with no site, its
 * strings in.
 */
static void task_take(weft_delta_t *d, size_t *n, const weft_probe_task_t *t,
		      bool full, bool hists)
{
	weft_probe_task_t *c = &d->copies[*n];
	bool thin_name = false, by_site = site_names(d, t);
	bool thin_hists = !full && !hists && !t->finished_ns && !d->final &&
			  (t->poll_hist || t->sched_hist);

	if (by_site) {
		/* Its strings left out by the encoder. */
	} else if (!full && weft__idset_has(&d->known, t->id)) {
		thin_name = t->name || t->file || t->line;
	} else if (!t->finished_ns && (t->name || t->file)) {
		/* Known once a name or file went out (a task the collector
		 * cannot name yet is sent again when it can).  No memory:
		 * the name goes out again next time. */
		(void)weft__idset_add(&d->known, t->id);
	}
	/* Its last record: the reader keeps it until it retires it. */
	if (t->finished_ns)
		weft__idset_remove(&d->known, t->id);
	if (!thin_name && !thin_hists && (by_site || !t->site)) {
		d->tasks[(*n)++] = t;
		return;
	}
	*c = *t;
	if (!by_site)
		c->site = 0;
	if (thin_name) {
		c->name = NULL;
		c->file = NULL;
		c->line = 0;
	}
	if (thin_hists) {
		c->poll_hist = NULL;
		c->sched_hist = NULL;
	}
	d->tasks[(*n)++] = c;
}

/* ---------------------------------------------------------- resources */

/* Whether the filter passes @r: no task filter, or one of its tasks. */
static bool filter_resource(const weft_delta_filter_t *f,
			    const weft_probe_resource_t *r)
{
	uint32_t nh = r->nholders < WEFT_RES_LIST ? r->nholders :
						    WEFT_RES_LIST;
	uint32_t nw = r->nwaiters < WEFT_RES_LIST ? r->nwaiters :
						    WEFT_RES_LIST;

	if (!f->ntasks)
		return true;
	if (r->owner && filter_task(f, r->owner))
		return true;
	for (uint32_t i = 0; i < nh; i++)
		if (filter_task(f, r->holders[i]))
			return true;
	for (uint32_t i = 0; i < nw; i++)
		if (filter_task(f, r->waiters[i]))
			return true;
	return false;
}

/* Index entries for @n copies: a power of two, at most half full. */
static int res_index_build(weft_delta_t *d, size_t n)
{
	size_t cap = 64;

	while (cap < 2 * n)
		cap *= 2;
	if (cap != d->res_index_cap) {
		uint32_t *x = calloc(cap, sizeof(*x));

		if (!x)
			return -ENOMEM;
		free(d->res_index);
		d->res_index = x;
		d->res_index_cap = cap;
	} else {
		memset(d->res_index, 0, cap * sizeof(*d->res_index));
	}
	for (size_t i = 0; i < d->nres; i++) {
		size_t j = weft__idset_hash(d->res[i].r.id, cap);

		while (d->res_index[j])
			j = (j + 1) & (cap - 1);
		d->res_index[j] = (uint32_t)i + 1;
	}
	return 0;
}

/*
 * Keeps a copy of @r (replacing the one of the same id), its histograms
 * copied.  Return: 0; -ENOMEM (the copies unchanged).
 */
static int res_keep(weft_delta_t *d, const weft_probe_resource_t *r)
{
	weft_delta_res_t *c;
	size_t j;

	if (!r->id)
		return 0;
	if (d->res_index_cap)
		for (j = weft__idset_hash(r->id, d->res_index_cap);
		     d->res_index[j]; j = (j + 1) & (d->res_index_cap - 1))
			if (d->res[d->res_index[j] - 1].r.id == r->id)
				goto out_copy;
	if (d->nres == d->res_cap) {
		size_t cap = d->res_cap ? 2 * d->res_cap : 16;
		weft_delta_res_t *x;
		const weft_probe_resource_t **o;

		if (cap > UINT32_MAX - 1)
			return -ENOMEM;
		x = realloc(d->res, cap * sizeof(*x));
		if (!x)
			return -ENOMEM;
		/* The copies moved: res_take() points into them again. */
		d->res = x;
		o = realloc(d->res_out, cap * sizeof(*o));
		if (!o)
			return -ENOMEM;
		d->res_out = o;
		d->res_cap = cap;
	}
	if (2 * (d->nres + 1) > d->res_index_cap &&
	    res_index_build(d, d->nres + 1))
		return -ENOMEM;
	for (j = weft__idset_hash(r->id, d->res_index_cap); d->res_index[j];
	     j = (j + 1) & (d->res_index_cap - 1))
		;
	d->res_index[j] = (uint32_t)++d->nres;
out_copy:
	c = &d->res[d->res_index[j] - 1];
	c->r = *r;
	c->r.wait_hist = NULL;
	c->r.hold_hist = NULL;
	c->has_hist[0] = r->wait_hist != NULL;
	c->has_hist[1] = r->hold_hist != NULL;
	if (r->wait_hist)
		c->hist[0] = *r->wait_hist;
	if (r->hold_hist)
		c->hist[1] = *r->hold_hist;
	return 0;
}

/*
 * A full pass: the copies are the pass's resources, and those dropped
 * since the last record that the pass no longer lists (their last
 * record is still owed).  Return: 0; -ENOMEM.
 */
static int res_full(weft_delta_t *d, const weft_probe_update_t *u)
{
	size_t k = 0;
	int err;

	for (size_t i = 0; i < d->nres; i++)
		if (d->res[i].r.dropped_ns)
			d->res[k++] = d->res[i];
	d->nres = k;
	err = res_index_build(d, k);
	for (size_t i = 0; !err && i < u->nresources; i++)
		if (filter_resource(&d->filter, u->resources[i]))
			err = res_keep(d, u->resources[i]);
	return err;
}

/*
 * The copies as the record's list; histograms left out unless due
 * (@hists) or the resource's last record.
 */
static size_t res_take(weft_delta_t *d, bool hists)
{
	for (size_t i = 0; i < d->nres; i++) {
		weft_delta_res_t *c = &d->res[i];
		bool send = hists || c->r.dropped_ns || d->final;

		c->r.wait_hist = send && c->has_hist[0] ? &c->hist[0] : NULL;
		c->r.hold_hist = send && c->has_hist[1] ? &c->hist[1] : NULL;
		d->res_out[i] = &c->r;
	}
	return d->nres;
}

/* After a record: the copies let go, most of their memory too when far
 * more than was used. */
static void res_reset(weft_delta_t *d)
{
	if (d->res_cap > 256 && d->res_cap > 8 * d->nres) {
		free(d->res);
		free(d->res_out);
		free(d->res_index);
		d->res = NULL;
		d->res_out = NULL;
		d->res_index = NULL;
		d->res_cap = 0;
		d->res_index_cap = 0;
	} else if (d->res_index_cap) {
		memset(d->res_index, 0,
		       d->res_index_cap * sizeof(*d->res_index));
	}
	d->nres = 0;
}

/*
 * weft__delta_pass() - fold one collector pass into @d; when the interval
 * has passed (or the pass is full), append its Update record(s) to @out.
 * @full: set when what was appended is a full update.
 *
 * Return: 1 (records appended), 0 (not due yet), -ENOMEM (nothing
 * appended; what changed is kept for the next try), -EMSGSIZE (the
 * update could not be split under max_record: it is lost).
 */
int weft__delta_pass(weft_delta_t *d, const weft_probe_update_t *u,
		     weft_wire_buf_t *out, bool *full)
{
	weft_probe_update_t r = *u;
	uint64_t now = u->stats ? u->stats->now_ns : 0;
	size_t n = 0, nw = 0;
	bool hists;
	int err;

	*full = false;
	/* The sites may have changed since the last pass. */
	d->site_last_id = 0;
	err = warn_keep(d, u->warnings, u->nwarnings);
	if (err)
		return err;
	if (u->full)
		err = res_full(d, u);
	else
		for (size_t i = 0; !err && i < u->nresources; i++)
			if (filter_resource(&d->filter, u->resources[i]))
				err = res_keep(d, u->resources[i]);
	if (err)
		return err;
	d->nsite_out = 0;
	if (u->full) {
		weft__idset_clear(&d->dirty);
		weft__idset_clear(&d->known);
		weft__idset_clear(&d->sites_sent);
		d->awaits_sent = 0;
		err = scratch_tasks(d, u->ntasks);
		if (err)
			return err;
		for (size_t i = 0; i < u->ntasks; i++)
			if (filter_task(&d->filter, u->tasks[i]->id))
				task_take(d, &n, u->tasks[i], true, true);
		hists = true;
	} else {
		for (size_t i = 0; i < u->ntasks; i++) {
			/*
			 * The records eight on, and the dirty set's slot of
			 * the one four on, fetched now: the set holds a
			 * record's worth of ids (thousands, hashed), and the
			 * records are out of cache after the pass (perf,
			 * /fast-task: nearly all of the adds' time on the
			 * slot's first load).
			 */
			if (i + 8 < u->ntasks)
				__builtin_prefetch(&u->tasks[i + 8]->id);
			if (i + 4 < u->ntasks && d->dirty.cap)
				__builtin_prefetch(
					&d->dirty.slot[weft__idset_hash(
						u->tasks[i + 4]->id,
						d->dirty.cap)]);
			if (!filter_task(&d->filter, u->tasks[i]->id))
				continue;
			err = dirty_add(d, u->tasks[i]->id);
			if (err)
				return err;
		}
		if (d->emitted && !d->final &&
		    !due(d, d->interval_ns, false, d->last_emit_ns, now))
			return 0;
		err = scratch_tasks(d, d->dirty.n);
		if (err)
			return err;
		hists = due(d, WEFT_DELTA_HIST_EVERY_NS, true, d->last_hist_ns,
			    now);
		for (size_t i = 0; i < d->dirty.n; i++) {
			uint64_t id = d->dirty_ids[i];

			/* The record eight on, out of cache since its pass
			 * (perf, /fast-task: the lookup's walk waited on
			 * each, 6% of the collector's samples). */
			if (d->lookup_ahead && i + 8 < d->dirty.n)
				d->lookup_ahead(d->dirty_ids[i + 8]);
			/* Gone: finished long ago and forgotten. */
			const weft_probe_task_t *t = d->lookup ? d->lookup(id) :
								 NULL;

			if (t)
				task_take(d, &n, t, false, hists);
			else
				weft__idset_remove(&d->known, id);
		}
	}
	if (d->filter.nwords || d->filter.other_threads) {
		/* At most the filter's: its words' workers. */
		size_t cap = d->filter.nwords * 64;

		if (cap > u->nworkers)
			cap = u->nworkers;
		if (cap > d->workers_cap) {
			weft_probe_worker_t *w =
				realloc(d->workers, cap * sizeof(*w));

			if (!w)
				return -ENOMEM;
			d->workers = w;
			d->workers_cap = cap;
		}
		for (size_t i = 0; i < u->nworkers && nw < cap; i++)
			if (filter_worker(&d->filter, u->workers[i].index))
				d->workers[nw++] = u->workers[i];
		r.workers = d->workers;
		r.nworkers = nw;
	}
	awaits_out(d);
	r.tasks = d->tasks;
	r.ntasks = n;
	r.warnings = d->warn;
	r.nwarnings = d->nwarn;
	r.resources = d->res_out;
	r.nresources = res_take(d, hists);
	d->full_warn_bytes =
		u->full && r.nwarnings ? weft__delta_warn_bytes(d, &r) : 0;
	err = weft_wire_update_append_sites(out, &r, d->site_out, d->nsite_out,
					    d->prev_now_ns, d->max_record,
					    memo_for(d));
	/* Sites that did not go out: the next record naming them sends
	 * them. */
	for (size_t i = 0; err && i < d->nsite_out; i++)
		weft__idset_remove(&d->sites_sent, d->site_out[i].id);
	if (err)
		d->awaits_sent = 0;
	d->nsite_out = 0;
	if (err == -ENOMEM)
		return err;
	dirty_reset(d);
	res_reset(d);
	d->nwarn = 0;
	d->emitted = true;
	d->last_emit_ns = now;
	d->prev_now_ns = now;
	if (hists)
		d->last_hist_ns = now;
	if (err)
		return err;
	*full = u->full;
	return 1;
}
