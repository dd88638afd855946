package shapes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/budgetd/budgetd/budget"
)

// Internal headers (and gRPC metadata keys) that tie a handler invocation to
// the call that caused it and to the request's plan, for the ground truth.
// No instrumentation records them.
const (
	headerCall = "x-shape-call"
	headerReq  = "x-shape-req"
)

// reqKey carries the request index (the plan entry) through a handler.
type reqKey struct{}

func reqOf(ctx context.Context) int {
	n, _ := ctx.Value(reqKey{}).(int)
	return n
}

// network is the services of one scenario run: their listeners, servers,
// client connections, telemetry and the recorder of the ground truth.
type network struct {
	tel   *telemetry
	rec   *recorder
	mu    sync.Mutex
	addrs map[string]string // service name → 127.0.0.1:port
	stops []func(context.Context) error
	conns []*grpc.ClientConn
	https []*http.Transport
}

func newNetwork(strip bool) *network {
	return &network{tel: newTelemetry(strip), rec: &recorder{}, addrs: map[string]string{}}
}

// dial connects to a service by name, the way a resolver would: a call to
// "order" reaches the order service on loopback, and the instrumentation
// records server.address "order" as it would in a deployment.
func (n *network) dial(ctx context.Context, hostport string) (net.Conn, error) {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	n.mu.Lock()
	addr, ok := n.addrs[host]
	n.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("dial %s: no such service", host)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

func (n *network) listen(name string) (net.Listener, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for %s: %w", name, err)
	}
	n.mu.Lock()
	n.addrs[name] = lis.Addr().String()
	n.mu.Unlock()
	return lis, nil
}

// close stops every server (waiting for their handlers, so every span has
// ended), closes the clients and flushes the telemetry.
func (n *network) close(ctx context.Context) error {
	var errs []error
	for _, c := range n.conns {
		_ = c.Close()
	}
	for i := len(n.stops) - 1; i >= 0; i-- {
		if err := n.stops[i](ctx); err != nil {
			errs = append(errs, err)
		}
	}
	for _, t := range n.https {
		t.CloseIdleConnections()
	}
	errs = append(errs, n.tel.shutdown(ctx))
	return errors.Join(errs...)
}

// handlerFunc is a service's work for one call. It returns the gRPC status
// (or HTTP status via httpStatus) the way the service answers.
type handlerFunc func(ctx context.Context) error

// httpStatus is an error that answers with an HTTP status.
type httpStatus int

func (s httpStatus) Error() string { return "status " + strconv.Itoa(int(s)) }

// grpcOpts configure a gRPC service.
type grpcOpts struct {
	budget *budget.Server // records the budget and bounds the handler; nil: pure otelgrpc
	prov   provOpt
}

// grpcMethod is the full method of service name's single unary method.
func grpcMethod(name string) string {
	return "/shapes." + strings.ToUpper(name[:1]) + name[1:] + "/Call"
}

// grpcServe starts a gRPC service with otelgrpc's server stats handler.
// Requests and responses are wrapperspb.StringValue, a message grpc-go's
// proto codec already knows, so no generated code is needed.
func (n *network) grpcServe(ctx context.Context, name string, o grpcOpts, h handlerFunc) error {
	return n.grpcServeWith(ctx, name, o, func(*sdktrace.TracerProvider) (handlerFunc, error) { return h, nil })
}

