package schema

import (
	"encoding/hex"
	"fmt"
)

// TraceID is the 16-byte W3C trace id. The zero value is invalid.
type TraceID [16]byte

// SpanID is the 8-byte span id. The zero value means "none" (for parents).
type SpanID [8]byte

// String returns the id as 32 lower-case hex digits, the form used in the
// store, the API and OTLP/JSON.
func (id TraceID) String() string { return hex.EncodeToString(id[:]) }

// IsZero reports whether the id is all zero bytes (invalid in OTLP).
func (id TraceID) IsZero() bool { return id == TraceID{} }

// String returns the id as 16 lower-case hex digits, or "" for the zero id so
// that a root span's parent reads as empty rather than as sixteen zeros.
func (id SpanID) String() string {
	if id.IsZero() {
		return ""
	}
	return hex.EncodeToString(id[:])
}

// IsZero reports whether the id is all zero bytes.
func (id SpanID) IsZero() bool { return id == SpanID{} }

// ParseTraceID parses 32 hex digits (either case).
func ParseTraceID(s string) (TraceID, error) {
	var id TraceID
	if len(s) != 2*len(id) {
		return id, fmt.Errorf("parse trace id %q: want %d hex digits", s, 2*len(id))
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, fmt.Errorf("parse trace id %q: %w", s, err)
	}
	return id, nil
}

// ParseSpanID parses 16 hex digits (either case); "" parses to the zero id.
func ParseSpanID(s string) (SpanID, error) {
	var id SpanID
	if s == "" {
		return id, nil
	}
	if len(s) != 2*len(id) {
		return id, fmt.Errorf("parse span id %q: want %d hex digits", s, 2*len(id))
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, fmt.Errorf("parse span id %q: %w", s, err)
	}
	return id, nil
}
