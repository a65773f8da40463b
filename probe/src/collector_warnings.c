/* SPDX-License-Identifier: MIT */
/*
 * The collector's warnings: the ring of the last WARN_KEEP raised (taken
 * by publish(), collector.c) and the lost-waker check of idle tasks.  The
 * warnings an event or a worker's sample raises are raised where it is
 * folded in (collector_events.c, collector_workers.c).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "collector_internal.h"

void weft__collector_warn(struct probe *p, uint8_t kind, const task_rec_t *t,
			  uint16_t worker, uint64_t at, uint64_t value,
			  const char *fmt, ...)
{
	weft_probe_warning_t *w = &p->warnings[p->warn_seq % WARN_KEEP];
	va_list ap;

	memset(w, 0, sizeof(*w));
	if (kind < WEFT_WARN_MAX)
		p->warn_kind_count[kind]++;
	w->seq = ++p->warn_seq;
	w->kind = kind;
	w->worker = worker;
	w->at_ns = at;
	w->value_ns = value;
	if (t) {
		w->task = t->pub.id;
		w->task_name = t->pub.name;
		w->file = t->pub.file;
		w->line = t->pub.line;
	}
	va_start(ap, fmt);
	vsnprintf(w->detail, sizeof(w->detail), fmt, ap);
	va_end(ap);
}

/*
 * The split's parts as whole percents: waiting for a CPU, of the whole
 * stretch; on a CPU and asleep in the kernel, of the rest (the task's
 * own time), so that a poll computing on a shared CPU still reads as
 * computing.
 */
static void split_percents(const weft__poll_split_t *sp, unsigned *wait,
			   unsigned *cpu, unsigned *sleep)
{
	double span = (double)(sp->to_ns - sp->from_ns);
	double w = (double)sp->wait_ns / span, c = (double)sp->cpu_ns / span;

	if (w > 1)
		w = 1;
	if (c > 1 - w)
		c = 1 - w;
	*wait = (unsigned)(w * 100 + 0.5);
	*cpu = w < 1 ? (unsigned)(c / (1 - w) * 100 + 0.5) : 0;
	*sleep = 100 - *cpu;
}

/*
 * The split read over a stretch of the poll stands for the whole poll
 * when it covers a fair part of it: a quarter, or 1 ms (the monitor
 * begins reading at the stall threshold, and its looks come late when
 * the CPUs are busy).
 */
static bool split_usable(const weft__poll_split_t *sp, uint64_t dur_ns)
{
	uint64_t span = sp->to_ns > sp->from_ns ? sp->to_ns - sp->from_ns : 0;

	return span >= 1000000 || (span && span * 4 >= dur_ns);
}

static uint64_t poll_why(const weft__poll_split_t *sp, uint64_t dur_ns,
			 char *why, size_t len)
{
	unsigned wait, cpu, sleep;

	why[0] = '\0';
	if (!sp || !split_usable(sp, dur_ns))
		return dur_ns;
	split_percents(sp, &wait, &cpu, &sleep);
	if (wait >= 100)
		snprintf(why, len, ":");
	else if (cpu >= 60)
		snprintf(why, len,
			 ": computing on a CPU, no await (%u%% of its own "
			 "time)",
			 cpu);
	else if (sleep >= 60)
		snprintf(why, len,
			 ": asleep in the kernel %u%% of its own time "
			 "(a blocking call)",
			 sleep);
	else
		snprintf(why, len,
			 ": on a CPU %u%%, asleep %u%% of its own time", cpu,
			 sleep);
	if (wait >= 20) {
		size_t n = strlen(why);

		snprintf(why + n, len - n,
			 "%s the OS held it off a CPU %u%% of the poll",
			 wait >= 100 ? "" : ";", wait);
	}
	return (uint64_t)((double)dur_ns * (100 - wait) / 100.0);
}

uint64_t weft__collector_poll_why(struct probe *p, uint16_t worker,
				  uint64_t start_ns, uint64_t raw_start,
				  uint64_t dur_ns, char *why, size_t len)
{
	weft__poll_split_t sp[WEFT__POLL_SPLITS], est;
	const weft__poll_split_t *found = NULL;
	unsigned n = 0;

	weft_runtime_t *rt = weft__collector_os_rt(p);

	if (rt && worker < weft_runtime_workers(rt))
		n = weft__runtime_poll_splits(rt, worker, sp);
	for (unsigned k = 0; k < n && !found; k++) {
		uint64_t s;

		if (!sp[k].start)
			continue;
		if (raw_start) {
			found = sp[k].start == raw_start ? &sp[k] : NULL;
			continue;
		}
		/*
		 * Matched on the start, to 50 us: polls on one worker follow
		 * each other, and a long one's start has no other poll's
		 * start that close but a short one's before it, which the
		 * monitor never reads.
		 */
		s = weft__probe_clock_to_ns(sp[k].start);
		if (s > start_ns ? s - start_ns <= 50000 :
				   start_ns - s <= 50000)
			found = &sp[k];
	}
	/*
	 * The monitor's reading, where it covers half the poll or more;
	 * else the worker's schedstat around the whole poll (the monitor
	 * runs at nice 19: on a crowded host its looks come late and
	 * few, and two looks a millisecond apart in which the thread
	 * happened to wait are no measure of a 150 ms poll); else what
	 * the monitor has.
	 */
	if ((!found || (found->to_ns - found->from_ns) * 2 < dur_ns) &&
	    weft__collector_sched_split(p, worker, start_ns, dur_ns,
					raw_start != 0, &est))
		found = &est;
	return poll_why(found, dur_ns, why, len);
}

