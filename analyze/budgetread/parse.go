package budgetread

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"time"

	"github.com/budgetd/budgetd/schema"
)

// MaxMs bounds every millisecond figure budgetd accepts. 2^53 is the largest
// integer a float64 holds exactly; a larger number of milliseconds (about
// 285,000 years) is a unit mistake or garbage, never a real budget.
const MaxMs = 1 << 53

// maxGRPCTimeoutValue is the largest TimeoutValue the gRPC HTTP/2 protocol
// allows: at most 8 ASCII digits.
const maxGRPCTimeoutValue = 99_999_999

// Reasons recorded in InvalidValue.Reason. They are short and fixed so that
// callers can use them as metric labels without unbounded cardinality.
const (
	reasonEmpty         = "empty"
	reasonWrongType     = "wrong type"
	reasonNotNumber     = "not a number"
	reasonNotInteger    = "not an integer"
	reasonNegative      = "negative"
	reasonNotFinite     = "not finite"
	reasonOutOfRange    = "out of range"
	reasonZero          = "zero"
	reasonUnknownValue  = "unknown value"
	reasonDuplicate     = "duplicate key"
	reasonBadArray      = "malformed string array"
	reasonEmptyArray    = "empty array"
	reasonNoStart       = "span has no start time"
	reasonMissingUnit   = "missing unit"
	reasonUnknownUnit   = "unknown unit"
	reasonMissingDigits = "missing digits"
	reasonTooManyDigits = "more than 8 digits"
	reasonNotDigit      = "not a digit"
)

// ParseGRPCTimeout parses a grpc-timeout header value as the gRPC HTTP/2
// protocol defines it and grpc-go's decoder (internal/transport.decodeTimeout)
// reads it: 1 to 8 ASCII digits followed by one unit, H (hours),
// M (minutes), S (seconds), m (milliseconds), u (microseconds) or
// n (nanoseconds). Signs, spaces, a missing unit and a ninth digit are
// rejected. A value too large for a time.Duration (only possible in hours) is
// clamped to the largest Duration, as grpc-go does, because a peer sending it
// means "no practical limit" rather than garbage.
func ParseGRPCTimeout(s string) (time.Duration, error) {
	d, reason := parseGRPCTimeout(s)
	if reason != "" {
		return 0, fmt.Errorf("parse grpc-timeout %q: %s", s, reason)
	}
	return d, nil
}

// parseGRPCTimeout is ParseGRPCTimeout without the error value, so Read
// can reject a value without allocating.
func parseGRPCTimeout(s string) (time.Duration, string) {
	if s == "" {
		return 0, reasonEmpty
	}
	last := len(s) - 1
	unit, ok := grpcTimeoutUnit(s[last])
	if !ok {
		if isDigit(s[last]) {
			return 0, reasonMissingUnit
		}
		return 0, reasonUnknownUnit
	}
	digits := s[:last]
	switch {
	case len(digits) == 0:
		return 0, reasonMissingDigits
	case len(digits) > 8:
		return 0, reasonTooManyDigits
	}
	var n int64
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if !isDigit(c) {
			return 0, reasonNotDigit
		}
		n = n*10 + int64(c-'0') // 8 digits cannot overflow an int64.
	}
	if n > math.MaxInt64/int64(unit) {
		return time.Duration(math.MaxInt64), ""
	}
	return time.Duration(n) * unit, ""
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

