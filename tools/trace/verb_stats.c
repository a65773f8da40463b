/* SPDX-License-Identifier: MIT */
/*
 * weft-trace stats FILE: per worker figures computed from the events
 * (polls, steals in and out, steal rate, parks, busy %, poll %), each
 * worker's off-CPU time as the updates read it, poll-time percentiles,
 * the longest polls with their task's name and spawn location, the most
 * contended resources (total wait, wait percentiles, hold p99, holders
 * and waiters at the end), the blocking pool's queue waits and top
 * submitters and the timer wheel's timers per tick (stats_pool.c), and
 * the warnings the collector raised.
 *
 * busy % is the time a worker was not parked, as the runtime's busy_ns
 * counter and Tokio count it; poll % the time it spent inside polls.
 * The two differ by the worker's own overhead (queues, steals, the
 * driver between polls): a worker spinning on a task that wakes itself
 * is never parked and reads close to 100 % busy however short its
 * polls are, and printing only the poll time made it look idle.
 *
 * Off-CPU time is the time a worker's thread was runnable while the OS
 * ran other threads: it wanted a CPU and had none, which no event tells
 * (the probe reads the thread's schedstat run_delay into each update).
 */
#include <stdlib.h>
#include <string.h>

#include "trace_tool.h"

static const char usage[] =
	"usage: weft-trace stats [--top N] FILE\n"
	"Per worker: polls, tasks stolen in and out, steal rate (stolen /\n"
	"polls), parks, busy % (time not parked, from the park and unpark\n"
	"events; - when its events never say) and poll % (time in polls),\n"
	"both over the trace; then off-CPU time (runnable while the OS ran\n"
	"other threads) and its % of the time between the first and the\n"
	"last update that read it.  Then poll percentiles, the N longest\n"
	"polls (default 10), the N most contended resources (by total wait:\n"
	"holders and waiters at the end, acquires, wait p50/p99/max, hold\n"
	"p99; when the trace has resources), the blocking pool (jobs run,\n"
	"queue wait p50/p99/max, the N submitters whose jobs ran longest:\n"
	"task name and spawn location, the job's name (as a blocking-queue\n"
	"warning named it, else its address in the process), jobs, waits,\n"
	"total wait and run time; past 1024 rows the\n"
	"rest are others), the timer wheel (timers fired per tick: p50,\n"
	"p99, max) and the warnings (counts by kind, then the first N).\n"
	"A warning count is of warnings, folded ones included: where rows\n"
	"stand for more than one (\"15 more from tasks spawned at ...\"),\n"
	"the rows follow in brackets.\n";

/* A row per worker the runtime may have (4,096), the last: other threads. */
#define MAX_W (4096 + 1)

/* Whether a worker is parked, as far as its events have told. */
enum { W_UNKNOWN, W_BUSY, W_PARKED };

struct wstat {
	uint64_t polls, steals_in, steals_out, parks, poll_ns, busy_ns;
	uint64_t since; /* when the worker entered its state */
	uint8_t state;
	bool seen;
};

/*
 * Follows a worker's PARK and UNPARK events (and its polls, which it
 * only runs unparked) from the trace's start @t0.  Until its first such
 * event the state is unknown: a first PARK or POLL says it was busy
 * since @t0, a first UNPARK that it was parked since then (a trace
 * started while it slept).  Other events say nothing: a worker parked
 * in the driver turns it, and wakes tasks, without unparking.  A PARK
 * while parked or an UNPARK while busy means the ring dropped the one
 * between; the time between cannot be known and is left as it was.
 */
static void park_note(struct wstat *w, const weft_event_t *e, uint64_t t0)
{
	uint64_t at = e->ts;
	uint8_t to;

	switch (e->kind) {
	case WEFT_EV_PARK:
		to = W_PARKED;
		break;
	case WEFT_EV_UNPARK:
		to = W_BUSY;
		break;
	case WEFT_EV_POLL:
		/* Busy, at the latest, from the poll's start. */
		to = W_BUSY;
		at = e->a1 < e->ts - t0 ? e->ts - e->a1 : t0;
		break;
	default:
		return;
	}
	if (w->state == to)
		return;
	if (w->state == W_UNKNOWN && to == W_PARKED)
		w->busy_ns += at - t0;
	else if (w->state == W_UNKNOWN && e->kind == WEFT_EV_POLL)
		at = t0;
	else if (w->state == W_BUSY)
		w->busy_ns += at - w->since;
	else if (at < w->since)
		at = w->since; /* a poll after a PARK whose UNPARK was dropped */
	w->state = to;
	w->since = at;
}

/* The longest polls: a min-heap of the @cap longest so far. */
struct top_poll {
	uint64_t dur, ts, task;
	uint16_t worker;
	char name[64];
	char *file;
	uint32_t line;
};

