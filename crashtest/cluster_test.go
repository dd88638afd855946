package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"

	"github.com/budgetd/budgetd/analyze"
	"github.com/budgetd/budgetd/ingest"
	"github.com/budgetd/budgetd/proctest"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/sim"
	"github.com/budgetd/budgetd/store/chsql"
	"github.com/budgetd/budgetd/store/clickhouse/clustertest"
	"github.com/budgetd/budgetd/store/engine"
)

// otelcolLBPath is the Collector with the loadbalancing exporter that
// scripts/install-otelcol.sh builds.
const otelcolLBPath = ".cache/otelcol/otelcol-budgetd-lb"

// clusterScenarios are the simulator's scenarios the scale-out test sends:
// a chain with every kind of trouble, the same chain spending one
// propagated deadline, and healthy ones, which must stay as clean spread
// over replicas as on one node.
var clusterScenarios = []string{"seed000_independent", "seed000_deadline", "seed002_chain", "healthy"}

// recorder is an OTLP/gRPC trace receiver that keeps what it is sent. The
// simulator exports to it once; the test then sends exactly those spans
// through the Collector to the replicas and analyses them offline, so the
// single-node verdict and the cluster's are about identical traces (a
// second run of real services would differ in its timings).
type recorder struct {
	ptraceotlp.UnimplementedGRPCServer
	mu       sync.Mutex
	requests []ptrace.Traces
}

func (r *recorder) Export(_ context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	td := ptrace.NewTraces()
	req.Traces().CopyTo(td)
	r.mu.Lock()
	r.requests = append(r.requests, td)
	r.mu.Unlock()
	return ptraceotlp.NewExportResponse(), nil
}

