/* SPDX-License-Identifier: MIT */
/*
 * The collector's passes: drain every ring, order the events by time,
 * fold them into per-task and per-worker state, raise warnings, and hand
 * the changes to the subscribers.  Runs on the collector thread with
 * probe.lock held (see probe.c).
 *
 * Task state from events.  POLL records are stamped at the end of the poll
 * and carry its duration, so each ring is in time order and a k-way merge
 * (weft__collector_take_chunk(), over the rings themselves) orders the
 * batch.  A WAKE that arrives while the task is already scheduled may have
 * happened during its poll; if the poll then returns PENDING, the task
 * stays scheduled from that wake on.
 *
 * Memory is bounded: finished tasks are dropped after retain_ns, warnings
 * are a ring of WARN_KEEP, histograms are allocated for tasks polled more
 * than once and have a fixed number of buckets.
 *
 * Here: the pass, its events handed to the subscribers, publishing, the
 * collector's start and stop.  The pass's steps are each in a file of
 * their own (collector_internal.h lists them).
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collector.h"
#include "collector_internal.h"
#include "weft/time.h"
#include "weft/wire.h"

/* -------------------------------------------------------------- the pass */

/* The record of a task's published part. */
static task_rec_t *rec_of(const weft_probe_task_t *pub)
{
	return (task_rec_t *)((char *)(uintptr_t)pub -
			      offsetof(task_rec_t, pub));
}

/*
 * A new subscriber's first warnings: every one kept (the last WARN_KEEP,
 * oldest first), those raised before it subscribed marked as history.
 * A console attached after a spike sees it, and the monitor's warnings
 * from while nobody listened.  NULL without memory (it gets the new ones
 * only) or with none kept.
 */
/* The warnings kept, oldest first, those up to @since_seq marked
 * history (NULL and *@n 0 if none or no memory). */
static weft_probe_warning_t *kept_warnings(const struct probe *p,
					   uint64_t since_seq, size_t *n)
{
	size_t k = p->warn_seq < WARN_KEEP ? (size_t)p->warn_seq : WARN_KEEP;
	weft_probe_warning_t *h = k ? malloc(k * sizeof(*h)) : NULL;

	for (size_t i = 0; h && i < k; i++) {
		h[i] = p->warnings[(p->warn_seq - k + i) % WARN_KEEP];
		h[i].history = h[i].seq <= since_seq;
	}
	*n = h ? k : 0;
	return h;
}

static weft_probe_warning_t *history(struct probe *p,
				     const weft_probe_sub_t *s, size_t *n)
{
	return kept_warnings(p, s->since_seq, n);
}

/* Publishes so far (probe.lock): weft__sub_publish_seq(). */
static uint64_t publish_seq;

