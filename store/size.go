package store

import "github.com/budgetd/budgetd/schema"

// SpanSizer estimates the bytes a span's row takes in the insert block a
// writer builds (a column of strings holds a 16-byte header per value):
// its strings and arrays, with the resource's attributes — shared between the
// spans of a resource in memory, repeated per row in the block — measured
// once per run of spans that share them. Writers use it to keep one write
// within what an engine holds in memory and writes within its timeout.
type SpanSizer struct {
	res      schema.Attributes
	resBytes int
}

// RowOverhead covers what a span's row holds besides its attributes,
// events, links and the bytes of its names: in the block a writer builds,
// ten string headers (16 bytes each) and the hex of its three ids (64), its
// fixed-width columns (22) and the offsets of its 17 arrays (8 each). A
// hop's row (chsql's hopRowBytes) holds about as much besides its strings.
const RowOverhead = 384

// Per-element overheads in the block: an attribute is a key and a value
// (two string headers) and a type byte; an event its time, name header
// and the offsets of its attributes' three inner arrays; a link its ids
// as hex with their headers, its trace state's header and three inner
// array offsets.
const (
	attrOverhead  = 33
	eventOverhead = 48
	linkOverhead  = 120
)

// Bytes estimates the row of s.
func (z *SpanSizer) Bytes(s *schema.Span) int {
	if len(s.ResourceAttrs) != len(z.res) || len(s.ResourceAttrs) > 0 && &s.ResourceAttrs[0] != &z.res[0] {
		z.res, z.resBytes = s.ResourceAttrs, attrBytes(s.ResourceAttrs)
	}
	n := RowOverhead + z.resBytes + len(s.TraceState) + len(s.Service) + len(s.Name) + len(s.StatusMessage) +
		len(s.ScopeName) + len(s.ScopeVersion) + attrBytes(s.Attrs)
	for i := range s.Events {
		n += eventOverhead + len(s.Events[i].Name) + attrBytes(s.Events[i].Attrs)
	}
	for i := range s.Links {
		n += linkOverhead + len(s.Links[i].TraceState) + attrBytes(s.Links[i].Attrs)
	}
	return n
}

// attrBytes is the block size of attributes: key, type and value per
// attribute.
func attrBytes(as schema.Attributes) int {
	n := 0
	for i := range as {
		n += attrOverhead + len(as[i].Key) + len(as[i].Value)
	}
	return n
}
