/* SPDX-License-Identifier: MIT */
/*
 * The collector's worker sampling: each worker's counters once a pass,
 * rates over a window of passes, its current poll, its off-CPU time (its
 * thread's /proc schedstat), and the warnings they raise (a worker
 * blocked in one poll, a steal storm, more workers than CPUs).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
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

/* A rate of tasks stolen a poll as a share of the polls: at most 100. */
static double share_pct(double rate)
{
	return rate > 1 ? 100 : rate * 100;
}

static void warn_storm(struct probe *p, const weft_probe_worker_t *w,
		       unsigned i, unsigned n, const double *rate, uint64_t now)
{
	struct site top = most_stolen(p, i, now);
	char d[160];
	unsigned victim = w->nstolen ? w->stolen[0].victim : 0;
	uint64_t most = w->nstolen ? w->stolen[0].tasks : 0;
	int len;

	/* stolen counts STEAL events since start (not windowed; empty in
	 * counters-only mode). */
	/*
	 * Tasks stolen over polls: a task stolen and stolen again before
	 * its poll counts twice, which read "106% of its polls are stolen
	 * tasks" (an audit).  Said as at most all of them; the rule above
	 * reads the rate as it is.
	 */
	len = snprintf(d, sizeof(d),
		       "worker %u: %.0f%% of its polls are stolen tasks "
		       "(others %.0f%%), %.0f steals/s",
		       i, share_pct(w->steal_rate),
		       share_pct(others_mean(rate, n, i)), w->steals_per_s);
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
	if (p->wk[i].storm_bursts > 1 && len > 0 && (size_t)len < sizeof(d))
		snprintf(d + len, sizeof(d) - (size_t)len,
			 "; %u bursts since the last warning",
			 p->wk[i].storm_bursts);
	p->wk[i].storm_warned = now;
	weft__collector_warn(p, WEFT_WARN_STEAL_STORM, top.t, (uint16_t)i, now,
			     0, "%s", d);
	/* The row stands for every burst it says, and is counted so. */
	if (p->wk[i].storm_bursts > 1) {
		p->warnings[(p->warn_seq - 1) % WARN_KEEP].count =
			p->wk[i].storm_bursts;
		p->warn_kind_count[WEFT_WARN_STEAL_STORM] +=
			p->wk[i].storm_bursts - 1;
	}
	p->wk[i].storm_bursts = 0;
}

int weft__collector_workers_fit(struct probe *p, unsigned n)
{
	unsigned cap = p->nworker_slots, old = p->nworker_slots;
	weft_probe_worker_t *w;
	worker_rec_t *wk;
	uint64_t *gate;

	if (n <= cap)
		return 0;
	if (n > PROBE_MAX_WORKERS)
		return -EINVAL;
	/* Doubling: a runtime's workers come one ring at a time. */
	cap = cap ? 2 * cap : 8;
	if (cap < n)
		cap = n;
	if (cap > PROBE_MAX_WORKERS)
		cap = PROBE_MAX_WORKERS;
	if (weft__collector_leak_fit(p, cap))
		return -ENOMEM;
	w = realloc(p->workers, cap * sizeof(*w));
	if (!w)
		return -ENOMEM;
	p->workers = w;
	wk = realloc(p->wk, cap * sizeof(*wk));
	if (!wk)
		return -ENOMEM; /* workers[] larger, nworker_slots kept */
	p->wk = wk;
	gate = realloc(p->wk_gate, cap * sizeof(*gate));
	if (!gate)
		return -ENOMEM; /* workers[], wk[] larger, nworker_slots kept */
	p->wk_gate = gate;
	memset(&w[old], 0, (cap - old) * sizeof(*w));
	memset(&wk[old], 0, (cap - old) * sizeof(*wk));
	/* 0: a new slot's first poll takes the longer way (p->wk_gate). */
	memset(&gate[old], 0, (cap - old) * sizeof(*gate));
	p->nworker_slots = cap;
	return 0;
}

