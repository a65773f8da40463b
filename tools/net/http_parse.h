/* SPDX-License-Identifier: MIT */
/*
 * The tools' HTTP/1.1 request-head parser, for weft-demo and weft-bench
 * http-server: pure functions over a byte buffer, no allocation, no
 * runtime, so tests/fuzz/fuzz_http.c links it alone.
 *
 * weft-demo's connection keeps reading into a buffer of HTTP_CONN_BUF
 * bytes and calls http_parse_request() on what it holds; the parser
 * answers "more" only while the head is incomplete and still within the
 * limits, so a full buffer always parses to a request or an error (the
 * fuzzer checks it).  weft-bench's http-server frames its pipelined
 * requests with it in a smaller buffer, and closes the connection when a
 * head fills that.
 *
 * Limits: request line HTTP_MAX_LINE bytes (414), header section
 * HTTP_MAX_HEADERS bytes or HTTP_MAX_FIELDS fields (431), Content-Length
 * HTTP_MAX_BODY (413), anything malformed 400, Transfer-Encoding 501.
 */
#ifndef WEFT_TOOLS_HTTP_PARSE_H
#define WEFT_TOOLS_HTTP_PARSE_H

#include <stdbool.h>
#include <stddef.h>

#define HTTP_MAX_LINE 8192u            /* request line, without CRLF */
#define HTTP_MAX_HEADERS (16u * 1024u) /* header section, with CRLFs */
#define HTTP_MAX_FIELDS 100u
#define HTTP_MAX_BODY (1024u * 1024u)
/* The smallest buffer that always holds a head or proves it too long. */
#define HTTP_CONN_BUF (HTTP_MAX_LINE + 2 + HTTP_MAX_HEADERS + 2)

enum http_method {
	HTTP_OTHER, /* a valid token, but neither: 405 */
	HTTP_GET,
	HTTP_HEAD,
};

/* What the parser found at the start of the buffer. */
typedef struct http_request_s {
	size_t head_len;    /* request line + headers, with CRLFs */
	size_t body_len;    /* Content-Length */
	const char *target; /* into the buffer; starts with '/' */
	size_t target_len;
	enum http_method method;
	bool close; /* close after the response */
	int error;  /* an error status (400, 413, ...), or 0 */
} http_request_t;

#define HTTP_PARSE_MORE 0
#define HTTP_PARSE_DONE 1

/**
 * http_parse_request() - parse one request head at @buf.
 * @buf: the bytes received; need not be NUL-terminated.
 * @filled: how many.
 * @req: receives the request.
 *
 * When req->error is set, req->close is too, and only req->error and
 * req->close mean anything.
 *
 * Return: HTTP_PARSE_MORE while the head is incomplete and within the
 * limits; HTTP_PARSE_DONE with @req filled.
 */
int http_parse_request(const char *buf, size_t filled, http_request_t *req);

/**
 * http_parse_query_uint() - the value of "@key=N" in a query string.
 * @q: the query, after the '?' (need not be NUL-terminated).
 * @len: its length.
 * @key: the key, e.g. "ms".
 * @max: the largest value accepted.
 * @val: receives N; left alone when @key is absent.
 *
 * Return: false when @key is present with an empty, non-decimal or too
 * large value; true otherwise.
 */
bool http_parse_query_uint(const char *q, size_t len, const char *key,
			   unsigned max, unsigned *val);

/** http_parse_reason() - the reason phrase of @status ("Unknown"). */
const char *http_parse_reason(int status);

#endif