static void preempted_held(struct probe *p, uint16_t worker, uint64_t at,
			   uint64_t value);

bool weft__collector_delay_by_os(struct probe *p, uint16_t worker,
				 uint64_t from_ns, uint64_t delay_ns)
{
	uint64_t held, *last;

	if (!weft__collector_has_worker(p, worker) ||
	    !weft__collector_os_held(p, worker, from_ns, from_ns + delay_ns,
				     &held))
		return false;
	last = &p->wk[worker].preempt_warned;
	if (*last && from_ns < *last + 1000000000u) {
		preempted_held(p, worker, from_ns, delay_ns);
		return true;
	}
	*last = from_ns ? from_ns : 1;
	weft__collector_warn(
		p, WEFT_WARN_PREEMPTED, NULL, worker, from_ns, delay_ns,
		"the OS kept worker %u off a CPU %.1f ms while a task waited "
		"%.1f ms for it (other threads, or a CPU quota)",
		worker, (double)held / 1e6, (double)delay_ns / 1e6);
	return true;
}

void weft__collector_warn_preempted(struct probe *p, uint16_t worker,
				    uint64_t start_ns, uint64_t dur_ns,
				    uint64_t own_ns)
{
	uint64_t *last = weft__collector_has_worker(p, worker) ?
				 &p->wk[worker].preempt_warned :
				 NULL;

	if (last && *last && start_ns < *last + 1000000000u) {
		preempted_held(p, worker, start_ns, dur_ns - own_ns);
		return;
	}
	if (last)
		*last = start_ns ? start_ns : 1;
	weft__collector_warn(
		p, WEFT_WARN_PREEMPTED, NULL, worker, start_ns, dur_ns - own_ns,
		"the OS kept worker %u off a CPU %.1f ms of a %.1f ms poll "
		"(other threads, or a CPU quota); the task's own %.1f ms is "
		"under the threshold",
		worker, (double)(dur_ns - own_ns) / 1e6, (double)dur_ns / 1e6,
		(double)own_ns / 1e6);
}

void weft__collector_warn_rt_wait(struct probe *p, uint16_t worker,
				  uint64_t start_ns, uint64_t dur_ns,
				  uint64_t own_ns, uint64_t rt_ns, uint32_t what)
{
	uint64_t *last = weft__collector_has_worker(p, worker) ?
				 &p->wk[worker].preempt_warned :
				 NULL;

	(void)what; /* the pool's lock is the one told so far */
	if (last && *last && start_ns < *last + 1000000000u) {
		preempted_held(p, worker, start_ns, rt_ns);
		return;
	}
	if (last)
		*last = start_ns ? start_ns : 1;
	weft__collector_warn(
		p, WEFT_WARN_PREEMPTED, NULL, worker, start_ns, rt_ns,
		"worker %u spent %.1f ms of a %.1f ms poll in the runtime's "
		"blocking-pool submission (its lock or condvar held by a pool "
		"thread the OS kept off a CPU, or a thread's start); the "
		"task's own %.1f ms is under the threshold",
		worker, (double)rt_ns / 1e6, (double)dur_ns / 1e6,
		(double)own_ns / 1e6);
}

/*
 * Floods, folded.  A wave that woke 20,000 tasks raised a scheduling
 * delay for each, and a service whose every handler blocks a long poll
 * per request: rows by the thousand, one a victim, that pushed the one
 * naming the cause out of the kept warnings.  So a task's warning is
 * keyed by its kind and the task's spawn site: the first FOLD_FREE of a
 * FOLD_WINDOW_NS window are rows as ever, the rest are counted, and one
 * row says them when the window closes ("1,997 more from tasks spawned
 * at X, 312.4 ms each on average"; its count field 1,997).  Nothing is
 * lost: what a fold counted is said also when the window has not closed
 * but the subscribers must have it now (a flush, which a recorder makes
 * at its stop, at exit) or nobody will hear of it later (the collector's
 * stop), and the header counts every warning, not the rows
 * (stats.warnings).  A rate limit of a task's or a worker's own (one
 * long-poll row a second a task) counts what it holds back in the same
 * fold.
 */
