package chsql

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/budgetd/budgetd/problems"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store"
	"github.com/budgetd/budgetd/store/chschema"
)

// spanRow holds one scanned spans row before it becomes a schema.Span.
type spanRow struct {
	traceID, spanID, parentID, traceState, service, name string
	kind, statusCode                                     int8
	startNs, endNs                                       uint64
	statusMessage, scopeName, scopeVersion               string
	rKeys, rValues, aKeys, aValues                       []string
	rTypes, aTypes                                       []uint8
	evTimes                                              []uint64
	evNames                                              []string
	evKeys, evValues                                     [][]string
	evTypes                                              [][]uint8
	lTrace, lSpan, lState                                []string
	lKeys, lValues                                       [][]string
	lTypes                                               [][]uint8
	bytes                                                uint32
}

func (r *spanRow) dest() []any {
	return []any{
		&r.traceID, &r.spanID, &r.parentID, &r.traceState, &r.service, &r.name, &r.kind,
		&r.startNs, &r.endNs, &r.statusCode, &r.statusMessage, &r.scopeName, &r.scopeVersion,
		&r.rKeys, &r.rTypes, &r.rValues, &r.aKeys, &r.aTypes, &r.aValues,
		&r.evTimes, &r.evNames, &r.evKeys, &r.evTypes, &r.evValues,
		&r.lTrace, &r.lSpan, &r.lState, &r.lKeys, &r.lTypes, &r.lValues, &r.bytes,
	}
}

func attrsOf(keys []string, types []uint8, values []string) (schema.Attributes, error) {
	if len(keys) != len(types) || len(keys) != len(values) {
		return nil, errors.New("attribute arrays differ in length")
	}
	if len(keys) == 0 {
		return nil, nil
	}
	out := make(schema.Attributes, len(keys))
	for i := range keys {
		out[i] = schema.Attr{Key: keys[i], Type: schema.AttrType(types[i]), Value: values[i]}
	}
	return out, nil
}

func (r *spanRow) span() (schema.Span, error) {
	var s schema.Span
	var err error
	if s.TraceID, err = schema.ParseTraceID(r.traceID); err != nil {
		return s, err
	}
	if s.SpanID, err = schema.ParseSpanID(r.spanID); err != nil {
		return s, err
	}
	if s.ParentSpanID, err = schema.ParseSpanID(r.parentID); err != nil {
		return s, err
	}
	s.TraceState, s.Service, s.Name, s.Kind = r.traceState, r.service, r.name, schema.SpanKind(r.kind)
	s.StartNs, s.EndNs = r.startNs, r.endNs
	s.StatusCode, s.StatusMessage = schema.StatusCode(r.statusCode), r.statusMessage
	s.ScopeName, s.ScopeVersion = r.scopeName, r.scopeVersion
	if s.ResourceAttrs, err = attrsOf(r.rKeys, r.rTypes, r.rValues); err != nil {
		return s, err
	}
	if s.Attrs, err = attrsOf(r.aKeys, r.aTypes, r.aValues); err != nil {
		return s, err
	}
	n := len(r.evTimes)
	if len(r.evNames) != n || len(r.evKeys) != n || len(r.evTypes) != n || len(r.evValues) != n {
		return s, errors.New("event arrays differ in length")
	}
	for i := range n {
		attrs, err := attrsOf(r.evKeys[i], r.evTypes[i], r.evValues[i])
		if err != nil {
			return s, err
		}
		s.Events = append(s.Events, schema.Event{TimeNs: r.evTimes[i], Name: r.evNames[i], Attrs: attrs})
	}
	n = len(r.lTrace)
	if len(r.lSpan) != n || len(r.lState) != n || len(r.lKeys) != n || len(r.lTypes) != n || len(r.lValues) != n {
		return s, errors.New("link arrays differ in length")
	}
	for i := range n {
		l := schema.Link{TraceState: r.lState[i]}
		if l.TraceID, err = schema.ParseTraceID(r.lTrace[i]); err != nil {
			return s, err
		}
		if l.SpanID, err = schema.ParseSpanID(r.lSpan[i]); err != nil {
			return s, err
		}
		if l.Attrs, err = attrsOf(r.lKeys[i], r.lTypes[i], r.lValues[i]); err != nil {
			return s, err
		}
		s.Links = append(s.Links, l)
	}
	return s, nil
}

