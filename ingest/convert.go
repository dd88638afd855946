package ingest

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/budgetd/budgetd/schema"
)

// UnknownService is the service name given to spans whose resource has no
// service.name, the same fallback the OpenTelemetry SDKs use.
const UnknownService = "unknown_service"

// attrServiceName is the resource attribute that names a span's service.
const attrServiceName = "service.name"

// Limits bounds what one span may carry into budgetd. Everything beyond a
// limit is cut, never rejected, and counted in Stats: a span with too many
// attributes is still a span whose timing the detectors need.
type Limits struct {
	// MaxAttrValueBytes caps the canonical form of one attribute value.
	// Strings are cut at a UTF-8 boundary, bytes at a whole base64 quantum,
	// and arrays and maps after the last whole element that fits, so the
	// value stays valid JSON.
	MaxAttrValueBytes int `yaml:"max_attr_value_bytes"`
	// MaxAttrKeyBytes caps an attribute key. A resource's keys are copied
	// into every row of its spans, so an unbounded key multiplies into the
	// store's insert blocks.
	MaxAttrKeyBytes int `yaml:"max_attr_key_bytes"`
	// MaxNameBytes caps span and event names, scope names and versions,
	// and trace states. Status messages are capped like attribute values.
	MaxNameBytes int `yaml:"max_name_bytes"`
	// MaxSpanAttrs caps the attributes kept per span, in wire order.
	MaxSpanAttrs int `yaml:"max_span_attrs"`
	// MaxResourceAttrs caps the attributes kept per resource.
	MaxResourceAttrs int `yaml:"max_resource_attrs"`
	// MaxResourceBytes caps a resource's attributes, keys and values
	// together: every stored row of the resource's spans repeats them.
	// Attributes past it are dropped (service.name never is).
	MaxResourceBytes int `yaml:"max_resource_bytes"`
	// MaxEventAttrs caps the attributes kept per span event.
	MaxEventAttrs int `yaml:"max_event_attrs"`
	// MaxLinkAttrs caps the attributes kept per span link.
	MaxLinkAttrs int `yaml:"max_link_attrs"`
	// MaxSpanEvents caps the events kept per span.
	MaxSpanEvents int `yaml:"max_span_events"`
	// MaxSpanLinks caps the links kept per span.
	MaxSpanLinks int `yaml:"max_span_links"`
}

// minAttrValueBytes is the smallest value limit Validate accepts. Below it
// the truncation rules stop making sense: a base64 quantum is 4 bytes and
// a truncated array still needs its brackets.
const minAttrValueBytes = 16

// DefaultLimits returns the limits of DESIGN §6: 2 KiB attribute values, and
// counts large enough that only a misbehaving instrumentation reaches them
// (the OpenTelemetry SDKs default to 128 attributes, events and links).
func DefaultLimits() Limits {
	return Limits{
		MaxAttrValueBytes: 2048,
		MaxAttrKeyBytes:   256,
		MaxNameBytes:      1024,
		MaxSpanAttrs:      1024,
		MaxResourceAttrs:  1024,
		MaxResourceBytes:  32 << 10,
		MaxEventAttrs:     256,
		MaxLinkAttrs:      256,
		MaxSpanEvents:     1024,
		MaxSpanLinks:      1024,
	}
}

// Validate reports the first limit that cannot work, naming its config key.
func (l Limits) Validate() error {
	if l.MaxAttrValueBytes < minAttrValueBytes {
		return fmt.Errorf("ingest.limits.max_attr_value_bytes must be >= %d", minAttrValueBytes)
	}
	for _, c := range []struct {
		key string
		v   int
	}{
		{"max_attr_key_bytes", l.MaxAttrKeyBytes},
		{"max_name_bytes", l.MaxNameBytes},
		{"max_span_attrs", l.MaxSpanAttrs},
		{"max_resource_attrs", l.MaxResourceAttrs},
		{"max_resource_bytes", l.MaxResourceBytes},
		{"max_event_attrs", l.MaxEventAttrs},
		{"max_link_attrs", l.MaxLinkAttrs},
		{"max_span_events", l.MaxSpanEvents},
		{"max_span_links", l.MaxSpanLinks},
	} {
		if c.v <= 0 {
			return errors.New("ingest.limits." + c.key + " must be > 0")
		}
	}
	return nil
}

