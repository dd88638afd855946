package ingest

import (
	"encoding/base64"
	"math"
	"strconv"
	"sync"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/budgetd/budgetd/schema"
)

// ConvertProto decodes msg, an OTLP/protobuf ExportTraceServiceRequest, and
// converts its spans. It accepts and refuses the messages pdata's decoder
// does and returns what Convert returns for pdata's decoding of msg
// (FuzzConvertProto holds it to both), without building pdata's objects
// first: pdata allocates a struct per attribute, value, event and link and
// a string per string, about 40 allocations per span of a typical request,
// all garbage once the spans are converted. Here the request is copied
// into one string, the spans' strings are substrings of it, and a span
// costs its attribute slice and, when it has numeric attributes, one
// string for their text. The spans keep the whole copy alive while any of
// them is held; every holder past the request copies what it keeps (the
// write-ahead log encodes them, assembly compacts them).
func (c *Converter) ConvertProto(msg []byte) (ConvertResult, error) {
	return c.convertProto(string(msg), nil)
}

// ConvertProtoReusing is ConvertProto for a caller that is done with the
// result, and every string and slice in it, before it calls release and
// before msg's bytes change (ingest hands the spans to a Durability that
// copies them on Commit: CopyingDurability). Nothing is copied: the
// spans' strings are msg's bytes, and the spans and their attributes are
// cut from buffers that release hands to the next request. That is most of
// what a request allocates (the copy of msg, a span struct and an
// attribute slice per span): garbage the collector would otherwise scan
// for and sweep at every rate budgetd takes.
func (c *Converter) ConvertProtoReusing(msg []byte) (res ConvertResult, release func(), err error) {
	b := reusables.Get().(*reusable)
	res, err = c.convertProto(unsafe.String(unsafe.SliceData(msg), len(msg)), b)
	if cap(res.Spans) > cap(b.spans) {
		b.spans = res.Spans[:0] // the count fell short and the spans grew
	}
	return res, b.release, err
}

func (c *Converter) convertProto(s string, b *reusable) (ConvertResult, error) {
	d := protoConverter{st: c.newState(), reuse: b}
	d.res.Spans = d.newSpans(countSpans(s))
	r := fieldReader{s: s}
	for r.next() {
		if r.num != 1 {
			r.skip()
			continue
		}
		if b := r.bytes("ResourceSpans"); r.err == nil {
			r.err = d.resourceSpans(b)
		}
	}
	if r.err != nil {
		return ConvertResult{}, r.err
	}
	d.res.Stats = d.st.stats
	d.res.Rejected = d.st.stats.Rejected()
	d.res.RejectReason = d.st.stats.RejectReason()
	return d.res, nil
}

// reusable is the memory of one ConvertProtoReusing call, kept for the
// next one.
type reusable struct {
	spans []schema.Span
	attrs []schema.Attr // cut front to back; its length is what is taken
}

var reusables = sync.Pool{New: func() any { return new(reusable) }}

// Past these sizes a request's buffers are dropped, not kept: one huge
// request must not leave its memory to every later one (ingest's limits
// allow requests of millions of attributes).
const (
	maxReusableSpans = 1 << 16
	maxReusableAttrs = 1 << 18
)

// release clears what the call used, so the pool does not keep the
// request's bytes reachable, and puts b back for the next call.
func (b *reusable) release() {
	clear(b.spans[:cap(b.spans)])
	clear(b.attrs)
	b.spans, b.attrs = b.spans[:0], b.attrs[:0]
	if cap(b.spans) <= maxReusableSpans && cap(b.attrs) <= maxReusableAttrs {
		reusables.Put(b)
	}
}

// newSpans returns an empty span slice with room for n.
func (d *protoConverter) newSpans(n int) []schema.Span {
	if d.reuse == nil {
		return make([]schema.Span, 0, n)
	}
	if d.reuse.spans == nil || cap(d.reuse.spans) < n {
		d.reuse.spans = make([]schema.Span, 0, n)
	}
	return d.reuse.spans[:0]
}

