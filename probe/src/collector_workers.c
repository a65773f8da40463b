/* SPDX-License-Identifier: MIT */
/*
 * The collector's worker sampling: each worker's counters once a pass,
 * rates over a window of passes, its current poll, its off-CPU time (its
 * thread's /proc schedstat), and the warnings they raise (a worker
 * blocked in one poll, a steal storm, more workers than CPUs).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collector_internal.h"

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
	return per_s[i] >= STEAL_STORM_PER_S && rate[i] >= STEAL_STORM_RATE &&
	       rate[i] > STEAL_STORM_FACTOR * others_mean(rate, n, i);
}

/*
 * The tasks worker @i stole most lately, by spawn site: the polls it ran
 * of tasks last polled (or spawned) on another worker, over the last two
 * seconds.  A STEAL event names no task; the moves do.  Scans every
 * record: a warning's cost, at most every 5 s.
 */
struct site {
	const task_rec_t *t; /* one of them, named in the warning */
	uint64_t moves;
};

static struct site most_stolen(struct probe *p, unsigned i, uint64_t now)
{
	struct site s[8] = { { 0 } }, best = { 0 };
	unsigned ns = 0;

	for (size_t b = 0; b < p->table_size; b++) {
		for (const task_rec_t *t = p->table[b]; t; t = t->hnext) {
			unsigned k;

			if (!t->moved || t->pub.last_worker != i ||
			    t->moved_at + 2000000000u < now)
				continue;
			for (k = 0; k < ns; k++)
				if (s[k].t->pub.name == t->pub.name &&
				    s[k].t->pub.file == t->pub.file &&
				    s[k].t->pub.line == t->pub.line)
					break;
			if (k == ns && ns < 8)
				s[ns++].t = t;
			if (k < ns)
				s[k].moves += t->moved;
		}
	}
	for (unsigned k = 0; k < ns; k++)
		if (s[k].moves > best.moves)
			best = s[k];
	return best;
}

static void warn_storm(struct probe *p, const weft_probe_worker_t *w,
		       unsigned i, unsigned n, const double *rate, uint64_t now)
{
	struct site top = most_stolen(p, i, now);
	char d[160];
	unsigned victim = 0;
	uint64_t most = 0;
	int len;

	for (unsigned j = 0; j < n && j < 64; j++)
		if (w->stolen_from[j] > most) {
			most = w->stolen_from[j];
			victim = j;
		}
	/* stolen_from counts STEAL events since start (not windowed; empty
	 * in counters-only mode). */
	len = snprintf(d, sizeof(d),
		       "worker %u: %.0f%% of its polls are stolen tasks "
		       "(others %.0f%%), %.0f steals/s",
		       i, w->steal_rate * 100, others_mean(rate, n, i) * 100,
		       w->steals_per_s);
	if (most && len > 0 && (size_t)len < sizeof(d))
		len += snprintf(d + len, sizeof(d) - (size_t)len,
				", mostly from worker %u", victim);
	if (top.t && len > 0 && (size_t)len < sizeof(d)) {
		const char *f = top.t->pub.file,
			   *slash = f ? strrchr(f, '/') : NULL;

		len += snprintf(
			d + len, sizeof(d) - (size_t)len,
			"; most stolen: %llu polls of %s%s%s spawned at "
			"%s:%u",
			(unsigned long long)top.moves,
			top.t->pub.name ? "\"" : "",
			top.t->pub.name ? top.t->pub.name : "tasks",
			top.t->pub.name ? "\"" : "",
			slash ? slash + 1 :
			f     ? f :
				"?",
			top.t->pub.line);
	}
	if (p->worker_storm_bursts[i] > 1 && len > 0 && (size_t)len < sizeof(d))
		snprintf(d + len, sizeof(d) - (size_t)len,
			 "; %u bursts since the last warning",
			 p->worker_storm_bursts[i]);
	p->worker_storm_warned[i] = now;
	p->worker_storm_bursts[i] = 0;
	weft__collector_warn(p, WEFT_WARN_STEAL_STORM, top.t, (uint16_t)i, now,
			     0, "%s", d);
}

/* struct worker_sched_s's states. */
enum { SCHED_UNOPENED, SCHED_OPEN, SCHED_FAILED };

static void sched_close(struct worker_sched_s *ws)
{
	if (ws->state == SCHED_OPEN)
		close(ws->fd);
	*ws = (struct worker_sched_s){ .state = SCHED_UNOPENED };
}

/* Every worker's: the runtime they were of is no longer described, or
 * the collector stops (weft__collector_stop()). */
void weft__collector_sched_close_all(struct probe *p)
{
	for (unsigned i = 0; i < MAX_PROBE_WORKERS; i++)
		sched_close(&p->worker_sched[i]);
}

