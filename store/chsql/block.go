package chsql

import (
	"errors"
	"fmt"
	"strings"
)

// Type is the type of a Block column's values: the ClickHouse type both
// engines send. A column the DDL declares LowCardinality(String) is sent as
// String, which the server converts on insert (LowCardinality is a storage
// form of String, and the Native format encodes it differently).
type Type uint8

// The types budgetd's tables use.
const (
	TypeString Type = iota + 1
	TypeInt8
	TypeUInt8
	TypeUInt32
	TypeUInt64
	TypeInt32
	TypeInt64
	TypeFloat64
	TypeNullableFloat64
	TypeArrayString
	TypeArrayUInt8
	TypeArrayUInt64
	TypeArrayFloat64
	TypeArrayArrayString
	TypeArrayArrayUInt8
)

var typeNames = [...]string{
	TypeString:           "String",
	TypeInt8:             "Int8",
	TypeUInt8:            "UInt8",
	TypeUInt32:           "UInt32",
	TypeUInt64:           "UInt64",
	TypeInt32:            "Int32",
	TypeInt64:            "Int64",
	TypeFloat64:          "Float64",
	TypeNullableFloat64:  "Nullable(Float64)",
	TypeArrayString:      "Array(String)",
	TypeArrayUInt8:       "Array(UInt8)",
	TypeArrayUInt64:      "Array(UInt64)",
	TypeArrayFloat64:     "Array(Float64)",
	TypeArrayArrayString: "Array(Array(String))",
	TypeArrayArrayUInt8:  "Array(Array(UInt8))",
}

// Types returns every Type.
func Types() []Type {
	out := make([]Type, 0, len(typeNames)-1)
	for t := range typeNames[1:] {
		out = append(out, Type(t+1))
	}
	return out
}

// String returns the type's ClickHouse name, e.g. "Array(String)".
func (t Type) String() string {
	if int(t) < len(typeNames) && typeNames[t] != "" {
		return typeNames[t]
	}
	return fmt.Sprintf("Type(%d)", t)
}

// typeNamed returns the Type whose ClickHouse name is name.
func typeNamed(name string) (Type, bool) {
	for t, n := range typeNames {
		if n != "" && n == name {
			return Type(t), true
		}
	}
	return 0, false
}

// Depth is how many Array levels the type has: 0, 1 or 2.
func (t Type) Depth() int {
	switch t {
	case TypeArrayString, TypeArrayUInt8, TypeArrayUInt64, TypeArrayFloat64:
		return 1
	case TypeArrayArrayString, TypeArrayArrayUInt8:
		return 2
	}
	return 0
}

// Block is a batch of rows for one table, held a column at a time in the
// types of its columns: the shape both engines send (ClickHouse's own blocks
// are columnar), with no value boxed on the way. chsql builds Blocks from
// its table definitions (tables.go); an engine's Conn only reads them.
type Block struct {
	Columns []Column
	Rows    int
}

// Column is one column of a Block. Its values are in the one buffer of its
// type's element: Strings for String, Array(String) and
// Array(Array(String)), UInt8s for UInt8 and its arrays, and so on; every
// other buffer is empty. The layout is that of ClickHouse's Native format,
// so the embedded engine writes the buffers as they are.
type Column struct {
	Name string
	Type Type

	Strings  []string
	Int8s    []int8
	UInt8s   []uint8
	UInt32s  []uint32
	UInt64s  []uint64
	Int32s   []int32
	Int64s   []int64
	Float64s []float64

	// Nulls marks, per row of a Nullable column, a NULL with 1; the
	// value under a NULL is 0.
	Nulls []uint8
	// Offsets are, per row of an Array column, the end of its array: in
	// values for Array(T), in inner arrays for Array(Array(T)).
	Offsets []uint64
	// Inner are, per inner array of an Array(Array(T)) column, its end in
	// values.
	Inner []uint64
}

// ColumnList is b's column names for an INSERT: "a, b, c".
func (b *Block) ColumnList() string {
	names := make([]string, len(b.Columns))
	for i := range b.Columns {
		names[i] = b.Columns[i].Name
	}
	return strings.Join(names, ", ")
}

// AppendString appends a String value, or an element of the row's array.
func (c *Column) AppendString(v string) { c.Strings = append(c.Strings, v) }

// AppendInt8 appends an Int8 value.
func (c *Column) AppendInt8(v int8) { c.Int8s = append(c.Int8s, v) }

// AppendUInt8 appends a UInt8 value, or an element of the row's array.
func (c *Column) AppendUInt8(v uint8) { c.UInt8s = append(c.UInt8s, v) }

// AppendUInt32 appends a UInt32 value.
func (c *Column) AppendUInt32(v uint32) { c.UInt32s = append(c.UInt32s, v) }

// AppendUInt64 appends a UInt64 value, or an element of the row's array.
func (c *Column) AppendUInt64(v uint64) { c.UInt64s = append(c.UInt64s, v) }

// AppendInt32 appends an Int32 value.
func (c *Column) AppendInt32(v int32) { c.Int32s = append(c.Int32s, v) }

// AppendInt64 appends an Int64 value.
func (c *Column) AppendInt64(v int64) { c.Int64s = append(c.Int64s, v) }

// AppendFloat64 appends a Float64 value, or an element of the row's array.
func (c *Column) AppendFloat64(v float64) { c.Float64s = append(c.Float64s, v) }

