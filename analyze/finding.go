package analyze

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/budgetd/budgetd/schema"
)

// FindingID returns the id of a finding of kind about span spanID of trace
// traceID (both lower-case hex; empty for edge aggregates, which pass the
// edge's names as extra parts). The id is a hash of exactly these parts, so
// analysing a re-opened trace again yields the same ids and the store can
// replace rather than duplicate them.
func FindingID(kind schema.Kind, traceID, spanID string, extra ...string) string {
	h := sha256.New()
	h.Write([]byte(kind))
	for _, p := range append([]string{traceID, spanID}, extra...) {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// spanFinding builds a finding about span i of the view: its identity, names
// and path come from the span's hop.
func (v *view) spanFinding(kind schema.Kind, i int, sev schema.Severity, now time.Time, ev map[string]float64, msg string) schema.Finding {
	h := &v.hops[i]
	spanID := h.SpanID.String()
	return schema.Finding{
		ID:            FindingID(kind, v.traceID, spanID),
		Kind:          kind,
		Severity:      sev,
		TraceID:       v.traceID,
		SpanID:        spanID,
		Service:       h.Service,
		Operation:     h.Operation,
		CallerService: h.CallerService,
		CalleeService: h.CalleeService,
		Path:          h.Path,
		DetectedAt:    now,
		Evidence:      ev,
		Message:       msg,
	}
}

// fmtMs formats milliseconds for a message: whole milliseconds, never "-0".
func fmtMs(ms float64) string {
	r := math.Round(ms)
	if r == 0 {
		r = 0 // turns -0 into 0
	}
	return strconv.FormatFloat(r, 'f', 0, 64)
}

// leftText says how much time who had: "checkout had 900 ms left", or, once
// the budget is spent, "checkout's deadline had passed 60 ms before".
func leftText(who string, ms float64) string {
	if math.Round(ms) > 0 {
		return who + " had " + fmtMs(ms) + " ms left"
	}
	return who + "'s deadline had passed " + fmtMs(-ms) + " ms before"
}

// atLeastTwice reports whether need is at least twice have, counting any
// need against a spent (non-positive) budget as twice over. It is the shared
// rule for the step from warning to critical: a figure off by a factor of two
// is no tuning matter.
func atLeastTwice(need, have float64) bool { return have <= 0 || need >= 2*have }

// sortFindings orders findings deterministically: edge aggregates (no trace)
// first, then by trace, span, kind and id.
func sortFindings(fs []schema.Finding) {
	sort.Slice(fs, func(a, b int) bool {
		x, y := &fs[a], &fs[b]
		switch {
		case x.TraceID != y.TraceID:
			return x.TraceID < y.TraceID
		case x.SpanID != y.SpanID:
			return x.SpanID < y.SpanID
		case x.Kind != y.Kind:
			return x.Kind < y.Kind
		}
		return x.ID < y.ID
	})
}
