package translatetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The Zipkin v2 span as zipkin-go's model.SpanModel encodes it.
type (
	zipkinSpan struct {
		TraceID        string             `json:"traceId"`
		ID             string             `json:"id"`
		ParentID       string             `json:"parentId,omitempty"`
		Name           string             `json:"name,omitempty"`
		Kind           string             `json:"kind,omitempty"`
		Timestamp      int64              `json:"timestamp,omitempty"`
		Duration       int64              `json:"duration,omitempty"`
		LocalEndpoint  *zipkinEndpoint    `json:"localEndpoint,omitempty"`
		RemoteEndpoint *zipkinEndpoint    `json:"remoteEndpoint,omitempty"`
		Annotations    []zipkinAnnotation `json:"annotations,omitempty"`
		Tags           map[string]string  `json:"tags,omitempty"`
	}
	zipkinEndpoint struct {
		ServiceName string `json:"serviceName,omitempty"`
		IPv4        net.IP `json:"ipv4,omitempty"`
		IPv6        net.IP `json:"ipv6,omitempty"`
		Port        uint16 `json:"port,omitempty"`
	}
	zipkinAnnotation struct {
		Timestamp int64  `json:"timestamp"`
		Value     string `json:"value"`
	}
)

// ZipkinJSON writes td as the Collector's Zipkin exporter posts it: a JSON
// array of spans, every attribute a string tag, names lower-cased.
func ZipkinJSON(td ptrace.Traces) ([]byte, error) {
	out := []zipkinSpan{}
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		service, resTags := zipkinService(rs.Resource())
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			// extractScopeTags adds to the resource's tags, so a scope's
			// tags also reach the spans of the scopes after it.
			for k, v := range ss.Scope().Attributes().All() {
				resTags[k] = v.AsString()
			}
			if n := ss.Scope().Name(); n != "" {
				resTags["otel.library.name"] = n
			}
			if v := ss.Scope().Version(); v != "" {
				resTags["otel.library.version"] = v
			}
			spans := ss.Spans()
			for k := 0; k < spans.Len(); k++ {
				zs, err := zipkinSpanOf(spans.At(k), service, resTags)
				if err != nil {
					return nil, err
				}
				out = append(out, zs)
			}
		}
	}
	return json.Marshal(out)
}

// zipkinService is resourceToZipkinEndpointServiceNameAndAttributeMap.
func zipkinService(r pcommon.Resource) (string, map[string]string) {
	tags := map[string]string{}
	attrs := r.Attributes()
	if attrs.Len() == 0 {
		return "OTLPResourceNoServiceName", tags
	}
	for k, v := range attrs.All() {
		tags[k] = v.AsString()
	}
	for _, k := range []string{"service.name", "faas.name", "k8s.deployment.name", "process.executable.name"} {
		if v, ok := tags[k]; ok {
			delete(tags, k)
			if k != "service.name" {
				tags["otlp.service.name.source"] = k
			}
			return v, tags
		}
	}
	return "OTLPResourceNoServiceName", tags
}

