package translatetest

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/budgetd/budgetd/ingest/translate"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// losses collects the reasons a trip through a format changes a trace.
type losses map[string]bool

func (l losses) add(format string, args ...any) { l[fmt.Sprintf(format, args...)] = true }

func (l losses) list() []string {
	out := make([]string, 0, len(l))
	for r := range l {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// headerPrefixes are the attributes package translate turns back into
// string arrays.
var headerPrefixes = []string{"http.request.header.", "http.response.header.", "rpc.request.metadata.", "rpc.response.metadata."}

// jaegerReserved are span attributes Jaeger's translator reads as
// something else (kind, status, scope, trace state).
var jaegerReserved = []string{"span.kind", "error", "otel.status_code", "otel.status_description", "w3c.tracestate",
	"otel.scope.name", "otel.scope.version"}

// zipkinReserved are span attributes the Zipkin exporter or translator
// moves, renames or reads as something else.
var zipkinReserved = []string{"span.kind", "error", "otel.status_code", "otel.status_description", "w3c.tracestate",
	"otel.scope.name", "otel.scope.version", "otel.library.name", "otel.library.version", "otlp.service.name.source",
	"service.peer.name", "network.local.address", "network.peer.address", "net.host.port", "net.peer.port",
	"net.host.ip", "net.peer.ip", "otel.zipkin.absentField.startTime"}

// zipkinResourceKeys are the resource attributes Zipkin carries back to the
// resource (translate's zipkinResourceTags, v0.161.0's list).
var zipkinResourceKeys = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range strings.Fields(`cloud.provider cloud.account.id cloud.region cloud.availability_zone cloud.platform
		aws.ecs.container.arn aws.ecs.cluster.arn aws.ecs.launchtype aws.ecs.task.arn aws.ecs.task.family
		aws.ecs.task.revision aws.eks.cluster.arn aws.log.group.names aws.log.group.arns aws.log.stream.names
		aws.log.stream.arns container.name container.id container.runtime container.image.name container.image.tag
		deployment.environment device.id device.model.identifier device.model.name device.manufacturer faas.name
		faas.id cloud.resource_id faas.version faas.instance faas.max_memory host.id host.name host.type host.arch
		host.image.name host.image.id host.image.version k8s.cluster.name k8s.node.name k8s.node.uid
		k8s.namespace.name k8s.pod.uid k8s.pod.name k8s.container.name k8s.container.restart_count
		k8s.replicaset.uid k8s.replicaset.name k8s.deployment.uid k8s.deployment.name k8s.statefulset.uid
		k8s.statefulset.name k8s.daemonset.uid k8s.daemonset.name k8s.job.uid k8s.job.name k8s.cronjob.uid
		k8s.cronjob.name os.type os.description os.name os.version process.pid process.executable.name
		process.executable.path process.command process.command_line process.command_args process.owner
		process.runtime.name process.runtime.version process.runtime.description service.name service.namespace
		service.instance.id service.version telemetry.sdk.name telemetry.sdk.language telemetry.sdk.version
		telemetry.auto.version webengine.name webengine.version webengine.description`) {
		m[k] = true
	}
	return m
}()

// JaegerLosses says, one sentence per kind of loss, what of td a trip
// through JaegerJSON and translate.Jaeger changes; nil when nothing.
func JaegerLosses(td ptrace.Traces) []string {
	l := losses{}
	walk(td, l, func(where string, m pcommon.Map) { typeLosses(l, where, m, false) })
	translate.EachSpan(td, func(rs ptrace.ResourceSpans, ss ptrace.ScopeSpans, sp ptrace.Span) {
		if ss.Scope().Attributes().Len() > 0 {
			l.add("scope attributes (Jaeger has none)")
		}
		for _, k := range jaegerReserved {
			if _, ok := sp.Attributes().Get(k); ok {
				l.add("a span attribute %s, which Jaeger reads as the span's kind, status, scope or trace state", k)
			}
		}
		if _, ok := sp.Attributes().Get("http.status_code"); ok && sp.Status().Code() == ptrace.StatusCodeUnset {
			l.add("http.status_code on a span with an unset status (Jaeger derives the status from it)")
		}
		if sp.Status().Code() == ptrace.StatusCodeUnset && sp.Status().Message() != "" {
			l.add("a status message with an unset status")
		}
		for _, k := range []string{"hostname", "jaeger.version"} {
			if _, ok := rs.Resource().Attributes().Get(k); ok {
				l.add("a resource attribute %s (Jaeger's translator renames it)", k)
			}
		}
		for i := 0; i < sp.Events().Len(); i++ {
			e := sp.Events().At(i)
			if e.Name() == "" {
				l.add("an event without a name (read back as \"log\")")
			}
			if _, ok := e.Attributes().Get("event"); ok {
				l.add("an event attribute named event (Jaeger's field for the event name)")
			}
		}
		for i := 0; i < sp.Links().Len(); i++ {
			lk := sp.Links().At(i)
			if lk.TraceState().AsRaw() != "" {
				l.add("a link with a trace state")
			}
			for k := range lk.Attributes().All() {
				if k != "opentracing.ref_type" {
					l.add("a link with attributes (Jaeger references have none)")
				}
			}
			if lk.SpanID() == sp.ParentSpanID() && lk.TraceID() == sp.TraceID() {
				l.add("a link to the span's parent (one reference in Jaeger)")
			}
		}
	})
	return l.list()
}

// ZipkinLosses says what of td a trip through ZipkinJSON and
// translate.Zipkin changes, beyond what budgetd's detectors are known not
// to mind: attribute types (every tag is a string; budgetd reads numbers
// and booleans from strings) and the case of span and service names
// (zipkin-go lower-cases them; compare findings with foldCase).
func ZipkinLosses(td ptrace.Traces) []string {
	l := losses{}
	walk(td, l, func(where string, m pcommon.Map) { typeLosses(l, where, m, true) })
	names := map[string]string{}
	sameFold := func(what, name string) {
		lower := strings.ToLower(name)
		if prev, ok := names[what+lower]; ok && prev != name {
			l.add("%s names that differ only in case (%q, %q), which Zipkin lower-cases", what, prev, name)
		}
		names[what+lower] = name
	}
	translate.EachSpan(td, func(rs ptrace.ResourceSpans, ss ptrace.ScopeSpans, sp ptrace.Span) {
		res := rs.Resource().Attributes()
		if _, ok := res.Get("service.name"); !ok {
			l.add("a resource without service.name")
		}
		for k := range res.All() {
			if !zipkinResourceKeys[k] {
				l.add("a resource attribute %s, which Zipkin moves to the spans", k)
			}
		}
		if ss.Scope().Attributes().Len() > 0 {
			l.add("scope attributes (Zipkin moves them to the spans)")
		}
		for _, k := range zipkinReserved {
			if _, ok := sp.Attributes().Get(k); ok {
				l.add("a span attribute %s, which the Zipkin exporter or translator moves or reads as something else", k)
			}
		}
		for k := range sp.Attributes().All() {
			if strings.HasPrefix(k, "otlp.link.") {
				l.add("a span attribute %s (the Zipkin exporter's tag for links)", k)
			}
		}
		if sp.Status().Code() == ptrace.StatusCodeUnset && sp.Status().Message() != "" {
			l.add("a status message with an unset status")
		}
		if sp.StartTimestamp() != 0 && sp.StartTimestamp().AsTime().Unix() == 0 {
			l.add("a span starting in the first second of 1970 (Zipkin's missing timestamp)")
		}
		if sp.Links().Len() > 128 {
			l.add("more than 128 links")
		}
		if v, ok := res.Get("service.name"); ok {
			sameFold("service", v.Str())
		}
		sameFold("span", sp.Name())
		for i := 0; i < sp.Events().Len(); i++ {
			e := sp.Events().At(i)
			if strings.Contains(e.Name(), "|") {
				l.add("an event name with a |, the Zipkin exporter's separator")
			}
			eventAttrLosses(l, "event", e.Attributes())
		}
		for i := 0; i < sp.Links().Len(); i++ {
			eventAttrLosses(l, "link", sp.Links().At(i).Attributes())
		}
	})
	return l.list()
}

// eventAttrLosses: the Zipkin exporter writes event and link attributes as
// JSON and the translator reads back strings, booleans and numbers only,
// a whole number as an integer.
func eventAttrLosses(l losses, what string, m pcommon.Map) {
	for k, v := range m.All() {
		switch v.Type() {
		case pcommon.ValueTypeStr, pcommon.ValueTypeBool, pcommon.ValueTypeInt:
		case pcommon.ValueTypeDouble:
			if v.Double() == math.Trunc(v.Double()) {
				l.add("a whole-number double %s attribute %s (read back as an integer)", what, k)
			}
		default:
			l.add("a %s %s attribute %s (dropped on the way back)", strings.ToLower(v.Type().String()), what, k)
		}
	}
}

// typeLosses checks the attributes at where for values neither format has:
// maps, arrays (but header arrays of strings, which translate restores),
// empty values, JSON-less doubles, and for Zipkin bytes.
func typeLosses(l losses, where string, m pcommon.Map, zipkin bool) {
	for k, v := range m.All() {
		switch v.Type() {
		case pcommon.ValueTypeMap:
			l.add("a map %s attribute %s (written as its JSON text)", where, k)
		case pcommon.ValueTypeSlice:
			if !isHeader(k) || !allStrings(v.Slice()) {
				l.add("an array %s attribute %s (written as its JSON text)", where, k)
			}
		case pcommon.ValueTypeEmpty:
			l.add("an empty %s attribute %s (read back as \"\")", where, k)
		case pcommon.ValueTypeDouble:
			if math.IsNaN(v.Double()) || math.IsInf(v.Double(), 0) {
				l.add("a %v %s attribute %s (JSON has no such number)", v.Double(), where, k)
			}
		case pcommon.ValueTypeBytes:
			if zipkin {
				l.add("a bytes %s attribute %s (a base64 string in Zipkin)", where, k)
			}
		}
	}
}

func isHeader(key string) bool {
	for _, p := range headerPrefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

func allStrings(s pcommon.Slice) bool {
	for i := 0; i < s.Len(); i++ {
		if s.At(i).Type() != pcommon.ValueTypeStr {
			return false
		}
	}
	return true
}

// walk calls f with every attribute map of td and checks the times both
// formats keep in whole microseconds.
func walk(td ptrace.Traces, l losses, f func(where string, m pcommon.Map)) {
	translate.EachSpan(td, func(rs ptrace.ResourceSpans, _ ptrace.ScopeSpans, sp ptrace.Span) {
		f("resource", rs.Resource().Attributes())
		f("span", sp.Attributes())
		if sp.StartTimestamp()%1000 != 0 || sp.EndTimestamp()%1000 != 0 {
			l.add("a span time that is not a whole microsecond")
		}
		for i := 0; i < sp.Events().Len(); i++ {
			e := sp.Events().At(i)
			f("event", e.Attributes())
			if e.Timestamp()%1000 != 0 {
				l.add("an event time that is not a whole microsecond")
			}
		}
		for i := 0; i < sp.Links().Len(); i++ {
			f("link", sp.Links().At(i).Attributes())
		}
	})
}
