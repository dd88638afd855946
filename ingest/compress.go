package ingest

import (
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"google.golang.org/grpc/encoding"
	// Registers gRPC's gzip compressor, the one OTLP exporters use most.
	_ "google.golang.org/grpc/encoding/gzip"
)

// zstdName is the compressor name gRPC exporters send in grpc-encoding and
// HTTP senders in Content-Encoding; the Collector registers the same one.
const zstdName = "zstd"

// zstdMaxWindow bounds the window a zstd frame may ask the decoder to
// allocate. Encoders use at most 8 MiB at their default levels; without a
// bound a few bytes of frame header could demand 512 MiB.
const zstdMaxWindow = 32 << 20

// gRPC's compressor registry is process-wide and, by its contract, may only
// be written during initialisation, before any server or client runs; an
// init function is the only place that satisfies that. It adds the "zstd"
// name and nothing else.
func init() {
	encoding.RegisterCompressor(newZstdCompressor())
}

// zstdCompressor implements gRPC's encoding.Compressor with klauspost's
// zstd, and serves OTLP/HTTP's zstd Content-Encoding too. Encoders and
// decoders are pooled: each holds window-sized buffers that are costly to
// allocate per request. Both run synchronously (concurrency 1), so no
// goroutine outlives a request.
type zstdCompressor struct {
	encoders sync.Pool // *zstd.Encoder
	decoders sync.Pool // *zstd.Decoder
}

var _ encoding.Compressor = (*zstdCompressor)(nil)

func newZstdCompressor() *zstdCompressor { return &zstdCompressor{} }

// Name implements encoding.Compressor.
func (c *zstdCompressor) Name() string { return zstdName }

// Compress implements encoding.Compressor; gRPC compresses responses to a
// zstd request with it.
func (c *zstdCompressor) Compress(w io.Writer) (io.WriteCloser, error) {
	enc, _ := c.encoders.Get().(*zstd.Encoder)
	if enc == nil {
		var err error
		enc, err = zstd.NewWriter(w, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithWindowSize(1<<20))
		if err != nil {
			return nil, err
		}
	} else {
		enc.Reset(w)
	}
	return &zstdWriter{enc: enc, pool: &c.encoders}, nil
}

// zstdWriter returns its encoder to the pool on Close.
type zstdWriter struct {
	enc  *zstd.Encoder
	pool *sync.Pool
}

func (z *zstdWriter) Write(p []byte) (int, error) {
	if z.enc == nil {
		return 0, io.ErrClosedPipe
	}
	return z.enc.Write(p)
}

func (z *zstdWriter) Close() error {
	if z.enc == nil {
		return nil
	}
	err := z.enc.Close()
	// Drop the reference to the output so the pool does not pin it.
	z.enc.Reset(nil)
	z.pool.Put(z.enc)
	z.enc = nil
	return err
}

// Decompress implements encoding.Compressor. The returned reader is also an
// io.Closer; gRPC closes it, and so must other callers, to return the
// decoder to the pool.
func (c *zstdCompressor) Decompress(r io.Reader) (io.Reader, error) {
	dec, _ := c.decoders.Get().(*zstd.Decoder)
	if dec == nil {
		var err error
		dec, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(zstdMaxWindow))
		if err != nil {
			return nil, err
		}
	}
	if err := dec.Reset(r); err != nil {
		c.decoders.Put(dec)
		return nil, err
	}
	return &zstdReader{dec: dec, pool: &c.decoders}, nil
}

// zstdReader returns its decoder to the pool on Close.
type zstdReader struct {
	dec  *zstd.Decoder
	pool *sync.Pool
}

func (z *zstdReader) Read(p []byte) (int, error) {
	if z.dec == nil {
		return 0, io.ErrClosedPipe
	}
	return z.dec.Read(p)
}

func (z *zstdReader) Close() error {
	if z.dec == nil {
		return nil
	}
	// Reset(nil) releases the input so the pool does not pin it.
	_ = z.dec.Reset(nil)
	z.pool.Put(z.dec)
	z.dec = nil
	return nil
}

// gzipReaders pools gzip readers for OTLP/HTTP bodies (gRPC has its own).
type gzipReaders struct {
	pool sync.Pool // *gzip.Reader
}

// open returns a reader of r's decompressed content. It fails when r does
// not start with a gzip header. Close returns the reader to the pool.
func (g *gzipReaders) open(r io.Reader) (io.ReadCloser, error) {
	zr, _ := g.pool.Get().(*gzip.Reader)
	if zr == nil {
		var err error
		if zr, err = gzip.NewReader(r); err != nil {
			return nil, err
		}
	} else if err := zr.Reset(r); err != nil {
		g.pool.Put(zr)
		return nil, err
	}
	return &gzipReader{zr: zr, pool: &g.pool}, nil
}

type gzipReader struct {
	zr   *gzip.Reader
	pool *sync.Pool
}

func (g *gzipReader) Read(p []byte) (int, error) {
	if g.zr == nil {
		return 0, io.ErrClosedPipe
	}
	return g.zr.Read(p)
}

func (g *gzipReader) Close() error {
	if g.zr == nil {
		return nil
	}
	g.pool.Put(g.zr)
	g.zr = nil
	return nil
}
