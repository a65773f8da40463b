/* SPDX-License-Identifier: MIT */
/*
 * Whole-file reads and writes, fsync and fdatasync, on the blocking pool.
 *
 * An operation owns one request (struct fs_req: the path, the data, the
 * outcome) until its first poll queues it; from then on the request is the
 * blocking job's argument and result, so the pool's discard callback frees
 * it if the operation is dropped before it took the result.  The job's
 * function runs on a pool thread and touches nothing but the request.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "weft/fs.h"

#include "runtime_internal.h"

/* The first read size when the file's size is unknown (pipes, /proc). */
#define READ_CHUNK 4096u

struct fs_req {
	int err;    /* the outcome, 0 or -errno */
	void *data; /* read: the contents; write: the copy to write */
	size_t len;
	int fd;        /* sync: the job's own dup of the caller's fd, or -1 */
	bool datasync; /* sync: fdatasync(2), not fsync(2) */
	char path[];   /* NUL-terminated */
};

static struct fs_req *req_new(const char *path)
{
	size_t n;
	struct fs_req *r;

	if (!path)
		return NULL;
	n = strlen(path) + 1;
	r = malloc(sizeof(*r) + n);
	if (!r)
		return NULL;
	r->err = 0;
	r->data = NULL;
	r->len = 0;
	r->fd = -1;
	r->datasync = false;
	memcpy(r->path, path, n);
	return r;
}

static void req_free(struct fs_req *r)
{
	if (r) {
		if (r->fd >= 0)
			close(r->fd);
		free(r->data);
		free(r);
	}
}

/* The pool's discard callback: the operation was dropped first. */
static void req_discard(void *result)
{
	req_free(result);
}

/* Queues @r on the current runtime.  Return: 0 or -errno. */
static int req_spawn(struct fs_req *r, weft_blocking_cb fn, weft_blocking_t **h,
		     const char *name)
{
	weft_blocking_spec_t spec = {
		.fn = fn,
		.arg = r,
		.discard = req_discard,
		.name = name,
	};

	return weft_spawn_blocking_with(NULL, &spec, h);
}

/*
 * Polls an operation's job.  READY hands over the request (or NULL with
 * *err set when it could not be queued); the operation holds neither the
 * request nor the handle any more.
 */
static weft_poll_t op_poll(void **job, weft_blocking_t **h, weft_cx_t *cx,
			   weft_blocking_cb fn, const char *name,
			   struct fs_req **out, int *err)
{
	void *result;

	if (!*h) {
		if (!*job)
			weft_panic("fs: operation polled before init");
		*err = req_spawn(*job, fn, h, name);
		if (*err) {
			req_free(*job);
			*job = NULL;
			*out = NULL;
			return WEFT_READY;
		}
		/* The job owns the request now. */
		*job = NULL;
	}
	if (weft_blocking_poll(*h, cx, &result) == WEFT_PENDING)
		return WEFT_PENDING;
	weft_blocking_drop(*h);
	*h = NULL;
	*out = result;
	*err = 0;
	return WEFT_READY;
}

/*
 * The poll of an operation whose outcome is its status alone (a write, a
 * sync): READY with the request's status, kept for a poll after READY.
 */
static weft_poll_t status_op_poll(void **job, weft_blocking_t **h, int *kept,
				  int *done, weft_cx_t *cx, weft_blocking_cb fn,
				  const char *name, int *status)
{
	struct fs_req *r;
	int err;

	if (*done) {
		if (status)
			*status = *kept;
		return WEFT_READY;
	}
	if (op_poll(job, h, cx, fn, name, &r, &err) == WEFT_PENDING)
		return WEFT_PENDING;
	if (r) {
		err = r->err;
		req_free(r);
	}
	*done = 1;
	*kept = err;
	if (status)
		*status = err;
	return WEFT_READY;
}

static void op_fini(void **job, weft_blocking_t **h)
{
	req_free(*job);
	*job = NULL;
	/* A job still running finishes; req_discard() frees the request. */
	weft_blocking_drop(*h);
	*h = NULL;
}

/* ------------------------------------------------------------------ read */

