package sim

import (
	"context"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/budgetd/budgetd/budget"
)

// spanClock is a span processor that hands the recorder what each bound
// span recorded: when it started and ended, as the instrumentation stamped
// it, and its first budget.cancelled event. The ground truth then measures
// a call's give-up and a hop's start, cancellation and end at the very
// instants budgetd reads from the spans, rather than at a clock reading the
// simulator takes before or after them: on a loaded machine the goroutine
// that takes that reading can be descheduled for several milliseconds in
// between, which made the truth and budgetd judge one overrun on different
// figures. (The budget middleware and the simulator's own watcher observe
// one cancellation in two callbacks, which can run milliseconds apart: a
// 0.6 ms overrun after the watcher's reading was 5.0 ms after the span's
// event, a false orphaned_work by the truth's account.)
//
// OnEnd runs synchronously inside span.End, before the span is queued for
// export.
type spanClock struct{ rec *recorder }

var _ sdktrace.SpanProcessor = spanClock{}

func (c spanClock) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

func (c spanClock) OnEnd(s sdktrace.ReadOnlySpan) {
	read := spanReadings{start: s.StartTime(), end: s.EndTime()}
	for _, e := range s.Events() {
		if e.Name == budget.EventCancelled {
			read.cancelled = e.Time
			break
		}
	}
	c.rec.spanEnded(s.SpanContext().SpanID(), read)
}

// spanReadings are the instants a span recorded; cancelled is zero when it
// has no budget.cancelled event.
type spanReadings struct {
	start, end, cancelled time.Time
}

func (c spanClock) Shutdown(context.Context) error   { return nil }
func (c spanClock) ForceFlush(context.Context) error { return nil }

// spanOf is what a bound span records: call attempt id (a CLIENT span) or
// invocation id (a SERVER span), both 1-based.
type spanOf struct {
	call, inv int
}

// bindSpan ties the span of ctx to call attempt call or invocation inv (the
// other 0), so that its end time is recorded when it ends.
func (r *recorder) bindSpan(ctx context.Context, of spanOf) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.spans == nil {
		r.spans = map[trace.SpanID]spanOf{}
	}
	r.spans[sc.SpanID()] = of
}
