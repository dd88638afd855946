package oteltraces

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/budgetd/budgetd/ingest"
	"github.com/budgetd/budgetd/ingest/translate"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store"
	"github.com/budgetd/budgetd/store/chschema"
	"github.com/budgetd/budgetd/store/chsql"
)

// Config names the table and the window to read.
type Config struct {
	// Database and Table name the exporter's table; plain identifiers.
	Database, Table string
	// Window selects the traces: every trace with a span starting in it
	// (bounds inclusive), read whole.
	Window store.Window
	// MaxSpans bounds the spans read; only whole traces are read, so the
	// read stops before the first trace that would pass it.
	MaxSpans int
}

// Validate reports the first invalid setting.
func (c Config) Validate() error {
	switch {
	case !chschema.ValidIdentifier(c.Database):
		return fmt.Errorf("database %q is not a plain identifier", c.Database)
	case !chschema.ValidIdentifier(c.Table):
		return fmt.Errorf("table %q is not a plain identifier", c.Table)
	case c.MaxSpans <= 0:
		return errors.New("max spans must be > 0")
	}
	return nil
}

// Result is what Read found.
type Result struct {
	// Spans are the converted spans of the traces read.
	Spans []schema.Span
	// Traces is the number of traces read.
	Traces int
	// Truncated is set when MaxSpans stopped the read before every trace
	// of the window was read.
	Truncated bool
	// Rejected spans were left out by the Converter, for RejectReason.
	Rejected     int
	RejectReason string
	// Lookup is set when the trace-id lookup table narrowed the reads.
	Lookup bool
}

// ErrNoTable is returned when the table does not exist.
var ErrNoTable = errors.New("no such table")

// Table is an exporter's table whose layout has been read, ready for
// reads. It is safe for concurrent use; the layout is not read again, so
// a table altered later needs a new Table.
type Table struct {
	r reader
}

// Open checks that database.table exists and has the exporter's required
// columns, and reads its layout (and its trace-id lookup's). It issues
// only SELECTs; ErrNoTable when there is no such table.
func Open(ctx context.Context, conn chsql.Conn, database, table string) (*Table, error) {
	full := database + "." + table
	switch {
	case !chschema.ValidIdentifier(database):
		return nil, fmt.Errorf("read otel traces: database %q is not a plain identifier", database)
	case !chschema.ValidIdentifier(table):
		return nil, fmt.Errorf("read otel traces: table %q is not a plain identifier", table)
	}
	lay, err := readLayout(ctx, conn, database, table)
	if err != nil {
		return nil, fmt.Errorf("read otel traces from %s: %w", full, err)
	}
	return &Table{r: reader{conn: conn, lay: lay, table: full}}, nil
}

// Read reads cfg's window from the table over conn and converts the rows
// with conv. It issues only SELECTs.
func Read(ctx context.Context, conn chsql.Conn, cfg Config, conv *ingest.Converter) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, fmt.Errorf("read otel traces: %w", err)
	}
	t, err := Open(ctx, conn, cfg.Database, cfg.Table)
	if err != nil {
		return Result{}, err
	}
	r := &t.r
	ids, truncated, err := r.pick(ctx, cfg)
	if err != nil {
		return Result{}, fmt.Errorf("read otel traces from %s: %w", r.table, err)
	}
	bound, err := r.bound(ctx, cfg.Window, ids)
	if err != nil {
		return Result{}, fmt.Errorf("read otel traces from %s: %w", r.table, err)
	}
	res, err := t.read(ctx, ids, bound, conv)
	if err != nil {
		return Result{}, err
	}
	res.Truncated, res.Lookup = truncated, r.lay.lookup != ""
	return res, nil
}

// DueTrace is a trace Due found: its id, its spans (counted over the rows
// Due scanned) and the latest end of those spans.
type DueTrace struct {
	ID    string
	Spans int
	EndNs int64
}

// DueQuery selects the traces whose latest span end lies in (AfterNs,
// UntilNs], looking only at spans that start at or after ScanFromNs (so
// the GROUP BY reads recent partitions only), at most Limit of them.
type DueQuery struct {
	AfterNs, UntilNs, ScanFromNs int64
	Limit                        int
}

