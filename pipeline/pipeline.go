package pipeline

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/budgetd/budgetd/analyze"
	"github.com/budgetd/budgetd/durable"
	"github.com/budgetd/budgetd/problems"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store"
)

// Config is the streaming part of the analyze section.
type Config struct {
	Assembly analyze.AssemblerConfig `yaml:"assembly"`
	// Tick is how often due traces are looked for.
	Tick time.Duration `yaml:"tick"`
	// EdgeFindingsEvery is how often per-edge findings (latency_inversion)
	// are computed over the edge window and written.
	EdgeFindingsEvery time.Duration `yaml:"edge_findings_every"`
	// WriteTimeout bounds one store write of hops or findings.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// WriteAttempts is how many times a failed write is tried.
	WriteAttempts int `yaml:"write_attempts"`
}

// DefaultConfig returns the streaming defaults.
func DefaultConfig() Config {
	return Config{
		Assembly:          analyze.DefaultAssemblerConfig(),
		Tick:              time.Second,
		EdgeFindingsEvery: time.Minute,
		WriteTimeout:      10 * time.Second,
		WriteAttempts:     3,
	}
}

// Validate reports every setting that cannot work, naming its key.
func (c Config) Validate() error {
	errs := []error{c.Assembly.Validate()}
	if c.Tick <= 0 {
		errs = append(errs, errors.New("analyze.tick must be > 0"))
	}
	if c.EdgeFindingsEvery <= 0 {
		errs = append(errs, errors.New("analyze.edge_findings_every must be > 0"))
	}
	if c.WriteTimeout <= 0 {
		errs = append(errs, errors.New("analyze.write_timeout must be > 0"))
	}
	if c.WriteAttempts < 1 {
		errs = append(errs, errors.New("analyze.write_attempts must be >= 1"))
	}
	return errors.Join(errs...)
}

// Settings are what the pipeline is given rather than configured with.
type Settings struct {
	Logger     *slog.Logger
	Store      store.Store
	Analyzer   *analyze.Analyzer
	Registerer prometheus.Registerer // nil: metrics are not registered
	Now        func() time.Time      // nil: time.Now
	// Problems bounds the findings stored in full per problem and
	// interval; nil takes problems.DefaultConfig.
	Problems *problems.Config
}

// Pipeline is the streaming analysis. Spans may be called from any
// goroutine; Start and Shutdown from the owner only.
type Pipeline struct {
	cfg      Config
	log      *slog.Logger
	store    store.Store
	writer   *durable.Writer
	analyzer *analyze.Analyzer
	now      func() time.Time
	metrics  *metrics

	mu  sync.Mutex // guards asm
	asm *analyze.Assembler
	// processMu serialises analyses: the worker's tick and Flush each take
	// due traces from asm, and a Flush that found nothing due while the
	// worker was still writing what it took would return before those
	// results are stored. Holding it across take-analyse-write makes Flush
	// mean what it says.
	processMu sync.Mutex
	// roundSpans is the most spans one analysis round takes
	// (maxAnalysisSpans; tests lower it).
	roundSpans int
	// analysing is how many spans process has taken from asm and not yet
	// written the analysis of: with asm's pending spans, the analysis's
	// whole backlog (budgetd_analysis_analysing_spans).
	analysing atomic.Int64

	// edgeMu serialises edge evaluations and guards edges, the edge
	// findings of the last one (distinct.go).
	edgeMu sync.Mutex
	edges  edgeVerdicts
	// counted remembers the findings counted per recently analysed trace.
	counted *countedFindings
	// examples bounds the findings stored in full; interval is the
	// problems' trend interval, their stats' unit.
	examples *problems.Examples
	interval time.Duration
	// replica names this process in the edge states it shares: random per
	// process, so a restarted replica merges its predecessor's states as
	// another's until they are stale (three evaluations), and they hold
	// the samples its memory lost.
	replica string

	stop chan struct{}
	done chan struct{}
}

