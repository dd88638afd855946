package analyze

import (
	"strings"

	"github.com/budgetd/budgetd/schema"
)

// Compact returns the part of s the detectors read: its identity, timing and
// status, the budget attributes (schema.IsBudgetAttr), the attributes that
// name a callee, and its budget.cancelled events. Trace assembly holds
// spans for seconds, so it keeps them compacted: a span's resource
// attributes, links and other attributes are most of its memory and none of
// the analysis.
//
// The kept strings are copied: spans decoded from one buffer (a
// write-ahead-log record) share its memory, and a held span must not keep
// a whole record alive.
func Compact(s schema.Span) schema.Span {
	c := s
	c.ResourceAttrs, c.Links, c.TraceState, c.StatusMessage, c.ScopeName, c.ScopeVersion = nil, nil, "", "", "", ""
	c.Service, c.Name = strings.Clone(s.Service), strings.Clone(s.Name)
	c.Attrs = nil
	for _, a := range s.Attrs {
		if keepAttr(a.Key) {
			c.Attrs = append(c.Attrs, schema.Attr{Key: strings.Clone(a.Key), Type: a.Type, Value: strings.Clone(a.Value)})
		}
	}
	c.Events = nil
	for _, e := range s.Events {
		if e.Name == schema.EventCancelled {
			ce := schema.Event{TimeNs: e.TimeNs, Name: schema.EventCancelled}
			if a, ok := e.Attrs.Get(schema.AttrCancelSource); ok {
				ce.Attrs = schema.Attributes{schema.Str(schema.AttrCancelSource, strings.Clone(a.Value))}
			}
			c.Events = append(c.Events, ce)
		}
	}
	return c
}

func keepAttr(key string) bool {
	if schema.IsBudgetAttr(key) {
		return true
	}
	for _, k := range peerAttrs {
		if k == key {
			return true
		}
	}
	return false
}