// newAttrs returns n zero attributes, at their final capacity: pending
// values point into them (converter.flush).
func (d *protoConverter) newAttrs(n int) schema.Attributes {
	b := d.reuse
	if b == nil {
		return make(schema.Attributes, n)
	}
	if len(b.attrs)+n > cap(b.attrs) {
		// A new buffer, twice as large; the attributes already cut keep
		// the old one alive until the request is done.
		b.attrs = make([]schema.Attr, 0, max(2*cap(b.attrs), n, 1024))
	}
	at := len(b.attrs)
	b.attrs = b.attrs[:at+n]
	return b.attrs[at : at+n : at+n]
}

// countSpans counts the spans msg holds, deprecated scope spans included,
// for the result's capacity; it stops at the first malformed field.
func countSpans(msg string) int {
	n := 0
	each(msg, 1, func(rs string) {
		for _, scopes := range [...]int32{2, 1000} {
			each(rs, scopes, func(ss string) {
				each(ss, 2, func(string) { n++ })
			})
		}
	})
	return n
}

// each calls f with the body of every length-delimited field num of msg,
// up to the first malformed field.
func each(msg string, num int32, f func(body string)) {
	r := fieldReader{s: msg}
	for r.next() {
		if r.num == num && r.typ == wireLen {
			if b := r.bytes(""); r.err == nil {
				f(b)
			}
			continue
		}
		r.skip()
	}
}

// protoConverter is the state of one ConvertProto call.
type protoConverter struct {
	st  converter
	res ConvertResult
	// reuse, when set, is where the spans and attributes are cut from
	// (ConvertProtoReusing).
	reuse *reusable
	// kvs holds the attributes of the resource or span being converted,
	// nested those of one of its events or links: scratch space reused
	// for every one of them.
	kvs, nested []wireKV
}

// wireValue is an attribute value as the message holds it: its type and
// the part of the message that is its value.
type wireValue struct {
	typ pcommon.ValueType
	s   string // a string, bytes, or the body of an array or a list
	n   uint64 // a bool, an int, or a double's bits
}

// wireKV is one attribute.
type wireKV struct {
	key   string
	value wireValue
}

// checked is the depth of a value read again after a first read checked
// it: its arrays and lists are not descended into again.
const checked = -1

// keyValue reads a KeyValue message. depth counts the levels above it.
func keyValue(s string, depth int) (wireKV, error) {
	if depth != checked {
		if depth >= wireRecursionLimit {
			return wireKV{}, errWireDepth
		}
		depth++
	}
	var kv wireKV
	r := fieldReader{s: s}
	for r.next() {
		switch r.num {
		case 1:
			kv.key = r.bytes("Key")
		case 2:
			// A value sent twice merges: the second's field, if any, wins.
			if b := r.bytes("Value"); r.err == nil {
				r.err = anyValue(b, &kv.value, depth)
			}
		case 3:
			r.varint("KeyStrindex")
		default:
			r.skip()
		}
	}
	return kv, r.err
}

