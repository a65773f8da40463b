/* SPDX-License-Identifier: MIT */
/*
 * Resources in the collector (issue 18): what the RES_* events say of
 * each async mutex, semaphore, notify, channel, countdown, oneshot and
 * the blocking pool (its holders and waiters now, its wait and hold
 * times, its rate), what each task waits on, and the lists published.
 * The warnings of the waiting side are collector_res_warn.c's.
 *
 * Bounds.  At most RES_MAX resources are tracked (more are counted, not
 * kept), each with at most RES_TRACK holders and waiters listed (the
 * counts stay whole).  A dropped resource is published once more, then
 * freed.  All under probe.lock, on the collector thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector_res_internal.h"

static size_t res_hash(const struct probe *p, uint64_t id)
{
	/* Ids come from one counter: low bits spread them. */
	return (size_t)id & (p->res_table_size - 1);
}

static res_rec_t *res_find(struct probe *p, uint64_t id)
{
	res_rec_t *r;

	if (!p->res_table)
		return NULL;
	for (r = p->res_table[res_hash(p, id)]; r; r = r->hnext)
		if (r->pub.id == id)
			return r;
	return NULL;
}

static void res_grow(struct probe *p)
{
	size_t size = p->res_table_size ? p->res_table_size * 2 : 256;
	res_rec_t **t = calloc(size, sizeof(*t));

	if (!t)
		return;
	for (size_t i = 0; i < p->res_table_size; i++) {
		res_rec_t *r = p->res_table[i], *next;

		for (; r; r = next) {
			next = r->hnext;
			r->hnext = t[(size_t)r->pub.id & (size_t)(size - 1)];
			t[(size_t)r->pub.id & (size_t)(size - 1)] = r;
		}
	}
	free(p->res_table);
	p->res_table = t;
	p->res_table_size = size;
}

/* The record of resource @id, made when new (NULL past RES_MAX). */
static res_rec_t *res_get(struct probe *p, uint64_t id, uint64_t ts)
{
	res_rec_t *r = res_find(p, id);
	size_t h;

	if (r)
		return r;
	if (p->nres >= RES_MAX) {
		p->res_overflow++;
		return NULL;
	}
	if (p->nres >= p->res_table_size / 2 * 3 || !p->res_table)
		res_grow(p);
	if (!p->res_table || !(r = calloc(1, sizeof(*r))))
		return NULL;
	r->pub.id = id;
	r->pub.created_ns = ts;
	r->rate_at = ts;
	h = res_hash(p, id);
	r->hnext = p->res_table[h];
	p->res_table[h] = r;
	p->nres++;
	res_changed(p, r);
	return r;
}

static weft_hist_t *res_hist(res_rec_t *r, unsigned i)
{
	if (!r->hists)
		r->hists = calloc(2, sizeof(*r->hists));
	if (!r->hists)
		return NULL;
	r->pub.wait_hist = &r->hists[0];
	r->pub.hold_hist = &r->hists[1];
	return &r->hists[i];
}

/* Appends to a growing array of at most RES_TRACK: false when full. */
static bool track_grow(void **arr, uint32_t *cap, uint32_t n, size_t size)
{
	uint32_t c;
	void *a;

	if (n < *cap)
		return true;
	if (n >= RES_TRACK)
		return false;
	c = *cap ? *cap * 2 : 4;
	if (c > RES_TRACK)
		c = RES_TRACK;
	a = realloc(*arr, (size_t)c * size);
	if (!a)
		return false;
	*arr = a;
	*cap = c;
	return true;
}

/* ----------------------------------------------------------- tasks */

/*
 * A wait is pushed during the poll and the poll's event at its end, both
 * on the worker's ring, while the spawn went on the spawner's: read in a
 * pass after the worker's (or in the next pass), it leaves the wait the
 * first word of a task, which is made here as a poll would make it.
 * Missed, the resource listed the waiter while the task showed nothing.
 */
static void task_waits(struct probe *p, uint64_t task, uint64_t id, uint64_t ts,
		       uint8_t op)
{
	task_rec_t *t = weft__collector_task_get(p, task, ts);

	if (!t || t->in_done)
		return;
	t->pub.waiting_on = id;
	t->pub.waiting_since_ns = ts;
	t->pub.waiting_op = op;
	weft__collector_task_changed(p, t);
}

