package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/budgetd/budgetd/budget"
)

// Config is how a run is driven: where its spans go and how many requests
// it sends. Start from DefaultConfig.
type Config struct {
	// Endpoint is the OTLP endpoint: host:port (plaintext) or a URL.
	Endpoint string
	// Protocol is ProtocolGRPC or ProtocolHTTP.
	Protocol string
	// Requests, when > 0, overrides the scenario's number of requests.
	Requests int
	// ServicePrefix is put before every service name, so several scenarios
	// can share one budgetd without mixing their paths.
	ServicePrefix string
	// BatchTimeout is the batch span processors' export interval.
	BatchTimeout time.Duration
	// OrphanToleranceMs is the real-time overrun below which the ground
	// truth counts no orphaned work. Keep it equal to budgetd's
	// analyze.skew_tolerance_ms (5 by default) so the two are comparable.
	OrphanToleranceMs float64
	// StripBudget removes every budget.* attribute and event and every
	// budget header attribute from the spans before export: the chain runs
	// the same, but budgetd sees a system without budget instrumentation.
	StripBudget bool
}

// DefaultConfig sends OTLP/gRPC to localhost:4317, exports every 200 ms and
// uses budgetd's default 5 ms tolerance.
func DefaultConfig() Config {
	return Config{
		Endpoint:          "localhost:4317",
		Protocol:          ProtocolGRPC,
		BatchTimeout:      200 * time.Millisecond,
		OrphanToleranceMs: 5,
	}
}

// Validate reports every setting that cannot work.
func (c Config) Validate() error {
	var errs []error
	if c.Endpoint == "" {
		errs = append(errs, errors.New("sim: the OTLP endpoint (--otlp) must be set"))
	}
	if c.Protocol != ProtocolGRPC && c.Protocol != ProtocolHTTP {
		errs = append(errs, fmt.Errorf("sim: the OTLP protocol (--otlp-protocol) must be grpc or http, not %q", c.Protocol))
	}
	if c.Requests < 0 {
		errs = append(errs, fmt.Errorf("sim: the number of requests (--requests) must be >= 0, got %d", c.Requests))
	}
	if c.BatchTimeout <= 0 {
		errs = append(errs, fmt.Errorf("sim: the batch timeout must be > 0, got %v", c.BatchTimeout))
	}
	if math.IsNaN(c.OrphanToleranceMs) || c.OrphanToleranceMs < 0 {
		errs = append(errs, fmt.Errorf("sim: the orphan tolerance must be >= 0 ms, got %v", c.OrphanToleranceMs))
	}
	return errors.Join(errs...)
}

// abortGrace bounds how long an abandoned run waits for its handlers.
const abortGrace = 10 * time.Second

// Settings are what Run is given rather than configured with.
type Settings struct {
	Logger *slog.Logger // nil: discard
}

// Run starts the scenario's chain on loopback, sends its requests through
// it, waits until every hop has stopped working (orphaned work included),
// flushes and shuts down every TracerProvider, and returns what it
// observed.
//
// The error is non-nil when the chain could not be started, or when spans
// could not be exported; in the latter case the Truth is returned as well
// (it is what happened, whether or not budgetd saw it). When ctx ends, no
// further requests are sent, the servers are closed and the truth covers
// the requests that finished.
func Run(ctx context.Context, sc Scenario, cfg Config, set Settings) (*Truth, error) {
	// A scenario built in code gets the defaults a parsed one has.
	sc = sc.withDefaults()
	if err := errors.Join(cfg.Validate(), sc.Validate()); err != nil {
		return nil, err
	}
	log := set.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	n := sc.Requests
	if cfg.Requests > 0 {
		n = cfg.Requests
	}
	c, err := startChain(ctx, sc, cfg, n)
	if err != nil {
		return nil, err
	}
	log.Info("sim chain started", "scenario", sc.Name, "hops", len(c.servers), "requests", n, "time_scale", sc.TimeScale)

	c.drive(ctx, n, sc.Concurrency)
	err = c.stop(ctx)
	if ctx.Err() != nil {
		err = errors.Join(fmt.Errorf("run %s: stopped early: %w", sc.Name, ctx.Err()), err)
	}
	t := c.rec.truth(c.plan)
	t.Spans = SpanCounts{Exported: c.spans.exported.Load(), Failed: c.spans.failed.Load()}
	if t.Spans.Failed > 0 {
		lost := fmt.Errorf("export spans: %d of %d spans were not accepted by %s", t.Spans.Failed, t.Spans.Failed+t.Spans.Exported, cfg.Endpoint)
		if err != nil {
			lost = fmt.Errorf("%w: %w", lost, err)
		}
		err = lost
	}
	log.Info("sim chain stopped", "scenario", sc.Name, "spans", t.Spans.Exported)
	return t, err
}

