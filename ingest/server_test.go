package ingest

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/budgetd/budgetd/durable"
	"github.com/budgetd/budgetd/ingest/ingesttest"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store"
)

// bomb returns n zero bytes compressed with contentEncoding: a small body
// that inflates far past any limit.
func bomb(t testing.TB, n int, contentEncoding string) []byte {
	t.Helper()
	return compress(t, make([]byte, n), contentEncoding)
}

// totalAlloc returns the bytes allocated by the process so far.
func totalAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

const (
	testLimit     = 1 << 20  // the request limit the outcome tests configure
	testBombBytes = 64 << 20 // what a bomb inflates to
	// testBombBudget is the most a refused bomb may allocate: the body up
	// to the limit (a doubling buffer) and a decoder's window, well under
	// the bomb's inflated size.
	testBombBudget = testBombBytes / 2
)

// TestHTTPOutcomes sends OTLP/HTTP requests good and bad and checks, for
// each, the status and body the sender sees and what was stored.
func TestHTTPOutcomes(t *testing.T) {
	// partialReason is the error_message for 2 zero span ids and 1 span
	// ending before its start, most common first.
	const partialReason = "span_id is missing or all zero (2 spans); end_time_unix_nano is before start_time_unix_nano (1 span)"
	truncatedZstd := compress(t, encode(t, tracesWithBad(20, 50, 0, 0), encodingProtobuf), "zstd")
	truncatedZstd = truncatedZstd[:len(truncatedZstd)/2]
	gzipBomb, zstdBomb := bomb(t, testBombBytes, "gzip"), bomb(t, testBombBytes, "zstd")

	tests := []struct {
		name            string
		method, path    string // default POST /v1/traces
		contentType     string
		contentEncoding string
		body            []byte
		wantStatus      int
		wantCode        codes.Code // of the google.rpc.Status body, for OTLP errors
		wantMessage     string     // in the status message or partial_success
		wantStored      int
		wantRejected    int64
		maxAlloc        uint64 // bound on bytes allocated while answering
	}{
		{name: "protobuf", contentType: contentTypeProtobuf,
			body: encode(t, tracesWithBad(1, 50, 0, 0), encodingProtobuf), wantStatus: 200, wantStored: 50},
		{name: "json", contentType: contentTypeJSON,
			body: encode(t, tracesWithBad(2, 50, 0, 0), encodingJSON), wantStatus: 200, wantStored: 50},
		{name: "protobuf gzip", contentType: contentTypeProtobuf, contentEncoding: "gzip",
			body: compress(t, encode(t, tracesWithBad(3, 50, 0, 0), encodingProtobuf), "gzip"), wantStatus: 200, wantStored: 50},
		{name: "json zstd", contentType: contentTypeJSON, contentEncoding: "zstd",
			body: compress(t, encode(t, tracesWithBad(4, 50, 0, 0), encodingJSON), "zstd"), wantStatus: 200, wantStored: 50},
		{name: "json with charset", contentType: "application/json; charset=utf-8",
			body: encode(t, tracesWithBad(5, 10, 0, 0), encodingJSON), wantStatus: 200, wantStored: 10},
		{name: "partial protobuf", contentType: contentTypeProtobuf,
			body:       encode(t, tracesWithBad(6, 30, 2, 1), encodingProtobuf),
			wantStatus: 200, wantStored: 30, wantRejected: 3, wantMessage: partialReason},
		{name: "partial json gzip", contentType: contentTypeJSON, contentEncoding: "gzip",
			body:       compress(t, encode(t, tracesWithBad(7, 30, 2, 1), encodingJSON), "gzip"),
			wantStatus: 200, wantStored: 30, wantRejected: 3, wantMessage: partialReason},
		{name: "every span rejected", contentType: contentTypeProtobuf,
			body:       encode(t, tracesWithBad(8, 0, 1, 0), encodingProtobuf),
			wantStatus: 200, wantRejected: 1, wantMessage: "span_id is missing or all zero (1 span)"},
		{name: "empty protobuf request", contentType: contentTypeProtobuf, body: nil, wantStatus: 200},
		{name: "malformed protobuf", contentType: contentTypeProtobuf,
			body:       []byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01},
			wantStatus: 400, wantCode: codes.InvalidArgument, wantMessage: "decode otlp/protobuf"},
		{name: "malformed json", contentType: contentTypeJSON, body: []byte(`{"resourceSpans": [`),
			wantStatus: 400, wantCode: codes.InvalidArgument, wantMessage: "decode otlp/json"},
		{name: "json that is not an object", contentType: contentTypeJSON, body: []byte(`[1, 2]`),
			wantStatus: 400, wantCode: codes.InvalidArgument, wantMessage: "decode otlp/json"},
		{name: "corrupt gzip", contentType: contentTypeProtobuf, contentEncoding: "gzip", body: []byte("not gzip at all"),
			wantStatus: 400, wantCode: codes.InvalidArgument, wantMessage: "gzip"},
		{name: "truncated zstd", contentType: contentTypeProtobuf, contentEncoding: "zstd", body: truncatedZstd,
			wantStatus: 400, wantCode: codes.InvalidArgument},
		{name: "gzip bomb", contentType: contentTypeProtobuf, contentEncoding: "gzip", body: gzipBomb,
			wantStatus: 413, wantCode: codes.ResourceExhausted, wantMessage: "after decompression", maxAlloc: testBombBudget},
		{name: "zstd bomb json", contentType: contentTypeJSON, contentEncoding: "zstd", body: zstdBomb,
			wantStatus: 413, wantCode: codes.ResourceExhausted, wantMessage: "after decompression", maxAlloc: testBombBudget},
		{name: "body over the limit", contentType: contentTypeProtobuf, body: make([]byte, testLimit+1),
			wantStatus: 413, wantCode: codes.ResourceExhausted, wantMessage: "over the limit"},
		{name: "unsupported content type", contentType: "text/plain",
			body: encode(t, tracesWithBad(9, 5, 0, 0), encodingProtobuf), wantStatus: 415},
		{name: "no content type", body: encode(t, tracesWithBad(10, 5, 0, 0), encodingProtobuf), wantStatus: 415},
		{name: "unsupported encoding", contentType: contentTypeProtobuf, contentEncoding: "br",
			body:       encode(t, tracesWithBad(11, 5, 0, 0), encodingProtobuf),
			wantStatus: 400, wantCode: codes.InvalidArgument, wantMessage: "Content-Encoding"},
		{name: "GET", method: http.MethodGet, contentType: contentTypeProtobuf, wantStatus: 405},
		{name: "unknown path", path: "/v1/metrics", contentType: contentTypeProtobuf,
			body: encode(t, tracesWithBad(12, 5, 0, 0), encodingProtobuf), wantStatus: 404},
	}
	for _, eng := range engines() {
		t.Run(eng.name, func(t *testing.T) {
			st := eng.start(t).open(t)
			cfg := testConfig()
			cfg.HTTP.MaxRequestBytes = testLimit
			ts := startServer(t, st, cfg)
			stored := uint64(0)
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					method, path := tt.method, tt.path
					if method == "" {
						method = http.MethodPost
					}
					if path == "" {
						path = tracesPath
					}
					before := totalAlloc()
					a := post(t, ts, method, path, tt.contentType, tt.contentEncoding, tt.body)
					if tt.maxAlloc > 0 {
						require.Less(t, totalAlloc()-before, tt.maxAlloc, "the refused body was read whole")
					}
					require.Equal(t, tt.wantStatus, a.status, "body: %s", a.body)
					switch {
					case tt.wantStatus == http.StatusOK:
						ps := a.exportResponse(t).PartialSuccess()
						require.Equal(t, tt.wantRejected, ps.RejectedSpans())
						require.Equal(t, tt.wantMessage, ps.ErrorMessage())
					case tt.wantCode != codes.OK:
						require.Equal(t, mustEncoding(tt.contentType).contentType(), a.header.Get("Content-Type"))
						s := a.rpcStatus(t)
						require.Equal(t, int32(tt.wantCode), s.GetCode())
						require.Contains(t, s.GetMessage(), tt.wantMessage)
						require.Empty(t, a.header.Get("Retry-After"), "a bad request is not retried")
					default:
						require.True(t, strings.HasPrefix(a.header.Get("Content-Type"), "text/plain"))
					}
					if tt.wantStatus == http.StatusMethodNotAllowed {
						require.Equal(t, http.MethodPost, a.header.Get("Allow"))
					}
					stored += uint64(tt.wantStored)
					require.Equal(t, stored, countRows(t, st), "spans stored so far")
				})
			}
		})
	}
}

