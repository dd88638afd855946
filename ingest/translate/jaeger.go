package translate

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The Jaeger JSON model, after Jaeger's internal/uimodel (the types its
// query service and UI write). Spans are decoded one at a time so an error
// can say which one is wrong.
type (
	jaegerFile struct {
		Data   []jaegerTrace `json:"data"`
		Errors []struct {
			Code int    `json:"code"`
			Msg  string `json:"msg"`
		} `json:"errors"`
		// A file may also hold one trace object, without the response
		// around it.
		jaegerTrace
	}
	jaegerTrace struct {
		TraceID   string                   `json:"traceID"`
		Spans     []json.RawMessage        `json:"spans"`
		Processes map[string]jaegerProcess `json:"processes"`
	}
	jaegerProcess struct {
		ServiceName string     `json:"serviceName"`
		Tags        []jaegerKV `json:"tags"`
	}
	jaegerKV struct {
		Key   string          `json:"key"`
		Type  string          `json:"type"`
		Value json.RawMessage `json:"value"`
	}
	jaegerSpan struct {
		TraceID       string          `json:"traceID"`
		SpanID        string          `json:"spanID"`
		ParentSpanID  string          `json:"parentSpanID"` // deprecated; older files
		OperationName string          `json:"operationName"`
		References    []jaegerRef     `json:"references"`
		StartTime     json.RawMessage `json:"startTime"` // µs since the epoch
		Duration      json.RawMessage `json:"duration"`  // µs
		Tags          []jaegerKV      `json:"tags"`
		Logs          []jaegerLog     `json:"logs"`
		ProcessID     string          `json:"processID"`
		// Process is set instead of ProcessID in the "embedded process"
		// form Jaeger writes to some storage backends.
		Process *jaegerProcess `json:"process"`
	}
	jaegerRef struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	}
	jaegerLog struct {
		Timestamp json.RawMessage `json:"timestamp"` // µs since the epoch
		Fields    []jaegerKV      `json:"fields"`
	}
)

// The Jaeger reference types.
const (
	refChildOf     = "CHILD_OF"
	refFollowsFrom = "FOLLOWS_FROM"
)

// Names the Jaeger translator reads or writes.
const (
	jaegerEventField = "event" // a log field naming the OTLP event
	// jaegerDefaultEventName names an event whose log has no event field.
	// The Collector leaves such events unnamed; a name says what it was.
	jaegerDefaultEventName = "log"
	attrRefType            = "opentracing.ref_type"
	tagHTTPStatusCode      = "http.status_code"
	tagHTTPStatusMessage   = "http.status_message"
)

// Jaeger translates a Jaeger JSON document (see the package comment) into
// OTLP traces, as the Collector's Jaeger translator does:
//
//   - a process becomes the resource: serviceName as service.name, its
//     tags as attributes (hostname as host.name);
//   - the span.kind tag becomes the kind; otel.status_code,
//     otel.status_description and error=true the status, http.status_code
//     the status only when neither is there (and stays an attribute);
//   - the parent is the first CHILD_OF reference within the trace, else the
//     first FOLLOWS_FROM one (Jaeger's own rule); every other reference,
//     and a FOLLOWS_FROM parent, is also a link carrying
//     opentracing.ref_type;
//   - logs become events named by their event field ("log" without one),
//     the other fields attributes (exception.* included);
//   - otel.scope.name and otel.scope.version become the scope and
//     w3c.tracestate the trace state.
//
// data must be valid JSON; errors name the trace and span (both counted
// from 1) and what is wrong with it.
func Jaeger(data []byte) (ptrace.Traces, error) {
	var file jaegerFile
	if err := json.Unmarshal(data, &file); err != nil {
		return ptrace.Traces{}, describeJSON(err)
	}
	traces := file.Data
	if file.Spans != nil {
		traces = append(traces, file.jaegerTrace)
	}
	if len(traces) == 0 && len(file.Errors) > 0 {
		// The query service's answer to a failed query: better said than
		// read as a file without spans.
		e := file.Errors[0]
		return ptrace.Traces{}, fmt.Errorf("the query answered with an error and no traces: %d %s", e.Code, e.Msg)
	}
	t := jaegerTranslator{b: newBuilder(), resources: map[string]pcommon.Map{}}
	for i := range traces {
		if err := t.trace(&traces[i]); err != nil {
			return ptrace.Traces{}, fmt.Errorf("trace %d %w", i+1, err)
		}
	}
	return t.b.td, nil
}

