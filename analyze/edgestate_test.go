package analyze

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/schema"
)

// TestEdgeFindingsWithOtherReplicas splits one edge's calls between two
// replicas, as trace-id routing does: neither has min_edge_samples alone,
// so neither finds the inversion from its own memory, but each judging
// over its own statistics merged with the other's states finds what one
// node that saw every call finds, evidence and all.
func TestEdgeFindingsWithOtherReplicas(t *testing.T) {
	single, a, b := New(testConfig()), New(testConfig()), New(testConfig())
	for i := range 30 {
		latency := 900.0
		if i%10 == 0 {
			latency = 1500 // the slow tenth puts the p99 above the timeout
		}
		tr := edgeTrace(i+1, latency, 1000, true)
		single.Trace(tr, testNow)
		if i%2 == 0 {
			a.Trace(tr, testNow)
		} else {
			b.Trace(tr, testNow)
		}
	}
	want := single.EdgeFindings(testNow)
	require.Len(t, want, 1, "one node with every call finds the inversion")
	require.Empty(t, a.EdgeFindings(testNow), "15 samples on one replica are too few")
	require.Empty(t, b.EdgeFindings(testNow), "15 samples on one replica are too few")

	got, bad := a.EdgeFindingsWith(testNow, b.EdgeStates(testNow))
	require.Zero(t, bad)
	require.Equal(t, want, got)
	got, bad = b.EdgeFindingsWith(testNow, a.EdgeStates(testNow))
	require.Zero(t, bad)
	require.Equal(t, want, got, "both replicas judge the edge the same")

	// A state that does not decode is counted and left out, not fatal.
	states := b.EdgeStates(testNow)
	require.Len(t, states, 1)
	states = append(states, schema.EdgeState{CallerService: "x", CalleeService: "y", State: []byte{edgeStateVersion + 1}})
	got, bad = a.EdgeFindingsWith(testNow, states)
	require.Equal(t, 1, bad)
	require.Equal(t, want, got)
}

// TestEdgeStateRoundTrip encodes aggregates of every shape — exact and
// sketched timeout tables, waits of each kind — and checks that decoding
// gives back an aggregate with the same statistics and the same encoding.
func TestEdgeStateRoundTrip(t *testing.T) {
	exact, sketched := &edgeAgg{}, &edgeAgg{}
	for i := range 200 {
		s := callSample{latencyMs: float64(i%37) * 13.5, retry: i%7 == 0, hasTimeout: true, timeoutMs: 1000, atDeadline: i%11 == 0}
		exact.add(&s)
		s.timeoutMs = float64(100 + i) // more distinct timeouts than a table keeps exactly
		sketched.add(&s)
		w := waitSample{ms: float64(500 + i%5), gaveUp: i%3 == 0, atDeadline: i%3 == 1}
		exact.addWait(&w)
		sketched.addWait(&w)
	}
	require.Nil(t, exact.timeouts.sk)
	require.NotNil(t, sketched.timeouts.sk)
	for name, agg := range map[string]*edgeAgg{"exact timeouts": exact, "sketched timeouts": sketched, "empty": {}} {
		t.Run(name, func(t *testing.T) {
			data := agg.encode()
			var back edgeAgg
			require.NoError(t, back.decode(data))
			require.Equal(t, data, back.encode())
			k := edgeKey{"a", "op", "b", "op"}
			require.Equal(t, agg.stats(k, 5), back.stats(k, 5))
		})
	}
}

// TestEdgeStateRejectsMalformed feeds decode truncated and inflated
// states: each is an error, none a panic or an unbounded allocation.
func TestEdgeStateRejectsMalformed(t *testing.T) {
	agg := &edgeAgg{}
	for i := range 50 {
		agg.add(&callSample{latencyMs: float64(i), hasTimeout: true, timeoutMs: 10})
	}
	data := agg.encode()
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"unknown version", append([]byte{9}, data[1:]...)},
		{"truncated", data[:len(data)-1]},
		{"trailing bytes", append(append([]byte{}, data...), 0)},
		{"more buckets than a sketch keeps", []byte{edgeStateVersion, 1, 0, 1, 0, 0xff, 0xff, 0x03}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var back edgeAgg
			require.ErrorIs(t, back.decode(tt.data), errBadEdgeState)
		})
	}
}

// FuzzEdgeState: decode takes any bytes without panicking, and whatever it
// accepts encodes to a state that decodes to the same statistics.
func FuzzEdgeState(f *testing.F) {
	agg := &edgeAgg{}
	for i := range 40 {
		agg.add(&callSample{latencyMs: float64(i * 3), hasTimeout: true, timeoutMs: float64(i)})
		agg.addWait(&waitSample{ms: float64(i), gaveUp: true})
	}
	f.Add(agg.encode())
	f.Add([]byte{edgeStateVersion})
	f.Fuzz(func(t *testing.T, data []byte) {
		var a edgeAgg
		if a.decode(data) != nil {
			return
		}
		var b edgeAgg
		require.NoError(t, b.decode(a.encode()))
		k := edgeKey{"a", "", "b", ""}
		require.Equal(t, a.stats(k, 5), b.stats(k, 5))
	})
}
