/* SPDX-License-Identifier: MIT */
/*
 * Waiting that grows: task leaks per spawn site, and wake bursts.
 *
 * Task leak.  Each live task with a spawn site (file:line, or its name
 * when it has none) counts in that site's entry of a fixed table (keyed
 * by the file's pointer and the line: static strings), and sits on the
 * site's list in spawn order, from its SPAWN_LOC (or the owned list's
 * seed) to its end.  Spawns and ends move counters; nothing walks every
 * task.  Every quarter of the window (WEFT_TASK_LEAK_WINDOW, 3 s) each
 * site's live count is sampled; a site is a suspect when over the last
 * window its count grew in three of the four quarters, ending past
 * WEFT_TASK_LEAK_MIN live tasks (LEAK_FLOOR, 256, by default).  A busy
 * site whose tasks finish can look like that for a
 * window (a random walk goes up three times in four one time in three);
 * what it cannot do is keep its tasks: so a suspect's list is walked
 * from its oldest (at most once a second, at most LEAK_WALK tasks) and
 * it is a leak only if most of the tasks it had half a window ago are
 * still there, and most of those are pending since their first poll,
 * waiting for something other than a timer (whose wake is scheduled).
 * Said once, then again with a doubling pause while it goes on.
 *
 * Wake burst.  A WAKE's a1 is the task whose poll woke it (0: none), and
 * the emitting worker's ring has that poll's POLL after its wakes.  So
 * per worker a run of wakes is counted, from the first wake of a poll to
 * the POLL that ends it; wakes with no waking task (a driver's, a thread
 * that is not a worker: weft_notify_waiters() from anywhere) form runs
 * that end at a pause of RUN_GAP_NS or after RUN_SPAN_NS (a thread
 * preempted in the middle of its wakes makes two runs, each judged).  Each woken task is marked with its
 * run (wake_seq); its first poll after adds its wake-to-poll delay to the
 * run.  A run of more than WEFT_WAKE_BURST wakes (1,000) is a burst: it
 * stays (BURST_SLOTS) until its woken tasks have mostly been polled, or
 * a second, and is then said in one warning with their delays; the
 * woken tasks' own scheduling-delay warnings are folded into it.  A
 * woken task polled late while its run is still open (the waking poll
 * not yet over, its run short of the threshold so far: the rings of a
 * pass can hold its polls and only the first of the wakes) has its
 * warning held, up to RUN_HELD a run, and raised as ever if the run ends
 * short.
 *
 * Everything here runs on the collector thread, probe.lock held.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "collector_internal.h"
#include "weft/wire.h"

/* ------------------------------------------------------------ task leak */

#define LEAK_SITES 1024    /* table slots (a power of two) */
#define LEAK_SITES_MAX 768 /* sites tracked at most (3/4 full) */
#define LEAK_FLOOR 256 /* live tasks before a site may be a leak: the default */
#define LEAK_SAMPLES 5     /* the window's four quarters' ends */
#define LEAK_WALK 8192     /* a suspect's oldest tasks looked at */
#define LEAK_WALK_EVERY_NS 1000000000ull
#define LEAK_REPEAT_NS 10000000000ull      /* the pause after a warning, */
#define LEAK_REPEAT_MAX_NS 640000000000ull /* doubling to ~11 min */
#define PARKED_TALLY 16 /* distinct parked sites counted in a walk */

struct leak_site {
	const void *key; /* the file, or the name (by_name) */
	const char *file, *name;
	uint32_t line;
	bool by_name;
	uint32_t live;
	task_rec_t *head, *tail;       /* live tasks, oldest first */
	uint32_t sample[LEAK_SAMPLES]; /* live at each quarter, newest last */
	uint8_t nsamples;
	uint64_t walked_at;
	uint64_t said_at, repeat_ns;
	uint32_t said_live;
};

/* ----------------------------------------------------------- wake burst */

