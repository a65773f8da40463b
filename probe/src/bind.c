/* SPDX-License-Identifier: MIT */
/* What the probe's listeners share: see bind.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft/time.h"

#include "bind.h"

int weft__bind_resolve(const char *bind, int flags, struct addrinfo **res)
{
	char host[256], port[16];
	const char *colon = strrchr(bind, ':');
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV | flags };
	size_t hl;

	if (!colon) {
		snprintf(host, sizeof(host), "127.0.0.1");
		colon = bind - 1;
	} else {
		hl = (size_t)(colon - bind);
		if (hl >= sizeof(host))
			return -EINVAL;
		memcpy(host, bind, hl);
		host[hl] = '\0';
		if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
			memmove(host, host + 1, hl - 2);
			host[hl - 2] = '\0';
		}
		if (!host[0])
			snprintf(host, sizeof(host), "127.0.0.1");
	}
	if (!colon[1] || strlen(colon + 1) >= sizeof(port) ||
	    strspn(colon + 1, "0123456789") != strlen(colon + 1))
		return -EINVAL;
	snprintf(port, sizeof(port), "%s", colon + 1);
	if (atoi(port) > 65535)
		return -EINVAL;
	*res = NULL;
	if (getaddrinfo(host, port, &hints, res) || !*res)
		return -EINVAL;
	return 0;
}

bool weft__bind_is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)(const void *)sa)
				      ->sin_addr.s_addr) >>
			24) == 127;
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(
			&((const struct sockaddr_in6 *)(const void *)sa)
				 ->sin6_addr);
	return false;
}

bool weft__ratelimit(weft__ratelimit_t *rl, unsigned *suppressed)
{
	uint64_t now = weft_now_ns();

	if (rl->last_ns && now - rl->last_ns < 1000000000u) {
		rl->suppressed++;
		return false;
	}
	*suppressed = rl->suppressed;
	rl->suppressed = 0;
	rl->last_ns = now;
	return true;
}