void weft__collector_workers_reset(struct probe *p)
{
	for (unsigned i = 0; i < p->nworker_slots; i++) {
		worker_rec_t *k = &p->wk[i];

		memset(&p->workers[i], 0, sizeof(p->workers[i]));
		/* Per-worker memory of the last runtime's warnings, maxima
		 * and steals; its schedstat files are closed by the next
		 * sample (the window is emptied), its drops kept (they are
		 * its rings'). */
		k->yield_warned = k->storm_warned = k->preempt_warned = 0;
		k->look_started = 0;
		k->look_passes = 0;
		memset(&k->lng, 0, sizeof(k->lng));
		k->storm_bursts = 0;
		k->in_storm = false;
		k->max_poll = 0;
		memset(k->steals, 0, sizeof(k->steals));
	}
}

void weft__collector_workers_free(struct probe *p)
{
	free(p->workers);
	free(p->wk);
	free(p->wk_gate);
	p->workers = NULL;
	p->wk = NULL;
	p->wk_gate = NULL;
	p->nworker_slots = 0;
	p->stats.workers = 0; /* none described until the next sample */
}

void weft__collector_steal(struct probe *p, unsigned thief, unsigned victim,
			   uint64_t tasks)
{
	struct steal_slot_s *s, *least = NULL;

	if (!weft__collector_has_worker(p, thief) ||
	    !weft__collector_has_worker(p, victim))
		return;
	p->workers[victim].stolen_out += tasks;
	s = p->wk[thief].steals;
	for (unsigned i = 0; i < STEAL_TRACKED; i++) {
		if (s[i].count && s[i].victim == victim) {
			s[i].count += tasks;
			return;
		}
		if (!least || s[i].count < least->count)
			least = &s[i];
	}
	/* A free slot is the least (0); else the least count's victim
	 * gives way, the newcomer counted from there (Space-Saving). */
	*least = (struct steal_slot_s){ .victim = victim,
					.count = least->count + tasks,
					.err = least->count };
}

/* Worker @i's top victims, from its slots, most certain tasks first. */
void weft__collector_publish_steals(struct probe *p, unsigned i)
{
	weft_probe_worker_t *w = &p->workers[i];
	const worker_rec_t *k = &p->wk[i];
	unsigned n = 0;

	for (unsigned q = 0; q < STEAL_TRACKED; q++) {
		const struct steal_slot_s *s = &k->steals[q];
		weft_probe_steal_t x = { s->victim, s->count - s->err };
		unsigned j;

		if (!s->count || !x.tasks)
			continue;
		if (n == WEFT_WORKER_STOLEN &&
		    x.tasks <= w->stolen[n - 1].tasks)
			continue;
		j = n < WEFT_WORKER_STOLEN ? n++ : n - 1;
		/* Insertion: ties keep the lower slot first. */
		while (j > 0 && w->stolen[j - 1].tasks < x.tasks) {
			w->stolen[j] = w->stolen[j - 1];
			j--;
		}
		w->stolen[j] = x;
	}
	w->nstolen = (uint8_t)n;
}

/* struct worker_sched_s's states. */
enum { SCHED_UNOPENED, SCHED_OPEN, SCHED_FAILED };

static void sched_close(struct probe *p, struct worker_sched_s *ws)
{
	if (ws->state == SCHED_OPEN) {
		close(ws->fd);
		p->sched_open--;
	}
	*ws = (struct worker_sched_s){ .state = SCHED_UNOPENED };
}

/*
 * Schedstat files kept open at most: a quarter of the process's
 * descriptors (RLIMIT_NOFILE), so that a runtime of thousands of
 * workers does not take the application's.  Workers past it read no
 * off-CPU time (0, as where /proc cannot be read).
 */
static unsigned sched_budget(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur / 4 >= PROBE_MAX_WORKERS)
		return PROBE_MAX_WORKERS;
	return (unsigned)(rl.rlim_cur / 4);
}

/* Every worker's: the runtime they were of is no longer described, or
 * the collector stops (weft__collector_stop()). */
