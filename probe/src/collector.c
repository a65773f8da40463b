/* SPDX-License-Identifier: MIT */
/*
 * The collector's passes: drain every ring, order the events by time,
 * fold them into per-task and per-worker state, raise warnings, and hand
 * the changes to the subscribers.  Runs on the collector thread with
 * probe.lock held (see probe.c).
 *
 * Task state from events.  POLL records are stamped at the end of the poll
 * and carry its duration, so each ring is in time order and a k-way merge
 * (take_chunk(), over the rings themselves) orders the batch.  A WAKE that arrives while the task is
 * already scheduled may have happened during its poll; if the poll then
 * returns PENDING, the task stays scheduled from that wake on.
 *
 * Memory is bounded: finished tasks are dropped after retain_ns, warnings
 * are a ring of WARN_KEEP, histograms are allocated for tasks polled more
 * than once and have a fixed number of buckets.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "collector_internal.h"
#include "pages_internal.h"
#include "weft/wire.h"

/* ---------------------------------------------------------------- tasks */

/*
 * The id's low bits, not a mixing hash: the runtime hands ids out in
 * blocks from one counter (weft__next_task_id()), so the tasks the table
 * holds (the live ones and six seconds of finished ones) are nearly one
 * run of consecutive ids, which the table (at least as large) spreads
 * one to a bucket.  And the buckets used together sit together: a new
 * task's is next to the one before.  A mixing hash made each a cache
 * miss: finding tasks for events, retiring them and looking them up for
 * the streams were a third of the collector's time under a service that
 * spawns a task per request (perf).
 */
static size_t hash_of(const struct probe *p, uint64_t id)
{
	return (size_t)id & (p->table_size - 1);
}

static void table_grow(struct probe *p)
{
	size_t nsize = p->table_size * 2;
	task_rec_t **nt = calloc(nsize, sizeof(*nt));
	size_t osize = p->table_size;
	task_rec_t **ot = p->table;

	if (!nt)
		return; /* keep the longer chains */
	p->table = nt;
	p->table_size = nsize;
	for (size_t i = 0; i < osize; i++) {
		task_rec_t *t = ot[i];

		while (t) {
			task_rec_t *next = t->hnext;
			size_t h = hash_of(p, t->pub.id);

			t->hnext = nt[h];
			nt[h] = t;
			t = next;
		}
	}
	free(ot);
}

static inline task_rec_t *task_find(struct probe *p, uint64_t id)
{
	task_rec_t *t = p->last_found;

	/* A task's events come in runs (a wake, then its poll). */
	if (t && t->pub.id == id)
		return t;
	t = p->table[hash_of(p, id)];
	while (t && t->pub.id != id)
		t = t->hnext;
	if (t)
		p->last_found = t;
	return t;
}

/* weft__collector_task() - what the collector knows of task @id, or NULL;
 * probe.lock held (the record is valid until it is released). */
const weft_probe_task_t *weft__collector_task(struct probe *p, uint64_t id)
{
	task_rec_t *t;

	if (!p->table || !p->table_size)
		return NULL;
	t = task_find(p, id);
	return t ? &t->pub : NULL;
}

static void live_add(struct probe *p, task_rec_t *t)
{
	t->lprev = NULL;
	t->lnext = p->live;
	if (p->live)
		p->live->lprev = t;
	p->live = t;
}

static void live_remove(struct probe *p, task_rec_t *t)
{
	if (t->lprev)
		t->lprev->lnext = t->lnext;
	else
		p->live = t->lnext;
	if (t->lnext)
		t->lnext->lprev = t->lprev;
	t->lnext = t->lprev = NULL;
}

/*
 * Task records and histograms come from pools of blocks: a huge page (2
 * MiB) where the kernel offers them, else 256 KiB.  Taken one calloc() at
 * a time, a service spawning tens of thousands of tasks a second had the
 * collector's malloc arena growing a page per mprotect() and faulting
 * each page in: most of the collector's time in chained_spawn (perf:
 * sysmalloc and the page-fault path, 45%).  Freed items go back on the
 * pool's list; blocks are unmapped only when the collector stops, so the
 * pools hold the peak of what was tracked at once (live tasks plus at
 * most retain_max finished ones).
 */
static size_t pool_block_bytes(void)
{
	size_t huge = weft__pages_huge();

	return huge ? huge : 256u * 1024u;
}

/* Under ASan, an item given back is poisoned until taken again. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POOL_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define POOL_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POOL_POISON(p, n) ((void)(p), (void)(n))
#define POOL_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

static void *pool_get(struct pool *pl, size_t size)
{
	void *it = pl->free;

	if (it) {
		POOL_UNPOISON(it, size);
		pl->free = *(void **)it;
		/*
		 * The next item given back, fetched now for the next call:
		 * it was freed a pass ago and is out of cache, and the
		 * memset below waited on each line of this one (perf,
		 * chained_spawn: the most of task_new's time).
		 */
		if (pl->free)
			for (size_t o = 0; o < size; o += 64)
				__builtin_prefetch((char *)pl->free + o, 1);
	} else {
		if (!pl->left) {
			size_t bytes = pool_block_bytes();
			size_t n = (bytes - sizeof(void *)) / size;
			/*
			 * Faulted in with the mapping, up front: touched a
			 * page at a time, a block's faults were the
			 * collector's main cost in chained_spawn even from a
			 * pool (perf: task_new and the fault path, 45%;
			 * faults are dear in a VM, see pages.c).
			 */
			char *b = weft__pages_map(bytes, true);

			if (!b)
				return NULL;
			/* A mapping where an unmapped block was may still
			 * carry its poison. */
			POOL_UNPOISON(b, bytes);
			/* The block's first word chains the blocks. */
			*(void **)b = pl->blocks;
			pl->blocks = b;
			pl->next = b + sizeof(void *);
			pl->left = n;
		}
		it = pl->next;
		pl->next += size;
		pl->left--;
	}
	memset(it, 0, size);
	return it;
}

static void pool_put(struct pool *pl, void *it, size_t size)
{
	*(void **)it = pl->free;
	pl->free = it;
	/* The link word stays readable: pool_get() takes it. */
	POOL_POISON((char *)it + sizeof(void *), size - sizeof(void *));
}

