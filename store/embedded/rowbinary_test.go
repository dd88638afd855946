package embedded

import (
	"math"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/store/chsql"
)

// TestQueryReadsEveryType reads the rows of nativeBlock back through Query
// (RowBinaryWithNamesAndTypes) into every destination type chsql.Rows
// lists, from the table types the store's tables use (LowCardinality
// among them), with the format's edge cases: NUL and invalid UTF-8,
// NULL, empty and nested empty arrays, extreme integers, infinities.
func TestQueryReadsEveryType(t *testing.T) {
	c := testConn(t)
	ctx := t.Context()
	require.NoError(t, c.Exec(ctx, "CREATE DATABASE IF NOT EXISTS rb", nil))
	require.NoError(t, c.Exec(ctx, nativeTable("rb.t", ""), nil))
	require.NoError(t, c.Insert(ctx, "rb.t", chsql.OneBlock(nativeBlock()), ""))

	rows, err := c.Query(ctx, "SELECT * FROM rb.t ORDER BY i8", nil)
	require.NoError(t, err)
	type row struct {
		s    string
		i8   int8
		u8   uint8
		u32  uint32
		u64  uint64
		f    float64
		nf   *float64
		as   []string
		au8  []uint8
		au64 []uint64
		af   []float64
		aas  [][]string
		aau8 [][]uint8
		i32  int64
		i64  int64
	}
	var got []row
	for rows.Next() {
		var r row
		r.nf = new(float64) // a NULL sets it to nil
		require.NoError(t, rows.Scan(&r.s, &r.i8, &r.u8, &r.u32, &r.u64, &r.f, &r.nf, &r.as, &r.au8, &r.au64, &r.af, &r.aas, &r.aau8, &r.i32, &r.i64))
		got = append(got, r)
	}
	require.NoError(t, rows.Err())
	two := 2.5
	require.Equal(t, []row{
		{s: "a\x00b\xff", i8: -128, u8: 255, u32: math.MaxUint32, u64: math.MaxUint64, f: math.Inf(-1), nf: nil,
			as: []string{"x", ""}, au8: []uint8{1, 2}, au64: []uint64{0, 1 << 63}, af: []float64{0.5},
			aas: [][]string{{"a"}, {}, {"b", "c"}}, aau8: [][]uint8{{}, {7}}, i32: math.MinInt32, i64: math.MinInt64},
		{s: "", i8: 7, u8: 0, u32: 0, u64: 0, f: 1e-300, nf: &two,
			as: []string{}, au8: []uint8{}, au64: []uint64{}, af: []float64{}, aas: [][]string{{}}, aau8: [][]uint8{}, i32: -1, i64: math.MaxInt64},
	}, got)
}

// TestQueryConvertsNumbers: aggregates return the engine's types (count()
// is UInt64, sum of Int8 is Int64, avg is Float64); a number scans into
// any numeric destination it fits, and one that does not fit is an error,
// not a wrapped value.
func TestQueryConvertsNumbers(t *testing.T) {
	c := testConn(t)
	scanOne := func(query string, dest any) error {
		t.Helper()
		rows, err := c.Query(t.Context(), query, nil)
		require.NoError(t, err)
		require.True(t, rows.Next(), "%s: %v", query, rows.Err())
		err = rows.Scan(dest)
		require.False(t, rows.Next())
		require.NoError(t, rows.Err())
		return err
	}
	for _, tc := range []struct {
		query string
		dest  any // a pointer to the zero value
		want  any
	}{
		{"SELECT count() FROM numbers(5)", new(int64), int64(5)},
		{"SELECT sum(toInt8(number)) FROM numbers(5)", new(uint64), uint64(10)},
		{"SELECT avg(number) FROM numbers(5)", new(float64), 2.0},
		{"SELECT toInt64(42)", new(uint64), uint64(42)},
		{"SELECT toUInt32(7)", new(float64), 7.0},
		{"SELECT toFloat32(0.5)", new(float64), 0.5},
		{"SELECT true", new(uint8), uint8(1)},
		{"SELECT toInt16(-3)", new(int8), int8(-3)},
		{"SELECT toFixedString('ab', 3)", new(string), "ab\x00"},
	} {
		require.NoError(t, scanOne(tc.query, tc.dest), tc.query)
		require.Equal(t, tc.want, reflect.ValueOf(tc.dest).Elem().Interface(), tc.query)
	}
	nf := new(float64)
	require.NoError(t, scanOne("SELECT CAST(NULL AS Nullable(UInt64))", &nf))
	require.Nil(t, nf)

	for _, tc := range []struct {
		query string
		dest  any
		err   string
	}{
		{"SELECT toInt64(-1)", new(uint64), "does not fit"},
		{"SELECT toUInt16(256)", new(uint8), "does not fit"},
		{"SELECT toInt16(-129)", new(int8), "does not fit"},
		{"SELECT 1.5", new(int64), "does not fit"},
		{"SELECT 'x'", new(int64), "cannot scan String into *int64"},
		{"SELECT 1", new(string), "cannot scan UInt8 into *string"},
	} {
		require.ErrorContains(t, scanOne(tc.query, tc.dest), tc.err, tc.query)
	}
}

