/* SPDX-License-Identifier: MIT */
/*
 * The probe's server (server.c): consoles and `weft-trace record` attach
 * to a running process through it.  libevent, on its own thread; the
 * runtime's workers never touch a socket.
 *
 * The protocol (proto/weft.proto).  On connect the server sends a
 * FileHeader record (magic, version, the hello), so that a stream saved
 * as it comes is a valid trace file.  The client sends Subscribe (updates
 * and/or events, a publish interval, a filter); then Control frames:
 * pause and resume its event stream, one task's details (reply: an
 * Update holding that task, histograms included).  Any other frame, a
 * bad filter, a malformed or oversized record, or a peer gone mid-record
 * closes that connection with a logged reason (server_input.c turns
 * bytes into requests; server.c carries them out).
 *
 * Flow.  The server is a probe subscriber only while some client wants
 * something (events only while some unpaused client wants events).
 * Clients with the same interval and filter share a stream (at most
 * MAX_STREAMS): the collector's callbacks fold each pass into every
 * stream (delta_internal.h: changes accumulate until the interval has
 * passed, records are thin, full updates split under the record limit),
 * encode what is due once per stream and hand the records to the server
 * thread through a bounded queue (full: dropped and counted, the
 * collector never waits; events may fill only three quarters of it, so
 * that a flood of them leaves room for updates).  Each client has an output bound: an update
 * that does not fit is skipped (counted, and the count is in the Update
 * frames it does get), events that do not fit are counted as not sent; a
 * full update larger than the bound alone goes into an empty buffer; a
 * client behind for longer than slow_kick_ms is disconnected, and so is
 * one whose output has not drained at all for stall_ms (it stopped
 * reading).  All clients' output together is held to total_buf_max
 * (WEFT_CONSOLE_BUFFER_MB): over it, the client with the largest backlog
 * is dropped first.  A record shared by reference among clients is
 * counted once for each (the budget errs high: sixteen consoles holding
 * the same 4 MiB update count 64 MiB though it is held once).
 *
 * Who may attach (server_client.c, server_auth.c).  The unix socket
 * takes the process's owner or root (SO_PEERCRED), with a few of its
 * slots for the owner alone; TCP takes a client whose first record is a
 * Hello carrying the token, and sends nothing, its header included,
 * before that.  Each listener has its own number of clients, so TCP
 * peers cannot lock the owner out.  A client that has not said a whole
 * valid request (over TCP: the token) within handshake_ms, or that
 * leaves a record unfinished for partial_ms, is closed.
 *
 * WEFT_CONSOLE=off turns the default server off; WEFT_CONSOLE_BIND=
 * host:port adds a TCP listener (loopback unless the address says
 * otherwise, with a warning for any other, and one for loopback: other
 * local users can reach it), whose token is WEFT_CONSOLE_TOKEN or one
 * written to <socket dir>/<pid>.token.
 */
#ifndef WEFT_SERVER_INTERNAL_H
#define WEFT_SERVER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "delta_internal.h"
#include "weft/wire.h"

struct weft_runtime_s;

typedef struct weft_server_s weft_server_t;

typedef struct weft_server_opts_s {
	/* The unix socket (NULL: <socket dir>/<pid>.sock; "" for none). */
	const char *unix_path;
	/* "host:port" for a TCP listener too, or NULL. */
	const char *tcp_bind;
	uint32_t workers;       /* for the hello */
	size_t client_buf_max;  /* output bound per client; 0: 8 MiB */
	unsigned slow_kick_ms;  /* behind this long: dropped; 0: 5 s */
	size_t queue_max_bytes; /* collector -> server; 0: 32 MiB */
	/* Output held for all clients together; 0: 64 MiB. */
	size_t total_buf_max;
	/* A client that has not subscribed or asked for anything (over
	 * TCP: sent the token) this long after connecting is closed; 0:
	 * 5 s. */
	unsigned handshake_ms;
	/* A record left unfinished this long: closed; 0: 10 s. */
	unsigned partial_ms;
	/* Output waiting and none of it drained for this long: closed; 0:
	 * 5 s. */
	unsigned stall_ms;
	/* The TCP clients' token (at most WEFT_WIRE_TOKEN_MAX bytes); NULL:
	 * one is made and written to <socket dir>/<pid>.token. */
	const char *token;
	/* Updates are split into records of at most this many bytes; 0:
	 * WEFT_WIRE_MAX_RECORD (tests lower it). */
	size_t max_record;
} weft_server_opts_t;

