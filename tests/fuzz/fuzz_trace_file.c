/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the trace-file reader (proto/src/trace_reader.c) on a
 * whole file, as weft-trace reads it: the header check, every frame, the
 * event batches.
 */
#include <stdint.h>
#include <stdlib.h>

#include "weft/trace_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	static weft_event_t ev[WEFT_WIRE_BATCH_MAX];
	weft_trace_reader_t r;
	Weft__V1__Frame *f;

	weft_trace_reader_open_mem(&r, data, len);
	while (weft_trace_reader_next(&r, &f) == 1) {
		if (f->body_case == WEFT__V1__FRAME__BODY_EVENTS)
			(void)weft_wire_batch_decode(f->events, ev,
						      WEFT_WIRE_BATCH_MAX);
		if (r.frames > 1)
			weft_wire_frame_free(f);
	}
	weft_trace_reader_close(&r);
	return 0;
}
