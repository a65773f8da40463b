/* SPDX-License-Identifier: MIT */
/*
 * The server's collector-side streams: the probe subscription made for
 * what the clients want (one stream per distinct interval and filter),
 * the collector's callbacks that encode each pass into the streams, and
 * the queue that hands the records to the server thread (their delivery
 * to the clients of each stream: server_deliver.c; server.c has the
 * threads and the locks).
 *
 * A subscription is swapped, not edited: a new context (one stream per
 * distinct interval and filter) is made and becomes the active one under
 * qlock (what the old one queued is delivered first, to the clients as
 * they were mapped), the clients are mapped to its streams, then it
 * subscribes (its first update is full, for every client of it), then
 * the old one is dropped; what the old one still encodes is discarded at
 * push.  That happens when the streams change (a client comes with an
 * interval or a filter no stream has, or changes a stream's updates or
 * adds events, or the first wants events or the last no longer); a
 * stream whose clients all left goes alone, a pause keeps (plan_fits());
 * one that joins a stream, or skipped, gets a full update (below).
 *
 * A full update of many tasks is streamed, not sent whole (issue 21: a
 * console attaching to a process of 1,000,000 tasks waited for a
 * 130 MB update, encoded in one pass, before it could draw anything).
 * Its first record is what a view needs first: the stats, workers,
 * warnings and resources, full set, and the STREAM_FIRST tasks of lowest
 * id (the Tasks view's default order).  The other tasks' ids are kept
 * and sent in records of at most STREAM_CHUNK tasks, each no larger than
 * the room (below), over the next passes, each
 * task as the collector knows it when its record is made (looked up by
 * id).  Those that had finished at the full pass come first, ascending,
 * then the live ones, ascending: a finished task changes no more, so no
 * delta will name it again, and only its backlog record tells a reader
 * that merges (the console keeps what it had: it may hold the task live
 * from before a resync) that it finished; and the collector forgets it
 * retain_ns after it finished, or sooner when more than retain_max are
 * kept, while the backlog of 1,000,000 tasks takes seconds.  One
 * forgotten before its record is made goes as a tombstone: its id, done,
 * and the finished_ns the full pass had.  A live one forgotten since
 * finished after the full pass: that change was the delta's to send
 * (with its name: the delta knows only the first record's tasks).  The
 * pace is the slowest client's: a pass adds records only while the
 * output the stream's clients hold (stream_have, as the server thread
 * last saw it, plus what it took from the queue since: never a stale
 * zero; a client waiting for a full update counts only while the
 * subscription's first is to come or a resync was asked for it) and the
 * queue stay under half a client's bound, and at
 * most STREAM_PASS_MAX bytes; so a slow console slows its own stream,
 * never the collector, and its buffer stays in its bound (the records
 * are updates like any other: one that does not fit is skipped and a
 * full one is due, as before).  Updates made meanwhile go in the same
 * queue, in order, so a reader that applies records in order ends with
 * every task's latest state: a task changed before its backlog record
 * comes gets a delta first (with its name: the delta knows only the
 * first record's tasks), then the backlog's later copy.
 *
 * A client owed a full update later (it skipped updates, or subscribed
 * to a stream under way) gets one of its own, not a new subscription
 * (which restarted every client's stream: review item M1 of issue 21).
 * weft__server_resync() marks its stream and asks the collector for a
 * full pass; srv_on_update() makes the full update through a delta of
 * its own, streamed as above, its records tagged with a new gen (the
 * first goes to the clients waiting for a full update, the rest to
 * those that took it), then a record of the same gen with the warnings
 * kept, then the pass's changes as the stream's own record, for every
 * client.  The stream's delta sends names again from then on (the
 * backlog names tasks to the new clients later than the delta did to
 * the others), and its next record comes an interval after the full
 * update, not sooner: a client that took the full update sees no update
 * sooner than its interval after it (the others' next one comes up to an
 * interval later than it would have).  A stream has one backlog at a
 * time: a resync waits while one is under way, and the backlog's end
 * asks for the full pass; the subscription's first full update cancels
 * the resyncs asked before it (every client takes that one).  A
 * resync's record dropped on the way makes only the clients that took
 * its full record owed one again.
 *
 * Neither is made for nobody (a peer could otherwise make the collector
 * encode records nobody takes: seconds of them at 1,000,000 tasks).  A
 * backlog no client of the stream takes any more, nor will (they left,
 * or skipped and are owed another), stops, and a resync put off for it
 * goes on as at its end; the server thread tells the collector who
 * takes which gen in stream_have() (the argument is there).  A resync
 * whose clients all took another full update meanwhile, or left, makes
 * no full update: the collector asks the server thread's word, owed,
 * where it would make it (resync_take()) and at a backlog's end.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
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

/* Collector thread, probe.lock held: hand @it to the server thread.
 * Returns whether it was queued (else it is freed, and counted dropped
 * or discarded). */