type jaegerTranslator struct {
	b *builder
	// resources holds the attributes of every process seen, by
	// processKey: traces repeat the same processes, and one resource per
	// process keeps their spans together.
	resources map[string]pcommon.Map
}

func (t *jaegerTranslator) trace(tr *jaegerTrace) error {
	for i, raw := range tr.Spans {
		if err := t.span(tr, raw); err != nil {
			return fmt.Errorf("span %d: %w", i+1, err)
		}
		tr.Spans[i] = nil // translated: let the copy of its JSON go
	}
	return nil
}

// span translates one span (jSpanToInternal).
func (t *jaegerTranslator) span(tr *jaegerTrace, raw json.RawMessage) error {
	var s jaegerSpan
	if err := json.Unmarshal(raw, &s); err != nil {
		return describeJSON(err)
	}
	if s.TraceID == "" {
		s.TraceID = tr.TraceID
	}
	traceID, ok := parseTraceID(s.TraceID)
	if !ok {
		return fmt.Errorf("bad traceID %s", quote(s.TraceID))
	}
	spanID, ok := parseSpanID(s.SpanID)
	if !ok {
		return fmt.Errorf("bad spanID %s", quote(s.SpanID))
	}
	start, err := micros(s.StartTime)
	if err != nil {
		return fmt.Errorf("bad startTime: %w", err)
	}
	duration, err := micros(s.Duration)
	if err != nil {
		return fmt.Errorf("bad duration: %w", err)
	}
	end, err := endOf(start, duration)
	if err != nil {
		return err
	}
	refs, err := jaegerRefs(s, traceID)
	if err != nil {
		return err
	}
	key, err := t.resource(tr, s)
	if err != nil {
		return err
	}
	tags, sc := jaegerScope(s.Tags)

	dest := t.b.span(key, func(r pcommon.Resource) { t.resources[key].CopyTo(r.Attributes()) }, sc)
	dest.SetTraceID(traceID)
	dest.SetSpanID(spanID)
	dest.SetName(s.OperationName)
	dest.SetStartTimestamp(pcommon.Timestamp(start))
	dest.SetEndTimestamp(pcommon.Timestamp(end))
	parent := jaegerParent(refs, traceID)
	if !parent.IsEmpty() {
		dest.SetParentSpanID(parent)
	}

	attrs := dest.Attributes()
	attrs.EnsureCapacity(len(tags))
	if err := putJaegerTags(attrs, tags); err != nil {
		return err
	}
	if v, ok := attrs.Get(tagSpanKind); ok {
		dest.SetKind(jaegerKind(v.Str()))
		attrs.Remove(tagSpanKind)
	}
	setJaegerStatus(attrs, dest)
	if v, ok := attrs.Get(tagW3CTraceState); ok {
		dest.TraceState().FromRaw(v.Str())
		attrs.Remove(tagW3CTraceState)
	}

	if err := jaegerEvents(s.Logs, dest.Events()); err != nil {
		return err
	}
	jaegerLinks(refs, parent, dest.Links())
	return nil
}

// reference is a parsed Jaeger reference.
type reference struct {
	childOf bool
	traceID pcommon.TraceID
	spanID  pcommon.SpanID
}

