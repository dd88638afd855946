package problems

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/schema"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	checkout = "gateway:GET /checkout > order:POST /order"
	mobile   = "mobile:checkout > gateway:GET /checkout > order:POST /order"
)

// finding returns a finding on the path's last edge, detected at t0.
func finding(kind schema.Kind, id, trace, path string, ev map[string]float64) schema.Finding {
	k := Fingerprint(schema.Finding{Path: path})
	return schema.Finding{
		ID: id, Kind: kind, Severity: schema.SeverityWarning, TraceID: trace, SpanID: "0000000000000002",
		Service: k.CallerService, CallerService: k.CallerService, CalleeService: k.CalleeService,
		Path: path, DetectedAt: t0, Evidence: ev, Message: string(kind) + " on " + path,
	}
}

// onTraces returns one finding of kind on path per evidence map, each on a
// trace of its own: finding i has id "i" and trace "trace<i>".
func onTraces(kind schema.Kind, path string, evidence ...map[string]float64) []schema.Finding {
	var fs []schema.Finding
	for i, ev := range evidence {
		fs = append(fs, finding(kind, fmt.Sprint(i), fmt.Sprint("trace", i), path, ev))
	}
	return fs
}

func at(f schema.Finding, d time.Duration) schema.Finding {
	f.DetectedAt = t0.Add(d)
	return f
}

func withSeverity(f schema.Finding, s schema.Severity) schema.Finding {
	f.Severity = s
	return f
}

func only(t *testing.T, ps []Problem) Problem {
	t.Helper()
	require.Len(t, ps, 1)
	return ps[0]
}

func TestGroupEdgeKindsMergePathsRetryAmplificationDoesNot(t *testing.T) {
	ev := map[string]float64{"remaining_ms": 900, "timeout_ms": 2000}
	inversions := Group([]schema.Finding{
		finding(schema.KindTimeoutInversion, "t1", "aa", checkout, ev),
		finding(schema.KindTimeoutInversion, "t2", "bb", mobile, ev),
	}, Options{})
	p := only(t, inversions)
	require.Equal(t, 2, p.Occurrences)
	require.Equal(t, "gateway", p.CallerService)
	require.Equal(t, "GET /checkout", p.CallerOperation)
	require.Equal(t, "order", p.CalleeService)
	require.Equal(t, "POST /order", p.CalleeOperation)
	require.Empty(t, p.Path, "an edge kind carries no path")

	amp := map[string]float64{"calls": 4, "levels": 2}
	amplified := Group([]schema.Finding{
		finding(schema.KindRetryAmplification, "r1", "aa", checkout, amp),
		finding(schema.KindRetryAmplification, "r2", "bb", mobile, amp),
		finding(schema.KindRetryAmplification, "r3", "cc", mobile, amp),
	}, Options{})
	require.Len(t, amplified, 2)
	byPath := map[string]Problem{}
	for _, p := range amplified {
		byPath[p.Path] = p
	}
	require.Equal(t, 1, byPath[checkout].Occurrences)
	require.Equal(t, 2, byPath[mobile].Occurrences)
	require.NotEqual(t, byPath[checkout].ID, byPath[mobile].ID)
}

// TestGroupDoesNotDependOnOrder groups the same findings in many orders,
// with the duplicates of a re-analysis among them: the output is the same.
func TestGroupDoesNotDependOnOrder(t *testing.T) {
	var fs []schema.Finding
	for i := range 12 {
		trace := fmt.Sprintf("%032x", i%5)
		fs = append(fs,
			at(finding(schema.KindOrphanedWork, fmt.Sprintf("o%d", i), trace, checkout, map[string]float64{"orphaned_ms": 0.1 + float64(i)*1.7}), time.Duration(i)*time.Minute),
			at(finding(schema.KindTimeoutInversion, fmt.Sprintf("t%d", i), trace, mobile, map[string]float64{"remaining_ms": 900 - float64(i), "timeout_ms": 2000}), time.Duration(i)*time.Second),
		)
	}
	// Copies of three ids: later, earlier, and one at the same instant with
	// other evidence (which copy wins must not depend on which came first).
	same := fs[5]
	same.Evidence = map[string]float64{"orphaned_ms": 9999}
	fs = append(fs, at(fs[3], time.Hour), at(fs[0], -time.Hour), same)
	opt := Options{Now: t0.Add(2 * time.Hour), Interval: 10 * time.Minute, MaxExamples: 3, PathRequests: map[string]uint64{checkout: 40, mobile: 7}}
	want := Group(fs, opt)
	require.Len(t, want, 2)
	r := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		shuffled := append([]schema.Finding(nil), fs...)
		r.Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
		require.Equal(t, want, Group(shuffled, opt))
	}
}

