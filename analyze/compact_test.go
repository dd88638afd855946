package analyze

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/analyze/budgetread"
	"github.com/budgetd/budgetd/ingest"
	"github.com/budgetd/budgetd/schema"
)

// TestCompactKeepsFindings analyses every fixture twice, from whole and from
// compacted spans, and expects the same report: compaction drops only what
// the detectors never read.
func TestCompactKeepsFindings(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	fixtures := fixtureSpans(t)
	for f, spans := range fixtures {
		compacted := make([]schema.Span, len(spans))
		for i, s := range spans {
			compacted[i] = Compact(s)
		}
		require.Equal(t, Analyze(spans, now, DefaultConfig()), Analyze(compacted, now, DefaultConfig()), f)
	}
	require.NotEmpty(t, fixtures)
}

// fixtureSpans reads every trace fixture (not the golden reports), by file.
func fixtureSpans(t *testing.T) map[string][]schema.Span {
	t.Helper()
	conv, err := ingest.NewConverter(ingest.DefaultLimits())
	require.NoError(t, err)
	files, err := filepath.Glob(filepath.Join("..", "fixtures", "*.json"))
	require.NoError(t, err)
	out := map[string][]schema.Span{}
	for _, f := range files {
		if strings.HasSuffix(f, ".golden.json") {
			continue
		}
		spans, err := ingest.ReadSpansFile(f, conv)
		require.NoError(t, err)
		out[f] = spans
	}
	return out
}

// TestCompactKeepsTimeoutVerdict builds spans from every combination of the
// status evidence budgetread.Read reads (status, description, exception
// events, status attributes of both semantic-convention generations) and
// expects the compacted span to read as the same timeout or cancellation,
// with its text bounded: Compact keeps budgetread.StatusEvidence's constant and
// no exception event. budgetread's TestStatusEvidenceKeepsVerdict checks the
// same reduction over each case of budgetread.Read's own table.
func TestCompactKeepsTimeoutVerdict(t *testing.T) {
	const dotnetTimeout = "The request was canceled due to the configured HttpClient.Timeout of 100 seconds elapsing."
	exc := func(typ, msg string) schema.Event {
		return schema.Event{Name: schema.EventException, TimeNs: 5, Attrs: schema.Attributes{
			schema.Str(schema.AttrExceptionType, typ), schema.Str(schema.AttrExceptionMessage, msg), schema.Bool("exception.escaped", true),
		}}
	}
	statuses := []schema.StatusCode{schema.StatusUnset, schema.StatusOK, schema.StatusError}
	messages := []string{
		"", "context deadline exceeded", "context canceled", dotnetTimeout,
		"rpc error: code = Canceled desc = context deadline exceeded",
		`Get "http://pricing/timeout": connection refused`,
		strings.Repeat("stack frame ", 1000) + "timeout",
	}
	eventSets := [][]schema.Event{
		nil,
		{exc("java.net.SocketTimeoutException", "Read timed out")},
		{exc("System.Threading.Tasks.TaskCanceledException", dotnetTimeout)},
		{exc("asyncio.CancelledError", "")},
		{exc("*url.Error", `Get "http://pricing/quote": context deadline exceeded`)},
		{exc("ValueError", "timeout must be positive")},
		{{Name: "error", Attrs: schema.Attributes{schema.Str(schema.AttrExceptionType, "TimeoutError")}}},
		{exc("TimeoutError", ""), exc("System.OperationCanceledException", "The operation was canceled.")},
	}
	attrSets := [][]schema.Attr{
		nil,
		{schema.Int(schema.AttrRPCGRPCStatusCode, 14)},
		{schema.Int(schema.AttrRPCGRPCStatusCode, 4)},
		{schema.Str(schema.AttrRPCResponseStatusCode, "1"), schema.Str(schema.AttrRPCSystemName, "grpc")},
		{schema.Str(schema.AttrErrorType, "System.Threading.Tasks.TaskCanceledException")},
		{schema.Int(schema.AttrHTTPStatusCodeOld, 504)},
		{schema.Int(schema.AttrHTTPStatusCode, 200), schema.Int(schema.AttrHTTPStatusCodeOld, 499)},
	}
	cancelled := schema.Event{Name: schema.EventCancelled, TimeNs: 7, Attrs: schema.Attributes{schema.Str(schema.AttrCancelSource, "deadline")}}
	n, verdicts := 0, map[[2]bool]int{}
	for _, status := range statuses {
		for _, msg := range messages {
			for _, events := range eventSets {
				for _, attrs := range attrSets {
					s := schema.Span{
						Kind: schema.KindClient, Service: "checkout", Name: "POST /charge", StartNs: 1, EndNs: 10,
						StatusCode: status, StatusMessage: msg,
						Attrs:  append(schema.Attributes{schema.Str("http.route", "/charge")}, attrs...),
						Events: append(append([]schema.Event(nil), events...), cancelled),
					}
					c := Compact(s)
					want, got := budgetread.Read(&s), budgetread.Read(&c)
					name := fmt.Sprintf("status %v, description %.40q, events %v, attrs %v", status, msg, events, attrs)
					require.Equal(t, want.TimedOut, got.TimedOut, name)
					require.Equal(t, want.Cancelled, got.Cancelled, name)
					require.Equal(t, want.Cancellations, got.Cancellations, name)
					require.LessOrEqual(t, len(c.StatusMessage), 32, name)
					require.Equal(t, []schema.Event{cancelled}, c.Events, name)
					verdicts[[2]bool{want.TimedOut, want.Cancelled}]++
					n++
				}
			}
		}
	}
	// The combinations reach every verdict: none, timeout, cancellation.
	require.Len(t, verdicts, 3, "%v over %d spans", verdicts, n)
}

// TestAssemblyHoldsCompactedSpans checks that assembly gives back every
// field Compact keeps: it holds spans packed (heldSpan), and a field
// Compact starts keeping must be held too. The span has every field set,
// so whatever Compact keeps of it is there to lose.
func TestAssemblyHoldsCompactedSpans(t *testing.T) {
	attrs := schema.Attributes{schema.Int(schema.AttrTimeoutMs, 250), schema.Str("peer.service", "db"), schema.Str("other", "x")}
	full := schema.Span{
		TraceID: schema.TraceID{1}, SpanID: schema.SpanID{2}, ParentSpanID: schema.SpanID{3},
		TraceState: "k=v", Service: "checkout", Name: "GET /", Kind: schema.KindClient,
		StartNs: 1_000, EndNs: 2_000, StatusCode: schema.StatusError, StatusMessage: "context deadline exceeded",
		ScopeName: "scope", ScopeVersion: "1", ResourceAttrs: schema.Attributes{schema.Str("service.name", "checkout")},
		Attrs: attrs,
		Events: []schema.Event{{TimeNs: 1_500, Name: schema.EventCancelled,
			Attrs: schema.Attributes{schema.Str(schema.AttrCancelSource, "deadline")}}},
		Links: []schema.Link{{TraceID: schema.TraceID{9}, SpanID: schema.SpanID{9}, Attrs: attrs}},
	}
	compacted := Compact(full)
	a := NewAssembler(DefaultAssemblerConfig())
	a.Add([]schema.Span{full}, time.Unix(0, 0))
	ready := a.Ready(time.Unix(0, 0), true)
	require.Len(t, ready, 1)
	require.Equal(t, []schema.Span{compacted}, ready[0].Spans())
	require.NotEmpty(t, compacted.Attrs)
	require.NotEmpty(t, compacted.Events)
	require.NotEmpty(t, compacted.StatusMessage)
}
