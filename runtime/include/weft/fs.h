/* SPDX-License-Identifier: MIT */
/*
 * Whole-file reads and writes, fsync(2) and fdatasync(2) as futures, run
 * on the blocking pool (weft/blocking.h) so the workers never wait for the
 * disk.
 *
 * Each operation is a caller-allocated future: _init copies what it needs
 * (the path, and for a write the data), the first _poll queues the job on
 * the runtime current at that poll, later polls await it, and _fini drops
 * it.  Dropping an operation that is still running does not stop it: the
 * job finishes on its pool thread (a write still writes the whole file)
 * and its memory is freed then.  _fini is required after a successful
 * _init, whatever happened since; it is also safe on a zeroed operation
 * and after a failed _init (each _init zeroes the operation first).
 * Polled again after READY, an operation is READY again with the same
 * status (a read's data was handed over once: NULL and 0 then).
 */
#ifndef WEFT_FS_H
#define WEFT_FS_H

#include "weft/common.h"
#include "weft/future.h"
#include "weft/blocking.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A whole-file read.  All fields private. */
typedef struct weft_fs_read_file_s {
	void *job;          /* the request, until it is queued */
	weft_blocking_t *h; /* the queued job */
	int status;         /* the outcome, once done */
	int done;
} weft_fs_read_file_t;

/**
 * weft_fs_read_file_init() - prepare to read the file at @path.
 * @op: the operation.
 * @path: the file; copied.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: 0; -EINVAL for a NULL or empty path; -ENOMEM.
 */
WEFT_EXTERN int weft_fs_read_file_init(weft_fs_read_file_t *op,
				       const char *path);

/**
 * weft_fs_read_file_poll() - read the whole file.
 * @op: the operation.
 * @cx: the polling context.
 * @status: receives 0 or a negative errno: anything open(2) or read(2)
 *	can fail with (-ENOENT, -EACCES, -EISDIR, ...), -ENOMEM, -EFBIG when
 *	the file does not fit in memory, or what weft_spawn_blocking() can
 *	return (-EINVAL when no runtime is current, -ESHUTDOWN, -EAGAIN).
 * @data: receives a malloc()ed buffer with the contents followed by a NUL
 *	byte that @len does not count; the caller frees it.  NULL on error.
 * @len: receives the number of bytes read; 0 on error.
 *
 * Context: the task (or weft_block_on() future) that owns @op, inside its
 * poll; one poller at a time. A runtime must be current at the first poll
 * (else *@status is -EINVAL).
 * Return: WEFT_READY once the read has finished or failed, and again
 * (with the same status, no data) if polled after that.
 */
WEFT_EXTERN weft_poll_t weft_fs_read_file_poll(weft_fs_read_file_t *op,
					       weft_cx_t *cx, int *status,
					       void **data, size_t *len);

/**
 * weft_fs_read_file_fini() - drop the operation (see the file comment).
 *
 * Safe on a zeroed future and after READY.
 *
 * Context: the owner of @op, from any thread, not during a poll of it; a
 * task may call it (never blocks).
 */
WEFT_EXTERN void weft_fs_read_file_fini(weft_fs_read_file_t *op);

/* A whole-file write.  All fields private. */
typedef struct weft_fs_write_file_s {
	void *job;          /* the request, until it is queued */
	weft_blocking_t *h; /* the queued job */
	int status;         /* the outcome, once done */
	int done;
} weft_fs_write_file_t;

/**
 * weft_fs_write_file_init() - prepare to write @len bytes to @path.
 * @op: the operation.
 * @path: the file, created (mode 0666 less the umask) or truncated;
 *	copied.
 * @data: the contents; copied, so the caller may free it at once.
 * @len: their length; 0 makes an empty file.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: 0; -EINVAL for a NULL or empty path, or NULL @data with a
 * non-zero @len; -ENOMEM.
 */
WEFT_EXTERN int weft_fs_write_file_init(weft_fs_write_file_t *op,
					const char *path, const void *data,
					size_t len);

/**
 * weft_fs_write_file_poll() - write the file.
 * @op: the operation.
 * @cx: the polling context.
 * @status: receives 0 once every byte was written and the file closed,
 *	or a negative errno: what open(2), write(2) or close(2) can fail
 *	with (-ENOENT for a missing directory, -EACCES, -ENOSPC, ...), or
 *	what weft_spawn_blocking() can return.
 *
 * Context: the task (or weft_block_on() future) that owns @op, inside its
 * poll; one poller at a time.
 * Return: WEFT_READY once the write has finished or failed, and again
 * (with the same status) if polled after that.
 */
WEFT_EXTERN weft_poll_t weft_fs_write_file_poll(weft_fs_write_file_t *op,
						weft_cx_t *cx, int *status);

/**
 * weft_fs_write_file_fini() - drop the operation (see the file comment).
 *
 * Safe on a zeroed future and after READY.
 *
 * Context: the owner of @op, from any thread, not during a poll of it; a
 * task may call it (never blocks).
 */
WEFT_EXTERN void weft_fs_write_file_fini(weft_fs_write_file_t *op);

/* An fsync(2) or fdatasync(2) of an open fd.  All fields private. */
typedef struct weft_fs_sync_s {
	void *job;          /* the request, until it is queued */
	weft_blocking_t *h; /* the queued job */
	int status;         /* the outcome, once done */
	int done;
} weft_fs_sync_t;

/**
 * weft_fs_fsync_init() - prepare to fsync(2) @fd: its data and metadata
 * reach the disk.
 * @op: the operation.
 * @fd: an open fd; the operation syncs a duplicate of it, so the caller
 *	may close @fd whenever it likes (a sync still running after a drop
 *	never touches a reused fd number).
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: 0; -EBADF; -EMFILE (no fd left for the duplicate); -ENOMEM.
 */
WEFT_EXTERN int weft_fs_fsync_init(weft_fs_sync_t *op, int fd);

/**
 * weft_fs_fdatasync_init() - the same with fdatasync(2): the data, and
 * only the metadata needed to read it back.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: as weft_fs_fsync_init().
 */
WEFT_EXTERN int weft_fs_fdatasync_init(weft_fs_sync_t *op, int fd);

/**
 * weft_fs_sync_poll() - await the sync.
 * @op: the operation.
 * @cx: the polling context.
 * @status: receives 0, or what fsync(2) or fdatasync(2) can fail with
 *	(-EIO, -ENOSPC, -EINVAL for an fd that cannot be synced, ...), or
 *	what weft_spawn_blocking() can return.
 *
 * Context: the task (or weft_block_on() future) that owns @op, inside its
 * poll; one poller at a time.
 * Return: WEFT_READY once the sync has finished or failed, and again (the
 * same status) if polled after that.
 */
WEFT_EXTERN weft_poll_t weft_fs_sync_poll(weft_fs_sync_t *op, weft_cx_t *cx,
					  int *status);

/**
 * weft_fs_sync_fini() - drop the operation (see the file comment).
 *
 * Safe on a zeroed future and after READY.
 *
 * Context: the owner of @op, from any thread, not during a poll of it; a
 * task may call it (never blocks).
 */
WEFT_EXTERN void weft_fs_sync_fini(weft_fs_sync_t *op);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_FS_H */
