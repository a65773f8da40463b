/* SPDX-License-Identifier: MIT */
/*
 * weft-console: the map of the program, prototypes grouped by the file
 * that defines them.
 *
 * The shape (STYLE.md, "The console"): frames (from a trace file or a
 * live target's socket) feed the model (model.c), a state store that knows
 * nothing of drawing.  Views (view_*.c, const vtables) render the model
 * and the session's UI state into a plain text grid (grid.c); curses
 * (tty.c) only blits that grid, and --once prints it, so every view can
 * be checked without a terminal.  Keys go through one bindings table
 * (keys.c) to actions that change the session or the model's sort and
 * filter and return flags (REDRAW, RESORT, QUIT); they never draw.
 * Drawing never changes the model.
 *
 * Everything here runs on the console's one thread.
 */
#ifndef WEFT_CONSOLE_H
#define WEFT_CONSOLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <wchar.h>

#include "weft.pb-c.h"
#include "weft/probe_events.h"
#include "weft/probe_model.h"
#include "weft/wire.h"

/* ------------------------------------------------------------- util.c */

void *con_xmalloc(size_t n);
/* A copy of @n bytes at @p; NULL for a NULL @p. */
void *con_xmemdup(const void *p, size_t n);
void *con_xcalloc(size_t n, size_t size);
void *con_xreallocarray(void *p, size_t n, size_t size);
char *con_xstrdup(const char *s);
void con_die(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));
/* "1.2ms", "35us", "2.0s": at most 7 characters. */
const char *con_fmt_ns(char *buf, size_t len, uint64_t ns);
/* "12.3k", "4.5M": at most 6 characters. */
const char *con_fmt_count(char *buf, size_t len, double v);
/* "2s", "500ms", "1.5s", "1m" into ns; -EINVAL when not a duration. */
int con_parse_duration(const char *s, uint64_t *ns);
/* Whether @needle is in @hay, in any case (an empty one always is):
 * the views' filters. */
bool con_contains_ci(const char *hay, const char *needle);
/* -1, 0 or 1 as @a is below, equal to or above @b: the sorts' keys. */
static inline int con_cmp_u64(uint64_t a, uint64_t b)
{
	return a < b ? -1 : a > b;
}

/* ------------------------------------------------------------ model.c */

/* Samples kept per worker for sparklines (one per update). */
#define CON_HISTORY 120
/* Timeline: per-worker time in polls in buckets of this many ns. */
#define CON_TL_BUCKET_NS (100ull * 1000 * 1000)
#define CON_TL_BUCKETS 128
/* The workers view's poll share: over this many whole buckets (1 s, as
 * the collector's busy share). */
#define CON_TL_POLL_WINDOW 10
/* Per timeline bucket, the longest polls kept (for "select a spike"). */
#define CON_TL_TOP 32
/* The most workers the model keeps: the runtime's bound (a larger index
 * is a bad frame).  Their records grow with the highest index seen. */
#define CON_MAX_WORKERS 4096
/* Warnings kept (the oldest go first; counted). */
#define CON_MAX_WARNINGS 4096
/* Every task's latest events (for a detail opened later), and the
 * watched task's (the one the detail shows). */
#define CON_RECENT_EVENTS 65536
#define CON_WATCH_EVENTS 256
/* Finished tasks stay listed this long by default, and at most this many
 * (the probe's own default bound, weft_probe_config_t.retain_max). */
#define CON_RETAIN_NS (6ull * 1000 * 1000 * 1000)
#define CON_RETAIN_MAX 100000
/* Task records a slab holds (200 KiB). */
#define CON_TASK_SLAB 1024

/*
 * A task as the model keeps it: 200 bytes, no allocation of its own (the
 * records come from the model's slabs), the fields ordered so that
 * nothing is padding (issue 21: a console on 1,000,000 tasks held 1.4 KB
 * a task; the record was 240 bytes and a malloc chunk of 256).
 */
typedef struct con_task_s {
	uint64_t id;
	uint64_t parent;
	/* Shared by every task with the same string (the model's string
	 * table: 40,000 tasks a second named "GET /fast" are one copy). */
	const char *name; /* "" when unnamed */
	const char *file; /* "" when unknown */
	/* Where it is parked (its last PENDING poll's await), shared as
	 * name and file are; "" and 0 when not known. */
	const char *parked_file;
	/* Its total wait per resource, longest first (Task.waited): nwaited
	 * of them; NULL until a record carries one (most tasks never wait). */
	weft_probe_task_wait_t *waited;
	/* [0] poll time, [1] scheduled time; NULL until an update carries
	 * one (most tasks of a big process never get them). */
	weft_hist_t *hist;
	uint64_t spawned_ns;
	uint64_t finished_ns; /* 0 while live */
	uint64_t polls;
	uint64_t busy_ns;
	uint64_t scheduled_ns;
	uint64_t idle_ns;
	uint64_t wakes;
	uint64_t self_wakes;
	uint64_t waker_clones;
	uint64_t waker_drops;
	uint64_t max_poll_ns;
	/* While idle: when the stretch began (the end of its last pending
	 * poll); 0 otherwise.  con_task_idle_ns() adds it up. */
	uint64_t idle_since_ns;
	/* The resource it waits on now (con_resource_t id; 0: none), since
	 * when, for what (weft_resource_op_t). */
	uint64_t waiting_on;
	uint64_t waiting_since_ns;
	uint32_t line;
	uint32_t parked_line;
	uint32_t state_size;
	uint32_t warnings; /* bit (1 << kind) */
	uint32_t locks_held;
	int32_t status;
	uint16_t last_worker;
	uint8_t kind;  /* 0 future, 1 fiber */
	uint8_t state; /* weft_task_state_t */
	uint8_t waiting_op;
	uint8_t nwaited;
	/* Its spawn not seen (Task.spawn_unseen): spawned_ns is when the
	 * probe first heard of it, its age a lower bound. */
	bool spawn_unseen : 1;
	/* private: the model's bookkeeping */
	bool dirty : 1;  /* in the model's dirty vector */
	bool listed : 1; /* in the model's list */
	bool doomed : 1; /* being retired (con_model_retain) */
} con_task_t;

/* A finished task in the model's retention heap (con_model_t.fin). */
typedef struct con_fin_s {
	uint64_t at; /* its finished_ns when it went in */
	uint64_t id;
} con_fin_t;

/* String table entries remembered (a task's name, file, place; others). */
#define CON_STR_HINTS 4

/* A deleted slot of the model's index (con_model_t.hash). */
#define CON_HASH_TOMB UINT32_MAX

/* Resources kept at most (a new one past that is counted, not kept);
 * a dropped one stays retain_ns after it was dropped, as a finished
 * task does.  Names and files longer than CON_RES_STR_MAX are cut. */
#define CON_MAX_RESOURCES 65536
#define CON_RES_STR_MAX 256

