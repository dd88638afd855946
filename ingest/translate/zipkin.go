package translate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"sort"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The Zipkin v2 span model (zipkin.io's zipkin2-api.yaml, as zipkin-go's
// model.SpanModel decodes it).
type (
	zipkinSpan struct {
		TraceID        string             `json:"traceId"`
		ID             string             `json:"id"`
		ParentID       string             `json:"parentId"`
		Name           string             `json:"name"`
		Kind           string             `json:"kind"`
		Timestamp      json.RawMessage    `json:"timestamp"` // µs since the epoch
		Duration       json.RawMessage    `json:"duration"`  // µs
		Debug          bool               `json:"debug"`     // decoded to check its type; the Collector ignores it too
		Shared         bool               `json:"shared"`
		LocalEndpoint  *zipkinEndpoint    `json:"localEndpoint"`
		RemoteEndpoint *zipkinEndpoint    `json:"remoteEndpoint"`
		Annotations    []zipkinAnnotation `json:"annotations"`
		Tags           map[string]string  `json:"tags"`
	}
	zipkinEndpoint struct {
		ServiceName string `json:"serviceName"`
		IPv4        string `json:"ipv4"`
		IPv6        string `json:"ipv6"`
		Port        uint16 `json:"port"`
	}
	zipkinAnnotation struct {
		Timestamp json.RawMessage `json:"timestamp"` // µs since the epoch
		Value     string          `json:"value"`
	}
)

// Tags and attributes of the Collector's Zipkin translator.
const (
	tagServiceNameSource = "otlp.service.name.source"
	tagLibraryName       = "otel.library.name"
	tagLibraryVersion    = "otel.library.version"
	tagLinkPrefix        = "otlp.link."
	maxZipkinLinks       = 128
	attrStartTimeAbsent  = "otel.zipkin.absentField.startTime"
)

// zipkinResourceTags are the tags the Collector's Zipkin translator moves
// from the spans to the resource (and never keeps on a span): the resource
// attributes of the semantic conventions, in the order of its list
// (to_translator.go, getResourceSemanticConventionAttributeNames, v0.161.0).
var zipkinResourceTags = [...]string{
	"cloud.provider", "cloud.account.id", "cloud.region", "cloud.availability_zone", "cloud.platform",
	"aws.ecs.container.arn", "aws.ecs.cluster.arn", "aws.ecs.launchtype", "aws.ecs.task.arn",
	"aws.ecs.task.family", "aws.ecs.task.revision", "aws.eks.cluster.arn", "aws.log.group.names",
	"aws.log.group.arns", "aws.log.stream.names", "aws.log.stream.arns",
	"container.name", "container.id", "container.runtime", "container.image.name", "container.image.tag",
	"deployment.environment",
	"device.id", "device.model.identifier", "device.model.name", "device.manufacturer",
	"faas.name", "faas.id", "cloud.resource_id", "faas.version", "faas.instance", "faas.max_memory",
	"host.id", "host.name", "host.type", "host.arch", "host.image.name", "host.image.id", "host.image.version",
	"k8s.cluster.name", "k8s.node.name", "k8s.node.uid", "k8s.namespace.name", "k8s.pod.uid", "k8s.pod.name",
	"k8s.container.name", "k8s.container.restart_count", "k8s.replicaset.uid", "k8s.replicaset.name",
	"k8s.deployment.uid", "k8s.deployment.name", "k8s.statefulset.uid", "k8s.statefulset.name",
	"k8s.daemonset.uid", "k8s.daemonset.name", "k8s.job.uid", "k8s.job.name", "k8s.cronjob.uid", "k8s.cronjob.name",
	"os.type", "os.description", "os.name", "os.version",
	"process.pid", "process.executable.name", "process.executable.path", "process.command",
	"process.command_line", "process.command_args", "process.owner", "process.runtime.name",
	"process.runtime.version", "process.runtime.description",
	"service.name", "service.namespace", "service.instance.id", "service.version",
	"telemetry.sdk.name", "telemetry.sdk.language", "telemetry.sdk.version", "telemetry.auto.version",
	"webengine.name", "webengine.version", "webengine.description",
}

// zipkinNonSpanTags are never span attributes: the resource tags, and the
// tags that carry the scope and the Collector's bookkeeping.
var zipkinNonSpanTags = func() map[string]bool {
	m := make(map[string]bool, len(zipkinResourceTags)+8)
	for _, k := range zipkinResourceTags {
		m[k] = true
	}
	for _, k := range []string{tagServiceNameSource, tagLibraryName, tagLibraryVersion, tagScopeName, tagScopeVersion,
		"opencensus.starttime", "opencensus.exporterversion", "opencensus.resourcetype"} {
		m[k] = true
	}
	return m
}()

// Zipkin translates a Zipkin v2 JSON array of spans into OTLP traces, as
// the Collector's zipkinv2 translator does:
//
//   - localEndpoint.serviceName becomes the resource's service.name, and
//     the tags that are resource attributes by the semantic conventions
//     (host.name, k8s.*, …) the resource's attributes;
//   - kind becomes the kind (the span.kind tag "internal" without one);
//     otel.status_code and otel.status_description the status, and an error
//     tag an error status;
//   - remoteEndpoint becomes peer.service, net.peer.ip and net.peer.port,
//     localEndpoint's address net.host.ip and net.host.port;
//   - annotations become events: the Collector's Zipkin exporter writes an
//     event with attributes as "name|{json attributes}|dropped count", which
//     is read back; any other annotation is an event without attributes;
//   - the otlp.link.N tags the exporter writes become links;
//   - every other tag is a string attribute (Zipkin tags are strings).
//
// Two things differ from the Collector, both for budgetd's detectors: an
// error tag holding text rather than "true" is also the status message when
// there is no otel.status_description (the OpenTelemetry SDKs' Zipkin
// exporters put the description there), and a shared SERVER span (Zipkin's
// "shared": true, one span id for both sides of an RPC) gets a span id of
// its own with the client span as its parent, as Jaeger's query service
// does, so that span ids stay unique within the trace.
//
// data must be valid JSON; errors name the span (counted from 1) and what
// is wrong with it.
func Zipkin(data []byte) (ptrace.Traces, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return ptrace.Traces{}, describeJSON(err)
	}
	spans := make([]zipkinParsed, len(raw))
	for i := range raw {
		if err := spans[i].parse(raw[i]); err != nil {
			return ptrace.Traces{}, fmt.Errorf("span %d: %w", i+1, err)
		}
		raw[i] = nil
	}
	dedupeShared(spans)
	b := newBuilder()
	for i := range spans {
		if err := spans[i].translate(b); err != nil {
			return ptrace.Traces{}, fmt.Errorf("span %d: %w", i+1, err)
		}
	}
	return b.td, nil
}