/*
 * @t waited @ns more on resource @id: its total there, among the
 * WEFT_TASK_WAITED resources it waited on longest, kept longest first
 * (a resource new to a full table takes the last place if it beats it).
 */
static void task_wait_add(task_rec_t *t, uint64_t id, uint64_t ns)
{
	weft_probe_task_wait_t *w = t->pub.waited;
	uint8_t n = t->pub.nwaited, i;

	for (i = 0; i < n && w[i].res != id; i++)
		;
	if (i == n) {
		if (n < WEFT_TASK_WAITED)
			t->pub.nwaited = ++n;
		else if (ns <= w[n - 1].total_ns)
			return;
		i = n - 1;
		w[i] = (weft_probe_task_wait_t){ .res = id };
	}
	w[i].total_ns += ns;
	w[i].waits++;
	/* Up to its place: the table is short. */
	for (; i > 0 && w[i].total_ns > w[i - 1].total_ns; i--) {
		weft_probe_task_wait_t x = w[i];

		w[i] = w[i - 1];
		w[i - 1] = x;
	}
}

/*
 * @task's wait on resource @id ended at @ts: added to its total there,
 * from @since (the waiter's start, as the resource listed it) or else
 * from when the task was seen to begin waiting on @id.  It waits on
 * nothing now, unless a later wait (a timeout's sleep around a receive)
 * is the one it shows.
 */
static void task_waited(struct probe *p, uint64_t task, uint64_t id,
			uint64_t since, uint64_t ts)
{
	task_rec_t *t = task ? weft__collector_task_find(p, task) : NULL;

	if (!t)
		return;
	if (!since && t->pub.waiting_on == id)
		since = t->pub.waiting_since_ns;
	if (since && ts > since)
		task_wait_add(t, id, ts - since);
	if (t->pub.waiting_on == id) {
		t->pub.waiting_on = 0;
		t->pub.waiting_since_ns = 0;
		t->pub.waiting_op = 0;
	}
	weft__collector_task_changed(p, t);
}

/* --------------------------------------------------------- the events */

/*
 * An end that came before its start.  The rings are merged a pass at a
 * time: an event pushed on one ring after its tail was read may have
 * caused one on another ring read later in the same pass (a task moved
 * between workers), so a wait's end or a hold's release can come a pass
 * before the wait or the acquire.  Kept (a few per resource) for the
 * start to find and cancel, instead of leaving a waiter or holder that
 * never ends.
 */
static void early_note(res_rec_t *r, uint8_t kind, uint64_t task, uint64_t ts)
{
	struct res_early *e = &r->early[r->nearly++ % RES_EARLY];

	e->kind = kind;
	e->task = task;
	e->ts = ts;
}

static bool early_take(res_rec_t *r, uint8_t kind, uint64_t task, uint64_t ts,
		       uint64_t *end)
{
	for (unsigned i = 0; i < RES_EARLY; i++) {
		struct res_early *e = &r->early[i];

		if (e->kind == kind && e->task == task && e->ts >= ts) {
			*end = e->ts;
			e->kind = 0;
			return true;
		}
	}
	return false;
}

static bool one_holder(const res_rec_t *r);