// chain is a running scenario.
type chain struct {
	rec       *recorder
	plan      plan
	spans     *spanCounter
	providers []*sdktrace.TracerProvider // client first, then each hop
	servers   []*http.Server             // per hop, from the edge down
	served    sync.WaitGroup
	abort     chan struct{} // closed when the run is abandoned
	client    *caller
	callers   []*caller // callers[i] calls hop i: the client, then each hop but the leaf
	think     Dist      // already scaled
	thinkRand *lockedRand
	tracer    trace.Tracer
	edge      time.Duration
	rootOp    string
}

// startChain listens on a loopback port per hop, builds every provider,
// handler and client, and starts serving.
func startChain(ctx context.Context, sc Scenario, cfg Config, n int) (_ *chain, err error) {
	scale := scaler(sc.TimeScale)
	c := &chain{rec: newRecorder(n), spans: &spanCounter{}, abort: make(chan struct{})}
	listeners := make([]net.Listener, len(sc.Hops))
	defer func() {
		if err != nil {
			for _, l := range listeners {
				if l != nil {
					_ = l.Close()
				}
			}
			_ = c.shutdownProviders(context.WithoutCancel(ctx))
		}
	}()
	for i := range listeners {
		if listeners[i], err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("listen for hop %s: %w", sc.Hops[i].Service, err)
		}
	}
	url := func(i int) string { return "http://" + listeners[i].Addr().String() + "/" }

	cl := sc.Client
	clientSvc := cfg.ServicePrefix + cl.Service
	clientTP, err := newProvider(ctx, cfg, clientSvc, c.spans, c.rec)
	if err != nil {
		return nil, err
	}
	c.providers = append(c.providers, clientTP)
	c.plan = plan{
		scenario: sc.Name, policy: sc.Policy, scale: sc.TimeScale,
		tolerance: time.Duration(cfg.OrphanToleranceMs * float64(time.Millisecond)),
		edge:      scale.d(cl.EdgeBudget), rootPath: clientSvc + ":" + cl.Operation,
		client: clientSvc, stripped: cfg.StripBudget,
	}
	c.edge, c.rootOp = scale.d(cl.EdgeBudget), cl.Operation
	c.think, c.thinkRand = scaleDist(cl.Think, scale), newLockedRand(sc.Seed, 1<<32)
	c.tracer = clientTP.Tracer("github.com/budgetd/budgetd/sim")

	path := c.plan.rootPath
	hops := make([]Hop, len(sc.Hops))
	for i, h := range sc.Hops {
		hops[i] = scaleHop(h, scale)
		path += " > " + cfg.ServicePrefix + h.Service + ":" + h.Operation
		c.plan.services = append(c.plan.services, cfg.ServicePrefix+h.Service)
		c.plan.resets = append(c.plan.resets, hops[i].Policy == PolicyDeadline)
		c.plan.paths = append(c.plan.paths, path)
	}
	c.client = newCaller(clientTP, cl.Policy, scaleCall(cl.Call, scale), true, 0, hops[0].Operation, url(0),
		newLockedRand(sc.Seed, 0), c.rec)
	c.callers = append(c.callers, c.client)

	for i, h := range hops {
		tp, err := newProvider(ctx, cfg, c.plan.services[i], c.spans, c.rec)
		if err != nil {
			return nil, err
		}
		c.providers = append(c.providers, tp)
		rng := newLockedRand(sc.Seed, uint64(i+1))
		var next *caller
		if h.Call != nil {
			next = newCaller(tp, h.Policy, *h.Call, false, i+1, hops[i+1].Operation, url(i+1), rng, c.rec)
			c.callers = append(c.callers, next)
		}
		hp, err := newHop(tp, i, h, rng, c.rec, next, c.abort)
		if err != nil {
			return nil, err
		}
		c.servers = append(c.servers, &http.Server{Handler: hp.handler, ReadHeaderTimeout: 10 * time.Second})
	}
	for i, srv := range c.servers {
		c.served.Go(func() { _ = srv.Serve(listeners[i]) })
	}
	return c, nil
}