static bool top_less(const struct top_poll *a, const struct top_poll *b)
{
	return a->dur != b->dur ? a->dur < b->dur : a->ts > b->ts;
}

static void top_down(struct top_poll *h, size_t n, size_t j)
{
	for (;;) {
		size_t l = 2 * j + 1, r = l + 1, m = j;

		if (l < n && top_less(&h[l], &h[m]))
			m = l;
		if (r < n && top_less(&h[r], &h[m]))
			m = r;
		if (m == j)
			return;
		struct top_poll x = h[j];
		h[j] = h[m];
		h[m] = x;
		j = m;
	}
}

static void top_up(struct top_poll *h, size_t j)
{
	while (j) {
		size_t p = (j - 1) / 2;

		if (!top_less(&h[j], &h[p]))
			return;
		struct top_poll x = h[j];
		h[j] = h[p];
		h[p] = x;
		j = p;
	}
}

/* Longest first; equal ones, earliest first. */
static int top_cmp(const void *a, const void *b)
{
	const struct top_poll *x = a, *y = b;

	return top_less(y, x) ? -1 : top_less(x, y);
}

/* The longest polls so far: at most @top, in an array grown as filled
 * (a --top larger than the trace's polls costs only what it prints). */
struct top_heap {
	struct top_poll *h;
	size_t n, alloc;
};

static void top_note(struct top_heap *th, size_t cap, const tt_trace_t *t,
		     const weft_event_t *e)
{
	struct top_poll p = { .dur = e->a1, .ts = e->ts, .task = e->task,
			      .worker = e->worker };
	struct top_poll *h = th->h;
	size_t *n = &th->n;
	const tt_task_t *k;

	if (!cap || (*n == cap && !top_less(&h[0], &p)))
		return;
	if (*n < cap && *n == th->alloc) {
		th->alloc = th->alloc ? 2 * th->alloc : 64;
		if (th->alloc > cap)
			th->alloc = cap;
		h = th->h = tt_xrealloc(th->h, th->alloc * sizeof(*h));
	}
	/* The task's name now: it is forgotten a while after its end. */
	tt_task_label(t, e->task, p.name, sizeof(p.name));
	k = tt_task(t, e->task);
	p.file = tt_xstrdup(k && k->file[0] ? k->file : "?");
	p.line = k ? k->line : 0;
	if (*n == cap) {
		free(h[0].file);
		h[0] = p;
		top_down(h, *n, 0);
	} else {
		h[*n] = p;
		top_up(h, (*n)++);
	}
}

/*
 * Each worker's off-CPU time from the updates' readings, beside the
 * table (its figures are the events', these the probe's): from the
 * worker's first reading to its last, and the share of the time between.
 * Nothing for a file from before the field, or where /proc was closed
 * to the probe.
 */
static void off_cpu_print(const tt_trace_t *t)
{
	if (!t->noff_cpu)
		return;
	printf("\n%-7s %13s %8s  (runnable, while the OS ran other threads)\n",
	       "worker", "off-cpu", "off-cpu%");
	for (unsigned i = 0; i < t->noff_cpu; i++) {
		const struct tt_off_cpu_s *o = &t->off_cpu[i];
		uint64_t ns = o->before + o->last - o->first,
			 span = o->last_at - o->first_at;
		char pct[16];

		if (!o->seen)
			continue;
		if (span)
			snprintf(pct, sizeof(pct), "%.2f%%",
				 100.0 * (double)ns / (double)span);
		else
			snprintf(pct, sizeof(pct), "-");
		printf("%-7u %10.3f ms %8s\n", i, (double)ns / 1e6, pct);
	}
}

/* "task 42 (worker-3), task 43 (...)" for @n of @ids, "+K more". */
static void res_tasks(const tt_trace_t *t, const char *what,
		      const uint64_t *ids, unsigned n, uint32_t whole)
{
	char name[64];

	printf("      %s %u:", what, whole);
	for (unsigned i = 0; i < n; i++)
		printf("%s %llu (%s)", i ? "," : "", (unsigned long long)ids[i],
		       tt_task_label_warned(t, ids[i], name, sizeof(name)));
	if (whole > n)
		printf(", +%u more", whole - n);
	putchar('\n');
}

/*
 * The most contended resources (trace_res.c: by total wait, then wait
 * p99): kind and name, holders and waiters at their last record,
 * acquires, waits, wait p50/p99/max, hold p99, the longest hold and its
 * holder.  Nothing when the trace has no resources.
 */
