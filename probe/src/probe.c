/* SPDX-License-Identifier: MIT */
/*
 * The probe's plumbing: per-thread rings and their registry, the
 * listening switch, subscriptions, and the collector thread's life.
 *
 * Locks (in this order): probe.lock guards the subscriber list, the ring
 * registry and the collector's state; it is held for a whole collector
 * pass, so unsubscribing waits for a pass in progress.  Producers never
 * take it: a thread takes it once, to register its ring.
 *
 * A ring lives until the collector has drained it after its thread said
 * goodbye (weft__probe_thread_stop(), or the TLS destructor of a foreign
 * thread): the producer marks it orphaned, the collector frees it.
 */
#include <errno.h>
#include <linux/futex.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "weft/time.h"

#include "abi_internal.h"
#include "knob.h"
#include "lockshim_hooks.h"
#include "collector_internal.h"
#include "metrics_internal.h"
#include "pages_internal.h"
#include "recorder_internal.h"
#include "runtime_internal.h"
#include "server_internal.h"

_Atomic uint32_t weft__probe_listening;
_Atomic uint32_t weft__probe_listen_gen;
WEFT_TLS weft_ring_t *weft__probe_ring;
WEFT_TLS uint16_t weft__probe_worker = WEFT_EVENT_NO_WORKER;
WEFT_TLS uint64_t weft__probe_poll_ts;

struct probe weft__probe = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
};

static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t ring_key;

/*
 * Rings registered since the collector's last drain: a lock-free stack,
 * pushed by any thread and taken whole by the collector, so that a
 * thread's first event never waits for probe.lock, which the collector
 * holds through a pass (a recorder's file writes included).
 */
_Atomic(ring_entry_t *) weft__probe_new_rings;
/*
 * The collector's sleep, which a producer can end without probe.lock
 * (weft__ring_half_full()): a futex word bumped by every waker, and a
 * flag that asks for a pass now.
 */
static struct {
	weft__cacheline_aligned _Atomic uint32_t seq;
	_Atomic uint32_t poked;
} collector_wake;

/* The configured ring capacity once loaded (0 before): read lock-free. */
static _Atomic size_t ring_cap_loaded;

/* On the ring's own thread (thread stop, or its TLS destructor). */
static void ring_orphan(void *p)
{
	ring_entry_t *e = p;

	/*
	 * Forget it first: an event emitted later on this thread (another
	 * destructor waking a waker) registers a new ring instead of
	 * writing into one the collector may have freed.
	 */
	weft__probe_ring = NULL;
	/* Release: our last pushes happen before the collector frees it. */
	store_release(&e->orphan, true);
}

static void key_create(void)
{
	pthread_key_create(&ring_key, ring_orphan);
}

/* A threshold in ms: 1 ms to 1 h. */
static uint64_t env_ms(const char *name, uint64_t def_ms)
{
	const weft__knob_t k = {
		.name = name,
		.kind = WEFT__KNOB_TIME,
		.unit = "ms",
		.def = def_ms,
		.min = 1,
		.max = 3600 * 1000,
	};

	return weft__knob(&k);
}

/* Events a thread's ring holds (rounded up to a power of two). */
static const weft__knob_t ring_knob = {
	.name = "WEFT_PROBE_RING",
	.kind = WEFT__KNOB_COUNT,
	.unit = "events",
	.def = 1u << 18,
	.min = 64,
	.max = 1u << 26,
};

/*
 * Finished tasks the collector keeps for a console that attaches later
 * (each is up to about 1.1 KB: its record, and its histograms if it was
 * polled twice).  100,000 held 115 MB in a service ending 65,000 tasks a
 * second, and the first seconds of a recording paid to fault that memory
 * in (perf, weft-demo /fast-task: clear_page and the fault path, a third
 * of the collector's time); a console keeps its own once attached.
 */
static const weft__knob_t retain_knob = {
	.name = "WEFT_PROBE_RETAIN",
	.kind = WEFT__KNOB_COUNT,
	.unit = "tasks",
	.def = 10000,
	.min = 0,
	.max = 1u << 24,
};

