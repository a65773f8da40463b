/* SPDX-License-Identifier: MIT */
/*
 * Networking: TCP listeners and streams, UDP sockets and Unix stream
 * sockets over the runtime's I/O driver (edge-triggered readiness).
 *
 * Every socket is non-blocking and close-on-exec.  Binding, listening and
 * the other calls that cannot block are plain functions; accepting,
 * connecting, reading and writing are futures: they return WEFT_READY with
 * a result, or WEFT_PENDING after registering the task's waker with the
 * driver.  Results are byte counts or negative errno values through an
 * out-parameter.  Reads, writes, accepts, sends and receives use the task's
 * cooperative budget, so a task that always finds data still yields now
 * and then.
 *
 * Runtime: an object binds to the runtime current when it is created (the
 * worker's, or the one given to weft_block_on()); with none current,
 * creation fails with -EINVAL.  Streams returned by an accept belong to the
 * listener's runtime.  Objects may then be used from any task or block_on
 * call, of any runtime.  When weft_runtime_destroy() runs while an object
 * is still open, its fd is closed; later operations on it return
 * -ESHUTDOWN and closing it afterwards is safe (and required, to free it).
 * Usually the tasks owning sockets are cancelled at shutdown and their drop
 * callbacks close them first.  No other thread may use the runtime's
 * objects while weft_runtime_destroy() runs.
 *
 * Threads: at most one task may read (or accept, or receive) and at most
 * one task may write (or send) on an object at a time; a reader task and a
 * writer task may use a stream concurrently.  Closing an object while
 * another task awaits on it is not allowed.  The synchronous calls may be
 * made from any thread that does not race with close.
 *
 * Addresses are numeric strings: "127.0.0.1:8080", "[::1]:0" (no name
 * lookup), or struct sockaddr values.  Port 0 binds an ephemeral port;
 * weft_*_local_port() tells which.  Unix socket paths starting with '@' are
 * in the abstract namespace.
 */
#ifndef WEFT_NET_H
#define WEFT_NET_H

#include <sys/socket.h>
#include <sys/types.h>

#include "weft/common.h"
#include "weft/future.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weft_listener_s weft_listener_t;
typedef struct weft_stream_s weft_stream_t;
typedef struct weft_udp_s weft_udp_t;

/* listen(2)'s backlog when the caller passes 0 (Tokio's default). */
#define WEFT_NET_DEFAULT_BACKLOG 1024

/**
 * weft_addr_parse() - parse a numeric "host:port" address.
 * @str: "a.b.c.d:port" or "[ipv6]:port"; port 0..65535.
 * @out: receives the address.
 * @len: receives its length.
 *
 * Context: any thread, no runtime needed; a task may call it (never
 * blocks).
 * Return: 0; -EINVAL when @str is not such an address.
 */
WEFT_EXTERN int weft_addr_parse(const char *str, struct sockaddr_storage *out,
				socklen_t *len);

/* ------------------------------------------------------------ listener */

/**
 * weft_tcp_listen() - bind a TCP listener and listen.
 * @addr: local address ("127.0.0.1:0", "[::1]:8080").
 * @backlog: listen(2) backlog; 0 for WEFT_NET_DEFAULT_BACKLOG.
 * @out: receives the listener.
 *
 * SO_REUSEADDR is set, so a port in TIME_WAIT can be bound again.
 *
 * Context: a thread with a runtime current (a task, a weft_block_on()
 * caller, a blocking job); a task may call it (never blocks).
 * Return: 0; -EINVAL (bad address, or no runtime current); -EADDRINUSE;
 * -EACCES; -ENOMEM; -EMFILE; other errors of socket(2), bind(2), listen(2).
 */
WEFT_EXTERN int weft_tcp_listen(const char *addr, int backlog,
				weft_listener_t **out);

/**
 * weft_tcp_listen_addr() - weft_tcp_listen() with a struct sockaddr.
 *
 * Context: a thread with a runtime current (a task, a weft_block_on()
 * caller, a blocking job); a task may call it (never blocks).
 * Return: as weft_tcp_listen(); -EINVAL also for a NULL @addr or a family
 * other than AF_INET and AF_INET6.
 */