static void res_print(const tt_trace_t *t, unsigned long top)
{
	const tt_resource_t **res;
	size_t n, by_design = 0;

	if (!t->res.seen)
		return;
	res = tt_xmalloc((top ? top : 1) * sizeof(*res));
	n = tt_res_top(&t->res, res, top);
	for (size_t i = 0; i < t->res.nb; i++)
		for (const tt_resource_t *x = t->res.b[i]; x; x = x->next)
			by_design += !weft_resource_kind_contends(x->kind);
	for (size_t i = 0; i < t->res.ngone; i++)
		by_design += !weft_resource_kind_contends(t->res.gone[i]->kind);
	printf("\nresources: %llu seen, %llu dropped%s; the most contended "
	       "(by total wait):\n",
	       (unsigned long long)t->res.seen,
	       (unsigned long long)t->res.dropped,
	       t->res.discarded ? " (more not kept)" : "");
	if (by_design)
		printf("  (%zu not ranked: timers, fds, messages and "
		       "notifies are waited on by design, with no holder)\n",
		       by_design);
	if (!n) {
		printf("  (none: no lock, semaphore, pool or full channel "
		       "kept a task waiting)\n");
		free(res);
		return;
	}
	printf("  %-28s %5s %5s %9s %9s %9s %8s %8s %8s %8s\n", "RESOURCE",
	       "HOLD", "WAIT", "ACQUIRES", "WAITS", "WAITED", "P50", "P99",
	       "MAX", "HOLD P99");
	for (size_t i = 0; i < n; i++) {
		const tt_resource_t *x = res[i];
		char label[320], a[16], b[16], c[16], d[16], e[16], name[64];

		printf("  %-28s %5u %5u %9llu %9llu %9s %8s %8s %8s %8s%s\n",
		       tt_res_label(x, label, sizeof(label)), x->nholders,
		       x->nwaiters, (unsigned long long)x->acquires,
		       (unsigned long long)x->waits,
		       tt_dur(a, sizeof(a), x->wait.sum_ns),
		       tt_dur(b, sizeof(b), weft_hist_percentile(&x->wait, 50)),
		       tt_dur(c, sizeof(c), weft_hist_percentile(&x->wait, 99)),
		       tt_dur(d, sizeof(d), x->wait.max_ns),
		       tt_dur(e, sizeof(e), weft_hist_percentile(&x->hold, 99)),
		       x->dropped_ns ? "  (dropped)" : "");
		if (x->longest_holder)
			printf("      longest hold %s by task %llu (%s)\n",
			       tt_dur(a, sizeof(a), x->longest_hold_ns),
			       (unsigned long long)x->longest_holder,
			       tt_task_label_warned(t, x->longest_holder, name,
						    sizeof(name)));
		if (x->nholders)
			res_tasks(t, "holders", x->holders, x->nholders_kept,
				  x->nholders);
		if (x->nwaiters)
			res_tasks(t, "waiters", x->waiters, x->nwaiters_kept,
				  x->nwaiters);
	}
	free(res);
}

static size_t widx(uint16_t w)
{
	return w == WEFT_EVENT_NO_WORKER || w >= MAX_W - 1 ? MAX_W - 1 : w;
}

