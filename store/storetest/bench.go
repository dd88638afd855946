package storetest

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/budgetd/budgetd/analyze"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store/chsql"
)

// SpanBatch returns n realistic spans: traces of 10 spans, 15 attributes
// each (budget attributes among them), one event on every fifth span. A
// seed makes the same spans every time; two seeds share no trace.
func SpanBatch(seed uint64, n int) []schema.Span {
	r := rand.New(rand.NewPCG(seed, 42))
	services := []string{"gateway", "order", "pricing", "inventory", "db"}
	spans := make([]schema.Span, n)
	start := uint64(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	for i := range spans {
		var t schema.TraceID
		var s, p schema.SpanID
		if i%10 == 0 {
			// 16 random bytes, as the OpenTelemetry SDKs make trace ids:
			// what the ids cost on disk depends on it.
			binary.LittleEndian.PutUint64(t[:8], r.Uint64())
			binary.LittleEndian.PutUint64(t[8:], r.Uint64())
		} else {
			t, p = spans[i-1].TraceID, spans[i-1].SpanID
		}
		for j := range s {
			s[j] = byte(r.Uint32())
		}
		svc := services[i%len(services)]
		st := start + uint64(i)*1_000_000 + uint64(r.IntN(1000))
		sp := schema.Span{
			TraceID: t, SpanID: s, ParentSpanID: p, Service: svc, Name: "POST /" + svc + "/v1/items",
			Kind: schema.SpanKind(2 + i%2), StartNs: st, EndNs: st + uint64(r.IntN(50_000_000)),
			StatusCode: schema.StatusCode(r.IntN(3)), ScopeName: "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp",
			ScopeVersion:  "0.72.0",
			ResourceAttrs: schema.Attributes{schema.Str("service.name", svc), schema.Str("host.name", fmt.Sprintf("node-%d", r.IntN(20))), schema.Str("deployment.environment", "prod")},
			Attrs: schema.Attributes{
				schema.Str("http.request.method", "POST"), schema.Str("url.path", "/"+svc+"/v1/items"),
				schema.Int("http.response.status_code", int64([]int{200, 200, 200, 504}[r.IntN(4)])),
				schema.Str("server.address", svc+".internal"), schema.Int("server.port", 8080),
				schema.Str("network.protocol.version", "1.1"), schema.Str("user_agent.original", "Go-http-client/1.1"),
				schema.Int(schema.AttrRemainingMs, int64(r.IntN(10_000))), schema.Str(schema.AttrSource, "propagated"),
				schema.Int(schema.AttrTimeoutMs, int64(r.IntN(5_000))), schema.Int(schema.AttrPropagatedMs, int64(r.IntN(5_000))),
				schema.Int(schema.AttrAttempt, int64(1+r.IntN(2))), schema.Int(schema.AttrMaxAttempts, 3),
				schema.Strings(schema.AttrHeaderRequestTimeoutMs, fmt.Sprint(r.IntN(10_000))),
				schema.Str("request.id", fmt.Sprintf("%016x", r.Uint64())),
			},
		}
		if i%5 == 0 {
			sp.Events = []schema.Event{{TimeNs: st + 1000, Name: schema.EventCancelled, Attrs: schema.Attributes{schema.Str(schema.AttrCancelSource, "deadline")}}}
		}
		spans[i] = sp
	}
	return spans
}

// AddAttributes gives every span n more application attributes (a third
// each of strings, integers and booleans, values varying between spans).
func AddAttributes(spans []schema.Span, n int) {
	k := 0
	for i := range spans {
		attrs := make(schema.Attributes, 0, len(spans[i].Attrs)+n)
		attrs = append(attrs, spans[i].Attrs...)
		for j := range n {
			k++
			name := "app.attribute_" + strconv.Itoa(j)
			switch j % 3 {
			case 0:
				attrs = append(attrs, schema.Str(name, "value-"+strconv.Itoa(k%977)))
			case 1:
				attrs = append(attrs, schema.Int(name, int64(k%10_007)))
			default:
				attrs = append(attrs, schema.Bool(name, k%2 == 0))
			}
		}
		spans[i].Attrs = attrs
	}
}

// BenchmarkWriteSpans measures batch-write throughput of spans: one
// WriteSpans call of batchSize spans per iteration, reported as rows/s,
// and the spans table's bytes on disk per span (each distinct span once,
// parts merged).
func BenchmarkWriteSpans(b *testing.B, open func(ctx context.Context, database string) (*chsql.Store, error), batchSize int) {
	benchmarkWriteSpans(b, open, batchSize, 0)
}

// BenchmarkWriteSpansAttributes is BenchmarkWriteSpans with 0, 10 and 40
// application attributes added to each span's 15: how a span's store cost
// and its bytes on disk grow with its attributes (docs/performance.md's cost model).
func BenchmarkWriteSpansAttributes(b *testing.B, open func(ctx context.Context, database string) (*chsql.Store, error), batchSize int) {
	for _, extra := range []int{0, 10, 40} {
		b.Run("extra="+strconv.Itoa(extra), func(b *testing.B) {
			benchmarkWriteSpans(b, open, batchSize, extra)
		})
	}
}

func benchmarkWriteSpans(b *testing.B, open func(ctx context.Context, database string) (*chsql.Store, error), batchSize, extra int) {
	ctx := context.Background()
	s := openBenchStore(ctx, b, open)
	batches := make([][]schema.Span, 8)
	for i := range batches {
		batches[i] = SpanBatch(uint64(i+1), batchSize)
		AddAttributes(batches[i], extra)
	}
	// The bytes on disk of each distinct span once, before the timed
	// writes repeat the batches (repeated rows compress to nearly nothing).
	for i, batch := range batches {
		if err := s.WriteSpans(ctx, fmt.Sprintf("distinct-%d", i), batch); err != nil {
			b.Fatal(err)
		}
	}
	diskBytes := spansBytesPerRow(ctx, b, s)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if err := s.WriteSpans(ctx, fmt.Sprintf("bench-%d", i), batches[i%len(batches)]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*batchSize)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(diskBytes, "disk-B/span")
}

// openBenchStore opens a store in a database of its own for one benchmark,
// dropped when the benchmark ends.
func openBenchStore(ctx context.Context, b *testing.B, open func(ctx context.Context, database string) (*chsql.Store, error)) *chsql.Store {
	db := fmt.Sprintf("bench_%d", time.Now().UnixNano())
	s, err := open(ctx, db)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = s.Conn().Exec(ctx, "DROP DATABASE IF EXISTS "+db, nil)
		_ = s.Close()
	})
	return s
}

