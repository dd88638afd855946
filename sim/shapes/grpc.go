package shapes

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/budgetd/budgetd/budget"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/sim/groundtruth"
)

// chainPlan is what one request of a gRPC chain does at each hop.
type chainPlan struct {
	gateway, order, db time.Duration
}

// inner is the budget policy of an inner gRPC service: it records the
// budget it received (budget.remaining_ms, budget.source, budget.cancelled)
// and bounds its handler by it. Every call of the scenarios carries a
// deadline, so its Default never applies.
func inner() *budget.Server {
	s, _ := budget.NewServer(budget.DefaultServerConfig())
	return s
}

// grpcChain runs edge → gateway → order → db over gRPC with otelgrpc on
// every hop and package budget recording the budget (the zero GRPCClient:
// grpc-go's native deadline, no margin). The edge gives each request
// 400 ms. With reset, order calls db with
// context.WithTimeout(context.WithoutCancel(ctx), 1000ms).
func grpcChain(ctx context.Context, o Options, name string, reset bool, count int, draw func(int, *rand.Rand) chainPlan) (Result, error) {
	const edgeBudget = 400 * time.Millisecond
	n := newNetwork(o.Strip)
	plan := plans(uint64(len(name)), count, draw)
	lib := &budget.GRPCClient{}
	err := func() error {
		if err := n.grpcServe(ctx, "db", grpcOpts{budget: inner()}, func(ctx context.Context) error {
			return work(ctx, plan[reqOf(ctx)].db)
		}); err != nil {
			return err
		}
		var toDB, toOrder *grpc.ClientConn
		var err error
		if err := n.grpcServeWith(ctx, "order", grpcOpts{budget: inner()}, func(tp *sdktrace.TracerProvider) (handlerFunc, error) {
			toDB, err = n.grpcConn(tp, "db", lib)
			return func(ctx context.Context) error {
				if err := work(ctx, plan[reqOf(ctx)].order); err != nil {
					return err
				}
				co := callOpts{}
				if reset {
					co = callOpts{detach: true, timeout: time.Second}
				}
				return n.grpcCall(ctx, toDB, "order", "db", co)
			}, err
		}); err != nil {
			return err
		}
		if err := n.grpcServeWith(ctx, "gateway", grpcOpts{budget: inner()}, func(tp *sdktrace.TracerProvider) (handlerFunc, error) {
			toOrder, err = n.grpcConn(tp, "order", lib)
			return func(ctx context.Context) error {
				if err := work(ctx, plan[reqOf(ctx)].gateway); err != nil {
					return err
				}
				return n.grpcCall(ctx, toOrder, "gateway", "order", callOpts{})
			}, err
		}); err != nil {
			return err
		}
		if err := n.grpcEdge(ctx, edgeBudget, "gateway", lib); err != nil {
			return err
		}
		return n.load(ctx, count, 5)
	}()
	return finish(ctx, n, err, func() groundtruth.Truth {
		b := newTruth(name, o.Strip, n.rec)
		recorded := !o.Strip
		b.Orphans()
		b.Inversions(recorded)
		if reset && recorded {
			// db receives order's 1000 ms as its budget: more than the
			// request had left (at most 400 ms), so budget_reset on db.
			b.Entries(schema.KindBudgetReset, "db", func(*groundtruth.Invocation) groundtruth.Verdict { return groundtruth.Yes })
		}
		b.LatencyAll(recorded)
		return b.Truth()
	})
}

// grpcDeadline is the recommended design: one 400 ms deadline set at the
// edge, passed on by every hop through grpc-go's native grpc-timeout. A
// degraded db (30 % of requests) would take 600 ms but honours ctx.Done().
//
// Truth: clean. Nobody works past the deadline by more than the noise
// margin (db stops at its propagated deadline, a few hundred µs after the
// edge's), every call's timeout is the deadline it inherited (no
// inversion), nothing resets, nothing retries; db stopping at the same
// deadline as its callers is no latency inversion. Stripped, the same holds.
func grpcDeadline(ctx context.Context, o Options) (Result, error) {
	return grpcChain(ctx, o, "grpc_deadline", false, o.requests(30), func(i int, r *rand.Rand) chainPlan {
		p := chainPlan{gateway: uniform(r, 5, 25), order: uniform(r, 5, 25), db: uniform(r, 10, 60)}
		if i%10 < 3 {
			p.db = 600 * time.Millisecond
		}
		return p
	})
}

