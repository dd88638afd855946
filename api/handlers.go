package api

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/budgetd/budgetd/analyze"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store"
)

func (s *Server) healthz(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}

// readyz is ready when the store answers, its schema is current and every
// further check (Settings.Ready) passes.
func (s *Server) readyz(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 5*time.Second)
	defer cancel()
	if err := s.store.Ping(ctx); err != nil {
		c.JSON(http.StatusServiceUnavailable, gin.H{"status": "store unreachable"})
		return
	}
	applied, known, err := s.store.SchemaVersion(ctx)
	if err != nil || applied != known {
		c.JSON(http.StatusServiceUnavailable, gin.H{"status": "schema not current", "applied": applied, "known": known})
		return
	}
	for _, check := range s.ready {
		if err := check(); err != nil {
			c.JSON(http.StatusServiceUnavailable, gin.H{"status": "not ready", "reason": err.Error()})
			return
		}
	}
	body := gin.H{"status": "ready", "schema_version": applied}
	if len(s.warnings) > 0 {
		body["warnings"] = s.warnings
	}
	c.JSON(http.StatusOK, body)
}

// findingsResponse is GET /findings.
type findingsResponse struct {
	Findings []schema.Finding `json:"findings"`
	Next     string           `json:"next,omitempty"`
}

func (s *Server) findings(c *gin.Context) {
	if err := knownParams(c, "kind", "severity", "service", "path", "trace_id", "since", "until", "limit", "next"); err != nil {
		s.writeError(c, err)
		return
	}
	q := store.FindingQuery{
		Kind: schema.Kind(c.Query("kind")), Severity: schema.Severity(c.Query("severity")),
		Service: c.Query("service"), Path: c.Query("path"), TraceID: c.Query("trace_id"), Cursor: c.Query("next"),
	}
	if q.Kind != "" && !schema.ValidKind(q.Kind) {
		s.writeError(c, badParam("kind", "unknown kind %q", q.Kind))
		return
	}
	if q.Severity != "" && !schema.ValidSeverity(q.Severity) {
		s.writeError(c, badParam("severity", "want info, warning or critical, got %q", q.Severity))
		return
	}
	if q.TraceID != "" {
		id, err := schema.ParseTraceID(q.TraceID)
		if err != nil {
			s.writeError(c, badParam("trace_id", "want 32 hex digits"))
			return
		}
		q.TraceID = id.String()
	}
	var err error
	if q.Limit, err = limit(c, store.DefaultPageSize, store.MaxPageSize); err != nil {
		s.writeError(c, err)
		return
	}
	// Findings default to all time: their window is an optional filter.
	if c.Query("since") != "" || c.Query("until") != "" {
		if q.Window, err = s.window(c); err != nil {
			s.writeError(c, err)
			return
		}
	}
	ctx, cancel, err := s.storeContext(c)
	if err != nil {
		s.writeError(c, err)
		return
	}
	defer cancel()
	page, err := s.store.Findings(ctx, q)
	if err != nil {
		s.writeError(c, err)
		return
	}
	if page.Findings == nil {
		page.Findings = []schema.Finding{}
	}
	c.JSON(http.StatusOK, findingsResponse{Findings: page.Findings, Next: page.Next})
}

// windowJSON echoes the window a figure covers.
type windowJSON struct {
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
}

func windowOf(w store.Window) windowJSON {
	return windowJSON{Since: time.Unix(0, int64(w.SinceNs)).UTC(), Until: time.Unix(0, int64(w.Until())).UTC()}
}

// pathJSON is one row of GET /paths.
type pathJSON struct {
	Path                string            `json:"path"`
	Requests            uint64            `json:"requests"`
	ErrorRate           float64           `json:"error_rate"`
	P50DurationMs       float64           `json:"p50_duration_ms"`
	P99DurationMs       float64           `json:"p99_duration_ms"`
	P50BudgetMs         *float64          `json:"p50_budget_ms"`
	FindingsByKind      map[string]uint64 `json:"findings_by_kind"`
	OrphanedWorkSeconds float64           `json:"orphaned_work_seconds"`
	MaxCallsPerTrace    uint64            `json:"max_calls_per_trace"`
	MeanCallsPerTrace   float64           `json:"mean_calls_per_trace"`
	Goodput             float64           `json:"goodput"`
}

func ratio(n, d uint64) float64 {
	if d == 0 {
		return 0
	}
	return float64(n) / float64(d)
}

// kindCounts lists every kind, zeros included, so dashboards get stable keys.
func kindCounts(m map[schema.Kind]uint64) map[string]uint64 {
	out := make(map[string]uint64, len(schema.Kinds))
	for _, k := range schema.Kinds {
		out[string(k)] = m[k]
	}
	return out
}

