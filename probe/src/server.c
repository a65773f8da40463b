/* SPDX-License-Identifier: MIT */
/*
 * The probe's server (server_internal.h has the protocol and the flow).
 *
 * Threads.  Everything about sockets and clients belongs to the server
 * thread (libevent's loop).  The probe's collector thread runs
 * srv_on_update() / srv_on_events(): they encode, then append to the
 * queue under qlock and wake the loop with event_active() (libevent is
 * set up for threads: evthread_use_pthreads() before the base exists).
 * The server thread subscribes and unsubscribes (which take probe.lock
 * and wait for a pass) holding no lock of ours; the callbacks run with
 * probe.lock held and take qlock.  Lock order: probe.lock, then qlock,
 * then libevent's base lock (event_active); stat_lock is a leaf.
 *
 * A subscription is swapped, not edited: a new context (one stream per
 * distinct interval and filter) is made and becomes the active one under
 * qlock (what the old one queued is delivered first, to the clients as
 * they were mapped), the clients are mapped to its streams, then it
 * subscribes (its first update is full, for a client that just
 * subscribed or that skipped updates), then the old one is dropped; what
 * the old one still encodes is discarded at push.
 *
 * Memory.  Per client: at most client_buf_max bytes queued for output (a
 * record is added only if it fits; a full update larger than the bound
 * goes in while at most half of it is queued), the decoder's one record (at most
 * WEFT_WIRE_MAX_RECORD, refused before allocation when larger).  The
 * queue from the collector holds at most queue_max_bytes.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/thread.h>

#include "collector_internal.h"
#include "delta_internal.h"
#include "recorder_internal.h"
#include "server_internal.h"
#include "weft/wire.h"

#define CLIENT_BUF_DEFAULT (8u << 20)
#define SLOW_KICK_DEFAULT_MS 5000u
#define QUEUE_DEFAULT (32u << 20)
#define MAX_CLIENTS 64
/* Distinct (interval, filter) pairs among the clients at once. */
#define MAX_STREAMS 8
#define TICK_MS 100
/* A client that skipped updates gets a full one again, at most this often. */
#define RESYNC_EVERY_NS 1000000000ull

enum item_kind { ITEM_UPDATE, ITEM_EVENTS };

struct item {
	struct item *next;
	enum item_kind kind;
	bool full;
	unsigned stream; /* index in the sub_ctx that made it */
	size_t nevents;
	weft_wire_buf_t buf;
};

/*
 * What one group of clients gets: those with the same publish interval
 * and filter share a stream, encoded once per pass.
 */
struct stream {
	uint32_t interval_ms;
	bool updates, events;
	weft_delta_t delta; /* its filter is the group's */
	weft_wire_events_t enc;
};

/* One probe subscription's encoder state: collector thread only (made
 * and freed by the server thread while it is not subscribed). */
struct sub_ctx {
	weft_server_t *srv;
	unsigned nstreams;
	struct stream st[MAX_STREAMS];
};

struct client {
	weft_server_t *srv;
	struct client *next;
	struct bufferevent *bev;
	weft_wire_decoder_t dec;
	char peer[64];
	bool subscribed, want_updates, want_events, paused, need_full;
	uint32_t interval_ms; /* clamped */
	weft_delta_filter_t filter;
	int stream; /* in the active sub_ctx, -1 for none */
	uint64_t updates_skipped;
	uint64_t events_not_sent;
	uint64_t behind_since; /* over the bound since, or 0 */
};

struct weft_server_s {
	pthread_t thread;
	struct event_base *base;
	struct evconnlistener *unix_l, *tcp_l;
	struct event *wake_ev, *stop_ev, *tick_ev;
	char unix_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int tcp_port;
	size_t buf_max;
	uint64_t kick_ns;
	size_t queue_max;
	size_t max_record;
	weft_wire_buf_t header; /* the FileHeader record sent on connect */

	/* Server thread only. */
	struct client *clients;
	unsigned nclients;
	weft_probe_sub_t *sub;
	struct sub_ctx *sub_ctx;
	uint64_t last_resync;
	uint64_t seen_drop_updates, seen_drop_events;

	/* Guarded by qlock. */
	pthread_mutex_t qlock;
	struct sub_ctx *active;
	struct sub_ctx *retiring; /* the one active before (compared only) */
	struct item *qhead, *qtail;
	size_t qbytes;
	uint64_t drop_updates, drop_events; /* events, not records */

