/* SPDX-License-Identifier: MIT */
/*
 * The whole public API of libweft, from C or C++.  A few of the headers
 * it includes (weft/probe_model.h, the probe's structs) are installed
 * with libweft-wire, whose own API (weft/wire.h and the trace readers)
 * is not included here: a package of libweft's headers needs them too.
 */
#ifndef WEFT_H
#define WEFT_H

#include "weft/common.h"
#include "weft/future.h"
#include "weft/runtime.h"
#include "weft/sync.h"
#include "weft/sync_async.h"
#include "weft/time.h"
#include "weft/blocking.h"
#include "weft/fs.h"
#include "weft/fiber.h"
#include "weft/net.h"
#include "weft/fd.h"
#include "weft/mutex.h"
#include "weft/metrics.h"
#include "weft/probe.h"
#include "weft/trace.h"
#include "weft/metrics_endpoint.h"

#endif /* WEFT_H */
