package durable

import (
	"context"
	"encoding/binary"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store/storetest"
)

func TestFingerprintIsFNV1a(t *testing.T) {
	s := storetest.SpanBatch(3, 1)[0]
	h := fnv.New64a()
	_, _ = h.Write(s.TraceID[:])
	_, _ = h.Write(s.SpanID[:])
	require.Equal(t, h.Sum64(), fingerprint(&s), "stored fingerprints must not change between versions")
}

// TestSeenSpansWindow checks the window and the bound: a span is caught
// within the window, forgotten after it, forgotten early past MaxSpans,
// and a failed commit's spans are given back.
func TestSeenSpansWindow(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	s, err := newSeenSpans(DedupConfig{Window: 10 * time.Minute, MaxSpans: 1000}, "", Settings{Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler)}, clock)
	require.NoError(t, err)
	a := storetest.SpanBatch(1, 100)

	fresh, fps, err := s.claim(a)
	require.NoError(t, err)
	require.Len(t, fresh, 100)
	require.Len(t, fps, 100)
	fresh, _, err = s.claim(append(append(a[:0:0], a[:10]...), storetest.SpanBatch(2, 5)...))
	require.NoError(t, err)
	require.Len(t, fresh, 5, "the ten seen spans are left out, the five new kept")

	b := storetest.SpanBatch(3, 10)
	_, fps, err = s.claim(b)
	require.NoError(t, err)
	s.forget(fps)
	fresh, _, err = s.claim(b)
	require.NoError(t, err)
	require.Len(t, fresh, 10, "spans of a failed commit are taken when resent")

	now = now.Add(9 * time.Minute)
	fresh, _, err = s.claim(a[:1])
	require.NoError(t, err)
	require.Empty(t, fresh, "within the window")
	now = now.Add(3 * time.Minute)
	fresh, _, err = s.claim(a[:1])
	require.NoError(t, err)
	require.Len(t, fresh, 1, "past the window")

}

// TestSeenSpansMaxSpans checks the memory bound: past MaxSpans the oldest
// generation is forgotten early, inside the window, and the window gauge
// says so.
func TestSeenSpansMaxSpans(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	reg := prometheus.NewRegistry()
	s, err := newSeenSpans(DedupConfig{Window: 10 * time.Minute, MaxSpans: 1000}, "",
		Settings{Registerer: reg, Logger: slog.New(slog.DiscardHandler)}, func() time.Time { return now })
	require.NoError(t, err)
	first, second := storetest.SpanBatch(10, 600), storetest.SpanBatch(11, 600)
	_, _, err = s.claim(first)
	require.NoError(t, err)
	now = now.Add(time.Minute)
	_, _, err = s.claim(second) // 1,200 remembered: over the bound until the next rotation
	require.NoError(t, err)
	now = now.Add(time.Minute)
	fresh, _, err := s.claim(second)
	require.NoError(t, err)
	require.Empty(t, fresh, "the newer generation is still remembered")
	fresh, _, err = s.claim(first)
	require.NoError(t, err)
	require.Len(t, fresh, 600, "the oldest generation was forgotten two minutes into a ten-minute window")
	require.Equal(t, 60.0, gathered(t, reg, "budgetd_ingest_dedup_window_seconds"), "resends are recognised one minute back now")
}

// TestResendAfterRestart commits a request to the log, stops, starts
// again and commits the same request: it is acknowledged and stored once,
// counted as duplicates.
func TestResendAfterRestart(t *testing.T) {
	st := embeddedStore(t)
	dir := filepath.Join(t.TempDir(), "wal")
	spans := storetest.SpanBatch(41, 300)
	for run := range 2 {
		reg := prometheus.NewRegistry()
		d, err := OpenLog(testConfig(dir), Settings{Store: st, Registerer: reg})
		require.NoError(t, err)
		require.NoError(t, d.Commit(context.Background(), spans), "run %d", run+1)
		require.NoError(t, d.Commit(context.Background(), spans[:50]), "a resend within the run")
		waitFor(t, "stored", func() bool { return rows(t, st) >= 300 })
		require.NoError(t, d.Shutdown(context.Background()))
		require.Equal(t, float64(50+300*run), gathered(t, reg, "budgetd_ingest_duplicate_spans_total"))
	}
	require.EqualValues(t, 300, rows(t, st), "a resend after a restart is not stored again")
}

// TestLogSpansAreRemembered commits spans with the seen files taken away
// (as if the process died before writing them): the spans in the log are
// recognised after a restart all the same.
func TestLogSpansAreRemembered(t *testing.T) {
	st := embeddedStore(t)
	dir := filepath.Join(t.TempDir(), "wal")
	cfg := testConfig(dir)
	cfg.WAL.SegmentBytes = 64 << 20 // one segment: nothing is truncated
	cfg.WAL.MaxBytes = 64 << 20
	spans := storetest.SpanBatch(42, 200)
	d, err := OpenLog(cfg, Settings{Store: st})
	require.NoError(t, err)
	require.NoError(t, d.Commit(context.Background(), spans))
	waitFor(t, "stored", func() bool { return d.Counters().Spans == 200 })
	require.NoError(t, d.Shutdown(context.Background()))
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "seen")))

	reg := prometheus.NewRegistry()
	d, err = OpenLog(cfg, Settings{Store: st, Registerer: reg})
	require.NoError(t, err)
	require.NoError(t, d.Commit(context.Background(), spans))
	require.NoError(t, d.Shutdown(context.Background()))
	require.Equal(t, 200.0, gathered(t, reg, "budgetd_ingest_duplicate_spans_total"))
	require.EqualValues(t, 200, rows(t, st))
}

