/* SPDX-License-Identifier: MIT */
/* The tools' command-line helpers (see tool_util.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tool_util.h"

void tool_die(int status, const char *prog, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(status);
}

bool tool_parse_ulong(const char *s, unsigned long min, unsigned long max,
		      unsigned long *out)
{
	unsigned long v;
	char *end;

	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end != '\0' || v < min || v > max)
		return false;
	*out = v;
	return true;
}

int tool_opt_value(int argc, char **argv, int *i, const char *name,
		   const char **val)
{
	size_t len = strlen(name);

	*val = NULL;
	if (strncmp(argv[*i], name, len))
		return 0;
	if (argv[*i][len] == '=') {
		*val = argv[*i] + len + 1;
		return 1;
	}
	if (argv[*i][len] != '\0')
		return 0;
	if (++*i == argc)
		return -1;
	*val = argv[*i];
	return 1;
}

uint64_t tool_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