// mustEncoding returns the body encoding of a supported content type.
func mustEncoding(contentType string) bodyEncoding {
	enc, ok := parseContentType(contentType)
	if !ok {
		panic("unsupported content type " + contentType)
	}
	return enc
}

// TestGRPCOutcomes is TestHTTPOutcomes over OTLP/gRPC.
func TestGRPCOutcomes(t *testing.T) {
	tests := []struct {
		name         string
		body         []byte
		compressor   string
		wantCode     codes.Code
		wantMessage  string
		wantStored   int
		wantRejected int64
		maxAlloc     uint64
	}{
		{name: "protobuf", body: encode(t, tracesWithBad(1, 50, 0, 0), encodingProtobuf), wantStored: 50},
		{name: "gzip", body: encode(t, tracesWithBad(2, 50, 0, 0), encodingProtobuf), compressor: "gzip", wantStored: 50},
		{name: "zstd", body: encode(t, tracesWithBad(3, 50, 0, 0), encodingProtobuf), compressor: zstdName, wantStored: 50},
		{name: "partial", body: encode(t, tracesWithBad(4, 30, 2, 1), encodingProtobuf), wantStored: 30, wantRejected: 3,
			wantMessage: "span_id is missing or all zero (2 spans); end_time_unix_nano is before start_time_unix_nano (1 span)"},
		{name: "empty request", body: nil},
		{name: "malformed", body: []byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01},
			wantCode: codes.InvalidArgument, wantMessage: "decode otlp/protobuf"},
		{name: "over the limit", body: make([]byte, testLimit+1), wantCode: codes.ResourceExhausted},
		{name: "gzip bomb", body: make([]byte, 8*testLimit), compressor: "gzip", wantCode: codes.ResourceExhausted,
			wantMessage: "after decompression"},
		{name: "zstd bomb", body: make([]byte, 8*testLimit), compressor: zstdName, wantCode: codes.ResourceExhausted,
			wantMessage: "after decompression"},
	}
	for _, eng := range engines() {
		t.Run(eng.name, func(t *testing.T) {
			st := eng.start(t).open(t)
			cfg := testConfig()
			cfg.GRPC.MaxRecvMsgBytes = testLimit
			ts := startServer(t, st, cfg)
			conn := dialGRPC(t, ts)
			stored := uint64(0)
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					resp, err := exportRaw(t, conn, tt.body, tt.compressor)
					s := status.Convert(err)
					require.Equal(t, tt.wantCode, s.Code(), "status: %v", s)
					if tt.wantCode == codes.OK {
						require.Equal(t, tt.wantRejected, resp.PartialSuccess().RejectedSpans())
						require.Equal(t, tt.wantMessage, resp.PartialSuccess().ErrorMessage())
					} else {
						require.Contains(t, s.Message(), tt.wantMessage)
						require.Zero(t, retryDelay(t, s), "a bad request is not retried")
					}
					stored += uint64(tt.wantStored)
					require.Equal(t, stored, countRows(t, st), "spans stored so far")
				})
			}
		})
	}
}