WEFT_EXTERN int weft_tcp_listen_addr(const struct sockaddr *addr, socklen_t len,
				     int backlog, weft_listener_t **out);

/**
 * weft_unix_listen() - bind a Unix stream listener on @path and listen.
 * @path: the socket's path ('@' first: abstract namespace).  An existing
 * file is not removed (-EADDRINUSE), nor is the file at close.
 * @backlog: listen(2) backlog; 0 for WEFT_NET_DEFAULT_BACKLOG.
 * @out: receives the listener.
 *
 * Context: a thread with a runtime current (a task, a weft_block_on()
 * caller, a blocking job); a task may call it (never blocks).
 * Return: 0; -EINVAL (no runtime current, or a NULL or empty @path);
 * -ENAMETOOLONG; -EADDRINUSE; -ENOMEM; other errors of socket(2), bind(2),
 * listen(2).
 */
WEFT_EXTERN int weft_unix_listen(const char *path, int backlog,
				 weft_listener_t **out);

/**
 * weft_listener_accept() - accept one connection (a future).
 * @l: the listener.
 * @cx: the polling context.
 * @out: receives the new stream (NULL on error).
 * @status: receives 0, or a negative errno: -ESHUTDOWN after the
 * listener's runtime was destroyed; -EMFILE, -ENFILE, -ENOBUFS, -ENOMEM
 * (resources: retrying later may succeed); other errors of accept4(2).
 * Connections reset before they were accepted are skipped.
 *
 * Context: one task (or weft_block_on() future) at a time, inside its poll.
 * Return: WEFT_READY with *status set, or WEFT_PENDING.
 */
WEFT_EXTERN weft_poll_t weft_listener_accept(weft_listener_t *l, weft_cx_t *cx,
					     weft_stream_t **out, int *status);

/**
 * weft_listener_local_port() - the port a TCP listener is bound to.
 * @port: receives it.
 *
 * Context: any thread that does not race with close; a task may call it
 * (never blocks).
 * Return: 0; -ESHUTDOWN; -EAFNOSUPPORT for a Unix listener.
 */
WEFT_EXTERN int weft_listener_local_port(const weft_listener_t *l,
					 uint16_t *port);

/**
 * weft_listener_local_addr() - the address the listener is bound to.
 * @addr: receives it.
 * @len: receives its length.
 *
 * Context: any thread that does not race with close; a task may call it
 * (never blocks).
 * Return: 0; -ESHUTDOWN; errors of getsockname(2).
 */
WEFT_EXTERN int weft_listener_local_addr(const weft_listener_t *l,
					 struct sockaddr_storage *addr,
					 socklen_t *len);

/**
 * weft_listener_close() - close and free the listener.
 * @l: the listener; NULL is ignored.  No task may be awaiting on it.
 *
 * Context: any thread, while no task awaits on it; a task may call it
 * (never blocks).
 */
WEFT_EXTERN void weft_listener_close(weft_listener_t *l);

/* -------------------------------------------------------------- connect */

/*
 * A connect future, caller-allocated (in a task's state, typically).  It
 * must not move between weft_*_connect_init() and weft_connect_fini().
 *
 *	err = weft_tcp_connect_init(&st->conn, "127.0.0.1:8080");
 *	...
 *	WEFT_AWAIT(st, weft_connect_poll(&st->conn, cx, &st->stream, &st->err));
 *	weft_connect_fini(&st->conn);
 */
typedef struct weft_connect_s {
	weft_stream_t *stream; /* private: until handed out by the poll */
	int status;            /* private: a connect(2) error seen at init */
	bool connected;        /* private: connect(2) completed at init */
} weft_connect_t;