func (s *Store) querySpans(ctx context.Context, query string, params Params) ([]schema.Span, error) {
	rows, err := s.conn.Query(ctx, query, params)
	if err != nil {
		return nil, wrapCtx(ctx, err)
	}
	defer rows.Close()
	var out []schema.Span
	for rows.Next() {
		var r spanRow
		if err := rows.Scan(r.dest()...); err != nil {
			return nil, wrapCtx(ctx, fmt.Errorf("scan span: %w", err))
		}
		sp, err := r.span()
		if err != nil {
			return nil, fmt.Errorf("decode span %s/%s: %w", r.traceID, r.spanID, err)
		}
		out = append(out, sp)
	}
	return out, wrapCtx(ctx, rows.Err())
}

// Trace implements store.Store. It looks the trace up in trace_index first,
// so the spans scan is limited to its services and time range. A span
// stored twice (a sender's retry after a lost acknowledgement arrives as a
// new batch) is returned once.
func (s *Store) Trace(ctx context.Context, id schema.TraceID, lim store.TraceLimits) ([]schema.Span, bool, error) {
	rows, err := s.conn.Query(ctx, "SELECT service, min(start_ns), max(end_ns), toUInt64(sum(spans)), toUInt64(sum(bytes)), toUInt64(min(bytes)) FROM "+s.db+
		".trace_index WHERE trace_id = {id:String} GROUP BY service ORDER BY service", Params{P("id", id.String())})
	if err != nil {
		return nil, false, wrapCtx(ctx, fmt.Errorf("look up trace: %w", err))
	}
	params := Params{P("id", id.String())}
	var services []string
	var size indexedSize
	lo, hi := ^uint64(0), uint64(0)
	for rows.Next() {
		var svc string
		var start, end, spans, bytes, leastBytes uint64
		if err := rows.Scan(&svc, &start, &end, &spans, &bytes, &leastBytes); err != nil {
			rows.Close()
			return nil, false, wrapCtx(ctx, fmt.Errorf("scan trace index: %w", err))
		}
		params = append(params, P("s"+strconv.Itoa(len(services)), svc))
		services = append(services, svc)
		lo, hi = min(lo, start), max(hi, end)
		size.add(spans, bytes, leastBytes)
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return nil, false, wrapCtx(ctx, fmt.Errorf("look up trace: %w", err))
	}
	if len(services) == 0 {
		return nil, false, store.ErrNotFound
	}
	params = append(params, P("lo", lo), P("hi", hi))
	from := " FROM " + s.db + ".spans WHERE trace_id = {id:String}" +
		" AND service IN (" + inList("s", "String", len(services)) + ")" +
		" AND start_ns >= {lo:UInt64} AND start_ns <= {hi:UInt64}" +
		" ORDER BY start_ns, span_id LIMIT 1 BY span_id"
	limit, truncated := lim.Spans, false
	if lim.Bytes > 0 && !size.within(lim) {
		// Sizes first, so a trace of huge spans is never read whole.
		n, total, err := s.spansWithin(ctx, from, params, lim)
		if err != nil {
			return nil, false, err
		}
		if n < total {
			limit, truncated = n, true
		}
	}
	q := "SELECT " + spansTable.columnList() + from
	if limit > 0 {
		q += " LIMIT " + strconv.Itoa(limit)
	}
	spans, err := s.querySpans(ctx, q, params)
	if err != nil {
		return nil, false, fmt.Errorf("read trace: %w", err)
	}
	if len(spans) == 0 {
		return nil, false, store.ErrNotFound
	}
	if !truncated && lim.Spans > 0 && len(spans) == lim.Spans {
		truncated, err = s.moreThan(ctx, from, params, lim.Spans)
		if err != nil {
			return nil, false, err
		}
	}
	return spans, truncated, nil
}