// Due returns the traces q selects in the order their latest span ends
// (ties by id). A span written twice counts once.
func (t *Table) Due(ctx context.Context, q DueQuery) ([]DueTrace, error) {
	sql := "SELECT TraceId, toUInt64(uniqExact(SpanId)) AS n," +
		" max(toInt64(toUnixTimestamp64Nano(Timestamp)) + toInt64(Duration)) AS last_end FROM " + t.r.table +
		" WHERE Timestamp >= fromUnixTimestamp64Nano({scan:Int64}) AND TraceId != ''" +
		" GROUP BY TraceId HAVING last_end > {after:Int64} AND last_end <= {until:Int64}" +
		" ORDER BY last_end, TraceId LIMIT " + strconv.Itoa(q.Limit)
	rows, err := t.r.conn.Query(ctx, sql, chsql.Params{chsql.P("scan", q.ScanFromNs), chsql.P("after", q.AfterNs), chsql.P("until", q.UntilNs)})
	if err != nil {
		return nil, fmt.Errorf("find due traces in %s: %w", t.r.table, err)
	}
	defer rows.Close()
	var out []DueTrace
	for rows.Next() {
		var d DueTrace
		var n uint64
		if err := rows.Scan(&d.ID, &n, &d.EndNs); err != nil {
			return nil, fmt.Errorf("find due traces in %s: %w", t.r.table, err)
		}
		d.Spans = int(n)
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("find due traces in %s: %w", t.r.table, err)
	}
	return out, nil
}

// Traces reads the spans of the traces ids that start in [sinceNs,
// untilNs] and converts them with conv. Result.Traces is len(ids).
func (t *Table) Traces(ctx context.Context, ids []string, sinceNs, untilNs int64, conv *ingest.Converter) (Result, error) {
	return t.read(ctx, ids, timeBound{
		where:  " AND Timestamp >= fromUnixTimestamp64Nano({lo:Int64}) AND Timestamp <= fromUnixTimestamp64Nano({hi:Int64})",
		params: chsql.Params{chsql.P("lo", sinceNs), chsql.P("hi", untilNs)},
	}, conv)
}

// read reads the spans of ids within bound, some hundreds of traces per
// query, and converts them.
func (t *Table) read(ctx context.Context, ids []string, bound timeBound, conv *ingest.Converter) (Result, error) {
	res := Result{Traces: len(ids)}
	var stats ingest.Stats
	for chunk := range chunks(ids, 500) {
		td, err := t.r.spans(ctx, chunk, bound)
		if err != nil {
			return Result{}, fmt.Errorf("read otel traces from %s: %w", t.r.table, err)
		}
		cr := conv.Convert(td)
		res.Spans = append(res.Spans, cr.Spans...)
		stats.Add(cr.Stats)
	}
	res.Rejected, res.RejectReason = stats.Rejected(), stats.RejectReason()
	return res, nil
}

// required are the columns without which a span cannot be rebuilt.
var required = []string{"TraceId", "SpanId", "ParentSpanId", "SpanName", "SpanKind", "ServiceName", "Timestamp", "Duration", "StatusCode"}

// layout is the table's columns, name to type, and the lookup table's name
// ("" when there is none usable).
type layout struct {
	cols   map[string]string
	lookup string
}

func columns(ctx context.Context, conn chsql.Conn, db, table string) (map[string]string, error) {
	rows, err := conn.Query(ctx, "SELECT name, type FROM system.columns WHERE database = {db:String} AND table = {table:String}",
		chsql.Params{chsql.P("db", db), chsql.P("table", table)})
	if err != nil {
		return nil, fmt.Errorf("read columns: %w", err)
	}
	defer rows.Close()
	cols := map[string]string{}
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			return nil, fmt.Errorf("read columns: %w", err)
		}
		cols[name] = typ
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read columns: %w", err)
	}
	return cols, nil
}

