package embedded

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// nativeBlock builds one block of ClickHouse's Native format, the engine's
// own columnar layout: a column at a time, fixed-width values as
// little-endian bytes, strings as a length and their bytes, arrays as
// cumulative end offsets followed by every element. The engine reads it
// with little more than copies; parsing the same rows from JSON cost four
// times the CPU of the insert itself (docs/performance.md).
//
// A column's type is that of its first value's Go type; every later value
// must have the same Go type. The engine converts a column to the table's
// type where they differ (String into LowCardinality(String)).
type nativeBlock struct {
	cols []nativeColumn
	rows int
}

// nativeColumn is one column being built.
type nativeColumn struct {
	name  string
	kind  nativeKind
	outer []byte // Array: end offset of each row (UInt64); Array(Array): in inner arrays
	inner []byte // Array(Array): end offset of each inner array, in elements
	nulls []byte // Nullable: 1 for NULL, per row
	data  []byte // values, or every array element in order
	// Running totals behind the offsets.
	outerEnd, innerEnd uint64
}

type nativeKind uint8

const (
	kindUnset nativeKind = iota
	kindString
	kindInt8
	kindUInt8
	kindUInt32
	kindUInt64
	kindFloat64
	kindNullableFloat64
	kindArrayString
	kindArrayUInt8
	kindArrayUInt64
	kindArrayFloat64
	kindArrayArrayString
	kindArrayArrayUInt8
)

var nativeTypeNames = [...]string{
	kindString:           "String",
	kindInt8:             "Int8",
	kindUInt8:            "UInt8",
	kindUInt32:           "UInt32",
	kindUInt64:           "UInt64",
	kindFloat64:          "Float64",
	kindNullableFloat64:  "Nullable(Float64)",
	kindArrayString:      "Array(String)",
	kindArrayUInt8:       "Array(UInt8)",
	kindArrayUInt64:      "Array(UInt64)",
	kindArrayFloat64:     "Array(Float64)",
	kindArrayArrayString: "Array(Array(String))",
	kindArrayArrayUInt8:  "Array(Array(UInt8))",
}

// reset prepares b for a block of these columns, keeping its buffers.
func (b *nativeBlock) reset(columns []string) {
	if cap(b.cols) < len(columns) {
		b.cols = make([]nativeColumn, len(columns))
	}
	b.cols = b.cols[:len(columns)]
	for i := range b.cols {
		c := &b.cols[i]
		*c = nativeColumn{name: columns[i], outer: c.outer[:0], inner: c.inner[:0], nulls: c.nulls[:0], data: c.data[:0]}
	}
	b.rows = 0
}

// appendRow adds one row: one value per column, in column order.
func (b *nativeBlock) appendRow(vals []any) error {
	if len(vals) != len(b.cols) {
		return fmt.Errorf("%d values for %d columns", len(vals), len(b.cols))
	}
	for i, v := range vals {
		if err := b.cols[i].append(v); err != nil {
			return fmt.Errorf("column %s: %w", b.cols[i].name, err)
		}
	}
	b.rows++
	return nil
}

func (c *nativeColumn) append(v any) error {
	k := kindOf(v)
	switch {
	case k == kindUnset:
		return fmt.Errorf("unsupported value type %T", v)
	case c.kind == kindUnset:
		c.kind = k
	case k != c.kind:
		return fmt.Errorf("value of type %T in a %s column", v, nativeTypeNames[c.kind])
	}
	switch v := v.(type) {
	case string:
		c.data = appendNativeString(c.data, v)
	case int8:
		c.data = append(c.data, byte(v))
	case uint8:
		c.data = append(c.data, v)
	case uint32:
		c.data = binary.LittleEndian.AppendUint32(c.data, v)
	case uint64:
		c.data = binary.LittleEndian.AppendUint64(c.data, v)
	case float64:
		c.data = binary.LittleEndian.AppendUint64(c.data, math.Float64bits(v))
	case *float64:
		f := 0.0
		if v == nil {
			c.nulls = append(c.nulls, 1)
		} else {
			c.nulls, f = append(c.nulls, 0), *v
		}
		c.data = binary.LittleEndian.AppendUint64(c.data, math.Float64bits(f))
	case []string:
		for _, s := range v {
			c.data = appendNativeString(c.data, s)
		}
		c.endRow(len(v))
	case []uint8:
		c.data = append(c.data, v...)
		c.endRow(len(v))
	case []uint64:
		for _, x := range v {
			c.data = binary.LittleEndian.AppendUint64(c.data, x)
		}
		c.endRow(len(v))
	case []float64:
		for _, x := range v {
			c.data = binary.LittleEndian.AppendUint64(c.data, math.Float64bits(x))
		}
		c.endRow(len(v))
	case [][]string:
		for _, a := range v {
			for _, s := range a {
				c.data = appendNativeString(c.data, s)
			}
			c.endInner(len(a))
		}
		c.endRow(len(v))
	case [][]uint8:
		for _, a := range v {
			c.data = append(c.data, a...)
			c.endInner(len(a))
		}
		c.endRow(len(v))
	}
	return nil
}

func kindOf(v any) nativeKind {
	switch v.(type) {
	case string:
		return kindString
	case int8:
		return kindInt8
	case uint8:
		return kindUInt8
	case uint32:
		return kindUInt32
	case uint64:
		return kindUInt64
	case float64:
		return kindFloat64
	case *float64:
		return kindNullableFloat64
	case []string:
		return kindArrayString
	case []uint8:
		return kindArrayUInt8
	case []uint64:
		return kindArrayUInt64
	case []float64:
		return kindArrayFloat64
	case [][]string:
		return kindArrayArrayString
	case [][]uint8:
		return kindArrayArrayUInt8
	}
	return kindUnset
}

// endRow closes a row's array of n items.
func (c *nativeColumn) endRow(n int) {
	c.outerEnd += uint64(n)
	c.outer = binary.LittleEndian.AppendUint64(c.outer, c.outerEnd)
}

// endInner closes an inner array of n elements.
func (c *nativeColumn) endInner(n int) {
	c.innerEnd += uint64(n)
	c.inner = binary.LittleEndian.AppendUint64(c.inner, c.innerEnd)
}

func appendNativeString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// writeTo writes the block: the column and row counts, then each column's
// name, type and data. A column with no rows has no type; it is written as
// String, which an empty column of any type accepts.
func (b *nativeBlock) writeTo(w io.Writer) error {
	head := binary.AppendUvarint(nil, uint64(len(b.cols)))
	head = binary.AppendUvarint(head, uint64(b.rows))
	if _, err := w.Write(head); err != nil {
		return err
	}
	for i := range b.cols {
		c := &b.cols[i]
		typ := "String"
		if c.kind != kindUnset {
			typ = nativeTypeNames[c.kind]
		}
		head = appendNativeString(appendNativeString(head[:0], c.name), typ)
		for _, part := range [][]byte{head, c.nulls, c.outer, c.inner, c.data} {
			if len(part) == 0 {
				continue
			}
			if _, err := w.Write(part); err != nil {
				return err
			}
		}
	}
	return nil
}
