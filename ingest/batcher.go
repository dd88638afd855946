package ingest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store"
)

// Durability is where an accepted request's spans become durable. The OTLP
// handlers acknowledge a request only after Commit returned nil for its
// spans, which is what makes "nothing acknowledged is lost" hold: whatever
// implements Commit decides what durable means (the Batcher: written to the
// store; package durable: fsynced in a write-ahead log).
type Durability interface {
	// Commit makes spans durable or returns why not. It returns when that
	// is decided or ctx ends, whichever is first. Errors matching
	// ErrOverloaded or ErrClosed, wrapping store.ErrUnavailable or a
	// context error tell the sender to retry later. Commit must not keep
	// or modify spans after it returns.
	Commit(ctx context.Context, spans []schema.Span) error
	// Shutdown stops accepting spans and finishes what was accepted,
	// giving up when ctx ends. The Server calls it once no handler can
	// call Commit any more.
	Shutdown(ctx context.Context) error
}

// Admitter is implemented by a Durability that can tell, before a request
// is decoded, that it could not take the request's spans. The handlers then
// refuse the request as overloaded without spending CPU on decoding it: under
// overload, senders retry, and decoding requests that are refused anyway
// takes the CPU the store needs to catch up.
type Admitter interface {
	// Admits reports whether spans decoded from a protobuf request of
	// protoBytes bytes may fit. False should mean Commit would refuse them;
	// a wrong false costs the sender a retry, never data.
	Admits(protoBytes int) bool
}

// ErrOverloaded is returned by Commit when the spans do not fit in the
// queue. It is momentary: the handlers answer 503 / UNAVAILABLE with a
// retry delay.
var ErrOverloaded = errors.New("ingest queue full")

// ErrClosed is returned by Commit after Shutdown began.
var ErrClosed = errors.New("ingest shutting down")

// SpanWriter is the part of store.Store the Batcher needs.
type SpanWriter interface {
	WriteSpans(ctx context.Context, token string, spans []schema.Span) error
}

var _ SpanWriter = store.Store(nil)

// BatcherSettings are what the Batcher is given rather than configured with.
type BatcherSettings struct {
	// Logger receives lifecycle events and throttled store errors; nil
	// discards them.
	Logger *slog.Logger
	// Registerer receives the batcher's metrics; nil keeps them private.
	Registerer prometheus.Registerer
}

// Batcher is the Durability that writes spans straight to the store: a
// bounded queue feeding one writer goroutine that groups the spans of
// concurrent requests into one store write, so a busy server makes few
// large inserts instead of many small ones. Each Commit returns once the
// write holding its spans succeeded or failed for good.
//
// Every batch is written under a fresh dedup token that its retries reuse,
// so a retry after a write that landed but timed out stores nothing twice.
// Requests are never split across writes: a request's spans land together
// or not at all.
type Batcher struct {
	cfg         BatcherConfig
	w           SpanWriter
	log         *slog.Logger
	m           *batcherMetrics
	throttle    *logThrottle
	tokenPrefix string

	wake chan struct{} // cap 1: a request was queued
	stop chan struct{} // closed by Shutdown: write what is queued, then exit
	done chan struct{} // closed when the writer has exited

	mu        sync.Mutex
	queue     []*request
	queued    int       // spans in queue, abandoned requests excluded
	closed    bool      // Shutdown began
	aborted   bool      // Shutdown's ctx ended: fail what is left
	current   *batch    // being written
	lastWrite time.Time // when the latest write was taken off the queue
	seq       uint64    // batches written, for tokens
}

var _ Durability = (*Batcher)(nil)

// request is one Commit call waiting for its write.
type request struct {
	spans  []schema.Span
	result chan error // capacity 1, so the writer never waits for a waiter

	// Guarded by Batcher.mu.
	abandoned bool   // the caller's ctx ended; it no longer waits
	finished  bool   // result was sent
	batch     *batch // the write it is part of, once taken
}

// batch is one store write and the requests waiting for it.
type batch struct {
	requests []*request
	waiting  int                // requests not abandoned; guarded by Batcher.mu
	cancel   context.CancelFunc // stops the write when nobody waits any more
}