func TestGroupCountsDistinctFindingIDs(t *testing.T) {
	ev := map[string]float64{"orphaned_ms": 500}
	a := finding(schema.KindOrphanedWork, "a", "aa", checkout, ev)
	b := finding(schema.KindOrphanedWork, "b", "aa", checkout, ev) // same trace, another span
	c := finding(schema.KindOrphanedWork, "c", "cc", checkout, ev)
	// a is written three times: first analysis, a re-analysis after late
	// spans (larger evidence) and a replay of the first write.
	aLate := at(a, 10*time.Minute)
	aLate.Evidence = map[string]float64{"orphaned_ms": 800}
	fs := []schema.Finding{at(a, 0), aLate, at(a, 0), at(b, 2*time.Minute), at(c, -5*time.Minute)}

	p := only(t, Group(fs, Options{Now: t0.Add(10 * time.Minute), Interval: time.Hour}))
	require.Equal(t, 3, p.Occurrences, "distinct finding ids")
	require.Equal(t, 2, p.AffectedRequests, "distinct traces")
	require.Equal(t, t0.Add(-5*time.Minute), p.FirstSeen)
	require.Equal(t, t0.Add(10*time.Minute), p.LastSeen, "the latest copy of a")
	require.Equal(t, Impact{Value: 1.8, Unit: UnitOrphanedSeconds}, p.Impact, "a counted once, with its latest evidence")
	require.Equal(t, Worst{FindingID: "a", TraceID: "aa", Evidence: map[string]float64{"orphaned_ms": 800}}, p.Worst)
	require.Equal(t, []Bucket{{Start: t0.Add(-time.Hour), Count: 1}, {Start: t0, Count: 2}}, p.Trend,
		"c before 12:00, a (first seen at 12:00) and b after; a's later copies add nothing")
}

func TestGroupLatestCopyDecidesTheProblem(t *testing.T) {
	// A trace whose parent arrived late: the first analysis saw a partial
	// path, the second the whole one. The finding belongs where the second
	// put it.
	partial := finding(schema.KindOrphanedWork, "a", "aa", "… > order:POST /order", map[string]float64{"orphaned_ms": 100})
	whole := at(finding(schema.KindOrphanedWork, "a", "aa", checkout, map[string]float64{"orphaned_ms": 100}), time.Second)
	p := only(t, Group([]schema.Finding{whole, partial}, Options{}))
	require.Equal(t, "gateway", p.CallerService)
	require.Equal(t, t0, p.FirstSeen)
}

func TestGroupImpactPerKind(t *testing.T) {
	tests := []struct {
		kind     schema.Kind
		evidence []map[string]float64 // one finding each, on its own trace
		want     Impact
		affected int
	}{
		{schema.KindOrphanedWork, []map[string]float64{{"orphaned_ms": 1500}, {"orphaned_ms": 250.4}}, Impact{1.75, UnitOrphanedSeconds}, 2},
		{schema.KindExpiredOnArrival, []map[string]float64{{"remaining_ms": -200, "duration_ms": 360}, {"remaining_ms": 0, "duration_ms": 1000}}, Impact{1.36, UnitOrphanedSeconds}, 2},
		{schema.KindRetryAmplification, []map[string]float64{{"calls": 12, "levels": 3}, {"calls": 4, "levels": 2}}, Impact{14, UnitWastedCalls}, 2},
		{schema.KindRetryWithoutBudget, []map[string]float64{{"remaining_ms": -100, "attempt": 2}, {"remaining_ms": 10, "attempt": 3, "expected_ms": 90}, {"remaining_ms": 5, "attempt": 2}}, Impact{3, UnitWastedCalls}, 3},
		{schema.KindTimeoutInversion, []map[string]float64{{"remaining_ms": 900, "timeout_ms": 2000}, {"remaining_ms": 100, "timeout_ms": 2000}}, Impact{2, UnitAffectedRequests}, 2},
		{schema.KindUnfundedRetryPolicy, []map[string]float64{{"remaining_ms": 1670, "required_ms": 1900}}, Impact{1, UnitAffectedRequests}, 1},
		{schema.KindBudgetReset, []map[string]float64{{"remaining_ms": 900, "received_ms": 30000}}, Impact{1, UnitAffectedRequests}, 1},
		{"future_kind", []map[string]float64{{"x": 1}, {"x": 2}}, Impact{2, UnitAffectedRequests}, 2},
	}
	for _, tt := range tests {
		t.Run(string(tt.kind), func(t *testing.T) {
			p := only(t, Group(onTraces(tt.kind, checkout, tt.evidence...), Options{}))
			require.Equal(t, tt.want, p.Impact)
			require.Equal(t, tt.affected, p.AffectedRequests)
		})
	}

	t.Run("latency_inversion counts its samples", func(t *testing.T) {
		edge := finding(schema.KindLatencyInversion, "e", "", "gateway:GET /checkout > order:POST /order", map[string]float64{"p99_ms": 1200, "timeout_ms": 1000, "samples": 20})
		edge.SpanID = ""
		p := only(t, Group([]schema.Finding{edge, at(edge, time.Minute)}, Options{}))
		require.Equal(t, 1, p.Occurrences, "re-evaluated, one id")
		require.Equal(t, 20, p.AffectedRequests)
		require.Equal(t, Impact{20, UnitAffectedRequests}, p.Impact)
		require.Equal(t, []string{}, p.Examples, "an edge finding has no trace")
	})
}

