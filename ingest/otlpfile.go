package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/budgetd/budgetd/ingest/translate"
	"github.com/budgetd/budgetd/schema"
)

// Format is an encoding of trace data in a file.
type Format int

// The trace file formats ReadTraces understands: OTLP's, and the JSON of
// Jaeger and Zipkin, which package translate turns into OTLP.
const (
	// FormatProtobuf is one binary protobuf ExportTraceServiceRequest (or
	// TracesData, which has the same wire form).
	FormatProtobuf Format = iota + 1
	// FormatJSON is one OTLP/JSON ExportTraceServiceRequest, possibly
	// pretty-printed over many lines.
	FormatJSON
	// FormatJSONLines is the Collector file exporter's format: one OTLP/JSON
	// ExportTraceServiceRequest per line.
	FormatJSONLines
	// FormatJaegerJSON is the Jaeger query API's JSON, which the Jaeger UI
	// also downloads: {"data":[{"traceID":…,"spans":[…],"processes":{…}}]},
	// or one trace object.
	FormatJaegerJSON
	// FormatZipkinJSON is Zipkin's v2 JSON: an array of spans.
	FormatZipkinJSON
)

// String names the format as error messages do ("otlp json lines").
func (f Format) String() string {
	switch f {
	case FormatProtobuf:
		return "otlp protobuf"
	case FormatJSON:
		return "otlp json"
	case FormatJSONLines:
		return "otlp json lines"
	case FormatJaegerJSON:
		return "jaeger json"
	case FormatZipkinJSON:
		return "zipkin json"
	}
	return fmt.Sprintf("format(%d)", int(f))
}

// utf8BOM is the byte order mark some Windows tools put before JSON text.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// DetectFormat guesses the format of data from its content. JSON starts
// with '{' or '[' after optional white space. An array is Zipkin JSON; an
// object whose first telling key is data or spans (rather than OTLP's
// resourceSpans) is Jaeger JSON; JSON holding more than one top-level
// object, one per line, is JSON lines; any other object is OTLP/JSON, and
// anything else protobuf. It only looks, it does not validate: a wrong guess
// shows as a decode error.
func DetectFormat(data []byte) Format {
	data = trimBOM(data)
	rest := bytes.TrimLeft(data, " \t\r\n")
	if len(rest) == 0 {
		return FormatProtobuf
	}
	switch rest[0] {
	case '[':
		return FormatZipkinJSON
	case '{':
	default:
		return FormatProtobuf
	}
	if jsonKind(rest) == kindJaeger {
		return FormatJaegerJSON
	}
	if json.Valid(rest) {
		return FormatJSON
	}
	line, more := rest, false
	if i := bytes.IndexByte(rest, '\n'); i >= 0 {
		line = bytes.TrimRight(rest[:i], " \t\r")
		more = len(bytes.TrimSpace(rest[i+1:])) > 0
	}
	// A first line that is a whole object, or at least ends like one, is
	// the first record of a JSON lines file; a pretty-printed document's
	// first line is an opening brace or a field. Checking the ending too
	// lets a corrupt first record be reported by its line number.
	if more && (json.Valid(line) || bytes.HasSuffix(line, []byte("}"))) {
		return FormatJSONLines
	}
	return FormatJSON
}

// objectKind is what the top-level keys of a JSON object say it is.
type objectKind int

const (
	kindEmpty   objectKind = iota // no keys: an OTLP request without spans
	kindOTLP                      // resourceSpans
	kindJaeger                    // data (a query response) or spans (one trace)
	kindUnknown                   // keys, none of them telling
)

// jsonKind classifies the JSON object at the start of data by its first
// telling top-level key, reading no further than that key. It tolerates
// input cut short or malformed after that point, so a truncated Jaeger
// download is still reported as Jaeger JSON with the position of the damage.
func jsonKind(data []byte) objectKind {
	kind := kindEmpty
	topLevelKeys(data, func(key []byte) bool {
		switch string(key) {
		case "resourceSpans", "resource_spans":
			kind = kindOTLP
		case "data", "spans":
			kind = kindJaeger
		default:
			kind = kindUnknown
			return true
		}
		return false
	})
	return kind
}