static bool on_wait(struct probe *p, res_rec_t *r, const weft_event_t *ev)
{
	uint8_t op = (uint8_t)(ev->a2 & WEFT_RES_OP_MASK);
	uint64_t end;

	if (early_take(r, WEFT_EV_RES_WAIT_END, ev->task, ev->ts, &end))
		return false;
	/*
	 * A task waits once at a time: a wait of its own heard before a gap
	 * in listening (unsure) ended in it, unheard; this one takes its
	 * place.  Added beside it, the next end would take the old one and
	 * leave this one waiting for good (a review: "1 waits > 10 ms,
	 * waiting 2.0 s" of a wait of a tick).
	 */
	for (uint32_t i = 0; r->nunsure && ev->task && i < r->nw; i++) {
		res_waiter_t *w = &r->waiters[i];

		if (w->task != ev->task || !w->unsure)
			continue;
		r->nunsure--;
		*w = (res_waiter_t){ .task = ev->task,
				     .since = ev->ts,
				     .op = op };
		task_waits(p, ev->task, r->pub.id, ev->ts, op);
		return true;
	}
	/*
	 * A countdown's waiter polls again and again: listed once.  A lock
	 * is waited for once by a task at a time: a second RES_WAIT is the
	 * one its seed read already (weft__lock_wait_told()).
	 */
	if (r->pub.kind == WEFT_RES_COUNTDOWN || one_holder(r))
		for (uint32_t i = 0; i < r->nw; i++)
			if (r->waiters[i].task == ev->task)
				return false;
	r->pub.nwaiters++;
	/*
	 * The timer wheel: every sleeping task waits on it, and each end
	 * searches and closes up the list; a short one keeps that cheap
	 * (the rest are counted, their tasks still show what they wait on).
	 */
	if (r->pub.kind == WEFT_RES_TIMER_WHEEL && r->nw >= RES_TRACK_TIMERS)
		;
	else if (track_grow((void **)&r->waiters, &r->capw, r->nw,
			    sizeof(*r->waiters)))
		r->waiters[r->nw++] = (res_waiter_t){ .task = ev->task,
						      .since = ev->ts,
						      .op = op };
	task_waits(p, ev->task, r->pub.id, ev->ts, op);
	return true;
}

static bool on_wait_end(struct probe *p, res_rec_t *r, const weft_event_t *ev)
{
	uint8_t op = (uint8_t)(ev->a2 & WEFT_RES_OP_MASK);
	uint64_t since = 0, waited;
	bool found = false, unsure = false;
	uint32_t at = UINT32_MAX;
	weft_hist_t *h;

	/* Its wait heard since a gap in listening first, if one heard
	 * before it is listed too (on_wait() replaces those, but a wait
	 * read again from the runtime is not one). */
	for (uint32_t i = 0; i < r->nw; i++) {
		if (r->waiters[i].task != ev->task)
			continue;
		at = i;
		if (!r->waiters[i].unsure)
			break;
	}
	if (at != UINT32_MAX) {
		since = r->waiters[at].since;
		unsure = r->waiters[at].unsure;
		r->nunsure -= unsure;
		memmove(&r->waiters[at], &r->waiters[at + 1],
			(r->nw - at - 1) * sizeof(*r->waiters));
		r->nw--;
		found = true;
	}
	task_waited(p, ev->task, r->pub.id, found ? since : 0, ev->ts);
	if (!found) {
		/* Past RES_TRACK: one of the waiters not listed. */
		if (r->pub.nwaiters > r->nw) {
			r->pub.nwaiters--;
			return true;
		}
		/* Its start is yet to come, or never came (a countdown's
		 * READY for a task that did not wait). */
		if (r->pub.kind != WEFT_RES_COUNTDOWN)
			early_note(r, WEFT_EV_RES_WAIT_END, ev->task, ev->ts);
		return false;
	}
	if (r->pub.nwaiters)
		r->pub.nwaiters--;
	if ((ev->a2 & WEFT_RES_CANCELLED) || ev->ts < since)
		return true;
	waited = ev->ts - since;
	r->pub.waits++;
	if ((h = res_hist(r, 0)))
		weft_hist_record(h, waited);
	/*
	 * A wait already warned of as ongoing is not counted again; nor one
	 * across dropped events: its end (or its start) may be what was
	 * lost, and the probe's fault is no holder's.
	 */
	if (waited > p->config.contention_ns && waits_count(r, op) &&
	    res_unsure(p, unsure, since, ev->ts)) {
		p->drops_suppressed++;
	} else if (waited > p->config.contention_ns && waits_count(r, op) &&
		   since != r->ongoing_warned) {
		if (!r->win_waits)
			window_open(r, since);
		r->win_waits++;
		if (waited > r->win_max_wait) {
			r->win_max_wait = waited;
			r->win_wait_task = ev->task;
		}
	}
	return true;
}

/* A lock of one holder at a time: an async mutex, a weft_mutex_t (a
 * review found the sync one left out, two holders listed a pass). */
static bool one_holder(const res_rec_t *r)
{
	return r->pub.kind == WEFT_RES_MUTEX ||
	       r->pub.kind == WEFT_RES_SYNC_MUTEX;
}

/* Resource @id acquired by a thread that is not a worker: kept among
 * p->other_acq_res, if not there yet. */