// jaegerRefs parses the span's references. An older file's parentSpanID
// counts as a CHILD_OF reference put first, unless a reference already
// names that span (Jaeger's model.MaybeAddParentSpanID).
func jaegerRefs(s jaegerSpan, traceID pcommon.TraceID) ([]reference, error) {
	refs := make([]reference, 1, len(s.References)+1)
	for i, r := range s.References {
		var ref reference
		switch strings.ToUpper(r.RefType) {
		case refChildOf:
			ref.childOf = true
		case refFollowsFrom:
		default:
			return nil, fmt.Errorf("references[%d]: bad refType %s (want %s or %s)", i, quote(r.RefType), refChildOf, refFollowsFrom)
		}
		var ok bool
		if ref.traceID, ok = parseTraceID(r.TraceID); !ok || r.TraceID == "" {
			return nil, fmt.Errorf("references[%d]: bad traceID %s", i, quote(r.TraceID))
		}
		if ref.spanID, ok = parseSpanID(r.SpanID); !ok || r.SpanID == "" {
			return nil, fmt.Errorf("references[%d]: bad spanID %s", i, quote(r.SpanID))
		}
		refs = append(refs, ref)
	}
	if s.ParentSpanID == "" {
		return refs[1:], nil
	}
	parent, ok := parseSpanID(s.ParentSpanID)
	if !ok {
		return nil, fmt.Errorf("bad parentSpanID %s", quote(s.ParentSpanID))
	}
	for _, r := range refs[1:] {
		if r.spanID == parent && r.traceID == traceID {
			return refs[1:], nil
		}
	}
	refs[0] = reference{childOf: true, traceID: traceID, spanID: parent}
	return refs, nil
}

// jaegerParent is Jaeger's model.Span.ParentSpanID: the first CHILD_OF
// reference within the span's trace, else the first FOLLOWS_FROM one.
// A FOLLOWS_FROM parent is an asynchronous boundary (a message, a
// fire-and-forget call). budgetd's detectors recognise such boundaries by
// span kind (a producer parent, a consumer child), not by reference type,
// which survives only on the link jaegerLinks adds.
func jaegerParent(refs []reference, traceID pcommon.TraceID) pcommon.SpanID {
	var follows *reference
	for i := range refs {
		r := &refs[i]
		if r.traceID != traceID {
			continue
		}
		if r.childOf {
			return r.spanID
		}
		if follows == nil {
			follows = r
		}
	}
	if follows != nil {
		return follows.spanID
	}
	return pcommon.SpanID{}
}

// jaegerLinks turns every reference but the CHILD_OF parent into a link
// (jReferencesToSpanLinks).
func jaegerLinks(refs []reference, parent pcommon.SpanID, dest ptrace.SpanLinkSlice) {
	for _, r := range refs {
		if r.childOf && r.spanID == parent {
			continue
		}
		l := dest.AppendEmpty()
		l.SetTraceID(r.traceID)
		l.SetSpanID(r.spanID)
		refType := "follows_from"
		if r.childOf {
			refType = "child_of"
		}
		l.Attributes().PutStr(attrRefType, refType)
	}
}

// resource returns the key of the span's process, converting the process
// the first time it is seen.
func (t *jaegerTranslator) resource(tr *jaegerTrace, s jaegerSpan) (string, error) {
	p := s.Process
	if p == nil && s.ProcessID != "" {
		tp, ok := tr.Processes[s.ProcessID]
		if !ok {
			return "", fmt.Errorf("processID %s is not among the trace's processes", quote(s.ProcessID))
		}
		p = &tp
	}
	if p == nil {
		p = &jaegerProcess{}
	}
	key := processKey(p)
	if _, ok := t.resources[key]; ok {
		return key, nil
	}
	attrs := pcommon.NewMap()
	if err := jaegerResource(p, attrs); err != nil {
		return "", fmt.Errorf("process %s: %w", quote(s.ProcessID), err)
	}
	t.resources[key] = attrs
	return key, nil
}

// processKey identifies a process by its content: the same process appears
// in every trace it took part in, under ids (p1, p2…) local to each trace.
func processKey(p *jaegerProcess) string {
	var b bytes.Buffer
	b.WriteString(p.ServiceName)
	for _, kv := range p.Tags {
		b.WriteByte(0)
		b.WriteString(kv.Key)
		b.WriteByte(0)
		b.WriteString(kv.Type)
		b.WriteByte(0)
		if json.Compact(&b, kv.Value) != nil {
			b.Write(kv.Value)
		}
	}
	return b.String()
}

