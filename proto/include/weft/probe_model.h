/* SPDX-License-Identifier: MIT */
/*
 * The probe's model: what a collector knows of tasks, workers and
 * warnings, as the probe hands it to its subscribers (weft/probe.h) and
 * as the protocol carries it (weft/wire.h encodes and decodes these).
 * Types only, in libweft-wire, so that a client of the protocol needs
 * nothing of the probe; the worker counters are the runtime's public
 * weft_worker_metrics_t (weft/metrics.h, types only here too).
 *
 * Timestamps are CLOCK_MONOTONIC nanoseconds.
 *
 * The probe fills these and hands them out in arrays, so their sizes are
 * libweft.so's ABI: each one that may grow ends with reserved words,
 * written as zero, that a later version takes new fields from
 * (weft/common.h).
 */
#ifndef WEFT_PROBE_MODEL_H
#define WEFT_PROBE_MODEL_H

#include "weft/common.h"
#include "weft/metrics.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Warning kinds, one X-macro list (names for tools and the protocol). */
#define WEFT_WARNING_KINDS(X)                                                  \
	X(LOCK_HELD_ACROSS_AWAIT, 1, "lock-held-across-await")                \
	X(LONG_POLL, 2, "long-poll")                                          \
	X(NEVER_YIELDED, 3, "never-yielded")                                  \
	X(LOST_WAKER, 4, "lost-waker")                                        \
	X(SELF_WAKES, 5, "self-wakes")                                        \
	X(LARGE_FUTURE, 6, "large-future")                                    \
	X(SCHEDULING_DELAY, 7, "scheduling-delay")                            \
	X(STEAL_STORM, 8, "steal-storm")                                      \
	X(EVENTS_DROPPED, 9, "events-dropped")                                \
	X(TINY_TASKS, 10, "tiny-tasks")                                       \
	X(OVERSUBSCRIBED, 11, "oversubscribed")                                \
	X(PREEMPTED, 12, "preempted")                                         \
	X(CONTENTION, 13, "contention")                                       \
	X(BLOCKING_QUEUE, 14, "blocking-queue")                               \
	X(CHANNEL_FULL, 15, "channel-full")                                   \
	X(TASK_LEAK, 16, "task-leak")                                         \
	X(WAKE_BURST, 17, "wake-burst")                                       \
	X(DEADLOCK, 18, "deadlock")

typedef enum weft_warning_kind_e {
#define WEFT_X_ENUM(name, value, label) WEFT_WARN_##name = value,
	WEFT_WARNING_KINDS(WEFT_X_ENUM)
#undef WEFT_X_ENUM
	WEFT_WARN_MAX
} weft_warning_kind_t;

/**
 * weft_warning_kind_name() - "long-poll", ...; "?" if unknown.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: the label, a static string; "?" for an unknown value.
 */
WEFT_EXTERN const char *weft_warning_kind_name(unsigned kind);

typedef enum weft_task_state_e {
	WEFT_TASK_IDLE = 0,      /* pending, waiting for a wake */
	WEFT_TASK_SCHEDULED = 1, /* woken, queued */
	WEFT_TASK_RUNNING = 2,
	WEFT_TASK_DONE = 3,
} weft_task_state_t;

/*
 * A log-linear histogram of durations in ns: bucket 0 holds values under
 * 64 ns, then two buckets per power of two up to 2^38 ns (~275 s); larger
 * values count as outliers (and in max_ns).
 */
#define WEFT_HIST_BUCKETS 65
/* Fixed for good (weft/common.h): its layout is its format. */
typedef struct weft_hist_s {
	uint32_t buckets[WEFT_HIST_BUCKETS];
	uint64_t count;
	uint64_t sum_ns;
	uint64_t max_ns;
	uint64_t outliers; /* above the last bucket's range */
} weft_hist_t;

/**
 * weft_hist_record() - add one value.
 *
 * Context: any thread, one at a time per @h; a task may call it (never
 * blocks).
 */