/*
 * Worker @i's time so far on a CPU (*@on) and off one (*@off): the first
 * two fields of its thread's /proc/self/task/TID/schedstat (ns).  Off is
 * run_delay, the time it spent runnable while the OS ran something
 * else, added as each wait ends; parked time is in neither: a thread
 * asleep is not waiting for a CPU.  A worker whose thread has not yet
 * published its tid has barely run: 0, which keeps the window's oldest
 * sample usable once it does.  The file is opened then, once, and read
 * anew with a pread at 0 each pass (one system call a worker).  False
 * where it cannot be read (no schedstat in this kernel, the thread
 * gone): never tried again for that thread.
 */
static bool sched_read(struct probe *p, weft_runtime_t *rt, unsigned i,
		       uint64_t *on, uint64_t *off)
{
	struct worker_sched_s *ws = &p->worker_sched[i];
	int32_t tid = weft__runtime_worker_tid(rt, i);
	char buf[128], *f2, *end;
	ssize_t n;

	*on = *off = 0;
	if (!tid)
		return true;
	/* Another thread in the same slot: start afresh for it. */
	if (ws->state != SCHED_UNOPENED && ws->tid != tid)
		sched_close(ws);
	if (ws->state == SCHED_FAILED)
		return false;
	if (ws->state == SCHED_UNOPENED) {
		snprintf(buf, sizeof(buf), "/proc/self/task/%d/schedstat",
			 (int)tid);
		ws->tid = tid;
		ws->fd = open(buf, O_RDONLY | O_CLOEXEC);
		if (ws->fd < 0) {
			ws->state = SCHED_FAILED;
			return false;
		}
		ws->state = SCHED_OPEN;
	}
	n = pread(ws->fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		goto out_close;
	buf[n] = '\0';
	/* "on-CPU run_delay timeslices". */
	*on = strtoull(buf, &f2, 10);
	if (f2 == buf)
		goto out_close;
	*off = strtoull(f2, &end, 10);
	if (end == f2)
		goto out_close;
	return true;

out_close:
	close(ws->fd);
	ws->state = SCHED_FAILED;
	*on = *off = 0;
	return false;
}

bool weft__collector_sched_split(struct probe *p, uint16_t worker,
				 uint64_t start_ns, uint64_t dur_ns,
				 weft__poll_split_t *out)
{
	unsigned fill = p->window_fill;
	const worker_window_t *a = NULL, *b = NULL;
	uint64_t on, off, d_on, d_off, wait, cpu;
	double share;

	if (!p->rt || worker >= p->stats.workers || !dur_ns)
		return false;
	/*
	 * The newest sample from before the poll began; else (a poll that
	 * began before the window's first sample: a runtime just described)
	 * the oldest from within it, whose stretch holds the poll's end.
	 */
	for (unsigned k = 0; k < fill; k++) {
		const worker_window_t *x = &p->window[worker][k];

		if (x->off_cpu_read && x->at_ns <= start_ns &&
		    (!a || x->at_ns > a->at_ns))
			a = x;
	}
	for (unsigned k = 0; k < fill; k++) {
		const worker_window_t *x = &p->window[worker][k];

		if (x->off_cpu_read && x->at_ns < start_ns + dur_ns &&
		    (!b || x->at_ns < b->at_ns))
			b = x;
	}
	if (!a)
		a = b;
	if (!a || !sched_read(p, p->rt, worker, &on, &off))
		return false;
	d_on = on > a->on_cpu_ns ? on - a->on_cpu_ns : 0;
	d_off = off > a->off_cpu_ns ? off - a->off_cpu_ns : 0;
	/*
	 * The stretch from that sample to now holds the poll and what the
	 * thread did around it: the poll is given the stretch's share of
	 * waiting in its runnable time, and never more waiting than the
	 * stretch had (a poll asleep in the kernel on a crowded CPU waits
	 * only at its wake-up: its sleep is its task's).
	 */
	share = d_on + d_off ? (double)d_off / (double)(d_on + d_off) : 0;
	wait = (uint64_t)((double)dur_ns * share);
	if (wait > d_off)
		wait = d_off;
	cpu = dur_ns - wait < d_on ? dur_ns - wait : d_on;
	*out = (weft__poll_split_t){ .from_ns = 0,
				     .to_ns = dur_ns,
				     .cpu_ns = cpu,
				     .wait_ns = wait };
	return true;
}

void weft__collector_sample_workers(struct probe *p, uint64_t now)
{
	weft_runtime_t *rt = p->rt;
	unsigned n, pos, old;
	double rate[MAX_PROBE_WORKERS], per_s[MAX_PROBE_WORKERS];

	if (!rt) {
		weft__collector_sched_close_all(p);
		p->stats.workers = 0;
		return;
	}
	n = weft_runtime_workers(rt);
	if (n > MAX_PROBE_WORKERS)
		n = MAX_PROBE_WORKERS;
	p->stats.workers = n;
	pos = p->window_pos;
	/*
	 * A new series (the collector started, or the described runtime
	 * changed: weft__probe_runtime_detach() empties the window): the
	 * schedstat files open are another runtime's threads, or may be.
	 */
	if (!p->window_fill)
		weft__collector_sched_close_all(p);
	old = p->window_fill < WINDOW ? 0 : (pos + 1) % WINDOW;
	for (unsigned i = 0; i < n; i++) {
		weft_probe_worker_t *w = &p->workers[i];
		worker_window_t *cur = &p->window[i][pos];
		worker_window_t *o = &p->window[i][old];
		double dt;
		uint64_t polls, task, started;

		weft_worker_metrics(rt, i, &cur->m);
		cur->off_cpu_read = sched_read(p, rt, i, &cur->on_cpu_ns,
					       &cur->off_cpu_ns);
		cur->at_ns = now;
		w->index = (uint16_t)i;
		w->counters = cur->m;
		w->queue_depth = cur->m.local_queue_depth;
		dt = (double)(now - o->at_ns) / 1e9;
		polls = cur->m.polls - o->m.polls;
		if (p->window_fill > 0 && dt > 0) {
			w->polls_per_s = (double)polls / dt;
			w->steals_per_s =
				(double)(cur->m.steals - o->m.steals) / dt;
			w->steal_rate =
				polls ? (double)(cur->m.steals - o->m.steals) /
						(double)polls :
					0;
			/* Busy time read mid-park can lag a read before it
			 * (weft_worker_metrics()): no negative stretch. */
			w->busy_ratio = cur->m.busy_ns > o->m.busy_ns ?
						(double)(cur->m.busy_ns -
							 o->m.busy_ns) /
							(dt * 1e9) :
						0;
			if (w->busy_ratio > 1)
				w->busy_ratio = 1;
			/* Over the same window; a wait is added as it ends,
			 * all of it, so one begun before the window can
			 * reach past 1. */
			w->off_cpu_ratio = 0;
			if (cur->off_cpu_read && o->off_cpu_read &&
			    cur->off_cpu_ns > o->off_cpu_ns)
				w->off_cpu_ratio = (double)(cur->off_cpu_ns -
							    o->off_cpu_ns) /
						   (dt * 1e9);
			if (w->off_cpu_ratio > 1)
				w->off_cpu_ratio = 1;
		}
		w->off_cpu_ns = cur->off_cpu_read ? cur->off_cpu_ns : 0;
		w->max_poll_ns = p->worker_max_poll[i];
		w->events_dropped = p->worker_drops[i];
		weft__runtime_worker_poll(rt, i, &task, &started);
		w->current_task = task;
		w->poll_started_ns = task ? weft__probe_clock_to_ns(started) :
					    0;
		w->state = task ? 0 : cur->m.parks > cur->m.unparks ? 2 : 1;
		if (task && w->poll_started_ns &&
		    now > w->poll_started_ns + p->config.long_poll_ns &&
		    p->worker_yield_warned[i] != started) {
			uint64_t so_far = now - w->poll_started_ns, own;
			char why[160], d[sizeof(why) + 64];
			task_rec_t *t;

			own = weft__collector_poll_why(p, (uint16_t)i,
						       w->poll_started_ns,
						       started, so_far, why,
						       sizeof(why));
			/* Its own part under the threshold so far: looked
			 * at again (weft__collector_by_os()). */
			t = own >= p->config.long_poll_ns ?
				    weft__collector_task_get(p, task, now) :
				    NULL;
			snprintf(d, sizeof(d),
				 "still in one poll after %.1f ms: worker %u "
				 "is blocked%s",
				 (double)so_far / 1e6, i, why);
			if (t) {
				p->worker_yield_warned[i] = started;
				weft__collector_warn_task(
					p, WEFT_WARN_NEVER_YIELDED, t,
					(uint16_t)i, w->poll_started_ns,
					so_far, d);
			}
		}
		rate[i] = w->steal_rate;
		per_s[i] = w->steals_per_s;
	}
	for (unsigned i = 0; i < n && n > 1; i++) {
		weft_probe_worker_t *w = &p->workers[i];
		bool storm = weft__probe_steal_storm(rate, per_s, n, i);

		/* Every burst counted; the text at most every 5 s. */
		if (storm && !p->worker_in_storm[i])
			p->worker_storm_bursts[i]++;
		p->worker_in_storm[i] = storm;
		if (!p->worker_storm_bursts[i] ||
		    now <= p->worker_storm_warned[i] + 5000000000u)
			continue;
		warn_storm(p, w, i, n, rate, now);
	}
	if (!p->oversub_warned) {
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);

		p->oversub_warned = true;
		if (cpus > 0 && n > (unsigned)cpus)
			weft__collector_warn(
				p, WEFT_WARN_OVERSUBSCRIBED, NULL,
				WEFT_EVENT_NO_WORKER, now, 0,
				"%u workers on %ld CPUs: expect lower throughput",
				n, cpus);
	}
	p->window_pos = (pos + 1) % WINDOW;
	if (p->window_fill < WINDOW)
		p->window_fill++;
}
