/* SPDX-License-Identifier: MIT */
/*
 * weft-trace: what the verbs share.  A trace file is read in one pass
 * (trace_model.c, over libweft-wire's weft_trace_stream): tt_next()
 * hands out its events in time order, and keeps, as the frames go by,
 * what the header and the updates said (names and spawn locations of
 * the tasks still live, which the events only carry as process
 * addresses; drops; warnings).  Memory is bounded by that state, not by
 * the file: a verb keeps what it prints, never the events.
 *
 * Errors: one line on stderr ("weft-trace: ...") and exit status 2 for
 * bad input or usage; 1 for a failure writing the output.
 */
#ifndef WEFT_TRACE_TOOL_H
#define WEFT_TRACE_TOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "weft/probe_events.h"
#include "weft/probe_model.h"
#include "weft/trace_reader.h"
#include "weft/wire.h"

#define TT_EXIT_BAD_INPUT 2

/*
 * A task as the updates named it.  The strings are the trace's (interned:
 * a program's names and files are a few static strings that every task
 * repeats), valid until tt_free().
 */
typedef struct tt_task_s {
	uint64_t id;
	const char *name; /* "" when unnamed */
	const char *file; /* "" when unknown */
	uint32_t line;
	uint32_t node; /* private: its index in the nodes, plus 1 */
	/* Where it is parked, as the last update said (NULL: not known). */
	const char *parked_file;
	uint32_t parked_line;
	uint8_t owned; /* private: strings it owns (the pool was full) */
} tt_task_t;

/*
 * A slot of the live tasks' table (trace_model.c): the task's id hashed
 * (its top 32 bits), and its node's index plus 1 (0: empty).
 */
typedef struct tt_task_slot_s {
	uint32_t hash;
	uint32_t node;
} tt_task_slot_t;

typedef struct tt_warning_s {
	uint32_t kind;
	uint32_t worker;
	uint64_t task;
	uint64_t at_ns;
	uint64_t value_ns;
	char *detail;
	char *label; /* the task's name when the warning came; NULL: none */
} tt_warning_t;

/*
 * A resource as the updates said (trace_res.c): its identity, its
 * holders and waiters at its last record, its counts and histograms
 * (cumulative: the last record has them all).
 */
typedef struct tt_resource_s {
	uint64_t id;
	uint8_t kind;
	char *name; /* "" when none */
	char *file; /* "" when not known */
	uint32_t line;
	uint64_t dropped_ns;
	uint32_t nholders, nwaiters;
	uint8_t nholders_kept, nwaiters_kept;
	uint64_t holders[WEFT_RES_LIST];
	uint64_t waiters[WEFT_RES_LIST];
	uint64_t acquires, waits;
	uint64_t longest_holder, longest_hold_ns;
	weft_hist_t wait, hold; /* zero until a record carries them */
	struct tt_resource_s *next; /* hash chain */
} tt_resource_t;

/* Live resources kept at most; past that, new ones are only counted. */
#define TT_RES_MAX (1u << 20)
/* Dropped resources kept for stats: the most contended this many. */
#define TT_RES_GONE 64

/*
 * The resources of a trace or a live process: the live ones by id, and
 * the most contended dropped ones (by total wait).  Memory: the live
 * resources and TT_RES_GONE more, whatever the input.
 */
typedef struct tt_restab_s {
	tt_resource_t **b;
	size_t nb, n;
	uint64_t seen;      /* distinct resources noted */
	uint64_t dropped;   /* of which dropped */
	uint64_t discarded; /* not kept (over TT_RES_MAX) */
	tt_resource_t *gone[TT_RES_GONE];
	size_t ngone;
} tt_restab_t;

/* Names of tasks forgotten kept for labels at the end (tt_trace_t). */
#define TT_GONE_NAMES 1024

/* Warnings kept whole (the first ones); past that, only counted. */
#define TT_WARNINGS_KEPT 1024

