package durable

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/budgetd/budgetd/schema"
)

// Batcher is the Durability of mode batch, which writes spans straight to
// the store: a bounded queue feeding one writer goroutine that groups the
// spans of concurrent requests into one store write, so a busy server makes
// few large inserts instead of many small ones. Each Commit returns once
// the write holding its spans succeeded (its spans then go to the Sink) or
// failed for good.
//
// Every batch is written under a fresh dedup token that its retries reuse,
// so a retry after a write that landed but timed out stores nothing twice.
// Requests are not split across writes: a request's spans land together,
// or, when the store refuses some of them for their content, the rest land
// and the refused ones go to the dead letter.
type Batcher struct {
	cfg         BatchConfig
	writer      *spanWriter
	seen        *seenSpans // in memory: without a log a restart forgets
	sink        Sink
	log         *slog.Logger
	m           *batcherMetrics
	tokenPrefix string

	wake chan struct{} // cap 1: a request was queued
	stop chan struct{} // closed by Shutdown: write what is queued, then exit
	done chan struct{} // closed when the writer has exited

	mu        sync.Mutex
	queue     []*request
	queued    int         // spans in queue, abandoned requests excluded
	closed    bool        // Shutdown began
	aborted   bool        // Shutdown's ctx ended: fail what is left
	current   *storeWrite // being written
	lastWrite time.Time   // when the latest write was taken off the queue
	seq       uint64      // batches written, for tokens
}

var _ Durability = (*Batcher)(nil)

// request is one Commit call waiting for its write.
type request struct {
	spans  []schema.Span
	result chan error // capacity 1, so the writer never waits for a waiter

	// Guarded by Batcher.mu.
	abandoned bool        // the caller's ctx ended; it no longer waits
	finished  bool        // result was sent
	batch     *storeWrite // the write it is part of, once taken
}

// storeWrite is one store write and the requests waiting for it.
type storeWrite struct {
	requests []*request
	waiting  int                // requests not abandoned; guarded by Batcher.mu
	cancel   context.CancelFunc // stops the write when nobody waits any more
}

// NewBatcher validates cfg and starts the writer goroutine. Shutdown stops it.
func NewBatcher(cfg Config, set Settings) (*Batcher, error) {
	if err := cfg.validate(ModeBatch); err != nil {
		return nil, fmt.Errorf("create batcher: %w", err)
	}
	set, err := set.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("create batcher: %w", err)
	}
	m, err := newBatcherMetrics(set.Registerer)
	if err != nil {
		return nil, fmt.Errorf("create batcher: %w", err)
	}
	w, err := newSpanWriter(cfg, set, cfg.Batch.RetryTimeout, func(class string) { m.writeErrors.WithLabelValues(class).Inc() })
	if err != nil {
		return nil, fmt.Errorf("create batcher: %w", err)
	}
	// Tokens must be unique across restarts and replicas writing to the
	// same database: a random prefix per Batcher and a sequence number.
	var p [8]byte
	if _, err := rand.Read(p[:]); err != nil {
		return nil, fmt.Errorf("create batcher: %w", err)
	}
	seen, err := newSeenSpans(cfg.Dedup, "", set, time.Now)
	if err != nil {
		return nil, fmt.Errorf("create batcher: %w", err)
	}
	b := &Batcher{
		cfg:         cfg.Batch,
		writer:      w,
		seen:        seen,
		sink:        set.Sink,
		log:         set.Logger,
		m:           m,
		tokenPrefix: "b" + hex.EncodeToString(p[:]) + "-",
		wake:        make(chan struct{}, 1),
		stop:        make(chan struct{}),
		done:        make(chan struct{}),
	}
	go b.run()
	return b, nil
}

// Admits implements Durability: a request is refused when the queue is
// full, after it was decoded (the queue counts spans, not bytes).
func (b *Batcher) Admits(int) bool { return true }

// Stalled implements Durability: the Batcher holds nothing it could not
// refuse, so a store that takes nothing shows as refused requests.
func (b *Batcher) Stalled() error { return nil }