WEFT_EXTERN void weft_hist_record(weft_hist_t *h, uint64_t ns);
/**
 * weft_hist_percentile() - the value at @p (0..100), bucket-accurate.
 *
 * Context: any thread, one at a time per @h; a task may call it (never
 * blocks).
 * Return: the upper bound of the bucket holding the @p-th percentile, at
 * most max_ns; 0 for an empty histogram.
 */
WEFT_EXTERN uint64_t weft_hist_percentile(const weft_hist_t *h, double p);
/**
 * weft_hist_bucket_upper() - the upper bound (ns) of bucket @i.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: the bound, in ns (@i is not checked: only 0..WEFT_HIST_BUCKETS -
 * 1 mean anything).
 */
WEFT_EXTERN uint64_t weft_hist_bucket_upper(unsigned i);

/* A task's waits on one resource (weft_probe_task_t.waited).  Fixed for
 * good (weft/common.h): an array in weft_probe_task_t. */
#define WEFT_TASK_WAITED 4
typedef struct weft_probe_task_wait_s {
	uint64_t res; /* weft_probe_resource_t id */
	uint64_t total_ns;
	uint32_t waits;
} weft_probe_task_wait_t;

/* What the collector knows of one task.  May grow (weft/common.h). */
typedef struct weft_probe_task_s {
	uint64_t id;
	uint64_t parent;
	const char *name;  /* static string or NULL */
	const char *file;  /* spawn location (static string) or NULL */
	uint32_t line;
	uint32_t state_size;
	uint8_t kind;      /* 0 future, 1 fiber */
	uint8_t state;     /* weft_task_state_t */
	uint16_t last_worker;
	int32_t status;    /* when done */
	uint64_t spawned_ns;
	uint64_t finished_ns; /* 0 while live */
	uint64_t polls;
	uint64_t busy_ns;
	uint64_t scheduled_ns; /* woken, waiting for a worker */
	uint64_t idle_ns;      /* pending, waiting for a wake */
	uint64_t wakes;
	uint64_t self_wakes;
	/*
	 * waker_clones: clones of its waker made (weft_waker_clone(); the
	 * waker a poll is lent is not one).  waker_drops: clones dropped
	 * (weft_waker_drop()), whether woken by reference before or not.
	 * A wake by value (weft_waker_wake(): a joiner's, a oneshot's or a
	 * blocking job's waiter, I/O, timers, notify) uses a clone up with
	 * no drop, and is counted in neither: clones - drops is the wakers
	 * held plus those woken by value, not the wakers held.
	 */
	uint64_t waker_clones;
	uint64_t waker_drops;
	uint64_t max_poll_ns;
	uint32_t warnings;     /* bit (1 << kind) per warning raised */
	uint32_t locks_held;   /* weft_mutex_t held when the last poll ended */
	/*
	 * Where it is parked: the file and line of the await its last
	 * PENDING poll stopped at (WEFT_AWAIT, weft_await(), ...); NULL and
	 * 0 when not known (never parked, or a poll written by hand).
	 */
	const char *parked_file; /* static string or NULL */
	uint32_t parked_line;
	/*
	 * When its current idle stretch began (the end of its last PENDING
	 * poll, or when it was first heard of): while state is IDLE, its
	 * idle time is idle_ns + (now - idle_since_ns), idle_ns holding
	 * only the stretches a wake has ended.  0 when not idle, and when
	 * not known: a task idle since before the probe listened (seeded
	 * from the runtime's task list) until its next pending poll.
	 */
	uint64_t idle_since_ns;
	/*
	 * The resource it waits on now (weft_probe_resource_t id, RES_WAIT
	 * to RES_WAIT_END), 0 for none; since when, and for what
	 * (weft_resource_op_t).
	 */
	uint64_t waiting_on;
	uint64_t waiting_since_ns;
	uint8_t waiting_op;
	/*
	 * Its total wait per resource (ended waits), for the nwaited
	 * resources it waited on longest, longest first.
	 */
	uint8_t nwaited;
	/*
	 * 1: its spawn was not seen (live before the probe listened, or
	 * its SPAWN dropped): spawned_ns is when the probe first heard of
	 * it, and its age a lower bound.  (The runtime keeps no spawn time:
	 * a task's header has no room for one.)
	 */
	uint8_t spawn_unseen;
	weft_probe_task_wait_t waited[WEFT_TASK_WAITED];
	/* NULL until the task has been polled twice (saves memory). */
	const weft_hist_t *poll_hist;
	const weft_hist_t *sched_hist;
	/*
	 * Its spawn site: the id of the spawn record its name, file, line
	 * and state_size came from (weft.proto's Site), shared by every
	 * task spawned with the same spec; 0 for none (seeded from the
	 * runtime's task list, a spawn whose site's announcement was lost,
	 * or a trace from before sites).
	 */
	uint32_t site;
	uint32_t reserved32_;  /* zero */
	uint64_t reserved_[3]; /* zero (weft/common.h) */
} weft_probe_task_t;