// grpcServeWith is grpcServe for a handler that needs the service's own
// TracerProvider (for its clients).
func (n *network) grpcServeWith(ctx context.Context, name string, o grpcOpts, mk func(*sdktrace.TracerProvider) (handlerFunc, error)) error {
	tp, err := n.tel.provider(ctx, name, o.prov)
	if err != nil {
		return err
	}
	h, err := mk(tp)
	if err != nil {
		return err
	}
	lis, err := n.listen(name)
	if err != nil {
		return err
	}
	var ints []grpc.UnaryServerInterceptor
	if o.budget != nil {
		ints = append(ints, o.budget.UnaryServerInterceptor())
	}
	ints = append(ints, n.recordUnary(name))
	srv := grpc.NewServer(
		grpc.StatsHandler(endAfterRPC{
			Handler: otelgrpc.NewServerHandler(otelgrpc.WithTracerProvider(tp), otelgrpc.WithPropagators(propagators)),
			rec:     n.rec,
		}),
		grpc.ChainUnaryInterceptor(ints...),
	)
	full := grpcMethod(name)
	svc := strings.TrimPrefix(full[:strings.LastIndexByte(full, '/')], "/")
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: svc,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Call",
			Handler: func(_ any, ctx context.Context, dec func(any) error, in grpc.UnaryServerInterceptor) (any, error) {
				req := new(wrapperspb.StringValue)
				if err := dec(req); err != nil {
					return nil, err
				}
				run := func(ctx context.Context, _ any) (any, error) {
					if err := h(ctx); err != nil {
						return nil, err
					}
					return wrapperspb.String("ok"), nil
				}
				if in == nil {
					return run(ctx, req)
				}
				return in(ctx, req, &grpc.UnaryServerInfo{FullMethod: full}, run)
			},
		}},
	}, struct{}{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	n.stops = append(n.stops, func(context.Context) error {
		srv.GracefulStop()
		<-done
		return nil
	})
	return nil
}

// recordUnary records each invocation for the ground truth, around the
// handler (inside the budget interceptor, which may refuse the call).
func (n *network) recordUnary(service string) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		call, req0 := -1, 0
		if v := md.Get(headerCall); len(v) > 0 {
			call, _ = strconv.Atoi(v[0])
		}
		if v := md.Get(headerReq); len(v) > 0 {
			req0, _ = strconv.Atoi(v[0])
		}
		ctx = context.WithValue(ctx, reqKey{}, req0)
		ctx, id := n.rec.startInv(ctx, service, call, time.Time{})
		resp, err := h(ctx, req)
		n.rec.finishInv(ctx, id)
		return resp, err
	}
}

// grpcConn returns a client connection from caller (whose provider is tp)
// to callee, instrumented with otelgrpc; with budget lib, its interceptor
// records the budget attributes on the CLIENT spans.
func (n *network) grpcConn(tp *sdktrace.TracerProvider, callee string, lib *budget.GRPCClient) (*grpc.ClientConn, error) {
	sh := otelgrpc.NewClientHandler(otelgrpc.WithTracerProvider(tp), otelgrpc.WithPropagators(propagators))
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(n.dial),
		grpc.WithStatsHandler(sh),
	}
	if lib != nil {
		opts[2] = grpc.WithStatsHandler(budget.ClientStatsHandler(sh))
		opts = append(opts, grpc.WithUnaryInterceptor(lib.UnaryClientInterceptor()))
	}
	cc, err := grpc.NewClient("passthrough:///"+callee, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", callee, err)
	}
	n.conns = append(n.conns, cc)
	return cc, nil
}

// callOpts shape one outgoing call.
type callOpts struct {
	// timeout is a timer the caller sets itself for this call; 0: the call
	// is bounded by the deadline it inherits only.
	timeout time.Duration
	// detach drops the caller's deadline and cancellation (keeping the
	// trace): context.WithoutCancel, a chain reset.
	detach bool
	// edge marks the call the entry point makes under its own deadline:
	// that deadline is the call's own (fixed) timeout.
	edge bool
	// via sends an HTTP call to this host (a proxy in front of the callee)
	// instead of the callee's.
	via string
	// proxyTimeout is the timeout of that proxy, which answers 504 when it
	// fires: for the truth, the caller's side timed out.
	proxyTimeout time.Duration
}