typedef struct tt_trace_s {
	const char *path;
	/* From the header. */
	uint32_t format_version;
	uint32_t segment;
	uint32_t pid;
	char *process;
	char *cmdline;
	char *host;
	char *clock;
	uint32_t workers;
	uint64_t start_ns;
	uint64_t start_realtime_ns;
	/* Frames, so far. */
	uint64_t frames, updates, batches, others;
	uint64_t bytes;       /* whole records read */
	uint64_t event_bytes; /* of which EventBatch records */
	bool truncated;       /* at the end: the file was cut in a record */
	uint64_t skipped;     /* bytes of torn or bad records skipped */
	uint64_t skips;       /* places where they were */
	uint64_t first_skip;  /* where the first one started */
	/* The bad records skipped were said on stderr (tt_free() says
	 * them once, at the end or wherever the verb stopped). */
	bool skips_said;
	uint64_t late;        /* events out of time order beyond the window */
	uint64_t events_dropped;   /* the last update's count */
	uint64_t tasks_end_unseen; /* the same: tasks whose end was dropped */
	/* The last update's drops by each worker's ring (the rest were
	 * other threads'); nworker_drops: the highest index seen, plus 1.
	 * worker_drops and off_cpu are nworker_cap long (grown as workers
	 * are seen, up to the runtime's 4,096). */
	uint64_t *worker_drops;
	unsigned nworker_drops;
	unsigned nworker_cap;
	/*
	 * Each worker's off-CPU time (its thread's schedstat run_delay,
	 * cumulative) as the updates read it: the first and the last
	 * reading and their updates' now_ns, and what earlier threads in
	 * the slot added (a reading below the last is another runtime's
	 * worker: counted afresh from it).  noff_cpu: the highest index
	 * read, plus 1; 0 when none was (a file from before the field).
	 */
	struct tt_off_cpu_s {
		uint64_t first, last, before;
		uint64_t first_at, last_at;
		bool seen;
	} * off_cpu;
	unsigned noff_cpu;
	/* Events handed out so far: how many, the first's stamp, the
	 * earliest and the latest (the trace's span: last_ts - min_ts). */
	uint64_t nev;
	uint64_t first_ts, min_ts, last_ts;
	/* Live tasks by id (trace_model.c: open addressing, ntask_slots a
	 * power of two); ntasks counts every task ever named. */
	tt_task_slot_t *tasks;
	size_t ntask_slots;
	/* private: tt_task()'s last answers, by the id's low bits. */
	struct tt_task_memo_s *task_memo;
	uint8_t *task_counts; /* private: tasks by their ids' low bits */
	size_t ntasks;
	size_t live_tasks;
	/* The names of the last TT_GONE_NAMES tasks forgotten (a ring,
	 * gone_next the next slot): a resource's holder at the end, a
	 * pool job's submitter, may have ended long before. */
	struct tt_gone_name_s {
		uint64_t id;
		char name[40];
	} * gone_names;
	size_t gone_next;
	/* Tasks ended, in time order, forgotten two windows later. */
	struct tt_ended_s *ended;
	size_t ended_head, ended_len, ended_cap;
	uint64_t forget_at; /* when ended_len: ended[ended_head].at + 1 s */
	/* Resources, as the updates said. */
	tt_restab_t res;
	/*
	 * Warnings: the first TT_WARNINGS_KEPT whole, every one counted.
	 * nwarnings, warnings_by_kind: the rows; said, said_by_kind: the
	 * warnings they stand for (a fold's "N more" row N, any other 1).
	 */
	tt_warning_t *warnings;
	size_t nkept, nwarnings;
	size_t warnings_by_kind[WEFT_WARN_MAX];
	uint64_t said, said_by_kind[WEFT_WARN_MAX];
	/*
	 * Called with every frame as it passes, before the model notes it
	 * (a verb that keeps more of the updates than the model: tasks).
	 */
	void (*on_frame)(void *ctx, const Weft__V1__Frame *f);
	void *frame_ctx;
	/* Set by a verb that calls tt_task() for most events (export,
	 * dump): tt_next() finds the tasks of the events ahead. */
	bool prefetch_tasks;
	/* private */
	struct weft_trace_stream_s *stream;
	/* The stream's block of events being handed out: blk[blk_i, blk_n). */
	const weft_event_t *blk;
	size_t blk_i, blk_n;
	/* Interned strings (trace_model.c): open addressing, at most
	 * TT_STRS_BYTES; tasks forgotten, kept for the next ones. */
	char **strs;
	size_t strs_cap, nstrs, strs_bytes;
	/* Task nodes, allocated TASK_CHUNK at a time (freed whole by
	 * tt_free()); the forgotten ones queued for reuse, the first
	 * first: their indices plus 1 in a ring (spare[spare_head,
	 * + nspare), a power of two long), not a list through the nodes,
	 * whose next pointer was a cold read a task. */
	uint32_t *spare;
	size_t spare_head, nspare, spare_cap;
	void **task_chunks;
	size_t ntask_chunks, task_chunk_used;
	uintptr_t heap_advised; /* malloc's heap advised up to here */
	uint64_t progress_at, progress_start, progress_items;
	bool progress_shown;
} tt_trace_t;