// grpcReset is grpc_deadline with order calling db under
// context.WithTimeout(context.WithoutCancel(ctx), 1000ms): it keeps the
// trace and drops the caller's deadline. db takes 700 ms on 35 % of the
// requests and 1300 ms (cut at its own 1000 ms deadline) on 20 %.
//
// Truth, measured in process: orphaned_work on db and on order wherever
// they worked ≥ 20 ms after the earliest caller on their chain stopped
// waiting (the edge at 400 ms); timeout_inversion on order → db on every
// request (1000 ms against less than 400 ms left); budget_reset on db on
// every request when budgets are recorded; latency_inversion on gateway →
// order (order runs on for up to a second after gateway gave up). Stripped:
// timeout_inversion is expected where order → db timed out often enough
// for its 1000 ms to be inferred (and the edge's 400 ms likewise),
// budget_reset is not expected (it needs budget.remaining_ms), and
// latency_inversion on gateway → order is Ambiguous (gateway's timeout is
// the inherited deadline, different on every call, so it cannot be
// inferred).
func grpcReset(ctx context.Context, o Options) (Result, error) {
	return grpcChain(ctx, o, "grpc_reset", true, o.requests(40), func(i int, r *rand.Rand) chainPlan {
		p := chainPlan{gateway: uniform(r, 5, 25), order: uniform(r, 5, 25), db: uniform(r, 10, 60)}
		switch i % 20 {
		case 0, 3, 6, 9, 12, 15, 18:
			p.db = 700 * time.Millisecond
		case 1, 5, 10, 14:
			p.db = 1300 * time.Millisecond
		}
		return p
	})
}

// shardPlan is what one fan-out request does.
type shardPlan struct {
	api   time.Duration
	shard [4]time.Duration
	fail  int // shard call that fails, -1 none
}

// fanout: edge (500 ms budget) → api → 4 concurrent calls of the same
// method of the shard service (same span name, callee and peer), shards
// taking 5–40 ms, 20 % of them 80–150 ms. With fail, on half the requests
// one shard answers UNAVAILABLE at once and api fails the request without
// retrying.
//
// Truth: clean — concurrent siblings are fan-out, not attempts (DESIGN §5),
// so no retry_amplification, retry_without_budget or unfunded_retry_policy;
// nobody works past a deadline.
func fanout(fail bool) func(context.Context, Options) (Result, error) {
	name := "fanout"
	if fail {
		name = "fanout_error"
	}
	return func(ctx context.Context, o Options) (Result, error) {
		count := o.requests(30)
		n := newNetwork(o.Strip)
		plan := plans(7, count, func(i int, r *rand.Rand) shardPlan {
			p := shardPlan{api: uniform(r, 2, 10), fail: -1}
			for i := range p.shard {
				p.shard[i] = uniform(r, 5, 40)
				if r.Float64() < 0.2 {
					p.shard[i] = uniform(r, 80, 150)
				}
			}
			if fail && i%2 == 0 {
				p.fail = r.IntN(4)
			}
			return p
		})
		lib := &budget.GRPCClient{}
		err := func() error {
			if err := n.grpcServe(ctx, "shard", grpcOpts{budget: inner()}, func(ctx context.Context) error {
				p, i := plan[reqOf(ctx)], shardOf(ctx)
				if i == p.fail {
					return status.Error(codes.Unavailable, "shard unavailable")
				}
				return work(ctx, p.shard[i])
			}); err != nil {
				return err
			}
			if err := n.grpcServeWith(ctx, "api", grpcOpts{budget: inner()}, func(tp *sdktrace.TracerProvider) (handlerFunc, error) {
				cc, err := n.grpcConn(tp, "shard", lib)
				return func(ctx context.Context) error {
					if err := work(ctx, plan[reqOf(ctx)].api); err != nil {
						return err
					}
					errs := make([]error, 4)
					var wg sync.WaitGroup
					for i := range 4 {
						wg.Add(1)
						go func() {
							defer wg.Done()
							sctx := metadata.AppendToOutgoingContext(ctx, headerShard, string(rune('0'+i)))
							errs[i] = n.grpcCall(sctx, cc, "api", "shard", callOpts{})
						}()
					}
					wg.Wait()
					return errors.Join(errs...)
				}, err
			}); err != nil {
				return err
			}
			if err := n.grpcEdge(ctx, 500*time.Millisecond, "api", lib); err != nil {
				return err
			}
			return n.load(ctx, count, 5)
		}()
		return finish(ctx, n, err, func() groundtruth.Truth { return newTruth(name, o.Strip, n.rec).Standard().Truth() })
	}
}

