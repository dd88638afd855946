package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sort"
	"time"

	"github.com/budgetd/budgetd/analyze"
	"github.com/budgetd/budgetd/api"
	"github.com/budgetd/budgetd/problems"
	"github.com/budgetd/budgetd/store"
	"github.com/budgetd/budgetd/store/chsql"
	"github.com/budgetd/budgetd/store/storetest"
)

// Fill writes total spans (10-span traces, analysed: hops, problem stats
// and example findings too) into st in batches, the way budgetd serve would
// have stored them.
func Fill(ctx context.Context, st *chsql.Store, total, batch int) error {
	f := newFiller(st, 0, fillStart, uint64(time.Hour)/uint64(max(total, 1)))
	for done := 0; done < total; {
		n := min(batch, total-done)
		if err := f.write(ctx, n); err != nil {
			return err
		}
		done += n
	}
	return nil
}

// fillStart is where the fill starts: 2026-11-01 12:00, the hour Queries
// reads, and where storetest.SpanBatch starts every batch.
var fillStart = uint64(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC).UnixNano())

// filler writes generated batches as budgetd's pipeline would: the spans,
// then their analysis. Each batch has its own seed, so its trace ids are
// new. The batches follow each other in time, as traffic writes them:
// Fill's cover the hour from 12:00, the hour Queries reads, and the
// ingest's carry on from 13:00 at their rate. Until 2026-12-07 the fill's
// spans were 1 ms apart and wrapped around the hour, and the ingest's
// batches fell anywhere in it, so every merged part held most of the
// hour, which no store fed by traffic does (docs/performance.md, step 50).
type filler struct {
	st       *chsql.Store
	analyzer *analyze.Analyzer
	examples *problems.Examples
	interval time.Duration
	seed     uint64 // the last batch's
	next     uint64 // the next span's start, Unix ns
	spacing  uint64 // between spans' starts, ns
}

func newFiller(st *chsql.Store, seed, start, spacing uint64) *filler {
	cfg := problems.DefaultConfig()
	return &filler{st: st, analyzer: analyze.New(analyze.DefaultConfig()), examples: problems.NewExamples(cfg), interval: cfg.TrendInterval,
		seed: seed, next: start, spacing: spacing}
}

func (f *filler) write(ctx context.Context, n int) error {
	f.seed++
	spans := storetest.SpanBatch(f.seed, n)
	// A generated batch starts at fillStart, span i at i ms (and a little
	// jitter): it is moved to the filler's next slots, span i to
	// next + i × spacing with its jitter, its duration and events kept.
	for i := range spans {
		shift := f.next + uint64(i)*f.spacing - (fillStart + uint64(i)*uint64(time.Millisecond))
		spans[i].StartNs += shift
		spans[i].EndNs += shift
		for j := range spans[i].Events {
			spans[i].Events[j].TimeNs += shift
		}
	}
	f.next += uint64(n) * f.spacing
	// Analysed when the pipeline would: once the batch's traces have been
	// idle for assembly's idle period. Findings are read by when they were
	// detected, so a wall-clock stamp would put them outside every window
	// the spans are in.
	var last uint64
	for _, s := range spans {
		last = max(last, s.EndNs)
	}
	now := time.Unix(0, int64(last)).Add(analyze.DefaultAssemblerConfig().Idle)
	hops, findings := storetest.Analyse(f.analyzer, spans, now)
	token := fmt.Sprintf("fill-%d", f.seed)
	if err := f.st.WriteSpans(ctx, token, spans); err != nil {
		return err
	}
	if err := f.st.WriteHops(ctx, token, hops); err != nil {
		return err
	}
	// Like the pipeline: every finding counts in its problem's stats, and
	// the findings table keeps problems.examples_per_interval of each.
	stats := problems.StatsOf(findings, f.interval)
	examples, _ := f.examples.Keep(findings, nil)
	if err := f.st.WriteFindings(ctx, token, examples); err != nil {
		return err
	}
	return f.st.WriteProblemStats(ctx, token, stats)
}