static void publish(struct probe *p, uint64_t now)
{
	const weft_probe_task_t **changed = NULL, **all = NULL;
	const weft_probe_resource_t **res_changed = NULL, **res_all = NULL;
	size_t nchanged = 0, nall = 0, nwarn, nres_changed, nres_all = 0;
	const weft_probe_warning_t *warns;
	weft_probe_warning_t *tmp = NULL, *hist = NULL;
	size_t nhist = 0;
	bool need_all = false;

	for (weft_probe_sub_t *s = p->subs; s; s = s->next) {
		if (atomic_exchange_explicit(&s->ask_full, false,
					     memory_order_relaxed))
			s->need_full = true;
		need_all |= s->need_full && s->opts.on_update;
	}
	nchanged = p->nchanged;
	if (nchanged + 1 <= p->pub_cap) {
		/* All in the array, oldest first: sent newest first, as the
		 * list has them. */
		changed = p->pub_changed;
		for (size_t i = 0, j = nchanged; i + 1 < j; i++, j--) {
			const weft_probe_task_t *x = changed[i];

			changed[i] = changed[j - 1];
			changed[j - 1] = x;
		}
	} else {
		/* More than ever before: a larger array, filled from the
		 * list (kept from pass to pass: a pass's worth is the same
		 * again). */
		size_t cap = nchanged + 1 + nchanged / 2;

		changed = realloc(p->pub_changed, cap * sizeof(*changed));
		if (changed) {
			p->pub_changed = changed;
			p->pub_cap = cap;
		}
		changed = nchanged + 1 <= p->pub_cap ? p->pub_changed : NULL;
		nchanged = 0;
		for (task_rec_t *t = p->changed; t && changed; t = t->cnext)
			changed[nchanged++] = &t->pub;
	}
	if (need_all) {
		all = malloc((p->ntasks + 1) * sizeof(*all));
		for (size_t i = 0; all && i < p->table_size; i++)
			for (task_rec_t *t = p->table[i]; t; t = t->hnext)
				all[nall++] = &t->pub;
		nres_all = weft__collector_res_list(p, true, now, &res_all);
	}
	nres_changed = weft__collector_res_list(p, false, now, &res_changed);

	/* The warnings raised since the last publish, oldest first. */
	nwarn = (size_t)(p->warn_seq - p->warn_seq_published);
	if (nwarn > WARN_KEEP)
		nwarn = WARN_KEEP;
	tmp = nwarn ? malloc(nwarn * sizeof(*tmp)) : NULL;
	for (size_t i = 0; tmp && i < nwarn; i++)
		tmp[i] = p->warnings[(p->warn_seq - nwarn + i) % WARN_KEEP];
	warns = tmp;
	p->warn_seq_published = p->warn_seq;

	p->stats.now_ns = now;
	p->pass_tasks = changed;
	p->pass_ntasks = changed ? nchanged : 0;
	p->pass_res = res_changed;
	p->pass_nres = nres_changed;
	publish_seq++;
	/* The subscribers' callbacks lower it (weft__sub_seed_room()). */
	p->seed_room = SIZE_MAX;
	for (weft_probe_sub_t *s = p->subs; s; s = s->next) {
		weft_probe_update_t u = {
			.stats = &p->stats,
			.workers = p->workers,
			.nworkers = p->stats.workers,
			.warnings = warns,
			.nwarnings = tmp ? nwarn : 0,
		};

		if (!s->opts.on_update)
			continue;
		p->pass_sub = s;
		/*
		 * A new subscriber's history: every warning kept, in an
		 * update of its own right after its first (full) one, which
		 * then carries none.  Folded into the full one, up to
		 * WARN_KEEP warnings would swell it (a recorder sizes its
		 * later full updates by it); before it, a client waiting for
		 * a full update would skip it.  The pass's new warnings are
		 * among it.
		 */
		if (s->fresh && (!s->need_full || all) &&
		    (hist = history(p, s, &nhist))) {
			u.warnings = NULL;
			u.nwarnings = 0;
		}
		if (!s->need_full || all)
			s->fresh = false;
		if (s->need_full && all) {
			u.tasks = all;
			u.ntasks = nall;
			u.resources = res_all;
			u.nresources = nres_all;
			u.full = true;
			s->need_full = false;
		} else {
			u.tasks = changed;
			u.ntasks = changed ? nchanged : 0;
			u.resources = res_changed;
			u.nresources = nres_changed;
		}
		s->opts.on_update(s->opts.ctx, &u);
		if (hist) {
			weft_probe_update_t h = {
				.stats = &p->stats,
				.workers = p->workers,
				.nworkers = p->stats.workers,
				.warnings = hist,
				.nwarnings = nhist,
			};

			s->opts.on_update(s->opts.ctx, &h);
			free(hist);
			hist = NULL;
		}
	}
	p->pass_sub = NULL;
	p->pass_tasks = NULL;
	p->pass_ntasks = 0;
	p->pass_res = NULL;
	p->pass_nres = 0;
	free(tmp);
	free(all);
	free(res_all);
	free(res_changed);
	weft__collector_res_published(p);
	/*
	 * From the array where it holds them all (nothing was changed in
	 * the callbacks): its loads do not wait on each other as the
	 * list's do.
	 */
	if (changed && nchanged == p->nchanged) {
		for (size_t i = 0; i < nchanged; i++) {
			task_rec_t *t = rec_of(changed[i]);

			t->changed = false;
			t->cnext = NULL;
			/* Retired while it waited to be sent. */
			if (t->retired)
				weft__collector_task_free(p, t);
		}
		p->changed = NULL;
	}
	while (p->changed) {
		task_rec_t *t = p->changed;

		p->changed = t->cnext;
		t->changed = false;
		t->cnext = NULL;
		/* Retired while it waited to be sent. */
		if (t->retired)
			weft__collector_task_free(p, t);
	}
	p->nchanged = 0;
}

