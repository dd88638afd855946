package app

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// Sizes of the hostile traces.
const (
	hostileChainDepth  = 100_000
	hostileHugeTrace   = 1_000_000
	hostileRequestSize = 10_000 // spans per request for the big ones
	hostileAttrs       = 5_000
	hostileStringBytes = 1 << 20
	// hostileHeapBudget bounds the Go heap while the hostile traces go
	// through: ingest holds a few requests at a time and assembly at most
	// max_spans_per_trace spans of a trace. Holding the 1M-span trace
	// whole would take several times this.
	hostileHeapBudget = 256 << 20
)

// hostileSpan describes one span of a hostile trace by local ids.
type hostileSpan struct {
	trace, id, parent uint64
	mutate            func(ptrace.Span)
}

// TestHostileTraces sends spans built to hurt through OTLP/HTTP into the
// whole server (ingest, write-ahead log, store, streaming analysis): huge
// and invalid values, duplicate ids, a span that is its own parent, a
// parent cycle, a 100,000-deep chain and a 1,000,000-span trace. budgetd
// must take them without a panic, with a bounded heap, and count what
// assembly dropped.
func TestHostileTraces(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 1.1 million spans; run without -short")
	}
	cfg := testConfig(t)
	// Traces are held until the Flush below, so the per-trace bound is
	// met exactly once per trace.
	cfg.Analyze.Stream.Assembly.Idle = 5 * time.Minute
	cfg.Analyze.Stream.Assembly.MaxWait = 5 * time.Minute
	a, err := Start(context.Background(), cfg, nil)
	require.NoError(t, err)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		require.NoError(t, a.Shutdown(ctx))
	}()
	_, httpAddr := a.IngestAddrs()
	url := "http://" + httpAddr.String() + "/v1/traces"

	big := strings.Repeat("é", hostileStringBytes/2)
	small := []struct {
		name  string
		spans []hostileSpan
	}{
		{"thousands of attributes and events", []hostileSpan{{trace: 1, id: 1, mutate: func(s ptrace.Span) {
			for i := range hostileAttrs {
				s.Attributes().PutStr("attr."+strconv.Itoa(i), "v")
				s.Events().AppendEmpty().SetName("event " + strconv.Itoa(i))
			}
		}}}},
		{"megabyte strings", []hostileSpan{{trace: 2, id: 1, mutate: func(s ptrace.Span) {
			s.SetName(big)
			s.Attributes().PutStr("big", big)
			s.Attributes().PutStr(big, "key")
			s.Events().AppendEmpty().SetName(big)
		}}}},
		{"invalid utf-8", []hostileSpan{{trace: 3, id: 1, mutate: func(s ptrace.Span) {
			s.SetName("GET /\xff\xfe\xc3")
			s.Attributes().PutStr("k\xff", "v\xc3\x28")
			s.Status().SetMessage("\xed\xa0\x80")
		}}}},
		{"duplicate span ids", []hostileSpan{{trace: 4, id: 1}, {trace: 4, id: 1}, {trace: 4, id: 2, parent: 1}, {trace: 4, id: 2, parent: 1}}},
		{"its own parent", []hostileSpan{{trace: 5, id: 1, parent: 1}}},
		{"a parent cycle", []hostileSpan{{trace: 6, id: 1, parent: 3}, {trace: 6, id: 2, parent: 1}, {trace: 6, id: 3, parent: 2}}},
	}
	var peak atomic.Uint64
	stopSampling := sampleHeap(&peak)
	for _, tt := range small {
		// Sent twice: the second copy is a duplicate of every span.
		for range 2 {
			require.Equal(t, http.StatusOK, post(t, url, hostileRequest(tt.spans)), tt.name)
		}
	}

	// The chain: span i's parent is span i-1.
	sendMany(t, url, hostileChainDepth, func(i uint64) hostileSpan { return hostileSpan{trace: 7, id: i + 1, parent: i} })
	// The huge trace: one root and a flat fan-out under it.
	sendMany(t, url, hostileHugeTrace, func(i uint64) hostileSpan {
		s := hostileSpan{trace: 8, id: i + 1}
		if i > 0 {
			s.parent = 1
		}
		return s
	})
	// Each small request was sent twice, and one holds every span twice:
	// the write path stores a (trace id, span id) once
	// (ingest.durability.dedup).
	var wantRows uint64 = hostileChainDepth + hostileHugeTrace
	for _, tt := range small {
		distinct := map[[2]uint64]bool{}
		for _, s := range tt.spans {
			distinct[[2]uint64{s.trace, s.id}] = true
		}
		wantRows += uint64(len(distinct))
	}
	// The drainer hands spans to the analysis after storing them: wait
	// until assembly has seen every span, held or dropped.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		m := scrape(t, a.APIAddr())
		seen := m["budgetd_analysis_pending_spans"]
		for _, reason := range []string{"max_traces", "max_spans_per_trace", "max_spans", "max_bytes", "max_bytes_per_trace"} {
			seen += m[`budgetd_analysis_dropped_spans_total{reason="`+reason+`"}`]
		}
		if seen >= float64(wantRows) {
			break
		}
		require.True(t, time.Now().Before(deadline), "assembly saw %.0f of %d spans within 2 minutes", seen, wantRows)
		time.Sleep(50 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, a.Analysis().Flush(ctx))
	stopSampling()

	metrics := scrape(t, a.APIAddr())
	dropped := metrics[`budgetd_analysis_dropped_spans_total{reason="max_spans_per_trace"}`]
	perTrace := cfg.Analyze.Stream.Assembly.MaxSpansPerTrace
	require.Equal(t, float64(hostileChainDepth-perTrace+hostileHugeTrace-perTrace), dropped,
		"assembly drops and counts what is over max_spans_per_trace")
	require.GreaterOrEqual(t, metrics["budgetd_analysis_traces_total"], float64(8), "every trace was analysed")

	var rows uint64
	r, err := a.Store().Conn().Query(ctx, "SELECT toUInt64(count()) FROM "+a.Store().Database()+".spans", nil)
	require.NoError(t, err)
	require.True(t, r.Next())
	require.NoError(t, r.Scan(&rows))
	r.Close()
	require.Equal(t, wantRows, rows, "every span is stored, resent ones once")
	require.Equal(t, float64(22-9), metrics["budgetd_ingest_duplicate_spans_total"], "the resent spans are counted")

	resp, err := http.Get("http://" + a.APIAddr() + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "still ready")
	t.Logf("stored %d spans; assembly dropped %.0f over max_spans_per_trace=%d; peak Go heap in use %.1f MiB",
		rows, dropped, perTrace, float64(peak.Load())/(1<<20))
	require.Less(t, peak.Load(), uint64(hostileHeapBudget), "peak heap in use")
}

