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

// startNs is 2026-01-01T00:00:00Z, a whole millisecond.
const startNs = 1_767_225_600_000 * uint64(time.Millisecond)

func serverSpan(attrs ...schema.Attr) *schema.Span {
	return &schema.Span{Kind: schema.KindServer, StartNs: startNs, EndNs: startNs + 1e6, Attrs: attrs}
}

func clientSpan(attrs ...schema.Attr) *schema.Span {
	return &schema.Span{Kind: schema.KindClient, StartNs: startNs, EndNs: startNs + 1e6, Attrs: attrs}
}

func bad(key, reason string) InvalidValue { return InvalidValue{Key: key, Reason: reason} }

func raw(key string, typ schema.AttrType, value string) schema.Attr {
	return schema.Attr{Key: key, Type: typ, Value: value}
}

func TestReadRecorded(t *testing.T) {
	tests := []struct {
		name string
		span *schema.Span
		want Facts
	}{
		{name: "nothing", span: serverSpan(), want: Facts{}},
		{name: "nil span", span: nil, want: Facts{}},
		{
			name: "typical client span",
			span: clientSpan(schema.Int(schema.AttrTimeoutMs, 300), schema.Double(schema.AttrPropagatedMs, 290.5), schema.Int(schema.AttrAttempt, 2),
				schema.Int(schema.AttrMaxAttempts, 3), schema.Int(schema.AttrBackoffMs, 25)),
			want: Facts{TimeoutMs: schema.Ms(300), PropagatedMs: schema.Ms(290.5), Attempt: 2, MaxAttempts: 3, BackoffMs: schema.Ms(25)},
		},
		{
			name: "typical server span",
			span: serverSpan(schema.Int(schema.AttrRemainingMs, 800), schema.Str(schema.AttrSource, "propagated")),
			want: Facts{RemainingMs: schema.Ms(800), Source: schema.SourcePropagated},
		},
		{name: "recorded remaining without source leaves source empty", span: serverSpan(schema.Int(schema.AttrRemainingMs, 800)), want: Facts{RemainingMs: schema.Ms(800)}},

		// budget.remaining_ms
		{name: "remaining double", span: serverSpan(schema.Double(schema.AttrRemainingMs, 12.5)), want: Facts{RemainingMs: schema.Ms(12.5)}},
		{name: "remaining string", span: serverSpan(schema.Str(schema.AttrRemainingMs, "250")), want: Facts{RemainingMs: schema.Ms(250)}},
		{name: "remaining string with exponent", span: serverSpan(schema.Str(schema.AttrRemainingMs, "1.5e+03")), want: Facts{RemainingMs: schema.Ms(1500)}},
		{name: "remaining negative is kept", span: serverSpan(schema.Int(schema.AttrRemainingMs, -40)), want: Facts{RemainingMs: schema.Ms(-40)}},
		{name: "remaining negative string is kept", span: serverSpan(schema.Str(schema.AttrRemainingMs, "-40.5")), want: Facts{RemainingMs: schema.Ms(-40.5)}},
		{name: "remaining zero", span: serverSpan(schema.Int(schema.AttrRemainingMs, 0)), want: Facts{RemainingMs: schema.Ms(0)}},
		{name: "remaining negative zero reads as zero", span: serverSpan(schema.Str(schema.AttrRemainingMs, "-0")), want: Facts{RemainingMs: schema.Ms(0)}},
		{name: "remaining at the bound", span: serverSpan(schema.Int(schema.AttrRemainingMs, MaxMs)), want: Facts{RemainingMs: schema.Ms(MaxMs)}},
		{name: "remaining above the bound", span: serverSpan(schema.Int(schema.AttrRemainingMs, MaxMs+1)), want: Facts{Invalid: []InvalidValue{bad(schema.AttrRemainingMs, "out of range")}}},
		{name: "remaining below the negative bound", span: serverSpan(schema.Int(schema.AttrRemainingMs, -MaxMs-1)), want: Facts{Invalid: []InvalidValue{bad(schema.AttrRemainingMs, "out of range")}}},
		{name: "remaining int64 overflow", span: serverSpan(raw(schema.AttrRemainingMs, schema.AttrInt, "99999999999999999999")), want: Facts{Invalid: []InvalidValue{bad(schema.AttrRemainingMs, "out of range")}}},
		{name: "remaining NaN", span: serverSpan(schema.Double(schema.AttrRemainingMs, math.NaN())), want: Facts{Invalid: []InvalidValue{bad(schema.AttrRemainingMs, "not finite")}}},
		{name: "remaining infinity", span: serverSpan(schema.Double(schema.AttrRemainingMs, math.Inf(1))), want: Facts{Invalid: []InvalidValue{bad(schema.AttrRemainingMs, "out of range")}}},
		{name: "remaining double overflow", span: serverSpan(raw(schema.AttrRemainingMs, schema.AttrDouble, "1e400")), want: Facts{Invalid: []InvalidValue{bad(schema.AttrRemainingMs, "out of range")}}},
		{name: "remaining NaN string", span: serverSpan(schema.Str(schema.AttrRemainingMs, "NaN")), want: Facts{Invalid: []InvalidValue{bad(schema.AttrRemainingMs, "not a number")}}},
		{name: "remaining hex string", span: serverSpan(schema.Str(schema.AttrRemainingMs, "0x10")), want: Facts{Invalid: []InvalidValue{bad(schema.AttrRemainingMs, "not a number")}}},
		{name: "remaining with unit", span: serverSpan(schema.Str(schema.AttrRemainingMs, "250ms")), want: Facts{Invalid: []InvalidValue{bad(schema.AttrRemainingMs, "not a number")}}},
		{name: "remaining empty string", span: serverSpan(schema.Str(schema.AttrRemainingMs, "")), want: Facts{Invalid: []InvalidValue{bad(schema.AttrRemainingMs, "empty")}}},
		{name: "remaining empty value", span: serverSpan(raw(schema.AttrRemainingMs, schema.AttrEmpty, "")), want: Facts{Invalid: []InvalidValue{bad(schema.AttrRemainingMs, "empty")}}},
		{name: "remaining bool", span: serverSpan(schema.Bool(schema.AttrRemainingMs, true)), want: Facts{Invalid: []InvalidValue{bad(schema.AttrRemainingMs, "wrong type")}}},
		{name: "remaining string array", span: serverSpan(schema.Strings(schema.AttrRemainingMs, "250")), want: Facts{Invalid: []InvalidValue{bad(schema.AttrRemainingMs, "wrong type")}}},
		{name: "remaining corrupt int", span: serverSpan(raw(schema.AttrRemainingMs, schema.AttrInt, "12.5")), want: Facts{Invalid: []InvalidValue{bad(schema.AttrRemainingMs, "not a number")}}},
		{
			name: "repeated key keeps the first",
			span: serverSpan(schema.Int(schema.AttrRemainingMs, 100), schema.Int(schema.AttrRemainingMs, 900)),
			want: Facts{RemainingMs: schema.Ms(100), Invalid: []InvalidValue{bad(schema.AttrRemainingMs, "duplicate key")}},
		},

		// budget.timeout_ms, budget.backoff_ms, budget.propagated_ms
		{name: "timeout zero", span: clientSpan(schema.Int(schema.AttrTimeoutMs, 0)), want: Facts{TimeoutMs: schema.Ms(0)}},
		{name: "timeout string", span: clientSpan(schema.Str(schema.AttrTimeoutMs, "150.25")), want: Facts{TimeoutMs: schema.Ms(150.25)}},
		{name: "timeout negative", span: clientSpan(schema.Int(schema.AttrTimeoutMs, -1)), want: Facts{Invalid: []InvalidValue{bad(schema.AttrTimeoutMs, "negative")}}},
		{name: "timeout overflow", span: clientSpan(schema.Double(schema.AttrTimeoutMs, 1e300)), want: Facts{Invalid: []InvalidValue{bad(schema.AttrTimeoutMs, "out of range")}}},
		{name: "timeout garbage", span: clientSpan(schema.Str(schema.AttrTimeoutMs, "soon")), want: Facts{Invalid: []InvalidValue{bad(schema.AttrTimeoutMs, "not a number")}}},
		{name: "backoff negative", span: clientSpan(schema.Double(schema.AttrBackoffMs, -0.5)), want: Facts{Invalid: []InvalidValue{bad(schema.AttrBackoffMs, "negative")}}},
		{name: "backoff wrong type", span: clientSpan(schema.Bool(schema.AttrBackoffMs, false)), want: Facts{Invalid: []InvalidValue{bad(schema.AttrBackoffMs, "wrong type")}}},
		{name: "propagated negative is kept", span: clientSpan(schema.Int(schema.AttrPropagatedMs, -20)), want: Facts{PropagatedMs: schema.Ms(-20)}},
		{name: "propagated empty", span: clientSpan(schema.Str(schema.AttrPropagatedMs, "")), want: Facts{Invalid: []InvalidValue{bad(schema.AttrPropagatedMs, "empty")}}},

		// budget.attempt, budget.max_attempts
		{name: "attempt string", span: clientSpan(schema.Str(schema.AttrAttempt, "3")), want: Facts{Attempt: 3}},
		{name: "attempt whole double", span: clientSpan(schema.Double(schema.AttrAttempt, 2)), want: Facts{Attempt: 2}},
		{name: "attempt zero", span: clientSpan(schema.Int(schema.AttrAttempt, 0)), want: Facts{Invalid: []InvalidValue{bad(schema.AttrAttempt, "zero")}}},
		{name: "attempt negative", span: clientSpan(schema.Int(schema.AttrAttempt, -1)), want: Facts{Invalid: []InvalidValue{bad(schema.AttrAttempt, "negative")}}},
		{name: "attempt fraction", span: clientSpan(schema.Double(schema.AttrAttempt, 1.5)), want: Facts{Invalid: []InvalidValue{bad(schema.AttrAttempt, "not an integer")}}},
		{name: "attempt above uint32", span: clientSpan(schema.Int(schema.AttrAttempt, math.MaxUint32+1)), want: Facts{Invalid: []InvalidValue{bad(schema.AttrAttempt, "out of range")}}},
		{name: "attempt at uint32 max", span: clientSpan(schema.Int(schema.AttrAttempt, math.MaxUint32)), want: Facts{Attempt: math.MaxUint32}},
		{name: "max attempts zero", span: clientSpan(schema.Int(schema.AttrMaxAttempts, 0)), want: Facts{Invalid: []InvalidValue{bad(schema.AttrMaxAttempts, "zero")}}},
		{name: "max attempts garbage", span: clientSpan(schema.Str(schema.AttrMaxAttempts, "three")), want: Facts{Invalid: []InvalidValue{bad(schema.AttrMaxAttempts, "not a number")}}},

		// budget.source
		{name: "source edge", span: serverSpan(schema.Str(schema.AttrSource, "edge")), want: Facts{Source: schema.SourceEdge}},
		{name: "source default", span: serverSpan(schema.Str(schema.AttrSource, "default")), want: Facts{Source: schema.SourceDefault}},
		{name: "source none", span: serverSpan(schema.Str(schema.AttrSource, "none")), want: Facts{Source: schema.SourceNone}},
		{name: "source unknown", span: serverSpan(schema.Str(schema.AttrSource, "Propagated")), want: Facts{Invalid: []InvalidValue{bad(schema.AttrSource, "unknown value")}}},
		{name: "source empty", span: serverSpan(schema.Str(schema.AttrSource, "")), want: Facts{Invalid: []InvalidValue{bad(schema.AttrSource, "empty")}}},
		{name: "source wrong type", span: serverSpan(schema.Int(schema.AttrSource, 1)), want: Facts{Invalid: []InvalidValue{bad(schema.AttrSource, "wrong type")}}},

		// budget.rejected
		{name: "rejected bool", span: serverSpan(schema.Bool(schema.AttrRejected, true)), want: Facts{Rejected: true}},
		{name: "rejected false", span: serverSpan(schema.Bool(schema.AttrRejected, false)), want: Facts{}},
		{name: "rejected string", span: serverSpan(schema.Str(schema.AttrRejected, "true")), want: Facts{Rejected: true}},
		{name: "rejected upper-case string", span: serverSpan(schema.Str(schema.AttrRejected, "TRUE")), want: Facts{Rejected: true}},
		{name: "rejected string false", span: serverSpan(schema.Str(schema.AttrRejected, "false")), want: Facts{}},
		{name: "rejected garbage", span: serverSpan(schema.Str(schema.AttrRejected, "yes")), want: Facts{Invalid: []InvalidValue{bad(schema.AttrRejected, "unknown value")}}},
		{name: "rejected empty", span: serverSpan(schema.Str(schema.AttrRejected, "")), want: Facts{Invalid: []InvalidValue{bad(schema.AttrRejected, "empty")}}},
		{name: "rejected int", span: serverSpan(schema.Int(schema.AttrRejected, 1)), want: Facts{Invalid: []InvalidValue{bad(schema.AttrRejected, "wrong type")}}},
		{name: "rejected empty value", span: serverSpan(raw(schema.AttrRejected, schema.AttrEmpty, "")), want: Facts{Invalid: []InvalidValue{bad(schema.AttrRejected, "empty")}}},
		{name: "source empty value", span: serverSpan(raw(schema.AttrSource, schema.AttrEmpty, "")), want: Facts{Invalid: []InvalidValue{bad(schema.AttrSource, "empty")}}},

		{
			name: "several bad values are all listed, in contract order",
			span: clientSpan(schema.Str(schema.AttrTimeoutMs, "x"), schema.Int(schema.AttrAttempt, 0), schema.Int(schema.AttrBackoffMs, -3), schema.Int(schema.AttrMaxAttempts, 2)),
			want: Facts{MaxAttempts: 2, Invalid: []InvalidValue{
				bad(schema.AttrTimeoutMs, "not a number"), bad(schema.AttrBackoffMs, "negative"), bad(schema.AttrAttempt, "zero"),
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, Read(tt.span))
		})
	}
}

