package budget_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/budgetd/budgetd/budget"
)

// A service refuses a request that arrives with less budget than its
// cheapest answer needs, and runs the others under their deadline.
func ExampleServer_Middleware() {
	srv, err := budget.NewServer(budget.ServerConfig{
		Default: 2 * time.Second, // an entry point: requests without a budget get 2 s
		Edge:    true,
		Max:     5 * time.Second,
		Min:     20 * time.Millisecond,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	handler := srv.Middleware(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		dl, _ := r.Context().Deadline()
		fmt.Println("handler runs with at most 500 ms:", time.Until(dl) <= 500*time.Millisecond)
	}))

	for _, sent := range []string{"500", "10"} {
		req := httptest.NewRequest(http.MethodGet, "/checkout", nil)
		req.Header.Set(budget.HeaderTimeoutMs, sent)
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		fmt.Printf("sent %s ms: %d %s\n", sent, rec.Code, http.StatusText(rec.Code))
	}
	// Output:
	// handler runs with at most 500 ms: true
	// sent 500 ms: 200 OK
	// sent 10 ms: 504 Gateway Timeout
}

// A call made with one second left tells the callee what remains after the
// response margin, and a call with nothing left is not sent at all.
func ExampleTransport() {
	callee := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		got, _ := strconv.Atoi(r.Header.Get(budget.HeaderTimeoutMs))
		fmt.Println("callee got at most 950 ms:", got <= 950)
	}))
	defer callee.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: &budget.Transport{Base: base, ResponseMargin: 50 * time.Millisecond}}

	for _, left := range []time.Duration{time.Second, 20 * time.Millisecond} {
		ctx, cancel := context.WithTimeout(context.Background(), left)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, callee.URL, nil)
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println("refused:", errors.Is(err, budget.ErrBudgetExhausted))
		} else {
			_ = resp.Body.Close()
		}
		cancel()
	}
	// Output:
	// callee got at most 950 ms: true
	// refused: true
}

// A retry that the remaining budget cannot pay for is not started.
func ExampleRetry() {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	policy := budget.RetryPolicy{
		MaxAttempts: 3,
		Backoff:     time.Second, // the first wait alone is 500 ms to 1 s
		MinAttempt:  50 * time.Millisecond,
	}
	attempts := 0
	err := budget.Retry(ctx, policy, func(ctx context.Context, attempt int) error {
		attempts++
		return errors.New("503 Service Unavailable")
	})
	fmt.Println("attempts:", attempts)
	fmt.Println("stopped for lack of budget:", errors.Is(err, budget.ErrBudgetExhausted))
	// Output:
	// attempts: 1
	// stopped for lack of budget: true
}

// Wiring with otelhttp: the OpenTelemetry handler and transport go outside
// the budget ones, so the budget attributes land on the SERVER and CLIENT
// spans they start.
func ExampleTransport_otelhttp() {
	srv, err := budget.NewServer(budget.DefaultServerConfig())
	if err != nil {
		fmt.Println(err)
		return
	}
	client := &http.Client{Transport: otelhttp.NewTransport(&budget.Transport{
		Base:           http.DefaultTransport,
		ResponseMargin: 20 * time.Millisecond,
		Timeout:        2 * time.Second, // per attempt, from the dependency's latency
	})}
	mux := http.NewServeMux()
	mux.HandleFunc("/quote", func(w http.ResponseWriter, r *http.Request) {
		// r.Context() carries the deadline; the client spends what is left.
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://pricing.internal/price", nil)
		resp, err := client.Do(req)
		if err != nil {
			w.WriteHeader(http.StatusGatewayTimeout)
			return
		}
		defer resp.Body.Close()
	})
	_ = &http.Server{
		Addr:    "127.0.0.1:8080",
		Handler: otelhttp.NewHandler(srv.Middleware(mux), "quote"),
	}
}

// Wiring with grpc-go and otelgrpc: the server interceptor reads the native
// deadline, the client interceptor shortens it by the response margin, and
// ClientStatsHandler puts the client's figures on otelgrpc's CLIENT span.
func ExampleGRPCClient_UnaryClientInterceptor() {
	srv, err := budget.NewServer(budget.DefaultServerConfig())
	if err != nil {
		fmt.Println(err)
		return
	}
	gs := grpc.NewServer(
		grpc.StatsHandler(otelgrpc.NewServerHandler()),
		grpc.UnaryInterceptor(srv.UnaryServerInterceptor()),
	)
	defer gs.Stop()

	conn, err := grpc.NewClient(net.JoinHostPort("inventory.internal", "443"),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStatsHandler(budget.ClientStatsHandler(otelgrpc.NewClientHandler())),
		grpc.WithUnaryInterceptor(budget.GRPCClient{ResponseMargin: 20 * time.Millisecond}.UnaryClientInterceptor()),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
}
