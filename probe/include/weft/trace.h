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
 * WEFT_TRACE=path in the environment records from the first
 * weft_runtime_create() on (WEFT_TRACE_MAX_MB sets a size limit with
 * rotation; WEFT_TRACE_FLIGHT_MB and/or WEFT_TRACE_FLIGHT_S the
 * flight-recorder mode instead, keeping the last that many MiB and/or
 * seconds).
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
	 * written (a file passes it by what one flush wrote); 0 for no
	 * limit.  Every file starts with a header, and names the tasks it
	 * mentions. */
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
 * Return: 0; -EINVAL (no path outside flight mode, or a reserved word of
 * @opts not zero); -EBUSY (already recording); -ENOMEM; -ENOTSUP (built
 * without the probe); a negative errno from open(2); -EAGAIN (the
 * collector thread).
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
 * line on stderr said so (path, error, bytes kept).  Its error is
 * returned here; weft_trace_start() then records anew, into a new file
 * or this one from its start.
 *
 * Return: 0; -ENOENT (not recording); a negative errno from write(2) or
 * close(2), the first one met while recording (records were lost).
 */
WEFT_EXTERN int weft_trace_stop(void);

/**
 * weft_trace_snapshot() - write the flight recorder's records to @path:
 * a header, the state of every known task, then the kept records, oldest
 * first.  Recording goes on.
 *
 * Return: 0; -EINVAL (NULL path); -ENOENT (no flight recorder running);
 * -ENOMEM; a negative errno from open(2) or write(2).
 */
WEFT_EXTERN int weft_trace_snapshot(const char *path);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_TRACE_H */
