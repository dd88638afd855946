package durable

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/budgetd/budgetd/schema"
)

// deadLetter is where spans the store refused for their content go: files
// of OTLP/JSON lines, one ExportTraceServiceRequest per line, named
// spans-YYYYMMDD.jsonl by the UTC day they were written. It is the format
// of the Collector's file exporter: `budgetd analyze FILE` reads it, and
// each line is a body OTLP/HTTP accepts as application/json, so the spans
// can be sent again once the cause is fixed. A line is fsynced before
// write returns, so a span in a dead-letter file is as durable as one in
// the log it came from.
type deadLetter struct {
	dir string
	now func() time.Time

	mu sync.Mutex
}

// newDeadLetter makes the directory if needed.
func newDeadLetter(dir string) (*deadLetter, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("open dead-letter directory: %w", err)
	}
	return &deadLetter{dir: dir, now: time.Now}, nil
}

// write appends spans as one line and fsyncs the file. It returns the
// file's path.
func (d *deadLetter) write(spans []schema.Span) (string, error) {
	line, err := (&ptrace.JSONMarshaler{}).MarshalTraces(spansToTraces(spans))
	if err != nil {
		return "", fmt.Errorf("write dead letter: %w", err)
	}
	line = append(line, '\n')
	d.mu.Lock()
	defer d.mu.Unlock()
	path := filepath.Join(d.dir, "spans-"+d.now().UTC().Format("20060102")+".jsonl")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return "", fmt.Errorf("write dead letter: %w", err)
	}
	_, werr := f.Write(line)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return "", fmt.Errorf("write dead letter %s: %w", path, err)
	}
	return path, nil
}

// spansToTraces turns spans back into OTLP: the inverse of ingest's
// conversion for everything a span keeps. Consecutive spans of one
// resource and scope share a ResourceSpans and ScopeSpans.
func spansToTraces(spans []schema.Span) ptrace.Traces {
	td := ptrace.NewTraces()
	var (
		rs       ptrace.ResourceSpans
		ss       ptrace.ScopeSpans
		lastRes  *schema.Span
		lastScop *schema.Span
	)
	for i := range spans {
		s := &spans[i]
		if lastRes == nil || lastRes.Service != s.Service || !sameAttrs(lastRes.ResourceAttrs, s.ResourceAttrs) {
			rs = td.ResourceSpans().AppendEmpty()
			putAttrs(rs.Resource().Attributes(), s.ResourceAttrs)
			if _, ok := rs.Resource().Attributes().Get("service.name"); !ok && s.Service != "" {
				rs.Resource().Attributes().PutStr("service.name", s.Service)
			}
			lastRes, lastScop = s, nil
		}
		if lastScop == nil || lastScop.ScopeName != s.ScopeName || lastScop.ScopeVersion != s.ScopeVersion {
			ss = rs.ScopeSpans().AppendEmpty()
			ss.Scope().SetName(s.ScopeName)
			ss.Scope().SetVersion(s.ScopeVersion)
			lastScop = s
		}
		sp := ss.Spans().AppendEmpty()
		sp.SetTraceID(pcommon.TraceID(s.TraceID))
		sp.SetSpanID(pcommon.SpanID(s.SpanID))
		sp.SetParentSpanID(pcommon.SpanID(s.ParentSpanID))
		sp.TraceState().FromRaw(s.TraceState)
		sp.SetName(s.Name)
		sp.SetKind(ptrace.SpanKind(s.Kind))
		sp.SetStartTimestamp(pcommon.Timestamp(s.StartNs))
		sp.SetEndTimestamp(pcommon.Timestamp(s.EndNs))
		sp.Status().SetCode(ptrace.StatusCode(s.StatusCode))
		sp.Status().SetMessage(s.StatusMessage)
		putAttrs(sp.Attributes(), s.Attrs)
		for _, e := range s.Events {
			ev := sp.Events().AppendEmpty()
			ev.SetTimestamp(pcommon.Timestamp(e.TimeNs))
			ev.SetName(e.Name)
			putAttrs(ev.Attributes(), e.Attrs)
		}
		for _, l := range s.Links {
			ln := sp.Links().AppendEmpty()
			ln.SetTraceID(pcommon.TraceID(l.TraceID))
			ln.SetSpanID(pcommon.SpanID(l.SpanID))
			ln.TraceState().FromRaw(l.TraceState)
			putAttrs(ln.Attributes(), l.Attrs)
		}
	}
	return td
}

// sameAttrs reports whether a and b are the same attributes; spans of one
// resource share the slice, so the pointer test settles most calls.
func sameAttrs(a, b schema.Attributes) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// putAttrs puts attributes into m with their OTLP types. A value that does
// not parse as its type (it never should: ingest wrote it) is kept as a
// string, so nothing is lost.
func putAttrs(m pcommon.Map, as schema.Attributes) {
	m.EnsureCapacity(len(as))
	for _, a := range as {
		v := m.PutEmpty(a.Key)
		if !setValue(v, a) {
			v.SetStr(a.Value)
		}
	}
}

func setValue(v pcommon.Value, a schema.Attr) bool {
	switch a.Type {
	case schema.AttrEmpty:
		return true
	case schema.AttrString:
		v.SetStr(a.Value)
		return true
	case schema.AttrBool:
		b, err := strconv.ParseBool(a.Value)
		v.SetBool(b)
		return err == nil
	case schema.AttrInt:
		n, err := strconv.ParseInt(a.Value, 10, 64)
		v.SetInt(n)
		return err == nil
	case schema.AttrDouble:
		f, err := parseDouble(a.Value)
		v.SetDouble(f)
		return err == nil
	case schema.AttrBytes:
		b, err := base64.StdEncoding.DecodeString(a.Value)
		v.SetEmptyBytes().FromRaw(b)
		return err == nil
	case schema.AttrSlice, schema.AttrMap:
		dec := json.NewDecoder(bytes.NewReader([]byte(a.Value)))
		dec.UseNumber()
		var raw any
		if err := dec.Decode(&raw); err != nil {
			return false
		}
		return v.FromRaw(numbers(raw)) == nil
	}
	return false
}

// parseDouble reads a double as ingest writes it, with the protobuf JSON
// names of the values JSON has no number for.
func parseDouble(s string) (float64, error) {
	switch s {
	case "NaN", "Infinity", "-Infinity":
		s = map[string]string{"NaN": "NaN", "Infinity": "+Inf", "-Infinity": "-Inf"}[s]
	}
	return strconv.ParseFloat(s, 64)
}

// numbers turns the json.Numbers of a decoded array or object into int64
// where they are whole and float64 otherwise, so they are encoded again as
// the same text: ingest writes nested values in encoding/json's form.
func numbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		f, _ := x.Float64()
		return f
	case []any:
		for i := range x {
			x[i] = numbers(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = numbers(x[k])
		}
	}
	return v
}