// Ingest keeps writing generated batches into a store at a set rate while
// reads are timed: one batch a second, as budgetd's drainer and analysis
// rounds write (spans, hops, findings, problem stats), analysis included.
// It is the store's side of ingest; decoding and the write-ahead log are
// not in it.
type Ingest struct {
	stop    chan struct{}
	done    chan struct{}
	started time.Time
	spans   int
	err     error
}

// ingestSeed starts the ingest's batches far from the fill's, so their
// trace ids are new.
const ingestSeed = 1 << 32

// StartIngest writes spansPerSecond spans a second into st until Stop.
func StartIngest(ctx context.Context, st *chsql.Store, spansPerSecond int) *Ingest {
	in := &Ingest{stop: make(chan struct{}), done: make(chan struct{}), started: time.Now()}
	go func() {
		defer close(in.done)
		f := newFiller(st, ingestSeed, fillStart+uint64(time.Hour), uint64(time.Second)/uint64(max(spansPerSecond, 1)))
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			if in.err = f.write(ctx, spansPerSecond); in.err != nil {
				return
			}
			in.spans += spansPerSecond
			select {
			case <-in.stop:
				return
			case <-tick.C: // a batch that took over a second is followed at once: the rate falls
			}
		}
	}()
	return in
}

// Stop ends the ingest once the batch it is writing is written (the first
// is started at once, so there is at least one) and returns the spans it
// wrote and the rate it kept, in spans a second: less than asked when the
// store could not take a batch a second.
func (in *Ingest) Stop() (spans int, perSecond float64, err error) {
	close(in.stop)
	<-in.done
	return in.spans, float64(in.spans) / time.Since(in.started).Seconds(), in.err
}

// Queries measures the API's store reads on a filled store: trace by id,
// the first page of findings, the path and edge aggregates over the hour
// the generated spans cover, and the problems list of that hour as the API
// serves it (GET /api/v1/problems: the window's findings, the paths
// aggregate and the problem stats, grouped and encoded).
func Queries(ctx context.Context, st *chsql.Store, runs int) (map[string][2]time.Duration, error) {
	// The last hour as the API reads it at 13:00:29.5: from 12:00:00 to
	// the end of the minute in progress (api: a window relative to now is
	// of whole minutes, store.WholeIntervals).
	until := time.Date(2026, 11, 1, 13, 0, 29, 500_000_000, time.UTC)
	w := store.WholeIntervals(until.Add(-time.Hour), until)
	srv, err := api.New(api.DefaultConfig(), api.Settings{Store: st, Now: func() time.Time { return until }})
	if err != nil {
		return nil, err
	}
	spans, err := st.Spans(ctx, w, 1000)
	if err != nil {
		return nil, err
	}
	if len(spans) == 0 {
		return nil, fmt.Errorf("query benchmark: no spans in the window")
	}
	get := func(path string) (*httptest.ResponseRecorder, error) {
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodGet, path, nil))
		if rec.Code != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
		return rec, nil
	}
	queries := map[string]func() error{
		// The spans of a trace, read within the API's limits (sizes first,
		// then the spans that fit).
		"trace by id": func() error {
			_, _, err := st.Trace(ctx, spans[rand.IntN(len(spans))].TraceID, api.TraceLimits)
			return err
		},
		// The API's trace page (GET /api/v1/traces/{id}): the spans, the
		// trace's hops and its findings, encoded.
		"trace view": func() error {
			id := spans[rand.IntN(len(spans))].TraceID
			rec, err := get("/api/v1/traces/" + id.String())
			if err != nil {
				return err
			}
			var trace struct {
				Spans []struct {
					Budget *struct {
						Path string `json:"path"`
					} `json:"budget"`
				} `json:"spans"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &trace); err != nil {
				return err
			}
			for _, s := range trace.Spans {
				if s.Budget != nil { // every filled trace is analysed
					return nil
				}
			}
			return fmt.Errorf("trace %s has no analysed span", id)
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
		"problems, 1 h": func() error {
			// The API's longest timeout, so a slow list is timed, not refused.
			rec, err := get("/api/v1/problems?timeout=60s")
			if err != nil {
				return err
			}
			var page struct {
				Problems []json.RawMessage `json:"problems"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil {
				return err
			}
			if len(page.Problems) == 0 { // the fill's traces have findings
				return fmt.Errorf("GET /api/v1/problems listed no problem")
			}
			return nil
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
