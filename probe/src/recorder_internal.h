/* SPDX-License-Identifier: MIT */
/*
 * The recorder's face inside libweft (the API is weft/trace.h).
 */
#ifndef WEFT_RECORDER_INTERNAL_H
#define WEFT_RECORDER_INTERNAL_H

/* recorder.c: WEFT_TRACE=path starts recording, once per process
 * (weft_runtime_create() calls it); a failure is reported on stderr. */
void weft__trace_env_start(void);

struct weft_wire_buf_s;
/* recorder.c: the flight recorder's snapshot (what weft_trace_snapshot()
 * writes) appended to @out.  Return: 0; -ENOENT; -ENOMEM. */
int weft__trace_snapshot_append(struct weft_wire_buf_s *out);

#endif /* WEFT_RECORDER_INTERNAL_H */
