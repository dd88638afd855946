package shapes

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/budgetd/budgetd/budget"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/sim/groundtruth"
)

// proxy starts an uninstrumented HTTP proxy name in front of target: it
// forwards every request with all its headers (traceparent and
// x-request-timeout-ms included), as a plain reverse proxy does, and has no
// OpenTelemetry at all. With timeout > 0 it gives up on target after that
// long and answers 504 itself, like a sidecar with a route timeout. It is
// transparent to the ground truth: the invocation behind it belongs to the
// call in front of it, and its give-up is that call's.
func (n *network) proxy(name, target string, timeout time.Duration) error {
	lis, err := n.listen(name)
	if err != nil {
		return err
	}
	c := n.httpClient(nil, nil)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		out, err := http.NewRequestWithContext(ctx, r.Method, "http://"+target+r.URL.RequestURI(), nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		for k, v := range r.Header {
			out.Header[k] = v
		}
		resp, err := c.Do(out)
		switch {
		case err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
			http.Error(w, "upstream request timeout", http.StatusGatewayTimeout)
			return
		case err != nil:
			http.Error(w, "upstream connect error", http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	})
	n.startHTTP(&http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}, lis)
	return nil
}

// httpPlan is what one request of an HTTP chain does at each hop.
type httpPlan struct {
	a, b, c, d time.Duration
}

// partialSampling: edge (500 ms budget) → gateway → proxy (no
// instrumentation, forwards traceparent and x-request-timeout-ms) → order →
// inventory (its spans are lost before export: sampled out or dropped on
// the way) → db, every hop with package budget's middleware and transport,
// all fast. With inversion, order calls inventory with its own 800 ms
// timeout instead of the remaining budget (budget.Transport with Timeout
// 800 ms on a context.WithoutCancel: it records budget.timeout_ms = 800 and
// sends 800 downstream).
//
// Truth: clean in the healthy variant — budgets decrease along the chain
// and nobody works past a deadline; the gaps (order's SERVER span's parent
// is gateway's CLIENT span across the proxy, db's parent span is missing)
// invent nothing. In the inversion variant: timeout_inversion on order →
// inventory on every request (800 ms against at most 500 ms left), whose
// callee budgetd can only name from server.address since inventory's spans
// are gone; db's reset budget is Ambiguous (its caller's span is missing, so
// budget_reset cannot be judged: DESIGN §5, partial traces). Stripped, the
// 800 ms never fires, so the inversion is Ambiguous.
func partialSampling(inversion bool) func(context.Context, Options) (Result, error) {
	name := "partial_sampling"
	if inversion {
		name = "partial_sampling_inversion"
	}
	return func(ctx context.Context, o Options) (Result, error) {
		count := o.requests(30)
		n := newNetwork(o.Strip)
		plan := plans(13, count, func(_ int, r *rand.Rand) httpPlan {
			return httpPlan{a: uniform(r, 5, 20), b: uniform(r, 5, 20), c: uniform(r, 5, 15), d: uniform(r, 10, 40)}
		})
		err := func() error {
			if _, err := n.httpServe(ctx, "db", httpOpts{budget: inner()}, func(ctx context.Context) error {
				return work(ctx, plan[reqOf(ctx)].d)
			}); err != nil {
				return err
			}
			if _, err := n.httpServeWith(ctx, "inventory", httpOpts{budget: inner(), prov: provOpt{lost: true}}, func(tp *sdktrace.TracerProvider) handlerFunc {
				c := n.httpClient(tp, &budget.Transport{})
				return func(ctx context.Context) error {
					if err := work(ctx, plan[reqOf(ctx)].c); err != nil {
						return err
					}
					_, err := n.httpCall(ctx, c, "inventory", "db", callOpts{})
					return err
				}
			}); err != nil {
				return err
			}
			if _, err := n.httpServeWith(ctx, "order", httpOpts{budget: inner()}, func(tp *sdktrace.TracerProvider) handlerFunc {
				lib := &budget.Transport{}
				co := callOpts{}
				if inversion {
					lib = &budget.Transport{Timeout: 800 * time.Millisecond}
					co = callOpts{detach: true, timeout: 800 * time.Millisecond}
				}
				c := n.httpClient(tp, lib)
				return func(ctx context.Context) error {
					if err := work(ctx, plan[reqOf(ctx)].b); err != nil {
						return err
					}
					_, err := n.httpCall(ctx, c, "order", "inventory", co)
					return err
				}
			}); err != nil {
				return err
			}
			if err := n.proxy("proxy", "order", 0); err != nil {
				return err
			}
			if _, err := n.httpServeWith(ctx, "gateway", httpOpts{budget: inner()}, func(tp *sdktrace.TracerProvider) handlerFunc {
				c := n.httpClient(tp, &budget.Transport{})
				return func(ctx context.Context) error {
					if err := work(ctx, plan[reqOf(ctx)].a); err != nil {
						return err
					}
					_, err := n.httpCall(ctx, c, "gateway", "order", callOpts{via: "proxy"})
					return err
				}
			}); err != nil {
				return err
			}
			if err := n.httpEdge(ctx, 500*time.Millisecond, "gateway"); err != nil {
				return err
			}
			return n.load(ctx, count, 5)
		}()
		return finish(ctx, n, err, func() groundtruth.Truth {
			b := newTruth(name, o.Strip, n.rec).Standard()
			if inversion {
				b.Entries(schema.KindBudgetReset, "db", func(*groundtruth.Invocation) groundtruth.Verdict { return groundtruth.Unsure })
			}
			return b.Truth()
		})
	}
}

