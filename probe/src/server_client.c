/* SPDX-License-Identifier: MIT */
/*
 * The server's clients: a connection accepted, its requests (subscribe,
 * pause and resume, a task's details, the flight recorder's snapshot)
 * carried out, its output held to its bound, and its close.
 * server_input.c turns its bytes into requests.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "collector.h"
#include "recorder_internal.h"
#include "server_state_internal.h"

/*
 * Clients at once, per listener, so that TCP peers (anyone who can reach
 * the address) never lock the owner out of the unix socket: 128 over
 * TCP, 256 on the unix socket, of which the last OWNER_SLOTS take only
 * the process's own uid (root's tools cannot take them all either).
 * What they can hold is bounded apart (total_max, REQUEST_MAX, the
 * timeouts), not by their number.
 */
#define MAX_TCP_CLIENTS 128
#define MAX_UNIX_CLIENTS 256
#define OWNER_SLOTS 8
/*
 * TCP connections still to send their token: at most this many, the
 * oldest closed for a newer one, so that peers who connect and say
 * nothing cannot hold the TCP slots against those who have the token
 * (each would otherwise keep one for handshake_ms).
 */
#define MAX_TCP_PENDING 16
/*
 * A client's requests are small (a subscription with its filter, a task
 * id): their records are bounded far below what the server sends, so a
 * peer cannot make it hold WEFT_WIRE_MAX_RECORD a connection by sending
 * all of one but its last byte.
 */
#define REQUEST_MAX (64u << 10)

static void stat_buffered(weft_server_t *s, size_t have)
{
	pthread_mutex_lock(&s->stat_lock);
	if (have > s->st.max_client_buffered)
		s->st.max_client_buffered = have;
	pthread_mutex_unlock(&s->stat_lock);
}