	/* Guarded by stat_lock. */
	pthread_mutex_t stat_lock;
	weft_server_stats_t st;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void srv_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void srv_log(const char *fmt, ...)
{
	char line[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "weft: console: %s\n", line);
}

/* ------------------------------------------------------------ the queue */

static void item_free(struct item *it)
{
	weft_wire_buf_fini(&it->buf);
	free(it);
}

/* Collector thread, probe.lock held: hand @it to the server thread. */
static void push(struct sub_ctx *x, struct item *it)
{
	weft_server_t *s = x->srv;
	bool wake = false;

	pthread_mutex_lock(&s->qlock);
	if (s->active != x) {
		/*
		 * A swapped-out subscription: nobody wants it.  Its events
		 * from passes before the new one subscribed are lost: counted
		 * (its updates are not: the new one starts with a full one).
		 */
		if (x == s->retiring && it->kind == ITEM_EVENTS)
			s->drop_events += it->nevents;
	} else if (s->qbytes + it->buf.len > s->queue_max &&
		   !(it->full && s->qbytes == 0)) {
		/* (A full update larger than the queue goes alone.) */
		if (it->kind == ITEM_UPDATE)
			s->drop_updates++;
		else
			s->drop_events += it->nevents;
	} else {
		/*
		 * The loop is woken for the first item only: deliver() takes
		 * the whole queue under qlock, so an item queued behind
		 * others goes with them, on the wake the first one made (a
		 * pass hands over its events a chunk at a time: a wake a
		 * chunk was an event_active() and its locks each).
		 */
		wake = !s->qhead;
		if (s->qtail)
			s->qtail->next = it;
		else
			s->qhead = it;
		s->qtail = it;
		s->qbytes += it->buf.len;
		it = NULL;
	}
	pthread_mutex_unlock(&s->qlock);
	if (it)
		item_free(it);
	if (wake)
		event_active(s->wake_ev, EV_READ, 0);
}

static const weft_probe_task_t *srv_lookup(uint64_t id)
{
	/* In the collector's callbacks: probe.lock is held. */
	return weft__collector_task(&weft__probe, id);
}

static void srv_on_update(void *ctx, const weft_probe_update_t *u)
{
	struct sub_ctx *x = ctx;

	for (unsigned k = 0; k < x->nstreams; k++) {
		struct stream *st = &x->st[k];
		struct item *it;
		bool full;
		int rc;

		if (!st->updates)
			continue;
		it = calloc(1, sizeof(*it));
		if (!it)
			return;
		it->kind = ITEM_UPDATE;
		it->stream = k;
		rc = weft__delta_pass(&st->delta, u, &it->buf, &full);
		if (rc < 0) {
			/* No memory, or too big: the clients see it as
			 * skipped. */
			pthread_mutex_lock(&x->srv->qlock);
			x->srv->drop_updates++;
			pthread_mutex_unlock(&x->srv->qlock);
		}
		if (rc <= 0) {
			item_free(it);
			continue;
		}
		it->full = full;
		push(x, it);
	}
}

static void srv_on_events(void *ctx, const weft_event_t *ev, size_t n)
{
	struct sub_ctx *x = ctx;

	for (unsigned k = 0; k < x->nstreams; k++) {
		struct stream *st = &x->st[k];
		const weft_event_t *g;
		const uint8_t *rec;
		struct item *it;
		size_t m = n, len;
		int err;

		if (!st->events)
			continue;
		g = weft__delta_events(&st->delta, ev, &m);
		if (!g || !m)
			continue;
		it = calloc(1, sizeof(*it));
		if (!it)
			return;
		it->kind = ITEM_EVENTS;
		it->stream = k;
		it->nevents = m;
		/* Unfiltered, they are the records the collector encoded once
		 * for every subscriber.  On error the whole records before it
		 * still go out. */
		err = weft__collector_event_records(&weft__probe, g, m, &rec,
						    &len);
		if (err == -EINVAL) {
			(void)weft_wire_events_append(&st->enc, &it->buf, g,
						       m);
		} else if (len && !weft_wire_buf_reserve(&it->buf, len)) {
			memcpy(it->buf.data, rec, len);
			it->buf.len = len;
		}
		push(x, it);
	}
}

/* ------------------------------------------------------------ subscription */

static void sub_ctx_free(struct sub_ctx *x)
{
	if (!x)
		return;
	for (unsigned k = 0; k < x->nstreams; k++) {
		weft__delta_fini(&x->st[k].delta);
		weft_wire_events_fini(&x->st[k].enc);
	}
	free(x);
}

static void deliver_list(weft_server_t *s, struct item *list, uint64_t du,
			 uint64_t de);

/*
 * Makes @x the active subscription context (NULL: none) and delivers
 * what the old one had queued, to the clients as they are mapped now.
 */
static void sub_activate(weft_server_t *s, struct sub_ctx *x)
{
	struct item *list;

	pthread_mutex_lock(&s->qlock);
	s->retiring = s->active;
	s->active = x;
	list = s->qhead;
	s->qhead = s->qtail = NULL;
	s->qbytes = 0;
	pthread_mutex_unlock(&s->qlock);
	deliver_list(s, list, 0, 0);
}

static void sub_drop(weft_server_t *s)
{
	weft_probe_sub_t *old = s->sub;
	struct sub_ctx *oldx = s->sub_ctx;

	sub_activate(s, NULL);
	s->sub = NULL;
	s->sub_ctx = NULL;
	for (struct client *c = s->clients; c; c = c->next)
		c->stream = -1;
	if (old)
		weft_probe_unsubscribe(old);
	sub_ctx_free(oldx);
	pthread_mutex_lock(&s->stat_lock);
	s->st.subscribed = 0;
	pthread_mutex_unlock(&s->stat_lock);
}

static bool client_active(const struct client *c)
{
	return c->subscribed &&
	       (c->want_updates || (c->want_events && !c->paused));
}

/* The stream of @plan that @c belongs in, or -1. */
static int plan_find(const struct stream *plan, unsigned n,
		     const struct client *c)
{
	for (unsigned k = 0; k < n; k++)
		if (plan[k].interval_ms == c->interval_ms &&
		    weft__delta_filter_equal(&plan[k].delta.filter, &c->filter))
			return (int)k;
	return -1;
}

/*
 * Subscribes to the probe for what the clients want, or not at all: one
 * stream per distinct (interval, filter) among them.  @fresh: make a new
 * subscription even if the current one fits (its first update is full).
 * Server thread; holds none of our locks.
 */
static void sub_reconcile(weft_server_t *s, bool fresh)
{
	weft_probe_sub_opts_t o = { 0 };
	weft_probe_sub_t *nsub, *old;
	struct sub_ctx *x, *oldx = s->sub_ctx;
	struct stream plan[MAX_STREAMS];
	unsigned n = 0;
	bool ev = false, same;
	int err;

	memset(plan, 0, sizeof(plan));
	for (struct client *c = s->clients; c; c = c->next) {
		int k;

		if (!client_active(c))
			continue;
		k = plan_find(plan, n, c);
		if (k < 0) {
			if (n == MAX_STREAMS)
				continue; /* refused at subscribe */
			k = (int)n++;
			plan[k].interval_ms = c->interval_ms;
			plan[k].delta.filter = c->filter; /* borrowed */
		}
		plan[k].updates |= c->want_updates;
		plan[k].events |= c->want_events && !c->paused;
		ev |= plan[k].events;
	}
	if (!n) {
		if (s->sub)
			sub_drop(s);
		return;
	}
	same = s->sub && !fresh && oldx->nstreams == n;
	for (unsigned k = 0; same && k < n; k++) {
		const struct stream *cur = &oldx->st[k];

		same = cur->interval_ms == plan[k].interval_ms &&
		       cur->updates == plan[k].updates &&
		       cur->events == plan[k].events &&
		       weft__delta_filter_equal(&cur->delta.filter,
						&plan[k].delta.filter);
	}
	if (same) {
		/* A client may have joined a stream that exists. */
		for (struct client *c = s->clients; c; c = c->next)
			c->stream = client_active(c) ?
					    plan_find(oldx->st, n, c) :
					    -1;
		return;
	}

	x = calloc(1, sizeof(*x));
	if (!x)
		return;
	x->srv = s;
	for (unsigned k = 0; k < n; k++) {
		struct stream *st = &x->st[k];

		weft__delta_init(&st->delta);
		weft_wire_events_init(&st->enc);
		x->nstreams = k + 1;
		st->interval_ms = plan[k].interval_ms;
		st->updates = plan[k].updates;
		st->events = plan[k].events;
		st->delta.interval_ns = (uint64_t)st->interval_ms * 1000000u;
		st->delta.max_record = s->max_record;
		st->delta.lookup = srv_lookup;
		if (weft__delta_filter_copy(&st->delta.filter,
					    &plan[k].delta.filter)) {
			sub_ctx_free(x);
			return;
		}
	}
	o.events = ev;
	o.on_events = ev ? srv_on_events : NULL;
	o.on_update = srv_on_update;
	o.ctx = x;
	/*
	 * Active before it subscribes: its first pass (the full update)
	 * may come at once and must not be discarded at push.  What the
	 * old context queued goes out under the old mapping first.
	 */
	sub_activate(s, x);
	for (struct client *c = s->clients; c; c = c->next)
		c->stream = client_active(c) ? plan_find(x->st, n, c) : -1;
	err = weft_probe_subscribe(&o, &nsub);
	if (err) {
		srv_log("cannot subscribe to the probe: %s", strerror(-err));
		sub_activate(s, oldx);
		for (struct client *c = s->clients; c; c = c->next)
			c->stream =
				oldx && client_active(c) ?
					plan_find(oldx->st, oldx->nstreams, c) :
					-1;
		sub_ctx_free(x);
		return;
	}
	old = s->sub;
	s->sub = nsub;
	s->sub_ctx = x;
	s->last_resync = mono_ns();
	if (old)
		weft_probe_unsubscribe(old); /* no callback of it after this */
	sub_ctx_free(oldx);
	pthread_mutex_lock(&s->stat_lock);
	s->st.subscribed = 1;
	pthread_mutex_unlock(&s->stat_lock);
}

/* ------------------------------------------------------------ clients */

static void stat_buffered(weft_server_t *s, size_t have)
{
	pthread_mutex_lock(&s->stat_lock);
	if (have > s->st.max_client_buffered)
		s->st.max_client_buffered = have;
	pthread_mutex_unlock(&s->stat_lock);
}

static void client_close(struct client *c, const char *why, bool bad)
{
	weft_server_t *s = c->srv;
	struct client **pp;

	if (why)
		srv_log("closing %s: %s", c->peer, why);
	for (pp = &s->clients; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	s->nclients--;
	bufferevent_free(c->bev);
	weft_wire_decoder_fini(&c->dec);
	weft__delta_filter_fini(&c->filter);
	pthread_mutex_lock(&s->stat_lock);
	s->st.clients = s->nclients;
	if (bad)
		s->st.closed_bad++;
	pthread_mutex_unlock(&s->stat_lock);
	free(c);
	sub_reconcile(s, false);
}

/*
 * Queues @data for @c if it fits its bound.  A full update larger than
 * the bound itself goes in while at most half the bound is queued
 * (otherwise a client of a process with very many tasks could never get
 * one): the bound is then that one update and half the bound.
 * Return: true if queued.
 */
static bool client_send_ex(struct client *c, const void *data, size_t len,
			   bool bounded, bool full)
{
	struct evbuffer *out = bufferevent_get_output(c->bev);
	size_t have = evbuffer_get_length(out);
	bool over = false;

	if (bounded && have + len > c->srv->buf_max) {
		/*
		 * Not "into an empty buffer" only: the pass's events go out
		 * before its update, so a client that wants both rarely has
		 * an empty one when its full update comes.
		 */
		over = full && have <= c->srv->buf_max / 2 &&
		       len > c->srv->buf_max;
		if (!over) {
			if (!c->behind_since)
				c->behind_since = mono_ns();
			return false;
		}
	}
	if (evbuffer_add(out, data, len))
		return false;
	stat_buffered(c->srv, have + len);
	if (over) {
		pthread_mutex_lock(&c->srv->stat_lock);
		if (len > c->srv->st.max_full_over_bound)
			c->srv->st.max_full_over_bound = len;
		pthread_mutex_unlock(&c->srv->stat_lock);
	}
	return true;
}

static bool client_send(struct client *c, const void *data, size_t len,
			bool bounded)
{
	return client_send_ex(c, data, len, bounded, false);
}

static void client_send_update(struct client *c, const struct item *it)
{
	weft_wire_buf_t tmp = { 0 };
	bool ok;

	if (!c->want_updates || (c->need_full && !it->full))
		return;
	if (!c->updates_skipped && !c->events_not_sent) {
		ok = client_send_ex(c, it->buf.data, it->buf.len, true,
				    it->full);
	} else if (weft_wire_update_recount(&tmp, it->buf.data, it->buf.len,
					     c->updates_skipped,
					     c->events_not_sent)) {
		ok = false;
	} else {
		ok = client_send_ex(c, tmp.data, tmp.len, true, it->full);
	}
	weft_wire_buf_fini(&tmp);
	if (ok) {
		if (it->full)
			c->need_full = false;
		return;
	}
	/* Skipped: what changed in it is lost, so a full one is due. */
	c->updates_skipped++;
	c->need_full = true;
	pthread_mutex_lock(&c->srv->stat_lock);
	c->srv->st.updates_skipped++;
	pthread_mutex_unlock(&c->srv->stat_lock);
}

static void deliver_list(weft_server_t *s, struct item *list, uint64_t du,
			 uint64_t de)
{
	if (du || de) {
		pthread_mutex_lock(&s->stat_lock);
		s->st.queue_dropped += du + de;
		pthread_mutex_unlock(&s->stat_lock);
		for (struct client *c = s->clients; c; c = c->next) {
			if (!c->subscribed)
				continue;
			if (c->want_updates && du) {
				c->updates_skipped += du;
				c->need_full = true;
			}
			if (c->want_events && !c->paused)
				c->events_not_sent += de;
		}
	}
	while (list) {
		struct item *it = list;

		list = it->next;
		for (struct client *c = s->clients; c; c = c->next) {
			if (!c->subscribed || c->stream != (int)it->stream)
				continue;
			if (it->kind == ITEM_UPDATE) {
				client_send_update(c, it);
			} else if (c->want_events && !c->paused &&
				   !client_send(c, it->buf.data, it->buf.len,
						true)) {
				c->events_not_sent += it->nevents;
			}
		}
		item_free(it);
	}
}

static void deliver(weft_server_t *s)
{
	struct item *list;
	uint64_t du, de;

	pthread_mutex_lock(&s->qlock);
	list = s->qhead;
	s->qhead = s->qtail = NULL;
	s->qbytes = 0;
	du = s->drop_updates - s->seen_drop_updates;
	de = s->drop_events - s->seen_drop_events;
	s->seen_drop_updates = s->drop_updates;
	s->seen_drop_events = s->drop_events;
	pthread_mutex_unlock(&s->qlock);
	deliver_list(s, list, du, de);
}

static void srv_wake_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	deliver(arg);
}

static void srv_stop_cb(evutil_socket_t fd, short what, void *arg)
{
	weft_server_t *s = arg;

	(void)fd;
	(void)what;
	event_base_loopbreak(s->base);
}

static void srv_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	weft_server_t *s = arg;
	uint64_t now = mono_ns();
	bool resync = false;
	struct client *c, *next;

