/* SPDX-License-Identifier: MIT */
/*
 * The probe's TCP listeners' addresses (bind.c): the console server's
 * WEFT_CONSOLE_BIND and the metrics endpoint's WEFT_METRICS_BIND take
 * one syntax.
 */
#ifndef WEFT_PROBE_BIND_H
#define WEFT_PROBE_BIND_H

#include <stdbool.h>
#include <netdb.h>
#include <sys/socket.h>

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
