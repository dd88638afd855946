package store

import (
	"context"
	"errors"
	"time"

	"github.com/budgetd/budgetd/problems"
	"github.com/budgetd/budgetd/schema"
)

// ErrNotFound is returned by reads of a single object (a trace) that does not exist.
var ErrNotFound = errors.New("not found")

// ErrUnavailable wraps errors from an engine that cannot be reached (server
// down, connection refused). Ingest maps it to 503 / UNAVAILABLE.
var ErrUnavailable = errors.New("store unavailable")

// ErrPartlyWritten wraps a write's error after part of its batch was
// stored (a batch's hops, without the statistics they change): the batch
// must be retried whole under its token, which completes it, never split
// into new batches that would store the written part again.
var ErrPartlyWritten = errors.New("batch partly written")

// Store is budgetd's storage. Implementations are safe for concurrent use by
// multiple goroutines.
//
// Writes: each call writes one batch as one INSERT per table. A batch carries a
// dedup token: writing the same token again (a retry after a timeout whose
// first attempt did land) stores nothing new. Tokens must be unique per batch
// content; [a-zA-Z0-9_-], at most 128 bytes. The store does not keep the
// slices passed to it after the call returns.
//
// Reads: time bounds are inclusive Unix nanoseconds. Every call honours its
// context: when the deadline passes or the caller cancels, the call returns
// promptly with an error wrapping ctx.Err(). Returned slices belong to the
// caller.
type Store interface {
	// WriteSpans stores spans and the trace-id lookup rows for them.
	WriteSpans(ctx context.Context, token string, spans []schema.Span) error
	// WriteHops stores analysed hops. A hop of a trace recorded as
	// re-analysed at its AnalyzedNs (WriteReanalysed) replaces the earlier
	// analysis of its span in the aggregates.
	WriteHops(ctx context.Context, token string, hops []schema.Hop) error
	// WriteFindings stores findings.
	WriteFindings(ctx context.Context, token string, findings []schema.Finding) error
	// WriteProblemStats adds the counts of trace findings per problem and
	// interval (problems.StatsOf); a retried token adds nothing.
	WriteProblemStats(ctx context.Context, token string, stats []problems.Stat) error
	// WriteReanalysed records that the traces are being analysed again at
	// analyzedNs (Hop.AnalyzedNs of their new hops). It must be written
	// before the new hops, through the same Store: reads deduplicate hops
	// per span, and drop superseded findings, only for the traces recorded
	// here, and the hops' write takes the earlier analysis out of the
	// aggregates for them alone.
	WriteReanalysed(ctx context.Context, token string, traces []schema.TraceID, analyzedNs uint64) error
	// WriteEdgeStates stores one replica's edge statistics (each state
	// names its replica and evaluation time); a replica's newer state of
	// an edge replaces its older one.
	WriteEdgeStates(ctx context.Context, token string, states []schema.EdgeState) error

	// Trace returns the stored spans of a trace in start order, the first
	// of them within lim, and whether lim left some out; or ErrNotFound.
	Trace(ctx context.Context, id schema.TraceID, lim TraceLimits) (spans []schema.Span, truncated bool, err error)
	// TraceHops returns the analysed hops of a trace that started within
	// starts (SpanWindow of its spans bounds the read to them; the zero
	// window reads them all), in start order.
	TraceHops(ctx context.Context, id schema.TraceID, starts Window) ([]schema.Hop, error)
	// Spans returns spans that started inside the window, grouped by trace,
	// at most limit of them; the offline analyzer reads through it.
	Spans(ctx context.Context, w Window, limit int) ([]schema.Span, error)
	// Findings returns one page of findings, newest first.
	Findings(ctx context.Context, q FindingQuery) (FindingPage, error)
	// WindowFindings returns the findings q selects (its Limit and Cursor
	// aside), newest first, at most max of them, in one read; truncated
	// says there were more. Problems and alerts group every finding of a
	// window.
	WindowFindings(ctx context.Context, q FindingQuery, max int) (_ []schema.Finding, truncated bool, _ error)
	// ProblemStats returns the counts per problem and interval of the
	// intervals that start in w, summed, ordered by problem id and
	// interval.
	ProblemStats(ctx context.Context, w Window) ([]problems.Stat, error)
	// EdgeStates returns, for every replica but except that wrote edge
	// states at or after sinceNs, the states of its latest evaluation
	// (edges it no longer had then are left out), ordered by replica and
	// edge.
	EdgeStates(ctx context.Context, except string, sinceNs uint64) ([]schema.EdgeState, error)
	// Paths aggregates hops per call path over a window, and counts the
	// findings detected on each path in it (see PathStats.FindingsByKind).
	// Paths, PathRequests, Edges and Totals count each span's latest
	// analysis once (a trace analysed again replaces its earlier hops);
	// their percentiles are within 2.5 % of the exact value (see
	// StatsInterval for what a window of whole minutes saves).
	Paths(ctx context.Context, w Window, limit int) ([]PathStats, error)
	// PathRequests counts the requests of each call path over a window as
	// Paths does (PathStats.Requests), the paths with the most first, at
	// most limit of them: the shares of the problems list need no more,
	// and leaving out Paths' quantiles and finding counts makes it the
	// cheaper read.
	PathRequests(ctx context.Context, w Window, limit int) (map[string]uint64, error)
	// Edges aggregates calls per caller→callee edge over a window.
	Edges(ctx context.Context, w Window, limit int) ([]EdgeStats, error)
	// Totals counts requests and findings over a window (see
	// Totals.FindingsByKind).
	Totals(ctx context.Context, w Window) (Totals, error)

	// CheckWritable makes a small insert that proves the engine takes
	// writes at all, so a writer can tell rows the engine refuses from an
	// engine that refuses everything.
	CheckWritable(ctx context.Context) error
	// Ping checks that the engine answers.
	Ping(ctx context.Context) error
	// SchemaVersion returns the highest applied migration and the highest
	// this binary knows; they differ when the schema is not current.
	SchemaVersion(ctx context.Context) (applied, known int, err error)
	// Close releases the engine. No call may be in flight or follow.
	Close() error
}