static void pool_fini(struct pool *pl)
{
	while (pl->blocks) {
		void *b = pl->blocks;

		pl->blocks = *(void **)b;
		POOL_UNPOISON(b, pool_block_bytes());
		weft__pages_unmap(b, pool_block_bytes());
	}
	memset(pl, 0, sizeof(*pl));
}

/* A task first heard of: out of line, so that finding one saves nothing. */
__attribute__((noinline)) static task_rec_t *task_new(struct probe *p,
						      uint64_t id, uint64_t now)
{
	task_rec_t *t = pool_get(&p->rec_pool, sizeof(*t));
	size_t h;

	if (!t)
		return NULL;
	t->pub.id = id;
	t->pub.spawned_ns = now;
	t->pub.state = WEFT_TASK_IDLE;
	t->pub.last_worker = WEFT_EVENT_NO_WORKER;
	t->idle_since = now;
	if (p->ntasks >= p->table_size)
		table_grow(p);
	h = hash_of(p, id);
	t->hnext = p->table[h];
	p->table[h] = t;
	p->ntasks++;
	live_add(p, t);
	return t;
}

static inline task_rec_t *task_get(struct probe *p, uint64_t id, uint64_t now)
{
	task_rec_t *t = task_find(p, id);

	if (t || id == 0)
		return t;
	return task_new(p, id, now);
}

/* The record of a task's published part. */
static task_rec_t *rec_of(const weft_probe_task_t *pub)
{
	return (task_rec_t *)((char *)(uintptr_t)pub -
			      offsetof(task_rec_t, pub));
}

static void task_changed(struct probe *p, task_rec_t *t)
{
	if (!t->changed) {
		t->changed = true;
		t->cnext = p->changed;
		p->changed = t;
		/*
		 * Noted in publish()'s array too, as it comes: publish() then
		 * neither counts the list nor walks it to fill the array, two
		 * chases of a pointer a task through records that are out of
		 * cache when a pass makes thousands of tasks (perf,
		 * chained_spawn).
		 */
		if (p->nchanged < p->pub_cap)
			p->pub_changed[p->nchanged] = &t->pub;
		p->nchanged++;
	}
}

static void task_free(struct probe *p, task_rec_t *t)
{
	if (p->last_found == t)
		p->last_found = NULL;
	task_rec_t **pp = &p->table[hash_of(p, t->pub.id)];

	while (*pp && *pp != t)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = t->hnext;
	p->ntasks--;
	if (!t->in_done)
		live_remove(p, t);
	if (t->hist)
		pool_put(&p->hist_pool, t->hist, 2 * sizeof(*t->hist));
	pool_put(&p->rec_pool, t, sizeof(*t));
}

static weft_hist_t *task_hist(struct probe *p, task_rec_t *t)
{
	if (!t->hist) {
		t->hist = pool_get(&p->hist_pool, 2 * sizeof(*t->hist));
		if (t->hist) {
			t->pub.poll_hist = &t->hist[0];
			t->pub.sched_hist = &t->hist[1];
		}
	}
	return t->hist;
}

/* ------------------------------------------------------------- warnings */

static void warn(struct probe *p, uint8_t kind, const task_rec_t *t,
		 uint16_t worker, uint64_t at, uint64_t value,
		 const char *fmt, ...) __attribute__((format(printf, 7, 8)));

static void warn(struct probe *p, uint8_t kind, const task_rec_t *t,
		 uint16_t worker, uint64_t at, uint64_t value, const char *fmt,
		 ...)
{
	weft_probe_warning_t *w = &p->warnings[p->warn_seq % WARN_KEEP];
	va_list ap;

	memset(w, 0, sizeof(*w));
	w->seq = ++p->warn_seq;
	w->kind = kind;
	w->worker = worker;
	w->at_ns = at;
	w->value_ns = value;
	if (t) {
		w->task = t->pub.id;
		w->task_name = t->pub.name;
		w->file = t->pub.file;
		w->line = t->pub.line;
	}
	va_start(ap, fmt);
	vsnprintf(w->detail, sizeof(w->detail), fmt, ap);
	va_end(ap);
}

static void warn_task(struct probe *p, uint8_t kind, task_rec_t *t,
		      uint16_t worker, uint64_t at, uint64_t value,
		      const char *detail)
{
	t->pub.warnings |= 1u << kind;
	task_changed(p, t);
	warn(p, kind, t, worker, at, value, "%s", detail);
}

/* --------------------------------------------------------------- events */

/* Pending lock-held records waiting for their LOCK_SITE. */
struct lock_pending {
	task_rec_t *t;
	const char *name;
	uint64_t held_ns;
	uint64_t at;
	uint16_t worker;
	bool valid;
};

__attribute__((noinline, cold)) static void
warn_self_wakes(struct probe *p, task_rec_t *t, const weft_event_t *ev)
{
	char d[96];

	t->once |= 1u << WEFT_WARN_SELF_WAKES;
	snprintf(d, sizeof(d), "woke itself for %llu of %llu wakes",
		 (unsigned long long)t->pub.self_wakes,
		 (unsigned long long)t->pub.wakes);
	warn_task(p, WEFT_WARN_SELF_WAKES, t, ev->worker, ev->ts, 0, d);
}

/*
 * Self-wakes above half of a task's wakes: say so once.  The once bit
 * first: a task that yields in a loop comes here on every poll.
 */
static inline void check_self_wakes(struct probe *p, task_rec_t *t,
				    const weft_event_t *ev)
{
	if (!(t->once & (1u << WEFT_WARN_SELF_WAKES)) && t->pub.wakes >= 16 &&
	    t->pub.self_wakes * 2 > t->pub.wakes)
		warn_self_wakes(p, t, ev);
}

/* A yield, told by its poll's record (WEFT_POLL_YIELDED): a self-wake. */
static void self_wake(struct probe *p, task_rec_t *t, const weft_event_t *ev)
{
	t->pub.wakes++;
	t->pub.self_wakes++;
	check_self_wakes(p, t, ev);
}

