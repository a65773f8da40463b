/* SPDX-License-Identifier: MIT */
/*
 * record_throughput: how many events per second the recorder writes to a
 * real file with nothing dropped, and how many bytes an event costs there.
 *
 * A paced workload emits events at a known rate: pacer tasks, each
 * yielding at its share of the target rate (a yield is a WAKE and a POLL
 * event), catching up after each sleep (1 ms per 8 pacers).  The
 * recorder (weft_trace_start()) writes a trace file in $TMPDIR for
 * SECONDS at each rate of the ramp; a second, counters-only subscriber
 * reads the probe's totals (events drained, events dropped by the rings)
 * before and after.  One line per rate:
 *
 *	shape=record_throughput runtime=weft target_eps=1000000
 *	  recorded_eps=998123 dropped=0 bytes_per_event=5.10 ...
 *
 * recorded_eps counts what reached the file (drained by the collector);
 * dropped counts what the rings could not hold (the collector and
 * recorder fell behind).  bytes_per_event is the whole file (header,
 * Update records and event batches) over the events in it.
 * collector_cpu is the collector thread's CPU time over the wall time
 * (1.0 = one core), from /proc.
 *
 * WEFT_BENCH_TASKS sets the number of pacer tasks (default 8: few
 * tasks, so nearly every byte is events; thousands make the Update
 * records count).  WEFT_BENCH_RATES (comma-separated events/s, default
 * 250000,500000,1000000,1500000,2000000) and WEFT_BENCH_SECONDS (default
 * 2) change the ramp; WEFT_BENCH_KEEP=1 keeps the files (their paths
 * on stderr) for `weft-trace info`.  --iters and --warmup are ignored.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <weft/probe.h>
#include <weft/trace.h>

#include "bench.h"

#define PACERS_DEFAULT 8
#define PACERS_MAX 100000
#define DEFAULT_RATES "250000,500000,1000000,1500000,2000000"
#define DEFAULT_SECONDS 2
/* Yields per pacer between sleeps at most (a pacer late by more than
 * this gives up the backlog rather than burst). */
#define MAX_BURST 20000

struct pacer {
	int weft_pc;
	uint64_t t0, end;
	uint64_t per_s;  /* yields per second, this pacer */
	uint64_t period; /* ns asleep between bursts */
	uint64_t done, due;
	weft_sleep_t sl;
	_Atomic uint64_t *yields;
};

static weft_poll_t pacer_poll(void *arg, weft_cx_t *cx)
{
	struct pacer *s = arg;
	uint64_t now;

	WEFT_ASYNC_BEGIN(s);
	for (;;) {
		now = weft_now_ns();
		if (now >= s->end)
			break;
		s->due = (uint64_t)((double)(now - s->t0) / 1e9 *
				    (double)s->per_s);
		if (s->due > s->done + MAX_BURST)
			s->done = s->due - MAX_BURST;
		while (s->done < s->due) {
			s->done++;
			WEFT_YIELD(s, cx);
		}
		weft_sleep_init(&s->sl, s->period);
		WEFT_AWAIT(s, weft_sleep_poll(&s->sl, cx));
		weft_sleep_fini(&s->sl);
	}
	/* Relaxed: read after the join. */
	atomic_fetch_add_explicit(s->yields, s->done, memory_order_relaxed);
	WEFT_ASYNC_END(s);
}

/* The probe's totals, from a counters-only subscriber. */
static pthread_mutex_t tot_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t tot_events, tot_dropped;

static void tot_update(void *ctx, const weft_probe_update_t *u)
{
	(void)ctx;
	if (!u->stats)
		return;
	pthread_mutex_lock(&tot_lock);
	tot_events = u->stats->events;
	tot_dropped = u->stats->events_dropped;
	pthread_mutex_unlock(&tot_lock);
}

static void totals(uint64_t *ev, uint64_t *dropped)
{
	weft_probe_flush();
	pthread_mutex_lock(&tot_lock);
	*ev = tot_events;
	*dropped = tot_dropped;
	pthread_mutex_unlock(&tot_lock);
}

/* CPU ns of this process's thread named @name (0 if none). */
static uint64_t thread_cpu_ns(const char *name)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	uint64_t ns = 0;
	long hz = sysconf(_SC_CLK_TCK);

	if (!d)
		return 0;
	while ((e = readdir(d)) != NULL) {
		char p[300], comm[64] = "", buf[1024];
		unsigned long long ut = 0, st = 0;
		FILE *f;
		char *rp;

		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "/proc/self/task/%s/comm", e->d_name);
		f = fopen(p, "r");
		if (!f)
			continue;
		if (!fgets(comm, sizeof(comm), f))
			comm[0] = '\0';
		fclose(f);
		comm[strcspn(comm, "\n")] = '\0';
		if (strcmp(comm, name))
			continue;
		snprintf(p, sizeof(p), "/proc/self/task/%s/stat", e->d_name);
		f = fopen(p, "r");
		if (!f)
			continue;
		if (fgets(buf, sizeof(buf), f) &&
		    (rp = strrchr(buf, ')')) != NULL &&
		    sscanf(rp + 2,
			   "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu "
			   "%llu",
			   &ut, &st) == 2)
			ns += (ut + st) * (1000000000ull / (uint64_t)hz);
		fclose(f);
	}
	closedir(d);
	return ns;
}