#define RUN_HELD 16 /* scheduling-delay warnings held a run */
/*
 * Wakes with no task: a pause ends a run, and so does its length.  The
 * pause is long enough for a thread preempted amid its wakes (a busy
 * host's slices are milliseconds); the length keeps a thread that wakes
 * tasks steadily from making one endless run: it is a burst only at more
 * than the threshold in RUN_SPAN_NS (10,000 a second by default).
 */
#define RUN_GAP_NS 20000000ull
#define RUN_SPAN_NS 100000000ull
#define RUN_STALE_NS 50000000ull /* and one with no wake since, at a pass */
#define RUN_MAX_NS 1000000000ull /* a waking poll whose POLL never came */
#define BURST_SLOTS 8
#define BURST_WAIT_NS 1000000000ull  /* said a second after, at the latest, */
#define BURST_KEEP_NS 10000000000ull /* and kept for stragglers 10 s */

struct wake_run {
	uint32_t seq; /* 0: none */
	uint32_t woken;
	uint64_t waker;
	const char *name, *file;
	uint32_t line;
	uint16_t worker;
	uint8_t source;
	uint64_t first_ts, last_ts;
	uint32_t polled, over;
	bool said; /* a burst said, kept for its last woken tasks' polls */
	bool flagged; /* its worker's run_open set, while a run */
	weft_hist_t delays;
	struct held {
		uint64_t task, start, delay;
		uint16_t worker;
	} held[RUN_HELD];
	unsigned nheld;
};

struct leak_state {
	struct leak_site sites[LEAK_SITES];
	uint16_t used[LEAK_SITES_MAX]; /* the sites in use, by slot */
	unsigned nused;
	uint64_t sampled_at;
	uint32_t seq;
	/* A run per worker (slot: its index), nruns of them, grown with
	 * the workers' records; and the other threads' (slot
	 * WEFT_EVENT_NO_WORKER). */
	struct wake_run *runs;
	unsigned nruns;
	struct wake_run other;
	struct wake_run bursts[BURST_SLOTS]; /* seq 0: free */
	unsigned nbursts;
};

int weft__collector_leak_start(struct probe *p)
{
	if (!p->leak)
		p->leak = calloc(1, sizeof(*p->leak));
	if (!p->leak)
		return -ENOMEM;
	if (weft__collector_leak_fit(p, p->nworker_slots)) {
		free(p->leak);
		p->leak = NULL;
		return -ENOMEM;
	}
	return 0;
}

void weft__collector_leak_stop(struct probe *p)
{
	/* The records that pointed into it go with the pools. */
	if (p->leak)
		free(p->leak->runs);
	free(p->leak);
	p->leak = NULL;
	for (unsigned i = 0; i < p->nworker_slots; i++)
		p->wk[i].run_open = false;
}

int weft__collector_leak_fit(struct probe *p, unsigned n)
{
	struct leak_state *L = p->leak;
	struct wake_run *r;

	if (!L || n <= L->nruns)
		return 0;
	r = realloc(L->runs, n * sizeof(*r));
	if (!r)
		return -ENOMEM;
	memset(&r[L->nruns], 0, (n - L->nruns) * sizeof(*r));
	L->runs = r;
	L->nruns = n;
	return 0;
}

/* The run of slot @slot (a worker's index, else the other threads'). */
static struct wake_run *run_of(struct leak_state *L, unsigned slot)
{
	return slot < L->nruns ? &L->runs[slot] : &L->other;
}

static uint64_t window_ns(const struct probe *p)
{
	return p->config.task_leak_window_ns ? p->config.task_leak_window_ns :
					       3000000000ull;
}

static size_t site_hash(const void *key, uint32_t line)
{
	uint64_t h = ((uint64_t)(uintptr_t)key >> 3) ^
		     ((uint64_t)line * 0x9e3779b97f4a7c15ull);

	return (size_t)(h ^ (h >> 29)) & (LEAK_SITES - 1);
}

