package embedded

import (
	"encoding/binary"
	"math"

	"github.com/budgetd/budgetd/store/chsql"
)

// appendNative appends blk to b in ClickHouse's Native format, the engine's
// own columnar layout, and returns b: the column and row counts, then for
// each column its name, its type and its data — fixed-width values as
// little-endian bytes, strings as a length and their bytes, arrays as
// cumulative end offsets (outermost first) followed by every element, a
// Nullable's NULL map before its values. A chsql.Block holds its columns in
// that layout already, so this is little more than copies; parsing the same
// rows from JSON cost four times the CPU of the insert itself
// (docs/performance.md).
//
// A column's type is its chsql.Type: a column the table declares
// LowCardinality(String) arrives as String, which the engine converts.
func appendNative(b []byte, blk *chsql.Block) []byte {
	b = binary.AppendUvarint(b, uint64(len(blk.Columns)))
	b = binary.AppendUvarint(b, uint64(blk.Rows))
	for i := range blk.Columns {
		c := &blk.Columns[i]
		b = appendNativeString(b, c.Name)
		b = appendNativeString(b, c.Type.String())
		b = append(b, c.Nulls...)
		b = appendUint64s(b, c.Offsets)
		b = appendUint64s(b, c.Inner)
		// Only the buffer of the column's element type holds values.
		for _, s := range c.Strings {
			b = appendNativeString(b, s)
		}
		for _, v := range c.Int8s {
			b = append(b, byte(v))
		}
		b = append(b, c.UInt8s...)
		for _, v := range c.UInt32s {
			b = binary.LittleEndian.AppendUint32(b, v)
		}
		b = appendUint64s(b, c.UInt64s)
		for _, v := range c.Float64s {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
	}
	return b
}

func appendUint64s(b []byte, vs []uint64) []byte {
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	return b
}

func appendNativeString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}