func readLayout(ctx context.Context, conn chsql.Conn, db, table string) (layout, error) {
	cols, err := columns(ctx, conn, db, table)
	if err != nil {
		return layout{}, err
	}
	if len(cols) == 0 {
		return layout{}, ErrNoTable
	}
	for _, c := range required {
		if _, ok := cols[c]; !ok {
			return layout{}, fmt.Errorf("required column %s is missing (the table is not the ClickHouse exporter's otel_traces)", c)
		}
	}
	for name, want := range map[string]func(string) bool{
		"TraceId": isString, "SpanId": isString, "ParentSpanId": isString, "SpanName": isString, "SpanKind": isString,
		"ServiceName": isString, "StatusCode": isString, "TraceState": isString, "StatusMessage": isString,
		"ScopeName": isString, "ScopeVersion": isString,
		"Timestamp": isDateTime64, "Duration": isInteger,
		"ResourceAttributes": isStringMap, "SpanAttributes": isStringMap,
		"Events.Timestamp": arrayOf(isDateTime64), "Events.Name": arrayOf(isString), "Events.Attributes": arrayOf(isStringMap),
		"Links.TraceId": arrayOf(isString), "Links.SpanId": arrayOf(isString), "Links.TraceState": arrayOf(isString),
		"Links.Attributes": arrayOf(isStringMap),
	} {
		if typ, ok := cols[name]; ok && !want(typ) {
			return layout{}, fmt.Errorf("column %s has type %s, which the exporter never wrote", name, typ)
		}
	}
	lay := layout{cols: cols}
	lc, err := columns(ctx, conn, db, table+"_trace_id_ts")
	if err != nil {
		return layout{}, err
	}
	if isString(lc["TraceId"]) && isTime(lc["Start"]) && isTime(lc["End"]) {
		lay.lookup = db + "." + table + "_trace_id_ts"
	}
	return lay, nil
}

func isString(t string) bool { return t == "String" || t == "LowCardinality(String)" }

func isDateTime64(t string) bool { return strings.HasPrefix(t, "DateTime64(") }

func isTime(t string) bool {
	return isDateTime64(t) || t == "DateTime" || strings.HasPrefix(t, "DateTime(")
}

func isInteger(t string) bool {
	switch t {
	case "Int64", "UInt64", "Int32", "UInt32":
		return true
	}
	return false
}

// isStringMap accepts Map(String, String) with either key spelling.
func isStringMap(t string) bool {
	k, ok := strings.CutPrefix(t, "Map(")
	if !ok {
		return false
	}
	k, ok = strings.CutSuffix(k, ", String)")
	return ok && isString(k)
}

func arrayOf(elem func(string) bool) func(string) bool {
	return func(t string) bool {
		e, ok := strings.CutPrefix(t, "Array(")
		if !ok {
			return false
		}
		e, ok = strings.CutSuffix(e, ")")
		return ok && elem(e)
	}
}

type reader struct {
	conn  chsql.Conn
	lay   layout
	table string
}

func (r *reader) has(col string) bool { _, ok := r.lay.cols[col]; return ok }

// pick returns the ids of the traces to read, in the order their first
// span starts, as many whole traces as fit in cfg.MaxSpans, and whether
// some were left out.
func (r *reader) pick(ctx context.Context, cfg Config) ([]string, bool, error) {
	inWindow := "SELECT TraceId FROM " + r.table +
		" WHERE Timestamp >= fromUnixTimestamp64Nano({since:Int64}) AND Timestamp <= fromUnixTimestamp64Nano({until:Int64}) AND TraceId != ''"
	// Every trace has a span, so at most MaxSpans of them fit; one more
	// tells that some were left out.
	q := "SELECT TraceId, toUInt64(uniqExact(SpanId)) AS n, toInt64(toUnixTimestamp64Nano(min(Timestamp))) AS first FROM " + r.table +
		" WHERE TraceId IN (" + inWindow + ") GROUP BY TraceId ORDER BY first, TraceId LIMIT " + strconv.Itoa(cfg.MaxSpans+1)
	rows, err := r.conn.Query(ctx, q, chsql.Params{chsql.P("since", int64(cfg.Window.SinceNs)), chsql.P("until", int64(cfg.Window.Until()))})
	if err != nil {
		return nil, false, fmt.Errorf("pick traces: %w", err)
	}
	defer rows.Close()
	var ids []string
	total, truncated := 0, false
	for rows.Next() {
		var id string
		var n uint64
		var first int64
		if err := rows.Scan(&id, &n, &first); err != nil {
			return nil, false, fmt.Errorf("pick traces: %w", err)
		}
		if truncated {
			continue // drain
		}
		if total+int(n) > cfg.MaxSpans {
			truncated = true
			continue
		}
		total += int(n)
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("pick traces: %w", err)
	}
	return ids, truncated, nil
}