/* Tasks one poll may wake before it is a wake burst. */
static const weft__knob_t wake_burst_knob = {
	.name = "WEFT_WAKE_BURST",
	.kind = WEFT__KNOB_COUNT,
	.unit = "tasks",
	.def = 1000,
	.min = 1,
	.max = 1u << 30,
};

/* How long a spawn site's live tasks grow before it is a task leak:
 * 100 ms (tests) to 1 h. */
static const weft__knob_t leak_window_knob = {
	.name = "WEFT_TASK_LEAK_WINDOW",
	.kind = WEFT__KNOB_TIME,
	.unit = "ms",
	.def = 3000,
	.min = 100,
	.max = 3600 * 1000,
};

/* Live tasks a spawn site holds before it may be a task leak: fewer are
 * a service's ordinary few (connections, workers) more often than a
 * leak.  8 to 16 M. */
static const weft__knob_t leak_min_knob = {
	.name = "WEFT_TASK_LEAK_MIN",
	.kind = WEFT__KNOB_COUNT,
	.unit = "tasks",
	.def = 256,
	.min = 8,
	.max = 1u << 24,
};

/* Under probe.lock. */
static void config_load(void)
{
	weft_probe_config_t *c = &weft__probe.config;

	if (weft__probe.config_loaded)
		return;
	c->long_poll_ns = env_ms("WEFT_LONG_POLL", 10);
	c->sched_delay_ns = env_ms("WEFT_SCHED_DELAY", 50);
	c->contention_ns = env_ms("WEFT_CONTENTION", 10);
	/* At most every 20 ms; sooner while rings fill (collector.c). */
	c->interval_ns = env_ms("WEFT_PROBE_INTERVAL", 20);
	c->retain_ns = 6ull * 1000000000u;
	c->retain_max = weft__knob(&retain_knob);
	c->large_future_bytes = 1024;
	c->ring_capacity = weft__knob(&ring_knob);
	c->wake_burst = (uint32_t)weft__knob(&wake_burst_knob);
	c->task_leak_window_ns = weft__knob(&leak_window_knob);
	c->task_leak_min = (uint32_t)weft__knob(&leak_min_knob);
	weft__probe_clock_init();
	weft__probe.config_loaded = true;
	/* Relaxed: a hint; a thread that reads 0 takes the lock instead. */
	store_relaxed(&ring_cap_loaded, c->ring_capacity);
}

uint64_t weft__probe_long_poll_ns(void)
{
	uint64_t ns;

	pthread_mutex_lock(&weft__probe.lock);
	config_load();
	ns = weft__probe.config.long_poll_ns;
	pthread_mutex_unlock(&weft__probe.lock);
	return ns;
}

void weft_probe_config(weft_probe_config_t *out)
{
	/* A callback: the collector holds the lock for it, and the config
	 * was loaded when the collector started. */
	if (weft__in_collector) {
		*out = weft__probe.config;
		return;
	}
	pthread_mutex_lock(&weft__probe.lock);
	config_load();
	*out = weft__probe.config;
	pthread_mutex_unlock(&weft__probe.lock);
}

void weft__probe_emit_first(uint64_t ts, uint8_t kind, uint64_t task,
			    uint64_t a1, uint32_t a2)
{
	uint64_t poll_ts = weft__probe_poll_ts;

	/* Registers the ring (NULL when nobody listens any more). */
	if (!weft__probe_ring_register())
		return;
	/* Stamped with the poll's start, which registering moved on. */
	if (poll_ts && ts == poll_ts)
		ts = weft__probe_poll_ts;
	weft__probe_emit_at(ts, kind, task, a1, a2);
}

void weft__probe_emit_slow(uint8_t kind, uint64_t task, uint64_t a1,
			   uint32_t a2)
{
	weft__probe_emit(kind, task, a1, a2);
}

/* This worker's ring was made inside a poll, not populated. */
static WEFT_TLS bool ring_lazy;