// anyValue reads an AnyValue message into v, over what v holds.
func anyValue(s string, v *wireValue, depth int) error {
	if depth != checked {
		if depth >= wireRecursionLimit {
			return errWireDepth
		}
		depth++
	}
	r := fieldReader{s: s}
	for r.next() {
		switch r.num {
		case 1:
			*v = wireValue{typ: pcommon.ValueTypeStr, s: r.bytes("StringValue")}
		case 2:
			*v = wireValue{typ: pcommon.ValueTypeBool, n: r.varint("BoolValue")}
		case 3:
			*v = wireValue{typ: pcommon.ValueTypeInt, n: r.varint("IntValue")}
		case 4:
			*v = wireValue{typ: pcommon.ValueTypeDouble, n: r.fixed64("DoubleValue")}
		case 5:
			*v = wireValue{typ: pcommon.ValueTypeSlice, s: r.bytes("ArrayValue")}
			if r.err == nil && depth != checked {
				r.err = checkList(v.s, depth, anyValueList)
			}
		case 6:
			*v = wireValue{typ: pcommon.ValueTypeMap, s: r.bytes("KvlistValue")}
			if r.err == nil && depth != checked {
				r.err = checkList(v.s, depth, keyValueList)
			}
		case 7:
			*v = wireValue{typ: pcommon.ValueTypeBytes, s: r.bytes("BytesValue")}
		case 8:
			// A string in a profile's string table: no value outside one.
			r.varint("StringValueStrindex")
			*v = wireValue{typ: pcommon.ValueTypeEmpty}
		default:
			r.skip()
		}
	}
	return r.err
}

// listKind says what an ArrayValue or a KeyValueList holds.
type listKind bool

const (
	anyValueList listKind = false
	keyValueList listKind = true
)

// checkList checks every element of an ArrayValue or a KeyValueList.
func checkList(s string, depth int, kind listKind) error {
	if depth >= wireRecursionLimit {
		return errWireDepth
	}
	depth++
	r := fieldReader{s: s}
	for r.next() {
		if r.num != 1 {
			r.skip()
			continue
		}
		b := r.bytes("Values")
		if r.err != nil {
			break
		}
		if kind == keyValueList {
			_, r.err = keyValue(b, depth)
		} else {
			var v wireValue
			r.err = anyValue(b, &v, depth)
		}
	}
	return r.err
}

// eachElement calls f with every element of a checked ArrayValue or
// KeyValueList (an element's key is "" in an array) until f returns false.
func eachElement(s string, kind listKind, f func(wireKV) bool) {
	r := fieldReader{s: s}
	for r.next() {
		if r.num != 1 {
			r.skip()
			continue
		}
		var kv wireKV
		b := r.bytes("")
		if kind == keyValueList {
			kv, _ = keyValue(b, checked)
		} else {
			_ = anyValue(b, &kv.value, checked)
		}
		if !f(kv) {
			return
		}
	}
}

// appendKV reads a KeyValue message and appends it to *kvs.
func appendKV(kvs *[]wireKV, s string) error {
	kv, err := keyValue(s, 0)
	*kvs = append(*kvs, kv)
	return err
}

// resourceSpans converts a ResourceSpans message. Its resource may come
// after its spans on the wire, so the resource is read first.
func (d *protoConverter) resourceSpans(s string) error {
	d.kvs = d.kvs[:0]
	scopes := false
	r := fieldReader{s: s}
	for r.next() {
		switch r.num {
		case 1:
			// A resource sent twice merges: its attributes add up.
			if b := r.bytes("Resource"); r.err == nil {
				r.err = d.resource(b)
			}
		case 2:
			r.bytes("ScopeSpans")
			scopes = true
		case 3:
			r.bytes("SchemaUrl")
		case 1000:
			r.bytes("DeprecatedScopeSpans")
		default:
			r.skip()
		}
	}
	if r.err != nil {
		return r.err
	}
	res := d.resourceAttrs()

	r = fieldReader{s: s}
	for r.next() {
		switch r.num {
		case 2:
			if b := r.bytes("ScopeSpans"); r.err == nil {
				r.err = d.scopeSpans(b, res)
			}
		case 1000:
			// The instrumentation_library_spans of OTLP before 0.15: read,
			// as pdata reads them, when there are no scope spans.
			if b := r.bytes("DeprecatedScopeSpans"); r.err == nil {
				if scopes {
					r.err = d.checkOnly(func() error { return d.scopeSpans(b, res) })
				} else {
					r.err = d.scopeSpans(b, res)
				}
			}
		default:
			r.skip()
		}
	}
	return r.err
}