// TestQueryRefusesUnknownTypes: a column of a type the reader does not
// know is an error naming it, not a misread row.
func TestQueryRefusesUnknownTypes(t *testing.T) {
	c := testConn(t)
	rows, err := c.Query(t.Context(), "SELECT 1 AS n, toDecimal32(1.5, 2) AS d", nil)
	require.NoError(t, err)
	require.False(t, rows.Next())
	require.ErrorContains(t, rows.Err(), `column d: unsupported column type "Decimal(9, 2)"`)
}

// TestBinaryTypeNames parses the type names the engine writes, nested.
func TestBinaryTypeNames(t *testing.T) {
	for name, want := range map[string]binaryKind{
		"LowCardinality(Nullable(String))":              kindNullable,
		"Array(Array(LowCardinality(String)))":          kindArray,
		"Tuple(a UInt64, b Array(Tuple(String, Int8)))": kindTuple,
		"DateTime('UTC')":                               kindUint,
		"DateTime64(9, 'UTC')":                          kindInt,
		"FixedString(16)":                               kindFixed,
	} {
		typ, err := parseBinaryType(name)
		require.NoError(t, err, name)
		require.Equal(t, want, typ.kind, name)
	}
	for _, name := range []string{"Map(String, UInt64)", "UUID", "Int128", "Int8(3)", "String(1)", "Nothing(x)", "Array(Decimal(9, 2))", "FixedString(x)", "Array(String"} {
		_, err := parseBinaryType(name)
		require.Error(t, err, name)
	}
}

// TestBinaryRowsOfNoBytes: bytes left after a header whose rows take none
// (no columns, or a column of Nothing) are an error, not rows for ever.
func TestBinaryRowsOfNoBytes(t *testing.T) {
	for _, data := range []string{"\x00nt8i", "\x01\x01n\x07Nothing\x00"} {
		r := newBinaryRows([]byte(data))
		require.False(t, r.Next(), "%q", data)
		require.ErrorContains(t, r.Err(), "bytes after the last row", "%q", data)
	}
}

// FuzzBinaryRows: whatever bytes a result holds, reading it ends in rows
// or an error, never a panic or an allocation beyond its size; the fuzzer
// starts from real results cut short and altered.
func FuzzBinaryRows(f *testing.F) {
	c := testConn(f)
	for _, q := range []string{nativeSelect, "SELECT 1 AS n, 'x' AS s, [[1, 2], []] AS a, CAST(NULL AS Nullable(Float64)) AS nf, (1, 'b') AS tup"} {
		out, err := rawQuery(c, []byte(q), "RowBinaryWithNamesAndTypes")
		require.NoError(f, err)
		f.Add(out)
		f.Add(out[:len(out)/2])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := newBinaryRows(data)
		for r.Next() {
			dest := make([]any, len(r.types))
			for i, typ := range r.types {
				dest[i] = fuzzDest(typ)
			}
			_ = r.Scan(dest...) // types may not match: an error, not a panic
		}
	})
}

// fuzzDest is a destination of the Go type the store reads a column of
// typ into, so fuzzing reaches the number and array conversions; a column
// the type does not suit is an error to Scan, which is fine.
func fuzzDest(typ *binaryType) any {
	switch typ.kind {
	case kindInt, kindUint, kindFloat:
		return new(float64)
	case kindNullable:
		return new(*float64)
	case kindArray:
		switch typ.elem.kind {
		case kindArray:
			return new([][]string)
		case kindString, kindFixed:
			return new([]string)
		}
		return new([]float64)
	}
	return new(string)
}

// BenchmarkBinaryRowsScan reads 1,000 rows shaped like the findings read's
// (ids, names, a path, a time, evidence arrays, a message), as the engine
// writes them.
func BenchmarkBinaryRowsScan(b *testing.B) {
	c := testConn(b)
	data, err := rawQuery(c, []byte(`SELECT hex(sipHash64(number)) AS id, toLowCardinality('timeout_inversion') AS kind,
		toLowCardinality('critical') AS severity, hex(sipHash128(number)) AS trace_id, hex(sipHash64(number + 1)) AS span_id,
		'pricing' AS service, 'POST /pricing/v1/items' AS operation, 'order' AS caller, 'pricing' AS callee,
		'gateway:POST /checkout > order:POST /order/v1/items > pricing:POST /pricing/v1/items' AS path,
		toUInt64(1764700000123456789 + number) AS detected_ns, ['budget_ms', 'timeout_ms', 'remaining_ms'] AS keys,
		[250, 1000, 180.5] AS values, 'pricing waits 1000 ms for a call its caller gives 250 ms' AS message
		FROM numbers(1000)`), "RowBinaryWithNamesAndTypes")
	require.NoError(b, err)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		r := newBinaryRows(data)
		n := 0
		for r.Next() {
			var id, kind, sev, trace, span, svc, op, caller, callee, path, msg string
			var ns uint64
			var keys []string
			var values []float64
			if err := r.Scan(&id, &kind, &sev, &trace, &span, &svc, &op, &caller, &callee, &path, &ns, &keys, &values, &msg); err != nil {
				b.Fatal(err)
			}
			n++
		}
		if r.Err() != nil || n != 1000 {
			b.Fatalf("read %d rows: %v", n, r.Err())
		}
	}
}
