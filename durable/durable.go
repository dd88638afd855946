package durable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/budgetd/budgetd/durable/record"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/wal"
)

// Durable is the Durability of the write-ahead log (mode wal).
type Durable struct {
	cfg    Config
	log    *slog.Logger
	wal    *wal.WAL
	id     string // the log's identity, in every dedup token
	writer *spanWriter
	seen   *seenSpans // nil: resends are not recognised
	sink   Sink

	stop    chan struct{} // closed by Shutdown: finish draining
	done    chan struct{} // closed when the drainer returned
	abandon context.CancelFunc

	mu     sync.Mutex
	acked  wal.Position
	counts Counters
	// writingSince is when the batch being written was first tried
	// (zero between batches); Stalled compares it with StallAfter.
	writingSince time.Time
}

var _ CopyingDurability = (*Durable)(nil)

// Counters count what the drainer did.
type Counters struct {
	Batches      uint64 // store writes that succeeded
	Spans        uint64 // spans stored and handed to the sink
	WriteErrors  uint64 // failed store write attempts
	DeadLetter   uint64 // spans the store refused, moved to the dead letter
	Replayed     uint64 // batches rebuilt from a checkpoint after a restart
	DecodeErrors uint64 // records that could not be decoded (skipped)
}

// OpenLog opens the log in cfg.WAL.Dir and starts draining it from the
// checkpoint, so whatever an earlier run acknowledged but did not store
// goes to the store (and the sink) first.
func OpenLog(cfg Config, set Settings) (*Durable, error) {
	if err := cfg.validate(ModeWAL); err != nil {
		return nil, err
	}
	set, err := set.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("open write-ahead log: %w", err)
	}
	d := &Durable{cfg: cfg, log: set.Logger, sink: set.Sink, stop: make(chan struct{}), done: make(chan struct{})}
	d.writer, err = newSpanWriter(cfg, set, 0, func(string) { d.count(func(c *Counters) { c.WriteErrors++ }) })
	if err != nil {
		return nil, err
	}
	if d.seen, err = newSeenSpans(cfg.Dedup, filepath.Join(cfg.WAL.Dir, "seen"), set, time.Now); err != nil {
		return nil, err
	}
	w, err := wal.Open(cfg.WAL.Config, set.Logger)
	if err != nil {
		d.seen.close()
		return nil, err
	}
	cp, err := loadCheckpoint(cfg.WAL.Dir)
	if err != nil {
		w.Close()
		return nil, err
	}
	id, err := logIdentity(cfg.WAL.Dir, cp)
	if err != nil {
		w.Close()
		return nil, err
	}
	if st := w.Stats(); st.CorruptRecords > 0 {
		set.Logger.Warn("wal: damaged records cut at open", "records", st.CorruptRecords, "bytes", st.TruncatedBytes)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.wal, d.id, d.abandon, d.acked = w, id, cancel, cp.Acked
	if err := d.rememberLog(); err != nil {
		cancel()
		w.Close()
		return nil, err
	}
	if err := d.register(set.Registerer); err != nil {
		cancel()
		w.Close()
		return nil, err
	}
	go d.drain(ctx, cp)
	return d, nil
}

// rememberLog adds the spans of every record still in the log to the
// resend filter. A process killed while a request's fsync was in flight
// has the request in the log but maybe not its fingerprints in the seen
// files; the sender resends it because it got no answer.
func (d *Durable) rememberLog() error {
	if d.seen == nil {
		return nil
	}
	r := d.wal.NewReader(d.wal.First())
	defer r.Close()
	end := d.wal.Committed()
	var spans []schema.Span
	for pos := d.wal.First(); pos.Before(end); {
		payload, next, err := r.Next(context.Background())
		if err != nil {
			return fmt.Errorf("read the log for resend detection: %w", err)
		}
		pos = next
		spans, err = record.AppendDecodedSpans(spans[:0], payload)
		if err != nil {
			continue // counted and logged by the drainer
		}
		if err := d.seen.remember(spans); err != nil {
			return err
		}
	}
	return nil
}