/* Reads all of @fd into r->data (NUL-terminated); sets r->err. */
static void read_all(struct fs_req *r, int fd)
{
	struct stat st;
	size_t cap = READ_CHUNK, len = 0;
	char *buf, *bigger;

	/* Room for the whole file plus the NUL, and one byte to see EOF. */
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
		if ((uint64_t)st.st_size > SIZE_MAX - 2) {
			r->err = -EFBIG;
			return;
		}
		cap = (size_t)st.st_size + 2;
	}
	buf = malloc(cap);
	if (!buf) {
		r->err = -ENOMEM;
		return;
	}
	for (;;) {
		ssize_t n;

		if (cap - len < 2) {
			if (cap > SIZE_MAX / 2) {
				r->err = -EFBIG;
				goto out_free_buf;
			}
			bigger = realloc(buf, cap * 2);
			if (!bigger) {
				r->err = -ENOMEM;
				goto out_free_buf;
			}
			buf = bigger;
			cap *= 2;
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			r->err = -errno;
			goto out_free_buf;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	r->data = buf;
	r->len = len;
	return;

out_free_buf:
	free(buf);
}

static void *read_job(void *arg)
{
	struct fs_req *r = arg;
	int fd;

	do {
		fd = open(r->path, O_RDONLY | O_CLOEXEC);
	} while (fd < 0 && errno == EINTR);
	if (fd < 0) {
		r->err = -errno;
		return r;
	}
	read_all(r, fd);
	close(fd);
	return r;
}

int weft_fs_read_file_init(weft_fs_read_file_t *op, const char *path)
{
	memset(op, 0, sizeof(*op));
	if (!path || !*path)
		return -EINVAL;
	op->job = req_new(path);
	return op->job ? 0 : -ENOMEM;
}

weft_poll_t weft_fs_read_file_poll(weft_fs_read_file_t *op, weft_cx_t *cx,
				   int *status, void **data, size_t *len)
{
	struct fs_req *r;
	int err;

	if (op->done) {
		/* Again after READY: the outcome again; the data went once. */
		if (status)
			*status = op->status;
		if (data)
			*data = NULL;
		if (len)
			*len = 0;
		return WEFT_READY;
	}
	if (op_poll(&op->job, &op->h, cx, read_job, "fs_read_file", &r, &err) ==
	    WEFT_PENDING)
		return WEFT_PENDING;
	if (r) {
		err = r->err;
		if (!err) {
			if (data)
				*data = r->data;
			else
				free(r->data);
			if (len)
				*len = r->len;
			r->data = NULL;
		}
		req_free(r);
	}
	if (err) {
		if (data)
			*data = NULL;
		if (len)
			*len = 0;
	}
	op->done = 1;
	op->status = err;
	if (status)
		*status = err;
	return WEFT_READY;
}

void weft_fs_read_file_fini(weft_fs_read_file_t *op)
{
	op_fini(&op->job, &op->h);
}

/* ----------------------------------------------------------------- write */

static int write_all(int fd, const char *p, size_t len)
{
	while (len) {
		size_t chunk = len > SSIZE_MAX ? SSIZE_MAX : len;
		ssize_t n = write(fd, p, chunk);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void *write_job(void *arg)
{
	struct fs_req *r = arg;
	int fd, err;

	do {
		fd = open(r->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
			  0666);
	} while (fd < 0 && errno == EINTR);
	if (fd < 0) {
		r->err = -errno;
		return r;
	}
	err = write_all(fd, r->data, r->len);
	/* close() reports late write-back errors (NFS): keep the first. */
	if (close(fd) && !err && errno != EINTR)
		err = -errno;
	r->err = err;
	return r;
}

int weft_fs_write_file_init(weft_fs_write_file_t *op, const char *path,
			    const void *data, size_t len)
{
	struct fs_req *r;

	/* Zeroed first, as every _init here: _fini is safe after a
	 * failure too. */
	memset(op, 0, sizeof(*op));
	if (!path || !*path || (!data && len))
		return -EINVAL;
	r = req_new(path);
	if (!r)
		return -ENOMEM;
	if (len) {
		r->data = malloc(len);
		if (!r->data) {
			req_free(r);
			return -ENOMEM;
		}
		memcpy(r->data, data, len);
		r->len = len;
	}
	op->job = r;
	return 0;
}

weft_poll_t weft_fs_write_file_poll(weft_fs_write_file_t *op, weft_cx_t *cx,
				    int *status)
{
	return status_op_poll(&op->job, &op->h, &op->status, &op->done, cx,
			      write_job, "fs_write_file", status);
}

void weft_fs_write_file_fini(weft_fs_write_file_t *op)
{
	op_fini(&op->job, &op->h);
}

/* ------------------------------------------------------------------ sync */

static void *sync_job(void *arg)
{
	struct fs_req *r = arg;
	int ret;

	do {
		ret = r->datasync ? fdatasync(r->fd) : fsync(r->fd);
	} while (ret && errno == EINTR);
	r->err = ret ? -errno : 0;
	close(r->fd);
	r->fd = -1;
	return r;
}

/*
 * The job syncs a dup of @fd: the caller may close its own as soon as
 * the operation is READY or dropped, and a job still running after a
 * drop never touches an fd number that was closed and reused.
 */
static int sync_init(weft_fs_sync_t *op, int fd, bool datasync)
{
	struct fs_req *r;

	memset(op, 0, sizeof(*op));
	if (fd < 0)
		return -EBADF;
	r = req_new("");
	if (!r)
		return -ENOMEM;
	r->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (r->fd < 0) {
		int err = -errno;

		req_free(r);
		return err;
	}
	r->datasync = datasync;
	op->job = r;
	return 0;
}

int weft_fs_fsync_init(weft_fs_sync_t *op, int fd)
{
	return sync_init(op, fd, false);
}

int weft_fs_fdatasync_init(weft_fs_sync_t *op, int fd)
{
	return sync_init(op, fd, true);
}

weft_poll_t weft_fs_sync_poll(weft_fs_sync_t *op, weft_cx_t *cx, int *status)
{
	return status_op_poll(&op->job, &op->h, &op->status, &op->done, cx,
			      sync_job, "fs_sync", status);
}

void weft_fs_sync_fini(weft_fs_sync_t *op)
{
	op_fini(&op->job, &op->h);
}