// zipkinParsed is a decoded span with its ids and kind worked out, which
// is what dedupeShared needs to see all of before any span is translated.
type zipkinParsed struct {
	s                 zipkinSpan
	traceID           pcommon.TraceID
	spanID, parentID  pcommon.SpanID
	kind              ptrace.SpanKind
	start, end        uint64
	hasStart          bool
	localIP, remoteIP string
}

func (p *zipkinParsed) parse(raw json.RawMessage) error {
	s := &p.s
	if err := json.Unmarshal(raw, s); err != nil {
		return describeJSON(err)
	}
	var ok bool
	if p.traceID, ok = parseTraceID(s.TraceID); !ok {
		return fmt.Errorf("bad traceId %s", quote(s.TraceID))
	}
	if p.spanID, ok = parseSpanID(s.ID); !ok {
		return fmt.Errorf("bad id %s", quote(s.ID))
	}
	if s.ParentID != "" {
		parent, ok := parseSpanID(s.ParentID)
		if !ok {
			return fmt.Errorf("bad parentId %s", quote(s.ParentID))
		}
		// A span that names itself as its parent is a root
		// (zSpanToInternal).
		if parent != p.spanID {
			p.parentID = parent
		}
	}
	start, err := micros(s.Timestamp)
	if err != nil {
		return fmt.Errorf("bad timestamp: %w", err)
	}
	duration, err := micros(s.Duration)
	if err != nil {
		return fmt.Errorf("bad duration: %w", err)
	}
	if p.end, err = endOf(start, duration); err != nil {
		return err
	}
	p.start, p.hasStart = start, start != 0
	if p.localIP, err = endpointIP(s.LocalEndpoint); err != nil {
		return fmt.Errorf("localEndpoint: %w", err)
	}
	if p.remoteIP, err = endpointIP(s.RemoteEndpoint); err != nil {
		return fmt.Errorf("remoteEndpoint: %w", err)
	}
	p.kind = zipkinKind(s.Kind, s.Tags)
	return nil
}

