package ingest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store"
)

// spansOf converts n generated spans.
func spansOf(t testing.TB, seed int64, n int) []schema.Span {
	t.Helper()
	return newTestConverter(t, DefaultLimits()).Convert(tracesWithBad(seed, n, 0, 0)).Spans
}

// recordingWriter records the writes that reach the store, and can fail
// them on cue: the failures a real engine cannot be made to produce at a
// chosen moment (an acknowledgement lost after the write landed, a
// statement the server rejects).
type recordingWriter struct {
	SpanWriter
	// fail decides the outcome of write n (1-based): write reports
	// whether to write for real first, err what to return.
	fail func(n int) (write bool, err error)

	mu     sync.Mutex
	tokens []string
	sizes  []int
}

func (r *recordingWriter) WriteSpans(ctx context.Context, token string, spans []schema.Span) error {
	r.mu.Lock()
	r.tokens = append(r.tokens, token)
	r.sizes = append(r.sizes, len(spans))
	n := len(r.tokens)
	r.mu.Unlock()
	if r.fail != nil {
		if write, err := r.fail(n); err != nil {
			if write {
				if werr := r.SpanWriter.WriteSpans(ctx, token, spans); werr != nil {
					return werr
				}
			}
			return err
		}
	}
	return r.SpanWriter.WriteSpans(ctx, token, spans)
}

func (r *recordingWriter) writes() ([]string, []int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.tokens...), append([]int(nil), r.sizes...)
}

// newTestBatcher starts a Batcher shut down when the test ends.
func newTestBatcher(t testing.TB, cfg BatcherConfig, w SpanWriter) (*Batcher, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	b, err := NewBatcher(cfg, w, BatcherSettings{Logger: testLogger(t), Registerer: reg})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, b.Shutdown(ctx))
	})
	return b, reg
}

func commitCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestBatcherGroupsRequests checks that requests arriving while a write is
// in progress share the next write, whole, up to MaxSpans.
func TestBatcherGroupsRequests(t *testing.T) {
	st := openEmbedded(t)
	rec := &recordingWriter{SpanWriter: st}
	gate := newGatedWriter(rec)
	cfg := DefaultBatcherConfig()
	cfg.MaxSpans = 100
	b, _ := newTestBatcher(t, cfg, gate)

	errs := make(chan error, 12)
	go func() { errs <- b.Commit(commitCtx(t), spansOf(t, 0, 10)) }()
	<-gate.entered // the first write is held
	for i := range 11 {
		go func() { errs <- b.Commit(commitCtx(t), spansOf(t, int64(i+1), 10)) }()
	}
	waitFor(t, "11 requests to queue", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.queue) == 11
	})
	close(gate.release)
	for range 12 {
		require.NoError(t, <-errs)
	}
	tokens, sizes := rec.writes()
	// 10 alone, then ten requests of 10 (MaxSpans), then the last one.
	require.Equal(t, []int{10, 100, 10}, sizes)
	require.Len(t, tokens, 3)
	require.NotEqual(t, tokens[0], tokens[1])
	require.Equal(t, uint64(120), countRows(t, st))
}

