package durable

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store"
	"github.com/budgetd/budgetd/store/storetest"
)

// spansOf generates n spans; seeds give distinct ids.
func spansOf(_ testing.TB, seed int64, n int) []schema.Span {
	return storetest.SpanBatch(uint64(seed)+100, n)
}

// batchConfig is the batch mode's defaults with a dead letter in a
// temporary directory.
func batchConfig(t testing.TB) Config {
	cfg := DefaultConfig()
	cfg.Mode = ModeBatch
	cfg.DeadLetterDir = t.TempDir()
	return cfg
}

// gatedWriter holds every write until release is closed, and tells each
// arrival on entered.
type gatedWriter struct {
	SpanStore
	entered chan struct{}
	release chan struct{}
}

func newGatedWriter(w SpanStore) *gatedWriter {
	return &gatedWriter{SpanStore: w, entered: make(chan struct{}, 100), release: make(chan struct{})}
}

func (g *gatedWriter) WriteSpans(ctx context.Context, token string, spans []schema.Span) error {
	g.entered <- struct{}{}
	select {
	case <-g.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.SpanStore.WriteSpans(ctx, token, spans)
}

func countRows(t testing.TB, st interface {
	CountRows(context.Context, string) (uint64, error)
}) uint64 {
	t.Helper()
	n, err := st.CountRows(context.Background(), "spans")
	require.NoError(t, err)
	return n
}

// recordingWriter records the writes that reach the store, and can fail
// them on cue: the failures a real engine cannot be made to produce at a
// chosen moment (an acknowledgement lost after the write landed, a
// statement the server rejects).
type recordingWriter struct {
	SpanStore
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
				if werr := r.SpanStore.WriteSpans(ctx, token, spans); werr != nil {
					return werr
				}
			}
			return err
		}
	}
	return r.SpanStore.WriteSpans(ctx, token, spans)
}

func (r *recordingWriter) writes() ([]string, []int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.tokens...), append([]int(nil), r.sizes...)
}

// newTestBatcher starts a Batcher shut down when the test ends.
func newTestBatcher(t testing.TB, cfg Config, w SpanStore) (*Batcher, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	b, err := NewBatcher(cfg, Settings{Store: w, Registerer: reg})
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
	st := embeddedStore(t)
	rec := &recordingWriter{SpanStore: st}
	gate := newGatedWriter(rec)
	cfg := batchConfig(t)
	cfg.Batch.MaxSpans = 100
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
// before its acknowledgement was lost is stored once), spans the store
// refuses go to the dead letter and the commit succeeds, and retrying
// stops after RetryTimeout.
func TestBatcherRetry(t *testing.T) {
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
		wantDead   float64
	}{
		{name: "lost acknowledgement", fail: lostAck,
			wantWrites: func(t *testing.T, n int) { require.Equal(t, 2, n) }, wantStored: 20},
		{name: "timeout then success", fail: func(n int) (bool, error) {
			if n == 1 {
				return false, context.DeadlineExceeded
			}
			return false, nil
		}, wantWrites: func(t *testing.T, n int) { require.Equal(t, 2, n) }, wantStored: 20},
		{name: "refused", fail: func(int) (bool, error) { return false, errors.New("Code: 27. DB::Exception: Cannot parse input") },
			// 20 spans split to single spans: 1 + 2 + 4 + 8 + 16 + 8 writes
			// (20 = 16 + 4 → the tree has 39 nodes).
			wantWrites: func(t *testing.T, n int) { require.Equal(t, 39, n) }, wantDead: 20},
		{name: "store stays down", fail: func(int) (bool, error) { return false, store.ErrUnavailable },
			wantErr: store.ErrUnavailable, wantWrites: func(t *testing.T, n int) { require.Greater(t, n, 2) }},
	}
	for _, eng := range engines() {
		t.Run(eng.Name, func(t *testing.T) {
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					st := eng.Open(t)
					cfg := batchConfig(t)
					cfg.Batch.FlushInterval = 0
					cfg.Batch.RetryTimeout = time.Second // attempts at 0, 0.1, 0.3 and 0.7 s
					rec := &recordingWriter{SpanStore: st, fail: tt.fail}
					b, reg := newTestBatcher(t, cfg, rec)
					err := b.Commit(commitCtx(t), spansOf(t, 1, 20))
					if tt.wantErr == nil {
						require.NoError(t, err)
					} else {
						require.ErrorIs(t, err, tt.wantErr, "a store failure asks the sender to retry")
					}
					tokens, _ := rec.writes()
					tt.wantWrites(t, len(tokens))
					if tt.wantDead == 0 {
						for _, tok := range tokens {
							require.Equal(t, tokens[0], tok, "retries reuse the batch's token")
						}
					}
					require.Equal(t, tt.wantStored, countRows(t, st))
					require.Equal(t, tt.wantDead, gathered(t, reg, "budgetd_store_dead_letter_spans_total"))
				})
			}
		})
	}
}

