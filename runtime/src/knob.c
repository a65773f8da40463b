/* SPDX-License-Identifier: MIT */
/*
 * The WEFT_* environment knobs (knob.h): one parser, one way to say a bad
 * value.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "knob.h"

static const struct unit {
	const char *name;
	uint64_t ns;
} time_units[] = {
	{ "ns", 1 },
	{ "us", 1000 },
	{ "ms", 1000000 },
	{ "s", 1000000000 },
};

static uint64_t unit_ns(const char *name)
{
	for (size_t i = 0; i < sizeof(time_units) / sizeof(time_units[0]); i++)
		if (!strcmp(time_units[i].name, name))
			return time_units[i].ns;
	return 0;
}

/* @v in the knob's unit, for a message: "256k", "10 ms", "64 MB". */
static void show(const weft__knob_t *k, uint64_t v, char *buf, size_t n)
{
	if (k->kind == WEFT__KNOB_COUNT) {
		if (v && v % (1u << 20) == 0)
			snprintf(buf, n, "%llum", (unsigned long long)(v >> 20));
		else if (v && v % 1024 == 0)
			snprintf(buf, n, "%lluk", (unsigned long long)(v >> 10));
		else
			snprintf(buf, n, "%llu", (unsigned long long)v);
		return;
	}
	snprintf(buf, n, "%llu %s", (unsigned long long)v, k->unit);
}

/* What @k takes, for a message: "64 to 64m events". */
static void range(const weft__knob_t *k, char *buf, size_t n)
{
	char lo[32], hi[32];

	show(k, k->min, lo, sizeof(lo));
	show(k, k->max, hi, sizeof(hi));
	if (k->kind == WEFT__KNOB_COUNT)
		snprintf(buf, n, "%s to %s %s", lo, hi, k->unit);
	else
		snprintf(buf, n, "%s to %s", lo, hi);
}

static const char *takes(const weft__knob_t *k)
{
	switch (k->kind) {
	case WEFT__KNOB_COUNT:
		return "a whole number, or with k or m";
	case WEFT__KNOB_TIME:
		return "a whole number, or with ns, us, ms or s";
	default:
		return "a whole number of MB, or with k, m or g";
	}
}

/*
 * @s's value in the knob's base (counts; ns; bytes) into *@out.  Returns
 * 0, -EINVAL (not a number, or a suffix it does not take) or -ERANGE
 * (overflow).
 */
static int parse(const weft__knob_t *k, const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	uint64_t mul = 1;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -ERANGE;
	switch (k->kind) {
	case WEFT__KNOB_COUNT:
		if (!*end)
			mul = 1;
		else if (!strcasecmp(end, "k"))
			mul = 1024;
		else if (!strcasecmp(end, "m"))
			mul = 1024 * 1024;
		else
			return -EINVAL;
		break;
	case WEFT__KNOB_TIME:
		mul = unit_ns(*end ? end : k->unit);
		if (!mul)
			return -EINVAL;
		break;
	case WEFT__KNOB_SIZE:
		if (!*end || !strcasecmp(end, "m"))
			mul = 1ull << 20;
		else if (!strcasecmp(end, "k"))
			mul = 1ull << 10;
		else if (!strcasecmp(end, "g"))
			mul = 1ull << 30;
		else
			return -EINVAL;
		break;
	}
	if (v > UINT64_MAX / mul)
		return -ERANGE;
	*out = v * mul;
	return 0;
}

static uint64_t base(const weft__knob_t *k)
{
	switch (k->kind) {
	case WEFT__KNOB_TIME:
		return unit_ns(k->unit);
	case WEFT__KNOB_SIZE:
		return 1ull << 20;
	default:
		return 1;
	}
}

uint64_t weft__knob(const weft__knob_t *k)
{
	const char *s = getenv(k->name);
	uint64_t b = base(k), v = 0;
	char r[96], d[32];
	int err;

	if (!s || !*s)
		return k->def * b;
	err = parse(k, s, &v);
	if (!err && v >= k->min * b && v <= k->max * b)
		return v;
	range(k, r, sizeof(r));
	show(k, k->def, d, sizeof(d));
	if (err == -EINVAL)
		fprintf(stderr, "weft: %s=%s: not %s (%s); using %s\n", k->name,
			s, takes(k), r, d);
	else
		fprintf(stderr, "weft: %s=%s: out of range (%s); using %s\n",
			k->name, s, r, d);
	return k->def * b;
}

bool weft__knob_bool(const char *name, bool def)
{
	static const char *const choices[] = { "0", "off", "false", "no",
					       "1", "on",  "true",  "yes",
					       NULL };
	const char *s = getenv(name);

	if (!s || !*s)
		return def;
	for (int i = 0; choices[i]; i++)
		if (!strcasecmp(s, choices[i]))
			return i >= 4;
	fprintf(stderr, "weft: %s=%s: not 1, on, true, yes, 0, off, false or "
			"no; using %s\n",
		name, s, def ? "on" : "off");
	return def;
}

int weft__knob_choice(const char *name, const char *const *choices, int def)
{
	const char *s = getenv(name);
	char list[128] = "";
	size_t len = 0;

	if (!s || !*s)
		return def;
	for (int i = 0; choices[i]; i++) {
		if (!strcmp(s, choices[i]))
			return i;
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s",
					i ? ", " : "", choices[i]);
		if (len >= sizeof(list))
			len = sizeof(list) - 1;
	}
	fprintf(stderr, "weft: %s=%s: not one of %s; using %s\n", name, s,
		list, choices[def]);
	return def;
}
