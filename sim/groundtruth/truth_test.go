package groundtruth

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/schema"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(ms float64) time.Time { return t0.Add(time.Duration(ms * float64(time.Millisecond))) }

func msd(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

// retryChain is one request: the edge (a 1000 ms deadline) calls gateway
// once with a 1000 ms timer; gateway calls db with a 400 ms timer and 3
// attempts (backoff 50 ms), each timing out.
func retryChain() *Log {
	log := &Log{Requests: []*Request{{Trace: "t", Start: at(0), Deadline: at(1000)}}}
	log.Calls = append(log.Calls, &Call{Trace: "t", Caller: "edge", Callee: "gateway", Parent: -1,
		Start: at(0), End: at(1000), OwnTimeout: msd(1000), GaveUp: true, TimedOut: true, TimerFired: true,
		Logical: 1, Attempt: 1, MaxAttempts: 1})
	log.Invs = append(log.Invs, &Invocation{Trace: "t", Service: "gateway", Call: 0, Start: at(1), End: at(1352)})
	for n, start := range []float64{2, 452, 902} {
		log.Calls = append(log.Calls, &Call{Trace: "t", Caller: "gateway", Callee: "db", Parent: 0,
			Start: at(start), End: at(start + 400), OwnTimeout: msd(400), GaveUp: true, TimedOut: true, TimerFired: true,
			Logical: 2, Attempt: n + 1, MaxAttempts: 3, Backoff: msd(50)})
		log.Invs = append(log.Invs, &Invocation{Trace: "t", Service: "db", Call: n + 1, Start: at(start + 1), End: at(start + 399)})
	}
	return log
}

func expects(tr Truth, kind schema.Kind) []Expect {
	var out []Expect
	for _, e := range tr.Expected {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

func TestRetryRules(t *testing.T) {
	b := New("t", false, retryChain())
	b.Orphans()
	b.Inversions(true)
	b.UnfundedRetryPolicies()
	b.RetriesWithoutBudget()
	b.RetryAmplification()
	tr := b.Truth()

	// 3 × 400 + 2 × 50 = 1300 ms needed with 998 left.
	require.Equal(t, []Expect{{Kind: schema.KindUnfundedRetryPolicy, TraceID: "t", Service: "gateway", Callee: "db"}},
		expects(tr, schema.KindUnfundedRetryPolicy))
	// The third attempt starts at 902 with 98 ms left, less than the 400 ms
	// the earlier (timed-out) attempts ran; the second had 548 left.
	require.Equal(t, []Expect{{Kind: schema.KindRetryWithoutBudget, TraceID: "t", Service: "gateway", Callee: "db"}},
		expects(tr, schema.KindRetryWithoutBudget))
	// One level retried, 3 calls ≥ 3 × 1 first try.
	require.Equal(t, []Expect{{Kind: schema.KindRetryAmplification, TraceID: "t", Service: "gateway", Callee: "db"}},
		expects(tr, schema.KindRetryAmplification))
	// The third attempt's 400 ms timer reaches past the 98 ms left.
	require.Len(t, expects(tr, schema.KindTimeoutInversion), 1)
	// gateway worked 352 ms past the edge's give-up; db's last invocation
	// ran on 301 ms after 1000.
	require.ElementsMatch(t, []Expect{
		{Kind: schema.KindOrphanedWork, TraceID: "t", Service: "gateway"},
		{Kind: schema.KindOrphanedWork, TraceID: "t", Service: "db"},
	}, expects(tr, schema.KindOrphanedWork))
}

func TestRetryRulesWithoutAttributes(t *testing.T) {
	b := New("t", true, retryChain())
	b.UnfundedRetryPolicies()
	b.RetriesWithoutBudget()
	tr := b.Truth()
	require.Empty(t, expects(tr, schema.KindUnfundedRetryPolicy), "the policy is in the attributes")
	// One request: no timer fired MinSamples times, so R cannot be inferred.
	require.Empty(t, tr.Expected)
	require.Contains(t, tr.Ambiguous, Expect{Kind: schema.KindRetryWithoutBudget, TraceID: "t", Service: "gateway", Callee: "db"})
}

func TestAmplificationNeedsRetries(t *testing.T) {
	// Fan-out: three concurrent first tries of three logical calls.
	log := &Log{Requests: []*Request{{Trace: "t", Start: at(0)}}}
	log.Invs = append(log.Invs, &Invocation{Trace: "t", Service: "gateway", Call: -1, Start: at(0), End: at(50)})
	for i := range 3 {
		log.Calls = append(log.Calls, &Call{Trace: "t", Caller: "gateway", Callee: "shard", Parent: 0,
			Start: at(1), End: at(40), Logical: i, Attempt: 1})
	}
	b := New("t", false, log)
	b.RetryAmplification()
	require.Empty(t, b.Truth().Expected)
}

func TestJudgeExact(t *testing.T) {
	require.Equal(t, Yes, JudgeExact(msd(1.3)), "a timeout equal to its caller's, after 1.3 ms of work")
	require.Equal(t, Unsure, JudgeExact(0))
	require.Equal(t, Unsure, JudgeExact(msd(-2)))
	require.Equal(t, No, JudgeExact(msd(-3)))
}

func TestScoreKeys(t *testing.T) {
	tr := Truth{
		Expected:  []Expect{{Kind: schema.KindOrphanedWork, TraceID: "a", Service: "db"}, {Kind: schema.KindOrphanedWork, TraceID: "b", Service: "db"}},
		Ambiguous: []Expect{{Kind: schema.KindOrphanedWork, TraceID: "c", Service: "db"}},
	}
	found := []Expect{
		Key(schema.KindOrphanedWork, "a", "db", "ignored for an entry kind"),
		Key(schema.KindOrphanedWork, "a", "db", ""), // the same key again
		Key(schema.KindOrphanedWork, "c", "db", ""), // ambiguous: not counted
		Key(schema.KindOrphanedWork, "d", "db", ""), // false
	}
	for _, s := range ScoreKeys(found, tr) {
		if s.Kind == schema.KindOrphanedWork {
			require.Equal(t, Score{Kind: schema.KindOrphanedWork, TP: 1, FP: 1, FN: 1}, s)
		}
	}
	require.Equal(t, []Expect{{Kind: schema.KindOrphanedWork, TraceID: "d", Service: "db"}}, False(found, tr))
	require.Equal(t, []Expect{{Kind: schema.KindOrphanedWork, TraceID: "b", Service: "db"}}, Missed(found, tr, 3))
	require.Equal(t, "", Key(schema.KindLatencyInversion, "a", "gw", "db").TraceID, "edge findings are per edge")
}
