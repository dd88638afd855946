package problems

import (
	"sync"
	"time"

	"github.com/budgetd/budgetd/schema"
)

// Examples bounds the findings stored in full: per problem and interval
// (problems.trend_interval) at most problems.examples_per_interval trace
// findings are written to the findings table; the rest are counted in the
// problem's stats only (StatsOf), so the findings table does not grow with
// traffic. Edge findings are one per edge and always kept, and so
// are the findings of re-analysed traces (Keep).
//
// The counts are this process's: each replica keeps its own examples, and
// a restart starts the current interval's count again.
type Examples struct {
	mu       sync.Mutex
	per      int
	interval time.Duration
	// kept counts the findings kept per problem and interval start; the
	// intervals before the previous one are forgotten.
	kept   map[exampleKey]int
	newest int64
}

type exampleKey struct {
	problem Key // the fingerprint, not its hash: no hashing per finding
	start   int64
}

// maxExampleKeys bounds the problems and intervals examples tracks; past it
// findings of untracked problems are kept (the bound never drops evidence it
// cannot count).
const maxExampleKeys = 100_000

// NewExamples returns an empty Examples for cfg's examples_per_interval
// and trend_interval.
func NewExamples(cfg Config) *Examples {
	return &Examples{per: cfg.ExamplesPerInterval, interval: cfg.TrendInterval, kept: map[exampleKey]int{}}
}

// Keep returns the findings to store in full, in order, and how many it
// left out. The findings of a re-analysed trace (reanalysed, by trace id)
// are all kept: reads show only a re-analysed trace's latest findings, so
// they replace what its first analysis stored.
func (e *Examples) Keep(fs []schema.Finding, reanalysed map[string]bool) (kept []schema.Finding, dropped int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	kept = fs[:0:0]
	for i := range fs {
		f := &fs[i]
		if f.TraceID == "" || reanalysed[f.TraceID] {
			kept = append(kept, *f)
			continue
		}
		start := f.DetectedAt.UnixNano() - f.DetectedAt.UnixNano()%int64(e.interval)
		e.forget(start)
		k := exampleKey{Fingerprint(*f), start}
		n, tracked := e.kept[k]
		switch {
		case !tracked && len(e.kept) >= maxExampleKeys:
			kept = append(kept, *f)
		case n < e.per:
			e.kept[k] = n + 1
			kept = append(kept, *f)
		default:
			dropped++
		}
	}
	return kept, dropped
}

// forget drops the counts of intervals before the one preceding start,
// once start is the newest interval seen.
func (e *Examples) forget(start int64) {
	if start <= e.newest {
		return
	}
	e.newest = start
	for k := range e.kept {
		if k.start < start-int64(e.interval) {
			delete(e.kept, k)
		}
	}
}