// endpointIP returns an endpoint's address in Go's canonical form (the
// Collector writes net.IP.String()); IPv6 wins when both are set.
func endpointIP(e *zipkinEndpoint) (string, error) {
	if e == nil {
		return "", nil
	}
	ip := ""
	for _, a := range []struct{ name, v string }{{"ipv4", e.IPv4}, {"ipv6", e.IPv6}} {
		if a.v == "" {
			continue
		}
		parsed := net.ParseIP(a.v)
		if parsed == nil {
			return "", fmt.Errorf("bad %s %s", a.name, quote(a.v))
		}
		ip = parsed.String()
	}
	return ip, nil
}

// zipkinKind maps the kind; a span without one is internal when its
// span.kind tag says so (the Collector's exporter writes that tag for
// internal spans, which Zipkin has no kind for).
func zipkinKind(kind string, tags map[string]string) ptrace.SpanKind {
	switch strings.ToUpper(kind) {
	case "CLIENT":
		return ptrace.SpanKindClient
	case "SERVER":
		return ptrace.SpanKindServer
	case "PRODUCER":
		return ptrace.SpanKindProducer
	case "CONSUMER":
		return ptrace.SpanKindConsumer
	}
	if tags[tagSpanKind] == "internal" {
		return ptrace.SpanKindInternal
	}
	return ptrace.SpanKindUnspecified
}

// dedupeShared gives each SERVER span that shares its span id with a
// CLIENT span of the same trace (or says "shared" and shares it with any
// span) a new id, after the largest id the trace uses, and makes the
// client its parent; the spans that named the shared id as their parent
// were the server's children and follow it to the new id. This is Jaeger's
// SpanIDDeduper adjuster. The Collector's translator keeps the duplicate
// id, which would give budgetd two spans with one id: the detectors would
// see the server as its own client's sibling, and the store keeps one row
// per id.
func dedupeShared(spans []zipkinParsed) {
	byTrace := map[pcommon.TraceID][]int{}
	for i := range spans {
		byTrace[spans[i].traceID] = append(byTrace[spans[i].traceID], i)
	}
	for _, idx := range byTrace {
		if len(idx) < 2 {
			continue
		}
		uses := make(map[pcommon.SpanID]int, len(idx))
		clients := map[pcommon.SpanID]bool{}
		var maxID uint64
		for _, i := range idx {
			s := &spans[i]
			uses[s.spanID]++
			if s.kind == ptrace.SpanKindClient {
				clients[s.spanID] = true
			}
			maxID = max(maxID, spanIDUint(s.spanID))
		}
		renamed := map[pcommon.SpanID]pcommon.SpanID{}
		for _, i := range idx {
			s := &spans[i]
			if s.kind != ptrace.SpanKindServer || uses[s.spanID] < 2 || !(clients[s.spanID] || s.s.Shared) {
				continue
			}
			next := maxID
			var id pcommon.SpanID
			for {
				next++
				id = spanIDFromUint(next)
				if next != 0 && uses[id] == 0 {
					break
				}
			}
			maxID = next
			uses[id] = 1
			renamed[s.spanID] = id
			s.parentID, s.spanID = s.spanID, id
		}
		if len(renamed) == 0 {
			continue
		}
		for _, i := range idx {
			s := &spans[i]
			if id, ok := renamed[s.parentID]; ok && s.spanID != id {
				s.parentID = id
			}
		}
	}
}

