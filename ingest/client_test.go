package ingest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/budgetd/budgetd/ingest/ingesttest"
)

// This file holds the raw OTLP clients the error tests need: they send
// bytes no SDK would (malformed, oversized, oddly encoded) and look at the
// answer exactly as a sender sees it.

// tracesWithBad returns good generated spans followed, in one more
// resource, by zeroID spans with an all-zero span id and endBefore spans
// that end before they start.
func tracesWithBad(seed int64, good, zeroID, endBefore int) ptrace.Traces {
	td := ingesttest.Spans(seed, good)
	if zeroID+endBefore == 0 {
		return td
	}
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "broken")
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	for i := range zeroID + endBefore {
		sp := spans.AppendEmpty()
		sp.SetTraceID(pcommon.TraceID{0xba, 0xd0, byte(seed), byte(i), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
		sp.SetName("bad")
		sp.SetStartTimestamp(2_000)
		sp.SetEndTimestamp(3_000)
		if i < zeroID {
			continue // zero span id
		}
		sp.SetSpanID(pcommon.SpanID{0xba, 0xd1, byte(seed), byte(i), 1, 2, 3, 4})
		sp.SetEndTimestamp(1_000)
	}
	return td
}

// encode marshals td as an OTLP request body.
func encode(t testing.TB, td ptrace.Traces, enc bodyEncoding) []byte {
	t.Helper()
	req := ptraceotlp.NewExportRequestFromTraces(td)
	var (
		b   []byte
		err error
	)
	if enc == encodingJSON {
		b, err = req.MarshalJSON()
	} else {
		b, err = req.MarshalProto()
	}
	require.NoError(t, err)
	return b
}

// compress compresses data with a Content-Encoding ("" leaves it as is).
func compress(t testing.TB, data []byte, contentEncoding string) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch contentEncoding {
	case "":
		return data
	case "gzip":
		zw := gzip.NewWriter(&buf)
		_, err := zw.Write(data)
		require.NoError(t, err)
		require.NoError(t, zw.Close())
	case "zstd":
		zw, err := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1))
		require.NoError(t, err)
		_, err = zw.Write(data)
		require.NoError(t, err)
		require.NoError(t, zw.Close())
	default:
		t.Fatalf("unknown encoding %q", contentEncoding)
	}
	return buf.Bytes()
}

// httpAnswer is an OTLP/HTTP response as the sender sees it.
type httpAnswer struct {
	status int
	header http.Header
	body   []byte
}

// post sends one HTTP request to the server.
func post(t testing.TB, ts *testServer, method, path, contentType, contentEncoding string, body []byte) httpAnswer {
	t.Helper()
	a, err := tryPost(ts.httpAddr, method, path, contentType, contentEncoding, body)
	require.NoError(t, err)
	return a
}

// tryPost is post for goroutines other than the test's and for requests
// that may fail: it returns the error instead of failing the test.
func tryPost(addr, method, path, contentType, contentEncoding string, body []byte) (httpAnswer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, bytes.NewReader(body))
	if err != nil {
		return httpAnswer{}, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if contentEncoding != "" {
		req.Header.Set("Content-Encoding", contentEncoding)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return httpAnswer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return httpAnswer{}, err
	}
	return httpAnswer{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// postAsync sends a protobuf request from another goroutine; the channel
// receives the answer, or a zero answer when the request failed.
func postAsync(addr string, body []byte) <-chan httpAnswer {
	answer := make(chan httpAnswer, 1)
	go func() {
		a, _ := tryPost(addr, http.MethodPost, tracesPath, contentTypeProtobuf, "", body)
		answer <- a
	}()
	return answer
}

// exportResponse decodes a 200 answer's ExportTraceServiceResponse.
func (a httpAnswer) exportResponse(t testing.TB) ptraceotlp.ExportResponse {
	t.Helper()
	require.Equal(t, http.StatusOK, a.status, "body: %s", a.body)
	resp := ptraceotlp.NewExportResponse()
	if a.header.Get("Content-Type") == contentTypeJSON {
		require.NoError(t, resp.UnmarshalJSON(a.body))
	} else {
		require.Equal(t, contentTypeProtobuf, a.header.Get("Content-Type"))
		require.NoError(t, resp.UnmarshalProto(a.body))
	}
	return resp
}

// rpcStatus decodes an error answer's google.rpc.Status.
func (a httpAnswer) rpcStatus(t testing.TB) *spb.Status {
	t.Helper()
	st := &spb.Status{}
	switch a.header.Get("Content-Type") {
	case contentTypeJSON:
		require.NoError(t, protojson.Unmarshal(a.body, st))
	case contentTypeProtobuf:
		require.NoError(t, proto.Unmarshal(a.body, st))
	default:
		t.Fatalf("error answer with Content-Type %q: %s", a.header.Get("Content-Type"), a.body)
	}
	return st
}

// retryDelay returns the RetryInfo delay in a status's details, or 0.
func retryDelay(t testing.TB, st *status.Status) time.Duration {
	t.Helper()
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	return 0
}

// dialGRPC connects to the server's OTLP/gRPC listener.
func dialGRPC(t testing.TB, ts *testServer) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(ts.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// exportRaw sends body as the ExportTraceServiceRequest of a gRPC call,
// byte for byte, compressed with compressor ("" for none).
func exportRaw(t testing.TB, conn *grpc.ClientConn, body []byte, compressor string) (ptraceotlp.ExportResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts := []grpc.CallOption{grpc.ForceCodecV2(rawCodec{fallback: encoding.GetCodecV2("proto")})}
	if compressor != "" {
		opts = append(opts, grpc.UseCompressor(compressor))
	}
	var out rawMessage
	err := conn.Invoke(ctx, "/"+traceServiceName+"/Export", &rawMessage{data: body}, &out, opts...)
	resp := ptraceotlp.NewExportResponse()
	if err != nil {
		return resp, err
	}
	defer out.free()
	require.NoError(t, resp.UnmarshalProto(out.bytes()))
	return resp, nil
}