/* The site of @key:@line, made if there is room; NULL if none. */
static struct leak_site *site_get(struct leak_state *L, const void *key,
				  bool by_name, uint32_t line)
{
	size_t i = site_hash(key, line);

	for (;; i = (i + 1) & (LEAK_SITES - 1)) {
		struct leak_site *s = &L->sites[i];

		if (!s->key) {
			if (L->nused >= LEAK_SITES_MAX)
				return NULL;
			s->key = key;
			s->by_name = by_name;
			s->line = line;
			L->used[L->nused++] = (uint16_t)i;
			return s;
		}
		if (s->key == key && s->line == line && s->by_name == by_name)
			return s;
	}
}

void weft__collector_leak_spawned(struct probe *p, task_rec_t *t)
{
	struct leak_state *L = p->leak;
	const void *key = t->pub.file ? (const void *)t->pub.file :
					(const void *)t->pub.name;
	struct leak_site *s;

	/* Finished already: its end came first, from another ring. */
	if (!L || t->site || t->in_done || !key)
		return;
	s = site_get(L, key, !t->pub.file, t->pub.file ? t->pub.line : 0);
	if (!s)
		return;
	s->file = t->pub.file;
	s->name = t->pub.name;
	s->live++;
	t->site = s;
	t->snext = NULL;
	t->sprev = s->tail;
	if (s->tail)
		s->tail->snext = t;
	else
		s->head = t;
	s->tail = t;
}

void weft__collector_leak_done(struct probe *p, task_rec_t *t)
{
	struct leak_site *s = t->site;

	(void)p;
	if (t->sprev)
		t->sprev->snext = t->snext;
	else
		s->head = t->snext;
	if (t->snext)
		t->snext->sprev = t->sprev;
	else
		s->tail = t->sprev;
	t->snext = t->sprev = NULL;
	s->live--;
	t->site = NULL;
}

/* Most of the tasks it had half a window ago still there, pending. */
static void site_walk(struct probe *p, struct leak_site *s, uint64_t now)
{
	uint64_t half = window_ns(p) / 2;
	struct parked {
		const char *file;
		uint32_t line, n;
	} tally[PARKED_TALLY];
	unsigned ntally = 0, best = 0;
	uint32_t walked = 0, pending = 0;
	uint32_t then = s->sample[LEAK_SAMPLES / 2];
	const task_rec_t *t;
	struct leak_said l;

	for (t = s->head; t && walked < LEAK_WALK; t = t->snext) {
		unsigned k;

		if (t->pub.spawned_ns + half > now)
			break; /* younger than half a window: the rest too */
		walked++;
		if (t->pub.state != WEFT_TASK_IDLE || t->pub.polls > 1)
			continue;
		/*
		 * Asleep on a timer: its wake is scheduled, its end likely
		 * (a session that lives longer than the window is no leak:
		 * an outside tester's 5 s sessions were said to be one).
		 */
		if (t->pub.waiting_on &&
		    (t->pub.waiting_op & WEFT_RES_OP_MASK) == WEFT_RES_OP_SLEEP)
			continue;
		pending++;
		for (k = 0; k < ntally; k++)
			if (tally[k].file == t->pub.parked_file &&
			    tally[k].line == t->pub.parked_line)
				break;
		if (k == ntally && ntally < PARKED_TALLY)
			tally[ntally++] = (struct parked){ t->pub.parked_file,
							   t->pub.parked_line,
							   0 };
		if (k < ntally && ++tally[k].n > tally[best].n)
			best = k;
	}
	/*
	 * What it had half a window ago, mostly still there (or more of it
	 * than a walk looks at), and most of that pending since its first
	 * poll.
	 */
	if ((walked * 2 < then && walked < LEAK_WALK) || pending * 2 <= walked)
		return;
	memset(&l, 0, sizeof(l));
	l.file = s->by_name ? NULL : s->file;
	l.name = s->name;
	l.line = s->line;
	l.live = s->live;
	l.walked = walked;
	l.pending = pending;
	l.window_ns = window_ns(p);
	l.per_s = (double)(s->sample[LEAK_SAMPLES - 1] - s->sample[0]) /
		  ((double)l.window_ns / 1e9);
	l.oldest = s->head->pub.id;
	l.oldest_name = s->head->pub.name;
	l.oldest_age_ns = now - s->head->pub.spawned_ns;
	l.oldest_unseen = !s->head->seen_spawn;
	if (ntally) {
		l.parked_file = tally[best].file;
		l.parked_line = tally[best].line;
		l.parked_n = tally[best].n;
	}
	l.said_live = s->said_live;
	l.at = now;
	weft__collector_warn_leak(p, &l);
	s->repeat_ns = s->said_at ? s->repeat_ns * 2 : LEAK_REPEAT_NS;
	if (s->repeat_ns > LEAK_REPEAT_MAX_NS)
		s->repeat_ns = LEAK_REPEAT_MAX_NS;
	s->said_at = now;
	s->said_live = s->live;
}