// TestBatcherRetry checks the retry rules on both engines: a transient
// failure is retried under the same dedup token (so a write that landed
// before its acknowledgement was lost is stored once), a permanent one is
// not retried, and retrying stops after RetryTimeout.
func TestBatcherRetry(t *testing.T) {
	cfg := DefaultBatcherConfig()
	cfg.FlushInterval = 0
	cfg.RetryBackoff = 10 * time.Millisecond
	cfg.RetryTimeout = 300 * time.Millisecond
	lostAck := func(n int) (bool, error) {
		if n == 1 {
			return true, errors.Join(store.ErrUnavailable, errors.New("connection reset after the write"))
		}
		return false, nil
	}
	tests := []struct {
		name       string
		fail       func(n int) (bool, error)
		wantErr    error // nil for success
		wantWrites func(t *testing.T, n int)
		wantStored uint64
	}{
		{name: "lost acknowledgement", fail: lostAck,
			wantWrites: func(t *testing.T, n int) { require.Equal(t, 2, n) }, wantStored: 20},
		{name: "timeout then success", fail: func(n int) (bool, error) {
			if n == 1 {
				return false, context.DeadlineExceeded
			}
			return false, nil
		}, wantWrites: func(t *testing.T, n int) { require.Equal(t, 2, n) }, wantStored: 20},
		{name: "permanent failure", fail: func(int) (bool, error) { return false, errors.New("syntax error") },
			wantErr: errors.New("syntax error"), wantWrites: func(t *testing.T, n int) { require.Equal(t, 1, n) }},
		{name: "store stays down", fail: func(int) (bool, error) { return false, store.ErrUnavailable },
			wantErr: store.ErrUnavailable, wantWrites: func(t *testing.T, n int) { require.Greater(t, n, 2) }},
	}
	for _, eng := range engines() {
		t.Run(eng.name, func(t *testing.T) {
			inst := eng.start(t)
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					st := inst.open(t)
					rec := &recordingWriter{SpanWriter: st, fail: tt.fail}
					b, _ := newTestBatcher(t, cfg, rec)
					err := b.Commit(commitCtx(t), spansOf(t, 1, 20))
					if tt.wantErr == nil {
						require.NoError(t, err)
					} else {
						require.ErrorContains(t, err, tt.wantErr.Error())
						require.Equal(t, outcomeUnavailable, outcomeOf(err), "a store failure asks the sender to retry")
					}
					tokens, _ := rec.writes()
					tt.wantWrites(t, len(tokens))
					for _, tok := range tokens {
						require.Equal(t, tokens[0], tok, "retries reuse the batch's token")
					}
					require.Equal(t, tt.wantStored, countRows(t, st))
				})
			}
		})
	}
}

// TestBatcherQueue checks the queue bound: what does not fit is refused
// with ErrOverloaded, a request larger than the whole queue gets in when
// the queue is empty, and a request whose caller leaves while queued is
// never written.
func TestBatcherQueue(t *testing.T) {
	st := openEmbedded(t)
	rec := &recordingWriter{SpanWriter: st}
	gate := newGatedWriter(rec)
	cfg := DefaultBatcherConfig()
	cfg.QueueSpans = 15
	b, reg := newTestBatcher(t, cfg, gate)
	ts := &testServer{reg: reg}

	first := make(chan error, 1)
	go func() { first <- b.Commit(commitCtx(t), spansOf(t, 1, 40)) }() // larger than the queue
	<-gate.entered

	leaving, leave := context.WithCancel(context.Background())
	left := make(chan error, 1)
	go func() { left <- b.Commit(leaving, spansOf(t, 2, 10)) }()
	waitFor(t, "the request to queue", func() bool {
		return metricValue(t, ts, "budgetd_ingest_queue_spans", nil) == 10
	})
	require.ErrorIs(t, b.Commit(commitCtx(t), spansOf(t, 3, 6)), ErrOverloaded)
	kept := make(chan error, 1)
	go func() { kept <- b.Commit(commitCtx(t), spansOf(t, 4, 5)) }() // fits: 15
	waitFor(t, "the queue to fill", func() bool {
		return metricValue(t, ts, "budgetd_ingest_queue_spans", nil) == 15
	})
	leave()
	require.ErrorIs(t, <-left, context.Canceled)
	require.Equal(t, 5.0, metricValue(t, ts, "budgetd_ingest_queue_spans", nil), "the leaver's spans leave the queue")

	close(gate.release)
	require.NoError(t, <-first)
	require.NoError(t, <-kept)
	_, sizes := rec.writes()
	require.Equal(t, []int{40, 5}, sizes, "the leaver's spans are never written")
	require.Equal(t, uint64(45), countRows(t, st))
}

