package translatetest

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Jaeger's UI model (internal/uimodel), as its query service writes it.
type (
	jaegerResponse struct {
		Data   []*jaegerTrace `json:"data"`
		Total  int            `json:"total"`
		Limit  int            `json:"limit"`
		Offset int            `json:"offset"`
		Errors []any          `json:"errors"`
	}
	jaegerTrace struct {
		TraceID   string                   `json:"traceID"`
		Spans     []jaegerSpan             `json:"spans"`
		Processes map[string]jaegerProcess `json:"processes"`
		Warnings  []string                 `json:"warnings"`
	}
	jaegerProcess struct {
		ServiceName string     `json:"serviceName"`
		Tags        []jaegerKV `json:"tags"`
	}
	jaegerKV struct {
		Key   string `json:"key"`
		Type  string `json:"type"`
		Value any    `json:"value"`
	}
	jaegerSpan struct {
		TraceID       string      `json:"traceID"`
		SpanID        string      `json:"spanID"`
		OperationName string      `json:"operationName"`
		References    []jaegerRef `json:"references"`
		StartTime     uint64      `json:"startTime"`
		Duration      uint64      `json:"duration"`
		Tags          []jaegerKV  `json:"tags"`
		Logs          []jaegerLog `json:"logs"`
		ProcessID     string      `json:"processID"`
		Warnings      []string    `json:"warnings"`
	}
	jaegerRef struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	}
	jaegerLog struct {
		Timestamp uint64     `json:"timestamp"`
		Fields    []jaegerKV `json:"fields"`
	}
)

// JaegerJSON writes td as Jaeger's query service answers GET /api/traces:
// one trace object per trace id, in order of first appearance, each with
// its processes p1, p2, …
func JaegerJSON(td ptrace.Traces) ([]byte, error) {
	resp := jaegerResponse{Data: []*jaegerTrace{}}
	traces := map[pcommon.TraceID]*jaegerTrace{}
	processIDs := map[*jaegerTrace]map[string]string{}
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		process, err := jaegerProcessOf(rs.Resource())
		if err != nil {
			return nil, err
		}
		pkey, err := json.Marshal(process)
		if err != nil {
			return nil, err
		}
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			spans := ss.Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				tr := traces[sp.TraceID()]
				if tr == nil {
					tr = &jaegerTrace{TraceID: jaegerTraceID(sp.TraceID()), Processes: map[string]jaegerProcess{}}
					traces[sp.TraceID()] = tr
					processIDs[tr] = map[string]string{}
					resp.Data = append(resp.Data, tr)
				}
				pid, ok := processIDs[tr][string(pkey)]
				if !ok {
					pid = fmt.Sprintf("p%d", len(tr.Processes)+1)
					processIDs[tr][string(pkey)] = pid
					tr.Processes[pid] = process
				}
				js, err := jaegerSpanOf(sp, ss.Scope())
				if err != nil {
					return nil, fmt.Errorf("span %s: %w", sp.SpanID(), err)
				}
				js.ProcessID = pid
				tr.Spans = append(tr.Spans, js)
			}
		}
	}
	return json.MarshalIndent(resp, "", "  ")
}

// jaegerProcessOf is resourceToJaegerProtoProcess.
func jaegerProcessOf(r pcommon.Resource) (jaegerProcess, error) {
	attrs := r.Attributes()
	if attrs.Len() == 0 {
		return jaegerProcess{ServiceName: "OTLPResourceNoServiceName", Tags: []jaegerKV{}}, nil
	}
	p := jaegerProcess{Tags: []jaegerKV{}}
	if v, ok := attrs.Get("service.name"); ok {
		p.ServiceName = v.Str()
	}
	for k, v := range attrs.All() {
		if k == "service.name" {
			continue
		}
		kv, err := jaegerTag(k, v)
		if err != nil {
			return p, err
		}
		p.Tags = append(p.Tags, kv)
	}
	return p, nil
}

