package sim

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/budgetd/budgetd/budget"
)

// TestSpanClockTakesTheSpansReadings checks that the truth judges a hop's
// overrun from the instants its SERVER span records (its start, its end
// and its budget.cancelled event), which are what budgetd sees, not from
// the simulator's later readings of the same instants.
func TestSpanClockTakesTheSpansReadings(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms float64) time.Time { return t0.Add(time.Duration(ms * float64(time.Millisecond))) }
	r := newRecorder(1)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spanClock{rec: r}))
	t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })
	tracer := tp.Tracer("t")

	// The client waits until 100. The gateway is cancelled at 40 by its
	// span's event, and answers at 45.6: 5.6 ms after its cancellation, over
	// the 5 ms tolerance. The simulator's watcher read the cancellation at
	// 44.4 (1.2 ms before the end, under it) and the end at 47. The
	// database's span starts at 41, after the gateway gave up, and ends at
	// 47: orphaned in full, 6 ms; the simulator read its start at 43.5
	// (3.5 ms, under the tolerance). Its span records no cancellation, so
	// the watcher's reading of one (46) stands.
	r.request(0, reqRec{traceID: "a", start: at(0), end: at(100), deadline: at(100)})
	call := r.startCall(0, 0, 0, retryPolicy{}, 0, at(0))
	r.endCall(call, at(100))
	gw := r.startInvocation(0, 0, call, math.NaN(), at(1.8))
	ctx, span := tracer.Start(context.Background(), "gateway", trace.WithTimestamp(at(1)), trace.WithSpanKind(trace.SpanKindServer))
	r.bindSpan(ctx, spanOf{inv: gw})
	span.AddEvent(budget.EventCancelled, trace.WithTimestamp(at(40)))
	span.End(trace.WithTimestamp(at(45.6)))
	r.endInvocation(gw, at(47), at(44.4), false)

	dbCall := r.startCall(0, gw, 1, retryPolicy{}, 0, at(2))
	r.endCall(dbCall, at(45))
	db := r.startInvocation(0, 1, dbCall, math.NaN(), at(43.5))
	ctx, span = tracer.Start(context.Background(), "db", trace.WithTimestamp(at(41)), trace.WithSpanKind(trace.SpanKindServer))
	r.bindSpan(ctx, spanOf{inv: db})
	span.End(trace.WithTimestamp(at(47)))
	r.endInvocation(db, at(48), at(46), false)

	require.Equal(t, at(1), r.invs[gw-1].start, "the span's start")
	require.Equal(t, at(40), r.invs[gw-1].cancelAt, "the span's event")
	require.Equal(t, at(45.6), r.invs[gw-1].end, "the span's end")
	require.Equal(t, at(41), r.invs[db-1].start, "the span's start")
	require.Equal(t, at(46), r.invs[db-1].cancelAt, "no event on the span: the watcher's reading")

	tr := r.truth(plan{
		scenario: "t", policy: PolicyDeadline, scale: 1, tolerance: 5 * time.Millisecond, edge: 100 * time.Millisecond,
		rootPath: "c:op", services: []string{"gateway", "db"}, paths: []string{"p1", "p2"},
	})
	orphaned := tr.Requests[0].OrphanedByService
	require.InDelta(t, 5.6, orphaned["gateway"].Real, 1e-9, "45.6 − 40")
	require.InDelta(t, 6, orphaned["db"].Real, 1e-9, "47 − 41: started after the gateway gave up at 40")
}