/* ------------------------------------------------------- event records */

/* A chunk's events, encoded once (weft__collector_event_records()). */
struct pass_records {
	const weft_event_t *ev; /* the batch handed to on_events, and its */
	size_t n;               /* length; NULL outside the callbacks */
	bool encoded;
	int err;
	weft_wire_events_t enc;
	weft_wire_buf_t buf; /* kept, with its capacity, from pass to pass */
};

/*
 * weft__collector_event_records() - the chunk of events as EventBatch
 * records (weft_wire_events_append()), encoded by the first subscriber
 * that asks and copied by the others: a recorder and a console that both
 * take every event wrote the same bytes twice.  Called from on_events
 * (probe.lock held) with what it was handed.
 *
 * Return: 0 with *@rec, *@len set (valid until the callback returns);
 * -EINVAL when @ev is not the chunk handed on whole (a filtered copy: the
 * caller encodes it); -ENOMEM or -EMSGSIZE, *@rec and *@len then holding
 * the whole records encoded before the error.
 */
int weft__collector_event_records(struct probe *p, const weft_event_t *ev,
				  size_t n, const uint8_t **rec, size_t *len)
{
	struct pass_records *r = p->records;

	if (!r || !r->ev || ev != r->ev || n != r->n)
		return -EINVAL;
	if (!r->encoded) {
		r->buf.len = 0;
		r->err = weft_wire_events_append(&r->enc, &r->buf, ev, n);
		r->encoded = true;
	}
	*rec = r->buf.data;
	*len = r->buf.len;
	return r->err;
}

static void pass_events(struct probe *p, size_t n)
{
	struct pass_records *r = p->records;

	/* Made on the first pass with events; without it (no memory) each
	 * subscriber encodes its own. */
	if (!r) {
		r = p->records = calloc(1, sizeof(*r));
		if (r)
			weft_wire_events_init(&r->enc);
	}
	if (r) {
		r->ev = p->chunk;
		r->n = n;
		r->encoded = false;
	}
	for (weft_probe_sub_t *s = p->subs; s; s = s->next)
		if (s->opts.events && s->opts.on_events)
			s->opts.on_events(s->opts.ctx, p->chunk, n);
	if (r)
		r->ev = NULL;
}

/* The CPU time this thread has used: the collector's, on its thread. */
static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * The probe's own cost, for the stats: the collector thread's CPU time
 * (everything it did: passes, subscribers' callbacks, the wake-ups in
 * between), and its share of one CPU over windows of about a second.
 */
static void account_cpu(struct probe *p, uint64_t now)
{
	uint64_t cpu = thread_cpu_ns();

	if (!p->cpu_base_set) {
		p->cpu_base_set = true;
		p->cpu_base = cpu;
		p->cpu_win_at = now;
		p->cpu_win_cpu = cpu;
	}
	p->stats.collector_cpu_ns = cpu - p->cpu_base;
	if (now >= p->cpu_win_at + 1000000000u) {
		p->stats.collector_cpu = (double)(cpu - p->cpu_win_cpu) /
					 (double)(now - p->cpu_win_at);
		p->cpu_win_at = now;
		p->cpu_win_cpu = cpu;
	}
}

/*
 * Events dropped: where (the ring that dropped most), how big the rings
 * are and the knob, and the cause as far as the collector can tell.  A
 * ring fills when its thread emits more than a ring between two passes;
 * passes come sooner as rings fill, so a collector that had CPU to spare
 * (under half a CPU over the last second) was not behind: the rings were
 * too small for the bursts.  One that used more was behind.
 */
