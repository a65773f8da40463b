/* SPDX-License-Identifier: MIT */
/*
 * The names of the event and warning kinds (weft/probe_events.h,
 * weft/probe_model.h), as the tools print them.
 */
#include "weft/wire.h"

const char *weft_event_kind_name(unsigned kind)
{
	switch (kind) {
#define WEFT_X_CASE(name, value, label, doc)                                   \
	case value:                                                            \
		return label;
		WEFT_EVENT_KINDS(WEFT_X_CASE)
#undef WEFT_X_CASE
	}
	return "?";
}

const char *weft_warning_kind_name(unsigned kind)
{
	switch (kind) {
#define WEFT_X_CASE(name, value, label)                                        \
	case value:                                                            \
		return label;
		WEFT_WARNING_KINDS(WEFT_X_CASE)
#undef WEFT_X_CASE
	}
	return "?";
}

const char *weft_resource_kind_name(unsigned kind)
{
	switch (kind) {
#define WEFT_X_CASE(name, value, label)                                        \
	case value:                                                            \
		return label;
		WEFT_RESOURCE_KINDS(WEFT_X_CASE)
#undef WEFT_X_CASE
	}
	return "?";
}

bool weft_resource_kind_contends(unsigned kind)
{
	switch (kind) {
	case WEFT_RES_MUTEX:
	case WEFT_RES_SEMAPHORE:
	case WEFT_RES_SYNC_MUTEX:
	case WEFT_RES_BLOCKING_POOL:
	case WEFT_RES_MPSC:
		return true;
	default:
		return false;
	}
}

const char *weft_resource_op_name(unsigned op)
{
	switch (op & WEFT_RES_OP_MASK) {
#define WEFT_X_CASE(name, value, label)                                        \
	case value:                                                            \
		return label;
		WEFT_RESOURCE_OPS(WEFT_X_CASE)
#undef WEFT_X_CASE
	}
	return "?";
}
