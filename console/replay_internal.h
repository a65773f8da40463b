/* SPDX-License-Identifier: MIT */
/*
 * The replay's parts (replay.c, replay_ckpt.c, replay_ahead.c,
 * replay_side.c): prototypes by the file that defines them.
 */
#ifndef WEFT_CONSOLE_REPLAY_INTERNAL_H
#define WEFT_CONSOLE_REPLAY_INTERNAL_H

#include <sys/stat.h>

#include "console.h"

/* A record's bits in the index (con_replay_rec_push()). */
#define CON_REC_WARN 1u
#define CON_REC_BATCH 2u

/* A checkpoint in the side index: the model with records [0, next) fed,
 * saved in len bytes at off (their checksum hash). */
typedef struct con_side_ckpt_s {
	size_t next;
	uint64_t off, len, hash;
} con_side_ckpt_t;

/* The side index of a trace (replay_side.c). */
typedef struct con_side_s {
	int fd;       /* the index file (-1: none) */
	bool writing; /* appending to part (renamed to path at the end) */
	bool done;    /* written whole and renamed, this open */
	char *path;   /* FILE.weftidx, or the cache's name for it */
	char *part;   /* path.part, while written */
	int trace_fd; /* the trace, locked (flock) while its index is written */
	con_side_ckpt_t *ck;
	size_t nck, ck_cap;
	uint64_t end;     /* where the next chunk goes */
	size_t recs_out;  /* records written so far */
	uint64_t due;     /* the trace's offset the next checkpoint is due at */
	uint64_t covered; /* the trace's bytes indexed as of the last mark */
	uint64_t mark_skipped, mark_tail; /* the last mark's (the TOC's) */
	uint64_t bad;     /* checkpoints that did not read back (dropped) */
	char *trace_real; /* the trace's real path (the index's PATH chunk) */
	bool in_cache;    /* path is in the cache's folder (trimmed) */
} con_side_t;

/* What con_side_peek() reads of an index: the trace it was made of. */
typedef struct con_side_peek_s {
	uint64_t dev, ino, head_len, head_hash;
	char *trace; /* its real path (the caller frees it) */
} con_side_peek_t;

/* replay.c */
/* One more record in @r's index (CON_REC_* bits in @flags). */
void con_replay_rec_push(con_replay_t *r, uint64_t off, uint64_t at,
			 unsigned flags);
/* The index pass's model goes (the index done, or no checkpoints). */
void con_replay_im_free(con_replay_t *r);

/* replay_ckpt.c */
/* The checkpoints' budgets (the environment's, or by the trace's
 * size) and their spill file. */
void con_replay_ckpt_config(con_replay_t *r);
/* After record @next - 1 was fed to @m: a checkpoint of it when one is
 * due. */
void con_replay_ckpt_maybe(con_replay_t *r, const con_model_t *m, size_t next);
/* Checkpoint @i's memory and spilled bytes given back (r->nckpt is the
 * caller's). */
void con_replay_ckpt_drop(con_replay_t *r, size_t i);
void con_replay_ckpt_free_all(con_replay_t *r);
/* In @n checkpoints of @size bytes each, sorted by their first member
 * (a size_t, the record count they were taken at), the last at or
 * before @next (@n: none). */
size_t con_replay_ckpt_before(const void *ckpts, size_t n, size_t size,
			      size_t next);
/* The last checkpoint in memory at or before record count @next
 * (r->nckpt: none). */
size_t con_replay_ckpt_find(const con_replay_t *r, size_t next);
/* @m becomes checkpoint @i's model, keeping its own settings; false
 * when it does not read back. */
bool con_replay_ckpt_restore(con_replay_t *r, con_model_t *m, size_t i);
/* @m emptied, its session's settings and title kept. */
void con_replay_model_reset(con_model_t *m);
/* @m becomes @got (a checkpoint's model, taken), keeping its own
 * settings and title. */
void con_replay_model_adopt(con_model_t *m, con_model_t *got);

/* A checkpoint mark in the trace (replay_ahead.c): where, and its time. */
typedef struct con_ahead_mark_s {
	uint64_t off, at;
} con_ahead_mark_t;