static void on_poll(struct probe *p, task_rec_t *t, const weft_event_t *ev)
{
	uint64_t dur = ev->a1, start = ev->ts - (dur < ev->ts ? dur : ev->ts);
	/* Both histograms count from the task's second poll: found once. */
	weft_hist_t *h = t->pub.polls ? task_hist(p, t) : NULL;

	if (t->pub.state == WEFT_TASK_SCHEDULED && t->woken_at &&
	    start >= t->woken_at) {
		uint64_t delay = start - t->woken_at;

		t->pub.scheduled_ns += delay;
		if (h)
			weft_hist_add(&h[1], delay);
		if (delay > p->config.sched_delay_ns &&
		    !(t->once & (1u << WEFT_WARN_SCHEDULING_DELAY))) {
			char d[96];

			t->once |= 1u << WEFT_WARN_SCHEDULING_DELAY;
			snprintf(d, sizeof(d),
				 "woken, then waited %.1f ms for a worker",
				 (double)delay / 1e6);
			warn_task(p, WEFT_WARN_SCHEDULING_DELAY, t, ev->worker,
				  start, delay, d);
		}
	}
	t->pub.polls++;
	t->pub.busy_ns += dur;
	t->pub.last_worker = ev->worker;
	if (dur > t->pub.max_poll_ns)
		t->pub.max_poll_ns = dur;
	if (h)
		weft_hist_add(&h[0], dur);
	if (ev->worker < MAX_PROBE_WORKERS &&
	    dur > p->worker_max_poll[ev->worker])
		p->worker_max_poll[ev->worker] = dur;

	if (dur >= p->config.long_poll_ns &&
	    ev->ts > t->last_long_warn + 1000000000u) {
		char d[128];

		t->last_long_warn = ev->ts;
		snprintf(d, sizeof(d),
			 "one poll ran %.1f ms and blocked worker %u",
			 (double)dur / 1e6, ev->worker);
		warn_task(p, WEFT_WARN_LONG_POLL, t, ev->worker, start, dur, d);
	}

	if (ev->a2 & WEFT_POLL_YIELDED)
		self_wake(p, t, ev);
	if (t->in_done) {
		/*
		 * Finished already: a poll folded in after the task's end,
		 * which reconcile() took for finished (the poll pushed after
		 * that pass's snapshot), or whose end came from another ring
		 * read first.  It stays DONE.
		 */
	} else if (ev->a2 & WEFT_POLL_READY) {
		t->pub.state = WEFT_TASK_DONE;
		if (dur < 2000 && t->pub.polls == 1)
			p->tiny_count++;
	} else if (ev->a2 & WEFT_POLL_YIELDED) {
		/* Back in a queue from the poll's end (a wake in the poll
		 * came first, and counts from when it came). */
		t->pub.state = WEFT_TASK_SCHEDULED;
		t->woken_at = t->wake_in_poll >= start ? t->wake_in_poll
						       : ev->ts;
	} else if (t->wake_in_poll >= start) {
		t->pub.state = WEFT_TASK_SCHEDULED;
		t->woken_at = t->wake_in_poll;
	} else {
		t->pub.state = WEFT_TASK_IDLE;
		t->idle_since = ev->ts;
		t->lost_check_at = 0;
	}
	t->wake_in_poll = 0;
	task_changed(p, t);
}

static void on_wake(struct probe *p, task_rec_t *t, const weft_event_t *ev)
{
	(void)p;
	t->pub.wakes++;
	if (ev->a1 == t->pub.id)
		t->pub.self_wakes++;
	if (ev->a2 & WEFT_WAKE_BY_VAL)
		t->outstanding--;
	/*
	 * A wake handed over a pass late, stamped before the last poll we
	 * folded in, is taken as news: the task shows queued from it.  It
	 * may be stale (the poll ran on it), but it may as well be real: a
	 * wake made in a poll carries that poll's start, which can be long
	 * before it happened.  Telling them apart needs a stamp of its own.
	 */
	if (t->pub.state == WEFT_TASK_IDLE) {
		t->pub.idle_ns += ev->ts > t->idle_since ? ev->ts - t->idle_since
							  : 0;
		t->pub.state = WEFT_TASK_SCHEDULED;
		t->woken_at = ev->ts;
		/*
		 * It may be in a poll we have not seen end (a task taken for
		 * idle by a misjudged poll): if so, that poll's record ends
		 * it SCHEDULED, not IDLE, as any wake in a poll does.
		 */
		t->wake_in_poll = ev->ts;
	} else if (t->pub.state == WEFT_TASK_SCHEDULED) {
		t->wake_in_poll = ev->ts;
	}
	check_self_wakes(p, t, ev);
	task_changed(p, t);
}

static void on_complete(struct probe *p, task_rec_t *t, const weft_event_t *ev)
{
	if (t->end_unseen) {
		/* Late, not lost (reconcile()). */
		t->end_unseen = false;
		t->pub.warnings &= ~(1u << WEFT_WARN_EVENTS_DROPPED);
		p->stats.tasks_end_unseen--;
	}
	t->pub.state = WEFT_TASK_DONE;
	t->pub.status = (int32_t)ev->a2;
	t->pub.finished_ns = ev->ts;
	if (!t->in_done) {
		live_remove(p, t);
		t->in_done = true;
		t->dnext = NULL;
		if (p->done_tail)
			p->done_tail->dnext = t;
		else
			p->done_head = t;
		p->done_tail = t;
		p->ndone++;
	}
	task_changed(p, t);
}

/*
 * Whether an event of @kind may create the record of a task not known:
 * only those the task makes while it exists and that say something of it
 * (its spawn, its polls, a lock held across its await, its end).  A waker
 * can outlive its task by any time (in a waiter list, a timer), so can a
 * blocking job, and so can a weft_mutex_t it took and never released
 * (released later, anywhere, the release names it): a wake, a release or
 * a job's end arriving after the task was retired must not bring it back,
 * as a record that would never finish nor expire.
 */
static bool creates_task(uint8_t kind)
{
	switch (kind) {
	case WEFT_EV_SPAWN:
	case WEFT_EV_SPAWN_INFO:
	case WEFT_EV_SPAWN_LOC:
	case WEFT_EV_POLL:
	case WEFT_EV_COMPLETE:
	case WEFT_EV_LOCK_HELD_PENDING:
		return true;
	default:
		return false;
	}
}

static void process(struct probe *p, const weft_event_t *ev,
		    struct lock_pending *lp, task_rec_t **last_spawn)
{
	task_rec_t *t = NULL;

