package schema

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// startNs is 2026-01-01T00:00:00Z, a whole millisecond.
const startNs = 1_767_225_600_000 * uint64(time.Millisecond)

func serverSpan(attrs ...Attr) *Span {
	return &Span{Kind: KindServer, StartNs: startNs, EndNs: startNs + 1e6, Attrs: attrs}
}

func clientSpan(attrs ...Attr) *Span {
	return &Span{Kind: KindClient, StartNs: startNs, EndNs: startNs + 1e6, Attrs: attrs}
}

func bad(key, reason string) InvalidValue { return InvalidValue{Key: key, Reason: reason} }

func raw(key string, typ AttrType, value string) Attr { return Attr{Key: key, Type: typ, Value: value} }

func TestReadBudgetRecorded(t *testing.T) {
	tests := []struct {
		name string
		span *Span
		want BudgetFacts
	}{
		{name: "nothing", span: serverSpan(), want: BudgetFacts{}},
		{name: "nil span", span: nil, want: BudgetFacts{}},
		{
			name: "typical client span",
			span: clientSpan(Int(AttrTimeoutMs, 300), Double(AttrPropagatedMs, 290.5), Int(AttrAttempt, 2),
				Int(AttrMaxAttempts, 3), Int(AttrBackoffMs, 25)),
			want: BudgetFacts{TimeoutMs: Ms(300), PropagatedMs: Ms(290.5), Attempt: 2, MaxAttempts: 3, BackoffMs: Ms(25)},
		},
		{
			name: "typical server span",
			span: serverSpan(Int(AttrRemainingMs, 800), Str(AttrSource, "propagated")),
			want: BudgetFacts{RemainingMs: Ms(800), Source: SourcePropagated},
		},
		{name: "recorded remaining without source leaves source empty", span: serverSpan(Int(AttrRemainingMs, 800)), want: BudgetFacts{RemainingMs: Ms(800)}},

		// budget.remaining_ms
		{name: "remaining double", span: serverSpan(Double(AttrRemainingMs, 12.5)), want: BudgetFacts{RemainingMs: Ms(12.5)}},
		{name: "remaining string", span: serverSpan(Str(AttrRemainingMs, "250")), want: BudgetFacts{RemainingMs: Ms(250)}},
		{name: "remaining string with exponent", span: serverSpan(Str(AttrRemainingMs, "1.5e+03")), want: BudgetFacts{RemainingMs: Ms(1500)}},
		{name: "remaining negative is kept", span: serverSpan(Int(AttrRemainingMs, -40)), want: BudgetFacts{RemainingMs: Ms(-40)}},
		{name: "remaining negative string is kept", span: serverSpan(Str(AttrRemainingMs, "-40.5")), want: BudgetFacts{RemainingMs: Ms(-40.5)}},
		{name: "remaining zero", span: serverSpan(Int(AttrRemainingMs, 0)), want: BudgetFacts{RemainingMs: Ms(0)}},
		{name: "remaining negative zero reads as zero", span: serverSpan(Str(AttrRemainingMs, "-0")), want: BudgetFacts{RemainingMs: Ms(0)}},
		{name: "remaining at the bound", span: serverSpan(Int(AttrRemainingMs, MaxMs)), want: BudgetFacts{RemainingMs: Ms(MaxMs)}},
		{name: "remaining above the bound", span: serverSpan(Int(AttrRemainingMs, MaxMs+1)), want: BudgetFacts{Invalid: []InvalidValue{bad(AttrRemainingMs, "out of range")}}},
		{name: "remaining below the negative bound", span: serverSpan(Int(AttrRemainingMs, -MaxMs-1)), want: BudgetFacts{Invalid: []InvalidValue{bad(AttrRemainingMs, "out of range")}}},
		{name: "remaining int64 overflow", span: serverSpan(raw(AttrRemainingMs, AttrInt, "99999999999999999999")), want: BudgetFacts{Invalid: []InvalidValue{bad(AttrRemainingMs, "out of range")}}},
		{name: "remaining NaN", span: serverSpan(Double(AttrRemainingMs, math.NaN())), want: BudgetFacts{Invalid: []InvalidValue{bad(AttrRemainingMs, "not finite")}}},
		{name: "remaining infinity", span: serverSpan(Double(AttrRemainingMs, math.Inf(1))), want: BudgetFacts{Invalid: []InvalidValue{bad(AttrRemainingMs, "out of range")}}},
		{name: "remaining double overflow", span: serverSpan(raw(AttrRemainingMs, AttrDouble, "1e400")), want: BudgetFacts{Invalid: []InvalidValue{bad(AttrRemainingMs, "out of range")}}},
		{name: "remaining NaN string", span: serverSpan(Str(AttrRemainingMs, "NaN")), want: BudgetFacts{Invalid: []InvalidValue{bad(AttrRemainingMs, "not a number")}}},
		{name: "remaining hex string", span: serverSpan(Str(AttrRemainingMs, "0x10")), want: BudgetFacts{Invalid: []InvalidValue{bad(AttrRemainingMs, "not a number")}}},
		{name: "remaining with unit", span: serverSpan(Str(AttrRemainingMs, "250ms")), want: BudgetFacts{Invalid: []InvalidValue{bad(AttrRemainingMs, "not a number")}}},
		{name: "remaining empty string", span: serverSpan(Str(AttrRemainingMs, "")), want: BudgetFacts{Invalid: []InvalidValue{bad(AttrRemainingMs, "empty")}}},
		{name: "remaining empty value", span: serverSpan(raw(AttrRemainingMs, AttrEmpty, "")), want: BudgetFacts{Invalid: []InvalidValue{bad(AttrRemainingMs, "empty")}}},
		{name: "remaining bool", span: serverSpan(Bool(AttrRemainingMs, true)), want: BudgetFacts{Invalid: []InvalidValue{bad(AttrRemainingMs, "wrong type")}}},
		{name: "remaining string array", span: serverSpan(Strings(AttrRemainingMs, "250")), want: BudgetFacts{Invalid: []InvalidValue{bad(AttrRemainingMs, "wrong type")}}},
		{name: "remaining corrupt int", span: serverSpan(raw(AttrRemainingMs, AttrInt, "12.5")), want: BudgetFacts{Invalid: []InvalidValue{bad(AttrRemainingMs, "not a number")}}},
		{
			name: "repeated key keeps the first",
			span: serverSpan(Int(AttrRemainingMs, 100), Int(AttrRemainingMs, 900)),
			want: BudgetFacts{RemainingMs: Ms(100), Invalid: []InvalidValue{bad(AttrRemainingMs, "duplicate key")}},
		},

		// budget.timeout_ms, budget.backoff_ms, budget.propagated_ms
		{name: "timeout zero", span: clientSpan(Int(AttrTimeoutMs, 0)), want: BudgetFacts{TimeoutMs: Ms(0)}},
		{name: "timeout string", span: clientSpan(Str(AttrTimeoutMs, "150.25")), want: BudgetFacts{TimeoutMs: Ms(150.25)}},
		{name: "timeout negative", span: clientSpan(Int(AttrTimeoutMs, -1)), want: BudgetFacts{Invalid: []InvalidValue{bad(AttrTimeoutMs, "negative")}}},
		{name: "timeout overflow", span: clientSpan(Double(AttrTimeoutMs, 1e300)), want: BudgetFacts{Invalid: []InvalidValue{bad(AttrTimeoutMs, "out of range")}}},
		{name: "timeout garbage", span: clientSpan(Str(AttrTimeoutMs, "soon")), want: BudgetFacts{Invalid: []InvalidValue{bad(AttrTimeoutMs, "not a number")}}},
		{name: "backoff negative", span: clientSpan(Double(AttrBackoffMs, -0.5)), want: BudgetFacts{Invalid: []InvalidValue{bad(AttrBackoffMs, "negative")}}},
		{name: "backoff wrong type", span: clientSpan(Bool(AttrBackoffMs, false)), want: BudgetFacts{Invalid: []InvalidValue{bad(AttrBackoffMs, "wrong type")}}},
		{name: "propagated negative is kept", span: clientSpan(Int(AttrPropagatedMs, -20)), want: BudgetFacts{PropagatedMs: Ms(-20)}},
		{name: "propagated empty", span: clientSpan(Str(AttrPropagatedMs, "")), want: BudgetFacts{Invalid: []InvalidValue{bad(AttrPropagatedMs, "empty")}}},

		// budget.attempt, budget.max_attempts
		{name: "attempt string", span: clientSpan(Str(AttrAttempt, "3")), want: BudgetFacts{Attempt: 3}},
		{name: "attempt whole double", span: clientSpan(Double(AttrAttempt, 2)), want: BudgetFacts{Attempt: 2}},
		{name: "attempt zero", span: clientSpan(Int(AttrAttempt, 0)), want: BudgetFacts{Invalid: []InvalidValue{bad(AttrAttempt, "zero")}}},
		{name: "attempt negative", span: clientSpan(Int(AttrAttempt, -1)), want: BudgetFacts{Invalid: []InvalidValue{bad(AttrAttempt, "negative")}}},
		{name: "attempt fraction", span: clientSpan(Double(AttrAttempt, 1.5)), want: BudgetFacts{Invalid: []InvalidValue{bad(AttrAttempt, "not an integer")}}},
		{name: "attempt above uint32", span: clientSpan(Int(AttrAttempt, math.MaxUint32+1)), want: BudgetFacts{Invalid: []InvalidValue{bad(AttrAttempt, "out of range")}}},
		{name: "attempt at uint32 max", span: clientSpan(Int(AttrAttempt, math.MaxUint32)), want: BudgetFacts{Attempt: math.MaxUint32}},
		{name: "max attempts zero", span: clientSpan(Int(AttrMaxAttempts, 0)), want: BudgetFacts{Invalid: []InvalidValue{bad(AttrMaxAttempts, "zero")}}},
		{name: "max attempts garbage", span: clientSpan(Str(AttrMaxAttempts, "three")), want: BudgetFacts{Invalid: []InvalidValue{bad(AttrMaxAttempts, "not a number")}}},

		// budget.source
		{name: "source edge", span: serverSpan(Str(AttrSource, "edge")), want: BudgetFacts{Source: SourceEdge}},
		{name: "source default", span: serverSpan(Str(AttrSource, "default")), want: BudgetFacts{Source: SourceDefault}},
		{name: "source none", span: serverSpan(Str(AttrSource, "none")), want: BudgetFacts{Source: SourceNone}},
		{name: "source unknown", span: serverSpan(Str(AttrSource, "Propagated")), want: BudgetFacts{Invalid: []InvalidValue{bad(AttrSource, "unknown value")}}},
		{name: "source empty", span: serverSpan(Str(AttrSource, "")), want: BudgetFacts{Invalid: []InvalidValue{bad(AttrSource, "empty")}}},
		{name: "source wrong type", span: serverSpan(Int(AttrSource, 1)), want: BudgetFacts{Invalid: []InvalidValue{bad(AttrSource, "wrong type")}}},

		// budget.rejected
		{name: "rejected bool", span: serverSpan(Bool(AttrRejected, true)), want: BudgetFacts{Rejected: true}},
		{name: "rejected false", span: serverSpan(Bool(AttrRejected, false)), want: BudgetFacts{}},
		{name: "rejected string", span: serverSpan(Str(AttrRejected, "true")), want: BudgetFacts{Rejected: true}},
		{name: "rejected upper-case string", span: serverSpan(Str(AttrRejected, "TRUE")), want: BudgetFacts{Rejected: true}},
		{name: "rejected string false", span: serverSpan(Str(AttrRejected, "false")), want: BudgetFacts{}},
		{name: "rejected garbage", span: serverSpan(Str(AttrRejected, "yes")), want: BudgetFacts{Invalid: []InvalidValue{bad(AttrRejected, "unknown value")}}},
		{name: "rejected empty", span: serverSpan(Str(AttrRejected, "")), want: BudgetFacts{Invalid: []InvalidValue{bad(AttrRejected, "empty")}}},
		{name: "rejected int", span: serverSpan(Int(AttrRejected, 1)), want: BudgetFacts{Invalid: []InvalidValue{bad(AttrRejected, "wrong type")}}},
		{name: "rejected empty value", span: serverSpan(raw(AttrRejected, AttrEmpty, "")), want: BudgetFacts{Invalid: []InvalidValue{bad(AttrRejected, "empty")}}},
		{name: "source empty value", span: serverSpan(raw(AttrSource, AttrEmpty, "")), want: BudgetFacts{Invalid: []InvalidValue{bad(AttrSource, "empty")}}},

		{
			name: "several bad values are all listed, in contract order",
			span: clientSpan(Str(AttrTimeoutMs, "x"), Int(AttrAttempt, 0), Int(AttrBackoffMs, -3), Int(AttrMaxAttempts, 2)),
			want: BudgetFacts{MaxAttempts: 2, Invalid: []InvalidValue{
				bad(AttrTimeoutMs, "not a number"), bad(AttrBackoffMs, "negative"), bad(AttrAttempt, "zero"),
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, ReadBudget(tt.span))
		})
	}
}

