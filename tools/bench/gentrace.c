/* SPDX-License-Identifier: MIT */
/*
 * weft-bench-gentrace OUT --bytes N: a synthetic trace file of about N
 * bytes, written fast, for timing the trace tools on files of many GB
 * (big-trace.sh, tests/trace_big.sh; issue 21).
 *
 * The file is what the recorder writes (probe/src/recorder.c), through
 * libweft-wire's own encoders: a FileHeader, then per collector pass
 * (20 ms of trace time) one EventBatch run per emitting thread, and an
 * Update every 100 ms with the tasks that changed (a task's name, file
 * and line in its first record only, as the delta stream thins them),
 * the workers, the stats, the new warnings and the resources.
 *
 * The service it pretends to trace is task-per-request: each worker has
 * an acceptor task that spawns a task per request (Poisson arrivals),
 * and each request awaits one to four things before it completes: the
 * cache's mutex (100 us), a database socket (2 ms), a timer (10 ms), an
 * upstream channel (100 ms) or, rarely, a blocking job (1 ms, on a pool
 * thread whose events are the "other threads'" run).  So most tasks live
 * a few milliseconds, a few thousand are live at a time, and a task
 * costs about 22 events.  Beside them, long-lived tickers wake on
 * the timer every 250 ms.  Workers park when idle and steal from each
 * other (checked every millisecond of trace time, in lock step); one
 * poll in 100,000 takes 1 to 8 ms and raises a long-poll warning.
 * Everything comes from a seeded generator: the same options write the
 * same events (the header's pid, host and start time are this run's).
 *
 * Memory: the live tasks, a pass's events and 8 MiB of output buffer;
 * never the file.  Exit status: 0; 1 when writing fails; 2 for bad usage.
 * The last line on stdout says what was written (key=value), for the
 * tests to check the tools against.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "weft/wire.h"

#define SLICE_NS 1000000ull /* steals and queue samples, in lock step */
#define PASS_SLICES 20u     /* a collector pass: 20 ms */
#define UPDATE_PASSES 5u    /* an Update every 100 ms */
#define FLUSH_BYTES (8u << 20)
#define MAX_WORKERS 256u
#define TICKERS_PER_WORKER 64u
#define LONG_POLL_EVERY 100000u
#define WARN_KEEP 4096u /* warnings kept for one update at most */
/* Where the process's static strings would be (SPAWN_INFO's a1, ...). */
#define ADDR_BASE 0x55d4a1c00000ull

static void die(int status, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), noreturn));

