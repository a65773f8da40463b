/* SPDX-License-Identifier: MIT */
/*
 * A trace file's checkpoint marks (weft/wire.h, weft.proto's Checkpoint):
 * a record of one fixed shape before a full update, so that a reader
 * that lands anywhere in a file finds the nearest state to start from
 * without decoding what is before it.
 *
 * The record, 54 bytes:
 *
 *   0   0x0a 0x34          Trace.frame, 52 bytes
 *   2   0x7a 0x32          Frame.checkpoint (field 15), 50 bytes
 *   4   0x09 "WEFTCKPT"    magic (fixed64)
 *   13  0x11 time_ns       fixed64
 *   22  0x19 offset        fixed64: where this record starts in its file
 *   31  0x21 prev          fixed64: the mark before it (0: none known)
 *   40  0x29 full_bytes    fixed64: the full update's records after it
 *   49  0x35 check         fixed32: FNV-1a of bytes [0, 49)
 *
 * Its first 13 bytes are the sync pattern a reader scans for.  Bytes
 * that happen to hold it (a task's name, an event's argument) are told
 * from a mark by the other tags, the check, and the offset: a mark
 * names its own place, which a copy of one elsewhere does not (a copy
 * made on purpose for its place would have to be planted there).  A
 * reader checks besides that the full update it announces is whole in
 * the file.  Written field by field, not by protobuf-c: proto3 leaves
 * zero fields out, and the shape must not change.
 */
#include <string.h>

#include "weft/wire.h"

static const uint8_t sync_bytes[WEFT_WIRE_CKPT_SYNC_LEN] = {
	0x0a, 0x34, 0x7a, 0x32, 0x09, 'W', 'E', 'F', 'T', 'C', 'K', 'P', 'T',
};

static const uint8_t tags[4] = { 0x11, 0x19, 0x21, 0x29 };

static uint32_t fnv1a(const uint8_t *p, size_t n)
{
	uint32_t h = 2166136261u;

	while (n--) {
		h ^= *p++;
		h *= 16777619u;
	}
	return h;
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

void weft_wire_ckpt_put(uint8_t *out, const weft_wire_ckpt_t *c)
{
	const uint64_t v[4] = { c->time_ns, c->offset, c->prev, c->full_bytes };
	uint32_t h;

	memcpy(out, sync_bytes, sizeof(sync_bytes));
	for (int i = 0; i < 4; i++) {
		out[13 + 9 * i] = tags[i];
		put64(out + 14 + 9 * i, v[i]);
	}
	h = fnv1a(out, 49);
	out[49] = 0x35;
	for (int i = 0; i < 4; i++)
		out[50 + i] = (uint8_t)(h >> (8 * i));
}

int weft_wire_ckpt_append(weft_wire_buf_t *b, const weft_wire_ckpt_t *c)
{
	int err = weft_wire_buf_reserve(b, WEFT_WIRE_CKPT_LEN);

	if (err)
		return err;
	weft_wire_ckpt_put(b->data + b->len, c);
	b->len += WEFT_WIRE_CKPT_LEN;
	return 0;
}

bool weft_wire_ckpt_get(const uint8_t *p, size_t n, uint64_t at,
			weft_wire_ckpt_t *c)
{
	uint32_t h = 0;

	if (n < WEFT_WIRE_CKPT_LEN || memcmp(p, sync_bytes, sizeof(sync_bytes)))
		return false;
	for (int i = 0; i < 4; i++)
		if (p[13 + 9 * i] != tags[i])
			return false;
	if (p[49] != 0x35)
		return false;
	for (int i = 3; i >= 0; i--)
		h = h << 8 | p[50 + i];
	if (h != fnv1a(p, 49) || get64(p + 23) != at)
		return false;
	c->time_ns = get64(p + 14);
	c->offset = at;
	c->prev = get64(p + 32);
	c->full_bytes = get64(p + 41);
	/* The previous mark is before this one, whole. */
	if (c->prev && c->prev + WEFT_WIRE_CKPT_LEN > at)
		return false;
	return true;
}

const uint8_t *weft_wire_ckpt_find(const uint8_t *p, size_t n)
{
	return memmem(p, n, sync_bytes, sizeof(sync_bytes));
}
