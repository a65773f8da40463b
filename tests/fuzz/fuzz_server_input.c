/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the server's input path (probe/src/server_input.c),
 * what a client's bytes go through before the server acts on them:
 * record framing and decoding (proto/src/record.c), each frame checked and turned
 * into a request (interval clamped, filter validated), then dispatched
 * to a stand-in for server_client.c's client_request() that keeps the same
 * per-client state and the streams' plan (at most 8 distinct interval
 * and filter pairs), and runs the filter over a batch of events the way
 * the collector's callbacks do.  The first byte picks a chunk size, so
 * records also arrive split at every boundary.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

#define STREAMS 8

/* One client's state and the streams of the "server". */
struct model {
	bool subscribed, updates, events, paused;
	uint32_t interval_ms;
	weft_delta_filter_t filter;
	struct {
		uint32_t interval_ms;
		weft_delta_filter_t filter;
	} plan[STREAMS];
	unsigned nplan;
	weft_delta_t delta; /* for the filter over events */
	unsigned requests;
};

static const weft_event_t events[] = {
	{ .ts = 1, .task = 1, .kind = WEFT_EV_SPAWN, .worker = 0 },
	{ .ts = 2, .task = 1, .kind = WEFT_EV_POLL, .a1 = 5, .worker = 0 },
	{ .ts = 3, .task = 2, .kind = WEFT_EV_WAKE, .a1 = 1, .worker = 1 },
	{ .ts = 4, .kind = WEFT_EV_PARK, .worker = 1 },
	{ .ts = 5, .task = 3, .kind = WEFT_EV_MARK, .worker = 0xffff },
	{ .ts = 6, .task = UINT64_MAX, .kind = 31, .worker = 63 },
};

static const char *handle(void *ctx, weft_server_request_t *r)
{
	struct model *m = ctx;
	const weft_event_t *g;
	size_t n = sizeof(events) / sizeof(events[0]);
	unsigned k;

	m->requests++;
	switch (r->op) {
	case WEFT_SERVER_REQ_SUBSCRIBE:
		if (r->interval_ms < WEFT_DELTA_INTERVAL_MIN_MS ||
		    r->interval_ms > WEFT_DELTA_INTERVAL_MAX_MS)
			abort(); /* the clamp is broken */
		for (k = 0; k < m->nplan; k++)
			if (m->plan[k].interval_ms == r->interval_ms &&
			    weft__delta_filter_equal(&m->plan[k].filter,
						     &r->filter))
				break;
		if (k == m->nplan) {
			if (m->nplan == STREAMS)
				return "too many different subscriptions";
			if (weft__delta_filter_copy(&m->plan[k].filter,
						    &r->filter))
				return "out of memory";
			m->plan[k].interval_ms = r->interval_ms;
			m->nplan++;
		}
		/* Taken, as client_subscribe() takes it. */
		weft__delta_filter_fini(&m->filter);
		m->filter = r->filter;
		memset(&r->filter, 0, sizeof(r->filter));
		m->subscribed = true;
		m->updates = r->updates;
		m->events = r->events;
		m->interval_ms = r->interval_ms;
		weft__delta_filter_fini(&m->delta.filter);
		if (weft__delta_filter_copy(&m->delta.filter, &m->filter))
			return "out of memory";
		g = weft__delta_events(&m->delta, events, &n);
		if (!g)
			return "out of memory";
		for (size_t i = 0; i < n; i++)
			if (!weft__delta_filter_event(&m->filter, &g[i]))
				abort(); /* let through what it refuses */
		return NULL;
	case WEFT_SERVER_REQ_PAUSE:
		m->paused = true;
		return NULL;
	case WEFT_SERVER_REQ_RESUME:
		m->paused = false;
		return NULL;
	case WEFT_SERVER_REQ_TASK_DETAIL:
	case WEFT_SERVER_REQ_SNAPSHOT:
		return NULL;
	case WEFT_SERVER_REQ_HELLO:
		/* The token is cut to its buffer, its length kept. */
		if (strnlen(r->token, sizeof(r->token)) >= sizeof(r->token) ||
		    (r->token_len <= WEFT_WIRE_TOKEN_MAX &&
		     strlen(r->token) != r->token_len))
			abort();
		return NULL;
	}
	abort(); /* parse returned an op it does not define */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct model m;
	weft_wire_decoder_t d;
	char why[128];
	size_t chunk, off = 1;

	if (len < 1)
		return 0;
	memset(&m, 0, sizeof(m));
	weft__delta_init(&m.delta);
	chunk = (size_t)data[0] + 1;
	weft_wire_decoder_init(&d, 64 << 10);
	while (off < len) {
		size_t take = len - off < chunk ? len - off : chunk, used;
		const char *bad = weft__server_input_feed(&d, data + off, take,
							  &used, handle, &m,
							  why, sizeof(why));

		if (used > take)
			abort();
		off += used;
		if (bad)
			break; /* the server closes the connection */
	}
	weft_wire_decoder_fini(&d);
	weft__delta_filter_fini(&m.filter);
	for (unsigned k = 0; k < m.nplan; k++)
		weft__delta_filter_fini(&m.plan[k].filter);
	weft__delta_fini(&m.delta);
	return 0;
}