// FormatGRPCTimeout encodes d as a grpc-timeout header value the way
// grpc-go's own encoder (internal/grpcutil.EncodeDuration) does: in the
// finest unit whose count, rounded up, fits in 8 digits, so the receiver
// never gets less time than d and less than one unit more. When d can be
// written exactly in at most 8 digits of some unit it returns the shortest
// such encoding instead ("1S", not grpc-go's "1000000u"): the same value.
// d ≤ 0 encodes as "0n": the budget is spent.
//
// For every d, ParseGRPCTimeout(FormatGRPCTimeout(d)) succeeds and returns
// a duration ≥ max(d, 0), the one grpc-go's encoding of d decodes to. The
// cases of budget/testdata/grpc_timeout_cases.json, shared with the budget
// library, pin it.
func FormatGRPCTimeout(d time.Duration) string {
	if d <= 0 {
		return "0n"
	}
	// The units from the largest to the smallest.
	grpcUnits := [...]struct {
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
	// The largest unit that divides d exactly gives the fewest digits.
	for _, u := range grpcUnits {
		if d%u.d == 0 && d/u.d <= maxGRPCTimeoutValue {
			return formatGRPC(int64(d/u.d), u.name)
		}
	}
	// No exact encoding fits: round up in the finest unit that fits. Hours
	// always fit (math.MaxInt64 ns is under 2,562,048 hours), so the loop
	// returns.
	for i := len(grpcUnits) - 1; i >= 0; i-- {
		u := grpcUnits[i]
		n := d / u.d
		if d%u.d != 0 {
			n++
		}
		if n <= maxGRPCTimeoutValue {
			return formatGRPC(int64(n), u.name)
		}
	}
	return formatGRPC(maxGRPCTimeoutValue, 'H')
}

func formatGRPC(n int64, unit byte) string {
	var buf [9]byte
	b := strconv.AppendInt(buf[:0], n, 10)
	return string(append(b, unit))
}

// ParseMillis parses a millisecond header value such as
// x-request-timeout-ms, x-envoy-expected-rq-timeout-ms or the epoch
// milliseconds of x-request-deadline. The grammar is plain decimal: one or
// more ASCII digits, optionally followed by '.' and one or more digits. Signs,
// exponents, spaces, hexadecimal, NaN and infinities are rejected, as are
// values above MaxMs, so a parsed value is always finite and non-negative.
func ParseMillis(s string) (float64, error) {
	v, reason := parseDecimal(s, false, false)
	if reason != "" {
		return 0, fmt.Errorf("parse milliseconds %q: %s", s, reason)
	}
	return v, nil
}

// parseDecimal parses a decimal number with a strict grammar: an optional '-'
// when signed, digits, an optional fraction and, when exp, an optional
// exponent. strconv.ParseFloat alone would also accept hexadecimal floats,
// underscores, "Inf" and "NaN", none of which a budget may be written as. The
// result lies in [-MaxMs, MaxMs] and is never negative zero.
func parseDecimal(s string, signed, exp bool) (float64, string) {
	if s == "" {
		return 0, reasonEmpty
	}
	i := 0
	if s[0] == '-' {
		if !signed {
			return 0, reasonNegative
		}
		i++
	}
	start := i
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	if i == start {
		return 0, reasonNotNumber
	}
	if i < len(s) && s[i] == '.' {
		i++
		start = i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == start {
			return 0, reasonNotNumber
		}
	}
	if exp && i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		start = i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == start {
			return 0, reasonNotNumber
		}
	}
	if i != len(s) {
		return 0, reasonNotNumber
	}
	// The grammar above is a subset of ParseFloat's, so the only possible
	// error is a range error, which the bound below reports.
	v, _ := strconv.ParseFloat(s, 64)
	if math.Abs(v) == MaxMs && !withinMaxMs(s) {
		return 0, reasonOutOfRange
	}
	return checkMs(v)
}

// withinMaxMs reports whether the decimal s, which parsed to ±MaxMs after
// rounding, really lies within ±MaxMs. Numbers just above the bound round
// down onto it; only those need the exact comparison, so its allocations
// never touch ordinary values.
func withinMaxMs(s string) bool {
	var r big.Rat
	if _, ok := r.SetString(s); !ok {
		return false
	}
	return r.Abs(&r).Cmp(new(big.Rat).SetInt64(MaxMs)) <= 0
}

