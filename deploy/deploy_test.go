package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/budgetd/budgetd/analyze"
	"github.com/budgetd/budgetd/ingest"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store/chsql"
	"github.com/budgetd/budgetd/store/clickhouse"
	"github.com/budgetd/budgetd/store/clickhouse/clickhousetest"
	"github.com/budgetd/budgetd/store/embedded/embeddedtest"
)

func TestMain(m *testing.M) { embeddedtest.Main(m) }

const (
	rulesFile     = "prometheus/budgetd-rules.yaml"
	rulesTestFile = "prometheus/budgetd-rules.test.yaml"
	dashboardFile = "grafana/budgetd-dashboard.json"
)

// metricAllowList names every metric budgetd exports, one a line: the alert
// rules may use these and nothing else. Keep it true to the registry
// (pipeline/metrics.go, ingest/metrics.go, durable/durable.go, api/server.go,
// problems/watch/metrics.go).
const metricAllowList = `
budgetd_problem_impact
budgetd_problem_first_seen_timestamp_seconds
budgetd_problem_regressed
budgetd_problems
budgetd_problem_transitions_total
budgetd_problem_evaluations_total
budgetd_problem_evaluation_truncated
budgetd_problem_notifications_total
budgetd_analysis_findings_counted_only_total
budgetd_findings_total
budgetd_edge_findings_holding
budgetd_edge_replicas
budgetd_edge_states_undecodable_total
budgetd_orphaned_work_seconds_total
budgetd_retry_amplification_calls
budgetd_analysis_traces_total
budgetd_analysis_clock_skews_total
budgetd_analysis_hops_left_out_total
budgetd_analysis_findings_total
budgetd_analysis_write_errors_total
budgetd_analysis_refused_rows_total
budgetd_analysis_read_errors_total
budgetd_analysis_dropped_spans_total
budgetd_analysis_reopened_traces_total
budgetd_analysis_pending_traces
budgetd_analysis_pending_spans
budgetd_analysis_analysing_spans
budgetd_analysis_pending_bytes
budgetd_api_requests_total
budgetd_api_request_duration_seconds
budgetd_ingest_spans_received_total
budgetd_ingest_spans_accepted_total
budgetd_ingest_spans_rejected_total
budgetd_ingest_spans_refused_total
budgetd_ingest_requests_shed_total
budgetd_ingest_request_bytes_total
budgetd_ingest_request_duration_seconds
budgetd_ingest_attribute_values_truncated_total
budgetd_ingest_strings_truncated_total
budgetd_ingest_in_flight_bytes
budgetd_ingest_grpc_streams
budgetd_ingest_receive_timeouts_total
budgetd_ingest_strings_repaired_total
budgetd_ingest_dropped_total
budgetd_ingest_duplicate_spans_total
budgetd_ingest_dedup_spans
budgetd_ingest_dedup_window_seconds
budgetd_ingest_dedup_bytes
budgetd_ingest_batch_spans
budgetd_ingest_queue_spans
budgetd_ingest_store_write_duration_seconds
budgetd_ingest_store_write_errors_total
budgetd_wal_bytes
budgetd_wal_appends_total
budgetd_wal_syncs_total
budgetd_wal_full_total
budgetd_wal_corrupt_records_total
budgetd_wal_truncated_bytes_total
budgetd_wal_stored_spans_total
budgetd_wal_store_batches_total
budgetd_wal_store_write_errors_total
budgetd_wal_replayed_batches_total
budgetd_wal_undecodable_records_total
budgetd_wal_drain_stalled
budgetd_store_dead_letter_spans_total
`

// histogramAllowList are the histograms of metricAllowList, whose series
// carry the _bucket, _count and _sum suffixes.
const histogramAllowList = `
budgetd_retry_amplification_calls
budgetd_api_request_duration_seconds
budgetd_ingest_request_duration_seconds
budgetd_ingest_batch_spans
budgetd_ingest_store_write_duration_seconds
`

