package problems

import (
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/budgetd/budgetd/schema"
)

// rule is what one kind of problem needs beyond the grouping: how its impact
// is counted, which finding is its worst, and how its fix is written. All
// read the evidence keys of DESIGN §5; a missing key reads as 0.
type rule struct {
	unit Unit
	// perFinding is what one occurrence adds to the impact; nil makes the
	// impact the affected requests.
	perFinding func(ev map[string]float64) float64
	// score says how bad one occurrence is; the largest is the worst.
	score func(ev map[string]float64) float64
	// suggest writes the fix from the occurrences (one copy per id, in id
	// order) and the worst of them.
	suggest func(k Key, fs []schema.Finding, worst *schema.Finding) string
}

// ruleOf returns the rule of kind k. A kind this package does not know yet
// counts affected requests, has no worst measure (the most severe, most
// recent finding is the worst) and suggests what its worst finding says.
func ruleOf(k schema.Kind) rule {
	switch k {
	case schema.KindTimeoutInversion:
		return rule{UnitAffectedRequests, nil, gap("timeout_ms", "remaining_ms"), suggestTimeoutInversion}
	case schema.KindBudgetReset:
		return rule{UnitAffectedRequests, nil, gap("received_ms", "remaining_ms"), suggestBudgetReset}
	case schema.KindUnfundedRetryPolicy:
		return rule{UnitAffectedRequests, nil, gap("required_ms", "remaining_ms"), suggestUnfundedRetryPolicy}
	case schema.KindLatencyInversion:
		return rule{UnitAffectedRequests, nil, gap("p99_ms", "timeout_ms"), suggestLatencyInversion}
	case schema.KindOrphanedWork:
		return rule{UnitOrphanedSeconds, seconds("orphaned_ms"), value("orphaned_ms"), suggestOrphanedWork}
	case schema.KindExpiredOnArrival:
		return rule{UnitOrphanedSeconds, seconds("duration_ms"), value("duration_ms"), suggestExpiredOnArrival}
	case schema.KindRetryAmplification:
		return rule{UnitWastedCalls, func(ev map[string]float64) float64 { return max(ev["calls"]-1, 0) }, value("calls"), suggestRetryAmplification}
	case schema.KindRetryWithoutBudget:
		return rule{UnitWastedCalls, func(map[string]float64) float64 { return 1 }, gap("expected_ms", "remaining_ms"), suggestRetryWithoutBudget}
	}
	return rule{UnitAffectedRequests, nil, func(map[string]float64) float64 { return 0 },
		func(_ Key, _ []schema.Finding, worst *schema.Finding) string { return worst.Message }}
}

func value(key string) func(map[string]float64) float64 {
	return func(ev map[string]float64) float64 { return ev[key] }
}

func seconds(msKey string) func(map[string]float64) float64 {
	return func(ev map[string]float64) float64 { return ev[msKey] / 1000 }
}

// gap measures by how much a exceeds b: the timeout over the budget left,
// the p99 over the timeout.
func gap(a, b string) func(map[string]float64) float64 {
	return func(ev map[string]float64) float64 { return ev[a] - ev[b] }
}

// The suggestions. Each is one sentence with the figures that make it
// concrete; limits are rounded down to whole milliseconds (a timeout of at
// most 785.9 ms is written 785) and needs up (a p99 of 1200.1 ms is 1201).