// recordScenarios runs each scenario against a recorder and returns the
// export requests its services sent.
func recordScenarios(t *testing.T, names []string) []ptrace.Traces {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	rec := &recorder{}
	srv := grpc.NewServer()
	ptraceotlp.RegisterGRPCServer(srv, rec)
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, name := range names {
		sc, err := sim.Embedded(name)
		require.NoError(t, err)
		cfg := sim.DefaultConfig()
		cfg.Endpoint, cfg.ServicePrefix = l.Addr().String(), sc.Name+"/"
		_, err = sim.Run(ctx, sc, cfg, sim.Settings{})
		require.NoError(t, err, "run scenario %s", name)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.requests
}

// spansOf converts recorded requests into budgetd's spans, as ingest does.
func spansOf(t *testing.T, requests []ptrace.Traces) []schema.Span {
	t.Helper()
	conv, err := ingest.NewConverter(ingest.DefaultLimits())
	require.NoError(t, err)
	var spans []schema.Span
	for _, td := range requests {
		res := conv.Convert(td)
		require.Zero(t, res.Rejected, "recorded spans rejected: %s", res.RejectReason)
		spans = append(spans, res.Spans...)
	}
	return spans
}

// lbCollectorConfig is the Collector configuration docs/scale-out.md
// gives users: a loadbalancing exporter routing by trace id over a static
// list of replicas, retrying one that is down without an end.
const lbCollectorConfig = "deploy/collector/loadbalancing.yaml"

// startLBCollector runs the loadbalancing Collector with receiver and the
// replicas' OTLP endpoints filled into lbCollectorConfig.
func startLBCollector(t *testing.T, receiver string, backends []string) *process {
	t.Helper()
	config := filepath.Join(proctest.RepoRoot(t), lbCollectorConfig)
	env := []string{"OTLP_GRPC_ENDPOINT=" + receiver, "BUDGETD_REPLICAS=[" + strings.Join(backends, ", ") + "]"}
	p := startProcess(t, "the loadbalancing Collector", env, proctest.Tool(t, otelcolLBPath), "--config", config)
	waitListening(t, p, receiver)
	return p
}

// replay sends every recorded request to target over OTLP/gRPC.
func replay(t *testing.T, target string, requests []ptrace.Traces) {
	t.Helper()
	s := newSender(t, target, 1)
	for _, td := range requests {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := s.client.Export(ctx, ptraceotlp.NewExportRequestFromTraces(td))
		cancel()
		require.NoError(t, err)
	}
}

// getJSON decodes GET http://api+path into v.
func getJSON(t *testing.T, api, path string, v any) {
	t.Helper()
	resp, err := http.Get("http://" + api + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "GET %s: %s", path, body)
	require.NoError(t, json.Unmarshal(body, v), "GET %s", path)
}

// sampledKinds are the kinds whose verdict reads an edge statistic as it
// stood when the trace was judged: latency_inversion is the edge's p99,
// retry_without_budget compares a retry's budget with the edge's median.
// Those statistics are samples of the edge's calls, so the verdict on a
// call near the median depends on which calls were seen before it — on
// one node the arrival order, on several the share each replica saw (a
// uniform sample by trace id, DESIGN §7). The rest are decided by the
// trace alone and must be identical, finding id for finding id.
var sampledKinds = map[schema.Kind]bool{schema.KindLatencyInversion: true, schema.KindRetryWithoutBudget: true}

// sampledTolerance is how far the count of a sampled kind on one edge may
// be from a single node's: a few calls near the median, not a different
// verdict on the edge.
const sampledTolerance = 0.05

// verdicts are findings split by how they are compared.
type verdicts struct {
	decided, sampled []schema.Finding
	exact            []string // ids of the decided findings, sorted
}

func byVerdict(fs []schema.Finding) verdicts {
	var v verdicts
	for _, f := range fs {
		if sampledKinds[f.Kind] {
			v.sampled = append(v.sampled, f)
		} else {
			v.decided = append(v.decided, f)
			v.exact = append(v.exact, f.ID)
		}
	}
	sort.Strings(v.exact)
	return v
}

// agrees reports whether got has the same findings a trace alone decides,
// and each sampled kind on each edge within sampledTolerance of v.
func (v verdicts) agrees(got verdicts) bool {
	if !slices.Equal(v.exact, got.exact) {
		return false
	}
	want, have := kindsByEdge(v.sampled), kindsByEdge(got.sampled)
	for k, n := range want {
		if math.Abs(float64(have[k]-n)) > sampledTolerance*float64(n) {
			return false
		}
	}
	for k := range have {
		if _, ok := want[k]; !ok {
			return false
		}
	}
	return true
}

// allFindings pages through every finding api serves.
func allFindings(t *testing.T, api string) []schema.Finding {
	t.Helper()
	var out []schema.Finding
	cursor := ""
	for {
		var page struct {
			Findings []schema.Finding `json:"findings"`
			Next     string           `json:"next"`
		}
		getJSON(t, api, "/api/v1/findings?since=24h&limit=1000&next="+url.QueryEscape(cursor), &page)
		out = append(out, page.Findings...)
		if page.Next == "" {
			return out
		}
		cursor = page.Next
	}
}

// kindsByEdge counts findings per "kind caller → callee", for messages
// that say what differs.
func kindsByEdge(fs []schema.Finding) map[string]int {
	out := map[string]int{}
	for _, f := range fs {
		out[fmt.Sprintf("%s %s → %s", f.Kind, f.CallerService, f.CalleeService)]++
	}
	return out
}

// rounded returns a decoded JSON value with its numbers rounded to 9
// significant digits: ClickHouse adds floats in whatever order its threads
// finish, so the same query over the same rows may differ in the last bits.
func rounded(v any) any {
	switch v := v.(type) {
	case float64:
		if v == 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			return v
		}
		scale := math.Pow(10, 9-math.Ceil(math.Log10(math.Abs(v))))
		return math.Round(v*scale) / scale
	case []any:
		out := make([]any, len(v))
		for i := range v {
			out[i] = rounded(v[i])
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = rounded(x)
		}
		return out
	}
	return v
}

// metricSum adds metric name over the replicas' /metrics.
func metricSum(t testing.TB, name string, apis ...string) float64 {
	t.Helper()
	total := 0.0
	for _, api := range apis {
		total += metric(t, api, name)
	}
	return total
}