/* A quarter of the window passed: @s sampled, and judged. */
static void site_sample(struct probe *p, struct leak_site *s, uint64_t now)
{
	const uint32_t *v = s->sample;
	unsigned ups = 0;

	memmove(s->sample, s->sample + 1,
		(LEAK_SAMPLES - 1) * sizeof(s->sample[0]));
	s->sample[LEAK_SAMPLES - 1] = s->live;
	if (s->nsamples < LEAK_SAMPLES) {
		s->nsamples++;
		return;
	}
	if (s->live < (p->config.task_leak_min ? p->config.task_leak_min :
						 LEAK_FLOOR) ||
	    v[LEAK_SAMPLES - 1] <= v[0])
		return;
	for (unsigned i = 0; i + 1 < LEAK_SAMPLES; i++)
		ups += v[i + 1] > v[i];
	if (ups + 1 < LEAK_SAMPLES - 1)
		return;
	if (s->said_at && now < s->said_at + s->repeat_ns)
		return;
	if (s->walked_at && now < s->walked_at + LEAK_WALK_EVERY_NS)
		return;
	s->walked_at = now;
	site_walk(p, s, now);
}

/* ----------------------------------------------------------- wake burst */

static void run_reset(struct wake_run *r)
{
	r->seq = 0;
	r->flagged = false;
	r->said = false;
	r->woken = r->polled = r->over = 0;
	r->nheld = 0;
	if (r->delays.count || r->delays.outliers)
		memset(&r->delays, 0, sizeof(r->delays));
}

static void burst_say(struct probe *p, struct wake_run *b)
{
	struct burst_said s = {
		.waker = b->waker,
		.name = b->name,
		.file = b->file,
		.line = b->line,
		.worker = b->worker,
		.source = b->source,
		.woken = b->woken,
		.at = b->first_ts,
		.span_ns = b->last_ts - b->first_ts,
		.polled = b->polled,
		.over = b->over,
		.max_ns = b->delays.max_ns,
		.p99_ns = b->delays.count ?
				  weft_hist_percentile(&b->delays, 99) :
				  0,
	};

	weft__collector_warn_burst(p, &s);
	b->said = true;
}

static void burst_free(struct probe *p, struct wake_run *b)
{
	run_reset(b);
	p->leak->nbursts--;
}

/* The run of @r's slot ends: a burst kept until said, or its held
 * warnings raised. */
