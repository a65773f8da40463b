/* SPDX-License-Identifier: MIT */
/*
 * The collector's state: shared by probe.c (plumbing, thread) and the
 * collector's files (the passes): collector.c (the pass, publishing to
 * the subscribers), collector_drain.c (the rings' drain and merge),
 * collector_events.c (events into task and worker records),
 * collector_tasks.c (the record cache), collector_workers.c (worker
 * sampling), collector_reconcile.c (the runtime's owned list) and
 * collector_warnings.c.  Everything here is guarded by probe.lock and
 * touched only by the collector thread and by subscribe/unsubscribe.
 */
#ifndef WEFT_COLLECTOR_INTERNAL_H
#define WEFT_COLLECTOR_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "weft/probe.h"

#include "probe_internal.h"
#include "runtime_probe.h"

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
	/*
	 * A full update asked for from another thread without probe.lock
	 * (weft__sub_ask_full(): the server's thread, which must not wait
	 * for a long pass): publish() takes it into need_full.  Relaxed: it
	 * carries no data (what the asker wants is under its own lock), and
	 * the exchange there never loses one set meanwhile.
	 */
	_Atomic bool ask_full;
	/* Not yet published to: its first update carries every warning
	 * kept, those up to since_seq (raised before it came) marked. */
	bool fresh;
	uint64_t since_seq;
	weft_probe_sub_t *next;
};

/* One task as the collector tracks it. */
typedef struct task_rec_s {
	weft_probe_task_t pub;
	weft_hist_t *hist;      /* [0] polls, [1] scheduling delays */
	uint64_t idle_since;    /* when its last poll returned PENDING */
	uint64_t woken_at;      /* when it was woken (SCHEDULED) */
	uint64_t wake_in_poll;  /* a wake seen while it may have run */
	int64_t outstanding;    /* clones - drops: see poll_clones() */
	uint64_t lost_check_at; /* idle with no waker since */
	uint64_t last_long_warn;
	/*
	 * Polls on another worker than the one before (or, for the first,
	 * than the one that spawned it): steals, as far as the events tell
	 * (a STEAL names no task).  moved_at: the last one.  spawn_worker:
	 * the spawning worker until the first poll.
	 */
	uint32_t moved;
	/*
	 * The longest scheduling delay said of it, in us (0: none): the
	 * next is said only at more than twice that (delay_news()).
	 */
	uint32_t delay_said_us;
	uint64_t moved_at;
	uint16_t spawn_worker;
	bool seen_spawn;  /* spawned while we watched */
	bool retired;     /* off the done list, freed once published */
	bool in_owned;    /* on the runtime's list (reconcile) */
	bool end_unseen;  /* finished by reconcile */
	bool parked_seen; /* a POLL's site or PARKED_AT: events say where */
	/* outstanding not to be trusted: an early waker count may be lost
	 * (weft__collector_early_waker()); no lost-waker check. */
	bool wakers_unsure;
	uint16_t once;    /* warnings raised once per task */
	/*
	 * The worker whose ring told its last wake or spawn (its queue the
	 * task waited in, unless stolen), WEFT_EVENT_NO_WORKER for another
	 * thread's (the inject queue).  Not kept by poll_fast(): a yield's
	 * requeue is the polling worker's, as its wake was.
	 */
	uint16_t woken_on;
	/*
	 * Five of the fields poll_fast() (collector_events.c) tests, in one
	 * word it compares with one instruction (TASK_FAST_WORD: changed and
	 * fast_listed TASK_FAST_CLEAN, and none of the others).
	 * fast_listed: TASK_FAST_UNLISTED, or on the list of records with
	 * polls poll_fast() took, for the chunk under way: LISTED, or CLEAN
	 * while polls it took are not folded in (fast_n not 0: set by the
	 * poll that counted one there, cleared by the fold,
	 * weft__collector_fast_fold(), which every lookup of the record
	 * makes).  Clean, nothing but poll_fast() has touched the record
	 * since that poll, which left it with its histograms, SCHEDULED, no
	 * wake_in_poll, its busy-wait warning said and last_worker a slot
	 * of p->wk (none of them changes but by an event's lookup, or
	 * between chunks): poll_fast() tests them only when it is not.  The wake burst's fields: see below.
	 */
	union {
		struct {
			bool changed;
			bool in_done;
			bool self_in_poll; /* woke itself in the poll under way */
			uint8_t fast_listed; /* TASK_FAST_* */
			uint32_t wake_seq;
		};
		uint64_t fast_word;
	};
	/*
	 * Polls poll_fast() took, of a task whose busy-wait warning was said
	 * (so that nothing in the chunk reads its counts): how many, their
	 * time and their scheduling delays, not yet added to pub's polls,
	 * wakes, self_wakes, busy_ns, scheduled_ns, to self_polls,
	 * self_poll_ns, nor to the histograms' counts and sums (their buckets
	 * and maxima are).  weft__collector_fast_fold() adds them: on the
	 * record's next lookup (weft__collector_task_find()) and at the
	 * chunk's end, before anything else reads them.  Their time is not
	 * summed a poll: each such poll starts where its delay from the last
	 * one's end (woken_at) ends, and ends where the next one's delay
	 * starts, so that their delays and times add up to woken_at less
	 * fast_base, woken_at when the record went clean (TASK_FAST_CLEAN:
	 * fast_n is 0 until then), and their time is that less fast_delay.
	 */
	uint32_t fast_n;
	uint64_t fast_base, fast_delay;
	/*
	 * The last eight bytes of the one POLL poll_fast() may take of this
	 * task (weft__collector_poll_key(): a2 exactly WEFT_POLL_YIELDED,
	 * worker pub.last_worker, kind POLL, no flags), set wherever
	 * last_worker is: the chunk's loop tells such a poll from every
	 * other event with one compare of the event's word.
	 */
	uint64_t fast_key;
	struct task_rec_s *fnext; /* the fast list, while fast_listed */
	uint32_t self_polls;      /* polls that ended woken by themselves */
	uint64_t self_poll_ns;    /* and their time */
	struct task_rec_s *hnext; /* hash chain */
	struct task_rec_s *cnext; /* changed list */
	/* The live list (tasks not finished):
	 * weft__collector_check_idle_tasks() walks it, not the table, where
	 * the finished tasks kept for retain_ns (six seconds of a service's
	 * requests) outnumber them by thousands. */
	struct task_rec_s *lnext, *lprev;
	/*
	 * Task leaks and wake bursts (collector_leak.c): the spawn site it
	 * counts in while live (NULL: none), its neighbours there in spawn
	 * order (oldest first), and the waking poll that woke it last, in
	 * the run of wakes of worker slot wake_slot (wake_seq 0: none, or
	 * polled since).
	 */
	struct leak_site *site;
	struct task_rec_s *snext, *sprev;
	uint16_t wake_slot; /* wake_seq: in fast_word, above */
} task_rec_t;

/* task_rec_t's fast_listed. */
#define TASK_FAST_UNLISTED 0u /* not on the chunk's fast list */
#define TASK_FAST_CLEAN 1u    /* listed, and as poll_fast() left it */
#define TASK_FAST_LISTED 2u   /* listed, looked up since */