static void one_rate(struct bench *b, uint64_t rate, unsigned secs,
		     const char *dir, unsigned npacers)
{
	weft_join_t **j = bench_xmallocarray(npacers, sizeof(*j));
	_Atomic uint64_t yields = 0;
	char path[512];
	struct stat st;
	uint64_t ev0, dr0, ev1, dr1, t0, t1, cpu0, cpu1;
	int fd, rc;

	snprintf(path, sizeof(path), "%s/weft-bench-record-XXXXXX", dir);
	fd = mkstemp(path);
	if (fd < 0)
		bench_die("mkstemp", -errno);
	close(fd);
	rc = weft_trace_start(path, NULL);
	if (rc)
		bench_die("weft_trace_start", rc);
	totals(&ev0, &dr0);
	cpu0 = thread_cpu_ns("weft-collector");
	t0 = weft_now_ns();
	for (unsigned i = 0; i < npacers; i++) {
		/* A yield emits two events: WAKE (by ref) and POLL. */
		struct pacer p = {
			.t0 = t0,
			.end = t0 + (uint64_t)secs * 1000000000u,
			.per_s = rate / 2 / npacers,
			/* 1 ms per 8 pacers: wake-ups from sleeping stay
			 * a small part of the events. */
			.period = 1000000ull * ((npacers + 7) / 8),
			.yields = &yields,
		};

		rc = weft_spawn_named(b->rt, "pacer", pacer_poll, &p, &j[i]);
		if (rc)
			bench_die("weft_spawn", rc);
	}
	for (unsigned i = 0; i < npacers; i++) {
		rc = weft_join_wait(j[i], NULL);
		weft_join_drop(j[i]);
		if (rc)
			bench_die("weft_join_wait", rc);
	}
	t1 = weft_now_ns();
	free(j);
	totals(&ev1, &dr1);
	cpu1 = thread_cpu_ns("weft-collector");
	rc = weft_trace_stop();
	if (rc)
		bench_die("weft_trace_stop", rc);
	if (stat(path, &st))
		bench_die("stat", -errno);
	if (getenv("WEFT_BENCH_KEEP"))
		fprintf(stderr, "weft-bench: kept %s\n", path);
	else
		unlink(path);

	double wall = (double)(t1 - t0) / 1e9;
	uint64_t ev = ev1 - ev0;

	printf("shape=record_throughput runtime=weft target_eps=%llu "
	       "emitted_eps=%.0f recorded_eps=%.0f dropped=%llu "
	       "bytes_per_event=%.2f file_bytes=%lld collector_cpu=%.2f "
	       "tasks=%u secs=%.2f workers=%u\n",
	       (unsigned long long)rate, (double)(ev + (dr1 - dr0)) / wall,
	       (double)ev / wall, (unsigned long long)(dr1 - dr0),
	       ev ? (double)st.st_size / (double)ev : 0.0,
	       (long long)st.st_size, (double)(cpu1 - cpu0) / 1e9 / wall,
	       npacers, wall, weft_runtime_workers(b->rt));
	fflush(stdout);
}

static void record_throughput(struct bench *b, const struct bench_shape *s,
			      unsigned long iters, unsigned long warmup)
{
	const char *rates = getenv("WEFT_BENCH_RATES");
	const char *secs_s = getenv("WEFT_BENCH_SECONDS");
	const char *dir = getenv("TMPDIR");
	const char *tasks_s = getenv("WEFT_BENCH_TASKS");
	unsigned long npacers = tasks_s ? strtoul(tasks_s, NULL, 10) : 0;
	unsigned secs = secs_s ? (unsigned)strtoul(secs_s, NULL, 10) : 0;
	weft_probe_sub_t *sub;
	char *list, *save = NULL;
	int rc;

	(void)s;
	(void)iters;
	(void)warmup;
	if (!secs)
		secs = DEFAULT_SECONDS;
	if (!npacers || npacers > PACERS_MAX)
		npacers = PACERS_DEFAULT;
	if (!dir || !*dir)
		dir = "/tmp";
	rc = weft_probe_subscribe(
		&(weft_probe_sub_opts_t){ .on_update = tot_update }, &sub);
	if (rc == -ENOTSUP) {
		printf("shape=record_throughput runtime=weft skipped=compiled-out\n");
		return;
	}
	if (rc)
		bench_die("weft_probe_subscribe", rc);
	list = strdup(rates && *rates ? rates : DEFAULT_RATES);
	if (!list)
		bench_die("strdup", -ENOMEM);
	for (char *t = strtok_r(list, ",", &save); t;
	     t = strtok_r(NULL, ",", &save)) {
		uint64_t r = strtoull(t, NULL, 10);

		if (r < 2 * npacers)
			bench_check_failed("WEFT_BENCH_RATES: bad rate '%s'",
					   t);
		one_rate(b, r, secs, dir, (unsigned)npacers);
	}
	free(list);
	weft_probe_unsubscribe(sub);
}

const struct bench_shape shape_record_throughput = {
	.name = "record_throughput",
	.unit = "event",
	.ops = 1,
	.run_all = record_throughput,
};
