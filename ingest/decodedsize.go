package ingest

import "google.golang.org/protobuf/encoding/protowire"

// Converting a request takes more memory than its protobuf: the copy of
// the request the spans' strings are cut from (or, behind the write-ahead
// log, the received request itself, held until it is committed:
// ConvertProtoReusing), a span struct per span, an
// attribute struct per attribute (40 bytes, where an empty attribute is 4
// bytes on the wire), and the text of every number. The in-flight budget
// charges what the converted request will take, estimated from the message
// before decoding it, so that ingest.max_in_flight_bytes bounds memory
// rather than wire bytes. The costs below are what ConvertProto allocated
// per item, rounded up, with room for the text of any value (a double's is
// up to 24 bytes) and for the race detector's extra allocations
// (TestDecodedSizeBoundsDecoding).
const (
	// decodedPerAttr is one attribute (KeyValue).
	decodedPerAttr = 64
	// decodedPerArrayValue is one element of an array or map value,
	// written as text into its attribute's value.
	decodedPerArrayValue = 16
	// decodedPerSpan is one span without its attributes, events and links.
	decodedPerSpan = 288
	// decodedPerEvent is one event or link without its attributes.
	decodedPerEvent = 80
	// decodedPerJSONByte is the cost of a byte of OTLP/JSON, which is not
	// scanned and is decoded by pdata, which allocates a struct per
	// attribute, value, span, event and link: its smallest attribute takes
	// about 20 bytes.
	decodedPerJSONByte = 6
)

// OTLP's field numbers (opentelemetry-proto trace/v1, common/v1) on the
// way from the export request down to every attribute and value.
const (
	fieldResourceSpans  = 1 // ExportTraceServiceRequest
	fieldResource       = 1 // ResourceSpans
	fieldScopeSpans     = 2 // ResourceSpans
	fieldScope          = 1 // ScopeSpans
	fieldSpans          = 2 // ScopeSpans
	fieldResourceAttrs  = 1 // Resource
	fieldScopeAttrs     = 3 // InstrumentationScope
	fieldSpanAttrs      = 9 // Span
	fieldSpanEvents     = 11
	fieldSpanLinks      = 13
	fieldEventAttrs     = 3 // Span.Event
	fieldLinkAttrs      = 4 // Span.Link
	fieldKeyValueValue  = 2 // KeyValue
	fieldAnyArray       = 5 // AnyValue.array_value
	fieldAnyKvlist      = 6 // AnyValue.kvlist_value
	fieldArrayValues    = 1 // ArrayValue
	fieldKeyValueValues = 1 // KeyValueList
)

// decodedSize estimates the memory ConvertProto takes to convert the
// OTLP/protobuf export request msg: its bytes and an eighth (the copy of
// the request, rounded up to Go's size classes) plus a fixed cost per
// attribute, value, span, event and link. It reads only
// tags and lengths. A malformed message is estimated as far as it can be
// read; decoding it fails anyway.
func decodedSize(msg []byte) int64 {
	return int64(len(msg)) + int64(len(msg))/8 + items(msg, requestLevel, 0)
}

// maxScanDepth bounds how deep the scan follows values nested in arrays
// and lists. Past it, every 2 bytes (the least a nested value takes on the
// wire) are charged as an attribute: an upper bound that needs no
// recursion.
const maxScanDepth = 32

// level says which message a byte range is, and so which of its fields
// lead further down.
type level int

const (
	requestLevel level = iota
	resourceSpansLevel
	resourceLevel
	scopeSpansLevel
	scopeLevel
	spanLevel
	eventLevel
	linkLevel
	keyValueLevel
	anyValueLevel
	arrayLevel
	kvlistLevel
)