/* fast_word when changed is set, fast_listed is TASK_FAST_CLEAN and
 * in_done, self_in_poll, wake_seq are not (bools are 0 or 1: the word
 * has no other bit set).  TASK_FAST_LISTED_BITS: fast_listed's. */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define TASK_FAST_WORD ((uint64_t)1 | (uint64_t)TASK_FAST_CLEAN << 24)
#define TASK_FAST_LISTED_BITS ((uint64_t)0xff << 24)
#else
#define TASK_FAST_WORD ((uint64_t)1 << 56 | (uint64_t)TASK_FAST_CLEAN << 32)
#define TASK_FAST_LISTED_BITS ((uint64_t)0xff << 32)
#endif
_Static_assert(offsetof(task_rec_t, changed) ==
			       offsetof(task_rec_t, fast_word) &&
		       offsetof(task_rec_t, fast_listed) ==
			       offsetof(task_rec_t, fast_word) + 3 &&
		       sizeof(bool) == 1,
	       "task_rec_t's fast_word starts with changed");

/*
 * An event's a2, worker, kind and flags as one word (they are its last
 * eight bytes), read through memcpy: the same bytes whatever the byte
 * order, compared with a word made the same way.
 */
static inline uint64_t weft__collector_event_word(const weft_event_t *ev)
{
	uint64_t w;

	memcpy(&w, (const char *)ev + offsetof(weft_event_t, a2), sizeof(w));
	return w;
}

/* task_rec_t's fast_key for a task last polled on @worker. */
static inline uint64_t weft__collector_poll_key(uint16_t worker)
{
	const weft_event_t e = { .a2 = WEFT_POLL_YIELDED,
				 .worker = worker,
				 .kind = WEFT_EV_POLL };

	return weft__collector_event_word(&e);
}
_Static_assert(offsetof(weft_event_t, a2) + sizeof(uint64_t) ==
		       sizeof(weft_event_t),
	       "an event's a2, worker, kind and flags are its last word");

/* One resource as the collector tracks it (collector_resources.c). */
typedef struct res_rec_s res_rec_t;

typedef struct worker_window_s {
	uint64_t at_ns; /* the pass's time: the counters' rates */
	weft_worker_metrics_t m;
	uint64_t off_cpu_ns; /* run_delay, when off_cpu_read */
	uint64_t on_cpu_ns;  /* schedstat's first field, likewise */
	/*
	 * When those two were read: between sched_from_ns and sched_at_ns
	 * (clock reads right before and after).  The pass's time came
	 * before its events were folded in, which under load took long
	 * enough for a poll to begin in between: a sample that seemed to
	 * come before the poll held part of it, and the poll's CPU time
	 * read as "asleep in the kernel".  The reader can be held off its
	 * CPU between the reads, so each use takes the bound that cannot
	 * blame a task (weft__collector_split_of()).
	 */
	uint64_t sched_from_ns, sched_at_ns;
	bool off_cpu_read;
} worker_window_t;

#define WINDOW 50              /* passes kept per worker (~1 s) */
#define EARLY_WAKERS 64        /* early waker counts held, by id bits */
#define EARLY_PASSES 8         /* passes one waits for its record */
#define WARN_KEEP 1024         /* warnings kept */
#define FOLD_SLOTS 64          /* kinds and spawn sites folded at once */
#define LOCK_HOLDS 64          /* locks held across awaits, awaiting release */
#define LOCK_PENDS 16          /* LOCK_HELD_PENDINGs awaiting their LOCK_SITE */
#define LARGE_PENDS 16 /* large futures' SPAWN_INFOs awaiting SPAWN_LOC */
#define LOCK_EARLY 4           /* LOCK_HELD_ENDs read before their LOCK_SITE */
/*
 * How far an early LOCK_HELD_END may read as before its hold's pending
 * and still be its end: the two are stamped in raw ticks and converted
 * in different passes, between which the clock's rate is refined, so
 * one moment converts to two ns a little apart (test_collector's
 * test_lock_released_before_site failed 4 runs in 20 so).  A release of
 * an earlier hold of the same task and lock, left early, is older by
 * far more than this.
 */
#define LOCK_EARLY_SLACK_NS 1000000u
#define OTHER_ACQ_RES 4        /* resources the other threads acquired, kept */
#define STEAL_TRACKED 32       /* victims counted per thief (Space-Saving) */
#define PROBE_MAX_WORKERS 4096 /* the runtime's bound (runtime.c) */

/*
 * What the collector keeps of one worker beside its published record
 * (struct probe's wk[], as many as workers[]: both sized from the
 * runtime's worker count and the rings' workers, grown as needed by
 * weft__collector_workers_fit()).
 */