weft_ring_t *weft__probe_ring_register(void)
{
	ring_entry_t *e;
	size_t cap;
	bool populate;

	/* Only while listening: no rings for threads that never emit. */
	if (!weft__probe_on())
		return NULL;
	pthread_once(&key_once, key_create);
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	cap = load_relaxed(&ring_cap_loaded);
	if (!cap) {
		pthread_mutex_lock(&weft__probe.lock);
		config_load();
		cap = weft__probe.config.ring_capacity;
		pthread_mutex_unlock(&weft__probe.lock);
	}
	/*
	 * A worker's ring is populated now: it emits on every poll.  Other
	 * threads (the blocking pool's, the application's) emit a few events
	 * and fault in what they use.  Not inside a poll (one under way when
	 * a console attached, emitting its first event): 8 MiB of small
	 * pages took milliseconds there, hundreds beside busy neighbours,
	 * and the runtime monitor, which times a poll that began before
	 * anyone listened, blamed the task for them (a long poll "computing
	 * on a CPU").  That ring is populated after the poll
	 * (weft__probe_ring_ready()), and faults in meanwhile.
	 */
	populate = weft__probe_worker != WEFT_EVENT_NO_WORKER &&
		   !weft__cur_task_id;
	if (weft__ring_init(&e->ring, cap, populate)) {
		free(e);
		return NULL;
	}
	e->worker = weft__probe_worker;
	store_relaxed(&e->orphan, false);
	e->next = load_relaxed(&weft__probe_new_rings);
	/*
	 * Release: the entry and its ring are written before the collector,
	 * which takes the stack with an acquire exchange, reads them.  A
	 * push-only stack emptied whole by its one consumer: no ABA.
	 */
	while (!atomic_compare_exchange_weak_explicit(
		&weft__probe_new_rings, &e->next, e, memory_order_release,
		memory_order_relaxed))
		;
	weft__probe_ring = &e->ring;
	ring_lazy = weft__probe_worker != WEFT_EVENT_NO_WORKER && !populate;
	pthread_setspecific(ring_key, e);
	/*
	 * Made inside a timed poll (a console attached while the worker
	 * ran): the ring's populating (under 1 ms for 8 MiB on huge pages,
	 * more without: pages.c) is not the task's.  The poll now starts
	 * here, and so does the event that made the ring
	 * (weft__probe_emit_first).
	 */
	if (weft__probe_poll_ts)
		weft__probe_poll_ts = weft__probe_clock();
	return &e->ring;
}

void weft__probe_ring_ready(void)
{
	weft_ring_t *r = weft__probe_ring;

	if (!r) {
		(void)weft__probe_ring_register();
		return;
	}
	if (ring_lazy) {
		ring_lazy = false;
		weft__pages_populate(r->buf, weft__ring_capacity(r) *
						     sizeof(weft_event_t));
	}
}

void weft__probe_thread_start(uint16_t worker)
{
	weft__probe_worker = worker;
}

void weft__probe_thread_stop(void)
{
	ring_entry_t *e;

	if (!weft__probe_ring)
		return;
	e = (ring_entry_t *)((char *)weft__probe_ring -
			     offsetof(ring_entry_t, ring));
	pthread_setspecific(ring_key, NULL);
	weft__probe_ring = NULL;
	ring_orphan(e);
}

/* -------------------------------------------------------- the collector */

/* The collector's CPU time in the runs before this one (probe.lock):
 * weft__collector_start() counts each run from zero. */
static uint64_t cpu_before_ns;

/*
 * WEFT_COLLECTOR_NICE=N (1..19): the collector thread runs at that nice
 * value.  On a machine whose cores the workers keep busy, a collector at
 * the workers' priority takes its CPU from them; niced, it gets what they
 * leave, and when that is not enough the rings fill and events are
 * dropped (counted, and warned about) instead.  Off by default: a trace
 * that loses events under load is the worse surprise for most users.
 */