bool weft__server_push(struct sub_ctx *x, struct item *it)
{
	bool queued;
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
		if (it->kind == ITEM_UPDATE && it->gen)
			s->drop_gen[it->stream] = it->gen;
		else if (it->kind == ITEM_UPDATE)
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
		/* A resync's full record (a gen of its own: stream_resync()),
		 * counted once queued, before a client can have it. */
		if (it->kind == ITEM_UPDATE && it->full && it->gen)
			s->resync_fulls++;
		it = NULL;
	}
	pthread_mutex_unlock(&s->qlock);
	queued = !it;
	if (it)
		weft__server_item_free(it);
	if (wake)
		event_active(s->wake_ev, EV_READ, 0);
	return queued;
}

const weft_probe_task_t *weft__server_lookup(uint64_t id)
{
	/* In the collector's callbacks: probe.lock is held. */
	return weft__sub_task(id);
}

/*
 * The tasks of a seed under way (collector_reconcile.c) that stream @k
 * takes in the collector's next pass: each comes as a change, about
 * SEED_TASK_BYTES on the wire, so as many as fit in three quarters of a
 * client's bound beside what its clients hold (as weft__server_backlog_pump() counts
 * it: erring high), the tasks its delta has yet to send and its backlog.
 * Without it, a console behind on a seed of a million tasks (32 MB a
 * second) had updates skipped, and took a full update again.  (Half the
 * bound, as the backlog has, left the console idle: the output counts
 * until it has drained whole, and the delta sends at its interval; a
 * million tasks took 10-12 s, 7.3-11 s with three quarters.)  Collector
 * thread, probe.lock held.
 */
#define SEED_TASK_BYTES 130u

static void seed_room(struct sub_ctx *x, unsigned k)
{
	struct stream *st = &x->st[k];
	weft_server_t *s = x->srv;
	size_t held, limit = s->buf_max / 4 * 3;
	bool retiring;

	if (!st->updates)
		return;
	pthread_mutex_lock(&s->qlock);
	retiring = s->active != x;
	held = retiring ? 0 : s->stream_have[k] + s->qbytes;
	pthread_mutex_unlock(&s->qlock);
	/* A subscription being swapped out says nothing: its successor's
	 * streams will (room 0 here paused the seed at every subscribe). */
	if (retiring)
		return;
	held += (st->delta.dirty.n + st->nbacklog - st->backlog_at) *
		SEED_TASK_BYTES;
	weft__sub_seed_room(held < limit ? (limit - held) / SEED_TASK_BYTES :
					   0);
}