#define FOLD_FREE 5
#define FOLD_WINDOW_NS 1000000000ull

/*
 * The row that says what a fold counted so far; the count starts over
 * and the window goes on (a flush says a fold in the middle of a flood:
 * the rest of the flood is still folded).
 */
static void fold_tell(struct probe *p, struct fold_s *f)
{
	weft_probe_warning_t *w;
	double avg = f->folded ? (double)f->value_sum / (double)f->folded : 0;

	if (!f->folded)
		return;
	if (f->kind == WEFT_WARN_PREEMPTED && !f->file && !f->name)
		weft__collector_warn(
			p, f->kind, NULL, f->worker, f->last_at, (uint64_t)avg,
			"%llu more on worker %u: the OS kept it off a CPU "
			"%.1f ms each on average (folded)",
			(unsigned long long)f->folded, f->line, avg / 1e6);
	else if (f->file && f->file[0])
		weft__collector_warn(
			p, f->kind, NULL, f->worker, f->last_at, (uint64_t)avg,
			"%llu more from tasks spawned at %s:%u, %.1f ms each "
			"on average (folded)",
			(unsigned long long)f->folded, weft__base_name(f->file),
			f->line, avg / 1e6);
	else
		weft__collector_warn(
			p, f->kind, NULL, f->worker, f->last_at, (uint64_t)avg,
			"%llu more from tasks named %s, %.1f ms each on "
			"average (folded)",
			(unsigned long long)f->folded,
			f->name ? f->name : "(none)", avg / 1e6);
	/* The row says warnings counted as they were folded. */
	if (f->kind < WEFT_WARN_MAX)
		p->warn_kind_count[f->kind]--;
	w = &p->warnings[(p->warn_seq - 1) % WARN_KEEP];
	w->count = f->folded;
	if (f->file || f->name) {
		w->task = f->last_task;
		w->task_name = f->name;
		w->file = f->file;
		w->line = f->line;
	}
	p->folded_total += f->folded;
	f->folded = f->value_sum = 0;
}

/* The row that says a fold's warnings; the fold starts over. */
static void fold_say(struct probe *p, struct fold_s *f)
{
	fold_tell(p, f);
	f->raised = 0;
}

/*
 * The fold of @kind for tasks spawned at @file:@line named @name, at @at:
 * found, or a slot made (the stalest).
 */
static struct fold_s *fold_of(struct probe *p, uint8_t kind, const char *name,
			      const char *file, uint32_t line, uint64_t at)
{
	struct fold_s *f, *stale = &p->folds[0];

	for (unsigned i = 0; i < FOLD_SLOTS; i++) {
		f = &p->folds[i];
		/* Names by value: one static name may be two pointers
		 * (two objects' copies of a string literal). */
		if (f->kind == kind && f->line == line && f->file == file &&
		    (f->name == name ||
		     (f->name && name && !strcmp(f->name, name))))
			return f;
		if (f->window_start < stale->window_start)
			stale = &p->folds[i];
	}
	fold_say(p, stale);
	*stale = (struct fold_s){ .kind = kind,
				  .name = name,
				  .file = file,
				  .line = line,
				  .window_start = at };
	return stale;
}

/* A warning its fold counts, no row of its own. */
static void fold_count(struct probe *p, struct fold_s *f, uint8_t kind,
		       uint64_t task, uint16_t worker, uint64_t at,
		       uint64_t value)
{
	f->folded++;
	if (kind < WEFT_WARN_MAX)
		p->warn_kind_count[kind]++;
	f->value_sum += value;
	f->last_at = at;
	f->last_task = task;
	f->worker = worker;
}

/* Its window closed by @at: said, and one begins at @at. */
static void fold_window(struct probe *p, struct fold_s *f, uint64_t at)
{
	if (at > f->window_start + FOLD_WINDOW_NS) {
		fold_say(p, f);
		f->window_start = at;
	}
}

/*
 * A warning of @kind about task @task (spawned at @file:@line, named
 * @name): true where it is a row of its own, false where its fold counts
 * it instead.
 */
static bool fold_row(struct probe *p, uint8_t kind, const char *name,
		     const char *file, uint32_t line, uint64_t task,
		     uint16_t worker, uint64_t at, uint64_t value)
{
	struct fold_s *f = fold_of(p, kind, name, file, line, at);

	fold_window(p, f, at);
	if (f->raised < FOLD_FREE) {
		f->raised++;
		return true;
	}
	fold_count(p, f, kind, task, worker, at, value);
	return false;
}