typedef struct worker_rec_s {
	worker_window_t window[WINDOW];
	uint64_t yield_warned;
	/* The poll past the threshold the passes have looked at (its raw
	 * start), and how many passes have (collector_workers.c). */
	uint64_t look_started;
	uint32_t look_passes;
	uint64_t storm_warned;
	uint64_t preempt_warned;
	/* A look at its thread for weft__collector_os_held(), one a pass
	 * (held_pass: p->passes + 1 when read, 0 never). */
	uint64_t held_pass, held_on, held_off, held_at;
	bool held_read;
	/*
	 * Its last long poll (collector_events.c): what a scheduling delay
	 * in its time waited behind, named in its warning.  by_os: the OS
	 * held the worker off its CPU most of it.
	 */
	struct worker_long_s {
		uint64_t task, start, end;
		bool by_os;
		bool by_rt; /* and by_os: the runtime's submission's wait */
		char name[40];
	} lng;
	/*
	 * Its last wait for a weft_mutex_t (a LOCK_ACQUIRE that waited a
	 * millisecond or more): the poll it came in names the lock as what
	 * blocked its worker (collector_events.c).
	 */
	struct worker_lock_wait_s {
		uint64_t task, at, wait_ns;
		const char *name;
	} lock_wait;
	/*
	 * Its waits for the runtime's own locks (RT_WAIT) since its last
	 * long poll: of @task, the first and last begun at @first and @last
	 * (ns), @ns in all, the last @last_ns.  A poll's own time less them
	 * is the task's (collector_events.c).
	 */
	struct worker_rt_wait_s {
		uint64_t task, first, last, ns, last_ns;
	} rt_wait;
	/* Steal-storm bursts (passes entering the storm) since the last
	 * warning, and whether the last pass was in one: every burst is
	 * counted in a warning, only the text is rate-limited. */
	uint32_t storm_bursts;
	bool in_storm;
	/* A run of wakes open in its slot (collector_leak.c), so a POLL
	 * looks no further where none is (nearly every one). */
	bool run_open;
	uint64_t max_poll;
	uint64_t drops; /* by its ring */
	/*
	 * Its thread's /proc schedstat, for its off-CPU time
	 * (collector_workers.c): opened once its tid is known, kept open
	 * for that tid, and closed when the described runtime changes.
	 * state: collector_workers.c's SCHED_*, 0 (zeroed) not yet open.
	 */
	struct worker_sched_s {
		int fd;
		int32_t tid;
		uint8_t state;
	} sched;
	/* The last RES_ACQUIRE on it, for the RES_SITE that follows. */
	struct res_acq_s {
		uint64_t task, res;
	} res_last_acq;
	/*
	 * Its steals by victim (STEAL events): the heavy hitters by
	 * Space-Saving, so bounded at any worker count.  A victim not held
	 * takes the slot of the least count, from that count on (err: what
	 * it started from, an overestimate bound).  count 0: free.
	 */
	struct steal_slot_s {
		uint32_t victim;
		uint64_t count, err;
	} steals[STEAL_TRACKED];
} worker_rec_t;

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
	bool need_seed; /* name the runtime's live tasks next pass */
	/* The listening generation whose lock waits were read from the
	 * runtime (weft__collector_seed_waits()), 0: none yet. */
	uint32_t waits_gen;
	/*
	 * A gap in listening: the last subscriber of events left while the
	 * collector runs on (a subscriber of updates alone keeps it), so
	 * it hears nothing until one comes again (weft__collector_gap()).
	 * Meanwhile no warning is raised of what it heard before: its ends
	 * come unheard.  gap_passes: p->passes when listening fell (none
	 * since: the old period's last events may be unfolded).
	 * gap_reconcile: the owned list to be read at the next pass (tasks
	 * that ended or began in the gap).  Under probe.lock.
	 */
	bool gap_open, gap_reconcile;
	uint64_t gap_passes;
	/*
	 * A seed under way over several passes (collector_reconcile.c):
	 * bit i, owned-list shard i is still to be read (0: no seed under
	 * way); the next to read; the buffer read into, kept meanwhile.
	 * seed_at_once, seed_first, seed_pass: the sizes (0: the defaults
	 * there; tests set them, probe.lock held).
	 */
	uint64_t seed_shards;
	/* The last reconcile left tasks of the owned list with no record
	 * (RECONCILE_NEW_MAX made): the next goes on. */
	bool reconcile_more;
	/*
	 * The highest id the seed's first read saw: a COMPLETE of a task not
	 * known, up to it, while the seed is under way, makes no record (it
	 * was live then and ended before its shard was read: no name, and
	 * its end's time for a spawn time; collector_events.c).
	 */
	uint64_t seed_max_id;
	unsigned seed_next;
	weft__task_info_t *seed_buf;
	size_t seed_cap;
	uint32_t seed_at_once, seed_first, seed_pass;
	/* The next pass seeds whole (weft__sub_seed_whole()). */
	bool seed_whole;
	size_t seed_room; /* weft__sub_seed_room()'s, at the last publish */
	bool stop;
	bool joining; /* an unsubscribe is joining the collector thread */
	bool config_loaded;
	uint64_t flush_ticket;
	uint64_t flush_requested;
	uint64_t flush_done;
	uint64_t passes;
	/*
	 * Waker events (WAKER_CLONE, WAKER_DROP, a WAKE by value) of a task
	 * with no record yet, held for the record's creation to settle
	 * (collector_tasks.c, weft__collector_early_waker()).  early_pass:
	 * the collector's passes (weft__collector_pass()); unsure_until:
	 * records made before that pass get wakers_unsure.
	 */
	struct early_waker {
		uint64_t id; /* 0: free */
		uint64_t pass;
		int32_t delta; /* clones - drops - wakes by value */
		uint32_t clones, drops;
	} early[EARLY_WAKERS];
	unsigned nearly;
	uint64_t early_pass, early_unsure_until;
	weft_probe_config_t config;
	weft_probe_sub_t *subs;
	ring_entry_t *rings;
	weft_runtime_t *rt; /* the runtime whose workers we describe */
	/* Every attached runtime, oldest first (probe.c). */
	weft_runtime_t **runtimes;
	size_t nattached;
	size_t attached_cap;

	/* Collector state (collector*.c). */
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
	/*
	 * The finished tasks kept (in_done), oldest first: a ring of
	 * done_cap entries (a power of two, or 0), ndone of them from
	 * done_first.  Not a list through the records: weft__collector_retire()
	 * reads the oldest's time here and fetches the records it is about
	 * to free well ahead, where a list made it wait on each record in
	 * turn, freed a few thousand finishes after it was last touched
	 * (perf, weft-demo /fast-task: a tenth of the collector's time).
	 */
	struct done_ent {
		task_rec_t *t;
		/* Its finished_ns when it finished (a late COMPLETE may
		 * lower the record's since: retired up to a pass late, never
		 * early). */
		uint64_t finished_ns;
	} * done;
	size_t done_cap, done_first;
	size_t ndone; /* in done */
	/*
	 * Per worker: the published records and the collector's own, both
	 * nworker_slots long (collector_workers.c grows them; an index past
	 * them is a worker whose memory could not be had, skipped).
	 */
	weft_probe_worker_t *workers;
	worker_rec_t *wk;
	unsigned nworker_slots;
	/*
	 * poll_fast()'s one test of a poll's duration against its worker
	 * (collector_events.c), a word a slot (nworker_slots long, grown
	 * with wk): a duration under it is under long_poll_ns, not over the
	 * worker's max_poll, and the worker has no wake run open.  Never
	 * above min(max_poll + 1, long_poll_ns), and 0 while run_open: 0 at
	 * each chunk's start (the config, and max_poll reset between
	 * chunks) and when a run opens (collector_leak.c), raised by a
	 * poll poll_fast() took past it.  Under that bound a poll merely
	 * takes the longer way, which sets it again.
	 */
	uint64_t *wk_gate;
	/* Their schedstat files open, and how many may be (0: not yet
	 * known; collector_workers.c). */
	unsigned sched_open;
	unsigned sched_budget;
	unsigned window_pos;
	unsigned window_fill;
	weft_probe_warning_t warnings[WARN_KEEP];
	/*
	 * Floods folded (collector_warnings.c): per kind and spawn site, the
	 * first FOLD_FREE warnings of a window are rows, the rest counted
	 * and said in one row when the window closes, at a flush and at the
	 * collector's stop.  folded_total: the warnings those rows stand
	 * for.
	 */
	struct fold_s {
		uint8_t kind;
		const char *name, *file;
		uint32_t line;
		uint16_t worker;
		uint32_t raised;
		uint64_t window_start, folded, value_sum, last_at, last_task;
	} folds[FOLD_SLOTS];
	uint64_t folded_total;
	/*
	 * Every warning by kind since start, folded ones included (a
	 * fold's summary row is not one more): weft_warnings_total{kind}.
	 */
	uint64_t warn_kind_count[WEFT_WARN_MAX];
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
	bool flush_rings;  /* give the lines taken back (drain) */
	/* The changed tasks, oldest first, as weft__collector_task_changed()
	 * adds them while there is room (publish()'s, kept from pass to
	 * pass). */
	const weft_probe_task_t **pub_changed;
	size_t pub_cap;
	/* While publish() calls the subscribers: the pass's own changes, also
	 * when it hands out a full update (weft__sub_pass_changes()), and the
	 * one called (weft__sub_current()).  NULL outside it. */
	const weft_probe_task_t *const *pass_tasks;
	size_t pass_ntasks;
	const weft_probe_resource_t *const *pass_res;
	size_t pass_nres;
	weft_probe_sub_t *pass_sub;
	/* The pass's events as records, for every subscriber that takes
	 * them all (weft__collector_event_records()); NULL until needed. */
	struct pass_records *records;
	weft_probe_stats_t stats;
	uint64_t events_total;
	uint64_t drops_total;
	uint64_t drops_warned_at;
	uint64_t drops_reconciled; /* drops_total at the last reconcile() */
	/*
	 * Where drops fell: per worker's ring, and on other threads' rings
	 * (snapshot()); and when, roughly: the last pass that counted new
	 * drops (drop_to_ns) and the last pass before it that counted none
	 * (drop_from_ns), so a dropped event lies in between.  A scheduling
	 * delay or a lost waker measured across such a window is not raised:
	 * the event that would have told otherwise may be the one dropped.
	 */
	uint64_t other_drops;
	uint64_t clean_pass_ns;
	uint64_t drop_from_ns, drop_to_ns;
	uint64_t drops_suppressed; /* warnings not raised for that */
	uint64_t reconciled_at;
	unsigned nruntimes; /* made and not yet destroyed, attached or not */
	uint64_t last_pass_ns;
	uint64_t tiny_count;
	uint64_t tiny_warned_at;
	/*
	 * The spawn sites of those tiny tasks, the most frequent kept
	 * (Space-Saving, TINY_SITES counters: a site with more than a
	 * TINY_SITES-th of them is among them), so that the warning names
	 * the spawn to batch: its file and line, name, and a task of it.
	 */
	struct tiny_site {
		const char *file, *name;
		uint32_t line;
		uint64_t count, task;
	} tiny_sites[4];
	bool oversub_warned;
	double fill;         /* the fullest ring at the last snapshot, 0..1 */
	uint64_t last_dt_ns; /* from the pass before the last to the last */
	/* account_cpu(): the thread's CPU time at the collector's start and
	 * at the start of the current window (at cpu_win_at). */
	bool cpu_base_set;
	uint64_t cpu_base;
	uint64_t cpu_win_at;
	uint64_t cpu_win_cpu;
	/*
	 * Resources (collector_resources.c): a table by id, the changed
	 * ones, and per worker (and one for the other threads) the last
	 * RES_ACQUIRE, for the RES_SITE that follows it.
	 */
	res_rec_t **res_table;
	size_t res_table_size;
	size_t nres;
	res_rec_t *res_changed;
	size_t nres_changed;
	uint64_t res_overflow; /* resources not tracked (past the bound) */
	uint64_t res_checked_at;
	uint64_t res_rate_at;
	struct res_acq_s other_last_acq; /* the other threads' */
	/*
	 * The resources the other threads acquired last, distinct: those
	 * threads (the blocking pool's) share other_last_acq, so a RES_SITE
	 * whose RES_ACQUIRE a pass took before another thread's (its thread
	 * preempted between the pushes) looks for its holder in these, by
	 * task (site_holder(), collector_resources.c).
	 */
	uint64_t other_acq_res[OTHER_ACQ_RES];
	unsigned other_acq_next;
	/*
	 * Spawn sites met (SITE, SITE_LOC: collector_events.c), by id, for
	 * the SPAWNs that name them; nsites slots (grown to the largest id
	 * met).  A site not met (its announcement dropped) names nothing:
	 * its tasks stay unnamed, never another site's.
	 */
	struct spawn_site {
		const char *name, *file;
		uint32_t line, state_size;
		uint8_t have; /* SITE_HAVE_* */
	} * sites;
	size_t nsites;
	uint64_t sites_unknown; /* SPAWNs of a site not met */
	/*
	 * Await sites met (AWAIT_SITE: collector_events.c), by id, for the
	 * POLLs that name them (WEFT_POLL_SITE_SHIFT); nawaits slots, grown
	 * as sites are.  file NULL: not met, and a POLL naming it parks its
	 * task at a place not known, never at another site.
	 */
	struct await_site {
		const char *file;
		uint32_t line;
	} * awaits;
	size_t nawaits;
	uint32_t awaits_known;   /* slots with a file: what a stream sends */
	uint64_t awaits_unknown; /* POLLs naming an await site not met */
	/* Spawn sites and runs of wakes (collector_leak.c); NULL: off. */
	struct leak_state *leak;
	/*
	 * weft_mutex_t held across an await, heard (LOCK_HELD_PENDING):
	 * its warning waits for the release (LOCK_HELD_END), which says how
	 * long it was held and who blocked meanwhile, or for a second to
	 * pass with it still held (collector_warnings.c).
	 */
	struct lock_hold_s {
		uint64_t task;
		const char *name, *file;
		uint32_t line;
		uint16_t worker;
		uint64_t at, held_ns; /* when heard pending, held so far then */
	} lock_holds[LOCK_HOLDS];
	/*
	 * A LOCK_HELD_PENDING waits here, by task, for its LOCK_SITE: the
	 * two are pushed one after the other, so a pass may snapshot the
	 * ring between them and take the site only in the next pass.
	 * Kept in the pass, the pair was lost then, and with it the
	 * warning (a worker preempted between the pushes: a CI run under
	 * ASan).  One per ring at most is waiting at a pass's end.
	 */
	struct lock_pending {
		uint64_t task; /* 0: a free slot */
		const char *name;
		uint64_t held_ns;
		uint64_t at;
		uint16_t worker;
	} lock_pends[LOCK_PENDS];
	/*
	 * A large future's SPAWN_INFO whose SPAWN_LOC (pushed right after
	 * it) is not read yet: its warning waits for the location, as a
	 * lock's pending waits for its site, across a pass that read the
	 * ring between the two pushes.  Said without it by the end of the
	 * pass after (its SPAWN_LOC dropped), or at once when the slots are
	 * full.  task 0: a free slot.
	 */
	struct large_pending {
		uint64_t task;
		unsigned ends; /* pass ends since its SPAWN_INFO */
	} large_pends[LARGE_PENDS];
	/*
	 * A LOCK_HELD_END that found no hold: its site not read yet (the
	 * release, on another ring, read by a pass that had the pending
	 * and not the site pushed after it, or neither).  Kept for the
	 * site to find, which says the warning then, as released.
	 */
	struct lock_early {
		uint64_t task; /* 0: a free slot */
		const char *name;
		uint64_t at;
		uint32_t blocked;
	} lock_early[LOCK_EARLY];
	unsigned lock_early_next;
};