/*
 * Server thread: the most output each stream's clients hold, for
 * weft__server_backlog_pump().  A client waiting for a full update takes no backlog
 * record: it does not count, unless @waiting (the subscription's own
 * full update is to come: it is theirs, and its backlog too).
 *
 * With it, in the same walk, what the collector needs to stop a backlog
 * nobody takes and to skip a resync nobody needs (server_backlog.c):
 * for the gen of each stream's backlog (bl_gen, which the collector set
 * when it started it), whether a client of the stream takes its
 * records (bl_keep), and whether one is owed a full update (owed).
 * Read under qlock first, stored under qlock after (the collector never
 * waits for a walk).  The answer is for the gen read (bl_keep_gen): a
 * backlog started meanwhile has another gen, and the collector keeps it
 * until it has an answer for it.  It can only err towards keeping: a
 * client takes records of gen G only if it took G's full record, which
 * is delivered once: once it was (full_gen), who did not take it never
 * will; before, any client of the stream may (it counts).  A client
 * that comes to a stream after the walk and takes the full record of a
 * backlog stopped meanwhile is made owed a full update again by the
 * next delivery (bl_stopped).  owed is stored before any resync is
 * marked (weft__server_resync() walks, then sets resync_want under
 * qlock): the collector that sees a resync wanted sees the owed that
 * asked for it, or a later one.
 */
static void stream_have(weft_server_t *s, bool waiting)
{
	size_t have[MAX_STREAMS] = { 0 };
	uint64_t gen[MAX_STREAMS];
	bool keep[MAX_STREAMS] = { false }, owed[MAX_STREAMS] = { false };

	pthread_mutex_lock(&s->qlock);
	memcpy(gen, s->bl_gen, sizeof(gen));
	pthread_mutex_unlock(&s->qlock);
	for (struct client *c = s->clients; c; c = c->next) {
		unsigned k;
		size_t n;

		if (c->stream < 0 || c->stream >= MAX_STREAMS ||
		    !c->subscribed || !c->want_updates)
			continue;
		k = (unsigned)c->stream;
		owed[k] |= c->need_full;
		/* As weft__server_client_send_update() hands records of a
		 * gen: the full one to those waiting (the subscription's,
		 * gen 0, to all), the rest to those that took it. */
		keep[k] |= s->full_gen[k] != gen[k] ||
			   (!c->need_full &&
			    (gen[k] == 0 || c->resync_gen == gen[k]));
		if (c->need_full && !waiting && !c->resync_asked)
			continue;
		n = evbuffer_get_length(bufferevent_get_output(c->bev));
		if (n > have[k])
			have[k] = n;
	}
	/* Under qlock: weft__server_backlog_pump() reads it under qlock too, with
	 * qbytes, on the collector thread. */
	pthread_mutex_lock(&s->qlock);
	memcpy(s->stream_have, have, sizeof(have));
	memcpy(s->bl_keep_gen, gen, sizeof(gen));
	memcpy(s->bl_keep, keep, sizeof(keep));
	memcpy(s->owed, owed, sizeof(owed));
	pthread_mutex_unlock(&s->qlock);
}

/* After each delivery, on the tick, and when a client's output has
 * drained. */
void weft__server_stream_have(weft_server_t *s)
{
	stream_have(s, s->full_pending);
}

/*
 * One pass @u through delta @d of @x's stream @k (the stream's own, or a
 * resync's), its record pushed for the clients of @gen (0: all of them);
 * a full pass of many tasks streamed (its backlog carries @gen too).
 */
