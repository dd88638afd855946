package bench

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
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