// checkOnly runs convert for its errors alone, leaving the result as it
// was.
func (d *protoConverter) checkOnly(convert func() error) error {
	spans, received, stats := len(d.res.Spans), d.res.Received, d.st.stats
	err := convert()
	clear(d.res.Spans[spans:])
	d.res.Spans, d.res.Received, d.st.stats = d.res.Spans[:spans], received, stats
	return err
}

// resource reads a Resource message, adding its attributes to d.kvs.
func (d *protoConverter) resource(s string) error {
	r := fieldReader{s: s}
	for r.next() {
		switch r.num {
		case 1:
			if b := r.bytes("Attributes"); r.err == nil {
				r.err = appendKV(&d.kvs, b)
			}
		case 2:
			r.varint("DroppedAttributesCount")
		case 3:
			if b := r.bytes("EntityRefs"); r.err == nil {
				r.err = checkEntityRef(b)
			}
		default:
			r.skip()
		}
	}
	return r.err
}

// checkEntityRef checks an EntityRef message, which budgetd does not keep.
func checkEntityRef(s string) error {
	r := fieldReader{s: s}
	for r.next() {
		switch r.num {
		case 1, 2, 3, 4:
			r.bytes("EntityRef")
		default:
			r.skip()
		}
	}
	return r.err
}

// resourceFields are what the spans of one resource share.
type resourceFields struct {
	attrs   schema.Attributes
	service string
}

// resourceAttrs converts the resource attributes in d.kvs as
// converter.resource does.
func (d *protoConverter) resourceAttrs() resourceFields {
	st := &d.st
	st.begin()
	attrs := d.attrs(d.kvs, st.lim.MaxResourceAttrs)
	st.flush()
	attrs = st.capBytes(attrs, st.lim.MaxResourceBytes)
	attrs = attrs[:len(attrs):len(attrs)]
	service := st.serviceName(attrs, len(d.kvs), func() (string, bool) {
		for _, kv := range d.kvs {
			if kv.key == attrServiceName {
				return kv.value.s, kv.value.typ == pcommon.ValueTypeStr
			}
		}
		return "", false
	})
	return resourceFields{attrs: attrs, service: service}
}

// scopeSpans converts a ScopeSpans message. Its scope may come after its
// spans on the wire, so the scope is read first.
func (d *protoConverter) scopeSpans(s string, res resourceFields) error {
	var name, version string
	r := fieldReader{s: s}
	for r.next() {
		switch r.num {
		case 1:
			// A scope sent twice merges: the later name and version win.
			if b := r.bytes("Scope"); r.err == nil {
				r.err = readScope(b, &name, &version)
			}
		case 2:
			r.bytes("Spans")
		case 3:
			r.bytes("SchemaUrl")
		default:
			r.skip()
		}
	}
	if r.err != nil {
		return r.err
	}
	base := schema.Span{
		Service:       res.service,
		ScopeName:     d.st.name(name),
		ScopeVersion:  d.st.name(version),
		ResourceAttrs: res.attrs,
	}
	r = fieldReader{s: s}
	for r.next() {
		if r.num != 2 {
			r.skip()
			continue
		}
		if b := r.bytes("Spans"); r.err == nil {
			r.err = d.span(b, &base)
		}
	}
	return r.err
}

// readScope reads an InstrumentationScope message.
func readScope(s string, name, version *string) error {
	r := fieldReader{s: s}
	for r.next() {
		switch r.num {
		case 1:
			*name = r.bytes("Name")
		case 2:
			*version = r.bytes("Version")
		case 3:
			if b := r.bytes("Attributes"); r.err == nil {
				_, r.err = keyValue(b, 0)
			}
		case 4:
			r.varint("DroppedAttributesCount")
		default:
			r.skip()
		}
	}
	return r.err
}

// wireSpan is the fields of a Span message other than its attributes,
// events and links.
type wireSpan struct {
	traceID       schema.TraceID
	spanID        schema.SpanID
	parentSpanID  schema.SpanID
	traceState    string
	name          string
	kind          uint64
	start, end    uint64
	statusMessage string
	statusCode    uint64
	events, links int
}