static void stream_update(struct sub_ctx *x, unsigned k, weft_delta_t *d,
			  const weft_probe_update_t *u, uint64_t gen)
{
	struct stream *st = &x->st[k];
	const weft_probe_task_t **page = NULL;
	size_t npage = 0;
	struct item *it;
	bool full, streamed = false;
	int rc;

	it = calloc(1, sizeof(*it));
	if (!it)
		return;
	it->kind = ITEM_UPDATE;
	it->stream = k;
	it->gen = gen;
	/* Its records shared with the other streams and the recorder
	 * (delta.c); the bytes are copied into the item: the server thread
	 * owns them, the memo stays the collector's. */
	d->pass_seq = weft__sub_publish_seq();
	if (u->full && u->ntasks > STREAM_MIN && !d->filter.ntasks &&
	    weft__server_stream_start(st, u, &page, &npage)) {
		weft_probe_update_t first = *u;

		streamed = true;
		st->backlog_gen = gen;
		/* For the server thread's walk (stream_have()): who takes it. */
		pthread_mutex_lock(&x->srv->qlock);
		if (x->srv->active == x)
			x->srv->bl_gen[k] = gen;
		pthread_mutex_unlock(&x->srv->qlock);
		first.tasks = page;
		first.ntasks = npage;
		rc = weft__delta_pass(d, &first, &it->buf, &full);
	} else {
		if (u->full)
			weft__server_backlog_free(st); /* a new full one */
		rc = weft__delta_pass(d, u, &it->buf, &full);
	}
	if (rc < 0 && !gen) {
		/* No memory, or too big: the clients see it as skipped (a
		 * resync's: its clients are still owed one, and asked again
		 * on the server's tick). */
		pthread_mutex_lock(&x->srv->qlock);
		x->srv->drop_updates++;
		pthread_mutex_unlock(&x->srv->qlock);
	}
	/*
	 * A backlog is the rest of a first record that went: without it
	 * (failed, or dropped at push), the clients are owed a full update
	 * (counted dropped) and its records would only be skipped by them.
	 */
	if (rc <= 0) {
		weft__server_item_free(it);
		if (streamed)
			weft__server_backlog_free(st);
		return;
	}
	it->full = full;
	if (!weft__server_push(x, it) && streamed)
		weft__server_backlog_free(st);
}

/*
 * Whether stream @k has a client owed a full update, taken (cleared) if
 * so.  Not while a full update's backlog is under way on it: it would
 * replace that backlog, which other clients are still taking; the
 * server asks again (srv_tick_cb) once it is over.  Not if none of its
 * clients is owed one any more (they took another full update since it
 * was asked, or left): a full update nobody takes (cleared too).
 */
static bool resync_take(struct sub_ctx *x, unsigned k)
{
	struct stream *st = &x->st[k];
	bool want;

	pthread_mutex_lock(&x->srv->qlock);
	if (!weft__server_owed(x, k))
		st->resync_want = false;
	want = st->resync_want && !st->backlog;
	if (want)
		st->resync_want = false;
	pthread_mutex_unlock(&x->srv->qlock);
	return want;
}

/*
 * A full update for the clients of stream @k owed one (they skipped
 * updates, or joined the stream under way), made through a delta of its
 * own, with a new gen: only the clients waiting for a full update take
 * its first record, and only those that took it its backlog and the
 * warnings kept (as a new subscriber gets them), in a record of the same
 * gen.  The stream's delta goes on for everyone, but sends names again
 * (weft__delta_forget()): it had named tasks to the others that the
 * backlog names to these later, or never (one live at the full pass and
 * forgotten before its backlog record, which its delta tells).  The
 * pass's warnings are left out of the full record: the stream's own
 * records carry them, which these clients take from now on.
 */