func TestReadBudgetInferredBudget(t *testing.T) {
	deadline := func(offsetMs int64) Attr {
		return Strings(AttrHeaderRequestDeadline, strconv.FormatInt(int64(startNs/1e6)+offsetMs, 10))
	}
	inferred := func(ms float64, invalid ...InvalidValue) BudgetFacts {
		return BudgetFacts{RemainingMs: Ms(ms), Inferred: true, Invalid: invalid}
	}
	only := func(invalid ...InvalidValue) BudgetFacts { return BudgetFacts{Invalid: invalid} }
	tests := []struct {
		name string
		span *Span
		want BudgetFacts
	}{
		{name: "x-request-timeout-ms", span: serverSpan(Strings(AttrHeaderRequestTimeoutMs, "500")), want: inferred(500)},
		{name: "x-request-timeout-ms fraction", span: serverSpan(Strings(AttrHeaderRequestTimeoutMs, "12.5")), want: inferred(12.5)},
		{name: "x-request-timeout-ms plain string", span: serverSpan(Str(AttrHeaderRequestTimeoutMs, "500")), want: inferred(500)},
		{name: "first valid of several values", span: serverSpan(Strings(AttrHeaderRequestTimeoutMs, "soon", "500", "600")), want: inferred(500)},
		{name: "zero is an expired budget", span: serverSpan(Strings(AttrHeaderRequestTimeoutMs, "0")), want: inferred(0)},
		{name: "grpc-timeout header hours", span: serverSpan(Strings(AttrHeaderGRPCTimeout, "1H")), want: inferred(3_600_000)},
		{name: "grpc-timeout header minutes", span: serverSpan(Strings(AttrHeaderGRPCTimeout, "2M")), want: inferred(120_000)},
		{name: "grpc-timeout header seconds", span: serverSpan(Strings(AttrHeaderGRPCTimeout, "2S")), want: inferred(2000)},
		{name: "grpc-timeout header milliseconds", span: serverSpan(Strings(AttrHeaderGRPCTimeout, "250m")), want: inferred(250)},
		{name: "grpc-timeout header microseconds", span: serverSpan(Strings(AttrHeaderGRPCTimeout, "1500u")), want: inferred(1.5)},
		{name: "grpc-timeout header nanoseconds", span: serverSpan(Strings(AttrHeaderGRPCTimeout, "2500000n")), want: inferred(2.5)},
		{name: "grpc-timeout eight digits", span: serverSpan(Strings(AttrHeaderGRPCTimeout, "12345678u")), want: inferred(12345.678)},
		{name: "grpc-timeout nine digits", span: serverSpan(Strings(AttrHeaderGRPCTimeout, "123456789u")), want: only(bad(AttrHeaderGRPCTimeout, "more than 8 digits"))},
		{name: "grpc-timeout missing unit", span: serverSpan(Strings(AttrHeaderGRPCTimeout, "250")), want: only(bad(AttrHeaderGRPCTimeout, "missing unit"))},
		{name: "grpc-timeout sign", span: serverSpan(Strings(AttrHeaderGRPCTimeout, "-250m")), want: only(bad(AttrHeaderGRPCTimeout, "not a digit"))},
		{name: "grpc-timeout space", span: serverSpan(Strings(AttrHeaderGRPCTimeout, "250 m")), want: only(bad(AttrHeaderGRPCTimeout, "not a digit"))},
		{name: "grpc-timeout clamped hours", span: serverSpan(Strings(AttrHeaderGRPCTimeout, "99999999H")), want: inferred(float64(math.MaxInt64) / 1e6)},
		{name: "grpc metadata", span: serverSpan(Strings(AttrMetadataGRPCTimeout, "750m")), want: inferred(750)},
		{name: "grpc metadata plain string", span: serverSpan(Str(AttrMetadataGRPCTimeout, "3S")), want: inferred(3000)},
		{name: "envoy expected timeout", span: serverSpan(Strings(AttrHeaderEnvoyExpectedMs, "1500")), want: inferred(1500)},
		{name: "envoy expected timeout negative", span: serverSpan(Strings(AttrHeaderEnvoyExpectedMs, "-1500")), want: only(bad(AttrHeaderEnvoyExpectedMs, "negative"))},
		{name: "deadline ahead of the span start", span: serverSpan(deadline(250)), want: inferred(250)},
		{name: "deadline at the span start", span: serverSpan(deadline(0)), want: inferred(0)},
		{name: "deadline already past", span: serverSpan(deadline(-1200)), want: inferred(-1200)},
		{
			name: "deadline against a sub-millisecond start",
			span: &Span{Kind: KindServer, StartNs: startNs + 400_000, Attrs: Attributes{deadline(250)}},
			want: inferred(249.6),
		},
		{name: "deadline fraction", span: serverSpan(Strings(AttrHeaderRequestDeadline, strconv.FormatInt(int64(startNs/1e6)+10, 10)+".5")), want: inferred(10.5)},
		{
			name: "deadline without span start",
			span: &Span{Kind: KindServer, Attrs: Attributes{deadline(250)}},
			want: only(bad(AttrHeaderRequestDeadline, "span has no start time")),
		},
		{name: "deadline negative", span: serverSpan(Strings(AttrHeaderRequestDeadline, "-5")), want: only(bad(AttrHeaderRequestDeadline, "negative"))},
		{name: "deadline overflow", span: serverSpan(Strings(AttrHeaderRequestDeadline, "9007199254740993")), want: only(bad(AttrHeaderRequestDeadline, "out of range"))},
		{name: "deadline in RFC 3339", span: serverSpan(Strings(AttrHeaderRequestDeadline, "2026-01-01T00:00:01Z")), want: only(bad(AttrHeaderRequestDeadline, "not a number"))},

		// Malformed header attributes.
		{name: "negative", span: serverSpan(Strings(AttrHeaderRequestTimeoutMs, "-5")), want: only(bad(AttrHeaderRequestTimeoutMs, "negative"))},
		{name: "overflow", span: serverSpan(Strings(AttrHeaderRequestTimeoutMs, "19007199254740993")), want: only(bad(AttrHeaderRequestTimeoutMs, "out of range"))},
		{name: "exponent", span: serverSpan(Strings(AttrHeaderRequestTimeoutMs, "1e3")), want: only(bad(AttrHeaderRequestTimeoutMs, "not a number"))},
		{name: "NaN", span: serverSpan(Strings(AttrHeaderRequestTimeoutMs, "NaN")), want: only(bad(AttrHeaderRequestTimeoutMs, "not a number"))},
		{name: "empty value", span: serverSpan(Strings(AttrHeaderRequestTimeoutMs, "")), want: only(bad(AttrHeaderRequestTimeoutMs, "empty"))},
		{name: "empty plain string", span: serverSpan(Str(AttrHeaderRequestTimeoutMs, "")), want: only(bad(AttrHeaderRequestTimeoutMs, "empty"))},
		{name: "empty array", span: serverSpan(Strings(AttrHeaderRequestTimeoutMs)), want: only(bad(AttrHeaderRequestTimeoutMs, "empty array"))},
		{name: "no valid value reports the first reason", span: serverSpan(Strings(AttrHeaderRequestTimeoutMs, "x", "-1")), want: only(bad(AttrHeaderRequestTimeoutMs, "not a number"))},
		{name: "number array", span: serverSpan(raw(AttrHeaderRequestTimeoutMs, AttrSlice, "[500]")), want: only(bad(AttrHeaderRequestTimeoutMs, "malformed string array"))},
		{name: "broken JSON", span: serverSpan(raw(AttrHeaderRequestTimeoutMs, AttrSlice, `["500"`)), want: only(bad(AttrHeaderRequestTimeoutMs, "malformed string array"))},
		{name: "escaped digits", span: serverSpan(raw(AttrHeaderRequestTimeoutMs, AttrSlice, `["\u0035\u0030"]`)), want: inferred(50)},
		{name: "int attribute", span: serverSpan(Int(AttrHeaderRequestTimeoutMs, 500)), want: only(bad(AttrHeaderRequestTimeoutMs, "wrong type"))},
		{name: "bool attribute", span: serverSpan(Bool(AttrHeaderGRPCTimeout, true)), want: only(bad(AttrHeaderGRPCTimeout, "wrong type"))},

		// Priority.
		{
			name: "recorded remaining beats every header",
			span: serverSpan(Strings(AttrHeaderRequestTimeoutMs, "500"), Int(AttrRemainingMs, 90), Strings(AttrHeaderGRPCTimeout, "1S")),
			want: BudgetFacts{RemainingMs: Ms(90)},
		},
		{
			name: "recorded negative remaining beats a header",
			span: serverSpan(Int(AttrRemainingMs, -5), Strings(AttrHeaderRequestTimeoutMs, "500")),
			want: BudgetFacts{RemainingMs: Ms(-5)},
		},
		{
			name: "unusable recorded remaining falls back to a header",
			span: serverSpan(Str(AttrRemainingMs, "lots"), Strings(AttrHeaderRequestTimeoutMs, "500")),
			want: inferred(500, bad(AttrRemainingMs, "not a number")),
		},
		{
			name: "a bad header is reported even when a recorded value makes it unnecessary",
			span: serverSpan(Int(AttrRemainingMs, 90), Strings(AttrHeaderGRPCTimeout, "1s")),
			want: BudgetFacts{RemainingMs: Ms(90), Invalid: []InvalidValue{bad(AttrHeaderGRPCTimeout, "unknown unit")}},
		},
		{
			name: "x-request-timeout-ms beats grpc-timeout",
			span: serverSpan(deadline(9), Strings(AttrHeaderEnvoyExpectedMs, "8"), Strings(AttrMetadataGRPCTimeout, "7m"), Strings(AttrHeaderGRPCTimeout, "6m"), Strings(AttrHeaderRequestTimeoutMs, "5")),
			want: inferred(5),
		},
		{
			name: "grpc-timeout header beats metadata",
			span: serverSpan(deadline(9), Strings(AttrHeaderEnvoyExpectedMs, "8"), Strings(AttrMetadataGRPCTimeout, "7m"), Strings(AttrHeaderGRPCTimeout, "6m")),
			want: inferred(6),
		},
		{
			name: "grpc metadata beats envoy",
			span: serverSpan(deadline(9), Strings(AttrHeaderEnvoyExpectedMs, "8"), Strings(AttrMetadataGRPCTimeout, "7m")),
			want: inferred(7),
		},
		{
			name: "envoy beats the deadline",
			span: serverSpan(deadline(9), Strings(AttrHeaderEnvoyExpectedMs, "8")),
			want: inferred(8),
		},
		{
			name: "an invalid higher-priority header yields to the next",
			span: serverSpan(Strings(AttrHeaderRequestTimeoutMs, "-5"), Strings(AttrHeaderGRPCTimeout, "6m")),
			want: inferred(6, bad(AttrHeaderRequestTimeoutMs, "negative")),
		},

		// Span kinds.
		{
			name: "client span headers are the propagated budget",
			span: clientSpan(Strings(AttrHeaderRequestTimeoutMs, "500")),
			want: BudgetFacts{PropagatedMs: Ms(500), Inferred: true},
		},
		{
			name: "client span recorded propagated beats the header",
			span: clientSpan(Int(AttrPropagatedMs, 400), Strings(AttrHeaderGRPCTimeout, "500m")),
			want: BudgetFacts{PropagatedMs: Ms(400)},
		},
		{
			name: "producer span deadline header",
			span: &Span{Kind: KindProducer, StartNs: startNs, Attrs: Attributes{deadline(100)}},
			want: BudgetFacts{PropagatedMs: Ms(100), Inferred: true},
		},
		{
			name: "consumer span",
			span: &Span{Kind: KindConsumer, StartNs: startNs, Attrs: Attributes{Strings(AttrHeaderRequestTimeoutMs, "40")}},
			want: inferred(40),
		},
		{
			name: "internal span",
			span: &Span{Kind: KindInternal, StartNs: startNs, Attrs: Attributes{Strings(AttrHeaderRequestTimeoutMs, "40")}},
			want: inferred(40),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ReadBudget(tt.span)
			if tt.want.RemainingMs != nil && got.RemainingMs != nil {
				// Sub-millisecond conversions go through float division.
				require.InDelta(t, *tt.want.RemainingMs, *got.RemainingMs, 1e-9)
				got.RemainingMs = tt.want.RemainingMs
			}
			require.Equal(t, tt.want, got)
		})
	}
}

