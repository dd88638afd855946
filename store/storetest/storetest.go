// Package storetest is the conformance suite every store engine passes. It
// runs against real engines only: the embedded chDB engine and a ClickHouse
// server started by the test.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/problems"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store"
	"github.com/budgetd/budgetd/store/chschema"
	"github.com/budgetd/budgetd/store/chsql"
)

// Server is a store server the suite can stop and start, to test outages.
type Server interface {
	Stop() error
	Start() error
}

// Harness is one engine under test.
type Harness struct {
	// Open opens a store on the named database, creating and migrating it.
	Open func(ctx context.Context, database string) (*chsql.Store, error)
	// SlowQuery is a statement that takes several seconds on this engine.
	SlowQuery string
	// Server is the engine's server, or nil for an in-process engine.
	Server Server
}

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"migrations are idempotent", testMigrations},
		{"the Go tables match the DDL", testTablesMatchDDL},
		{"every span column round-trips", testSpanRoundTrip},
		{"hops and findings round-trip", testHopFindingRoundTrip},
		{"trace not found", testTraceNotFound},
		{"a trace's hops within its spans' starts", testTraceHopsWithinSpanStarts},
		{"findings filters, bounds and paging", testFindingFilters},
		{"same dedup token stored once", testDedup},
		{"a batch over 101 days is stored whole", testManyDays},
		{"a batch larger than one insert block is stored whole", testLargeBatch},
		{"a batch of several blocks is one insert", testSeveralBlocks},
		{"missing spans are told from stored ones", testMissingSpans},
		{"a retry after an unrecorded attempt stores no span twice", testRetryAfterUnrecordedAttempt},
		{"follow positions resume and never move back", testFollowPositions},
		{"concurrent writers", testConcurrentWriters},
		{"paths, edges and totals", testAggregates},
		{"edges report inferred timeouts", testInferredEdge},
		{"hostile filter values", testHostileFilters},
		{"version-gated extras", testExtras},
		{"a re-analysed trace counts once", testReanalysis},
		{"interval statistics give the figures of the hops", testIntervalStats},
		{"the store adds up the statistics rows the engine's selects make", testStatsRowsMatchSQL},
		{"a finding written again counts once", testDistinctFindingCounts},
		{"problem stats sum per problem and interval", testProblemStats},
		{"edge states: each replica's latest evaluation", testEdgeStates},
		{"deadline returns promptly", testDeadline},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, h) })
	}
	if h.Server != nil {
		t.Run("server outage and reconnect", func(t *testing.T) { testOutage(t, h) })
	}
}

// open opens a fresh database for one test and closes it at cleanup.
func open(t *testing.T, h Harness) (*chsql.Store, string) {
	t.Helper()
	db := fmt.Sprintf("storetest_%d_%d", time.Now().UnixNano(), rand.IntN(1_000_000))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := h.Open(ctx, db)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = s.Conn().Exec(ctx, "DROP DATABASE IF EXISTS "+db, nil)
		_ = s.Close()
	})
	return s, db
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func testMigrations(t *testing.T, h Harness) {
	s, db := open(t, h)
	ctx := ctxT(t)
	applied, known, err := s.SchemaVersion(ctx)
	require.NoError(t, err)
	require.Equal(t, known, applied, "a new database is migrated to the newest version")
	require.Positive(t, applied)
	rows, err := s.CountRows(ctx, "schema_migrations")
	require.NoError(t, err)

	again, err := h.Open(ctx, db)
	require.NoError(t, err)
	defer again.Close()
	applied2, _, err := again.SchemaVersion(ctx)
	require.NoError(t, err)
	require.Equal(t, applied, applied2)
	rows2, err := again.CountRows(ctx, "schema_migrations")
	require.NoError(t, err)
	require.Equal(t, rows, rows2, "opening a current database applies nothing")
}

// testTablesMatchDDL checks the column contract: after the migrations the
// database holds exactly the tables budgetd inserts into (views aside),
// each with exactly the columns of its Go table in store/chsql/tables.go,
// names and types, the types as the DDL declares them for this server's
// features (no LowCardinality on 18.16). A column added to the DDL or to a
// Go table alone fails here.
func testTablesMatchDDL(t *testing.T, h Harness) {
	s, db := open(t, h)
	ctx := ctxT(t)
	want := make(map[string][]chsql.ColumnType)
	for _, tc := range chsql.InsertTables(s.Features()) {
		want[tc.Table] = tc.Columns
	}
	rows, err := s.Conn().Query(ctx, "SELECT table, name, type FROM system.columns WHERE database = {db:String}"+
		" AND table IN (SELECT name FROM system.tables WHERE database = {db:String} AND engine NOT IN ('View', 'MaterializedView'))",
		chsql.Params{chsql.P("db", db)})
	require.NoError(t, err)
	defer rows.Close()
	got := make(map[string][]chsql.ColumnType)
	for rows.Next() {
		var table string
		var c chsql.ColumnType
		require.NoError(t, rows.Scan(&table, &c.Name, &c.Type))
		got[table] = append(got[table], c)
	}
	require.NoError(t, rows.Err())
	tables := func(m map[string][]chsql.ColumnType) []string {
		var out []string
		for name := range m {
			out = append(out, name)
		}
		sort.Strings(out)
		return out
	}
	if s.Cluster() != "" {
		// On a cluster each table but schema_migrations (replicated
		// whole on every host) is a Distributed table over a local
		// table of the same columns.
		local := make(map[string][]chsql.ColumnType)
		for table, cols := range want {
			if table != "schema_migrations" {
				local[table+chschema.LocalSuffix] = cols
			}
		}
		maps.Copy(want, local)
	}
	require.Equal(t, tables(want), tables(got), "tables: chsql.InsertTables against the migrated database")
	for table, cols := range want {
		goOnly, ddlOnly := columnsApart(cols, got[table])
		require.Empty(t, goOnly, "table %s: columns of the Go table (store/chsql/tables.go) that the DDL (store/chschema/sql) lacks or types otherwise", table)
		require.Empty(t, ddlOnly, "table %s: columns of the DDL (store/chschema/sql) that the Go table (store/chsql/tables.go) lacks or types otherwise", table)
	}
}

// columnsApart returns the columns only a has and those only b has.
func columnsApart(a, b []chsql.ColumnType) (onlyA, onlyB []string) {
	set := func(cs []chsql.ColumnType) map[chsql.ColumnType]bool {
		m := make(map[chsql.ColumnType]bool, len(cs))
		for _, c := range cs {
			m[c] = true
		}
		return m
	}
	inA, inB := set(a), set(b)
	for _, c := range a {
		if !inB[c] {
			onlyA = append(onlyA, c.Name+" "+c.Type)
		}
	}
	for _, c := range b {
		if !inA[c] {
			onlyB = append(onlyB, c.Name+" "+c.Type)
		}
	}
	return onlyA, onlyB
}

// tid and sid make deterministic ids.
func tid(n int) schema.TraceID {
	var id schema.TraceID
	id[0], id[14], id[15] = 0xab, byte(n>>8), byte(n)
	return id
}

func sid(n int) schema.SpanID {
	var id schema.SpanID
	id[0], id[6], id[7] = 0xcd, byte(n>>8), byte(n)
	return id
}

// richSpan uses every column with awkward values.
func richSpan() schema.Span {
	hostile := "quote ' double \" backslash \\ tab \t newline \n cr \r nul-free unicode 🚀 ü 中文 {x:String} @name ?"
	return schema.Span{
		TraceID: tid(1), SpanID: sid(1), ParentSpanID: sid(99), TraceState: "k=v,other=1",
		Service: "checkout", Name: "POST /pay " + hostile, Kind: schema.KindClient,
		StartNs: 1_700_000_000_123_456_789, EndNs: 1_700_000_001_987_654_321,
		StatusCode: schema.StatusError, StatusMessage: hostile,
		ScopeName: "go.opentelemetry.io/contrib/net/http", ScopeVersion: "0.60.0",
		ResourceAttrs: schema.Attributes{schema.Str("service.name", "checkout"), schema.Str("host.name", hostile)},
		Attrs: schema.Attributes{
			schema.Int(schema.AttrTimeoutMs, 1500), schema.Double("budget.backoff_ms", 12.5),
			schema.Bool(schema.AttrRejected, true), schema.Strings(schema.AttrHeaderRequestTimeoutMs, "2000", hostile),
			{Key: "bytes", Type: schema.AttrBytes, Value: "AAEC"}, {Key: "map", Type: schema.AttrMap, Value: `{"a":1}`},
			{Key: "empty", Type: schema.AttrEmpty, Value: ""}, schema.Str("", ""),
		},
		Events: []schema.Event{
			{TimeNs: 1_700_000_000_500_000_000, Name: schema.EventCancelled, Attrs: schema.Attributes{schema.Str(schema.AttrCancelSource, "deadline")}},
			{TimeNs: 1_700_000_000_600_000_000, Name: "no attrs"},
		},
		Links: []schema.Link{
			{TraceID: tid(2), SpanID: sid(2), TraceState: "a=b", Attrs: schema.Attributes{schema.Int("n", -7)}},
			{TraceID: tid(3), SpanID: sid(3)},
		},
	}
}