// span converts a Span message, appending it to the result when it is
// valid. base holds its resource's and scope's fields. The message is read
// twice: once for its fields, its attributes (into d.kvs) and to check
// its events and links, and, when the span is kept, once more for the
// events and links.
func (d *protoConverter) span(s string, base *schema.Span) error {
	var sp wireSpan
	d.kvs = d.kvs[:0]
	r := fieldReader{s: s}
	for r.next() {
		switch r.num {
		case 1:
			r.id("TraceId", len(sp.traceID), sp.traceID[:])
		case 2:
			r.id("SpanId", len(sp.spanID), sp.spanID[:])
		case 3:
			sp.traceState = r.bytes("TraceState")
		case 4:
			r.id("ParentSpanId", len(sp.parentSpanID), sp.parentSpanID[:])
		case 5:
			sp.name = r.bytes("Name")
		case 6:
			sp.kind = r.varint("Kind")
		case 7:
			sp.start = r.fixed64("StartTimeUnixNano")
		case 8:
			sp.end = r.fixed64("EndTimeUnixNano")
		case 9:
			if b := r.bytes("Attributes"); r.err == nil {
				r.err = appendKV(&d.kvs, b)
			}
		case 11:
			if b := r.bytes("Events"); r.err == nil {
				_, r.err = readEvent(b, &d.nested)
				sp.events++
			}
		case 13:
			if b := r.bytes("Links"); r.err == nil {
				_, r.err = readLink(b, &d.nested)
				sp.links++
			}
		case 15:
			// A status sent twice merges: the later fields win.
			if b := r.bytes("Status"); r.err == nil {
				r.err = readStatus(b, &sp.statusMessage, &sp.statusCode)
			}
		case 10, 12, 14:
			r.varint("DroppedCount")
		case 16:
			r.fixed32("Flags")
		default:
			r.skip()
		}
	}
	if r.err != nil {
		return r.err
	}
	d.res.Received++
	st := &d.st
	if !st.validSpan(sp.traceID, sp.spanID, sp.start, sp.end) {
		return nil
	}

	d.res.Spans = append(d.res.Spans, *base)
	out := &d.res.Spans[len(d.res.Spans)-1]
	st.begin()
	out.TraceID, out.SpanID, out.ParentSpanID = sp.traceID, sp.spanID, sp.parentSpanID
	out.TraceState = st.name(sp.traceState)
	out.Name = st.name(sp.name)
	out.Kind = spanKind(ptrace.SpanKind(int32(sp.kind)))
	out.StartNs, out.EndNs = sp.start, sp.end
	out.StatusCode = statusCode(ptrace.StatusCode(int32(sp.statusCode)))
	out.StatusMessage = st.strValue(sp.statusMessage)
	out.Attrs = d.attrs(d.kvs, st.lim.MaxSpanAttrs)

	if sp.events > 0 {
		n := min(sp.events, st.lim.MaxSpanEvents)
		st.stats.DroppedEvents += sp.events - n
		out.Events = make([]schema.Event, 0, n)
	}
	if sp.links > 0 {
		n := min(sp.links, st.lim.MaxSpanLinks)
		st.stats.DroppedLinks += sp.links - n
		out.Links = make([]schema.Link, 0, n)
	}
	if sp.events+sp.links > 0 {
		r = fieldReader{s: s}
		for r.next() {
			switch {
			case r.num == 11 && len(out.Events) < cap(out.Events):
				out.Events = append(out.Events, d.event(r.bytes("")))
			case r.num == 13 && len(out.Links) < cap(out.Links):
				out.Links = append(out.Links, d.link(r.bytes("")))
			default:
				r.skip()
			}
		}
	}
	st.flush()
	return nil
}

