package analyze

import (
	"sort"
	"strconv"
	"time"

	"github.com/budgetd/budgetd/schema"
)

// retryAmplifications reports, per trace, leaf edges called many times
// because retries multiplied down their path (DESIGN §5,
// retry_amplification).
//
// A leaf call is a CLIENT/PRODUCER span with no call below it; leaf calls
// are grouped by path, so all attempts of all logical calls that reached the
// same leaf edge the same way count together: calls is the number of such
// spans. levels is the number of distinct call steps on the path (each a
// call path, from the first hop's call down to the leaf call itself) where a
// logical call leading to one of those leaf calls was attempted more than
// once. Three layers retrying 2, 2 and 3 times give calls = 12, levels = 3.
//
// The finding fires when levels ≥ 2, or when one level retried and calls
// reach the configured threshold times the calls the path would have had
// without any retry (firstTries): fan-out without any retry (a handler
// querying a table in a loop, a scatter to shards, a hedge) is not retry
// amplification, and neither is one retried shard among four.
//
// Severity: critical when retries multiplied at three or more levels or calls
// reach three times the threshold; warning otherwise. The finding sits on the
// earliest leaf call of the group.
func (v *view) retryAmplifications(now time.Time, out []schema.Finding) []schema.Finding {
	type group struct {
		path  string
		spans []int
	}
	var groups []group
	index := map[string]int{}
	for _, i := range v.order {
		nd := &v.n[i]
		if nd.call < 0 || nd.callDesc {
			continue
		}
		g, ok := index[nd.path]
		if !ok {
			g = len(groups)
			index[nd.path] = g
			groups = append(groups, group{path: nd.path})
		}
		groups[g].spans = append(groups[g].spans, i)
	}
	threshold := v.cfg.RetryAmplificationThreshold
	for _, g := range groups {
		calls := len(g.spans)
		if calls < 2 {
			continue
		}
		levels := v.retryLevels(g.spans)
		if levels == 0 || (levels < 2 && calls < threshold*v.firstTries(g.spans)) {
			continue
		}
		sort.Slice(g.spans, func(a, b int) bool { return g.spans[a] < g.spans[b] }) // span order is start order
		first := g.spans[0]
		sev := schema.SeverityWarning
		if levels >= 3 || calls >= 3*threshold {
			sev = schema.SeverityCritical
		}
		msg := v.n[first].calleeSvc + " was called " + strconv.Itoa(calls) + " times for one " +
			v.rootService(first) + " request because retries multiplied at " + plural(levels, "level") +
			" of its path; retry at one level only, within the remaining budget."
		out = append(out, v.spanFinding(schema.KindRetryAmplification, first, sev, now, map[string]float64{
			"calls":  float64(calls),
			"levels": float64(levels),
		}, msg))
	}
	return out
}

// plural writes "1 level" or "3 levels".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// retryLevels counts the distinct call paths, on the way from the top down
// to the given leaf calls, whose logical call was attempted more than once.
func (v *view) retryLevels(leaves []int) int {
	seen := map[int]bool{} // spans already walked
	levels := map[string]bool{}
	for _, i := range leaves {
		for j := i; j >= 0 && !seen[j]; j = v.n[j].parent {
			seen[j] = true
			if c := v.n[j].call; c >= 0 && v.calls[c].multiplied {
				levels[v.n[j].path] = true
			}
		}
	}
	return len(levels)
}

// firstTries counts the leaf calls that are first attempts all the way
// down: the call and every call above it is attempt 1. It is how many calls
// the path would have had if nothing had been retried (at least 1, for a
// partial trace whose first attempts are missing). Concurrent siblings are
// separate calls (groupCalls), so fan-out and hedges count here.
func (v *view) firstTries(leaves []int) int {
	n := 0
	for _, i := range leaves {
		first := true
		for j := i; j >= 0 && first; j = v.n[j].parent {
			first = v.n[j].call < 0 || v.n[j].attempt <= 1
		}
		if first {
			n++
		}
	}
	return max(n, 1)
}