	(void)fd;
	(void)what;
	for (c = s->clients; c; c = next) {
		size_t have =
			evbuffer_get_length(bufferevent_get_output(c->bev));

		next = c->next;
		if (c->behind_since && have <= s->buf_max / 2)
			c->behind_since = 0;
		if (c->behind_since && now - c->behind_since > s->kick_ns) {
			pthread_mutex_lock(&s->stat_lock);
			s->st.kicked++;
			pthread_mutex_unlock(&s->stat_lock);
			client_close(c, "too slow: behind for too long", false);
			continue;
		}
		if (c->subscribed && c->want_updates && c->need_full &&
		    have <= s->buf_max / 2)
			resync = true;
	}
	if (resync && now - s->last_resync >= RESYNC_EVERY_NS) {
		pthread_mutex_lock(&s->stat_lock);
		s->st.resyncs++;
		pthread_mutex_unlock(&s->stat_lock);
		sub_reconcile(s, true);
	}
}

/* The reply to CONTROL_OP_TASK_DETAIL: an Update holding that task. */
static void task_detail(struct client *c, uint64_t id)
{
	weft_wire_buf_t b = { 0 };
	const weft_probe_task_t *tp[1];
	weft_probe_update_t u = { .tasks = tp };
	int err;

	/* Lock order: probe.lock alone (we hold none of ours). */
	pthread_mutex_lock(&weft__probe.lock);
	tp[0] = weft__collector_task(&weft__probe, id);
	u.ntasks = tp[0] ? 1 : 0;
	err = weft_wire_update_append(&b, &u, 0);
	pthread_mutex_unlock(&weft__probe.lock);
	if (!err)
		(void)client_send(c, b.data, b.len, false);
	weft_wire_buf_fini(&b);
}