	/*
	 * Polls and wakes first, each with the lookup its kind needs: they
	 * are nearly every event, and going through creates_task() and then
	 * the switch cost them two dispatches an event (callgrind).
	 */
	if (ev->kind == WEFT_EV_POLL) {
		if (ev->task && (t = task_get(p, ev->task, ev->ts)))
			on_poll(p, t, ev);
		return;
	}
	if (ev->kind == WEFT_EV_WAKE) {
		if (ev->task && (t = task_find(p, ev->task)))
			on_wake(p, t, ev);
		return;
	}
	if (ev->task)
		t = creates_task(ev->kind)    ? task_get(p, ev->task, ev->ts) :
		    ev->kind != WEFT_EV_STEAL ? task_find(p, ev->task) :
						NULL;
	switch (ev->kind) {
	case WEFT_EV_SPAWN:
		if (!t)
			break;
		t->seen_spawn = true;
		t->pub.parent = ev->a1;
		t->pub.kind = (uint8_t)ev->a2;
		t->pub.spawned_ns = ev->ts;
		/*
		 * Queued from its spawn, unless its polls came first: a pass
		 * takes each ring up to the tail it saw, and a ring read
		 * early can leave the spawn to the next pass while the ring
		 * of the worker that stole and ran the task, read a moment
		 * later, had its polls (and its end).
		 */
		if (!t->pub.polls && !t->in_done) {
			t->pub.state = WEFT_TASK_SCHEDULED;
			t->woken_at = ev->ts;
		}
		*last_spawn = t;
		task_changed(p, t);
		break;
	case WEFT_EV_SPAWN_INFO:
		if (!t)
			break;
		t->pub.name = (const char *)(uintptr_t)ev->a1;
		t->pub.state_size = ev->a2;
		if (ev->a2 >= p->config.large_future_bytes) {
			char d[96];

			snprintf(d, sizeof(d), "its future's state is %u bytes",
				 ev->a2);
			warn_task(p, WEFT_WARN_LARGE_FUTURE, t, ev->worker,
				  ev->ts, 0, d);
		}
		break;
	case WEFT_EV_SPAWN_LOC:
		if (!t)
			break;
		t->pub.file = (const char *)(uintptr_t)ev->a1;
		t->pub.line = ev->a2;
		/* LARGE_FUTURE was raised before the location was known. */
		if (t->pub.warnings & (1u << WEFT_WARN_LARGE_FUTURE)) {
			weft_probe_warning_t *w =
				&p->warnings[(p->warn_seq - 1) % WARN_KEEP];

			if (w->task == t->pub.id) {
				w->file = t->pub.file;
				w->line = t->pub.line;
			}
		}
		break;
	case WEFT_EV_WAKER_CLONE:
		if (t) {
			t->pub.waker_clones++;
			t->outstanding++;
		}
		break;
	case WEFT_EV_WAKER_DROP:
		if (t) {
			t->pub.waker_drops++;
			t->outstanding--;
		}
		break;
	case WEFT_EV_COMPLETE:
		if (t)
			on_complete(p, t, ev);
		break;
	case WEFT_EV_STEAL:
		if (ev->worker < MAX_PROBE_WORKERS && ev->a1 < 64)
			p->workers[ev->worker].stolen_from[ev->a1] += ev->a2;
		break;
	case WEFT_EV_LOCK_HELD_PENDING:
		if (!t)
			break;
		lp->valid = true;
		lp->t = t;
		lp->name = (const char *)(uintptr_t)ev->a1;
		lp->held_ns = (uint64_t)ev->a2 * 1000u;
		lp->at = ev->ts;
		lp->worker = ev->worker;
		t->pub.locks_held++;
		break;
	case WEFT_EV_LOCK_SITE:
		if (lp->valid) {
			char d[160];

			char site[96];

			if (ev->a2)
				snprintf(site, sizeof(site), "%s:%u",
					 ev->a1 ? (const char *)(uintptr_t)ev->a1
						: "?",
					 ev->a2);
			else
				snprintf(site, sizeof(site), "%s",
					 ev->a1 ? (const char *)(uintptr_t)ev->a1
						: "?");
			snprintf(d, sizeof(d),
				 "held lock \"%s\" (taken at %s) across an "
				 "await, %.2f ms so far",
				 lp->name ? lp->name : "?", site,
				 (double)lp->held_ns / 1e6);
			warn_task(p, WEFT_WARN_LOCK_HELD_ACROSS_AWAIT, lp->t,
				  lp->worker, lp->at, lp->held_ns, d);
			lp->valid = false;
		}
		break;
	default:
		break;
	}
}

/*
 * Events folded in per chunk: 4,096 of 32 bytes, 128 KiB, which stays in
 * the collector's cache from the merge through process() and the
 * subscribers.  (Copying whole passes out first, up to 8 MiB a ring,
 * then converting, merging and folding them in one sweep each, went
 * through memory four times an event.)
 */
#define CHUNK_EVENTS 4096

/* A run's head stamp, cached: the heap compares it O(log k) a run. */
static inline void seg_head(struct seg_s *s)
{
	const weft_ring_t *r = &s->e->ring;

	s->ts = r->buf[s->pos & r->mask].ts;
}

static void heap_down(struct seg_s **h, size_t n, size_t j)
{
	for (;;) {
		size_t l = 2 * j + 1, r = l + 1, m = j;

		if (l < n && h[l]->ts < h[m]->ts)
			m = l;
		if (r < n && h[r]->ts < h[m]->ts)
			m = r;
		if (m == j)
			return;
		struct seg_s *t = h[j];
		h[j] = h[m];
		h[m] = t;
		j = m;
	}
}

/*
 * Snapshots every ring: one run per ring from its head to the tail it has
 * now (p->segs, p->heap).  Rings of threads gone are flagged (e->last) to
 * be freed once their run is taken.  Returns the number of runs, or 0
 * without memory for them (the events wait for the next pass).
 */
