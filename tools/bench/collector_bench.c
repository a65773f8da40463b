/* SPDX-License-Identifier: MIT */
/*
 * weft-bench-collector: what the collector costs an event, alone.
 *
 * In weft-bench --probe=events the collector shares the cores with the
 * workers, and its cost shows only as theirs, through the scheduler's
 * noise.  Here two producer threads fill two rings with the event stream
 * of yield_many (200 tasks a round, each spawned, polled 1,000 times with
 * a yield, completed; the tasks split over the two rings), then the
 * collector folds each fill in with weft__collector_pass() on this thread,
 * timed alone.  The rings' slots come from the producers' cores, as they
 * do in a service.
 *
 *   weft-bench-collector [--rounds N] [--fill N] [--stream S]
 *
 * Prints one line: collector_ns_per_event=<median over passes> and the
 * p10 and p90.  Fails (exit 1) unless every event pushed was handed to a
 * subscriber and folded in, once, in time order: ctest runs it small as a
 * check of the collector's merge across many wrap-arounds of the rings.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft/time.h"

#include "collector_internal.h"

#define TASKS 200
#define POLLS 1000
#define RINGS 2

struct producer {
	ring_entry_t *e;
	uint16_t worker;
	uint64_t ts;      /* the next stamp (raw clock units) */
	uint64_t next_id; /* the next task id of this ring */
	unsigned cursor;  /* the task polled next, 0..TASKS/RINGS */
	unsigned polls;   /* polls of the current round's tasks */
	uint64_t ids[TASKS / RINGS];
	size_t fill; /* events to push this time */
	bool site_told; /* chained_spawn's site announced on this ring */
};

static void push(struct producer *pr, uint8_t kind, uint64_t task, uint64_t a1,
		 uint32_t a2)
{
	weft_event_t ev = { .ts = pr->ts,
			    .task = task,
			    .a1 = a1,
			    .a2 = a2,
			    .worker = pr->worker,
			    .kind = kind };

	if (!weft__ring_push_spsc(&pr->e->ring, &ev)) {
		fprintf(stderr, "weft-bench-collector: ring full\n");
		exit(1);
	}
	pr->ts += 40;
}

static bool chained; /* --stream chained_spawn */

/* chained_spawn's stream: each task spawned, polled once, completed. */
static void produce_chained(struct producer *pr)
{
	size_t n = 0;

	/* The site, once a ring, before its first SPAWN (as a runtime's
	 * ring announces it: runtime/src/task.c). */
	if (!pr->site_told) {
		pr->site_told = true;
		push(pr, WEFT_EV_SITE, 1, (uintptr_t) "link", 64);
		push(pr, WEFT_EV_SITE_LOC, 1, (uintptr_t)__FILE__, __LINE__);
		n += 2;
	}
	while (n < pr->fill) {
		uint64_t id = pr->next_id;

		pr->next_id += RINGS;
		push(pr, WEFT_EV_SPAWN, id, id > RINGS ? id - RINGS : 0,
		     1u << WEFT_SPAWN_SITE_SHIFT);
		push(pr, WEFT_EV_POLL, id, 80, WEFT_POLL_READY);
		push(pr, WEFT_EV_COMPLETE, id, 0, 0);
		n += 3;
	}
}

/* yield_many's stream on one worker: spawns, polls in turn, completions. */
static void *produce(void *arg)
{
	struct producer *pr = arg;
	size_t n = 0;

	if (chained) {
		produce_chained(pr);
		return NULL;
	}
	while (n < pr->fill) {
		unsigned k = pr->cursor;

		if (pr->polls == 0 && k == 0) {
			for (unsigned i = 0; i < TASKS / RINGS; i++) {
				pr->ids[i] = pr->next_id;
				pr->next_id += RINGS;
				push(pr, WEFT_EV_SPAWN, pr->ids[i], 0, 0);
				n++;
			}
		}
		push(pr, WEFT_EV_POLL, pr->ids[k], 30,
		     pr->polls + 1 < POLLS ? WEFT_POLL_YIELDED :
					     WEFT_POLL_READY);
		n++;
		if (pr->polls + 1 == POLLS) {
			push(pr, WEFT_EV_COMPLETE, pr->ids[k], 0, 0);
			n++;
		}
		if (++pr->cursor == TASKS / RINGS) {
			pr->cursor = 0;
			if (++pr->polls == POLLS)
				pr->polls = 0;
		}
	}
	return NULL;
}

/*
 * A subscriber taking every event: they must come whole, each one once,
 * and each pass's in time order (the merge's job), or the run fails.
 * (Across passes, order is not promised: the producers here run their
 * own clocks, and one pass can take a ring further ahead than another.)
 */
static uint64_t seen, last_ts, out_of_order;

