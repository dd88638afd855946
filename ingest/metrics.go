package ingest

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names start with budgetd_ingest_; every label has a closed set of
// values, listed next to the metric, so no sender can grow the series count.
const (
	metricNamespace = "budgetd"
	metricSubsystem = "ingest"
)

// The transports, the `transport` label.
const (
	transportGRPC = "grpc"
	transportHTTP = "http"
)

// The reasons a valid request's spans are refused (the sender is asked to
// retry), the `reason` label of spans_refused_total.
const (
	refusedOverloaded  = "overloaded"
	refusedUnavailable = "unavailable"
	refusedShutdown    = "shutdown"
	refusedCanceled    = "canceled"
)

// serverMetrics are the Server's self-metrics.
type serverMetrics struct {
	spansReceived   *prometheus.CounterVec   // transport
	spansAccepted   *prometheus.CounterVec   // transport
	spansRejected   *prometheus.CounterVec   // reason: zero_trace_id, zero_span_id, end_before_start, outside_time_window
	spansRefused    *prometheus.CounterVec   // reason: overloaded, unavailable, shutdown, canceled
	requestsShed    *prometheus.CounterVec   // transport
	requestBytes    *prometheus.CounterVec   // transport, form: wire, decoded
	requestDuration *prometheus.HistogramVec // transport, outcome (see outcome.String)
	valuesTruncated prometheus.Counter
	truncated       *prometheus.CounterVec // what: attribute_key, name
	stringsRepaired prometheus.Counter
	dropped         *prometheus.CounterVec // item: attributes, events, links
	inflightBytes   prometheus.Gauge
	grpcStreams     prometheus.Gauge
	receiveTimeouts *prometheus.CounterVec // transport
}

func newServerMetrics(reg prometheus.Registerer) (*serverMetrics, error) {
	m := &serverMetrics{
		spansReceived: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricNamespace, Subsystem: metricSubsystem, Name: "spans_received_total",
			Help: "Spans in decoded OTLP requests, valid or not.",
		}, []string{"transport"}),
		spansAccepted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricNamespace, Subsystem: metricSubsystem, Name: "spans_accepted_total",
			Help: "Spans committed to the store and acknowledged to the sender.",
		}, []string{"transport"}),
		spansRejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricNamespace, Subsystem: metricSubsystem, Name: "spans_rejected_total",
			Help: "Invalid spans left out of a request and reported in its partial_success, by reason.",
		}, []string{"reason"}),
		spansRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricNamespace, Subsystem: metricSubsystem, Name: "spans_refused_total",
			Help: "Valid spans not stored because the request was refused with a retryable status, by reason.",
		}, []string{"reason"}),
		requestsShed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricNamespace, Subsystem: metricSubsystem, Name: "requests_shed_total",
			Help: "Requests refused as overloaded before decoding, because the write-ahead log had no room for them (their spans are not in spans_refused_total: they were never counted).",
		}, []string{"transport"}),
		requestBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricNamespace, Subsystem: metricSubsystem, Name: "request_bytes_total",
			Help: "OTLP request body bytes as received (form=wire, compressed when the sender compressed) and after decompression (form=decoded).",
		}, []string{"transport", "form"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metricNamespace, Subsystem: metricSubsystem, Name: "request_duration_seconds",
			Help:    "Time from receiving an OTLP request to answering it, commit included, by transport and outcome.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"transport", "outcome"}),
		valuesTruncated: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metricNamespace, Subsystem: metricSubsystem, Name: "attribute_values_truncated_total",
			Help: "Attribute values and status messages cut to limits.max_attr_value_bytes.",
		}),
		truncated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricNamespace, Subsystem: metricSubsystem, Name: "strings_truncated_total",
			Help: "Attribute keys cut to limits.max_attr_key_bytes (what=attribute_key) and names, scope fields and trace states cut to limits.max_name_bytes (what=name).",
		}, []string{"what"}),
		stringsRepaired: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metricNamespace, Subsystem: metricSubsystem, Name: "strings_repaired_total",
			Help: "Strings whose invalid UTF-8 was replaced.",
		}),
		inflightBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: metricNamespace, Subsystem: metricSubsystem, Name: "in_flight_bytes",
			Help: "Request memory held now (ingest.max_in_flight_bytes): HTTP bodies being read, and requests being processed at what they take decoded.",
		}),
		grpcStreams: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: metricNamespace, Subsystem: metricSubsystem, Name: "grpc_streams",
			Help: "OTLP/gRPC streams open now, those still receiving their message included.",
		}),
		receiveTimeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricNamespace, Subsystem: metricSubsystem, Name: "receive_timeouts_total",
			Help: "Requests cut off because their body or message did not arrive within ingest.http.read_timeout or ingest.grpc.receive_timeout.",
		}, []string{"transport"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricNamespace, Subsystem: metricSubsystem, Name: "dropped_total",
			Help: "Attributes, events and links dropped by the per-span count limits, by item.",
		}, []string{"item"}),
	}
	// Create every series of the closed label sets up front, so rates and
	// alerts see a zero rather than no series before the first event.
	for _, tr := range []string{transportGRPC, transportHTTP} {
		m.spansReceived.WithLabelValues(tr)
		m.spansAccepted.WithLabelValues(tr)
		m.requestsShed.WithLabelValues(tr)
		m.receiveTimeouts.WithLabelValues(tr)
		m.requestBytes.WithLabelValues(tr, "wire")
		m.requestBytes.WithLabelValues(tr, "decoded")
	}
	for _, r := range []string{"zero_trace_id", "zero_span_id", "end_before_start", "outside_time_window"} {
		m.spansRejected.WithLabelValues(r)
	}
	for _, r := range []string{refusedOverloaded, refusedUnavailable, refusedShutdown, refusedCanceled} {
		m.spansRefused.WithLabelValues(r)
	}
	for _, it := range []string{"attributes", "events", "links"} {
		m.dropped.WithLabelValues(it)
	}
	for _, w := range []string{"attribute_key", "name"} {
		m.truncated.WithLabelValues(w)
	}
	err := register(reg, m.spansReceived, m.spansAccepted, m.spansRejected, m.spansRefused, m.requestsShed,
		m.requestBytes, m.requestDuration, m.valuesTruncated, m.truncated, m.stringsRepaired, m.dropped, m.inflightBytes, m.grpcStreams, m.receiveTimeouts)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// converted records what a conversion found.
