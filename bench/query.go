package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/budgetd/budgetd/analyze"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store"
	"github.com/budgetd/budgetd/store/chsql"
	"github.com/budgetd/budgetd/store/storetest"
)

// Fill writes total spans (10-span traces, analysed: hops and findings too)
// into st in batches, the way budgetd serve would have stored them.
func Fill(ctx context.Context, st *chsql.Store, total, batch int) error {
	a := analyze.New(analyze.DefaultConfig())
	now := time.Now()
	for done, seed := 0, uint64(1); done < total; seed++ {
		n := min(batch, total-done)
		spans := storetest.SpanBatch(seed, n)
		byTrace := map[schema.TraceID][]schema.Span{}
		for _, s := range spans {
			byTrace[s.TraceID] = append(byTrace[s.TraceID], s)
		}
		var hops []schema.Hop
		var findings []schema.Finding
		for _, ts := range byTrace {
			r := a.Trace(schema.NewTrace(ts), now)
			for i := range r.Hops {
				r.Hops[i].AnalyzedNs = uint64(now.UnixNano()) // as the pipeline stamps them
			}
			hops = append(hops, r.Hops...)
			findings = append(findings, r.Findings...)
		}
		token := fmt.Sprintf("fill-%d", seed)
		if err := st.WriteSpans(ctx, token, spans); err != nil {
			return err
		}
		if err := st.WriteHops(ctx, token, hops); err != nil {
			return err
		}
		if err := st.WriteFindings(ctx, token, findings); err != nil {
			return err
		}
		done += n
	}
	return nil
}

// Queries measures the API's store reads on a filled store: trace by id,
// the first page of findings, and the path and edge aggregates over the hour
// the generated spans cover.
func Queries(ctx context.Context, st *chsql.Store, runs int) (map[string][2]time.Duration, error) {
	w := store.WindowOf(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 13, 0, 0, 0, time.UTC))
	spans, err := st.Spans(ctx, w, 1000)
	if err != nil {
		return nil, err
	}
	if len(spans) == 0 {
		return nil, fmt.Errorf("query benchmark: no spans in the window")
	}
	queries := map[string]func() error{
		"trace by id": func() error {
			_, _, err := st.Trace(ctx, spans[rand.IntN(len(spans))].TraceID, store.TraceLimits{})
			return err
		},
		// What the API's trace page reads (GET /api/v1/traces/{id}): the
		// spans, the trace's hops and its findings.
		"trace view": func() error {
			id := spans[rand.IntN(len(spans))].TraceID
			spans, _, err := st.Trace(ctx, id, store.TraceLimits{})
			if err != nil {
				return err
			}
			hops, err := st.TraceHops(ctx, id, store.SpanWindow(spans))
			if err != nil {
				return err
			}
			if len(hops) == 0 { // every filled trace is analysed
				return fmt.Errorf("trace %s has no hops", id)
			}
			_, err = st.Findings(ctx, store.FindingQuery{TraceID: id.String(), Window: store.AnalysisWindow(hops), Limit: store.MaxPageSize})
			return err
		},
		"findings first page": func() error {
			_, err := st.Findings(ctx, store.FindingQuery{Limit: 100})
			return err
		},
		"paths, 1 h": func() error {
			_, err := st.Paths(ctx, w, 100)
			return err
		},
		"edges, 1 h": func() error {
			_, err := st.Edges(ctx, w, 100)
			return err
		},
	}
	out := map[string][2]time.Duration{}
	for name, q := range queries {
		var took []time.Duration
		for range runs {
			t0 := time.Now()
			if err := q(); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			took = append(took, time.Since(t0))
		}
		sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
		out[name] = [2]time.Duration{took[len(took)/2], took[min(len(took)-1, len(took)*99/100)]}
	}
	return out, nil
}

// BytesPerSpan is each table's compressed size on disk over the stored
// spans, by table name.
func BytesPerSpan(ctx context.Context, st *chsql.Store) (map[string]float64, error) {
	n, err := st.CountRows(ctx, "spans")
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("bytes per span: no spans stored")
	}
	bytes, err := storetest.DiskBytes(ctx, st)
	if err != nil {
		return nil, err
	}
	out := make(map[string]float64, len(bytes))
	for table, b := range bytes {
		out[table] = float64(b) / float64(n)
	}
	return out, nil
}
