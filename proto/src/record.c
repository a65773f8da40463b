/* SPDX-License-Identifier: MIT */
/*
 * Buffers, records and the streaming record decoder (weft/wire.h has the
 * model).
 *
 * protobuf-c decodes everything, and encodes the rare frames (hello,
 * header, subscribe, control); the records of every collector pass are
 * encoded by hand (batch.c, update.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "weft/wire.h"
#include "wire_private.h"

/* ------------------------------------------------------------ buffers */

void weft_wire_buf_fini(weft_wire_buf_t *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

int weft_wire_buf_reserve(weft_wire_buf_t *b, size_t more)
{
	size_t cap = b->cap ? b->cap : 4096;
	uint8_t *p;

	if (more > SIZE_MAX / 2 - b->len)
		return -ENOMEM;
	if (b->len + more <= b->cap)
		return 0;
	while (cap < b->len + more)
		cap *= 2;
	p = realloc(b->data, cap);
	if (!p)
		return -ENOMEM;
	b->data = p;
	b->cap = cap;
	return 0;
}

/* ------------------------------------------------------------ records */

size_t weft_wire_varint_put(uint8_t *out, uint64_t v)
{
	return (size_t)(put_varint(out, v) - out);
}

size_t weft_wire_record_size(const Weft__V1__Frame *f)
{
	size_t len = protobuf_c_message_get_packed_size(&f->base);

	return 1 + varint_len(len) + len;
}

/*
 * weft_wire_record_pack() - one record into @out.
 * Return: bytes written; -ENOSPC if @cap is too small; -EMSGSIZE if the
 * frame exceeds WEFT_WIRE_MAX_RECORD.
 */
int weft_wire_record_pack(const Weft__V1__Frame *f, uint8_t *out, size_t cap)
{
	size_t len = protobuf_c_message_get_packed_size(&f->base), n;

	if (len > WEFT_WIRE_MAX_RECORD)
		return -EMSGSIZE;
	if (1 + varint_len(len) + len > cap)
		return -ENOSPC;
	out[0] = WEFT_WIRE_RECORD_TAG;
	n = 1 + weft_wire_varint_put(out + 1, len);
	n += protobuf_c_message_pack(&f->base, out + n);
	return (int)n;
}

/* Return: 0; -ENOMEM; -EMSGSIZE (buffer unchanged either way). */
int weft_wire_record_append(weft_wire_buf_t *b, const Weft__V1__Frame *f)
{
	size_t len = protobuf_c_message_get_packed_size(&f->base);
	size_t need = 1 + varint_len(len) + len;
	int err;

	if (len > WEFT_WIRE_MAX_RECORD)
		return -EMSGSIZE;
	err = weft_wire_buf_reserve(b, need);
	if (err)
		return err;
	err = weft_wire_record_pack(f, b->data + b->len, need);
	if (err < 0)
		return err;
	b->len += (size_t)err;
	return 0;
}

/*
 * weft_wire_record_len() - the length of the whole record @rec starts
 * with (its header and its Frame), from the header; 0 when @n bytes do
 * not hold one (not a record tag, a bad length, or cut short).
 */
size_t weft_wire_record_len(const uint8_t *rec, size_t n)
{
	uint64_t len;
	size_t k;

	if (n < 2 || rec[0] != WEFT_WIRE_RECORD_TAG)
		return 0;
	k = varint_get(rec + 1, n - 1, &len);
	if (!k || len > n - 1 - k)
		return 0;
	return 1 + k + (size_t)len;
}

/* ------------------------------------------------------------ decoder */

void weft_wire_decoder_init(weft_wire_decoder_t *d, size_t max_record)
{
	memset(d, 0, sizeof(*d));
	d->max_record = max_record ? max_record : WEFT_WIRE_MAX_RECORD;
}

void weft_wire_decoder_fini(weft_wire_decoder_t *d)
{
	free(d->body);
	d->body = NULL;
	d->body_cap = 0;
}

void weft_wire_frame_free(Weft__V1__Frame *f)
{
	if (f)
		weft__v1__frame__free_unpacked(f, NULL);
}

bool weft_wire_decoder_mid_record(const weft_wire_decoder_t *d)
{
	return d->in_body || d->hdr_len;
}

const char *weft_wire_strerror(int err)
{
	switch (err) {
	case -EMSGSIZE:
		return "record longer than the limit";
	case -EILSEQ:
		return "not a record (bad tag or malformed length)";
	case -EBADMSG:
		return "frame does not decode";
	case -ENOMEM:
		return "out of memory";
	default:
		return "unknown error";
	}
}

/*
 * Parses the header bytes gathered so far.  Return: 1 with *len set when
 * whole, 0 when more bytes are needed, or a negative error.
 */
static int header_parse(const uint8_t *h, size_t n, size_t max, size_t *len)
{
	uint64_t v = 0;

	if (n < 1)
		return 0;
	if (h[0] != WEFT_WIRE_RECORD_TAG)
		return -EILSEQ;
	for (size_t i = 1; i < n; i++) {
		if (i > 10)
			return -EILSEQ;
		if (i == 10 && h[i] > 1)
			return -EILSEQ; /* beyond 64 bits */
		v |= (uint64_t)(h[i] & 0x7f) << (7 * (i - 1));
		if (!(h[i] & 0x80)) {
			if (v > max)
				return -EMSGSIZE;
			*len = (size_t)v;
			return 1;
		}
	}
	return n >= 11 ? -EILSEQ : 0;
}

static int body_unpack(weft_wire_decoder_t *d, const uint8_t *p, size_t n,
		       Weft__V1__Frame **frame)
{
	Weft__V1__Frame *f;

	if (d->take && d->take(d->take_ctx, p, n)) {
		d->records++;
		*frame = NULL;
		return WEFT_WIRE_FRAME;
	}
	f = weft__v1__frame__unpack(NULL, n, p);

	if (!f)
		return d->error = -EBADMSG;
	d->records++;
	*frame = f;
	return WEFT_WIRE_FRAME;
}

/*
 * Room in the body's buffer for its first @need bytes (@need <= body_len),
 * grown by doubling as the bytes arrive: a record costs what has come of
 * it, not what its header claims.  A peer that sends a 4 MiB header and
 * a byte holds a few KiB, and so does a torn record at a file's end.
 */
static bool body_room(weft_wire_decoder_t *d, size_t need)
{
	size_t cap = d->body_cap ? d->body_cap : 4096;
	uint8_t *b;

	if (need <= d->body_cap)
		return true;
	while (cap < need)
		cap *= 2;
	if (cap > d->body_len)
		cap = d->body_len;
	b = realloc(d->body, cap);
	if (!b)
		return false;
	d->body = b;
	d->body_cap = cap;
	return true;
}

/*
 * weft_wire_decoder_feed() - give the decoder stream bytes.
 * @data, @len: the bytes; @used: how many it took (all, unless a frame
 * ended first); @frame: receives a whole frame (free it with
 * weft_wire_frame_free()).
 *
 * Takes no bytes past the end of a frame, so the caller feeds the rest
 * next.  A record whose bytes are all in @data is decoded in place.
 *
 * Return: WEFT_WIRE_FRAME, WEFT_WIRE_NEED_MORE, or an error (see
 * weft/wire.h), after which every call returns the same error.
 */
int weft_wire_decoder_feed(weft_wire_decoder_t *d, const void *data,
			    size_t len, size_t *used, Weft__V1__Frame **frame)
{
	const uint8_t *p = data;
	size_t i = 0;
	int rc;

	*used = 0;
	*frame = NULL;
	if (d->error)
		return d->error;
	while (i < len) {
		if (!d->in_body) {
			if (!d->hdr_len)
				d->record_offset = d->offset;
			d->hdr[d->hdr_len++] = p[i++];
			d->offset++;
			rc = header_parse(d->hdr, d->hdr_len, d->max_record,
					  &d->body_len);
			if (rc < 0) {
				*used = i;
				return d->error = rc;
			}
			if (rc == 0)
				continue;
			d->hdr_len = 0;
			d->in_body = true;
			d->body_have = 0;
			if (len - i >= d->body_len) {
				/* Whole in the caller's bytes. */
				d->in_body = false;
				rc = body_unpack(d, p + i, d->body_len, frame);
				i += d->body_len;
				d->offset += d->body_len;
				*used = i;
				return rc;
			}
			continue;
		}
		size_t take = d->body_len - d->body_have;

		if (take > len - i)
			take = len - i;
		if (!body_room(d, d->body_have + take)) {
			*used = i;
			return d->error = -ENOMEM;
		}
		memcpy(d->body + d->body_have, p + i, take);
		d->body_have += take;
		d->offset += take;
		i += take;
		if (d->body_have == d->body_len) {
			d->in_body = false;
			rc = body_unpack(d, d->body, d->body_len, frame);
			if (!d->keep_body) {
				free(d->body);
				d->body = NULL;
				d->body_cap = 0;
			}
			*used = i;
			return rc;
		}
	}
	*used = i;
	return WEFT_WIRE_NEED_MORE;
}
