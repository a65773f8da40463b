/* SPDX-License-Identifier: MIT */
/*
 * weft-bench-gentrace's world: the task-per-request service that
 * gentrace.c's opening comment describes, simulated one worker at a time
 * for a millisecond of trace time (run_slice()), then the steals
 * (steal_round()).  What happens goes out as events in each worker's
 * buffer (g.w[i].ev; a blocking job's in g.pool) and as the tasks marked
 * for the next update (g.dirty); gentrace_file.c writes both.  Every
 * choice comes from one seeded generator, in a fixed order: the same
 * options, the same events.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gentrace.h"

#define TICKERS_PER_WORKER 64u
#define LONG_POLL_EVERY 100000u
#define WARN_KEEP 4096u /* warnings kept for one update at most */
/* Where the process's static strings would be (SPAWN_INFO's a1, ...). */
#define ADDR_BASE 0x55d4a1c00000ull

const struct wait_desc waits[NWAIT] = {
	[W_CACHE] = { 100000, R_CACHE, WEFT_RES_OP_ACQUIRE, WEFT_WAKE_TASK,
		      112 },
	[W_DB] = { 2000000, R_DB, WEFT_RES_OP_READABLE, WEFT_WAKE_IO, 148 },
	[W_SLEEP] = { 10000000, R_WHEEL, WEFT_RES_OP_SLEEP, WEFT_WAKE_TIMER,
		      171 },
	[W_UPSTREAM] = { 100000000, R_UPSTREAM, WEFT_RES_OP_RECV,
			 WEFT_WAKE_FOREIGN, 203 },
	[W_JOB] = { 1000000, R_POOL, WEFT_RES_OP_JOB, WEFT_WAKE_BLOCKING, 230 },
	[W_TICK] = { 250000000, 0, 0, WEFT_WAKE_TIMER, 41 },
};

static const struct res_desc {
	uint8_t kind;
	const char *name;
} res_descs[NRES + 1] = {
	[R_CACHE] = { WEFT_RES_MUTEX, "cache" },
	[R_DB] = { WEFT_RES_IO, "db.sock" },
	[R_WHEEL] = { WEFT_RES_TIMER_WHEEL, "timer wheel" },
	[R_UPSTREAM] = { WEFT_RES_MPSC, "upstream" },
	[R_POOL] = { WEFT_RES_BLOCKING_POOL, "blocking pool" },
};

/* Spawn sites: the acceptor, the tickers, then the requests'. */
const struct site sites[] = {
	{ "acceptor", "src/server.c", 88, 192 },
	{ "ticker", "src/metrics.c", 30, 96 },
	{ "get_user", "src/http/handlers.c", 402, 320 },
	{ "get_feed", "src/http/handlers.c", 431, 512 },
	{ "post_item", "src/http/handlers.c", 466, 448 },
	{ "search", "src/http/search.c", 57, 1024 },
	{ "health", "src/http/handlers.c", 380, 64 },
	{ "login", "src/http/auth.c", 120, 384 },
};
#define SITE_REQ0 2u
#define NSITES (sizeof(sites) / sizeof(sites[0]))
_Static_assert(NSITES <= 32, "a worker's sites_told has a bit a site");

/* Bit-exact and fast: xorshift64*. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

/* A uniform value in [0, n). */
static uint64_t rnd_below(uint64_t n)
{
	return (uint64_t)(((unsigned __int128)rnd() * n) >> 64);
}

/* Mixes @seed into the generator (whose state is never 0). */
void world_seed(unsigned long seed)
{
	rng_state ^= seed * 0xbf58476d1ce4e5b9ull;
	if (!rng_state)
		rng_state = 1;
}

static uint64_t addr_of_site(unsigned i)
{
	return ADDR_BASE + 0x40ull * i;
}

static uint64_t addr_of_file(unsigned i)
{
	return ADDR_BASE + 0x10000 + 0x40ull * i;
}

static uint64_t addr_of_await(unsigned wait)
{
	return ADDR_BASE + 0x20000 + 0x40ull * wait;
}