func testSpanRoundTrip(t *testing.T, h Harness) {
	s, db := open(t, h)
	ctx := ctxT(t)
	rich := richSpan()
	root := schema.Span{TraceID: tid(1), SpanID: sid(99), Service: "edge", Name: "GET /", Kind: schema.KindServer,
		StartNs: rich.StartNs - 1000, EndNs: rich.EndNs + 1000}
	require.NoError(t, s.WriteSpans(ctx, "rt1", []schema.Span{rich, root}))

	got, truncated, err := s.Trace(ctx, tid(1), store.TraceLimits{})
	require.NoError(t, err)
	require.Equal(t, []schema.Span{root, rich}, got, "spans come back whole, in start order")
	require.False(t, truncated)
	first, truncated, err := s.Trace(ctx, tid(1), store.TraceLimits{Spans: 1})
	require.NoError(t, err)
	require.Equal(t, []schema.Span{root}, first, "a limit keeps the earliest spans")
	require.True(t, truncated, "and says it left spans out")
	both, truncated, err := s.Trace(ctx, tid(1), store.TraceLimits{Spans: 2})
	require.NoError(t, err)
	require.Len(t, both, 2)
	require.False(t, truncated, "a limit the trace does not reach leaves nothing out")

	all, err := s.Spans(ctx, store.Window{SinceNs: root.StartNs, UntilNs: root.StartNs}, 0)
	require.NoError(t, err)
	require.Equal(t, []schema.Span{root}, all, "window bounds are inclusive")

	// The size inserts store (chsql.spanBytes) is the one the column's
	// DEFAULT, as the engine holds it, computes for spans stored before it
	// (0020_span_bytes.sql).
	var def string
	require.NoError(t, queryOne(ctx, s, "SELECT default_expression FROM system.columns WHERE database = {db:String} AND table = 'spans' AND name = 'span_bytes'",
		chsql.Params{chsql.P("db", db)}, &def))
	require.NotEmpty(t, def, "span_bytes has a DEFAULT")
	var sizes, same uint64
	require.NoError(t, queryOne(ctx, s, "SELECT count(), countIf(span_bytes = "+def+") FROM "+db+".spans", nil, &sizes, &same))
	require.EqualValues(t, 2, sizes)
	require.Equal(t, sizes, same, "span_bytes as the DEFAULT counts it")
}

func sampleHop(n int) schema.Hop {
	return schema.Hop{
		TraceID: tid(n), SpanID: sid(n), ParentSpanID: sid(n + 1000), Service: "order", Operation: "POST /order",
		Kind: schema.KindClient, Path: "gateway:GET / > order:POST /order > pricing:quote", RootPath: "gateway:GET /",
		CallerService: "order", CallerOperation: "POST /order", CalleeService: "pricing", CalleeOperation: "quote",
		StartNs: uint64(1_700_000_000_000_000_000 + n), DurationNs: 2_500_000_000, CalleeDurationNs: 4_000_000_000, IsError: true, TimedOut: true,
		RemainingMs: schema.Ms(2300), BudgetMs: nil, BudgetSource: string(schema.SourcePropagated),
		TimeoutMs: schema.Ms(15000), Attempt: 2, MaxAttempts: 3, OrphanedMs: 12.5, Rejected: true, Inferred: true,
		InferredTimeoutMs: schema.Ms(1501.25), InferredRemainingMs: schema.Ms(-20.5), InferenceConfidence: 0.75, PathCalls: 3,
	}
}

func sampleFinding(n int, kind schema.Kind, service string, at time.Time) schema.Finding {
	return schema.Finding{
		ID: fmt.Sprintf("f%04d", n), Kind: kind, Severity: schema.SeverityWarning,
		TraceID: tid(n).String(), SpanID: sid(n).String(), Service: service, Operation: "quote",
		CallerService: "order", CalleeService: "db", Path: "order:POST /order > " + service + ":quote",
		DetectedAt: at.UTC(), Evidence: map[string]float64{"remaining_ms": 2300, "timeout_ms": 15000.5},
		Message: fmt.Sprintf("%s waited 15000 ms on db while order had 2300 ms left (#%d)", service, n),
	}
}

func testHopFindingRoundTrip(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := ctxT(t)
	hop := sampleHop(5)
	entry := schema.Hop{TraceID: tid(5), SpanID: sid(1005), Service: "order", Operation: "POST /order", Kind: schema.KindServer,
		Path: "gateway:GET / > order:POST /order", StartNs: hop.StartNs - 10, BudgetMs: schema.Ms(0.25)}
	require.NoError(t, s.WriteHops(ctx, "h1", []schema.Hop{hop, entry}))
	hops, err := s.TraceHops(ctx, tid(5), store.Window{})
	require.NoError(t, err)
	require.Equal(t, []schema.Hop{entry, hop}, hops)

	at := time.Unix(1_700_000_000, 123_456_789)
	f := sampleFinding(5, schema.KindTimeoutInversion, "pricing", at)
	edge := sampleFinding(6, schema.KindLatencyInversion, "db", at.Add(time.Second))
	edge.TraceID, edge.SpanID = "", ""
	require.NoError(t, s.WriteFindings(ctx, "f1", []schema.Finding{f, edge}))
	page, err := s.Findings(ctx, store.FindingQuery{})
	require.NoError(t, err)
	require.Equal(t, []schema.Finding{edge, f}, page.Findings, "newest first, every field intact")
	require.Empty(t, page.Next)
}

// testTraceHopsWithinSpanStarts: TraceHops reads a trace's hops that
// started within the window it is given — all of them within SpanWindow of
// the trace's spans, the first at its first instant and the last at its
// last start, and none outside a narrower window — and only that trace's,
// though another trace's hop on the same path starts among them.
func testTraceHopsWithinSpanStarts(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := ctxT(t)
	const base = uint64(1_700_000_000_000_000_000)
	var spans []schema.Span
	var hops []schema.Hop
	// Three spans 100 ms apart, and another trace's hop between the last two.
	for k := range 3 {
		start := base + uint64(k)*100_000_000
		spans = append(spans, schema.Span{TraceID: tid(2), SpanID: sid(20 + k), Service: "order", Name: "op", Kind: schema.KindServer,
			StartNs: start, EndNs: start + 50_000_000})
		hop := sampleHop(2)
		hop.SpanID, hop.StartNs = sid(20+k), start
		hops = append(hops, hop)
	}
	stray := sampleHop(4)
	stray.StartNs = base + 150_000_000
	require.NoError(t, s.WriteHops(ctx, "hops", append(append([]schema.Hop(nil), hops...), stray)))

	got, err := s.TraceHops(ctx, tid(2), store.SpanWindow(spans))
	require.NoError(t, err)
	require.Equal(t, hops, got)
	got, err = s.TraceHops(ctx, tid(2), store.SpanWindow(spans[1:]))
	require.NoError(t, err)
	require.Equal(t, hops[1:], got, "the first hop starts before the window")
	got, err = s.TraceHops(ctx, tid(2), store.SpanWindow(spans[:2]))
	require.NoError(t, err)
	require.Equal(t, hops[:2], got, "the last hop starts after the window")
	got, err = s.TraceHops(ctx, tid(4), store.Window{})
	require.NoError(t, err)
	require.Equal(t, []schema.Hop{stray}, got)
}

func testTraceNotFound(t *testing.T, h Harness) {
	s, _ := open(t, h)
	_, _, err := s.Trace(ctxT(t), tid(42), store.TraceLimits{})
	require.ErrorIs(t, err, store.ErrNotFound)
	hops, err := s.TraceHops(ctxT(t), tid(42), store.Window{})
	require.NoError(t, err)
	require.Empty(t, hops)
}

