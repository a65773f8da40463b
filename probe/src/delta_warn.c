/* SPDX-License-Identifier: MIT */
/*
 * What a delta stream's full record spent on its warnings (the recorder
 * sizes the next full update without them: recorder.c rec_want_full()).
 * Apart from delta.c, which is at its thousand lines.
 */
#include "delta_internal.h"

/*
 * What @r's warnings take in its record: a record of them alone less an
 * empty one.  Encoded again only for a full update that carries some (a
 * new subscriber's history, a burst's), which is rare: 0 if that fails.
 */
size_t weft__delta_warn_bytes(const weft_delta_t *d,
			      const weft_probe_update_t *r)
{
	weft_probe_update_t w = { .stats = r->stats,
				  .warnings = r->warnings,
				  .nwarnings = r->nwarnings };
	weft_probe_update_t e = { .stats = r->stats };
	weft_wire_buf_t b = { 0 };
	size_t with = 0, without = 0;

	if (!weft_wire_update_append_sites(&b, &w, NULL, 0, d->prev_now_ns,
					   d->max_record, NULL)) {
		with = b.len;
		b.len = 0;
		if (!weft_wire_update_append_sites(&b, &e, NULL, 0,
						   d->prev_now_ns,
						   d->max_record, NULL))
			without = b.len;
		else
			with = 0;
	}
	weft_wire_buf_fini(&b);
	return with > without ? with - without : 0;
}
