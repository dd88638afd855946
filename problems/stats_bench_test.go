package problems

import (
	"fmt"
	"testing"
	"time"

	"github.com/budgetd/budgetd/schema"
)

// BenchmarkStatsOf counts 10,000 findings of 20 problems: what the analysis
// does with every batch of findings.
func BenchmarkStatsOf(b *testing.B) {
	fs := benchFindings(10_000, 20)
	b.ReportAllocs()
	for b.Loop() {
		StatsOf(fs, 5*time.Minute)
	}
}

// BenchmarkGroup groups 10,000 findings of 20 problems with their
// statistics over an hour: what the problems list does with a window.
func BenchmarkGroup(b *testing.B) {
	fs := benchFindings(10_000, 20)
	opt := Options{Stats: StatsOf(fs, 5*time.Minute)}
	b.ReportAllocs()
	for b.Loop() {
		if len(Group(fs, opt)) != 20 {
			b.Fatal("not 20 problems")
		}
	}
}

// benchFindings makes n orphaned-work findings of the given number of
// problems (callees), spread over an hour.
func benchFindings(n, problems int) []schema.Finding {
	t0 := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	fs := make([]schema.Finding, n)
	for i := range fs {
		callee := fmt.Sprintf("svc%d", i%problems)
		fs[i] = schema.Finding{
			ID: fmt.Sprintf("f%d", i), Kind: schema.KindOrphanedWork, TraceID: fmt.Sprintf("%032x", i),
			Service: callee, CallerService: "gateway", CalleeService: callee,
			Path: "edge:op > gateway:POST /checkout > " + callee + ":GET /x", DetectedAt: t0.Add(time.Duration(i) * time.Hour / time.Duration(n)),
			Evidence: map[string]float64{"orphaned_ms": 10},
		}
	}
	return fs
}