/*
 * A worker's steals from one other worker (weft_probe_worker_t.stolen):
 * the victim's index and the tasks taken from it since start.
 */
#define WEFT_WORKER_STOLEN 16
typedef struct weft_probe_steal_s {
	uint32_t victim;
	uint64_t tasks;
} weft_probe_steal_t;

/*
 * What the collector knows of one worker (rates over the last window).
 * May grow (weft/common.h).
 */
typedef struct weft_probe_worker_s {
	uint16_t index;
	uint8_t state;         /* 0 polling, 1 searching, 2 parked */
	uint64_t current_task; /* being polled now, 0 if none */
	uint64_t poll_started_ns;
	weft_worker_metrics_t counters;
	double polls_per_s;
	double steals_per_s;
	double steal_rate;     /* tasks stolen / polls, over the window */
	double busy_ratio;     /* 0..1 over the window */
	uint64_t mean_poll_ns;
	uint64_t max_poll_ns;  /* over the window */
	uint32_t queue_depth;
	/*
	 * Whom it stole from most, since start: nstolen victims, most tasks
	 * first.  Bounded whatever the worker count (up to 4,096): the
	 * collector counts a worker's steals from at most 32 victims at a
	 * time (the heavy hitters, Space-Saving).  Exact while it stole from
	 * at most 32; past that, a victim's count is the tasks certainly
	 * taken from it (those since it was last tracked), and a victim
	 * stolen from rarely may be missing.  stolen_out is exact: the
	 * tasks every other worker stole from this one.
	 */
	uint8_t nstolen;
	weft_probe_steal_t stolen[WEFT_WORKER_STOLEN];
	uint64_t stolen_out;
	uint64_t events_dropped;  /* by this worker's ring, since start */
	/*
	 * Off-CPU: time the worker's thread was runnable but the OS ran
	 * something else (its /proc schedstat run_delay; parked time is not
	 * off-CPU).  Since the thread started, and its share of the window
	 * busy_ratio covers.  0 where /proc cannot be read.
	 */
	uint64_t off_cpu_ns;
	double off_cpu_ratio; /* 0..1 over the window */
	uint64_t reserved_[4]; /* zero (weft/common.h) */
} weft_probe_worker_t;

/*
 * What the collector knows of one resource (RES_* events): a lock,
 * semaphore, notify, channel, oneshot, countdown, the blocking pool...
 * Holders and waiters are listed up to WEFT_RES_LIST tasks (waiters in
 * arrival order); the counts are whole.  May grow (weft/common.h).
 */