// jaegerResource fills attrs from a process (jProcessToInternalResource).
func jaegerResource(p *jaegerProcess, attrs pcommon.Map) error {
	if p.ServiceName == resourceNoServiceName || (p.ServiceName == "" && len(p.Tags) == 0) {
		return nil
	}
	if p.ServiceName != "" {
		attrs.PutStr(attrServiceName, p.ServiceName)
	}
	if err := putJaegerTags(attrs, p.Tags); err != nil {
		return err
	}
	// The Jaeger clients' names for what OpenTelemetry calls host.name and
	// the exporter version, renamed as the Collector does.
	if v, ok := attrs.Get("hostname"); ok {
		if _, has := attrs.Get("host.name"); !has {
			v.CopyTo(attrs.PutEmpty("host.name"))
			attrs.Remove("hostname")
		}
	}
	if v, ok := attrs.Get("jaeger.version"); ok {
		if _, has := attrs.Get("opencensus.exporterversion"); !has {
			attrs.PutStr("opencensus.exporterversion", "Jaeger-"+v.AsString())
			attrs.Remove("jaeger.version")
		}
	}
	return nil
}

// jaegerScope takes otel.scope.name and otel.scope.version out of the tags
// (getScope: the version counts only with a name).
func jaegerScope(tags []jaegerKV) ([]jaegerKV, scope) {
	var sc scope
	name, tags, ok := takeStringTag(tags, tagScopeName)
	if !ok {
		return tags, sc
	}
	sc.name = name
	sc.version, tags, _ = takeStringTag(tags, tagScopeVersion)
	return tags, sc
}

// takeStringTag removes the first tag named key and returns its value when
// it is a string ("" otherwise, as the Collector's GetVStr does).
func takeStringTag(tags []jaegerKV, key string) (string, []jaegerKV, bool) {
	for i, kv := range tags {
		if kv.Key != key {
			continue
		}
		var v string
		if t := strings.ToLower(kv.Type); t == "" || t == "string" {
			_ = json.Unmarshal(kv.Value, &v)
		}
		rest := append(append(make([]jaegerKV, 0, len(tags)-1), tags[:i]...), tags[i+1:]...)
		return v, rest, true
	}
	return "", tags, false
}

func putJaegerTags(m pcommon.Map, tags []jaegerKV) error {
	for _, kv := range tags {
		if err := putJaegerTag(m, kv); err != nil {
			return fmt.Errorf("tag %s: %w", quote(kv.Key), err)
		}
	}
	return nil
}

// putJaegerTag puts one typed tag (jTagsToInternalAttributes). Jaeger's
// query service writes int64 values beyond ±2^53 as strings, and its
// embedded-process form writes every value as a string, so numbers and
// booleans are read from strings too.
func putJaegerTag(m pcommon.Map, kv jaegerKV) error {
	text, isString := jsonText(kv.Value)
	switch strings.ToLower(kv.Type) {
	case "", "string":
		PutString(m, kv.Key, text)
	case "bool":
		b, err := strconv.ParseBool(text)
		if err != nil || (!isString && text != "true" && text != "false") {
			return fmt.Errorf("bad bool value %s", quote(string(kv.Value)))
		}
		m.PutBool(kv.Key, b)
	case "int64":
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return fmt.Errorf("bad int64 value %s", quote(string(kv.Value)))
		}
		m.PutInt(kv.Key, n)
	case "float64":
		f, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return fmt.Errorf("bad float64 value %s", quote(string(kv.Value)))
		}
		m.PutDouble(kv.Key, f)
	case "binary":
		raw, err := base64.StdEncoding.DecodeString(text)
		if err != nil || !isString {
			return fmt.Errorf("bad binary value %s (want base64)", quote(string(kv.Value)))
		}
		m.PutEmptyBytes(kv.Key).FromRaw(raw)
	default:
		// The Collector writes "<Unknown Jaeger TagType …>" for a type
		// enum it does not know; JSON carries the value, so keep it.
		PutString(m, kv.Key, text)
	}
	return nil
}

// jsonText returns a JSON string's content, or any other JSON value's text
// (a number, true, null), and whether it was a string.
func jsonText(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s, true
		}
	}
	return string(raw), false
}

func jaegerKind(k string) ptrace.SpanKind {
	switch k {
	case "client":
		return ptrace.SpanKindClient
	case "server":
		return ptrace.SpanKindServer
	case "producer":
		return ptrace.SpanKindProducer
	case "consumer":
		return ptrace.SpanKindConsumer
	case "internal":
		return ptrace.SpanKindInternal
	}
	return ptrace.SpanKindUnspecified
}