/* A resource tasks wait on (weft_probe_resource_t as the updates say). */
typedef struct con_resource_s {
	uint64_t id;
	uint8_t kind; /* weft_resource_kind_t; 0: not known */
	/* Interned as task names are; "" when not known. */
	const char *name;
	const char *file;
	uint32_t line;
	uint64_t created_ns;
	uint64_t dropped_ns; /* 0 while alive */
	uint32_t nholders, nwaiters; /* whole counts */
	/* The first of each (waiters in arrival order), as many as sent
	 * (at most WEFT_RES_LIST). */
	uint8_t nholders_kept, nwaiters_kept;
	uint64_t holders[WEFT_RES_LIST];
	uint64_t waiters[WEFT_RES_LIST];
	uint64_t owner;
	uint64_t acquires;
	uint64_t waits;
	double acquires_per_s;
	uint64_t oldest_wait_ns;
	uint64_t longest_holder;
	uint64_t longest_hold_ns;
	/* The longest holder's name when the record came (interned; "" not
	 * known): the model forgets a task a while after it ends. */
	const char *longest_holder_name;
	/* From the histograms, when they came: wait p50, p99, max; hold
	 * p99 (0 until then). */
	uint64_t wait_p50, wait_p99, wait_max, hold_p99;
	/* [0] wait, [1] hold; NULL until an update carries one. */
	weft_hist_t *hist;
} con_resource_t;

/* Resources view columns, in display order (sortable by any). */
#define CON_RES_COLUMNS(X)                                                     \
	X(ID, "ID")                                                           \
	X(KIND, "KIND")                                                       \
	X(NAME, "NAME")                                                       \
	X(HOLDERS, "HOLD")                                                    \
	X(WAITERS, "WAIT")                                                    \
	X(RATE, "ACQ/S")                                                      \
	X(WAIT_P50, "WAIT P50")                                               \
	X(WAIT_P99, "WAIT P99")                                               \
	X(WAIT_MAX, "WAIT MAX")                                               \
	X(HOLD_P99, "HOLD P99")

typedef enum con_res_col_e {
#define CON_X(name, label) CON_RCOL_##name,
	CON_RES_COLUMNS(CON_X)
#undef CON_X
	CON_RCOL_MAX
} con_res_col_t;

/*
 * The tasks grouped by spawn site (model_groups.c): one per file:line
 * with live tasks, its live tasks by state, the oldest's spawn time, the
 * most common parked-at line among them and their warnings OR'd.  The
 * strings are the tasks' (interned): valid until the tasks change, and
 * the groups are rebuilt from the tasks before they are read again.
 */
typedef struct con_group_s {
	const char *file; /* "" when not known */
	uint32_t line;
	const char *name; /* the oldest live task's */
	uint32_t idle, scheduled, running, live;
	uint64_t oldest_spawned_ns;
	uint64_t oldest_id;
	bool oldest_unseen;      /* its age a lower bound (con_task_t) */
	const char *parked_file; /* the most common; "" and 0: none known */
	uint32_t parked_line;
	uint32_t parked_count; /* how many of its tasks are parked there */
	uint32_t warnings;     /* bit (1 << kind), OR'd */
} con_group_t;

/* Spawn-site groups' columns, in display order (sortable by any). */
#define CON_GROUP_COLUMNS(X)                                                   \
	X(SITE, "SPAWNED AT")                                                 \
	X(NAME, "NAME")                                                       \
	X(IDLE, "IDLE")                                                       \
	X(SCHED, "SCHED")                                                     \
	X(RUNNING, "RUN")                                                     \
	X(LIVE, "LIVE")                                                       \
	X(OLDEST, "OLDEST")                                                   \
	X(PARKED, "MOST PARKED AT")                                           \
	X(WARN, "WARNINGS")

typedef enum con_group_col_e {
#define CON_X(name, label) CON_GCOL_##name,
	CON_GROUP_COLUMNS(CON_X)
#undef CON_X
	CON_GCOL_MAX
} con_group_col_t;

typedef struct con_worker_s {
	bool seen;
	uint32_t index;
	uint32_t state; /* 0 polling, 1 searching, 2 parked */
	uint64_t current_task;
	uint64_t poll_started_ns;          /* current_task's poll: since when */
	Weft__V1__WorkerCounters counters; /* copied; no pointers inside */
	double polls_per_s;
	double steals_per_s;
	double steal_rate;
	/* Time not parked over the collector's window (the runtime's busy_ns
	 * counter): a worker spinning on a self-waking task reads 1. */
	double busy_ratio;
	/* Runnable but kept off a CPU by the OS (its thread's run_delay):
	 * since it started, and its share of the same window.  0: not
	 * known (a probe or file from before them, or no /proc). */
	uint64_t off_cpu_ns;
	double off_cpu_ratio;
	uint64_t mean_poll_ns;
	uint64_t max_poll_ns;
	uint32_t queue_depth;
	uint64_t stolen_by_others; /* tasks other workers stole from it */
	/* Its history and timeline; NULL until it has some. */
	struct con_worker_series_s *series;
} con_worker_t;

/*
 * A worker's series, 3.5 KiB, made when it is first sampled or polls:
 * the slots of workers never seen (a process names worker 4000, and the
 * model indexes by worker) cost 200 bytes each, not this.
 */
typedef struct con_worker_series_s {
	/* Rings of CON_HISTORY samples, newest at (hist_next - 1). */
	uint32_t depth_hist[CON_HISTORY];
	float polls_hist[CON_HISTORY];
	float busy_hist[CON_HISTORY];
	/* Timeline: ns in polls and the longest poll per CON_TL_BUCKET_NS
	 * (from POLL events; not busy time, which the parks decide). */
	uint64_t tl_poll_ns[CON_TL_BUCKETS];
	uint64_t tl_max_poll[CON_TL_BUCKETS];
} con_worker_series_t;

/* One poll of a timeline bucket. */
typedef struct con_poll_s {
	uint64_t end_ns;
	uint64_t dur_ns;
	uint64_t task;
	uint32_t worker;
} con_poll_t;

/* A timeline bucket's longest polls (unordered) and how many it had. */
typedef struct con_tl_top_s {
	con_poll_t top[CON_TL_TOP];
	uint32_t ntop;
	uint64_t min_dur; /* the shortest kept, once ntop == CON_TL_TOP */
	uint64_t polls;   /* polls that ran in the bucket */
} con_tl_top_t;

typedef struct con_warning_s {
	uint64_t seq;
	uint32_t kind;
	uint32_t worker;
	uint64_t task;
	char *task_name;
	char *file;
	uint32_t line;
	uint64_t at_ns;
	uint64_t value_ns;
	char *detail;
	bool history; /* raised before this console attached */
	/* The warnings it stands for: 0 itself (a fold's "N more" row N). */
	uint64_t count;
} con_warning_t;