// Stats counts what a conversion changed or refused. Callers add it to
// their metrics; it is plain data so results of several calls can be summed
// with Add.
type Stats struct {
	// RejectedZeroTraceID counts spans rejected for an all-zero trace id.
	RejectedZeroTraceID int
	// RejectedZeroSpanID counts spans rejected for an all-zero span id.
	RejectedZeroSpanID int
	// RejectedEndBeforeStart counts spans rejected because they end before
	// they start.
	RejectedEndBeforeStart int
	// RejectedOutsideWindow counts spans rejected because they start or end
	// outside the accepted SpanTimeWindow around budgetd's clock.
	RejectedOutsideWindow int

	// TruncatedValues counts attribute values and status messages cut to
	// MaxAttrValueBytes.
	TruncatedValues int
	// TruncatedKeys counts attribute keys cut to MaxAttrKeyBytes.
	TruncatedKeys int
	// TruncatedNames counts names, scope fields and trace states cut to
	// MaxNameBytes.
	TruncatedNames int
	// RepairedStrings counts strings whose invalid UTF-8 was replaced with
	// U+FFFD.
	RepairedStrings int
	// DroppedAttrs counts attributes dropped by the per-span, per-resource,
	// per-event and per-link attribute limits. A resource's dropped
	// attributes are counted once, not once per span.
	DroppedAttrs int
	// DroppedEvents counts span events dropped by MaxSpanEvents.
	DroppedEvents int
	// DroppedLinks counts span links dropped by MaxSpanLinks.
	DroppedLinks int
}

// Add adds o's counters to s.
func (s *Stats) Add(o Stats) {
	s.RejectedZeroTraceID += o.RejectedZeroTraceID
	s.RejectedZeroSpanID += o.RejectedZeroSpanID
	s.RejectedEndBeforeStart += o.RejectedEndBeforeStart
	s.RejectedOutsideWindow += o.RejectedOutsideWindow
	s.TruncatedValues += o.TruncatedValues
	s.TruncatedKeys += o.TruncatedKeys
	s.TruncatedNames += o.TruncatedNames
	s.RepairedStrings += o.RepairedStrings
	s.DroppedAttrs += o.DroppedAttrs
	s.DroppedEvents += o.DroppedEvents
	s.DroppedLinks += o.DroppedLinks
}

// Rejected returns the number of spans rejected for any reason.
func (s Stats) Rejected() int {
	return s.RejectedZeroTraceID + s.RejectedZeroSpanID + s.RejectedEndBeforeStart + s.RejectedOutsideWindow
}

// The reject reasons, worded for an OTLP partial_success error_message that
// a person reads in the exporting Collector's log.
const (
	reasonZeroTraceID    = "trace_id is missing or all zero"
	reasonZeroSpanID     = "span_id is missing or all zero"
	reasonEndBeforeStart = "end_time_unix_nano is before start_time_unix_nano"
	reasonOutsideWindow  = "start or end time is outside the window budgetd accepts around its clock (ingest.span_times)"
)

// RejectReason describes why spans were rejected, most common reason first,
// for example "span_id is missing or all zero (3 spans); end_time_unix_nano
// is before start_time_unix_nano (1 span)". It is "" when none were.
func (s Stats) RejectReason() string {
	reasons := [...]struct {
		text string
		n    int
	}{
		{reasonZeroTraceID, s.RejectedZeroTraceID},
		{reasonZeroSpanID, s.RejectedZeroSpanID},
		{reasonEndBeforeStart, s.RejectedEndBeforeStart},
		{reasonOutsideWindow, s.RejectedOutsideWindow},
	}
	// Four entries: an insertion sort keeps ties in the order above.
	for i := 1; i < len(reasons); i++ {
		for j := i; j > 0 && reasons[j].n > reasons[j-1].n; j-- {
			reasons[j], reasons[j-1] = reasons[j-1], reasons[j]
		}
	}
	var b strings.Builder
	for _, r := range reasons {
		if r.n == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString(r.text)
		b.WriteString(" (")
		b.WriteString(strconv.Itoa(r.n))
		if r.n == 1 {
			b.WriteString(" span)")
		} else {
			b.WriteString(" spans)")
		}
	}
	return b.String()
}