// promtool returns promtool's path, failing (never skipping) without it.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is needed to check the alert rules and was not found: run `make test-setup` " +
			"(scripts/install-ui-test-deps.sh installs Debian's prometheus package, which ships promtool)")
	}
	return p
}

func TestPrometheusRulesPassPromtool(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{
		{"check", "rules", rulesFile},
		{"test", "rules", rulesTestFile},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
		cancel()
		require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
	}
}

// ruleFile is the part of a Prometheus rule file the tests read.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// promQLWords are the PromQL functions, aggregations and keywords the rules
// may use; any other bare identifier in an expression is a metric name.
var promQLWords = words(`sum min max avg count count_values stddev stdvar topk bottomk quantile group
	by without on ignoring group_left group_right and or unless bool offset
	rate irate increase delta idelta deriv predict_linear resets changes
	histogram_quantile clamp clamp_min clamp_max abs ceil floor round exp ln log2 log10 sqrt
	absent absent_over_time avg_over_time min_over_time max_over_time sum_over_time count_over_time
	last_over_time quantile_over_time time timestamp vector scalar label_replace label_join sort sort_desc`)

var (
	promStrings  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	promMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promRanges   = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promNumbers  = regexp.MustCompile(`(?i)\b[0-9][0-9.]*(?:e[+-]?[0-9]+)?`)
	identifier   = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
)

// ruleMetrics returns the metric names an expression selects.
func ruleMetrics(expr string) []string {
	e := promStrings.ReplaceAllString(expr, " ")
	e = promMatchers.ReplaceAllString(e, " ")
	e = promRanges.ReplaceAllString(e, " ")
	e = promGrouping.ReplaceAllString(e, " ")
	e = promNumbers.ReplaceAllString(e, " ")
	var out []string
	for _, tok := range identifier.FindAllString(e, -1) {
		if promQLWords[tok] || tok == "Inf" || tok == "NaN" {
			continue
		}
		out = append(out, tok)
	}
	return out
}

func TestPrometheusRulesUseKnownMetrics(t *testing.T) {
	raw, err := os.ReadFile(rulesFile)
	require.NoError(t, err)
	var rf ruleFile
	require.NoError(t, yaml.Unmarshal(raw, &rf))
	known := words(metricAllowList)
	histograms := words(histogramAllowList)
	for h := range histograms {
		require.True(t, known[h], "histogram %s is in metricAllowList", h)
	}
	require.NotEmpty(t, rf.Groups)
	alerts := map[string]bool{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			name := r.Alert + r.Record
			require.False(t, alerts[name], "alert %s is defined twice", name)
			alerts[name] = true
			metrics := ruleMetrics(r.Expr)
			require.NotEmpty(t, metrics, "%s selects no metric", name)
			for _, m := range metrics {
				base := m
				for _, suffix := range []string{"_bucket", "_count", "_sum"} {
					if b, ok := strings.CutSuffix(m, suffix); ok && histograms[b] {
						base = b
					}
				}
				require.True(t, known[base], "%s uses %s, which budgetd does not export (see metricAllowList)", name, m)
			}
			if r.Alert != "" {
				require.Contains(t, []string{"warning", "critical"}, r.Labels["severity"], "%s: severity label", name)
				require.NotEmpty(t, r.Annotations["summary"], "%s: summary annotation", name)
				require.NotEmpty(t, r.Annotations["description"], "%s: description annotation", name)
			}
		}
	}
	// The alerts are all there.
	for _, a := range []string{"BudgetdInversionOnEdge", "BudgetdOrphanedWork", "BudgetdRetryAmplification",
		"BudgetdAnalysisWriteErrors", "BudgetdIngestStoreWriteErrors", "BudgetdIngestRejectingSpans"} {
		require.True(t, alerts[a], "rule %s", a)
	}
}