func TestGroupWorstPerKind(t *testing.T) {
	tests := []struct {
		kind      schema.Kind
		evidence  []map[string]float64
		wantWorst int // index into evidence
	}{
		{schema.KindOrphanedWork, []map[string]float64{{"orphaned_ms": 10}, {"orphaned_ms": 3000}, {"orphaned_ms": 20}}, 1},
		{schema.KindExpiredOnArrival, []map[string]float64{{"remaining_ms": -5000, "duration_ms": 10}, {"remaining_ms": -1, "duration_ms": 900}}, 1},
		{schema.KindTimeoutInversion, []map[string]float64{{"remaining_ms": 100, "timeout_ms": 500}, {"remaining_ms": 900, "timeout_ms": 2000}, {"remaining_ms": 50, "timeout_ms": 200}}, 1},
		{schema.KindBudgetReset, []map[string]float64{{"remaining_ms": 100, "received_ms": 30000}, {"remaining_ms": 20000, "received_ms": 30000}}, 0},
		{schema.KindUnfundedRetryPolicy, []map[string]float64{{"remaining_ms": 1670, "required_ms": 1900}, {"remaining_ms": 500, "required_ms": 1900}}, 1},
		{schema.KindLatencyInversion, []map[string]float64{{"p99_ms": 5000, "timeout_ms": 1000}, {"p99_ms": 3000, "timeout_ms": 2500}}, 0},
		{schema.KindRetryAmplification, []map[string]float64{{"calls": 4}, {"calls": 12}}, 1},
		{schema.KindRetryWithoutBudget, []map[string]float64{{"remaining_ms": 600, "expected_ms": 700}, {"remaining_ms": -300}}, 1},
	}
	for _, tt := range tests {
		t.Run(string(tt.kind), func(t *testing.T) {
			p := only(t, Group(onTraces(tt.kind, checkout, tt.evidence...), Options{}))
			require.Equal(t, fmt.Sprint(tt.wantWorst), p.Worst.FindingID)
			require.Equal(t, fmt.Sprint("trace", tt.wantWorst), p.Worst.TraceID)
			require.Equal(t, tt.evidence[tt.wantWorst], p.Worst.Evidence)
			require.Equal(t, p.Worst.TraceID, p.Examples[0], "the worst is the first example")
		})
	}

	t.Run("a tie goes to the more severe", func(t *testing.T) {
		ev := map[string]float64{"orphaned_ms": 100}
		p := only(t, Group([]schema.Finding{
			finding(schema.KindOrphanedWork, "a", "aa", checkout, ev),
			withSeverity(finding(schema.KindOrphanedWork, "b", "bb", checkout, ev), schema.SeverityCritical),
		}, Options{}))
		require.Equal(t, "b", p.Worst.FindingID)
		require.Equal(t, schema.SeverityCritical, p.Severity, "the worst severity of the findings")
	})
}

