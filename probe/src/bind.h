/* SPDX-License-Identifier: MIT */
/*
 * What the probe's listeners share (bind.c): the TCP address syntax
 * (the console server's WEFT_CONSOLE_BIND and the metrics endpoint's
 * WEFT_METRICS_BIND take one), and the limiter of their log lines, so
 * that a storm (accept(2) out of descriptors, a flood of refused peers)
 * writes a line a second, not one a connection.
 */
#ifndef WEFT_PROBE_BIND_H
#define WEFT_PROBE_BIND_H

#include <stdbool.h>
#include <stdint.h>
#include <netdb.h>
#include <sys/socket.h>

/*
 * One log line a second at most.  Caller-allocated, zeroed; used by one
 * thread only (a listener's loop), so it has no lock.
 */
typedef struct weft__ratelimit_s {
	uint64_t last_ns;    /* private: the last line's time, 0: none */
	unsigned suppressed; /* private: lines not written since */
} weft__ratelimit_t;

/*
 * Whether a line may be written now.  If so, *@suppressed is the number
 * of lines that were not since the last one written (to be said in it),
 * and the count starts again; if not, this one is counted.
 */
bool weft__ratelimit(weft__ratelimit_t *rl, unsigned *suppressed);

/*
 * "host:port", "[v6]:port", ":port" or "port" (host: 127.0.0.1), into
 * getaddrinfo()'s *@res (freeaddrinfo() it), passive stream; @flags are
 * added to its hints (AI_NUMERICHOST: no name lookups).  The port is
 * digits, at most 65535.  Return: 0 or -EINVAL.
 */
int weft__bind_resolve(const char *bind, int flags, struct addrinfo **res);

/* Whether @sa is a loopback address (127/8, ::1). */
bool weft__bind_is_loopback(const struct sockaddr *sa);

#endif /* WEFT_PROBE_BIND_H */
