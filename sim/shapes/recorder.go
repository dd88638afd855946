package shapes

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/budgetd/budgetd/sim/groundtruth"
)

// recorder notes, from inside the services, every call and every handler
// invocation of one scenario run. It is safe for concurrent use.
type recorder struct {
	mu  sync.Mutex
	log groundtruth.Log
}

type invKey struct{}

// edgeRequest records a request sent at the edge from ctx, which holds its
// root span.
func (r *recorder) edgeRequest(ctx context.Context, start, deadline time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log.Requests = append(r.log.Requests, &groundtruth.Request{Trace: traceOf(ctx), Start: start, Deadline: deadline})
}

func traceOf(ctx context.Context) string {
	return trace.SpanContextFromContext(ctx).TraceID().String()
}

// startCall records the start of a call from the invocation in ctx (or the
// edge) to callee, and returns its id.
func (r *recorder) startCall(ctx context.Context, caller, callee string, ownTimeout time.Duration, edge bool) int {
	parent := -1
	if p, ok := ctx.Value(invKey{}).(int); ok {
		parent = p
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	start := time.Now()
	if dl, ok := ctx.Deadline(); ok && edge {
		// The edge's call is timed by the deadline itself: measured from
		// the same instant as its start, the two are one clock.
		ownTimeout = dl.Sub(start)
	}
	r.log.Calls = append(r.log.Calls, &groundtruth.Call{
		Trace: traceOf(ctx), Caller: caller, Callee: callee, Parent: parent,
		Start: start, OwnTimeout: ownTimeout, Logical: -1,
	})
	return len(r.log.Calls) - 1
}

// endCall records that the caller stopped waiting for call id.
func (r *recorder) endCall(id int, ctxErr error, timerFired bool) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.log.Calls[id]
	c.End, c.TimerFired = now, timerFired
	c.GaveUp = ctxErr != nil
	c.TimedOut = errors.Is(ctxErr, context.DeadlineExceeded)
}

// startInv records that service started handling call (-1 for a message)
// and returns ctx carrying the invocation, for the calls it makes.
func (r *recorder) startInv(ctx context.Context, service string, call int, msgDeadline time.Time) (context.Context, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log.Invs = append(r.log.Invs, &groundtruth.Invocation{
		Trace: traceOf(ctx), Service: service, Call: call, Start: time.Now(), MsgDeadline: msgDeadline,
	})
	id := len(r.log.Invs) - 1
	return context.WithValue(ctx, invKey{}, id), id
}

// startEdge records the entry point's own invocation, whose deadline is
// the edge budget.
func (r *recorder) startEdge(ctx context.Context, deadline time.Time) (context.Context, int) {
	ctx, id := r.startInv(ctx, "edge", -1, deadline)
	r.mu.Lock()
	r.log.Invs[id].Edge = true
	r.mu.Unlock()
	return ctx, id
}

// invEnd carries, from the handler to the code that wraps its
// instrumentation, the invocation whose end that outer code records (-1:
// none yet, e.g. a call the budget interceptor refused).
type invEnd struct{ id atomic.Int64 }

type invEndKey struct{}

// deferEnd returns ctx carrying a fresh invEnd: an invocation started
// below it is ended by endDeferred, after the instrumentation around the
// handler (otelhttp, otelgrpc) has ended its span, not when the handler
// returns. A server's work ends when its answer is out, which is when its
// span ends and what orphaned_work measures.
func deferEnd(ctx context.Context) (context.Context, *invEnd) {
	e := &invEnd{}
	e.id.Store(-1)
	return context.WithValue(ctx, invEndKey{}, e), e
}

// finishInv ends invocation id now, or leaves it to endDeferred when ctx
// came through deferEnd.
func (r *recorder) finishInv(ctx context.Context, id int) {
	if e, ok := ctx.Value(invEndKey{}).(*invEnd); ok {
		e.id.Store(int64(id))
		return
	}
	r.endInv(id, false)
}

// endDeferred ends the invocation finishInv left to e, if any.
func (r *recorder) endDeferred(e *invEnd) {
	if id := e.id.Load(); id >= 0 {
		r.endInv(int(id), false)
	}
}

// endInv records that invocation id stopped working.
func (r *recorder) endInv(id int, rejected bool) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log.Invs[id].End, r.log.Invs[id].Rejected = now, rejected
}

// newTruth starts the ground truth of a finished run of scenario name from
// what r observed.
func newTruth(name string, strip bool, r *recorder) *groundtruth.Builder {
	r.mu.Lock()
	defer r.mu.Unlock()
	log := groundtruth.Log{
		Requests: append([]*groundtruth.Request(nil), r.log.Requests...),
		Calls:    append([]*groundtruth.Call(nil), r.log.Calls...),
		Invs:     append([]*groundtruth.Invocation(nil), r.log.Invs...),
	}
	return groundtruth.New(name, strip, &log)
}