/* Task list columns, in display order (sortable by any). */
#define CON_TASK_COLUMNS(X)                                                    \
	X(ID, "ID")                                                           \
	X(NAME, "NAME")                                                       \
	X(STATE, "STATE")                                                     \
	X(WORKER, "W")                                                        \
	X(POLLS, "POLLS")                                                     \
	X(BUSY, "BUSY")                                                       \
	X(SCHED, "SCHED")                                                     \
	X(IDLE, "IDLE")                                                       \
	X(WAKES, "WAKES")                                                     \
	X(MAXPOLL, "MAXPOLL")                                                 \
	X(WARN, "WARN")                                                       \
	X(PARKED, "PARKED AT")                                                \
	X(WAITING, "WAITING ON")                                              \
	X(LOCATION, "LOCATION")

typedef enum con_task_col_e {
#define CON_X(name, label) CON_COL_##name,
	CON_TASK_COLUMNS(CON_X)
#undef CON_X
	CON_COL_MAX
} con_task_col_t;

typedef enum con_mode_e {
	CON_MODE_LIVE,
	CON_MODE_PAUSED,
	CON_MODE_REPLAY,
} con_mode_t;

/* The header line's figures. */
typedef struct con_header_s {
	const char *target;
	uint64_t uptime_ns;
	uint32_t workers;
	uint64_t live_tasks;
	double polls_per_s;
	double steals_per_s;
	double steal_rate; /* steals / polls */
	double events_per_s;
	uint64_t dropped;
	double collector_cpu; /* the probe's collector, share of one CPU */
	uint64_t warnings;
	con_mode_t mode;
} con_header_t;

typedef struct con_model_s {
	/* public, read-only */
	char *target;  /* "replay: FILE" or the attach address */
	char *process; /* from the hello */
	uint32_t pid;
	char *clock;
	uint64_t start_ns;
	uint32_t nworkers; /* from the hello, or the most seen */
	con_mode_t mode;   /* set by the session */
	Weft__V1__Stats stats; /* the latest; clock is NULL */
	bool have_stats;
	uint64_t now_ns;   /* the latest update's time */
	uint64_t updates, batches, events, bad_frames;
	uint64_t blocking_started, blocking_ended; /* from events */
	uint64_t worker_steals; /* sum of the latest counters */

	con_task_t **tasks; /* every known task, unordered */
	size_t ntasks;
	con_worker_t *workers;   /* workers_cap slots, nworkers at least */
	con_warning_t *warnings; /* oldest first */
	size_t nwarnings;
	uint64_t warnings_discarded;
	/* The warnings every row added stood for (the header's count where
	 * the stats say fewer: a trace recorded before they counted folds). */
	uint64_t warnings_said;
	uint64_t tl_first; /* bucket number of the oldest timeline bucket */
	uint64_t tl_last;  /* newest bucket number (0: none yet) */
	/* private: the bucket with the strip's longest poll (0: none), and
	 * that poll's length (con_model_worst_bucket) */
	uint64_t tl_worst, tl_worst_dur;
	/* CON_TL_BUCKETS, by bucket % CON_TL_BUCKETS; NULL until a poll
	 * event (read only once tl_last is set), and each bucket NULL
	 * until a poll lands in it. */
	con_tl_top_t **tl_top;
	uint64_t hist_next;    /* worker history samples taken */
	uint64_t retain_ns;
	size_t retain_max; /* finished tasks kept at most (the oldest go) */
	size_t nfinished;  /* finished tasks kept */
	/* The watched task (con_model_watch): its events, oldest first in a
	 * ring of CON_WATCH_EVENTS, nwatch put in it. */
	uint64_t watch_task;
	weft_event_t *watch;
	uint64_t nwatch;

	/* The task list as the Tasks view shows it: sorted, filtered. */
	const con_task_t **list;
	size_t nlist;
	con_task_col_t sort_col;
	bool sort_invert;
	char filter[64];
	bool list_stale; /* tasks changed since the list was built */

	/* Resources by id (con_model_resource), unordered; the Resources
	 * view's list, sorted and filtered (con_model_res_resort). */
	con_resource_t **res;
	size_t nres;
	uint64_t res_discarded; /* new ones past CON_MAX_RESOURCES */
	const con_resource_t **res_list;
	size_t nres_list;
	con_res_col_t res_sort_col;
	bool res_sort_invert;
	char res_filter[64];
	bool res_stale; /* resources changed since res_list was built */

	/* The live tasks by spawn site (con_model_groups_resort), sorted
	 * and filtered: group_list points into groups. */
	con_group_t *groups;
	size_t ngroups;
	const con_group_t **group_list;
	size_t ngroup_list;
	con_group_col_t group_sort_col;
	bool group_sort_invert;
	char group_filter[64];
	bool groups_stale; /* tasks changed since the groups were built */
	/* The session shows the groups: con_model_resort() keeps them up
	 * to date (otherwise only con_model_groups_resort() does). */
	bool groups_on;

	/* private */
	size_t res_cap, res_hash_cap, res_list_cap;
	size_t groups_cap;
	const con_task_t **group_tmp; /* the live tasks, groups_cap long */
	size_t groups_room; /* groups and group_list, as long as this */
	con_resource_t **res_hash;   /* open addressing by id */
	uint64_t oldest_dropped_ns;  /* of the dropped resources kept */
	struct con_str_s **strs; /* task names and files, by hash, chained */
	size_t strs_cap, nstrs;
	/* The entry each caller found last (model.c's str_ref_in()). */
	struct con_str_s *str_hint[CON_STR_HINTS];

	/* The task records: slabs of CON_TASK_SLAB, the last one used up
	 * to slab_used; retired records on a free list (linked through
	 * their first word) for reuse. */
	con_task_t **slabs;
	size_t nslabs, slabs_cap, slab_used;
	con_task_t *free_tasks;
	/* Index by id, open addressing: 1 + the task's index in tasks[]
	 * (0: empty; CON_HASH_TOMB: a task deleted there, hash_tombs of
	 * them), so a slot is 4 bytes, not a pointer's 8. */
	uint32_t *hash;
	size_t hash_cap, hash_tombs;
	/* The finished tasks kept, by finish time (model_retain.c): a
	 * sorted run fin[fin_lo, fin_hi), those finished since the last
	 * update's end after it, unsorted, up to fin_pend (fin_cap room),
	 * and a binary min-heap of those that came too far out of order,
	 * nfin_heap of fin_heap_cap.  An entry whose task is gone, or
	 * finished at another time, is stale: it goes when it comes
	 * first, or in a compaction. */
	con_fin_t *fin, *fin_heap;
	size_t fin_lo, fin_hi, fin_pend, fin_cap, nfin_heap, fin_heap_cap;
	size_t list_cap, tasks_cap, warnings_cap;
	bool list_rebuild;  /* sort or filter changed: sort everything */
	/* Changed since the list was built; past an eighth of the tasks
	 * (dirty_overflow) they are only flagged (con_task_t.dirty), not
	 * put in the vector: a stream of every task (the first full
	 * update) would make it as long as the tasks. */
	con_task_t **dirty;
	size_t ndirty, dirty_cap;
	bool dirty_overflow;
	uint64_t oldest_finished_ns; /* of the finished tasks kept (0: none) */
	uint32_t stolen_hi;   /* workers[] with stolen_by_others written */
	uint32_t workers_cap; /* workers[] slots (con_model_workers_reserve) */
	/* The latest events, a ring of recent_cap (grown to
	 * CON_RECENT_EVENTS as they come: it only wraps once there), NULL
	 * until events. */
	weft_event_t *recent;
	size_t recent_cap;
	uint64_t nrecent; /* events put in it */
	/* Spawn sites met (every Update's sites), naming the tasks whose
	 * records name one (task_set()); .unknown: records of a site not
	 * met, left unnamed. */
	weft_wire_sites_t sites;
} con_model_t;

