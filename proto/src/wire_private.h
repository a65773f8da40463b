/* SPDX-License-Identifier: MIT */
/*
 * The hand encoder's field writers, shared by the files of proto/src that
 * encode or read records by hand (record.c, batch.c, update.c).  Private:
 * not installed, not part of weft/wire.h.  Static inline, as they were in
 * one file: they are the encoders' inner loops.
 */
#ifndef WEFT_WIRE_PRIVATE_H
#define WEFT_WIRE_PRIVATE_H

#include <stddef.h>
#include <stdint.h>

/*
 * Bytes of @v as a varint: one per started group of seven bits, that is
 * 1 + lg / 7 for lg the index of its top bit; (lg * 9 + 73) / 64 is the
 * same for lg < 64, without the division (a multiply and a shift).
 */
static inline size_t varint_len(uint64_t v)
{
	unsigned lg = 63 - (unsigned)__builtin_clzll(v | 1);

	return (lg * 9 + 73) >> 6;
}

static inline uint8_t *put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

/*
 * Hand encoding (event batches, updates: the records of every pass).  The
 * helpers write what protobuf-c writes for a proto3 field: nothing for 0
 * or an empty string, the field's tag then its value otherwise.
 */
enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2 };

/* Our field numbers are below 2048: a tag is one or two bytes. */
static inline size_t tag_len(unsigned field)
{
	return field < 16 ? 1 : 2;
}

static inline uint8_t *put_tag(uint8_t *p, unsigned field, unsigned wt)
{
	return put_varint(p, (uint64_t)field << 3 | wt);
}

/* A varint field (uint32, uint64; bool as 0 or 1): absent when 0. */
static inline size_t uint_len(unsigned field, uint64_t v)
{
	return v ? tag_len(field) + varint_len(v) : 0;
}

static inline uint8_t *put_uint(uint8_t *p, unsigned field, uint64_t v)
{
	if (v) {
		p = put_tag(p, field, WT_VARINT);
		p = put_varint(p, v);
	}
	return p;
}

/* A submessage (or a packed list) whose body is @len bytes. */
static inline size_t sub_len(unsigned field, size_t len)
{
	return tag_len(field) + varint_len(len) + len;
}

static inline uint8_t *put_sub(uint8_t *p, unsigned field, size_t len)
{
	p = put_tag(p, field, WT_LEN);
	return put_varint(p, len);
}

/* Reads a varint at @p (at most @n bytes).  Return: its length, 0 if bad. */
static inline size_t varint_get(const uint8_t *p, size_t n, uint64_t *v)
{
	*v = 0;
	for (size_t i = 0; i < n && i < 10; i++) {
		*v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
		if (!(p[i] & 0x80))
			return i + 1;
	}
	return 0;
}

/* update_site.c: an Update's Site (field 11), its tag and length too */
size_t weft__wire_site_len(const struct weft_wire_site_s *s);
uint8_t *weft__wire_site_put(uint8_t *p, const struct weft_wire_site_s *s);

#endif /* WEFT_WIRE_PRIVATE_H */