// gathered returns the value of an unlabelled metric in reg.
func gathered(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestBatcherQueue checks the queue bound: what does not fit is refused
// with ErrOverloaded, a request larger than the whole queue gets in when
// the queue is empty, and a request whose caller leaves while queued is
// never written.
func TestBatcherQueue(t *testing.T) {
	st := embeddedStore(t)
	rec := &recordingWriter{SpanStore: st}
	gate := newGatedWriter(rec)
	cfg := batchConfig(t)
	cfg.Batch.QueueSpans = 15
	b, reg := newTestBatcher(t, cfg, gate)

	first := make(chan error, 1)
	go func() { first <- b.Commit(commitCtx(t), spansOf(t, 1, 40)) }() // larger than the queue
	<-gate.entered

	leaving, leave := context.WithCancel(context.Background())
	left := make(chan error, 1)
	go func() { left <- b.Commit(leaving, spansOf(t, 2, 10)) }()
	waitFor(t, "the request to queue", func() bool {
		return gathered(t, reg, "budgetd_ingest_queue_spans") == 10
	})
	require.ErrorIs(t, b.Commit(commitCtx(t), spansOf(t, 3, 6)), ErrOverloaded)
	kept := make(chan error, 1)
	go func() { kept <- b.Commit(commitCtx(t), spansOf(t, 4, 5)) }() // fits: 15
	waitFor(t, "the queue to fill", func() bool {
		return gathered(t, reg, "budgetd_ingest_queue_spans") == 15
	})
	leave()
	require.ErrorIs(t, <-left, context.Canceled)
	require.Equal(t, 5.0, gathered(t, reg, "budgetd_ingest_queue_spans"), "the leaver's spans leave the queue")

	close(gate.release)
	require.NoError(t, <-first)
	require.NoError(t, <-kept)
	_, sizes := rec.writes()
	require.Equal(t, []int{40, 5}, sizes, "the leaver's spans are never written")
	require.Equal(t, uint64(45), countRows(t, st))
}

// commitBehindGate commits two requests of 10 spans: the first is held in
// the gated store write, the second waits in the queue behind it. Their
// results arrive on the returned channel.
func commitBehindGate(t *testing.T, b *Batcher, gate *gatedWriter) <-chan error {
	t.Helper()
	errs := make(chan error, 2)
	go func() { errs <- b.Commit(commitCtx(t), spansOf(t, 1, 10)) }()
	<-gate.entered
	go func() { errs <- b.Commit(commitCtx(t), spansOf(t, 2, 10)) }()
	waitFor(t, "the request to queue", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.queue) == 1
	})
	return errs
}

// TestBatcherShutdown checks that Shutdown writes what is queued, refuses
// new spans, and with an expired context stops the write in progress.
func TestBatcherShutdown(t *testing.T) {
	t.Run("drains the queue", func(t *testing.T) {
		st := embeddedStore(t)
		gate := newGatedWriter(st)
		b, err := NewBatcher(batchConfig(t), Settings{Store: gate})
		require.NoError(t, err)
		errs := commitBehindGate(t, b, gate)
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
		st := embeddedStore(t)
		gate := newGatedWriter(st) // never released
		b, err := NewBatcher(batchConfig(t), Settings{Store: gate})
		require.NoError(t, err)
		errs := commitBehindGate(t, b, gate)
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
	a, _ := newTestBatcher(t, batchConfig(t), &recordingWriter{})
	b, _ := newTestBatcher(t, batchConfig(t), &recordingWriter{})
	require.NotEqual(t, a.tokenPrefix, b.tokenPrefix)
	tok := a.tokenPrefix + "18446744073709551615"
	require.LessOrEqual(t, len(tok), 128)
	require.Regexp(t, `^[A-Za-z0-9_-]+$`, tok)
}

func TestNewBatcherErrors(t *testing.T) {
	cfg := batchConfig(t)
	cfg.Batch.MaxSpans = 0
	_, err := NewBatcher(cfg, Settings{Store: &recordingWriter{}})
	require.ErrorContains(t, err, "ingest.durability.batch.max_spans must be > 0")
	_, err = NewBatcher(batchConfig(t), Settings{})
	require.ErrorContains(t, err, "a store is required")
	reg := prometheus.NewRegistry()
	first, err := NewBatcher(batchConfig(t), Settings{Store: &recordingWriter{}, Registerer: reg})
	require.NoError(t, err)
	defer func() { require.NoError(t, first.Shutdown(context.Background())) }()
	_, err = NewBatcher(batchConfig(t), Settings{Store: &recordingWriter{}, Registerer: reg})
	require.ErrorContains(t, err, "register", "one registry cannot take two batchers")
	require.Equal(t, 1, testutil.CollectAndCount(reg, "budgetd_ingest_queue_spans"))
}
