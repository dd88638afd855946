package analyze_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/budgetd/budgetd/analyze"
	"github.com/budgetd/budgetd/ingest"
	"github.com/budgetd/budgetd/ingest/ingesttest"
	"github.com/budgetd/budgetd/schema"
)

// BenchmarkHeldSpans measures the heap a held span costs the assembler:
// realistic spans (ingesttest, converted as ingest does) added to an
// Assembler, which keeps what Compact keeps of them, as they are held for
// the idle period before their traces are analysed.
func BenchmarkHeldSpans(b *testing.B) {
	conv, err := ingest.NewConverter(ingest.DefaultConfig().Limits)
	if err != nil {
		b.Fatal(err)
	}
	const n = 100_000
	var batches [][]schema.Span
	for i := range 10 {
		batches = append(batches, conv.Convert(ingesttest.Spans(int64(i+1), n/10)).Spans)
	}
	cfg := analyze.DefaultAssemblerConfig()
	cfg.MaxSpans, cfg.MaxTraces = 10*n, 10*n
	b.ReportAllocs()
	var perSpan float64
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		asm := analyze.NewAssembler(cfg)
		now := time.Now()
		for _, spans := range batches {
			asm.Add(spans, now)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perSpan = float64(after.HeapAlloc-before.HeapAlloc) / n
		runtime.KeepAlive(asm)
	}
	b.ReportMetric(perSpan, "heap-B/held-span")
}
