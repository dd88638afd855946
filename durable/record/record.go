package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"unsafe"

	"github.com/budgetd/budgetd/schema"
)

// Package record is the format of a write-ahead log record: the compact
// binary form budgetd keeps spans in between
// acknowledging them and storing them (the write-ahead log). It is cheaper
// to write and read than OTLP protobuf because it stores the model as it is,
// already validated and converted.
//
// Format, version 2: a version byte, a uvarint span count, then per span
// its fields in declaration order — ids as fixed bytes, strings and
// attribute values as uvarint length + bytes, numbers as uvarints, and
// lists as a uvarint count followed by their elements — except the
// resource attributes: uvarint 0 when they are the previous span's (the
// spans of one OTLP resource share them), else their count + 1 and the
// attributes. Sharing them halves a record of realistic spans, whose
// resources carry as many attributes as the spans themselves.
//
// Version 1, written before, is the same without the resource sharing: the
// resource attributes as a plain list. DecodeSpans reads both, so a log
// written by an older budgetd drains after an upgrade.
const spanCodecVersion = 2

// ErrBadEncoding is returned by DecodeSpans for input it did not write.
var ErrBadEncoding = errors.New("bad span encoding")

// AppendSpans appends the encoding of spans to dst.
func AppendSpans(dst []byte, spans []schema.Span) []byte {
	dst = append(dst, spanCodecVersion)
	dst = binary.AppendUvarint(dst, uint64(len(spans)))
	var prevResource schema.Attributes
	for i := range spans {
		s := &spans[i]
		dst = append(dst, s.TraceID[:]...)
		dst = append(dst, s.SpanID[:]...)
		dst = append(dst, s.ParentSpanID[:]...)
		dst = appendString(dst, s.TraceState)
		dst = appendString(dst, s.Service)
		dst = appendString(dst, s.Name)
		dst = append(dst, byte(s.Kind), byte(s.StatusCode))
		dst = binary.AppendUvarint(dst, s.StartNs)
		dst = binary.AppendUvarint(dst, s.EndNs)
		dst = appendString(dst, s.StatusMessage)
		dst = appendString(dst, s.ScopeName)
		dst = appendString(dst, s.ScopeVersion)
		if i > 0 && sameSlice(s.ResourceAttrs, prevResource) {
			dst = append(dst, 0)
		} else {
			dst = binary.AppendUvarint(dst, uint64(len(s.ResourceAttrs))+1)
			dst = appendAttrList(dst, s.ResourceAttrs)
		}
		prevResource = s.ResourceAttrs
		dst = appendAttrs(dst, s.Attrs)
		dst = binary.AppendUvarint(dst, uint64(len(s.Events)))
		for _, e := range s.Events {
			dst = binary.AppendUvarint(dst, e.TimeNs)
			dst = appendString(dst, e.Name)
			dst = appendAttrs(dst, e.Attrs)
		}
		dst = binary.AppendUvarint(dst, uint64(len(s.Links)))
		for _, l := range s.Links {
			dst = append(dst, l.TraceID[:]...)
			dst = append(dst, l.SpanID[:]...)
			dst = appendString(dst, l.TraceState)
			dst = appendAttrs(dst, l.Attrs)
		}
	}
	return dst
}

// Size is the length of the record AppendSpans writes for spans, worked
// out without writing it: ingest charges a request's record to its
// in-flight memory before Commit encodes it.
func Size(spans []schema.Span) int {
	n := 1 + uvarintLen(uint64(len(spans)))
	var prevResource schema.Attributes
	for i := range spans {
		s := &spans[i]
		n += len(s.TraceID) + len(s.SpanID) + len(s.ParentSpanID) + 2
		n += stringLen(s.TraceState) + stringLen(s.Service) + stringLen(s.Name)
		n += uvarintLen(s.StartNs) + uvarintLen(s.EndNs)
		n += stringLen(s.StatusMessage) + stringLen(s.ScopeName) + stringLen(s.ScopeVersion)
		if i > 0 && sameSlice(s.ResourceAttrs, prevResource) {
			n++
		} else {
			n += uvarintLen(uint64(len(s.ResourceAttrs))+1) + attrListLen(s.ResourceAttrs)
		}
		prevResource = s.ResourceAttrs
		n += attrsLen(s.Attrs) + uvarintLen(uint64(len(s.Events)))
		for _, e := range s.Events {
			n += uvarintLen(e.TimeNs) + stringLen(e.Name) + attrsLen(e.Attrs)
		}
		n += uvarintLen(uint64(len(s.Links)))
		for _, l := range s.Links {
			n += len(l.TraceID) + len(l.SpanID) + stringLen(l.TraceState) + attrsLen(l.Attrs)
		}
	}
	return n
}

func uvarintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

func stringLen(s string) int { return uvarintLen(uint64(len(s))) + len(s) }

func attrsLen(as schema.Attributes) int { return uvarintLen(uint64(len(as))) + attrListLen(as) }

func attrListLen(as schema.Attributes) int {
	n := 0
	for _, a := range as {
		n += stringLen(a.Key) + 1 + stringLen(a.Value)
	}
	return n
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// sameSlice reports whether a and b are the same non-empty slice: the same
// backing array and length.
func sameSlice(a, b schema.Attributes) bool {
	return len(a) > 0 && len(a) == len(b) && &a[0] == &b[0]
}

func appendAttrs(dst []byte, as schema.Attributes) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(as)))
	return appendAttrList(dst, as)
}

// appendAttrList appends the attributes without their count.
func appendAttrList(dst []byte, as schema.Attributes) []byte {
	for _, a := range as {
		dst = appendString(dst, a.Key)
		dst = append(dst, byte(a.Type))
		dst = appendString(dst, a.Value)
	}
	return dst
}

// DecodeSpans decodes what AppendSpans wrote. Corrupt or foreign input is
// an error wrapping ErrBadEncoding, never a panic or a huge allocation:
// every count is checked against the bytes left before anything is made.
func DecodeSpans(data []byte) ([]schema.Span, error) {
	return AppendDecodedSpans(nil, data)
}

// AppendDecodedSpans decodes what AppendSpans wrote and appends the spans
// to dst, so a batch of records is decoded into one slice without copying
// each record's spans again. On error dst is returned as it was.
func AppendDecodedSpans(dst []schema.Span, data []byte) ([]schema.Span, error) {
	// schema.Strings are cut from one copy of the input instead of allocated one
	// by one; the spans of a record live and die together anyway.
	d := decoder{buf: data, all: string(data)}
	version := d.byte()
	if version != 1 && version != spanCodecVersion {
		return dst, fmt.Errorf("%w: version %d", ErrBadEncoding, version)
	}
	// A span takes at least 44 bytes (ids, kinds, counts), which bounds
	// the count a corrupt header can claim.
	n := d.count(44)
	start := len(dst)
	dst = slices.Grow(dst, n)[:start+n]
	spans := dst[start:]
	clear(spans)
	for i := range spans {
		s := &spans[i]
		d.fixed(s.TraceID[:])
		d.fixed(s.SpanID[:])
		d.fixed(s.ParentSpanID[:])
		s.TraceState = d.string()
		s.Service = d.string()
		s.Name = d.string()
		s.Kind, s.StatusCode = schema.SpanKind(d.byte()), schema.StatusCode(d.byte())
		s.StartNs = d.uvarint()
		s.EndNs = d.uvarint()
		s.StatusMessage = d.string()
		s.ScopeName = d.string()
		s.ScopeVersion = d.string()
		switch n := d.uvarint(); {
		case version == 1:
			s.ResourceAttrs = d.attrList(n)
		case n == 0 && i > 0:
			s.ResourceAttrs = spans[i-1].ResourceAttrs
		case n == 0:
			d.fail("first span's resource")
		default:
			s.ResourceAttrs = d.attrList(n - 1)
		}
		s.Attrs = d.attrs()
		if ne := d.count(3); ne > 0 {
			s.Events = make([]schema.Event, ne)
			for j := range s.Events {
				e := &s.Events[j]
				e.TimeNs = d.uvarint()
				e.Name = d.string()
				e.Attrs = d.attrs()
			}
		}
		if nl := d.count(26); nl > 0 {
			s.Links = make([]schema.Link, nl)
			for j := range s.Links {
				l := &s.Links[j]
				d.fixed(l.TraceID[:])
				d.fixed(l.SpanID[:])
				l.TraceState = d.string()
				l.Attrs = d.attrs()
			}
		}
		if d.err != nil {
			return dst[:start], d.err
		}
	}
	if d.err == nil && len(d.buf) > 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes", ErrBadEncoding, len(d.buf))
	}
	if d.err != nil {
		return dst[:start], d.err
	}
	return dst, nil
}

