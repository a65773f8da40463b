/* SPDX-License-Identifier: MIT */
/*
 * weft-bench-gentrace: what its files share.  gentrace.c reads the
 * options and runs the collector passes; gentrace_world.c is the service
 * it pretends to trace (tasks, workers, waits, steals), which puts each
 * thread's events in its buffer and marks the tasks the next update must
 * list; gentrace_file.c writes those as the recorder would (the header,
 * a pass's EventBatch runs, the updates).  Single-threaded: everything
 * is in g.
 */
#ifndef WEFT_BENCH_GENTRACE_H
#define WEFT_BENCH_GENTRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weft/wire.h"

#define MAX_WORKERS 256u

/* What a task awaits; the first five are a request's. */
enum wait_kind { W_CACHE, W_DB, W_SLEEP, W_UPSTREAM, W_JOB, W_TICK, NWAIT };

/* Resources, ids 1.. in this order. */
enum res_kind { R_CACHE = 1, R_DB, R_WHEEL, R_UPSTREAM, R_POOL, NRES_PLUS1 };
#define NRES (NRES_PLUS1 - 1)

struct wait_desc {
	uint64_t latency_ns; /* how long the wait lasts, +- a quarter */
	unsigned res;        /* the resource waited on (0: none) */
	unsigned op;         /* weft_resource_op_t */
	unsigned source;     /* the wake's source */
	uint32_t line;       /* the await's line in handlers.c */
};

struct site {
	const char *name;
	const char *file;
	uint32_t line;
	uint32_t state_size;
};
#define SITE_ACCEPTOR 0u
#define SITE_TICKER 1u

/* The tables (gentrace_world.c). */
extern const struct wait_desc waits[NWAIT];
extern const struct site sites[];

#define ACCEPT_LINE 90u
#define PARKED_NONE 0xffu

struct task {
	uint64_t id, parent;
	uint64_t spawned_ns, finished_ns;
	uint64_t busy_ns, scheduled_ns, idle_ns, max_poll_ns;
	uint64_t since; /* when the state began (idle or scheduled) */
	uint64_t waiting_since_ns;
	uint64_t polls, wakes, clones;
	uint32_t dirty_epoch; /* the update it was listed for, + 1 */
	uint16_t worker;
	uint8_t site;
	uint8_t state;     /* weft_task_state_t */
	uint8_t steps;     /* waits left before it completes */
	uint8_t wait;      /* enum wait_kind of its wait, or NWAIT */
	uint8_t parked;    /* the await it is parked at: enum wait_kind,
			    * NWAIT the acceptor's, PARKED_NONE none yet */
	uint8_t waiting;   /* waits on waits[wait].res now */
	uint8_t holds;     /* holds the cache's mutex */
	uint8_t named;     /* its name went out */
	uint32_t warnings; /* bit (1 << kind) */
};

/* A FIFO of waiting tasks (one per kind of wait and worker). */
struct fifo_entry {
	uint32_t slot;
	uint64_t due;
};

struct fifo {
	struct fifo_entry *e;
	uint32_t head, len, cap; /* cap: a power of two */
};

struct evbuf {
	weft_event_t *e;
	size_t n, cap;
};

struct worker {
	uint16_t index;
	uint64_t now;
	bool parked;
	uint64_t next_arrival;
	uint64_t mean_gap; /* between its requests */
	uint32_t acceptor; /* its slot */
	uint32_t *runq;    /* ring of slots */
	uint32_t rq_head, rq_len, rq_cap;
	struct fifo fifo[NWAIT];
	struct evbuf ev;
	weft_probe_worker_t model;
	uint64_t poll_ns, window_polls, window_poll_ns, window_max;
	uint64_t busy_since;
	uint64_t last_delay_warn;
	/* The spawn sites its ring has announced (bit: site index), as a
	 * runtime's ring announces each before its first SPAWN there. */
	uint32_t sites_told;
	/* The await sites its ring announced (AWAIT_SITE), a bit each:
	 * the waits (id k + 1) and the acceptor's (id NWAIT + 1). */
	uint32_t awaits_told;
};

struct gentrace {
	/* options */
	uint64_t want_bytes;
	unsigned nworkers;
	double rate; /* requests per second, all workers */
	bool progress;
	/* --sites: Task records name their spawn site (Task.site, each
	 * Site once, as the delta stream sends them) instead of carrying
	 * its strings; the budget counts the bytes the records would have
	 * taken with them (saved), so that both forms hold the same run. */
	bool sites_mode;
	/* --parked-at: where a task parks as traces said it before
	 * parkfold: a PARKED_AT after the POLL, no await site in the POLL
	 * and no AWAIT_SITE (the old form, still read). */
	bool parked_at_mode;
	uint64_t saved;
	uint64_t sites_sent;    /* bit: site index sent */
	weft_wire_buf_t legacy; /* scratch: an update in the names form */
	/* the world */
	struct task *tasks;
	uint32_t ntasks_cap, *free_slots, nfree;
	struct worker *w;
	struct evbuf pool; /* the blocking pool's threads: other threads */
	uint64_t next_id;
	uint64_t start_ns, now; /* the trace's clock */
	uint32_t epoch;         /* updates written so far */
	uint32_t *dirty;
	size_t ndirty, dirty_cap;
	weft_probe_warning_t *warn;
	size_t nwarn;
	uint64_t warn_seq, warn_lost;
	weft_probe_resource_t res[NRES + 1];
	weft_hist_t res_wait[NRES + 1], res_hold[NRES + 1];
	uint64_t res_new_at[NRES + 1];
	uint64_t prev_update_ns;
	uint64_t long_poll_in;
	/* output */
	int fd;
	const char *path;
	weft_wire_buf_t out;
	weft_wire_batch_t batch;
	weft_probe_task_t *copies;
	const weft_probe_task_t **tptrs;
	size_t copies_cap;
	/* checkpoints (gentrace_file.c): every ckpt_every bytes at least
	 * (0: none), the last mark's offset, how many */
	uint64_t ckpt_every, ckpt_last, ckpt_due, ckpts;
	uint64_t ckpt_bytes; /* what they added (not counted to --bytes) */
	uint8_t *slot_free;  /* scratch: a checkpoint's free slots */
	/* what was written */
	uint64_t bytes, events, spawned, completed, polls, warnings, updates,
		batches, steals;
	uint64_t live, live_max;
	uint64_t prev_events, prev_polls, prev_steals; /* at the last update */
	/* progress */
	uint64_t t0, shown_at;
	bool shown;
};

/* gentrace.c */
extern struct gentrace g;
void die(int status, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), noreturn));
void *xrealloc(void *p, size_t n);

/* gentrace_world.c */
void world_seed(unsigned long seed);
void world_setup(void);
void run_slice(struct worker *w, uint64_t slice_end);
void steal_round(void);

/* gentrace_file.c */
void file_begin(void);
void write_out(bool all);
void pass_out(void);
void update_out(void);
void progress(bool done);

#endif