/*
 * The reply to CONTROL_OP_SNAPSHOT: the flight recorder's records, then a
 * Control SNAPSHOT frame that ends them.  A reply the client asked for is
 * not held to the output bound.  The client writes the file: the server
 * writes none on anyone's behalf.
 */
static void snapshot(struct client *c)
{
	Weft__V1__Frame f = WEFT__V1__FRAME__INIT;
	Weft__V1__Control ctl = WEFT__V1__CONTROL__INIT;
	weft_wire_buf_t b = { 0 }, end = { 0 };
	int err = weft__trace_snapshot_append(&b);

	ctl.op = WEFT__V1__CONTROL_OP__CONTROL_OP_SNAPSHOT;
	ctl.error = (char *)(err == -ENOENT ? "no flight recorder running "
					      "(WEFT_TRACE_FLIGHT_MB or _S)" :
			     err            ? strerror(-err) :
					      "");
	f.body_case = WEFT__V1__FRAME__BODY_CONTROL;
	f.control = &ctl;
	if (!err)
		(void)client_send(c, b.data, b.len, false);
	if (!weft_wire_record_append(&end, &f))
		(void)client_send(c, end.data, end.len, false);
	weft_wire_buf_fini(&b);
	weft_wire_buf_fini(&end);
}

/*
 * A Subscribe (again, possibly: the last one counts).  Clients with the
 * same interval and filter share a stream; a client that would make more
 * than MAX_STREAMS distinct ones is refused.
 * Return: 0, or the reason to close the connection.
 */
