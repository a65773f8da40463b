/* SPDX-License-Identifier: MIT */
/*
 * The trace model's strings (trace_model.c): task names and files
 * interned in one table, shared by every task that names them, within a
 * bound; past it a task keeps copies of its own (tt_task_t.owned).
 */
#include <stdlib.h>
#include <string.h>

#include "trace_tool.h"

/*
 * Interned strings take at most this much (the table and the bytes);
 * past it, a task's strings are its own copies (a file with more
 * distinct names than a program has call sites is no recording).
 */
#define STRS_BYTES ((size_t)32 << 20)

static size_t str_hash(const char *s, size_t n)
{
	size_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
	return h;
}

static void strs_grow(tt_trace_t *t)
{
	size_t cap = t->strs_cap ? 2 * t->strs_cap : 1024;
	char **slot = calloc(cap, sizeof(*slot));

	if (!slot)
		tt_die("out of memory");
	for (size_t i = 0; i < t->strs_cap; i++) {
		size_t j;

		if (!t->strs[i])
			continue;
		for (j = str_hash(t->strs[i], strlen(t->strs[i])) & (cap - 1);
		     slot[j]; j = (j + 1) & (cap - 1))
			;
		slot[j] = t->strs[i];
	}
	t->strs_bytes += (cap - t->strs_cap) * sizeof(*slot);
	free(t->strs);
	t->strs = slot;
	t->strs_cap = cap;
}

/* @n bytes at @s, NUL-ended, in memory of their own. */
static char *copy_n(const char *s, size_t n)
{
	char *p = tt_xmalloc(n + 1);

	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

/*
 * The string of @n bytes at @s (not NUL-ended: a record's bytes),
 * interned: the trace's copy, shared by every task that names it.  Past
 * STRS_BYTES a copy of its own, and *@owned gets @bit.
 */
const char *tt__intern(tt_trace_t *t, const char *s, size_t n, uint8_t *owned,
		       uint8_t bit)
{
	size_t len, j, h;

	if (!n)
		return "";
	if (!t->strs_cap)
		strs_grow(t);
	h = str_hash(s, n);
	for (j = h & (t->strs_cap - 1); t->strs[j];
	     j = (j + 1) & (t->strs_cap - 1))
		if (!strncmp(t->strs[j], s, n) && !t->strs[j][n])
			return t->strs[j];
	len = n + 1;
	if (2 * (t->nstrs + 1) > t->strs_cap) {
		if (t->strs_bytes + t->strs_cap * sizeof(*t->strs) + len >
		    STRS_BYTES) {
			*owned |= bit;
			return copy_n(s, n);
		}
		strs_grow(t);
		for (j = h & (t->strs_cap - 1); t->strs[j];
		     j = (j + 1) & (t->strs_cap - 1))
			;
	} else if (t->strs_bytes + len > STRS_BYTES) {
		*owned |= bit;
		return copy_n(s, n);
	}
	t->strs[j] = copy_n(s, n);
	t->strs_bytes += len;
	t->nstrs++;
	return t->strs[j];
}

/* Frees the strings @k owns (not the interned ones). */
void tt__task_strings_free(tt_task_t *k, uint8_t bits)
{
	if (k->owned & bits & OWN_NAME)
		free((char *)k->name);
	if (k->owned & bits & OWN_FILE)
		free((char *)k->file);
	if (k->owned & bits & OWN_PARKED)
		free((char *)k->parked_file);
	k->owned &= (uint8_t)~bits;
}
