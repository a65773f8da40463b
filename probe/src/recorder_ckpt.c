/* SPDX-License-Identifier: MIT */
/*
 * The recorder's checkpoints (recorder.c calls these; issue 21): a full
 * update every so many bytes of a trace file, each after a mark
 * (weft/wire.h, weft_wire_ckpt_*) that a reader finds from any byte
 * offset, so that a replay can start anywhere from the state there
 * without reading the file before it.
 *
 * Spacing.  A mark is asked for once the file has WEFT_TRACE_CHECKPOINT_MB
 * (16 MB by default; 0: none) past the last one, and at least
 * REC_CKPT_RATIO times what the last one added past it (the full
 * update's bytes for the tasks a delta would not have named): a process
 * of 1,000,000 quiet tasks (a full update of about 100 MB) gets one
 * every 3 GB, so checkpoints stay about 3% of the file at most.  The spacing bounds
 * what a seek reads after the mark: 16 MB is about half a second of the
 * console's model.
 *
 * The full update is the collector's own (weft__sub_want_full(): the
 * next pass's update for this subscription names every task it holds,
 * made on the collector thread as for a new subscriber's first update;
 * the runtime's threads do not wait for it), asked from a callback and
 * marked when it comes.  Every full update that goes to a file is marked:
 * the first of a recording and of each rotated file too.  The mark goes
 * before the update's records in the file buffer (they are moved up by
 * its 54 bytes), with the update's time, its own offset and the last
 * mark's (0 for the first of a file, and after weft_trace_continue(): a
 * reader scans back for the one before).  Guarded by rec.lock, as the
 * rest of the recorder.
 */
#include <errno.h>
#include <string.h>

#include "knob.h"
#include "recorder_internal.h"
#include "weft/wire.h"

#define REC_CKPT_DEFAULT_MB 16u
#define REC_CKPT_RATIO 32u

void weft__rec_ckpt_start(weft_rec_ckpt_t *c)
{
	const weft__knob_t k = {
		.name = "WEFT_TRACE_CHECKPOINT_MB",
		.kind = WEFT__KNOB_SIZE,
		.unit = "MB",
		.def = REC_CKPT_DEFAULT_MB,
		.min = 0,
		.max = 1u << 20,
	};

	memset(c, 0, sizeof(*c));
	c->every = weft__knob(&k);
}

void weft__rec_ckpt_new_file(weft_rec_ckpt_t *c)
{
	c->last = 0;
	c->due = 0;
	c->asked = false;
}

bool weft__rec_ckpt_want(weft_rec_ckpt_t *c, uint64_t at)
{
	if (!c->every || c->asked || !c->due || at < c->due)
		return false;
	c->asked = true;
	return true;
}

int weft__rec_ckpt_mark(weft_rec_ckpt_t *c, weft_wire_buf_t *b, size_t before,
			uint64_t file_off, uint64_t now_ns, size_t tasks,
			size_t changed)
{
	size_t full = b->len - before;
	/* What the checkpoint adds: the full update's share of tasks that
	 * a delta would not have named (a service that spawns and ends
	 * 40,000 tasks between updates names them in every update). */
	uint64_t extra = tasks > changed ?
				 (uint64_t)full / tasks * (tasks - changed) :
				 0;
	uint64_t gap = extra * REC_CKPT_RATIO;
	weft_wire_ckpt_t m = {
		.time_ns = now_ns,
		.offset = file_off,
		.prev = c->last,
		.full_bytes = full,
	};
	int err;

	if (!c->every)
		return 0;
	err = weft_wire_buf_reserve(b, WEFT_WIRE_CKPT_LEN);
	if (err) {
		c->asked = false; /* the update goes unmarked: asked again */
		return err;
	}
	memmove(b->data + before + WEFT_WIRE_CKPT_LEN, b->data + before, full);
	weft_wire_ckpt_put(b->data + before, &m);
	b->len += WEFT_WIRE_CKPT_LEN;
	c->last = file_off;
	c->due = file_off + (gap > c->every ? gap : c->every);
	c->asked = false;
	c->marks++;
	return 0;
}