static void check_events(void *ctx, const weft_event_t *ev, size_t n)
{
	(void)ctx;
	for (size_t i = 0; i < n; i++) {
		if (ev[i].ts < last_ts)
			out_of_order++;
		last_ts = ev[i].ts;
	}
	seen += n;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: weft-bench-collector [--rounds N] [--fill N] "
		   "[--stream S]\n"
		   "\n"
		   "Times the probe's collector folding in yield_many's event\n"
		   "stream (two rings filled by two threads, then one pass on\n"
		   "this thread), and prints\n"
		   "  shape=collector_pass collector_ns_per_event=<median> "
		   "p10=<x> p90=<x>\n"
		   "\n"
		   "  --rounds N  passes timed (default 200)\n"
		   "  --fill N    events a ring per pass (default 32768)\n"
		   "  --stream S  yield_many (default) or chained_spawn (each\n"
		   "              task spawned, polled once, completed)\n");
}

int main(int argc, char **argv)
{
	struct probe *p = &weft__probe;
	struct producer pr[RINGS];
	weft_probe_config_t cfg;
	unsigned rounds = 200;
	size_t fill = 32768;
	double *per;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
			rounds = (unsigned)strtoul(argv[++i], NULL, 10);
		} else if (!strcmp(argv[i], "--stream") && i + 1 < argc) {
			i++;
			if (!strcmp(argv[i], "chained_spawn")) {
				chained = true;
			} else if (strcmp(argv[i], "yield_many")) {
				fprintf(stderr,
					"weft-bench-collector: --stream "
					"takes yield_many or "
					"chained_spawn\n");
				return 2;
			}
		} else if (!strcmp(argv[i], "--fill") && i + 1 < argc) {
			fill = strtoul(argv[++i], NULL, 10);
		} else {
			fprintf(stderr,
				"weft-bench-collector: unknown argument %s "
				"(see --help)\n",
				argv[i]);
			return 2;
		}
	}
	if (!rounds || fill < 1024 || fill > (1u << 20)) {
		fprintf(stderr, "weft-bench-collector: --rounds must be > 0 "
				"and --fill 1024..1048576\n");
		return 2;
	}
	per = calloc(rounds, sizeof(*per));
	weft_probe_config(&cfg);
	pthread_mutex_lock(&p->lock);
	if (!per || weft__collector_start(p)) {
		fprintf(stderr, "weft-bench-collector: out of memory\n");
		return 1;
	}
	static weft_probe_sub_t sub;
	sub.opts.events = true;
	sub.opts.on_events = check_events;
	p->subs = &sub;
	memset(pr, 0, sizeof(pr));
	for (unsigned r = 0; r < RINGS; r++) {
		ring_entry_t *e = calloc(1, sizeof(*e));

		if (!e || weft__ring_init(&e->ring, 2 * fill, true)) {
			fprintf(stderr,
				"weft-bench-collector: out of memory\n");
			return 1;
		}
		e->worker = (uint16_t)r;
		e->next = p->rings;
		p->rings = e;
		pr[r].e = e;
		pr[r].worker = (uint16_t)r;
		pr[r].ts = weft__probe_clock() + r;
		pr[r].next_id = 1 + r;
		pr[r].fill = fill;
	}
	for (unsigned i = 0; i < rounds + 5; i++) {
		pthread_t th[RINGS];
		size_t before = p->events_total;
		uint64_t t0, t1;

		for (unsigned r = 0; r < RINGS; r++)
			if (pthread_create(&th[r], NULL, produce, &pr[r])) {
				fprintf(stderr, "weft-bench-collector: "
						"pthread_create failed\n");
				return 1;
			}
		for (unsigned r = 0; r < RINGS; r++)
			pthread_join(th[r], NULL);
		last_ts = 0;
		t0 = weft_now_ns();
		weft__collector_pass(p, t0);
		t1 = weft_now_ns();
		/* The first few passes warm the tables up. */
		if (i >= 5)
			per[i - 5] = (double)(t1 - t0) /
				     (double)(p->events_total - before);
		if ((i + 1) % 50 == 0)
			fprintf(stderr, "weft-bench-collector: pass %u/%u\n",
				i + 1, rounds + 5);
	}
	{
		uint64_t pushed = 0;

		for (unsigned r = 0; r < RINGS; r++)
			pushed += pr[r].e->ring.tail;
		if (seen != pushed || p->events_total != pushed ||
		    out_of_order) {
			fprintf(stderr,
				"weft-bench-collector: %llu events pushed, "
				"%llu handed on, %llu folded in, %llu out of "
				"order\n",
				(unsigned long long)pushed,
				(unsigned long long)seen,
				(unsigned long long)p->events_total,
				(unsigned long long)out_of_order);
			return 1;
		}
	}
	qsort(per, rounds, sizeof(*per), cmp_double);
	printf("shape=collector_pass stream=%s collector_ns_per_event=%.1f "
	       "p10=%.1f p90=%.1f passes=%u fill=%zu rings=%d\n",
	       chained ? "chained_spawn" : "yield_many", per[rounds / 2],
	       per[rounds / 10], per[rounds * 9 / 10], rounds, fill, RINGS);
	pthread_mutex_unlock(&p->lock);
	free(per);
	return 0;
}