static void other_acquired(struct probe *p, uint64_t id)
{
	for (unsigned i = 0; i < OTHER_ACQ_RES; i++)
		if (p->other_acq_res[i] == id)
			return;
	p->other_acq_res[p->other_acq_next++ % OTHER_ACQ_RES] = id;
}

static void on_acquire(struct probe *p, res_rec_t *r, const weft_event_t *ev,
		       uint32_t n)
{
	struct res_acq_s *last = weft__collector_has_worker(p, ev->worker) ?
					 &p->wk[ev->worker].res_last_acq :
					 &p->other_last_acq;
	uint64_t end;
	weft_hist_t *h;

	r->pub.acquires++;
	r->rate_acq++;
	last->task = ev->task;
	last->res = r->pub.id;
	if (last == &p->other_last_acq)
		other_acquired(p, r->pub.id);
	/* Released already (its release came first): a hold, over. */
	if (early_take(r, WEFT_EV_RES_RELEASE, ev->task, ev->ts, &end)) {
		/* Its release, counted unheld, was this hold's. */
		if (r->unheld_releases)
			r->unheld_releases--;
		if ((h = res_hist(r, 1)))
			weft_hist_record(h, end - ev->ts);
		return;
	}
	/*
	 * A mutex has one holder: any other listed is stale (its release
	 * lost, or read a pass after this acquire: rings are read one after
	 * another).
	 */
	if (one_holder(r)) {
		r->nh = 0;
		r->pub.nholders = 0;
	}
	for (uint32_t k = 0; k < r->nh; k++) {
		res_holder_t *hk = &r->holders[k];

		if (hk->task != ev->task || !ev->task)
			continue;
		/* More permits for a holder: one entry. */
		hk->count += n;
		return;
	}
	r->pub.nholders++;
	if (track_grow((void **)&r->holders, &r->caph, r->nh,
		       sizeof(*r->holders)))
		r->holders[r->nh++] = (res_holder_t){ .task = ev->task,
						      .since = ev->ts,
						      .count = n };
}

/*
 * A wait that ended holding it: the acquire, where the task waited (its
 * parked site, which its pending POLL, or the PARKED_AT after it, set).
 */
static void on_acquire_waited(struct probe *p, res_rec_t *r,
			      const weft_event_t *ev)
{
	uint32_t n = ev->a2 >> WEFT_RES_COUNT_SHIFT;
	task_rec_t *t = ev->task ? weft__collector_task_find(p, ev->task) :
				   NULL;

	on_acquire(p, r, ev, n ? n : 1);
	if (t && r->nh && r->holders[r->nh - 1].task == ev->task) {
		r->holders[r->nh - 1].file = t->pub.parked_file;
		r->holders[r->nh - 1].line = t->pub.parked_line;
	}
}

static bool on_release(struct probe *p, res_rec_t *r, const weft_event_t *ev)
{
	uint32_t n = ev->a2 ? ev->a2 : 1, i;
	uint64_t held;
	weft_hist_t *h;

	(void)p;
	for (i = 0; i < r->nh; i++)
		if (r->holders[i].task == ev->task)
			break;
	if (i == r->nh) {
		/*
		 * Not a holder.  A mutex unlocked by another task than the
		 * one that locked it (its guard moved): the one holder's.
		 * Else its acquire may be yet to come; or permits released
		 * by a task that never held them (a semaphore used as a
		 * signal): nobody's.
		 */
		if (one_holder(r) && r->nh == 1 &&
		    (r->holders[0].since <= ev->ts || r->holders[0].seeded)) {
			i = 0;
		} else {
			if (r->pub.nholders > r->nh) {
				r->pub.nholders--; /* one not listed */
				return true;
			}
			if (ev->task)
				early_note(r, WEFT_EV_RES_RELEASE, ev->task,
					   ev->ts);
			/* A holder's forgotten in a gap in listening: no
			 * signal of a semaphore used as one. */
			if (r->gap_permits)
				r->gap_permits -=
					n < r->gap_permits ? n : r->gap_permits;
			else
				r->unheld_releases++;
			return true;
		}
	}
	held = ev->ts > r->holders[i].since ? ev->ts - r->holders[i].since : 0;
	if ((h = res_hist(r, 1)))
		weft_hist_record(h, held);
	if (held > r->pub.longest_hold_ns) {
		r->pub.longest_hold_ns = held;
		r->pub.longest_holder = r->holders[i].task;
	}
	window_holder(r, &r->holders[i], held, ev->ts);
	if (r->holders[i].count > n)
		r->holders[i].count -= n;
	else
		holder_drop(r, i);
	return true;
}

