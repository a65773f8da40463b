/* SPDX-License-Identifier: MIT */
/*
 * The server's state, shared by its files and by no one else: server.c
 * (its life, the loop's thread and timers, the listeners),
 * server_stream.c (the collector-side streams: the probe subscription,
 * the queue to the server thread and its delivery to the clients) and
 * server_client.c (a client's connection: its requests and its output).
 * server_internal.h has the protocol and the flow; server.c the threads,
 * the locks and the memory bounds.
 */
#ifndef WEFT_SERVER_STATE_INTERNAL_H
#define WEFT_SERVER_STATE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include <event2/util.h>

#include "bind.h"
#include "delta_internal.h"
#include "server_internal.h"
#include "weft/probe.h"
#include "weft/time.h"
#include "weft/wire.h"

/* A file as made: what a path names may change under us. */
typedef struct {
	dev_t dev;
	ino_t ino;
} weft__file_id_t;

struct bufferevent;
struct event;
struct event_base;
struct evconnlistener;

/* Distinct (interval, filter) pairs among the clients at once. */
#define MAX_STREAMS 8
/* A client's marks of when its output was queued (struct client). */
#define LAG_MARKS 32
#define LAG_MARK_NS 10000000ull
/* No gen: no full record, or no backlog, known (gens count from 0). */
#define GEN_NONE UINT64_MAX

enum item_kind { ITEM_UPDATE, ITEM_EVENTS };

struct item {
	struct item *next;
	enum item_kind kind;
	bool full;
	/*
	 * Once delivered (server thread only): the delivery's own reference
	 * and one for each client output buffer that holds the record by
	 * reference (evbuffer_add_reference(): one copy for all its clients,
	 * not one each); the last one frees it.
	 */
	unsigned refs;
	unsigned stream; /* index in the sub_ctx that made it */
	/*
	 * 0: for every client of the stream.  Else a resync's (a full
	 * update made for the clients of the stream that were owed one,
	 * server_stream.c): its full record goes to the clients waiting
	 * for a full update only, the rest of it (the backlog) to those
	 * that took that full record (client.resync_gen).
	 */
	uint64_t gen;
	size_t nevents;
	weft_wire_buf_t buf;
};

/*
 * What one group of clients gets: those with the same publish interval
 * and filter share a stream, encoded once per pass.
 */
struct stream {
	uint32_t interval_ms;
	bool updates, events;
	weft_delta_t delta; /* its filter is the group's */
	weft_wire_events_t enc;
	/*
	 * A full update streamed (server_stream.c): the ids of the tasks
	 * its first record left out, the nfin that had finished first
	 * (their finished_ns in fin_ns, for a tombstone), then the live
	 * ones, each part ascending; and the first not yet sent; NULL when
	 * none is under way.  chunk: scratch for one record's tasks; tomb:
	 * for its tombstones (NULL until one is needed).  Collector thread
	 * only.
	 */
	uint64_t *backlog, *fin_ns;
	size_t nbacklog, nfin, backlog_at;
	uint64_t backlog_gen; /* the gen its records carry */
	/* A backlog is under way: a hint for the server thread, which then
	 * puts off asking for a resync's full pass (relaxed: resync_take()
	 * decides, under qlock, and the backlog's end asks again). */
	_Atomic bool backlog_busy;
	/* Bytes a task in its last backlog record (0: none yet). */
	size_t task_bytes;
	/* A client of it is owed a full update (guarded by qlock: set by
	 * the server thread, taken by the collector's next full pass). */
	bool resync_want;
	/* Its last client left, and its subscription went on for the
	 * others: set once by the server thread, never cleared; the
	 * collector makes nothing more for it (relaxed: a hint, see
	 * stream_gone() in server_stream.c). */
	_Atomic bool gone;
	/* Made with events, and none of its clients wants them now (all
	 * paused): no events made for it until one does.  Set and cleared
	 * by the server thread (plan_fits()), read by the collector's
	 * srv_on_events(); relaxed: a pass or two of events made for
	 * nobody, or missed by a client just resumed, is what a pause
	 * means anyway, and nothing else is published through it. */
	_Atomic bool muted;
	const weft_probe_task_t **chunk;
	size_t *chunk_end; /* backlog_at after each of chunk's tasks */
	weft_probe_task_t *tomb;
};

/* One probe subscription's encoder state: collector thread only (made
 * and freed by the server thread while it is not subscribed). */
struct sub_ctx {
	weft_server_t *srv;
	unsigned nstreams;
	/* Collector thread: its first (full) update was handed out; the
	 * last resync gen given. */
	bool had_full;
	uint64_t gen;
	/* Server thread: subscribed to events. */
	bool events;
	struct stream st[MAX_STREAMS];
};