func TestReadBudgetAttempt(t *testing.T) {
	tests := []struct {
		name        string
		span        *Span
		wantAttempt uint32
		wantInvalid []InvalidValue
	}{
		{name: "none", span: clientSpan(), wantAttempt: 0},
		{name: "resend count zero is the first attempt", span: clientSpan(Int(AttrHTTPResendCount, 0)), wantAttempt: 1},
		{name: "resend count two is the third attempt", span: clientSpan(Int(AttrHTTPResendCount, 2)), wantAttempt: 3},
		{name: "resend count string", span: clientSpan(Str(AttrHTTPResendCount, "1")), wantAttempt: 2},
		{name: "resend count negative", span: clientSpan(Int(AttrHTTPResendCount, -1)), wantInvalid: []InvalidValue{bad(AttrHTTPResendCount, "negative")}},
		{name: "resend count fraction", span: clientSpan(Double(AttrHTTPResendCount, 1.5)), wantInvalid: []InvalidValue{bad(AttrHTTPResendCount, "not an integer")}},
		{name: "resend count at uint32 max", span: clientSpan(Int(AttrHTTPResendCount, math.MaxUint32)), wantInvalid: []InvalidValue{bad(AttrHTTPResendCount, "out of range")}},
		{name: "resend count wrong type", span: clientSpan(Strings(AttrHTTPResendCount, "1")), wantInvalid: []InvalidValue{bad(AttrHTTPResendCount, "wrong type")}},
		{name: "grpc previous attempts", span: serverSpan(Strings(AttrGRPCPreviousAttempts, "2")), wantAttempt: 3},
		{name: "grpc previous attempts zero", span: serverSpan(Strings(AttrGRPCPreviousAttempts, "0")), wantAttempt: 1},
		{name: "grpc previous attempts plain string", span: serverSpan(Str(AttrGRPCPreviousAttempts, "1")), wantAttempt: 2},
		{name: "grpc previous attempts negative", span: serverSpan(Strings(AttrGRPCPreviousAttempts, "-1")), wantInvalid: []InvalidValue{bad(AttrGRPCPreviousAttempts, "negative")}},
		{name: "grpc previous attempts garbage", span: serverSpan(Strings(AttrGRPCPreviousAttempts, "two")), wantInvalid: []InvalidValue{bad(AttrGRPCPreviousAttempts, "not an integer")}},
		{name: "grpc previous attempts overflow", span: serverSpan(Strings(AttrGRPCPreviousAttempts, "4294967295")), wantInvalid: []InvalidValue{bad(AttrGRPCPreviousAttempts, "out of range")}},
		{name: "grpc previous attempts huge", span: serverSpan(Strings(AttrGRPCPreviousAttempts, "99999999999999999999999")), wantInvalid: []InvalidValue{bad(AttrGRPCPreviousAttempts, "out of range")}},
		{name: "grpc previous attempts empty", span: serverSpan(Strings(AttrGRPCPreviousAttempts, "")), wantInvalid: []InvalidValue{bad(AttrGRPCPreviousAttempts, "empty")}},
		{name: "envoy attempt count is 1-based", span: serverSpan(Strings(AttrHeaderEnvoyAttempt, "3")), wantAttempt: 3},
		{name: "envoy attempt count zero", span: serverSpan(Strings(AttrHeaderEnvoyAttempt, "0")), wantInvalid: []InvalidValue{bad(AttrHeaderEnvoyAttempt, "zero")}},
		{name: "envoy attempt count fraction", span: serverSpan(Strings(AttrHeaderEnvoyAttempt, "1.0")), wantInvalid: []InvalidValue{bad(AttrHeaderEnvoyAttempt, "not an integer")}},
		{name: "envoy attempt count first valid", span: serverSpan(Strings(AttrHeaderEnvoyAttempt, "0", "2")), wantAttempt: 2},
		{
			name:        "recorded attempt beats every fallback",
			span:        clientSpan(Int(AttrHTTPResendCount, 5), Int(AttrAttempt, 2), Strings(AttrGRPCPreviousAttempts, "7"), Strings(AttrHeaderEnvoyAttempt, "9")),
			wantAttempt: 2,
		},
		{
			name:        "resend count beats grpc previous attempts",
			span:        clientSpan(Strings(AttrHeaderEnvoyAttempt, "9"), Strings(AttrGRPCPreviousAttempts, "7"), Int(AttrHTTPResendCount, 5)),
			wantAttempt: 6,
		},
		{
			name:        "grpc previous attempts beat envoy",
			span:        serverSpan(Strings(AttrHeaderEnvoyAttempt, "9"), Strings(AttrGRPCPreviousAttempts, "7")),
			wantAttempt: 8,
		},
		{
			name:        "an unusable recorded attempt falls back",
			span:        clientSpan(Int(AttrAttempt, 0), Int(AttrHTTPResendCount, 1)),
			wantAttempt: 2,
			wantInvalid: []InvalidValue{bad(AttrAttempt, "zero")},
		},
		{
			name:        "an unusable fallback yields to the next",
			span:        serverSpan(Int(AttrHTTPResendCount, -1), Strings(AttrHeaderEnvoyAttempt, "2")),
			wantAttempt: 2,
			wantInvalid: []InvalidValue{bad(AttrHTTPResendCount, "negative")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ReadBudget(tt.span)
			require.Equal(t, tt.wantAttempt, got.Attempt)
			require.Equal(t, tt.wantInvalid, got.Invalid)
		})
	}
}

