/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: weft-demo's HTTP request parser (tools/demo/
 * http_parse.c) driven the way the demo's connection task drives it.  The
 * first byte picks a read size (1 to 32 bytes, doubled every 16 reads so
 * that a long input costs a few hundred parses, not thousands); the rest
 * arrives in reads of that size into a buffer of HTTP_CONN_BUF bytes, and each request parsed is
 * consumed with its body, pipelined requests included, until the input
 * ends, an error closes the connection or "Connection: close" does.
 *
 * Each parse sees an allocation of exactly the bytes received, so a read
 * past them is an ASan report.  Checked besides: a full buffer never asks
 * for more (the connection would stall); an error is one of the statuses
 * the demo sends and closes; a request's head, target and body length are
 * within the buffer and the limits; an "ms" query value is within its cap.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond))                                                   \
			__builtin_trap();                                      \
	} while (0)

/* Parses a copy of exactly @filled bytes. */
static int parse_exact(const char *buf, size_t filled, http_request_t *req)
{
	char *copy = malloc(filled ? filled : 1);
	int rc;

	CHECK(copy);
	memcpy(copy, buf, filled);
	rc = http_parse_request(copy, filled, req);
	if (rc == HTTP_PARSE_DONE && !req->error) {
		const char *q;
		unsigned ms = 7;

		CHECK(req->target > copy);
		CHECK(req->target + req->target_len <= copy + req->head_len);
		CHECK(req->target_len > 0 && req->target[0] == '/');
		q = memchr(req->target, '?', req->target_len);
		if (q &&
		    http_parse_query_uint(q + 1,
					  req->target_len -
						  (size_t)(q + 1 - req->target),
					  "ms", 10000, &ms))
			CHECK(ms <= 10000);
		/* Re-point into the caller's buffer: the copy goes. */
		req->target = buf + (req->target - copy);
	}
	free(copy);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	static char buf[HTTP_CONN_BUF];
	size_t chunk, off = 1, filled = 0, reads = 0;
	http_request_t req;

	if (len < 1)
		return 0;
	chunk = (size_t)(data[0] % 32) + 1;
	for (;;) {
		/* Blank lines before a request are skipped, as the demo does. */
		while (filled >= 2 && buf[0] == '\r' && buf[1] == '\n') {
			memmove(buf, buf + 2, filled - 2);
			filled -= 2;
		}
		if (parse_exact(buf, filled, &req) == HTTP_PARSE_MORE) {
			size_t take = len - off;

			CHECK(filled < HTTP_CONN_BUF);
			if (!take)
				break;
			if (take > chunk)
				take = chunk;
			if (++reads % 16 == 0)
				chunk *= 2;
			if (take > HTTP_CONN_BUF - filled)
				take = HTTP_CONN_BUF - filled;
			memcpy(buf + filled, data + off, take);
			filled += take;
			off += take;
			continue;
		}
		if (req.error) {
			CHECK(req.close);
			CHECK(req.error == 400 || req.error == 413 ||
			      req.error == 414 || req.error == 431 ||
			      req.error == 501);
			CHECK(strcmp(http_parse_reason(req.error), "Unknown"));
			break;
		}
		CHECK(req.head_len > 0 && req.head_len <= filled);
		CHECK(req.head_len <= HTTP_CONN_BUF);
		CHECK(req.body_len <= HTTP_MAX_BODY);
		CHECK(req.method == HTTP_GET || req.method == HTTP_HEAD ||
		      req.method == HTTP_OTHER);
		memmove(buf, buf + req.head_len, filled - req.head_len);
		filled -= req.head_len;
		/* The body: first what is buffered, then straight from input. */
		{
			size_t take = filled < req.body_len ? filled :
							      req.body_len;
			size_t rest = req.body_len - take;

			memmove(buf, buf + take, filled - take);
			filled -= take;
			if (rest > len - off)
				break; /* the connection ends mid-body */
			off += rest;
		}
		if (req.close)
			break;
	}
	return 0;
}
