/* SPDX-License-Identifier: MIT */
/*
 * The recorder's face inside libweft (the API is weft/trace.h).
 */
#ifndef WEFT_RECORDER_INTERNAL_H
#define WEFT_RECORDER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* recorder_env.c: WEFT_TRACE=path starts recording, once per process
 * (weft_runtime_create() calls it); a failure is reported on stderr. */
void weft__trace_env_start(void);

/* recorder.c: weft_trace_stop(), and whether the error it returns was
 * already said on stderr (*@said). */
int weft__trace_stop_said(bool *said);

struct weft_wire_buf_s;
/* recorder.c: the flight recorder's snapshot (what weft_trace_snapshot()
 * writes) appended to @out.  Return: 0; -ENOENT; -ENOMEM. */
int weft__trace_snapshot_append(struct weft_wire_buf_s *out);

/* recorder_ckpt.c: a recording's checkpoint marks (its comment).
 * Guarded by rec.lock. */
typedef struct weft_rec_ckpt_s {
	uint64_t every; /* bytes between marks at least; 0: no marks */
	uint64_t last;  /* the file's last mark (0: none yet) */
	uint64_t due;   /* a full update is asked for from here (0: none
			 * marked yet, the first full one comes anyway) */
	bool asked;     /* asked, not yet come */
	uint64_t marks; /* written, all files */
} weft_rec_ckpt_t;

/* A recording starts: the spacing read (WEFT_TRACE_CHECKPOINT_MB). */
void weft__rec_ckpt_start(weft_rec_ckpt_t *c);
/* A new file (rotation): no mark in it yet. */
void weft__rec_ckpt_new_file(weft_rec_ckpt_t *c);
/* Whether to ask for a full update now, the file's bytes at @at (true
 * once until the full update is marked). */
bool weft__rec_ckpt_want(weft_rec_ckpt_t *c, uint64_t at);
/* The full update's records, @b's bytes from @before on, at @file_off of
 * the file, get a mark before them (time @now_ns); @tasks of its tasks,
 * @changed of them changed in the pass (the next mark's spacing).
 * Return: 0; -ENOMEM (@b unchanged, the update unmarked). */
int weft__rec_ckpt_mark(weft_rec_ckpt_t *c, struct weft_wire_buf_s *b,
			size_t before, uint64_t file_off, uint64_t now_ns,
			size_t tasks, size_t changed);

#endif /* WEFT_RECORDER_INTERNAL_H */