static void emit(struct evbuf *b, uint64_t ts, uint8_t kind, uint16_t worker,
		 uint64_t task, uint64_t a1, uint32_t a2)
{
	weft_event_t *e;

	if (b->n == b->cap) {
		b->cap = b->cap ? 2 * b->cap : 4096;
		b->e = xrealloc(b->e, b->cap * sizeof(*b->e));
	}
	e = &b->e[b->n++];
	e->ts = ts;
	e->task = task;
	e->a1 = a1;
	e->a2 = a2;
	e->worker = worker;
	e->kind = kind;
	e->flags = 0;
}

static void wemit(struct worker *w, uint64_t ts, uint8_t kind, uint64_t task,
		  uint64_t a1, uint32_t a2)
{
	emit(&w->ev, ts, kind, w->index, task, a1, a2);
}

static void mark_dirty(uint32_t slot)
{
	struct task *t = &g.tasks[slot];

	if (t->dirty_epoch == g.epoch + 1)
		return;
	t->dirty_epoch = g.epoch + 1;
	if (g.ndirty == g.dirty_cap) {
		g.dirty_cap = g.dirty_cap ? 2 * g.dirty_cap : 4096;
		g.dirty = xrealloc(g.dirty, g.dirty_cap * sizeof(*g.dirty));
	}
	g.dirty[g.ndirty++] = slot;
}

static uint32_t task_new(struct worker *w, unsigned site, uint64_t parent,
			 uint64_t at)
{
	struct task *t;
	uint32_t slot;

	if (!g.nfree) {
		uint32_t old = g.ntasks_cap, cap = old ? 2 * old : 16384;

		g.tasks = xrealloc(g.tasks, cap * sizeof(*g.tasks));
		g.free_slots =
			xrealloc(g.free_slots, cap * sizeof(*g.free_slots));
		for (uint32_t i = cap; i-- > old;)
			g.free_slots[g.nfree++] = i;
		g.ntasks_cap = cap;
	}
	slot = g.free_slots[--g.nfree];
	t = &g.tasks[slot];
	memset(t, 0, sizeof(*t));
	t->id = g.next_id++;
	t->parent = parent;
	t->spawned_ns = at;
	t->site = (uint8_t)site;
	t->worker = w->index;
	t->state = WEFT_TASK_SCHEDULED;
	t->since = at;
	t->wait = NWAIT;
	t->parked = PARKED_NONE;
	/*
	 * One event a spawn, naming its site (id: index + 1), which the
	 * worker's ring announces before its first spawn from it, as a
	 * runtime's does (runtime/src/task.c).
	 */
	if (!(w->sites_told & 1u << site)) {
		w->sites_told |= 1u << site;
		wemit(w, at, WEFT_EV_SITE, site + 1, addr_of_site(site),
		      sites[site].state_size);
		wemit(w, at, WEFT_EV_SITE_LOC, site + 1, addr_of_file(site),
		      sites[site].line);
	}
	wemit(w, at, WEFT_EV_SPAWN, t->id, parent,
	      (uint32_t)(site + 1) << WEFT_SPAWN_SITE_SHIFT);
	w->model.counters.spawned++;
	g.spawned++;
	if (++g.live > g.live_max)
		g.live_max = g.live;
	mark_dirty(slot);
	return slot;
}

static void runq_push(struct worker *w, uint32_t slot)
{
	if (w->rq_len == w->rq_cap) {
		uint32_t cap = w->rq_cap ? 2 * w->rq_cap : 1024;
		uint32_t *q = xrealloc(NULL, cap * sizeof(*q));

		for (uint32_t i = 0; i < w->rq_len; i++)
			q[i] = w->runq[(w->rq_head + i) & (w->rq_cap - 1)];
		free(w->runq);
		w->runq = q;
		w->rq_cap = cap;
		w->rq_head = 0;
	}
	w->runq[(w->rq_head + w->rq_len++) & (w->rq_cap - 1)] = slot;
}

static uint32_t runq_pop(struct worker *w)
{
	uint32_t slot = w->runq[w->rq_head];

	w->rq_head = (w->rq_head + 1) & (w->rq_cap - 1);
	w->rq_len--;
	return slot;
}

/* The newest one (a thief takes from the back: the victim's order stays). */
static uint32_t runq_pop_back(struct worker *w)
{
	w->rq_len--;
	return w->runq[(w->rq_head + w->rq_len) & (w->rq_cap - 1)];
}