// topLevelKeys calls f with each key of the JSON object data starts with,
// as written (escapes not decoded), until f returns false, the object ends
// or the input stops making sense.
func topLevelKeys(data []byte, f func(key []byte) bool) {
	depth, wantKey := 0, false
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '"':
			end := i + 1
			for end < len(data) && data[end] != '"' {
				if data[end] == '\\' {
					end++
				}
				end++
			}
			if end >= len(data) {
				return
			}
			if depth == 1 && wantKey {
				if !f(data[i+1 : end]) {
					return
				}
				wantKey = false
			}
			i = end
		case '{', '[':
			depth++
			if depth == 1 {
				if c != '{' {
					return
				}
				wantKey = true
			}
		case '}', ']':
			if depth--; depth <= 0 {
				return
			}
		case ',':
			wantKey = depth == 1
		}
	}
}

// trimBOM strips a UTF-8 byte order mark that precedes JSON. Protobuf never
// starts with one (0xEF is an invalid wire type), so the check is safe.
func trimBOM(data []byte) []byte {
	if rest, ok := bytes.CutPrefix(data, utf8BOM); ok {
		if r := bytes.TrimLeft(rest, " \t\r\n"); len(r) > 0 && (r[0] == '{' || r[0] == '[') {
			return rest
		}
	}
	return data
}

// ReadTraces reads a trace file in any Format from r, detecting the format
// from its content. It returns one Traces per request in the file (one per
// line for JSON lines; blank lines are skipped; one for a Jaeger or Zipkin
// file). Errors name the format that was tried and, for JSON, the line, or
// the trace and span.
func ReadTraces(r io.Reader) ([]ptrace.Traces, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read otlp file: %w", err)
	}
	return DecodeTraces(data)
}

// DecodeTraces is ReadTraces for data already in memory.
func DecodeTraces(data []byte) ([]ptrace.Traces, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		// Nothing to read: an empty file, or a JSON lines file that
		// received no data. (As protobuf it would be a request with no
		// spans, so the answer is the same.)
		return nil, nil
	}
	data = trimBOM(data)
	format := DetectFormat(data)
	var (
		out []ptrace.Traces
		err error
	)
	switch format {
	case FormatJSON:
		out, err = decodeJSON(data)
	case FormatJSONLines:
		out, err = decodeJSONLines(data)
	case FormatJaegerJSON:
		out, err = decodeTranslated(data, format, translate.Jaeger)
	case FormatZipkinJSON:
		out, err = decodeTranslated(data, format, translate.Zipkin)
	default:
		out, err = decodeProto(data)
		if err != nil {
			return nil, fmt.Errorf("%w; and the file is not JSON either (OTLP/JSON and Jaeger JSON start with {, Zipkin v2 JSON with [)", err)
		}
		return out, nil
	}
	if err != nil && data[0] != '{' && data[0] != '[' {
		// JSON was guessed after skipping leading white space, but '\n'
		// (0x0A) is also the tag of resource_spans, the first byte of
		// nearly every protobuf request: "\n{" is a request whose first
		// ResourceSpans is 123 bytes long. If the data decodes as protobuf,
		// it was protobuf.
		if td, perr := decodeProto(data); perr == nil {
			return td, nil
		}
	}
	return out, err
}

func decodeProto(data []byte) ([]ptrace.Traces, error) {
	var u ptrace.ProtoUnmarshaler
	td, err := u.UnmarshalTraces(data)
	if err != nil {
		return nil, fmt.Errorf("read otlp protobuf: %w", err)
	}
	return []ptrace.Traces{td}, nil
}

func decodeJSON(data []byte) ([]ptrace.Traces, error) {
	td, err := unmarshalJSON(data)
	if err != nil {
		return nil, fmt.Errorf("read otlp json: %w", err)
	}
	if td.SpanCount() == 0 && jsonKind(bytes.TrimLeft(data, " \t\r\n")) == kindUnknown {
		// pdata ignores keys it does not know, so any JSON object would
		// read as a file without spans: say what was looked for instead.
		return nil, fmt.Errorf("read trace file: a JSON object with none of the keys of a format budgetd reads "+
			"(first key %s; OTLP/JSON has resourceSpans, Jaeger JSON data or spans, and Zipkin v2 JSON is an array)", firstKey(data))
	}
	return []ptrace.Traces{td}, nil
}

