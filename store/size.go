package store

import "github.com/budgetd/budgetd/schema"

// SpanSizer estimates the bytes a span's row takes in an insert block: its
// strings and arrays, with the resource's attributes — shared between the
// spans of a resource in memory, repeated per row in the block — measured
// once per run of spans that share them. Writers use it to keep one write
// within what an engine holds in memory and writes within its timeout.
type SpanSizer struct {
	res      schema.Attributes
	resBytes int
}

// RowOverhead covers a row's fixed-width columns and array offsets.
const RowOverhead = 160

// Bytes estimates the row of s.
func (z *SpanSizer) Bytes(s *schema.Span) int {
	if len(s.ResourceAttrs) != len(z.res) || len(s.ResourceAttrs) > 0 && &s.ResourceAttrs[0] != &z.res[0] {
		z.res, z.resBytes = s.ResourceAttrs, attrBytes(s.ResourceAttrs)
	}
	n := RowOverhead + z.resBytes + len(s.TraceState) + len(s.Service) + len(s.Name) + len(s.StatusMessage) +
		len(s.ScopeName) + len(s.ScopeVersion) + attrBytes(s.Attrs)
	for i := range s.Events {
		n += 24 + len(s.Events[i].Name) + attrBytes(s.Events[i].Attrs)
	}
	for i := range s.Links {
		n += 96 + len(s.Links[i].TraceState) + attrBytes(s.Links[i].Attrs)
	}
	return n
}

// attrBytes is the block size of attributes: key, type and value per
// attribute, with their array offsets.
func attrBytes(as schema.Attributes) int {
	n := 0
	for i := range as {
		n += len(as[i].Key) + len(as[i].Value) + 17
	}
	return n
}