static void fifo_push(struct fifo *f, uint32_t slot, uint64_t due)
{
	if (f->len == f->cap) {
		uint32_t cap = f->cap ? 2 * f->cap : 256;
		struct fifo_entry *e = xrealloc(NULL, cap * sizeof(*e));

		for (uint32_t i = 0; i < f->len; i++)
			e[i] = f->e[(f->head + i) & (f->cap - 1)];
		free(f->e);
		f->e = e;
		f->cap = cap;
		f->head = 0;
	}
	f->e[(f->head + f->len) & (f->cap - 1)].slot = slot;
	f->e[(f->head + f->len) & (f->cap - 1)].due = due;
	f->len++;
}

static void warn(struct worker *w, const struct task *t, unsigned kind,
		 uint64_t at, uint64_t value, const char *detail)
{
	weft_probe_warning_t *x;

	g.warnings++;
	if (g.nwarn == WARN_KEEP) {
		g.warn_lost++;
		return;
	}
	if (!g.warn)
		g.warn = xrealloc(NULL, WARN_KEEP * sizeof(*g.warn));
	x = &g.warn[g.nwarn++];
	memset(x, 0, sizeof(*x));
	x->seq = ++g.warn_seq;
	x->kind = (uint8_t)kind;
	x->worker = w->index;
	x->task = t ? t->id : 0;
	x->task_name = t ? sites[t->site].name : NULL;
	x->file = t ? sites[t->site].file : NULL;
	x->line = t ? sites[t->site].line : 0;
	x->at_ns = at;
	x->value_ns = value;
	snprintf(x->detail, sizeof(x->detail), "%s", detail);
}

/* ------------------------------------------------------------ a worker */

static void unpark(struct worker *w, uint32_t reason)
{
	if (!w->parked)
		return;
	wemit(w, w->now, WEFT_EV_UNPARK, 0, 0, reason);
	w->parked = false;
	w->busy_since = w->now;
	w->model.counters.unparks++;
}

static void park(struct worker *w)
{
	if (w->parked)
		return;
	wemit(w, w->now, WEFT_EV_PARK, 0, 0, 0);
	w->parked = true;
	w->model.counters.busy_ns += w->now - w->busy_since;
	w->model.counters.parks++;
}

/* @slot's wait ended (at w->now): it is woken and queued on @w. */
static void wake(struct worker *w, uint32_t slot)
{
	struct task *t = &g.tasks[slot];
	const struct wait_desc *d = &waits[t->wait];
	uint64_t now = w->now;

	switch (t->wait) {
	case W_DB:
		wemit(w, now, WEFT_EV_IO_READY, 0, 100 + t->id % 64, 1);
		break;
	case W_SLEEP:
	case W_TICK:
		wemit(w, now, WEFT_EV_TIMER_FIRE, 0, 0, 1);
		break;
	default:
		break;
	}
	if (t->wait == W_JOB) {
		/* The pool thread ran it and woke the task. */
		uint64_t run = d->latency_ns / 2, start = now - run;

		emit(&g.pool, start, WEFT_EV_BLOCKING_START,
		     WEFT_EVENT_NO_WORKER, t->id, addr_of_await(W_JOB), 0);
		emit(&g.pool, now, WEFT_EV_BLOCKING_END, WEFT_EVENT_NO_WORKER,
		     t->id, run, 0);
		emit(&g.pool, now, WEFT_EV_WAKE, WEFT_EVENT_NO_WORKER, t->id, 0,
		     WEFT_WAKE_BLOCKING | WEFT_WAKE_BY_VAL);
		emit(&g.pool, now, WEFT_EV_RES_WAIT_END, WEFT_EVENT_NO_WORKER,
		     t->id, R_POOL, WEFT_RES_OP_JOB);
	} else {
		/* The cache's holder hands the lock on. */
		wemit(w, now, WEFT_EV_WAKE, t->id,
		      t->wait == W_CACHE ? t->id - 1 : 0,
		      d->source | WEFT_WAKE_BY_VAL);
		if (d->res)
			wemit(w, now, WEFT_EV_RES_WAIT_END, t->id, d->res,
			      d->op | (t->wait == W_CACHE ?
					       WEFT_RES_ACQUIRED |
						       1u << WEFT_RES_COUNT_SHIFT :
					       0));
	}
	if (d->res) {
		weft_probe_resource_t *r = &g.res[d->res];

		r->waits++;
		r->nwaiters--;
		weft_hist_add(&g.res_wait[d->res], now - t->waiting_since_ns);
		if (t->wait == W_CACHE) {
			r->acquires++;
			r->nholders = 1;
			t->holds = 1;
		}
	}
	t->waiting = 0;
	t->wakes++;
	t->idle_ns += now - t->since;
	t->since = now;
	t->state = WEFT_TASK_SCHEDULED;
	runq_push(w, slot);
	mark_dirty(slot);
}

