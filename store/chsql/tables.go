package chsql

import (
	"encoding/base64"
	"fmt"
	"math"
	"strings"

	"github.com/budgetd/budgetd/problems"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store/chschema"
)

// table is one of the tables budgetd inserts into, as its inserts see it:
// every column, in the order inserts and reads name them. This is the one
// Go statement of the column contract: the insert's column list, the
// types the engines send and the values of each row all come from here,
// and the conformance suite checks it against the tables the migrations
// create (storetest, "the Go tables match the DDL").
type table[R any] struct {
	name    string
	columns []column[R]
}

// column is one column of a table.
type column[R any] struct {
	name string
	// ddl is the column's type as the DDL declares it on a current server,
	// e.g. "Array(LowCardinality(String))". Its values are sent as the
	// type without LowCardinality (sentType).
	ddl string
	// put appends row r's value to c: for an Array column its elements
	// (closing each inner array of an Array(Array(T)) with EndInner); the
	// table closes the row's array.
	put func(c *Column, r R)
}

// sentType is the type a column declared as ddl is sent (and, on servers
// without LowCardinality, declared) as: LowCardinality(String) is a storage
// form of String that the server converts to on insert.
func sentType(ddl string) string { return strings.ReplaceAll(ddl, "LowCardinality(String)", "String") }

// newBlock returns an empty block of t's columns.
func (t *table[R]) newBlock() (*Block, error) {
	blk := &Block{Columns: make([]Column, len(t.columns))}
	for i, col := range t.columns {
		typ, ok := typeNamed(sentType(col.ddl))
		if !ok {
			return nil, fmt.Errorf("build %s block: column %s: no Block type for %s", t.name, col.name, col.ddl)
		}
		blk.Columns[i] = Column{Name: col.name, Type: typ}
	}
	return blk, nil
}

// appendRow appends r to blk, a block of t's columns.
func (t *table[R]) appendRow(blk *Block, r R) {
	for i := range t.columns {
		c := &blk.Columns[i]
		t.columns[i].put(c, r)
		if c.Type.Depth() > 0 {
			c.EndArray()
		}
	}
	blk.Rows++
}

// columnList is t's column names for a SELECT, in table order.
func (t *table[R]) columnList() string {
	names := make([]string, len(t.columns))
	for i, c := range t.columns {
		names[i] = c.name
	}
	return strings.Join(names, ", ")
}

// declared is t as the migrations declare it on a server with features f.
func (t *table[R]) declared(f chschema.Features) TableColumns {
	out := TableColumns{Table: t.name, Columns: make([]ColumnType, len(t.columns))}
	for i, c := range t.columns {
		typ := c.ddl
		if !f.LowCardinality {
			typ = sentType(typ)
		}
		out.Columns[i] = ColumnType{Name: c.name, Type: typ}
	}
	return out
}

// TableColumns is a table budgetd inserts into, with its columns.
type TableColumns struct {
	Table   string
	Columns []ColumnType
}

// ColumnType is a column's name and ClickHouse type, as DESC TABLE and
// system.columns show them.
type ColumnType struct {
	Name string
	Type string
}

// InsertTables returns every table budgetd inserts into, each column with
// its type as the DDL declares it on a server with features f: what the
// database must hold after the migrations, column for column.
func InsertTables(f chschema.Features) []TableColumns {
	return []TableColumns{
		spansTable.declared(f), traceIndexTable.declared(f), hopsTable.declared(f), findingsTable.declared(f),
		reanalysedTable.declared(f), problemStatsTable.declared(f), edgeStatesTable.declared(f), batchesTable.declared(f),
		migrationsTable.declared(f), followPositionsTable.declared(f),
		pathStatsTable.declared(f), edgeStatsTable.declared(f), statsSinceTable.declared(f),
	}
}

// Attribute lists are stored as parallel key, type and value arrays (see
// schema.Attr); these append one list's part.
func attrKeys(c *Column, as schema.Attributes) {
	for i := range as {
		c.AppendString(as[i].Key)
	}
}

func attrTypes(c *Column, as schema.Attributes) {
	for i := range as {
		c.AppendUInt8(uint8(as[i].Type))
	}
}

func attrValues(c *Column, as schema.Attributes) {
	for i := range as {
		c.AppendString(as[i].Value)
	}
}

// eventAttrs and linkAttrs append one inner array per event or link to an
// Array(Array(T)) column: part appends the elements of one.
func eventAttrs(c *Column, evs []schema.Event, part func(*Column, schema.Attributes)) {
	for i := range evs {
		part(c, evs[i].Attrs)
		c.EndInner()
	}
}

