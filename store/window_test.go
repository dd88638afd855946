package store

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/schema"
)

func TestSpanWindowSpansFirstToLastStart(t *testing.T) {
	require.Equal(t, Window{}, SpanWindow(nil))
	spans := []schema.Span{{StartNs: 300, EndNs: 900}, {StartNs: 100, EndNs: 150}, {StartNs: 200, EndNs: 250}}
	require.Equal(t, Window{SinceNs: 100, UntilNs: 300}, SpanWindow(spans), "starts, not ends, and in any order")
}

func TestAnalysisWindowOfStampedHops(t *testing.T) {
	require.Equal(t, Window{}, AnalysisWindow(nil))
	hops := []schema.Hop{{AnalyzedNs: 50}, {AnalyzedNs: 20}, {AnalyzedNs: 50}}
	require.Equal(t, Window{SinceNs: 20, UntilNs: 50}, AnalysisWindow(hops))
	hops = append(hops, schema.Hop{}) // analysed offline: no time
	require.Equal(t, Window{}, AnalysisWindow(hops), "one unstamped hop leaves the window unbounded")
}
