package embedded

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// rows iterates a JSONCompactEachRow result: one JSON array per line.
type rows struct {
	data []byte
	line []json.RawMessage
	err  error
}

func newRows(data []byte) *rows { return &rows{data: data} }

// Next implements chsql.Rows.
func (r *rows) Next() bool {
	for r.err == nil && len(r.data) > 0 {
		line := r.data
		if i := bytes.IndexByte(r.data, '\n'); i >= 0 {
			line, r.data = r.data[:i], r.data[i+1:]
		} else {
			r.data = nil
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var ok bool
		if r.line, ok = splitRow(line, r.line[:0]); !ok {
			r.line = r.line[:0]
			if err := json.Unmarshal(line, &r.line); err != nil {
				r.err = fmt.Errorf("decode chdb row: %w", err)
				return false
			}
		}
		return true
	}
	return false
}

// splitRow splits a row, a JSON array, into its elements without copying
// them, appending to cols, and reports whether line was an array it could
// split. It does not validate the elements: Scan decodes each, and
// refuses what is not JSON. Decoding the row into []json.RawMessage
// validated and copied every byte twice before Scan read it once more.
func splitRow(line []byte, cols []json.RawMessage) ([]json.RawMessage, bool) {
	line = bytes.TrimSpace(line)
	if len(line) < 2 || line[0] != '[' || line[len(line)-1] != ']' {
		return cols, false
	}
	body := bytes.TrimSpace(line[1 : len(line)-1])
	if len(body) == 0 {
		return cols, true
	}
	depth, start, inString := 0, 0, false
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case inString:
			switch c {
			case '\\':
				i++ // the escaped byte cannot end the string
			case '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
		case c == ']' || c == '}':
			if depth--; depth < 0 {
				return cols, false
			}
		case c == ',' && depth == 0:
			cols = append(cols, bytes.TrimSpace(body[start:i]))
			start = i + 1
		}
	}
	if inString || depth != 0 {
		return cols, false
	}
	return append(cols, bytes.TrimSpace(body[start:])), true
}

// Scan implements chsql.Rows. Values decode with encoding/json, which covers
// every destination type chsql uses (a JSON null leaves a **float64 nil).
func (r *rows) Scan(dest ...any) error {
	if len(dest) != len(r.line) {
		return fmt.Errorf("scan chdb row: %d destinations for %d columns", len(dest), len(r.line))
	}
	for i, d := range dest {
		if scanPlain(r.line[i], d) {
			continue
		}
		if err := json.Unmarshal(r.line[i], d); err != nil {
			return fmt.Errorf("scan chdb row: column %d: %w", i, err)
		}
	}
	return nil
}

// scanPlain stores the commonest values without encoding/json's
// reflection — a string without escapes, an integer, a plain float —
// and reports whether it did; anything else is left to encoding/json.
// Where it stores a value, it is the value encoding/json would store.
// Reading 100,000 findings spent half its time in encoding/json.
func scanPlain(raw []byte, dest any) bool {
	switch d := dest.(type) {
	case *string:
		if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
			return false
		}
		body := raw[1 : len(raw)-1]
		ascii := true
		for _, c := range body {
			// Escapes and control characters go to encoding/json.
			if c == '\\' || c == '"' || c < 0x20 {
				return false
			}
			ascii = ascii && c < utf8.RuneSelf
		}
		if !ascii && !utf8.Valid(body) { // encoding/json replaces invalid UTF-8
			return false
		}
		*d = string(body)
		return true
	case *uint8:
		if !plainInteger(raw) {
			return false
		}
		v, err := strconv.ParseUint(string(raw), 10, 8)
		if err != nil {
			return false
		}
		*d = uint8(v)
		return true
	case *uint64:
		if !plainInteger(raw) {
			return false
		}
		v, err := strconv.ParseUint(string(raw), 10, 64)
		if err != nil {
			return false
		}
		*d = v
		return true
	case *int64:
		if !plainInteger(raw) {
			return false
		}
		v, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			return false
		}
		*d = v
		return true
	case *float64:
		if !plainNumber(raw) { // JSON's syntax is stricter than ParseFloat's
			return false
		}
		v, err := strconv.ParseFloat(string(raw), 64)
		if err != nil {
			return false
		}
		*d = v
		return true
	case *[]string:
		return scanPlainArray(raw, d)
	case *[]float64:
		return scanPlainArray(raw, d)
	}
	return false
}

// scanPlainArray is scanPlain for an array whose every element scanPlain
// takes.
func scanPlainArray[T any](raw []byte, dest *[]T) bool {
	var cols [16]json.RawMessage
	elems, ok := splitRow(raw, cols[:0])
	if !ok {
		return false
	}
	out := make([]T, len(elems))
	for i, e := range elems {
		if !scanPlain(e, &out[i]) {
			return false
		}
	}
	*dest = out
	return true
}

// plainNumber reports whether raw is a JSON number: an integer
// (plainInteger), then optionally a fraction and an exponent.
func plainNumber(raw []byte) bool {
	i := 0
	if i < len(raw) && raw[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(raw) && raw[i] >= '0' && raw[i] <= '9' {
			i, n = i+1, n+1
		}
		return n
	}
	switch n := digits(); {
	case n == 0, n > 1 && raw[i-n] == '0':
		return false
	}
	if i < len(raw) && raw[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(raw) && (raw[i] == 'e' || raw[i] == 'E') {
		i++
		if i < len(raw) && (raw[i] == '+' || raw[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(raw)
}

// plainInteger reports whether raw is a JSON integer: an optional minus,
// then 0 or a digit string without a leading zero.
func plainInteger(raw []byte) bool {
	if len(raw) > 0 && raw[0] == '-' {
		raw = raw[1:]
	}
	if len(raw) == 0 || len(raw) > 1 && raw[0] == '0' {
		return false
	}
	for _, c := range raw {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Err implements chsql.Rows.
func (r *rows) Err() error { return r.err }

// Close implements chsql.Rows.
func (r *rows) Close() error { return nil }