void weft__server_client_close(struct client *c, const char *why, bool bad)
{
	weft_server_t *s = c->srv;
	struct client **pp;
	unsigned more;

	/* A flood of bad peers would write a line each. */
	if (why && weft__ratelimit(&s->close_rl, &more)) {
		if (more)
			weft__server_log("closing %s: %s (and %u others "
					 "closed since the last line)",
					 c->peer, why, more);
		else
			weft__server_log("closing %s: %s", c->peer, why);
	}
	for (pp = &s->clients; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	s->nclients--;
	if (c->tcp)
		s->nclients_tcp--;
	bufferevent_free(c->bev);
	weft_wire_decoder_fini(&c->dec);
	weft__delta_filter_fini(&c->filter);
	pthread_mutex_lock(&s->stat_lock);
	s->st.clients = s->nclients;
	if (bad)
		s->st.closed_bad++;
	pthread_mutex_unlock(&s->stat_lock);
	free(c);
	weft__server_sub_reconcile(s, false);
	/* It may have been the last to take a backlog: the collector
	 * stops it (server_backlog.c). */
	weft__server_stream_have(s);
}

/*
 * To be closed by weft__server_sweep(): from here on it is sent nothing,
 * and what it has waiting is freed now, not at the sweep (one delivery
 * may drop many clients in turn, and their buffers together would pass
 * the budget they were dropped for).
 */
void weft__server_client_drop(struct client *c, const char *why)
{
	struct evbuffer *out = bufferevent_get_output(c->bev);
	weft_server_t *s = c->srv;
	size_t have = evbuffer_get_length(out);

	if (c->drop_why)
		return;
	if (s->delivering)
		s->out_total -= have;
	evbuffer_drain(out, have);
	c->drop_why = why;
}

/* Closes the clients dropped meanwhile.  Server thread, outside any walk
 * of the clients (a close may deliver, and drop others: start again). */
void weft__server_sweep(weft_server_t *s)
{
	struct client *c;

	do {
		for (c = s->clients; c && !c->drop_why; c = c->next)
			;
		if (c)
			weft__server_client_close(c, c->drop_why, false);
	} while (c);
}

/* What every client's output holds together (the dropped left out). */
size_t weft__server_total_buffered(const weft_server_t *s)
{
	size_t total = 0;

	for (const struct client *c = s->clients; c; c = c->next)
		if (!c->drop_why)
			total += evbuffer_get_length(
				bufferevent_get_output(c->bev));
	return total;
}

/*
 * All output together would pass total_max with @len more: the clients
 * with the largest backlogs (the slowest readers) are dropped until it
 * fits, since one that is far behind costs the most and is the least
 * served by what it has waiting.  Return: whether @c may still queue
 * @len (false if @c was the slowest, or @len alone is too much).
 */
static bool budget_make_room(struct client *c, size_t total, size_t len)
{
	weft_server_t *s = c->srv;
	/*
	 * A record larger than the whole budget (a small
	 * WEFT_CONSOLE_BUFFER_MB, a 4 MiB full update) goes in once the
	 * others hold at most half of it, as over a client's own bound:
	 * dropping everyone could never make room for it.
	 */
	size_t room = len > s->total_max ? s->total_max / 2 :
					   s->total_max - len;

	while (total > room) {
		struct client *worst = NULL;
		size_t most = 0;

		for (struct client *o = s->clients; o; o = o->next) {
			size_t h;

			if (o->drop_why)
				continue;
			h = evbuffer_get_length(bufferevent_get_output(o->bev));
			if (h > most) {
				most = h;
				worst = o;
			}
		}
		if (!worst)
			return false; /* nothing held: @len alone is over */
		pthread_mutex_lock(&s->stat_lock);
		s->st.kicked++;
		s->st.over_budget++;
		pthread_mutex_unlock(&s->stat_lock);
		weft__server_client_drop(
			worst, "the largest backlog while all clients' output "
			       "is over its budget (WEFT_CONSOLE_BUFFER_MB)");
		total -= most;
		if (worst == c)
			return false;
	}
	return true;
}

/*
 * Events for a client that is behind are not sent: counted as not sent,
 * as those over the bound are.  Its output bound (8 MiB) is seconds of
 * reading for a console on a saturated host, and its updates queue
 * behind the events: a console attached to a busy-waiting task (24 M
 * events a second) showed the state of its first 130 ms for the next
 * 1.5 s and more, while the collector published on time.
 *
 * Behind: its oldest byte not read was queued over EVENTS_STALE_NS ago
 * (a reader that keeps up, however much one delivery queues, has read
 * all but the newest), and what waits would take it over EVENTS_LAG_NS
 * at the pace it read at while behind (srv_tick_cb()).  That pace not
 * known (a new subscriber, whose first deliveries can queue 8 MiB before
 * a tick; a reader never behind for a whole tick), over
 * EVENTS_UNKNOWN_MAX waiting: a delivery of more than that is 170,000
 * events or more, past what a console decodes in the time it has.
 * Under EVENTS_LAG_MIN waiting they go regardless.
 */
#define EVENTS_STALE_NS 50000000ull
#define EVENTS_LAG_NS 250000000ull
#define EVENTS_LAG_MIN ((size_t)256 << 10)
#define EVENTS_UNKNOWN_MAX ((size_t)1 << 20)

/* Drops @c's marks of bytes it has read (@have of them wait). */
static void lag_read(struct client *c, size_t have)
{
	uint64_t read = c->queued - have;

	while (c->lag_n && c->lag[c->lag_head].total <= read) {
		c->lag_head = (c->lag_head + 1) % LAG_MARKS;
		c->lag_n--;
	}
}

/* @len bytes queued for @c at @now (@have waited before them). */
static void lag_note(struct client *c, size_t have, size_t len, uint64_t now)
{
	struct lag_mark *last;

	lag_read(c, have);
	c->queued += len;
	if (c->lag_n) {
		last = &c->lag[(c->lag_head + c->lag_n - 1) % LAG_MARKS];
		/* The window goes on; or all marks in use: the last one
		 * grows (its start stays, so its bytes seem older). */
		if (now - last->at < LAG_MARK_NS || c->lag_n == LAG_MARKS) {
			last->total = c->queued;
			return;
		}
	}
	c->lag[(c->lag_head + c->lag_n++) % LAG_MARKS] =
		(struct lag_mark){ .total = c->queued, .at = now };
}

static bool events_behind(struct client *c, size_t len)
{
	size_t have = evbuffer_get_length(bufferevent_get_output(c->bev));
	uint64_t now;

	lag_read(c, have);
	if (have + len <= EVENTS_LAG_MIN)
		return false;
	now = weft_now_ns();
	if (!c->drain_bps)
		return have + len > EVENTS_UNKNOWN_MAX;
	if (!c->lag_n || now - c->lag[c->lag_head].at <= EVENTS_STALE_NS)
		return false;
	/* have is under the output bounds (GiBs at most): no overflow. */
	return (uint64_t)(have + len) * 1000000000u / c->drain_bps >
	       EVENTS_LAG_NS;
}

/*
 * Queues @data for @c if it fits its bound and the bound of all clients
 * together.  A full update larger than the bound itself goes in while at
 * most half the bound is queued (otherwise a client of a process with
 * very many tasks could never get one): the bound is then that one
 * update and half the bound.
 * Return: true if queued.
 */
static bool client_send_ex(struct client *c, const void *data, size_t len,
			   bool bounded, bool full, struct item *ref)
{
	struct evbuffer *out = bufferevent_get_output(c->bev);
	size_t have = evbuffer_get_length(out), total = 0;
	bool over = false;

	if (c->drop_why)
		return false;
	/*
	 * The client's own bound first: others are never dropped to make
	 * room for a record that would not be queued anyway.
	 */
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
				c->behind_since = weft_now_ns();
			return false;
		}
	}
	/*
	 * The bound over all clients: each may hold buf_max, but not all
	 * at once (200 clients that stop reading would hold 1.6 GiB).
	 */
	if (bounded) {
		total = c->srv->delivering ?
				c->srv->out_total :
				weft__server_total_buffered(c->srv);
		if (total + len > c->srv->total_max) {
			if (!budget_make_room(c, total, len)) {
				if (!c->drop_why && !c->behind_since)
					c->behind_since = weft_now_ns();
				return false;
			}
			total = c->srv->delivering ?
					c->srv->out_total :
					weft__server_total_buffered(c->srv);
		}
	}
	/* A delivered record is held by reference, shared by its clients. */
	if (ref) {
		if (evbuffer_add_reference(out, data, len,
					   weft__server_item_unref, ref))
			return false;
		ref->refs++;
	} else if (evbuffer_add(out, data, len)) {
		return false;
	}
	c->added += len;
	lag_note(c, have, len, weft_now_ns());
	if (c->srv->delivering)
		c->srv->out_total += len;
	stat_buffered(c->srv, have + len);
	if (bounded) {
		pthread_mutex_lock(&c->srv->stat_lock);
		if (total + len > c->srv->st.max_total_buffered)
			c->srv->st.max_total_buffered = total + len;
		pthread_mutex_unlock(&c->srv->stat_lock);
	}
	if (over) {
		pthread_mutex_lock(&c->srv->stat_lock);
		if (len > c->srv->st.max_full_over_bound)
			c->srv->st.max_full_over_bound = len;
		pthread_mutex_unlock(&c->srv->stat_lock);
	}
	return true;
}