static void wake_due(struct worker *w)
{
	for (unsigned k = 0; k < NWAIT; k++) {
		struct fifo *f = &w->fifo[k];

		while (f->len && f->e[f->head].due <= w->now) {
			uint32_t slot = f->e[f->head].slot;

			f->head = (f->head + 1) & (f->cap - 1);
			f->len--;
			wake(w, slot);
		}
	}
}

/* A request's next wait. */
static unsigned pick_wait(void)
{
	uint64_t r = rnd_below(1000);

	return r < 450 ? W_CACHE :
	       r < 800 ? W_DB :
	       r < 960 ? W_SLEEP :
	       r < 990 ? W_UPSTREAM :
			 W_JOB;
}

static uint64_t poll_duration(void)
{
	uint64_t r = rnd();

	/* Mostly 0.3 to 1.3 us, one in sixteen ten times that. */
	return (300 + (r & 1023)) * ((r >> 20 & 15) ? 1 : 10);
}

/* Polls the task at the head of @w's run queue. */
static void poll_one(struct worker *w)
{
	uint32_t slot = runq_pop(w);
	struct task *t = &g.tasks[slot];
	uint64_t start = w->now, dur = poll_duration(), end;
	unsigned k = NWAIT;
	uint32_t site;
	bool ready, clone;

	if (start - t->since > 500000 &&
	    start - w->last_delay_warn > 100000000) {
		char d[64];

		snprintf(d, sizeof(d), "waited %.1f ms for a worker",
			 (double)(start - t->since) / 1e6);
		w->last_delay_warn = start;
		t->warnings |= 1u << WEFT_WARN_SCHEDULING_DELAY;
		warn(w, t, WEFT_WARN_SCHEDULING_DELAY, start, start - t->since,
		     d);
	}
	t->scheduled_ns += start - t->since;
	if (++g.long_poll_in == LONG_POLL_EVERY) {
		char d[64];

		g.long_poll_in = 0;
		dur = 1000000 + rnd_below(7000000);
		snprintf(d, sizeof(d), "polled for %.1f ms without yielding",
			 (double)dur / 1e6);
		t->warnings |= 1u << WEFT_WARN_LONG_POLL;
		warn(w, t, WEFT_WARN_LONG_POLL, start + dur, dur, d);
	}
	end = start + dur;
	if (t->holds) {
		wemit(w, start + dur / 2, WEFT_EV_RES_RELEASE, t->id, R_CACHE,
		      1);
		g.res[R_CACHE].nholders = 0;
		weft_hist_add(&g.res_hold[R_CACHE], start + dur / 2 - t->since);
		t->holds = 0;
	}
	ready = t->site >= SITE_REQ0 && !t->steps;
	if (t->site == SITE_ACCEPTOR) {
		/* Every request arrived by now, a task each (task_new() may
		 * move the table: the acceptor's id read once, before). */
		uint64_t parent = t->id;
		unsigned n = 0;

		while (w->next_arrival <= start && n < 64) {
			uint32_t s = task_new(
				w,
				SITE_REQ0 +
					(unsigned)rnd_below(NSITES - SITE_REQ0),
				parent, start);

			g.tasks[s].steps = (uint8_t)(1 + rnd_below(4));
			runq_push(w, s);
			w->next_arrival +=
				(uint64_t)(-log((double)(rnd() >> 11) *
							0x1.0p-53 +
						0x1.0p-60) *
					   (double)w->mean_gap);
			n++;
		}
		t = &g.tasks[slot]; /* the table may have moved */
	}
	/*
	 * Where a pending poll parks, drawn here (no draw in between, as
	 * before): a task that waits on the database or upstream clones its
	 * own waker in its poll, counted in the POLL as the runtime does
	 * (WEFT_POLL_CLONES_SHIFT), no WAKER_CLONE of its own.
	 */
	if (!ready)
		k = t->site == SITE_ACCEPTOR ? NWAIT :
		    t->site == SITE_TICKER   ? W_TICK :
					       pick_wait();
	clone = !ready && (k == W_DB || k == W_UPSTREAM);
	/*
	 * Parked elsewhere than after its last pending poll: said in the
	 * POLL, by the await site's id (k + 1; the acceptor's NWAIT + 1),
	 * announced first on this worker's ring, as a runtime does since
	 * parkfold (runtime/src/task.c); no PARKED_AT.
	 */
	site = 0;
	if (!ready && k != t->parked && !g.parked_at_mode) {
		site = k + 1;
		if (!(w->awaits_told & 1u << k)) {
			w->awaits_told |= 1u << k;
			wemit(w, end, WEFT_EV_AWAIT_SITE, site,
			      k < NWAIT ? addr_of_await(k) : addr_of_file(0),
			      k < NWAIT ? waits[k].line : ACCEPT_LINE);
		}
	}
	wemit(w, end, WEFT_EV_POLL, t->id, dur,
	      (ready ? WEFT_POLL_READY : 0) |
		      (clone ? 1u << WEFT_POLL_CLONES_SHIFT : 0) |
		      site << WEFT_POLL_SITE_SHIFT);
	t->polls++;
	t->busy_ns += dur;
	if (dur > t->max_poll_ns)
		t->max_poll_ns = dur;
	t->worker = w->index;
	w->model.counters.polls++;
	w->window_polls++;
	w->window_poll_ns += dur;
	if (dur > w->window_max)
		w->window_max = dur;
	g.polls++;
	if (ready) {
		wemit(w, end, WEFT_EV_COMPLETE, t->id, 0, 0);
		t->state = WEFT_TASK_DONE;
		t->finished_ns = end;
		w->model.counters.completed++;
		g.completed++;
		g.live--;
	} else {
		const struct wait_desc *d = &waits[k < NWAIT ? k : W_DB];

		t->state = WEFT_TASK_IDLE;
		t->since = end;
		if (t->site >= SITE_REQ0)
			t->steps--;
		/* The old form: the place in a PARKED_AT of its own. */
		if (g.parked_at_mode && k != t->parked)
			wemit(w, end, WEFT_EV_PARKED_AT, t->id,
			      k < NWAIT ? addr_of_await(k) : addr_of_file(0),
			      k < NWAIT ? d->line : ACCEPT_LINE);
		t->parked = (uint8_t)k;
		if (k < NWAIT) {
			uint64_t lat = d->latency_ns;

			if (d->res) {
				wemit(w, end, WEFT_EV_RES_WAIT, t->id, d->res,
				      d->op);
				g.res[d->res].nwaiters++;
				t->waiting = 1;
				t->waiting_since_ns = end;
			}
			if (clone)
				t->clones++;
			t->wait = (uint8_t)k;
			fifo_push(&w->fifo[k], slot,
				  end + lat - lat / 4 + rnd_below(lat / 2 + 1));
		}
	}
	mark_dirty(slot);
	w->now = end + 100 + (rnd() & 255);
}