static size_t snapshot(struct probe *p)
{
	ring_entry_t **pp = &p->rings;
	size_t nsegs = 0;

	p->fill = 0;
again:
	for (; *pp; pp = &(*pp)->next) {
		ring_entry_t *e = *pp;
		/* Acquire: pairs with ring_orphan(); all its pushes are in. */
		bool orphan = load_acquire(&e->orphan);
		size_t cap = weft__ring_capacity(&e->ring);
		/* Relaxed: only the collector writes head. */
		uint64_t head = load_relaxed(&e->ring.head);
		/*
		 * Acquire: pairs with the producer's release store of tail;
		 * every slot before it is written and ours to read.
		 */
		uint64_t tail = load_acquire(&e->ring.tail);
		uint64_t drops;

		if (nsegs == p->segs_cap) {
			size_t ncap = p->segs_cap ? 2 * p->segs_cap : 16;
			struct seg_s *ns = malloc(ncap * sizeof(*ns));
			struct seg_s **nh = malloc(ncap * sizeof(*nh));

			if (!ns || !nh) {
				free(ns);
				free(nh);
				/* No pass: no ring is drained, none freed. */
				for (ring_entry_t *r = p->rings; r; r = r->next)
					r->last = false;
				return 0;
			}
			free(p->segs);
			free(p->heap);
			p->segs = ns;
			p->heap = nh;
			p->segs_cap = ncap;
			/* A new array: start over (nothing taken yet). */
			pp = &p->rings;
			nsegs = 0;
			p->fill = 0;
			goto again;
		}
		if ((double)(tail - head) / (double)cap > p->fill)
			p->fill = (double)(tail - head) / (double)cap;
		if (tail != head)
			p->segs[nsegs++] = (struct seg_s){ e, head, tail, 0 };
		drops = weft__ring_drops(&e->ring);
		p->drops_total += drops - e->drops_seen;
		e->drops_seen = drops;
		e->last = orphan;
	}
	/*
	 * Rings registered since the last pass, taken only now, after the
	 * known rings' tails were read, and read in turn: an event seen
	 * above that followed (through a task handed over, a lock) one in a
	 * new ring makes that ring's push happen before our exchange, so its
	 * event is in this pass too.  Taken first, a ring pushed meanwhile
	 * would miss this pass while what followed its first event made it
	 * (a task's COMPLETE before its SPAWN).  Acquire: pairs with the
	 * release push in weft__probe_ring_register; each entry and its ring
	 * are whole.  Appended at *pp, the end of the list, so that the
	 * loop above goes on with them.
	 */
	{
		ring_entry_t *fresh = atomic_exchange_explicit(
			&weft__probe_new_rings, NULL, memory_order_acquire);

		if (fresh) {
			while (fresh) {
				ring_entry_t *next = fresh->next;

				fresh->next = *pp;
				*pp = fresh;
				fresh = next;
			}
			goto again;
		}
	}
	for (size_t i = 0; i < nsegs; i++) {
		p->heap[i] = &p->segs[i];
		seg_head(&p->segs[i]);
	}
	for (size_t i = nsegs / 2; i-- > 0;)
		heap_down(p->heap, nsegs, i);
	return nsegs;
}

/*
 * Ring lines given back to the producer out of our caches (clflushopt),
 * so that it writes them again, a lap later, from memory rather than from
 * the collector's core.  On this project's CI guests a line fetched back
 * from the other vCPU is dear (the c2c probe: 100-670 ns), and sequential
 * misses to memory are what a core's prefetchers hide best.  Measured
 * (tools/bench/README.md, session 7): probe_event, marks written while the
 * collector drained on the other vCPU, ran 8.2-17.8 ns an event in half
 * the runs and 3.4-3.8 with the flush in every run; yield_many with
 * events, median 48.3 -> 42.5 ns an op, for about 2.2 ns an event more on
 * the collector.  Whole lines only (one
 * half taken waits for the next run).  clflushopt keeps a line coherent
 * whoever writes it next: a hint to the caches, no part of the ring's
 * protocol.  WEFT_PROBE_RING_FLUSH=0 turns it off.
 */
#if defined(__x86_64__)
static bool flush_offered(void)
{
	unsigned a, b, c, d;
	const char *s = getenv("WEFT_PROBE_RING_FLUSH");

	if (s && !strcmp(s, "0"))
		return false;
	/* CPUID.(7,0):EBX[23] (valgrind's CPU says no, and means it). */
	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
		return false;
	return (b & bit_CLFLUSHOPT) != 0;
}

static void flush_taken(const weft_ring_t *r, uint64_t from, uint64_t to)
{
	/* Locals: the asm's char operand may alias them, and they would be
	 * loaded again each line. */
	weft_event_t *buf = r->buf;
	uint64_t mask = r->mask;

	/* Two 32-byte slots a 64-byte line; the buffer is page aligned. */
	for (uint64_t q = from & ~(uint64_t)1; q + 2 <= to; q += 2)
		__asm__ volatile("clflushopt %0"
				 : "+m"(*(volatile char *)&buf[q & mask]));
}
#else
static bool flush_offered(void)
{
	return false;
}

static void flush_taken(const weft_ring_t *r, uint64_t from, uint64_t to)
{
	(void)r, (void)from, (void)to;
}
#endif

/*
 * Takes the next chunk of the pass's events, earliest first, into
 * p->chunk: a k-way merge over the runs' heads (each ring is in time
 * order), O(log k) an event, read straight from the rings.  Gives the
 * slots taken back to their producers.  Returns how many (0: the pass's
 * events are all taken).  @nheap: the runs left, updated.  Out of line:
 * it runs once a chunk, and inlined into the pass its loop lost the
 * clock's constants to the stack (callgrind).
 */