// sampleHeap records the largest HeapInuse every 20 ms until stopped.
func sampleHeap(peak *atomic.Uint64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// sendMany sends n spans made by span(i) in requests of
// hostileRequestSize, from four senders.
func sendMany(t *testing.T, url string, n uint64, span func(i uint64) hostileSpan) {
	t.Helper()
	var next atomic.Uint64
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for {
				start := next.Add(hostileRequestSize) - hostileRequestSize
				if start >= n {
					return
				}
				spans := make([]hostileSpan, 0, hostileRequestSize)
				for i := start; i < min(start+hostileRequestSize, n); i++ {
					spans = append(spans, span(i))
				}
				if code := post(t, url, hostileRequest(spans)); code != http.StatusOK {
					errs <- &statusError{code}
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

type statusError struct{ code int }

func (e *statusError) Error() string { return "status " + strconv.Itoa(e.code) }

// hostileRequest encodes spans as one OTLP/protobuf request.
func hostileRequest(spans []hostileSpan) []byte {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "hostile")
	ss := rs.ScopeSpans().AppendEmpty()
	now := time.Now()
	for _, h := range spans {
		s := ss.Spans().AppendEmpty()
		var tid pcommon.TraceID
		binary.BigEndian.PutUint64(tid[:8], 0x4057111e)
		binary.BigEndian.PutUint64(tid[8:], h.trace)
		s.SetTraceID(tid)
		s.SetSpanID(hostileSpanID(h.id))
		if h.parent != 0 {
			s.SetParentSpanID(hostileSpanID(h.parent))
		}
		s.SetName("op")
		s.SetKind(ptrace.SpanKindServer)
		s.SetStartTimestamp(pcommon.NewTimestampFromTime(now))
		s.SetEndTimestamp(pcommon.NewTimestampFromTime(now.Add(time.Millisecond)))
		if h.mutate != nil {
			h.mutate(s)
		}
	}
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		panic(err) // pdata marshals whatever it holds
	}
	return body
}

func hostileSpanID(id uint64) pcommon.SpanID {
	var s pcommon.SpanID
	binary.BigEndian.PutUint64(s[:], id)
	return s
}

// post sends an OTLP/protobuf body and returns the status.
func post(t *testing.T, url string, body []byte) int {
	resp, err := http.Post(url, "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		t.Error(err)
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// scrape reads the API's /metrics into series → value.
func scrape(t *testing.T, apiAddr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + apiAddr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			out[line[:i]] = v
		}
	}
	require.NoError(t, sc.Err())
	return out
}
