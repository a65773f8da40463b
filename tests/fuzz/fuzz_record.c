/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the record decoder (proto/src/record.c) on bytes from
 * outside, as a socket would deliver them.  The first byte picks a chunk
 * size, so records also arrive split at every boundary; every frame that
 * decodes is encoded again and its event batches rebuilt.
 */
#include <stdint.h>
#include <stdlib.h>

#include "weft/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	static weft_event_t ev[WEFT_WIRE_BATCH_MAX];
	weft_wire_decoder_t d;
	size_t chunk, off = 1;

	if (len < 1)
		return 0;
	chunk = (size_t)data[0] + 1;
	weft_wire_decoder_init(&d, 64 << 10);
	while (off < len) {
		size_t take = len - off < chunk ? len - off : chunk, used;
		Weft__V1__Frame *f;
		int rc = weft_wire_decoder_feed(&d, data + off, take, &used,
						 &f);

		off += used;
		if (rc < 0)
			break;
		if (rc != WEFT_WIRE_FRAME)
			continue;
		/* Whatever decodes also encodes again. */
		uint8_t *buf = malloc(weft_wire_record_size(f));

		if (buf)
			(void)weft_wire_record_pack(f, buf,
						     weft_wire_record_size(f));
		free(buf);
		if (f->body_case == WEFT__V1__FRAME__BODY_EVENTS)
			(void)weft_wire_batch_decode(f->events, ev,
						      WEFT_WIRE_BATCH_MAX);
		weft_wire_frame_free(f);
	}
	weft_wire_decoder_fini(&d);
	return 0;
}