static void run_close(struct probe *p, struct wake_run *r)
{
	struct leak_state *L = p->leak;

	if (r->flagged && r->worker < p->nworker_slots)
		p->wk[r->worker].run_open = false;
	r->flagged = false;

	if (r->woken > p->config.wake_burst) {
		struct wake_run *b = NULL;

		for (unsigned i = 0; i < BURST_SLOTS; i++) {
			if (!L->bursts[i].seq) {
				b = &L->bursts[i];
				break;
			}
			/* Else the oldest, a said one first. */
			if (!b || L->bursts[i].said > b->said ||
			    (L->bursts[i].said == b->said &&
			     L->bursts[i].first_ts < b->first_ts))
				b = &L->bursts[i];
		}
		if (b->seq && !b->said)
			burst_say(p, b); /* all taken: the oldest said now */
		if (b->seq)
			burst_free(p, b);
		*b = *r;
		b->nheld = 0; /* folded into it, counted in over */
		L->nbursts++;
	} else {
		for (unsigned i = 0; i < r->nheld; i++) {
			const struct held *h = &r->held[i];
			task_rec_t *t = weft__collector_task_find(p, h->task);

			if (t && weft__collector_delay_news(p, t, h->delay))
				weft__collector_warn_sched_delay(
					p, t, h->worker, h->start, h->delay);
		}
	}
	run_reset(r);
}

void weft__collector_burst_wake(struct probe *p, task_rec_t *t,
				const weft_event_t *ev)
{
	struct leak_state *L = p->leak;
	unsigned slot;
	struct wake_run *r;

	if (!L)
		return;
	slot = weft__collector_has_worker(p, ev->worker) &&
			       ev->worker < L->nruns ?
		       ev->worker :
		       WEFT_EVENT_NO_WORKER;
	r = run_of(L, slot);
	/*
	 * Another waker (a POLL dropped); taskless wakes after a pause, or
	 * past a run's span: a thread that wakes tasks steadily makes runs
	 * of RUN_SPAN_NS, a burst only if more than the threshold fit.
	 */
	if (r->seq && (r->waker != ev->a1 ||
		       (!ev->a1 && (ev->ts > r->last_ts + RUN_GAP_NS ||
				    ev->ts > r->first_ts + RUN_SPAN_NS))))
		run_close(p, r);
	if (!r->seq) {
		const task_rec_t *w =
			ev->a1 ? weft__collector_task_find(p, ev->a1) : NULL;

		if (!++L->seq)
			L->seq = 1;
		r->seq = L->seq;
		r->waker = ev->a1;
		r->name = w ? w->pub.name : NULL;
		r->file = w ? w->pub.file : NULL;
		r->line = w ? w->pub.line : 0;
		r->worker = ev->worker;
		r->source = (uint8_t)(ev->a2 & 0xff);
		r->first_ts = r->last_ts = ev->ts;
		if (slot != WEFT_EVENT_NO_WORKER) {
			r->flagged = true;
			p->wk[slot].run_open = true;
			/* poll_fast() of a poll on it tests run_open again
			 * (p->wk_gate). */
			p->wk_gate[slot] = 0;
		}
	}
	r->woken++;
	if (ev->ts > r->last_ts)
		r->last_ts = ev->ts;
	t->wake_seq = r->seq;
	t->wake_slot = (uint16_t)slot;
}

void weft__collector_burst_poll_end(struct probe *p, const weft_event_t *ev)
{
	struct wake_run *r;

	if (!p->leak || ev->worker >= p->leak->nruns)
		return; /* (the caller looked at run_open) */
	r = &p->leak->runs[ev->worker];
	if (!r->seq)
		return;
	/* A poll's wakes carry its start: the run spans the poll. */
	if (ev->task == r->waker && ev->ts > r->last_ts)
		r->last_ts = ev->ts;
	run_close(p, r);
}

bool weft__collector_burst_reaches(struct probe *p, const task_rec_t *t,
				   uint64_t start_ns)
{
	struct leak_state *L = p->leak;
	const struct wake_run *r;

	if (!L || !t->wake_seq ||
	    (t->wake_slot >= L->nruns && t->wake_slot != WEFT_EVENT_NO_WORKER))
		return false;
	r = run_of(L, t->wake_slot);
	/* Still open: its waking poll goes on, its end not yet known. */
	if (r->seq == t->wake_seq)
		return true;
	for (unsigned i = 0; L->nbursts && i < BURST_SLOTS; i++)
		if (L->bursts[i].seq == t->wake_seq)
			return L->bursts[i].last_ts >= start_ns;
	return false;
}

