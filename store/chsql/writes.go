package chsql

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
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
		r.bytes += uint64(spanBytes(s))
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

// WriteHops implements store.Store. The hops' interval statistics
// (pathStatsOf, edgeStatsOf) are inserted after them, under the batch's
// token too, so a retried batch adds them once; once both are stored, the
// hops of a re-analysed trace take the earlier analysis of their spans out
// of them (undoSuperseded). A batch that fails between the two is
// retried whole (store.ErrPartlyWritten), as after the undo.
func (s *Store) WriteHops(ctx context.Context, token string, hops []schema.Hop) error {
	err := insertParts(ctx, s, &hopsTable, token, len(hops), func(i int) uint64 { return hops[i].StartNs },
		func(i int) int { return hopRowBytes(&hops[i]) }, func(i int) *schema.Hop { return &hops[i] })
	if err != nil {
		return wrapCtx(ctx, err)
	}
	if err := s.writeHopStats(ctx, token, hops); err != nil {
		return wrapCtx(ctx, fmt.Errorf("write the hops' statistics: %w: %w", store.ErrPartlyWritten, err))
	}
	if err := s.undoSuperseded(ctx, token, hops); err != nil {
		return wrapCtx(ctx, fmt.Errorf("take superseded analyses out of the statistics: %w: %w", store.ErrPartlyWritten, err))
	}
	return nil
}

// writeHopStats inserts the interval statistics of hops into both
// tables, under the batch's token with "-stats" (a token is recorded per
// table).
func (s *Store) writeHopStats(ctx context.Context, token string, hops []schema.Hop) error {
	return s.writeStats(ctx, token+"-stats", pathStatsOf(hops), edgeStatsOf(hops))
}

// writeStats inserts statistics rows into both tables under token.
func (s *Store) writeStats(ctx context.Context, token string, paths []pathStat, edges []edgeStat) error {
	err := insertParts(ctx, s, &pathStatsTable, token, len(paths), func(i int) uint64 { return paths[i].intervalNs },
		func(i int) int { return 40 + len(paths[i].path) }, func(i int) *pathStat { return &paths[i] })
	if err != nil {
		return err
	}
	return insertParts(ctx, s, &edgeStatsTable, token, len(edges), func(i int) uint64 { return edges[i].intervalNs },
		func(i int) int {
			e := &edges[i]
			return 40 + len(e.callerService) + len(e.callerOperation) + len(e.calleeService) + len(e.calleeOperation)
		}, func(i int) *edgeStat { return &edges[i] })
}

// analysis names one analysis of a trace.
type analysis struct {
	trace      schema.TraceID
	analyzedNs uint64
}

// undoSuperseded inserts into the interval statistics, with the opposite
// sign, the hops that hops supersede: for each hop of a trace recorded as
// re-analysed at the hop's analysis time (WriteReanalysed, which the
// analysis writes before the hops), the latest earlier analysis of the
// same span. The statistics then count each span's latest analysis once,
// as the reads of hops do (latestHops). A retry of the batch finds its
// inserts recorded under its token and does not repeat them; a hop first
// stored by this batch is not earlier than itself, so the undo reads the
// same hops whether or not the batch's own landed before. Only a batch
// analysed when this store recorded a re-analysis (recentReanalyses) looks
// the records up: the analysis writes a trace's re-analysis record and its
// hops through the same store, and most batches hold none.
func (s *Store) undoSuperseded(ctx context.Context, token string, hops []schema.Hop) error {
	// A round's hops share one analysis time: ask about each time once.
	times := make(map[uint64]bool)
	var last uint64
	for i := range hops {
		if at := hops[i].AnalyzedNs; at > 0 && at != last {
			last = at
			if s.reanalyses.has(at) {
				times[at] = true
			}
		}
	}
	if len(times) == 0 {
		return nil
	}
	again := make(map[analysis]bool)
	q := "SELECT trace_id, analyzed_ns FROM " + s.db + ".reanalysed WHERE analyzed_ns IN (" + joinNumbers(slices.Sorted(maps.Keys(times))) + ")"
	err := s.eachRow(ctx, q, nil, func(r Rows) error {
		var id string
		var a analysis
		if err := r.Scan(&id, &a.analyzedNs); err != nil {
			return err
		}
		trace, err := schema.ParseTraceID(id)
		if err != nil {
			return err
		}
		a.trace = trace
		again[a] = true
		return nil
	})
	if err != nil || len(again) == 0 {
		return err
	}
	byTime := make(map[uint64][]*schema.Hop)
	for i := range hops {
		if again[analysis{hops[i].TraceID, hops[i].AnalyzedNs}] {
			byTime[hops[i].AnalyzedNs] = append(byTime[hops[i].AnalyzedNs], &hops[i])
		}
	}
	for _, at := range slices.Sorted(maps.Keys(byTime)) {
		for i, chunk := range slices.Collect(slices.Chunk(byTime[at], maxUndoSpans)) {
			old, err := s.readHops(ctx, s.earlierHops(chunk, at), nil)
			if err != nil {
				return err
			}
			// Added up by the same code as they were when written, so the
			// undo lands in the very buckets the earlier analysis added to.
			paths, edges := pathStatsOf(old), edgeStatsOf(old)
			for j := range paths {
				paths[j].n, paths[j].total = -paths[j].n, -paths[j].total
			}
			for j := range edges {
				edges[j].n, edges[j].total = -edges[j].n, -edges[j].total
			}
			undo := token + "-undo-" + strconv.FormatUint(at, 10) + "-" + strconv.Itoa(i)
			if err := s.writeStats(ctx, undo, paths, edges); err != nil {
				return err
			}
		}
	}
	return nil
}