// indexedSize is a trace's size as its trace-id lookup rows add it up:
// spans and bytes (spanBytes) per batch and service. Rows written before
// the lookup counted bytes (migration 0023) have none, and then the size
// is unknown. A batch stored twice counts twice, which only overstates.
type indexedSize struct {
	spans, bytes uint64
	unknown      bool
}

func (z *indexedSize) add(spans, bytes, leastBytes uint64) {
	z.spans += spans
	z.bytes += bytes
	z.unknown = z.unknown || leastBytes == 0
}

// within reports whether the lookup shows the trace inside lim, so that
// its spans need not be sized one by one before they are read.
func (z indexedSize) within(lim store.TraceLimits) bool {
	return !z.unknown && z.bytes <= uint64(lim.Bytes) && (lim.Spans == 0 || z.spans <= uint64(lim.Spans))
}

// spansWithin returns how many of the trace's first spans (from is the
// read's FROM … LIMIT BY clause) fit in lim, and how many it has in all
// (up to lim.Spans).
func (s *Store) spansWithin(ctx context.Context, from string, params Params, lim store.TraceLimits) (fit, total int, err error) {
	// span_bytes is each span's size as TraceLimits.Bytes counts it, stored
	// with it (spanBytes).
	q := "SELECT toUInt64(span_bytes)" + from
	if lim.Spans > 0 {
		q += " LIMIT " + strconv.Itoa(lim.Spans+1)
	}
	rows, err := s.conn.Query(ctx, q, params)
	if err != nil {
		return 0, 0, wrapCtx(ctx, fmt.Errorf("size trace: %w", err))
	}
	defer rows.Close()
	var sum int64
	for rows.Next() {
		var b uint64
		if err := rows.Scan(&b); err != nil {
			return 0, 0, wrapCtx(ctx, fmt.Errorf("size trace: %w", err))
		}
		total++
		sum += int64(b)
		if (fit == total-1) && (total == 1 || sum <= lim.Bytes) && (lim.Spans == 0 || total <= lim.Spans) {
			fit = total
		}
	}
	if err := rows.Err(); err != nil {
		return 0, 0, wrapCtx(ctx, fmt.Errorf("size trace: %w", err))
	}
	return fit, total, nil
}

// moreThan reports whether the trace has more than n spans.
func (s *Store) moreThan(ctx context.Context, from string, params Params, n int) (bool, error) {
	var count uint64
	err := s.queryOne(ctx, "SELECT count() FROM (SELECT span_id"+from+" LIMIT "+strconv.Itoa(n+1)+")", params, &count)
	if err != nil {
		return false, wrapCtx(ctx, fmt.Errorf("count trace: %w", err))
	}
	return count > uint64(n), nil
}

// Spans implements store.Store.
func (s *Store) Spans(ctx context.Context, w store.Window, limit int) ([]schema.Span, error) {
	n := strconv.Itoa(clampLimit(limit, 10_000_000))
	// The traces are picked from the trace-id lookup first (the smallest
	// ids among those whose spans may start in the window; at most n of
	// them can contribute), so the sort below holds those traces' spans
	// only. Sorting every span of the window with all its columns needed
	// gigabytes at ten million spans (18.16 refused it).
	q := "SELECT " + spansTable.columnList() + " FROM " + s.db + ".spans" +
		" WHERE start_ns >= {since:UInt64} AND start_ns <= {until:UInt64} AND trace_id IN (SELECT trace_id FROM " + s.shardLocal("trace_index") +
		" WHERE start_ns <= {until:UInt64} AND end_ns >= {since:UInt64} GROUP BY trace_id ORDER BY trace_id LIMIT " + n + ")" +
		" ORDER BY trace_id, start_ns, span_id LIMIT 1 BY trace_id, span_id LIMIT " + n
	spans, err := s.querySpans(ctx, q, Params{P("since", w.SinceNs), P("until", w.Until())})
	if err != nil {
		return nil, fmt.Errorf("read spans: %w", err)
	}
	return spans, nil
}

func clampLimit(limit, most int) int {
	if limit <= 0 || limit > most {
		return most
	}
	return limit
}

