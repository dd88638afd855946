package durable

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/budgetd/budgetd/wal"
)

// The modes of the write path: where a span is durable when its request is
// acknowledged.
const (
	// ModeWAL acknowledges once the spans are fsynced in the write-ahead
	// log; a drainer stores them in batches (Durable). The default.
	ModeWAL = "wal"
	// ModeBatch acknowledges once the store write holding the spans
	// succeeded (Batcher): no log, but a store outage refuses spans at
	// once.
	ModeBatch = "batch"
)

// Config is the `ingest.durability` section: the mode, the store writer
// both modes share, and each mode's own settings side by side.
type Config struct {
	// Mode is ModeWAL or ModeBatch.
	Mode string `yaml:"mode"`
	// WriteTimeout bounds one store write attempt.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// MaxBackoff caps the wait between two attempts of a failing write;
	// waits double from 100 ms up to it.
	MaxBackoff time.Duration `yaml:"max_backoff"`
	// DeadLetterDir receives the spans the store refuses for their
	// content (see deadLetter for the format).
	DeadLetterDir string `yaml:"dead_letter_dir"`
	// Dedup recognises resent spans (see DedupConfig).
	Dedup DedupConfig `yaml:"dedup"`
	// WAL configures ModeWAL.
	WAL WALConfig `yaml:"wal"`
	// Batch configures ModeBatch.
	Batch BatchConfig `yaml:"batch"`
}

// WALConfig is the `ingest.durability.wal` section: the log and its
// drainer. Writes that failed for a reason a retry can cure are retried
// for as long as it takes: the spans are safe in the log, and ingest
// refuses new ones with 503 once the log is full.
type WALConfig struct {
	wal.Config `yaml:",inline"`
	// BatchSpans is the most spans one drain batch carries.
	BatchSpans int `yaml:"batch_spans"`
	// BatchBytes bounds what one drain batch holds decoded while it is
	// written: its log records and the span and attribute structures
	// decoded from them (record.HeldBytes), which for attribute-heavy
	// spans are ten times the records. A batch takes records until it
	// reaches BatchBytes, so it holds up to one record more. The default,
	// 32 MiB, is above 20,000 typical spans (about 25 MiB counted so) and
	// keeps a batch of attribute-heavy ones, with its insert block and
	// their encoding, within the memory the crash tests bound.
	BatchBytes int `yaml:"batch_bytes"`
	// FlushInterval is the longest a record waits for others to share its
	// store write. One second: below the load that fills a batch of
	// BatchSpans sooner, each drained batch costs the store a fixed price
	// (two inserts, the parts they make and the merges of those parts), and
	// at 200 ms a budgetd taking 10,000 spans a second paid it five times
	// a second: one second took 29 % off its CPU a span
	// (docs/performance.md, Round 2's step 55). A span becomes readable
	// up to this much later; the analysis waits for a trace's idle period
	// (analyze.assembly.idle) far longer anyway.
	FlushInterval time.Duration `yaml:"flush_interval"`
	// StallAfter is how long one batch may keep failing before /readyz
	// reports the drain stalled.
	StallAfter time.Duration `yaml:"stall_after"`
}

// BatchConfig is the `ingest.durability.batch` section: how accepted spans
// are grouped into store writes when there is no log.
type BatchConfig struct {
	// MaxSpans is the most spans one store write carries. Requests are
	// never split, so a single request larger than this is written alone.
	MaxSpans int `yaml:"max_spans"`
	// FlushInterval is the shortest time between the starts of two store
	// writes, unless the queue holds MaxSpans. It caps the insert rate
	// (ClickHouse wants few, large inserts): requests arriving meanwhile
	// share the next write. A request arriving after a quiet spell is
	// written at once; under load, each waits up to this long for its
	// acknowledgement. 0 writes whenever the previous write is done.
	FlushInterval time.Duration `yaml:"flush_interval"`
	// QueueSpans bounds the spans waiting for a write (the batch being
	// written is not counted). A request that does not fit is refused with
	// 503 / UNAVAILABLE, so the sender backs off and retries.
	QueueSpans int `yaml:"queue_spans"`
	// RetryTimeout bounds the time a batch is retried after failures a
	// retry can cure; its requests are then refused with 503, and the
	// senders retry them.
	RetryTimeout time.Duration `yaml:"retry_timeout"`
}