// maxUndoSpans bounds the spans one undo names: each is about 55 bytes of
// the statement's text, which the server parses whole up to
// max_query_size (256 KiB by default).
const maxUndoSpans = 2000

// earlierHops is the query of the latest analysis before analyzedNs of
// each span of hops, with hopsTable's columns (readHops).
func (s *Store) earlierHops(hops []*schema.Hop, analyzedNs uint64) string {
	traces := make(map[schema.TraceID]bool)
	lo, hi := uint64(math.MaxUint64), uint64(0)
	var pairs strings.Builder
	for i, h := range hops {
		traces[h.TraceID] = true
		lo, hi = min(lo, h.StartNs), max(hi, h.StartNs)
		if i > 0 {
			pairs.WriteString(", ")
		}
		// Hex ids: nothing in them needs quoting.
		pairs.WriteString("('" + h.TraceID.String() + "', '" + h.SpanID.String() + "')")
	}
	var ids strings.Builder
	for i, t := range slices.SortedFunc(maps.Keys(traces), func(a, b schema.TraceID) int { return strings.Compare(a.String(), b.String()) }) {
		if i > 0 {
			ids.WriteString(", ")
		}
		ids.WriteString("'" + t.String() + "'")
	}
	// A span's earlier analyses have its start time: bounding start_ns
	// lets the read skip the granules of every path that cannot hold them.
	return "SELECT " + hopsTable.columnList() + " FROM " + s.db + ".hops" +
		" WHERE trace_id IN (" + ids.String() + ") AND start_ns >= " + strconv.FormatUint(lo, 10) + " AND start_ns <= " + strconv.FormatUint(hi, 10) +
		" AND analyzed_ns < " + strconv.FormatUint(analyzedNs, 10) + " AND (trace_id, span_id) IN (" + pairs.String() + ")" +
		" ORDER BY analyzed_ns DESC LIMIT 1 BY trace_id, span_id"
}

// WriteReanalysed implements store.Store.
func (s *Store) WriteReanalysed(ctx context.Context, token string, traces []schema.TraceID, analyzedNs uint64) error {
	if len(traces) > 0 {
		s.reanalyses.add(analyzedNs)
	}
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

// maxRecentReanalyses bounds the analysis times recentReanalyses holds:
// one per analysis round that re-opened a trace, far more than the rounds
// whose hops can still be waiting to be written.
const maxRecentReanalyses = 4096

// recentReanalyses are the analysis times at which this store recorded
// re-analysed traces, the oldest forgotten first. Safe for concurrent use.
type recentReanalyses struct {
	mu    sync.Mutex
	times map[uint64]bool
	order []uint64
}

func (r *recentReanalyses) add(analyzedNs uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.times[analyzedNs] {
		return
	}
	if r.times == nil {
		r.times = make(map[uint64]bool)
	}
	if len(r.order) == maxRecentReanalyses {
		delete(r.times, r.order[0])
		r.order = r.order[1:]
	}
	r.times[analyzedNs] = true
	r.order = append(r.order, analyzedNs)
}

func (r *recentReanalyses) has(analyzedNs uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.times[analyzedNs]
}
