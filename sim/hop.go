package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/budgetd/budgetd/budget"
)

// Internal headers that tie a handler invocation to the call attempt that
// caused it, for the ground truth. They are not recorded on spans.
const (
	headerRequest = "X-Sim-Request"
	headerCall    = "X-Sim-Call"
)

// Values of the budget.cancel_source attribute the simulator records itself.
const (
	cancelUpstream         = "upstream"
	cancelCallerDisconnect = "caller_disconnect"
	cancelDeadline         = "deadline"
)

// scaler turns scenario time into real time.
type scaler float64

func (s scaler) d(d time.Duration) time.Duration { return time.Duration(float64(d) * float64(s)) }

// lockedRand is a random source shared by a hop's goroutines.
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func newLockedRand(seed, stream uint64) *lockedRand {
	return &lockedRand{r: rand.New(rand.NewPCG(seed, stream))}
}

func (l *lockedRand) sample(d Dist) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return d.Sample(l.r)
}

func (l *lockedRand) float() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Float64()
}

// sleep waits d, or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// propagators carry the trace context between the hops. They are passed to
// otelhttp explicitly: the global propagator is a no-op, and the simulator
// sets no globals.
var propagators = propagation.TraceContext{}

type attemptKey struct{}

// callKey carries the ground-truth id of a call attempt to the wire.
type callKey struct{}

// invocation is the state of one handler invocation, shared between the
// handler and the wrapper that records it.
type invocation struct {
	req, id  int
	cancelAt time.Time
	served   bool // serve ran: the request was not refused
}

type invocationKey struct{}

// caller makes the calls of a client or hop into the next hop: one logical
// call with its retry policy, each attempt a CLIENT span.
type caller struct {
	policy string
	call   Call // durations already scaled
	callee int  // hop index
	url    string
	client *http.Client
	base   *http.Transport
	rec    *recorder
}

// newCaller builds the HTTP client stack of one caller, outermost first:
// otelhttp (the CLIENT span), the budget attributes (package budget's
// Transport for the deadline policy, fixedTimeout otherwise), then the wire
// (transit delay, timeout classification) and a plain transport.
func newCaller(tp *sdktrace.TracerProvider, policy string, call Call, root bool, callee int, calleeOp, url string, rng *lockedRand, rec *recorder) *caller {
	base := &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true}
	var rt http.RoundTripper = &wire{base: base, transit: call.Transit, rng: rng, rec: rec}
	if policy == PolicyDeadline {
		rt = &budget.Transport{Base: rt, ResponseMargin: call.Margin, Timeout: call.Timeout}
	} else {
		rt = &fixedTimeout{base: rt, call: call, effective: root}
	}
	rt = otelhttp.NewTransport(rt,
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithPropagators(propagators),
		otelhttp.WithSpanNameFormatter(func(string, *http.Request) string { return calleeOp }),
	)
	rt = &spanEnded{base: rt, rec: rec}
	return &caller{policy: policy, call: call, callee: callee, url: url, client: &http.Client{Transport: rt}, base: base, rec: rec}
}

// close releases the caller's idle connections.
func (c *caller) close() { c.base.CloseIdleConnections() }

// do runs the logical call and returns the last attempt's HTTP status (0
// when it got no answer) and error.
func (c *caller) do(ctx context.Context, req, parent int) (int, error) {
	status := 0
	logical := c.rec.newLogical()
	attempt := func(ctx context.Context, n int) error {
		var err error
		status, err = c.attempt(ctx, req, parent, retryPolicy{logical: logical, attempt: n}, n)
		return err
	}
	if c.call.BudgetCheck {
		err := budget.Retry(ctx, budget.RetryPolicy{
			MaxAttempts: c.call.Attempts, Backoff: c.call.Backoff, MinAttempt: c.call.MinAttempt,
		}, attempt)
		return status, err
	}
	var err error
	for n := 1; n <= c.call.Attempts; n++ {
		if n > 1 {
			if werr := sleep(ctx, c.call.Backoff); werr != nil {
				return status, err
			}
		}
		actx := budget.WithAttempt(ctx, budget.Attempt{Number: n, Max: c.call.Attempts, Backoff: c.call.Backoff})
		if err = attempt(actx, n); err == nil || ctx.Err() != nil {
			return status, err
		}
	}
	return status, err
}

