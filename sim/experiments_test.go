package sim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/app"
	"github.com/budgetd/budgetd/config"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/sim/groundtruth"
	"github.com/budgetd/budgetd/store/embedded/embeddedtest"
)

// TestMain removes the chDB data directory the experiments share (one per
// process: chDB runs one engine per process) when they are done.
func TestMain(m *testing.M) { embeddedtest.Main(m) }

var updateExperiments = flag.Bool("update-experiments", false, "rewrite the generated tables of docs/experiments.md")

// experimentsDoc is the page whose tables TestExperiments regenerates.
const experimentsDoc = "../docs/experiments.md"

// Markers around the generated part of experimentsDoc.
const (
	beginMarker = "<!-- BEGIN GENERATED: go test ./sim -run TestExperiments -update-experiments -->"
	endMarker   = "<!-- END GENERATED -->"
)

// pathRow is one row of GET /api/v1/paths.
type pathRow struct {
	Path              string   `json:"path"`
	Requests          uint64   `json:"requests"`
	ErrorRate         float64  `json:"error_rate"`
	P99DurationMs     float64  `json:"p99_duration_ms"`
	P50BudgetMs       *float64 `json:"p50_budget_ms"`
	MaxCallsPerTrace  uint64   `json:"max_calls_per_trace"`
	MeanCallsPerTrace float64  `json:"mean_calls_per_trace"`
}

// finding is what the test reads of a finding.
type finding struct {
	ID            string             `json:"id"`
	Kind          string             `json:"kind"`
	TraceID       string             `json:"trace_id"`
	Service       string             `json:"service"`
	Path          string             `json:"path"`
	CallerService string             `json:"caller_service"`
	CalleeService string             `json:"callee_service"`
	Evidence      map[string]float64 `json:"evidence"`
}

// edgeRow is what the test reads of a row of GET /api/v1/edges.
type edgeRow struct {
	CallerService             string   `json:"caller_service"`
	CalleeService             string   `json:"callee_service"`
	InferredTimeoutMs         *float64 `json:"inferred_timeout_ms"`
	InferredTimeoutConfidence float64  `json:"inferred_timeout_confidence"`
}

// measured is what budgetd reported about one run, in real milliseconds.
type measured struct {
	Requests       uint64
	Findings       []finding
	FindingsByKind map[string]uint64
	Root, Leaf     pathRow
	Paths          map[string]pathRow
	// OrphanedByTrace sums the orphaned_ms evidence of each trace's
	// orphaned_work findings.
	OrphanedByTrace   map[string]float64
	Orphaned          float64
	OrphanedPerFailed float64 // over the requests the ground truth saw fail
	// Edges maps "caller → callee" (services) to its row of /api/v1/edges.
	Edges map[string]edgeRow
}

// experiment is one scenario run against budgetd.
type experiment struct {
	Scenario Scenario
	Truth    *Truth
	Measured measured
	// Stripped is set for a run whose spans lost every budget attribute,
	// event and header before export (Config.StripBudget).
	Stripped bool
}

// zeroInstrumentation lists the scenarios TestExperiments runs a second
// time with the budget attributes stripped.
var zeroInstrumentation = []string{"seed000_independent", "seed000_ladder", "seed000_deadline", "healthy"}

