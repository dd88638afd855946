package embedded

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// nativeRows are two rows of every value type Insert supports, with the
// edge cases of the format: NUL and invalid UTF-8 in strings, NULL, empty
// and nested empty arrays, extreme integers, non-finite floats.
var nativeColumns = []string{"s", "i8", "u8", "u32", "u64", "f", "nf", "as", "au8", "au64", "af", "aas", "aau8"}

func nativeRows() [][]any {
	two := 2.5
	return [][]any{
		{"a\x00b\xff", int8(-128), uint8(255), uint32(math.MaxUint32), uint64(math.MaxUint64), math.Inf(-1), (*float64)(nil),
			[]string{"x", ""}, []uint8{1, 2}, []uint64{0, 1 << 63}, []float64{0.5},
			[][]string{{"a"}, {}, {"b", "c"}}, [][]uint8{{}, {7}}},
		{"", int8(7), uint8(0), uint32(0), uint64(0), 1e-300, &two,
			[]string{}, []uint8{}, []uint64{}, []float64{},
			[][]string{{}}, [][]uint8{}},
	}
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
	if(number = 0, [[], [toUInt8(7)]], []) AS aau8
FROM numbers(2)`

// TestNativeBlockMatchesEngine checks the encoder byte for byte against the
// engine's own Native output for the same rows and types.
func TestNativeBlockMatchesEngine(t *testing.T) {
	c, err := Connect(t.TempDir())
	require.NoError(t, err)
	defer c.Close()
	want, err := c.c.queryBytes([]byte(nativeSelect), "Native")
	require.NoError(t, err)

	var blk nativeBlock
	blk.reset(nativeColumns)
	for _, r := range nativeRows() {
		require.NoError(t, blk.appendRow(r))
	}
	var got bytes.Buffer
	require.NoError(t, blk.writeTo(&got))
	require.Equal(t, want, got.Bytes())

	// A reused block starts empty.
	blk.reset(nativeColumns[:1])
	require.NoError(t, blk.appendRow([]any{"only"}))
	got.Reset()
	require.NoError(t, blk.writeTo(&got))
	one, err := c.c.queryBytes([]byte("SELECT 'only' AS s"), "Native")
	require.NoError(t, err)
	require.Equal(t, one, got.Bytes())
}

// TestNativeInsertRoundTrip inserts the rows through Insert and reads them
// back, with a deduplication token and into columns whose types differ
// from the block's (LowCardinality, Nullable) as the store's tables do.
func TestNativeInsertRoundTrip(t *testing.T) {
	c, err := Connect(t.TempDir())
	require.NoError(t, err)
	defer c.Close()
	ctx := t.Context()
	require.NoError(t, c.Exec(ctx, "CREATE DATABASE IF NOT EXISTS nat", nil))
	require.NoError(t, c.Exec(ctx, `CREATE TABLE nat.t (s LowCardinality(String), i8 Int8, u8 UInt8, u32 UInt32, u64 UInt64,
		f Float64, nf Nullable(Float64), as Array(LowCardinality(String)), au8 Array(UInt8), au64 Array(UInt64), af Array(Float64),
		aas Array(Array(String)), aau8 Array(Array(UInt8))) ENGINE = MergeTree ORDER BY tuple()
		SETTINGS non_replicated_deduplication_window = 100`, nil))
	rows := nativeRows()
	insert := func() error {
		return c.Insert(ctx, "nat.t", nativeColumns, "tok-1", len(rows), func(i int, dst []any) []any { return append(dst, rows[i]...) })
	}
	require.NoError(t, insert())
	require.NoError(t, insert(), "the same token again is accepted and dropped")
	out, err := c.c.queryBytes([]byte("SELECT * FROM nat.t ORDER BY i8"), "TabSeparated")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Len(t, lines, 2, "stored once")
	require.Equal(t, "a\\0b\xff\t-128\t255\t4294967295\t18446744073709551615\t-inf\t\\N\t['x','']\t[1,2]\t[0,9223372036854775808]\t[0.5]\t[['a'],[],['b','c']]\t[[],[7]]", lines[0])
	require.Equal(t, "\t7\t0\t0\t0\t1e-300\t2.5\t[]\t[]\t[]\t[]\t[[]]\t[]", lines[1])

	err = c.Insert(ctx, "nat.t", nativeColumns[:2], "", 2, func(i int, dst []any) []any {
		if i == 0 {
			return append(dst, "x", int8(1))
		}
		return append(dst, "y", uint8(1))
	})
	require.ErrorContains(t, err, "row 1: column i8: value of type uint8 in a Int8 column")
	err = c.Insert(ctx, "nat.t", nativeColumns[:1], "", 1, func(int, []any) []any { return []any{struct{}{}} })
	require.ErrorContains(t, err, "unsupported value type struct {}")
}
