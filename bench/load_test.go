package bench

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/budgetd/budgetd/proctest"
)

// traceOf maps each span id of request i to its trace id.
func traceOf(l *Load, i int) map[pcommon.SpanID]pcommon.TraceID {
	out := map[pcommon.SpanID]pcommon.TraceID{}
	rss := l.reqs[i].Traces().ResourceSpans()
	for r := range rss.Len() {
		sss := rss.At(r).ScopeSpans()
		for s := range sss.Len() {
			spans := sss.At(s).Spans()
			for k := range spans.Len() {
				out[spans.At(k).SpanID()] = spans.At(k).TraceID()
			}
		}
	}
	return out
}

// TestRenewGivesFreshTraces checks what the load's figures rest on: every
// send of a request carries trace ids no earlier send used, and the spans
// of one trace stay together under their new id.
func TestRenewGivesFreshTraces(t *testing.T) {
	l := Requests(2, 200)
	seen := map[pcommon.TraceID]bool{}
	var first map[pcommon.SpanID]pcommon.TraceID
	for round := range 5 {
		for i := range 2 {
			l.renew(i)
			ids := traceOf(l, i)
			require.Len(t, ids, 200, "span ids do not change")
			sent := map[pcommon.TraceID]bool{}
			for _, tid := range ids {
				sent[tid] = true
			}
			for tid := range sent {
				require.False(t, seen[tid], "round %d, request %d: trace %s was sent before", round, i, tid)
				seen[tid] = true
			}
			if round == 0 && i == 0 {
				first = ids
				continue
			}
			if i == 0 {
				// Two spans share a trace now exactly when they did at first.
				for a, ta := range ids {
					for b, tb := range ids {
						require.Equal(t, first[a] == first[b], ta == tb, "spans %s and %s", a, b)
					}
				}
			}
		}
	}
}

// kindsOf counts request i's spans by kind, and checks that every INTERNAL
// span sits under a SERVER span of its own service with the request's
// calls below it, as a framework records a handler.
func kindsOf(t *testing.T, l *Load, i int) map[ptrace.SpanKind]int {
	t.Helper()
	type info struct {
		kind    ptrace.SpanKind
		service string
		parent  pcommon.SpanID
	}
	spans := map[pcommon.SpanID]info{}
	rss := l.reqs[i].Traces().ResourceSpans()
	for r := range rss.Len() {
		svc, _ := rss.At(r).Resource().Attributes().Get("service.name")
		sss := rss.At(r).ScopeSpans()
		for s := range sss.Len() {
			ss := sss.At(s).Spans()
			for k := range ss.Len() {
				sp := ss.At(k)
				spans[sp.SpanID()] = info{sp.Kind(), svc.Str(), sp.ParentSpanID()}
			}
		}
	}
	kinds := map[ptrace.SpanKind]int{}
	children := map[pcommon.SpanID]int{}
	for _, s := range spans {
		kinds[s.kind]++
		children[s.parent]++
	}
	for id, s := range spans {
		if s.kind != ptrace.SpanKindInternal {
			continue
		}
		parent, ok := spans[s.parent]
		require.True(t, ok, "handler %s has no parent in its request", id)
		require.Equal(t, ptrace.SpanKindServer, parent.kind)
		require.Equal(t, parent.service, s.service)
		require.Equal(t, 1, children[s.parent], "the handler is its server span's only child")
		require.Positive(t, children[id], "handler %s holds no calls", id)
	}
	return kinds
}

func TestHandlerRequestsPutWorkInsideHandlers(t *testing.T) {
	plain, handlers := Requests(3, 1000), HandlerRequests(3, 1000)
	for i := range 3 {
		require.Zero(t, kindsOf(t, plain, i)[ptrace.SpanKindInternal], "the default load has no handler spans")
		kinds := kindsOf(t, handlers, i)
		require.Equal(t, 1000, kinds[ptrace.SpanKindInternal]+kinds[ptrace.SpanKindServer]+kinds[ptrace.SpanKindClient])
		share := float64(kinds[ptrace.SpanKindInternal]) / 1000
		require.True(t, share > 0.12 && share < 0.3, "request %d: %.2f of the spans are handlers", i, share)
	}
}

// TestDriveKeepsToItsRate loads the real Collector, which acknowledges
// far faster than the rate asked, paced: the senders together never send
// ahead of the schedule (request n no sooner than n requests' spans at
// the rate after the start), so no more than the rate's spans over the
// period are acknowledged. Flat out, the same load sends many times more.
func TestDriveKeepsToItsRate(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	target, err := StartCollector(ctx, proctest.Tool(t, ".cache/otelcol/otelcol-budgetd"), t.TempDir())
	require.NoError(t, err)
	defer func() { require.NoError(t, target.Stop()) }()

	const spansPer, rate = 50, 2000.0
	period := 2 * time.Second
	load := Requests(8, spansPer)
	paced, err := Drive(ctx, target.Endpoint, load, spansPer, 4, 0, period, rate)
	require.NoError(t, err)
	require.Positive(t, paced.Spans)
	// Requests 0 … n-1 go before the period ends: n·spansPer/rate < period.
	require.LessOrEqual(t, float64(paced.Spans), rate*period.Seconds(), "paced at %g spans/s over %s", rate, period)

	flat, err := Drive(ctx, target.Endpoint, load, spansPer, 4, 0, period, 0)
	require.NoError(t, err)
	require.Greater(t, float64(flat.Spans), 2*rate*period.Seconds(), "the Collector keeps up with more than the rate: the bound above is the pacing's")
}