// TestExperiments runs every embedded scenario against budgetd started in
// process (embedded store, OTLP over real gRPC or HTTP) and checks that what
// budgetd reports recovers what the simulator observed. With
// -update-experiments it rewrites the tables of docs/experiments.md.
func TestExperiments(t *testing.T) {
	results := map[string]experiment{}
	var scores []groundtruth.Row
	for i, name := range Demo {
		// Both OTLP transports are exercised.
		protocol := []string{ProtocolGRPC, ProtocolHTTP}[i%2]
		t.Run(name, func(t *testing.T) {
			ex := runExperiment(t, name, protocol, false)
			checkGroundTruth(t, ex, 0.10)
			scores = append(scores, groundtruth.Rows(name, "recorded", scoreFindings(t, ex))...)
			results[name] = ex
		})
	}
	stripped := map[string]experiment{}
	for i, name := range zeroInstrumentation {
		protocol := []string{ProtocolHTTP, ProtocolGRPC}[i%2]
		t.Run(name+" without budget attributes", func(t *testing.T) {
			ex := runExperiment(t, name, protocol, true)
			// Orphaned work from timing alone: within 15 %.
			checkGroundTruth(t, ex, 0.15)
			scores = append(scores, groundtruth.Rows(name, "stripped", scoreFindings(t, ex))...)
			stripped[name] = ex
			if rec, ok := results[name]; ok {
				checkZeroInstrumentation(t, rec, ex)
			}
		})
	}

	t.Run("healthy chain has no findings", func(t *testing.T) {
		for _, res := range []map[string]experiment{results, stripped} {
			ex, ok := res["healthy"]
			require.True(t, ok, "the healthy scenario did not run")
			require.Empty(t, ex.Measured.Findings, "stripped: %v", ex.Stripped)
			for kind, n := range ex.Measured.FindingsByKind {
				require.Zero(t, n, kind)
			}
		}
	})

	t.Run("one propagated deadline has no configuration finding", func(t *testing.T) {
		// The recommended design under a degraded database (DESIGN §5):
		// nothing about its timeouts, budgets or retries is wrong. Work a
		// stalled hop really did past its deadline may show as orphaned or
		// expired work; checkGroundTruth compares that with the truth.
		for _, res := range []map[string]experiment{results, stripped} {
			ex, ok := res["seed000_deadline"]
			require.True(t, ok, "the deadline scenario did not run")
			for _, f := range ex.Measured.Findings {
				switch f.Kind {
				case "orphaned_work", "expired_on_arrival":
				default:
					require.Failf(t, "a finding on the recommended design", "stripped %v: %s on %s → %s: %v",
						ex.Stripped, f.Kind, f.CallerService, f.CalleeService, f.Evidence)
				}
			}
		}
	})

	t.Run("seed 002 budgets decrease as planned", func(t *testing.T) {
		ex, ok := results["seed002_chain"]
		require.True(t, ok, "the seed002 scenario did not run")
		planned := []float64{1900, 1800, 1700, 760} // scenario ms received by gateway, order, inventory, db
		for i, h := range ex.Truth.Hops {
			row, ok := ex.Measured.Paths[h.Path]
			require.True(t, ok, h.Path)
			require.NotNil(t, row.P50BudgetMs, h.Path)
			require.NotNil(t, h.ReceivedBudgetP50, h.Path)
			require.InEpsilon(t, h.ReceivedBudgetP50.Real, *row.P50BudgetMs, 0.01, "%s: budget received, truth vs budgetd", h.Service)
			require.InEpsilon(t, planned[i], *row.P50BudgetMs/ex.Truth.TimeScale, 0.02, "%s: budget received vs the plan", h.Service)
		}
		// No assertion that the chain has no findings: on a loaded machine
		// a stall of tens of milliseconds really does leave inventory short
		// of its 1620 ms retry policy, and the budget middleware's clock
		// starting after the SERVER span does the rest (docs/experiments.md).
	})

	t.Run("seed 000 policies rank as in the seed", func(t *testing.T) {
		var rows []experiment
		for _, name := range []string{"seed000_independent", "seed000_ladder", "seed000_deadline"} {
			ex, ok := results[name]
			require.True(t, ok, name+" did not run")
			rows = append(rows, ex)
		}
		for i := 1; i < len(rows); i++ {
			worse, better := rows[i-1], rows[i]
			what := worse.Scenario.Name + " worse than " + better.Scenario.Name
			require.Greater(t, worse.Truth.Summary.LatencyP99.Real, better.Truth.Summary.LatencyP99.Real, "truth p99: "+what)
			require.Greater(t, worse.Measured.Root.P99DurationMs, better.Measured.Root.P99DurationMs, "budgetd p99: "+what)
			require.Greater(t, worse.Truth.Summary.LeafCallsMean, better.Truth.Summary.LeafCallsMean, "truth db calls: "+what)
			require.Greater(t, worse.Measured.Leaf.MeanCallsPerTrace, better.Measured.Leaf.MeanCallsPerTrace, "budgetd db calls: "+what)
			require.Greater(t, worse.Truth.Summary.OrphanedWorkPerFailedRequest.Real, better.Truth.Summary.OrphanedWorkPerFailedRequest.Real, "truth orphaned work: "+what)
			require.Greater(t, worse.Measured.OrphanedPerFailed, better.Measured.OrphanedPerFailed, "budgetd orphaned work: "+what)
		}
	})

	if *updateExperiments {
		require.Equal(t, len(Demo), len(results), "every scenario must run to regenerate the tables")
		require.Equal(t, len(zeroInstrumentation), len(stripped), "every stripped run must run to regenerate the tables")
		require.NoError(t, writeTables(experimentsDoc, results, stripped, scores))
	}
}