// setJaegerStatus derives the status from the tags and removes the tags
// that only carried it (setInternalSpanStatus): a boolean error=true is
// the final word, then otel.status_code, then, for spans without either,
// http.status_code (5xx, and 4xx on a client, are errors).
func setJaegerStatus(attrs pcommon.Map, span ptrace.Span) {
	code, message, exists := ptrace.StatusCodeUnset, "", false

	if v, ok := attrs.Get(tagError); ok && v.Type() == pcommon.ValueTypeBool && v.Bool() {
		code, exists = ptrace.StatusCodeError, true
		attrs.Remove(tagError)
		if desc, ok := takeStatusDescription(attrs); ok {
			message = desc
		} else if v, ok := attrs.Get(tagHTTPStatusMessage); ok {
			message = v.Str()
		}
	}

	if v, ok := attrs.Get(tagStatusCode); ok {
		if !exists {
			exists = true
			switch strings.ToUpper(v.Str()) {
			case "OK":
				code = ptrace.StatusCodeOk
			case "ERROR":
				code = ptrace.StatusCodeError
			}
			if desc, ok := takeStatusDescription(attrs); ok {
				message = desc
			}
		}
		attrs.Remove(tagStatusCode)
	} else if v, ok := attrs.Get(tagHTTPStatusCode); ok && !exists {
		if c, err := httpStatus(v, span.Kind()); err == nil {
			if c != ptrace.StatusCodeUnset {
				code, exists = c, true
			}
			if v, ok := attrs.Get(tagHTTPStatusMessage); ok {
				message = v.Str()
			}
		}
	}

	if exists {
		span.Status().SetCode(code)
		span.Status().SetMessage(message)
	}
}

func takeStatusDescription(attrs pcommon.Map) (string, bool) {
	v, ok := attrs.Get(tagStatusDescription)
	if !ok {
		return "", false
	}
	desc := v.Str()
	attrs.Remove(tagStatusDescription)
	return desc, true
}

// httpStatus is the status an HTTP status code implies for a span of kind
// (getStatusCodeFromHTTPStatusAttr): 4xx is an error on a client and unset
// on a server, 1xx to 3xx unset, anything else an error.
func httpStatus(v pcommon.Value, kind ptrace.SpanKind) (ptrace.StatusCode, error) {
	var code int64
	switch v.Type() {
	case pcommon.ValueTypeInt:
		code = v.Int()
	case pcommon.ValueTypeStr:
		var err error
		if code, err = strconv.ParseInt(v.Str(), 10, 0); err != nil {
			return ptrace.StatusCodeUnset, err
		}
	default:
		return ptrace.StatusCodeUnset, errors.New("not a number")
	}
	if code >= 400 && code < 500 {
		switch kind {
		case ptrace.SpanKindClient:
			return ptrace.StatusCodeError, nil
		case ptrace.SpanKindServer:
			return ptrace.StatusCodeUnset, nil
		}
	}
	if code >= 100 && code < 399 {
		return ptrace.StatusCodeUnset, nil
	}
	return ptrace.StatusCodeError, nil
}

// jaegerEvents turns logs into events (jLogsToSpanEvents).
func jaegerEvents(logs []jaegerLog, dest ptrace.SpanEventSlice) error {
	dest.EnsureCapacity(len(logs))
	for i, l := range logs {
		ts, err := micros(l.Timestamp)
		if err != nil {
			return fmt.Errorf("logs[%d]: bad timestamp: %w", i, err)
		}
		e := dest.AppendEmpty()
		e.SetTimestamp(pcommon.Timestamp(ts))
		attrs := e.Attributes()
		attrs.EnsureCapacity(len(l.Fields))
		if err := putJaegerTags(attrs, l.Fields); err != nil {
			return fmt.Errorf("logs[%d]: %w", i, err)
		}
		name := ""
		if v, ok := attrs.Get(jaegerEventField); ok {
			name = v.Str()
			attrs.Remove(jaegerEventField)
		}
		if name == "" {
			name = jaegerDefaultEventName
		}
		e.SetName(name)
	}
	return nil
}