#define WEFT_RES_LIST 8
typedef struct weft_probe_resource_s {
	uint64_t id;
	uint8_t kind;          /* weft_resource_kind_t; 0 if not yet known */
	const char *name;      /* static string or NULL */
	const char *file;      /* where initialised (static string) or NULL */
	uint32_t line;
	uint64_t created_ns;   /* or when first heard of */
	uint64_t dropped_ns;   /* 0 while alive */
	uint32_t nholders;
	uint32_t nwaiters;
	uint64_t holders[WEFT_RES_LIST];
	uint64_t waiters[WEFT_RES_LIST];
	uint64_t owner;        /* the task it serves (a channel's receiver) */
	uint64_t acquires;     /* since first heard of (sends, for a channel) */
	uint64_t waits;        /* waits that ended */
	double acquires_per_s; /* over about the last second */
	/* The oldest wait in progress began at (0: nobody waits). */
	uint64_t oldest_wait_ns;
	/* The longest hold seen: by whom, for how long. */
	uint64_t longest_holder;
	uint64_t longest_hold_ns;
	/* NULL until the first wait (hold) ended. */
	const weft_hist_t *wait_hist;
	const weft_hist_t *hold_hist;
	uint64_t reserved_[4]; /* zero (weft/common.h) */
} weft_probe_resource_t;

/* A warning the collector raised.  May grow (weft/common.h). */
typedef struct weft_probe_warning_s {
	uint64_t seq;
	uint8_t kind;          /* weft_warning_kind_t */
	uint16_t worker;
	uint64_t task;
	const char *task_name;
	const char *file;
	uint32_t line;
	uint64_t at_ns;
	uint64_t value_ns;     /* how long (poll, hold, delay), where it applies */
	bool history;          /* raised before the subscriber subscribed */
	char detail[160];      /* human text, e.g. the lock's name and where taken */
	/*
	 * The warnings this row stands for: 0 for itself alone (read as 1).
	 * A fold's row ("N more from tasks spawned at ... (folded)") says N
	 * warnings not raised as rows of their own, and is no warning
	 * itself: its count is N.  Counting warnings, add max(count, 1) a
	 * row.
	 */
	uint64_t count;
	uint64_t reserved_[3]; /* zero (weft/common.h) */
} weft_probe_warning_t;

/* Runtime-wide figures for one collector pass.  May grow (weft/common.h). */
typedef struct weft_probe_stats_s {
	uint64_t now_ns;
	uint64_t start_ns;
	uint32_t workers;
	uint64_t live_tasks;
	uint64_t spawned_tasks;
	uint64_t global_queue_depth;
	uint64_t events;        /* drained since start */
	uint64_t events_dropped;
	uint64_t warnings; /* raised since start, folded ones included */
	double events_per_s;
	double polls_per_s;
	double steals_per_s;
	const char *clock;      /* how events are stamped */
	/*
	 * What the probe itself costs: the CPU time the collector's passes
	 * took (draining, folding in, and the subscribers' callbacks: the
	 * server's encoding, the recorder's writes), since start and as a
	 * share of one CPU over about the last second.
	 */
	uint64_t collector_cpu_ns;
	double collector_cpu;
	/* The blocking pool, from weft_runtime_metrics(): threads running a
	 * job, jobs waiting for a thread, jobs done since start. */
	uint64_t blocking_busy;
	uint64_t blocking_queued;
	uint64_t blocking_jobs;
	/* Tasks taken for finished without their COMPLETE event (dropped):
	 * found gone from the runtime's task list after drops. */
	uint64_t tasks_end_unseen;
	uint64_t reserved_[8]; /* zero (weft/common.h) */
} weft_probe_stats_t;

/* One collector pass, as handed to subscribers.  May grow (weft/common.h). */
typedef struct weft_probe_update_s {
	const weft_probe_stats_t *stats;
	const weft_probe_task_t *const *tasks; /* changed (or all, first) */
	size_t ntasks;
	const weft_probe_worker_t *workers;
	size_t nworkers;
	const weft_probe_warning_t *warnings;  /* new since the last pass */
	size_t nwarnings;
	bool full;              /* tasks holds every known task */
	/* Changed resources (every known one when full); a resource with
	 * dropped_ns set comes once more, then is forgotten. */
	const weft_probe_resource_t *const *resources;
	size_t nresources;
	uint64_t reserved_[4]; /* zero (weft/common.h) */
} weft_probe_update_t;

#ifdef __cplusplus
}
#endif

#endif /* WEFT_PROBE_MODEL_H */