// HopBatch returns the hops budgetd's pipeline stores for SpanBatch(seed,
// n), analysed at 13:00 of the batches' day (Analyse).
func HopBatch(seed uint64, n int) []schema.Hop {
	hops, _ := Analyse(analyze.New(analyze.DefaultConfig()), SpanBatch(seed, n), time.Date(2026, 11, 1, 13, 0, 0, 0, time.UTC))
	return hops
}

// Analyse analyses spans as budgetd's pipeline does once their traces are
// idle at now: each trace whole, in the order the traces first appear, its
// hops thinned (analyze.Thin) and stamped with the analysis time. It
// returns the hops the pipeline stores and the findings.
func Analyse(a *analyze.Analyzer, spans []schema.Span, now time.Time) ([]schema.Hop, []schema.Finding) {
	byTrace := map[schema.TraceID][]schema.Span{}
	var order []schema.TraceID
	for _, s := range spans {
		if _, ok := byTrace[s.TraceID]; !ok {
			order = append(order, s.TraceID)
		}
		byTrace[s.TraceID] = append(byTrace[s.TraceID], s)
	}
	var hops []schema.Hop
	var findings []schema.Finding
	for _, id := range order {
		r := a.Trace(schema.NewTrace(byTrace[id]), now)
		for i := range r.Hops {
			r.Hops[i].AnalyzedNs = uint64(now.UnixNano())
		}
		hops = append(hops, analyze.Thin(r.Hops)...)
		findings = append(findings, r.Findings...)
	}
	return hops, findings
}