// zipkinSpanOf is spanToZipkinSpan followed by zipkin-go's MarshalJSON.
func zipkinSpanOf(sp ptrace.Span, service string, resTags map[string]string) (zipkinSpan, error) {
	tags := make(map[string]string, len(resTags)+sp.Attributes().Len())
	for k, v := range resTags {
		tags[k] = v
	}
	for k, v := range sp.Attributes().All() {
		tags[k] = v.AsString()
	}
	if sp.TraceID().IsEmpty() {
		return zipkinSpan{}, errors.New("TraceID is invalid")
	}
	if sp.SpanID().IsEmpty() {
		return zipkinSpan{}, errors.New("SpanID is invalid")
	}
	zs := zipkinSpan{TraceID: jaegerTraceID(sp.TraceID()), ID: jaegerSpanID(sp.SpanID()), Name: strings.ToLower(sp.Name())}
	if ts := sp.TraceState().AsRaw(); ts != "" {
		tags["w3c.tracestate"] = ts
	}
	if !sp.ParentSpanID().IsEmpty() {
		zs.ParentID = jaegerSpanID(sp.ParentSpanID())
	}
	start := sp.StartTimestamp().AsTime()
	if start.Unix() != 0 {
		zs.Timestamp = start.Round(time.Microsecond).UnixNano() / 1e3
	}
	if sp.EndTimestamp() != 0 {
		d := time.Duration(sp.EndTimestamp() - sp.StartTimestamp())
		switch {
		case d < 0:
			return zipkinSpan{}, errors.New("valid duration required")
		case d > 0 && d < time.Microsecond:
			d = time.Microsecond
		default:
			d += 500 * time.Nanosecond
		}
		zs.Duration = d.Nanoseconds() / 1e3
	}
	switch sp.Kind() {
	case ptrace.SpanKindClient:
		zs.Kind = "CLIENT"
	case ptrace.SpanKindServer:
		zs.Kind = "SERVER"
	case ptrace.SpanKindProducer:
		zs.Kind = "PRODUCER"
	case ptrace.SpanKindConsumer:
		zs.Kind = "CONSUMER"
	case ptrace.SpanKindInternal:
		tags["span.kind"] = "internal"
	}

	redundant := map[string]bool{}
	zs.LocalEndpoint = zipkinEndpointOf(tags, service, false, redundant)
	zs.RemoteEndpoint = zipkinEndpointOf(tags, "", true, redundant)
	for k := range redundant {
		delete(tags, k)
	}

	st := sp.Status()
	if st.Code() == ptrace.StatusCodeError {
		tags["error"] = "true"
	} else {
		delete(tags, "error")
	}
	if st.Code() != ptrace.StatusCodeUnset {
		tags["otel.status_code"] = map[ptrace.StatusCode]string{ptrace.StatusCodeOk: "Ok", ptrace.StatusCodeError: "Error"}[st.Code()]
		if st.Message() != "" {
			tags["otel.status_description"] = st.Message()
		}
	}
	if v, ok := tags["http.response.status_code"]; ok {
		if _, has := tags["http.status_code"]; !has {
			tags["http.status_code"] = v
		}
	}

	events := sp.Events()
	for i := 0; i < events.Len(); i++ {
		e := events.At(i)
		a := zipkinAnnotation{Timestamp: e.Timestamp().AsTime().Round(time.Microsecond).UnixNano() / 1e3, Value: e.Name()}
		if e.Attributes().Len() > 0 || e.DroppedAttributesCount() > 0 {
			attrs, err := json.Marshal(e.Attributes().AsRaw())
			if err != nil {
				return zipkinSpan{}, err
			}
			a.Value = fmt.Sprintf("%s|%s|%d", e.Name(), attrs, e.DroppedAttributesCount())
		}
		zs.Annotations = append(zs.Annotations, a)
	}
	links := sp.Links()
	for i := 0; i < links.Len(); i++ {
		l := links.At(i)
		attrs, err := json.Marshal(l.Attributes().AsRaw())
		if err != nil {
			return zipkinSpan{}, err
		}
		tags["otlp.link."+strconv.Itoa(i)] = fmt.Sprintf("%s|%s|%s|%s|%d", hexOrEmpty(l.TraceID()), hexOrEmpty(l.SpanID()),
			l.TraceState().AsRaw(), attrs, l.DroppedAttributesCount())
	}
	zs.Tags = tags
	return zs, nil
}

// zipkinEndpointOf is zipkinEndpointFromTags with v0.161.0's default
// feature gates: the addresses come from network.local.address and
// network.peer.address only, the remote service from service.peer.name or
// peer.service.
func zipkinEndpointOf(tags map[string]string, service string, remote bool, redundant map[string]bool) *zipkinEndpoint {
	ipKey, portKey := "network.local.address", "net.host.port"
	if remote {
		ipKey, portKey = "network.peer.address", "net.peer.port"
		for _, k := range []string{"service.peer.name", "peer.service"} {
			if v, ok := tags[k]; ok {
				service = v
				redundant[k] = true
				break
			}
		}
	}
	var ip net.IP
	ipv6 := false
	if v, ok := tags[ipKey]; ok {
		ipv6 = strings.Contains(v, ":")
		ip = net.ParseIP(v)
		redundant[ipKey] = true
	}
	var port uint64
	if v, ok := tags[portKey]; ok {
		port, _ = strconv.ParseUint(v, 10, 16)
		redundant[portKey] = true
	}
	if service == "" && ip == nil {
		return nil
	}
	e := &zipkinEndpoint{ServiceName: strings.ToLower(service), Port: uint16(port)}
	if ipv6 {
		e.IPv6 = ip
	} else {
		e.IPv4 = ip
	}
	if e.ServiceName == "" && e.Port == 0 && len(e.IPv4) == 0 && len(e.IPv6) == 0 {
		return nil
	}
	return e
}

func hexOrEmpty[ID interface{ IsEmpty() bool }](id ID) string {
	if id.IsEmpty() {
		return ""
	}
	switch v := any(id).(type) {
	case pcommon.TraceID:
		return fmt.Sprintf("%x", v[:])
	case pcommon.SpanID:
		return fmt.Sprintf("%x", v[:])
	}
	return ""
}