func linkAttrs(c *Column, links []schema.Link, part func(*Column, schema.Attributes)) {
	for i := range links {
		part(c, links[i].Attrs)
		c.EndInner()
	}
}

// spansTable holds the raw spans (0001_spans.sql). Reads scan its columns in
// this order (spanRow.dest).
var spansTable = table[*schema.Span]{name: "spans", columns: []column[*schema.Span]{
	{"trace_id", "String", func(c *Column, s *schema.Span) { c.AppendString(s.TraceID.String()) }},
	{"span_id", "String", func(c *Column, s *schema.Span) { c.AppendString(s.SpanID.String()) }},
	{"parent_span_id", "String", func(c *Column, s *schema.Span) { c.AppendString(s.ParentSpanID.String()) }},
	{"trace_state", "String", func(c *Column, s *schema.Span) { c.AppendString(s.TraceState) }},
	{"service", "LowCardinality(String)", func(c *Column, s *schema.Span) { c.AppendString(s.Service) }},
	{"name", "LowCardinality(String)", func(c *Column, s *schema.Span) { c.AppendString(s.Name) }},
	{"kind", "Int8", func(c *Column, s *schema.Span) { c.AppendInt8(int8(s.Kind)) }},
	{"start_ns", "UInt64", func(c *Column, s *schema.Span) { c.AppendUInt64(s.StartNs) }},
	{"end_ns", "UInt64", func(c *Column, s *schema.Span) { c.AppendUInt64(s.EndNs) }},
	{"status_code", "Int8", func(c *Column, s *schema.Span) { c.AppendInt8(int8(s.StatusCode)) }},
	{"status_message", "String", func(c *Column, s *schema.Span) { c.AppendString(s.StatusMessage) }},
	{"scope_name", "LowCardinality(String)", func(c *Column, s *schema.Span) { c.AppendString(s.ScopeName) }},
	{"scope_version", "LowCardinality(String)", func(c *Column, s *schema.Span) { c.AppendString(s.ScopeVersion) }},
	{"resource_attr_keys", "Array(LowCardinality(String))", func(c *Column, s *schema.Span) { attrKeys(c, s.ResourceAttrs) }},
	{"resource_attr_types", "Array(UInt8)", func(c *Column, s *schema.Span) { attrTypes(c, s.ResourceAttrs) }},
	{"resource_attr_values", "Array(String)", func(c *Column, s *schema.Span) { attrValues(c, s.ResourceAttrs) }},
	{"attr_keys", "Array(LowCardinality(String))", func(c *Column, s *schema.Span) { attrKeys(c, s.Attrs) }},
	{"attr_types", "Array(UInt8)", func(c *Column, s *schema.Span) { attrTypes(c, s.Attrs) }},
	{"attr_values", "Array(String)", func(c *Column, s *schema.Span) { attrValues(c, s.Attrs) }},
	{"event_times", "Array(UInt64)", func(c *Column, s *schema.Span) {
		for i := range s.Events {
			c.AppendUInt64(s.Events[i].TimeNs)
		}
	}},
	{"event_names", "Array(String)", func(c *Column, s *schema.Span) {
		for i := range s.Events {
			c.AppendString(s.Events[i].Name)
		}
	}},
	{"event_attr_keys", "Array(Array(String))", func(c *Column, s *schema.Span) { eventAttrs(c, s.Events, attrKeys) }},
	{"event_attr_types", "Array(Array(UInt8))", func(c *Column, s *schema.Span) { eventAttrs(c, s.Events, attrTypes) }},
	{"event_attr_values", "Array(Array(String))", func(c *Column, s *schema.Span) { eventAttrs(c, s.Events, attrValues) }},
	{"link_trace_ids", "Array(String)", func(c *Column, s *schema.Span) {
		for i := range s.Links {
			c.AppendString(s.Links[i].TraceID.String())
		}
	}},
	{"link_span_ids", "Array(String)", func(c *Column, s *schema.Span) {
		for i := range s.Links {
			c.AppendString(s.Links[i].SpanID.String())
		}
	}},
	{"link_trace_states", "Array(String)", func(c *Column, s *schema.Span) {
		for i := range s.Links {
			c.AppendString(s.Links[i].TraceState)
		}
	}},
	{"link_attr_keys", "Array(Array(String))", func(c *Column, s *schema.Span) { linkAttrs(c, s.Links, attrKeys) }},
	{"link_attr_types", "Array(Array(UInt8))", func(c *Column, s *schema.Span) { linkAttrs(c, s.Links, attrTypes) }},
	{"link_attr_values", "Array(Array(String))", func(c *Column, s *schema.Span) { linkAttrs(c, s.Links, attrValues) }},
	{"span_bytes", "UInt32", func(c *Column, s *schema.Span) { c.AppendUInt32(spanBytes(s)) }},
}}

