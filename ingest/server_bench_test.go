package ingest

import (
	"bytes"
	"io"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/budgetd/budgetd/durable"
	"github.com/budgetd/budgetd/ingest/ingesttest"
)

// BenchmarkIngestHTTPEmbedded measures OTLP/HTTP ingest end to end: a
// protobuf request of benchSpans spans is posted, decoded, converted,
// committed to the embedded store and acknowledged. spans/s is the
// acknowledged throughput; MB/s is request bytes.
//
// clients=1 is one sequential sender (an SDK's batch processor): with the
// default flush interval every request waits for the next write slot, so
// flush=0 shows what that interval costs it. clients=8 is a Collector
// exporter with several consumers, whose requests share writes.
func BenchmarkIngestHTTPEmbedded(b *testing.B) {
	body := marshalProto(b, ingesttest.Spans(1, benchSpans))
	for _, bc := range []struct {
		name    string
		clients int
		flush   time.Duration
	}{
		{"clients=1", 1, durable.DefaultConfig().Batch.FlushInterval},
		{"clients=1/flush=0", 1, 0},
		{"clients=8", 8, durable.DefaultConfig().Batch.FlushInterval},
	} {
		b.Run(bc.name, func(b *testing.B) {
			st := openEmbedded(b)
			cfg := DefaultConfig()
			cfg.GRPC.Endpoint = ""
			cfg.HTTP.Endpoint = "127.0.0.1:0"
			dcfg := testBatch(b)
			dcfg.Batch.FlushInterval = bc.flush
			ts := startServerBatch(b, st, cfg, dcfg)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: bc.clients}}
			b.Cleanup(client.CloseIdleConnections)
			url := "http://" + ts.httpAddr + tracesPath
			send := func() {
				resp, err := client.Post(url, contentTypeProtobuf, bytes.NewReader(body))
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Errorf("status %d", resp.StatusCode)
				}
			}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			if bc.clients == 1 {
				for b.Loop() {
					send()
				}
			} else {
				b.SetParallelism(max(1, bc.clients/runtime.GOMAXPROCS(0)))
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						send()
					}
				})
			}
			b.ReportMetric(float64(b.N*benchSpans)/b.Elapsed().Seconds(), "spans/s")
		})
	}
}
