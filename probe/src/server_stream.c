/* SPDX-License-Identifier: MIT */
/*
 * The server's collector-side streams: the probe subscription made for
 * what the clients want (one stream per distinct interval and filter),
 * the collector's callbacks that encode each pass into the streams, the
 * queue that hands the records to the server thread, and their delivery
 * to the clients of each stream (server.c has the threads and the locks).
 *
 * A subscription is swapped, not edited: a new context (one stream per
 * distinct interval and filter) is made and becomes the active one under
 * qlock (what the old one queued is delivered first, to the clients as
 * they were mapped), the clients are mapped to its streams, then it
 * subscribes (its first update is full, for a client that just
 * subscribed or that skipped updates), then the old one is dropped; what
 * the old one still encodes is discarded at push.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "collector.h"
#include "server_state_internal.h"

/* ------------------------------------------------------------ the queue */

void weft__server_item_free(struct item *it)
{
	weft_wire_buf_fini(&it->buf);
	free(it);
}

/* An evbuffer's cleanup for a record it held by reference (server
 * thread: the thread that drains or frees client buffers). */
void weft__server_item_unref(const void *data, size_t len, void *arg)
{
	struct item *it = arg;

	(void)data;
	(void)len;
	if (--it->refs == 0)
		weft__server_item_free(it);
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
	} else if (s->qbytes + it->buf.len >
			   (it->kind == ITEM_EVENTS ?
				    s->queue_max - s->queue_max / 4 :
				    s->queue_max) &&
		   !(it->full && s->qbytes == 0)) {
		/*
		 * Events may fill three quarters of the queue: the last
		 * quarter is the updates'.  A flood of events the server
		 * thread cannot keep up with (a client of every event, on a
		 * starved machine) would otherwise drop every client's
		 * updates, and the full ones that resync them, in turn.
		 * (A full update larger than the queue goes alone.)
		 */
		if (it->kind == ITEM_UPDATE)
			s->drop_updates++;
		else
			s->drop_events += it->nevents;
	} else {
		/*
		 * The loop is woken for the first item only:
		 * weft__server_deliver() takes the whole queue under qlock,
		 * so an item queued behind others goes with them, on the wake
		 * the first one made (a pass hands over its events a chunk at
		 * a time: a wake a chunk was an event_active() and its locks
		 * each).
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
		weft__server_item_free(it);
	if (wake)
		event_active(s->wake_ev, EV_READ, 0);
}

static const weft_probe_task_t *srv_lookup(uint64_t id)
{
	/* In the collector's callbacks: probe.lock is held. */
	return weft__sub_task(id);
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
			weft__server_item_free(it);
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
		err = weft__sub_event_records(g, m, &rec, &len);
		if (err == -EINVAL) {
			(void)weft_wire_events_append(&st->enc, &it->buf, g, m);
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

void weft__server_sub_drop(weft_server_t *s)
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

bool weft__server_client_active(const struct client *c)
{
	return c->subscribed &&
	       (c->want_updates || (c->want_events && !c->paused));
}

/* The stream of @plan that @c belongs in, or -1. */
int weft__server_plan_find(const struct stream *plan, unsigned n,
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
void weft__server_sub_reconcile(weft_server_t *s, bool fresh)
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

		if (!weft__server_client_active(c))
			continue;
		k = weft__server_plan_find(plan, n, c);
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
			weft__server_sub_drop(s);
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
			c->stream =
				weft__server_client_active(c) ?
					weft__server_plan_find(oldx->st, n, c) :
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
		c->stream = weft__server_client_active(c) ?
				    weft__server_plan_find(x->st, n, c) :
				    -1;
	err = weft_probe_subscribe(&o, &nsub);
	if (err) {
		weft__server_log("cannot subscribe to the probe: %s",
				 strerror(-err));
		sub_activate(s, oldx);
		for (struct client *c = s->clients; c; c = c->next)
			c->stream =
				oldx && weft__server_client_active(c) ?
					weft__server_plan_find(
						oldx->st, oldx->nstreams, c) :
					-1;
		sub_ctx_free(x);
		return;
	}
	old = s->sub;
	s->sub = nsub;
	s->sub_ctx = x;
	s->last_resync = weft_now_ns();
	if (old)
		weft_probe_unsubscribe(old); /* no callback of it after this */
	sub_ctx_free(oldx);
	pthread_mutex_lock(&s->stat_lock);
	s->st.subscribed = 1;
	pthread_mutex_unlock(&s->stat_lock);
}

static void deliver_list(weft_server_t *s, struct item *list, uint64_t du,
			 uint64_t de)
{
	bool was = s->delivering;

	/*
	 * The total of all output, once for the whole list and added to as
	 * it is queued (counting it a send was a walk of every client for
	 * every record to every client).  Output only drains meanwhile, so
	 * the count errs high, never low.
	 */
	s->out_total = weft__server_total_buffered(s);
	s->delivering = true;
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
		it->refs = 1; /* this loop's, dropped after it */
		for (struct client *c = s->clients; c; c = c->next) {
			if (!c->subscribed || c->stream != (int)it->stream)
				continue;
			if (it->kind == ITEM_UPDATE) {
				weft__server_client_send_update(c, it);
			} else if (c->want_events && !c->paused &&
				   !weft__server_client_send_item(c, it)) {
				c->events_not_sent += it->nevents;
			}
		}
		weft__server_item_unref(NULL, 0, it);
	}
	s->delivering = was;
}

void weft__server_deliver(weft_server_t *s)
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
	weft__server_sweep(s); /* those dropped over the budget */
}