// spanBytes is a span's size as a trace read's byte limit counts it
// (store.TraceLimits.Bytes, 0020_span_bytes.sql, whose DEFAULT computes
// the same for spans stored before it): 200 bytes, its strings, and the
// keys and values of its attributes, events and links, its resource's
// included. Counting here costs a pass over the span's strings; the
// DEFAULT computed on insert took 4 µs a span in chDB.
func spanBytes(s *schema.Span) uint32 {
	n := 200 + len(s.Name) + len(s.StatusMessage) + len(s.TraceState) + len(s.ScopeName) + len(s.Service)
	attrs := func(as schema.Attributes) {
		for i := range as {
			n += len(as[i].Key) + len(as[i].Value)
		}
	}
	attrs(s.ResourceAttrs)
	attrs(s.Attrs)
	for i := range s.Events {
		n += len(s.Events[i].Name)
		attrs(s.Events[i].Attrs)
	}
	for i := range s.Links {
		n += len(s.Links[i].TraceState)
		attrs(s.Links[i].Attrs)
	}
	return uint32(min(n, math.MaxUint32))
}

// traceIndexRow is one (trace, service) entry of the trace-id lookup.
type traceIndexRow struct {
	traceID string
	service string
	startNs uint64
	endNs   uint64
	spans   uint32
	bytes   uint64 // the spans' spanBytes
}