func (m *serverMetrics) converted(transport string, received int, st Stats) {
	m.spansReceived.WithLabelValues(transport).Add(float64(received))
	addIf(m.spansRejected.WithLabelValues("zero_trace_id"), st.RejectedZeroTraceID)
	addIf(m.spansRejected.WithLabelValues("zero_span_id"), st.RejectedZeroSpanID)
	addIf(m.spansRejected.WithLabelValues("end_before_start"), st.RejectedEndBeforeStart)
	addIf(m.spansRejected.WithLabelValues("outside_time_window"), st.RejectedOutsideWindow)
	addIf(m.valuesTruncated, st.TruncatedValues)
	addIf(m.truncated.WithLabelValues("attribute_key"), st.TruncatedKeys)
	addIf(m.truncated.WithLabelValues("name"), st.TruncatedNames)
	addIf(m.stringsRepaired, st.RepairedStrings)
	addIf(m.dropped.WithLabelValues("attributes"), st.DroppedAttrs)
	addIf(m.dropped.WithLabelValues("events"), st.DroppedEvents)
	addIf(m.dropped.WithLabelValues("links"), st.DroppedLinks)
}

func addIf(c prometheus.Counter, n int) {
	if n > 0 {
		c.Add(float64(n))
	}
}

// register registers every collector, or none: on a failure the ones
// already registered are unregistered again.
func register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return fmt.Errorf("register ingest metrics: %w", err)
		}
	}
	return nil
}

// registerer returns reg, or a private registry when reg is nil so that a
// component built without one (a test, a tool) still counts without
// touching the process-wide default registry.
func registerer(reg prometheus.Registerer) prometheus.Registerer {
	if reg == nil {
		return prometheus.NewRegistry()
	}
	return reg
}
