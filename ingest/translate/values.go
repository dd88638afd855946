package translate

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Attribute keys and tag names both translators read, as the Collector's
// translators spell them (contrib internal/coreinternal/tracetranslator and
// the semantic conventions they import).
const (
	attrServiceName       = "service.name"
	tagSpanKind           = "span.kind"
	tagError              = "error"
	tagStatusCode         = "otel.status_code"
	tagStatusDescription  = "otel.status_description"
	tagW3CTraceState      = "w3c.tracestate"
	tagScopeName          = "otel.scope.name"
	tagScopeVersion       = "otel.scope.version"
	resourceNoServiceName = "OTLPResourceNoServiceName"
)

// parseTraceID reads a hex trace id of up to 32 digits, shorter ones padded
// with leading zeros: Jaeger writes a 64-bit trace id as 16 digits, Zipkin
// accepts 16 or 32, and both parse any length up to that (strconv.ParseUint
// in jaeger-idl and zipkin-go). An empty id is the zero id, which the
// Converter rejects and counts like an OTLP span without one.
func parseTraceID(s string) (pcommon.TraceID, bool) {
	var id pcommon.TraceID
	return id, decodeHexID(id[:], s)
}

// parseSpanID reads a hex span id of up to 16 digits, as parseTraceID.
func parseSpanID(s string) (pcommon.SpanID, bool) {
	var id pcommon.SpanID
	return id, decodeHexID(id[:], s)
}

// decodeHexID decodes s, right-aligned, into dst.
func decodeHexID(dst []byte, s string) bool {
	if len(s) > 2*len(dst) {
		return false
	}
	if s == "" {
		return true
	}
	padded := strings.Repeat("0", 2*len(dst)-len(s)) + s
	_, err := hex.Decode(dst, []byte(padded))
	return err == nil
}

// maxMicros is the largest count of microseconds whose nanoseconds fit in
// OTLP's uint64 timestamps.
const maxMicros = math.MaxUint64 / 1000

// micros reads a count of microseconds since the epoch (or a duration in
// microseconds), as both formats write times, and returns nanoseconds. An
// absent or null time is 0.
func micros(raw json.RawMessage) (uint64, error) {
	text := string(bytes.TrimSpace(raw))
	if text == "" || text == "null" {
		return 0, nil
	}
	v, err := strconv.ParseUint(text, 10, 64)
	if err != nil || v > maxMicros {
		return 0, fmt.Errorf("%s is not a whole number of microseconds from 0 to %d", clip(text), uint64(maxMicros))
	}
	return v * 1000, nil
}

// endOf returns start + duration, or an error when the sum overflows.
func endOf(start, duration uint64) (uint64, error) {
	if start > math.MaxUint64-duration {
		return 0, errors.New("start + duration is past the year 2554")
	}
	return start + duration, nil
}

// quote quotes a value from the input for an error message, cut so that a
// megabyte of garbage does not become a megabyte of error text.
func quote(s string) string {
	if len(s) > maxQuoted {
		return strconv.Quote(s[:maxQuoted]) + "…"
	}
	return strconv.Quote(s)
}

// clip cuts JSON text from the input for an error message.
func clip(s string) string {
	if len(s) > maxQuoted {
		return s[:maxQuoted] + "…"
	}
	return s
}

// maxQuoted is how much of a bad value an error message shows.
const maxQuoted = 64

// headerPrefixes begin the attributes the semantic conventions define as
// string arrays, one element per header line: budgetd reads budgets from
// them (docs/attributes.md). Neither format has arrays, and the Collector's
// exporters write an array as its JSON text ("[\"900\"]").
var headerPrefixes = [...]string{
	"http.request.header.", "http.response.header.",
	"rpc.request.metadata.", "rpc.response.metadata.",
}

// PutString puts a string attribute. A header or metadata attribute holding
// the JSON text of an array of strings becomes that array again. The
// Collector's translators keep the text as a string, but budgetd's header
// readers take a plain string as the header's single value, and
// `["900"]` is not a timeout: without this every propagated budget in a
// Jaeger or Zipkin file, or in the Collector's ClickHouse table, would be
// lost.
func PutString(m pcommon.Map, key, v string) {
	if len(v) >= 2 && v[0] == '[' && isHeaderKey(key) {
		var values []string
		if json.Unmarshal([]byte(v), &values) == nil {
			s := m.PutEmptySlice(key)
			s.EnsureCapacity(len(values))
			for _, e := range values {
				s.AppendEmpty().SetStr(e)
			}
			return
		}
	}
	m.PutStr(key, v)
}

func isHeaderKey(key string) bool {
	for _, p := range headerPrefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// describeJSON rewords encoding/json's type errors, which name Go types
// ("cannot unmarshal object into Go struct field jaegerSpan.tags of type
// []translate.jaegerKV"), in terms of the document: the field path and the JSON
// type found and wanted.
func describeJSON(err error) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return err
	}
	if te.Field == "" {
		return fmt.Errorf("a JSON %s where %s was expected", te.Value, jsonKind(te.Type))
	}
	return fmt.Errorf("%s: a JSON %s where %s was expected", te.Field, te.Value, jsonKind(te.Type))
}

// jsonKind names the JSON a Go type decodes from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Uint16:
		return "an integer from 0 to 65535"
	case reflect.Uint32, reflect.Uint64, reflect.Uint:
		return "a non-negative integer"
	case reflect.Int, reflect.Int64, reflect.Float64:
		return "a number"
	case reflect.Slice:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return t.String()
}
