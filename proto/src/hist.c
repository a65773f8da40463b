/* SPDX-License-Identifier: MIT */
/*
 * The log-linear duration histogram (weft_hist_t, weft/probe_model.h): its
 * buckets and percentiles, for the collector that fills it and the tools
 * that read it.  weft_hist_index() is inline in weft/wire.h, for the
 * collector's per-event paths.
 */
#include "weft/wire.h"

uint64_t weft_hist_bucket_upper(unsigned i)
{
	unsigned e;

	if (i == 0)
		return 64;
	e = 6 + (i - 1) / 2;
	return (i - 1) % 2 ? (1ull << (e + 1)) : (3ull << (e - 1));
}

void weft_hist_record(weft_hist_t *h, uint64_t ns)
{
	weft_hist_add(h, ns);
}

uint64_t weft_hist_percentile(const weft_hist_t *h, double p)
{
	uint64_t want, seen = 0;

	if (!h->count)
		return 0;
	want = (uint64_t)((p / 100.0) * (double)h->count + 0.5);
	if (want == 0)
		want = 1;
	for (unsigned i = 0; i < WEFT_HIST_BUCKETS; i++) {
		seen += h->buckets[i];
		if (seen >= want) {
			uint64_t up = weft_hist_bucket_upper(i);

			return up < h->max_ns ? up : h->max_ns;
		}
	}
	return h->max_ns;
}