// DefaultConfig returns the write path's defaults: the write-ahead log,
// 30 s store writes, backoff up to 5 s.
func DefaultConfig() Config {
	return Config{
		Mode:          ModeWAL,
		WriteTimeout:  30 * time.Second,
		MaxBackoff:    5 * time.Second,
		DeadLetterDir: "./data/dead-letter",
		Dedup:         DedupConfig{Window: 10 * time.Minute, MaxSpans: 8_000_000},
		WAL: WALConfig{Config: wal.DefaultConfig(), BatchSpans: 20_000, BatchBytes: 32 << 20, FlushInterval: time.Second,
			StallAfter: 2 * time.Minute},
		// Batches of up to 8192 spans, at most 20 writes a second, and a
		// queue of 64Ki spans (around 100 MB of typical spans).
		Batch: BatchConfig{MaxSpans: 8192, FlushInterval: 50 * time.Millisecond, QueueSpans: 65536, RetryTimeout: 30 * time.Second},
	}
}

// Validate reports every setting of the configured mode that cannot work,
// naming its key.
func (c Config) Validate() error {
	switch c.Mode {
	case ModeWAL, ModeBatch:
		return c.validate(c.Mode)
	}
	return fmt.Errorf("ingest.durability.mode must be %q or %q, not %q", ModeWAL, ModeBatch, c.Mode)
}

// validate checks the shared settings and those of mode.
func (c Config) validate(mode string) error {
	var errs []error
	if c.WriteTimeout <= 0 {
		errs = append(errs, errors.New("ingest.durability.write_timeout must be > 0"))
	}
	if c.MaxBackoff < minBackoff {
		errs = append(errs, fmt.Errorf("ingest.durability.max_backoff must be >= %s", minBackoff))
	}
	if c.DeadLetterDir == "" {
		errs = append(errs, errors.New("ingest.durability.dead_letter_dir must not be empty"))
	}
	if c.Dedup.Window < 0 {
		errs = append(errs, errors.New("ingest.durability.dedup.window must be >= 0 (0: off)"))
	}
	if c.Dedup.Window > 0 && c.Dedup.MaxSpans <= 0 {
		errs = append(errs, errors.New("ingest.durability.dedup.max_spans must be > 0"))
	}
	switch mode {
	case ModeWAL:
		errs = append(errs, c.WAL.Config.Validate())
		if c.WAL.BatchSpans <= 0 {
			errs = append(errs, errors.New("ingest.durability.wal.batch_spans must be > 0"))
		}
		if c.WAL.BatchBytes <= 0 {
			errs = append(errs, errors.New("ingest.durability.wal.batch_bytes must be > 0"))
		}
		if c.WAL.FlushInterval <= 0 {
			errs = append(errs, errors.New("ingest.durability.wal.flush_interval must be > 0"))
		}
		if c.WAL.StallAfter <= 0 {
			errs = append(errs, errors.New("ingest.durability.wal.stall_after must be > 0"))
		}
	case ModeBatch:
		if c.Batch.MaxSpans <= 0 {
			errs = append(errs, errors.New("ingest.durability.batch.max_spans must be > 0"))
		}
		if c.Batch.FlushInterval < 0 {
			errs = append(errs, errors.New("ingest.durability.batch.flush_interval must be >= 0"))
		}
		if c.Batch.QueueSpans <= 0 {
			errs = append(errs, errors.New("ingest.durability.batch.queue_spans must be > 0"))
		}
		if c.Batch.RetryTimeout < 0 {
			errs = append(errs, errors.New("ingest.durability.batch.retry_timeout must be >= 0"))
		}
	}
	return errors.Join(errs...)
}

// minBackoff is the first wait after a failed store write.
const minBackoff = 100 * time.Millisecond

// Settings are what the write path is given rather than configured with.
type Settings struct {
	// Logger receives lifecycle events and throttled store errors; nil
	// discards them.
	Logger *slog.Logger
	// Store is where spans are written.
	Store SpanStore
	// Sink receives every batch after the store has it (replays after a
	// restart included). nil: no analysis.
	Sink Sink
	// Registerer receives the write path's metrics; nil keeps them
	// private.
	Registerer prometheus.Registerer
}

// withDefaults fills the optional settings.
func (s Settings) withDefaults() (Settings, error) {
	if s.Store == nil {
		return s, errors.New("a store is required")
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	if s.Sink == nil {
		s.Sink = NopSink{}
	}
	if s.Registerer == nil {
		s.Registerer = prometheus.NewRegistry()
	}
	return s, nil
}

// Open starts the write path of cfg.Mode.
func Open(cfg Config, set Settings) (Durability, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Mode == ModeBatch {
		return NewBatcher(cfg, set)
	}
	return OpenLog(cfg, set)
}