/* trace_model.c */
/*
 * Zeroed memory for a large table: from 2 MiB, its own mapping in
 * transparent huge pages where the kernel gives them (a first touch a
 * 2 MiB page, not a 4 KiB one: page faults were much of a read's CPU
 * time on a VM).  Freed by tt_big_free() with the same @n.
 */
void *tt_big_calloc(size_t n);
void tt_big_free(void *p, size_t n);
/* trace_mem.c: malloc's heap in transparent huge pages for a read
 * (tt_open_opts()), and each new stretch of it advised as it grows. */
void tt_heap_huge_init(tt_trace_t *t);
void tt_heap_advise(tt_trace_t *t);
void *tt_xmalloc(size_t n);
void *tt_xrealloc(void *p, size_t n);
char *tt_xstrdup(const char *s);
void tt_die(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));
/*
 * Opens @path; the first tt_next() reads its header.  @file_order: the
 * events as they stand in the file, not in time order (a verb that only
 * counts them).
 */
/* The warnings row @w stands for: its count, or 1 (an older trace's
 * fold row: the N of its "N more ... (folded)"). */
uint64_t tt_warning_count(const Weft__V1__Warning *w);
/* An update's warnings counted, the first TT_WARNINGS_KEPT kept
 * (trace_res.c). */
void tt_warnings_note(tt_trace_t *t, const Weft__V1__Update *u);
void tt_open(tt_trace_t *t, const char *path, bool file_order);
/*
 * tt_open(), @lean_updates false for a verb that needs an Update frame
 * whole (slice: it writes them out again).  With it true (tt_open()'s),
 * an Update frame's tasks are read with tt_tasks() only, never through
 * update->tasks (n_tasks is 0 for an Update read lean).
 */
void tt_open_opts(tt_trace_t *t, const char *path, bool file_order,
		  bool lean_updates);
/* The tasks of @f, an Update frame handed to on_frame (lean or not). */
void tt_tasks(tt_trace_t *t, const Weft__V1__Frame *f, weft_trace_tasks_t *it);
/* The next event in time order into *@ev; false at the end. */
bool tt_next(tt_trace_t *t, weft_event_t *ev);
/* Reads to the end, every event passed over (a verb that only counts). */
void tt_drain(tt_trace_t *t);
void tt_free(tt_trace_t *t);

/* Strings a task owns (tt_task_t.owned). */
#define OWN_NAME 0x1u
#define OWN_FILE 0x2u
#define OWN_PARKED 0x4u

/*
 * trace_strs.c, for trace_model.c: the string of @n bytes at @s (not
 * NUL-ended) interned in @t, or past the pool's bound a copy of its own
 * (*@owned gets @bit); and the strings @k owns among @bits freed.
 */
const char *tt__intern(tt_trace_t *t, const char *s, size_t n, uint8_t *owned,
		       uint8_t bit);