void weft__collector_sched_close_all(struct probe *p)
{
	for (unsigned i = 0; i < p->nworker_slots; i++)
		sched_close(p, &p->wk[i].sched);
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
	struct worker_sched_s *ws = &p->wk[i].sched;
	int32_t tid = weft__runtime_worker_tid(rt, i);
	char buf[128], *f2, *end;
	ssize_t n;

	*on = *off = 0;
	if (!tid)
		return true;
	/* Another thread in the same slot: start afresh for it. */
	if (ws->state != SCHED_UNOPENED && ws->tid != tid)
		sched_close(p, ws);
	if (ws->state == SCHED_FAILED)
		return false;
	if (ws->state == SCHED_UNOPENED) {
		snprintf(buf, sizeof(buf), "/proc/self/task/%d/schedstat",
			 (int)tid);
		ws->tid = tid;
		if (!p->sched_budget)
			p->sched_budget = sched_budget();
		ws->fd = p->sched_open < p->sched_budget ?
				 open(buf, O_RDONLY | O_CLOEXEC) :
				 -1;
		if (ws->fd < 0) {
			ws->state = SCHED_FAILED;
			return false;
		}
		ws->state = SCHED_OPEN;
		p->sched_open++;
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
	p->sched_open--;
	ws->state = SCHED_FAILED;
	*on = *off = 0;
	return false;
}

/* A thread CPU clock's reading (ns), 0 if it cannot be read. */
static uint64_t cpu_clock_ns(clockid_t c)
{
	struct timespec ts;

	if (clock_gettime(c, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The state letter of thread @tid in its /proc stat ('R', 'S', 'D'...),
 * 0 where it cannot be read. */
static char thread_state(int32_t tid)
{
	char path[64], buf[512], *st;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* "tid (comm) S ...": the state follows the last ')'. */
	st = strrchr(buf, ')');
	return st && st[1] == ' ' ? st[2] : 0;
}

/*
 * Worker @i's schedstat as sched_read() gives it, whether its thread is
 * on a CPU or waiting for one ('R') rather than asleep, and when all that
 * held (weft__sched_look_t).  Read so that the parts agree: the thread's
 * CPU clock before and after the schedstat and /proc stat reads,
 * unmoved, means it did not run in between, so the state and the counts
 * are of one moment.  A reader held off its CPU between the reads (the
 * collector, on a loaded host) otherwise paired the counts of one
 * moment with the state of another.  A thread that ran in every try is
 * running.  A running thread's schedstat lags its CPU clock (by up to a
 * tick): the clock is taken where it is the later.  The /proc stat file
 * is opened for this look alone, and only for a poll still running
 * (@state) past the threshold, at most once a pass a worker: an ended
 * poll's split needs no state.
 */
static bool sched_look(struct probe *p, unsigned i, bool state,
		       weft__sched_look_t *l)
{
	int32_t tid = weft__runtime_worker_tid(p->rt, i);
	clockid_t clk = (clockid_t)weft__runtime_worker_cpu_clock(p->rt, i);
	uint64_t c0 = 0, c1 = 0;

	/* A thread CPU clock is negative; 0: none (wall time is no CPU
	 * time), and then one read of each. */
	for (int k = 0; k < 3; k++) {
		if (clk < 0)
			c0 = cpu_clock_ns(clk);
		if (!sched_read(p, p->rt, i, &l->on_ns, &l->off_ns))
			return false;
		l->runnable = state && tid && thread_state(tid) == 'R';
		if (clk < 0)
			c1 = cpu_clock_ns(clk);
		l->at_ns = weft_now_ns();
		if (c1 == c0) {
			if (c1 > l->on_ns)
				l->on_ns = c1;
			return true;
		}
	}
	if (!sched_read(p, p->rt, i, &l->on_ns, &l->off_ns))
		return false;
	c1 = cpu_clock_ns(clk);
	l->at_ns = weft_now_ns();
	if (c1 > l->on_ns)
		l->on_ns = c1;
	l->runnable = true;
	return true;
}

/* The newest sample of @win whose schedstat was read by @at_ns, or NULL. */
static const worker_window_t *newest_sample_by(const worker_window_t *win,
					       unsigned fill, uint64_t at_ns)
{
	const worker_window_t *a = NULL;

	for (unsigned k = 0; k < fill; k++) {
		const worker_window_t *x = &win[k];

		if (x->off_cpu_read && x->sched_at_ns <= at_ns &&
		    (!a || x->sched_at_ns > a->sched_at_ns))
			a = x;
	}
	return a;
}

bool weft__collector_split_of(const worker_window_t *win, unsigned fill,
			      const worker_window_t *born, uint64_t start_ns,
			      uint64_t dur_ns, bool running,
			      const weft__sched_look_t *now,
			      weft__poll_split_t *out)
{
	const worker_window_t *a, *b = NULL;
	uint64_t d_on, d_off, wait, cpu, from, span;
	double share;

	if (!dur_ns)
		return false;
	/*
	 * The newest sample read before the poll began; else the thread's
	 * birth, when the poll began before the window's first sample (a
	 * runtime made while the probe listens: its first polls run before
	 * the collector's first pass reads its workers, and at start-up on
	 * a loaded host a 4 ms computation held off its CPU to 16 ms was
	 * blamed, "not known" where its time went); else the oldest read
	 * within it, whose stretch holds the poll's end.
	 */
	a = newest_sample_by(win, fill, start_ns);
	if (!a && born && born->sched_at_ns <= start_ns)
		a = born;
	for (unsigned k = 0; k < fill; k++) {
		const worker_window_t *x = &win[k];

		if (x->off_cpu_read && x->sched_at_ns < start_ns + dur_ns &&
		    (!b || x->sched_at_ns < b->sched_at_ns))
			b = x;
	}
	if (!a)
		a = b;
	if (!a)
		return false;
	d_on = now->on_ns > a->on_cpu_ns ? now->on_ns - a->on_cpu_ns : 0;
	d_off = now->off_ns > a->off_cpu_ns ? now->off_ns - a->off_cpu_ns : 0;
	/*
	 * run_delay adds a wait only once it ends, so in a poll still
	 * running the time neither on a CPU nor in an ended wait is a wait
	 * going on or sleep (a blocking call), and which is not known.  A
	 * thread asleep now is in a blocking call: that time is its task's.
	 * One running or runnable now ('R') is not: the time is counted as
	 * waiting, and the task keeps only its CPU time, until a look finds
	 * it asleep or the poll ends (its POLL event, when every wait has
	 * ended).  A stuck poll is asleep or on a CPU at most looks and is
	 * still told; a computation the OS keeps off its CPU is not blamed
	 * however its waits fall between the samples.  (Counted instead
	 * from the newest sample, a wait begun before it lost its older
	 * part, which read as "asleep in the kernel" and blamed the task,
	 * at a load of 15.)  The stretch is taken from the earliest its
	 * first read may have been (the longest it can be).
	 */
	span = now->at_ns > a->sched_from_ns ? now->at_ns - a->sched_from_ns :
					       0;
	if (running && now->runnable && span > d_on + d_off)
		d_off = span - d_on;
	/*
	 * Nor more waiting than the stretch had room for beside its CPU
	 * time: a wait going on when the sample was read ends into
	 * run_delay whole, its part before the sample too (a worker woken
	 * for the poll and queued behind other threads).  That part can
	 * make a 30 ms computation on a hogged CPU read as mostly the OS's,
	 * its long poll unsaid (as test_preempted_not_blamed's guilty task
	 * once was under TSan at load 9; the cause not confirmed there).
	 */
	if (d_on + d_off > span)
		d_off = span > d_on ? span - d_on : 0;
	/*
	 * The stretch from that sample to now holds the poll and what the
	 * thread did around it: the poll is given the stretch's share of
	 * waiting in its runnable time, and never more waiting than the
	 * stretch had (a poll asleep in the kernel on a crowded CPU waits
	 * only at its wake-up: its sleep is its task's).
	 */
	/*
	 * A sample from within the poll (none before it: a runtime just
	 * described) covers only the poll's part after it: the split is
	 * of that part, not of the whole poll, whose earlier part would
	 * otherwise read as neither CPU nor waiting, "asleep in the
	 * kernel", and be blamed on the task (a 4 ms computation held off
	 * a hogged CPU, under load).  split_usable() decides whether the
	 * part stands for the poll.
	 */
	from = a->sched_at_ns > start_ns ? a->sched_at_ns - start_ns : 0;
	if (from >= dur_ns)
		return false;
	share = d_on + d_off ? (double)d_off / (double)(d_on + d_off) : 0;
	wait = (uint64_t)((double)(dur_ns - from) * share);
	if (wait > d_off)
		wait = d_off;
	cpu = dur_ns - from - wait < d_on ? dur_ns - from - wait : d_on;
	*out = (weft__poll_split_t){
		.from_ns = from, .to_ns = dur_ns, .cpu_ns = cpu, .wait_ns = wait
	};
	return true;
}

bool weft__collector_os_held_of(const worker_window_t *win, unsigned fill,
				const worker_window_t *born, uint64_t from_ns,
				uint64_t to_ns, const weft__sched_look_t *now,
				uint64_t *held_ns)
{
	const worker_window_t *a;
	uint64_t span, off;

	if (to_ns <= from_ns)
		return false;
	/* The newest sample read wholly before the interval; else the
	 * thread's birth (weft__collector_split_of()). */
	a = newest_sample_by(win, fill, from_ns);
	if (!a && born && born->sched_at_ns <= from_ns)
		a = born;
	/*
	 * And a look little past the interval: the thread's waits after it
	 * (on a loaded host, most of its time) would otherwise count as
	 * the interval's, and a worker parked through it, then slow to get
	 * a CPU, read as held by the OS (review of this change).  Waits are
	 * added to run_delay as they end: one going on now is not in it.
	 */
	if (!a || now->at_ns < to_ns ||
	    now->at_ns - to_ns > (to_ns - from_ns) / 2)
		return false;
	span = now->at_ns - a->sched_from_ns;
	off = now->off_ns > a->off_cpu_ns ? now->off_ns - a->off_cpu_ns : 0;
	if (2 * off < span)
		return false;
	*held_ns = off < to_ns - from_ns ? off : to_ns - from_ns;
	return true;
}

/*
 * Worker @worker's thread at its birth, as a sample in *@b: schedstat is
 * zero there, before every poll of the thread.  Only for a young thread
 * (a second before @at_ns): what a long life averages says nothing of
 * one poll's wait.  NULL otherwise (a poll that begins before the first
 * pass after a late attach has no sample before it).
 */
static const worker_window_t *born_sample(struct probe *p, uint16_t worker,
					  uint64_t at_ns, worker_window_t *b)
{
	uint64_t t = weft__runtime_worker_born(p->rt, worker);

	if (!t || at_ns >= t + 1000000000u)
		return NULL;
	*b = (worker_window_t){ .sched_from_ns = t,
				.sched_at_ns = t,
				.off_cpu_read = true };
	return b;
}

bool weft__collector_os_held(struct probe *p, uint16_t worker, uint64_t from_ns,
			     uint64_t to_ns, uint64_t *held_ns)
{
	worker_rec_t *k;
	weft__sched_look_t now;
	worker_window_t born;

	/* Its records, not the window's count: see sched_split below. */
	if (!weft__collector_os_rt(p) ||
	    worker >= weft_runtime_workers(p->rt) ||
	    !weft__collector_has_worker(p, worker) || to_ns <= from_ns)
		return false;
	k = &p->wk[worker];
	/* One look a pass a worker: a wave of delayed tasks asks often. */
	if (k->held_pass != p->passes + 1) {
		k->held_pass = p->passes + 1;
		k->held_read = sched_look(p, worker, false, &now);
		k->held_on = now.on_ns;
		k->held_off = now.off_ns;
		k->held_at = now.at_ns;
	}
	if (!k->held_read)
		return false;
	now = (weft__sched_look_t){ .on_ns = k->held_on,
				    .off_ns = k->held_off,
				    .at_ns = k->held_at };
	return weft__collector_os_held_of(k->window, p->window_fill,
					  born_sample(p, worker, from_ns,
						      &born),
					  from_ns, to_ns, &now, held_ns);
}

bool weft__collector_sched_split(struct probe *p, uint16_t worker,
				 uint64_t start_ns, uint64_t dur_ns,
				 bool running, weft__poll_split_t *out)
{
	weft__sched_look_t now;
	worker_window_t born;

	/*
	 * Its records, not the window's count of workers: a poll folded in
	 * before the first sample of a runtime (stats.workers 0) is split
	 * from its thread's birth.
	 */
	if (!weft__collector_os_rt(p) ||
	    worker >= weft_runtime_workers(p->rt) ||
	    !weft__collector_has_worker(p, worker) || !dur_ns ||
	    !sched_look(p, worker, running, &now))
		return false;
	return weft__collector_split_of(p->wk[worker].window, p->window_fill,
					born_sample(p, worker, start_ns, &born),
					start_ns, dur_ns, running, &now, out);
}

void weft__collector_sample_workers(struct probe *p, uint64_t now)
{
	weft_runtime_t *rt = p->rt;
	unsigned n, pos, old;
	double *rate, *per_s;

	if (!rt) {
		weft__collector_sched_close_all(p);
		p->stats.workers = 0;
		return;
	}
	n = weft_runtime_workers(rt);
	/* Without memory for all, the ones there is memory for. */
	if (weft__collector_workers_fit(p, n))
		n = p->nworker_slots;
	rate = n ? malloc(2 * n * sizeof(*rate)) : NULL;
	per_s = rate ? rate + n : NULL;
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
		worker_rec_t *k = &p->wk[i];
		worker_window_t *cur = &k->window[pos];
		worker_window_t *o = &k->window[old];
		double dt;
		uint64_t polls, task, started, unheard, since;

		weft_worker_metrics(rt, i, &cur->m);
		cur->sched_from_ns = weft_now_ns();
		cur->off_cpu_read = sched_read(p, rt, i, &cur->on_cpu_ns,
					       &cur->off_cpu_ns);
		cur->sched_at_ns = weft_now_ns();
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
		w->max_poll_ns = k->max_poll;
		w->events_dropped = k->drops;
		weft__collector_publish_steals(p, i);
		weft__runtime_worker_poll(rt, i, &task, &started);
		w->current_task = task;
		w->poll_started_ns = task ? weft__probe_clock_to_ns(started) :
					    0;
		/*
		 * A poll that began before anyone listened: not ours to
		 * time nor tell (the runtime monitor tells it), but the
		 * worker is in it, on that task (a console attached to a
		 * hung process shows where), once the monitor has seen it
		 * run past the threshold.
		 */
		w->state = task ? 0 : cur->m.parks > cur->m.unparks ? 2 : 1;
		if (!task &&
		    weft__runtime_worker_unheard(rt, i, &unheard, &since)) {
			w->current_task = unheard;
			w->poll_started_ns = since;
			w->state = 0;
		}
		if (task && w->poll_started_ns &&
		    now > w->poll_started_ns + p->config.long_poll_ns &&
		    k->yield_warned != started) {
			uint64_t so_far = now - w->poll_started_ns, own;
			char why[160], d[sizeof(why) + 64];
			const char *lock;
			uint64_t lock_since, lock_now;
			task_rec_t *t;

			if (k->look_started != started) {
				k->look_started = started;
				k->look_passes = 0;
			}
			k->look_passes++;
			own = weft__collector_poll_why(p, (uint16_t)i,
						       w->poll_started_ns,
						       started, so_far, why,
						       sizeof(why));
			lock = weft__runtime_worker_lock_waiting(rt, i,
								 &lock_since);
			lock_now = weft_now_ns();
			/*
			 * In the runtime's own work now (blocking.c), or
			 * done with some in this poll (its RT_WAITs folded
			 * in): that time is not the task's.  Its own part
			 * less it under the threshold, looked at again.
			 */
			{
				uint64_t in_rt = 0;

				if (k->rt_wait.task == task &&
				    k->rt_wait.first >= w->poll_started_ns)
					in_rt = k->rt_wait.ns;
				if (lock == weft__pool_lock_name) {
					if (lock_now > lock_since)
						in_rt += lock_now - lock_since;
					lock = NULL;
				}
				if (in_rt && weft__collector_own_less_rt(
						     own, so_far, in_rt) <
						     p->config.long_poll_ns)
					own = 0;
			}
			/*
			 * Blocked on a weft_mutex_t now, for half its own time
			 * or more: that is its wait (a lock just begun after a
			 * long read is not what blocked it: review).
			 */
			if (lock && lock_now > lock_since &&
			    2 * (lock_now - lock_since) >= own)
				snprintf(why, sizeof(why),
					 ": waiting for lock \"%s\" (a "
					 "weft_mutex_t another thread holds)",
					 lock);
			/*
			 * Its own part under the threshold so far: looked
			 * at again (weft__collector_by_os()).  So is a poll
			 * whose split is not known yet (no usable sample:
			 * a runtime just described, a pass late under
			 * load): its time is not yet the task's to be
			 * blamed for, until four thresholds in and a third
			 * pass looking at it (a system without schedstat
			 * never has a split).  From the second, the first
			 * one's sample, read within the poll, gives one
			 * where schedstat can be read.  On time alone, a
			 * collector held off its CPU at load 20 blamed 4 ms
			 * computations 56 to 394 ms into them, nothing
			 * known of where their time went.
			 */
			if (!why[0] && (so_far < 4 * p->config.long_poll_ns ||
					k->look_passes < 3))
				own = 0;
			t = own >= p->config.long_poll_ns ?
				    weft__collector_task_get(p, task, now) :
				    NULL;
			snprintf(d, sizeof(d),
				 "still in one poll after %.1f ms: worker %u "
				 "is blocked%s",
				 (double)so_far / 1e6, i,
				 why[0] ? why :
					  " (how long the OS held it off a "
					  "CPU is not known)");
			if (t) {
				k->yield_warned = started;
				weft__collector_warn_task(
					p, WEFT_WARN_NEVER_YIELDED, t,
					(uint16_t)i, w->poll_started_ns,
					so_far, d);
			}
		}
		if (rate) {
			rate[i] = w->steal_rate;
			per_s[i] = w->steals_per_s;
		}
	}
	/* No storms told without the memory to compare the workers. */
	for (unsigned i = 0; rate && i < n && n > 1; i++) {
		weft_probe_worker_t *w = &p->workers[i];
		worker_rec_t *k = &p->wk[i];
		bool storm = weft__probe_steal_storm(rate, per_s, n, i);

		/*
		 * Every burst counted; the text at most every 5 s, but at a
		 * flush (a recorder's stop, at exit) the bursts not yet said
		 * are said now, or they would be lost with the process.
		 */
		if (storm && !k->in_storm)
			k->storm_bursts++;
		k->in_storm = storm;
		if (!k->storm_bursts || (now <= k->storm_warned + 5000000000u &&
					 !p->flush_requested))
			continue;
		warn_storm(p, w, i, n, rate, now);
	}
	free(rate);
	if (!p->oversub_warned) {
		static long cpus;
		unsigned all = 0;

		/*
		 * Every runtime's workers, each pass until said (an outside
		 * audit: two runtimes of four said "4 workers", and two of
		 * two nothing, the second made after the first pass).
		 */
		if (!cpus)
			cpus = sysconf(_SC_NPROCESSORS_ONLN);
		for (size_t r = 0; r < p->nattached; r++)
			all += weft_runtime_workers(p->runtimes[r]);
		if (all < n)
			all = n;
		p->oversub_warned = cpus > 0 && all > (unsigned)cpus;
		if (p->oversub_warned)
			weft__collector_warn(
				p, WEFT_WARN_OVERSUBSCRIBED, NULL,
				WEFT_EVENT_NO_WORKER, now, 0,
				"%u workers on %ld CPUs%s: expect lower "
				"throughput",
				all, cpus,
				p->nattached > 1 ? " (all runtimes)" : "");
	}
	p->window_pos = (pos + 1) % WINDOW;
	if (p->window_fill < WINDOW)
		p->window_fill++;
}