static void die(int status, const char *fmt, ...)
{
	va_list ap;

	fputs("weft-bench-gentrace: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(status);
}

static void *xrealloc(void *p, size_t n)
{
	if (!n)
		die(1, "internal error: zero-sized allocation");
	p = realloc(p, n);
	if (!p)
		die(1, "out of memory");
	return p;
}

/* ------------------------------------------------------------ the world */

/* What a task awaits; the first five are a request's. */
enum wait_kind { W_CACHE, W_DB, W_SLEEP, W_UPSTREAM, W_JOB, W_TICK, NWAIT };

/* Resources, ids 1.. in this order. */
enum res_kind { R_CACHE = 1, R_DB, R_WHEEL, R_UPSTREAM, R_POOL, NRES_PLUS1 };
#define NRES (NRES_PLUS1 - 1)

static const struct wait_desc {
	uint64_t latency_ns; /* how long the wait lasts, +- a quarter */
	unsigned res;        /* the resource waited on (0: none) */
	unsigned op;         /* weft_resource_op_t */
	unsigned source;     /* the wake's source */
	uint32_t line;       /* the await's line in handlers.c */
} waits[NWAIT] = {
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
static const struct site {
	const char *name;
	const char *file;
	uint32_t line;
	uint32_t state_size;
} sites[] = {
	{ "acceptor", "src/server.c", 88, 192 },
	{ "ticker", "src/metrics.c", 30, 96 },
	{ "get_user", "src/http/handlers.c", 402, 320 },
	{ "get_feed", "src/http/handlers.c", 431, 512 },
	{ "post_item", "src/http/handlers.c", 466, 448 },
	{ "search", "src/http/search.c", 57, 1024 },
	{ "health", "src/http/handlers.c", 380, 64 },
	{ "login", "src/http/auth.c", 120, 384 },
};
#define SITE_ACCEPTOR 0u
#define SITE_TICKER 1u
#define SITE_REQ0 2u
#define NSITES (sizeof(sites) / sizeof(sites[0]))

static const char handlers_c[] = "src/http/handlers.c";
#define ACCEPT_LINE 90u
#define PARKED_NONE 0xffu

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

struct task {
	uint64_t id, parent;
	uint64_t spawned_ns, finished_ns;
	uint64_t busy_ns, scheduled_ns, idle_ns, max_poll_ns;
	uint64_t since; /* when the state began (idle or scheduled) */
	uint64_t waiting_since_ns;
	uint64_t polls, wakes, clones;
	uint32_t dirty_epoch; /* the update it was listed for, + 1 */
	uint16_t worker;
	uint8_t site;
	uint8_t state;     /* weft_task_state_t */
	uint8_t steps;     /* waits left before it completes */
	uint8_t wait;      /* enum wait_kind of its wait, or NWAIT */
	uint8_t parked;    /* the await it is parked at: enum wait_kind,
			    * NWAIT the acceptor's, PARKED_NONE none yet */
	uint8_t waiting;   /* waits on waits[wait].res now */
	uint8_t holds;     /* holds the cache's mutex */
	uint8_t named;     /* its name went out */
	uint32_t warnings; /* bit (1 << kind) */
};

/* A FIFO of waiting tasks (one per kind of wait and worker). */
struct fifo_entry {
	uint32_t slot;
	uint64_t due;
};

struct fifo {
	struct fifo_entry *e;
	uint32_t head, len, cap; /* cap: a power of two */
};

struct evbuf {
	weft_event_t *e;
	size_t n, cap;
};

struct worker {
	uint16_t index;
	uint64_t now;
	bool parked;
	uint64_t next_arrival;
	uint64_t mean_gap; /* between its requests */
	uint32_t acceptor; /* its slot */
	uint32_t *runq;    /* ring of slots */
	uint32_t rq_head, rq_len, rq_cap;
	struct fifo fifo[NWAIT];
	struct evbuf ev;
	weft_probe_worker_t model;
	uint64_t poll_ns, window_polls, window_poll_ns, window_max;
	uint64_t busy_since;
	uint64_t last_delay_warn;
};

static struct {
	/* options */
	uint64_t want_bytes;
	unsigned nworkers;
	double rate; /* requests per second, all workers */
	bool progress;
	/* the world */
	struct task *tasks;
	uint32_t ntasks_cap, *free_slots, nfree;
	struct worker *w;
	struct evbuf pool; /* the blocking pool's threads: other threads */
	uint64_t next_id;
	uint64_t start_ns, now; /* the trace's clock */
	uint32_t epoch;         /* updates written so far */
	uint32_t *dirty;
	size_t ndirty, dirty_cap;
	weft_probe_warning_t *warn;
	size_t nwarn;
	uint64_t warn_seq, warn_lost;
	weft_probe_resource_t res[NRES + 1];
	weft_hist_t res_wait[NRES + 1], res_hold[NRES + 1];
	uint64_t res_new_at[NRES + 1];
	uint64_t prev_update_ns;
	uint64_t long_poll_in;
	/* output */
	int fd;
	const char *path;
	weft_wire_buf_t out;
	weft_wire_batch_t batch;
	weft_probe_task_t *copies;
	const weft_probe_task_t **tptrs;
	size_t copies_cap;
	/* what was written */
	uint64_t bytes, events, spawned, completed, polls, warnings, updates,
		batches, steals;
	uint64_t live, live_max;
	uint64_t prev_events, prev_polls, prev_steals; /* at the last update */
	/* progress */
	uint64_t t0, shown_at;
	bool shown;
} g;

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
	wemit(w, at, WEFT_EV_SPAWN, t->id, parent, 0);
	wemit(w, at, WEFT_EV_SPAWN_INFO, t->id, addr_of_site(site),
	      sites[site].state_size);
	wemit(w, at, WEFT_EV_SPAWN_LOC, t->id, addr_of_file(site),
	      sites[site].line);
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
	bool ready;

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
		/* Every request arrived by now, a task each. */
		unsigned n = 0;

		while (w->next_arrival <= start && n < 64) {
			uint32_t s = task_new(
				w,
				SITE_REQ0 +
					(unsigned)rnd_below(NSITES - SITE_REQ0),
				t->id, start);

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
	wemit(w, end, WEFT_EV_POLL, t->id, dur, ready ? WEFT_POLL_READY : 0);
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
		unsigned k = t->site == SITE_ACCEPTOR ? NWAIT :
			     t->site == SITE_TICKER   ? W_TICK :
							pick_wait();
		const struct wait_desc *d = &waits[k < NWAIT ? k : W_DB];

		t->state = WEFT_TASK_IDLE;
		t->since = end;
		if (t->site >= SITE_REQ0)
			t->steps--;
		if (k != t->parked) {
			wemit(w, end, WEFT_EV_PARKED_AT, t->id,
			      k < NWAIT ? addr_of_await(k) : addr_of_file(0),
			      k < NWAIT ? d->line : ACCEPT_LINE);
			t->parked = (uint8_t)k;
		}
		if (k < NWAIT) {
			uint64_t lat = d->latency_ns;

			if (d->res) {
				wemit(w, end, WEFT_EV_RES_WAIT, t->id, d->res,
				      d->op);
				g.res[d->res].nwaiters++;
				t->waiting = 1;
				t->waiting_since_ns = end;
			}
			if (k == W_DB || k == W_UPSTREAM) {
				wemit(w, end, WEFT_EV_WAKER_CLONE, t->id, 0, 0);
				t->clones++;
			}
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

static void run_slice(struct worker *w, uint64_t slice_end)
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
static void steal_round(void)
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

/* ------------------------------------------------------------ the file */

static void write_out(bool all)
{
	const uint8_t *p = g.out.data;
	size_t n = g.out.len;

	if (!all && n < FLUSH_BYTES)
		return;
	while (n) {
		ssize_t k = write(g.fd, p, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			die(1, "%s: %s", g.path, strerror(errno));
		p += k;
		n -= (size_t)k;
	}
	g.bytes += g.out.len;
	g.out.len = 0;
}

static void check(int err, const char *what)
{
	if (err)
		die(1, "%s: %s", what, strerror(-err));
}

static void encode_run(const struct evbuf *b)
{
	const weft_event_t *e = b->e;
	size_t n = b->n;

	while (n) {
		int k = weft_wire_batch_encode(&g.batch, e, n);

		if (k <= 0)
			die(1, "encoding a batch: %s", strerror(-k));
		check(weft_wire_batch_append(&g.out, &g.batch.msg),
		      "appending a batch");
		e += k;
		n -= (size_t)k;
		g.batches++;
	}
	g.events += b->n;
}

static int ev_cmp(const void *a, const void *b)
{
	const weft_event_t *x = a, *y = b;

	return x->ts < y->ts ? -1 : x->ts > y->ts;
}

static void pass_out(void)
{
	for (unsigned i = 0; i < g.nworkers; i++) {
		encode_run(&g.w[i].ev);
		g.w[i].ev.n = 0;
	}
	if (g.pool.n) {
		/* Jobs end in the order the workers were run: by time. */
		qsort(g.pool.e, g.pool.n, sizeof(*g.pool.e), ev_cmp);
		encode_run(&g.pool);
		g.pool.n = 0;
	}
}

static void task_model(weft_probe_task_t *c, const struct task *t)
{
	memset(c, 0, sizeof(*c));
	c->id = t->id;
	c->parent = t->parent;
	/* The name goes out once, as the delta stream sends it. */
	if (!t->named) {
		c->name = sites[t->site].name;
		c->file = sites[t->site].file;
		c->line = sites[t->site].line;
	}
	c->state_size = sites[t->site].state_size;
	c->state = t->state;
	c->last_worker = t->worker;
	c->spawned_ns = t->spawned_ns;
	c->finished_ns = t->finished_ns;
	c->polls = t->polls;
	c->busy_ns = t->busy_ns;
	c->scheduled_ns = t->scheduled_ns;
	c->idle_ns = t->idle_ns;
	c->wakes = t->wakes;
	c->waker_clones = t->clones;
	c->max_poll_ns = t->max_poll_ns;
	c->warnings = t->warnings;
	if (t->parked == NWAIT) {
		c->parked_file = sites[SITE_ACCEPTOR].file;
		c->parked_line = ACCEPT_LINE;
	} else if (t->parked < NWAIT) {
		c->parked_file = t->parked == W_TICK ? sites[SITE_TICKER].file :
						       handlers_c;
		c->parked_line = waits[t->parked].line;
	}
	if (t->state == WEFT_TASK_IDLE)
		c->idle_since_ns = t->since;
	if (t->waiting) {
		c->waiting_on = waits[t->wait].res;
		c->waiting_since_ns = t->waiting_since_ns;
		c->waiting_op = (uint8_t)waits[t->wait].op;
	}
}

static void update_out(void)
{
	weft_probe_stats_t st = { 0 };
	weft_probe_worker_t wk[MAX_WORKERS];
	const weft_probe_resource_t *rp[NRES];
	weft_probe_update_t u = { 0 };
	double win = (double)(g.now - g.prev_update_ns) / 1e9;

	if (g.ndirty > g.copies_cap) {
		g.copies_cap = g.ndirty;
		g.copies = xrealloc(g.copies, g.copies_cap * sizeof(*g.copies));
		g.tptrs = xrealloc(g.tptrs, g.copies_cap * sizeof(*g.tptrs));
	}
	for (size_t i = 0; i < g.ndirty; i++) {
		struct task *t = &g.tasks[g.dirty[i]];

		task_model(&g.copies[i], t);
		g.tptrs[i] = &g.copies[i];
		t->named = 1;
	}
	for (unsigned i = 0; i < g.nworkers; i++) {
		struct worker *w = &g.w[i];

		wk[i] = w->model;
		wk[i].state = w->parked ? 2 : 0;
		wk[i].counters.local_queue_depth = w->rq_len;
		wk[i].queue_depth = w->rq_len;
		wk[i].polls_per_s = win > 0 ? (double)w->window_polls / win : 0;
		wk[i].busy_ratio =
			win > 0 ? (double)w->window_poll_ns / 1e9 / win : 0;
		wk[i].mean_poll_ns =
			w->window_polls ? w->window_poll_ns / w->window_polls :
					  0;
		wk[i].max_poll_ns = w->window_max;
		/* One per cent of the time runnable with no CPU. */
		wk[i].off_cpu_ns = (g.now - g.start_ns) / 100;
		wk[i].off_cpu_ratio = 0.01;
		w->window_polls = w->window_poll_ns = w->window_max = 0;
	}
	for (unsigned r = 1; r <= NRES; r++) {
		g.res[r].wait_hist = &g.res_wait[r];
		g.res[r].hold_hist = r == R_CACHE ? &g.res_hold[r] : NULL;
		rp[r - 1] = &g.res[r];
	}
	st.now_ns = g.now;
	st.start_ns = g.start_ns;
	st.workers = g.nworkers;
	st.live_tasks = g.live;
	st.spawned_tasks = g.spawned;
	st.events = g.events;
	st.warnings = g.warnings;
	if (win > 0) {
		st.events_per_s = (double)(g.events - g.prev_events) / win;
		st.polls_per_s = (double)(g.polls - g.prev_polls) / win;
		st.steals_per_s = (double)(g.steals - g.prev_steals) / win;
	}
	g.prev_events = g.events;
	g.prev_polls = g.polls;
	g.prev_steals = g.steals;
	u.stats = &st;
	u.tasks = g.tptrs;
	u.ntasks = g.ndirty;
	u.workers = wk;
	u.nworkers = g.nworkers;
	u.warnings = g.warn;
	u.nwarnings = g.nwarn;
	u.resources = rp;
	u.nresources = NRES;
	check(weft_wire_update_append_split(&g.out, &u, g.prev_update_ns, 0),
	      "appending an update");
	g.updates++;
	g.prev_update_ns = g.now;
	g.nwarn = 0;
	/* Finished tasks had their last record: their slots are free. */
	for (size_t i = 0; i < g.ndirty; i++)
		if (g.tasks[g.dirty[i]].finished_ns)
			g.free_slots[g.nfree++] = g.dirty[i];
	g.ndirty = 0;
	g.epoch++;
}

static void progress(bool done)
{
	uint64_t now = weft_wire_now_ns(), have = g.bytes + g.out.len;
	double secs = (double)(now - g.t0) / 1e9, rate;

	if (!g.progress)
		return;
	if (done) {
		if (g.shown)
			fputs("\r\033[K", stderr);
		return;
	}
	if (now - g.shown_at < 200000000ull || secs < 0.5)
		return;
	g.shown_at = now;
	g.shown = true;
	rate = (double)have / secs;
	fprintf(stderr,
		"\rweft-bench-gentrace: %.0f of %.0f MB  %.0f MB/s  %.1f M "
		"events/s  %.0f s left\033[K",
		(double)have / 1e6, (double)g.want_bytes / 1e6, rate / 1e6,
		(double)g.events / secs / 1e6,
		rate > 0 && g.want_bytes > have ?
			(double)(g.want_bytes - have) / rate :
			0.0);
}

/* ------------------------------------------------------------ main */

static const char usage[] =
	"usage: weft-bench-gentrace OUT --bytes N [options]\n"
	"Writes a synthetic trace file of about N bytes to OUT (a recording\n"
	"of a task-per-request service: short tasks spawned per request,\n"
	"polled, parked on a mutex, a socket, a timer, a channel or a\n"
	"blocking job, woken, completed; long-lived tickers; parks, steals,\n"
	"warnings, resources), with libweft-wire's encoders.  It stops at\n"
	"the first collector pass past N bytes.\n"
	"N: bytes, or with a suffix k, M, G (10^3, 10^6, 10^9) or Ki, Mi, Gi.\n"
	"\n"
	"options:\n"
	"  --bytes N     the size to reach (required)\n"
	"  --workers N   workers (default 4, at most 256)\n"
	"  --rate R      requests per second of trace time (default 400000)\n"
	"  --seed S      the generator's seed (default 1)\n"
	"  --quiet       no progress on stderr (shown when it is a terminal)\n"
	"  -h, --help    this help\n"
	"\n"
	"The last line on stdout: bytes=, events=, tasks= (every task named in\n"
	"an update), spawned=, completed=, polls=, warnings=, updates=,\n"
	"batches=, steals=, live_max=, trace_s= (trace time), secs= (wall).\n";

static uint64_t parse_size(const char *s)
{
	char *end;
	double v;
	uint64_t mul = 1;

	errno = 0;
	v = strtod(s, &end);
	if (end == s || errno || v < 0)
		die(2, "--bytes: '%s' is not a size (1000000, 250M, 2G, 1Gi)",
		    s);
	if (!strcmp(end, "k") || !strcmp(end, "K") || !strcmp(end, "kB"))
		mul = 1000;
	else if (!strcmp(end, "M") || !strcmp(end, "MB"))
		mul = 1000000;
	else if (!strcmp(end, "G") || !strcmp(end, "GB"))
		mul = 1000000000;
	else if (!strcmp(end, "Ki") || !strcmp(end, "KiB"))
		mul = 1ull << 10;
	else if (!strcmp(end, "Mi") || !strcmp(end, "MiB"))
		mul = 1ull << 20;
	else if (!strcmp(end, "Gi") || !strcmp(end, "GiB"))
		mul = 1ull << 30;
	else if (*end)
		die(2, "--bytes: '%s' is not a size (1000000, 250M, 2G, 1Gi)",
		    s);
	if (v * (double)mul > 1e15)
		die(2, "--bytes: '%s' is more than a petabyte", s);
	return (uint64_t)(v * (double)mul);
}

static unsigned long parse_num(const char *opt, const char *s, unsigned long lo,
			       unsigned long hi)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (end == s || *end || errno || v < lo || v > hi || s[0] == '-')
		die(2, "%s: '%s' is not a number from %lu to %lu", opt, s, lo,
		    hi);
	return v;
}

static const char *need(int argc, char **argv, int *i)
{
	if (*i + 1 >= argc)
		die(2, "%s needs a value (--help)", argv[*i]);
	return argv[++*i];
}

static void setup(void)
{
	weft_wire_hello_t hello;
	uint64_t mean_gap;

	g.w = xrealloc(NULL, g.nworkers * sizeof(*g.w));
	memset(g.w, 0, g.nworkers * sizeof(*g.w));
	g.next_id = 1;
	g.now = g.start_ns;
	/* The first update lists every task as new. */
	g.prev_update_ns = g.start_ns - 1;
	check(weft_wire_hello_init(&hello, g.nworkers,
				   "synthetic (weft-bench-gentrace)",
				   g.start_ns),
	      "the hello");
	check(weft_wire_header_append(&g.out, &hello.msg, 0), "the header");
	weft_wire_hello_fini(&hello);
	weft_wire_batch_init(&g.batch);
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

int main(int argc, char **argv)
{
	unsigned long seed = 1;
	uint64_t pass = 0;

	g.nworkers = 4;
	g.rate = 400000;
	g.progress = isatty(STDERR_FILENO);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(usage, stdout);
			return 0;
		} else if (!strcmp(a, "--bytes")) {
			g.want_bytes = parse_size(need(argc, argv, &i));
		} else if (!strcmp(a, "--workers")) {
			g.nworkers = (unsigned)parse_num(
				a, need(argc, argv, &i), 1, MAX_WORKERS);
		} else if (!strcmp(a, "--rate")) {
			g.rate = (double)parse_num(a, need(argc, argv, &i), 1,
						   100000000);
		} else if (!strcmp(a, "--seed")) {
			seed = parse_num(a, need(argc, argv, &i), 0,
					 0xffffffffUL);
		} else if (!strcmp(a, "--quiet")) {
			g.progress = false;
		} else if (a[0] == '-' && a[1]) {
			die(2, "unknown option '%s' (--help)", a);
		} else if (g.path) {
			die(2, "unexpected argument '%s' (one OUT)", a);
		} else {
			g.path = a;
		}
	}
	if (!g.path)
		die(2, "no OUT file (--help)");
	if (!g.want_bytes)
		die(2, "no --bytes N, or N is 0 (--help)");
	rng_state ^= seed * 0xbf58476d1ce4e5b9ull;
	if (!rng_state)
		rng_state = 1;
	g.fd = open(g.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (g.fd < 0)
		die(1, "%s: %s", g.path, strerror(errno));
	g.t0 = weft_wire_now_ns();
	g.start_ns = 1000000000000ull; /* 1000 s after boot */
	setup();

	while (g.bytes + g.out.len < g.want_bytes) {
		for (unsigned s = 0; s < PASS_SLICES; s++) {
			uint64_t end = g.now + SLICE_NS;

			for (unsigned i = 0; i < g.nworkers; i++)
				run_slice(&g.w[i], end);
			steal_round();
			g.now = end;
		}
		pass_out();
		if (++pass % UPDATE_PASSES == 0)
			update_out();
		write_out(false);
		progress(false);
	}
	/* The last state, as the recorder's stop writes it. */
	update_out();
	write_out(true);
	if (close(g.fd))
		die(1, "%s: %s", g.path, strerror(errno));
	progress(true);
	printf("bytes=%llu events=%llu tasks=%llu spawned=%llu completed=%llu "
	       "polls=%llu warnings=%llu updates=%llu batches=%llu "
	       "steals=%llu live_max=%llu trace_s=%.3f secs=%.3f\n",
	       (unsigned long long)g.bytes, (unsigned long long)g.events,
	       (unsigned long long)(g.next_id - 1),
	       (unsigned long long)g.spawned, (unsigned long long)g.completed,
	       (unsigned long long)g.polls, (unsigned long long)g.warnings,
	       (unsigned long long)g.updates, (unsigned long long)g.batches,
	       (unsigned long long)g.steals, (unsigned long long)g.live_max,
	       (double)(g.now - g.start_ns) / 1e9,
	       (double)(weft_wire_now_ns() - g.t0) / 1e9);
	return 0;
}