// BenchmarkSeenSpansRecord is the dedup check of fresh 1,000-span requests
// against a window already holding two million spans, the default
// generation layout (10 of one minute each) with the spans in one: what
// each request's Commit pays before its spans reach the log.
func BenchmarkSeenSpansRecord(b *testing.B) {
	s, err := newSeenSpans(DedupConfig{Window: 10 * time.Minute, MaxSpans: 8_000_000}, "",
		Settings{Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler)}, time.Now)
	require.NoError(b, err)
	spans := storetest.SpanBatch(5, 1000)
	next := uint64(0)
	renumber := func() {
		for i := range spans {
			next++
			binary.LittleEndian.PutUint64(spans[i].SpanID[:], next)
		}
	}
	for range 2000 {
		renumber()
		_, fps, _, err := s.record(spans)
		require.NoError(b, err)
		require.Len(b, fps, len(spans))
	}
	// The tables are mapped outside Go's heap (fpMapping).
	remembered := float64(s.tableBytes()) / 2e6
	b.ResetTimer()
	for b.Loop() {
		renumber()
		if _, _, dups, err := s.record(spans); err != nil || dups > 0 {
			b.Fatal(dups, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(spans)), "ns/span")
	b.ReportMetric(remembered, "B/remembered")
}

// TestSeenGenerationSizedLikeTheLast checks that a new generation starts
// with room for as many spans as the one before took, so a steady load
// never rebuilds its table.
func TestSeenGenerationSizedLikeTheLast(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s, err := newSeenSpans(DedupConfig{Window: 10 * time.Minute, MaxSpans: 1_000_000}, "",
		Settings{Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler)}, func() time.Time { return now })
	require.NoError(t, err)
	_, _, err = s.claim(storetest.SpanBatch(1, 5000))
	require.NoError(t, err)

	now = now.Add(s.genLen)
	_, _, err = s.claim(storetest.SpanBatch(2, 1))
	require.NoError(t, err)
	require.Len(t, s.gens, 2)
	next := s.gens[1].set
	slots := len(next.slots)
	require.GreaterOrEqual(t, 3*slots, 4*5000, "room for the last generation's 5,000 spans")
	_, _, err = s.claim(storetest.SpanBatch(3, 4999))
	require.NoError(t, err)
	require.Equal(t, 5000, next.Len())
	require.Len(t, next.slots, slots, "the table did not grow")
}

// TestSeenTablesUnderLoad fills a full window generation by generation
// and checks what a remembered span takes in the tables: under a steady
// load (with 5 % of jitter) the generations are made the right size and
// never grow; under a load rising by a fifth a generation each outgrows
// its table, doubles it, and is packed when it closes. Power-of-two
// tables took 17.6 and 15.3 bytes a span.
func TestSeenTablesUnderLoad(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rate   float64 // spans in the first generation
		growth float64 // per generation
		most   float64 // bytes a remembered span
	}{
		{"steady", 100_000, 1, 12.5},
		{"rising", 10_000, 1.2, fpBytesPerSpan},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := fillWindow(t, tc.rate, tc.growth)
			perSpan := float64(s.tableBytes()) / float64(s.total)
			t.Logf("%d spans in %d generations: %.1f bytes a span", s.total, len(s.gens), perSpan)
			require.LessOrEqual(t, perSpan, tc.most)
			require.Greater(t, perSpan, 8.0*4/3-0.01, "no table is fuller than 3/4")
		})
	}
}

// BenchmarkSeenSpansRecordFullWindow is BenchmarkSeenSpansRecord against
// a full window under a steady load: eleven generations of about 200,000
// spans each, in which every fresh span's lookup misses.
func BenchmarkSeenSpansRecordFullWindow(b *testing.B) {
	s, fresh := fillWindow(b, 200_000, 1)
	remembered := float64(s.tableBytes()) / float64(s.total)
	b.ResetTimer()
	for b.Loop() {
		if _, _, dups, err := s.record(fresh(1000)); err != nil || dups > 0 {
			b.Fatal(dups, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/span")
	b.ReportMetric(remembered, "B/remembered")
}

// fillWindow returns a dedup window (10 minutes, 10 generations) filled
// for twenty generations, the first of about rate spans (±5 %), each next
// growth times the one before, and what makes batches of spans it has not
// seen.
func fillWindow(tb testing.TB, rate, growth float64) (*seenSpans, func(n int) []schema.Span) {
	now := time.Unix(1_800_000_000, 0)
	s, err := newSeenSpans(DedupConfig{Window: 10 * time.Minute, MaxSpans: 50_000_000}, "",
		Settings{Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler)}, func() time.Time { return now })
	require.NoError(tb, err)
	spans := storetest.SpanBatch(5, 1000)
	next := uint64(0)
	fresh := func(n int) []schema.Span {
		batch := spans[:n]
		for i := range batch {
			next++
			binary.LittleEndian.PutUint64(batch[i].SpanID[:], next)
		}
		return batch
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for gen := range 2 * seenGenerations {
		n := int(rate * (0.95 + 0.1*rng.Float64()))
		for left := n; left > 0; left -= len(spans) {
			_, fps, _, err := s.record(fresh(min(left, len(spans))))
			require.NoError(tb, err)
			require.Len(tb, fps, min(left, len(spans)), "generation %d", gen)
		}
		rate *= growth
		now = now.Add(s.genLen)
	}
	return s, fresh
}