// scaleHop returns h with every duration in real time.
func scaleHop(h Hop, s scaler) Hop {
	h.DefaultBudget, h.MinBudget = s.d(h.DefaultBudget), s.d(h.MinBudget)
	h.Work = scaleDist(h.Work, s)
	if h.Degraded != nil {
		d := *h.Degraded
		d.Work = scaleDist(d.Work, s)
		h.Degraded = &d
	}
	if h.Call != nil {
		call := scaleCall(*h.Call, s)
		h.Call = &call
	}
	return h
}

func scaleCall(c Call, s scaler) Call {
	c.Timeout, c.Backoff, c.MinAttempt, c.Margin = s.d(c.Timeout), s.d(c.Backoff), s.d(c.MinAttempt), s.d(c.Margin)
	c.Transit = scaleDist(c.Transit, s)
	return c
}

func scaleDist(d Dist, s scaler) Dist {
	d.Value, d.Min, d.Max, d.Mean, d.StdDev, d.P50, d.P99 =
		s.d(d.Value), s.d(d.Min), s.d(d.Max), s.d(d.Mean), s.d(d.StdDev), s.d(d.P50), s.d(d.P99)
	return d
}

// drive sends n requests with at most concurrency in flight, until ctx ends.
func (c *chain) drive(ctx context.Context, n, concurrency int) {
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range min(concurrency, n) {
		wg.Go(func() {
			for i := range jobs {
				if sleep(ctx, c.thinkRand.sample(c.think)) == nil {
					c.request(ctx, i)
				}
			}
		})
	}
send:
	for i := range n {
		select {
		case jobs <- i:
		case <-ctx.Done():
			break send
		}
	}
	close(jobs)
	wg.Wait()
}

// request is one request of the client: a root span carrying the edge
// budget, and the call into the first hop under it.
func (c *chain) request(ctx context.Context, i int) {
	if ctx.Err() != nil {
		return
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, c.edge)
	defer cancel()
	ctx, span := c.tracer.Start(ctx, c.rootOp, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		attribute.Float64(budget.AttrRemainingMs, ms(c.edge)),
		attribute.String(budget.AttrSource, budget.SourceEdge),
	))
	status, err := c.client.do(ctx, i, 0)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	end := time.Now()
	// The latency and the root deadline are taken from the root span's own
	// clock readings, which are what budgetd sees.
	if ro, ok := span.(sdktrace.ReadOnlySpan); ok {
		start, end = ro.StartTime(), ro.EndTime()
	}
	c.rec.request(i, reqRec{
		traceID: span.SpanContext().TraceID().String(),
		start:   start, end: end, deadline: start.Add(c.edge),
		status: status, success: err == nil && status == http.StatusOK,
	})
}

// stop shuts the servers down from the edge to the leaf, each waiting for
// its handlers, so the work that outlives its callers is finished and
// recorded before the providers flush; then it flushes and shuts down every
// provider. When ctx ends first, the run is abandoned: all work, detached
// or not, is stopped, and the servers are shut down within a grace period.
func (c *chain) stop(ctx context.Context) error {
	var errs []error
	for i, srv := range c.servers {
		// Hop i's only caller has finished (the client, or hop i−1 whose
		// server is already shut down): close its idle connections, which
		// Shutdown would otherwise wait for when they never carried a
		// request (a connection dialled for a request that another one
		// served is idle at the client but new at the server).
		c.callers[i].close()
		if err := srv.Shutdown(ctx); err != nil {
			break
		}
	}
	if ctx.Err() != nil {
		close(c.abort)
		gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortGrace)
		for i, srv := range c.servers {
			c.callers[i].close()
			if err := srv.Shutdown(gctx); err != nil {
				errs = append(errs, fmt.Errorf("stop hop server: %w", err))
				_ = srv.Close()
			}
		}
		cancel()
	}
	c.served.Wait()
	for _, cl := range c.callers {
		cl.close()
	}
	// Flushing must happen even when ctx has ended: the spans are the point.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	errs = append(errs, c.shutdownProviders(fctx))
	return errors.Join(errs...)
}

// shutdownProviders flushes and shuts down every provider. It returns the
// first error only: the providers share an endpoint, so their errors are
// the same.
func (c *chain) shutdownProviders(ctx context.Context) error {
	var first error
	for _, tp := range c.providers {
		if err := tp.ForceFlush(ctx); err != nil && first == nil {
			first = fmt.Errorf("flush spans: %w", err)
		}
		if err := tp.Shutdown(ctx); err != nil && first == nil {
			first = fmt.Errorf("shut down tracer provider: %w", err)
		}
	}
	return first
}
