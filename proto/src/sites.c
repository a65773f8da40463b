/* SPDX-License-Identifier: MIT */
/*
 * A reader's spawn sites (weft/wire.h): the Site records of a stream,
 * kept by id for the Task records that name them and leave out their
 * name, file, line and state_size.  Ids are small (a process's spawn
 * records, numbered from 1): a vector indexed by id, grown to the
 * largest met, bounded by WEFT_WIRE_SITE_MAX so that a hostile stream
 * cannot make it large.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "weft/wire.h"

/* Its own copy of @s ("" for NULL), or NULL for no memory. */
static char *dup(const char *s)
{
	size_t n = s ? strlen(s) : 0;
	char *d = malloc(n + 1);

	if (d) {
		if (n)
			memcpy(d, s, n);
		d[n] = '\0';
	}
	return d;
}

/* Slot @id of the vector *@v of *@cap, grown to it (NULL: no memory). */
static weft_wire_site_t *slot(weft_wire_site_t **v, size_t *cap, uint32_t id)
{
	if (id >= *cap) {
		size_t n = *cap ? *cap : 64;
		weft_wire_site_t *x;

		while (n <= id)
			n *= 2;
		x = realloc(*v, n * sizeof(*x));
		if (!x)
			return NULL;
		memset(x + *cap, 0, (n - *cap) * sizeof(*x));
		*v = x;
		*cap = n;
	}
	return &(*v)[id];
}

int weft_wire_sites_add(weft_wire_sites_t *s, const Weft__V1__Site *m)
{
	weft_wire_site_t *e;
	char *name, *file;
	bool await = m->id > WEFT_WIRE_AWAIT_SITE_BASE &&
		     m->id - WEFT_WIRE_AWAIT_SITE_BASE <=
			     WEFT_WIRE_AWAIT_SITE_MAX;

	if (!m->id || (m->id > WEFT_WIRE_SITE_MAX && !await))
		return -EINVAL;
	e = await ? slot(&s->await, &s->await_cap,
			 m->id - WEFT_WIRE_AWAIT_SITE_BASE) :
		    slot(&s->v, &s->cap, m->id);
	if (!e)
		return -ENOMEM;
	name = dup(m->name);
	file = dup(m->file);
	if (!name || !file) {
		free(name);
		free(file);
		return -ENOMEM;
	}
	if (!e->name && !await)
		s->n++;
	free((char *)e->name);
	free((char *)e->file);
	*e = (weft_wire_site_t){ .id = m->id,
				 .line = m->line,
				 .state_size = m->state_size,
				 .name = name,
				 .file = file };
	return 0;
}

int weft_wire_sites_add_update(weft_wire_sites_t *s, const Weft__V1__Update *u)
{
	for (size_t i = 0; u && i < u->n_sites; i++)
		if (u->sites[i] &&
		    weft_wire_sites_add(s, u->sites[i]) == -ENOMEM)
			return -ENOMEM;
	return 0;
}

const weft_wire_site_t *weft_wire_sites_get(const weft_wire_sites_t *s,
					    uint32_t id)
{
	return id < s->cap && s->v[id].name ? &s->v[id] : NULL;
}

const weft_wire_site_t *weft_wire_sites_await(const weft_wire_sites_t *s,
					      uint32_t id)
{
	return id < s->await_cap && s->await[id].file ? &s->await[id] : NULL;
}

bool weft_wire_sites_resolve(weft_wire_sites_t *s, Weft__V1__Task *t)
{
	const weft_wire_site_t *e;

	if (!t->site || (t->name && t->name[0]) || (t->file && t->file[0]))
		return false;
	e = weft_wire_sites_get(s, t->site);
	if (!e) {
		s->unknown++;
		return false;
	}
	t->name = (char *)e->name;
	t->file = (char *)e->file;
	t->line = e->line;
	t->state_size = e->state_size;
	return true;
}

void weft_wire_sites_fini(weft_wire_sites_t *s)
{
	for (size_t i = 0; i < s->cap; i++) {
		free((char *)s->v[i].name);
		free((char *)s->v[i].file);
	}
	free(s->v);
	for (size_t i = 0; i < s->await_cap; i++) {
		free((char *)s->await[i].name);
		free((char *)s->await[i].file);
	}
	free(s->await);
	memset(s, 0, sizeof(*s));
}
