package problems

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/schema"
)

func TestFingerprint(t *testing.T) {
	tests := []struct {
		name string
		f    schema.Finding
		want Key
	}{
		{
			name: "call span: the path ends in the callee, the entry before it is the caller",
			f: schema.Finding{Kind: schema.KindTimeoutInversion, Service: "gateway", Operation: "POST", CallerService: "gateway", CalleeService: "order",
				Path: "web:GET /checkout > gateway:GET /checkout > order:POST /order"},
			want: Key{Kind: schema.KindTimeoutInversion, CallerService: "gateway", CallerOperation: "GET /checkout", CalleeService: "order", CalleeOperation: "POST /order"},
		},
		{
			name: "server span: keyed on the same edge as the call into it",
			f: schema.Finding{Kind: schema.KindBudgetReset, Service: "order", Operation: "POST /order", CallerService: "gateway", CalleeService: "order",
				Path: "gateway:GET /checkout > order:POST /order"},
			want: Key{Kind: schema.KindBudgetReset, CallerService: "gateway", CallerOperation: "GET /checkout", CalleeService: "order", CalleeOperation: "POST /order"},
		},
		{
			name: "root span: one element, no caller",
			f:    schema.Finding{Kind: schema.KindOrphanedWork, Service: "order", Operation: "POST /order", Path: "order:POST /order"},
			want: Key{Kind: schema.KindOrphanedWork, CalleeService: "order", CalleeOperation: "POST /order"},
		},
		{
			name: "missing parent: the marker is no caller",
			f:    schema.Finding{Kind: schema.KindOrphanedWork, Service: "order", Operation: "POST /order", Path: "… > order:POST /order"},
			want: Key{Kind: schema.KindOrphanedWork, CalleeService: "order", CalleeOperation: "POST /order"},
		},
		{
			name: "truncated path: the callee comes from the finding, without operation",
			f: schema.Finding{Kind: schema.KindTimeoutInversion, Service: "a", CallerService: "a", CalleeService: "b",
				Path: "a:x > a:y > …"},
			want: Key{Kind: schema.KindTimeoutInversion, CallerService: "a", CallerOperation: "y", CalleeService: "b"},
		},
		{
			name: "a colon in the service name is kept whole when the finding names it",
			f: schema.Finding{Kind: schema.KindTimeoutInversion, CallerService: "shop:v2", CalleeService: "db:primary",
				Path: "shop:v2:GET /cart > db:primary:SELECT"},
			want: Key{Kind: schema.KindTimeoutInversion, CallerService: "shop:v2", CallerOperation: "GET /cart", CalleeService: "db:primary", CalleeOperation: "SELECT"},
		},
		{
			name: "a colon in the operation stays in the operation",
			f: schema.Finding{Kind: schema.KindLatencyInversion, Service: "gw", CallerService: "gw", CalleeService: "api",
				Path: "gw:GET http://a:80/x > api:GET http://api:8080/y"},
			want: Key{Kind: schema.KindLatencyInversion, CallerService: "gw", CallerOperation: "GET http://a:80/x", CalleeService: "api", CalleeOperation: "GET http://api:8080/y"},
		},
		{
			name: "retry amplification adds the path",
			f: schema.Finding{Kind: schema.KindRetryAmplification, CallerService: "svc2", CalleeService: "db",
				Path: "svc0:op0 > svc2:op2 > db:call3"},
			want: Key{Kind: schema.KindRetryAmplification, CallerService: "svc2", CallerOperation: "op2", CalleeService: "db", CalleeOperation: "call3",
				Path: "svc0:op0 > svc2:op2 > db:call3"},
		},
		{
			name: "no path: the finding's services",
			f:    schema.Finding{Kind: schema.KindTimeoutInversion, Service: "a", Operation: "call", CallerService: "a", CalleeService: "b"},
			want: Key{Kind: schema.KindTimeoutInversion, CallerService: "a", CalleeService: "b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, Fingerprint(tt.f))
		})
	}
}

// TestKeyIDIsStable pins an id: the store keeps ids with findings, so a
// change of the hash is a change of every stored problem. The figure is
// printf 'problem\0timeout_inversion\0gateway\0GET /checkout\0order\0POST /order\0\0' | sha256sum
// cut to 32 digits.
func TestKeyIDIsStable(t *testing.T) {
	k := Key{Kind: schema.KindTimeoutInversion, CallerService: "gateway", CallerOperation: "GET /checkout", CalleeService: "order", CalleeOperation: "POST /order"}
	require.Equal(t, "a00da07e0106ecf3ebdbc9e62f756e75", k.ID())
	require.Regexp(t, `^[0-9a-f]{32}$`, k.ID())

	// Every field takes part, and moving a name from one field to the next
	// gives another id.
	variants := []Key{
		{Kind: schema.KindBudgetReset, CallerService: "gateway", CallerOperation: "GET /checkout", CalleeService: "order", CalleeOperation: "POST /order"},
		{Kind: k.Kind, CallerService: "gatewa", CallerOperation: "yGET /checkout", CalleeService: "order", CalleeOperation: "POST /order"},
		{Kind: k.Kind, CallerService: "gateway", CallerOperation: "GET /checkout", CalleeService: "order", CalleeOperation: "POST /order", Path: "x"},
		{Kind: k.Kind, CalleeService: "order", CalleeOperation: "POST /order"},
	}
	seen := map[string]bool{k.ID(): true}
	for _, v := range variants {
		require.False(t, seen[v.ID()], "%+v", v)
		seen[v.ID()] = true
	}
}

func TestFingerprintIgnoresTraceAndTime(t *testing.T) {
	a := schema.Finding{ID: "1", Kind: schema.KindTimeoutInversion, TraceID: "aa", SpanID: "01", CallerService: "gateway", CalleeService: "order",
		Path: "gateway:GET /checkout > order:POST /order", DetectedAt: t0, Evidence: map[string]float64{"remaining_ms": 900}}
	b := a
	b.ID, b.TraceID, b.SpanID, b.DetectedAt = "2", "bb", "07", t0.Add(48*3600e9)
	b.Evidence = map[string]float64{"remaining_ms": 10}
	b.Path = "mobile:checkout > gateway:GET /checkout > order:POST /order" // another way to the same edge
	require.Equal(t, Fingerprint(a).ID(), Fingerprint(b).ID())
}

func TestKeyEdge(t *testing.T) {
	require.Equal(t, "gateway:GET → order:POST", Key{CallerService: "gateway", CallerOperation: "GET", CalleeService: "order", CalleeOperation: "POST"}.Edge())
	require.Equal(t, "order:POST", Key{CalleeService: "order", CalleeOperation: "POST"}.Edge())
	require.Equal(t, "a:x → b", Key{CallerService: "a", CallerOperation: "x", CalleeService: "b"}.Edge())
}
