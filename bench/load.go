package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/budgetd/budgetd/ingest/ingesttest"
)

// Load is the pre-built OTLP export requests a run sends.
type Load struct {
	reqs  []ptraceotlp.ExportRequest
	masks []uint64 // what request i's trace ids are XORed with now (bytes 8–15)
	round atomic.Uint64
}

// Requests pre-builds n OTLP export requests of spansPer spans each, all with
// distinct ids, so generating load costs the harness little while it runs.
func Requests(n, spansPer int) *Load { return requests(n, spansPer, ingesttest.Spans) }

// HandlerRequests is Requests with every request's work inside an INTERNAL
// handler span (ingesttest.HandlerSpans), as much instrumentation records
// it.
func HandlerRequests(n, spansPer int) *Load { return requests(n, spansPer, ingesttest.HandlerSpans) }

func requests(n, spansPer int, spans func(seed int64, n int) ptrace.Traces) *Load {
	l := &Load{reqs: make([]ptraceotlp.ExportRequest, n), masks: make([]uint64, n)}
	for i := range l.reqs {
		l.reqs[i] = ptraceotlp.NewExportRequestFromTraces(spans(int64(i+1), spansPer))
	}
	return l
}

// renew gives request i's traces ids no earlier send used, so a reused
// request carries new traces rather than more spans of old ones: budgetd
// would otherwise keep every trace open (its spans keep arriving) and hold
// the whole run in memory, which no real traffic does. Only the sender that
// owns request i may call it.
func (l *Load) renew(i int) {
	mask := splitmix(l.round.Add(1))
	delta := mask ^ l.masks[i]
	l.masks[i] = mask
	rss := l.reqs[i].Traces().ResourceSpans()
	for r := range rss.Len() {
		sss := rss.At(r).ScopeSpans()
		for s := range sss.Len() {
			spans := sss.At(s).Spans()
			for k := range spans.Len() {
				sp := spans.At(k)
				id := sp.TraceID()
				binary.LittleEndian.PutUint64(id[8:], binary.LittleEndian.Uint64(id[8:])^delta)
				sp.SetTraceID(id)
			}
		}
	}
}

// splitmix spreads a counter over 64 bits (SplitMix64's finaliser).
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Result is what one load run measured at the client.
type Result struct {
	Spans    int64         // spans acknowledged
	Refused  int64         // requests answered with an error (503 etc.)
	Elapsed  time.Duration // measured period
	P50, P99 time.Duration // acknowledgement latency
}

// SpansPerSecond is the sustained acknowledged throughput.
func (r Result) SpansPerSecond() float64 { return float64(r.Spans) / r.Elapsed.Seconds() }

// Drive sends the load's requests from clients concurrent senders to the
// OTLP/gRPC endpoint for warmup+duration and measures the duration part.
// Each sender waits for its acknowledgement before sending again, as a
// Collector's exporter queue does with a fixed number of consumers, and
// sends requests of its own (request i belongs to sender i mod clients),
// giving their traces new ids before each send (retries aside). With a
// rate (spans a second, > 0) the senders together keep to it: request n
// (counted over all senders, retries aside) goes no sooner than n requests'
// worth of spans at that rate after the start, so a target is measured at
// a traffic it keeps up with, not only flat out; a sender behind its
// schedule sends at once.
func Drive(ctx context.Context, endpoint string, load *Load, spansPer, clients int, warmup, duration time.Duration, rate float64) (Result, error) {
	if len(load.reqs) < clients {
		return Result{}, fmt.Errorf("%d requests for %d senders: each sender needs its own", len(load.reqs), clients)
	}
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return Result{}, fmt.Errorf("dial %s: %w", endpoint, err)
	}
	defer conn.Close()
	client := ptraceotlp.NewGRPCClient(conn)

	var measuring atomic.Bool
	var spans, refused, sent atomic.Int64
	lat := make([][]time.Duration, clients)
	start := time.Now()
	stop := start.Add(warmup + duration)
	go func() {
		time.Sleep(warmup)
		measuring.Store(true)
	}()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			i, retry := c, false
			for time.Now().Before(stop) && ctx.Err() == nil {
				if !retry {
					if rate > 0 {
						at := sendAt(start, sent.Add(1)-1, spansPer, rate)
						if !at.Before(stop) || !sleepCtx(ctx, time.Until(at), stop) {
							return
						}
					}
					load.renew(i)
				}
				req := load.reqs[i]
				rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				t0 := time.Now()
				_, err := client.Export(rctx, req)
				took := time.Since(t0)
				cancel()
				if err != nil {
					if measuring.Load() {
						refused.Add(1)
					}
					// A Collector's exporter waits out the delay the
					// receiver asked for before it retries; a client that
					// did not would spend the target's CPU on refusals.
					if !sleepCtx(ctx, retryDelay(err), stop) {
						return
					}
					retry = true // the same spans, as an exporter retries them
					continue
				}
				if i, retry = i+clients, false; i >= len(load.reqs) {
					i = c
				}
				if !measuring.Load() {
					continue
				}
				spans.Add(int64(spansPer))
				lat[c] = append(lat[c], took)
			}
		}()
	}
	wg.Wait()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	r := Result{Spans: spans.Load(), Refused: refused.Load(), Elapsed: time.Since(start) - warmup}
	if len(all) > 0 {
		r.P50, r.P99 = all[len(all)/2], all[min(len(all)-1, len(all)*99/100)]
	}
	return r, nil
}

// sendAt is when request n of a load paced at rate spans a second may go,
// requests of spansPer spans sent from start.
func sendAt(start time.Time, n int64, spansPer int, rate float64) time.Time {
	return start.Add(time.Duration(float64(n) * float64(spansPer) / rate * float64(time.Second)))
}

// retryDelay is the delay a refused export was told to wait (gRPC
// RetryInfo), one second when it names none.
func retryDelay(err error) time.Duration {
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	return time.Second
}

// sleepCtx waits d, cut short at stop; false when ctx ended.
func sleepCtx(ctx context.Context, d time.Duration, stop time.Time) bool {
	if until := time.Until(stop); d > until {
		d = max(until, 0)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
