package wal

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testConfig(t *testing.T) Config {
	return Config{Dir: t.TempDir(), SegmentBytes: 1 << 20, MaxBytes: 8 << 20}
}

func open(t *testing.T, cfg Config) *WAL {
	t.Helper()
	w, err := Open(cfg, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close() })
	return w
}

func payload(i, size int) []byte {
	return bytes.Repeat([]byte{byte(i)}, size)
}

// readAll reads every durable record from pos on.
func readAll(t *testing.T, w *WAL, from Position) [][]byte {
	t.Helper()
	r := w.NewReader(from)
	defer r.Close()
	var out [][]byte
	for r.pos.Before(w.Committed()) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		p, _, err := r.Next(ctx)
		cancel()
		require.NoError(t, err)
		out = append(out, bytes.Clone(p))
	}
	return out
}

func TestAppendReadAcrossSegments(t *testing.T) {
	cfg := testConfig(t)
	w := open(t, cfg)
	ctx := context.Background()
	var want [][]byte
	for i := range 40 {
		p := payload(i, 100_000) // 40 × 100 kB rolls 1 MiB segments several times
		_, err := w.Append(ctx, p)
		require.NoError(t, err)
		want = append(want, p)
	}
	segs, err := listSegments(cfg.Dir)
	require.NoError(t, err)
	require.Greater(t, len(segs), 3, "segments rolled")
	for _, s := range segs {
		info, err := os.Stat(w.segmentPath(s))
		require.NoError(t, err)
		require.LessOrEqual(t, info.Size(), cfg.SegmentBytes, "no segment grows past its size")
	}
	require.Equal(t, want, readAll(t, w, w.First()))

	// Reopening finds the same records and appends after them.
	require.NoError(t, w.Close())
	w2 := open(t, cfg)
	_, err = w2.Append(ctx, []byte("after"))
	require.NoError(t, err)
	require.Equal(t, append(want, []byte("after")), readAll(t, w2, w2.First()))
}

func TestGroupCommit(t *testing.T) {
	w := open(t, testConfig(t))
	const writers, each = 16, 50
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				_, err := w.Append(context.Background(), []byte(fmt.Sprintf("%d-%d", g, i)))
				require.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	st := w.Stats()
	require.EqualValues(t, writers*each, st.Appends)
	require.Less(t, st.Syncs, st.Appends, "concurrent appends share fsyncs")
	got := readAll(t, w, w.First())
	require.Len(t, got, writers*each)
	seen := map[string]bool{}
	for _, p := range got {
		seen[string(p)] = true
	}
	require.Len(t, seen, writers*each, "every record once")
}

func TestTornAndCorruptTails(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, path string, size int64)
	}{
		{"torn header", func(t *testing.T, path string, size int64) { appendBytes(t, path, []byte{9, 0, 0}) }},
		{"torn payload", func(t *testing.T, path string, size int64) {
			appendBytes(t, path, []byte{100, 0, 0, 0, 1, 2, 3, 4, 'x', 'y'})
		}},
		{"flipped byte in last record", func(t *testing.T, path string, size int64) { flipByte(t, path, size-1) }},
		{"absurd length", func(t *testing.T, path string, size int64) {
			appendBytes(t, path, []byte{255, 255, 255, 255, 0, 0, 0, 0})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t)
			w, err := Open(cfg, nil)
			require.NoError(t, err)
			ctx := context.Background()
			for i := range 5 {
				_, err := w.Append(ctx, payload(i, 1000))
				require.NoError(t, err)
			}
			end := w.Committed()
			require.NoError(t, w.Close())
			path := w.segmentPath(end.Segment)
			tt.damage(t, path, end.Offset)

			w2 := open(t, cfg)
			st := w2.Stats()
			require.EqualValues(t, 1, st.CorruptRecords, "the damage is counted")
			require.Positive(t, st.TruncatedBytes)
			got := readAll(t, w2, w2.First())
			if tt.name == "flipped byte in last record" {
				require.Len(t, got, 4, "the damaged record is dropped, the ones before kept")
			} else {
				require.Len(t, got, 5, "every whole record survives a torn tail")
			}
			_, err = w2.Append(ctx, []byte("new"))
			require.NoError(t, err)
			got = readAll(t, w2, w2.First())
			require.Equal(t, []byte("new"), got[len(got)-1], "appends continue after the cut")
		})
	}
}

