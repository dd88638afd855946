package analyze

import (
	"strconv"
	"strings"

	"github.com/budgetd/budgetd/analyze/budgetread"
	"github.com/budgetd/budgetd/schema"
)

// httpStatus returns the span's HTTP response status code, from the current
// attribute or the older one, or -1 when neither is set.
func httpStatus(as schema.Attributes) int64 {
	if c := intAttr(as, schema.AttrHTTPStatusCode); c >= 0 {
		return c
	}
	return intAttr(as, schema.AttrHTTPStatusCodeOld)
}

// grpcCodes maps the gRPC status names that rpc.response.status_code
// carries to their numbers. Connect spells them in lower case and writes
// "canceled"; both spellings are accepted.
var grpcCodes = map[string]int64{
	"OK": 0, "CANCELLED": 1, "CANCELED": 1, "UNKNOWN": 2, "INVALID_ARGUMENT": 3,
	"DEADLINE_EXCEEDED": 4, "NOT_FOUND": 5, "ALREADY_EXISTS": 6, "PERMISSION_DENIED": 7,
	"RESOURCE_EXHAUSTED": 8, "FAILED_PRECONDITION": 9, "ABORTED": 10, "OUT_OF_RANGE": 11,
	"UNIMPLEMENTED": 12, "INTERNAL": 13, "UNAVAILABLE": 14, "DATA_LOSS": 15, "UNAUTHENTICATED": 16,
}

// grpcStatus returns the span's gRPC status code, from rpc.grpc.status_code
// (a number, older conventions) or rpc.response.status_code (a code name, or
// a number when rpc.system says grpc, newer ones), or -1 when neither is
// usable.
func grpcStatus(as schema.Attributes) int64 {
	if c := intAttr(as, schema.AttrRPCGRPCStatusCode); c >= 0 {
		return c
	}
	a, ok := as.Get(schema.AttrRPCResponseStatusCode)
	if !ok {
		return -1
	}
	if n, err := strconv.ParseInt(a.Value, 10, 64); err == nil {
		if n >= 0 && isGRPC(as) {
			return n
		}
		return -1
	}
	if n, ok := grpcCodes[strings.ToUpper(a.Value)]; ok {
		return n
	}
	return -1
}

// isGRPC reports whether the span says its RPC system is gRPC, which is
// when a number in rpc.response.status_code is a gRPC code (JSON-RPC and
// Dubbo number theirs differently), as budgetread.Read reads it.
func isGRPC(as schema.Attributes) bool {
	a, ok := as.Get(schema.AttrRPCSystemName)
	if !ok {
		a, ok = as.Get(schema.AttrRPCSystem)
	}
	return ok && strings.EqualFold(a.Value, "grpc")
}

// responseCode is the status an answer carried, "http 503" or "grpc 14",
// or "" when the span records none. Two spans with the same responseCode
// saw the same answer.
func responseCode(as schema.Attributes) string {
	if c := httpStatus(as); c >= 0 {
		return "http " + strconv.FormatInt(c, 10)
	}
	if c := grpcStatus(as); c >= 0 {
		return "grpc " + strconv.FormatInt(c, 10)
	}
	return ""
}

// outcome decides whether a span ended in error and whether a retry policy
// would retry it. Beyond the OTLP status, budgetd reads the response codes
// itself (both semantic-convention generations) because not every
// instrumentation sets the status on a 5xx or on a gRPC failure.
func outcome(s *schema.Span, f *budgetread.Facts) (isError, failed bool) {
	isError = s.StatusCode == schema.StatusError || f.TimedOut
	http := httpStatus(s.Attrs)
	if http >= 500 {
		isError = true
	}
	if g := grpcStatus(s.Attrs); g > 0 {
		// On the calling side every non-OK code is an error; on the serving
		// side only the codes semantic conventions call server errors.
		switch {
		case s.Kind.IsCall():
			isError = true
		case g == 2 || g == 4 || g == 12 || g == 13 || g == 14 || g == 15:
			isError = true
		}
	}
	return isError, isError || http == 429
}

// gotAnswer reports whether CLIENT span c really got the answer of its
// SERVER child s (DESIGN §5, "answered or gave up"): c neither timed out nor
// was cancelled, in any convention budgetread.Read reads, and either c
// succeeded or both failed with the same outcome (the same response code, or
// no code on either). A client that failed while its server succeeded, or
// that saw another answer than the one its server gave, got its answer from
// somewhere else (its own timer, a proxy, a reset connection): it gave up,
// and its server running past it is orphaned work, never clock skew.
func (v *view) gotAnswer(c, s int) bool {
	cn, sn := &v.n[c], &v.n[s]
	if v.t.Spans[c].Kind != schema.KindClient || cn.facts.TimedOut || len(cn.facts.Cancellations) > 0 {
		return false
	}
	if !cn.isError {
		return true
	}
	cc, sc := responseCode(v.t.Spans[c].Attrs), responseCode(v.t.Spans[s].Attrs)
	if cc != "" && sc != "" {
		return cc == sc
	}
	// Both failed and at most one says how: the same failure, as far as
	// the spans tell.
	return sn.isError
}