// Commit implements Durability: it queues spans for the next write and
// waits for that write. When ctx ends first, spans still queued are taken
// out of the queue (the sender will retry them), and a write in progress
// is stopped if no other request waits for it.
func (b *Batcher) Commit(ctx context.Context, spans []schema.Span) error {
	return b.seen.commit(spans, func(fresh []schema.Span) error { return b.commit(ctx, fresh) })
}

// commit queues spans and waits for their write.
func (b *Batcher) commit(ctx context.Context, spans []schema.Span) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("commit spans: %w", err)
	}
	r := &request{spans: spans, result: make(chan error, 1)}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return ErrClosed
	}
	// A request larger than the whole queue is let in when the queue is
	// empty; otherwise it could never be stored.
	if b.queued > 0 && b.queued+len(spans) > b.cfg.QueueSpans {
		b.mu.Unlock()
		return ErrOverloaded
	}
	b.queue = append(b.queue, r)
	b.queued += len(spans)
	b.m.queueSpans.Set(float64(b.queued))
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}

	select {
	case err := <-r.result:
		return err
	case <-ctx.Done():
		if b.abandon(r) {
			// The write finished at the same moment; its result is
			// the truth.
			return <-r.result
		}
		return fmt.Errorf("commit spans: %w", ctx.Err())
	}
}

// abandon handles a request whose caller stopped waiting. It reports
// whether the request had already been answered, in which case its result
// is waiting in r.result.
func (b *Batcher) abandon(r *request) (finished bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r.finished {
		return true
	}
	r.abandoned = true
	if r.batch == nil {
		// Still queued: next drops it, so a sender's retry does not
		// store the spans twice.
		b.queued -= len(r.spans)
		b.m.queueSpans.Set(float64(b.queued))
		return false
	}
	r.batch.waiting--
	if r.batch.waiting == 0 {
		r.batch.cancel()
	}
	return false
}

// Shutdown implements Durability: it refuses new spans, writes everything
// queued and stops the writer. When ctx ends first, the write in progress
// is stopped, queued requests fail with ErrClosed, and Shutdown returns
// once the writer has exited.
func (b *Batcher) Shutdown(ctx context.Context) error {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		close(b.stop)
	}
	b.mu.Unlock()
	select {
	case <-b.done:
		return nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	b.aborted = true
	if b.current != nil {
		b.current.cancel()
	}
	b.mu.Unlock()
	<-b.done
	return fmt.Errorf("drain ingest batcher: %w", ctx.Err())
}

// run is the writer goroutine.
func (b *Batcher) run() {
	defer close(b.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		ctx, bt, wait := b.next(time.Now())
		switch {
		case bt != nil:
			b.write(ctx, bt)
		case wait < 0:
			return
		case wait == 0:
			select {
			case <-b.wake:
			case <-b.stop:
			}
		default:
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-b.wake:
			case <-b.stop:
			}
			timer.Stop()
		}
	}
}

// next takes the next batch off the queue when it is due: at once when the
// queue holds MaxSpans or Shutdown began, otherwise once FlushInterval has
// passed since the previous write started. When none is due it returns how
// long to wait: 0 for "until woken", negative for "exit".
func (b *Batcher) next(now time.Time) (context.Context, *storeWrite, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	// Forget requests whose callers left while queued.
	live := b.queue[:0]
	for _, r := range b.queue {
		if !r.abandoned {
			live = append(live, r)
		}
	}
	clear(b.queue[len(live):])
	b.queue = live

	if b.aborted {
		for _, r := range b.queue {
			r.finished = true
			r.result <- ErrClosed
		}
		clear(b.queue)
		b.queue, b.queued = b.queue[:0], 0
		b.m.queueSpans.Set(0)
		return nil, nil, -1
	}
	if len(b.queue) == 0 {
		if b.closed {
			return nil, nil, -1
		}
		return nil, nil, 0
	}
	if !b.closed && b.queued < b.cfg.MaxSpans {
		if wait := b.lastWrite.Add(b.cfg.FlushInterval).Sub(now); wait > 0 {
			return nil, nil, wait
		}
	}
	b.lastWrite = now

	bt := &storeWrite{}
	n, i := 0, 0
	for ; i < len(b.queue); i++ {
		r := b.queue[i]
		if n > 0 && n+len(r.spans) > b.cfg.MaxSpans {
			break
		}
		r.batch = bt
		bt.requests = append(bt.requests, r)
		n += len(r.spans)
	}
	rest := copy(b.queue, b.queue[i:])
	clear(b.queue[rest:])
	b.queue = b.queue[:rest]
	b.queued -= n
	b.m.queueSpans.Set(float64(b.queued))
	bt.waiting = len(bt.requests)
	// The write is not tied to any one caller's context: it goes on while
	// at least one of its requests waits (abandon cancels it otherwise)
	// and until Shutdown gives up.
	ctx, cancel := context.WithCancel(context.Background())
	bt.cancel = cancel
	b.current = bt
	return ctx, bt, 0
}