// ConvertResult is the outcome of one Convert call.
type ConvertResult struct {
	// Spans are the accepted spans, in the order they appeared in the
	// request. Spans of one resource share their ResourceAttrs slice, and
	// the strings of a span may share memory with each other: treat them as
	// read-only (appending to a shared slice is safe; it copies).
	Spans []schema.Span
	// Received is the number of spans the request held, valid or not.
	Received int
	// Rejected is the number of spans left out because they were invalid.
	Rejected int
	// RejectReason says why, suitable as an OTLP partial_success
	// error_message; "" when Rejected is 0.
	RejectReason string
	// Stats counts rejections, truncations, repairs and drops.
	Stats Stats
}

// SpanTimeWindow is the `ingest.span_times` section: how far from budgetd's
// clock a span's start and end may be. A span outside it is refused (and
// reported in partial_success): a sender whose clock is years off, or a
// backfill, would otherwise fill the store with partitions no retention
// reaches and make every analysis of its traces meaningless. Traces older
// than MaxAge are analysed from files with `budgetd analyze`.
type SpanTimeWindow struct {
	// MaxAge is how long before now a span may start; 0: no bound.
	MaxAge time.Duration `yaml:"max_age"`
	// MaxAhead is how far after now a span may start or end; 0: no bound.
	MaxAhead time.Duration `yaml:"max_ahead"`
}

// DefaultSpanTimeWindow accepts spans from the last week up to a day ahead:
// wide enough for any Collector's retries and for hosts whose clock is set
// to local time instead of UTC.
func DefaultSpanTimeWindow() SpanTimeWindow {
	return SpanTimeWindow{MaxAge: 7 * 24 * time.Hour, MaxAhead: 24 * time.Hour}
}

// Validate reports a setting that cannot work, naming its key.
func (w SpanTimeWindow) Validate() error {
	if w.MaxAge < 0 || w.MaxAhead < 0 {
		return errors.New("ingest.span_times.max_age and max_ahead must be >= 0 (0: no bound)")
	}
	return nil
}

// bounds returns the accepted [earliest, latest] Unix nanoseconds at now.
func (w SpanTimeWindow) bounds(now time.Time) (earliest, latest uint64) {
	earliest, latest = 0, math.MaxUint64
	if w.MaxAge > 0 {
		earliest = uint64(max(now.Add(-w.MaxAge).UnixNano(), 0))
	}
	if w.MaxAhead > 0 {
		latest = uint64(max(now.Add(w.MaxAhead).UnixNano(), 0))
	}
	return earliest, latest
}

// Converter turns pdata traces into schema spans under fixed Limits. It holds
// no mutable state, so one Converter is safe for concurrent use by the gRPC
// and HTTP handlers.
type Converter struct {
	limits Limits
	window SpanTimeWindow
	now    func() time.Time
}

// NewConverter returns a Converter enforcing limits.
func NewConverter(limits Limits) (*Converter, error) {
	if err := limits.Validate(); err != nil {
		return nil, fmt.Errorf("create converter: %w", err)
	}
	return &Converter{limits: limits}, nil
}

// Limits returns the limits c enforces.
func (c *Converter) Limits() Limits { return c.limits }

// WithTimeWindow returns a Converter that also refuses spans outside w
// around now(). A Converter without one (offline analysis of old files)
// accepts any time.
func (c *Converter) WithTimeWindow(w SpanTimeWindow, now func() time.Time) (*Converter, error) {
	if err := w.Validate(); err != nil {
		return nil, fmt.Errorf("create converter: %w", err)
	}
	cc := *c
	cc.window, cc.now = w, now
	return &cc, nil
}

// Convert converts every span of td. Invalid spans are left out and counted;
// the rest are kept, cut to the limits. Convert does not modify td, and the
// result shares no memory with it that td could later change (pdata strings
// are immutable), so td may be reused or released afterwards.
func (c *Converter) Convert(td ptrace.Traces) ConvertResult {
	st := c.newState()
	res := ConvertResult{Spans: make([]schema.Span, 0, td.SpanCount()), Received: td.SpanCount()}

	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		resAttrs, service := st.resource(rs.Resource())
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			scope := ss.Scope()
			scopeName, scopeVersion := st.name(scope.Name()), st.name(scope.Version())
			spans := ss.Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				if !st.valid(sp) {
					continue
				}
				res.Spans = append(res.Spans, schema.Span{
					Service:       service,
					ScopeName:     scopeName,
					ScopeVersion:  scopeVersion,
					ResourceAttrs: resAttrs,
				})
				st.span(&res.Spans[len(res.Spans)-1], sp)
			}
		}
	}

	res.Stats = st.stats
	res.Rejected = st.stats.Rejected()
	res.RejectReason = st.stats.RejectReason()
	return res
}

