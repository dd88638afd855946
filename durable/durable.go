package durable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/budgetd/budgetd/ingest"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/wal"
)

// Config is the `ingest.wal` section: the log and its drainer.
type Config struct {
	wal.Config `yaml:",inline"`
	// BatchSpans is the most spans one store write carries.
	BatchSpans int `yaml:"batch_spans"`
	// FlushInterval is the longest a record waits for others to share its
	// store write.
	FlushInterval time.Duration `yaml:"flush_interval"`
	// WriteTimeout bounds one store write attempt. Writes that failed for
	// a reason a retry can cure are retried with backoff (doubling up to
	// MaxBackoff) for as long as it takes: the spans are safe in the log,
	// and ingest refuses new ones with 503 once the log is full.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// MaxBackoff caps the wait between two attempts of a failing write.
	MaxBackoff time.Duration `yaml:"max_backoff"`
	// DeadLetterDir receives the spans the store refuses for their
	// content (see deadLetter for the format).
	DeadLetterDir string `yaml:"dead_letter_dir"`
	// StallAfter is how long the drain may hold spans without storing any
	// before /readyz reports it stalled.
	StallAfter time.Duration `yaml:"stall_after"`
}

// DefaultConfig returns the WAL defaults.
func DefaultConfig() Config {
	return Config{Config: wal.DefaultConfig(), BatchSpans: 20_000, FlushInterval: 200 * time.Millisecond,
		WriteTimeout: 30 * time.Second, MaxBackoff: 5 * time.Second, DeadLetterDir: "./data/dead-letter", StallAfter: 2 * time.Minute}
}

// Validate reports every setting that cannot work, naming its key.
func (c Config) Validate() error {
	errs := []error{c.Config.Validate()}
	if c.BatchSpans <= 0 {
		errs = append(errs, errors.New("ingest.wal.batch_spans must be > 0"))
	}
	if c.FlushInterval <= 0 {
		errs = append(errs, errors.New("ingest.wal.flush_interval must be > 0"))
	}
	if c.WriteTimeout <= 0 {
		errs = append(errs, errors.New("ingest.wal.write_timeout must be > 0"))
	}
	if c.MaxBackoff < minBackoff {
		errs = append(errs, fmt.Errorf("ingest.wal.max_backoff must be >= %s", minBackoff))
	}
	if c.DeadLetterDir == "" {
		errs = append(errs, errors.New("ingest.wal.dead_letter_dir must not be empty"))
	}
	if c.StallAfter <= 0 {
		errs = append(errs, errors.New("ingest.wal.stall_after must be > 0"))
	}
	return errors.Join(errs...)
}

// minBackoff is the first wait after a failed store write.
const minBackoff = 100 * time.Millisecond

// Settings are what the Durable is given rather than configured with.
type Settings struct {
	Logger *slog.Logger
	Store  SpanStore
	// Sink receives every batch after the store acknowledged it, replays
	// after a restart included. nil: no analysis.
	Sink ingest.Sink
	// Registerer receives the log's metrics; nil keeps them private.
	Registerer prometheus.Registerer
}