/*
 * @r's newest hold of @ev's task that has none of what @ev (a RES_SITE
 * or RES_LABEL) says yet; else, if @any, its newest hold of that task.
 * A task's holds of a resource are one entry, but a plain thread's
 * (task 0) are an entry an acquire: of two pool jobs plain threads
 * submitted, the first's site, come late, is not the second's, named
 * already.
 */
static res_holder_t *holder_of(res_rec_t *r, const weft_event_t *ev, bool any)
{
	res_holder_t *newest = NULL;

	for (uint32_t k = r->nh; k-- > 0;) {
		res_holder_t *h = &r->holders[k];

		if (h->task != ev->task)
			continue;
		if (!(ev->kind == WEFT_EV_RES_LABEL ? (const void *)h->label :
						      (const void *)h->file))
			return h;
		if (!newest)
			newest = h;
	}
	return any ? newest : NULL;
}

/*
 * The holder a RES_SITE or RES_LABEL (@ev) is of: a hold of its task in
 * the resource the last RES_ACQUIRE on this emitting thread named.  The
 * threads that are not workers share that last acquire, and the two
 * pushes of one of them may be a pass apart with another's acquire
 * merged in between: then a hold of its task that has none of what @ev
 * says yet, among the resources they acquired last.  Not by stamp: the
 * clock's rate is refined between passes, so the acquire's stamp and its
 * site's, one raw stamp, may not convert to the same ns.  NULL: none
 * (its acquire lost, or released already).
 */
static res_holder_t *site_holder(struct probe *p, const weft_event_t *ev)
{
	bool worker = weft__collector_has_worker(p, ev->worker);
	struct res_acq_s *last = worker ? &p->wk[ev->worker].res_last_acq :
					  &p->other_last_acq;
	res_holder_t *h;
	res_rec_t *r;

	if (last->task == ev->task && (r = res_find(p, last->res)))
		return holder_of(r, ev, true);
	for (unsigned i = 0; !worker && i < OTHER_ACQ_RES; i++)
		if (p->other_acq_res[i] &&
		    (r = res_find(p, p->other_acq_res[i])) &&
		    (h = holder_of(r, ev, false)))
			return h;
	return NULL;
}

/* RES_SITE, RES_LABEL: of the holder its RES_ACQUIRE made. */
static void on_site(struct probe *p, const weft_event_t *ev)
{
	res_holder_t *h = site_holder(p, ev);

	if (!h)
		return;
	if (ev->kind == WEFT_EV_RES_LABEL) {
		h->label = (const char *)(uintptr_t)ev->a1;
	} else {
		h->file = (const char *)(uintptr_t)ev->a1;
		h->line = ev->a2;
	}
}

/*
 * A wait for lock @w->res that began before this listening period, read
 * from the runtime's slots (lock_wait.c) before this pass's snapshot: as
 * its RES_NEW, RES_NAME and RES_WAIT would have made it, stamped with its
 * real start, and the lock's holder read with it as a hold from its
 * start (a weft_mutex_t's) or else from @now, at least, when no holder
 * is listed (an ACQUIRE of it folded in already, or its
 * seed for another waiter, is newer; its release, still to come, ends
 * it: runtime_probe.h, or any release of it: a guard moved to another
 * task, its clear read late).  The acquire is not counted, nor its site
 * known.  A wait listed already (a second seed, its RES_WAIT read too) is
 * left as it is (on_wait()).
 */