static const char *client_subscribe(struct client *c, weft_server_request_t *m)
{
	weft_server_t *s = c->srv;
	weft_delta_filter_t flt = m->filter;
	struct stream plan[MAX_STREAMS];
	uint32_t ival = m->interval_ms;
	unsigned n = 0;
	bool fits = false;

	/* Distinct streams among the others, and whether ours is one. */
	memset(plan, 0, sizeof(plan));
	for (struct client *o = s->clients; o; o = o->next) {
		if (o == c || !client_active(o) || plan_find(plan, n, o) >= 0)
			continue;
		plan[n].interval_ms = o->interval_ms;
		plan[n].delta.filter = o->filter;
		n++;
		fits |= o->interval_ms == ival &&
			weft__delta_filter_equal(&o->filter, &flt);
	}
	if (!fits && n >= MAX_STREAMS && (m->updates || m->events))
		return "too many different subscriptions (interval, filter)";
	/* The filter is ours now. */
	weft__delta_filter_fini(&c->filter);
	c->filter = flt;
	memset(&m->filter, 0, sizeof(m->filter));
	c->interval_ms = ival;
	c->subscribed = true;
	c->want_updates = m->updates;
	c->want_events = m->events;
	c->need_full = c->want_updates;
	sub_reconcile(s, c->want_updates);
	return NULL;
}

/*
 * Whether a paused client's stream, once it resumes, is one of the others'
 * or a new one within MAX_STREAMS (a paused client does not count, and
 * others may have taken the last streams meanwhile).
 */
static bool resume_fits(struct client *c)
{
	struct stream plan[MAX_STREAMS];
	unsigned n = 0;

	if (!c->subscribed || (!c->want_updates && !c->want_events))
		return true;
	for (struct client *o = c->srv->clients; o; o = o->next)
		if (o != c && client_active(o) &&
		    o->interval_ms == c->interval_ms &&
		    weft__delta_filter_equal(&o->filter, &c->filter))
			return true;
	memset(plan, 0, sizeof(plan));
	for (struct client *o = c->srv->clients; o; o = o->next) {
		if (o == c || !client_active(o) || plan_find(plan, n, o) >= 0)
			continue;
		if (n == MAX_STREAMS)
			return false;
		plan[n].interval_ms = o->interval_ms;
		plan[n].delta.filter = o->filter;
		n++;
	}
	return n < MAX_STREAMS;
}