// TestStoredAsConverted checks that what a sender sends over each
// transport and encoding is stored exactly as the Converter turns it into
// schema spans (the SDK test compares with the SDK's own view; this covers
// what the SDK cannot send, such as link trace states and every value
// type).
func TestStoredAsConverted(t *testing.T) {
	st := openEmbedded(t)
	ts := startServer(t, st, testConfig())
	conn := dialGRPC(t, ts)
	conv := newTestConverter(t, DefaultLimits())
	for i, tt := range []struct {
		name string
		send func(td ptrace.Traces)
	}{
		{"http json", func(td ptrace.Traces) {
			a := post(t, ts, http.MethodPost, tracesPath, contentTypeJSON, "", encode(t, td, encodingJSON))
			require.Equal(t, int64(0), a.exportResponse(t).PartialSuccess().RejectedSpans())
		}},
		{"http protobuf zstd", func(td ptrace.Traces) {
			a := post(t, ts, http.MethodPost, tracesPath, contentTypeProtobuf, "zstd",
				compress(t, encode(t, td, encodingProtobuf), "zstd"))
			require.Equal(t, int64(0), a.exportResponse(t).PartialSuccess().RejectedSpans())
		}},
		{"grpc", func(td ptrace.Traces) {
			_, err := exportRaw(t, conn, encode(t, td, encodingProtobuf), "")
			require.NoError(t, err)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			td, _, sp := newSpan()
			sp.SetTraceID([16]byte{0x77, byte(i), 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
			sp.SetName("every field")
			sp.SetKind(ptrace.SpanKindConsumer)
			sp.TraceState().FromRaw("a=1,b=2")
			sp.Status().SetCode(ptrace.StatusCodeError)
			sp.Status().SetMessage("broken")
			putEveryType(sp.Attributes())
			ev := sp.Events().AppendEmpty()
			ev.SetName("ev")
			ev.SetTimestamp(1_500)
			putEveryType(ev.Attributes())
			l := sp.Links().AppendEmpty()
			l.SetTraceID(linkTraceID)
			l.SetSpanID(linkSpanID)
			l.TraceState().FromRaw("vendor=x")
			l.Attributes().PutStr("k", "v")
			td.ResourceSpans().At(0).Resource().Attributes().PutStr("service.name", "svc")
			want := conv.Convert(td).Spans
			tt.send(td)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			got, _, err := st.Trace(ctx, want[0].TraceID, store.TraceLimits{})
			require.NoError(t, err)
			require.Equal(t, want, got)
		})
	}
}

// TestStoreUnavailable stops the ClickHouse server under a running
// ingest: senders must see 503 / UNAVAILABLE with a retry delay, nothing
// is stored, and once the server is back the same request succeeds.
func TestStoreUnavailable(t *testing.T) {
	st, srv := openClickHouse(t)
	cfg := testConfig()
	cfg.RetryAfter = 3 * time.Second
	dcfg := testBatch(t)
	dcfg.WriteTimeout = time.Second
	dcfg.Batch.RetryTimeout = 500 * time.Millisecond
	ts := startServerBatch(t, st, cfg, dcfg)
	conn := dialGRPC(t, ts)
	body := encode(t, tracesWithBad(1, 40, 0, 0), encodingProtobuf)

	require.NoError(t, srv.Stop())
	t.Run("http", func(t *testing.T) {
		a := post(t, ts, http.MethodPost, tracesPath, contentTypeProtobuf, "", body)
		require.Equal(t, http.StatusServiceUnavailable, a.status, "body: %s", a.body)
		require.Equal(t, "3", a.header.Get("Retry-After"))
		s := status.FromProto(a.rpcStatus(t))
		require.Equal(t, codes.Unavailable, s.Code())
		require.Equal(t, 3*time.Second, retryDelay(t, s))
		require.NotContains(t, s.Message(), "127.0.0.1", "store details stay in the log")
	})
	t.Run("grpc", func(t *testing.T) {
		_, err := exportRaw(t, conn, body, "")
		s := status.Convert(err)
		require.Equal(t, codes.Unavailable, s.Code(), "status: %v", s)
		require.Equal(t, 3*time.Second, retryDelay(t, s))
	})
	require.NoError(t, srv.Start())
	t.Run("after restart", func(t *testing.T) {
		a := post(t, ts, http.MethodPost, tracesPath, contentTypeProtobuf, "", body)
		require.Equal(t, http.StatusOK, a.status, "body: %s", a.body)
		require.Equal(t, uint64(40), countRows(t, st), "only the acknowledged request is stored")
	})
	errs := metricValue(t, ts, "budgetd_ingest_store_write_errors_total", map[string]string{"reason": "unavailable"})
	require.Positive(t, errs)
	refused := metricValue(t, ts, "budgetd_ingest_spans_refused_total", map[string]string{"reason": "unavailable"})
	require.Equal(t, 80.0, refused)
}

// gatedWriter holds every write until released, to make the store slow in
// a way a real engine cannot be made to be on cue. Writes honour their
// context while held.
type gatedWriter struct {
	durable.SpanStore
	entered chan struct{} // receives when a write starts waiting
	release chan struct{} // closed to let writes through
}

func newGatedWriter(w durable.SpanStore) *gatedWriter {
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

// waitFor polls cond until it holds, failing the test after a deadline.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestOverload fills the write queue and the concurrency limit: further
// senders must be refused at once with 503 / UNAVAILABLE and a retry
// delay, and what was accepted must be stored when the store catches up.
func TestOverload(t *testing.T) {
	t.Run("queue full", func(t *testing.T) {
		st := openEmbedded(t)
		gate := newGatedWriter(st)
		dcfg := testBatch(t)
		dcfg.Batch.QueueSpans = 10
		ts := startServerBatch(t, gate, testConfig(), dcfg)
		conn := dialGRPC(t, ts)

		// The first request's write is held; the second fills the queue.
		first := postAsync(ts.httpAddr, encode(t, tracesWithBad(1, 10, 0, 0), encodingProtobuf))
		<-gate.entered
		second := postAsync(ts.httpAddr, encode(t, tracesWithBad(2, 10, 0, 0), encodingProtobuf))
		waitFor(t, "the queue to fill", func() bool {
			return metricValue(t, ts, "budgetd_ingest_queue_spans", nil) == 10
		})

		over := encode(t, tracesWithBad(3, 5, 0, 0), encodingProtobuf)
		a := post(t, ts, http.MethodPost, tracesPath, contentTypeProtobuf, "", over)
		require.Equal(t, http.StatusServiceUnavailable, a.status)
		require.Equal(t, "1", a.header.Get("Retry-After"))
		_, err := exportRaw(t, conn, over, "")
		s := status.Convert(err)
		require.Equal(t, codes.Unavailable, s.Code(), "status: %v", s)
		require.Equal(t, time.Second, retryDelay(t, s))

		close(gate.release)
		require.Equal(t, http.StatusOK, (<-first).status)
		require.Equal(t, http.StatusOK, (<-second).status)
		require.Equal(t, uint64(20), countRows(t, st))
		require.Equal(t, 10.0, metricValue(t, ts, "budgetd_ingest_spans_refused_total", map[string]string{"reason": "overloaded"}))
	})
	t.Run("concurrency limit", func(t *testing.T) {
		st := openEmbedded(t)
		gate := newGatedWriter(st)
		cfg := testConfig()
		cfg.MaxConcurrentRequests = 1
		ts := startServer(t, gate, cfg)
		answer := postAsync(ts.httpAddr, encode(t, tracesWithBad(1, 10, 0, 0), encodingProtobuf))
		<-gate.entered
		a := post(t, ts, http.MethodPost, tracesPath, contentTypeJSON, "", encode(t, tracesWithBad(2, 10, 0, 0), encodingJSON))
		require.Equal(t, http.StatusServiceUnavailable, a.status)
		require.Equal(t, int32(codes.Unavailable), a.rpcStatus(t).GetCode())
		close(gate.release)
		require.Equal(t, http.StatusOK, (<-answer).status)
		require.Equal(t, uint64(10), countRows(t, st))
	})
}

// TestShutdown checks that Shutdown lets requests in progress commit and
// answer, and that with an expired context it cuts them off and returns.
func TestShutdown(t *testing.T) {
	newServer := func(t *testing.T, w durable.SpanStore) *Server {
		cfg := testConfig()
		b, err := durable.NewBatcher(testBatch(t), durable.Settings{Logger: testLogger(t), Store: w})
		require.NoError(t, err)
		s, err := New(cfg, Settings{Logger: testLogger(t), Durability: b})
		require.NoError(t, err)
		require.NoError(t, s.Start(context.Background()))
		return s
	}
	send := func(t *testing.T, s *Server, seed int64) <-chan httpAnswer {
		_, h := s.Addrs()
		return postAsync(h.String(), encode(t, tracesWithBad(seed, 10, 0, 0), encodingProtobuf))
	}

	t.Run("drains", func(t *testing.T) {
		st := openEmbedded(t)
		gate := newGatedWriter(st)
		s := newServer(t, gate)
		answer := send(t, s, 1)
		<-gate.entered
		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			done <- s.Shutdown(ctx)
		}()
		close(gate.release)
		require.Equal(t, http.StatusOK, (<-answer).status)
		require.NoError(t, <-done)
		require.Equal(t, uint64(10), countRows(t, st))
		_, h := s.Addrs()
		_, err := http.Post("http://"+h.String()+tracesPath, contentTypeProtobuf, bytes.NewReader(nil))
		require.Error(t, err, "the listener is closed")
	})
	t.Run("honours its context", func(t *testing.T) {
		st := openEmbedded(t)
		gate := newGatedWriter(st) // never released
		s := newServer(t, gate)
		answer := send(t, s, 2)
		<-gate.entered
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := s.Shutdown(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Less(t, time.Since(start), 10*time.Second)
		// The cut-off sender sees a retryable answer or a broken
		// connection (a zero status), never a success.
		require.NotEqual(t, http.StatusOK, (<-answer).status)
		require.Equal(t, uint64(0), countRows(t, st))
	})
}

// TestServerLifecycle checks the lifecycle edges: construction errors, a
// port already taken, Shutdown without Start, and Start after Shutdown.
func TestServerLifecycle(t *testing.T) {
	t.Run("new errors", func(t *testing.T) {
		_, err := New(testConfig(), Settings{})
		require.ErrorContains(t, err, "no durability")
		cfg := testConfig()
		cfg.HTTP.MaxRequestBytes = 0
		_, err = New(cfg, Settings{Durability: &acceptingDurability{}})
		require.ErrorContains(t, err, "ingest.http.max_request_bytes must be > 0")
		reg := prometheus.NewRegistry()
		_, err = New(testConfig(), Settings{Durability: &acceptingDurability{}, Registerer: reg})
		require.NoError(t, err)
		_, err = New(testConfig(), Settings{Durability: &acceptingDurability{}, Registerer: reg})
		require.ErrorContains(t, err, "register ingest metrics")
	})
	t.Run("port taken", func(t *testing.T) {
		taken, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer taken.Close()
		cfg := testConfig()
		cfg.HTTP.Endpoint = taken.Addr().String()
		s, err := New(cfg, Settings{Durability: &acceptingDurability{}})
		require.NoError(t, err)
		require.ErrorContains(t, s.Start(context.Background()), "listen otlp/http on "+taken.Addr().String())
		g, h := s.Addrs()
		require.Nil(t, g, "the gRPC listener was closed again")
		require.Nil(t, h)
		require.NoError(t, s.Shutdown(context.Background()))
	})
	t.Run("shutdown without start", func(t *testing.T) {
		dur := &acceptingDurability{}
		s, err := New(testConfig(), Settings{Durability: dur})
		require.NoError(t, err)
		require.NoError(t, s.Shutdown(context.Background()))
		require.NoError(t, s.Shutdown(context.Background()), "a second Shutdown is a no-op")
		require.ErrorContains(t, s.Start(context.Background()), "already started")
	})
	t.Run("one transport", func(t *testing.T) {
		cfg := testConfig()
		cfg.GRPC.Endpoint = ""
		ts := startServerWith(t, cfg, Settings{Durability: &acceptingDurability{}}, nil)
		require.Empty(t, ts.grpcAddr)
		a := post(t, ts, http.MethodPost, tracesPath, contentTypeProtobuf, "", encode(t, tracesWithBad(1, 3, 0, 0), encodingProtobuf))
		require.Equal(t, http.StatusOK, a.status)
	})
}

// recordingSink records what the write path hands to analysis.
type recordingSink struct {
	spans chan []schema.Span
}

func (r *recordingSink) Spans(spans []schema.Span) { r.spans <- spans }

// TestSinkGetsCommittedSpans checks that analysis sees exactly the spans
// that were committed, and nothing of a refused request.
func TestSinkGetsCommittedSpans(t *testing.T) {
	st := openEmbedded(t)
	cfg := testConfig()
	sink := &recordingSink{spans: make(chan []schema.Span, 10)}
	b, err := durable.NewBatcher(testBatch(t), durable.Settings{Store: st, Sink: sink})
	require.NoError(t, err)
	ts := startServerWith(t, cfg, Settings{Durability: b}, nil)

	td := tracesWithBad(1, 20, 1, 0)
	a := post(t, ts, http.MethodPost, tracesPath, contentTypeProtobuf, "", encode(t, td, encodingProtobuf))
	require.Equal(t, http.StatusOK, a.status)
	got := <-sink.spans
	require.Equal(t, newTestConverter(t, DefaultLimits()).Convert(td).Spans, got)

	a = post(t, ts, http.MethodPost, tracesPath, contentTypeProtobuf, "", []byte{0xff})
	require.Equal(t, http.StatusBadRequest, a.status)
	require.Empty(t, sink.spans)
}

// TestConfigValidate checks that every invalid setting is reported with
// its key.
func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantErr string
	}{
		{"defaults", func(*Config) {}, ""},
		{"grpc disabled", func(c *Config) { c.GRPC.Endpoint = "" }, ""},
		{"both disabled", func(c *Config) { c.GRPC.Endpoint, c.HTTP.Endpoint = "", "" }, "must not both be empty"},
		{"bad grpc endpoint", func(c *Config) { c.GRPC.Endpoint = "4317" }, "ingest.grpc.endpoint must be host:port"},
		{"bad http endpoint", func(c *Config) { c.HTTP.Endpoint = "localhost" }, "ingest.http.endpoint must be host:port"},
		{"grpc limit zero", func(c *Config) { c.GRPC.MaxRecvMsgBytes = 0 }, "ingest.grpc.max_recv_msg_bytes must be > 0"},
		{"grpc limit 64 MiB", func(c *Config) { c.GRPC.MaxRecvMsgBytes = 64 << 20 }, ""},
		{"grpc limit over 64 MiB", func(c *Config) { c.GRPC.MaxRecvMsgBytes = 64<<20 + 1 }, "ingest.grpc.max_recv_msg_bytes must be <= 67108864"},
		{"grpc streams", func(c *Config) { c.GRPC.MaxConcurrentStreams = 0 }, "ingest.grpc.max_concurrent_streams must be > 0"},
		{"grpc connection timeout", func(c *Config) { c.GRPC.ConnectionTimeout = 0 }, "ingest.grpc.connection_timeout must be > 0"},
		{"http limit", func(c *Config) { c.HTTP.MaxRequestBytes = 0 }, "ingest.http.max_request_bytes must be > 0"},
		{"http read header timeout", func(c *Config) { c.HTTP.ReadHeaderTimeout = 0 }, "ingest.http.read_header_timeout must be > 0"},
		{"http read timeout", func(c *Config) { c.HTTP.ReadTimeout = -time.Second }, "ingest.http.read_timeout must be > 0"},
		{"http write timeout", func(c *Config) { c.HTTP.WriteTimeout = 0 }, "ingest.http.write_timeout must be > 0"},
		{"http idle timeout", func(c *Config) { c.HTTP.IdleTimeout = 0 }, "ingest.http.idle_timeout must be > 0"},
		{"retry after", func(c *Config) { c.RetryAfter = 0 }, "ingest.retry_after must be > 0"},
		{"concurrency", func(c *Config) { c.MaxConcurrentRequests = 0 }, "ingest.max_concurrent_requests must be > 0"},
		{"limits", func(c *Config) { c.Limits.MaxSpanAttrs = 0 }, "ingest.limits.max_span_attrs must be > 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.mutate(&cfg)
			err := cfg.Validate()
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

// TestDefaultConfig pins the defaults DESIGN §6 names.
func TestDefaultConfig(t *testing.T) {
	cfg := DefaultConfig()
	require.Equal(t, "localhost:4317", cfg.GRPC.Endpoint)
	require.Equal(t, "localhost:4318", cfg.HTTP.Endpoint)
	require.Equal(t, 4<<20, cfg.GRPC.MaxRecvMsgBytes)
	require.Equal(t, int64(20<<20), cfg.HTTP.MaxRequestBytes)
	require.Equal(t, DefaultLimits(), cfg.Limits)
	require.Equal(t, 2048, cfg.Limits.MaxAttrValueBytes)
	require.NoError(t, cfg.Validate())
}

// TestSpanTimeWindow sends, over both transports and with the default
// ingest.span_times, the request an audit found stopping storage for good:
// 101 spans starting on 101 different UTC days up to today. The spans of
// the last week are stored; the rest are refused in partial_success and
// counted, and the request is acknowledged.
func TestSpanTimeWindow(t *testing.T) {
	st := openEmbedded(t)
	cfg := testConfig()
	cfg.SpanTimes = DefaultSpanTimeWindow()
	ts := startServer(t, st, cfg)
	conn := dialGRPC(t, ts)
	hundredDays := func(seed byte) (ptrace.Traces, int) {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "backfill")
		spans := rs.ScopeSpans().AppendEmpty().Spans()
		now, inside := time.Now(), 0
		for d := range 101 {
			start := now.Add(-time.Duration(d)*24*time.Hour - time.Hour)
			if now.Sub(start) < 7*24*time.Hour {
				inside++
			}
			sp := spans.AppendEmpty()
			sp.SetTraceID(pcommon.TraceID{0xda, seed, byte(d), 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
			sp.SetSpanID(pcommon.SpanID{0xda, seed, byte(d), 4, 5, 6, 7, 8})
			sp.SetName("old")
			sp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
			sp.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(time.Millisecond)))
		}
		return td, inside
	}
	const reason = "start or end time is outside the window budgetd accepts around its clock (ingest.span_times) (94 spans)"

	td, inside := hundredDays(1)
	require.Equal(t, 7, inside)
	a := post(t, ts, http.MethodPost, tracesPath, contentTypeProtobuf, "", encode(t, td, encodingProtobuf))
	require.Equal(t, http.StatusOK, a.status, "body: %s", a.body)
	require.Equal(t, int64(101-inside), a.exportResponse(t).PartialSuccess().RejectedSpans())
	require.Equal(t, reason, a.exportResponse(t).PartialSuccess().ErrorMessage())

	td, _ = hundredDays(2)
	resp, err := exportRaw(t, conn, encode(t, td, encodingProtobuf), "")
	require.NoError(t, err)
	require.Equal(t, int64(101-inside), resp.PartialSuccess().RejectedSpans())
	require.Equal(t, reason, resp.PartialSuccess().ErrorMessage())

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := st.CountRows(ctx, "spans")
	require.NoError(t, err)
	require.EqualValues(t, 2*inside, n, "the spans inside the window are stored")
	require.Equal(t, float64(2*(101-inside)), metricValue(t, ts, "budgetd_ingest_spans_rejected_total", map[string]string{"reason": "outside_time_window"}))
}

// TestRequestMemoryReusedBehindTheLogOnly checks that a request's memory
// is reused for the next request only where Commit copies the spans (the
// write-ahead log encodes them), and that the analysis gets every span as
// it was sent either way. The batch mode hands the committed spans
// themselves to the analysis: reusing their memory there would overwrite
// spans the analysis still holds, which the first request's comparison,
// made after the later requests, would see.
func TestRequestMemoryReusedBehindTheLogOnly(t *testing.T) {
	for _, mode := range []string{durable.ModeWAL, durable.ModeBatch} {
		t.Run(mode, func(t *testing.T) {
			st := openEmbedded(t)
			sink := &recordingSink{spans: make(chan []schema.Span, 100)}
			dir := t.TempDir()
			dcfg := testBatch(t)
			dcfg.Mode = mode
			dcfg.WAL.Dir = filepath.Join(dir, "wal")
			d, err := durable.Open(dcfg, durable.Settings{Logger: testLogger(t), Store: st, Sink: sink})
			require.NoError(t, err)
			ts := startServerWith(t, testConfig(), Settings{Durability: d}, nil)
			require.Equal(t, mode == durable.ModeWAL, ts.reuseRequests)

			conv := newTestConverter(t, DefaultLimits())
			var want []schema.Span
			conn := dialGRPC(t, ts)
			for i := range 6 {
				td := ingesttest.Spans(int64(i+1), 200)
				want = append(want, conv.Convert(td).Spans...)
				body := encode(t, td, encodingProtobuf)
				if i%2 == 0 {
					_, err := exportRaw(t, conn, body, "")
					require.NoError(t, err)
				} else {
					a := post(t, ts, http.MethodPost, tracesPath, contentTypeProtobuf, "", body)
					require.Equal(t, http.StatusOK, a.status)
				}
			}
			var got []schema.Span
			for len(got) < len(want) {
				got = append(got, <-sink.spans...)
			}
			require.Equal(t, want, got)
		})
	}
}
