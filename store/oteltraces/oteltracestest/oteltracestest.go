// Package oteltracestest creates the OpenTelemetry Collector ClickHouse
// exporter's otel_traces table, in the layouts oteltraces reads, and writes
// traces into it the way the exporter does, so tests read real rows on a
// real engine. The DDL in testdata/ is the exporter's own, copied verbatim
// (see each file's header).
package oteltracestest

import (
	"context"
	"embed"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/budgetd/budgetd/store/chsql"
)

//go:embed testdata/*.sql
var ddl embed.FS

// Layout is one version of the exporter's table.
type Layout struct {
	// Name names the layout in test names.
	Name string
	// create renders the statements that create the table, its
	// trace-id lookup and the view that fills the lookup.
	create func(db, table string) []string
	// scopeColumns: ScopeName and ScopeVersion are columns; before, the
	// exporter put them in SpanAttributes as otel.scope.name/version.
	scopeColumns bool
	// prefixed: kinds and codes are written SPAN_KIND_SERVER and
	// STATUS_CODE_ERROR (traceutil.SpanKindStr/StatusCodeStr), not
	// Server and Error (pdata's String).
	prefixed bool
}

// Layouts returns the layouts: v0.165.0's and the legacy one.
func Layouts() []Layout {
	return []Layout{
		{
			// v0.165.0 (internal/sqltemplates): Duration UInt64, scope
			// columns, kinds as pdata spells them, lookup Start/End in
			// whole seconds.
			Name:         "v0.165.0",
			scopeColumns: true,
			create: func(db, table string) []string {
				return []string{
					fmt.Sprintf(read("v0165_traces_table.sql"), db, table, "", "MergeTree()", ""),
					fmt.Sprintf(read("v0165_traces_id_ts_lookup_table.sql"), db, table, "", "MergeTree()", ""),
					fmt.Sprintf(read("v0165_traces_id_ts_lookup_mv.sql"), db, table, "", db, table, db, table),
				}
			},
		},
		{
			// The layout of exporter_traces.go before the templates moved
			// out: Duration Int64, no scope columns, prefixed spellings.
			Name:     "legacy",
			prefixed: true,
			create: func(db, table string) []string {
				full := db + "." + table
				return []string{
					fmt.Sprintf(read("legacy_traces_table.sql"), full, ""),
					fmt.Sprintf(read("legacy_traces_id_ts_lookup_table.sql"), full, ""),
					fmt.Sprintf(read("legacy_traces_id_ts_lookup_mv.sql"), full, db, table, db, table),
				}
			},
		},
	}
}

// read returns a DDL file without its comment lines and final semicolon.
func read(name string) string {
	b, err := ddl.ReadFile("testdata/" + name)
	if err != nil {
		return "-- missing " + name // fails loudly when executed
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, "--") {
			lines = append(lines, l)
		}
	}
	return strings.TrimSuffix(strings.TrimSpace(strings.Join(lines, "\n")), ";")
}

// Create creates database db if needed, and the table with its trace-id
// lookup (table_trace_id_ts) and the view filling it, as the exporter does
// at start.
func Create(ctx context.Context, conn chsql.Conn, l Layout, db, table string) error {
	if err := conn.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+db, nil); err != nil {
		return fmt.Errorf("create database %s: %w", db, err)
	}
	for _, stmt := range l.create(db, table) {
		if err := conn.Exec(ctx, stmt, nil); err != nil {
			return fmt.Errorf("create %s layout: %w\n%s", l.Name, err, stmt)
		}
	}
	return nil
}