func TestRuleMetricsParser(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{`sum by (kind, service) (increase(budgetd_findings_total{kind=~"a|b"}[30m])) > 0`, []string{"budgetd_findings_total"}},
		{`histogram_quantile(0.9, sum by (le) (rate(x_bucket[5m]))) > 4`, []string{"x_bucket"}},
		{`a / ignoring (reason) group_left clamp_min(sum(rate(b[5m])), 1e-9) > 0.05`, []string{"a", "b"}},
		{`up{job="budgetd"} == 0 and on (instance) absent(c)`, []string{"up", "c"}},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, ruleMetrics(tt.expr), tt.expr)
	}
}

// dashboard is the part of a Grafana dashboard the tests read.
type dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID         int       `json:"id"`
		Title      string    `json:"title"`
		Type       string    `json:"type"`
		Datasource dsRef     `json:"datasource"`
		Targets    []target  `json:"targets"`
		GridPos    *struct{} `json:"gridPos"`
	} `json:"panels"`
}

type dsRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type target struct {
	RefID      string `json:"refId"`
	Datasource dsRef  `json:"datasource"`
	EditorType string `json:"editorType"`
	Format     *int   `json:"format"`
	QueryType  string `json:"queryType"`
	RawSQL     string `json:"rawSql"`
}

const clickhousePlugin = "grafana-clickhouse-datasource"

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	var d dashboard
	require.NoError(t, json.Unmarshal(raw, &d), "%s is JSON", dashboardFile)
	return d
}

func TestGrafanaDashboardQueriesMatchSchema(t *testing.T) {
	d := readDashboard(t)
	require.NotEmpty(t, d.Title)
	require.NotEmpty(t, d.UID)
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
		if v.Name == "datasource" {
			require.Equal(t, "datasource", v.Type)
			require.Equal(t, clickhousePlugin, v.Query, "the datasource variable lists ClickHouse data sources")
		}
	}
	require.Equal(t, "datasource", vars["datasource"], "a datasource variable")
	require.Contains(t, vars, "database")

	tables := schemaTables(t)
	require.Contains(t, tables, "findings")
	require.Contains(t, tables, "hops")
	require.GreaterOrEqual(t, len(d.Panels), 4)
	ids := map[int]bool{}
	for _, p := range d.Panels {
		require.False(t, ids[p.ID], "panel id %d is unique", p.ID)
		ids[p.ID] = true
		require.NotNil(t, p.GridPos, p.Title)
		require.Equal(t, dsRef{clickhousePlugin, "${datasource}"}, p.Datasource, p.Title)
		require.NotEmpty(t, p.Targets, p.Title)
		for _, tg := range p.Targets {
			require.Equal(t, dsRef{clickhousePlugin, "${datasource}"}, tg.Datasource, p.Title)
			require.Equal(t, "sql", tg.EditorType, p.Title)
			require.NotNil(t, tg.Format, p.Title)
			if tg.QueryType == "timeseries" {
				require.Equal(t, 0, *tg.Format, "%s: time series format", p.Title)
			} else {
				require.Equal(t, "table", tg.QueryType, p.Title)
				require.Equal(t, 1, *tg.Format, "%s: table format", p.Title)
			}
			require.NotEmpty(t, tg.RawSQL, p.Title)
			for _, v := range regexp.MustCompile(`\$\{(\w+)\}`).FindAllStringSubmatch(tg.RawSQL, -1) {
				require.Contains(t, vars, v[1], "%s uses the undefined variable %s", p.Title, v[0])
			}
			require.NoError(t, checkSQL(tg.RawSQL, tables), p.Title)
		}
	}
	wantTitles := []string{"Findings over time by kind", "Top paths by orphaned work", "Recent critical findings"}
	var titles []string
	for _, p := range d.Panels {
		titles = append(titles, p.Title)
	}
	for _, w := range wantTitles {
		require.Contains(t, titles, w)
	}
}