// checkZeroInstrumentation compares a run without budget attributes with
// the same scenario run with them (issue: zero-instrumentation mode).
func checkZeroInstrumentation(t *testing.T, rec, strip experiment) {
	t.Helper()
	for _, f := range strip.Measured.Findings {
		switch f.Kind {
		case "budget_reset", "unfunded_retry_policy":
			t.Errorf("%s needs recorded budgets, yet the stripped run has one: %+v", f.Kind, f)
		}
	}
	// Retry amplification comes from sibling spans alone: the same number
	// of findings, with the same retry levels. Their calls are checked
	// against each run's own ground truth, trace by trace
	// (checkGroundTruth): the two runs are separate runs of real services,
	// and under load one request of thirty once made a seventh attempt.
	amp := func(m measured) map[float64]int {
		out := map[float64]int{}
		for _, f := range m.Findings {
			if f.Kind == "retry_amplification" {
				out[f.Evidence["levels"]]++
			}
		}
		return out
	}
	require.Equal(t, amp(rec.Measured), amp(strip.Measured), "retry_amplification findings per retry levels")

	// Timeout inversions: every edge inverted in the recorded run whose
	// timeout can be seen at all — the caller gave up on it often enough
	// for budgetd to estimate it — is inverted in the stripped run, and
	// every stripped finding says it was inferred.
	inverted := func(m measured) map[string]int {
		out := map[string]int{}
		for _, f := range m.Findings {
			if f.Kind == "timeout_inversion" {
				out[f.CallerService+" → "+f.CalleeService]++
			}
		}
		return out
	}
	recInv, stripInv := inverted(rec.Measured), inverted(strip.Measured)
	// An inversion the configured timeouts make shows on every request
	// that reaches the edge; one the timer jitter of a loaded machine
	// makes (a margin of milliseconds read as none) on a few. Only the
	// first kind is the seed's, and only it must be found again.
	for edge, n := range recInv {
		if n < rec.Truth.Summary.Requests/2 {
			t.Logf("%s: inverted in %d of %d recorded requests only, timer jitter rather than configuration", edge, n, rec.Truth.Summary.Requests)
			delete(recInv, edge)
		}
	}
	if rec.Scenario.Policy == PolicyDeadline {
		// The recorded run's few inversions here are the clock-reference
		// artefacts docs/experiments.md describes, not the seed's
		// inversions; nothing to find again.
		recInv = nil
	}
	observable := 0
	for edge := range recInv {
		e, ok := strip.Measured.Edges[edge]
		if !ok || e.InferredTimeoutMs == nil {
			t.Logf("%s: inverted in the recorded run; its calls never timed out, so its timeout cannot be inferred", edge)
			continue
		}
		observable++
		require.Positive(t, stripInv[edge], "%s is inverted in the recorded run but not found without attributes", edge)
	}
	if len(recInv) > 0 {
		// The fixed-timeout policies have real inversions, and some of
		// them must be on edges whose timeout shows.
		require.Positive(t, observable, "no recorded inversion is on an edge whose timeout shows")
	}
	for _, f := range strip.Measured.Findings {
		if f.Kind == "timeout_inversion" {
			require.Equal(t, 1.0, f.Evidence["inferred"], "%+v", f)
			require.Positive(t, f.Evidence["confidence"], "%+v", f)
		}
	}
	// Orphaned work is compared with the stripped run's own ground truth
	// (checkGroundTruth, 15 %): two runs of a chain differ by what the
	// machine's scheduling did, which is all the orphaned work there is in
	// the deadline policy.
}

