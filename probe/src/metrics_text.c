/* SPDX-License-Identifier: MIT */
/*
 * The metrics endpoint's exposition: one scrape's text, in the Prometheus
 * text format 0.0.4 or in OpenMetrics 1.0 (`# UNIT`, counters' families
 * named without `_total`, `# EOF`), and the process-wide histograms.
 *
 * Names by Prometheus's conventions: base units (seconds), `_total` on
 * counters, labels of bounded cardinality only (worker index, runtime
 * index, warning kind, blocking thread state): never a task's id, name or
 * spawn site.  The `runtime` label appears when a process runs several
 * runtimes.  Every warning kind is exported from the start, at 0, so that
 * increase() sees a kind's first warning.
 *
 * The histograms are filled from the probe's events (POLL: its duration;
 * a wake, then the POLL of the same task: the scheduling delay) by a
 * subscriber that turns events on: only an endpoint that asks for them
 * (WEFT_METRICS_HISTOGRAMS=1) pays for that.  Buckets are powers of two
 * from 1 us to 2^24 us (~16.8 s), cumulative, plus +Inf.  The scheduling
 * delay's wake times are kept in a direct-mapped table by task id (ids
 * come in runs, as the collector's table says): a wake pushed out by
 * another task's before its poll is not measured, and counted nowhere
 * else: the histogram is a sample of the delays, as a dropped event
 * makes the collector's.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "weft/metrics.h"
#include "weft/metrics_endpoint.h"
#include "weft/probe.h"
#include "weft/trace.h"

#include "metrics_internal.h"
#include "probe_internal.h"
#include "runtime_probe.h"

/* ------------------------------------------------------------ the buffer */

static void mb_printf(weft__mbuf_t *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void mb_printf(weft__mbuf_t *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->oom)
		return;
	for (;;) {
		size_t room = b->cap - b->len;

		va_start(ap, fmt);
		n = vsnprintf(b->p ? b->p + b->len : NULL, room, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->oom = true;
			return;
		}
		if ((size_t)n < room) {
			b->len += (size_t)n;
			return;
		}
		size_t ncap = b->cap ? b->cap * 2 : 16384;
		while (ncap - b->len <= (size_t)n)
			ncap *= 2;
		char *np = realloc(b->p, ncap);
		if (!np) {
			b->oom = true;
			return;
		}
		b->p = np;
		b->cap = ncap;
	}
}

/* ------------------------------------------------------- the histograms */

#define HBUCKETS 25 /* le = 2^k us, k = 0..24; then +Inf */
#define WOKEN_SLOTS 4096

struct mhist {
	uint64_t b[HBUCKETS + 1]; /* not cumulative; [HBUCKETS]: over */
	uint64_t count, sum_ns;
};

static pthread_mutex_t hist_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned hist_refs;
static weft_probe_sub_t *hist_sub;
static struct mhist poll_hist, sched_hist;
/* A task's wake not yet followed by its poll (woken: 0 for none). */
static struct woken {
	uint64_t task, woken;
} woken[WOKEN_SLOTS];

static void mhist_add(struct mhist *h, uint64_t ns)
{
	uint64_t us = (ns + 999) / 1000;
	unsigned k = us <= 1 ? 0 : 64 - (unsigned)__builtin_clzll(us - 1);

	h->b[k < HBUCKETS ? k : HBUCKETS]++;
	h->count++;
	h->sum_ns += ns;
}

/*
 * The scheduling delay as the collector measures it: from a task's wake
 * (or spawn, or the end of a poll that yielded) to the start of its next
 * poll.  A wake made during the task's own poll carries that poll's
 * start stamp (probe_internal.h) and comes before the poll's record: it
 * is kept for the next poll, not measured against this one.
 */
static void hist_event(const weft_event_t *e)
{
	struct woken *w = &woken[e->task & (WOKEN_SLOTS - 1)];

	if (!e->task)
		return;
	switch (e->kind) {
	case WEFT_EV_SPAWN:
	case WEFT_EV_WAKE:
		if (w->task != e->task)
			*w = (struct woken){ e->task, e->ts };
		else if (!w->woken)
			w->woken = e->ts;
		break;
	case WEFT_EV_POLL: {
		uint64_t dur = e->a1,
			 start = e->ts - (dur < e->ts ? dur : e->ts);

		mhist_add(&poll_hist, dur);
		if (w->task != e->task)
			*w = (struct woken){ e->task, 0 };
		if (w->woken && w->woken < start) {
			mhist_add(&sched_hist, start - w->woken);
			w->woken = 0;
		}
		/* Back in a queue from the poll's end. */
		if (!w->woken && (e->a2 & WEFT_POLL_YIELDED))
			w->woken = e->ts;
		if (e->a2 & WEFT_POLL_READY)
			w->task = 0;
		break;
	}
	default:
		break;
	}
}

