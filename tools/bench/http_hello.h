/* SPDX-License-Identifier: MIT */
/*
 * The HTTP hello every benchmark server answers (weft-bench's
 * http-server, weft-bench-io-ceiling's): one copy, so that their figures
 * are of the same bytes.
 */
#ifndef WEFT_BENCH_HTTP_HELLO_H
#define WEFT_BENCH_HTTP_HELLO_H

static const char http_resp[] = "HTTP/1.1 200 OK\r\n"
				"Content-Type: text/plain\r\n"
				"Content-Length: 13\r\n"
				"\r\n"
				"Hello, World!";
#define HTTP_RESP_LEN (sizeof(http_resp) - 1)

#endif /* WEFT_BENCH_HTTP_HELLO_H */
