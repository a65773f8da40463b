/* SPDX-License-Identifier: MIT */
/*
 * A client of the installed libweft-wire alone (tools/install-test.sh):
 * encodes a frame into a record, decodes it back byte by byte, names an
 * event kind.  Prints "ok".  Linking it must not need libweft.
 */
#include <stdio.h>
#include <string.h>

#include "weft/wire.h"

int main(void)
{
	Weft__V1__Frame f = WEFT__V1__FRAME__INIT;
	Weft__V1__Frame *out = NULL;
	weft_wire_buf_t buf = { 0 };
	weft_wire_decoder_t dec;
	int r = WEFT_WIRE_NEED_MORE;

	if (weft_wire_record_append(&buf, &f) < 0)
		return 1;
	weft_wire_decoder_init(&dec, WEFT_WIRE_MAX_RECORD);
	for (size_t i = 0; i < buf.len && r == WEFT_WIRE_NEED_MORE; i++) {
		size_t used;

		r = weft_wire_decoder_feed(&dec, buf.data + i, 1, &used, &out);
	}
	if (r != WEFT_WIRE_FRAME || !out) {
		fprintf(stderr, "decode: %s\n", weft_wire_strerror(r));
		return 1;
	}
	weft_wire_frame_free(out);
	weft_wire_decoder_fini(&dec);
	weft_wire_buf_fini(&buf);
	if (strcmp(weft_event_kind_name(WEFT_EV_POLL), "poll") != 0)
		return 1;
	puts("ok");
	return 0;
}