// TraceHops implements store.Store. Hops are sorted by (path, start_ns):
// within each path's run of granules the window of the trace's span starts
// skips all but the few that can hold the trace; with the zero window the
// read scans the trace_id column of every hop.
func (s *Store) TraceHops(ctx context.Context, id schema.TraceID, starts store.Window) ([]schema.Hop, error) {
	params := Params{P("id", id.String()), P("since", starts.SinceNs), P("until", starts.Until())}
	q := "SELECT " + hopsTable.columnList() + " FROM (SELECT " + hopsTable.columnList() + " FROM " + s.db +
		".hops WHERE trace_id = {id:String} AND start_ns >= {since:UInt64} AND start_ns <= {until:UInt64}" +
		" ORDER BY analyzed_ns DESC LIMIT 1 BY span_id) ORDER BY start_ns, span_id"
	return s.readHops(ctx, q, params)
}

// readHops runs query, which selects hopsTable's columns, and returns its
// hops.
func (s *Store) readHops(ctx context.Context, query string, params Params) ([]schema.Hop, error) {
	rows, err := s.conn.Query(ctx, query, params)
	if err != nil {
		return nil, wrapCtx(ctx, fmt.Errorf("read hops: %w", err))
	}
	defer rows.Close()
	var out []schema.Hop
	for rows.Next() {
		var h schema.Hop
		var traceID, spanID, parentID string
		var kind int8
		var isErr, timedOut, rejected, inferred uint8
		err := rows.Scan(&traceID, &spanID, &parentID, &h.Service, &h.Operation, &kind, &h.Path, &h.RootPath,
			&h.CallerService, &h.CallerOperation, &h.CalleeService, &h.CalleeOperation,
			&h.StartNs, &h.DurationNs, &isErr, &timedOut,
			&h.RemainingMs, &h.BudgetMs, &h.BudgetSource, &h.TimeoutMs, &h.Attempt, &h.MaxAttempts,
			&h.OrphanedMs, &rejected, &inferred, &h.AnalyzedNs, &h.CalleeDurationNs,
			&h.InferredTimeoutMs, &h.InferredRemainingMs, &h.InferenceConfidence, &h.PathCalls)
		if err != nil {
			return nil, wrapCtx(ctx, fmt.Errorf("scan hop: %w", err))
		}
		h.Kind = schema.SpanKind(kind)
		h.IsError, h.TimedOut, h.Rejected, h.Inferred = isErr == 1, timedOut == 1, rejected == 1, inferred == 1
		if h.TraceID, err = schema.ParseTraceID(traceID); err != nil {
			return nil, err
		}
		if h.SpanID, err = schema.ParseSpanID(spanID); err != nil {
			return nil, err
		}
		if h.ParentSpanID, err = schema.ParseSpanID(parentID); err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, wrapCtx(ctx, rows.Err())
}

// Findings implements store.Store. Pages are ordered by (detected_at, id)
// descending; the cursor is the last row's pair, so pages neither skip nor
// repeat rows while new findings arrive.
func (s *Store) Findings(ctx context.Context, q store.FindingQuery) (store.FindingPage, error) {
	limit := q.Limit
	if limit == 0 {
		limit = store.DefaultPageSize
	}
	if limit < 0 || limit > store.MaxPageSize {
		return store.FindingPage{}, fmt.Errorf("read findings: limit must be 1..%d", store.MaxPageSize)
	}
	return s.findingsPage(ctx, q, limit, false)
}

// WindowFindings implements store.Store: one page of max findings. Paging
// through them instead chose every page's rows among all the window's
// findings again: 100 reads of the whole window for 100,000 findings.
func (s *Store) WindowFindings(ctx context.Context, q store.FindingQuery, max int) ([]schema.Finding, bool, error) {
	if max <= 0 {
		return nil, false, fmt.Errorf("read findings: max must be > 0, got %d", max)
	}
	q.Cursor = ""
	page, err := s.findingsPage(ctx, q, max, true)
	return page.Findings, page.Next != "", err
}

// findingsPage reads one page of limit findings (after q.Cursor, when set).
// whole says the caller wants the window's findings, up to limit, rather
// than a page of a list it browses (q.Cursor is then empty).
func (s *Store) findingsPage(ctx context.Context, q store.FindingQuery, limit int, whole bool) (store.FindingPage, error) {
	dedup, err := s.anyReanalysed(ctx, q.Window.SinceNs)
	if err != nil {
		return store.FindingPage{}, err
	}
	where := []string{"detected_ns >= {since:UInt64}", "detected_ns <= {until:UInt64}"}
	params := Params{P("since", q.Window.SinceNs), P("until", q.Window.Until())}
	add := func(cond, name, value string) {
		if value != "" {
			where = append(where, cond)
			params = append(params, P(name, value))
		}
	}
	add("kind = {kind:String}", "kind", string(q.Kind))
	add("severity = {severity:String}", "severity", string(q.Severity))
	add("(service = {service:String} OR caller_service = {service:String} OR callee_service = {service:String})", "service", q.Service)
	add("path = {path:String}", "path", q.Path)
	add("trace_id = {trace_id:String}", "trace_id", q.TraceID)
	// A finding written again (an edge's verdict restated, a trace
	// analysed again) has several rows under one id; a page shows its
	// newest. The cursor applies after that choice: applied before it, the
	// next page would find the older rows below the cursor and show the
	// finding a second time. The page's ids and their newest times are
	// chosen from those two columns alone, then only those rows are read
	// whole: choosing the newest rows whole sorted every column of every
	// finding of the window (1.9 s against 0.54 now for the first page of
	// 431 k findings on 18.16).
	cols := findingsTable.columnList()
	current := s.currentFindings(strings.Join(where, " AND "), dedup)
	having := ""
	if q.Cursor != "" {
		ns, id, err := decodeCursor(q.Cursor)
		if err != nil {
			return store.FindingPage{}, err
		}
		having = " HAVING max(detected_ns) < {cns:UInt64} OR (max(detected_ns) = {cns:UInt64} AND id < {cid:String})"
		params = append(params, P("cns", ns), P("cid", id))
	}
	var query string
	if whole {
		// Unlike a page (above), a read of the whole window takes nearly
		// every row anyway: one pass, sorting the rows whole, is cheaper
		// than choosing the ids first and reading again. With the
		// window's 9,388 findings of 10 M benchmark spans on chDB 26.7,
		// 45.1 → 32.4 ms p50; on 18.16 the problems list 348.9 → 253.6
		// ms p99. Windows stay that small since only example findings
		// are stored; one of max (100,000 by default) findings was not
		// measured.
		query = "SELECT " + cols + " FROM " + current + " ORDER BY detected_ns DESC, id DESC LIMIT 1 BY id LIMIT " + strconv.Itoa(limit+1)
	} else {
		pageKeys := "SELECT max(detected_ns) AS ns, id FROM " + current + " GROUP BY id" + having +
			" ORDER BY ns DESC, id DESC LIMIT " + strconv.Itoa(limit+1)
		// The rows' filter stays outside the findings read: inside it, on
		// a cluster, it would be an IN over the Distributed table within a
		// read of it (which ClickHouse refuses), and on 18.16 it measured
		// slower (953 against 540 ms for the first page of 431 k findings).
		query = "SELECT " + cols + " FROM " + current + " WHERE (detected_ns, id) IN (SELECT ns, id FROM (" + pageKeys + "))" +
			" ORDER BY detected_ns DESC, id DESC LIMIT 1 BY id"
	}
	rows, err := s.conn.Query(ctx, query, params)
	if err != nil {
		return store.FindingPage{}, wrapCtx(ctx, fmt.Errorf("read findings: %w", err))
	}
	defer rows.Close()
	var page store.FindingPage
	for rows.Next() {
		var f schema.Finding
		var kind, severity string
		var ns uint64
		var keys []string
		var values []float64
		err := rows.Scan(&f.ID, &kind, &severity, &f.TraceID, &f.SpanID, &f.Service, &f.Operation,
			&f.CallerService, &f.CalleeService, &f.Path, &ns, &keys, &values, &f.Message)
		if err != nil {
			return store.FindingPage{}, wrapCtx(ctx, fmt.Errorf("scan finding: %w", err))
		}
		f.Kind, f.Severity = schema.Kind(kind), schema.Severity(severity)
		f.DetectedAt = time.Unix(0, int64(ns)).UTC()
		f.Evidence = make(map[string]float64, len(keys))
		for i := range min(len(keys), len(values)) {
			f.Evidence[keys[i]] = values[i]
		}
		page.Findings = append(page.Findings, f)
	}
	if err := rows.Err(); err != nil {
		return store.FindingPage{}, wrapCtx(ctx, fmt.Errorf("read findings: %w", err))
	}
	if len(page.Findings) > limit {
		page.Findings = page.Findings[:limit]
		last := page.Findings[limit-1]
		page.Next = encodeCursor(uint64(last.DetectedAt.UnixNano()), last.ID)
	}
	return page, nil
}

func encodeCursor(ns uint64, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatUint(ns, 10) + ":" + id))
}

