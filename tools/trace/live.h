/* SPDX-License-Identifier: MIT */
/*
 * weft-trace: talking to a live process's probe server (live.c), for the
 * list, record, snapshot and tasks verbs.
 *
 * A connection keeps the bytes of the frame it last returned, so a verb
 * can write records to a file exactly as the server sent them.
 */
#ifndef WEFT_TRACE_LIVE_H
#define WEFT_TRACE_LIVE_H

#include "trace_tool.h"
#include "weft/wire.h"

typedef struct tt_live_s {
	int fd;
	char what[300]; /* the target, for messages */
	weft_wire_decoder_t dec;
	uint8_t *buf; /* stream bytes from stream offset base on */
	size_t cap, len, feed;
	uint64_t base;
	bool eof;
	/* The last frame's record, in buf. */
	const uint8_t *rec;
	size_t rec_len;
} tt_live_t;

/* live.c */
int tt_live_connect(tt_live_t *l, const char *target, bool die);
int tt_live_connect_unix(tt_live_t *l, const char *path);
int tt_live_next(tt_live_t *l, int ms, Weft__V1__Frame **f);
void tt_live_send(tt_live_t *l, const Weft__V1__Frame *f);
void tt_live_close(tt_live_t *l);
uint64_t tt_parse_duration_ms(const char *s);
uint64_t tt_now_ms(void);

#endif /* WEFT_TRACE_LIVE_H */