func testFindingFilters(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := ctxT(t)
	base := time.Unix(1_700_000_000, 0)
	var all []schema.Finding
	kinds := []schema.Kind{schema.KindTimeoutInversion, schema.KindOrphanedWork, schema.KindRetryAmplification}
	for i := range 25 {
		f := sampleFinding(i, kinds[i%3], []string{"pricing", "db"}[i%2], base.Add(time.Duration(i/2)*time.Second))
		if i%5 == 0 {
			f.Severity = schema.SeverityCritical
		}
		all = append(all, f)
	}
	require.NoError(t, s.WriteFindings(ctx, "ff", all))
	newestFirst := func(fs []schema.Finding) []string {
		out := make([]string, 0, len(fs))
		for _, f := range fs {
			out = append(out, f.ID)
		}
		sort.Sort(sort.Reverse(sort.StringSlice(out)))
		return out
	}
	ids := func(fs []schema.Finding) []string {
		out := make([]string, 0, len(fs))
		for _, f := range fs {
			out = append(out, f.ID)
		}
		return out
	}
	filter := func(keep func(schema.Finding) bool) []schema.Finding {
		var out []schema.Finding
		for _, f := range all {
			if keep(f) {
				out = append(out, f)
			}
		}
		return out
	}
	tests := []struct {
		name string
		q    store.FindingQuery
		want []schema.Finding
	}{
		{"kind", store.FindingQuery{Kind: schema.KindOrphanedWork}, filter(func(f schema.Finding) bool { return f.Kind == schema.KindOrphanedWork })},
		{"severity", store.FindingQuery{Severity: schema.SeverityCritical}, filter(func(f schema.Finding) bool { return f.Severity == schema.SeverityCritical })},
		{"service matches callee too", store.FindingQuery{Service: "db"}, all},
		{"service", store.FindingQuery{Service: "pricing"}, filter(func(f schema.Finding) bool { return f.Service == "pricing" })},
		{"path", store.FindingQuery{Path: all[3].Path}, filter(func(f schema.Finding) bool { return f.Path == all[3].Path })},
		{"trace", store.FindingQuery{TraceID: all[7].TraceID}, []schema.Finding{all[7]}},
		{"inclusive window", store.FindingQuery{Window: store.WindowOf(base.Add(2*time.Second), base.Add(4*time.Second))},
			filter(func(f schema.Finding) bool {
				return !f.DetectedAt.Before(base.Add(2*time.Second)) && !f.DetectedAt.After(base.Add(4*time.Second))
			})},
		{"nothing", store.FindingQuery{Kind: schema.KindBudgetReset}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page, err := s.Findings(ctx, tt.q)
			require.NoError(t, err)
			require.Equal(t, newestFirst(tt.want), ids(page.Findings))
		})
	}

	t.Run("paging", func(t *testing.T) {
		var got []string
		q := store.FindingQuery{Limit: 10}
		pages := 0
		for {
			page, err := s.Findings(ctx, q)
			require.NoError(t, err)
			require.LessOrEqual(t, len(page.Findings), 10)
			got = append(got, ids(page.Findings)...)
			pages++
			if page.Next == "" {
				break
			}
			q.Cursor = page.Next
		}
		require.Equal(t, 3, pages)
		require.Equal(t, newestFirst(all), got, "pages neither skip nor repeat")
	})
	t.Run("window findings in one read", func(t *testing.T) {
		got, truncated, err := s.WindowFindings(ctx, store.FindingQuery{Limit: 3, Cursor: "ignored"}, 100)
		require.NoError(t, err)
		require.False(t, truncated)
		require.Equal(t, newestFirst(all), ids(got), "every finding, newest first; Limit and Cursor are a page's")
		got, truncated, err = s.WindowFindings(ctx, store.FindingQuery{Kind: schema.KindOrphanedWork}, 3)
		require.NoError(t, err)
		require.True(t, truncated, "8 findings, at most 3")
		require.Equal(t, newestFirst(filter(func(f schema.Finding) bool { return f.Kind == schema.KindOrphanedWork }))[:3], ids(got))
		got, truncated, err = s.WindowFindings(ctx, store.FindingQuery{}, len(all))
		require.NoError(t, err)
		require.False(t, truncated, "exactly max findings is not more")
		require.Len(t, got, len(all))
		_, _, err = s.WindowFindings(ctx, store.FindingQuery{}, 0)
		require.Error(t, err)
	})
	t.Run("bad cursor", func(t *testing.T) {
		_, err := s.Findings(ctx, store.FindingQuery{Cursor: "not a cursor!"})
		require.ErrorIs(t, err, store.ErrBadCursor)
	})
	// An edge's verdict is restated with a later time while its older row
	// is still stored: the first page shows its newest row, and the older
	// one, below the first page's cursor, must not show it again.
	t.Run("a finding written again is on one page", func(t *testing.T) {
		edge := schema.Finding{ID: "edge-verdict", Kind: schema.KindLatencyInversion, Severity: schema.SeverityWarning,
			Service: "gateway", CallerService: "gateway", CalleeService: "db", Path: "gateway:GET / > db:query",
			DetectedAt: base.Add(-time.Hour), Evidence: map[string]float64{"p99_ms": 900}, Message: "m"}
		require.NoError(t, s.WriteFindings(ctx, "edge-1", []schema.Finding{edge}))
		edge.DetectedAt, edge.Evidence = base.Add(time.Hour), map[string]float64{"p99_ms": 950}
		require.NoError(t, s.WriteFindings(ctx, "edge-2", []schema.Finding{edge}))
		seen := map[string]int{}
		q := store.FindingQuery{Limit: 10}
		var first schema.Finding
		for {
			page, err := s.Findings(ctx, q)
			require.NoError(t, err)
			for _, f := range page.Findings {
				if seen[f.ID]++; f.ID == edge.ID && seen[f.ID] == 1 {
					first = f
				}
			}
			if page.Next == "" {
				break
			}
			q.Cursor = page.Next
		}
		require.Equal(t, 1, seen[edge.ID], "the restated finding is shown once")
		require.Len(t, seen, len(all)+1)
		require.Equal(t, 950.0, first.Evidence["p99_ms"], "as its newest row")

		window, truncated, err := s.WindowFindings(ctx, store.FindingQuery{}, len(all)+1)
		require.NoError(t, err)
		require.False(t, truncated)
		require.Len(t, window, len(all)+1, "the restated finding is read once")
		require.Equal(t, edge.ID, window[0].ID, "newest first")
		require.Equal(t, 950.0, window[0].Evidence["p99_ms"], "as its newest row")
	})
}

func testDedup(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := ctxT(t)
	spans := make([]schema.Span, 50)
	hops := make([]schema.Hop, 50)
	findings := make([]schema.Finding, 50)
	for i := range spans {
		spans[i] = schema.Span{TraceID: tid(i % 5), SpanID: sid(i), Service: "svc", Name: "op", StartNs: uint64(1e18) + uint64(i), EndNs: uint64(1e18) + uint64(i) + 10}
		hops[i] = sampleHop(i)
		findings[i] = sampleFinding(i, schema.KindOrphanedWork, "svc", time.Unix(1_700_000_000, int64(i)))
	}
	for range 2 {
		require.NoError(t, s.WriteSpans(ctx, "batch-1", spans))
		require.NoError(t, s.WriteHops(ctx, "batch-1", hops))
		require.NoError(t, s.WriteFindings(ctx, "batch-1", findings))
	}
	for _, table := range []string{"spans", "hops", "findings"} {
		n, err := s.CountRows(ctx, table)
		require.NoError(t, err)
		require.EqualValues(t, 50, n, "%s: a batch written twice with one token is stored once", table)
	}
	// A different token is a different batch. (The same spans under a
	// new token are stored again on engines with
	// insert_deduplication_token, and left out on older servers, whose
	// WriteSpans leaves out what is stored.)
	next := make([]schema.Span, 10)
	for i := range next {
		next[i] = spans[i]
		next[i].SpanID = sid(1000 + i)
	}
	require.NoError(t, s.WriteSpans(ctx, "batch-2", next))
	n, err := s.CountRows(ctx, "spans")
	require.NoError(t, err)
	require.EqualValues(t, 60, n)
	require.Error(t, s.WriteSpans(ctx, "bad token'", spans[:1]), "tokens are validated")
}