// checkMs rejects non-finite values and values outside ±MaxMs, and turns a
// negative zero into zero so that "-0" never reads as an expired budget.
func checkMs(v float64) (float64, string) {
	switch {
	case math.IsNaN(v):
		return 0, reasonNotFinite
	case math.IsInf(v, 0) || v > MaxMs || v < -MaxMs:
		return 0, reasonOutOfRange
	case v == 0:
		return 0, ""
	}
	return v, ""
}

// parseCount parses a non-negative integer header value (an attempt count):
// ASCII digits only, at most math.MaxUint32.
func parseCount(s string) (uint32, string) {
	if s == "" {
		return 0, reasonEmpty
	}
	if s[0] == '-' {
		return 0, reasonNegative
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isDigit(c) {
			return 0, reasonNotInteger
		}
		n = n*10 + uint64(c-'0')
		if n > math.MaxUint32 {
			return 0, reasonOutOfRange
		}
	}
	return uint32(n), ""
}

// attrNumber reads a numeric attribute: an Int or Double attribute, or a
// String attribute holding a decimal number (exponent allowed, since
// fmt.Sprint writes large floats that way). The result lies in ±MaxMs.
func attrNumber(a schema.Attr) (float64, string) {
	switch a.Type {
	case schema.AttrInt:
		n, err := strconv.ParseInt(a.Value, 10, 64)
		switch {
		case a.Value == "":
			return 0, reasonEmpty
		case err != nil && isRangeErr(err):
			return 0, reasonOutOfRange
		case err != nil:
			return 0, reasonNotNumber
		case n > MaxMs || n < -MaxMs:
			// Checked before the conversion, which would round 2^53+1
			// down to the bound.
			return 0, reasonOutOfRange
		}
		return checkMs(float64(n))
	case schema.AttrDouble:
		if a.Value == "" {
			return 0, reasonEmpty
		}
		v, err := strconv.ParseFloat(a.Value, 64)
		if err != nil && !isRangeErr(err) {
			return 0, reasonNotNumber
		}
		return checkMs(v) // A range error left v at ±Inf, reported as out of range.
	case schema.AttrString:
		return parseDecimal(a.Value, true, true)
	case schema.AttrEmpty:
		return 0, reasonEmpty
	}
	return 0, reasonWrongType
}

func isRangeErr(err error) bool { return errors.Is(err, strconv.ErrRange) }