typedef struct weft_server_stats_s {
	unsigned clients; /* connected now */
	uint64_t accepted;
	uint64_t closed_bad;      /* for a protocol error */
	uint64_t kicked;          /* for being slow */
	uint64_t updates_skipped; /* summed over clients */
	uint64_t queue_dropped;   /* records the queue had no room for */
	uint64_t resyncs; /* new subscriptions for a client owed a full update */
	size_t max_client_buffered; /* high-water mark of any output buffer */
	size_t max_total_buffered;  /* of all output buffers together */
	uint64_t handshake_closed;  /* silent past handshake_ms */
	uint64_t refused;           /* at accept: quota or uid */
	uint64_t auth_failed;       /* TCP: no token, or a wrong one */
	uint64_t partial_closed;    /* a record unfinished past partial_ms */
	/* Of kicked: not reading at all for stall_ms, and the largest
	 * backlog while all output was over total_buf_max. */
	uint64_t stalled;
	uint64_t over_budget;
	size_t client_buf_max;
	/* The largest full update queued alone because it is larger than
	 * client_buf_max (0 if none was). */
	size_t max_full_over_bound;
	unsigned subscribed; /* 1 while a probe subscriber */
	/* Records a streamed full update's backlog made; backlogs stopped
	 * because no client took them any more; full updates made for
	 * clients owed one (a resync's full pass, server_stream.c). */
	uint64_t backlog_records;
	uint64_t backlogs_stopped;
	uint64_t resync_fulls;
} weft_server_stats_t;

/* What a client asked for, from one frame (server_input.c). */
typedef enum weft_server_req_op_e {
	WEFT_SERVER_REQ_SUBSCRIBE,
	WEFT_SERVER_REQ_PAUSE,
	WEFT_SERVER_REQ_RESUME,
	WEFT_SERVER_REQ_TASK_DETAIL,
	WEFT_SERVER_REQ_SNAPSHOT,
	WEFT_SERVER_REQ_HELLO, /* a client's, with its token */
} weft_server_req_op_t;

typedef struct weft_server_request_s {
	weft_server_req_op_t op;
	bool updates, events;       /* SUBSCRIBE */
	uint32_t interval_ms;       /* SUBSCRIBE, clamped */
	weft_delta_filter_t filter; /* SUBSCRIBE; a handler may take it */
	uint64_t task;              /* TASK_DETAIL */
	/* HELLO: zero-padded (compared whole, in constant time); a longer
	 * one is cut, keeps its length in token_len and matches none. */
	char token[WEFT_WIRE_TOKEN_MAX + 1];
	size_t token_len;
} weft_server_request_t;

/* Carries out @r for a client.  Return: NULL, or why to close it. */
typedef const char *(*weft_server_input_cb)(void *ctx,
					    weft_server_request_t *r);

/* server_input.c */
uint32_t weft__server_interval_clamp(uint32_t ms);
const char *weft__server_request_parse(const Weft__V1__Frame *f,
				       weft_server_request_t *r);
void weft__server_request_fini(weft_server_request_t *r);
const char *weft__server_input_feed(weft_wire_decoder_t *d, const void *data,
				    size_t n, size_t *used,
				    weft_server_input_cb handle, void *ctx,
				    char *why, size_t len);

/* server.c */
int weft__server_create(const weft_server_opts_t *opts, weft_server_t **out);
void weft__server_destroy(weft_server_t *s);
const char *weft__server_unix_path(const weft_server_t *s);
int weft__server_tcp_port(const weft_server_t *s);
/* The TCP token, and the file it was written to ("" if given). */
const char *weft__server_token(const weft_server_t *s);
const char *weft__server_token_path(const weft_server_t *s);
void weft__server_stats(weft_server_t *s, weft_server_stats_t *out);
/* The default server, from the environment: started for the first
 * runtime (weft_runtime_create()), stopped with it. */
void weft__server_env_start(struct weft_runtime_s *rt);
void weft__server_env_stop(struct weft_runtime_s *rt);
weft_server_t *weft__server_default(void);

#endif /* WEFT_SERVER_INTERNAL_H */