// jaegerSpanOf is spanToJaegerProto followed by the UI model's
// convertSpan.
func jaegerSpanOf(sp ptrace.Span, sc pcommon.InstrumentationScope) (jaegerSpan, error) {
	start := uint64(sp.StartTimestamp())
	js := jaegerSpan{
		TraceID:       jaegerTraceID(sp.TraceID()),
		SpanID:        jaegerSpanID(sp.SpanID()),
		OperationName: sp.Name(),
		References:    jaegerRefs(sp),
		StartTime:     start / 1000,
		Duration:      (uint64(sp.EndTimestamp()) - start) / 1000,
		Tags:          []jaegerKV{},
		Logs:          []jaegerLog{},
	}
	if sc.Name() != "" {
		js.Tags = append(js.Tags, jaegerKV{Key: "otel.scope.name", Type: "string", Value: sc.Name()})
	}
	if sc.Version() != "" {
		js.Tags = append(js.Tags, jaegerKV{Key: "otel.scope.version", Type: "string", Value: sc.Version()})
	}
	for k, v := range sp.Attributes().All() {
		kv, err := jaegerTag(k, v)
		if err != nil {
			return js, err
		}
		js.Tags = append(js.Tags, kv)
	}
	if kind := jaegerKindTag(sp.Kind()); kind != "" {
		js.Tags = append(js.Tags, jaegerKV{Key: "span.kind", Type: "string", Value: kind})
	}
	switch sp.Status().Code() {
	case ptrace.StatusCodeError:
		js.Tags = append(js.Tags, jaegerKV{Key: "otel.status_code", Type: "string", Value: "ERROR"},
			jaegerKV{Key: "error", Type: "bool", Value: true})
	case ptrace.StatusCodeOk:
		js.Tags = append(js.Tags, jaegerKV{Key: "otel.status_code", Type: "string", Value: "OK"})
	}
	if msg := sp.Status().Message(); msg != "" {
		js.Tags = append(js.Tags, jaegerKV{Key: "otel.status_description", Type: "string", Value: msg})
	}
	if ts := sp.TraceState().AsRaw(); ts != "" {
		js.Tags = append(js.Tags, jaegerKV{Key: "w3c.tracestate", Type: "string", Value: ts})
	}
	events := sp.Events()
	for i := 0; i < events.Len(); i++ {
		e := events.At(i)
		l := jaegerLog{Timestamp: uint64(e.Timestamp()) / 1000, Fields: []jaegerKV{}}
		if _, has := e.Attributes().Get("event"); e.Name() != "" && !has {
			l.Fields = append(l.Fields, jaegerKV{Key: "event", Type: "string", Value: e.Name()})
		}
		for k, v := range e.Attributes().All() {
			kv, err := jaegerTag(k, v)
			if err != nil {
				return js, err
			}
			l.Fields = append(l.Fields, kv)
		}
		js.Logs = append(js.Logs, l)
	}
	return js, nil
}

// jaegerRefs is makeJaegerProtoReferences: the parent first as CHILD_OF,
// then the links, FOLLOWS_FROM unless their opentracing.ref_type says
// child_of; a link to the parent retypes the parent's reference.
func jaegerRefs(sp ptrace.Span) []jaegerRef {
	refs := []jaegerRef{}
	traceID := jaegerTraceID(sp.TraceID())
	parent := sp.ParentSpanID()
	if !parent.IsEmpty() {
		refs = append(refs, jaegerRef{RefType: "CHILD_OF", TraceID: traceID, SpanID: jaegerSpanID(parent)})
	}
	links := sp.Links()
	for i := 0; i < links.Len(); i++ {
		l := links.At(i)
		refType := "FOLLOWS_FROM"
		if v, ok := l.Attributes().Get("opentracing.ref_type"); ok && v.Str() == "child_of" {
			refType = "CHILD_OF"
		}
		if !parent.IsEmpty() && l.TraceID() == sp.TraceID() && l.SpanID() == parent {
			refs[0].RefType = refType
			continue
		}
		refs = append(refs, jaegerRef{RefType: refType, TraceID: jaegerTraceID(l.TraceID()), SpanID: jaegerSpanID(l.SpanID())})
	}
	return refs
}

// jsMaxSafeInteger bounds the integers Jaeger's UI model writes as JSON
// numbers; larger ones it writes as strings.
const jsMaxSafeInteger = 1<<53 - 1

// jaegerTag is attributeToJaegerProtoTag followed by the UI model's
// convertKeyValues.
func jaegerTag(key string, v pcommon.Value) (jaegerKV, error) {
	kv := jaegerKV{Key: key, Type: "string"}
	switch v.Type() {
	case pcommon.ValueTypeStr:
		kv.Value = v.Str()
	case pcommon.ValueTypeInt:
		kv.Type, kv.Value = "int64", v.Int()
		if n := v.Int(); n > jsMaxSafeInteger || n < -jsMaxSafeInteger {
			kv.Value = fmt.Sprint(n)
		}
	case pcommon.ValueTypeBool:
		kv.Type, kv.Value = "bool", v.Bool()
	case pcommon.ValueTypeDouble:
		if math.IsNaN(v.Double()) || math.IsInf(v.Double(), 0) {
			return kv, fmt.Errorf("attribute %s: JSON has no %v", key, v.Double())
		}
		kv.Type, kv.Value = "float64", v.Double()
	case pcommon.ValueTypeBytes:
		kv.Type, kv.Value = "binary", v.Bytes().AsRaw()
	case pcommon.ValueTypeMap, pcommon.ValueTypeSlice:
		kv.Value = v.AsString()
	default:
		kv.Value = ""
	}
	return kv, nil
}

func jaegerKindTag(k ptrace.SpanKind) string {
	switch k {
	case ptrace.SpanKindClient:
		return "client"
	case ptrace.SpanKindServer:
		return "server"
	case ptrace.SpanKindProducer:
		return "producer"
	case ptrace.SpanKindConsumer:
		return "consumer"
	case ptrace.SpanKindInternal:
		return "internal"
	}
	return ""
}

// jaegerTraceID is Jaeger's TraceID.String: 16 digits when the high half
// is zero.
func jaegerTraceID(id pcommon.TraceID) string {
	if binary.BigEndian.Uint64(id[:8]) == 0 {
		return fmt.Sprintf("%016x", binary.BigEndian.Uint64(id[8:]))
	}
	return strings.ToLower(id.String())
}

func jaegerSpanID(id pcommon.SpanID) string {
	return fmt.Sprintf("%016x", binary.BigEndian.Uint64(id[:]))
}