// timeoutCase is one span of the timeout evidence table: attributes on a
// CLIENT span, with a status, a status description and events.
type timeoutCase struct {
	name          string
	attrs         []Attr
	status        StatusCode
	msg           string
	events        []Event
	want          bool
	wantCancelled bool
	wantInvalid   []InvalidValue
}

func (tc timeoutCase) span() *Span {
	s := clientSpan(tc.attrs...)
	s.StatusCode, s.StatusMessage, s.Events = tc.status, tc.msg, tc.events
	return s
}

// exc is an exception event; an empty typ or msg leaves the attribute out.
func exc(typ, msg string) Event {
	e := Event{Name: EventException, TimeNs: startNs + 5e5}
	if typ != "" {
		e.Attrs = append(e.Attrs, Str(AttrExceptionType, typ))
	}
	if msg != "" {
		e.Attrs = append(e.Attrs, Str(AttrExceptionMessage, msg))
	}
	return e
}

func excs(events ...Event) []Event { return events }

// The .NET HttpClient's message when its own Timeout fires: it throws
// TaskCanceledException, and says why.
const dotnetHTTPTimeout = "The request was canceled due to the configured HttpClient.Timeout of 100 seconds elapsing."

// timeoutCases is the table of every timeout and cancellation convention
// ReadBudget reads (docs/attributes.md §3), each with negatives. Status
// codes default to Unset: free text counts only with StatusError.
func timeoutCases() []timeoutCase {
	const failed = StatusError
	return []timeoutCase{
		{name: "no evidence", want: false},

		// error.type
		{name: "error.type timeout", attrs: []Attr{Str(AttrErrorType, "timeout")}, want: true},
		{name: "error.type upper case", attrs: []Attr{Str(AttrErrorType, "TIMEOUT")}, want: true},
		{name: "error.type Go deadline", attrs: []Attr{Str(AttrErrorType, "context.DeadlineExceeded")}, want: true},
		{name: "error.type gRPC name", attrs: []Attr{Str(AttrErrorType, "DEADLINE_EXCEEDED")}, want: true},
		{name: "error.type Java exception", attrs: []Attr{Str(AttrErrorType, "java.net.SocketTimeoutException")}, want: true},
		{name: "error.type errno", attrs: []Attr{Str(AttrErrorType, "ETIMEDOUT")}, want: true},
		{name: "error.type phrase", attrs: []Attr{Str(AttrErrorType, "request timed out")}, want: true},
		{name: "error.type Go cancellation", attrs: []Attr{Str(AttrErrorType, "context.Canceled")}, want: true, wantCancelled: true},
		{name: "error.type cancelled", attrs: []Attr{Str(AttrErrorType, "cancelled")}, want: true, wantCancelled: true},
		{name: "error.type .NET cancellation", attrs: []Attr{Str(AttrErrorType, "System.Threading.Tasks.TaskCanceledException")}, want: true, wantCancelled: true},
		{name: "error.type other error", attrs: []Attr{Str(AttrErrorType, "500")}, want: false},
		{name: "error.type other exception", attrs: []Attr{Str(AttrErrorType, "java.io.IOException")}, want: false},
		{name: "error.type empty", attrs: []Attr{Str(AttrErrorType, "")}, wantInvalid: []InvalidValue{bad(AttrErrorType, "empty")}},
		{name: "error.type wrong type", attrs: []Attr{Int(AttrErrorType, 504)}, wantInvalid: []InvalidValue{bad(AttrErrorType, "wrong type")}},

		// rpc.grpc.status_code (older semconv, a number)
		{name: "grpc deadline exceeded", attrs: []Attr{Int(AttrRPCGRPCStatusCode, 4)}, want: true},
		{name: "grpc cancelled", attrs: []Attr{Int(AttrRPCGRPCStatusCode, 1)}, want: true, wantCancelled: true},
		{name: "grpc ok", attrs: []Attr{Int(AttrRPCGRPCStatusCode, 0)}, want: false},
		{name: "grpc unknown", attrs: []Attr{Int(AttrRPCGRPCStatusCode, 2)}, want: false},
		{name: "grpc unavailable", attrs: []Attr{Int(AttrRPCGRPCStatusCode, 14)}, want: false},
		{name: "grpc code as string", attrs: []Attr{Str(AttrRPCGRPCStatusCode, "4")}, want: true},
		{name: "grpc cancelled code as string", attrs: []Attr{Str(AttrRPCGRPCStatusCode, "1")}, want: true, wantCancelled: true},
		{name: "grpc code as whole double", attrs: []Attr{Double(AttrRPCGRPCStatusCode, 4)}, want: true},
		{name: "grpc code garbage", attrs: []Attr{Str(AttrRPCGRPCStatusCode, "DEADLINE")}, wantInvalid: []InvalidValue{bad(AttrRPCGRPCStatusCode, "not a number")}},
		{name: "grpc code negative", attrs: []Attr{Int(AttrRPCGRPCStatusCode, -4)}, wantInvalid: []InvalidValue{bad(AttrRPCGRPCStatusCode, "negative")}},

		// rpc.response.status_code (newer semconv, a string)
		{name: "rpc response deadline exceeded", attrs: []Attr{Str(AttrRPCResponseStatusCode, "DEADLINE_EXCEEDED")}, want: true},
		{name: "rpc response lower case", attrs: []Attr{Str(AttrRPCResponseStatusCode, "deadline_exceeded")}, want: true},
		{name: "rpc response mixed case", attrs: []Attr{Str(AttrRPCResponseStatusCode, "Deadline_Exceeded")}, want: true},
		{name: "rpc response cancelled", attrs: []Attr{Str(AttrRPCResponseStatusCode, "CANCELLED")}, want: true, wantCancelled: true},
		{name: "rpc response mixed-case cancelled", attrs: []Attr{Str(AttrRPCResponseStatusCode, "Cancelled")}, want: true, wantCancelled: true},
		{name: "rpc response connect spelling", attrs: []Attr{Str(AttrRPCResponseStatusCode, "canceled")}, want: true, wantCancelled: true},
		{name: "rpc response ok", attrs: []Attr{Str(AttrRPCResponseStatusCode, "OK")}, want: false},
		{name: "rpc response unavailable", attrs: []Attr{Str(AttrRPCResponseStatusCode, "UNAVAILABLE")}, want: false},
		{
			name:  "rpc response number of a gRPC system",
			attrs: []Attr{Str(AttrRPCResponseStatusCode, "4"), Str(AttrRPCSystemName, "grpc")},
			want:  true,
		},
		{
			name:  "rpc response cancelled number of a gRPC system, older rpc.system",
			attrs: []Attr{Str(AttrRPCResponseStatusCode, "1"), Str(AttrRPCSystem, "grpc")},
			want:  true, wantCancelled: true,
		},
		{name: "rpc response number without an RPC system is not read", attrs: []Attr{Str(AttrRPCResponseStatusCode, "4")}, want: false},
		{
			name:  "rpc response number of another RPC system is not a gRPC code",
			attrs: []Attr{Str(AttrRPCResponseStatusCode, "4"), Str(AttrRPCSystemName, "jsonrpc")},
			want:  false,
		},
		{
			name:  "rpc.system.name wins over rpc.system",
			attrs: []Attr{Str(AttrRPCResponseStatusCode, "4"), Str(AttrRPCSystemName, "dubbo"), Str(AttrRPCSystem, "grpc")},
			want:  false,
		},
		{
			name:  "rpc response number beyond any code",
			attrs: []Attr{Str(AttrRPCResponseStatusCode, "99999999999"), Str(AttrRPCSystemName, "grpc")},
			want:  false,
		},
		{name: "rpc response JSON-RPC error code", attrs: []Attr{Str(AttrRPCResponseStatusCode, "-32603"), Str(AttrRPCSystemName, "jsonrpc")}, want: false},
		{name: "rpc response numeric code is not the string form", attrs: []Attr{Int(AttrRPCResponseStatusCode, 4)}, wantInvalid: []InvalidValue{bad(AttrRPCResponseStatusCode, "wrong type")}},
		{name: "rpc response empty", attrs: []Attr{Str(AttrRPCResponseStatusCode, "")}, wantInvalid: []InvalidValue{bad(AttrRPCResponseStatusCode, "empty")}},

		// http.response.status_code (newer semconv) and http.status_code (older)
		{name: "http 504", attrs: []Attr{Int(AttrHTTPStatusCode, 504)}, want: true},
		{name: "http 499", attrs: []Attr{Int(AttrHTTPStatusCode, 499)}, want: true, wantCancelled: true},
		{name: "http 408", attrs: []Attr{Int(AttrHTTPStatusCode, 408)}, want: true},
		{name: "http 500", attrs: []Attr{Int(AttrHTTPStatusCode, 500)}, want: false},
		{name: "http 200", attrs: []Attr{Int(AttrHTTPStatusCode, 200)}, want: false},
		{name: "http code as string", attrs: []Attr{Str(AttrHTTPStatusCode, "504")}, want: true},
		{name: "http code fraction", attrs: []Attr{Double(AttrHTTPStatusCode, 504.5)}, wantInvalid: []InvalidValue{bad(AttrHTTPStatusCode, "not an integer")}},
		{name: "http code bool", attrs: []Attr{Bool(AttrHTTPStatusCode, true)}, wantInvalid: []InvalidValue{bad(AttrHTTPStatusCode, "wrong type")}},
		{name: "old http 504", attrs: []Attr{Int(AttrHTTPStatusCodeOld, 504)}, want: true},
		{name: "old http 408", attrs: []Attr{Int(AttrHTTPStatusCodeOld, 408)}, want: true},
		{name: "old http 499", attrs: []Attr{Int(AttrHTTPStatusCodeOld, 499)}, want: true, wantCancelled: true},
		{name: "old http 500", attrs: []Attr{Int(AttrHTTPStatusCodeOld, 500)}, want: false},
		{name: "old http 200", attrs: []Attr{Int(AttrHTTPStatusCodeOld, 200)}, want: false},
		{name: "old http code as string", attrs: []Attr{Str(AttrHTTPStatusCodeOld, "504")}, want: true},
		{name: "old http code garbage", attrs: []Attr{Str(AttrHTTPStatusCodeOld, "Gateway Timeout")}, wantInvalid: []InvalidValue{bad(AttrHTTPStatusCodeOld, "not a number")}},
		{name: "the newer http code wins: 200 over an older 504", attrs: []Attr{Int(AttrHTTPStatusCodeOld, 504), Int(AttrHTTPStatusCode, 200)}, want: false},
		{name: "the newer http code wins: 504 over an older 200", attrs: []Attr{Int(AttrHTTPStatusCode, 504), Int(AttrHTTPStatusCodeOld, 200)}, want: true},
		{
			name:  "an unusable newer http code falls back to the older",
			attrs: []Attr{Str(AttrHTTPStatusCode, "x"), Int(AttrHTTPStatusCodeOld, 499)},
			want:  true, wantCancelled: true,
			wantInvalid: []InvalidValue{bad(AttrHTTPStatusCode, "not a number")},
		},
		{
			name:        "an unusable older http code is listed beside a usable newer one",
			attrs:       []Attr{Int(AttrHTTPStatusCode, 504), Bool(AttrHTTPStatusCodeOld, true)},
			want:        true,
			wantInvalid: []InvalidValue{bad(AttrHTTPStatusCodeOld, "wrong type")},
		},

		// The status description, on a failed span.
		{name: "description Go deadline", status: failed, msg: "context deadline exceeded", want: true},
		{name: "description deadline exceeded", status: failed, msg: "deadline exceeded after 0.999870042s", want: true},
		{name: "description DeadlineExceeded", status: failed, msg: "DeadlineExceeded", want: true},
		{name: "description DEADLINE_EXCEEDED", status: failed, msg: "DEADLINE_EXCEEDED", want: true},
		{name: "description timed out", status: failed, msg: "Read timed out", want: true},
		{name: "description timeout", status: failed, msg: "timeout", want: true},
		{name: "description i/o timeout", status: failed, msg: "dial tcp 10.0.3.7:443: i/o timeout", want: true},
		{
			name: "description of a net/http client timeout", status: failed,
			msg:  `Get "http://payments:8080/charge": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`,
			want: true,
		},
		{
			name: "description of a cancellation explained by a client timeout", status: failed,
			msg:  "net/http: request canceled (Client.Timeout exceeded while awaiting headers)",
			want: true,
		},
		{name: "description .NET HttpClient timeout", status: failed, msg: dotnetHTTPTimeout, want: true},
		{name: "description Go cancellation", status: failed, msg: "context canceled", want: true, wantCancelled: true},
		{name: "description canceled", status: failed, msg: "canceled", want: true, wantCancelled: true},
		{name: "description cancelled", status: failed, msg: "cancelled", want: true, wantCancelled: true},
		{name: "description CANCELLED", status: failed, msg: "CANCELLED", want: true, wantCancelled: true},
		{name: "description .NET cancellation", status: failed, msg: "The operation was canceled.", want: true, wantCancelled: true},
		{
			name: "description: a quoted URL naming a timeout does not count", status: failed,
			msg:  `Post "http://search:8080/timeout-test": context canceled`,
			want: true, wantCancelled: true,
		},
		{
			name: "description: a quoted URL naming a cancellation does not count", status: failed,
			msg:  `Get "http://orders:8080/cancel": context deadline exceeded`,
			want: true,
		},
		{name: "description: only a quoted timeout", status: failed, msg: `GET "http://a/timeout": connection refused`, want: false},
		{name: "description: an unclosed quote is read", status: failed, msg: `bad "context deadline exceeded`, want: true},
		{name: "description gRPC deadline", status: failed, msg: "rpc error: code = DeadlineExceeded desc = context deadline exceeded", want: true},
		{name: "description gRPC cancellation", status: failed, msg: "rpc error: code = Canceled desc = context canceled", want: true, wantCancelled: true},
		{
			name: "description: the gRPC code wins over its message, canceled", status: failed,
			msg:  "rpc error: code = Canceled desc = context deadline exceeded",
			want: true, wantCancelled: true,
		},
		{
			name: "description: the gRPC code wins over its message, deadline", status: failed,
			msg:  "rpc error: code = DeadlineExceeded desc = context canceled",
			want: true,
		},
		{
			name: "description: another gRPC code is neither, whatever it quotes", status: failed,
			msg:  `rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp 10.0.3.7:443: i/o timeout"`,
			want: false,
		},
		{
			name: "description: a wrapped gRPC error is read by its code", status: failed,
			msg:  "charge: rpc error: code = Unknown desc = query: context deadline exceeded",
			want: false,
		},
		{name: "description other error", status: failed, msg: "connection refused", want: false},
		{name: "description empty", status: failed, want: false},
		{name: "description of an OK span does not count", status: StatusOK, msg: "retried after a timeout", want: false},
		{name: "description of an unset span does not count", status: StatusUnset, msg: "context deadline exceeded", want: false},
		{
			name: "description beyond the read bound does not count", status: failed,
			msg:  strings.Repeat("x", maxEvidenceText) + " timeout",
			want: false,
		},
		{
			name: "description is not read beside a gRPC status", status: failed,
			attrs: []Attr{Int(AttrRPCGRPCStatusCode, 14)}, msg: "context deadline exceeded",
			want: false,
		},
		{
			name: "description is not read beside a newer RPC status", status: failed,
			attrs: []Attr{Str(AttrRPCResponseStatusCode, "UNKNOWN")}, msg: "query: context canceled",
			want: false,
		},
		{
			name: "an unusable gRPC status does not silence the description", status: failed,
			attrs: []Attr{Str(AttrRPCGRPCStatusCode, "x")}, msg: "context deadline exceeded",
			want: true, wantInvalid: []InvalidValue{bad(AttrRPCGRPCStatusCode, "not a number")},
		},
		{
			name: "description is read beside an HTTP status: a body read timed out", status: failed,
			attrs: []Attr{Int(AttrHTTPStatusCode, 200)},
			msg:   "context deadline exceeded (Client.Timeout or context cancellation while reading body)",
			want:  true,
		},

		// exception events, on a failed span.
		{name: "exception Java socket timeout", status: failed, events: excs(exc("java.net.SocketTimeoutException", "Read timed out")), want: true},
		{name: "exception Java timeout", status: failed, events: excs(exc("java.util.concurrent.TimeoutException", "")), want: true},
		{name: "exception .NET timeout", status: failed, events: excs(exc("System.TimeoutException", "The operation has timed out.")), want: true},
		{name: "exception Python timeout", status: failed, events: excs(exc("TimeoutError", "")), want: true},
		{name: "exception Python asyncio timeout", status: failed, events: excs(exc("asyncio.TimeoutError", "")), want: true},
		{name: "exception Python requests timeout", status: failed, events: excs(exc("requests.exceptions.ReadTimeout", "HTTPConnectionPool(host='pricing', port=80): Read timed out. (read timeout=3)")), want: true},
		{name: "exception Go deadline", status: failed, events: excs(exc("context.DeadlineExceeded", "")), want: true},
		{name: "exception Go deadline type", status: failed, events: excs(exc("context.deadlineExceededError", "context deadline exceeded")), want: true},
		{name: "exception Go url.Error timeout", status: failed, events: excs(exc("*url.Error", `Get "http://pricing/quote": context deadline exceeded`)), want: true},
		{name: "exception Go url.Error cancellation", status: failed, events: excs(exc("*url.Error", `Get "http://pricing/quote": context canceled`)), want: true, wantCancelled: true},
		{name: "exception Go plain cancellation", status: failed, events: excs(exc("*errors.errorString", "context canceled")), want: true, wantCancelled: true},
		{name: "exception Go gRPC status", status: failed, events: excs(exc("*status.Error", "rpc error: code = Canceled desc = context deadline exceeded")), want: true, wantCancelled: true},
		{name: "exception Go error of another kind", status: failed, events: excs(exc("*url.Error", `Get "http://pricing/timeout": connection refused`)), want: false},
		{name: "exception without a type is read by its message", status: failed, events: excs(exc("", "context deadline exceeded")), want: true},
		{name: "exception Go context.Canceled", status: failed, events: excs(exc("context.Canceled", "")), want: true, wantCancelled: true},
		{name: "exception .NET task cancelled", status: failed, events: excs(exc("System.Threading.Tasks.TaskCanceledException", "A task was canceled.")), want: true, wantCancelled: true},
		{name: "exception .NET operation cancelled", status: failed, events: excs(exc("System.OperationCanceledException", "The operation was canceled.")), want: true, wantCancelled: true},
		{name: "exception .NET HttpClient timeout", status: failed, events: excs(exc("System.Threading.Tasks.TaskCanceledException", dotnetHTTPTimeout)), want: true},
		{name: "exception Java cancellation", status: failed, events: excs(exc("java.util.concurrent.CancellationException", "Task was cancelled.")), want: true, wantCancelled: true},
		{name: "exception Python asyncio cancellation", status: failed, events: excs(exc("asyncio.CancelledError", "")), want: true, wantCancelled: true},
		{name: "exception ValueError does not count", status: failed, events: excs(exc("ValueError", "timeout must be positive")), want: false},
		{name: "exception IOException's message is not read", status: failed, events: excs(exc("java.io.IOException", "Read timed out")), want: false},
		{name: "exception type of the wrong type", status: failed, events: excs(Event{Name: EventException, Attrs: Attributes{Int(AttrExceptionType, 4)}}), want: false},
		{name: "an event named otherwise does not count", status: failed, events: excs(Event{Name: "error", Attrs: Attributes{Str(AttrExceptionType, "TimeoutError")}}), want: false},
		{name: "exception of an OK span does not count", status: StatusOK, events: excs(exc("java.net.SocketTimeoutException", "")), want: false},
		{name: "exception of an unset span does not count", events: excs(exc("java.net.SocketTimeoutException", "")), want: false},
		{
			name: "exception is not read beside a gRPC status", status: failed,
			attrs: []Attr{Int(AttrRPCGRPCStatusCode, 2)}, events: excs(exc("java.net.SocketTimeoutException", "")),
			want: false,
		},
		{
			name: "one exception event of several is enough", status: failed,
			events: excs(exc("java.io.IOException", ""), exc("TimeoutError", ""), Event{Name: "retry"}),
			want:   true,
		},

		// Precedence between pieces of evidence.
		{
			name:  "any one piece of evidence is enough",
			attrs: []Attr{Int(AttrHTTPStatusCode, 200), Str(AttrErrorType, "x"), Int(AttrRPCGRPCStatusCode, 4)},
			want:  true,
		},
		{
			name:  "a cancellation beats a bare timeout",
			attrs: []Attr{Str(AttrErrorType, "timeout"), Int(AttrHTTPStatusCode, 499)},
			want:  true, wantCancelled: true,
		},
		{
			name: "a cancelled exception beats a timed-out one", status: failed,
			events: excs(exc("TimeoutError", ""), exc("asyncio.CancelledError", "")),
			want:   true, wantCancelled: true,
		},
		{
			name: "a cancellation in the description beats a timeout error.type", status: failed,
			attrs: []Attr{Str(AttrErrorType, "timeout")}, msg: "context canceled",
			want: true, wantCancelled: true,
		},
		{
			name: ".NET: a cancellation explained by HttpClient.Timeout beats error.type TaskCanceledException", status: failed,
			attrs: []Attr{Str(AttrErrorType, "System.Threading.Tasks.TaskCanceledException")}, msg: dotnetHTTPTimeout,
			events: excs(exc("System.Threading.Tasks.TaskCanceledException", dotnetHTTPTimeout)),
			want:   true,
		},
		{
			name: ".NET: an explained timeout beats another exception's cancellation", status: failed,
			events: excs(exc("System.OperationCanceledException", ""), exc("System.Threading.Tasks.TaskCanceledException", dotnetHTTPTimeout)),
			want:   true,
		},
	}
}