// testManyDays writes spans and hops that start on 101 different UTC days:
// one INSERT of them would touch more partitions than ClickHouse allows
// (max_partitions_per_insert_block, 100), a refusal that no retry cures.
// The batch is stored whole, and written again under its token stores
// nothing twice.
func testManyDays(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := ctxT(t)
	const days = 101
	day := uint64(24 * time.Hour)
	base := uint64(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	spans := make([]schema.Span, days)
	hops := make([]schema.Hop, days)
	for i := range spans {
		// Day order differs from row order, so parts are not just runs.
		start := base + uint64((i*37)%days)*day
		spans[i] = schema.Span{TraceID: tid(i), SpanID: sid(i), Service: "svc", Name: "op", StartNs: start, EndNs: start + 1000}
		hops[i] = sampleHop(i)
		hops[i].StartNs = start
	}
	requireStoredOnce(t, s, "days-1", spans, hops, "a 101-day batch")
	got, _, err := s.Trace(ctx, tid(100), store.TraceLimits{})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, spans[100].StartNs, got[0].StartNs)
}

// testLargeBatch writes spans that share a resource of 1,024 attributes of
// 2 KiB (the ingest limits' most): about 2 MiB per row once the block
// repeats the resource per row, 100 MiB in all, more than one insert may
// carry. Every span is stored once, also when the batch is written again.
func testLargeBatch(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := ctxT(t)
	res := make(schema.Attributes, 1024)
	for i := range res {
		res[i] = schema.Str(fmt.Sprintf("resource.attribute.%04d", i), strings.Repeat("v", 2048))
	}
	spans := make([]schema.Span, 48)
	start := uint64(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	for i := range spans {
		spans[i] = schema.Span{TraceID: tid(i), SpanID: sid(i), Service: "svc", Name: "op", StartNs: start, EndNs: start + 1000, ResourceAttrs: res}
	}
	for range 2 {
		require.NoError(t, s.WriteSpans(ctx, "large-1", spans))
	}
	n, err := s.CountRows(ctx, "spans")
	require.NoError(t, err)
	require.EqualValues(t, len(spans), n)
	got, _, err := s.Trace(ctx, tid(47), store.TraceLimits{})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, res, got[0].ResourceAttrs)

	// One trace of 20 such spans, read with a 10 MiB byte bound: the
	// first four (about 2.1 MiB each) and a truncation mark; a bound below
	// one span still returns the first.
	one := make([]schema.Span, 20)
	for i := range one {
		one[i] = schema.Span{TraceID: tid(500), SpanID: sid(500 + i), Service: "svc", Name: "op", StartNs: start + uint64(i), EndNs: start + 1000, ResourceAttrs: res}
	}
	require.NoError(t, s.WriteSpans(ctx, "large-2", one))
	got, truncated, err := s.Trace(ctx, tid(500), store.TraceLimits{Spans: 100, Bytes: 10 << 20})
	require.NoError(t, err)
	require.True(t, truncated)
	require.Len(t, got, 4)
	require.Equal(t, one[3].SpanID, got[3].SpanID, "the earliest spans are kept")
	got, truncated, err = s.Trace(ctx, tid(500), store.TraceLimits{Bytes: 1})
	require.NoError(t, err)
	require.True(t, truncated)
	require.Len(t, got, 1)
	got, truncated, err = s.Trace(ctx, tid(500), store.TraceLimits{Bytes: 1 << 30})
	require.NoError(t, err)
	require.False(t, truncated)
	require.Len(t, got, 20)
}

// requireStoredOnce writes spans and hops twice under token and checks
// that the spans, the trace-id lookup and the hops hold each row once.
func requireStoredOnce(t *testing.T, s *chsql.Store, token string, spans []schema.Span, hops []schema.Hop, what string) {
	t.Helper()
	ctx := ctxT(t)
	for range 2 {
		require.NoError(t, s.WriteSpans(ctx, token, spans))
		require.NoError(t, s.WriteHops(ctx, token, hops))
	}
	for table, want := range map[string]int{"spans": len(spans), "trace_index": len(spans), "hops": len(hops)} {
		n, err := s.CountRows(ctx, table)
		require.NoError(t, err)
		require.EqualValues(t, want, n, "%s: every row of %s stored, once", table, what)
	}
}

// testSeveralBlocks writes spans and hops two and a half blocks long
// (chsql.InsertBlockRows): each is stored once, also when the batch is
// written again, rows of every block read back, and on one server each
// table's INSERT made one part — the engine squashes an insert's blocks,
// so sending a batch in blocks leaves no more parts to merge than one
// block did. (A cluster's inserts go through Distributed tables, which
// split them by shard.)
func testSeveralBlocks(t *testing.T, h Harness) {
	s, db := open(t, h)
	ctx := ctxT(t)
	n := chsql.InsertBlockRows*5/2 + 7
	start := uint64(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	spans := make([]schema.Span, n)
	hops := make([]schema.Hop, n)
	for i := range spans {
		spans[i] = schema.Span{TraceID: tid(i), SpanID: sid(i), Service: "svc", Name: fmt.Sprintf("op-%d", i),
			StartNs: start + uint64(i), EndNs: start + uint64(i) + 1000, Attrs: schema.Attributes{schema.Str("i", fmt.Sprint(i))}}
		hops[i] = sampleHop(i)
		hops[i].StartNs = start + uint64(i)
	}
	if s.Cluster() == "" {
		// Merges would make one part of several before they are counted.
		for _, table := range []string{"spans", "trace_index", "hops"} {
			require.NoError(t, s.Conn().Exec(ctx, "SYSTEM STOP MERGES "+db+"."+table, nil))
		}
	}
	requireStoredOnce(t, s, "blocks-1", spans, hops, "a batch of several blocks")
	for _, i := range []int{0, chsql.InsertBlockRows - 1, chsql.InsertBlockRows, 2*chsql.InsertBlockRows + 1, n - 1} {
		got, _, err := s.Trace(ctx, tid(i), store.TraceLimits{})
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, spans[i].Name, got[0].Name)
		require.Equal(t, spans[i].Attrs, got[0].Attrs)
	}
	if s.Cluster() != "" {
		return
	}
	for _, table := range []string{"spans", "trace_index", "hops"} {
		var parts uint64
		rows, err := s.Conn().Query(ctx, "SELECT count() FROM system.parts WHERE active AND database = {db:String} AND table = {t:String}",
			chsql.Params{chsql.P("db", db), chsql.P("t", table)})
		require.NoError(t, err)
		require.True(t, rows.Next())
		require.NoError(t, rows.Scan(&parts))
		require.NoError(t, rows.Close())
		require.EqualValues(t, 1, parts, "%s: one INSERT of several blocks is one part", table)
	}
}

func testMissingSpans(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := ctxT(t)
	spans := SpanBatch(61, 1200) // 120 traces of 10 spans
	require.NoError(t, s.WriteSpans(ctx, "missing-1", spans[:700]))
	missing, err := s.MissingSpans(ctx, spans)
	require.NoError(t, err)
	require.Equal(t, spans[700:], missing)
	none, err := s.MissingSpans(ctx, spans[:700])
	require.NoError(t, err)
	require.Empty(t, none)
	all, err := s.MissingSpans(ctx, spans[700:])
	require.NoError(t, err)
	require.Equal(t, spans[700:], all)
}