// TraceLimits bound a trace read. Zero fields do not bound.
type TraceLimits struct {
	// Spans is the most spans returned.
	Spans int
	// Bytes bounds the spans' size (their strings, attributes, events and
	// links, resource attributes included); the first span is returned
	// whatever its size. A span's attributes are bounded by the ingest
	// limits, its count of them is not: 108 spans of 1,024 attributes of
	// 2 KiB are 228 MB.
	Bytes int64
}

// Window is an inclusive time range in Unix nanoseconds. A zero Until means
// "no upper bound".
type Window struct {
	SinceNs uint64
	UntilNs uint64
}

// WindowOf returns the window [since, until].
func WindowOf(since, until time.Time) Window {
	return Window{SinceNs: uint64(since.UnixNano()), UntilNs: uint64(until.UnixNano())}
}

// StatsInterval is the resolution of the statistics the paths, edges and
// totals reads sum: a window of whole intervals reads them alone, and the
// partial intervals at its ends are read from the hops, which costs about
// as much per span as the statistics do per interval.
const StatsInterval = time.Minute

// WholeIntervals widens the window [since, until] to whole StatsIntervals:
// since to the start of its interval, until to the end of its own. Windows
// relative to now ("the last hour") are read so: a user asking for the
// last hour does not mean its first second, and the interval in progress
// holds nothing that starts after now.
func WholeIntervals(since, until time.Time) Window {
	return WindowOf(since.Truncate(StatsInterval), until.Truncate(StatsInterval).Add(StatsInterval-1))
}

// Until returns the upper bound, treating zero as unbounded.
func (w Window) Until() uint64 {
	if w.UntilNs == 0 {
		return ^uint64(0)
	}
	return w.UntilNs
}

