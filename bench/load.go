package bench

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/budgetd/budgetd/ingest/ingesttest"
)

// Requests pre-builds n OTLP export requests of spansPer spans each, all with
// distinct ids, so generating load costs the harness nothing while it runs.
func Requests(n, spansPer int) []ptraceotlp.ExportRequest {
	out := make([]ptraceotlp.ExportRequest, n)
	for i := range out {
		out[i] = ptraceotlp.NewExportRequestFromTraces(ingesttest.Spans(int64(i+1), spansPer))
	}
	return out
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

// Drive sends requests round-robin from clients concurrent senders to the
// OTLP/gRPC endpoint for warmup+duration and measures the duration part.
// Each sender waits for its acknowledgement before sending again, as a
// Collector's exporter queue does with a fixed number of consumers.
func Drive(ctx context.Context, endpoint string, reqs []ptraceotlp.ExportRequest, spansPer, clients int, warmup, duration time.Duration) (Result, error) {
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return Result{}, fmt.Errorf("dial %s: %w", endpoint, err)
	}
	defer conn.Close()
	client := ptraceotlp.NewGRPCClient(conn)

	var measuring atomic.Bool
	var spans, refused atomic.Int64
	var next atomic.Int64
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
			for time.Now().Before(stop) && ctx.Err() == nil {
				req := reqs[int(next.Add(1))%len(reqs)]
				rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				t0 := time.Now()
				_, err := client.Export(rctx, req)
				took := time.Since(t0)
				cancel()
				if !measuring.Load() {
					continue
				}
				if err != nil {
					refused.Add(1)
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