// BenchmarkWriteHops measures what the hops table costs the engine: each
// iteration writes parts batches of hops (HopBatch of batchSize spans, with
// their interval statistics, as WriteHops writes them) with merges
// stopped, then merges them into one part, as the engine's background
// merges would, a level at a time. It reports the process's CPU (user and
// system, every thread: open must start an engine inside the process for
// the figures to mean anything) per hop for the inserts and for the merge
// apart, and the merged part's bytes on disk per hop. Only the hops are
// emptied between iterations: the statistics tables keep merging in the
// background, and those merges count in the insert CPU, as they cost the
// inserts of a running budgetd.
func BenchmarkWriteHops(b *testing.B, open func(ctx context.Context, database string) (*chsql.Store, error), batchSize, parts int) {
	batches := make([][]schema.Hop, parts)
	hops := 0
	for i := range batches {
		batches[i] = HopBatch(uint64(i+1), batchSize)
		hops += len(batches[i])
	}
	ctx := context.Background()
	s := openBenchStore(ctx, b, open)
	db := s.Database()
	exec := func(q string) {
		if err := s.Conn().Exec(ctx, q, nil); err != nil {
			b.Fatal(err)
		}
	}
	var insertCPU, mergeCPU time.Duration
	var diskBytes float64
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		exec("TRUNCATE TABLE " + db + ".hops")
		exec("SYSTEM STOP MERGES " + db + ".hops")
		b.StartTimer()
		t0 := processCPU(b)
		for j, batch := range batches {
			if err := s.WriteHops(ctx, fmt.Sprintf("bench-%d-%d", i, j), batch); err != nil {
				b.Fatal(err)
			}
		}
		t1 := processCPU(b)
		exec("SYSTEM START MERGES " + db + ".hops")
		exec("OPTIMIZE TABLE " + db + ".hops FINAL")
		insertCPU += t1 - t0
		mergeCPU += processCPU(b) - t1
		b.StopTimer()
		bytes, err := DiskBytes(ctx, s)
		if err != nil {
			b.Fatal(err)
		}
		diskBytes = float64(bytes["hops"]) / float64(hops)
		b.StartTimer()
	}
	n := float64(b.N * hops)
	b.ReportMetric(float64(insertCPU.Microseconds())/n, "insert-CPU-µs/hop")
	b.ReportMetric(float64(mergeCPU.Microseconds())/n, "merge-CPU-µs/hop")
	b.ReportMetric(diskBytes, "disk-B/hop")
}

// processCPU is the CPU time the process has used, user and system, all
// its threads.
func processCPU(b *testing.B) time.Duration {
	var r syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &r); err != nil {
		b.Fatal(err)
	}
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}

// spansBytesPerRow merges the spans table's parts and returns its bytes on
// disk per row.
func spansBytesPerRow(ctx context.Context, b *testing.B, s *chsql.Store) float64 {
	if err := s.Conn().Exec(ctx, "OPTIMIZE TABLE "+s.Database()+".spans FINAL", nil); err != nil {
		b.Fatal(err)
	}
	bytes, err := DiskBytes(ctx, s)
	if err != nil {
		b.Fatal(err)
	}
	n, err := s.CountRows(ctx, "spans")
	if err != nil || n == 0 {
		b.Fatalf("spans stored: %d, %v", n, err)
	}
	return float64(bytes["spans"]) / float64(n)
}

// DiskBytes returns the compressed bytes on disk of each table of s's
// database: its active parts, from system.parts.
func DiskBytes(ctx context.Context, s *chsql.Store) (map[string]uint64, error) {
	rows, err := s.Conn().Query(ctx, "SELECT table, toUInt64(sum(bytes_on_disk)) FROM system.parts WHERE active AND database = {db:String} GROUP BY table",
		chsql.Params{chsql.P("db", s.Database())})
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]uint64{}
	for rows.Next() {
		var table string
		var bytes uint64
		if err := rows.Scan(&table, &bytes); err != nil {
			return nil, err
		}
		out[table] = bytes
	}
	return out, rows.Err()
}