/**
 * weft_tcp_connect_init() - start connecting to @addr.
 * @c: the future.
 * @addr: the peer ("127.0.0.1:8080", "[::1]:443").
 *
 * Errors of the connection itself (-ECONNREFUSED, ...) are reported by
 * weft_connect_poll(), even when connect(2) reports them at once.
 *
 * Context: a thread with a runtime current (a task, a weft_block_on()
 * caller, a blocking job); a task may call it (never blocks). connect(2) is
 * started non-blocking.
 * Return: 0; -EINVAL (bad address, or no runtime current); -ENOMEM;
 * -EMFILE; -ENFILE.  On error @c needs no fini (calling it is harmless).
 */
WEFT_EXTERN int weft_tcp_connect_init(weft_connect_t *c, const char *addr);

/**
 * weft_tcp_connect_init_addr() - weft_tcp_connect_init() with a sockaddr.
 *
 * Context: a thread with a runtime current (a task, a weft_block_on()
 * caller, a blocking job); a task may call it (never blocks).
 * Return: as weft_tcp_connect_init(); -EINVAL also for a NULL @addr or a
 * family other than AF_INET and AF_INET6.
 */
WEFT_EXTERN int weft_tcp_connect_init_addr(weft_connect_t *c,
					   const struct sockaddr *addr,
					   socklen_t len);

/**
 * weft_unix_connect_init() - start connecting to the Unix socket at @path.
 *
 * Context: a thread with a runtime current (a task, a weft_block_on()
 * caller, a blocking job); a task may call it (never blocks).
 * Return: as weft_tcp_connect_init(), plus -ENAMETOOLONG.  A listener whose
 * backlog is full makes the poll report -EAGAIN.
 */
WEFT_EXTERN int weft_unix_connect_init(weft_connect_t *c, const char *path);

/**
 * weft_connect_poll() - await the connection.
 * @c: the future.
 * @cx: the polling context.
 * @out: receives the connected stream, now the caller's (NULL on error).
 * @status: receives 0; -ECONNREFUSED; -ETIMEDOUT; -ENETUNREACH;
 * -EHOSTUNREACH; -ESHUTDOWN (the runtime was destroyed); -EALREADY when
 * polled again after READY; other errors of connect(2).
 *
 * Context: the task (or weft_block_on() future) that owns @c, inside its
 * poll; one poller at a time.
 * Return: WEFT_READY with *status set, or WEFT_PENDING.
 */
WEFT_EXTERN weft_poll_t weft_connect_poll(weft_connect_t *c, weft_cx_t *cx,
					  weft_stream_t **out, int *status);

/**
 * weft_connect_fini() - drop the future; closes the socket unless a poll
 * handed it out.
 *
 * Safe on a zeroed future and after READY (and after a failed init).
 *
 * Context: the owner of @c, from any thread, not during a poll of it; a
 * task may call it (never blocks).
 */
WEFT_EXTERN void weft_connect_fini(weft_connect_t *c);

/* --------------------------------------------------------------- stream */

/**
 * weft_stream_read() - read up to @len bytes (a future).
 * @s: the stream.
 * @cx: the polling context.
 * @buf: where to put them.
 * @len: the room at @buf; 0 completes at once with 0.
 * @n: receives the byte count (> 0), 0 at end of stream, or a negative
 * errno: -ECONNRESET; -ETIMEDOUT; -ESHUTDOWN (runtime destroyed); other
 * errors of recv(2).
 *
 * Context: one reading task (or weft_block_on() future) at a time, inside
 * its poll; a writer may use @s meanwhile.
 * Return: WEFT_READY with *n set, or WEFT_PENDING.
 */
WEFT_EXTERN weft_poll_t weft_stream_read(weft_stream_t *s, weft_cx_t *cx,
					 void *buf, size_t len, ssize_t *n);

/**
 * weft_stream_write() - write up to @len bytes (a future).
 * @s: the stream.
 * @cx: the polling context.
 * @buf: the bytes.
 * @len: how many; 0 completes at once with 0.
 * @n: receives the byte count (> 0 when @len > 0), or a negative errno:
 * -EPIPE (the stream was shut down for writing, or the peer closed it; no
 * SIGPIPE is raised); -ECONNRESET; -ESHUTDOWN; other errors of send(2).
 *
 * Context: one writing task (or weft_block_on() future) at a time, inside
 * its poll; a reader may use @s meanwhile.
 * Return: WEFT_READY with *n set, or WEFT_PENDING.
 */