// timeBound is the range of start times the chosen traces' spans lie in,
// as a condition; "" when unknown.
type timeBound struct {
	where  string
	params chsql.Params
}

// bound asks the lookup table, when there is one, for the range the
// traces' spans start in, so the span reads skip the table's other
// partitions. The lookup's Start and End may be whole seconds: the range is
// widened to them, and never narrower than the window.
func (r *reader) bound(ctx context.Context, w store.Window, ids []string) (timeBound, error) {
	if r.lay.lookup == "" {
		return timeBound{}, nil
	}
	lo, hi := int64(w.SinceNs), int64(w.Until())
	for chunk := range chunks(ids, 500) {
		q := "SELECT toInt64(toUnixTimestamp(min(Start))), toInt64(toUnixTimestamp(max(End))) + 1 FROM " + r.lay.lookup +
			" WHERE TraceId IN (" + placeholders(len(chunk)) + ") HAVING count() > 0"
		rows, err := r.conn.Query(ctx, q, idParams(chunk))
		if err != nil {
			return timeBound{}, fmt.Errorf("read trace-id lookup: %w", err)
		}
		for rows.Next() {
			var from, to int64
			if err := rows.Scan(&from, &to); err != nil {
				rows.Close()
				return timeBound{}, fmt.Errorf("read trace-id lookup: %w", err)
			}
			lo, hi = min(lo, from*1e9), max(hi, to*1e9)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return timeBound{}, fmt.Errorf("read trace-id lookup: %w", err)
		}
	}
	return timeBound{
		where:  " AND Timestamp >= fromUnixTimestamp64Nano({lo:Int64}) AND Timestamp <= fromUnixTimestamp64Nano({hi:Int64})",
		params: chsql.Params{chsql.P("lo", lo), chsql.P("hi", hi)},
	}, nil
}

func chunks(ids []string, n int) func(func([]string) bool) {
	return func(yield func([]string) bool) {
		for len(ids) > 0 {
			k := min(n, len(ids))
			if !yield(ids[:k]) {
				return
			}
			ids = ids[k:]
		}
	}
}

func placeholders(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "{id%d:String}", i)
	}
	return b.String()
}

func idParams(ids []string) chsql.Params {
	p := make(chsql.Params, len(ids))
	for i, id := range ids {
		p[i] = chsql.P("id"+strconv.Itoa(i), id)
	}
	return p
}

// row is one span as selected.
type row struct {
	traceID, spanID, parentID, traceState string
	name, kind, service                   string
	startNs, durNs                        int64
	status, statusMsg                     string
	scopeName, scopeVersion               string
	resKeys, resVals, keys, vals          []string
	evTimes                               []uint64
	evNames                               []string
	evKeys, evVals                        [][]string
	lkTraces, lkSpans, lkStates           []string
	lkKeys, lkVals                        [][]string
}