func TestReadBudgetTimedOut(t *testing.T) {
	for _, tt := range timeoutCases() {
		t.Run(tt.name, func(t *testing.T) {
			got := ReadBudget(tt.span())
			require.Equal(t, tt.want, got.TimedOut)
			require.Equal(t, tt.wantCancelled, got.Cancelled)
			require.Equal(t, tt.wantInvalid, got.Invalid)
		})
	}
}

// TestStatusEvidenceKeepsVerdict replaces each table span's status
// description by StatusEvidence and drops its exception events, as
// analyze.Compact does, and expects the same verdict.
func TestStatusEvidenceKeepsVerdict(t *testing.T) {
	for _, tt := range timeoutCases() {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.span()
			c := *s
			c.StatusMessage, c.Events = StatusEvidence(s), nil
			require.LessOrEqual(t, len(c.StatusMessage), len("canceled by a timeout"))
			want, got := ReadBudget(s), ReadBudget(&c)
			require.Equal(t, want.TimedOut, got.TimedOut)
			require.Equal(t, want.Cancelled, got.Cancelled)
		})
	}
}

func TestEvidenceText(t *testing.T) {
	for v := verdictNone; v <= verdictTimerCancel; v++ {
		require.Equal(t, v, textVerdict(evidenceText(v)), "verdict %d", v)
	}
	require.Empty(t, StatusEvidence(&Span{StatusCode: StatusOK, StatusMessage: "timeout"}))
}

