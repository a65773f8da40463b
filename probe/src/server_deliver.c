/* SPDX-License-Identifier: MIT */
/*
 * The server thread's side of the streams' queue (server_stream.c
 * fills it on the collector's thread): the records taken from it under
 * qlock and handed to the clients of each stream, and what was dropped
 * meanwhile told to them.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "server_state_internal.h"

void weft__server_deliver_list(weft_server_t *s, struct item *list, uint64_t du,
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
				if (it->full) {
					s->full_pending = false;
					if (it->stream < MAX_STREAMS)
						s->full_gen[it->stream] =
							it->gen;
				}
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
	uint64_t du, de, gen[MAX_STREAMS], stopped_gen[MAX_STREAMS];
	bool stopped[MAX_STREAMS];

	pthread_mutex_lock(&s->qlock);
	list = s->qhead;
	s->qhead = s->qtail = NULL;
	s->qbytes = 0;
	/*
	 * What leaves the queue goes to the clients' output: counted there
	 * at once, in the same hold of qlock, until stream_have() below
	 * measures it (a pass in between saw neither, and pumped as if
	 * the clients held nothing).  Every item counts, events too: it
	 * errs high.
	 */
	for (struct item *it = list; it; it = it->next)
		if (it->stream < MAX_STREAMS)
			s->stream_have[it->stream] += it->buf.len;
	du = s->drop_updates - s->seen_drop_updates;
	de = s->drop_events - s->seen_drop_events;
	memcpy(gen, s->drop_gen, sizeof(gen));
	memset(s->drop_gen, 0, sizeof(s->drop_gen));
	memcpy(stopped, s->bl_stopped, sizeof(stopped));
	memcpy(stopped_gen, s->bl_stopped_gen, sizeof(stopped_gen));
	memset(s->bl_stopped, 0, sizeof(s->bl_stopped));
	s->seen_drop_updates = s->drop_updates;
	s->seen_drop_events = s->drop_events;
	pthread_mutex_unlock(&s->qlock);
	if (du)
		s->full_pending = false; /* it may be among them */
	weft__server_deliver_list(s, list, du, de);
	/*
	 * A resync's record dropped: the clients that took its full one
	 * (in this delivery or before) are owed a full update again.
	 */
	for (struct client *c = s->clients; c; c = c->next) {
		unsigned k = (unsigned)c->stream;

		if (!c->subscribed || !c->want_updates || c->need_full ||
		    c->stream < 0 || k >= MAX_STREAMS)
			continue;
		/*
		 * Or a backlog stopped as nobody's (weft__server_backlog_pump())
		 * whose full record a client took after all: it will not have
		 * the rest (its full record was in this delivery or before:
		 * it was queued before the backlog stopped).  By its gen
		 * alone, 0 too: one that took a later full record in this
		 * delivery is not owed one.
		 */
		if ((gen[k] && c->resync_gen == gen[k]) ||
		    (stopped[k] && c->resync_gen == stopped_gen[k])) {
			c->updates_skipped++;
			c->need_full = true;
		}
	}
	weft__server_sweep(s); /* those dropped over the budget */
	weft__server_stream_have(s);
}
