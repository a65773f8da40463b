/* SPDX-License-Identifier: MIT */
/*
 * Small helpers of the console: aborting allocation (a tool, not a
 * library: STYLE.md allows it), and number formatting for narrow columns.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "console.h"

void con_die(const char *fmt, ...)
{
	va_list ap;

	fputs("weft-console: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

void *con_xreallocarray(void *p, size_t n, size_t size)
{
	if (n == 0 || size == 0)
		con_die("internal error: zero-sized allocation");
	if (n > SIZE_MAX / size)
		con_die("internal error: allocation size overflows");
	p = realloc(p, n * size);
	if (!p)
		con_die("out of memory");
	return p;
}

void *con_xmalloc(size_t n)
{
	return con_xreallocarray(NULL, n, 1);
}

void *con_xmemdup(const void *p, size_t n)
{
	void *q;

	if (!p)
		return NULL;
	q = con_xmalloc(n ? n : 1);
	memcpy(q, p, n);
	return q;
}

void *con_xcalloc(size_t n, size_t size)
{
	void *p;

	if (n == 0 || size == 0)
		con_die("internal error: zero-sized allocation");
	p = calloc(n, size);
	if (!p)
		con_die("out of memory");
	return p;
}

char *con_xstrdup(const char *s)
{
	size_t n = strlen(s ? s : "") + 1;
	char *p = con_xmalloc(n);

	memcpy(p, s ? s : "", n);
	return p;
}

const char *con_fmt_ns(char *buf, size_t len, uint64_t ns)
{
	double v = (double)ns;

	if (ns == 0)
		snprintf(buf, len, "0");
	else if (ns < 1000)
		snprintf(buf, len, "%lluns", (unsigned long long)ns);
	else if (ns < 1000000)
		snprintf(buf, len, "%.*fus", v < 1e4 ? 1 : 0, v / 1e3);
	else if (ns < 1000000000ull)
		snprintf(buf, len, "%.*fms", v < 1e7 ? 1 : 0, v / 1e6);
	else if (ns < 600ull * 1000000000ull)
		snprintf(buf, len, "%.*fs", v < 1e10 ? 2 : 1, v / 1e9);
	else
		snprintf(buf, len, "%.0fm", v / 6e10);
	return buf;
}

const char *con_fmt_count(char *buf, size_t len, double v)
{
	if (v < 0)
		v = 0;
	if (v < 1000)
		snprintf(buf, len, "%.0f", v);
	else if (v < 1e6)
		snprintf(buf, len, "%.1fk", v / 1e3);
	else if (v < 1e9)
		snprintf(buf, len, "%.1fM", v / 1e6);
	else
		snprintf(buf, len, "%.1fG", v / 1e9);
	return buf;
}

int con_parse_duration(const char *s, uint64_t *ns)
{
	char *end;
	double v;
	double mul;

	errno = 0;
	v = strtod(s, &end);
	if (end == s || errno || v < 0 || v > 1e7)
		return -EINVAL;
	if (!*end || !strcmp(end, "s"))
		mul = 1e9;
	else if (!strcmp(end, "ms"))
		mul = 1e6;
	else if (!strcmp(end, "us"))
		mul = 1e3;
	else if (!strcmp(end, "m"))
		mul = 60e9;
	else
		return -EINVAL;
	*ns = (uint64_t)(v * mul);
	return 0;
}

bool con_contains_ci(const char *hay, const char *needle)
{
	size_t n = strlen(needle);

	for (; *hay; hay++)
		if (!strncasecmp(hay, needle, n))
			return true;
	return !n;
}