// FuzzReadBudgetStatus feeds arbitrary status descriptions, exception types
// and messages, and status attributes into ReadBudget. The invariants: it
// never panics; Cancelled implies TimedOut; only a failed span is read from
// free text, so the same span with status OK says nothing unless its
// attributes do; and StatusEvidence in place of the description and events
// keeps the verdict (what analyze.Compact relies on).
func FuzzReadBudgetStatus(f *testing.F) {
	f.Add("context deadline exceeded", "*url.Error", `Get "http://a": context canceled`, "", "", int64(-1))
	f.Add("rpc error: code = Canceled desc = context deadline exceeded", "", "", "CANCELLED", "grpc", int64(4))
	f.Add(dotnetHTTPTimeout, "System.Threading.Tasks.TaskCanceledException", dotnetHTTPTimeout, "", "", int64(200))
	f.Add(`"""timeout`, "ValueError", "timeout", "4", "grpc", int64(499))
	f.Add("rpc error: code = ", "*", "\"", "1", "", int64(504))
	f.Fuzz(func(t *testing.T, msg, excType, excMsg, rpcStatus, rpcSystem string, httpCode int64) {
		var attrs Attributes
		if rpcStatus != "" {
			attrs = append(attrs, Str(AttrRPCResponseStatusCode, rpcStatus))
		}
		if rpcSystem != "" {
			attrs = append(attrs, Str(AttrRPCSystemName, rpcSystem))
		}
		if httpCode >= 0 {
			attrs = append(attrs, Int(AttrHTTPStatusCodeOld, httpCode))
		}
		s := clientSpan(attrs...)
		s.StatusCode, s.StatusMessage = StatusError, msg
		s.Events = []Event{{Name: EventException, Attrs: Attributes{Str(AttrExceptionType, excType), Str(AttrExceptionMessage, excMsg)}}}
		got := ReadBudget(s)
		require.True(t, !got.Cancelled || got.TimedOut, "Cancelled without TimedOut")

		c := *s
		c.StatusMessage, c.Events = StatusEvidence(s), nil
		compacted := ReadBudget(&c)
		require.Equal(t, got.TimedOut, compacted.TimedOut)
		require.Equal(t, got.Cancelled, compacted.Cancelled)

		ok := *s
		ok.StatusCode = StatusOK
		attrsOnly := ReadBudget(clientSpan(attrs...))
		okGot := ReadBudget(&ok)
		require.Equal(t, attrsOnly.TimedOut, okGot.TimedOut)
		require.Equal(t, attrsOnly.Cancelled, okGot.Cancelled)
	})
}

