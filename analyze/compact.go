package analyze

import (
	"strings"

	"github.com/budgetd/budgetd/analyze/budgetread"
	"github.com/budgetd/budgetd/schema"
)

// Compact returns the part of s the detectors read: its identity, timing and
// status, the budget attributes (budgetread.IsAttr), the attributes that
// name a callee, and its budget.cancelled events. Trace assembly holds
// spans for seconds, so it keeps them compacted: a span's resource
// attributes, links and other attributes are most of its memory and none of
// the analysis.
//
// Of the status description and the exception events, the detectors read
// only whether they say the span timed out or was cancelled
// (budgetread.Read), so Compact keeps that verdict and not the text: the
// description becomes budgetread.StatusEvidence's constant for it ("" when
// they say neither) and the exception events are dropped. A held span costs
// no bytes for them however long its messages were, and budgetread.Read
// reads the same TimedOut and Cancelled from it
// (TestCompactKeepsTimeoutVerdict).
//
// The kept strings are copied: spans decoded from one buffer (a
// write-ahead-log record) share its memory, and a held span must not keep
// a whole record alive. They are copied into one string per span, and
// attribute names are the shared constants, so a held span costs three
// allocations (the attribute slice, its strings, events if any) instead of
// one per string; BenchmarkHeldSpans measures it.
func Compact(s schema.Span) schema.Span {
	c := s
	c.ResourceAttrs, c.Links, c.TraceState, c.ScopeName, c.ScopeVersion = nil, nil, "", "", ""
	c.StatusMessage = budgetread.StatusEvidence(&s)
	kept, size := 0, len(s.Service)+len(s.Name)
	for _, a := range s.Attrs {
		if _, ok := keptKey(a.Key); ok {
			kept++
			size += len(a.Value)
		}
	}
	var b strings.Builder
	b.Grow(size)
	b.WriteString(s.Service)
	b.WriteString(s.Name)
	for _, a := range s.Attrs {
		if _, ok := keptKey(a.Key); ok {
			b.WriteString(a.Value)
		}
	}
	all := b.String()
	c.Service, c.Name = all[:len(s.Service)], all[len(s.Service):len(s.Service)+len(s.Name)]
	c.Attrs = nil
	if kept > 0 {
		c.Attrs = make(schema.Attributes, 0, kept)
		off := len(s.Service) + len(s.Name)
		for _, a := range s.Attrs {
			if key, ok := keptKey(a.Key); ok {
				c.Attrs = append(c.Attrs, schema.Attr{Key: key, Type: a.Type, Value: all[off : off+len(a.Value)]})
				off += len(a.Value)
			}
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

// keptKey reports whether Compact keeps the attribute key, and returns the
// shared constant for it.
func keptKey(key string) (string, bool) {
	if i, ok := heldKeyIndex(key); ok {
		return heldKeys[i], true
	}
	return "", false
}
