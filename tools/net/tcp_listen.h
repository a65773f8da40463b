/* SPDX-License-Identifier: MIT */
/*
 * The TCP listener and acceptor of the tools' servers (weft-demo,
 * weft-bench echo-server and http-server), on libweft as any user would.
 *
 * tcp_listen() binds the listener to a runtime; tcp_acceptor_spawn()
 * starts the accept loop as a task on the workers, which sets TCP_NODELAY
 * on every connection and hands it to the server's callback.  An accept
 * error (EMFILE, ENFILE, ENOMEM, ...) is reported on stderr and retried
 * after TCP_ACCEPT_BACKOFF_MS, so that a server out of descriptors does
 * not spin; the loop ends when the listener is shut down.
 */
#ifndef WEFT_TOOLS_TCP_LISTEN_H
#define WEFT_TOOLS_TCP_LISTEN_H

#include "weft/weft.h"

#define TCP_ACCEPT_BACKOFF_MS 10u

/**
 * tcp_conn_fn - takes a new connection.
 * @s: the stream, TCP_NODELAY set; the callback's to close.
 * @arg: tcp_acceptor_spec.arg.
 *
 * Runs on a worker, in the acceptor's poll: it should spawn the
 * connection's task and return.
 */
typedef void (*tcp_conn_fn)(weft_stream_t *s, void *arg);

/**
 * tcp_listen() - bind a TCP listener on @rt.
 * @rt: the runtime the listener registers with.
 * @addr: numeric local address ("127.0.0.1:8080", "[::1]:0").
 * @out: receives the listener.
 *
 * Return: 0; a negative errno of weft_block_on() or weft_tcp_listen().
 */
int tcp_listen(weft_runtime_t *rt, const char *addr, weft_listener_t **out);

struct tcp_acceptor_spec {
	weft_listener_t *l;  /* the acceptor's from now on, even on failure */
	const char *prog;    /* "weft-demo": the prefix of its stderr lines */
	tcp_conn_fn on_conn; /* takes every connection */
	void *arg;           /* for on_conn; must outlive the acceptor */
};

/**
 * tcp_acceptor_spawn() - start the accept loop, a task named "acceptor".
 * @rt: the runtime.
 * @spec: the listener and the callback (copied).
 * @join: receives the task's join handle (not NULL).  The task ends,
 *        closing the listener, when the listener is shut down or the
 *        handle aborted.
 *
 * Return: 0; a negative errno of weft_spawn_with(), the listener closed.
 */
int tcp_acceptor_spawn(weft_runtime_t *rt, const struct tcp_acceptor_spec *spec,
		       weft_join_t **join);

#endif
