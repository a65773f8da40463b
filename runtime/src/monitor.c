/* SPDX-License-Identifier: MIT */
/*
 * The runtime monitor (Go's sysmon, in small): one thread per runtime that
 * looks at every worker every half stall threshold (500 us by default) and makes sure a worker stuck
 * inside one poll (a blocking call, a long computation) stalls only
 * itself.
 *
 * What it reads costs the workers nothing new: each worker already counts
 * its polls (c.polls, bumped as a poll starts) and publishes the task it
 * polls (w->cur, set before the poll and cleared after, where a
 * thread-local used to be).  A worker whose (cur, polls) pair has not
 * changed across samples spanning the stall threshold (WEFT_STALL_US,
 * default 1000) has been in one poll at least that long.  Then:
 *
 *   - the task in its LIFO slot (woken by that poll, and unstealable) is
 *     taken out and pushed to the global queue, which wakes a parked
 *     worker (steal_lifo() below has the protocol);
 *   - if its local queue holds tasks, a parked worker is woken to steal
 *     them (steal-half, as ever);
 *
 * and, whoever is stuck: when nobody has turned the driver for as long
 * (no worker is parked in it, and none turned it in passing) while it has
 * timers or I/O registered, the monitor turns it once without blocking
 * and wakes a parked worker, which on parking again takes the driver.
 * So a worker that left the driver to run a task that then blocked does
 * not stop every timer of the runtime.
 *
 * It sleeps once every worker has been parked for a few looks: a worker
 * leaving its park kicks it (weft__monitor_kick(); see there for why no kick is lost).  Its
 * ticks are futex waits with a timeout, so destroy stops it at once.
 *
 * WEFT_MONITOR=0 turns it off (for measuring what it costs: tools/bench).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <limits.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "knob.h"
#include "runtime_internal.h"

enum { MON_RUNNING = 0, MON_SLEEPING = 1, MON_STOP = 2 };

#define cas_strong_seqcst(p, expected, desired)                                \
	atomic_compare_exchange_strong_explicit((p), (expected), (desired),    \
						memory_order_seq_cst,          \
						memory_order_seq_cst)

#define STALL_NS_DEFAULT 1000000ull
/* Looks (half a stall threshold apart) with every worker parked before
 * the monitor sleeps: 4 ms at the default. */
#define IDLE_LOOKS_BEFORE_SLEEP 8
#define STALL_NS_MIN 100000ull
#define STALL_NS_MAX 1000000000ull

static void futex_wait_ns(_Atomic uint32_t *addr, uint32_t val, uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000u),
			       (long)(ns % 1000000000u) };

	syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, val,
		ns ? &ts : NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *addr)
{
	syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, INT_MAX,
		NULL, NULL, 0);
}

/* WEFT_MONITOR and WEFT_STALL_US; a bad value is said (at each runtime's
 * creation) and the default used. */
static int parse_env(uint64_t *stall_ns)
{
	static const weft__knob_t stall = {
		.name = "WEFT_STALL_US",
		.kind = WEFT__KNOB_TIME,
		.unit = "us",
		.def = STALL_NS_DEFAULT / 1000,
		.min = STALL_NS_MIN / 1000,
		.max = STALL_NS_MAX / 1000,
	};

	*stall_ns = weft__knob(&stall);
	return weft__knob_bool("WEFT_MONITOR", true);
}

