package shapes

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/sim/groundtruth"
)

// Options change how a scenario runs.
type Options struct {
	// Strip removes every budget.* attribute and event and every budget
	// header attribute from the spans before export.
	Strip bool
	// Requests overrides the scenario's request count when > 0.
	Requests int
}

// Result is one scenario run: the spans budgetd received and the truth.
type Result struct {
	Spans []schema.Span
	Truth groundtruth.Truth
}

// Scenario is one trace shape.
type Scenario struct {
	Name string
	// Description says in one line what the shape is and what its truth is.
	Description string
	// Recorded says whether the services record budget attributes, so a
	// stripped run differs from a recorded one.
	Recorded bool
	Run      func(ctx context.Context, o Options) (Result, error)
}

// Scenarios returns every scenario, in documentation order.
func Scenarios() []Scenario {
	return []Scenario{
		{Name: "grpc_deadline", Recorded: true, Run: grpcDeadline,
			Description: "gRPC edge → gateway → order → db, one 400 ms deadline, degraded db honours ctx: clean"},
		{Name: "grpc_reset", Recorded: true, Run: grpcReset,
			Description: "as grpc_deadline, order calls db with WithoutCancel + 1000 ms: orphaned work, inversion, reset"},
		{Name: "async_no_budget", Recorded: true, Run: asyncNoBudget,
			Description: "handler publishes to a queue and returns, consumer runs 200–600 ms later, message has no budget: clean"},
		{Name: "async_budget", Recorded: true, Run: asyncBudget,
			Description: "as async_no_budget, the message carries the request's remaining budget: expired and orphaned consumers"},
		{Name: "fanout", Recorded: true, Run: fanout(false),
			Description: "handler calls 4 shards concurrently, all succeed: clean"},
		{Name: "fanout_error", Recorded: true, Run: fanout(true),
			Description: "as fanout, one shard call fails on half the requests and is not retried: clean"},
		{Name: "hedging", Recorded: true, Run: hedging(false),
			Description: "hedged request after 50 ms, loser cancelled and stops: clean"},
		{Name: "hedging_orphan", Recorded: true, Run: hedging(true),
			Description: "as hedging, the loser's server ignores cancellation: orphaned work"},
		{Name: "partial_sampling", Recorded: true, Run: partialSampling(false),
			Description: "HTTP chain with an uninstrumented proxy and a hop whose spans are lost, budgets decreasing: clean"},
		{Name: "partial_sampling_inversion", Recorded: true, Run: partialSampling(true),
			Description: "as partial_sampling, the hop beyond the gap calls with an 800 ms timeout: timeout inversion"},
		{Name: "http_semconv", Recorded: false, Run: httpSemconv,
			Description: "HTTP chain mixing old and new semconv names, a proxy answers 504 at 150 ms while backend works on: orphaned work"},
	}
}

// uniform draws a duration in [lo, hi] ms.
func uniform(r *rand.Rand, lo, hi int) time.Duration {
	return time.Duration(lo)*time.Millisecond + time.Duration(r.Int64N(int64(hi-lo+1)))*time.Millisecond
}

// plans draws n plans from a generator seeded by seed, so a scenario's
// requests are the same whatever order the goroutines run in. draw gets the
// request index too: scenarios pick the kind of a request (slow, late,
// failing) from it, so each kind's share is exact, and its durations from r.
func plans[T any](seed uint64, n int, draw func(i int, r *rand.Rand) T) []T {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	out := make([]T, n)
	for i := range out {
		out[i] = draw(i, r)
	}
	return out
}

// requests returns o.Requests, or def.
func (o Options) requests(def int) int {
	if o.Requests > 0 {
		return o.Requests
	}
	return def
}

// finish stops the network, collects the spans and builds the truth with
// judge.
func finish(ctx context.Context, n *network, runErr error, judge func() groundtruth.Truth) (Result, error) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	cerr := n.close(sctx)
	if runErr != nil {
		return Result{}, runErr
	}
	if cerr != nil {
		return Result{}, fmt.Errorf("stop services: %w", cerr)
	}
	spans, err := n.tel.sink.spans()
	if err != nil {
		return Result{}, err
	}
	return Result{Spans: spans, Truth: judge()}, nil
}