extern struct probe weft__probe;

/* A path's last part: a warning's detail has room for a file, not a path. */
static inline const char *weft__base_name(const char *path)
{
	const char *s = path ? strrchr(path, '/') : NULL;

	return s ? s + 1 : path;
}

/*
 * Whether events were dropped between @from and @to (ns), as far as the
 * last window of drops tells (see drop_from_ns).
 */
static inline bool weft__collector_across_drops(const struct probe *p,
						uint64_t from, uint64_t to)
{
	return p->drop_to_ns && from <= p->drop_to_ns && to >= p->drop_from_ns;
}

/* collector.c */
int weft__collector_start(struct probe *p);
void weft__collector_stop(struct probe *p);
/* Listening fell to 0, the collector running on: a gap opens. */
void weft__collector_gap_open(struct probe *p);
/*
 * Events flow again after a gap in listening (gap_open); before
 * listening rises, under probe.lock.  What was heard before the gap and
 * may have ended in it is forgotten or marked unsure: the rings' events
 * from before (a site that saw the old listening, late), the tasks'
 * waker counts and wakes, the locks' waits and holds (read again from
 * the runtime at the next pass), the other resources' holds (forgotten)
 * and waits (kept, unsure).
 * The tasks that ended or began in it are settled from the owned list
 * at the next pass (weft__collector_reconcile()).
 */