static void stream_resync(struct sub_ctx *x, unsigned k,
			  const weft_probe_update_t *u)
{
	struct stream *st = &x->st[k];
	weft_probe_update_t f = *u;
	weft_probe_warning_t *kept;
	weft_delta_t d;
	uint64_t gen, cut;

	weft__delta_init(&d);
	d.interval_ns = st->delta.interval_ns;
	d.max_record = st->delta.max_record;
	d.lookup = st->delta.lookup;
	d.lookup_ahead = st->delta.lookup_ahead;
	d.site = st->delta.site;
	d.await_site = st->delta.await_site;
	d.await_known = st->delta.await_known;
	if (weft__delta_filter_copy(&d.filter, &st->delta.filter)) {
		/* No memory: the clients stay owed one; the server asks
		 * again. */
		weft__delta_fini(&d);
		return;
	}
	weft__delta_forget(&st->delta);
	f.warnings = NULL;
	f.nwarnings = 0;
	gen = ++x->gen;
	/* Counted when queued (weft__server_push()): a pass that failed
	 * leaves its clients owed one, asked again on the server's tick. */
	stream_update(x, k, &d, &f, gen);
	weft__delta_fini(&d);

	/*
	 * The warnings kept, for the clients that took it, up to the first
	 * the stream has yet to send (its own records bring those, to them
	 * too: sent twice, the second copy was listed again).
	 */
	/* Warnings alone: no stats, no workers (a record with stats is a
	 * pass's update, which a reader may time: it would come at the
	 * full one's time, not an interval after it). */
	f = (weft_probe_update_t){ 0 };
	f.warnings = kept = weft__sub_warnings_kept(&f.nwarnings);
	cut = st->delta.nwarn ? st->delta.warn[0].seq : UINT64_MAX;
	if (u->nwarnings && u->warnings[0].seq < cut)
		cut = u->warnings[0].seq;
	while (f.nwarnings && kept[f.nwarnings - 1].seq >= cut)
		f.nwarnings--;
	if (f.nwarnings) {
		weft__delta_init(&d);
		d.max_record = st->delta.max_record;
		d.lookup = st->delta.lookup;
		d.site = st->delta.site;
		if (!weft__delta_filter_copy(&d.filter, &st->delta.filter))
			stream_update(x, k, &d, &f, gen);
		weft__delta_fini(&d);
	}
	free(kept);
}

static void srv_on_update(void *ctx, const weft_probe_update_t *u)
{
	struct sub_ctx *x = ctx;
	/*
	 * A full pass after the subscription's first: some clients are
	 * owed a full update (weft__server_resync()).  Every other client
	 * takes the pass as a delta, its changes only: a console that
	 * skipped no longer restarts everyone's stream (at 1,000,000 tasks,
	 * a full update streamed for seconds to every console).
	 */
	bool resync = u->full && x->had_full;
	/* Acquire: pairs with weft__server_destroy()'s release. */
	bool final = atomic_load_explicit(&x->srv->final, memory_order_acquire);
	weft_probe_update_t delta;

	if (u->full && !x->had_full) {
		/* Its first: every client of it takes it, those that asked
		 * for one of their own meanwhile too. */
		pthread_mutex_lock(&x->srv->qlock);
		for (unsigned k = 0; k < x->nstreams; k++)
			x->st[k].resync_want = false;
		pthread_mutex_unlock(&x->srv->qlock);
		x->had_full = true;
	}
	if (resync) {
		delta = *u;
		delta.full = false;
		weft__sub_pass_changes(&delta.tasks, &delta.ntasks,
				       &delta.resources, &delta.nresources);
	}
	for (unsigned k = 0; k < x->nstreams; k++) {
		struct stream *st = &x->st[k];

		if (!st->updates || weft__server_stream_gone(st))
			continue;
		if (final)
			st->delta.final = true;
		/* The full record first: its clients take the pass's own
		 * record after it (its warnings, and the delta's pending). */
		if (resync && resync_take(x, k)) {
			stream_resync(x, k, u);
			stream_update(x, k, &st->delta, &delta, 0);
			/*
			 * The stream's next record an interval after the full
			 * one at least, as after a subscription's first: its
			 * clients see no update sooner than their interval
			 * after it (the others' next one comes up to an
			 * interval later than it would have; never sooner).
			 */
			if (u->stats && st->delta.emitted)
				st->delta.last_emit_ns = u->stats->now_ns;
			continue;
		}
		stream_update(x, k, &st->delta, resync ? &delta : u, 0);
	}
	for (unsigned k = 0; k < x->nstreams; k++) {
		if (weft__server_stream_gone(&x->st[k]))
			continue;
		weft__server_backlog_pump(x, k);
		seed_room(x, k);
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

		if (!st->events || weft__server_stream_gone(st) ||
		    atomic_load_explicit(&st->muted, memory_order_relaxed))
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
		weft__server_push(x, it);
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
		weft__server_backlog_free(&x->st[k]);
		free(x->st[k].chunk);
		free(x->st[k].chunk_end);
		free(x->st[k].tomb);
	}
	free(x);
}

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
	/* @x's streams: no backlog known, nor who takes it; owed until the
	 * server thread has said (stream_have()). */
	for (unsigned k = 0; k < MAX_STREAMS; k++) {
		s->bl_gen[k] = s->bl_keep_gen[k] = GEN_NONE;
		s->owed[k] = true;
		s->bl_stopped[k] = false;
	}
	/*
	 * stream_have is left as it was, the old context's: @x makes no
	 * pass until it subscribes, and the caller computes it for @x's
	 * streams before that, once the clients are mapped to them.
	 * (Zeroed here, @x's first pass pumped 4 MiB of backlog on top of
	 * what the clients still held of the old one.)
	 */
	pthread_mutex_unlock(&s->qlock);
	weft__server_deliver_list(s, list, 0, 0);
	/* After the old context's records: none of @x's delivered yet. */
	for (unsigned k = 0; k < MAX_STREAMS; k++)
		s->full_gen[k] = GEN_NONE;
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