// selectList renders the columns of row, a default where the table has
// no such column.
func (r *reader) selectList() string {
	str := func(c string) string {
		if r.has(c) {
			return "toString(`" + c + "`)"
		}
		return "''"
	}
	strs := func(c string) string {
		if r.has(c) {
			return "CAST(`" + c + "`, 'Array(String)')"
		}
		return "CAST([], 'Array(String)')"
	}
	mapPart := func(c, part string) string {
		if r.has(c) {
			return "CAST(" + part + "(`" + c + "`), 'Array(String)')"
		}
		return "CAST([], 'Array(String)')"
	}
	mapParts := func(c, part string) string {
		if r.has(c) {
			return "arrayMap(m -> CAST(" + part + "(m), 'Array(String)'), `" + c + "`)"
		}
		return "CAST([], 'Array(Array(String))')"
	}
	evTimes := "CAST([], 'Array(UInt64)')"
	if r.has("Events.Timestamp") {
		evTimes = "arrayMap(t -> toUInt64(toUnixTimestamp64Nano(t)), `Events.Timestamp`)"
	}
	return strings.Join([]string{
		str("TraceId"), str("SpanId"), str("ParentSpanId"), str("TraceState"),
		str("SpanName"), str("SpanKind"), str("ServiceName"),
		"toUnixTimestamp64Nano(Timestamp)", "toInt64(Duration)",
		str("StatusCode"), str("StatusMessage"), str("ScopeName"), str("ScopeVersion"),
		mapPart("ResourceAttributes", "mapKeys"), mapPart("ResourceAttributes", "mapValues"),
		mapPart("SpanAttributes", "mapKeys"), mapPart("SpanAttributes", "mapValues"),
		evTimes, strs("Events.Name"), mapParts("Events.Attributes", "mapKeys"), mapParts("Events.Attributes", "mapValues"),
		strs("Links.TraceId"), strs("Links.SpanId"), strs("Links.TraceState"),
		mapParts("Links.Attributes", "mapKeys"), mapParts("Links.Attributes", "mapValues"),
	}, ", ")
}

func (w *row) dest() []any {
	return []any{&w.traceID, &w.spanID, &w.parentID, &w.traceState, &w.name, &w.kind, &w.service,
		&w.startNs, &w.durNs, &w.status, &w.statusMsg, &w.scopeName, &w.scopeVersion,
		&w.resKeys, &w.resVals, &w.keys, &w.vals,
		&w.evTimes, &w.evNames, &w.evKeys, &w.evVals,
		&w.lkTraces, &w.lkSpans, &w.lkStates, &w.lkKeys, &w.lkVals}
}

// spans reads the spans of ids, one row per span id (the exporter may
// have written a span twice when a batch was retried).
func (r *reader) spans(ctx context.Context, ids []string, b timeBound) (ptrace.Traces, error) {
	q := "SELECT " + r.selectList() + " FROM " + r.table + " WHERE TraceId IN (" + placeholders(len(ids)) + ")" + b.where +
		" ORDER BY TraceId, Timestamp, SpanId LIMIT 1 BY TraceId, SpanId"
	rows, err := r.conn.Query(ctx, q, append(idParams(ids), b.params...))
	if err != nil {
		return ptrace.Traces{}, fmt.Errorf("read spans: %w", err)
	}
	defer rows.Close()
	td := ptrace.NewTraces()
	scopeCols := r.has("ScopeName")
	for rows.Next() {
		var w row
		if err := rows.Scan(w.dest()...); err != nil {
			return ptrace.Traces{}, fmt.Errorf("read spans: %w", err)
		}
		w.append(td, scopeCols)
	}
	if err := rows.Err(); err != nil {
		return ptrace.Traces{}, fmt.Errorf("read spans: %w", err)
	}
	return td, nil
}

