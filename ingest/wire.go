package ingest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// This file reads protobuf's wire format from a string, for ConvertProto.
// Each function is the one of pdata's decoder (pdata/internal/proto) it is
// named after, ported as it is, quirks included, so that a request decodes
// here exactly when it decodes there (FuzzConvertProto checks both ways).
// Reading from a string rather than a []byte is what lets the converted
// spans' strings be substrings of one copy of the request.

// wireType is a field's protobuf wire type.
type wireType int8

const (
	wireVarint     wireType = 0
	wireI64        wireType = 1
	wireLen        wireType = 2
	wireStartGroup wireType = 3
	wireEndGroup   wireType = 4
	wireI32        wireType = 5
)

// wireRecursionLimit is how deep values may nest in attributes, counted as
// pdata counts it: each key-value, value, array and list is a level.
const wireRecursionLimit = 100

var (
	errWireLength     = errors.New("proto: negative length found during unmarshaling")
	errWireOverflow   = errors.New("proto: integer overflow")
	errWireDepth      = errors.New("proto: exceeded max recursion depth")
	errWireEndOfGroup = errors.New("proto: unexpected end of group")
	errWireTraceID    = errors.New("invalid length for TraceID")
	errWireSpanID     = errors.New("invalid length for SpanID")
)

// wrongWireType is a known field sent with another wire type than its own.
func wrongWireType(field string, t wireType) error {
	return fmt.Errorf("proto: wrong wireType = %d for field %s", t, field)
}

// consumeVarint reads a varint at pos.
func consumeVarint(s string, pos int) (uint64, int, error) {
	var num uint64
	for shift := uint(0); ; shift += 7 {
		if shift >= 64 {
			return 0, 0, errWireOverflow
		}
		if pos >= len(s) {
			return 0, 0, io.ErrUnexpectedEOF
		}
		b := s[pos]
		pos++
		num |= uint64(b&0x7F) << shift
		if b < 0x80 {
			break
		}
	}
	return num, pos, nil
}

// consumeTag reads a field's tag at pos.
func consumeTag(s string, pos int) (int32, wireType, int, error) {
	tag, pos, err := consumeVarint(s, pos)
	if err != nil {
		return 0, 0, 0, err
	}
	num := int32(tag >> 3)
	if num <= 0 {
		return 0, 0, 0, fmt.Errorf("proto: illegal field=%d (tag=%d, pos=%d)", num, tag, pos)
	}
	return num, wireType(tag & 0x7), pos, nil
}

// consumeLen reads a length-delimited field's body at pos.
func consumeLen(s string, pos int) (string, int, error) {
	num, pos, err := consumeVarint(s, pos)
	if err != nil {
		return "", 0, err
	}
	length := int(num)
	if length < 0 {
		return "", 0, errWireLength
	}
	end := pos + length
	if end < 0 || end > len(s) {
		return "", 0, io.ErrUnexpectedEOF
	}
	return s[pos:end], end, nil
}

// consumeI64 reads a fixed 64-bit field at pos.
func consumeI64(s string, pos int) (uint64, int, error) {
	pos += 8
	if pos < 0 || pos > len(s) {
		return 0, 0, io.ErrUnexpectedEOF
	}
	var b [8]byte
	copy(b[:], s[pos-8:pos])
	return binary.LittleEndian.Uint64(b[:]), pos, nil
}

// consumeI32 reads a fixed 32-bit field at pos.
func consumeI32(s string, pos int) (uint32, int, error) {
	pos += 4
	if pos < 0 || pos > len(s) {
		return 0, 0, io.ErrUnexpectedEOF
	}
	var b [4]byte
	copy(b[:], s[pos-4:pos])
	return binary.LittleEndian.Uint32(b[:]), pos, nil
}

// consumeUnknown skips a field this decoder does not read. Like pdata's, it
// ends a group at the first field inside it that is not itself a group.
func consumeUnknown(s string, pos int, t wireType) (int, error) {
	var err error
	depth := 0
	for pos < len(s) {
		switch t {
		case wireVarint:
			_, pos, err = consumeVarint(s, pos)
			return pos, err
		case wireI64:
			_, pos, err = consumeI64(s, pos)
			return pos, err
		case wireLen:
			_, pos, err = consumeLen(s, pos)
			return pos, err
		case wireStartGroup:
			depth++
		case wireEndGroup:
			if depth == 0 {
				return 0, errWireEndOfGroup
			}
			depth--
		case wireI32:
			_, pos, err = consumeI32(s, pos)
			return pos, err
		default:
			return 0, fmt.Errorf("proto: illegal wireType %d", t)
		}
		if depth == 0 {
			return pos, nil
		}
		_, t, pos, err = consumeTag(s, pos)
		if err != nil {
			return 0, err
		}
	}
	return 0, io.ErrUnexpectedEOF
}

// fieldReader walks the fields of one message.
type fieldReader struct {
	s   string
	pos int
	num int32
	typ wireType
	err error
}

// next reads the next field's tag. It is false at the end of the message
// or at an error, which err then holds.
func (r *fieldReader) next() bool {
	if r.err != nil || r.pos >= len(r.s) {
		return false
	}
	r.num, r.typ, r.pos, r.err = consumeTag(r.s, r.pos)
	return r.err == nil
}

// is reports whether the current field was sent with wire type t, and
// otherwise fails the read naming field.
func (r *fieldReader) is(t wireType, field string) bool {
	if r.typ != t {
		r.err = wrongWireType(field, r.typ)
		return false
	}
	return true
}

// bytes reads the current field as length-delimited, named field for the
// error when it was sent as something else.
func (r *fieldReader) bytes(field string) (b string) {
	if r.is(wireLen, field) {
		b, r.pos, r.err = consumeLen(r.s, r.pos)
	}
	return b
}

// varint reads the current field as a varint.
func (r *fieldReader) varint(field string) (n uint64) {
	if r.is(wireVarint, field) {
		n, r.pos, r.err = consumeVarint(r.s, r.pos)
	}
	return n
}

// fixed64 reads the current field as a fixed 64-bit value.
func (r *fieldReader) fixed64(field string) (n uint64) {
	if r.is(wireI64, field) {
		n, r.pos, r.err = consumeI64(r.s, r.pos)
	}
	return n
}

// fixed32 reads the current field as a fixed 32-bit value.
func (r *fieldReader) fixed32(field string) (n uint32) {
	if r.is(wireI32, field) {
		n, r.pos, r.err = consumeI32(r.s, r.pos)
	}
	return n
}

// skip passes over the current field, one this decoder does not read.
func (r *fieldReader) skip() {
	r.pos, r.err = consumeUnknown(r.s, r.pos, r.typ)
}

// id reads the current field as a trace or span id of size bytes: absent
// (all zero) when empty, an error when of another length.
func (r *fieldReader) id(field string, size int, dst []byte) {
	b := r.bytes(field)
	if r.err != nil {
		return
	}
	switch len(b) {
	case 0:
		clear(dst)
	case size:
		copy(dst, b)
	default:
		if size == 16 {
			r.err = errWireTraceID
		} else {
			r.err = errWireSpanID
		}
	}
}