void weft__collector_fold_flush(struct probe *p, uint64_t now, bool all)
{
	for (unsigned i = 0; i < FOLD_SLOTS; i++) {
		struct fold_s *f = &p->folds[i];

		if (!f->kind)
			continue;
		if (now > f->window_start + FOLD_WINDOW_NS &&
		    (f->folded || f->raised)) {
			fold_say(p, f);
			f->window_start = now;
		} else if (all) {
			fold_tell(p, f);
		}
	}
}

void weft__collector_fold_stop(struct probe *p)
{
	for (unsigned i = 0; i < FOLD_SLOTS; i++)
		if (p->folds[i].kind)
			fold_tell(p, &p->folds[i]);
	memset(p->folds, 0, sizeof(p->folds));
}

uint64_t weft__collector_warnings_total(const struct probe *p)
{
	uint64_t n = 0;

	for (unsigned k = 0; k < WEFT_WARN_MAX; k++)
		n += p->warn_kind_count[k];
	return n;
}

bool weft__collector_said(const struct probe *p, uint8_t kind, uint64_t task,
			  const char *detail, size_t n, uint64_t start)
{
	size_t k = p->warn_seq < WARN_KEEP ? (size_t)p->warn_seq : WARN_KEEP;

	for (size_t i = 1; i <= k; i++) {
		const weft_probe_warning_t *w =
			&p->warnings[(p->warn_seq - i) % WARN_KEEP];
		uint64_t from = w->at_ns - w->value_ns;

		if (w->kind == kind && w->task == task &&
		    (!n || !strncmp(w->detail, detail, n)) &&
		    (!start ||
		     (from + 1000000u >= start && from <= start + 1000000u)))
			return true;
	}
	return false;
}

void weft__collector_said_again(struct probe *p, uint8_t kind, task_rec_t *t)
{
	t->pub.warnings |= 1u << kind;
	weft__collector_task_changed(p, t);
}

void weft__collector_warn_task_held(struct probe *p, uint8_t kind,
				    task_rec_t *t, uint16_t worker, uint64_t at,
				    uint64_t value)
{
	struct fold_s *f =
		fold_of(p, kind, t->pub.name, t->pub.file, t->pub.line, at);

	t->pub.warnings |= 1u << kind;
	weft__collector_task_changed(p, t);
	fold_window(p, f, at);
	fold_count(p, f, kind, t->pub.id, worker, at, value);
}

/*
 * A worker's PREEMPTED past its rate limit (one a second a worker):
 * counted in a fold of the worker's (no site, its number for a line),
 * said as "N more on worker W".
 */
static void preempted_held(struct probe *p, uint16_t worker, uint64_t at,
			   uint64_t value)
{
	struct fold_s *f =
		fold_of(p, WEFT_WARN_PREEMPTED, NULL, NULL, worker, at);

	fold_window(p, f, at);
	fold_count(p, f, WEFT_WARN_PREEMPTED, 0, worker, at, value);
}

bool weft__collector_warn_task_row(struct probe *p, uint8_t kind,
				   task_rec_t *t, uint16_t worker, uint64_t at,
				   uint64_t value)
{
	t->pub.warnings |= 1u << kind;
	weft__collector_task_changed(p, t);
	return fold_row(p, kind, t->pub.name, t->pub.file, t->pub.line,
			t->pub.id, worker, at, value);
}

void weft__collector_warn_task(struct probe *p, uint8_t kind, task_rec_t *t,
			       uint16_t worker, uint64_t at, uint64_t value,
			       const char *detail)
{
	if (weft__collector_warn_task_row(p, kind, t, worker, at, value))
		weft__collector_warn(p, kind, t, worker, at, value, "%s",
				     detail);
}