// testRetryAfterUnrecordedAttempt: on servers without
// insert_deduplication_token a batch's token is recorded after its insert,
// so an attempt can land without it (the writer died in between). The
// attempt itself is recorded before the insert; its retry must leave out
// the spans that landed. Engines with the setting deduplicate by token and
// keep no such records.
func testRetryAfterUnrecordedAttempt(t *testing.T, h Harness) {
	s, db := open(t, h)
	ctx := ctxT(t)
	spans := SpanBatch(71, 300)
	require.NoError(t, s.WriteSpans(ctx, "landed", spans))
	attempts := func() uint64 {
		rows, err := s.Conn().Query(ctx, "SELECT count() FROM "+db+".batches WHERE tbl = 'spans attempt'", nil)
		require.NoError(t, err)
		defer rows.Close()
		require.True(t, rows.Next())
		var n uint64
		require.NoError(t, rows.Scan(&n))
		return n
	}
	if s.Features().DedupToken {
		require.Zero(t, attempts(), "the token deduplicates: no attempt is recorded")
		return
	}
	require.EqualValues(t, 1, attempts(), "the first attempt is recorded")
	// The state a writer leaves that died after inserting batch "lost" (the
	// same spans) and before recording its token.
	require.NoError(t, s.Conn().Exec(ctx, "INSERT INTO "+db+".batches (token, tbl, rows, written_ns) SELECT 'lost', 'spans attempt', 300, 1", nil))
	require.NoError(t, s.WriteSpans(ctx, "lost", spans))
	n, err := s.CountRows(ctx, "spans")
	require.NoError(t, err)
	require.EqualValues(t, 300, n, "the retry stored the spans that landed again")
	missing, err := s.MissingSpans(ctx, spans)
	require.NoError(t, err)
	require.Empty(t, missing, "every span is stored")
}

func testFollowPositions(t *testing.T, h Harness) {
	s, db := open(t, h)
	ctx := ctxT(t)
	_, ok, err := s.FollowPosition(ctx, "clickhouse://a:9000 otel.otel_traces")
	require.NoError(t, err)
	require.False(t, ok, "a source never followed has no position")
	require.NoError(t, s.SaveFollowPosition(ctx, "clickhouse://a:9000 otel.otel_traces", 200))
	require.NoError(t, s.SaveFollowPosition(ctx, "clickhouse://a:9000 otel.otel_traces", 300))
	require.NoError(t, s.SaveFollowPosition(ctx, "clickhouse://a:9000 otel.otel_traces", 250), "a late, smaller save")
	require.NoError(t, s.SaveFollowPosition(ctx, "/data other.otel_traces", 7))

	// A restart opens the database again.
	again, err := h.Open(ctx, db)
	require.NoError(t, err)
	defer again.Close()
	for _, tt := range []struct {
		source string
		want   uint64
	}{{"clickhouse://a:9000 otel.otel_traces", 300}, {"/data other.otel_traces", 7}} {
		pos, ok, err := again.FollowPosition(ctx, tt.source)
		require.NoError(t, err)
		require.True(t, ok, tt.source)
		require.Equal(t, tt.want, pos, tt.source)
	}
}

func testConcurrentWriters(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := ctxT(t)
	const writers, batches, perBatch = 8, 4, 250
	var wg sync.WaitGroup
	errs := make(chan error, writers*batches)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				spans := make([]schema.Span, perBatch)
				for i := range spans {
					n := (w*batches+b)*perBatch + i
					spans[i] = schema.Span{TraceID: tid(w*batches + b), SpanID: sid(n), Service: fmt.Sprintf("svc%d", w),
						Name: "op", StartNs: uint64(1e18) + uint64(n), EndNs: uint64(1e18) + uint64(n) + 5,
						Attrs: schema.Attributes{schema.Int("n", int64(n))}}
				}
				errs <- s.WriteSpans(ctx, fmt.Sprintf("w%d-b%d", w, b), spans)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	n, err := s.CountRows(ctx, "spans")
	require.NoError(t, err)
	require.EqualValues(t, writers*batches*perBatch, n)
	got, _, err := s.Trace(ctx, tid(3*batches+2), store.TraceLimits{})
	require.NoError(t, err)
	require.Len(t, got, perBatch)
	require.Equal(t, "svc3", got[0].Service)
}

// testInferredEdge checks that an edge whose calls recorded no timeout
// reports the median inferred one, with its confidence, and that an edge
// without inference reports none.
func testInferredEdge(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := ctxT(t)
	base := uint64(1_700_000_000_000_000_000)
	var hops []schema.Hop
	for r := range 3 {
		call := schema.Hop{TraceID: tid(r), SpanID: sid(r*10 + 1), ParentSpanID: sid(r * 10), Service: "gw",
			Operation: "GET cache", Kind: schema.KindClient, Path: "gw:GET / > cache:get",
			CallerService: "gw", CallerOperation: "GET /", CalleeService: "cache", CalleeOperation: "get",
			StartNs: base + uint64(r)*1e9, DurationNs: 250e6, TimedOut: true,
			InferredTimeoutMs: schema.Ms([]float64{250, 251, 250}[r]), InferenceConfidence: []float64{0.5, 0.75, 0.75}[r]}
		plain := call
		plain.SpanID, plain.CalleeService, plain.Path, plain.InferredTimeoutMs, plain.InferenceConfidence = sid(r*10+2), "db", "gw:GET / > db:get", nil, 0
		hops = append(hops, call, plain)
	}
	require.NoError(t, s.WriteHops(ctx, "inferred", hops))
	edges, err := s.Edges(ctx, store.Window{SinceNs: base, UntilNs: base + 10e9}, 0)
	require.NoError(t, err)
	require.Len(t, edges, 2)
	byCallee := map[string]store.EdgeStats{}
	for _, e := range edges {
		byCallee[e.CalleeService] = e
	}
	cache := byCallee["cache"]
	require.Nil(t, cache.MedianTimeoutMs, "no call recorded a timeout")
	require.NotNil(t, cache.InferredTimeoutMs)
	require.InDelta(t, 250, *cache.InferredTimeoutMs, 1)
	require.InDelta(t, 0.75, cache.InferredTimeoutConfidence, 0.26)
	require.Nil(t, byCallee["db"].InferredTimeoutMs)
	require.Zero(t, byCallee["db"].InferredTimeoutConfidence)
}

func testAggregates(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := ctxT(t)
	base := uint64(1_700_000_000_000_000_000)
	var hops []schema.Hop
	// Three requests on one path: durations 100, 200, 900 ms with budget 500
	// ms; the third is over budget. Request 2 calls the callee twice (retry).
	for r := range 3 {
		// PathCalls as the analyzer writes it: on the first hop of each
		// path of the trace, the times the trace went down the path.
		entry := schema.Hop{TraceID: tid(r), SpanID: sid(r * 10), Service: "gw", Operation: "GET /", Kind: schema.KindServer,
			Path: "gw:GET /", RootPath: "gw:GET /", StartNs: base + uint64(r)*1e9, DurationNs: []uint64{100e6, 200e6, 900e6}[r],
			BudgetMs: schema.Ms(500), OrphanedMs: float64(r * 10), PathCalls: 1}
		hops = append(hops, entry)
		attempts := 1
		if r == 1 {
			attempts = 2
		}
		for a := 1; a <= attempts; a++ {
			call := schema.Hop{TraceID: tid(r), SpanID: sid(r*10 + a), ParentSpanID: sid(r * 10), Service: "gw",
				Operation: "GET db", Kind: schema.KindClient, Path: "gw:GET / > db:query",
				CallerService: "gw", CallerOperation: "GET /", CalleeService: "db", CalleeOperation: "query",
				StartNs: entry.StartNs + 1, DurationNs: 50e6, TimeoutMs: schema.Ms(300), Attempt: uint32(a)}
			if a == 1 {
				call.PathCalls = uint32(attempts)
			}
			if r == 1 && a == 1 {
				// The first attempt timed out at the caller's 300 ms while
				// the database took 900 ms: the edge's latency is the 900.
				call.DurationNs, call.CalleeDurationNs = 300e6, 900e6
			}
			hops = append(hops, call)
		}
	}
	require.NoError(t, s.WriteHops(ctx, "agg", hops))
	require.NoError(t, s.WriteFindings(ctx, "agg", []schema.Finding{
		{ID: "x1", Kind: schema.KindOrphanedWork, Path: "gw:GET /", DetectedAt: time.Unix(0, int64(base)), Evidence: map[string]float64{}},
		{ID: "x2", Kind: schema.KindOrphanedWork, Path: "gw:GET /", DetectedAt: time.Unix(0, int64(base)), Evidence: map[string]float64{}},
	}))
	w := store.Window{SinceNs: base, UntilNs: base + 10e9}

	paths, err := s.Paths(ctx, w, 0)
	require.NoError(t, err)
	require.Len(t, paths, 2)
	// The uninstrumented database has no entry hops: its path counts the
	// calls made to it, busiest first.
	calls := paths[0]
	require.Equal(t, "gw:GET / > db:query", calls.Path)
	require.EqualValues(t, 4, calls.Requests)
	require.EqualValues(t, 2, calls.MaxCallsPerTrace)
	require.InDelta(t, 4.0/3, calls.MeanCallsPerTrace, 1e-9, "2 calls in one trace, 1 in two others")
	require.InDelta(t, 50, calls.P50DurationMs, 1)
	p := paths[1]
	require.Equal(t, "gw:GET /", p.Path)
	require.EqualValues(t, 3, p.Requests)
	require.EqualValues(t, 2, p.WithinBudget)
	require.InDelta(t, 200, p.P50DurationMs, 1)
	require.NotNil(t, p.P50BudgetMs)
	require.InDelta(t, 500, *p.P50BudgetMs, 0.001)
	require.InDelta(t, 30, p.OrphanedMs, 0.001)
	require.EqualValues(t, 1, p.MaxCallsPerTrace)
	require.InDelta(t, 1, p.MeanCallsPerTrace, 1e-9)
	require.EqualValues(t, 2, p.FindingsByKind[schema.KindOrphanedWork])

	requests, err := s.PathRequests(ctx, w, 0)
	require.NoError(t, err)
	require.Equal(t, map[string]uint64{calls.Path: 4, p.Path: 3}, requests, "the requests Paths counts")
	busiest, err := s.PathRequests(ctx, w, 1)
	require.NoError(t, err)
	require.Equal(t, map[string]uint64{calls.Path: 4}, busiest, "the limit keeps the busiest paths")

	edges, err := s.Edges(ctx, w, 0)
	require.NoError(t, err)
	require.Len(t, edges, 1)
	e := edges[0]
	require.Equal(t, []string{"gw", "GET /", "db", "query"}, []string{e.CallerService, e.CallerOperation, e.CalleeService, e.CalleeOperation})
	require.EqualValues(t, 4, e.Calls)
	require.EqualValues(t, 1, e.Retries)
	require.NotNil(t, e.MedianTimeoutMs)
	require.InDelta(t, 300, *e.MedianTimeoutMs, 0.001)
	require.InDelta(t, 50, e.P50DurationMs, 1)
	require.Greater(t, e.P99DurationMs, 800.0, "the callee's own 900 ms, not the caller's 300 ms timeout")

	tot, err := s.Totals(ctx, w)
	require.NoError(t, err)
	require.EqualValues(t, 3, tot.Requests)
	require.EqualValues(t, 2, tot.WithinBudget)
	require.EqualValues(t, 2, tot.FindingsByKind[schema.KindOrphanedWork])

	empty, err := s.Paths(ctx, store.Window{SinceNs: base + 20e9, UntilNs: base + 30e9}, 0)
	require.NoError(t, err)
	require.Empty(t, empty)
	none, err := s.PathRequests(ctx, store.Window{SinceNs: base + 20e9, UntilNs: base + 30e9}, 0)
	require.NoError(t, err)
	require.Empty(t, none)
}

