/* SPDX-License-Identifier: MIT */
/*
 * The channel shape: channel_throughput.
 *
 * Mirrors channel_throughput() in the Tokio anchor
 * (anchors/tokio-bench/src/main.rs): a bounded channel of CHAN_CAP u64s is
 * made before the clock starts; then one consumer task (receives until the
 * channel is closed, summing with wrap-around and counting) and one
 * producer task (sends 0..CHAN_MSGS-1, then drops its sender) are spawned
 * from the main thread, and main awaits the producer's join handle, then
 * the consumer's, in one block_on, as the anchor's rt.block_on does.  The
 * check: the count is CHAN_MSGS and the sum CHAN_MSGS * (CHAN_MSGS - 1) / 2.
 *
 * Threads: run function on main, the two tasks on the workers.  The
 * consumer writes its result through a pointer to main's struct before it
 * completes; main reads it after awaiting the consumer's join handle, whose
 * completion orders the writes before the read.
 */
#include <stdint.h>

#include "bench.h"

#define CHAN_MSGS 1000000u
#define CHAN_CAP 1024u

struct chan_result {
	uint64_t sum;
	uint64_t cnt;
};

/* The consumer: `while let Some(v) = rx.recv().await`. */
struct consumer {
	int weft_pc;
	weft_mpsc_rx_t *rx;
	weft_mpsc_recv_t recv;
	uint64_t v;
	uint64_t sum;
	uint64_t cnt;
	struct chan_result *out;
};

static weft_poll_t consumer_poll(void *arg, weft_cx_t *cx)
{
	struct consumer *st = arg;

	WEFT_ASYNC_BEGIN(st);
	/* One recv future, polled again for each element. */
	weft_mpsc_recv_init(&st->recv, st->rx, &st->v);
	for (;;) {
		WEFT_AWAIT(st, weft_mpsc_recv_poll(&st->recv, cx));
		if (st->recv.status)
			break;
		st->sum += st->v;
		st->cnt++;
	}
	weft_mpsc_recv_fini(&st->recv);
	weft_mpsc_rx_drop(st->rx);
	st->out->sum = st->sum;
	st->out->cnt = st->cnt;
	WEFT_ASYNC_END(st);
}

/* The producer: `for i in 0..CHAN_MSGS { tx.send(i).await.unwrap() }`. */
struct producer {
	int weft_pc;
	weft_mpsc_tx_t *tx;
	weft_mpsc_send_t send;
	uint64_t i;
};

static weft_poll_t producer_poll(void *arg, weft_cx_t *cx)
{
	struct producer *st = arg;

	WEFT_ASYNC_BEGIN(st);
	for (st->i = 0; st->i < CHAN_MSGS; st->i++) {
		weft_mpsc_send_init(&st->send, st->tx, &st->i);
		WEFT_AWAIT(st, weft_mpsc_send_poll(&st->send, cx));
		weft_mpsc_send_fini(&st->send);
		if (st->send.status)
			bench_check_failed("channel_throughput send: %d",
					   st->send.status);
	}
	weft_mpsc_tx_drop(st->tx);
	WEFT_ASYNC_END(st);
}

/* main's block_on: `producer.await.unwrap(); consumer.await.unwrap()`. */
struct chan_main {
	int weft_pc;
	weft_join_t *producer;
	weft_join_t *consumer;
	int status;
};

static weft_poll_t chan_main_poll(void *arg, weft_cx_t *cx)
{
	struct chan_main *st = arg;

	WEFT_ASYNC_BEGIN(st);
	WEFT_AWAIT(st, weft_join_poll(st->producer, cx, &st->status, NULL));
	if (st->status)
		bench_check_failed("channel_throughput producer: %d",
				   st->status);
	WEFT_AWAIT(st, weft_join_poll(st->consumer, cx, &st->status, NULL));
	if (st->status)
		bench_check_failed("channel_throughput consumer: %d",
				   st->status);
	WEFT_ASYNC_END(st);
}

static uint64_t channel_throughput(struct bench *b)
{
	const uint64_t want = (uint64_t)CHAN_MSGS * (CHAN_MSGS - 1) / 2;
	struct chan_result res = { 0 };
	struct chan_main m = { 0 };
	weft_mpsc_tx_t *tx;
	weft_mpsc_rx_t *rx;
	uint64_t t0, el;
	int rc;

	rc = weft_mpsc_create(CHAN_CAP, sizeof(uint64_t), NULL, &tx, &rx);
	if (rc)
		bench_die("weft_mpsc_create", rc);
	t0 = weft_now_ns();
	rc = weft_spawn_named(b->rt, "consumer", consumer_poll,
			      (&(struct consumer){ .rx = rx, .out = &res }),
			      &m.consumer);
	if (rc)
		bench_die("weft_spawn", rc);
	rc = weft_spawn_named(b->rt, "producer", producer_poll,
			      (&(struct producer){ .tx = tx }), &m.producer);
	if (rc)
		bench_die("weft_spawn", rc);
	rc = weft_block_on(b->rt, chan_main_poll, &m, NULL);
	el = weft_now_ns() - t0;
	if (rc)
		bench_die("weft_block_on", rc);
	weft_join_drop(m.producer);
	weft_join_drop(m.consumer);
	if (res.sum != want || res.cnt != CHAN_MSGS)
		bench_check_failed("channel_throughput sum %llu cnt %llu, "
				   "want %llu %u",
				   (unsigned long long)res.sum,
				   (unsigned long long)res.cnt,
				   (unsigned long long)want, CHAN_MSGS);
	return el;
}

const struct bench_shape shape_channel_throughput = {
	.name = "channel_throughput",
	.unit = "u64 message through a bounded channel (capacity 1024)",
	.ops = CHAN_MSGS,
	.run = channel_throughput,
};
