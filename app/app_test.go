package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/config"
	"github.com/budgetd/budgetd/durable"
	"github.com/budgetd/budgetd/fixtures"
	"github.com/budgetd/budgetd/fixtures/fixturestest"
	"github.com/budgetd/budgetd/ingest"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store/embedded/embeddedtest"
)

func TestMain(m *testing.M) { embeddedtest.Main(m) }

// testConfig runs everything on loopback ports chosen by the kernel, the
// embedded store and a temporary write-ahead log, with a short idle period
// so traces are analysed within the test.
func testConfig(t *testing.T) config.Config {
	cfg := config.DefaultConfig()
	cfg.Store.Embedded.DataDir = embeddedtest.DataDir(t)
	cfg.Store.Embedded.Database = fmt.Sprintf("apptest_%d", time.Now().UnixNano())
	cfg.Ingest.Durability.WAL.Dir = t.TempDir()
	cfg.Ingest.Server.GRPC.Endpoint = "127.0.0.1:0"
	cfg.Ingest.Server.HTTP.Endpoint = "127.0.0.1:0"
	// The fixtures carry the times they were recorded at, months ago.
	cfg.Ingest.Server.SpanTimes = ingest.SpanTimeWindow{}
	cfg.API.Endpoint = "127.0.0.1:0"
	cfg.Analyze.Stream.Assembly.Idle = 200 * time.Millisecond
	cfg.Analyze.Stream.Tick = 50 * time.Millisecond
	return cfg
}

// TestEndToEnd posts a fixture over OTLP/HTTP and reads its findings back
// from the API: ingest → write-ahead log → store → streaming analysis →
// findings, the whole way a Collector's spans go.
func TestEndToEnd(t *testing.T) {
	for _, durability := range []string{durable.ModeWAL, durable.ModeBatch} {
		t.Run(durability, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.Ingest.Durability.Mode = durability
			a, err := Start(context.Background(), cfg, nil)
			require.NoError(t, err)
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				require.NoError(t, a.Shutdown(ctx))
			}()

			const name = "seed000_independent_timeouts"
			body, err := fixtures.Read(name)
			require.NoError(t, err)
			_, httpAddr := a.IngestAddrs()
			resp, err := http.Post("http://"+httpAddr.String()+"/v1/traces", "application/json", bytes.NewReader(body))
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)

			want := goldenIDs(t, name)
			var got []string
			deadline := time.Now().Add(time.Minute)
			for len(got) < len(want) && time.Now().Before(deadline) {
				got = findingIDs(t, a.APIAddr())
				time.Sleep(50 * time.Millisecond)
			}
			require.Equal(t, want, got, "the streaming path finds what the offline analysis finds")
		})
	}
}

func goldenIDs(t *testing.T, name string) []string { return fixturestest.GoldenIDs(t, name) }

func findings(t *testing.T, addr string) []schema.Finding {
	resp, err := http.Get("http://" + addr + "/api/v1/findings?limit=1000")
	require.NoError(t, err)
	defer resp.Body.Close()
	var page struct{ Findings []schema.Finding }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&page))
	return page.Findings
}

func findingIDs(t *testing.T, addr string) []string {
	var ids []string
	for _, f := range findings(t, addr) {
		ids = append(ids, f.ID)
	}
	sort.Strings(ids)
	return ids
}

// waitForRequests polls /api/v1/summary until it counts n analysed requests.
func waitForRequests(t *testing.T, addr string, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get("http://" + addr + "/api/v1/summary?since=1h")
		require.NoError(t, err)
		var sum struct{ Requests int }
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&sum))
		resp.Body.Close()
		if sum.Requests >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("budgetd analysed %d of %d requests within a minute", sum.Requests, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitFor polls cond until it holds, failing after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStartFailsWithAnError starts budgetd with its API address taken: Start
// returns the listen error (it used to panic cleaning up, its result already
// nil), and has released what it opened: the same write-ahead log and
// database start again once the address is free.
func TestStartFailsWithAnError(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cfg := testConfig(t)
	cfg.API.Endpoint = taken.Addr().String()
	a, err := Start(context.Background(), cfg, nil)
	require.ErrorContains(t, err, "address already in use")
	require.Nil(t, a)

	require.NoError(t, taken.Close())
	a, err = Start(context.Background(), cfg, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, a.Shutdown(ctx))
}