// New returns a stopped pipeline.
func New(cfg Config, set Settings) (*Pipeline, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if set.Store == nil || set.Analyzer == nil {
		return nil, errors.New("new pipeline: store and analyzer are required")
	}
	p := &Pipeline{
		cfg: cfg, log: set.Logger, store: set.Store, analyzer: set.Analyzer, now: set.Now,
		asm:        analyze.NewAssembler(cfg.Assembly),
		counted:    newCountedFindings(cfg.Assembly.RememberClosed, maxCountedFindings),
		roundSpans: maxAnalysisSpans,
	}
	pcfg := problems.DefaultConfig()
	if set.Problems != nil {
		pcfg = *set.Problems
	}
	p.examples, p.interval = problems.NewExamples(pcfg), pcfg.TrendInterval
	var err error
	if p.replica, err = newToken(); err != nil {
		return nil, err
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.now == nil {
		p.now = time.Now
	}
	m, err := newMetrics(set.Registerer, p)
	if err != nil {
		return nil, err
	}
	p.metrics = m
	p.writer = durable.NewWriter(durable.WriterConfig{AttemptTimeout: cfg.WriteTimeout, MinBackoff: 100 * time.Millisecond,
		MaxBackoff: 2 * time.Second, MaxAttempts: cfg.WriteAttempts}, set.Store.CheckWritable, p.log, nil)
	return p, nil
}

// Spans hands durable spans to the analysis. It never blocks on I/O.
// Assembly holds what analyze.Compact keeps of them, packed: only what the
// detectors read.
func (p *Pipeline) Spans(spans []schema.Span) {
	now := p.now()
	p.mu.Lock()
	p.asm.Add(spans, now)
	p.mu.Unlock()
}

// Start runs the pipeline's worker until Shutdown.
func (p *Pipeline) Start() {
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	go p.loop()
}

// Shutdown stops the worker, analyses every trace still held and writes the
// results, within ctx.
func (p *Pipeline) Shutdown(ctx context.Context) error {
	if p.stop != nil {
		close(p.stop)
		select {
		case <-p.done:
		case <-ctx.Done():
			return fmt.Errorf("stop analysis: %w", ctx.Err())
		}
	}
	return p.Flush(ctx)
}

// Flush analyses every held trace now, due or not, writes the results, and
// writes the per-edge findings of the window so far. When it returns, the
// results of every span handed to Spans before the call are written (or
// their write failed): it waits for an analysis the worker has in flight.
func (p *Pipeline) Flush(ctx context.Context) error {
	return errors.Join(p.process(ctx, true), p.writeEdgeFindings(ctx))
}

func (p *Pipeline) loop() {
	defer close(p.done)
	tick := time.NewTicker(p.cfg.Tick)
	defer tick.Stop()
	edges := time.NewTicker(p.cfg.EdgeFindingsEvery)
	defer edges.Stop()
	// The worker's own context ends with Shutdown so a write in flight does
	// not hold shutdown up beyond the caller's patience.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-p.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C:
			_ = p.process(ctx, false)
		case <-edges.C:
			_ = p.writeEdgeFindings(ctx)
		}
	}
}

// maxAnalysisSpans bounds the spans one analysis round judges and writes
// the results of: a tick's traces normally hold far fewer. When the
// analysis falls behind (the drain catching up after a burst), the traces
// due at once held 400–500 thousand spans, and their hops, their Native
// block and the engine's insert took several hundred MB more at the peak;
// in rounds of this size the results of one round are garbage before the
// next is built.
const maxAnalysisSpans = 50_000

// process analyses the due traces (all of them with flush) and writes hops
// and findings, in rounds of at most maxAnalysisSpans spans.
func (p *Pipeline) process(ctx context.Context, flush bool) error {
	p.processMu.Lock()
	defer p.processMu.Unlock()
	now := p.now()
	p.mu.Lock()
	due := p.asm.Ready(now, flush)
	taken := 0
	for _, tr := range due {
		taken += tr.Len()
	}
	// Counted before the lock is let go, so no moment shows the spans
	// neither pending nor analysing.
	p.analysing.Add(int64(taken))
	p.mu.Unlock()
	defer func() { p.analysing.Add(-int64(taken)) }()
	var errs []error
	for len(due) > 0 && ctx.Err() == nil {
		n, spans := 0, 0
		for n < len(due) && (n == 0 || spans+due[n].Len() <= p.roundSpans) {
			spans += due[n].Len()
			n++
		}
		// A round whose write failed is lost (the write counted it), but
		// the rounds after it are still judged: their traces have left
		// assembly, and the next write may well succeed.
		if err := p.analyse(ctx, now, due[:n]); err != nil {
			errs = append(errs, err)
		}
		p.analysing.Add(-int64(spans))
		taken -= spans
		// Drop the round's spans so they can be collected while the
		// next round runs; the next round's are unpacked only then
		// (analyze.Assembled.Spans).
		clear(due[:n])
		due = due[n:]
	}
	if len(due) > 0 {
		errs = append(errs, fmt.Errorf("%d traces not analysed: %w", len(due), ctx.Err()))
	}
	return errors.Join(errs...)
}