void tt__task_strings_free(tt_task_t *k, uint8_t bits);

const tt_task_t *tt_task(const tt_trace_t *t, uint64_t id);
const char *tt_task_label(const tt_trace_t *t, uint64_t id, char *buf,
			  size_t len);
void tt_print_drops(FILE *out, const tt_trace_t *t);

/* trace_res.c */
/* Note one Resource record (a dropped one leaves the live table). */
void tt_res_note(tt_restab_t *r, const Weft__V1__Resource *m);
const tt_resource_t *tt_res_find(const tt_restab_t *r, uint64_t id);
/* "mutex cache", "mpsc demo.c:88", "mutex #17" (no name, no file). */
const char *tt_res_label(const tt_resource_t *x, char *buf, size_t len);
/* The most contended resources, live and dropped (total wait, then
 * wait p99, then acquires), at most @max into @out; returns how many.
 * Only kinds that contend (weft_resource_kind_contends()) are ranked. */
size_t tt_res_top(const tt_restab_t *r, const tt_resource_t **out,
		  size_t max);
void tt_res_free(tt_restab_t *r);
/*
 * tt_task_label(), but a task the trace no longer knows (forgotten a
 * second after it ended: a holder in a resource's last record, a pool
 * job's submitter) takes its name as it was forgotten (the last
 * TT_GONE_NAMES), else the name a kept warning about it carried.  For
 * the end of a verb: it reads those tables whole.
 */
const char *tt_task_label_warned(const tt_trace_t *t, uint64_t id, char *buf,
				 size_t len);

/*
 * trace_durs.c: durations (or counts) for percentiles, each kept up to
 * TT_DURS_EXACT or the set's exact_max (exact ranks), past that a
 * log-linear histogram (within 1.6 %): bounded whatever the input.
 * Zeroed is empty (exact_max may be set after).
 */
#define TT_DURS_EXACT ((size_t)4 << 20)
#define TT_DURS_SUB_BITS 6
#define TT_DURS_BUCKETS ((64 - TT_DURS_SUB_BITS + 1) << TT_DURS_SUB_BITS)

typedef struct tt_durs_s {
	uint64_t *exact; /* NULL once past exact_max (inexact) */
	size_t n, cap;
	size_t exact_max; /* values kept exact at most (0: TT_DURS_EXACT) */
	bool inexact;
	bool big; /* private: exact is tt_big_calloc()'s, cap values */
	uint64_t max, sum;
	uint64_t buckets[TT_DURS_BUCKETS];
} tt_durs_t;

void tt_durs_add(tt_durs_t *d, uint64_t v);
/* The value of rank @k (0-based) in ascending order; 0 when empty. */
uint64_t tt_durs_rank(tt_durs_t *d, size_t k);
/* The value of rank n * @pct / 100 (the poll table's ranks). */
uint64_t tt_durs_pct(tt_durs_t *d, unsigned pct);
void tt_durs_free(tt_durs_t *d);
/* "1.2ms", "35us", "2.00s", "-" for 0. */
const char *tt_dur(char *buf, size_t len, uint64_t ns);

/*
 * stats_pool.c: the blocking pool and the timer wheel as the events
 * tell them.  Memory: the jobs queued or running at a moment (at most
 * TT_POOL_FOLLOWED followed), TT_POOL_SUBMITTERS rows of submitters (the
 * rest counted as others), and the two duration sets.
 */
#define TT_POOL_SUBMITTERS 1024
#define TT_POOL_FOLLOWED ((size_t)1 << 20)
#define TT_POOL_IDS 16

typedef struct tt_pool_sub_s {
	char *name, *file; /* the submitting task's, when its job began */
	uint32_t line;
	uint64_t task;     /* the first submitting task seen */
	uint64_t label;    /* the job's name: an address in the process */
	uint32_t job_line; /* where its first job was submitted, 0: unknown */
	uint64_t jobs, waits, wait_ns, run_ns;
} tt_pool_sub_t;