struct client {
	weft_server_t *srv;
	struct client *next;
	struct bufferevent *bev;
	weft_wire_decoder_t dec;
	char peer[64];
	bool subscribed, want_updates, want_events, paused, need_full;
	uint32_t interval_ms; /* clamped */
	weft_delta_filter_t filter;
	int stream; /* in the active sub_ctx, -1 for none */
	/* The gen of the last full update it took (0: its subscription's
	 * own): it takes that full update's backlog records only. */
	uint64_t resync_gen;
	/* Owed a full update and asked one of its own for (the stream's
	 * backlog is paced by what it holds meanwhile). */
	bool resync_asked;
	uint64_t updates_skipped;
	uint64_t events_not_sent;
	uint64_t behind_since; /* over the bound since, or 0 */
	bool tcp;              /* came through the TCP listener */
	bool authed; /* unix: at accept; TCP: once its token matched */
	bool spoke;  /* sent a whole request (TCP: the token) */
	uint64_t accepted_ns;
	uint64_t partial_since; /* a record unfinished since, or 0 */
	uint64_t dear_tat;      /* its dear requests' pace (server_client.c) */
	/*
	 * Whether its output drains: bytes queued since the last tick and
	 * what was queued then; output waiting and nothing drained since
	 * stall_since (0: it drains) for stall_ns, it is dropped.
	 */
	size_t added, tick_have;
	uint64_t stall_since;
	/*
	 * When its output's bytes were queued: marks of (bytes queued in
	 * all after a LAG_MARK_NS window of sends, the window's start),
	 * oldest first, those it has read past dropped (it has read what
	 * was queued less what waits).  The oldest mark left dates the
	 * oldest byte it has not read: events are not sent to a client
	 * that far behind (server_client.c, events_behind()).
	 */
	struct lag_mark {
		uint64_t total, at;
	} lag[LAG_MARKS];
	unsigned lag_head, lag_n;
	uint64_t queued;
	/*
	 * The pace it reads at while behind, bytes a second: over the last
	 * tick its output never ran empty in (0: not known yet); the tick's
	 * time, and when its output last ran empty (client_write_cb()).
	 */
	uint64_t drain_bps, tick_at, emptied_at;
	/* To be closed by weft__server_sweep(), for this reason (set where
	 * closing at once would free a client a caller still walks). */
	const char *drop_why;
};

struct weft_server_s {
	pthread_t thread;
	struct event_base *base;
	struct evconnlistener *unix_l, *tcp_l;
	struct event *wake_ev, *stop_ev, *tick_ev;
	/*
	 * Stopping (weft__server_destroy()): the pass that serves its flush
	 * is sent to every stream, due or not.  Release by the destroyer
	 * before its flush, acquire by the collector's update callback.
	 */
	atomic_bool final;
	/*
	 * accept(2) failing (out of descriptors): both listeners paused,
	 * resumed by accept_resume_ev; one line logged a second at most,
	 * with how many failed since the last.
	 */
	struct event *accept_resume_ev;
	weft__ratelimit_t accept_rl;
	char unix_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char token_path[sizeof(((struct sockaddr_un *)0)->sun_path) + 32];
	/* The socket we bound at unix_path: only that is unlinked (another
	 * server of this process may have bound its own there since). */
	weft__file_id_t unix_id;
	char token[WEFT_WIRE_TOKEN_MAX + 1]; /* zero-padded */
	int tcp_port;
	size_t buf_max;
	size_t total_max; /* over every client's output together */
	uint64_t kick_ns;
	uint64_t handshake_ns;
	uint64_t partial_ns;
	uint64_t stall_ns;
	size_t queue_max;
	size_t max_record;
	weft_wire_buf_t header; /* the FileHeader record sent on connect */

	/* Server thread only. */
	struct client *clients;
	unsigned nclients;
	/* Of them, through the TCP listener: it has a quota of its own, so
	 * that TCP peers never lock the owner out of the unix socket. */
	unsigned nclients_tcp;
	/* Lines about refused and closed clients: one a second at most. */
	weft__ratelimit_t refused_rl, close_rl;
	/* All output buffered, kept while a delivery runs (delivering):
	 * computed at its start, added to as it queues. */
	bool delivering;
	size_t out_total;
	weft_probe_sub_t *sub;
	struct sub_ctx *sub_ctx;
	uint64_t last_resync;
	/*
	 * The last new subscription or drop (weft__server_sub_reconcile()
	 * makes one at most every REPLAN_MIN_NS), and one asked for since,
	 * left to the tick (with @fresh, replan_fresh).
	 */
	uint64_t replanned_at;
	bool replan_due, replan_fresh;
	/* A resync put off likewise (weft__server_resync()). */
	bool resync_due;
	/*
	 * The active subscription's full update has not been delivered
	 * yet: a client waiting for it is not resynced (a new subscription
	 * would throw away a first pass that may take seconds: seeding a
	 * record for each of 1,000,000 tasks).
	 */
	bool full_pending;
	uint64_t seen_drop_updates, seen_drop_events;
	/* The gen of the last full record delivered on each stream of the
	 * active context (GEN_NONE: none yet, or not known): who took it
	 * takes its backlog (stream_have()). */
	uint64_t full_gen[MAX_STREAMS];

