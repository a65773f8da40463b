/* SPDX-License-Identifier: MIT */
/* Sets of task ids for the delta streams (delta_internal.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "delta_internal.h"

bool weft__idset_has(const weft_idset_t *s, uint64_t id)
{
	if (!s->cap || !id)
		return false;
	for (size_t i = weft__idset_hash(id, s->cap);;
	     i = (i + 1) & (s->cap - 1)) {
		if (s->slot[i] == id)
			return true;
		if (!s->slot[i])
			return false;
	}
}

static int idset_grow(weft_idset_t *s)
{
	size_t ncap = s->cap ? 2 * s->cap : 64;
	uint64_t *ns = calloc(ncap, sizeof(*ns));

	if (!ns)
		return -ENOMEM;
	for (size_t i = 0; i < s->cap; i++) {
		uint64_t id = s->slot[i];
		size_t j;

		if (!id)
			continue;
		for (j = weft__idset_hash(id, ncap); ns[j];
		     j = (j + 1) & (ncap - 1))
			;
		ns[j] = id;
	}
	free(s->slot);
	s->slot = ns;
	s->cap = ncap;
	return 0;
}

/* Return: 0 (added or there already); -ENOMEM. */
int weft__idset_add(weft_idset_t *s, uint64_t id)
{
	size_t i;

	if (!id)
		return 0;
	/* At most half full: probes stay short. */
	if (2 * (s->n + 1) > s->cap && idset_grow(s))
		return -ENOMEM;
	for (i = weft__idset_hash(id, s->cap); s->slot[i];
	     i = (i + 1) & (s->cap - 1))
		if (s->slot[i] == id)
			return 0;
	s->slot[i] = id;
	s->n++;
	return 0;
}

/* Removes @id: backward-shift deletion keeps every probe chain whole. */
void weft__idset_remove(weft_idset_t *s, uint64_t id)
{
	size_t i, j, mask = s->cap - 1;

	if (!s->cap || !id)
		return;
	for (i = weft__idset_hash(id, s->cap); s->slot[i] != id;
	     i = (i + 1) & mask)
		if (!s->slot[i])
			return;
	s->slot[i] = 0;
	s->n--;
	for (j = (i + 1) & mask; s->slot[j]; j = (j + 1) & mask) {
		size_t home = weft__idset_hash(s->slot[j], s->cap);

		/* Move slot j into the hole at i unless its home lies
		 * cyclically in (i, j]. */
		if (((j - home) & mask) >= ((j - i) & mask)) {
			s->slot[i] = s->slot[j];
			s->slot[j] = 0;
			i = j;
		}
	}
}

void weft__idset_clear(weft_idset_t *s)
{
	if (s->cap)
		memset(s->slot, 0, s->cap * sizeof(*s->slot));
	s->n = 0;
}

void weft__idset_fini(weft_idset_t *s)
{
	free(s->slot);
	memset(s, 0, sizeof(*s));
}
