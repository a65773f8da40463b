/* SPDX-License-Identifier: MIT */
/*
 * Trace files: the recorder writes what the probe sees (raw events and
 * collector updates) to a file of weft.v1 records (proto/weft.proto) that
 * `weft-trace` reads and `protoc --decode=weft.v1.Trace` decodes.
 *
 * One recorder per process.  It is a probe subscriber: while it records,
 * events flow (see weft/probe.h for the cost).  Records are buffered and
 * written every flush interval from the probe's collector thread; a file
 * cut short by a crash reads up to its last whole record.
 *
 * A full disk never tears a file: a write that fails (ENOSPC, EDQUOT,
 * EFBIG, EIO) cuts the file back to its last whole record and stops the
 * writing, with one line on stderr ("weft: trace: writing PATH: ERROR;
 * recording stopped, N bytes kept ...").  The error is counted
 * (weft_trace_stats(), and the metrics endpoint's
 * weft_trace_write_errors_total) and returned by weft_trace_stop().  When
 * space is back, weft_trace_stop() then weft_trace_continue(path) goes on
 * in the same file from its last whole record (or weft_trace_start() on
 * another path begins a new one); what happened in between is not in
 * the file.  Readers skip a record torn in the middle of a file (by a
 * writer that went on behind it) and report the bytes skipped
 * (weft/trace_reader.h).
 *
 * WEFT_TRACE=path in the environment records from the first
 * weft_runtime_create() on (WEFT_TRACE_MAX_MB sets a size limit with
 * rotation; WEFT_TRACE_FLIGHT_MB and/or WEFT_TRACE_FLIGHT_S the
 * flight-recorder mode instead, keeping the last that many MiB and/or
 * seconds).
 *
 * A file (not a flight recorder's) gets a checkpoint every
 * WEFT_TRACE_CHECKPOINT_MB of it or more (16 by default; 0: none): a
 * small mark record, then an update with every task, so that a reader
 * can start anywhere from the state there (weft/wire.h,
 * weft_wire_ckpt_get(); the console's replay seeks with them).
 */
#ifndef WEFT_TRACE_H
#define WEFT_TRACE_H

#include "weft/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Caller-filled and may grow (weft/common.h): reserved_ must be zero. */
typedef struct weft_trace_opts_s {
	/* Start a new file (path.1, path.2, ...) once this many bytes are
	 * written and the file holds an update (a file passes it by what
	 * one flush wrote, or, waiting for its update, by the collector's
	 * pass, up to 4 times it); 0 for no limit.  Every file starts with
	 * a header, and names the tasks it mentions. */
	uint64_t max_file_bytes;
	/* Keep at most this many files, deleting the oldest; 0 keeps all. */
	unsigned max_files;
	/* How often buffered records reach the file; 0 for 250 ms. */
	unsigned flush_ms;
	/* Flight-recorder mode when nonzero: write nothing, keep the last
	 * this-many bytes of records in memory for weft_trace_snapshot();
	 * the path of weft_trace_start() is then unused and may be NULL
	 * (flight_ms below is the same mode, by time). */
	uint64_t flight_bytes;
	/* Flight-recorder mode too when nonzero: keep the records of the
	 * last this-many ms (whole chunks of 256 KiB, so a little more).
	 * With flight_bytes as well, whichever limit is reached first
	 * applies; alone, memory is still capped at 512 MiB. */
	unsigned flight_ms;
	/* Update records (task and worker state) at most this often; 0
	 * for 100 ms.  Events are written as they are drained. */
	unsigned update_ms;
	uint64_t reserved_[4]; /* zero (weft/common.h) */
} weft_trace_opts_t;

/**
 * weft_trace_start() - start recording.
 * @path: the trace file (truncated), or NULL in flight-recorder mode.
 * @opts: NULL for the defaults; copied.
 *
 * Context: any thread but a probe subscriber's callback (those run under
 * the probe's lock, which this takes: -EDEADLK there); it blocks on open(2),
 * and a task that calls it holds up its worker meanwhile.
 * Return: 0; -EINVAL (no path outside flight mode, or a reserved word of
 * @opts not zero); -EBUSY (already recording); -ENOMEM; -ENOTSUP (built
 * without the probe); a negative errno from open(2); -EAGAIN (the
 * collector thread); -EDEADLK (called from a probe subscriber's callback).
 */