// hostile are filter values that would change a query's shape if they were
// spliced into SQL.
var hostile = []string{
	"'", "''", `\`, `\'`, "' OR 1=1 --", "x' UNION SELECT * FROM system.tables --", "/* comment */",
	"; DROP TABLE spans", "{kind:String}", "@kind", "?", "\x00", "\n\t\r", "é🚀\u202e", strings.Repeat("a'", 5000),
}

func testHostileFilters(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := ctxT(t)
	f := sampleFinding(1, schema.KindOrphanedWork, "svc", time.Unix(1_700_000_000, 0))
	require.NoError(t, s.WriteFindings(ctx, "hf", []schema.Finding{f}))
	for _, v := range hostile {
		for _, q := range []store.FindingQuery{{Kind: schema.Kind(v)}, {Severity: schema.Severity(v)}, {Service: v}, {Path: v}, {TraceID: v}} {
			page, err := s.Findings(ctx, q)
			require.NoError(t, err, "value %q", v)
			require.Empty(t, page.Findings, "value %q matched", v)
		}
		_, _, err := s.Trace(ctx, tid(7), store.TraceLimits{})
		require.ErrorIs(t, err, store.ErrNotFound)
	}
	// A filter value that contains quotes still matches exactly.
	g := sampleFinding(2, schema.KindOrphanedWork, `it's "quoted" \ `, time.Unix(1_700_000_000, 0))
	require.NoError(t, s.WriteFindings(ctx, "hf2", []schema.Finding{g}))
	page, err := s.Findings(ctx, store.FindingQuery{Service: g.Service})
	require.NoError(t, err)
	require.Len(t, page.Findings, 1)
	n, err := s.CountRows(ctx, "findings")
	require.NoError(t, err)
	require.EqualValues(t, 2, n, "no filter changed the data")
}

func testDeadline(t *testing.T, h Harness) {
	s, _ := open(t, h)
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	_, err := s.Findings(expired, store.FindingQuery{})
	require.ErrorIs(t, err, context.DeadlineExceeded)

	// A statement that would run for several seconds returns when its
	// deadline passes, not when it finishes.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	rows, err := s.Conn().Query(ctx, h.SlowQuery, nil)
	if err == nil {
		for rows.Next() {
		}
		err = rows.Err()
		rows.Close()
	}
	require.Error(t, err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 3*time.Second, "the call outlived its deadline by seconds")
}

func testOutage(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := ctxT(t)
	require.NoError(t, s.Ping(ctx))
	require.NoError(t, h.Server.Stop())

	pingCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	start := time.Now()
	err := s.Ping(pingCtx)
	cancel()
	require.Error(t, err, "a stopped server cannot answer")
	require.Less(t, time.Since(start), 5*time.Second, "no hang past the deadline")
	writeCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	err = s.WriteSpans(writeCtx, "outage", []schema.Span{richSpan()})
	cancel()
	require.Error(t, err)
	require.True(t, errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded), "error %v", err)

	require.NoError(t, h.Server.Start())
	// The pool's dead connections are replaced on use; a few attempts may
	// still meet one.
	var pingErr error
	for range 20 {
		attempt, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		pingErr = s.Ping(attempt)
		cancel()
		if pingErr == nil {
			break
		}
	}
	require.NoError(t, pingErr, "the engine reconnects after the server is back")
	require.NoError(t, s.WriteSpans(ctx, "after-outage", []schema.Span{richSpan()}))
	got, _, err := s.Trace(ctx, tid(1), store.TraceLimits{})
	require.NoError(t, err)
	require.Len(t, got, 1)
}

// testExtras checks the version-gated parts of the schema: on a current
// server inserts make compact parts merged wider and the otel_traces view answers with the Collector exporter's column
// names; on an old one the view is absent and the core still works.
func testExtras(t *testing.T, h Harness) {
	s, db := open(t, h)
	ctx := ctxT(t)
	rich := richSpan()
	require.NoError(t, s.WriteSpans(ctx, "extras", []schema.Span{rich}))
	// Inserts write compact parts where the engine has them (migration 0012).
	if s.Features().CompactParts {
		for _, table := range []string{"spans", "trace_index", "hops", "findings"} {
			var engine string
			require.NoError(t, queryOne(ctx, s, "SELECT engine_full FROM system.tables WHERE database = {db:String} AND name = {t:String}",
				chsql.Params{chsql.P("db", db), chsql.P("t", table)}, &engine))
			require.Contains(t, engine, "min_bytes_for_wide_part = 268435456", table)
			if s.Features().MergeSelector {
				require.Contains(t, engine, "merge_selector_base = 10", table) // migration 0018
			}
			if s.Features().CompressBlocks && (table == "spans" || table == "hops") {
				require.Contains(t, engine, "min_compress_block_size = 8192, max_compress_block_size = 65536") // migration 0024
			}
		}
	}
	var exists uint8
	require.NoError(t, queryOne(ctx, s, "SELECT toUInt8(count()) FROM system.tables WHERE database = {db:String} AND name = 'otel_traces'",
		chsql.Params{chsql.P("db", db)}, &exists))
	if !s.Features().OtelView {
		require.Zero(t, exists, "no view on a server without Map and DateTime64")
		return
	}
	require.EqualValues(t, 1, exists)
	var traceID, kind, status, service, timeout string
	var duration uint64
	require.NoError(t, queryOne(ctx, s, "SELECT TraceId, SpanKind, StatusCode, ServiceName, SpanAttributes['"+schema.AttrTimeoutMs+"'], Duration FROM "+db+".otel_traces",
		nil, &traceID, &kind, &status, &service, &timeout, &duration))
	require.Equal(t, []string{rich.TraceID.String(), "Client", "Error", "checkout", "1500"}, []string{traceID, kind, status, service, timeout})
	require.Equal(t, rich.DurationNs(), duration)
}

