package analyze

import (
	"math/rand"
	"strconv"
	"testing"

	"github.com/budgetd/budgetd/schema"
)

// benchTrace builds a trace of about size spans shaped like a busy request:
// a root with a budget fans out to services, each of which queries a
// database; one call in ten fails once and is retried.
func benchTrace(n, size int, r *rand.Rand) []schema.Span {
	b := &specBuilder{}
	root := b.add(sp{svc: "gateway", name: "GET /page", kind: server, start: 0, attrs: attrs(rem(10000), source(schema.SourceEdge))})
	t := 1.0
	for len(b.specs)+3 <= size {
		svc := "svc" + strconv.Itoa(r.Intn(20))
		retry := r.Intn(10) == 0 && len(b.specs)+6 <= size
		for a := 1; a <= 1+btoi(retry); a++ {
			c := sp{parent: root, svc: "gateway", name: "GET /" + svc, kind: client, start: t, end: t + 20,
				attrs: attrs(tmo(1000), maxAttempts(2), backoff(10), peerSvc(svc))}
			if retry && a == 1 {
				c.status = schema.StatusError
			}
			cid := b.add(c)
			s := b.add(sp{parent: cid, svc: svc, name: "GET /" + svc, kind: server, start: t + 1, end: t + 19, attrs: attrs(rem(990))})
			b.add(sp{parent: s, svc: svc, name: "SELECT", kind: client, start: t + 2, end: t + 18, attrs: attrs(tmo(500), schema.Str("db.system.name", "postgresql"))})
			t += 21
		}
	}
	for len(b.specs) < size {
		b.add(sp{parent: root, svc: "gateway", name: "render", kind: internal, start: t, end: t + 1})
	}
	b.setEnd(root, t+2, schema.StatusUnset)
	return build(n, b.specs...)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func BenchmarkTrace1000Spans(b *testing.B) {
	tr := schema.NewTrace(benchTrace(1, 1000, rand.New(rand.NewSource(1))))
	a := New(DefaultConfig())
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		a.Trace(tr, testNow)
	}
	b.ReportMetric(float64(b.N*len(tr.Spans))/b.Elapsed().Seconds(), "spans/s")
}

func BenchmarkTrace10000x10Spans(b *testing.B) {
	r := rand.New(rand.NewSource(2))
	traces := make([]*schema.Trace, 10000)
	spans := 0
	for i := range traces {
		traces[i] = schema.NewTrace(benchTrace(i, 10, r))
		spans += len(traces[i].Spans)
	}
	a := New(DefaultConfig())
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for _, tr := range traces {
			a.Trace(tr, testNow)
		}
	}
	b.ReportMetric(float64(b.N*spans)/b.Elapsed().Seconds(), "spans/s")
}

// BenchmarkDetectors splits the 1,000-span figure into the preparation of the
// trace and each detector.
func BenchmarkDetectors(b *testing.B) {
	tr := schema.NewTrace(benchTrace(1, 1000, rand.New(rand.NewSource(1))))
	cfg := DefaultConfig()
	b.Run("prepare", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			newView(tr, cfg, nil).finish(nil, nil)
		}
	})
	v := newView(tr, cfg, nil)
	v.finish(nil, nil)
	detectors := []struct {
		name string
		run  func()
	}{
		{"timeout_inversion", func() { v.timeoutInversions(testNow, nil) }},
		{"budget_reset", func() { v.budgetResets(testNow, nil) }},
		{"unfunded_retry_policy", func() { v.unfundedRetryPolicies(testNow, nil) }},
		{"orphaned_work", func() { v.orphanedWork(testNow, nil) }},
		{"expired_on_arrival", func() { v.expiredOnArrival(testNow, nil) }},
		{"retry_amplification", func() { v.retryAmplifications(testNow, nil) }},
		{"retry_without_budget", func() { v.retriesWithoutBudget(testNow, func(edgeKey) (float64, bool) { return 5, true }, nil) }},
		{"record_edges", func() { New(cfg).record(v.hops, testNow) }},
	}
	for _, d := range detectors {
		b.Run(d.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				d.run()
			}
		})
	}
	edges := EdgeStatsFromHops(v.hops)
	liCfg := cfg
	liCfg.MinEdgeSamples = 1
	b.Run("latency_inversion", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			LatencyInversions(edges, liCfg, testNow)
		}
	})
}

// BenchmarkManyFailedSiblings analyses a handler that fanned out 5,000
// concurrent calls of one kind, every one failing and none retried:
// grouping them into logical calls must not grow with the square of the
// calls.
func BenchmarkManyFailedSiblings(b *testing.B) {
	specs := []sp{{id: 1, svc: "batch", name: "run", kind: server, start: 0, end: 60000}}
	for k := 0; k < 5000; k++ {
		at := float64(k)
		specs = append(specs, sp{id: 2 + k, parent: 1, svc: "batch", name: "GET", kind: client, start: at, end: at + 50000,
			status: schema.StatusError, attrs: attrs(peerSvc("store"))})
	}
	tr := schema.NewTrace(build(1, specs...))
	cfg := testConfig()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		newView(tr, cfg, nil)
	}
}

// BenchmarkTraceFindings analyses 10-span traces (a root with a 10 s budget
// calling three services, each querying its database) in which 0, 1 or all
// 3 calls wait longer than the root has left: how detection's cost grows
// with the findings per trace (docs/performance.md's cost model).
func BenchmarkTraceFindings(b *testing.B) {
	for _, inverted := range []int{0, 1, 3} {
		b.Run("inverted_calls="+strconv.Itoa(inverted), func(b *testing.B) {
			traces := make([]*schema.Trace, 1000)
			for i := range traces {
				sb := &specBuilder{}
				root := sb.add(sp{svc: "gateway", name: "GET /page", kind: server, start: 0, attrs: attrs(rem(10000), source(schema.SourceEdge))})
				t := 1.0
				for c := range 3 {
					svc := "svc" + strconv.Itoa(c)
					timeout := 1000.0
					if c < inverted {
						timeout = 20000
					}
					cid := sb.add(sp{parent: root, svc: "gateway", name: "GET /" + svc, kind: client, start: t, end: t + 20,
						attrs: attrs(tmo(timeout), peerSvc(svc))})
					s := sb.add(sp{parent: cid, svc: svc, name: "GET /" + svc, kind: server, start: t + 1, end: t + 19, attrs: attrs(rem(990))})
					sb.add(sp{parent: s, svc: svc, name: "SELECT", kind: client, start: t + 2, end: t + 18, attrs: attrs(tmo(500), schema.Str("db.system.name", "postgresql"))})
					t += 21
				}
				sb.setEnd(root, t+2, schema.StatusUnset)
				traces[i] = schema.NewTrace(build(i, sb.specs...))
			}
			a := New(DefaultConfig())
			findings := 0
			for _, tr := range traces {
				findings += len(a.Trace(tr, testNow).Findings)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				for _, tr := range traces {
					a.Trace(tr, testNow)
				}
			}
			b.ReportMetric(float64(findings)/float64(len(traces)), "findings/trace")
			b.ReportMetric(float64(b.N*len(traces)*10)/b.Elapsed().Seconds(), "spans/s")
		})
	}
}