// traceIndexTable is the trace-id lookup (0001_spans.sql, 0023_trace_bytes.sql).
var traceIndexTable = table[*traceIndexRow]{name: "trace_index", columns: []column[*traceIndexRow]{
	{"trace_id", "String", func(c *Column, r *traceIndexRow) { c.AppendString(r.traceID) }},
	{"service", "LowCardinality(String)", func(c *Column, r *traceIndexRow) { c.AppendString(r.service) }},
	{"start_ns", "UInt64", func(c *Column, r *traceIndexRow) { c.AppendUInt64(r.startNs) }},
	{"end_ns", "UInt64", func(c *Column, r *traceIndexRow) { c.AppendUInt64(r.endNs) }},
	{"spans", "UInt32", func(c *Column, r *traceIndexRow) { c.AppendUInt32(r.spans) }},
	{"bytes", "UInt64", func(c *Column, r *traceIndexRow) { c.AppendUInt64(r.bytes) }},
}}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// hopsTable holds the analysed hops (0002_hops.sql and the columns later
// migrations add). Reads scan its columns in this order (TraceHops).
var hopsTable = table[*schema.Hop]{name: "hops", columns: []column[*schema.Hop]{
	{"trace_id", "String", func(c *Column, h *schema.Hop) { c.AppendString(h.TraceID.String()) }},
	{"span_id", "String", func(c *Column, h *schema.Hop) { c.AppendString(h.SpanID.String()) }},
	{"parent_span_id", "String", func(c *Column, h *schema.Hop) { c.AppendString(h.ParentSpanID.String()) }},
	{"service", "LowCardinality(String)", func(c *Column, h *schema.Hop) { c.AppendString(h.Service) }},
	{"operation", "LowCardinality(String)", func(c *Column, h *schema.Hop) { c.AppendString(h.Operation) }},
	{"kind", "Int8", func(c *Column, h *schema.Hop) { c.AppendInt8(int8(h.Kind)) }},
	{"path", "String", func(c *Column, h *schema.Hop) { c.AppendString(h.Path) }},
	{"root_path", "String", func(c *Column, h *schema.Hop) { c.AppendString(h.RootPath) }},
	{"caller_service", "LowCardinality(String)", func(c *Column, h *schema.Hop) { c.AppendString(h.CallerService) }},
	{"caller_operation", "LowCardinality(String)", func(c *Column, h *schema.Hop) { c.AppendString(h.CallerOperation) }},
	{"callee_service", "LowCardinality(String)", func(c *Column, h *schema.Hop) { c.AppendString(h.CalleeService) }},
	{"callee_operation", "LowCardinality(String)", func(c *Column, h *schema.Hop) { c.AppendString(h.CalleeOperation) }},
	{"start_ns", "UInt64", func(c *Column, h *schema.Hop) { c.AppendUInt64(h.StartNs) }},
	{"duration_ns", "UInt64", func(c *Column, h *schema.Hop) { c.AppendUInt64(h.DurationNs) }},
	{"is_error", "UInt8", func(c *Column, h *schema.Hop) { c.AppendUInt8(b2u(h.IsError)) }},
	{"timed_out", "UInt8", func(c *Column, h *schema.Hop) { c.AppendUInt8(b2u(h.TimedOut)) }},
	{"remaining_ms", "Nullable(Float64)", func(c *Column, h *schema.Hop) { c.AppendNullableFloat64(h.RemainingMs) }},
	{"budget_ms", "Nullable(Float64)", func(c *Column, h *schema.Hop) { c.AppendNullableFloat64(h.BudgetMs) }},
	{"budget_source", "LowCardinality(String)", func(c *Column, h *schema.Hop) { c.AppendString(h.BudgetSource) }},
	{"timeout_ms", "Nullable(Float64)", func(c *Column, h *schema.Hop) { c.AppendNullableFloat64(h.TimeoutMs) }},
	{"attempt", "UInt32", func(c *Column, h *schema.Hop) { c.AppendUInt32(h.Attempt) }},
	{"max_attempts", "UInt32", func(c *Column, h *schema.Hop) { c.AppendUInt32(h.MaxAttempts) }},
	{"orphaned_ms", "Float64", func(c *Column, h *schema.Hop) { c.AppendFloat64(h.OrphanedMs) }},
	{"rejected", "UInt8", func(c *Column, h *schema.Hop) { c.AppendUInt8(b2u(h.Rejected)) }},
	{"inferred", "UInt8", func(c *Column, h *schema.Hop) { c.AppendUInt8(b2u(h.Inferred)) }},
	{"analyzed_ns", "UInt64", func(c *Column, h *schema.Hop) { c.AppendUInt64(h.AnalyzedNs) }},
	{"callee_duration_ns", "UInt64", func(c *Column, h *schema.Hop) { c.AppendUInt64(h.CalleeDurationNs) }},
	{"inferred_timeout_ms", "Nullable(Float64)", func(c *Column, h *schema.Hop) { c.AppendNullableFloat64(h.InferredTimeoutMs) }},
	{"inferred_remaining_ms", "Nullable(Float64)", func(c *Column, h *schema.Hop) { c.AppendNullableFloat64(h.InferredRemainingMs) }},
	{"inference_confidence", "Float64", func(c *Column, h *schema.Hop) { c.AppendFloat64(h.InferenceConfidence) }},
	{"path_calls", "UInt32", func(c *Column, h *schema.Hop) { c.AppendUInt32(h.PathCalls) }},
}}

// findingRow is a finding with its evidence keys sorted, so a finding
// renders the same row every time.
type findingRow struct {
	f    *schema.Finding
	keys []string
}

// findingsTable holds the detectors' findings (0003_findings.sql). Reads
// scan its columns in this order (Findings).
var findingsTable = table[findingRow]{name: "findings", columns: []column[findingRow]{
	{"id", "String", func(c *Column, r findingRow) { c.AppendString(r.f.ID) }},
	{"kind", "LowCardinality(String)", func(c *Column, r findingRow) { c.AppendString(string(r.f.Kind)) }},
	{"severity", "LowCardinality(String)", func(c *Column, r findingRow) { c.AppendString(string(r.f.Severity)) }},
	{"trace_id", "String", func(c *Column, r findingRow) { c.AppendString(r.f.TraceID) }},
	{"span_id", "String", func(c *Column, r findingRow) { c.AppendString(r.f.SpanID) }},
	{"service", "LowCardinality(String)", func(c *Column, r findingRow) { c.AppendString(r.f.Service) }},
	{"operation", "LowCardinality(String)", func(c *Column, r findingRow) { c.AppendString(r.f.Operation) }},
	{"caller_service", "LowCardinality(String)", func(c *Column, r findingRow) { c.AppendString(r.f.CallerService) }},
	{"callee_service", "LowCardinality(String)", func(c *Column, r findingRow) { c.AppendString(r.f.CalleeService) }},
	{"path", "String", func(c *Column, r findingRow) { c.AppendString(r.f.Path) }},
	{"detected_ns", "UInt64", func(c *Column, r findingRow) { c.AppendUInt64(uint64(r.f.DetectedAt.UnixNano())) }},
	{"evidence_keys", "Array(String)", func(c *Column, r findingRow) {
		for _, k := range r.keys {
			c.AppendString(k)
		}
	}},
	{"evidence_values", "Array(Float64)", func(c *Column, r findingRow) {
		for _, k := range r.keys {
			c.AppendFloat64(r.f.Evidence[k])
		}
	}},
	{"message", "String", func(c *Column, r findingRow) { c.AppendString(r.f.Message) }},
}}