func suggestTimeoutInversion(k Key, fs []schema.Finding, _ *schema.Finding) string {
	// Calls made with the budget already spent say nothing about the
	// timeout a call should have: no timeout fits. They get their own clause.
	var funded []schema.Finding
	for _, f := range fs {
		if math.Floor(f.Evidence["remaining_ms"]) > 0 {
			funded = append(funded, f)
		}
	}
	spent := len(fs) - len(funded)
	if len(funded) == 0 {
		return fmt.Sprintf("%s calls %s with its budget already spent (up to %s ms past the deadline): check the remaining budget before calling and derive the timeout from it.",
			callerName(k), calleeName(k), fmtMs(math.Ceil(-minOf(fs, "remaining_ms"))))
	}
	set := fmtMs(math.Round(maxOf(funded, "timeout_ms"))) + " ms"
	if minOf(funded, "timeout_ms") != maxOf(funded, "timeout_ms") {
		set = "up to " + set
	}
	tail := ""
	if spent > 0 {
		tail = fmt.Sprintf("; %s started with the budget already spent: check it before calling", plural(spent, "call"))
	}
	return fmt.Sprintf("Give %s's call to %s a timeout below %s ms, the least budget it had left (it is set to %s), or better derive the timeout per request from the remaining budget%s.",
		callerName(k), calleeName(k), fmtMs(math.Floor(minOf(funded, "remaining_ms"))), set, tail)
}

func suggestUnfundedRetryPolicy(k Key, fs []schema.Finding, _ *schema.Finding) string {
	left := median(fs, "remaining_ms")
	// The policy rarely varies on one edge; where it does, the largest
	// figures give a timeout that fits every variant.
	n, backoff, set := math.Max(maxOf(fs, "max_attempts"), 1), maxOf(fs, "backoff_ms"), maxOf(fs, "timeout_ms")
	if math.Floor(left) <= 0 {
		return fmt.Sprintf("%s starts its calls to %s with the budget already spent (%s%s ms past the deadline): check the remaining budget before calling.",
			callerName(k), calleeName(k), typical(len(fs), ""), fmtMs(math.Ceil(-left)))
	}
	perAttempt := (left - (n-1)*backoff) / n
	if perAttempt < 1 {
		return fmt.Sprintf("With %s%s ms left, %s attempts with %s ms backoff do not fit on %s: allow one attempt of at most %s ms, or size the attempts from the remaining budget.",
			typical(len(fs), ""), fmtMs(math.Round(left)), fmtMs(n), fmtMs(math.Round(backoff)), calleeName(k), fmtMs(math.Floor(left)))
	}
	return fmt.Sprintf("With %s%s ms left, give each of %s's %s attempts on %s at most %s ms, (%s − (%s − 1) × %s) / %s, instead of %s ms, or size each attempt from the remaining budget.",
		typical(len(fs), ""), fmtMs(math.Round(left)), callerName(k), fmtMs(n), calleeName(k), fmtMs(math.Floor(perAttempt)),
		fmtMs(math.Round(left)), fmtMs(n), fmtMs(math.Round(backoff)), fmtMs(n), fmtMs(math.Round(set)))
}

func suggestBudgetReset(k Key, fs []schema.Finding, _ *schema.Finding) string {
	received, left := median(fs, "received_ms"), median(fs, "remaining_ms")
	had := callerName(k) + "'s deadline had passed"
	if math.Round(left) > 0 {
		had = callerName(k) + " had " + typical(len(fs), "") + fmtMs(math.Round(left)) + " ms left"
	}
	return fmt.Sprintf("Propagate %s's deadline to %s instead of a local default: it started with %s%s ms budget while %s.",
		callerName(k), calleeName(k), typical(len(fs), "a "), fmtMs(math.Round(received)), had)
}

func suggestLatencyInversion(k Key, _ []schema.Finding, worst *schema.Finding) string {
	return fmt.Sprintf("Raise %s's timeout on %s to at least %s ms, the callee's p99 (it waits %s ms), or make %s faster.",
		callerName(k), calleeName(k), fmtMs(math.Ceil(worst.Evidence["p99_ms"])), fmtMs(math.Round(worst.Evidence["timeout_ms"])), calleeName(k))
}

func suggestOrphanedWork(k Key, fs []schema.Finding, worst *schema.Finding) string {
	who := "the request's deadline passes"
	if k.CallerService != "" {
		who = k.CallerService + " gives up"
	}
	return fmt.Sprintf("Make %s stop when %s (propagate cancellation and the deadline): %s s of work ran after the caller had gone, up to %s ms in one request.",
		calleeName(k), who, fmtSeconds(sum(fs, "orphaned_ms")/1000), fmtMs(math.Round(worst.Evidence["orphaned_ms"])))
}