/* The next time something is due on @w. */
static uint64_t next_due(const struct worker *w)
{
	uint64_t t = w->next_arrival;

	for (unsigned k = 0; k < NWAIT; k++)
		if (w->fifo[k].len && w->fifo[k].e[w->fifo[k].head].due < t)
			t = w->fifo[k].e[w->fifo[k].head].due;
	return t;
}

void run_slice(struct worker *w, uint64_t slice_end)
{
	struct task *acc = &g.tasks[w->acceptor];

	while (w->now < slice_end) {
		uint64_t t;

		wake_due(w);
		if (w->next_arrival <= w->now && acc->state == WEFT_TASK_IDLE) {
			unpark(w, 1);
			wemit(w, w->now, WEFT_EV_IO_READY, 0, 3, 1);
			wemit(w, w->now, WEFT_EV_WAKE, acc->id, 0,
			      WEFT_WAKE_IO | WEFT_WAKE_BY_VAL);
			acc->wakes++;
			acc->idle_ns += w->now - acc->since;
			acc->since = w->now;
			acc->state = WEFT_TASK_SCHEDULED;
			runq_push(w, w->acceptor);
			mark_dirty(w->acceptor);
			continue;
		}
		if (w->rq_len) {
			unpark(w, 1);
			poll_one(w);
			acc = &g.tasks[w->acceptor];
			continue;
		}
		t = next_due(w);
		if (t > w->now + 20000)
			park(w);
		if (t >= slice_end) {
			w->now = slice_end;
			break;
		}
		if (t > w->now)
			w->now = t;
		unpark(w, 0);
	}
	wemit(w, w->now, WEFT_EV_LOCAL_DEPTH, 0, 0, w->rq_len);
}

