package embedded

import (
	"encoding/binary"
	"io"
	"math"
	"sync"

	"github.com/budgetd/budgetd/store/chsql"
)

// nativeChunkBytes is how much of a block's encoding writeNative holds
// before it writes it out. A block of 20,000 spans is about 12 MB in
// Native; encoded whole, that buffer was the largest single share of the
// live heap under load, beside the block it copies (docs/performance.md,
// Round 2's step 34).
const nativeChunkBytes = 256 << 10

// chunkBuffers are writeNative's buffers: room for a chunk and the value
// that crosses it, which is most often a few bytes.
var chunkBuffers = sync.Pool{New: func() any {
	b := make([]byte, 0, nativeChunkBytes+4096)
	return &b
}}

// writeNative writes blk to w in ClickHouse's Native format, the engine's
// own columnar layout: the column and row counts, then for each column its
// name, its type and its data — fixed-width values as little-endian bytes,
// strings as a length and their bytes, arrays as cumulative end offsets
// (outermost first) followed by every element, a Nullable's NULL map
// before its values. A chsql.Block holds its columns in that layout
// already, so this is little more than copies; parsing the same rows from
// JSON cost four times the CPU of the insert itself (docs/performance.md).
// It writes out what it has encoded each time that reaches chunk bytes.
//
// A column's type is its chsql.Type: a column the table declares
// LowCardinality(String) arrives as String, which the engine converts.
func writeNative(w io.Writer, blk *chsql.Block, chunk int) error {
	buf := chunkBuffers.Get().(*[]byte)
	defer chunkBuffers.Put(buf)
	e := nativeEncoder{w: w, b: (*buf)[:0], chunk: chunk}
	defer func() { *buf = e.b[:0] }()
	e.b = binary.AppendUvarint(e.b, uint64(len(blk.Columns)))
	e.b = binary.AppendUvarint(e.b, uint64(blk.Rows))
	for i := range blk.Columns {
		c := &blk.Columns[i]
		e.string(c.Name)
		e.string(c.Type.String())
		e.bytes(c.Nulls)
		e.uint64s(c.Offsets)
		e.uint64s(c.Inner)
		// Only the buffer of the column's element type holds values.
		for _, s := range c.Strings {
			e.string(s)
		}
		for _, v := range c.Int8s {
			e.b = append(e.b, byte(v))
			e.spill()
		}
		e.bytes(c.UInt8s)
		for _, v := range c.UInt32s {
			e.b = binary.LittleEndian.AppendUint32(e.b, v)
			e.spill()
		}
		e.uint64s(c.UInt64s)
		for _, v := range c.Int32s {
			e.b = binary.LittleEndian.AppendUint32(e.b, uint32(v))
			e.spill()
		}
		for _, v := range c.Int64s {
			e.b = binary.LittleEndian.AppendUint64(e.b, uint64(v))
			e.spill()
		}
		for _, v := range c.Float64s {
			e.b = binary.LittleEndian.AppendUint64(e.b, math.Float64bits(v))
			e.spill()
		}
	}
	e.flush()
	return e.err
}

// nativeEncoder is writeNative's buffer and where it goes. After a failed
// write it keeps encoding into the buffer, discarded, and reports the
// first error at the end.
type nativeEncoder struct {
	w     io.Writer
	b     []byte
	chunk int
	err   error
}

// spill writes the buffer out once it holds chunk bytes.
func (e *nativeEncoder) spill() {
	if len(e.b) >= e.chunk {
		e.flush()
	}
}

func (e *nativeEncoder) flush() {
	if e.err == nil && len(e.b) > 0 {
		_, e.err = e.w.Write(e.b)
	}
	e.b = e.b[:0]
}

func (e *nativeEncoder) string(s string) {
	e.b = binary.AppendUvarint(e.b, uint64(len(s)))
	if len(s) > e.chunk {
		// Written as it is rather than grow the (pooled) buffer to
		// hold it.
		e.flush()
		if e.err == nil {
			_, e.err = io.WriteString(e.w, s)
		}
		return
	}
	e.b = append(e.b, s...)
	e.spill()
}

func (e *nativeEncoder) bytes(vs []byte) {
	for len(vs) > 0 {
		n := min(len(vs), max(e.chunk-len(e.b), 1))
		e.b = append(e.b, vs[:n]...)
		vs = vs[n:]
		e.spill()
	}
}

func (e *nativeEncoder) uint64s(vs []uint64) {
	for _, v := range vs {
		e.b = binary.LittleEndian.AppendUint64(e.b, v)
		e.spill()
	}
}