static void warn_drops(struct probe *p, uint64_t now)
{
	char where[64], cause[128], also[96] = "";
	uint64_t most = p->other_drops;
	int w = -1;

	for (unsigned i = 0; i < p->nworker_slots; i++) {
		if (p->wk[i].drops > most) {
			most = p->wk[i].drops;
			w = (int)i;
		}
	}
	if (w >= 0)
		snprintf(where, sizeof(where), "%llu on worker %d's ring",
			 (unsigned long long)most, w);
	else
		snprintf(where, sizeof(where), "%llu on other threads' rings",
			 (unsigned long long)most);
	if (p->stats.collector_cpu >= 0.5)
		snprintf(cause, sizeof(cause),
			 "the collector fell behind (%.0f%% of a CPU)",
			 p->stats.collector_cpu * 100);
	else
		snprintf(cause, sizeof(cause),
			 "too small for the bursts, raise it");
	if (p->drops_suppressed)
		snprintf(also, sizeof(also),
			 "; %llu delay or lost-waker warnings held back",
			 (unsigned long long)p->drops_suppressed);
	weft__collector_warn(p, WEFT_WARN_EVENTS_DROPPED, NULL,
			     WEFT_EVENT_NO_WORKER, now, 0,
			     /* Within the detail's 159 characters (the knob
			      * to turn was cut off: "raise WEFT_PR"). */
			     "%llu events dropped so far, most %s; rings hold "
			     "%zu events (WEFT_PROBE_RING): %s%s",
			     (unsigned long long)p->drops_total, where,
			     p->config.ring_capacity, cause, also);
}

void weft__collector_tiny(struct probe *p, const task_rec_t *t)
{
	struct tiny_site *s = p->tiny_sites, *min = s;
	const size_t n = sizeof(p->tiny_sites) / sizeof(*s);

	p->tiny_count++;
	for (size_t i = 0; i < n; i++, s++) {
		if (s->count && s->file == t->pub.file &&
		    s->line == t->pub.line && s->name == t->pub.name)
			break;
		if (s->count < min->count)
			min = s;
	}
	/* Not kept: in place of the least (Space-Saving: its count on). */
	if (s == p->tiny_sites + n) {
		s = min;
		s->file = t->pub.file;
		s->name = t->pub.name;
		s->line = t->pub.line;
	}
	s->count++;
	s->task = t->pub.id;
}

/*
 * Tiny tasks: said with the spawn site most of them came from, when one
 * did (a spawn in a loop over records is the usual cause), so that the
 * warning names the spawn to batch and a task of it.
 */
static void warn_tiny(struct probe *p, uint64_t now)
{
	const struct tiny_site *top = NULL;
	weft_probe_warning_t *w;

	for (size_t i = 0; i < sizeof(p->tiny_sites) / sizeof(*top); i++)
		if (!top || p->tiny_sites[i].count > top->count)
			top = &p->tiny_sites[i];
	if (top && top->file && top->count * 2 > p->tiny_count) {
		weft__collector_warn(
			p, WEFT_WARN_TINY_TASKS, NULL, WEFT_EVENT_NO_WORKER,
			now, 0,
			"%llu tasks ran one poll under 2 us, %llu of them "
			"\"%s\" spawned at %s:%u: spawning costs more than "
			"their work; batch them",
			(unsigned long long)p->tiny_count,
			(unsigned long long)top->count,
			top->name ? top->name : "?", weft__base_name(top->file),
			top->line);
		w = &p->warnings[(p->warn_seq - 1) % WARN_KEEP];
		w->task = top->task;
		w->task_name = top->name;
		w->file = top->file;
		w->line = top->line;
	} else {
		weft__collector_warn(
			p, WEFT_WARN_TINY_TASKS, NULL, WEFT_EVENT_NO_WORKER,
			now, 0,
			"%llu tasks ran one poll under 2 us: spawning costs "
			"more than their work; batch them",
			(unsigned long long)p->tiny_count);
	}
	p->tiny_count = 0;
	memset(p->tiny_sites, 0, sizeof(p->tiny_sites));
}