bool weft__probe_monitor_long_poll(const weft__task_info_t *t, uint16_t worker,
				   uint64_t start_ns, uint64_t dur_ns,
				   bool ended, const weft__poll_split_t *split,
				   const char *lock, uint64_t lock_ns)
{
	struct probe *p = &weft__probe;
	weft_probe_warning_t *w;
	char why[160];
	uint64_t own;
	uint32_t line;
	uint8_t kind;

	/*
	 * Never waits for the collector's pass (it may hold the lock a
	 * long while: a first full update): the monitor looks again.
	 */
	if (pthread_mutex_trylock(&p->lock))
		return false;
	own = poll_why(split, dur_ns, why, sizeof(why));
	/*
	 * Blocked on a weft_mutex_t for half its own time or more: that is
	 * its wait, said as the collector says it (collector_workers.c),
	 * not "a blocking call" (an outside tester's mutex program, a
	 * console attached late).
	 */
	if (lock && 2 * lock_ns >= own)
		snprintf(why, sizeof(why),
			 ": waiting for lock \"%s\" (a weft_mutex_t another "
			 "thread holds)",
			 lock);
	if (ended && weft__collector_by_os(p, own, dur_ns)) {
		weft__collector_warn_preempted(p, worker, start_ns, dur_ns, own);
		pthread_mutex_unlock(&p->lock);
		return true;
	}
	/*
	 * An ended poll's own part under the threshold is still said, where
	 * the collector's on_poll() says nothing: the monitor's length is a
	 * lower bound (first look to last), and so is its own part.
	 */
	/*
	 * Still running with nothing known of where its time went (the
	 * monitor publishes a split from its second look past the stall
	 * threshold on; a starved monitor's looks come late): looked at
	 * again, as the collector does (weft__collector_sample_workers()),
	 * until four thresholds in.  Told at once, a 1 ms poll the OS
	 * stretched to 16 ms was blamed for never yielding, at load 8.
	 */
	if (!ended && (own < p->config.long_poll_ns ||
		       (!why[0] && dur_ns < 4 * p->config.long_poll_ns))) {
		pthread_mutex_unlock(&p->lock);
		return false;
	}
	/* Folded as the collector's are: a service whose every handler
	 * blocks is one row a spawn site, not one a request. */
	kind = ended ? WEFT_WARN_LONG_POLL : WEFT_WARN_NEVER_YIELDED;
	line = t->line > 0 ? (uint32_t)t->line : 0;
	if (!fold_row(p, kind, t->name, t->file, line, t->id, worker,
		      start_ns, dur_ns)) {
		pthread_mutex_unlock(&p->lock);
		return true;
	}
	weft__collector_warn(p, kind, NULL, worker, start_ns, dur_ns,
			     ended ? "one poll ran at least %.1f ms and "
				     "blocked worker %u (seen by the runtime "
				     "monitor)%s"
				   : "still in one poll after at least %.1f ms: "
				     "worker %u is blocked (seen by the "
				     "runtime monitor)%s",
			     (double)dur_ns / 1e6, worker, why);
	w = &p->warnings[(p->warn_seq - 1) % WARN_KEEP];
	w->task = t->id;
	w->task_name = t->name;
	w->file = t->file;
	w->line = line;
	weft__collector_mark_task(p, kind, t->id);
	pthread_mutex_unlock(&p->lock);
	return true;
}

bool weft__probe_unheard_lock_held(const weft__task_info_t *t,
				   uint16_t worker, const char *lock,
				   const char *file, int line, uint64_t at_ns,
				   uint64_t held_ns, uint32_t blocked)
{
	struct probe *p = &weft__probe;
	weft_probe_warning_t *w;
	uint32_t tline = t->line > 0 ? (uint32_t)t->line : 0;

	if (pthread_mutex_trylock(&p->lock))
		return false;
	if (fold_row(p, WEFT_WARN_LOCK_HELD_ACROSS_AWAIT, t->name, t->file,
		     tline, t->id, worker, at_ns, held_ns)) {
		weft__collector_warn(p, WEFT_WARN_LOCK_HELD_ACROSS_AWAIT, NULL,
				     worker, at_ns, held_ns,
				     "held lock \"%s\" (taken at %s:%d) across "
				     "an await: held %.2f ms; %u tasks or "
				     "threads blocked on it meanwhile (nobody "
				     "listening)",
				     lock ? lock : "?",
				     file ? weft__base_name(file) : "?", line,
				     (double)held_ns / 1e6, blocked);
		w = &p->warnings[(p->warn_seq - 1) % WARN_KEEP];
		w->task = t->id;
		w->task_name = t->name;
		w->file = t->file;
		w->line = tline;
		weft__collector_mark_task(p, WEFT_WARN_LOCK_HELD_ACROSS_AWAIT,
					  t->id);
	}
	pthread_mutex_unlock(&p->lock);
	return true;
}

void weft__collector_seed_across(struct probe *p,
				 const weft__lock_wait_info_t *w, uint64_t now)
{
	task_rec_t *t = weft__collector_task_find(p, w->holder);
	uint64_t held = w->holder_since_ns && w->holder_since_ns < now ?
				now - w->holder_since_ns :
				0;
	char d[160];
	int n;

	n = snprintf(d, sizeof(d), "held lock \"%s\" across an await, ",
		     w->name ? w->name : "?");
	if (n < 0 || (size_t)n >= sizeof(d))
		return;
	/*
	 * Once a hold (its other waiters, the next listener): the same
	 * lock's name, holder and start, so that a later hold of it, or
	 * another lock of the same name, is said.
	 */
	if (weft__collector_said(p, WEFT_WARN_LOCK_HELD_ACROSS_AWAIT, w->holder,
				 d, (size_t)n, now - held)) {
		if (t)
			weft__collector_said_again(
				p, WEFT_WARN_LOCK_HELD_ACROSS_AWAIT, t);
		return;
	}
	snprintf(d + n, sizeof(d) - (size_t)n,
		 "%.2f ms so far, still held (since before anyone listened)",
		 (double)held / 1e6);
	if (t) {
		weft__collector_warn_task(p, WEFT_WARN_LOCK_HELD_ACROSS_AWAIT,
					  t, WEFT_EVENT_NO_WORKER, now, held,
					  d);
		return;
	}
	weft__collector_warn(p, WEFT_WARN_LOCK_HELD_ACROSS_AWAIT, NULL,
			     WEFT_EVENT_NO_WORKER, now, held, "%s", d);
	p->warnings[(p->warn_seq - 1) % WARN_KEEP].task = w->holder;
}