static void collector_nice(void)
{
	static const weft__knob_t nice_knob = {
		.name = "WEFT_COLLECTOR_NICE",
		.kind = WEFT__KNOB_COUNT,
		.unit = "(a nice value)",
		.def = 0,
		.min = 1,
		.max = 19,
	};
	uint64_t v = weft__knob(&nice_knob);

	if (!v)
		return;
	/* Linux: a thread's nice value is its own, set through its tid. */
	if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), (int)v))
		fprintf(stderr, "weft: WEFT_COLLECTOR_NICE: %s\n",
			strerror(errno));
}

/*
 * Ends the collector's sleep.  Lost-wake argument: the collector reads seq
 * before it last looks at what it would wake for (stop, flush, poked),
 * and FUTEX_WAIT sleeps only while seq still holds what it read; a waker
 * changes that first or after it (its change is seen), then bumps seq.
 * The bump releases (acq_rel): a collector whose acquire load of seq
 * sees it also sees what the waker set before.
 */
static void collector_wake_up(void)
{
	fetch_add_acq_rel(&collector_wake.seq, 1);
	syscall(SYS_futex, (uint32_t *)&collector_wake.seq, FUTEX_WAKE_PRIVATE,
		1, NULL, NULL, 0);
}

/*
 * A producer's ring is half full: ask for a pass now.  Once until the
 * collector takes the request, so a burst costs one system call a pass
 * however many rings fill.  Any thread, without a lock.
 */
void weft__ring_half_full(void)
{
	/* Relaxed: a hint; the exchange below decides. */
	if (load_relaxed(&collector_wake.poked))
		return;
	/*
	 * Acq_rel: releases this ring's pushes to the collector that takes
	 * the request with its own acq_rel exchange; so the pass it starts
	 * sees the tail that asked for it.
	 */
	if (!exchange_acq_rel(&collector_wake.poked, 1))
		collector_wake_up();
}

/* With probe.lock held: sleeps until @until_ns or a wake; drops the lock
 * while asleep. */
static void collector_sleep(struct probe *p, uint64_t now, uint64_t until_ns)
{
	/* Acquire: pairs with collector_wake_up()'s release bump. */
	uint32_t seq = load_acquire(&collector_wake.seq);
	struct timespec rel;

	if (p->stop || p->flush_requested ||
	    load_relaxed(&collector_wake.poked))
		return;
	rel.tv_sec = (time_t)((until_ns - now) / 1000000000u);
	rel.tv_nsec = (long)((until_ns - now) % 1000000000u);
	pthread_mutex_unlock(&p->lock);
	syscall(SYS_futex, (uint32_t *)&collector_wake.seq, FUTEX_WAIT_PRIVATE,
		seq, &rel, NULL, 0);
	pthread_mutex_lock(&p->lock);
}

WEFT_TLS bool weft__in_collector;

static void *collector_main(void *arg)
{
	struct probe *p = &weft__probe;
	uint64_t next = weft_now_ns();

	(void)arg;
	weft__in_collector = true;
	pthread_setname_np(pthread_self(), "weft-collector");
	collector_nice();
	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		uint64_t now = weft_now_ns();

		/*
		 * A poke is taken (acq_rel, pairs with the producer's) before
		 * the pass reads the rings; one that comes after asks again.
		 */
		bool poked = load_relaxed(&collector_wake.poked) &&
			     exchange_acq_rel(&collector_wake.poked, 0);

		if (now >= next || p->flush_requested || poked) {
			uint64_t served = p->flush_requested;

			weft__collector_pass(p, now);
			p->passes++;
			if (served) {
				p->flush_requested = 0;
				p->flush_done = served;
				pthread_cond_broadcast(&p->cond);
			}
			next = now + weft__collector_interval(p);
			continue;
		}
		collector_sleep(p, now, next);
	}
	/* Stopping: release anyone waiting in weft_probe_flush(). */
	p->flush_done = p->flush_requested ? p->flush_requested : p->flush_done;
	p->flush_requested = 0;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

/*
 * With probe.lock held and the collector running: asks for a pass and
 * waits until one has served it (or the collector is gone), the lock let
 * go meanwhile.
 */