// attempt sends one request and reads the answer.
func (c *caller) attempt(ctx context.Context, req, parent int, policy retryPolicy, n int) (int, error) {
	ctx = context.WithValue(ctx, attemptKey{}, n)
	var own time.Duration
	if c.policy != PolicyDeadline {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.call.Timeout)
		defer cancel()
		// The policy is recorded on the CLIENT span (fixedTimeout).
		own, policy.maxAttempts, policy.backoff = c.call.Timeout, c.call.Attempts, c.call.Backoff
	} else if dl, ok := ctx.Deadline(); c.call.Timeout > 0 && (!ok || c.call.Timeout < time.Until(dl)-c.call.Margin) {
		// budget.Transport's cap is a timer of the caller's own where it
		// is shorter than what the budget leaves.
		own = c.call.Timeout
	}
	id := c.rec.startCall(req, parent, c.callee, policy, own, time.Now())
	hr, err := http.NewRequestWithContext(context.WithValue(ctx, callKey{}, id), http.MethodGet, c.url, nil)
	if err != nil {
		c.rec.endCall(id, time.Now())
		return 0, fmt.Errorf("build request: %w", err)
	}
	hr.Header.Set(headerRequest, strconv.Itoa(req))
	hr.Header.Set(headerCall, strconv.Itoa(id))
	resp, err := c.client.Do(hr)
	status := 0
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		status = resp.StatusCode
	}
	// The caller stops waiting here, once the answer is read (when the
	// CLIENT span ends too); an attempt that got no answer was recorded by
	// the wire already.
	c.rec.endCall(id, time.Now())
	if err != nil {
		return 0, err
	}
	if status >= 500 {
		return status, statusError(status)
	}
	return status, nil
}

// statusError is a 5xx answer, which the retry loops retry.
type statusError int

func (e statusError) Error() string {
	return "status " + strconv.Itoa(int(e)) + " " + http.StatusText(int(e))
}

// fixedTimeout records the budget attributes of a call with a fixed
// per-attempt timeout (independent and ladder policies) on the CLIENT span.
// The timeout itself is applied by caller.attempt.
type fixedTimeout struct {
	base http.RoundTripper
	call Call
	// effective records the time the attempt really has (its timeout, or
	// less when the request's deadline is nearer): for the client at the
	// edge, whose timeout is its edge budget.
	effective bool
}

func (t *fixedTimeout) RoundTrip(r *http.Request) (*http.Response, error) {
	timeout := t.call.Timeout
	if dl, ok := r.Context().Deadline(); ok && t.effective {
		timeout = min(timeout, time.Until(dl))
	}
	n, _ := r.Context().Value(attemptKey{}).(int)
	trace.SpanFromContext(r.Context()).SetAttributes(
		attribute.Float64(budget.AttrTimeoutMs, ms(timeout)),
		attribute.Int(budget.AttrAttempt, max(n, 1)),
		attribute.Int(budget.AttrMaxAttempts, t.call.Attempts),
		attribute.Float64(budget.AttrBackoffMs, ms(t.call.Backoff)),
	)
	return t.base.RoundTrip(r)
}

// spanEnded wraps otelhttp's transport: an attempt that got no answer
// ended its CLIENT span inside otelhttp's RoundTrip, so the caller's
// give-up is recorded when that returns, the instant budgetd sees as the
// span's end. On a loaded machine otelhttp's work after the wire gave up
// takes milliseconds.
type spanEnded struct {
	base http.RoundTripper
	rec  *recorder
}

func (t *spanEnded) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if id, ok := r.Context().Value(callKey{}).(int); ok && err != nil {
		t.rec.endCall(id, time.Now())
	}
	return resp, err
}

// wire is the network between two hops: it delays each request by the
// transit time and names the way an attempt ended on its CLIENT span.
type wire struct {
	base    http.RoundTripper
	transit Dist // already scaled
	rng     *lockedRand
	rec     *recorder
}