func queryOne(ctx context.Context, s *chsql.Store, query string, params chsql.Params, dest ...any) error {
	rows, err := s.Conn().Query(ctx, query, params)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		return errors.Join(errors.New("no row"), rows.Err())
	}
	return errors.Join(rows.Scan(dest...), rows.Err())
}

// testReanalysis writes two analyses of one trace, as the pipeline does when
// late spans re-open it: reads see only the later one.
func testReanalysis(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := ctxT(t)
	base := uint64(1_700_000_000_000_000_000)
	t1, t2 := base+60e9, base+120e9
	entry := func(span int, path string, analyzed uint64) schema.Hop {
		h := schema.Hop{TraceID: tid(1), SpanID: sid(span), Service: "svc", Operation: "op", Kind: schema.KindServer,
			Path: path, StartNs: base + uint64(span), DurationNs: 1e6, AnalyzedNs: analyzed}
		if span > 1 {
			h.ParentSpanID = sid(span - 1)
		}
		return h
	}
	// First analysis: the root and a span whose parent had not arrived.
	first := []schema.Hop{entry(1, "a:op", t1), entry(3, "… > c:op", t1)}
	stale := schema.Finding{ID: "stale", Kind: schema.KindBudgetReset, TraceID: tid(1).String(), Path: "… > c:op",
		DetectedAt: time.Unix(0, int64(t1)), Evidence: map[string]float64{}}
	require.NoError(t, s.WriteHops(ctx, "a1", first))
	require.NoError(t, s.WriteFindings(ctx, "a1", []schema.Finding{stale}))
	// Second analysis: the whole trace; the stale finding is gone.
	second := []schema.Hop{entry(1, "a:op", t2), entry(2, "a:op > b:op", t2), entry(3, "a:op > b:op > c:op", t2)}
	current := schema.Finding{ID: "current", Kind: schema.KindOrphanedWork, TraceID: tid(1).String(), Path: "a:op > b:op > c:op",
		DetectedAt: time.Unix(0, int64(t2)), Evidence: map[string]float64{}}
	edge := schema.Finding{ID: "edge", Kind: schema.KindLatencyInversion, Path: "a:op > b:op", DetectedAt: time.Unix(0, int64(t1)), Evidence: map[string]float64{}}
	// The analysis records the re-analysis before the new hops.
	require.NoError(t, s.WriteReanalysed(ctx, "a2", []schema.TraceID{tid(1)}, t2))
	require.NoError(t, s.WriteHops(ctx, "a2", second))
	require.NoError(t, s.WriteFindings(ctx, "a2", []schema.Finding{current, edge}))

	hops, err := s.TraceHops(ctx, tid(1), store.Window{})
	require.NoError(t, err)
	require.Equal(t, second, hops, "the latest analysis of each span")

	page, err := s.Findings(ctx, store.FindingQuery{})
	require.NoError(t, err)
	var ids []string
	for _, f := range page.Findings {
		ids = append(ids, f.ID)
	}
	require.ElementsMatch(t, []string{"current", "edge"}, ids, "the replaced analysis's finding is gone; edge findings stay")

	w := store.Window{SinceNs: base, UntilNs: base + 200e9}
	paths, err := s.Paths(ctx, w, 0)
	require.NoError(t, err)
	got := map[string]uint64{}
	for _, p := range paths {
		got[p.Path] = p.Requests
		// Hops written without calls per trace (before migration 0011)
		// count none, not NaN.
		require.Zero(t, p.MaxCallsPerTrace, p.Path)
		require.Zero(t, p.MeanCallsPerTrace, p.Path)
	}
	require.Equal(t, map[string]uint64{"a:op": 1, "a:op > b:op": 1, "a:op > b:op > c:op": 1}, got)
	requests, err := s.PathRequests(ctx, w, 0)
	require.NoError(t, err)
	require.Equal(t, got, requests, "PathRequests keeps the latest analysis as Paths does")
	tot, err := s.Totals(ctx, w)
	require.NoError(t, err)
	require.EqualValues(t, 1, tot.Requests)
	require.EqualValues(t, 1, tot.FindingsByKind[schema.KindOrphanedWork])
	require.Zero(t, tot.FindingsByKind[schema.KindBudgetReset])

	// A trace analysed once, next to it, is read as it is.
	once := entry(1, "a:op", t1)
	once.TraceID = tid(2)
	require.NoError(t, s.WriteHops(ctx, "b1", []schema.Hop{once}))
	require.NoError(t, s.WriteFindings(ctx, "b1", []schema.Finding{{ID: "once", Kind: schema.KindBudgetReset, TraceID: tid(2).String(),
		Path: "a:op", DetectedAt: time.Unix(0, int64(t1)), Evidence: map[string]float64{}}}))
	tot, err = s.Totals(ctx, w)
	require.NoError(t, err)
	require.EqualValues(t, 2, tot.Requests)
	require.EqualValues(t, 1, tot.FindingsByKind[schema.KindBudgetReset], "only the other trace's")

	// The set of re-analysed traces is bounded by the window: a window that
	// starts after the re-analysis sees neither of its analyses' findings
	// (both detected before it), and the other trace's as usual.
	page, err = s.Findings(ctx, store.FindingQuery{Window: store.Window{SinceNs: t1, UntilNs: t2 + 1}})
	require.NoError(t, err)
	ids = ids[:0]
	for _, f := range page.Findings {
		ids = append(ids, f.ID)
	}
	require.ElementsMatch(t, []string{"current", "edge", "once"}, ids)
}