// Write inserts td's spans as the exporter writes them: one row per span,
// attributes as Map(String, String) of each value's AsString.
func Write(ctx context.Context, conn chsql.Conn, l Layout, db, table string, td ptrace.Traces) error {
	cols := []string{"Timestamp", "TraceId", "SpanId", "ParentSpanId", "TraceState", "SpanName", "SpanKind", "ServiceName",
		"ResourceAttributes", "SpanAttributes", "Duration", "StatusCode", "StatusMessage",
		"Events.Timestamp", "Events.Name", "Events.Attributes", "Links.TraceId", "Links.SpanId", "Links.TraceState", "Links.Attributes"}
	if l.scopeColumns {
		cols = append(cols, "ScopeName", "ScopeVersion")
	}
	var rows []string
	for _, rs := range td.ResourceSpans().All() {
		res := rs.Resource().Attributes()
		service := ""
		if v, ok := res.Get("service.name"); ok {
			service = v.Str()
		}
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				attrs := asStrings(sp.Attributes())
				if !l.scopeColumns {
					if n := ss.Scope().Name(); n != "" {
						attrs["otel.scope.name"] = n
					}
					if v := ss.Scope().Version(); v != "" {
						attrs["otel.scope.version"] = v
					}
				}
				var evTimes, evNames, evAttrs, lkTraces, lkSpans, lkStates, lkAttrs []string
				for _, ev := range sp.Events().All() {
					evTimes = append(evTimes, ts(ev.Timestamp()))
					evNames = append(evNames, quote(ev.Name()))
					evAttrs = append(evAttrs, mapLiteral(asStrings(ev.Attributes())))
				}
				for _, lk := range sp.Links().All() {
					lkTraces = append(lkTraces, quote(traceID(lk.TraceID())))
					lkSpans = append(lkSpans, quote(spanID(lk.SpanID())))
					lkStates = append(lkStates, quote(lk.TraceState().AsRaw()))
					lkAttrs = append(lkAttrs, mapLiteral(asStrings(lk.Attributes())))
				}
				// The exporter subtracts the timestamps as it has them:
				// unsigned in v0.165.0, so an end before the start wraps.
				dur := strconv.FormatUint(uint64(sp.EndTimestamp()-sp.StartTimestamp()), 10)
				if l.prefixed {
					dur = strconv.FormatInt(int64(sp.EndTimestamp())-int64(sp.StartTimestamp()), 10)
				}
				vals := []string{
					ts(sp.StartTimestamp()), quote(traceID(sp.TraceID())), quote(spanID(sp.SpanID())), quote(spanID(sp.ParentSpanID())),
					quote(sp.TraceState().AsRaw()), quote(sp.Name()), quote(l.kind(sp.Kind())), quote(service),
					mapLiteral(asStrings(res)), mapLiteral(attrs), dur, quote(l.status(sp.Status().Code())), quote(sp.Status().Message()),
					array(evTimes), array(evNames), array(evAttrs), array(lkTraces), array(lkSpans), array(lkStates), array(lkAttrs),
				}
				if l.scopeColumns {
					vals = append(vals, quote(ss.Scope().Name()), quote(ss.Scope().Version()))
				}
				rows = append(rows, "("+strings.Join(vals, ", ")+")")
			}
		}
	}
	const perInsert = 200
	for len(rows) > 0 {
		n := min(perInsert, len(rows))
		q := "INSERT INTO " + db + "." + table + " (" + quoteNames(cols) + ") VALUES " + strings.Join(rows[:n], ", ")
		if err := conn.Exec(ctx, q, nil); err != nil {
			return fmt.Errorf("insert into %s.%s: %w", db, table, err)
		}
		rows = rows[n:]
	}
	return nil
}

func (l Layout) kind(k ptrace.SpanKind) string {
	if l.prefixed {
		return "SPAN_KIND_" + strings.ToUpper(k.String())
	}
	return k.String()
}

func (l Layout) status(c ptrace.StatusCode) string {
	if l.prefixed {
		return "STATUS_CODE_" + strings.ToUpper(c.String())
	}
	return c.String()
}

// traceID and spanID are traceutil's *ToHexOrEmptyString.
func traceID(id pcommon.TraceID) string {
	if id.IsEmpty() {
		return ""
	}
	return hex.EncodeToString(id[:])
}

func spanID(id pcommon.SpanID) string {
	if id.IsEmpty() {
		return ""
	}
	return hex.EncodeToString(id[:])
}

// asStrings is the exporter's attributesToMap.
func asStrings(m pcommon.Map) map[string]string {
	out := make(map[string]string, m.Len())
	for k, v := range m.All() {
		out[k] = v.AsString()
	}
	return out
}

// ts is a DateTime64(9) value, whatever the session's time zone.
func ts(t pcommon.Timestamp) string {
	return "fromUnixTimestamp64Nano(toInt64(" + strconv.FormatUint(uint64(t), 10) + "))"
}

func mapLiteral(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = quote(k) + ":" + quote(m[k])
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func array(vals []string) string { return "[" + strings.Join(vals, ",") + "]" }

func quoteNames(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = "`" + c + "`"
	}
	return strings.Join(q, ", ")
}

// quote renders a ClickHouse string literal.
func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\x00", `\0`)
	return "'" + r.Replace(s) + "'"
}