/*
 * Takes the task out of @w's LIFO slot while @w is in the poll the
 * monitor saw (@cur, @polls), and queues it globally.
 *
 * The slot is the owner's: it fills it with a plain store when it finds
 * it empty (weft__schedule()), and empties it with a plain load and store
 * between polls (lifo_take() in worker.c).  Against an exchange here:
 *
 *  - A fill that found the slot empty cannot lose to us: our exchange
 *    takes either nothing or the task it stored, never one it also
 *    handles.  A fill that found it full exchanges (the previous task is
 *    either its to demote or already ours).
 *  - An emptying must exchange too if it may race with us.  We raise
 *    lifo_watch, then (seq_cst fence) check that the worker is still in
 *    the same poll; the worker clears cur after the poll and reads
 *    lifo_watch before it empties the slot, with a full barrier between
 *    (the task-state CAS that ends every poll: fence_after_rmw()).  Store
 *    buffering with fences both sides: either we see cur cleared (and
 *    back off without touching the slot), or the worker's emptying after
 *    this poll sees lifo_watch and exchanges.  An emptying from an earlier
 *    gap is over before cur was set again (cur's release store, our
 *    acquire load).
 *
 * lifo_watch is ours alone to write; lowering it after the attempt is
 * safe because the owner reads it before the slot (lifo_take()): an
 * emptying that read it raised exchanges anyway, and one that reads it
 * lowered (release here, acquire there) sees our exchange's NULL.
 *
 * On x86 the owner's barrier is the locked CAS on another location, with
 * only a compiler barrier after it: that is x86's memory model (a locked
 * instruction drains the store buffer), not C11's, and ThreadSanitizer
 * cannot check it.  Elsewhere fence_after_rmw() is a seq_cst fence.
 */
static bool steal_lifo(weft_runtime_t *rt, weft_worker_t *w, weft_task_t *cur,
		       uint64_t polls)
{
	weft_task_t *t = NULL;

	store_relaxed(&w->lifo_watch, true);
	/* seq_cst: our side of the store-buffer pattern above. */
	fence_seqcst();
	/* Acquire: pairs with the release store of cur (see above). */
	if (load_acquire(&w->cur) == cur &&
	    load_relaxed(&w->c.polls) == polls)
		t = exchange_acq_rel(&w->lifo, NULL);
	store_release(&w->lifo_watch, false);
	if (!t)
		return false;
	/*
	 * The slot's reference is ours now.  A closed queue (shutdown)
	 * drops it; the push wakes a parked worker otherwise.
	 */
	if (weft__inject_push(&rt->inject, t))
		weft__notify_parked(rt);
	return true;
}

static void worker_stuck(monitor_t *m, weft_worker_t *w, weft_task_t *cur,
			 uint64_t polls, bool first)
{
	weft_runtime_t *rt = w->rt;

	if (first)
		fetch_add_relaxed(&m->stalls, 1);
	/* Relaxed: a hint; steal_lifo() decides. */
	if (load_relaxed(&w->lifo) && steal_lifo(rt, w, cur, polls))
		fetch_add_relaxed(&m->lifo_steals, 1);
	/*
	 * Its queue to a parked worker, and the global queue too: tasks a
	 * consumer moved there and left (it takes a batch) wait for it
	 * otherwise, while nobody else is searching.
	 */
	if (!weft__local_queue_is_empty(&w->queue) ||
	    !weft__inject_is_empty(&rt->inject))
		weft__notify_parked(rt);
}

/*
 * The driver unattended: not locked (nobody is parked in it or turning
 * it) and not turned for a stall's length, with something registered.
 */
static void watch_driver(monitor_t *m, weft_runtime_t *rt, uint64_t now)
{
	driver_t *d = &rt->driver;
	uint64_t turns = load_relaxed(&d->turns);

	if (turns != m->driver_turns_seen || load_relaxed(&d->locked) ||
	    !weft__driver_has_work(d)) {
		m->driver_turns_seen = turns;
		m->driver_seen_at = now;
		return;
	}
	if (now - m->driver_seen_at < m->stall_ns)
		return;
	if (weft__driver_try_lock(d)) {
		/* Woken tasks go to the global queue (no worker here). */
		weft__driver_turn(d, false);
		weft__driver_unlock(d);
		fetch_add_relaxed(&m->driver_turns, 1);
	}
	/* A parked worker wakes and, parking again, takes the driver. */
	weft__notify_parked(rt);
	m->driver_seen_at = now;
}