// TestBatcherShutdown checks that Shutdown writes what is queued, refuses
// new spans, and with an expired context stops the write in progress.
func TestBatcherShutdown(t *testing.T) {
	t.Run("drains the queue", func(t *testing.T) {
		st := openEmbedded(t)
		gate := newGatedWriter(st)
		b, err := NewBatcher(DefaultBatcherConfig(), gate, BatcherSettings{})
		require.NoError(t, err)
		errs := make(chan error, 2)
		go func() { errs <- b.Commit(commitCtx(t), spansOf(t, 1, 10)) }()
		<-gate.entered
		go func() { errs <- b.Commit(commitCtx(t), spansOf(t, 2, 10)) }()
		waitFor(t, "the request to queue", func() bool {
			b.mu.Lock()
			defer b.mu.Unlock()
			return len(b.queue) == 1
		})
		done := make(chan error, 1)
		go func() { done <- b.Shutdown(commitCtx(t)) }()
		waitFor(t, "shutdown to begin", func() bool {
			b.mu.Lock()
			defer b.mu.Unlock()
			return b.closed
		})
		require.ErrorIs(t, b.Commit(commitCtx(t), spansOf(t, 3, 1)), ErrClosed)
		close(gate.release)
		require.NoError(t, <-errs)
		require.NoError(t, <-errs)
		require.NoError(t, <-done)
		require.Equal(t, uint64(20), countRows(t, st))
		require.NoError(t, b.Shutdown(commitCtx(t)), "a second Shutdown is a no-op")
	})
	t.Run("gives up when its context ends", func(t *testing.T) {
		st := openEmbedded(t)
		gate := newGatedWriter(st) // never released
		b, err := NewBatcher(DefaultBatcherConfig(), gate, BatcherSettings{})
		require.NoError(t, err)
		errs := make(chan error, 2)
		go func() { errs <- b.Commit(commitCtx(t), spansOf(t, 1, 10)) }()
		<-gate.entered
		go func() { errs <- b.Commit(commitCtx(t), spansOf(t, 2, 10)) }()
		waitFor(t, "the request to queue", func() bool {
			b.mu.Lock()
			defer b.mu.Unlock()
			return len(b.queue) == 1
		})
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		require.ErrorIs(t, b.Shutdown(ctx), context.DeadlineExceeded)
		require.ErrorIs(t, <-errs, ErrClosed)
		require.ErrorIs(t, <-errs, ErrClosed)
		require.Equal(t, uint64(0), countRows(t, st))
	})
}

// TestBatcherTokens checks that dedup tokens are valid store tokens and
// differ between batchers, so two budgetd replicas never collide.
func TestBatcherTokens(t *testing.T) {
	a, _ := newTestBatcher(t, DefaultBatcherConfig(), &recordingWriter{})
	b, _ := newTestBatcher(t, DefaultBatcherConfig(), &recordingWriter{})
	require.NotEqual(t, a.tokenPrefix, b.tokenPrefix)
	tok := a.tokenPrefix + "18446744073709551615"
	require.LessOrEqual(t, len(tok), 128)
	require.Regexp(t, `^[A-Za-z0-9_-]+$`, tok)
}

func TestNewBatcherErrors(t *testing.T) {
	cfg := DefaultBatcherConfig()
	cfg.MaxSpans = 0
	_, err := NewBatcher(cfg, &recordingWriter{}, BatcherSettings{})
	require.ErrorContains(t, err, "ingest.batch.max_spans must be > 0")
	_, err = NewBatcher(DefaultBatcherConfig(), nil, BatcherSettings{})
	require.ErrorContains(t, err, "no span writer")
	reg := prometheus.NewRegistry()
	first, err := NewBatcher(DefaultBatcherConfig(), &recordingWriter{}, BatcherSettings{Registerer: reg})
	require.NoError(t, err)
	defer func() { require.NoError(t, first.Shutdown(context.Background())) }()
	_, err = NewBatcher(DefaultBatcherConfig(), &recordingWriter{}, BatcherSettings{Registerer: reg})
	require.ErrorContains(t, err, "register ingest metrics", "one registry cannot take two batchers")
}
