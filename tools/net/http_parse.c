/* SPDX-License-Identifier: MIT */
/*
 * The tools' HTTP/1.1 request-head parser (see http_parse.h).  Every
 * scan is bounded by the bytes received and by the limits, so a hostile
 * client costs at most one pass over HTTP_CONN_BUF bytes per call.
 */
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "http_parse.h"

static bool is_tchar(unsigned char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       (ch >= '0' && ch <= '9') ||
	       (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static bool ieq(const char *a, size_t alen, const char *b)
{
	return alen == strlen(b) && !strncasecmp(a, b, alen);
}

/* True when the comma-separated list @v (@len bytes) has token @tok. */
static bool has_token(const char *v, size_t len, const char *tok)
{
	size_t i = 0;

	while (i < len) {
		size_t s, e;

		while (i < len && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		s = i;
		while (i < len && v[i] != ',')
			i++;
		e = i;
		while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (e > s && ieq(v + s, e - s, tok))
			return true;
	}
	return false;
}

bool http_parse_query_uint(const char *q, size_t len, const char *key,
			   unsigned max, unsigned *val)
{
	size_t klen = strlen(key), i = 0;

	while (i < len) {
		size_t s = i;

		while (i < len && q[i] != '&')
			i++;
		if (i - s > klen && !memcmp(q + s, key, klen) &&
		    q[s + klen] == '=') {
			unsigned long v = 0;

			if (i - s == klen + 1)
				return false; /* "key=" */
			for (size_t k = s + klen + 1; k < i; k++) {
				if (q[k] < '0' || q[k] > '9')
					return false;
				v = v * 10 + (unsigned long)(q[k] - '0');
				if (v > max)
					return false;
			}
			*val = (unsigned)v;
		}
		i++;
	}
	return true;
}

/* Parses the request line "METHOD SP /target SP HTTP/1.x". */
static int parse_request_line(const char *l, size_t len, http_request_t *req,
			      bool *http10)
{
	size_t i = 0, ms, ts, te;

	while (i < len && is_tchar((unsigned char)l[i]))
		i++;
	if (i == 0 || i >= len || l[i] != ' ')
		return 400;
	ms = i;
	ts = ++i;
	while (i < len && l[i] > ' ' && l[i] != 0x7f)
		i++;
	te = i;
	if (te == ts || l[ts] != '/' || i >= len || l[i] != ' ')
		return 400;
	i++;
	if (len - i != 8 || memcmp(l + i, "HTTP/1.", 7) ||
	    (l[i + 7] != '0' && l[i + 7] != '1'))
		return 400;
	*http10 = l[i + 7] == '0';
	if (ms == 3 && !memcmp(l, "GET", 3))
		req->method = HTTP_GET;
	else if (ms == 4 && !memcmp(l, "HEAD", 4))
		req->method = HTTP_HEAD;
	else
		req->method = HTTP_OTHER;
	req->target = l + ts;
	req->target_len = te - ts;
	return 0;
}

int http_parse_request(const char *buf, size_t filled, http_request_t *req)
{
	const char *nl;
	size_t line_len, pos, fields = 0;
	bool http10 = false, have_cl = false, ka = false;
	unsigned long long cl = 0;
	int err, te_err = 0;

	memset(req, 0, sizeof(*req));
	nl = memchr(buf, '\n',
		    filled < HTTP_MAX_LINE + 2 ? filled : HTTP_MAX_LINE + 2);
	if (!nl) {
		if (filled > HTTP_MAX_LINE + 1)
			goto out_414;
		return HTTP_PARSE_MORE;
	}
	if (nl == buf || nl[-1] != '\r')
		goto out_400;
	line_len = (size_t)(nl - buf) - 1;
	if (line_len > HTTP_MAX_LINE)
		goto out_414;

	/* The header fields, up to the empty line. */
	pos = line_len + 2;
	for (;;) {
		const char *l = buf + pos, *colon, *v, *ve;
		size_t len;

		nl = memchr(l, '\n', filled - pos);
		if (!nl) {
			if (filled - (line_len + 2) > HTTP_MAX_HEADERS)
				goto out_431;
			return HTTP_PARSE_MORE;
		}
		if ((size_t)(nl + 1 - buf) - (line_len + 2) > HTTP_MAX_HEADERS)
			goto out_431;
		if (nl == l || nl[-1] != '\r')
			goto out_400;
		len = (size_t)(nl - l) - 1;
		pos = (size_t)(nl + 1 - buf);
		if (len == 0)
			break;
		if (++fields > HTTP_MAX_FIELDS)
			goto out_431;
		colon = memchr(l, ':', len);
		if (!colon || colon == l)
			goto out_400; /* also obs-fold: no token before ':' */
		for (const char *c = l; c < colon; c++)
			if (!is_tchar((unsigned char)*c))
				goto out_400;
		v = colon + 1;
		ve = l + len;
		for (const char *c = v; c < ve; c++)
			if (((unsigned char)*c < ' ' && *c != '\t') ||
			    *c == 0x7f)
				goto out_400;
		while (v < ve && (*v == ' ' || *v == '\t'))
			v++;
		while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
			ve--;
		if (ieq(l, (size_t)(colon - l), "content-length")) {
			unsigned long long n = 0;

			if (v == ve)
				goto out_400;
			for (const char *c = v; c < ve; c++) {
				if (*c < '0' || *c > '9')
					goto out_400;
				n = n * 10 + (unsigned)(*c - '0');
				if (n > HTTP_MAX_BODY + 1ull)
					n = HTTP_MAX_BODY + 1ull;
			}
			if (have_cl && n != cl)
				goto out_400;
			have_cl = true;
			cl = n;
		} else if (ieq(l, (size_t)(colon - l), "transfer-encoding")) {
			te_err = 501;
		} else if (ieq(l, (size_t)(colon - l), "connection")) {
			if (has_token(v, (size_t)(ve - v), "close"))
				req->close = true;
			if (has_token(v, (size_t)(ve - v), "keep-alive"))
				ka = true;
		}
	}
	req->head_len = pos;
	err = parse_request_line(buf, line_len, req, &http10);
	if (err)
		goto out_err;
	if (http10 && !ka)
		req->close = true;
	if (te_err) {
		err = te_err;
		goto out_err;
	}
	if (cl > HTTP_MAX_BODY) {
		err = 413;
		goto out_err;
	}
	req->body_len = (size_t)cl;
	return HTTP_PARSE_DONE;

out_414:
	err = 414;
	goto out_err;
out_431:
	err = 431;
	goto out_err;
out_400:
	err = 400;
out_err:
	req->error = err;
	req->close = true;
	return HTTP_PARSE_DONE;
}

const char *http_parse_reason(int status)
{
	switch (status) {
	case 200:
		return "OK";
	case 400:
		return "Bad Request";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 413:
		return "Content Too Large";
	case 414:
		return "URI Too Long";
	case 431:
		return "Request Header Fields Too Large";
	case 500:
		return "Internal Server Error";
	case 501:
		return "Not Implemented";
	case 503:
		return "Service Unavailable";
	default:
		return "Unknown";
	}
}