// grpcCall makes one call from caller to callee and records it.
func (n *network) grpcCall(ctx context.Context, cc *grpc.ClientConn, caller, callee string, o callOpts) error {
	ctx, cancel, own := bound(ctx, o)
	defer cancel()
	id := n.rec.startCall(ctx, caller, callee, o.timeout, o.edge)
	ctx = metadata.AppendToOutgoingContext(ctx, headerCall, strconv.Itoa(id), headerReq, strconv.Itoa(reqOf(ctx)))
	err := cc.Invoke(ctx, grpcMethod(callee), wrapperspb.String("req"), new(wrapperspb.StringValue))
	n.rec.endCall(id, ctx.Err(), own(ctx, status.Code(err) == codes.DeadlineExceeded))
	return err
}

// bound applies o to ctx. own reports, once the call ended, whether the
// call's own timer (not an inherited deadline) ended it.
func bound(ctx context.Context, o callOpts) (context.Context, context.CancelFunc, func(context.Context, bool) bool) {
	inherited, hasInherited := ctx.Deadline()
	if o.detach {
		ctx = context.WithoutCancel(ctx)
		hasInherited = false
	}
	if o.edge {
		return ctx, func() {}, func(ctx context.Context, deadlineErr bool) bool {
			return errors.Is(ctx.Err(), context.DeadlineExceeded) || deadlineErr
		}
	}
	if o.timeout <= 0 {
		return ctx, func() {}, func(context.Context, bool) bool { return false }
	}
	ownDeadline := time.Now().Add(o.timeout)
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	return ctx, cancel, func(ctx context.Context, deadlineErr bool) bool {
		fired := errors.Is(ctx.Err(), context.DeadlineExceeded) || deadlineErr
		return fired && (!hasInherited || ownDeadline.Before(inherited))
	}
}

// httpOpts configure an HTTP service.
type httpOpts struct {
	budget *budget.Server // records the budget and bounds the handler; nil: none
	prov   provOpt
	// bare serves without any instrumentation (a proxy with no OTel).
	bare bool
}

// httpServe starts an HTTP service, otelhttp outermost (the SERVER span),
// then the budget middleware, then the recorder around the handler.
func (n *network) httpServe(ctx context.Context, name string, o httpOpts, h handlerFunc) (*sdktrace.TracerProvider, error) {
	return n.httpServeWith(ctx, name, o, func(*sdktrace.TracerProvider) handlerFunc { return h })
}

// httpServeWith is httpServe for a handler that needs the service's own
// TracerProvider (nil for a bare service).
func (n *network) httpServeWith(ctx context.Context, name string, o httpOpts, mk func(*sdktrace.TracerProvider) handlerFunc) (*sdktrace.TracerProvider, error) {
	var tp *sdktrace.TracerProvider
	if !o.bare {
		var err error
		if tp, err = n.tel.provider(ctx, name, o.prov); err != nil {
			return nil, err
		}
	}
	h := mk(tp)
	lis, err := n.listen(name)
	if err != nil {
		return nil, err
	}
	var handler http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		call, req := -1, 0
		if v := r.Header.Get(headerCall); v != "" {
			call, _ = strconv.Atoi(v)
		}
		if v := r.Header.Get(headerReq); v != "" {
			req, _ = strconv.Atoi(v)
		}
		rctx := context.WithValue(r.Context(), reqKey{}, req)
		rctx, id := n.rec.startInv(rctx, name, call, time.Time{})
		err := h(rctx)
		defer n.rec.finishInv(rctx, id)
		code := http.StatusOK
		var hs httpStatus
		switch {
		case errors.As(err, &hs):
			code = int(hs)
		case err != nil:
			code = http.StatusInternalServerError
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, http.StatusText(code))
	})
	if !o.bare {
		if o.budget != nil {
			handler = o.budget.Middleware(handler)
		}
		handler = otelhttp.NewHandler(handler, "GET /"+name,
			otelhttp.WithTracerProvider(tp), otelhttp.WithPropagators(propagators),
			otelhttp.WithSpanNameFormatter(func(string, *http.Request) string { return "GET /" + name }))
	}
	srv := &http.Server{Handler: n.endAfter(handler), ReadHeaderTimeout: 5 * time.Second}
	n.startHTTP(srv, lis)
	return tp, nil
}