func TestReadInferredBudget(t *testing.T) {
	deadline := func(offsetMs int64) schema.Attr {
		return schema.Strings(schema.AttrHeaderRequestDeadline, strconv.FormatInt(int64(startNs/1e6)+offsetMs, 10))
	}
	inferred := func(ms float64, invalid ...InvalidValue) Facts {
		return Facts{RemainingMs: schema.Ms(ms), Inferred: true, Invalid: invalid}
	}
	only := func(invalid ...InvalidValue) Facts { return Facts{Invalid: invalid} }
	tests := []struct {
		name string
		span *schema.Span
		want Facts
	}{
		{name: "x-request-timeout-ms", span: serverSpan(schema.Strings(schema.AttrHeaderRequestTimeoutMs, "500")), want: inferred(500)},
		{name: "x-request-timeout-ms fraction", span: serverSpan(schema.Strings(schema.AttrHeaderRequestTimeoutMs, "12.5")), want: inferred(12.5)},
		{name: "x-request-timeout-ms plain string", span: serverSpan(schema.Str(schema.AttrHeaderRequestTimeoutMs, "500")), want: inferred(500)},
		{name: "first valid of several values", span: serverSpan(schema.Strings(schema.AttrHeaderRequestTimeoutMs, "soon", "500", "600")), want: inferred(500)},
		{name: "zero is an expired budget", span: serverSpan(schema.Strings(schema.AttrHeaderRequestTimeoutMs, "0")), want: inferred(0)},
		{name: "grpc-timeout header hours", span: serverSpan(schema.Strings(schema.AttrHeaderGRPCTimeout, "1H")), want: inferred(3_600_000)},
		{name: "grpc-timeout header minutes", span: serverSpan(schema.Strings(schema.AttrHeaderGRPCTimeout, "2M")), want: inferred(120_000)},
		{name: "grpc-timeout header seconds", span: serverSpan(schema.Strings(schema.AttrHeaderGRPCTimeout, "2S")), want: inferred(2000)},
		{name: "grpc-timeout header milliseconds", span: serverSpan(schema.Strings(schema.AttrHeaderGRPCTimeout, "250m")), want: inferred(250)},
		{name: "grpc-timeout header microseconds", span: serverSpan(schema.Strings(schema.AttrHeaderGRPCTimeout, "1500u")), want: inferred(1.5)},
		{name: "grpc-timeout header nanoseconds", span: serverSpan(schema.Strings(schema.AttrHeaderGRPCTimeout, "2500000n")), want: inferred(2.5)},
		{name: "grpc-timeout eight digits", span: serverSpan(schema.Strings(schema.AttrHeaderGRPCTimeout, "12345678u")), want: inferred(12345.678)},
		{name: "grpc-timeout nine digits", span: serverSpan(schema.Strings(schema.AttrHeaderGRPCTimeout, "123456789u")), want: only(bad(schema.AttrHeaderGRPCTimeout, "more than 8 digits"))},
		{name: "grpc-timeout missing unit", span: serverSpan(schema.Strings(schema.AttrHeaderGRPCTimeout, "250")), want: only(bad(schema.AttrHeaderGRPCTimeout, "missing unit"))},
		{name: "grpc-timeout sign", span: serverSpan(schema.Strings(schema.AttrHeaderGRPCTimeout, "-250m")), want: only(bad(schema.AttrHeaderGRPCTimeout, "not a digit"))},
		{name: "grpc-timeout space", span: serverSpan(schema.Strings(schema.AttrHeaderGRPCTimeout, "250 m")), want: only(bad(schema.AttrHeaderGRPCTimeout, "not a digit"))},
		{name: "grpc-timeout clamped hours", span: serverSpan(schema.Strings(schema.AttrHeaderGRPCTimeout, "99999999H")), want: inferred(float64(math.MaxInt64) / 1e6)},
		{name: "grpc metadata", span: serverSpan(schema.Strings(schema.AttrMetadataGRPCTimeout, "750m")), want: inferred(750)},
		{name: "grpc metadata plain string", span: serverSpan(schema.Str(schema.AttrMetadataGRPCTimeout, "3S")), want: inferred(3000)},
		{name: "envoy expected timeout", span: serverSpan(schema.Strings(schema.AttrHeaderEnvoyExpectedMs, "1500")), want: inferred(1500)},
		{name: "envoy expected timeout negative", span: serverSpan(schema.Strings(schema.AttrHeaderEnvoyExpectedMs, "-1500")), want: only(bad(schema.AttrHeaderEnvoyExpectedMs, "negative"))},
		{name: "deadline ahead of the span start", span: serverSpan(deadline(250)), want: inferred(250)},
		{name: "deadline at the span start", span: serverSpan(deadline(0)), want: inferred(0)},
		{name: "deadline already past", span: serverSpan(deadline(-1200)), want: inferred(-1200)},
		{
			name: "deadline against a sub-millisecond start",
			span: &schema.Span{Kind: schema.KindServer, StartNs: startNs + 400_000, Attrs: schema.Attributes{deadline(250)}},
			want: inferred(249.6),
		},
		{name: "deadline fraction", span: serverSpan(schema.Strings(schema.AttrHeaderRequestDeadline, strconv.FormatInt(int64(startNs/1e6)+10, 10)+".5")), want: inferred(10.5)},
		{
			name: "deadline without span start",
			span: &schema.Span{Kind: schema.KindServer, Attrs: schema.Attributes{deadline(250)}},
			want: only(bad(schema.AttrHeaderRequestDeadline, "span has no start time")),
		},
		{name: "deadline negative", span: serverSpan(schema.Strings(schema.AttrHeaderRequestDeadline, "-5")), want: only(bad(schema.AttrHeaderRequestDeadline, "negative"))},
		{name: "deadline overflow", span: serverSpan(schema.Strings(schema.AttrHeaderRequestDeadline, "9007199254740993")), want: only(bad(schema.AttrHeaderRequestDeadline, "out of range"))},
		{name: "deadline in RFC 3339", span: serverSpan(schema.Strings(schema.AttrHeaderRequestDeadline, "2026-01-01T00:00:01Z")), want: only(bad(schema.AttrHeaderRequestDeadline, "not a number"))},

		// Malformed header attributes.
		{name: "negative", span: serverSpan(schema.Strings(schema.AttrHeaderRequestTimeoutMs, "-5")), want: only(bad(schema.AttrHeaderRequestTimeoutMs, "negative"))},
		{name: "overflow", span: serverSpan(schema.Strings(schema.AttrHeaderRequestTimeoutMs, "19007199254740993")), want: only(bad(schema.AttrHeaderRequestTimeoutMs, "out of range"))},
		{name: "exponent", span: serverSpan(schema.Strings(schema.AttrHeaderRequestTimeoutMs, "1e3")), want: only(bad(schema.AttrHeaderRequestTimeoutMs, "not a number"))},
		{name: "NaN", span: serverSpan(schema.Strings(schema.AttrHeaderRequestTimeoutMs, "NaN")), want: only(bad(schema.AttrHeaderRequestTimeoutMs, "not a number"))},
		{name: "empty value", span: serverSpan(schema.Strings(schema.AttrHeaderRequestTimeoutMs, "")), want: only(bad(schema.AttrHeaderRequestTimeoutMs, "empty"))},
		{name: "empty plain string", span: serverSpan(schema.Str(schema.AttrHeaderRequestTimeoutMs, "")), want: only(bad(schema.AttrHeaderRequestTimeoutMs, "empty"))},
		{name: "empty array", span: serverSpan(schema.Strings(schema.AttrHeaderRequestTimeoutMs)), want: only(bad(schema.AttrHeaderRequestTimeoutMs, "empty array"))},
		{name: "no valid value reports the first reason", span: serverSpan(schema.Strings(schema.AttrHeaderRequestTimeoutMs, "x", "-1")), want: only(bad(schema.AttrHeaderRequestTimeoutMs, "not a number"))},
		{name: "number array", span: serverSpan(raw(schema.AttrHeaderRequestTimeoutMs, schema.AttrSlice, "[500]")), want: only(bad(schema.AttrHeaderRequestTimeoutMs, "malformed string array"))},
		{name: "broken JSON", span: serverSpan(raw(schema.AttrHeaderRequestTimeoutMs, schema.AttrSlice, `["500"`)), want: only(bad(schema.AttrHeaderRequestTimeoutMs, "malformed string array"))},
		{name: "escaped digits", span: serverSpan(raw(schema.AttrHeaderRequestTimeoutMs, schema.AttrSlice, `["\u0035\u0030"]`)), want: inferred(50)},
		{name: "int attribute", span: serverSpan(schema.Int(schema.AttrHeaderRequestTimeoutMs, 500)), want: only(bad(schema.AttrHeaderRequestTimeoutMs, "wrong type"))},
		{name: "bool attribute", span: serverSpan(schema.Bool(schema.AttrHeaderGRPCTimeout, true)), want: only(bad(schema.AttrHeaderGRPCTimeout, "wrong type"))},

		// Priority.
		{
			name: "recorded remaining beats every header",
			span: serverSpan(schema.Strings(schema.AttrHeaderRequestTimeoutMs, "500"), schema.Int(schema.AttrRemainingMs, 90), schema.Strings(schema.AttrHeaderGRPCTimeout, "1S")),
			want: Facts{RemainingMs: schema.Ms(90)},
		},
		{
			name: "recorded negative remaining beats a header",
			span: serverSpan(schema.Int(schema.AttrRemainingMs, -5), schema.Strings(schema.AttrHeaderRequestTimeoutMs, "500")),
			want: Facts{RemainingMs: schema.Ms(-5)},
		},
		{
			name: "unusable recorded remaining falls back to a header",
			span: serverSpan(schema.Str(schema.AttrRemainingMs, "lots"), schema.Strings(schema.AttrHeaderRequestTimeoutMs, "500")),
			want: inferred(500, bad(schema.AttrRemainingMs, "not a number")),
		},
		{
			name: "a bad header is reported even when a recorded value makes it unnecessary",
			span: serverSpan(schema.Int(schema.AttrRemainingMs, 90), schema.Strings(schema.AttrHeaderGRPCTimeout, "1s")),
			want: Facts{RemainingMs: schema.Ms(90), Invalid: []InvalidValue{bad(schema.AttrHeaderGRPCTimeout, "unknown unit")}},
		},
		{
			name: "x-request-timeout-ms beats grpc-timeout",
			span: serverSpan(deadline(9), schema.Strings(schema.AttrHeaderEnvoyExpectedMs, "8"), schema.Strings(schema.AttrMetadataGRPCTimeout, "7m"), schema.Strings(schema.AttrHeaderGRPCTimeout, "6m"), schema.Strings(schema.AttrHeaderRequestTimeoutMs, "5")),
			want: inferred(5),
		},
		{
			name: "grpc-timeout header beats metadata",
			span: serverSpan(deadline(9), schema.Strings(schema.AttrHeaderEnvoyExpectedMs, "8"), schema.Strings(schema.AttrMetadataGRPCTimeout, "7m"), schema.Strings(schema.AttrHeaderGRPCTimeout, "6m")),
			want: inferred(6),
		},
		{
			name: "grpc metadata beats envoy",
			span: serverSpan(deadline(9), schema.Strings(schema.AttrHeaderEnvoyExpectedMs, "8"), schema.Strings(schema.AttrMetadataGRPCTimeout, "7m")),
			want: inferred(7),
		},
		{
			name: "envoy beats the deadline",
			span: serverSpan(deadline(9), schema.Strings(schema.AttrHeaderEnvoyExpectedMs, "8")),
			want: inferred(8),
		},
		{
			name: "an invalid higher-priority header yields to the next",
			span: serverSpan(schema.Strings(schema.AttrHeaderRequestTimeoutMs, "-5"), schema.Strings(schema.AttrHeaderGRPCTimeout, "6m")),
			want: inferred(6, bad(schema.AttrHeaderRequestTimeoutMs, "negative")),
		},

		// Span kinds.
		{
			name: "client span headers are the propagated budget",
			span: clientSpan(schema.Strings(schema.AttrHeaderRequestTimeoutMs, "500")),
			want: Facts{PropagatedMs: schema.Ms(500), Inferred: true},
		},
		{
			name: "client span recorded propagated beats the header",
			span: clientSpan(schema.Int(schema.AttrPropagatedMs, 400), schema.Strings(schema.AttrHeaderGRPCTimeout, "500m")),
			want: Facts{PropagatedMs: schema.Ms(400)},
		},
		{
			name: "producer span deadline header",
			span: &schema.Span{Kind: schema.KindProducer, StartNs: startNs, Attrs: schema.Attributes{deadline(100)}},
			want: Facts{PropagatedMs: schema.Ms(100), Inferred: true},
		},
		{
			name: "consumer span",
			span: &schema.Span{Kind: schema.KindConsumer, StartNs: startNs, Attrs: schema.Attributes{schema.Strings(schema.AttrHeaderRequestTimeoutMs, "40")}},
			want: inferred(40),
		},
		{
			name: "internal span",
			span: &schema.Span{Kind: schema.KindInternal, StartNs: startNs, Attrs: schema.Attributes{schema.Strings(schema.AttrHeaderRequestTimeoutMs, "40")}},
			want: inferred(40),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Read(tt.span)
			if tt.want.RemainingMs != nil && got.RemainingMs != nil {
				// Sub-millisecond conversions go through float division.
				require.InDelta(t, *tt.want.RemainingMs, *got.RemainingMs, 1e-9)
				got.RemainingMs = tt.want.RemainingMs
			}
			require.Equal(t, tt.want, got)
		})
	}
}

