package crashtest

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// memoryBound is the peak resident set budgetd must stay under while it
// takes, stores and replays the requests below (chDB included).
const memoryBound = 1 << 30

// TestHostileRequestMemory sends the requests an audit found running
// budgetd out of memory, again on every restart while it replayed its
// log: one resource attribute with a 100 KB key over 5,000 empty spans
// (peak RSS 268 MB → 3.70 GB; the key was copied into every row of an
// insert block), three times, and a resource with 1,024 attributes of
// 2 KiB over 2,000 spans (a 4 GB block as rows; now cut to
// ingest.limits.max_resource_bytes, 32 KiB). budgetd is killed before
// it has stored them, so the restart replays them from the log. Both runs
// stay under memoryBound, and budgetd serves afterwards.
func TestHostileRequestMemory(t *testing.T) {
	bin := buildBudgetd(t)
	b := newBudgetd(t, bin, budgetdOptions{})
	b.start(t)

	now := time.Now()
	request := func(seed byte, spans int, resource func(pcommon.Map)) []byte {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "hostile")
		resource(rs.Resource().Attributes())
		ss := rs.ScopeSpans().AppendEmpty().Spans()
		for i := range spans {
			sp := ss.AppendEmpty()
			sp.SetTraceID(pcommon.TraceID{0xee, seed, byte(i >> 8), byte(i), 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
			sp.SetSpanID(pcommon.SpanID{0xee, seed, byte(i >> 8), byte(i), 5, 6, 7, 8})
			sp.SetStartTimestamp(pcommon.NewTimestampFromTime(now))
			sp.SetEndTimestamp(pcommon.NewTimestampFromTime(now.Add(time.Millisecond)))
		}
		body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		require.NoError(t, err)
		return body
	}
	bigKey := func(m pcommon.Map) { m.PutStr(strings.Repeat("k", 100_000), "") }
	manyValues := func(m pcommon.Map) {
		for i := range 1024 {
			m.PutStr("attribute."+strconv.Itoa(i), strings.Repeat("v", 2048))
		}
	}
	bodies := [][]byte{request(1, 5000, bigKey), request(2, 5000, bigKey), request(3, 5000, bigKey), request(4, 2000, manyValues)}
	const total = 17_000
	for i, body := range bodies {
		resp, err := http.Post("http://"+b.http+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "request %d (%d bytes) acknowledged", i, len(body))
	}
	b.proc.kill()
	first := peakRSS(b.proc)

	b.start(t) // replays what the log holds
	waitUntil(t, "the replayed spans stored", 2*time.Minute, b.proc, func() bool {
		return metric(t, b.api, "budgetd_wal_stored_spans_total") >= total
	})
	resp, err := http.Get("http://" + b.api + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "budgetd serves")
	b.proc.stop(t, time.Minute)
	second := peakRSS(b.proc)
	t.Logf("peak RSS: %.0f MiB taking the requests, %.0f MiB replaying and storing them", float64(first)/(1<<20), float64(second)/(1<<20))
	require.Less(t, first, int64(memoryBound))
	require.Less(t, second, int64(memoryBound))
}

// TestDecodedRequestMemory sends, at once, 16 requests of 1,000 spans
// with 1,000 empty attributes each (8.9 MB of protobuf, 96 KB gzipped),
// the smallest attributes there are: each decodes to about ten times its
// size. The in-flight budget charged wire bytes, so 14 of them were
// decoded at once: peak RSS 2.47 GB. It now charges what a request takes
// decoded, so budgetd refuses the rest with 503 until there is room; the
// senders retry after Retry-After, as OTLP exporters do, every span is
// stored, and the peak stays under memoryBound.
func TestDecodedRequestMemory(t *testing.T) {
	bin := buildBudgetd(t)
	b := newBudgetd(t, bin, budgetdOptions{})
	b.start(t)

	const requests, spans, attrs = 16, 1000, 1000
	now := time.Now()
	bodies := make([][]byte, requests)
	for r := range bodies {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "attributes")
		ss := rs.ScopeSpans().AppendEmpty().Spans()
		for i := range spans {
			sp := ss.AppendEmpty()
			sp.SetTraceID(pcommon.TraceID{0xdd, byte(r), byte(i >> 8), byte(i), 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
			sp.SetSpanID(pcommon.SpanID{0xdd, byte(r), byte(i >> 8), byte(i), 5, 6, 7, 8})
			sp.SetStartTimestamp(pcommon.NewTimestampFromTime(now))
			sp.SetEndTimestamp(pcommon.NewTimestampFromTime(now.Add(time.Millisecond)))
			for a := range attrs {
				sp.Attributes().PutEmpty(strconv.Itoa(a))
			}
		}
		raw, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		require.NoError(t, err)
		var z bytes.Buffer
		w := gzip.NewWriter(&z)
		_, err = w.Write(raw)
		require.NoError(t, err)
		require.NoError(t, w.Close())
		bodies[r] = z.Bytes()
	}

	var refused atomic.Int64
	errs := make(chan error, requests)
	for _, body := range bodies {
		go func() { errs <- sendRetrying(b.http, body, &refused) }()
	}
	for range requests {
		require.NoError(t, <-errs)
	}
	waitUntil(t, "the spans stored", 2*time.Minute, b.proc, func() bool {
		return metric(t, b.api, "budgetd_wal_stored_spans_total") >= requests*spans
	})
	b.proc.stop(t, time.Minute)
	peak := peakRSS(b.proc)
	t.Logf("peak RSS %.0f MiB; %d answers were 503 (retried)", float64(peak)/(1<<20), refused.Load())
	require.Less(t, peak, int64(memoryBound))
}

// sendRetrying posts a gzipped OTLP/HTTP body until it is acknowledged,
// waiting the Retry-After of every 503 as an OTLP exporter does.
func sendRetrying(addr string, body []byte, refused *atomic.Int64) error {
	for {
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/traces", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/x-protobuf")
		req.Header.Set("Content-Encoding", "gzip")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			return nil
		case http.StatusServiceUnavailable:
			refused.Add(1)
			wait, err := strconv.Atoi(resp.Header.Get("Retry-After"))
			if err != nil {
				return fmt.Errorf("503 without a Retry-After: %w", err)
			}
			time.Sleep(time.Duration(wait) * time.Second) // the exporter's wait, not a condition
		default:
			return fmt.Errorf("answered %s", resp.Status)
		}
	}
}

// metric reads one unlabelled sample from budgetd's /metrics (0 when absent).
func metric(t testing.TB, api, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + api + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}