	/* Guarded by qlock. */
	pthread_mutex_t qlock;
	struct sub_ctx *active;
	struct sub_ctx *retiring; /* the one active before (compared only) */
	struct item *qhead, *qtail;
	size_t qbytes;
	/* The most output any client of the active context's stream k
	 * holds, as the server thread last saw it, plus what it took from
	 * the queue since (a streamed full update is paced by it:
	 * server_stream.c). */
	size_t stream_have[MAX_STREAMS];
	uint64_t drop_updates, drop_events; /* events, not records */
	/* A resync's record dropped at push: its clients (resync_gen) are
	 * owed a full update again, the others not. */
	uint64_t drop_gen[MAX_STREAMS];
	/*
	 * Whether stream k's backlog still has a client (a backlog nobody
	 * takes is stopped: server_backlog.c).  bl_gen[k]: the gen of the
	 * backlog the collector started last on it (GEN_NONE: none since
	 * the context became active), set by the collector.  bl_keep[k]:
	 * the server thread's answer for gen bl_keep_gen[k], the bl_gen it
	 * read before its walk of the clients (stream_have()): a client of
	 * the stream took that gen's full record and is owed none since, or
	 * the record is still to be delivered and the stream has a client.
	 * owed[k]: a client of stream k is owed a full update (a resync's
	 * full pass is for someone).  bl_stopped[k]: a backlog of gen
	 * bl_stopped_gen[k] was stopped; the next delivery makes a client
	 * that took its full record after all (a race) owed one again, as
	 * for drop_gen.
	 */
	uint64_t bl_gen[MAX_STREAMS], bl_keep_gen[MAX_STREAMS];
	bool bl_keep[MAX_STREAMS], owed[MAX_STREAMS];
	bool bl_stopped[MAX_STREAMS];
	uint64_t bl_stopped_gen[MAX_STREAMS];
	/* The collector's counts, copied out by weft__server_stats(). */
	uint64_t backlog_records, backlogs_stopped, resync_fulls;

	/* Guarded by stat_lock. */
	pthread_mutex_t stat_lock;
	weft_server_stats_t st;
};

/* server.c */
void weft__server_log(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

/* Full updates of more tasks than this are streamed; the first record
 * holds STREAM_FIRST of them, each later one STREAM_CHUNK (about 130
 * bytes a task: 260 KiB). */
#define STREAM_MIN 4096u
#define STREAM_FIRST 1024u
#define STREAM_CHUNK 2048u
#define STREAM_MIN_CHUNK 64u
/* Backlog records a pass makes at most, in bytes (the collector's time
 * for it: about 10 ms at 1 GB/s of encoding, which it is not). */
#define STREAM_PASS_MAX (4u << 20)

/* server_stream.c */
void weft__server_item_free(struct item *it);
bool weft__server_push(struct sub_ctx *x, struct item *it);
const weft_probe_task_t *weft__server_lookup(uint64_t id);

/* server_backlog.c: a streamed full update's backlog */
void weft__server_backlog_free(struct stream *st);
/* Collector: @st's clients all left; its backlog freed (server_backlog.c). */
bool weft__server_stream_gone(struct stream *st);
bool weft__server_stream_start(struct stream *st, const weft_probe_update_t *u,
			       const weft_probe_task_t ***page, size_t *npage);
void weft__server_backlog_pump(struct sub_ctx *x, unsigned k);
bool weft__server_owed(const struct sub_ctx *x, unsigned k);
void weft__server_item_unref(const void *data, size_t len, void *arg);
bool weft__server_client_active(const struct client *c);
int weft__server_plan_find(const struct stream *plan, unsigned n,
			   const struct client *c);
bool weft__server_sub_reconcile(weft_server_t *s, bool fresh);
#define REPLAN_MIN_NS 200000000ull
/* A reconcile put off by the pacing, once its time has come (the tick). */
void weft__server_replan_due(weft_server_t *s);
bool weft__server_resync(weft_server_t *s, const struct client *only);
void weft__server_sub_drop(weft_server_t *s);
void weft__server_deliver(weft_server_t *s);
/* server_deliver.c: @list's records to their streams' clients, and the
 * @du updates and @de events dropped since told to them. */
void weft__server_deliver_list(weft_server_t *s, struct item *list, uint64_t du,
			       uint64_t de);
void weft__server_stream_have(weft_server_t *s);

/* server_client.c */
void weft__server_client_close(struct client *c, const char *why, bool bad);
bool weft__server_client_send(struct client *c, const void *data, size_t len,
			      bool bounded);
void weft__server_client_send_update(struct client *c, struct item *it);
bool weft__server_client_send_item(struct client *c, struct item *it);
void weft__server_accept_cb(struct evconnlistener *l, evutil_socket_t fd,
			    struct sockaddr *sa, int salen, void *arg);
size_t weft__server_total_buffered(const weft_server_t *s);
void weft__server_client_drop(struct client *c, const char *why);
void weft__server_sweep(weft_server_t *s);

/* server_auth.c */
int weft__server_token_make(char *hex, size_t len);
int weft__server_token_write(const char *path, const char *token);
void weft__server_token_unlink(const char *path, const char *token);
bool weft__file_id_of(const char *path, weft__file_id_t *id);
void weft__unlink_if_same(const char *path, const weft__file_id_t *id);
bool weft__server_token_equal(const char *want, const char *got,
			      size_t got_len);

#endif /* WEFT_SERVER_STATE_INTERNAL_H */