func TestGroupState(t *testing.T) {
	quiet := time.Hour
	tests := []struct {
		name  string
		seen  []time.Duration // detections, after t0
		now   time.Duration
		state State
	}{
		{"seen just now", []time.Duration{0}, 0, StateActive},
		{"quiet for exactly the quiet period", []time.Duration{0}, time.Hour, StateActive},
		{"quiet for longer", []time.Duration{0}, time.Hour + time.Second, StateResolved},
		{"steady, gaps inside the quiet period", []time.Duration{0, 50 * time.Minute, 100 * time.Minute, 150 * time.Minute}, 150 * time.Minute, StateActive},
		{"came back after a quiet gap", []time.Duration{0, 10 * time.Minute, 3 * time.Hour}, 3*time.Hour + 5*time.Minute, StateRegressed},
		{"stays regressed while it goes on", []time.Duration{0, 3 * time.Hour, 3*time.Hour + 50*time.Minute, 4*time.Hour + 40*time.Minute}, 5 * time.Hour, StateRegressed},
		{"regressed, then quiet again", []time.Duration{0, 3 * time.Hour}, 4*time.Hour + time.Minute, StateResolved},
		{"a gap of exactly the quiet period is no regression", []time.Duration{0, time.Hour}, time.Hour, StateActive},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var fs []schema.Finding
			for i, d := range tt.seen {
				fs = append(fs, at(finding(schema.KindOrphanedWork, fmt.Sprint(i), fmt.Sprint("trace", i), checkout, map[string]float64{"orphaned_ms": 1}), d))
			}
			p := only(t, Group(fs, Options{Now: t0.Add(tt.now), QuietPeriod: quiet}))
			require.Equal(t, tt.state, p.State)
		})
	}

	t.Run("copies of one id are sightings", func(t *testing.T) {
		// An edge finding re-evaluated every window keeps one id; its
		// latest evaluation keeps the problem active, and a silence between
		// evaluations is a regression like any other.
		edge := finding(schema.KindLatencyInversion, "e", "", checkout, map[string]float64{"p99_ms": 1200, "timeout_ms": 1000, "samples": 20})
		fs := []schema.Finding{edge, at(edge, 3*time.Hour)}
		p := only(t, Group(fs, Options{Now: t0.Add(3 * time.Hour), QuietPeriod: quiet}))
		require.Equal(t, StateRegressed, p.State)
		require.Equal(t, 1, p.Occurrences)
	})

	t.Run("zero Now is the latest detection", func(t *testing.T) {
		ps := Group([]schema.Finding{
			finding(schema.KindOrphanedWork, "old", "aa", checkout, map[string]float64{"orphaned_ms": 1}),
			at(finding(schema.KindBudgetReset, "new", "bb", checkout, map[string]float64{"received_ms": 1, "remaining_ms": 0}), 2*time.Hour),
		}, Options{QuietPeriod: quiet})
		states := map[schema.Kind]State{}
		for _, p := range ps {
			states[p.Kind] = p.State
		}
		require.Equal(t, map[schema.Kind]State{schema.KindOrphanedWork: StateResolved, schema.KindBudgetReset: StateActive}, states)
	})
}

func TestGroupExamples(t *testing.T) {
	var fs []schema.Finding
	for i := range 10 {
		// Traces 0..9, each later than the one before; trace 2 is the worst.
		ms := 10.0
		if i == 2 {
			ms = 5000
		}
		fs = append(fs, at(finding(schema.KindOrphanedWork, fmt.Sprint("f", i), fmt.Sprint("trace", i), checkout, map[string]float64{"orphaned_ms": ms}), time.Duration(i)*time.Minute))
	}
	fs = append(fs, at(finding(schema.KindOrphanedWork, "f9b", "trace9", checkout, map[string]float64{"orphaned_ms": 1}), 9*time.Minute)) // another span of trace 9

	tests := []struct {
		max  int
		want []string
	}{
		{1, []string{"trace2"}},
		{3, []string{"trace2", "trace9", "trace8"}},
		{0, []string{"trace2", "trace9", "trace8", "trace7", "trace6"}}, // the default, 5
		{20, []string{"trace2", "trace9", "trace8", "trace7", "trace6", "trace5", "trace4", "trace3", "trace1", "trace0"}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.max), func(t *testing.T) {
			p := only(t, Group(fs, Options{MaxExamples: tt.max}))
			require.Equal(t, tt.want, p.Examples)
		})
	}
}