func TestReadBudgetCancellations(t *testing.T) {
	cancelled := func(ns uint64, attrs ...Attr) Event { return Event{TimeNs: ns, Name: EventCancelled, Attrs: attrs} }
	tests := []struct {
		name        string
		events      []Event
		want        []Cancellation
		wantInvalid []InvalidValue
	}{
		{name: "none", events: []Event{{Name: "exception"}}},
		{
			name:   "each source",
			events: []Event{cancelled(1, Str(AttrCancelSource, "caller_disconnect")), cancelled(2, Str(AttrCancelSource, "deadline")), cancelled(3, Str(AttrCancelSource, "upstream"))},
			want:   []Cancellation{{TimeNs: 1, Source: "caller_disconnect"}, {TimeNs: 2, Source: "deadline"}, {TimeNs: 3, Source: "upstream"}},
		},
		{name: "no source", events: []Event{cancelled(5)}, want: []Cancellation{{TimeNs: 5}}},
		{
			name:        "unknown source keeps the cancellation",
			events:      []Event{cancelled(5, Str(AttrCancelSource, "gremlins"))},
			want:        []Cancellation{{TimeNs: 5}},
			wantInvalid: []InvalidValue{bad(AttrCancelSource, "unknown value")},
		},
		{
			name:        "empty source",
			events:      []Event{cancelled(5, Str(AttrCancelSource, ""))},
			want:        []Cancellation{{TimeNs: 5}},
			wantInvalid: []InvalidValue{bad(AttrCancelSource, "empty")},
		},
		{
			name:        "wrong type source",
			events:      []Event{cancelled(5, Int(AttrCancelSource, 1))},
			want:        []Cancellation{{TimeNs: 5}},
			wantInvalid: []InvalidValue{bad(AttrCancelSource, "wrong type")},
		},
		{
			name:   "other events are ignored",
			events: []Event{{Name: "exception", TimeNs: 1}, cancelled(2, Str(AttrCancelSource, "deadline")), {Name: "budget.cancel", TimeNs: 3}},
			want:   []Cancellation{{TimeNs: 2, Source: "deadline"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := serverSpan()
			s.Events = tt.events
			got := ReadBudget(s)
			require.Equal(t, tt.want, got.Cancellations)
			require.Equal(t, tt.wantInvalid, got.Invalid)
		})
	}
}

// TestReadBudgetAllocations pins the allocation budget: nothing for a span
// without budget facts, one block for all the millisecond figures, and
// nothing extra for header fallbacks written without escapes.
func TestReadBudgetAllocations(t *testing.T) {
	tests := []struct {
		name string
		span *Span
		max  float64
	}{
		{name: "no budget attributes", span: serverSpan(Str("http.route", "/checkout"), Int(AttrHTTPStatusCode, 200)), max: 0},
		{name: "client span", span: benchClientSpan(), max: 1},
		{name: "server span with header fallback", span: benchServerSpan(), max: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			allocs := testing.AllocsPerRun(100, func() { _ = ReadBudget(tt.span) })
			require.LessOrEqual(t, allocs, tt.max)
		})
	}
}