/* The warning of a lock held across an await, said once. */
static void lock_warn(struct probe *p, struct lock_hold_s *h, uint64_t at,
		      uint64_t held, bool released, uint32_t blocked)
{
	task_rec_t *t = weft__collector_task_find(p, h->task);
	char site[96], d[256];

	if (h->line)
		snprintf(site, sizeof(site), "%s:%u",
			 h->file ? weft__base_name(h->file) : "?", h->line);
	else
		snprintf(site, sizeof(site), "%s",
			 h->file ? weft__base_name(h->file) : "?");
	if (released)
		snprintf(d, sizeof(d),
			 "held lock \"%s\" (taken at %s) across an await: "
			 "held %.2f ms; %u tasks or threads blocked on it "
			 "meanwhile",
			 h->name ? h->name : "?", site, (double)held / 1e6,
			 blocked);
	else if (h->line)
		snprintf(d, sizeof(d),
			 "held lock \"%s\" (taken at %s) across an await, "
			 "%.2f ms so far, still held",
			 h->name ? h->name : "?", site, (double)held / 1e6);
	else
		snprintf(d, sizeof(d),
			 "held lock \"%s\" (taken at %s) across an await, "
			 "%.2f ms so far",
			 h->name ? h->name : "?", site, (double)held / 1e6);
	if (t)
		weft__collector_warn_task(p, WEFT_WARN_LOCK_HELD_ACROSS_AWAIT,
					  t, h->worker, at, held, d);
	else
		weft__collector_warn(p, WEFT_WARN_LOCK_HELD_ACROSS_AWAIT, NULL,
				     h->worker, at, held, "%s", d);
	h->task = 0;
}

void weft__collector_lock_heard(struct probe *p, const weft_event_t *ev)
{
	struct lock_pending *slot = NULL;

	/*
	 * A slot of the same task first (a site lost to a drop leaves its
	 * pending behind), then a free one, else the oldest: one slot per
	 * ring at most is in use at a pass's end, LOCK_PENDS past any
	 * runtime but a large one's every worker preempted at once.
	 */
	for (unsigned i = 0; i < LOCK_PENDS; i++) {
		struct lock_pending *lp = &p->lock_pends[i];

		if (lp->task == ev->task) {
			slot = lp;
			break;
		}
		if (!slot || (slot->task && (!lp->task || lp->at < slot->at)))
			slot = lp;
	}
	*slot = (struct lock_pending){ .task = ev->task,
				       .name = (const char *)(uintptr_t)ev->a1,
				       .held_ns = (uint64_t)ev->a2 * 1000u,
				       .at = ev->ts,
				       .worker = ev->worker };
}

void weft__collector_lock_site(struct probe *p, const weft_event_t *ev)
{
	const char *file = (const char *)(uintptr_t)ev->a1;
	uint32_t line = ev->a2;
	struct lock_hold_s *free_slot = NULL, *oldest = NULL, h;
	struct lock_pending *lp = NULL;

	for (unsigned i = 0; i < LOCK_PENDS && !lp; i++)
		if (ev->task && p->lock_pends[i].task == ev->task)
			lp = &p->lock_pends[i];
	if (!lp)
		return;
	/* The hold, whatever becomes of it below; its pending is taken. */
	h = (struct lock_hold_s){ .task = lp->task,
				  .name = lp->name,
				  .file = file,
				  .line = line,
				  .worker = lp->worker,
				  .at = lp->at,
				  .held_ns = lp->held_ns };
	lp->task = 0;
	/*
	 * No line: a raw pthread mutex (the LD_PRELOAD shim), whose
	 * release is never told.  Said now, as far as it is known.
	 */
	if (!line) {
		lock_warn(p, &h, h.at, h.held_ns, false, 0);
		return;
	}
	/* Released already: said now, as its release would have. */
	for (unsigned i = 0; i < LOCK_EARLY; i++) {
		struct lock_early *e = &p->lock_early[i];

		if (e->task != h.task || e->name != h.name ||
		    e->at + LOCK_EARLY_SLACK_NS < h.at)
			continue;
		lock_warn(p, &h, e->at,
			  (e->at > h.at ? e->at - h.at : 0) + h.held_ns, true,
			  e->blocked);
		e->task = 0;
		return;
	}
	for (unsigned i = 0; i < LOCK_HOLDS; i++) {
		struct lock_hold_s *k = &p->lock_holds[i];

		/* Pending again in the same hold: the first said when. */
		if (k->task == h.task && k->name == h.name)
			return;
		if (!k->task && !free_slot)
			free_slot = k;
		if (k->task && (!oldest || k->at < oldest->at))
			oldest = k;
	}
	if (!free_slot) {
		/* Full: the oldest is said now, as far as it is known. */
		lock_warn(p, oldest, h.at, h.at - oldest->at + oldest->held_ns,
			  false, 0);
		free_slot = oldest;
	}
	*free_slot = h;
}