func TestReadAttempt(t *testing.T) {
	tests := []struct {
		name        string
		span        *schema.Span
		wantAttempt uint32
		wantInvalid []InvalidValue
	}{
		{name: "none", span: clientSpan(), wantAttempt: 0},
		{name: "resend count zero is the first attempt", span: clientSpan(schema.Int(schema.AttrHTTPResendCount, 0)), wantAttempt: 1},
		{name: "resend count two is the third attempt", span: clientSpan(schema.Int(schema.AttrHTTPResendCount, 2)), wantAttempt: 3},
		{name: "resend count string", span: clientSpan(schema.Str(schema.AttrHTTPResendCount, "1")), wantAttempt: 2},
		{name: "resend count negative", span: clientSpan(schema.Int(schema.AttrHTTPResendCount, -1)), wantInvalid: []InvalidValue{bad(schema.AttrHTTPResendCount, "negative")}},
		{name: "resend count fraction", span: clientSpan(schema.Double(schema.AttrHTTPResendCount, 1.5)), wantInvalid: []InvalidValue{bad(schema.AttrHTTPResendCount, "not an integer")}},
		{name: "resend count at uint32 max", span: clientSpan(schema.Int(schema.AttrHTTPResendCount, math.MaxUint32)), wantInvalid: []InvalidValue{bad(schema.AttrHTTPResendCount, "out of range")}},
		{name: "resend count wrong type", span: clientSpan(schema.Strings(schema.AttrHTTPResendCount, "1")), wantInvalid: []InvalidValue{bad(schema.AttrHTTPResendCount, "wrong type")}},
		{name: "grpc previous attempts", span: serverSpan(schema.Strings(schema.AttrGRPCPreviousAttempts, "2")), wantAttempt: 3},
		{name: "grpc previous attempts zero", span: serverSpan(schema.Strings(schema.AttrGRPCPreviousAttempts, "0")), wantAttempt: 1},
		{name: "grpc previous attempts plain string", span: serverSpan(schema.Str(schema.AttrGRPCPreviousAttempts, "1")), wantAttempt: 2},
		{name: "grpc previous attempts negative", span: serverSpan(schema.Strings(schema.AttrGRPCPreviousAttempts, "-1")), wantInvalid: []InvalidValue{bad(schema.AttrGRPCPreviousAttempts, "negative")}},
		{name: "grpc previous attempts garbage", span: serverSpan(schema.Strings(schema.AttrGRPCPreviousAttempts, "two")), wantInvalid: []InvalidValue{bad(schema.AttrGRPCPreviousAttempts, "not an integer")}},
		{name: "grpc previous attempts overflow", span: serverSpan(schema.Strings(schema.AttrGRPCPreviousAttempts, "4294967295")), wantInvalid: []InvalidValue{bad(schema.AttrGRPCPreviousAttempts, "out of range")}},
		{name: "grpc previous attempts huge", span: serverSpan(schema.Strings(schema.AttrGRPCPreviousAttempts, "99999999999999999999999")), wantInvalid: []InvalidValue{bad(schema.AttrGRPCPreviousAttempts, "out of range")}},
		{name: "grpc previous attempts empty", span: serverSpan(schema.Strings(schema.AttrGRPCPreviousAttempts, "")), wantInvalid: []InvalidValue{bad(schema.AttrGRPCPreviousAttempts, "empty")}},
		{name: "envoy attempt count is 1-based", span: serverSpan(schema.Strings(schema.AttrHeaderEnvoyAttempt, "3")), wantAttempt: 3},
		{name: "envoy attempt count zero", span: serverSpan(schema.Strings(schema.AttrHeaderEnvoyAttempt, "0")), wantInvalid: []InvalidValue{bad(schema.AttrHeaderEnvoyAttempt, "zero")}},
		{name: "envoy attempt count fraction", span: serverSpan(schema.Strings(schema.AttrHeaderEnvoyAttempt, "1.0")), wantInvalid: []InvalidValue{bad(schema.AttrHeaderEnvoyAttempt, "not an integer")}},
		{name: "envoy attempt count first valid", span: serverSpan(schema.Strings(schema.AttrHeaderEnvoyAttempt, "0", "2")), wantAttempt: 2},
		{
			name:        "recorded attempt beats every fallback",
			span:        clientSpan(schema.Int(schema.AttrHTTPResendCount, 5), schema.Int(schema.AttrAttempt, 2), schema.Strings(schema.AttrGRPCPreviousAttempts, "7"), schema.Strings(schema.AttrHeaderEnvoyAttempt, "9")),
			wantAttempt: 2,
		},
		{
			name:        "resend count beats grpc previous attempts",
			span:        clientSpan(schema.Strings(schema.AttrHeaderEnvoyAttempt, "9"), schema.Strings(schema.AttrGRPCPreviousAttempts, "7"), schema.Int(schema.AttrHTTPResendCount, 5)),
			wantAttempt: 6,
		},
		{
			name:        "grpc previous attempts beat envoy",
			span:        serverSpan(schema.Strings(schema.AttrHeaderEnvoyAttempt, "9"), schema.Strings(schema.AttrGRPCPreviousAttempts, "7")),
			wantAttempt: 8,
		},
		{
			name:        "an unusable recorded attempt falls back",
			span:        clientSpan(schema.Int(schema.AttrAttempt, 0), schema.Int(schema.AttrHTTPResendCount, 1)),
			wantAttempt: 2,
			wantInvalid: []InvalidValue{bad(schema.AttrAttempt, "zero")},
		},
		{
			name:        "an unusable fallback yields to the next",
			span:        serverSpan(schema.Int(schema.AttrHTTPResendCount, -1), schema.Strings(schema.AttrHeaderEnvoyAttempt, "2")),
			wantAttempt: 2,
			wantInvalid: []InvalidValue{bad(schema.AttrHTTPResendCount, "negative")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Read(tt.span)
			require.Equal(t, tt.wantAttempt, got.Attempt)
			require.Equal(t, tt.wantInvalid, got.Invalid)
		})
	}
}