// analyse judges one round of due traces and writes their hops, findings
// and problem statistics.
func (p *Pipeline) analyse(ctx context.Context, now time.Time, due []analyze.Assembled) error {
	// A re-opened trace is completed with its stored spans first, so the
	// round's spans are counted exactly and its hops are one allocation.
	var reanalysed []schema.TraceID
	merged := make(map[int][]schema.Span)
	spans := 0
	for i, tr := range due {
		if !tr.Reopened {
			spans += tr.Len()
			continue
		}
		merged[i] = p.mergeStored(ctx, tr.ID, tr.Spans())
		spans += len(merged[i])
		reanalysed = append(reanalysed, tr.ID)
	}
	// One call for the round's traces: how long every caller waited is
	// recorded before any trace is judged, so inferred timeouts draw on
	// the whole round (analyze.Analyzer.Round). Each trace is built only
	// when its turn comes, and the hops come in one slice to write as is.
	results, hops := p.analyzer.Round(len(due), func(i int) *schema.Trace {
		if complete, ok := merged[i]; ok {
			delete(merged, i)
			return schema.NewTraceInPlace(complete)
		}
		return schema.NewTraceInPlace(due[i].Spans())
	}, spans, now)
	// Stamped with the analysis time, so the store can tell this analysis
	// from an earlier one of the same trace (see Hop.AnalyzedNs).
	for j := range hops {
		hops[j].AnalyzedNs = uint64(now.UnixNano())
	}
	analysed := len(hops)
	hops = storedHops(results, due, hops)
	p.metrics.leftOut.Add(float64(analysed - len(hops)))
	nFindings := 0
	for _, res := range results {
		nFindings += len(res.Findings)
	}
	findings := make([]schema.Finding, 0, nFindings)
	fresh := make([]schema.Finding, 0, nFindings) // those not counted before (a re-analysis repeats ids)
	for i, res := range results {
		findings = append(findings, res.Findings...)
		p.metrics.traces.Inc()
		p.metrics.skews.Add(float64(len(res.Skews)))
		// A re-analysis yields the same ids for the same findings; the
		// metrics count only those it adds.
		added := p.counted.fresh(due[i].ID, res.Findings)
		p.metrics.observeFindings(added)
		fresh = append(fresh, added...)
	}
	stats := problems.StatsOf(fresh, p.interval)
	again := make(map[string]bool, len(reanalysed))
	for _, id := range reanalysed {
		again[id.String()] = true
	}
	findings, dropped := p.examples.Keep(findings, again)
	p.metrics.findingsCountedOnly.Add(float64(dropped))
	// Re-opened traces are recorded before their new hops, so reads never
	// see two analyses of a span without knowing to keep the latest.
	if err := p.write(ctx, "reanalysed", len(reanalysed), func(ctx context.Context, token string, lo, hi int) error {
		return p.store.WriteReanalysed(ctx, token, reanalysed[lo:hi], uint64(now.UnixNano()))
	}); err != nil {
		return err
	}
	if err := p.write(ctx, "hops", len(hops), func(ctx context.Context, token string, lo, hi int) error {
		return p.store.WriteHops(ctx, token, hops[lo:hi])
	}); err != nil {
		return err
	}
	if err := p.write(ctx, "findings", len(findings), func(ctx context.Context, token string, lo, hi int) error {
		return p.store.WriteFindings(ctx, token, findings[lo:hi])
	}); err != nil {
		return err
	}
	return p.write(ctx, "problem_stats", len(stats), func(ctx context.Context, token string, lo, hi int) error {
		return p.store.WriteProblemStats(ctx, token, stats[lo:hi])
	})
}

// storedHops returns the round's hops the store keeps, in hops' own array
// (the results' windows of it, in order: analyze.Analyzer.Round): a
// trace's hops without those its parents' hops say all of (analyze.Thin).
// A re-analysed trace keeps every hop: a read takes each span's latest
// hop, and a hop its earlier analysis stored must not outlive it. The
// results' hops are not usable after.
func storedHops(results []analyze.Result, due []analyze.Assembled, hops []schema.Hop) []schema.Hop {
	kept := hops[:0]
	from, at := 0, 0 // the run of traces not re-analysed starts at from; result i at at
	for i, res := range results {
		n := len(res.Hops) // its window of hops, which alone is stamped (a window may be of an older array)
		if due[i].Reopened {
			kept = append(kept, analyze.Thin(hops[from:at])...)
			kept = append(kept, hops[at:at+n]...)
			from = at + n
		}
		at += n
	}
	return append(kept, analyze.Thin(hops[from:at])...)
}

// maxReadTraceBytes bounds the stored spans a re-opened trace reads back
// (store.TraceLimits.Bytes).
const maxReadTraceBytes = 64 << 20

// mergeStored completes a re-opened trace with the spans stored before its
// late spans arrived. When the store cannot be read, the late spans are
// analysed alone (and the failure counted): partial analysis beats none.
func (p *Pipeline) mergeStored(ctx context.Context, id schema.TraceID, late []schema.Span) []schema.Span {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.WriteTimeout)
	defer cancel()
	// Read no more than a trace may hold in assembly, in spans and in
	// bytes: a late span on a huge trace must not pull the whole trace
	// into memory. The spans are compacted to what the detectors read at
	// once.
	stored, _, err := p.store.Trace(ctx, id, store.TraceLimits{Spans: p.cfg.Assembly.MaxSpansPerTrace, Bytes: maxReadTraceBytes})
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			p.metrics.readErrors.Inc()
		}
		return late
	}
	seen := make(map[schema.SpanID]struct{}, len(stored))
	for i := range stored {
		stored[i] = analyze.Compact(stored[i])
		seen[stored[i].SpanID] = struct{}{}
	}
	for _, s := range late {
		if _, dup := seen[s.SpanID]; !dup {
			stored = append(stored, s)
		}
	}
	return stored
}