func decodeCursor(c string) (uint64, string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, "", store.ErrBadCursor
	}
	nsText, id, ok := strings.Cut(string(raw), ":")
	ns, err := strconv.ParseUint(nsText, 10, 64)
	if !ok || err != nil || id == "" {
		return 0, "", store.ErrBadCursor
	}
	return ns, id, nil
}

// findingWindow bounds findings by detection time with the since/until
// parameters.
const findingWindow = "detected_ns >= {since:UInt64} AND detected_ns <= {until:UInt64}"

// distinctFindings is the aggregate every count of findings uses: distinct
// finding ids, not rows, as the findings read (Findings) keeps one row per
// id. One finding can have several rows: the pipeline writes an edge's
// latency_inversion again when its evidence changes (and restates it once
// per edge window), every replica and every restart writes its own, and an
// edge finding's empty trace id is never recorded as re-analysed, so
// currentFindings keeps all of them. A finding's kind is part of its
// id, and its path is its edge's or its span's in the analysis that
// currentFindings keeps, so no id is counted under two keys of a grouping.
//
// uniqExact rather than the read's "ORDER BY detected_ns DESC LIMIT 1 BY id"
// subquery: it reads only the id column beside the grouping keys and keeps
// one 128-bit hash per distinct id per group, where the subquery reads
// detected_ns too and sorts every row of the window before counting. Both
// run on ClickHouse 18.16.
const distinctFindings = "uniqExact(id)"

