package bench

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/budgetd/budgetd/proctest"
)

// TestJaegerStoresWhatItAcknowledges loads the real Jaeger v2 target
// briefly, then restarts Jaeger on the same badger directory with its
// query service and reads one sent trace back: every span of it must be
// there, which is what lets the harness count Jaeger's acknowledged rate
// as its stored rate. A trace id never sent must not be found, so the
// check cannot pass on an answer that finds anything.
func TestJaegerStoresWhatItAcknowledges(t *testing.T) {
	binary := proctest.Tool(t, ".cache/bin/jaeger")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	dir := t.TempDir()

	target, err := StartJaeger(ctx, binary, dir)
	require.NoError(t, err, logOf(dir, "jaeger"))
	load := Requests(4, 50)
	res, err := Drive(ctx, target.Endpoint, load, 50, 2, 0, time.Second, 0)
	require.NoError(t, target.Stop())
	require.NoError(t, err)
	require.Positive(t, res.Spans, "no spans acknowledged; %s", logOf(dir, "jaeger"))
	require.Zero(t, res.Refused, "refused requests; %s", logOf(dir, "jaeger"))

	// Request 0's ids are those of its last send, which was acknowledged
	// (nothing was refused).
	trace, want := firstTrace(load, 0)
	require.NotEmpty(t, want)
	reader, err := StartJaegerQuery(ctx, binary, dir)
	require.NoError(t, err, logOf(dir, "jaeger-query"))
	defer func() { require.NoError(t, reader.Stop()) }()
	got, err := JaegerTraceSpans(ctx, reader.Query, trace.String())
	require.NoError(t, err)
	sort.Strings(got)
	require.Equal(t, want, got, "spans Jaeger stored of trace %s", trace)

	none, err := JaegerTraceSpans(ctx, reader.Query, "0123456789abcdef0123456789abcdef")
	require.NoError(t, err)
	require.Empty(t, none, "a trace never sent")
}

// firstTrace returns the trace of request i's first span and the sorted
// hex ids of that trace's spans in the request.
func firstTrace(l *Load, i int) (pcommon.TraceID, []string) {
	var trace pcommon.TraceID
	var spans []string
	rss := l.reqs[i].Traces().ResourceSpans()
	for r := range rss.Len() {
		sss := rss.At(r).ScopeSpans()
		for s := range sss.Len() {
			ss := sss.At(s).Spans()
			for k := range ss.Len() {
				sp := ss.At(k)
				if trace.IsEmpty() {
					trace = sp.TraceID()
				}
				if sp.TraceID() == trace {
					spans = append(spans, sp.SpanID().String())
				}
			}
		}
	}
	sort.Strings(spans)
	return trace, spans
}

// logOf returns a target's log, for failure messages.
func logOf(dir, name string) string {
	data, err := os.ReadFile(filepath.Join(dir, name+".log"))
	if err != nil {
		return "no log: " + err.Error()
	}
	if len(data) > 8000 {
		data = data[len(data)-8000:]
	}
	return name + ".log:\n" + string(data)
}