__attribute__((noinline)) static size_t take_chunk(struct probe *p,
						   size_t *nheap)
{
	struct seg_s **h = p->heap;
	size_t n = *nheap, out = 0;
	struct weft__probe_clock_conv cv;
	uint64_t from;

	/*
	 * Each event is converted to ns as it is copied, while its slot is
	 * in L1: a sweep of its own over the chunk afterwards went through
	 * the chunk (larger than L1) once more.  The merge
	 * compares the raw stamps, in the rings and in the heap alike.
	 */
	weft__probe_clock_conv_get(&cv);

	/*
	 * The earliest run gives events up to the next run's head (runs of
	 * a ring tend to come in stretches: a busy worker's while another
	 * idles), then goes back into the heap.
	 */
	while (n && out < CHUNK_EVENTS) {
		struct seg_s *s = h[0];
		const weft_ring_t *r = &s->e->ring;
		uint64_t bound = UINT64_MAX, k = s->end - s->pos;

		if (n > 1)
			bound = h[1]->ts;
		if (n > 2 && h[2]->ts < bound)
			bound = h[2]->ts;
		if (k > CHUNK_EVENTS - out)
			k = CHUNK_EVENTS - out;
		from = s->pos;
		if (cv.tsc) {
			do {
				weft_event_t *d = &p->chunk[out++];

				*d = r->buf[s->pos++ & r->mask];
				weft__probe_clock_conv_event(&cv, d);
			} while (--k && r->buf[s->pos & r->mask].ts <= bound);
		} else {
			do {
				p->chunk[out++] = r->buf[s->pos++ & r->mask];
			} while (--k && r->buf[s->pos & r->mask].ts <= bound);
		}
		if (p->flush_rings)
			flush_taken(r, from, s->pos);
		if (s->pos == s->end)
			h[0] = h[--n];
		else
			seg_head(s);
		heap_down(h, n, 0);
	}
	*nheap = n;
	/*
	 * Release: our reads of the slots taken happen before the producer
	 * sees them free (pairs with its acquire load of head on a full
	 * ring).  Every run's, taken from this chunk or not: a store of the
	 * same value is harmless, and the runs are few.
	 */
	for (size_t i = 0; i < p->nsegs_pass; i++)
		store_release(&p->segs[i].e->ring.head, p->segs[i].pos);
	return out;
}

/* Frees the rings of threads gone, whose last events were just taken. */
static void free_orphans(struct probe *p)
{
	ring_entry_t **pp = &p->rings;

	while (*pp) {
		ring_entry_t *e = *pp;

		if (e->last) {
			*pp = e->next;
			weft__ring_fini(&e->ring);
			free(e);
			continue;
		}
		pp = &e->next;
	}
}

/* -------------------------------------------------------------- workers */

/*
 * A steal storm: worker @i's steal rate (tasks stolen per poll over the
 * window) far above the other workers' mean, at a rate that matters.  The
 * others' mean, not the mean of all: with two workers the thief is half
 * of the mean and could never stand far above it.
 */
static double others_mean(const double *rate, unsigned n, unsigned i)
{
	double sum = 0;

	for (unsigned j = 0; j < n; j++)
		if (j != i)
			sum += rate[j];
	return n > 1 ? sum / (n - 1) : 0;
}

bool weft__probe_steal_storm(const double *rate, const double *per_s,
			     unsigned n, unsigned i)
{
	if (n < 2 || i >= n)
		return false;
	return per_s[i] >= STEAL_STORM_PER_S &&
	       rate[i] >= STEAL_STORM_RATE &&
	       rate[i] > STEAL_STORM_FACTOR * others_mean(rate, n, i);
}

static void sample_workers(struct probe *p, uint64_t now)
{
	weft_runtime_t *rt = p->rt;
	unsigned n, pos, old;
	double rate[MAX_PROBE_WORKERS], per_s[MAX_PROBE_WORKERS];

	if (!rt) {
		p->stats.workers = 0;
		return;
	}
	n = weft_runtime_workers(rt);
	if (n > MAX_PROBE_WORKERS)
		n = MAX_PROBE_WORKERS;
	p->stats.workers = n;
	pos = p->window_pos;
	old = p->window_fill < WINDOW ? 0 : (pos + 1) % WINDOW;
	for (unsigned i = 0; i < n; i++) {
		weft_probe_worker_t *w = &p->workers[i];
		worker_window_t *cur = &p->window[i][pos];
		worker_window_t *o = &p->window[i][old];
		weft_worker_t *rw = &rt->workers[i];
		double dt;
		uint64_t polls, task, started;

		weft_worker_metrics(rt, i, &cur->m);
		cur->at_ns = now;
		w->index = (uint16_t)i;
		w->counters = cur->m;
		w->queue_depth = cur->m.local_queue_depth;
		dt = (double)(now - o->at_ns) / 1e9;
		polls = cur->m.polls - o->m.polls;
		if (p->window_fill > 0 && dt > 0) {
			w->polls_per_s = (double)polls / dt;
			w->steals_per_s = (double)(cur->m.steals - o->m.steals) /
					  dt;
			w->steal_rate = polls ? (double)(cur->m.steals -
							 o->m.steals) /
							(double)polls
					      : 0;
			w->busy_ratio = (double)(cur->m.busy_ns - o->m.busy_ns) /
					(dt * 1e9);
			if (w->busy_ratio > 1)
				w->busy_ratio = 1;
		}
		w->max_poll_ns = p->worker_max_poll[i];
		/* Relaxed: the worker's published current poll (a hint). */
		task = load_relaxed(&rw->probe_task);
		started = load_relaxed(&rw->probe_poll_start);
		w->current_task = task;
		w->poll_started_ns = task ? weft__probe_clock_to_ns(started) : 0;
		w->state = task ? 0 : cur->m.parks > cur->m.unparks ? 2 : 1;
		if (task && w->poll_started_ns &&
		    now > w->poll_started_ns + p->config.long_poll_ns &&
		    p->worker_yield_warned[i] != started) {
			task_rec_t *t = task_get(p, task, now);
			char d[128];

			p->worker_yield_warned[i] = started;
			snprintf(d, sizeof(d),
				 "still in one poll after %.1f ms: worker %u is "
				 "blocked",
				 (double)(now - w->poll_started_ns) / 1e6, i);
			if (t)
				warn_task(p, WEFT_WARN_NEVER_YIELDED, t,
					  (uint16_t)i, w->poll_started_ns,
					  now - w->poll_started_ns, d);
		}
		rate[i] = w->steal_rate;
		per_s[i] = w->steals_per_s;
	}
	for (unsigned i = 0; i < n && n > 1; i++) {
		weft_probe_worker_t *w = &p->workers[i];

		if (now <= p->worker_storm_warned[i] + 5000000000u)
			continue;
		if (weft__probe_steal_storm(rate, per_s, n, i)) {
			char d[160];
			unsigned victim = 0;
			uint64_t most = 0;

			for (unsigned j = 0; j < n && j < 64; j++)
				if (w->stolen_from[j] > most) {
					most = w->stolen_from[j];
					victim = j;
				}
			p->worker_storm_warned[i] = now;
			/*
			 * stolen_from counts STEAL events since start (not
			 * windowed; empty in counters-only mode).
			 */
			snprintf(d, sizeof(d),
				 "worker %u: %.0f%% of its polls are stolen "
				 "tasks (others %.0f%%), %.0f steals/s%s",
				 i, w->steal_rate * 100,
				 others_mean(rate, n, i) * 100, w->steals_per_s,
				 most ? ", since start mostly from worker " : "");
			if (most)
				snprintf(d + strlen(d), sizeof(d) - strlen(d),
					 "%u", victim);
			warn(p, WEFT_WARN_STEAL_STORM, NULL, (uint16_t)i, now, 0,
			     "%s", d);
		}
	}
	if (!p->oversub_warned) {
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);

		p->oversub_warned = true;
		if (cpus > 0 && n > (unsigned)cpus)
			warn(p, WEFT_WARN_OVERSUBSCRIBED, NULL,
			     WEFT_EVENT_NO_WORKER, now, 0,
			     "%u workers on %ld CPUs: expect lower throughput",
			     n, cpus);
	}
	p->window_pos = (pos + 1) % WINDOW;
	if (p->window_fill < WINDOW)
		p->window_fill++;
}