// endAfter wraps an instrumented HTTP handler so that the invocations it
// serves end when it returns, after otelhttp ended the span (deferEnd).
func (n *network) endAfter(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, e := deferEnd(r.Context())
		h.ServeHTTP(w, r.WithContext(ctx))
		n.rec.endDeferred(e)
	})
}

// endAfterRPC is otelgrpc's server stats handler ending the invocation of
// each RPC after it ended the RPC's span (deferEnd).
type endAfterRPC struct {
	stats.Handler
	rec *recorder
}

func (h endAfterRPC) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	ctx, _ = deferEnd(h.Handler.TagRPC(ctx, info))
	return ctx
}

func (h endAfterRPC) HandleRPC(ctx context.Context, s stats.RPCStats) {
	h.Handler.HandleRPC(ctx, s)
	if _, end := s.(*stats.End); end {
		if e, ok := ctx.Value(invEndKey{}).(*invEnd); ok {
			h.rec.endDeferred(e)
		}
	}
}

func (n *network) startHTTP(srv *http.Server, lis net.Listener) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	n.stops = append(n.stops, func(ctx context.Context) error {
		err := srv.Shutdown(ctx)
		<-done
		if err != nil {
			return fmt.Errorf("shut down http server: %w", err)
		}
		return nil
	})
}

// httpClient returns a client for caller (provider tp, nil for none) that
// reaches services by name, with otelhttp outermost (the CLIENT span) and
// optionally the budget library's Transport inside it.
func (n *network) httpClient(tp *sdktrace.TracerProvider, lib *budget.Transport) *http.Client {
	dial := func(ctx context.Context, _, addr string) (net.Conn, error) { return n.dial(ctx, addr) }
	base := &http.Transport{DialContext: dial, MaxIdleConnsPerHost: 64, DisableCompression: true}
	n.https = append(n.https, base)
	var rt http.RoundTripper = base
	if lib != nil {
		l := *lib
		l.Base = base
		rt = &l
	}
	if tp != nil {
		rt = otelhttp.NewTransport(rt, otelhttp.WithTracerProvider(tp), otelhttp.WithPropagators(propagators))
	}
	return &http.Client{Transport: rt}
}

// httpCall makes one GET from caller to callee and records it. It returns
// the status (0 without an answer).
func (n *network) httpCall(ctx context.Context, c *http.Client, caller, callee string, o callOpts) (int, error) {
	ctx, cancel, own := bound(ctx, o)
	defer cancel()
	ot := o.timeout
	if o.proxyTimeout > 0 {
		ot = o.proxyTimeout
	}
	id := n.rec.startCall(ctx, caller, callee, ot, o.edge)
	host := callee
	if o.via != "" {
		host = o.via
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+"/", nil)
	if err != nil {
		n.rec.endCall(id, nil, false)
		return 0, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set(headerCall, strconv.Itoa(id))
	req.Header.Set(headerReq, strconv.Itoa(reqOf(ctx)))
	resp, err := c.Do(req)
	code := 0
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		code = resp.StatusCode
	}
	var gaveUp error
	if err != nil {
		gaveUp = ctx.Err()
	}
	if o.proxyTimeout > 0 && code == http.StatusGatewayTimeout {
		n.rec.endCall(id, context.DeadlineExceeded, true)
		return code, nil
	}
	n.rec.endCall(id, gaveUp, own(ctx, false))
	return code, err
}

// edgeOpts configure the entry point of a scenario.
type edgeOpts struct {
	// budget is the edge's deadline for each request (set by the budget
	// middleware as policy, budget.source=edge, recorded unless stripped).
	budget time.Duration
	// record records the budget with package budget; false: the edge only
	// sets a context timeout.
	record bool
}

