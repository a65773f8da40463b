/* SPDX-License-Identifier: MIT */
/*
 * weft-trace: what the verbs share.  A trace file is loaded whole into a
 * model (trace_model.c): every event, time-ordered, and what the updates
 * said about tasks (names and spawn locations, which the events only
 * carry as process addresses).  Verbs read the model and print.
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

#define TT_EXIT_BAD_INPUT 2

typedef struct tt_task_s {
	uint64_t id;
	char *name; /* "" when unnamed */
	char *file; /* "" when unknown */
	uint32_t line;
	struct tt_task_s *next; /* hash chain */
} tt_task_t;

typedef struct tt_warning_s {
	uint32_t kind;
	uint32_t worker;
	uint64_t task;
	uint64_t at_ns;
	uint64_t value_ns;
	char *detail;
} tt_warning_t;

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
	/* Frames. */
	uint64_t frames, updates, batches, others;
	uint64_t bytes;       /* whole records read */
	uint64_t event_bytes; /* of which EventBatch records */
	bool truncated;
	uint64_t events_dropped; /* the last update's count */
	uint64_t tasks_end_unseen; /* the same: tasks whose end was dropped */
	/* The last update's drops by each worker's ring (the rest were
	 * other threads'); nworker_drops: the highest index seen, plus 1. */
	uint64_t worker_drops[64];
	unsigned nworker_drops;
	/* Events, ordered by time (stable). */
	weft_event_t *ev;
	size_t nev;
	/* Tasks by id. */
	tt_task_t **tasks;
	size_t ntask_buckets;
	size_t ntasks;
	tt_warning_t *warnings;
	size_t nwarnings;
} tt_trace_t;

/* trace_model.c */
void *tt_xmalloc(size_t n);
void *tt_xrealloc(void *p, size_t n);
char *tt_xstrdup(const char *s);
void tt_die(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));
void tt_load(tt_trace_t *t, const char *path);
void tt_free(tt_trace_t *t);
const tt_task_t *tt_task(const tt_trace_t *t, uint64_t id);
const char *tt_task_label(const tt_trace_t *t, uint64_t id, char *buf,
			  size_t len);
void tt_print_drops(FILE *out, const tt_trace_t *t);

/* verb_*.c: each takes argv after the verb name (argv[0] is the verb). */
int tt_verb_info(int argc, char **argv);
int tt_verb_dump(int argc, char **argv);
int tt_verb_stats(int argc, char **argv);
int tt_verb_export(int argc, char **argv);
int tt_verb_list(int argc, char **argv);
int tt_verb_record(int argc, char **argv);
int tt_verb_snapshot(int argc, char **argv);

#endif /* WEFT_TRACE_TOOL_H */