#if WEFT_PROBE
/*
 * Long polls with nobody listening.  While events flow the collector sees
 * every poll's duration; otherwise nothing does, and a console attached
 * after a spike would show nothing of it.  The monitor sees a poll run
 * past the long-poll threshold from what it samples anyway (no clock read
 * per poll): once, while it runs, never-yielded; when it ends, long-poll.
 * Lengths are lower bounds, from the first look that saw the poll to the
 * last: the monitor runs at nice 19 and its looks come late when the CPUs
 * are busy, and a late look must not make a short poll look long.  They
 * are wall time, as the collector's are; where the time went (the
 * worker thread's CPU clock and schedstat, split_look()) goes with them,
 * so that the probe does not blame a task for a poll the OS kept off its
 * CPU.  The task is named from the owned list (under its shard's lock:
 * the task may be gone), not dereferenced.
 */
/* This poll's split, the newest published, if one is. */
static const weft__poll_split_t *newest_split(weft_runtime_t *rt, unsigned i,
					      const monitor_seen_t *s,
					      weft__poll_split_t *out)
{
	weft__poll_split_t all[WEFT__POLL_SPLITS];

	if (!s->split_published || !weft__runtime_poll_splits(rt, i, all))
		return NULL;
	*out = all[0];
	return out;
}

/*
 * Publishes @s's poll, long and unheard, for the collector's view of the
 * workers (weft__runtime_worker_unheard() reads it), or takes it back
 * (@s NULL).  A seqlock whose count is the poll's own count (never 0,
 * different for each poll): cleared first, then the task and its start,
 * then the count again.
 */
static void unheard_publish(weft_worker_t *w, const monitor_seen_t *s)
{
	store_relaxed(&w->unheard_polls, 0);
	if (!s)
		return;
	/*
	 * Release fence: a reader that reads the stores below also reads
	 * the 0 above on its second look (its acquire fence), so a torn
	 * copy is never taken for this poll's.
	 */
	fence_release();
	store_relaxed(&w->unheard_task, s->info.id);
	store_relaxed(&w->unheard_since, s->first_seen);
	/* Release: the task and start above go with this count. */
	store_release(&w->unheard_polls, s->polls);
}

static void long_poll_running(monitor_t *m, weft_runtime_t *rt, unsigned i,
			      monitor_seen_t *s, weft_task_t *cur, uint64_t now)
{
	/* first_seen may be later than @now (read after it). */
	if (now > s->first_seen)
		s->last_seen = now;
	else
		s->last_seen = s->first_seen;
	/*
	 * A poll the collector times (the probe listened when it began)
	 * is the collector's to tell; this one is ours, also while someone
	 * listens now: it began before (a console attached to a hung
	 * process), and its end makes no POLL event.  Relaxed: a hint, read
	 * again at each look (the worker stores it just before the poll).
	 */
	if (load_relaxed(&rt->workers[i].probe_task))
		s->heard = true;
	/*
	 * Blocked on a weft_mutex_t now (mutex.c names it on its slow path
	 * whether or not anyone listens): how long, at the longest look.
	 * Not the blocking pool's own lock, named there while someone
	 * listens (blocking.c): the runtime's wait, no weft_mutex_t.
	 * Acquire: the since stored before the name is this wait's.
	 */
	{
		const char *lock = load_acquire(&rt->workers[i].lock_waiting);
		uint64_t since = load_relaxed(&rt->workers[i].lock_wait_since);

		if (lock && lock != weft__pool_lock_name && now > since &&
		    now - since > s->lock_ns) {
			s->lock = lock;
			s->lock_ns = now - since;
		}
	}
	s->unheard = !s->heard;
	if (!s->unheard || !m->long_poll_ns ||
	    s->last_seen - s->first_seen < m->long_poll_ns ||
	    (s->warned && s->published))
		return;
	if (!s->named) {
		s->named = weft__owned_describe(&rt->owned, cur, &s->info);
		/*
		 * Still the same poll (acquire, as steal_lifo()): the task
		 * named is the one polled, not one that reused its memory
		 * meanwhile.
		 */
		if (s->named &&
		    (load_acquire(&rt->workers[i].cur) != cur ||
		     load_relaxed(&rt->workers[i].c.polls) != s->polls))
			s->named = false;
	}
	if (s->named && !s->published) {
		unheard_publish(&rt->workers[i], s);
		s->published = true;
	}
	if (s->named && !s->warned) {
		weft__poll_split_t split;

		/* Not said while mostly the OS's doing: looked at again. */
		s->warned = weft__probe_monitor_long_poll(
			&s->info, (uint16_t)i, s->first_seen,
			s->last_seen - s->first_seen, false,
			newest_split(rt, i, s, &split), s->lock, s->lock_ns);
	}
}

