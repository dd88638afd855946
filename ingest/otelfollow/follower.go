package otelfollow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/budgetd/budgetd/durable"
	"github.com/budgetd/budgetd/ingest"
	"github.com/budgetd/budgetd/logthrottle"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store/chsql"
	"github.com/budgetd/budgetd/store/engine"
	"github.com/budgetd/budgetd/store/oteltraces"
)

// Store is what the follower needs of budgetd's own store: its position
// per source, and which spans it already holds.
type Store interface {
	// FollowPosition returns the stored position of source, false when
	// there is none.
	FollowPosition(ctx context.Context, source string) (positionNs uint64, ok bool, err error)
	// SaveFollowPosition stores source's position.
	SaveFollowPosition(ctx context.Context, source string, positionNs uint64) error
	// MissingSpans returns the spans of spans that are not stored.
	MissingSpans(ctx context.Context, spans []schema.Span) ([]schema.Span, error)
}

// Settings are what the follower is given rather than configured with.
type Settings struct {
	// Logger receives lifecycle events and throttled errors; nil discards
	// them.
	Logger *slog.Logger
	// Durability is the write path the spans are committed to: the one
	// the OTLP receivers use.
	Durability durable.Durability
	// Store is budgetd's own store.
	Store Store
	// Limits are the ingest limits the table's rows are converted under,
	// as OTLP requests are.
	Limits ingest.Limits
	// Registerer receives the follower's metrics; nil keeps them private.
	Registerer prometheus.Registerer
	// Now is the clock the due rule reads; nil is time.Now.
	Now func() time.Time
}

// maxCommitSpans bounds the spans of one Commit, so a big poll becomes
// several write-ahead log records of a size OTLP requests have.
const maxCommitSpans = 10_000

// Follower follows one exporter table. Start and Shutdown are for its
// owner; one goroutine polls in between.
type Follower struct {
	cfg  Config
	src  oteltraces.Source
	key  string
	log  *slog.Logger
	dur  durable.Durability
	st   Store
	conv *ingest.Converter
	now  func() time.Time
	m    *metrics
	errs *logthrottle.Throttle

	conn  chsql.Conn
	table *oteltraces.Table // nil until the table is found; reset after a failed read
	// position is the end up to which every trace was handed over;
	// loaded marks it read from the store (or started from Since).
	position int64
	loaded   bool

	stop    chan struct{}      // closed by Shutdown: no new poll
	done    chan struct{}      // closed when the loop returned
	abandon context.CancelFunc // ends the loop's poll in flight
}