// problemStatsTable counts the trace findings per problem and interval
// (0013_problem_stats.sql). Reads scan its columns in this order
// (ProblemStats).
var problemStatsTable = table[*problems.Stat]{name: "problem_stats", columns: []column[*problems.Stat]{
	{"problem_id", "String", func(c *Column, s *problems.Stat) { c.AppendString(s.Key.ID()) }},
	{"kind", "LowCardinality(String)", func(c *Column, s *problems.Stat) { c.AppendString(string(s.Key.Kind)) }},
	{"caller_service", "LowCardinality(String)", func(c *Column, s *problems.Stat) { c.AppendString(s.Key.CallerService) }},
	{"caller_operation", "LowCardinality(String)", func(c *Column, s *problems.Stat) { c.AppendString(s.Key.CallerOperation) }},
	{"callee_service", "LowCardinality(String)", func(c *Column, s *problems.Stat) { c.AppendString(s.Key.CalleeService) }},
	{"callee_operation", "LowCardinality(String)", func(c *Column, s *problems.Stat) { c.AppendString(s.Key.CalleeOperation) }},
	{"path", "String", func(c *Column, s *problems.Stat) { c.AppendString(s.Key.Path) }},
	{"interval_ns", "UInt64", func(c *Column, s *problems.Stat) { c.AppendUInt64(uint64(s.Interval.UnixNano())) }},
	{"findings", "UInt64", func(c *Column, s *problems.Stat) { c.AppendUInt64(s.Findings) }},
	{"requests", "UInt64", func(c *Column, s *problems.Stat) { c.AppendUInt64(s.Requests) }},
	{"impact", "Float64", func(c *Column, s *problems.Stat) { c.AppendFloat64(s.Impact) }},
}}

// edgeStatesTable holds the replicas' edge statistics
// (0014_edge_states.sql). Reads scan its columns in this order
// (EdgeStates).
var edgeStatesTable = table[*schema.EdgeState]{name: "edge_states", columns: []column[*schema.EdgeState]{
	{"replica", "String", func(c *Column, e *schema.EdgeState) { c.AppendString(e.Replica) }},
	{"evaluated_ns", "UInt64", func(c *Column, e *schema.EdgeState) { c.AppendUInt64(e.EvaluatedNs) }},
	{"caller_service", "String", func(c *Column, e *schema.EdgeState) { c.AppendString(e.CallerService) }},
	{"caller_operation", "String", func(c *Column, e *schema.EdgeState) { c.AppendString(e.CallerOperation) }},
	{"callee_service", "String", func(c *Column, e *schema.EdgeState) { c.AppendString(e.CalleeService) }},
	{"callee_operation", "String", func(c *Column, e *schema.EdgeState) { c.AppendString(e.CalleeOperation) }},
	// Base64: the embedded engine inserts through JSON, which would turn
	// bytes that are not UTF-8 into replacement characters.
	{"state", "String", func(c *Column, e *schema.EdgeState) { c.AppendString(base64.StdEncoding.EncodeToString(e.State)) }},
}}

// reanalysedRow records that a trace was analysed again.
type reanalysedRow struct {
	trace      schema.TraceID
	analyzedNs uint64
}

// reanalysedTable lists the traces analysed more than once (0009_reanalysed.sql).
var reanalysedTable = table[reanalysedRow]{name: "reanalysed", columns: []column[reanalysedRow]{
	{"trace_id", "String", func(c *Column, r reanalysedRow) { c.AppendString(r.trace.String()) }},
	{"analyzed_ns", "UInt64", func(c *Column, r reanalysedRow) { c.AppendUInt64(r.analyzedNs) }},
}}