/* The stream of @x, not gone, that @c belongs in, or -1. */
static int live_find(const struct sub_ctx *x, const struct client *c)
{
	int k = weft__server_plan_find(x->st, x->nstreams, c);

	return k >= 0 && !atomic_load_explicit(&x->st[k].gone,
					       memory_order_relaxed) ?
		       k :
		       -1;
}

/*
 * Whether @x serves @plan (@n streams, events @ev) as it is, so that no
 * client restarts: each plan stream one of @x's not gone, with the same
 * updates and events, in any order (the plan's is the clients' list's,
 * newest first, which a client that comes or goes reorders: one joining
 * the older of two streams restarted both), and the events subscribed
 * as @ev says.  @x's streams the plan leaves out (their last client
 * left, or now wants nothing) are then gone: the collector makes
 * nothing more for them (a client that wants one again gets a new
 * subscription: its delta is stale).  A stream whose updates change, or
 * that wants events it was not made with, and events wanted or no
 * longer by anyone, still make a new one.  Server thread.
 */
static bool plan_fits(struct sub_ctx *x, const struct stream *plan, unsigned n,
		      bool ev)
{
	bool used[MAX_STREAMS] = { false }, mute[MAX_STREAMS] = { false };

	if (x->events != ev)
		return false;
	for (unsigned k = 0; k < n; k++) {
		const struct stream *cur = NULL;
		unsigned j;

		for (j = 0; j < x->nstreams && !cur; j++)
			if (!atomic_load_explicit(&x->st[j].gone,
						  memory_order_relaxed) &&
			    x->st[j].interval_ms == plan[k].interval_ms &&
			    weft__delta_filter_equal(&x->st[j].delta.filter,
						     &plan[k].delta.filter))
				cur = &x->st[j];
		/* Events no longer wanted (paused) while others' go on
		 * (@ev): muted, none made for it (queued for nobody, they
		 * crowded the queue); a resume unmutes it. */
		if (!cur || cur->updates != plan[k].updates ||
		    (!cur->events && plan[k].events))
			return false;
		used[j - 1] = true;
		mute[j - 1] = cur->events && !plan[k].events;
	}
	for (unsigned j = 0; j < x->nstreams; j++) {
		if (!used[j])
			atomic_store_explicit(&x->st[j].gone, true,
					      memory_order_relaxed);
		atomic_store_explicit(&x->st[j].muted, mute[j],
				      memory_order_relaxed);
	}
	return true;
}