func (s *Server) paths(c *gin.Context) {
	w, n, ctx, cancel, ok := s.windowQuery(c)
	if !ok {
		return
	}
	defer cancel()
	rows, err := s.store.Paths(ctx, w, n)
	if err != nil {
		s.writeError(c, err)
		return
	}
	out := make([]pathJSON, 0, len(rows))
	for _, p := range rows {
		out = append(out, pathJSON{
			Path: p.Path, Requests: p.Requests, ErrorRate: ratio(p.Errors, p.Requests),
			P50DurationMs: p.P50DurationMs, P99DurationMs: p.P99DurationMs, P50BudgetMs: p.P50BudgetMs,
			FindingsByKind: kindCounts(p.FindingsByKind), OrphanedWorkSeconds: p.OrphanedMs / 1000,
			MaxCallsPerTrace: p.MaxCallsPerTrace, MeanCallsPerTrace: p.MeanCallsPerTrace,
			Goodput: ratio(p.WithinBudget, p.Requests),
		})
	}
	c.JSON(http.StatusOK, gin.H{"window": windowOf(w), "paths": out})
}

// windowQuery reads the parameters shared by the aggregate endpoints (since,
// until, limit; nothing else) and derives the store context. On a bad
// parameter it answers and returns false.
func (s *Server) windowQuery(c *gin.Context) (store.Window, int, context.Context, context.CancelFunc, bool) {
	if err := knownParams(c, "since", "until", "limit"); err != nil {
		s.writeError(c, err)
		return store.Window{}, 0, nil, nil, false
	}
	n, err := limit(c, min(100, s.cfg.MaxRows), s.cfg.MaxRows)
	if err != nil {
		s.writeError(c, err)
		return store.Window{}, 0, nil, nil, false
	}
	w, ctx, cancel, ok := s.windowContext(c)
	return w, n, ctx, cancel, ok
}

// windowContext reads since and until and derives the store context. On a
// bad parameter it answers and returns false.
func (s *Server) windowContext(c *gin.Context) (store.Window, context.Context, context.CancelFunc, bool) {
	w, err := s.window(c)
	if err != nil {
		s.writeError(c, err)
		return w, nil, nil, false
	}
	ctx, cancel, err := s.storeContext(c)
	if err != nil {
		s.writeError(c, err)
		return w, nil, nil, false
	}
	return w, ctx, cancel, true
}

// edgeJSON is one row of GET /edges.
type edgeJSON struct {
	CallerService         string   `json:"caller_service"`
	CallerOperation       string   `json:"caller_operation"`
	CalleeService         string   `json:"callee_service"`
	CalleeOperation       string   `json:"callee_operation"`
	Calls                 uint64   `json:"calls"`
	CallerMedianTimeoutMs *float64 `json:"caller_median_timeout_ms"`
	CalleeP50Ms           float64  `json:"callee_p50_ms"`
	CalleeP99Ms           float64  `json:"callee_p99_ms"`
	RetryRatio            float64  `json:"retry_ratio"`
	// InferredTimeoutMs is the caller's timeout as budgetd estimated it for
	// calls that recorded none, with the estimate's confidence.
	InferredTimeoutMs         *float64 `json:"inferred_timeout_ms"`
	InferredTimeoutConfidence float64  `json:"inferred_timeout_confidence"`
	// Inversion is the latency_inversion detector's verdict: the edge holds
	// a latency_inversion finding detected in the window (the caller
	// routinely gives up on calls the callee goes on working on). It is
	// not the raw comparison of the figures above: the detector leaves out
	// callees that stopped at the deadline they were given, and judges a
	// caller without a timeout of its own on how long its deadline lets it
	// wait (docs/attributes.md §3a, §3b).
	Inversion bool `json:"inversion"`
}

// maxInversionPages bounds how many pages of latency_inversion findings
// GET /edges reads: an edge's verdict is one finding id, so a page of
// store.MaxPageSize holds the verdicts of that many edges.
const maxInversionPages = 10

func (s *Server) edges(c *gin.Context) {
	w, n, ctx, cancel, ok := s.windowQuery(c)
	if !ok {
		return
	}
	defer cancel()
	rows, err := s.store.Edges(ctx, w, n)
	if err != nil {
		s.writeError(c, err)
		return
	}
	inverted, err := s.invertedEdges(ctx, w)
	if err != nil {
		s.writeError(c, err)
		return
	}
	out := make([]edgeJSON, 0, len(rows))
	for _, e := range rows {
		out = append(out, edgeJSON{
			CallerService: e.CallerService, CallerOperation: e.CallerOperation,
			CalleeService: e.CalleeService, CalleeOperation: e.CalleeOperation,
			Calls: e.Calls, CallerMedianTimeoutMs: e.MedianTimeoutMs,
			CalleeP50Ms: e.P50DurationMs, CalleeP99Ms: e.P99DurationMs, RetryRatio: ratio(e.Retries, e.Calls),
			InferredTimeoutMs: e.InferredTimeoutMs, InferredTimeoutConfidence: e.InferredTimeoutConfidence,
			Inversion: inverted[e.CallerService+":"+e.CallerOperation+pathSep+e.CalleeService+":"+e.CalleeOperation],
		})
	}
	c.JSON(http.StatusOK, gin.H{"window": windowOf(w), "edges": out})
}