func TestGroupShare(t *testing.T) {
	ev := map[string]float64{"remaining_ms": 900, "timeout_ms": 2000}
	fs := []schema.Finding{
		finding(schema.KindTimeoutInversion, "a", "aa", checkout, ev),
		finding(schema.KindTimeoutInversion, "b", "aa", checkout, ev), // a retry in the same request
		finding(schema.KindTimeoutInversion, "c", "cc", mobile, ev),
	}
	reqs := map[string]uint64{checkout: 6, mobile: 2, "other:x": 100}
	p := only(t, Group(fs, Options{PathRequests: reqs}))
	require.NotNil(t, p.Share)
	require.InDelta(t, 2.0/8, *p.Share, 1e-12, "2 requests of the 8 on the paths the findings lie on")

	require.Nil(t, only(t, Group(fs, Options{})).Share, "no request counts, no share")
	require.Nil(t, only(t, Group(fs, Options{PathRequests: map[string]uint64{"other:x": 1}})).Share, "paths not counted")

	edge := finding(schema.KindLatencyInversion, "e", "", "gateway:GET /checkout > order:POST /order", map[string]float64{"p99_ms": 1200, "timeout_ms": 1000, "samples": 4})
	p = only(t, Group([]schema.Finding{edge}, Options{PathRequests: reqs}))
	require.InDelta(t, 4.0/8, *p.Share, 1e-12, "an edge finding is on every path that ends with its edge")
	edge.Evidence["samples"] = 30
	p = only(t, Group([]schema.Finding{edge}, Options{PathRequests: reqs}))
	require.Equal(t, 1.0, *p.Share, "samples are calls: capped at every request")
}

func TestGroupSortsByImpactThenSeverityThenID(t *testing.T) {
	fs := []schema.Finding{
		finding(schema.KindBudgetReset, "r1", "aa", checkout, map[string]float64{}),                                // 1 request, warning
		withSeverity(finding(schema.KindTimeoutInversion, "t1", "aa", checkout, map[string]float64{}), "critical"), // 1 request, critical
		finding(schema.KindRetryAmplification, "a1", "aa", checkout, map[string]float64{"calls": 4}),               // 3 wasted calls
		finding(schema.KindExpiredOnArrival, "e1", "aa", checkout, map[string]float64{"duration_ms": 100}),         // 0.1 s
		finding(schema.KindUnfundedRetryPolicy, "u1", "aa", checkout, map[string]float64{}),                        // 1 request, warning
	}
	ps := Group(fs, Options{})
	var kinds []schema.Kind
	for _, p := range ps {
		kinds = append(kinds, p.Kind)
	}
	require.Equal(t, schema.KindRetryAmplification, kinds[0])
	require.Equal(t, schema.KindTimeoutInversion, kinds[1], "1 request, critical before warning")
	require.ElementsMatch(t, []schema.Kind{schema.KindBudgetReset, schema.KindUnfundedRetryPolicy}, kinds[2:4])
	require.Less(t, ps[2].ID, ps[3].ID, "equal impact and severity: by id")
	require.Equal(t, schema.KindExpiredOnArrival, kinds[4])
}

func TestProblemJSON(t *testing.T) {
	p := only(t, Group([]schema.Finding{
		finding(schema.KindRetryAmplification, "a", "aa", checkout, map[string]float64{"calls": 3}),
	}, Options{}))
	data, err := json.Marshal(p)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(data, &m))
	for _, key := range []string{"id", "kind", "severity", "caller_service", "caller_operation", "callee_service", "callee_operation",
		"path", "first_seen", "last_seen", "occurrences", "affected_requests", "share", "impact", "worst", "trend", "examples", "state", "suggestion"} {
		require.Contains(t, m, key)
	}
	require.Nil(t, m["share"], "unknown share is null")
	require.Equal(t, map[string]any{"value": 2.0, "unit": "wasted_calls"}, m["impact"])
	require.Equal(t, "2025-03-01T12:00:00Z", m["first_seen"])

	p = only(t, Group([]schema.Finding{finding(schema.KindOrphanedWork, "a", "aa", checkout, map[string]float64{"orphaned_ms": 3})}, Options{}))
	data, err = json.Marshal(p)
	require.NoError(t, err)
	require.NotContains(t, string(data), `"path"`, "only path-level kinds carry a path")
}

func TestImpactString(t *testing.T) {
	tests := []struct {
		in   Impact
		want string
	}{
		{Impact{3.2149, UnitOrphanedSeconds}, "3.21 s orphaned"},
		{Impact{41.26, UnitOrphanedSeconds}, "41.3 s orphaned"},
		{Impact{11520.4, UnitOrphanedSeconds}, "11520 s orphaned"},
		{Impact{1, UnitWastedCalls}, "1 wasted call"},
		{Impact{11, UnitWastedCalls}, "11 wasted calls"},
		{Impact{1, UnitAffectedRequests}, "1 request"},
		{Impact{40, UnitAffectedRequests}, "40 requests"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, tt.in.String())
	}
}