// readStatus reads a Status message.
func readStatus(s string, message *string, code *uint64) error {
	r := fieldReader{s: s}
	for r.next() {
		switch r.num {
		case 2:
			*message = r.bytes("Message")
		case 3:
			*code = r.varint("Code")
		default:
			r.skip()
		}
	}
	return r.err
}

// wireEvent is a Span.Event message; its attributes are read into a
// slice of the caller's.
type wireEvent struct {
	time uint64
	name string
}

// readEvent reads a Span.Event message, its attributes into *kvs.
func readEvent(s string, kvs *[]wireKV) (wireEvent, error) {
	var e wireEvent
	*kvs = (*kvs)[:0]
	r := fieldReader{s: s}
	for r.next() {
		switch r.num {
		case 1:
			e.time = r.fixed64("TimeUnixNano")
		case 2:
			e.name = r.bytes("Name")
		case 3:
			if b := r.bytes("Attributes"); r.err == nil {
				r.err = appendKV(kvs, b)
			}
		case 4:
			r.varint("DroppedAttributesCount")
		default:
			r.skip()
		}
	}
	return e, r.err
}

// event converts a Span.Event message that readEvent accepted.
func (d *protoConverter) event(s string) schema.Event {
	e, _ := readEvent(s, &d.nested)
	return schema.Event{TimeNs: e.time, Name: d.st.name(e.name), Attrs: d.attrs(d.nested, d.st.lim.MaxEventAttrs)}
}

// wireLink is a Span.Link message; its attributes are read into a slice
// of the caller's.
type wireLink struct {
	traceID    schema.TraceID
	spanID     schema.SpanID
	traceState string
}

// readLink reads a Span.Link message, its attributes into *kvs.
func readLink(s string, kvs *[]wireKV) (wireLink, error) {
	var l wireLink
	*kvs = (*kvs)[:0]
	r := fieldReader{s: s}
	for r.next() {
		switch r.num {
		case 1:
			r.id("TraceId", len(l.traceID), l.traceID[:])
		case 2:
			r.id("SpanId", len(l.spanID), l.spanID[:])
		case 3:
			l.traceState = r.bytes("TraceState")
		case 4:
			if b := r.bytes("Attributes"); r.err == nil {
				r.err = appendKV(kvs, b)
			}
		case 5:
			r.varint("DroppedAttributesCount")
		case 6:
			r.fixed32("Flags")
		default:
			r.skip()
		}
	}
	return l, r.err
}

// link converts a Span.Link message that readLink accepted.
func (d *protoConverter) link(s string) schema.Link {
	l, _ := readLink(s, &d.nested)
	return schema.Link{TraceID: l.traceID, SpanID: l.spanID, TraceState: d.st.name(l.traceState),
		Attrs: d.attrs(d.nested, d.st.lim.MaxLinkAttrs)}
}

// attrs converts at most limit of kvs as converter.attrs does.
func (d *protoConverter) attrs(kvs []wireKV, limit int) schema.Attributes {
	n := len(kvs)
	if n == 0 {
		return nil
	}
	st := &d.st
	keep := min(n, limit)
	st.stats.DroppedAttrs += n - keep
	out := d.newAttrs(keep)
	for i := range out {
		out[i].Key = st.cut(kvs[i].key, st.lim.MaxAttrKeyBytes, &st.stats.TruncatedKeys)
		d.value(&out[i], kvs[i].value)
	}
	return out
}