// checkGroundTruth compares budgetd's figures with the simulator's.
//
// orphanShare is the relative error allowed on orphaned work.
// scoreFindings scores budgetd's findings per kind against the truth's
// (DESIGN §5 judged from the simulator's own observations): no false
// positive of any kind, and a recall of at least 95 % for every kind the
// truth expects.
func scoreFindings(t *testing.T, ex experiment) []groundtruth.Score {
	t.Helper()
	keys := make([]groundtruth.Expect, len(ex.Measured.Findings))
	for i, f := range ex.Measured.Findings {
		keys[i] = groundtruth.Key(schema.Kind(f.Kind), f.TraceID, f.Service, f.CalleeService)
	}
	truth := ex.Truth.Findings
	scores := groundtruth.ScoreKeys(keys, truth)
	t.Logf("%s (stripped %v): %d expected, %d ambiguous, %d findings\n%s", ex.Scenario.Name, ex.Stripped,
		len(truth.Expected), len(truth.Ambiguous), len(keys), groundtruth.Summary(scores))
	falseKeys := map[groundtruth.Expect]bool{}
	for _, k := range groundtruth.False(keys, truth) {
		falseKeys[k] = true
	}
	perKind := map[string]int{}
	for i, f := range ex.Measured.Findings {
		if falseKeys[keys[i]] {
			delete(falseKeys, keys[i])
			if perKind[f.Kind]++; perKind[f.Kind] <= 3 {
				t.Logf("false %s on %s → %s trace %s: %v; truth: %s", f.Kind, f.Service, f.CalleeService, f.TraceID, f.Evidence, truth.Notes[keys[i]])
			}
		}
	}
	for _, e := range groundtruth.Missed(keys, truth, 3) {
		t.Logf("missed %s on %s (callee %q) trace %s: %s", e.Kind, e.Service, e.Callee, e.TraceID, truth.Notes[e])
	}
	for _, s := range scores {
		if s.FP > 0 {
			t.Errorf("%s: %d false positives", s.Kind, s.FP)
		}
		if s.TP+s.FN > 0 && s.Recall() < 0.95 {
			t.Errorf("%s: recall %.0f %% (%d of %d found)", s.Kind, 100*s.Recall(), s.TP, s.TP+s.FN)
		}
	}
	return scores
}

func checkGroundTruth(t *testing.T, ex experiment, orphanShare float64) {
	tr, m := ex.Truth, ex.Measured
	s := tr.Summary
	require.EqualValues(t, s.Requests, m.Requests, "requests in /summary")
	require.EqualValues(t, s.Requests, m.Root.Requests, "requests on the root path")
	require.InDelta(t, 1-s.SuccessRate, m.Root.ErrorRate, 1e-9, "error rate of the root path")

	// Database (leaf) calls: exactly.
	require.EqualValues(t, s.LeafCalls, m.Leaf.Requests, "leaf calls in all")
	require.EqualValues(t, s.LeafCallsMax, m.Leaf.MaxCallsPerTrace, "most leaf calls in one request")
	require.InDelta(t, s.LeafCallsMeanWhenCalled, m.Leaf.MeanCallsPerTrace, 1e-9, "mean leaf calls per request")
	truthByTrace := map[string]RequestTruth{}
	for _, r := range tr.Requests {
		truthByTrace[r.TraceID] = r
	}
	for _, f := range m.Findings {
		if f.Kind == "retry_amplification" && f.Path == tr.LeafPath {
			// Its calls are CLIENT spans: attempts, reaching the leaf or not.
			require.EqualValues(t, truthByTrace[f.TraceID].LeafAttempts, f.Evidence["calls"], "retry_amplification calls of trace %s", f.TraceID)
		}
	}

	// p99 end-to-end latency: the root path's p99 within 10 %.
	require.InEpsilon(t, s.LatencyP99.Real, m.Root.P99DurationMs, 0.10, "p99 end-to-end")

	// Orphaned work: within 10 %, or within one tolerance per handler
	// invocation when there is next to none: an overrun near the tolerance
	// can be counted on one side only (see docs/experiments.md), and that
	// can happen at every hop a request reaches, not once per request —
	// on a loaded machine the deadline policy's hops overrun by a few
	// milliseconds here and there, and the stripped run's inferred
	// deadlines are estimates of the same instants.
	slack := func(truth float64, n int) float64 {
		return max(orphanShare*truth, tr.OrphanToleranceMs*float64(max(n, 1)))
	}
	invocations := 0
	for _, h := range tr.Hops {
		invocations += h.Calls
	}
	require.InDelta(t, s.OrphanedWork.Real, m.Orphaned, slack(s.OrphanedWork.Real, invocations), "orphaned work in all")
	// A failed request's figure sums over the invocations it made: one
	// tolerance for each, on average.
	perRequest := (invocations + s.Requests - 1) / max(s.Requests, 1)
	require.InDelta(t, s.OrphanedWorkPerFailedRequest.Real, m.OrphanedPerFailed, slack(s.OrphanedWorkPerFailedRequest.Real, perRequest),
		"orphaned work per failed request")
}