/* The collector's thread, probe.lock held; then hist_lock (a leaf). */
static void hist_on_events(void *ctx, const weft_event_t *ev, size_t n)
{
	(void)ctx;
	pthread_mutex_lock(&hist_lock);
	for (size_t i = 0; i < n; i++)
		hist_event(&ev[i]);
	pthread_mutex_unlock(&hist_lock);
}

/*
 * Lock order: sub_lock, then probe.lock (subscribing), then hist_lock;
 * hist_refs is written under sub_lock and hist_lock both, read under
 * either.
 */
static pthread_mutex_t sub_lock = PTHREAD_MUTEX_INITIALIZER;

int weft__metrics_hist_get(void)
{
	weft_probe_sub_opts_t o = { .events = true,
				    .on_events = hist_on_events };
	int err = 0;

	/* A probe callback: sub_lock comes before probe.lock, which the
	 * collector holds for it (another thread may hold sub_lock and
	 * wait for probe.lock). */
	if (weft__in_collector)
		return -EDEADLK;
	pthread_mutex_lock(&sub_lock);
	if (hist_refs == 0)
		err = weft_probe_subscribe(&o, &hist_sub);
	if (!err) {
		pthread_mutex_lock(&hist_lock);
		hist_refs++;
		pthread_mutex_unlock(&hist_lock);
	}
	pthread_mutex_unlock(&sub_lock);
	return err;
}

void weft__metrics_hist_put(void)
{
	pthread_mutex_lock(&sub_lock);
	if (hist_refs) {
		pthread_mutex_lock(&hist_lock);
		hist_refs--;
		pthread_mutex_unlock(&hist_lock);
		if (hist_refs == 0) {
			/* No callback runs after this returns. */
			weft_probe_unsubscribe(hist_sub);
			hist_sub = NULL;
		}
	}
	pthread_mutex_unlock(&sub_lock);
}

/* ------------------------------------------------------------ a snapshot */

struct rt_snap {
	weft_runtime_metrics_t m;
	unsigned nw;
	weft_worker_metrics_t *w;
	int32_t *tid;
	uint64_t *off_ns;
};

struct snap {
	struct rt_snap *rt;
	unsigned nrt;
	bool oom;
};

/* Under probe.lock: counters only, no system call. */
static void snap_each(struct weft_runtime_s *rt, unsigned i, unsigned n,
		      void *arg)
{
	struct snap *s = arg;
	struct rt_snap *r;

	if (!s->rt) {
		s->rt = calloc(n, sizeof(*s->rt));
		if (!s->rt) {
			s->oom = true;
			return;
		}
		s->nrt = n;
	}
	if (s->oom || i >= s->nrt)
		return;
	r = &s->rt[i];
	weft_runtime_metrics(rt, &r->m);
	r->nw = r->m.workers;
	r->w = calloc(r->nw ? r->nw : 1, sizeof(*r->w));
	r->tid = calloc(r->nw ? r->nw : 1, sizeof(*r->tid));
	r->off_ns = calloc(r->nw ? r->nw : 1, sizeof(*r->off_ns));
	if (!r->w || !r->tid || !r->off_ns) {
		s->oom = true;
		return;
	}
	for (unsigned w = 0; w < r->nw; w++) {
		weft_worker_metrics(rt, w, &r->w[w]);
		r->tid[w] = weft__runtime_worker_tid(rt, w);
	}
}

static void snap_fini(struct snap *s)
{
	for (unsigned i = 0; s->rt && i < s->nrt; i++) {
		free(s->rt[i].w);
		free(s->rt[i].tid);
		free(s->rt[i].off_ns);
	}
	free(s->rt);
}

/*
 * A worker thread's run_delay (ns runnable but not running), the second
 * field of /proc/self/task/TID/schedstat; 0 where it cannot be read.
 * Read here, at scrape time, holding no lock: three system calls a
 * worker.
 */