static void flush_locked(struct probe *p)
{
	uint64_t ticket = ++p->flush_ticket;

	p->flush_requested = ticket;
	collector_wake_up();
	while (p->running && p->flush_done < ticket)
		pthread_cond_wait(&p->cond, &p->lock);
}

int weft_probe_subscribe(const weft_probe_sub_opts_t *opts,
			 weft_probe_sub_t **out)
{
	struct probe *p = &weft__probe;
	weft_probe_sub_t *s;
	int err = 0;

	if (!opts || !out ||
	    !weft__reserved_zero(opts->reserved_, sizeof(opts->reserved_)))
		return -EINVAL;
	if (weft__in_collector)
		return -EDEADLK; /* a callback: probe.lock is held for it */
#if !WEFT_PROBE
	return -ENOTSUP;
#endif
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->opts = *opts;
	s->need_full = true;

	pthread_mutex_lock(&p->lock);
	config_load();
	/*
	 * Events again after a gap in listening, with no pass since it
	 * began: what the rings held then (the old period's last events,
	 * the ends of waits and holds among them) is folded first, by a
	 * pass of the collector's, as a flush has it done.  The lock is
	 * let go meanwhile: looked at again (another subscriber may have
	 * come and gone, a new gap begun), and what follows looks at the
	 * state it finds.
	 */
	while (opts->events && p->running && p->gap_open &&
	       p->passes == p->gap_passes)
		flush_locked(p);
	if (!p->running) {
		err = weft__collector_start(p);
		if (!err) {
			p->stop = false;
			if (pthread_create(&p->thread, NULL, collector_main,
					   NULL)) {
				weft__collector_stop(p);
				err = -EAGAIN;
			} else {
				p->running = true;
				/*
				 * A collector starts with no sites or
				 * resources known: a new listening period,
				 * so that rings tell their sites again
				 * (ring.h) and resources announce
				 * themselves again, even if listening
				 * never fell to 0 (a restart that failed in
				 * weft_probe_unsubscribe() stopped the
				 * collector under subscribers).  Ordering
				 * as below: a site that reads a stale
				 * generation leaves a task unnamed, never
				 * misnamed.
				 */
				fetch_add_relaxed(&weft__probe_listen_gen, 1);
			}
		}
	}
	if (err) {
		pthread_mutex_unlock(&p->lock);
		free(s);
		return err;
	}
	s->fresh = true;
	s->since_seq = p->warn_seq;
	s->next = p->subs;
	p->subs = s;
	if (opts->events) {
		/* Relaxed: sites read it relaxed; see probe_internal.h. */
		/*
		 * A new listening period: resources announce themselves
		 * again (resource.c), rings tell their spawn sites again
		 * (ring.h).  Relaxed, stored before listening: on x86-64 a
		 * site that sees listening sees the new generation too;
		 * elsewhere it may take a resource or a spawn site for
		 * announced once, and the collector shows that resource by
		 * its id alone, that task unnamed (never with another
		 * site's name).
		 */
		if (load_relaxed(&weft__probe_listening) == 0) {
			if (p->gap_open)
				weft__collector_gap(p);
			fetch_add_relaxed(&weft__probe_listen_gen, 1);
		}
		fetch_add_relaxed(&weft__probe_listening, 1);
		/* The workers' loops switch to timing their polls. */
		weft__loop_restart();
	}
	pthread_mutex_unlock(&p->lock);
	*out = s;
	return 0;
}

