package analyze

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/schema"
)

// testNow is the detection time of every test.
var testNow = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// baseMs is the epoch millisecond t = 0 of the test traces stands for,
// 2025-03-01T11:53:20Z: a few minutes before testNow, so that their calls
// fall inside the default 15-minute edge window.
const baseMs = 1740830000000

// missing is a parent id no span has: the span's parent is missing.
const missing = 999

// sp describes a span of a test trace. ids are small local numbers; parent 0
// makes a root. Times are milliseconds from baseMs.
type sp struct {
	id, parent int
	svc, name  string
	kind       schema.SpanKind
	start, end float64
	attrs      []schema.Attr
	status     schema.StatusCode
	events     []schema.Event
}

func spanID(id int) schema.SpanID {
	var s schema.SpanID
	s[6], s[7] = byte(id>>8), byte(id)
	return s
}

func traceID(n int) schema.TraceID {
	var t schema.TraceID
	t[0] = 0xab
	t[14], t[15] = byte(n>>8), byte(n)
	return t
}

// atNs converts a test time to recorded nanoseconds.
func atNs(ms float64) uint64 { return uint64(baseMs)*1e6 + uint64(ms*1e6) }

// build turns specs into spans of trace n.
func build(n int, specs ...sp) []schema.Span {
	out := make([]schema.Span, 0, len(specs))
	for _, s := range specs {
		span := schema.Span{
			TraceID:    traceID(n),
			SpanID:     spanID(s.id),
			Service:    s.svc,
			Name:       s.name,
			Kind:       s.kind,
			StartNs:    atNs(s.start),
			EndNs:      atNs(s.end),
			Attrs:      s.attrs,
			StatusCode: s.status,
			Events:     s.events,
		}
		if s.parent != 0 {
			span.ParentSpanID = spanID(s.parent)
		}
		out = append(out, span)
	}
	return out
}

// Attribute shorthands.
func rem(ms float64) schema.Attr      { return schema.Double(schema.AttrRemainingMs, ms) }
func tmo(ms float64) schema.Attr      { return schema.Double(schema.AttrTimeoutMs, ms) }
func attempt(n int64) schema.Attr     { return schema.Int(schema.AttrAttempt, n) }
func maxAttempts(n int64) schema.Attr { return schema.Int(schema.AttrMaxAttempts, n) }
func backoff(ms float64) schema.Attr  { return schema.Double(schema.AttrBackoffMs, ms) }
func source(s schema.BudgetSource) schema.Attr {
	return schema.Str(schema.AttrSource, string(s))
}
func peerSvc(s string) schema.Attr { return schema.Str("peer.service", s) }
func host(name string) schema.Attr { return schema.Str("server.address", name) }
func timedOut() schema.Attr        { return schema.Str(schema.AttrErrorType, "timeout") }
func resend(n int64) schema.Attr   { return schema.Int(schema.AttrHTTPResendCount, n) }
func headerTimeoutMs(v string) schema.Attr {
	return schema.Strings(schema.AttrHeaderRequestTimeoutMs, v)
}
func grpcTimeout(v string) schema.Attr { return schema.Strings(schema.AttrMetadataGRPCTimeout, v) }

func attrs(as ...schema.Attr) []schema.Attr { return as }

func cancelledAt(ms float64, src string) []schema.Event {
	return []schema.Event{{TimeNs: atNs(ms), Name: schema.EventCancelled,
		Attrs: schema.Attributes{schema.Str(schema.AttrCancelSource, src)}}}
}

// Span kinds, short.
const (
	server   = schema.KindServer
	client   = schema.KindClient
	producer = schema.KindProducer
	consumer = schema.KindConsumer
	internal = schema.KindInternal
)

// testConfig is the default configuration; tests that need edge statistics
// from few traces lower MinEdgeSamples themselves.
func testConfig() Config { return DefaultConfig() }

// analyzeSpans runs a fresh Analyzer over one trace.
func analyzeSpans(t *testing.T, spans []schema.Span) Result {
	t.Helper()
	return New(testConfig()).Trace(schema.NewTrace(spans), testNow)
}

// analyzeRecordedOnly runs a fresh Analyzer with inference off: findings
// from recorded budgets and timing alone.
func analyzeRecordedOnly(t *testing.T, spans []schema.Span) Result {
	t.Helper()
	cfg := testConfig()
	cfg.Infer.Enabled = false
	return New(cfg).Trace(schema.NewTrace(spans), testNow)
}

// splitInferred separates findings resting on inferred figures from the
// others.
func splitInferred(fs []schema.Finding) (recorded, inferred []schema.Finding) {
	for _, f := range fs {
		if f.Evidence["inferred"] == 1 {
			inferred = append(inferred, f)
		} else {
			recorded = append(recorded, f)
		}
	}
	return recorded, inferred
}

// ofKind returns the findings of one kind.
func ofKind(fs []schema.Finding, k schema.Kind) []schema.Finding {
	var out []schema.Finding
	for _, f := range fs {
		if f.Kind == k {
			out = append(out, f)
		}
	}
	return out
}

// hopOf returns the hop of local span id.
func hopOf(t *testing.T, r Result, id int) schema.Hop {
	t.Helper()
	for _, h := range r.Hops {
		if h.SpanID == spanID(id) {
			return h
		}
	}
	require.FailNow(t, "no hop for span", "%d", id)
	return schema.Hop{}
}

// want describes one expected finding compactly.
type want struct {
	span     int
	severity schema.Severity
	evidence map[string]float64
}

// requireFindings checks the findings of kind k against ws, in span order,
// including exact evidence keys (values within 1e-6, or 1 % where the
// evidence comes from a sketch and the expected key is listed in approx).
func requireFindings(t *testing.T, fs []schema.Finding, k schema.Kind, ws []want, approx ...string) {
	t.Helper()
	got := ofKind(fs, k)
	require.Len(t, got, len(ws), "findings of kind %s: %+v", k, got)
	for i, w := range ws {
		f := got[i]
		require.Equal(t, spanID(w.span).String(), f.SpanID, "finding %d span", i)
		require.Equal(t, w.severity, f.Severity, "finding %d severity: %s", i, f.Message)
		require.Len(t, f.Evidence, len(w.evidence), "finding %d evidence keys: %v", i, f.Evidence)
		for key, val := range w.evidence {
			require.Contains(t, f.Evidence, key)
			delta := 1e-6
			for _, a := range approx {
				if a == key {
					delta = val * 0.01
				}
			}
			require.InDelta(t, val, f.Evidence[key], delta, "finding %d evidence %s", i, key)
		}
		require.NotEmpty(t, f.Message)
		require.Equal(t, FindingID(k, f.TraceID, f.SpanID), f.ID)
		require.Equal(t, testNow, f.DetectedAt)
	}
}
