/* SPDX-License-Identifier: MIT */
/*
 * The collector's state: shared by probe.c (plumbing, thread) and
 * collector.c (the passes).  Everything here is guarded by probe.lock and
 * touched only by the collector thread and by subscribe/unsubscribe.
 */
#ifndef WEFT_COLLECTOR_INTERNAL_H
#define WEFT_COLLECTOR_INTERNAL_H

#include <pthread.h>

#include "weft/probe.h"

#include "probe_internal.h"
#include "runtime_internal.h"

typedef struct ring_entry_s {
	weft_ring_t ring;
	uint16_t worker;
	_Atomic bool orphan; /* the thread is gone: drain, then free */
	bool last;           /* orphaned before this pass's snapshot */
	uint64_t drops_seen;
	struct ring_entry_s *next;
} ring_entry_t;

/* Rings registered since the last drain (probe.c; drain() takes them). */
extern _Atomic(ring_entry_t *) weft__probe_new_rings;

struct weft_probe_sub_s {
	weft_probe_sub_opts_t opts;
	bool need_full;
	weft_probe_sub_t *next;
};

/* One task as the collector tracks it. */
typedef struct task_rec_s {
	weft_probe_task_t pub;
	weft_hist_t *hist;        /* [0] polls, [1] scheduling delays */
	uint64_t idle_since;      /* when its last poll returned PENDING */
	uint64_t woken_at;        /* when it was woken (SCHEDULED) */
	uint64_t wake_in_poll;    /* a wake seen while it may have run */
	int64_t outstanding;      /* wakers held elsewhere (clones - drops) */
	uint64_t lost_check_at;   /* idle with no waker since */
	uint64_t last_long_warn;
	bool seen_spawn;          /* spawned while we watched */
	bool changed;
	bool in_done;
	bool retired;             /* off the done list, freed once published */
	bool in_owned;            /* on the runtime's list (reconcile()) */
	bool end_unseen;          /* finished by reconcile() */
	uint16_t once;            /* warnings raised once per task */
	struct task_rec_s *hnext; /* hash chain */
	struct task_rec_s *cnext; /* changed list */
	struct task_rec_s *dnext; /* finished, oldest first */
	/* The live list (tasks not finished): check_idle_tasks() walks it,
	 * not the table, where the finished tasks kept for retain_ns (six
	 * seconds of a service's requests) outnumber them by thousands. */
	struct task_rec_s *lnext, *lprev;
} task_rec_t;

typedef struct worker_window_s {
	uint64_t at_ns;
	weft_worker_metrics_t m;
} worker_window_t;

#define WINDOW 50           /* passes kept per worker (~1 s) */
#define WARN_KEEP 1024      /* warnings kept */
#define MAX_PROBE_WORKERS 64

/*
 * Steal storm: a worker whose polls are mostly tasks it stole (at least
 * a quarter of them, four times the others' mean) at 1,000 or more
 * stolen tasks a second.
 */
#define STEAL_STORM_PER_S 1000.0
#define STEAL_STORM_RATE 0.25
#define STEAL_STORM_FACTOR 4.0
bool weft__probe_steal_storm(const double *rate, const double *per_s,
			     unsigned n, unsigned i);

struct probe {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* flushers wait here (the collector on a futex) */
	pthread_t thread;
	bool running;
	bool need_seed;       /* name the runtime's live tasks next pass */
	bool stop;
	bool joining; /* an unsubscribe is joining the collector thread */
	bool config_loaded;
	uint64_t flush_ticket;
	uint64_t flush_requested;
	uint64_t flush_done;
	uint64_t passes;
	weft_probe_config_t config;
	weft_probe_sub_t *subs;
	ring_entry_t *rings;
	weft_runtime_t *rt; /* the runtime whose workers we describe */
	weft_runtime_t *runtimes; /* every attached one, oldest first */

	/* Collector state (collector.c). */
	task_rec_t **table;
	size_t table_size;
	size_t ntasks;
	task_rec_t *last_found; /* task_find's one-entry cache */
	struct pool {
		void *free;   /* items given back, chained by first word */
		void *blocks; /* every block, chained by first word */
		char *next;   /* the current block's unused rest */
		size_t left;  /* items there */
	} rec_pool, hist_pool;
	task_rec_t *changed;
	size_t nchanged;  /* on the changed list */
	task_rec_t *live; /* not finished (in_done unset), newest first */
	task_rec_t *done_head;
	task_rec_t *done_tail;
	size_t ndone; /* on the done list */
	weft_probe_worker_t workers[MAX_PROBE_WORKERS];
	worker_window_t window[MAX_PROBE_WORKERS][WINDOW];
	unsigned window_pos;
	unsigned window_fill;
	uint64_t worker_poll_started[MAX_PROBE_WORKERS];
	uint64_t worker_yield_warned[MAX_PROBE_WORKERS];
	uint64_t worker_storm_warned[MAX_PROBE_WORKERS];
	uint64_t worker_max_poll[MAX_PROBE_WORKERS];
	weft_probe_warning_t warnings[WARN_KEEP];
	uint64_t warn_seq;
	uint64_t warn_seq_published;
	/*
	 * A pass's events: each ring's run (head to the tail seen at the
	 * pass's start) merged by time a chunk at a time into @chunk, small
	 * enough to stay in cache while it is folded in and handed on.
	 */
	weft_event_t *chunk; /* CHUNK_EVENTS long */
	struct seg_s {
		ring_entry_t *e;
		uint64_t pos; /* next slot to take */
		uint64_t end; /* the tail seen at the pass's start */
		uint64_t ts;  /* the stamp at pos (while pos < end) */
	} * segs;             /* one run per ring with events */
	struct seg_s **heap;  /* the runs not yet taken, earliest head first */
	size_t segs_cap;
	size_t nsegs_pass; /* runs in this pass's snapshot */
	bool flush_rings;  /* give the lines taken back (take_chunk()) */
	/* The changed tasks, oldest first, as task_changed() adds them while
	 * there is room (publish()'s, kept from pass to pass). */
	const weft_probe_task_t **pub_changed;
	size_t pub_cap;
	/* The pass's events as records, for every subscriber that takes
	 * them all (weft__collector_event_records()); NULL until needed. */
	struct pass_records *records;
	weft_probe_stats_t stats;
	uint64_t events_total;
	uint64_t drops_total;
	uint64_t drops_warned_at;
	uint64_t drops_reconciled; /* drops_total at the last reconcile() */
	uint64_t reconciled_at;
	unsigned nruntimes;        /* made and not yet destroyed, attached or not */
	uint64_t last_pass_ns;
	uint64_t tiny_count;
	uint64_t tiny_warned_at;
	bool oversub_warned;
	double fill;         /* the fullest ring at the last snapshot, 0..1 */
	uint64_t last_dt_ns; /* from the pass before the last to the last */
	/* account_cpu(): the thread's CPU time at the collector's start and
	 * at the start of the current window (at cpu_win_at). */
	bool cpu_base_set;
	uint64_t cpu_base;
	uint64_t cpu_win_at;
	uint64_t cpu_win_cpu;
};

extern struct probe weft__probe;

/* collector.c */
int weft__collector_start(struct probe *p);
void weft__collector_stop(struct probe *p);
void weft__collector_pass(struct probe *p, uint64_t now);
uint64_t weft__collector_interval(struct probe *p);
const weft_probe_task_t *weft__collector_task(struct probe *p, uint64_t id);
int weft__collector_event_records(struct probe *p, const weft_event_t *ev,
				  size_t n, const uint8_t **rec, size_t *len);

#endif /* WEFT_COLLECTOR_INTERNAL_H */