// httpSemconv: edge (a 1000 ms client timeout, no budget attributes
// anywhere) → frontend → gateway → sidecar (uninstrumented proxy with a
// 150 ms route timeout that answers 504) → backend. frontend's spans carry
// the attribute names otelhttp v0.72 emits (http.response.status_code,
// http.request.method, server.address); gateway's and backend's are
// renamed to the older conventions (http.status_code, http.method,
// net.peer.name / net.host.name) by an exporter wrapper, as an older
// instrumentation library would record them. backend takes 300 ms on 30 %
// of the requests and ignores cancellation; the sidecar gives up at 150 ms,
// gateway gets its 504 and passes it up.
//
// Truth: orphaned_work on backend wherever it worked ≥ 20 ms after gateway
// stopped waiting (the sidecar's 504), and latency_inversion on gateway →
// backend (backend's p99 of 300 ms against the 150 ms that gateway's side
// waits). The root fails at the same instant as gateway's call, which
// budgetd takes as one deadline: no timeout of gateway's own is estimated
// from those waits, but they show how long gateway waits (the deadline
// wait of docs/attributes.md §3a). Nothing else: the 504s that frontend and
// the edge receive were answered by their callees.
func httpSemconv(ctx context.Context, o Options) (Result, error) {
	count := o.requests(40)
	n := newNetwork(o.Strip)
	plan := plans(17, count, func(i int, r *rand.Rand) httpPlan {
		p := httpPlan{a: uniform(r, 2, 10), b: uniform(r, 2, 10), d: uniform(r, 10, 50)}
		if i%10 < 3 {
			p.d = 300 * time.Millisecond
		}
		return p
	})
	relay := func(code int, err error) error {
		if err == nil && code >= 500 {
			return httpStatus(code)
		}
		return err
	}
	err := func() error {
		if _, err := n.httpServe(ctx, "backend", httpOpts{prov: provOpt{oldSemconv: true}}, func(ctx context.Context) error {
			time.Sleep(plan[reqOf(ctx)].d) // ignores cancellation
			return nil
		}); err != nil {
			return err
		}
		if err := n.proxy("backend-sidecar", "backend", 150*time.Millisecond); err != nil {
			return err
		}
		if _, err := n.httpServeWith(ctx, "gateway", httpOpts{prov: provOpt{oldSemconv: true}}, func(tp *sdktrace.TracerProvider) handlerFunc {
			c := n.httpClient(tp, nil)
			return func(ctx context.Context) error {
				if err := work(ctx, plan[reqOf(ctx)].b); err != nil {
					return err
				}
				return relay(n.httpCall(ctx, c, "gateway", "backend", callOpts{via: "backend-sidecar", proxyTimeout: 150 * time.Millisecond}))
			}
		}); err != nil {
			return err
		}
		if _, err := n.httpServeWith(ctx, "frontend", httpOpts{}, func(tp *sdktrace.TracerProvider) handlerFunc {
			c := n.httpClient(tp, nil)
			return func(ctx context.Context) error {
				if err := work(ctx, plan[reqOf(ctx)].a); err != nil {
					return err
				}
				return relay(n.httpCall(ctx, c, "frontend", "gateway", callOpts{}))
			}
		}); err != nil {
			return err
		}
		if err := n.edgeServe(ctx, edgeOpts{budget: time.Second}, func(tp *sdktrace.TracerProvider) (handlerFunc, error) {
			c := n.httpClient(tp, nil)
			return func(ctx context.Context) error {
				return relay(n.httpCall(ctx, c, "edge", "frontend", callOpts{edge: true}))
			}, nil
		}); err != nil {
			return err
		}
		return n.load(ctx, count, 5)
	}()
	return finish(ctx, n, err, func() groundtruth.Truth {
		b := newTruth("http_semconv", o.Strip, n.rec)
		b.Orphans()
		b.Inversions(false)
		// The sidecar's timer fired on 30 % of the calls: gateway's wait is
		// known to budgetd (as a deadline wait) once it fired MinSamples
		// times.
		b.LatencyAll(false)
		return b.Truth()
	})
}
