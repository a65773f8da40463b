/* SPDX-License-Identifier: MIT */
/*
 * weft-bench-gentrace's trace writer: the file as the recorder writes it
 * (probe/src/recorder.c), through libweft-wire's encoders.  The header
 * first (file_begin()); per collector pass, one EventBatch run per
 * emitting thread (pass_out()); every few passes an Update with the
 * tasks the world marked, the workers, the stats, the new warnings and
 * the resources (update_out()).  Output gathers in g.out and goes to the
 * file once 8 MiB have gathered, and at the end (write_out()).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gentrace.h"

#define FLUSH_BYTES (8u << 20)

static const char handlers_c[] = "src/http/handlers.c";

void write_out(bool all)
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

void pass_out(void)
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

static void task_model(weft_probe_task_t *c, const struct task *t, bool full)
{
	memset(c, 0, sizeof(*c));
	c->id = t->id;
	c->parent = t->parent;
	/* The name goes out once, as the delta stream sends it (and in
	 * every full update). */
	if (!t->named || full) {
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

/*
 * A checkpoint's tasks, as the recorder's full update lists them: every
 * task the world holds (the live ones, and those finished since the last
 * update: their slots are not free yet), into g.dirty, each once.
 */
static void full_tasks(void)
{
	uint32_t n = g.ntasks_cap;

	g.slot_free = xrealloc(g.slot_free, n ? n : 1);
	memset(g.slot_free, 0, n);
	for (uint32_t i = 0; i < g.nfree; i++)
		g.slot_free[g.free_slots[i]] = 1;
	g.ndirty = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (g.slot_free[i])
			continue;
		if (g.ndirty == g.dirty_cap) {
			g.dirty_cap = g.dirty_cap ? 2 * g.dirty_cap : 1024;
			g.dirty = xrealloc(g.dirty,
					   g.dirty_cap * sizeof(*g.dirty));
		}
		g.tasks[i].dirty_epoch = g.epoch + 1;
		g.dirty[g.ndirty++] = i;
	}
}

/*
 * The update due now into @u (its parts in @st, @wk and @rp; the tasks
 * g.dirty lists, in g.copies), changing nothing: it may be encoded only
 * to be measured (delta_bytes()).
 */
static void update_fill(weft_probe_update_t *u, weft_probe_stats_t *st,
			weft_probe_worker_t *wk,
			const weft_probe_resource_t **rp, bool full)
{
	double win = (double)(g.now - g.prev_update_ns) / 1e9;

	memset(u, 0, sizeof(*u));
	memset(st, 0, sizeof(*st));
	if (g.ndirty > g.copies_cap) {
		g.copies_cap = g.ndirty;
		g.copies = xrealloc(g.copies, g.copies_cap * sizeof(*g.copies));
		g.tptrs = xrealloc(g.tptrs, g.copies_cap * sizeof(*g.tptrs));
	}
	for (size_t i = 0; i < g.ndirty; i++) {
		task_model(&g.copies[i], &g.tasks[g.dirty[i]], full);
		g.tptrs[i] = &g.copies[i];
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
	}
	for (unsigned r = 1; r <= NRES; r++) {
		g.res[r].wait_hist = &g.res_wait[r];
		g.res[r].hold_hist = r == R_CACHE ? &g.res_hold[r] : NULL;
		rp[r - 1] = &g.res[r];
	}
	st->now_ns = g.now;
	st->start_ns = g.start_ns;
	st->workers = g.nworkers;
	st->live_tasks = g.live;
	st->spawned_tasks = g.spawned;
	st->events = g.events;
	st->warnings = g.warnings;
	if (win > 0) {
		st->events_per_s = (double)(g.events - g.prev_events) / win;
		st->polls_per_s = (double)(g.polls - g.prev_polls) / win;
		st->steals_per_s = (double)(g.steals - g.prev_steals) / win;
	}
	u->stats = st;
	u->tasks = g.tptrs;
	u->ntasks = g.ndirty;
	u->workers = wk;
	u->nworkers = g.nworkers;
	u->warnings = g.warn;
	u->nwarnings = g.nwarn;
	u->resources = rp;
	u->nresources = NRES;
	u->full = full;
}

/* The bytes of the update due now as a delta (encoded and dropped). */
static size_t delta_bytes(void)
{
	weft_probe_update_t u;
	weft_probe_stats_t st;
	weft_probe_worker_t wk[MAX_WORKERS];
	const weft_probe_resource_t *rp[NRES];
	weft_wire_buf_t b = { 0 };
	size_t n;

	update_fill(&u, &st, wk, rp, false);
	check(weft_wire_update_append_split(&b, &u, g.prev_update_ns, 0),
	      "appending an update");
	n = b.len;
	weft_wire_buf_fini(&b);
	return n;
}

void update_out(void)
{
	/* A checkpoint due: this update full, after a mark (patched once
	 * the update's size is known), as recorder_ckpt.c writes them. */
	bool full = g.ckpt_every && g.bytes + g.out.len >= g.ckpt_due;
	weft_wire_ckpt_t mark = { 0 };
	size_t mark_at = g.out.len, delta = 0;
	weft_probe_stats_t st;
	weft_probe_worker_t wk[MAX_WORKERS];
	const weft_probe_resource_t *rp[NRES];
	weft_probe_update_t u;

	if (full) {
		/* What the delta would have taken: the checkpoint's cost,
		 * left out of the size the run stops at, so that the same
		 * options write the same events with or without them. */
		delta = delta_bytes();
		full_tasks();
		mark.offset = g.bytes + g.out.len;
		mark.prev = g.ckpt_last;
		mark.time_ns = g.now;
		check(weft_wire_ckpt_append(&g.out, &mark), "a mark");
	}
	update_fill(&u, &st, wk, rp, full);
	check(weft_wire_update_append_split(&g.out, &u, g.prev_update_ns, 0),
	      "appending an update");
	if (full) {
		size_t bytes = g.out.len - mark_at - WEFT_WIRE_CKPT_LEN;
		/* What the mark added, as recorder_ckpt.c counts it: the
		 * tasks a delta would not have named. */
		uint64_t extra = bytes > delta ? bytes - delta : 0;

		mark.full_bytes = bytes;
		weft_wire_ckpt_put(g.out.data + mark_at, &mark);
		g.ckpt_last = mark.offset;
		g.ckpt_due =
			mark.offset +
			(32 * extra > g.ckpt_every ? 32 * extra : g.ckpt_every);
		g.ckpts++;
		g.ckpt_bytes += WEFT_WIRE_CKPT_LEN + extra;
	}
	for (size_t i = 0; i < g.ndirty; i++)
		g.tasks[g.dirty[i]].named = 1;
	for (unsigned i = 0; i < g.nworkers; i++)
		g.w[i].window_polls = g.w[i].window_poll_ns =
			g.w[i].window_max = 0;
	g.prev_events = g.events;
	g.prev_polls = g.polls;
	g.prev_steals = g.steals;
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

void progress(bool done)
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

/* The file's header; g.start_ns and g.nworkers are set. */
void file_begin(void)
{
	weft_wire_hello_t hello;

	/* The first update lists every task as new. */
	g.prev_update_ns = g.start_ns - 1;
	check(weft_wire_hello_init(&hello, g.nworkers,
				   "synthetic (weft-bench-gentrace)",
				   g.start_ns),
	      "the hello");
	check(weft_wire_header_append(&g.out, &hello.msg, 0), "the header");
	weft_wire_hello_fini(&hello);
	weft_wire_batch_init(&g.batch);
}
