/* SPDX-License-Identifier: MIT */
/* The tools' TCP listener and acceptor (see tcp_listen.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tcp_listen.h"

struct listen_state {
	const char *addr;
	weft_listener_t *l;
	int err;
};

/* Runs under weft_block_on() so that the listener binds to the runtime. */
static weft_poll_t listen_poll(void *arg, weft_cx_t *cx)
{
	struct listen_state *ls = arg;

	(void)cx;
	ls->err = weft_tcp_listen(ls->addr, 0, &ls->l);
	return WEFT_READY;
}

int tcp_listen(weft_runtime_t *rt, const char *addr, weft_listener_t **out)
{
	struct listen_state ls = { .addr = addr };
	int err;

	err = weft_block_on(rt, listen_poll, &ls, NULL);
	if (!err)
		err = ls.err;
	if (err) {
		weft_listener_close(ls.l);
		ls.l = NULL;
	}
	*out = ls.l;
	return err;
}

struct acceptor {
	int weft_pc;
	struct tcp_acceptor_spec spec;
	weft_stream_t *s;
	int status;
	weft_sleep_t backoff;
};

static weft_poll_t acceptor_poll(void *arg, weft_cx_t *cx)
{
	struct acceptor *a = arg;

	WEFT_ASYNC_BEGIN(a);
	for (;;) {
		WEFT_AWAIT(a, weft_listener_accept(a->spec.l, cx, &a->s,
						   &a->status));
		if (a->status == 0) {
			weft_stream_set_nodelay(a->s, true);
			a->spec.on_conn(a->s, a->spec.arg);
			a->s = NULL;
			continue;
		}
		fprintf(stderr, "%s: accept: %s\n", a->spec.prog,
			strerror(-a->status));
		if (a->status == -ESHUTDOWN)
			break;
		weft_sleep_init(&a->backoff, WEFT_MSEC(TCP_ACCEPT_BACKOFF_MS));
		WEFT_AWAIT(a, weft_sleep_poll(&a->backoff, cx));
		weft_sleep_fini(&a->backoff);
	}
	WEFT_ASYNC_END(a);
}

static void acceptor_drop(void *arg)
{
	struct acceptor *a = arg;

	weft_sleep_fini(&a->backoff);
	weft_listener_close(a->spec.l);
}

int tcp_acceptor_spawn(weft_runtime_t *rt, const struct tcp_acceptor_spec *spec,
		       weft_join_t **join)
{
	struct acceptor a = { .spec = *spec };
	int err;

	err = weft_spawn_with(rt,
			      &(weft_spawn_t){ .poll = acceptor_poll,
					       .drop = acceptor_drop,
					       .state = &a,
					       .size = sizeof(a),
					       .name = "acceptor",
					       .file = __FILE__,
					       .line = __LINE__ },
			      join);
	if (err)
		weft_listener_close(spec->l);
	return err;
}