void weft__collector_gap(struct probe *p);
void weft__collector_pass(struct probe *p, uint64_t now);
uint64_t weft__collector_interval(struct probe *p);
const weft_probe_task_t *weft__collector_task(struct probe *p, uint64_t id);
int weft__collector_event_records(struct probe *p, const weft_event_t *ev,
				  size_t n, const uint8_t **rec, size_t *len);

/* ---------------------------------------------------- the record cache */

/*
 * Finding, making and marking a task's record, inline: they are on the
 * per-event path (collector_events.c) and were inlined there when the
 * collector was one file.  The rest of the cache is collector_tasks.c.
 */

/*
 * The id's low bits, not a mixing hash: the runtime hands ids out in
 * blocks from one counter (weft__next_task_id()), so the tasks the table
 * holds (the live ones and six seconds of finished ones) are nearly one
 * run of consecutive ids, which the table (at least as large) spreads
 * one to a bucket.  And the buckets used together sit together: a new
 * task's is next to the one before.  A mixing hash made each a cache
 * miss: finding tasks for events, retiring them and looking them up for
 * the streams were a third of the collector's time under a service that
 * spawns a task per request (perf).
 */
static inline size_t weft__collector_hash_of(const struct probe *p, uint64_t id)
{
	return (size_t)id & (p->table_size - 1);
}

/* collector_tasks.c: fast_n's polls into the record (task_rec_t). */
void weft__collector_fast_fold(task_rec_t *t);

/* The record of @id, its counts whole (fast_n folded in), or NULL. */
static inline task_rec_t *weft__collector_task_find(struct probe *p,
						    uint64_t id)
{
	task_rec_t *t = p->last_found;

	/* A task's events come in runs (a wake, then its poll). */
	if (!t || t->pub.id != id) {
		t = p->table[weft__collector_hash_of(p, id)];
		while (t && t->pub.id != id)
			t = t->hnext;
		if (!t)
			return NULL;
		p->last_found = t;
	}
	if (__builtin_expect(t->fast_n != 0, 0))
		weft__collector_fast_fold(t);
	return t;
}

static inline void weft__collector_live_remove(struct probe *p, task_rec_t *t)
{
	if (t->lprev)
		t->lprev->lnext = t->lnext;
	else
		p->live = t->lnext;
	if (t->lnext)
		t->lnext->lprev = t->lprev;
	t->lnext = t->lprev = NULL;
}

/* collector_tasks.c */
task_rec_t *weft__collector_task_new(struct probe *p, uint64_t id,
				     uint64_t now);
void weft__collector_early_waker(struct probe *p, uint64_t id, int32_t delta,
				 uint32_t clones, uint32_t drops);
void weft__collector_task_free(struct probe *p, task_rec_t *t);
void *weft__collector_pool_get(struct pool *pl, size_t size);
void weft__collector_pool_fini(struct pool *pl);
void weft__collector_retire(struct probe *p, uint64_t now);
/* @t, just finished (in_done set), last in the done ring. */
void weft__collector_done_push(struct probe *p, task_rec_t *t);

static inline task_rec_t *weft__collector_task_get(struct probe *p, uint64_t id,
						   uint64_t now)
{
	task_rec_t *t = weft__collector_task_find(p, id);

	if (t || id == 0)
		return t;
	return weft__collector_task_new(p, id, now);
}

static inline void weft__collector_task_changed(struct probe *p, task_rec_t *t)
{
	if (!t->changed) {
		t->changed = true;
		t->cnext = p->changed;
		p->changed = t;
		/*
		 * Noted in publish()'s array too, as it comes: publish() then
		 * neither counts the list nor walks it to fill the array, two
		 * chases of a pointer a task through records that are out of
		 * cache when a pass makes thousands of tasks (perf,
		 * chained_spawn).
		 */
		if (p->nchanged < p->pub_cap)
			p->pub_changed[p->nchanged] = &t->pub;
		p->nchanged++;
	}
}

static inline weft_hist_t *weft__collector_task_hist(struct probe *p,
						     task_rec_t *t)
{
	if (!t->hist) {
		t->hist = weft__collector_pool_get(&p->hist_pool,
						   2 * sizeof(*t->hist));
		if (t->hist) {
			t->pub.poll_hist = &t->hist[0];
			t->pub.sched_hist = &t->hist[1];
		}
	}
	return t->hist;
}

/* ------------------------------------------------------------ the clock */

/*
 * weft__probe_clock_conv_event() on a copy, for the drain: @s copied to
 * @d, its stamp (and a POLL's or BLOCKING_END's duration) in ns, with the
 * same results to the nanosecond and fewer instructions.  The stamp's
 * product P = (raw - base_tsc) * q (q: ns a tick, 32.32) is made once,
 * and the duration's ns, conv(raw) - conv(raw - a1), taken from it: with
 * A = a1 * q, floor(P / 2^32) - floor((P - A) / 2^32) is
 * floor(A / 2^32), plus 1 when P's low 32 bits are under A's (the
 * borrow).  Exact whenever raw - a1 is not before base_tsc (else, and
 * for a stamp before it, the general conversion).  @cv->tsc is the
 * caller's to check.  tests/test_collector.c checks it against the
 * general conversion.
 */
static inline __attribute__((always_inline)) void
weft__collector_conv_copy(const struct weft__probe_clock_conv *cv,
			  weft_event_t *d, const weft_event_t *s)
{
	__extension__ typedef unsigned __int128 u128;
	uint64_t raw = s->ts, a1 = s->a1, dt;
	/* The subtraction's borrow is the test: compared apart, the two
	 * cost a move and a compare more (callgrind). */
	bool before = __builtin_sub_overflow(raw, cv->base_tsc, &dt);
	u128 P, A;

	*d = *s;
	if (__builtin_expect(before, 0)) {
		weft__probe_clock_conv_event(cv, d);
		return;
	}
	P = (u128)dt * cv->ns_per_tick_q32;
	d->ts = cv->base_ns + (uint64_t)(P >> 32);
	/*
	 * The kinds with a duration in a1, POLL first: a compare of the
	 * byte in memory and a branch for a poll (a table took four).
	 */
	if (s->kind != WEFT_EV_POLL && s->kind != WEFT_EV_BLOCKING_END)
		return;
	if (__builtin_expect(a1 > dt, 0)) {
		/* raw as dt + base_tsc: with raw live to here, the stamp's
		 * subtraction took a copy of it first (callgrind). */
		d->a1 = d->ts -
			weft__probe_clock_conv_ts(cv, dt + cv->base_tsc - a1);
		return;
	}
	A = (u128)a1 * cv->ns_per_tick_q32;
	d->a1 = (uint64_t)(A >> 32) + ((uint32_t)P < (uint32_t)A);
}