/* Seeks ahead of the index pass (replay_ahead.c). */
typedef struct con_ahead_s {
	int fd;               /* the trace, for the marks' reads */
	con_ahead_mark_t *mk; /* the marks found, by offset (and time) */
	size_t nmk, cap;
	uint64_t end_ns; /* the trace's last record's time */
	/* The model was restored from the mark at from (time from_ns) and
	 * read on to next_off (the last record fed at last_at; pending:
	 * read, after the position, not fed yet). */
	bool active, at_end;
	uint64_t from, from_ns, next_off, last_at;
	Weft__V1__Frame *pending;
	uint64_t seeks; /* restored from a mark */
} con_ahead_t;

/* replay_ahead.c */
/* After the open's first indexing: the trace's marks beyond it found
 * (r->ahead set when there are any). */
void con_ahead_open(con_replay_t *r);
void con_ahead_close(con_replay_t *r);
/* A seek to @pos served from a mark (true), or left to the usual path
 * (false: @m reset first when it was ahead). */
bool con_ahead_seek(con_replay_t *r, con_model_t *m, uint64_t pos);

/* replay_side.c */
/*
 * Find, check and read the side index of @r's trace (@st: its identity):
 * 1 when a whole one was found (@r's index filled: records, end time,
 * truncated, skipped, error), 2 when a part was (@r's records up to
 * its last mark, *@covered and *@skipped where the index pass goes on
 * from; the last checkpoint is that mark's model), 0 when none (a new
 * one is started when the index can be written).  @r->side is NULL when
 * no index is kept (WEFT_CONSOLE_INDEX=0, no place to write one).
 */
int con_side_open(con_replay_t *r, const struct stat *st, uint64_t *covered,
		  uint64_t *skipped);
/* After the index pass's record @r->n - 1 ended at @covered: a
 * checkpoint of @m when one is due. */
void con_side_step(con_replay_t *r, const con_model_t *m, uint64_t covered,
		   uint64_t skipped);
/* The index pass is done: a last checkpoint (@m, when not NULL) and the
 * end's facts written, the file given its name. */
void con_side_end(con_replay_t *r, const con_model_t *m, uint64_t covered);
/* The last side checkpoint at or before record count @next (nck: none). */
size_t con_side_before(const con_side_t *s, size_t next);
/* @m (uninitialised) becomes side checkpoint @i's model; false (@m
 * zeroed) when it does not read back (it is then dropped). */
bool con_side_restore(con_side_t *s, size_t i, con_model_t *m);
/* Start the index being written anew (its part emptied, a header
 * written); false when it is not written, or that fails. */
bool con_side_anew(con_side_t *s, const struct stat *st);
void con_side_close(con_side_t *s);
/* The index @fd's header and PATH chunk into @pk: 1 read whole; 0 an
 * index this build does not read (another version or layout: @pk's
 * trace NULL) or one with no PATH; -1 not an index at all. */
int con_side_peek(int fd, con_side_peek_t *pk);
/* @trace is still the file @pk's index was made of (device, inode,
 * first bytes). */
bool con_side_head_matches(const char *trace, const con_side_peek_t *pk);

/* replay_cache.c */
/* The cache's name for @trace's index (NULL: no cache folder). */
char *con_side_cache_path(const char *trace);
/* mkdir -p of @path's folder. */
void con_side_make_dirs(const char *path);
/* The cache's bounds (WEFT_CONSOLE_INDEX_CACHE_MB, _DAYS). */
#define CON_CACHE_MB 2048
#define CON_CACHE_DAYS 30
/*
 * The side indexes in @dir trimmed (the cache's folder): those whose
 * trace is gone or is another file now, those unused (mtime) for more
 * than @max_age seconds before @now, then the least recently used
 * until their bytes are at most @budget.  @keep (a path in @dir, or
 * NULL) and any file locked (being written) stay.  Only files named
 * *.weftidx and *.weftidx.part are looked at.  The number removed.
 */
size_t con_replay_cache_evict(const char *dir, const char *keep,
			      uint64_t budget, uint64_t max_age, time_t now);
/* con_replay_cache_evict() on @keep's folder, with the environment's
 * bounds (or CON_CACHE_MB, CON_CACHE_DAYS). */
void con_replay_cache_trim(const char *keep);

#endif /* WEFT_CONSOLE_REPLAY_INTERNAL_H */