/* -------------------------------------------------------------- the pass */

/* Finished tasks are never idle: only the live list needs a look. */
static void check_idle_tasks(struct probe *p, uint64_t now)
{
	for (task_rec_t *t = p->live; t; t = t->lnext) {
		if (t->pub.state != WEFT_TASK_IDLE || !t->seen_spawn ||
		    t->outstanding > 0 || t->pub.polls == 0 ||
		    (t->once & (1u << WEFT_WARN_LOST_WAKER)))
			continue;
		if (!t->lost_check_at) {
			t->lost_check_at = now;
			continue;
		}
		if (now - t->lost_check_at < 1000000000u)
			continue;
		t->once |= 1u << WEFT_WARN_LOST_WAKER;
		warn_task(p, WEFT_WARN_LOST_WAKER, t, t->pub.last_worker, now,
			  now - t->idle_since,
			  "pending with no waker left: it will never be "
			  "polled again");
	}
}

static void retire(struct probe *p, uint64_t now)
{
	/*
	 * By age, and by count: a service spawning a million tasks a second
	 * would otherwise keep six million records (gigabytes) in here.
	 */
	while (p->done_head &&
	       (p->done_head->pub.finished_ns + p->config.retain_ns < now ||
		p->ndone > p->config.retain_max)) {
		task_rec_t *t = p->done_head;

		p->done_head = t->dnext;
		/* The next one's fields, while this one is freed. */
		if (p->done_head) {
			__builtin_prefetch(&p->done_head->pub.finished_ns);
			__builtin_prefetch(&p->done_head->dnext, 1);
		}
		if (!p->done_head)
			p->done_tail = NULL;
		p->ndone--;
		/* Off the list: publish() frees a changed one only then. */
		t->dnext = NULL;
		t->retired = true;
		if (t->changed)
			continue; /* publish() frees it, after sending it */
		task_free(p, t);
	}
}

static void publish(struct probe *p, uint64_t now)
{
	const weft_probe_task_t **changed = NULL, **all = NULL;
	size_t nchanged = 0, nall = 0, nwarn;
	const weft_probe_warning_t *warns;
	weft_probe_warning_t *tmp = NULL;
	bool need_all = false;

	for (weft_probe_sub_t *s = p->subs; s; s = s->next)
		need_all |= s->need_full && s->opts.on_update;
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
	}

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
		if (s->need_full && all) {
			u.tasks = all;
			u.ntasks = nall;
			u.full = true;
			s->need_full = false;
		} else {
			u.tasks = changed;
			u.ntasks = changed ? nchanged : 0;
		}
		s->opts.on_update(s->opts.ctx, &u);
	}
	free(tmp);
	free(all);
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
				task_free(p, t);
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
			task_free(p, t);
	}
	p->nchanged = 0;
}

/*
 * The runtime's live tasks of owned-list shard @i, into *@buf (grown as
 * needed; the caller frees it).  Returns how many, or SIZE_MAX without
 * memory.
 */
static size_t owned_shard(struct probe *p, unsigned i, weft__task_info_t **buf,
			  size_t *cap)
{
	size_t n;

	while ((n = weft__owned_shard_info(&p->rt->owned, i, *buf, *cap)) >
	       *cap) {
		size_t ncap = n + n / 2 + 16;
		weft__task_info_t *nb = realloc(*buf, ncap * sizeof(**buf));

		if (!nb)
			return SIZE_MAX;
		*buf = nb;
		*cap = ncap;
	}
	return n;
}

/*
 * Tasks spawned before anyone listened.  The collector learns of a task
 * from its events, so one idle since before the first listener (a
 * connection waiting for its next request) would never show, or show
 * without a name.  On the first pass after a listener or a runtime
 * arrives, the runtime's owned list names every live task.  Such a task's
 * state and counts start here (it is not known to have been spawned
 * while we watched: no lost-waker check).
 */
static void seed_tasks(struct probe *p, uint64_t now)
{
	weft__task_info_t *buf = NULL;
	size_t cap = 0;

	for (unsigned i = 0; i < OWNED_SHARDS; i++) {
		size_t n = owned_shard(p, i, &buf, &cap);

		if (n == SIZE_MAX)
			break;
		for (size_t j = 0; j < n; j++) {
			task_rec_t *t = task_get(p, buf[j].id, now);

			if (!t || t->pub.name || t->pub.file)
				continue;
			t->pub.name = buf[j].name;
			t->pub.file = buf[j].file;
			t->pub.line = (uint32_t)buf[j].line;
			t->pub.state_size = buf[j].state_size;
			t->pub.kind = buf[j].kind;
			task_changed(p, t);
		}
	}
	free(buf);
}

