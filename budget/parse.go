package budget

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxMs is the largest number of milliseconds a header may carry, 2^53: the
// largest integer a float64 holds exactly. A larger figure (about 285,000
// years) is a unit mistake or garbage, never a budget. The bound and the
// grammars below are those of docs/attributes.md, so a value this package
// accepts is one budgetd accepts too.
const maxMs = 1 << 53

// maxGRPCTimeoutValue is the largest grpc-timeout number the gRPC HTTP/2
// protocol allows: at most 8 ASCII digits.
const maxGRPCTimeoutValue = 99_999_999

// parseMillis parses a decimal-milliseconds header value such as
// x-request-timeout-ms or the epoch milliseconds of x-request-deadline: one
// or more ASCII digits, optionally followed by '.' and one or more digits.
// Signs, exponents, spaces, units, hexadecimal, NaN and infinities are
// rejected, as are values above maxMs, so the result is finite and ≥ 0.
// strconv.ParseFloat alone would accept several of those, and a budget read
// wrongly is worse than no budget.
func parseMillis(s string) (float64, bool) {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	if i == 0 {
		return 0, false
	}
	if i < len(s) && s[i] == '.' {
		i++
		start := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == start {
			return 0, false
		}
	}
	if i != len(s) {
		return 0, false
	}
	// The grammar is a subset of ParseFloat's; a huge value comes back as
	// +Inf with a range error, which the bound rejects.
	v, _ := strconv.ParseFloat(s, 64)
	if v > maxMs || (v == maxMs && aboveMaxMs(s)) {
		return 0, false
	}
	return v, true
}

// aboveMaxMs reports whether the decimal s, which ParseFloat rounded onto
// maxMs, really lies above it (9007199254740993 rounds down to 2^53).
func aboveMaxMs(s string) bool {
	const bound = "9007199254740992" // 2^53
	whole, frac, _ := strings.Cut(s, ".")
	whole = strings.TrimLeft(whole, "0")
	if len(whole) != len(bound) {
		return len(whole) > len(bound)
	}
	if whole != bound {
		return whole > bound // Same length: compares as numbers.
	}
	return strings.Trim(frac, "0") != ""
}

// parseGRPCTimeout parses a grpc-timeout value as the gRPC HTTP/2 protocol
// defines it and grpc-go's decoder (internal/transport.decodeTimeout) reads
// it: 1 to 8 ASCII digits, then one unit, H (hours), M (minutes),
// S (seconds), m (milliseconds), u (microseconds) or n (nanoseconds). A
// value too large for a time.Duration (only hours can be) is clamped to the
// largest Duration, as grpc-go does; Server clamps it further to
// ServerConfig.Max.
func parseGRPCTimeout(s string) (time.Duration, bool) {
	if len(s) < 2 || len(s) > 9 {
		return 0, false
	}
	unit, ok := grpcTimeoutUnit(s[len(s)-1])
	if !ok {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s)-1; i++ {
		if !isDigit(s[i]) {
			return 0, false
		}
		n = n*10 + int64(s[i]-'0') // 8 digits cannot overflow an int64.
	}
	if n > math.MaxInt64/int64(unit) {
		return time.Duration(math.MaxInt64), true
	}
	return time.Duration(n) * unit, true
}

// grpcTimeoutUnit maps a grpc-timeout unit letter to its duration.
func grpcTimeoutUnit(c byte) (time.Duration, bool) {
	switch c {
	case 'H':
		return time.Hour, true
	case 'M':
		return time.Minute, true
	case 'S':
		return time.Second, true
	case 'm':
		return time.Millisecond, true
	case 'u':
		return time.Microsecond, true
	case 'n':
		return time.Nanosecond, true
	}
	return 0, false
}

// formatGRPCTimeout encodes d as a grpc-timeout value the way grpc-go's own
// encoder (internal/grpcutil.EncodeDuration) does: in the finest unit whose
// count, rounded up, fits in 8 digits, so the value never shortens d and
// lengthens it by less than one unit. When d can be written exactly in some
// unit it uses the coarsest such unit instead ("2S", not grpc-go's
// "2000000u"): the same value, fewer digits. d ≤ 0 encodes as "0n". The
// cases of budget/testdata/grpc_timeout_cases.json pin both rules, and
// budgetd's reader of the header (analyze/budgetread) passes the same cases.
func formatGRPCTimeout(d time.Duration) string {
	if d <= 0 {
		return "0n"
	}
	// From the coarsest unit to the finest.
	units := [...]struct {
		d    time.Duration
		name byte
	}{
		{time.Hour, 'H'},
		{time.Minute, 'M'},
		{time.Second, 'S'},
		{time.Millisecond, 'm'},
		{time.Microsecond, 'u'},
		{time.Nanosecond, 'n'},
	}
	for _, u := range units {
		if d%u.d == 0 && d/u.d <= maxGRPCTimeoutValue {
			return strconv.FormatInt(int64(d/u.d), 10) + string(u.name)
		}
	}
	// No exact encoding fits: round up in the finest unit that fits, as
	// grpc-go does. Hours always fit (math.MaxInt64 ns is under 2,562,048
	// hours), so the loop returns.
	for i := len(units) - 1; i >= 0; i-- {
		n := d / units[i].d
		if d%units[i].d != 0 {
			n++
		}
		if n <= maxGRPCTimeoutValue {
			return strconv.FormatInt(int64(n), 10) + string(units[i].name)
		}
	}
	return strconv.Itoa(maxGRPCTimeoutValue) + "H" // Unreachable.
}

// durationFromMs converts a non-negative number of milliseconds to a
// Duration, rounding down and saturating at the largest Duration.
func durationFromMs(v float64) time.Duration {
	ns := v * float64(time.Millisecond)
	if ns >= math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(ns)
}

// headerBudget returns the smallest budget among the values of the budget
// headers in h, as seen at now, and whether any value was usable. Unusable
// values (garbage, signs, units, out of range) are ignored, as if absent. The
// smallest wins because a budget may only shrink: a request that carries two
// figures is bound by the tighter one, and a header nobody meant to send
// cannot raise the other.
//
// The absolute x-request-deadline header is read only when deadline is true.
// Its budget is reduced by skew, the most the sender's clock may run ahead
// of ours: a deadline read on a slow clock would otherwise give more time
// than the sender meant. A deadline already past gives a negative budget.
func headerBudget(h http.Header, now time.Time, deadline bool, skew time.Duration) (time.Duration, bool) {
	best, found := time.Duration(math.MaxInt64), false
	take := func(d time.Duration) {
		best, found = min(best, d), true
	}
	for _, v := range h.Values(HeaderTimeoutMs) {
		if ms, ok := parseMillis(v); ok {
			take(durationFromMs(ms))
		}
	}
	for _, v := range h.Values(HeaderGRPCTimeout) {
		if d, ok := parseGRPCTimeout(v); ok {
			take(d)
		}
	}
	if deadline {
		for _, v := range h.Values(HeaderDeadline) {
			epochMs, ok := parseMillis(v)
			if !ok {
				continue
			}
			whole := math.Floor(epochMs)
			at := time.UnixMilli(int64(whole)).Add(durationFromMs(epochMs - whole))
			// Sub saturates, so a deadline centuries away stays positive.
			take(at.Sub(now) - skew)
		}
	}
	return best, found
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