func (t *wire) RoundTrip(r *http.Request) (*http.Response, error) {
	if id, ok := r.Context().Value(callKey{}).(int); ok {
		t.rec.bindSpan(r.Context(), spanOf{call: id}) // the CLIENT span
	}
	if err := sleep(r.Context(), t.rng.sample(t.transit)); err != nil {
		return nil, t.failed(r, err)
	}
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, t.failed(r, err)
	}
	return resp, nil
}

// failed classifies an attempt that got no answer. A timeout gets
// error.type "timeout" (through otelhttp); a cancellation from above also
// gets the budget.cancelled event with cancel_source=upstream, so budgetd
// knows this client did not get a response and does not mistake the callee
// running on for clock skew.
func (t *wire) failed(r *http.Request, err error) error {
	// The attempt got no answer: the caller gave up (spanEnded records
	// when).
	ctx := r.Context()
	if id, ok := ctx.Value(callKey{}).(int); ok {
		t.rec.gaveUp(id, errors.Is(ctx.Err(), context.DeadlineExceeded))
	}
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return &callError{err: err, kind: "timeout"}
	case errors.Is(ctx.Err(), context.Canceled):
		trace.SpanFromContext(ctx).AddEvent(budget.EventCancelled,
			trace.WithAttributes(attribute.String(budget.AttrCancelSource, cancelUpstream)))
		return &callError{err: err, kind: "cancelled"}
	}
	return err
}

// callError is an attempt that timed out or was cancelled. ErrorType is
// what otelhttp records as error.type.
type callError struct {
	err  error
	kind string
}

func (e *callError) Error() string     { return e.err.Error() }
func (e *callError) Unwrap() error     { return e.err }
func (e *callError) ErrorType() string { return e.kind }
func (e *callError) Timeout() bool     { return e.kind == "timeout" }

// hop is the server of one service of the chain.
type hop struct {
	index   int
	cfg     Hop // durations already scaled
	op      string
	rec     *recorder
	rng     *lockedRand
	next    *caller        // nil for the leaf
	budget  *budget.Server // deadline policy only
	handler http.Handler
	// abort is closed when the run is abandoned: even work detached from
	// its request stops then, so no goroutine outlives Run.
	abort <-chan struct{}
}

// newHop builds a hop's handler stack, outermost first: otelhttp (the
// SERVER span), the recorder of invocations, package budget's middleware for
// the deadline policy, and the simulated work.
func newHop(tp *sdktrace.TracerProvider, index int, cfg Hop, rng *lockedRand, rec *recorder, next *caller, abort <-chan struct{}) (*hop, error) {
	h := &hop{index: index, cfg: cfg, op: cfg.Operation, rec: rec, rng: rng, next: next, abort: abort}
	var inner http.Handler = http.HandlerFunc(h.serve)
	if cfg.Policy == PolicyDeadline {
		srv, err := budget.NewServer(budget.ServerConfig{
			Default: cfg.DefaultBudget,
			Max:     max(cfg.DefaultBudget, time.Hour),
			Min:     cfg.MinBudget,
		})
		if err != nil {
			return nil, fmt.Errorf("hop %s: %w", cfg.Service, err)
		}
		h.budget = srv
		inner = srv.Middleware(inner)
	}
	h.handler = h.recordEnd(otelhttp.NewHandler(h.record(inner), cfg.Operation,
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithPropagators(propagators),
		otelhttp.WithSpanNameFormatter(func(op string, _ *http.Request) string { return op }),
	))
	return h, nil
}

type endKey struct{}

// recordEnd ends the invocation that record started once otelhttp has
// ended its SERVER span: a hop's work ends when its answer is out, which is
// when its span ends and what orphaned_work measures. On a loaded machine
// otelhttp's own work after the handler takes milliseconds.
func (h *hop) recordEnd(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var inv *invocation
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), endKey{}, &inv)))
		if inv != nil {
			h.rec.endInvocation(inv.id, time.Now(), inv.cancelAt, !inv.served)
		}
	})
}

