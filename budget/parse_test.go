package budget

import (
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseMillis(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want float64
		ok   bool
	}{
		{name: "integer", in: "500", want: 500, ok: true},
		{name: "zero", in: "0", want: 0, ok: true},
		{name: "fraction", in: "12.5", want: 12.5, ok: true},
		{name: "leading zeros", in: "007", want: 7, ok: true},
		{name: "2^53", in: "9007199254740992", want: maxMs, ok: true},
		{name: "above 2^53", in: "9007199254740993", ok: false},
		{name: "2^53 and a fraction", in: "9007199254740992.001", ok: false},
		{name: "2^53 with zero fraction", in: "009007199254740992.000", want: maxMs, ok: true},
		{name: "just below 2^53", in: "9007199254740991.9", want: maxMs, ok: true}, // Rounds up; still within the bound.
		{name: "far above", in: "100000000000000000000000000000000", ok: false},
		{name: "beyond float64", in: "1" + strings.Repeat("0", 400), ok: false},
		{name: "empty", in: "", ok: false},
		{name: "minus", in: "-5", ok: false},
		{name: "plus", in: "+5", ok: false},
		{name: "exponent", in: "1e3", ok: false},
		{name: "space", in: " 5", ok: false},
		{name: "unit", in: "500ms", ok: false},
		{name: "leading dot", in: ".5", ok: false},
		{name: "trailing dot", in: "5.", ok: false},
		{name: "hex", in: "0x10", ok: false},
		{name: "NaN", in: "NaN", ok: false},
		{name: "Inf", in: "Inf", ok: false},
		{name: "underscore", in: "1_000", ok: false},
		{name: "list", in: "100, 200", ok: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := parseMillis(tt.in)
			require.Equal(t, tt.ok, ok)
			if tt.ok {
				require.Equal(t, tt.want, got)
			}
		})
	}
}

func TestRetryWait(t *testing.T) {
	tests := []struct {
		name    string
		policy  RetryPolicy
		attempt int
		ceiling time.Duration
	}{
		{name: "first retry", policy: RetryPolicy{Backoff: 100 * time.Millisecond, MaxBackoff: time.Second}, attempt: 2, ceiling: 100 * time.Millisecond},
		{name: "doubles", policy: RetryPolicy{Backoff: 100 * time.Millisecond, MaxBackoff: time.Second}, attempt: 4, ceiling: 400 * time.Millisecond},
		{name: "capped", policy: RetryPolicy{Backoff: 100 * time.Millisecond, MaxBackoff: time.Second}, attempt: 10, ceiling: time.Second},
		{name: "constant without a cap", policy: RetryPolicy{Backoff: 100 * time.Millisecond}, attempt: 6, ceiling: 100 * time.Millisecond},
		{name: "no overflow", policy: RetryPolicy{Backoff: time.Hour, MaxBackoff: time.Duration(math.MaxInt64)}, attempt: 1000, ceiling: time.Duration(math.MaxInt64)},
		{name: "no backoff", policy: RetryPolicy{}, attempt: 3, ceiling: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.ceiling/2, tt.policy.wait(tt.attempt, 0), "the shortest wait is half the ceiling")
			require.LessOrEqual(t, tt.policy.wait(tt.attempt, math.Nextafter(1, 0)), tt.ceiling)
			require.GreaterOrEqual(t, tt.policy.wait(tt.attempt, math.Nextafter(1, 0)), tt.ceiling-tt.ceiling/100-1)
		})
	}
}

// FuzzParseGRPCTimeout checks that parseGRPCTimeout reads back what
// formatGRPCTimeout wrote, never less than it was given and less than one
// unit more (it rounds up, as grpc-go does), and that parsing arbitrary
// input never yields a negative duration. TestGRPCTimeoutCases holds the
// fixed cases.
func FuzzParseGRPCTimeout(f *testing.F) {
	for _, s := range []string{"250m", "99999999H", "0n", "5s", "-1S", "1.5S"} {
		f.Add(s, int64(1500*time.Millisecond))
	}
	f.Fuzz(func(t *testing.T, s string, ns int64) {
		if d, ok := parseGRPCTimeout(s); ok {
			require.GreaterOrEqual(t, d, time.Duration(0))
		}
		d := time.Duration(ns)
		enc := formatGRPCTimeout(d)
		back, ok := parseGRPCTimeout(enc)
		require.True(t, ok, "%q does not parse", enc)
		require.GreaterOrEqual(t, back, max(d, 0), "%v encoded as %q gives less time", d, enc)
		if d > 0 && back != time.Duration(math.MaxInt64) {
			unit, _ := grpcTimeoutUnit(enc[len(enc)-1])
			require.Less(t, back-d, unit, "%v encoded as %q rounds by a unit or more", d, enc)
		}
	})
}

// FuzzHeaderBudget checks the invariant that makes hostile headers harmless:
// whatever the headers say, the budget read from them is finite and, apart
// from deadline headers (which depend on the clock), never negative; a
// relative header can only shrink the budget another one gives.
func FuzzHeaderBudget(f *testing.F) {
	f.Add("500", "2S", "1700000000000")
	f.Add("9007199254740992", "99999999H", "9007199254740992")
	f.Add("-5", "5s", "garbage")
	f.Add("1e9", "", "-1")
	f.Fuzz(func(t *testing.T, ms, grpcTimeout, deadline string) {
		now := time.Unix(1_700_000_000, 0)
		h := http.Header{HeaderTimeoutMs: {ms}, HeaderGRPCTimeout: {grpcTimeout}}
		relative, okRel := headerBudget(h, now, false, 0)
		if okRel {
			require.GreaterOrEqual(t, relative, time.Duration(0))
		}
		h.Set(HeaderDeadline, deadline)
		withDeadline, okDL := headerBudget(h, now, true, 50*time.Millisecond)
		require.Equal(t, okRel || okDL, okDL, "adding a header never loses the others")
		if okRel {
			require.LessOrEqual(t, withDeadline, relative, "a second header can only shrink the budget")
		}
		if v, ok := parseMillis(ms); ok {
			require.False(t, math.IsNaN(v) || math.IsInf(v, 0))
			require.GreaterOrEqual(t, v, 0.0)
			require.LessOrEqual(t, v, float64(maxMs))
		}
	})
}
