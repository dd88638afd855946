package budgetread

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/schema"
)

// TestGRPCTimeoutRoundTrip checks both directions over every unit and a
// spread of magnitudes: an exactly representable duration survives
// Format→Parse unchanged, and any valid header value survives Parse→Format→
// Parse unchanged.
func TestGRPCTimeoutRoundTrip(t *testing.T) {
	units := []struct {
		letter string
		d      time.Duration
	}{{"H", time.Hour}, {"M", time.Minute}, {"S", time.Second}, {"m", time.Millisecond}, {"u", time.Microsecond}, {"n", 1}}
	counts := []int64{0, 1, 7, 10, 59, 60, 1000, 3600, 86400, 12345678, 99999999}
	for _, u := range units {
		for _, n := range counts {
			in := time.Duration(n) * u.d
			if u.d == time.Hour && n > math.MaxInt64/int64(time.Hour) {
				continue // clamped, covered by TestGRPCTimeoutCases
			}
			back, err := ParseGRPCTimeout(FormatGRPCTimeout(in))
			require.NoError(t, err)
			require.Equal(t, in, back, "%d%s", n, u.letter)

			header := strconv.FormatInt(n, 10) + u.letter
			d, err := ParseGRPCTimeout(header)
			require.NoError(t, err, header)
			again, err := ParseGRPCTimeout(FormatGRPCTimeout(d))
			require.NoError(t, err)
			require.Equal(t, d, again, header)
		}
	}
}