// The interval statistics tables (0019_interval_stats.sql): WriteHops
// inserts their rows (pathStatsOf, edgeStatsOf), and a re-analysis the
// earlier analysis's rows negated (undoSuperseded).
var (
	pathStatsTable = table[*pathStat]{name: "path_stats", columns: []column[*pathStat]{
		{"interval_ns", "UInt64", func(c *Column, r *pathStat) { c.AppendUInt64(r.intervalNs) }},
		{"path", "LowCardinality(String)", func(c *Column, r *pathStat) { c.AppendString(r.path) }},
		{"role", "UInt8", func(c *Column, r *pathStat) { c.AppendUInt8(r.role) }},
		{"root", "UInt8", func(c *Column, r *pathStat) { c.AppendUInt8(r.root) }},
		{"measure", "UInt8", func(c *Column, r *pathStat) { c.AppendUInt8(r.measure) }},
		{"bucket", "Int32", func(c *Column, r *pathStat) { c.AppendInt32(r.bucket) }},
		{"n", "Int64", func(c *Column, r *pathStat) { c.AppendInt64(r.n) }},
		{"total", "Float64", func(c *Column, r *pathStat) { c.AppendFloat64(r.total) }},
	}}
	edgeStatsTable = table[*edgeStat]{name: "edge_stats", columns: []column[*edgeStat]{
		{"interval_ns", "UInt64", func(c *Column, r *edgeStat) { c.AppendUInt64(r.intervalNs) }},
		{"caller_service", "LowCardinality(String)", func(c *Column, r *edgeStat) { c.AppendString(r.callerService) }},
		{"caller_operation", "LowCardinality(String)", func(c *Column, r *edgeStat) { c.AppendString(r.callerOperation) }},
		{"callee_service", "LowCardinality(String)", func(c *Column, r *edgeStat) { c.AppendString(r.calleeService) }},
		{"callee_operation", "LowCardinality(String)", func(c *Column, r *edgeStat) { c.AppendString(r.calleeOperation) }},
		{"measure", "UInt8", func(c *Column, r *edgeStat) { c.AppendUInt8(r.measure) }},
		{"bucket", "Int32", func(c *Column, r *edgeStat) { c.AppendInt32(r.bucket) }},
		{"n", "Int64", func(c *Column, r *edgeStat) { c.AppendInt64(r.n) }},
		{"total", "Float64", func(c *Column, r *edgeStat) { c.AppendFloat64(r.total) }},
	}}
	statsSinceTable = table[struct{}]{name: "stats_since", columns: []column[struct{}]{{"since_ns", "UInt64", nil}}}
)

// batchRow records a written batch's dedup token.
type batchRow struct {
	token     string
	table     string
	rows      uint64
	writtenNs uint64
}

// batchesTable holds the dedup tokens of written batches on servers without
// insert_deduplication_token (0004_batches.sql).
var batchesTable = table[batchRow]{name: "batches", columns: []column[batchRow]{
	{"token", "String", func(c *Column, r batchRow) { c.AppendString(r.token) }},
	{"tbl", "String", func(c *Column, r batchRow) { c.AppendString(r.table) }},
	{"rows", "UInt64", func(c *Column, r batchRow) { c.AppendUInt64(r.rows) }},
	{"written_ns", "UInt64", func(c *Column, r batchRow) { c.AppendUInt64(r.writtenNs) }},
}}

// migrationRow records an applied migration.
type migrationRow struct {
	version   uint32
	name      string
	appliedNs uint64
}

// migrationsTable records the applied migrations; Store.migrate creates it
// before any migration runs.
var migrationsTable = table[migrationRow]{name: "schema_migrations", columns: []column[migrationRow]{
	{"version", "UInt32", func(c *Column, r migrationRow) { c.AppendUInt32(r.version) }},
	{"name", "String", func(c *Column, r migrationRow) { c.AppendString(r.name) }},
	{"applied_ns", "UInt64", func(c *Column, r migrationRow) { c.AppendUInt64(r.appliedNs) }},
}}

// followPositionRow records how far a followed table has been read.
type followPositionRow struct {
	source     string
	positionNs uint64
	savedNs    uint64
}

// followPositionsTable holds the followers' positions
// (0015_follow_positions.sql).
var followPositionsTable = table[followPositionRow]{name: "follow_positions", columns: []column[followPositionRow]{
	{"source", "String", func(c *Column, r followPositionRow) { c.AppendString(r.source) }},
	{"position_ns", "UInt64", func(c *Column, r followPositionRow) { c.AppendUInt64(r.positionNs) }},
	{"saved_ns", "UInt64", func(c *Column, r followPositionRow) { c.AppendUInt64(r.savedNs) }},
}}