static uint64_t off_cpu_ns(int32_t tid)
{
	char path[64], buf[128], *p, *end;
	unsigned long long v;
	ssize_t n;
	int fd;

	if (tid <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/self/task/%d/schedstat", (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	strtoull(buf, &p, 10);
	v = strtoull(p, &end, 10);
	return end == p ? 0 : (uint64_t)v;
}

/* ------------------------------------------------------------ the text */

enum mtype { COUNTER, GAUGE, INFO, HISTOGRAM };

static const char *const type_names[] = { "counter", "gauge", "info",
					  "histogram" };

struct out {
	weft__mbuf_t *b;
	bool om;
	bool multi; /* several runtimes: a runtime label */
};

/* A family's head: @base is the family's name in OpenMetrics; in 0.0.4
 * a counter's family is named as its sample, with _total, and an info
 * is a gauge named _info. */
static void family(struct out *o, const char *base, enum mtype t,
		   const char *unit, const char *help)
{
	const char *suffix = "";

	if (!o->om && t == COUNTER)
		suffix = "_total";
	if (!o->om && t == INFO)
		suffix = "_info";
	mb_printf(o->b, "# HELP %s%s %s\n", base, suffix, help);
	mb_printf(o->b, "# TYPE %s%s %s\n", base, suffix,
		  !o->om && t == INFO ? "gauge" : type_names[t]);
	if (o->om && unit)
		mb_printf(o->b, "# UNIT %s %s\n", base, unit);
}

/* A label set: {runtime="r",worker="w"} and @extra ("kind=\"x\""). */
static void labels(struct out *o, char *buf, size_t n, unsigned r, int worker,
		   const char *extra)
{
	size_t at = 0;
	const char *sep = "";

	buf[0] = '\0';
	if (!o->multi && worker < 0 && !extra)
		return;
	at += (size_t)snprintf(buf + at, n - at, "{");
	if (o->multi) {
		at += (size_t)snprintf(buf + at, n - at, "runtime=\"%u\"", r);
		sep = ",";
	}
	if (worker >= 0 && at < n) {
		at += (size_t)snprintf(buf + at, n - at, "%sworker=\"%d\"", sep,
				       worker);
		sep = ",";
	}
	if (extra && at < n)
		at += (size_t)snprintf(buf + at, n - at, "%s%s", sep, extra);
	if (at < n)
		snprintf(buf + at, n - at, "}");
}

static void sample_u(struct out *o, const char *name, const char *suffix,
		     const char *lbl, uint64_t v)
{
	mb_printf(o->b, "%s%s%s %" PRIu64 "\n", name, suffix, lbl, v);
}

/* Seconds from ns, exactly: 12.000000345. */
static void sample_s(struct out *o, const char *name, const char *suffix,
		     const char *lbl, uint64_t ns)
{
	mb_printf(o->b, "%s%s%s %" PRIu64 ".%09" PRIu64 "\n", name, suffix,
		  lbl, ns / 1000000000u, ns % 1000000000u);
}

enum wfield {
	W_POLLS,
	W_STEALS,
	W_BUSY,
	W_PARKS,
	W_DEPTH,
	W_OVERFLOW,
	W_YIELDS,
	W_OFF,
};

static const struct wfam {
	enum wfield f;
	const char *base;
	enum mtype t;
	const char *unit, *help;
} wfams[] = {
	{ W_POLLS, "weft_worker_polls", COUNTER, NULL,
	  "Task polls the worker ran." },
	{ W_STEALS, "weft_worker_steals", COUNTER, NULL,
	  "Tasks the worker stole from other workers." },
	{ W_BUSY, "weft_worker_busy_seconds", COUNTER, "seconds",
	  "Time the worker was not parked." },
	{ W_PARKS, "weft_worker_parks", COUNTER, NULL,
	  "Times the worker went to sleep." },
	{ W_DEPTH, "weft_worker_local_queue_depth", GAUGE, NULL,
	  "Tasks in the worker's local run queue." },
	{ W_OVERFLOW, "weft_worker_overflow", COUNTER, NULL,
	  "Times the worker's run queue spilled to the global queue." },
	{ W_YIELDS, "weft_worker_forced_yields", COUNTER, NULL,
	  "Polls cut short by the coop budget." },
	{ W_OFF, "weft_worker_off_cpu_seconds", COUNTER, "seconds",
	  "Time the worker's thread was runnable while the OS ran others "
	  "(schedstat run_delay)." },
};

static void worker_value(struct out *o, const struct wfam *f,
			 const struct rt_snap *r, unsigned w, const char *lbl)
{
	const weft_worker_metrics_t *m = &r->w[w];
	const char *sfx = f->t == COUNTER ? "_total" : "";

	switch (f->f) {
	case W_POLLS:
		sample_u(o, f->base, sfx, lbl, m->polls);
		break;
	case W_STEALS:
		sample_u(o, f->base, sfx, lbl, m->steals);
		break;
	case W_BUSY:
		sample_s(o, f->base, sfx, lbl, m->busy_ns);
		break;
	case W_PARKS:
		sample_u(o, f->base, sfx, lbl, m->parks);
		break;
	case W_DEPTH:
		sample_u(o, f->base, sfx, lbl, m->local_queue_depth);
		break;
	case W_OVERFLOW:
		sample_u(o, f->base, sfx, lbl, m->overflows);
		break;
	case W_YIELDS:
		sample_u(o, f->base, sfx, lbl, m->forced_yields);
		break;
	case W_OFF:
		sample_s(o, f->base, sfx, lbl, r->off_ns[w]);
		break;
	}
}

static const char *const warn_names[WEFT_WARN_MAX] = {
#define WEFT_X_NAME(name, value, label) [value] = label,
	WEFT_WARNING_KINDS(WEFT_X_NAME)
#undef WEFT_X_NAME
};

static void histogram(struct out *o, const char *base, const char *help,
		      const struct mhist *h)
{
	uint64_t cum = 0;

	family(o, base, HISTOGRAM, "seconds", help);
	for (unsigned k = 0; k < HBUCKETS; k++) {
		cum += h->b[k];
		mb_printf(o->b, "%s_bucket{le=\"%.10g\"} %" PRIu64 "\n", base,
			  1e-6 * (double)(1ull << k), cum);
	}
	cum += h->b[HBUCKETS];
	mb_printf(o->b, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n", base, cum);
	sample_s(o, base, "_sum", "", h->sum_ns);
	sample_u(o, base, "_count", "", h->count);
}

void weft__metrics_render(weft__mbuf_t *b, bool om)
{
	weft__probe_metrics_t pm;
	weft_trace_stats_t ts;
	struct snap s = { 0 };
	struct out o = { .b = b, .om = om };
	char lbl[160], extra[64];
	bool hists;

	weft__probe_metrics_read(&pm, snap_each, &s);
	if (s.oom) {
		b->oom = true;
		goto out_fini;
	}
	o.multi = s.nrt > 1;
	for (unsigned r = 0; r < s.nrt; r++)
		for (unsigned w = 0; w < s.rt[r].nw; w++)
			s.rt[r].off_ns[w] = off_cpu_ns(s.rt[r].tid[w]);

	family(&o, "weft_build", INFO, NULL, "weft's version.");
	mb_printf(b, "weft_build_info{version=\"%d.%d.%d\"} 1\n",
		  WEFT_VERSION_MAJOR, WEFT_VERSION_MINOR, WEFT_VERSION_PATCH);

	/* Per worker: a family's samples together, every runtime's. */
	for (size_t f = 0; f < sizeof(wfams) / sizeof(wfams[0]); f++) {
		family(&o, wfams[f].base, wfams[f].t, wfams[f].unit,
		       wfams[f].help);
		for (unsigned r = 0; r < s.nrt; r++)
			for (unsigned w = 0; w < s.rt[r].nw; w++) {
				labels(&o, lbl, sizeof(lbl), r, (int)w, NULL);
				worker_value(&o, &wfams[f], &s.rt[r], w, lbl);
			}
	}

	/* Per runtime. */
	family(&o, "weft_tasks_alive", GAUGE, NULL,
	       "Tasks spawned and not yet completed.");
	for (unsigned r = 0; r < s.nrt; r++) {
		labels(&o, lbl, sizeof(lbl), r, -1, NULL);
		sample_u(&o, "weft_tasks_alive", "", lbl, s.rt[r].m.live_tasks);
	}
	family(&o, "weft_tasks_spawned", COUNTER, NULL, "Tasks spawned.");
	for (unsigned r = 0; r < s.nrt; r++) {
		labels(&o, lbl, sizeof(lbl), r, -1, NULL);
		sample_u(&o, "weft_tasks_spawned", "_total", lbl,
			 s.rt[r].m.spawned_tasks);
	}
	family(&o, "weft_global_queue_depth", GAUGE, NULL,
	       "Tasks in the global inject queue.");
	for (unsigned r = 0; r < s.nrt; r++) {
		labels(&o, lbl, sizeof(lbl), r, -1, NULL);
		sample_u(&o, "weft_global_queue_depth", "", lbl,
			 s.rt[r].m.global_queue_depth);
	}
	family(&o, "weft_blocking_threads", GAUGE, NULL,
	       "Threads of the blocking pool, by state.");
	for (unsigned r = 0; r < s.nrt; r++) {
		labels(&o, lbl, sizeof(lbl), r, -1, "state=\"busy\"");
		sample_u(&o, "weft_blocking_threads", "", lbl,
			 s.rt[r].m.blocking_threads_busy);
		labels(&o, lbl, sizeof(lbl), r, -1, "state=\"idle\"");
		sample_u(&o, "weft_blocking_threads", "", lbl,
			 s.rt[r].m.blocking_threads_idle);
	}
	family(&o, "weft_blocking_queue_depth", GAUGE, NULL,
	       "Jobs waiting for a blocking pool thread.");
	for (unsigned r = 0; r < s.nrt; r++) {
		labels(&o, lbl, sizeof(lbl), r, -1, NULL);
		sample_u(&o, "weft_blocking_queue_depth", "", lbl,
			 s.rt[r].m.blocking_queue_depth);
	}
	family(&o, "weft_timers_active", GAUGE, NULL,
	       "Timers waiting in the timer wheel.");
	for (unsigned r = 0; r < s.nrt; r++) {
		labels(&o, lbl, sizeof(lbl), r, -1, NULL);
		sample_u(&o, "weft_timers_active", "", lbl, s.rt[r].m.timers);
	}

	/* The process's: the probe's counts. */
	family(&o, "weft_warnings", COUNTER, NULL,
	       "Warnings raised, by kind, whether or not anyone listened.");
	for (unsigned k = 1; k < WEFT_WARN_MAX; k++) {
		if (!warn_names[k])
			continue;
		snprintf(extra, sizeof(extra), "{kind=\"%s\"}", warn_names[k]);
		sample_u(&o, "weft_warnings", "_total", extra, pm.warnings[k]);
	}
	family(&o, "weft_probe_events_dropped", COUNTER, NULL,
	       "Probe events dropped because a ring was full.");
	sample_u(&o, "weft_probe_events_dropped", "_total", "",
		 pm.events_dropped);
	family(&o, "weft_probe_subscribers", GAUGE, NULL,
	       "Probe subscribers (consoles, recorders, this endpoint's "
	       "histograms).");
	sample_u(&o, "weft_probe_subscribers", "", "", pm.subscribers);
	family(&o, "weft_probe_collector_cpu_seconds", COUNTER, "seconds",
	       "CPU time of the probe's collector thread.");
	sample_s(&o, "weft_probe_collector_cpu_seconds", "_total", "",
		 pm.collector_cpu_ns);
	/* The recorder's (weft/trace.h), read without its lock. */
	weft_trace_stats(&ts);
	family(&o, "weft_trace_write_errors", COUNTER, NULL,
	       "Trace recordings stopped by a failed write (a full disk).");
	sample_u(&o, "weft_trace_write_errors", "_total", "", ts.write_errors);
	family(&o, "weft_trace_written_bytes", COUNTER, "bytes",
	       "Bytes written to trace files.");
	sample_u(&o, "weft_trace_written_bytes", "_total", "",
		 ts.bytes_written);

	pthread_mutex_lock(&hist_lock);
	hists = hist_refs > 0;
	if (hists) {
		struct mhist ph = poll_hist, sh = sched_hist;

		pthread_mutex_unlock(&hist_lock);
		histogram(&o, "weft_poll_duration_seconds",
			  "Duration of task polls.", &ph);
		histogram(&o, "weft_schedule_delay_seconds",
			  "Time from a task's wake to its poll.", &sh);
	} else {
		pthread_mutex_unlock(&hist_lock);
	}
	if (om)
		mb_printf(b, "# EOF\n");
out_fini:
	snap_fini(&s);
}

int weft_metrics_text(int format, char **text, size_t *len)
{
	weft__mbuf_t b = { 0 };

	if (!text ||
	    (format != WEFT_METRICS_PROMETHEUS &&
	     format != WEFT_METRICS_OPENMETRICS))
		return -EINVAL;
	if (weft__in_collector)
		return -EDEADLK; /* a callback: it reads under probe.lock */
	weft__metrics_render(&b, format == WEFT_METRICS_OPENMETRICS);
	if (b.oom) {
		free(b.p);
		return -ENOMEM;
	}
	*text = b.p;
	if (len)
		*len = b.len;
	return 0;
}