// headerShard tells a shard (or a hedged store) which of the concurrent
// calls it serves, for the plan.
const headerShard = "x-shape-shard"

func shardOf(ctx context.Context) int {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(headerShard); len(v) > 0 && len(v[0]) == 1 {
		return int(v[0][0] - '0')
	}
	return 0
}

// hedgePlan is what one hedged request does: how long the primary and the
// hedge take at the store.
type hedgePlan struct {
	primary, hedge time.Duration
}

// hedging: edge (500 ms) → api → store. api sends the request and, when
// no answer came within 50 ms, a second identical one (the hedge,
// concurrent with the first); the first answer wins and the other call's
// context is cancelled. The primary is slow (150–250 ms) on 40 % of the
// requests, the hedge always fast. With ignoreCancel the store sleeps
// through cancellation (time.Sleep): the loser keeps working.
//
// Truth: no retry finding in either variant (hedges are concurrent
// siblings, DESIGN §5). Clean variant: the loser's server stops within the
// noise margin of its cancellation, no orphaned work. hedging_orphan:
// orphaned_work on store wherever the cancelled loser worked ≥ 20 ms after
// its caller stopped waiting (every slow primary).
func hedging(ignoreCancel bool) func(context.Context, Options) (Result, error) {
	name := "hedging"
	if ignoreCancel {
		name = "hedging_orphan"
	}
	return func(ctx context.Context, o Options) (Result, error) {
		count := o.requests(30)
		n := newNetwork(o.Strip)
		plan := plans(11, count, func(i int, r *rand.Rand) hedgePlan {
			p := hedgePlan{primary: uniform(r, 5, 30), hedge: uniform(r, 5, 30)}
			if i%5 < 2 {
				p.primary = uniform(r, 150, 250)
			}
			return p
		})
		lib := &budget.GRPCClient{}
		err := func() error {
			if err := n.grpcServe(ctx, "store", grpcOpts{budget: inner()}, func(ctx context.Context) error {
				p := plan[reqOf(ctx)]
				d := p.primary
				if shardOf(ctx) == 1 {
					d = p.hedge
				}
				if ignoreCancel {
					time.Sleep(d)
					return nil
				}
				return work(ctx, d)
			}); err != nil {
				return err
			}
			if err := n.grpcServeWith(ctx, "api", grpcOpts{budget: inner()}, func(tp *sdktrace.TracerProvider) (handlerFunc, error) {
				cc, err := n.grpcConn(tp, "store", lib)
				return func(ctx context.Context) error {
					return n.hedged(ctx, cc, 50*time.Millisecond)
				}, err
			}); err != nil {
				return err
			}
			if err := n.grpcEdge(ctx, 500*time.Millisecond, "api", lib); err != nil {
				return err
			}
			return n.load(ctx, count, 5)
		}()
		return finish(ctx, n, err, func() groundtruth.Truth { return newTruth(name, o.Strip, n.rec).Standard().Truth() })
	}
}

// hedged calls store, and again after delay without an answer; the first
// answer wins and the other call is cancelled. It waits for both calls to
// return, as a client library does before it reuses their resources.
func (n *network) hedged(ctx context.Context, cc *grpc.ClientConn, delay time.Duration) error {
	type answer struct {
		i   int
		err error
	}
	answers := make(chan answer, 2)
	var cancels [2]context.CancelFunc
	start := func(i int) {
		cctx, cancel := context.WithCancel(ctx)
		cancels[i] = cancel
		cctx = metadata.AppendToOutgoingContext(cctx, headerShard, string(rune('0'+i)))
		go func() { answers <- answer{i, n.grpcCall(cctx, cc, "api", "store", callOpts{})} }()
	}
	start(0)
	started := 1
	t := time.NewTimer(delay)
	defer t.Stop()
	var first answer
	select {
	case first = <-answers:
	case <-t.C:
		start(1)
		started = 2
		first = <-answers
	}
	for i := range started {
		if i != first.i {
			cancels[i]()
		}
	}
	for range started - 1 {
		<-answers
	}
	for i := range started {
		cancels[i]()
	}
	return first.err
}