// reanalysedSince lists the traces analysed more than once since the
// window's start: a trace whose rows fall in a window was (re-)analysed
// after the window began. Bounding the set keeps it small however long the
// retention.
func (s *Store) reanalysedSince() string {
	return "(SELECT trace_id FROM " + s.shardLocal("reanalysed") + " WHERE analyzed_ns >= {since:UInt64})"
}

// shardLocal names table for a subquery of IN inside a query on another
// table sharded alike (all of budgetd's trace tables are sharded by trace
// id): on a cluster, each shard's replica answers the outer query, so the
// subquery reads that replica's local table, where every row of the
// shard's traces is — what distributed_product_mode = local would do, and
// 18.16 refuses an IN over a Distributed table inside a distributed query
// otherwise. On one server it is the table itself.
func (s *Store) shardLocal(table string) string {
	if s.cluster == "" {
		return s.db + "." + table
	}
	return s.db + "." + table + chschema.LocalSuffix
}

// anyReanalysed reports whether any trace was recorded as re-analysed since
// the window's start. When none was, reads need no deduplication at all and
// skip even reading trace ids to check (a fifth of a simple aggregate's
// time). A re-analysis recorded between this check and the read is seen by
// the next read.
func (s *Store) anyReanalysed(ctx context.Context, since uint64) (bool, error) {
	var n uint64
	err := s.queryOne(ctx, "SELECT count() FROM "+s.db+".reanalysed WHERE analyzed_ns >= {since:UInt64}",
		Params{P("since", since)}, &n)
	if err != nil {
		return false, wrapCtx(ctx, fmt.Errorf("read re-analysed traces: %w", err))
	}
	return n > 0, nil
}