// timeoutCase is one span of the timeout evidence table: attributes on a
// CLIENT span, with a status, a status description and events.
type timeoutCase struct {
	name          string
	attrs         []schema.Attr
	status        schema.StatusCode
	msg           string
	events        []schema.Event
	want          bool
	wantCancelled bool
	wantInvalid   []InvalidValue
}

func (tc timeoutCase) span() *schema.Span {
	s := clientSpan(tc.attrs...)
	s.StatusCode, s.StatusMessage, s.Events = tc.status, tc.msg, tc.events
	return s
}

// exc is an exception event; an empty typ or msg leaves the attribute out.
func exc(typ, msg string) schema.Event {
	e := schema.Event{Name: schema.EventException, TimeNs: startNs + 5e5}
	if typ != "" {
		e.Attrs = append(e.Attrs, schema.Str(schema.AttrExceptionType, typ))
	}
	if msg != "" {
		e.Attrs = append(e.Attrs, schema.Str(schema.AttrExceptionMessage, msg))
	}
	return e
}

func excs(events ...schema.Event) []schema.Event { return events }

// The .NET HttpClient's message when its own Timeout fires: it throws
// TaskCanceledException, and says why.
const dotnetHTTPTimeout = "The request was canceled due to the configured HttpClient.Timeout of 100 seconds elapsing."