// TestClusterReplicas is DESIGN §7 on this machine: two `budgetd serve`
// replicas, each with its own write-ahead log, share a ClickHouse cluster
// (ZooKeeper and 2 shards × 2 replicas of Debian's 18.16 server, schema ON
// CLUSTER) behind a Collector whose loadbalancing exporter routes by trace
// id (deploy/collector/loadbalancing.yaml).
//   - The simulator's scenarios, sent through it, give the per-trace
//     findings a single node gives for the same spans (the offline
//     analysis, whose findings streaming reproduces id for id), every
//     trace judged by one replica, and both replicas' APIs serve the same
//     findings, edges, paths and problems.
//   - Under load, one replica is killed with SIGKILL and restarted twice,
//     then the ClickHouse server the replicas are connected to (one
//     replica of a shard) is stopped and started again: ingest goes on,
//     the Collector holds what it cannot deliver and retries, the killed
//     replica's log drains on restart, every span the Collector
//     acknowledged is stored exactly once, and no finding appears that the
//     scenarios did not have.
func TestClusterReplicas(t *testing.T) {
	requests := recordScenarios(t, clusterScenarios)
	spans := spansOf(t, requests)
	traces := map[schema.TraceID]bool{}
	for _, s := range spans {
		traces[s.TraceID] = true
	}
	report := analyze.Analyze(spans, time.Now(), analyze.DefaultConfig())
	want := byVerdict(report.Findings)
	require.NotEmpty(t, want.exact, "the scenarios' spans have findings to compare")

	cl := startClusterStore(t)
	bin := buildBudgetd(t)
	var replicas []*budgetd
	var backends, apis []string
	for i := range 2 {
		b := newBudgetd(t, bin, budgetdOptions{store: cl.storeConfig(), extra: clusterReplicaConfig})
		b.start(t)
		replicas = append(replicas, b)
		backends, apis = append(backends, b.grpc), append(apis, b.api)
		t.Logf("replica %d: otlp %s, api %s", i, b.grpc, b.api)
	}
	receiver := freeAddr(t)
	col := startLBCollector(t, receiver, backends)

	replay(t, receiver, requests)
	// Traces analysed, less the analyses of traces late spans re-opened on
	// the same replica.
	analysed := func() float64 {
		return metricSum(t, "budgetd_analysis_traces_total", apis...) - metricSum(t, "budgetd_analysis_reopened_traces_total", apis...)
	}
	waitUntil(t, "every recorded span stored and every trace analysed on the replicas", 2*time.Minute, nil, func() bool {
		return metricSum(t, "budgetd_wal_stored_spans_total", apis...) >= float64(len(spans)) &&
			analysed() >= float64(len(traces)) && metricSum(t, "budgetd_analysis_pending_traces", apis...) == 0
	})
	for i, api := range apis {
		require.Positive(t, metric(t, api, "budgetd_wal_stored_spans_total"), "replica %d received no trace: the Collector did not spread the load", i)
	}
	// Every trace was assembled and judged by one replica, none in parts
	// on two.
	require.EqualValues(t, len(traces), analysed(), "traces analysed across the replicas, re-analyses left out")
	t.Logf("%d spans in %d traces of %d scenarios; traces re-opened by late spans: %v", len(spans), len(traces), len(clusterScenarios),
		metricSum(t, "budgetd_analysis_reopened_traces_total", apis...))

	// The analysis counters move before its results are written: wait for
	// the findings themselves, and say what differs when they never match.
	for i, api := range apis {
		var got verdicts
		deadline := time.Now().Add(time.Minute)
		for got = byVerdict(allFindings(t, api)); !want.agrees(got) && time.Now().Before(deadline); got = byVerdict(allFindings(t, api)) {
			time.Sleep(100 * time.Millisecond)
		}
		require.Equal(t, kindsByEdge(want.decided), kindsByEdge(got.decided), "replica %d: findings a trace alone decides, per kind and edge, against a single node's", i)
		require.Equal(t, want.exact, got.exact, "replica %d: ids of the findings a trace alone decides, against a single node's", i)
		require.True(t, want.agrees(got), "replica %d: sampled findings per kind and edge differ from a single node's by more than %.0f %%:\nsingle node %v\nreplicas %v",
			i, sampledTolerance*100, kindsByEdge(want.sampled), kindsByEdge(got.sampled))
	}
	now := time.Now()
	window := "since=" + url.QueryEscape(now.Add(-time.Hour).Format(time.RFC3339)) + "&until=" + url.QueryEscape(now.Add(time.Hour).Format(time.RFC3339))
	for _, path := range []string{"/api/v1/edges?" + window, "/api/v1/paths?" + window, "/api/v1/problems?" + window} {
		// Edge verdicts settle within a few evaluations (each replica merges
		// the other's states of the evaluation before); until then a
		// replica may restate its finding with a later time.
		var a, b any
		deadline := time.Now().Add(30 * time.Second)
		for {
			getJSON(t, apis[0], path, &a)
			getJSON(t, apis[1], path, &b)
			a, b = rounded(a), rounded(b)
			if reflect.DeepEqual(a, b) || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		require.Equal(t, a, b, "both replicas answer %s the same", path)
	}

	// Under load, one replica is killed and comes back.
	s := newSender(t, receiver, crashSpansPerRq)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wait := s.run(ctx, crashWorkers, crashInterval)
	for range 2 {
		before := s.ackedCount()
		waitUntil(t, "acknowledgements before the kill", 30*time.Second, nil, func() bool { return s.ackedCount() > before+500 })
		replicas[1].proc.kill()
		replicas[1].start(t)
	}
	// One ClickHouse replica of a shard stops: the first host of every
	// replica's DSN, the one they are connected to. Ingest goes on (the
	// shard's other replica takes its writes), and the stopped replica
	// catches up from ZooKeeper's log when it is back.
	down := cl.Servers()[0]
	require.NoError(t, down.Stop())
	before := s.ackedCount()
	storedBefore := metricSum(t, "budgetd_wal_stored_spans_total", apis...)
	waitUntil(t, "acknowledged and stored spans with a ClickHouse replica down", time.Minute, nil, func() bool {
		return s.ackedCount() > before+1000 && metricSum(t, "budgetd_wal_stored_spans_total", apis...) > storedBefore+1000
	})
	require.NoError(t, down.Start())
	before = s.ackedCount()
	waitUntil(t, "acknowledgements after the restarts", 30*time.Second, nil, func() bool { return s.ackedCount() > before+500 })
	cancel()
	wait()
	// The Collector retries what the killed replica did not take until the
	// replica is back (gRPC's reconnection backoff included): wait for the
	// acknowledged spans to be stored before stopping it, since a
	// Collector that shuts down drops what it still holds.
	st := cl.open(t)
	waitUntil(t, "every acknowledged span stored", 2*time.Minute, col, func() bool {
		return compare(s.acked, storedSpans(t, st)).lost == 0
	})
	// The kills split no trace into false findings: once the load's traces
	// are judged, the findings are still the scenarios' (the load's traces
	// are clean).
	waitUntil(t, "the load's traces analysed", time.Minute, col, func() bool {
		return metricSum(t, "budgetd_analysis_pending_traces", apis...) == 0
	})
	require.True(t, want.agrees(byVerdict(allFindings(t, apis[0]))), "findings after the kills")
	col.stop(t, time.Minute)
	for _, b := range replicas {
		b.proc.stop(t, time.Minute)
	}
	stored := storedSpans(t, st)
	v := compare(s.acked, stored)
	v.sent = s.sent
	t.Logf("replica killed twice and a ClickHouse replica stopped under load: spans sent %d, acknowledged %d, stored %d (rows %d), lost %d, duplicates %d; sender errors %v",
		v.sent, v.acked, v.stored, v.storedRows, v.lost, v.duplicates, s.refused)
	require.Zero(t, v.lost, "acknowledged spans missing from the store")
	requireNoDuplicates(t, v.duplicates)
	for _, sp := range spans {
		require.EqualValues(t, 1, stored[spanKey{sp.TraceID.String(), sp.SpanID.String()}], "recorded span stored once")
	}
}

// clusterReplicaConfig is what the replicas add to the crash tests'
// configuration: traces judged a few seconds after their last span and
// edges every second, so the test need not wait minutes, and every finding
// stored in full so the served ids can be compared with a single node's.
// The idle period must outlast the gaps between a trace's spans reaching
// the analysis, which follows the synchronous cluster inserts: a trace
// judged in parts adds the samples of its first, partial analysis to the
// edge statistics (a call whose server span has not arrived counts on an
// edge to the peer address), which a single node given whole traces never
// sees. At 500 ms that made a latency_inversion on "order → 127.0.0.1".
const clusterReplicaConfig = `analyze:
  assembly:
    idle: 3s
  tick: 100ms
  edge_findings_every: 1s
problems:
  examples_per_interval: 1000000
`

// clusterStore is the ClickHouse cluster the replicas share.
type clusterStore struct {
	*clustertest.Cluster
	dsn string
}

// clusterShards and clusterReplicas shape the test's ClickHouse cluster:
// the 2 shards × 2 replicas.
const clusterShards, clusterReplicas = 2, 2

// startClusterStore starts ZooKeeper and a ClickHouse cluster of Debian's
// 18.16 servers on loopback ports, stopped when the test ends.
func startClusterStore(t *testing.T) clusterStore {
	t.Helper()
	c := clustertest.Start(t, clusterShards, clusterReplicas)
	return clusterStore{Cluster: c, dsn: c.DSN("replicas")}
}

// storeConfig is the store section the replicas run with.
func (c clusterStore) storeConfig() string {
	return fmt.Sprintf("  engine: clickhouse\n  clickhouse:\n    dsn: %s\n    cluster: %s\n", c.dsn, clustertest.Name)
}

// open opens the cluster's store as the replicas do.
func (c clusterStore) open(t testing.TB) *chsql.Store {
	t.Helper()
	cfg := engine.DefaultConfig()
	cfg.Engine, cfg.ClickHouse.DSN, cfg.ClickHouse.Cluster = engine.ClickHouse, c.dsn, clustertest.Name
	st, err := engine.Open(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}