// runExperiment starts budgetd, runs the scenario against it and reads back
// what budgetd found, once all spans are analysed.
func runExperiment(t *testing.T, name, protocol string, strip bool) experiment {
	sc, err := Embedded(name)
	require.NoError(t, err)
	b := startBudgetd(t)
	grpcAddr, httpAddr := b.app.IngestAddrs()
	cfg := DefaultConfig()
	cfg.StripBudget = strip
	cfg.Protocol, cfg.Endpoint = protocol, grpcAddr.String()
	if protocol == ProtocolHTTP {
		cfg.Endpoint = httpAddr.String()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tr, err := Run(ctx, sc, cfg, Settings{})
	require.NoError(t, err)
	require.Equal(t, sc.Requests, tr.Summary.Requests)

	// Every span was acknowledged (so it is in the write-ahead log). Wait
	// until the drainer has handed them all to the analysis, then analyse.
	b.waitPendingSpans(t, tr.Spans.Exported)
	require.NoError(t, b.app.Analysis().Flush(ctx))
	return experiment{Scenario: sc, Truth: tr, Measured: b.measure(t, tr), Stripped: strip}
}

type budgetd struct {
	app *app.App
	api string
}

// startBudgetd starts budgetd in process on loopback ports, the embedded
// store and a temporary write-ahead log. Traces are only analysed on Flush:
// the idle period is longer than any run, so a trace is never analysed
// before its last span arrived.
func startBudgetd(t *testing.T) *budgetd {
	cfg := config.DefaultConfig()
	cfg.Store.Embedded.DataDir = embeddedtest.DataDir(t)
	cfg.Store.Embedded.Database = fmt.Sprintf("simtest_%d", time.Now().UnixNano())
	cfg.Ingest.Durability.WAL.Dir = t.TempDir()
	cfg.Ingest.Server.GRPC.Endpoint = "127.0.0.1:0"
	cfg.Ingest.Server.HTTP.Endpoint = "127.0.0.1:0"
	cfg.API.Endpoint = "127.0.0.1:0"
	cfg.Analyze.Stream.Assembly.Idle = time.Hour
	cfg.Analyze.Stream.Assembly.MaxWait = time.Hour
	cfg.Analyze.Stream.EdgeFindingsEvery = time.Hour
	// Every finding is kept in full: the experiments score each one against
	// the ground truth. (By default a problem keeps 20 per interval and
	// counts the rest; measure checks that the counts agree.)
	cfg.Problems.ExamplesPerInterval = 1 << 30
	a, err := app.Start(context.Background(), cfg, nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, a.Shutdown(ctx))
	})
	return &budgetd{app: a, api: "http://" + a.APIAddr()}
}

func (b *budgetd) getJSON(t *testing.T, path string, v any) {
	t.Helper()
	resp, err := http.Get(b.api + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, path)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(v), path)
}

