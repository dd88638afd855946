package embedded

import (
	"bytes"
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/store/chsql"
)

// nativeBlock is a block of one column of every chsql.Type, holding
// nativeRows.
func nativeBlock() *chsql.Block {
	blk := &chsql.Block{Columns: []chsql.Column{
		{Name: "s", Type: chsql.TypeString}, {Name: "i8", Type: chsql.TypeInt8}, {Name: "u8", Type: chsql.TypeUInt8},
		{Name: "u32", Type: chsql.TypeUInt32}, {Name: "u64", Type: chsql.TypeUInt64}, {Name: "f", Type: chsql.TypeFloat64},
		{Name: "nf", Type: chsql.TypeNullableFloat64}, {Name: "as", Type: chsql.TypeArrayString},
		{Name: "au8", Type: chsql.TypeArrayUInt8}, {Name: "au64", Type: chsql.TypeArrayUInt64},
		{Name: "af", Type: chsql.TypeArrayFloat64}, {Name: "aas", Type: chsql.TypeArrayArrayString},
		{Name: "aau8", Type: chsql.TypeArrayArrayUInt8}, {Name: "i32", Type: chsql.TypeInt32}, {Name: "i64", Type: chsql.TypeInt64},
	}}
	nativeRows(blk)
	return blk
}

// nativeRows appends two rows to a nativeBlock, with the edge cases of the
// format: NUL and invalid UTF-8 in strings, NULL, empty and nested empty
// arrays, extreme integers, non-finite floats.
func nativeRows(blk *chsql.Block) {
	two := 2.5
	c := blk.Columns
	// Row 0.
	c[0].AppendString("a\x00b\xff")
	c[1].AppendInt8(-128)
	c[2].AppendUInt8(255)
	c[3].AppendUInt32(math.MaxUint32)
	c[4].AppendUInt64(math.MaxUint64)
	c[5].AppendFloat64(math.Inf(-1))
	c[6].AppendNullableFloat64(nil)
	c[7].AppendString("x")
	c[7].AppendString("")
	c[7].EndArray()
	c[8].AppendUInt8(1)
	c[8].AppendUInt8(2)
	c[8].EndArray()
	c[9].AppendUInt64(0)
	c[9].AppendUInt64(1 << 63)
	c[9].EndArray()
	c[10].AppendFloat64(0.5)
	c[10].EndArray()
	c[11].AppendString("a")
	c[11].EndInner()
	c[11].EndInner()
	c[11].AppendString("b")
	c[11].AppendString("c")
	c[11].EndInner()
	c[11].EndArray()
	c[12].EndInner()
	c[12].AppendUInt8(7)
	c[12].EndInner()
	c[12].EndArray()
	c[13].AppendInt32(math.MinInt32)
	c[14].AppendInt64(math.MinInt64)
	// Row 1: zeros, a tiny float, a value under the Nullable, empty arrays
	// and an array holding one empty array.
	c[0].AppendString("")
	c[1].AppendInt8(7)
	c[2].AppendUInt8(0)
	c[3].AppendUInt32(0)
	c[4].AppendUInt64(0)
	c[5].AppendFloat64(1e-300)
	c[6].AppendNullableFloat64(&two)
	for _, i := range []int{7, 8, 9, 10, 12} {
		c[i].EndArray()
	}
	c[11].EndInner()
	c[11].EndArray()
	c[13].AppendInt32(-1)
	c[14].AppendInt64(math.MaxInt64)
	blk.Rows += 2
}

// nativeSelect produces the same two rows from the engine itself.
const nativeSelect = `SELECT
	if(number = 0, 'a\0b\xFF', '') AS s,
	toInt8(if(number = 0, -128, 7)) AS i8,
	toUInt8(if(number = 0, 255, 0)) AS u8,
	toUInt32(if(number = 0, 4294967295, 0)) AS u32,
	if(number = 0, toUInt64('18446744073709551615'), toUInt64(0)) AS u64,
	if(number = 0, -inf, 1e-300) AS f,
	if(number = 0, NULL, number * 2.5) AS nf, -- 0 under the NULL, as the encoder writes
	if(number = 0, ['x', ''], []) AS as,
	if(number = 0, [toUInt8(1), 2], []) AS au8,
	if(number = 0, [toUInt64(0), toUInt64('9223372036854775808')], []) AS au64,
	if(number = 0, [0.5], []) AS af,
	if(number = 0, [['a'], [], ['b', 'c']], [[]]) AS aas,
	if(number = 0, [[], [toUInt8(7)]], []) AS aau8,
	toInt32(if(number = 0, -2147483648, -1)) AS i32,
	if(number = 0, toInt64('-9223372036854775808'), toInt64('9223372036854775807')) AS i64
FROM numbers(2)`