/* ------------------------------------------------------------- the pass */

/*
 * Events folded in per chunk: 4,096 of 32 bytes, 128 KiB, which stays in
 * the collector's cache from the merge through process() and the
 * subscribers.  (Copying whole passes out first, up to 8 MiB a ring,
 * then converting, merging and folding them in one sweep each, went
 * through memory four times an event.)
 */
#define CHUNK_EVENTS 4096

/* collector_drain.c */
/* A collector's start: what the rings hold is dropped (collector_drain.c). */
void weft__collector_rings_forget(struct probe *p);
size_t weft__collector_snapshot(struct probe *p);
bool weft__collector_flush_offered(void);
size_t weft__collector_take_chunk(struct probe *p, size_t *nheap);
void weft__collector_free_orphans(struct probe *p);

/* collector_events.c */
#define SITE_HAVE_NAME 1u /* its SITE came */
#define SITE_HAVE_LOC 2u  /* its SITE_LOC came */
void weft__collector_process(struct probe *p, size_t n);
void weft__collector_on_complete(struct probe *p, task_rec_t *t,
				 const weft_event_t *ev);
/* A task that ran one poll under 2 us: counted, by spawn site. */
void weft__collector_tiny(struct probe *p, const task_rec_t *t);

/* collector_sites.c */
/* Forgets the spawn and await sites met (the collector stops). */
void weft__collector_sites_free(struct probe *p);
/* AWAIT_SITE, and SITE or SITE_LOC: the site into its table. */
void weft__collector_on_await_site(struct probe *p, const weft_event_t *ev);
void weft__collector_on_site(struct probe *p, const weft_event_t *ev);

/* collector_resources.c */
/* A RES_* event, into the resources and the tasks that wait. */
void weft__collector_res_event(struct probe *p, const weft_event_t *ev);
/* A task's wait for a lock that began before this listening period
 * (weft__runtime_lock_waits()), and the lock's holder, into the records. */
void weft__collector_res_seed_wait(struct probe *p,
				   const weft__lock_wait_info_t *w,
				   uint64_t now);
/* The waiting side's warnings (contention, channel-full), every 250 ms. */
void weft__collector_res_check(struct probe *p, uint64_t now);
/* The resources' part of weft__collector_gap(). */
void weft__collector_res_gap(struct probe *p);
/*
 * The resources to publish, every known one (@all) or the changed ones,
 * as a malloc'ed array (*@out, NULL when none): how many.
 */
size_t weft__collector_res_list(struct probe *p, bool all, uint64_t now,
				const weft_probe_resource_t ***out);
/* After publishing: the changed list cleared, the dropped ones freed. */
void weft__collector_res_published(struct probe *p);
void weft__collector_res_stop(struct probe *p);
size_t weft__collector_res_count(const struct probe *p);
/* Resource @id as published (its lists brought up to date), or NULL. */
const weft_probe_resource_t *weft__collector_res(struct probe *p, uint64_t id);

/* collector_workers.c */
void weft__collector_sample_workers(struct probe *p, uint64_t now);
/*
 * Room for workers 0 .. @n - 1 (the records past the old ones zeroed),
 * and in the leak state's runs of wakes.  Return: 0, or -ENOMEM with
 * nothing changed (workers past nworker_slots are then skipped).
 */
int weft__collector_workers_fit(struct probe *p, unsigned n);
/* Whether @w has records (fitting them now if it lacks them). */
static inline bool weft__collector_has_worker(struct probe *p, unsigned w)
{
	return w < p->nworker_slots || (w < PROBE_MAX_WORKERS &&
					!weft__collector_workers_fit(p, w + 1));
}
/* The described runtime changed: its workers' records zeroed. */
void weft__collector_workers_reset(struct probe *p);
/* A STEAL: @thief took @tasks from @victim. */
void weft__collector_steal(struct probe *p, unsigned thief, unsigned victim,
			   uint64_t tasks);
/* Worker @i's record's stolen list, from its counts (each sample). */
void weft__collector_publish_steals(struct probe *p, unsigned i);
void weft__collector_workers_free(struct probe *p);

/* collector_reconcile.c */
void weft__collector_seed_tasks(struct probe *p, uint64_t now);
/* The runtime's tasks waiting for a lock since before this listening
 * period, with the locks' holders (after weft__collector_seed_tasks()). */
void weft__collector_seed_waits(struct probe *p, uint64_t now);
/* The rest of a seed begun by weft__collector_seed_tasks(), a part a
 * pass (p->seed_shards set); @dt_ns: since the last pass. */
void weft__collector_seed_more(struct probe *p, uint64_t now, uint64_t dt_ns);
/* Passes at most this far apart while a seed goes on. */
#define SEED_INTERVAL_NS 20000000u
/* Its buffer freed, nothing left to seed (the collector stops). */
void weft__collector_seed_stop(struct probe *p);
/* @dropped: drops to settle (the tasks it finishes are marked so), not
 * only a gap in listening. */
bool weft__collector_reconcile(struct probe *p, uint64_t now, bool dropped);

/*
 * The runtime whose threads a worker index names, for what the OS says
 * of them (CPU clocks, schedstat, poll splits): p->rt while it is the
 * only one attached.  With more, an event's worker index names a worker
 * of each (events carry no runtime), and reading p->rt's thread for
 * another's poll blamed a spinning task's poll on "a blocking call" (an
 * outside audit, two runtimes of four workers): none, and the warnings
 * say where the time went is not known.
 */
static inline weft_runtime_t *weft__collector_os_rt(const struct probe *p)
{
	return p->nattached == 1 ? p->rt : NULL;
}

/* collector_warnings.c */
void weft__collector_warn(struct probe *p, uint8_t kind, const task_rec_t *t,
			  uint16_t worker, uint64_t at, uint64_t value,
			  const char *fmt, ...)
	__attribute__((format(printf, 7, 8)));
void weft__collector_warn_task(struct probe *p, uint8_t kind, task_rec_t *t,
			       uint16_t worker, uint64_t at, uint64_t value,
			       const char *detail);
/*
 * weft__collector_warn_task()'s first half: @t marked, and whether the
 * warning is a row of its own (then the caller words it and raises it
 * with weft__collector_warn()) or counted in its fold.  For a warning
 * whose words cost more than the fold: a wave of woken tasks raises
 * thousands, nearly all folded, and formatting each (floating point, a
 * walk of the workers) was most of the collector's time in a spawn
 * burst under callgrind.
 */
