package ingesttest

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

func TestSpansExactCount(t *testing.T) {
	tests := []struct {
		name   string
		nSpans int
	}{
		{"one", 1},
		{"less than a trace", 4},
		{"benchmark batch", 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.nSpans, Spans(7, tt.nSpans).SpanCount())
		})
	}
}

func TestTracesShape(t *testing.T) {
	td := Traces(1, 50)
	traces := map[[16]byte]int{}
	kinds := map[ptrace.SpanKind]int{}
	minAttrs, maxAttrs := 1<<30, 0
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		_, ok := rss.At(i).Resource().Attributes().Get("service.name")
		require.True(t, ok, "every resource names its service")
		spans := rss.At(i).ScopeSpans().At(0).Spans()
		for j := 0; j < spans.Len(); j++ {
			sp := spans.At(j)
			require.False(t, sp.TraceID().IsEmpty())
			require.False(t, sp.SpanID().IsEmpty())
			require.GreaterOrEqual(t, sp.EndTimestamp(), sp.StartTimestamp())
			traces[sp.TraceID()]++
			kinds[sp.Kind()]++
			minAttrs = min(minAttrs, sp.Attributes().Len())
			maxAttrs = max(maxAttrs, sp.Attributes().Len())
		}
	}
	require.Len(t, traces, 50)
	for _, n := range traces {
		require.GreaterOrEqual(t, n, 1)
		require.LessOrEqual(t, n, maxTraceSpans)
	}
	require.Positive(t, kinds[ptrace.SpanKindServer])
	require.Positive(t, kinds[ptrace.SpanKindClient])
	require.GreaterOrEqual(t, minAttrs, 10)
	require.LessOrEqual(t, maxAttrs, 20)
	t.Logf("spans=%d attrs/span %d..%d", td.SpanCount(), minAttrs, maxAttrs)
}

func TestDeterministic(t *testing.T) {
	var m ptrace.ProtoMarshaler
	a, err := m.MarshalTraces(Traces(3, 10))
	require.NoError(t, err)
	b, err := m.MarshalTraces(Traces(3, 10))
	require.NoError(t, err)
	require.Equal(t, a, b, "same seed, same bytes")
	c, err := m.MarshalTraces(Traces(4, 10))
	require.NoError(t, err)
	require.NotEqual(t, a, c, "another seed, other traces")
}