// value sets a's Type and Value from v as converter.value does.
func (d *protoConverter) value(a *schema.Attr, v wireValue) {
	st := &d.st
	start := len(st.buf)
	switch v.typ {
	case pcommon.ValueTypeStr:
		a.Type = schema.AttrString
		a.Value = st.strValue(v.s)
		return
	case pcommon.ValueTypeBool:
		a.Type = schema.AttrBool
		a.Value = strconv.FormatBool(v.n != 0)
		return
	case pcommon.ValueTypeInt:
		a.Type = schema.AttrInt
		if i := int64(v.n); 0 <= i && i < 100 {
			a.Value = strconv.FormatInt(i, 10)
			return
		}
		st.buf = strconv.AppendInt(st.buf, int64(v.n), 10)
	case pcommon.ValueTypeDouble:
		a.Type = schema.AttrDouble
		st.buf = strconv.AppendFloat(st.buf, math.Float64frombits(v.n), 'g', -1, 64)
	case pcommon.ValueTypeBytes:
		a.Type = schema.AttrBytes
		raw := v.s
		if maxRaw := st.lim.MaxAttrValueBytes / 4 * 3; len(raw) > maxRaw {
			raw = raw[:maxRaw]
			st.stats.TruncatedValues++
		}
		st.buf = st.appendBase64(st.buf, raw)
	case pcommon.ValueTypeSlice, pcommon.ValueTypeMap:
		a.Type = schema.AttrSlice
		open, end, kind := byte('['), byte(']'), anyValueList
		if v.typ == pcommon.ValueTypeMap {
			a.Type = schema.AttrMap
			open, end, kind = '{', '}', keyValueList
		}
		// When the value does not fit MaxAttrValueBytes, keep the leading
		// elements that fit: cutting inside one would leave invalid JSON.
		defer st.bound(start)()
		st.buf = append(st.buf, open)
		first := true
		eachElement(v.s, kind, func(kv wireKV) bool {
			mark := len(st.buf)
			if !first {
				st.buf = append(st.buf, ',')
			}
			first = false
			st.buf = d.appendElement(st.buf, kv, kind)
			if st.cutAt(st.buf, start) {
				st.buf = st.buf[:mark]
				st.stats.TruncatedValues++
				return false
			}
			return true
		})
		st.buf = append(st.buf, end)
	default:
		a.Type = schema.AttrEmpty
		a.Value = ""
		return
	}
	st.pend(a, start)
}

// appendElement appends an element of an array (its value) or of a list
// (its key and value) in JSON.
func (d *protoConverter) appendElement(dst []byte, kv wireKV, kind listKind) []byte {
	if kind == keyValueList {
		dst = d.st.appendJSONString(dst, kv.key)
		dst = append(dst, ':')
	}
	return d.appendJSON(dst, kv.value)
}

// appendJSON appends v as converter.appendJSON appends pdata's values.
func (d *protoConverter) appendJSON(dst []byte, v wireValue) []byte {
	switch v.typ {
	case pcommon.ValueTypeStr:
		return d.st.appendJSONString(dst, v.s)
	case pcommon.ValueTypeBool:
		return strconv.AppendBool(dst, v.n != 0)
	case pcommon.ValueTypeInt:
		return strconv.AppendInt(dst, int64(v.n), 10)
	case pcommon.ValueTypeDouble:
		return appendJSONFloat(dst, math.Float64frombits(v.n))
	case pcommon.ValueTypeBytes:
		if !d.st.fits(dst, base64.StdEncoding.EncodedLen(len(v.s))+2) {
			return dst
		}
		dst = append(dst, '"')
		dst = d.st.appendBase64(dst, v.s)
		return append(dst, '"')
	case pcommon.ValueTypeSlice, pcommon.ValueTypeMap:
		open, end, kind := byte('['), byte(']'), anyValueList
		if v.typ == pcommon.ValueTypeMap {
			open, end, kind = '{', '}', keyValueList
		}
		dst = append(dst, open)
		first := true
		eachElement(v.s, kind, func(kv wireKV) bool {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = d.appendElement(dst, kv, kind)
			return !d.st.over
		})
		return append(dst, end)
	default:
		return append(dst, "null"...)
	}
}

// appendBase64 appends the standard base64 form of the bytes in s.
func (st *converter) appendBase64(dst []byte, s string) []byte {
	st.raw = append(st.raw[:0], s...)
	return base64.StdEncoding.AppendEncode(dst, st.raw)
}