bool weft__collector_warn_task_row(struct probe *p, uint8_t kind, task_rec_t *t,
				   uint16_t worker, uint64_t at,
				   uint64_t value);
void weft__collector_check_idle_tasks(struct probe *p, uint64_t now);
/* A large future's warning kept (p->large_pends) for its SPAWN_LOC, and
 * those whose SPAWN_LOC did not come by the pass after, said without it
 * (collector_events.c). */
void weft__collector_large_pends_said(struct probe *p);
/* LOCK_HELD_PENDING: kept (p->lock_pends) until its LOCK_SITE. */
void weft__collector_lock_heard(struct probe *p, const weft_event_t *ev);
/* LOCK_SITE: a weft_mutex_t held across an await, with its pending's
 * name and hold so far: its warning when released, or a second on if
 * still held. */
void weft__collector_lock_site(struct probe *p, const weft_event_t *ev);
void weft__collector_lock_released(struct probe *p, const weft_event_t *ev);
void weft__collector_lock_check(struct probe *p, uint64_t now);
/*
 * The folds whose window closed by @now, said (once a pass); @all: every
 * fold's count so far too, its window going on (a pass that serves a
 * flush: what the subscribers are to have by its end).
 */
void weft__collector_fold_flush(struct probe *p, uint64_t now, bool all);
/* The collector stops: every fold's count said (kept for a subscriber
 * to come, and in the counts), the folds cleared. */
void weft__collector_fold_stop(struct probe *p);
/* Every warning raised so far, folded ones included: stats.warnings. */
uint64_t weft__collector_warnings_total(const struct probe *p);
/*
 * A warning of @kind about task @task among those kept whose detail
 * begins with @detail's first @n bytes (0: any detail) and, @start not
 * 0, whose stretch began then (its time less its value, within 1 ms).  For the states
 * that last (a lost waker, a deadlock): a collector that forgot what it
 * heard (nobody listening between two consoles, a gap) finds them again,
 * and must not say them again.
 */
bool weft__collector_said(const struct probe *p, uint8_t kind, uint64_t task,
			  const char *detail, size_t n, uint64_t start);
/*
 * A weft_mutex_t whose holder returned PENDING holding it before anyone
 * listened, read with a wait for it (weft__collector_seed_waits()): the
 * hold across an await said, still held.  Its unlock, if it comes, says
 * it again with its length (mutex.c unheard_release()).
 */
void weft__collector_seed_across(struct probe *p,
				 const weft__lock_wait_info_t *w, uint64_t now);
/* Such a warning found again: @t marked with it, as when it was said. */
void weft__collector_said_again(struct probe *p, uint8_t kind, task_rec_t *t);
/*
 * A warning of @kind about @t held back by a rate limit of the task's
 * own (one long-poll row a second a task): @t marked, and counted in its
 * fold, said with the fold's row.
 */
void weft__collector_warn_task_held(struct probe *p, uint8_t kind,
				    task_rec_t *t, uint16_t worker, uint64_t at,
				    uint64_t value);
/*
 * A poll of @dur_ns on @worker (of p->rt) that began at @start_ns (ns)
 * ran past the long-poll threshold: where its time went, if the monitor
 * read it (@raw_start: the poll's start in ticks, when known exactly,
 * else 0 and matched on @start_ns).  Writes a clause for the warning
 * into @why ("" when not known).  Return: the task's own part of
 * @dur_ns, on a CPU or asleep in the kernel (@dur_ns when not known);
 * what is left the OS spent running other threads.
 */
/*
 * Where a poll of @dur_ns on @worker that began at @start_ns went, when
 * the monitor did not read it (it runs at nice 19, and a busy host may
 * hold it off its CPU past a whole poll): from the worker thread's
 * schedstat, the window's sample before the poll against one read now
 * (collector_workers.c).  @running: the poll goes on (a wait for a CPU
 * going on now is counted).  False where there is none.
 */
bool weft__collector_sched_split(struct probe *p, uint16_t worker,
				 uint64_t start_ns, uint64_t dur_ns,
				 bool running, weft__poll_split_t *out);
/* What a look at a worker's thread found (collector_workers.c). */
typedef struct weft__sched_look_s {
	uint64_t on_ns;  /* its CPU time */
	uint64_t off_ns; /* run_delay: its waits for a CPU that ended */
	uint64_t at_ns;  /* when (weft_now_ns()), both read by then */
	bool runnable;   /* on a CPU or waiting for one now ('R') */
} weft__sched_look_t;
/*
 * The split of weft__collector_sched_split() from a worker's window
 * (@fill samples of @win), its thread's birth (@born: schedstat zero
 * there, or NULL) and a look at its thread now (@now): no reads, so that
 * tests can hand them all.
 */
bool weft__collector_split_of(const worker_window_t *win, unsigned fill,
			      const worker_window_t *born, uint64_t start_ns,
			      uint64_t dur_ns, bool running,
			      const weft__sched_look_t *now,
			      weft__poll_split_t *out);
/*
 * Whether @worker's thread waited for a CPU (run_delay) at least half
 * of a stretch that holds [@from_ns, @to_ns) and little more: from the
 * window's sample read before @from_ns to a look at the thread now (one
 * a pass), only when now is within half the interval's length past
 * @to_ns.  *@held_ns: that wait, at most the interval.  Judged against
 * wall time: a thread asleep (parked) is not waiting for a CPU, so a
 * worker parked through the interval is not the OS's.
 * weft__collector_os_held_of(): the same from @fill samples of @win and
 * a look @now, no reads (for tests).
 */
bool weft__collector_os_held(struct probe *p, uint16_t worker, uint64_t from_ns,
			     uint64_t to_ns, uint64_t *held_ns);
bool weft__collector_os_held_of(const worker_window_t *win, unsigned fill,
				const worker_window_t *born, uint64_t from_ns,
				uint64_t to_ns, const weft__sched_look_t *now,
				uint64_t *held_ns);
uint64_t weft__collector_poll_why(struct probe *p, uint16_t worker,
				  uint64_t start_ns, uint64_t raw_start,
				  uint64_t dur_ns, char *why, size_t len);
/* Closes the worker threads' schedstat files (collector_workers.c). */
void weft__collector_sched_close_all(struct probe *p);
/*
 * Whether a long poll of @dur_ns with @own_ns of its own (the rest
 * waiting for a CPU) was the OS's doing: its own part under the
 * threshold, and the wait at least as long.  A poll still running is
 * told only when its own part passes the threshold (any wait puts one
 * just past it under): the caller looks again.
 */
/*
 * A poll's own part (@own_ns of its @dur_ns: less what it waited for a
 * CPU) less @rt_ns it spent in the runtime's own work (RT_WAIT, wall
 * time).  That work's wait for a CPU is out of @own_ns already, and the
 * poll's every such wait may have fallen in it: only what @rt_ns holds
 * past them is taken (never more than @own_ns; a review found the plain
 * difference wrapped, and took the wait twice).
 */
