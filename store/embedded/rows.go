package embedded

import (
	"bytes"
	"encoding/json"
	"fmt"
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
		r.line = r.line[:0]
		if err := json.Unmarshal(line, &r.line); err != nil {
			r.err = fmt.Errorf("decode chdb row: %w", err)
			return false
		}
		return true
	}
	return false
}

// Scan implements chsql.Rows. Values decode with encoding/json, which covers
// every destination type chsql uses (a JSON null leaves a **float64 nil).
func (r *rows) Scan(dest ...any) error {
	if len(dest) != len(r.line) {
		return fmt.Errorf("scan chdb row: %d destinations for %d columns", len(dest), len(r.line))
	}
	for i, d := range dest {
		if err := json.Unmarshal(r.line[i], d); err != nil {
			return fmt.Errorf("scan chdb row: column %d: %w", i, err)
		}
	}
	return nil
}

// Err implements chsql.Rows.
func (r *rows) Err() error { return r.err }

// Close implements chsql.Rows.
func (r *rows) Close() error { return nil }
