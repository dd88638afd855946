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
// overrun from the instants its SERVER span records (its end and its
// budget.cancelled event), not from the simulator's later readings of the
// same instants, which is what budgetd sees.
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
	// 44.4 (1.2 ms before the end, under it) and the end at 47; the
	// database, whose span records no cancellation, keeps the watcher's.
	r.request(0, reqRec{traceID: "a", start: at(0), end: at(100), deadline: at(100)})
	call := r.startCall(0, 0, 0, retryPolicy{}, 0, at(0))
	r.endCall(call, at(100))
	gw := r.startInvocation(0, 0, call, math.NaN(), at(1))
	ctx, span := tracer.Start(context.Background(), "gateway", trace.WithTimestamp(at(1)), trace.WithSpanKind(trace.SpanKindServer))
	r.bindSpan(ctx, spanOf{inv: gw})
	span.AddEvent(budget.EventCancelled, trace.WithTimestamp(at(40)))
	span.End(trace.WithTimestamp(at(45.6)))
	r.endInvocation(gw, at(47), at(44.4), false)

	dbCall := r.startCall(0, gw, 1, retryPolicy{}, 0, at(2))
	r.endCall(dbCall, at(45))
	db := r.startInvocation(0, 1, dbCall, math.NaN(), at(3))
	ctx, span = tracer.Start(context.Background(), "db", trace.WithTimestamp(at(3)), trace.WithSpanKind(trace.SpanKindServer))
	r.bindSpan(ctx, spanOf{inv: db})
	span.End(trace.WithTimestamp(at(50)))
	r.endInvocation(db, at(51), at(20), false)

	require.Equal(t, at(40), r.invs[gw-1].cancelAt, "the span's event")
	require.Equal(t, at(45.6), r.invs[gw-1].end, "the span's end")
	require.Equal(t, at(20), r.invs[db-1].cancelAt, "no event on the span: the watcher's reading")

	tr := r.truth(plan{
		scenario: "t", policy: PolicyDeadline, scale: 1, tolerance: 5 * time.Millisecond, edge: 100 * time.Millisecond,
		rootPath: "c:op", services: []string{"gateway", "db"}, paths: []string{"p1", "p2"},
	})
	orphaned := tr.Requests[0].OrphanedByService
	require.InDelta(t, 5.6, orphaned["gateway"].Real, 1e-9, "45.6 − 40")
	require.InDelta(t, 30, orphaned["db"].Real, 1e-9, "50 − 20")
}