/* Return: 0, or the reason to close the connection. */
static const char *client_request(void *ctx, weft_server_request_t *r)
{
	struct client *c = ctx;
	weft_server_t *s = c->srv;

	switch (r->op) {
	case WEFT_SERVER_REQ_SUBSCRIBE:
		return client_subscribe(c, r);
	case WEFT_SERVER_REQ_PAUSE:
		c->paused = true;
		sub_reconcile(s, false);
		return NULL;
	case WEFT_SERVER_REQ_RESUME:
		if (c->paused && !resume_fits(c))
			return "too many different subscriptions (interval, "
			       "filter)";
		c->paused = false;
		sub_reconcile(s, false);
		return NULL;
	case WEFT_SERVER_REQ_TASK_DETAIL:
	case WEFT_SERVER_REQ_SNAPSHOT:
		/*
		 * Replies the client asked for are not held to the output
		 * bound, so asking is: one that asks while over it is not
		 * reading them, and would grow our memory without end.
		 */
		if (evbuffer_get_length(bufferevent_get_output(c->bev)) >
		    s->buf_max)
			return "asks for replies it does not read";
		if (r->op == WEFT_SERVER_REQ_TASK_DETAIL)
			task_detail(c, r->task);
		else
			snapshot(c);
		return NULL;
	}
	return "unknown request";
}

static void client_read_cb(struct bufferevent *bev, void *arg)
{
	struct client *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	while (evbuffer_get_length(in)) {
		struct evbuffer_iovec v;
		const char *why;
		char why_buf[128];
		size_t used;

		if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
			break;
		why = weft__server_input_feed(&c->dec, v.iov_base, v.iov_len,
					      &used, client_request, c, why_buf,
					      sizeof(why_buf));
		if (why) {
			client_close(c, why, true);
			return;
		}
		evbuffer_drain(in, used);
	}
}

static void client_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct client *c = arg;

	(void)bev;
	if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)))
		return;
	if (weft_wire_decoder_mid_record(&c->dec))
		client_close(c, "disconnected in the middle of a record", true);
	else
		client_close(c, NULL, false);
}

static void peer_name(char *buf, size_t len, const struct sockaddr *sa)
{
	char host[INET6_ADDRSTRLEN] = "?";

	if (sa && sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;

		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, ntohs(in->sin_port));
	} else if (sa && sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in = (const void *)sa;

		inet_ntop(AF_INET6, &in->sin6_addr, host, sizeof(host));
		snprintf(buf, len, "[%s]:%u", host, ntohs(in->sin6_port));
	} else {
		snprintf(buf, len, "unix client");
	}
}

static void srv_accept_cb(struct evconnlistener *l, evutil_socket_t fd,
			  struct sockaddr *sa, int salen, void *arg)
{
	weft_server_t *s = arg;
	struct client *c;

	(void)l;
	(void)salen;
	if (s->nclients >= MAX_CLIENTS) {
		srv_log("refusing a client: %d connected already", MAX_CLIENTS);
		evutil_closesocket(fd);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		evutil_closesocket(fd);
		return;
	}
	c->srv = s;
	c->stream = -1;
	peer_name(c->peer, sizeof(c->peer), sa);
	if (sa && sa->sa_family != AF_UNIX) {
		int one = 1;

		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
	c->bev = bufferevent_socket_new(s->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (!c->bev) {
		evutil_closesocket(fd);
		free(c);
		return;
	}
	weft_wire_decoder_init(&c->dec, WEFT_WIRE_MAX_RECORD);
	bufferevent_setcb(c->bev, client_read_cb, NULL, client_event_cb, c);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	c->next = s->clients;
	s->clients = c;
	s->nclients++;
	(void)client_send(c, s->header.data, s->header.len, false);
	pthread_mutex_lock(&s->stat_lock);
	s->st.accepted++;
	s->st.clients = s->nclients;
	pthread_mutex_unlock(&s->stat_lock);
}

static void *server_main(void *arg)
{
	weft_server_t *s = arg;

	pthread_setname_np(pthread_self(), "weft-console");
	event_base_dispatch(s->base);
	while (s->clients)
		client_close(s->clients, NULL, false);
	if (s->sub)
		sub_drop(s);
	return NULL;
}

/* ------------------------------------------------------------ endpoints */

static int listen_unix(weft_server_t *s, const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct stat st;

	if (strlen(path) >= sizeof(sun.sun_path))
		return -ENAMETOOLONG;
	strcpy(sun.sun_path, path);
	/* A socket named for our pid is a dead process's: ours now. */
	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
		unlink(path);
	s->unix_l = evconnlistener_new_bind(
		s->base, srv_accept_cb, s,
		LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 16,
		(struct sockaddr *)&sun, (int)sizeof(sun));
	if (!s->unix_l)
		return errno ? -errno : -EADDRINUSE;
	(void)chmod(path, 0600);
	snprintf(s->unix_path, sizeof(s->unix_path), "%s", path);
	return 0;
}

static bool is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)(const void *)sa)
				      ->sin_addr.s_addr) >>
			24) == 127;
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(
			&((const struct sockaddr_in6 *)(const void *)sa)
				 ->sin6_addr);
	return false;
}