// newState returns the state of one conversion.
func (c *Converter) newState() converter {
	st := converter{lim: c.limits, earliest: 0, latest: math.MaxUint64}
	if c.now != nil {
		st.earliest, st.latest = c.window.bounds(c.now())
	}
	return st
}

// converter is the per-call state of Convert. Keeping it out of Converter is
// what makes Converter safe for concurrent use; it is allocated once per
// call and reused for every span of the call.
type converter struct {
	lim   Limits
	stats Stats
	// earliest and latest bound span times (Unix ns), from SpanTimeWindow.
	earliest, latest uint64

	// buf collects the canonical forms of one span's (or one resource's)
	// non-string attribute values. They become a single string when the
	// span is done, and each attribute's Value is a slice of it: one
	// allocation per span instead of one per number.
	buf []byte
	// pending records which attribute gets which part of buf.
	pending []pendingValue
	// raw is scratch space for bytes values before base64 encoding.
	raw []byte
	// textEnd bounds buf while an array or map value is written into it:
	// an element that would end past it is cut with the rest of the value
	// anyway, so its strings and bytes stop there rather than grow buf by
	// up to six times their size (a string of control characters escapes
	// each byte as \u00XX). 0: no bound. over says a write stopped at it.
	textEnd int
	over    bool
}

// fits reports whether n more bytes fit in dst before textEnd, and notes
// when they do not.
func (st *converter) fits(dst []byte, n int) bool {
	if st.textEnd > 0 && len(dst)+n > st.textEnd {
		st.over = true
		return false
	}
	return true
}

// bound starts writing an array or map value that begins at start in buf:
// its text may not pass MaxAttrValueBytes. It returns the function that
// ends the bound.
func (st *converter) bound(start int) func() {
	st.textEnd, st.over = start+st.lim.MaxAttrValueBytes, false
	return func() { st.textEnd, st.over = 0, false }
}

// cutAt reports whether the element just written into dst, of the value
// that began at start, takes the value past MaxAttrValueBytes (with its
// closing bracket).
func (st *converter) cutAt(dst []byte, start int) bool {
	return st.over || len(dst)-start+1 > st.lim.MaxAttrValueBytes
}

// pendingValue is an attribute whose Value is buf[start:end] once flushed.
// The pointer stays valid because attribute slices are allocated at their
// final length and never grown.
type pendingValue struct {
	attr       *schema.Attr
	start, end int
}

// valid checks the fields without which a span cannot be placed in a trace,
// counting the first problem found.
func (st *converter) valid(sp ptrace.Span) bool {
	return st.validSpan(schema.TraceID(sp.TraceID()), schema.SpanID(sp.SpanID()),
		uint64(sp.StartTimestamp()), uint64(sp.EndTimestamp()))
}

// validSpan is valid for a span's ids and times.
func (st *converter) validSpan(trace schema.TraceID, span schema.SpanID, start, end uint64) bool {
	switch {
	case trace == schema.TraceID{}:
		st.stats.RejectedZeroTraceID++
	case span == schema.SpanID{}:
		st.stats.RejectedZeroSpanID++
	case end < start:
		st.stats.RejectedEndBeforeStart++
	case start < st.earliest || end > st.latest:
		st.stats.RejectedOutsideWindow++
	default:
		return true
	}
	return false
}

// resource converts a resource's attributes and finds its service name.
func (st *converter) resource(r pcommon.Resource) (schema.Attributes, string) {
	st.begin()
	m := r.Attributes()
	attrs := st.attrs(m, st.lim.MaxResourceAttrs)
	st.flush()
	attrs = st.capBytes(attrs, st.lim.MaxResourceBytes)
	// Cap the slice so that a caller appending to one span's ResourceAttrs
	// copies instead of writing into the array every span of the resource
	// shares.
	attrs = attrs[:len(attrs):len(attrs)]
	return attrs, st.serviceName(attrs, m.Len(), func() (string, bool) {
		v, ok := m.Get(attrServiceName)
		return v.Str(), ok && v.Type() == pcommon.ValueTypeStr
	})
}

