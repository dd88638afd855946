package ingest

import (
	"bytes"
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/budgetd/budgetd/durable"
	"github.com/budgetd/budgetd/ingest/ingesttest"
	"github.com/budgetd/budgetd/store/storetest"
)

// TestFullLogShedsUndecoded checks that ingest refuses requests a full
// write-ahead log cannot take before decoding them: a body that is not even
// protobuf gets 503, not 400, and the refusals are counted as shed
// requests. The log's store is a ClickHouse server that was stopped, so
// nothing drains.
func TestFullLogShedsUndecoded(t *testing.T) {
	st, srv := openClickHouse(t)
	require.NoError(t, srv.Stop())
	dir := t.TempDir()
	dcfg := durable.DefaultConfig()
	dcfg.WAL.Dir = filepath.Join(dir, "wal")
	dcfg.DeadLetterDir = filepath.Join(dir, "dead-letter")
	dcfg.WAL.SegmentBytes = 1 << 20
	dcfg.WAL.MaxBytes = 1 << 20
	d, err := durable.OpenLog(dcfg, durable.Settings{Store: st})
	require.NoError(t, err)
	seed := uint64(5) // a new seed each time: new traces, never a resend
	for d.Commit(context.Background(), storetest.SpanBatch(seed, 50)) == nil {
		seed++
	}

	reg := prometheus.NewRegistry()
	cfg := testConfig()
	s, err := New(cfg, Settings{Durability: d, Registerer: reg})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, s.Start(ctx))
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer scancel()
		_ = s.Shutdown(sctx) // the log cannot drain: the store is gone
	}()
	grpcAddr, httpAddr := s.Addrs()

	garbage := bytes.Repeat([]byte{0xff}, 2<<20) // larger than the whole log
	resp, err := http.Post("http://"+httpAddr.String()+"/v1/traces", "application/x-protobuf", bytes.NewReader(garbage))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "refused before decoding, so not a 400")
	require.Equal(t, "1", resp.Header.Get("Retry-After"))

	conn, err := grpc.NewClient(grpcAddr.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	req := ptraceotlp.NewExportRequestFromTraces(ingesttest.Spans(1, 2000))
	_, err = ptraceotlp.NewGRPCClient(conn).Export(ctx, req)
	require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)

	ts := &testServer{Server: s, reg: reg}
	for _, tr := range []string{"grpc", "http"} {
		require.Equal(t, 1.0, metricValue(t, ts, "budgetd_ingest_requests_shed_total", map[string]string{"transport": tr}), tr)
	}
	require.Equal(t, 0.0, metricValue(t, ts, "budgetd_ingest_spans_received_total", map[string]string{"transport": "grpc"}),
		"a shed request is not decoded")
}