void weft__collector_res_seed_wait(struct probe *p,
				   const weft__lock_wait_info_t *w,
				   uint64_t now)
{
	weft_event_t ev = { .ts = w->since_ns && w->since_ns < now ?
					  w->since_ns :
					  now,
			    .task = w->task,
			    .a1 = w->res,
			    .a2 = w->op,
			    .worker = WEFT_EVENT_NO_WORKER,
			    .kind = WEFT_EV_RES_WAIT };
	res_rec_t *r = res_get(p, w->res, now);

	if (!r || r->pub.dropped_ns)
		return;
	r->pub.kind = w->kind;
	if (w->file && !r->pub.file) {
		r->pub.file = w->file;
		r->pub.line = w->line ? w->line : 1;
	}
	if (w->name)
		r->pub.name = w->name;
	/*
	 * Its holder listed as it is, a task with no record made for it:
	 * one that ended holding the lock (or not seeded yet) is no live
	 * task, and the wait-for graph leaves out holders it does not know.
	 */
	if (w->holder && !r->nh &&
	    track_grow((void **)&r->holders, &r->caph, r->nh,
		       sizeof(*r->holders))) {
		bool known = w->holder_since_ns && w->holder_since_ns <= now;

		r->holders[r->nh++] =
			(res_holder_t){ .task = w->holder,
					.since = known ? w->holder_since_ns :
							 now,
					.count = 1,
					.seeded = true,
					.since_unknown = !known };
		r->pub.nholders++;
	}
	if (w->holder && w->holder_across && w->kind == WEFT_RES_SYNC_MUTEX)
		weft__collector_seed_across(p, w, now);
	on_wait(p, r, &ev);
	res_changed(p, r);
}

void weft__collector_res_event(struct probe *p, const weft_event_t *ev)
{
	res_rec_t *r;
	bool changed = true;

	switch (ev->kind) {
	case WEFT_EV_RES_NEW:
		if ((r = res_get(p, ev->a1, ev->ts)) && !r->pub.dropped_ns) {
			r->pub.kind = (uint8_t)ev->a2;
			res_changed(p, r);
		}
		return;
	case WEFT_EV_RES_NAME:
		/* task: the resource's id. */
		if (!(r = res_get(p, ev->task, ev->ts)) || r->pub.dropped_ns)
			return;
		if (ev->a2) {
			r->pub.file = (const char *)(uintptr_t)ev->a1;
			r->pub.line = ev->a2;
		} else {
			r->pub.name = (const char *)(uintptr_t)ev->a1;
		}
		res_changed(p, r);
		return;
	case WEFT_EV_RES_SITE:
	case WEFT_EV_RES_LABEL:
		on_site(p, ev);
		return;
	case WEFT_EV_RES_DROP:
		if ((r = res_find(p, ev->a1)) && !r->pub.dropped_ns) {
			r->pub.dropped_ns = ev->ts;
			res_changed(p, r);
		}
		return;
	case WEFT_EV_RES_WAIT:
	case WEFT_EV_RES_ACQUIRE:
		/* Starts: a resource first heard of by them is made. */
		r = res_get(p, ev->a1, ev->ts);
		break;
	default:
		/* Ends, and the owner: never bring back one dropped and
		 * forgotten (a waiter ended after its notify was gone). */
		r = res_find(p, ev->a1);
		break;
	}
	if (!r || r->pub.dropped_ns) {
		/* Still, the task waits no more. */
		if (ev->kind == WEFT_EV_RES_WAIT_END)
			task_waited(p, ev->task, ev->a1, 0, ev->ts);
		return;
	}
	switch (ev->kind) {
	case WEFT_EV_RES_WAIT:
		changed = on_wait(p, r, ev);
		break;
	case WEFT_EV_RES_WAIT_END:
		changed = on_wait_end(p, r, ev);
		if (ev->a2 & WEFT_RES_ACQUIRED) {
			on_acquire_waited(p, r, ev);
			changed = true;
		}
		break;
	case WEFT_EV_RES_ACQUIRE:
		on_acquire(p, r, ev, ev->a2 ? ev->a2 : 1);
		break;
	case WEFT_EV_RES_RELEASE:
		changed = on_release(p, r, ev);
		break;
	case WEFT_EV_RES_OWNER:
		changed = r->pub.owner != ev->task;
		r->pub.owner = ev->task;
		break;
	default:
		return;
	}
	if (changed)
		res_changed(p, r);
}

/* ------------------------------------------------------- publishing */