// register exposes the log's and the drainer's counters as metrics.
func (d *Durable) register(reg prometheus.Registerer) error {
	wstat := func(f func(wal.Stats) float64) func() float64 { return func() float64 { return f(d.wal.Stats()) } }
	dstat := func(f func(Counters) float64) func() float64 { return func() float64 { return f(d.Counters()) } }
	collectors := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "budgetd_wal_bytes", Help: "Bytes in the write-ahead log not yet dropped (acknowledged to senders, some not yet stored)."},
			wstat(func(s wal.Stats) float64 { return float64(s.Bytes) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "budgetd_wal_appends_total", Help: "Records appended to the write-ahead log."},
			wstat(func(s wal.Stats) float64 { return float64(s.Appends) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "budgetd_wal_syncs_total", Help: "fsyncs of the write-ahead log (appends per sync is the group-commit factor)."},
			wstat(func(s wal.Stats) float64 { return float64(s.Syncs) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "budgetd_wal_full_total", Help: "Appends refused because the log was full (answered 503); see ingest.durability.wal.max_bytes."},
			wstat(func(s wal.Stats) float64 { return float64(s.Full) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "budgetd_wal_corrupt_records_total", Help: "Torn or corrupt records cut from the log at start."},
			wstat(func(s wal.Stats) float64 { return float64(s.CorruptRecords) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "budgetd_wal_truncated_bytes_total", Help: "Bytes cut from damaged log tails at start."},
			wstat(func(s wal.Stats) float64 { return float64(s.TruncatedBytes) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "budgetd_wal_stored_spans_total", Help: "Spans the drainer wrote to the store and handed to the analysis."},
			dstat(func(c Counters) float64 { return float64(c.Spans) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "budgetd_wal_store_batches_total", Help: "Store writes by the drainer."},
			dstat(func(c Counters) float64 { return float64(c.Batches) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "budgetd_wal_store_write_errors_total", Help: "Failed store write attempts by the drainer (retried)."},
			dstat(func(c Counters) float64 { return float64(c.WriteErrors) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "budgetd_wal_drain_stalled", Help: "1 while the drain has held spans for longer than ingest.durability.wal.stall_after without storing any."},
			func() float64 {
				if d.Stalled() != nil {
					return 1
				}
				return 0
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "budgetd_wal_replayed_batches_total", Help: "Batches rebuilt from the checkpoint after a restart."},
			dstat(func(c Counters) float64 { return float64(c.Replayed) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "budgetd_wal_undecodable_records_total", Help: "Records skipped because they did not decode."},
			dstat(func(c Counters) float64 { return float64(c.DecodeErrors) })),
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register wal metrics: %w", err)
		}
	}
	return nil
}

// Admits implements Durability. A log record takes about as many
// bytes as the protobuf its spans came in (realistic requests: 1.03 times),
// so a request whose protobuf does not fit in the log's room would, all but
// always, be refused by Commit after decoding.
func (d *Durable) Admits(protoBytes int) bool { return d.wal.Fits(protoBytes) }

var recordBuffers = sync.Pool{New: func() any { return new([]byte) }}

// Commit implements Durability: it returns once spans are fsynced in
// the log. A full log is ErrOverloaded, which ingest answers with 503.
func (d *Durable) Commit(ctx context.Context, spans []schema.Span) error {
	return d.seen.commit(spans, func(fresh []schema.Span) error { return d.commit(ctx, fresh) })
}

// CommitCopies implements CopyingDurability: Commit encodes the spans into
// a log record (or refuses them) before it returns, and keeps nothing else
// of them; the drainer reads them back from the log.
func (d *Durable) CommitCopies() {}

// commit appends spans to the log.
func (d *Durable) commit(ctx context.Context, spans []schema.Span) error {
	// Records are about 0.5 KB per span; a pooled buffer spares growing one
	// from nothing for every request. Append is done with it on return.
	buf := recordBuffers.Get().(*[]byte)
	*buf = record.AppendSpans((*buf)[:0], spans)
	_, err := d.wal.Append(ctx, *buf)
	recordBuffers.Put(buf)
	switch {
	case errors.Is(err, wal.ErrFull):
		return fmt.Errorf("%w: %w", ErrOverloaded, err)
	case errors.Is(err, wal.ErrClosed):
		return fmt.Errorf("%w: %w", ErrClosed, err)
	case err != nil:
		return fmt.Errorf("commit to wal: %w", err)
	}
	return nil
}

// Shutdown implements Durability: it stops taking appends, lets the
// drainer store what the log holds until ctx ends, and closes the log.
// Whatever is not stored by then stays in the log for the next start.
func (d *Durable) Shutdown(ctx context.Context) error {
	close(d.stop)
	var err error
	select {
	case <-d.done:
	case <-ctx.Done():
		err = fmt.Errorf("drain wal: %w", ctx.Err())
	}
	d.abandon()
	<-d.done
	d.seen.close()
	return errors.Join(err, d.wal.Close())
}

// Stalled returns why the drain is stuck — one batch has been failing for
// longer than StallAfter — or nil.
func (d *Durable) Stalled() error {
	d.mu.Lock()
	since := d.writingSince
	d.mu.Unlock()
	if since.IsZero() {
		return nil
	}
	if took := time.Since(since); took > d.cfg.WAL.StallAfter {
		return fmt.Errorf("the write-ahead log drain has been failing to store one batch for %s, %d bytes waiting behind it (see budgetd_wal_store_write_errors_total and the log)",
			took.Round(time.Second), d.wal.Stats().Bytes)
	}
	return nil
}

// Counters returns the drainer's counters.
func (d *Durable) Counters() Counters {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.counts
}

// WAL returns the log, for its statistics.
func (d *Durable) WAL() *wal.WAL { return d.wal }

// Lag returns how far the store is behind the log, in positions.
func (d *Durable) Lag() (acked, committed wal.Position) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.acked, d.wal.Committed()
}

func (d *Durable) count(f func(*Counters)) {
	d.mu.Lock()
	f(&d.counts)
	d.mu.Unlock()
}