// latestHops is a subquery over the hops matching where, with the columns
// cols (comma-separated), that keeps only the latest analysis of each span.
// Only traces recorded as re-analysed (WriteReanalysed) can have more than
// one; their hops are deduplicated per span, every other hop is read as it
// is, so an aggregate over a window costs no sort of the whole window, and
// only the columns the aggregate needs are read. where must bind
// {since:UInt64}.
func (s *Store) latestHops(cols, where string, dedup bool) string {
	if !dedup {
		return "(SELECT " + cols + " FROM " + s.db + ".hops WHERE " + where + ")"
	}
	return "(SELECT " + cols + " FROM " + s.db + ".hops WHERE " + where + " AND trace_id NOT IN " + s.reanalysedSince() +
		" UNION ALL SELECT " + cols + " FROM (SELECT " + cols + ", trace_id AS dedup_trace, span_id AS dedup_span, analyzed_ns AS dedup_at" +
		" FROM " + s.db + ".hops WHERE " + where + " AND trace_id IN " + s.reanalysedSince() +
		" ORDER BY dedup_at DESC LIMIT 1 BY dedup_trace, dedup_span))"
}

// currentFindings is a subquery over the findings matching where without
// the findings of superseded analyses: for a trace recorded as re-analysed,
// only the findings of its latest analysis (detected when the analysis ran,
// at its reanalysed.analyzed_ns) count. where must bind {since:UInt64}.
func (s *Store) currentFindings(where string, dedup bool) string {
	cols := findingsTable.columnList()
	if !dedup {
		return "(SELECT " + cols + " FROM " + s.db + ".findings WHERE " + where + ")"
	}
	return "(SELECT " + cols + " FROM " + s.db + ".findings WHERE " + where + " AND trace_id NOT IN " + s.reanalysedSince() +
		" UNION ALL SELECT " + cols + " FROM (SELECT " + cols + " FROM " + s.db + ".findings WHERE " + where +
		" AND trace_id IN " + s.reanalysedSince() + ") AS f" +
		" ANY LEFT JOIN (SELECT trace_id, max(analyzed_ns) AS latest FROM " + s.db + ".reanalysed" +
		" WHERE analyzed_ns >= {since:UInt64} GROUP BY trace_id) AS l USING trace_id WHERE detected_ns >= latest)"
}

// missingChunk is how many trace ids one MissingSpans query names.
const missingChunk = 500

// MissingSpans returns the spans of spans that are not stored, by trace
// and span id, in their order. The write-ahead log's drain asks before it
// writes a batch again after a restart: on servers without
// insert_deduplication_token the batch may have landed without its token
// being recorded (the process died between the two inserts).
func (s *Store) MissingSpans(ctx context.Context, spans []schema.Span) ([]schema.Span, error) {
	traces := make(map[schema.TraceID]bool)
	var ids []string
	// A stored copy of a span starts when the span does: bounding the
	// lookup to the spans' start times lets it skip the day partitions
	// that cannot hold them.
	lo, hi := ^uint64(0), uint64(0)
	for i := range spans {
		lo, hi = min(lo, spans[i].StartNs), max(hi, spans[i].StartNs)
		if !traces[spans[i].TraceID] {
			traces[spans[i].TraceID] = true
			ids = append(ids, spans[i].TraceID.String())
		}
	}
	type key struct {
		trace, span string
	}
	stored := make(map[key]bool)
	for lo := 0; lo < len(ids); lo += missingChunk {
		chunk := ids[lo:min(lo+missingChunk, len(ids))]
		params := make(Params, len(chunk), len(chunk)+2)
		for i, id := range chunk {
			params[i] = P("t"+strconv.Itoa(i), id)
		}
		params = append(params, P("lo", lo), P("hi", hi))
		rows, err := s.conn.Query(ctx, "SELECT trace_id, span_id FROM "+s.db+".spans WHERE trace_id IN ("+
			inList("t", "String", len(chunk))+") AND start_ns >= {lo:UInt64} AND start_ns <= {hi:UInt64}", params)
		if err != nil {
			return nil, wrapCtx(ctx, fmt.Errorf("look up stored spans: %w", err))
		}
		for rows.Next() {
			var k key
			if err := rows.Scan(&k.trace, &k.span); err != nil {
				rows.Close()
				return nil, wrapCtx(ctx, fmt.Errorf("look up stored spans: %w", err))
			}
			stored[k] = true
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, wrapCtx(ctx, fmt.Errorf("look up stored spans: %w", err))
		}
	}
	if len(stored) == 0 {
		return spans, nil
	}
	missing := make([]schema.Span, 0, len(spans))
	for i := range spans {
		if !stored[key{spans[i].TraceID.String(), spans[i].SpanID.String()}] {
			missing = append(missing, spans[i])
		}
	}
	return missing, nil
}

