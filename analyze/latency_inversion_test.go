package analyze

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/schema"
)

// edgeTrace is trace n of gateway → order, where order's server span takes
// latency ms and the gateway's client has the given timeout (none when 0).
// withServer false leaves order uninstrumented.
func edgeTrace(n int, latency, timeout float64, withServer bool) *schema.Trace {
	c := sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 1, end: 2 + latency, attrs: attrs(peerSvc("order"))}
	if timeout > 0 {
		c.attrs = append(c.attrs, tmo(timeout))
	}
	specs := []sp{{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 3 + latency}, c}
	if withServer {
		specs = append(specs, sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 1.5, end: 1.5 + latency})
	}
	return schema.NewTrace(build(n, specs...))
}

func TestLatencyInversion(t *testing.T) {
	repeat := func(n int, v float64) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = v
		}
		return out
	}
	tests := []struct {
		name       string
		latencies  []float64
		timeout    float64
		withServer bool
		at         time.Time
		want       map[string]float64 // evidence; nil for no finding
		severity   schema.Severity
		path       string
	}{
		{
			name:       "one slow request in twenty reaches the timeout",
			latencies:  append(repeat(19, 900), 1200),
			timeout:    1000,
			withServer: true,
			want:       map[string]float64{"timeout_ms": 1000, "p99_ms": 1200, "samples": 20},
			severity:   schema.SeverityWarning,
			path:       "gateway:GET /checkout > order:POST /order",
		},
		{
			name:       "most requests time out",
			latencies:  repeat(20, 1200),
			timeout:    1000,
			withServer: true,
			want:       map[string]float64{"timeout_ms": 1000, "p99_ms": 1200, "samples": 20},
			severity:   schema.SeverityCritical,
			path:       "gateway:GET /checkout > order:POST /order",
		},
		{
			name:       "too few samples",
			latencies:  append(repeat(18, 900), 1200),
			timeout:    1000,
			withServer: true,
		},
		{
			name:       "callee p99 under the timeout",
			latencies:  repeat(20, 900),
			timeout:    1000,
			withServer: true,
		},
		{
			name:       "no timeout recorded",
			latencies:  repeat(20, 1200),
			withServer: true,
		},
		{
			name:       "samples older than the window",
			latencies:  repeat(20, 1200),
			timeout:    1000,
			withServer: true,
			at:         testNow.Add(16 * time.Minute),
		},
		{
			name:      "uninstrumented callee: the call span's own duration",
			latencies: repeat(20, 1000),
			timeout:   1000,
			want:      map[string]float64{"timeout_ms": 1000, "p99_ms": 1000, "samples": 20},
			severity:  schema.SeverityCritical,
			path:      "gateway:GET /checkout > order:POST /order",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := New(testConfig())
			for i, l := range tt.latencies {
				a.Trace(edgeTrace(i+1, l, tt.timeout, tt.withServer), testNow)
			}
			at := testNow
			if !tt.at.IsZero() {
				at = tt.at
			}
			fs := a.EdgeFindings(at)
			if tt.want == nil {
				require.Empty(t, fs)
				return
			}
			require.Len(t, fs, 1)
			f := fs[0]
			require.Equal(t, schema.KindLatencyInversion, f.Kind)
			require.Equal(t, tt.severity, f.Severity)
			require.Empty(t, f.TraceID)
			require.Empty(t, f.SpanID)
			require.Equal(t, tt.path, f.Path)
			require.Equal(t, "gateway", f.CallerService)
			require.Equal(t, "order", f.CalleeService)
			require.Len(t, f.Evidence, 3)
			require.Equal(t, tt.want["timeout_ms"], f.Evidence["timeout_ms"], "timeouts are kept exactly")
			require.Equal(t, tt.want["samples"], f.Evidence["samples"])
			require.InEpsilon(t, tt.want["p99_ms"], f.Evidence["p99_ms"], 0.01)
			require.Equal(t, at, f.DetectedAt)
			require.Equal(t, f.ID, a.EdgeFindings(at)[0].ID, "the id depends on the edge only")
		})
	}
}