// write stores one batch through the writer (retries under one dedup
// token, refused spans to the dead letter), hands the stored spans to the
// sink, and wakes its requests with the outcome.
func (b *Batcher) write(ctx context.Context, bt *storeWrite) {
	spans := bt.requests[0].spans
	if len(bt.requests) > 1 {
		n := 0
		for _, r := range bt.requests {
			n += len(r.spans)
		}
		spans = make([]schema.Span, 0, n)
		for _, r := range bt.requests {
			spans = append(spans, r.spans...)
		}
	}
	b.m.batchSpans.Observe(float64(len(spans)))
	b.seq++
	start := time.Now()
	_, err := b.writer.writeSpans(ctx, b.tokenPrefix+strconv.FormatUint(b.seq, 10), spans)
	b.m.writeDuration.Observe(time.Since(start).Seconds())
	if err == nil {
		b.sink.Spans(spans)
	}
	if err != nil && b.isAborted() {
		err = fmt.Errorf("%w: %w", ErrClosed, err)
	}
	b.finish(bt, err)
}

// finish sends the write's result to every request of the batch.
func (b *Batcher) finish(bt *storeWrite, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, r := range bt.requests {
		r.finished = true
		r.result <- err
	}
	bt.cancel()
	b.current = nil
}

func (b *Batcher) isAborted() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.aborted
}

// batcherMetrics are the Batcher's self-metrics.
type batcherMetrics struct {
	batchSpans    prometheus.Histogram
	queueSpans    prometheus.Gauge
	writeDuration prometheus.Histogram
	writeErrors   *prometheus.CounterVec // class: unavailable, timeout, store, refused
}

func newBatcherMetrics(reg prometheus.Registerer) (*batcherMetrics, error) {
	m := &batcherMetrics{
		batchSpans: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "budgetd_ingest_batch_spans",
			Help:    "Spans per store write (ingest.durability.mode batch).",
			Buckets: prometheus.ExponentialBuckets(1, 4, 9), // 1 … 65536
		}),
		queueSpans: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "budgetd_ingest_queue_spans",
			Help: "Spans waiting for a store write (the batch being written excluded; mode batch).",
		}),
		writeDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "budgetd_ingest_store_write_duration_seconds",
			Help:    "Time of one batch's store write, retries included (mode batch).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
		writeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "budgetd_ingest_store_write_errors_total",
			Help: "Failed store write attempts by class: unavailable, timeout, store (its own state) and refused (the spans; split and dead-lettered) (mode batch).",
		}, []string{"reason"}),
	}
	for _, c := range []string{classUnavailable, classTimeout, classStore, classRefused} {
		m.writeErrors.WithLabelValues(c)
	}
	for i, c := range []prometheus.Collector{m.batchSpans, m.queueSpans, m.writeDuration, m.writeErrors} {
		if err := reg.Register(c); err != nil {
			for _, done := range []prometheus.Collector{m.batchSpans, m.queueSpans, m.writeDuration, m.writeErrors}[:i] {
				reg.Unregister(done)
			}
			return nil, fmt.Errorf("register batcher metrics: %w", err)
		}
	}
	return m, nil
}