func appendBytes(t *testing.T, path string, b []byte) {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.Write(b)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func flipByte(t *testing.T, path string, at int64) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	b := make([]byte, 1)
	_, err = f.ReadAt(b, at)
	require.NoError(t, err)
	b[0] ^= 0xff
	_, err = f.WriteAt(b, at)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func TestFullAndTruncate(t *testing.T) {
	cfg := Config{Dir: t.TempDir(), SegmentBytes: 1 << 20, MaxBytes: 3 << 20}
	w := open(t, cfg)
	ctx := context.Background()
	var ends []Position
	for {
		end, err := w.Append(ctx, payload(1, 200_000))
		if err != nil {
			require.ErrorIs(t, err, ErrFull)
			break
		}
		ends = append(ends, end)
	}
	require.EqualValues(t, 1, w.Stats().Full)
	require.LessOrEqual(t, w.Stats().Bytes, cfg.MaxBytes)

	// Acknowledging everything up to the last record frees the segments
	// behind it, and appends are accepted again.
	require.NoError(t, w.Truncate(ends[len(ends)-1]))
	segs, err := listSegments(cfg.Dir)
	require.NoError(t, err)
	require.Len(t, segs, 1, "only the segment being written remains")
	_, err = w.Append(ctx, payload(2, 200_000))
	require.NoError(t, err)
}

func TestReaderWaitsForAppends(t *testing.T) {
	w := open(t, testConfig(t))
	r := w.NewReader(w.First())
	defer r.Close()
	got := make(chan []byte, 1)
	errc := make(chan error, 1)
	go func() {
		p, _, err := r.Next(context.Background())
		got <- p
		errc <- err
	}()
	_, err := w.Append(context.Background(), []byte("hello"))
	require.NoError(t, err)
	require.Equal(t, []byte("hello"), <-got)
	require.NoError(t, <-errc)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err = r.Next(ctx)
	require.ErrorIs(t, err, context.Canceled, "a reader at the end honours its context")

	go func() {
		_, _, err := r.Next(context.Background())
		errc <- err
	}()
	require.NoError(t, w.Close())
	require.ErrorIs(t, <-errc, ErrClosed, "closing wakes readers")
	_, err = w.Append(context.Background(), []byte("late"))
	require.ErrorIs(t, err, ErrClosed)
}

func TestConfigValidate(t *testing.T) {
	require.NoError(t, DefaultConfig().Validate())
	err := Config{Dir: "", SegmentBytes: 10, MaxBytes: 5}.Validate()
	require.ErrorContains(t, err, "ingest.durability.wal.dir must not be empty")
	require.ErrorContains(t, err, "ingest.durability.wal.segment_bytes must be >= 1048576")
	require.ErrorContains(t, err, "ingest.durability.wal.max_bytes must be >= ingest.durability.wal.segment_bytes")
}

// BenchmarkAppendParallel measures group-committed appends of 64 KiB
// records (about a 100-span OTLP request) from concurrent writers.
func BenchmarkAppendParallel(b *testing.B) {
	w, err := Open(Config{Dir: b.TempDir(), SegmentBytes: 64 << 20, MaxBytes: 1 << 40}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	p := payload(7, 64<<10)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := w.Append(context.Background(), p); err != nil {
				b.Error(err)
				return
			}
		}
	})
	st := w.Stats()
	b.ReportMetric(float64(st.Appends)/float64(max(st.Syncs, 1)), "appends/sync")
}

// TestReaderReusesItsBuffer checks that a reader reads each record into the
// buffer of the one before (its payload is valid until the next call), and
// that a record over keptPayloadBytes gets a buffer of its own, not kept.
func TestReaderReusesItsBuffer(t *testing.T) {
	cfg := testConfig(t)
	cfg.SegmentBytes, cfg.MaxBytes = 16<<20, 32<<20
	w := open(t, cfg)
	sizes := []int{1000, 500, keptPayloadBytes + 1, 800}
	for i, n := range sizes {
		_, err := w.Append(context.Background(), payload(i, n))
		require.NoError(t, err)
	}
	r := w.NewReader(w.First())
	defer r.Close()
	var first *byte
	for i, n := range sizes {
		p, _, err := r.Next(context.Background())
		require.NoError(t, err)
		require.Equal(t, payload(i, n), p)
		switch {
		case i == 0:
			first = &p[0]
		case n > keptPayloadBytes:
			require.NotSame(t, first, &p[0], "a large record gets its own buffer")
		default:
			require.Same(t, first, &p[0], "record %d is read into the first record's buffer", i)
		}
	}
}