// child is the level of field num of a message at level l, and whether
// that field is itself a counted item; ok is false for fields that hold
// nothing counted.
func child(l level, num protowire.Number) (next level, cost int64, ok bool) {
	switch l {
	case requestLevel:
		return resourceSpansLevel, 0, num == fieldResourceSpans
	case resourceSpansLevel:
		switch num {
		case fieldResource:
			return resourceLevel, 0, true
		case fieldScopeSpans:
			return scopeSpansLevel, 0, true
		}
	case resourceLevel:
		return keyValueLevel, decodedPerAttr, num == fieldResourceAttrs
	case scopeSpansLevel:
		switch num {
		case fieldScope:
			return scopeLevel, 0, true
		case fieldSpans:
			return spanLevel, decodedPerSpan, true
		}
	case scopeLevel:
		return keyValueLevel, decodedPerAttr, num == fieldScopeAttrs
	case spanLevel:
		switch num {
		case fieldSpanAttrs:
			return keyValueLevel, decodedPerAttr, true
		case fieldSpanEvents:
			return eventLevel, decodedPerEvent, true
		case fieldSpanLinks:
			return linkLevel, decodedPerEvent, true
		}
	case eventLevel:
		return keyValueLevel, decodedPerAttr, num == fieldEventAttrs
	case linkLevel:
		return keyValueLevel, decodedPerAttr, num == fieldLinkAttrs
	case keyValueLevel:
		return anyValueLevel, 0, num == fieldKeyValueValue
	case anyValueLevel:
		switch num {
		case fieldAnyArray:
			return arrayLevel, 0, true
		case fieldAnyKvlist:
			return kvlistLevel, 0, true
		}
	case arrayLevel:
		return anyValueLevel, decodedPerArrayValue, num == fieldArrayValues
	case kvlistLevel:
		return keyValueLevel, decodedPerArrayValue, num == fieldKeyValueValues
	}
	return 0, 0, false
}

// items sums the fixed costs of the items inside msg, a message at level l
// and depth messages down from the request. Every request is scanned
// before it is admitted, every field of it, so the common shapes (a tag of
// one byte, a varint of one byte, a fixed-size number, a length under 128)
// are read in line and the rest by protowire: the sum is the one reading
// every field with protowire gives (FuzzDecodedSize), in about half the
// time (docs/performance.md, step 45).
func items(msg []byte, l level, depth int) int64 {
	if depth > maxScanDepth {
		return int64(len(msg)) / 2 * decodedPerAttr
	}
	var sum int64
	for len(msg) > 0 {
		var num protowire.Number
		var typ protowire.Type
		if b := msg[0]; b >= 1<<3 && b < 0x80 { // one byte: field 1 to 15
			num, typ = protowire.Number(b>>3), protowire.Type(b&7)
			msg = msg[1:]
		} else {
			var n int
			if num, typ, n = protowire.ConsumeTag(msg); n < 0 {
				return sum
			}
			msg = msg[n:]
		}
		var n int
		switch typ {
		case protowire.BytesType:
			length := 0
			if len(msg) > 0 && msg[0] < 0x80 {
				length, n = int(msg[0]), 1
			} else {
				v, vn := protowire.ConsumeVarint(msg)
				if vn < 0 || v > uint64(len(msg)-vn) {
					return sum
				}
				length, n = int(v), vn
			}
			if length > len(msg)-n {
				return sum
			}
			body := msg[n : n+length]
			msg = msg[n+length:]
			if next, cost, ok := child(l, num); ok {
				sum += cost + items(body, next, depth+1)
			}
			continue
		case protowire.VarintType:
			if len(msg) > 0 && msg[0] < 0x80 {
				n = 1
			} else {
				n = protowire.ConsumeFieldValue(num, typ, msg)
			}
		case protowire.Fixed64Type:
			n = 8
		case protowire.Fixed32Type:
			n = 4
		default: // groups, and wire types that do not exist
			n = protowire.ConsumeFieldValue(num, typ, msg)
		}
		if n < 0 || n > len(msg) {
			return sum
		}
		msg = msg[n:]
	}
	return sum
}
