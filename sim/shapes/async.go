package shapes

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/budgetd/budgetd/budget"
	"github.com/budgetd/budgetd/sim/groundtruth"
)

// message is what the in-process queue carries: headers (the trace context
// and, with a budget, the deadline) and the plan index.
type message struct {
	headers   map[string]string
	req       int
	published time.Time
}

// headerDeadline carries the request's absolute deadline (Unix epoch ms)
// in a message, the way x-request-deadline does for HTTP.
const headerDeadline = "x-request-deadline"

// queue is a Go channel instrumented by hand per the OpenTelemetry
// messaging semantic conventions: a PRODUCER span "orders publish" whose
// context is injected into the message headers (TraceContext), and on the
// consumer a CONSUMER span "orders process" whose parent is extracted from
// the headers, with a link to the producer span as well.
type queue struct {
	name     string
	ch       chan message
	producer trace.Tracer
	consumer trace.Tracer
	wg       sync.WaitGroup
}

func messagingAttrs(q, op string) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("messaging.system", "go_channel"),
		attribute.String("messaging.destination.name", q),
		attribute.String("messaging.operation.type", op),
		attribute.String("messaging.operation.name", op),
	}
}

// publish sends a message from ctx (the handler's), with the deadline of ctx
// in the headers when carryBudget.
func (q *queue) publish(ctx context.Context, carryBudget bool) {
	ctx, span := q.producer.Start(ctx, q.name+" publish",
		trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(messagingAttrs(q.name, "publish")...))
	defer span.End()
	h := map[string]string{}
	propagators.Inject(ctx, propagation.MapCarrier(h))
	if dl, ok := ctx.Deadline(); ok && carryBudget {
		h[headerDeadline] = strconv.FormatInt(dl.UnixMilli(), 10)
	}
	q.ch <- message{headers: h, req: reqOf(ctx), published: time.Now()}
}

// asyncPlan is what one request of an async scenario does.
type asyncPlan struct {
	api         time.Duration
	delay, work time.Duration // queue lag before processing starts; processing
}

// runAsync: edge (300 ms budget, recorded) → api over HTTP (package budget
// middleware and transport); api works 5–20 ms, publishes to the queue and
// answers 202 at once. The worker service consumes each message after its
// planned lag and processes it for its planned time, ignoring any
// deadline (it does not check the budget).
func runAsync(ctx context.Context, o Options, name string, carryBudget bool, count int, draw func(int, *rand.Rand) asyncPlan) (Result, error) {
	n := newNetwork(o.Strip)
	plan := plans(uint64(len(name))+3, count, draw)
	err := func() error {
		workerTP, err := n.tel.provider(ctx, "worker", provOpt{})
		if err != nil {
			return err
		}
		q := &queue{name: "orders", ch: make(chan message, 1024), consumer: workerTP.Tracer("shapes/queue")}
		q.wg.Add(1)
		go n.consume(q, plan, carryBudget)
		// Registered first so it stops last, once api has published all.
		n.stops = append(n.stops, func(context.Context) error {
			close(q.ch)
			q.wg.Wait()
			return nil
		})
		if _, err := n.httpServeWith(ctx, "api", httpOpts{budget: inner()}, func(tp *sdktrace.TracerProvider) handlerFunc {
			q.producer = tp.Tracer("shapes/queue")
			return func(ctx context.Context) error {
				if err := work(ctx, plan[reqOf(ctx)].api); err != nil {
					return err
				}
				q.publish(ctx, carryBudget)
				return nil
			}
		}); err != nil {
			return err
		}
		if err := n.httpEdge(ctx, 300*time.Millisecond, "api"); err != nil {
			return err
		}
		return n.load(ctx, count, 5)
	}()
	return finish(ctx, n, err, func() groundtruth.Truth { return newTruth(name, o.Strip, n.rec).Standard().Truth() })
}

// consume runs the worker: one goroutine per message, each starting after
// the message's planned lag since it was published.
func (n *network) consume(q *queue, plan []asyncPlan, carryBudget bool) {
	defer q.wg.Done()
	var wg sync.WaitGroup
	for m := range q.ch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := plan[m.req]
			time.Sleep(time.Until(m.published.Add(p.delay)))
			pctx := propagators.Extract(context.Background(), propagation.MapCarrier(m.headers))
			link := trace.LinkFromContext(pctx)
			ctx, span := q.consumer.Start(pctx, q.name+" process",
				trace.WithSpanKind(trace.SpanKindConsumer),
				trace.WithAttributes(messagingAttrs(q.name, "process")...),
				trace.WithLinks(link))
			var deadline time.Time
			if v, ok := m.headers[headerDeadline]; ok && carryBudget {
				msec, _ := strconv.ParseInt(v, 10, 64)
				deadline = time.UnixMilli(msec)
				span.SetAttributes(
					attribute.Float64(budget.AttrRemainingMs, float64(time.Until(deadline))/float64(time.Millisecond)),
					attribute.String(budget.AttrSource, budget.SourcePropagated))
			}
			_, id := n.rec.startInv(ctx, "worker", -1, deadline)
			time.Sleep(p.work)
			span.End()
			n.rec.endInv(id, false)
		}()
	}
	wg.Wait()
}

// asyncNoBudget: the message carries no budget; consumers start 200–600 ms
// after publishing, most of them after the request's 300 ms deadline, and
// run 100–300 ms.
//
// Truth: clean. The consumer starts a new, unbudgeted chain (DESIGN §5,
// asynchronous boundaries): no orphaned_work, expired_on_arrival or
// timeout_inversion from the request that published the message, although
// the CONSUMER span is a child of the PRODUCER span in the same trace.
func asyncNoBudget(ctx context.Context, o Options) (Result, error) {
	return runAsync(ctx, o, "async_no_budget", false, o.requests(30), func(i int, r *rand.Rand) asyncPlan {
		return asyncPlan{api: uniform(r, 5, 20), delay: uniform(r, 200, 600), work: uniform(r, 100, 300)}
	})
}

// asyncBudget: the message carries the request's deadline (the edge's
// 300 ms), and the consumer records what was left of it as
// budget.remaining_ms (source propagated). 40 % of the messages are
// processed early (lag 30–100 ms, 30–80 ms of work: done well before the
// deadline), 20 % straddle it (lag 150–200 ms, 150–250 ms of work), 40 %
// arrive late (lag 350–600 ms).
//
// Truth: expired_on_arrival on consumers that started ≥ 20 ms after the
// deadline, orphaned_work on consumers that worked ≥ 20 ms past it (late
// ones in full); nothing on the early ones. Stripped, the message shows no
// budget, so the consumer is a new chain: clean.
func asyncBudget(ctx context.Context, o Options) (Result, error) {
	return runAsync(ctx, o, "async_budget", true, o.requests(30), func(i int, r *rand.Rand) asyncPlan {
		p := asyncPlan{api: uniform(r, 5, 20)}
		switch i % 5 {
		case 0, 1:
			p.delay, p.work = uniform(r, 30, 100), uniform(r, 30, 80)
		case 2:
			p.delay, p.work = uniform(r, 150, 200), uniform(r, 150, 250)
		default:
			p.delay, p.work = uniform(r, 350, 600), uniform(r, 100, 200)
		}
		return p
	})
}