/* The public lists and rate, brought up to date for publishing. */
static void res_sync(res_rec_t *r, uint64_t now)
{
	uint32_t n;

	n = r->nh < WEFT_RES_LIST ? r->nh : WEFT_RES_LIST;
	for (uint32_t i = 0; i < n; i++)
		r->pub.holders[i] = r->holders[i].task;
	memset(&r->pub.holders[n], 0,
	       (WEFT_RES_LIST - n) * sizeof(r->pub.holders[0]));
	n = r->nw < WEFT_RES_LIST ? r->nw : WEFT_RES_LIST;
	for (uint32_t i = 0; i < n; i++)
		r->pub.waiters[i] = r->waiters[i].task;
	memset(&r->pub.waiters[n], 0,
	       (WEFT_RES_LIST - n) * sizeof(r->pub.waiters[0]));
	r->pub.oldest_wait_ns = r->nw ? r->waiters[0].since : 0;
	if (now >= r->rate_at + RES_RATE_NS) {
		double was = r->pub.acquires_per_s;

		r->pub.acquires_per_s =
			(double)r->rate_acq * 1e9 / (double)(now - r->rate_at);
		r->rate_at = now;
		r->rate_acq = 0;
		/* The rate moves without events (down to 0): say it. */
		r->changed = r->changed || r->pub.acquires_per_s != was;
	}
}

size_t weft__collector_res_list(struct probe *p, bool all, uint64_t now,
				const weft_probe_resource_t ***out)
{
	const weft_probe_resource_t **v;
	size_t n = 0;

	*out = NULL;
	if (!p->nres)
		return 0;
	/*
	 * The rates, a walk of them all once a second, and the changed list
	 * they extend; in between, the changed ones' lists alone.
	 */
	if (now >= p->res_rate_at + RES_RATE_NS) {
		p->res_rate_at = now;
		for (size_t i = 0; i < p->res_table_size; i++)
			for (res_rec_t *r = p->res_table[i]; r; r = r->hnext) {
				bool was = r->changed;

				res_sync(r, now);
				if (r->changed && !was) {
					r->changed = false;
					res_changed(p, r);
				}
			}
	} else {
		for (res_rec_t *r = p->res_changed; r; r = r->cnext)
			res_sync(r, now);
	}
	v = malloc((all ? p->nres : p->nres_changed) * sizeof(*v) + 1);
	if (!v)
		return 0;
	if (all) {
		/* Not the tombstones: said already, to be forgotten. */
		for (size_t i = 0; i < p->res_table_size; i++)
			for (res_rec_t *r = p->res_table[i]; r; r = r->hnext)
				if (!r->said_dropped)
					v[n++] = &r->pub;
	} else {
		for (res_rec_t *r = p->res_changed; r; r = r->cnext)
			v[n++] = &r->pub;
	}
	*out = v;
	return n;
}

void weft__collector_res_published(struct probe *p)
{
	res_rec_t *r, *next;

	for (r = p->res_changed; r; r = next) {
		next = r->cnext;
		r->changed = false;
		r->cnext = NULL;
		/* Said once with its drop: a tombstone (res_check frees it). */
		if (r->pub.dropped_ns)
			r->said_dropped = true;
	}
	p->res_changed = NULL;
	p->nres_changed = 0;
}

/*
 * What was heard of waits and holds before a gap in listening may have
 * ended in it, unheard.  A lock's (an async mutex's, a weft_mutex_t's)
 * are forgotten, and the tasks' WAITING ON them: the runtime keeps every
 * task's wait for a lock, and the next pass reads them again, each with
 * the lock's holder (a new listening generation: weft__collector_seed_waits()).
 * A lock held with nobody waiting is forgotten with them: missed, not
 * wrong (its release, unheld, is nobody's, and a lock's waits stay in the
 * deadlock check).  The other waits (a semaphore's, a channel's, a
 * notify's, the timer wheel's sleepers, whose WAITING ON the leak check
 * counts on) cannot be read back: kept, each marked unsure, so that no
 * warning is raised of them (res_unsure()); their holds are forgotten
 * (res_gap_keep()).  The ends that came before
 * their starts are forgotten: the starts still to come went with the
 * rings' old events (weft__collector_gap()), and one kept would cancel
 * the same task's next wait or hold.
 */