// attrCount reads an integer attribute ≥ least and ≤ math.MaxUint32, such as
// budget.attempt (least 1) or http.request.resend_count (least 0).
func attrCount(a schema.Attr, least float64) (uint32, string) {
	v, reason := attrNumber(a)
	switch {
	case reason != "":
		return 0, reason
	case v != math.Trunc(v):
		return 0, reasonNotInteger
	case v < 0:
		return 0, reasonNegative
	case v < least:
		return 0, reasonZero
	case v > math.MaxUint32:
		return 0, reasonOutOfRange
	}
	return uint32(v), ""
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// HeaderValue returns the first value of a header or metadata attribute such
// as http.request.header.grpc-timeout. OpenTelemetry records those as string
// arrays (one element per header line); a plain string attribute is accepted
// too, because some instrumentations record headers that way. It fails when
// the attribute has another type, is not a well-formed JSON array of strings,
// or holds no value.
func HeaderValue(a schema.Attr) (string, error) {
	it, reason := newHeaderValues(a)
	if reason == "" {
		v, ok, r := it.next()
		if ok {
			return v, nil
		}
		reason = r
	}
	return "", fmt.Errorf("read header attribute %s: %s", a.Key, reason)
}

// headerValues iterates over the values of a header attribute without
// decoding the JSON array into a slice: spans carry several such attributes
// and Read runs once per span.
type headerValues struct {
	rest   string // unread part of a validated array body, or the single value
	single bool   // the attribute was a plain string
	done   bool
	n      int // values returned so far
}

// newHeaderValues checks a's type and, for a string array, its syntax, so that
// a malformed array is rejected as a whole rather than after the values read
// before the damage.
func newHeaderValues(a schema.Attr) (headerValues, string) {
	switch a.Type {
	case schema.AttrString:
		return headerValues{rest: a.Value, single: true}, ""
	case schema.AttrSlice:
		body, ok := arrayBody(a.Value)
		if !ok || !validStringList(body) {
			return headerValues{}, reasonBadArray
		}
		return headerValues{rest: skipSpace(body)}, ""
	case schema.AttrEmpty:
		return headerValues{}, reasonEmpty
	}
	return headerValues{}, reasonWrongType
}

// next returns the next value. At the end ok is false, and reason says
// "empty array" when there was no value at all.
func (h *headerValues) next() (v string, ok bool, reason string) {
	if h.done || (!h.single && h.rest == "") {
		h.done = true
		if h.n == 0 {
			return "", false, reasonEmptyArray
		}
		return "", false, ""
	}
	h.n++
	if h.single {
		h.done = true
		return h.rest, true, ""
	}
	// The list was validated: rest starts with a well-formed string,
	// followed by white space and either the end or a comma.
	end, slow := scanString(h.rest)
	tok := h.rest[:end]
	rest := skipSpace(h.rest[end:])
	if rest != "" {
		rest = skipSpace(rest[1:])
	}
	h.rest = rest
	if !slow {
		return tok[1 : len(tok)-1], true, ""
	}
	v, ok = decodeJSONString(tok)
	if !ok {
		return "", false, reasonBadArray
	}
	return v, true, ""
}

// decodeJSONString decodes a JSON string token that has escapes or non-ASCII
// bytes. Those are rare in header values, so their decoding (surrogate pairs,
// invalid UTF-8 turned into U+FFFD) is left to encoding/json, and the result
// is exactly what it would decode. It is a function of its own so that the
// variable json.Unmarshal writes to, which escapes to the heap, is only
// allocated on this path.
func decodeJSONString(tok string) (string, bool) {
	var v string
	if err := json.Unmarshal([]byte(tok), &v); err != nil {
		return "", false
	}
	return v, true
}

// arrayBody strips the brackets (and surrounding JSON white space) from a
// JSON array.
func arrayBody(s string) (string, bool) {
	s = skipSpace(s)
	s = trimSpaceRight(s)
	if len(s) < 2 || s[0] != '[' || s[len(s)-1] != ']' {
		return "", false
	}
	return s[1 : len(s)-1], true
}

// validStringList reports whether body is a possibly empty, comma-separated
// list of JSON strings.
func validStringList(body string) bool {
	rest := skipSpace(body)
	if rest == "" {
		return true
	}
	for {
		end, _ := scanString(rest)
		if end < 0 {
			return false
		}
		rest = skipSpace(rest[end:])
		if rest == "" {
			return true
		}
		if rest[0] != ',' {
			return false
		}
		rest = skipSpace(rest[1:])
	}
}

// scanString returns the length of the JSON string token at the start of s
// and whether it needs encoding/json to decode (escapes or non-ASCII bytes),
// or -1 when s does not start with a well-formed string (unterminated, a raw
// control character, or an escape JSON does not define).
func scanString(s string) (end int, slow bool) {
	if s == "" || s[0] != '"' {
		return -1, false
	}
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			return i + 1, slow
		case c < 0x20:
			return -1, false
		case c >= 0x80:
			slow = true
		case c == '\\':
			slow = true
			if i+1 >= len(s) {
				return -1, false
			}
			switch s[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if i+5 >= len(s) || !isHex(s[i+2]) || !isHex(s[i+3]) || !isHex(s[i+4]) || !isHex(s[i+5]) {
					return -1, false
				}
				i += 5
			default:
				return -1, false
			}
		}
	}
	return -1, false
}

func isHex(c byte) bool {
	return isDigit(c) || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(s string) string {
	for len(s) > 0 && isJSONSpace(s[0]) {
		s = s[1:]
	}
	return s
}

func trimSpaceRight(s string) string {
	for len(s) > 0 && isJSONSpace(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}