// firstKey returns the first top-level key of the JSON object data, quoted.
func firstKey(data []byte) string {
	key := ""
	topLevelKeys(bytes.TrimLeft(data, " \t\r\n"), func(k []byte) bool {
		key = string(k)
		return false
	})
	if len(key) > 64 {
		key = key[:64] + "…"
	}
	return `"` + key + `"`
}

// decodeTranslated reads a Jaeger or Zipkin file with its translator.
func decodeTranslated(data []byte, format Format, translator func([]byte) (ptrace.Traces, error)) ([]ptrace.Traces, error) {
	if !json.Valid(data) {
		return nil, fmt.Errorf("read %s: %w", format, syntaxError(data))
	}
	td, err := translator(data)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", format, err)
	}
	return []ptrace.Traces{td}, nil
}

func decodeJSONLines(data []byte) ([]ptrace.Traces, error) {
	var out []ptrace.Traces
	for n := 1; len(data) > 0; n++ {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		td, err := unmarshalJSON(line)
		if err != nil {
			return nil, fmt.Errorf("read otlp json lines: line %d: %w", n, err)
		}
		out = append(out, td)
	}
	return out, nil
}

// unmarshalJSON decodes one OTLP/JSON request. It checks the syntax with
// encoding/json first: pdata's decoder stops at the end of the first value
// and ignores what follows, and its messages carry no position a person can
// find in a file.
func unmarshalJSON(data []byte) (ptrace.Traces, error) {
	if !json.Valid(data) {
		return ptrace.Traces{}, syntaxError(data)
	}
	if data = bytes.TrimLeft(data, " \t\r\n"); data[0] != '{' {
		return ptrace.Traces{}, errors.New("not a JSON object")
	}
	var u ptrace.JSONUnmarshaler
	return u.UnmarshalTraces(data)
}

// syntaxError describes why data, known to be invalid JSON, is invalid, with
// the line and column where encoding/json gave up.
func syntaxError(data []byte) error {
	var v struct{}
	err := json.Unmarshal(data, &v)
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return errors.New("invalid JSON")
	}
	// Offset counts the bytes read, the offending one included; at the end
	// of the input there is no offending byte and the position is just past
	// the last one.
	pos := int(min(max(se.Offset, 0), int64(len(data))))
	if pos > 0 && !(pos == len(data) && strings.HasPrefix(se.Error(), "unexpected end")) {
		pos--
	}
	before := data[:pos]
	line := bytes.Count(before, []byte("\n")) + 1
	col := pos - bytes.LastIndexByte(before, '\n') // 1-based
	if line == 1 {
		return fmt.Errorf("column %d: %w", col, err)
	}
	return fmt.Errorf("line %d, column %d: %w", line, col, err)
}

// ReadSpans reads a trace file in any Format from r and converts it with c. The result counts spans rejected or cut over the whole file.
func ReadSpans(r io.Reader, c *Converter) (ConvertResult, error) {
	tds, err := ReadTraces(r)
	if err != nil {
		return ConvertResult{}, err
	}
	var res ConvertResult
	for i, td := range tds {
		cr := c.Convert(td)
		// Let the decoded request go as soon as it is converted; pdata
		// takes more memory than the spans made from it.
		tds[i] = ptrace.Traces{}
		if res.Spans == nil {
			res.Spans = cr.Spans
		} else {
			res.Spans = append(res.Spans, cr.Spans...)
		}
		res.Received += cr.Received
		res.Stats.Add(cr.Stats)
	}
	res.Rejected = res.Stats.Rejected()
	res.RejectReason = res.Stats.RejectReason()
	return res, nil
}

// ReadSpansFile reads the trace file at path, in any Format, and converts it
// with c.
// Invalid spans are left out; use ReadSpans to learn how many and why.
func ReadSpansFile(path string, c *Converter) ([]schema.Span, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read spans: %w", err)
	}
	defer f.Close()
	res, err := ReadSpans(f, c)
	if err != nil {
		return nil, fmt.Errorf("read spans from %s: %w", path, err)
	}
	return res.Spans, nil
}
