/* SPDX-License-Identifier: MIT */
/*
 * The recorder's face inside libweft (the API is weft/trace.h).
 */
#ifndef WEFT_RECORDER_INTERNAL_H
#define WEFT_RECORDER_INTERNAL_H

/* recorder.c: WEFT_TRACE=path starts recording, once per process
 * (weft_runtime_create() calls it); a failure is reported on stderr. */
void weft__trace_env_start(void);

#endif /* WEFT_RECORDER_INTERNAL_H */
