package ingest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/budgetd/budgetd/schema"
)

// acceptingDurability commits everything at once and counts the spans, so
// the fuzzer spends its time in the handler rather than in a store.
type acceptingDurability struct {
	spans atomic.Int64
}

func (a *acceptingDurability) Commit(_ context.Context, spans []schema.Span) error {
	a.spans.Add(int64(len(spans)))
	return nil
}

func (a *acceptingDurability) Shutdown(context.Context) error { return nil }

func (a *acceptingDurability) Admits(int) bool { return true }

func (a *acceptingDurability) Stalled() error { return nil }

// fuzzLimit keeps the fuzzer's requests small and makes 413 reachable.
const fuzzLimit = 64 << 10

// FuzzHTTPHandler posts arbitrary bodies, content types and encodings to
// the OTLP/HTTP handler.
//
// Invariant: the handler never panics and answers every request with 200,
// 400, 413 or 415. A 200 carries an ExportTraceServiceResponse in the
// request's encoding, and the spans committed plus the spans it reports
// rejected are exactly the spans in the request. A 400 or 413 carries a
// google.rpc.Status (INVALID_ARGUMENT or RESOURCE_EXHAUSTED) in the
// request's encoding, and nothing was committed.
func FuzzHTTPHandler(f *testing.F) {
	// Seeds are small: the fuzzer minimizes every input that finds new
	// coverage, and the time that takes grows with the input.
	small, res, sp := newSpan()
	res.Attributes().PutStr("service.name", "svc")
	sp.SetName("GET /")
	sp.Attributes().PutInt("budget.timeout_ms", 250)
	sp.Attributes().PutEmptySlice("http.request.header.x-request-timeout-ms").AppendEmpty().SetStr("300")
	sp.Events().AppendEmpty().SetName("budget.cancelled")
	sp.CopyTo(small.ResourceSpans().At(0).ScopeSpans().At(0).Spans().AppendEmpty())
	bad := small.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(1)
	bad.SetSpanID([8]byte{})
	for _, enc := range []bodyEncoding{encodingProtobuf, encodingJSON} {
		body := encode(f, small, enc)
		for _, ce := range []string{"", "gzip", "zstd"} {
			f.Add(body, enc.contentType(), ce, ce != "")
		}
		f.Add(body, enc.contentType(), "gzip", false) // claims gzip, is not
	}
	f.Add([]byte{}, contentTypeProtobuf, "", false)
	f.Add([]byte(`{}`), contentTypeJSON, "", false)
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz"}]}]}]}`), contentTypeJSON, "", false)
	f.Add([]byte{0x0a, 0x80, 0x80, 0x80, 0x80, 0x08}, contentTypeProtobuf, "", false)
	// Bombs travel compressed, so the fuzzer mutates (and minimizes) a
	// few hundred bytes rather than the megabyte they inflate to.
	f.Add(bomb(f, 16*fuzzLimit, "zstd"), contentTypeProtobuf, "zstd", false)
	f.Add(bomb(f, 16*fuzzLimit, "gzip"), contentTypeJSON, "gzip", false)
	f.Add([]byte("hello"), "text/plain", "", false)
	f.Add([]byte("hello"), "application/json; charset=\"", "deflate", false)

	dur := &acceptingDurability{}
	cfg := DefaultConfig()
	cfg.HTTP.MaxRequestBytes = fuzzLimit
	s, err := New(cfg, Settings{Durability: dur})
	require.NoError(f, err)
	f.Cleanup(func() { require.NoError(f, s.Shutdown(context.Background())) })

	f.Fuzz(func(t *testing.T, body []byte, contentType, contentEncoding string, compressIt bool) {
		wire := body
		if compressIt {
			switch contentEncoding {
			case "gzip", "zstd":
				wire = compress(t, body, contentEncoding)
			}
		}
		req := httptest.NewRequest(http.MethodPost, tracesPath, bytes.NewReader(wire))
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Content-Encoding", contentEncoding)
		rec := httptest.NewRecorder()
		before := dur.spans.Load()
		s.serveHTTP(rec, req)
		committed := dur.spans.Load() - before
		resp := rec.Result()
		enc, okType := parseContentType(contentType)

		switch resp.StatusCode {
		case http.StatusOK:
			require.True(t, okType)
			require.Equal(t, enc.contentType(), resp.Header.Get("Content-Type"))
			er := decodeFuzzResponse(t, enc, rec.Body.Bytes())
			td, ok := decodeIndependently(wire, contentEncoding, enc)
			require.True(t, ok, "accepted a request pdata cannot decode")
			require.Equal(t, int64(td.SpanCount()), committed+er.rejected, "committed + rejected = sent")
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			require.True(t, okType)
			require.Zero(t, committed)
			require.Equal(t, enc.contentType(), resp.Header.Get("Content-Type"))
			st := &spb.Status{}
			if enc == encodingJSON {
				require.NoError(t, protojson.Unmarshal(rec.Body.Bytes(), st))
			} else {
				require.NoError(t, proto.Unmarshal(rec.Body.Bytes(), st))
			}
			want := codes.InvalidArgument
			if resp.StatusCode == http.StatusRequestEntityTooLarge {
				want = codes.ResourceExhausted
			}
			require.Equal(t, int32(want), st.GetCode())
		case http.StatusUnsupportedMediaType:
			require.False(t, okType)
			require.Zero(t, committed)
		default:
			t.Fatalf("status %d: %s", resp.StatusCode, rec.Body.String())
		}
	})
}

type fuzzResponse struct{ rejected int64 }

func decodeFuzzResponse(t *testing.T, enc bodyEncoding, body []byte) fuzzResponse {
	t.Helper()
	a := httpAnswer{status: http.StatusOK, header: http.Header{"Content-Type": {enc.contentType()}}, body: body}
	return fuzzResponse{rejected: a.exportResponse(t).PartialSuccess().RejectedSpans()}
}

// decodeIndependently decodes an accepted body without the handler's
// code, to count the spans it held.
func decodeIndependently(wire []byte, contentEncoding string, enc bodyEncoding) (ptrace.Traces, bool) {
	var r io.Reader = bytes.NewReader(wire)
	switch strings.ToLower(strings.TrimSpace(contentEncoding)) {
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(r)
		if err != nil {
			return ptrace.Traces{}, false
		}
		r = zr
	case "zstd":
		zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return ptrace.Traces{}, false
		}
		defer zr.Close()
		r = zr
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return ptrace.Traces{}, false
	}
	var td ptrace.Traces
	if enc == encodingJSON {
		var u ptrace.JSONUnmarshaler
		td, err = u.UnmarshalTraces(data)
	} else {
		var u ptrace.ProtoUnmarshaler
		td, err = u.UnmarshalTraces(data)
	}
	return td, err == nil
}
