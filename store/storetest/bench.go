package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store/chsql"
)

// SpanBatch returns n realistic spans: traces of 10 spans, 15 attributes
// each (budget attributes among them), one event on every fifth span.
func SpanBatch(seed uint64, n int) []schema.Span {
	r := rand.New(rand.NewPCG(seed, 42))
	services := []string{"gateway", "order", "pricing", "inventory", "db"}
	spans := make([]schema.Span, n)
	start := uint64(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	for i := range spans {
		var t schema.TraceID
		var s, p schema.SpanID
		t[0], t[8], t[15] = byte(seed), byte(i/10>>8), byte(i/10)
		for j := range t[1:8] {
			t[1+j] = byte(r.Uint32())
		}
		for j := range s {
			s[j] = byte(r.Uint32())
		}
		if i%10 != 0 {
			p = spans[i-1].SpanID
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

// BenchmarkWriteSpans measures batch-write throughput of spans: one
// WriteSpans call of batchSize spans per iteration, reported as rows/s.
func BenchmarkWriteSpans(b *testing.B, open func(ctx context.Context, database string) (*chsql.Store, error), batchSize int) {
	ctx := context.Background()
	db := fmt.Sprintf("bench_%d", time.Now().UnixNano())
	s, err := open(ctx, db)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = s.Conn().Exec(ctx, "DROP DATABASE IF EXISTS "+db, nil)
		_ = s.Close()
	}()
	batches := make([][]schema.Span, 8)
	for i := range batches {
		batches[i] = SpanBatch(uint64(i+1), batchSize)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if err := s.WriteSpans(ctx, fmt.Sprintf("bench-%d", i), batches[i%len(batches)]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*batchSize)/b.Elapsed().Seconds(), "rows/s")
}
