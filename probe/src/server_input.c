/* SPDX-License-Identifier: MIT */
/*
 * What a client sends the server, from bytes to requests: the record
 * decoder (wire.c), then each frame checked and turned into a request
 * (server_internal.h) that server.c carries out.  Nothing here touches a
 * socket, the probe or a lock, so the whole input path up to dispatch
 * can be fuzzed on its own (tests/fuzz/fuzz_server_input.c).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "server_internal.h"

/* A Subscribe's publish interval, clamped (0: the default). */
uint32_t weft__server_interval_clamp(uint32_t ms)
{
	if (!ms)
		return WEFT_DELTA_INTERVAL_DEFAULT_MS;
	if (ms < WEFT_DELTA_INTERVAL_MIN_MS)
		return WEFT_DELTA_INTERVAL_MIN_MS;
	if (ms > WEFT_DELTA_INTERVAL_MAX_MS)
		return WEFT_DELTA_INTERVAL_MAX_MS;
	return ms;
}

void weft__server_request_fini(weft_server_request_t *r)
{
	weft__delta_filter_fini(&r->filter);
}

/*
 * weft__server_request_parse() - @f as a request.  @r is set (and must
 * be finished with weft__server_request_fini()) only on success.
 *
 * Return: NULL, or why the connection is to be closed.
 */
const char *weft__server_request_parse(const Weft__V1__Frame *f,
				       weft_server_request_t *r)
{
	int err;

	memset(r, 0, sizeof(*r));
	switch (f->body_case) {
	case WEFT__V1__FRAME__BODY_SUBSCRIBE:
		r->op = WEFT_SERVER_REQ_SUBSCRIBE;
		r->updates = f->subscribe->updates;
		r->events = f->subscribe->events;
		r->interval_ms =
			weft__server_interval_clamp(f->subscribe->interval_ms);
		err = weft__delta_filter_set(&r->filter, f->subscribe->filter);
		if (err)
			return err == -ENOMEM ? "out of memory" : "bad filter";
		return NULL;
	case WEFT__V1__FRAME__BODY_CONTROL:
		r->task = f->control->task;
		switch (f->control->op) {
		case WEFT__V1__CONTROL_OP__CONTROL_OP_PAUSE_EVENTS:
			r->op = WEFT_SERVER_REQ_PAUSE;
			return NULL;
		case WEFT__V1__CONTROL_OP__CONTROL_OP_RESUME_EVENTS:
			r->op = WEFT_SERVER_REQ_RESUME;
			return NULL;
		case WEFT__V1__CONTROL_OP__CONTROL_OP_TASK_DETAIL:
			r->op = WEFT_SERVER_REQ_TASK_DETAIL;
			return NULL;
		case WEFT__V1__CONTROL_OP__CONTROL_OP_SNAPSHOT:
			r->op = WEFT_SERVER_REQ_SNAPSHOT;
			return NULL;
		default:
			return "unknown control operation";
		}
	case WEFT__V1__FRAME__BODY_HELLO: {
		const char *t = f->hello->token ? f->hello->token : "";
		size_t n = strlen(t);

		r->op = WEFT_SERVER_REQ_HELLO;
		r->token_len = n;
		if (n > WEFT_WIRE_TOKEN_MAX)
			n = WEFT_WIRE_TOKEN_MAX; /* token_len says: no match */
		memcpy(r->token, t, n);
		return NULL;
	}
	default:
		return "unexpected frame from a client";
	}
}

/*
 * weft__server_input_feed() - a client's bytes: every whole frame in
 * them is parsed and handed to @handle, in order.
 * @d: the client's decoder; @used: bytes taken (all, unless it stops);
 * @why, @len: room for the reason to close.
 *
 * Stops at the first frame that is malformed, oversized, not a request
 * or refused by @handle (whose reason, if not NULL, closes).
 *
 * Return: NULL, or why the connection is to be closed (in @why or a
 * static string).
 */
const char *weft__server_input_feed(weft_wire_decoder_t *d, const void *data,
				    size_t n, size_t *used,
				    weft_server_input_cb handle, void *ctx,
				    char *why, size_t len)
{
	const uint8_t *p = data;
	size_t off = 0;

	*used = 0;
	while (off < n) {
		weft_server_request_t r;
		Weft__V1__Frame *f;
		const char *bad;
		size_t k;
		int rc;

		rc = weft_wire_decoder_feed(d, p + off, n - off, &k, &f);
		off += k;
		*used = off;
		if (rc < 0) {
			snprintf(why, len, "bad record at offset %llu: %s",
				 (unsigned long long)d->record_offset,
				 weft_wire_strerror(rc));
			return why;
		}
		if (rc != WEFT_WIRE_FRAME)
			continue;
		bad = weft__server_request_parse(f, &r);
		weft_wire_frame_free(f);
		if (bad)
			return bad;
		bad = handle(ctx, &r);
		weft__server_request_fini(&r);
		if (bad)
			return bad;
	}
	return NULL;
}