// New validates cfg and connects to the source, read-only (no database is
// created and no migration runs there). The table need not exist yet: the
// polls look for it.
func New(cfg Config, set Settings) (*Follower, error) {
	if !cfg.Enabled() {
		return nil, errors.New("follow otel traces: follow.otel_traces.source is not set")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if set.Durability == nil || set.Store == nil {
		return nil, errors.New("follow otel traces: a write path and a store are required")
	}
	src, err := cfg.source()
	if err != nil {
		return nil, err
	}
	conv, err := ingest.NewConverter(set.Limits)
	if err != nil {
		return nil, fmt.Errorf("follow otel traces: %w", err)
	}
	f := &Follower{cfg: cfg, src: src, key: src.Key(), log: set.Logger, dur: set.Durability, st: set.Store, conv: conv,
		now: set.Now, errs: logthrottle.New(time.Minute)}
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	if f.now == nil {
		f.now = time.Now
	}
	if f.m, err = newMetrics(set.Registerer); err != nil {
		return nil, err
	}
	if f.conn, err = engine.Connect(src.Engine); err != nil {
		return nil, fmt.Errorf("follow otel traces: open %s source: %w", src.Engine.Engine, err)
	}
	return f, nil
}

// Start polls in a goroutine until Shutdown: once at once, then every
// cfg.Poll.
func (f *Follower) Start() {
	f.stop, f.done = make(chan struct{}), make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	f.abandon = cancel
	f.log.Info("following otel traces", "source", f.key, "settle", f.cfg.Settle, "poll", f.cfg.Poll)
	go f.loop(ctx)
}

// Shutdown stops polling: a poll in flight finishes, unless ctx ends first
// (then it is abandoned and its position not saved, so the next start
// takes its traces again). Then it closes the source connection.
func (f *Follower) Shutdown(ctx context.Context) error {
	var err error
	if f.stop != nil {
		close(f.stop)
		select {
		case <-f.done:
		case <-ctx.Done():
			err = fmt.Errorf("stop following otel traces: %w", ctx.Err())
			f.abandon()
			<-f.done // every call of the poll honours its context
		}
		f.abandon()
		f.log.Info("stopped following otel traces", "source", f.key, "position", time.Unix(0, f.position).UTC())
	}
	return errors.Join(err, f.conn.Close())
}

// loop polls until stop; ctx ends when Shutdown gives up waiting.
func (f *Follower) loop(ctx context.Context) {
	defer close(f.done)
	tick := time.NewTicker(f.cfg.Poll)
	defer tick.Stop()
	for {
		res, err := f.Poll(ctx)
		if err != nil && ctx.Err() == nil {
			f.m.errors.Inc()
			if ok, suppressed := f.errs.Allow("poll", f.now()); ok {
				f.log.Warn("following otel traces: poll failed, retrying at the next", "source", f.key, "err", err, "suppressed", suppressed)
			}
		}
		// A poll cut short by max_spans_per_poll is followed by the next
		// at once: the bound is on memory, not on throughput, so a table
		// filling faster than one poll's spans per interval is still
		// caught up with. A full write-ahead log fails the commit, which
		// waits for the tick.
		if err == nil && res.More {
			select {
			case <-f.stop:
				return
			default:
				continue
			}
		}
		select {
		case <-f.stop:
			return
		case <-tick.C:
		}
	}
}

// PollResult is what one poll did.
type PollResult struct {
	// Traces were due and read; Spans of theirs were committed, and
	// Stored were left out because budgetd held them already.
	Traces, Spans, Stored int
	// More is set when max_spans_per_poll left due traces for the next
	// poll.
	More bool
}

// Poll takes the traces due now: reads them, commits the spans budgetd
// does not hold yet, and saves the new position. The loop calls it; tests
// call it to take one step. It must not run concurrently with itself.
func (f *Follower) Poll(ctx context.Context) (PollResult, error) {
	f.m.polls.Inc()
	now := f.now()
	if !f.loaded {
		if err := f.load(ctx, now); err != nil {
			return PollResult{}, err
		}
	}
	defer func() { f.m.lag.Set(now.Sub(time.Unix(0, f.position)).Seconds()) }()
	if f.table == nil {
		t, err := bounded(ctx, f.cfg.Timeout, func(ctx context.Context) (*oteltraces.Table, error) {
			return oteltraces.Open(ctx, f.conn, f.src.Database, f.src.Table)
		})
		if err != nil {
			return PollResult{}, err
		}
		f.table = t
	}
	res, next, err := f.take(ctx, now)
	if err != nil {
		// The table may have been altered or dropped: read its layout
		// again next time.
		f.table = nil
		return res, err
	}
	if next != f.position {
		err := f.do(ctx, func(ctx context.Context) error { return f.st.SaveFollowPosition(ctx, f.key, uint64(next)) })
		if err != nil {
			return res, fmt.Errorf("save position: %w", err)
		}
		f.position = next
	}
	f.m.traces.Add(float64(res.Traces))
	f.m.spans.Add(float64(res.Spans))
	f.m.stored.Add(float64(res.Stored))
	if res.More {
		f.m.more.Inc()
	}
	return res, nil
}

// load reads the stored position, or starts Since before now.
func (f *Follower) load(ctx context.Context, now time.Time) error {
	type stored struct {
		pos uint64
		ok  bool
	}
	s, err := bounded(ctx, f.cfg.Timeout, func(ctx context.Context) (stored, error) {
		pos, ok, err := f.st.FollowPosition(ctx, f.key)
		return stored{pos, ok}, err
	})
	if err != nil {
		return fmt.Errorf("load position: %w", err)
	}
	f.position, f.loaded = now.Add(-f.cfg.Since).UnixNano(), true
	if s.ok {
		f.position = int64(s.pos)
	}
	f.log.Info("otel traces position", "source", f.key, "resumed", s.ok, "position", time.Unix(0, f.position).UTC())
	return nil
}

// take hands over the traces due at now and returns the position to save.
func (f *Follower) take(ctx context.Context, now time.Time) (PollResult, int64, error) {
	until := now.Add(-f.cfg.Settle).UnixNano()
	if until <= f.position {
		return PollResult{}, f.position, nil
	}
	scanFrom := f.position - f.cfg.MaxTraceDuration.Nanoseconds()
	max := f.cfg.MaxSpansPerPoll
	// Every trace has a span, so at most max of them fit; one more row
	// tells that the window holds more.
	due, err := bounded(ctx, f.cfg.Timeout, func(ctx context.Context) ([]oteltraces.DueTrace, error) {
		return f.table.Due(ctx, oteltraces.DueQuery{AfterNs: f.position, UntilNs: until, ScanFromNs: scanFrom, Limit: max + 1})
	})
	if err != nil {
		return PollResult{}, 0, err
	}
	due, next, more := cut(due, max, until)
	if len(due) == 0 {
		return PollResult{More: more}, next, nil
	}
	ids := make([]string, len(due))
	for i, d := range due {
		ids[i] = d.ID
	}
	read, err := bounded(ctx, f.cfg.Timeout, func(ctx context.Context) (oteltraces.Result, error) {
		return f.table.Traces(ctx, ids, scanFrom, until, f.conv)
	})
	if err != nil {
		return PollResult{}, 0, err
	}
	if read.Rejected > 0 {
		f.m.rejected.Add(float64(read.Rejected))
		if ok, suppressed := f.errs.Allow("rejected", now); ok {
			f.log.Warn("following otel traces: spans refused by the ingest limits", "source", f.key, "spans", read.Rejected, "reason", read.RejectReason, "suppressed", suppressed)
		}
	}
	fresh, err := bounded(ctx, f.cfg.Timeout, func(ctx context.Context) ([]schema.Span, error) { return f.st.MissingSpans(ctx, read.Spans) })
	if err != nil {
		return PollResult{}, 0, fmt.Errorf("look up stored spans: %w", err)
	}
	for lo := 0; lo < len(fresh); lo += maxCommitSpans {
		part := fresh[lo:min(lo+maxCommitSpans, len(fresh))]
		if err := f.do(ctx, func(ctx context.Context) error { return f.dur.Commit(ctx, part) }); err != nil {
			return PollResult{}, 0, fmt.Errorf("commit spans: %w", err)
		}
	}
	return PollResult{Traces: len(due), Spans: len(fresh), Stored: len(read.Spans) - len(fresh), More: more}, next, nil
}

// cut keeps the first due traces (ordered by end) whose spans fit in max,
// at least one, and returns them, the position after them and whether the
// window holds more. Traces ending in the same nanosecond are kept or left
// together, so the position never falls between two of them. When the
// first such group is over max it is kept whole; if it also fills the
// query's rows (more than max traces end in that one nanosecond) the
// position stays just before it and the next poll takes the group again,
// the store lookup leaving out the spans already committed.
func cut(due []oteltraces.DueTrace, max int, until int64) ([]oteltraces.DueTrace, int64, bool) {
	n, total := 0, 0
	for n < len(due) && (n == 0 || total+due[n].Spans <= max) {
		total += due[n].Spans
		n++
	}
	// The query asks for max+1 rows: fewer means it returned the whole
	// window.
	whole := len(due) <= max
	if n == len(due) && whole {
		return due, until, false
	}
	end := due[n-1].EndNs
	if n == len(due) || due[n].EndNs != end {
		return due[:n], end, true
	}
	j := n - 1
	for j > 0 && due[j-1].EndNs == end {
		j--
	}
	if j > 0 {
		return due[:j], due[j-1].EndNs, true
	}
	for n < len(due) && due[n].EndNs == end {
		n++
	}
	switch {
	case n < len(due):
		return due[:n], end, true
	case whole:
		return due, until, false
	}
	return due, end - 1, true
}

// bounded runs one call to the source or the store under cfg.Timeout.
func bounded[T any](ctx context.Context, timeout time.Duration, call func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return call(ctx)
}

// do is bounded for calls that return only an error.
func (f *Follower) do(ctx context.Context, call func(context.Context) error) error {
	_, err := bounded(ctx, f.cfg.Timeout, func(ctx context.Context) (struct{}, error) { return struct{}{}, call(ctx) })
	return err
}