/* An ended poll's warning, unless the probe's lock is busy: kept then. */
static void end_try(unsigned i, monitor_seen_t *s)
{
	if (weft__probe_monitor_long_poll(
		    &s->end_info, (uint16_t)i, s->end_start, s->end_dur, true,
		    s->end_split_ok ? &s->end_split : NULL, s->end_lock,
		    s->end_lock_ns))
		s->end_pending = false;
}

/* Its length: at least from the first look that saw it to the last. */
static void long_poll_ended(weft_runtime_t *rt, unsigned i, monitor_seen_t *s)
{
	weft__poll_split_t split;

	s->named = false;
	if (s->published) {
		unheard_publish(&rt->workers[i], NULL);
		s->published = false;
	}
	/* Heard at its start, its POLL event tells it. */
	if (!s->unheard)
		return;
	s->end_pending = true;
	s->end_info = s->info;
	s->end_start = s->first_seen;
	s->end_dur = s->last_seen - s->first_seen;
	s->end_lock = s->lock;
	s->end_lock_ns = s->lock_ns;
	s->end_split_ok = newest_split(rt, i, s, &split) != NULL;
	if (s->end_split_ok)
		s->end_split = split;
	end_try(i, s);
}

/* Opens /proc/self/task/TID/@what; -2 where it cannot. */
static int open_task_file(int32_t tid, const char *what)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%d/%s", (int)tid, what);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -2 : fd;
}