func suggestExpiredOnArrival(k Key, fs []schema.Finding, worst *schema.Finding) string {
	return fmt.Sprintf("Make %s check the remaining budget before starting and reject requests already past their deadline: %s arrived too late and still ran %s s, up to %s ms in one request.",
		calleeName(k), plural(len(fs), "request"), fmtSeconds(sum(fs, "duration_ms")/1000), fmtMs(math.Round(worst.Evidence["duration_ms"])))
}

func suggestRetryAmplification(k Key, _ []schema.Finding, worst *schema.Finding) string {
	return fmt.Sprintf("Retry at one level of %s only: keep the retries on the leaf edge %s and make the levels above fail fast (%s was called up to %s times for one request).",
		k.Path, k.Edge(), k.CalleeService, fmtMs(worst.Evidence["calls"]))
}

func suggestRetryWithoutBudget(k Key, fs []schema.Finding, _ *schema.Finding) string {
	var known []schema.Finding
	for _, f := range fs {
		if _, ok := f.Evidence["expected_ms"]; ok {
			known = append(known, f)
		}
	}
	if len(known) == 0 {
		return fmt.Sprintf("Check the remaining budget before %s retries %s: its retries started after the deadline had passed (%s%s ms late), so skip them and fail fast.",
			callerName(k), calleeName(k), typical(len(fs), ""), fmtMs(math.Round(math.Max(-median(fs, "remaining_ms"), 0))))
	}
	return fmt.Sprintf("Check the remaining budget before %s retries %s: its retries started with %s%s ms left while an attempt needs about %s ms, so skip the retry when less is left.",
		callerName(k), calleeName(k), typical(len(known), ""), fmtMs(math.Round(median(known, "remaining_ms"))), fmtMs(math.Ceil(median(known, "expected_ms"))))
}

func callerName(k Key) string {
	if k.CallerService == "" {
		return "the caller"
	}
	return k.CallerService
}

func calleeName(k Key) string { return elemText(k.CalleeService, k.CalleeOperation) }

func minOf(fs []schema.Finding, key string) float64 {
	m := math.Inf(1)
	for _, f := range fs {
		m = math.Min(m, f.Evidence[key])
	}
	return m
}

func maxOf(fs []schema.Finding, key string) float64 {
	m := math.Inf(-1)
	for _, f := range fs {
		m = math.Max(m, f.Evidence[key])
	}
	return m
}

func sum(fs []schema.Finding, key string) float64 {
	s := 0.0
	for _, f := range fs {
		s += f.Evidence[key]
	}
	return s
}

// median is the middle value of key over fs, the mean of the two middle
// ones for an even count.
func median(fs []schema.Finding, key string) float64 {
	vs := make([]float64, len(fs))
	for i, f := range fs {
		vs[i] = f.Evidence[key]
	}
	sort.Float64s(vs)
	n := len(vs)
	if n%2 == 1 {
		return vs[n/2]
	}
	return (vs[n/2-1] + vs[n/2]) / 2
}

// fmtMs writes whole milliseconds (the caller has rounded), never "-0".
func fmtMs(ms float64) string {
	if ms == 0 {
		ms = 0
	}
	return strconv.FormatFloat(ms, 'f', 0, 64)
}

// fmtSeconds writes seconds with three significant digits at most: "0.35",
// "3.2", "41", "1200".
func fmtSeconds(s float64) string {
	dec := 2
	switch a := math.Abs(s); {
	case a >= 100:
		dec = 0
	case a >= 10:
		dec = 1
	}
	p := math.Pow(10, float64(dec))
	return fmtCount(math.Round(s*p) / p)
}

// typical introduces a median: "a median " over several findings, else
// article (the figure of the one finding is no median).
func typical(n int, article string) string {
	if n > 1 {
		return "a median "
	}
	return article
}

// plural writes "1 call" or "3 calls".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

func fmtCount(v float64) string {
	if v == 0 {
		v = 0
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}