WEFT_EXTERN int weft_trace_start(const char *path,
				 const weft_trace_opts_t *opts);

/**
 * weft_trace_stop() - stop recording: drain the probe, write what is
 * buffered and close the file.
 *
 * A write that failed while recording (a full disk, a quota: -ENOSPC,
 * -EDQUOT, -EFBIG, -EIO) already stopped the writing: the file was cut
 * back to its last whole record, so that it reads to its end, and one
 * line on stderr said so (path, error, bytes kept); the recording's
 * callbacks encoded nothing since, but the probe's events flowed until
 * this call.  Its error is returned here; then weft_trace_continue()
 * writes on in the same file, or weft_trace_start() records anew (into
 * a new file, or this one from its start).
 *
 * Context: any thread but a probe subscriber's callback (those run under
 * the probe's lock, which this takes: -EDEADLK there); it blocks (a probe
 * flush, which waits for a collector pass; the unsubscribe, joining the
 * collector when last; the last writes), so a task that calls it holds up
 * its worker meanwhile.
 * Return: 0; -ENOENT (not recording); a negative errno from write(2) or
 * close(2), the first one met while recording (records were lost);
 * -EDEADLK (called from a probe subscriber's callback).
 */
WEFT_EXTERN int weft_trace_stop(void);

/**
 * weft_trace_continue() - start recording at the end of an existing
 * trace, from its last whole record: after a write failed (the disk was
 * full) and space is back, the same file goes on.
 * @path: a trace this process recorded (its header's pid is ours), cut
 * back to its last whole record (a cut one at its end goes); absent or
 * empty, a new trace as weft_trace_start() would write.
 * @opts: as for weft_trace_start(); no rotation (max_file_bytes 0) and
 * not flight mode.
 *
 * The file is read through once first (on the caller's thread).  Its
 * header stays, and the new records follow: a full update of every task
 * first, so the tasks are named again.  What the probe saw in between is
 * not in the file (a gap in time).
 *
 * Context: as weft_trace_start(); it also reads the whole file first.
 * Return: 0; -EINVAL (no path, rotation or flight mode); -EBUSY; -ENOMEM;
 * -ENOTSUP; -EPROTO (not a weft trace); -ESRCH (another process's
 * trace); a reader's error (weft/trace_reader.h: a record that does not
 * read, not one a resync skips); a negative errno from open(2),
 * ftruncate(2) or lseek(2); -EAGAIN; -EDEADLK (from a probe subscriber's
 * callback).
 */
WEFT_EXTERN int weft_trace_continue(const char *path,
				    const weft_trace_opts_t *opts);

/* The recorder's counts since the process started (weft_trace_stats()).
 * Filled by the library; may grow (weft/common.h). */
typedef struct weft_trace_stats_s {
	uint64_t bytes_written; /* to trace files, headers included */
	uint64_t bytes_lost;    /* records a failed write held (no file has
				 * them; nor what came until the stop) */
	uint64_t write_errors;  /* recordings a failed write stopped */
	int error;              /* the recording's first error (what
				 * weft_trace_stop() will return), or the
				 * last recording's; 0 */
	uint64_t reserved_[4];  /* zero (weft/common.h) */
} weft_trace_stats_t;

/**
 * weft_trace_stats() - the recorder's counts, from any thread, without
 * waiting for a write in progress (each value whole; the set not read at
 * one instant).
 * @out: filled in; zeros in a build without the probe.
 *
 * Context: any thread; a task may call it (never blocks).
 */
WEFT_EXTERN void weft_trace_stats(weft_trace_stats_t *out);

/**
 * weft_trace_snapshot() - write the flight recorder's records to @path:
 * a header, the state of every known task, then the kept records, oldest
 * first.  Recording goes on.
 *
 * Context: any thread but a probe subscriber's callback (those run under
 * the probe's lock, which this takes: -EDEADLK there); it blocks for a probe
 * flush (a collector pass) and the file's writes, so a task that calls it
 * holds up its worker meanwhile.
 * Return: 0; -EINVAL (NULL path); -ENOENT (no flight recorder running);
 * -ENOMEM; a negative errno from open(2) or write(2); -EDEADLK (called
 * from a probe subscriber's callback).
 */
WEFT_EXTERN int weft_trace_snapshot(const char *path);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_TRACE_H */