int tt_verb_stats(int argc, char **argv)
{
	static struct wstat ws[MAX_W];
	static tt_durs_t d;
	static tt_pool_t pool;
	const char *path = NULL;
	unsigned long top = 10;
	uint64_t span = 0, t0 = 0, t1 = 0;
	struct top_heap top_polls = { 0 };
	struct top_poll *longest;
	size_t nlongest;
	weft_event_t ev;
	tt_trace_t t;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage, stdout);
			return 0;
		}
		if (!strcmp(argv[i], "--top")) {
			char *end;

			if (++i >= argc)
				tt_die("stats: --top needs a number");
			top = strtoul(argv[i], &end, 10);
			if (*end || !argv[i][0])
				tt_die("stats: --top: not a number: '%s'",
				       argv[i]);
			continue;
		}
		if (argv[i][0] == '-' || path)
			tt_die("stats: unexpected argument '%s'", argv[i]);
		path = argv[i];
	}
	if (!path)
		tt_die("stats: no FILE (weft-trace stats --help)");
	tt_pool_init(&pool);
	tt_open(&t, path, false);
	while (tt_next(&t, &ev)) {
		const weft_event_t *e = &ev;
		struct wstat *w = &ws[widx(e->worker)];

		t0 = t.first_ts;
		w->seen = true;
		if (w != &ws[MAX_W - 1])
			park_note(w, e, t0);
		tt_pool_note(&pool, &t, e);
		switch (e->kind) {
		case WEFT_EV_POLL:
			w->polls++;
			w->poll_ns += e->a1;
			tt_durs_add(&d, e->a1);
			top_note(&top_polls, top, &t, e);
			break;
		case WEFT_EV_STEAL:
			w->steals_in += e->a2;
			if (e->a1 < MAX_W - 1)
				ws[e->a1].steals_out += e->a2;
			break;
		case WEFT_EV_PARK:
			w->parks++;
			break;
		default:
			break;
		}
	}
	longest = top_polls.h;
	nlongest = top_polls.n;
	if (t.nev) {
		t1 = t.last_ts;
		span = t1 - t0;
	}

	printf("%s: %llu events over %.6f s, %u workers\n", path,
	       (unsigned long long)t.nev, (double)span / 1e9, t.workers);
	tt_print_drops(stdout, &t);
	putchar('\n');
	printf("%-7s %10s %10s %10s %8s %8s %7s %7s\n", "worker", "polls",
	       "steals-in", "steals-out", "steal%", "parks", "busy%",
	       "poll%");
	for (size_t i = 0; i < MAX_W; i++) {
		struct wstat *w = &ws[i];
		char name[16], busy[16];

		if (!w->seen && !w->steals_out)
			continue;
		if (w->state == W_BUSY)
			w->busy_ns += t1 - w->since;
		if (i == MAX_W - 1)
			snprintf(name, sizeof(name), "other");
		else
			snprintf(name, sizeof(name), "%zu", i);
		/* Other threads never park as workers do: no busy % for them. */
		if (i == MAX_W - 1 || w->state == W_UNKNOWN)
			snprintf(busy, sizeof(busy), "-");
		else
			snprintf(busy, sizeof(busy), "%.1f%%",
				 span ? 100.0 * (double)w->busy_ns /
						(double)span :
					0.0);
		printf("%-7s %10llu %10llu %10llu %7.2f%% %8llu %7s %6.1f%%\n",
		       name, (unsigned long long)w->polls,
		       (unsigned long long)w->steals_in,
		       (unsigned long long)w->steals_out,
		       w->polls ?
			       100.0 * (double)w->steals_in / (double)w->polls :
			       0.0,
		       (unsigned long long)w->parks, busy,
		       span ? 100.0 * (double)w->poll_ns / (double)span : 0.0);
	}
	off_cpu_print(&t);

	if (d.n) {
		uint64_t p99 = tt_durs_pct(&d, 99), p90 = tt_durs_pct(&d, 90),
			 p50 = tt_durs_pct(&d, 50);

		printf("\npoll time: p50 %s%llu ns, p90 %llu ns, p99 %llu ns, "
		       "max %llu ns (%zu polls%s)\n",
		       d.inexact ? "~" : "", (unsigned long long)p50,
		       (unsigned long long)p90, (unsigned long long)p99,
		       (unsigned long long)d.max, d.n,
		       d.inexact ? "; percentiles within 1.6 %" : "");
		qsort(longest, nlongest, sizeof(*longest), top_cmp);
		printf("\nlongest polls:\n");
		for (size_t i = 0; i < nlongest; i++) {
			const struct top_poll *p = &longest[i];

			printf("  %10llu ns  worker %-3u at %.6f s  task %llu "
			       "%s  %s:%u\n",
			       (unsigned long long)p->dur, p->worker,
			       (double)(int64_t)(p->ts - p->dur - t0) / 1e9,
			       (unsigned long long)p->task, p->name, p->file,
			       p->line);
		}
	}
	res_print(&t, top);
	tt_pool_print(&pool, &t, top);
	/*
	 * Warnings, not rows: a fold's row stands for the N it says.  Where
	 * they differ the rows follow in brackets (a line with nothing
	 * after its count reads as before).
	 */
	if (t.said != t.nwarnings)
		printf("\nwarnings: %llu (%zu rows)\n",
		       (unsigned long long)t.said, t.nwarnings);
	else
		printf("\nwarnings: %zu\n", t.nwarnings);
	for (unsigned k = 1; k < WEFT_WARN_MAX; k++) {
		if (!t.warnings_by_kind[k])
			continue;
		if (t.said_by_kind[k] != t.warnings_by_kind[k])
			printf("  %-24s %llu (%zu rows)\n",
			       weft_warning_kind_name(k),
			       (unsigned long long)t.said_by_kind[k],
			       t.warnings_by_kind[k]);
		else
			printf("  %-24s %zu\n", weft_warning_kind_name(k),
			       t.warnings_by_kind[k]);
	}
	for (size_t i = 0; i < t.nkept && i < top; i++) {
		const tt_warning_t *w = &t.warnings[i];
		char name[64];

		printf("  %-24s task %llu %s  %s\n",
		       weft_warning_kind_name(w->kind),
		       (unsigned long long)w->task,
		       !w->task ? "-" :
		       w->label ?
				  w->label :
				  tt_task_label(&t, w->task, name, sizeof(name)),
		       w->detail);
	}
	if (t.nwarnings > top)
		printf("  ... %zu more\n", t.nwarnings - (size_t)top);
	for (size_t i = 0; i < nlongest; i++)
		free(longest[i].file);
	free(longest);
	tt_durs_free(&d);
	tt_pool_free(&pool);
	tt_free(&t);
	return fflush(stdout) ? 1 : 0;
}