void con_model_init(con_model_t *m, const char *target);
void con_model_fini(con_model_t *m);
/* A deep copy of @src into @dst (uninitialised): nothing shared, each
 * fed, resorted and freed (con_model_fini) on its own.  The spawn-site
 * groups are rebuilt when next read. */
void con_model_clone(con_model_t *dst, const con_model_t *src);
/* About the heap bytes @m holds: what a clone of it costs. */
size_t con_model_bytes(const con_model_t *m);

/*
 * A packed copy of a model (model_pack.c): the tasks as varints in blob
 * (strings, then tasks, list and dirty vector), the rest a deep copy with
 * no tasks.  About 30 bytes a finished task against a clone's 290.
 */
typedef struct con_packed_s {
	con_model_t rest;
	uint8_t *blob;
	size_t len, strs_len, nstrs;
} con_packed_t;

/* Pack @src into @p (uninitialised); @src is not changed. */
void con_model_pack(con_packed_t *p, const con_model_t *src);
/* @dst (uninitialised) becomes the model @p was packed from, as
 * con_model_clone() would have made it; false (and @dst zeroed, nothing
 * to free) when the blob does not parse. */
bool con_model_unpack(con_model_t *dst, const con_packed_t *p);
/* Its heap bytes (the budget's measure). */
size_t con_packed_bytes(const con_packed_t *p);
void con_packed_free(con_packed_t *p);

/*
 * A model saved as bytes that outlive the process (model_save.c: the
 * replay's side index): the packed tasks and the rest laid out as in
 * memory, so read back only by a build whose con_model_save_layout() is
 * the same.
 */
typedef struct con_saved_s {
	uint8_t *p;
	size_t len;
} con_saved_t;

/* @m's bytes into @out (uninitialised; con_saved_free() frees them). */
void con_model_save(con_saved_t *out, const con_model_t *m);
/* @dst (uninitialised) becomes the model saved in the @len bytes at
 * @bytes; false (and @dst zeroed, nothing to free) when they do not
 * parse. */
bool con_model_load(con_model_t *dst, const void *bytes, size_t len);
void con_saved_free(con_saved_t *s);
/* A number that changes with the layout con_model_save() writes. */
uint64_t con_model_save_layout(void);
/* model_awaits.c: an AWAIT_SITE event of @m's process noted; the line of
 * its await site @id (0: not met). */
void con_awaits_note(con_model_t *m, const weft_event_t *e);
uint32_t con_awaits_line(const con_model_t *m, uint32_t id);
/* model_sites.c: a model's sites copied (aborts without memory), and
 * saved as bytes (con_xmalloc'ed, *@len) and loaded back (false: the
 * bytes do not read). */
void con_sites_copy(weft_wire_sites_t *dst, const weft_wire_sites_t *src);
uint8_t *con_sites_save(const weft_wire_sites_t *s, size_t *len);
bool con_sites_load(weft_wire_sites_t *s, const uint8_t *p, size_t len);
/* A task record's name, file, line and state size: its own, or its
 * spawn site's when it names one and leaves its strings out. */
typedef struct con_task_names_s {
	const char *name, *file; /* may be NULL */
	uint32_t line, state_size;
	bool from_site; /* name and file are the site's, in m->sites */
} con_task_names_t;
void con_sites_name(con_model_t *m, const Weft__V1__Task *x,
		    con_task_names_t *out);
/* Any model's sites may change (before a frame's sites go in, a copy, a
 * restore): the string table's memories of site strings are let go. */
void con_sites_changed(void);
/* Feed one decoded frame; malformed content is ignored and counted. */
void con_model_frame(con_model_t *m, const Weft__V1__Frame *f);
void con_model_hello(con_model_t *m, const Weft__V1__Hello *h);
void con_model_update(con_model_t *m, const Weft__V1__Update *u);
/*
 * One task of an Update from its @len bytes at @p (decoded into
 * @scratch, no allocation a task), as con_model_update() applies each
 * of u->tasks: an Update read from its bytes is its tasks, one by one,
 * then con_model_update() with its other fields (the tasks' order
 * against them does not matter; applying a task twice is applying it
 * once).  Return: 0; the decoder's error, nothing applied.
 */
int con_model_task_raw(con_model_t *m, weft_wire_task_raw_t *scratch,
		       const uint8_t *p, size_t len);
/*
 * Stage @stage (0: its index slot, 1: its place in tasks[], 2: its
 * record) of what con_model_task_raw() of the task record at @p (@len
 * bytes) will read, fetched ahead; nothing when the record does not
 * start with its id.  Changes nothing.
 */
void con_model_task_raw_ahead(const con_model_t *m, const uint8_t *p,
			      size_t len, int stage);
void con_model_events(con_model_t *m, const weft_event_t *ev, size_t n);
const con_task_t *con_model_task(const con_model_t *m, uint64_t id);
/* Bucket @b's longest polls, longest first, into @out (CON_TL_TOP);
 * returns how many (0 when @b is not on the strip); *@polls gets the
 * bucket's poll count when not NULL. */
size_t con_model_spike(const con_model_t *m, uint64_t b, con_poll_t *out,
		       uint64_t *polls);
/* The bucket on the strip holding the longest poll (0: none). */
uint64_t con_model_worst_bucket(const con_model_t *m);
/* Worker @i's share of time in polls (0..1) over the last
 * CON_TL_POLL_WINDOW whole buckets up to the latest update; -1 when the
 * events do not tell (none streamed, or too few buckets yet). */
double con_model_poll_ratio(const con_model_t *m, uint32_t i);
/* Keep @id's events from now on, starting with those still in the
 * recent ring (nothing when @id is already watched; 0: none). */
void con_model_watch(con_model_t *m, uint64_t id);
/* Replace the watched task's events with @n events, oldest first. */
void con_model_watch_fill(con_model_t *m, const weft_event_t *ev, size_t n);
/* The watched task's event @back places from the newest (0: the
 * newest); NULL past the oldest kept. */