// append adds the row to td as a resource of its own with one scope of one
// span, as the exporter flattened it.
func (w *row) append(td ptrace.Traces, scopeCols bool) {
	rs := td.ResourceSpans().AppendEmpty()
	res := rs.Resource().Attributes()
	putAll(res, w.resKeys, w.resVals)
	if _, ok := res.Get("service.name"); !ok && w.service != "" {
		res.PutStr("service.name", w.service)
	}
	ss := rs.ScopeSpans().AppendEmpty()
	sp := ss.Spans().AppendEmpty()
	attrs := sp.Attributes()
	putAll(attrs, w.keys, w.vals)
	if scopeCols {
		ss.Scope().SetName(w.scopeName)
		ss.Scope().SetVersion(w.scopeVersion)
	} else {
		// Before the scope had columns the exporter wrote it into the
		// span's attributes.
		for key, set := range map[string]func(string){"otel.scope.name": ss.Scope().SetName, "otel.scope.version": ss.Scope().SetVersion} {
			if v, ok := attrs.Get(key); ok {
				set(v.Str())
				attrs.Remove(key)
			}
		}
	}
	sp.SetTraceID(traceIDOf(w.traceID))
	sp.SetSpanID(spanIDOf(w.spanID))
	sp.SetParentSpanID(spanIDOf(w.parentID))
	sp.TraceState().FromRaw(w.traceState)
	sp.SetName(w.name)
	sp.SetKind(kindOf(w.kind))
	sp.SetStartTimestamp(pcommon.Timestamp(w.startNs))
	// A negative (or wrapped unsigned) duration keeps the end before the
	// start, which the Converter rejects as a file's span would be.
	sp.SetEndTimestamp(pcommon.Timestamp(uint64(w.startNs) + uint64(w.durNs)))
	sp.Status().SetCode(statusOf(w.status))
	sp.Status().SetMessage(w.statusMsg)
	for i, name := range w.evNames {
		ev := sp.Events().AppendEmpty()
		ev.SetName(name)
		if i < len(w.evTimes) {
			ev.SetTimestamp(pcommon.Timestamp(w.evTimes[i]))
		}
		if i < len(w.evKeys) && i < len(w.evVals) {
			putAll(ev.Attributes(), w.evKeys[i], w.evVals[i])
		}
	}
	for i, tid := range w.lkTraces {
		lk := sp.Links().AppendEmpty()
		lk.SetTraceID(traceIDOf(tid))
		if i < len(w.lkSpans) {
			lk.SetSpanID(spanIDOf(w.lkSpans[i]))
		}
		if i < len(w.lkStates) {
			lk.TraceState().FromRaw(w.lkStates[i])
		}
		if i < len(w.lkKeys) && i < len(w.lkVals) {
			putAll(lk.Attributes(), w.lkKeys[i], w.lkVals[i])
		}
	}
}

func putAll(m pcommon.Map, keys, vals []string) {
	m.EnsureCapacity(len(keys))
	for i, k := range keys {
		if i >= len(vals) {
			break
		}
		translate.PutString(m, k, vals[i])
	}
}

// traceIDOf and spanIDOf decode hex ids; anything else is the zero id,
// which the Converter rejects (trace and span ids) or reads as "no parent".
func traceIDOf(s string) pcommon.TraceID {
	var id pcommon.TraceID
	if len(s) == 2*len(id) {
		if _, err := hex.Decode(id[:], []byte(s)); err != nil {
			return pcommon.TraceID{}
		}
	}
	return id
}

func spanIDOf(s string) pcommon.SpanID {
	var id pcommon.SpanID
	if len(s) == 2*len(id) {
		if _, err := hex.Decode(id[:], []byte(s)); err != nil {
			return pcommon.SpanID{}
		}
	}
	return id
}

// kindOf reads both spellings the exporter has written: pdata's
// ("Server") and traceutil's ("SPAN_KIND_SERVER"). Anything else is
// unspecified.
func kindOf(s string) ptrace.SpanKind {
	switch strings.ToLower(strings.TrimPrefix(strings.ToUpper(s), "SPAN_KIND_")) {
	case "internal":
		return ptrace.SpanKindInternal
	case "server":
		return ptrace.SpanKindServer
	case "client":
		return ptrace.SpanKindClient
	case "producer":
		return ptrace.SpanKindProducer
	case "consumer":
		return ptrace.SpanKindConsumer
	}
	return ptrace.SpanKindUnspecified
}

// statusOf reads "Error" and "STATUS_CODE_ERROR" alike; anything else is
// unset.
func statusOf(s string) ptrace.StatusCode {
	switch strings.ToLower(strings.TrimPrefix(strings.ToUpper(s), "STATUS_CODE_")) {
	case "ok":
		return ptrace.StatusCodeOk
	case "error":
		return ptrace.StatusCodeError
	}
	return ptrace.StatusCodeUnset
}