// serviceName finds the service a resource names among attrs, its
// converted attributes, out of all it sent. original returns the first
// service.name it sent, if that is a string.
func (st *converter) serviceName(attrs schema.Attributes, all int, original func() (string, bool)) string {
	if a, ok := attrs.Get(attrServiceName); ok {
		if a.Value != "" {
			return a.Value
		}
		return UnknownService
	}
	if len(attrs) < all {
		// service.name may have been cut by MaxResourceAttrs; it names the
		// service whatever the limit, so look for it in the original.
		if v, ok := original(); ok {
			if name := st.strValue(v); name != "" {
				return name
			}
		}
	}
	return UnknownService
}

// capBytes drops the attributes past limit bytes of keys and values,
// keeping service.name, and counts them.
func (st *converter) capBytes(attrs schema.Attributes, limit int) schema.Attributes {
	total := 0
	for i := range attrs {
		total += len(attrs[i].Key) + len(attrs[i].Value)
	}
	if total <= limit {
		return attrs
	}
	kept, used := attrs[:0:0], 0
	for i := range attrs {
		n := len(attrs[i].Key) + len(attrs[i].Value)
		if attrs[i].Key == attrServiceName || used+n <= limit {
			kept = append(kept, attrs[i])
			used += n
		}
	}
	st.stats.DroppedAttrs += len(attrs) - len(kept)
	return kept
}

// span fills s from sp. s already carries the resource and scope fields.
func (st *converter) span(s *schema.Span, sp ptrace.Span) {
	st.begin()
	s.TraceID = schema.TraceID(sp.TraceID())
	s.SpanID = schema.SpanID(sp.SpanID())
	s.ParentSpanID = schema.SpanID(sp.ParentSpanID())
	s.TraceState = st.name(sp.TraceState().AsRaw())
	s.Name = st.name(sp.Name())
	s.Kind = spanKind(sp.Kind())
	s.StartNs = uint64(sp.StartTimestamp())
	s.EndNs = uint64(sp.EndTimestamp())
	status := sp.Status()
	s.StatusCode = statusCode(status.Code())
	s.StatusMessage = st.strValue(status.Message())
	s.Attrs = st.attrs(sp.Attributes(), st.lim.MaxSpanAttrs)

	if events := sp.Events(); events.Len() > 0 {
		n := min(events.Len(), st.lim.MaxSpanEvents)
		st.stats.DroppedEvents += events.Len() - n
		s.Events = make([]schema.Event, n)
		for i := range s.Events {
			e := events.At(i)
			s.Events[i] = schema.Event{
				TimeNs: uint64(e.Timestamp()),
				Name:   st.name(e.Name()),
				Attrs:  st.attrs(e.Attributes(), st.lim.MaxEventAttrs),
			}
		}
	}
	if links := sp.Links(); links.Len() > 0 {
		n := min(links.Len(), st.lim.MaxSpanLinks)
		st.stats.DroppedLinks += links.Len() - n
		s.Links = make([]schema.Link, n)
		for i := range s.Links {
			l := links.At(i)
			s.Links[i] = schema.Link{
				TraceID:    schema.TraceID(l.TraceID()),
				SpanID:     schema.SpanID(l.SpanID()),
				TraceState: st.name(l.TraceState().AsRaw()),
				Attrs:      st.attrs(l.Attributes(), st.lim.MaxLinkAttrs),
			}
		}
	}
	st.flush()
}

// spanKind maps the OTLP kind; values outside the enum (possible on the
// wire) become unspecified rather than wrapping into another kind.
func spanKind(k ptrace.SpanKind) schema.SpanKind {
	if k < ptrace.SpanKindUnspecified || k > ptrace.SpanKindConsumer {
		return schema.KindUnspecified
	}
	return schema.SpanKind(k)
}

// statusCode maps the OTLP status code; unknown values become unset.
func statusCode(c ptrace.StatusCode) schema.StatusCode {
	if c < ptrace.StatusCodeUnset || c > ptrace.StatusCodeError {
		return schema.StatusUnset
	}
	return schema.StatusCode(c)
}