/* A thread CPU clock's reading (ns), 0 where it cannot be read. */
static uint64_t clock_ns(clockid_t c)
{
	struct timespec ts;

	if (clock_gettime(c, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* run_delay, schedstat's second field, read anew (*@delay). */
static bool delay_read(monitor_seen_t *s, uint64_t *delay)
{
	char buf[128], *p;
	ssize_t n = pread(s->sched_fd, buf, sizeof(buf) - 1, 0);

	if (n <= 0)
		return false;
	buf[n] = '\0';
	(void)strtoull(buf, &p, 10);
	*delay = strtoull(p, NULL, 10);
	return true;
}

/*
 * The worker thread's CPU time (its CPU clock: exact, where schedstat's
 * first field lags up to a scheduler tick for a running thread), its
 * time queued for a CPU (schedstat's run_delay: exact for the waits
 * that have ended), whether it is waiting for a CPU now ('R' in its
 * /proc stat, and its CPU clock not moving) and when (ns, read right
 * after).  The parts must agree: the CPU clock before and after the two
 * file reads, unmoved, means the thread did not run in between, so 'R'
 * is a wait going on and run_delay has every wait that ended.  Read
 * apart, a look held off its CPU between the reads (we run at nice 19)
 * found a thread that ran meanwhile "not waiting" beside a run_delay
 * read before its wait ended, and the wait read as sleep.  A thread that
 * ran in every try is running: no wait going on, its ended waits read
 * after it ran.  The files are kept open: a pread at 0 reads them anew.
 * False where any cannot be read.
 */
static bool thread_read(weft_worker_t *w, monitor_seen_t *s, uint64_t *cpu,
			uint64_t *delay, bool *waiting, uint64_t *at)
{
	char buf[512], *p;
	uint64_t c0;
	ssize_t n;

	if (s->stat_fd == -1) {
		/* Acquire: the clock id stored before the tid. */
		int32_t tid = load_acquire(&w->tid);

		if (!tid)
			return false;
		s->cpu_clock = (clockid_t)load_relaxed(&w->cpu_clock);
		/*
		 * A thread's CPU clock id is negative (the kernel encodes the
		 * tid in it); 0, CLOCK_REALTIME, means the worker could not
		 * get one: wall time must not pass for CPU time.
		 */
		if (s->cpu_clock >= 0) {
			s->stat_fd = s->sched_fd = -2;
			return false;
		}
		s->stat_fd = open_task_file(tid, "stat");
		s->sched_fd = open_task_file(tid, "schedstat");
		if (s->stat_fd < 0 || s->sched_fd < 0) {
			if (s->stat_fd >= 0)
				close(s->stat_fd);
			if (s->sched_fd >= 0)
				close(s->sched_fd);
			s->stat_fd = s->sched_fd = -2;
		}
	}
	if (s->stat_fd < 0)
		return false;
	for (int k = 0; k < 3; k++) {
		c0 = clock_ns(s->cpu_clock);
		if (!c0 || !delay_read(s, delay))
			return false;
		n = pread(s->stat_fd, buf, sizeof(buf) - 1, 0);
		if (n <= 0)
			return false;
		buf[n] = '\0';
		/* "tid (comm) S ...": the state follows the last ')'. */
		p = strrchr(buf, ')');
		if (!p || p[1] != ' ')
			return false;
		*cpu = clock_ns(s->cpu_clock);
		*at = weft_now_ns();
		/* 'R' is running or waiting to: the unmoved clock says
		 * which. */
		if (*cpu == c0) {
			*waiting = p[2] == 'R';
			return true;
		}
	}
	*waiting = false;
	if (!delay_read(s, delay))
		return false;
	*cpu = clock_ns(s->cpu_clock);
	*at = weft_now_ns();
	return *cpu != 0;
}

/*
 * A look at a poll past the stall threshold: where its time went since
 * the first such look, published for the probe's warnings, so that a
 * poll the OS kept off its CPU is not blamed on its task.  On a CPU: its
 * CPU clock; waiting for one: the run_delay its waits added as they
 * ended, and the wait going on now, if it is waiting for a CPU (what
 * the stretch since the last look does not account for otherwise); the
 * rest asleep in the kernel.  Three reads a look, only while a poll is stuck.  The
 * poll's end is not looked at: what the thread does after it is not
 * its poll's.
 */
static void split_look(weft_worker_t *w, monitor_seen_t *s)
{
	uint64_t cpu, delay, at, wait;
	_Atomic uint64_t *v;
	uint32_t seq, pos;
	bool waiting;

	if (!thread_read(w, s, &cpu, &delay, &waiting, &at))
		return;
	if (!s->split_first) {
		s->split_first = true;
		s->cpu0 = s->cpu_prev = cpu;
		s->delay0 = s->delay_prev = delay;
		s->at0 = s->at_prev = at;
		/*
		 * Relaxed: matched against the POLL event, a hint.  A poll
		 * that began with the probe off was not timed, and its
		 * start would be an older poll's: none.
		 */
		s->split_start = load_relaxed(&w->probe_task) ?
					 load_relaxed(&w->probe_poll_start) :
					 0;
		return;
	}
	wait = delay > s->delay0 ? delay - s->delay0 : 0;
	/*
	 * run_delay adds a wait only once it ends.  A thread waiting now:
	 * the part of the time since the last look at which it was not
	 * waiting that neither its CPU clock nor a wait that ended covers
	 * is, most likely, this wait, still going on; it is counted as
	 * waiting (recomputed at each look, never summed: once the wait
	 * ends run_delay has it all).  The baseline stays at the last look
	 * that found it not waiting, so a wait that spans many looks counts
	 * whole.  Left out, a 4 ms computation on a CPU shared four ways
	 * read as 16 ms of its own, three quarters "asleep in the kernel".
	 */
	if (waiting && at > s->at_prev) {
		uint64_t span = at - s->at_prev;
		uint64_t used = (cpu > s->cpu_prev ? cpu - s->cpu_prev : 0) +
				(delay > s->delay_prev ? delay - s->delay_prev :
							 0);

		if (span > used)
			wait += span - used;
	}
	if (!waiting) {
		s->cpu_prev = cpu;
		s->delay_prev = delay;
		s->at_prev = at;
	}
	/* A wait begun before the first look ends into run_delay whole. */
	if (at > s->at0 && cpu - s->cpu0 <= at - s->at0 &&
	    wait > at - s->at0 - (cpu - s->cpu0))
		wait = at - s->at0 - (cpu - s->cpu0);
	/*
	 * The seqlock's write side (we are its only writer): odd, a release
	 * fence (the count before the fields, to a reader that sees a
	 * field's new value), the fields, then even with release (the
	 * fields before the count, to a reader's acquire).
	 */
	seq = load_relaxed(&w->split_seq);
	pos = load_relaxed(&w->split_pos);
	store_relaxed(&w->split_seq, seq + 1);
	fence_release();
	if (!s->split_published) {
		/* This poll's first: a slot of its own, the oldest's. */
		pos = (pos + 1) % WEFT__POLL_SPLITS;
		store_relaxed(&w->split_pos, pos);
		if (load_relaxed(&w->split_n) < WEFT__POLL_SPLITS)
			store_relaxed(&w->split_n,
				      load_relaxed(&w->split_n) + 1);
	}
	v = w->split[(pos + WEFT__POLL_SPLITS - 1) % WEFT__POLL_SPLITS];
	store_relaxed(&v[0], s->split_start);
	store_relaxed(&v[1], s->at0);
	store_relaxed(&v[2], at);
	store_relaxed(&v[3], cpu > s->cpu0 ? cpu - s->cpu0 : 0);
	store_relaxed(&v[4], wait);
	store_release(&w->split_seq, seq + 2);
	s->split_published = true;
}
#endif

/*
 * One look at every worker; returns when the next look is due.  A poll
 * first seen now began after the previous look: its start is taken as
 * halfway between, and it is acted on once that estimate is the stall
 * threshold old, at a look made for it (so between 3/4 and 5/4 of the
 * threshold after it really began, at the default ticks).
 */
static uint64_t sample(monitor_t *m, weft_runtime_t *rt, uint64_t now)
{
	bool shutdown = load_relaxed(&rt->shutdown);
	uint64_t next = now + m->interval_ns;

	for (unsigned i = 0; i < rt->nworkers; i++) {
		weft_worker_t *w = &rt->workers[i];
		monitor_seen_t *s = &m->seen[i];
		/* Acquire: see steal_lifo(). */
		weft_task_t *cur = load_acquire(&w->cur);
		uint64_t polls = load_relaxed(&w->c.polls);

#if WEFT_PROBE
		if (s->end_pending)
			end_try(i, s);
#endif
		if (!cur || cur != s->cur || polls != s->polls) {
#if WEFT_PROBE
			if (s->named)
				long_poll_ended(rt, i, s);
			s->split_first = s->split_published = false;
			s->warned = false;
			s->heard = false;
			s->lock = NULL;
			s->lock_ns = 0;
			/*
			 * Read after the loads above, not @now: a poll that
			 * began between @now and them (the monitor runs at
			 * nice 19, and may be off the CPU there) must not
			 * seem older than it is.  One read a new poll seen.
			 */
			s->first_seen = cur ? weft_now_ns() : now;
#endif
			s->cur = cur;
			s->polls = polls;
			s->since = m->last_sample + (now - m->last_sample) / 2;
			s->acted = false;
		}
		if (!cur || shutdown)
			continue;
#if WEFT_PROBE
		long_poll_running(m, rt, i, s, cur, now);
#endif
		if (now - s->since < m->stall_ns) {
			if (s->since + m->stall_ns < next)
				next = s->since + m->stall_ns;
			continue;
		}
#if WEFT_PROBE
		split_look(w, s);
#endif
		worker_stuck(m, w, cur, polls, !s->acted);
		s->acted = true;
	}
	watch_driver(m, rt, now);
	m->last_sample = now;
	return next;
}

/* Every worker parked: nothing can get stuck, sleep until a kick. */
static void sleep_while_parked(monitor_t *m, weft_runtime_t *rt)
{
	uint32_t expect = MON_RUNNING;

	if (!cas_strong_seqcst(&m->state, &expect, MON_SLEEPING))
		return; /* MON_STOP */
	/*
	 * seq_cst (the CAS above and this load): our side of the store
	 * buffering against weft__monitor_kick(); see there.
	 */
	if (!weft__idle_all_parked(&rt->idle)) {
		expect = MON_SLEEPING;
		cas_strong_seqcst(&m->state, &expect, MON_RUNNING);
		return;
	}
	while (load_acquire(&m->state) == MON_SLEEPING)
		futex_wait_ns(&m->state, MON_SLEEPING, 0);
	for (unsigned i = 0; i < rt->nworkers; i++)
		m->seen[i].cur = NULL;
	/* What runs now began after the kick. */
	m->last_sample = weft_now_ns();
}

static void *monitor_main(void *arg)
{
	weft_runtime_t *rt = arg;
	monitor_t *m = &rt->monitor;
	uint64_t next = weft_now_ns() + m->interval_ns, now;
	unsigned idle_looks = 0;

	pthread_setname_np(pthread_self(), "weft-mon");
	/*
	 * Nice 19: its looks are a few microseconds, but at normal weight
	 * each of its wake-ups preempted a worker or the thread feeding
	 * them (spawn_many_remote 1.2-1.4x slower on two vCPUs, none at nice
	 * 19; tools/bench/README.md).  The CPU it needs is there when it
	 * matters: a worker blocked in the kernel leaves its CPU free.
	 */
	setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);
	m->last_sample = weft_now_ns();
	/* Acquire: pairs with the release stores of destroy and kicks. */
	while (load_acquire(&m->state) != MON_STOP) {
		/*
		 * Asleep only after every worker has been parked at a few
		 * looks in a row: workers that park between bursts (a
		 * ping-pong across workers parks at every message) would
		 * otherwise wake it, a futex wake each, many times a
		 * millisecond.
		 */
		if (!weft__idle_all_parked(&rt->idle) ||
		    load_relaxed(&rt->shutdown))
			idle_looks = 0;
		else if (++idle_looks > IDLE_LOOKS_BEFORE_SLEEP) {
			idle_looks = 0;
			sleep_while_parked(m, rt);
			next = weft_now_ns() + m->interval_ns;
			continue;
		}
		now = weft_now_ns();
		if (next > now) {
			futex_wait_ns(&m->state, MON_RUNNING, next - now);
			if (load_acquire(&m->state) == MON_STOP)
				break;
			now = weft_now_ns();
		}
		next = sample(m, rt, now);
	}
	return NULL;
}

int weft__monitor_start(weft_runtime_t *rt)
{
	monitor_t *m = &rt->monitor;

	store_relaxed(&m->state, MON_RUNNING);
	if (!parse_env(&m->stall_ns)) {
		m->started = false;
		return 0;
	}
	m->interval_ns = m->stall_ns / 2;
#if WEFT_PROBE
	m->long_poll_ns = weft__probe_long_poll_ns();
#endif
	m->seen = calloc(rt->nworkers, sizeof(*m->seen));
	if (!m->seen)
		return -ENOMEM;
	for (unsigned i = 0; i < rt->nworkers; i++)
		m->seen[i].stat_fd = m->seen[i].sched_fd = -1;
	m->driver_seen_at = weft_now_ns();
	if (pthread_create(&m->thread, NULL, monitor_main, rt)) {
		free(m->seen); /* no fd opened yet: the monitor never ran */
		m->seen = NULL;
		return -EAGAIN;
	}
	m->started = true;
	return 0;
}

void weft__monitor_stop(weft_runtime_t *rt)
{
	monitor_t *m = &rt->monitor;

	if (!m->started)
		return;
	/* Release: pairs with the monitor's acquire loads of state. */
	exchange_seqcst(&m->state, MON_STOP);
	futex_wake_all(&m->state);
	pthread_join(m->thread, NULL);
	for (unsigned i = 0; i < rt->nworkers; i++) {
		if (m->seen[i].stat_fd >= 0)
			close(m->seen[i].stat_fd);
		if (m->seen[i].sched_fd >= 0)
			close(m->seen[i].sched_fd);
	}
	free(m->seen);
	m->seen = NULL;
	m->started = false;
}

void weft__monitor_wake(monitor_t *m)
{
	uint32_t expect = MON_SLEEPING;

	if (cas_strong_seqcst(&m->state, &expect, MON_RUNNING))
		futex_wake_all(&m->state);
}