bool weft__server_client_send(struct client *c, const void *data, size_t len,
			      bool bounded)
{
	return client_send_ex(c, data, len, bounded, false, NULL);
}

/* A delivered events record, by reference; bounded.  Return: queued. */
bool weft__server_client_send_item(struct client *c, struct item *it)
{
	if (events_behind(c, it->buf.len))
		return false;
	return client_send_ex(c, it->buf.data, it->buf.len, true, false, it);
}

void weft__server_client_send_update(struct client *c, struct item *it)
{
	weft_wire_buf_t tmp = { 0 };
	bool ok;

	if (!c->want_updates || (c->need_full && !it->full))
		return;
	/* Another client's resync: its full record, or its backlog. */
	if (it->gen && (it->full ? !c->need_full : c->resync_gen != it->gen))
		return;
	if (!c->updates_skipped && !c->events_not_sent) {
		ok = client_send_ex(c, it->buf.data, it->buf.len, true,
				    it->full, it);
	} else if (weft_wire_update_recount(&tmp, it->buf.data, it->buf.len,
					    c->updates_skipped,
					    c->events_not_sent)) {
		ok = false;
	} else {
		ok = client_send_ex(c, tmp.data, tmp.len, true, it->full, NULL);
	}
	weft_wire_buf_fini(&tmp);
	if (ok) {
		if (it->full) {
			c->need_full = false;
			c->resync_asked = false;
			c->resync_gen = it->gen;
		}
		return;
	}
	/* Skipped: what changed in it is lost, so a full one is due (asked
	 * again on the tick: meanwhile it holds nobody's backlog). */
	c->updates_skipped++;
	c->need_full = true;
	c->resync_asked = false;
	pthread_mutex_lock(&c->srv->stat_lock);
	c->srv->st.updates_skipped++;
	pthread_mutex_unlock(&c->srv->stat_lock);
}