const weft_event_t *con_model_watch_event(const con_model_t *m, size_t back);
const con_worker_t *con_model_worker(const con_model_t *m, uint32_t i);
/* Drop finished tasks older than retain_ns (called by update). */
void con_model_retain(con_model_t *m);
/* Sort and filter settings; mark the list stale. */
void con_model_set_sort(con_model_t *m, con_task_col_t col, bool invert);
void con_model_set_filter(con_model_t *m, const char *filter);
/* Bring list (sorted, filtered) up to date if stale: a full sort after
 * the sort or filter changed, else only the tasks changed since, merged
 * in (O(n + k log k) for k changed tasks). */
void con_model_resort(con_model_t *m);
bool con_model_task_matches(const con_model_t *m, const con_task_t *t);
void con_model_header(const con_model_t *m, con_header_t *h);
const char *con_task_state_name(unsigned state);
/* What the views show for @t's state: its state's name, "running" for a
 * task a worker is polling (con_task_polled_by()), "cancelled" for a task
 * that ended cancelled (aborted, or idle at the runtime's destroy: status
 * -ECANCELED). */
const char *con_task_status_name(const con_model_t *m, const con_task_t *t);
/*
 * The worker polling @t as of the latest update, or NULL.  A task's own
 * record tells where its last poll left it (idle, queued): one stuck in
 * a poll (a blocking call, a deadlock, a loop) is told by the worker
 * that is in it, including a poll begun before anything listened, once
 * the runtime's monitor has seen it past the long-poll threshold.
 */
const con_worker_t *con_task_polled_by(const con_model_t *m,
				       const con_task_t *t);
/*
 * con_task_idle_ns() - @t's idle time as of the model's latest update:
 * the stretches a wake ended, and the one under way while it is idle
 * (counted from the end of its last pending poll, not from its next
 * wake, so a task parked for good shows it).  A task shown running
 * (con_task_polled_by()) has none under way: its stretch ends where the
 * worker's poll of it began.
 */
uint64_t con_task_idle_ns(const con_model_t *m, const con_task_t *t);
/*
 * con_task_idle_unknown() - whether @t is idle since before anyone
 * listened (known from the runtime's list, not from its events): its
 * idle time is not known, shown "?" and sorted as the longest (an
 * outside audit: a task hung since before the attach showed "IDLE 0" and
 * sorted last, where a user looking for it looks least).
 */
bool con_task_idle_unknown(const con_model_t *m, const con_task_t *t);
/* The state the views show for @t as a number to sort by: its own, but
 * WEFT_TASK_RUNNING while a worker polls it, and WEFT_TASK_DONE + 1
 * for "cancelled" (con_task_status_name()). */
unsigned con_task_shown_state(const con_model_t *m, const con_task_t *t);
/* The worker the views show for @t: the one polling it, else its last. */
uint32_t con_task_shown_worker(const con_model_t *m, const con_task_t *t);
/* A worker index as the views print it: "-" for none (a warning about
 * no worker, a task never polled: WEFT_EVENT_NO_WORKER). */
const char *con_fmt_worker(char *buf, size_t len, uint32_t worker);
const char *con_worker_state_name(unsigned state);
const char *con_task_col_label(con_task_col_t col);
const char *con_mode_name(con_mode_t mode);
/* "mutex cache", "mpsc demo.c:88", "resource 17" (not known yet), "-"
 * (none): what @t waits on, as the views print it. */
const char *con_task_waiting_text(const con_model_t *m, const con_task_t *t,
				  char *buf, size_t len);

/* ------------------------------------------------------- model_res.c */

const con_resource_t *con_model_resource(const con_model_t *m, uint64_t id);
/* Fold a Resource message in (malformed ones counted in bad_frames). */
void con_model_res_set(con_model_t *m, const Weft__V1__Resource *x);
/* Drop dropped resources older than retain_ns (called by update). */
void con_model_res_retain(con_model_t *m);
void con_model_res_free_all(con_model_t *m);
/* "cache" or "demo.c:88" or "#17": a resource's name, as views print it. */
const char *con_res_label(const con_resource_t *r, char *buf, size_t len);
const char *con_res_col_label(con_res_col_t col);
void con_model_res_set_sort(con_model_t *m, con_res_col_t col, bool invert);
void con_model_res_set_filter(con_model_t *m, const char *filter);
/* Bring res_list up to date (a full sort: resources are few). */
void con_model_res_resort(con_model_t *m);
bool con_model_res_matches(const con_model_t *m, const con_resource_t *r);
bool con_model_res_is_consistent(const con_model_t *m);
/* The sample @back updates ago (0 the newest); 0 when none. */
/* @w's series, made (zeroed) if it has none yet. */
con_worker_series_t *con_worker_series(con_worker_t *w);
uint32_t con_worker_depth_at(const con_model_t *m, const con_worker_t *w,
			     unsigned back);
bool con_model_is_consistent(const con_model_t *m);

/* ---------------------------------------------------- model_groups.c */

void con_model_groups_set_sort(con_model_t *m, con_group_col_t col,
			       bool invert);
void con_model_groups_set_filter(con_model_t *m, const char *filter);
/* Rebuild the groups from the live tasks and sort and filter them, when
 * the tasks, the sort or the filter changed (O(n log n) in the live
 * tasks; called by con_model_resort). */
void con_model_groups_resort(con_model_t *m);
bool con_model_group_matches(const con_model_t *m, const con_group_t *g);
const char *con_group_col_label(con_group_col_t col);
/* "app.c:12", or "-" when the site is not known. */
const char *con_group_site(const con_group_t *g, char *buf, size_t len);
/* "task-leak,long-poll": the warnings' kinds, "-" for none. */
const char *con_fmt_warning_bits(uint32_t bits, char *buf, size_t len);
void con_model_groups_free(con_model_t *m);

/* ------------------------------------------------------------- grid.c */

/* Semantic colour roles: one palette (tty.c maps them to curses pairs). */
#define CON_ROLES(X)                                                           \
	X(NORMAL)                                                             \
	X(HEADER)                                                             \
	X(TITLE)                                                              \
	X(COLUMN)                                                             \
	X(SELECTED)                                                           \
	X(DIM)                                                                \
	X(GOOD)                                                               \
	X(WARN)                                                               \
	X(BAD)                                                                \
	X(SPARK)                                                              \
	X(MODE)

typedef enum con_role_e {
#define CON_X(name) CON_ROLE_##name,
	CON_ROLES(CON_X)
#undef CON_X
	CON_ROLE_MAX
} con_role_t;

typedef struct con_cell_s {
	wchar_t ch;
	uint8_t role;
} con_cell_t;

/*
 * Every cell is reached through the functions below, which drop what
 * falls outside the grid or outside the rows the clip leaves open: a
 * view drawn into a 1x1 grid, or told to draw at rows it does not have,
 * writes nothing and reads nothing out of place.
 */