/*
 * Subscribes to the probe for what the clients want, or not at all: one
 * stream per distinct (interval, filter) among them.  @fresh: make a new
 * subscription even if the current one fits (its first update is full).
 * Returns whether it made one (every client of it takes its first, full,
 * update).  Server thread; holds none of our locks.
 *
 * Paced: a new subscription costs the collector a full pass and every
 * client of it a full update (all the tasks), and the last one's end
 * stops the collector, whose next start reads every live task again.
 * A peer that changed its subscription in every frame (525,050 in 2 s,
 * beside 20,000 tasks) made one each: the collector took 23 times its
 * CPU and the honest console got a full update every 43 ms; one that
 * connects, subscribes and leaves in a loop did the same.  So they are
 * made at most every REPLAN_MIN_NS (200 ms); one asked sooner is left to
 * the tick (weft__server_replan_due()).  A client joining a stream that
 * exists is mapped at once: that costs nothing.
 */
bool weft__server_sub_reconcile(weft_server_t *s, bool fresh)
{
	uint64_t now = weft_now_ns();
	weft_probe_sub_opts_t o = { 0 };
	weft_probe_sub_t *nsub, *old;
	struct sub_ctx *x, *oldx = s->sub_ctx;
	struct stream plan[MAX_STREAMS];
	unsigned n = 0;
	bool ev = false;
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
	if (s->sub && n && !fresh && plan_fits(oldx, plan, n, ev)) {
		/* A client may have joined a stream that exists. */
		for (struct client *c = s->clients; c; c = c->next)
			c->stream = weft__server_client_active(c) ?
					    live_find(oldx, c) :
					    -1;
		return false;
	}
	if (!n && !s->sub)
		return false;
	/*
	 * What follows is dear: at most one every REPLAN_MIN_NS.  Put off,
	 * a client stays in its stream only if that still fits what it
	 * asks: one that changed its filter or interval is sent nothing
	 * (not the old stream's records, nor a full pass for them) until
	 * the plan is made.
	 */
	if (s->replanned_at && now - s->replanned_at < REPLAN_MIN_NS) {
		s->replan_due = true;
		s->replan_fresh |= fresh;
		for (struct client *c = s->clients; c; c = c->next)
			c->stream = oldx && weft__server_client_active(c) ?
					    live_find(oldx, c) :
					    -1;
		return false;
	}
	s->replanned_at = now;
	s->replan_due = s->replan_fresh = false;
	if (!n) {
		weft__server_sub_drop(s);
		return false;
	}

	x = calloc(1, sizeof(*x));
	if (!x)
		return false;
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
		st->delta.lookup = weft__server_lookup;
		st->delta.lookup_ahead = weft__sub_task_ahead;
		st->delta.site = weft__sub_site;
		st->delta.await_site = weft__sub_await_site;
		st->delta.await_known = weft__sub_await_known;
		if (weft__delta_filter_copy(&st->delta.filter,
					    &plan[k].delta.filter)) {
			sub_ctx_free(x);
			return false;
		}
	}
	x->events = o.events = ev;
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
	/* What they hold, old output included, before its first pass can
	 * pump: every client of it takes its full update. */
	stream_have(s, true);
	err = weft_probe_subscribe(&o, &nsub);
	if (err) {
		weft__server_log("cannot subscribe to the probe: %s",
				 strerror(-err));
		sub_activate(s, oldx);
		/* Its backlog state forgotten by sub_activate(): every
		 * client owed a full update, none left with part of one. */
		for (struct client *c = s->clients; c; c = c->next) {
			c->stream = oldx && weft__server_client_active(c) ?
					    live_find(oldx, c) :
					    -1;
			if (c->stream >= 0 && c->want_updates)
				c->need_full = true;
		}
		weft__server_stream_have(s);
		sub_ctx_free(x);
		return false;
	}
	old = s->sub;
	s->sub = nsub;
	s->sub_ctx = x;
	s->last_resync = weft_now_ns();
	s->full_pending = true;
	if (old)
		weft_probe_unsubscribe(old); /* no callback of it after this */
	sub_ctx_free(oldx);
	pthread_mutex_lock(&s->stat_lock);
	s->st.subscribed = 1;
	pthread_mutex_unlock(&s->stat_lock);
	return true;
}

