package chsql

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store"
)

var spanColumns = []string{
	"trace_id", "span_id", "parent_span_id", "trace_state", "service", "name", "kind",
	"start_ns", "end_ns", "status_code", "status_message", "scope_name", "scope_version",
	"resource_attr_keys", "resource_attr_types", "resource_attr_values",
	"attr_keys", "attr_types", "attr_values",
	"event_times", "event_names", "event_attr_keys", "event_attr_types", "event_attr_values",
	"link_trace_ids", "link_span_ids", "link_trace_states", "link_attr_keys", "link_attr_types", "link_attr_values",
}

// attrColumns splits attributes into the parallel key/type/value arrays.
func attrColumns(as schema.Attributes) (keys []string, types []uint8, values []string) {
	keys = make([]string, len(as))
	types = make([]uint8, len(as))
	values = make([]string, len(as))
	for i, a := range as {
		keys[i], types[i], values[i] = a.Key, uint8(a.Type), a.Value
	}
	return keys, types, values
}

// resourceColumns are a resource's attribute columns, boxed once: the
// spans of one resource share its attributes (ingest and the write-ahead
// log keep them shared), so consecutive rows share the columns too instead
// of each building and boxing its own copy.
type resourceColumns struct {
	attrs  schema.Attributes
	keys   any // []string; nil until the first resource
	types  any // []uint8
	values any // []string
}

// of returns the columns of as, reusing the last ones when as is the same
// slice as last time.
func (r *resourceColumns) of(as schema.Attributes) *resourceColumns {
	if r.keys != nil && len(as) == len(r.attrs) && (len(as) == 0 || &as[0] == &r.attrs[0]) {
		return r
	}
	k, t, v := attrColumns(as)
	*r = resourceColumns{attrs: as, keys: k, types: t, values: v}
	return r
}

func appendSpanRow(dst []any, s *schema.Span, res *resourceColumns) []any {
	res = res.of(s.ResourceAttrs)
	ak, at, av := attrColumns(s.Attrs)
	evTimes := make([]uint64, len(s.Events))
	evNames := make([]string, len(s.Events))
	evKeys := make([][]string, len(s.Events))
	evTypes := make([][]uint8, len(s.Events))
	evValues := make([][]string, len(s.Events))
	for i, e := range s.Events {
		evTimes[i], evNames[i] = e.TimeNs, e.Name
		evKeys[i], evTypes[i], evValues[i] = attrColumns(e.Attrs)
	}
	lTrace := make([]string, len(s.Links))
	lSpan := make([]string, len(s.Links))
	lState := make([]string, len(s.Links))
	lKeys := make([][]string, len(s.Links))
	lTypes := make([][]uint8, len(s.Links))
	lValues := make([][]string, len(s.Links))
	for i, l := range s.Links {
		lTrace[i], lSpan[i], lState[i] = l.TraceID.String(), l.SpanID.String(), l.TraceState
		lKeys[i], lTypes[i], lValues[i] = attrColumns(l.Attrs)
	}
	return append(dst,
		s.TraceID.String(), s.SpanID.String(), s.ParentSpanID.String(), s.TraceState,
		s.Service, s.Name, int8(s.Kind), s.StartNs, s.EndNs, int8(s.StatusCode), s.StatusMessage,
		s.ScopeName, s.ScopeVersion,
		res.keys, res.types, res.values, ak, at, av,
		evTimes, evNames, evKeys, evTypes, evValues,
		lTrace, lSpan, lState, lKeys, lTypes, lValues,
	)
}