typedef struct con_grid_s {
	/* public, read-only */
	int w, h;
	con_cell_t *cells; /* h rows of w, row by row */
	bool ascii;        /* sparklines and bars in ASCII */
	/* private: writes reach rows [clip_top, clip_end) (con_grid_clip) */
	int clip_top, clip_end;
} con_grid_t;

/* A grid of at least 1x1 (smaller sizes are raised to 1). */
void con_grid_init(con_grid_t *g, int w, int h, bool ascii);
void con_grid_fini(con_grid_t *g);
/* Blank every cell (the clip is not consulted). */
void con_grid_clear(con_grid_t *g);
/* Let writes reach only rows [@top, @top + @rows) until con_grid_unclip()
 * (a view's area: what it draws past it is dropped). */
void con_grid_clip(con_grid_t *g, int top, int rows);
void con_grid_unclip(con_grid_t *g);
/* The cell at (x, y), or NULL outside the grid or the clip. */
con_cell_t *con_grid_cell(con_grid_t *g, int x, int y);
/* The column after row @y's last non-blank cell (0: blank, or no row
 * @y). */
int con_grid_row_end(const con_grid_t *g, int y);
/* Write UTF-8 @s at (x, y), clipped; returns the column after it. */
int con_grid_put(con_grid_t *g, int x, int y, con_role_t role, const char *s);
int con_grid_printf(con_grid_t *g, int x, int y, con_role_t role,
		    const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* A row's role (cells not yet written keep theirs). */
void con_grid_fill_row(con_grid_t *g, int y, con_role_t role);
/*
 * A table's header row at @y (the tasks, sites and resources views), in
 * CON_ROLE_COLUMN: @n columns, column c @wid[c] cells wide (negative:
 * left-aligned), labelled @label[c], the sort arrow after @sort_col's
 * (down when @invert).  Returns the column after the last.
 */
int con_table_head(con_grid_t *g, int y, const int *wid,
		   const char *const *label, int n, int sort_col, bool invert);
/* One cell of a table's row at (@x, @y): a space, then @s in @wid cells
 * (negative: left-aligned), cut as con_fit_end() does.  Returns the
 * column after it. */
int con_table_cell(con_grid_t *g, int x, int y, con_role_t role, int wid,
		   const char *s);
/* @s in @width bytes, its end kept after a "~" (file names matter more
 * than their folders): @s itself when it fits, else @buf. */
const char *con_fit_end(const char *s, int width, char *buf, size_t len);
/* Sparkline of @n values scaled to @max (0: the values' max). */
int con_grid_spark(con_grid_t *g, int x, int y, const double *v, int n,
		   double max);
/* A bar @width wide, filled to @frac (0..1). */
int con_grid_bar(con_grid_t *g, int x, int y, int width, double frac,
		 con_role_t role);
/* Rows down to the last non-blank one, as UTF-8, trailing blanks cut. */
void con_grid_print(const con_grid_t *g, FILE *out);
/* The same from row @from on. */
void con_grid_print_from(const con_grid_t *g, int from, FILE *out);

/* ------------------------------------------------------------ views */

typedef struct con_session_s con_session_t;

/* Action flags (keys.c). */
#define CON_REDRAW 0x1u /* the screen must be drawn again */
#define CON_RESORT 0x2u /* the task list must be rebuilt first */
#define CON_QUIT 0x4u
#define CON_SEEK 0x8u   /* replay: the position changed */

typedef enum con_view_id_e {
	CON_VIEW_WORKERS,
	CON_VIEW_TASKS,
	CON_VIEW_WARNINGS,
	CON_VIEW_DETAIL,
	CON_VIEW_TIMELINE,
	CON_VIEW_SPIKE, /* the polls of a timeline bucket (no tab) */
	CON_VIEW_RESOURCES,
	CON_VIEW_RESOURCE, /* one resource's holders and waiters (no tab) */
	CON_VIEW_SITES,    /* the tasks by spawn site (no tab: key s) */
	CON_VIEW_MAX
} con_view_id_t;

typedef struct con_view_s {
	const char *name; /* --view NAME */
	int letter;       /* the key that shows it (0: no tab, no key) */
	const char *title;
	/* Draw into rows [top, top + rows) of @g. */
	void (*draw)(const con_session_t *s, con_grid_t *g, int top, int rows);
	/* Rows that can be selected (for movement keys). */
	size_t (*count)(const con_session_t *s);
	/* Enter on the selected row. */
	unsigned (*enter)(con_session_t *s);
} con_view_t;

struct con_session_s {
	con_model_t *model;
	con_view_id_t view;
	con_view_id_t prev_view;
	size_t sel[CON_VIEW_MAX];    /* selected row per view */
	size_t scroll[CON_VIEW_MAX]; /* first row shown per view */
	uint64_t detail_task;        /* the task detail shows */
	uint64_t detail_res;         /* the resource its view shows */
	uint64_t asked_task;         /* live: the detail last asked for */
	/* Timeline: the bucket under the cursor (0: the newest, followed). */
	uint64_t tl_cursor;
	/* The bucket the spike view lists (0: the one with the longest poll). */
	uint64_t spike_bucket;
	bool help;                   /* the ? overlay */
	bool paused;
	bool replay;
	bool at_end;       /* replay reached the end of the file */
	double speed;      /* replay speed */
	uint64_t seek_ns;  /* with CON_SEEK: where to go */
	bool filter_edit;  /* typing a filter */
	char filter_buf[64];
	bool ascii;
	bool color;
	bool once; /* --once: no status line, no overlay */
	unsigned fps;            /* redraws per second (default 10) */
	uint64_t exit_after_ns;  /* --exit-after: quit by itself, or 0 */
	const char *stats_path;  /* --stats: figures written at exit */
	struct con_replay_s *rp; /* replay source, or NULL */
	struct con_live_s *live; /* live source, or NULL */
};

extern const con_view_t con_view_workers;
extern const con_view_t con_view_tasks;
extern const con_view_t con_view_warnings;
extern const con_view_t con_view_detail;
extern const con_view_t con_view_timeline;
extern const con_view_t con_view_spike;
extern const con_view_t con_view_resources;
extern const con_view_t con_view_resource;
extern const con_view_t con_view_sites;

/* view.c: the frame around the views */
const con_view_t *con_view_get(con_view_id_t id);
const con_view_t *con_view_by_name(const char *name);
/* The whole screen: header, tabs, the view, the status line, help. */
void con_screen_draw(const con_session_t *s, con_grid_t *g);
/*
 * Where the times a view shows count from: live, the process's start
 * (the header's "up"); a replay, the file's start, as its position does
 * (a file recorded from outside begins long after the process did).
 */
uint64_t con_time_base(const con_session_t *s);
/* con_model_resort(), the spawn-site groups too when they show. */
void con_session_resort(con_session_t *s);
/* --once's text: the view as a grid @width wide, printed; the Tasks
 * view a page of CON_ONCE_PAGE rows at a time. */
void con_once_print(con_session_t *s, int width, FILE *out);
/* Tasks a --once page prints (its grid: 120 columns of 8 bytes, 1 MiB). */
#define CON_ONCE_PAGE 1024
/* Keep sel inside the view's rows and scroll so that sel shows. */
void con_session_clamp(con_session_t *s, int rows);
/* Before drawing: make the model watch the task the detail shows (its
 * recent events), filled from the replay's file or, live, asking the
 * target for the task's details once. */
void con_session_watch(con_session_t *s);
/* view_tasks.c: the selected task id (0 if none). */
uint64_t con_tasks_selected(const con_session_t *s);
/* view_timeline.c: the bucket under the cursor (0 when none yet). */
uint64_t con_timeline_cursor(const con_session_t *s);
/* view_spike.c: the bucket the spike view shows (0 when none). */
uint64_t con_spike_bucket(const con_session_t *s);
/* view_resources.c: the selected resource id (0 if none). */
uint64_t con_resources_selected(const con_session_t *s);
/* view_resources.c: the task at row @i of the resource view (holders,
 * then waiters); 0 when none. */
uint64_t con_resource_row_task(const con_session_t *s, size_t i);
/* view_sites.c: the selected group (NULL if none). */
const con_group_t *con_sites_selected(const con_session_t *s);
/* view_warnings.c: the warning shown at row @i (newest first). */
const con_warning_t *con_warnings_row(const con_model_t *m, size_t i);

/* ------------------------------------------------------------- keys.c */

/* Handle one key (curses key code or character); returns action flags. */
unsigned con_keys_handle(con_session_t *s, int key);
/* The help overlay's lines. */
void con_keys_help(con_grid_t *g, int top, int rows);

/* ----------------------------------------------------------- replay.c */

/*
 * A trace file replayed in bounded memory: an index of its records (16
 * bytes each, and two bits), the frames read from the file as the clock
 * reaches them.
 */
typedef struct con_replay_rec_s {
	uint64_t off; /* where the record starts in the file */
	uint64_t at;  /* its time (made non-decreasing) */
} con_replay_rec_t;

typedef struct con_replay_s {
	/* public, read-only */
	uint64_t first_ns, last_ns;
	uint64_t pos_ns; /* the replay clock */
	bool truncated;
	uint64_t skipped; /* bytes of torn records passed over (the reader) */
	char *error; /* why reading stopped early, or NULL */
	size_t n;    /* records indexed (the header not counted) */
	size_t next; /* the first record not yet fed to the model */
	/* private */
	struct weft_trace_reader_s *rd; /* kept open; read on from rd_at */
	size_t rd_at; /* the record rd reads next; SIZE_MAX: elsewhere */
	Weft__V1__Frame *hello; /* the file header's frame, a copy */
	bool hello_fed;
	con_replay_rec_t *rec;
	uint64_t *warn_bits;  /* an Update with warnings, one bit a record */
	uint64_t *batch_bits; /* an EventBatch */
	/* Progress on stderr while reading (replay.c): from open to
	 * con_replay_progress_off(), when stderr is a terminal. */
	bool progress;
	const char *path;
	uint64_t size;
	uint64_t progress_start, progress_at, pass_start;
	bool progress_shown;
	/* Checkpoints (replay.c): packed copies of a model, by record,
	 * sorted; ckpt_bytes of them at most ckpt_budget; one at most
	 * every ckpt_every bytes of file (doubled when they are thinned). */
	/* The index is made as the file is read (replay.c): by ix, up to
	 * indexed_bytes of the file; last_ns grows until indexed. */
	struct weft_trace_reader_s *ix;
	bool indexed;
	uint64_t indexed_bytes;
	size_t rec_cap;
	struct con_replay_ckpt_s *ckpt;
	size_t nckpt, ckpt_cap;
	size_t ckpt_bytes, ckpt_budget, ckpt_peak;
	uint64_t ckpt_every;
	uint64_t ckpt_taken, ckpt_thinned, ckpt_restored;
	/* The index pass's own model (replay.c), fed every record it
	 * indexes so that it takes checkpoints all along the file (a seek
	 * forward into what was never replayed reads from the nearest one);
	 * NULL without checkpoints, and once the index is done. */
	con_model_t *im;
	/* The checkpoints' packed tasks go to a file of their own (an
	 * unlinked one in $TMPDIR; -1: none, they stay in memory):
	 * spill_bytes of them in it at most spill_budget, so that many
	 * more fit than in memory; written at spill_end, a dropped one's
	 * blocks given back (a hole punched). */
	int spill_fd;
	uint64_t spill_end, spill_bytes, spill_budget;
	/* The last checkpoint's bytes in memory and on disk (the next
	 * one's room is made before it is packed). */
	size_t ckpt_last_mem;
	uint64_t ckpt_last_disk;
	/* The side index kept next to the trace (replay_side.c; NULL:
	 * none): its checkpoints read from there, the index pass's written
	 * there.  side_covered: the trace's bytes to the index pass's last
	 * record's end; side_loaded: records read from it at open (1 the
	 * whole index, 2 a part, 0 none). */
	struct con_side_s *side;
	uint64_t side_covered;
	int side_loaded;
	uint64_t side_restored; /* seeks from a side checkpoint */
	struct con_ahead_s *ahead; /* marks in the trace (replay_ahead.c) */
} con_replay_t;

/* A checkpoint: the model with records [0, next) fed, packed. */
typedef struct con_replay_ckpt_s {
	size_t next;
	size_t bytes; /* in memory: con_packed_bytes(), its blob's too
		       * unless spilled */
	bool spilled; /* pk.blob is NULL: pk.len bytes at spill_off */
	uint64_t spill_off;
	con_packed_t pk;
} con_replay_ckpt_t;

/* Checkpoints' bytes at most (WEFT_CONSOLE_CHECKPOINT_MB overrides) and
 * the file bytes between two at first. */
#define CON_CKPT_BUDGET (128u << 20)
/* The spill file's bytes at most, and at most a quarter of the trace's
 * size (WEFT_CONSOLE_CHECKPOINT_DISK_MB overrides both; 0: the
 * checkpoints stay in memory). */
#define CON_CKPT_DISK_BUDGET (2048ull << 20)
#define CON_CKPT_EVERY (8u << 20)

/* What weft-console indexes before its first screen, at most (the
 * first record at least); then CON_INDEX_STEP_NS between frames. */
#define CON_INDEX_OPEN_NS (100ull * 1000 * 1000)
#define CON_INDEX_STEP_NS (40ull * 1000 * 1000)

/* Index a file; returns 0 or a negative errno (message on stderr). */
int con_replay_open(con_replay_t *r, const char *path);
/* Index its first record, then on for at most @budget_ns (UINT64_MAX:
 * the whole file, as con_replay_open()); the rest is indexed by
 * con_replay_index() or by seeks past what is known. */
int con_replay_open_lazy(con_replay_t *r, const char *path,
			 uint64_t budget_ns);
/* The checkpoints' budget in bytes (0: none; those kept go). */
void con_replay_checkpoints(con_replay_t *r, size_t budget);
/* Index on for at most about @budget_ns (UINT64_MAX: to the end); true
 * once the whole file is indexed (last_ns, truncated, skipped and error
 * are then final). */
bool con_replay_index(con_replay_t *r, uint64_t budget_ns);
void con_replay_close(con_replay_t *r);
/* No more progress lines on stderr (before the screen is taken over). */
void con_replay_progress_off(con_replay_t *r);
/* Feed the model every frame up to @pos_ns, read from the file (from
 * the nearest checkpoint before @pos_ns when that is back, or ahead of
 * the model; from the start when there is none), taking checkpoints on
 * the way. */
void con_replay_seek(con_replay_t *r, con_model_t *m, uint64_t pos_ns);
/* replay_ahead.c: whether the model came from a mark ahead of the index
 * (*@from_ns its time); *@end_ns the trace's end the marks told (0). */
bool con_replay_ahead(const con_replay_t *r, uint64_t *from_ns,
		      uint64_t *end_ns);
/* replay_ahead.c: no seek from a mark any more (each waits for the
 * index pass: the exact state); @m, when it came from one, is reset. */
void con_replay_ahead_off(con_replay_t *r, con_model_t *m);
/* The time of the next warning after the current position, or 0 (in
 * what is indexed so far). */
uint64_t con_replay_next_warning(const con_replay_t *r);
/* The same, indexing on until one is found or the file ends. */
uint64_t con_replay_find_warning(con_replay_t *r);
/* replay_side.c: the side index, as this open found it ("whole": read
 * instead of the trace, "part": gone on from, "written": made anew,
 * "none": not kept) and what it became ("... -> whole": finished); its
 * file's bytes now (0: none). */
const char *con_replay_side_state(const con_replay_t *r);
uint64_t con_replay_side_bytes(const con_replay_t *r);
/* The side index's checkpoints (0: none). */
size_t con_replay_side_ckpts(const con_replay_t *r);
/* A side index is being written (the index pass not done, or its end
 * not written yet). */
bool con_replay_side_writing(const con_replay_t *r);
/* Up to @max of task @id's events before the current position, newest
 * last, into @out (read from the file's event batches); returns how
 * many.  Moves the file's reader, not the model. */
size_t con_replay_task_events(con_replay_t *r, uint64_t id, weft_event_t *out,
			      size_t max);

/* ------------------------------------------------------------- live.c */

/* How far ahead live.c fetches an Update's tasks (a power of two). */
#define CON_LIVE_AHEAD 32

typedef struct con_live_s {
	/* public, read-only */
	char *target;    /* PID, unix:PATH or tcp://HOST:PORT */
	int fd;          /* -1 while not connected */
	bool connected;
	bool got_header; /* the first frame (a FileHeader) arrived */
	uint64_t frames;   /* frames fed to the model, over all connections */
	uint64_t attempts; /* connections tried */
	char error[256];   /* why the last connection failed or ended */
	/* Frames the hand decoder (live.c: updates and events read from
	 * their bytes) left to protobuf-c: malformed ones among them. */
	uint64_t raw_refused;
	/* private */
	weft_wire_decoder_t dec;
	con_model_t *feeding;      /* the model con_live_feed() feeds */
	weft_wire_task_raw_t task; /* an Update's tasks, one at a time */
	weft_wire_buf_t rest;      /* an Update's other fields */
	weft_event_t *ev;          /* an EventBatch's events */
	size_t ev_cap;
	uint8_t *rbuf; /* con_live_pump()'s reads */
	/* The Update's tasks read ahead of the one applied (live_task()):
	 * where the next is, and the last CON_LIVE_AHEAD found. */
	const uint8_t *ahead, *ahead_end;
	size_t ahead_found, ahead_done;
	const uint8_t *ahead_p[CON_LIVE_AHEAD];
	size_t ahead_len[CON_LIVE_AHEAD];
} con_live_t;

/* A CLOCK_MONOTONIC time in ms. */
uint64_t con_live_now_ms(void);
/* Check @target's form (not its reachability); -EINVAL when bad. */
int con_live_init(con_live_t *l, const char *target);
void con_live_fini(con_live_t *l);
/* Connect (blocking) and send a Subscribe; 0 or a negative errno (the
 * reason in error). */
int con_live_connect(con_live_t *l);
/* The connection made of @fd (-1: none; the bytes come through
 * con_live_feed() alone, as the fuzzer gives them): the decoder set up
 * with its hand decoding, a header expected first. */
void con_live_begin(con_live_t *l, int fd);
/* Ask for task @id's details (CONTROL_OP_TASK_DETAIL; the reply is an
 * Update holding that task, histograms included); 0 or a negative
 * errno (-ENOTCONN when not connected). */
int con_live_request_task(con_live_t *l, uint64_t id);
/* Close the connection (if any), keeping @why (if not NULL) in error. */
void con_live_close(con_live_t *l, const char *why);
/* Decode stream bytes and feed each frame to @m; 0, or a negative
 * error (a record that does not decode, no header first): the caller
 * then closes. */
int con_live_feed(con_live_t *l, con_model_t *m, const void *data,
		  size_t len);
/* Read and feed until @until_ms (con_live_now_ms()): 0 at the deadline,
 * a negative errno when the connection ended (it is then closed). */
int con_live_pump(con_live_t *l, con_model_t *m, uint64_t until_ms);
/* The live weft processes of this user: 0 with the only one's pid in
 * @target; -ENOENT for none; -E2BIG for several (listed on @list);
 * another negative errno when the socket directory is unusable. */
int con_live_discover(char *target, size_t len, FILE *list);

/* ------------------------------------------------------ main.c, run.c */

/* What the command line asked for, beside the session's settings. */
typedef struct con_opts_s {
	const char *replay; /* --replay FILE; NULL: a live process */
	const char *target; /* PID, unix:PATH, tcp://...; NULL: the only one */
	const char *filter; /* --filter, or NULL */
	uint64_t after_ns;  /* --after */
	bool have_after;
	bool once;   /* --once: one view as text */
	bool seek_bench; /* --seek-bench: time the replay's open and seeks */
	/* --attach-bench: time a live attach to its first screen and to
	 * every task, and the memory a task costs */
	bool attach_bench;
	bool invert; /* --invert */
	int width;   /* --width */
	int col;     /* --sort */
} con_opts_t;

/* run.c: attach to o->target (or the only live process); the exit
 * status. */
int con_run_live(con_session_t *s, const con_opts_t *o);
/* run.c: replay the file o->replay; the exit status. */
int con_run_replay(con_session_t *s, const con_opts_t *o);


/* -------------------------------------------------------------- tty.c */

/* Run the interactive UI until q; returns the exit status. */
int con_tty_run(con_session_t *s);

#endif /* WEFT_CONSOLE_H */