void weft__collector_pass(struct probe *p, uint64_t now)
{
	size_t n = 0, got, nheap;
	uint64_t dt_ns = p->last_pass_ns ? now - p->last_pass_ns : 0;
	uint64_t polls0 = 0, steals0 = 0, polls1 = 0, steals1 = 0;
	bool have_prev;
	/* Settled by weft__collector_reconcile() this pass: see there. */
	uint64_t drops_before = p->drops_total;

	weft__probe_clock_calibrate();
	/* The age of an early waker count (weft__collector_early_waker()). */
	p->early_pass++;
	if (p->need_seed && p->rt) {
		p->need_seed = false;
		weft__collector_seed_tasks(p, now);
		p->waits_gen = 0;
	} else if (p->seed_shards) {
		/* The runtime seeded went: nothing more of it to name. */
		if (p->rt)
			weft__collector_seed_more(p, now, dt_ns);
		else
			weft__collector_seed_stop(p);
	}
	/* Asked for (weft__sub_seed_whole()), done by the seed above. */
	p->seed_whole = false;
	/*
	 * The runtime's lock waits, once a listening period: only while
	 * events flow, which end what is read (a wait's end, a holder's
	 * release); read in a period without them, they would stay.
	 */
	if (p->rt && weft__probe_on() &&
	    load_relaxed(&weft__probe_listen_gen) != p->waits_gen) {
		p->waits_gen = load_relaxed(&weft__probe_listen_gen);
		weft__collector_seed_waits(p, now);
	}
	nheap = p->nsegs_pass = weft__collector_snapshot(p);
	/*
	 * The window the drops just counted fell in: after the last pass
	 * that counted none (its snapshot came after its @now), before the
	 * snapshot just taken (read now).
	 */
	if (p->drops_total > drops_before) {
		if (p->drop_to_ns <= p->clean_pass_ns)
			p->drop_from_ns = p->clean_pass_ns;
		p->drop_to_ns = weft_now_ns();
	} else {
		p->clean_pass_ns = now;
	}
	while ((got = weft__collector_take_chunk(p, &nheap)) > 0) {
		pass_events(p, got);
		weft__collector_process(p, got);
		n += got;
	}
	weft__collector_free_orphans(p);
	weft__collector_large_pends_said(p);
	p->events_total += n;

	/*
	 * Rates only against a sample of the same runtime's workers: before
	 * the first (or after the described runtime changed, which empties
	 * the window) the counters since the runtime's start would read as
	 * one pass's (1.6 M steals/s at start-up).
	 */
	have_prev = p->window_fill > 0 && p->stats.workers > 0;
	for (unsigned i = 0; i < p->stats.workers; i++) {
		polls0 += p->workers[i].counters.polls;
		steals0 += p->workers[i].counters.steals;
	}
	weft__collector_sample_workers(p, now);
	for (unsigned i = 0; i < p->stats.workers; i++) {
		polls1 += p->workers[i].counters.polls;
		steals1 += p->workers[i].counters.steals;
	}
	/*
	 * And at a flush: a process about to stop (its destroy, its exit, a
	 * recorder's stop) has no next second to wait for.  Not in a gap in
	 * listening: a waker cloned, a wait ended or a lock let go in it is
	 * not heard, and what was heard before would be judged alone.
	 */
	if (!p->gap_open) {
		if (p->passes % 10 == 0 || p->flush_requested)
			weft__collector_check_idle_tasks(p, now);
		weft__collector_res_check(p, now);
		weft__collector_lock_check(p, now);
	}
	weft__collector_leak_pass(p, now);
	/*
	 * A pass that serves a flush says what the folds counted so far:
	 * the flusher (a recorder that stops, at exit) is to have every
	 * warning raised by now, and may be gone before the window closes.
	 */
	weft__collector_fold_flush(p, now, p->flush_requested != 0);
	/*
	 * After a gap in listening too, at once (weft__collector_gap()): the
	 * first screen of a console that ends it is to show none of the
	 * tasks that ended in it.  A runtime that cannot be reconciled (none
	 * described, or more than one) has none to settle.
	 */
	if (p->gap_reconcile && (!p->rt || p->nruntimes != 1))
		p->gap_reconcile = false;
	if ((drops_before > p->drops_reconciled || p->gap_reconcile) && p->rt &&
	    p->nruntimes == 1 && now >= p->reconciled_at + 1000000000u) {
		p->reconciled_at = now;
		if (weft__collector_reconcile(
			    p, now, drops_before > p->drops_reconciled)) {
			p->drops_reconciled = drops_before;
			p->gap_reconcile = false;
		}
	}
	if (p->drops_total > p->drops_warned_at &&
	    now > p->stats.now_ns + 0) {
		warn_drops(p, now);
		p->drops_warned_at = p->drops_total * 2;
	}
	if (p->tiny_count > 10000 && now > p->tiny_warned_at + 10000000000ull) {
		p->tiny_warned_at = now;
		warn_tiny(p, now);
	}

	if (p->rt) {
		weft_runtime_metrics_t m;

		weft_runtime_metrics(p->rt, &m);
		p->stats.live_tasks = m.live_tasks;
		p->stats.spawned_tasks = m.spawned_tasks;
		p->stats.global_queue_depth = m.global_queue_depth;
		p->stats.blocking_busy = m.blocking_threads_busy;
		p->stats.blocking_queued = m.blocking_queue_depth;
		p->stats.blocking_jobs = m.blocking_jobs;
	}
	p->stats.events = p->events_total;
	p->stats.events_dropped = p->drops_total;
	/* Every warning, not the rows: a fold's row is none of its own. */
	p->stats.warnings = weft__collector_warnings_total(p);
	p->stats.clock = weft__probe_clock_describe();
	if (dt_ns) {
		double dt = (double)dt_ns / 1e9;

		p->stats.events_per_s = (double)n / dt;
		p->stats.polls_per_s =
			have_prev && polls1 >= polls0 ?
				(double)(polls1 - polls0) / dt :
				0;
		p->stats.steals_per_s =
			have_prev && steals1 >= steals0 ?
				(double)(steals1 - steals0) / dt :
				0;
	}
	p->last_pass_ns = now;
	p->last_dt_ns = dt_ns;
	account_cpu(p, now);
	weft__collector_retire(p, now);
	publish(p, now);
}