// testDistinctFindingCounts writes findings the way the pipeline rewrites
// them: one edge's latency_inversion at every edge evaluation (26 rows of
// one id, its evidence and severity changing), a trace analysed twice
// (recorded as re-analysed, the same finding ids both times) and a trace's
// findings stored twice under two batch tokens. Every count (summary, paths,
// edges) counts each distinct finding once, as the findings read lists it.
func testDistinctFindingCounts(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := ctxT(t)
	base := uint64(1_700_000_000_000_000_000)
	const caller, callee = "a:op", "a:op > b:op"
	hopsOf := func(trace int, analyzed uint64) []schema.Hop {
		start := base + uint64(trace)*1e9
		root := schema.Hop{TraceID: tid(trace), SpanID: sid(trace * 10), Service: "a", Operation: "op", Kind: schema.KindServer,
			Path: caller, RootPath: caller, StartNs: start, DurationNs: 900e6, BudgetMs: schema.Ms(500), PathCalls: 1, AnalyzedNs: analyzed}
		call := schema.Hop{TraceID: tid(trace), SpanID: sid(trace*10 + 1), ParentSpanID: root.SpanID, Service: "a", Operation: "GET b",
			Kind: schema.KindClient, Path: callee, RootPath: caller, CallerService: "a", CallerOperation: "op",
			CalleeService: "b", CalleeOperation: "op", StartNs: start + 1, DurationNs: 300e6, TimeoutMs: schema.Ms(300),
			Attempt: 1, PathCalls: 1, AnalyzedNs: analyzed}
		return []schema.Hop{root, call}
	}
	finding := func(id string, kind schema.Kind, trace int, path string, at uint64) schema.Finding {
		f := schema.Finding{ID: id, Kind: kind, Severity: schema.SeverityWarning, Service: "a", Operation: "op",
			CallerService: "a", CalleeService: "b", Path: path, DetectedAt: time.Unix(0, int64(at)).UTC(),
			Evidence: map[string]float64{"timeout_ms": 300}, Message: id}
		if trace > 0 {
			f.TraceID, f.SpanID = tid(trace).String(), sid(trace*10+1).String()
		}
		return f
	}

	// Trace 1, analysed at t1 and again at t2 (late spans re-opened it):
	// the second analysis yields the same ids.
	t1, t2 := base+60e9, base+120e9
	require.NoError(t, s.WriteHops(ctx, "t1-a1", hopsOf(1, t1)))
	require.NoError(t, s.WriteFindings(ctx, "t1-a1", []schema.Finding{
		finding("t1-orphan", schema.KindOrphanedWork, 1, callee, t1), finding("t1-inversion", schema.KindTimeoutInversion, 1, callee, t1)}))
	require.NoError(t, s.WriteReanalysed(ctx, "t1-a2", []schema.TraceID{tid(1)}, t2))
	require.NoError(t, s.WriteHops(ctx, "t1-a2", hopsOf(1, t2)))
	require.NoError(t, s.WriteFindings(ctx, "t1-a2", []schema.Finding{
		finding("t1-orphan", schema.KindOrphanedWork, 1, callee, t2), finding("t1-inversion", schema.KindTimeoutInversion, 1, callee, t2)}))
	// Trace 2: the same rows stored twice, under two tokens.
	require.NoError(t, s.WriteHops(ctx, "t2", hopsOf(2, t1)))
	for _, token := range []string{"t2-first", "t2-again"} {
		require.NoError(t, s.WriteFindings(ctx, token, []schema.Finding{finding("t2-reset", schema.KindBudgetReset, 2, caller, t1)}))
	}
	// The edge a → b, evaluated every minute for 26 minutes: one id.
	const evaluations = 26
	for i := range evaluations {
		f := finding("edge-a-b", schema.KindLatencyInversion, 0, callee, base+uint64(i)*60e9)
		f.Evidence = map[string]float64{"timeout_ms": 300, "p99_ms": 400 + float64(i), "samples": float64(100 + i)}
		if i%2 == 1 {
			f.Severity = schema.SeverityCritical
		}
		require.NoError(t, s.WriteFindings(ctx, fmt.Sprintf("edge-%d", i), []schema.Finding{f}))
	}
	rows := 2 + 2 + 2 + evaluations
	if s.Cluster() != "" && !s.Features().DedupToken {
		// A replicated table on a server without
		// insert_deduplication_token knows a block by its hash alone:
		// trace 2's rows under a second token are the first block again,
		// and the shard drops them as a retry. The reads below count them
		// once either way.
		rows--
	}
	n, err := s.CountRows(ctx, "findings")
	require.NoError(t, err)
	require.EqualValues(t, rows, n, "every write is a row")

	w := store.Window{SinceNs: base, UntilNs: base + 30*60e9}
	page, err := s.Findings(ctx, store.FindingQuery{Window: w, Limit: store.MaxPageSize})
	require.NoError(t, err)
	listed := map[schema.Kind][]string{}
	for _, f := range page.Findings {
		listed[f.Kind] = append(listed[f.Kind], f.ID)
	}
	require.Equal(t, map[schema.Kind][]string{
		schema.KindLatencyInversion: {"edge-a-b"}, schema.KindOrphanedWork: {"t1-orphan"},
		schema.KindTimeoutInversion: {"t1-inversion"}, schema.KindBudgetReset: {"t2-reset"},
	}, listed, "the findings read lists each id once")

	tot, err := s.Totals(ctx, w)
	require.NoError(t, err)
	require.EqualValues(t, 2, tot.Requests)
	require.Equal(t, map[schema.Kind]uint64{
		schema.KindLatencyInversion: 1, schema.KindOrphanedWork: 1, schema.KindTimeoutInversion: 1, schema.KindBudgetReset: 1,
	}, tot.FindingsByKind, "the summary counts what the findings read lists")

	paths, err := s.Paths(ctx, w, 0)
	require.NoError(t, err)
	byPath := map[string]map[schema.Kind]uint64{}
	for _, p := range paths {
		byPath[p.Path] = p.FindingsByKind
	}
	require.Equal(t, map[string]map[schema.Kind]uint64{
		caller: {schema.KindBudgetReset: 1},
		callee: {schema.KindLatencyInversion: 1, schema.KindOrphanedWork: 1, schema.KindTimeoutInversion: 1},
	}, byPath)

	// Edges count calls, from hops: the findings written again add nothing,
	// and the re-analysed trace's calls count once.
	edges, err := s.Edges(ctx, w, 0)
	require.NoError(t, err)
	require.Len(t, edges, 1)
	require.EqualValues(t, 2, edges[0].Calls)

	// A window holding the last five evaluations only still counts the
	// edge's finding once.
	recent := store.Window{SinceNs: base + (evaluations-5)*60e9, UntilNs: w.UntilNs}
	tot, err = s.Totals(ctx, recent)
	require.NoError(t, err)
	require.Equal(t, map[schema.Kind]uint64{schema.KindLatencyInversion: 1}, tot.FindingsByKind)
}

// testProblemStats writes the counts of two problems over two intervals in
// two batches, and one batch twice under its token: reads sum each problem
// and interval over the batches, once per token, within the window.
func testProblemStats(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := ctxT(t)
	at := time.Unix(1_700_000_000, 0).UTC()
	key := func(callee string) problems.Key {
		return problems.Key{Kind: schema.KindOrphanedWork, CallerService: "gateway", CallerOperation: "POST /checkout",
			CalleeService: callee, CalleeOperation: "GET /x"}
	}
	stat := func(callee string, interval time.Time, findings uint64, impact float64) problems.Stat {
		return problems.Stat{Key: key(callee), Interval: interval, Findings: findings, Requests: findings, Impact: impact}
	}
	later := at.Add(5 * time.Minute)
	for range 2 { // the first batch retried: stored once
		require.NoError(t, s.WriteProblemStats(ctx, "stats-1", []problems.Stat{stat("order", at, 3, 1.5), stat("pricing", at, 1, 0.25)}))
	}
	require.NoError(t, s.WriteProblemStats(ctx, "stats-2", []problems.Stat{stat("order", at, 2, 1), stat("order", later, 4, 2)}))

	got, err := s.ProblemStats(ctx, store.WindowOf(at, later))
	require.NoError(t, err)
	want := []problems.Stat{stat("order", at, 5, 2.5), stat("order", later, 4, 2), stat("pricing", at, 1, 0.25)}
	sort.Slice(want, func(a, b int) bool {
		if want[a].Key.ID() != want[b].Key.ID() {
			return want[a].Key.ID() < want[b].Key.ID()
		}
		return want[a].Interval.Before(want[b].Interval)
	})
	require.Equal(t, want, got)

	got, err = s.ProblemStats(ctx, store.WindowOf(later, later.Add(time.Minute)))
	require.NoError(t, err)
	require.Equal(t, []problems.Stat{stat("order", later, 4, 2)}, got, "only the intervals that start in the window")
}

// testEdgeStates writes the edge states of three replicas over several
// evaluations, one batch twice under its token: reads return, for each
// replica but the one asking, the states of its latest evaluation since
// the bound — an edge the replica no longer had then is left out, as is a
// replica that has not written since.
func testEdgeStates(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := ctxT(t)
	state := func(replica string, at uint64, callee string, data string) schema.EdgeState {
		return schema.EdgeState{Replica: replica, EvaluatedNs: at, CallerService: "gateway", CallerOperation: "POST /checkout",
			CalleeService: callee, CalleeOperation: "GET /x", State: []byte(data)}
	}
	// Recent times: the table's TTL (a day, on servers that have TTL)
	// drops older states at the next merge.
	t0 := uint64(time.Now().Add(-time.Hour).UnixNano())
	for range 2 { // retried under its token: stored once
		require.NoError(t, s.WriteEdgeStates(ctx, "edges-a-1", []schema.EdgeState{state("a", t0, "order", "a1-order"), state("a", t0, "pricing", "a1-pricing")}))
	}
	require.NoError(t, s.WriteEdgeStates(ctx, "edges-a-2", []schema.EdgeState{state("a", t0+60e9, "order", "a2-order\x00\xff")}))
	require.NoError(t, s.WriteEdgeStates(ctx, "edges-b-1", []schema.EdgeState{state("b", t0+30e9, "order", "b1-order")}))
	require.NoError(t, s.WriteEdgeStates(ctx, "edges-c-1", []schema.EdgeState{state("c", t0-60e9, "order", "c-stale")}))

	got, err := s.EdgeStates(ctx, "me", t0)
	require.NoError(t, err)
	require.Equal(t, []schema.EdgeState{state("a", t0+60e9, "order", "a2-order\x00\xff"), state("b", t0+30e9, "order", "b1-order")}, got,
		"a's latest evaluation no longer had pricing; c wrote nothing since the bound")

	got, err = s.EdgeStates(ctx, "a", t0)
	require.NoError(t, err)
	require.Equal(t, []schema.EdgeState{state("b", t0+30e9, "order", "b1-order")}, got, "the asking replica's own states are left out")
}