// schemaTables reads the columns of every table from store/chschema/sql/*.sql.
func schemaTables(t *testing.T) map[string]map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "store", "chschema", "sql", "*.sql"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	create := regexp.MustCompile(`(?m)^CREATE TABLE IF NOT EXISTS \{\{\.DB\}\}\.(\w+) \($`)
	column := regexp.MustCompile(`^\s+(\w+)\s`)
	tables := map[string]map[string]bool{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		lines := strings.Split(string(raw), "\n")
		for i := 0; i < len(lines); i++ {
			m := create.FindStringSubmatch(lines[i])
			if m == nil {
				continue
			}
			cols := map[string]bool{}
			for i++; i < len(lines) && !strings.HasPrefix(lines[i], ")"); i++ {
				if c := column.FindStringSubmatch(lines[i]); c != nil && c[1] != "INDEX" {
					cols[c[1]] = true
				}
			}
			require.NotEmpty(t, cols, "columns of %s in %s", m[1], f)
			tables[m[1]] = cols
		}
	}
	return tables
}

// sqlWords are the SQL keywords and ClickHouse functions the dashboard's
// queries may use (compared in lower case).
var sqlWords = words(`select from where and or not in as group by order asc desc limit having is null between
	distinct case when then else end interval
	count countif uniqexact sum avg min max quantile quantiles concat todatetime touint64 tounixtimestamp intdiv
	round if multiif tostring`)

var (
	sqlComments = regexp.MustCompile(`--[^\n]*`)
	sqlStrings  = regexp.MustCompile(`'(?:[^'\\]|\\.)*'`)
	sqlMacros   = regexp.MustCompile(`\$__\w+|\$\{\w+\}\.|\$\{\w+\}|\$\w+`)
	sqlFrom     = regexp.MustCompile(`(?i)\b(?:from|join)\s+([A-Za-z_]\w*)`)
	sqlAlias    = regexp.MustCompile(`(?i)\bas\s+([A-Za-z_]\w*)`)
	sqlIdent    = regexp.MustCompile(`\b[A-Za-z_]\w*\b`)
)

// checkSQL is a token check: the tables a query reads exist in the schema,
// and every other identifier is a keyword or function, a column of those
// tables or an alias the query defines.
func checkSQL(sql string, tables map[string]map[string]bool) error {
	s := sqlComments.ReplaceAllString(sql, " ")
	s = sqlStrings.ReplaceAllString(s, " ")
	s = sqlMacros.ReplaceAllString(s, " ")
	cols := map[string]bool{}
	read := map[string]bool{}
	for _, m := range sqlFrom.FindAllStringSubmatch(s, -1) {
		tc, ok := tables[m[1]]
		if !ok {
			return fmt.Errorf("reads table %q, which store/chschema/sql does not create", m[1])
		}
		read[m[1]] = true
		for c := range tc {
			cols[c] = true
		}
	}
	if len(read) == 0 {
		return fmt.Errorf("reads no table")
	}
	aliases := map[string]bool{}
	for _, m := range sqlAlias.FindAllStringSubmatch(s, -1) {
		aliases[m[1]] = true
	}
	var unknown []string
	for _, id := range sqlIdent.FindAllString(s, -1) {
		if sqlWords[strings.ToLower(id)] || cols[id] || aliases[id] || read[id] {
			continue
		}
		unknown = append(unknown, id)
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return fmt.Errorf("names no column of %v nor a known keyword or function: %v", keys(read), slices.Compact(unknown))
	}
	return nil
}

func TestCheckSQL(t *testing.T) {
	tables := map[string]map[string]bool{"findings": {"kind": true, "detected_ns": true}}
	require.NoError(t, checkSQL("SELECT kind, count() AS n FROM ${database}.findings WHERE detected_ns >= $__fromTime GROUP BY kind ORDER BY n", tables))
	require.ErrorContains(t, checkSQL("SELECT kind FROM ${database}.finding", tables), `"finding"`)
	require.ErrorContains(t, checkSQL("SELECT knid FROM findings", tables), "knid")
	require.NoError(t, checkSQL("SELECT kind FROM findings WHERE kind = 'not a column'", tables))
}

