package analyze

import (
	"encoding/binary"
	"slices"
	"unsafe"

	"github.com/budgetd/budgetd/analyze/budgetread"
	"github.com/budgetd/budgetd/schema"
)

// heldSpan is a span as assembly holds it: what Compact keeps of it,
// without the trace id its trace is filed under. The numbers are fields;
// the strings (service, name, status evidence), the kept attributes and
// the budget.cancelled events are packed into its trace's packed bytes, at
// [at, at+n). Assembly holds every span of the idle period, at high rates
// hundreds of thousands of them: a schema.Span with its attribute slice
// took 453 bytes of heap a span, a packed one about a third
// (BenchmarkHeldSpans). A heldSpan has no pointer, so the collector need
// not scan a trace's spans nor mark a string for each: one packed buffer a
// trace (docs/performance.md, round 2 step 47).
//
// The packed bytes of a span are a sequence of:
//
//	service, name, status evidence   each uvarint length + bytes
//	attribute count                  uvarint
//	  key, type                      a byte each: the key's place in heldKeys, the schema.AttrType
//	  value                          uvarint length + bytes
//	cancellation event count         uvarint
//	  time                           8 bytes, little endian
//	  source                         a byte, 1 when the event has budget.cancel.source,
//	                                 then its uvarint length + bytes
type heldSpan struct {
	spanID, parentSpanID schema.SpanID
	startNs, endNs       uint64
	// at and n place the span's packed bytes in its trace's
	// (AssemblerConfig.Validate keeps a trace's bytes under 4 GiB).
	at, n uint32
	// attrs is how many attributes the packed bytes hold, so that a
	// trace's spans can be unpacked into one attribute slice without
	// reading them twice.
	attrs      uint32
	kind       schema.SpanKind
	statusCode schema.StatusCode
}

// heldKeys are the attribute names Compact keeps: the budget attributes
// (budgetread.AttrNames), then the ones that name a callee (peerAttrs). A
// held attribute stores its name's place here.
var heldKeys = append(budgetread.AttrNames(), peerAttrs[:]...)

// heldKeyIndex returns key's place in heldKeys, when Compact keeps it.
func heldKeyIndex(key string) (int, bool) {
	if i, ok := budgetread.AttrIndex(key); ok {
		return i, true
	}
	for i, k := range peerAttrs {
		if k == key {
			return len(heldKeys) - len(peerAttrs) + i, true
		}
	}
	return 0, false
}

// pack appends what Compact keeps of s (s itself need not be compacted),
// packed, to buf and returns it, in one pass over the attributes. The
// heldSpan it returns has no place yet (at, n): the caller places the
// bytes in its trace's.
func pack(s *schema.Span, buf []byte) (heldSpan, []byte) {
	b := appendStr(buf, s.Service)
	b = appendStr(b, s.Name)
	b = appendStr(b, budgetread.StatusEvidence(s))
	// The attribute count goes first; it is patched once known (a span
	// keeps far fewer than 128 attributes: one byte, unless it is a
	// hostile one, which takes the slow way).
	countAt, attrs := len(b), 0
	b = append(b, 0)
	for i := range s.Attrs {
		if k, ok := heldKeyIndex(s.Attrs[i].Key); ok {
			b = append(b, byte(k), byte(s.Attrs[i].Type))
			b = appendStr(b, s.Attrs[i].Value)
			attrs++
		}
	}
	if attrs < 0x80 {
		b[countAt] = byte(attrs)
	} else {
		b = slices.Insert(b, countAt+1, make([]byte, uvarintLen(attrs)-1)...)
		binary.AppendUvarint(b[:countAt], uint64(attrs))
	}
	events := 0
	for i := range s.Events {
		if s.Events[i].Name == schema.EventCancelled {
			events++
		}
	}
	b = binary.AppendUvarint(b, uint64(events))
	for i := range s.Events {
		e := &s.Events[i]
		if e.Name != schema.EventCancelled {
			continue
		}
		b = binary.LittleEndian.AppendUint64(b, e.TimeNs)
		if a, ok := e.Attrs.Get(schema.AttrCancelSource); ok {
			b = appendStr(append(b, 1), a.Value)
		} else {
			b = append(b, 0)
		}
	}
	return heldSpan{
		spanID: s.SpanID, parentSpanID: s.ParentSpanID,
		startNs: s.StartNs, endNs: s.EndNs,
		attrs: uint32(attrs),
		kind:  s.Kind, statusCode: s.StatusCode,
	}, b
}

// heldSpanBytes is a heldSpan's struct; a held span takes that and its
// packed bytes.
const heldSpanBytes = int64(unsafe.Sizeof(heldSpan{}))

// span returns Compact's span for h, of trace, whose packed bytes are
// packed. Its strings share packed. Its attributes are cut from the front
// of attrs when it has room for them (h.attrs), capped so that an append
// to them cannot reach what follows, and allocated otherwise; its events
// are allocated.
func (h *heldSpan) span(trace schema.TraceID, packed string, attrs schema.Attributes) schema.Span {
	u := unpacker{s: packed[h.at : h.at+h.n]}
	s := schema.Span{
		TraceID: trace, SpanID: h.spanID, ParentSpanID: h.parentSpanID,
		Service: u.str(), Name: u.str(), StatusMessage: u.str(),
		StartNs: h.startNs, EndNs: h.endNs,
		Kind: h.kind, StatusCode: h.statusCode,
	}
	if n := u.uvarint(); n > 0 {
		if len(attrs) >= n {
			s.Attrs = attrs[:n:n]
		} else {
			s.Attrs = make(schema.Attributes, n)
		}
		for i := range s.Attrs {
			key, typ := u.byte(), u.byte()
			s.Attrs[i] = schema.Attr{Key: heldKeys[key], Type: schema.AttrType(typ), Value: u.str()}
		}
	}
	if n := u.uvarint(); n > 0 {
		s.Events = make([]schema.Event, n)
		for i := range s.Events {
			e := schema.Event{TimeNs: binary.LittleEndian.Uint64([]byte(u.next(8))), Name: schema.EventCancelled}
			if u.byte() == 1 {
				e.Attrs = schema.Attributes{schema.Str(schema.AttrCancelSource, u.str())}
			}
			s.Events[i] = e
		}
	}
	return s
}

func appendStr(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// unpacker reads what hold packed, so it is well formed.
type unpacker struct{ s string }

func (u *unpacker) next(n int) string {
	v := u.s[:n]
	u.s = u.s[n:]
	return v
}

func (u *unpacker) byte() byte { return u.next(1)[0] }

func (u *unpacker) uvarint() int {
	var n uint64
	for shift := 0; ; shift += 7 {
		c := u.byte()
		n |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return int(n)
		}
	}
}

func (u *unpacker) str() string { return u.next(u.uvarint()) }

func uvarintLen(n int) int {
	l := 1
	for ; n >= 0x80; n >>= 7 {
		l++
	}
	return l
}