func spanIDUint(id pcommon.SpanID) uint64 {
	var n uint64
	for _, b := range id {
		n = n<<8 | uint64(b)
	}
	return n
}

func spanIDFromUint(n uint64) pcommon.SpanID {
	var id pcommon.SpanID
	for i := len(id) - 1; i >= 0; i-- {
		id[i] = byte(n)
		n >>= 8
	}
	return id
}

// translate adds the span to b (zSpanToInternal).
func (p *zipkinParsed) translate(b *builder) error {
	s := &p.s
	tags := s.Tags
	if tags == nil {
		tags = map[string]string{}
	}
	localSvc := resourceNoServiceName
	if s.LocalEndpoint != nil && s.LocalEndpoint.ServiceName != "" {
		localSvc = s.LocalEndpoint.ServiceName
	}
	key, fill := zipkinResource(localSvc, tags)
	dest := b.span(key, fill, zipkinScope(tags))

	dest.SetTraceID(p.traceID)
	dest.SetSpanID(p.spanID)
	if v, ok := tags[tagW3CTraceState]; ok {
		dest.TraceState().FromRaw(v)
	}
	if !p.parentID.IsEmpty() {
		dest.SetParentSpanID(p.parentID)
	}
	dest.SetName(s.Name)
	dest.SetKind(p.kind)
	used := zipkinStatus(tags, dest.Status())
	used[tagW3CTraceState] = true
	if p.kind != ptrace.SpanKindClient && p.kind != ptrace.SpanKindServer && p.kind != ptrace.SpanKindProducer && p.kind != ptrace.SpanKindConsumer {
		used[tagSpanKind] = true
	}
	if err := zipkinLinks(tags, dest.Links(), used); err != nil {
		return err
	}

	attrs := dest.Attributes()
	keys := make([]string, 0, len(tags))
	for k := range tags {
		if !used[k] && !zipkinNonSpanTags[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	attrs.EnsureCapacity(len(keys) + 5)
	for _, k := range keys {
		PutString(attrs, k, tags[k])
	}
	if e := s.LocalEndpoint; e != nil {
		if p.localIP != "" {
			attrs.PutStr("net.host.ip", p.localIP)
		}
		if e.Port > 0 {
			attrs.PutInt("net.host.port", int64(e.Port))
		}
	}
	if e := s.RemoteEndpoint; e != nil {
		// peer.service, not the newer service.peer.name the Collector
		// writes since v0.147.0: budgetd finds a call's callee by
		// peer.service (docs/attributes.md).
		if e.ServiceName != "" {
			attrs.PutStr("peer.service", e.ServiceName)
		}
		if p.remoteIP != "" {
			attrs.PutStr("net.peer.ip", p.remoteIP)
		}
		if e.Port > 0 {
			attrs.PutInt("net.peer.port", int64(e.Port))
		}
	}

	// Zipkin allows a span without a timestamp; the Collector places it
	// at the epoch and says so in an attribute (setTimestampsV2).
	dest.SetStartTimestamp(pcommon.Timestamp(p.start))
	dest.SetEndTimestamp(pcommon.Timestamp(p.end))
	if !p.hasStart {
		attrs.PutBool(attrStartTimeAbsent, true)
	}
	return zipkinEvents(s.Annotations, dest.Events())
}

// zipkinResource returns the key and the attributes of a span's resource
// (populateResourceFromZipkinSpan): the local service under service.name,
// or under the key otlp.service.name.source names, and the resource tags.
// The Collector takes a service's resource from the first of its spans;
// the key here includes the tags, so spans of one service with different
// resource tags keep theirs.
func zipkinResource(service string, tags map[string]string) (string, func(pcommon.Resource)) {
	if service == resourceNoServiceName {
		return "", func(pcommon.Resource) {}
	}
	var key strings.Builder
	key.WriteString(service)
	key.WriteByte(0)
	key.WriteString(tags[tagServiceNameSource])
	for _, k := range zipkinResourceTags {
		if v, ok := tags[k]; ok {
			key.WriteByte(0)
			key.WriteString(k)
			key.WriteByte(0)
			key.WriteString(v)
		}
	}
	return key.String(), func(r pcommon.Resource) {
		attrs := r.Attributes()
		nameKey := attrServiceName
		if src := tags[tagServiceNameSource]; src != "" {
			nameKey = src
		}
		attrs.PutStr(nameKey, service)
		for _, k := range zipkinResourceTags {
			if v, ok := tags[k]; ok {
				attrs.PutStr(k, v)
			}
		}
	}
}

// zipkinScope reads the scope from otel.library.name/version, or the newer
// otel.scope.name/version (populateILFromZipkinSpan).
func zipkinScope(tags map[string]string) scope {
	name, ok := tags[tagScopeName]
	if !ok {
		name = tags[tagLibraryName]
	}
	if name == "" {
		return scope{}
	}
	var sc scope
	for _, k := range [...]string{tagLibraryName, tagScopeName} {
		if v, ok := tags[k]; ok {
			sc.name = v
		}
	}
	for _, k := range [...]string{tagLibraryVersion, tagScopeVersion} {
		if v, ok := tags[k]; ok {
			sc.version = v
		}
	}
	return sc
}

// zipkinStatus sets the status from the tags (populateSpanStatus) and
// returns the tags it consumed.
func zipkinStatus(tags map[string]string, st ptrace.Status) map[string]bool {
	used := map[string]bool{}
	if v, ok := tags[tagStatusCode]; ok {
		st.SetCode(zipkinStatusCode(v))
		used[tagStatusCode] = true
		if d, ok := tags[tagStatusDescription]; ok {
			st.SetMessage(d)
			used[tagStatusDescription] = true
		}
	}
	if v, ok := tags[tagError]; ok {
		st.SetCode(ptrace.StatusCodeError)
		if v == "true" {
			used[tagError] = true
		} else if st.Message() == "" {
			st.SetMessage(v)
		}
	}
	return used
}

// zipkinStatusCode reads otel.status_code. The Collector's exporter writes
// "Ok"/"Error", older versions STATUS_CODE_OK/STATUS_CODE_ERROR, and the
// OpenTelemetry SDKs OK/ERROR; the Collector reads the last as unset, which
// the error tag the SDKs also write then corrects.
func zipkinStatusCode(v string) ptrace.StatusCode {
	switch strings.TrimPrefix(strings.ToUpper(v), "STATUS_CODE_") {
	case "OK":
		return ptrace.StatusCodeOk
	case "ERROR":
		return ptrace.StatusCodeError
	}
	return ptrace.StatusCodeUnset
}

// zipkinLinks reads the links the Collector's exporter writes as tags
// otlp.link.0, otlp.link.1, …: "traceid|spanid|tracestate|{json
// attributes}|dropped count" (zTagsToSpanLinks).
func zipkinLinks(tags map[string]string, dest ptrace.SpanLinkSlice, used map[string]bool) error {
	for i := range maxZipkinLinks {
		key := tagLinkPrefix + strconv.Itoa(i)
		v, ok := tags[key]
		if !ok {
			return nil
		}
		used[key] = true
		parts := strings.Split(v, "|")
		if len(parts) < 5 {
			continue
		}
		var traceID pcommon.TraceID
		if !decodeExactHex(traceID[:], parts[0]) {
			return fmt.Errorf("tag %s: bad trace id %s", key, quote(parts[0]))
		}
		var spanID pcommon.SpanID
		if !decodeExactHex(spanID[:], parts[1]) {
			return fmt.Errorf("tag %s: bad span id %s", key, quote(parts[1]))
		}
		attrs, ok := jsonAttributes(strings.Join(parts[3:len(parts)-1], "|"))
		if !ok {
			return fmt.Errorf("tag %s: attributes are not a JSON object", key)
		}
		dropped, err := strconv.ParseUint(parts[len(parts)-1], 10, 32)
		if err != nil {
			return fmt.Errorf("tag %s: bad dropped attribute count %s", key, quote(parts[len(parts)-1]))
		}
		l := dest.AppendEmpty()
		l.SetTraceID(traceID)
		l.SetSpanID(spanID)
		l.TraceState().FromRaw(parts[2])
		attrs.MoveTo(l.Attributes())
		l.SetDroppedAttributesCount(uint32(dropped))
	}
	return nil
}

// decodeExactHex decodes an id written at its full length, or an empty one
// (the zero id), as the Collector's exporter writes link ids.
func decodeExactHex(dst []byte, s string) bool {
	return s == "" || (len(s) == 2*len(dst) && decodeHexID(dst, s))
}

// zipkinEvents turns annotations into events (populateSpanEvents).
func zipkinEvents(annos []zipkinAnnotation, dest ptrace.SpanEventSlice) error {
	dest.EnsureCapacity(len(annos))
	for i, a := range annos {
		ts, err := micros(a.Timestamp)
		if err != nil {
			return fmt.Errorf("annotations[%d]: bad timestamp: %w", i, err)
		}
		e := dest.AppendEmpty()
		e.SetTimestamp(pcommon.Timestamp(ts))
		name, attrs, dropped, ok := splitAnnotation(a.Value)
		if !ok {
			e.SetName(a.Value)
			continue
		}
		e.SetName(name)
		attrs.MoveTo(e.Attributes())
		e.SetDroppedAttributesCount(dropped)
	}
	return nil
}

// splitAnnotation reads the exporter's "name|{json attributes}|dropped"
// form. The Collector fails the whole request on an annotation with two
// "|" that is not in that form; free text from other tracers may well be,
// so such an annotation is an event named by its whole value instead.
func splitAnnotation(v string) (string, pcommon.Map, uint32, bool) {
	parts := strings.Split(v, "|")
	if len(parts) < 3 {
		return "", pcommon.Map{}, 0, false
	}
	dropped, err := strconv.ParseUint(parts[len(parts)-1], 10, 32)
	if err != nil {
		return "", pcommon.Map{}, 0, false
	}
	attrs, ok := jsonAttributes(strings.Join(parts[1:len(parts)-1], "|"))
	if !ok {
		return "", pcommon.Map{}, 0, false
	}
	return parts[0], attrs, uint32(dropped), true
}

// jsonAttributes decodes the exporter's JSON form of attributes
// (jsonMapToAttributeMap): strings, booleans and numbers, a whole number
// as an integer; arrays, maps and nulls are dropped. Keys are put in
// sorted order, since a JSON object has none the exporter kept.
func jsonAttributes(s string) (pcommon.Map, bool) {
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil || dec.More() {
		return pcommon.Map{}, false
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	attrs := pcommon.NewMap()
	attrs.EnsureCapacity(len(keys))
	for _, k := range keys {
		switch v := m[k].(type) {
		case string:
			attrs.PutStr(k, v)
		case bool:
			attrs.PutBool(k, v)
		case json.Number:
			if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
				attrs.PutInt(k, n)
			} else if f, err := strconv.ParseFloat(string(v), 64); err == nil {
				if f == math.Trunc(f) && math.Abs(f) < 1<<63 {
					attrs.PutInt(k, int64(f))
				} else {
					attrs.PutDouble(k, f)
				}
			}
		}
	}
	return attrs, true
}