WEFT_EXTERN weft_poll_t weft_stream_write(weft_stream_t *s, weft_cx_t *cx,
					  const void *buf, size_t len,
					  ssize_t *n);

/**
 * weft_stream_write_all() - write all @len bytes (a future).
 * @s: the stream.
 * @cx: the polling context.
 * @buf: the bytes; must stay put until READY.
 * @len: how many.
 * @done: progress, zero before the first poll; bytes written so far (also
 * after an error).
 * @status: receives 0 once every byte is written, or an error of
 * weft_stream_write().
 *
 * Context: as weft_stream_write().
 * Return: WEFT_READY with *status set, or WEFT_PENDING.
 */
WEFT_EXTERN weft_poll_t weft_stream_write_all(weft_stream_t *s, weft_cx_t *cx,
					      const void *buf, size_t len,
					      size_t *done, int *status);

/**
 * weft_stream_shutdown() - shut down one or both halves of the connection.
 * @how: SHUT_RD, SHUT_WR (the peer reads end of stream once it has read
 * what was written before) or SHUT_RDWR.
 *
 * Context: any thread that does not race with close; a task may call it
 * (never blocks).
 * Return: 0; -EINVAL for a bad @how; -ENOTCONN; -ESHUTDOWN.
 */
WEFT_EXTERN int weft_stream_shutdown(weft_stream_t *s, int how);

/**
 * weft_stream_set_nodelay() - set TCP_NODELAY (disable Nagle).
 *
 * Context: any thread that does not race with close; a task may call it
 * (never blocks).
 * Return: 0; -EOPNOTSUPP on a Unix stream; -ESHUTDOWN.
 */
WEFT_EXTERN int weft_stream_set_nodelay(weft_stream_t *s, bool on);

/**
 * weft_stream_local_addr() - the stream's local address.
 *
 * Context: any thread that does not race with close; a task may call it
 * (never blocks).
 * Return: 0; -ESHUTDOWN; errors of getsockname(2).
 */
WEFT_EXTERN int weft_stream_local_addr(const weft_stream_t *s,
				       struct sockaddr_storage *addr,
				       socklen_t *len);

/**
 * weft_stream_peer_addr() - the stream's peer address.
 *
 * Context: any thread that does not race with close; a task may call it
 * (never blocks).
 * Return: 0; -ESHUTDOWN; -ENOTCONN; errors of getpeername(2).
 */
WEFT_EXTERN int weft_stream_peer_addr(const weft_stream_t *s,
				      struct sockaddr_storage *addr,
				      socklen_t *len);

/**
 * weft_stream_fd() - the stream's fd, for setsockopt(2) and the like.
 *
 * Do not read, write or close it; it stays the stream's.
 *
 * Context: any thread that does not race with close; a task may call it
 * (never blocks).
 * Return: the fd; -ESHUTDOWN once the runtime closed it.
 */
WEFT_EXTERN int weft_stream_fd(const weft_stream_t *s);

/**
 * weft_stream_close() - close and free the stream.
 * @s: the stream; NULL is ignored.  No task may be awaiting on it.
 *
 * Context: any thread, while no task awaits on it; a task may call it
 * (never blocks).
 */
WEFT_EXTERN void weft_stream_close(weft_stream_t *s);

/* ------------------------------------------------------------------ UDP */

/**
 * weft_udp_bind() - a UDP socket bound to @addr ("127.0.0.1:0").
 * @out: receives the socket.
 *
 * Context: a thread with a runtime current (a task, a weft_block_on()
 * caller, a blocking job); a task may call it (never blocks).
 * Return: 0; -EINVAL (bad address, or no runtime current); -EADDRINUSE;
 * -ENOMEM; other errors of socket(2) and bind(2).
 */
WEFT_EXTERN int weft_udp_bind(const char *addr, weft_udp_t **out);