/* Workers with nothing queued take half of the longest queue. */
void steal_round(void)
{
	for (unsigned i = 0; i < g.nworkers; i++) {
		struct worker *th = &g.w[i], *v = NULL;
		uint32_t n;

		if (th->rq_len)
			continue;
		for (unsigned j = 0; j < g.nworkers; j++)
			if (j != i && g.w[j].rq_len >= 4 &&
			    (!v || g.w[j].rq_len > v->rq_len))
				v = &g.w[j];
		if (!v)
			continue;
		n = v->rq_len / 2;
		unpark(th, 2);
		for (uint32_t k = 0; k < n; k++) {
			uint32_t slot = runq_pop_back(v);

			if (slot == v->acceptor) {
				runq_push(v, slot);
				break;
			}
			runq_push(th, slot);
		}
		wemit(th, th->now, WEFT_EV_STEAL, 0, v->index, th->rq_len);
		th->model.counters.steals += th->rq_len;
		th->model.counters.steal_ops++;
		g.steals++;
	}
}

/* ------------------------------------------------------------ the start */

/* The workers, the resources, the acceptors and the tickers. */
void world_setup(void)
{
	uint64_t mean_gap;

	g.w = xrealloc(NULL, g.nworkers * sizeof(*g.w));
	memset(g.w, 0, g.nworkers * sizeof(*g.w));
	g.next_id = 1;
	g.now = g.start_ns;
	/* Per worker: the mean gap between its requests. */
	mean_gap = (uint64_t)(1e9 * g.nworkers / g.rate);
	if (!mean_gap)
		mean_gap = 1;
	for (unsigned r = 1; r <= NRES; r++) {
		g.res[r].id = r;
		g.res[r].kind = res_descs[r].kind;
		g.res[r].name = res_descs[r].name;
		g.res[r].file = r == R_WHEEL || r == R_POOL ? NULL :
							      "src/main.c";
		g.res[r].line = r == R_WHEEL || r == R_POOL ? 0 : 20 + r;
		g.res[r].created_ns = g.start_ns;
	}
	for (unsigned i = 0; i < g.nworkers; i++) {
		struct worker *w = &g.w[i];

		w->index = (uint16_t)i;
		w->now = g.start_ns;
		w->busy_since = g.start_ns;
		w->model.index = (uint16_t)i;
		w->mean_gap = mean_gap;
		w->next_arrival = g.start_ns + rnd_below(mean_gap);
		if (i == 0)
			for (unsigned r = 1; r <= NRES; r++) {
				wemit(w, w->now, WEFT_EV_RES_NEW, 0, r,
				      res_descs[r].kind);
				wemit(w, w->now, WEFT_EV_RES_NAME, r,
				      ADDR_BASE + 0x30000 + 0x40ull * r, 0);
			}
		w->acceptor = task_new(w, SITE_ACCEPTOR, 0, w->now);
		runq_push(w, w->acceptor);
		for (unsigned k = 0; k < TICKERS_PER_WORKER; k++)
			runq_push(w, task_new(w, SITE_TICKER, 0, w->now));
	}
}