// AppendNullableFloat64 appends a Nullable(Float64) value: NULL for nil.
func (c *Column) AppendNullableFloat64(v *float64) {
	if v == nil {
		c.Nulls = append(c.Nulls, 1)
		c.Float64s = append(c.Float64s, 0)
		return
	}
	c.Nulls = append(c.Nulls, 0)
	c.Float64s = append(c.Float64s, *v)
}

// EndInner closes an inner array of an Array(Array(T)) row: the values
// appended since the last inner array are its elements.
func (c *Column) EndInner() { c.Inner = append(c.Inner, uint64(c.values())) }

// EndArray closes the row of an Array column: the values (for
// Array(Array(T)), the inner arrays) appended since the last row are its
// elements.
func (c *Column) EndArray() {
	if c.Type.Depth() == 2 {
		c.Offsets = append(c.Offsets, uint64(len(c.Inner)))
		return
	}
	c.Offsets = append(c.Offsets, uint64(c.values()))
}

// values returns how many values the buffer of c's element type holds.
func (c *Column) values() int {
	switch c.Type {
	case TypeString, TypeArrayString, TypeArrayArrayString:
		return len(c.Strings)
	case TypeInt8:
		return len(c.Int8s)
	case TypeUInt8, TypeArrayUInt8, TypeArrayArrayUInt8:
		return len(c.UInt8s)
	case TypeUInt32:
		return len(c.UInt32s)
	case TypeUInt64, TypeArrayUInt64:
		return len(c.UInt64s)
	case TypeInt32:
		return len(c.Int32s)
	case TypeInt64:
		return len(c.Int64s)
	case TypeFloat64, TypeNullableFloat64, TypeArrayFloat64:
		return len(c.Float64s)
	}
	return 0
}

// check reports a column whose buffers do not hold exactly b.Rows rows of
// its type: a table definition appending into the wrong buffer, or
// forgetting to close an array, would otherwise send the engine a block it
// misreads.
func (b *Block) check() error {
	for i := range b.Columns {
		if err := b.Columns[i].check(b.Rows); err != nil {
			return fmt.Errorf("column %s %s: %w", b.Columns[i].Name, b.Columns[i].Type, err)
		}
	}
	return nil
}

func (c *Column) check(rows int) error {
	n := c.values()
	all := len(c.Strings) + len(c.Int8s) + len(c.UInt8s) + len(c.UInt32s) + len(c.UInt64s) + len(c.Int32s) + len(c.Int64s) + len(c.Float64s)
	switch {
	case int(c.Type) >= len(typeNames) || typeNames[c.Type] == "":
		return errors.New("unknown type")
	case all != n:
		return fmt.Errorf("%d values outside the buffer of its type", all-n)
	case c.Type == TypeNullableFloat64 && len(c.Nulls) != rows, c.Type != TypeNullableFloat64 && len(c.Nulls) > 0:
		return fmt.Errorf("%d NULL flags for %d rows", len(c.Nulls), rows)
	}
	// ends checks count cumulative end offsets, the last at total.
	ends := func(what string, offsets []uint64, count, total int) error {
		last := uint64(0)
		if len(offsets) > 0 {
			last = offsets[len(offsets)-1]
		}
		if len(offsets) != count || last != uint64(total) {
			return fmt.Errorf("%d %s offsets for %d, ending at %d of %d", len(offsets), what, count, last, total)
		}
		return nil
	}
	switch c.Type.Depth() {
	case 0:
		if n != rows || len(c.Offsets) > 0 || len(c.Inner) > 0 {
			return fmt.Errorf("%d values and %d array offsets for %d rows", n, len(c.Offsets)+len(c.Inner), rows)
		}
	case 1:
		if len(c.Inner) > 0 {
			return errors.New("inner array offsets in an Array(T) column")
		}
		return ends("row", c.Offsets, rows, n)
	case 2:
		if err := ends("row", c.Offsets, rows, len(c.Inner)); err != nil {
			return err
		}
		return ends("inner array", c.Inner, len(c.Inner), n)
	}
	return nil
}

// Reset empties b for the next batch, keeping its columns and their
// buffers. The strings are cleared, not only truncated: a block kept for
// the next insert must not keep the last batch's strings alive.
func (b *Block) Reset() {
	for i := range b.Columns {
		c := &b.Columns[i]
		clear(c.Strings)
		*c = Column{Name: c.Name, Type: c.Type, Strings: c.Strings[:0], Int8s: c.Int8s[:0], UInt8s: c.UInt8s[:0],
			UInt32s: c.UInt32s[:0], UInt64s: c.UInt64s[:0], Int32s: c.Int32s[:0], Int64s: c.Int64s[:0], Float64s: c.Float64s[:0],
			Nulls: c.Nulls[:0], Offsets: c.Offsets[:0], Inner: c.Inner[:0]}
	}
	b.Rows = 0
}

// capBytes is the memory b's buffers hold (a string counts its header: the
// bytes are the batch's own).
func (b *Block) capBytes() int {
	n := 0
	for i := range b.Columns {
		c := &b.Columns[i]
		n += 16*cap(c.Strings) + cap(c.Int8s) + cap(c.UInt8s) + 4*(cap(c.UInt32s)+cap(c.Int32s)) +
			8*(cap(c.UInt64s)+cap(c.Int64s)+cap(c.Float64s)+cap(c.Offsets)+cap(c.Inner)) + cap(c.Nulls)
	}
	return n
}