/* "host:port", "[v6]:port", ":port" or "port" (loopback). */
static int listen_tcp(weft_server_t *s, const char *bind)
{
	char host[256], port[16];
	const char *colon = strrchr(bind, ':');
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV },
			*res = NULL;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	size_t hl;
	int err;

	if (!colon) {
		snprintf(host, sizeof(host), "127.0.0.1");
		colon = bind - 1;
	} else {
		hl = (size_t)(colon - bind);
		if (hl >= sizeof(host))
			return -EINVAL;
		memcpy(host, bind, hl);
		host[hl] = '\0';
		if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
			memmove(host, host + 1, hl - 2);
			host[hl - 2] = '\0';
		}
		if (!host[0])
			snprintf(host, sizeof(host), "127.0.0.1");
	}
	if (strlen(colon + 1) == 0 || strlen(colon + 1) >= sizeof(port))
		return -EINVAL;
	snprintf(port, sizeof(port), "%s", colon + 1);
	if (getaddrinfo(host, port, &hints, &res) || !res)
		return -EINVAL;
	if (!is_loopback(res->ai_addr))
		srv_log("WARNING: listening on %s, which is not loopback: "
			"anyone who can reach it can watch this process",
			bind);
	s->tcp_l = evconnlistener_new_bind(
		s->base, srv_accept_cb, s,
		LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC |
			LEV_OPT_REUSEABLE,
		16, res->ai_addr, (int)res->ai_addrlen);
	err = s->tcp_l ? 0 : (errno ? -errno : -EADDRINUSE);
	freeaddrinfo(res);
	if (err)
		return err;
	if (getsockname(evconnlistener_get_fd(s->tcp_l), (void *)&ss, &sl) ==
	    0) {
		if (ss.ss_family == AF_INET)
			s->tcp_port =
				ntohs(((struct sockaddr_in *)&ss)->sin_port);
		else if (ss.ss_family == AF_INET6)
			s->tcp_port =
				ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	}
	return 0;
}

/* ------------------------------------------------------------ life */

static void threads_once(void)
{
	evthread_use_pthreads();
}

static int header_build(weft_server_t *s, uint32_t workers)
{
	weft_wire_hello_t h;
	char clock[96];
	int err;

	/* The clock's description changes under probe.lock (calibration). */
	pthread_mutex_lock(&weft__probe.lock);
	snprintf(clock, sizeof(clock), "%s", weft__probe_clock_describe());
	pthread_mutex_unlock(&weft__probe.lock);
	err = weft_wire_hello_init(&h, workers, clock, mono_ns());
	if (!err)
		err = weft_wire_header_append(&s->header, &h.msg, 0);
	weft_wire_hello_fini(&h);
	return err;
}

static void server_free(weft_server_t *s)
{
	if (s->unix_l)
		evconnlistener_free(s->unix_l);
	if (s->tcp_l)
		evconnlistener_free(s->tcp_l);
	if (s->wake_ev)
		event_free(s->wake_ev);
	if (s->stop_ev)
		event_free(s->stop_ev);
	if (s->tick_ev)
		event_free(s->tick_ev);
	if (s->base)
		event_base_free(s->base);
	if (s->unix_path[0])
		unlink(s->unix_path);
	while (s->qhead) {
		struct item *it = s->qhead;

		s->qhead = it->next;
		item_free(it);
	}
	weft_wire_buf_fini(&s->header);
	pthread_mutex_destroy(&s->qlock);
	pthread_mutex_destroy(&s->stat_lock);
	free(s);
}

/**
 * weft__server_create() - start a server thread.
 * @opts: where to listen and the bounds; copied.
 *
 * Return: 0; -ENOMEM; -EINVAL (a bad tcp_bind); -EPERM (the socket
 * directory is someone else's or open to others); -ENAMETOOLONG; a
 * negative errno from bind(2) or listen(2); -EAGAIN (the thread).
 */