func TestParseMillis(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    float64
		wantErr string
	}{
		{name: "integer", in: "500", want: 500},
		{name: "zero", in: "0", want: 0},
		{name: "fraction", in: "12.5", want: 12.5},
		{name: "leading zeros", in: "0007", want: 7},
		{name: "epoch milliseconds", in: "1767225600000", want: 1767225600000},
		{name: "largest value", in: "9007199254740992", want: MaxMs},
		{name: "largest value with a zero fraction", in: "9007199254740992.000", want: MaxMs},
		{name: "one above the largest value rounds onto it but is refused", in: "9007199254740993", wantErr: "out of range"},
		{name: "a fraction above the largest value", in: "9007199254740992.001", wantErr: "out of range"},
		{name: "above the largest value", in: "9007199254740993.5", wantErr: "out of range"},
		{name: "huge", in: "1" + strings.Repeat("0", 400), wantErr: "out of range"},
		{name: "empty", in: "", wantErr: "empty"},
		{name: "negative", in: "-5", wantErr: "negative"},
		{name: "negative zero", in: "-0", wantErr: "negative"},
		{name: "plus sign", in: "+5", wantErr: "not a number"},
		{name: "exponent", in: "1e3", wantErr: "not a number"},
		{name: "hexadecimal", in: "0x10", wantErr: "not a number"},
		{name: "infinity", in: "Inf", wantErr: "not a number"},
		{name: "NaN", in: "NaN", wantErr: "not a number"},
		{name: "leading space", in: " 5", wantErr: "not a number"},
		{name: "trailing space", in: "5 ", wantErr: "not a number"},
		{name: "leading dot", in: ".5", wantErr: "not a number"},
		{name: "trailing dot", in: "5.", wantErr: "not a number"},
		{name: "underscore", in: "1_000", wantErr: "not a number"},
		{name: "unit suffix", in: "500ms", wantErr: "not a number"},
		{name: "comma-joined header lines", in: "500, 600", wantErr: "not a number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseMillis(tt.in)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.ErrorContains(t, err, "parse milliseconds")
				require.Zero(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestHeaderValue(t *testing.T) {
	const key = schema.AttrHeaderRequestTimeoutMs
	tests := []struct {
		name    string
		attr    schema.Attr
		want    string
		wantErr string
	}{
		{name: "string array", attr: schema.Strings(key, "500"), want: "500"},
		{name: "first of several", attr: schema.Strings(key, "500", "600"), want: "500"},
		{name: "plain string", attr: schema.Str(key, "500"), want: "500"},
		{name: "empty plain string is a value", attr: schema.Str(key, ""), want: ""},
		{name: "empty element is a value", attr: schema.Strings(key, ""), want: ""},
		{name: "white space around tokens", attr: schema.Attr{Key: key, Type: schema.AttrSlice, Value: " [ \"5\" ,\n\"6\" ] "}, want: "5"},
		{name: "escaped digits", attr: schema.Attr{Key: key, Type: schema.AttrSlice, Value: `["\u0035\u0030\u0030"]`}, want: "500"},
		{name: "escaped quote and backslash", attr: schema.Attr{Key: key, Type: schema.AttrSlice, Value: `["a\"b\\c\/"]`}, want: `a"b\c/`},
		{name: "escaped HTML as json.Marshal writes it", attr: schema.Strings(key, "<a&b>"), want: "<a&b>"},
		{name: "surrogate pair", attr: schema.Attr{Key: key, Type: schema.AttrSlice, Value: `["\ud83d\ude00"]`}, want: "😀"},
		{name: "non-ASCII", attr: schema.Strings(key, "héllo"), want: "héllo"},
		{name: "comma inside a string", attr: schema.Strings(key, "a,b", "c"), want: "a,b"},
		{name: "empty array", attr: schema.Strings(key), wantErr: "empty array"},
		{name: "not an array", attr: schema.Attr{Key: key, Type: schema.AttrSlice, Value: `"500"`}, wantErr: "malformed string array"},
		{name: "numbers are not strings", attr: schema.Attr{Key: key, Type: schema.AttrSlice, Value: `[500]`}, wantErr: "malformed string array"},
		{name: "unterminated string", attr: schema.Attr{Key: key, Type: schema.AttrSlice, Value: `["500]`}, wantErr: "malformed string array"},
		{name: "trailing comma", attr: schema.Attr{Key: key, Type: schema.AttrSlice, Value: `["500",]`}, wantErr: "malformed string array"},
		{name: "missing comma", attr: schema.Attr{Key: key, Type: schema.AttrSlice, Value: `["5" "6"]`}, wantErr: "malformed string array"},
		{name: "damage after the first value", attr: schema.Attr{Key: key, Type: schema.AttrSlice, Value: `["5", x]`}, wantErr: "malformed string array"},
		{name: "unknown escape", attr: schema.Attr{Key: key, Type: schema.AttrSlice, Value: `["\x35"]`}, wantErr: "malformed string array"},
		{name: "short unicode escape", attr: schema.Attr{Key: key, Type: schema.AttrSlice, Value: `["\u35"]`}, wantErr: "malformed string array"},
		{name: "raw control character", attr: schema.Attr{Key: key, Type: schema.AttrSlice, Value: "[\"5\t\"]"}, wantErr: "malformed string array"},
		{name: "int attribute", attr: schema.Int(key, 500), wantErr: "wrong type"},
		{name: "empty attribute", attr: schema.Attr{Key: key, Type: schema.AttrEmpty}, wantErr: "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := HeaderValue(tt.attr)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.ErrorContains(t, err, "read header attribute "+key)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			if tt.attr.Type == schema.AttrSlice {
				var all []string
				require.NoError(t, json.Unmarshal([]byte(tt.attr.Value), &all))
				require.Equal(t, all[0], got, "must decode as encoding/json does")
			}
		})
	}
}

// FuzzParseGRPCTimeout checks, for any input: ParseGRPCTimeout never panics;
// it accepts exactly the gRPC grammar (1 to 8 ASCII digits and one of
// H M S m u n); a parsed duration is non-negative; and
// Parse(Format(Parse(x))) == Parse(x), so re-encoding a received timeout
// never changes it. For a duration built from the input, Format never
// panics, its output parses, and never gives the receiver less than the
// duration nor more than one unit of rounding beyond it.
func FuzzParseGRPCTimeout(f *testing.F) {
	for _, s := range []string{"1S", "250m", "99999999H", "123456789n", "", "S", "-1S", "1.5S", "0n", "2562048H", " 5m", "5\x00m"} {
		f.Add(s, int64(0))
	}
	f.Add("", int64(math.MaxInt64))
	f.Add("", int64(time.Hour+1))
	f.Fuzz(func(t *testing.T, s string, n int64) {
		d, err := ParseGRPCTimeout(s)
		require.Equal(t, grammarOK(s), err == nil, "%q: %v", s, err)
		if err == nil {
			require.GreaterOrEqual(t, d, time.Duration(0))
			again, err := ParseGRPCTimeout(FormatGRPCTimeout(d))
			require.NoError(t, err)
			require.Equal(t, d, again, "%q", s)
		}

		in := time.Duration(n)
		enc := FormatGRPCTimeout(in)
		require.True(t, grammarOK(enc), enc)
		back, err := ParseGRPCTimeout(enc)
		require.NoError(t, err, enc)
		require.GreaterOrEqual(t, back, max(in, 0), enc)
		if in > 0 && back != math.MaxInt64 {
			unit, _ := grpcTimeoutUnit(enc[len(enc)-1])
			require.Less(t, back-in, unit, enc)
		}
	})
}

// grammarOK is the gRPC TimeoutValue grammar written independently of the
// parser, as the fuzz oracle.
func grammarOK(s string) bool {
	if len(s) < 2 || len(s) > 9 || !strings.ContainsRune("HMSmun", rune(s[len(s)-1])) {
		return false
	}
	for _, c := range []byte(s[:len(s)-1]) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// FuzzParseMillis checks, for any input: ParseMillis never panics; a parsed
// value is finite, non-negative and at most MaxMs; it is what
// strconv.ParseFloat reads from the same text; and only plain decimals
// (digits with an optional fraction) are accepted.
func FuzzParseMillis(f *testing.F) {
	for _, s := range []string{"500", "0", "12.5", "-1", "1e3", "NaN", "Inf", "0x1p4", "", ".5", "5.", "9007199254740993", "1_0", " 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseMillis(s)
		if err != nil {
			require.Zero(t, v)
			return
		}
		require.False(t, math.IsNaN(v) || math.IsInf(v, 0), "%q", s)
		require.GreaterOrEqual(t, v, 0.0, "%q", s)
		require.LessOrEqual(t, v, float64(MaxMs), "%q", s)
		want, perr := strconv.ParseFloat(s, 64)
		require.NoError(t, perr, "%q", s)
		require.Equal(t, want, v, "%q", s)
		require.Equal(t, -1, strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' }), "%q", s)
	})
}