// pathSep joins the two ends of an edge finding's path.
const pathSep = " > "

// invertedEdges returns the paths ("caller:op > callee:op") of the edges
// with a latency_inversion finding detected in w.
func (s *Server) invertedEdges(ctx context.Context, w store.Window) (map[string]bool, error) {
	out := map[string]bool{}
	q := store.FindingQuery{Kind: schema.KindLatencyInversion, Window: w, Limit: store.MaxPageSize}
	for range maxInversionPages {
		page, err := s.store.Findings(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, f := range page.Findings {
			out[f.Path] = true
		}
		if page.Next == "" {
			break
		}
		q.Cursor = page.Next
	}
	return out, nil
}

// maxTraceSpans caps the spans GET /traces/{trace_id} returns (the earliest
// ones): a browser cannot draw more, and the answer must stay bounded.
const maxTraceSpans = 20_000

// maxTraceBytes caps the span data GET /traces/{trace_id} reads (see
// store.TraceLimits.Bytes); the JSON answer is about twice as large.
const maxTraceBytes = 32 << 20

// TraceLimits are the limits GET /traces/{trace_id} reads a trace with.
var TraceLimits = store.TraceLimits{Spans: maxTraceSpans, Bytes: maxTraceBytes}

// spanJSON is one span of GET /traces/{trace_id} with its budget chain.
type spanJSON struct {
	SpanID        string            `json:"span_id"`
	ParentSpanID  string            `json:"parent_span_id"`
	Service       string            `json:"service"`
	Name          string            `json:"name"`
	Kind          string            `json:"kind"`
	StartTime     time.Time         `json:"start_time"`
	StartOffsetMs float64           `json:"start_offset_ms"` // from the trace's first span
	DurationMs    float64           `json:"duration_ms"`
	Status        string            `json:"status"`
	StatusMessage string            `json:"status_message,omitempty"`
	Attributes    map[string]string `json:"attributes"`
	Events        []eventJSON       `json:"events"`
	Budget        *budgetJSON       `json:"budget"`
}

type eventJSON struct {
	Name       string            `json:"name"`
	OffsetMs   float64           `json:"offset_ms"` // from the trace's first span
	Attributes map[string]string `json:"attributes"`
}

// budgetJSON is the analysed budget of one span (its hop), when analysed.
type budgetJSON struct {
	Path        string   `json:"path"`
	RemainingMs *float64 `json:"remaining_ms"` // the request's real time left at this span's start
	BudgetMs    *float64 `json:"budget_ms"`    // budget.remaining_ms as recorded
	Source      string   `json:"source"`
	TimeoutMs   *float64 `json:"timeout_ms"`
	Attempt     uint32   `json:"attempt"`
	MaxAttempts uint32   `json:"max_attempts"`
	OrphanedMs  float64  `json:"orphaned_ms"`
	TimedOut    bool     `json:"timed_out"`
	Rejected    bool     `json:"rejected"`
	Inferred    bool     `json:"inferred"`
	// Zero-instrumentation inference, for spans that recorded no timeout
	// or no budget: the estimated timeout, the time left before a caller
	// above stopped waiting, and the confidence (0 when nothing inferred).
	InferredTimeoutMs   *float64 `json:"inferred_timeout_ms"`
	InferredRemainingMs *float64 `json:"inferred_remaining_ms"`
	InferenceConfidence float64  `json:"inference_confidence"`
}

// budgetOf is a span's budget chain as its hop has it.
func budgetOf(h *schema.Hop) *budgetJSON {
	return &budgetJSON{
		Path: h.Path, RemainingMs: h.RemainingMs, BudgetMs: h.BudgetMs, Source: h.BudgetSource,
		TimeoutMs: h.TimeoutMs, Attempt: h.Attempt, MaxAttempts: h.MaxAttempts, OrphanedMs: h.OrphanedMs,
		TimedOut: h.TimedOut, Rejected: h.Rejected, Inferred: h.Inferred,
		InferredTimeoutMs: h.InferredTimeoutMs, InferredRemainingMs: h.InferredRemainingMs,
		InferenceConfidence: h.InferenceConfidence,
	}
}

func attrMap(as schema.Attributes) map[string]string {
	m := make(map[string]string, len(as))
	for _, a := range as {
		m[a.Key] = a.Value
	}
	return m
}

func (s *Server) trace(c *gin.Context) {
	if err := knownParams(c); err != nil {
		s.writeError(c, err)
		return
	}
	id, err := schema.ParseTraceID(c.Param("trace_id"))
	if err != nil {
		s.writeError(c, badParam("trace_id", "want 32 hex digits"))
		return
	}
	ctx, cancel, err := s.storeContext(c)
	if err != nil {
		s.writeError(c, err)
		return
	}
	defer cancel()
	spans, truncated, err := s.store.Trace(ctx, id, TraceLimits)
	if err != nil {
		s.writeError(c, err)
		return
	}
	hops, err := s.store.TraceHops(ctx, id, store.SpanWindow(spans))
	if err != nil {
		s.writeError(c, err)
		return
	}
	// The store keeps no hop of a span whose parent's hop says all of it.
	hops = analyze.Rebuild(spans, hops)
	page, err := s.store.Findings(ctx, store.FindingQuery{TraceID: id.String(), Window: store.AnalysisWindow(hops), Limit: store.MaxPageSize})
	if err != nil {
		s.writeError(c, err)
		return
	}
	byID := make(map[schema.SpanID]*schema.Hop, len(hops))
	for i := range hops {
		byID[hops[i].SpanID] = &hops[i]
	}
	origin := spans[0].StartNs
	for _, sp := range spans {
		origin = min(origin, sp.StartNs)
	}
	offset := func(ns uint64) float64 { return (float64(ns) - float64(origin)) / 1e6 }
	out := make([]spanJSON, 0, len(spans))
	for _, sp := range spans {
		j := spanJSON{
			SpanID: sp.SpanID.String(), ParentSpanID: sp.ParentSpanID.String(), Service: sp.Service, Name: sp.Name,
			Kind: sp.Kind.String(), StartTime: time.Unix(0, int64(sp.StartNs)).UTC(), StartOffsetMs: offset(sp.StartNs),
			DurationMs: float64(sp.DurationNs()) / 1e6, Status: sp.StatusCode.String(), StatusMessage: sp.StatusMessage,
			Attributes: attrMap(sp.Attrs), Events: make([]eventJSON, 0, len(sp.Events)),
		}
		for _, e := range sp.Events {
			j.Events = append(j.Events, eventJSON{Name: e.Name, OffsetMs: offset(e.TimeNs), Attributes: attrMap(e.Attrs)})
		}
		if h := byID[sp.SpanID]; h != nil {
			j.Budget = budgetOf(h)
		}
		out = append(out, j)
	}
	findings := page.Findings
	if findings == nil {
		findings = []schema.Finding{}
	}
	sort.SliceStable(findings, func(i, j int) bool { return findings[i].ID < findings[j].ID })
	body := gin.H{"trace_id": id.String(), "spans": out, "findings": findings}
	if truncated {
		body["truncated"] = true
		body["truncation"] = fmt.Sprintf("showing the first %d spans: the trace holds more than %d spans or %d MiB of span data",
			len(out), maxTraceSpans, maxTraceBytes>>20)
	}
	c.JSON(http.StatusOK, body)
}

// summaryJSON is GET /summary.
type summaryJSON struct {
	Window         windowJSON        `json:"window"`
	Requests       uint64            `json:"requests"`
	WithinBudget   uint64            `json:"within_budget"`
	Goodput        float64           `json:"goodput"`
	ThroughputRPS  float64           `json:"throughput_rps"`
	GoodputRPS     float64           `json:"goodput_rps"`
	FindingsByKind map[string]uint64 `json:"findings_by_kind"`
}

func (s *Server) summary(c *gin.Context) {
	if err := knownParams(c, "since", "until"); err != nil {
		s.writeError(c, err)
		return
	}
	w, ctx, cancel, ok := s.windowContext(c)
	if !ok {
		return
	}
	defer cancel()
	t, err := s.store.Totals(ctx, w)
	if err != nil {
		s.writeError(c, err)
		return
	}
	secs := float64(w.Until()-w.SinceNs) / 1e9
	out := summaryJSON{
		Window: windowOf(w), Requests: t.Requests, WithinBudget: t.WithinBudget, Goodput: ratio(t.WithinBudget, t.Requests),
		FindingsByKind: kindCounts(t.FindingsByKind),
	}
	if secs > 0 {
		out.ThroughputRPS, out.GoodputRPS = float64(t.Requests)/secs, float64(t.WithinBudget)/secs
	}
	c.JSON(http.StatusOK, out)
}