// pend makes a's Value what was written into buf from start on, once
// flushed ("" when nothing was).
func (st *converter) pend(a *schema.Attr, start int) {
	if len(st.buf) == start {
		a.Value = ""
		return
	}
	st.pending = append(st.pending, pendingValue{attr: a, start: start, end: len(st.buf)})
}

// begin starts collecting the non-string values of one span or resource.
func (st *converter) begin() {
	st.buf = st.buf[:0]
	st.pending = st.pending[:0]
}

// flush turns the collected canonical values into one string and points
// every pending attribute at its part of it.
func (st *converter) flush() {
	if len(st.pending) == 0 {
		return
	}
	s := string(st.buf)
	for _, p := range st.pending {
		p.attr.Value = s[p.start:p.end]
	}
	// Drop the pointers so the scratch slice does not pin the last span.
	clear(st.pending)
	st.pending = st.pending[:0]
}

// attrs converts at most limit attributes of m, in wire order, in one
// allocation. Values that need formatting are left pending until flush.
func (st *converter) attrs(m pcommon.Map, limit int) schema.Attributes {
	n := m.Len()
	if n == 0 {
		return nil
	}
	keep := min(n, limit)
	st.stats.DroppedAttrs += n - keep
	out := make(schema.Attributes, keep)
	i := 0
	for k, v := range m.All() {
		if i == keep {
			break
		}
		out[i].Key = st.cut(k, st.lim.MaxAttrKeyBytes, &st.stats.TruncatedKeys)
		st.value(&out[i], v)
		i++
	}
	return out
}

// str returns s with invalid UTF-8 repaired. Valid strings are returned as
// they are, without copying.
func (st *converter) str(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	st.stats.RepairedStrings++
	return strings.ToValidUTF8(s, "\uFFFD")
}

// strValue returns a string attribute value repaired and cut to
// MaxAttrValueBytes at a rune boundary.
func (st *converter) strValue(s string) string {
	return st.cut(s, st.lim.MaxAttrValueBytes, &st.stats.TruncatedValues)
}

// name returns a name repaired and cut to MaxNameBytes.
func (st *converter) name(s string) string {
	return st.cut(s, st.lim.MaxNameBytes, &st.stats.TruncatedNames)
}

// cut returns s repaired and cut to limit bytes at a rune boundary,
// counting a cut in *cuts.
func (st *converter) cut(s string, limit int, cuts *int) string {
	s = st.str(s)
	if len(s) <= limit {
		return s
	}
	*cuts++
	// Copy the prefix so the cut value does not keep the whole original
	// string alive for as long as the span lives.
	return strings.Clone(s[:runeBoundary(s, limit)])
}

// runeBoundary returns the largest n <= max such that s[:n] does not split
// a UTF-8 sequence. s must be valid UTF-8 and longer than max.
func runeBoundary(s string, max int) int {
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

// value sets a's Type and Value from v. Strings and booleans need no
// formatting and are set directly; everything else is appended to buf and
// set by flush.
func (st *converter) value(a *schema.Attr, v pcommon.Value) {
	start := len(st.buf)
	switch v.Type() {
	case pcommon.ValueTypeStr:
		a.Type = schema.AttrString
		a.Value = st.strValue(v.Str())
		return
	case pcommon.ValueTypeBool:
		a.Type = schema.AttrBool
		a.Value = strconv.FormatBool(v.Bool())
		return
	case pcommon.ValueTypeInt:
		a.Type = schema.AttrInt
		if i := v.Int(); 0 <= i && i < 100 {
			// strconv returns small integers from a static table.
			a.Value = strconv.FormatInt(i, 10)
			return
		}
		st.buf = strconv.AppendInt(st.buf, v.Int(), 10)
	case pcommon.ValueTypeDouble:
		a.Type = schema.AttrDouble
		st.buf = strconv.AppendFloat(st.buf, v.Double(), 'g', -1, 64)
	case pcommon.ValueTypeBytes:
		a.Type = schema.AttrBytes
		st.buf = st.appendBytes(st.buf, v.Bytes())
	case pcommon.ValueTypeSlice:
		a.Type = schema.AttrSlice
		st.buf = st.appendTopSlice(st.buf, v.Slice())
	case pcommon.ValueTypeMap:
		a.Type = schema.AttrMap
		st.buf = st.appendTopMap(st.buf, v.Map())
	default:
		a.Type = schema.AttrEmpty
		a.Value = ""
		return
	}
	st.pend(a, start)
}