struct detail {
	weft_wire_buf_t b;
	int err;
};

/* Under probe.lock: the record is valid only until it is released. */
static void detail_encode(const weft_probe_task_t *t, void *arg)
{
	struct detail *d = arg;
	const weft_probe_task_t *tp[1] = { t };
	weft_probe_update_t u = { .tasks = tp, .ntasks = t ? 1 : 0 };

	d->err = weft_wire_update_append(&d->b, &u, 0);
}

/* The reply to CONTROL_OP_TASK_DETAIL: an Update holding that task. */
static void task_detail(struct client *c, uint64_t id)
{
	struct detail d = { { 0 }, 0 };

	/* Lock order: probe.lock alone (we hold none of ours). */
	weft__probe_with_task(id, detail_encode, &d);
	if (!d.err)
		(void)weft__server_client_send(c, d.b.data, d.b.len, false);
	weft_wire_buf_fini(&d.b);
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
		(void)weft__server_client_send(c, b.data, b.len, false);
	if (!weft_wire_record_append(&end, &f))
		(void)weft__server_client_send(c, end.data, end.len, false);
	weft_wire_buf_fini(&b);
	weft_wire_buf_fini(&end);
}

/*
 * A Subscribe (again, possibly: the last one counts).  Clients with the
 * same interval and filter share a stream; a client that would make more
 * than MAX_STREAMS distinct ones is refused.
 * Return: 0, or the reason to close the connection.
 */
/*
 * Requests that cost more than their bytes (a subscription made or
 * changed, events paused or resumed, a flight snapshot: a new plan, a
 * full update, megabytes out), a client's share of them: DEAR_BURST at
 * once, then one every DEAR_EVERY_NS (a generic cell rate: dear_tat is
 * when the client's bucket is next empty).  A console subscribes once a
 * connection; a peer asking more often is closed, with the reason.
 */
#define DEAR_BURST 10u
#define DEAR_EVERY_NS 500000000ull

/*
 * Whether @r is one of those: a subscription that changes what @c asks
 * (the same again asks only for a full update, which the server paces
 * for all: weft-trace record does so at each checkpoint, and at a small
 * --checkpoint-every, often), a pause or resume that changes its state,
 * a snapshot.
 */
static bool dear_request(const struct client *c, const weft_server_request_t *r)
{
	switch (r->op) {
	case WEFT_SERVER_REQ_SUBSCRIBE:
		return !c->subscribed || c->want_updates != r->updates ||
		       c->want_events != r->events ||
		       c->interval_ms != r->interval_ms ||
		       !weft__delta_filter_equal(&c->filter, &r->filter);
	case WEFT_SERVER_REQ_PAUSE:
		return !c->paused;
	case WEFT_SERVER_REQ_RESUME:
		return c->paused;
	case WEFT_SERVER_REQ_SNAPSHOT:
		return true;
	default:
		return false;
	}
}

