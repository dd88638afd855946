package translate

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// builder collects translated spans into ptrace.Traces, one ResourceSpans
// per distinct resource and one ScopeSpans per scope within it, in the
// order they first appear. The Collector's translators group the same way
// (jaeger hashes processes, zipkinv2 sorts by service and library) but in
// map or sort order; first appearance keeps the output deterministic.
type builder struct {
	td        ptrace.Traces
	resources map[string]*resourceEntry
}

type resourceEntry struct {
	rs     ptrace.ResourceSpans
	scopes map[scope]ptrace.SpanSlice
}

// scope is an instrumentation scope's identity.
type scope struct{ name, version string }

func newBuilder() *builder {
	return &builder{td: ptrace.NewTraces(), resources: map[string]*resourceEntry{}}
}

// span returns a new span under the resource known by key and scope sc.
// fill sets the resource's attributes the first time key is seen.
func (b *builder) span(key string, fill func(pcommon.Resource), sc scope) ptrace.Span {
	r := b.resources[key]
	if r == nil {
		r = &resourceEntry{rs: b.td.ResourceSpans().AppendEmpty(), scopes: map[scope]ptrace.SpanSlice{}}
		fill(r.rs.Resource())
		b.resources[key] = r
	}
	spans, ok := r.scopes[sc]
	if !ok {
		ss := r.rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName(sc.name)
		ss.Scope().SetVersion(sc.version)
		spans = ss.Spans()
		r.scopes[sc] = spans
	}
	return spans.AppendEmpty()
}

// EachSpan calls f with every span of td and the resource and scope that
// hold it, in order.
func EachSpan(td ptrace.Traces, f func(ptrace.ResourceSpans, ptrace.ScopeSpans, ptrace.Span)) {
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				f(rss.At(i), sss.At(j), spans.At(k))
			}
		}
	}
}