void weft__server_replan_due(weft_server_t *s)
{
	uint64_t now = weft_now_ns();
	bool fresh = s->replan_fresh;

	if (s->replan_due && now - s->replanned_at >= REPLAN_MIN_NS) {
		s->replan_due = s->replan_fresh = false;
		/* No new subscription: a client that joined a stream
		 * meanwhile is owed a full update of its own. */
		if (!weft__server_sub_reconcile(s, fresh))
			s->resync_due = true;
	}
	/* Not while a subscription's first, full, pass is to come: its
	 * clients take that one (the tick resyncs the rest, as ever). */
	if (s->resync_due && !s->full_pending &&
	    now - s->last_resync >= REPLAN_MIN_NS) {
		s->resync_due = false;
		if (weft__server_resync(s, NULL)) {
			pthread_mutex_lock(&s->stat_lock);
			s->st.resyncs++;
			pthread_mutex_unlock(&s->stat_lock);
		}
	}
}

/*
 * The clients owed a full update (they skipped updates, or joined a
 * stream under way) that can take one now (their output at most half
 * the bound), or @only (that just subscribed, whatever it holds), get
 * one of their own: their streams are marked, and the collector asked
 * for a full pass, which srv_on_update() gives them while the other
 * clients take that pass's changes as any other's.  Returns whether any
 * was.  Without a subscription, a new one (full for all).  Server
 * thread; holds none of our locks.
 */
bool weft__server_resync(weft_server_t *s, const struct client *only)
{
	struct sub_ctx *x = s->sub_ctx;
	bool mark[MAX_STREAMS] = { false }, any = false, ask = false;

	if (!s->sub || !x)
		return weft__server_sub_reconcile(s, true);
	/* A full pass for some: at most one every REPLAN_MIN_NS, as new
	 * subscriptions (a peer subscribing again in every frame asked one
	 * each); the rest at the tick. */
	if (s->last_resync && weft_now_ns() - s->last_resync < REPLAN_MIN_NS) {
		s->resync_due = true;
		return false;
	}
	for (struct client *c = s->clients; c; c = c->next) {
		if (!c->subscribed || !c->want_updates || !c->need_full ||
		    (only && c != only))
			continue;
		/* Not in a stream of this subscription (it could not be
		 * made): the streams are made again. */
		if (c->stream < 0 || (unsigned)c->stream >= x->nstreams)
			return weft__server_sub_reconcile(s, false);
		if (!only && evbuffer_get_length(bufferevent_get_output(
				     c->bev)) > s->buf_max / 2)
			continue;
		mark[c->stream] = any = true;
		c->resync_asked = true;
	}
	if (!any)
		return false;
	/* What they hold counts from now: the backlog's first records may
	 * come in the same pass as the full one. */
	stream_have(s, s->full_pending);
	pthread_mutex_lock(&s->qlock);
	for (unsigned k = 0; k < x->nstreams; k++)
		if (mark[k])
			x->st[k].resync_want = true;
	pthread_mutex_unlock(&s->qlock);
	/*
	 * A stream with a backlog under way puts its resync off until the
	 * backlog ends, which asks then (weft__server_backlog_pump()): a full pass now
	 * would be for nothing there.
	 */
	for (unsigned k = 0; k < x->nstreams; k++)
		ask |= mark[k] && !atomic_load_explicit(&x->st[k].backlog_busy,
							memory_order_relaxed);
	if (ask)
		weft__sub_ask_full(s->sub);
	s->last_resync = weft_now_ns();
	return true;
}