/*
 * A resource not a lock, across a gap: its task waits kept, unsure (no
 * warning of them; a task's next wait there replaces its own, one whose
 * task ran or shows another wait since is let go: res_sweep()), each with
 * its task's polls then.  Its holders forgotten: a hold still going on is
 * missed, not listed for good when its release came in the gap.  A
 * semaphore's permits so forgotten are counted (gap_permits), so that
 * their releases to come are not taken for a non-holder's, which would
 * take it out of the deadlock check.  The waits of plain threads (task 0:
 * a blocking pool's queue), which nothing can tell apart or sweep,
 * forgotten too.  The counts are the lists' now: waiters past the lists'
 * bounds (the timer wheel keeps 64) are forgotten, their ends to come
 * noted as early ends that no start takes (a later start is later).
 */
static void res_gap_keep(struct probe *p, res_rec_t *r)
{
	uint32_t nw = 0;

	for (uint32_t k = 0; k < r->nw; k++) {
		task_rec_t *t;

		if (!r->waiters[k].task)
			continue;
		t = weft__collector_task_find(p, r->waiters[k].task);
		r->waiters[nw] = r->waiters[k];
		r->waiters[nw].unsure = true;
		r->waiters[nw++].polls = t ? (uint32_t)t->pub.polls : 0;
	}
	r->nunsure = nw;
	if (r->pub.kind == WEFT_RES_SEMAPHORE)
		for (uint32_t k = 0; k < r->nh; k++)
			r->gap_permits += r->holders[k].count;
	if (nw == r->nw && r->nh == 0 && r->pub.nwaiters == nw &&
	    r->pub.nholders == 0)
		return;
	r->nw = r->pub.nwaiters = nw;
	r->nh = r->pub.nholders = 0;
	res_changed(p, r);
}

void weft__collector_res_gap(struct probe *p)
{
	for (size_t i = 0; i < p->res_table_size; i++)
		for (res_rec_t *r = p->res_table[i]; r; r = r->hnext) {
			memset(r->early, 0, sizeof(r->early));
			r->nearly = 0;
			if (!one_holder(r)) {
				res_gap_keep(p, r);
				continue;
			}
			if (!r->nw && !r->nh && !r->pub.nwaiters &&
			    !r->pub.nholders)
				continue;
			r->nw = r->nh = 0;
			r->pub.nwaiters = r->pub.nholders = 0;
			r->ongoing_warned = 0;
			res_changed(p, r);
		}
	/* What acquired last, for a RES_SITE to come: none now. */
	p->other_last_acq = (struct res_acq_s){ 0 };
	memset(p->other_acq_res, 0, sizeof(p->other_acq_res));
	for (unsigned i = 0; i < p->nworker_slots; i++)
		p->wk[i].res_last_acq = (struct res_acq_s){ 0 };
	for (task_rec_t *t = p->live; t; t = t->lnext) {
		res_rec_t *r = t->pub.waiting_on ?
				       res_find(p, t->pub.waiting_on) :
				       NULL;

		if (!r || !one_holder(r))
			continue;
		t->pub.waiting_on = 0;
		t->pub.waiting_since_ns = 0;
		t->pub.waiting_op = 0;
		weft__collector_task_changed(p, t);
	}
}

void weft__collector_res_stop(struct probe *p)
{
	for (size_t i = 0; i < p->res_table_size; i++) {
		res_rec_t *r = p->res_table[i], *next;

		for (; r; r = next) {
			next = r->hnext;
			res_free(r);
		}
	}
	free(p->res_table);
	p->res_table = NULL;
	p->res_table_size = 0;
	p->nres = 0;
	p->res_changed = NULL;
	p->nres_changed = 0;
	p->res_checked_at = 0;
	p->res_rate_at = 0;
	p->other_last_acq = (struct res_acq_s){ 0 };
	memset(p->other_acq_res, 0, sizeof(p->other_acq_res));
	p->other_acq_next = 0;
	for (unsigned i = 0; i < p->nworker_slots; i++)
		p->wk[i].res_last_acq = (struct res_acq_s){ 0 };
}

size_t weft__collector_res_count(const struct probe *p)
{
	return p->nres;
}

const weft_probe_resource_t *weft__collector_res(struct probe *p, uint64_t id)
{
	res_rec_t *r = res_find(p, id);

	if (r)
		res_sync(r, r->rate_at);
	return r ? &r->pub : NULL;
}
