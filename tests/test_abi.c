/* SPDX-License-Identifier: MIT */
/*
 * The ABI of the installed headers (weft/common.h, "ABI that can grow").
 *
 * The size, alignment and field offsets of every installed struct are
 * pinned here, at compile time, on LP64 x86_64 and aarch64 (elsewhere
 * the pins are skipped): a change to a public struct fails this test's
 * build until the test is changed with it, on purpose.  Structs that may
 * grow pin their reserved words (where they start, how many, and that
 * they end the struct); private-layout ones pin only their size and
 * alignment, and the fields callers read (a future's status).  The one
 * difference between the two ABIs is glibc's pthread_mutex_t (40 bytes
 * on x86_64, 48 on aarch64), which the primitives that embed one add as
 * MTX.
 *
 * The numbers came from the build (gdb's ptype /o over every struct);
 * to change one, change the header, then the line here, and say why in
 * the commit.
 *
 * The cases check the rule's behaviour: every call that reads a
 * caller-filled struct refuses non-zero reserved words with -EINVAL (and
 * runs no callback), the spawn macros' own initialisers pass, and what
 * the library fills has its reserved words zero.
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "test_helpers.h"

#include "weft/weft.h"
#include "weft/metrics_endpoint.h"
#include "weft/probe.h"
#include "weft/probe_events.h"
#include "weft/probe_model.h"
#include "weft/trace.h"
#include "weft/trace_reader.h"
#include "weft/trace_stream.h"
#include "weft/wire.h"

#if defined(__LP64__) && (defined(__x86_64__) || defined(__aarch64__))
#define ABI_PINNED 1

#if defined(__x86_64__)
#define MTX 40
#else
#define MTX 48
#endif
_Static_assert(sizeof(pthread_mutex_t) == MTX, "glibc's pthread_mutex_t");

#define ABI_SIZE(type, size, align)                                            \
	_Static_assert(sizeof(type) == (size) && _Alignof(type) == (align),    \
		       #type ": size or alignment changed")
#define ABI_FIELD(type, field, offset)                                         \
	_Static_assert(offsetof(type, field) == (offset),                      \
		       #type "." #field ": offset changed")
/* @words reserved words at @offset, the struct's last bytes. */
#define ABI_RESERVED(type, offset, words)                                      \
	_Static_assert(offsetof(type, reserved_) == (offset) &&                \
			       sizeof(((type *)0)->reserved_) ==               \
				       (words) * sizeof(uint64_t) &&           \
			       (offset) + (words) * sizeof(uint64_t) ==        \
				       sizeof(type),                           \
		       #type ".reserved_: moved, resized or not last")

/* weft/runtime.h */
ABI_SIZE(weft_config_t, 96, 8);
ABI_FIELD(weft_config_t, workers, 0);
ABI_FIELD(weft_config_t, global_queue_interval, 4);
ABI_FIELD(weft_config_t, max_lifo_polls, 8);
ABI_FIELD(weft_config_t, disable_lifo, 12);
ABI_FIELD(weft_config_t, max_blocking_threads, 16);
ABI_FIELD(weft_config_t, blocking_keep_alive_ns, 24);
ABI_RESERVED(weft_config_t, 32, 8);

ABI_SIZE(weft_spawn_t, 88, 8);
ABI_FIELD(weft_spawn_t, poll, 0);
ABI_FIELD(weft_spawn_t, drop, 8);
ABI_FIELD(weft_spawn_t, state, 16);
ABI_FIELD(weft_spawn_t, size, 24);
ABI_FIELD(weft_spawn_t, name, 32);
ABI_FIELD(weft_spawn_t, file, 40);
ABI_FIELD(weft_spawn_t, line, 48);
ABI_FIELD(weft_spawn_t, kind, 52);
ABI_RESERVED(weft_spawn_t, 56, 4);

/* weft/blocking.h */
ABI_SIZE(weft_blocking_spec_t, 80, 8);
ABI_FIELD(weft_blocking_spec_t, fn, 0);
ABI_FIELD(weft_blocking_spec_t, arg, 8);
ABI_FIELD(weft_blocking_spec_t, discard, 16);
ABI_FIELD(weft_blocking_spec_t, name, 24);
ABI_FIELD(weft_blocking_spec_t, file, 32);
ABI_FIELD(weft_blocking_spec_t, line, 40);
ABI_RESERVED(weft_blocking_spec_t, 48, 4);

/* weft/fiber.h */
ABI_SIZE(weft_fiber_opts_t, 64, 8);
ABI_FIELD(weft_fiber_opts_t, stack_size, 0);
ABI_FIELD(weft_fiber_opts_t, name, 8);
ABI_FIELD(weft_fiber_opts_t, file, 16);
ABI_FIELD(weft_fiber_opts_t, line, 24);
ABI_RESERVED(weft_fiber_opts_t, 32, 4);

/* weft/metrics.h */
ABI_SIZE(weft_worker_metrics_t, 192, 8);
ABI_FIELD(weft_worker_metrics_t, polls, 0);
ABI_FIELD(weft_worker_metrics_t, steals, 8);
ABI_FIELD(weft_worker_metrics_t, steal_ops, 16);
ABI_FIELD(weft_worker_metrics_t, parks, 24);
ABI_FIELD(weft_worker_metrics_t, unparks, 32);
ABI_FIELD(weft_worker_metrics_t, noop_wakes, 40);
ABI_FIELD(weft_worker_metrics_t, local_schedules, 48);
ABI_FIELD(weft_worker_metrics_t, lifo_schedules, 56);
ABI_FIELD(weft_worker_metrics_t, global_schedules, 64);
ABI_FIELD(weft_worker_metrics_t, remote_schedules, 72);
ABI_FIELD(weft_worker_metrics_t, overflows, 80);
ABI_FIELD(weft_worker_metrics_t, spawned, 88);
ABI_FIELD(weft_worker_metrics_t, completed, 96);
ABI_FIELD(weft_worker_metrics_t, busy_ns, 104);
ABI_FIELD(weft_worker_metrics_t, forced_yields, 112);
ABI_FIELD(weft_worker_metrics_t, local_queue_depth, 120);
ABI_RESERVED(weft_worker_metrics_t, 128, 8);

ABI_SIZE(weft_runtime_metrics_t, 192, 8);
ABI_FIELD(weft_runtime_metrics_t, workers, 0);
ABI_FIELD(weft_runtime_metrics_t, live_tasks, 8);
ABI_FIELD(weft_runtime_metrics_t, spawned_tasks, 16);
ABI_FIELD(weft_runtime_metrics_t, global_queue_depth, 24);
ABI_FIELD(weft_runtime_metrics_t, remote_spawns, 32);
ABI_FIELD(weft_runtime_metrics_t, remote_wakes, 40);
ABI_FIELD(weft_runtime_metrics_t, blocking_threads, 48);
ABI_FIELD(weft_runtime_metrics_t, blocking_threads_busy, 56);
ABI_FIELD(weft_runtime_metrics_t, blocking_threads_idle, 64);
ABI_FIELD(weft_runtime_metrics_t, blocking_threads_peak, 72);
ABI_FIELD(weft_runtime_metrics_t, blocking_queue_depth, 80);
ABI_FIELD(weft_runtime_metrics_t, blocking_jobs, 88);
ABI_FIELD(weft_runtime_metrics_t, timers, 96);
ABI_FIELD(weft_runtime_metrics_t, timers_fired, 104);
ABI_FIELD(weft_runtime_metrics_t, io_events, 112);
ABI_FIELD(weft_runtime_metrics_t, forced_yields, 120);
ABI_RESERVED(weft_runtime_metrics_t, 128, 8);

/* weft/probe.h */
ABI_SIZE(weft_probe_sub_opts_t, 64, 8);
ABI_FIELD(weft_probe_sub_opts_t, events, 0);
ABI_FIELD(weft_probe_sub_opts_t, on_events, 8);
ABI_FIELD(weft_probe_sub_opts_t, on_update, 16);
ABI_FIELD(weft_probe_sub_opts_t, ctx, 24);
ABI_RESERVED(weft_probe_sub_opts_t, 32, 4);

ABI_SIZE(weft_probe_config_t, 144, 8);
ABI_FIELD(weft_probe_config_t, long_poll_ns, 0);
ABI_FIELD(weft_probe_config_t, sched_delay_ns, 8);
ABI_FIELD(weft_probe_config_t, interval_ns, 16);
ABI_FIELD(weft_probe_config_t, retain_ns, 24);
ABI_FIELD(weft_probe_config_t, retain_max, 32);
ABI_FIELD(weft_probe_config_t, ring_capacity, 40);
ABI_FIELD(weft_probe_config_t, large_future_bytes, 48);
ABI_FIELD(weft_probe_config_t, contention_ns, 56);
ABI_FIELD(weft_probe_config_t, wake_burst, 64);
ABI_FIELD(weft_probe_config_t, task_leak_window_ns, 72);
ABI_FIELD(weft_probe_config_t, task_leak_min, 80);
ABI_RESERVED(weft_probe_config_t, 88, 7);

/* weft/trace.h */
ABI_SIZE(weft_trace_opts_t, 64, 8);
ABI_FIELD(weft_trace_opts_t, max_file_bytes, 0);
ABI_FIELD(weft_trace_opts_t, max_files, 8);
ABI_FIELD(weft_trace_opts_t, flush_ms, 12);
ABI_FIELD(weft_trace_opts_t, flight_bytes, 16);
ABI_FIELD(weft_trace_opts_t, flight_ms, 24);
ABI_FIELD(weft_trace_opts_t, update_ms, 28);
ABI_RESERVED(weft_trace_opts_t, 32, 4);

ABI_SIZE(weft_trace_stats_t, 64, 8);
ABI_FIELD(weft_trace_stats_t, bytes_written, 0);
ABI_FIELD(weft_trace_stats_t, bytes_lost, 8);
ABI_FIELD(weft_trace_stats_t, write_errors, 16);
ABI_FIELD(weft_trace_stats_t, error, 24);
ABI_RESERVED(weft_trace_stats_t, 32, 4);

/* weft/metrics_endpoint.h */
ABI_SIZE(weft_metrics_endpoint_opts_t, 64, 8);
ABI_FIELD(weft_metrics_endpoint_opts_t, bind, 0);
ABI_FIELD(weft_metrics_endpoint_opts_t, max_conns, 8);
ABI_FIELD(weft_metrics_endpoint_opts_t, header_max, 16);
ABI_FIELD(weft_metrics_endpoint_opts_t, timeout_ms, 24);
ABI_FIELD(weft_metrics_endpoint_opts_t, histograms, 28);
ABI_RESERVED(weft_metrics_endpoint_opts_t, 32, 4);

/* weft/probe_model.h */
ABI_SIZE(weft_probe_task_t, 336, 8);
ABI_FIELD(weft_probe_task_t, id, 0);
ABI_FIELD(weft_probe_task_t, parent, 8);
ABI_FIELD(weft_probe_task_t, name, 16);
ABI_FIELD(weft_probe_task_t, file, 24);
ABI_FIELD(weft_probe_task_t, line, 32);
ABI_FIELD(weft_probe_task_t, state_size, 36);
ABI_FIELD(weft_probe_task_t, kind, 40);
ABI_FIELD(weft_probe_task_t, state, 41);
ABI_FIELD(weft_probe_task_t, last_worker, 42);
ABI_FIELD(weft_probe_task_t, status, 44);
ABI_FIELD(weft_probe_task_t, spawned_ns, 48);
ABI_FIELD(weft_probe_task_t, finished_ns, 56);
ABI_FIELD(weft_probe_task_t, polls, 64);
ABI_FIELD(weft_probe_task_t, busy_ns, 72);
ABI_FIELD(weft_probe_task_t, scheduled_ns, 80);
ABI_FIELD(weft_probe_task_t, idle_ns, 88);
ABI_FIELD(weft_probe_task_t, wakes, 96);
ABI_FIELD(weft_probe_task_t, self_wakes, 104);
ABI_FIELD(weft_probe_task_t, waker_clones, 112);
ABI_FIELD(weft_probe_task_t, waker_drops, 120);
ABI_FIELD(weft_probe_task_t, max_poll_ns, 128);
ABI_FIELD(weft_probe_task_t, warnings, 136);
ABI_FIELD(weft_probe_task_t, locks_held, 140);
ABI_FIELD(weft_probe_task_t, parked_file, 144);
ABI_FIELD(weft_probe_task_t, parked_line, 152);
ABI_FIELD(weft_probe_task_t, idle_since_ns, 160);
ABI_FIELD(weft_probe_task_t, waiting_on, 168);
ABI_FIELD(weft_probe_task_t, waiting_since_ns, 176);
ABI_FIELD(weft_probe_task_t, waiting_op, 184);
ABI_FIELD(weft_probe_task_t, nwaited, 185);
ABI_FIELD(weft_probe_task_t, waited, 192);
ABI_FIELD(weft_probe_task_t, poll_hist, 288);
ABI_FIELD(weft_probe_task_t, sched_hist, 296);
ABI_FIELD(weft_probe_task_t, site, 304);
ABI_RESERVED(weft_probe_task_t, 312, 3);

ABI_SIZE(weft_probe_worker_t, 592, 8);
ABI_FIELD(weft_probe_worker_t, index, 0);
ABI_FIELD(weft_probe_worker_t, state, 2);
ABI_FIELD(weft_probe_worker_t, current_task, 8);
ABI_FIELD(weft_probe_worker_t, poll_started_ns, 16);
ABI_FIELD(weft_probe_worker_t, counters, 24);
ABI_FIELD(weft_probe_worker_t, polls_per_s, 216);
ABI_FIELD(weft_probe_worker_t, steals_per_s, 224);
ABI_FIELD(weft_probe_worker_t, steal_rate, 232);
ABI_FIELD(weft_probe_worker_t, busy_ratio, 240);
ABI_FIELD(weft_probe_worker_t, mean_poll_ns, 248);
ABI_FIELD(weft_probe_worker_t, max_poll_ns, 256);
ABI_FIELD(weft_probe_worker_t, queue_depth, 264);
ABI_FIELD(weft_probe_worker_t, nstolen, 268);
ABI_FIELD(weft_probe_worker_t, stolen, 272);
ABI_FIELD(weft_probe_worker_t, stolen_out, 528);
ABI_FIELD(weft_probe_worker_t, events_dropped, 536);
ABI_FIELD(weft_probe_worker_t, off_cpu_ns, 544);
ABI_FIELD(weft_probe_worker_t, off_cpu_ratio, 552);
ABI_RESERVED(weft_probe_worker_t, 560, 4);

ABI_SIZE(weft_probe_steal_t, 16, 8);
ABI_FIELD(weft_probe_steal_t, victim, 0);
ABI_FIELD(weft_probe_steal_t, tasks, 8);

ABI_SIZE(weft_probe_resource_t, 296, 8);
ABI_FIELD(weft_probe_resource_t, id, 0);
ABI_FIELD(weft_probe_resource_t, kind, 8);
ABI_FIELD(weft_probe_resource_t, name, 16);
ABI_FIELD(weft_probe_resource_t, file, 24);
ABI_FIELD(weft_probe_resource_t, line, 32);
ABI_FIELD(weft_probe_resource_t, created_ns, 40);
ABI_FIELD(weft_probe_resource_t, dropped_ns, 48);
ABI_FIELD(weft_probe_resource_t, nholders, 56);
ABI_FIELD(weft_probe_resource_t, nwaiters, 60);
ABI_FIELD(weft_probe_resource_t, holders, 64);
ABI_FIELD(weft_probe_resource_t, waiters, 128);
ABI_FIELD(weft_probe_resource_t, owner, 192);
ABI_FIELD(weft_probe_resource_t, acquires, 200);
ABI_FIELD(weft_probe_resource_t, waits, 208);
ABI_FIELD(weft_probe_resource_t, acquires_per_s, 216);
ABI_FIELD(weft_probe_resource_t, oldest_wait_ns, 224);
ABI_FIELD(weft_probe_resource_t, longest_holder, 232);
ABI_FIELD(weft_probe_resource_t, longest_hold_ns, 240);
ABI_FIELD(weft_probe_resource_t, wait_hist, 248);
ABI_FIELD(weft_probe_resource_t, hold_hist, 256);
ABI_RESERVED(weft_probe_resource_t, 264, 4);

ABI_SIZE(weft_probe_warning_t, 264, 8);
ABI_FIELD(weft_probe_warning_t, seq, 0);
ABI_FIELD(weft_probe_warning_t, kind, 8);
ABI_FIELD(weft_probe_warning_t, worker, 10);
ABI_FIELD(weft_probe_warning_t, task, 16);
ABI_FIELD(weft_probe_warning_t, task_name, 24);
ABI_FIELD(weft_probe_warning_t, file, 32);
ABI_FIELD(weft_probe_warning_t, line, 40);
ABI_FIELD(weft_probe_warning_t, at_ns, 48);
ABI_FIELD(weft_probe_warning_t, value_ns, 56);
ABI_FIELD(weft_probe_warning_t, history, 64);
ABI_FIELD(weft_probe_warning_t, detail, 65);
ABI_FIELD(weft_probe_warning_t, count, 232);
ABI_RESERVED(weft_probe_warning_t, 240, 3);

ABI_SIZE(weft_probe_stats_t, 216, 8);
ABI_FIELD(weft_probe_stats_t, now_ns, 0);
ABI_FIELD(weft_probe_stats_t, start_ns, 8);
ABI_FIELD(weft_probe_stats_t, workers, 16);
ABI_FIELD(weft_probe_stats_t, live_tasks, 24);
ABI_FIELD(weft_probe_stats_t, spawned_tasks, 32);
ABI_FIELD(weft_probe_stats_t, global_queue_depth, 40);
ABI_FIELD(weft_probe_stats_t, events, 48);
ABI_FIELD(weft_probe_stats_t, events_dropped, 56);
ABI_FIELD(weft_probe_stats_t, warnings, 64);
ABI_FIELD(weft_probe_stats_t, events_per_s, 72);
ABI_FIELD(weft_probe_stats_t, polls_per_s, 80);
ABI_FIELD(weft_probe_stats_t, steals_per_s, 88);
ABI_FIELD(weft_probe_stats_t, clock, 96);
ABI_FIELD(weft_probe_stats_t, collector_cpu_ns, 104);
ABI_FIELD(weft_probe_stats_t, collector_cpu, 112);
ABI_FIELD(weft_probe_stats_t, blocking_busy, 120);
ABI_FIELD(weft_probe_stats_t, blocking_queued, 128);
ABI_FIELD(weft_probe_stats_t, blocking_jobs, 136);
ABI_FIELD(weft_probe_stats_t, tasks_end_unseen, 144);
ABI_RESERVED(weft_probe_stats_t, 152, 8);

ABI_SIZE(weft_probe_update_t, 112, 8);
ABI_FIELD(weft_probe_update_t, stats, 0);
ABI_FIELD(weft_probe_update_t, tasks, 8);
ABI_FIELD(weft_probe_update_t, ntasks, 16);
ABI_FIELD(weft_probe_update_t, workers, 24);
ABI_FIELD(weft_probe_update_t, nworkers, 32);
ABI_FIELD(weft_probe_update_t, warnings, 40);
ABI_FIELD(weft_probe_update_t, nwarnings, 48);
ABI_FIELD(weft_probe_update_t, full, 56);
ABI_FIELD(weft_probe_update_t, resources, 64);
ABI_FIELD(weft_probe_update_t, nresources, 72);
ABI_RESERVED(weft_probe_update_t, 80, 4);

ABI_SIZE(weft_hist_t, 296, 8);
ABI_FIELD(weft_hist_t, buckets, 0);
ABI_FIELD(weft_hist_t, count, 264);
ABI_FIELD(weft_hist_t, sum_ns, 272);
ABI_FIELD(weft_hist_t, max_ns, 280);
ABI_FIELD(weft_hist_t, outliers, 288);

ABI_SIZE(weft_probe_task_wait_t, 24, 8);
ABI_FIELD(weft_probe_task_wait_t, res, 0);
ABI_FIELD(weft_probe_task_wait_t, total_ns, 8);
ABI_FIELD(weft_probe_task_wait_t, waits, 16);

/* weft/probe_events.h */
ABI_SIZE(weft_event_t, 32, 8);
ABI_FIELD(weft_event_t, ts, 0);
ABI_FIELD(weft_event_t, task, 8);
ABI_FIELD(weft_event_t, a1, 16);
ABI_FIELD(weft_event_t, a2, 24);
ABI_FIELD(weft_event_t, worker, 28);
ABI_FIELD(weft_event_t, kind, 30);
ABI_FIELD(weft_event_t, flags, 31);

/* weft/future.h */
ABI_SIZE(weft_waker_vtable_t, 32, 8);
ABI_FIELD(weft_waker_vtable_t, clone, 0);
ABI_FIELD(weft_waker_vtable_t, wake, 8);
ABI_FIELD(weft_waker_vtable_t, wake_by_ref, 16);
ABI_FIELD(weft_waker_vtable_t, drop, 24);

ABI_SIZE(weft_waker_t, 16, 8);
ABI_FIELD(weft_waker_t, vtable, 0);
ABI_FIELD(weft_waker_t, data, 8);

ABI_SIZE(weft_site_t, 16, 8);
ABI_FIELD(weft_site_t, file, 0);
ABI_FIELD(weft_site_t, line, 8);

ABI_SIZE(weft_yield_t, 1, 1);

/* weft/fd.h */
ABI_SIZE(weft_fd_ready_t, 8, 4);
ABI_FIELD(weft_fd_ready_t, events, 0);
ABI_FIELD(weft_fd_ready_t, token, 4);

/* weft/time.h */
ABI_SIZE(weft_timer_entry_t, 64, 8);

ABI_SIZE(weft_sleep_t, 64, 8);

ABI_SIZE(weft_timeout_t, 64, 8);

ABI_SIZE(weft_interval_t, 80, 8);

/* weft/sync.h */
ABI_SIZE(weft_countdown_t, 64 + MTX, 8);

/* weft/mutex.h */
ABI_SIZE(weft_mutex_t, 104, 8); /* + a weft_resource_t: a SYNC_MUTEX resource */

/* weft/resource.h */
ABI_SIZE(weft_resource_t, 40, 8);

/* weft/sync_async.h */
ABI_SIZE(weft_waiter_t, 72, 8);

ABI_SIZE(weft_semaphore_t, 64 + MTX, 8);

ABI_SIZE(weft_semaphore_acquire_t, 96, 8);
ABI_FIELD(weft_semaphore_acquire_t, status, 88);

/* + the holder, for a collector that starts while a task waits */
ABI_SIZE(weft_async_mutex_t, 72 + MTX, 8);

ABI_SIZE(weft_async_mutex_lock_t, 96, 8);

ABI_SIZE(weft_notify_t, 80 + MTX, 8);

ABI_SIZE(weft_notified_t, 88, 8);
ABI_FIELD(weft_notified_t, status, 84);

ABI_SIZE(weft_mpsc_send_t, 96, 8);
ABI_FIELD(weft_mpsc_send_t, status, 92);

ABI_SIZE(weft_mpsc_recv_t, 32, 8);
ABI_FIELD(weft_mpsc_recv_t, status, 20);

ABI_SIZE(weft_branch_t, 32, 8);
ABI_FIELD(weft_branch_t, poll, 0);
ABI_FIELD(weft_branch_t, state, 8);
ABI_FIELD(weft_branch_t, drop, 16);
ABI_FIELD(weft_branch_t, done, 24);

/* weft/net.h */
ABI_SIZE(weft_connect_t, 16, 8);

/* weft/fs.h */
ABI_SIZE(weft_fs_read_file_t, 24, 8);

ABI_SIZE(weft_fs_write_file_t, 24, 8);

ABI_SIZE(weft_fs_sync_t, 24, 8);

/* weft/wire.h */
ABI_SIZE(weft_wire_buf_t, 24, 8);
ABI_FIELD(weft_wire_buf_t, data, 0);
ABI_FIELD(weft_wire_buf_t, len, 8);
ABI_FIELD(weft_wire_buf_t, cap, 16);

ABI_SIZE(weft_wire_decoder_t, 120, 8);
ABI_FIELD(weft_wire_decoder_t, offset, 0);
ABI_FIELD(weft_wire_decoder_t, record_offset, 8);
ABI_FIELD(weft_wire_decoder_t, records, 16);

ABI_SIZE(weft_wire_task_raw_t, 472, 8);
ABI_FIELD(weft_wire_task_raw_t, msg, 0);
ABI_SIZE(weft_wire_batch_t, 224, 8);
ABI_FIELD(weft_wire_batch_t, msg, 0);

ABI_SIZE(weft_wire_events_t, 248, 8);
ABI_FIELD(weft_wire_events_t, batch, 0);

ABI_SIZE(weft_wire_hello_t, 504, 8);
ABI_FIELD(weft_wire_hello_t, msg, 0);

/* weft/trace_reader.h */
ABI_SIZE(weft_trace_reader_t, 544, 8);
ABI_FIELD(weft_trace_reader_t, header, 0);
ABI_FIELD(weft_trace_reader_t, frames, 8);
ABI_FIELD(weft_trace_reader_t, truncated, 16);
ABI_FIELD(weft_trace_reader_t, error, 20);
ABI_FIELD(weft_trace_reader_t, error_offset, 24);
ABI_FIELD(weft_trace_reader_t, skipped, 32);
ABI_FIELD(weft_trace_reader_t, skips, 40);
ABI_FIELD(weft_trace_reader_t, first_skip, 48);
/* 488 -> 496: lean_upd, the lean Updates' state (issue 21). */
ABI_FIELD(weft_trace_reader_t, lean_upd, 488);
ABI_SIZE(weft_trace_tasks_t, 312, 8);

/* weft/trace_stream.h */
ABI_SIZE(weft_trace_item_t, 64, 8);
ABI_FIELD(weft_trace_item_t, kind, 0);
ABI_FIELD(weft_trace_item_t, frame, 8);
ABI_FIELD(weft_trace_item_t, offset, 16);
ABI_FIELD(weft_trace_item_t, size, 24);
ABI_FIELD(weft_trace_item_t, ev, 32);

ABI_SIZE(weft_trace_stream_opts_t, 24, 8);
ABI_FIELD(weft_trace_stream_opts_t, window_ns, 0);
ABI_FIELD(weft_trace_stream_opts_t, max_pending, 8);
ABI_FIELD(weft_trace_stream_opts_t, file_order, 16);
ABI_FIELD(weft_trace_stream_opts_t, lean, 17);
ABI_FIELD(weft_trace_stream_opts_t, lean_updates, 18);

#else
#define ABI_PINNED 0
#endif

static void test_abi_pinned_here(void **state)
{
	(void)state;
	if (!ABI_PINNED)
		skip(); /* not LP64 x86_64 or aarch64: nothing was pinned */
}

static int drops;

static void count_drop(void *st)
{
	(void)st;
	drops++;
}

static weft_poll_t ready_poll(void *st, weft_cx_t *cx)
{
	(void)st;
	(void)cx;
	return WEFT_READY;
}

static void *job(void *arg)
{
	return arg;
}

static void *fiber_fn(void *arg)
{
	return arg;
}

static void on_update(void *ctx, const weft_probe_update_t *u)
{
	(void)ctx;
	(void)u;
}

/* Every call that reads a caller-filled struct refuses reserved words
 * that are not zero, and nothing is started, spawned or called. */
static void test_abi_reserved_refused(void **state)
{
	weft_config_t cfg = { .workers = 1, .reserved_[7] = 1 };
	weft_spawn_t spec = { .poll = ready_poll, .drop = count_drop };
	weft_blocking_spec_t job_spec = { .fn = job, .reserved_[3] = 1 };
	weft_fiber_opts_t fopts = { .name = "abi", .reserved_[1] = 1 };
	weft_probe_sub_opts_t sopts = { .on_update = on_update,
					.reserved_[0] = 1 };
	weft_trace_opts_t topts = { .flight_bytes = 1 << 20,
				    .reserved_[2] = 1 };
	weft_metrics_endpoint_opts_t eopts = { .bind = "127.0.0.1:0",
					       .reserved_[3] = 1 };
	weft_metrics_endpoint_t *ep = NULL;
	weft_probe_sub_t *sub = NULL;
	weft_blocking_t *h = NULL;
	weft_runtime_t *rt = NULL;
	weft_join_t *join = NULL;

	(void)state;
	assert_int_equal(weft_runtime_create(&cfg, &rt), -EINVAL);
	assert_null(rt);

	rt = rt_create(1);
	for (unsigned i = 0; i < 4; i++) {
		memset(spec.reserved_, 0, sizeof(spec.reserved_));
		spec.reserved_[i] = 1u << i;
		drops = 0;
		assert_int_equal(weft_spawn_with(rt, &spec, &join), -EINVAL);
		assert_null(join);
		assert_int_equal(drops, 0);
	}
	assert_int_equal(weft_spawn_blocking_with(rt, &job_spec, &h), -EINVAL);
	assert_null(h);
	assert_int_equal(weft_spawn_fiber_with(rt, &fopts, fiber_fn, NULL,
					       &join),
			 -EINVAL);
	assert_null(join);
	assert_int_equal(weft_probe_subscribe(&sopts, &sub), -EINVAL);
	assert_null(sub);
	assert_int_equal(weft_trace_start(NULL, &topts), -EINVAL);
	assert_int_equal(weft_metrics_endpoint_create(&eopts, &ep), -EINVAL);
	assert_null(ep);
	weft_runtime_destroy(rt);
}

/* The short macros fill the specs positionally: their reserved words are
 * zero and the calls go through. */
static void test_abi_macros_pass(void **state)
{
	weft_runtime_t *rt = rt_create(1);
	weft_join_t *task = NULL, *fiber = NULL;
	weft_blocking_t *h = NULL;
	int arg = 7, st = 0;
	void *out = NULL;

	(void)state;
	drops = 0;
	assert_int_equal(weft_spawn_drop(rt, "abi", ready_poll, count_drop, &st,
					 &task),
			 0);
	assert_int_equal(weft_spawn_fiber(rt, "abi", fiber_fn, &arg, &fiber),
			 0);
	assert_int_equal(weft_spawn_blocking_named(rt, "abi", job, &arg, &h),
			 0);
	assert_int_equal(weft_join_wait(task, NULL), 0);
	assert_int_equal(weft_join_wait(fiber, &out), 0);
	assert_ptr_equal(out, &arg);
	out = NULL;
	assert_int_equal(weft_blocking_wait(h, &out), 0);
	assert_ptr_equal(out, &arg);
	weft_blocking_drop(h);
	weft_join_drop(fiber);
	weft_join_drop(task);
	weft_runtime_destroy(rt);
	assert_int_equal(drops, 1);
}

static bool all_zero(const uint64_t *w, size_t size)
{
	for (size_t i = 0; i < size / sizeof(*w); i++)
		if (w[i])
			return false;
	return true;
}

/* What the library fills for the caller has its reserved words zero,
 * whatever the caller's memory held. */
static void test_abi_filled_reserved_zero(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	weft_runtime_metrics_t rm;
	weft_worker_metrics_t wm;
	weft_probe_config_t pc;

	(void)state;
	memset(&rm, 0xff, sizeof(rm));
	assert_int_equal(weft_runtime_metrics(rt, &rm), 0);
	assert_true(all_zero(rm.reserved_, sizeof(rm.reserved_)));
	for (unsigned i = 0; i < 2; i++) {
		memset(&wm, 0xff, sizeof(wm));
		assert_int_equal(weft_worker_metrics(rt, i, &wm), 0);
		assert_true(all_zero(wm.reserved_, sizeof(wm.reserved_)));
	}
	memset(&pc, 0xff, sizeof(pc));
	weft_probe_config(&pc);
	assert_true(all_zero(pc.reserved_, sizeof(pc.reserved_)));
	weft_runtime_destroy(rt);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_abi_pinned_here),
		cmocka_unit_test(test_abi_reserved_refused),
		cmocka_unit_test(test_abi_macros_pass),
		cmocka_unit_test(test_abi_filled_reserved_zero),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