int weft__server_create(const weft_server_opts_t *opts, weft_server_t **out)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	struct timeval tick = { 0, TICK_MS * 1000 };
	sigset_t all, old;
	weft_server_t *s;
	char dir[sizeof(s->unix_path)], path[sizeof(s->unix_path) + 32];
	int err;

	pthread_once(&once, threads_once);
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	pthread_mutex_init(&s->qlock, NULL);
	pthread_mutex_init(&s->stat_lock, NULL);
	s->tcp_port = -1;
	s->buf_max = opts->client_buf_max ? opts->client_buf_max :
					    CLIENT_BUF_DEFAULT;
	s->kick_ns = (uint64_t)(opts->slow_kick_ms ? opts->slow_kick_ms :
						     SLOW_KICK_DEFAULT_MS) *
		     1000000u;
	s->queue_max = opts->queue_max_bytes ? opts->queue_max_bytes :
					       QUEUE_DEFAULT;
	s->max_record = opts->max_record;
	s->st.client_buf_max = s->buf_max;
	err = header_build(s, opts->workers);
	if (err)
		goto out_free;
	s->base = event_base_new();
	if (!s->base) {
		err = -ENOMEM;
		goto out_free;
	}
	s->wake_ev = event_new(s->base, -1, 0, srv_wake_cb, s);
	s->stop_ev = event_new(s->base, -1, 0, srv_stop_cb, s);
	s->tick_ev = event_new(s->base, -1, EV_PERSIST, srv_tick_cb, s);
	if (!s->wake_ev || !s->stop_ev || !s->tick_ev ||
	    event_add(s->tick_ev, &tick)) {
		err = -ENOMEM;
		goto out_free;
	}
	if (!opts->unix_path) {
		err = weft_wire_socket_dir(dir, sizeof(dir), 1);
		if (err)
			goto out_free;
		snprintf(path, sizeof(path), "%s/%d.sock", dir, (int)getpid());
		err = listen_unix(s, path);
	} else if (opts->unix_path[0]) {
		err = listen_unix(s, opts->unix_path);
	}
	if (err)
		goto out_free;
	if (opts->tcp_bind && opts->tcp_bind[0]) {
		err = listen_tcp(s, opts->tcp_bind);
		if (err)
			goto out_free;
	}
	/*
	 * The thread starts with every signal blocked: the application's
	 * handlers run elsewhere, and a write to a client that has gone
	 * fails with EPIPE instead of killing the process with SIGPIPE
	 * (which, blocked, stays pending on this thread alone).
	 */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&s->thread, NULL, server_main, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		err = -EAGAIN;
		goto out_free;
	}
	*out = s;
	return 0;

out_free:
	server_free(s);
	return err;
}

/**
 * weft__server_destroy() - close every connection, drop the probe
 * subscription, stop the thread, remove the socket.
 */
void weft__server_destroy(weft_server_t *s)
{
	if (!s)
		return;
	event_active(s->stop_ev, EV_READ, 0);
	pthread_join(s->thread, NULL);
	server_free(s);
}

const char *weft__server_unix_path(const weft_server_t *s)
{
	return s->unix_path;
}

int weft__server_tcp_port(const weft_server_t *s)
{
	return s->tcp_port;
}

void weft__server_stats(weft_server_t *s, weft_server_stats_t *out)
{
	pthread_mutex_lock(&s->stat_lock);
	*out = s->st;
	pthread_mutex_unlock(&s->stat_lock);
}

/* ------------------------------------------------------------ the default */

static pthread_mutex_t env_lock = PTHREAD_MUTEX_INITIALIZER;
static weft_server_t *env_srv;
static struct weft_runtime_s *env_rt;
static char exit_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
static pid_t exit_pid;

static void remove_at_exit(void)
{
	pthread_mutex_lock(&env_lock);
	/* Not in a forked child: the socket is its parent's. */
	if (exit_path[0] && getpid() == exit_pid)
		unlink(exit_path);
	pthread_mutex_unlock(&env_lock);
}

static bool console_off(void)
{
	const char *v = getenv("WEFT_CONSOLE");

	return v && (!strcmp(v, "off") || !strcmp(v, "0") ||
		     !strcmp(v, "false") || !strcmp(v, "no"));
}

void weft__server_env_start(struct weft_runtime_s *rt)
{
	static bool atexit_done;
	weft_server_opts_t o = { 0 };
	weft_server_t *s;
	int err;

	if (console_off())
		return;
	pthread_mutex_lock(&env_lock);
	if (env_srv)
		goto out_unlock;
	o.tcp_bind = getenv("WEFT_CONSOLE_BIND");
	o.workers = weft_runtime_workers(rt);
	err = weft__server_create(&o, &s);
	if (err) {
		srv_log("not started: %s", strerror(-err));
		goto out_unlock;
	}
	env_srv = s;
	env_rt = rt;
	snprintf(exit_path, sizeof(exit_path), "%s", s->unix_path);
	exit_pid = getpid();
	if (!atexit_done) {
		atexit(remove_at_exit);
		atexit_done = true;
	}
out_unlock:
	pthread_mutex_unlock(&env_lock);
}

void weft__server_env_stop(struct weft_runtime_s *rt)
{
	weft_server_t *s = NULL;

	pthread_mutex_lock(&env_lock);
	if (env_rt == rt && env_srv) {
		s = env_srv;
		env_srv = NULL;
		env_rt = NULL;
		exit_path[0] = '\0';
	}
	pthread_mutex_unlock(&env_lock);
	/* Outside env_lock: the thread may be in the probe. */
	weft__server_destroy(s);
}

weft_server_t *weft__server_default(void)
{
	weft_server_t *s;

	pthread_mutex_lock(&env_lock);
	s = env_srv;
	pthread_mutex_unlock(&env_lock);
	return s;
}
