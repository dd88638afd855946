package chsql

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/problems"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store/chschema"
)

// fill builds a block of rows through tb's column definitions and checks it
// holds exactly those rows: every column's put appends into the buffer of
// its declared type.
func fill[R any](t *testing.T, tb *table[R], rows ...R) *Block {
	t.Helper()
	blk, err := tb.newBlock()
	require.NoError(t, err)
	for _, r := range rows {
		tb.appendRow(blk, r)
	}
	require.NoError(t, blk.check(), tb.name)
	require.Equal(t, len(rows), blk.Rows)
	return blk
}

// TestTablesBuildValidBlocks fills every table with a row that uses every
// column (attributes, events with and without attributes, links, NULLs)
// and an empty one.
func TestTablesBuildValidBlocks(t *testing.T) {
	attrs := schema.Attributes{schema.Str("a", "1"), schema.Int("b", 2)}
	span := schema.Span{
		TraceID: schema.TraceID{1}, SpanID: schema.SpanID{2}, Service: "svc", Name: "op", StartNs: 5, EndNs: 9,
		ResourceAttrs: attrs, Attrs: attrs,
		Events: []schema.Event{{TimeNs: 6, Name: "e", Attrs: attrs}, {TimeNs: 7, Name: "bare"}},
		Links:  []schema.Link{{TraceID: schema.TraceID{3}, SpanID: schema.SpanID{4}, Attrs: attrs}},
	}
	blk := fill(t, &spansTable, &span, &schema.Span{})
	keys := blk.Columns[21] // event_attr_keys
	require.Equal(t, "event_attr_keys", keys.Name)
	require.Equal(t, []uint64{2, 2}, keys.Offsets, "two events in row 0, none in row 1")
	require.Equal(t, []uint64{2, 2}, keys.Inner, "the second event has no attributes")

	fill(t, &traceIndexTable, &traceIndexRow{traceID: "t", service: "s", startNs: 1, endNs: 2, spans: 3}, &traceIndexRow{})
	hop := schema.Hop{TraceID: schema.TraceID{1}, RemainingMs: schema.Ms(5), InferredTimeoutMs: schema.Ms(7), IsError: true}
	blk = fill(t, &hopsTable, &hop, &schema.Hop{})
	remaining := blk.Columns[16]
	require.Equal(t, "remaining_ms", remaining.Name)
	require.Equal(t, []uint8{0, 1}, remaining.Nulls)
	require.Equal(t, []float64{5, 0}, remaining.Float64s)

	f := schema.Finding{ID: "f", Kind: "k", DetectedAt: time.Unix(1, 0), Evidence: map[string]float64{"x": 1, "y": 2}}
	blk = fill(t, &findingsTable, findingRow{f: &f, keys: []string{"x", "y"}}, findingRow{f: &schema.Finding{}})
	require.Equal(t, []float64{1, 2}, blk.Columns[12].Float64s)
	fill(t, &reanalysedTable, reanalysedRow{trace: schema.TraceID{1}, analyzedNs: 1}, reanalysedRow{})
	stat := problems.Stat{Key: problems.Key{Kind: schema.KindOrphanedWork, CalleeService: "db"}, Interval: time.Unix(300, 0), Findings: 3, Requests: 2, Impact: 1.5}
	blk = fill(t, &problemStatsTable, &stat, &problems.Stat{Interval: time.Unix(0, 0)})
	require.Equal(t, []uint64{300e9, 0}, blk.Columns[7].UInt64s, "interval_ns")
	state := schema.EdgeState{Replica: "r", EvaluatedNs: 1, CallerService: "a", CalleeService: "b", State: []byte{0, 0xff}}
	blk = fill(t, &edgeStatesTable, &state, &schema.EdgeState{})
	require.Equal(t, []string{"AP8=", ""}, blk.Columns[6].Strings, "states are sent as base64")
	fill(t, &batchesTable, batchRow{token: "t", table: "spans", rows: 1, writtenNs: 2}, batchRow{})
	fill(t, &migrationsTable, migrationRow{version: 1, name: "0001_spans", appliedNs: 2}, migrationRow{})
	fill(t, &followPositionsTable, followPositionRow{source: "clickhouse://h:9000 otel.otel_traces", positionNs: 1, savedNs: 2}, followPositionRow{})

	require.Len(t, InsertTables(chschema.Features{}), 13, "InsertTables lists every table above")
}

// TestDeclaredTypes: a LowCardinality column is declared as such only on
// servers that have it, and is sent as its plain type everywhere.
func TestDeclaredTypes(t *testing.T) {
	current := traceIndexTable.declared(chschema.Features{LowCardinality: true})
	old := traceIndexTable.declared(chschema.Features{})
	require.Equal(t, ColumnType{Name: "service", Type: "LowCardinality(String)"}, current.Columns[1])
	require.Equal(t, ColumnType{Name: "service", Type: "String"}, old.Columns[1])
	require.Equal(t, "Array(String)", sentType("Array(LowCardinality(String))"))
	blk := fill(t, &traceIndexTable)
	require.Equal(t, TypeString, blk.Columns[1].Type)
}

// TestBlockCheck: a block whose buffers do not hold its rows is refused
// before it reaches an engine.
func TestBlockCheck(t *testing.T) {
	tests := []struct {
		name    string
		col     Column
		rows    int
		wantErr string
	}{
		{"valid scalar", Column{Type: TypeUInt64, UInt64s: []uint64{1, 2}}, 2, ""},
		{"valid array", Column{Type: TypeArrayString, Strings: []string{"a"}, Offsets: []uint64{0, 1}}, 2, ""},
		{"valid nested", Column{Type: TypeArrayArrayUInt8, UInt8s: []uint8{1}, Offsets: []uint64{2}, Inner: []uint64{0, 1}}, 1, ""},
		{"wrong buffer", Column{Type: TypeUInt64, Strings: []string{"a"}}, 1, "1 values outside the buffer of its type"},
		{"missing row", Column{Type: TypeString, Strings: []string{"a"}}, 2, "1 values and 0 array offsets for 2 rows"},
		{"unclosed array", Column{Type: TypeArrayString, Strings: []string{"a", "b"}, Offsets: []uint64{1}}, 1, "row offsets"},
		{"unclosed inner", Column{Type: TypeArrayArrayString, Strings: []string{"a"}, Offsets: []uint64{0}}, 1, "inner array offsets"},
		{"no NULL map", Column{Type: TypeNullableFloat64, Float64s: []float64{1}}, 1, "0 NULL flags for 1 rows"},
		{"NULL map on a plain column", Column{Type: TypeFloat64, Float64s: []float64{1}, Nulls: []uint8{0}}, 1, "1 NULL flags for 1 rows"},
		{"empty Nullable", Column{Type: TypeNullableFloat64}, 0, ""},
		{"unknown type", Column{Type: 99}, 0, "unknown type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.col.Name = "c"
			err := (&Block{Columns: []Column{tt.col}, Rows: tt.rows}).check()
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}