void weft_probe_unsubscribe(weft_probe_sub_t *sub)
{
	struct probe *p = &weft__probe;
	weft_probe_sub_t **pp;
	bool last;
	pthread_t thread;

	if (sub && weft__in_collector)
		weft_panic("weft_probe_unsubscribe() called from a probe "
			   "callback: it would wait for itself");
	if (!sub)
		return;
	pthread_mutex_lock(&p->lock);
	for (pp = &p->subs; *pp; pp = &(*pp)->next) {
		if (*pp == sub) {
			*pp = sub->next;
			break;
		}
	}
	if (sub->opts.events) {
		/*
		 * The last one: a gap in listening begins, if the collector
		 * runs on (a subscriber of updates alone); a collector that
		 * stops and starts again forgets it (weft__collector_start()).
		 */
		if (fetch_sub_relaxed(&weft__probe_listening, 1) == 1 &&
		    p->running) {
			weft__collector_gap_open(p);
			/* A pass soon, for the old period's last events. */
			weft__ring_half_full();
		}
		weft__loop_restart();
	}
	/*
	 * The last one out stops the collector and joins it, unless another
	 * unsubscribe is joining it already (a subscriber came and went
	 * meanwhile): that one sees the list empty, or not, when it is done.
	 */
	last = p->subs == NULL && p->running && !p->joining;
	if (last) {
		p->stop = true;
		p->joining = true;
		collector_wake_up();
	}
	thread = p->thread;
	pthread_mutex_unlock(&p->lock);
	if (last) {
		pthread_join(thread, NULL);
		pthread_mutex_lock(&p->lock);
		p->joining = false;
		/* Someone may have subscribed again meanwhile. */
		if (p->subs == NULL) {
			cpu_before_ns += p->stats.collector_cpu_ns;
			weft__collector_stop(p);
			p->running = false;
		} else {
			p->stop = false;
			if (pthread_create(&p->thread, NULL, collector_main,
					   NULL)) {
				/* No collector: the subscribers hear nothing. */
				cpu_before_ns += p->stats.collector_cpu_ns;
				weft__collector_stop(p);
				p->running = false;
			}
		}
		/* Flushers waiting on a collector that is gone: let go. */
		pthread_cond_broadcast(&p->cond);
		pthread_mutex_unlock(&p->lock);
	}
	free(sub);
}

void weft_probe_flush(void)
{
	struct probe *p = &weft__probe;

	/* A callback: the pass it runs in is the flush there is. */
	if (weft__in_collector)
		return;
	pthread_mutex_lock(&p->lock);
	if (p->running)
		flush_locked(p);
	pthread_mutex_unlock(&p->lock);
}

void weft__probe_runtime_attach(weft_runtime_t *rt)
{
	struct probe *p = &weft__probe;

	pthread_mutex_lock(&p->lock);
	p->nruntimes++;
	if (p->nattached == p->attached_cap) {
		size_t ncap = p->attached_cap ? p->attached_cap * 2 : 4;
		weft_runtime_t **n =
			realloc(p->runtimes, ncap * sizeof(*p->runtimes));

		if (n) {
			p->runtimes = n;
			p->attached_cap = ncap;
		}
	}
	/* Without memory for the list, this runtime is never described. */
	if (p->nattached < p->attached_cap) {
		p->runtimes[p->nattached++] = rt;
		if (!p->rt) {
			p->rt = rt;
			p->need_seed = true;
		}
	}
	pthread_mutex_unlock(&weft__probe.lock);
	/*
	 * Zero configuration: recording from start-up (WEFT_TRACE=path) and
	 * the console's socket, for the first runtime.  The runtime knows
	 * only this call, not the server or the recorder.
	 */
	weft__trace_env_start();
	weft__server_env_start(rt);
	weft__metrics_env_start(rt);
}

/*
 * A runtime's destroy is done: its tasks are all completed or cancelled
 * (their end events pushed).  Counted only now, not at detach, which
 * comes first: reconcile() (collector_reconcile.c) must not take the
 * tasks of a runtime still being torn down for another's.
 */
void weft__probe_runtime_gone(void)
{
	pthread_mutex_lock(&weft__probe.lock);
	weft__probe.nruntimes--;
	pthread_mutex_unlock(&weft__probe.lock);
}