// SpanWindow is the window from the first to the last start of spans. A hop
// starts when its span does, so it holds the spans' hops. With no spans it
// is the zero window, which holds everything.
func SpanWindow(spans []schema.Span) Window {
	if len(spans) == 0 {
		return Window{}
	}
	w := Window{SinceNs: spans[0].StartNs, UntilNs: spans[0].StartNs}
	for i := range spans {
		w.SinceNs = min(w.SinceNs, spans[i].StartNs)
		w.UntilNs = max(w.UntilNs, spans[i].StartNs)
	}
	return w
}

// AnalysisWindow is the window of the analyses that wrote a trace's hops.
// The analysis that writes a trace's hops detects its findings and stamps
// both with one time (Hop.AnalyzedNs, Finding.DetectedAt), so a findings
// read of the trace in this window finds every finding of its current
// analysis while skipping the rest of the table, which is ordered by
// detection time. With no hops, or hops of offline analysis (no time), the
// window is unbounded.
func AnalysisWindow(hops []schema.Hop) Window {
	var w Window
	for i := range hops {
		at := hops[i].AnalyzedNs
		if at == 0 {
			return Window{}
		}
		if w.SinceNs == 0 || at < w.SinceNs {
			w.SinceNs = at
		}
		w.UntilNs = max(w.UntilNs, at)
	}
	return w
}

// FindingQuery filters and pages findings. Empty fields do not filter.
type FindingQuery struct {
	Kind     schema.Kind
	Severity schema.Severity
	Service  string // matches service, caller_service or callee_service
	Path     string // exact path
	TraceID  string // lower-case hex
	Window   Window // on detected_at
	Cursor   string // from a previous page's Next; "" for the first page
	Limit    int    // 1..MaxPageSize; 0 means DefaultPageSize
}

// Page sizes for Findings.
const (
	DefaultPageSize = 100
	MaxPageSize     = 1000
)

// FindingPage is one page of findings and the cursor of the next ("" at the end).
type FindingPage struct {
	Findings []schema.Finding
	Next     string
}

// PathStats are the figures of one call path over a window.
type PathStats struct {
	Path              string
	Requests          uint64  // entry hops on this path
	Errors            uint64  // of which ended in error
	P50DurationMs     float64 // entry hop duration
	P99DurationMs     float64
	P50BudgetMs       *float64 // budget at entry, when any was recorded
	OrphanedMs        float64  // sum of work after the caller gave up
	MaxCallsPerTrace  uint64   // most entries on this path in one trace
	MeanCallsPerTrace float64
	WithinBudget      uint64 // requests answered without error within their budget
	// FindingsByKind counts distinct findings (by id) on this path detected
	// in the window: a finding written more than once (an edge verdict
	// restated, a trace analysed again) counts once, and a re-analysed
	// trace's superseded findings not at all.
	FindingsByKind map[schema.Kind]uint64
}

// EdgeStats are the figures of one caller→callee edge over a window.
type EdgeStats struct {
	CallerService   string
	CallerOperation string
	CalleeService   string
	CalleeOperation string
	Calls           uint64
	Retries         uint64   // calls with attempt > 1
	MedianTimeoutMs *float64 // caller's configured timeout, when recorded
	P50DurationMs   float64  // callee's own latency; the call's duration when the callee recorded no span
	P99DurationMs   float64
	// InferredTimeoutMs is the median timeout budgetd estimated for calls
	// that recorded none (from the edge's timed-out calls), and
	// InferredTimeoutConfidence the median confidence of those estimates;
	// nil and 0 when no call's timeout was inferred.
	InferredTimeoutMs         *float64
	InferredTimeoutConfidence float64
}

// Totals are whole-system figures over a window.
type Totals struct {
	Requests     uint64 // root hops
	WithinBudget uint64 // root hops answered without error within their budget
	// FindingsByKind counts distinct findings (by id) detected in the
	// window, as PathStats.FindingsByKind does.
	FindingsByKind map[schema.Kind]uint64
}

// ErrBadCursor is returned by Findings for a cursor it did not issue.
var ErrBadCursor = errors.New("invalid cursor")