static bool dear_request_fits(struct client *c)
{
	uint64_t now = weft_now_ns();
	uint64_t tat = c->dear_tat > now ? c->dear_tat : now;

	if (tat - now > (DEAR_BURST - 1) * DEAR_EVERY_NS)
		return false;
	c->dear_tat = tat + DEAR_EVERY_NS;
	return true;
}

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
		if (o == c || !weft__server_client_active(o) ||
		    weft__server_plan_find(plan, n, o) >= 0)
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
	/*
	 * Its first update is full: a new subscription's, when the streams
	 * change; else one of its own (a resync), while the other clients
	 * of its stream go on with their deltas.
	 */
	if (!weft__server_sub_reconcile(s, false) && c->need_full)
		(void)weft__server_resync(s, c);
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
		if (o != c && weft__server_client_active(o) &&
		    o->interval_ms == c->interval_ms &&
		    weft__delta_filter_equal(&o->filter, &c->filter))
			return true;
	memset(plan, 0, sizeof(plan));
	for (struct client *o = c->srv->clients; o; o = o->next) {
		if (o == c || !weft__server_client_active(o) ||
		    weft__server_plan_find(plan, n, o) >= 0)
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

	if (!c->authed) {
		/*
		 * TCP, nothing sent yet: the first record must be a Hello
		 * holding the token, or the connection closes with no byte
		 * having left (the header goes out only now).
		 */
		const char *why = r->op != WEFT_SERVER_REQ_HELLO ?
					  "sent no token" :
				  !weft__server_token_equal(s->token, r->token,
							    r->token_len) ?
					  "wrong token" :
					  NULL;

		if (why) {
			pthread_mutex_lock(&s->stat_lock);
			s->st.auth_failed++;
			pthread_mutex_unlock(&s->stat_lock);
			return why;
		}
		c->authed = true;
		c->spoke = true;
		(void)weft__server_client_send(c, s->header.data, s->header.len,
					       false);
		return NULL;
	}
	c->spoke = true;
	if (dear_request(c, r) && !dear_request_fits(c))
		return "changes its subscription or asks for snapshots too "
		       "often (10 at once, then 2 a second)";
	switch (r->op) {
	case WEFT_SERVER_REQ_HELLO:
		return NULL; /* a unix client's, or again: nothing to do */
	case WEFT_SERVER_REQ_SUBSCRIBE:
		return client_subscribe(c, r);
	case WEFT_SERVER_REQ_PAUSE:
		c->paused = true;
		weft__server_sub_reconcile(s, false);
		return NULL;
	case WEFT_SERVER_REQ_RESUME:
		if (c->paused && !resume_fits(c))
			return "too many different subscriptions (interval, "
			       "filter)";
		c->paused = false;
		weft__server_sub_reconcile(s, false);
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
			weft__server_client_close(c, why, true);
			return;
		}
		evbuffer_drain(in, used);
	}
	/* The decoder holds what is unfinished: timed by srv_tick_cb(). */
	if (!weft_wire_decoder_mid_record(&c->dec))
		c->partial_since = 0;
	else if (!c->partial_since)
		c->partial_since = weft_now_ns();
}

/* Its output drained: a streamed full update may go on (server_stream.c). */
static void client_write_cb(struct bufferevent *bev, void *arg)
{
	struct client *c = arg;

	(void)bev;
	c->emptied_at = weft_now_ns();
	if (c->subscribed && c->want_updates)
		weft__server_stream_have(c->srv);
}

static void client_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct client *c = arg;

	(void)bev;
	if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)))
		return;
	if (weft_wire_decoder_mid_record(&c->dec))
		weft__server_client_close(
			c, "disconnected in the middle of a record", true);
	else
		weft__server_client_close(c, NULL, false);
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

