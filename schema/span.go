package schema

import "strconv"

// SpanKind is the OTLP span kind; the numbering matches the OTLP enum.
type SpanKind int8

// The OTLP span kinds.
const (
	KindUnspecified SpanKind = 0
	KindInternal    SpanKind = 1
	KindServer      SpanKind = 2
	KindClient      SpanKind = 3
	KindProducer    SpanKind = 4
	KindConsumer    SpanKind = 5
)

var kindNames = [...]string{"unspecified", "internal", "server", "client", "producer", "consumer"}

// String returns the lower-case kind name ("server", "client", …).
func (k SpanKind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// IsEntry reports whether a span of this kind is where a hop starts handling
// a request (and so where budget.remaining_ms is recorded).
func (k SpanKind) IsEntry() bool { return k == KindServer || k == KindConsumer }

// IsCall reports whether a span of this kind is an outgoing call (and so
// where budget.timeout_ms and attempts are recorded).
func (k SpanKind) IsCall() bool { return k == KindClient || k == KindProducer }

// StatusCode is the OTLP span status code; the numbering matches OTLP.
type StatusCode int8

// The OTLP status codes.
const (
	StatusUnset StatusCode = 0
	StatusOK    StatusCode = 1
	StatusError StatusCode = 2
)

var statusNames = [...]string{"unset", "ok", "error"}

// String returns the lower-case status name.
func (s StatusCode) String() string {
	if s >= 0 && int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "status(" + strconv.Itoa(int(s)) + ")"
}

// Span is one OTLP span with its resource's service name pulled out. Times are
// Unix nanoseconds as recorded by the span's host (clocks may disagree between
// hosts; the analyzer deals with skew).
type Span struct {
	TraceID      TraceID
	SpanID       SpanID
	ParentSpanID SpanID // zero for a root span
	TraceState   string

	Service string // resource attribute service.name
	Name    string
	Kind    SpanKind

	StartNs uint64
	EndNs   uint64

	StatusCode    StatusCode
	StatusMessage string

	ScopeName    string
	ScopeVersion string

	ResourceAttrs Attributes
	Attrs         Attributes
	Events        []Event
	Links         []Link
}

// DurationNs returns EndNs − StartNs, or 0 when the span ends before it starts.
func (s *Span) DurationNs() uint64 {
	if s.EndNs < s.StartNs {
		return 0
	}
	return s.EndNs - s.StartNs
}

// Event is a timestamped annotation on a span (for example budget.cancelled).
type Event struct {
	TimeNs uint64
	Name   string
	Attrs  Attributes
}

// Link points from a span to another span, possibly in another trace.
type Link struct {
	TraceID    TraceID
	SpanID     SpanID
	TraceState string
	Attrs      Attributes
}