// waitForInserts waits until no insert into table is running on the
// server (system.processes), polling every 20 ms, for as long as ctx
// allows.
func (s *Store) waitForInserts(ctx context.Context, table string) error {
	prefix := "INSERT INTO " + s.db + "." + table + " "
	for {
		var n uint64
		err := s.queryOne(ctx, "SELECT count() FROM system.processes WHERE startsWith(query, {prefix:String})",
			Params{P("prefix", prefix)}, &n)
		if err != nil {
			return wrapCtx(ctx, fmt.Errorf("look for running inserts: %w", err))
		}
		if n == 0 {
			return nil
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// hopRowBytes estimates a hop's row: its strings and fixed columns.
func hopRowBytes(h *schema.Hop) int {
	return store.RowOverhead + len(h.Service) + len(h.Operation) + len(h.Path) + len(h.RootPath) + len(h.CallerService) +
		len(h.CallerOperation) + len(h.CalleeService) + len(h.CalleeOperation) + len(h.BudgetSource)
}

// traceIndexRow is one (trace, service) entry of the trace-id lookup.
type traceIndexRow struct {
	traceID string
	service string
	startNs uint64
	endNs   uint64
	spans   uint32
}

// traceIndexRows summarises a batch per (trace, service), in a stable order so
// a retried batch renders the same rows.
func traceIndexRows(spans []schema.Span) []traceIndexRow {
	type key struct {
		trace   schema.TraceID
		service string
	}
	byKey := make(map[key]int)
	var rows []traceIndexRow
	for i := range spans {
		s := &spans[i]
		k := key{s.TraceID, s.Service}
		j, ok := byKey[k]
		if !ok {
			j = len(rows)
			byKey[k] = j
			rows = append(rows, traceIndexRow{traceID: s.TraceID.String(), service: s.Service, startNs: s.StartNs, endNs: s.EndNs})
		}
		r := &rows[j]
		r.startNs = min(r.startNs, s.StartNs)
		r.endNs = max(r.endNs, s.EndNs)
		r.spans++
	}
	sort.Slice(rows, func(a, b int) bool {
		if rows[a].traceID != rows[b].traceID {
			return rows[a].traceID < rows[b].traceID
		}
		return rows[a].service < rows[b].service
	})
	return rows
}

// WriteSpans implements store.Store. The spans are written before their
// trace-index rows, so a trace that can be found always has its spans.
//
// On servers without insert_deduplication_token, tokens are recorded in the
// batches table after the insert, so a writer that died, or an attempt
// that failed, between the two leaves a batch that landed under a token
// not recorded; spans already stored are left out of the insert (one
// lookup per batch by trace id), so no span is stored twice.
func (s *Store) WriteSpans(ctx context.Context, token string, all []schema.Span) error {
	spans := all
	if !s.features.DedupToken {
		// An insert whose client died or timed out can still be running
		// on the server: let it finish, or the lookup misses what it
		// is about to store.
		if err := s.waitForInserts(ctx, "spans"); err != nil {
			return fmt.Errorf("write spans: %w", err)
		}
		var err error
		if spans, err = s.MissingSpans(ctx, all); err != nil {
			return fmt.Errorf("write spans: %w", err)
		}
	}
	var res resourceColumns
	var size store.SpanSizer
	err := s.insertParts(ctx, "spans", spanColumns, token, len(spans), func(i int) uint64 { return spans[i].StartNs },
		func(i int) int { return size.Bytes(&spans[i]) },
		func(i int, dst []any) []any { return appendSpanRow(dst, &spans[i], &res) })
	if err != nil {
		return wrapCtx(ctx, err)
	}
	// The index rows cover the whole batch: a batch whose spans landed
	// before its index rows did must still be found by trace id.
	idx := traceIndexRows(all)
	err = s.insertParts(ctx, "trace_index", []string{"trace_id", "service", "start_ns", "end_ns", "spans"}, token, len(idx),
		func(i int) uint64 { return idx[i].startNs }, func(i int) int { return 64 + len(idx[i].traceID) + len(idx[i].service) },
		func(i int, dst []any) []any {
			r := &idx[i]
			return append(dst, r.traceID, r.service, r.startNs, r.endNs, r.spans)
		})
	return wrapCtx(ctx, err)
}

var hopColumns = []string{
	"trace_id", "span_id", "parent_span_id", "service", "operation", "kind", "path", "root_path",
	"caller_service", "caller_operation", "callee_service", "callee_operation",
	"start_ns", "duration_ns", "is_error", "timed_out",
	"remaining_ms", "budget_ms", "budget_source", "timeout_ms", "attempt", "max_attempts",
	"orphaned_ms", "rejected", "inferred", "analyzed_ns", "callee_duration_ns",
	"inferred_timeout_ms", "inferred_remaining_ms", "inference_confidence", "path_calls",
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// WriteHops implements store.Store.
func (s *Store) WriteHops(ctx context.Context, token string, hops []schema.Hop) error {
	err := s.insertParts(ctx, "hops", hopColumns, token, len(hops), func(i int) uint64 { return hops[i].StartNs },
		func(i int) int { return hopRowBytes(&hops[i]) }, func(i int, dst []any) []any {
			h := &hops[i]
			return append(dst,
				h.TraceID.String(), h.SpanID.String(), h.ParentSpanID.String(), h.Service, h.Operation, int8(h.Kind),
				h.Path, h.RootPath, h.CallerService, h.CallerOperation, h.CalleeService, h.CalleeOperation,
				h.StartNs, h.DurationNs, b2u(h.IsError), b2u(h.TimedOut),
				h.RemainingMs, h.BudgetMs, h.BudgetSource, h.TimeoutMs, h.Attempt, h.MaxAttempts,
				h.OrphanedMs, b2u(h.Rejected), b2u(h.Inferred), h.AnalyzedNs, h.CalleeDurationNs,
				h.InferredTimeoutMs, h.InferredRemainingMs, h.InferenceConfidence, h.PathCalls)
		})
	return wrapCtx(ctx, err)
}

var findingColumns = []string{
	"id", "kind", "severity", "trace_id", "span_id", "service", "operation", "caller_service",
	"callee_service", "path", "detected_ns", "evidence_keys", "evidence_values", "message",
}

// WriteReanalysed implements store.Store.
func (s *Store) WriteReanalysed(ctx context.Context, token string, traces []schema.TraceID, analyzedNs uint64) error {
	err := s.insert(ctx, "reanalysed", []string{"trace_id", "analyzed_ns"}, token, len(traces), func(i int, dst []any) []any {
		return append(dst, traces[i].String(), analyzedNs)
	})
	return wrapCtx(ctx, err)
}

// WriteFindings implements store.Store. Evidence keys are written sorted so a
// finding renders the same row every time.
func (s *Store) WriteFindings(ctx context.Context, token string, findings []schema.Finding) error {
	err := s.insert(ctx, "findings", findingColumns, token, len(findings), func(i int, dst []any) []any {
		f := &findings[i]
		keys := make([]string, 0, len(f.Evidence))
		for k := range f.Evidence {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		values := make([]float64, len(keys))
		for j, k := range keys {
			values[j] = f.Evidence[k]
		}
		return append(dst, f.ID, string(f.Kind), string(f.Severity), f.TraceID, f.SpanID, f.Service, f.Operation,
			f.CallerService, f.CalleeService, f.Path, uint64(f.DetectedAt.UnixNano()), keys, values, f.Message)
	})
	return wrapCtx(ctx, err)
}
