/* SPDX-License-Identifier: MIT */
/*
 * Whole-file reads and writes as futures, run on the blocking pool
 * (weft/blocking.h) so the workers never wait for the disk.
 *
 * Each operation is a caller-allocated future: _init copies what it needs
 * (the path, and for a write the data), the first _poll queues the job on
 * the runtime current at that poll, later polls await it, and _fini drops
 * it.  Dropping an operation that is still running does not stop it: the
 * job finishes on its pool thread (a write still writes the whole file)
 * and its memory is freed then.  _fini is required after a successful
 * _init, whatever happened since.
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
} weft_fs_read_file_t;

/**
 * weft_fs_read_file_init() - prepare to read the file at @path.
 * @op: the operation.
 * @path: the file; copied.
 *
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
 * Return: WEFT_READY once the read has finished or failed; polling again
 * afterwards is a programming error.
 */
WEFT_EXTERN weft_poll_t weft_fs_read_file_poll(weft_fs_read_file_t *op,
					       weft_cx_t *cx, int *status,
					       void **data, size_t *len);

/** weft_fs_read_file_fini() - drop the operation (see the file comment). */
WEFT_EXTERN void weft_fs_read_file_fini(weft_fs_read_file_t *op);

/* A whole-file write.  All fields private. */
typedef struct weft_fs_write_file_s {
	void *job;          /* the request, until it is queued */
	weft_blocking_t *h; /* the queued job */
} weft_fs_write_file_t;

/**
 * weft_fs_write_file_init() - prepare to write @len bytes to @path.
 * @op: the operation.
 * @path: the file, created (mode 0666 less the umask) or truncated;
 *	copied.
 * @data: the contents; copied, so the caller may free it at once.
 * @len: their length; 0 makes an empty file.
 *
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
 * Return: WEFT_READY once the write has finished or failed; polling again
 * afterwards is a programming error.
 */
WEFT_EXTERN weft_poll_t weft_fs_write_file_poll(weft_fs_write_file_t *op,
						weft_cx_t *cx, int *status);

/** weft_fs_write_file_fini() - drop the operation (see the file comment). */
WEFT_EXTERN void weft_fs_write_file_fini(weft_fs_write_file_t *op);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_FS_H */