// record notes each invocation's start and the budget it received, and
// hands it to recordEnd, which notes its end. It runs inside the SERVER
// span and outside the budget middleware, so requests the middleware
// refuses are invocations too.
func (h *hop) record(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := strconv.Atoi(r.Header.Get(headerRequest))
		call, _ := strconv.Atoi(r.Header.Get(headerCall))
		received := math.NaN()
		if v, err := strconv.ParseFloat(r.Header.Get(budget.HeaderTimeoutMs), 64); err == nil {
			received = v
		}
		inv := &invocation{req: req}
		inv.id = h.rec.startInvocation(req, h.index, call, received, time.Now())
		h.rec.bindSpan(r.Context(), spanOf{inv: inv.id}) // the SERVER span
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), invocationKey{}, inv)))
		// recordEnd ends it (a request the budget middleware refused never
		// reached serve).
		if end, ok := r.Context().Value(endKey{}).(**invocation); ok {
			*end = inv
			return
		}
		h.rec.endInvocation(inv.id, time.Now(), inv.cancelAt, !inv.served)
	})
}

// serve is the hop's own behaviour: work, then the call into the next hop.
func (h *hop) serve(w http.ResponseWriter, r *http.Request) {
	inv, _ := r.Context().Value(invocationKey{}).(*invocation)
	if inv == nil {
		inv = &invocation{}
	}
	inv.served = true
	ctx := r.Context()
	stopOnCancel := *h.cfg.StopOnCancel
	// A hop that follows its request context observes the cancellation; the
	// deadline policy's middleware observes it in any case (and records the
	// event itself).
	if stopOnCancel || h.budget != nil {
		stop := watchCancel(ctx, func(at time.Time, cause error) {
			inv.cancelAt = at
			if h.budget == nil {
				source := cancelCallerDisconnect
				if errors.Is(cause, context.DeadlineExceeded) {
					source = cancelDeadline
				}
				trace.SpanFromContext(ctx).AddEvent(budget.EventCancelled,
					trace.WithAttributes(attribute.String(budget.AttrCancelSource, source)))
			}
		})
		defer stop()
	}
	if !stopOnCancel {
		var cancel context.CancelFunc
		ctx, cancel = detach(ctx, h.abort)
		defer cancel()
	}

	work, status := h.cfg.Work, http.StatusOK
	if d := h.cfg.Degraded; d != nil && h.rng.float() < d.Fraction {
		work, status = d.Work, d.Status
	}
	if err := sleep(ctx, h.rng.sample(work)); err != nil {
		w.WriteHeader(failureStatus(err))
		return
	}
	if h.next == nil || status != http.StatusOK {
		w.WriteHeader(status)
		return
	}
	if _, err := h.next.do(ctx, inv.req, inv.id); err != nil {
		w.WriteHeader(failureStatus(err))
		return
	}
	w.WriteHeader(http.StatusOK)
}

// detach returns a context with ctx's values that ignores ctx's
// cancellation and deadline, and ends only when abort is closed.
func detach(ctx context.Context, abort <-chan struct{}) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		select {
		case <-abort:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// failureStatus is the answer of a hop whose work or call failed: 504 when
// time ran out, 503 otherwise.
func failureStatus(err error) int {
	var se statusError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &se) && int(se) == http.StatusGatewayTimeout:
		return http.StatusGatewayTimeout
	}
	return http.StatusServiceUnavailable
}

// watchCancel calls record with the instant and cause when ctx ends before
// the returned stop is called. stop waits for record to finish, so its
// effects are visible after stop returns.
func watchCancel(ctx context.Context, record func(at time.Time, cause error)) (stop func()) {
	done := make(chan struct{})
	stopAfter := context.AfterFunc(ctx, func() {
		defer close(done)
		record(time.Now(), ctx.Err())
	})
	return func() {
		if !stopAfter() {
			<-done
			return
		}
		// Done is closed before AfterFunc callbacks start: a handler woken
		// by the cancellation can get here first.
		if ctx.Err() != nil {
			record(time.Now(), ctx.Err())
		}
	}
}