uint64_t weft__collector_interval(struct probe *p)
{
	uint64_t i = p->config.interval_ns, min, next;

	/* A seed under way goes on at its own pace (collector_reconcile.c),
	 * whatever the interval. */
	if (p->seed_shards && i > SEED_INTERVAL_NS)
		i = SEED_INTERVAL_NS;
	min = i / 20;

	/*
	 * Drain sooner while rings fill fast: the next pass when the
	 * fullest ring, at the rate it filled since the last pass, would be
	 * an eighth full.  Well short of dropping, and an eighth of the
	 * default 8 MiB is a megabyte a ring, which the collector reads
	 * while the cache still holds it.
	 */
	if (p->fill <= 0.125 || !p->last_dt_ns)
		return i;
	next = (uint64_t)((double)p->last_dt_ns * 0.125 / p->fill);
	return next < min ? min : next > i ? i : next;
}

int weft__collector_start(struct probe *p)
{
	p->table_size = 1024;
	p->table = calloc(p->table_size, sizeof(*p->table));
	p->chunk = malloc(CHUNK_EVENTS * sizeof(*p->chunk));
	if (!p->table || !p->chunk) {
		free(p->table);
		free(p->chunk);
		p->table = NULL;
		p->chunk = NULL;
		return -ENOMEM;
	}
	/* Without it (no memory) no task-leak or wake-burst warnings. */
	weft__collector_leak_start(p);
	p->flush_rings = weft__collector_flush_offered();
	weft__collector_rings_forget(p);
	p->ntasks = 0;
	p->last_found = NULL;
	p->live = NULL;
	memset(p->early, 0, sizeof(p->early));
	p->nearly = 0;
	p->early_pass = p->early_unsure_until = 0;
	p->need_seed = true;
	p->gap_open = p->gap_reconcile = false;
	p->stats.start_ns = weft__probe_clock_ns();
	p->last_pass_ns = 0;
	p->window_fill = 0;
	p->window_pos = 0;
	p->cpu_base_set = false;
	p->stats.collector_cpu = 0;
	p->stats.collector_cpu_ns = 0;
	return 0;
}

void weft__collector_gap_open(struct probe *p)
{
	p->gap_open = true;
	p->gap_passes = p->passes;
}