// waitPendingSpans polls budgetd's metrics until the analysis holds n
// spans: the write-ahead log has drained into the store and the analysis.
func (b *budgetd) waitPendingSpans(t *testing.T, n int64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var got float64
	for time.Now().Before(deadline) {
		got = b.metric(t, "budgetd_analysis_pending_spans")
		if got >= float64(n) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the analysis holds %v spans after a minute, want %d", got, n)
}

// metric reads one unlabelled sample from /metrics.
func (b *budgetd) metric(t *testing.T, name string) float64 {
	resp, err := http.Get(b.api + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			return f
		}
	}
	require.NoError(t, sc.Err())
	t.Fatalf("no metric %s", name)
	return 0
}

// measure reads the summary, the paths and every finding.
func (b *budgetd) measure(t *testing.T, tr *Truth) measured {
	var m measured
	var summary struct {
		Requests       uint64            `json:"requests"`
		FindingsByKind map[string]uint64 `json:"findings_by_kind"`
	}
	b.getJSON(t, "/api/v1/summary", &summary)
	m.Requests, m.FindingsByKind = summary.Requests, summary.FindingsByKind

	var paths struct{ Paths []pathRow }
	b.getJSON(t, "/api/v1/paths?limit=1000", &paths)
	m.Paths = map[string]pathRow{}
	for _, p := range paths.Paths {
		m.Paths[p.Path] = p
	}
	var ok bool
	m.Root, ok = m.Paths[tr.RootPath]
	require.True(t, ok, "no path %q", tr.RootPath)
	m.Leaf, ok = m.Paths[tr.LeafPath]
	require.True(t, ok, "no path %q", tr.LeafPath)

	next := ""
	for {
		var page struct {
			Findings []finding `json:"findings"`
			Next     string    `json:"next"`
		}
		b.getJSON(t, "/api/v1/findings?limit=1000&next="+url.QueryEscape(next), &page)
		m.Findings = append(m.Findings, page.Findings...)
		if next = page.Next; next == "" {
			break
		}
	}
	// The problems count every distinct finding, from the problem stats the
	// analysis wrote beside them.
	var probs struct {
		Problems []struct {
			Occurrences int `json:"occurrences"`
		} `json:"problems"`
	}
	b.getJSON(t, "/api/v1/problems?limit=1000", &probs)
	occurrences := 0
	for _, p := range probs.Problems {
		occurrences += p.Occurrences
	}
	distinct := map[string]bool{}
	for _, f := range m.Findings {
		distinct[f.ID] = true
	}
	require.Equal(t, len(distinct), occurrences, "the problems' occurrences are the distinct findings")

	var edges struct{ Edges []edgeRow }
	b.getJSON(t, "/api/v1/edges?limit=1000", &edges)
	m.Edges = map[string]edgeRow{}
	for _, e := range edges.Edges {
		m.Edges[e.CallerService+" → "+e.CalleeService] = e
	}
	m.OrphanedByTrace = map[string]float64{}
	for _, f := range m.Findings {
		if f.Kind == "orphaned_work" {
			m.OrphanedByTrace[f.TraceID] += f.Evidence["orphaned_ms"]
			m.Orphaned += f.Evidence["orphaned_ms"]
		}
	}
	failed := 0
	for _, r := range tr.Requests {
		if !r.Success {
			failed++
			m.OrphanedPerFailed += m.OrphanedByTrace[r.TraceID]
		}
	}
	if failed > 0 {
		m.OrphanedPerFailed /= float64(failed)
	}
	return m
}

// writeTables replaces the generated part of the experiments page.
func writeTables(path string, results, stripped map[string]experiment, scores []groundtruth.Row) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	begin, end := bytes.Index(doc, []byte(beginMarker)), bytes.Index(doc, []byte(endMarker))
	if begin < 0 || end < begin {
		return fmt.Errorf("%s: generated section markers not found", path)
	}
	var out bytes.Buffer
	out.Write(doc[:begin+len(beginMarker)])
	out.WriteString("\n" + renderTables(results) + renderStripped(results, stripped) + renderScores(scores))
	out.Write(doc[end:])
	return os.WriteFile(path, out.Bytes(), 0o644)
}