// FuzzReadBudgetHeaders feeds arbitrary strings into every budget and attempt
// fallback, as string arrays or (for the first) as raw attribute text. The
// invariants: ReadBudget never panics; any inferred figure is finite and
// within ±MaxMs; the inferred budget is exactly what the exported parsers
// (HeaderValue, ParseMillis, ParseGRPCTimeout) give for the first header in
// priority order that they accept; every present header they reject is
// listed once in Invalid with a reason; and the attempt is ≥ 1 when set.
func FuzzReadBudgetHeaders(f *testing.F) {
	f.Add(`["500"]`, "2S", "250m", "1500", "1767225600250", "1", "2", uint8(KindServer))
	f.Add(`"500"`, "", "", "", "", "", "", uint8(KindClient))
	f.Add(`["\u0035"]`, "99999999H", "123456789n", "-1", "-1", "x", "0", uint8(KindServer))
	f.Add(`[]`, "5", "5 m", "1e3", "NaN", "-1", "4294967295", uint8(KindProducer))
	f.Add(`["a","7"]`, "0n", "+5S", "9007199254740993", "0", "99999999999", "", uint8(KindConsumer))
	f.Fuzz(func(t *testing.T, rawTimeout, grpcHeader, grpcMeta, envoy, deadline, prevAttempts, envoyAttempt string, kind uint8) {
		attrs := Attributes{raw(AttrHeaderRequestTimeoutMs, AttrSlice, rawTimeout)}
		for _, kv := range [][2]string{
			{AttrHeaderGRPCTimeout, grpcHeader}, {AttrMetadataGRPCTimeout, grpcMeta},
			{AttrHeaderEnvoyExpectedMs, envoy}, {AttrHeaderRequestDeadline, deadline},
			{AttrGRPCPreviousAttempts, prevAttempts}, {AttrHeaderEnvoyAttempt, envoyAttempt},
		} {
			if kv[1] != "" {
				attrs = append(attrs, Strings(kv[0], kv[1]))
			}
		}
		s := &Span{Kind: SpanKind(kind % 6), StartNs: startNs, Attrs: attrs}
		got := ReadBudget(s)

		// The oracle: the exported parsers over each header's values.
		var want *float64
		wantInvalid := map[string]bool{}
		for _, a := range attrs[:min(len(attrs), 5)] {
			if a.Key == AttrGRPCPreviousAttempts || a.Key == AttrHeaderEnvoyAttempt {
				break
			}
			v, ok := oracleBudget(t, a)
			if !ok {
				wantInvalid[a.Key] = true
			} else if want == nil {
				want = &v
			}
		}
		budget := got.RemainingMs
		if s.Kind.IsCall() {
			budget = got.PropagatedMs
			require.Nil(t, got.RemainingMs)
		} else {
			require.Nil(t, got.PropagatedMs)
		}
		require.Equal(t, want != nil, got.Inferred)
		if want == nil {
			require.Nil(t, budget)
		} else {
			require.NotNil(t, budget)
			require.False(t, math.IsNaN(*budget) || math.IsInf(*budget, 0))
			require.LessOrEqual(t, math.Abs(*budget), float64(MaxMs))
			require.Equal(t, *want, *budget)
		}

		seen := map[string]int{}
		for _, iv := range got.Invalid {
			require.NotEmpty(t, iv.Reason)
			seen[iv.Key]++
			require.Equal(t, 1, seen[iv.Key], "each attribute is listed at most once: %+v", got.Invalid)
			if iv.Key != AttrGRPCPreviousAttempts && iv.Key != AttrHeaderEnvoyAttempt {
				require.True(t, wantInvalid[iv.Key], "%s listed as invalid but the parsers accept it", iv.Key)
			}
		}
		for key := range wantInvalid {
			require.Equal(t, 1, seen[key], "%s rejected by the parsers but not listed", key)
		}
		if got.Attempt != 0 {
			require.GreaterOrEqual(t, got.Attempt, uint32(1))
		}
	})
}

// oracleBudget decodes a header attribute with encoding/json and the exported
// parsers, independently of ReadBudget's scanner, and returns the budget of
// its first usable value.
func oracleBudget(t *testing.T, a Attr) (float64, bool) {
	var values []string
	switch {
	case a.Type == AttrString:
		values = []string{a.Value}
	case json.Unmarshal([]byte(a.Value), &values) != nil:
		_, err := HeaderValue(a)
		require.Error(t, err, "encoding/json rejects %q", a.Value)
		return 0, false
	}
	if len(values) > 0 && a.Value != "null" {
		first, err := HeaderValue(a)
		require.NoError(t, err, "encoding/json accepts %q", a.Value)
		require.Equal(t, values[0], first)
	}
	for _, v := range values {
		switch a.Key {
		case AttrHeaderGRPCTimeout, AttrMetadataGRPCTimeout:
			if d, err := ParseGRPCTimeout(v); err == nil {
				return float64(d) / 1e6, true
			}
		case AttrHeaderRequestDeadline:
			if ms, err := ParseMillis(v); err == nil {
				whole, frac := float64(startNs/1e6), float64(startNs%1e6)/1e6
				if r := ms - whole - frac; math.Abs(r) <= MaxMs {
					return r, true
				}
			}
		default:
			if ms, err := ParseMillis(v); err == nil {
				return ms, true
			}
		}
	}
	return 0, false
}

func benchClientSpan() *Span {
	return &Span{
		Kind: KindClient, Name: "POST /charge", Service: "checkout", StartNs: startNs, EndNs: startNs + 42e6,
		Attrs: Attributes{
			Str("http.request.method", "POST"),
			Str("server.address", "payments.internal"),
			Int("server.port", 8443),
			Str("url.full", "https://payments.internal:8443/charge"),
			Str("network.protocol.version", "1.1"),
			Int(AttrHTTPStatusCode, 200),
			Int(AttrHTTPResendCount, 1),
			Str("user_agent.original", "checkout/1.4"),
			Strings(AttrHeaderRequestTimeoutMs, "480"),
			Int(AttrTimeoutMs, 500),
			Int(AttrPropagatedMs, 480),
			Int(AttrAttempt, 2),
			Int(AttrMaxAttempts, 3),
			Int(AttrBackoffMs, 50),
			Str("peer.service", "payments"),
		},
	}
}

func benchServerSpan() *Span {
	return &Span{
		Kind: KindServer, Name: "POST /charge", Service: "payments", StartNs: startNs, EndNs: startNs + 40e6,
		Attrs: Attributes{
			Str("http.request.method", "POST"),
			Str("http.route", "/charge"),
			Str("url.path", "/charge"),
			Str("url.scheme", "https"),
			Str("server.address", "payments.internal"),
			Int("server.port", 8443),
			Str("client.address", "10.0.3.7"),
			Str("network.protocol.version", "1.1"),
			Int(AttrHTTPStatusCode, 200),
			Str("user_agent.original", "checkout/1.4"),
			Strings(AttrHeaderEnvoyExpectedMs, "450"),
			Strings(AttrHeaderRequestTimeoutMs, "480"),
			Strings(AttrHeaderEnvoyAttempt, "2"),
			Strings("http.request.header.content-type", "application/json"),
			Strings("http.request.header.x-request-id", "6f1c2a"),
		},
	}
}

func BenchmarkReadBudget(b *testing.B) {
	benchmarks := []struct {
		name string
		span *Span
	}{
		{name: "client", span: benchClientSpan()},
		{name: "server_header_fallback", span: benchServerSpan()},
	}
	for _, bm := range benchmarks {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			var f BudgetFacts
			for b.Loop() {
				f = ReadBudget(bm.span)
			}
			if f.Attempt == 0 {
				b.Fatal("the benchmark span lost its attempt")
			}
		})
	}
}

func TestBudgetKeyNames(t *testing.T) {
	for k := range numBudgetKeys {
		name := budgetKeyNames[k]
		got, ok := budgetKeyOf(name)
		if !ok || got != k {
			t.Errorf("budget key %d is named %q, which budgetKeyOf maps to %d, %v", k, name, got, ok)
		}
		if canon, ok := BudgetAttrName(strings.Clone(name)); !ok || unsafe.StringData(canon) != unsafe.StringData(name) {
			t.Errorf("BudgetAttrName(%q) = %q, %v: want the shared constant", name, canon, ok)
		}
	}
	if _, ok := BudgetAttrName("http.route"); ok {
		t.Error("http.route is not a budget attribute")
	}
}