void weft__probe_runtime_detach(weft_runtime_t *rt)
{
	struct probe *p = &weft__probe;

	/*
	 * Its last events folded in while it is still the one described:
	 * a long poll that ended just before the destroy (a hung read let
	 * go at shutdown) is told with where its time went, which only the
	 * runtime's workers' records say; after, it read "not known".
	 */
	weft_probe_flush();
	/* Its connections close and its socket goes, if it is ours. */
	weft__server_env_stop(rt);
	weft__metrics_env_stop(rt);
	pthread_mutex_lock(&weft__probe.lock);
	for (size_t i = 0; i < p->nattached; i++) {
		if (p->runtimes[i] == rt) {
			memmove(&p->runtimes[i], &p->runtimes[i + 1],
				(p->nattached - i - 1) * sizeof(*p->runtimes));
			if (--p->nattached == 0) {
				free(p->runtimes);
				p->runtimes = NULL;
				p->attached_cap = 0;
			}
			break;
		}
	}
	if (weft__probe.rt == rt) {
		/*
		 * The oldest runtime left is described next (its live tasks
		 * named on the next pass), or none until one is made.
		 */
		weft__probe.rt = p->nattached ? p->runtimes[0] : NULL;
		weft__probe.need_seed = weft__probe.rt != NULL;
		/* Its workers' records, and the per-worker memory of its
		 * warnings, maxima and steals. */
		weft__collector_workers_reset(&weft__probe);
		/*
		 * Both: sample_workers() takes slot 0 as the oldest while the
		 * window fills, so the next runtime's series starts there
		 * (with the old position, its rates were taken against this
		 * runtime's counters and wrapped to ~1e19 a second).
		 */
		weft__probe.window_fill = 0;
		weft__probe.window_pos = 0;
	}
	pthread_mutex_unlock(&weft__probe.lock);
}

weft_probe_raw_lock_hook weft__probe_raw_hook;

void weft_probe_set_raw_lock_hook(weft_probe_raw_lock_hook hook)
{
	weft__probe_raw_hook = hook;
}

uint64_t weft_probe_current_task(void)
{
	return weft__cur_task_id;
}

void weft_probe_report_lock_held(uint64_t task, const char *name,
				 const char *site, uint64_t held_ns)
{
	uint64_t now, us = held_ns / 1000;

	if (!weft__probe_on())
		return;
	now = weft__probe_clock();
	weft__probe_emit_at(now, WEFT_EV_LOCK_HELD_PENDING, task,
			    (uintptr_t)name,
			    us > UINT32_MAX ? UINT32_MAX : (uint32_t)us);
	weft__probe_emit_at(now, WEFT_EV_LOCK_SITE, task, (uintptr_t)site, 0);
}

void weft_probe_mark(uint64_t a1, uint32_t a2)
{
	WEFT_PROBE_EVENT(MARK, weft__cur_task_id, a1, a2);
}

bool weft_probe_listening(void)
{
	return weft__probe_on();
}

/* ------------------------------------------------- the metrics endpoint */

void weft__probe_metrics_read(weft__probe_metrics_t *out,
			      void (*each)(struct weft_runtime_s *rt,
					   unsigned i, unsigned n, void *arg),
			      void *arg)
{
	struct probe *p = &weft__probe;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&p->lock);
	/*
	 * Warnings by kind since start, for weft_warnings_total{kind}:
	 * counted as each is raised or folded (collector_warnings.c), by the
	 * collector and by the runtime monitor with nobody listening.
	 */
	memcpy(out->warnings, p->warn_kind_count, sizeof(out->warnings));
	out->events_dropped = p->drops_total;
	out->collector_cpu_ns = cpu_before_ns + p->stats.collector_cpu_ns;
	out->collector_running = p->running;
	for (weft_probe_sub_t *s = p->subs; s; s = s->next)
		out->subscribers++;
	/*
	 * The runtimes, under probe.lock: one cannot be destroyed meanwhile
	 * (weft__probe_runtime_detach() waits for it).  @each reads only
	 * their counters, which takes no lock a worker takes but the
	 * blocking pool's, for six loads (weft_runtime_metrics()).
	 */
	out->runtimes = (unsigned)p->nattached;
	if (each)
		for (size_t i = 0; i < p->nattached; i++)
			each(p->runtimes[i], (unsigned)i,
			     (unsigned)p->nattached, arg);
	pthread_mutex_unlock(&p->lock);
}
