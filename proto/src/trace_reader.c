/* SPDX-License-Identifier: MIT */
/*
 * Trace-file reading (weft/trace_reader.h has the model): the record
 * decoder fed from a file in 64 KiB reads, or from memory.  The first
 * frame must be the FileHeader; the reader keeps it (header) and returns
 * it too, so a tool sees every frame.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "weft/trace_reader.h"

int weft_trace_reader_open(weft_trace_reader_t *r, const char *path)
{
	memset(r, 0, sizeof(*r));
	r->fp = fopen(path, "rb");
	if (!r->fp)
		return -errno;
	weft_wire_decoder_init(&r->dec, 0);
	return 0;
}

void weft_trace_reader_open_mem(weft_trace_reader_t *r, const void *data,
				 size_t len)
{
	memset(r, 0, sizeof(*r));
	r->mem = data;
	r->mem_len = len;
	weft_wire_decoder_init(&r->dec, 0);
}

void weft_trace_reader_close(weft_trace_reader_t *r)
{
	if (r->fp)
		fclose(r->fp);
	r->fp = NULL;
	weft_wire_decoder_fini(&r->dec);
	weft_wire_frame_free(r->header_frame);
	r->header_frame = NULL;
	r->header = NULL;
}

const char *weft_trace_reader_strerror(int err)
{
	if (err == WEFT_TRACE_E_NOT_TRACE)
		return "not a weft trace (no file header)";
	if (err == -EIO)
		return "read error";
	return weft_wire_strerror(err);
}

/* More bytes into buf; false at the end. */
static bool refill(weft_trace_reader_t *r)
{
	if (r->mem) {
		size_t n = r->mem_len - r->mem_pos;

		if (n > sizeof(r->buf))
			n = sizeof(r->buf);
		memcpy(r->buf, r->mem + r->mem_pos, n);
		r->mem_pos += n;
		r->len = n;
	} else if (r->fp) {
		r->len = fread(r->buf, 1, sizeof(r->buf), r->fp);
		if (!r->len && ferror(r->fp))
			r->error = -EIO;
	} else {
		r->len = 0;
	}
	r->pos = 0;
	return r->len > 0;
}

static bool is_header(const Weft__V1__Frame *f)
{
	return f->body_case == WEFT__V1__FRAME__BODY_HEADER &&
	       f->header->magic && !strcmp(f->header->magic, WEFT_TRACE_MAGIC);
}

/*
 * weft_trace_reader_next() - the next frame.
 * @frame: receives it; the caller frees it with weft_wire_frame_free()
 * unless it is the header (r->header's frame, which the reader owns and
 * frees on close).
 *
 * Return: 1 with a frame; 0 at the end (r->truncated when the file ends
 * inside a record); a negative error (also in r->error): see
 * weft/wire.h, WEFT_TRACE_E_NOT_TRACE, -EIO.
 */
int weft_trace_reader_next(weft_trace_reader_t *r, Weft__V1__Frame **frame)
{
	*frame = NULL;
	if (r->error)
		return r->error;
	for (;;) {
		Weft__V1__Frame *f;
		size_t used;
		int rc;

		if (r->pos == r->len && !refill(r)) {
			if (r->error)
				return r->error;
			r->truncated = weft_wire_decoder_mid_record(&r->dec);
			return 0;
		}
		rc = weft_wire_decoder_feed(&r->dec, r->buf + r->pos,
					     r->len - r->pos, &used, &f);
		r->pos += used;
		if (rc < 0) {
			r->error_offset = r->dec.record_offset;
			return r->error = rc;
		}
		if (rc == WEFT_WIRE_NEED_MORE)
			continue;
		if (!r->frames && !is_header(f)) {
			weft_wire_frame_free(f);
			r->error_offset = 0;
			return r->error = WEFT_TRACE_E_NOT_TRACE;
		}
		if (!r->frames) {
			r->header_frame = f;
			r->header = f->header;
		}
		r->frames++;
		*frame = f;
		return 1;
	}
}

/*
 * weft_trace_reader_seek() - read on from the record that starts at
 * @offset (one a frame's record_offset named: the console's replay
 * index).  The header, read first, stays.
 * Return: 0, or a negative errno (-EINVAL before the header, or past
 * the end of a buffer).
 */
int weft_trace_reader_seek(weft_trace_reader_t *r, uint64_t offset)
{
	if (!r->frames)
		return -EINVAL;
	if (r->mem) {
		if (offset > r->mem_len)
			return -EINVAL;
		r->mem_pos = (size_t)offset;
	} else if (!r->fp || fseeko(r->fp, (off_t)offset, SEEK_SET)) {
		return r->fp ? -errno : -EINVAL;
	}
	weft_wire_decoder_fini(&r->dec);
	weft_wire_decoder_init(&r->dec, 0);
	r->dec.offset = offset;
	r->len = r->pos = 0;
	r->error = 0;
	r->error_offset = 0;
	r->truncated = false;
	return 0;
}