// grpcEdge starts the entry point "edge" (edgeServe, its budget recorded)
// calling callee over gRPC through lib.
func (n *network) grpcEdge(ctx context.Context, edgeBudget time.Duration, callee string, lib *budget.GRPCClient) error {
	return n.edgeServe(ctx, edgeOpts{budget: edgeBudget, record: true}, func(tp *sdktrace.TracerProvider) (handlerFunc, error) {
		cc, err := n.grpcConn(tp, callee, lib)
		return func(ctx context.Context) error {
			return n.grpcCall(ctx, cc, "edge", callee, callOpts{edge: true})
		}, err
	})
}

// httpEdge starts the entry point "edge" (edgeServe, its budget recorded)
// calling callee over HTTP through package budget's Transport.
func (n *network) httpEdge(ctx context.Context, edgeBudget time.Duration, callee string) error {
	return n.edgeServe(ctx, edgeOpts{budget: edgeBudget, record: true}, func(tp *sdktrace.TracerProvider) (handlerFunc, error) {
		c := n.httpClient(tp, &budget.Transport{})
		return func(ctx context.Context) error {
			_, err := n.httpCall(ctx, c, "edge", callee, callOpts{edge: true})
			return err
		}, nil
	})
}

// edgeServe starts the entry point "edge": an otelhttp server whose handler
// runs call under the edge's deadline and answers 504 when it ran out. The
// load generator (an uninstrumented client, a browser) calls it.
func (n *network) edgeServe(ctx context.Context, o edgeOpts, mk func(*sdktrace.TracerProvider) (handlerFunc, error)) error {
	tp, err := n.tel.provider(ctx, "edge", provOpt{})
	if err != nil {
		return err
	}
	call, err := mk(tp)
	if err != nil {
		return err
	}
	lis, err := n.listen("edge")
	if err != nil {
		return err
	}
	var handler http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := strconv.Atoi(r.Header.Get(headerReq))
		ctx := context.WithValue(r.Context(), reqKey{}, req)
		cancel := context.CancelFunc(func() {})
		if !o.record {
			ctx, cancel = context.WithTimeout(ctx, o.budget)
		}
		defer cancel()
		dl, _ := ctx.Deadline()
		n.rec.edgeRequest(ctx, dl.Add(-o.budget), dl)
		ctx, id := n.rec.startEdge(ctx, dl)
		err := call(ctx)
		defer n.rec.finishInv(ctx, id)
		switch {
		case err == nil:
			w.WriteHeader(http.StatusOK)
		case ctx.Err() != nil || status.Code(err) == codes.DeadlineExceeded:
			w.WriteHeader(http.StatusGatewayTimeout)
		default:
			w.WriteHeader(http.StatusBadGateway)
		}
	})
	if o.record {
		srv, err := budget.NewServer(budget.ServerConfig{Default: o.budget, Max: o.budget, Min: time.Millisecond, Edge: true})
		if err != nil {
			return err
		}
		handler = srv.Middleware(handler)
	}
	handler = otelhttp.NewHandler(handler, "GET /checkout",
		otelhttp.WithTracerProvider(tp), otelhttp.WithPropagators(propagators),
		otelhttp.WithSpanNameFormatter(func(string, *http.Request) string { return "GET /checkout" }))
	n.startHTTP(&http.Server{Handler: n.endAfter(handler), ReadHeaderTimeout: 5 * time.Second}, lis)
	return nil
}

// load sends requests 0..count-1 to the edge from `users` concurrent
// users, each one request at a time, and waits for every answer.
func (n *network) load(ctx context.Context, count, users int) error {
	c := n.httpClient(nil, nil)
	next := make(chan int)
	errc := make(chan error, users)
	var wg sync.WaitGroup
	for range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://edge/checkout", nil)
				if err != nil {
					errc <- err
					return
				}
				req.Header.Set(headerReq, strconv.Itoa(i))
				resp, err := c.Do(req)
				if err != nil {
					errc <- fmt.Errorf("request %d: %w", i, err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		}()
	}
	for i := range count {
		select {
		case next <- i:
		case err := <-errc:
			close(next)
			wg.Wait()
			return err
		}
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

// work sleeps d, the simulated work, stopping early when ctx is done (a
// service that honours cancellation). It returns ctx's error then.
func work(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}