// renderScores renders the per-kind scores of every run against the
// truth's findings.
func renderScores(rows []groundtruth.Row) string {
	return "\n### Precision and recall per finding kind\n\n" +
		"Every run's findings scored against the findings the ground truth judges a correct budgetd to report " +
		"(package `sim/groundtruth`, the rules in \"What is compared, and how\" above), matched on kind, trace, " +
		"service and, for call kinds, callee; `latency_inversion` per edge. Several findings with one key count once.\n\n" +
		groundtruth.Table(rows) + "\n"
}

// seedReported is what seed 000 reports for each policy, for reference.
var seedReported = map[string]string{
	"seed000_independent": "94.2 s · 12 · 64.1 s",
	"seed000_ladder":      "31.8 s · 6 · —",
	"seed000_deadline":    "10.1 s · 1 · 0.3 s",
}

// renderStripped renders the comparison of the runs with and without
// budget attributes.
func renderStripped(results, stripped map[string]experiment) string {
	var b strings.Builder
	b.WriteString("\n### Without budget attributes\n\n")
	b.WriteString("The same scenarios with every `budget.*` attribute and event and every budget header stripped from the spans " +
		"(`budgetd sim --strip-budget`). Each cell is *with attributes · without*.\n\n")
	b.WriteString("| scenario | orphaned work in all, real ms (truth · with · without) | inverted edges | inferred timeouts (edge: ms, confidence) | findings |\n")
	b.WriteString("|---|---|---|---|---|\n")
	edgesOf := func(m measured) string {
		var l []string
		for _, f := range m.Findings {
			if f.Kind == "timeout_inversion" {
				e := short(f.CallerService) + " → " + short(f.CalleeService)
				if !slices.Contains(l, e) {
					l = append(l, e)
				}
			}
		}
		if len(l) == 0 {
			return "none"
		}
		sort.Strings(l)
		return strings.Join(l, ", ")
	}
	for _, name := range zeroInstrumentation {
		rec, strip := results[name], stripped[name]
		var inferred []string
		for k, e := range strip.Measured.Edges {
			if e.InferredTimeoutMs != nil {
				inferred = append(inferred, fmt.Sprintf("%s: %.0f, %.2f", k, *e.InferredTimeoutMs, e.InferredTimeoutConfidence))
			}
		}
		sort.Strings(inferred)
		if len(inferred) == 0 {
			inferred = []string{"none"}
		}
		fmt.Fprintf(&b, "| `%s` | %.0f · %.0f · %.0f | %s · %s | %s | %s · %s |\n", name,
			strip.Truth.Summary.OrphanedWork.Real, rec.Measured.Orphaned, strip.Measured.Orphaned,
			edgesOf(rec.Measured), edgesOf(strip.Measured), strings.Join(inferred, "; "),
			kinds(rec.Measured.FindingsByKind), kinds(strip.Measured.FindingsByKind))
	}
	return b.String()
}

// short drops a service name's scenario prefix, if any.
func short(svc string) string {
	if i := strings.LastIndexByte(svc, '/'); i >= 0 {
		return svc[i+1:]
	}
	return svc
}

