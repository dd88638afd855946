package ingest

import (
	"bytes"
	"io"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/encoding"
)

// TestZstdCompressor checks the gRPC zstd compressor: it is registered
// under the Collector's name, round-trips data through pooled encoders and
// decoders, and reads the zstd the Collector's encoder writes.
func TestZstdCompressor(t *testing.T) {
	c, ok := encoding.GetCompressor(zstdName).(*zstdCompressor)
	require.True(t, ok, "zstd is registered with gRPC")

	for _, size := range []int{0, 1, 1000, 3 << 20} {
		data := bytes.Repeat([]byte("budget.remaining_ms="), size/20+1)[:size]
		for range 2 { // the second round reuses pooled coders
			var buf bytes.Buffer
			w, err := c.Compress(&buf)
			require.NoError(t, err)
			_, err = w.Write(data)
			require.NoError(t, err)
			require.NoError(t, w.Close())
			require.NoError(t, w.Close(), "closing twice is harmless")

			r, err := c.Decompress(&buf)
			require.NoError(t, err)
			got, err := io.ReadAll(r)
			require.NoError(t, err)
			require.NoError(t, r.(io.Closer).Close())
			require.Equal(t, len(data), len(got))
			require.True(t, bytes.Equal(data, got))
		}
	}

	// Another encoder's stream (klauspost's defaults, as the Collector
	// uses) decodes too.
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	require.NoError(t, err)
	frame := enc.EncodeAll([]byte("from the collector"), nil)
	require.NoError(t, enc.Close())
	r, err := c.Decompress(bytes.NewReader(frame))
	require.NoError(t, err)
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	require.Equal(t, "from the collector", string(got))
	require.NoError(t, r.(io.Closer).Close())

	// Garbage fails on read, and the decoder still goes back to the pool.
	r, err = c.Decompress(bytes.NewReader([]byte("not zstd")))
	if err == nil {
		_, err = io.ReadAll(r)
		require.NoError(t, r.(io.Closer).Close())
	}
	require.Error(t, err)
}

// TestZstdWindowLimit checks that a frame asking for a window beyond
// zstdMaxWindow is refused instead of allocated.
func TestZstdWindowLimit(t *testing.T) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(2*zstdMaxWindow))
	require.NoError(t, err)
	var buf bytes.Buffer
	enc.Reset(&buf)
	_, err = enc.Write(make([]byte, 4*zstdMaxWindow))
	require.NoError(t, err)
	require.NoError(t, enc.Close())

	r, err := newZstdCompressor().Decompress(&buf)
	if err == nil {
		_, err = io.Copy(io.Discard, r)
	}
	require.ErrorIs(t, err, zstd.ErrWindowSizeExceeded)
}
