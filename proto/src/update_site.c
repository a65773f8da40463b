/* SPDX-License-Identifier: MIT */
/*
 * Update records' small parts, beside update.c: the spawn sites an
 * Update carries (Update.sites, weft.proto's Site) and the recount of a
 * record for one subscriber (weft/wire.h has the model).
 */
#include <errno.h>
#include <string.h>

#include "weft/wire.h"
#include "wire_private.h"

static size_t cstr(const char *s)
{
	return s ? strlen(s) : 0;
}

/* A string field: absent when empty. */
static size_t str_field_len(unsigned field, size_t n)
{
	return n ? sub_len(field, n) : 0;
}

static uint8_t *put_str_field(uint8_t *p, unsigned field, const char *s,
			      size_t n)
{
	if (!n)
		return p;
	p = put_sub(p, field, n);
	memcpy(p, s, n);
	return p + n;
}

static size_t site_body(const weft_wire_site_t *s)
{
	return uint_len(1, s->id) + str_field_len(2, cstr(s->name)) +
	       str_field_len(3, cstr(s->file)) + uint_len(4, s->line) +
	       uint_len(5, s->state_size);
}

size_t weft__wire_site_len(const weft_wire_site_t *s)
{
	return sub_len(11, site_body(s));
}

uint8_t *weft__wire_site_put(uint8_t *p, const weft_wire_site_t *s)
{
	p = put_sub(p, 11, site_body(s));
	p = put_uint(p, 1, s->id);
	p = put_str_field(p, 2, s->name, cstr(s->name));
	p = put_str_field(p, 3, s->file, cstr(s->file));
	p = put_uint(p, 4, s->line);
	return put_uint(p, 5, s->state_size);
}

/*
 * weft_wire_update_recount() - Update records again, with one
 * subscriber's updates_skipped and events_not_sent set in the first.
 * @rec, @len: whole records from weft_wire_update_append_split(); the
 * first is an Update, the others are copied as they are.
 *
 * The fields are appended to the Update's bytes (protobuf keeps the last
 * value of a repeated scalar field), so the record is re-framed, not
 * re-encoded: the cost is a copy.
 *
 * Return: 0; -EINVAL (not an Update record); -ENOMEM (@b unchanged).
 */
int weft_wire_update_recount(weft_wire_buf_t *b, const uint8_t *rec,
			      size_t len, uint64_t skipped, uint64_t not_sent)
{
	uint8_t extra[2 * 11], hdr[2 * 11];
	uint64_t flen, ulen;
	size_t i = 1, k, nx = 0, nh = 0, end, rest;
	int err;

	if (len < 2 || rec[0] != WEFT_WIRE_RECORD_TAG)
		return -EINVAL;
	k = varint_get(rec + i, len - i, &flen);
	if (!k || flen > len - i - k)
		return -EINVAL;
	i += k;
	end = i + (size_t)flen; /* the first record's end */
	rest = len - end;
	/* Frame.update: field 4, length-delimited. */
	if (i >= end || rec[i] != (4u << 3 | 2u))
		return -EINVAL;
	i++;
	k = varint_get(rec + i, end - i, &ulen);
	if (!k || ulen != end - i - k)
		return -EINVAL;
	i += k;
	if (skipped) {
		extra[nx++] = 8u << 3; /* Update.updates_skipped, varint */
		nx += weft_wire_varint_put(extra + nx, skipped);
	}
	if (not_sent) {
		extra[nx++] = 9u << 3; /* Update.events_not_sent, varint */
		nx += weft_wire_varint_put(extra + nx, not_sent);
	}
	ulen += nx;
	flen = 1 + varint_len(ulen) + ulen;
	hdr[nh++] = WEFT_WIRE_RECORD_TAG;
	nh += weft_wire_varint_put(hdr + nh, flen);
	hdr[nh++] = 4u << 3 | 2u;
	nh += weft_wire_varint_put(hdr + nh, ulen);
	err = weft_wire_buf_reserve(b, nh + (end - i) + nx + rest);
	if (err)
		return err;
	memcpy(b->data + b->len, hdr, nh);
	memcpy(b->data + b->len + nh, rec + i, end - i);
	memcpy(b->data + b->len + nh + (end - i), extra, nx);
	memcpy(b->data + b->len + nh + (end - i) + nx, rec + end, rest);
	b->len += nh + (end - i) + nx + rest;
	return 0;
}