typedef struct tt_pool_s {
	/* Resource ids of blocking pools (RES_NEW, a JOB wait, updates). */
	uint64_t ids[TT_POOL_IDS];
	unsigned nids;
	/* Jobs queued or running, per submitting task (stats_pool.c). */
	struct tt_pool_task_s **tasks;
	size_t ntb, ntasks, followed;
	uint64_t not_followed;   /* past TT_POOL_FOLLOWED */
	tt_durs_t wait;          /* queue waits, served */
	uint64_t jobs;           /* jobs begun */
	uint64_t unmatched_ends; /* a wait's or a job's end without its start */
	uint64_t cancelled;      /* waits ended unserved */
	/* Submitters: (name, spawn site, label), the first ones. */
	tt_pool_sub_t *subs;
	size_t nsubs;
	uint32_t *sub_hash;
	tt_pool_sub_t others;
	bool any;        /* pool events seen */
	bool seen_start; /* a BLOCKING_START seen: jobs timed by them */
	/* The timer wheel: timers fired by each TIMER_FIRE. */
	tt_durs_t fired;
} tt_pool_t;

void tt_pool_init(tt_pool_t *p);
void tt_pool_note(tt_pool_t *p, const tt_trace_t *t, const weft_event_t *e);
void tt_pool_print(tt_pool_t *p, const tt_trace_t *t, unsigned long top);
void tt_pool_free(tt_pool_t *p);

/*
 * trace_window.c: a window of a trace (slice, export --from/--to).
 * TIMEs count from the trace's first event, as dump prints them; the
 * window holds the events stamped from .from to .to, both included.
 */
typedef struct tt_window_s {
	uint64_t from_rel, to_rel; /* ns from the first event; to: UINT64_MAX */
	bool set;                  /* --from or --to given */
	/* Stamps, once the first event is known (tt_window_start()). */
	uint64_t base, from, to;
} tt_window_t;

/* Read on this far past --to for events written late, then stop. */
#define TT_WINDOW_SLACK_NS (1000ull * 1000 * 1000)

/* "12.5", "12.5s", "800ms", "40us", "2m", "1h": ns; false if not one. */
bool tt_window_time(const char *s, uint64_t *ns);
/* The whole trace: from its first event to its end. */
void tt_window_init(tt_window_t *w);
/* Takes argv[*@i] if it is --from or --to (and its TIME, *@i moved on);
 * false if it is neither.  Dies on a bad TIME. */
bool tt_window_opt(tt_window_t *w, const char *verb, int argc, char **argv,
		   int *i);
/* Dies when --from is after --to. */
void tt_window_check(const tt_window_t *w, const char *verb);
/* The window in stamps, from the trace's first event's. */
void tt_window_start(tt_window_t *w, uint64_t first_ts);
/* Whether @ts is so far past the window that reading can stop. */
bool tt_window_past(const tt_window_t *w, uint64_t ts);
/* Whether @e belongs in the window; a poll (stamped at its end) does if
 * it overlaps it, and is cut to it (ts and a1 changed). */
bool tt_window_clip(const tt_window_t *w, weft_event_t *e);
/* Reading stopped past the window, before the end: the progress line
 * tt_next() draws on a terminal is cleared, as at the end. */
void tt_window_stop(tt_trace_t *t);
/* "0.500000 s to 1.500000 s", "2.000000 s to the end". */
const char *tt_window_label(const tt_window_t *w, char *buf, size_t len);

/* verb_*.c: each takes argv after the verb name (argv[0] is the verb). */
int tt_verb_info(int argc, char **argv);
int tt_verb_dump(int argc, char **argv);
int tt_verb_stats(int argc, char **argv);
int tt_verb_export(int argc, char **argv);
int tt_verb_list(int argc, char **argv);
int tt_verb_record(int argc, char **argv);
int tt_verb_snapshot(int argc, char **argv);
int tt_verb_tasks(int argc, char **argv);
int tt_verb_slice(int argc, char **argv);

#endif /* WEFT_TRACE_TOOL_H */