/*
 * A unix socket peer's uid, from the kernel's credentials of the
 * connecting process (SO_PEERCRED); (uid_t)-1 if not known.  Only the
 * process's owner (its effective uid) or root may attach: the socket's
 * directory is the owner's, mode 0700, already; this holds where an
 * administrator chose a path elsewhere, or opened the directory.
 */
static uid_t peer_uid(evutil_socket_t fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) ||
	    len != sizeof(cred))
		return (uid_t)-1;
	return cred.uid;
}

/* A refused connection: said once a second at most, with a count. */
static void refused(weft_server_t *s, const char *who, const char *why)
{
	unsigned more;

	pthread_mutex_lock(&s->stat_lock);
	s->st.refused++;
	pthread_mutex_unlock(&s->stat_lock);
	if (!weft__ratelimit(&s->refused_rl, &more))
		return;
	if (more)
		weft__server_log("refusing %s: %s (and %u others refused "
				 "since the last line)",
				 who, why, more);
	else
		weft__server_log("refusing %s: %s", who, why);
}

/*
 * Before a TCP accept: if MAX_TCP_PENDING connections are still to send
 * their token, or the TCP slots are full and some of them are, the
 * oldest of those goes (see MAX_TCP_PENDING).
 */
static void tcp_make_room(weft_server_t *s)
{
	struct client *oldest = NULL;
	unsigned pending = 0;

	for (struct client *o = s->clients; o; o = o->next) {
		if (!o->tcp || o->authed || o->drop_why)
			continue;
		pending++;
		if (!oldest || o->accepted_ns < oldest->accepted_ns)
			oldest = o;
	}
	if (oldest &&
	    (pending >= MAX_TCP_PENDING || s->nclients_tcp >= MAX_TCP_CLIENTS))
		weft__server_client_close(oldest,
					  "no token yet, and newer "
					  "connections are waiting",
					  true);
}

void weft__server_accept_cb(struct evconnlistener *l, evutil_socket_t fd,
			    struct sockaddr *sa, int salen, void *arg)
{
	weft_server_t *s = arg;
	bool tcp = sa && sa->sa_family != AF_UNIX;
	unsigned nunix = s->nclients - s->nclients_tcp;
	const char *why = NULL;
	char who[64];
	struct client *c;
	uid_t uid = 0;

	(void)l;
	(void)salen;
	if (tcp) {
		tcp_make_room(s);
		if (s->nclients_tcp >= MAX_TCP_CLIENTS)
			why = "too many TCP clients connected already";
	} else {
		uid = peer_uid(fd);
		if (uid != geteuid() && uid != 0)
			why = "not the process's owner or root";
		else if (nunix >= MAX_UNIX_CLIENTS ||
			 (uid != geteuid() &&
			  nunix >= MAX_UNIX_CLIENTS - OWNER_SLOTS))
			why = "too many unix clients connected already";
	}
	if (why) {
		if (tcp)
			peer_name(who, sizeof(who), sa);
		else
			snprintf(who, sizeof(who), "a unix client of uid %d",
				 (int)uid);
		/* Counted before the close: a peer that sees it closed
		 * finds it in the stats. */
		refused(s, who, why);
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
	c->tcp = tcp;
	c->authed = !tcp;
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
	weft_wire_decoder_init(&c->dec, REQUEST_MAX);
	c->accepted_ns = weft_now_ns();
	bufferevent_setcb(c->bev, client_read_cb, client_write_cb,
			  client_event_cb, c);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	c->next = s->clients;
	s->clients = c;
	s->nclients++;
	if (tcp)
		s->nclients_tcp++;
	/* Over TCP, nothing before the token (client_request()). */
	if (c->authed)
		(void)weft__server_client_send(c, s->header.data, s->header.len,
					       false);
	pthread_mutex_lock(&s->stat_lock);
	s->st.accepted++;
	s->st.clients = s->nclients;
	pthread_mutex_unlock(&s->stat_lock);
}