bool weft__collector_burst_delay(struct probe *p, task_rec_t *t,
				 const weft_event_t *ev, uint64_t delay_ns,
				 bool over)
{
	struct leak_state *L = p->leak;
	uint64_t start = ev->ts - (ev->a1 < ev->ts ? ev->a1 : ev->ts);
	struct wake_run *r = NULL;
	bool open = false;

	if (!L ||
	    (t->wake_slot >= L->nruns && t->wake_slot != WEFT_EVENT_NO_WORKER))
		return false;
	r = run_of(L, t->wake_slot);
	/* Taskless wakes paused before this poll began: that run is over. */
	if (r->seq == t->wake_seq && !r->waker &&
	    start > r->last_ts + RUN_GAP_NS)
		run_close(p, r);
	if (r->seq == t->wake_seq)
		open = true;
	else
		r = NULL;
	for (unsigned i = 0; !r && L->nbursts && i < BURST_SLOTS; i++)
		if (L->bursts[i].seq == t->wake_seq)
			r = &L->bursts[i];
	if (!r)
		return false;
	weft_hist_add(&r->delays, delay_ns);
	r->polled++;
	if (!over)
		return false;
	if (!open || r->woken > p->config.wake_burst) {
		r->over++;
		return true;
	}
	/*
	 * Held only while a waking poll goes on: taskless wakes are stamped
	 * as they come, so a wait past the threshold inside their run means
	 * a run as long, which a pause would have ended.
	 */
	if (!r->waker || r->nheld == RUN_HELD)
		return false;
	r->over++;
	r->held[r->nheld++] = (struct held){
		.task = t->pub.id,
		.start = start,
		.delay = delay_ns,
		.worker = ev->worker,
	};
	return true;
}

/*
 * A gap in listening ends: the live counts sampled before it and after
 * are not a series (tasks that ended in it, unheard, counted live until
 * the reconcile), nor the tasks a walk would find pending.  Each site's
 * samples start again.
 */
void weft__collector_leak_gap(struct probe *p)
{
	struct leak_state *L = p->leak;

	for (unsigned i = 0; L && i < L->nused; i++)
		L->sites[L->used[i]].nsamples = 0;
}

void weft__collector_leak_pass(struct probe *p, uint64_t now)
{
	struct leak_state *L = p->leak;
	uint64_t quarter;

	if (!L)
		return;
	/* Runs whose end no event will tell. */
	for (unsigned i = 0; i <= L->nruns; i++) {
		struct wake_run *r = i < L->nruns ? &L->runs[i] : &L->other;

		if (r->seq && ((!r->waker && now > r->last_ts + RUN_STALE_NS) ||
			       now > r->first_ts + RUN_MAX_NS))
			run_close(p, r);
	}
	/*
	 * Bursts said once their woken tasks were mostly polled, or a
	 * second on; kept while the last of them are polled (their delays
	 * folded in, not said again), 10 s at most.
	 */
	for (unsigned i = 0; L->nbursts && i < BURST_SLOTS; i++) {
		struct wake_run *b = &L->bursts[i];

		if (b->seq && !b->said &&
		    ((uint64_t)b->polled * 100 >= (uint64_t)b->woken * 99 ||
		     now > b->last_ts + BURST_WAIT_NS))
			burst_say(p, b);
		if (b->seq && b->said &&
		    (b->polled >= b->woken || now > b->last_ts + BURST_KEEP_NS))
			burst_free(p, b);
	}
	quarter = window_ns(p) / (LEAK_SAMPLES - 1);
	/* Not while a seed adds tasks pass after pass, nor a reconcile
	 * second after second (collector_reconcile.c): their sites' counts
	 * would rise at every quarter. */
	if (now < L->sampled_at + quarter || p->seed_shards ||
	    p->reconcile_more || p->gap_open)
		return;
	L->sampled_at = now;
	for (unsigned i = 0; i < L->nused; i++)
		site_sample(p, &L->sites[L->used[i]], now);
}
