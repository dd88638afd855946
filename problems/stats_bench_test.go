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
	t0 := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	fs := make([]schema.Finding, 10_000)
	for i := range fs {
		callee := fmt.Sprintf("svc%d", i%20)
		fs[i] = schema.Finding{
			ID: fmt.Sprintf("f%d", i), Kind: schema.KindOrphanedWork, TraceID: fmt.Sprintf("%032x", i),
			Service: callee, CallerService: "gateway", CalleeService: callee,
			Path: "edge:op > gateway:POST /checkout > " + callee + ":GET /x", DetectedAt: t0,
			Evidence: map[string]float64{"orphaned_ms": 10},
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		StatsOf(fs, 5*time.Minute)
	}
}