// NewBatcher validates cfg and starts the writer goroutine. Shutdown stops it.
func NewBatcher(cfg BatcherConfig, w SpanWriter, set BatcherSettings) (*Batcher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("create batcher: %w", err)
	}
	if w == nil {
		return nil, errors.New("create batcher: no span writer")
	}
	m, err := newBatcherMetrics(registerer(set.Registerer))
	if err != nil {
		return nil, fmt.Errorf("create batcher: %w", err)
	}
	log := set.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	// Tokens must be unique across restarts and replicas writing to the
	// same database: a random prefix per Batcher and a sequence number.
	var p [8]byte
	if _, err := rand.Read(p[:]); err != nil {
		return nil, fmt.Errorf("create batcher: %w", err)
	}
	b := &Batcher{
		cfg:         cfg,
		w:           w,
		log:         log,
		m:           m,
		throttle:    newLogThrottle(10 * time.Second),
		tokenPrefix: "ingest-" + hex.EncodeToString(p[:]) + "-",
		wake:        make(chan struct{}, 1),
		stop:        make(chan struct{}),
		done:        make(chan struct{}),
	}
	go b.run()
	return b, nil
}

// Commit implements Durability: it queues spans for the next write and
// waits for that write. When ctx ends first, spans still queued are taken
// out of the queue (the sender will retry them), and a write in progress
// is stopped if no other request waits for it.
func (b *Batcher) Commit(ctx context.Context, spans []schema.Span) error {
	if len(spans) == 0 {
		return nil
	}
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
func (b *Batcher) next(now time.Time) (context.Context, *batch, time.Duration) {
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

	bt := &batch{}
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

// write stores one batch, retrying transient failures with the same dedup
// token, and wakes its requests with the outcome.
func (b *Batcher) write(ctx context.Context, bt *batch) {
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
	token := b.tokenPrefix + strconv.FormatUint(b.seq, 10)

	var (
		err       error
		firstFail time.Time
		backoff   = b.cfg.RetryBackoff
	)
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			b.m.writeRetries.Inc()
		}
		actx, cancel := context.WithTimeout(ctx, b.cfg.StoreTimeout)
		start := time.Now()
		err = b.w.WriteSpans(actx, token, spans)
		cancel()
		b.m.writeDuration.Observe(time.Since(start).Seconds())
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			// Nobody waits any more, or Shutdown gave up: not a store
			// failure, and not worth retrying.
			err = fmt.Errorf("write spans: %w (%w)", ctx.Err(), err)
			break
		}
		reason, transient := classifyWriteError(err)
		b.m.writeErrors.WithLabelValues(reason).Inc()
		if firstFail.IsZero() {
			firstFail = start
		}
		retry := transient && time.Since(firstFail)+backoff <= b.cfg.RetryTimeout
		b.logWriteError(err, reason, len(spans), attempt, retry)
		err = fmt.Errorf("write spans: %w", err)
		if !retry || !sleepCtx(ctx, backoff) {
			break
		}
		backoff = min(2*backoff, maxRetryBackoff)
	}
	if err != nil && b.isAborted() {
		err = fmt.Errorf("%w: %w", ErrClosed, err)
	}
	b.finish(bt, err)
}

// finish sends the write's result to every request of the batch.
func (b *Batcher) finish(bt *batch, err error) {
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

// logWriteError logs a failed write at most every few seconds per reason:
// while the store is down every batch fails, and the metric counts them.
func (b *Batcher) logWriteError(err error, reason string, spans, attempt int, retry bool) {
	ok, suppressed := b.throttle.allow("write:"+reason, time.Now())
	if !ok {
		return
	}
	b.log.Warn("store write failed", "reason", reason, "spans", spans, "attempt", attempt,
		"will_retry", retry, "suppressed", suppressed, "err", err)
}

// classifyWriteError names a store failure for the metric and tells whether
// retrying may help: the server being unreachable or the attempt timing out
// is momentary; anything else (a rejected statement) is not.
func classifyWriteError(err error) (reason string, transient bool) {
	switch {
	case errors.Is(err, store.ErrUnavailable):
		return writeErrUnavailable, true
	case errors.Is(err, context.DeadlineExceeded):
		return writeErrTimeout, true
	default:
		return writeErrOther, false
	}
}

// sleepCtx waits d, or less when ctx ends; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