func renderTables(results map[string]experiment) string {
	var b strings.Builder
	sec := func(realMs, scale float64) string { return fmt.Sprintf("%.1f s", realMs/scale/1000) }
	pair := func(truth, measured string) string { return truth + " · " + measured }
	b.WriteString("\n### Seed 000: checkout with a degraded database, three policies\n\n")
	b.WriteString("Scenario time; each cell is *ground truth · budgetd*. Real (scaled) milliseconds below.\n\n")
	b.WriteString("| policy | p99 end-to-end | db queries per checkout | orphaned work per failed checkout | success rate | chain busy after the client left (truth only) | seed reported (p99 · queries · after disconnect) |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	seed000 := []string{"seed000_independent", "seed000_ladder", "seed000_deadline"}
	for _, name := range seed000 {
		ex := results[name]
		tr, m, scale := ex.Truth, ex.Measured, ex.Truth.TimeScale
		s := tr.Summary
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n",
			ex.Scenario.Description,
			pair(sec(s.LatencyP99.Real, scale), sec(m.Root.P99DurationMs, scale)),
			pair(fmt.Sprintf("%.2f", s.LeafCallsMean), fmt.Sprintf("%.2f", m.Leaf.MeanCallsPerTrace)),
			pair(sec(s.OrphanedWorkPerFailedRequest.Real, scale), sec(m.OrphanedPerFailed, scale)),
			pair(fmt.Sprintf("%.0f %%", 100*s.SuccessRate), fmt.Sprintf("%.0f %%", 100*(1-m.Root.ErrorRate))),
			sec(s.BusyAfterClientLeftPerFailedRequest.Real, scale),
			seedReported[name])
	}
	b.WriteString("\n| policy (time scale) | p99 end-to-end, real ms | db queries in all | orphaned work in all, real ms |\n|---|---|---|---|\n")
	for _, name := range seed000 {
		ex := results[name]
		s, m := ex.Truth.Summary, ex.Measured
		fmt.Fprintf(&b, "| %s (%g) | %.1f · %.1f | %d · %d | %.0f · %.0f |\n", ex.Scenario.Policy, ex.Truth.TimeScale,
			s.LatencyP99.Real, m.Root.P99DurationMs, s.LeafCalls, m.Leaf.Requests, s.OrphanedWork.Real, m.Orphaned)
	}

	b.WriteString("\n### The other scenarios\n\n")
	b.WriteString("| scenario | p99 end-to-end | leaf calls per request | orphaned work per failed request | success rate | budgetd's findings |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for _, name := range []string{"healthy", "seed002_chain", "seed004_gateway_retry"} {
		ex := results[name]
		tr, m, scale := ex.Truth, ex.Measured, ex.Truth.TimeScale
		s := tr.Summary
		fmt.Fprintf(&b, "| `%s`: %s | %s | %s | %s | %s | %s |\n", name, ex.Scenario.Description,
			pair(sec(s.LatencyP99.Real, scale), sec(m.Root.P99DurationMs, scale)),
			pair(fmt.Sprintf("%.2f", s.LeafCallsMean), fmt.Sprintf("%.2f", m.Leaf.MeanCallsPerTrace)),
			pair(sec(s.OrphanedWorkPerFailedRequest.Real, scale), sec(m.OrphanedPerFailed, scale)),
			pair(fmt.Sprintf("%.0f %%", 100*s.SuccessRate), fmt.Sprintf("%.0f %%", 100*(1-m.Root.ErrorRate))),
			kinds(m.FindingsByKind))
	}
	fmt.Fprintf(&b, "\nFindings for seed 000: independent %s; ladder %s; deadline %s.\n",
		kinds(results["seed000_independent"].Measured.FindingsByKind),
		kinds(results["seed000_ladder"].Measured.FindingsByKind),
		kinds(results["seed000_deadline"].Measured.FindingsByKind))

	b.WriteString("\n### Seed 002: the budget each hop received\n\n")
	b.WriteString("| hop | planned | ground truth (p50 received) | budgetd (`p50_budget_ms`) |\n|---|---|---|---|\n")
	ex := results["seed002_chain"]
	planned := []string{"1900 ms", "1800 ms", "1700 ms", "760 ms per attempt"}
	for i, h := range ex.Truth.Hops {
		got := "—"
		if p := ex.Measured.Paths[h.Path].P50BudgetMs; p != nil {
			got = fmt.Sprintf("%.0f ms", *p/ex.Truth.TimeScale)
		}
		want := "—"
		if h.ReceivedBudgetP50 != nil {
			want = fmt.Sprintf("%.0f ms", h.ReceivedBudgetP50.Scenario)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", h.Service, planned[i], want, got)
	}
	b.WriteString("\n")
	return b.String()
}

// kinds formats non-zero finding counts, most frequent first.
func kinds(byKind map[string]uint64) string {
	type kv struct {
		k string
		n uint64
	}
	var l []kv
	for k, n := range byKind {
		if n > 0 {
			l = append(l, kv{k, n})
		}
	}
	if len(l) == 0 {
		return "none"
	}
	sort.Slice(l, func(i, j int) bool { return l[i].n > l[j].n || l[i].n == l[j].n && l[i].k < l[j].k })
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = fmt.Sprintf("%s %d", e.k, e.n)
	}
	return strings.Join(parts, ", ")
}