void weft__collector_lock_released(struct probe *p, const weft_event_t *ev)
{
	const char *name = (const char *)(uintptr_t)ev->a1;

	for (unsigned i = 0; i < LOCK_HOLDS; i++) {
		struct lock_hold_s *h = &p->lock_holds[i];

		if (h->task != ev->task || h->name != name)
			continue;
		lock_warn(p, h, ev->ts,
			  (ev->ts > h->at ? ev->ts - h->at : 0) + h->held_ns,
			  true, ev->a2);
		/*
		 * Pending again in this hold, its site not read yet: it
		 * must not make a hold of its own, released as it is.
		 */
		for (unsigned k = 0; k < LOCK_PENDS; k++) {
			struct lock_pending *lp = &p->lock_pends[k];

			if (lp->task == ev->task && lp->name == name &&
			    lp->at <= ev->ts)
				lp->task = 0;
		}
		return;
	}
	/* No hold: its site is yet to come (weft__collector_lock_site()). */
	if (ev->task)
		p->lock_early[p->lock_early_next++ % LOCK_EARLY] =
			(struct lock_early){ .task = ev->task,
					     .name = name,
					     .at = ev->ts,
					     .blocked = ev->a2 };
}

/*
 * Held a second on and not yet released: said now, "still held".  Not
 * across drops: its release may be what was dropped, and "still held"
 * of a lock released long before is a wrong warning, where a missed one
 * is only missed (as the lost-waker check and a wait's are).
 */
void weft__collector_lock_check(struct probe *p, uint64_t now)
{
	for (unsigned i = 0; i < LOCK_HOLDS; i++) {
		struct lock_hold_s *h = &p->lock_holds[i];

		if (!h->task || now <= h->at + 1000000000ull)
			continue;
		if (weft__collector_across_drops(p, h->at, now)) {
			h->task = 0;
			p->drops_suppressed++;
			continue;
		}
		lock_warn(p, h, now, now - h->at + h->held_ns, false, 0);
	}
}

/* Finished tasks are never idle: only the live list needs a look. */
void weft__collector_check_idle_tasks(struct probe *p, uint64_t now)
{
	for (task_rec_t *t = p->live; t; t = t->lnext) {
		if (t->pub.state != WEFT_TASK_IDLE || !t->seen_spawn ||
		    t->outstanding > 0 || t->wakers_unsure ||
		    t->pub.polls == 0 ||
		    (t->once & (1u << WEFT_WARN_LOST_WAKER)))
			continue;
		/*
		 * Seen so by two checks a second apart (a clone told on a
		 * ring read after the drop's, in one pass's snapshot, has come
		 * by the second); at a flush, by two checks of two passes,
		 * the task idle 200 ms: a task lost just before its process
		 * stopped (a destroy, an exit) was never said.  The first
		 * sighting is never enough (review of this change).
		 */
		if (!t->lost_check_at) {
			t->lost_check_at = now;
			continue;
		}
		if (now < t->lost_check_at + 1000000000u &&
		    !(p->flush_requested && now > t->idle_since + 200000000u))
			continue;
		if (weft__collector_across_drops(p, t->pub.spawned_ns, now)) {
			/* A waker's clone may be what was dropped. */
			t->once |= 1u << WEFT_WARN_LOST_WAKER;
			p->drops_suppressed++;
			continue;
		}
		t->once |= 1u << WEFT_WARN_LOST_WAKER;
		if (weft__collector_said(p, WEFT_WARN_LOST_WAKER, t->pub.id,
					 NULL, 0, 0)) {
			weft__collector_said_again(p, WEFT_WARN_LOST_WAKER, t);
			continue;
		}
		weft__collector_warn_task(
			p, WEFT_WARN_LOST_WAKER, t, t->pub.last_worker, now,
			now - t->idle_since,
			"pending with no waker left: it will never be "
			"polled again");
	}
}

/* ------------------------------------- task leaks and wake bursts */