/*
 * Tasks whose end was dropped.  A record learns that its task finished
 * from the COMPLETE event; where a full ring dropped it, the record would
 * stay live, on the console and in memory, as long as the collector runs.
 * So after drops (at most once a second) the runtime's owned list settles
 * it.  A task is on that list from before its first event until before its
 * COMPLETE (task.c: insert, then the spawn's events; remove, then
 * COMPLETE), and every event this pass folded in was pushed before the
 * pass read its ring's tail (release, acquire), which was before the list
 * is read here under the shards' locks.  So a task of a live record that
 * is not on the list now has completed.  Its record is finished at @now,
 * its status unknown (0), with the events-dropped bit among its warnings.
 * A COMPLETE that was only late (pushed after this pass's snapshot) still
 * sets the time and status when it comes, and takes the bit back.  Only
 * with one runtime: the list is p->rt's, and another's tasks are not on
 * it.  Returns false, with nothing settled, without memory.
 *
 * Which drops: those counted before this pass's snapshot (@drops_before
 * in weft__collector_pass()).  A drop counted during the snapshot can be
 * the end of a task whose first event sits in a ring read before it, left
 * to the next pass; the record that event makes would then wait for the
 * next drop to be settled.  A drop read with acquire in one pass (its
 * count is stored with release, after the producer saw the task's
 * earlier events) has that task's events in the next pass's snapshot.
 */
static bool reconcile(struct probe *p, uint64_t now)
{
	weft__task_info_t *buf = NULL;
	size_t cap = 0;
	task_rec_t *t, *next;

	for (t = p->live; t; t = t->lnext)
		t->in_owned = false;
	for (unsigned i = 0; i < OWNED_SHARDS; i++) {
		size_t n = owned_shard(p, i, &buf, &cap);

		if (n == SIZE_MAX) {
			/* Nothing settled: none is finished. */
			free(buf);
			return false;
		}
		for (size_t j = 0; j < n; j++)
			if ((t = task_find(p, buf[j].id)))
				t->in_owned = true;
	}
	free(buf);
	for (t = p->live; t; t = next) {
		weft_event_t end = { .ts = now, .task = t->pub.id,
				     .kind = WEFT_EV_COMPLETE };

		next = t->lnext;
		if (t->in_owned)
			continue;
		on_complete(p, t, &end);
		t->end_unseen = true;
		t->pub.warnings |= 1u << WEFT_WARN_EVENTS_DROPPED;
		p->stats.tasks_end_unseen++;
	}
	return true;
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

void weft__collector_pass(struct probe *p, uint64_t now)
{
	struct lock_pending lp = { 0 };
	task_rec_t *last_spawn = NULL;
	size_t n = 0, got, nheap;
	uint64_t dt_ns = p->last_pass_ns ? now - p->last_pass_ns : 0;
	uint64_t polls0 = 0, steals0 = 0, polls1 = 0, steals1 = 0;
	/* Settled by reconcile() this pass: see there. */
	uint64_t drops_before = p->drops_total;

	weft__probe_clock_calibrate();
	if (p->need_seed && p->rt) {
		p->need_seed = false;
		seed_tasks(p, now);
	}
	nheap = p->nsegs_pass = snapshot(p);
	while ((got = take_chunk(p, &nheap)) > 0) {
		pass_events(p, got);
		for (size_t i = 0; i < got; i++)
			process(p, &p->chunk[i], &lp, &last_spawn);
		n += got;
	}
	free_orphans(p);
	p->events_total += n;

	for (unsigned i = 0; i < p->stats.workers; i++) {
		polls0 += p->workers[i].counters.polls;
		steals0 += p->workers[i].counters.steals;
	}
	sample_workers(p, now);
	for (unsigned i = 0; i < p->stats.workers; i++) {
		polls1 += p->workers[i].counters.polls;
		steals1 += p->workers[i].counters.steals;
	}
	if (p->passes % 10 == 0)
		check_idle_tasks(p, now);
	if (drops_before > p->drops_reconciled && p->rt &&
	    p->nruntimes == 1 && now >= p->reconciled_at + 1000000000u) {
		p->reconciled_at = now;
		if (reconcile(p, now))
			p->drops_reconciled = drops_before;
	}
	if (p->drops_total > p->drops_warned_at &&
	    now > p->stats.now_ns + 0) {
		warn(p, WEFT_WARN_EVENTS_DROPPED, NULL, WEFT_EVENT_NO_WORKER,
		     now, 0,
		     "%llu events dropped so far: the collector fell behind",
		     (unsigned long long)p->drops_total);
		p->drops_warned_at = p->drops_total * 2;
	}
	if (p->tiny_count > 10000 && now > p->tiny_warned_at + 10000000000ull) {
		p->tiny_warned_at = now;
		warn(p, WEFT_WARN_TINY_TASKS, NULL, WEFT_EVENT_NO_WORKER, now,
		     0,
		     "%llu tasks ran one poll under 2 us: spawning costs more "
		     "than their work; batch them",
		     (unsigned long long)p->tiny_count);
		p->tiny_count = 0;
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
	p->stats.warnings = p->warn_seq;
	p->stats.clock = weft__probe_clock_describe();
	if (dt_ns) {
		double dt = (double)dt_ns / 1e9;

		p->stats.events_per_s = (double)n / dt;
		p->stats.polls_per_s = (double)(polls1 - polls0) / dt;
		p->stats.steals_per_s = (double)(steals1 - steals0) / dt;
	}
	p->last_pass_ns = now;
	p->last_dt_ns = dt_ns;
	account_cpu(p, now);
	retire(p, now);
	publish(p, now);
}

uint64_t weft__collector_interval(struct probe *p)
{
	uint64_t i = p->config.interval_ns, min = i / 20, next;

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
	p->flush_rings = flush_offered();
	p->ntasks = 0;
	p->last_found = NULL;
	p->live = NULL;
	p->need_seed = true;
	p->stats.start_ns = weft__probe_clock_ns();
	p->last_pass_ns = 0;
	p->window_fill = 0;
	p->window_pos = 0;
	p->cpu_base_set = false;
	p->stats.collector_cpu = 0;
	p->stats.collector_cpu_ns = 0;
	return 0;
}

void weft__collector_stop(struct probe *p)
{
	free(p->table);
	p->table = NULL;
	p->table_size = 0;
	p->ntasks = 0;
	p->last_found = NULL;
	pool_fini(&p->rec_pool);
	pool_fini(&p->hist_pool);
	p->changed = NULL;
	p->nchanged = 0;
	p->live = NULL;
	p->done_head = p->done_tail = NULL;
	p->ndone = 0;
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
	if (p->records) {
		weft_wire_events_fini(&p->records->enc);
		weft_wire_buf_fini(&p->records->buf);
		free(p->records);
		p->records = NULL;
	}
}