/**
 * weft_udp_bind_addr() - weft_udp_bind() with a struct sockaddr.
 *
 * Context: a thread with a runtime current (a task, a weft_block_on()
 * caller, a blocking job); a task may call it (never blocks).
 * Return: as weft_udp_bind(); -EINVAL also for a NULL @addr or a family
 * other than AF_INET and AF_INET6.
 */
WEFT_EXTERN int weft_udp_bind_addr(const struct sockaddr *addr, socklen_t len,
				   weft_udp_t **out);

/**
 * weft_udp_connect() - set the default peer (for send and recv) to @addr.
 *
 * Datagrams from other addresses are then dropped by the kernel.
 *
 * Context: any thread that does not race with close; a task may call it
 * (never blocks).
 * Return: 0; -EINVAL (bad address); -ESHUTDOWN; errors of connect(2).
 */
WEFT_EXTERN int weft_udp_connect(weft_udp_t *u, const char *addr);

/**
 * weft_udp_send() - send one datagram to the connected peer (a future).
 * @n: receives the bytes sent, or a negative errno: -EDESTADDRREQ (not
 * connected); -ECONNREFUSED (an earlier datagram was refused); -EMSGSIZE;
 * -ESHUTDOWN; other errors of send(2).
 *
 * Context: one sending task (or weft_block_on() future) at a time, inside
 * its poll.
 * Return: WEFT_READY with *n set, or WEFT_PENDING.
 */
WEFT_EXTERN weft_poll_t weft_udp_send(weft_udp_t *u, weft_cx_t *cx,
				      const void *buf, size_t len, ssize_t *n);

/**
 * weft_udp_recv() - receive one datagram (a future).
 * @n: receives its length (the excess of a datagram longer than @len is
 * discarded), or a negative errno: -ECONNREFUSED; -ESHUTDOWN; other errors
 * of recv(2).
 *
 * Context: one receiving task (or weft_block_on() future) at a time, inside
 * its poll.
 * Return: WEFT_READY with *n set, or WEFT_PENDING.
 */
WEFT_EXTERN weft_poll_t weft_udp_recv(weft_udp_t *u, weft_cx_t *cx, void *buf,
				      size_t len, ssize_t *n);

/**
 * weft_udp_send_to() - send one datagram to @to (a future).
 * @n: as weft_udp_send(), plus -EISCONN on a connected socket.
 *
 * Context: as weft_udp_send().
 * Return: WEFT_READY with *n set, or WEFT_PENDING.
 */
WEFT_EXTERN weft_poll_t weft_udp_send_to(weft_udp_t *u, weft_cx_t *cx,
					 const void *buf, size_t len,
					 const struct sockaddr *to,
					 socklen_t tolen, ssize_t *n);

/**
 * weft_udp_recv_from() - receive one datagram and its sender (a future).
 * @from: receives the sender's address (may be NULL).
 * @fromlen: receives its length (may be NULL).
 * @n: as weft_udp_recv().
 *
 * Context: as weft_udp_recv().
 * Return: WEFT_READY with *n set, or WEFT_PENDING.
 */
WEFT_EXTERN weft_poll_t weft_udp_recv_from(weft_udp_t *u, weft_cx_t *cx,
					   void *buf, size_t len,
					   struct sockaddr_storage *from,
					   socklen_t *fromlen, ssize_t *n);

/**
 * weft_udp_local_port() - the port the socket is bound to.
 *
 * Context: any thread that does not race with close; a task may call it
 * (never blocks).
 * Return: 0; -ESHUTDOWN; errors of getsockname(2).
 */
WEFT_EXTERN int weft_udp_local_port(const weft_udp_t *u, uint16_t *port);

/**
 * weft_udp_close() - close and free the socket.
 * @u: the socket; NULL is ignored.  No task may be awaiting on it.
 *
 * Context: any thread, while no task awaits on it; a task may call it
 * (never blocks).
 */
WEFT_EXTERN void weft_udp_close(weft_udp_t *u);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_NET_H */