// TestGrafanaDashboardQueriesRun runs every panel's query, its macros
// expanded the way the ClickHouse data source expands them, on both store
// engines over the fixtures: each must answer, and answer rows.
func TestGrafanaDashboardQueriesRun(t *testing.T) {
	d := readDashboard(t)
	for _, e := range []struct {
		name string
		open func(t *testing.T) *chsql.Store
	}{
		{"embedded", openEmbedded},
		{"clickhouse", openClickHouse},
	} {
		t.Run(e.name, func(t *testing.T) {
			st := e.open(t)
			from, to := loadFixtures(t, st)
			expand := strings.NewReplacer(
				"${database}", st.Database(),
				"$__fromTime", fmt.Sprintf("toDateTime(%d)", from.Add(-time.Hour).Unix()),
				"$__toTime", fmt.Sprintf("toDateTime(%d)", to.Add(time.Hour).Unix()),
				"$__interval_s", "60",
			)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for _, p := range d.Panels {
				for _, tg := range p.Targets {
					q := "SELECT count() FROM (" + expand.Replace(tg.RawSQL) + ")"
					rows, err := st.Conn().Query(ctx, q, nil)
					require.NoError(t, err, "%s:\n%s", p.Title, q)
					var n uint64
					require.True(t, rows.Next(), p.Title)
					require.NoError(t, rows.Scan(&n), p.Title)
					require.NoError(t, rows.Close())
					require.Positive(t, n, "%s answers no row over the fixtures", p.Title)
				}
			}
		})
	}
}

func openEmbedded(t *testing.T) *chsql.Store { return embeddedtest.Open(t, "deploytest") }

func openClickHouse(t *testing.T) *chsql.Store {
	srv := clickhousetest.Start(t)
	cfg := clickhouse.DefaultConfig()
	cfg.DSN = srv.DSN("deploytest")
	s, err := clickhouse.Open(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// loadFixtures writes fixtures with their analysis (hops and findings) and
// returns the span time range they cover.
func loadFixtures(t *testing.T, st *chsql.Store) (first, last time.Time) {
	t.Helper()
	ctx := context.Background()
	conv, err := ingest.NewConverter(ingest.DefaultLimits())
	require.NoError(t, err)
	detectedAt := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, name := range []string{"seed000_independent_timeouts", "seed004_gateway_retry", "latency_inversion_positive"} {
		spans, err := ingest.ReadSpansFile(filepath.Join("..", "fixtures", name+".json"), conv)
		require.NoError(t, err)
		byTrace := map[schema.TraceID][]schema.Span{}
		for _, s := range spans {
			byTrace[s.TraceID] = append(byTrace[s.TraceID], s)
			at := time.Unix(0, int64(s.StartNs))
			if first.IsZero() || at.Before(first) {
				first = at
			}
			if at.After(last) {
				last = at
			}
		}
		a := analyze.New(analyze.DefaultConfig())
		var hops []schema.Hop
		var findings []schema.Finding
		for _, ts := range byTrace {
			res := a.Trace(schema.NewTrace(ts), detectedAt)
			hops = append(hops, res.Hops...)
			findings = append(findings, res.Findings...)
		}
		findings = append(findings, a.EdgeFindings(detectedAt)...)
		require.NoError(t, st.WriteSpans(ctx, "deploy-spans-"+name, spans))
		require.NoError(t, st.WriteHops(ctx, "deploy-hops-"+name, hops))
		require.NoError(t, st.WriteFindings(ctx, "deploy-findings-"+name, findings))
	}
	// Findings carry the detection time, after the spans.
	if detectedAt.After(last) {
		last = detectedAt
	}
	return first, last
}

func words(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