// Durable implements ingest.Durability on the write-ahead log.
type Durable struct {
	cfg    Config
	log    *slog.Logger
	wal    *wal.WAL
	id     string // the log's identity, in every dedup token
	writer *writer
	sink   ingest.Sink

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

var (
	_ ingest.Durability = (*Durable)(nil)
	_ ingest.Admitter   = (*Durable)(nil)
)

// Counters count what the drainer did.
type Counters struct {
	Batches      uint64 // store writes that succeeded
	Spans        uint64 // spans stored and handed to the sink
	WriteErrors  uint64 // failed store write attempts
	DeadLetter   uint64 // spans the store refused, moved to the dead letter
	Replayed     uint64 // batches rebuilt from a checkpoint after a restart
	DecodeErrors uint64 // records that could not be decoded (skipped)
}

// Open opens the log in cfg.Dir and starts draining it from the checkpoint,
// so whatever an earlier run acknowledged but did not store goes to the
// store (and the sink) first.
func Open(cfg Config, set Settings) (*Durable, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if set.Store == nil {
		return nil, errors.New("open durable: a store is required")
	}
	if set.Logger == nil {
		set.Logger = slog.New(slog.DiscardHandler)
	}
	if set.Sink == nil {
		set.Sink = ingest.NopSink{}
	}
	dead, err := newDeadLetter(cfg.DeadLetterDir)
	if err != nil {
		return nil, err
	}
	w, err := wal.Open(cfg.Config, set.Logger)
	if err != nil {
		return nil, err
	}
	cp, err := loadCheckpoint(cfg.Dir)
	if err != nil {
		w.Close()
		return nil, err
	}
	id, err := logIdentity(cfg.Dir, cp)
	if err != nil {
		w.Close()
		return nil, err
	}
	if st := w.Stats(); st.CorruptRecords > 0 {
		set.Logger.Warn("wal: damaged records cut at open", "records", st.CorruptRecords, "bytes", st.TruncatedBytes)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &Durable{cfg: cfg, log: set.Logger, wal: w, id: id, sink: set.Sink,
		stop: make(chan struct{}), done: make(chan struct{}), abandon: cancel, acked: cp.Acked}
	d.writer = &writer{
		cfg:      writerConfig{attemptTimeout: cfg.WriteTimeout, minBackoff: minBackoff, maxBackoff: cfg.MaxBackoff},
		store:    set.Store,
		dead:     dead,
		log:      set.Logger,
		throttle: newThrottle(10 * time.Second),
		failed:   func(string) { d.count(func(c *Counters) { c.WriteErrors++ }) },
	}
	if set.Registerer != nil {
		if err := d.register(set.Registerer); err != nil {
			cancel()
			w.Close()
			return nil, err
		}
	}
	go d.drain(ctx, cp)
	return d, nil
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
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "budgetd_wal_full_total", Help: "Appends refused because the log was at ingest.wal.max_bytes (answered 503)."},
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
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "budgetd_store_dead_letter_spans_total", Help: "Spans the store refused for their content, moved to the dead-letter files (ingest.wal.dead_letter_dir)."},
			dstat(func(c Counters) float64 { return float64(c.DeadLetter) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "budgetd_wal_drain_stalled", Help: "1 while the drain has held spans for longer than ingest.wal.stall_after without storing any."},
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

// Admits implements ingest.Admitter. A log record takes about as many
// bytes as the protobuf its spans came in (realistic requests: 1.03 times),
// so a request whose protobuf does not fit in the log's room would, all but
// always, be refused by Commit after decoding.
func (d *Durable) Admits(protoBytes int) bool { return d.wal.Fits(protoBytes) }

var recordBuffers = sync.Pool{New: func() any { return new([]byte) }}

// Commit implements ingest.Durability: it returns once spans are fsynced in
// the log. A full log is ErrOverloaded, which ingest answers with 503.
func (d *Durable) Commit(ctx context.Context, spans []schema.Span) error {
	if len(spans) == 0 {
		return nil
	}
	// Records are about 0.5 KB per span; a pooled buffer spares growing one
	// from nothing for every request. Append is done with it on return.
	buf := recordBuffers.Get().(*[]byte)
	*buf = schema.AppendSpans((*buf)[:0], spans)
	_, err := d.wal.Append(ctx, *buf)
	recordBuffers.Put(buf)
	switch {
	case errors.Is(err, wal.ErrFull):
		return fmt.Errorf("%w: %w", ingest.ErrOverloaded, err)
	case errors.Is(err, wal.ErrClosed):
		return fmt.Errorf("%w: %w", ingest.ErrClosed, err)
	case err != nil:
		return fmt.Errorf("commit to wal: %w", err)
	}
	return nil
}

// Shutdown implements ingest.Durability: it stops taking appends, lets the
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
	if took := time.Since(since); took > d.cfg.StallAfter {
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
