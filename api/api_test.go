package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/budgetd/budgetd/analyze"
	"github.com/budgetd/budgetd/ingest"
	"github.com/budgetd/budgetd/problems"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store"
	"github.com/budgetd/budgetd/store/chsql"
	"github.com/budgetd/budgetd/store/clickhouse"
	"github.com/budgetd/budgetd/store/clickhouse/clickhousetest"
	"github.com/budgetd/budgetd/store/embedded/embeddedtest"
)

// fixtureNames are loaded into every engine under test.
var fixtureNames = []string{
	"seed000_independent_timeouts", "seed002_unfunded_retry", "seed004_gateway_retry",
	"latency_inversion_positive", "timeout_inversion_positive", "orphaned_work_positive",
}

// detectedAt is the detection time written into the loaded findings.
var detectedAt = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// loaded is what loadFixtures wrote, for the assertions.
type loaded struct {
	spans    map[schema.TraceID]int
	findings []schema.Finding
	first    time.Time
	last     time.Time
}

// loadFixtures writes the fixtures' spans and their analysis (hops and
// findings, the way the streaming pipeline does) into st.
func loadFixtures(t *testing.T, st store.Store) loaded {
	t.Helper()
	ctx := context.Background()
	conv, err := ingest.NewConverter(ingest.DefaultLimits())
	require.NoError(t, err)
	l := loaded{spans: map[schema.TraceID]int{}}
	for i, name := range fixtureNames {
		spans, err := ingest.ReadSpansFile(filepath.Join("..", "fixtures", name+".json"), conv)
		require.NoError(t, err)
		require.NoError(t, st.WriteSpans(ctx, fmt.Sprintf("spans-%d", i), spans))
		byTrace := map[schema.TraceID][]schema.Span{}
		for _, s := range spans {
			byTrace[s.TraceID] = append(byTrace[s.TraceID], s)
			l.spans[s.TraceID]++
			st := time.Unix(0, int64(s.StartNs))
			if l.first.IsZero() || st.Before(l.first) {
				l.first = st
			}
			if st.After(l.last) {
				l.last = st
			}
		}
		a := analyze.New(analyze.DefaultConfig())
		var hops []schema.Hop
		var findings []schema.Finding
		for _, ts := range byTrace {
			res := a.Trace(schema.NewTrace(ts), detectedAt)
			// Stamped as the pipeline does: the trace view reads a
			// trace's findings within its hops' analysis times.
			for j := range res.Hops {
				res.Hops[j].AnalyzedNs = uint64(detectedAt.UnixNano())
			}
			hops = append(hops, analyze.Thin(res.Hops)...) // as the pipeline stores them
			findings = append(findings, res.Findings...)
		}
		findings = append(findings, a.EdgeFindings(detectedAt)...)
		require.NoError(t, st.WriteHops(ctx, fmt.Sprintf("hops-%d", i), hops))
		require.NoError(t, st.WriteFindings(ctx, fmt.Sprintf("findings-%d", i), findings))
		l.findings = append(l.findings, findings...)
	}
	return l
}

func TestMain(m *testing.M) { embeddedtest.Main(m) }

type engineUnderTest struct {
	name string
	open func(t *testing.T) *chsql.Store
}

func engines() []engineUnderTest {
	return []engineUnderTest{
		{"embedded", func(t *testing.T) *chsql.Store { return embeddedtest.Open(t, "apitest") }},
		{"clickhouse", func(t *testing.T) *chsql.Store {
			srv := clickhousetest.Start(t)
			cfg := clickhouse.DefaultConfig()
			cfg.DSN = srv.DSN("apitest")
			s, err := clickhouse.Open(context.Background(), cfg)
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			return s
		}},
	}
}

func newTestServer(t *testing.T, st store.Store) *httptest.Server {
	t.Helper()
	reg := prometheus.NewRegistry()
	s, err := New(DefaultConfig(), Settings{Store: st, Gatherer: reg, Registerer: reg, Now: func() time.Time { return detectedAt }})
	require.NoError(t, err)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts
}