/*
 * A spawn site whose live tasks keep growing and stay pending
 * (collector_leak.c decides; this says it).  Its own pace, not a fold's:
 * once, then again after a pause that doubles while it goes on.  The
 * warning names the oldest task; its file and line are the site's.  An
 * oldest whose SPAWN was not seen (live before the probe listened: the
 * runtime keeps no spawn time, issue 21's small idle tasks have no room
 * for one) is aged from when the probe first heard of it: "oldest over
 * 3.9 s", a lower bound (the detail's 160 bytes leave room for no more),
 * and no value (a figure shown bare, the console's VALUE, would be read
 * as the age).
 */
void weft__collector_warn_leak(struct probe *p, const struct leak_said *l)
{
	weft_probe_warning_t *w;
	char parked[96] = "", site[96] = "";

	/*
	 * The oldest task is the warning's task (its column in a row), the
	 * site its file:line; the text says the site too (an audit read
	 * rows with no place in them).  In the order a reader needs them,
	 * the age before where they are parked: a long text is cut at the
	 * detail's 159 characters, and the age is told nowhere else when it
	 * is a lower bound (value 0).  The parked site is its line alone
	 * when in the site's own file.
	 */
	if (l->file)
		snprintf(site, sizeof(site), " from %s:%u",
			 weft__base_name(l->file), l->line);
	else if (l->name)
		snprintf(site, sizeof(site), " named %s", l->name);
	if (l->parked_file && l->file && !strcmp(l->parked_file, l->file))
		snprintf(parked, sizeof(parked), ", %u parked at line %u",
			 l->parked_n, l->parked_line);
	else if (l->parked_file)
		snprintf(parked, sizeof(parked), ", %u parked at %s:%u",
			 l->parked_n, weft__base_name(l->parked_file),
			 l->parked_line);
	weft__collector_warn(
		p, WEFT_WARN_TASK_LEAK, NULL, WEFT_EVENT_NO_WORKER, l->at,
		l->oldest_unseen ? 0 : l->oldest_age_ns,
		"%s: %u live%s (+%.0f/s in %.1f s); oldest %s%.1f s; %u "
		"pending since their first poll%s",
		l->said_live ? "still leaking" : "tasks leak", l->live, site,
		l->per_s, (double)l->window_ns / 1e9,
		l->oldest_unseen ? "over " : "", (double)l->oldest_age_ns / 1e9,
		l->pending, parked);
	w = &p->warnings[(p->warn_seq - 1) % WARN_KEEP];
	w->task = l->oldest;
	w->task_name = l->file ? l->oldest_name : l->name;
	w->file = l->file;
	w->line = l->file ? l->line : 0;
}

static const char *wake_source_name(unsigned src)
{
	switch (src) {
#define WEFT_X_NAME(name, value, label)                                        \
	case value:                                                            \
		return label;
		WEFT_WAKE_SOURCES(WEFT_X_NAME)
#undef WEFT_X_NAME
	default:
		return "?";
	}
}

/*
 * One poll (or one thread's run of wakes) woke more than WEFT_WAKE_BURST
 * tasks: said once its woken tasks were mostly polled, with what they
 * waited, in place of their own scheduling-delay warnings.  Folded as a
 * task's warnings are, by the waker's spawn site: a broadcaster that
 * bursts every tick is five rows a second and a count.
 */
void weft__collector_warn_burst(struct probe *p, const struct burst_said *b)
{
	weft_probe_warning_t *w;
	char who[96], after[96];

	if (b->waker)
		snprintf(who, sizeof(who),
			 "one poll woke %u tasks (worker %u, a %.1f ms poll)",
			 b->woken, b->worker, (double)b->span_ns / 1e6);
	else if (b->worker != WEFT_EVENT_NO_WORKER)
		snprintf(who, sizeof(who),
			 "worker %u woke %u tasks outside a poll (%s) in %.1f "
			 "ms",
			 b->worker, b->woken, wake_source_name(b->source),
			 (double)b->span_ns / 1e6);
	else
		snprintf(who, sizeof(who),
			 "a thread, not a task, woke %u tasks in %.1f ms",
			 b->woken, (double)b->span_ns / 1e6);
	if (b->polled)
		snprintf(after, sizeof(after),
			 "; %u polled after up to %.1f ms (p99 %.1f), %u past "
			 "the delay threshold",
			 b->polled, (double)b->max_ns / 1e6,
			 (double)b->p99_ns / 1e6, b->over);
	else
		snprintf(after, sizeof(after), "; none polled since");
	if (!fold_row(p, WEFT_WARN_WAKE_BURST, b->name, b->file, b->line,
		      b->waker, b->worker, b->at, b->max_ns))
		return;
	weft__collector_warn(p, WEFT_WARN_WAKE_BURST, NULL, b->worker, b->at,
			     b->max_ns, "%s%s", who, after);
	w = &p->warnings[(p->warn_seq - 1) % WARN_KEEP];
	w->task = b->waker;
	w->task_name = b->name;
	w->file = b->file;
	w->line = b->line;
}
