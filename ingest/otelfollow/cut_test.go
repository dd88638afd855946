package otelfollow

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/store/oteltraces"
)

// TestCut checks where a poll stops: at a trace boundary within
// max_spans_per_poll, never between traces that end in the same
// nanosecond, and always past at least one trace.
func TestCut(t *testing.T) {
	due := func(spansAndEnds ...int) []oteltraces.DueTrace {
		var out []oteltraces.DueTrace
		for i := 0; i < len(spansAndEnds); i += 2 {
			out = append(out, oteltraces.DueTrace{ID: string(rune('a' + i/2)), Spans: spansAndEnds[i], EndNs: int64(spansAndEnds[i+1])})
		}
		return out
	}
	const until = 1000
	tests := []struct {
		name     string
		due      []oteltraces.DueTrace
		max      int
		wantN    int
		wantNext int64
		wantMore bool
	}{
		{"nothing due: the window is done", nil, 10, 0, until, false},
		{"all fit", due(3, 10, 3, 20, 4, 30), 10, 3, until, false},
		{"stop at a trace boundary", due(3, 10, 3, 20, 5, 30), 10, 2, 20, true},
		{"a trace over max alone is taken alone", due(50, 10, 3, 20), 10, 1, 10, true},
		{"traces ending together stay together", due(3, 10, 3, 20, 3, 20, 3, 30), 8, 1, 10, true},
		{"a first group over max is taken whole", due(6, 10, 6, 10, 1, 20), 8, 2, 10, true},
		{"a first group over max that ends the window", due(6, 10, 6, 10, 6, 10), 8, 3, until, false},
		{"a first group filling the rows is taken again", due(1, 10, 1, 10, 1, 10), 2, 3, 9, true},
		{"the query's extra row says there is more", due(1, 10, 1, 20, 1, 30), 2, 2, 20, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, next, more := cut(tt.due, tt.max, until)
			require.Len(t, got, tt.wantN)
			require.Equal(t, tt.wantNext, next)
			require.Equal(t, tt.wantMore, more)
		})
	}
}