func get(t *testing.T, ts *httptest.Server, path string, into any) int {
	t.Helper()
	resp, err := http.Get(ts.URL + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if into != nil {
		require.NoError(t, json.Unmarshal(body, into), "body: %s", body)
	}
	return resp.StatusCode
}

func TestEndpoints(t *testing.T) {
	for _, e := range engines() {
		t.Run(e.name, func(t *testing.T) {
			st := e.open(t)
			l := loadFixtures(t, st)
			ts := newTestServer(t, st)
			win := "since=" + url.QueryEscape(l.first.Add(-time.Minute).Format(time.RFC3339)) +
				"&until=" + url.QueryEscape(l.last.Add(time.Hour).Format(time.RFC3339))
			testFindings(t, ts, l)
			testPathsEdgesSummary(t, ts, l, win)
			testProblems(t, st, ts, l, win)
			testTrace(t, ts, l)
			testErrors(t, ts)
		})
	}
}

func testFindings(t *testing.T, ts *httptest.Server, l loaded) {
	var all findingsResponse
	require.Equal(t, 200, get(t, ts, "/api/v1/findings?limit=1000", &all))
	require.Len(t, all.Findings, len(l.findings))
	require.Empty(t, all.Next)

	// Paging walks the same findings, newest first, in pages of 3.
	var paged []schema.Finding
	next := ""
	for {
		var page findingsResponse
		require.Equal(t, 200, get(t, ts, "/api/v1/findings?limit=3&next="+url.QueryEscape(next), &page))
		paged = append(paged, page.Findings...)
		if page.Next == "" {
			break
		}
		next = page.Next
	}
	require.Equal(t, all.Findings, paged)
	for i := 1; i < len(paged); i++ {
		require.False(t, paged[i].DetectedAt.After(paged[i-1].DetectedAt), "newest first")
	}

	count := func(keep func(schema.Finding) bool) int {
		n := 0
		for _, f := range l.findings {
			if keep(f) {
				n++
			}
		}
		return n
	}
	f0 := l.findings[0]
	require.NotEmpty(t, f0.TraceID, "the first finding belongs to a trace")
	tests := []struct {
		query string
		want  int
	}{
		{"kind=orphaned_work", count(func(f schema.Finding) bool { return f.Kind == schema.KindOrphanedWork })},
		{"severity=critical", count(func(f schema.Finding) bool { return f.Severity == schema.SeverityCritical })},
		{"service=db", count(func(f schema.Finding) bool {
			return f.Service == "db" || f.CallerService == "db" || f.CalleeService == "db"
		})},
		{"trace_id=" + f0.TraceID, count(func(f schema.Finding) bool { return f.TraceID == f0.TraceID })},
		{"path=" + url.QueryEscape(f0.Path), count(func(f schema.Finding) bool { return f.Path == f0.Path })},
		{"since=2030-01-01T00:00:00Z&until=2031-01-01T00:00:00Z", 0},
	}
	for _, tt := range tests {
		var page findingsResponse
		require.Equal(t, 200, get(t, ts, "/api/v1/findings?limit=1000&"+tt.query, &page), tt.query)
		require.Len(t, page.Findings, tt.want, tt.query)
	}
}

func testPathsEdgesSummary(t *testing.T, ts *httptest.Server, l loaded, win string) {
	var paths struct{ Paths []pathJSON }
	require.Equal(t, 200, get(t, ts, "/api/v1/paths?limit=1000&"+win, &paths))
	byPath := map[string]pathJSON{}
	for _, p := range paths.Paths {
		byPath[p.Path] = p
	}
	db := byPath["mobile:checkout > gateway:POST /checkout > order:POST /order > pricing:POST /price > db:SELECT prices"]
	require.EqualValues(t, 12, db.MaxCallsPerTrace, "seed 000: 2 × 2 × 3 database queries in one checkout")
	gw := byPath["mobile:checkout > gateway:POST /checkout"]
	require.Positive(t, gw.OrphanedWorkSeconds, "the gateway kept working after the client left")
	require.Len(t, gw.FindingsByKind, len(schema.Kinds))

	var edges struct{ Edges []edgeJSON }
	require.Equal(t, 200, get(t, ts, "/api/v1/edges?limit=1000&"+win, &edges))
	// The flag is the detector's verdict: exactly the edges that hold a
	// latency_inversion finding.
	verdicts := map[string]bool{}
	for _, f := range l.findings {
		if f.Kind == schema.KindLatencyInversion {
			verdicts[f.Path] = true
		}
	}
	require.NotEmpty(t, verdicts, "the latency inversion fixture has a finding")
	inverted := 0
	for _, e := range edges.Edges {
		path := e.CallerService + ":" + e.CallerOperation + " > " + e.CalleeService + ":" + e.CalleeOperation
		require.Equal(t, verdicts[path], e.Inversion, path)
		if e.Inversion {
			inverted++
		}
	}
	require.Len(t, verdicts, inverted, "every edge with a latency_inversion finding is listed and flagged")

	var sum summaryJSON
	require.Equal(t, 200, get(t, ts, "/api/v1/summary?"+win, &sum))
	total := uint64(0)
	for _, n := range sum.FindingsByKind {
		total += n
	}
	require.EqualValues(t, len(l.findings), total)
	require.Positive(t, sum.Requests)
	require.LessOrEqual(t, sum.WithinBudget, sum.Requests)
}

func testProblems(t *testing.T, st store.Store, ts *httptest.Server, l loaded, win string) {
	type page struct {
		Problems  []problems.Problem `json:"problems"`
		Next      string             `json:"next"`
		Truncated bool               `json:"truncated"`
	}
	want := problems.Group(l.findings, problems.Options{})
	require.NotEmpty(t, want)
	ids := func(ps []problems.Problem) []string {
		out := make([]string, len(ps))
		for i, p := range ps {
			out[i] = p.ID
		}
		return out
	}
	var all page
	require.Equal(t, 200, get(t, ts, "/api/v1/problems?limit=1000&"+win, &all))
	require.False(t, all.Truncated)
	require.Equal(t, ids(want), ids(all.Problems), "the fixtures' findings grouped, ranked by impact")
	distinct := map[string]bool{}
	for _, f := range l.findings {
		distinct[f.ID] = true
	}
	occurrences := 0
	for _, p := range all.Problems {
		occurrences += p.Occurrences
	}
	require.Equal(t, len(distinct), occurrences, "every distinct finding in exactly one problem")

	// A finding written again (a trace analysed again) counts once.
	require.NoError(t, st.WriteFindings(context.Background(), "findings-again", l.findings))
	var again page
	require.Equal(t, 200, get(t, ts, "/api/v1/problems?limit=1000&"+win, &again))
	require.Equal(t, all.Problems, again.Problems)

	// Paging walks the same problems.
	var paged []problems.Problem
	next := ""
	for {
		var p page
		require.Equal(t, 200, get(t, ts, "/api/v1/problems?limit=2&next="+next+"&"+win, &p))
		paged = append(paged, p.Problems...)
		if p.Next == "" {
			break
		}
		next = p.Next
	}
	require.Equal(t, ids(all.Problems), ids(paged))

	var byOcc page
	require.Equal(t, 200, get(t, ts, "/api/v1/problems?limit=1000&sort=occurrences&"+win, &byOcc))
	for i := 1; i < len(byOcc.Problems); i++ {
		require.GreaterOrEqual(t, byOcc.Problems[i-1].Occurrences, byOcc.Problems[i].Occurrences)
	}
	var orphaned page
	require.Equal(t, 200, get(t, ts, "/api/v1/problems?limit=1000&kind=orphaned_work&service=gateway&"+win, &orphaned))
	require.NotEmpty(t, orphaned.Problems)
	for _, p := range orphaned.Problems {
		require.Equal(t, schema.KindOrphanedWork, p.Kind)
		require.True(t, p.CallerService == "gateway" || p.CalleeService == "gateway", p.ID)
	}

	first := all.Problems[0]
	var one struct {
		Problem  problems.Problem `json:"problem"`
		Paths    []string         `json:"paths"`
		Findings []schema.Finding `json:"findings"`
	}
	require.Equal(t, 200, get(t, ts, "/api/v1/problems/"+first.ID+"?"+win, &one))
	require.Equal(t, first, one.Problem)
	require.NotEmpty(t, one.Paths)
	require.NotEmpty(t, one.Findings)
	for _, f := range one.Findings {
		require.Equal(t, first.ID, problems.Fingerprint(f).ID(), "only the problem's own findings")
	}
	require.Equal(t, 404, get(t, ts, "/api/v1/problems/00000000000000000000000000000000?"+win, nil))
	require.Equal(t, 400, get(t, ts, "/api/v1/problems?sort=worst&"+win, nil))
	require.Equal(t, 400, get(t, ts, "/api/v1/problems?state=open&"+win, nil))
}

func testTrace(t *testing.T, ts *httptest.Server, l loaded) {
	f := l.findings[0]
	var tr struct {
		TraceID  string           `json:"trace_id"`
		Spans    []spanJSON       `json:"spans"`
		Findings []schema.Finding `json:"findings"`
	}
	require.Equal(t, 200, get(t, ts, "/api/v1/traces/"+f.TraceID, &tr))
	id, err := schema.ParseTraceID(f.TraceID)
	require.NoError(t, err)
	require.Len(t, tr.Spans, l.spans[id])
	analysed := 0
	for _, s := range tr.Spans {
		if s.Budget != nil {
			analysed++
		}
	}
	require.Equal(t, len(tr.Spans), analysed, "every span carries its budget chain")
	var want []string
	for _, g := range l.findings {
		if g.TraceID == f.TraceID {
			want = append(want, g.ID)
		}
	}
	var got []string
	for _, g := range tr.Findings {
		got = append(got, g.ID)
	}
	sort.Strings(want)
	require.Equal(t, want, got)
}

func testErrors(t *testing.T, ts *httptest.Server) {
	tests := []struct {
		path   string
		status int
		code   string
		names  string
	}{
		{"/api/v1/findings?kind=bogus", 400, codeBadParameter, "kind"},
		{"/api/v1/findings?severity=loud", 400, codeBadParameter, "severity"},
		{"/api/v1/findings?limit=0", 400, codeBadParameter, "limit"},
		{"/api/v1/findings?limit=100000", 400, codeBadParameter, "limit"},
		{"/api/v1/findings?next=garbage!", 400, codeBadParameter, "cursor"},
		{"/api/v1/findings?trace_id=xyz", 400, codeBadParameter, "trace_id"},
		{"/api/v1/findings?kindd=orphaned_work", 400, codeBadParameter, "kindd"},
		{"/api/v1/findings?timeout=forever", 400, codeBadParameter, "timeout"},
		{"/api/v1/paths?since=yesterday", 400, codeBadParameter, "since"},
		{"/api/v1/paths?since=1h&until=2h", 400, codeBadParameter, "until"},
		// Outside 1970..2262 a nanosecond bound wraps around: 400, not every row.
		{"/api/v1/summary?since=1677-09-21T00:12:43Z&until=1678-01-01T00:00:00Z", 400, codeBadParameter, "since"},
		{"/api/v1/summary?until=9999-12-31T23:59:59Z", 400, codeBadParameter, "until"},
		{"/api/v1/findings?since=1969-12-31T23:59:59Z", 400, codeBadParameter, "outside the times budgetd stores"},
		{"/api/v1/edges?since=2562047h", 400, codeBadParameter, "since"},
		{"/api/v1/edges?limit=5000", 400, codeBadParameter, "limit"},
		{"/api/v1/traces/not-hex", 400, codeBadParameter, "trace_id"},
		{"/api/v1/traces/0123456789abcdef0123456789abcdef", 404, codeNotFound, ""},
		{"/api/v1/nothing", 404, codeNotFound, ""},
	}
	for _, tt := range tests {
		var body errorBody
		require.Equal(t, tt.status, get(t, ts, tt.path, &body), tt.path)
		require.Equal(t, tt.code, body.Error.Code, tt.path)
		require.Contains(t, body.Error.Message, tt.names, tt.path)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		require.Equal(t, 200, get(t, ts, p, nil), p)
	}
	resp, err := http.Get(ts.URL + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	require.Contains(t, string(body), "budgetd_api_requests_total")
}

// TestOpenAPICoversRoutes checks the served OpenAPI document against the
// router: every route is documented and every documented path is routed.
func TestOpenAPICoversRoutes(t *testing.T) {
	s, err := New(DefaultConfig(), Settings{Store: &blockingStore{}})
	require.NoError(t, err)
	var doc struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	require.NoError(t, yaml.Unmarshal(openAPI, &doc))
	routed := map[string]bool{}
	for _, r := range s.engine.Routes() {
		if strings.HasPrefix(r.Path, "/debug/pprof") {
			continue // Go's profiler (api.pprof), not part of the API
		}
		p := r.Path
		if !strings.HasPrefix(p, "/api/") && p != "/healthz" && p != "/readyz" && p != "/metrics" {
			continue // the web UI's page and files are not part of the JSON API
		}
		for _, seg := range strings.Split(p, "/") {
			if strings.HasPrefix(seg, ":") {
				p = strings.Replace(p, seg, "{"+seg[1:]+"}", 1)
			}
		}
		routed[p] = true
		ops, ok := doc.Paths[p]
		require.True(t, ok, "route %s %s is not in openapi.yaml", r.Method, p)
		_, ok = ops[strings.ToLower(r.Method)]
		require.True(t, ok, "route %s %s has no operation in openapi.yaml", r.Method, p)
	}
	for p := range doc.Paths {
		require.True(t, routed[p], "openapi.yaml documents %s, which is not routed", p)
	}
}

// TestOpenAPIDocumentsFields checks the schemas of the edge and span
// answers against the structs the handlers encode: every JSON field is
// documented and every documented property is encoded.
func TestOpenAPIDocumentsFields(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Properties map[string]any `yaml:"properties"`
				} `yaml:"properties"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	require.NoError(t, yaml.Unmarshal(openAPI, &doc))
	names := func(props map[string]any) []string {
		var out []string
		for k := range props {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	jsonFields := func(v any) []string {
		var out []string
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			if name != "" && name != "-" {
				out = append(out, name)
			}
		}
		sort.Strings(out)
		return out
	}
	edge := map[string]any{}
	for k := range doc.Components.Schemas["Edge"].Properties {
		edge[k] = nil
	}
	require.Equal(t, jsonFields(edgeJSON{}), names(edge), "Edge in openapi.yaml")
	span := map[string]any{}
	for k := range doc.Components.Schemas["Span"].Properties {
		span[k] = nil
	}
	require.Equal(t, jsonFields(spanJSON{}), names(span), "Span in openapi.yaml")
	require.Equal(t, jsonFields(budgetJSON{}), names(doc.Components.Schemas["Span"].Properties["budget"].Properties), "Span.budget in openapi.yaml")
	problem := map[string]any{}
	for k := range doc.Components.Schemas["Problem"].Properties {
		problem[k] = nil
	}
	require.Equal(t, jsonFields(problems.Problem{}), names(problem), "Problem in openapi.yaml")
	require.Equal(t, []string{"confidence", "inferred"}, names(doc.Components.Schemas["Finding"].Properties["evidence"].Properties),
		"the evidence of inferred findings is documented")
}

// blockingStore is a store whose reads block until their context ends and
// report how it ended. A real engine cannot be made to hang on demand, so
// this one fake tests that the API hands the request's end to the store.
type blockingStore struct {
	store.Store
	started chan struct{}
	ended   chan error
}

func (b *blockingStore) Findings(ctx context.Context, _ store.FindingQuery) (store.FindingPage, error) {
	close(b.started)
	<-ctx.Done()
	b.ended <- ctx.Err()
	return store.FindingPage{}, ctx.Err()
}

func TestRequestEndReachesStore(t *testing.T) {
	t.Run("client disconnect cancels the store query", func(t *testing.T) {
		bs := &blockingStore{started: make(chan struct{}), ended: make(chan error, 1)}
		ts := newTestServer(t, bs)
		ctx, cancel := context.WithCancel(context.Background())
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/api/v1/findings", nil)
		require.NoError(t, err)
		errc := make(chan error, 1)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			errc <- err
		}()
		<-bs.started
		cancel()
		require.ErrorIs(t, <-bs.ended, context.Canceled)
		require.Error(t, <-errc)
	})
	t.Run("timeout parameter becomes the deadline", func(t *testing.T) {
		bs := &blockingStore{started: make(chan struct{}), ended: make(chan error, 1)}
		ts := newTestServer(t, bs)
		var body errorBody
		require.Equal(t, http.StatusGatewayTimeout, get(t, ts, "/api/v1/findings?timeout=50ms", &body))
		require.Equal(t, codeTimeout, body.Error.Code)
		require.ErrorIs(t, <-bs.ended, context.DeadlineExceeded)
	})
}

// TestReadyzChecksAndWarnings checks that a failing write-path check makes
// /readyz 503 with its reason, and that warnings are shown while ready.
func TestReadyzChecksAndWarnings(t *testing.T) {
	st := engines()[0].open(t)
	stalled := errors.New("the write-ahead log drain has been failing to store one batch for 3m0s")
	var failing error
	reg := prometheus.NewRegistry()
	s, err := New(DefaultConfig(), Settings{Store: st, Gatherer: reg, Registerer: reg,
		Ready: []func() error{func() error { return failing }}, Warnings: []string{"api 0.0.0.0:8080 accepts connections from other hosts without TLS (api.tls)"}})
	require.NoError(t, err)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)

	var body struct {
		Status   string   `json:"status"`
		Reason   string   `json:"reason"`
		Warnings []string `json:"warnings"`
	}
	require.Equal(t, http.StatusOK, get(t, ts, "/readyz", &body))
	require.Equal(t, "ready", body.Status)
	require.Equal(t, []string{"api 0.0.0.0:8080 accepts connections from other hosts without TLS (api.tls)"}, body.Warnings)

	failing = stalled
	body.Warnings = nil
	require.Equal(t, http.StatusServiceUnavailable, get(t, ts, "/readyz", &body))
	require.Equal(t, "not ready", body.Status)
	require.Equal(t, stalled.Error(), body.Reason)
}

// writeLargeTrace stores a trace of 20 server spans that share a resource
// of 1,024 attributes of 2 KiB: about 2.1 MiB each as stored, 42 MiB in
// all, more than GET /traces answers.
func writeLargeTrace(t *testing.T, st store.Store, id schema.TraceID) {
	t.Helper()
	res := make(schema.Attributes, 1024)
	for i := range res {
		res[i] = schema.Str(fmt.Sprintf("resource.attribute.%04d", i), strings.Repeat("v", 2048))
	}
	start := uint64(detectedAt.Add(-time.Minute).UnixNano())
	spans := make([]schema.Span, 20)
	for i := range spans {
		sid := schema.SpanID{id[0], id[15], 0, 0, 0, 0, 0, byte(i + 1)}
		spans[i] = schema.Span{TraceID: id, SpanID: sid, Service: "svc", Name: "op", Kind: schema.KindServer,
			StartNs: start + uint64(i)*1000, EndNs: start + 100_000, ResourceAttrs: res}
	}
	require.NoError(t, st.WriteSpans(context.Background(), "large-"+id.String(), spans))
}

// TestTraceTruncated reads a trace of 20 spans that share a resource of
// 1,024 attributes of 2 KiB (about 2.1 MiB each as stored): the answer
// holds the spans within 32 MiB of span data and says it is partial.
func TestTraceTruncated(t *testing.T) {
	st := engines()[0].open(t)
	var id schema.TraceID
	id[0], id[15] = 0x7e, 1
	writeLargeTrace(t, st, id)
	ts := newTestServer(t, st)
	var body struct {
		Spans      []json.RawMessage `json:"spans"`
		Truncated  bool              `json:"truncated"`
		Truncation string            `json:"truncation"`
	}
	// Reading 32 MiB of span data takes seconds on a busy machine: the
	// request allows the API's longest store deadline, not the 10 s default.
	require.Equal(t, http.StatusOK, get(t, ts, "/api/v1/traces/"+id.String()+"?timeout=60s", &body))
	require.True(t, body.Truncated)
	require.Len(t, body.Spans, 15, "32 MiB hold 15 spans of about 2.1 MiB")
	require.Equal(t, "showing the first 15 spans: the trace holds more than 20000 spans or 32 MiB of span data", body.Truncation)
}

// TestRelativeWindowsAreWholeMinutes: a window relative to now (a
// duration, or the default) is widened to whole minutes, so the
// aggregates read per-minute statistics alone; RFC 3339 bounds are exact.
func TestRelativeWindowsAreWholeMinutes(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 29, 500_000_000, time.UTC)
	reg := prometheus.NewRegistry()
	s, err := New(DefaultConfig(), Settings{Store: embeddedtest.Open(t, "apitest"), Gatherer: reg, Registerer: reg, Now: func() time.Time { return now }})
	require.NoError(t, err)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	minuteEnd := time.Date(2025, 3, 1, 12, 0, 59, 999_999_999, time.UTC)
	for _, tt := range []struct {
		query        string
		since, until time.Time
	}{
		{"", time.Date(2025, 3, 1, 11, 0, 0, 0, time.UTC), minuteEnd},
		{"?since=15m", time.Date(2025, 3, 1, 11, 45, 0, 0, time.UTC), minuteEnd},
		{"?since=2025-03-01T11:00:29Z&until=2025-03-01T12:00:10.5Z",
			time.Date(2025, 3, 1, 11, 0, 29, 0, time.UTC), time.Date(2025, 3, 1, 12, 0, 10, 500_000_000, time.UTC)},
		{"?since=2025-03-01T11:00:29Z", time.Date(2025, 3, 1, 11, 0, 29, 0, time.UTC), minuteEnd},
	} {
		var out problemsResponse
		require.Equal(t, 200, get(t, ts, "/api/v1/problems"+tt.query, &out), tt.query)
		require.True(t, tt.since.Equal(out.Window.Since), "%s: since %s", tt.query, out.Window.Since)
		require.True(t, tt.until.Equal(out.Window.Until), "%s: until %s", tt.query, out.Window.Until)
	}
}

// TestTraceRebuildsHopsTheStoreLeftOut: the store keeps no hop for work
// inside a service that its parent's hop says all of (analyze.Thin), and
// the trace view shows that span's budget chain as the analysis made it.
func TestTraceRebuildsHopsTheStoreLeftOut(t *testing.T) {
	ctx := context.Background()
	st := embeddedtest.Open(t, "apiinherit")
	at := func(ms float64) uint64 { return uint64(detectedAt.Add(-time.Minute).UnixNano()) + uint64(ms*1e6) }
	tid := schema.TraceID{0xc0, 0xff, 0xee, 1}
	sid := func(n byte) schema.SpanID { return schema.SpanID{0xb, n} }
	span := func(id, parent byte, svc, name string, kind schema.SpanKind, start, end float64, attrs ...schema.Attr) schema.Span {
		s := schema.Span{TraceID: tid, SpanID: sid(id), Service: svc, Name: name, Kind: kind, StartNs: at(start), EndNs: at(end), Attrs: attrs}
		if parent != 0 {
			s.ParentSpanID = sid(parent)
		}
		return s
	}
	spans := []schema.Span{
		span(1, 0, "shop", "POST /checkout", schema.KindServer, 0, 300, schema.Double(schema.AttrRemainingMs, 800)),
		span(2, 1, "shop", "handle POST /checkout", schema.KindInternal, 1, 290),
		span(3, 2, "shop", "validate cart", schema.KindInternal, 2, 20),
		span(4, 2, "shop", "POST", schema.KindClient, 25, 200, schema.Double(schema.AttrTimeoutMs, 1000)),
		span(5, 4, "pay", "POST /charges", schema.KindServer, 26, 199, schema.Double(schema.AttrRemainingMs, 770)),
		span(6, 5, "pay", "handle POST /charges", schema.KindInternal, 27, 198),
		span(7, 6, "pay", "with a budget of its own", schema.KindInternal, 28, 100, schema.Double(schema.AttrRemainingMs, 50)),
	}
	res := analyze.New(analyze.DefaultConfig()).Trace(schema.NewTrace(spans), detectedAt)
	for j := range res.Hops {
		res.Hops[j].AnalyzedNs = uint64(detectedAt.UnixNano())
	}
	full := slices.Clone(res.Hops)
	require.NoError(t, st.WriteSpans(ctx, "spans", spans))
	require.NoError(t, st.WriteHops(ctx, "hops", analyze.Thin(res.Hops)))
	stored, err := st.CountRows(ctx, "hops")
	require.NoError(t, err)
	require.Equal(t, uint64(4), stored, "the handlers and the cart check are left out")

	ts := newTestServer(t, st)
	var tr struct {
		Spans []spanJSON `json:"spans"`
	}
	require.Equal(t, 200, get(t, ts, "/api/v1/traces/"+tid.String(), &tr))
	require.Len(t, tr.Spans, len(spans))
	for _, h := range full {
		var got *budgetJSON
		for _, s := range tr.Spans {
			if s.SpanID == h.SpanID.String() {
				got = s.Budget
			}
		}
		require.NotNil(t, got, "span %s has no budget chain", h.SpanID)
		require.Equal(t, budgetOf(&h), got, "span %s (%s)", h.SpanID, h.Operation)
	}
}