// nativeTable is the statement making a table for nativeBlock's rows, its
// columns of the types the store's tables give them (LowCardinality among
// them), with settings appended.
func nativeTable(name, settings string) string {
	return "CREATE TABLE " + name + ` (s LowCardinality(String), i8 Int8, u8 UInt8, u32 UInt32, u64 UInt64,
		f Float64, nf Nullable(Float64), as Array(LowCardinality(String)), au8 Array(UInt8), au64 Array(UInt64), af Array(Float64),
		aas Array(Array(String)), aau8 Array(Array(UInt8)), i32 Int32, i64 Int64) ENGINE = MergeTree ORDER BY tuple()` + settings
}

// testConn connects to the engine in a directory of the test's own, and
// closes the connection when the test ends.
func testConn(tb testing.TB) *Conn {
	tb.Helper()
	c, err := Connect(tb.TempDir())
	require.NoError(tb, err)
	tb.Cleanup(func() { c.Close() })
	return c
}

// rawQuery runs q on one of c's reads connections and returns the
// engine's output in format as it is.
func rawQuery(c *Conn, q []byte, format string) ([]byte, error) {
	return c.run(context.Background(), string(q), format, nil)
}

// TestNativeBlockMatchesEngine checks the encoder byte for byte against the
// engine's own Native output for the same rows and types.
func TestNativeBlockMatchesEngine(t *testing.T) {
	c := testConn(t)
	want, err := rawQuery(c, []byte(nativeSelect), "Native")
	require.NoError(t, err)
	blk := nativeBlock()
	var types []chsql.Type
	for _, c := range blk.Columns {
		types = append(types, c.Type)
	}
	require.ElementsMatch(t, chsql.Types(), types, "the block has a column of every type")
	// Written whole, and in chunks of every size that splits a value.
	for _, chunk := range []int{nativeChunkBytes, 1, 7, 64} {
		var buf bytes.Buffer
		require.NoError(t, writeNative(&buf, blk, chunk))
		require.Equal(t, want, buf.Bytes(), "chunks of %d bytes", chunk)
	}

	// A reset block encodes from empty.
	blk.Reset()
	nativeRows(blk)
	var buf bytes.Buffer
	require.NoError(t, writeNative(&buf, blk, nativeChunkBytes))
	require.Equal(t, want, buf.Bytes())
}

// TestNativeWriteError reports the first failed write, and writes nothing
// after it.
func TestNativeWriteError(t *testing.T) {
	w := &failingWriter{after: 2}
	err := writeNative(w, nativeBlock(), 16)
	require.ErrorIs(t, err, errWriteFailed)
	require.Equal(t, 3, w.calls, "two writes and the one that failed")
}

var errWriteFailed = errors.New("write failed")

// failingWriter accepts after writes, then fails every one.
type failingWriter struct{ after, calls int }

func (w *failingWriter) Write(p []byte) (int, error) {
	w.calls++
	if w.calls > w.after {
		return 0, errWriteFailed
	}
	return len(p), nil
}

// TestNativeInsertRoundTrip inserts the rows through Insert and reads them
// back, with a deduplication token and into columns whose types differ
// from the block's (LowCardinality) as the store's tables do.
func TestNativeInsertRoundTrip(t *testing.T) {
	c := testConn(t)
	ctx := t.Context()
	require.NoError(t, c.Exec(ctx, "CREATE DATABASE IF NOT EXISTS nat", nil))
	require.NoError(t, c.Exec(ctx, nativeTable("nat.t", " SETTINGS non_replicated_deduplication_window = 100"), nil))
	insert := func() error { return c.Insert(ctx, "nat.t", chsql.OneBlock(nativeBlock()), "tok-1") }
	require.NoError(t, insert())
	require.NoError(t, insert(), "the same token again is accepted and dropped")
	out, err := rawQuery(c, []byte("SELECT * FROM nat.t ORDER BY i8"), "TabSeparated")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Len(t, lines, 2, "stored once")
	require.Equal(t, "a\\0b\xff\t-128\t255\t4294967295\t18446744073709551615\t-inf\t\\N\t['x','']\t[1,2]\t[0,9223372036854775808]\t[0.5]\t[['a'],[],['b','c']]\t[[],[7]]\t-2147483648\t-9223372036854775808", lines[0])
	require.Equal(t, "\t7\t0\t0\t0\t1e-300\t2.5\t[]\t[]\t[]\t[]\t[[]]\t[]\t-1\t9223372036854775807", lines[1])
}