// timeoutCases is the table of every timeout and cancellation convention
// Read reads (docs/attributes.md §3), each with negatives. Status
// codes default to Unset: free text counts only with StatusError.
func timeoutCases() []timeoutCase {
	const failed = schema.StatusError
	return []timeoutCase{
		{name: "no evidence", want: false},

		// error.type
		{name: "error.type timeout", attrs: []schema.Attr{schema.Str(schema.AttrErrorType, "timeout")}, want: true},
		{name: "error.type upper case", attrs: []schema.Attr{schema.Str(schema.AttrErrorType, "TIMEOUT")}, want: true},
		{name: "error.type Go deadline", attrs: []schema.Attr{schema.Str(schema.AttrErrorType, "context.DeadlineExceeded")}, want: true},
		{name: "error.type gRPC name", attrs: []schema.Attr{schema.Str(schema.AttrErrorType, "DEADLINE_EXCEEDED")}, want: true},
		{name: "error.type Java exception", attrs: []schema.Attr{schema.Str(schema.AttrErrorType, "java.net.SocketTimeoutException")}, want: true},
		{name: "error.type errno", attrs: []schema.Attr{schema.Str(schema.AttrErrorType, "ETIMEDOUT")}, want: true},
		{name: "error.type phrase", attrs: []schema.Attr{schema.Str(schema.AttrErrorType, "request timed out")}, want: true},
		{name: "error.type Go cancellation", attrs: []schema.Attr{schema.Str(schema.AttrErrorType, "context.Canceled")}, want: true, wantCancelled: true},
		{name: "error.type cancelled", attrs: []schema.Attr{schema.Str(schema.AttrErrorType, "cancelled")}, want: true, wantCancelled: true},
		{name: "error.type .NET cancellation", attrs: []schema.Attr{schema.Str(schema.AttrErrorType, "System.Threading.Tasks.TaskCanceledException")}, want: true, wantCancelled: true},
		{name: "error.type other error", attrs: []schema.Attr{schema.Str(schema.AttrErrorType, "500")}, want: false},
		{name: "error.type other exception", attrs: []schema.Attr{schema.Str(schema.AttrErrorType, "java.io.IOException")}, want: false},
		{name: "error.type empty", attrs: []schema.Attr{schema.Str(schema.AttrErrorType, "")}, wantInvalid: []InvalidValue{bad(schema.AttrErrorType, "empty")}},
		{name: "error.type wrong type", attrs: []schema.Attr{schema.Int(schema.AttrErrorType, 504)}, wantInvalid: []InvalidValue{bad(schema.AttrErrorType, "wrong type")}},

		// rpc.grpc.status_code (older semconv, a number)
		{name: "grpc deadline exceeded", attrs: []schema.Attr{schema.Int(schema.AttrRPCGRPCStatusCode, 4)}, want: true},
		{name: "grpc cancelled", attrs: []schema.Attr{schema.Int(schema.AttrRPCGRPCStatusCode, 1)}, want: true, wantCancelled: true},
		{name: "grpc ok", attrs: []schema.Attr{schema.Int(schema.AttrRPCGRPCStatusCode, 0)}, want: false},
		{name: "grpc unknown", attrs: []schema.Attr{schema.Int(schema.AttrRPCGRPCStatusCode, 2)}, want: false},
		{name: "grpc unavailable", attrs: []schema.Attr{schema.Int(schema.AttrRPCGRPCStatusCode, 14)}, want: false},
		{name: "grpc code as string", attrs: []schema.Attr{schema.Str(schema.AttrRPCGRPCStatusCode, "4")}, want: true},
		{name: "grpc cancelled code as string", attrs: []schema.Attr{schema.Str(schema.AttrRPCGRPCStatusCode, "1")}, want: true, wantCancelled: true},
		{name: "grpc code as whole double", attrs: []schema.Attr{schema.Double(schema.AttrRPCGRPCStatusCode, 4)}, want: true},
		{name: "grpc code garbage", attrs: []schema.Attr{schema.Str(schema.AttrRPCGRPCStatusCode, "DEADLINE")}, wantInvalid: []InvalidValue{bad(schema.AttrRPCGRPCStatusCode, "not a number")}},
		{name: "grpc code negative", attrs: []schema.Attr{schema.Int(schema.AttrRPCGRPCStatusCode, -4)}, wantInvalid: []InvalidValue{bad(schema.AttrRPCGRPCStatusCode, "negative")}},

		// rpc.response.status_code (newer semconv, a string)
		{name: "rpc response deadline exceeded", attrs: []schema.Attr{schema.Str(schema.AttrRPCResponseStatusCode, "DEADLINE_EXCEEDED")}, want: true},
		{name: "rpc response lower case", attrs: []schema.Attr{schema.Str(schema.AttrRPCResponseStatusCode, "deadline_exceeded")}, want: true},
		{name: "rpc response mixed case", attrs: []schema.Attr{schema.Str(schema.AttrRPCResponseStatusCode, "Deadline_Exceeded")}, want: true},
		{name: "rpc response cancelled", attrs: []schema.Attr{schema.Str(schema.AttrRPCResponseStatusCode, "CANCELLED")}, want: true, wantCancelled: true},
		{name: "rpc response mixed-case cancelled", attrs: []schema.Attr{schema.Str(schema.AttrRPCResponseStatusCode, "Cancelled")}, want: true, wantCancelled: true},
		{name: "rpc response connect spelling", attrs: []schema.Attr{schema.Str(schema.AttrRPCResponseStatusCode, "canceled")}, want: true, wantCancelled: true},
		{name: "rpc response ok", attrs: []schema.Attr{schema.Str(schema.AttrRPCResponseStatusCode, "OK")}, want: false},
		{name: "rpc response unavailable", attrs: []schema.Attr{schema.Str(schema.AttrRPCResponseStatusCode, "UNAVAILABLE")}, want: false},
		{
			name:  "rpc response number of a gRPC system",
			attrs: []schema.Attr{schema.Str(schema.AttrRPCResponseStatusCode, "4"), schema.Str(schema.AttrRPCSystemName, "grpc")},
			want:  true,
		},
		{
			name:  "rpc response cancelled number of a gRPC system, older rpc.system",
			attrs: []schema.Attr{schema.Str(schema.AttrRPCResponseStatusCode, "1"), schema.Str(schema.AttrRPCSystem, "grpc")},
			want:  true, wantCancelled: true,
		},
		{name: "rpc response number without an RPC system is not read", attrs: []schema.Attr{schema.Str(schema.AttrRPCResponseStatusCode, "4")}, want: false},
		{
			name:  "rpc response number of another RPC system is not a gRPC code",
			attrs: []schema.Attr{schema.Str(schema.AttrRPCResponseStatusCode, "4"), schema.Str(schema.AttrRPCSystemName, "jsonrpc")},
			want:  false,
		},
		{
			name:  "rpc.system.name wins over rpc.system",
			attrs: []schema.Attr{schema.Str(schema.AttrRPCResponseStatusCode, "4"), schema.Str(schema.AttrRPCSystemName, "dubbo"), schema.Str(schema.AttrRPCSystem, "grpc")},
			want:  false,
		},
		{
			name:  "rpc response number beyond any code",
			attrs: []schema.Attr{schema.Str(schema.AttrRPCResponseStatusCode, "99999999999"), schema.Str(schema.AttrRPCSystemName, "grpc")},
			want:  false,
		},
		{name: "rpc response JSON-RPC error code", attrs: []schema.Attr{schema.Str(schema.AttrRPCResponseStatusCode, "-32603"), schema.Str(schema.AttrRPCSystemName, "jsonrpc")}, want: false},
		{name: "rpc response numeric code is not the string form", attrs: []schema.Attr{schema.Int(schema.AttrRPCResponseStatusCode, 4)}, wantInvalid: []InvalidValue{bad(schema.AttrRPCResponseStatusCode, "wrong type")}},
		{name: "rpc response empty", attrs: []schema.Attr{schema.Str(schema.AttrRPCResponseStatusCode, "")}, wantInvalid: []InvalidValue{bad(schema.AttrRPCResponseStatusCode, "empty")}},

		// http.response.status_code (newer semconv) and http.status_code (older)
		{name: "http 504", attrs: []schema.Attr{schema.Int(schema.AttrHTTPStatusCode, 504)}, want: true},
		{name: "http 499", attrs: []schema.Attr{schema.Int(schema.AttrHTTPStatusCode, 499)}, want: true, wantCancelled: true},
		{name: "http 408", attrs: []schema.Attr{schema.Int(schema.AttrHTTPStatusCode, 408)}, want: true},
		{name: "http 500", attrs: []schema.Attr{schema.Int(schema.AttrHTTPStatusCode, 500)}, want: false},
		{name: "http 200", attrs: []schema.Attr{schema.Int(schema.AttrHTTPStatusCode, 200)}, want: false},
		{name: "http code as string", attrs: []schema.Attr{schema.Str(schema.AttrHTTPStatusCode, "504")}, want: true},
		{name: "http code fraction", attrs: []schema.Attr{schema.Double(schema.AttrHTTPStatusCode, 504.5)}, wantInvalid: []InvalidValue{bad(schema.AttrHTTPStatusCode, "not an integer")}},
		{name: "http code bool", attrs: []schema.Attr{schema.Bool(schema.AttrHTTPStatusCode, true)}, wantInvalid: []InvalidValue{bad(schema.AttrHTTPStatusCode, "wrong type")}},
		{name: "old http 504", attrs: []schema.Attr{schema.Int(schema.AttrHTTPStatusCodeOld, 504)}, want: true},
		{name: "old http 408", attrs: []schema.Attr{schema.Int(schema.AttrHTTPStatusCodeOld, 408)}, want: true},
		{name: "old http 499", attrs: []schema.Attr{schema.Int(schema.AttrHTTPStatusCodeOld, 499)}, want: true, wantCancelled: true},
		{name: "old http 500", attrs: []schema.Attr{schema.Int(schema.AttrHTTPStatusCodeOld, 500)}, want: false},
		{name: "old http 200", attrs: []schema.Attr{schema.Int(schema.AttrHTTPStatusCodeOld, 200)}, want: false},
		{name: "old http code as string", attrs: []schema.Attr{schema.Str(schema.AttrHTTPStatusCodeOld, "504")}, want: true},
		{name: "old http code garbage", attrs: []schema.Attr{schema.Str(schema.AttrHTTPStatusCodeOld, "Gateway Timeout")}, wantInvalid: []InvalidValue{bad(schema.AttrHTTPStatusCodeOld, "not a number")}},
		{name: "the newer http code wins: 200 over an older 504", attrs: []schema.Attr{schema.Int(schema.AttrHTTPStatusCodeOld, 504), schema.Int(schema.AttrHTTPStatusCode, 200)}, want: false},
		{name: "the newer http code wins: 504 over an older 200", attrs: []schema.Attr{schema.Int(schema.AttrHTTPStatusCode, 504), schema.Int(schema.AttrHTTPStatusCodeOld, 200)}, want: true},
		{
			name:  "an unusable newer http code falls back to the older",
			attrs: []schema.Attr{schema.Str(schema.AttrHTTPStatusCode, "x"), schema.Int(schema.AttrHTTPStatusCodeOld, 499)},
			want:  true, wantCancelled: true,
			wantInvalid: []InvalidValue{bad(schema.AttrHTTPStatusCode, "not a number")},
		},
		{
			name:        "an unusable older http code is listed beside a usable newer one",
			attrs:       []schema.Attr{schema.Int(schema.AttrHTTPStatusCode, 504), schema.Bool(schema.AttrHTTPStatusCodeOld, true)},
			want:        true,
			wantInvalid: []InvalidValue{bad(schema.AttrHTTPStatusCodeOld, "wrong type")},
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
		{name: "description of an OK span does not count", status: schema.StatusOK, msg: "retried after a timeout", want: false},
		{name: "description of an unset span does not count", status: schema.StatusUnset, msg: "context deadline exceeded", want: false},
		{
			name: "description beyond the read bound does not count", status: failed,
			msg:  strings.Repeat("x", maxEvidenceText) + " timeout",
			want: false,
		},
		{
			name: "description is not read beside a gRPC status", status: failed,
			attrs: []schema.Attr{schema.Int(schema.AttrRPCGRPCStatusCode, 14)}, msg: "context deadline exceeded",
			want: false,
		},
		{
			name: "description is not read beside a newer RPC status", status: failed,
			attrs: []schema.Attr{schema.Str(schema.AttrRPCResponseStatusCode, "UNKNOWN")}, msg: "query: context canceled",
			want: false,
		},
		{
			name: "an unusable gRPC status does not silence the description", status: failed,
			attrs: []schema.Attr{schema.Str(schema.AttrRPCGRPCStatusCode, "x")}, msg: "context deadline exceeded",
			want: true, wantInvalid: []InvalidValue{bad(schema.AttrRPCGRPCStatusCode, "not a number")},
		},
		{
			name: "description is read beside an HTTP status: a body read timed out", status: failed,
			attrs: []schema.Attr{schema.Int(schema.AttrHTTPStatusCode, 200)},
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
		{name: "exception type of the wrong type", status: failed, events: excs(schema.Event{Name: schema.EventException, Attrs: schema.Attributes{schema.Int(schema.AttrExceptionType, 4)}}), want: false},
		{name: "an event named otherwise does not count", status: failed, events: excs(schema.Event{Name: "error", Attrs: schema.Attributes{schema.Str(schema.AttrExceptionType, "TimeoutError")}}), want: false},
		{name: "exception of an OK span does not count", status: schema.StatusOK, events: excs(exc("java.net.SocketTimeoutException", "")), want: false},
		{name: "exception of an unset span does not count", events: excs(exc("java.net.SocketTimeoutException", "")), want: false},
		{
			name: "exception is not read beside a gRPC status", status: failed,
			attrs: []schema.Attr{schema.Int(schema.AttrRPCGRPCStatusCode, 2)}, events: excs(exc("java.net.SocketTimeoutException", "")),
			want: false,
		},
		{
			name: "one exception event of several is enough", status: failed,
			events: excs(exc("java.io.IOException", ""), exc("TimeoutError", ""), schema.Event{Name: "retry"}),
			want:   true,
		},

		// Precedence between pieces of evidence.
		{
			name:  "any one piece of evidence is enough",
			attrs: []schema.Attr{schema.Int(schema.AttrHTTPStatusCode, 200), schema.Str(schema.AttrErrorType, "x"), schema.Int(schema.AttrRPCGRPCStatusCode, 4)},
			want:  true,
		},
		{
			name:  "a cancellation beats a bare timeout",
			attrs: []schema.Attr{schema.Str(schema.AttrErrorType, "timeout"), schema.Int(schema.AttrHTTPStatusCode, 499)},
			want:  true, wantCancelled: true,
		},
		{
			name: "a cancelled exception beats a timed-out one", status: failed,
			events: excs(exc("TimeoutError", ""), exc("asyncio.CancelledError", "")),
			want:   true, wantCancelled: true,
		},
		{
			name: "a cancellation in the description beats a timeout error.type", status: failed,
			attrs: []schema.Attr{schema.Str(schema.AttrErrorType, "timeout")}, msg: "context canceled",
			want: true, wantCancelled: true,
		},
		{
			name: ".NET: a cancellation explained by HttpClient.Timeout beats error.type TaskCanceledException", status: failed,
			attrs: []schema.Attr{schema.Str(schema.AttrErrorType, "System.Threading.Tasks.TaskCanceledException")}, msg: dotnetHTTPTimeout,
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

func TestReadTimedOut(t *testing.T) {
	for _, tt := range timeoutCases() {
		t.Run(tt.name, func(t *testing.T) {
			got := Read(tt.span())
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
			want, got := Read(s), Read(&c)
			require.Equal(t, want.TimedOut, got.TimedOut)
			require.Equal(t, want.Cancelled, got.Cancelled)
		})
	}
}

func TestEvidenceText(t *testing.T) {
	for v := verdictNone; v <= verdictTimerCancel; v++ {
		require.Equal(t, v, textVerdict(evidenceText(v)), "verdict %d", v)
	}
	require.Empty(t, StatusEvidence(&schema.Span{StatusCode: schema.StatusOK, StatusMessage: "timeout"}))
}

// FuzzReadStatus feeds arbitrary status descriptions, exception types
// and messages, and status attributes into Read. The invariants: it
// never panics; Cancelled implies TimedOut; only a failed span is read from
// free text, so the same span with status OK says nothing unless its
// attributes do; and StatusEvidence in place of the description and events
// keeps the verdict (what analyze.Compact relies on).
func FuzzReadStatus(f *testing.F) {
	f.Add("context deadline exceeded", "*url.Error", `Get "http://a": context canceled`, "", "", int64(-1))
	f.Add("rpc error: code = Canceled desc = context deadline exceeded", "", "", "CANCELLED", "grpc", int64(4))
	f.Add(dotnetHTTPTimeout, "System.Threading.Tasks.TaskCanceledException", dotnetHTTPTimeout, "", "", int64(200))
	f.Add(`"""timeout`, "ValueError", "timeout", "4", "grpc", int64(499))
	f.Add("rpc error: code = ", "*", "\"", "1", "", int64(504))
	f.Fuzz(func(t *testing.T, msg, excType, excMsg, rpcStatus, rpcSystem string, httpCode int64) {
		var attrs schema.Attributes
		if rpcStatus != "" {
			attrs = append(attrs, schema.Str(schema.AttrRPCResponseStatusCode, rpcStatus))
		}
		if rpcSystem != "" {
			attrs = append(attrs, schema.Str(schema.AttrRPCSystemName, rpcSystem))
		}
		if httpCode >= 0 {
			attrs = append(attrs, schema.Int(schema.AttrHTTPStatusCodeOld, httpCode))
		}
		s := clientSpan(attrs...)
		s.StatusCode, s.StatusMessage = schema.StatusError, msg
		s.Events = []schema.Event{{Name: schema.EventException, Attrs: schema.Attributes{schema.Str(schema.AttrExceptionType, excType), schema.Str(schema.AttrExceptionMessage, excMsg)}}}
		got := Read(s)
		require.True(t, !got.Cancelled || got.TimedOut, "Cancelled without TimedOut")

		c := *s
		c.StatusMessage, c.Events = StatusEvidence(s), nil
		compacted := Read(&c)
		require.Equal(t, got.TimedOut, compacted.TimedOut)
		require.Equal(t, got.Cancelled, compacted.Cancelled)

		ok := *s
		ok.StatusCode = schema.StatusOK
		attrsOnly := Read(clientSpan(attrs...))
		okGot := Read(&ok)
		require.Equal(t, attrsOnly.TimedOut, okGot.TimedOut)
		require.Equal(t, attrsOnly.Cancelled, okGot.Cancelled)
	})
}

func TestReadCancellations(t *testing.T) {
	cancelled := func(ns uint64, attrs ...schema.Attr) schema.Event {
		return schema.Event{TimeNs: ns, Name: schema.EventCancelled, Attrs: attrs}
	}
	tests := []struct {
		name        string
		events      []schema.Event
		want        []Cancellation
		wantInvalid []InvalidValue
	}{
		{name: "none", events: []schema.Event{{Name: "exception"}}},
		{
			name:   "each source",
			events: []schema.Event{cancelled(1, schema.Str(schema.AttrCancelSource, "caller_disconnect")), cancelled(2, schema.Str(schema.AttrCancelSource, "deadline")), cancelled(3, schema.Str(schema.AttrCancelSource, "upstream"))},
			want:   []Cancellation{{TimeNs: 1, Source: "caller_disconnect"}, {TimeNs: 2, Source: "deadline"}, {TimeNs: 3, Source: "upstream"}},
		},
		{name: "no source", events: []schema.Event{cancelled(5)}, want: []Cancellation{{TimeNs: 5}}},
		{
			name:        "unknown source keeps the cancellation",
			events:      []schema.Event{cancelled(5, schema.Str(schema.AttrCancelSource, "gremlins"))},
			want:        []Cancellation{{TimeNs: 5}},
			wantInvalid: []InvalidValue{bad(schema.AttrCancelSource, "unknown value")},
		},
		{
			name:        "empty source",
			events:      []schema.Event{cancelled(5, schema.Str(schema.AttrCancelSource, ""))},
			want:        []Cancellation{{TimeNs: 5}},
			wantInvalid: []InvalidValue{bad(schema.AttrCancelSource, "empty")},
		},
		{
			name:        "wrong type source",
			events:      []schema.Event{cancelled(5, schema.Int(schema.AttrCancelSource, 1))},
			want:        []Cancellation{{TimeNs: 5}},
			wantInvalid: []InvalidValue{bad(schema.AttrCancelSource, "wrong type")},
		},
		{
			name:   "other events are ignored",
			events: []schema.Event{{Name: "exception", TimeNs: 1}, cancelled(2, schema.Str(schema.AttrCancelSource, "deadline")), {Name: "budget.cancel", TimeNs: 3}},
			want:   []Cancellation{{TimeNs: 2, Source: "deadline"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := serverSpan()
			s.Events = tt.events
			got := Read(s)
			require.Equal(t, tt.want, got.Cancellations)
			require.Equal(t, tt.wantInvalid, got.Invalid)
		})
	}
}

// TestReadAllocations pins the allocation budget: nothing for a span
// without budget facts, one block for all the millisecond figures, and
// nothing extra for header fallbacks written without escapes.
func TestReadAllocations(t *testing.T) {
	tests := []struct {
		name string
		span *schema.Span
		max  float64
	}{
		{name: "no budget attributes", span: serverSpan(schema.Str("http.route", "/checkout"), schema.Int(schema.AttrHTTPStatusCode, 200)), max: 0},
		{name: "client span", span: benchClientSpan(), max: 1},
		{name: "server span with header fallback", span: benchServerSpan(), max: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			allocs := testing.AllocsPerRun(100, func() { _ = Read(tt.span) })
			require.LessOrEqual(t, allocs, tt.max)
		})
	}
}

// FuzzReadHeaders feeds arbitrary strings into every budget and attempt
// fallback, as string arrays or (for the first) as raw attribute text. The
// invariants: Read never panics; any inferred figure is finite and
// within ±MaxMs; the inferred budget is exactly what the exported parsers
// (HeaderValue, ParseMillis, ParseGRPCTimeout) give for the first header in
// priority order that they accept; every present header they reject is
// listed once in Invalid with a reason; and the attempt is ≥ 1 when set.
func FuzzReadHeaders(f *testing.F) {
	f.Add(`["500"]`, "2S", "250m", "1500", "1767225600250", "1", "2", uint8(schema.KindServer))
	f.Add(`"500"`, "", "", "", "", "", "", uint8(schema.KindClient))
	f.Add(`["\u0035"]`, "99999999H", "123456789n", "-1", "-1", "x", "0", uint8(schema.KindServer))
	f.Add(`[]`, "5", "5 m", "1e3", "NaN", "-1", "4294967295", uint8(schema.KindProducer))
	f.Add(`["a","7"]`, "0n", "+5S", "9007199254740993", "0", "99999999999", "", uint8(schema.KindConsumer))
	f.Fuzz(func(t *testing.T, rawTimeout, grpcHeader, grpcMeta, envoy, deadline, prevAttempts, envoyAttempt string, kind uint8) {
		attrs := schema.Attributes{raw(schema.AttrHeaderRequestTimeoutMs, schema.AttrSlice, rawTimeout)}
		for _, kv := range [][2]string{
			{schema.AttrHeaderGRPCTimeout, grpcHeader}, {schema.AttrMetadataGRPCTimeout, grpcMeta},
			{schema.AttrHeaderEnvoyExpectedMs, envoy}, {schema.AttrHeaderRequestDeadline, deadline},
			{schema.AttrGRPCPreviousAttempts, prevAttempts}, {schema.AttrHeaderEnvoyAttempt, envoyAttempt},
		} {
			if kv[1] != "" {
				attrs = append(attrs, schema.Strings(kv[0], kv[1]))
			}
		}
		s := &schema.Span{Kind: schema.SpanKind(kind % 6), StartNs: startNs, Attrs: attrs}
		got := Read(s)

		// The oracle: the exported parsers over each header's values.
		var want *float64
		wantInvalid := map[string]bool{}
		for _, a := range attrs[:min(len(attrs), 5)] {
			if a.Key == schema.AttrGRPCPreviousAttempts || a.Key == schema.AttrHeaderEnvoyAttempt {
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
			if iv.Key != schema.AttrGRPCPreviousAttempts && iv.Key != schema.AttrHeaderEnvoyAttempt {
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
// parsers, independently of Read's scanner, and returns the budget of
// its first usable value.
func oracleBudget(t *testing.T, a schema.Attr) (float64, bool) {
	var values []string
	switch {
	case a.Type == schema.AttrString:
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
		case schema.AttrHeaderGRPCTimeout, schema.AttrMetadataGRPCTimeout:
			if d, err := ParseGRPCTimeout(v); err == nil {
				return float64(d) / 1e6, true
			}
		case schema.AttrHeaderRequestDeadline:
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

func benchClientSpan() *schema.Span {
	return &schema.Span{
		Kind: schema.KindClient, Name: "POST /charge", Service: "checkout", StartNs: startNs, EndNs: startNs + 42e6,
		Attrs: schema.Attributes{
			schema.Str("http.request.method", "POST"),
			schema.Str("server.address", "payments.internal"),
			schema.Int("server.port", 8443),
			schema.Str("url.full", "https://payments.internal:8443/charge"),
			schema.Str("network.protocol.version", "1.1"),
			schema.Int(schema.AttrHTTPStatusCode, 200),
			schema.Int(schema.AttrHTTPResendCount, 1),
			schema.Str("user_agent.original", "checkout/1.4"),
			schema.Strings(schema.AttrHeaderRequestTimeoutMs, "480"),
			schema.Int(schema.AttrTimeoutMs, 500),
			schema.Int(schema.AttrPropagatedMs, 480),
			schema.Int(schema.AttrAttempt, 2),
			schema.Int(schema.AttrMaxAttempts, 3),
			schema.Int(schema.AttrBackoffMs, 50),
			schema.Str("peer.service", "payments"),
		},
	}
}

func benchServerSpan() *schema.Span {
	return &schema.Span{
		Kind: schema.KindServer, Name: "POST /charge", Service: "payments", StartNs: startNs, EndNs: startNs + 40e6,
		Attrs: schema.Attributes{
			schema.Str("http.request.method", "POST"),
			schema.Str("http.route", "/charge"),
			schema.Str("url.path", "/charge"),
			schema.Str("url.scheme", "https"),
			schema.Str("server.address", "payments.internal"),
			schema.Int("server.port", 8443),
			schema.Str("client.address", "10.0.3.7"),
			schema.Str("network.protocol.version", "1.1"),
			schema.Int(schema.AttrHTTPStatusCode, 200),
			schema.Str("user_agent.original", "checkout/1.4"),
			schema.Strings(schema.AttrHeaderEnvoyExpectedMs, "450"),
			schema.Strings(schema.AttrHeaderRequestTimeoutMs, "480"),
			schema.Strings(schema.AttrHeaderEnvoyAttempt, "2"),
			schema.Strings("http.request.header.content-type", "application/json"),
			schema.Strings("http.request.header.x-request-id", "6f1c2a"),
		},
	}
}

func BenchmarkRead(b *testing.B) {
	benchmarks := []struct {
		name string
		span *schema.Span
	}{
		{name: "client", span: benchClientSpan()},
		{name: "server_header_fallback", span: benchServerSpan()},
	}
	for _, bm := range benchmarks {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			var f Facts
			for b.Loop() {
				f = Read(bm.span)
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
		if i, ok := AttrIndex(strings.Clone(name)); !ok || AttrNames()[i] != name {
			t.Errorf("AttrIndex(%q) = %d, %v: want the place of the name in AttrNames", name, i, ok)
		}
	}
	if _, ok := AttrIndex("http.route"); ok {
		t.Error("http.route is not a budget attribute")
	}
}