// HeldBytes is the memory spans decoded by AppendDecodedSpans hold besides
// the copy of their record that their strings are cut from: the span,
// attribute, event and link structures. An attribute takes 40 bytes there
// where an empty one takes 3 in the record, so a bound on decoded batches
// counts these rather than record bytes. A resource's attributes shared
// with the span before are counted once.
func HeldBytes(spans []schema.Span) int {
	const (
		span  = int(unsafe.Sizeof(schema.Span{}))
		attr  = int(unsafe.Sizeof(schema.Attr{}))
		event = int(unsafe.Sizeof(schema.Event{}))
		link  = int(unsafe.Sizeof(schema.Link{}))
	)
	n := span * len(spans)
	for i := range spans {
		s := &spans[i]
		if i == 0 || !sameSlice(s.ResourceAttrs, spans[i-1].ResourceAttrs) {
			n += attr * len(s.ResourceAttrs)
		}
		n += attr*len(s.Attrs) + event*len(s.Events) + link*len(s.Links)
		for j := range s.Events {
			n += attr * len(s.Events[j].Attrs)
		}
		for j := range s.Links {
			n += attr * len(s.Links[j].Attrs)
		}
	}
	return n
}

// decoder reads the codec; the first error sticks and later reads return
// zero values, so DecodeSpans checks once per span.
type decoder struct {
	buf []byte
	all string // string(original input); len(all)-len(buf) is the read offset
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated %s", ErrBadEncoding, what)
	}
	d.buf = nil
}

func (d *decoder) byte() byte {
	if len(d.buf) < 1 {
		d.fail("byte")
		return 0
	}
	b := d.buf[0]
	d.buf = d.buf[1:]
	return b
}

func (d *decoder) fixed(dst []byte) {
	if len(d.buf) < len(dst) {
		d.fail("id")
		return
	}
	copy(dst, d.buf)
	d.buf = d.buf[len(dst):]
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.buf)
	if n <= 0 {
		d.fail("number")
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

// count reads a list length whose elements take at least minSize bytes each.
func (d *decoder) count(minSize int) int {
	n := d.uvarint()
	if n > uint64(len(d.buf)/minSize) {
		d.fail("list")
		return 0
	}
	return int(n)
}

func (d *decoder) string() string {
	n := d.uvarint()
	if n > uint64(len(d.buf)) {
		d.fail("string")
		return ""
	}
	off := len(d.all) - len(d.buf)
	d.buf = d.buf[n:]
	return d.all[off : off+int(n)]
}

func (d *decoder) attrs() schema.Attributes {
	return d.attrList(d.uvarint())
}

// attrList reads n attributes, each of at least 3 bytes, which bounds
// the n a corrupt record can claim.
func (d *decoder) attrList(count uint64) schema.Attributes {
	if count > uint64(len(d.buf)/3) {
		d.fail("list")
		return nil
	}
	n := int(count)
	if n == 0 {
		return nil
	}
	as := make(schema.Attributes, n)
	for i := range as {
		as[i].Key = d.string()
		as[i].Type = schema.AttrType(d.byte())
		as[i].Value = d.string()
	}
	return as
}