void weft__collector_gap(struct probe *p)
{
	p->gap_open = false;
	/*
	 * Events a site pushed after the pass that followed the fall (it
	 * saw the old listening just before): not the new period's to
	 * tell, as at a collector's start.
	 */
	weft__collector_rings_forget(p);
	memset(p->early, 0, sizeof(p->early));
	p->nearly = 0;
	/*
	 * A waker cloned or dropped in the gap: the count may be wrong
	 * either way (a lost waker said of a task that has one).  A wake in
	 * it, and the polls after: the next poll's wait for a worker is not
	 * known (woken_at 0 counts none).
	 */
	for (task_rec_t *t = p->live; t; t = t->lnext) {
		t->wakers_unsure = true;
		t->woken_at = 0;
	}
	weft__collector_res_gap(p);
	weft__collector_leak_gap(p);
	/* A weft_mutex_t held across an await: its release may be in it. */
	memset(p->lock_holds, 0, sizeof(p->lock_holds));
	/*
	 * Not a window of drops: the lock waits read again keep their real
	 * starts, from before it, and a deadlock formed in it (a console
	 * attached to a hung program) is to be said (a review found it
	 * missed so).  The reconcile at once, not a second after the last.
	 */
	p->gap_reconcile = true;
	p->reconciled_at = 0;
}

void weft__collector_stop(struct probe *p)
{
	/*
	 * What the folds counted, said: kept for a subscriber to come, and
	 * not said by a collector started later as if it were its own.
	 */
	weft__collector_fold_stop(p);
	/* Not left open for a runtime nobody may describe again. */
	weft__collector_sched_close_all(p);
	weft__collector_leak_stop(p);
	weft__collector_seed_stop(p);
	weft__collector_workers_free(p);
	free(p->table);
	p->table = NULL;
	p->table_size = 0;
	p->ntasks = 0;
	p->last_found = NULL;
	weft__collector_pool_fini(&p->rec_pool);
	weft__collector_pool_fini(&p->hist_pool);
	p->changed = NULL;
	p->nchanged = 0;
	p->live = NULL;
	free(p->done);
	p->done = NULL;
	p->done_cap = p->done_first = p->ndone = 0;
	free(p->chunk);
	p->chunk = NULL;
	free(p->segs);
	p->segs = NULL;
	free(p->heap);
	p->heap = NULL;
	p->segs_cap = 0;
	free(p->pub_changed);
	p->pub_changed = NULL;
	p->pub_cap = 0;
	weft__collector_res_stop(p);
	weft__collector_sites_free(p);
	memset(p->lock_holds, 0, sizeof(p->lock_holds));
	memset(p->lock_pends, 0, sizeof(p->lock_pends));
	memset(p->large_pends, 0, sizeof(p->large_pends));
	/* A listening period's tiny tasks are its own. */
	p->tiny_count = 0;
	p->tiny_warned_at = 0;
	memset(p->tiny_sites, 0, sizeof(p->tiny_sites));
	memset(p->lock_early, 0, sizeof(p->lock_early));
	if (p->records) {
		weft_wire_events_fini(&p->records->enc);
		weft_wire_buf_fini(&p->records->buf);
		free(p->records);
		p->records = NULL;
	}
}

/* ---------------------------------- the subscribers' offer (collector.h) */

const weft_probe_task_t *weft__sub_task(uint64_t id)
{
	return weft__collector_task(&weft__probe, id);
}

void weft__sub_task_ahead(uint64_t id)
{
	const struct probe *p = &weft__probe;
	const task_rec_t *t;

	if (!p->table || !p->table_size)
		return;
	/* The bucket's first record: nearly always @id's (the table is at
	 * least as large as the run of ids it holds). */
	t = p->table[weft__collector_hash_of(p, id)];
	if (t)
		for (size_t o = 0; o < sizeof(t->pub); o += 64)
			__builtin_prefetch((const char *)&t->pub + o);
}

bool weft__sub_site(uint32_t id, weft_wire_site_t *out)
{
	const struct probe *p = &weft__probe;
	const struct spawn_site *s = id < p->nsites ? &p->sites[id] : NULL;

	if (!s || s->have != (SITE_HAVE_NAME | SITE_HAVE_LOC))
		return false;
	*out = (weft_wire_site_t){ .id = id,
				   .line = s->line,
				   .state_size = s->state_size,
				   .name = s->name,
				   .file = s->file };
	return true;
}

bool weft__sub_await_site(uint32_t id, weft_wire_site_t *out)
{
	const struct probe *p = &weft__probe;
	const struct await_site *s = id < p->nawaits ? &p->awaits[id] : NULL;

	if (!s || !s->file)
		return false;
	*out = (weft_wire_site_t){ .id = WEFT_WIRE_AWAIT_SITE_BASE + id,
				   .line = s->line,
				   .file = s->file };
	return true;
}