static inline uint64_t
weft__collector_own_less_rt(uint64_t own_ns, uint64_t dur_ns, uint64_t rt_ns)
{
	uint64_t held = dur_ns > own_ns ? dur_ns - own_ns : 0;
	uint64_t off = rt_ns > held ? rt_ns - held : 0;

	return own_ns > off ? own_ns - off : 0;
}

static inline bool weft__collector_by_os(const struct probe *p, uint64_t own_ns,
					 uint64_t dur_ns)
{
	return own_ns < p->config.long_poll_ns && dur_ns - own_ns >= own_ns;
}

/*
 * Whether the OS, not the runtime, made a task woken at @from_ns wait
 * @delay_ns for @worker to poll it: the worker's thread spent most of
 * that time waiting for a CPU (weft__collector_os_held()).  If so, said
 * as a worker warning naming no task (PREEMPTED, at most once a second a
 * worker), and true: the task's scheduling delay is not its own.  A
 * worker parked through the wait (a wake-up that did not unpark it) or
 * busy with other polls is the runtime's: false.
 */
bool weft__collector_delay_by_os(struct probe *p, uint16_t worker,
				 uint64_t from_ns, uint64_t delay_ns);

/*
 * The OS, not the task, made a poll on @worker long: most of its
 * @dur_ns was spent waiting for a CPU.  A worker warning naming no task,
 * at most once a second a worker.
 */
void weft__collector_warn_preempted(struct probe *p, uint16_t worker,
				    uint64_t start_ns, uint64_t dur_ns,
				    uint64_t own_ns);

/*
 * A poll on @worker long by the runtime's doing: @rt_ns of it waiting
 * for a lock of the runtime's own (@what, WEFT_RT_WAIT_*), the task's
 * own part (@own_ns, less the OS's) under the threshold.  A worker
 * warning naming no task, PREEMPTED's kind and rate (once a second a
 * worker): the lock's holder was a thread the OS kept off a CPU, or one
 * starting a thread.
 */
void weft__collector_warn_rt_wait(struct probe *p, uint16_t worker,
				  uint64_t start_ns, uint64_t dur_ns,
				  uint64_t own_ns, uint64_t rt_ns,
				  uint32_t what);

/* ------------------------------------- task leaks and wake bursts */

/* What a task-leak warning says (collector_leak.c, collector_warnings.c). */
struct leak_said {
	const char *file, *name; /* the spawn site, or the name it has */
	uint32_t line;
	uint32_t live;    /* live tasks of the site now */
	uint32_t walked;  /* the oldest of them looked at */
	uint32_t pending; /* of those, pending since their first poll */
	double per_s;     /* growth over the window */
	uint64_t window_ns;
	uint64_t oldest, oldest_age_ns;
	/* The oldest's SPAWN not seen (live before the probe listened, or
	 * its SPAWN dropped): its age is from when it was first heard of,
	 * a lower bound. */
	bool oldest_unseen;
	const char *oldest_name;
	const char *parked_file; /* where most pending ones are parked */
	uint32_t parked_line, parked_n;
	uint32_t said_live; /* at the last warning (0: the first) */
	uint64_t at;
};

/* What a wake-burst warning says. */
struct burst_said {
	uint64_t waker;          /* the waking task (0: none) */
	const char *name, *file; /* its name and spawn site */
	uint32_t line;
	uint16_t worker; /* WEFT_EVENT_NO_WORKER: another thread */
	uint8_t source;  /* weft_wake_source_t of its first wake */
	uint32_t woken;
	uint64_t at, span_ns;    /* the first wake, and to the last */
	uint32_t polled;         /* woken tasks polled since */
	uint32_t over;           /* of those, over the scheduling delay */
	uint64_t max_ns, p99_ns; /* their wake-to-poll delays */
};

/* collector_leak.c */
int weft__collector_leak_start(struct probe *p);
void weft__collector_leak_stop(struct probe *p);
/* Runs of wakes for workers 0 .. @n - 1.  Return: 0 or -ENOMEM. */
int weft__collector_leak_fit(struct probe *p, unsigned n);
/* @t's spawn site is known (its SPAWN_LOC, or seeded): counted there. */
void weft__collector_leak_spawned(struct probe *p, task_rec_t *t);
/* @t (t->site set) finished, or its record goes. */
void weft__collector_leak_done(struct probe *p, task_rec_t *t);
/* A WAKE of @t by another: counted in the run of its worker slot. */
void weft__collector_burst_wake(struct probe *p, task_rec_t *t,
				const weft_event_t *ev);
/* A POLL ended on ev->worker: that worker's run of wakes ends. */
void weft__collector_burst_poll_end(struct probe *p, const weft_event_t *ev);
/*
 * The first poll of @t since a wake counted in a run (t->wake_seq set),
 * @delay_ns after the wake; @over: past the scheduling-delay threshold,
 * not yet warned.  True where that warning is the burst's to say (folded
 * into it, or held until the waking poll ends).
 */
/*
 * Whether the run of wakes t->wake_seq names reaches @start_ns: still
 * open, or a burst whose last wake (its waking poll's end) is not before
 * it.  A poll of @t that began later answered its wake; one that began
 * earlier may have been woken by it.
 */
bool weft__collector_burst_reaches(struct probe *p, const task_rec_t *t,
				   uint64_t start_ns);
bool weft__collector_burst_delay(struct probe *p, task_rec_t *t,
				 const weft_event_t *ev, uint64_t delay_ns,
				 bool over);
/* Once a pass: sites sampled and judged, bursts said, runs closed. */
void weft__collector_leak_pass(struct probe *p, uint64_t now);
/* A gap in listening ended: the sites' samples start again. */
void weft__collector_leak_gap(struct probe *p);

/*
 * Whether a scheduling delay of @d ns would be news of @t: over the
 * threshold, and more than twice the longest said of it before.  Once a
 * task was too little: a victim behind one 80 ms poll, then behind a
 * run of them for 1.5 s, was said at 80 ms and never again.  Doubling
 * keeps a task held longer and longer to a few rows (and the fold of
 * warnings by site keeps a wave of victims to five a second).
 */
static inline bool weft__collector_delay_news(const struct probe *p,
					      const task_rec_t *t, uint64_t d)
{
	return d > p->config.sched_delay_ns &&
	       d / 2 > (uint64_t)t->delay_said_us * 1000u;
}

/* collector_delay.c: @t waited @delay_ns for a worker, from its wake to
 * its poll's @start; raises the scheduling-delay warning. */
void weft__collector_warn_sched_delay(struct probe *p, task_rec_t *t,
				      uint16_t worker, uint64_t start,
				      uint64_t delay);
/* collector_reconcile.c: the kept warnings marked on task records. */
void weft__collector_mark_task(struct probe *p, uint8_t kind, uint64_t id);
void weft__collector_mark_kept(struct probe *p);
/* collector_warnings.c */
void weft__collector_warn_leak(struct probe *p, const struct leak_said *l);
void weft__collector_warn_burst(struct probe *p, const struct burst_said *b);

#endif /* WEFT_COLLECTOR_INTERNAL_H */
