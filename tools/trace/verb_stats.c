/* SPDX-License-Identifier: MIT */
/*
 * weft-trace stats FILE: per worker figures computed from the events
 * (polls, steals in and out, steal rate, parks, busy %, poll %),
 * poll-time percentiles, the longest polls with their task's name and
 * spawn location, and the warnings the collector raised.
 *
 * busy % is the time a worker was not parked, as the runtime's busy_ns
 * counter and Tokio count it; poll % the time it spent inside polls.
 * The two differ by the worker's own overhead (queues, steals, the
 * driver between polls): a worker spinning on a task that wakes itself
 * is never parked and reads close to 100 % busy however short its
 * polls are, and printing only the poll time made it look idle.
 */
#include <stdlib.h>
#include <string.h>

#include "trace_tool.h"

static const char usage[] =
	"usage: weft-trace stats [--top N] FILE\n"
	"Per worker: polls, tasks stolen in and out, steal rate (stolen /\n"
	"polls), parks, busy % (time not parked, from the park and unpark\n"
	"events; - when its events never say) and poll % (time in polls),\n"
	"both over the trace.  Then poll percentiles, the N longest polls\n"
	"(default 10) and the warnings (counts by kind, then the first N).\n";

#define MAX_W 256

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

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Indexes of POLL events, longest first. */
static const tt_trace_t *sort_trace;

static int poll_cmp(const void *a, const void *b)
{
	uint64_t x = sort_trace->ev[*(const size_t *)a].a1;
	uint64_t y = sort_trace->ev[*(const size_t *)b].a1;

	return x > y ? -1 : x < y;
}

static size_t widx(uint16_t w)
{
	return w == WEFT_EVENT_NO_WORKER || w >= MAX_W - 1 ? MAX_W - 1 : w;
}

int tt_verb_stats(int argc, char **argv)
{
	static struct wstat ws[MAX_W];
	const char *path = NULL;
	unsigned long top = 10;
	uint64_t *durs = NULL, span = 0, t0 = 0, t1 = 0;
	size_t *polls = NULL, npolls = 0;
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
	tt_load(&t, path);
	if (t.nev) {
		t0 = t.ev[0].ts;
		t1 = t.ev[t.nev - 1].ts;
		span = t1 - t0;
		durs = tt_xmalloc(t.nev * sizeof(*durs));
		polls = tt_xmalloc(t.nev * sizeof(*polls));
	}
	for (size_t i = 0; i < t.nev; i++) {
		const weft_event_t *e = &t.ev[i];
		struct wstat *w = &ws[widx(e->worker)];

		w->seen = true;
		if (w != &ws[MAX_W - 1])
			park_note(w, e, t0);
		switch (e->kind) {
		case WEFT_EV_POLL:
			w->polls++;
			w->poll_ns += e->a1;
			durs[npolls] = e->a1;
			polls[npolls++] = i;
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

	printf("%s: %zu events over %.6f s, %u workers\n", path, t.nev,
	       (double)span / 1e9, t.workers);
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

	if (npolls) {
		qsort(durs, npolls, sizeof(*durs), u64_cmp);
		printf("\npoll time: p50 %llu ns, p90 %llu ns, p99 %llu ns, "
		       "max %llu ns (%zu polls)\n",
		       (unsigned long long)durs[npolls / 2],
		       (unsigned long long)durs[npolls * 9 / 10],
		       (unsigned long long)durs[npolls * 99 / 100],
		       (unsigned long long)durs[npolls - 1], npolls);
		sort_trace = &t;
		qsort(polls, npolls, sizeof(*polls), poll_cmp);
		printf("\nlongest polls:\n");
		for (size_t i = 0; i < npolls && i < top; i++) {
			const weft_event_t *e = &t.ev[polls[i]];
			const tt_task_t *k = tt_task(&t, e->task);
			char name[64];

			printf("  %10llu ns  worker %-3u at %.6f s  task %llu "
			       "%s  %s:%u\n",
			       (unsigned long long)e->a1, e->worker,
			       (double)(e->ts - e->a1 - t.ev[0].ts) / 1e9,
			       (unsigned long long)e->task,
			       tt_task_label(&t, e->task, name, sizeof(name)),
			       k && k->file[0] ? k->file : "?",
			       k ? k->line : 0);
		}
	}
	printf("\nwarnings: %zu\n", t.nwarnings);
	for (unsigned k = 1; k < WEFT_WARN_MAX; k++) {
		size_t n = 0;

		for (size_t i = 0; i < t.nwarnings; i++)
			n += t.warnings[i].kind == k;
		if (n)
			printf("  %-24s %zu\n", weft_warning_kind_name(k), n);
	}
	for (size_t i = 0; i < t.nwarnings && i < top; i++) {
		const tt_warning_t *w = &t.warnings[i];
		char name[64];

		printf("  %-24s task %llu %s  %s\n",
		       weft_warning_kind_name(w->kind),
		       (unsigned long long)w->task,
		       w->task ?
			       tt_task_label(&t, w->task, name, sizeof(name)) :
			       "-",
		       w->detail);
	}
	if (t.nwarnings > top)
		printf("  ... %zu more\n", t.nwarnings - (size_t)top);
	free(durs);
	free(polls);
	tt_free(&t);
	return fflush(stdout) ? 1 : 0;
}