uint32_t weft__sub_await_known(uint32_t *slots)
{
	*slots = (uint32_t)weft__probe.nawaits;
	return weft__probe.awaits_known;
}

weft_wire_site_t *weft__sub_sites_all(size_t *n)
{
	const struct probe *p = &weft__probe;
	weft_wire_site_t *v = NULL;
	size_t k = p->awaits_known;

	for (size_t i = 1; i < p->nsites; i++)
		k += p->sites[i].have == (SITE_HAVE_NAME | SITE_HAVE_LOC);
	if (k)
		v = malloc(k * sizeof(*v));
	*n = 0;
	for (size_t i = 1; v && i < p->nsites; i++)
		if (weft__sub_site((uint32_t)i, &v[*n]))
			(*n)++;
	/* The await sites too: the kept records' POLLs may name one whose
	 * announcement went out with an older chunk. */
	for (size_t i = 1; v && i < p->nawaits && *n < k; i++)
		if (weft__sub_await_site((uint32_t)i, &v[*n]))
			(*n)++;
	return v;
}

int weft__sub_event_records(const weft_event_t *ev, size_t n,
			    const uint8_t **rec, size_t *len)
{
	return weft__collector_event_records(&weft__probe, ev, n, rec, len);
}

uint64_t weft__sub_publish_seq(void)
{
	return publish_seq;
}

void weft__sub_want_full(weft_probe_sub_t *sub)
{
	sub->need_full = true;
}

void weft__sub_ask_full(weft_probe_sub_t *sub)
{
	atomic_store_explicit(&sub->ask_full, true, memory_order_relaxed);
}

weft_probe_warning_t *weft__sub_warnings_kept(size_t *n)
{
	return kept_warnings(&weft__probe, UINT64_MAX, n);
}

weft_probe_sub_t *weft__sub_current(void)
{
	return weft__probe.pass_sub;
}

void weft__sub_pass_changes(const weft_probe_task_t *const **tasks,
			    size_t *ntasks,
			    const weft_probe_resource_t *const **res,
			    size_t *nres)
{
	*tasks = weft__probe.pass_tasks;
	*ntasks = weft__probe.pass_ntasks;
	*res = weft__probe.pass_res;
	*nres = weft__probe.pass_nres;
}

void weft__sub_seed_whole_locked(void)
{
	weft__probe.seed_whole = true;
}

void weft__sub_seed_whole(void)
{
	pthread_mutex_lock(&weft__probe.lock);
	weft__probe.seed_whole = true;
	pthread_mutex_unlock(&weft__probe.lock);
}

void weft__sub_seed_room(size_t tasks)
{
	if (tasks < weft__probe.seed_room)
		weft__probe.seed_room = tasks;
}

size_t weft__sub_tasks_held(void)
{
	return weft__probe.ntasks;
}

void weft__sub_hello(unsigned *workers, uint64_t *start_ns)
{
	weft_runtime_metrics_t m = { 0 };

	if (weft__probe.rt)
		weft_runtime_metrics(weft__probe.rt, &m);
	*workers = m.workers;
	*start_ns = weft__probe.stats.start_ns;
}

unsigned weft__probe_workers(void)
{
	unsigned n;

	pthread_mutex_lock(&weft__probe.lock);
	n = weft__probe.rt ? weft_runtime_workers(weft__probe.rt) : 0;
	pthread_mutex_unlock(&weft__probe.lock);
	return n;
}

void weft__probe_clock_text(char *buf, size_t n)
{
	/* The clock's description changes under probe.lock (calibration). */
	pthread_mutex_lock(&weft__probe.lock);
	snprintf(buf, n, "%s", weft__probe_clock_describe());
	pthread_mutex_unlock(&weft__probe.lock);
}

void weft__probe_with_task(uint64_t id,
			   void (*fn)(const weft_probe_task_t *t, void *arg),
			   void *arg)
{
	pthread_mutex_lock(&weft__probe.lock);
	fn(weft__collector_task(&weft__probe, id), arg);
	pthread_mutex_unlock(&weft__probe.lock);
}
