/* SPDX-License-Identifier: MIT */
/*
 * The I/O readiness backend: a small static interface that one file per OS
 * mechanism implements (io_epoll.c today; a kqueue or io_uring backend is
 * one more file chosen at build time).  Registration is edge-triggered:
 * the backend reports a change to ready once, and the driver keeps the
 * readiness until an operation hits EAGAIN.
 */
#ifndef WEFT_IO_BACKEND_H
#define WEFT_IO_BACKEND_H

#include <stdint.h>

/* Readiness bits, as the driver keeps them. */
#define IO_READABLE 0x01u
#define IO_WRITABLE 0x02u
#define IO_READ_CLOSED 0x04u
#define IO_WRITE_CLOSED 0x08u
#define IO_ERROR 0x10u
#define IO_READINESS_MASK 0x1fu

typedef struct io_backend_s io_backend_t;

typedef struct io_event_s {
	void *data;
	uint32_t ready; /* IO_* bits */
} io_event_t;

/* io_epoll.c */
int weft__io_backend_create(io_backend_t **out);
/* Registers @fd for read and write readiness, edge-triggered. */
int weft__io_backend_add(io_backend_t *b, int fd, void *data);
int weft__io_backend_del(io_backend_t *b, int fd);
/*
 * Waits up to @timeout_ns (-1: forever, 0: do not block) and fills @ev.
 * Return: the number of events, 0 on timeout or EINTR, or -errno.
 */
int weft__io_backend_poll(io_backend_t *b, io_event_t *ev, int max,
			  int64_t timeout_ns);
void weft__io_backend_free(io_backend_t *b);

#endif /* WEFT_IO_BACKEND_H */