// writeEdgeFindings shares this replica's edge statistics, computes
// per-edge findings over them merged with the other replicas' (DESIGN §7;
// on a single node there are none) and writes those that changed since
// the last evaluation (edgeVerdicts.next). The metrics count an edge's
// finding when its verdict starts to hold, not at every evaluation that
// still finds it; budgetd_edge_findings_holding reports the verdicts that
// hold at this evaluation, whether or not their write succeeds.
func (p *Pipeline) writeEdgeFindings(ctx context.Context) error {
	p.edgeMu.Lock()
	defer p.edgeMu.Unlock()
	now := p.now()
	shareErr := p.shareEdgeStates(ctx, now)
	others := p.otherEdgeStates(ctx, now)
	findings, bad := p.analyzer.EdgeFindingsWith(now, others)
	p.metrics.badStates.Add(float64(bad))
	next, started, changed := p.edges.next(findings, now, p.analyzer.Config().EdgeWindow)
	p.edges = next
	p.metrics.observeFindings(started)
	p.metrics.holdEdgeFindings(findings)
	if len(changed) == 0 {
		return shareErr
	}
	if err := p.write(ctx, "findings", len(changed), func(ctx context.Context, token string, lo, hi int) error {
		return p.store.WriteFindings(ctx, token, changed[lo:hi])
	}); err != nil {
		return errors.Join(shareErr, err)
	}
	next.stored(changed, now)
	return shareErr
}

// shareEdgeStates writes this replica's edge statistics for the others.
func (p *Pipeline) shareEdgeStates(ctx context.Context, now time.Time) error {
	states := p.analyzer.EdgeStates(now)
	for i := range states {
		states[i].Replica, states[i].EvaluatedNs = p.replica, uint64(now.UnixNano())
	}
	return p.write(ctx, "edge_states", len(states), func(ctx context.Context, token string, lo, hi int) error {
		return p.store.WriteEdgeStates(ctx, token, states[lo:hi])
	})
}

// staleEdgeEvaluations is how many evaluation intervals a replica's edge
// states count after it wrote them: a replica that stopped (or cannot
// write) drops out of the others' verdicts after that.
const staleEdgeEvaluations = 3

// otherEdgeStates reads the other replicas' latest edge states. When the
// store cannot be read the edges are judged on this replica's statistics
// alone (and the failure counted): a verdict on a sample beats none.
func (p *Pipeline) otherEdgeStates(ctx context.Context, now time.Time) []schema.EdgeState {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.WriteTimeout)
	defer cancel()
	since := now.Add(-staleEdgeEvaluations * p.cfg.EdgeFindingsEvery)
	states, err := p.store.EdgeStates(ctx, p.replica, uint64(since.UnixNano()))
	if err != nil {
		p.metrics.readErrors.Inc()
		p.log.Warn("other replicas' edge statistics not read: edges judged on this replica's alone", "err", err)
		return nil
	}
	replicas := map[string]bool{}
	for _, s := range states {
		replicas[s.Replica] = true
	}
	p.metrics.replicas.Set(float64(len(replicas)))
	return states
}

// write stores n rows through the write path's Writer under a fresh dedup
// token: retried up to WriteAttempts times under that token, so a write
// that landed but whose answer was lost is not stored twice; rows the
// store refuses for their content are dropped and counted, the rest
// stored.
func (p *Pipeline) write(ctx context.Context, what string, n int, rows func(ctx context.Context, token string, lo, hi int) error) error {
	token, err := newToken()
	if err != nil {
		return err
	}
	_, err = p.writer.Write(ctx, token, durable.Rows{What: what, N: n, Write: rows,
		Refused: func(int, error) bool { p.metrics.refused.WithLabelValues(what).Inc(); return true }})
	if err != nil {
		p.metrics.writeErrors.WithLabelValues(what).Inc()
		p.log.Warn("analysis results not stored", "what", what, "err", err)
		return err
	}
	return nil
}

func newToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("make dedup token: %w", err)
	}
	return "a-" + hex.EncodeToString(b[:]), nil
}

func (p *Pipeline) counters() analyze.AssemblerCounters {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.asm.Counters()
}

func (p *Pipeline) heldBytes() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.asm.HeldBytes()
}

func (p *Pipeline) pending() (traces, spans int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.asm.Pending()
}