// ProblemStats implements store.Store.
func (s *Store) ProblemStats(ctx context.Context, w store.Window) ([]problems.Stat, error) {
	// A part not yet merged holds its own row for a problem and interval:
	// sum them here.
	q := "SELECT problem_id, any(kind), any(caller_service), any(caller_operation), any(callee_service), any(callee_operation), any(path)," +
		" interval_ns, sum(findings), sum(requests), sum(impact) FROM " + s.db + "." + problemStatsTable.name +
		" WHERE interval_ns >= {since:UInt64} AND interval_ns <= {until:UInt64}" +
		" GROUP BY problem_id, interval_ns ORDER BY problem_id, interval_ns"
	var out []problems.Stat
	err := s.eachRow(ctx, q, Params{P("since", w.SinceNs), P("until", w.Until())}, func(r Rows) error {
		var st problems.Stat
		var id, kind string
		var intervalNs uint64
		if err := r.Scan(&id, &kind, &st.Key.CallerService, &st.Key.CallerOperation, &st.Key.CalleeService, &st.Key.CalleeOperation,
			&st.Key.Path, &intervalNs, &st.Findings, &st.Requests, &st.Impact); err != nil {
			return err
		}
		st.Key.Kind = schema.Kind(kind)
		st.Interval = time.Unix(0, int64(intervalNs)).UTC()
		out = append(out, st)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read problem stats: %w", err)
	}
	return out, nil
}

// EdgeStates implements store.Store. Each replica's newest state per edge
// is taken with argMax, since merges replace older rows only when they
// come; the states of a replica's latest evaluation are then those
// stamped with its newest time. (One aggregate rather than an IN
// subquery, which a Distributed table would refuse to run on each shard.)
func (s *Store) EdgeStates(ctx context.Context, except string, sinceNs uint64) ([]schema.EdgeState, error) {
	q := "SELECT replica, caller_service, caller_operation, callee_service, callee_operation, max(evaluated_ns), argMax(state, evaluated_ns)" +
		" FROM " + s.db + "." + edgeStatesTable.name +
		" WHERE replica != {except:String} AND evaluated_ns >= {since:UInt64}" +
		" GROUP BY replica, caller_service, caller_operation, callee_service, callee_operation" +
		" ORDER BY replica, caller_service, caller_operation, callee_service, callee_operation"
	var all []schema.EdgeState
	latest := map[string]uint64{}
	err := s.eachRow(ctx, q, Params{P("except", except), P("since", sinceNs)}, func(r Rows) error {
		var e schema.EdgeState
		var state string
		if err := r.Scan(&e.Replica, &e.CallerService, &e.CallerOperation, &e.CalleeService, &e.CalleeOperation, &e.EvaluatedNs, &state); err != nil {
			return err
		}
		// A state that is not base64 is passed on empty: the analysis
		// counts it as undecodable, and one bad row does not hide the rest.
		e.State, _ = base64.StdEncoding.DecodeString(state)
		latest[e.Replica] = max(latest[e.Replica], e.EvaluatedNs)
		all = append(all, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read edge states: %w", err)
	}
	out := all[:0]
	for _, e := range all {
		if e.EvaluatedNs == latest[e.Replica] {
			out = append(out, e)
		}
	}
	return out, nil
}
