package chsql

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/budgetd/budgetd/problems"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store"
)

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
// not recorded; on a later attempt, spans already stored are left out of
// the insert (spansNotStored), so no span is stored twice.
func (s *Store) WriteSpans(ctx context.Context, token string, all []schema.Span) error {
	spans := all
	if !s.features.DedupToken && len(all) > 0 {
		var err error
		if spans, err = s.spansNotStored(ctx, token, all); err != nil {
			return fmt.Errorf("write spans: %w", err)
		}
	}
	var size store.SpanSizer
	err := insertParts(ctx, s, &spansTable, token, len(spans), func(i int) uint64 { return spans[i].StartNs },
		func(i int) int { return size.Bytes(&spans[i]) }, func(i int) *schema.Span { return &spans[i] })
	if err != nil {
		return wrapCtx(ctx, err)
	}
	// The index rows cover the whole batch: a batch whose spans landed
	// before its index rows did must still be found by trace id.
	idx := traceIndexRows(all)
	err = insertParts(ctx, s, &traceIndexTable, token, len(idx),
		func(i int) uint64 { return idx[i].startNs }, func(i int) int { return 64 + len(idx[i].traceID) + len(idx[i].service) },
		func(i int) *traceIndexRow { return &idx[i] })
	return wrapCtx(ctx, err)
}

// spansAttempt is the batches table's tbl of the record that a spans batch
// was attempted (spansNotStored).
const spansAttempt = "spans attempt"

// spansNotStored returns the spans of a batch that no earlier attempt under
// token stored, for servers without insert_deduplication_token. An earlier
// attempt may have landed without its token being recorded, so its spans
// are looked up by trace id (MissingSpans), once any insert it left
// running on the server has finished. Nearly every batch is written once:
// its first attempt is recorded before anything is inserted, and a batch
// with no attempt recorded needs no lookup. The lookups took half of the
// server's time while the query benchmark filled 18.16, one per batch.
func (s *Store) spansNotStored(ctx context.Context, token string, spans []schema.Span) ([]schema.Span, error) {
	if !validToken(token) {
		return nil, fmt.Errorf("invalid dedup token %q", token)
	}
	tried, err := s.recorded(ctx, token, spansAttempt)
	if err != nil {
		return nil, wrapCtx(ctx, fmt.Errorf("look up earlier attempts: %w", err))
	}
	if !tried {
		// Only once the record is in may the spans go in: an attempt
		// whose record failed inserted nothing.
		err := insertOne(ctx, s, &batchesTable, batchRow{token: token, table: spansAttempt, rows: uint64(len(spans)),
			writtenNs: uint64(time.Now().UnixNano())})
		if err != nil {
			return nil, wrapCtx(ctx, fmt.Errorf("record attempt: %w", err))
		}
		return spans, nil
	}
	// An insert whose client died or timed out can still be running on
	// the server: let it finish, or the lookup misses what it is about to
	// store.
	if err := s.waitForInserts(ctx, "spans"); err != nil {
		return nil, err
	}
	return s.MissingSpans(ctx, spans)
}

// WriteHops implements store.Store.
func (s *Store) WriteHops(ctx context.Context, token string, hops []schema.Hop) error {
	err := insertParts(ctx, s, &hopsTable, token, len(hops), func(i int) uint64 { return hops[i].StartNs },
		func(i int) int { return hopRowBytes(&hops[i]) }, func(i int) *schema.Hop { return &hops[i] })
	return wrapCtx(ctx, err)
}

// WriteReanalysed implements store.Store.
func (s *Store) WriteReanalysed(ctx context.Context, token string, traces []schema.TraceID, analyzedNs uint64) error {
	err := insert(ctx, s, &reanalysedTable, token, len(traces), func(i int) reanalysedRow {
		return reanalysedRow{trace: traces[i], analyzedNs: analyzedNs}
	})
	return wrapCtx(ctx, err)
}

// WriteProblemStats implements store.Store.
func (s *Store) WriteProblemStats(ctx context.Context, token string, stats []problems.Stat) error {
	err := insert(ctx, s, &problemStatsTable, token, len(stats), func(i int) *problems.Stat { return &stats[i] })
	return wrapCtx(ctx, err)
}

// WriteEdgeStates implements store.Store.
func (s *Store) WriteEdgeStates(ctx context.Context, token string, states []schema.EdgeState) error {
	err := insert(ctx, s, &edgeStatesTable, token, len(states), func(i int) *schema.EdgeState { return &states[i] })
	return wrapCtx(ctx, err)
}

// WriteFindings implements store.Store. Evidence keys are written sorted so a
// finding renders the same row every time.
func (s *Store) WriteFindings(ctx context.Context, token string, findings []schema.Finding) error {
	var keys []string // reused: a row's keys are in the block once it is appended
	err := insert(ctx, s, &findingsTable, token, len(findings), func(i int) findingRow {
		f := &findings[i]
		keys = keys[:0]
		for k := range f.Evidence {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return findingRow{f: f, keys: keys}
	})
	return wrapCtx(ctx, err)
}
